/* client.c — libcurl's multi interface driven by an sd-event loop, sending
 * streaming OpenAI requests and timing every token.
 *
 * Each request owns a pooled easy handle and its SSE parser; handles go back
 * to an idle list so a load point of thousands of requests allocates a few
 * hundred once. Connections are kept alive by the multi's connection cache.
 * Timing happens in the write callback: one clock read per network read,
 * shared by the events in it. Finished transfers are collected after every
 * batch of socket actions.
 *
 * Streams are not handed to curl the moment they are sent: they wait in a
 * start queue that a defer source empties START_SLICE at a time, serving
 * every ready socket before each slice. Starting a request costs curl tens
 * of microseconds (a connection to pick, the request to write, the reply's
 * head to read); hundreds started in one go would leave the first tokens
 * of the first streams unread — and late-stamped — until the last had
 * left. A request's send time is when curl writes it, so the queue's wait
 * is not charged to the server.
 *
 * This file holds the pool, sending, completion and the lifetime;
 * client-poll.c connects curl to sd-event (every ready socket served in one
 * wake-up); client-transfer.c holds what happens to one transfer (its body,
 * the write and pre-request callbacks, its end). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client-internal.h"
#include "client.h"
#include "macro.h"
#include "sse.h"
#include "time-util.h"

#define IDLE_MAX         1024
#define START_SLICE      8    /* streams handed to curl per wake-up: about 0.5 ms of curl */
#define ERROR_BODY_MAX   2048 /* how much of a non-200 body goes into the error */
#define ITL_PREALLOC_MAX 4096
/* curl's receive buffer (its default: 16 KiB). Every transfer in flight
 * holds one — curl allocates it when the transfer starts and frees it when
 * it is done — and at the probe's 4,000 streams in flight the default was
 * 64 MB, most of what a request in flight cost. A stream reads tokens of a
 * few hundred bytes: 4 KiB still takes a dozen a read, and a larger
 * backlog is read in more calls (its tokens were late anyway). One size
 * for every transfer of a handle, GETs too, so that a buffer curl kept
 * could never be read into at a larger size. */
#define RECV_BUFFER_BYTES 4096L

void probe_client_config_init(struct probe_client_config *cfg)
{
	*cfg = (struct probe_client_config){
		.endpoint = "/v1/completions",
		.prompt_format = PROBE_PROMPT_AUTO,
		.include_usage = true,
		.request_timeout_usec = 600 * USEC_PER_SEC,
		.connect_timeout_usec = 10 * USEC_PER_SEC,
	};
}

bool probe_endpoint_is_chat(const char *endpoint)
{
	size_t n = endpoint ? strlen(endpoint) : 0;
	const char *suffix = "chat/completions";

	while (n > 0 && endpoint[n - 1] == '/')
		n--;
	return n >= strlen(suffix) && memcmp(endpoint + n - strlen(suffix), suffix, strlen(suffix)) == 0;
}

/* ---- the pool ---- */

static void req_free(struct req *q)
{
	if (!q)
		return;
	curl_easy_cleanup(q->easy);
	probe_stream_done(&q->st);
	probe_request_result_done(&q->res);
	free(q->body);
	free(q->resp);
	free(q);
}

static struct req *req_get(struct probe_client *c)
{
	struct req *q = c->idle;

	if (q) {
		c->idle = q->next;
		c->n_idle--;
	} else {
		q = calloc(1, sizeof(*q));
		if (!q)
			return NULL;
		q->easy = curl_easy_init();
		if (!q->easy) {
			free(q);
			return NULL;
		}
		q->client = c;
		probe_stream_init(&q->st, c->cfg.max_event_bytes);
		q->st.keep_text = c->cfg.keep_text;
	}
	q->prev = q->next = NULL;
	probe_request_result_done(&q->res);
	q->res = (struct probe_request_result){ 0 };
	probe_stream_begin(&q->st, &q->res, 0, 0);
	q->body_len = q->resp_len = 0;
	q->post_data = NULL;
	q->status = 0;
	q->curl_err[0] = '\0';
	return q;
}

/* Takes q out of the start queue (a rare walk: only for cancels). */
static void start_unqueue(struct probe_client *c, struct req *q)
{
	struct req **p = &c->start_head, *prev = NULL;

	while (*p && *p != q) {
		prev = *p;
		p = &(*p)->start_next;
	}
	if (*p) {
		*p = q->start_next;
		if (c->start_tail == q)
			c->start_tail = prev;
		c->n_queued--;
	}
	q->start_next = NULL;
	q->queued = false;
}

