/* deploy-host.h — the host a study deploys its servers on: the GPUs'
 * telemetry during load points, the host facts recorded with every trial,
 * and hygiene between deployments.
 *
 *   deploy_host_new(e, &h, &terr)              once per run: NVML (its absence is normal)
 *                                              and the GPUs' memory in use while idle
 *   deploy_host_describe(h, profile, cb, ud)   the host facts, gathered without blocking
 *   deploy_host_sample_start/stop(h, &stats)   GPU utilisation and memory around a load point
 *   deploy_host_wait_idle(h, timeout, cb, ud)  after a teardown: until GPU memory is idle again
 *
 * The facts are one JSON object (host_info_start's): engine version (the
 * engine profile's version command), GPU model, driver and count, kernel and
 * hostname. Without NVML the GPU figures are "unavailable" and nothing
 * waits. Everything runs on the caller's sd-event loop; the host borrows the
 * loop (it must outlive the host). Logs at debug level only: callers say
 * what matters to their users. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "engine-profile.h"
#include "gpu-telemetry.h"
#include "macro.h"

struct deploy_host;

/* Opens the GPU telemetry and reads the memory in use on the GPUs now (the
 * idle level hygiene waits for). A host without NVML is a host without GPU
 * figures, not an error; *ret_telemetry_error (may be NULL) gets the -errno
 * of a telemetry that could not be set up at all (the host works without
 * it). -ENOMEM only. The caller frees the host. */
int deploy_host_new(sd_event *e, struct deploy_host **ret, int *ret_telemetry_error);
/* Cancels what runs (the facts job, a wait); accepts NULL. */
struct deploy_host *deploy_host_free(struct deploy_host *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct deploy_host *, deploy_host_free)

/* ---- host facts ---- */

/* Called once with the facts JSON (owned by the host: valid until it is
 * freed), or NULL when out of memory. */
typedef void (*deploy_host_facts_fn)(struct deploy_host *h, const char *facts_json, void *userdata);

/* Starts gathering the facts of a host running profile's engine (binary:
 * the study's engine_binary, or NULL); cb follows from the loop. -EALREADY
 * when started before; other errors when the job cannot start (the host
 * has no facts then). */
int deploy_host_describe(struct deploy_host *h, const struct engine_profile *p, const char *binary,
			 deploy_host_facts_fn cb, void *userdata);
/* The facts JSON, or NULL while they are being gathered (or were never). */
const char *deploy_host_facts(const struct deploy_host *h);
/* True from deploy_host_describe until its callback. */
bool deploy_host_facts_pending(const struct deploy_host *h);

/* ---- GPU telemetry of a load point ---- */

/* Starts sampling the GPUs (nothing without NVML). */
void deploy_host_sample_start(struct deploy_host *h);
/* Stops sampling; ret->available is false when nothing was sampled. */
void deploy_host_sample_stop(struct deploy_host *h, struct gpu_telemetry_stats *ret);

/* ---- hygiene between deployments ---- */

/* The deployers report a server gone once its processes have exited and its
 * port is free; GPU memory may lag behind (a CUDA context torn down by the
 * driver, another process still unmapping). */
struct deploy_host_memory {
	bool idle;            /* back within the margin of the idle level (or cannot tell) */
	double used_mib;      /* in use now, summed over GPUs (NAN: unknown) */
	double idle_mib;      /* in use when the host was opened (NAN: unknown) */
	uint64_t waited_usec; /* how long the wait took */
};

typedef void (*deploy_host_idle_fn)(struct deploy_host *h, const struct deploy_host_memory *m, void *userdata);

/* Checks the GPUs' memory: back within a margin (512 MiB) of the idle level,
 * or no NVML: returns 1 and cb is never called. Otherwise returns 0 and
 * polls once a second until it is, or until timeout_usec passed (0: a
 * minute), then calls cb once (m->idle false: timed out; the memory may
 * belong to a process goodput did not start, which it never kills). *ret_now
 * (may be NULL) gets what was seen now. -EBUSY while a wait runs. */
int deploy_host_wait_idle(struct deploy_host *h, uint64_t timeout_usec, deploy_host_idle_fn cb, void *userdata,
			  struct deploy_host_memory *ret_now);
/* Ends a wait without calling its callback. */
void deploy_host_cancel_wait(struct deploy_host *h);
bool deploy_host_waiting(const struct deploy_host *h);
