/* runner-trial.c — the trial loop: the plan step asks the planner for what
 * to measure next; each proposal becomes a trial, recorded in the store
 * before anything runs, and goes to the evaluator; the evaluator reports its
 * load points and its outcome through the trial; the outcome is committed
 * and told to the history, the trial's server is torn down, and once it is
 * gone the runner goes on (runner-host.c: GPU memory back to idle, then the
 * next plan step, or a pending pause/stop/cancel).
 *
 * Planners and evaluators are reached only through their interfaces
 * (runner-planner.h, runner-evaluator.h). The runner holds the trials in
 * flight in r->trials; today it asks for one configuration at a time, so
 * there is at most one. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runner-internal.h"

/* ---- trials ---- */

static unsigned confirmations_of(const struct runner *r, const struct opt_config *c)
{
	unsigned n = 0;

	for (size_t i = 0; i < r->history.n; i++)
		if (r->history.trials[i].confirm && memcmp(&r->history.trials[i].config, c, sizeof(*c)) == 0)
			n++;
	return n;
}

static void name_kind(const struct runner *r, const struct runner_proposal *p, char *buf, size_t size)
{
	const struct runner_evaluator *ev = r->evaluator;

	if (p->ask == OPT_ASK_CONFIRM)
		snprintf(buf, size, "%sconfirm-%u", ev->confirm_prefix, confirmations_of(r, &p->config) + 1);
	else if (p->attempt > 1)
		snprintf(buf, size, "%s-retry-%u", ev->kind, p->attempt);
	else
		snprintf(buf, size, "%s", ev->kind);
}

static struct runner_trial *trial_free(struct runner_trial *t)
{
	if (!t)
		return NULL;
	if (t->eval)
		t->runner->evaluator->release(t);
	cJSON_Delete(t->knobs);
	free(t->log_path);
	free(t);
	return NULL;
}

static void trial_remove(struct runner *r, struct runner_trial *t)
{
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i] == t) {
			memmove(&r->trials[i], &r->trials[i + 1], (r->n_trials - i - 1) * sizeof(r->trials[0]));
			r->n_trials--;
			break;
		}
	trial_free(t);
}

void runner_release_trials(struct runner *r)
{
	runner_planner_cancel(r->planner);
	r->asking = false;
	r->plan_waits_host = false;
	while (r->n_trials > 0)
		trial_remove(r, r->trials[r->n_trials - 1]);
}

/* Records a trial in the store (state deploying) for the proposal. */
static int trial_record(struct runner *r, struct runner_trial *t, struct error *err)
{
	_cleanup_(cjson_freep) char *knobs_json = NULL;
	struct store_trial row = { 0 };
	char key[OPT_KEY_MAX];
	int k;

	k = opt_config_to_json(r->study->space, &t->proposal.config, &t->knobs);
	if (k >= 0)
		k = opt_config_key(r->study->space, &t->proposal.config, key, sizeof(key));
	if (k >= 0 && !(knobs_json = cJSON_PrintUnformatted(t->knobs)))
		k = -ENOMEM;
	if (k < 0)
		return error_set(err, k, "out of memory describing a configuration");
	k = store_trial_insert(r->store, r->study_id, t->kind, knobs_json, key, &t->id, err);
	if (k >= 0)
		k = store_trial_get(r->store, t->id, &row, err);
	if (k < 0)
		return k;
	t->seq = row.seq;
	store_trial_done(&row);
	/* committed before anything runs: a crash from here on leaves it to be redone */
	k = store_trial_set_state(r->store, t->id, STORE_TRIAL_DEPLOYING, err);
	if (k >= 0 && isfinite(t->proposal.predicted_cost))
		k = store_trial_set_predicted_cost(r->store, t->id, t->proposal.predicted_cost, err);
	return k;
}

/* A proposal becomes a trial in flight and goes to the evaluator. */
static int trial_begin(struct runner *r, const struct runner_proposal *p)
{
	struct runner_trial *t;
	struct error err = { 0 };
	int k;

	if (r->n_trials >= RUNNER_ASK_MAX) {
		runner_fail(r, "too many trials in flight");
		return -EBUSY;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		runner_fail(r, "out of memory");
		return -ENOMEM;
	}
	t->runner = r;
	t->proposal = *p;
	t->deploy_seconds = NAN;
	name_kind(r, p, t->kind, sizeof(t->kind));
	k = trial_record(r, t, &err);
	if (k < 0) {
		trial_free(t);
		runner_fail(r, error_str(&err, k));
		return k;
	}
	r->trials[r->n_trials++] = t;
	t->open = true;
	runner_knobs_text(r->study->space, &p->config, t->knobs_text, sizeof(t->knobs_text));
	r->status.trial = t->seq;
	r->status.trial_id = t->id;
	r->status.confirming = p->ask == OPT_ASK_CONFIRM;
	r->status.load_points = 0;
	r->status.current_rate = 0;
	snprintf(r->status.knobs, sizeof(r->status.knobs), "%s", t->knobs_text);
	r->evaluator->start(t);
	return 0;
}

