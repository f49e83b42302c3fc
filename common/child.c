/* child.c — the one place goodput starts and watches child processes.
 *
 * The servers under test (exec deployer), the operator's deploy, health and
 * teardown hooks (command deployer), the engine's version and help commands
 * (host facts, check-engine), the report writer of goodputd and the twin's
 * planning process all start here. An argv is spawned with posix_spawnp:
 * glibc reports a program that cannot be executed as the spawn's own error,
 * so a typo in a profile fails at once rather than as an exit status 127. A
 * function is run in a fork() whose copy puts itself in its own group and
 * restores the signal state before running it.
 *
 * A server (kept: child-keeper.c) runs under a keeper, the leader of its
 * group, that ends the group when the caller dies, and a held one runs
 * only once the caller has recorded the group (child_release).
 *
 * The leader's exit comes from an sd-event child source, which reaps it
 * after the callback. The process group outlives the leader when it left
 * children behind; child_kill() still reaches them, since Linux does not
 * reuse a pid while a process group of that id exists. Output into a pipe
 * is read as it arrives (the child never blocks on a full pipe: what is over
 * the cap is read and dropped) and drained once more at the exit, so that
 * the callback sees everything the child wrote even when the child source
 * is dispatched before the pipe's last data; a grandchild that keeps the
 * pipe open does not hold the callback back. */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child-internal.h"
#include "time-util.h"

extern char **environ;

#define CAPTURE_DEFAULT (64 * 1024)

struct child {
	sd_event *event;
	child_exit_fn cb;
	void *userdata;
	pid_t pid;
	bool exited;
	struct child_exit exit;
	uint64_t kill_grace_usec;
	sd_event_source *child_source, *timeout_source, *kill_source, *io_source;
	int read_fd; /* capture pipe, -1 */
	int go_fd;   /* a held child's go socket until child_release, -1 */
	char *out;
	size_t out_len, out_max;
	bool truncated;
	bool abandoned; /* child_abandon: the loop owns the watch and frees c */
};

int child_block_sigchld(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	return 0;
}

const char *child_exit_to_string(const struct child_exit *e, char *buf, size_t size)
{
	if (e->code == CLD_EXITED)
		snprintf(buf, size, "exited with status %d", e->status);
	else
		snprintf(buf, size, "killed by signal %d (%s)", e->status, strsignal(e->status));
	return buf;
}

bool child_exit_ok(const struct child_exit *e)
{
	return e->code == CLD_EXITED && e->status == 0 && !e->timed_out;
}

pid_t child_get_pid(const struct child *c)
{
	return c->pid;
}

bool child_is_running(const struct child *c)
{
	return !c->exited;
}

const char *child_get_output(const struct child *c, bool *ret_truncated)
{
	if (ret_truncated)
		*ret_truncated = c->truncated;
	return c->out ? c->out : "";
}

/* ---- spawning ---- */

int child_find_program(const char *prog, char **ret)
{
	const char *path = getenv("PATH");
	char buf[4096];
	int r = -ENOENT;

	if (strchr(prog, '/')) {
		if (access(prog, X_OK) < 0)
			return -errno;
		snprintf(buf, sizeof(buf), "%s", prog);
		r = 0;
	}
	for (const char *p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin"; r != 0 && *p;) {
		size_t n = strcspn(p, ":");
		struct stat st;

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, n ? p : ".", prog);
		if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
			r = access(buf, X_OK) == 0 ? 0 : -EACCES;
		p += n;
		if (*p == ':')
			p++;
	}
	if (r < 0)
		return r;
	if (ret && !(*ret = strdup(buf)))
		return -ENOMEM;
	return 0;
}

