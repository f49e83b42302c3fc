/* runner-host.c — what the study runner learns about and asks of the host
 * it deploys on: GPU telemetry during each load point (NVML, loaded at run
 * time by gpu-telemetry.c; its absence is normal and leaves the figures
 * NULL), the host facts recorded with every trial (engine version, GPU
 * model, driver, count: host_info_start, a non-blocking job started once
 * per run), hygiene between trials, and the wall-time budget.
 *
 * Hygiene: the deployers report a server gone only once its processes have
 * exited and its port is free. GPU memory may lag behind (a CUDA context
 * torn down by the driver, another engine process still unmapping), so
 * where NVML is available the runner polls the memory in use once a second
 * until it is back within HYGIENE_MARGIN_MIB of what it was when the study
 * started, or a minute has passed (then it warns and deploys anyway: the
 * memory may belong to a process goodput did not start, which it never
 * kills). Without NVML nothing waits.
 *
 * Wall time: a resumed study does not restart its clock: what its stored
 * trials took (started → finished) counts as spent. Before a new trial the
 * runner also charges the deployment it would start: when less of the
 * budget is left than this study's deployments took on average, it stops
 * instead of starting one it could not finish. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runner-internal.h"
#include "time-util.h"

#define HYGIENE_MARGIN_MIB   512.0
#define HYGIENE_POLL_USEC    USEC_PER_SEC
#define HYGIENE_TIMEOUT_USEC (60 * USEC_PER_SEC)

/* ---- host facts ---- */

/* The job's answer: every trial of this run that has none yet gets it. */
static void on_host_info(struct host_info_job *j, char *json, void *userdata)
{
	struct runner *r = userdata;
	struct store_trial *t = NULL;
	struct error err = { 0 };
	size_t n = 0;
	int k;

	r->host_job = host_info_job_free(j);
	if (!json) {
		log_warning("study %s: out of memory describing the host", r->row.name);
		runner_twin_host_known(r);
		return;
	}
	free(r->host_json);
	r->host_json = json;
	if (r->action == RUNNER_ACTION_FINISH)
		return;
	k = store_trial_history(r->store, r->study_id, &t, &n, &err);
	for (size_t i = 0; i < n && k >= 0; i++)
		if (!t[i].host_json && t[i].started_usec >= r->host_since_usec)
			k = store_trial_set_host(r->store, t[i].id, r->host_json, &err);
	store_trial_array_free(t, n);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return;
	}
	runner_twin_host_known(r);
}

int runner_host_record(struct runner *r, int64_t trial_id, struct error *err)
{
	if (!r->host_json)
		return 0;
	return store_trial_set_host(r->store, trial_id, r->host_json, err);
}

void runner_host_start(struct runner *r)
{
	int k;

	r->host_since_usec = real_usec();
	r->gpu_idle_mib = NAN;
	k = gpu_telemetry_new(r->event, 0, &r->gpu);
	if (k < 0)
		log_warning("study %s: GPU telemetry unavailable: %s", r->row.name, strerror(-k));
	else if (!gpu_telemetry_available(r->gpu))
		log_debug("GPU telemetry unavailable: %s", gpu_telemetry_unavailable_reason(r->gpu));
	else if (gpu_telemetry_memory_used(r->gpu, &r->gpu_idle_mib) < 0)
		r->gpu_idle_mib = NAN;
	else
		log_debug("GPU memory in use before the study: %.0f MiB", r->gpu_idle_mib);
	k = host_info_start(r->event, r->profile, r->gpu, 0, on_host_info, r, &r->host_job);
	if (k < 0)
		log_warning("study %s: cannot describe the host: %s", r->row.name, strerror(-k));
}

void runner_host_free(struct runner *r)
{
	r->hygiene_timer = sd_event_source_disable_unref(r->hygiene_timer);
	r->host_job = host_info_job_free(r->host_job);
	r->gpu = gpu_telemetry_free(r->gpu);
	free(r->host_json);
	r->host_json = NULL;
}

/* ---- telemetry of a load point ---- */

void runner_gpu_point_start(struct runner *r)
{
	if (r->gpu)
		(void)gpu_telemetry_start(r->gpu);
}

