/* openai.c — request parsing and response formatting for goodput-sim's
 * OpenAI-compatible endpoints (see openai.h).
 *
 * Parsing uses cJSON through common/json-util (strict: trailing garbage is an
 * error). Unknown request keys (temperature, top_p, ...) are accepted and
 * ignored, as they do not change an emulated server's timing. The chunk
 * formatters use snprintf, not cJSON: they run once per streamed token, up to
 * a hundred thousand times a second. */
#include "openai.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "array.h"
#include "json-util.h"
#include "macro.h"
#include "workload.h"

/* The word rule's whitespace: the C locale's, as probe_count_words. */
static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

uint32_t sim_api_count_words(const char *text)
{
	return probe_count_words(text);
}

uint32_t sim_api_word_id(const char *word, size_t len)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	if (len >= 2 && len <= 10 && word[0] == 'w') {
		uint64_t v = 0;
		size_t i;

		for (i = 1; i < len && word[i] >= '0' && word[i] <= '9'; i++)
			v = v * 10 + (uint64_t)(word[i] - '0');
		if (i == len && v <= INT32_MAX)
			return (uint32_t)v;
	}
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)word[i];
		h *= UINT64_C(0x100000001b3);
	}
	return PROBE_TOKEN_ID_MIN + (uint32_t)(h % (PROBE_TOKEN_ID_MAX - PROBE_TOKEN_ID_MIN));
}

/* A growable id array with a hard cap. */
struct ids {
	uint32_t *v;
	size_t n, cap;
};

static int ids_push(struct ids *a, uint32_t id, struct error *err)
{
	if (a->n >= SIM_API_MAX_PROMPT_TOKENS)
		return error_set(err, -E2BIG, "prompt: longer than %u tokens", SIM_API_MAX_PROMPT_TOKENS);
	if (ARRAY_GROW(a->v, a->cap, a->n) < 0)
		return -ENOMEM;
	a->v[a->n++] = id;
	return 0;
}

static int ids_add_text(struct ids *a, const char *text, struct error *err)
{
	const char *p = text;

	for (;;) {
		const char *start;
		int r;

		while (*p && is_space(*p))
			p++;
		if (!*p)
			return 0;
		start = p;
		while (*p && !is_space(*p))
			p++;
		r = ids_push(a, sim_api_word_id(start, (size_t)(p - start)), err);
		if (r < 0)
			return r;
	}
}

static int ids_add_id_array(struct ids *a, const cJSON *arr, const char *path, struct error *err)
{
	size_t i = 0;
	const cJSON *it;

	cJSON_ArrayForEach(it, arr)
	{
		int r;

		/* The range first: a double outside int64_t's range must never reach a cast. */
		if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0 && it->valuedouble <= INT32_MAX) ||
		    it->valuedouble != floor(it->valuedouble))
			return error_set(err, -EINVAL, "%s[%zu]: expected a token id (an integer >= 0)", path, i);
		r = ids_push(a, (uint32_t)it->valuedouble, err);
		if (r < 0)
			return r;
		i++;
	}
	return 0;
}

static int parse_prompt(const cJSON *root, struct ids *a, struct error *err)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");

	if (!p || cJSON_IsNull(p))
		return error_set(err, -EINVAL, "prompt: missing");
	if (cJSON_IsString(p))
		return ids_add_text(a, p->valuestring, err);
	if (!cJSON_IsArray(p))
		return error_set(err, -EINVAL, "prompt: expected a string or an array of token ids");
	if (cJSON_GetArraySize(p) == 0)
		return error_set(err, -EINVAL, "prompt: must not be empty");
	if (cJSON_IsNumber(p->child))
		return ids_add_id_array(a, p, "prompt", err);
	/* A batch of prompts: goodput-sim takes exactly one prompt per request. */
	if (cJSON_GetArraySize(p) > 1)
		return error_set(err, -EINVAL, "prompt: goodput-sim accepts one prompt per request, got %d",
				 cJSON_GetArraySize(p));
	if (cJSON_IsString(p->child))
		return ids_add_text(a, p->child->valuestring, err);
	if (cJSON_IsArray(p->child))
		return ids_add_id_array(a, p->child, "prompt[0]", err);
	return error_set(err, -EINVAL, "prompt: expected a string or an array of token ids");
}

