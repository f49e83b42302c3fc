/* runner-twin.c — the study runner's twin strategy ("search.strategy":
 * "twin"): the digital twin (optimizer/twin.h) asked instead of opt_next.
 *
 * The twin is made once per runner from the spec (model, GPU, price,
 * scenario, workload, SLA). Before its first ask the runner looks up a
 * stored calibration for the key engine|engine_version|gpu|driver|model
 * (the host facts of runner-host.c; the first ask waits for them) and
 * passes it as the warm start. Each ask rebuilds the twin's history from
 * the store — every finished trial's outcome and bit-exact cost (the same
 * order and values as opt_next's history), its max rate, the prediction
 * stored with it, and its load points — and runs twin_next.
 *
 * twin_next costs seconds of CPU, so it never runs on the loop: the runner
 * forks a child, which inherits the twin, settings, history and warm
 * calibration, computes the answer, writes it as one JSON text
 * (twin_candidate_to_json, bit-exact) to a pipe and _exit()s. The loop
 * reads the pipe (an io source) and watches the child (a child source);
 * once both ended, the answer continues the trial loop exactly as opt_next's
 * would. A child that dies or answers nonsense fails the study with a clear
 * message; pause, stop and cancel kill it.
 *
 * At the end, a good fit (calibrated, no fallback) is stored for the key,
 * replacing an older one (after drift too); each trial keeps what the twin
 * predicted for it (trials.predicted_cost) for the report. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json-util.h"
#include "log.h"
#include "runner-internal.h"
#include "spawn-util.h"
#include "time-util.h"

#define TWIN_ANSWER_MAX (4u << 20)

static void copy_field(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
	/* the key joins fields with '|' */
	for (char *p = dst; *p; p++)
		if (*p == '|')
			*p = '/';
}

int runner_twin_init(struct runner *r, struct error *err)
{
	const struct study *s = r->study;
	struct twin_setup setup;
	int k;

	r->twin_fd = -1;
	twin_history_init(&r->twin_hist);
	if (!s->search.strategy || strcmp(s->search.strategy, "twin") != 0)
		return 0;
	r->twin_on = true;
	twin_setup_init(&setup);
	if (strlen(s->model.name) >= sizeof(setup.model))
		return error_set(err, -EINVAL, "model.name: too long for the twin (%s)", s->model.name);
	snprintf(setup.model, sizeof(setup.model), "%s", s->model.name);
	if (s->gpu.type) {
		if (strlen(s->gpu.type) >= sizeof(setup.gpu))
			return error_set(err, -EINVAL, "gpu.type: too long for the twin (%s)", s->gpu.type);
		snprintf(setup.gpu, sizeof(setup.gpu), "%s", s->gpu.type);
	}
	setup.gpus = s->gpu.count;
	if (strcmp(r->profile->name, "trtllm") == 0)
		snprintf(setup.profile, sizeof(setup.profile), "trtllm");
	setup.usd_per_gpu_hour = s->gpu.price_per_gpu_hour;
	setup.scenario = s->scenario;
	setup.cost_tokens = s->cost_tokens;
	setup.workload = s->workload;
	setup.workload.dataset_path = NULL;
	setup.sla = s->sla;
	if (s->probe.tolerance > 0)
		setup.rel_tol = s->probe.tolerance;
	/* ranking runs every configuration: a smaller run per prediction */
	if (setup.workload.num_prompts > 64)
		setup.rank_num_prompts = 64;
	k = twin_new(s->space, &setup, &r->twin, err);
	if (k < 0)
		return error_prefix(err, k, "search.strategy twin");
	twin_settings_init(&r->twin_settings);
	r->twin_settings.plain = r->settings;
	return 0;
}

void runner_twin_free(struct runner *r)
{
	runner_twin_kill(r);
	r->twin = twin_free(r->twin);
	twin_history_done(&r->twin_hist);
}

/* ---- the warm start ---- */

/* The key from the host facts (what is known of them). */
static void make_key(struct runner *r)
{
	_cleanup_(cJSON_Deletep) cJSON *host = NULL;
	struct twin_calibration *c = &r->twin_keycal;
	const cJSON *v;
	const char *engine_version = NULL, *gpu = r->study->gpu.type, *driver = NULL;

	*c = (struct twin_calibration){ 0 };
	if (r->host_json)
		host = cJSON_ParseWithLength(r->host_json, strlen(r->host_json));
	if (host) {
		v = cJSON_GetObjectItemCaseSensitive(host, "engine_version");
		if (cJSON_IsString(v))
			engine_version = v->valuestring;
		v = cJSON_GetObjectItemCaseSensitive(host, "gpu_model");
		if (cJSON_IsString(v))
			gpu = v->valuestring;
		v = cJSON_GetObjectItemCaseSensitive(host, "driver_version");
		if (cJSON_IsString(v))
			driver = v->valuestring;
	}
	/* a dry run calibrates the twin against the sim core itself: never mix
	 * it with a real server's */
	if (r->opts.dry_run)
		engine_version = "dry-run";
	copy_field(c->engine, sizeof(c->engine), r->profile->name);
	copy_field(c->engine_version, sizeof(c->engine_version), engine_version);
	copy_field(c->gpu, sizeof(c->gpu), gpu);
	copy_field(c->driver, sizeof(c->driver), driver);
	copy_field(c->model, sizeof(c->model), r->study->model.name);
	if (twin_calibration_key(c, r->twin_key, sizeof(r->twin_key)) < 0)
		snprintf(r->twin_key, sizeof(r->twin_key), "%s|||%s|%s", c->engine, c->gpu, c->model);
	r->twin_key_known = true;
}

