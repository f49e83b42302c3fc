/* runner-trial.c — one trial of a study: ask the optimizer, record the
 * trial, deploy the server, run the operator's quality check, probe the
 * largest load that meets the SLA, turn the result into an outcome and a
 * cost, tear the server down; or, in a dry run, evaluate the configuration
 * in virtual time. (The quality check itself is runner-quality.c.) Each step commits the trial's new state to the store
 * before acting, and each wait is an event source: nothing here blocks.
 *
 * A server that dies is seen two ways: the deployer's child source (FAILED)
 * and the probe's failed requests. The probe may finish first (connection
 * refused is instant), so a probe that saw failed requests waits a moment
 * for the deployer's verdict before the trial's outcome is decided: a crash
 * then fails only this trial. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cost.h"
#include "log.h"
#include "runner-dryrun.h"
#include "runner-internal.h"
#include "time-util.h"

#define SETTLE_USEC (1 * USEC_PER_SEC)

static void after_teardown(struct runner *r);

/* ---- releasing what a trial holds ---- */

void runner_trial_release(struct runner *r)
{
	r->settle_timer = sd_event_source_disable_unref(r->settle_timer);
	r->hygiene_timer = sd_event_source_disable_unref(r->hygiene_timer);
	runner_kill_quality_check(r);
	runner_twin_kill(r);
	r->probe = probe_free(r->probe);
	r->deploy = deploy_free(r->deploy);
	cJSON_Delete(r->knobs);
	r->knobs = NULL;
	free(r->log_path);
	r->log_path = NULL;
}

/* ---- finishing a trial ---- */

static enum opt_outcome outcome_for_opt(const struct trial_result *t)
{
	if (t->state == STORE_TRIAL_DONE)
		return OPT_OUTCOME_MEASURED;
	if (t->state == STORE_TRIAL_FAILED)
		return OPT_OUTCOME_FAILED;
	return t->failure == STORE_FAILURE_SLA_NEVER_MET ? OPT_OUTCOME_SLA_NEVER_MET : OPT_OUTCOME_INFEASIBLE;
}

