/* client-internal.h — the state shared by client.c (pool, curl ↔ sd-event,
 * lifetime) and client-transfer.c (request body, write callback, completion).
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
	REQ_GET
};

struct req {
	struct probe_client *client;
	struct req *prev, *next; /* active list, or next in the idle list */
	CURL *easy;
	enum req_kind kind;
	bool configured; /* the handle holds the options of a stream request already */
	bool active;
	void *userdata;
	probe_client_stream_fn stream_done;
	probe_client_get_fn get_done;

	char *body; /* request body (POST) */
	size_t body_len, body_cap;
	char *resp; /* GET body, or the start of a non-200 body */
	size_t resp_len, resp_cap, resp_max;

	struct probe_stream st; /* SSE reading and token timing; st.error is the request's error */
	struct probe_request_result res;
	uint32_t spec_input_len;
	long status;
	char curl_err[CURL_ERROR_SIZE];
};

/* One watched socket. curl_multi_cleanup does not always report the sockets
 * it closes, so the client keeps its own list to free what is left. */
struct sock {
	sd_event_source *source;
	struct sock *prev, *next;
};

struct probe_client {
	sd_event *event;
	struct sock *socks;
	CURLM *multi;
	sd_event_source *timer;
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
	bool processing;
};

#define req_set_error(q, ...) probe_stream_set_error(&(q)->st, __VA_ARGS__)

/* ---- client-transfer.c ---- */

/* Writes spec's JSON request body into q->body. 0 or -ENOMEM. */
int probe_client_build_body(struct probe_client *c, struct req *q, const struct probe_request_spec *spec);
/* curl's CURLOPT_WRITEFUNCTION and CURLOPT_PREREQFUNCTION (userdata is q). */
size_t probe_client_on_write(char *ptr, size_t size, size_t nmemb, void *userdata);
int probe_client_on_prereq(void *userdata, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
			   int conn_local_port);
/* Hands finished q's result to its callback (the callee owns the result's
 * contents); q itself stays with the caller. */
void probe_client_finish_stream(struct probe_client *c, struct req *q, CURLcode code);
void probe_client_finish_get(struct probe_client *c, struct req *q, CURLcode code);
