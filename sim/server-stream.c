/* server-stream.c — goodput-sim's in-flight requests and real-time pacing.
 *
 * The half of the server that moves tokens: completions indexed by id (so
 * the engine's callbacks find their request), the min-heap of suspended
 * connections keyed by their next deadline, suspend/resume with the
 * EPOLLRDHUP watch on a suspended client, the engine's token/finished
 * callbacks, and MHD's content reader for SSE streams. server.c holds the
 * HTTP routes, the loop glue and the lifecycle; the pacing design is
 * described at the top of server.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "array.h"
#include "log.h"
#include "macro.h"
#include "server-internal.h"
#include "time-util.h"
#include "workload.h"

/* ---- in-flight requests by id ---- */

static struct sim_req **bucket_of(struct sim_server *s, uint64_t id)
{
	return &s->buckets[id & (s->n_buckets - 1)];
}

void sim_req_index(struct sim_server *s, struct sim_req *r)
{
	struct sim_req **b = bucket_of(s, r->id);

	r->hash_next = *b;
	*b = r;
}

void sim_req_unindex(struct sim_server *s, struct sim_req *r)
{
	for (struct sim_req **p = bucket_of(s, r->id); *p; p = &(*p)->hash_next)
		if (*p == r) {
			*p = r->hash_next;
			r->hash_next = NULL;
			return;
		}
}

static struct sim_req *req_lookup(struct sim_server *s, uint64_t id)
{
	for (struct sim_req *r = *bucket_of(s, id); r; r = r->hash_next)
		if (r->id == id)
			return r;
	return NULL;
}

/* ---- the deadline heap ---- */

static void heap_swap(struct sim_server *s, size_t a, size_t b)
{
	struct sim_req *t = s->heap[a];

	s->heap[a] = s->heap[b];
	s->heap[b] = t;
	s->heap[a]->heap_idx = a;
	s->heap[b]->heap_idx = b;
}

static void heap_up(struct sim_server *s, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (s->heap[p]->deadline <= s->heap[i]->deadline)
			break;
		heap_swap(s, p, i);
		i = p;
	}
}

static void heap_down(struct sim_server *s, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < s->heap_len && s->heap[l]->deadline < s->heap[m]->deadline)
			m = l;
		if (r < s->heap_len && s->heap[r]->deadline < s->heap[m]->deadline)
			m = r;
		if (m == i)
			return;
		heap_swap(s, i, m);
		i = m;
	}
}

static int heap_push(struct sim_server *s, struct sim_req *r, uint64_t deadline)
{
	if (r->heap_idx != SIZE_MAX)
		return 0;
	if (ARRAY_GROW(s->heap, s->heap_cap, s->heap_len) < 0)
		return -ENOMEM;
	r->deadline = deadline;
	r->heap_idx = s->heap_len;
	s->heap[s->heap_len++] = r;
	heap_up(s, r->heap_idx);
	return 0;
}

void sim_req_heap_remove(struct sim_server *s, struct sim_req *r)
{
	size_t i = r->heap_idx;

	if (i == SIZE_MAX)
		return;
	r->heap_idx = SIZE_MAX;
	s->heap_len--;
	if (i == s->heap_len)
		return;
	s->heap[i] = s->heap[s->heap_len];
	s->heap[i]->heap_idx = i;
	heap_up(s, i);
	heap_down(s, s->heap[i]->heap_idx);
}

/* ---- suspend / resume ---- */

void sim_req_resume(struct sim_req *r)
{
	if (!r->suspended)
		return;
	sim_req_heap_remove(r->server, r);
	r->suspended = false;
	MHD_resume_connection(r->conn);
	r->server->need_run = true;
}

static int on_rdhup(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct sim_req *r = userdata;
	struct sim_server *s = r->server;

	(void)sd_event_source_set_enabled(src, SD_EVENT_OFF);
	if (r->done_sent)
		return 0;
	log_debug("request %" PRIu64 ": client went away", r->id);
	r->aborted = true;
	if (r->in_engine && s->engine) {
		(void)sim_engine_abort(s->engine, r->id);
		r->in_engine = false;
		s->req_aborted++;
	}
	sim_req_unindex(s, r);
	sim_req_resume(r);
	sim_server_run_mhd(s);
	return 0;
}

