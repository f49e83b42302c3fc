/* twin-wire.c — twin_next's answer (the candidate) as JSON, bit-exactly.
 *
 * twin_next costs seconds of CPU (fits of a few hundred simulations each),
 * which must not run on the daemon's sd-event loop. With these functions a
 * forked child computes the ask and the loop only reads the answer from a
 * pipe (twin.h describes the protocol). Doubles are written as "%.17g"
 * (twin_json_add_exact), so the candidate read back is the one twin_next
 * gave. NaN values (no prediction) are left out. The reader checks every
 * key and names the JSON path of a bad one. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "twin-internal.h"

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

/* ---- the caches across a fork ---- */

/* A double exactly ("%.17g"), or null for an infinity (a configuration the
 * model cannot start, a prediction that never meets the SLA). */
static cJSON *exact_or_null(double v)
{
	char buf[32];

	if (!isfinite(v))
		return cJSON_CreateNull();
	snprintf(buf, sizeof(buf), "%.17g", v);
	return cJSON_CreateRaw(buf);
}

static int array_add(cJSON *a, cJSON *v)
{
	if (!v || !cJSON_AddItemToArray(a, v)) {
		cJSON_Delete(v);
		return -ENOMEM;
	}
	return 0;
}

static int rank_to_json(const struct twin *t, const struct twin_rank *rk, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	struct sim_profile p = rk->profile;
	cJSON *prof, *lb, *pred;
	int r = 0;

	if (!o || !(prof = cJSON_AddArrayToObject(o, "profile")) || !(lb = cJSON_AddArrayToObject(o, "lb")) ||
	    !(pred = cJSON_AddArrayToObject(o, "pred")))
		return -ENOMEM;
	for (size_t f = 0; sim_profile_field_name(f) && r >= 0; f++)
		r = isfinite(*sim_profile_field(&p, f)) ? array_add(prof, exact_or_null(*sim_profile_field(&p, f)))
							: -EINVAL;
	for (size_t i = 0; i < t->n_configs && r >= 0; i++) {
		cJSON *e;

		if (rk->fresh[i] & TWIN_FRESH_LB) {
			e = cJSON_CreateArray();
			r = array_add(lb, e);
			if (r >= 0)
				r = array_add(e, cJSON_CreateNumber((double)i));
			if (r >= 0)
				r = array_add(e, exact_or_null(rk->lb[i]));
		}
		if (r >= 0 && (rk->fresh[i] & TWIN_FRESH_PRED)) {
			e = cJSON_CreateArray();
			r = array_add(pred, e);
			if (r >= 0)
				r = array_add(e, cJSON_CreateNumber((double)i));
			if (r >= 0)
				r = array_add(e, cJSON_CreateNumber(rk->pred[i].outcome));
			if (r >= 0)
				r = array_add(e, exact_or_null(rk->pred[i].cost));
			if (r >= 0)
				r = array_add(e, exact_or_null(rk->pred[i].max_rate));
		}
	}
	if (r < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

int twin_cache_to_json(const struct twin *t, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	cJSON *ranks, *fits;
	bool any = false;
	int r;

	if (!o || !(ranks = cJSON_AddArrayToObject(o, "ranks")) || !(fits = cJSON_AddArrayToObject(o, "fits")))
		return -ENOMEM;
	for (size_t k = 0; k < TWIN_RANKS_MAX; k++) {
		const struct twin_rank *rk = &t->ranks[k];
		cJSON *j = NULL;

		if (!rk->used || !rk->any_fresh)
			continue;
		r = rank_to_json(t, rk, &j);
		if (r < 0)
			return r;
		if (array_add(ranks, j) < 0)
			return -ENOMEM;
		any = true;
	}
	for (size_t k = 0; k < TWIN_FITS_MAX; k++) {
		const struct twin_fit_entry *e = &t->fits[k];
		cJSON *j, *f = NULL;
		char hash[32];

		if (!e->used || !e->fresh)
			continue;
		j = cJSON_CreateObject();
		if (array_add(fits, j) < 0)
			return -ENOMEM;
		snprintf(hash, sizeof(hash), "%016" PRIx64, e->hash);
		if (json_add_string(j, "hash", hash) < 0 || json_add_number(j, "r", e->r) < 0)
			return -ENOMEM;
		if (e->r >= 0) {
			r = fit_to_json(&e->fit, &f);
			if (r < 0)
				return r;
			if (!cJSON_AddItemToObject(j, "fit", f))
				return cJSON_Delete(f), -ENOMEM;
		}
		any = true;
	}
	if (t->startable_fresh) {
		_cleanup_(freep) char *s = malloc(t->n_configs + 1);

		if (!s)
			return -ENOMEM;
		for (size_t i = 0; i < t->n_configs; i++)
			s[i] = t->startable[i] < 0 ? '-' : (char)('0' + t->startable[i]);
		s[t->n_configs] = 0;
		if (json_add_string(o, "startable", s) < 0)
			return -ENOMEM;
		any = true;
	}
	*ret = any ? TAKE_PTR(o) : NULL;
	return 0;
}

/* A number read back exactly, or null for an infinity. */
static int get_exact(const cJSON *v, const char *what, double *ret, struct error *err)
{
	if (cJSON_IsNull(v)) {
		*ret = INFINITY;
		return 0;
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return error_set(err, -EINVAL, "%s: expected a number or null", what);
	*ret = v->valuedouble;
	return 0;
}

/* Entry [i, ...] of n numbers: its index, checked against the space. */
static int get_entry(const struct twin *t, const cJSON *e, size_t n, const char *what, size_t *ret_i, struct error *err)
{
	const cJSON *i = cJSON_GetArrayItem(e, 0);

	if (!cJSON_IsArray(e) || (size_t)cJSON_GetArraySize(e) != n || !cJSON_IsNumber(i) || i->valuedouble < 0 ||
	    i->valuedouble >= (double)t->n_configs || i->valuedouble != (double)(size_t)i->valuedouble)
		return error_set(err, -EINVAL, "%s: expected [configuration index, ...] of %zu numbers", what, n);
	*ret_i = (size_t)i->valuedouble;
	return 0;
}

static int rank_from_json(struct twin *t, const cJSON *o, const char *what, struct error *err)
{
	const cJSON *prof = cJSON_GetObjectItemCaseSensitive(o, "profile");
	const cJSON *lb = cJSON_GetObjectItemCaseSensitive(o, "lb");
	const cJSON *pred = cJSON_GetObjectItemCaseSensitive(o, "pred");
	struct sim_profile p = { 0 };
	struct twin_rank *rk;
	const cJSON *e;
	size_t f = 0;
	int r;

	if (!cJSON_IsArray(prof) || !cJSON_IsArray(lb) || !cJSON_IsArray(pred))
		return error_set(err, -EINVAL, "%s: expected \"profile\", \"lb\" and \"pred\" arrays", what);
	cJSON_ArrayForEach(e, prof)
	{
		if (!sim_profile_field_name(f) || !cJSON_IsNumber(e))
			return error_set(err, -EINVAL, "%s.profile: expected one number per constant", what);
		*sim_profile_field(&p, f++) = e->valuedouble;
	}
	if (sim_profile_field_name(f))
		return error_set(err, -EINVAL, "%s.profile: expected one number per constant", what);
	r = twin_rank_get(t, &p, &rk);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(e, lb)
	{
		size_t i;
		double v;

		r = get_entry(t, e, 2, what, &i, err);
		if (r >= 0)
			r = get_exact(cJSON_GetArrayItem(e, 1), what, &v, err);
		if (r < 0)
			return r;
		rk->lb[i] = v;
	}
	cJSON_ArrayForEach(e, pred)
	{
		const cJSON *outcome = cJSON_GetArrayItem(e, 1);
		struct twin_prediction pr = { 0 };
		size_t i;

		r = get_entry(t, e, 4, what, &i, err);
		if (r >= 0 &&
		    (!cJSON_IsNumber(outcome) || outcome->valueint < 0 || outcome->valueint >= _OPT_OUTCOME_MAX))
			r = error_set(err, -EINVAL, "%s: an unknown outcome", what);
		if (r >= 0)
			r = get_exact(cJSON_GetArrayItem(e, 2), what, &pr.cost, err);
		if (r >= 0)
			r = get_exact(cJSON_GetArrayItem(e, 3), what, &pr.max_rate, err);
		if (r < 0)
			return r;
		pr.outcome = (enum opt_outcome)outcome->valueint;
		rk->pred[i] = pr;
		rk->have[i] = true;
	}
	return 0;
}

int twin_cache_merge_json(struct twin *t, const cJSON *j, const char *what, struct error *err)
{
	static const char *const keys[] = { "ranks", "fits", "startable", NULL };
	const cJSON *ranks = NULL, *fits = NULL, *e;
	const char *startable = NULL;
	char path[256];
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected an object", what);
	r = json_check_keys(j, what, keys, err);
	if (r >= 0)
		r = json_get_array(j, what, "ranks", &ranks, err);
	if (r >= 0)
		r = json_get_array(j, what, "fits", &fits, err);
	if (r >= 0)
		r = json_get_string(j, what, "startable", t->n_configs, &startable, err);
	if (r < 0)
		return r;
	if (startable) {
		if (strlen(startable) != t->n_configs || strspn(startable, "-01") != t->n_configs)
			return error_set(err, -EINVAL, "%s.startable: expected one of '-', '0', '1' per configuration",
					 what);
		for (size_t i = 0; i < t->n_configs; i++)
			if (t->startable[i] < 0 && startable[i] != '-')
				t->startable[i] = (int8_t)(startable[i] - '0');
	}
	cJSON_ArrayForEach(e, ranks)
	{
		r = rank_from_json(t, e, json_path_join(path, sizeof(path), what, "ranks"), err);
		if (r < 0)
			return r;
	}
	cJSON_ArrayForEach(e, fits)
	{
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "fit");
		const char *hash = NULL;
		struct twin_fit fit = { 0 };
		uint64_t h;
		double code = 0;
		char *end = NULL;

		json_path_join(path, sizeof(path), what, "fits");
		r = json_require_string(e, path, "hash", 16, &hash, err);
		if (r >= 0)
			r = json_get_double(e, path, "r", -4095, 0, &code, err);
		if (r < 0)
			return r;
		h = strtoull(hash, &end, 16);
		if (!end || *end)
			return error_set(err, -EINVAL, "%s.hash: expected 16 hexadecimal digits", path);
		if (code >= 0) {
			r = f ? fit_from_json(f, path, &fit, err) : error_set(err, -EINVAL, "%s.fit: missing", path);
			if (r < 0)
				return r;
		}
		twin_fit_cache_put(t, h, (int)code, &fit);
	}
	return 0;
}
