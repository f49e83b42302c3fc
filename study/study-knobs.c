/* study-knobs.c — a configuration's knobs as people read them, one rule for
 * every place that shows them (the runner's status and pre-flight, the
 * summary of `goodput tune`, `goodput best`, the report): the quantization
 * alone ("fp8"; "bf16" for none), "tp=N" for the tensor parallelism, else
 * "name=value". */
#include <stdio.h>
#include <string.h>

#include "study.h"

bool study_knob_append(char *buf, size_t size, size_t *len, const char *name, const char *val)
{
	const char *sep = *len ? " " : "";
	int n;

	if (strcmp(name, OPT_KNOB_QUANTIZATION) == 0)
		n = snprintf(buf + *len, size - *len, "%s%s", sep, strcmp(val, "none") == 0 ? "bf16" : val);
	else if (strcmp(name, OPT_KNOB_TENSOR_PARALLEL) == 0)
		n = snprintf(buf + *len, size - *len, "%stp=%s", sep, val);
	else
		n = snprintf(buf + *len, size - *len, "%s%s=%s", sep, name, val);
	if (n < 0 || (size_t)n >= size - *len)
		return false;
	*len += (size_t)n;
	return true;
}

void study_knobs_text(const struct opt_space *space, const struct opt_config *c, bool categorical_only, char *buf,
		      size_t size)
{
	size_t len = 0;

	buf[0] = 0;
	for (size_t k = 0; k < space->n_knobs; k++) {
		char v[64];

		/* a knob with one allowed value (max_model_len=4096) says nothing about the trial, nor one
		 * the configuration does not have (spec_tokens without speculation) */
		if (space->knobs[k].n_values <= 1 || (categorical_only && !space->knobs[k].categorical) ||
		    !opt_knob_active(space, c, k))
			continue;
		if (!study_knob_append(buf, size, &len, space->knobs[k].name,
				       opt_config_text(space, c, k, v, sizeof(v))))
			break;
	}
}

void study_knobs_json_text(const cJSON *knobs, char *buf, size_t size)
{
	const cJSON *item;
	size_t len = 0;

	buf[0] = 0;
	cJSON_ArrayForEach(item, knobs)
	{
		char v[64];

		if (!cJSON_IsString(item))
			snprintf(v, sizeof(v), "%g", item->valuedouble);
		if (!study_knob_append(buf, size, &len, item->string, cJSON_IsString(item) ? item->valuestring : v))
			break;
	}
}
