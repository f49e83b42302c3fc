/* client-internal.h — the state shared by client.c (pool, sending,
 * completion, lifetime), client-poll.c (curl ↔ sd-event) and
 * client-transfer.c (request body, write callback, a transfer's end).
 * Not a public API: client.h is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <systemd/sd-event.h>

#include "client.h"
#include "sse.h"

enum req_kind {
	REQ_STREAM,
	REQ_GET,
	REQ_POST /* a body of the caller's; the answer collected or relayed as it comes */
};

struct req {
	struct probe_client *client;
	struct req *prev, *next; /* active list, or next in the idle list */
	CURL *easy;
	enum req_kind kind;
	bool configured; /* the handle holds the options of a stream request already */
	bool active;     /* in the active list: handed to curl, or queued to be */
	bool queued;     /* waits in the start queue, not yet on the multi */
	struct req *start_next;
	void *userdata;
	probe_client_stream_fn stream_done;
	probe_client_get_fn get_done;   /* GET, POST */
	probe_client_data_fn post_data; /* POST relayed: each piece of the answer */

	char *body; /* request body (POST) */
	size_t body_len, body_cap;
	char *resp; /* GET body, or the start of a non-200 body */
	size_t resp_len, resp_cap, resp_max;

	struct probe_stream st; /* SSE reading and token timing; st.error is the request's error */
	struct probe_request_result res;
	uint32_t spec_input_len;
	uint32_t spec_output_len; /* max_tokens asked (for the cut at a load point's cap) */
	long status;
	char curl_err[CURL_ERROR_SIZE];
};

/* One watched socket in the client's epoll set. curl_multi_cleanup does not
 * always report the sockets it closes, so the client keeps its own list to
 * free what is left. */
struct sock {
	int fd;
	uint32_t events; /* as registered */
	struct sock *prev, *next;
};

struct probe_client {
	sd_event *event;
	CURLM *multi;
	/* client-poll.c: curl's sockets in a private epoll set, which is one
	 * sd-event source; curl's timer */
	int epoll_fd;
	sd_event_source *sockets_source, *timer;
	struct sock *socks;
	size_t n_socks;
	struct epoll_event *ready; /* one epoll_wait's worth */
	size_t ready_cap;
	bool in_batch, timer_pending; /* curl's timer requests wait for the batch's end */
	long timer_ms;
	/* client.c: streams waiting to be handed to curl, a slice per wake-up */
	struct req *start_head, *start_tail;
	size_t n_queued;
	sd_event_source *start_source;
	probe_client_room_fn room_fn; /* told when queued streams were started */
	void *room_userdata;
	char *url, *base_url;
	char *model;
	bool chat;
	struct probe_client_config cfg; /* strings point into this struct's copies or are NULL */
	struct curl_slist *headers;     /* POST: JSON in, SSE out, auth, extra */
	struct curl_slist *get_headers; /* GET: auth, extra */
	struct req *active;
	size_t n_active;
	struct req *idle;
	size_t n_idle;
	uint32_t *ids; /* a prompt's ids while its body is written */
	uint32_t ids_cap;
};

#define req_set_error(q, ...) probe_stream_set_error(&(q)->st, __VA_ARGS__)

/* ---- client.c ---- */

/* Hands every finished transfer to its callback. */
void probe_client_process_done(struct probe_client *c);

/* ---- client-poll.c ---- */

/* Creates the epoll set and its sd-event source and installs curl's socket
 * and timer callbacks on c->multi. On failure the caller frees with
 * probe_client_poll_done(). c->epoll_fd must be -1 before. */
int probe_client_poll_init(struct probe_client *c);
/* Forgets every socket and frees what poll_init made (after
 * curl_multi_cleanup, which may still report sockets). */
void probe_client_poll_done(struct probe_client *c);
/* Hands every socket that is ready now to curl, then collects finished
 * transfers; what on_sockets does, for a caller outside it. */
void probe_client_serve_ready(struct probe_client *c);
/* Runs curl's due timers (new transfers) as one batch. */
void probe_client_run_timers(struct probe_client *c);

/* ---- client-transfer.c ---- */

/* Writes spec's JSON request body into q->body, its prompt made from w. 0
 * or -ENOMEM. */
int probe_client_build_body(struct probe_client *c, struct req *q, const struct probe_workload *w,
			    const struct probe_request_spec *spec);
/* curl's CURLOPT_WRITEFUNCTION and CURLOPT_PREREQFUNCTION (userdata is q). */
size_t probe_client_on_write(char *ptr, size_t size, size_t nmemb, void *userdata);
int probe_client_on_prereq(void *userdata, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
			   int conn_local_port);
/* Hands finished q's result to its callback (the callee owns the result's
 * contents); q itself stays with the caller. */
void probe_client_finish_stream(struct probe_client *c, struct req *q, CURLcode code);
void probe_client_finish_get(struct probe_client *c, struct req *q, CURLcode code);
/* A POST's body piece: to the caller's data function, or collected. Returns len, or 0 to stop. */
size_t probe_client_post_write(struct req *q, char *ptr, size_t len);
