/* runner-probe.c — the probe of a real trial in a process of its own (see
 * runner-probe.h for why).
 *
 * The forked copy runs probes/probe.h on a new sd-event loop and writes what
 * happens to a pipe, one line each:
 *
 *   S INDEX SATURATION RATE                      a load point starts
 *   P INDEX SATURATION RATE WARMUP TOTAL SENT DONE FAILED ELAPSED GOOD
 *   L SATURATION HEX<TAB>SHORTFALL               a load point ended: its probe_result
 *   E RESULT HEX<TAB>WHY<TAB>ERROR               the probe ended: its probe_outcome
 *
 * Rates are C99 hex floats ("%a", "inf"), so they arrive bit-exact; a struct
 * goes as the hex of its bytes (the same program lays it out the same way;
 * probe_result holds no pointers, probe_outcome's one pointer, why, goes as
 * text). The parent reads the pipe as it fills and tells its caller each
 * event at once; the E line ends the probe, and an exit without one is the
 * probe's failure, named by how the process ended. */
#include "runner-probe.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "array.h"
#include "child.h"
#include "file-util.h"
#include "macro.h"
#include "parse.h"

#define LINE_MAX_BYTES ((size_t)64 * 1024)

struct runner_probe {
	sd_event *event;
	struct probe_config cfg; /* the caller's, for the forked copy (its strings as they were at the fork) */
	runner_probe_event_fn on_event;
	runner_probe_done_fn on_done;
	void *userdata;
	pid_t parent;

	struct child *child;
	int read_fd;
	sd_event_source *io;
	char *buf;
	size_t len, cap;

	struct runner_probe_point *points;
	size_t n_points, points_cap;
	struct probe_outcome outcome;
	char why[128];
	char error[ERROR_MSG_MAX];
	bool ended;  /* the E line arrived */
	bool done;   /* on_done was called */
	int result;  /* the E line's */
	int calling; /* inside a callback: a free waits until it returns */
	bool free_asked;
};

/* ---- the forked copy ---- */

struct child_state {
	int fd;
	sd_event *event;
	const struct probe_sla *sla;
	bool failed_write;
};

static void child_write(struct child_state *cs, const char *line, size_t len)
{
	if (!cs->failed_write && fd_write_all(cs->fd, line, len) < 0) {
		/* the runner is gone or stopped reading: nothing to measure for */
		cs->failed_write = true;
		(void)sd_event_exit(cs->event, 2);
	}
}

/* Tabs and newlines out of a text that ends a line. */
static void flatten(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r' || *s == '\t')
			*s = ' ';
}

static void child_on_event(struct probe *p, const struct probe_event *ev, void *userdata)
{
	struct child_state *cs = userdata;
	char line[2 * sizeof(struct probe_result) + RUNNER_PROBE_SHORTFALL_MAX + 64];
	size_t n;

	switch (ev->kind) {
	case PROBE_EVENT_LOAD_POINT_START:
		n = (size_t)snprintf(line, sizeof(line), "S %zu %d %a\n", ev->load_point, ev->saturation, ev->rate);
		break;
	case PROBE_EVENT_PROGRESS:
		n = (size_t)snprintf(
			line, sizeof(line),
			"P %zu %d %a %d %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRIu64 " %" PRIu32 "\n",
			ev->load_point, ev->saturation, ev->rate, ev->progress.warmup, ev->progress.total,
			ev->progress.sent, ev->progress.done, ev->progress.failed, ev->progress.elapsed_usec, ev->good);
		break;
	case PROBE_EVENT_LOAD_POINT_DONE: {
		char shortfall[RUNNER_PROBE_SHORTFALL_MAX] = "";

		if (!ev->point)
			return;
		(void)probe_sla_shortfall(ev->point->requests, ev->point->n_requests, cs->sla, shortfall,
					  sizeof(shortfall));
		flatten(shortfall);
		n = (size_t)snprintf(line, sizeof(line), "L %d ", ev->point->saturation);
		n += hex_encode(&ev->point->result, sizeof(ev->point->result), line + n);
		n += (size_t)snprintf(line + n, sizeof(line) - n, "\t%s\n", shortfall);
		break;
	}
	default:
		return;
	}
	child_write(cs, line, MIN(n, sizeof(line) - 1));
}

