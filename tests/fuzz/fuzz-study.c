/* fuzz-study.c — libFuzzer target for the study spec: any bytes, parsed as
 * a file is (json_parse_strict) and validated as goodput tune and goodputd
 * validate it (study_from_json, with an engine profile's extra knobs), are
 * accepted or refused with a message — no crash, leak or out-of-bounds
 * access — and an accepted spec holds no name that breaks a table or would
 * be taken for a flag. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "study.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *s, bool argv)
{
	if (!s)
		return;
	if (!utf8_is_valid(s, strlen(s)) || utf8_has_control(s) || (argv && s[0] == '-'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const extra[] = { "kv_cache_dtype", "gpu_memory_utilization", NULL };
	struct study_options o = { .extra_knobs = extra };
	struct error err = { 0 };
	struct study *s = NULL;
	cJSON *j = NULL;
	int r;

	if (json_parse_strict("spec", (const char *)data, size, &j, &err) < 0)
		return 0;
	r = study_from_json(j, &o, &s, &err);
	cJSON_Delete(j);
	if (r < 0) {
		if (!err.msg[0] || s)
			abort();
		return 0;
	}
	check_name(s->name, true);
	check_name(s->label, false);
	check_name(s->model.name, true);
	check_name(s->gpu.type, true);
	for (int q = 0; q < _STUDY_QUANT_MAX; q++)
		check_name(s->model.checkpoints[q], true);
	study_free(s);
	return 0;
}
