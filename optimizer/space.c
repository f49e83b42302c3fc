/* space.c — parsing a study's search space and working with its grid.
 *
 * Every knob, range or list, is expanded once into an ordered array of values,
 * so a configuration is just a vector of value indices. That makes the
 * canonical key, enumeration (mixed-radix counting), snapping a normalised
 * point (rounding an index) and the optimizer's bookkeeping all cheap and
 * exact. Ranges on a log2 scale are stored as their powers of two, so index
 * space *is* the normalised log space NLopt searches. Constraints
 * (constraint.c) are checked per configuration. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "json-dispatch.h"
#include "json-util.h"
#include "macro.h"
#include "parse.h"
#include "space-internal.h"
#include "space.h"

static const char *const canonical_knobs[] = {
	OPT_KNOB_MAX_NUM_SEQS, OPT_KNOB_MAX_NUM_BATCHED_TOKENS, OPT_KNOB_QUANTIZATION, OPT_KNOB_TENSOR_PARALLEL, NULL,
};

static const char *const quantizations[] = { "none", "fp8", "int8", "awq", NULL };

#define NUMBER_ABS_MAX 1e12
#define INT_KNOB_MAX   INT64_C(2147483647)

static void knob_done(struct opt_knob *k)
{
	free(k->numbers);
	if (k->strings)
		for (size_t i = 0; i < k->n_values; i++)
			free(k->strings[i]);
	free(k->strings);
	k->numbers = NULL;
	k->strings = NULL;
}

struct opt_space *opt_space_free(struct opt_space *space)
{
	if (!space)
		return NULL;
	for (size_t i = 0; i < space->n_knobs; i++) {
		knob_done(&space->knobs[i]);
		free(space->when[i]);
	}
	for (size_t i = 0; i < space->n_constraints; i++)
		free(space->constraints[i].allowed);
	free(space);
	return NULL;
}

int opt_space_knob_index(const struct opt_space *space, const char *name)
{
	for (size_t i = 0; i < space->n_knobs; i++)
		if (strcmp(space->knobs[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

static int canonical_rank(const char *name)
{
	for (int i = 0; canonical_knobs[i]; i++)
		if (strcmp(canonical_knobs[i], name) == 0)
			return i;
	return -1;
}

static bool name_allowed(const char *name, const struct opt_space_options *o)
{
	if (canonical_rank(name) >= 0)
		return true;
	if (o && o->extra_knobs)
		for (size_t i = 0; o->extra_knobs[i]; i++)
			if (strcmp(o->extra_knobs[i], name) == 0)
				return true;
	return false;
}

static bool is_integral(double v)
{
	return isfinite(v) && floor(v) == v;
}

/* A disaggregated side's knob ("prefill_..."/"decode_"): *ret_base the
 * engine's knob it is for that side. */
static bool side_knob(const char *name, const char **ret_base)
{
	const char *base = strncmp(name, "prefill_", 8) == 0  ? name + 8
			   : strncmp(name, "decode_", 7) == 0 ? name + 7
							      : NULL;

	if (ret_base)
		*ret_base = base;
	return base != NULL;
}

/* A batch knob of one server or of a side: needs more memory as it grows. */
static bool batch_knob(const char *name)
{
	const char *base = name;

	(void)side_knob(name, &base);
	base = base ? base : name;
	return canonical_rank(base) == 0 || canonical_rank(base) == 1;
}

/* GPUs per configuration: whole numbers, categorical, within the host. */
static bool gpu_knob(const char *name)
{
	return strcmp(name, OPT_KNOB_TENSOR_PARALLEL) == 0 || strcmp(name, OPT_KNOB_DATA_PARALLEL) == 0 ||
	       strcmp(name, OPT_KNOB_PIPELINE_PARALLEL) == 0 || strcmp(name, OPT_KNOB_PREFILL_WORKERS) == 0 ||
	       strcmp(name, OPT_KNOB_DECODE_WORKERS) == 0 || strcmp(name, OPT_KNOB_PREFILL_TENSOR_PARALLEL) == 0 ||
	       strcmp(name, OPT_KNOB_DECODE_TENSOR_PARALLEL) == 0;
}

