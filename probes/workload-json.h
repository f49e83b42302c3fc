/* workload-json.h — the workload block: the requests of a benchmark as JSON.
 *
 * One table (json-dispatch.h) declares every key of the block a study spec
 * holds under "workload", that `goodput probe --workload FILE` reads and
 * that `goodput workload capture` writes: lengths (fixed, uniform, normal,
 * lognormal, a histogram of bucket bounds and counts, the samples of a
 * request log), the arrival process (Poisson, gamma, constant, all at once,
 * a log replayed), the rate profile over the day, shared prefixes, and
 * "captured", what a capture measured (kept as is for reports and drift).
 * The study room embeds the table, so its reference and JSON Schema list
 * these keys too. */
#pragma once

#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "json-dispatch.h"
#include "metrics.h"
#include "workload.h"

struct probe_workload_spec {
	struct probe_workload_config config;       /* samples_path and dataset_path point into the document */
	double percentiles[PROBE_MAX_PERCENTILES]; /* the block's "percentiles" */
	size_t n_percentiles;                      /* 0: not given */
	const cJSON *captured;                     /* the "captured" object, into the document; NULL: none */
	const cJSON *spec_acceptance;              /* "spec_acceptance" (checked), into the document; NULL: none */
};

/* The block's keys (with a study's defaults in their documentation). */
extern const struct json_field probe_workload_fields[];

/* Reads the block obj (its path for messages, e.g. "workload") into spec,
 * whose config holds the caller's defaults on entry. Unknown keys and
 * values that do not go together are errors naming the key path. */
int probe_workload_from_json(const cJSON *obj, const char *path, struct probe_workload_spec *spec, struct error *err);

/* Adds the keys that describe the traffic's shape — lengths, arrivals,
 * rate, burstiness, rate profile, shared prefix, samples — to obj,
 * replacing those it has (so a study's block takes a captured shape and
 * keeps its own num_prompts, seed, percentiles). -ENOMEM. */
int probe_workload_shape_to_json(const struct probe_workload_config *cfg, cJSON *obj);

/* Adds p's points to obj as key: [["HH:MM", requests/s], ...] (an empty
 * array for none). -ENOMEM. */
int probe_rate_profile_points_to_json(cJSON *obj, const char *key, const struct probe_rate_profile *p);

/* A rate profile from a file's JSON: a bare [["HH:MM", req/s], ...], a
 * workload block with "rate_profile", or a captured block whose
 * "captured" holds the rate per hour it measured. -ENOENT when v holds
 * none; -EINVAL with err naming the entry that is wrong. */
int probe_rate_profile_from_json(const cJSON *v, struct probe_rate_profile *ret, struct error *err);

/* "09:30" or "09:30:15" → seconds of the day; -EINVAL otherwise. */
int probe_parse_time_of_day(const char *s, uint32_t *ret);
/* Seconds of the day → "09:30" (or "09:30:15" when it has seconds). */
const char *probe_format_time_of_day(uint32_t second_of_day, char *buf, size_t size);
