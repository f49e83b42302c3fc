/* runner-preflight.c — the memory pre-flight (runner-preflight.h): the
 * study's model and GPU facts read once, then per configuration the sim
 * core's memory model (sim_perf_memory, the same code goodput-sim's start-up
 * check runs) against the budget, with a margin for what a real engine adds.
 *
 * The verdict and the cause follow the order in which an engine meets the
 * problems as it starts: weights larger than the GPU fail while loading;
 * weights and the activation peak that leave nothing of the budget fail
 * allocating cache blocks; a KV cache too small for one max_model_len
 * sequence fails last, with the longest length that would fit. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cost.h"
#include "engine-profile.h"
#include "engine.h"
#include "macro.h"
#include "runner-preflight.h"

#define DEFAULT_GPU_MEMORY_UTILIZATION 0.9

/* config.json of model.name when it is a local folder. */
static bool local_config(const char *name, char *buf, size_t size)
{
	struct stat st;

	if (!name || snprintf(buf, size, "%s/config.json", name) >= (int)size)
		return false;
	return stat(buf, &st) == 0 && S_ISREG(st.st_mode);
}

static int read_model(struct runner_preflight *p, const struct study *s, struct error *err)
{
	struct error ignored = { 0 };
	char path[1024];
	int r;

	if (s->model.architecture) {
		r = sim_model_from_hf_json(s->model.architecture, "model.architecture", &p->model, err);
		if (r < 0)
			return r;
		snprintf(p->source, sizeof(p->source), "model.architecture");
		return 1;
	}
	if (sim_model_preset(s->model.name, &p->model, &ignored) >= 0) {
		snprintf(p->source, sizeof(p->source), "the preset %s", p->model.name);
		return 1;
	}
	if (local_config(s->model.name, path, sizeof(path))) {
		r = sim_model_from_hf_config(path, &p->model, err);
		if (r < 0)
			return r;
		snprintf(p->source, sizeof(p->source), "%.150s", path);
		return 1;
	}
	snprintf(p->why_not, sizeof(p->why_not),
		 "no model facts: model.name is not a preset or a folder with config.json, and model.architecture "
		 "is not given");
	return 0;
}

int runner_preflight_init(struct runner_preflight *p, const struct study *s, struct error *err)
{
	const struct sim_gpu *g;
	int r;

	*p = (struct runner_preflight){ .study = s };
	p->hook = (struct opt_preflight){ .fit = runner_preflight_fit, .userdata = p };
	r = sim_profile_preset("vllm", &p->profile, err);
	if (r < 0)
		return r;
	r = read_model(p, s, err);
	if (r <= 0)
		return r;
	g = sim_gpu_find(s->gpu.type);
	if (g)
		p->gpu = *g;
	else if (s->gpu.memory_gib > 0)
		snprintf(p->gpu.name, sizeof(p->gpu.name), "%.15s", s->gpu.type);
	else {
		snprintf(p->why_not, sizeof(p->why_not),
			 "no GPU memory: gpu.type %s is not a preset and gpu.memory_gib is not given", s->gpu.type);
		return 0;
	}
	if (s->gpu.memory_gib > 0)
		p->gpu.mem_bytes = s->gpu.memory_gib * SIM_GIB;
	p->usable = true;
	return 0;
}

static double knob_number(const struct opt_space *space, const struct opt_config *c, const char *name, double def)
{
	double v;

	return opt_config_number(space, c, name, &v) == 0 ? v : def;
}

static const char *knob_text(const struct opt_space *space, const struct opt_config *c, const char *name,
			     const char *def)
{
	char buf[64];
	int k = opt_space_knob_index(space, name);

	return k < 0 ? def : opt_config_text(space, c, (size_t)k, buf, sizeof(buf));
}

/* The knob values an estimate reads (the engine's defaults where not given). */
struct knob_values {
	const char *quantization, *kv_cache_dtype;
	unsigned tp, dp, pp;
	const char *spec_method; /* "none" */
	unsigned spec_tokens;
	double max_num_seqs, max_num_batched_tokens, gpu_memory_utilization, max_model_len;
};

