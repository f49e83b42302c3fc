/* child-internal.h — what child.c hands the keeper (child-keeper.c). */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* The keeper's own exit status when it could not set up or was never
 * released (its program never ran); seen only by a caller still alive. */
#define CHILD_KEEPER_FAILED 125

struct keeper_args {
	const char *path;  /* the program, resolved before the fork */
	char *const *argv; /* its arguments and environment */
	char *const *envp;
	int out_fd;          /* stdout and stderr, or -1: the caller's */
	int go_fd;           /* the go socket (a held child), or -1 */
	pid_t parent;        /* the caller, whose end ends the group */
	uint64_t grace_usec; /* SIGTERM → SIGKILL once the caller is gone */
};

/* Runs in the forked keeper; never returns. */
_noreturn_ void child_keeper_run(const struct keeper_args *a);
