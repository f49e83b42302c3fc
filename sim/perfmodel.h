/* perfmodel.h — the roofline performance model of goodput-sim (no I/O
 * besides reading a config file on request, no clock).
 *
 * Everything here follows sim/PERFMODEL.md (the performance model and its sources): GPU presets (§1),
 * model architectures (§2, or any dense Hugging Face config.json), the step
 * time of one engine forward as the SUM of GEMM, attention, TP all-reduce and
 * overhead terms (§6), the KV-cache capacity from the memory budget (§4.3),
 * vLLM's start-up failures with vLLM's wording (§4.3) and the start-up time
 * (§4.5). The fitted efficiency constants live in one struct of doubles
 * (struct sim_profile) so that the digital twin can fit them; a profile can
 * be overridden from a JSON file, key by key.
 *
 * Units: seconds and bytes as doubles inside the model; the engine converts
 * to µs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"

#define SIM_GIB      (1024.0 * 1024.0 * 1024.0)
#define SIM_NAME_MAX 128

/* ---- GPUs (§1) ---- */

struct sim_gpu {
	char name[16];       /* "H100", "H200", "A100", "L40S", "MI300X" */
	double bf16_flops;   /* dense BF16/FP16 peak, FLOP/s */
	double fp8_flops;    /* dense FP8 peak; 0 = no FP8 compute (A100: FP8 becomes weight-only) */
	double int8_flops;   /* dense INT8 peak, OP/s */
	double mem_bytes;    /* device memory (decimal GB as the vendor states it) */
	double hbm_bw;       /* memory bandwidth, B/s */
	double link_bw;      /* GPU↔GPU link, unidirectional per GPU, B/s */
	double ar_alpha;     /* all-reduce latency term, s */
	double usd_per_hour; /* default on-demand $/GPU-hour (PERFMODEL's suggestion) */
	double sw_derate;    /* software-maturity derate on MFU and MBU (MI300X 0.85, else 1) */
	bool a100_mfu;       /* use the profile's mfu_bf16_a100 for BF16 GEMMs */
};

/* Looks a GPU preset up by name, case-insensitively ("h100", "H100-SXM",
 * "nvidia-h100-80gb" and "A100-80GB" are understood). NULL when unknown. */
const struct sim_gpu *sim_gpu_find(const char *name);
/* The presets, for --help and listings: i-th preset or NULL past the end. */
const struct sim_gpu *sim_gpu_get(size_t i);

/* ---- models (§2) ---- */

struct sim_model {
	char name[SIM_NAME_MAX]; /* canonical preset name, or the config's path/model id */
	uint32_t layers;         /* num_hidden_layers */
	uint32_t hidden;         /* hidden_size (d) */
	uint32_t heads;          /* num_attention_heads */
	uint32_t kv_heads;       /* num_key_value_heads */
	uint32_t head_dim;
	uint32_t ffn;          /* intermediate_size */
	uint32_t vocab;        /* vocab_size */
	uint32_t max_position; /* max_position_embeddings: the default max_model_len */
	bool tied;             /* tie_word_embeddings */
	double params;         /* total parameters (published figure, or computed) */
};

/* Fills ret from a preset: llama-3.1-8b, llama-3.1-70b, qwen2.5-7b, llama-7b,
 * llama-2-70b. Names are case-insensitive and Hugging Face ids map too
 * ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
 * "meta-llama/Meta-Llama-3-8B" -> llama-3.1-8b). -ENOENT with err listing the
 * presets when unknown. */
int sim_model_preset(const char *name, struct sim_model *ret, struct error *err);
/* The canonical preset names, NULL past the end. */
const char *sim_model_preset_name(size_t i);

/* A dense model from a Hugging Face config.json: hidden_size,
 * num_hidden_layers, num_attention_heads, num_key_value_heads (default
 * heads), head_dim (default hidden/heads), intermediate_size, vocab_size,
 * max_position_embeddings, tie_word_embeddings (default false). Parameters
 * are computed from the architecture (embeddings, attention, gated MLP,
 * norms). MoE configs (num_local_experts, num_experts) are refused. Errors
 * name the file and the field. */
