/* client-poll.c — libcurl's multi interface on the caller's sd-event loop,
 * every ready socket served in one wake-up.
 *
 * curl says which sockets to watch (socket callback) and when to call it
 * back (timer callback). The sockets are not sd-event sources of their own:
 * they sit in a private epoll set, and that set's one descriptor is the
 * sd-event source. The reason is sd-event's dispatch: it runs one source per
 * iteration and polls its epoll set again (timeout 0) before the next, so
 * with a source per socket, K sockets ready at once cost K dispatches and K
 * polls that each walk all the sockets still ready — the kernel's work per
 * token grew with the number of tokens arriving together (an engine sends
 * one to every running stream per step). Here one wake-up takes every ready
 * socket in one epoll_wait, hands each to curl, then collects finished
 * transfers and sets curl's timer once. The rest of the program sees the
 * one sd-event loop only; token timestamps are still taken in curl's write
 * callback, when the bytes are read.
 *
 * A registration changes only when curl asks for other events than it
 * has. curl's timer is one sd-event time source (accuracy 1 µs); a timeout of
 * 0 ms is scheduled like any other rather than acted on inside the callback,
 * because curl forbids re-entering curl_multi_socket_action from its own
 * callbacks. While a batch of sockets is served, curl's timer requests are
 * only noted and the last one is applied afterwards. */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "client-internal.h"
#include "macro.h"
#include "time-util.h"

#define READY_MIN 64

static int set_timer(struct probe_client *c, long timeout_ms);

/* Hands one ready socket to curl. */
static void act(struct probe_client *c, int fd, uint32_t revents)
{
	int action = 0, running;

	if (revents & EPOLLIN)
		action |= CURL_CSELECT_IN;
	if (revents & EPOLLOUT)
		action |= CURL_CSELECT_OUT;
	if (revents & (EPOLLERR | EPOLLHUP))
		action |= CURL_CSELECT_ERR;
	(void)curl_multi_socket_action(c->multi, fd, action, &running);
}

/* After a batch: curl's last timer request, then finished transfers (whose
 * callbacks may send new requests, which sets the timer directly). */
static void end_batch(struct probe_client *c)
{
	c->in_batch = false;
	if (c->timer_pending) {
		c->timer_pending = false;
		(void)set_timer(c, c->timer_ms);
	}
	probe_client_process_done(c);
}

void probe_client_serve_ready(struct probe_client *c)
{
	int n;

	n = epoll_wait(c->epoll_fd, c->ready, (int)c->ready_cap, 0);
	if (n <= 0)
		return; /* EINTR, or nothing: the set stays readable if anything is */
	c->in_batch = true;
	/* The fd, not a pointer to our record of it: serving one socket may
	 * make curl close another that is further down this batch. A stale fd
	 * is harmless to curl (unknown: ignored; reused: read finds nothing). */
	for (int i = 0; i < n; i++)
		act(c, c->ready[i].data.fd, c->ready[i].events);
	end_batch(c);
}

void probe_client_run_timers(struct probe_client *c)
{
	int running;

	c->in_batch = true;
	(void)curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	end_batch(c);
}

static int on_sockets(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	probe_client_serve_ready(userdata);
	return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	probe_client_run_timers(userdata);
	return 0;
}

static void sock_free(struct probe_client *c, struct sock *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else
		c->socks = k->next;
	if (k->next)
		k->next->prev = k->prev;
	/* curl may have closed the fd already; then the kernel dropped it */
	(void)epoll_ctl(c->epoll_fd, EPOLL_CTL_DEL, k->fd, NULL);
	c->n_socks--;
	free(k);
}

/* Room for every watched socket in one epoll_wait (best effort: with less,
 * the rest comes in the next wake-up). */
static void grow_ready(struct probe_client *c)
{
	struct epoll_event *a;
	size_t n;

	if (c->n_socks <= c->ready_cap)
		return;
	n = MAX(c->n_socks * 2, (size_t)READY_MIN);
	a = reallocarray(c->ready, n, sizeof(*a));
	if (!a)
		return;
	c->ready = a;
	c->ready_cap = n;
}

