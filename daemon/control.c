/* control.c — the control socket of goodputd (see control.h for the
 * contract; OpenSMTPD's control.c is the model).
 *
 * Each connection has an input buffer that grows only as bytes arrive and
 * never beyond the request limit (a small one for unprivileged peers, who
 * cannot submit the only large request), and an output queue. Lines are
 * handled in order; while a client does not read its answers the server
 * stops reading its requests (the queue stays below OUT_HIGH plus one
 * answer), so a slow or hostile client costs bounded memory and no other
 * client waits for it. Accept errors such as EMFILE pause accepting for a
 * moment instead of spinning on a readable listening socket.
 *
 * The connections live on an epoll instance of their own, which is one io
 * source on the daemon's sd-event loop. sd-event dispatches one source per
 * iteration and asks the kernel again each time, so with one source per
 * connection a burst of N requests cost N epoll_wait calls that each
 * re-polled every still-unread socket — O(N²) kernel work, most of the
 * latency of 200 clients asking at once. The inner epoll hands the whole
 * batch of ready connections to one dispatch instead. */
#include "control-internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "macro.h"
#include "time-util.h"

/* Stop reading a client's requests while this much output waits for it. */
#define OUT_HIGH ((size_t)256 * 1024)
/* Peers that cannot submit have no use for long lines. */
#define UNPRIVILEGED_REQUEST_MAX ((size_t)64 * 1024)
#define READ_CHUNK               ((size_t)64 * 1024)
#define ACCEPT_BURST             64
#define ACCEPT_RETRY_USEC        (100 * USEC_PER_MSEC)
/* Ready connections handled per dispatch of the inner epoll. */
#define CONN_BATCH 256
/* The loop's time answers may take, for every uid but root's and goodputd's
 * own: each uid a quarter of it (with a burst of 200 ms), all of them
 * together half (400 ms). A uid past its budget waits, its requests unread,
 * until it is paid back; root is answered at once whatever others ask. */
#define UID_BUDGET_PCT 25
#define UID_BURST_USEC (200 * USEC_PER_MSEC)
#define ALL_BUDGET_PCT 50
#define ALL_BURST_USEC (400 * USEC_PER_MSEC)
/* Connections root and goodputd's uid have beyond max_connections: taken
 * only when every other slot is, so that root always gets in. */
#define ROOT_EXTRA_CONNECTIONS 4

struct ctl_pending {
	struct ctl_conn *conn; /* NULL once the client has gone */
};

struct ctl_conn {
	struct ctl_server *server;
	struct ctl_pending *pending; /* a deferred answer is awaited */
	struct ctl_conn *prev, *next;
	int fd;
	uint32_t events;       /* as registered on the server's epoll */
	sd_event_source *idle; /* fires idle_timeout after the last activity, or earlier and waits on */
	uint64_t last_active;  /* CLOCK_MONOTONIC µs of the last byte read or sent */
	struct ctl_peer peer;
	gid_t *groups; /* the peer's supplementary groups at connect time */
	int n_groups;
	bool counted_unprivileged; /* counted in the server's n_unprivileged */
	char *in;
	size_t in_len, in_size, in_scanned;
	char *out;
	size_t out_len, out_off;
	bool eof;       /* the peer closed its side: answer what is complete, then close */
	bool closing;   /* close once the output is flushed */
	bool throttled; /* its uid is past its budget: nothing read or handled until paid back */
};

struct ctl_server {
	sd_event *event;
	int fd;
	sd_event_source *listen_source, *retry_source;
	int epfd; /* the connections */
	sd_event_source *conns_source;
	struct epoll_event batch[CONN_BATCH];
	int batch_i, batch_n; /* the batch being handled; conn_free clears its entries */
	struct ctl_limits limits;
	ctl_handler_fn handler;
	void *userdata;
	bool has_group;
	gid_t gid;
	uid_t own_uid;
	struct ctl_conn *conns;
	unsigned n_conns;
	unsigned n_unprivileged;          /* connections of peers that may not change state */
	struct ctl_uid_counts uid_counts; /* connections per uid */
	struct ctl_budget all_budget;     /* the loop's time owed by every budgeted uid together */
	sd_event_source *throttle_timer;  /* when the throttled connections may go on */
	struct ctl_conn *handling;        /* whose request the handler is answering */
	bool deferred;                    /* ... and it called ctl_server_defer */
	char *unlink_path;
};

