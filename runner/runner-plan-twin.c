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
 * Asked for several configurations, or with trials in flight, the twin
 * answers each trial in flight with a stand-in — the prediction it was
 * asked with when the twin was calibrated then, else the constant liar
 * (opt_stand_in) — with no load points (the fit ignores it), and each of
 * its candidates goes in flight the same way before the next twin_next. A
 * confirmation of the answer while trials are in flight is not proposed:
 * the answer waits for them.
 *
 * twin_next costs seconds of CPU, so it never runs on the loop: the planner
 * forks a child (child.h), which inherits the twin, settings, history and
 * warm calibration, computes the answer and writes each candidate as one
 * JSON text per line (twin_candidate_to_json, bit-exact) to the pipe the
 * loop captures; once it has exited, the answer goes to the planner's
 * callback. A child that
 * dies or answers nonsense ends the ask with an error that says so; cancel
 * kills it.
 *
 * A good fit (calibrated, no fallback) is stored for the key, replacing an
 * older one (after drift too), after every answer that rests on trials the
 * last one did not: so a study that ends before the twin says done — its
 * budget spent on confirmations of a noisy measurement, its wall time out —
 * keeps what it learnt for the next one. Each proposal carries what the
 * twin predicted for it, which the runner stores with the trial for the
 * report. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "file-util.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "runner-internal.h"
#include "runner-planner.h"
#include "time-util.h"
#include "twin.h"

/* candidates and what the child computed (a few lines per configuration) */
#define TWIN_ANSWER_MAX (64u << 20)

struct twin_planner {
	struct runner_planner base;
	struct runner_planner_env env;
	struct twin *twin;
	const struct opt_space *space; /* the space the twin was made for */
	struct twin_settings settings;
	/* the model search (the default) instead of twin_next (strategy "twin") */
	bool model;
	struct twin_search_settings search;
	struct twin_candidate cand; /* the last answer (valid once asked) */
	bool asked;

	/* the warm start */
	bool key_known;
	struct twin_calibration keycal; /* key fields only */
	char key[5 * TWIN_KEY_FIELD_MAX + SIM_NAME_MAX];
	struct twin_calibration warm;
	bool have_warm;

	struct twin_history hist; /* rebuilt before each ask */
	size_t n_told;            /* of hist: the told trials (the rest stand in for trials in flight) */
	size_t saved_told;        /* n_told when the calibration was last stored */
	/* the ask in flight: the trials in flight, how many are wanted */
	struct runner_proposal pending[RUNNER_ASK_MAX];
	size_t n_pending, k;