int sim_model_from_hf_config(const char *path, struct sim_model *ret, struct error *err);
int sim_model_from_hf_json(const cJSON *j, const char *what, struct sim_model *ret, struct error *err);

/* Parameters computed from the architecture (what from_hf_config stores). */
double sim_model_params_from_arch(const struct sim_model *m);

/* ---- quantization and KV dtype (DESIGN.md canonical values) ---- */

enum sim_quant {
	SIM_QUANT_NONE, /* the checkpoint's native bf16 */
	SIM_QUANT_FP8,  /* W8A8 FP8; weight-only W8A16 on GPUs without FP8 compute (A100) */
	SIM_QUANT_INT8, /* W8A8 INT8 */
	SIM_QUANT_AWQ,  /* W4A16: 0.53 B/param, bf16 math, q_eff when compute-bound */
	_SIM_QUANT_MAX,
};
const char *sim_quant_to_string(enum sim_quant q);
/* "none" (also "bf16", "fp16", "auto"), "fp8", "int8", "awq" (also "w4a16",
 * "gptq", "marlin"); -EINVAL for others. */
int sim_quant_from_string(const char *s, enum sim_quant *ret);

enum sim_kv_dtype {
	SIM_KV_AUTO, /* the model dtype: 2 bytes */
	SIM_KV_FP8,  /* 1 byte ("fp8", "fp8_e4m3", "fp8_e5m2") */
	_SIM_KV_MAX,
};
const char *sim_kv_dtype_to_string(enum sim_kv_dtype k);
int sim_kv_dtype_from_string(const char *s, enum sim_kv_dtype *ret);

/* ---- efficiency profiles (§4.4, §4.5, §6) ---- */

/* Every fitted constant, by name; the JSON keys are the field names. */
struct sim_profile {
	double mfu_bf16;          /* GEMM fraction of the BF16 peak */
	double mfu_bf16_a100;     /* ... on A100 (0.65) */
	double mfu_fp8;           /* fraction of the FP8 peak */
	double mfu_int8;          /* fraction of the INT8 peak */
	double mbu_w;             /* weight streaming fraction of HBM bandwidth */
	double mbu_kv;            /* paged-attention KV read fraction */
	double f_attn;            /* attention FLOP efficiency vs the BF16 peak */
	double awq_q_eff;         /* W4A16 compute efficiency when compute-bound */
	double awq_q_eff_tokens;  /* ... applies when a step holds more tokens than this (64) */
	double busbw_frac;        /* all-reduce bus bandwidth as a fraction of the link */
	double t_fixed_ms;        /* per-step fixed overhead */
	double c_seq_us;          /* per scheduled sequence */
	double c_tok_us;          /* per scheduled token */
	double t_tp_ms;           /* per extra TP rank */
	double engine_efficiency; /* the whole step time is divided by this (1 = as modelled) */
	double ngram_seq_us;      /* n-gram proposer's host time per proposing sequence per step */
	/* memory (§4.3) */
	double act_graphs_gib; /* CUDA graphs */
	double act_base_gib;   /* non-torch memory */
	double act_nccl_gib;   /* NCCL buffers when TP > 1 */
	/* start-up (§4.5) */
	double start_proc_s; /* imports, tokenizer, workers */
	double start_tp_s;   /* extra worker/NCCL spawn when TP > 1 */
	double load_gbps;    /* weight load bandwidth, GB/s (page-cached NVMe) */
	double start_compile_s;
	double start_profile_s;
	double start_graphs_s;
};

/* The built-in profiles: "vllm" (the default) and "trtllm". -ENOENT when unknown. */
int sim_profile_preset(const char *name, struct sim_profile *ret, struct error *err);
/* Overrides fields from a JSON object {"mfu_bf16": 0.55, ...}; every value must be a
 * finite number >= 0 (efficiencies > 0); unknown keys are errors naming the key.
 * Optionally "base": "vllm"|"trtllm" resets to that preset first. what names the
 * source in messages. */