static void req_watch_rdhup(struct sim_req *r)
{
	const union MHD_ConnectionInfo *ci;

	if (r->rdhup)
		return;
	ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	if (sd_event_add_io(r->server->event, &r->rdhup, ci->connect_fd, EPOLLRDHUP, on_rdhup, r) < 0) {
		r->rdhup = NULL;
		return;
	}
	(void)sd_event_source_set_description(r->rdhup, "client-rdhup");
}

void sim_req_suspend(struct sim_req *r)
{
	if (r->suspended || r->server->stopping)
		return;
	MHD_suspend_connection(r->conn);
	r->suspended = true;
	req_watch_rdhup(r);
}

/* The time the suspended request should next be woken, or UINT64_MAX when
 * only the engine can make progress for it. */
uint64_t sim_req_next_due(const struct sim_req *r)
{
	bool stream = r->api.stream;

	if (r->aborted)
		return 0;
	if (stream) {
		if (r->n_sent < r->n_tokens)
			return r->tokens[r->n_sent].sched_usec;
		return r->finished ? 0 : UINT64_MAX;
	}
	if (r->finished)
		return r->n_tokens > 0 ? r->tokens[r->n_tokens - 1].sched_usec : 0;
	return UINT64_MAX;
}

/* Wakes r now when it is due, or queues it on the heap for later. */
void sim_req_schedule(struct sim_req *r, uint64_t now)
{
	uint64_t due;

	if (!r->suspended)
		return;
	due = sim_req_next_due(r);
	if (due <= now)
		sim_req_resume(r);
	else if (due != UINT64_MAX)
		(void)heap_push(r->server, r, due);
}

/* ---- tokens ---- */

static uint32_t token_id(const struct sim_server *s, uint64_t req_id, uint32_t index)
{
	uint64_t x = s->cfg.seed ^ (req_id * UINT64_C(0x9e3779b97f4a7c15)) ^ ((uint64_t)index << 32);

	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	return PROBE_TOKEN_ID_MIN + (uint32_t)(x % (PROBE_TOKEN_ID_MAX - PROBE_TOKEN_ID_MIN));
}

