/* engine-profile.c — loading, validating and rendering engine profiles.
 *
 * A profile is data (configs/engines/NAME.json, see engine-profile.h): the
 * loader checks every key and every placeholder once, so that rendering a
 * configuration later can only fail on the configuration's own values (a
 * knob the engine lacks, a quantization it cannot run). Rendering never
 * produces a shell string: it fills an argv array and "NAME=value"
 * environment entries; engine_command_format() quotes them for display only. */
#include "engine-profile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "json-util.h"
#include "macro.h"
#include "time-util.h"

static const char *const fixed_placeholders[] = { "model", "served_model", "host", "port", "gpu_type", "gpu_count",
						  NULL };

static bool is_canonical_knob(const char *name)
{
	return strcmp(name, OPT_KNOB_MAX_NUM_SEQS) == 0 || strcmp(name, OPT_KNOB_MAX_NUM_BATCHED_TOKENS) == 0 ||
	       strcmp(name, OPT_KNOB_QUANTIZATION) == 0 || strcmp(name, OPT_KNOB_TENSOR_PARALLEL) == 0;
}

static const struct engine_knob *find_knob(const struct engine_profile *p, const char *name)
{
	for (size_t i = 0; i < p->n_knobs; i++)
		if (strcmp(p->knobs[i].name, name) == 0)
			return &p->knobs[i];
	return NULL;
}

