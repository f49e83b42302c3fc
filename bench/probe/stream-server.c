/* stream-server.c — the bench's own streaming server: as little work per
 * token as a server can do, so that what the benchmark measures is the
 * probe's client and not the server.
 *
 * One epoll loop, HTTP/1.1 keep-alive, chunked SSE in vLLM's completions
 * shape. The request's "model" field picks the mode: "burst" writes the
 * whole response at once (coalesced chunks), "paced:ITL_USEC" sends one token
 * per ITL per stream at absolute deadlines (one heap of due streams, waits
 * with epoll_pwait2's nanosecond timeout). The first token goes out as soon
 * as the request is read, or after TTFT_USEC with "paced:ITL_USEC:TTFT_USEC"
 * (ITL 0: the rest at once).
 *
 * "tick:PACE_USEC" is what an engine does: every PACE_USEC one step emits
 * one token to every running stream at once. A stream joins at the next
 * step after its request is read; all streams share one grid of absolute
 * step times, so their tokens arrive together.
 *
 * The actual gaps between a stream's sends are recorded in a histogram, and
 * the send time of each token of a request under its id (which the parent
 * maps from its prompt's first token id), in shared memory for the parent to
 * read. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "stream-server.h"

#define MAX_CONN 4096
#define INBUF    65536

struct conn {
	int fd;
	char in[INBUF];
	size_t in_len;
	char *out;
	size_t out_len, out_off, out_cap;
	/* the stream in progress */
	bool streaming;
	uint32_t left, sent;
	uint64_t itl_usec, ttft_usec, due_usec, last_send_usec;
	uint32_t id;  /* the request's id (first prompt token id) */
	bool tick;    /* paced by the common step instead of its own deadline */
	int heap_pos; /* -1 when not waiting */
	int step_pos; /* in steppers[], -1 when not there */
};

static struct conn *conns[MAX_CONN];
static struct conn *heap[MAX_CONN];
static int heap_n;
/* The streams paced by the common step, and when the next step is due (0:
 * none running; the grid starts again with the next stream). */
static struct conn *steppers[MAX_CONN];
static int n_steppers;
static uint64_t step_pace_usec, step_due_usec;
static struct bench_server_stats *stats;

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void heap_swap(int a, int b)
{
	struct conn *t = heap[a];

	heap[a] = heap[b];
	heap[b] = t;
	heap[a]->heap_pos = a;
	heap[b]->heap_pos = b;
}

static void heap_up(int i)
{
	while (i > 0 && heap[(i - 1) / 2]->due_usec > heap[i]->due_usec) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;

		if (l < heap_n && heap[l]->due_usec < heap[m]->due_usec)
			m = l;
		if (r < heap_n && heap[r]->due_usec < heap[m]->due_usec)
			m = r;
		if (m == i)
			return;
		heap_swap(i, m);
		i = m;
	}
}

static void heap_push(struct conn *c)
{
	c->heap_pos = heap_n;
	heap[heap_n++] = c;
	heap_up(c->heap_pos);
}

static void heap_remove(struct conn *c)
{
	int i = c->heap_pos;

	if (i < 0)
		return;
	heap_n--;
	if (i != heap_n) {
		heap[i] = heap[heap_n];
		heap[i]->heap_pos = i;
		heap_down(i);
		heap_up(i);
	}
	c->heap_pos = -1;
}

static void step_add(struct conn *c, uint64_t now)
{
	if (n_steppers == 0)
		step_due_usec = now + c->itl_usec;
	step_pace_usec = c->itl_usec;
	c->step_pos = n_steppers;
	steppers[n_steppers++] = c;
}

static void step_remove(struct conn *c)
{
	int i = c->step_pos;

	if (i < 0)
		return;
	steppers[i] = steppers[--n_steppers];
	steppers[i]->step_pos = i;
	c->step_pos = -1;
}