static void child_on_done(struct probe *p, int r, void *userdata)
{
	struct child_state *cs = userdata;
	char line[2 * sizeof(struct probe_outcome) + 128 + ERROR_MSG_MAX + 64];
	char why[128], error[ERROR_MSG_MAX];
	struct probe_outcome o;
	size_t n;

	probe_get_outcome(p, &o);
	snprintf(why, sizeof(why), "%s", o.why ? o.why : "");
	snprintf(error, sizeof(error), "%s", r < 0 ? probe_error(p) : "");
	flatten(why);
	flatten(error);
	o.why = NULL;
	n = (size_t)snprintf(line, sizeof(line), "E %d ", r);
	n += hex_encode(&o, sizeof(o), line + n);
	n += (size_t)snprintf(line + n, sizeof(line) - n, "\t%s\t%s\n", why, error);
	child_write(cs, line, MIN(n, sizeof(line) - 1));
	(void)sd_event_exit(cs->event, 0);
}

/* The end line of a probe that could not start. */
static void child_fail(struct child_state *cs, int r, const char *msg)
{
	char line[ERROR_MSG_MAX + 2 * sizeof(struct probe_outcome) + 64], error[ERROR_MSG_MAX];
	struct probe_outcome o = { .best_point = SIZE_MAX, .failed_point = SIZE_MAX };
	size_t n;

	snprintf(error, sizeof(error), "%s", msg);
	flatten(error);
	n = (size_t)snprintf(line, sizeof(line), "E %d ", r < 0 ? r : -EIO);
	n += hex_encode(&o, sizeof(o), line + n);
	n += (size_t)snprintf(line + n, sizeof(line) - n, "\t\t%s\n", error);
	child_write(cs, line, MIN(n, sizeof(line) - 1));
}

/* In the forked copy: runs the probe on a loop of its own. */
static int probe_child(void *userdata, int out_fd)
{
	struct runner_probe *rp = userdata;
	struct child_state cs = { .fd = out_fd, .sla = &rp->cfg.sla };
	struct probe *p = NULL;
	struct error err = { 0 };
	int r;

	/* it measures for the runner alone: gone with it, and holding nothing
	 * of its (the store, the control socket, a lock) but the pipe */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != rp->parent)
		return 3;
	(void)prctl(PR_SET_NAME, "goodput-probe");
	if (out_fd > 3)
		(void)close_range(3, (unsigned)out_fd - 1, 0);
	(void)close_range((unsigned)MAX(out_fd + 1, 3), ~0U, 0);
	(void)signal(SIGPIPE, SIG_IGN);

	r = sd_event_new(&cs.event);
	if (r < 0) {
		child_fail(&cs, r, "cannot make an event loop");
		return 1;
	}
	r = probe_new(cs.event, &rp->cfg, &p, &err);
	if (r >= 0) {
		r = probe_start(p, child_on_event, child_on_done, &cs);
		if (r < 0)
			error_set(&err, r, "%s", probe_error(p));
	}
	if (r >= 0)
		r = sd_event_loop(cs.event);
	else
		child_fail(&cs, r, error_str(&err, r));
	probe_free(p);
	sd_event_unref(cs.event);
	return r < 0 ? 1 : r;
}

/* ---- the parent ---- */

static void really_free(struct runner_probe *p)
{
	p->io = sd_event_source_disable_unref(p->io);
	p->read_fd = safe_close(p->read_fd);
	/* killed now, reaped by the loop: a large process takes a while to go */
	p->child = child_abandon(p->child);
	free(p->buf);
	free(p->points);
	sd_event_unref(p->event);
	free(p);
}

struct runner_probe *runner_probe_free(struct runner_probe *p)
{
	if (!p)
		return NULL;
	if (p->calling > 0) {
		/* from one of its callbacks: freed when that returns */
		p->free_asked = true;
		p->child = child_abandon(p->child);
		return NULL;
	}
	really_free(p);
	return NULL;
}

/* After a callback: false when p was freed in it (the caller returns at once). */
static bool called_back(struct runner_probe *p)
{
	p->calling--;
	if (p->calling == 0 && p->free_asked) {
		really_free(p);
		return false;
	}
	return !p->free_asked;
}