static void defaults(const struct runner_preflight *p, struct knob_values *v)
{
	uint32_t def_mbt, def_seqs;

	sim_perf_default_batch(&p->gpu, &def_mbt, &def_seqs);
	*v = (struct knob_values){
		.quantization = "none",
		.kv_cache_dtype = "auto",
		.tp = 1,
		.dp = 1,
		.pp = 1,
		.spec_method = "none",
		.spec_tokens = 1,
		.max_num_seqs = def_seqs,
		.max_num_batched_tokens = def_mbt,
		.gpu_memory_utilization = DEFAULT_GPU_MEMORY_UTILIZATION,
		.max_model_len = p->model.max_position,
	};
}

/* A drafter's weights and KV on the GPUs (speculation's pre-flight): a draft
 * model the sim knows by name, or the EAGLE/MTP head of the model. An
 * unknown draft model is left out of the estimate (drafter_known false). */
static int add_draft(const struct runner_preflight *p, const struct knob_values *v, struct sim_perf *perf,
		     struct runner_estimate *e)
{
	enum sim_spec_method m = SIM_SPEC_NONE;
	struct sim_model draft, *dm = NULL;
	struct error err = { 0 };
	struct sim_spec spec;
	const char *name;

	(void)sim_spec_method_from_string(v->spec_method, &m);
	e->drafter_known = true;
	if (m == SIM_SPEC_NONE || m == SIM_SPEC_NGRAM)
		return 0;
	if (m == SIM_SPEC_DRAFT_MODEL) {
		name = p->study ? study_draft_model(p->study, "draft_model") : NULL;
		if (!name || sim_model_preset(name, &draft, &err) < 0) {
			e->drafter_known = false;
			return 0;
		}
		dm = &draft;
	}
	/* a draft TP vLLM refuses, another vocabulary: the engine's refusal */
	return sim_spec_init(&spec, perf, m, MAX(v->spec_tokens, 1u), dm, 1, &err);
}

static void estimate_values(const struct runner_preflight *p, const struct knob_values *v, struct runner_estimate *ret)
{
	struct runner_estimate e = { .fit = OPT_FIT_UNKNOWN, .cause = OPT_OOM_UNKNOWN };
	enum sim_quant q = SIM_QUANT_NONE;
	enum sim_kv_dtype kv = SIM_KV_AUTO;
	struct error err = { 0 };
	struct sim_memory_policy policy;
	struct sim_startup_check check;
	struct sim_memory mem;
	struct sim_perf perf;
	uint32_t mbt = (uint32_t)v->max_num_batched_tokens, seqs = (uint32_t)v->max_num_seqs;
	double block_bytes;

	e.quantization = v->quantization;
	e.tp = v->tp;
	e.dp = v->dp;
	e.pp = v->pp;
	e.gpus = v->dp * v->tp * v->pp;
	e.spec_method = v->spec_method;
	if (p->study && e.gpus > p->study->gpu.per_node) {
		/* every replica and stage needs GPUs of its own, on one node */
		e.fit = OPT_FIT_NO;
		e.refused = true;
		e.too_many_gpus = true;
		*ret = e;
		return;
	}
	if (!p->usable) {
		*ret = e;
		return;
	}
	e.max_model_len = (uint32_t)v->max_model_len;
	(void)sim_quant_from_string(e.quantization, &q);
	(void)sim_kv_dtype_from_string(v->kv_cache_dtype, &kv);
	e.memory_gib = p->gpu.mem_bytes / SIM_GIB;
	e.budget_gib = e.memory_gib * v->gpu_memory_utilization;
	policy = (struct sim_memory_policy){ .rules = SIM_MEMORY_VLLM, .fraction = v->gpu_memory_utilization };
	if (sim_perf_init(&perf, &p->model, &p->gpu, q, kv, e.tp, &p->profile, &err) < 0 ||
	    sim_perf_set_pipeline(&perf, e.pp, &err) < 0 || add_draft(p, v, &perf, &e) < 0 ||
	    (sim_perf_check_startup(&perf, &policy, e.tp * e.pp, e.max_model_len, seqs, mbt, &check, &err) < 0 &&
	     check.cause == SIM_STARTUP_CONFIG)) {
		/* the engine refuses the combination outright (TP and heads, the context) */
		e.fit = OPT_FIT_NO;
		e.refused = true;
		*ret = e;
		return;
	}
	sim_perf_memory(&perf, &policy, mbt, seqs, SIM_BLOCK_SIZE, &mem);
	block_bytes = SIM_BLOCK_SIZE * mem.kv_bytes_token_gpu;
	e.weights_gib = mem.weights / SIM_GIB;
	e.draft_gib = perf.draft_weights_gpu / SIM_GIB;
	e.activations_gib = mem.act_peak / SIM_GIB;
	e.kv_gib = ceil((double)e.max_model_len / SIM_BLOCK_SIZE) * block_bytes / SIM_GIB;
	e.need_gib = e.weights_gib + e.activations_gib + e.kv_gib;
	e.kv_tokens = mem.kv_tokens;
	/* the cause the engine's start-up check gives (the sim core's, which
	 * the sim's dialects word as each engine does) */
	switch (check.cause) {
	case SIM_STARTUP_WEIGHTS:
		e.cause = OPT_OOM_WEIGHTS;
		break;
	case SIM_STARTUP_CACHE_BLOCKS:
		e.cause = OPT_OOM_CACHE_BLOCKS;
		break;
	default:
		e.cause = mem.weights > p->gpu.mem_bytes             ? OPT_OOM_WEIGHTS
			  : mem.kv_avail <= 0 || mem.num_blocks == 0 ? OPT_OOM_CACHE_BLOCKS
								     : OPT_OOM_KV_CACHE;
		break;
	}
	if (e.need_gib <= e.budget_gib && mem.num_blocks > 0 && mem.kv_tokens >= e.max_model_len)
		e.fit = OPT_FIT_YES;
	else
		e.fit = e.need_gib > e.budget_gib * (1 + RUNNER_PREFLIGHT_MARGIN) ? OPT_FIT_NO : OPT_FIT_NEAR;
	*ret = e;
}

