/* test-calibration.c — PERFMODEL.md's published calibration points C1–C12
 * reproduced through the C performance model.
 *
 * Two procedures, as in emumodel.py: ttft1 (a lone prompt prefilled in
 * budget-sized chunks, summing the step times) and steady (a continuous-
 * batching steady state: B = min(max_num_seqs, KV tokens / (ISL + OSL))
 * decodes at average context ISL + OSL/2 plus B·ISL/OSL prefill tokens per
 * step, capped by the token budget). KV capacity comes from the C core's
 * memory budget (§4.3), not emumodel's fixed activation reserve. Every point
 * must be within ±20 % of the measurement, except C10 (MLPerf, the known
 * outlier), which is printed only. `test-calibration --table` prints the
 * Markdown table for the README. */

#include <string.h>

#include "sim-test-util.h"

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

static double ttft1(const struct sim_perf *p, double isl, double budget)
{
	double t = 0, o = 0;

	while (o < isl) {
		double c = isl - o < budget ? isl - o : budget;
		t += step_of(p, 0, 0, 1, c, o, NULL);
		o += c;
	}
	return t;
}

static double steady(const struct sim_perf *p, double isl, double osl, uint32_t max_seqs, uint32_t budget, double gmu,
		     uint32_t *ret_b)
{
	struct sim_memory mem;
	double cap, pf, bud, scale = 1.0, t;
	uint32_t b;

	sim_perf_memory(p, &(struct sim_memory_policy){ .rules = SIM_MEMORY_VLLM, .fraction = gmu }, budget, max_seqs,
			16, &mem);
	cap = (double)mem.kv_tokens;
	b = (uint32_t)(cap / (isl + osl) < max_seqs ? cap / (isl + osl) : max_seqs);
	pf = b * isl / osl;
	bud = budget > b ? budget - b : 0;
	if (pf > bud) {
		scale = bud / pf;
		pf = bud;
	}
	t = step_of(p, b, isl + osl / 2, 1, pf, isl / 2, NULL);
	*ret_b = b;
	return b * scale / t;
}

struct point {
	char id[8];
	char label[96];
	double pred, meas;
	const char *unit;
	bool asserted;
};

static struct point pts[64];
static size_t n_pts;

static void add(const char *id, const char *label, double pred, double meas, const char *unit, bool asserted)
{
	CHECK(n_pts < ELEMENTSOF(pts));
	pts[n_pts] = (struct point){ .pred = pred, .meas = meas, .unit = unit, .asserted = asserted };
	snprintf(pts[n_pts].id, sizeof(pts[n_pts].id), "%s", id);
	snprintf(pts[n_pts].label, sizeof(pts[n_pts].label), "%s", label);
	n_pts++;
}

