/* runner-plan-twin.c — the twin planner ("search.strategy": "twin"): the
 * digital twin (twin/twin.h) asked instead of opt_next.
 *
 * The twin is made once per planner from the spec (model, GPU, price,
 * scenario, workload, SLA). Before its first ask the planner looks up a
 * stored calibration for the key engine|engine_version|gpu|driver|model
 * (from the host facts: the first ask waits for them) and passes it as the
 * warm start. Each ask rebuilds the twin's history from the runner's — every
 * finished trial's outcome and bit-exact cost, in the same order as
 * opt_next's history — and from the store: its max rate, the prediction
 * stored with it and its load points; then it runs twin_next.
 *
 * twin_next costs seconds of CPU, so it never runs on the loop: the planner
 * forks a child, which inherits the twin, settings, history and warm
 * calibration, computes the answer, writes it as one JSON text
 * (twin_candidate_to_json, bit-exact) to a pipe and _exit()s. The loop
 * reads the pipe (an io source) and watches the child (a child source);
 * once both ended, the answer goes to the planner's callback. A child that
 * dies or answers nonsense ends the ask with an error that says so; cancel
 * kills it.
 *
 * When the twin says done, a good fit (calibrated, no fallback) is stored
 * for the key, replacing an older one (after drift too); each proposal
 * carries what the twin predicted for it, which the runner stores with the
 * trial for the report. */
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
#include "macro.h"
#include "runner-planner.h"
#include "spawn-util.h"
#include "time-util.h"
#include "twin.h"

#define TWIN_ANSWER_MAX (4u << 20)

struct twin_planner {
	struct runner_planner base;
	struct runner_planner_env env;
	struct twin *twin;
	struct twin_settings settings;
	struct twin_candidate cand; /* the last answer (valid once asked) */
	bool asked;

	/* the warm start */
	bool key_known;
	struct twin_calibration keycal; /* key fields only */
	char key[5 * TWIN_KEY_FIELD_MAX + SIM_NAME_MAX];
	struct twin_calibration warm;
	bool have_warm;

	struct twin_history hist; /* rebuilt before each ask */

	/* the child computing twin_next */
	pid_t pid; /* 0: none */
	int fd;    /* its pipe's read end (-1: none) */
	sd_event_source *io, *child;
	char *buf;
	size_t len;
	bool eof, exited;
	int code, status; /* the child's siginfo code and status */
	uint64_t ask_usec;
};

static void copy_field(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
	/* the key joins fields with '|' */
	for (char *p = dst; *p; p++)
		if (*p == '|')
			*p = '/';
}

/* ---- the warm start ---- */

/* The key from the host facts (what is known of them). */
static void make_key(struct twin_planner *t, const char *host_json)
{
	_cleanup_(cJSON_Deletep) cJSON *host = NULL;
	struct twin_calibration *c = &t->keycal;
	const cJSON *v;
	const char *engine_version = NULL, *gpu = t->env.study->gpu.type, *driver = NULL;

	*c = (struct twin_calibration){ 0 };
	if (host_json)
		host = cJSON_ParseWithLength(host_json, strlen(host_json));
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
	if (t->env.dry_run)
		engine_version = "dry-run";
	copy_field(c->engine, sizeof(c->engine), t->env.profile->name);
	copy_field(c->engine_version, sizeof(c->engine_version), engine_version);
	copy_field(c->gpu, sizeof(c->gpu), gpu);
	copy_field(c->driver, sizeof(c->driver), driver);
	copy_field(c->model, sizeof(c->model), t->env.study->model.name);
	if (twin_calibration_key(c, t->key, sizeof(t->key)) < 0)
		snprintf(t->key, sizeof(t->key), "%s|||%s|%s", c->engine, c->gpu, c->model);
	t->key_known = true;
}

