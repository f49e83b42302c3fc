/* twin-json.c — a calibration as JSON, so that a later study on the same
 * host (same engine, engine version, GPU, driver and model) starts from it.
 *
 * The constants sit in a "profile" object of their own: goodput-sim's
 * profile loader refuses unknown keys (a typo in a hand-written profile must
 * not pass silently), so the metadata cannot share an object with them.
 * twin_calibration_write_profile writes that object alone, which is what
 * `goodput-sim --profile-file` (server and simulate) reads. Numbers are
 * written as "%.17g" (cJSON's own printing is only exact to an epsilon), so
 * a stored calibration gives bit-identical predictions.
 * twin-wire.c carries twin_next's inputs and answer the same way. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "twin-internal.h"

/* A double as the exact text "%.17g": cJSON's own printing
 * accepts 15 digits when they read back within an epsilon, which is not
 * bit-exact, and replay needs bit-exact numbers. -EINVAL for NaN and
 * infinities (JSON has no such numbers). */
int twin_json_add_exact(cJSON *o, const char *key, double v)
{
	char buf[32];

	if (!isfinite(v))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%.17g", v);
	return cJSON_AddRawToObject(o, key, buf) ? 0 : -ENOMEM;
}

/* The constants of a profile, exactly: what `goodput-sim --profile-file` reads. */
int twin_profile_to_json(const struct sim_profile *p, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	struct sim_profile copy = *p;

	if (!j)
		return -ENOMEM;
	for (size_t i = 0; sim_profile_field_name(i); i++)
		if (twin_json_add_exact(j, sim_profile_field_name(i), *sim_profile_field(&copy, i)) < 0)
			return -EINVAL;
	*ret = TAKE_PTR(j);
	return 0;
}

void twin_calibration_from_fit(const struct twin_fit *f, double cost_error, struct twin_calibration *ret)
{
	struct twin_calibration c = { 0 };

	c.profile = f->profile;
	c.fit_error = f->error;
	c.cost_error = cost_error;
	c.n_trials = f->n_trials;
	c.n_points = f->n_points;
	c.fitted = f->fitted;
	*ret = c;
}

int twin_calibration_to_json(const struct twin_calibration *c, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	cJSON *prof = NULL, *fitted;
	int r;

	if (!j)
		return -ENOMEM;
	/* Empty key fields are left out (the reader refuses empty strings). */
	if ((c->engine[0] && json_add_string(j, "engine", c->engine) < 0) ||
	    (c->engine_version[0] && json_add_string(j, "engine_version", c->engine_version) < 0) ||
	    (c->gpu[0] && json_add_string(j, "gpu", c->gpu) < 0) ||
	    (c->driver[0] && json_add_string(j, "driver", c->driver) < 0) ||
	    (c->model[0] && json_add_string(j, "model", c->model) < 0) ||
	    twin_json_add_exact(j, "fit_error", c->fit_error) < 0 ||
	    twin_json_add_exact(j, "cost_error", c->cost_error) < 0 || json_add_number(j, "trials", c->n_trials) < 0 ||
	    json_add_number(j, "points", c->n_points) < 0)
		return -ENOMEM;
	fitted = cJSON_AddArrayToObject(j, "fitted");
	if (!fitted)
		return -ENOMEM;
	for (size_t i = 0; sim_profile_field_name(i) && i < 64; i++)
		if ((c->fitted >> i) & 1) {
			cJSON *s = cJSON_CreateString(sim_profile_field_name(i));

			if (!s || !cJSON_AddItemToArray(fitted, s))
				return cJSON_Delete(s), -ENOMEM;
		}
	r = twin_profile_to_json(&c->profile, &prof);
	if (r < 0)
		return r;
	if (!cJSON_AddItemToObject(j, "profile", prof)) {
		cJSON_Delete(prof);
		return -ENOMEM;
	}
	*ret = TAKE_PTR(j);
	return 0;
}

static int get_key_string(const cJSON *j, const char *what, const char *key, char *buf, size_t size, struct error *err)
{
	const char *s = NULL;
	int r;

	r = json_get_string(j, what, key, size - 1, &s, err);
	if (r < 0)
		return r;
	snprintf(buf, size, "%s", s ? s : "");
	return 0;
}

