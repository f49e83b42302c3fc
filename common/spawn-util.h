/* spawn-util.h — starting a child program the way every part of the daemon does:
 * an argv (no shell), its own process group, output into one descriptor. */
#pragma once

#include <sys/types.h>

/* Spawns argv (searched in PATH) with envp, in a new process group whose id is
 * the child's pid, stdin from /dev/null, stdout and stderr onto out_fd, an
 * empty signal mask and default signal dispositions. out_fd is *not*
 * consumed. Returns 0 and the pid in *ret_pid, or a negative errno. */
int spawn_process(char *const *argv, char *const *envp, int out_fd, pid_t *ret_pid);

/* Spawns argv with the caller's environment and stdout+stderr into a new
 * close-on-exec pipe; returns the pipe's read end (blocking) and the pid in
 * *ret_pid, or a negative errno. */
int spawn_piped(char *const *argv, pid_t *ret_pid);

/* Blocks SIGCHLD in the calling process, as sd_event_add_child() requires.
 * Returns 0 or a negative errno. */
int spawn_block_sigchld(void);
