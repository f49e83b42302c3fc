/* bench-landscape.c — the benchmark's spaces and their true cost landscapes.
 *
 * The synthetic model follows the roofline picture of the seed document: a
 * decode step reads the weights once and each sequence's KV cache; prefill
 * work rides along in chunks of max_num_batched_tokens; the batch the server
 * sustains is capped by max_num_seqs, by the KV capacity left after weights
 * and activations, by the chunk budget, and by the TPOT and TTFT bounds of
 * the SLA; memory for activations grows with the chunk and with the batch,
 * so large batch × chunk fails to start at bf16; the rate search's 3 %
 * steps turn the cost into plateaus.
 *
 * The sim landscapes (--sim) come from goodput-sim's engine model for a chat
 * workload per space (see specs[]): prompts of 512–1024 tokens, answers of
 * 128–256 tokens (uniform), Poisson arrivals, 200 requests per rate-search
 * run, the SLA per request with 90 % attainment. Computing one takes
 * ~20 s, so it is cached in a file named by a hash of everything it depends
 * on (model, GPU, space, workload, SLA, rate-search settings); the engine
 * model itself is checked on every load by recomputing a few
 * configurations, so a changed sim model recomputes the cache too. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench-landscape.h"
#include "json-util.h"
#include "macro.h"

struct spec {
	const char *name;
	const char *model; /* goodput-sim preset */
	const char *gpu;
	unsigned gpus;
	const char *search_space;
	/* synthetic model */
	double params_b, kv_mb_per_token, act_mb_per_token;
	double mem_gb, bw_tbs, tflops, fp8_speedup, usd_per_hour;
	double in_len, out_len, ttft_ms, tpot_ms;
	/* sim landscape */
	struct bench_workload sim;
};

static const struct spec specs[] = {
	{
		.name = "llama-3.1-70b on 4x H100",
		.model = "llama-3.1-70b",
		.gpu = "H100",
		.gpus = 4,
		.search_space = "{\"max_num_seqs\": {\"min\": 8, \"max\": 1024, \"scale\": \"log2\"},"
				"\"max_num_batched_tokens\": {\"min\": 512, \"max\": 32768, \"scale\": \"log2\"},"
				"\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1, 2, 4]}",
		.params_b = 70,
		.kv_mb_per_token = 0.3125,
		.act_mb_per_token = 0.6,
		.mem_gb = 80,
		.bw_tbs = 3.35,
		.tflops = 989,
		.fp8_speedup = 2,
		.usd_per_hour = 2.5,
		.in_len = 1024,
		.out_len = 256,
		.ttft_ms = 2000,
		.tpot_ms = 60,
		/* A 70B chat assistant: answers streamed faster than reading speed. */
		.sim = { .in_mean = 768,
			 .in_range = 1.0 / 3,
			 .out_mean = 192,
			 .out_range = 1.0 / 3,
			 .num_prompts = 200,
			 .sla = "ttft:2000,tpot:75",
			 .attainment = 0.9,
			 .rel_tol = 0.02,
			 .max_runs = 12 },
	},
	{
		.name = "llama-3.1-8b on 2x L40S",
		.model = "llama-3.1-8b",
		.gpu = "L40S",
		.gpus = 2,
		.search_space = "{\"max_num_seqs\": {\"min\": 4, \"max\": 512, \"scale\": \"log2\"},"
				"\"max_num_batched_tokens\": {\"min\": 256, \"max\": 16384, \"scale\": \"log2\"},"
				"\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1, 2]}",
		.params_b = 8,
		.kv_mb_per_token = 0.125,
		.act_mb_per_token = 0.25,
		.mem_gb = 48,
		.bw_tbs = 0.864,
		.tflops = 362,
		.fp8_speedup = 2,
		.usd_per_hour = 1.0,
		.in_len = 1024,
		.out_len = 256,
		.ttft_ms = 1500,
		.tpot_ms = 40,
		/* A small, snappy chat model: tighter latency bounds. */
		.sim = { .in_mean = 768,
			 .in_range = 1.0 / 3,
			 .out_mean = 192,
			 .out_range = 1.0 / 3,
			 .num_prompts = 200,
			 .sla = "ttft:1000,tpot:50",
			 .attainment = 0.9,
			 .rel_tol = 0.02,
			 .max_runs = 12 },
	},
};

