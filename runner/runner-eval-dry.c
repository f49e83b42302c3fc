/* runner-eval-dry.c — the evaluator of a dry run: the configuration is
 * evaluated in virtual time (runner_dry_evaluate: the sim core's engine
 * model, milliseconds), on the same schedule a real study would keep.
 *
 * A trial starts at the virtual clock's time on its GPUs and is evaluated
 * at once (from a deferred step of the loop, so that a pause or stop asked
 * in between is acted on); what it would take on the host — the server's
 * start-up (the sim core's start-up model: weights read, initialisation,
 * graph capture; with the start-up model on, runner_options) and the
 * probe's load points — fixes its end on the virtual clock. It ends only when the runner has nothing else to do (the
 * evaluator's idle: every trial that could start has started, no ask is in
 * flight): then the clock moves to the earliest end among the trials
 * running (the lower trial number first at a tie) and that trial finishes.
 * So trials overlap, wait for GPUs and end in the order they would on the
 * host, and the study's last end is the wall clock it would have taken.
 *
 * The trial is stored as a real one is — host {"dry_run": true}, its GPUs,
 * its load points (the saturated run and the one at the max rate), its
 * start-up time as deploy_seconds, its outcome — with the virtual clock's
 * start and end (the study's start plus virtual µs), and kinds "dry-run",
 * "dry-run-retry-N", "dry-run-confirm-N". A confirmation runs the engine
 * with another jitter seed: a re-probe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "runner-dryrun.h"
#include "runner-internal.h"
#include "time-util.h"

struct dry_trial {
	sd_event_source *step;
	bool evaluated;
	uint64_t end_usec; /* on the virtual clock */
	struct trial_result res;
};

static void dry_result(const struct runner_dry_result *res, struct trial_result *ret)
{
	if (res->infeasible) {
		trial_result_init(ret, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_OOM);
		snprintf(ret->message, sizeof(ret->message), "%s", res->message);
		ret->cause = runner_cause_of_sim(res->cause);
		ret->suggested_len = res->suggested_max_model_len;
	} else if (res->sla_never_met) {
		trial_result_init(ret, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET);
		snprintf(ret->message, sizeof(ret->message), "%s", res->message);
	} else {
		trial_result_init(ret, STORE_TRIAL_DONE, STORE_FAILURE_NONE);
		ret->max_rate = res->max_rate;
		ret->max_goodput = res->tokens_per_sec;
		ret->concurrency = res->concurrency;
		ret->cost = res->cost_per_mtok;
	}
}

/* Evaluates the trial and stores what it measured; < 0 when the study fails. */
static int evaluate(struct runner_trial *t, struct dry_trial *d)
{
	struct runner *r = t->runner;
	struct runner_dry_result *res;
	struct error err = { 0 };
	unsigned variant = 0;
	int k;

	res = malloc(sizeof(*res));
	if (!res) {
		runner_fail(r, "out of memory");
		return -ENOMEM;
	}
	if (t->proposal.ask == OPT_ASK_CONFIRM)
		variant = 1000 + t->seq;
	k = runner_dry_evaluate_knobs(r->study, t->knobs, variant, res, &err);
	if (k < 0) {
		free(res);
		runner_fail(r, error_str(&err, k));
		return k;
	}
	if (res->have_saturated)
		k = runner_trial_load_point(t, "saturation", &res->saturated, NULL, false);
	if (k >= 0 && res->have_point)
		k = runner_trial_load_point(t, r->study->scenario == OPT_SCENARIO_OFFLINE ? "saturation" : "search",
					    &res->point, NULL, true);
	if (k >= 0) {
		double startup = r->opts.startup_model > 0 ? res->startup_s : 0;

		dry_result(res, &d->res);
		if (!res->infeasible && r->opts.startup_model > 0)
			t->deploy_seconds = startup;
		d->end_usec = t->vstart_usec + sec_to_usec(startup + res->probe_s);
		d->evaluated = true;
	}
	free(res);
	return k;
}

static int on_step(sd_event_source *s, void *userdata)
{
	struct runner_trial *t = userdata;
	struct dry_trial *d = t->eval;
	struct runner *r = t->runner;
	struct error err = { 0 };
	int k;

	d->step = sd_event_source_disable_unref(d->step);
	if (runner_failing(r) || r->request != RUNNER_REQUEST_NONE)
		return 0;
	if (evaluate(t, d) < 0)
		return 0;
	k = store_trial_set_state(r->store, t->id, STORE_TRIAL_PROBING, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return 0;
	}
	runner_trial_set_phase(t, RUNNER_PROBING);
	/* the runner moves the clock once nothing else is to be done */
	runner_schedule(r, RUNNER_ACTION_PLAN);
	return 0;
}

static void dry_start(struct runner_trial *t)
{
	struct runner *r = t->runner;
	struct dry_trial *d;
	struct error err = { 0 };
	int k;

	d = calloc(1, sizeof(*d));
	if (!d) {
		runner_fail(r, "out of memory");
		return;
	}
	t->eval = d;
	k = store_trial_set_host(r->store, t->id, "{\"dry_run\":true}", &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	runner_trial_set_phase(t, RUNNER_DEPLOYING);
	k = sd_event_add_defer(r->event, &d->step, on_step, t);
	if (k < 0) {
		runner_fail(r, "runner: cannot add an event source");
		return;
	}
	(void)sd_event_source_set_description(d->step, "runner-dry-run");
}

/* Nothing else to do: the clock moves to the earliest end, and that trial ends. */
static void dry_idle(struct runner *r)
{
	struct runner_trial *next = NULL;
	struct dry_trial *nd = NULL;

	for (size_t i = 0; i < r->n_trials; i++) {
		struct runner_trial *t = r->trials[i];
		struct dry_trial *d = t->eval;

		if (!t->running || !t->open)
			continue;
		if (!d || !d->evaluated)
			return; /* its step comes first */
		if (!next || d->end_usec < nd->end_usec) {
			next = t;
			nd = d;
		}
	}
	if (!next)
		return;
	r->vclock_usec = MAX(r->vclock_usec, nd->end_usec);
	next->finished_at_usec = r->study_start_usec + nd->end_usec;
	runner_trial_finish(next, &nd->res);
}

static void dry_abort(struct runner_trial *t)
{
	struct dry_trial *d = t->eval;

	if (d)
		d->step = sd_event_source_disable_unref(d->step);
}

static enum runner_server dry_server(const struct runner_trial *t)
{
	return RUNNER_SERVER_NONE;
}

static int dry_stop_server(struct runner_trial *t)
{
	return -ESRCH;
}

static void dry_release(struct runner_trial *t)
{
	dry_abort(t);
	free(t->eval);
	t->eval = NULL;
}

const struct runner_evaluator runner_evaluator_dry = {
	.kind = "dry-run",
	.confirm_prefix = "dry-run-",
	.start = dry_start,
	.abort = dry_abort,
	.server = dry_server,
	.stop_server = dry_stop_server,
	.release = dry_release,
	.idle = dry_idle,
};
