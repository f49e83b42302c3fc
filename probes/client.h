/* client.h — the probe's HTTP client: streaming OpenAI requests on the
 * caller's sd-event loop through libcurl's multi interface.
 *
 * One client serves one server (base URL + endpoint). Requests run
 * concurrently on kept-alive connections; each finishes exactly once through
 * its callback with a struct probe_request_result (send time, TTFT, every
 * inter-token gap, E2E, tokens, HTTP status, error text). Timestamps are
 * CLOCK_MONOTONIC µs taken in curl's write callback, when the bytes arrive;
 * the send time is when the request is written to its connection (curl's
 * pre-request callback), so time spent queued inside this process before
 * that (many requests started at once) and opening a connection is not
 * charged to the server. A request that never reached a connection keeps
 * the time it was handed in; so does every request with
 * ttft_include_connect, as vLLM's client counts.
 *
 * A request fails — with an error naming why — on connection errors, HTTP
 * status other than 200, an error object in the stream, a stream that is
 * not SSE/JSON, an event over the size cap, no content at all, or the
 * per-request timeout. Nothing here blocks or logs above debug level.
 *
 * Callbacks run from the event loop, never from inside probe_client_send().
 * They may send new requests and cancel others, but must not free the
 * client (defer that to another event source). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "error.h"
#include "macro.h"
#include "metrics.h"
#include "workload.h"

enum probe_prompt_format {
	PROBE_PROMPT_AUTO, /* token ids when the request has them (completions only), else text */
	PROBE_PROMPT_IDS,  /* token-id arrays; text-only requests are sent as text anyway */
	PROBE_PROMPT_TEXT, /* always text (the word rule of workload.h) */
};

struct probe_client_config {
	const char *base_url;       /* "http://127.0.0.1:8000"; http or https */
	const char *endpoint;       /* "/v1/completions" (default) or "/v1/chat/completions" */
	const char *model;          /* "model" field; NULL omits it */
	const char *const *headers; /* extra "Name: value" lines */
	size_t n_headers;
	const char *api_key; /* "Authorization: Bearer ..." when set; never logged */
	enum probe_prompt_format prompt_format;
	bool ignore_eos;               /* send "ignore_eos": true (only then: strict servers refuse unknown fields) */
	bool include_usage;            /* send stream_options.include_usage (default true) */
	bool insecure;                 /* https without certificate checks */
	bool ttft_include_connect;     /* send time = handed in, not written (see top) */
	bool fresh_connections;        /* a new connection per request (vLLM's client), no keep-alive */
	uint64_t request_timeout_usec; /* whole request; 0 = none (default 10 min) */
	uint64_t connect_timeout_usec; /* default 10 s */
	size_t max_event_bytes;        /* SSE event cap; 0 = PROBE_SSE_MAX_EVENT_DEFAULT */
	bool keep_text;                /* keep each request's generated text (res->text) */
};

/* Defaults: completions endpoint, AUTO prompts, usage on, timeouts as above. */
void probe_client_config_init(struct probe_client_config *cfg);

/* Whether the endpoint is a chat one (".../chat/completions"). */
bool probe_endpoint_is_chat(const char *endpoint);

struct probe_client;

/* Creates a client on event loop e (referenced). Copies everything in cfg.
 * err names a bad URL or endpoint. */
int probe_client_new(sd_event *e, const struct probe_client_config *cfg, struct probe_client **ret, struct error *err);
/* Cancels every request without calling back, frees everything. */
struct probe_client *probe_client_free(struct probe_client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct probe_client *, probe_client_free)

/* A finished streaming request. The callee owns r's contents (error,
 * itl_usec) from now on: the client forgets them. */
typedef void (*probe_client_stream_fn)(struct probe_client *c, struct probe_request_result *r, void *userdata);

/* Sends one streaming request for spec of w (its prompt, made from w now,
 * and output_len as max_tokens); result.index = spec->index. */
int probe_client_send(struct probe_client *c, const struct probe_workload *w, const struct probe_request_spec *spec,
		      probe_client_stream_fn done, void *userdata);

/* A finished GET: r < 0 on transport failure (status 0), else the status and
 * the body (NUL-terminated, valid during the call only). */
typedef void (*probe_client_get_fn)(struct probe_client *c, int r, long status, const char *body, size_t len,
				    const char *error, void *userdata);

/* GETs path (e.g. "/metrics") on the same server, body capped at max_bytes
 * (larger fails), with timeout_usec (0 = the request timeout). */
int probe_client_get(struct probe_client *c, const char *path, size_t max_bytes, uint64_t timeout_usec,
		     probe_client_get_fn done, void *userdata);

/* One piece of a relayed POST's answer as it arrives, with the answer's
 * status (the body of an error answer too); return false to end the
 * transfer (its done callback then reports an error). */
typedef bool (*probe_client_data_fn)(struct probe_client *c, long status, const char *data, size_t len, void *userdata);

/* POSTs body (len bytes of JSON) to path on the same server, as a proxy
 * forwards a request: without data, the answer (at most max_bytes, larger
 * fails) comes whole to done as a GET's does; with data, each piece goes to
 * data as it arrives and done (body "") tells the end. timeout_usec 0: the
 * request timeout. The body is copied. */
int probe_client_post(struct probe_client *c, const char *path, const char *body, size_t len, size_t max_bytes,
		      uint64_t timeout_usec, probe_client_data_fn data, probe_client_get_fn done, void *userdata);

/* Cancels every request sent with this userdata, without calling back. */
void probe_client_cancel(struct probe_client *c, void *userdata);

/* The errors of a stream cut at a load point's cap: the request can no
 * longer meet the SLA, or (bounds 0, 0) the point's time ran out (see
 * probe_client_cut_streams). */
#define PROBE_CUT_NO_TOKEN   "cut at the load point's cap: no first token within the TTFT bound"
#define PROBE_CUT_UNFINISHED "cut at the load point's cap: not finished within the SLA's bounds"
#define PROBE_CUT_TIME_UP    "cut at the load point's cap: still in flight when its time ran out"

/* Ends the streams sent with this userdata that can no longer meet an SLA
 * whose bounds per request are ttft_usec and tpot_usec (UINT64_MAX: none):
 * no first token ttft_usec after the send, or unfinished ttft_usec +
 * (max_tokens - 1) × tpot_usec after it (0, 0 cuts every one). Each is
 * taken off its connection, which curl closes — a server drops a request
 * whose client went away (llama-server cancels its task within a second,
 * queued or running; vLLM aborts it) — and finishes through its callback,
 * failed with PROBE_CUT_* as its error and res.cut set. Returns how many. */
size_t probe_client_cut_streams(struct probe_client *c, void *userdata, uint64_t now_usec, uint64_t ttft_usec,
				uint64_t tpot_usec);

/* Requests in flight. */
size_t probe_client_in_flight(const struct probe_client *c);

/* Streams sent but not yet handed to curl: the client starts a few per
 * wake-up of the loop (see client.c), so a caller with many requests due
 * at once keeps only a few waiting here and sends the rest as room comes. */
size_t probe_client_queued(const struct probe_client *c);

/* Called from the loop each time queued streams were started, while
 * fewer than PROBE_CLIENT_QUEUE_AHEAD wait; NULL: no one is told. The
 * callee may send (never free the client). */
#define PROBE_CLIENT_QUEUE_AHEAD 32
typedef void (*probe_client_room_fn)(struct probe_client *c, void *userdata);
void probe_client_set_room_fn(struct probe_client *c, probe_client_room_fn fn, void *userdata);

/* The URL requests go to (for messages). */
const char *probe_client_url(const struct probe_client *c);