static int parse_messages(const cJSON *root, struct ids *a, struct error *err)
{
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages"), *m;
	size_t i = 0;

	if (!msgs || cJSON_IsNull(msgs))
		return error_set(err, -EINVAL, "messages: missing");
	if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
		return error_set(err, -EINVAL, "messages: expected a non-empty array");
	cJSON_ArrayForEach(m, msgs)
	{
		const cJSON *role, *content;
		int r;

		if (!cJSON_IsObject(m))
			return error_set(err, -EINVAL, "messages[%zu]: expected an object", i);
		role = cJSON_GetObjectItemCaseSensitive(m, "role");
		if (!cJSON_IsString(role))
			return error_set(err, -EINVAL, "messages[%zu].role: missing or not a string", i);
		content = cJSON_GetObjectItemCaseSensitive(m, "content");
		if (!content || cJSON_IsNull(content)) {
			/* An assistant turn with tool calls only: no text to count. */
		} else if (cJSON_IsString(content)) {
			r = ids_add_text(a, content->valuestring, err);
			if (r < 0)
				return r;
		} else if (cJSON_IsArray(content)) {
			const cJSON *part;
			size_t j = 0;

			cJSON_ArrayForEach(part, content)
			{
				const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");

				if (!cJSON_IsObject(part))
					return error_set(err, -EINVAL, "messages[%zu].content[%zu]: expected an object",
							 i, j);
				if (cJSON_IsString(text)) {
					r = ids_add_text(a, text->valuestring, err);
					if (r < 0)
						return r;
				}
				j++;
			}
		} else
			return error_set(err, -EINVAL, "messages[%zu].content: expected a string or an array", i);
		i++;
	}
	if (a->n == 0)
		return error_set(err, -EINVAL, "messages: no text in any message's content");
	return 0;
}

static int get_max_tokens(const cJSON *root, const char *key, struct sim_api_request *r, struct error *err)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);

	if (!it || cJSON_IsNull(it))
		return 0;
	/* No cast before the range is known (1e300 does not fit any integer). */
	if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble))
		return error_set(err, -EINVAL, "%s: expected an integer", key);
	if (it->valuedouble < 1)
		return error_set(err, -EINVAL, "%s must be at least 1, got %.0f.", key, MAX(it->valuedouble, -1e15));
	if (it->valuedouble > PROBE_MAX_TOKENS_PER_REQUEST)
		return error_set(err, -EINVAL, "%s: at most %u, got %g", key, PROBE_MAX_TOKENS_PER_REQUEST,
				 it->valuedouble);
	r->has_max_tokens = true;
	r->max_tokens = (uint32_t)it->valuedouble;
	return 1;
}

/* kv_transfer_params (vLLM's KV connectors): null, or an object whose
 * do_remote_decode / do_remote_prefill say the request's part; the rest
 * (remote_engine_id, remote_block_ids, remote_host, remote_port) is the
 * connector's and only tp_size is read. */
static int parse_kv_transfer(const cJSON *root, struct sim_api_request *req, struct error *err)
{
	const cJSON *kv = cJSON_GetObjectItemCaseSensitive(root, "kv_transfer_params"), *tp;
	int r;

	if (!kv || cJSON_IsNull(kv))
		return 0;
	if (!cJSON_IsObject(kv))
		return error_set(err, -EINVAL, "kv_transfer_params: expected an object");
	r = json_get_bool(kv, "kv_transfer_params", "do_remote_decode", &req->kv_remote_decode, err);
	if (r >= 0)
		r = json_get_bool(kv, "kv_transfer_params", "do_remote_prefill", &req->kv_remote_prefill, err);
	if (r < 0)
		return r;
	tp = cJSON_GetObjectItemCaseSensitive(kv, "tp_size");
	if (cJSON_IsNumber(tp) && tp->valuedouble >= 1 && tp->valuedouble <= 1024)
		req->kv_remote_tp = (uint32_t)tp->valuedouble;
	return 0;
}

