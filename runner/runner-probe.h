/* runner-probe.h — the probe of a real trial, run in a process of its own.
 *
 * The same probe as probes/probe.h (warm-up, saturation run, rate search),
 * in a forked copy of the runner's process with an sd-event loop of its own;
 * what the caller hears are the probe's events and its outcome, as the
 * probe would tell them. Why a process: a load point's requests, their
 * results and the figures computed over them grow with the workload, and the
 * runner's loop also answers goodputd's control socket — a million-prompt
 * load point must neither take the daemon's memory nor hold its loop, and
 * the daemon's own work (a report, many clients) must not delay the reading
 * of tokens the probe times. The requests stay in the probe's process: a
 * load point arrives as its figures (struct probe_result, bit-exact) and the
 * sentence naming the SLA bound it missed (probe_sla_shortfall), which is
 * all the trial's outcome reads of them.
 *
 * The process dies with the runner's (PR_SET_PDEATHSIG), holds none of its
 * descriptors but its pipe, and is killed when the probe is freed. Internal
 * to runner/. */
#pragma once

#include <stddef.h>

#include <systemd/sd-event.h>

#include "probe.h"

#define RUNNER_PROBE_SHORTFALL_MAX 320

struct runner_probe;

/* A load point as the probe's process reports it: pt.requests is NULL. */
struct runner_probe_point {
	struct probe_load_point pt;
	char shortfall[RUNNER_PROBE_SHORTFALL_MAX]; /* which bound its requests missed, by how much */
};

/* ev->point, for LOAD_POINT_DONE, is the point's runner_probe_point.pt. */
typedef void (*runner_probe_event_fn)(struct runner_probe *p, const struct probe_event *ev, void *userdata);
/* r < 0: the probe could not run or its process died (runner_probe_error). */
typedef void (*runner_probe_done_fn)(struct runner_probe *p, int r, void *userdata);

/* Starts the probe of cfg in a process of its own; callbacks come from e.
 * cfg's strings need only last for the call. err names what failed. */
int runner_probe_start(sd_event *e, const struct probe_config *cfg, runner_probe_event_fn on_event,
		       runner_probe_done_fn on_done, void *userdata, struct runner_probe **ret, struct error *err);
/* Kills the process (reaped by the loop) and frees everything; no callback. */
struct runner_probe *runner_probe_free(struct runner_probe *p);

/* What the probe measured, and its outcome, once done was called. */
const struct runner_probe_point *runner_probe_points(const struct runner_probe *p, size_t *ret_n);
void runner_probe_outcome(const struct runner_probe *p, struct probe_outcome *ret);
const char *runner_probe_error(const struct runner_probe *p);
/* The probe's process id while it runs (0 when none). */
pid_t runner_probe_pid(const struct runner_probe *p);
