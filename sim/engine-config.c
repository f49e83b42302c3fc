/* engine-config.c — what goodput-sim is asked to emulate: defaults, vLLM's
 * engine flags (shared by the real-time server and `goodput-sim simulate`,
 * so both accept exactly the same ones), and resolution of the names into a
 * model, a GPU and an efficiency profile. */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "engine.h"
#include "json-util.h"
#include "macro.h"
#include "parse.h"

void sim_engine_config_init(struct sim_engine_config *c)
{
	*c = (struct sim_engine_config){
		.model_name = "llama-3.1-8b",
		.gpu_name = "H100",
		.profile_name = "vllm",
		.tp = 1,
		.pp = 1,
		.dp = 1,
		.dp_balance = SIM_DP_SCORE,
		.quant = SIM_QUANT_NONE,
		.kv_dtype = SIM_KV_AUTO,
		.gpu_memory_utilization = 0.9,
		.enable_prefix_caching = true,
		.jitter_sigma = 0.03,
		.startup_scale = 1.0,
		.memory_rules = SIM_MEMORY_VLLM,
		.kv_fail_fast = true,
	};
	sim_startup_model_init(&c->startup);
}

static int set_string(char *dst, size_t size, const char *flag, const char *value, struct error *err)
{
	if (!value || !*value)
		return error_set(err, -EINVAL, "%s: expected a value", flag);
	if (strlen(value) >= size)
		return error_set(err, -EINVAL, "%s: value too long (at most %zu bytes): \"%.40s...\"", flag, size - 1,
				 value);
	memcpy(dst, value, strlen(value) + 1);
	return 1;
}

static const char *const dp_balance_names[_SIM_DP_BALANCE_MAX] = {
	[SIM_DP_SCORE] = "score",
	[SIM_DP_ROUND_ROBIN] = "round_robin",
	[SIM_DP_SHORTEST_QUEUE] = "shortest_queue",
};

const char *sim_dp_balance_to_string(enum sim_dp_balance b)
{
	return b < _SIM_DP_BALANCE_MAX ? dp_balance_names[b] : NULL;
}

int sim_dp_balance_from_string(const char *s, enum sim_dp_balance *ret)
{
	for (int i = 0; s && i < _SIM_DP_BALANCE_MAX; i++)
		if (strcasecmp(s, dp_balance_names[i]) == 0) {
			*ret = (enum sim_dp_balance)i;
			return 0;
		}
	/* SGLang's minimum_tokens: the least loaded, by tokens rather than requests */
	if (s && strcasecmp(s, "minimum_tokens") == 0) {
		*ret = SIM_DP_SHORTEST_QUEUE;
		return 0;
	}
	return -EINVAL;
}

uint32_t sim_engine_config_gpus(const struct sim_engine_config *c)
{
	if (sim_pd_enabled(&c->pd))
		return c->pd.prefill_workers * MAX(c->pd.prefill_tp ? c->pd.prefill_tp : c->tp, 1u) +
		       c->pd.decode_workers * MAX(c->pd.decode_tp ? c->pd.decode_tp : c->tp, 1u);
	return MAX(c->dp, 1u) * MAX(c->tp, 1u) * MAX(c->pp, 1u);
}

/* vLLM's --speculative-config: a JSON object of SpeculativeConfig's fields.
 * The method is detected from the model's name when not given, as vLLM
 * does for EAGLE heads. */