int sim_profile_apply_json(struct sim_profile *p, const cJSON *j, const char *what, struct error *err);
int sim_profile_load_file(struct sim_profile *p, const char *path, struct error *err);
/* The profile as a JSON object (every key), for the twin and --help. */
int sim_profile_to_json(const struct sim_profile *p, cJSON **ret);
/* Field table, for iteration: name of field i (NULL past the end) and its value slot. */
const char *sim_profile_field_name(size_t i);
double *sim_profile_field(struct sim_profile *p, size_t i);

/* ---- the model of one deployment ---- */

/* Everything the step time needs, resolved once (sim_perf_init) so that the
 * per-step cost is a handful of multiplications. */
struct sim_perf {
	struct sim_model model;
	struct sim_gpu gpu;
	struct sim_profile profile;
	enum sim_quant quant;
	enum sim_kv_dtype kv_dtype;
	uint32_t tp;
	uint32_t pp; /* pipeline stages: each holds layers/pp of the model on its own TP group (1) */
	/* derived */
	double p_lin;                            /* linear parameters (excl. embedding and lm_head) */
	double w_stream;                         /* bytes streamed per step over all ranks (linear + lm_head) */
	double w_resident;                       /* bytes resident over all ranks (+ untied embedding) */
	double kv_bytes_token;                   /* KV bytes per token, all ranks (2·L·Hkv·hd·kvb) */
	double kv_bytes_token_gpu;               /* per GPU (÷TP, or ÷Hkv when TP > Hkv: replicated) */
	double gemm_peak_small, gemm_peak_large; /* effective GEMM FLOP/s at T <= / > awq_q_eff_tokens */
	double bw_w, bw_kv;                      /* effective bandwidths */
	double attn_flops_rate;
	/* a speculative drafter resident beside the model (sim_perf_add_draft): its
	 * weights and its KV bytes per token, per GPU */
	double draft_weights_gpu, draft_kv_bytes_token_gpu;
};

/* Resolves a deployment. Fails (-EINVAL, err) on an impossible TP (0, or not
 * dividing the attention heads). A100 + fp8 becomes weight-only (bf16 math). */
int sim_perf_init(struct sim_perf *p, const struct sim_model *m, const struct sim_gpu *g, enum sim_quant q,
		  enum sim_kv_dtype kv, uint32_t tp, const struct sim_profile *prof, struct error *err);

/* Splits the deployment into pp pipeline stages of layers/pp layers each
 * (after sim_perf_init; pp 1 undoes it): weights and KV per GPU shrink by
 * pp, a step's work is spread over the stages and each hop between stages
 * sends the step's activations over the GPU link. -EINVAL (err) when the
 * model has fewer layers than stages. */
int sim_perf_set_pipeline(struct sim_perf *p, uint32_t pp, struct error *err);

/* A batch as the step time sees it: sums, so the hot path never walks a list. */
struct sim_batch {
	uint32_t n_decode;         /* sequences decoding one token */
	uint64_t decode_ctx_sum;   /* Σ context of the decoding sequences */
	uint32_t n_chunks;         /* prefill chunks */
	uint64_t chunk_tokens;     /* Σ c_j */
	uint64_t chunk_offset_sum; /* Σ o_j (KV already cached for the chunk's sequence) */
	double chunk_attn;         /* Σ c_j·(o_j + c_j/2) */
	/* speculative decoding: draft tokens verified beside each decoding
	 * sequence's own token, in the same forward (one logits row each) */
	uint32_t n_verify;      /* decoding sequences that verify drafts */
	uint64_t verify_tokens; /* Σ draft tokens */
	double verify_ctx;      /* Σ draft tokens × their sequence's context (attention FLOPs) */
};

static inline void sim_batch_add_decode(struct sim_batch *b, uint64_t ctx)
{
	b->n_decode++;
	b->decode_ctx_sum += ctx;
}
static inline void sim_batch_add_chunk(struct sim_batch *b, uint64_t len, uint64_t offset)
{
	b->n_chunks++;
	b->chunk_tokens += len;
	b->chunk_offset_sum += offset;
	b->chunk_attn += (double)len * ((double)offset + (double)len / 2.0);
}
/* A decoding sequence at context ctx that verifies n_draft draft tokens. */
static inline void sim_batch_add_verify(struct sim_batch *b, uint64_t ctx, uint32_t n_draft)
{
	sim_batch_add_decode(b, ctx);
	if (n_draft == 0)
		return;
	b->n_verify++;
	b->verify_tokens += n_draft;
	b->verify_ctx += (double)n_draft * ((double)ctx + (double)(n_draft + 1) / 2.0);
}
static inline uint64_t sim_batch_tokens(const struct sim_batch *b)
{
	return b->n_decode + b->chunk_tokens + b->verify_tokens;
}

