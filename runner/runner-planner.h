/* runner-planner.h — what the runner asks for the next configurations: a
 * planner proposes configurations to measure (or says the study is done)
 * and is told results through the history it is asked with.
 *
 * Two planners: the NLopt replay search (runner-plan-search.c, opt_next)
 * and the digital twin (runner-plan-twin.c, twin_next in a forked child).
 * Both are replays: an answer depends only on the study, the history and
 * (for the twin) a stored calibration, so a restarted runner asks the same
 * questions and gets the same answers.
 *
 * An ask names how many configurations are wanted (k) and which ones are in
 * flight (pending, not yet in the history): a runner with free GPU sets
 * asks for several at once, and a planner answers the pending ones with
 * stand-in values of its own choosing (the search: a constant liar; the
 * twin: its prediction once calibrated) so that an answer depends only on
 * the history and the set of trials in flight: a study resumed after a
 * crash, with the same trials in flight, asks the same candidates.
 *
 * An answer comes at once (runner_planner_ask returns RUNNER_ASK_ANSWERED
 * and fills *ret) or later from the loop (RUNNER_ASK_PENDING: the planner's
 * callback gets it, or the error that ended the ask). A planner that needs
 * the host facts before its first answer says so (RUNNER_ASK_WAIT_HOST):
 * the runner asks again once they are known. Internal to runner/. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "engine-profile.h"
#include "error.h"
#include "opt.h"
#include "store.h"
#include "study.h"

/* Trials one ask may propose (and the runner may hold in flight). */
#define RUNNER_ASK_MAX 16

/* One configuration to measure. */
struct runner_proposal {
	enum opt_ask ask; /* OPT_ASK_TRIAL or OPT_ASK_CONFIRM (a re-probe) */
	struct opt_config config;
	unsigned attempt;      /* 1, or 2.. when a FAILED configuration is deployed again */
	double predicted_cost; /* what the planner expects it to cost ($/Mtok); NAN: no prediction */
	bool alone;            /* a confirmation of the answer: measured with nothing else on the host */
	bool baseline;         /* the engine's defaults (runner-baseline.c): config only when on the grid */
	bool sweep;            /* the load-step sweep of the answer (runner-sweep.c): load points, no cost */
	double sweep_rate;     /* ... scaled to this max rate (req/s) */
};

/* What the planner is asked with. */
struct runner_ask {
	/* The study's finished trials in trial order (the replay's history);
	 * trial_ids[i] is the store id of history->trials[i]. */
	const struct opt_history *history;
	const int64_t *trial_ids;
	/* The trials in flight (asked for, no outcome yet), in trial order. */
	const struct runner_proposal *pending;
	size_t n_pending;
	size_t k;              /* configurations wanted, 1 ≤ k ≤ RUNNER_ASK_MAX */
	const char *host_json; /* the host facts; NULL while unknown (always in a dry run) */
	bool host_pending;     /* the host facts are being gathered (an ask may wait for them) */
};

struct runner_answer {
	size_t n; /* proposals, 0 ≤ n ≤ k; 0 means done (once the trials in flight are told, it may not be) */
	struct runner_proposal proposals[RUNNER_ASK_MAX];
	/* done: why */
	enum opt_done_reason reason;
	char message[256]; /* for people; "" = the reason's name */
	/* the search itself has ended (converged or exhausted, nothing in
	 * flight): what follows is the final confirmations, or done. A runner
	 * may widen the space here (search.extend_edges) and ask again. */
	bool search_over;
};

enum runner_ask_result {
	RUNNER_ASK_ANSWERED,  /* *ret holds the answer */
	RUNNER_ASK_PENDING,   /* the callback brings it */
	RUNNER_ASK_WAIT_HOST, /* ask again once the host facts are known */
};

struct runner_planner;

/* A later answer (r ≥ 0, a set) or the error that ended the ask (r < 0,
 * message set). The planner may be freed inside. */
typedef void (*runner_answer_fn)(struct runner_planner *p, int r, const struct runner_answer *a, const char *message,
				 void *userdata);

