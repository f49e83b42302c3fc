/* deploy-exec.c — the `exec` deployer: the server as a child process.
 *
 * The server is spawned with posix_spawnp (no shell) in a process group of
 * its own, with stdin from /dev/null, stdout and stderr appended to the
 * trial's log file, an empty signal mask and default signal dispositions.
 * While it starts, a timer polls: first, for servers told to bind port 0,
 * the log for the line that announces the port; then the health path, with
 * a tiny non-blocking HTTP/1.1 GET on the loop (connect, write, read the
 * status line). A child source watches for the process exiting, and a
 * second timer bounds the start-up.
 *
 * Teardown sends SIGTERM to the whole group, SIGKILL after the grace period,
 * and then polls until the group is gone and the port can be bound again, so
 * the next trial finds the host clean. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "deploy-internal.h"
#include "macro.h"
#include "spawn-util.h"
#include "time-util.h"

extern char **environ;

#define HEALTH_TIMEOUT_USEC (5 * USEC_PER_SEC)
#define REAP_INTERVAL_USEC  (50 * USEC_PER_MSEC)
#define PORT_WAIT_USEC      (10 * USEC_PER_SEC)
#define TAIL_LINES          20

struct exec_state {
	pid_t pid;
	bool exited;
	int exit_code, exit_signal;
	uint64_t log_offset;  /* where this run's output starts */
	uint64_t scan_offset; /* announce-line scanning position */
	sd_event_source *child_source, *timeout_source, *poll_source, *kill_source, *reap_source;
	/* one health request at a time */
	sd_event_source *health_source;
	int health_fd;
	uint64_t health_started_usec;
	bool health_sent;
	char health_buf[256];
	size_t health_len;
	char health_host[64];
	/* teardown */
	enum deploy_state final_state; /* STOPPED or FAILED */
	uint64_t reap_deadline_usec;
	bool killed;
};

static struct exec_state *X(struct deployment *d)
{
	return d->impl;
}

static void health_abort(struct deployment *d)
{
	struct exec_state *x = X(d);

	x->health_source = sd_event_source_disable_unref(x->health_source);
	x->health_fd = safe_close(x->health_fd);
	x->health_sent = false;
	x->health_len = 0;
}

static void stop_start_watch(struct deployment *d)
{
	struct exec_state *x = X(d);

	health_abort(d);
	x->poll_source = sd_event_source_disable_unref(x->poll_source);
	x->timeout_source = sd_event_source_disable_unref(x->timeout_source);
}

static char *tail(struct deployment *d)
{
	char *t = NULL;

	if (deploy_log_tail(d->log_path, X(d)->log_offset, TAIL_LINES, &t) < 0)
		return NULL;
	return t;
}

static void describe_exit(const struct exec_state *x, char *buf, size_t size)
{
	if (x->exit_signal)
		snprintf(buf, size, "killed by signal %d (%s)", x->exit_signal, strsignal(x->exit_signal));
	else
		snprintf(buf, size, "exited with status %d", x->exit_code);
}

/* ---- teardown ---- */

