/* dialect-engines.c — what each engine makes of its arguments: the model
 * as it is given them (a GGUF file's quantization tag, a checkpoint's name),
 * TensorRT-LLM's options file, and each engine's defaults and validation
 * once every flag is read. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dialect-internal.h"
#include "macro.h"
#include "parse.h"

/* ---- models, as each engine is given them ---- */

/* A quantized checkpoint says what it is in its name ("…-FP8-dynamic",
 * "…-AWQ", "…-quantized.w8a8"); the engines read it from the checkpoint. */
static bool quant_from_name(const char *name, enum sim_quant *ret)
{
	static const struct {
		const char *tag;
		enum sim_quant q;
	} tags[] = {
		{ "fp8", SIM_QUANT_FP8 },   { "awq", SIM_QUANT_AWQ },   { "gptq", SIM_QUANT_AWQ },
		{ "int4", SIM_QUANT_AWQ },  { "w4a16", SIM_QUANT_AWQ }, { "int8", SIM_QUANT_INT8 },
		{ "w8a8", SIM_QUANT_INT8 },
	};
	const char *base = strrchr(name, '/');

	base = base ? base + 1 : name;
	for (size_t i = 0; i < ELEMENTSOF(tags); i++)
		if (strcasestr(base, tags[i].tag)) {
			*ret = tags[i].q;
			return true;
		}
	return false;
}

/* A GGUF file: "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf" is llama-3.1-8b in
 * 4-bit. The tag's bits pick the nearest of the sim's precisions: F16/BF16
 * none, Q8_0 and Q6_K int8 (8 and 6.6 bits), Q5 and below the 4-bit class. */
static int gguf_model(const char *path, char *buf, size_t size, enum sim_quant *ret_quant)
{
	const char *base = strrchr(path, '/');
	char *tag;
	size_t n;

	base = base ? base + 1 : path;
	snprintf(buf, size, "%s", base);
	n = strlen(buf);
	if (n > 5 && strcasecmp(buf + n - 5, ".gguf") == 0)
		buf[n - 5] = 0;
	tag = strrchr(buf, '-');
	if (!tag || strrchr(buf, '.') > tag)
		tag = strrchr(buf, '.');
	*ret_quant = SIM_QUANT_NONE;
	if (!tag)
		return 0;
	if (strcasecmp(tag + 1, "f16") == 0 || strcasecmp(tag + 1, "bf16") == 0 || strcasecmp(tag + 1, "f32") == 0)
		*ret_quant = SIM_QUANT_NONE;
	else if (strncasecmp(tag + 1, "q8", 2) == 0 || strncasecmp(tag + 1, "q6", 2) == 0)
		*ret_quant = SIM_QUANT_INT8;
	else if (strncasecmp(tag + 1, "q", 1) == 0 || strncasecmp(tag + 1, "iq", 2) == 0)
		*ret_quant = SIM_QUANT_AWQ;
	else
		return 0; /* not a quantization tag: part of the name */
	*tag = 0;
	return 1;
}

int sim_dialect_set_model(enum sim_dialect d, const char *model, bool quant_explicit, struct sim_engine_config *ec,
			  struct error *err)
{
	char name[SIM_NAME_MAX];
	enum sim_quant q;

	if (d == SIM_DIALECT_LLAMACPP) {
		gguf_model(model, name, sizeof(name), &q);
		ec->quant = q;
		return sim_engine_config_apply_flag(ec, "--model", name, err);
	}
	if (!quant_explicit && quant_from_name(model, &q))
		ec->quant = q;
	return sim_engine_config_apply_flag(ec, "--model", model, err);
}