static void lookup_warm(struct runner *r)
{
	struct store_twin_calibration row = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct error err = { 0 };
	int k;

	make_key(r);
	k = store_twin_calibration_get(r->store, r->twin_key, &row, &err);
	if (k == -ENOENT) {
		log_info("study %s: twin: no stored calibration for %s: a cold start", r->row.name, r->twin_key);
		return;
	}
	if (k < 0) {
		log_warning("study %s: twin: %s; a cold start", r->row.name, error_str(&err, k));
		return;
	}
	j = cJSON_ParseWithLength(row.calibration_json, strlen(row.calibration_json));
	k = j ? twin_calibration_from_json(j, "calibration", &r->twin_warm, &err) : -EBADMSG;
	if (k < 0)
		log_warning("study %s: twin: the stored calibration for %s is unreadable (%s); a cold start",
			    r->row.name, r->twin_key, k == -EBADMSG ? "not JSON" : error_str(&err, k));
	else {
		r->twin_have_warm = true;
		log_info("study %s: twin: warm start from the calibration stored for %s by study %lld (fit error "
			 "%.1f%%)",
			 r->row.name, r->twin_key, (long long)row.study_id, 100 * r->twin_warm.fit_error);
	}
	store_twin_calibration_done(&row);
}

void runner_twin_host_known(struct runner *r)
{
	if (!r->twin_wait_host)
		return;
	r->twin_wait_host = false;
	runner_schedule(r, RUNNER_ACTION_PLAN);
}

/* ---- the history ---- */

static const struct store_trial *find_row(const struct store_trial *t, size_t n, int64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].id == id)
			return &t[i];
	return NULL;
}

static int add_points(struct runner *r, int64_t trial_id, struct twin_trial *tt, struct error *err)
{
	struct store_load_point *lp = NULL;
	size_t n = 0;
	int k;

	k = store_load_point_list(r->store, trial_id, &lp, &n, err);
	if (k < 0)
		return k;
	for (size_t i = 0; i < n && tt->n_points < TWIN_POINTS_MAX; i++) {
		_cleanup_(cJSON_Deletep) cJSON *j = NULL;
		struct probe_result pr;
		struct twin_point pt;
		struct error e = { 0 };

		if (!lp[i].result_json)
			continue;
		j = cJSON_ParseWithLength(lp[i].result_json, strlen(lp[i].result_json));
		/* a point without the percentiles the twin reads says nothing to it */
		if (!j || probe_result_from_json(j, &pr, &e) < 0 || twin_point_from_result(&pr, &pt) < 0)
			continue;
		if (lp[i].phase && strcmp(lp[i].phase, "saturation") == 0)
			pt.rate = INFINITY;
		tt->points[tt->n_points++] = pt;
	}
	store_load_point_array_free(lp, n);
	return 0;
}

/* The twin's history: the runner's opt history (same order, bit-exact
 * costs) with what the store holds of each trial. */
static int build_history(struct runner *r, struct error *err)
{
	struct store_trial *t = NULL;
	size_t n = 0;
	int k;

	twin_history_done(&r->twin_hist);
	twin_history_init(&r->twin_hist);
	k = store_trial_history(r->store, r->study_id, &t, &n, err);
	if (k < 0)
		return k;
	for (size_t i = 0; i < r->history.n && k >= 0; i++) {
		const struct store_trial *row = find_row(t, n, r->trial_ids[i]);
		struct twin_trial tt = { .trial = r->history.trials[i], .predicted_cost = NAN };

		if (row) {
			tt.max_rate = isfinite(row->max_rate) && row->max_rate > 0 ? row->max_rate : 0;
			tt.predicted_cost = row->predicted_cost;
			k = add_points(r, row->id, &tt, err);
		}
		if (k >= 0) {
			k = twin_history_add(&r->twin_hist, &tt);
			if (k < 0)
				error_set(err, k, "twin: cannot add trial %zu to its history", i + 1);
		}
	}
	store_trial_array_free(t, n);
	return k < 0 ? k : 0;
}

