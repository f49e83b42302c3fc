/* engine-profile.c — loading and validating engine profiles.
 *
 * A profile is data (configs/engines/NAME.json, see engine-profile.h): the
 * loader checks every key and every placeholder once, so that rendering a
 * configuration later can only fail on the configuration's own values (a
 * knob the engine lacks, a quantization it cannot run). Rendering never
 * produces a shell string: it fills an argv array and "NAME=value"
 * environment entries; engine_command_format() quotes them for display only.
 * Rendering (engine_profile_render*, engine_command_*) lives in
 * engine-profile-render.c. */
#include "engine-profile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "engine-profile-internal.h"
#include "json-util.h"
#include "macro.h"
#include "time-util.h"

static const char *const fixed_placeholders[] = {
	"model", "served_model", "host", "port", "gpu_type", "gpu_count", NULL
};

static bool is_canonical_knob(const char *name)
{
	return strcmp(name, OPT_KNOB_MAX_NUM_SEQS) == 0 || strcmp(name, OPT_KNOB_MAX_NUM_BATCHED_TOKENS) == 0 ||
	       strcmp(name, OPT_KNOB_QUANTIZATION) == 0 || strcmp(name, OPT_KNOB_TENSOR_PARALLEL) == 0;
}

const struct engine_knob *engine_profile_find_knob(const struct engine_profile *p, const char *name)
{
	for (size_t i = 0; i < p->n_knobs; i++)
		if (strcmp(p->knobs[i].name, name) == 0)
			return &p->knobs[i];
	return NULL;
}

/* Reads a NULL-terminated array of non-empty strings (array owned by the caller). */
static int string_array(const cJSON *obj, const char *key, bool required, size_t max, const char ***ret, size_t *ret_n,
			struct error *err)
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
		if (!ok && !engine_profile_find_knob(p, name))
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
		return error_set(err, -EINVAL, "%s: knob names are [a-z0-9_], shorter than %d", path,
				 OPT_KNOB_NAME_MAX);
	if (engine_profile_find_knob(p, item->string))
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
			return error_set(err, -EINVAL, "%s.values.%s: expected a flag value (string) or null", path,
					 v->string);
		if (strcmp(k->name, OPT_KNOB_QUANTIZATION) == 0 && study_quant_from_string(v->string) < 0)
			return error_set(err, -EINVAL, "%s.values.%s: unknown quantization (none, fp8, int8, awq)",
					 path, v->string);
		if (!cJSON_IsNull(v))
			all_null = false;
	}
	if (k->n_flags == 0 && (!k->values || !all_null))
		return error_set(err, -EINVAL,
				 "%s.flag: missing (only a knob whose values all map to null may omit it)", path);
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
				if (!engine_profile_find_knob(p, e->valuestring))
					return error_set(err, -EINVAL,
							 "%s.product: \"%s\" is not a knob of this profile", path,
							 e->valuestring);
				n_knob++;
			} else if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble <= 0 ||
				   e->valuedouble > 1e9)
				return error_set(err, -EINVAL,
						 "%s.product: expected knob names and numbers in (0, 1e9]", path);
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
	static const char *const keys[] = { "name",
					    "description",
					    "argv",
					    "knobs",
					    "env",
					    "gpu_env",
					    "port",
					    "health",
					    "startup_timeout",
					    "stop_timeout",
					    "oom_patterns",
					    "version_command",
					    "metrics_path",
					    "derived",
					    "help_command",
					    NULL };
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
	if (name[0] == '.' ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(name))
		return error_set(err, -EINVAL, "engine: \"%s\" is not a profile name", name);
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		if (!dirs[i])
			continue;
		snprintf(path, sizeof(path), "%s/%s.json", dirs[i], name);
		if (stat(path, &st) == 0)
			return engine_profile_load_file(path, ret, err);
	}
	return error_set(
		err, -ENOENT, "engine: no profile \"%s\" in %s%s/etc/goodput/engines, %s/engines or %s/configs/engines",
		name, engines_dir ? engines_dir : "", engines_dir ? ", " : "", GOODPUT_DATADIR, GOODPUT_SOURCE_ROOT);
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
