/* twin-wire.c — twin_next's inputs (settings, history, a warm calibration)
 * and its answer (the candidate) as JSON, bit-exactly.
 *
 * twin_next costs seconds of CPU (fits of a few hundred simulations each),
 * which must not run on the daemon's sd-event loop. With these functions a
 * forked child (or a helper program) computes the ask and the loop only
 * reads the result from a pipe (twin.h describes the protocol). Doubles are
 * written as "%.17g" (twin_json_add_exact), so the candidate read back is
 * the one twin_next gave and a replayed history gives the same asks. NaN
 * values (no prediction) are left out; the saturated load point is marked
 * "saturated": true instead of an infinite rate. Readers check every key
 * and name the JSON path of a bad one. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "parse.h"
#include "twin-internal.h"

static const char *const outcome_names[] = { "measured", "infeasible", "sla_never_met", "failed", NULL };
static const char *const ask_names[] = { "trial", "confirm", "done", NULL };
static const char *const opt_phase_names[] = { "screen", "search", "confirm", "done", NULL };
static const char *const reason_names[] = { "none", "converged", "budget", "exhausted", NULL };
static const char *const twin_phase_names[] = { "design", "refine", "confirm", "fallback", "done", NULL };

static int add_config(cJSON *o, const char *key, const struct opt_space *space, const struct opt_config *c)
{
	char buf[OPT_KEY_MAX];
	int r;

	r = opt_config_key(space, c, buf, sizeof(buf));
	if (r < 0)
		return r;
	return json_add_string(o, key, buf);
}

static int get_config(const cJSON *o, const char *what, const char *key, const struct opt_space *space,
		      struct opt_config *ret, struct error *err)
{
	const char *s = NULL;
	char path[256];
	int r;

	r = json_require_string(o, what, key, OPT_KEY_MAX, &s, err);
	if (r < 0)
		return r;
	r = opt_config_from_key(space, s, ret, err);
	if (r < 0)
		return error_prefix(err, r, "%s", json_path_join(path, sizeof(path), what, key));
	return 0;
}

/* A number that may be NaN (left out) or infinite (refused: JSON has no such number). */
static int add_finite(cJSON *o, const char *key, double v)
{
	if (isnan(v))
		return 0;
	return twin_json_add_exact(o, key, v);
}

static int get_enum_req(const cJSON *o, const char *what, const char *key, const char *const *names, int *ret,
			struct error *err)
{
	char path[256];
	int r = json_get_enum(o, what, key, names, ret, err);

	if (r == 0)
		return error_set(err, -EINVAL, "%s: missing", json_path_join(path, sizeof(path), what, key));
	return r;
}

static int point_to_json(const struct twin_point *p, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	cJSON *figs;

	if (!o)
		return -ENOMEM;
	if (isinf(p->rate) ? json_add_bool(o, "saturated", true) < 0 : add_finite(o, "rate", p->rate) < 0)
		return -ENOMEM;
	figs = cJSON_AddObjectToObject(o, "figures");
	if (!figs)
		return -ENOMEM;
	for (size_t f = 0; f < _TWIN_FIG_MAX; f++)
		if (p->fig[f] != 0 && add_finite(figs, twin_figure_name(f), p->fig[f]) < 0)
			return -EINVAL;
	*ret = TAKE_PTR(o);
	return 0;
}