void runner_finish_trial(struct runner *r, const struct trial_result *t)
{
	struct store_trial_outcome o = {
		.state = t->state,
		.failure = t->failure,
		.failure_message = t->message[0] ? t->message : NULL,
		.deploy_seconds = r->deploy_seconds,
		.max_rate = t->max_rate,
		.max_goodput = t->max_goodput,
		.concurrency = t->concurrency,
		.cost_per_mtok = t->cost,
	};
	struct opt_trial ot = { .config = r->cand.config,
				.outcome = outcome_for_opt(t),
				.cost = t->cost,
				.confirm = r->cand.ask == OPT_ASK_CONFIRM };
	struct error err = { 0 };
	int k;

	r->settle_timer = sd_event_source_disable_unref(r->settle_timer);
	runner_kill_quality_check(r);
	r->probe = probe_free(r->probe);
	k = store_trial_finish(r->store, r->trial_id, &o, &err);
	if (k >= 0 && r->deploy && (deploy_get_pgid(r->deploy) > 0 || deploy_get_unit(r->deploy)) &&
	    (deploy_get_state(r->deploy) == DEPLOY_READY || deploy_get_state(r->deploy) == DEPLOY_STARTING))
		/* still running until the teardown below ends: keep it findable */
		k = store_trial_set_server(r->store, r->trial_id, deploy_get_pgid(r->deploy),
					   deploy_get_unit(r->deploy), r->log_path, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	r->trial_open = false;
	if (isfinite(r->deploy_seconds) && r->deploy_seconds > 0) {
		r->deploy_sum_s += r->deploy_seconds;
		r->deploy_n++;
	}
	if (ot.outcome != OPT_OUTCOME_MEASURED)
		ot.cost = 0;
	k = runner_history_push(r, &ot, r->trial_id, t->max_goodput);
	if (k < 0) {
		runner_fail(r, "out of memory adding a trial to the history");
		return;
	}
	runner_update_best(r);
	if (t->state == STORE_TRIAL_DONE)
		log_debug("trial %u: $%.4f/Mtok", r->status.trial, t->cost);
	/* teardown from here on: a pause/stop asked in the callbacks below
	 * only changes the phase and is acted on once the server is gone */
	runner_set_phase(r, RUNNER_TEARDOWN);
	runner_emit(r, &(struct runner_event){
			       .kind = RUNNER_EVENT_TRIAL_FINISHED,
			       .trial_id = r->trial_id,
			       .trial_state = t->state,
			       .failure = t->failure,
			       .failure_message = t->message[0] ? t->message : NULL,
			       .cost_per_mtok = t->cost,
			       .max_goodput = t->max_goodput,
			       .deploy_seconds = r->deploy_seconds,
		       });

	if (r->deploy) {
		enum deploy_state ds = deploy_get_state(r->deploy);

		if (ds == DEPLOY_READY || ds == DEPLOY_STARTING) {
			if (deploy_stop(r->deploy) >= 0)
				return; /* STOPPED comes */
		} else if (ds == DEPLOY_STOPPING)
			return;
	}
	after_teardown(r);
}

/* The server is gone (or there was none): clear its record, go on. */
static void after_teardown(struct runner *r)
{
	struct error err = { 0 };
	int k;

	r->deploy = deploy_free(r->deploy);
	if (r->trial_id > 0 && r->log_path) {
		k = store_trial_set_server(r->store, r->trial_id, 0, NULL, r->log_path, &err);
		if (k < 0) {
			runner_fail(r, error_str(&err, k));
			return;
		}
	}
	runner_trial_release(r);
	r->trial_id = 0;
	r->status.trial_id = 0;
	/* the GPU's memory back to idle first (where NVML tells), then plan */
	runner_after_server_gone(r);
}

/* ---- halting (pause, stop, cancel) ---- */

static int mark_interrupted(struct runner *r)
{
	struct error err = { 0 };
	int k;

	if (!r->trial_open)
		return 0;
	r->trial_open = false;
	k = store_trial_set_state(r->store, r->trial_id, STORE_TRIAL_INTERRUPTED, &err);
	if (k < 0)
		runner_fail(r, error_str(&err, k));
	return k;
}

void runner_halt(struct runner *r)
{
	enum runner_phase halting = r->request == RUNNER_REQUEST_PAUSE ? RUNNER_PAUSING : RUNNER_STOPPING;

	switch (r->status.phase) {
	case RUNNER_FINISHED:
	case RUNNER_IDLE:
		return;
	case RUNNER_TEARDOWN:
	case RUNNER_PAUSING:
	case RUNNER_STOPPING:
		/* the server is going already; after_teardown settles the request */
		runner_set_phase(r, halting);
		return;
	default:
		break;
	}
	r->settle_timer = sd_event_source_disable_unref(r->settle_timer);
	runner_kill_quality_check(r);
	r->probe = probe_free(r->probe);
	if (mark_interrupted(r) < 0)
		return;
	if (r->deploy) {
		enum deploy_state ds = deploy_get_state(r->deploy);

		if (ds == DEPLOY_READY || ds == DEPLOY_STARTING) {
			runner_set_phase(r, halting);
			if (deploy_stop(r->deploy) >= 0)
				return;
		} else if (ds == DEPLOY_STOPPING) {
			runner_set_phase(r, halting);
			return;
		}
	}
	/* nothing runs (planning, dry run, paused): cancel the pending step */
	r->action = RUNNER_ACTION_NONE;
	if (r->step_source)
		(void)sd_event_source_set_enabled(r->step_source, SD_EVENT_OFF);
	if (r->status.phase == RUNNER_PAUSED) {
		runner_settle_request(r);
		return;
	}
	after_teardown(r);
}

/* ---- deployment ---- */

static void on_deploy(struct deployment *d, enum deploy_state state, void *userdata)
{
	struct runner *r = userdata;
	struct trial_result t;

	if (r->action == RUNNER_ACTION_FINISH)
		return; /* failing: runner_finish frees everything */

	switch (state) {
	case DEPLOY_READY:
		if (r->status.phase != RUNNER_DEPLOYING || !r->trial_open)
			return;
		r->deploy_seconds = deploy_get_startup_seconds(d);
		if (r->study->quality_check)
			runner_start_quality_check(r);
		else
			runner_start_probe(r);
		return;
	case DEPLOY_FAILED:
		if (r->trial_open) {
			switch (deploy_get_failure(d)) {
			case DEPLOY_FAILURE_OOM:
				trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_OOM);
				break;
			case DEPLOY_FAILURE_STARTUP_TIMEOUT:
				trial_result_init(&t, STORE_TRIAL_FAILED, STORE_FAILURE_STARTUP_TIMEOUT);
				break;
			default:
				trial_result_init(&t, STORE_TRIAL_FAILED, STORE_FAILURE_CRASHED);
				break;
			}
			snprintf(t.message, sizeof(t.message), "%s%s",
				 r->status.phase == RUNNER_PROBING ? "crashed while probing: " : "",
				 deploy_get_message(d));
			runner_finish_trial(r, &t);
			return;
		}
		after_teardown(r);
		return;
	case DEPLOY_STOPPED:
		after_teardown(r);
		return;
	default:
		return;
	}
}

