/* sse.h — an incremental Server-Sent Events parser and the reading of
 * OpenAI streaming chunks.
 *
 * The parser takes the response body in pieces split anywhere (even inside
 * a CRLF) and calls back once per event with the event's data: the values
 * of its `data:` lines joined by '\n'. Lines end in LF, CR or CRLF; comment
 * lines (starting with ':') and other fields (event, id, retry) are skipped;
 * an event ends at a blank line. One event (its data, or a single line) may
 * be at most max_event bytes: a larger one is an error, never a silent cut.
 *
 * probe_sse_parse_chunk() reads one event's data as an OpenAI stream chunk
 * without building a tree (the client reads one per token, so it must be
 * cheap): whether it carries content (`choices[0].text` for completions,
 * `choices[0].delta.content` or `.reasoning_content` for chat, non-empty),
 * the `usage` token counts wherever they appear, and error objects. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "metrics.h"

#define PROBE_SSE_MAX_EVENT_DEFAULT (1024u * 1024u)
#define PROBE_SSE_ERROR_MAX         256
#define PROBE_TEXT_MAX              (1024u * 1024u) /* generated text kept per request */

/* Called once per complete event with at least one data line. data is
 * NUL-terminated (len excludes the NUL) and valid only during the call. A
 * negative return stops the parser: probe_sse_feed returns it. */
typedef int (*probe_sse_event_fn)(const char *data, size_t len, void *userdata);

struct probe_sse_parser {
	size_t max_event;
	probe_sse_event_fn on_event;
	void *userdata;
	char *line; /* the current line when it spans feeds */
	size_t line_len, line_cap;
	char *data; /* the current event's data so far */
	size_t data_len, data_cap;
	bool has_data;   /* a data line was seen since the last dispatch */
	bool skip_lf;    /* the last byte seen was a CR ending a line */
	bool failed;     /* an error stopped the parser; further feeds fail */
	uint64_t events; /* dispatched so far */
};

/* Sets up an embedded parser (max_event 0 means PROBE_SSE_MAX_EVENT_DEFAULT). */
void probe_sse_parser_init(struct probe_sse_parser *p, size_t max_event, probe_sse_event_fn on_event, void *userdata);
/* Forgets any partial line or event so the parser can read a new stream;
 * keeps its buffers for reuse. */
void probe_sse_parser_reset(struct probe_sse_parser *p);
void probe_sse_parser_done(struct probe_sse_parser *p);

/* Parses len more bytes. Returns 0, -EMSGSIZE (an event or line over the cap,
 * err says how big), -ENOMEM, or the callback's negative return. After an
 * error the parser refuses more input until reset. */
int probe_sse_feed(struct probe_sse_parser *p, const char *buf, size_t len, struct error *err);
/* The stream ended. An unterminated last event is dispatched (servers that
 * close right after the last data line are common). */
int probe_sse_finish(struct probe_sse_parser *p, struct error *err);

/* What one chunk said. Counts are -1 when absent. */
struct probe_chunk {
	bool done;        /* the data was "[DONE]" */
	bool has_choices; /* a non-empty choices array */
	bool has_content; /* choices[0] carried non-empty text */
	const char *text; /* that text, JSON-escaped, inside the parsed data (valid while it is) */
	size_t text_len;
	int64_t completion_tokens;
	int64_t prompt_tokens;
	bool is_error;                   /* an "error" member, or "object": "error" */
	char error[PROBE_SSE_ERROR_MAX]; /* its message, when is_error */
};

/* Reads one event's data. Returns 0, or -EBADMSG when it is neither
 * "[DONE]" nor one valid JSON object (err names what was wrong). */
int probe_sse_parse_chunk(const char *data, size_t len, struct probe_chunk *ret, struct error *err);

/* ---- one streamed response ----
 *
 * The accounting the client does per response, kept here so that it can be
 * tested with made-up times: content chunks give TTFT (send → first) and
 * the inter-token gaps; usage gives the token counts; [DONE], error events
 * and malformed events are noted. The caller sets the time of each read. */
struct probe_stream {
	struct probe_sse_parser sse;
	struct probe_request_result *res; /* ttft_usec, itl_usec, n_itl are filled as chunks arrive */
	size_t itl_cap;
	uint64_t send_usec, now_usec, last_usec;
	uint32_t chunks;                        /* content chunks */
	int64_t usage_completion, usage_prompt; /* -1 when absent */
	bool done_seen;
	bool keep_text; /* append each chunk's text to res->text (vLLM's generated_texts) */
	size_t text_len;
	char *error; /* the first reason the stream is bad; owned */
};

void probe_stream_init(struct probe_stream *s, size_t max_event);
/* Starts a response for res (whose itl_usec it allocates, itl_hint gaps ahead). */
void probe_stream_begin(struct probe_stream *s, struct probe_request_result *res, uint64_t send_usec, size_t itl_hint);
/* Bytes that arrived at now_usec. Negative when the stream is bad (s->error says why). */
int probe_stream_feed(struct probe_stream *s, const char *buf, size_t len, uint64_t now_usec);
/* The body ended cleanly: a last unterminated event is read. */
int probe_stream_end(struct probe_stream *s);
/* Fills res's e2e and token counts (usage first, else content chunks;
 * input_len when the server sent no prompt_tokens). */
void probe_stream_fill(struct probe_stream *s, uint32_t input_len);
/* Sets s->error unless one is set (printf-style). */
void probe_stream_set_error(struct probe_stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void probe_stream_done(struct probe_stream *s);