int sim_api_parse_request(enum sim_api_kind kind, const char *body, size_t len, struct sim_api_request *ret,
			  struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *root = NULL;
	struct sim_api_request req = { .kind = kind };
	struct ids ids = { 0 };
	const cJSON *so, *model;
	int r;

	r = json_parse_strict("request body", body, len, &root, err);
	if (r < 0)
		return r;
	if (!cJSON_IsObject(root))
		return error_set(err, -EINVAL, "request body: expected a JSON object");

	model = cJSON_GetObjectItemCaseSensitive(root, "model");
	if (model && !cJSON_IsNull(model) && !cJSON_IsString(model))
		return error_set(err, -EINVAL, "model: expected a string");

	r = json_get_bool(root, "", "stream", &req.stream, err);
	if (r < 0)
		return r;
	r = json_get_bool(root, "", "ignore_eos", &req.ignore_eos, err);
	if (r < 0)
		return r;
	so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
	if (so && !cJSON_IsNull(so)) {
		if (!cJSON_IsObject(so))
			return error_set(err, -EINVAL, "stream_options: expected an object");
		r = json_get_bool(so, "stream_options", "include_usage", &req.include_usage, err);
		if (r < 0)
			return r;
	}
	r = parse_kv_transfer(root, &req, err);
	if (r < 0)
		return r;
	r = get_max_tokens(root, "max_tokens", &req, err);
	if (r == 0 && kind == SIM_API_CHAT)
		r = get_max_tokens(root, "max_completion_tokens", &req, err);
	if (r < 0)
		return r;

	r = kind == SIM_API_CHAT ? parse_messages(root, &ids, err) : parse_prompt(root, &ids, err);
	if (r == 0 && ids.n == 0)
		r = error_set(err, -EINVAL, "prompt: must contain at least one token");
	if (r < 0) {
		free(ids.v);
		return r;
	}
	if (cJSON_IsString(model)) {
		req.model = strdup(model->valuestring);
		if (!req.model) {
			free(ids.v);
			return -ENOMEM;
		}
	}
	req.prompt_ids = ids.v;
	req.n_prompt = ids.n;
	*ret = req;
	return 0;
}

void sim_api_request_done(struct sim_api_request *r)
{
	if (!r)
		return;
	free(r->model);
	free(r->prompt_ids);
	r->model = NULL;
	r->prompt_ids = NULL;
	r->n_prompt = 0;
}

char *sim_api_json_escape(const char *s)
{
	cJSON *str = cJSON_CreateString(s);
	char *printed, *out;
	size_t n;

	if (!str)
		return NULL;
	printed = cJSON_PrintUnformatted(str);
	cJSON_Delete(str);
	if (!printed)
		return NULL;
	n = strlen(printed);
	/* Strip the surrounding quotes. */
	out = strndup(printed + 1, n >= 2 ? n - 2 : 0);
	cJSON_free(printed);
	return out;
}

char *sim_api_error_json(const char *message, const char *type, const char *param, unsigned status)
{
	_cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
	cJSON *e;
	char *printed, *out;

	if (!root)
		return NULL;
	e = cJSON_AddObjectToObject(root, "error");
	if (!e || !cJSON_AddStringToObject(e, "message", message) || !cJSON_AddStringToObject(e, "type", type))
		return NULL;
	if (!(param ? cJSON_AddStringToObject(e, "param", param) : cJSON_AddNullToObject(e, "param")))
		return NULL;
	if (!cJSON_AddNumberToObject(e, "code", status))
		return NULL;
	printed = cJSON_PrintUnformatted(root);
	if (!printed)
		return NULL;
	out = strdup(printed);
	cJSON_free(printed);
	return out;
}

static int checked(int n, size_t size)
{
	if (n < 0 || (size_t)n >= size)
		return -ENOBUFS;
	return n;
}