static int ensure_dir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* The method-specific part of a deployment: the unit name (systemd), the
 * hooks and their environment (command). *ret_env is the caller's to free. */
static int deploy_method_config(struct runner *r, struct deploy_config *cfg, const char *host, uint16_t port,
				char *unit, size_t unit_size, char ***ret_env, struct error *err)
{
	const struct study *s = r->study;
	int k;

	*ret_env = NULL;
	switch (s->deploy.method) {
	case STUDY_DEPLOY_SYSTEMD:
		k = deploy_unit_name(r->row.name, r->trial_id, unit, unit_size);
		if (k < 0)
			return error_set(err, k, "cannot name the unit of trial %u", r->status.trial);
		cfg->unit_name = unit;
		cfg->user_bus = s->deploy.user_bus;
		return 0;
	case STUDY_DEPLOY_COMMAND:
		cfg->deploy_command = s->deploy.deploy_command;
		cfg->teardown_command = s->deploy.teardown_command;
		cfg->health_command = s->deploy.health_command;
		cfg->command_timeout_usec = s->deploy.command_timeout_usec;
		k = deploy_hook_env(r->knobs, r->row.name, r->trial_id, s->model.name, host, port, ret_env);
		if (k < 0)
			return error_set(err, k, "cannot build the deploy hooks' environment");
		cfg->hook_env = (const char *const *)*ret_env;
		return 0;
	case STUDY_DEPLOY_EXEC:
		return 0;
	}
	return error_set(err, -EINVAL, "unknown deploy method %d", (int)s->deploy.method);
}

