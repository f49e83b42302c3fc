/* bench-landscape.c — the benchmark's spaces and their true cost landscapes.
 *
 * The synthetic model follows the roofline picture of the seed document: a
 * decode step reads the weights once and each sequence's KV cache; prefill
 * work rides along in chunks of max_num_batched_tokens; the batch the server
 * sustains is capped by max_num_seqs, by the KV capacity left after weights
 * and activations, by the chunk budget, and by the TPOT and TTFT bounds of
 * the SLA; memory for activations grows with the chunk and with the batch,
 * so large batch × chunk fails to start at bf16; the rate search's 3 %
 * steps turn the cost into plateaus. It is fast: the smoke test uses it.
 *
 * The study landscapes (--sim) are study specs — bench/optimizer/landscapes/
 * and the 70B example configs/studies/sim-demo.json — each configuration
 * evaluated as `goodput tune --dry-run` evaluates it (bench-sim.c). Computing
 * one takes seconds to a minute, so it is cached in a file named by a hash
 * of the spec; the engine model itself is checked on every load by
 * recomputing a few configurations, so a changed sim model recomputes the
 * cache too. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench-landscape.h"
#include "engine-profile.h"
#include "file-util.h"
#include "json-util.h"
#include "bench-twin-gpu.h"
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
	},
};

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

/* The study landscapes: a spec, and the top of max_num_seqs the truth
 * covers when it is above the spec's (the optimum lies beyond the range). */
static const struct {
	const char *name, *path;
	int64_t truth_max_seqs;
	/* the engine: instance of bench_twin_perturb (0: as published), a
	 * profile JSON the sim reads (NULL: none), an unmodelled cost per
	 * scheduled sequence growing with the batch (µs) */
	unsigned perturb;
	const char *profile;
	double fault_seq;
} studies[] = {
	{ "llama-3.1-8b, 2x H100, TTFT 500 / TPOT 50 ms", "bench/optimizer/landscapes/8b-h100x2-ttft500-tpot50.json",
	  0 },
	{ "llama-3.1-8b, 2x H100, TTFT 300 / TPOT 15 ms", "bench/optimizer/landscapes/8b-h100x2-ttft300-tpot15.json",
	  0 },
	{ "llama-3.1-70b, 4x L40S (the example study)", "configs/studies/sim-demo.json", 0 },
	{ "llama-3.1-70b, 8x H100, TP 2/4/8", "bench/optimizer/landscapes/70b-h100x8.json", 0 },
	{ "llama-3.1-8b, 1x L40S, optimum above the batch range", "bench/optimizer/landscapes/8b-l40s-edge.json",
	  1024 },
	{ "llama-3.1-8b, 2x H100, TTFT 300 / TPOT 15 ms, kv_cache_dtype tied to fp8",
	  "bench/optimizer/landscapes/8b-h100x2-tight-kvfp8.json", 0 },
	/* goodput-sim with its constants perturbed by up to ±30 % (bench/twin's instances) */
	{ "8B TTFT 300 / TPOT 15 ms, constants perturbed (instance 1)",
	  "bench/optimizer/landscapes/8b-h100x2-ttft300-tpot15.json", 0, 1 },
	{ "8B TTFT 300 / TPOT 15 ms, constants perturbed (instance 2)",
	  "bench/optimizer/landscapes/8b-h100x2-ttft300-tpot15.json", 0, 2 },
	{ "8B TTFT 500 / TPOT 50 ms, constants perturbed (instance 3)",
	  "bench/optimizer/landscapes/8b-h100x2-ttft500-tpot50.json", 0, 3 },
	{ "70B 8x H100, constants perturbed (instance 4)", "bench/optimizer/landscapes/70b-h100x8.json", 0, 4 },
	/* engines the model cannot express */
	{ "8B TTFT 500 / TPOT 50 ms, an unmodelled step cost (batch squared)",
	  "bench/optimizer/landscapes/8b-h100x2-ttft500-tpot50.json", 0, 0, NULL, 40 },
	{ "8B TTFT 300 / TPOT 15 ms, goodput-sim --profile-file with other scaling laws",
	  "bench/optimizer/landscapes/8b-h100x2-ttft300-tpot15.json", 0, 0,
	  "{\"awq_q_eff_tokens\": 8, \"awq_q_eff\": 0.5, \"engine_efficiency\": 0.8, \"act_base_gib\": 6, "
	  "\"c_seq_us\": 60, \"busbw_frac\": 0.35}" },
};

