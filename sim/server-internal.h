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

/* A Prometheus histogram with fixed upper bounds (seconds). */
struct sim_histogram {
	const double *bounds;
	size_t n_bounds;
	uint64_t counts[32]; /* per bucket (non-cumulative); [n_bounds] = +Inf */
	uint64_t count;
	double sum;
};

void sim_histogram_init(struct sim_histogram *h, const double *bounds, size_t n_bounds);
void sim_histogram_observe(struct sim_histogram *h, double v);

enum sim_route {
	SIM_ROUTE_UNKNOWN,
	SIM_ROUTE_HEALTH,
	SIM_ROUTE_MODELS,
	SIM_ROUTE_METRICS,
	SIM_ROUTE_VERSION,
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
	uint64_t id;
	uint64_t arrival_usec;
	uint32_t n_prompt, max_tokens, n_cached;
	struct sim_api_request api;
	struct sim_api_stream fmt;
	struct sim_token *tokens;
	uint32_t n_tokens, n_sent, cap_tokens;
	const char *finish_reason;

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
	struct sim_engine *engine; /* NULL when the start-up checks failed */
	struct error startup_err;
	int startup_r;
	const struct sim_engine_info *info;
	char *served_name;
	char *served_name_json; /* JSON-escaped */
	uint32_t max_model_len;

	struct MHD_Daemon *mhd;
	uint16_t port;
	sd_event_source *mhd_io, *mhd_timer, *pacer, *load_timer;
	bool ready, hung, stopping, need_run;
	uint64_t start_usec, load_usec;
	uint64_t pacer_last_usec; /* when the pacer last ran */

	/* in-flight completions by id */
	struct sim_req **buckets;
	struct sim_req *all;
	size_t n_buckets;
	/* streams waiting for a future deadline (fixed-ITL mode, non-streaming finish) */
	struct sim_req **heap;
	size_t heap_len, heap_cap;

	/* connections and their deadlines (server-conns.c) */
	struct sim_conn_list waiting[_SIM_CONN_WAITING_MAX];
	unsigned n_conns, conn_limit, conn_slack;
	unsigned n_closing;    /* shut down, not yet closed by MHD */
	unsigned reap_stalled; /* runs of conn_reap without progress */
	sd_event_source *conn_timer, *conn_reap;
	size_t body_bytes; /* request bodies buffered, all connections */
	uint64_t conns_closed[_SIM_CLOSE_MAX];

	uint64_t next_id;
	uint64_t n_completion_requests; /* counted for the crash/hang faults */
	FILE *trace;

	/* metrics */
	struct sim_histogram ttft, tpot, e2e, lateness, queue_time;
	uint64_t http_responses[6]; /* by status class 1xx..5xx ([0] unused) */
	uint64_t req_finished_length, req_aborted, faults_http500, faults_bad_sse;
	uint64_t fixed_generation_tokens, fixed_prompt_tokens;
};

/* Renders /metrics (Prometheus text) and /v1/models into new strings. */
char *sim_server_render_metrics(struct sim_server *s);
char *sim_server_render_models(struct sim_server *s);
/* Creates the histograms with their buckets. */
void sim_server_metrics_init(struct sim_server *s);

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

/* ---- server.c ---- */

/* Runs MHD once (twice after a resume) and re-arms the timers. */
void sim_server_run_mhd(struct sim_server *s);