static int on_reap(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct exec_state *x = X(d);
	bool group_gone = kill(-(pid_t)d->pgid, 0) < 0 && errno == ESRCH;
	bool port_free = !d->port || deploy_port_is_free(d->host, d->port);
	uint64_t now = mono_usec();

	if (!group_gone && !x->killed && now >= x->reap_deadline_usec - PORT_WAIT_USEC) {
		/* Stragglers after the leader's exit and the grace period: kill them. */
		(void)kill(-(pid_t)d->pgid, SIGKILL);
		x->killed = true;
	}
	if ((group_gone && port_free) || now >= x->reap_deadline_usec) {
		if (!port_free && group_gone) {
			char *m = NULL;
			if (asprintf(&m, "%s%sport %u still in use after teardown", d->message ? d->message : "",
				     d->message ? "; " : "", d->port) >= 0) {
				free(d->message);
				d->message = m;
			}
		}
		x->reap_source = sd_event_source_disable_unref(x->reap_source);
		deploy_set_state(d, x->final_state);
		return 0;
	}
	(void)sd_event_source_set_time(s, now + REAP_INTERVAL_USEC);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

/* The leader has exited: wait for the rest of the group and the port. */
static void begin_reap(struct deployment *d)
{
	struct exec_state *x = X(d);
	int r;

	x->kill_source = sd_event_source_disable_unref(x->kill_source);
	if (x->reap_source)
		return;
	x->reap_deadline_usec = mono_usec() + d->stop_timeout_usec + PORT_WAIT_USEC;
	r = sd_event_add_time(d->event, &x->reap_source, CLOCK_MONOTONIC, mono_usec(), 1000, on_reap, d);
	if (r < 0) {
		/* Cannot wait: report now rather than hang. */
		deploy_set_state(d, x->final_state);
		return;
	}
	(void)sd_event_source_set_description(x->reap_source, "deploy-reap");
}

static int on_kill(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct exec_state *x = X(d);

	x->kill_source = sd_event_source_disable_unref(x->kill_source);
	if (!x->exited) {
		(void)kill(-(pid_t)d->pgid, SIGKILL);
		x->killed = true;
	}
	return 0;
}

static void begin_terminate(struct deployment *d, enum deploy_state final)
{
	struct exec_state *x = X(d);
	int r;

	stop_start_watch(d);
	x->final_state = final;
	d->state = DEPLOY_STOPPING;
	if (x->exited) {
		begin_reap(d);
		return;
	}
	(void)kill(-(pid_t)d->pgid, SIGTERM);
	r = sd_event_add_time_relative(d->event, &x->kill_source, CLOCK_MONOTONIC, d->stop_timeout_usec, 1000, on_kill,
				       d);
	if (r < 0) {
		(void)kill(-(pid_t)d->pgid, SIGKILL);
		x->killed = true;
		return;
	}
	(void)sd_event_source_set_description(x->kill_source, "deploy-kill");
}

/* ---- the child ---- */

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct deployment *d = userdata;
	struct exec_state *x = X(d);
	_cleanup_(freep) char *t = NULL;
	char how[96];

	x->exited = true;
	if (si->si_code == CLD_EXITED)
		x->exit_code = si->si_status;
	else
		x->exit_signal = si->si_status;
	x->child_source = sd_event_source_disable_unref(x->child_source);
	describe_exit(x, how, sizeof(how));

	switch (d->state) {
	case DEPLOY_STARTING:
		t = tail(d);
		if (deploy_log_matches_oom(d, x->log_offset))
			deploy_set_failure(d, DEPLOY_FAILURE_OOM, "out of memory at start-up (%s); last log lines:\n%s",
					   how, t ? t : "");
		else
			deploy_set_failure(d, DEPLOY_FAILURE_CRASHED, "%s during start-up; last log lines:\n%s", how,
					   t ? t : "");
		stop_start_watch(d);
		x->final_state = DEPLOY_FAILED;
		d->state = DEPLOY_STOPPING;
		begin_reap(d);
		break;
	case DEPLOY_READY:
		t = tail(d);
		if (deploy_log_matches_oom(d, x->log_offset))
			deploy_set_failure(d, DEPLOY_FAILURE_OOM,
					   "out of memory while serving (%s); last log lines:\n%s", how, t ? t : "");
		else
			deploy_set_failure(d, DEPLOY_FAILURE_CRASHED, "%s while serving; last log lines:\n%s", how,
					   t ? t : "");
		x->final_state = DEPLOY_FAILED;
		d->state = DEPLOY_STOPPING;
		begin_reap(d);
		break;
	case DEPLOY_STOPPING:
		begin_reap(d);
		break;
	default:
		break;
	}
	return 0;
}