void runner_gpu_point_stop(struct runner *r, struct store_gpu_figures *ret)
{
	struct gpu_telemetry_stats st;

	*ret = (struct store_gpu_figures){ NAN, NAN, NAN, NAN };
	if (!r->gpu)
		return;
	(void)gpu_telemetry_stop(r->gpu);
	gpu_telemetry_get(r->gpu, &st);
	if (!st.available || st.samples == 0)
		return;
	*ret = (struct store_gpu_figures){
		.util_mean = st.util_mean,
		.util_peak = st.util_peak,
		.mem_mean_mib = st.mem_used_mean_mib,
		.mem_peak_mib = st.mem_used_peak_mib,
	};
}

/* ---- hygiene between trials ---- */

static void go_on(struct runner *r)
{
	r->hygiene_timer = sd_event_source_disable_unref(r->hygiene_timer);
	if (runner_settle_request(r))
		return;
	runner_set_phase(r, RUNNER_PLANNING);
	runner_schedule(r, RUNNER_ACTION_PLAN);
}

/* true when memory is back near idle, or cannot be read (nothing to wait for). */
static bool gpu_memory_idle(struct runner *r, double *ret_used)
{
	*ret_used = NAN;
	if (!r->gpu || !isfinite(r->gpu_idle_mib) || gpu_telemetry_memory_used(r->gpu, ret_used) < 0)
		return true;
	return *ret_used <= r->gpu_idle_mib + HYGIENE_MARGIN_MIB;
}

static int on_hygiene(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;
	uint64_t waited = mono_usec() - r->hygiene_start_usec;
	double used;

	if (r->action == RUNNER_ACTION_FINISH)
		return 0; /* failing: runner_finish frees everything */
	if (r->request != RUNNER_REQUEST_NONE) {
		go_on(r); /* pause/stop: no need to wait for the GPU */
		return 0;
	}
	if (gpu_memory_idle(r, &used)) {
		log_info("GPU memory back to its idle level after %.1f s", (double)waited / USEC_PER_SEC);
		go_on(r);
		return 0;
	}
	if (waited >= HYGIENE_TIMEOUT_USEC) {
		log_warning("GPU memory still at %.0f MiB after %llu s (idle level %.0f MiB): deploying anyway", used,
			    (unsigned long long)(HYGIENE_TIMEOUT_USEC / USEC_PER_SEC), r->gpu_idle_mib);
		go_on(r);
		return 0;
	}
	if (sd_event_source_set_time_relative(s, HYGIENE_POLL_USEC) < 0 ||
	    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) < 0)
		go_on(r);
	return 0;
}

void runner_after_server_gone(struct runner *r)
{
	double used;
	int k;

	r->hygiene_timer = sd_event_source_disable_unref(r->hygiene_timer);
	if (r->request == RUNNER_REQUEST_NONE && !gpu_memory_idle(r, &used)) {
		log_info("waiting for GPU memory to return to its idle level (%.0f MiB in use, %.0f MiB idle)", used,
			 r->gpu_idle_mib);
		r->hygiene_start_usec = mono_usec();
		k = sd_event_add_time_relative(r->event, &r->hygiene_timer, CLOCK_MONOTONIC, HYGIENE_POLL_USEC, 1000,
					       on_hygiene, r);
		if (k >= 0) {
			(void)sd_event_source_set_description(r->hygiene_timer, "runner-gpu-hygiene");
			return;
		}
	}
	go_on(r);
}

/* ---- wall time ---- */

bool runner_wall_budget_spent(struct runner *r, char *msg, size_t size)
{
	uint64_t used, left;
	double mean_deploy;

	if (r->wall_budget_usec == 0 || r->wall_budget_usec == UINT64_MAX)
		return false;
	used = r->wall_used_before_usec + (r->start_usec ? mono_usec() - r->start_usec : 0);
	if (r->wall_expired || used >= r->wall_budget_usec) {
		snprintf(msg, size, "wall-time budget reached (%.0f s used of %.0f s)", (double)used / USEC_PER_SEC,
			 (double)r->wall_budget_usec / USEC_PER_SEC);
		return true;
	}
	left = r->wall_budget_usec - used;
	mean_deploy = r->deploy_n ? r->deploy_sum_s / r->deploy_n : 0;
	if (mean_deploy > 0 && (double)left / USEC_PER_SEC < mean_deploy) {
		snprintf(msg, size,
			 "wall-time budget reached: %.0f s left, less than a deployment takes (%.1f s on average)",
			 (double)left / USEC_PER_SEC, mean_deploy);
		return true;
	}
	return false;
}
