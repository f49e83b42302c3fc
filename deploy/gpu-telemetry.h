/* gpu-telemetry.h — GPU utilisation and memory during load points (NVML,
 * loaded at run time), and the host facts recorded with every trial.
 *
 * NVML is dlopen()ed ("libnvidia-ml.so.1", or $GOODPUT_NVML_LIBRARY); its
 * absence is normal (no NVIDIA driver, a CPU host, a container without the
 * library) and makes every result "unavailable" — nothing here fails for it.
 * Sampling runs on the caller's sd-event loop: a timer reads utilisation and
 * memory of every GPU (NVML calls take microseconds) between start and stop.
 *
 * Use (deploy-host.c holds one per study run):
 *   gpu_telemetry_new(e, 0, &t)            once per study (or per process)
 *   gpu_telemetry_start(t)                 when a load point starts
 *   gpu_telemetry_stop(t); gpu_telemetry_get(t, &stats)   when it ends
 *   gpu_telemetry_stats_to_json(&stats, &j) to store with the load point
 *   gpu_telemetry_memory_used(t, &mib)     between trials: wait for idle memory
 *   host_info_start(e, profile, ...)       once per study: JSON for store_trial_set_host */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "engine-profile.h"
#include "macro.h"

#define GPU_TELEMETRY_MAX_GPUS 64

struct gpu_telemetry;

struct gpu_telemetry_stats {
	bool available; /* false: no NVML; everything below is 0 */
	unsigned gpus;
	unsigned samples;
	double util_peak, util_mean;                 /* %, the mean over GPUs per sample; peak/mean over samples */
	double mem_used_peak_mib, mem_used_mean_mib; /* summed over GPUs */
	double mem_total_mib;                        /* summed over GPUs */
};

/* Loads NVML when it can (absence is not an error) and prepares a sampler
 * with the given interval (0: 500 ms). The caller frees it. */
int gpu_telemetry_new(sd_event *e, uint64_t interval_usec, struct gpu_telemetry **ret);
struct gpu_telemetry *gpu_telemetry_free(struct gpu_telemetry *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpu_telemetry *, gpu_telemetry_free)

bool gpu_telemetry_available(const struct gpu_telemetry *t);
/* Why NVML is unavailable ("libnvidia-ml.so.1: cannot open shared object
 * file", "nvmlInit_v2 failed: 9"), or NULL when it is available. */
const char *gpu_telemetry_unavailable_reason(const struct gpu_telemetry *t);

/* Forgets earlier samples, takes one now and then one every interval.
 * Without NVML it only records that nothing is available. */
int gpu_telemetry_start(struct gpu_telemetry *t);
/* Stops sampling (the statistics stay until the next start). */
int gpu_telemetry_stop(struct gpu_telemetry *t);
/* Statistics of the samples since the last start. */
void gpu_telemetry_get(const struct gpu_telemetry *t, struct gpu_telemetry_stats *ret);
/* {"available": true, "gpus": 2, "samples": 40, "util_peak": 97, "util_mean": 81.5,
 *  "mem_used_peak_mib": ..., "mem_used_mean_mib": ..., "mem_total_mib": ...}
 * or {"available": false}. The caller owns *ret. */
int gpu_telemetry_stats_to_json(const struct gpu_telemetry_stats *s, cJSON **ret);
/* GPU memory in use now, summed over GPUs; -ENODEV without NVML. */
int gpu_telemetry_memory_used(struct gpu_telemetry *t, double *ret_mib);

/* ---- host information ---- */

/* The host's GPUs as NVML names them, for the host JSON: model of GPU 0,
 * driver version, count; -ENODEV without NVML. Strings are copied to bufs. */
int gpu_telemetry_describe(struct gpu_telemetry *t, char *model, size_t model_size, char *driver, size_t driver_size,
			   unsigned *ret_count);

struct host_info_job;
/* Called once with the host JSON (owned by the callee: free()) — engine
 * version (the profile's version_command, its output read with the profile's
 * version_pattern, by default the last line; null when it failed or is absent), GPU model, driver, GPU count (or "gpu": null and
 * "gpu_telemetry": "unavailable: ..."), kernel and hostname. json is NULL
 * only when out of memory. */
typedef void (*host_info_fn)(struct host_info_job *j, char *json, void *userdata);
/* Runs the version command (argv, no shell, stdout+stderr captured, killed
 * after timeout_usec; 0: 60 s) on the loop and calls cb. p (may be NULL) is
 * borrowed and must outlive the job; binary (the study's engine_binary, or
 * NULL) replaces the version command's program when that is the profile's
 * own. t may be NULL (no
 * GPU facts). The job is freed by host_info_job_free (after cb, or to cancel). */
int host_info_start(sd_event *e, const struct engine_profile *p, const char *binary, struct gpu_telemetry *t,
		    uint64_t timeout_usec, host_info_fn cb, void *userdata, struct host_info_job **ret);
struct host_info_job *host_info_job_free(struct host_info_job *j);
