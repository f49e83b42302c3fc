/* runner-trial.c — the trials: each proposal of the planner becomes a trial,
 * recorded in the store (state pending) before anything runs, waiting for
 * its GPUs (runner-fill.c starts it); the evaluator measures it and reports
 * its load points and its outcome through it; the outcome is committed and
 * told to the history, the trial's server is torn down, and once it is gone
 * its GPUs are free and the runner goes on (runner-host.c: with nothing
 * else running, GPU memory back to idle first).
 *
 * Several trials may be in flight, each on its own GPUs, with its own port,
 * log and probe: r->trials holds them in trial order, waiting or running.
 * The history is kept in trial order too, whatever order the trials end
 * in, so a runner restarted from the store sees the same history.
 *
 * Planners and evaluators are reached only through their interfaces
 * (runner-planner.h, runner-evaluator.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runner-internal.h"
#include "time-util.h"

/* ---- trials ---- */

/* Re-probes of c told and in flight. */
static unsigned confirmations_of(const struct runner *r, const struct opt_config *c)
{
	unsigned n = 0;

	for (size_t i = 0; i < r->history.n; i++)
		if (r->history.trials[i].confirm && memcmp(&r->history.trials[i].config, c, sizeof(*c)) == 0)
			n++;
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i]->proposal.ask == OPT_ASK_CONFIRM &&
		    memcmp(&r->trials[i]->proposal.config, c, sizeof(*c)) == 0)
			n++;
	return n;
}

/* "confirm-N" for confirmations of the answer, "search-confirm-N" for the
 * search's re-probes (both read as re-probes), "KIND-retry-N", "KIND". */
static void name_kind(const struct runner *r, const struct runner_proposal *p, char *buf, size_t size)
{
	const struct runner_evaluator *ev = r->evaluator;

	if (p->sweep)
		snprintf(buf, size, "%ssweep", ev->confirm_prefix);
	else if (p->baseline)
		snprintf(buf, size, "%sbaseline", ev->confirm_prefix);
	else if (p->ask == OPT_ASK_CONFIRM)
		snprintf(buf, size, "%s%sconfirm-%u", ev->confirm_prefix, p->alone ? "" : "search-",
			 confirmations_of(r, &p->config) + 1);
	else if (p->attempt > 1)
		snprintf(buf, size, "%s-retry-%u", ev->kind, p->attempt);
	else
		snprintf(buf, size, "%s", ev->kind);
}

/* The proposal a recorded trial was made for. */
static int proposal_of_row(const struct runner *r, const struct store_trial *row, struct runner_proposal *ret,
			   struct error *err)
{
	struct runner_proposal p = { .attempt = 1, .predicted_cost = row->predicted_cost };
	const char *retry = row->kind ? strstr(row->kind, "-retry-") : NULL;
	int k;

	if (runner_kind_is_sweep(row->kind))
		return runner_sweep_proposal((struct runner *)r, row->canonical_key, ret, err);
	if (runner_kind_is_baseline(row->kind)) {
		p.ask = OPT_ASK_TRIAL;
		p.baseline = true;
		p.config = r->baseline.config;
		*ret = p;
		return 0;
	}
	k = opt_config_from_key(r->study->space, row->canonical_key, &p.config, err);
	if (k < 0)
		return error_prefix(err, k, "trial %u", row->seq);
	if (runner_kind_is_confirm(row->kind)) {
		p.ask = OPT_ASK_CONFIRM;
		p.alone = runner_kind_is_alone(row->kind);
	} else
		p.ask = OPT_ASK_TRIAL;
	if (retry)
		p.attempt = (unsigned)strtoul(retry + 7, NULL, 10);
	if (p.attempt < 1)
		p.attempt = 1;
	*ret = p;
	return 0;
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

void runner_trial_remove(struct runner *r, struct runner_trial *t)
{
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i] == t) {
			memmove(&r->trials[i], &r->trials[i + 1], (r->n_trials - i - 1) * sizeof(r->trials[0]));
			r->n_trials--;
			break;
		}
	if (t->running)
		r->gpus_busy &= ~t->gpus;
	if (r->sampling == t) {
		struct store_gpu_figures ignored;

		runner_gpu_point_stop(t, &ignored);
	}
	trial_free(t);
	runner_status_count(r);
}

