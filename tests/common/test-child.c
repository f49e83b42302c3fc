/* The child-process helper against real processes: exit statuses decoded
 * into words, output captured (capped without blocking the child), the
 * environment and signal state a child starts with, a program that cannot
 * run failing at once, a timeout ending a child that ignores SIGTERM, what
 * a leader leaves behind in its group still reachable, a forked function,
 * freeing a running child killing and reaping it, and abandoning one
 * leaving the reaping to the loop (or to the loop's end). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "tests.h"
#include "time-util.h"

struct outcome {
	bool done;
	struct child_exit ex;
	char output[4096];
	bool truncated;
	size_t len;
	unsigned calls;
};

static void on_exit_cb(struct child *c, const struct child_exit *how, void *userdata)
{
	struct outcome *o = userdata;
	const char *out = child_get_output(c, &o->truncated);

	o->done = true;
	o->calls++;
	o->ex = *how;
	o->len = strlen(out);
	snprintf(o->output, sizeof(o->output), "%s", out);
}

static void run_until(sd_event *e, bool *flag, uint64_t timeout_usec)
{
	uint64_t deadline = mono_usec() + timeout_usec;

	while (!*flag && mono_usec() < deadline)
		CHECK(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
	CHECK_MSG(*flag, "no exit within %.0f s", usec_to_sec(timeout_usec));
}

static void run_for(sd_event *e, uint64_t usec)
{
	uint64_t end = mono_usec() + usec;

	while (mono_usec() < end)
		CHECK(sd_event_run(e, end - mono_usec()) >= 0);
}

static bool is_zombie(pid_t pid)
{
	char path[64], buf[256];
	FILE *f;
	bool z = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f)) {
		const char *p = strrchr(buf, ')');
		z = p && p[1] == ' ' && p[2] == 'Z';
	}
	fclose(f);
	return z;
}

static struct child *spawn_sh(sd_event *e, const char *script, const struct child_options *base, struct outcome *o)
{
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)script, NULL };
	struct child_options opts = *base;
	struct child *c = NULL;

	opts.argv = argv;
	CHECK_INT_EQ(child_spawn(e, &opts, on_exit_cb, o, &c), 0);
	return c;
}

static void test_status_and_capture(sd_event *e)
{
	struct child_options o = { .output = CHILD_OUTPUT_CAPTURE, .description = "test" };
	struct outcome out = { 0 };
	char buf[128];
	struct child *c;

	c = spawn_sh(e, "echo out; echo err >&2; exit 3", &o, &out);
	CHECK(child_get_pid(c) > 1 && child_is_running(c));
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(!child_is_running(c));
	CHECK_INT_EQ(out.ex.code, CLD_EXITED);
	CHECK_INT_EQ(out.ex.status, 3);
	CHECK(!child_exit_ok(&out.ex) && !out.ex.timed_out);
	CHECK_STR_EQ(child_exit_to_string(&out.ex, buf, sizeof(buf)), "exited with status 3");
	CHECK_STR_EQ(out.output, "out\nerr\n");
	c = child_free(c);

	memset(&out, 0, sizeof(out));
	c = spawn_sh(e, "kill -9 $$", &o, &out);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK_STR_EQ(child_exit_to_string(&out.ex, buf, sizeof(buf)), "killed by signal 9 (Killed)");
	child_free(c);

	/* The child's environment is envp alone, its signal mask empty although ours blocks SIGCHLD. */
	memset(&out, 0, sizeof(out));
	o.envp = (char *[]){ (char *)"GOODPUT_TEST_FOO=bar baz", (char *)"PATH=/usr/bin:/bin", NULL };
	c = spawn_sh(e, "echo \"$GOODPUT_TEST_FOO\"; grep SigBlk /proc/self/status; test -t 0 || cat", &o, &out);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(child_exit_ok(&out.ex));
	CHECK_STR_EQ(out.output, "bar baz\nSigBlk:\t0000000000000000\n"); /* stdin is /dev/null: cat ends at once */
	child_free(c);
}