/* Reads a NULL-terminated array of non-empty strings (array owned by the caller). */
static int string_array(const cJSON *obj, const char *key, bool required, size_t max, const char ***ret,
			size_t *ret_n, struct error *err)
{
	const cJSON *a = NULL, *item;
	const char **v;
	size_t n, i = 0;
	int r;

	r = json_get_array(obj, "", key, &a, err);
	if (r < 0)
		return r;
	if (r == 0) {
		if (required)
			return error_set(err, -EINVAL, "%s: missing", key);
		*ret = NULL;
		if (ret_n)
			*ret_n = 0;
		return 0;
	}
	n = (size_t)cJSON_GetArraySize(a);
	if (n > max || (required && n == 0))
		return error_set(err, -EINVAL, "%s: expected 1 to %zu strings", key, max);
	v = calloc(n + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	cJSON_ArrayForEach(item, a)
	{
		if (!cJSON_IsString(item) || !item->valuestring[0]) {
			free(v);
			return error_set(err, -EINVAL, "%s[%zu]: expected a non-empty string", key, i);
		}
		v[i++] = item->valuestring;
	}
	*ret = v;
	if (ret_n)
		*ret_n = n;
	return 0;
}

/* Every {name} in s must be a fixed placeholder or a mapped knob. */
static int check_placeholders(const struct engine_profile *p, const char *s, const char *where, struct error *err)
{
	for (const char *o = strchr(s, '{'); o; o = strchr(o + 1, '{')) {
		const char *c = strchr(o, '}');
		char name[OPT_KNOB_NAME_MAX];
		bool ok = false;

		if (!c || (size_t)(c - o - 1) >= sizeof(name) || c == o + 1)
			return error_set(err, -EINVAL, "%s: \"%s\": unterminated or empty placeholder", where, s);
		snprintf(name, sizeof(name), "%.*s", (int)(c - o - 1), o + 1);
		for (size_t i = 0; fixed_placeholders[i] && !ok; i++)
			ok = strcmp(fixed_placeholders[i], name) == 0;
		if (!ok && !find_knob(p, name))
			return error_set(err, -EINVAL,
					 "%s: \"%s\": unknown placeholder {%s} (model, served_model, host, port, "
					 "gpu_type, gpu_count or a knob)",
					 where, s, name);
	}
	return 0;
}

static int check_flag(const char *flag, const char *where, struct error *err)
{
	if (flag[0] != '-' || strlen(flag) < 2 || strpbrk(flag, " \t\n="))
		return error_set(err, -EINVAL, "%s: \"%s\" is not a flag (starts with '-', no spaces or '=')", where,
				 flag);
	return 0;
}

/* "flag": "--x" or ["--x", "--y"] (or absent: checked by the caller). */
static int parse_knob_flags(struct engine_knob *k, const cJSON *item, const char *path, struct error *err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(item, "flag"), *e;
	char where[160];
	int r;

	snprintf(where, sizeof(where), "%s.flag", path);
	if (!f || cJSON_IsNull(f))
		return 0;
	if (cJSON_IsString(f)) {
		r = check_flag(f->valuestring, where, err);
		if (r < 0)
			return r;
		k->flags[k->n_flags++] = f->valuestring;
	} else if (cJSON_IsArray(f) && cJSON_GetArraySize(f) >= 1 && cJSON_GetArraySize(f) <= ENGINE_MAX_KNOB_FLAGS) {
		cJSON_ArrayForEach(e, f)
		{
			if (!cJSON_IsString(e))
				return error_set(err, -EINVAL, "%s: expected flag strings", where);
			r = check_flag(e->valuestring, where, err);
			if (r < 0)
				return r;
			k->flags[k->n_flags++] = e->valuestring;
		}
	} else
		return error_set(err, -EINVAL, "%s: expected a flag or an array of 1 to %d flags", where,
				 ENGINE_MAX_KNOB_FLAGS);
	k->flag = k->flags[0];
	return 0;
}

static int parse_knob(struct engine_profile *p, const cJSON *item, struct error *err)
{
	static const char *const keys[] = { "flag", "values", "checkpoint_required", NULL };
	_Static_assert(ENGINE_MAX_KNOB_FLAGS >= 1, "a knob has at least one flag");
	struct engine_knob *k = &p->knobs[p->n_knobs];
	char path[128];
	const cJSON *a = NULL, *v;
	bool all_null = true;
	int r;

	snprintf(path, sizeof(path), "knobs.%s", item->string);
	if (p->n_knobs >= ENGINE_MAX_KNOBS)
		return error_set(err, -EINVAL, "%s: more than %d knobs", path, ENGINE_MAX_KNOBS);
	if (!item->string[0] || strlen(item->string) >= OPT_KNOB_NAME_MAX ||
	    strspn(item->string, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(item->string))
		return error_set(err, -EINVAL, "%s: knob names are [a-z0-9_], shorter than %d", path, OPT_KNOB_NAME_MAX);
	if (find_knob(p, item->string))
		return error_set(err, -EINVAL, "%s: duplicate key", path);
	r = json_check_keys(item, path, keys, err);
	if (r < 0)
		return r;
	k->name = item->string;
	r = parse_knob_flags(k, item, path, err);
	if (r < 0)
		return r;
	r = json_get_object(item, path, "values", &k->values, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(v, k->values)
	{
		if (!cJSON_IsNull(v) && !(cJSON_IsString(v) && v->valuestring[0]))
			return error_set(err, -EINVAL, "%s.values.%s: expected a flag value (string) or null", path, v->string);
		if (strcmp(k->name, OPT_KNOB_QUANTIZATION) == 0 && study_quant_from_string(v->string) < 0)
			return error_set(err, -EINVAL, "%s.values.%s: unknown quantization (none, fp8, int8, awq)", path,
					 v->string);
		if (!cJSON_IsNull(v))
			all_null = false;
	}
	if (k->n_flags == 0 && (!k->values || !all_null))
		return error_set(err, -EINVAL, "%s.flag: missing (only a knob whose values all map to null may omit it)",
				 path);
	r = json_get_array(item, path, "checkpoint_required", &a, err);
	if (r < 0)
		return r;
	if (r > 0 && strcmp(k->name, OPT_KNOB_QUANTIZATION) != 0)
		return error_set(err, -EINVAL, "%s.checkpoint_required: only for the quantization knob", path);
	cJSON_ArrayForEach(v, a)
	{
		int q = cJSON_IsString(v) ? study_quant_from_string(v->valuestring) : -EINVAL;

		if (q < 0)
			return error_set(err, -EINVAL, "%s.checkpoint_required: expected quantization names", path);
		k->checkpoint_required |= 1u << q;
	}
	p->n_knobs++;
	return 0;
}

/* "derived": [{"flag": "--ctx-size", "product": ["max_num_seqs", 4096]}, ...] */
static int parse_derived(struct engine_profile *p, struct error *err)
{
	static const char *const keys[] = { "flag", "product", NULL };
	const cJSON *a = NULL, *item, *e;
	size_t i = 0;
	int r;

	r = json_get_array(p->json, "", "derived", &a, err);
	if (r <= 0)
		return r;
	if (cJSON_GetArraySize(a) > ENGINE_MAX_DERIVED)
		return error_set(err, -EINVAL, "derived: at most %d entries", ENGINE_MAX_DERIVED);
	cJSON_ArrayForEach(item, a)
	{
		struct engine_derived *d = &p->derived[i];
		char path[64], where[96];
		size_t n_knob = 0;

		snprintf(path, sizeof(path), "derived[%zu]", i);
		if (!cJSON_IsObject(item))
			return error_set(err, -EINVAL, "%s: expected an object", path);
		r = json_check_keys(item, path, keys, err);
		if (r >= 0)
			r = json_require_string(item, path, "flag", 128, &d->flag, err);
		if (r < 0)
			return r;
		snprintf(where, sizeof(where), "%s.flag", path);
		r = check_flag(d->flag, where, err);
		if (r < 0)
			return r;
		d->product = cJSON_GetObjectItemCaseSensitive(item, "product");
		if (!cJSON_IsArray(d->product) || cJSON_GetArraySize(d->product) < 1 ||
		    cJSON_GetArraySize(d->product) > ENGINE_MAX_PRODUCT)
			return error_set(err, -EINVAL, "%s.product: expected 1 to %d knob names and numbers", path,
					 ENGINE_MAX_PRODUCT);
		cJSON_ArrayForEach(e, d->product)
		{
			if (cJSON_IsString(e)) {
				if (!find_knob(p, e->valuestring))
					return error_set(err, -EINVAL, "%s.product: \"%s\" is not a knob of this profile", path,
							 e->valuestring);
				n_knob++;
			} else if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble <= 0 ||
				   e->valuedouble > 1e9)
				return error_set(err, -EINVAL, "%s.product: expected knob names and numbers in (0, 1e9]", path);
		}
		if (n_knob == 0)
			return error_set(err, -EINVAL, "%s.product: names no knob (a constant belongs in argv)", path);
		i++;
	}
	p->n_derived = i;
	return 0;
}

static int parse_profile(struct engine_profile *p, struct error *err)
{
	static const char *const keys[] = { "name", "description", "argv", "knobs", "env", "gpu_env", "port",
					    "health", "startup_timeout", "stop_timeout", "oom_patterns",
					    "version_command", "metrics_path", "derived", "help_command", NULL };
	static const char *const port_keys[] = { "mode", "announce_prefix", NULL };
	static const char *const health_keys[] = { "path", "interval", NULL };
	static const char *const port_modes[] = { "free", "announce", NULL };
	const cJSON *j = p->json, *knobs = NULL, *o = NULL, *item;
	double sec;
	size_t n_extra = 0;
	int r, mode = 0;

	r = json_check_keys(j, "", keys, err);
	if (r < 0)
		return r;
	r = json_require_string(j, "", "name", 64, &p->name, err);
	if (r < 0)
		return r;
	r = json_get_string(j, "", "description", 2048, &p->description, err);
	if (r < 0)
		return r;
	r = json_require_object(j, "", "knobs", &knobs, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(item, knobs)
	{
		r = parse_knob(p, item, err);
		if (r < 0)
			return r;
	}
	p->extra_knobs = calloc(p->n_knobs + 1, sizeof(char *));
	if (!p->extra_knobs)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_knobs; i++)
		if (!is_canonical_knob(p->knobs[i].name))
			p->extra_knobs[n_extra++] = p->knobs[i].name;

	r = parse_derived(p, err);
	if (r < 0)
		return r;
	r = string_array(j, "argv", true, ENGINE_MAX_ARGS, &p->argv, &p->n_argv, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->n_argv; i++) {
		char where[32];

		snprintf(where, sizeof(where), "argv[%zu]", i);
		r = check_placeholders(p, p->argv[i], where, err);
		if (r < 0)
			return r;
	}
	r = json_get_object(j, "", "env", &p->env, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(item, p->env)
	{
		char where[128];

		snprintf(where, sizeof(where), "env.%s", item->string);
		if (!item->string[0] || strchr(item->string, '='))
			return error_set(err, -EINVAL, "%s: not a variable name", where);
		if (!cJSON_IsString(item))
			return error_set(err, -EINVAL, "%s: expected a string", where);
		r = check_placeholders(p, item->valuestring, where, err);
		if (r < 0)
			return r;
	}
	r = json_get_string(j, "", "gpu_env", 64, &p->gpu_env, err);
	if (r < 0)
		return r;

	r = json_get_object(j, "", "port", &o, err);
	if (r < 0)
		return r;
	if (o) {
		r = json_check_keys(o, "port", port_keys, err);
		if (r >= 0)
			r = json_get_enum(o, "port", "mode", port_modes, &mode, err);
		if (r >= 0)
			r = json_get_string(o, "port", "announce_prefix", 128, &p->announce_prefix, err);
		if (r < 0)
			return r;
	}
	p->port_mode = (enum engine_port_mode)mode;
	if (p->port_mode == ENGINE_PORT_ANNOUNCE && !p->announce_prefix)
		return error_set(err, -EINVAL, "port.announce_prefix: missing (needed by mode \"announce\")");

	o = NULL;
	r = json_require_object(j, "", "health", &o, err);
	if (r >= 0)
		r = json_check_keys(o, "health", health_keys, err);
	if (r >= 0)
		r = json_require_string(o, "health", "path", 256, &p->health_path, err);
	if (r < 0)
		return r;
	if (p->health_path[0] != '/')
		return error_set(err, -EINVAL, "health.path: \"%s\" does not start with '/'", p->health_path);
	sec = 1;
	r = json_get_double(o, "health", "interval", 0.01, 60, &sec, err);
	if (r < 0)
		return r;
	p->health_interval_usec = sec_to_usec(sec);
	sec = 600;
	r = json_get_double(j, "", "startup_timeout", 1, 86400, &sec, err);
	if (r < 0)
		return r;
	p->startup_timeout_usec = sec_to_usec(sec);
	sec = 30;
	r = json_get_double(j, "", "stop_timeout", 0.1, 3600, &sec, err);
	if (r < 0)
		return r;
	p->stop_timeout_usec = sec_to_usec(sec);

	r = string_array(j, "oom_patterns", false, 64, &p->oom_patterns, NULL, err);
	if (r < 0)
		return r;
	if (!p->oom_patterns) {
		p->oom_patterns = calloc(1, sizeof(char *));
		if (!p->oom_patterns)
			return -ENOMEM;
	}
	r = string_array(j, "version_command", false, 16, &p->version_command, NULL, err);
	if (r < 0)
		return r;
	r = string_array(j, "help_command", false, 16, &p->help_command, NULL, err);
	if (r < 0)
		return r;
	r = json_get_string(j, "", "metrics_path", 256, &p->metrics_path, err);
	if (r < 0)
		return r;
	if (p->metrics_path && p->metrics_path[0] != '/')
		return error_set(err, -EINVAL, "metrics_path: \"%s\" does not start with '/'", p->metrics_path);
	return 0;
}

int engine_profile_from_json(const cJSON *j, const char *what, struct engine_profile **ret, struct error *err)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected a JSON object", what);
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->json = cJSON_Duplicate(j, true);
	p->path = strdup(what);
	if (!p->json || !p->path)
		return -ENOMEM;
	r = parse_profile(p, err);
	if (r < 0)
		return error_prefix(err, r, "%s", what);
	*ret = TAKE_PTR(p);
	return 0;
}

int engine_profile_load_file(const char *path, struct engine_profile **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	int r;

	r = json_parse_file(path, ENGINE_PROFILE_MAX_BYTES, &j, err);
	if (r < 0)
		return r;
	return engine_profile_from_json(j, path, ret, err);
}

int engine_profile_find(const char *name, const char *engines_dir, struct engine_profile **ret, struct error *err)
{
	const char *dirs[] = { engines_dir, "/etc/goodput/engines", GOODPUT_DATADIR "/engines",
			       GOODPUT_SOURCE_ROOT "/configs/engines" };
	char path[4096];
	struct stat st;

	if (!name || !*name)
		return error_set(err, -EINVAL, "engine: empty profile name");
	if (strchr(name, '/'))
		return engine_profile_load_file(name, ret, err);
	if (name[0] == '.' || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
				      strlen(name))
		return error_set(err, -EINVAL, "engine: \"%s\" is not a profile name", name);
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		if (!dirs[i])
			continue;
		snprintf(path, sizeof(path), "%s/%s.json", dirs[i], name);
		if (stat(path, &st) == 0)
			return engine_profile_load_file(path, ret, err);
	}
	return error_set(err, -ENOENT, "engine: no profile \"%s\" in %s%s/etc/goodput/engines, %s/engines or %s/configs/engines",
			 name, engines_dir ? engines_dir : "", engines_dir ? ", " : "", GOODPUT_DATADIR,
			 GOODPUT_SOURCE_ROOT);
}

struct engine_profile *engine_profile_free(struct engine_profile *p)
{
	if (!p)
		return NULL;
	free(p->argv);
	free(p->extra_knobs);
	free(p->oom_patterns);
	free(p->version_command);
	free(p->help_command);
	cJSON_Delete(p->json);
	free(p->path);
	free(p);
	return NULL;
}


static bool strv_has(const char **v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

int engine_profile_flags(const struct engine_profile *p, const char ***ret)
{
	size_t max = p->n_argv + p->n_knobs * ENGINE_MAX_KNOB_FLAGS + p->n_derived + 1, n = 0;
	const char **v = calloc(max, sizeof(char *));

	if (!v)
		return -ENOMEM;
	/* argv[0] is the program; fixed arguments that look like flags (not "-1"). */
	for (size_t i = 1; i < p->n_argv; i++) {
		const char *a = p->argv[i];

		if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9') && !strchr(a, '{') && !strv_has(v, n, a))
			v[n++] = a;
	}
	for (size_t i = 0; i < p->n_knobs; i++)
		for (size_t f = 0; f < p->knobs[i].n_flags; f++)
			if (!strv_has(v, n, p->knobs[i].flags[f]))
				v[n++] = p->knobs[i].flags[f];
	for (size_t i = 0; i < p->n_derived; i++)
		if (!strv_has(v, n, p->derived[i].flag))
			v[n++] = p->derived[i].flag;
	v[n] = NULL;
	*ret = v;
	return 0;
}

/* ---- rendering ---- */

void engine_command_done(struct engine_command *c)
{
	if (!c)
		return;
	for (size_t i = 0; c->argv && c->argv[i]; i++)
		free(c->argv[i]);
	for (size_t i = 0; c->env && c->env[i]; i++)
		free(c->env[i]);
	free(c->argv);
	free(c->env);
	*c = (struct engine_command){ 0 };
}

/* A knob value as flag text: integers without a fraction, others %.15g. */
static int value_text(const cJSON *v, char *buf, size_t size)
{
	if (cJSON_IsString(v) && v->valuestring[0]) {
		snprintf(buf, size, "%s", v->valuestring);
		return 0;
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return -EINVAL;
	if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e15)
		snprintf(buf, size, "%.0f", v->valuedouble);
	else
		snprintf(buf, size, "%.15g", v->valuedouble);
	return 0;
}

static int placeholder_value(const struct engine_render_params *params, const cJSON *knobs, const char *name,
			     char *buf, size_t size)
{
	if (strcmp(name, "model") == 0)
		snprintf(buf, size, "%s", params->model ? params->model : "");
	else if (strcmp(name, "served_model") == 0)
		snprintf(buf, size, "%s", params->served_model ? params->served_model : params->model ? params->model : "");
	else if (strcmp(name, "host") == 0)
		snprintf(buf, size, "%s", params->host ? params->host : "127.0.0.1");
	else if (strcmp(name, "port") == 0)
		snprintf(buf, size, "%u", params->port);
	else if (strcmp(name, "gpu_type") == 0)
		snprintf(buf, size, "%s", params->gpu_type ? params->gpu_type : "");
	else if (strcmp(name, "gpu_count") == 0)
		snprintf(buf, size, "%u", params->gpu_count ? params->gpu_count : 1);
	else
		return value_text(cJSON_GetObjectItemCaseSensitive(knobs, name), buf, size);
	return 0;
}

/* Substitutes the placeholders of a template (validated at load time). */
static int substitute(const char *tmpl, const struct engine_render_params *params, const cJSON *knobs,
		      const char *where, char **ret, struct error *err)
{
	char out[4096], val[1024];
	size_t len = 0;

	for (const char *s = tmpl; *s;) {
		const char *c;
		size_t n;

		if (*s != '{' || !(c = strchr(s, '}'))) {
			if (len + 1 >= sizeof(out))
				return error_set(err, -E2BIG, "%s: rendered value too long", where);
			out[len++] = *s++;
			continue;
		}
		char name[OPT_KNOB_NAME_MAX];
		snprintf(name, sizeof(name), "%.*s", (int)(c - s - 1), s + 1);
		if (placeholder_value(params, knobs, name, val, sizeof(val)) < 0)
			return error_set(err, -EINVAL, "%s: {%s}: the configuration has no value for it", where, name);
		n = strlen(val);
		if (len + n >= sizeof(out))
			return error_set(err, -E2BIG, "%s: rendered value too long", where);
		memcpy(out + len, val, n);
		len += n;
		s = c + 1;
	}
	out[len] = 0;
	*ret = strdup(out);
	return *ret ? 0 : -ENOMEM;
}

static int push(char ***v, size_t *n, char *s)
{
	char **nv;

	if (!s)
		return -ENOMEM;
	nv = reallocarray(*v, *n + 2, sizeof(char *));
	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

/* Tensor parallelism splits the host's GPUs into equal replicas: the size
 * must be a whole number that divides the GPU count. */
static int check_tensor_parallel(const cJSON *knobs, unsigned gpu_count, struct error *err)
{
	const cJSON *tp = cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_TENSOR_PARALLEL);
	double v;

	if (!tp)
		return 0;
	if (!cJSON_IsNumber(tp) || !isfinite(tp->valuedouble) || tp->valuedouble < 1 || tp->valuedouble > 64 ||
	    tp->valuedouble != floor(tp->valuedouble))
		return error_set(err, -EINVAL, "knob tensor_parallel: expected a whole number of GPUs in [1, 64]");
	v = tp->valuedouble;
	if (gpu_count > 0 && gpu_count % (unsigned)v != 0)
		return error_set(err, -EINVAL, "knob tensor_parallel: %.0f does not divide the host's %u GPUs", v,
				 gpu_count);
	return 0;
}

/* Returns 1 with the value in buf, 0 when a named knob has no value. */
static int render_derived(const struct engine_profile *p, const struct engine_derived *d, const cJSON *knobs,
			  char *buf, size_t size, struct error *err)
{
	double prod = 1;
	const cJSON *e;

	cJSON_ArrayForEach(e, d->product)
	{
		const cJSON *v = cJSON_IsString(e) ? cJSON_GetObjectItemCaseSensitive(knobs, e->valuestring) : e;

		if (!v)
			return 0;
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0)
			return error_set(err, -EINVAL, "knob %s: %s needs a positive number", e->valuestring, d->flag);
		prod *= v->valuedouble;
	}
	if (prod > 1e15)
		return error_set(err, -ERANGE, "%s: the product %g is too large for engine %s", d->flag, prod, p->name);
	if (prod == floor(prod))
		snprintf(buf, size, "%.0f", prod);
	else
		snprintf(buf, size, "%.15g", prod);
	return 1;
}

int engine_profile_render(const struct engine_profile *p, const struct engine_render_params *params,
			  const cJSON *knobs, struct engine_command *ret, struct error *err)
{
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	size_t n_argv = 0, n_env = 0;
	const cJSON *item;
	char *s = NULL;
	int r;

	if (knobs && !cJSON_IsObject(knobs))
		return error_set(err, -EINVAL, "knobs: expected an object");
	cJSON_ArrayForEach(item, knobs)
	{
		char buf[256];

		if (!find_knob(p, item->string))
			return error_set(err, -EINVAL, "knob %s: engine %s has no flag for it", item->string, p->name);
		if (value_text(item, buf, sizeof(buf)) < 0)
			return error_set(err, -EINVAL, "knob %s: expected a number or a string", item->string);
	}
	r = check_tensor_parallel(knobs, params->gpu_count, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->n_argv; i++) {
		char where[32];

		snprintf(where, sizeof(where), "argv[%zu]", i);
		r = substitute(p->argv[i], params, knobs, where, &s, err);
		if (r >= 0)
			r = push(&c.argv, &n_argv, TAKE_PTR(s));
		if (r < 0)
			return r;
	}
	/* Flags in the profile's knob order, so that equal configurations render equally. */
	for (size_t i = 0; i < p->n_knobs; i++) {
		const struct engine_knob *k = &p->knobs[i];
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, k->name);
		char buf[256];

		if (!v)
			continue;
		(void)value_text(v, buf, sizeof(buf)); /* checked above */
		if (k->values) {
			const cJSON *mapped = cJSON_GetObjectItemCaseSensitive(k->values, buf);

			if (!mapped)
				return error_set(err, -EINVAL, "knob %s: engine %s does not support \"%s\"", k->name, p->name,
						 buf);
			if (cJSON_IsNull(mapped))
				continue;
			snprintf(buf, sizeof(buf), "%s", mapped->valuestring);
		}
		for (size_t f = 0; f < k->n_flags; f++) {
			r = push(&c.argv, &n_argv, strdup(k->flags[f]));
			if (r >= 0)
				r = push(&c.argv, &n_argv, strdup(buf));
			if (r < 0)
				return r;
		}
	}
	for (size_t i = 0; i < p->n_derived; i++) {
		char buf[64];

		r = render_derived(p, &p->derived[i], knobs, buf, sizeof(buf), err);
		if (r < 0)
			return r;
		if (r == 0)
			continue;
		r = push(&c.argv, &n_argv, strdup(p->derived[i].flag));
		if (r >= 0)
			r = push(&c.argv, &n_argv, strdup(buf));
		if (r < 0)
			return r;
	}
	cJSON_ArrayForEach(item, p->env)
	{
		char where[128], *val = NULL, *kv = NULL;

		snprintf(where, sizeof(where), "env.%s", item->string);
		r = substitute(item->valuestring, params, knobs, where, &val, err);
		if (r < 0)
			return r;
		r = asprintf(&kv, "%s=%s", item->string, val);
		free(val);
		if (r < 0)
			return -ENOMEM;
		r = push(&c.env, &n_env, kv);
		if (r < 0)
			return r;
	}
	if (p->gpu_env) {
		const cJSON *tp = cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_TENSOR_PARALLEL);
		unsigned n = cJSON_IsNumber(tp) && tp->valuedouble >= 1 ? (unsigned)tp->valuedouble : 1;
		char list[512];
		size_t len = 0;

		if (n > 64)
			return error_set(err, -EINVAL, "knob tensor_parallel: %u GPUs is too many", n);
		for (unsigned g = 0; g < n; g++)
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%u", g ? "," : "", g);
		char *kv = NULL;
		if (asprintf(&kv, "%s=%s", p->gpu_env, list) < 0)
			return -ENOMEM;
		r = push(&c.env, &n_env, kv);
		if (r < 0)
			return r;
	}
	if (!c.env) {
		c.env = calloc(1, sizeof(char *));
		if (!c.env)
			return -ENOMEM;
	}
	*ret = c;
	c = (struct engine_command){ 0 };
	return 0;
}