	struct child *child; /* computing twin_next (NULL: no ask in flight) */
	uint64_t ask_usec;
	double ask_cpu; /* the CPU time the child said it spent (NAN: not said) */
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

/* Keeps a good calibration for the next study on this key (done: the
 * twin's last word, said in the journal). */
static void save_calibration(struct twin_planner *t, bool done)
{
	const struct twin_candidate *c = &t->cand;
	const char *name = t->env.study_name;
	struct store_twin_calibration row = { 0 };
	struct twin_calibration cal;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	struct error err = { 0 };
	int k;

	if (!c->calibrated || c->fallback || !t->key_known || (!done && t->n_told <= t->saved_told))
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
	if (k < 0) {
		log_warning("study %s: twin: %s", name, error_str(&err, k));
		return;
	}
	t->saved_told = t->n_told;
	if (done)
		log_info("study %s: twin: calibration stored for %s (fit error %.1f%%%s)", name, t->key,
			 100 * cal.fit_error, c->drift ? ", replacing the one that drifted" : "");
	else
		log_debug("study %s: twin: calibration of %zu trials stored for %s (fit error %.1f%%)", name, t->n_told,
			  t->key, 100 * cal.fit_error);
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
		/* the probe's point number, its prompt variant; a dry run's
		 * points were all drawn with the workload's seed (sim_find_max_rate) */
		pt.index = !t->env.dry_run && lp[i].seq > 0 ? lp[i].seq - 1 : 0;
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
			tt.alone = runner_kind_is_alone(row->kind);
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

/* The twin's view of a trial in flight: measured at its stand-in cost — the
 * twin's prediction when it had one for it, else the constant liar over
 * the told trials — with no load points (the fit ignores it) and no
 * prediction of its own (the twin's error ignores it). */
static int stand_in(struct twin_planner *t, const struct runner_proposal *p, double predicted)
{
	bool confirm = p->ask == OPT_ASK_CONFIRM;
	struct twin_trial tt = { .trial = { .config = p->config, .outcome = OPT_OUTCOME_MEASURED, .confirm = confirm },
				 .predicted_cost = NAN };
	int k = 0;

	if (isfinite(predicted) && predicted > 0)
		tt.trial.cost = predicted;
	else {
		struct opt_history told;

		opt_history_init(&told);
		for (size_t i = 0; i < t->n_told && k >= 0; i++)
			k = opt_history_add(&told, &t->hist.trials[i].trial);
		tt.trial.cost = opt_stand_in(t->env.study->space, &told, &p->config, confirm);
		opt_history_done(&told);
	}
	return k < 0 ? k : twin_history_add(&t->hist, &tt);
}

static int write_candidate(struct twin_planner *t, const struct twin_candidate *cand, int out_fd)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	int k;

	k = twin_candidate_to_json(t->env.study->space, cand, &j);
	if (k < 0)
		return k;
	text = cJSON_PrintUnformatted(j);
	if (!text)
		return -ENOMEM;
	if (fd_write_all(out_fd, text, strlen(text)) < 0 || fd_write_all(out_fd, "\n", 1) < 0)
		return -EIO;
	return 0;
}

/* The last line of a child's answer: {"cpu_s": the CPU time it spent,
 * "cache": what it computed that the planner's twin lacks (predictions,
 * fits)}. The planner merges the cache, so the next ask's child starts
 * with it, and says the CPU time in its log line. */
static int write_cache(struct twin_planner *t, int out_fd)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	_cleanup_(cjson_freep) char *text = NULL;
	cJSON *c = NULL;
	struct timespec ts;

	if (!j || twin_cache_to_json(t->twin, &c) < 0)
		return 3;
	if (c && !cJSON_AddItemToObject(j, "cache", c)) {
		cJSON_Delete(c);
		return 3;
	}
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0 &&
	    !cJSON_AddNumberToObject(j, "cpu_s", (double)ts.tv_sec + (double)ts.tv_nsec / 1e9))
		return 3;
	text = cJSON_PrintUnformatted(j);
	if (!text || fd_write_all(out_fd, text, strlen(text)) < 0 || fd_write_all(out_fd, "\n", 1) < 0)
		return 3;
	return 0;
}

/* In the forked copy, the model search: one ask for k configurations with
 * the trials in flight as they are (twin_search_ask weighs them itself),
 * each candidate as one JSON text per line on out_fd (or an error
 * object). Returns the exit status. */
static int model_child(struct twin_planner *t, int out_fd)
{
	struct twin_pending pending[RUNNER_ASK_MAX];
	struct twin_candidate cands[RUNNER_ASK_MAX];
	struct error err = { 0 };
	size_t n = 0;
	int k;

	for (size_t i = 0; i < t->n_pending; i++)
		pending[i] = (struct twin_pending){ .config = t->pending[i].config,
						    .confirm = t->pending[i].ask == OPT_ASK_CONFIRM,
						    .alone = t->pending[i].alone };
	k = twin_search_ask(t->twin, &t->search, &t->hist, pending, t->n_pending, t->k, cands, &n, &err);
	if (k < 0) {
		_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
		_cleanup_(cjson_freep) char *text = NULL;

		if (!j || !cJSON_AddStringToObject(j, "error", error_str(&err, k)) ||
		    !(text = cJSON_PrintUnformatted(j)))
			return 2;
		if (fd_write_all(out_fd, text, strlen(text)) < 0 || fd_write_all(out_fd, "\n", 1) < 0)
			return 3;
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		/* done with trials in flight: wait for them (no line); a
		 * confirmation of the answer with trials in flight is written
		 * (side by side, once the stop holds: it waits for them alone) */
		if (cands[i].opt.ask == OPT_ASK_DONE && (i > 0 || t->n_pending > 0))
			break;
		if (write_candidate(t, &cands[i], out_fd) < 0)
			return 3;
	}
	return write_cache(t, out_fd);
}