static int apply_speculative_config(struct sim_engine_config *c, const char *value, struct error *err)
{
	static const char *const ignored[] = { "prompt_lookup_max",     "prompt_lookup_min",
					       "disable_by_batch_size", "disable_logprobs",
					       "disable_log_stats",     "quantization",
					       "max_model_len",         "revision",
					       "enforce_eager",         NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	const char *what = "--speculative-config", *method = NULL, *model = NULL;
	uint32_t k = 0, dtp = 0;
	const cJSON *e;
	int r;

	j = cJSON_ParseWithLength(value, strlen(value));
	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected a JSON object, got \"%.60s\"", what, value);
	cJSON_ArrayForEach(e, j)
	{
		bool known = false;

		for (size_t i = 0; ignored[i]; i++)
			known = known || strcmp(e->string, ignored[i]) == 0;
		if (!known && strcmp(e->string, "method") != 0 && strcmp(e->string, "model") != 0 &&
		    strcmp(e->string, "num_speculative_tokens") != 0 &&
		    strcmp(e->string, "draft_tensor_parallel_size") != 0)
			return error_set(err, -EINVAL, "%s: unexpected keyword argument '%s'", what, e->string);
	}
	r = json_get_string(j, what, "method", SIM_NAME_MAX - 1, &method, err);
	if (r >= 0)
		r = json_get_string(j, what, "model", SIM_NAME_MAX - 1, &model, err);
	if (r >= 0)
		r = json_get_u32(j, what, "num_speculative_tokens", 1, SIM_SPEC_MAX_TOKENS, &k, err);
	if (r >= 0)
		r = json_get_u32(j, what, "draft_tensor_parallel_size", 1, 64, &dtp, err);
	if (r < 0)
		return r;
	if (!method && !model)
		return error_set(err, -EINVAL,
				 "%s: ValueError: num_speculative_tokens was provided but without speculative model "
				 "or method",
				 what);
	if (!method)
		method = strcasestr(model, "eagle") ? "eagle" : strcasestr(model, "mtp") ? "mtp" : "draft_model";
	if (sim_spec_method_from_string(method, &c->spec_method) < 0)
		return error_set(err, -EINVAL,
				 "%s.method: expected ngram, draft_model, eagle, eagle3 or mtp, got \"%s\"", what,
				 method);
	if (c->spec_method != SIM_SPEC_NONE && k == 0)
		return error_set(err, -EINVAL, "%s: num_speculative_tokens must be provided with speculative model %s",
				 what, model ? model : method);
	c->spec_tokens = k;
	c->spec_draft_tp = dtp;
	snprintf(c->spec_draft_model, sizeof(c->spec_draft_model), "%s",
		 c->spec_method == SIM_SPEC_DRAFT_MODEL && model ? model : "");
	return 1;
}

static const char *const valueless[] = { "enable-prefix-caching", "no-enable-prefix-caching", "startup-model", NULL };

static const char *flag_name(const char *flag)
{
	while (*flag == '-')
		flag++;
	return flag;
}

const char *sim_knob_flag(const char *knob, char *buf, size_t size)
{
	size_t n = strlen(knob);
	bool parallel = n > 9 && strcmp(knob + n - 9, "_parallel") == 0;

	if (snprintf(buf, size, "--%s%s", knob, parallel ? "_size" : "") >= (int)size)
		return NULL;
	for (char *p = buf; *p; p++)
		if (*p == '_')
			*p = '-';
	return buf;
}

bool sim_engine_flag_takes_value(const char *flag)
{
	const char *n = flag_name(flag);

	for (size_t i = 0; valueless[i]; i++)
		if (strcmp(n, valueless[i]) == 0)
			return false;
	return true;
}

