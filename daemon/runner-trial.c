/* runner-trial.c — one trial of a study: ask the optimizer, record the
 * trial, deploy the server, run the operator's quality check, probe the
 * largest load that meets the SLA, turn the result into an outcome and a
 * cost, tear the server down; or, in a dry run, evaluate the configuration
 * in virtual time. Each step commits the trial's new state to the store
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

extern char **environ;

#define SETTLE_USEC (1 * USEC_PER_SEC)
#define QUALITY_CHECK_TIMEOUT_USEC (60 * 60 * USEC_PER_SEC)

struct trial_result {
	enum store_trial_state state;
	enum store_failure failure;
	char message[ERROR_MSG_MAX];
	double max_rate, max_goodput, concurrency, cost;
};

static void trial_result_init(struct trial_result *t, enum store_trial_state state, enum store_failure failure)
{
	*t = (struct trial_result){ .state = state, .failure = failure, .max_rate = NAN, .max_goodput = NAN,
				    .concurrency = NAN, .cost = NAN };
}

static void after_teardown(struct runner *r);
static void start_probe(struct runner *r);
static void start_quality_check(struct runner *r);

/* ---- releasing what a trial holds ---- */

static void kill_quality_check(struct runner *r)
{
	r->qc_child = sd_event_source_disable_unref(r->qc_child);
	r->qc_timer = sd_event_source_disable_unref(r->qc_timer);
	if (r->qc_pid > 0) {
		(void)kill(-r->qc_pid, SIGKILL);
		/* SIGKILLed: the wait is immediate */
		(void)waitpid(r->qc_pid, NULL, 0);
		r->qc_pid = 0;
	}
}

void runner_trial_release(struct runner *r)
{
	r->settle_timer = sd_event_source_disable_unref(r->settle_timer);
	kill_quality_check(r);
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

static void finish_trial(struct runner *r, const struct trial_result *t)
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
	struct opt_trial ot = { .config = r->cand.config, .outcome = outcome_for_opt(t), .cost = t->cost,
				.confirm = r->cand.ask == OPT_ASK_CONFIRM };
	struct error err = { 0 };
	int k;

	r->settle_timer = sd_event_source_disable_unref(r->settle_timer);
	kill_quality_check(r);
	r->probe = probe_free(r->probe);
	k = store_trial_finish(r->store, r->trial_id, &o, &err);
	if (k >= 0 && r->deploy && deploy_get_pgid(r->deploy) > 0 &&
	    (deploy_get_state(r->deploy) == DEPLOY_READY || deploy_get_state(r->deploy) == DEPLOY_STARTING))
		/* still running until the teardown below ends: keep it findable */
		k = store_trial_set_server(r->store, r->trial_id, deploy_get_pgid(r->deploy), NULL, r->log_path, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	r->trial_open = false;
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
	if (runner_settle_request(r))
		return;
	runner_set_phase(r, RUNNER_PLANNING);
	runner_schedule(r, RUNNER_ACTION_PLAN);
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
	kill_quality_check(r);
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
			start_quality_check(r);
		else
			start_probe(r);
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
			finish_trial(r, &t);
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

static void start_deploy(struct runner *r)
{
	struct engine_command cmd = { 0 };
	struct deploy_config cfg;
	struct trial_result t;
	struct error err = { 0 };
	const char *host = r->study->deploy.host ? r->study->deploy.host : "127.0.0.1";
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
	if (r->profile->port_mode == ENGINE_PORT_FREE)
		k = deploy_pick_free_port(host, &port, &err);
	if (k >= 0)
		k = engine_profile_render_study(r->profile, r->study, r->knobs, host, port, &cmd, &err);
	if (k >= 0) {
		deploy_config_from_profile(&cfg, r->profile, &cmd, r->log_path, host, port,
					   r->study->deploy.startup_timeout_usec, r->study->deploy.stop_timeout_usec);
		k = deploy_start(r->event, r->study->deploy.method, &cfg, on_deploy, r, &r->deploy, &err);
	}
	engine_command_done(&cmd);
	if (k < 0) {
		trial_result_init(&t, STORE_TRIAL_FAILED, STORE_FAILURE_DEPLOY_ERROR);
		snprintf(t.message, sizeof(t.message), "%s", error_str(&err, k));
		finish_trial(r, &t);
		return;
	}
	k = store_trial_set_server(r->store, r->trial_id, deploy_get_pgid(r->deploy), NULL, r->log_path, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	runner_set_phase(r, RUNNER_DEPLOYING);
}

/* ---- the operator's quality check ---- */

static int on_qc_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;
	struct trial_result t;

	if (r->action == RUNNER_ACTION_FINISH)
		return 0; /* failing: runner_finish frees everything */

	trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_QUALITY_CHECK_FAILED);
	snprintf(t.message, sizeof(t.message), "quality check did not finish in %llu s",
		 (unsigned long long)(QUALITY_CHECK_TIMEOUT_USEC / USEC_PER_SEC));
	finish_trial(r, &t);
	return 0;
}

static int on_qc_exit(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct runner *r = userdata;
	struct trial_result t;

	if (r->action == RUNNER_ACTION_FINISH)
		return 0; /* failing: runner_finish frees everything */

	r->qc_pid = 0; /* reaped by sd-event */
	r->qc_child = sd_event_source_disable_unref(r->qc_child);
	r->qc_timer = sd_event_source_disable_unref(r->qc_timer);
	if (si->si_code == CLD_EXITED && si->si_status == 0) {
		start_probe(r);
		return 0;
	}
	trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_QUALITY_CHECK_FAILED);
	if (si->si_code == CLD_EXITED)
		snprintf(t.message, sizeof(t.message), "quality check %s exited with status %d (log: %s)",
			 r->study->quality_check[0], si->si_status, r->log_path);
	else
		snprintf(t.message, sizeof(t.message), "quality check %s killed by signal %d (log: %s)",
			 r->study->quality_check[0], si->si_status, r->log_path);
	finish_trial(r, &t);
	return 0;
}