void runner_preflight_estimate(const struct runner_preflight *p, const struct opt_space *space,
			       const struct opt_config *c, struct runner_estimate *ret)
{
	struct knob_values v;

	if (opt_space_knob_index(space, OPT_KNOB_SHAPE) >= 0) {
		/* each shape's servers: estimated from the configuration's own values */
		_cleanup_(cJSON_Deletep) cJSON *knobs = NULL;

		if (opt_config_to_json(space, c, &knobs) < 0) {
			*ret = (struct runner_estimate){ .fit = OPT_FIT_UNKNOWN, .cause = OPT_OOM_UNKNOWN };
			return;
		}
		runner_preflight_estimate_knobs(p, knobs, ret);
		return;
	}
	defaults(p, &v);
	v.quantization = knob_text(space, c, OPT_KNOB_QUANTIZATION, v.quantization);
	v.kv_cache_dtype = knob_text(space, c, OPT_KNOB_KV_CACHE_DTYPE, v.kv_cache_dtype);
	v.tp = (unsigned)knob_number(space, c, OPT_KNOB_TENSOR_PARALLEL, v.tp);
	v.dp = (unsigned)knob_number(space, c, OPT_KNOB_DATA_PARALLEL, v.dp);
	v.pp = (unsigned)knob_number(space, c, OPT_KNOB_PIPELINE_PARALLEL, v.pp);
	v.spec_method = knob_text(space, c, OPT_KNOB_SPEC_METHOD, v.spec_method);
	v.spec_tokens = (unsigned)knob_number(space, c, OPT_KNOB_SPEC_TOKENS, v.spec_tokens);
	v.max_num_seqs = knob_number(space, c, OPT_KNOB_MAX_NUM_SEQS, v.max_num_seqs);
	v.max_num_batched_tokens = knob_number(space, c, OPT_KNOB_MAX_NUM_BATCHED_TOKENS, v.max_num_batched_tokens);
	v.gpu_memory_utilization = knob_number(space, c, OPT_KNOB_GPU_MEMORY_UTILIZATION, v.gpu_memory_utilization);
	v.max_model_len = knob_number(space, c, OPT_KNOB_MAX_MODEL_LEN, v.max_model_len);
	estimate_values(p, &v, ret);
}

static double json_number(const cJSON *knobs, const char *name, double def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, name);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static const char *json_text(const cJSON *knobs, const char *name, const char *def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, name);

	return cJSON_IsString(v) ? v->valuestring : def;
}

/* A disaggregated configuration: each side's worker is a server of its own
 * (its side's TP and batch knobs); the verdict is the worse side's, which
 * the estimate names. */
static void estimate_sides(const struct runner_preflight *p, const cJSON *knobs, const struct opt_pd_shape *pd,
			   struct runner_estimate *ret)
{
	static const int rank[] = { [OPT_FIT_YES] = 0, [OPT_FIT_UNKNOWN] = 1, [OPT_FIT_NEAR] = 2, [OPT_FIT_NO] = 3 };
	struct runner_estimate e[2];