int sim_api_format_token_chunk(char *buf, size_t size, const struct sim_api_stream *s, uint32_t token_id, bool first,
			       const char *finish_reason)
{
	char fr[16];

	if (finish_reason)
		snprintf(fr, sizeof(fr), "\"%s\"", finish_reason);
	else
		strcpy(fr, "null");

	if (s->kind == SIM_API_CHAT)
		return checked(snprintf(buf, size,
					"data: {\"id\":\"chatcmpl-%" PRIu64 "\",\"object\":\"chat.completion.chunk\","
					"\"created\":%" PRIu64 ",\"model\":\"%s\",\"choices\":[{\"index\":0,"
					"\"delta\":{%s\"content\":\" w%" PRIu32 "\"},\"logprobs\":null,"
					"\"finish_reason\":%s}]}\n\n",
					s->id, s->created, s->model_json, first ? "\"role\":\"assistant\"," : "",
					token_id, fr),
			       size);
	return checked(snprintf(buf, size,
				"data: {\"id\":\"cmpl-%" PRIu64 "\",\"object\":\"text_completion\",\"created\":%" PRIu64
				",\"model\":\"%s\",\"choices\":[{\"index\":0,\"text\":\" w%" PRIu32 "\","
				"\"logprobs\":null,\"finish_reason\":%s,\"stop_reason\":null}]}\n\n",
				s->id, s->created, s->model_json, token_id, fr),
		       size);
}

int sim_api_format_usage_chunk(char *buf, size_t size, const struct sim_api_stream *s, uint64_t prompt_tokens,
			       uint64_t completion_tokens)
{
	return checked(snprintf(buf, size,
				"data: {\"id\":\"%s%" PRIu64 "\",\"object\":\"%s\",\"created\":%" PRIu64
				",\"model\":\"%s\",\"choices\":[],\"usage\":{\"prompt_tokens\":%" PRIu64
				",\"total_tokens\":%" PRIu64 ",\"completion_tokens\":%" PRIu64 "}}\n\n",
				s->kind == SIM_API_CHAT ? "chatcmpl-" : "cmpl-", s->id,
				s->kind == SIM_API_CHAT ? "chat.completion.chunk" : "text_completion", s->created,
				s->model_json, prompt_tokens, prompt_tokens + completion_tokens, completion_tokens),
		       size);
}

char *sim_api_format_response(const struct sim_api_stream *s, const uint32_t *token_ids, size_t n_tokens,
			      const char *finish_reason, uint64_t prompt_tokens)
{
	size_t text_size = n_tokens * 12 + 1, len = 0;
	_cleanup_(freep) char *text = malloc(text_size);
	char *out = NULL;
	int n;

	if (!text)
		return NULL;
	text[0] = '\0';
	for (size_t i = 0; i < n_tokens; i++) {
		n = snprintf(text + len, text_size - len, " w%" PRIu32, token_ids[i]);
		if (n < 0 || (size_t)n >= text_size - len)
			return NULL;
		len += (size_t)n;
	}
	if (s->kind == SIM_API_CHAT)
		n = asprintf(&out,
			     "{\"id\":\"chatcmpl-%" PRIu64 "\",\"object\":\"chat.completion\",\"created\":%" PRIu64
			     ",\"model\":\"%s\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
			     "\"content\":\"%s\"},\"logprobs\":null,\"finish_reason\":\"%s\"}],\"usage\":{"
			     "\"prompt_tokens\":%" PRIu64 ",\"total_tokens\":%" PRIu64 ",\"completion_tokens\":%zu}}",
			     s->id, s->created, s->model_json, text, finish_reason, prompt_tokens,
			     prompt_tokens + n_tokens, n_tokens);
	else
		n = asprintf(&out,
			     "{\"id\":\"cmpl-%" PRIu64 "\",\"object\":\"text_completion\",\"created\":%" PRIu64
			     ",\"model\":\"%s\",\"choices\":[{\"index\":0,\"text\":\"%s\",\"logprobs\":null,"
			     "\"finish_reason\":\"%s\",\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":%" PRIu64
			     ",\"total_tokens\":%" PRIu64 ",\"completion_tokens\":%zu}}",
			     s->id, s->created, s->model_json, text, finish_reason, prompt_tokens,
			     prompt_tokens + n_tokens, n_tokens);
	if (n < 0)
		return NULL;
	return out;
}