void runner_release_trials(struct runner *r)
{
	runner_planner_cancel(r->planner);
	r->asking = false;
	r->plan_waits_host = false;
	r->retry_timer = sd_event_source_disable_unref(r->retry_timer);
	while (r->n_trials > 0)
		runner_trial_remove(r, r->trials[r->n_trials - 1]);
}

/* A waiting trial for a proposal, its row in the store (inserted when
 * new). Not yet on the list. */
static int trial_new(struct runner *r, const struct runner_proposal *p, struct runner_trial **ret, struct error *err)
{
	_cleanup_(cjson_freep) char *knobs_json = NULL;
	struct store_trial row = { 0 };
	struct runner_trial *t;
	char key[OPT_KEY_MAX];
	int k;

	t = calloc(1, sizeof(*t));
	if (!t)
		return error_set(err, -ENOMEM, "out of memory");
	t->runner = r;
	t->proposal = *p;
	t->deploy_seconds = NAN;
	t->pending_seconds = NAN;
	t->phase = RUNNER_WAITING;
	t->tp = p->baseline ? r->baseline.tp : runner_config_gpus(r, &p->config);
	name_kind(r, p, t->kind, sizeof(t->kind));
	if (p->baseline) {
		/* the engine's defaults: knob values that need not lie on the grid */
		snprintf(t->knobs_text, sizeof(t->knobs_text), "baseline %.200s", r->baseline.text);
		t->knobs = r->baseline.knobs ? cJSON_Duplicate(r->baseline.knobs, true) : NULL;
		k = t->knobs ? 0 : -ENOMEM;
		snprintf(key, sizeof(key), "%s", r->baseline.key);
	} else {
		study_knobs_text(r->study->space, &p->config, false, t->knobs_text, sizeof(t->knobs_text));
		k = opt_config_to_json(r->study->space, &p->config, &t->knobs);
		if (k >= 0)
			k = opt_config_key(r->study->space, &p->config, key, sizeof(key));
	}
	if (k >= 0 && !(knobs_json = cJSON_PrintUnformatted(t->knobs)))
		k = -ENOMEM;
	if (k < 0) {
		trial_free(t);
		return error_set(err, k, "out of memory describing a configuration");
	}
	k = store_trial_insert(r->store, r->study_id, t->kind, knobs_json, key, &t->id, err);
	if (k >= 0)
		k = store_trial_get(r->store, t->id, &row, err);
	if (k >= 0 && isfinite(p->predicted_cost))
		k = store_trial_set_predicted_cost(r->store, t->id, p->predicted_cost, err);
	if (k < 0) {
		trial_free(t);
		return k;
	}
	t->seq = row.seq;
	t->gpus_before = row.gpus ? runner_slots_parse(r, row.gpus) : 0;
	/* a trial that started with the study (at virtual 0) has a start too */
	if (r->opts.dry_run && row.started_usec > 0 && row.started_usec >= r->study_start_usec) {
		t->vstart_before_usec = row.started_usec - r->study_start_usec;
		t->vstart_known = true;
	}
	store_trial_done(&row);
	*ret = t;
	return 0;
}

/* Onto the list, in trial order. */
static int trial_enqueue(struct runner *r, struct runner_trial *t, struct error *err)
{
	size_t i = r->n_trials;

	if (r->n_trials >= RUNNER_ASK_MAX)
		return error_set(err, -EBUSY, "more than %d trials in flight", RUNNER_ASK_MAX);
	while (i > 0 && r->trials[i - 1]->seq > t->seq)
		i--;
	memmove(&r->trials[i + 1], &r->trials[i], (r->n_trials - i) * sizeof(r->trials[0]));
	r->trials[i] = t;
	r->n_trials++;
	runner_status_count(r);
	return 0;
}

int runner_queue_add(struct runner *r, const struct runner_proposal *p, struct error *err)
{
	struct runner_trial *t;
	int k;

	k = trial_new(r, p, &t, err);
	if (k < 0)
		return k;
	k = trial_enqueue(r, t, err);
	if (k < 0)
		trial_free(t);
	return k;
}

/* The last trial that ended with a measurement, for batch_due: the one
 * that ended last (start and end on the runner's clock). */
