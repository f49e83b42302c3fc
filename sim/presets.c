/* presets.c — the built-in GPUs, models and efficiency profiles of
 * goodput-sim, and the name matching that lets users say "h100",
 * "NVIDIA-H100-80GB" or "meta-llama/Llama-3.1-8B-Instruct".
 *
 * Figures are PERFMODEL.md's: §1 for the GPUs (dense peaks, memory, HBM
 * bandwidth, unidirectional link, all-reduce latency, the suggested $/GPU-hour),
 * §2 and emumodel.py for the model architectures, §4.4/§6 for the `vllm` and
 * `trtllm` profiles. Names are matched on their letters and digits only, case
 * folded, so punctuation never matters. */

#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "macro.h"
#include "perfmodel.h"

static const struct sim_gpu gpus[] = {
	{ .name = "H100",
	  .bf16_flops = 989e12,
	  .fp8_flops = 1979e12,
	  .int8_flops = 1979e12,
	  .mem_bytes = 80e9,
	  .hbm_bw = 3.35e12,
	  .link_bw = 450e9,
	  .ar_alpha = 12e-6,
	  .usd_per_hour = 3.00,
	  .sw_derate = 1.0 },
	{ .name = "H200",
	  .bf16_flops = 989e12,
	  .fp8_flops = 1979e12,
	  .int8_flops = 1979e12,
	  .mem_bytes = 141e9,
	  .hbm_bw = 4.8e12,
	  .link_bw = 450e9,
	  .ar_alpha = 12e-6,
	  .usd_per_hour = 3.80,
	  .sw_derate = 1.0 },
	{ .name = "A100",
	  .bf16_flops = 312e12,
	  .fp8_flops = 0,
	  .int8_flops = 624e12,
	  .mem_bytes = 80e9,
	  .hbm_bw = 2.039e12,
	  .link_bw = 300e9,
	  .ar_alpha = 15e-6,
	  .usd_per_hour = 1.60,
	  .sw_derate = 1.0,
	  .a100_mfu = true },
	{ .name = "L40S",
	  .bf16_flops = 362e12,
	  .fp8_flops = 733e12,
	  .int8_flops = 733e12,
	  .mem_bytes = 48e9,
	  .hbm_bw = 0.864e12,
	  .link_bw = 25e9,
	  .ar_alpha = 40e-6,
	  .usd_per_hour = 1.20,
	  .sw_derate = 1.0 },
	{ .name = "MI300X",
	  .bf16_flops = 1307e12,
	  .fp8_flops = 2615e12,
	  .int8_flops = 2615e12,
	  .mem_bytes = 192e9,
	  .hbm_bw = 5.3e12,
	  .link_bw = 448e9,
	  .ar_alpha = 20e-6,
	  .usd_per_hour = 2.50,
	  .sw_derate = 0.85 },
};

/* Lower-cased letters and digits of s into buf. */
static void normalize(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	for (; *s && n + 1 < size; s++)
		if (isalnum((unsigned char)*s))
			buf[n++] = (char)tolower((unsigned char)*s);
	buf[n] = 0;
}

static bool strip_prefix(char *s, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(s, prefix, n) != 0)
		return false;
	memmove(s, s + n, strlen(s + n) + 1);
	return true;
}

static bool strip_suffix(char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	if (n < m || strcmp(s + n - m, suffix) != 0)
		return false;
	s[n - m] = 0;
	return true;
}

const struct sim_gpu *sim_gpu_find(const char *name)
{
	/* What may follow the chip's name: form factor and the (matching) memory size. */
	static const char *const tails[] = { "",        "sxm",      "sxm5",     "sxm4",    "80gb",
					     "sxm80gb", "sxm580gb", "sxm480gb", "80gbsxm", "80gbhbm3",
					     "141gb",   "sxm141gb", "48gb",     "pcie",    "pcie48gb",
					     "192gb",   "oam",      "oam192gb", NULL };
	char buf[64];

	if (!name)
		return NULL;
	normalize(name, buf, sizeof(buf));
	strip_prefix(buf, "nvidia");
	strip_prefix(buf, "amd");
	strip_prefix(buf, "instinct");
	for (size_t i = 0; i < ELEMENTSOF(gpus); i++) {
		char want[16];
		size_t n;

		normalize(gpus[i].name, want, sizeof(want));
		n = strlen(want);
		if (strncmp(buf, want, n) != 0)
			continue;
		for (size_t t = 0; tails[t]; t++)
			if (strcmp(buf + n, tails[t]) == 0)
				return &gpus[i];
	}
	return NULL;
}