static int on_startup_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	_cleanup_(freep) char *t = NULL;

	if (d->state != DEPLOY_STARTING)
		return 0;
	t = tail(d);
	deploy_set_failure(
		d, DEPLOY_FAILURE_STARTUP_TIMEOUT, "%s did not answer 200 within %.0f s (%s); last log lines:\n%s",
		d->health_path, usec_to_sec(d->startup_timeout_usec),
		d->port ? "the server never became healthy" : "the server never announced its port", t ? t : "");
	begin_terminate(d, DEPLOY_FAILED);
	return 0;
}

/* ---- readiness ---- */

/* Looks for "<prefix>HOST:PORT" on a complete line of the log. */
static void scan_announce(struct deployment *d)
{
	(void)deploy_scan_announce(d, d->announce_prefix, &X(d)->scan_offset);
}

static void became_ready(struct deployment *d)
{
	stop_start_watch(d);
	deploy_set_state(d, DEPLOY_READY);
}

static int on_health_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct deployment *d = userdata;
	struct exec_state *x = X(d);
	char req[512];
	ssize_t n;
	int e = 0;
	socklen_t len = sizeof(e);

	if (!x->health_sent) {
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0 || e != 0) {
			health_abort(d); /* not listening yet; the next poll tries again */
			return 0;
		}
		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s:%u\r\nConnection: close\r\n\r\n",
			 d->health_path, x->health_host, d->port);
		n = send(fd, req, strlen(req), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n != (ssize_t)strlen(req)) {
			health_abort(d);
			return 0;
		}
		x->health_sent = true;
		(void)sd_event_source_set_io_events(s, EPOLLIN);
		return 0;
	}
	n = recv(fd, x->health_buf + x->health_len, sizeof(x->health_buf) - 1 - x->health_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n > 0)
		x->health_len += (size_t)n;
	x->health_buf[x->health_len] = 0;
	if (strstr(x->health_buf, "\r\n") || n <= 0 || x->health_len >= sizeof(x->health_buf) - 1) {
		unsigned status = 0;

		(void)sscanf(x->health_buf, "HTTP/%*u.%*u %u", &status);
		health_abort(d);
		if (status == 200 && d->state == DEPLOY_STARTING)
			became_ready(d);
	}
	return 0;
}