size_t bench_n_spaces(bool sim)
{
	return sim ? ELEMENTSOF(studies) : ELEMENTSOF(specs);
}

void bench_space_free(struct bench_space *bs)
{
	if (!bs)
		return;
	if (!bs->truth_study)
		opt_space_free(bs->space); /* else the truth study's */
	study_free(bs->study);
	study_free(bs->truth_study);
	cJSON_Delete(bs->start_space_json);
	twin_free(bs->twin);
	if (bs->profile_file[0]) {
		char *slash;

		(void)unlink(bs->profile_file);
		slash = strrchr(bs->profile_file, '/');
		if (slash) {
			*slash = 0;
			(void)rmdir(bs->profile_file);
		}
	}
	engine_profile_free(bs->profile);
	free(bs->configs);
	free(bs->truth);
	free(bs->index_of);
	free(bs);
}

const struct opt_space *bench_space_start(const struct bench_space *bs)
{
	return bs->study ? bs->study->space : bs->space;
}

ssize_t bench_space_lookup(const struct bench_space *bs, const struct opt_space *space, const struct opt_config *c)
{
	struct opt_config t;
	char key[OPT_KEY_MAX];

	if (space == bs->space)
		return bs->index_of[opt_config_ordinal(bs->space, c)];
	if (opt_config_key(space, c, key, sizeof(key)) < 0 || opt_config_from_key(bs->space, key, &t, NULL) < 0)
		return -1;
	return bs->index_of[opt_config_ordinal(bs->space, &t)];
}

/* ---- the study landscape cache ---- */

#define CACHE_MAGIC  "goodput bench-optimizer landscape v4"
#define CACHE_CHECKS 3

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
static int cache_load(const char *path, uint64_t key, struct bench_space *bs)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "re");
	char line[4096];
	size_t k = 0;
	uint64_t stored;

	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f) || strcmp(line, CACHE_MAGIC "\n") != 0)
		return 0;
	if (!fgets(line, sizeof(line), f) || sscanf(line, "key %" SCNx64, &stored) != 1 || stored != key)
		return 0;
	while (k < bs->n && fgets(line, sizeof(line), f)) {
		char name[32];
		uint64_t o;
		double cost, ratio, peak;
		enum opt_outcome out;

		struct bench_point *bp = &bs->truth[k];
		int used = 0, more;
		size_t np;
		double rate;

		if (sscanf(line, "%" SCNu64 " %31s %la %la %la %la %zu%n", &o, name, &cost, &ratio, &peak, &rate, &np,
			   &used) != 7 ||
		    o != opt_config_ordinal(bs->space, &bs->configs[k]) || opt_outcome_from_string(name, &out) < 0 ||
		    (out == OPT_OUTCOME_MEASURED && !(cost > 0 && isfinite(cost))) || np > ELEMENTSOF(bp->points))
			return 0;
		*bp = (struct bench_point){ .outcome = out,
					    .cost = cost,
					    .sla_ratio = ratio,
					    .peak_in_flight = peak,
					    .max_rate = rate,
					    .n_points = np };
		for (size_t p = 0; p < np; p++) {
			struct twin_point *pt = &bp->points[p];
			const char *at = line + used;

			if (sscanf(at, " %la %u%n", &pt->rate, &pt->num_prompts, &more) != 2)
				return 0;
			used += more;
			for (size_t fi = 0; fi < _TWIN_FIG_MAX; fi++) {
				if (sscanf(line + used, " %la%n", &pt->fig[fi], &more) != 1)
					return 0;
				used += more;
			}
		}
		k++;
	}
	return k == bs->n;
}