static void test_capture_cap(sd_event *e)
{
	struct child_options o = { .output = CHILD_OUTPUT_CAPTURE, .capture_max = 1000 };
	struct outcome out = { 0 };
	struct child *c;

	/* 1 MiB, far more than a pipe holds: the child must not block on it. */
	c = spawn_sh(e, "head -c 1048576 /dev/zero | tr '\\0' x", &o, &out);
	run_until(e, &out.done, 20 * USEC_PER_SEC);
	CHECK(child_exit_ok(&out.ex));
	CHECK(out.truncated);
	CHECK_INT_EQ(out.len, 1000);
	child_free(c);
}

static void test_cannot_run(sd_event *e)
{
	struct child_options o = { .argv = (char *[]){ (char *)"/nonexistent/program", NULL } };
	struct child *c = NULL;

	CHECK_INT_EQ(child_spawn(e, &o, on_exit_cb, NULL, &c), -ENOENT);
	CHECK(c == NULL);
	o.argv = (char *[]){ (char *)"no-such-program-in-path-xyz", NULL };
	CHECK_INT_EQ(child_spawn(e, &o, on_exit_cb, NULL, &c), -ENOENT);
	o.argv = NULL;
	CHECK_INT_EQ(child_spawn(e, &o, on_exit_cb, NULL, &c), -EINVAL);
}

static void test_timeout(sd_event *e)
{
	struct child_options o = { .timeout_usec = 200 * USEC_PER_MSEC, .kill_grace_usec = 300 * USEC_PER_MSEC };
	struct outcome out = { 0 };
	uint64_t t0 = mono_usec();
	struct child *c;

	/* SIGTERM is ignored (and so by the sleeps it starts): SIGKILL ends it after the grace. */
	c = spawn_sh(e, "trap '' TERM; while :; do sleep 0.05; done", &o, &out);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(out.ex.timed_out && !child_exit_ok(&out.ex));
	CHECK_INT_EQ(out.ex.code, CLD_KILLED);
	CHECK_INT_EQ(out.ex.status, SIGKILL);
	CHECK(mono_usec() - t0 >= 450 * USEC_PER_MSEC);
	CHECK(mono_usec() - t0 < 5 * USEC_PER_SEC);
	CHECK_INT_EQ(out.calls, 1);
	child_free(c);

	/* A timeout taken away, then re-armed; SIGTERM ends a child that does not ignore it. */
	memset(&out, 0, sizeof(out));
	c = spawn_sh(e, "exec sleep 30", &o, &out);
	CHECK_INT_EQ(child_set_timeout(c, 0), 0);
	run_for(e, 500 * USEC_PER_MSEC);
	CHECK(!out.done && child_is_running(c));
	CHECK_INT_EQ(child_set_timeout(c, 100 * USEC_PER_MSEC), 0);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(out.ex.timed_out && out.ex.code == CLD_KILLED && out.ex.status == SIGTERM);
	child_free(c);

	/* child_terminate without a timeout does not count as one. */
	memset(&out, 0, sizeof(out));
	o.timeout_usec = 0;
	c = spawn_sh(e, "exec sleep 30", &o, &out);
	child_terminate(c, 0);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(!out.ex.timed_out && out.ex.code == CLD_KILLED && out.ex.status == SIGKILL);
	child_free(c);
}

/* A leader that exits leaves a process in its group: the group is still
 * reachable through the child, and the exit callback is not held back by
 * the straggler keeping the capture pipe open. */
static void test_straggler(sd_event *e)
{
	struct child_options o = { .output = CHILD_OUTPUT_CAPTURE };
	struct outcome out = { 0 };
	struct child *c;
	pid_t straggler;

	c = spawn_sh(e, "sleep 30 & echo $!", &o, &out);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(child_exit_ok(&out.ex));
	straggler = (pid_t)atoi(out.output);
	CHECK(straggler > 1);
	CHECK_INT_EQ(getpgid(straggler), child_get_pid(c));
	CHECK_INT_EQ(child_kill(c, 0), 0);
	CHECK_INT_EQ(child_kill(c, SIGKILL), 0);
	for (unsigned i = 0; i < 100 && getpgid(straggler) == child_get_pid(c) && !is_zombie(straggler); i++)
		usleep(10000);
	CHECK(getpgid(straggler) != child_get_pid(c) || is_zombie(straggler));
	child_free(c);
}

