/* test-simulate.c — the virtual-time mode: deterministic for a seed, closed
 * loop respects max_concurrency, and the tuning trade-offs a user would look
 * for show up in the probe's figures (max_num_batched_tokens vs TTFT/TPOT,
 * TP vs TPOT, preemptions at the KV limit); the rate search and the command. */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "simulate.h"
#include "tests.h"

static struct probe_workload *workload(uint32_t n, uint32_t in, uint32_t out, double rate, uint32_t conc, uint64_t seed)
{
	struct probe_workload_config c;
	struct probe_workload *w = NULL;
	struct error err = { 0 };

	probe_workload_config_init(&c);
	c.input = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = in, .range_ratio = 0.5 };
	c.output = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = out, .range_ratio = 0.5 };
	c.num_prompts = n;
	c.arrival = rate > 0 ? PROBE_ARRIVAL_POISSON : PROBE_ARRIVAL_INF;
	c.request_rate = rate;
	c.burstiness = 1;
	c.max_concurrency = conc;
	c.seed = seed;
	CHECK_MSG(probe_workload_generate(&c, &w, &err) == 0, "%s", err.msg);
	return w;
}

static void config(struct sim_engine_config *c, const char *model, uint32_t tp, uint32_t mns, uint32_t mbt)
{
	sim_engine_config_init(c);
	snprintf(c->model_name, sizeof(c->model_name), "%s", model);
	c->tp = tp;
	c->max_num_seqs = mns;
	c->max_num_batched_tokens = mbt;
	c->max_model_len = 8192;
}

static struct probe_result sim(const struct sim_engine_config *c, const struct probe_workload *w,
			       struct sim_simulate_stats *st)
{
	struct probe_result r;
	struct error err = { 0 };

	CHECK_MSG(sim_simulate(c, w, NULL, NULL, 0, &r, st, &err) == 0, "%s", err.msg);
	return r;
}

static void test_determinism(void)
{
	struct sim_engine_config c;
	struct probe_workload *w = workload(200, 512, 128, 20, 0, 7);
	struct probe_result a, b, d;

	config(&c, "llama-3.1-8b", 1, 256, 2048);
	a = sim(&c, w, NULL);
	b = sim(&c, w, NULL);
	CHECK(memcmp(&a.stat, &b.stat, sizeof(a.stat)) == 0);
	CHECK(a.duration_s == b.duration_s && a.output_throughput == b.output_throughput);
	CHECK_INT_EQ(a.completed, 200);
	CHECK_INT_EQ(a.failed, 0);
	CHECK(a.stat[PROBE_METRIC_TTFT].mean_ms > 0 && a.stat[PROBE_METRIC_TPOT].mean_ms > 5);
	/* A different seed changes the jitter (and so the figures). */
	c.seed = 8;
	d = sim(&c, w, NULL);
	CHECK(d.stat[PROBE_METRIC_TPOT].mean_ms != a.stat[PROBE_METRIC_TPOT].mean_ms);
	CHECK_REL(d.stat[PROBE_METRIC_TPOT].mean_ms, a.stat[PROBE_METRIC_TPOT].mean_ms, 0.05);
	probe_workload_free(w);
}

static void test_closed_loop(void)
{
	struct sim_engine_config c;
	struct probe_workload *w = workload(100, 256, 64, 0, 8, 1);
	struct probe_request_result *reqs = NULL;
	struct sim_simulate_stats st;
	size_t n = 0;
	double dur;
	struct error err = { 0 };

	config(&c, "llama-3.1-8b", 1, 256, 2048);
	CHECK(sim_simulate_requests(&c, w, &reqs, &n, &dur, &st, &err) == 0);
	CHECK_INT_EQ(n, 100);
	/* At any send time at most 8 requests are in flight (counting the one sent). */
	for (size_t i = 0; i < n; i++) {
		uint32_t busy = 0;

		for (size_t k = 0; k < n; k++)
			if (reqs[k].send_usec <= reqs[i].send_usec &&
			    reqs[k].send_usec + reqs[k].e2e_usec > reqs[i].send_usec)
				busy++;
		CHECK_MSG(busy <= 8, "%u in flight at request %zu", busy, i);
	}
	CHECK(st.running_peak <= 8);
	for (size_t i = 0; i < n; i++)
		probe_request_result_done(&reqs[i]);
	free(reqs);

	struct probe_result r = sim(&c, w, NULL);
	CHECK(r.max_concurrent_requests <= 8);
	CHECK(r.mean_concurrency > 6);
	probe_workload_free(w);
}

/* Larger max_num_batched_tokens: lower TTFT under load, higher TPOT (prefill
 * chunks share the decode steps). */