static bool peer_privileged(const struct ctl_server *s, const struct ctl_conn *c)
{
	return ctl_peer_is_privileged(&c->peer, c->groups, c->n_groups, s->has_group, s->gid, s->own_uid);
}

static void conn_free(struct ctl_conn *c)
{
	struct ctl_server *s;

	if (!c)
		return;
	s = c->server;
	/* Later entries of the batch being handled must not reach a freed connection. */
	for (int i = s->batch_i + 1; i < s->batch_n; i++)
		if (s->batch[i].data.ptr == c)
			s->batch[i].data.ptr = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	if (c->counted_unprivileged)
		s->n_unprivileged--;
	ctl_uid_counts_remove(&s->uid_counts, c->peer.uid);
	if (c->pending)
		c->pending->conn = NULL;
	sd_event_source_disable_unref(c->idle);
	if (c->fd >= 0)
		(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	safe_close(c->fd);
	free(c->groups);
	free(c->in);
	free(c->out);
	free(c);
}

static uint64_t loop_now(const struct ctl_server *s)
{
	uint64_t now = 0;

	if (sd_event_now(s->event, CLOCK_MONOTONIC, &now) < 0)
		now = mono_usec();
	return now;
}

/* Notes activity. The idle timer is not moved on every request, which
 * cost two reschedules of sd-event's timer queues per request; when it
 * fires it looks at the last activity and waits on if the connection has
 * been busy since. */
static void note_active(struct ctl_conn *c)
{
	c->last_active = loop_now(c->server);
}

/* Sends what is queued without blocking. -errno when the peer is gone. */
static int conn_flush(struct ctl_conn *c)
{
	bool progress = false;

	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			return -errno;
		c->out_off += (size_t)n;
		progress = true;
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (progress)
		note_active(c);
	return 0;
}

/* Appends len bytes of text, and a newline when it has none. */
static void out_append(struct ctl_conn *c, const char *text, size_t len)
{
	bool nl = len == 0 || text[len - 1] != '\n';
	char *p;

	if (c->out_off > 0) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	p = realloc(c->out, c->out_len + len + nl);
	if (!p) {
		c->closing = true;
		return;
	}
	c->out = p;
	memcpy(c->out + c->out_len, text, len);
	c->out_len += len;
	if (nl)
		c->out[c->out_len++] = '\n';
}

/* Queues an answer. A raw item is a line the handler formatted and checked
 * itself (a cached answer): it goes out as it is, without being printed
 * and checked again on every request. */
static void conn_queue(struct ctl_conn *c, cJSON *response)
{
	_cleanup_(freep) char *line = NULL;
	size_t len;

	if (cJSON_IsRaw(response) && response->valuestring) {
		out_append(c, response->valuestring, strlen(response->valuestring));
		cJSON_Delete(response);
		return;
	}
	if (!response || ctl_format_line(response, &line, &len) < 0) {
		static const char oom[] = "{\"ok\":false,\"error\":\"out of memory\"}\n";

		cJSON_Delete(response);
		out_append(c, oom, sizeof(oom) - 1);
		return;
	}
	cJSON_Delete(response);
	out_append(c, line, len);
}

static size_t request_max(const struct ctl_conn *c)
{
	size_t max = c->server->limits.max_request_bytes;

	return c->peer.privileged ? max : MIN(max, UNPRIVILEGED_REQUEST_MAX);
}

static void handle_line(struct ctl_conn *c, char *line, size_t len)
{
	struct ctl_server *s = c->server;
	struct ctl_request req = { 0 };
	struct error err = { 0 };
	int r;

	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (len == 0)
		return; /* blank lines are keep-alives */

	r = ctl_request_parse(line, len, &req, &err);
	if (r < 0) {
		log_debug("control: pid %d uid %u: bad request: %s", (int)c->peer.pid, (unsigned)c->peer.uid,
			  error_str(&err, r));
		conn_queue(c, ctl_response_error(NULL, "%s", error_str(&err, r)));
		return;
	}
	c->peer.privileged = peer_privileged(s, c);
	if (ctl_command_changes_state(req.command) && !c->peer.privileged) {
		log_notice("control: refused '%s' from uid %u (pid %d): not root, goodputd's user or in its group",
			   ctl_command_to_string(req.command), (unsigned)c->peer.uid, (int)c->peer.pid);
		conn_queue(c, ctl_response_error(req.id,
						 "permission denied: '%s' changes state and needs root, goodputd's "
						 "user or membership in its socket group (you are uid %u)",
						 ctl_command_to_string(req.command), (unsigned)c->peer.uid));
	} else {
		cJSON *answer;

		s->handling = c;
		s->deferred = false;
		answer = s->handler(&c->peer, &req, s->userdata);
		s->handling = NULL;
		if (!s->deferred)
			conn_queue(c, answer);
		else
			cJSON_Delete(answer);
	}
	ctl_request_done(&req);
}

struct ctl_pending *ctl_server_defer(struct ctl_server *s)
{
	struct ctl_pending *p;

	assert(s->handling && !s->handling->pending);
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->conn = s->handling;
	s->handling->pending = p;
	s->deferred = true;
	return p;
}

/* Whether the peer's answers count against a budget: every uid but root's
 * and goodputd's own. */
static bool budgeted(const struct ctl_server *s, const struct ctl_conn *c)
{
	return c->peer.uid != 0 && c->peer.uid != s->own_uid;
}

/* How long c's uid must wait before another request of its is handled (0:
 * now): until its own budget and everyone's are back within their bursts. */
static uint64_t budget_wait(struct ctl_server *s, const struct ctl_conn *c, uint64_t now)
{
	struct ctl_budget *b = ctl_uid_counts_budget(&s->uid_counts, c->peer.uid);
	uint64_t wait = 0;

	(void)ctl_budget_owed(&s->all_budget, now, ALL_BUDGET_PCT);
	wait = ctl_budget_wait(&s->all_budget, ALL_BURST_USEC, ALL_BUDGET_PCT);
	if (b) {
		(void)ctl_budget_owed(b, now, UID_BUDGET_PCT);
		wait = MAX(wait, ctl_budget_wait(b, UID_BURST_USEC, UID_BUDGET_PCT));
	}
	return wait;
}

static void charge(struct ctl_server *s, const struct ctl_conn *c, uint64_t cost, uint64_t now)
{
	struct ctl_budget *b = ctl_uid_counts_budget(&s->uid_counts, c->peer.uid);

	if (b)
		ctl_budget_charge(b, cost, now, UID_BUDGET_PCT);
	ctl_budget_charge(&s->all_budget, cost, now, ALL_BUDGET_PCT);
}

/* c waits wait_usec: nothing of it is read or handled until the timer. */
static void throttle(struct ctl_conn *c, uint64_t now, uint64_t wait_usec)
{
	struct ctl_server *s = c->server;
	uint64_t due = now + MAX(wait_usec, USEC_PER_MSEC), cur = 0;
	int enabled = SD_EVENT_OFF;

	if (!c->throttled)
		log_debug("control: uid %u is past its budget of the loop's time: waiting %.0f ms",
			  (unsigned)c->peer.uid, usec_to_ms(wait_usec));
	c->throttled = true;
	(void)sd_event_source_get_enabled(s->throttle_timer, &enabled);
	if (enabled != SD_EVENT_OFF && sd_event_source_get_time(s->throttle_timer, &cur) >= 0 && cur <= due)
		return;
	(void)sd_event_source_set_time(s->throttle_timer, due);
	(void)sd_event_source_set_enabled(s->throttle_timer, SD_EVENT_ONESHOT);
}

/* Handles every complete line, unless the output backs up, an answer is
 * deferred or the peer's uid is past its budget. */
static void process_lines(struct ctl_conn *c)
{
	struct ctl_server *s = c->server;
	bool counted = budgeted(s, c);

	while (!c->closing && !c->pending && !c->throttled && c->out_len - c->out_off < OUT_HIGH) {
		uint64_t t0 = 0, wait;
		char *nl = memchr(c->in + c->in_scanned, '\n', c->in_len - c->in_scanned);
		size_t line_len, rest;

		if (!nl) {
			c->in_scanned = c->in_len;
			if (c->in_len > request_max(c)) {
				conn_queue(c, ctl_response_error(NULL, "request line longer than %zu bytes",
								 request_max(c)));
				c->closing = true;
				c->in_len = c->in_scanned = 0;
			} else if (c->eof && c->in_len > 0) {
				log_debug("control: pid %d left in the middle of a line (%zu bytes dropped)",
					  (int)c->peer.pid, c->in_len);
				c->in_len = c->in_scanned = 0;
			}
			return;
		}
		line_len = (size_t)(nl - c->in);
		if (line_len > request_max(c)) {
			conn_queue(c, ctl_response_error(NULL, "request line longer than %zu bytes", request_max(c)));
			c->closing = true;
			c->in_len = c->in_scanned = 0;
			return;
		}
		if (counted) {
			t0 = mono_usec();
			wait = budget_wait(s, c, t0);
			if (wait > 0) {
				throttle(c, t0, wait);
				return;
			}
		}
		handle_line(c, c->in, line_len);
		if (counted) {
			uint64_t t1 = mono_usec();

			charge(s, c, t1 - t0, t1);
		}
		rest = c->in_len - line_len - 1;
		memmove(c->in, nl + 1, rest);
		c->in_len = rest;
		c->in_scanned = 0;
	}
}

/* Reads once. -errno when the connection is broken. */
static int conn_read(struct ctl_conn *c)
{
	size_t cap = request_max(c) + 1;
	ssize_t n;

	if (c->in_size - c->in_len < READ_CHUNK && c->in_size < cap + READ_CHUNK) {
		size_t nsize = MIN(MAX(c->in_size * 2, c->in_len + READ_CHUNK), cap + READ_CHUNK);
		char *p = realloc(c->in, nsize);

		if (!p)
			return -ENOMEM;
		c->in = p;
		c->in_size = nsize;
	}
	if (c->in_size == c->in_len)
		return 0; /* full: process_lines refuses the line */
	n = recv(c->fd, c->in + c->in_len, c->in_size - c->in_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0)
		return -errno;
	if (n == 0) {
		c->eof = true;
		return 0;
	}
	c->in_len += (size_t)n;
	note_active(c);
	return 0;
}

/* Frees the connection when it has nothing left to do, else sets the events
 * to wait for. Returns false when freed. */
static bool conn_update(struct ctl_conn *c)
{
	uint32_t events = 0;
	bool pending = c->out_len > c->out_off;

	if ((c->closing || c->eof) && !pending && !c->pending) {
		conn_free(c);
		return false;
	}
	if (!c->closing && !c->eof && !c->pending && !c->throttled && c->out_len - c->out_off < OUT_HIGH)
		events |= EPOLLIN | EPOLLRDHUP;
	if (pending)
		events |= EPOLLOUT;
	if (events != c->events) {
		struct epoll_event ev = { .events = events, .data.ptr = c };

		if (epoll_ctl(c->server->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
			conn_free(c);
			return false;
		}
		c->events = events;
	}
	return true;
}

static void conn_io(struct ctl_conn *c, uint32_t revents)
{
	/* Hung up while an answer is deferred: nobody will read it, and a
	 * hung-up socket stays ready, so waiting would spin. */
	if (c->pending && (revents & (EPOLLHUP | EPOLLERR))) {
		conn_free(c);
		return;
	}
	if (revents & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		if (!c->eof && !c->closing && conn_read(c) < 0) {
			conn_free(c);
			return;
		}
	}
	process_lines(c);
	if (conn_flush(c) < 0) {
		conn_free(c);
		return;
	}
	/* Draining may have made room for lines read earlier. */
	if (c->in_len > 0 && !c->closing && c->out_len == 0) {
		process_lines(c);
		if (conn_flush(c) < 0) {
			conn_free(c);
			return;
		}
	}
	conn_update(c);
}

void ctl_pending_answer(struct ctl_pending *p, cJSON *answer)
{
	struct ctl_conn *c;

	if (!p) {
		cJSON_Delete(answer);
		return;
	}
	c = p->conn;
	free(p);
	if (!c) {
		cJSON_Delete(answer);
		return;
	}
	c->pending = NULL;
	conn_queue(c, answer);
	/* Requests that arrived meanwhile are waiting in the buffer. */
	conn_io(c, 0);
}

/* The inner epoll is readable: handle one batch of ready connections (more
 * wait for the next dispatch, so other sources get their turn). */
static int on_conns_ready(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct ctl_server *s = userdata;
	int n = epoll_wait(s->epfd, s->batch, CONN_BATCH, 0);

	if (n < 0)
		return errno == EINTR ? 0 : log_warning_errno(errno, "control: epoll_wait");
	s->batch_n = n;
	for (s->batch_i = 0; s->batch_i < n; s->batch_i++) {
		struct ctl_conn *c = s->batch[s->batch_i].data.ptr;

		if (c)
			conn_io(c, s->batch[s->batch_i].events);
	}
	s->batch_i = s->batch_n = 0;
	return 0;
}

/* The throttled connections' time has come: each goes on (and may wait
 * again). */
static int on_throttle(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct ctl_server *s = userdata;
	struct ctl_conn *c, *next;

	for (c = s->conns; c; c = next) {
		next = c->next;
		if (!c->throttled)
			continue;
		c->throttled = false;
		conn_io(c, 0);
	}
	return 0;
}

static int on_conn_idle(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct ctl_conn *c = userdata;
	uint64_t due = c->last_active + c->server->limits.idle_timeout_usec;

	if (loop_now(c->server) < due) {
		(void)sd_event_source_set_time(src, due);
		(void)sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
		return 0;
	}
	log_debug("control: pid %d idle for too long, closing", (int)c->peer.pid);
	if (c->out_len > c->out_off) {
		conn_free(c); /* it does not read what we sent: nothing more to say */
		return 0;
	}
	/* Say why, if it fits in the socket buffer, and close. */
	conn_queue(c, ctl_response_error(NULL, "idle timeout: closing the connection"));
	(void)conn_flush(c);
	conn_free(c);
	return 0;
}

static void refuse_busy(int fd, const char *fmt, ...) _printf_(2, 3);
static void refuse_busy(int fd, const char *fmt, ...)
{
	char msg[160], line[200];
	va_list ap;
	int n;

	/* The messages are fixed texts with numbers: nothing to escape. */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = snprintf(line, sizeof(line), "{\"ok\":false,\"error\":\"%s\"}\n", msg);
	if (n > 0 && (size_t)n < sizeof(line))
		(void)!send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

/* Takes over fd, whose peer and groups have been read (groups consumed). */
static int conn_new(struct ctl_server *s, int fd, const struct ctl_peer *peer, gid_t *groups, int n_groups)
{
	struct ctl_conn *c = calloc(1, sizeof(*c));
	int r;

	if (!c || ctl_uid_counts_add(&s->uid_counts, peer->uid) < 0) {
		free(c);
		free(groups);
		close(fd);
		return -ENOMEM;
	}
	c->server = s;
	c->fd = fd;
	c->peer = *peer;
	c->groups = groups;
	c->n_groups = n_groups;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	c->peer.privileged = peer_privileged(s, c);
	c->counted_unprivileged = !c->peer.privileged;
	if (c->counted_unprivileged)
		s->n_unprivileged++;

	c->last_active = loop_now(s);
	r = sd_event_add_time(s->event, &c->idle, CLOCK_MONOTONIC, c->last_active + s->limits.idle_timeout_usec,
			      USEC_PER_SEC / 10, on_conn_idle, c);
	if (r < 0) {
		conn_free(c);
		return r;
	}
	(void)sd_event_source_set_description(c->idle, "control-idle");
	c->events = EPOLLIN | EPOLLRDHUP;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &(struct epoll_event){ .events = c->events, .data.ptr = c }) < 0) {
		r = -errno;
		c->fd = -1; /* not registered: conn_free only closes it */
		safe_close(fd);
		conn_free(c);
		return r;
	}
	log_debug("control: connection from pid %d uid %u%s", (int)peer->pid, (unsigned)peer->uid,
		  c->peer.privileged ? " (privileged)" : "");
	return 0;
}

/* Admission: every slot is open to root and the daemon's uid; the last
 * reserved_connections are kept for them and the socket group; every uid
 * but root and the daemon's own holds at most max_connections_per_uid. So
 * a local user who fills the socket with idle connections locks nobody out
 * but himself — and when users and the socket group together hold every
 * slot, root and the daemon's uid still get in, on ROOT_EXTRA_CONNECTIONS
 * beyond the total. */
static void admit(struct ctl_server *s, int fd)
{
	const struct ctl_limits *l = &s->limits;
	struct ctl_peer peer = { 0 };
	gid_t *groups = NULL;
	int n_groups = 0;
	bool privileged, root;

	if (ctl_peer_read(fd, &peer, &groups, &n_groups) < 0) {
		close(fd);
		return;
	}
	root = peer.uid == 0 || peer.uid == s->own_uid;
	/* root beyond the total only while others hold every slot, and only a few */
	if (s->n_conns >= l->max_connections &&
	    !(root && s->n_conns < l->max_connections + ROOT_EXTRA_CONNECTIONS &&
	      ctl_uid_counts_get(&s->uid_counts, peer.uid) < ROOT_EXTRA_CONNECTIONS)) {
		log_debug("control: %u connections already, refusing one", s->n_conns);
		refuse_busy(fd, "too many connections (%u)", l->max_connections);
		free(groups);
		return;
	}
	privileged = ctl_peer_is_privileged(&peer, groups, n_groups, s->has_group, s->gid, s->own_uid);
	if (!privileged && s->n_unprivileged + MIN(l->reserved_connections, l->max_connections) >= l->max_connections) {
		log_debug("control: uid %u: the remaining slots are reserved", (unsigned)peer.uid);
		refuse_busy(fd, "too many connections (%u)", l->max_connections);
		free(groups);
		return;
	}
	if (peer.uid != 0 && peer.uid != s->own_uid && l->max_connections_per_uid > 0 &&
	    ctl_uid_counts_get(&s->uid_counts, peer.uid) >= l->max_connections_per_uid) {
		log_debug("control: uid %u has %u connections already", (unsigned)peer.uid, l->max_connections_per_uid);
		refuse_busy(fd, "too many connections from uid %u (%u)", (unsigned)peer.uid,
			    l->max_connections_per_uid);
		free(groups);
		return;
	}
	if (conn_new(s, fd, &peer, groups, n_groups) < 0)
		log_warning("control: could not set up a connection");
}

static int on_retry(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct ctl_server *s = userdata;

	(void)sd_event_source_set_enabled(s->listen_source, SD_EVENT_ON);
	return 0;
}

static int on_listen(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct ctl_server *s = userdata;

	for (int i = 0; i < ACCEPT_BURST; i++) {
		int cfd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return 0;
			/* EMFILE and friends: the socket stays readable, so pause
			 * accepting for a moment instead of spinning. */
			log_warning_errno(errno, "control: accepting a connection");
			(void)sd_event_source_set_enabled(s->listen_source, SD_EVENT_OFF);
			(void)sd_event_source_set_time_relative(s->retry_source, ACCEPT_RETRY_USEC);
			(void)sd_event_source_set_enabled(s->retry_source, SD_EVENT_ONESHOT);
			return 0;
		}
		admit(s, cfd);
	}
	return 0;
}