static void lookup_warm(struct twin_planner *t, const char *host_json)
{
	struct store_twin_calibration row = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	const char *name = t->env.study_name;
	struct error err = { 0 };
	int k;

	make_key(t, host_json);
	k = store_twin_calibration_get(t->env.store, t->key, &row, &err);
	if (k == -ENOENT) {
		log_info("study %s: twin: no stored calibration for %s: a cold start", name, t->key);
		return;
	}
	if (k < 0) {
		log_warning("study %s: twin: %s; a cold start", name, error_str(&err, k));
		return;
	}
	j = cJSON_ParseWithLength(row.calibration_json, strlen(row.calibration_json));
	k = j ? twin_calibration_from_json(j, "calibration", &t->warm, &err) : -EBADMSG;
	if (k < 0)
		log_warning("study %s: twin: the stored calibration for %s is unreadable (%s); a cold start", name,
			    t->key, k == -EBADMSG ? "not JSON" : error_str(&err, k));
	else {
		t->have_warm = true;
		log_info("study %s: twin: warm start from the calibration stored for %s by study %lld (fit error "
			 "%.1f%%)",
			 name, t->key, (long long)row.study_id, 100 * t->warm.fit_error);
	}
	store_twin_calibration_done(&row);
}

/* The study ends: keep a good calibration for the next study on this key. */
static void save_calibration(struct twin_planner *t)
{
	const struct twin_candidate *c = &t->cand;
	const char *name = t->env.study_name;
	struct store_twin_calibration row = { 0 };
	struct twin_calibration cal;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	struct error err = { 0 };
	int k;

	if (!c->calibrated || c->fallback || !t->key_known)
		return;
	twin_calibration_from_fit(&c->fit, c->tol, &cal);
	memcpy(cal.engine, t->keycal.engine, sizeof(cal.engine));
	memcpy(cal.engine_version, t->keycal.engine_version, sizeof(cal.engine_version));
	memcpy(cal.gpu, t->keycal.gpu, sizeof(cal.gpu));
	memcpy(cal.driver, t->keycal.driver, sizeof(cal.driver));
	memcpy(cal.model, t->keycal.model, sizeof(cal.model));
	k = twin_calibration_to_json(&cal, &j);
	if (k >= 0 && !(text = cJSON_PrintUnformatted(j)))
		k = -ENOMEM;
	if (k < 0) {
		log_warning("study %s: twin: cannot describe the calibration: %s", name, strerror(-k));
		return;
	}
	row.key = t->key;
	row.engine = cal.engine;
	row.engine_version = cal.engine_version;
	row.gpu = cal.gpu;
	row.driver = cal.driver;
	row.model = cal.model;
	row.calibration_json = text;
	row.fit_error = cal.fit_error;
	row.cost_error = cal.cost_error;
	row.study_id = t->env.study_id;
	k = store_twin_calibration_upsert(t->env.store, &row, &err);
	if (k < 0)
		log_warning("study %s: twin: %s", name, error_str(&err, k));
	else
		log_info("study %s: twin: calibration stored for %s (fit error %.1f%%%s)", name, t->key,
			 100 * cal.fit_error, c->drift ? ", replacing the one that drifted" : "");
}

/* ---- the history ---- */

static const struct store_trial *find_row(const struct store_trial *rows, size_t n, int64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].id == id)
			return &rows[i];
	return NULL;
}

