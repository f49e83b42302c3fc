/* child.h — a child process watched on the caller's sd-event loop.
 *
 * Every program that goodput starts runs the same way: an argv spawned
 * without a shell (or, for work that must leave the loop's process, a
 * function run in a forked copy), in a process group of its own so that the
 * whole group can be signalled and nothing is left behind, stdin from
 * /dev/null, an empty signal mask and default signal dispositions. Its exit
 * is seen through sd_event_add_child and arrives, once, through a callback
 * with the decoded status; its output goes to the caller's stdout/stderr, to
 * one descriptor (a log file), or into a pipe whose contents the callback
 * can read. An optional timeout terminates the group (SIGTERM, then SIGKILL
 * after a grace period).
 *
 * Use:
 *   child_spawn(e, &opts, on_exit, userdata, &c)   start it (fails at once when it cannot run)
 *   on_exit(c, &how, userdata)                     the leader exited (and the pipe was drained)
 *   child_terminate(c, grace) / child_kill(c, sig) end it early
 *   child_free(c)                                  a child still running is killed and reaped
 *   child_abandon(c)                               ... and reaped later by the loop, not waited for
 * child_run() does all of this on a private loop, for programs without one. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "macro.h"

enum child_output {
	CHILD_OUTPUT_INHERIT, /* stdout and stderr are the caller's */
	CHILD_OUTPUT_FD,      /* stdout and stderr onto out_fd (a log file); out_fd is *not* consumed */
	CHILD_OUTPUT_CAPTURE, /* stdout and stderr into a pipe; child_get_output() in the exit callback */
};

struct child_options {
	char *const *argv; /* the program (argv[0] searched in $PATH) and its arguments; or: */
	/* run in a forked copy of the caller; its return value is the exit status. out_fd is
	 * where its output goes (the capture pipe, options.out_fd, or -1 when inherited); the
	 * forked copy's own stdio is left as it is. Must not touch the event loop. */
	int (*fork_fn)(void *userdata, int out_fd);
	void *fork_userdata;
	char *const *envp; /* argv only; NULL: the caller's environment */
	enum child_output output;
	int out_fd;               /* CHILD_OUTPUT_FD */
	size_t capture_max;       /* CHILD_OUTPUT_CAPTURE: bytes kept, more is read and dropped; 0: 64 KiB */
	uint64_t timeout_usec;    /* 0: none; when it passes, child_terminate(kill_grace_usec) */
	uint64_t kill_grace_usec; /* SIGTERM → SIGKILL after a timeout; 0: SIGKILL at once */
	const char *description;  /* names the event sources ("deploy-server") */
	/* argv only: the group's leader is a keeper (child-keeper.c), a copy of
	 * the caller that runs the program as its child and, when the caller
	 * dies however it dies, ends the whole group (SIGTERM, then SIGKILL
	 * after kill_grace_usec): nothing the program started outlives it. The
	 * leader's exit status is the program's. */
	bool keeper;
	/* With keeper: the program does not run until child_release(), so that
	 * the caller can record the group (child_get_pid) first; a caller that
	 * dies or frees the child before never runs it. */
	bool hold;
};

struct child_exit {
	int code;       /* CLD_EXITED, CLD_KILLED or CLD_DUMPED */
	int status;     /* the exit status (CLD_EXITED) or the signal */
	bool timed_out; /* it was signalled because its timeout passed */
};

struct child;

/* Called once when the leader has exited (after the capture pipe was read
 * to its end or to what is there now). The callee may free c. */
typedef void (*child_exit_fn)(struct child *c, const struct child_exit *how, void *userdata);

/* Starts a child on loop e (SIGCHLD gets blocked in the caller, as sd-event
 * needs). Fails at once, with a negative errno, when the program cannot be
 * executed (-ENOENT, -EACCES), or a pipe, fork or event source cannot be
 * made; everything later is reported through cb. */
int child_spawn(sd_event *e, const struct child_options *o, child_exit_fn cb, void *userdata, struct child **ret);

/* Kills what still runs of the child (SIGKILL to its group) and reaps the
 * leader — immediate, since SIGKILL cannot be caught — then frees it.
 * Accepts NULL; returns NULL. */
struct child *child_free(struct child *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct child *, child_free)

/* Kills what still runs of the child (SIGKILL to its group) and leaves the
 * leader to be reaped by the loop, without waiting for it: c is freed when
 * its exit is seen (the exit callback is not called), or when the loop is
 * freed first. For a caller on the loop that must not wait for a large
 * process to go. Accepts NULL; returns NULL. */
struct child *child_abandon(struct child *c);

/* Lets a held child's program run. 0; -ESRCH when its keeper is gone;
 * -EALREADY when it was not held or was released already. */
int child_release(struct child *c);

/* The leader's pid, which is also the process group's id. */
pid_t child_get_pid(const struct child *c);
/* Whether the leader is still running (its exit not yet seen). */
bool child_is_running(const struct child *c);

/* Sends sig to the child's process group — also after the leader exited,
 * to what it left behind. 0, or -ESRCH when nothing of the group is left. */
int child_kill(struct child *c, int sig);
/* SIGTERM to the group now, SIGKILL after grace_usec if the leader still
 * runs (0: SIGKILL now). Nothing once the leader has exited. */
void child_terminate(struct child *c, uint64_t grace_usec);
/* Re-arms the timeout to usec from now (0: no timeout any more). */
int child_set_timeout(struct child *c, uint64_t usec);

/* CHILD_OUTPUT_CAPTURE: what the child wrote (NUL-terminated, NULs inside
 * shown as spaces), valid until child_free; "" when nothing. *ret_truncated
 * (may be NULL) tells whether more was written than capture_max. */
const char *child_get_output(const struct child *c, bool *ret_truncated);

/* "exited with status 3", "killed by signal 9 (Killed)"; returns buf. */
const char *child_exit_to_string(const struct child_exit *e, char *buf, size_t size);
/* Exited with status 0 (and not because of a timeout). */
bool child_exit_ok(const struct child_exit *e);

/* Runs a child to its end on a loop of its own (for programs that have no
 * loop: the command line's check-engine). With CHILD_OUTPUT_CAPTURE the
 * output is handed to *ret_output (may be NULL; the caller frees it). */
int child_run(const struct child_options *o, struct child_exit *ret_exit, char **ret_output);

/* Where prog would be run from, as posix_spawnp looks for it: itself when it
 * has a '/', else the first executable file of that name in $PATH. -ENOENT
 * when there is none, -EACCES when one is there but not executable. *ret
 * (may be NULL) gets the path; the caller frees it. */
int child_find_program(const char *prog, char **ret);

/* Blocks SIGCHLD in the calling process, as sd_event_add_child() requires.
 * Returns 0 or a negative errno. */
int child_block_sigchld(void);