size_t bench_n_spaces(void)
{
	return ELEMENTSOF(specs);
}

static void synthetic(const struct spec *sp, const struct opt_space *s, const struct opt_config *c,
		      struct bench_point *ret)
{
	double mns = 0, mbt = 0, tp = 1, wbytes, w_gpu, mem, act, free_gb, kv_gb, b_kv, b_chunk, cap;
	double t_w, t_kv, t_pf, ovh, ctx, tput, b;
	const char *q;
	char buf[32];
	int qi;

	(void)opt_config_number(s, c, "max_num_seqs", &mns);
	(void)opt_config_number(s, c, "max_num_batched_tokens", &mbt);
	(void)opt_config_number(s, c, "tensor_parallel", &tp);
	qi = opt_space_knob_index(s, "quantization");
	q = opt_config_text(s, c, (size_t)qi, buf, sizeof(buf));

	*ret = (struct bench_point){ .outcome = OPT_OUTCOME_INFEASIBLE };
	wbytes = sp->params_b * (strcmp(q, "none") == 0 ? 2 : strcmp(q, "fp8") == 0 ? 1 : 0.55);
	w_gpu = wbytes / tp;
	mem = sp->mem_gb * 0.9;
	act = (mbt * sp->act_mb_per_token + mns * 4) / 1000 / tp;
	free_gb = mem - w_gpu - act - 1.5;
	kv_gb = sp->kv_mb_per_token / 1000 / tp; /* per token per GPU */
	if (free_gb < 4096 * kv_gb || free_gb <= 0)
		return; /* weights + activations leave no room for one long sequence */

	ctx = sp->in_len + sp->out_len / 2;
	b_kv = floor(free_gb / kv_gb / ctx);
	b_chunk = floor(mbt / (1 + sp->in_len / sp->out_len));
	cap = MIN(mns, MIN(b_kv, MAX(1, b_chunk)));
	t_w = w_gpu / (sp->bw_tbs * 0.8) * (strcmp(q, "awq") == 0 ? 1.2 : 1);
	t_kv = ctx * kv_gb / (sp->bw_tbs * 0.8);
	t_pf = 2 * sp->params_b * 1e9 / (sp->tflops * 1e12 * 0.5 * tp * (strcmp(q, "fp8") == 0 ? sp->fp8_speedup : 1)) *
	       1000;
	ovh = tp > 1 ? 0.5 + 0.3 * tp : 0;
	for (b = cap; b >= 1; b--) {
		double step = t_w + b * t_kv + b * (sp->in_len / sp->out_len) * t_pf + ovh;
		double tpot = step + 0.1 * mbt * t_pf;
		double ttft = ceil(sp->in_len / mbt) * step * 1.5 + step;

		if (tpot <= sp->tpot_ms && ttft <= sp->ttft_ms) {
			tput = b * 1000 / step * 0.9;
			tput = pow(1.015, floor(log(tput) / log(1.015))); /* the rate search's steps */
			ret->outcome = OPT_OUTCOME_MEASURED;
			ret->cost = sp->usd_per_hour * tp / (tput * 3600) * 1e6;
			return;
		}
	}
	ret->outcome = OPT_OUTCOME_SLA_NEVER_MET;
}

void bench_space_free(struct bench_space *bs)
{
	if (!bs)
		return;
	opt_space_free(bs->space);
	free(bs->configs);
	free(bs->truth);
	free(bs->index_of);
	free(bs);
}

size_t bench_space_index(const struct bench_space *bs, const struct opt_config *c)
{
	return (size_t)bs->index_of[opt_config_ordinal(bs->space, c)];
}