int sim_dialect_set_draft_model(enum sim_dialect d, const char *model, struct sim_engine_config *ec, struct error *err)
{
	char name[SIM_NAME_MAX];
	enum sim_quant q;
	int r;

	if (d == SIM_DIALECT_LLAMACPP)
		gguf_model(model, name, sizeof(name), &q); /* the draft runs as given; its bits are not modelled */
	else
		snprintf(name, sizeof(name), "%s", model);
	r = sim_engine_config_apply_flag(ec, "--spec-method", "draft_model", err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(ec, "--spec-draft-model", name, err);
	/* llama-server drafts up to 16 tokens unless --draft-max says otherwise */
	if (r >= 0 && d == SIM_DIALECT_LLAMACPP && ec->spec_tokens == 0)
		ec->spec_tokens = 16;
	return r;
}

/* ---- TensorRT-LLM's options file (a YAML mapping; the keys the emulation uses) ---- */

static int read_trtllm_options(const char *path, struct sim_dialect_options *opt, struct sim_engine_config *ec,
			       bool gmu_set, struct error *err)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "re");
	char line[512], section[64] = "";

	if (!f)
		return error_set(err, -errno, "--extra_llm_api_options: %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *colon, *key = line, *val;
		bool nested = line[0] == ' ' || line[0] == '\t';

		line[strcspn(line, "\r\n#")] = 0;
		while (*key == ' ' || *key == '\t')
			key++;
		colon = strchr(key, ':');
		if (!*key || !colon)
			continue;
		*colon = 0;
		for (val = colon + 1; *val == ' '; val++)
			;
		if (!nested)
			snprintf(section, sizeof(section), "%.63s", *val ? "" : key);
		if (!nested && strcmp(key, "enable_iter_perf_stats") == 0)
			opt->iter_perf_stats = strcasecmp(val, "true") == 0;
		else if (!nested && strcmp(key, "return_perf_metrics") == 0)
			opt->perf_metrics = strcasecmp(val, "true") == 0;
		else if (nested && strcmp(section, "kv_cache_config") == 0 &&
			 strcmp(key, "free_gpu_memory_fraction") == 0 && !gmu_set) {
			int r = parse_double("kv_cache_config.free_gpu_memory_fraction", val, 0, 1,
					     &ec->gpu_memory_utilization, err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* ---- each engine's defaults ---- */

/* The model's facts for an engine's defaults; the host's GPU count stays as
 * given (0: CUDA_VISIBLE_DEVICES, or the TP size, decide it later). */
static int resolve_model(struct sim_engine_config *ec, struct error *err)
{
	uint32_t gpus = ec->gpus;
	int r = sim_engine_config_resolve(ec, err);

	ec->gpus = gpus;
	ec->resolved = false;
	return r;
}

/* SGLang's --mem-fraction-static default by TP (server_args.py). */
static double sglang_mem_fraction(uint32_t tp)
{
	return tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
}

/* TGI's launcher: lengths default from the model (at most 4096), the
 * prefill budget from them, then its argument validation. */
static int tgi_defaults(struct sim_engine_config *ec, struct sim_dialect_options *opt,
			const struct sim_dialect_pending *pd)
{
	uint32_t max_pos = MIN(ec->model.max_position, 4096u);
	uint32_t max_input = pd->max_input ? pd->max_input : pd->max_total ? pd->max_total - 1 : max_pos - 1;
	uint32_t max_total = pd->max_total ? pd->max_total : max_pos;
	uint64_t prefill = pd->prefill_tokens ? pd->prefill_tokens
			   : pd->max_batch    ? (uint64_t)pd->max_batch * max_input
					      : (uint64_t)max_input + 50;

	if (max_input >= max_total) {
		fprintf(stderr, "Error: ArgumentValidation(\"`max_input_tokens must be < `max_total_tokens`\")\n");
		return 1 + 1;
	}
	if (max_input > prefill) {
		fprintf(stderr,
			"Error: ArgumentValidation(\"`max_batch_prefill_tokens` must be >= `max_input_tokens`. Given: "
			"%" PRIu64 " and %u\")\n",
			prefill, max_input);
		return 1 + 1;
	}
	ec->max_model_len = max_total;
	ec->max_num_batched_tokens = (uint32_t)MIN(prefill, (uint64_t)1 << 22);
	ec->max_num_seqs = pd->max_batch ? pd->max_batch : MIN(1024u, ec->max_num_batched_tokens);
	opt->max_input_tokens = max_input;
	return 0;
}

int sim_dialect_apply_defaults(enum sim_dialect d, struct sim_engine_config *ec, struct sim_dialect_options *opt,
			       const struct sim_dialect_pending *pd, bool gmu_set, struct error *err)
{
	int r;

	switch (d) {
	case SIM_DIALECT_LLAMACPP: {
		uint32_t slots = pd->parallel ? pd->parallel : 1, ctx;

		ec->memory_rules = SIM_MEMORY_LLAMACPP;
		ec->tp = 1;
		ec->max_num_seqs = slots;
		/* a step takes up to -b tokens (the server fills its batch to
		 * n_batch); llama_decode splits them into ubatches of -ub, which
		 * llama.cpp clamps to -b */
		opt->llamacpp.batch = pd->batch ? pd->batch : 2048u;
		opt->llamacpp.ubatch = MIN(pd->ubatch ? pd->ubatch : 512u, opt->llamacpp.batch);
		ec->max_num_batched_tokens = opt->llamacpp.batch;
		if (opt->llamacpp.threads_batch < 0)
			opt->llamacpp.threads_batch = opt->llamacpp.threads;
		r = resolve_model(ec, err);
		if (r < 0)
			return r;
		/* absent: 4096 tokens in all (common.h's n_ctx); 0: the model's
		 * training context; split evenly between the slots */
		ctx = !pd->have_ctx ? 4096u : pd->ctx > 0 ? pd->ctx : ec->model.max_position;
		ec->kv_tokens_fixed = ctx;
		ec->max_model_len = MAX(ctx / slots, 1u);
		opt->slots = slots;
		return 0;
	}
	case SIM_DIALECT_SGLANG:
		ec->memory_rules = SIM_MEMORY_SGLANG;
		ec->kv_fail_fast = false;
		if (!gmu_set)
			ec->gpu_memory_utilization = sglang_mem_fraction(ec->tp);
		if (!ec->max_num_seqs)
			ec->max_num_seqs = 2048;
		return 0;
	case SIM_DIALECT_TGI:
		ec->memory_rules = SIM_MEMORY_TGI;
		if (!gmu_set)
			ec->gpu_memory_utilization = 1.0;
		if (!opt->max_concurrent)
			opt->max_concurrent = 128;
		r = resolve_model(ec, err);
		if (r < 0)
			return r;
		return tgi_defaults(ec, opt, pd);
	case SIM_DIALECT_TRTLLM:
		ec->memory_rules = SIM_MEMORY_TRTLLM;
		if (!ec->max_num_seqs)
			ec->max_num_seqs = 2048;
		if (!ec->max_num_batched_tokens)
			ec->max_num_batched_tokens = 8192;
		if (pd->extra_options) {
			r = read_trtllm_options(pd->extra_options, opt, ec, gmu_set, err);
			if (r < 0)
				return r;
		}
		return 0;
	default:
		ec->memory_rules = SIM_MEMORY_VLLM;
		return 0;
	}
}