struct sim_step_parts {
	double gemm, attn, comm, ovh; /* seconds, before engine_efficiency */
	double p2p;                   /* pipeline: one hop's activation transfer */
	double total;                 /* (gemm + attn + comm + ovh) / engine_efficiency; with pp stages, a micro-batch
	               * through all of them: ovh + gemm + attn + comm + (pp − 1) hops */
	double stage;                 /* how long the micro-batch holds one stage: (gemm + attn + comm) / pp + a hop,
	               * at least ovh (the scheduler prepares one micro-batch at a time); total with pp 1 */
	bool gemm_compute_bound, attn_compute_bound;
};

/* Step time in seconds of one forward (PERFMODEL §6); parts optional. An
 * empty batch costs 0. */
double sim_perf_step_time(const struct sim_perf *p, const struct sim_batch *b, struct sim_step_parts *ret_parts);

/* ---- speculative decoding (perf-spec.c; sim/PERFMODEL.md §8) ---- */

/* How drafts are proposed (vLLM's speculative_config "method"; SGLang's
 * --speculative-algorithm; llama.cpp's draft model). */
enum sim_spec_method {
	SIM_SPEC_NONE,
	SIM_SPEC_NGRAM,       /* prompt lookup: drafts copied from the context, on the CPU */
	SIM_SPEC_DRAFT_MODEL, /* a small model of the same vocabulary, run k times per step */
	SIM_SPEC_EAGLE,       /* a one-layer head on the model's hidden states (EAGLE, EAGLE-3) */
	SIM_SPEC_MTP,         /* the model's own multi-token-prediction layer */
	_SIM_SPEC_MAX,
};
const char *sim_spec_method_to_string(enum sim_spec_method m);
/* "none", "ngram" ("[ngram]", "ngram_gpu"), "draft_model" ("draft", "standalone"),
 * "eagle" ("eagle3"), "mtp" ("deepseek_mtp", "nextn"); case-insensitive. -EINVAL
 * for others. */
int sim_spec_method_from_string(const char *s, enum sim_spec_method *ret);

#define SIM_SPEC_MAX_TOKENS 16

/* How often drafts are accepted: the conditional acceptance of each draft
 * position given that every earlier one was accepted. One number α is the
 * i.i.d. case of Leviathan et al. (2023); a curve is what vLLM's
 * per-position counters show (vllm:spec_decode_num_accepted_tokens_per_pos /
 * num_drafts: the unconditional rate of each position, non-increasing),
 * turned into conditional rates, the last ratio carried on to longer drafts. */
struct sim_spec_acceptance {
	uint32_t n;                       /* positions given; 0: the method's default */
	double cond[SIM_SPEC_MAX_TOKENS]; /* P(position i accepted | 0..i−1 accepted) */
};

/* Parses "0.7" (α for every position) or "0.8,0.62,0.5" (per-position
 * rates, each in (0, 1] and not above the one before). Errors name the
 * item. */
int sim_spec_acceptance_parse(const char *text, struct sim_spec_acceptance *ret, struct error *err);
/* The same from JSON: a number or an array of numbers. */
int sim_spec_acceptance_from_json(const cJSON *j, const char *what, struct sim_spec_acceptance *ret, struct error *err);
/* The acceptance a method has when the workload does not say: published
 * typical figures (sim/PERFMODEL.md §8). */
void sim_spec_acceptance_default(enum sim_spec_method m, struct sim_spec_acceptance *ret);
/* The conditional acceptance of draft position i (0-based). */
double sim_spec_acceptance_at(const struct sim_spec_acceptance *a, uint32_t i);
/* Expected tokens a sequence emits per step with k drafts: 1 + E[accepted]
 * = Σ_{i=0..k} Π_{j<i} α_j; (1 − α^(k+1)) / (1 − α) for one α. */
