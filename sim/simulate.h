/* simulate.h — goodput-sim's virtual-time mode: a workload through the engine
 * model instantly.
 *
 * The requests come from the probe's workload generator (probes/workload.h),
 * so `goodput-sim simulate` and `goodput probe` against the real-time server
 * see the same requests for a seed. Arrivals are open loop (the workload's
 * arrival times) or closed loop (at most max_concurrency in flight: the next
 * request is sent when one finishes, not before its arrival time). Each
 * request's send time is its arrival, TTFT/ITL/E2E come from the engine's
 * step end times, all in virtual µs; the load point's figures come from
 * probe_result_compute, so they are exactly what the probe would compute.
 *
 * Helpers on top: the largest request rate that meets an SLA (bisection over
 * simulate runs) and the saturated (offline) throughput — the "cost of a
 * configuration" for dry-run tuning and optimizer benchmarks. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "error.h"
#include "metrics.h"
#include "workload.h"

/* Engine-side figures of one simulate run. */
struct sim_simulate_stats {
	struct sim_engine_stats engine;      /* at the end of the run */
	double kv_usage_mean, kv_usage_peak; /* step-weighted over the run */
	double running_mean, waiting_mean;
	uint32_t running_peak, waiting_peak;
	uint64_t virtual_usec;                                  /* first send → last completion */
	uint64_t prompt_tokens, generation_tokens;              /* of the measured requests (warm-ups excluded) */
	uint64_t prefix_queries, prefix_hits;                   /* prefix cache, likewise */
	uint64_t spec_drafts, spec_draft_tokens, spec_accepted; /* speculative decoding, likewise */
	bool spec;                                              /* speculation configured */
};

/* The prompt tokens a simulation of prompts (not lengths only) takes at
 * most: more is -E2BIG, naming the workload. */
#define SIM_SIMULATE_MAX_PROMPT_TOKENS (UINT64_C(1) << 28)

/* Runs w through an engine built from cfg (start-up checks apply: err has
 * vLLM's wording for an infeasible config). Warm-up requests are run first
 * and excluded. Fills ret_reqs (one per measured request, in workload order;
 * the caller frees each with probe_request_result_done and the array with
 * free) and ret_duration_s (first measured send → last completion, s).
 * ret_stats may be NULL. Deterministic in (cfg, w). */
int sim_simulate_requests(const struct sim_engine_config *cfg, const struct probe_workload *w,
			  struct probe_request_result **ret_reqs, size_t *ret_n, double *ret_duration_s,
			  struct sim_simulate_stats *ret_stats, struct error *err);

/* As sim_simulate_requests, reduced to the load point's result (the object
 * `goodput probe --json` prints). pcts/n_pcts as probe_result_compute (0 =
 * 50/90/99); sla may be NULL. ret_result->server is filled from the engine
 * (KV usage, running, waiting, preemptions). */
int sim_simulate(const struct sim_engine_config *cfg, const struct probe_workload *w, const struct probe_sla *sla,
		 const double *pcts, size_t n_pcts, struct probe_result *ret_result,
		 struct sim_simulate_stats *ret_stats, struct error *err);

/* The result of a rate search. */
struct sim_rate_search {
	double max_rate;               /* largest tried rate meeting the SLA (req/s); 0 when none did */
	struct probe_result at_max;    /* its result (valid when max_rate > 0) */
	struct probe_result saturated; /* the run at rate inf */
	unsigned runs;                 /* simulate runs spent */
	double usd_per_mtok; /* GPU $/h × DP × TP × PP ÷ (goodput at max_rate × 3600) × 1e6; INFINITY when none */
};

/* Finds the largest request rate at which the workload (wcfg with its arrival
 * set to Poisson/gamma at the tried rate; the same seed every time) meets sla:
 * first a run at rate inf gives the saturated throughput, which brackets the
 * search; then bisection until the bracket is within rel_tol (0 = 0.03) or
 * max_runs (0 = 16) runs. cfg must pass the start-up checks. */
int sim_find_max_rate(const struct sim_engine_config *cfg, const struct probe_workload_config *wcfg,
		      const struct probe_sla *sla, double rel_tol, unsigned max_runs, struct sim_rate_search *ret,
		      struct error *err);

/* Offline scenario: every request at t = 0 (rate inf, no concurrency cap). */
int sim_saturated_throughput(const struct sim_engine_config *cfg, const struct probe_workload_config *wcfg,
			     struct probe_result *ret, struct error *err);

/* $ per million output tokens at a given token rate: usd_per_hour ÷ (tok/s × 3600) × 1e6. */
double sim_usd_per_mtok(double usd_per_hour, double tokens_per_sec);

/* `goodput-sim simulate [ENGINE FLAGS] [WORKLOAD FLAGS] [--json]`: argv[0] is
 * "simulate". Returns the process exit status (0 ok, 1 infeasible config or
 * failure, 2 usage error). */
int sim_cmd_simulate(int argc, char **argv);