/* In the forked copy: up to k asks of twin_next, each candidate in flight
 * (at its stand-in) for the next, as one JSON text per line on out_fd (or
 * an error object). A confirmation of the answer with trials in flight
 * ends the batch before it (it waits for them). Returns the exit status. */
static int twin_child(void *userdata, int out_fd)
{
	struct twin_planner *t = userdata;
	struct error err = { 0 };
	int k = 0;

	if (t->model)
		return model_child(t, out_fd);
	for (size_t i = 0; i < t->n_pending && k >= 0; i++)
		k = stand_in(t, &t->pending[i], t->pending[i].predicted_cost);
	if (k < 0)
		error_set(&err, k, "twin: out of memory");
	for (size_t i = 0; i < t->k && k >= 0; i++) {
		struct twin_candidate cand;
		struct runner_proposal p;

		k = twin_next(t->twin, &t->settings, &t->hist, t->have_warm ? &t->warm : NULL, &cand, &err);
		if (k < 0)
			break;
		/* done after a candidate, or a confirmation of the answer while
		 * trials are in flight: the batch ends (no line: wait for them) */
		if ((cand.opt.ask == OPT_ASK_DONE && i > 0) ||
		    (cand.opt.phase == OPT_PHASE_CONFIRM && t->n_pending + i > 0))
			break;
		/* a prediction of the uncalibrated twin (in a batch, before
		 * anything was measured) is a guess: not recorded as a prediction,
		 * so it does not count as the twin's error */
		if (!cand.calibrated && i > 0)
			cand.predicted_cost = NAN;
		if (write_candidate(t, &cand, out_fd) < 0)
			return 3;
		if (cand.opt.ask == OPT_ASK_DONE || cand.opt.phase == OPT_PHASE_CONFIRM)
			break;
		p = (struct runner_proposal){ .ask = cand.opt.ask, .config = cand.opt.config };
		k = stand_in(t, &p, cand.calibrated ? cand.predicted_cost : NAN);
		if (k < 0)
			error_set(&err, k, "twin: out of memory");
	}
	if (k < 0) {
		_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
		_cleanup_(cjson_freep) char *text = NULL;

		if (!j || !cJSON_AddStringToObject(j, "error", error_str(&err, k)) ||
		    !(text = cJSON_PrintUnformatted(j)))
			return 2;
		if (fd_write_all(out_fd, text, strlen(text)) < 0 || fd_write_all(out_fd, "\n", 1) < 0)
			return 3;
		return 1;
	}
	return write_cache(t, out_fd);
}

/* ---- the parent ---- */

static void twin_cancel(struct runner_planner *p)
{
	struct twin_planner *t = (struct twin_planner *)p;

	/* killed, and reaped by the loop when it is gone: a fit holding much
	 * memory takes a while to exit, and the loop does not wait for it */
	t->child = child_abandon(t->child);
}

static void twin_describe(const struct runner_planner *p, char *buf, size_t size)
{
	const struct twin_planner *t = (const struct twin_planner *)p;
	const struct twin_candidate *c = &t->cand;
	char fit[48] = "";

	if (!t->asked) {
		snprintf(buf, size, t->model ? "model" : "twin");
		return;
	}
	if (t->model) {
		if (c->calibrated)
			snprintf(fit, sizeof(fit), ", fit error %.1f%%", 100 * c->fit.error);
		snprintf(buf, size, "model %s%s", twin_phase_to_string(c->phase), fit);
		return;
	}
	if (c->calibrated)
		snprintf(fit, sizeof(fit), ", fit error %.1f%%", 100 * c->fit.error);
	snprintf(buf, size, "twin %s%s%s%s%s", twin_phase_to_string(c->phase), c->warm ? ", warm" : "",
		 c->drift ? ", drift" : "", c->fallback ? ", fallback" : "", fit);
}