/* ---- the sim landscape cache ---- */

#define CACHE_MAGIC  "goodput bench-optimizer landscape v1"
#define CACHE_CHECKS 3

static void describe(const struct spec *sp, char *buf, size_t size)
{
	const struct bench_workload *w = &sp->sim;

	snprintf(buf, size, "%s|%s|%u|%s|in %.17g±%.17g|out %.17g±%.17g|n %u|%s|att %.17g|tol %.17g|runs %u", sp->model,
		 sp->gpu, sp->gpus, sp->search_space, w->in_mean, w->in_range, w->out_mean, w->out_range,
		 w->num_prompts, w->sla, w->attainment, w->rel_tol, w->max_runs);
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * UINT64_C(0x100000001b3);
	return h;
}

/* Configurations recomputed on every load to detect a changed engine model:
 * the optimum and two others spread over the grid. */
static size_t check_index(const struct bench_space *bs, size_t j)
{
	return j == 0 ? bs->optimum_index : j * bs->n / CACHE_CHECKS;
}

static bool same_point(const struct bench_point *a, const struct bench_point *b)
{
	return a->outcome == b->outcome && (a->outcome != OPT_OUTCOME_MEASURED || a->cost == b->cost);
}

/* 1 when the file held the landscape (truth filled), 0 when it is absent,
 * stale or unreadable (the caller recomputes). */
static int cache_load(const char *path, const char *key, struct bench_space *bs)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "re");
	char line[4096];
	size_t k = 0;

	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f) || strcmp(line, CACHE_MAGIC "\n") != 0)
		return 0;
	if (!fgets(line, sizeof(line), f) || strncmp(line, "key ", 4) != 0 || strlen(line) < 5 ||
	    strncmp(line + 4, key, strlen(line) - 5) != 0 || strlen(line) - 5 != strlen(key))
		return 0;
	while (k < bs->n && fgets(line, sizeof(line), f)) {
		char name[32];
		uint64_t o;
		double cost;
		enum opt_outcome out;

		if (sscanf(line, "%" SCNu64 " %31s %la", &o, name, &cost) != 3 ||
		    o != opt_config_ordinal(bs->space, &bs->configs[k]) || opt_outcome_from_string(name, &out) < 0 ||
		    (out == OPT_OUTCOME_MEASURED && !(cost > 0 && isfinite(cost))))
			return 0;
		bs->truth[k++] = (struct bench_point){ .outcome = out, .cost = cost };
	}
	return k == bs->n;
}

static void cache_store(const char *path, const char *key, const struct bench_space *bs)
{
	char tmp[4200];
	FILE *f;
	bool ok;

	if (snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof(tmp))
		return;
	f = fopen(tmp, "we");
	if (!f)
		return; /* a cache is an optimisation: carry on without */
	fprintf(f, "%s\nkey %s\n", CACHE_MAGIC, key);
	for (size_t k = 0; k < bs->n; k++)
		fprintf(f, "%" PRIu64 " %s %a\n", opt_config_ordinal(bs->space, &bs->configs[k]),
			opt_outcome_to_string(bs->truth[k].outcome), bs->truth[k].cost);
	ok = fflush(f) == 0 && !ferror(f);
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) < 0)
		(void)unlink(tmp);
}