int sim_engine_config_apply_flag(struct sim_engine_config *c, const char *flag, const char *value, struct error *err)
{
	const char *n = flag_name(flag);
	char what[64];
	int r;

	snprintf(what, sizeof(what), "--%s", n);
	if (strcmp(n, "no-enable-prefix-caching") == 0) {
		c->enable_prefix_caching = false;
		c->resolved = false;
		return 1;
	}
	if (strcmp(n, "enable-prefix-caching") == 0) {
		c->enable_prefix_caching = true;
		c->resolved = false;
		return 1;
	}
	if (strcmp(n, "startup-model") == 0) {
		c->startup.enabled = true;
		c->resolved = false;
		return 1;
	}
	if (!value)
		return error_set(err, -EINVAL, "%s: expected a value", what);

	if (strcmp(n, "model") == 0)
		r = set_string(c->model_name, sizeof(c->model_name), what, value, err);
	else if (strcmp(n, "model-config") == 0)
		r = set_string(c->model_config_path, sizeof(c->model_config_path), what, value, err);
	else if (strcmp(n, "gpu") == 0) {
		if (!sim_gpu_find(value))
			return error_set(err, -EINVAL, "%s: unknown GPU \"%s\" (known: H100, H200, A100, L40S, MI300X)",
					 what, value);
		r = set_string(c->gpu_name, sizeof(c->gpu_name), what, sim_gpu_find(value)->name, err);
	} else if (strcmp(n, "gpus") == 0)
		r = parse_u32(what, value, 1, 64, &c->gpus, err);
	else if (strcmp(n, "tensor-parallel-size") == 0 || strcmp(n, "tp") == 0)
		r = parse_u32(what, value, 1, 64, &c->tp, err);
	else if (strcmp(n, "pipeline-parallel-size") == 0 || strcmp(n, "pp") == 0)
		r = parse_u32(what, value, 1, 64, &c->pp, err);
	else if (strcmp(n, "data-parallel-size") == 0 || strcmp(n, "dp") == 0)
		r = parse_u32(what, value, 1, 64, &c->dp, err);
	else if (strcmp(n, "dp-load-balance") == 0) {
		if (sim_dp_balance_from_string(value, &c->dp_balance) < 0)
			return error_set(err, -EINVAL, "%s: expected score, round_robin or shortest_queue, got \"%s\"",
					 what, value);
		r = 1;
	} else if (strcmp(n, "prefix-caching") == 0) {
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return error_set(err, -EINVAL, "%s: expected on or off, got \"%s\"", what, value);
		c->enable_prefix_caching = strcmp(value, "on") == 0;
		r = 1;
	} else if (strcmp(n, "speculative-config") == 0)
		r = apply_speculative_config(c, value, err);
	else if (strcmp(n, "spec-method") == 0) {
		if (sim_spec_method_from_string(value, &c->spec_method) < 0)
			return error_set(err, -EINVAL,
					 "%s: expected none, ngram, draft_model, eagle or mtp, got \"%s\"", what,
					 value);
		r = 1;
	} else if (strcmp(n, "spec-tokens") == 0)
		r = parse_u32(what, value, 1, SIM_SPEC_MAX_TOKENS, &c->spec_tokens, err);
	else if (strcmp(n, "spec-draft-tp") == 0)
		r = parse_u32(what, value, 1, 64, &c->spec_draft_tp, err);
	else if (strcmp(n, "spec-draft-model") == 0)
		r = set_string(c->spec_draft_model, sizeof(c->spec_draft_model), what, value, err);
	else if (strcmp(n, "spec-acceptance") == 0)
		r = sim_spec_acceptance_parse(value, &c->spec_acceptance, err) < 0 ? -EINVAL : 1;
	else if (strcmp(n, "prefill-workers") == 0)
		r = parse_u32(what, value, 0, 64, &c->pd.prefill_workers, err);
	else if (strcmp(n, "decode-workers") == 0)
		r = parse_u32(what, value, 0, 64, &c->pd.decode_workers, err);
	else if (strcmp(n, "prefill-tp") == 0 || strcmp(n, "prefill-tensor-parallel-size") == 0 ||
		 strcmp(n, "prefill-tensor-parallel") == 0)
		r = parse_u32(what, value, 1, 64, &c->pd.prefill_tp, err);
	else if (strcmp(n, "decode-tp") == 0 || strcmp(n, "decode-tensor-parallel-size") == 0 ||
		 strcmp(n, "decode-tensor-parallel") == 0)
		r = parse_u32(what, value, 1, 64, &c->pd.decode_tp, err);
	else if (strcmp(n, "prefill-max-num-seqs") == 0)
		r = parse_u32(what, value, 1, 65536, &c->pd.prefill_max_num_seqs, err);
	else if (strcmp(n, "prefill-max-num-batched-tokens") == 0)
		r = parse_u32(what, value, 1, 1u << 22, &c->pd.prefill_max_num_batched_tokens, err);
	else if (strcmp(n, "decode-max-num-seqs") == 0)
		r = parse_u32(what, value, 1, 65536, &c->pd.decode_max_num_seqs, err);
	else if (strcmp(n, "decode-max-num-batched-tokens") == 0)
		r = parse_u32(what, value, 1, 1u << 22, &c->pd.decode_max_num_batched_tokens, err);
	else if (strcmp(n, "interconnect") == 0) {
		if (sim_interconnect_from_string(value, &c->interconnect) < 0)
			return error_set(err, -EINVAL,
					 "%s: expected nvlink, pcie, infiniband, ethernet or auto, got \"%s\"", what,
					 value);
		r = 1;
	} else if (strcmp(n, "interconnect-gbps") == 0)
		r = parse_double(what, value, 0.001, 1e5, &c->interconnect_gbps, err);
	else if (strcmp(n, "max-num-seqs") == 0)
		r = parse_u32(what, value, 1, 65536, &c->max_num_seqs, err);
	else if (strcmp(n, "max-num-batched-tokens") == 0)
		r = parse_u32(what, value, 1, 1u << 22, &c->max_num_batched_tokens, err);
	else if (strcmp(n, "max-model-len") == 0)
		r = parse_u32(what, value, 1, 1u << 24, &c->max_model_len, err);
	else if (strcmp(n, "long-prefill-token-threshold") == 0)
		r = parse_u32(what, value, 0, 1u << 22, &c->long_prefill_token_threshold, err);
	else if (strcmp(n, "quantization") == 0 || strcmp(n, "q") == 0) {
		if (sim_quant_from_string(value, &c->quant) < 0)
			return error_set(err, -EINVAL, "%s: expected none, fp8, int8 or awq, got \"%s\"", what, value);
		r = 1;
	} else if (strcmp(n, "kv-cache-dtype") == 0) {
		if (sim_kv_dtype_from_string(value, &c->kv_dtype) < 0)
			return error_set(err, -EINVAL, "%s: expected auto or fp8, got \"%s\"", what, value);
		r = 1;
	} else if (strcmp(n, "gpu-memory-utilization") == 0)
		/* any fraction above 0: the start-up check refuses one above 1 in the engine's words */
		r = parse_double(what, value, 0.001, 10.0, &c->gpu_memory_utilization, err);
	else if (strcmp(n, "profile") == 0) {
		struct sim_profile p;

		r = sim_profile_preset(value, &p, err);
		if (r < 0)
			return r;
		r = set_string(c->profile_name, sizeof(c->profile_name), what, value, err);
	} else if (strcmp(n, "profile-file") == 0)
		r = set_string(c->profile_path, sizeof(c->profile_path), what, value, err);
	else if (strcmp(n, "seed") == 0)
		r = parse_u64(what, value, 0, UINT64_MAX, &c->seed, err);
	else if (strcmp(n, "jitter") == 0)
		r = parse_double(what, value, 0, 1.0, &c->jitter_sigma, err);
	else if (strcmp(n, "load-time-scale") == 0)
		r = parse_double(what, value, 0, 100.0, &c->startup_scale, err);
	else if (strcmp(n, "weights-read-gbps") == 0)
		r = parse_double(what, value, 0.001, 1e6, &c->startup.weights_read_gbps, err);
	else if (strcmp(n, "init-seconds") == 0)
		r = parse_double(what, value, 0, 86400, &c->startup.init_seconds, err);
	else if (strcmp(n, "graph-capture-seconds") == 0)
		r = parse_double(what, value, 0, 86400, &c->startup.graph_capture_seconds, err);
	else
		return 0;
	if (r < 0)
		return r;
	c->resolved = false;
	return 1;
}