int sim_req_push_token(struct sim_req *r, uint64_t sched_usec)
{
	if (r->n_tokens == r->cap_tokens) {
		uint32_t cap = r->cap_tokens ? r->cap_tokens * 2 : 16;
		struct sim_token *t;

		cap = MIN(cap, MAX(r->max_tokens, 1u));
		if (cap <= r->n_tokens)
			return -E2BIG;
		t = realloc(r->tokens, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		r->tokens = t;
		r->cap_tokens = cap;
	}
	r->tokens[r->n_tokens++] = (struct sim_token){
		.id = token_id(r->server, r->id, r->n_tokens),
		.sched_usec = sched_usec,
	};
	return 0;
}

void sim_server_engine_token(void *userdata, uint64_t req_id, uint32_t index, uint64_t time_usec, bool last)
{
	struct sim_server *s = userdata;
	struct sim_req *r = req_lookup(s, req_id);

	if (!r)
		return;
	if (sim_req_push_token(r, time_usec) < 0) {
		log_warning("request %" PRIu64 ": cannot record token %" PRIu32, req_id, index);
		return;
	}
	if (last) {
		r->finished = true;
		r->finish_reason = "length";
	}
	sim_req_schedule(r, mono_usec());
}

void sim_server_engine_finished(void *userdata, uint64_t req_id, uint64_t time_usec, uint32_t n_prompt,
				uint32_t n_output, uint32_t n_cached)
{
	struct sim_server *s = userdata;
	struct sim_req *r = req_lookup(s, req_id);

	if (!r)
		return;
	r->in_engine = false;
	r->n_cached = n_cached;
	if (!r->finished) {
		r->finished = true;
		r->finish_reason = "length";
		sim_req_schedule(r, mono_usec());
	}
	sim_req_unindex(s, r);
}

void sim_server_engine_scheduled(void *userdata, uint64_t req_id, uint64_t time_usec)
{
	struct sim_req *r = req_lookup(userdata, req_id);

	if (r && !r->scheduled_usec)
		r->scheduled_usec = time_usec;
}

void sim_req_observe_token(struct sim_server *s, struct sim_req *r, uint32_t i, uint64_t now)
{
	struct sim_token *t = &r->tokens[i];

	t->sent_usec = now;
	sim_histogram_observe(&s->lateness, now > t->sched_usec ? usec_to_sec(now - t->sched_usec) : 0.0);
	if (i == 0)
		sim_histogram_observe(&s->m.ttft, usec_to_sec(t->sched_usec - MIN(t->sched_usec, r->arrival_usec)));
	else
		sim_histogram_observe(&s->m.tpot,
				      usec_to_sec(t->sched_usec - MIN(t->sched_usec, r->tokens[i - 1].sched_usec)));
	if (r->finished && i + 1 == r->n_tokens) {
		s->req_finished_length++;
		sim_server_observe_finished(s, r);
	}
}

/* MHD's content reader for SSE streams: hands out every chunk that is due,
 * suspends the connection when none is. */
ssize_t sim_req_stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sim_req *r = cls;
	struct sim_server *s = r->server;
	uint64_t now;
	size_t n = 0;
	int k;

	if (r->aborted || s->stopping)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (r->done_sent)
		return MHD_CONTENT_READER_END_OF_STREAM;
	now = mono_usec();
	while (r->n_sent < r->n_tokens && r->tokens[r->n_sent].sched_usec <= now) {
		uint32_t i = r->n_sent;
		bool last = r->finished && i + 1 == r->n_tokens;

		if (r->bad_sse && i == r->max_tokens / 2) {
			k = snprintf(buf + n, max - n, "data: {\"id\":\"cmpl-%" PRIu64 "\",\"choices\":[{\"text\n\n",
				     r->id);
			if (k < 0 || (size_t)k >= max - n)
				break;
			n += (size_t)k;
			r->done_sent = true;
			r->aborted = true;
			if (r->in_engine && s->engine) {
				(void)sim_engine_abort(s->engine, r->id);
				r->in_engine = false;
			}
			sim_req_unindex(s, r);
			return (ssize_t)n;
		}
		if (s->cfg.dialect.dialect == SIM_DIALECT_LLAMACPP)
			/* llama.cpp: the finish reason comes with the usage, in a chunk of its own. */
			k = sim_api_llamacpp_token_chunk(buf + n, max - n, &r->fmt, r->tokens[i].id, i == 0);
		else
			k = sim_api_format_token_chunk(buf + n, max - n, &r->fmt, r->tokens[i].id, i == 0,
						       last ? r->finish_reason : NULL);
		if (k < 0)
			break;
		n += (size_t)k;
		sim_req_observe_token(s, r, i, now);
		r->n_sent++;
	}
	if (r->finished && r->n_sent == r->n_tokens && !r->done_sent) {
		char tail[1024];
		size_t t = 0;

		if (s->cfg.dialect.dialect == SIM_DIALECT_LLAMACPP) {
			/* Always, whatever stream_options says: the last choice, its finish reason and usage. */
			k = sim_api_llamacpp_final_chunk(tail, sizeof(tail), &r->fmt, r->finish_reason, r->n_prompt,
							 r->n_tokens);
			if (k > 0)
				t = (size_t)k;
		} else if (r->api.include_usage) {
			k = sim_api_format_usage_chunk(tail, sizeof(tail), &r->fmt, r->n_prompt, r->n_tokens);
			if (k > 0)
				t = (size_t)k;
		}
		memcpy(tail + t, "data: [DONE]\n\n", 15);
		t += 14;
		if (t <= max - n) {
			memcpy(buf + n, tail, t);
			n += t;
			r->done_sent = true;
		}
	}
	if (n > 0)
		return (ssize_t)n;
	sim_req_suspend(r);
	sim_req_schedule(r, now);
	/* sim_req_schedule may have resumed it at once (a token became due meanwhile). */
	return 0;
}
