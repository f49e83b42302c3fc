/* test-sse.c — the SSE parser and the reading of OpenAI stream chunks on
 * hand-built streams: framing (CRLF, comments, multi-line data, splits at
 * every byte), the size cap, and the definitions the probe reports (TTFT to
 * the first content chunk, one gap per later content chunk, tokens from
 * usage wherever it appears, else from chunks). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sse.h"
#include "tests.h"

struct events {
	char buf[8192];
	size_t len;
	int n;
};

static int collect(const char *data, size_t len, void *userdata)
{
	struct events *e = userdata;

	CHECK(strlen(data) == len);
	CHECK(e->len + len + 2 < sizeof(e->buf));
	memcpy(e->buf + e->len, data, len);
	e->len += len;
	e->buf[e->len++] = '|';
	e->buf[e->len] = '\0';
	e->n++;
	return 0;
}

/* Feeds text in pieces cut at the given offsets; returns what was seen. */
static int feed_split(const char *text, size_t max_event, const size_t *cuts, size_t n_cuts, struct events *out)
{
	struct probe_sse_parser p;
	size_t pos = 0, len = strlen(text);
	int r = 0;

	memset(out, 0, sizeof(*out));
	probe_sse_parser_init(&p, max_event, collect, out);
	for (size_t i = 0; i <= n_cuts && r >= 0; i++) {
		size_t end = i < n_cuts ? cuts[i] : len;

		r = probe_sse_feed(&p, text + pos, end - pos, NULL);
		pos = end;
	}
	if (r >= 0)
		r = probe_sse_finish(&p, NULL);
	probe_sse_parser_done(&p);
	return r;
}

static const char framing[] = ": ping\r\n"
			      "data: {\"a\":1}\r\n\r\n"
			      "event: message\n"
			      "id: 7\n"
			      "data:no-space\n\n"
			      "data: line one\r"
			      "data: line two\r\r"
			      "retry: 10\n"
			      "data\n"
			      "\n"
			      "data: [DONE]\n\n";

static const char framing_expected[] = "{\"a\":1}|no-space|line one\nline two||[DONE]|";

static void test_framing(void)
{
	struct events e;
	size_t len = strlen(framing);

	CHECK_INT_EQ(feed_split(framing, 0, NULL, 0, &e), 0);
	CHECK_STR_EQ(e.buf, framing_expected);
	CHECK_INT_EQ(e.n, 5);

	/* Every single cut, and every pair of cuts, gives the same events. */
	for (size_t i = 0; i <= len; i++) {
		size_t cut[1] = { i };

		CHECK_INT_EQ(feed_split(framing, 0, cut, 1, &e), 0);
		CHECK_MSG(strcmp(e.buf, framing_expected) == 0, "cut at %zu: %s", i, e.buf);
	}
	for (size_t i = 0; i <= len; i++)
		for (size_t j = i; j <= len; j++) {
			size_t cut[2] = { i, j };

			CHECK_INT_EQ(feed_split(framing, 0, cut, 2, &e), 0);
			CHECK_MSG(strcmp(e.buf, framing_expected) == 0, "cuts at %zu, %zu: %s", i, j, e.buf);
		}
	/* One byte at a time. */
	{
		size_t cuts[sizeof(framing)];

		for (size_t i = 0; i < len; i++)
			cuts[i] = i;
		CHECK_INT_EQ(feed_split(framing, 0, cuts, len, &e), 0);
		CHECK_STR_EQ(e.buf, framing_expected);
	}
	/* An unterminated last event is still read. */
	CHECK_INT_EQ(feed_split("data: tail", 0, NULL, 0, &e), 0);
	CHECK_STR_EQ(e.buf, "tail|");
}