static bool int_only(const char *name)
{
	return batch_knob(name) || gpu_knob(name) || strcmp(name, OPT_KNOB_MAX_MODEL_LEN) == 0 ||
	       strcmp(name, OPT_KNOB_SPEC_TOKENS) == 0 || strcmp(name, OPT_KNOB_SPEC_DRAFT_TP) == 0;
}

static enum opt_memory_role memory_role(const struct opt_knob *k)
{
	if (strcmp(k->name, OPT_KNOB_KV_CACHE_DTYPE) == 0)
		return OPT_MEMORY_KV_DTYPE; /* equality or freedom only: no direction needed */
	if (k->categorical)
		return OPT_MEMORY_ANY;
	if (batch_knob(k->name))
		return OPT_MEMORY_BATCH;
	if (strcmp(k->name, OPT_KNOB_MAX_MODEL_LEN) == 0)
		return OPT_MEMORY_CONTEXT;
	if (strcmp(k->name, OPT_KNOB_GPU_MEMORY_UTILIZATION) == 0)
		return OPT_MEMORY_FRACTION;
	return OPT_MEMORY_ANY;
}

/* Text of a number that parses back to the same double. */
static const char *format_number(double v, char *buf, size_t size)
{
	if (is_integral(v) && fabs(v) < 1e15) {
		snprintf(buf, size, "%.0f", v);
		return buf;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return buf;
}

/* A range knob as written: {"min": 8, "max": 256, "scale": "log2"}. */
struct range_spec {
	uint64_t min, max, step; /* step 0: not given */
	int scale;
	bool categorical; /* read again by parse_knob, which sees every form */
	const char *when; /* likewise */
};

static const char *const scales[] = { "linear", "log2", NULL };

static const struct json_field range_fields[] = {
	{ "min", JSON_U64, offsetof(struct range_spec, min), .flags = JSON_MANDATORY, .max = INT_KNOB_MAX,
	  .doc = "smallest value" },
	{ "max", JSON_U64, offsetof(struct range_spec, max), .flags = JSON_MANDATORY, .max = INT_KNOB_MAX,
	  .doc = "largest value" },
	{ "scale", JSON_ENUM, offsetof(struct range_spec, scale), .choices = scales, .def = "linear",
	  .doc = "linear, or log2 (min, 2·min, 4·min ... max)" },
	{ "step", JSON_U64, offsetof(struct range_spec, step), .min = 1, .max = INT_KNOB_MAX, .def = "1",
	  .doc = "linear only: distance between values" },
	{ "categorical", JSON_BOOL, offsetof(struct range_spec, categorical), .def = "false",
	  .doc = "search the values one by one instead of by NLopt" },
	{ "when", JSON_STRING, offsetof(struct range_spec, when), .max = 95,
	  .doc = "the knob exists only where this test holds (\"spec_method != none\")" },
	{ 0 },
};

static int parse_range(struct opt_knob *k, const cJSON *obj, const char *path, struct error *err)
{
	struct range_spec spec = { 0 };
	uint64_t min, max, step;
	char p[256];
	int r;

	r = json_dispatch(obj, path, range_fields, 0, &spec, err);
	if (r < 0)
		return r;
	min = spec.min;
	max = spec.max;
	step = spec.step ? spec.step : 1;
	if (min > max)
		return error_set(err, -EINVAL, "%s: min (%" PRIu64 ") is larger than max (%" PRIu64 ")",
				 json_path_join(p, sizeof(p), path, "min"), min, max);
	k->kind = OPT_KNOB_RANGE;
	k->scale = spec.scale == 1 ? OPT_SCALE_LOG2 : OPT_SCALE_LINEAR;
	k->min = (int64_t)min;
	k->max = (int64_t)max;
	k->step = (int64_t)step;
	if (k->scale == OPT_SCALE_LOG2) {
		uint64_t v;

		if (spec.step)
			return error_set(err, -EINVAL, "%s: only a linear range takes a step",
					 json_path_join(p, sizeof(p), path, "step"));
		if (min == 0)
			return error_set(err, -EINVAL, "%s: a log2 range must start at 1 or more, got 0",
					 json_path_join(p, sizeof(p), path, "min"));
		k->n_values = 1;
		for (v = min; v < max; v *= 2)
			k->n_values++;
		if (v != max)
			return error_set(err, -EINVAL,
					 "%s: a log2 range needs max = min × 2^k, got min %" PRIu64 " and max %" PRIu64,
					 json_path_join(p, sizeof(p), path, "max"), min, max);
	} else {
		if ((max - min) % step != 0)
			return error_set(err, -EINVAL, "%s: max - min (%" PRIu64 ") is not a multiple of step %" PRIu64,
					 json_path_join(p, sizeof(p), path, "step"), max - min, step);
		if ((max - min) / step + 1 > OPT_RANGE_VALUES_MAX)
			return error_set(err, -EINVAL, "%s: more than %d values; use a larger step or a log2 scale",
					 path, OPT_RANGE_VALUES_MAX);
		k->n_values = (size_t)((max - min) / step + 1);
	}
	k->numbers = calloc(k->n_values, sizeof(double));
	if (!k->numbers)
		return -ENOMEM;
	for (size_t i = 0; i < k->n_values; i++)
		k->numbers[i] = k->scale == OPT_SCALE_LOG2 ? (double)min * ldexp(1.0, (int)i)
							   : (double)min + (double)i * (double)step;
	return 0;
}

/* Values become flag values of the engine; one starting with '-' could be
 * taken for a flag of its own. */
static bool valid_string_value(const char *s)
{
	if (!*s || *s == '-' || strlen(s) > 32)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.+-", *s))
			return false;
	return true;
}

static int parse_list(struct opt_knob *k, const cJSON *arr, const char *path, struct error *err)
{
	const cJSON *item;
	int n = cJSON_GetArraySize(arr), i = 0;
	char p[256];

	if (n == 0)
		return error_set(err, -EINVAL, "%s: empty list", path);
	if (n > OPT_LIST_MAX)
		return error_set(err, -EINVAL, "%s: more than %d values", path, OPT_LIST_MAX);
	k->n_values = (size_t)n;
	k->kind = cJSON_IsString(cJSON_GetArrayItem(arr, 0)) ? OPT_KNOB_LIST_STRING : OPT_KNOB_LIST_NUMBER;
	if (k->kind == OPT_KNOB_LIST_STRING)
		k->strings = calloc((size_t)n, sizeof(char *));
	else
		k->numbers = calloc((size_t)n, sizeof(double));
	if (!k->strings && !k->numbers)
		return -ENOMEM;
	cJSON_ArrayForEach(item, arr)
	{
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		if (k->kind == OPT_KNOB_LIST_STRING) {
			if (!cJSON_IsString(item) || !item->valuestring)
				return error_set(err, -EINVAL, "%s: expected a string like the first value", p);
			if (!valid_string_value(item->valuestring))
				return error_set(
					err, -EINVAL,
					"%s: expected 1-32 characters of [A-Za-z0-9_.+-], not starting with '-', "
					"got \"%s\"",
					p, item->valuestring);
			for (int j = 0; j < i; j++)
				if (strcmp(k->strings[j], item->valuestring) == 0)
					return error_set(err, -EINVAL, "%s: duplicate value \"%s\"", p,
							 item->valuestring);
			k->strings[i] = strdup(item->valuestring);
			if (!k->strings[i])
				return -ENOMEM;
		} else {
			double v;

			if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) ||
			    fabs(item->valuedouble) > NUMBER_ABS_MAX)
				return error_set(err, -EINVAL, "%s: expected a number like the first value", p);
			v = item->valuedouble;
			if (int_only(k->name) && (!is_integral(v) || v < 1 || v > (double)INT_KNOB_MAX))
				return error_set(err, -EINVAL, "%s: expected an integer in [1, %" PRId64 "], got %g", p,
						 INT_KNOB_MAX, v);
			for (int j = 0; j < i; j++)
				if (k->numbers[j] == v)
					return error_set(err, -EINVAL, "%s: duplicate value %g", p, v);
			k->numbers[i] = v;
		}
		i++;
	}
	return 0;
}