/* GOODPUT_BASE_URL, GOODPUT_MODEL, GOODPUT_STUDY, GOODPUT_KNOBS (JSON) and
 * GOODPUT_KNOB_<NAME> for each knob, on top of our environment. */
static char **qc_environment(struct runner *r)
{
	size_t n_env = 0, n = 0;
	char **envp;
	_cleanup_(cjson_freep) char *knobs = cJSON_PrintUnformatted(r->knobs);

	while (environ[n_env])
		n_env++;
	envp = calloc(n_env + r->study->space->n_knobs + 5, sizeof(char *));
	if (!envp || !knobs)
		goto oom;
	for (size_t i = 0; i < n_env; i++)
		if (strncmp(environ[i], "GOODPUT_", 8) != 0 && !(envp[n++] = strdup(environ[i])))
			goto oom;
	if (asprintf(&envp[n++], "GOODPUT_BASE_URL=%s", deploy_get_base_url(r->deploy)) < 0 ||
	    asprintf(&envp[n++], "GOODPUT_MODEL=%s", r->study->model.name) < 0 ||
	    asprintf(&envp[n++], "GOODPUT_STUDY=%s", r->row.name) < 0 ||
	    asprintf(&envp[n++], "GOODPUT_KNOBS=%s", knobs) < 0)
		goto oom;
	for (size_t k = 0; k < r->study->space->n_knobs; k++) {
		char v[64], name[OPT_KNOB_NAME_MAX];
		const char *val = opt_config_text(r->study->space, &r->cand.config, k, v, sizeof(v));

		snprintf(name, sizeof(name), "%s", r->study->space->knobs[k].name);
		for (char *p = name; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		if (asprintf(&envp[n++], "GOODPUT_KNOB_%s=%s", name, val) < 0)
			goto oom;
	}
	return envp;
oom:
	for (size_t i = 0; envp && i < n; i++)
		free(envp[i]);
	free(envp);
	return NULL;
}

static void start_quality_check(struct runner *r)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t empty, def;
	struct trial_result t;
	char **envp = qc_environment(r);
	pid_t pid;
	int k;

	if (!envp) {
		runner_fail(r, "out of memory");
		return;
	}
	sigemptyset(&empty);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGCHLD);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, r->log_path, O_WRONLY | O_APPEND | O_CREAT, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &empty);
	posix_spawnattr_setsigdefault(&attr, &def);
	/* argv straight from the spec: no shell */
	k = -posix_spawnp(&pid, r->study->quality_check[0], &fa, &attr, (char *const *)r->study->quality_check, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	for (size_t i = 0; envp[i]; i++)
		free(envp[i]);
	free(envp);
	if (k < 0) {
		trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_QUALITY_CHECK_FAILED);
		snprintf(t.message, sizeof(t.message), "quality check %s could not be started: %s",
			 r->study->quality_check[0], strerror(-k));
		finish_trial(r, &t);
		return;
	}
	r->qc_pid = pid;
	k = sd_event_add_child(r->event, &r->qc_child, pid, WEXITED, on_qc_exit, r);
	if (k >= 0)
		k = sd_event_add_time_relative(r->event, &r->qc_timer, CLOCK_MONOTONIC, QUALITY_CHECK_TIMEOUT_USEC,
					       USEC_PER_SEC, on_qc_timeout, r);
	if (k < 0) {
		runner_fail(r, "cannot watch the quality check");
		return;
	}
	(void)sd_event_source_set_description(r->qc_child, "runner-quality-check");
	runner_set_phase(r, RUNNER_QUALITY_CHECK);
}

