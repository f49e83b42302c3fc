/* report-fixture.c — see report-fixture.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "report-fixture.h"
#include "store.h"
#include "tests.h"

static const char spec_fmt[] =
	"{\"name\":\"%s\",\"engine\":\"sim\",\"engine_args\":[\"--seed\",\"7 8\"],\"label\":\"chat 512/64\","
	"\"model\":{\"name\":\"llama-3.1-70b\"},\"quantizations\":[\"none\",\"fp8\"],"
	"\"gpu\":{\"type\":\"L40S\",\"count\":4,\"price_per_gpu_hour\":0.99},"
	"\"search_space\":{\"max_num_seqs\":{\"min\":8,\"max\":64,\"scale\":\"log2\"},"
	"\"max_num_batched_tokens\":{\"min\":512,\"max\":2048,\"scale\":\"log2\"},\"tensor_parallel\":[1,2]},"
	"\"workload\":{\"dataset\":\"random\",\"input_len\":512,\"output_len\":64,\"range_ratio\":0.25,"
	"\"num_prompts\":200,\"seed\":7},"
	"\"sla\":{\"ttft_ms\":2000,\"tpot_ms\":100,\"attainment\":0.9},"
	"\"budget\":{\"max_trials\":16},\"search\":{\"seed\":1,\"algorithm\":\"LN_SBPLX\"}}";

double fix_cost(unsigned gpus, double goodput)
{
	return FIX_PRICE * gpus / (goodput * 3600.0) * 1e6;
}

static int64_t add_study(struct store *s, const char *name)
{
	char spec[4096];
	struct store_study st = { 0 };
	struct error err = { 0 };
	int64_t id = 0;

	snprintf(spec, sizeof(spec), spec_fmt, name);
	st.name = (char *)name;
	st.spec_json = spec;
	st.engine = (char *)"sim";
	st.model = (char *)"llama-3.1-70b";
	st.label = (char *)"chat 512/64";
	st.seed = 1;
	st.algorithm = (char *)"LN_SBPLX";
	st.nlopt_version = (char *)"2.7.1";
	CHECK_MSG(store_study_insert(s, &st, &id, &err) >= 0, "%s", err.msg);
	CHECK_MSG(store_study_set_state(s, id, STORE_STUDY_RUNNING, NULL, &err) >= 0, "%s", err.msg);
	return id;
}

/* One load point at rate (INFINITY: saturation) of a configuration whose max
 * SLA rate is max_rate. Latency grows as the load nears saturation. scraped:
 * the server's /metrics and NVML's GPU figures were recorded (see
 * FIX_GPU_* for the figures at the SLA's edge). */
static void add_point(struct store *s, int64_t trial, uint32_t seq, const char *phase, double rate, double max_rate,
		      double goodput, bool scraped)
{
	struct store_gpu_figures gpu = { 0 };
	struct probe_result r = { 0 };
	struct error err = { 0 };
	double load = isfinite(rate) ? rate / max_rate : 1.6; /* 1 = at the SLA's edge */
	bool met = isfinite(rate) && rate <= max_rate * 1.0001;

	r.request_rate = rate;
	r.burstiness = 1;
	r.num_prompts = 200;
	r.completed = 200;
	r.duration_s = 200 / (isfinite(rate) ? rate : max_rate * 1.4);
	r.request_throughput = isfinite(rate) ? rate : max_rate * 1.4;
	r.output_throughput = r.request_throughput * 64;
	r.total_token_throughput = r.request_throughput * 576;
	r.attainment = met ? 0.99 - 0.08 * load * load : 0.4;
	r.sla_met = met;
	r.good_output_throughput = met ? goodput * (isfinite(rate) ? rate / max_rate : 1) : r.output_throughput * 0.4;
	r.request_goodput = r.good_output_throughput / 64;
	r.mean_concurrency = r.request_throughput * 3;
	r.n_percentiles = 3;
	r.percentiles[0] = 50;
	r.percentiles[1] = 90;
	r.percentiles[2] = 99;
	r.sla.n_bounds = 2;
	r.sla.bounds[0] = (struct probe_sla_bound){ PROBE_METRIC_TTFT, 0, 2000 };
	r.sla.bounds[1] = (struct probe_sla_bound){ PROBE_METRIC_TPOT, 0, 100 };
	r.sla.attainment = 0.9;
	for (int m = 0; m < _PROBE_METRIC_MAX; m++) {
		double base = m == PROBE_METRIC_TTFT ? 300 : m == PROBE_METRIC_E2EL ? 5000 : 30;
		double f = 1 + 2 * load * load * load;

		r.stat[m].n = 200;
		r.stat[m].mean_ms = base * f * 1.1;
		r.stat[m].median_ms = base * f;
		r.stat[m].pct_ms[0] = base * f;
		r.stat[m].pct_ms[1] = base * f * 1.6;
		r.stat[m].pct_ms[2] = base * f * 2.4;
	}
	if (scraped) {
		r.server.present = true;
		r.server.kv_usage_mean = 0.3 * load;
		r.server.kv_usage_peak = MIN(0.45 * load + 0.1, 1.0);
		r.server.running_mean = 10 * load;
		r.server.running_peak = 16 * load;
		r.server.waiting_peak = load > 1 ? 20 * (load - 1) : 0;
		r.server.samples = 10;
		gpu.util_mean = FIX_GPU_UTIL_MEAN * load;
		gpu.util_peak = MIN(FIX_GPU_UTIL_PEAK * load, 100.0);
		gpu.mem_mean_mib = 20000 + (FIX_GPU_MEM_MEAN - 20000) * load;
		gpu.mem_peak_mib = 22000 + (FIX_GPU_MEM_PEAK - 22000) * load;
	}
	CHECK_MSG(store_load_point_insert_gpu(s, trial, seq, !isfinite(rate) ? "saturation" : phase, &r,
					      scraped ? &gpu : NULL, NULL, &err) >= 0,
		  "%s", err.msg);
}