static int spawn_argv(const struct child_options *o, int out_fd, pid_t *ret_pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t empty, all;
	int r;

	/* posix_spawnp reports a program it cannot execute itself, but not under
	 * every runtime (valgrind runs the child as a fork whose exec error is an
	 * exit status 127): looking first makes it an error of the spawn everywhere. */
	r = child_find_program(o->argv[0], NULL);
	if (r < 0)
		return r;
	sigemptyset(&empty);
	sigfillset(&all);
	r = posix_spawn_file_actions_init(&fa);
	if (r != 0)
		return -r;
	r = posix_spawnattr_init(&attr);
	if (r != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -r;
	}
	r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (r == 0 && out_fd >= 0)
		r = posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
	if (r == 0 && out_fd >= 0)
		r = posix_spawn_file_actions_adddup2(&fa, out_fd, STDERR_FILENO);
	if (r == 0)
		r = posix_spawnattr_setflags(&attr,
					     POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (r == 0)
		r = posix_spawnattr_setpgroup(&attr, 0);
	if (r == 0)
		r = posix_spawnattr_setsigmask(&attr, &empty);
	if (r == 0)
		r = posix_spawnattr_setsigdefault(&attr, &all);
	if (r == 0)
		r = posix_spawnp(ret_pid, o->argv[0], &fa, &attr, o->argv, o->envp ? o->envp : environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return -r;
}

/* In the forked copy: a group of its own, the signal state of a fresh
 * process, nothing of the caller's but out_fd (its lock, its database, its
 * sockets), and an end with the caller's. Then the function. Never returns. */
static _noreturn_ void run_forked(const struct child_options *o, int out_fd, pid_t parent)
{
	sigset_t empty;

	(void)setpgid(0, 0);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)signal(sig, SIG_DFL);
	sigemptyset(&empty);
	(void)sigprocmask(SIG_SETMASK, &empty, NULL);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(CHILD_KEEPER_FAILED);
	if (out_fd > 3)
		(void)close_range(3, (unsigned)out_fd - 1, 0);
	(void)close_range((unsigned)MAX(out_fd + 1, 3), ~0U, 0);
	_exit(o->fork_fn(o->fork_userdata, out_fd));
}

static int spawn_fork(const struct child_options *o, int out_fd, pid_t *ret_pid)
{
	pid_t parent = getpid(), pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		run_forked(o, out_fd, parent);
	/* Also here, so that a kill of the group right after the fork reaches it. */
	(void)setpgid(pid, pid);
	*ret_pid = pid;
	return 0;
}

/* The program under a keeper (child-keeper.c); held: *ret_go_fd is the
 * socket child_release writes to. */
static int spawn_kept(const struct child_options *o, int out_fd, pid_t *ret_pid, int *ret_go_fd)
{
	_cleanup_(freep) char *path = NULL;
	int go[2] = { -1, -1 }, r;
	struct keeper_args a = {
		.argv = o->argv,
		.envp = o->envp ? o->envp : environ,
		.out_fd = out_fd,
		.go_fd = -1,
		.parent = getpid(),
		.grace_usec = o->kill_grace_usec,
	};
	pid_t pid;

	r = child_find_program(o->argv[0], &path);
	if (r < 0)
		return r;
	a.path = path;
	if (o->hold) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0)
			return -errno;
		a.go_fd = go[0];
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		safe_close(go[0]);
		safe_close(go[1]);
		return r;
	}
	if (pid == 0)
		child_keeper_run(&a);
	(void)setpgid(pid, pid);
	safe_close(go[0]);
	*ret_pid = pid;
	*ret_go_fd = go[1];
	return 0;
}

/* ---- watching ---- */

static void append_output(struct child *c, const char *buf, size_t n)
{
	size_t keep = c->out_len < c->out_max ? MIN(n, c->out_max - c->out_len) : 0;
	char *nb;

	if (keep < n)
		c->truncated = true;
	if (keep == 0)
		return;
	nb = realloc(c->out, c->out_len + keep + 1);
	if (!nb) {
		c->truncated = true;
		return;
	}
	for (size_t i = 0; i < keep; i++)
		nb[c->out_len + i] = buf[i] ? buf[i] : ' ';
	c->out_len += keep;
	nb[c->out_len] = 0;
	c->out = nb;
}

/* Reads what the pipe holds now; at EOF (or an error) closes it. */
static void read_output(struct child *c)
{
	char buf[8192];

	while (c->read_fd >= 0) {
		ssize_t n = read(c->read_fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			c->io_source = sd_event_source_disable_unref(c->io_source);
			c->read_fd = safe_close(c->read_fd);
			return;
		}
		append_output(c, buf, (size_t)n);
	}
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	read_output(userdata);
	return 0;
}

