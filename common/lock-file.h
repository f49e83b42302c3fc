/* lock-file.h — one writer per database.
 *
 * Two processes that both believe they own a database kill each other's
 * servers as orphans and insert the same trials twice. A writer therefore
 * locks the database file itself before it opens it, and holds the lock
 * while it runs; readers take no lock (the store does this: STORE_OPEN_WRITER).
 *
 * A lock on a path's text (a file PATH.lock beside it) is bypassed by any
 * other path to the same file — a symlink, a hard link, a bind mount — so
 * the lock is on the file's inode: an open file description lock (fcntl
 * F_OFD_SETLK) on one byte far past anything SQLite locks. The kernel drops
 * it when the last descriptor of that open file goes, however the process
 * died; neither SQLite's own record locks on the file nor its closing of
 * other descriptors of it release it (a POSIX record lock would be dropped
 * by any close of the file in the process). A copy forked without exec
 * inherits the descriptor, and with it the lock: child.h's forked copies
 * and keepers close it. An OFD lock names no pid: the holder is found in
 * /proc (the descriptors of every process we may look at), on refusal only. */
#pragma once

#include <sys/types.h>

struct lock_holder {
	pid_t pid;     /* 0 when unknown (another user's, another pid namespace) */
	char comm[16]; /* its /proc/PID/comm, or "" */
};

/* Locks the file open at fd (read-write) for one writer. It is held while
 * any descriptor of that open file description is: the caller keeps fd
 * open (O_CLOEXEC: a program executed does not inherit it). 0, or -EBUSY
 * when another open file holds it: holder (may be NULL) names the process
 * when /proc tells; another negative errno when fcntl fails. */
int lock_inode_take(int fd, struct lock_holder *holder);