struct fix_trial {
	const char *kind;
	unsigned seqs, chunk;
	const char *quant;
	unsigned tp;
	enum store_trial_state state;
	enum store_failure failure;
	const char *message;
	double max_rate, goodput; /* 0: none */
};

/* The rate search's finite load points, as fractions of the max rate: a
 * spread from half to a quarter beyond it, or (FIX_F) clustered near it, as
 * a real search ends bracketing its answer. */
static const double spread_steps[] = { 0.5, 0.75, 1.0, 1.25 };
static const double clustered_steps[] = { 0.85, 0.92, 1.0 };

static int64_t add_trial(struct store *s, int64_t study, const struct fix_trial *t, uint32_t n, bool scraped,
			 const double *steps, size_t n_steps)
{
	char knobs[256], key[256], launch[1024];
	struct error err = { 0 };
	int64_t id = 0;

	snprintf(knobs, sizeof(knobs),
		 "{\"max_num_seqs\":%u,\"max_num_batched_tokens\":%u,\"quantization\":\"%s\",\"tensor_parallel\":%u}",
		 t->seqs, t->chunk, t->quant, t->tp);
	snprintf(key, sizeof(key), "max_num_seqs=%u,max_num_batched_tokens=%u,quantization=%s,tensor_parallel=%u",
		 t->seqs, t->chunk, t->quant, t->tp);
	CHECK_MSG(store_trial_insert(s, study, t->kind, knobs, key, &id, &err) >= 0, "%s", err.msg);
	CHECK(store_trial_set_state(s, id, STORE_TRIAL_DEPLOYING, &err) >= 0);
	/* the command as the runner records it at launch: the trial's own port */
	snprintf(launch, sizeof(launch),
		 "{\"argv\":[\"goodput-sim\",\"serve\",\"--model\",\"llama-3.1-70b\",\"--gpu\",\"L40S\",\"--gpus\","
		 "\"4\",\"--host\",\"127.0.0.1\",\"--port\",\"%u\",\"--max-num-seqs\",\"%u\","
		 "\"--max-num-batched-tokens\",\"%u\",\"--quantization\",\"%s\",\"--tensor-parallel-size\",\"%u\"],"
		 "\"env\":[\"CUDA_VISIBLE_DEVICES=0\"]}",
		 FIX_LAUNCH_PORT + n, t->seqs, t->chunk, t->quant, t->tp);
	CHECK_MSG(store_trial_set_launch(s, id, launch, &err) >= 0, "%s", err.msg);
	if (n == 1)
		CHECK(store_trial_set_host(
			      s, id, "{\"engine_version\":\"goodput-sim 0.1.0\",\"gpu\":\"L40S\",\"driver\":\"sim\"}",
			      &err) >= 0);
	CHECK(store_trial_set_state(s, id, STORE_TRIAL_PROBING, &err) >= 0);
	if (t->goodput > 0) {
		uint32_t k = 0;

		if (strcmp(t->kind, "sweep") == 0) {
			/* the load-step sweep: 20 % to 110 % of the max rate */
			static const double sweep[] = { 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0, 1.1 };

			for (size_t i = 0; i < ELEMENTSOF(sweep); i++)
				add_point(s, id, k++, "sweep", t->max_rate * sweep[i], t->max_rate, t->goodput,
					  scraped);
		} else {
			add_point(s, id, k++, "search", INFINITY, t->max_rate, t->goodput, scraped);
			for (size_t i = 0; i < n_steps; i++)
				add_point(s, id, k++, "search", t->max_rate * steps[i], t->max_rate, t->goodput,
					  scraped);
		}
	}
	struct store_trial_outcome o = {
		.state = t->state,
		.failure = t->failure,
		.failure_message = t->message,
		.deploy_seconds = t->state == STORE_TRIAL_FAILED ? 3.5 : 20 + t->tp * 15,
		.max_rate = t->goodput > 0 ? t->max_rate : NAN,
		.max_goodput = t->goodput > 0 ? t->goodput : NAN,
		.concurrency = t->goodput > 0 ? t->max_rate * 3 : NAN,
		.cost_per_mtok = t->goodput > 0 && strcmp(t->kind, "sweep") != 0 ? fix_cost(t->tp, t->goodput) : NAN,
	};
	CHECK_MSG(store_trial_finish(s, id, &o, &err) >= 0, "%s", err.msg);
	/* one after the other, as a study of one GPU runs them: trial n from
	 * 2 min × (n − 1) for 100 s */
	CHECK_MSG(store_trial_set_times(s, id, FIX_T0_USEC + (n - 1) * 120000000ull,
					FIX_T0_USEC + (n - 1) * 120000000ull + 100000000ull, &err) >= 0,
		  "%s", err.msg);
	return id;
}