/* A list knob written as an object: {"values": [...], "categorical": false}. */
struct list_spec {
	const cJSON *values;
	bool categorical; /* read again by parse_knob, which sees every form */
	const char *when; /* likewise */
};

static const struct json_field list_fields[] = {
	{ "values", JSON_ARRAY, offsetof(struct list_spec, values), .flags = JSON_MANDATORY, .doc = "the values" },
	{ "categorical", JSON_BOOL, offsetof(struct list_spec, categorical),
	  .doc = "false: search the (sorted) values by NLopt" },
	{ "when", JSON_STRING, offsetof(struct list_spec, when), .max = 95,
	  .doc = "the knob exists only where this test holds (\"spec_method != none\")" },
	{ 0 },
};

static int parse_knob(struct opt_knob *k, const cJSON *item, const char *path, const struct opt_space_options *o,
		      struct error *err)
{
	bool categorical_set = false, categorical = false;
	char p[256];
	int r;

	if (strlen(item->string) >= OPT_KNOB_NAME_MAX || !name_allowed(item->string, o))
		return error_set(err, -EINVAL, "%s: unknown knob", path);
	snprintf(k->name, sizeof(k->name), "%s", item->string);

	if (cJSON_IsArray(item)) {
		r = parse_list(k, item, path, err);
	} else if (cJSON_IsObject(item) && cJSON_GetObjectItemCaseSensitive(item, "values")) {
		struct list_spec spec = { 0 };

		r = json_dispatch(item, path, list_fields, 0, &spec, err);
		if (r < 0)
			return r;
		r = parse_list(k, spec.values, json_path_join(p, sizeof(p), path, "values"), err);
	} else if (cJSON_IsObject(item)) {
		r = parse_range(k, item, path, err);
	} else
		return error_set(err, -EINVAL, "%s: expected a range object or a list of values", path);
	if (r < 0)
		return r;
	if (cJSON_IsObject(item)) {
		r = json_get_bool(item, path, "categorical", &categorical, err);
		if (r < 0)
			return r;
		categorical_set = r > 0;
	}