/* ---- probing ---- */

static void on_probe_event(struct probe *p, const struct probe_event *ev, void *userdata)
{
	struct runner *r = userdata;
	struct error err = { 0 };
	int k;

	if (r->action == RUNNER_ACTION_FINISH)
		return; /* failing: runner_finish frees everything */

	if (ev->kind == PROBE_EVENT_LOAD_POINT_START) {
		r->status.current_rate = ev->rate;
		return;
	}
	if (ev->kind != PROBE_EVENT_LOAD_POINT_DONE || !ev->point)
		return;
	k = store_load_point_insert(r->store, r->trial_id, r->n_points + 1, ev->point->saturation ? "saturation" : "search",
				    &ev->point->result, NULL, &err);
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
		finish_trial(r, &t);
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
	finish_trial(r, &t);
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
		k = sd_event_add_time_relative(r->event, &r->settle_timer, CLOCK_MONOTONIC, SETTLE_USEC, 1000, on_settle,
					       r);
		if (k >= 0) {
			(void)sd_event_source_set_description(r->settle_timer, "runner-settle");
			return;
		}
	}
	classify_probe(r, result);
}

static void start_probe(struct runner *r)
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
		finish_trial(r, &t);
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
	finish_trial(r, &t);
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
	_cleanup_(cjson_freep) char *knobs_json = NULL;
	struct store_trial row = { 0 };
	struct error err = { 0 };
	char key[OPT_KEY_MAX];
	const char *dry = r->opts.dry_run ? "dry-run-" : "";
	int k;

	if (runner_settle_request(r))
		return;
	if (r->wall_expired) {
		snprintf(r->message, sizeof(r->message), "wall-time budget reached");
		runner_finish(r, RUNNER_END_DONE);
		return;
	}
	runner_set_phase(r, RUNNER_PLANNING);
	k = opt_next(r->study->space, &r->settings, &r->history, &r->cand, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	if (r->cand.ask == OPT_ASK_DONE) {
		snprintf(r->message, sizeof(r->message), "%s", opt_done_reason_to_string(r->cand.reason));
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