	for (int i = 0; i < 2; i++) {
		_cleanup_(cJSON_Deletep) cJSON *side = NULL;
		enum engine_role role = i == 0 ? ENGINE_ROLE_PREFILL : ENGINE_ROLE_DECODE;

		if (engine_role_knobs(knobs, role, &side) < 0) {
			*ret = (struct runner_estimate){ .fit = OPT_FIT_UNKNOWN, .cause = OPT_OOM_UNKNOWN };
			return;
		}
		runner_preflight_estimate_knobs(p, side, &e[i]);
		e[i].role = engine_role_to_string(role);
	}
	*ret = rank[e[1].fit] > rank[e[0].fit] ? e[1] : e[0];
	ret->gpus = opt_pd_shape_gpus(pd);
}

void runner_preflight_estimate_knobs(const struct runner_preflight *p, const cJSON *knobs, struct runner_estimate *ret)
{
	struct opt_pd_shape pd;
	struct knob_values v;

	if (opt_knobs_pd_shape(knobs, &pd)) {
		estimate_sides(p, knobs, &pd, ret);
		return;
	}
	defaults(p, &v);
	v.quantization = json_text(knobs, OPT_KNOB_QUANTIZATION, v.quantization);
	v.kv_cache_dtype = json_text(knobs, OPT_KNOB_KV_CACHE_DTYPE, v.kv_cache_dtype);
	v.tp = (unsigned)json_number(knobs, OPT_KNOB_TENSOR_PARALLEL, v.tp);
	v.dp = (unsigned)json_number(knobs, OPT_KNOB_DATA_PARALLEL, v.dp);
	v.pp = (unsigned)json_number(knobs, OPT_KNOB_PIPELINE_PARALLEL, v.pp);
	v.spec_method = json_text(knobs, OPT_KNOB_SPEC_METHOD, v.spec_method);
	v.spec_tokens = (unsigned)json_number(knobs, OPT_KNOB_SPEC_TOKENS, v.spec_tokens);
	v.max_num_seqs = json_number(knobs, OPT_KNOB_MAX_NUM_SEQS, v.max_num_seqs);
	v.max_num_batched_tokens = json_number(knobs, OPT_KNOB_MAX_NUM_BATCHED_TOKENS, v.max_num_batched_tokens);
	v.gpu_memory_utilization = json_number(knobs, OPT_KNOB_GPU_MEMORY_UTILIZATION, v.gpu_memory_utilization);
	v.max_model_len = json_number(knobs, OPT_KNOB_MAX_MODEL_LEN, v.max_model_len);
	estimate_values(p, &v, ret);
}

enum opt_fit runner_preflight_fit(const struct opt_space *space, const struct opt_config *c, void *userdata)
{
	struct runner_estimate e;

	runner_preflight_estimate(userdata, space, c, &e);
	return e.fit;
}

void runner_estimate_format(const struct runner_estimate *e, char *buf, size_t size)
{
	if (e->too_many_gpus)
		snprintf(buf, size,
			 "data_parallel %u × tensor_parallel %u × pipeline_parallel %u = %u GPUs, more than one node's",
			 e->dp, e->tp, e->pp, e->gpus);
	else if (e->refused)
		snprintf(buf, size, "the engine refuses tensor_parallel %u%s for this model%s%s", e->tp,
			 e->pp > 1 ? " with pipeline stages" : "", e->role ? " (its " : "",
			 e->role ? (strcmp(e->role, "prefill") == 0 ? "prefill workers)" : "decode workers)") : "");
	else if (e->fit == OPT_FIT_UNKNOWN)
		snprintf(buf, size, "no estimate");
	else
		snprintf(buf, size,
			 "%s%sweights %.1f%s + activations %.1f + KV cache for %u tokens %.1f = %.1f GiB per GPU, of "
			 "%.1f GiB (%.1f GiB × %.2f)",
			 e->role ? e->role : "", e->role ? " worker: " : "", e->weights_gib,
			 e->draft_gib > 0 ? " (the drafter's included)" : "", e->activations_gib, e->max_model_len,
			 e->kv_gib, e->need_gib, e->budget_gib, e->memory_gib, e->budget_gib / e->memory_gib);
}
