/* server-internal.h — the state shared by server.c (HTTP, loop, lifecycle),
 * server-stream.c (in-flight requests, pacing, SSE) and server-metrics.c
 * (histograms, /metrics, /v1/models). Not a public API. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <microhttpd.h>
#include <systemd/sd-event.h>

#include "engine.h"
#include "openai.h"
#include "server.h"

/* A Prometheus histogram with fixed upper bounds. */
struct sim_histogram {
	double *bounds; /* owned */
	size_t n_bounds;
	uint64_t *counts; /* per bucket (non-cumulative); [n_bounds] = +Inf; owned */
	uint64_t count;
	double sum;
};

/* Copies the bounds; -ENOMEM. sim_histogram_done frees (and accepts a zeroed one). */
int sim_histogram_init(struct sim_histogram *h, const double *bounds, size_t n_bounds);
void sim_histogram_done(struct sim_histogram *h);
void sim_histogram_observe(struct sim_histogram *h, double v);
/* How each engine's Prometheus library writes a number:
 *  - Python's prometheus_client (vLLM, SGLang, TensorRT-LLM;
 *    floatToGoString): repr() — shortest, positional from 1e-4 to 1e16,
 *    integral values with ".0" ("2560.0", counts too) — except that more
 *    than 6 digits before the point take Go's exponent form ("1e+06");
 *  - Rust's metrics-exporter-prometheus (TGI): f64's Display — shortest,
 *    always positional, integral values bare ("150");
 *  - llama.cpp: a C++ stream's default, 6 significant digits ("%g"). */
enum sim_number_style {
	SIM_NUMBER_PYTHON,
	SIM_NUMBER_RUST,
	SIM_NUMBER_CXX,
};

const char *sim_metric_number(double v, enum sim_number_style style, char *buf, size_t size);

/* "name_bucket{labels,le="…"} N" lines, _sum and _count; labels may be "" (no braces then). */
void sim_histogram_put(FILE *f, const char *name, const char *help, const char *labels, const struct sim_histogram *h);
/* As Rust's metrics-exporter-prometheus writes it (TGI): no HELP, numbers
 * in f64's Display form ("150", "0.00015"). */
void sim_histogram_put_rust(FILE *f, const char *name, const char *labels, const struct sim_histogram *h);

/* What the server counts about finished requests and steps, in no
 * engine's names: each dialect renders it its own way (server-metrics*.c). */
struct sim_request_metrics {
	struct sim_histogram ttft, tpot, e2e, queue, inference, prefill, decode, prompt_len, gen_len, mean_tpot;
	uint64_t finished, prompt_tokens, generation_tokens;
	double prefill_seconds, decode_seconds;
	uint64_t decode_steps, busy_slots; /* llama.cpp: decode calls and the slots busy in them */
	uint32_t max_step_tokens;
};

/* TensorRT-LLM's per-iteration statistics since the last /metrics request. */
struct sim_iteration {
	uint64_t iter, usec, end_usec;
	uint32_t running, waiting, scheduled, ctx_requests, gen_requests, ctx_tokens, completed;
	uint64_t used_blocks, max_blocks;
};
#define SIM_ITERATIONS_MAX 1000

enum sim_route {
	SIM_ROUTE_UNKNOWN,
	SIM_ROUTE_HEALTH,
	SIM_ROUTE_MODELS,
	SIM_ROUTE_METRICS,
	SIM_ROUTE_PROMETHEUS, /* TensorRT-LLM's Prometheus text (its /metrics is JSON) */
	SIM_ROUTE_VERSION,
	SIM_ROUTE_PROPS, /* llama.cpp's */
	SIM_ROUTE_COMPLETIONS,
	SIM_ROUTE_CHAT,
};

struct sim_token {
	uint32_t id;
	uint64_t sched_usec; /* engine's step end (the deadline) */
	uint64_t sent_usec;  /* when the chunk was handed to MHD; 0 = not yet */
};

struct sim_req {
	struct sim_server *server;
	struct MHD_Connection *conn;
	enum sim_route route;
	bool method_ok;

	/* body */
	char *body;
	size_t body_len, body_cap;
	bool too_large;