static void note_measured(struct runner *r, uint64_t start, uint64_t end)
{
	if (end > start && end >= r->last_measured_start_usec + r->last_measured_usec) {
		r->last_measured_start_usec = start;
		r->last_measured_usec = end - start;
	}
}

int runner_queue_load(struct runner *r, struct error *err)
{
	struct store_trial *rows = NULL;
	size_t n = 0;
	int k;

	k = store_trial_history(r->store, r->study_id, &rows, &n, err);
	/* a resumed dry run holds its asks as the uninterrupted one did
	 * (runner-fill.c, batch_due): its stored times are its virtual clock */
	for (size_t i = 0; i < n && k >= 0 && r->opts.dry_run; i++)
		if (rows[i].state == STORE_TRIAL_DONE && !runner_kind_is_sweep(rows[i].kind) &&
		    rows[i].started_usec > 0)
			note_measured(r, rows[i].started_usec, rows[i].finished_usec);
	for (size_t i = 0; i < n && k >= 0; i++) {
		struct runner_proposal p;
		bool known = false;

		if (rows[i].state != STORE_TRIAL_PENDING && rows[i].state != STORE_TRIAL_INTERRUPTED)
			continue;
		for (size_t j = 0; j < r->n_trials; j++)
			known = known || r->trials[j]->id == rows[i].id;
		if (known)
			continue;
		k = proposal_of_row(r, &rows[i], &p, err);
		if (k >= 0)
			k = runner_queue_add(r, &p, err);
	}
	store_trial_array_free(rows, n);
	return k < 0 ? k : 0;
}

int runner_trial_start(struct runner_trial *t, uint64_t gpus)
{
	struct runner *r = t->runner;
	struct error err = { 0 };
	int k;

	t->gpus = gpus;
	/* on a cluster the slots only count: the job's GPUs are known once it runs */
	if (runner_on_cluster(r))
		t->gpus_text[0] = 0;
	else
		runner_slots_format(r, gpus, t->gpus_text, sizeof(t->gpus_text));
	/* committed before anything runs: a crash from here on leaves it to be redone */
	k = store_trial_set_state(r->store, t->id, STORE_TRIAL_DEPLOYING, &err);
	if (k >= 0)
		k = store_trial_set_gpus(r->store, t->id, t->gpus_text[0] ? t->gpus_text : NULL, &err);
	if (r->opts.dry_run) {
		/* an interrupted dry-run trial starts again where the schedule had it */
		t->vstart_usec = t->vstart_known && t->vstart_before_usec <= r->vclock_usec ? t->vstart_before_usec
											    : r->vclock_usec;
		if (k >= 0)
			k = store_trial_set_times(r->store, t->id, r->study_start_usec + t->vstart_usec, 0, &err);
	}
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return k;
	}
	t->running = true;
	t->open = true;
	t->started_usec = r->opts.dry_run ? r->study_start_usec + t->vstart_usec : runner_clock(r);
	r->gpus_busy |= gpus;
	r->status.trial = t->seq;
	r->status.trial_id = t->id;
	r->status.confirming = t->proposal.ask == OPT_ASK_CONFIRM;
	r->status.load_points = 0;
	r->status.current_rate = 0;
	snprintf(r->status.knobs, sizeof(r->status.knobs), "%s", t->knobs_text);
	runner_status_count(r);
	runner_gpu_note_start(r);
	r->evaluator->start(t);
	return 0;
}

/* ---- status ---- */

void runner_trial_status_of(const struct runner_trial *t, struct runner_trial_status *ret)
{
	*ret = (struct runner_trial_status){
		.trial_id = t->id,
		.seq = t->seq,
		.confirming = t->proposal.ask == OPT_ASK_CONFIRM,
		.sweep = t->proposal.sweep,
		.phase = t->phase,
		.load_points = t->n_points,
		.current_rate = t->current_rate,
		.deploy_seconds = t->deploy_seconds,
		.job_id = t->job_id,
		.pending_seconds = t->pending_seconds,
	};
	/* a job still queued: how long it has waited so far, and why */
	if (t->phase == RUNNER_QUEUED && t->queued_usec) {
		ret->pending_seconds = (double)(runner_clock(t->runner) - t->queued_usec) / USEC_PER_SEC;
		if (t->runner->evaluator->pending_reason)
			snprintf(ret->pending_reason, sizeof(ret->pending_reason), "%s",
				 t->runner->evaluator->pending_reason(t));
	}
	snprintf(ret->gpus, sizeof(ret->gpus), "%s", t->running ? t->gpus_text : "");
	snprintf(ret->knobs, sizeof(ret->knobs), "%s", t->knobs_text);
}