static void cache_store(const char *path, uint64_t key, const struct bench_space *bs)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	bool ok;

	if (!f)
		return; /* a cache is an optimisation: carry on without */
	fprintf(f, "%s\nkey %016" PRIx64 "\n", CACHE_MAGIC, key);
	for (size_t k = 0; k < bs->n; k++) {
		const struct bench_point *bp = &bs->truth[k];

		fprintf(f, "%" PRIu64 " %s %a %a %a %a %zu", opt_config_ordinal(bs->space, &bs->configs[k]),
			opt_outcome_to_string(bp->outcome), bp->cost, bp->sla_ratio, bp->peak_in_flight, bp->max_rate,
			bp->n_points);
		for (size_t p = 0; p < bp->n_points; p++) {
			fprintf(f, " %a %u", bp->points[p].rate, bp->points[p].num_prompts);
			for (size_t fi = 0; fi < _TWIN_FIG_MAX; fi++)
				fprintf(f, " %a", bp->points[p].fig[fi]);
		}
		fputc('\n', f);
	}
	ok = fflush(f) == 0 && !ferror(f);
	ok = fclose(f) == 0 && ok;
	if (ok)
		(void)file_write_atomic(path, buf, len, 0666, FILE_WRITE_UMASK);
}

static void find_optimum(struct bench_space *bs)
{
	bs->optimum_index = SIZE_MAX;
	for (size_t k = 0; k < bs->n; k++)
		if (bs->truth[k].outcome == OPT_OUTCOME_MEASURED &&
		    (bs->optimum_index == SIZE_MAX || bs->truth[k].cost < bs->truth[bs->optimum_index].cost))
			bs->optimum_index = k;
}