static enum study_quant knobs_quant(const cJSON *knobs)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(knobs, OPT_KNOB_QUANTIZATION);
	int v = cJSON_IsString(q) ? study_quant_from_string(q->valuestring) : STUDY_QUANT_NONE;

	return v < 0 ? STUDY_QUANT_NONE : (enum study_quant)v;
}

static int need_checkpoint(const struct engine_profile *p, const struct study *s, enum study_quant q,
			   struct error *err)
{
	const struct engine_knob *k = find_knob(p, OPT_KNOB_QUANTIZATION);

	if (k && (k->checkpoint_required & (1u << q)) && !s->model.checkpoints[q])
		return error_set(err, -EINVAL, "model.checkpoints.%s: engine %s needs a separate checkpoint for %s",
				 study_quant_to_string(q), p->name, study_quant_to_string(q));
	return 0;
}

int engine_profile_render_study(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, struct engine_command *ret, struct error *err)
{
	enum study_quant q = knobs_quant(knobs);
	struct engine_render_params params = {
		.model = study_checkpoint(s, q),
		.served_model = s->model.name,
		.host = host ? host : s->deploy.host,
		.port = port,
		.gpu_type = s->gpu.type,
		.gpu_count = s->gpu.count,
	};
	int r;

	r = need_checkpoint(p, s, q, err);
	if (r < 0)
		return r;
	return engine_profile_render(p, &params, knobs, ret, err);
}