double sim_spec_expected_tokens(const struct sim_spec_acceptance *a, uint32_t k);
/* "0.7" or "0.80,0.62,0.50" (unconditional per-position rates) into buf. */
void sim_spec_acceptance_format(const struct sim_spec_acceptance *a, uint32_t k, char *buf, size_t size);

/* The drafter of a deployment, resolved once. */
struct sim_spec {
	enum sim_spec_method method;
	uint32_t k;              /* draft tokens per step (num_speculative_tokens) */
	struct sim_perf draft;   /* draft_model / eagle / mtp: the drafter's own roofline */
	double ngram_seq_usec;   /* ngram: host time per proposing sequence per step */
	double draft_step_fixed; /* s of launch overhead per drafting forward (graphs replayed) */
};

/* Resolves a drafter for the deployment p: for draft_model the drafter is
 * draft_model (a preset or config; its TP draft_tp, 1 or p's TP as vLLM
 * allows); EAGLE and MTP heads are one decoder layer of p's model (plus
 * EAGLE's fc over two hidden states) that share its embeddings and lm_head.
 * Adds the drafter's weights and KV bytes to p's memory (p->draft_*).
 * -EINVAL (err, in vLLM's words) for k outside 1..SIM_SPEC_MAX_TOKENS, a
 * draft TP vLLM refuses, a draft model with another vocabulary. */
int sim_spec_init(struct sim_spec *s, struct sim_perf *p, enum sim_spec_method m, uint32_t k,
		  const struct sim_model *draft_model, uint32_t draft_tp, struct error *err);

/* Seconds the drafter adds to a step: for n_seqs sequences that sample in
 * it (at Σ context ctx_sum), k drafting forwards of one token each, plus
 * the drafter's pass over the step's prompt chunks (chunk_tokens); ngram:
 * the CPU lookups. 0 without a drafter. */
double sim_spec_draft_time(const struct sim_spec *s, uint32_t n_seqs, uint64_t ctx_sum, uint64_t chunk_tokens);

/* The fraction of a prompt's positions whose preceding bigram occurred
 * earlier in it: how often prompt lookup finds a continuation to propose
 * (0 for random token ids; high for text that repeats itself). */
double sim_spec_lookup_rate(const uint32_t *ids, uint32_t n);

/* ---- memory, KV capacity and start-up checks (§4.3; perf-memory.c) ---- */

/* How an engine sizes its KV cache and what it refuses at start-up. The
 * engines differ: vLLM and TGI give the KV cache what is left of
 * memory × fraction after the weights and the profiled activation peak;
 * SGLang's --mem-fraction-static holds weights and KV together, activations
 * live outside it; TensorRT-LLM gives the KV cache a fraction of the memory
 * free after the model and its activations; llama.cpp allocates the whole
 * --ctx-size up front, with no fraction at all. */
enum sim_memory_rules {
	SIM_MEMORY_VLLM,
	SIM_MEMORY_SGLANG,
	SIM_MEMORY_TGI,
	SIM_MEMORY_TRTLLM,
	SIM_MEMORY_LLAMACPP,
};

struct sim_memory_policy {
	enum sim_memory_rules rules;
	double fraction;    /* vLLM gpu_memory_utilization, SGLang mem_fraction_static, TGI cuda_memory_fraction,
	                     * TensorRT-LLM kv_cache_free_gpu_memory_fraction; unused by llama.cpp */
	uint64_t kv_tokens; /* llama.cpp: the context allocated (--ctx-size) */
	bool fail_fast;     /* TensorRT-LLM: refuse, not shorten, a max_seq_len the KV cache cannot hold */
};

/* Memory a GPU holds back from any process (CUDA context, allocator slack). */
#define SIM_CUDA_RESERVED_BYTES (0.5 * SIM_GIB)

struct sim_memory {
	double budget;   /* what the engine may use per GPU (mem × fraction, or all of it) */
	double weights;  /* resident weights per GPU */
	double act_peak; /* activation + graphs + non-torch (+ NCCL) per GPU */
	double kv_avail; /* what the KV cache gets (may be negative: nothing) */
	double kv_bytes_token_gpu;
	uint64_t num_blocks; /* KV blocks of block_size tokens */
	uint64_t kv_tokens;  /* num_blocks · block_size */
	uint32_t block_size;
};