void sim_engine_flags_help(FILE *out)
{
	fputs("  --model NAME                  model preset or HF id: llama-3.1-8b, llama-3.1-70b, qwen2.5-7b,\n"
	      "                                llama-7b, llama-2-70b (default llama-3.1-8b)\n"
	      "  --model-config FILE           any dense model from a Hugging Face config.json\n"
	      "  --gpu NAME                    H100, H200, A100, L40S, MI300X (default H100)\n"
	      "  --gpus N                      GPUs on the emulated host (default: the TP size)\n"
	      "  --tensor-parallel-size N      GPUs per replica (-tp; default 1)\n"
	      "  --max-num-seqs N              sequences per step (default: vLLM's for the GPU, 1024 or 256)\n"
	      "  --max-num-batched-tokens N    token budget per step (default 8192, or 2048 on A100/L40S)\n"
	      "  --max-model-len N             context limit (default: the model's)\n"
	      "  --quantization Q              none (bf16), fp8 (W8A8), int8 (W8A8), awq (W4A16)\n"
	      "  --kv-cache-dtype D            auto or fp8\n"
	      "  --gpu-memory-utilization F    fraction of GPU memory for this engine (default 0.9)\n"
	      "  --enable-prefix-caching, --no-enable-prefix-caching\n"
	      "                                prefix caching on (the default) or off\n"
	      "  --data-parallel-size N        replicas of the TP x PP group behind one endpoint (-dp; default 1),\n"
	      "                                each request to the one with the fewest waiting x 4 + running\n"
	      "  --pipeline-parallel-size N    pipeline stages, each layers/N of the model (-pp; default 1)\n"
	      "  --speculative-config JSON     speculative decoding: {\"method\": "
	      "\"ngram\"|\"draft_model\"|\"eagle\"|\n"
	      "                                \"mtp\", \"num_speculative_tokens\": K, \"model\": DRAFT,\n"
	      "                                \"draft_tensor_parallel_size\": N}\n"
	      "  --spec-acceptance A|P1,P2,..  goodput-sim's own (every dialect): how often drafts are accepted,\n"
	      "                                one rate for every position (i.i.d.) or vLLM's per-position rates\n"
	      "                                (default by method; $GOODPUT_SIM_SPEC_ACCEPTANCE when unset)\n"
	      "  simulate only: --prefix-caching on|off, --dp-load-balance score|round_robin|shortest_queue,\n"
	      "                 --spec-method M, --spec-tokens K, --spec-draft-model NAME, --spec-draft-tp N\n"
	      "  --interconnect L              the link a KV cache crosses between workers: nvlink, pcie,\n"
	      "                                infiniband, ethernet (default: the GPU's own, NVLink or PCIe)\n"
	      "  --interconnect-gbps G         its raw bandwidth per GPU, GB/s one way (default: the preset's)\n"
	      "  simulate only, disaggregated prefill and decode (both counts > 0):\n"
	      "                 --prefill-workers P, --decode-workers D, --prefill-tp N, --decode-tp N,\n"
	      "                 --prefill-max-num-seqs N, --prefill-max-num-batched-tokens N,\n"
	      "                 --decode-max-num-seqs N, --decode-max-num-batched-tokens N\n"
	      "  --long-prefill-token-threshold N  cap on one partial prefill per step (0 = off)\n"
	      "  --profile vllm|trtllm         efficiency constants (default vllm)\n"
	      "  --profile-file FILE           JSON overrides of profile constants ({\"mfu_bf16\": 0.55, ...})\n"
	      "  --seed N                      seed of the per-step jitter (default 0)\n"
	      "  --jitter SIGMA                log-normal sigma of step times (default 0.03)\n"
	      "  --load-time-scale F           multiplies the modelled start-up time (default 1)\n"
	      "  --startup-model               start up in a real engine's time: weights read from storage, the\n"
	      "                                engine's initialisation and CUDA graph capture (off)\n"
	      "  --weights-read-gbps G         storage read speed for the weights, GB/s (default 2)\n"
	      "  --init-seconds S              initialisation, +5 s per TP rank above 1 (default 20)\n"
	      "  --graph-capture-seconds S     CUDA graph capture (default 15)\n",
	      out);
}