static void req_unlink(struct probe_client *c, struct req *q)
{
	if (q->prev)
		q->prev->next = q->next;
	else
		c->active = q->next;
	if (q->next)
		q->next->prev = q->prev;
	q->prev = q->next = NULL;
	c->n_active--;
	q->active = false;
}

/* Takes q off the multi and puts it back into the idle list (or frees it). */
static void req_release(struct probe_client *c, struct req *q)
{
	if (q->queued)
		start_unqueue(c, q);
	else if (q->active)
		(void)curl_multi_remove_handle(c->multi, q->easy);
	if (q->active)
		req_unlink(c, q);
	if (c->n_idle >= IDLE_MAX) {
		req_free(q);
		return;
	}
	probe_request_result_done(&q->res);
	q->next = c->idle;
	c->idle = q;
	c->n_idle++;
}

static int req_common_opts(struct probe_client *c, struct req *q, const char *url, uint64_t timeout_usec)
{
	CURLcode cc = CURLE_OK;

	/* curl refuses a new size while the handle holds an earlier transfer's
	 * buffer (never seen: it frees it when a transfer is done, or removed):
	 * a fresh handle then, rather than a transfer on a mismatched one */
	if (curl_easy_setopt(q->easy, CURLOPT_BUFFERSIZE, RECV_BUFFER_BYTES) != CURLE_OK) {
		CURL *e = curl_easy_init();

		if (!e)
			return -ENOMEM;
		curl_easy_cleanup(q->easy);
		q->easy = e;
		if (curl_easy_setopt(q->easy, CURLOPT_BUFFERSIZE, RECV_BUFFER_BYTES) != CURLE_OK)
			return -EINVAL;
	}

#define SET(opt, val)                                                                                                  \
	do {                                                                                                           \
		if (cc == CURLE_OK)                                                                                    \
			cc = curl_easy_setopt(q->easy, opt, val);                                                      \
	} while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PRIVATE, q);
	SET(CURLOPT_WRITEFUNCTION, probe_client_on_write);
	SET(CURLOPT_WRITEDATA, q);
	SET(CURLOPT_PREREQFUNCTION, probe_client_on_prereq);
	SET(CURLOPT_PREREQDATA, q);
	SET(CURLOPT_ERRORBUFFER, q->curl_err);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TCP_NODELAY, 1L);
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_TIMEOUT_MS, (long)(timeout_usec / USEC_PER_MSEC));
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)(c->cfg.connect_timeout_usec / USEC_PER_MSEC));
	SET(CURLOPT_HTTPHEADER, q->kind == REQ_GET ? c->get_headers : c->headers);
	if (q->kind == REQ_POST) {
		SET(CURLOPT_POSTFIELDS, q->body);
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len);
	}
	if (c->cfg.fresh_connections && q->kind == REQ_STREAM)
		SET(CURLOPT_FORBID_REUSE, 1L);
	if (c->cfg.insecure) {
		SET(CURLOPT_SSL_VERIFYPEER, 0L);
		SET(CURLOPT_SSL_VERIFYHOST, 0L);
	}
#undef SET
	return cc == CURLE_OK ? 0 : -EINVAL;
}

static void req_link(struct probe_client *c, struct req *q)
{
	q->active = true;
	q->next = c->active;
	if (c->active)
		c->active->prev = q;
	c->active = q;
	c->n_active++;
}

static int req_add(struct probe_client *c, struct req *q)
{
	CURLMcode mc;

	mc = curl_multi_add_handle(c->multi, q->easy);
	if (mc != CURLM_OK)
		return mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	return 0;
}

/* Hands q to curl now (GETs). */
static int req_start(struct probe_client *c, struct req *q)
{
	int r;

	r = req_add(c, q);
	if (r < 0)
		return r;
	req_link(c, q);
	return 0;
}

static int on_start(sd_event_source *s, void *userdata);

/* Queues stream q for the next start slice. */
static int req_queue(struct probe_client *c, struct req *q)
{
	int r;

	if (!c->start_source) {
		r = sd_event_add_defer(c->event, &c->start_source, on_start, c);
		if (r < 0)
			return r;
		(void)sd_event_source_set_description(c->start_source, "probe-curl-start");
	}
	if (!c->start_head) { /* a defer source is one-shot when made */
		r = sd_event_source_set_enabled(c->start_source, SD_EVENT_ON);
		if (r < 0)
			return r;
	}
	q->queued = true;
	q->start_next = NULL;
	if (c->start_tail)
		c->start_tail->start_next = q;
	else
		c->start_head = q;
	c->start_tail = q;
	c->n_queued++;
	req_link(c, q);
	return 0;
}