static void out_add(struct conn *c, const char *s, size_t n)
{
	if (c->out_len + n > c->out_cap) {
		size_t cap = (c->out_len + n) * 2;
		char *o = realloc(c->out, cap);

		if (!o)
			abort();
		c->out = o;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, s, n);
	c->out_len += n;
}

static void out_event(struct conn *c, const char *data)
{
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "%zx\r\ndata: %s\n\n\r\n", strlen(data) + 8, data);

	out_add(c, buf, (size_t)n);
}

static void out_token(struct conn *c, uint32_t i)
{
	char data[160];

	snprintf(data, sizeof(data),
		 "{\"id\":\"cmpl-b\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" t%u\","
		 "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}",
		 i);
	out_event(c, data);
}

static void out_end(struct conn *c)
{
	char data[128];

	snprintf(data, sizeof(data), "{\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":%u}}",
		 c->sent);
	out_event(c, data);
	out_event(c, "[DONE]");
	out_add(c, "0\r\n\r\n", 5);
	c->streaming = false;
}

/* Writes what is buffered; false when the connection is gone. */
static bool flush_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0)
			return errno == EAGAIN;
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return true;
}

static void close_conn(int ep, struct conn *c)
{
	heap_remove(c);
	step_remove(c);
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	conns[c->fd] = NULL;
	free(c->out);
	free(c);
}

static void send_token(struct conn *c, uint64_t now)
{
	out_token(c, c->sent);
	if (c->id < BENCH_MAX_REQUESTS && c->sent < BENCH_MAX_TOKENS)
		__atomic_store_n(&stats->send_usec[c->id * BENCH_MAX_TOKENS + c->sent], now, __ATOMIC_RELAXED);
	if (c->sent > 0) {
		uint64_t gap = now - c->last_send_usec;

		__atomic_fetch_add(&stats->gap_hist[gap < BENCH_GAP_BUCKETS ? gap : BENCH_GAP_BUCKETS - 1], 1,
				   __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&stats->tokens, 1, __ATOMIC_RELAXED);
	c->last_send_usec = now;
	c->sent++;
	c->left--;
	if (c->left == 0)
		out_end(c);
}

/* Handles complete requests in c->in. */
static bool handle_input(struct conn *c)
{
	for (;;) {
		char *end, *p;
		size_t head, body = 0;
		uint32_t max_tokens = 16;

		if (c->streaming)
			return true;
		c->in[c->in_len] = '\0';
		end = strstr(c->in, "\r\n\r\n");
		if (!end)
			return true;
		head = (size_t)(end - c->in) + 4;
		p = strcasestr(c->in, "content-length:");
		if (p && p < end)
			body = strtoul(p + 15, NULL, 10);
		if (c->in_len < head + body)
			return true;
		p = strstr(c->in + head, "\"max_tokens\":");
		if (p)
			max_tokens = (uint32_t)strtoul(p + 13, NULL, 10);
		c->itl_usec = c->ttft_usec = 0;
		c->tick = false;
		p = strstr(c->in + head, "\"paced:");
		if (p) {
			c->itl_usec = strtoull(p + 7, &p, 10);
			if (*p == ':')
				c->ttft_usec = strtoull(p + 1, NULL, 10);
		}
		p = strstr(c->in + head, "\"tick:");
		if (p) {
			c->itl_usec = strtoull(p + 6, NULL, 10);
			c->tick = c->itl_usec > 0;
		}
		c->id = UINT32_MAX;
		p = strstr(c->in + head, "\"prompt\":[");
		if (p) {
			unsigned long first = strtoul(p + 10, NULL, 10);

			if (first < BENCH_MAX_TOKEN_ID && stats->request_of[first] > 0)
				c->id = stats->request_of[first] - 1;
		}
		memmove(c->in, c->in + head + body, c->in_len - head - body);
		c->in_len -= head + body;
		__atomic_fetch_add(&stats->requests, 1, __ATOMIC_RELAXED);

		{
			static const char head200[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
						      "Transfer-Encoding: chunked\r\n\r\n";

			out_add(c, head200, sizeof(head200) - 1);
		}
		c->streaming = true;
		c->left = max_tokens > 0 ? max_tokens : 1;
		c->sent = 0;
		if (c->tick)
			step_add(c, now_usec());
		else if (c->ttft_usec > 0) {
			c->due_usec = now_usec() + c->ttft_usec;
			heap_push(c);
		} else if (c->itl_usec == 0) {
			uint64_t now = now_usec();

			while (c->streaming)
				send_token(c, now);
		} else {
			uint64_t now = now_usec();

			send_token(c, now);
			if (c->streaming) {
				c->due_usec = now + c->itl_usec;
				heap_push(c);
			}
		}
		if (!flush_out(c))
			return false;
	}
}

static void on_readable(int ep, struct conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->in + c->in_len, INBUF - 1 - c->in_len, MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN) || (n < 0 && c->in_len >= INBUF - 1)) {
			close_conn(ep, c);
			return;
		}
		if (n < 0)
			break;
		c->in_len += (size_t)n;
		if (c->in_len >= INBUF - 1)
			break;
	}
	if (!handle_input(c))
		close_conn(ep, c);
}

