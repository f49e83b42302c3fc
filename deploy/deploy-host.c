/* deploy-host.c — the host a study deploys on (deploy-host.h): GPU
 * telemetry (gpu-telemetry.c, NVML loaded at run time), the host facts job
 * (host_info_start, once per run) and the wait for idle GPU memory between
 * deployments.
 *
 * Hygiene: where NVML is available, the memory in use on the GPUs when the
 * host is opened is the idle level. After a teardown the caller asks whether
 * the memory is back within HYGIENE_MARGIN_MIB of it; when not, a timer
 * polls once a second until it is or the time-out passes. Without NVML
 * nothing waits. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "deploy-host.h"
#include "log.h"
#include "time-util.h"

#define HYGIENE_MARGIN_MIB   512.0
#define HYGIENE_POLL_USEC    USEC_PER_SEC
#define HYGIENE_TIMEOUT_USEC (60 * USEC_PER_SEC)

struct deploy_host {
	sd_event *event;
	struct gpu_telemetry *gpu; /* NULL when it could not be set up */
	double idle_mib;           /* GPU memory in use at start (NAN: no NVML) */

	struct host_info_job *facts_job;
	char *facts_json;
	bool described;
	deploy_host_facts_fn facts_cb;
	void *facts_userdata;

	sd_event_source *wait_timer;
	uint64_t wait_start_usec, wait_timeout_usec;
	deploy_host_idle_fn idle_cb;
	void *idle_userdata;
};

int deploy_host_new(sd_event *e, struct deploy_host **ret, int *ret_telemetry_error)
{
	struct deploy_host *h = calloc(1, sizeof(*h));
	int k;

	if (!h)
		return -ENOMEM;
	h->event = sd_event_ref(e);
	h->idle_mib = NAN;
	k = gpu_telemetry_new(e, 0, &h->gpu);
	if (k < 0)
		h->gpu = NULL;
	else if (!gpu_telemetry_available(h->gpu))
		log_debug("GPU telemetry unavailable: %s", gpu_telemetry_unavailable_reason(h->gpu));
	else if (gpu_telemetry_memory_used(h->gpu, &h->idle_mib) < 0)
		h->idle_mib = NAN;
	else
		log_debug("GPU memory in use before the study: %.0f MiB", h->idle_mib);
	if (ret_telemetry_error)
		*ret_telemetry_error = k < 0 ? k : 0;
	*ret = h;
	return 0;
}

struct deploy_host *deploy_host_free(struct deploy_host *h)
{
	if (!h)
		return NULL;
	deploy_host_cancel_wait(h);
	host_info_job_free(h->facts_job);
	free(h->facts_json);
	gpu_telemetry_free(h->gpu);
	sd_event_unref(h->event);
	free(h);
	return NULL;
}

/* ---- host facts ---- */

static void on_facts(struct host_info_job *j, char *json, void *userdata)
{
	struct deploy_host *h = userdata;

	h->facts_job = host_info_job_free(j);
	free(h->facts_json);
	h->facts_json = json;
	if (h->facts_cb)
		h->facts_cb(h, json, h->facts_userdata);
}

int deploy_host_describe(struct deploy_host *h, const struct engine_profile *p, const char *binary,
			 deploy_host_facts_fn cb, void *userdata)
{
	if (h->described)
		return -EALREADY;
	h->described = true;
	h->facts_cb = cb;
	h->facts_userdata = userdata;
	return host_info_start(h->event, p, binary, h->gpu, 0, on_facts, h, &h->facts_job);
}

const char *deploy_host_facts(const struct deploy_host *h)
{
	return h->facts_json;
}

bool deploy_host_facts_pending(const struct deploy_host *h)
{
	return h->facts_job != NULL;
}

/* ---- GPU telemetry of a load point ---- */

void deploy_host_sample_start(struct deploy_host *h)
{
	if (h->gpu)
		(void)gpu_telemetry_start(h->gpu);
}

void deploy_host_sample_stop(struct deploy_host *h, struct gpu_telemetry_stats *ret)
{
	*ret = (struct gpu_telemetry_stats){ 0 };
	if (!h->gpu)
		return;
	(void)gpu_telemetry_stop(h->gpu);
	gpu_telemetry_get(h->gpu, ret);
	if (ret->samples == 0)
		ret->available = false;
}

/* ---- hygiene ---- */

/* true when memory is back near idle, or cannot be read (nothing to wait for). */
static bool memory_idle(struct deploy_host *h, struct deploy_host_memory *m)
{
	*m = (struct deploy_host_memory){ .idle = true, .used_mib = NAN, .idle_mib = h->idle_mib };
	if (!h->gpu || !isfinite(h->idle_mib) || gpu_telemetry_memory_used(h->gpu, &m->used_mib) < 0)
		return true;
	m->idle = m->used_mib <= h->idle_mib + HYGIENE_MARGIN_MIB;
	return m->idle;
}

static void end_wait(struct deploy_host *h, struct deploy_host_memory *m)
{
	deploy_host_idle_fn cb = h->idle_cb;
	void *userdata = h->idle_userdata;

	m->waited_usec = mono_usec() - h->wait_start_usec;
	deploy_host_cancel_wait(h);
	cb(h, m, userdata);
}

static int on_wait_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deploy_host *h = userdata;
	struct deploy_host_memory m;

	if (memory_idle(h, &m) || mono_usec() - h->wait_start_usec >= h->wait_timeout_usec) {
		end_wait(h, &m);
		return 0;
	}
	if (sd_event_source_set_time_relative(s, HYGIENE_POLL_USEC) < 0 ||
	    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) < 0) {
		m.idle = false; /* cannot poll: do not hold the caller up */
		end_wait(h, &m);
	}
	return 0;
}

int deploy_host_wait_idle(struct deploy_host *h, uint64_t timeout_usec, deploy_host_idle_fn cb, void *userdata,
			  struct deploy_host_memory *ret_now)
{
	struct deploy_host_memory m;
	int k;

	if (h->wait_timer)
		return -EBUSY;
	if (memory_idle(h, &m)) {
		if (ret_now)
			*ret_now = m;
		return 1;
	}
	k = sd_event_add_time_relative(h->event, &h->wait_timer, CLOCK_MONOTONIC, HYGIENE_POLL_USEC, 1000,
				       on_wait_timer, h);
	if (k < 0) {
		h->wait_timer = NULL;
		return k;
	}
	(void)sd_event_source_set_description(h->wait_timer, "deploy-host-gpu-hygiene");
	h->wait_start_usec = mono_usec();
	h->wait_timeout_usec = timeout_usec ? timeout_usec : HYGIENE_TIMEOUT_USEC;
	h->idle_cb = cb;
	h->idle_userdata = userdata;
	if (ret_now)
		*ret_now = m;
	return 0;
}

void deploy_host_cancel_wait(struct deploy_host *h)
{
	h->wait_timer = sd_event_source_disable_unref(h->wait_timer);
	h->idle_cb = NULL;
	h->idle_userdata = NULL;
}

bool deploy_host_waiting(const struct deploy_host *h)
{
	return h->wait_timer != NULL;
}
