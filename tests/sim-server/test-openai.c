/* test-openai.c — goodput-sim's request parsing and response formatting
 * (sim/openai.h): the word rule agrees with the probe's, prompts map to ids,
 * client errors name the field, and the formatted chunks are valid JSON in
 * OpenAI's shape. */
#include <errno.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "openai.h"
#include "tests.h"
#include "workload.h"

static void parse_ok(enum sim_api_kind kind, const char *body, struct sim_api_request *r)
{
	struct error err = { 0 };
	int k = sim_api_parse_request(kind, body, strlen(body), r, &err);

	CHECK_MSG(k == 0, "%s: %s", body, error_str(&err, k));
}

static void parse_fails(enum sim_api_kind kind, const char *body, const char *needle)
{
	struct sim_api_request r;
	struct error err = { 0 };
	int k = sim_api_parse_request(kind, body, strlen(body), &r, &err);

	CHECK_MSG(k < 0, "accepted %s", body);
	CHECK_STR_CONTAINS(error_str(&err, k), needle);
}

static void test_word_rule(void)
{
	const char *texts[] = { "", "  ", "one", " one  two\tthree\nfour\r\n", "w12 w13", "a\vb\fc", "héllo wörld" };
	struct sim_api_request r;

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		char body[256];
		cJSON *s = cJSON_CreateString(texts[i]);
		char *js = cJSON_PrintUnformatted(s);
		uint32_t words = probe_count_words(texts[i]);

		CHECK_INT_EQ(sim_api_count_words(texts[i]), words);
		snprintf(body, sizeof(body), "{\"prompt\": %s, \"max_tokens\": 1}", js);
		if (words == 0)
			parse_fails(SIM_API_COMPLETIONS, body, "prompt");
		else {
			parse_ok(SIM_API_COMPLETIONS, body, &r);
			CHECK_INT_EQ(r.n_prompt, words);
			sim_api_request_done(&r);
		}
		cJSON_free(js);
		cJSON_Delete(s);
	}
	/* "w<id>" is the id itself (the probe's text form of token ids); other words hash. */
	CHECK_INT_EQ(sim_api_word_id("w1234", 5), 1234);
	CHECK_INT_EQ(sim_api_word_id("hello", 5), sim_api_word_id("hello", 5));
	CHECK(sim_api_word_id("hello", 5) >= PROBE_TOKEN_ID_MIN && sim_api_word_id("hello", 5) < PROBE_TOKEN_ID_MAX);
	parse_ok(SIM_API_COMPLETIONS, "{\"prompt\": \"w5 w6\"}", &r);
	CHECK_INT_EQ(r.prompt_ids[0], 5);
	CHECK_INT_EQ(r.prompt_ids[1], 6);
	CHECK(!r.has_max_tokens && !r.stream);
	sim_api_request_done(&r);
}