int engine_profile_check_study(const struct engine_profile *p, const struct study *s, struct error *err)
{
	const struct engine_knob *qk = find_knob(p, OPT_KNOB_QUANTIZATION);
	int r;

	for (size_t i = 0; s->space && i < s->space->n_knobs; i++)
		if (!find_knob(p, s->space->knobs[i].name))
			return error_set(err, -EINVAL, "search_space.%s: engine %s has no flag for this knob",
					 s->space->knobs[i].name, p->name);
	for (int q = 0; q < _STUDY_QUANT_MAX; q++) {
		if (!(s->quantizations & (1u << q)))
			continue;
		if (q != STUDY_QUANT_NONE && !qk)
			return error_set(err, -EINVAL, "quantizations: engine %s has no quantization flag for %s", p->name,
					 study_quant_to_string((enum study_quant)q));
		if (qk && qk->values && !cJSON_GetObjectItemCaseSensitive(qk->values, study_quant_to_string((enum study_quant)q)))
			return error_set(err, -EINVAL, "quantizations: engine %s does not support %s", p->name,
					 study_quant_to_string((enum study_quant)q));
		r = need_checkpoint(p, s, (enum study_quant)q, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Appends s shell-quoted when it needs quoting. */
static void append_quoted(char **buf, size_t *len, size_t *cap, const char *s)
{
	bool plain = *s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") ==
				   strlen(s);
	size_t need = strlen(s) * 4 + 4;

	if (*len + need + 1 > *cap) {
		size_t c = MAX(*cap * 2, *len + need + 1);
		char *nb = realloc(*buf, c);
		if (!nb)
			return;
		*buf = nb;
		*cap = c;
	}
	if (*len)
		(*buf)[(*len)++] = ' ';
	if (plain) {
		memcpy(*buf + *len, s, strlen(s));
		*len += strlen(s);
	} else {
		(*buf)[(*len)++] = '\'';
		for (const char *p = s; *p; p++) {
			if (*p == '\'') {
				memcpy(*buf + *len, "'\\''", 4);
				*len += 4;
			} else
				(*buf)[(*len)++] = *p;
		}
		(*buf)[(*len)++] = '\'';
	}
	(*buf)[*len] = 0;
}

char *engine_command_format(const struct engine_command *c)
{
	size_t len = 0, cap = 256;
	char *buf = malloc(cap);

	if (!buf)
		return NULL;
	buf[0] = 0;
	for (size_t i = 0; c->env && c->env[i]; i++) {
		const char *eq = strchr(c->env[i], '=');
		/* NAME=value: quote only the value. */
		char *name = strndup(c->env[i], eq ? (size_t)(eq - c->env[i]) : strlen(c->env[i]));
		if (!name) {
			free(buf);
			return NULL;
		}
		append_quoted(&buf, &len, &cap, name);
		free(name);
		if (eq) {
			size_t l0 = len;
			append_quoted(&buf, &len, &cap, eq + 1);
			/* join "NAME" and "value" with '=' instead of the space */
			if (len > l0 && buf[l0] == ' ')
				buf[l0] = '=';
		}
	}
	for (size_t i = 0; c->argv && c->argv[i]; i++)
		append_quoted(&buf, &len, &cap, c->argv[i]);
	return buf;
}