/* The child's answer: its candidates, one JSON text per line (none: wait
 * for the trials in flight); -errno with msg when there is no answer. */
static int read_answer(struct twin_planner *t, const struct child_exit *how, struct twin_candidate *ret, size_t *ret_n,
		       char *msg, size_t size)
{
	bool truncated = false;
	const char *text = child_get_output(t->child, &truncated);
	size_t n = 0;
	char buf[128];

	if (truncated) {
		snprintf(msg, size, "twin: the planning process's answer is too large");
		return -E2BIG;
	}
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		_cleanup_(cJSON_Deletep) cJSON *j = cJSON_ParseWithLength(line, len);
		const cJSON *e = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
		struct error err = { 0 };
		int k;

		line = end ? end + 1 : NULL;
		if (len == 0)
			continue;
		if (cJSON_IsString(e)) {
			snprintf(msg, size, "twin: %s", e->valuestring);
			return -EIO;
		}
		if (j && !cJSON_GetObjectItemCaseSensitive(j, "ask")) {
			/* the last line: the CPU time, and what the child computed (kept for the next ask) */
			const cJSON *cache = cJSON_GetObjectItemCaseSensitive(j, "cache");
			const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(j, "cpu_s");

			if (cJSON_IsNumber(cpu))
				t->ask_cpu = cpu->valuedouble;
			k = cache ? twin_cache_merge_json(t->twin, cache, "cache", &err) : 0;
			if (k < 0) {
				snprintf(msg, size, "twin: unreadable answer: %s", error_str(&err, k));
				return k;
			}
			continue;
		}
		if (!j || n >= RUNNER_ASK_MAX) {
			snprintf(msg, size, "twin: unreadable answer");
			return -EBADMSG;
		}
		k = twin_candidate_from_json(t->env.study->space, j, "candidate", &ret[n], &err);
		if (k < 0) {
			snprintf(msg, size, "twin: unreadable answer: %s", error_str(&err, k));
			return k;
		}
		n++;
	}
	if (!child_exit_ok(how)) {
		snprintf(msg, size, "twin: the planning process %s", child_exit_to_string(how, buf, sizeof(buf)));
		return -ECHILD;
	}
	*ret_n = n;
	return 0;
}

static void on_child_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct twin_planner *t = userdata;
	struct runner_answer a = { 0 };
	struct twin_candidate cands[RUNNER_ASK_MAX];
	char msg[ERROR_MSG_MAX], status[128];
	size_t n = 0;
	int k;

	k = read_answer(t, how, cands, &n, msg, sizeof(msg));
	t->child = child_free(t->child);
	if (k < 0) {
		t->base.cb(&t->base, k, NULL, msg, t->base.userdata);
		return;
	}
	if (n == 0) {
		/* a confirmation of the answer waits for the trials in flight */
		snprintf(a.message, sizeof(a.message), "twin: waits for the trials in flight");
		t->base.cb(&t->base, 0, &a, NULL, t->base.userdata);
		return;
	}
	t->cand = cands[0];
	t->asked = true;
	twin_describe(&t->base, status, sizeof(status));
	log_info("study %s: %s (%.1f s, %.2f s CPU): %s%s", t->env.study_name, status,
		 (double)(mono_usec() - t->ask_usec) / USEC_PER_SEC, t->ask_cpu, cands[0].message,
		 n > 1 ? " (and more beside it)" : "");
	a.reason = cands[0].opt.reason;
	/* the model search over (converged or exhausted, nothing in flight): a
	 * runner may widen a range here (search.extend_edges) and ask again */
	a.search_over = t->model && t->n_pending == 0 &&
			(cands[0].opt.ask == OPT_ASK_DONE || cands[0].opt.phase == OPT_PHASE_CONFIRM) &&
			(cands[0].opt.reason == OPT_DONE_CONVERGED || cands[0].opt.reason == OPT_DONE_EXHAUSTED);
	/* (the model search keeps no calibration across studies) */
	if (!t->model)
		save_calibration(t, cands[0].opt.ask == OPT_ASK_DONE && t->n_pending == 0);
	if (cands[0].opt.ask == OPT_ASK_DONE)
		snprintf(a.message, sizeof(a.message), "%s", cands[0].message);
	else
		for (size_t i = 0; i < n; i++)
			a.proposals[a.n++] =
				(struct runner_proposal){ .ask = cands[i].opt.ask,
							  .config = cands[i].opt.config,
							  .attempt = cands[i].opt.attempt,
							  .predicted_cost = cands[i].predicted_cost,
							  .alone = cands[i].opt.phase == OPT_PHASE_CONFIRM };
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
	t->ask_cpu = NAN;
	k = child_spawn(t->env.event, &o, on_child_exit, t, &t->child);
	if (k < 0)
		return error_set(err, k, "twin: cannot start the planning process: %s", strerror(-k));
	return 0;
}