static int point_from_json(const cJSON *o, const char *what, struct twin_point *ret, struct error *err)
{
	static const char *const keys[] = { "rate", "saturated", "figures", NULL };
	const char *fig_keys[_TWIN_FIG_MAX + 1];
	struct twin_point p = { 0 };
	const cJSON *figs = NULL;
	bool sat = false;
	char path[256];
	int r;

	if (!cJSON_IsObject(o))
		return error_set(err, -EINVAL, "%s: expected an object", what);
	r = json_check_keys(o, what, keys, err);
	if (r < 0)
		return r;
	r = json_get_bool(o, what, "saturated", &sat, err);
	if (r < 0)
		return r;
	if (sat)
		p.rate = INFINITY;
	else if ((r = json_require_double(o, what, "rate", 0, 1e12, &p.rate, err)) < 0)
		return r;
	r = json_require_object(o, what, "figures", &figs, err);
	if (r < 0)
		return r;
	json_path_join(path, sizeof(path), what, "figures");
	for (size_t f = 0; f < _TWIN_FIG_MAX; f++)
		fig_keys[f] = twin_figure_name(f);
	fig_keys[_TWIN_FIG_MAX] = NULL;
	r = json_check_keys(figs, path, fig_keys, err);
	if (r < 0)
		return r;
	for (size_t f = 0; f < _TWIN_FIG_MAX; f++) {
		r = json_get_double(figs, path, twin_figure_name(f), 0, 1e12, &p.fig[f], err);
		if (r < 0)
			return r;
	}
	*ret = p;
	return 0;
}

int twin_history_to_json(const struct opt_space *space, const struct twin_history *h, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *arr = cJSON_CreateArray();
	int r;

	if (!arr)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++) {
		const struct twin_trial *t = &h->trials[i];
		cJSON *o = cJSON_CreateObject(), *pts;

		if (!o || !cJSON_AddItemToArray(arr, o))
			return cJSON_Delete(o), -ENOMEM;
		r = add_config(o, "config", space, &t->trial.config);
		if (r < 0)
			return r;
		if (t->trial.outcome >= _OPT_OUTCOME_MAX)
			return -EINVAL;
		if (json_add_string(o, "outcome", outcome_names[t->trial.outcome]) < 0 ||
		    (t->trial.outcome == OPT_OUTCOME_MEASURED && add_finite(o, "cost", t->trial.cost) < 0) ||
		    json_add_bool(o, "confirm", t->trial.confirm) < 0 || add_finite(o, "max_rate", t->max_rate) < 0 ||
		    add_finite(o, "predicted_cost", t->predicted_cost) < 0)
			return -EINVAL;
		pts = cJSON_AddArrayToObject(o, "points");
		if (!pts)
			return -ENOMEM;
		for (size_t k = 0; k < t->n_points && k < TWIN_POINTS_MAX; k++) {
			cJSON *p = NULL;

			r = point_to_json(&t->points[k], &p);
			if (r < 0)
				return r;
			if (!cJSON_AddItemToArray(pts, p))
				return cJSON_Delete(p), -ENOMEM;
		}
	}
	*ret = TAKE_PTR(arr);
	return 0;
}

static int trial_from_json(const struct opt_space *space, const cJSON *o, const char *what, struct twin_trial *ret,
			   struct error *err)
{
	static const char *const keys[] = { "config",   "outcome",        "cost",   "confirm",
					    "max_rate", "predicted_cost", "points", NULL };
	struct twin_trial t = { .predicted_cost = NAN };
	const cJSON *pts = NULL, *e;
	char path[256];
	int outcome = 0, r;

	if (!cJSON_IsObject(o))
		return error_set(err, -EINVAL, "%s: expected an object", what);
	r = json_check_keys(o, what, keys, err);
	if (r < 0)
		return r;
	r = get_config(o, what, "config", space, &t.trial.config, err);
	if (r < 0)
		return r;
	r = get_enum_req(o, what, "outcome", outcome_names, &outcome, err);
	if (r < 0)
		return r;
	t.trial.outcome = (enum opt_outcome)outcome;
	if (t.trial.outcome == OPT_OUTCOME_MEASURED)
		r = json_require_double(o, what, "cost", 1e-300, 1e300, &t.trial.cost, err);
	if (r >= 0)
		r = json_get_bool(o, what, "confirm", &t.trial.confirm, err);
	if (r >= 0)
		r = json_get_double(o, what, "max_rate", 0, 1e12, &t.max_rate, err);
	if (r >= 0)
		r = json_get_double(o, what, "predicted_cost", 0, 1e300, &t.predicted_cost, err);
	if (r >= 0)
		r = json_get_array(o, what, "points", &pts, err);
	if (r < 0)
		return r;
	if (cJSON_GetArraySize(pts) > TWIN_POINTS_MAX)
		return error_set(err, -E2BIG, "%s.points: at most %d load points", what, TWIN_POINTS_MAX);
	cJSON_ArrayForEach(e, pts)
	{
		snprintf(path, sizeof(path), "%.200s.points[%zu]", what, t.n_points);
		r = point_from_json(e, path, &t.points[t.n_points], err);
		if (r < 0)
			return r;
		t.n_points++;
	}
	*ret = t;
	return 0;
}