static void add_study_trials_at(struct store *s, const char *name, const struct fix_trial *t, size_t n, long best,
				bool scraped, const double *steps, size_t n_steps)
{
	struct error err = { 0 };
	int64_t study = add_study(s, name), best_id = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t id = add_trial(s, study, &t[i], (uint32_t)i + 1, scraped, steps, n_steps);

		if ((long)i == best)
			best_id = id;
	}
	if (best_id)
		CHECK(store_study_set_best(s, study, best_id, &err) >= 0);
	CHECK(store_study_set_state(s, study, STORE_STUDY_DONE, NULL, &err) >= 0);
}

static void add_study_trials(struct store *s, const char *name, const struct fix_trial *t, size_t n, long best,
			     bool scraped)
{
	add_study_trials_at(s, name, t, n, best, scraped, spread_steps, ELEMENTSOF(spread_steps));
}

void fix_fill(struct store *s)
{
	const struct fix_trial a[] = {
		{ "search", 8, 512, "none", 1, STORE_TRIAL_DONE, 0, NULL, 1.0, 60 },
		{ "search", 16, 1024, "none", 1, STORE_TRIAL_DONE, 0, NULL, 2.0, 120 },
		{ "search", 32, 1024, "fp8", 1, STORE_TRIAL_DONE, 0, NULL, FIX_A_BEST_RATE, FIX_A_BEST_GOODPUT },
		{ "search", 64, 2048, "fp8", 1, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_OOM,
		  "CUDA out of memory (trial 4)", 0, 0 },
		{ "search", 32, 2048, "none", 2, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET,
		  "not even 0.5 req/s met the SLA", 0, 0 },
		{ "search", 16, 512, "fp8", 2, STORE_TRIAL_FAILED, STORE_FAILURE_CRASHED, "server exited with status 1",
		  0, 0 },
		{ "search", 32, 2048, "fp8", 2, STORE_TRIAL_DONE, 0, NULL, 6.0, 380 },
		{ "confirm", 32, 1024, "fp8", 1, STORE_TRIAL_DONE, 0, NULL, 3.8, FIX_A_CONFIRM_GOODPUT },
		/* the answer's load-step sweep: load points, no cost */
		{ "sweep", 32, 1024, "fp8", 1, STORE_TRIAL_DONE, 0, NULL, FIX_A_BEST_RATE, FIX_A_BEST_GOODPUT },
	};
	const struct fix_trial b[] = {
		{ "search", 32, 1024, "fp8", 1, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET,
		  "TTFT over 2000 ms", 0, 0 },
		{ "search", 64, 2048, "fp8", 1, STORE_TRIAL_DONE, 0, NULL, 8.0, FIX_B_BEST_GOODPUT },
	};
	const struct fix_trial c[] = {
		{ "search", 8, 512, "none", 1, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET, "TTFT over 2000 ms",
		  0, 0 },
		{ "search", 64, 2048, "none", 1, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_OOM,
		  "No available memory for the cache blocks", 0, 0 },
		{ "search", 16, 512, "fp8", 2, STORE_TRIAL_FAILED, STORE_FAILURE_STARTUP_TIMEOUT,
		  "health never answered", 0, 0 },
	};
	const struct fix_trial d[] = {
		{ "search", 16, 1024, "fp8", 1, STORE_TRIAL_DONE, 0, NULL, 3.0, 200 },
	};

	add_study_trials(s, FIX_A, a, ELEMENTSOF(a), 2, true);
	add_study_trials(s, FIX_B, b, ELEMENTSOF(b), 1, false);
	add_study_trials(s, FIX_C, c, ELEMENTSOF(c), -1, false);
	add_study_trials(s, FIX_D, d, ELEMENTSOF(d), 0, false);
}

void fix_fill_two_sizes(struct store *s)
{
	const struct fix_trial e[] = {
		{ "search", 32, 1024, "fp8", 1, STORE_TRIAL_DONE, 0, NULL, 4.0, 380 },
		{ "search", 64, 2048, "fp8", 2, STORE_TRIAL_DONE, 0, NULL, 10.0, 1000 },
	};

	add_study_trials(s, FIX_E, e, ELEMENTSOF(e), 1, false);
}

void fix_fill_clustered(struct store *s)
{
	const struct fix_trial f[] = {
		{ "search", 32, 1024, "fp8", 1, STORE_TRIAL_DONE, 0, NULL, 36.0, 2280 },
	};

	add_study_trials_at(s, FIX_F, f, ELEMENTSOF(f), 0, true, clustered_steps, ELEMENTSOF(clustered_steps));
}
