/* runner-evaluator.h — what turns a configuration into a measured trial.
 *
 * Two evaluators: deploy + quality check + probe on a real server
 * (runner-eval-deploy.c, with runner-quality.c), and the dry run in virtual
 * time (runner-eval-dry.c, over runner-dryrun.c). The runner records the
 * trial (runner_trial_begin) and hands it to the evaluator; the evaluator
 * reports from the loop, through the trial:
 *
 *   runner_trial_set_phase(t, DEPLOYING | QUALITY_CHECK | PROBING)
 *   runner_trial_load_point(t, ...)     each load point as it ends (stored, an event)
 *   runner_trial_finish(t, &result)     the outcome: stored, told to the planner;
 *                                       the runner then stops the server (stop_server)
 *   runner_trial_gone(t)                the server is gone (after stop_server, or it died)
 *
 * A configuration that cannot be measured (out of memory, a crash, the SLA
 * never met, a failed quality check) is an outcome; what the study cannot go
 * on after (a store error) goes to runner_fail. Each trial's state of its
 * evaluator hangs off the trial (t->eval), so several trials may be in
 * flight at once. Internal to runner/. */
#pragma once

#include <stdbool.h>

#include "error.h"

struct runner;
struct runner_trial;

enum runner_server {
	RUNNER_SERVER_NONE,     /* no server (any longer) */
	RUNNER_SERVER_RUNNING,  /* starting or ready */
	RUNNER_SERVER_STOPPING, /* being torn down: runner_trial_gone follows */
};

struct runner_evaluator {
	/* The trials' kinds: KIND, KIND-retry-N for a failed configuration
	 * deployed again, PREFIXconfirm-N for re-probes. */
	const char *kind;
	const char *confirm_prefix;
	/* Begins measuring t (stored, state deploying). */
	void (*start)(struct runner_trial *t);
	/* Stops measuring (probe, quality check, a pending step); a server stays. */
	void (*abort)(struct runner_trial *t);
	/* The state of the trial's server. */
	enum runner_server (*server)(const struct runner_trial *t);
	/* Begins the teardown of a RUNNING server; ≥ 0: runner_trial_gone follows. */
	int (*stop_server)(struct runner_trial *t);
	/* Frees t->eval (a server still up is killed). */
	void (*release)(struct runner_trial *t);
	/* Why a queued trial's job waits, as the scheduler says ("" when it
	 * does not; NULL: there are no queues). */
	const char *(*pending_reason)(const struct runner_trial *t);
	/* The runner only waits for its trials (nothing to start, nothing to
	 * ask): a dry run moves its virtual clock to the next trial's end.
	 * NULL: real trials end when they end. */
	void (*idle)(struct runner *r);
	/* Work of the evaluator's own is queued or running whose results decide
	 * what starts next (a dry run's evaluations, in child processes): the
	 * runner does not plan until it is done, and the evaluator plans again
	 * then. NULL: never. */
	bool (*busy)(const struct runner *r);
};

extern const struct runner_evaluator runner_evaluator_deploy;
extern const struct runner_evaluator runner_evaluator_dry;