int twin_history_from_json(const struct opt_space *space, const cJSON *j, const char *what, struct twin_history *ret,
			   struct error *err)
{
	struct twin_history h;
	const cJSON *e;
	char path[256];
	size_t i = 0;
	int r;

	if (!cJSON_IsArray(j))
		return error_set(err, -EINVAL, "%s: expected an array of trials", what);
	twin_history_init(&h);
	cJSON_ArrayForEach(e, j)
	{
		struct twin_trial t;

		snprintf(path, sizeof(path), "%.200s[%zu]", what, i++);
		r = trial_from_json(space, e, path, &t, err);
		if (r >= 0) {
			r = twin_history_add(&h, &t);
			if (r < 0)
				r = error_set(err, r, "%s: not a valid trial", path);
		}
		if (r < 0) {
			twin_history_done(&h);
			return r;
		}
	}
	*ret = h;
	return 0;
}

/* Settings as tables: one place lists every field, for both directions. */
enum field_type {
	FIELD_U32,
	FIELD_DOUBLE
};

struct field {
	const char *name;
	enum field_type type;
	size_t offset;
	double min, max;
};

#define U32(s, m, lo, hi)                                                                                              \
	{                                                                                                              \
#m, FIELD_U32, offsetof(s, m), lo, hi                                                                  \
	}
#define DBL(s, m, lo, hi)                                                                                              \
	{                                                                                                              \
#m, FIELD_DOUBLE, offsetof(s, m), lo, hi                                                               \
	}

static const struct field plain_fields[] = {
	U32(struct opt_settings, max_trials, 0, UINT32_MAX), U32(struct opt_settings, confirm_probes, 0, 100),
	U32(struct opt_settings, max_attempts, 1, 100),      DBL(struct opt_settings, promising, 0, 1e6),
	DBL(struct opt_settings, screen_level, 0, 1),
};

static const struct field fit_fields[] = {
	U32(struct twin_fit_options, maxeval, 0, 1000000),    DBL(struct twin_fit_options, max_factor, 0, 1e6),
	DBL(struct twin_fit_options, prior, 0, 1e6),          U32(struct twin_fit_options, points_per_trial, 0, 1000),
	U32(struct twin_fit_options, max_trials, 0, 1000000), U32(struct twin_fit_options, restarts, 0, 100),
};

static const struct field settings_fields[] = {
	U32(struct twin_settings, n_design, 0, 100),       U32(struct twin_settings, judge_after, 0, 1000),
	DBL(struct twin_settings, max_fit_error, 0, 1e6),  DBL(struct twin_settings, max_pred_error, 0, 1e6),
	DBL(struct twin_settings, min_tol, 0, 1e6),        DBL(struct twin_settings, drift_factor, 0, 1e6),
	DBL(struct twin_settings, unfitted_error, 0, 1e6), U32(struct twin_settings, near_probes, 0, 1000),
};

#undef U32
#undef DBL

static int fields_to_json(const void *base, const struct field *f, size_t n, cJSON *o)
{
	for (size_t i = 0; i < n; i++) {
		const char *p = (const char *)base + f[i].offset;
		int r = f[i].type == FIELD_U32 ? json_add_number(o, f[i].name, *(const unsigned *)(const void *)p)
					       : add_finite(o, f[i].name, *(const double *)(const void *)p);

		if (r < 0)
			return r;
	}
	return 0;
}