/* One step: a token to every running stream, each written at once and
 * stamped just before its write (so that what the parent compares with is
 * when the bytes left, not when the step began). The grid holds when a step
 * is a little late (the next one comes sooner); a step later than a whole
 * pace starts it again from now. */
static void step(int ep, uint64_t now)
{
	/* backwards: removing moves the last stream into the hole */
	for (int i = n_steppers - 1; i >= 0; i--) {
		struct conn *c = steppers[i];

		send_token(c, now_usec());
		if (!c->streaming)
			step_remove(c);
		if (!flush_out(c))
			close_conn(ep, c);
	}
	step_due_usec += step_pace_usec;
	if (step_due_usec <= now)
		step_due_usec = now + step_pace_usec;
}

void bench_server_run(int listen_fd, int stop_fd, struct bench_server_stats *shared)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };

	stats = shared;
	ev.data.fd = listen_fd;
	epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
	ev.data.fd = stop_fd;
	epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd, &ev);
	for (;;) {
		struct epoll_event evs[256];
		struct timespec ts, *tsp = NULL;
		uint64_t now;
		int n;

		if (heap_n > 0 || n_steppers > 0) {
			uint64_t due = heap_n > 0 ? heap[0]->due_usec : UINT64_MAX, wait;

			if (n_steppers > 0 && step_due_usec < due)
				due = step_due_usec;
			now = now_usec();
			wait = due > now ? due - now : 0;

			ts.tv_sec = (time_t)(wait / 1000000u);
			ts.tv_nsec = (long)(wait % 1000000u) * 1000;
			tsp = &ts;
		}
		n = epoll_pwait2(ep, evs, 256, tsp, NULL);
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == stop_fd)
				_exit(0);
			if (fd == listen_fd) {
				int cfd;

				while ((cfd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct conn *c;
					int one = 1;

					if (cfd >= MAX_CONN) {
						close(cfd);
						continue;
					}
					c = calloc(1, sizeof(*c));
					if (!c)
						abort();
					c->fd = cfd;
					c->heap_pos = -1;
					c->step_pos = -1;
					setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					conns[cfd] = c;
					ev.events = EPOLLIN;
					ev.data.fd = cfd;
					epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
				}
				continue;
			}
			if (conns[fd])
				on_readable(ep, conns[fd]);
		}
		/* Every stream whose token is due; late ones catch up. */
		now = now_usec();
		while (heap_n > 0 && heap[0]->due_usec <= now) {
			struct conn *c = heap[0];

			send_token(c, now);
			while (c->streaming && c->itl_usec == 0)
				send_token(c, now);
			if (c->streaming) {
				c->due_usec += c->itl_usec;
				heap_down(0);
			} else
				heap_remove(c);
			if (!flush_out(c))
				close_conn(ep, c);
		}
		if (n_steppers > 0 && step_due_usec <= now)
			step(ep, now);
	}
}
