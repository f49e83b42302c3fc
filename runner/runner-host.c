/* runner-host.c — the runner's glue to the host it deploys on
 * (deploy-host.h) and its wall-time budget.
 *
 * Host facts (engine version, GPU model, driver, count) are gathered once
 * per run, without blocking: every trial of this run gets them, those
 * recorded before they were known as soon as they are; a planner that
 * waited for them (the twin's warm-start key) is asked again. GPU figures
 * are sampled around each load point. Between trials the runner waits for
 * GPU memory to return to its idle level (a minute at most; nothing waits
 * without NVML), unless a pause, stop or cancel is to be acted on.
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

#define HYGIENE_TIMEOUT_USEC (60 * USEC_PER_SEC)

/* ---- host facts ---- */

/* The facts are known: every trial of this run that has none yet gets them. */
static void on_host_facts(struct deploy_host *h, const char *json, void *userdata)
{
	struct runner *r = userdata;
	struct store_trial *t = NULL;
	struct error err = { 0 };
	size_t n = 0;
	int k = 0;

	if (!json)
		log_warning("study %s: out of memory describing the host", r->row.name);
	else if (runner_failing(r))
		return;
	else {
		k = store_trial_history(r->store, r->study_id, &t, &n, &err);
		for (size_t i = 0; i < n && k >= 0; i++)
			if (!t[i].host_json && t[i].started_usec >= r->host_since_usec)
				k = store_trial_set_host(r->store, t[i].id, json, &err);
		store_trial_array_free(t, n);
	}
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	if (r->plan_waits_host) {
		r->plan_waits_host = false;
		runner_schedule(r, RUNNER_ACTION_PLAN);
	}
}

int runner_host_record(struct runner *r, int64_t trial_id, struct error *err)
{
	const char *json = r->host ? deploy_host_facts(r->host) : NULL;

	if (!json)
		return 0;
	return store_trial_set_host(r->store, trial_id, json, err);
}

void runner_host_start(struct runner *r)
{
	int k, terr = 0;

	r->host_since_usec = real_usec();
	k = deploy_host_new(r->event, &r->host, &terr);
	if (k < 0) {
		log_warning("study %s: cannot describe the host: %s", r->row.name, strerror(-k));
		return;
	}
	if (terr < 0)
		log_warning("study %s: GPU telemetry unavailable: %s", r->row.name, strerror(-terr));
	k = deploy_host_describe(r->host, r->profile, r->study->engine_binary, on_host_facts, r);
	if (k < 0)
		log_warning("study %s: cannot describe the host: %s", r->row.name, strerror(-k));
}

void runner_host_free(struct runner *r)
{
	r->host = deploy_host_free(r->host);
}

/* ---- telemetry of a load point ----
 *
 * NVML is sampled over the whole host: a load point's figures are its
 * trial's only while no other trial runs beside it (otherwise NAN). */

static unsigned running_count(const struct runner *r)
{
	unsigned n = 0;

	for (size_t i = 0; i < r->n_trials; i++)
		n += r->trials[i]->running;
	return n;
}

void runner_gpu_point_start(struct runner_trial *t)
{
	struct runner *r = t->runner;

	/* a cluster's GPUs are on its nodes, not on this host */
	if (!r->host || r->sampling || running_count(r) != 1 || runner_on_cluster(r))
		return;
	r->sampling = t;
	r->sampling_shared = false;
	deploy_host_sample_start(r->host);
}

void runner_gpu_note_start(struct runner *r)
{
	if (r->sampling)
		r->sampling_shared = true;
}

