/* study-internal.h — what the study's schema table (study-schema.c) shares
 * with the parser of the keys that need code (study.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "study.h"

/* Values the table reads that study.c translates (enums, lengths). */
struct study_raw {
	int input_dist, output_dist, arrival, dataset, scenario, cost_tokens, method;
	double input_std, output_std, range_ratio, input_len, output_len;
	bool set_input_dist, set_output_dist;
};

extern const char *const study_dataset_names[];
extern const char *const study_dist_names[];
extern const char *const study_arrival_names[];
extern const char *const study_method_names[];
extern const char *const study_quant_names[];

/* The object at a dotted path ("workload", "model.checkpoints"), or NULL. */
const cJSON *study_object_at(const cJSON *root, const char *path);
/* The generic pass: refuses unknown keys of every declared object and reads
 * every plain key into s (or raw). */
int study_schema_apply(struct study *s, struct study_raw *raw, struct error *err);