int sim_engine_config_resolve(struct sim_engine_config *c, struct error *err)
{
	const struct sim_gpu *g;
	uint32_t mbt, mns;
	int r;

	if (c->resolved)
		return 0;
	if (c->model_config_path[0]) {
		r = sim_model_from_hf_config(c->model_config_path, &c->model, err);
		if (r < 0)
			return r;
		/* Serve it under the given --model name when one was given explicitly. */
	} else {
		r = sim_model_preset(c->model_name, &c->model, err);
		if (r < 0)
			return r;
	}
	g = sim_gpu_find(c->gpu_name);
	if (!g)
		return error_set(err, -EINVAL, "--gpu: unknown GPU \"%s\" (known: H100, H200, A100, L40S, MI300X)",
				 c->gpu_name);
	c->gpu = *g;
	r = sim_profile_preset(c->profile_name, &c->profile, err);
	if (r < 0)
		return r;
	if (c->profile_path[0]) {
		r = sim_profile_load_file(&c->profile, c->profile_path, err);
		if (r < 0)
			return error_prefix(err, r, "--profile-file");
	}
	if (c->tp == 0)
		c->tp = 1;
	if (c->pp == 0)
		c->pp = 1;
	if (c->dp == 0)
		c->dp = 1;
	if (c->gpus == 0)
		c->gpus = sim_engine_config_gpus(c);
	if (c->spec_method == SIM_SPEC_DRAFT_MODEL) {
		if (!c->spec_draft_model[0])
			return error_set(err, -EINVAL,
					 "speculative decoding: method draft_model needs a draft model "
					 "(\"model\" in --speculative-config, --spec-draft-model)");
		r = sim_model_preset(c->spec_draft_model, &c->draft_model, err);
		if (r < 0)
			return error_prefix(err, r, "speculative decoding: draft model");
	}
	if (c->spec_method != SIM_SPEC_NONE && c->spec_tokens == 0)
		return error_set(err, -EINVAL, "speculative decoding: %s needs num_speculative_tokens (--spec-tokens)",
				 sim_spec_method_to_string(c->spec_method));
	sim_perf_default_batch(g, &mbt, &mns);
	if (c->max_num_batched_tokens == 0)
		c->max_num_batched_tokens = mbt;
	if (c->max_num_seqs == 0)
		c->max_num_seqs = mns;
	if (c->max_model_len == 0)
		c->max_model_len = c->model.max_position;
	c->resolved = true;
	return 0;
}
