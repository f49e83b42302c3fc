/* fuzz-engine-profile.c — libFuzzer target for engine profiles: any bytes
 * parsed as a profile file, and an accepted profile rendered into a command
 * for a fixed configuration (and for knob values taken from the input), with
 * no crash, leak or out-of-bounds access, and no argument that a value
 * turned into a flag. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine-profile.h"
#include "json-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void render(const struct engine_profile *p, const cJSON *knobs)
{
	struct engine_render_params params = {
		.model = "org/model", .host = "127.0.0.1", .port = 8000, .gpu_type = "H100", .gpu_count = 8
	};
	struct engine_command c = { 0 };
	struct error err = { 0 };

	if (engine_profile_render(p, &params, knobs, &c, &err) < 0) {
		engine_command_done(&c);
		return;
	}
	if (!c.argv || !c.argv[0])
		abort();
	free(engine_command_format(&c));
	engine_command_done(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct engine_profile *p = NULL;
	struct error err = { 0 };
	cJSON *j = NULL, *knobs;
	int r;

	if (json_parse_strict("profile", (const char *)data, size, &j, &err) < 0)
		return 0;
	r = engine_profile_from_json(j, "fuzz.json", &p, &err);
	if (r < 0) {
		cJSON_Delete(j);
		if (!err.msg[0] || p)
			abort();
		return 0;
	}
	knobs = cJSON_Parse("{\"max_num_seqs\": 64, \"max_num_batched_tokens\": 2048, \"quantization\": \"fp8\", "
			    "\"tensor_parallel\": 2}");
	render(p, knobs);
	cJSON_Delete(knobs);
	/* The profile's own "knobs_example", if the input has one, as knob values. */
	render(p, cJSON_GetObjectItemCaseSensitive(j, "knobs_example"));
	engine_profile_free(p);
	cJSON_Delete(j);
	return 0;
}