static void test_budget_tradeoff(void)
{
	struct sim_engine_config c;
	struct probe_workload *w = workload(300, 3000, 200, 6, 0, 3);
	struct probe_result small, big;

	config(&c, "llama-3.1-70b", 4, 256, 512);
	small = sim(&c, w, NULL);
	config(&c, "llama-3.1-70b", 4, 256, 8192);
	big = sim(&c, w, NULL);
	printf("mbt 512: TTFT %.0f ms TPOT %.1f ms; mbt 8192: TTFT %.0f ms TPOT %.1f ms\n",
	       small.stat[PROBE_METRIC_TTFT].mean_ms, small.stat[PROBE_METRIC_TPOT].mean_ms,
	       big.stat[PROBE_METRIC_TTFT].mean_ms, big.stat[PROBE_METRIC_TPOT].mean_ms);
	CHECK(big.stat[PROBE_METRIC_TTFT].mean_ms < small.stat[PROBE_METRIC_TTFT].mean_ms);
	CHECK(big.stat[PROBE_METRIC_TPOT].mean_ms > small.stat[PROBE_METRIC_TPOT].mean_ms);
	probe_workload_free(w);
}

/* TP=2 lowers TPOT (at twice the GPUs); the KV limit causes preemptions. */
static void test_tp_and_kv(void)
{
	struct sim_engine_config c;
	struct probe_workload *w = workload(64, 512, 256, 0, 16, 5);
	struct sim_simulate_stats st;
	struct probe_result t1, t2, r;

	config(&c, "llama-3.1-8b", 1, 256, 2048);
	t1 = sim(&c, w, NULL);
	config(&c, "llama-3.1-8b", 2, 256, 2048);
	t2 = sim(&c, w, NULL);
	CHECK(t2.stat[PROBE_METRIC_TPOT].mean_ms < 0.9 * t1.stat[PROBE_METRIC_TPOT].mean_ms);
	probe_workload_free(w);

	/* 70B FP8 on one H100 at gmu 0.95: a few thousand KV tokens for 64 requests of ~800. */
	w = workload(64, 300, 500, 0, 0, 5);
	config(&c, "llama-3.1-70b", 1, 64, 2048);
	c.quant = SIM_QUANT_FP8;
	c.gpu_memory_utilization = 0.95;
	c.max_model_len = 2048;
	r = sim(&c, w, &st);
	CHECK(st.engine.preemptions > 0);
	CHECK(r.server.present && r.server.preemptions == st.engine.preemptions);
	CHECK(r.server.kv_usage_peak > 0.9);
	CHECK_INT_EQ(r.completed, 64);
	probe_workload_free(w);
}

static void test_rate_search(void)
{
	struct sim_engine_config c;
	struct probe_workload_config wc;
	struct probe_sla sla = { 0 };
	struct sim_rate_search s;
	struct error err = { 0 };

	probe_workload_config_init(&wc);
	wc.input = (struct probe_length_dist){ .kind = PROBE_DIST_FIXED, .mean = 1024 };
	wc.output = (struct probe_length_dist){ .kind = PROBE_DIST_FIXED, .mean = 128 };
	wc.num_prompts = 200;
	CHECK(probe_sla_parse("ttft:500,tpot:30", &sla, &err) == 0);
	config(&c, "llama-3.1-8b", 1, 256, 2048);
	CHECK_MSG(sim_find_max_rate(&c, &wc, &sla, 0.05, 14, &s, &err) == 0, "%s", err.msg);
	printf("max rate %.2f req/s (goodput %.0f tok/s, %.3f $/Mtok) in %u runs; saturated %.0f tok/s\n", s.max_rate,
	       s.at_max.good_output_throughput, s.usd_per_mtok, s.runs, s.saturated.output_throughput);
	CHECK(s.max_rate > 0 && s.max_rate < s.saturated.request_throughput);
	CHECK(s.at_max.sla_met);
	CHECK(s.runs <= 14);
	CHECK(isfinite(s.usd_per_mtok) && s.usd_per_mtok > 0);
	CHECK_REL(s.usd_per_mtok, sim_usd_per_mtok(3.0, s.at_max.good_output_throughput), 1e-9);

	struct probe_result sat;
	CHECK(sim_saturated_throughput(&c, &wc, &sat, &err) == 0);
	CHECK(sat.output_throughput == s.saturated.output_throughput);

	/* An infeasible configuration fails with vLLM's words. */
	config(&c, "llama-3.1-70b", 1, 256, 2048);
	CHECK(sim_find_max_rate(&c, &wc, &sla, 0.05, 14, &s, &err) == -EFBIG);
	CHECK_STR_CONTAINS(err.msg, "CUDA out of memory");
}

static void test_command(void)
{
	char *ok[] = { "simulate",
		       "--model",
		       "llama-3.1-8b",
		       "--gpu",
		       "A100",
		       "--num-prompts",
		       "20",
		       "--random-input-len",
		       "256",
		       "--random-output-len",
		       "32",
		       "--request-rate",
		       "5",
		       "--max-num-seqs",
		       "64",
		       "--json",
		       NULL };
	char *bad[] = { "simulate", "--max-num-seqs", "lots", NULL };
	char *oom[] = { "simulate", "--model", "llama-3.1-70b", "--num-prompts", "5", NULL };

	CHECK_INT_EQ(sim_cmd_simulate(16, ok), 0);
	CHECK_INT_EQ(sim_cmd_simulate(3, bad), 2);
	CHECK_INT_EQ(sim_cmd_simulate(5, oom), 1);
}

int main(void)
{
	test_determinism();
	test_closed_loop();
	test_budget_tradeoff();
	test_tp_and_kv();
	test_rate_search();
	test_command();
	return 0;
}