/* ---- planning ---- */

static void take_answer(struct runner *r, const struct runner_answer *a)
{
	runner_planner_describe(r->planner, r->status.twin, sizeof(r->status.twin));
	if (a->n == 0) {
		snprintf(r->message, sizeof(r->message), "%s",
			 a->message[0] ? a->message : opt_done_reason_to_string(a->reason));
		runner_finish(r, RUNNER_END_DONE);
		return;
	}
	for (size_t i = 0; i < a->n; i++)
		if (trial_begin(r, &a->proposals[i]) < 0)
			return;
}

void runner_on_answer(struct runner_planner *p, int k, const struct runner_answer *a, const char *message,
		      void *userdata)
{
	struct runner *r = userdata;

	r->asking = false;
	if (k < 0) {
		runner_fail(r, message ? message : strerror(-k));
		return;
	}
	take_answer(r, a);
}

void runner_plan(struct runner *r)
{
	struct runner_answer answer;
	struct runner_ask ask;
	struct error err = { 0 };
	int k;

	if (runner_settle_request(r))
		return;
	if (runner_wall_budget_spent(r, r->message, sizeof(r->message))) {
		runner_finish(r, RUNNER_END_DONE);
		return;
	}
	runner_set_phase(r, RUNNER_PLANNING);
	r->plan_waits_host = false;
	ask = (struct runner_ask){
		.history = &r->history,
		.trial_ids = r->trial_ids,
		.k = 1,
		.host_json = r->host ? deploy_host_facts(r->host) : NULL,
		.host_pending = r->host && deploy_host_facts_pending(r->host),
	};
	k = runner_planner_ask(r->planner, &ask, &answer, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	switch (k) {
	case RUNNER_ASK_WAIT_HOST:
		/* runner-host.c plans again once the facts are known */
		r->plan_waits_host = true;
		return;
	case RUNNER_ASK_PENDING:
		r->asking = true;
		return;
	default:
		take_answer(r, &answer);
	}
}

/* ---- what evaluators report ---- */

void runner_trial_set_phase(struct runner_trial *t, enum runner_phase p)
{
	t->phase = p;
	runner_set_phase(t->runner, p);
}

void runner_trial_set_rate(struct runner_trial *t, double rate)
{
	t->runner->status.current_rate = rate;
}

int runner_trial_load_point(struct runner_trial *t, const char *phase, const struct probe_result *res,
			    const struct store_gpu_figures *gpu, bool announce)
{
	struct runner *r = t->runner;
	struct error err = { 0 };
	int k;

	k = store_load_point_insert_gpu(r->store, t->id, t->n_points + 1, phase, res, gpu, NULL, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return k;
	}
	t->n_points++;
	r->status.load_points = t->n_points;
	if (announce)
		runner_emit(r, &(struct runner_event){ .kind = RUNNER_EVENT_LOAD_POINT, .load_point = res });
	return 0;
}

static enum opt_outcome outcome_for_opt(const struct trial_result *t)
{
	if (t->state == STORE_TRIAL_DONE)
		return OPT_OUTCOME_MEASURED;
	if (t->state == STORE_TRIAL_FAILED)
		return OPT_OUTCOME_FAILED;
	return t->failure == STORE_FAILURE_SLA_NEVER_MET ? OPT_OUTCOME_SLA_NEVER_MET : OPT_OUTCOME_INFEASIBLE;
}

/* Commits the outcome; the server, when still up, stays findable until it is gone. */
static int commit_outcome(struct runner_trial *t, const struct trial_result *res, struct error *err)
{
	struct runner *r = t->runner;
	struct store_trial_outcome o = {
		.state = res->state,
		.failure = res->failure,
		.failure_message = res->message[0] ? res->message : NULL,
		.deploy_seconds = t->deploy_seconds,
		.max_rate = res->max_rate,
		.max_goodput = res->max_goodput,
		.concurrency = res->concurrency,
		.cost_per_mtok = res->cost,
	};
	int k;

	k = store_trial_finish(r->store, t->id, &o, err);
	if (k >= 0 && r->evaluator->record_server && r->evaluator->server(t) == RUNNER_SERVER_RUNNING)
		k = r->evaluator->record_server(t, err);
	return k;
}

void runner_trial_finish(struct runner_trial *t, const struct trial_result *res)
{
	struct runner *r = t->runner;
	const struct runner_evaluator *ev = r->evaluator;
	struct opt_trial ot = { .config = t->proposal.config,
				.outcome = outcome_for_opt(res),
				.cost = res->cost,
				.confirm = t->proposal.ask == OPT_ASK_CONFIRM };
	struct error err = { 0 };
	int k;

	ev->abort(t);
	k = commit_outcome(t, res, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	t->open = false;
	if (isfinite(t->deploy_seconds) && t->deploy_seconds > 0) {
		r->deploy_sum_s += t->deploy_seconds;
		r->deploy_n++;
	}
	if (ot.outcome != OPT_OUTCOME_MEASURED)
		ot.cost = 0;
	k = runner_history_push(r, &ot, t->id);
	if (k < 0) {
		char msg[160];

		if (k == -EINVAL)
			snprintf(msg, sizeof(msg),
				 "trial %u: its cost %g $/Mtok cannot rank it (a finite number above 0 is needed)",
				 t->seq, res->cost);
		else
			snprintf(msg, sizeof(msg), "trial %u: adding it to the history: %s", t->seq, strerror(-k));
		runner_fail(r, msg);
		return;
	}
	k = runner_update_best(r, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	if (res->state == STORE_TRIAL_DONE)
		log_debug("trial %u: $%.4f/Mtok", t->seq, res->cost);
	/* teardown from here on: a pause/stop asked in the callbacks below
	 * only changes the phase and is acted on once the server is gone */
	runner_trial_set_phase(t, RUNNER_TEARDOWN);
	runner_emit(r, &(struct runner_event){
			       .kind = RUNNER_EVENT_TRIAL_FINISHED,
			       .trial_id = t->id,
			       .trial_state = res->state,
			       .failure = res->failure,
			       .failure_message = res->message[0] ? res->message : NULL,
			       .cost_per_mtok = res->cost,
			       .max_goodput = res->max_goodput,
			       .deploy_seconds = t->deploy_seconds,
		       });

	switch (ev->server(t)) {
	case RUNNER_SERVER_RUNNING:
		if (ev->stop_server(t) >= 0)
			return; /* runner_trial_gone follows */
		break;
	case RUNNER_SERVER_STOPPING:
		return;
	case RUNNER_SERVER_NONE:
		break;
	}
	runner_trial_gone(t);
}

void runner_trial_gone(struct runner_trial *t)
{
	struct runner *r = t->runner;
	struct error err = { 0 };
	int k;

	r->evaluator->release(t);
	if (t->id > 0 && t->log_path) {
		k = store_trial_set_server(r->store, t->id, 0, NULL, t->log_path, &err);
		if (k < 0) {
			runner_fail(r, error_str(&err, k));
			return;
		}
	}
	trial_remove(r, t);
	r->status.trial_id = 0;
	if (r->n_trials == 0)
		/* the GPU's memory back to idle first (where NVML tells), then plan */
		runner_after_server_gone(r);
}

/* ---- halting (pause, stop, cancel) ---- */

static int mark_interrupted(struct runner_trial *t)
{
	struct error err = { 0 };
	int k;

	if (!t->open)
		return 0;
	t->open = false;
	k = store_trial_set_state(t->runner->store, t->id, STORE_TRIAL_INTERRUPTED, &err);
	if (k < 0)
		runner_fail(t->runner, error_str(&err, k));
	return k;
}

void runner_halt(struct runner *r)
{
	enum runner_phase halting = r->request == RUNNER_REQUEST_PAUSE ? RUNNER_PAUSING : RUNNER_STOPPING;
	const struct runner_evaluator *ev = r->evaluator;
	struct runner_trial *gone[RUNNER_ASK_MAX];
	size_t n_gone = 0;

	switch (r->status.phase) {
	case RUNNER_FINISHED:
	case RUNNER_IDLE:
		return;
	case RUNNER_TEARDOWN:
	case RUNNER_PAUSING:
	case RUNNER_STOPPING:
		/* the server is going already: runner_trial_gone settles the
		 * request; a wait for GPU memory after it does not hold it up */
		runner_set_phase(r, halting);
		if (runner_host_stop_waiting(r))
			runner_after_server_gone(r);
		return;
	default:
		break;
	}
	/* nothing waits for a step or an answer any longer */
	r->action = RUNNER_ACTION_NONE;
	if (r->step_source)
		(void)sd_event_source_set_enabled(r->step_source, SD_EVENT_OFF);
	runner_planner_cancel(r->planner);
	r->asking = false;
	r->plan_waits_host = false;
	for (size_t i = 0; i < r->n_trials; i++) {
		struct runner_trial *t = r->trials[i];

		ev->abort(t);
		if (mark_interrupted(t) < 0)
			return;
		switch (ev->server(t)) {
		case RUNNER_SERVER_RUNNING:
			runner_set_phase(r, halting);
			if (ev->stop_server(t) >= 0)
				continue;
			break;
		case RUNNER_SERVER_STOPPING:
			runner_set_phase(r, halting);
			continue;
		case RUNNER_SERVER_NONE:
			break;
		}
		gone[n_gone++] = t;
	}
	for (size_t i = 0; i < n_gone; i++)
		runner_trial_gone(gone[i]);
	if (n_gone > 0 || r->n_trials > 0)
		return;
	/* nothing ran (planning, paused) */
	if (r->status.phase == RUNNER_PAUSED)
		runner_settle_request(r);
	else
		runner_after_server_gone(r);
}
