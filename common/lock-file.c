/* lock-file.c — the writer's lock on a database file (see lock-file.h). */
#include "lock-file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

static void read_comm(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* Far past SQLite's lock bytes (1 GiB + 512) and any real file. */
#define INODE_LOCK_OFFSET ((off_t)1 << 62)

/* Whether /proc/PID/fdinfo/FD lists our write lock. */
static bool fdinfo_holds_lock(const char *pid, const char *fd)
{
	char path[600], buf[4096];
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/proc/%s/fdinfo/%s", pid, fd);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return false;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n <= 0)
		return false;
	buf[n] = 0;
	for (char *l = strstr(buf, "lock:"); l; l = strstr(l + 5, "lock:")) {
		char *end = strchr(l, '\n');
		char want[32];

		if (end)
			*end = 0;
		snprintf(want, sizeof(want), " %lld ", (long long)INODE_LOCK_OFFSET);
		if (strstr(l, "WRITE") && strstr(l, want))
			return true;
		if (!end)
			break;
		*end = '\n';
	}
	return false;
}

/* The process that holds the lock on st's file: an OFD lock names no pid,
 * so every open descriptor of every process we may look at is compared
 * with the file and asked for its locks (a refusal's path only). */
static void find_inode_holder(const struct stat *st, struct lock_holder *h)
{
	DIR *proc = opendir("/proc");
	struct dirent *pe;

	*h = (struct lock_holder){ 0 };
	if (!proc)
		return;
	while (!h->pid && (pe = readdir(proc))) {
		char dir[300];
		struct dirent *fe;
		DIR *fds;

		if (pe->d_name[0] < '1' || pe->d_name[0] > '9' || atoi(pe->d_name) == getpid())
			continue;
		snprintf(dir, sizeof(dir), "/proc/%s/fd", pe->d_name);
		fds = opendir(dir);
		if (!fds)
			continue;
		while ((fe = readdir(fds))) {
			char path[600];
			struct stat fst;

			if (fe->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, fe->d_name);
			if (stat(path, &fst) < 0 || fst.st_dev != st->st_dev || fst.st_ino != st->st_ino)
				continue;
			if (fdinfo_holds_lock(pe->d_name, fe->d_name)) {
				h->pid = (pid_t)atoi(pe->d_name);
				read_comm(h->pid, h->comm, sizeof(h->comm));
				break;
			}
		}
		closedir(fds);
	}
	closedir(proc);
}

int lock_inode_take(int fd, struct lock_holder *holder)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = INODE_LOCK_OFFSET, .l_len = 1 };
	struct stat st;

	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	if (errno != EACCES && errno != EAGAIN)
		return -errno;
	if (holder) {
		*holder = (struct lock_holder){ 0 };
		if (fstat(fd, &st) == 0)
			find_inode_holder(&st, holder);
	}
	return -EBUSY;
}