void runner_status_count(struct runner *r)
{
	struct runner_status *st = &r->status;

	memset(st->by_phase, 0, sizeof(st->by_phase));
	st->in_flight = (unsigned)r->n_trials;
	st->first_seq = st->last_seq = 0;
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct runner_trial *t = r->trials[i];

		st->by_phase[t->phase]++;
		if (!st->first_seq || t->seq < st->first_seq)
			st->first_seq = t->seq;
		st->last_seq = MAX(st->last_seq, t->seq);
	}
	st->gpus_total = r->n_gpus;
	st->gpus_busy = (unsigned)__builtin_popcountll(r->gpus_busy);
}

size_t runner_get_trials(const struct runner *r, struct runner_trial_status *ret, size_t n)
{
	for (size_t i = 0; i < r->n_trials && i < n; i++)
		runner_trial_status_of(r->trials[i], &ret[i]);
	return r->n_trials;
}

/* The status follows the trial that changed last; the event names it. */
static void emit_trial(struct runner_trial *t, struct runner_event *ev)
{
	struct runner *r = t->runner;
	struct runner_trial_status ts;

	r->status.trial = t->seq;
	r->status.trial_id = t->id;
	r->status.confirming = t->proposal.ask == OPT_ASK_CONFIRM;
	r->status.load_points = t->n_points;
	r->status.current_rate = t->current_rate;
	snprintf(r->status.knobs, sizeof(r->status.knobs), "%s", t->knobs_text);
	runner_status_count(r);
	runner_trial_status_of(t, &ts);
	ev->trial = &ts;
	runner_emit(r, ev);
}

/* ---- what evaluators report ---- */

void runner_trial_set_phase(struct runner_trial *t, enum runner_phase p)
{
	t->phase = p;
	t->runner->status.phase = p;
	emit_trial(t, &(struct runner_event){ .kind = RUNNER_EVENT_PHASE });
}

void runner_trial_point_progress(struct runner_trial *t, struct runner_event *ev)
{
	ev->kind = RUNNER_EVENT_POINT_PROGRESS;
	emit_trial(t, ev);
}

void runner_trial_set_rate(struct runner_trial *t, double rate)
{
	t->current_rate = rate;
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
		runner_fail_errno(r, k, error_str(&err, k));
		return k;
	}
	t->n_points++;
	if (strcmp(phase, "saturation") == 0)
		runner_probe_note(r, t->tp, res->output_throughput);
	if (announce)
		emit_trial(t, &(struct runner_event){ .kind = RUNNER_EVENT_LOAD_POINT, .load_point = res });
	else
		r->status.load_points = t->n_points;
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

/* Commits the outcome; the server, when still up, stays recorded (findable
 * by a restarted runner) until it is gone: runner_trial_gone clears it. */
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
		.finished_usec = t->finished_at_usec,
		.oom_cause = res->state == STORE_TRIAL_INFEASIBLE ? runner_cause_text(res->cause) : NULL,
		.suggested_max_model_len = res->suggested_len,
	};

	return store_trial_finish(r->store, t->id, &o, err);
}