static void finish(struct runner_probe *p, int r)
{
	if (p->done)
		return;
	p->done = true;
	p->calling++;
	p->on_done(p, r, p->userdata);
	(void)called_back(p);
}

static int parse_common(const char *s, size_t *ret_index, int *ret_sat, double *ret_rate, int *ret_used)
{
	return sscanf(s, "%zu %d %lf%n", ret_index, ret_sat, ret_rate, ret_used) == 3 ? 0 : -EINVAL;
}

/* One line from the child: 0, or -EINVAL when it is not one of ours. */
static int handle_line(struct runner_probe *p, char *line)
{
	struct probe_event ev = { 0 };
	int sat = 0, used = 0;
	char *tab;

	switch (line[0]) {
	case 'S':
	case 'P':
		if (line[1] != ' ' || parse_common(line + 2, &ev.load_point, &sat, &ev.rate, &used) < 0)
			return -EINVAL;
		ev.saturation = sat;
		ev.kind = line[0] == 'S' ? PROBE_EVENT_LOAD_POINT_START : PROBE_EVENT_PROGRESS;
		if (line[0] == 'P') {
			int warmup = 0;

			if (sscanf(line + 2 + used,
				   "%d %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu64 " %" SCNu32, &warmup,
				   &ev.progress.total, &ev.progress.sent, &ev.progress.done, &ev.progress.failed,
				   &ev.progress.elapsed_usec, &ev.good) != 7)
				return -EINVAL;
			ev.progress.warmup = warmup;
		}
		break;
	case 'L': {
		struct runner_probe_point *pt;

		tab = strchr(line, '	');
		if (line[1] != ' ' || !tab || sscanf(line + 2, "%d %n", &sat, &used) != 1)
			return -EINVAL;
		if (ARRAY_GROW(p->points, p->points_cap, p->n_points) < 0)
			return -ENOMEM;
		pt = &p->points[p->n_points];
		*pt = (struct runner_probe_point){ .pt.saturation = sat };
		if (hex_decode(line + 2 + used, (size_t)(tab - (line + 2 + used)), &pt->pt.result,
			       sizeof(pt->pt.result)) < 0)
			return -EINVAL;
		snprintf(pt->shortfall, sizeof(pt->shortfall), "%s", tab + 1);
		ev.kind = PROBE_EVENT_LOAD_POINT_DONE;
		ev.load_point = p->n_points;
		ev.saturation = sat;
		ev.rate = pt->pt.result.request_rate;
		ev.point = &pt->pt;
		p->n_points++;
		break;
	}
	case 'E': {
		char *why, *error;
		struct probe_outcome o;

		why = strchr(line, '	');
		error = why ? strchr(why + 1, '	') : NULL;
		if (line[1] != ' ' || !error || sscanf(line + 2, "%d %n", &p->result, &used) != 1)
			return -EINVAL;
		*why++ = '\0';
		*error++ = '\0';
		if (hex_decode(line + 2 + used, strlen(line + 2 + used), &o, sizeof(o)) < 0)
			return -EINVAL;
		snprintf(p->why, sizeof(p->why), "%s", why);
		snprintf(p->error, sizeof(p->error), "%s", error);
		o.why = p->why[0] ? p->why : NULL;
		p->outcome = o;
		p->ended = true;
		/* told now: the process's exit adds nothing (its results are freed there) */
		p->calling++;
		finish(p, p->result);
		return called_back(p) ? 0 : -ECANCELED;
	}
	default:
		return -EINVAL;
	}
	if (p->on_event) {
		p->calling++;
		p->on_event(p, &ev, p->userdata);
		if (!called_back(p))
			return -ECANCELED;
	}
	return 0;
}

/* Reads what the pipe holds and handles each whole line; -ECANCELED when p
 * was freed by a callback, another error when the child spoke nonsense. */