static int watch(struct probe_client *c, struct sock *k, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = k->fd };

	if (epoll_ctl(c->epoll_fd, EPOLL_CTL_MOD, k->fd, &ev) < 0 &&
	    (errno != ENOENT || epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, k->fd, &ev) < 0))
		return -errno;
	k->events = events;
	return 0;
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct probe_client *c = userp;
	struct sock *k = socketp;
	struct epoll_event ev = { .data.fd = fd };
	uint32_t events = 0;

	if (what == CURL_POLL_REMOVE) {
		if (k) {
			(void)curl_multi_assign(c->multi, fd, NULL);
			sock_free(c, k);
		}
		return 0;
	}
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		events |= EPOLLIN;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		events |= EPOLLOUT;
	if (k) {
		if (k->events == events)
			return 0; /* the common case: nothing to tell the kernel */
		return watch(c, k, events) < 0 ? -1 : 0;
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		return -1;
	k->fd = fd;
	k->events = events;
	ev.events = events;
	/* EEXIST: an fd number curl closed without telling us, now reused */
	if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0 && (errno != EEXIST || watch(c, k, events) < 0)) {
		free(k);
		return -1;
	}
	k->next = c->socks;
	if (c->socks)
		c->socks->prev = k;
	c->socks = k;
	c->n_socks++;
	grow_ready(c);
	if (curl_multi_assign(c->multi, fd, k) != CURLM_OK) {
		sock_free(c, k);
		return -1;
	}
	return 0;
}

static int set_timer(struct probe_client *c, long timeout_ms)
{
	uint64_t when, cur;
	int r, enabled;

	if (timeout_ms < 0)
		return c->timer && sd_event_source_set_enabled(c->timer, SD_EVENT_OFF) < 0 ? -1 : 0;
	when = mono_usec() + (uint64_t)timeout_ms * USEC_PER_MSEC;
	if (!c->timer) {
		r = sd_event_add_time(c->event, &c->timer, CLOCK_MONOTONIC, when, 1, on_timer, c);
		if (r < 0)
			return -1;
		(void)sd_event_source_set_description(c->timer, "probe-curl-timer");
		return 0;
	}
	/* curl repeats the same deadline after nearly every action, rounded to
	 * milliseconds; moving the timer by that rounding would reprogram the
	 * kernel timer for nothing. */
	if (sd_event_source_get_enabled(c->timer, &enabled) >= 0 && enabled != SD_EVENT_OFF &&
	    sd_event_source_get_time(c->timer, &cur) >= 0 && timeout_ms > 0 &&
	    (cur > when ? cur - when : when - cur) <= USEC_PER_MSEC)
		return 0;
	r = sd_event_source_set_time(c->timer, when);
	if (r >= 0)
		r = sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
	return r < 0 ? -1 : 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct probe_client *c = userp;

	if (c->in_batch) {
		c->timer_ms = timeout_ms;
		c->timer_pending = true;
		return 0;
	}
	return set_timer(c, timeout_ms);
}

int probe_client_poll_init(struct probe_client *c)
{
	int r;

	c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epoll_fd < 0)
		return -errno;
	c->ready = calloc(READY_MIN, sizeof(*c->ready));
	if (!c->ready)
		return -ENOMEM;
	c->ready_cap = READY_MIN;
	r = sd_event_add_io(c->event, &c->sockets_source, c->epoll_fd, EPOLLIN, on_sockets, c);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(c->sockets_source, "probe-curl-sockets");
	if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK)
		return -EINVAL;
	return 0;
}

void probe_client_poll_done(struct probe_client *c)
{
	while (c->socks)
		sock_free(c, c->socks);
	c->sockets_source = sd_event_source_disable_unref(c->sockets_source);
	c->timer = sd_event_source_disable_unref(c->timer);
	c->epoll_fd = safe_close(c->epoll_fd);
	free(c->ready);
	c->ready = NULL;
	c->ready_cap = 0;
}
