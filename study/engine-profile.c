/* engine-profile.c — loading and validating engine profiles.
 *
 * A profile is data (configs/engines/NAME.json, see engine-profile.h): the
 * loader checks every key (one json_dispatch table, profile_fields, with a
 * nested table per knob) and every placeholder once, so that rendering a
 * configuration later can only fail on the configuration's own values (a
 * knob the engine lacks, a quantization it cannot run). Rendering never
 * produces a shell string: it fills an argv array and "NAME=value"
 * environment entries; engine_command_format() quotes them for display only.
 * Rendering (engine_profile_render*, engine_command_*) lives in
 * engine-profile-render.c. */
#include "engine-profile.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "engine-profile-internal.h"
#include "file-util.h"
#include "json-dispatch.h"
#include "json-util.h"
#include "macro.h"
#include "study-internal.h"
#include "time-util.h"

static const char *const fixed_placeholders[] = { "model",       "served_model",    "host",
						  "port",        "gpu_type",        "gpu_count",
						  "draft_model", "spec_acceptance", NULL };

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

/* Every {name} in s must be a fixed placeholder or a mapped knob; {{ and }}
 * are a literal brace (a JSON value's). */
static int check_placeholders(const struct engine_profile *p, const char *s, const char *where, struct error *err)
{
	for (const char *o = strchr(s, '{'); o; o = strchr(o + 1, '{')) {
		const char *c = strchr(o, '}');
		char name[OPT_KNOB_NAME_MAX];
		bool ok = false;

		if (o[1] == '{') {
			o++;
			continue;
		}
		if (!c || (size_t)(c - o - 1) >= sizeof(name) || c == o + 1)
			return error_set(err, -EINVAL, "%s: \"%s\": unterminated or empty placeholder", where, s);
		snprintf(name, sizeof(name), "%.*s", (int)(c - o - 1), o + 1);
		for (size_t i = 0; fixed_placeholders[i] && !ok; i++)
			ok = strcmp(fixed_placeholders[i], name) == 0;
		if (!ok && !engine_profile_find_knob(p, name))
			return error_set(err, -EINVAL,
					 "%s: \"%s\": unknown placeholder {%s} (model, served_model, host, port, "
					 "gpu_type, gpu_count, draft_model, spec_acceptance or a knob)",
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

/* ---- knobs ---- */

/* knobs.K.flag: "--x" or ["--x", "--y"]. */
static int parse_knob_flags(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct engine_knob *k = base;
	const cJSON *e;
	int r;

	(void)f;
	if (cJSON_IsString(v)) {
		r = check_flag(v->valuestring, path, err);
		if (r < 0)
			return r;
		k->flags[k->n_flags++] = v->valuestring;
	} else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) >= 1 && cJSON_GetArraySize(v) <= ENGINE_MAX_KNOB_FLAGS) {
		cJSON_ArrayForEach(e, v)
		{
			if (!cJSON_IsString(e))
				return error_set(err, -EINVAL, "%s: expected flag strings", path);
			r = check_flag(e->valuestring, path, err);
			if (r < 0)
				return r;
			k->flags[k->n_flags++] = e->valuestring;
		}
	} else
		return error_set(err, -EINVAL, "%s: expected a flag or an array of 1 to %d flags", path,
				 ENGINE_MAX_KNOB_FLAGS);
	k->flag = k->flags[0];
	return 0;
}

/* A value that is its own arguments: ["--no-cont-batching"], the first a flag. */
static int check_value_args(const cJSON *a, const char *path, struct error *err)
{
	const cJSON *e;
	size_t i = 0;

	if (cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > ENGINE_MAX_KNOB_FLAGS)
		return error_set(err, -EINVAL, "%s: expected 1 to %d arguments", path, ENGINE_MAX_KNOB_FLAGS);
	cJSON_ArrayForEach(e, a)
	{
		if (!cJSON_IsString(e) || !e->valuestring[0])
			return error_set(err, -EINVAL, "%s[%zu]: expected an argument (a string)", path, i);
		if (i == 0 && check_flag(e->valuestring, path, err) < 0)
			return -EINVAL;
		i++;
	}
	return 0;
}

/* knobs.K.values: value → flag value (string), true, arguments or null;
 * quantization values are quantization names. */
static int parse_knob_values(const cJSON *v, const char *path, const struct json_field *f, void *base,
			     struct error *err)
{
	struct engine_knob *k = base;
	const cJSON *e;
	char p[160];
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(e, v)
	{
		json_path_join(p, sizeof(p), path, e->string);
		if (cJSON_IsArray(e)) {
			r = check_value_args(e, p, err);
			if (r < 0)
				return r;
			continue;
		}
		if (!cJSON_IsNull(e) && !cJSON_IsTrue(e) && !(cJSON_IsString(e) && e->valuestring[0]))
			return error_set(err, -EINVAL,
					 "%s: expected a flag value (string), true (the flag alone), the arguments "
					 "themselves ([\"--no-x\"]) or null",
					 p);
		if (cJSON_IsTrue(e) && k->n_flags == 0)
			return error_set(err, -EINVAL, "%s: true passes the knob's flag alone, but it has none", p);
		if (strcmp(k->name, OPT_KNOB_QUANTIZATION) == 0 && study_quant_from_string(e->string) < 0)
			return error_set(err, -EINVAL, "%s: unknown quantization (none, fp8, int8, awq)", p);
	}
	return 0;
}

/* A string value with placeholders ("{\"num_speculative_tokens\": {spec_tokens}}") names
 * the knobs and fixed placeholders it holds; checked once every knob is read. */
static bool value_names(const struct engine_knob *k, const char *knob)
{
	const cJSON *e;
	size_t n = strlen(knob);

	cJSON_ArrayForEach(e, k->values)
	{
		const cJSON *a = cJSON_IsArray(e) ? e->child : e;

		for (; a; a = cJSON_IsArray(e) ? a->next : NULL)
			for (const char *o = cJSON_IsString(a) ? strchr(a->valuestring, '{') : NULL; o;
			     o = strchr(o + 1, '{'))
				if (strncmp(o + 1, knob, n) == 0 && o[1 + n] == '}')
					return true;
	}
	return false;
}

static int parse_checkpoint_required(const cJSON *v, const char *path, const struct json_field *f, void *base,
				     struct error *err)
{
	struct engine_knob *k = base;

	if (strcmp(k->name, OPT_KNOB_QUANTIZATION) != 0)
		return error_set(err, -EINVAL, "%s: only for the quantization knob", path);
	return json_dispatch_store(v, path, f, base, err);
}

#define KNOB(field) offsetof(struct engine_knob, field)

static const struct json_field knob_fields[] = {
	{ "flag", JSON_ANY, .callback = parse_knob_flags,
	  .schema = "{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"array\", \"minItems\": 1, \"maxItems\": "
		    "4, \"items\": {\"type\": \"string\"}}]}",
	  .doc = "the flag, or flags, each knob value is passed with (\"--max-num-seqs\")" },
	{ "values", JSON_OBJECT, KNOB(values), .callback = parse_knob_values,
	  .schema = "{\"additionalProperties\": {\"anyOf\": [{\"type\": \"string\", \"minLength\": 1}, "
		    "{\"const\": true}, {\"type\": \"null\"}, {\"type\": \"array\", \"minItems\": 1, \"maxItems\": 4, "
		    "\"items\": {\"type\": \"string\"}}]}}",
	  .def = "values as they are",
	  .doc = "knob value → flag value, true for the flag alone (a switch: \"on\": true), the arguments "
		 "themselves (\"off\": [\"--no-cont-batching\"]), or null for no flag (\"fp8\": \"fp8\", \"none\": "
		 "null); a flag value may hold placeholders of other knobs and of the study ({spec_tokens}, "
		 "{draft_model}: vLLM's --speculative-config JSON), and a knob such a value names needs no flag of "
		 "its own" },
	{ "checkpoint_required", JSON_ENUM_SET, KNOB(checkpoint_required), .callback = parse_checkpoint_required,
	  .choices = study_quant_names, .doc = "quantizations that need the study to name a checkpoint" },
	{ 0 },
};

static bool knob_name_ok(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n < OPT_KNOB_NAME_MAX && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* knobs.K: one knob, dispatched into the next slot of the profile. */
static int parse_knob(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct engine_profile *p = base;
	struct engine_knob *k = &p->knobs[p->n_knobs];
	bool all_null = true;
	const cJSON *e;
	int r;

	if (p->n_knobs >= ENGINE_MAX_KNOBS)
		return error_set(err, -EINVAL, "%s: more than %d knobs", path, ENGINE_MAX_KNOBS);
	if (!knob_name_ok(v->string))
		return error_set(err, -EINVAL, "%s: knob names are [a-z0-9_], shorter than %d", path,
				 OPT_KNOB_NAME_MAX);
	k->name = v->string;
	r = json_dispatch(v, path, f->fields, 0, k, err);
	if (r < 0)
		return r;
	/* a value that is its own arguments needs no flag either */
	cJSON_ArrayForEach(e, k->values) all_null = all_null && (cJSON_IsNull(e) || cJSON_IsArray(e));
	/* Checked once "derived" is read (parse_profile): a knob may also reach
	 * the command line only through a derived flag. */
	k->needs_flag = k->n_flags == 0 && (!k->values || !all_null);
	p->n_knobs++;
	return 0;
}

static const struct json_field knobs_fields[] = {
	{ "<knob>", JSON_OBJECT, .pattern = "*", .fields = knob_fields, .callback = parse_knob,
	  .doc = "a knob the engine takes: a canonical one (max_num_seqs, max_num_batched_tokens, quantization, "
		 "tensor_parallel) or an extra one a study may search ([a-z0-9_])" },
	{ 0 },
};

/* ---- the other keys ---- */

#define OFF(field) offsetof(struct engine_profile, field)

/* "derived": [{"flag": "--ctx-size", "product": ["max_num_seqs", 4096]}, ...] */
static const struct json_field derived_fields[] = {
	{ "flag", JSON_STRING, offsetof(struct engine_derived, flag), .flags = JSON_MANDATORY, .max = 128,
	  .doc = "the flag" },
	{ "product", JSON_ARRAY, offsetof(struct engine_derived, product), .flags = JSON_MANDATORY, .min = 1,
	  .max = ENGINE_MAX_PRODUCT, .doc = "knob names and numbers whose product is the flag's value" },
	{ 0 },
};

static int check_product(const struct engine_profile *p, const struct engine_derived *d, const char *path,
			 struct error *err)
{
	size_t n_knob = 0;
	const cJSON *e;

	cJSON_ArrayForEach(e, d->product)
	{
		if (cJSON_IsString(e)) {
			if (!engine_profile_find_knob(p, e->valuestring))
				return error_set(err, -EINVAL, "%s.product: \"%s\" is not a knob of this profile", path,
						 e->valuestring);
			n_knob++;
		} else if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble <= 0 ||
			   e->valuedouble > 1e9)
			return error_set(err, -EINVAL, "%s.product: expected knob names and numbers in (0, 1e9]", path);
	}
	if (n_knob == 0)
		return error_set(err, -EINVAL, "%s.product: names no knob (a constant belongs in argv)", path);
	return 0;
}

static int parse_derived(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct engine_profile *p = base;
	const cJSON *item;
	int r;

	(void)f;
	cJSON_ArrayForEach(item, v)
	{
		struct engine_derived *d = &p->derived[p->n_derived];
		char where[64], flag_where[96];

		snprintf(where, sizeof(where), "%s[%zu]", path, p->n_derived);
		r = json_dispatch(item, where, derived_fields, 0, d, err);
		if (r < 0)
			return r;
		snprintf(flag_where, sizeof(flag_where), "%s.flag", where);
		r = check_flag(d->flag, flag_where, err);
		if (r >= 0)
			r = check_product(p, d, where, err);
		if (r < 0)
			return r;
		p->n_derived++;
	}
	return 0;
}

static int parse_argv(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct engine_profile *p = base;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	for (p->n_argv = 0; p->argv[p->n_argv]; p->n_argv++) {
		char where[64];

		snprintf(where, sizeof(where), "%s[%zu]", path, p->n_argv);
		r = check_placeholders(p, p->argv[p->n_argv], where, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_gpu_args(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct engine_profile *p = base;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	for (size_t i = 0; r >= 0 && p->gpu_args[i]; i++) {
		char where[64];

		snprintf(where, sizeof(where), "%s[%zu]", path, i);
		r = check_placeholders(p, p->gpu_args[i], where, err);
	}
	return r;
}

static int parse_env(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct engine_profile *p = base;
	const cJSON *item;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(item, v)
	{
		char where[128];

		json_path_join(where, sizeof(where), path, item->string);
		if (!item->string[0] || strchr(item->string, '='))
			return error_set(err, -EINVAL, "%s: not a variable name", where);
		if (!cJSON_IsString(item))
			return error_set(err, -EINVAL, "%s: expected a string", where);
		r = check_placeholders(p, item->valuestring, where, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* health.path, metrics_path: HTTP paths. */
static int parse_http_path(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	if (v->valuestring[0] != '/')
		return error_set(err, -EINVAL, "%s: \"%s\" does not start with '/'", path, v->valuestring);
	return 0;
}

static const char *const port_modes[] = { "free", "announce", NULL };
_Static_assert(sizeof(enum engine_port_mode) == sizeof(int) && ENGINE_PORT_ANNOUNCE == 1,
	       "port.mode is stored as the index of its name");

static const struct json_field port_fields[] = {
	{ "mode", JSON_ENUM, OFF(port_mode), .choices = port_modes, .def = "free",
	  .doc = "free (the deployer picks a free port) or announce (the server binds port 0 and prints where)" },
	{ "announce_prefix", JSON_STRING, OFF(announce_prefix), .max = 128,
	  .doc = "announce: what the server prints before HOST:PORT" },
	{ 0 },
};

static const struct json_field health_fields[] = {
	{ "path", JSON_STRING, OFF(health_path), .callback = parse_http_path, .flags = JSON_MANDATORY, .max = 256,
	  .doc = "HTTP path that answers when the server is ready" },
	{ "interval", JSON_SECONDS, OFF(health_interval_usec), .min = 0.01, .max = 60, .def = "1",
	  .doc = "seconds between polls" },
	{ "ready", JSON_ARRAY, OFF(health_ready), .callback = engine_profile_parse_statuses, .min = 1,
	  .max = ENGINE_MAX_HEALTH_STATUS, .def = "[200]", .schema = "{\"items\": {\"type\": \"integer\"}}",
	  .doc = "HTTP statuses that mean ready" },
	{ "loading", JSON_ARRAY, OFF(health_loading), .callback = engine_profile_parse_statuses, .min = 1,
	  .max = ENGINE_MAX_HEALTH_STATUS, .schema = "{\"items\": {\"type\": \"integer\"}}",
	  .doc = "HTTP statuses that mean still loading (llama.cpp: 503); other answers are unhealthy" },
	{ 0 },
};

_Static_assert(sizeof(enum probe_metrics_format) == sizeof(int), "metrics.format is stored as an int");

static const struct json_field metrics_fields[] = {
	{ "path", JSON_STRING, OFF(metrics_path), .callback = parse_http_path, .max = 256,
	  .doc = "HTTP path of the engine's metrics" },
	{ "format", JSON_ENUM, OFF(metrics.format), .choices = probe_metrics_format_names, .def = "prometheus",
	  .doc = "prometheus (text exposition) or trtllm_iteration_json (TensorRT-LLM's iteration statistics)" },
	{ "series", JSON_OBJECT, .callback = engine_profile_parse_series,
	  .schema = "{\"additionalProperties\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"array\", "
		    "\"items\": {\"type\": \"string\"}}]}}",
	  .doc = "the probe's series (running, waiting, kv_cache_usage, preemptions, prompt_tokens, "
		 "generation_tokens) and workload capture's (requests, prefix_cache_queries, prefix_cache_hits; the "
		 "histograms prompt_length and generation_length) → the engine's metric names, first present wins; "
		 "\"a / b\" is a ratio" },
	{ 0 },
};

static const struct json_field resources_fields[] = {
	{ "cpus", JSON_U32, OFF(job_cpus), .min = 1, .max = 4096, .def = "1",
	  .doc = "CPUs one server needs (a cluster job's --cpus-per-task)" },
	{ "memory_gib", JSON_DOUBLE, OFF(job_memory_gib), .min = 0.001, .max = 1048576,
	  .def = "the scheduler's default", .doc = "host memory one server needs, GiB (a cluster job's --mem)" },
	{ 0 },
};

static const struct json_field profile_fields[] = {
	{ "name", JSON_STRING, OFF(name), .flags = JSON_MANDATORY, .max = 64, .doc = "the profile's name" },
	{ "description", JSON_STRING, OFF(description), .max = 2048, .doc = "what it serves with" },
	{ "sources", JSON_STRV, OFF(sources), .max = 64,
	  .doc = "where the profile's facts come from (files and issues of the engine's project)" },
	/* knobs first: argv, env and derived name them */
	{ "knobs", JSON_OBJECT, .fields = knobs_fields, .flags = JSON_MANDATORY, .doc = "how each knob becomes flags" },
	{ "derived", JSON_ARRAY, .callback = parse_derived, .max = ENGINE_MAX_DERIVED,
	  .doc = "flags whose value is a product of knob values and constants" },
	{ "argv", JSON_STRV, OFF(argv), .callback = parse_argv, .flags = JSON_MANDATORY, .min = 1,
	  .max = ENGINE_MAX_ARGS, .doc = "the program and its fixed arguments, with placeholders" },
	{ "gpu_args", JSON_STRV, OFF(gpu_args), .callback = parse_gpu_args, .max = ENGINE_MAX_ARGS,
	  .doc = "fixed arguments after argv's, passed only when the study has GPUs (gpu.type is not \"cpu\"): "
		 "[\"--n-gpu-layers\", \"999\"]" },
	{ "env", JSON_OBJECT, OFF(env), .callback = parse_env,
	  .doc = "environment of the server: NAME → value with placeholders" },
	{ "gpu_env", JSON_STRING, OFF(gpu_env), .max = 64,
	  .doc = "variable set to the GPUs of a trial (0..tensor_parallel−1)" },
	{ "port", JSON_OBJECT, .fields = port_fields, .doc = "how the server's port is chosen" },
	{ "health", JSON_OBJECT, .fields = health_fields, .flags = JSON_MANDATORY, .doc = "readiness" },
	{ "startup_timeout", JSON_SECONDS, OFF(startup_timeout_usec), .min = 1, .max = 86400, .def = "600",
	  .doc = "time for the health path to answer" },
	{ "stop_timeout", JSON_SECONDS, OFF(stop_timeout_usec), .min = 0.1, .max = 3600, .def = "30",
	  .doc = "grace between SIGTERM and SIGKILL" },
	{ "oom_patterns", JSON_STRV, OFF(oom_patterns), .max = 64, .doc = "log substrings that mean out of memory" },
	{ "failure_patterns", JSON_ARRAY, .callback = engine_profile_parse_failure_patterns, .max = ENGINE_MAX_PATTERNS,
	  .doc = "[{cause, pattern, after, before}]: why a start-up failed, in the engine's words "
		 "(weights, kv_cache, cache_blocks, oom, gpu_busy); first match in profile order wins" },
	{ "startup_log", JSON_ARRAY, .callback = engine_profile_parse_startup_log, .max = ENGINE_MAX_PATTERNS,
	  .doc = "[{phase, pattern}]: the lines that end start-up phases, a group holding the seconds" },
	{ "version_command", JSON_STRV, OFF(version_command), .max = 16, .doc = "argv printing the engine's version" },
	{ "version_pattern", JSON_STRING, OFF(version_pattern), .callback = engine_profile_parse_version_pattern,
	  .max = 256, .def = "the last non-empty line",
	  .doc = "POSIX extended regular expression: its first group (or match) on the output is the version" },
	{ "version_unknown", JSON_STRING, OFF(version_unknown), .callback = engine_profile_parse_version_pattern,
	  .max = 256,
	  .doc = "POSIX extended regular expression matching a version that names no release (a build without git, "
		 "llama.cpp's \"0 (unknown)\"): the engine binary's size and build time are recorded with it" },
	{ "metrics", JSON_OBJECT, .fields = metrics_fields, .doc = "the engine's own metrics" },
	{ "defaults", JSON_OBJECT, .fields = engine_profile_defaults_fields,
	  .doc = "what the engine does when a knob is not given (the study's baseline) and how far knobs may go" },
	{ "metrics_path", JSON_STRING, OFF(metrics_path), .callback = parse_http_path, .max = 256,
	  .doc = "metrics.path, as older profiles write it" },
	{ "help_command", JSON_STRV, OFF(help_command), .max = 16, .def = "argv[0] --help",
	  .doc = "argv printing every flag, read by `goodput check-engine`" },
	{ "resources", JSON_OBJECT, .fields = resources_fields,
	  .doc = "what one server needs besides its GPUs, asked of a cluster scheduler (deploy.method slurm)" },
	{ "roles", JSON_OBJECT, .fields = engine_profile_roles_fields, .callback = engine_profile_parse_roles,
	  .doc = "how the engine serves disaggregated: what its prefill and decode workers add to its command, and "
		 "its router (deploy.shape)" },
	{ 0 },
};

/* Whether a derived flag's product names the knob. */
static bool derived_names(const struct engine_profile *p, const char *knob)
{
	for (size_t i = 0; i < p->n_derived; i++) {
		const cJSON *e;

		cJSON_ArrayForEach(e, p->derived[i].product) if (cJSON_IsString(e) &&
								 strcmp(e->valuestring, knob) == 0) return true;
	}
	return false;
}

static int parse_profile(struct engine_profile *p, struct error *err)
{
	size_t n_extra = 0;
	int r;

	p->health_interval_usec = USEC_PER_SEC;
	p->startup_timeout_usec = 600 * USEC_PER_SEC;
	p->stop_timeout_usec = 30 * USEC_PER_SEC;
	p->job_cpus = 1;
	probe_metrics_map_init(&p->metrics);
	r = json_dispatch(p->json, "", profile_fields, 0, p, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->n_knobs; i++) {
		bool named = derived_names(p, p->knobs[i].name);

		for (size_t j = 0; j < p->n_knobs && !named; j++)
			named = j != i && value_names(&p->knobs[j], p->knobs[i].name);
		if (p->knobs[i].needs_flag && !named)
			return error_set(err, -EINVAL,
					 "knobs.%s.flag: missing (only a knob whose values all map to null, that a "
					 "derived flag names, or that another knob's values name as {%s}, may omit it)",
					 p->knobs[i].name, p->knobs[i].name);
	}
	/* Placeholders in values: fixed ones or knobs of the profile. */
	for (size_t i = 0; i < p->n_knobs; i++) {
		const cJSON *e;

		cJSON_ArrayForEach(e, p->knobs[i].values)
		{
			char where[192];

			snprintf(where, sizeof(where), "knobs.%s.values.%s", p->knobs[i].name, e->string);
			if (cJSON_IsString(e))
				r = check_placeholders(p, e->valuestring, where, err);
			else if (cJSON_IsArray(e)) {
				const cJSON *a;

				r = 0;
				cJSON_ArrayForEach(a, e) if (r >= 0) r =
					check_placeholders(p, a->valuestring, where, err);
			} else
				r = 0;
			if (r < 0)
				return r;
		}
	}
	if (p->port_mode == ENGINE_PORT_ANNOUNCE && !p->announce_prefix)
		return error_set(err, -EINVAL, "port.announce_prefix: missing (needed by mode \"announce\")");
	p->extra_knobs = calloc(p->n_knobs + 1, sizeof(char *));
	if (!p->extra_knobs)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_knobs; i++)
		if (!is_canonical_knob(p->knobs[i].name))
			p->extra_knobs[n_extra++] = p->knobs[i].name;
	if (p->roles.present && engine_profile_add_role_knobs(p) < 0)
		return -ENOMEM;
	if (!p->oom_patterns) {
		p->oom_patterns = calloc(1, sizeof(char *));
		if (!p->oom_patterns)
			return -ENOMEM;
	}
	return 0;
}

/* goodput's own programs a profile may run by name: the ones installed
 * with this goodput (beside the running program, or in its bindir) before
 * whatever $PATH finds, so an installed goodput tune or goodputd runs its
 * own goodput-sim with no PATH set up for it. */
static int resolve_own_programs(struct engine_profile *p)
{
	static const char *const own[] = { "goodput-sim" };
	const char **cmds[] = { p->argv, p->version_command, p->help_command };

	for (size_t i = 0; i < ELEMENTSOF(own); i++) {
		bool named = false;
		char *path = NULL;
		int r;

		for (size_t c = 0; c < ELEMENTSOF(cmds); c++)
			named = named || (cmds[c] && cmds[c][0] && strcmp(cmds[c][0], own[i]) == 0);
		if (!named)
			continue;
		r = file_find_own_program(own[i], GOODPUT_BINDIR, &path);
		if (r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		free(p->own_program);
		p->own_program = path;
		for (size_t c = 0; c < ELEMENTSOF(cmds); c++)
			if (cmds[c] && cmds[c][0] && strcmp(cmds[c][0], own[i]) == 0)
				cmds[c][0] = p->own_program;
	}
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
	r = resolve_own_programs(p);
	if (r < 0)
		return error_set(err, r, "%s: out of memory", what);
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
	const char *env = getenv("GOODPUT_ENGINES_DIR");
	const char *dirs[] = { engines_dir, env && *env ? env : NULL, ENGINE_PROFILE_SYSCONF_DIR,
			       GOODPUT_DATADIR "/engines" };
	char path[4096], searched[4096] = "";
	size_t n = 0;
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
		if (n < sizeof(searched))
			n += (size_t)snprintf(searched + n, sizeof(searched) - n, "%s%s", n ? ", " : "", dirs[i]);
	}
	return error_set(err, -ENOENT, "engine: no profile \"%s\" in %s (see goodput-engine(5))", name, searched);
}

struct engine_profile *engine_profile_free(struct engine_profile *p)
{
	if (!p)
		return NULL;
	free(p->argv);
	free(p->gpu_args);
	free(p->extra_knobs);
	free(p->roles.knob_names);
	free(p->oom_patterns);
	free(p->version_command);
	free(p->help_command);
	free(p->sources);
	free(p->defaults.large_except);
	engine_profile_free_regexes(p);
	cJSON_Delete(p->json);
	free(p->path);
	free(p->own_program);
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

/* How many flags engine_profile_flags may find, at most. */
static size_t flags_max(const struct engine_profile *p)
{
	size_t max = p->n_argv + p->n_knobs * ENGINE_MAX_KNOB_FLAGS + p->n_derived + 1;

	for (size_t i = 0; p->gpu_args && p->gpu_args[i]; i++)
		max++;
	for (size_t i = 0; i < p->n_knobs; i++)
		max += (size_t)cJSON_GetArraySize(p->knobs[i].values) * ENGINE_MAX_KNOB_FLAGS;
	return max;
}

int engine_profile_flags(const struct engine_profile *p, const char ***ret)
{
	size_t max = flags_max(p), n = 0;
	const char **v = calloc(max, sizeof(char *));
	const char *base = strrchr(p->argv[0], '/');
	size_t first = 1;

	if (!v)
		return -ENOMEM;
	/* A Python interpreter's "-m MODULE" comes before the module's own flags. */
	base = base ? base + 1 : p->argv[0];
	if (strncmp(base, "python", 6) == 0 && p->n_argv > 2 && strcmp(p->argv[1], "-m") == 0)
		first = 3;
	/* argv[0] is the program; fixed arguments that look like flags (not "-1"). */
	for (size_t i = first; i < p->n_argv; i++) {
		const char *a = p->argv[i];

		if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9') && !strchr(a, '{') && !strv_has(v, n, a))
			v[n++] = a;
	}
	for (size_t i = 0; p->gpu_args && p->gpu_args[i]; i++) {
		const char *a = p->gpu_args[i];

		if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9') && !strchr(a, '{') && !strv_has(v, n, a))
			v[n++] = a;
	}
	for (size_t i = 0; i < p->n_knobs; i++) {
		const cJSON *e;

		for (size_t f = 0; f < p->knobs[i].n_flags; f++)
			if (!strv_has(v, n, p->knobs[i].flags[f]))
				v[n++] = p->knobs[i].flags[f];
		/* a value that is its own arguments: each of them that is a flag */
		cJSON_ArrayForEach(e, p->knobs[i].values)
		{
			const cJSON *a;

			if (!cJSON_IsArray(e))
				continue;
			cJSON_ArrayForEach(a, e)
			{
				const char *s = a->valuestring;

				if (s[0] == '-' && s[1] && !(s[1] >= '0' && s[1] <= '9') && !strchr(s, '{') &&
				    !strv_has(v, n, s))
					v[n++] = s;
			}
		}
	}
	for (size_t i = 0; i < p->n_derived; i++)
		if (!strv_has(v, n, p->derived[i].flag))
			v[n++] = p->derived[i].flag;
	v[n] = NULL;
	*ret = v;
	return 0;
}

const struct json_field *engine_profile_fields(void)
{
	return profile_fields;
}

int engine_profile_load_study(const char *spec_json, const char *engine, const char *engines_dir,
			      struct engine_profile **ret_profile, struct study **ret, struct error *err)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(cJSON_Deletep) cJSON *spec = NULL;
	struct study_options so = { 0 };
	int r;

	r = json_parse_strict("stored spec", spec_json, strlen(spec_json), &spec, err);
	if (r >= 0)
		r = engine_profile_find(engine, engines_dir, &p, err);
	if (r < 0)
		return r;
	so.extra_knobs = (const char *const *)p->extra_knobs;
	r = study_from_json(spec, &so, ret, err);
	if (r < 0)
		return r;
	if (ret_profile)
		*ret_profile = TAKE_PTR(p);
	return 0;
}