static void test_cap(void)
{
	struct probe_sse_parser p;
	struct events e = { 0 };
	struct error err = { 0 };
	char big[300];
	int r;

	/* An event of exactly the cap passes; one byte more is refused, also
	 * when it comes as several lines or in many pieces. */
	memset(big, 'x', sizeof(big));
	probe_sse_parser_init(&p, 100, collect, &e);
	CHECK_INT_EQ(probe_sse_feed(&p, "data: ", 6, NULL), 0);
	CHECK_INT_EQ(probe_sse_feed(&p, big, 100, NULL), 0);
	CHECK_INT_EQ(probe_sse_feed(&p, "\n\n", 2, NULL), 0);
	CHECK_INT_EQ(e.n, 1);
	r = probe_sse_feed(&p, "data: ", 6, &err);
	CHECK_INT_EQ(r, 0);
	for (int i = 0; i < 101 && r == 0; i++)
		r = probe_sse_feed(&p, big, 1, &err);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(probe_sse_feed(&p, "\n", 1, &err), -EMSGSIZE);
	CHECK_STR_CONTAINS(err.msg, "larger than the 100-byte limit");
	/* The parser stays failed until reset. */
	CHECK(probe_sse_feed(&p, "\n\n", 2, NULL) < 0);
	/* A line that never ends is refused too, a little past the cap. */
	probe_sse_parser_reset(&p);
	r = 0;
	for (int i = 0; i < 300 && r == 0; i++)
		r = probe_sse_feed(&p, big, 1, &err);
	CHECK_INT_EQ(r, -EMSGSIZE);
	probe_sse_parser_reset(&p);
	CHECK_INT_EQ(probe_sse_feed(&p, "data: a\ndata: b\n\n", 17, NULL), 0);
	CHECK_INT_EQ(e.n, 2);
	/* Many data lines adding up past the cap. */
	r = 0;
	for (int i = 0; i < 30 && r == 0; i++)
		r = probe_sse_feed(&p, "data: 0123456789\n", 17, &err);
	CHECK_INT_EQ(r, -EMSGSIZE);
	probe_sse_parser_done(&p);
}

static void test_chunks(void)
{
	struct probe_chunk c;
	struct error err = { 0 };
#define PARSE(s) probe_sse_parse_chunk((s), strlen(s), &c, &err)

	CHECK_INT_EQ(PARSE("[DONE]"), 0);
	CHECK(c.done);
	CHECK_INT_EQ(PARSE("{\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\" w1\",\"finish_reason\":null}],"
			   "\"usage\":null}"),
		     0);
	CHECK(c.has_choices && c.has_content && !c.done && !c.is_error);
	CHECK_INT_EQ(c.completion_tokens, -1);
	/* chat: the role-only first delta has no content; content counts */
	CHECK_INT_EQ(PARSE("{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}"), 0);
	CHECK(c.has_choices && !c.has_content);
	CHECK_INT_EQ(PARSE("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi \\\"x\\\" \\u00e9\"}}]}"), 0);
	CHECK(c.has_content);
	CHECK_INT_EQ(PARSE("{\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\",\"content\":null}}]}"), 0);
	CHECK(c.has_content);
	/* only choices[0] counts; text elsewhere does not */
	CHECK_INT_EQ(PARSE("{\"text\":\"x\",\"choices\":[{\"text\":\"\"},{\"text\":\"y\"}],\"x\":{\"text\":\"z\"}}"),
		     0);
	CHECK(!c.has_content);
	/* usage in a chunk of its own, and beside choices */
	CHECK_INT_EQ(PARSE("{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34,"
			   "\"total_tokens\":46}}"),
		     0);
	CHECK(!c.has_choices && !c.has_content);
	CHECK_INT_EQ(c.completion_tokens, 34);
	CHECK_INT_EQ(c.prompt_tokens, 12);
	CHECK_INT_EQ(PARSE("{\"choices\":[{\"text\":\"end\",\"finish_reason\":\"length\"}],"
			   "\"usage\":{\"completion_tokens\":5}}"),
		     0);
	CHECK(c.has_content);
	CHECK_INT_EQ(c.completion_tokens, 5);
	CHECK_INT_EQ(c.prompt_tokens, -1);
	/* usage nested elsewhere is not the response's */
	CHECK_INT_EQ(PARSE("{\"x\":{\"usage\":{\"completion_tokens\":9}}}"), 0);
	CHECK_INT_EQ(c.completion_tokens, -1);
	/* errors */
	CHECK_INT_EQ(PARSE("{\"error\":{\"message\":\"model overloaded\",\"code\":503}}"), 0);
	CHECK(c.is_error);
	CHECK_STR_EQ(c.error, "model overloaded");
	CHECK_INT_EQ(PARSE("{\"object\":\"error\",\"message\":\"bad things\",\"code\":400}"), 0);
	CHECK(c.is_error);
	CHECK_STR_EQ(c.error, "bad things");
	CHECK_INT_EQ(PARSE("{\"error\":null,\"message\":\"fine\",\"choices\":[{\"text\":\"a\"}]}"), 0);
	CHECK(!c.is_error && c.has_content);
	/* garbage */
	CHECK_INT_EQ(PARSE("hello"), -EBADMSG);
	CHECK_STR_CONTAINS(err.msg, "not a JSON object");
	CHECK_INT_EQ(PARSE("{\"choices\":[{\"text\":\"a\"}]"), -EBADMSG);
	CHECK_INT_EQ(PARSE("{\"a\":1} x"), -EBADMSG);
	CHECK_STR_CONTAINS(err.msg, "trailing");
	CHECK_INT_EQ(PARSE("{\"a\":01}"), -EBADMSG);
	CHECK_INT_EQ(PARSE("{\"a\":\"\\q\"}"), -EBADMSG);
	CHECK_INT_EQ(PARSE("{\"a\":tru}"), -EBADMSG);
	CHECK_INT_EQ(PARSE("[DONE] x"), -EBADMSG);
	{
		char deep[300];

		memset(deep, '[', sizeof(deep));
		deep[0] = '{';
		CHECK_INT_EQ(probe_sse_parse_chunk(deep, sizeof(deep), &c, &err), -EBADMSG);
	}
#undef PARSE
}

