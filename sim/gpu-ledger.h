/* gpu-ledger.h — the emulated GPUs of one host, shared by its goodput-sims.
 *
 * Real GPUs in exclusive-process mode refuse a second process ("CUDA-capable
 * device(s) is/are busy or unavailable"). goodput-sim emulates that with a
 * ledger: a directory (--gpu-ledger DIR or GOODPUT_SIM_GPU_LEDGER; no ledger
 * when neither is set, so parallel tests each use their own) holding one
 * lock file per GPU index, gpu<N>.lock. A sim takes the locks of the GPUs it
 * occupies with flock(2) and holds them for its life: the kernel releases
 * them when it exits, however it exits, so a crashed sim never leaves a GPU
 * taken. Which GPUs it occupies is CUDA_VISIBLE_DEVICES's business: the
 * first tensor-parallel-size of the visible indices. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define SIM_LEDGER_MAX_GPUS 64

struct sim_gpu_ledger {
	int fds[SIM_LEDGER_MAX_GPUS];
	size_t n;
};

/* The GPU indices CUDA_VISIBLE_DEVICES makes visible, in its order: env
 * NULL (unset) means 0..host_gpus−1; a list stops at its first entry that
 * is not an index below host_gpus, as CUDA's does ("" and an invalid first
 * entry: none). */
size_t sim_visible_devices(const char *env, unsigned host_gpus, unsigned *ret, size_t max);

/* Takes the locks of gpus[0..n) in dir (created if missing), writing our
 * pid into each. -EBUSY when one is held by another process: *ret_busy_gpu
 * is its index and *ret_holder_pid its holder (0 when unknown); the locks
 * taken so far are released. Other errors name the file. */
int sim_gpu_ledger_acquire(const char *dir, const unsigned *gpus, size_t n, struct sim_gpu_ledger *ret,
			   unsigned *ret_busy_gpu, long *ret_holder_pid, struct error *err);
/* Releases the locks (at exit the kernel does the same). */
void sim_gpu_ledger_release(struct sim_gpu_ledger *l);
