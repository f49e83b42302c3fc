/* server-conns.c — goodput-sim's connections and their deadlines.
 *
 * libmicrohttpd's own timeout is one inactivity timer per connection, and a
 * client that sends a byte now and then never trips it; with no timeout at
 * all, idle sockets fill the connection limit and /health stops answering,
 * and request bodies held one byte short pile up in memory. So every
 * connection is tracked here (MHD_OPTION_NOTIFY_CONNECTION) through the
 * phases of a request, each with a deadline of its own:
 *
 *   idle     accepted, or the previous response is done: the next request
 *            line must come within --idle-timeout;
 *   headers  the request line arrived (MHD_OPTION_URI_LOG_CALLBACK): the
 *            headers must be complete within --header-timeout;
 *   body     the headers are in: the body must be complete within
 *            --body-timeout;
 *   active   the request is being answered (a stream may take minutes):
 *            no deadline.
 *
 * A phase's timeout is the same for every connection, so each phase's list
 * is in deadline order: the head is the next to expire and one timer serves
 * them all. A connection past its deadline is shut down (shutdown(2)); MHD
 * then sees end of file and closes it through its usual path. When the
 * connection limit is nearly reached, the longest-idle connections are
 * closed first to make room: a client that parks sockets loses them to one
 * that sends requests. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "log.h"
#include "macro.h"
#include "server-internal.h"
#include "time-util.h"

struct sim_conn {
	struct MHD_Connection *conn;
	enum sim_conn_phase phase;
	bool listed; /* in waiting[phase], its deadline running */
	uint64_t deadline;
	struct sim_conn *prev, *next;
};

static void list_remove(struct sim_server *s, struct sim_conn *c)
{
	struct sim_conn_list *l;

	if (!c->listed)
		return;
	l = &s->waiting[c->phase]; /* listed: a waiting phase */
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->prev = c->next = NULL;
	c->listed = false;
}

static uint64_t phase_timeout(const struct sim_server *s, enum sim_conn_phase p)
{
	switch (p) {
	case SIM_CONN_IDLE:
		return s->cfg.idle_timeout_usec;
	case SIM_CONN_HEADERS:
		return s->cfg.header_timeout_usec;
	case SIM_CONN_BODY:
		return s->cfg.body_timeout_usec;
	default:
		return 0;
	}
}

static void conn_timer_rearm(struct sim_server *s)
{
	uint64_t t = UINT64_MAX;

	for (int p = 0; p < _SIM_CONN_WAITING_MAX; p++)
		if (s->waiting[p].head)
			t = MIN(t, s->waiting[p].head->deadline);
	if (t == UINT64_MAX) {
		(void)sd_event_source_set_enabled(s->conn_timer, SD_EVENT_OFF);
		return;
	}
	(void)sd_event_source_set_time(s->conn_timer, t);
	(void)sd_event_source_set_enabled(s->conn_timer, SD_EVENT_ONESHOT);
}

static void set_phase(struct sim_server *s, struct sim_conn *c, enum sim_conn_phase p)
{
	uint64_t timeout = phase_timeout(s, p);

	list_remove(s, c);
	c->phase = p;
	/* Lists exist only for phases that wait for the client; a timeout of
	 * 0 means no limit. */
	if (p < _SIM_CONN_WAITING_MAX && timeout > 0) {
		struct sim_conn_list *l = &s->waiting[p];

		c->deadline = mono_usec() + timeout;
		c->prev = l->tail;
		if (l->tail)
			l->tail->next = c;
		else
			l->head = c;
		l->tail = c;
		c->listed = true;
	}
	conn_timer_rearm(s);
}

/* Ends the connection: MHD reads end of file on its next run and closes it. */
static void conn_cut(struct sim_server *s, struct sim_conn *c, enum sim_conn_close reason)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	set_phase(s, c, SIM_CONN_CLOSING);
	s->conns_closed[reason]++;
	/* The socket turns readable (end of file): MHD's epoll reports it. */
	if (ci)
		(void)shutdown(ci->connect_fd, SHUT_RDWR);
	s->n_closing++;
	s->reap_stalled = 0;
	(void)sd_event_source_set_enabled(s->conn_reap, SD_EVENT_ONESHOT);
}