static int forked(void *userdata, int out_fd)
{
	const char *text = userdata;

	return write(out_fd, text, strlen(text)) == (ssize_t)strlen(text) ? 7 : 1;
}

/* A forked copy keeps no descriptor of ours but its output (a database's
 * lock among them): exit 0 when fd is closed in it. */
static int fd_closed(void *userdata, int out_fd)
{
	return fcntl(*(int *)userdata, F_GETFD) < 0 && errno == EBADF ? 0 : 1;
}

static void test_fork(sd_event *e)
{
	struct child_options o = { .fork_fn = forked,
				   .fork_userdata = (void *)"hello from the copy",
				   .output = CHILD_OUTPUT_CAPTURE };
	struct outcome out = { 0 };
	struct child *c = NULL;

	CHECK_INT_EQ(child_spawn(e, &o, on_exit_cb, &out, &c), 0);
	CHECK_INT_EQ(getpgid(child_get_pid(c)), child_get_pid(c));
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(out.ex.code == CLD_EXITED && out.ex.status == 7);
	CHECK_STR_EQ(out.output, "hello from the copy");
	child_free(c);

	{
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		struct child_options o2 = { .fork_fn = fd_closed, .fork_userdata = &fd };

		CHECK(fd >= 0);
		memset(&out, 0, sizeof(out));
		c = NULL;
		CHECK_INT_EQ(child_spawn(e, &o2, on_exit_cb, &out, &c), 0);
		run_until(e, &out.done, 10 * USEC_PER_SEC);
		CHECK_MSG(out.ex.code == CLD_EXITED && out.ex.status == 0, "the forked copy kept descriptor %d", fd);
		child_free(c);
		close(fd);
	}
}

static void test_free_running(sd_event *e)
{
	struct child_options o = { 0 };
	struct outcome out = { 0 };
	struct child *c;
	pid_t pid;

	c = spawn_sh(e, "sleep 30", &o, &out);
	pid = child_get_pid(c);
	child_free(c);
	/* killed and reaped: the pid is gone, not a zombie */
	CHECK(kill(pid, 0) < 0 && errno == ESRCH);
	CHECK(!out.done);
}

/* Gone from /proc (a zombie still has its entry). */
static bool is_reaped(pid_t pid)
{
	return kill(pid, 0) < 0 && errno == ESRCH;
}

