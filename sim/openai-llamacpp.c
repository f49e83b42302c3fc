/* openai-llamacpp.c — llama.cpp's OpenAI-compatible streaming shape.
 *
 * llama-server (tools/server, b4748-era) streams each token as a chunk
 * whose finish_reason is null, sends a chat's first token as two events
 * (the assistant role, then the content), and ends with one more chunk that
 * holds an empty choice with the finish reason and — always, whatever
 * stream_options says — usage, before "data: [DONE]". Clients that expect
 * vLLM's shape (usage alone with "choices": []) meet it here. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "dialect.h"
#include "server-internal.h"

#define FINGERPRINT "b4748-c392e5094"

static int checked(int n, size_t size)
{
	if (n < 0 || (size_t)n >= size)
		return -ENOBUFS;
	return n;
}

int sim_api_llamacpp_token_chunk(char *buf, size_t size, const struct sim_api_stream *s, uint32_t token_id, bool first)
{
	int n = 0;

	if (s->kind != SIM_API_CHAT)
		return checked(snprintf(buf, size,
					"data: {\"choices\":[{\"text\":\" w%" PRIu32 "\",\"index\":0,\"logprobs\":null,"
					"\"finish_reason\":null}],\"created\":%" PRIu64 ",\"model\":\"%s\","
					"\"system_fingerprint\":\"" FINGERPRINT "\",\"object\":\"text_completion\","
					"\"id\":\"chatcmpl-%" PRIu64 "\"}\n\n",
					token_id, s->created, s->model_json, s->id),
			       size);
	if (first) {
		n = checked(snprintf(buf, size,
				     "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":"
				     "\"assistant\"}}],\"created\":%" PRIu64 ",\"id\":\"chatcmpl-%" PRIu64
				     "\",\"model\":\"%s\",\"object\":\"chat.completion.chunk\"}\n\n",
				     s->created, s->id, s->model_json),
			    size);
		if (n < 0)
			return n;
	}
	int k = checked(
		snprintf(buf + n, size - (size_t)n,
			 "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\" w%" PRIu32
			 "\"}}],\"created\":%" PRIu64 ",\"id\":\"chatcmpl-%" PRIu64 "\",\"model\":\"%s\","
			 "\"system_fingerprint\":\"" FINGERPRINT "\",\"object\":\"chat.completion.chunk\"}\n\n",
			 token_id, s->created, s->id, s->model_json),
		size - (size_t)n);
	return k < 0 ? k : n + k;
}

int sim_api_llamacpp_final_chunk(char *buf, size_t size, const struct sim_api_stream *s, const char *finish_reason,
				 uint64_t prompt_tokens, uint64_t completion_tokens)
{
	const char *fr = finish_reason ? finish_reason : "length";

	if (s->kind == SIM_API_CHAT)
		return checked(snprintf(buf, size,
					"data: {\"choices\":[{\"finish_reason\":\"%s\",\"index\":0,\"delta\":{}}],"
					"\"created\":%" PRIu64 ",\"id\":\"chatcmpl-%" PRIu64 "\",\"model\":\"%s\","
					"\"system_fingerprint\":\"" FINGERPRINT
					"\",\"object\":\"chat.completion.chunk\","
					"\"usage\":{\"completion_tokens\":%" PRIu64 ",\"prompt_tokens\":%" PRIu64
					",\"total_tokens\":%" PRIu64 "}}\n\n",
					fr, s->created, s->id, s->model_json, completion_tokens, prompt_tokens,
					prompt_tokens + completion_tokens),
			       size);
	return checked(
		snprintf(buf, size,
			 "data: {\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"%s\"}],"
			 "\"created\":%" PRIu64 ",\"model\":\"%s\",\"system_fingerprint\":\"" FINGERPRINT "\","
			 "\"object\":\"text_completion\",\"usage\":{\"completion_tokens\":%" PRIu64
			 ",\"prompt_tokens\":%" PRIu64 ",\"total_tokens\":%" PRIu64 "},\"id\":\"chatcmpl-%" PRIu64
			 "\"}\n\n",
			 fr, s->created, s->model_json, completion_tokens, prompt_tokens,
			 prompt_tokens + completion_tokens, s->id),
		size);
}