static int study_truth(struct bench_space *bs, const char *cache_dir, struct error *err)
{
	_cleanup_(freep) char *spec = study_to_string(bs->truth_study);
	char path[4096];
	uint64_t key;
	int r;

	if (!spec)
		return -ENOMEM;
	key = fnv1a(spec) ^ fnv1a(bs->engine_label) * 31;
	if (cache_dir) {
		if (snprintf(path, sizeof(path), "%s/bench-optimizer-%016" PRIx64 ".landscape", cache_dir, key) >=
		    (int)sizeof(path))
			return error_set(err, -ENAMETOOLONG, "--cache-dir: path too long");
		if (cache_load(path, key, bs) > 0) {
			bool ok = true;

			find_optimum(bs);
			for (size_t j = 0; j < CACHE_CHECKS && ok && bs->optimum_index != SIZE_MAX; j++) {
				size_t k = check_index(bs, j);
				struct bench_point p;

				r = bench_sim_eval(bs->truth_study, &bs->engine, &bs->configs[k], &p, err);
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
		r = bench_sim_eval(bs->truth_study, &bs->engine, &bs->configs[k], &bs->truth[k], err);
		if (r < 0)
			return r;
	}
	if (cache_dir)
		cache_store(path, key, bs);
	return 0;
}

/* The engine of landscape i: a profile file with perturbed or changed
 * constants (written next to the cache, or in /tmp), an unmodelled cost. */
static int setup_engine(struct bench_space *bs, size_t i, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	struct sim_profile p;
	char dir[] = "/tmp/bench-optimizer-XXXXXX";
	int r;

	bs->engine.fault_step_per_seq_usec = studies[i].fault_seq;
	snprintf(bs->engine_label, sizeof(bs->engine_label), "perturb %u fault %g profile %s", studies[i].perturb,
		 studies[i].fault_seq, studies[i].profile ? studies[i].profile : "-");
	if (studies[i].perturb == 0 && !studies[i].profile)
		return 0;
	r = sim_profile_preset("vllm", &p, err);
	if (r < 0)
		return r;
	if (studies[i].perturb)
		bench_twin_perturb(&p, studies[i].perturb);
	if (studies[i].profile) {
		_cleanup_(cJSON_Deletep) cJSON *o = cJSON_Parse(studies[i].profile);

		r = o ? sim_profile_apply_json(&p, o, "landscape profile", err) : -EINVAL;
		if (r < 0)
			return r;
	}
	r = sim_profile_to_json(&p, &j);
	if (r < 0 || !(text = cJSON_PrintUnformatted(j)))
		return -ENOMEM;
	if (!mkdtemp(dir))
		return error_set(err, -errno, "mkdtemp: %s", strerror(errno));
	snprintf(bs->profile_file, sizeof(bs->profile_file), "%s/profile.json", dir);
	r = file_write_atomic(bs->profile_file, text, strlen(text), 0644, 0);
	if (r < 0)
		return error_set(err, r, "%s: %s", bs->profile_file, strerror(-r));
	bs->engine.profile_file = bs->profile_file;
	return 0;
}

/* The spec, its copy with the truth's wider range, and the pre-flight. */
static int load_studies(struct bench_space *bs, size_t i, const char *source_root, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct study_options so = { 0 };
	char path[4096], engines[4096];
	cJSON *ss;
	int r;

	snprintf(path, sizeof(path), "%s/%s", source_root, studies[i].path);
	snprintf(engines, sizeof(engines), "%s/configs/engines", source_root);
	r = json_parse_file(path, STUDY_SPEC_MAX_BYTES, &j, err);
	if (r >= 0)
		r = engine_profile_find("sim", engines, &bs->profile, err);
	if (r < 0)
		return r;
	so.extra_knobs = bs->profile->extra_knobs;
	r = study_from_json(j, &so, &bs->study, err);
	if (r < 0)
		return error_prefix(err, r, "%s", path);
	bs->start_space_json = cJSON_Duplicate(bs->study->search_space, true);
	if (!bs->start_space_json)
		return -ENOMEM;
	ss = cJSON_GetObjectItemCaseSensitive(j, "search_space");
	if (studies[i].truth_max_seqs > 0) {
		const struct opt_knob *k =
			&bs->study->space->knobs[opt_space_knob_index(bs->study->space, OPT_KNOB_MAX_NUM_SEQS)];

		r = opt_space_set_range_json(ss, OPT_KNOB_MAX_NUM_SEQS, k->min, studies[i].truth_max_seqs);
		if (r < 0)
			return error_set(err, r, "%s: max_num_seqs is not a range", path);
		bs->truth_max_seqs = studies[i].truth_max_seqs;
	}
	r = study_from_json(j, &so, &bs->truth_study, err);
	if (r >= 0)
		r = runner_preflight_init(&bs->preflight, bs->truth_study, err);
	if (r < 0)
		return error_prefix(err, r, "%s", path);
	bs->space = bs->truth_study->space;
	r = setup_engine(bs, i, err);
	if (r < 0)
		return r;
	snprintf(bs->name, sizeof(bs->name), "%s", studies[i].name);
	snprintf(bs->label, sizeof(bs->label), "%s (%s)", bs->study->label ? bs->study->label : "", studies[i].path);
	return 0;
}

int bench_space_new(size_t i, bool sim, const char *source_root, const char *cache_dir, struct bench_space **ret,
		    struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct bench_space *bs;
	int r;

	bs = calloc(1, sizeof(*bs));
	if (!bs)
		return -ENOMEM;
	if (sim)
		r = load_studies(bs, i, source_root, err);
	else {
		const struct spec *sp = &specs[i];
		struct opt_space_options o = { .gpus = sp->gpus };

		snprintf(bs->name, sizeof(bs->name), "%s (synthetic)", sp->name);
		r = json_parse_strict(sp->name, sp->search_space, strlen(sp->search_space), &j, err);
		if (r >= 0)
			r = opt_space_from_json(j, "search_space", NULL, NULL, &o, &bs->space, err);
	}
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
	for (size_t k = 0; k < bs->n; k++)
		bs->index_of[opt_config_ordinal(bs->space, &bs->configs[k])] = (int32_t)k;
	if (sim)
		r = study_truth(bs, cache_dir, err);
	else
		for (size_t k = 0; k < bs->n; k++)
			synthetic(&specs[i], bs->space, &bs->configs[k], &bs->truth[k]);
	if (r < 0)
		goto fail;
	find_optimum(bs);
	for (size_t k = 0; k < bs->n; k++)
		bs->n_feasible += bs->truth[k].outcome == OPT_OUTCOME_MEASURED;
	if (bs->optimum_index == SIZE_MAX) {
		r = error_set(err, -EINVAL, "%s: no feasible configuration", bs->name);
		goto fail;
	}
	bs->optimum = bs->truth[bs->optimum_index].cost;
	*ret = bs;
	return 0;
fail:
	bench_space_free(bs);
	return r;
}