/* ---- whole responses with made-up arrival times ---- */

struct piece {
	const char *bytes;
	uint64_t at_usec;
};

static int run_stream(const struct piece *pieces, size_t n, struct probe_request_result *res, char **ret_error)
{
	struct probe_stream s;
	int r = 0;

	memset(res, 0, sizeof(*res));
	probe_stream_init(&s, 4096);
	probe_stream_begin(&s, res, 1000, 4);
	for (size_t i = 0; i < n && r >= 0; i++)
		r = probe_stream_feed(&s, pieces[i].bytes, strlen(pieces[i].bytes), pieces[i].at_usec);
	if (r >= 0)
		r = probe_stream_end(&s);
	probe_stream_fill(&s, 77);
	*ret_error = s.error ? strdup(s.error) : NULL;
	probe_stream_done(&s);
	return r;
}

#define TOK(t)      "data: {\"choices\":[{\"index\":0,\"text\":\"" t "\"}]}\n\n"
#define USAGE(p, c) "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":" #p ",\"completion_tokens\":" #c "}}\n\n"

static void test_streams(void)
{
	struct probe_request_result res;
	char *error;

	/* one token */
	{
		struct piece p[] = { { TOK("a"), 1500 }, { USAGE(10, 1), 1600 }, { "data: [DONE]\n\n", 1600 } };

		CHECK_INT_EQ(run_stream(p, ELEMENTSOF(p), &res, &error), 0);
		CHECK(!error);
		CHECK_INT_EQ(res.ttft_usec, 500);
		CHECK_INT_EQ(res.e2e_usec, 500);
		CHECK_INT_EQ(res.n_itl, 0);
		CHECK_INT_EQ(res.output_tokens, 1);
		CHECK_INT_EQ(res.input_tokens, 10);
		CHECK(probe_request_tpot_usec(&res) < 0 || res.output_tokens <= 1);
		probe_request_result_done(&res);
	}
	/* many tokens, usage absent: tokens counted from chunks, prompt from the workload */
	{
		struct piece p[] = { { TOK("a"), 2000 },
				     { TOK("b"), 2100 },
				     { TOK("c") TOK("d"), 2300 },
				     { TOK("e"), 2700 },
				     { "data: [DONE]\n\n", 2800 } };

		CHECK_INT_EQ(run_stream(p, ELEMENTSOF(p), &res, &error), 0);
		CHECK(!error);
		CHECK_INT_EQ(res.ttft_usec, 1000);
		CHECK_INT_EQ(res.e2e_usec, 1700);
		CHECK_INT_EQ(res.n_itl, 4);
		CHECK_INT_EQ(res.itl_usec[0], 100);
		CHECK_INT_EQ(res.itl_usec[1], 200);
		CHECK_INT_EQ(res.itl_usec[2], 0); /* coalesced in one read */
		CHECK_INT_EQ(res.itl_usec[3], 400);
		CHECK_INT_EQ(res.output_tokens, 5);
		CHECK_INT_EQ(res.input_tokens, 77);
		res.success = true;
		CHECK(fabs(probe_request_tpot_usec(&res) - 700.0 / 4) < 1e-9);
		probe_request_result_done(&res);
	}
	/* usage beside choices in the last chunk (more tokens than chunks: coalesced server side) */
	{
		struct piece p[] = { { TOK("ab"), 1100 },
				     { "data: {\"choices\":[{\"text\":\"cd\",\"finish_reason\":\"length\"}],"
				       "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n",
				       1300 } };

		CHECK_INT_EQ(run_stream(p, ELEMENTSOF(p), &res, &error), 0);
		CHECK(!error);
		CHECK_INT_EQ(res.output_tokens, 4);
		CHECK_INT_EQ(res.input_tokens, 3);
		CHECK_INT_EQ(res.n_itl, 1);
		CHECK_INT_EQ(res.e2e_usec, 300);
		probe_request_result_done(&res);
	}
	/* empty chunks (role delta, empty text, keep-alive comments) do not count;
	 * [DONE] missing is fine */
	{
		struct piece p[] = { { "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n", 1050 },
				     { ": keep-alive\n\n", 1070 },
				     { "data: {\"choices\":[{\"delta\":{\"content\":\"\"}}]}\n\n", 1080 },
				     { "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n", 1200 },
				     { "data: {\"choices\":[{\"delta\":{\"content\":\"y\"}}]}", 1250 } };

		CHECK_INT_EQ(run_stream(p, ELEMENTSOF(p), &res, &error), 0);
		CHECK(!error);
		CHECK_INT_EQ(res.ttft_usec, 200);
		CHECK_INT_EQ(res.output_tokens, 2);
		CHECK_INT_EQ(res.e2e_usec, 250);
		probe_request_result_done(&res);
	}
	/* nothing after [DONE] counts */
	{
		struct piece p[] = { { TOK("a") "data: [DONE]\n\n" TOK("b"), 1100 } };

		CHECK_INT_EQ(run_stream(p, ELEMENTSOF(p), &res, &error), 0);
		CHECK_INT_EQ(res.output_tokens, 1);
		probe_request_result_done(&res);
	}
	/* garbage, an error event, an oversized event */
	{
		struct piece p[] = { { TOK("a"), 1100 }, { "data: <html>oops</html>\n\n", 1200 } };

		CHECK(run_stream(p, ELEMENTSOF(p), &res, &error) < 0);
		CHECK_STR_CONTAINS(error, "not a JSON object");
		free(error);
		probe_request_result_done(&res);
	}
	{
		struct piece p[] = { { TOK("a"), 1100 },
				     { "data: {\"error\":{\"message\":\"engine died\"}}\n\n", 1200 } };

		CHECK(run_stream(p, ELEMENTSOF(p), &res, &error) < 0);
		CHECK_STR_CONTAINS(error, "engine died");
		free(error);
		probe_request_result_done(&res);
	}
	{
		static char big[6000];
		struct piece p[] = { { big, 1100 } };

		memset(big, 'x', sizeof(big) - 1);
		memcpy(big, "data: ", 6);
		CHECK(run_stream(p, ELEMENTSOF(p), &res, &error) == -EMSGSIZE);
		CHECK_STR_CONTAINS(error, "larger than the 4096-byte limit");
		free(error);
		probe_request_result_done(&res);
	}
}