static void test_requests(void)
{
	struct sim_api_request r;

	parse_ok(SIM_API_COMPLETIONS,
		 "{\"model\": \"m\", \"prompt\": [1, 2, 3], \"max_tokens\": 9, \"stream\": true, \"ignore_eos\": true,"
		 " \"stream_options\": {\"include_usage\": true}, \"temperature\": 0.5}",
		 &r);
	CHECK_STR_EQ(r.model, "m");
	CHECK_INT_EQ(r.n_prompt, 3);
	CHECK(r.has_max_tokens && r.max_tokens == 9 && r.stream && r.include_usage && r.ignore_eos);
	sim_api_request_done(&r);
	parse_ok(SIM_API_COMPLETIONS, "{\"prompt\": [[7, 8]]}", &r);
	CHECK_INT_EQ(r.n_prompt, 2);
	sim_api_request_done(&r);
	parse_ok(SIM_API_CHAT,
		 "{\"messages\": [{\"role\": \"user\", \"content\": \"a b\"},"
		 " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"c\"}]}],"
		 " \"max_completion_tokens\": 4}",
		 &r);
	CHECK_INT_EQ(r.n_prompt, 3);
	CHECK_INT_EQ(r.max_tokens, 4);
	sim_api_request_done(&r);

	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\"", "invalid JSON");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\"} x", "unexpected data");
	parse_fails(SIM_API_COMPLETIONS, "{}", "prompt: missing");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\", \"max_tokens\": -1}",
		    "max_tokens must be at least 1, got -1");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\", \"max_tokens\": 1.5}", "max_tokens");
	/* Outside every integer type: refused before any cast (UBSan's
	 * float-cast-overflow fails the ASan build otherwise). */
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\", \"max_tokens\": 1e300}", "max_tokens: at most");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\", \"max_tokens\": -1e300}",
		    "max_tokens must be at least 1");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\", \"max_tokens\": 1e19}", "max_tokens: at most");
	parse_fails(SIM_API_CHAT,
		    "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"max_completion_tokens\": 9e18}",
		    "max_completion_tokens: at most");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": [1, 1e300]}", "prompt[1]");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": [1, -1e300]}", "prompt[1]");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": [1, -2]}", "prompt[1]");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": [\"a\", \"b\"]}", "one prompt");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\", \"stream\": \"yes\"}", "stream");
	parse_fails(SIM_API_COMPLETIONS, "{\"prompt\": \"a\", \"model\": 3}", "model");
	parse_fails(SIM_API_CHAT, "{\"messages\": []}", "messages");
	parse_fails(SIM_API_CHAT, "{\"messages\": [{\"content\": \"a\"}]}", "messages[0].role");
}

static cJSON *chunk_json(const char *chunk)
{
	size_t n = strlen(chunk);

	CHECK(strncmp(chunk, "data: ", 6) == 0 && n > 8 && strcmp(chunk + n - 2, "\n\n") == 0);
	return cJSON_ParseWithLength(chunk + 6, n - 8);
}

static void test_format(void)
{
	char *esc = sim_api_json_escape("my \"model\"");
	struct sim_api_stream s = { .kind = SIM_API_COMPLETIONS, .id = 5, .created = 100, .model_json = esc };
	char buf[1024];
	cJSON *j;
	uint32_t ids[] = { 1001, 1002 };
	char *resp, *e;

	CHECK(sim_api_format_token_chunk(buf, sizeof(buf), &s, 1234, true, NULL) > 0);
	j = chunk_json(buf);
	CHECK(j);
	CHECK_STR_EQ(cJSON_GetObjectItem(j, "model")->valuestring, "my \"model\"");
	CHECK_STR_EQ(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0)->child->next->valuestring, " w1234");
	cJSON_Delete(j);

	s.kind = SIM_API_CHAT;
	CHECK(sim_api_format_token_chunk(buf, sizeof(buf), &s, 7, true, "length") > 0);
	j = chunk_json(buf);
	CHECK(j);
	CHECK_STR_EQ(cJSON_GetObjectItem(j, "object")->valuestring, "chat.completion.chunk");
	cJSON_Delete(j);
	CHECK(sim_api_format_token_chunk(buf, 40, &s, 7, true, NULL) == -ENOBUFS);

	CHECK(sim_api_format_usage_chunk(buf, sizeof(buf), &s, 10, 2) > 0);
	j = chunk_json(buf);
	CHECK(j);
	CHECK_INT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "total_tokens")->valueint, 12);
	cJSON_Delete(j);

	resp = sim_api_format_response(&s, ids, 2, "length", 10);
	j = cJSON_Parse(resp);
	CHECK(j);
	CHECK_INT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens")->valueint, 2);
	cJSON_Delete(j);
	free(resp);

	e = sim_api_error_json("bad \"x\"", "BadRequestError", NULL, 400);
	j = cJSON_Parse(e);
	CHECK(j);
	CHECK_INT_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")->valueint, 400);
	CHECK_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message")->valuestring, "bad \"x\"");
	cJSON_Delete(j);
	free(e);
	free(esc);
}

int main(void)
{
	test_word_rule();
	test_requests();
	test_format();
	return 0;
}