/* Ready sockets first (their tokens are timed when read), then a slice of
 * queued streams, which curl starts in the same call. */
static int on_start(sd_event_source *s, void *userdata)
{
	struct probe_client *c = userdata;

	probe_client_serve_ready(c);
	for (size_t k = 0; k < START_SLICE && c->start_head; k++) {
		struct req *q = c->start_head;
		int r;

		c->start_head = q->start_next;
		if (!c->start_head)
			c->start_tail = NULL;
		q->start_next = NULL;
		q->queued = false;
		c->n_queued--;
		r = req_add(c, q);
		if (r < 0) {
			/* ends like any failed request: through its callback */
			req_set_error(q, "could not start the request: %s", strerror(-r));
			req_unlink(c, q);
			probe_client_finish_stream(c, q, CURLE_FAILED_INIT);
			req_release(c, q);
		}
	}
	probe_client_run_timers(c);
	/* a caller holding requests back sends more now (they join the queue) */
	if (c->room_fn && c->n_queued < PROBE_CLIENT_QUEUE_AHEAD)
		c->room_fn(c, c->room_userdata);
	if (!c->start_head)
		(void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
	return 0;
}

int probe_client_send(struct probe_client *c, const struct probe_workload *w, const struct probe_request_spec *spec,
		      probe_client_stream_fn done, void *userdata)
{
	struct req *q;
	int r;

	q = req_get(c);
	if (!q)
		return -ENOMEM;
	q->kind = REQ_STREAM;
	q->stream_done = done;
	q->userdata = userdata;
	q->resp_max = ERROR_BODY_MAX;
	q->res.index = spec->index;
	q->spec_input_len = spec->input_len;
	q->spec_output_len = spec->output_len;
	r = probe_client_build_body(c, q, w, spec);
	/* A handle that ran a stream before keeps its options: only the body
	 * changes, which saves a good part of a request's set-up. */
	if (r >= 0 && !q->configured) {
		curl_easy_reset(q->easy);
		r = req_common_opts(c, q, c->url, c->cfg.request_timeout_usec);
		q->configured = r >= 0;
	}
	if (r >= 0 && (curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body) != CURLE_OK ||
		       curl_easy_setopt(q->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len) != CURLE_OK))
		r = -EINVAL;
	if (r >= 0) {
		q->res.send_usec = mono_usec();
		probe_stream_begin(&q->st, &q->res, q->res.send_usec,
				   MIN((size_t)spec->output_len, (size_t)ITL_PREALLOC_MAX));
		r = req_queue(c, q);
	}
	if (r < 0) {
		req_release(c, q);
		return r;
	}
	return 0;
}

int probe_client_get(struct probe_client *c, const char *path, size_t max_bytes, uint64_t timeout_usec,
		     probe_client_get_fn done, void *userdata)
{
	_cleanup_(freep) char *url = NULL;
	struct req *q;
	int r;

	if (asprintf(&url, "%s%s", c->base_url, path) < 0)
		return -ENOMEM;
	q = req_get(c);
	if (!q)
		return -ENOMEM;
	q->kind = REQ_GET;
	q->configured = false;
	curl_easy_reset(q->easy);
	q->get_done = done;
	q->userdata = userdata;
	q->resp_max = max_bytes;
	r = req_common_opts(c, q, url, timeout_usec ? timeout_usec : c->cfg.request_timeout_usec);
	if (r >= 0)
		r = req_start(c, q);
	if (r < 0) {
		req_release(c, q);
		return r;
	}
	return 0;
}

