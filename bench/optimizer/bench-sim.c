/* bench-sim.c — the benchmark's true costs from goodput-sim's engine model:
 * for each configuration, the largest Poisson request rate meeting the SLA
 * in virtual time (sim_find_max_rate) and its $/Mtok, for the space's
 * workload (bench-landscape.c). The engine runs without jitter: the
 * benchmark adds its own measurement noise per deployment. A configuration
 * the engine refuses at start-up is infeasible; one that meets the SLA at
 * no rate is "SLA never met". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench-landscape.h"
#include "simulate.h"

int bench_sim_eval(const char *model, const char *gpu, unsigned gpus, const struct bench_workload *wl,
		   const struct opt_space *space, const struct opt_config *c, struct bench_point *ret,
		   struct error *err)
{
	struct sim_engine_config cfg;
	struct probe_workload_config w;
	struct probe_sla sla = { 0 };
	struct sim_rate_search rs = { 0 };
	struct error e2 = { 0 };
	char buf[64];
	int r;

	sim_engine_config_init(&cfg);
	r = sim_engine_config_apply_flag(&cfg, "--model", model, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&cfg, "--gpu", gpu, err);
	if (r >= 0) {
		snprintf(buf, sizeof(buf), "%u", gpus);
		r = sim_engine_config_apply_flag(&cfg, "--gpus", buf, err);
	}
	for (size_t k = 0; k < space->n_knobs && r >= 0; k++) {
		static const char *const flags[][2] = {
			{ "max_num_seqs", "--max-num-seqs" },
			{ "max_num_batched_tokens", "--max-num-batched-tokens" },
			{ "quantization", "--quantization" },
			{ "tensor_parallel", "--tensor-parallel-size" },
		};
		for (size_t f = 0; f < 4; f++)
			if (strcmp(space->knobs[k].name, flags[f][0]) == 0)
				r = sim_engine_config_apply_flag(&cfg, flags[f][1],
								 opt_config_text(space, c, k, buf, sizeof(buf)), err);
	}
	if (r >= 0)
		r = sim_engine_config_apply_flag(&cfg, "--jitter", "0", err);
	if (r >= 0)
		r = sim_engine_config_resolve(&cfg, err);
	if (r < 0)
		return r;

	probe_workload_config_init(&w);
	w.input = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM,
					      .mean = wl->in_mean,
					      .range_ratio = wl->in_range };
	w.output = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM,
					       .mean = wl->out_mean,
					       .range_ratio = wl->out_range };
	w.num_prompts = wl->num_prompts;
	w.lengths_only = true;
	r = probe_sla_parse(wl->sla, &sla, err);
	if (r < 0)
		return r;
	sla.attainment = wl->attainment;
	r = sim_find_max_rate(&cfg, &w, &sla, wl->rel_tol, wl->max_runs, &rs, &e2);
	if (r < 0) {
		/* A start-up refusal (does not fit) is an outcome, not an error. */
		*ret = (struct bench_point){ .outcome = OPT_OUTCOME_INFEASIBLE };
		return 0;
	}
	if (!(rs.max_rate > 0) || !isfinite(rs.usd_per_mtok)) {
		*ret = (struct bench_point){ .outcome = OPT_OUTCOME_SLA_NEVER_MET };
		return 0;
	}
	*ret = (struct bench_point){ .outcome = OPT_OUTCOME_MEASURED, .cost = rs.usd_per_mtok };
	return 0;
}