	/* the completion */
	bool handled;   /* the final access-handler call ran */
	bool in_engine; /* submitted and not finished/aborted */
	bool finished;  /* the last token is known */
	bool aborted;   /* client went away or fault: stop sending */
	bool suspended;
	bool done_sent; /* [DONE] (or the full JSON) handed out */
	bool bad_sse;   /* fault: send one malformed chunk mid-stream and end */
	bool counted;   /* in server->in_flight */
	uint64_t id;
	uint64_t arrival_usec;
	uint64_t scheduled_usec; /* its first step's start (vLLM's scheduled_ts); 0 = not yet */
	uint32_t n_prompt, max_tokens, n_cached;
	struct sim_api_request api;
	struct sim_api_stream fmt;
	struct sim_token *tokens;
	uint32_t n_tokens, n_sent, cap_tokens;
	const char *finish_reason;

	bool kv_export;          /* a prefill for a decode worker: the answer carries kv_transfer_params */
	struct sim_relay *relay; /* the proxy's: the request on its way through the workers */

	/* pacing */
	size_t heap_idx;   /* index in server->heap, SIZE_MAX when not queued */
	uint64_t deadline; /* heap key */
	sd_event_source *rdhup;
	struct sim_req *hash_next;
	struct sim_req *all_prev, *all_next; /* every live request, for shutdown */
};

/* A connection's phase (server-conns.c); the first three wait for the
 * client and have a deadline. */
enum sim_conn_phase {
	SIM_CONN_IDLE,    /* before a request line */
	SIM_CONN_HEADERS, /* request line in, headers not complete */
	SIM_CONN_BODY,    /* headers in, body not complete */
	_SIM_CONN_WAITING_MAX,
	SIM_CONN_ACTIVE = _SIM_CONN_WAITING_MAX, /* being answered */
	SIM_CONN_CLOSING,                        /* shut down, MHD has yet to close it */
};

/* Why the server closed a connection (counted in /metrics). */
enum sim_conn_close {
	SIM_CLOSE_IDLE,
	SIM_CLOSE_HEADERS,
	SIM_CLOSE_BODY,
	SIM_CLOSE_EVICTED,     /* idle, closed to make room near the connection limit */
	SIM_CLOSE_BUFFER_FULL, /* its body would pass --max-buffered-bytes */
	SIM_CLOSE_OVER_LIMIT,  /* past --max-connections: answered 503, then closed */
	_SIM_CLOSE_MAX,
};

struct sim_conn;
struct sim_conn_list {
	struct sim_conn *head, *tail; /* in deadline order */
};

struct sim_server {
	sd_event *event;
	struct sim_server_config cfg;
	struct sim_engine_config ecfg;
	struct sim_engine *engine; /* NULL when the start-up checks failed, and for a proxy */
	struct sim_router *router; /* the proxy's workers (NULL: an engine's server) */
	struct error startup_err;
	int startup_r;
	struct sim_startup_check check; /* why it does not start (check.cause) */
	const struct sim_engine_info *info;
	struct sim_startup_phases startup_phases; /* the start-up model's, when it is on */
	char *served_name;
	char *served_name_json; /* JSON-escaped */
	uint32_t max_model_len;

	struct MHD_Daemon *mhd; /* NULL until it serves: llama.cpp at once, the others once loaded */
	int listen_fd;          /* bound, handed to MHD when it serves */
	bool ipv6;
	uint16_t port;
	sd_event_source *mhd_io, *mhd_timer, *pacer, *load_timer;
	bool ready, hung, stopping, need_run;
	uint64_t start_usec, load_usec;
	struct sim_timeline timeline; /* the start-up's phases (server-startup.c) */
	int phase;                    /* the next phase to end */
	char url[128];                /* where it serves, for the engine's log lines */
	uint64_t pacer_last_usec;     /* when the pacer last ran */

	/* in-flight completions by id */
	struct sim_req **buckets;
	struct sim_req *all;
	size_t n_buckets;
	/* streams waiting for a future deadline (fixed-ITL mode, non-streaming finish) */
	struct sim_req **heap;
	size_t heap_len, heap_cap;