const struct sim_gpu *sim_gpu_get(size_t i)
{
	return i < ELEMENTSOF(gpus) ? &gpus[i] : NULL;
}

struct model_preset {
	struct sim_model m;
	const char *aliases[6]; /* normalized forms (after suffix stripping) */
};

static const struct model_preset models[] = {
	{ { .name = "llama-3.1-8b",
	    .layers = 32,
	    .hidden = 4096,
	    .heads = 32,
	    .kv_heads = 8,
	    .head_dim = 128,
	    .ffn = 14336,
	    .vocab = 128256,
	    .max_position = 131072,
	    .tied = false,
	    .params = 8.03e9 },
	  { "llama318b", "llama38b", "metallama38b", "llama3p18b", NULL } },
	{ { .name = "llama-3.1-70b",
	    .layers = 80,
	    .hidden = 8192,
	    .heads = 64,
	    .kv_heads = 8,
	    .head_dim = 128,
	    .ffn = 28672,
	    .vocab = 128256,
	    .max_position = 131072,
	    .tied = false,
	    .params = 70.55e9 },
	  { "llama3170b", "llama370b", "llama3370b", "metallama370b", "llama3p170b", NULL } },
	/* Draft models of the Llama 3 family (same 128,256-token vocabulary; tied embeddings). */
	{ { .name = "llama-3.2-1b",
	    .layers = 16,
	    .hidden = 2048,
	    .heads = 32,
	    .kv_heads = 8,
	    .head_dim = 64,
	    .ffn = 8192,
	    .vocab = 128256,
	    .max_position = 131072,
	    .tied = true,
	    .params = 1.24e9 },
	  { "llama321b", "llama3p21b", NULL } },
	{ { .name = "llama-3.2-3b",
	    .layers = 28,
	    .hidden = 3072,
	    .heads = 24,
	    .kv_heads = 8,
	    .head_dim = 128,
	    .ffn = 8192,
	    .vocab = 128256,
	    .max_position = 131072,
	    .tied = true,
	    .params = 3.21e9 },
	  { "llama323b", "llama3p23b", NULL } },
	{ { .name = "qwen2.5-7b",
	    .layers = 28,
	    .hidden = 3584,
	    .heads = 28,
	    .kv_heads = 4,
	    .head_dim = 128,
	    .ffn = 18944,
	    .vocab = 152064,
	    .max_position = 32768,
	    .tied = false,
	    .params = 7.62e9 },
	  { "qwen257b", "qwen2p57b", NULL } },
	{ { .name = "llama-7b",
	    .layers = 32,
	    .hidden = 4096,
	    .heads = 32,
	    .kv_heads = 32,
	    .head_dim = 128,
	    .ffn = 11008,
	    .vocab = 32000,
	    .max_position = 2048,
	    .tied = false,
	    .params = 6.74e9 },
	  { "llama7b", "huggyllamallama7b", "llama27b", NULL } },
	{ { .name = "llama-2-70b",
	    .layers = 80,
	    .hidden = 8192,
	    .heads = 64,
	    .kv_heads = 8,
	    .head_dim = 128,
	    .ffn = 28672,
	    .vocab = 32000,
	    .max_position = 4096,
	    .tied = false,
	    .params = 68.98e9 },
	  { "llama270b", "metallama270b", NULL } },
};

const char *sim_model_preset_name(size_t i)
{
	return i < ELEMENTSOF(models) ? models[i].m.name : NULL;
}

