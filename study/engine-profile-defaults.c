/* engine-profile-defaults.c — what an engine does when a knob is not given,
 * and how far a knob may go: a profile's "defaults" key.
 *
 *   "defaults": {
 *     "knobs": {"max_num_seqs": 256, "max_num_batched_tokens": 2048},
 *     "large_gpu": {"min_memory_gib": 70, "except": ["A100"],
 *                   "knobs": {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}},
 *     "limits": {"max_num_seqs": [1, 4096]}
 *   }
 *
 * vLLM picks its OpenAI server's batch and chunk size by the GPU's memory
 * (larger on GPUs of 70 GiB and more, A100 excepted): "large_gpu" holds what
 * replaces "knobs" there. The study measures these defaults first, as its
 * baseline; "limits" bound how far search.extend_edges widens a range. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "engine-profile-internal.h"
#include "json-util.h"
#include "macro.h"

#define DOFF(field) offsetof(struct engine_profile, defaults.field)

/* Knob values: numbers or strings, for knobs the profile maps. */
static int check_knob_values(const cJSON *v, const char *path, const struct json_field *f, void *base,
			     struct error *err)
{
	const struct engine_profile *p = base;
	const cJSON *item;

	cJSON_ArrayForEach(item, v)
	{
		char kp[256];

		json_path_join(kp, sizeof(kp), path, item->string);
		if (!engine_profile_find_knob(p, item->string))
			return error_set(err, -EINVAL, "%s: not a knob of this profile", kp);
		if (!cJSON_IsNumber(item) && !cJSON_IsString(item))
			return error_set(err, -EINVAL, "%s: expected a number or a string", kp);
	}
	return json_dispatch_store(v, path, f, base, err);
}

/* Limits: {"knob": [min, max]} with 0 <= min <= max. */
static int check_limits(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	const struct engine_profile *p = base;
	const cJSON *item;

	cJSON_ArrayForEach(item, v)
	{
		const cJSON *lo = cJSON_GetArrayItem(item, 0), *hi = cJSON_GetArrayItem(item, 1);
		char kp[256];

		json_path_join(kp, sizeof(kp), path, item->string);
		if (!engine_profile_find_knob(p, item->string))
			return error_set(err, -EINVAL, "%s: not a knob of this profile", kp);
		if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2 || !cJSON_IsNumber(lo) ||
		    !cJSON_IsNumber(hi) || !(lo->valuedouble >= 0) || !(hi->valuedouble >= lo->valuedouble))
			return error_set(err, -EINVAL, "%s: expected [min, max] with 0 <= min <= max", kp);
	}
	return json_dispatch_store(v, path, f, base, err);
}

static const struct json_field large_gpu_fields[] = {
	{ "min_memory_gib", JSON_DOUBLE, DOFF(large_min_gib), .flags = JSON_MANDATORY, .min = 1, .max = 4096,
	  .doc = "GPUs with at least this much memory take these defaults" },
	{ "except", JSON_STRV, DOFF(large_except), .max = 16, .doc = "GPU types that do not (e.g. A100)" },
	{ "knobs", JSON_OBJECT, DOFF(large_knobs), .callback = check_knob_values, .flags = JSON_MANDATORY,
	  .doc = "what replaces defaults.knobs there" },
	{ 0 },
};

const struct json_field engine_profile_defaults_fields[] = {
	{ "knobs", JSON_OBJECT, DOFF(knobs), .callback = check_knob_values,
	  .doc = "knob values the engine uses when it is not given them, e.g. {\"max_num_seqs\": 256}" },
	{ "large_gpu", JSON_OBJECT, .fields = large_gpu_fields,
	  .doc = "defaults that depend on the GPU's memory (vLLM's OpenAI server)" },
	{ "limits", JSON_OBJECT, DOFF(limits), .callback = check_limits,
	  .doc = "how far a knob may go, {\"max_num_seqs\": [1, 4096]}: search.extend_edges stays inside" },
	{ 0 },
};

static bool excepted(const struct engine_profile *p, const char *gpu_type)
{
	for (size_t i = 0; gpu_type && p->defaults.large_except && p->defaults.large_except[i]; i++)
		if (strncasecmp(gpu_type, p->defaults.large_except[i], strlen(p->defaults.large_except[i])) == 0)
			return true;
	return false;
}

int engine_profile_default_knobs(const struct engine_profile *p, const char *gpu_type, double gpu_memory_gib,
				 cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	const cJSON *sets[2] = { p->defaults.knobs, NULL }, *item;

	if (!o)
		return -ENOMEM;
	if (p->defaults.large_knobs && gpu_memory_gib >= p->defaults.large_min_gib && !excepted(p, gpu_type))
		sets[1] = p->defaults.large_knobs;
	for (size_t s = 0; s < 2; s++)
		cJSON_ArrayForEach(item, sets[s])
		{
			cJSON *copy = cJSON_Duplicate(item, false);

			if (!copy)
				return -ENOMEM;
			cJSON_DeleteItemFromObjectCaseSensitive(o, item->string);
			if (!cJSON_AddItemToObject(o, item->string, copy)) {
				cJSON_Delete(copy);
				return -ENOMEM;
			}
		}
	*ret = TAKE_PTR(o);
	return 0;
}

int engine_profile_knob_limits(const struct engine_profile *p, const char *knob, double *ret_min, double *ret_max)
{
	const cJSON *l = p->defaults.limits ? cJSON_GetObjectItemCaseSensitive(p->defaults.limits, knob) : NULL;

	if (!l)
		return -ENOENT;
	*ret_min = cJSON_GetArrayItem(l, 0)->valuedouble;
	*ret_max = cJSON_GetArrayItem(l, 1)->valuedouble;
	return 0;
}
