/* gpu-ledger.c — flock(2)-held GPU locks of an emulated host (gpu-ledger.h). */
#include "gpu-ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

size_t sim_visible_devices(const char *env, unsigned host_gpus, unsigned *ret, size_t max)
{
	size_t n = 0;

	if (!env) {
		for (unsigned g = 0; g < host_gpus && n < max; g++)
			ret[n++] = g;
		return n;
	}
	while (*env && n < max) {
		char *end;
		unsigned long v;

		while (*env == ' ')
			env++;
		errno = 0;
		v = strtoul(env, &end, 10);
		if (end == env || errno || v >= host_gpus || (*end && *end != ',' && *end != ' '))
			break; /* CUDA ignores the rest of the list from the first invalid entry */
		ret[n++] = (unsigned)v;
		env = end;
		while (*env == ' ')
			env++;
		if (*env != ',')
			break;
		env++;
	}
	return n;
}

static long holder_of(int fd)
{
	char buf[32];
	ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);

	if (k <= 0)
		return 0;
	buf[k] = 0;
	return strtol(buf, NULL, 10);
}

int sim_gpu_ledger_acquire(const char *dir, const unsigned *gpus, size_t n, struct sim_gpu_ledger *ret,
			   unsigned *ret_busy_gpu, long *ret_holder_pid, struct error *err)
{
	struct sim_gpu_ledger l = { .n = 0 };

	if (n > SIM_LEDGER_MAX_GPUS)
		return error_set(err, -E2BIG, "--gpu-ledger: more than %d GPUs", SIM_LEDGER_MAX_GPUS);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return error_set(err, -errno, "--gpu-ledger: cannot create %s: %s", dir, strerror(errno));
	for (size_t i = 0; i < n; i++) {
		char path[4096], pid[32];
		int fd;

		snprintf(path, sizeof(path), "%s/gpu%u.lock", dir, gpus[i]);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
		if (fd < 0) {
			int r = -errno;

			sim_gpu_ledger_release(&l);
			return error_set(err, r, "--gpu-ledger: cannot open %s: %s", path, strerror(-r));
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int r = errno == EWOULDBLOCK ? -EBUSY : -errno;

			*ret_busy_gpu = gpus[i];
			*ret_holder_pid = r == -EBUSY ? holder_of(fd) : 0;
			close(fd);
			sim_gpu_ledger_release(&l);
			return r == -EBUSY ? r
					   : error_set(err, r, "--gpu-ledger: cannot lock %s: %s", path, strerror(-r));
		}
		/* Who holds it, for the next sim's message. */
		snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
		if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, strlen(pid), 0) < 0) {
			/* The lock is what counts; the pid is a courtesy. */
		}
		l.fds[l.n++] = fd;
	}
	*ret = l;
	return 0;
}

void sim_gpu_ledger_release(struct sim_gpu_ledger *l)
{
	for (size_t i = 0; i < l->n; i++)
		safe_close(l->fds[i]);
	l->n = 0;
}