int sim_model_preset(const char *name, struct sim_model *ret, struct error *err)
{
	/* Releases' suffixes and quantized checkpoints' (…-FP8-dynamic, …-quantized.w8a8). */
	static const char *const suffixes[] = { "instruct", "chat", "hf",   "it",        "base",
						"fp8",      "awq",  "int8", "w4a16",     "w8a8",
						"dynamic",  "gptq", "int4", "quantized", NULL };
	char buf[SIM_NAME_MAX];
	const char *slash;
	bool again = true;

	if (!name || !*name)
		return error_set(err, -EINVAL, "--model: empty model name");
	/* An HF id "org/name": the org only matters for huggyllama/llama-7b. */
	slash = strrchr(name, '/');
	normalize(slash && strncmp(name, "huggyllama/", 11) != 0 ? slash + 1 : name, buf, sizeof(buf));
	strip_prefix(buf, "meta");
	while (again) {
		again = false;
		for (size_t i = 0; suffixes[i]; i++)
			if (strip_suffix(buf, suffixes[i]))
				again = true;
	}
	for (size_t i = 0; i < ELEMENTSOF(models); i++)
		for (size_t a = 0; models[i].aliases[a]; a++)
			if (strcmp(buf, models[i].aliases[a]) == 0) {
				*ret = models[i].m;
				return 0;
			}
	return error_set(err, -ENOENT,
			 "--model: unknown model \"%s\" (presets: llama-3.1-8b, llama-3.1-70b, llama-3.2-1b, "
			 "llama-3.2-3b, qwen2.5-7b, llama-7b, llama-2-70b; any other dense model: --model-config "
			 "config.json)",
			 name);
}

static const struct sim_profile profile_vllm = {
	.mfu_bf16 = 0.50,
	.mfu_bf16_a100 = 0.65,
	.mfu_fp8 = 0.40,
	.mfu_int8 = 0.42,
	.mbu_w = 0.75,
	.mbu_kv = 0.60,
	.f_attn = 0.40,
	.awq_q_eff = 0.85,
	.awq_q_eff_tokens = 64,
	.busbw_frac = 0.8,
	.t_fixed_ms = 1.0,
	.c_seq_us = 40,
	.c_tok_us = 2,
	.t_tp_ms = 1.0,
	.engine_efficiency = 1.0,
	/* vLLM 0.6's n-gram proposer, per sequence and step: the context copied to the GPU, 1-3
	 * n-gram sizes of eager ops each ending in a device sync, and batch expansion's k + 1 copies
	 * of the sequence for scoring (PERFMODEL.md §8; assumed from that code path, bracketed by
	 * the vLLM blog's n-gram figure at 8 req/s). vLLM V1's compiled lookup: about 5. */
	.ngram_seq_us = 450,
	.act_graphs_gib = 0.5,
	.act_base_gib = 0.2,
	.act_nccl_gib = 1.0,
	.start_proc_s = 10,
	.start_tp_s = 10,
	.load_gbps = 10,
	.start_compile_s = 10,
	.start_profile_s = 3,
	.start_graphs_s = 15,
};

static const struct sim_profile profile_trtllm = {
	.mfu_bf16 = 0.60,
	.mfu_bf16_a100 = 0.65,
	.mfu_fp8 = 0.48,
	.mfu_int8 = 0.50,
	.mbu_w = 0.80,
	.mbu_kv = 0.70,
	.f_attn = 0.50,
	.awq_q_eff = 0.85,
	.awq_q_eff_tokens = 64,
	.busbw_frac = 0.8,
	.t_fixed_ms = 1.5,
	.c_seq_us = 0,
	.c_tok_us = 0,
	.t_tp_ms = 0,
	.engine_efficiency = 1.0,
	.ngram_seq_us = 5,
	.act_graphs_gib = 0.5,
	.act_base_gib = 0.2,
	.act_nccl_gib = 1.0,
	.start_proc_s = 10,
	.start_tp_s = 10,
	.load_gbps = 10,
	.start_compile_s = 10,
	.start_profile_s = 3,
	.start_graphs_s = 15,
};

int sim_profile_preset(const char *name, struct sim_profile *ret, struct error *err)
{
	if (name && strcasecmp(name, "vllm") == 0)
		*ret = profile_vllm;
	else if (name && (strcasecmp(name, "trtllm") == 0 || strcasecmp(name, "trt-llm") == 0 ||
			  strcasecmp(name, "tensorrt-llm") == 0))
		*ret = profile_trtllm;
	else
		return error_set(err, -ENOENT, "--profile: unknown profile \"%s\" (known: vllm, trtllm)",
				 name ? name : "");
	return 0;
}