static void test_abandon(sd_event *e)
{
	struct child_options o = { 0 };
	struct outcome out = { 0 };
	sd_event *own = NULL;
	uint64_t end;
	pid_t pid;

	/* killed at once, reaped by the loop, the callback never called */
	CHECK(child_abandon(NULL) == NULL);
	{
		struct child *c = spawn_sh(e, "sleep 30", &o, &out);

		pid = child_get_pid(c);
		CHECK(child_abandon(c) == NULL);
	}
	end = mono_usec() + 10 * USEC_PER_SEC;
	while (!is_reaped(pid) && mono_usec() < end)
		CHECK(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
	CHECK_MSG(is_reaped(pid), "abandoned child %d not reaped by the loop", (int)pid);
	run_for(e, 50 * USEC_PER_MSEC);
	CHECK(!out.done);

	/* the loop freed before the exit is seen: reaped then, nothing leaks */
	CHECK(sd_event_new(&own) >= 0);
	{
		struct child *c = spawn_sh(own, "sleep 30", &o, &out);

		pid = child_get_pid(c);
		CHECK(child_abandon(c) == NULL);
	}
	CHECK(!is_reaped(pid) || is_zombie(pid));
	own = sd_event_unref(own);
	CHECK(is_reaped(pid));
	CHECK(!out.done);
}

/* Gone, or a zombie nobody reaped yet: nothing of it runs. */
static bool is_ended(pid_t pid)
{
	return is_reaped(pid) || is_zombie(pid);
}

static bool wait_ended(pid_t pid, uint64_t usec)
{
	uint64_t end = mono_usec() + usec;

	while (!is_ended(pid) && mono_usec() < end)
		usleep(10000);
	return is_ended(pid);
}

/* A kept child: the group's leader is the keeper, the program runs as its
 * child in the same group, and the program's end is the leader's. */
static void test_keeper_exit(sd_event *e)
{
	struct child_options o = { .output = CHILD_OUTPUT_CAPTURE, .keeper = true };
	struct outcome out = { 0 };
	char buf[128], ready[64], script[160];
	struct child *c;
	pid_t prog;

	c = spawn_sh(e, "echo $$; echo err >&2; grep SigBlk /proc/self/status; exit 3", &o, &out);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK_INT_EQ(out.ex.code, CLD_EXITED);
	CHECK_INT_EQ(out.ex.status, 3);
	prog = (pid_t)atoi(out.output);
	CHECK(prog > 1 && prog != child_get_pid(c));
	CHECK(strstr(out.output, "\nerr\nSigBlk:\t0000000000000000\n") != NULL);
	child_free(c);

	memset(&out, 0, sizeof(out));
	c = spawn_sh(e, "kill -TERM $$", &o, &out);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK_STR_EQ(child_exit_to_string(&out.ex, buf, sizeof(buf)), "killed by signal 15 (Terminated)");
	child_free(c);

	/* a teardown's SIGTERM to the group reaches the program; the keeper stays for its end
	 * (sent once the shell has set its trap: under valgrind beside a second suite it took
	 * longer than 300 ms to get there) */
	memset(&out, 0, sizeof(out));
	snprintf(ready, sizeof(ready), "/tmp/goodput-test-child-%d.up", (int)getpid());
	snprintf(script, sizeof(script), "trap 'exit 4' TERM; : >%s; while :; do sleep 0.05; done", ready);
	c = spawn_sh(e, script, &o, &out);
	for (uint64_t end = mono_usec() + 30 * USEC_PER_SEC; access(ready, F_OK) < 0 && mono_usec() < end;)
		run_for(e, 20 * USEC_PER_MSEC);
	CHECK_MSG(access(ready, F_OK) == 0, "the shell did not set its trap within 30 s");
	(void)unlink(ready);
	CHECK(!out.done);
	CHECK_INT_EQ(child_kill(c, SIGTERM), 0);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(out.ex.code == CLD_EXITED && out.ex.status == 4);
	child_free(c);

	/* not executable: refused before anything is forked */
	o.argv = (char *[]){ (char *)"/nonexistent/server", NULL };
	c = NULL;
	CHECK_INT_EQ(child_spawn(e, &o, on_exit_cb, &out, &c), -ENOENT);
	/* a forked function has no keeper; hold needs one */
	o.argv = NULL;
	o.fork_fn = forked;
	CHECK_INT_EQ(child_spawn(e, &o, on_exit_cb, &out, &c), -EINVAL);
	o.fork_fn = NULL;
	o.argv = (char *[]){ (char *)"/bin/true", NULL };
	o.keeper = false;
	o.hold = true;
	CHECK_INT_EQ(child_spawn(e, &o, on_exit_cb, &out, &c), -EINVAL);
}

/* Held: the group exists (and could be recorded) before the program runs;
 * freed before its release, the program never runs at all. */
static void test_hold(sd_event *e)
{
	struct child_options o = { .keeper = true, .hold = true };
	char dir[] = "/tmp/test-child-XXXXXX", script[256], flag[200];
	struct outcome out = { 0 };
	struct child *c;
	pid_t pgid;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(flag, sizeof(flag), "%s/ran", dir);
	snprintf(script, sizeof(script), "touch %s", flag);
	c = spawn_sh(e, script, &o, &out);
	pgid = child_get_pid(c);
	CHECK_INT_EQ(getpgid(pgid), pgid);
	run_for(e, 300 * USEC_PER_MSEC);
	CHECK(!out.done && access(flag, F_OK) < 0);
	CHECK_INT_EQ(child_release(c), 0);
	CHECK_INT_EQ(child_release(c), -EALREADY);
	run_until(e, &out.done, 10 * USEC_PER_SEC);
	CHECK(child_exit_ok(&out.ex) && access(flag, F_OK) == 0);
	child_free(c);
	CHECK(unlink(flag) == 0);

	memset(&out, 0, sizeof(out));
	c = spawn_sh(e, script, &o, &out);
	pgid = child_get_pid(c);
	run_for(e, 100 * USEC_PER_MSEC);
	child_free(c);
	CHECK(is_reaped(pgid));
	usleep(200000);
	CHECK(access(flag, F_OK) < 0);
	CHECK(rmdir(dir) == 0);
}

/* The caller dies (kill -9): the keeper ends the whole group, a worker
 * that ignores SIGTERM too, after the grace. A caller that dies before the
 * release leaves nothing that ever ran. */
static void keeper_orphan(bool release)
{
	int fds[2];
	pid_t caller, ids[3] = { 0, 0, 0 };
	char dir[] = "/tmp/test-child-XXXXXX", path[200];

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/pids", dir);
	CHECK(pipe(fds) == 0);
	caller = fork();
	CHECK(caller >= 0);
	if (caller == 0) {
		_cleanup_(sd_event_unrefp) sd_event *own = NULL;
		char script[1024];
		struct child_options o = { .keeper = true, .hold = true, .kill_grace_usec = 300 * USEC_PER_MSEC };
		struct outcome out = { 0 };
		struct child *c;
		pid_t pgid;

		close(fds[0]);
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed check */
		if (sd_event_new(&own) < 0)
			_exit(2);
		snprintf(script, sizeof(script),
			 "trap '' TERM; sleep 60 & echo $$ $! > %s.tmp; mv %s.tmp %s; while :; do sleep 0.05; done",
			 path, path, path);
		c = spawn_sh(own, script, &o, &out);
		pgid = child_get_pid(c);
		if (release && child_release(c) < 0)
			_exit(3);
		if (write(fds[1], &pgid, sizeof(pgid)) != sizeof(pgid))
			_exit(4);
		for (;;)
			pause();
	}
	close(fds[1]);
	CHECK(read(fds[0], &ids[0], sizeof(ids[0])) == sizeof(ids[0]));
	close(fds[0]);
	if (release) {
		FILE *f = NULL;

		for (unsigned i = 0; i < 500 && !(f = fopen(path, "r")); i++)
			usleep(10000);
		CHECK_MSG(f, "the program never ran");
		CHECK(fscanf(f, "%d %d", &ids[1], &ids[2]) == 2);
		fclose(f);
		CHECK_INT_EQ(getpgid(ids[2]), ids[0]);
	}
	CHECK(kill(caller, SIGKILL) == 0);
	CHECK(waitpid(caller, NULL, 0) == caller);
	for (size_t i = 0; i < ELEMENTSOF(ids); i++)
		CHECK_MSG(!ids[i] || wait_ended(ids[i], 10 * USEC_PER_SEC),
			  "process %d of the group outlived its caller", (int)ids[i]);
	usleep(100000);
	CHECK(release || access(path, F_OK) < 0);
	(void)unlink(path);
	CHECK(rmdir(dir) == 0);
}

static void test_keeper_orphan(void)
{
	keeper_orphan(true);
	keeper_orphan(false);
}

static void test_run(void)
{
	struct child_options o = { .argv = (char *[]){ (char *)"/bin/sh", (char *)"-c", (char *)"echo hi; exit 2",
						       NULL },
				   .output = CHILD_OUTPUT_CAPTURE };
	struct child_exit ex;
	char *out = NULL;

	CHECK_INT_EQ(child_run(&o, &ex, &out), 0);
	CHECK(ex.code == CLD_EXITED && ex.status == 2);
	CHECK_STR_EQ(out, "hi\n");
	free(out);
	o.argv = (char *[]){ (char *)"/bin/sleep", (char *)"30", NULL };
	o.timeout_usec = 100 * USEC_PER_MSEC;
	CHECK_INT_EQ(child_run(&o, &ex, NULL), 0);
	CHECK(ex.timed_out && ex.status == SIGKILL);
}

int main(void)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;

	CHECK(sd_event_new(&e) >= 0);
	test_status_and_capture(e);
	test_capture_cap(e);
	test_cannot_run(e);
	test_timeout(e);
	test_straggler(e);
	test_fork(e);
	test_free_running(e);
	test_abandon(e);
	test_keeper_exit(e);
	test_hold(e);
	test_keeper_orphan();
	test_run();
	return 0;
}