int ctl_server_new(sd_event *e, int listen_fd, const struct ctl_limits *limits, ctl_handler_fn handler, void *userdata,
		   struct ctl_server **ret)
{
	_cleanup_(ctl_server_freep) struct ctl_server *s = NULL;
	int r, flags;

	s = calloc(1, sizeof(*s));
	if (!s) {
		safe_close(listen_fd);
		return -ENOMEM;
	}
	s->fd = listen_fd;
	s->epfd = -1;
	s->event = sd_event_ref(e);
	s->limits = *limits;
	s->handler = handler;
	s->userdata = userdata;
	s->own_uid = geteuid();

	/* A passed socket may be blocking; accept must never wait. */
	flags = fcntl(s->fd, F_GETFL);
	if (flags < 0 || fcntl(s->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	r = sd_event_add_io(e, &s->listen_source, s->fd, EPOLLIN, on_listen, s);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(s->listen_source, "control-listen");
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0)
		return -errno;
	r = sd_event_add_io(e, &s->conns_source, s->epfd, EPOLLIN, on_conns_ready, s);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(s->conns_source, "control-connections");
	r = sd_event_add_time(e, &s->retry_source, CLOCK_MONOTONIC, UINT64_MAX, USEC_PER_MSEC, on_retry, s);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(s->retry_source, SD_EVENT_OFF);
	(void)sd_event_source_set_description(s->retry_source, "control-accept-retry");
	r = sd_event_add_time(e, &s->throttle_timer, CLOCK_MONOTONIC, UINT64_MAX, USEC_PER_MSEC, on_throttle, s);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(s->throttle_timer, SD_EVENT_OFF);
	(void)sd_event_source_set_description(s->throttle_timer, "control-throttle");
	*ret = TAKE_PTR(s);
	return 0;
}

struct ctl_server *ctl_server_free(struct ctl_server *s)
{
	if (!s)
		return NULL;
	while (s->conns)
		conn_free(s->conns);
	sd_event_source_disable_unref(s->listen_source);
	sd_event_source_disable_unref(s->retry_source);
	sd_event_source_disable_unref(s->throttle_timer);
	sd_event_source_disable_unref(s->conns_source);
	safe_close(s->epfd);
	safe_close(s->fd);
	ctl_uid_counts_done(&s->uid_counts);
	if (s->unlink_path) {
		(void)unlink(s->unlink_path);
		free(s->unlink_path);
	}
	sd_event_unref(s->event);
	free(s);
	return NULL;
}

void ctl_server_set_limits(struct ctl_server *s, const struct ctl_limits *limits)
{
	s->limits = *limits;
}

void ctl_server_set_group(struct ctl_server *s, bool has_group, gid_t gid)
{
	s->has_group = has_group;
	s->gid = gid;
}

int ctl_server_set_unlink_path(struct ctl_server *s, const char *path)
{
	char *p = strdup(path);

	if (!p)
		return -ENOMEM;
	free(s->unlink_path);
	s->unlink_path = p;
	return 0;
}

unsigned ctl_server_n_connections(const struct ctl_server *s)
{
	return s->n_conns;
}

/* Whether something listens on path (a non-blocking connect attempt). */
static bool socket_is_live(const struct sockaddr_un *sa)
{
	_cleanup_(closep) int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return true; /* cannot tell: do not remove it */
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return true;
	return errno != ECONNREFUSED && errno != ENOENT;
}

int ctl_listen_unix(const char *path, mode_t mode, gid_t gid, int *ret_fd, struct error *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_(closep) int fd = -1;
	struct stat st;
	mode_t old;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return error_set(err, -ENAMETOOLONG, "%s: socket path too long", path);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return error_set(err, -errno, "socket: %s", strerror(errno));

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return error_set(err, -EEXIST, "%s: exists and is not a socket", path);
		if (socket_is_live(&sa))
			return error_set(err, -EADDRINUSE, "%s: another goodputd answers there", path);
		if (unlink(path) < 0 && errno != ENOENT)
			return error_set(err, -errno, "%s: removing the stale socket: %s", path, strerror(errno));
	}