void runner_gpu_point_stop(struct runner_trial *t, struct store_gpu_figures *ret)
{
	struct runner *r = t->runner;
	struct gpu_telemetry_stats st = { 0 };

	*ret = (struct store_gpu_figures){ NAN, NAN, NAN, NAN };
	if (!r->host || r->sampling != t)
		return;
	r->sampling = NULL;
	deploy_host_sample_stop(r->host, &st);
	if (!st.available || r->sampling_shared)
		return;
	*ret = (struct store_gpu_figures){
		.util_mean = st.util_mean,
		.util_peak = st.util_peak,
		.mem_mean_mib = st.mem_used_mean_mib,
		.mem_peak_mib = st.mem_used_peak_mib,
	};
}

/* ---- hygiene between trials (with the host drained) ---- */

static void go_on(struct runner *r)
{
	if (runner_settle_request(r))
		return;
	runner_set_phase(r, RUNNER_PLANNING);
	runner_schedule(r, RUNNER_ACTION_PLAN);
}

static void on_memory_idle(struct deploy_host *h, const struct deploy_host_memory *m, void *userdata)
{
	struct runner *r = userdata;

	if (runner_failing(r))
		return; /* runner_finish frees everything */
	if (m->idle)
		log_info("GPU memory back to its idle level after %.1f s", (double)m->waited_usec / USEC_PER_SEC);
	else
		log_warning("GPU memory still at %.0f MiB after %llu s (idle level %.0f MiB): deploying anyway",
			    m->used_mib, (unsigned long long)(HYGIENE_TIMEOUT_USEC / USEC_PER_SEC), m->idle_mib);
	go_on(r);
}

void runner_after_server_gone(struct runner *r)
{
	struct deploy_host_memory now;

	if (r->host && r->request == RUNNER_REQUEST_NONE && !runner_on_cluster(r) &&
	    deploy_host_wait_idle(r->host, HYGIENE_TIMEOUT_USEC, on_memory_idle, r, &now) == 0) {
		log_info("waiting for GPU memory to return to its idle level (%.0f MiB in use, %.0f MiB idle)",
			 now.used_mib, now.idle_mib);
		return;
	}
	go_on(r);
}

bool runner_host_stop_waiting(struct runner *r)
{
	if (!r->host || !deploy_host_waiting(r->host))
		return false;
	deploy_host_cancel_wait(r->host);
	return true;
}

/* ---- wall time ---- */

uint64_t runner_trial_share_usec(const struct runner *r)
{
	if (r->wall_budget_usec == 0 || r->wall_budget_usec == UINT64_MAX)
		return 0;
	return r->wall_budget_usec / MAX(r->study->budget.min_configurations, 1u);
}

bool runner_wall_budget_spent(struct runner *r, char *msg, size_t size)
{
	uint64_t used, left;
	double mean_deploy, mean_trial;

	if (r->wall_budget_usec == 0 || r->wall_budget_usec == UINT64_MAX)
		return false;
	used = r->wall_used_before_usec + (runner_clock(r) - r->start_usec);
	if (r->wall_expired || used >= r->wall_budget_usec) {
		snprintf(msg, size, "wall-time budget reached (%.0f s used of %.0f s)", (double)used / USEC_PER_SEC,
			 (double)r->wall_budget_usec / USEC_PER_SEC);
		return true;
	}
	left = r->wall_budget_usec - used;
	mean_trial = r->trial_n ? r->trial_sum_s / r->trial_n : 0;
	if (mean_trial > 0 && (double)left / USEC_PER_SEC < mean_trial) {
		snprintf(
			msg, size,
			"wall-time budget reached: %.0f s left, less than a trial takes (%.0f s on average): none more "
			"was started",
			(double)left / USEC_PER_SEC, mean_trial);
		return true;
	}
	mean_deploy = r->deploy_n ? r->deploy_sum_s / r->deploy_n : 0;
	if (mean_deploy > 0 && (double)left / USEC_PER_SEC < mean_deploy) {
		snprintf(msg, size,
			 "wall-time budget reached: %.0f s left, less than a deployment takes (%.1f s on average)",
			 (double)left / USEC_PER_SEC, mean_deploy);
		return true;
	}
	return false;
}