int probe_client_post(struct probe_client *c, const char *path, const char *body, size_t len, size_t max_bytes,
		      uint64_t timeout_usec, probe_client_data_fn data, probe_client_get_fn done, void *userdata)
{
	_cleanup_(freep) char *url = NULL;
	struct req *q;
	int r;

	if (asprintf(&url, "%s%s", c->base_url, path) < 0)
		return -ENOMEM;
	q = req_get(c);
	if (!q)
		return -ENOMEM;
	q->kind = REQ_POST;
	q->configured = false;
	curl_easy_reset(q->easy);
	q->get_done = done;
	q->post_data = data;
	q->userdata = userdata;
	q->resp_max = max_bytes;
	r = len + 1 > q->body_cap ? -ENOMEM : 0;
	if (r < 0) {
		char *b = realloc(q->body, len + 1);

		if (b) {
			q->body = b;
			q->body_cap = len + 1;
			r = 0;
		}
	}
	if (r >= 0) {
		memcpy(q->body, body, len);
		q->body[len] = '\0';
		q->body_len = len;
		r = req_common_opts(c, q, url, timeout_usec ? timeout_usec : c->cfg.request_timeout_usec);
	}
	if (r >= 0)
		r = req_start(c, q);
	if (r < 0) {
		req_release(c, q);
		return r;
	}
	return 0;
}

/* ---- completion ---- */

void probe_client_process_done(struct probe_client *c)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(c->multi, &left))) {
		struct req *q = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q) != CURLE_OK || !q || !q->active)
			continue;
		/* Off the multi first: the callback may start new requests. */
		(void)curl_multi_remove_handle(c->multi, q->easy);
		req_unlink(c, q);
		if (q->kind == REQ_STREAM)
			probe_client_finish_stream(c, q, msg->data.result);
		else
			probe_client_finish_get(c, q, msg->data.result);
		req_release(c, q);
	}
}

/* ---- lifetime ---- */

static int check_url(const char *base, struct error *err)
{
	if (!base || (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0))
		return error_set(err, -EINVAL, "--base-url: expected http://HOST[:PORT] or https://..., got \"%s\"",
				 base ? base : "");
	if (strpbrk(base, " \t\r\n"))
		return error_set(err, -EINVAL, "--base-url: whitespace in \"%s\"", base);
	return 0;
}

/* Appends the bearer token (when there is one; wiped from the temporary
 * string) and the user's --header lines to *l. On failure (-ENOMEM) *l holds
 * what was appended so far, for the caller to free. */
static int append_user_headers(struct curl_slist **l, const struct probe_client_config *cfg)
{
	struct curl_slist *t;

	if (cfg->api_key && cfg->api_key[0]) {
		_cleanup_(freep) char *h = NULL;

		if (asprintf(&h, "Authorization: Bearer %s", cfg->api_key) < 0)
			return -ENOMEM;
		t = curl_slist_append(*l, h);
		explicit_bzero(h, strlen(h));
		if (!t)
			return -ENOMEM;
		*l = t;
	}
	for (size_t i = 0; i < cfg->n_headers; i++) {
		t = curl_slist_append(*l, cfg->headers[i]);
		if (!t)
			return -ENOMEM;
		*l = t;
	}
	return 0;
}

int probe_client_new(sd_event *e, const struct probe_client_config *cfg, struct probe_client **ret, struct error *err)
{
	struct probe_client *c;
	const char *endpoint = cfg->endpoint ? cfg->endpoint : "/v1/completions";
	size_t n;
	int r;

	r = check_url(cfg->base_url, err);
	if (r < 0)
		return r;
	if (endpoint[0] != '/' || strpbrk(endpoint, " \t\r\n"))
		return error_set(err, -EINVAL, "--endpoint: expected a path starting with '/', got \"%s\"", endpoint);
	for (size_t i = 0; i < cfg->n_headers; i++)
		if (!strchr(cfg->headers[i], ':') || strpbrk(cfg->headers[i], "\r\n"))
			return error_set(err, -EINVAL, "--header: expected NAME=VALUE, got \"%s\"", cfg->headers[i]);

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->epoll_fd = -1;
	c->cfg = *cfg;
	c->cfg.headers = NULL;
	c->cfg.n_headers = 0;
	c->cfg.api_key = NULL;
	c->cfg.base_url = NULL;
	c->cfg.model = NULL;
	c->cfg.endpoint = NULL;
	c->event = sd_event_ref(e);
	c->chat = probe_endpoint_is_chat(endpoint);
	c->base_url = strdup(cfg->base_url);
	c->model = cfg->model ? strdup(cfg->model) : NULL;
	if (!c->base_url || (cfg->model && !c->model)) {
		r = -ENOMEM;
		goto fail;
	}
	n = strlen(c->base_url);
	while (n > 0 && c->base_url[n - 1] == '/')
		c->base_url[--n] = '\0';
	if (asprintf(&c->url, "%s%s", c->base_url, endpoint) < 0) {
		c->url = NULL;
		r = -ENOMEM;
		goto fail;
	}

	/* Headers: JSON in, no "Expect: 100-continue" round trip on large prompts. */
	r = -ENOMEM;
	{
		struct curl_slist *l = NULL, *t;
		const char *fixed[] = { "Content-Type: application/json", "Accept: text/event-stream", "Expect:" };

		for (size_t i = 0; i < ELEMENTSOF(fixed); i++) {
			t = curl_slist_append(l, fixed[i]);
			if (!t)
				goto fail_list;
			l = t;
		}
		if (append_user_headers(&l, cfg) < 0)
			goto fail_list;
		c->headers = l;
		l = NULL;
		if (append_user_headers(&l, cfg) < 0)
			goto fail_list;
		c->get_headers = l;
		goto list_done;
	fail_list:
		curl_slist_free_all(l);
		goto fail;
	}
list_done:
	c->multi = curl_multi_init();
	if (!c->multi)
		goto fail;
	if (curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, 4096L) != CURLM_OK) {
		r = -EINVAL;
		goto fail;
	}
	r = probe_client_poll_init(c);
	if (r < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	probe_client_free(c);
	return r;
}