	if (strcmp(k->name, OPT_KNOB_QUANTIZATION) == 0) {
		if (k->kind != OPT_KNOB_LIST_STRING)
			return error_set(err, -EINVAL, "%s: expected a list of none, fp8, int8, awq", path);
		for (size_t i = 0; i < k->n_values; i++) {
			bool ok = false;

			for (size_t j = 0; quantizations[j]; j++)
				ok = ok || strcmp(quantizations[j], k->strings[i]) == 0;
			if (!ok)
				return error_set(err, -EINVAL, "%s[%zu]: expected none, fp8, int8 or awq, got \"%s\"",
						 path, i, k->strings[i]);
		}
	}
	if (int_only(k->name) && k->kind == OPT_KNOB_LIST_STRING)
		return error_set(err, -EINVAL, "%s: expected integers", path);
	if (int_only(k->name) && k->kind == OPT_KNOB_RANGE && k->min < 1)
		return error_set(err, -EINVAL, "%s.min: expected at least 1, got 0", path);
	if (gpu_knob(k->name) && o && o->gpus > 0)
		for (size_t i = 0; i < k->n_values; i++) {
			double v = k->numbers[i];

			if (v > o->gpus)
				return error_set(
					err, -EINVAL,
					"%s: %s %g is more than the %u GPUs of one node (gpu.count, gpu.per_node, "
					"gpu.devices)",
					path, k->name, v, o->gpus);
			if ((strcmp(k->name, OPT_KNOB_TENSOR_PARALLEL) == 0 ||
			     strcmp(k->name, OPT_KNOB_PREFILL_TENSOR_PARALLEL) == 0 ||
			     strcmp(k->name, OPT_KNOB_DECODE_TENSOR_PARALLEL) == 0) &&
			    o->gpus % (unsigned)v != 0)
				return error_set(err, -EINVAL, "%s: %s %g does not divide the host's %u GPUs", path,
						 k->name, v, o->gpus);
		}
	if (cJSON_IsObject(item)) {
		const char *when = NULL;

		r = json_get_string(item, path, "when", sizeof(k->when_text) - 1, &when, err);
		if (r < 0)
			return r;
		if (when) {
			k->conditional = true;
			snprintf(k->when_text, sizeof(k->when_text), "%s", when);
		}
	}