/* ---- the child ---- */

static void write_all(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, s, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);
		s += w;
		len -= (size_t)w;
	}
}

_noreturn_ static void twin_child(struct runner *r, int fd)
{
	struct twin_candidate cand;
	struct error err = { 0 };
	cJSON *j = NULL;
	char *text;
	int k;

	k = twin_next(r->twin, &r->twin_settings, &r->twin_hist, r->twin_have_warm ? &r->twin_warm : NULL, &cand, &err);
	if (k >= 0)
		k = twin_candidate_to_json(r->study->space, &cand, &j);
	if (k < 0) {
		j = cJSON_CreateObject();
		if (!j || !cJSON_AddStringToObject(j, "error", error_str(&err, k)))
			_exit(2);
	}
	text = cJSON_PrintUnformatted(j);
	if (!text)
		_exit(2);
	write_all(fd, text, strlen(text));
	write_all(fd, "\n", 1);
	_exit(k < 0 ? 1 : 0);
}

/* ---- the parent ---- */

void runner_twin_kill(struct runner *r)
{
	r->twin_wait_host = false;
	r->twin_io = sd_event_source_disable_unref(r->twin_io);
	r->twin_child = sd_event_source_disable_unref(r->twin_child);
	if (r->twin_pid > 0) {
		/* it only computes: gone at once, so reaping it here does not wait */
		(void)kill(r->twin_pid, SIGKILL);
		(void)waitpid(r->twin_pid, NULL, 0);
		r->twin_pid = 0;
	}
	r->twin_fd = r->twin_fd >= 0 ? safe_close(r->twin_fd) : -1;
	free(r->twin_buf);
	r->twin_buf = NULL;
	r->twin_len = 0;
}

static void twin_status_text(struct runner *r)
{
	const struct twin_candidate *c = &r->twin_cand;
	char fit[48] = "";

	if (c->calibrated)
		snprintf(fit, sizeof(fit), ", fit error %.1f%%", 100 * c->fit.error);
	snprintf(r->status.twin, sizeof(r->status.twin), "twin %s%s%s%s%s", twin_phase_to_string(c->phase),
		 c->warm ? ", warm" : "", c->drift ? ", drift" : "", c->fallback ? ", fallback" : "", fit);
}

/* The study ends: keep a good calibration for the next study on this key. */
static void save_calibration(struct runner *r)
{
	const struct twin_candidate *c = &r->twin_cand;
	struct store_twin_calibration row = { 0 };
	struct twin_calibration cal;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	struct error err = { 0 };
	int k;

	if (!c->calibrated || c->fallback || !r->twin_key_known)
		return;
	twin_calibration_from_fit(&c->fit, c->tol, &cal);
	memcpy(cal.engine, r->twin_keycal.engine, sizeof(cal.engine));
	memcpy(cal.engine_version, r->twin_keycal.engine_version, sizeof(cal.engine_version));
	memcpy(cal.gpu, r->twin_keycal.gpu, sizeof(cal.gpu));
	memcpy(cal.driver, r->twin_keycal.driver, sizeof(cal.driver));
	memcpy(cal.model, r->twin_keycal.model, sizeof(cal.model));
	k = twin_calibration_to_json(&cal, &j);
	if (k >= 0 && !(text = cJSON_PrintUnformatted(j)))
		k = -ENOMEM;
	if (k < 0) {
		log_warning("study %s: twin: cannot describe the calibration: %s", r->row.name, strerror(-k));
		return;
	}
	row.key = r->twin_key;
	row.engine = cal.engine;
	row.engine_version = cal.engine_version;
	row.gpu = cal.gpu;
	row.driver = cal.driver;
	row.model = cal.model;
	row.calibration_json = text;
	row.fit_error = cal.fit_error;
	row.cost_error = cal.cost_error;
	row.study_id = r->study_id;
	k = store_twin_calibration_upsert(r->store, &row, &err);
	if (k < 0)
		log_warning("study %s: twin: %s", r->row.name, error_str(&err, k));
	else
		log_info("study %s: twin: calibration stored for %s (fit error %.1f%%%s)", r->row.name, r->twin_key,
			 100 * cal.fit_error, c->drift ? ", replacing the one that drifted" : "");
}