int twin_calibration_from_json(const cJSON *j, const char *what, struct twin_calibration *ret, struct error *err)
{
	static const char *const keys[] = { "engine",     "engine_version", "gpu",    "driver", "model",   "fit_error",
					    "cost_error", "trials",         "points", "fitted", "profile", NULL };
	struct twin_calibration c = { 0 };
	const cJSON *prof = NULL, *fitted = NULL, *e;
	char path[256];
	uint32_t u;
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected a JSON object", what);
	r = json_check_keys(j, what, keys, err);
	if (r < 0)
		return r;
	if ((r = get_key_string(j, what, "engine", c.engine, sizeof(c.engine), err)) < 0 ||
	    (r = get_key_string(j, what, "engine_version", c.engine_version, sizeof(c.engine_version), err)) < 0 ||
	    (r = get_key_string(j, what, "gpu", c.gpu, sizeof(c.gpu), err)) < 0 ||
	    (r = get_key_string(j, what, "driver", c.driver, sizeof(c.driver), err)) < 0 ||
	    (r = get_key_string(j, what, "model", c.model, sizeof(c.model), err)) < 0)
		return r;
	r = json_get_double(j, what, "fit_error", 0, 1e6, &c.fit_error, err);
	if (r >= 0)
		r = json_get_double(j, what, "cost_error", 0, 1e6, &c.cost_error, err);
	if (r < 0)
		return r;
	u = 0;
	r = json_get_u32(j, what, "trials", 0, UINT32_MAX, &u, err);
	if (r < 0)
		return r;
	c.n_trials = u;
	u = 0;
	r = json_get_u32(j, what, "points", 0, UINT32_MAX, &u, err);
	if (r < 0)
		return r;
	c.n_points = u;
	r = json_require_object(j, what, "profile", &prof, err);
	if (r < 0)
		return r;
	/* Start from zeros so that a profile missing a key is an error, not a default; but a twin
	 * stored before the n-gram proposer's cost was a constant takes the vllm preset's. */
	if (!cJSON_GetObjectItemCaseSensitive(prof, "ngram_seq_us")) {
		struct sim_profile v;

		r = sim_profile_preset("vllm", &v, err);
		if (r < 0)
			return r;
		c.profile.ngram_seq_us = v.ngram_seq_us;
	}
	for (size_t i = 0; sim_profile_field_name(i); i++)
		if (!cJSON_GetObjectItemCaseSensitive(prof, sim_profile_field_name(i)) &&
		    strcmp(sim_profile_field_name(i), "ngram_seq_us") != 0)
			return error_set(err, -EINVAL, "%s.profile.%s: missing", what, sim_profile_field_name(i));
	snprintf(path, sizeof(path), "%s.profile", what);
	r = sim_profile_apply_json(&c.profile, prof, path, err);
	if (r < 0)
		return r;
	r = json_get_array(j, what, "fitted", &fitted, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(e, fitted)
	{
		size_t i;

		if (!cJSON_IsString(e))
			return error_set(err, -EINVAL, "%s.fitted: expected constant names", what);
		for (i = 0; sim_profile_field_name(i); i++)
			if (strcmp(sim_profile_field_name(i), e->valuestring) == 0)
				break;
		if (!sim_profile_field_name(i) || i >= 64)
			return error_set(err, -EINVAL, "%s.fitted: unknown constant \"%s\"", what, e->valuestring);
		c.fitted |= UINT64_C(1) << i;
	}
	*ret = c;
	return 0;
}

int twin_calibration_key(const struct twin_calibration *c, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s|%s|%s|%s|%s", c->engine, c->engine_version, c->gpu, c->driver, c->model);

	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

int twin_calibration_write_profile(const struct twin_calibration *c, const char *path, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *prof = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	_cleanup_(fclosep) FILE *f = NULL;
	int r;

	r = twin_profile_to_json(&c->profile, &prof);
	if (r < 0)
		return r;
	text = cJSON_Print(prof);
	if (!text)
		return -ENOMEM;
	f = fopen(path, "we");
	if (!f)
		return error_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fputs(text, f) < 0 || fputc('\n', f) < 0 || fflush(f) != 0)
		return error_set(err, -EIO, "%s: write failed", path);
	return 0;
}