	k->categorical = categorical_set ? categorical : k->kind == OPT_KNOB_LIST_STRING || gpu_knob(k->name);
	if (k->kind == OPT_KNOB_LIST_STRING && !k->categorical)
		return error_set(err, -EINVAL, "%s: a list of strings can only be categorical", path);
	if (k->kind == OPT_KNOB_LIST_NUMBER && !k->categorical)
		qsort(k->numbers, k->n_values, sizeof(double), array_cmp_double);
	if (strcmp(k->name, OPT_KNOB_GPU_MEMORY_UTILIZATION) == 0)
		for (size_t i = 0; i < k->n_values; i++)
			if (k->kind == OPT_KNOB_LIST_STRING || !(k->numbers[i] > 0 && k->numbers[i] <= 1))
				return error_set(err, -EINVAL, "%s: expected fractions in (0, 1]", path);
	k->memory_monotone = !k->categorical && batch_knob(k->name);
	k->memory = memory_role(k);
	return 0;
}

/* One server's knobs, which a disaggregated configuration has per side. */
static bool aggregated_knob(const char *name)
{
	return canonical_rank(name) == 0 || canonical_rank(name) == 1 || strcmp(name, OPT_KNOB_TENSOR_PARALLEL) == 0 ||
	       strcmp(name, OPT_KNOB_DATA_PARALLEL) == 0 || strcmp(name, OPT_KNOB_PIPELINE_PARALLEL) == 0;
}

/* Speculation's parts exist only with speculation, a side's knobs only in
 * the disaggregated shape and one server's only in the aggregated one:
 * their implicit "when". */
static const char *implicit_when(const struct opt_space *space, const char *name)
{
	if ((strcmp(name, OPT_KNOB_SPEC_TOKENS) == 0 || strcmp(name, OPT_KNOB_SPEC_DRAFT_TP) == 0) &&
	    opt_space_knob_index(space, OPT_KNOB_SPEC_METHOD) >= 0)
		return OPT_KNOB_SPEC_METHOD " != none";
	if (opt_space_knob_index(space, OPT_KNOB_SHAPE) >= 0 && side_knob(name, NULL))
		return OPT_KNOB_SHAPE " == disaggregated";
	if (opt_space_knob_index(space, OPT_KNOB_SHAPE) >= 0 && aggregated_knob(name))
		return OPT_KNOB_SHAPE " == aggregated";
	return NULL;
}

/* Each conditional knob's test, once the knobs have their final order. */
static int parse_conditions(struct opt_space *space, const char *path, struct error *err)
{
	for (size_t i = 0; i < space->n_knobs; i++) {
		struct opt_knob *k = &space->knobs[i];
		const char *implicit = implicit_when(space, k->name);
		char p[256];
		int r;

		if (!k->conditional && implicit) {
			k->conditional = true;
			snprintf(k->when_text, sizeof(k->when_text), "%s", implicit);
		}
		if (!k->conditional)
			continue;
		snprintf(p, sizeof(p), "%s.%s.when", path, k->name);
		space->when[i] = calloc(1, sizeof(struct opt_test));
		if (!space->when[i])
			return -ENOMEM;
		r = opt_space_parse_test(space, k->when_text, p, space->when[i], err);
		if (r < 0)
			return r;
		if (opt_test_names(space->when[i], (int)i))
			return error_set(err, -EINVAL, "%s: \"%s\": a knob's condition cannot name the knob itself", p,
					 k->when_text);
	}
	return 0;
}