/* Fields absent from o keep the value *base has. */
static int fields_from_json(void *base, const struct field *f, size_t n, const cJSON *o, const char *what,
			    const char *const *extra_keys, struct error *err)
{
	const char *keys[32];
	size_t nk = 0;
	int r;

	if (!cJSON_IsObject(o))
		return error_set(err, -EINVAL, "%s: expected an object", what);
	for (size_t i = 0; i < n && nk < ELEMENTSOF(keys) - 1; i++)
		keys[nk++] = f[i].name;
	for (size_t i = 0; extra_keys && extra_keys[i] && nk < ELEMENTSOF(keys) - 1; i++)
		keys[nk++] = extra_keys[i];
	keys[nk] = NULL;
	r = json_check_keys(o, what, keys, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		char *p = (char *)base + f[i].offset;

		if (f[i].type == FIELD_U32) {
			uint32_t u;

			r = json_get_u32(o, what, f[i].name, (uint32_t)f[i].min, (uint32_t)f[i].max, &u, err);
			if (r > 0)
				*(unsigned *)(void *)p = u;
		} else
			r = json_get_double(o, what, f[i].name, f[i].min, f[i].max, (double *)(void *)p, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int twin_settings_to_json(const struct twin_settings *s, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	cJSON *plain, *fit;
	char seed[32];

	if (!j)
		return -ENOMEM;
	if (fields_to_json(s, settings_fields, ELEMENTSOF(settings_fields), j) < 0)
		return -EINVAL;
	plain = cJSON_AddObjectToObject(j, "plain");
	fit = cJSON_AddObjectToObject(j, "fit");
	if (!plain || !fit)
		return -ENOMEM;
	/* A string: a 64-bit seed does not survive a JSON number (a double). */
	snprintf(seed, sizeof(seed), "%" PRIu64, s->plain.seed);
	if (json_add_string(plain, "seed", seed) < 0 ||
	    fields_to_json(&s->plain, plain_fields, ELEMENTSOF(plain_fields), plain) < 0 ||
	    fields_to_json(&s->fit, fit_fields, ELEMENTSOF(fit_fields), fit) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(j);
	return 0;
}

int twin_settings_from_json(const cJSON *j, const char *what, struct twin_settings *ret, struct error *err)
{
	static const char *const top_extra[] = { "plain", "fit", NULL };
	static const char *const plain_extra[] = { "seed", NULL };
	struct twin_settings s;
	const cJSON *plain = NULL, *fit = NULL;
	const char *seed = NULL;
	char path[256];
	int r;

	twin_settings_init(&s);
	r = fields_from_json(&s, settings_fields, ELEMENTSOF(settings_fields), j, what, top_extra, err);
	if (r >= 0)
		r = json_get_object(j, what, "plain", &plain, err);
	if (r >= 0)
		r = json_get_object(j, what, "fit", &fit, err);
	if (r < 0)
		return r;
	if (plain) {
		json_path_join(path, sizeof(path), what, "plain");
		r = fields_from_json(&s.plain, plain_fields, ELEMENTSOF(plain_fields), plain, path, plain_extra, err);
		if (r >= 0)
			r = json_get_string(plain, path, "seed", 32, &seed, err);
		if (r > 0) {
			char p2[256];

			r = parse_u64(json_path_join(p2, sizeof(p2), path, "seed"), seed, 0, UINT64_MAX, &s.plain.seed,
				      err);
		}
		if (r < 0)
			return r;
	}
	if (fit) {
		json_path_join(path, sizeof(path), what, "fit");
		r = fields_from_json(&s.fit, fit_fields, ELEMENTSOF(fit_fields), fit, path, NULL, err);
		if (r < 0)
			return r;
	}
	*ret = s;
	return 0;
}

/* ---- the candidate ---- */

static int result_to_json(cJSON *o, const char *key, const struct opt_space *space, const struct opt_result *res)
{
	cJSON *r;

	if (!res->valid)
		return 0;
	r = cJSON_AddObjectToObject(o, key);
	if (!r)
		return -ENOMEM;
	if (add_config(r, "config", space, &res->config) < 0 || add_finite(r, "cost", res->cost) < 0 ||
	    json_add_number(r, "n", res->n) < 0 || add_finite(r, "spread", res->spread) < 0)
		return -EINVAL;
	return 0;
}

static int result_from_json(const cJSON *o, const char *what, const char *key, const struct opt_space *space,
			    struct opt_result *ret, struct error *err)
{
	static const char *const keys[] = { "config", "cost", "n", "spread", NULL };
	struct opt_result res = { .valid = true };
	const cJSON *r_o = NULL;
	char path[256];
	uint32_t n = 0;
	int r;

	r = json_get_object(o, what, key, &r_o, err);
	if (r <= 0) {
		if (r == 0)
			*ret = (struct opt_result){ 0 };
		return r;
	}
	json_path_join(path, sizeof(path), what, key);
	r = json_check_keys(r_o, path, keys, err);
	if (r >= 0)
		r = get_config(r_o, path, "config", space, &res.config, err);
	if (r >= 0)
		r = json_require_double(r_o, path, "cost", 0, 1e300, &res.cost, err);
	if (r >= 0)
		r = json_get_u32(r_o, path, "n", 0, UINT32_MAX, &n, err);
	if (r >= 0)
		r = json_get_double(r_o, path, "spread", 0, 1e300, &res.spread, err);
	if (r < 0)
		return r;
	res.n = n;
	*ret = res;
	return 0;
}

static int fit_to_json(const struct twin_fit *f, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	cJSON *prof = NULL, *figs, *fitted;
	int r;

	if (!o)
		return -ENOMEM;
	r = twin_profile_to_json(&f->profile, &prof);
	if (r < 0)
		return r;
	if (!cJSON_AddItemToObject(o, "profile", prof))
		return cJSON_Delete(prof), -ENOMEM;
	figs = cJSON_AddObjectToObject(o, "error_by_figure");
	if (!figs)
		return -ENOMEM;
	for (size_t k = 0; k < _TWIN_FIG_MAX; k++)
		if (add_finite(figs, twin_figure_name(k), f->error_by_figure[k]) < 0)
			return -EINVAL;
	if (add_finite(o, "error", f->error) < 0 || add_finite(o, "start_error", f->start_error) < 0 ||
	    json_add_number(o, "trials", f->n_trials) < 0 || json_add_number(o, "points", f->n_points) < 0 ||
	    json_add_number(o, "figures", f->n_figures) < 0 || json_add_number(o, "evals", f->evals) < 0 ||
	    json_add_number(o, "skipped", f->n_skipped) < 0)
		return -EINVAL;
	fitted = cJSON_AddArrayToObject(o, "fitted");
	if (!fitted)
		return -ENOMEM;
	for (size_t i = 0; sim_profile_field_name(i) && i < 64; i++)
		if ((f->fitted >> i) & 1) {
			cJSON *s = cJSON_CreateString(sim_profile_field_name(i));

			if (!s || !cJSON_AddItemToArray(fitted, s))
				return cJSON_Delete(s), -ENOMEM;
		}
	*ret = TAKE_PTR(o);
	return 0;
}

static int fitted_from_json(const cJSON *arr, const char *what, uint64_t *ret, struct error *err)
{
	const cJSON *e;
	uint64_t m = 0;

	cJSON_ArrayForEach(e, arr)
	{
		ssize_t i;

		if (!cJSON_IsString(e))
			return error_set(err, -EINVAL, "%s: expected constant names", what);
		i = twin_profile_index(e->valuestring);
		if (i < 0 || i >= 64)
			return error_set(err, -EINVAL, "%s: unknown constant \"%s\"", what, e->valuestring);
		m |= UINT64_C(1) << i;
	}
	*ret = m;
	return 0;
}

/* The profile object with every constant present (none left at a default). */
static int profile_from_json(const cJSON *prof, const char *what, struct sim_profile *ret, struct error *err)
{
	struct sim_profile p = { 0 };
	int r;

	if (!cJSON_IsObject(prof))
		return error_set(err, -EINVAL, "%s: expected an object", what);
	for (size_t i = 0; sim_profile_field_name(i); i++)
		if (!cJSON_GetObjectItemCaseSensitive(prof, sim_profile_field_name(i)))
			return error_set(err, -EINVAL, "%s.%s: missing", what, sim_profile_field_name(i));
	r = sim_profile_apply_json(&p, prof, what, err);
	if (r < 0)
		return r;
	*ret = p;
	return 0;
}

static int fit_from_json(const cJSON *o, const char *what, struct twin_fit *ret, struct error *err)
{
	static const char *const keys[] = { "profile", "error_by_figure", "error",   "start_error", "trials", "points",
					    "figures", "evals",           "skipped", "fitted",      NULL };
	struct twin_fit f = { 0 };
	const cJSON *prof = NULL, *figs = NULL, *fitted = NULL;
	uint32_t u[5] = { 0 };
	static const char *const counts[5] = { "trials", "points", "figures", "evals", "skipped" };
	char path[256];
	int r;

	r = json_check_keys(o, what, keys, err);
	if (r >= 0)
		r = json_require_object(o, what, "profile", &prof, err);
	if (r >= 0)
		r = profile_from_json(prof, json_path_join(path, sizeof(path), what, "profile"), &f.profile, err);
	if (r >= 0)
		r = json_get_double(o, what, "error", 0, 1e300, &f.error, err);
	if (r >= 0)
		r = json_get_double(o, what, "start_error", 0, 1e300, &f.start_error, err);
	for (size_t k = 0; k < 5 && r >= 0; k++)
		r = json_get_u32(o, what, counts[k], 0, UINT32_MAX, &u[k], err);
	if (r >= 0)
		r = json_get_object(o, what, "error_by_figure", &figs, err);
	for (size_t k = 0; k < _TWIN_FIG_MAX && r >= 0 && figs; k++)
		r = json_get_double(figs, what, twin_figure_name(k), 0, 1e300, &f.error_by_figure[k], err);
	if (r >= 0)
		r = json_get_array(o, what, "fitted", &fitted, err);
	if (r >= 0 && fitted)
		r = fitted_from_json(fitted, json_path_join(path, sizeof(path), what, "fitted"), &f.fitted, err);
	if (r < 0)
		return r;
	f.n_trials = u[0];
	f.n_points = u[1];
	f.n_figures = u[2];
	f.evals = u[3];
	f.n_skipped = u[4];
	*ret = f;
	return 0;
}

static bool profile_set(const struct sim_profile *p)
{
	struct sim_profile z = { 0 };

	return memcmp(p, &z, sizeof(z)) != 0;
}

int twin_candidate_to_json(const struct opt_space *space, const struct twin_candidate *c, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	int r;

	if (!j)
		return -ENOMEM;
	if (c->opt.ask > OPT_ASK_DONE || c->opt.phase > OPT_PHASE_DONE || c->opt.reason > OPT_DONE_EXHAUSTED ||
	    c->phase > TWIN_PHASE_DONE)
		return -EINVAL;
	if (json_add_string(j, "ask", ask_names[c->opt.ask]) < 0 ||
	    json_add_string(j, "opt_phase", opt_phase_names[c->opt.phase]) < 0 ||
	    json_add_string(j, "reason", reason_names[c->opt.reason]) < 0 ||
	    json_add_string(j, "phase", twin_phase_names[c->phase]) < 0 ||
	    json_add_number(j, "attempt", c->opt.attempt) < 0 ||
	    json_add_number(j, "evaluated", c->opt.evaluated) < 0 ||
	    json_add_number(j, "inferred", c->opt.inferred) < 0 ||
	    add_finite(j, "predicted_cost", c->predicted_cost) < 0 || json_add_bool(j, "fallback", c->fallback) < 0 ||
	    json_add_bool(j, "warm", c->warm) < 0 || json_add_bool(j, "drift", c->drift) < 0 ||
	    json_add_bool(j, "calibrated", c->calibrated) < 0 || add_finite(j, "tol", c->tol) < 0 ||
	    add_finite(j, "pred_error", c->pred_error) < 0 || json_add_string(j, "message", c->message) < 0)
		return -EINVAL;
	if (c->opt.ask != OPT_ASK_DONE) {
		r = add_config(j, "config", space, &c->opt.config);
		if (r < 0)
			return r;
	}
	r = result_to_json(j, "best", space, &c->opt.best);
	if (r >= 0)
		r = result_to_json(j, "runner_up", space, &c->opt.runner_up);
	if (r < 0)
		return r;
	/* The fit is meaningful once one was made (it is all zeros before). */
	if (profile_set(&c->fit.profile)) {
		cJSON *f = NULL;

		r = fit_to_json(&c->fit, &f);
		if (r < 0)
			return r;
		if (!cJSON_AddItemToObject(j, "fit", f))
			return cJSON_Delete(f), -ENOMEM;
	}
	*ret = TAKE_PTR(j);
	return 0;
}

int twin_candidate_from_json(const struct opt_space *space, const cJSON *j, const char *what,
			     struct twin_candidate *ret, struct error *err)
{
	static const char *const keys[] = { "ask",      "opt_phase",  "reason",   "phase",
					    "attempt",  "evaluated",  "inferred", "predicted_cost",
					    "fallback", "warm",       "drift",    "calibrated",
					    "tol",      "pred_error", "message",  "config",
					    "best",     "runner_up",  "fit",      NULL };
	struct twin_candidate c = { .predicted_cost = NAN };
	const cJSON *fit = NULL;
	const char *msg = NULL;
	uint32_t u[3] = { 0 };
	int e[4] = { 0 }, r;
	char path[256];

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected an object", what);
	r = json_check_keys(j, what, keys, err);
	if (r >= 0)
		r = get_enum_req(j, what, "ask", ask_names, &e[0], err);
	if (r >= 0)
		r = get_enum_req(j, what, "opt_phase", opt_phase_names, &e[1], err);
	if (r >= 0)
		r = get_enum_req(j, what, "reason", reason_names, &e[2], err);
	if (r >= 0)
		r = get_enum_req(j, what, "phase", twin_phase_names, &e[3], err);
	if (r >= 0)
		r = json_get_u32(j, what, "attempt", 0, UINT32_MAX, &u[0], err);
	if (r >= 0)
		r = json_get_u32(j, what, "evaluated", 0, UINT32_MAX, &u[1], err);
	if (r >= 0)
		r = json_get_u32(j, what, "inferred", 0, UINT32_MAX, &u[2], err);
	if (r >= 0)
		r = json_get_double(j, what, "predicted_cost", 0, 1e300, &c.predicted_cost, err);
	if (r >= 0)
		r = json_get_bool(j, what, "fallback", &c.fallback, err);
	if (r >= 0)
		r = json_get_bool(j, what, "warm", &c.warm, err);
	if (r >= 0)
		r = json_get_bool(j, what, "drift", &c.drift, err);
	if (r >= 0)
		r = json_get_bool(j, what, "calibrated", &c.calibrated, err);
	if (r >= 0)
		r = json_get_double(j, what, "tol", 0, 1e300, &c.tol, err);
	if (r >= 0)
		r = json_get_double(j, what, "pred_error", 0, 1e300, &c.pred_error, err);
	if (r >= 0)
		r = json_get_string(j, what, "message", sizeof(c.message) - 1, &msg, err);
	if (r < 0)
		return r;
	c.opt.ask = (enum opt_ask)e[0];
	c.opt.phase = (enum opt_phase)e[1];
	c.opt.reason = (enum opt_done_reason)e[2];
	c.phase = (enum twin_phase)e[3];
	c.opt.attempt = u[0];
	c.opt.evaluated = u[1];
	c.opt.inferred = u[2];
	if (msg)
		snprintf(c.message, sizeof(c.message), "%s", msg);
	if (c.opt.ask != OPT_ASK_DONE) {
		r = get_config(j, what, "config", space, &c.opt.config, err);
		if (r < 0)
			return r;
	}
	r = result_from_json(j, what, "best", space, &c.opt.best, err);
	if (r >= 0)
		r = result_from_json(j, what, "runner_up", space, &c.opt.runner_up, err);
	if (r >= 0)
		r = json_get_object(j, what, "fit", &fit, err);
	if (r > 0)
		r = fit_from_json(fit, json_path_join(path, sizeof(path), what, "fit"), &c.fit, err);
	if (r < 0)
		return r;
	*ret = c;
	return 0;
}

/* ---- a whole ask ---- */

int twin_request_to_json(const struct opt_space *space, const struct twin_settings *s, const struct twin_history *h,
			 const struct twin_calibration *warm, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	cJSON *part = NULL;
	int r;

	if (!j)
		return -ENOMEM;
	r = twin_settings_to_json(s, &part);
	if (r < 0)
		return r;
	if (!cJSON_AddItemToObject(j, "settings", part))
		return cJSON_Delete(part), -ENOMEM;
	r = twin_history_to_json(space, h, &part);
	if (r < 0)
		return r;
	if (!cJSON_AddItemToObject(j, "history", part))
		return cJSON_Delete(part), -ENOMEM;
	if (warm) {
		r = twin_calibration_to_json(warm, &part);
		if (r < 0)
			return r;
		if (!cJSON_AddItemToObject(j, "warm", part))
			return cJSON_Delete(part), -ENOMEM;
	}
	*ret = TAKE_PTR(j);
	return 0;
}

int twin_request_from_json(const struct opt_space *space, const cJSON *j, const char *what,
			   struct twin_settings *ret_settings, struct twin_history *ret_history,
			   struct twin_calibration *ret_warm, bool *ret_has_warm, struct error *err)
{
	static const char *const keys[] = { "settings", "history", "warm", NULL };
	const cJSON *sj = NULL, *hj = NULL, *wj = NULL;
	struct twin_settings s;
	struct twin_calibration w = { 0 };
	struct twin_history h;
	char path[256];
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected an object", what);
	r = json_check_keys(j, what, keys, err);
	if (r >= 0)
		r = json_require_object(j, what, "settings", &sj, err);
	if (r >= 0)
		r = json_get_array(j, what, "history", &hj, err);
	if (r >= 0)
		r = json_get_object(j, what, "warm", &wj, err);
	if (r >= 0)
		r = twin_settings_from_json(sj, json_path_join(path, sizeof(path), what, "settings"), &s, err);
	if (r >= 0 && wj)
		r = twin_calibration_from_json(wj, json_path_join(path, sizeof(path), what, "warm"), &w, err);
	if (r < 0)
		return r;
	if (hj) {
		r = twin_history_from_json(space, hj, json_path_join(path, sizeof(path), what, "history"), &h, err);
		if (r < 0)
			return r;
	} else
		twin_history_init(&h);
	*ret_settings = s;
	*ret_history = h;
	*ret_warm = w;
	*ret_has_warm = wj != NULL;
	return 0;
}

int twin_next_json(struct twin *t, const char *request, size_t len, char **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *req = NULL, *out = NULL;
	struct twin_settings s;
	struct twin_history h;
	struct twin_calibration warm;
	struct twin_candidate c;
	bool has_warm;
	char *text;
	int r;

	r = json_parse_strict("twin request", request, len, &req, err);
	if (r < 0)
		return r;
	r = twin_request_from_json(t->space, req, "request", &s, &h, &warm, &has_warm, err);
	if (r < 0)
		return r;
	r = twin_next(t, &s, &h, has_warm ? &warm : NULL, &c, err);
	twin_history_done(&h);
	if (r < 0)
		return r;
	r = twin_candidate_to_json(t->space, &c, &out);
	if (r < 0)
		return error_set(err, r, "twin: cannot write the candidate as JSON");
	text = cJSON_PrintUnformatted(out);
	if (!text)
		return -ENOMEM;
	*ret = text;
	return 0;
}
