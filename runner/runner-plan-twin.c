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
 * forks a child (child.h), which inherits the twin, settings, history and
 * warm calibration, computes the answer and writes it as one JSON text
 * (twin_candidate_to_json, bit-exact) to the pipe the loop captures; once
 * it has exited, the answer goes to the planner's callback. A child that
 * dies or answers nonsense ends the ask with an error that says so; cancel
 * kills it.
 *
 * When the twin says done, a good fit (calibrated, no fallback) is stored
 * for the key, replacing an older one (after drift too); each proposal
 * carries what the twin predicted for it, which the runner stores with the
 * trial for the report. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "runner-planner.h"
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

	struct child *child; /* computing twin_next (NULL: no ask in flight) */
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

static int write_all(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, s, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		s += w;
		len -= (size_t)w;
	}
	return 0;
}

/* In the forked copy: twin_next, its answer (or its error) as one JSON
 * text on out_fd. Returns the exit status. */
static int twin_child(void *userdata, int out_fd)
{
	struct twin_planner *t = userdata;
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
			return 2;
	}
	text = cJSON_PrintUnformatted(j);
	if (!text)
		return 2;
	if (write_all(out_fd, text, strlen(text)) < 0 || write_all(out_fd, "\n", 1) < 0)
		return 3;
	return k < 0 ? 1 : 0;
}

/* ---- the parent ---- */

static void twin_cancel(struct runner_planner *p)
{
	struct twin_planner *t = (struct twin_planner *)p;

	/* it only computes: gone at once, so reaping it does not wait */
	t->child = child_free(t->child);
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

/* The child's answer; -errno with msg when there is none. */
static int read_answer(struct twin_planner *t, const struct child_exit *how, struct twin_candidate *ret, char *msg,
		       size_t size)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct error err = { 0 };
	bool truncated = false;
	const char *text = child_get_output(t->child, &truncated);
	const cJSON *e;
	char buf[128];
	int k;

	if (truncated) {
		snprintf(msg, size, "twin: the planning process's answer is too large");
		return -E2BIG;
	}
	j = text[0] ? cJSON_ParseWithLength(text, strlen(text)) : NULL;
	e = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
	if (cJSON_IsString(e)) {
		snprintf(msg, size, "twin: %s", e->valuestring);
		return -EIO;
	}
	if (!child_exit_ok(how) || !j) {
		snprintf(msg, size, "twin: the planning process %s%s", child_exit_to_string(how, buf, sizeof(buf)),
			 how->code == CLD_EXITED && !j ? " without an answer" : "");
		return -ECHILD;
	}
	k = twin_candidate_from_json(t->env.study->space, j, "candidate", ret, &err);
	if (k < 0) {
		snprintf(msg, size, "twin: unreadable answer: %s", error_str(&err, k));
		return k;
	}
	return 0;
}

static void on_child_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct twin_planner *t = userdata;
	struct runner_answer a = { 0 };
	struct twin_candidate cand;
	char msg[ERROR_MSG_MAX], status[128];
	int k;

	k = read_answer(t, how, &cand, msg, sizeof(msg));
	t->child = child_free(t->child);
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
							   .predicted_cost = cand.predicted_cost,
							   .alone = cand.opt.phase == OPT_PHASE_CONFIRM };
	}
	/* the planner may be freed in the callback: touch nothing after it */
	t->base.cb(&t->base, 0, &a, NULL, t->base.userdata);
}

/* Forks the child for one ask and watches it. */
static int start_child(struct twin_planner *t, struct error *err)
{
	const struct child_options o = {
		.fork_fn = twin_child,
		.fork_userdata = t,
		.output = CHILD_OUTPUT_CAPTURE,
		.capture_max = TWIN_ANSWER_MAX,
		.description = "runner-twin",
	};
	int k;

	t->ask_usec = mono_usec();
	k = child_spawn(t->env.event, &o, on_child_exit, t, &t->child);
	if (k < 0)
		return error_set(err, k, "twin: cannot start the planning process: %s", strerror(-k));
	return 0;
}

static int twin_ask(struct runner_planner *p, const struct runner_ask *a, struct runner_answer *ret, struct error *err)
{
	struct twin_planner *t = (struct twin_planner *)p;
	int k;

	/* one trial at a time: with trials in flight it waits for their outcome
	 * (an empty answer), and asked for several it proposes one */
	if (a->n_pending > 0) {
		*ret = (struct runner_answer){ .reason = OPT_DONE_NONE };
		snprintf(ret->message, sizeof(ret->message), "twin: waits for the trials in flight");
		return RUNNER_ASK_ANSWERED;
	}
	if (t->child)
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