static int knob_order(const void *a, const void *b)
{
	const struct opt_knob *x = a, *y = b;
	int rx = canonical_rank(x->name), ry = canonical_rank(y->name);

	if (rx < 0)
		rx = 100;
	if (ry < 0)
		ry = 100;
	if (rx != ry)
		return rx - ry;
	return strcmp(x->name, y->name);
}

int opt_space_from_json(const cJSON *search_space, const char *path, const cJSON *constraints,
			const char *constraints_path, const struct opt_space_options *options, struct opt_space **ret,
			struct error *err)
{
	_cleanup_(opt_space_freep) struct opt_space *space = NULL;
	const cJSON *item;
	char p[256];
	int r;

	if (!path)
		path = "search_space";
	if (!constraints_path)
		constraints_path = "constraints";
	if (!cJSON_IsObject(search_space))
		return error_set(err, -EINVAL, "%s: expected an object", path);
	space = calloc(1, sizeof(*space));
	if (!space)
		return -ENOMEM;
	space->gpus = options ? options->gpus : 0;

	cJSON_ArrayForEach(item, search_space)
	{
		json_path_join(p, sizeof(p), path, item->string);
		if (opt_space_knob_index(space, item->string) >= 0)
			return error_set(err, -EINVAL, "%s: duplicate key", p);
		if (space->n_knobs >= OPT_KNOBS_MAX)
			return error_set(err, -E2BIG, "%s: more than %d knobs", p, OPT_KNOBS_MAX);
		r = parse_knob(&space->knobs[space->n_knobs++], item, p, options, err);
		if (r < 0)
			return r;
	}
	if (space->n_knobs == 0)
		return error_set(err, -EINVAL, "%s: no knobs", path);
	qsort(space->knobs, space->n_knobs, sizeof(space->knobs[0]), knob_order);
	r = parse_conditions(space, path, err);
	if (r < 0)
		return r;

	space->n_grid = 1;
	for (size_t i = 0; i < space->n_knobs; i++) {
		space->n_grid *= space->knobs[i].n_values;
		if (space->n_grid > OPT_SPACE_CONFIGS_MAX)
			return error_set(err, -E2BIG, "%s: more than %" PRIu64 " configurations", path,
					 OPT_SPACE_CONFIGS_MAX);
	}

	if (!constraints) {
		if (opt_space_knob_index(space, OPT_KNOB_MAX_NUM_SEQS) >= 0 &&
		    opt_space_knob_index(space, OPT_KNOB_MAX_NUM_BATCHED_TOKENS) >= 0)
			(void)opt_space_add_constraint(space, NULL, "max_num_batched_tokens >= max_num_seqs",
						       constraints_path, NULL);
	} else {
		int i = 0;

		if (!cJSON_IsArray(constraints))
			return error_set(err, -EINVAL, "%s: expected an array of strings", constraints_path);
		cJSON_ArrayForEach(item, constraints)
		{
			snprintf(p, sizeof(p), "%s[%d]", constraints_path, i++);
			r = opt_space_add_constraint(space, item, NULL, p, err);
			if (r < 0)
				return r;
		}
	}
	if (opt_space_count(space) == 0)
		return error_set(err, -EINVAL, "%s: the constraints exclude every configuration", constraints_path);

	*ret = TAKE_PTR(space);
	return 0;
}

const char *opt_config_text(const struct opt_space *space, const struct opt_config *config, size_t knob, char *buf,
			    size_t size)
{
	const struct opt_knob *k = &space->knobs[knob];

	if (k->kind == OPT_KNOB_LIST_STRING)
		return k->strings[config->idx[knob]];
	return format_number(k->numbers[config->idx[knob]], buf, size);
}

int opt_config_key(const struct opt_space *space, const struct opt_config *config, char *buf, size_t size)
{
	size_t n = 0;

	if (size == 0)
		return -ENOBUFS;
	buf[0] = 0;
	for (size_t i = 0; i < space->n_knobs; i++) {
		char v[64];
		int w = snprintf(buf + n, size - n, "%s%s=%s", i ? "," : "", space->knobs[i].name,
				 opt_config_text(space, config, i, v, sizeof(v)));

		if (w < 0 || (size_t)w >= size - n)
			return -ENOBUFS;
		n += (size_t)w;
	}
	return 0;
}