static int on_child_exit(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct child *c = userdata;

	c->exited = true;
	if (c->abandoned) {
		/* the loop's reference goes: the source is freed once this
		 * dispatch (which reaps the leader) is over, and c with it */
		(void)sd_event_source_set_floating(s, false);
		return 0;
	}
	c->exit.code = si->si_code;
	c->exit.status = si->si_status;
	c->child_source = sd_event_source_disable_unref(c->child_source);
	c->timeout_source = sd_event_source_disable_unref(c->timeout_source);
	c->kill_source = sd_event_source_disable_unref(c->kill_source);
	read_output(c);
	/* Whatever a grandchild may still write is not waited for. */
	c->io_source = sd_event_source_disable_unref(c->io_source);
	c->read_fd = safe_close(c->read_fd);
	/* c may be freed by the callback: touch nothing after it. */
	c->cb(c, &c->exit, c->userdata);
	return 0;
}

static int on_kill(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct child *c = userdata;

	c->kill_source = sd_event_source_disable_unref(c->kill_source);
	if (!c->exited)
		(void)kill(-c->pid, SIGKILL);
	return 0;
}

void child_terminate(struct child *c, uint64_t grace_usec)
{
	if (c->exited)
		return;
	if (grace_usec == 0) {
		(void)kill(-c->pid, SIGKILL);
		return;
	}
	(void)kill(-c->pid, SIGTERM);
	c->kill_source = sd_event_source_disable_unref(c->kill_source);
	if (sd_event_add_time_relative(c->event, &c->kill_source, CLOCK_MONOTONIC, grace_usec, 1000, on_kill, c) < 0) {
		(void)kill(-c->pid, SIGKILL);
		return;
	}
	(void)sd_event_source_set_description(c->kill_source, "child-kill");
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct child *c = userdata;

	c->timeout_source = sd_event_source_disable_unref(c->timeout_source);
	c->exit.timed_out = true;
	child_terminate(c, c->kill_grace_usec);
	return 0;
}

int child_set_timeout(struct child *c, uint64_t usec)
{
	int r;

	c->timeout_source = sd_event_source_disable_unref(c->timeout_source);
	if (usec == 0 || c->exited)
		return 0;
	r = sd_event_add_time_relative(c->event, &c->timeout_source, CLOCK_MONOTONIC, usec, 1000, on_timeout, c);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(c->timeout_source, "child-timeout");
	return 0;
}

int child_kill(struct child *c, int sig)
{
	if (c->pid <= 1)
		return -ESRCH;
	return kill(-c->pid, sig) < 0 ? -errno : 0;
}

/* Starts the process with its output where o says: *ret_read_fd is the
 * capture pipe's read end (-1 without one), *ret_go_fd a held child's go
 * socket (-1). Nothing is allocated before a fork that runs a function, so
 * a forked copy inherits no memory that only a local points to. */
