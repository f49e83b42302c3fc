/* file-util.c — see file-util.h. */
#include "file-util.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "macro.h"

const char *file_type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFLNK:
		return "a symbolic link";
	default:
		return "of an unknown type";
	}
}

int fd_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t k = write(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* A new file beside path, named .NAME.XXXXXXXX: *ret_tmp is its name. */
static int create_temporary(const char *path, mode_t mode, char **ret_tmp, int *ret_fd)
{
	const char *slash = strrchr(path, '/');
	int dir_len = slash ? (int)(slash - path + 1) : 0;
	const char *base = slash ? slash + 1 : path;

	if (!*base)
		return -EISDIR;
	for (int attempt = 0; attempt < 16; attempt++) {
		_cleanup_(freep) char *tmp = NULL;
		uint32_t rnd;
		int fd;

		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
			rnd = (uint32_t)getpid() * 2654435761u + (uint32_t)attempt;
		if (asprintf(&tmp, "%.*s.%s.%08" PRIx32, dir_len, path, base, rnd) < 0)
			return -ENOMEM;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return -errno;
		*ret_tmp = TAKE_PTR(tmp);
		*ret_fd = fd;
		return 0;
	}
	return -EEXIST;
}

static int fill_and_close(int fd, const void *data, size_t len, mode_t mode, unsigned flags)
{
	int r = 0;

	if (!(flags & FILE_WRITE_UMASK) && fchmod(fd, mode) < 0)
		r = -errno;
	if (r >= 0)
		r = fd_write_all(fd, data, len);
	if (r >= 0 && (flags & FILE_WRITE_SYNC) && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r >= 0 && errno != EINTR)
		r = -errno;
	return r;
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode, unsigned flags)
{
	_cleanup_(freep) char *tmp = NULL;
	int fd = -1, r;

	if (!path || !*path)
		return -EINVAL;
	r = create_temporary(path, mode, &tmp, &fd);
	if (r < 0)
		return r;
	r = fill_and_close(fd, data, len, mode, flags);
	if (r >= 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

int file_open_regular(const char *path, unsigned flags, int *ret_fd, struct stat *ret_st, struct error *err)
{
	_cleanup_(closep) int fd = -1;
	int oflags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	struct stat st;

	if (!path || !*path)
		return error_set(err, -EINVAL, "empty file name");
	if (flags & FILE_NOFOLLOW)
		oflags |= O_NOFOLLOW;
	fd = open(path, oflags);
	if (fd < 0 && errno == ELOOP && (flags & FILE_NOFOLLOW))
		return error_set(err, -ELOOP, "%s: is a symbolic link, which is not followed here", path);
	if (fd < 0)
		return error_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		return error_set(err, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return error_set(err, -EINVAL, "%s: not a regular file (%s)", path, file_type_name(st.st_mode));
	if (ret_st)
		*ret_st = st;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int file_read_regular(const char *path, unsigned flags, size_t max_bytes, char **ret, size_t *ret_len,
		      struct error *err)
{
	_cleanup_(closep) int fd = -1;
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0, size;
	struct stat st;
	int r;

	if (max_bytes >= SIZE_MAX - 1)
		return error_set(err, -EINVAL, "%s: no size limit given", path);
	r = file_open_regular(path, flags, &fd, &st, err);
	if (r < 0)
		return r;
	if ((uint64_t)st.st_size > max_bytes)
		return error_set(err, -EFBIG, "%s: larger than %zu bytes", path, max_bytes);
	/* Room for the announced size, one byte more to see growth, and the NUL;
	 * files whose size says nothing (procfs) grow the buffer as they go. */
	size = (size_t)st.st_size + 2;
	buf = malloc(size);
	if (!buf)
		return error_set(err, -ENOMEM, "%s: out of memory", path);
	for (;;) {
		ssize_t n;

		if (len + 1 == size) {
			size_t nsize = MIN(size * 2, max_bytes + 2);
			char *p;

			if (nsize <= size)
				return error_set(err, -EFBIG, "%s: larger than %zu bytes", path, max_bytes);
			p = realloc(buf, nsize);
			if (!p)
				return error_set(err, -ENOMEM, "%s: out of memory", path);
			buf = p;
			size = nsize;
		}
		n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return error_set(err, -errno, "%s: %s", path, strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max_bytes)
			return error_set(err, -EFBIG, "%s: larger than %zu bytes", path, max_bytes);
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

/* path when it names an executable regular file. */
static bool is_executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int file_find_own_program(const char *name, const char *bindir, char **ret)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash, *p = NULL;

	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash && asprintf(&p, "%.*s/%s", (int)(slash - self), self, name) < 0)
			return -ENOMEM;
		if (p && is_executable(p)) {
			*ret = p;
			return 0;
		}
		free(p);
		p = NULL;
	}
	if (bindir && asprintf(&p, "%s/%s", bindir, name) < 0)
		return -ENOMEM;
	if (p && is_executable(p)) {
		*ret = p;
		return 0;
	}
	free(p);
	return -ENOENT;
}