/* A realistic stream cut at every byte: same tokens, same counts. */
static void test_stream_every_split(void)
{
	const char *text = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n"
			   "data: {\"choices\":[{\"delta\":{\"content\":\"He\"}}]}\r\n\r\n"
			   "data: {\"choices\":[{\"delta\":{\"content\":\"llo\"}}]}\r\n\r\n"
			   "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n"
			   "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\r\n\r\n"
			   "data: [DONE]\r\n\r\n";
	size_t len = strlen(text);

	for (size_t i = 0; i <= len; i++) {
		struct probe_request_result res = { 0 };
		struct probe_stream s;

		probe_stream_init(&s, 0);
		probe_stream_begin(&s, &res, 0, 0);
		CHECK_INT_EQ(probe_stream_feed(&s, text, i, 10), 0);
		CHECK_INT_EQ(probe_stream_feed(&s, text + i, len - i, 20), 0);
		CHECK_INT_EQ(probe_stream_end(&s), 0);
		probe_stream_fill(&s, 1);
		CHECK(!s.error);
		CHECK_INT_EQ(s.chunks, 2);
		CHECK(s.done_seen);
		CHECK_INT_EQ(res.output_tokens, 2);
		CHECK_INT_EQ(res.input_tokens, 5);
		CHECK_INT_EQ(res.n_itl, 1);
		probe_stream_done(&s);
		probe_request_result_done(&res);
	}
}

int main(void)
{
	test_framing();
	test_cap();
	test_chunks();
	test_streams();
	test_stream_every_split();
	return 0;
}