static int read_pipe(struct runner_probe *p)
{
	for (;;) {
		char *nl;
		ssize_t n;
		size_t start = 0;
		int r;

		if (p->cap - p->len < 4096) {
			if (p->cap >= LINE_MAX_BYTES + 4096)
				return -E2BIG;
			if (ARRAY_GROW(p->buf, p->cap, p->len + 4096) < 0)
				return -ENOMEM;
		}
		n = read(p->read_fd, p->buf + p->len, p->cap - p->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p->len += (size_t)n;
		p->buf[p->len] = '\0';
		while ((nl = memchr(p->buf + start, '\n', p->len - start))) {
			*nl = '\0';
			r = handle_line(p, p->buf + start);
			if (r < 0)
				return r;
			start = (size_t)(nl + 1 - p->buf);
		}
		memmove(p->buf, p->buf + start, p->len - start);
		p->len -= start;
	}
}

static void on_child_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct runner_probe *p = userdata;
	char status[128];
	int r = 0;

	/* what the child wrote before it went is all in the pipe */
	if (p->read_fd >= 0) {
		r = read_pipe(p);
		if (r == -ECANCELED)
			return;
	}
	p->io = sd_event_source_disable_unref(p->io);
	p->read_fd = safe_close(p->read_fd);
	p->child = child_free(p->child);
	if (p->done)
		return;
	if (r < 0 && r != -EPIPE && !p->ended) {
		snprintf(p->error, sizeof(p->error), "the probe's process wrote what it should not (%s)", strerror(-r));
		finish(p, -EPROTO);
		return;
	}
	if (!p->ended) {
		snprintf(p->error, sizeof(p->error), "the probe's process %s before the probe ended",
			 child_exit_to_string(how, status, sizeof(status)));
		finish(p, -ECHILD);
		return;
	}
	finish(p, p->result);
}

static int on_readable(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runner_probe *p = userdata;
	int r;

	r = read_pipe(p);
	if (r == -ECANCELED)
		return 0;
	if (r < 0) {
		/* end of the pipe, or nonsense: the child's exit decides */
		p->io = sd_event_source_disable_unref(p->io);
		if (r != -EPIPE && p->child)
			(void)child_kill(p->child, SIGKILL);
	}
	return 0;
}

int runner_probe_start(sd_event *e, const struct probe_config *cfg, runner_probe_event_fn on_event,
		       runner_probe_done_fn on_done, void *userdata, struct runner_probe **ret, struct error *err)
{
	struct runner_probe *p;
	int fds[2], r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return error_set(err, -ENOMEM, "out of memory");
	p->event = sd_event_ref(e);
	p->cfg = *cfg;
	p->on_event = on_event;
	p->on_done = on_done;
	p->userdata = userdata;
	p->parent = getpid();
	p->read_fd = -1;
	p->outcome.best_point = p->outcome.failed_point = SIZE_MAX;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		r = -errno;
		really_free(p);
		return error_set(err, r, "cannot make the probe's pipe: %s", strerror(-r));
	}
	/* room for seconds of the child's lines should the loop be slow to read */
	(void)fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
	(void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
	p->read_fd = fds[0];
	{
		const struct child_options o = {
			.fork_fn = probe_child,
			.fork_userdata = p,
			.output = CHILD_OUTPUT_FD,
			.out_fd = fds[1],
			.description = "runner-probe",
		};

		r = child_spawn(e, &o, on_child_exit, p, &p->child);
	}
	safe_close(fds[1]);
	if (r >= 0) {
		r = sd_event_add_io(e, &p->io, p->read_fd, EPOLLIN, on_readable, p);
		if (r >= 0)
			(void)sd_event_source_set_description(p->io, "runner-probe-pipe");
	}
	if (r < 0) {
		really_free(p);
		return error_set(err, r, "cannot start the probe's process: %s", strerror(-r));
	}
	*ret = p;
	return 0;
}

const struct runner_probe_point *runner_probe_points(const struct runner_probe *p, size_t *ret_n)
{
	*ret_n = p->n_points;
	return p->points;
}

void runner_probe_outcome(const struct runner_probe *p, struct probe_outcome *ret)
{
	*ret = p->outcome;
}

const char *runner_probe_error(const struct runner_probe *p)
{
	return p->error[0] ? p->error : "unknown error";
}

pid_t runner_probe_pid(const struct runner_probe *p)
{
	return p->child ? child_get_pid(p->child) : 0;
}
