/* spawn-util.c — the one place the daemon starts child programs.
 *
 * The servers (exec deployer), the deploy/health/teardown hooks (command
 * deployer), the engine's version command (host facts) and its help
 * (check-engine) all run the same way: posix_spawnp of an argv, never a
 * shell; a process group of their own, so the whole group can be signalled
 * and nothing is left behind; stdin from /dev/null; stdout and stderr into
 * one descriptor (a log file or a pipe). The child starts with an empty
 * signal mask and default dispositions, since the daemon blocks SIGCHLD for
 * sd-event and a server must not inherit that. */
#include "spawn-util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

extern char **environ;

int spawn_process(char *const *argv, char *const *envp, int out_fd, pid_t *ret_pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t empty, all;
	pid_t pid;
	int r;

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
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
	if (r == 0)
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
		r = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (r != 0)
		return -r;
	*ret_pid = pid;
	return 0;
}

int spawn_piped(char *const *argv, pid_t *ret_pid)
{
	int fds[2], r;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	r = spawn_process(argv, environ, fds[1], ret_pid);
	close(fds[1]);
	if (r < 0) {
		close(fds[0]);
		return r;
	}
	return fds[0];
}

int spawn_block_sigchld(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	return 0;
}