static void health_begin(struct deployment *d)
{
	struct exec_state *x = X(d);
	struct sockaddr_storage ss;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	int r;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, d->host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(d->port);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, d->host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(d->port);
		len = sizeof(*in6);
	} else
		return;
	snprintf(x->health_host, sizeof(x->health_host), "%s", d->host);
	x->health_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (x->health_fd < 0)
		return;
	if (connect(x->health_fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		health_abort(d);
		return;
	}
	r = sd_event_add_io(d->event, &x->health_source, x->health_fd, EPOLLOUT, on_health_io, d);
	if (r < 0) {
		health_abort(d);
		return;
	}
	(void)sd_event_source_set_description(x->health_source, "deploy-health");
	x->health_started_usec = mono_usec();
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct exec_state *x = X(d);

	if (d->state != DEPLOY_STARTING)
		return 0;
	if (!d->port)
		scan_announce(d);
	/* A request that hangs is dropped and tried again. */
	if (x->health_source && mono_usec() - x->health_started_usec > HEALTH_TIMEOUT_USEC)
		health_abort(d);
	if (d->port && !x->health_source)
		health_begin(d);
	(void)sd_event_source_set_time(s, mono_usec() + d->health_interval_usec);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

/* ---- spawn ---- */

/* environ with the command's NAME=value entries replacing same-named ones. */
static char **build_env(char **extra)
{
	size_t n = 0, k = 0, m = 0;
	char **env;

	while (environ && environ[n])
		n++;
	while (extra && extra[m])
		m++;
	env = calloc(n + m + 1, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t len = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		bool replaced = false;

		for (size_t j = 0; j < m && !replaced; j++)
			replaced = strncmp(extra[j], environ[i], len) == 0 && extra[j][len] == '=';
		if (!replaced)
			env[k++] = environ[i];
	}
	for (size_t j = 0; j < m; j++)
		env[k++] = extra[j];
	return env;
}

static int exec_start(struct deployment *d, struct error *err)
{
	struct exec_state *x;
	_cleanup_(closep) int log_fd = -1;
	_cleanup_(freep) char **env = NULL;
	struct stat st;
	int r;

	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->health_fd = -1;
	d->impl = x;

	log_fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
	if (log_fd < 0)
		return error_set(err, -errno, "deploy: cannot open the log %s: %s", d->log_path, strerror(errno));
	/* Say in the log what ran, for whoever reads it later. */
	struct engine_command shown = { .argv = d->argv, .env = d->env };
	_cleanup_(freep) char *cmdline = engine_command_format(&shown);
	if (cmdline)
		(void)dprintf(log_fd, "==> goodput: starting: %s\n", cmdline);
	if (fstat(log_fd, &st) < 0)
		return error_set(err, -errno, "deploy: %s: %s", d->log_path, strerror(errno));
	x->log_offset = x->scan_offset = (uint64_t)st.st_size;
	env = build_env(d->env);
	if (!env)
		return -ENOMEM;

	/* sd-event watches children through SIGCHLD, which must be blocked. */
	r = spawn_block_sigchld();
	if (r < 0)
		return error_set(err, r, "deploy: cannot block SIGCHLD: %s", strerror(-r));
	r = spawn_process(d->argv, env, log_fd, &x->pid);
	if (r < 0)
		return error_set(err, r, "deploy: cannot run %s: %s", d->argv[0], strerror(-r));
	d->pgid = x->pid;

	r = sd_event_add_child(d->event, &x->child_source, x->pid, WEXITED, on_child, d);
	if (r < 0) {
		(void)kill(-x->pid, SIGKILL);
		(void)waitpid(x->pid, NULL, 0);
		x->exited = true;
		return error_set(err, r, "deploy: cannot watch the server process: %s", strerror(-r));
	}
	(void)sd_event_source_set_description(x->child_source, "deploy-child");
	r = sd_event_add_time_relative(d->event, &x->timeout_source, CLOCK_MONOTONIC, d->startup_timeout_usec, 1000,
				       on_startup_timeout, d);
	if (r >= 0) {
		(void)sd_event_source_set_description(x->timeout_source, "deploy-startup-timeout");
		r = sd_event_add_time_relative(d->event, &x->poll_source, CLOCK_MONOTONIC,
					       MIN(d->health_interval_usec, 50 * USEC_PER_MSEC), 1000, on_poll, d);
	}
	if (r < 0)
		return error_set(err, r, "deploy: cannot arm timers: %s", strerror(-r));
	(void)sd_event_source_set_description(x->poll_source, "deploy-poll");
	return 0;
}

static int exec_stop(struct deployment *d)
{
	begin_terminate(d, DEPLOY_STOPPED);
	return 0;
}

static void exec_destroy(struct deployment *d)
{
	struct exec_state *x = X(d);

	if (!x)
		return;
	health_abort(d);
	x->child_source = sd_event_source_disable_unref(x->child_source);
	x->timeout_source = sd_event_source_disable_unref(x->timeout_source);
	x->poll_source = sd_event_source_disable_unref(x->poll_source);
	x->kill_source = sd_event_source_disable_unref(x->kill_source);
	x->reap_source = sd_event_source_disable_unref(x->reap_source);
	if (x->pid > 0 && !x->exited) {
		/* Hard end: the group dies now; reaping the leader takes milliseconds. */
		(void)kill(-x->pid, SIGKILL);
		while (waitpid(x->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	free(x);
	d->impl = NULL;
}

const struct deploy_ops deploy_exec_ops = {
	.name = "exec",
	.start = exec_start,
	.stop = exec_stop,
	.destroy = exec_destroy,
};