static void twin_answer(struct runner *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct twin_candidate cand;
	struct error err = { 0 };
	char msg[ERROR_MSG_MAX];
	const cJSON *e;
	int code = r->twin_code, status = r->twin_status;
	int k;

	/* sd-event reaps it after the child callback; reap it here in case */
	if (r->twin_pid > 0)
		(void)waitpid(r->twin_pid, NULL, WNOHANG);
	r->twin_pid = 0;
	j = r->twin_len ? cJSON_ParseWithLength(r->twin_buf, r->twin_len) : NULL;
	runner_twin_kill(r);
	e = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
	if (cJSON_IsString(e)) {
		snprintf(msg, sizeof(msg), "twin: %s", e->valuestring);
		runner_fail(r, msg);
		return;
	}
	if (code != CLD_EXITED || status != 0 || !j) {
		if (code == CLD_EXITED)
			snprintf(msg, sizeof(msg), "twin: the planning process exited with status %d%s", status,
				 j ? "" : " without an answer");
		else
			snprintf(msg, sizeof(msg), "twin: the planning process died of signal %d (%s)", status,
				 strsignal(status));
		runner_fail(r, msg);
		return;
	}
	k = twin_candidate_from_json(r->study->space, j, "candidate", &cand, &err);
	if (k < 0) {
		snprintf(msg, sizeof(msg), "twin: unreadable answer: %s", error_str(&err, k));
		runner_fail(r, msg);
		return;
	}
	r->twin_cand = cand;
	r->twin_asked = true;
	r->cand = cand.opt;
	twin_status_text(r);
	log_info("study %s: %s (%.1f s): %s", r->row.name, r->status.twin,
		 (double)(mono_usec() - r->twin_ask_usec) / USEC_PER_SEC, cand.message);
	if (cand.opt.ask == OPT_ASK_DONE) {
		save_calibration(r);
		runner_plan_candidate(r, cand.message[0] ? cand.message : NULL);
		return;
	}
	runner_plan_candidate(r, NULL);
}

static int on_twin_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runner *r = userdata;
	char buf[65536];
	ssize_t n;

	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			break;
		if (r->twin_len + (size_t)n > TWIN_ANSWER_MAX) {
			runner_twin_kill(r);
			runner_fail(r, "twin: the planning process's answer is too large");
			return 0;
		}
		char *b = realloc(r->twin_buf, r->twin_len + (size_t)n + 1);
		if (!b) {
			runner_twin_kill(r);
			runner_fail(r, "out of memory reading the twin's answer");
			return 0;
		}
		memcpy(b + r->twin_len, buf, (size_t)n);
		r->twin_buf = b;
		r->twin_len += (size_t)n;
		r->twin_buf[r->twin_len] = 0;
	}
	/* EOF (or an error): the child closed its end */
	r->twin_io = sd_event_source_disable_unref(r->twin_io);
	r->twin_eof = true;
	if (r->twin_exited)
		twin_answer(r);
	return 0;
}

static int on_twin_child(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct runner *r = userdata;

	r->twin_child = sd_event_source_disable_unref(r->twin_child);
	r->twin_exited = true;
	r->twin_code = si->si_code;
	r->twin_status = si->si_status;
	if (r->twin_eof)
		twin_answer(r);
	else if (si->si_code != CLD_EXITED) {
		/* killed: its pipe may be held open by nobody else, but do not wait on it */
		r->twin_io = sd_event_source_disable_unref(r->twin_io);
		r->twin_eof = true;
		twin_answer(r);
	}
	return 0;
}

void runner_twin_ask(struct runner *r)
{
	struct error err = { 0 };
	int fds[2], k;
	pid_t pid;

	if (!r->twin_key_known) {
		/* the key needs the host facts: wait for them (not in a dry run) */
		if (!r->opts.dry_run && !r->host_json && r->host_job) {
			r->twin_wait_host = true;
			return;
		}
		lookup_warm(r);
	}
	k = build_history(r, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	k = spawn_block_sigchld();
	if (k < 0 || pipe2(fds, O_CLOEXEC) < 0) {
		runner_fail(r, "twin: cannot create the planning process's pipe");
		return;
	}
	pid = fork();
	if (pid < 0) {
		char msg[128];

		k = -errno;
		safe_close(fds[0]);
		safe_close(fds[1]);
		snprintf(msg, sizeof(msg), "twin: fork: %s", strerror(-k));
		runner_fail(r, msg);
		return;
	}
	if (pid == 0) {
		safe_close(fds[0]);
		twin_child(r, fds[1]);
	}
	safe_close(fds[1]);
	r->twin_pid = pid;
	r->twin_fd = fds[0];
	r->twin_eof = r->twin_exited = false;
	r->twin_len = 0;
	r->twin_ask_usec = mono_usec();
	(void)fcntl(r->twin_fd, F_SETFL, O_NONBLOCK);
	k = sd_event_add_io(r->event, &r->twin_io, r->twin_fd, EPOLLIN, on_twin_io, r);
	if (k >= 0) {
		(void)sd_event_source_set_description(r->twin_io, "runner-twin-pipe");
		k = sd_event_add_child(r->event, &r->twin_child, pid, WEXITED, on_twin_child, r);
	}
	if (k < 0) {
		runner_twin_kill(r);
		runner_fail(r, "twin: cannot watch the planning process");
		return;
	}
	(void)sd_event_source_set_description(r->twin_child, "runner-twin-child");
}