static void start_deploy(struct runner *r)
{
	struct engine_command cmd = { 0 };
	struct deploy_config cfg;
	struct trial_result t;
	struct error err = { 0 };
	const char *host = r->study->deploy.host ? r->study->deploy.host : "127.0.0.1";
	bool command = r->study->deploy.method == STUDY_DEPLOY_COMMAND;
	char unit[256] = "", **hook_env = NULL;
	uint16_t port = 0;
	int k;

	k = ensure_dir(r->log_dir);
	if (k < 0) {
		char msg[ERROR_MSG_MAX];

		snprintf(msg, sizeof(msg), "log directory %s: %s", r->log_dir, strerror(-k));
		runner_fail(r, msg);
		return;
	}
	if (asprintf(&r->log_path, "%s/%s-trial-%03u-%s.log", r->log_dir, r->row.name, r->status.trial, r->kind) < 0) {
		r->log_path = NULL;
		runner_fail(r, "out of memory");
		return;
	}
	/* The command method's hooks report a URL, not an announce line: they
	 * always get a port (free here; on another host only a suggestion). */
	if (r->profile->port_mode == ENGINE_PORT_FREE || command) {
		k = deploy_pick_free_port(host, &port, &err);
		if (k < 0 && command)
			k = deploy_pick_free_port("127.0.0.1", &port, &err);
	}
	if (k >= 0)
		k = engine_profile_render_study(r->profile, r->study, r->knobs, host, port, &cmd, &err);
	if (k >= 0) {
		deploy_config_from_profile(&cfg, r->profile, &cmd, r->log_path, host, port,
					   r->study->deploy.startup_timeout_usec, r->study->deploy.stop_timeout_usec);
		k = deploy_method_config(r, &cfg, host, port, unit, sizeof(unit), &hook_env, &err);
	}
	if (k >= 0)
		k = deploy_start(r->event, r->study->deploy.method, &cfg, on_deploy, r, &r->deploy, &err);
	deploy_strv_free(hook_env); /* deploy_start copied it */
	engine_command_done(&cmd);
	if (k < 0) {
		trial_result_init(&t, STORE_TRIAL_FAILED, STORE_FAILURE_DEPLOY_ERROR);
		snprintf(t.message, sizeof(t.message), "%s", error_str(&err, k));
		runner_finish_trial(r, &t);
		return;
	}
	k = store_trial_set_server(r->store, r->trial_id, deploy_get_pgid(r->deploy), deploy_get_unit(r->deploy),
				   r->log_path, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	runner_set_phase(r, RUNNER_DEPLOYING);
}

/* ---- probing ---- */

static void on_probe_event(struct probe *p, const struct probe_event *ev, void *userdata)
{
	struct runner *r = userdata;
	struct store_gpu_figures gpu;
	struct error err = { 0 };
	int k;

	if (r->action == RUNNER_ACTION_FINISH)
		return; /* failing: runner_finish frees everything */

	if (ev->kind == PROBE_EVENT_LOAD_POINT_START) {
		r->status.current_rate = ev->rate;
		runner_gpu_point_start(r);
		return;
	}
	if (ev->kind != PROBE_EVENT_LOAD_POINT_DONE || !ev->point)
		return;
	runner_gpu_point_stop(r, &gpu);
	k = store_load_point_insert_gpu(r->store, r->trial_id, r->n_points + 1,
					ev->point->saturation ? "saturation" : "search", &ev->point->result, &gpu, NULL,
					&err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	r->n_points++;
	r->status.load_points = r->n_points;
	if (ev->point->result.failed > 0)
		r->points_failed = true;
	runner_emit(r, &(struct runner_event){ .kind = RUNNER_EVENT_LOAD_POINT, .load_point = &ev->point->result });
}

static void outcome_from_point(struct runner *r, const struct probe_result *pt, double max_rate, struct trial_result *t)
{
	struct opt_throughput tp = { 0 };
	double tps, in_per_req;
	int k;

	if (r->study->scenario == OPT_SCENARIO_OFFLINE) {
		tp.saturated_output_tps = pt->output_throughput;
		tp.saturated_input_tps = pt->duration_s > 0 ? (double)pt->total_input_tokens / pt->duration_s : 0;
	} else {
		in_per_req = pt->completed > 0 ? (double)pt->total_input_tokens / pt->completed : 0;
		tp.good_output_tps = pt->good_output_throughput;
		tp.good_input_tps = pt->request_goodput * in_per_req;
	}
	tps = opt_cost_tokens_per_sec(r->study->scenario, r->study->cost_tokens, &tp);
	trial_result_init(t, STORE_TRIAL_DONE, STORE_FAILURE_NONE);
	k = opt_cost_per_mtok(r->study->gpu.price_per_gpu_hour,
			      opt_cost_gpus_per_replica(r->study->space, &r->cand.config), tps, &t->cost);
	if (k < 0) {
		trial_result_init(t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET);
		snprintf(t->message, sizeof(t->message), "no tokens counted at the best load");
		return;
	}
	t->max_rate = max_rate;
	t->max_goodput = tps;
	t->concurrency = pt->mean_concurrency;
}

static void classify_probe(struct runner *r, int result)
{
	const struct probe_load_point *points;
	struct probe_outcome o;
	struct trial_result t;
	size_t n;

	if (result < 0) {
		trial_result_init(&t, STORE_TRIAL_FAILED, STORE_FAILURE_PROBE_ERROR);
		snprintf(t.message, sizeof(t.message), "probe failed: %s", probe_error(r->probe));
		runner_finish_trial(r, &t);
		return;
	}
	points = probe_load_points(r->probe, &n);
	probe_get_outcome(r->probe, &o);
	if (r->study->scenario == OPT_SCENARIO_OFFLINE) {
		if (n == 0 || points[n - 1].result.completed == 0) {
			trial_result_init(&t, STORE_TRIAL_FAILED, STORE_FAILURE_PROBE_ERROR);
			snprintf(t.message, sizeof(t.message), "no request completed");
		} else
			outcome_from_point(r, &points[n - 1].result, points[n - 1].result.request_throughput, &t);
	} else if (o.search == PROBE_SEARCH_NEVER_MET || !(o.max_rate > 0) || o.best_point >= n) {
		char sla[128];

		probe_sla_format(&r->study->sla, sla, sizeof(sla));
		trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET);
		snprintf(t.message, sizeof(t.message), "no load met the SLA (%s) in %zu load points", sla, n);
	} else
		outcome_from_point(r, &points[o.best_point].result, o.max_rate, &t);
	runner_finish_trial(r, &t);
}

static int on_settle(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;

	if (r->action == RUNNER_ACTION_FINISH)
		return 0; /* failing: runner_finish frees everything */

	r->settle_timer = sd_event_source_disable_unref(r->settle_timer);
	/* the deployer would have said FAILED by now if the server had died */
	classify_probe(r, r->probe_result);
	return 0;
}

static void on_probe_done(struct probe *p, int result, void *userdata)
{
	struct runner *r = userdata;
	int k;

	if (r->action == RUNNER_ACTION_FINISH)
		return; /* failing: runner_finish frees everything */

	if (result < 0 || r->points_failed) {
		r->probe_result = result;
		k = sd_event_add_time_relative(r->event, &r->settle_timer, CLOCK_MONOTONIC, SETTLE_USEC, 1000,
					       on_settle, r);
		if (k >= 0) {
			(void)sd_event_source_set_description(r->settle_timer, "runner-settle");
			return;
		}
	}
	classify_probe(r, result);
}

void runner_start_probe(struct runner *r)
{
	struct probe_config pc;
	struct trial_result t;
	struct error err = { 0 };
	int k;

	probe_config_init(&pc);
	pc.client.base_url = deploy_get_base_url(r->deploy);
	pc.client.model = r->study->model.name;
	pc.client.ignore_eos = r->study->workload.ignore_eos;
	if (r->study->probe.request_timeout_usec > 0)
		pc.client.request_timeout_usec = r->study->probe.request_timeout_usec;
	pc.workload = r->study->workload;
	memcpy(pc.percentiles, r->study->percentiles, sizeof(pc.percentiles));
	pc.n_percentiles = r->study->n_percentiles;
	pc.run.metrics_path = r->profile->metrics_path;
	if (r->study->scenario == OPT_SCENARIO_OFFLINE) {
		pc.find_max_rate = false;
		pc.workload.arrival = PROBE_ARRIVAL_INF;
	} else {
		pc.sla = r->study->sla;
		pc.find_max_rate = true;
		if (r->study->probe.tolerance > 0)
			pc.rate_tolerance = r->study->probe.tolerance;
		if (r->study->probe.max_steps > 0)
			pc.max_load_points = r->study->probe.max_steps;
		pc.min_rate = r->study->probe.min_rate;
		pc.max_rate = r->study->probe.max_rate;
	}
	k = store_trial_set_state(r->store, r->trial_id, STORE_TRIAL_PROBING, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	r->n_points = 0;
	r->points_failed = false;
	k = probe_new(r->event, &pc, &r->probe, &err);
	if (k >= 0) {
		k = probe_start(r->probe, on_probe_event, on_probe_done, r);
		if (k < 0)
			error_set(&err, k, "%s", probe_error(r->probe));
	}
	if (k < 0) {
		trial_result_init(&t, STORE_TRIAL_FAILED, STORE_FAILURE_PROBE_ERROR);
		snprintf(t.message, sizeof(t.message), "probe could not start: %s", error_str(&err, k));
		runner_finish_trial(r, &t);
		return;
	}
	runner_set_phase(r, RUNNER_PROBING);
}

/* ---- dry run ---- */

void runner_dry_step(struct runner *r)
{
	struct runner_dry_result *res;
	struct trial_result t;
	struct error err = { 0 };
	unsigned variant = 0;
	int k;

	if (runner_settle_request(r))
		return;
	res = malloc(sizeof(*res));
	if (!res) {
		runner_fail(r, "out of memory");
		return;
	}
	if (r->cand.ask == OPT_ASK_CONFIRM)
		variant = 1000 + r->status.trial;
	k = runner_dry_evaluate(r->study, &r->cand.config, variant, res, &err);
	if (k < 0) {
		free(res);
		runner_fail(r, error_str(&err, k));
		return;
	}
	k = 0;
	if (res->have_saturated)
		k = store_load_point_insert(r->store, r->trial_id, ++r->n_points, "saturation", &res->saturated, NULL,
					    &err);
	if (k >= 0 && res->have_point)
		k = store_load_point_insert(r->store, r->trial_id, ++r->n_points,
					    r->study->scenario == OPT_SCENARIO_OFFLINE ? "saturation" : "search",
					    &res->point, NULL, &err);
	if (k < 0) {
		free(res);
		runner_fail(r, error_str(&err, k));
		return;
	}
	r->status.load_points = r->n_points;
	if (res->have_point)
		runner_emit(r, &(struct runner_event){ .kind = RUNNER_EVENT_LOAD_POINT, .load_point = &res->point });
	if (res->infeasible) {
		trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_OOM);
		snprintf(t.message, sizeof(t.message), "%s", res->message);
	} else if (res->sla_never_met) {
		trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET);
		snprintf(t.message, sizeof(t.message), "%s", res->message);
	} else {
		trial_result_init(&t, STORE_TRIAL_DONE, STORE_FAILURE_NONE);
		t.max_rate = res->max_rate;
		t.max_goodput = res->tokens_per_sec;
		t.concurrency = res->concurrency;
		t.cost = res->cost_per_mtok;
	}
	free(res);
	runner_finish_trial(r, &t);
}