int opt_config_from_key(const struct opt_space *space, const char *key, struct opt_config *ret, struct error *err)
{
	struct opt_config c = { 0 };
	bool seen[OPT_KNOBS_MAX] = { false };
	const char *s = key;

	while (*s) {
		const char *eq = strchr(s, '='), *end = strchr(s, ',');
		char name[OPT_KNOB_NAME_MAX], value[64];
		size_t vlen;
		bool found = false;
		int k;

		if (!end)
			end = s + strlen(s);
		if (!eq || eq > end || (size_t)(eq - s) >= sizeof(name) || (size_t)(end - eq - 1) >= sizeof(value))
			return error_set(err, -EINVAL, "configuration key \"%s\": expected name=value pairs", key);
		memcpy(name, s, (size_t)(eq - s));
		name[eq - s] = 0;
		vlen = (size_t)(end - eq - 1);
		memcpy(value, eq + 1, vlen);
		value[vlen] = 0;
		k = opt_space_knob_index(space, name);
		if (k < 0)
			return error_set(err, -EINVAL, "configuration key \"%s\": unknown knob \"%s\"", key, name);
		if (seen[k])
			return error_set(err, -EINVAL, "configuration key \"%s\": knob \"%s\" twice", key, name);
		seen[k] = true;
		for (size_t i = 0; i < space->knobs[k].n_values && !found; i++) {
			struct opt_config probe = { 0 };
			char buf[64];

			probe.idx[k] = (uint16_t)i;
			if (strcmp(opt_config_text(space, &probe, (size_t)k, buf, sizeof(buf)), value) == 0) {
				c.idx[k] = (uint16_t)i;
				found = true;
			}
		}
		if (!found)
			return error_set(err, -EINVAL, "configuration key \"%s\": %s=%s is not in the search space",
					 key, name, value);
		s = *end ? end + 1 : end;
	}
	for (size_t i = 0; i < space->n_knobs; i++)
		if (!seen[i])
			return error_set(err, -EINVAL, "configuration key \"%s\": knob \"%s\" missing", key,
					 space->knobs[i].name);
	*ret = c;
	return 0;
}

int opt_config_number(const struct opt_space *space, const struct opt_config *config, const char *knob, double *ret)
{
	int k = opt_space_knob_index(space, knob);

	if (k < 0)
		return k;
	if (space->knobs[k].kind == OPT_KNOB_LIST_STRING)
		return -EINVAL;
	*ret = space->knobs[k].numbers[config->idx[k]];
	return 0;
}

int opt_config_to_json(const struct opt_space *space, const struct opt_config *config, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj)
		return -ENOMEM;
	for (size_t i = 0; i < space->n_knobs; i++) {
		const struct opt_knob *k = &space->knobs[i];
		int r;

		if (!opt_knob_active(space, config, i))
			continue; /* no value: its flag is not rendered */
		r = k->kind == OPT_KNOB_LIST_STRING ? json_add_string(obj, k->name, k->strings[config->idx[i]])
						    : json_add_number(obj, k->name, k->numbers[config->idx[i]]);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(obj);
	return 0;
}

uint64_t opt_config_ordinal(const struct opt_space *space, const struct opt_config *config)
{
	uint64_t o = 0;

	for (size_t i = 0; i < space->n_knobs; i++)
		o = o * space->knobs[i].n_values + config->idx[i];
	return o;
}

void opt_config_from_ordinal(const struct opt_space *space, uint64_t ordinal, struct opt_config *ret)
{
	struct opt_config c = { 0 };

	for (size_t i = space->n_knobs; i-- > 0;) {
		c.idx[i] = (uint16_t)(ordinal % space->knobs[i].n_values);
		ordinal /= space->knobs[i].n_values;
	}
	*ret = c;
}

uint64_t opt_space_count(const struct opt_space *space)
{
	uint64_t n = 0;

	for (uint64_t o = 0; o < space->n_grid; o++) {
		struct opt_config c;

		opt_config_from_ordinal(space, o, &c);
		n += opt_space_allowed(space, &c);
	}
	return n;
}