int main(int argc, char **argv)
{
	bool table = argc > 1 && strcmp(argv[1], "--table") == 0;
	struct sim_perf p;
	uint32_t b;
	char label[96];
	int bad = 0;

	/* C1–C3 (and L40S from the same doc): TRT-LLM v0.5 batch-1 TTFT at ISL 2048. */
	p = perf_of("llama-7b", "H100", "fp8", 1, 2, "trtllm");
	add("C1", "H100 FP8 LLaMA-7B TTFT, ISL 2048", ttft1(&p, 2048, 1e9) * 1e3, 36, "ms", true);
	add("C1", "H100 FP8 LLaMA-7B TTFT, ISL 128", ttft1(&p, 128, 1e9) * 1e3, 7, "ms", false);
	p = perf_of("llama-2-70b", "H100", "fp8", 4, 2, "trtllm");
	add("C2", "H100 FP8 LLaMA-70B TP4 TTFT, ISL 2048", ttft1(&p, 2048, 1e9) * 1e3, 109, "ms", true);
	p = perf_of("llama-7b", "A100", "none", 1, 2, "trtllm");
	add("C3", "A100 FP16 LLaMA-7B TTFT, ISL 2048", ttft1(&p, 2048, 1e9) * 1e3, 133, "ms", true);
	p = perf_of("llama-2-70b", "A100", "none", 4, 2, "trtllm");
	add("C3", "A100 FP16 LLaMA-70B TP4 TTFT, ISL 2048", ttft1(&p, 2048, 1e9) * 1e3, 377, "ms", true);
	p = perf_of("llama-7b", "L40S", "fp8", 1, 2, "trtllm");
	add("C3", "L40S FP8 LLaMA-7B TTFT, ISL 2048", ttft1(&p, 2048, 1e9) * 1e3, 73, "ms", true);

	/* C4/C5: TRT-LLM max-throughput tables (gmu 0.95, FP8 KV, 2048 seqs, 8192 budget). */
	static const struct {
		const char *id, *model, *gpu;
		uint32_t tp, isl, osl;
		double meas;
	} thr[] = {
		{ "C4", "llama-3.1-8b", "H100", 1, 128, 128, 28312 },
		{ "C4", "llama-3.1-8b", "H100", 1, 1000, 1000, 15220 },
		{ "C4", "llama-3.1-8b", "H100", 1, 128, 2048, 22714 },
		{ "C4", "llama-3.1-8b", "H100", 1, 2048, 128, 3450 },
		{ "C4", "llama-3.1-8b", "H100", 1, 2048, 2048, 9305 },
		{ "C4", "llama-3.1-8b", "H100", 1, 5000, 500, 3459 },
		{ "C4", "llama-3.1-8b", "H200", 1, 1000, 1000, 17744 },
		{ "C4", "llama-3.1-8b", "H200", 1, 2048, 2048, 12194 },
		{ "C5", "llama-3.1-70b", "H100", 2, 1000, 1000, 4205 },
		{ "C5", "llama-3.1-70b", "H100", 2, 128, 2048, 6651 },
		{ "C5", "llama-3.1-70b", "H100", 2, 2048, 128, 762 },
		{ "C5", "llama-3.1-70b", "H100", 2, 2048, 2048, 3082 },
		{ "C5", "llama-3.1-70b", "H200", 1, 1000, 1000, 2909 },
		{ "C5", "llama-3.1-70b", "H200", 1, 2048, 2048, 2003 },
	};
	for (size_t i = 0; i < ELEMENTSOF(thr); i++) {
		double v;

		p = perf_of(thr[i].model, thr[i].gpu, "fp8", thr[i].tp, 1, "trtllm");
		v = steady(&p, thr[i].isl, thr[i].osl, 2048, 8192, 0.95, &b);
		snprintf(label, sizeof(label), "TRT %s FP8 TP%u %s %u/%u max throughput (B=%u)", thr[i].gpu, thr[i].tp,
			 thr[i].model, thr[i].isl, thr[i].osl, b);
		add(thr[i].id, label, v, thr[i].meas, "tok/s", true);
	}

	/* C6: NIM 1.8 (TRT-LLM), Llama-3.3-70B FP8 TP2 on 2×H100, FP8 KV. */
	p = perf_of("llama-3.1-70b", "H100", "fp8", 2, 1, "trtllm");
	add("C6", "NIM 70B FP8 TP2 5000/500 c=1 TTFT", ttft1(&p, 5000, 8192) * 1e3, 407, "ms", true);
	add("C6", "NIM 70B FP8 TP2 5000/500 c=1 ITL", step_of(&p, 1, 5250, 0, 0, 0, NULL) * 1e3, 18.58, "ms", true);
	add("C6", "NIM 70B FP8 TP2 500/2000 c=1 ITL", step_of(&p, 1, 1500, 0, 0, 0, NULL) * 1e3, 18.91, "ms", true);
	add("C6", "NIM 70B FP8 TP2 5000/500 c=50 ITL", step_of(&p, 50, 5250, 1, 500, 2500, NULL) * 1e3, 59.73, "ms",
	    true);

	/* C7/C8: vLLM 0.6 ShareGPT (ISL≈220, OSL≈200), 256 seqs, 2048 budget, gmu 0.9. */
	p = perf_of("llama-3.1-8b", "H100", "none", 1, 2, "vllm");
	add("C7", "vLLM 0.6 L3.1-8B BF16 TP1 ShareGPT", steady(&p, 220, 200, 256, 2048, 0.9, &b), 8088, "tok/s", true);
	p = perf_of("llama-3.1-70b", "H100", "none", 4, 2, "vllm");
	add("C8", "vLLM 0.6 L3.1-70B BF16 TP4 ShareGPT", steady(&p, 220, 200, 256, 2048, 0.9, &b), 3543, "tok/s", true);

	/* C9: vLLM 0.6 Llama-3-8B BF16 H100, 10 concurrent decodes. */
	p = perf_of("llama-3.1-8b", "H100", "none", 1, 2, "vllm");
	add("C9", "vLLM 8B BF16 H100 decode step, 10 seqs", step_of(&p, 10, 400, 0, 0, 0, NULL) * 1e3, 7.2, "ms", true);

	/* C10: MLPerf v5.0 8×H100 llama2-70b offline, modelled as 4 × TP2 FP8 (printed only). */
	p = perf_of("llama-2-70b", "H100", "fp8", 2, 1, "trtllm");
	add("C10", "MLPerf 8xH100 llama2-70b offline (4 x TP2 FP8)", 4 * steady(&p, 300, 292, 2048, 8192, 0.95, &b),
	    31307, "tok/s", false);

	/* C11: Azure ND H100 v5, TRT-LLM 0.15 trtllm-bench, modelled like C4 (2048 seqs, 8192
	 * budget, gmu 0.95, FP8 KV). Its 128/128 figure is about half of NVIDIA's own C4 figure
	 * on the same GPU and its 70B TP8 figure is below what TP8 gives by any roofline; the
	 * run settings (batch size, request count) are not published, so those two are printed,
	 * not asserted. */
	static const struct {
		const char *model;
		uint32_t tp, isl, osl, max_seqs;
		double meas;
		bool asserted;
	} az[] = {
		{ "llama-3.1-8b", 1, 1024, 1024, 2048, 11724, true },
		{ "llama-3.1-8b", 1, 128, 128, 2048, 15163, false },
		{ "llama-3.1-8b", 1, 2048, 2048, 2048, 8026, true },
		{ "llama-3.1-70b", 8, 1024, 1024, 2048, 9125, false },
	};
	for (size_t i = 0; i < ELEMENTSOF(az); i++) {
		p = perf_of(az[i].model, "H100", "fp8", az[i].tp, 1, "trtllm");
		double v = steady(&p, az[i].isl, az[i].osl, az[i].max_seqs, 8192, 0.95, &b);
		snprintf(label, sizeof(label), "Azure TRT 0.15 %s FP8 TP%u %u/%u (B=%u)", az[i].model, az[i].tp,
			 az[i].isl, az[i].osl, b);
		add("C11", label, v, az[i].meas, "tok/s", az[i].asserted);
	}

	/* C12: vLLM V1, Llama-3.1-8B BF16 ShareGPT 1000 prompts (steady-state approximation). */
	p = perf_of("llama-3.1-8b", "H100", "none", 1, 2, "vllm");
	add("C12", "vLLM V1 L3.1-8B BF16 ShareGPT, 1000 prompts", steady(&p, 230, 203, 1024, 8192, 0.9, &b), 6583,
	    "tok/s", true);

	if (table)
		printf("| Point | Setup | Predicted | Measured | Error |\n|---|---|---|---|---|\n");
	for (size_t i = 0; i < n_pts; i++) {
		double e = (pts[i].pred - pts[i].meas) / pts[i].meas * 100;
		bool ok = !pts[i].asserted || (e >= -20 && e <= 20);

		if (table)
			printf("| %s | %s | %.1f | %.1f %s | %+.0f%%%s |\n", pts[i].id, pts[i].label, pts[i].pred,
			       pts[i].meas, pts[i].unit, e, pts[i].asserted ? "" : " (not asserted)");
		else
			printf("%-4s %-62s pred %10.1f  meas %10.1f %-5s %+5.0f%% %s\n", pts[i].id, pts[i].label,
			       pts[i].pred, pts[i].meas, pts[i].unit, e,
			       !pts[i].asserted ? "(printed only)"
			       : ok             ? "ok"
						: "OUT OF ±20%");
		if (!ok)
			bad++;
	}
	CHECK_MSG(bad == 0, "%d calibration points outside ±20%%", bad);
	return 0;
}
