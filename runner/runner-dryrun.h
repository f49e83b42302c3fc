/* runner-dryrun.h — one configuration of a study evaluated in virtual time
 * with goodput-sim's engine model (the `--dry-run` of `goodput tune`, and
 * the oracle the tune tests compare a real search with).
 *
 * The study's canonical knobs become the sim's engine flags (model preset =
 * model.name, GPU preset = gpu.type); extra knobs that name a sim engine flag
 * (gpu_memory_utilization, kv_cache_dtype, max_model_len) are applied too,
 * others are ignored. Online studies get sim_find_max_rate under the study's
 * SLA; offline ones the saturated throughput. The cost comes from the same
 * cost model (optimizer/cost.h) as a real trial's. The answer's load-step
 * sweep (runner-sweep.c) runs here too, point by point. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "metrics.h"
#include "perfmodel.h"
#include "space.h"
#include "study.h"

/* Rates of a dry run's sweep at most. */
#define RUNNER_DRY_SWEEP_MAX 8

struct runner_dry_result {
	bool infeasible;                  /* the start-up checks refused it (weights or KV cache do not fit) */
	enum sim_startup_cause cause;     /* infeasible: why, as the engine's log would say */
	uint32_t suggested_max_model_len; /* cause KV cache: the longest that fits (0: none) */
	bool sla_never_met;               /* online: no rate met the SLA */
	char message[ERROR_MSG_MAX];
	double max_rate;       /* req/s (online) or saturated completions/s (offline) */
	double tokens_per_sec; /* what the cost counts */
	double concurrency;    /* mean requests in flight at that load */
	double cost_per_mtok;  /* NAN when infeasible / never met */
	bool have_point, have_saturated;
	struct probe_result point;     /* the load at max_rate (online) or saturation (offline) */
	struct probe_result saturated; /* online: the rate-inf run */
	/* what the trial takes on the host's clock: the server's start-up (the
	 * sim core's start-up model, sim_engine_startup_usec: weights read at
	 * 2 GB/s, 20 s initialisation + 5 s per TP rank above 1, 15 s of CUDA
	 * graph capture; a refused configuration fails after its weights and
	 * initialisation) and the probe's load points */
	double startup_s, probe_s;
	/* a sweep (runner_dry_sweep): its load points, one per rate */
	unsigned n_sweep;
	struct probe_result sweep[RUNNER_DRY_SWEEP_MAX];
};

/* What one evaluation may add to the address space of the process it runs
 * in (runner-eval-dry.c runs each in a child limited to it): a million
 * prompts of 512 tokens need more. */
#define RUNNER_DRY_MEMORY_MAX (UINT64_C(1) << 30)

/* The probe's rate search after its saturation run: 3.7–4.5 load points on
 * average (README), charged as 4 at the answer's rate. */
#define RUNNER_DRY_SEARCH_POINTS 4

/* Evaluates config. variant > 0 changes the engine's jitter seed (a
 * "re-probe" for confirmations). Infeasible or never-met configurations are
 * a success (ret->infeasible / sla_never_met); errors are for bad specs (an
 * unknown model or GPU preset), with err naming it. */
int runner_dry_evaluate(const struct study *study, const struct opt_config *config, unsigned variant,
			struct runner_dry_result *ret, struct error *err);
/* An engine that is not goodput-sim as published, for benchmarks: its
 * constants from a profile file (`goodput-sim --profile-file`), and costs
 * the model does not have (sim_engine_config's fault_step_usec and
 * fault_step_per_seq_usec). */
struct runner_dry_engine {
	const char *profile_file; /* NULL: the preset's constants */
	double fault_step_usec, fault_step_per_seq_usec;
};
int runner_dry_evaluate_with(const struct study *study, const struct opt_config *config, unsigned variant,
			     const struct runner_dry_engine *engine, struct runner_dry_result *ret, struct error *err);
/* The same for knob values that need not lie on the study's grid (a
 * baseline at the engine's defaults): {"max_num_seqs": 256, ...}; knobs
 * absent take the sim's defaults. */
int runner_dry_evaluate_knobs(const struct study *study, const cJSON *knobs, unsigned variant,
			      struct runner_dry_result *ret, struct error *err);
/* A load-step sweep of knobs in virtual time: a load point of the study's
 * workload at each of the n (≤ RUNNER_DRY_SWEEP_MAX) rates, as the probe's
 * sweep sends them (the same arrival sequence scaled to each rate, another
 * prompt variant at each point), into ret->sweep; probe_s is their
 * duration, startup_s the server's start-up. A configuration that no
 * longer starts is ret->infeasible. */
int runner_dry_sweep(const struct study *study, const cJSON *knobs, unsigned variant, const double *rates, size_t n,
		     struct runner_dry_result *ret, struct error *err);