	/* connections and their deadlines (server-conns.c) */
	struct sim_conn_list waiting[_SIM_CONN_WAITING_MAX];
	/* conn_limit: --max-connections (as the open-file limit allows); a
	 * request on a connection past it is answered 503. MHD accepts up to
	 * conn_limit + conn_overflow, so that it can say so: only past that is
	 * a connection closed unanswered. */
	unsigned n_conns, conn_limit, conn_slack, conn_overflow;
	unsigned n_closing;    /* shut down, not yet closed by MHD */
	unsigned reap_stalled; /* runs of conn_reap without progress */
	sd_event_source *conn_timer, *conn_reap;
	size_t body_bytes; /* request bodies buffered, all connections */
	uint64_t conns_closed[_SIM_CLOSE_MAX];

	uint64_t next_id;
	uint64_t n_completion_requests; /* counted for the crash/hang faults */
	FILE *trace;

	/* metrics */
	struct sim_request_metrics m;
	struct sim_histogram lateness;
	uint32_t in_flight;               /* completions accepted and not yet answered (TGI's concurrency limit) */
	struct sim_iteration *iterations; /* ring of SIM_ITERATIONS_MAX (TensorRT-LLM) */
	size_t iter_head, iter_len;
	uint64_t iter_count;
	uint64_t http_responses[6]; /* by status class 1xx..5xx ([0] unused) */
	uint64_t req_finished_length, req_aborted, faults_http500, faults_bad_sse;
	uint64_t fixed_generation_tokens, fixed_prompt_tokens;
};

/* Renders vLLM's /metrics (Prometheus text, with goodput-sim's own) and
 * /v1/models into new strings. */
char *sim_server_render_metrics(struct sim_server *s);
char *sim_server_render_models(struct sim_server *s);
/* llama.cpp's GET /props: its slots, each slot's context, the model file
 * and the build (the default generation settings as b4748 has them). */
char *sim_server_render_props(struct sim_server *s);
/* The dialect's metrics for /metrics (prometheus_route: TensorRT-LLM's
 * /prometheus/metrics): the body, its content type, and *ret_status 200;
 * or a status (404, 501: not enabled) with the engine's message as body. */
char *sim_server_render_dialect_metrics(struct sim_server *s, bool prometheus_route, unsigned *ret_status,
					const char **ret_type);
/* server-metrics-engines.c: SGLang's, TGI's, llama.cpp's and TensorRT-LLM's pages. */
char *sim_server_render_engine_metrics(struct sim_server *s, bool prometheus_route, unsigned *ret_status,
				       const char **ret_type);
/* Creates the histograms with the dialect's buckets; -ENOMEM. */
int sim_server_metrics_init(struct sim_server *s);
void sim_server_metrics_done(struct sim_server *s);
/* A completion's last token went out: its latencies and lengths are counted. */
void sim_server_observe_finished(struct sim_server *s, const struct sim_req *r);
/* vLLM's 1-2-5 buckets up to max ([1, 2, 5, 10, ...]); returns how many. */
size_t sim_buckets_1_2_5(double *ret, size_t max_n, double max);

/* ---- server-startup.c: the start-up in the engine's way ---- */

/* Plays the start-up out: the dialect's log lines at each phase's end, the
 * engine's failure where it would fail, and serving once ready. */
int sim_server_startup_begin(struct sim_server *s, const char *host, struct error *err);
/* A request the engine refuses although the OpenAI parser took it (llama.cpp's
 * best_of, TGI's input limit and concurrency limit): the status and message;
 * 0 when it is accepted. */
unsigned sim_server_dialect_refuses(struct sim_server *s, struct sim_req *r, char *msg, size_t size);

/* ---- server-stream.c: in-flight requests and pacing ---- */

/* Adds r (by r->id) to / removes it from the in-flight index the engine's
 * callbacks look requests up in. Removing an unindexed request is a no-op. */
void sim_req_index(struct sim_server *s, struct sim_req *r);
void sim_req_unindex(struct sim_server *s, struct sim_req *r);
/* Takes r off the deadline heap; a no-op when it is not queued. */
void sim_req_heap_remove(struct sim_server *s, struct sim_req *r);
/* Suspends r's connection (and watches for the client going away) / resumes
 * it and marks the server as needing an MHD run. Both are idempotent. */
void sim_req_suspend(struct sim_req *r);
void sim_req_resume(struct sim_req *r);
/* When suspended r should next wake (0 = now), UINT64_MAX when only the
 * engine can make progress for it. */
