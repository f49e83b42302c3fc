/* engine-config.c — what goodput-sim is asked to emulate: defaults, vLLM's
 * engine flags (shared by the real-time server and `goodput-sim simulate`,
 * so both accept exactly the same ones), and resolution of the names into a
 * model, a GPU and an efficiency profile. */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "engine.h"
#include "parse.h"

void sim_engine_config_init(struct sim_engine_config *c)
{
	*c = (struct sim_engine_config){
		.model_name = "llama-3.1-8b",
		.gpu_name = "H100",
		.profile_name = "vllm",
		.tp = 1,
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

static const char *const valueless[] = { "enable-prefix-caching", "no-enable-prefix-caching", "startup-model", NULL };

static const char *flag_name(const char *flag)
{
	while (*flag == '-')
		flag++;
	return flag;
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
	      "  --no-enable-prefix-caching    turn prefix caching off (on by default)\n"
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
	if (c->gpus == 0)
		c->gpus = c->tp;
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