void sim_perf_memory(const struct sim_perf *p, const struct sim_memory_policy *policy, uint32_t max_num_batched_tokens,
		     uint32_t max_num_seqs, uint32_t block_size, struct sim_memory *ret);

/* Why an engine would not start, as a fact the dialects word their own way. */
enum sim_startup_cause {
	SIM_STARTUP_OK,
	SIM_STARTUP_CONFIG,       /* a refused argument combination (TP, lengths, fractions) */
	SIM_STARTUP_WEIGHTS,      /* the weights do not fit the GPU: CUDA OOM while loading */
	SIM_STARTUP_KV_CACHE,     /* the KV cache cannot hold one max_model_len sequence */
	SIM_STARTUP_CACHE_BLOCKS, /* nothing left for KV cache blocks after weights and activations */
};

struct sim_startup_check {
	enum sim_startup_cause cause;
	struct sim_memory mem;
	uint32_t max_model_len;      /* as asked */
	uint32_t max_model_len_used; /* what the engine serves: shortened by SGLang and TensorRT-LLM when the
	                              * KV cache is smaller */
	uint64_t est_max_model_len;  /* KV_CACHE: the longest length that fits (0 = none) */
	double kv_need;              /* KV_CACHE: bytes one max_model_len sequence needs per GPU */
};

/* The start-up refusals of the policy's engine (sim_perf_check_startup
 * writes vLLM's wording into err for every policy; the server's dialects
 * word ret_check->cause their own way):
 *  - TP > gpus, TP not dividing the attention heads, max_model_len above the
 *    model's max_position_embeddings, a fraction above 1, vLLM's
 *    max_num_batched_tokens < max_num_seqs (-EINVAL, SIM_STARTUP_CONFIG);
 *  - weights over the GPU's memory (-EFBIG, SIM_STARTUP_WEIGHTS);
 *  - no memory for cache blocks (-ENOMEM, SIM_STARTUP_CACHE_BLOCKS);
 *  - a KV cache that cannot hold one max_model_len sequence (-ENOSPC,
 *    SIM_STARTUP_KV_CACHE), except where the engine shortens max_model_len.
 * ret_check may be NULL. */
int sim_perf_check_startup(const struct sim_perf *p, const struct sim_memory_policy *policy, uint32_t gpus,
			   uint32_t max_model_len, uint32_t max_num_seqs, uint32_t max_num_batched_tokens,
			   struct sim_startup_check *ret_check, struct error *err);

/* Start-up time in seconds (§4.5, warm caches): process + weights/load_bw + compile + profile +
 * graphs. */
double sim_perf_startup_sec(const struct sim_perf *p);

/* The start-up time model of a host (off by default): the weights read from
 * storage at weights_read_gbps, the engine's own initialisation (imports,
 * workers, compilation, profiling: init_seconds, plus 5 s per TP rank above
 * 1) and the CUDA graph capture. */
struct sim_startup_model {
	bool enabled;
	double weights_read_gbps;     /* 2 (a warm page cache reads ~10) */
	double init_seconds;          /* 20 */
	double graph_capture_seconds; /* 15 */
};

#define SIM_STARTUP_TP_RANK_SECONDS 5.0

struct sim_startup_phases {
	double weights_s, init_s, graphs_s; /* in start-up order: init (first half), weights, init (rest), graphs */
	double total_s;
	double weights_gb; /* all ranks, decimal GB as storage counts */
};

void sim_startup_model_init(struct sim_startup_model *m);
/* The phases for a deployment; deterministic, so that virtual time can charge exactly this. */
void sim_startup_model_phases(const struct sim_perf *p, const struct sim_startup_model *m,
			      struct sim_startup_phases *ret);

/* The defaults vLLM's OpenAI server picks (PERFMODEL §4.1): 8192/1024 on >= 70 GiB GPUs other
 * than A100, else 2048/256. */
void sim_perf_default_batch(const struct sim_gpu *g, uint32_t *ret_max_num_batched_tokens, uint32_t *ret_max_num_seqs);