/* ---- planning ---- */

static unsigned confirmations_of(const struct runner *r, const struct opt_config *c)
{
	unsigned n = 0;

	for (size_t i = 0; i < r->history.n; i++)
		if (r->history.trials[i].confirm && memcmp(&r->history.trials[i].config, c, sizeof(*c)) == 0)
			n++;
	return n;
}

void runner_plan(struct runner *r)
{
	struct error err = { 0 };
	int k;

	if (runner_settle_request(r))
		return;
	if (runner_wall_budget_spent(r, r->message, sizeof(r->message))) {
		runner_finish(r, RUNNER_END_DONE);
		return;
	}
	runner_set_phase(r, RUNNER_PLANNING);
	if (r->twin_on) {
		/* in a child process: the answer comes back through runner_plan_candidate */
		runner_twin_ask(r);
		return;
	}
	k = opt_next(r->study->space, &r->settings, &r->history, &r->cand, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	runner_plan_candidate(r, NULL);
}

void runner_plan_candidate(struct runner *r, const char *done_message)
{
	_cleanup_(cjson_freep) char *knobs_json = NULL;
	struct store_trial row = { 0 };
	struct error err = { 0 };
	char key[OPT_KEY_MAX];
	const char *dry = r->opts.dry_run ? "dry-run-" : "";
	int k;

	if (r->cand.ask == OPT_ASK_DONE) {
		snprintf(r->message, sizeof(r->message), "%s",
			 done_message ? done_message : opt_done_reason_to_string(r->cand.reason));
		runner_finish(r, RUNNER_END_DONE);
		return;
	}
	if (r->cand.ask == OPT_ASK_CONFIRM)
		snprintf(r->kind, sizeof(r->kind), "%sconfirm-%u", dry, confirmations_of(r, &r->cand.config) + 1);
	else if (r->cand.attempt > 1)
		snprintf(r->kind, sizeof(r->kind), "%s-retry-%u", r->opts.dry_run ? "dry-run" : "search",
			 r->cand.attempt);
	else
		snprintf(r->kind, sizeof(r->kind), "%s", r->opts.dry_run ? "dry-run" : "search");

	cJSON_Delete(r->knobs);
	r->knobs = NULL;
	k = opt_config_to_json(r->study->space, &r->cand.config, &r->knobs);
	if (k >= 0)
		k = opt_config_key(r->study->space, &r->cand.config, key, sizeof(key));
	if (k >= 0 && !(knobs_json = cJSON_PrintUnformatted(r->knobs)))
		k = -ENOMEM;
	if (k < 0) {
		runner_fail(r, "out of memory describing a configuration");
		return;
	}
	k = store_trial_insert(r->store, r->study_id, r->kind, knobs_json, key, &r->trial_id, &err);
	if (k >= 0)
		k = store_trial_get(r->store, r->trial_id, &row, &err);
	if (k >= 0) {
		r->status.trial = row.seq;
		store_trial_done(&row);
		/* committed before anything runs: a crash from here on leaves it to be redone */
		k = store_trial_set_state(r->store, r->trial_id, STORE_TRIAL_DEPLOYING, &err);
	}
	if (k >= 0 && r->twin_on)
		k = store_trial_set_predicted_cost(r->store, r->trial_id, r->twin_cand.predicted_cost, &err);
	if (k >= 0 && !r->opts.dry_run)
		k = runner_host_record(r, r->trial_id, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	r->trial_open = true;
	r->deploy_seconds = NAN;
	r->n_points = 0;
	r->points_failed = false;
	r->status.trial_id = r->trial_id;
	r->status.confirming = r->cand.ask == OPT_ASK_CONFIRM;
	r->status.load_points = 0;
	r->status.current_rate = 0;
	runner_knobs_text(r->study->space, &r->cand.config, r->status.knobs, sizeof(r->status.knobs));

	if (r->opts.dry_run) {
		k = store_trial_set_host(r->store, r->trial_id, "{\"dry_run\":true}", &err);
		if (k >= 0)
			k = store_trial_set_state(r->store, r->trial_id, STORE_TRIAL_PROBING, &err);
		if (k < 0) {
			runner_fail(r, error_str(&err, k));
			return;
		}
		runner_set_phase(r, RUNNER_PROBING);
		runner_schedule(r, RUNNER_ACTION_DRY_EVAL);
		return;
	}
	start_deploy(r);
}