int opt_space_enumerate(const struct opt_space *space, struct opt_config **ret_configs, size_t *ret_n)
{
	size_t n = (size_t)opt_space_count(space), k = 0;
	struct opt_config *v = calloc(n ? n : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (uint64_t o = 0; o < space->n_grid; o++) {
		struct opt_config c;

		opt_config_from_ordinal(space, o, &c);
		if (opt_space_allowed(space, &c))
			v[k++] = c;
	}
	*ret_configs = v;
	*ret_n = n;
	return 0;
}

void opt_space_snap(const struct opt_space *space, const double *x, struct opt_config *ret)
{
	struct opt_config c = { 0 };

	for (size_t i = 0; i < space->n_knobs; i++) {
		size_t n = space->knobs[i].n_values;
		double u = isfinite(x[i]) ? CLAMP(x[i], 0.0, 1.0) : 0.0;
		long idx = lround(u * (double)(n - 1));

		c.idx[i] = (uint16_t)CLAMP(idx, 0, (long)n - 1);
	}
	/* one configuration per inactive combination (conditions name other knobs only) */
	for (size_t i = 0; i < space->n_knobs; i++)
		if (!opt_knob_active(space, &c, i))
			c.idx[i] = 0;
	*ret = c;
}

double opt_space_normalise(const struct opt_space *space, size_t knob, unsigned idx)
{
	size_t n = space->knobs[knob].n_values;

	return n > 1 ? (double)idx / (double)(n - 1) : 0.0;
}

/* ---- widening a range ---- */

static cJSON *range_object(cJSON *search_space, const char *knob)
{
	cJSON *k = cJSON_GetObjectItemCaseSensitive(search_space, knob);

	if (!cJSON_IsObject(k) || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(k, "min")) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(k, "max")))
		return NULL;
	return k;
}

int opt_space_set_range_json(cJSON *search_space, const char *knob, int64_t min, int64_t max)
{
	cJSON *k = range_object(search_space, knob);

	if (!k || min < 0 || min > max)
		return -EINVAL;
	cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(k, "min"), (double)min);
	cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(k, "max"), (double)max);
	return 0;
}

int opt_space_widen_json(cJSON *search_space, const char *knob, bool upper, int64_t lower_limit, int64_t upper_limit,
			 int64_t *ret_min, int64_t *ret_max)
{
	cJSON *k = range_object(search_space, knob), *scale, *stepj;
	int64_t old_min, old_max, min, max, step;

	if (!k)
		return -EINVAL;
	min = old_min = (int64_t)cJSON_GetObjectItemCaseSensitive(k, "min")->valuedouble;
	max = old_max = (int64_t)cJSON_GetObjectItemCaseSensitive(k, "max")->valuedouble;
	scale = cJSON_GetObjectItemCaseSensitive(k, "scale");
	stepj = cJSON_GetObjectItemCaseSensitive(k, "step");
	step = cJSON_IsNumber(stepj) ? (int64_t)stepj->valuedouble : 1;
	if (step < 1)
		return -EINVAL;
	if (cJSON_IsString(scale) && strcmp(scale->valuestring, "log2") == 0) {
		if (upper)
			max = max <= upper_limit / 2 ? max * 2 : max;
		else
			min = min % 2 == 0 && min / 2 >= MAX(lower_limit, 1) ? min / 2 : min;
	} else {
		/* as many steps as the range holds, fewer where the limit is
		 * nearer, none where the range is already past it */
		int64_t steps = MAX(1, (max - min) / step);
		int64_t room = upper ? (upper_limit - max) / step : (min - lower_limit) / step;

		if (upper)
			max += CLAMP(room, 0, steps) * step;
		else
			min -= CLAMP(room, 0, steps) * step;
	}
	if (min == old_min && max == old_max)
		return -ERANGE;
	if (opt_space_set_range_json(search_space, knob, min, max) < 0)
		return -EINVAL;
	*ret_min = min;
	*ret_max = max;
	return 0;
}