/* MHD reads the end of file of a shut-down connection on one run and frees
 * it (and accepts again when it was at its limit) on a later one, and
 * nothing wakes it for that. So run it until the shut-down connections are
 * gone, giving up after a few runs without progress (the next cut or
 * event starts again). */
static int on_conn_reap(sd_event_source *src, void *userdata)
{
	struct sim_server *s = userdata;
	unsigned before = s->n_closing;

	sim_server_run_mhd(s);
	s->reap_stalled = s->n_closing < before ? 0 : s->reap_stalled + 1;
	if (s->n_closing > 0 && s->reap_stalled < 3)
		(void)sd_event_source_set_enabled(s->conn_reap, SD_EVENT_ONESHOT);
	return 0;
}

static int on_conn_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	static const enum sim_conn_close reasons[] = {
		[SIM_CONN_IDLE] = SIM_CLOSE_IDLE,
		[SIM_CONN_HEADERS] = SIM_CLOSE_HEADERS,
		[SIM_CONN_BODY] = SIM_CLOSE_BODY,
	};
	struct sim_server *s = userdata;
	uint64_t now = mono_usec();

	for (int p = 0; p < _SIM_CONN_WAITING_MAX; p++)
		while (s->waiting[p].head && s->waiting[p].head->deadline <= now) {
			log_debug("closing a connection: %s timeout", p == SIM_CONN_IDLE      ? "idle"
								      : p == SIM_CONN_HEADERS ? "header"
											      : "body");
			conn_cut(s, s->waiting[p].head, reasons[p]);
		}
	conn_timer_rearm(s);
	return 0;
}

static struct sim_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

void sim_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		      enum MHD_ConnectionNotificationCode toe)
{
	struct sim_server *s = cls;
	struct sim_conn *c = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!c)
			return;
		if (c->phase == SIM_CONN_CLOSING)
			s->n_closing--;
		list_remove(s, c);
		s->n_conns--;
		free(c);
		*socket_context = NULL;
		conn_timer_rearm(s);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return; /* untracked: no deadlines, closed by the client or at exit */
	c->conn = conn;
	*socket_context = c;
	s->n_conns++;
	set_phase(s, c, SIM_CONN_IDLE);
	/* Near the limit: make room by closing the longest-idle connection. */
	if (s->n_conns + s->conn_slack > s->conn_limit && s->waiting[SIM_CONN_IDLE].head &&
	    s->waiting[SIM_CONN_IDLE].head != c) {
		log_debug("%u connections: closing the longest idle one", s->n_conns);
		conn_cut(s, s->waiting[SIM_CONN_IDLE].head, SIM_CLOSE_EVICTED);
	}
}

void *sim_conns_uri_logged(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct sim_conn *c = conn_of(conn);

	if (c && c->phase != SIM_CONN_CLOSING)
		set_phase(cls, c, SIM_CONN_HEADERS);
	return NULL; /* the request's own state is made by the access handler */
}

void sim_conns_set_phase(struct sim_server *s, struct MHD_Connection *conn, enum sim_conn_phase p)
{
	struct sim_conn *c = conn_of(conn);

	if (c && c->phase != SIM_CONN_CLOSING && c->phase != p)
		set_phase(s, c, p);
}

int sim_conns_init(struct sim_server *s, unsigned limit)
{
	int r;

	s->conn_limit = limit;
	/* Room kept free for clients that come to send a request. */
	s->conn_slack = MAX(limit / 64, 1u);
	r = sd_event_add_time(s->event, &s->conn_timer, CLOCK_MONOTONIC, UINT64_MAX, USEC_PER_MSEC * 10, on_conn_timer,
			      s);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(s->conn_timer, "connection-deadlines");
	(void)sd_event_source_set_enabled(s->conn_timer, SD_EVENT_OFF);
	r = sd_event_add_defer(s->event, &s->conn_reap, on_conn_reap, s);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(s->conn_reap, "connection-reap");
	(void)sd_event_source_set_enabled(s->conn_reap, SD_EVENT_OFF);
	return 0;
}