uint64_t sim_req_next_due(const struct sim_req *r);
/* Wakes suspended r now when due, or queues it on the heap for later. */
void sim_req_schedule(struct sim_req *r, uint64_t now);
/* Appends a token scheduled at sched_usec; -E2BIG past max_tokens, -ENOMEM. */
int sim_req_push_token(struct sim_req *r, uint64_t sched_usec);
/* Stamps token i of r as sent at now and feeds the latency histograms. */
void sim_req_observe_token(struct sim_server *s, struct sim_req *r, uint32_t i, uint64_t now);
/* MHD's content reader for an SSE stream (cls is the struct sim_req). */
ssize_t sim_req_stream_reader(void *cls, uint64_t pos, char *buf, size_t max);
/* The engine's callbacks (userdata is the struct sim_server). */
void sim_server_engine_token(void *userdata, uint64_t req_id, uint32_t index, uint64_t time_usec, bool last);
void sim_server_engine_finished(void *userdata, uint64_t req_id, uint64_t time_usec, uint32_t n_prompt,
				uint32_t n_output, uint32_t n_cached);
void sim_server_engine_scheduled(void *userdata, uint64_t req_id, uint64_t time_usec);
void sim_server_engine_step(void *userdata, uint64_t start_usec, uint64_t end_usec, const struct sim_batch *b);

/* ---- openai-llamacpp.c: llama.cpp's streaming shape ---- */

/* One generated token as llama.cpp streams it (finish_reason null; a chat's
 * first token comes as two events, the role and then the content). */
int sim_api_llamacpp_token_chunk(char *buf, size_t size, const struct sim_api_stream *s, uint32_t token_id, bool first);
/* The last event before [DONE]: an empty choice with the finish reason and,
 * in the same chunk, usage. */
int sim_api_llamacpp_final_chunk(char *buf, size_t size, const struct sim_api_stream *s, const char *finish_reason,
				 uint64_t prompt_tokens, uint64_t completion_tokens);

/* ---- server-conns.c: connections and their deadlines ---- */

/* The timer and the eviction threshold (limit: MHD's connection limit). */
int sim_conns_init(struct sim_server *s, unsigned limit);
/* MHD_OPTION_NOTIFY_CONNECTION: a connection starts (idle) or closes. */
void sim_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		      enum MHD_ConnectionNotificationCode toe);
/* MHD_OPTION_URI_LOG_CALLBACK: a request line arrived (headers phase). */
void *sim_conns_uri_logged(void *cls, const char *uri, struct MHD_Connection *conn);
/* The access handler's view: body (headers complete), active (answering),
 * idle (the request completed). */
void sim_conns_set_phase(struct sim_server *s, struct MHD_Connection *conn, enum sim_conn_phase p);

/* ---- server-router.c: the proxy of a disaggregated deployment ---- */

struct sim_router;
struct sim_relay;
/* Reaches the workers of rc (s->router set even on failure: free it with the server). */
int sim_router_new(struct sim_server *s, const struct sim_router_config *rc, struct error *err);
void sim_router_free(struct sim_router *rt);
/* A completion for the workers: relayed (the connection suspended until the answer comes). */
enum MHD_Result sim_router_forward(struct sim_req *r, const char *url);
/* The access handler again for a relayed request: queues its response once the answer began. */
enum MHD_Result sim_router_resumed(struct sim_req *r);
/* The client's request ended (answered or gone): its relay stops. */
void sim_router_request_done(struct sim_req *r);
/* The proxy's health answer (vLLM's toy proxy: its JSON; SGLang's router: empty). */
char *sim_router_render_health(struct sim_server *s);
/* The lines the proxy prints when it serves. */
void sim_router_print_startup(struct sim_server *s);

/* ---- server.c ---- */

/* Runs MHD from the loop soon (never inside another library's callback). */
void sim_server_wake(struct sim_server *s);
/* An error answer in the dialect's shape. */
enum MHD_Result sim_server_queue_error(struct sim_req *r, unsigned status, const char *type, const char *message);

/* Runs MHD once (twice after a resume) and re-arms the timers. */
void sim_server_run_mhd(struct sim_server *s);
/* Starts serving on the bound socket (listen + MHD on the loop). */
int sim_server_start_mhd(struct sim_server *s, struct error *err);
