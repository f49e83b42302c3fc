/* file-util.h — reading a file a user named, without letting its type decide
 * what the program does.
 *
 * A plain open(O_RDONLY) of a FIFO blocks until a writer appears, and one of
 * a character device (/dev/zero, a terminal) reads forever or steals the
 * terminal; in a daemon's loop either is a hang, in a command line program
 * a hang with signals blocked. These helpers open with O_NONBLOCK (a FIFO
 * opens at once), O_NOCTTY and O_CLOEXEC, then check with fstat that what
 * was opened is a regular file before a single byte is read. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "error.h"

enum {
	FILE_NOFOLLOW = 1 << 0, /* refuse a symbolic link as the last component (ELOOP) */
};

/* Opens path for reading when it is a regular file: a FIFO, socket,
 * device or directory is -EINVAL ("PATH: not a regular file (a FIFO)"),
 * a symbolic link with FILE_NOFOLLOW is -ELOOP. The returned fd is
 * close-on-exec; O_NONBLOCK stays set, which regular files ignore.
 * ret_st may be NULL. */
int file_open_regular(const char *path, unsigned flags, int *ret_fd, struct stat *ret_st, struct error *err);

/* Reads a whole regular file opened as file_open_regular does, at most
 * max_bytes (more is -EFBIG; the size is not trusted: reading stops at
 * max_bytes + 1). *ret is NUL-terminated (not counted in *ret_len) and
 * owned by the caller. */
int file_read_regular(const char *path, unsigned flags, size_t max_bytes, char **ret, size_t *ret_len,
		      struct error *err);

/* Writes all len bytes of buf to fd, through short writes and EINTR:
 * 0, or -errno (-EIO when write returns 0). For pipes and files in
 * blocking mode. */
int fd_write_all(int fd, const void *buf, size_t len);

enum {
	FILE_WRITE_SYNC = 1 << 0,  /* fsync the data before the rename */
	FILE_WRITE_UMASK = 1 << 1, /* the mode is filtered by the umask, as open's is */
};

/* Replaces path with len bytes of data so that a reader (and a crash) sees
 * the old file or the whole new one, never part of it: the bytes go to a
 * new file of a random name beside path (".NAME.XXXXXXXX", opened
 * O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, so nothing already there is
 * written through), which is given mode — exactly, whatever the umask,
 * unless FILE_WRITE_UMASK — then closed (a shared file system reports
 * late write errors there) and renamed over path. On any failure the
 * temporary file is removed and path left as it was. 0, or -errno. */
int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode, unsigned flags);

/* The name of a file type for messages: "a FIFO", "a directory", ... */
const char *file_type_name(mode_t mode);

/* Where one of goodput's own programs (name: "goodput-sim") is installed
 * beside the running one: in the folder of /proc/self/exe, else in bindir
 * (goodput's configured bindir, for goodputd in sbin), when executable
 * there. *ret is the path, the caller's to free; -ENOENT when it is in
 * neither (the caller leaves the name to $PATH). */
int file_find_own_program(const char *name, const char *bindir, char **ret);