static int sim_landscape(const struct spec *sp, const char *cache_dir, struct bench_space *bs, struct error *err)
{
	char key[2048], path[4096];
	int r;

	describe(sp, key, sizeof(key));
	if (cache_dir) {
		if (snprintf(path, sizeof(path), "%s/bench-optimizer-%016" PRIx64 ".landscape", cache_dir,
			     fnv1a(key)) >= (int)sizeof(path))
			return error_set(err, -ENAMETOOLONG, "--cache-dir: path too long");
		if (cache_load(path, key, bs) > 0) {
			bool ok = true;

			for (size_t k = 0; k < bs->n; k++)
				if (bs->truth[k].outcome == OPT_OUTCOME_MEASURED &&
				    (bs->optimum_index == SIZE_MAX ||
				     bs->truth[k].cost < bs->truth[bs->optimum_index].cost))
					bs->optimum_index = k;
			for (size_t j = 0; j < CACHE_CHECKS && ok && bs->optimum_index != SIZE_MAX; j++) {
				size_t k = check_index(bs, j);
				struct bench_point p;

				r = bench_sim_eval(sp->model, sp->gpu, sp->gpus, &sp->sim, bs->space, &bs->configs[k],
						   &p, err);
				if (r < 0)
					return r;
				ok = same_point(&p, &bs->truth[k]);
			}
			if (ok && bs->optimum_index != SIZE_MAX) {
				bs->from_cache = true;
				return 0;
			}
		}
	}
	for (size_t k = 0; k < bs->n; k++) {
		r = bench_sim_eval(sp->model, sp->gpu, sp->gpus, &sp->sim, bs->space, &bs->configs[k], &bs->truth[k],
				   err);
		if (r < 0)
			return r;
	}
	if (cache_dir)
		cache_store(path, key, bs);
	return 0;
}

int bench_space_new(size_t i, bool sim, const char *cache_dir, struct bench_space **ret, struct error *err)
{
	const struct spec *sp = &specs[i];
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct opt_space_options o = { .gpus = sp->gpus };
	struct bench_space *bs;
	int r;

	bs = calloc(1, sizeof(*bs));
	if (!bs)
		return -ENOMEM;
	snprintf(bs->name, sizeof(bs->name), "%s%s", sp->name, sim ? " (goodput-sim)" : " (synthetic)");
	r = json_parse_strict(sp->name, sp->search_space, strlen(sp->search_space), &j, err);
	if (r >= 0)
		r = opt_space_from_json(j, "search_space", NULL, NULL, &o, &bs->space, err);
	if (r >= 0)
		r = opt_space_enumerate(bs->space, &bs->configs, &bs->n);
	if (r < 0)
		goto fail;
	bs->truth = calloc(bs->n, sizeof(*bs->truth));
	bs->index_of = malloc(bs->space->n_grid * sizeof(int32_t));
	if (!bs->truth || !bs->index_of) {
		r = -ENOMEM;
		goto fail;
	}
	memset(bs->index_of, 0xff, bs->space->n_grid * sizeof(int32_t));
	bs->optimum = INFINITY;
	bs->optimum_index = SIZE_MAX;
	if (sim) {
		const struct bench_workload *w = &sp->sim;

		snprintf(bs->workload, sizeof(bs->workload),
			 "chat: %.0f–%.0f tokens in, %.0f–%.0f out, %u requests, SLA %s @ %.0f %%",
			 w->in_mean * (1 - w->in_range), w->in_mean * (1 + w->in_range),
			 w->out_mean * (1 - w->out_range), w->out_mean * (1 + w->out_range), w->num_prompts, w->sla,
			 w->attainment * 100);
		r = sim_landscape(sp, cache_dir, bs, err);
		if (r < 0)
			goto fail;
	}
	for (size_t k = 0; k < bs->n; k++) {
		bs->index_of[opt_config_ordinal(bs->space, &bs->configs[k])] = (int32_t)k;
		if (!sim)
			synthetic(sp, bs->space, &bs->configs[k], &bs->truth[k]);
		if (bs->truth[k].outcome == OPT_OUTCOME_MEASURED) {
			bs->n_feasible++;
			if (bs->truth[k].cost < bs->optimum || bs->optimum_index == SIZE_MAX) {
				bs->optimum = bs->truth[k].cost;
				bs->optimum_index = k;
			}
		}
	}
	if (bs->n_feasible == 0) {
		r = error_set(err, -EINVAL, "%s: no feasible configuration", sp->name);
		goto fail;
	}
	*ret = bs;
	return 0;
fail:
	bench_space_free(bs);
	return r;
}
