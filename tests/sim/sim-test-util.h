/* sim-test-util.h — small helpers the sim tests share: building a deployment
 * by preset names and evaluating the step time of uniform batch shapes. */
#pragma once

#include "perfmodel.h"
#include "tests.h"

/* A deployment from preset names; kv_bytes 2 = auto, 1 = fp8. Aborts the test on error. */
static inline struct sim_perf perf_of(const char *model, const char *gpu, const char *quant, uint32_t tp, int kv_bytes,
				      const char *profile)
{
	struct sim_model m;
	struct sim_profile prof;
	struct sim_perf p;
	enum sim_quant q;
	struct error err = { 0 };
	const struct sim_gpu *g = sim_gpu_find(gpu);

	CHECK_MSG(g, "gpu %s", gpu);
	CHECK(sim_model_preset(model, &m, &err) == 0);
	CHECK(sim_profile_preset(profile, &prof, &err) == 0);
	CHECK(sim_quant_from_string(quant, &q) == 0);
	CHECK_MSG(sim_perf_init(&p, &m, g, q, kv_bytes == 1 ? SIM_KV_FP8 : SIM_KV_AUTO, tp, &prof, &err) == 0, "%s",
		  err.msg);
	return p;
}

/* Step time (s) of n_dec decodes at context ctx plus n_chunks chunks (len, offset). */
static inline double step_of(const struct sim_perf *p, uint32_t n_dec, double ctx, uint32_t n_chunks, double len,
			     double off, struct sim_step_parts *parts)
{
	struct sim_batch b = { 0 };

	for (uint32_t i = 0; i < n_dec; i++)
		sim_batch_add_decode(&b, (uint64_t)llround(ctx));
	for (uint32_t i = 0; i < n_chunks; i++)
		sim_batch_add_chunk(&b, (uint64_t)llround(len), (uint64_t)llround(off));
	return sim_perf_step_time(p, &b, parts);
}