void probe_client_cancel(struct probe_client *c, void *userdata)
{
	struct req *q, *next;

	for (q = c->active; q; q = next) {
		next = q->next;
		if (q->userdata == userdata)
			req_release(c, q);
	}
}

struct probe_client *probe_client_free(struct probe_client *c)
{
	if (!c)
		return NULL;
	while (c->active)
		req_release(c, c->active);
	while (c->idle) {
		struct req *q = c->idle;

		c->idle = q->next;
		req_free(q);
	}
	/* Closing the multi calls socket_cb(REMOVE) for the sockets still open. */
	if (c->multi)
		curl_multi_cleanup(c->multi);
	probe_client_poll_done(c);
	sd_event_source_disable_unref(c->start_source);
	curl_slist_free_all(c->headers);
	curl_slist_free_all(c->get_headers);
	free(c->ids);
	free(c->url);
	free(c->base_url);
	free(c->model);
	sd_event_unref(c->event);
	free(c);
	return NULL;
}

size_t probe_client_cut_streams(struct probe_client *c, void *userdata, uint64_t now_usec, uint64_t ttft_usec,
				uint64_t tpot_usec)
{
	struct req *cut = NULL, *q, *next;
	size_t n = 0;

	for (q = c->active; q; q = next) {
		uint64_t age, e2e;

		next = q->next;
		if (q->kind != REQ_STREAM || q->userdata != userdata)
			continue;
		age = now_usec > q->res.send_usec ? now_usec - q->res.send_usec : 0;
		e2e = tpot_usec == UINT64_MAX || ttft_usec == UINT64_MAX
			      ? UINT64_MAX
			      : ttft_usec + tpot_usec * (uint64_t)(q->spec_output_len > 1 ? q->spec_output_len - 1 : 0);
		if (!(q->st.chunks == 0 ? age > ttft_usec : age > e2e))
			continue;
		/* off the multi (curl closes a connection mid-transfer: the
		 * server sees its client go away) and out of the active list */
		if (q->queued)
			start_unqueue(c, q);
		else
			(void)curl_multi_remove_handle(c->multi, q->easy);
		req_unlink(c, q);
		q->next = cut;
		cut = q;
		n++;
	}
	/* then their callbacks, which may send or cancel other requests */
	while (cut) {
		q = cut;
		cut = q->next;
		q->next = NULL;
		req_set_error(q, "%s",
			      ttft_usec == 0 && tpot_usec == 0 ? PROBE_CUT_TIME_UP
			      : q->st.chunks == 0              ? PROBE_CUT_NO_TOKEN
							       : PROBE_CUT_UNFINISHED);
		q->res.cut = true;
		/* its time in flight: what its wait for a token showed */
		if (q->st.chunks == 0)
			q->res.e2e_usec = now_usec > q->res.send_usec ? now_usec - q->res.send_usec : 0;
		probe_client_finish_stream(c, q, CURLE_OK);
		req_release(c, q);
	}
	return n;
}

size_t probe_client_in_flight(const struct probe_client *c)
{
	return c->n_active;
}

size_t probe_client_queued(const struct probe_client *c)
{
	return c->n_queued;
}

void probe_client_set_room_fn(struct probe_client *c, probe_client_room_fn fn, void *userdata)
{
	c->room_fn = fn;
	c->room_userdata = userdata;
}

const char *probe_client_url(const struct probe_client *c)
{
	return c->url;
}