void runner_trial_finish(struct runner_trial *t, const struct trial_result *res)
{
	struct runner *r = t->runner;
	const struct runner_evaluator *ev = r->evaluator;
	struct opt_trial ot = { .config = t->proposal.config,
				.outcome = outcome_for_opt(res),
				.cost = res->cost,
				.confirm = t->proposal.ask == OPT_ASK_CONFIRM,
				.cause = res->cause,
				.suggested_len = res->suggested_len };
	struct error err = { 0 };
	int k;

	ev->abort(t);
	k = commit_outcome(t, res, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	t->open = false;
	if (isfinite(t->deploy_seconds) && t->deploy_seconds > 0) {
		r->deploy_sum_s += t->deploy_seconds;
		r->deploy_n++;
	}
	if (!r->opts.dry_run && runner_clock(r) > t->started_usec) {
		r->trial_sum_s += (double)(runner_clock(r) - t->started_usec) / USEC_PER_SEC;
		r->trial_n++;
	}
	if (ot.outcome == OPT_OUTCOME_MEASURED && !t->proposal.sweep)
		note_measured(r, t->started_usec, r->opts.dry_run ? t->finished_at_usec : runner_clock(r));
	if (ot.outcome != OPT_OUTCOME_MEASURED)
		ot.cost = 0;
	/* a baseline off the grid is no configuration of the search; a sweep
	 * measures no cost */
	k = (t->proposal.baseline && !r->baseline.on_grid) || t->proposal.sweep
		    ? 0
		    : runner_history_insert(r, &ot, t->id, t->seq);
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
	/* something new is known: a planner that said done is asked again
	 * (a sweep tells it nothing) */
	if (!t->proposal.sweep)
		r->planner_done = false;
	k = runner_update_best(r, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	if (res->state == STORE_TRIAL_DONE)
		log_debug("trial %u: $%.4f/Mtok", t->seq, res->cost);
	/* teardown from here on: a pause/stop asked in the callbacks below
	 * only changes the phase and is acted on once the server is gone */
	runner_trial_set_phase(t, RUNNER_TEARDOWN);
	emit_trial(t, &(struct runner_event){
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

static bool any_running(const struct runner *r)
{
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i]->running)
			return true;
	return false;
}

void runner_trial_gone(struct runner_trial *t)
{
	struct runner *r = t->runner;
	struct error err = { 0 };
	int k;

	r->evaluator->release(t);
	if (t->id > 0 && t->log_path) {
		k = store_trial_set_server(r->store, t->id, NULL, t->log_path, &err);
		if (k < 0) {
			runner_fail_errno(r, k, error_str(&err, k));
			return;
		}
	}
	if (r->status.trial_id == t->id)
		r->status.trial_id = 0;
	runner_trial_remove(r, t);
	if (!any_running(r))
		/* the GPUs' memory back to idle first (where NVML tells), then plan */
		runner_after_server_gone(r);
	else if (r->request == RUNNER_REQUEST_NONE)
		runner_schedule(r, RUNNER_ACTION_PLAN);
}

/* ---- a busy GPU ---- */

#define BUSY_RETRY_USEC     (2 * USEC_PER_SEC)
#define BUSY_RETRY_MAX_USEC (60 * USEC_PER_SEC)

/* The trial waits to be run again (state pending): its evaluator's state
 * (a server still up is killed) is released, its GPUs are free, nothing of
 * this attempt counts. */
static void wait_again(struct runner_trial *t)
{
	struct runner *r = t->runner;
	struct error err = { 0 };
	int k;

	r->evaluator->release(t);
	t->gpus_before = 0;
	k = store_trial_set_state(r->store, t->id, STORE_TRIAL_PENDING, &err);
	if (k >= 0)
		k = store_trial_set_server(r->store, t->id, NULL, t->log_path, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	r->gpus_busy &= ~t->gpus;
	t->running = false;
	t->open = false;
	t->gpus = 0;
	t->gpus_text[0] = 0;
	t->n_points = 0;
	t->current_rate = 0;
	t->job_id = 0;
	t->pending_seconds = NAN;
	free(t->log_path);
	t->log_path = NULL;
	runner_trial_set_phase(t, RUNNER_WAITING);
	if (r->request != RUNNER_REQUEST_NONE) {
		if (!any_running(r))
			runner_after_server_gone(r);
		return;
	}
	runner_schedule(r, RUNNER_ACTION_PLAN);
}

void runner_trial_host_busy(struct runner_trial *t, const char *why)
{
	struct runner *r = t->runner;
	uint64_t wait = BUSY_RETRY_USEC << MIN(t->busy_retries, 5u), now = runner_clock(r);
	const char *p = why ? strstr(why, "GPU ") : NULL;
	unsigned device;
	int k;

	wait = MIN(wait, BUSY_RETRY_MAX_USEC);
	t->busy_retries++;
	/* the GPU named busy is left alone for as long; the trial may take others
	 * (on a cluster the slots are no node's GPUs: the trial waits) */
	if (p && !runner_on_cluster(r) && sscanf(p, "GPU %u busy", &device) == 1 &&
	    (k = runner_slots_position(r, device)) >= 0) {
		r->gpus_blocked |= UINT64_C(1) << k;
		r->gpu_free_at[k] = now + wait;
		log_warning("trial %u on GPU %s: the host is busy (%s): GPU %u is left alone for %.0f s, the trial "
			    "waits for GPUs again",
			    t->seq, t->gpus_text, why, device, (double)wait / USEC_PER_SEC);
	} else {
		t->not_before_usec = now + wait;
		log_warning("trial %u on GPU %s: the %s is busy (%s): it is tried again in %.0f s", t->seq,
			    t->gpus_text, runner_on_cluster(r) ? "cluster" : "host",
			    why ? why : "a GPU is held by another process", (double)wait / USEC_PER_SEC);
	}
	wait_again(t);
}

#define LOST_MAX 5

void runner_trial_lost(struct runner_trial *t, const char *why)
{
	struct runner *r = t->runner;
	struct trial_result res;
	struct error err = { 0 };
	int k;

	t->lost++;
	k = store_trial_job_lost(r->store, t->id, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	if (t->lost >= LOST_MAX) {
		trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_LOST);
		snprintf(res.message, sizeof(res.message), "the cluster ended its job %u times; the last: %s", t->lost,
			 why);
		runner_trial_finish(t, &res);
		return;
	}
	log_warning("trial %u: %s; the trial is run again (never a measurement)", t->seq, why);
	wait_again(t);
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
		runner_fail_errno(t->runner, k, error_str(&err, k));
	return k;
}

void runner_halt(struct runner *r)
{
	enum runner_phase halting = r->request == RUNNER_REQUEST_PAUSE ? RUNNER_PAUSING : RUNNER_STOPPING;
	const struct runner_evaluator *ev = r->evaluator;
	struct runner_trial *gone[RUNNER_ASK_MAX];
	size_t n_gone = 0, n_stopping = 0;

	switch (r->status.phase) {
	case RUNNER_FINISHED:
	case RUNNER_IDLE:
		return;
	case RUNNER_PAUSED:
		runner_settle_request(r);
		return;
	default:
		break;
	}
	/* nothing waits for a step or an answer any longer */
	r->action = RUNNER_ACTION_NONE;
	if (r->step_source)
		(void)sd_event_source_set_enabled(r->step_source, SD_EVENT_OFF);
	r->retry_timer = sd_event_source_disable_unref(r->retry_timer);
	runner_planner_cancel(r->planner);
	r->asking = false;
	r->plan_waits_host = false;
	for (size_t i = r->n_trials; i-- > 0;) {
		struct runner_trial *t = r->trials[i];

		if (!t->running) {
			/* waiting: its row stays pending, to be started on resume */
			runner_trial_remove(r, t);
			continue;
		}
		if (t->phase == RUNNER_TEARDOWN) {
			/* told already: its finish tears it down and settles the request */
			n_stopping++;
			continue;
		}
		ev->abort(t);
		if (mark_interrupted(t) < 0)
			return;
		switch (ev->server(t)) {
		case RUNNER_SERVER_RUNNING:
			if (ev->stop_server(t) >= 0) {
				n_stopping++;
				continue;
			}
			break;
		case RUNNER_SERVER_STOPPING:
			n_stopping++;
			continue;
		case RUNNER_SERVER_NONE:
			break;
		}
		gone[n_gone++] = t;
	}
	runner_set_phase(r, halting);
	for (size_t i = 0; i < n_gone; i++)
		runner_trial_gone(gone[i]);
	if (n_gone > 0)
		return; /* the last one gone acts on the request (when none stops) */
	if (n_stopping == 0 && !any_running(r)) {
		/* nothing ran (planning), or a wait for GPU memory: act at once */
		(void)runner_host_stop_waiting(r);
		runner_after_server_gone(r);
	}
}

void runner_fail_setup(struct runner *r, const char *msg)
{
	if (runner_failing(r) || r->request != RUNNER_REQUEST_NONE)
		return; /* ending already: the trials in flight go anyway */
	snprintf(r->message, sizeof(r->message), "%s", msg);
	r->request = RUNNER_REQUEST_FAIL;
	runner_halt(r);
}
