/* faults.h — fault injection for goodput-sim (all off by default).
 *
 * The reliability tests of the tuner need a server that misbehaves on cue:
 * one that dies, hangs, fails to start, answers 500, sends malformed SSE,
 * steps with extra jitter, or spends per-step time the performance model does
 * not describe. This module holds those settings and makes the per-request
 * random decisions from its own seeded generator, so a fault run is
 * reproducible for a seed. It does no I/O; the server acts on its answers. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct sim_faults {
	uint64_t crash_after;    /* die (SIGKILL) on the request after this many; 0 = never */
	uint64_t hang_after;     /* stop answering after this many requests; 0 = never */
	bool fail_startup;       /* fail after the load delay with vLLM's engine-init error */
	double http500_fraction; /* [0, 1]: requests answered with HTTP 500 */
	double bad_sse_fraction; /* [0, 1]: streams that get one malformed chunk and end */
	double jitter_sigma;     /* >= 0: extra log-normal sigma of every step time (the engine applies it) */
	double step_overhead_ms; /* >= 0: extra per-step cost, outside the performance model */
	uint64_t rng_state;      /* splitmix64 state, from the seed */
};

/* All faults off, random decisions seeded from seed. */
void sim_faults_init(struct sim_faults *f, uint64_t seed);
/* Re-seeds the random decisions, keeping the settings. */
void sim_faults_seed(struct sim_faults *f, uint64_t seed);

/* True when any fault flag is set (for the start-up log line). */
bool sim_faults_any(const struct sim_faults *f);

/* A uniform double in [0, 1) from the fault generator. */
double sim_faults_uniform(struct sim_faults *f);

/* Per-request decisions: draw one uniform each and compare to the fraction. */
bool sim_faults_draw_http500(struct sim_faults *f);
bool sim_faults_draw_bad_sse(struct sim_faults *f);
