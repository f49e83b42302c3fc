/* fuzz-sim-request.c — libFuzzer target for goodput-sim's request bodies:
 * any body for /v1/completions or /v1/chat/completions (the first byte
 * picks which) is parsed or refused with a message, with no crash, leak,
 * out-of-bounds access or undefined behaviour (a huge max_tokens once cast a
 * double out of range), and an accepted one is within its documented
 * bounds and renders as valid JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "openai.h"
#include "workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sim_api_request req = { 0 };
	struct error err = { 0 };
	enum sim_api_kind kind;
	char *model_json, *s;
	char buf[512];
	int r;

	if (size == 0)
		return 0;
	kind = data[0] & 1 ? SIM_API_CHAT : SIM_API_COMPLETIONS;
	r = sim_api_parse_request(kind, (const char *)data + 1, size - 1, &req, &err);
	if (r < 0) {
		if (!err.msg[0])
			abort();
		s = sim_api_error_json(err.msg, "BadRequestError", NULL, 400);
		if (s) {
			cJSON *e = cJSON_Parse(s);

			if (!e)
				abort();
			cJSON_Delete(e);
			free(s);
		}
		return 0;
	}
	if (req.n_prompt == 0 || req.n_prompt > SIM_API_MAX_PROMPT_TOKENS ||
	    (req.has_max_tokens && (req.max_tokens < 1 || req.max_tokens > PROBE_MAX_TOKENS_PER_REQUEST)))
		abort();
	model_json = sim_api_json_escape(req.model ? req.model : "m");
	if (model_json) {
		struct sim_api_stream st = { .kind = kind, .id = 1, .created = 2, .model_json = model_json };
		cJSON *j;

		r = sim_api_format_token_chunk(buf, sizeof(buf), &st, req.prompt_ids[0], true, "length");
		if (r >= 0) {
			j = cJSON_ParseWithLength(buf + 6, (size_t)r - 8);
			if (!j)
				abort();
			cJSON_Delete(j);
		}
		s = sim_api_format_response(&st, req.prompt_ids, MIN(req.n_prompt, (size_t)64), "length", req.n_prompt);
		if (s) {
			j = cJSON_Parse(s);
			if (!j)
				abort();
			cJSON_Delete(j);
			free(s);
		}
		free(model_json);
	}
	sim_api_request_done(&req);
	return 0;
}
