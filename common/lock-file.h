/* lock-file.h — one writer per database.
 *
 * Two processes that both believe they own a state directory kill each
 * other's servers as orphans and insert the same trials twice. A writer
 * therefore takes an exclusive lock on a file beside the database (PATH.lock)
 * before it opens it, and holds it until it exits; readers take no lock.
 *
 * The lock is a POSIX record lock (fcntl F_SETLK), not flock(): the kernel
 * drops it when the process dies however it dies, a child forked without
 * exec (a report writer, a twin fit) does not inherit it — so a child that
 * outlives a killed daemon cannot keep its successor out — and F_GETLK names
 * the holder's pid. Record locks belong to the process: the file must not be
 * opened and closed elsewhere in it, and a second lock_file_take on the same
 * path in the same process succeeds. The holder's pid is also written into
 * the file for people who look.
 *
 * A lock on a path's text is bypassed by another path to the same file (a
 * symlink, a hard link, a bind mount): the database itself is locked with
 * lock_inode_take, an open file description lock on the file's inode. */
#pragma once

#include <sys/types.h>

#include "error.h"

struct lock_holder {
	pid_t pid;     /* 0 when unknown (another pid namespace) */
	char comm[16]; /* its /proc/PID/comm, or "" */
};

/* Creates (0644) and locks path. On success *ret_fd holds the lock until it
 * is closed or the process exits. -EBUSY when another process holds it:
 * holder (may be NULL) is filled and err says "PATH: locked by COMM (pid N)". */
int lock_file_take(const char *path, int *ret_fd, struct lock_holder *holder, struct error *err);

/* Locks the file open at fd for one writer: an open file description lock
 * (F_OFD_SETLK) on one byte far past anything SQLite locks, so every path
 * to the file meets it, and neither SQLite's own record locks nor its
 * closing of descriptors of the same file release it. It is held while
 * any descriptor of that open file description is: the caller keeps fd
 * open (O_CLOEXEC: a program executed does not inherit it; a forked copy
 * must close it, as child.h's do). -EBUSY when another open file holds it:
 * holder (may be NULL) names the process when /proc tells. */
int lock_inode_take(int fd, struct lock_holder *holder);