static int start_process(const struct child_options *o, pid_t *ret_pid, int *ret_read_fd, int *ret_go_fd)
{
	int fds[2] = { -1, -1 }, write_fd = -1, r;

	*ret_go_fd = -1;
	if (o->output == CHILD_OUTPUT_FD) {
		if (o->out_fd < 0)
			return -EBADF;
		write_fd = o->out_fd;
	} else if (o->output == CHILD_OUTPUT_CAPTURE) {
		if (pipe2(fds, O_CLOEXEC) < 0)
			return -errno;
		(void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
		write_fd = fds[1];
	}
	if (o->fork_fn)
		r = spawn_fork(o, write_fd, ret_pid);
	else if (o->keeper)
		r = spawn_kept(o, write_fd, ret_pid, ret_go_fd);
	else
		r = spawn_argv(o, write_fd, ret_pid);
	safe_close(fds[1]);
	if (r < 0) {
		safe_close(fds[0]);
		return r;
	}
	*ret_read_fd = fds[0];
	return 0;
}

static int watch(struct child *c, const struct child_options *o)
{
	const char *desc = o->description ? o->description : "child";
	int r;

	r = sd_event_add_child(c->event, &c->child_source, c->pid, WEXITED, on_child_exit, c);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(c->child_source, desc);
	if (c->read_fd >= 0) {
		r = sd_event_add_io(c->event, &c->io_source, c->read_fd, EPOLLIN, on_io, c);
		if (r < 0)
			return r;
		(void)sd_event_source_set_description(c->io_source, desc);
	}
	return child_set_timeout(c, o->timeout_usec);
}

int child_spawn(sd_event *e, const struct child_options *o, child_exit_fn cb, void *userdata, struct child **ret)
{
	_cleanup_(child_freep) struct child *c = NULL;
	int read_fd = -1, go_fd = -1, r;
	pid_t pid;

	if (!o->fork_fn == !(o->argv && o->argv[0]) || ((o->keeper || o->hold) && o->fork_fn) ||
	    (o->hold && !o->keeper))
		return -EINVAL;
	r = child_block_sigchld();
	if (r < 0)
		return r;
	r = start_process(o, &pid, &read_fd, &go_fd);
	if (r < 0)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c) {
		(void)kill(-pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		safe_close(read_fd);
		safe_close(go_fd);
		return -ENOMEM;
	}
	c->go_fd = go_fd;
	c->event = sd_event_ref(e);
	c->cb = cb;
	c->userdata = userdata;
	c->pid = pid;
	c->read_fd = read_fd;
	c->out_max = o->capture_max ? o->capture_max : CAPTURE_DEFAULT;
	c->kill_grace_usec = o->kill_grace_usec;
	r = watch(c, o);
	if (r < 0)
		return r; /* child_free kills and reaps it */
	*ret = TAKE_PTR(c);
	return 0;
}

struct child *child_free(struct child *c)
{
	if (!c)
		return NULL;
	sd_event_source_disable_unref(c->child_source);
	sd_event_source_disable_unref(c->timeout_source);
	sd_event_source_disable_unref(c->kill_source);
	sd_event_source_disable_unref(c->io_source);
	if (!c->exited && c->pid > 0) {
		(void)kill(-c->pid, SIGKILL);
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	safe_close(c->read_fd);
	safe_close(c->go_fd);
	sd_event_unref(c->event);
	free(c->out);
	free(c);
	return NULL;
}

int child_release(struct child *c)
{
	ssize_t n;

	if (c->go_fd < 0)
		return -EALREADY;
	do
		n = send(c->go_fd, "!", 1, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	c->go_fd = safe_close(c->go_fd);
	if (n == 1)
		return 0;
	return n < 0 && errno != EPIPE && errno != ECONNRESET ? -errno : -ESRCH;
}

static void free_abandoned(void *userdata)
{
	struct child *c = userdata;

	/* the loop went before the exit was seen: reap here (killed already) */
	if (!c->exited && c->pid > 0)
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	free(c->out);
	free(c);
}

struct child *child_abandon(struct child *c)
{
	sd_event_source *s;
	sd_event *e;

	if (!c)
		return NULL;
	if (c->exited || !c->child_source)
		return child_free(c);
	(void)kill(-c->pid, SIGKILL);
	c->go_fd = safe_close(c->go_fd);
	s = c->child_source;
	if (sd_event_source_set_destroy_callback(s, free_abandoned) < 0 || sd_event_source_set_floating(s, true) < 0) {
		(void)sd_event_source_set_destroy_callback(s, NULL);
		return child_free(c);
	}
	c->abandoned = true;
	c->timeout_source = sd_event_source_disable_unref(c->timeout_source);
	c->kill_source = sd_event_source_disable_unref(c->kill_source);
	c->io_source = sd_event_source_disable_unref(c->io_source);
	c->read_fd = safe_close(c->read_fd);
	/* from here the loop holds the one reference, to the source, and the
	 * source does not hold the loop: nothing keeps a finished loop alive */
	e = TAKE_PTR(c->event);
	c->child_source = sd_event_source_unref(c->child_source);
	/* the last reference to a loop frees it, its sources and so c: last */
	sd_event_unref(e);
	return NULL;
}

/* ---- to the end, on a loop of its own ---- */

struct run_state {
	bool done;
	struct child_exit exit;
	char *output;
};

static void on_run_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct run_state *s = userdata;

	s->done = true;
	s->exit = *how;
	if (c->out) {
		s->output = c->out;
		c->out = NULL;
		c->out_len = 0;
	}
}

int child_run(const struct child_options *o, struct child_exit *ret_exit, char **ret_output)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	_cleanup_(child_freep) struct child *c = NULL;
	struct run_state s = { 0 };
	int r;

	r = sd_event_new(&e);
	if (r < 0)
		return r;
	r = child_spawn(e, o, on_run_exit, &s, &c);
	if (r < 0)
		return r;
	while (!s.done) {
		r = sd_event_run(e, UINT64_MAX);
		if (r < 0) {
			free(s.output);
			return r;
		}
	}
	*ret_exit = s.exit;
	if (ret_output)
		*ret_output = s.output ? s.output : strdup("");
	else
		free(s.output);
	if (ret_output && !*ret_output)
		return -ENOMEM;
	return 0;
}