static int twin_ask(struct runner_planner *p, const struct runner_ask *a, struct runner_answer *ret, struct error *err)
{
	struct twin_planner *t = (struct twin_planner *)p;
	int k;

	if (a->n_pending > RUNNER_ASK_MAX || a->k > RUNNER_ASK_MAX)
		return error_set(err, -EINVAL, "twin: too many trials asked for");
	if (t->child)
		return error_set(err, -EBUSY, "twin: an ask is in flight");
	if (t->space != t->env.study->space) {
		/* the runner widened a range (search.extend_edges): a twin of the new space */
		struct twin_setup setup;
		struct twin *nt = NULL;

		k = runner_twin_setup(t->env.study, t->env.profile->name, &setup, err);
		if (k >= 0)
			k = twin_new(t->env.study->space, &setup, &nt, err);
		if (k < 0)
			return k;
		twin_free(t->twin);
		t->twin = nt;
		t->space = t->env.study->space;
	}
	if (!t->key_known && !t->model) {
		/* the key needs the host facts: wait for them (not in a dry run) */
		if (!t->env.dry_run && !a->host_json && a->host_pending)
			return RUNNER_ASK_WAIT_HOST;
		lookup_warm(t, a->host_json);
	}
	/* a widened range (search.extend_edges) starts a phase: the model
	 * search's stop side by side holds for the phase it was reached in */
	t->search.plain.phase_start = t->env.settings->phase_start;
	k = build_history(t, a, err);
	if (k < 0)
		return k;
	t->n_told = t->hist.n;
	memcpy(t->pending, a->pending, a->n_pending * sizeof(a->pending[0]));
	t->n_pending = a->n_pending;
	t->k = a->k;
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

/* The model's prediction beyond a range, with the constants the last
 * answer was calibrated to. */
static int twin_beyond(struct runner_planner *p, const struct opt_config *config, const char *knob, double value,
		       double *ret_cost, struct error *err)
{
	struct twin_planner *t = (struct twin_planner *)p;
	struct twin_prediction pr;
	struct sim_profile prof;
	int k;

	if (t->asked && t->cand.calibrated)
		prof = t->cand.fit.profile;
	else
		twin_base_profile(t->twin, &prof);
	{
		struct opt_config where;

		k = twin_predict_beyond_row(t->twin, &prof, config, knob, value, &where, &pr, err);
	}
	if (k < 0)
		return k;
	*ret_cost = pr.outcome == OPT_OUTCOME_MEASURED ? pr.cost : INFINITY;
	return 0;
}

static const struct runner_planner_ops twin_ops = {
	.beyond = twin_beyond,
	.ask = twin_ask,
	.cancel = twin_cancel,
	.describe = twin_describe,
	.free = twin_free_planner,
};

int runner_twin_setup(const struct study *s, const char *engine, struct twin_setup *setup, struct error *err)
{

	twin_setup_init(setup);
	if (strlen(s->model.name) >= sizeof(setup->model))
		return error_set(err, -EINVAL, "model.name: too long for the twin (%s)", s->model.name);
	snprintf(setup->model, sizeof(setup->model), "%s", s->model.name);
	if (s->gpu.type) {
		if (strlen(s->gpu.type) >= sizeof(setup->gpu))
			return error_set(err, -EINVAL, "gpu.type: too long for the twin (%s)", s->gpu.type);
		snprintf(setup->gpu, sizeof(setup->gpu), "%s", s->gpu.type);
	}
	setup->gpus = s->gpu.per_node;
	if (engine && strcmp(engine, "trtllm") == 0)
		snprintf(setup->profile, sizeof(setup->profile), "trtllm");
	setup->usd_per_gpu_hour = s->gpu.price_per_gpu_hour;
	setup->scenario = s->scenario;
	setup->cost_tokens = s->cost_tokens;
	setup->workload = s->workload;
	setup->workload.dataset_path = NULL;
	setup->sla = s->sla;
	/* speculation as the dry run models it: the drafter, the workload's acceptance per method */
	if (study_draft_model(s, "draft_model"))
		snprintf(setup->spec_draft_model, sizeof(setup->spec_draft_model), "%s",
			 study_draft_model(s, "draft_model"));
	for (int m = SIM_SPEC_NONE + 1; m < _SIM_SPEC_MAX; m++)
		if (!study_spec_acceptance_text(s, sim_spec_method_to_string(m), setup->spec_acceptance[m],
						sizeof(setup->spec_acceptance[m])))
			setup->spec_acceptance[m][0] = 0;
	/* A prediction brackets the max rate finer than the probe: bisected
	 * only to the probe's 10 %, where its bracket landed ranked the 70B
	 * example's chunk 512 at max_num_seqs 32 3 % behind chunk 1024, which
	 * is 8 % dearer, and the search found the optimum at its sixth
	 * deployment, not its second. The measurement's own coarseness stays
	 * in the residual's nugget (probe_tol). */
	if (s->probe.tolerance > 0) {
		setup->probe_tol = s->probe.tolerance;
		setup->rel_tol = MIN(s->probe.tolerance, RUNNER_TWIN_PREDICT_TOL);
	}
	/* A prediction runs the requests the probe sends: with a smaller
	 * sample (64 of 200) the SLA's tail under chunked prefill comes out
	 * otherwise — on an 8B H100 study at TPOT 15 ms chunk 8192 ranked
	 * above chunk 512, which is 18 % cheaper — and the twin stopped on the
	 * wrong answer. Only a very large workload is cut, to keep a ranking
	 * within seconds. */
	if (setup->workload.num_prompts > RUNNER_TWIN_PROMPTS_MAX)
		setup->rank_num_prompts = RUNNER_TWIN_PROMPTS_MAX;
	return 0;
}

int runner_planner_twin_new(const struct runner_planner_env *env, runner_answer_fn cb, void *userdata,
			    struct runner_planner **ret, struct error *err)
{
	struct twin_setup setup;
	struct twin_planner *t;
	int k;

	k = runner_twin_setup(env->study, env->profile->name, &setup, err);
	if (k < 0)
		return k;
	t = calloc(1, sizeof(*t));
	if (!t)
		return error_set(err, -ENOMEM, "out of memory");
	t->base = (struct runner_planner){ .ops = &twin_ops, .cb = cb, .userdata = userdata };
	t->env = *env;
	twin_history_init(&t->hist);
	t->space = env->study->space;
	k = twin_new(env->study->space, &setup, &t->twin, err);
	if (k < 0) {
		twin_free_planner(&t->base);
		return error_prefix(err, k, "search.strategy twin");
	}
	twin_settings_init(&t->settings);
	t->settings.plain = *env->settings;
	twin_search_settings_init(&t->search);
	t->search.plain = *env->settings;
	t->search.edges = env->study->search.extend_edges;
	*ret = &t->base;
	return 0;
}

int runner_planner_model_new(const struct runner_planner_env *env, runner_answer_fn cb, void *userdata,
			     struct runner_planner **ret, struct error *err)
{
	int k = runner_planner_twin_new(env, cb, userdata, ret, err);

	if (k >= 0)
		((struct twin_planner *)*ret)->model = true;
	return k;
}
