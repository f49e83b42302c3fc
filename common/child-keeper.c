/* child-keeper.c — the keeper: the leader of a kept child's process group,
 * a forked copy of the caller that runs the program as its own child and
 * outlives nothing it was given to watch.
 *
 * A server under test must never outlive the goodput that started it: a
 * GPU it holds makes the next trial run out of memory, and nobody may know
 * it is there. PR_SET_PDEATHSIG in the server alone does not do it: it
 * reaches only the one process (an engine's workers live on), it is
 * cleared when a set-user-ID program is executed, and it fires when the
 * *thread* that forked dies. The keeper instead stays in the group, never
 * executes anything, and when its parent is gone (its death signal, or
 * getppid() no longer the parent's, looked at on every wake-up) it ends
 * the whole group: SIGTERM, then SIGKILL after the grace period.
 *
 * It also makes "record, then run" possible: a held child's keeper waits
 * for one byte on a socket before it forks the program. The caller has
 * the group's id at once (the keeper's pid), records it, and only then
 * sends the byte (child_release); a caller that dies first closes the
 * socket, and the keeper exits without running anything.
 *
 * Everything here runs between fork() and _exit() in a copy of a process
 * that may have had other threads: system calls only, no allocation, no
 * stdio. The program's exit status becomes the keeper's (a signal that
 * killed it kills the keeper the same way, without a core), so the
 * caller's child source sees the server's own end. */
#include "child-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "time-util.h"

/* The death signal the keeper asks for: any blocked signal wakes it, and
 * getppid() tells whether the parent is really gone. */
#define KEEPER_DEATH_SIGNAL SIGUSR2
/* Where the go socket and the output go before everything else is closed. */
#define FD_GO  3
#define FD_OUT 4

/* CLOCK_MONOTONIC without anything but the system call. */
static uint64_t keeper_clock(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

/* In the program's process: a fresh signal state, its stdio, then exec. */
static _noreturn_ void exec_program(const struct keeper_args *a, pid_t keeper, bool have_out)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t empty;
	int fd;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &sa, NULL);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != keeper)
		_exit(CHILD_KEEPER_FAILED);
	fd = open("/dev/null", O_RDONLY | O_NOCTTY);
	if (fd >= 0 && fd != STDIN_FILENO) {
		(void)dup2(fd, STDIN_FILENO);
		(void)close(fd);
	}
	if (have_out) {
		(void)dup2(FD_OUT, STDOUT_FILENO);
		(void)dup2(FD_OUT, STDERR_FILENO);
	}
	(void)close_range(3, ~0U, 0);
	sigemptyset(&empty);
	(void)sigprocmask(SIG_SETMASK, &empty, NULL);
	execve(a->path, a->argv, a->envp);
	_exit(errno == ENOENT ? 127 : 126);
}

/* The keeper's exit is the program's: its status, or the signal that
 * killed it (without a core of the keeper's own). */
static _noreturn_ void exit_like(int status)
{
	struct rlimit no_core = { 0, 0 };
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t one;
	int sig;

	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	sig = WTERMSIG(status);
	(void)setrlimit(RLIMIT_CORE, &no_core);
	(void)sigaction(sig, &sa, NULL);
	sigemptyset(&one);
	sigaddset(&one, sig);
	(void)sigprocmask(SIG_UNBLOCK, &one, NULL);
	(void)kill(getpid(), sig);
	_exit(128 + sig);
}

/* Waits for the go byte: false when the caller closed the socket (or died) first. */
static bool wait_for_go(void)
{
	char b;

	for (;;) {
		ssize_t n = read(FD_GO, &b, 1);

		if (n == 1)
			return true;
		if (n < 0 && errno == EINTR)
			continue;
		return false;
	}
}

_noreturn_ void child_keeper_run(const struct keeper_args *a)
{
	uint64_t deadline = 0;
	bool parent_gone = false;
	sigset_t all;
	pid_t me, server;
	int go, out;

	(void)setpgid(0, 0);
	/* every signal is taken synchronously below: the group's SIGTERM of a
	 * teardown is for the program, and only wakes the keeper */
	sigfillset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, NULL);
	(void)prctl(PR_SET_PDEATHSIG, KEEPER_DEATH_SIGNAL);
	if (getppid() != a->parent)
		_exit(CHILD_KEEPER_FAILED);
	/* the go socket and the output to fixed places (through copies above
	 * both, so that neither overwrites the other), everything else closed:
	 * the caller's lock and database, other keepers' sockets */
	go = a->go_fd >= 0 ? fcntl(a->go_fd, F_DUPFD, 10) : -1;
	out = a->out_fd >= 0 ? fcntl(a->out_fd, F_DUPFD, 10) : -1;
	if ((a->go_fd >= 0 && go < 0) || (a->out_fd >= 0 && out < 0))
		_exit(CHILD_KEEPER_FAILED);
	if ((go >= 0 && dup2(go, FD_GO) < 0) || (out >= 0 && dup2(out, FD_OUT) < 0))
		_exit(CHILD_KEEPER_FAILED);
	(void)close_range(FD_OUT + 1, ~0U, 0);
	if (out < 0)
		(void)close(FD_OUT);
	if (go >= 0 && !wait_for_go())
		_exit(CHILD_KEEPER_FAILED);
	(void)close(FD_GO);

	me = getpid();
	server = fork();
	if (server < 0)
		_exit(CHILD_KEEPER_FAILED);
	if (server == 0)
		exec_program(a, me, out >= 0);
	(void)close(FD_OUT);

	for (;;) {
		siginfo_t si;
		int status, sig;
		pid_t w;

		if (parent_gone) {
			uint64_t now = keeper_clock(), left = deadline > now ? deadline - now : 0;
			struct timespec ts = { .tv_sec = (time_t)(left / USEC_PER_SEC),
					       .tv_nsec = (long)(left % USEC_PER_SEC) * 1000 };

			if (left == 0)
				(void)kill(0, SIGKILL); /* the group, the keeper with it */
			sig = sigtimedwait(&all, &si, &ts);
		} else
			sig = sigwaitinfo(&all, &si);
		(void)sig;
		w = waitpid(server, &status, WNOHANG);
		if (w == server) {
			if (parent_gone)
				(void)kill(0, SIGKILL); /* what the program left behind */
			exit_like(status);
		}
		if (!parent_gone && getppid() != a->parent) {
			parent_gone = true;
			deadline = keeper_clock() + a->grace_usec;
			(void)kill(0, SIGTERM);
		}
	}
}