static int add_points(struct twin_planner *t, int64_t trial_id, struct twin_trial *tt, struct error *err)
{
	struct store_load_point *lp = NULL;
	size_t n = 0;
	int k;

	k = store_load_point_list(t->env.store, trial_id, &lp, &n, err);
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

/* The twin's history: the runner's (same order, bit-exact costs) with what
 * the store holds of each trial. */
static int build_history(struct twin_planner *t, const struct runner_ask *a, struct error *err)
{
	struct store_trial *rows = NULL;
	size_t n = 0;
	int k;

	twin_history_done(&t->hist);
	twin_history_init(&t->hist);
	k = store_trial_history(t->env.store, t->env.study_id, &rows, &n, err);
	if (k < 0)
		return k;
	for (size_t i = 0; i < a->history->n && k >= 0; i++) {
		const struct store_trial *row = find_row(rows, n, a->trial_ids[i]);
		struct twin_trial tt = { .trial = a->history->trials[i], .predicted_cost = NAN };

		if (row) {
			tt.max_rate = isfinite(row->max_rate) && row->max_rate > 0 ? row->max_rate : 0;
			tt.predicted_cost = row->predicted_cost;
			k = add_points(t, row->id, &tt, err);
		}
		if (k >= 0) {
			k = twin_history_add(&t->hist, &tt);
			if (k < 0)
				error_set(err, k, "twin: cannot add trial %zu to its history", i + 1);
		}
	}
	store_trial_array_free(rows, n);
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

_noreturn_ static void twin_child(struct twin_planner *t, int fd)
{
	struct twin_candidate cand;
	struct error err = { 0 };
	cJSON *j = NULL;
	char *text;
	int k;

	k = twin_next(t->twin, &t->settings, &t->hist, t->have_warm ? &t->warm : NULL, &cand, &err);
	if (k >= 0)
		k = twin_candidate_to_json(t->env.study->space, &cand, &j);
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

static void twin_cancel(struct runner_planner *p)
{
	struct twin_planner *t = (struct twin_planner *)p;

	t->io = sd_event_source_disable_unref(t->io);
	t->child = sd_event_source_disable_unref(t->child);
	if (t->pid > 0) {
		/* it only computes: gone at once, so reaping it here does not wait */
		(void)kill(t->pid, SIGKILL);
		(void)waitpid(t->pid, NULL, 0);
		t->pid = 0;
	}
	t->fd = t->fd >= 0 ? safe_close(t->fd) : -1;
	free(t->buf);
	t->buf = NULL;
	t->len = 0;
}

static void twin_describe(const struct runner_planner *p, char *buf, size_t size)
{
	const struct twin_planner *t = (const struct twin_planner *)p;
	const struct twin_candidate *c = &t->cand;
	char fit[48] = "";

	if (!t->asked) {
		snprintf(buf, size, "twin");
		return;
	}
	if (c->calibrated)
		snprintf(fit, sizeof(fit), ", fit error %.1f%%", 100 * c->fit.error);
	snprintf(buf, size, "twin %s%s%s%s%s", twin_phase_to_string(c->phase), c->warm ? ", warm" : "",
		 c->drift ? ", drift" : "", c->fallback ? ", fallback" : "", fit);
}

/* Ends the ask with an error (the planner may be freed in the callback). */
static void fail_ask(struct twin_planner *t, int r, const char *msg)
{
	twin_cancel(&t->base);
	t->base.cb(&t->base, r, NULL, msg, t->base.userdata);
}

/* The child's answer as the runner's; -errno with msg when there is none. */
static int read_answer(struct twin_planner *t, struct twin_candidate *ret, char *msg, size_t size)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct error err = { 0 };
	const cJSON *e;
	int k;

	j = t->len ? cJSON_ParseWithLength(t->buf, t->len) : NULL;
	e = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
	if (cJSON_IsString(e)) {
		snprintf(msg, size, "twin: %s", e->valuestring);
		return -EIO;
	}
	if (t->code != CLD_EXITED || t->status != 0 || !j) {
		if (t->code == CLD_EXITED)
			snprintf(msg, size, "twin: the planning process exited with status %d%s", t->status,
				 j ? "" : " without an answer");
		else
			snprintf(msg, size, "twin: the planning process died of signal %d (%s)", t->status,
				 strsignal(t->status));
		return -ECHILD;
	}
	k = twin_candidate_from_json(t->env.study->space, j, "candidate", ret, &err);
	if (k < 0) {
		snprintf(msg, size, "twin: unreadable answer: %s", error_str(&err, k));
		return k;
	}
	return 0;
}

static void twin_answer(struct twin_planner *t)
{
	struct runner_answer a = { 0 };
	struct twin_candidate cand;
	char msg[ERROR_MSG_MAX], status[128];
	int k;

	/* sd-event reaps it after the child callback; reap it here in case */
	if (t->pid > 0)
		(void)waitpid(t->pid, NULL, WNOHANG);
	t->pid = 0;
	k = read_answer(t, &cand, msg, sizeof(msg));
	twin_cancel(&t->base);
	if (k < 0) {
		t->base.cb(&t->base, k, NULL, msg, t->base.userdata);
		return;
	}
	t->cand = cand;
	t->asked = true;
	twin_describe(&t->base, status, sizeof(status));
	log_info("study %s: %s (%.1f s): %s", t->env.study_name, status,
		 (double)(mono_usec() - t->ask_usec) / USEC_PER_SEC, cand.message);
	a.reason = cand.opt.reason;
	if (cand.opt.ask == OPT_ASK_DONE) {
		save_calibration(t);
		snprintf(a.message, sizeof(a.message), "%s", cand.message);
	} else {
		a.n = 1;
		a.proposals[0] = (struct runner_proposal){ .ask = cand.opt.ask,
							   .config = cand.opt.config,
							   .attempt = cand.opt.attempt,
							   .predicted_cost = cand.predicted_cost };
	}
	t->base.cb(&t->base, 0, &a, NULL, t->base.userdata);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct twin_planner *t = userdata;
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
		if (t->len + (size_t)n > TWIN_ANSWER_MAX) {
			fail_ask(t, -E2BIG, "twin: the planning process's answer is too large");
			return 0;
		}
		char *b = realloc(t->buf, t->len + (size_t)n + 1);
		if (!b) {
			fail_ask(t, -ENOMEM, "out of memory reading the twin's answer");
			return 0;
		}
		memcpy(b + t->len, buf, (size_t)n);
		t->buf = b;
		t->len += (size_t)n;
		t->buf[t->len] = 0;
	}
	/* EOF (or an error): the child closed its end */
	t->io = sd_event_source_disable_unref(t->io);
	t->eof = true;
	if (t->exited)
		twin_answer(t);
	return 0;
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct twin_planner *t = userdata;

	t->child = sd_event_source_disable_unref(t->child);
	t->exited = true;
	t->code = si->si_code;
	t->status = si->si_status;
	if (t->eof)
		twin_answer(t);
	else if (si->si_code != CLD_EXITED) {
		/* killed: its pipe may be held open by nobody else, but do not wait on it */
		t->io = sd_event_source_disable_unref(t->io);
		t->eof = true;
		twin_answer(t);
	}
	return 0;
}

/* Forks the child for one ask and watches it. */
static int start_child(struct twin_planner *t, struct error *err)
{
	int fds[2], k;
	pid_t pid;

	k = spawn_block_sigchld();
	if (k < 0 || pipe2(fds, O_CLOEXEC) < 0)
		return error_set(err, k < 0 ? k : -errno, "twin: cannot create the planning process's pipe");
	pid = fork();
	if (pid < 0) {
		k = -errno;
		safe_close(fds[0]);
		safe_close(fds[1]);
		return error_set(err, k, "twin: fork: %s", strerror(-k));
	}
	if (pid == 0) {
		safe_close(fds[0]);
		twin_child(t, fds[1]);
	}
	safe_close(fds[1]);
	t->pid = pid;
	t->fd = fds[0];
	t->eof = t->exited = false;
	t->len = 0;
	t->ask_usec = mono_usec();
	(void)fcntl(t->fd, F_SETFL, O_NONBLOCK);
	k = sd_event_add_io(t->env.event, &t->io, t->fd, EPOLLIN, on_io, t);
	if (k >= 0) {
		(void)sd_event_source_set_description(t->io, "runner-twin-pipe");
		k = sd_event_add_child(t->env.event, &t->child, pid, WEXITED, on_child, t);
	}
	if (k < 0) {
		twin_cancel(&t->base);
		return error_set(err, k, "twin: cannot watch the planning process");
	}
	(void)sd_event_source_set_description(t->child, "runner-twin-child");
	return 0;
}

static int twin_ask(struct runner_planner *p, const struct runner_ask *a, struct runner_answer *ret, struct error *err)
{
	struct twin_planner *t = (struct twin_planner *)p;
	int k;

	if (a->k != 1 || a->n_pending > 0)
		return error_set(err, -EOPNOTSUPP, "twin: plans one trial at a time");
	if (t->pid > 0)
		return error_set(err, -EBUSY, "twin: an ask is in flight");
	if (!t->key_known) {
		/* the key needs the host facts: wait for them (not in a dry run) */
		if (!t->env.dry_run && !a->host_json && a->host_pending)
			return RUNNER_ASK_WAIT_HOST;
		lookup_warm(t, a->host_json);
	}
	k = build_history(t, a, err);
	if (k < 0)
		return k;
	k = start_child(t, err);
	if (k < 0)
		return k;
	return RUNNER_ASK_PENDING;
}

static void twin_free_planner(struct runner_planner *p)
{
	struct twin_planner *t = (struct twin_planner *)p;

	twin_cancel(p);
	twin_free(t->twin);
	twin_history_done(&t->hist);
	free(t);
}

static const struct runner_planner_ops twin_ops = {
	.ask = twin_ask,
	.cancel = twin_cancel,
	.describe = twin_describe,
	.free = twin_free_planner,
};

/* The twin's view of the study. */
static int make_setup(const struct runner_planner_env *env, struct twin_setup *setup, struct error *err)
{
	const struct study *s = env->study;

	twin_setup_init(setup);
	if (strlen(s->model.name) >= sizeof(setup->model))
		return error_set(err, -EINVAL, "model.name: too long for the twin (%s)", s->model.name);
	snprintf(setup->model, sizeof(setup->model), "%s", s->model.name);
	if (s->gpu.type) {
		if (strlen(s->gpu.type) >= sizeof(setup->gpu))
			return error_set(err, -EINVAL, "gpu.type: too long for the twin (%s)", s->gpu.type);
		snprintf(setup->gpu, sizeof(setup->gpu), "%s", s->gpu.type);
	}
	setup->gpus = s->gpu.count;
	if (strcmp(env->profile->name, "trtllm") == 0)
		snprintf(setup->profile, sizeof(setup->profile), "trtllm");
	setup->usd_per_gpu_hour = s->gpu.price_per_gpu_hour;
	setup->scenario = s->scenario;
	setup->cost_tokens = s->cost_tokens;
	setup->workload = s->workload;
	setup->workload.dataset_path = NULL;
	setup->sla = s->sla;
	if (s->probe.tolerance > 0)
		setup->rel_tol = s->probe.tolerance;
	/* ranking runs every configuration: a smaller run per prediction */
	if (setup->workload.num_prompts > 64)
		setup->rank_num_prompts = 64;
	return 0;
}

int runner_planner_twin_new(const struct runner_planner_env *env, runner_answer_fn cb, void *userdata,
			    struct runner_planner **ret, struct error *err)
{
	struct twin_setup setup;
	struct twin_planner *t;
	int k;

	k = make_setup(env, &setup, err);
	if (k < 0)
		return k;
	t = calloc(1, sizeof(*t));
	if (!t)
		return error_set(err, -ENOMEM, "out of memory");
	t->base = (struct runner_planner){ .ops = &twin_ops, .cb = cb, .userdata = userdata };
	t->env = *env;
	t->fd = -1;
	twin_history_init(&t->hist);
	k = twin_new(env->study->space, &setup, &t->twin, err);
	if (k < 0) {
		twin_free_planner(&t->base);
		return error_prefix(err, k, "search.strategy twin");
	}
	twin_settings_init(&t->settings);
	t->settings.plain = *env->settings;
	*ret = &t->base;
	return 0;
}