	/* Create the file with the final mode, so nobody connects in between. */
	old = umask(0777 & ~mode);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0)
		return error_set(err, -errno, "%s: bind: %s", path, strerror(errno));
	if (chmod(path, mode) < 0) {
		r = error_set(err, -errno, "%s: chmod: %s", path, strerror(errno));
		goto fail;
	}
	if (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) < 0) {
		r = error_set(err, -errno, "%s: chown to group %u: %s", path, (unsigned)gid, strerror(errno));
		goto fail;
	}
	if (listen(fd, SOMAXCONN) < 0) {
		r = error_set(err, -errno, "%s: listen: %s", path, strerror(errno));
		goto fail;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
fail:
	(void)unlink(path);
	return r;
}

int ctl_listen_fds(int *ret_fd, struct error *err)
{
	int n = sd_listen_fds(1), r;

	if (n < 0)
		return error_set(err, n, "sd_listen_fds: %s", strerror(-n));
	if (n == 0)
		return 0;
	if (n > 1)
		return error_set(err, -EINVAL, "systemd passed %d sockets, expected one (goodputd.socket)", n);
	r = sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0);
	if (r < 0)
		return error_set(err, r, "the passed socket: %s", strerror(-r));
	if (r == 0)
		return error_set(err, -EINVAL, "the passed socket is not a listening UNIX stream socket");
	*ret_fd = SD_LISTEN_FDS_START;
	return 1;
}