struct runner_planner_ops {
	/* Returns an enum runner_ask_result, or -errno with err set. At most
	 * one ask is in flight. */
	int (*ask)(struct runner_planner *p, const struct runner_ask *a, struct runner_answer *ret, struct error *err);
	/* Drops the ask in flight (no callback follows). */
	void (*cancel)(struct runner_planner *p);
	/* Its state for the status line ("twin refine, warm, fit error 3.1%"); "" when it has none. */
	void (*describe)(const struct runner_planner *p, char *buf, size_t size);
	void (*free)(struct runner_planner *p);
	/* What the planner's model predicts config to cost with knob at value,
	 * beyond its range, at the best value of the other batch knob ($/Mtok;
	 * INFINITY: it would not start or meet the SLA); NULL: the planner has
	 * no model (the edge phase then reads the SLA's evidence alone). A rate
	 * search in virtual time per value of the other batch knob: tens to a
	 * few hundred milliseconds, once at the end of a search phase. */
	int (*beyond)(struct runner_planner *p, const struct opt_config *config, const char *knob, double value,
		      double *ret_cost, struct error *err);
};

/* The part every planner starts with. */
struct runner_planner {
	const struct runner_planner_ops *ops;
	runner_answer_fn cb;
	void *userdata;
};

/* What a planner may read (all borrowed: they outlive the planner). */
struct runner_planner_env {
	sd_event *event;
	struct store *store;
	int64_t study_id;
	const char *study_name;
	const struct study *study;
	const struct engine_profile *profile;
	const struct opt_settings *settings; /* the search's: seed, budget, confirmations */
	bool dry_run;
};

/* The NLopt replay search: opt_next, answered at once ("search.strategy":
 * "plain"; the default where the engine model cannot describe the study). */
const struct runner_planner_ops *runner_planner_search_ops(void);
int runner_planner_search_new(const struct runner_planner_env *env, runner_answer_fn cb, void *userdata,
			      struct runner_planner **ret, struct error *err);
/* The digital twin ("search.strategy": "twin"): twin_next in a forked child,
 * warm-started from the calibration stored for this engine, GPU, driver and
 * model (the first ask waits for the host facts), its calibration stored
 * as it learns (after each answer resting on new trials), so a study that
 * ends before the twin is done keeps it too. Errors name the spec key the twin cannot use. */
int runner_planner_twin_new(const struct runner_planner_env *env, runner_answer_fn cb, void *userdata,
			    struct runner_planner **ret, struct error *err);

/* The twin's view of a study (model, GPU, price, scenario, workload, SLA,
 * the probe's tolerance); engine "trtllm" takes that base profile. A
 * prediction simulates the probe's own sample of requests, up to
 * RUNNER_TWIN_PROMPTS_MAX. */
#define RUNNER_TWIN_PROMPTS_MAX 500
/* The rate-search tolerance of the model search's predictions, at most:
 * finer than the probe's default (5 %), so that a prediction is the model's
 * max rate and not where its bisection happened to land. */
#define RUNNER_TWIN_PREDICT_TOL 0.02
struct twin_setup;
int runner_twin_setup(const struct study *s, const char *engine, struct twin_setup *ret, struct error *err);

/* The model search (twin_search_ask in a forked child, twin-search.c):
 * the study's default. Errors as runner_planner_twin_new: a study the
 * engine model cannot describe (no model or GPU preset) falls back to the
 * NLopt search, which the caller decides. */
int runner_planner_model_new(const struct runner_planner_env *env, runner_answer_fn cb, void *userdata,
			     struct runner_planner **ret, struct error *err);

int runner_planner_ask(struct runner_planner *p, const struct runner_ask *a, struct runner_answer *ret,
		       struct error *err);
void runner_planner_cancel(struct runner_planner *p);
void runner_planner_describe(const struct runner_planner *p, char *buf, size_t size);
struct runner_planner *runner_planner_free(struct runner_planner *p);
