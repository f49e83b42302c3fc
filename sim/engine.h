/* engine.h — a discrete-event model of one vLLM V1 engine replica (no I/O,
 * no clock of its own).
 *
 * The caller owns time: it submits requests at "now", asks when the step in
 * flight ends (sim_engine_next_event_usec) and calls sim_engine_advance(now)
 * when that time has come. The engine completes every step that ended at or
 * before now, calling back for each token with the step's scheduled end time,
 * and starts the next step at the previous step's END (not at now), so a late
 * real-time caller catches up on absolute deadlines and a virtual-time caller
 * gets exact results. The same code serves goodput-sim's real-time server and
 * the virtual-time `simulate` mode.
 *
 * Scheduler (PERFMODEL §4.1, vLLM V1): each step fills a token budget
 * (max_num_batched_tokens) with RUNNING requests first in FCFS order (decode =
 * 1 token; partially prefilled = min(remaining, budget)), then WAITING ones
 * while budget remains and fewer than max_num_seqs run, chunking prompts. The
 * first token is sampled at the end of the step that holds the last prompt
 * chunk. KV cache in 16-token blocks; when a block cannot be had the NEWEST
 * running request is preempted by recompute. Prefix caching (on by default)
 * hashes full blocks of prompt token ids; freed blocks stay cached in LRU
 * order until reused. Per-step log-normal jitter (seeded).
 *
 * Beyond one TP group (PERFMODEL §9, §10): --data-parallel-size N runs N
 * such replicas, each with its own scheduler and KV cache (so its own
 * prefix cache), behind the one front end, which sends each request to a
 * replica by the engine's rule (enum sim_dp_balance); --pipeline-parallel-
 * size P splits the layers into P stages and keeps up to P micro-batches in
 * flight, each of other requests, a new one entering when the first stage
 * is free — one request alone waits for its micro-batch to pass every
 * stage (the bubble). Speculative decoding (§8): each decoding sequence
 * verifies k drafts with its own token in one forward; the accepted prefix
 * plus one token is emitted at the step's end, each position accepted with
 * its conditional rate (n-gram drafts only where prompt lookup finds a
 * continuation).
 *
 * Disaggregated (PERFMODEL §12; engine-pd.c): with prefill and decode
 * workers set (struct sim_pd_config) the engine is P prefill workers and D
 * decode workers, each of its own TP and batch limits, behind the engine's
 * proxy: a request is prefilled on a prefill worker (as vLLM's proxy asks
 * it, one output token that is dropped), its KV cache crosses the
 * interconnect (transfer time from its bytes and the link, one transfer at a
 * time into each decode worker), and a decode worker computes the last
 * prompt token again and decodes from there, never holding a prompt chunk
 * beside its decodes. A decode role on its own takes such requests with
 * sim_engine_submit_kv. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "perfmodel.h"

#define SIM_BLOCK_SIZE 16

struct sim_engine;

/* How a data-parallel engine spreads requests over its replicas. */
enum sim_dp_balance {
	SIM_DP_SCORE,          /* vLLM: the fewest waiting × 4 + running (v1/engine/core_client.py) */
	SIM_DP_ROUND_ROBIN,    /* SGLang's default --load-balance-method */
	SIM_DP_SHORTEST_QUEUE, /* SGLang's shortest_queue: the fewest requests in the replica */
	_SIM_DP_BALANCE_MAX,
};

/* The interconnect a KV cache crosses from a prefill to a decode worker. */
enum sim_interconnect {
	SIM_LINK_AUTO,       /* the GPU's own GPU-to-GPU link: NVLink (xGMI), or PCIe where it has none */
	SIM_LINK_NVLINK,     /* within a node */
	SIM_LINK_PCIE,       /* within a node, through the host's PCIe switches */
	SIM_LINK_INFINIBAND, /* across nodes: one RDMA NIC per GPU */
	SIM_LINK_ETHERNET,   /* across nodes over TCP (25 Gb/s) */
	_SIM_LINK_MAX,
};
const char *sim_interconnect_to_string(enum sim_interconnect i);
/* "nvlink", "pcie", "infiniband" ("ib"), "ethernet"; "auto". -EINVAL for others. */
int sim_interconnect_from_string(const char *s, enum sim_interconnect *ret);

/* What one KV transfer costs on a link (resolved from the GPU and the interconnect). */
struct sim_link {
	enum sim_interconnect kind; /* never AUTO once resolved */
	double bw;                  /* effective bytes/s through one GPU's link or NIC, one direction */
	double latency_s;           /* per transfer: the hand-off between the workers */
};
/* gbps > 0 replaces the preset's raw bandwidth (GB/s, one direction, per GPU). */
void sim_link_resolve(const struct sim_gpu *g, enum sim_interconnect i, double gbps, struct sim_link *ret);
/* Seconds to move the KV cache of n_tokens (kv_bytes_token bytes each, all
 * ranks) from a worker of tp_src GPUs to one of tp_dst: each GPU of the
 * smaller group moves its share over its own link. */
double sim_link_transfer_seconds(const struct sim_link *l, double kv_bytes_token, uint64_t n_tokens, uint32_t tp_src,
				 uint32_t tp_dst);

/* Disaggregated prefill and decode: both worker counts > 0 turn it on. */
struct sim_pd_config {
	uint32_t prefill_workers, decode_workers; /* P, D */
	uint32_t prefill_tp, decode_tp;           /* each worker's TP (0: the engine's tp) */
	/* each side's batch limits (0: the engine's max_num_seqs / max_num_batched_tokens) */
	uint32_t prefill_max_num_seqs, prefill_max_num_batched_tokens;
	uint32_t decode_max_num_seqs, decode_max_num_batched_tokens;
};

static inline bool sim_pd_enabled(const struct sim_pd_config *pd)
{
	return pd->prefill_workers > 0 && pd->decode_workers > 0;
}

/* What goodput-sim is asked to emulate. Fill with sim_engine_config_init(),
 * set fields (or apply command-line flags), then sim_engine_config_resolve(). */
struct sim_engine_config {
	/* inputs (names; resolved into model/gpu/profile below) */
	char model_name[SIM_NAME_MAX]; /* preset or HF id; also the served model name */
	char model_config_path[1024];  /* HF config.json; "" = use the preset */
	char gpu_name[16];
	char profile_name[16];           /* "vllm" | "trtllm" */
	char profile_path[1024];         /* JSON overrides; "" = none */
	uint32_t gpus;                   /* GPUs on the emulated host (0 = DP × TP × PP) */
	uint32_t tp;                     /* --tensor-parallel-size (default 1) */
	uint32_t pp;                     /* --pipeline-parallel-size: stages of layers (default 1) */
	uint32_t dp;                     /* --data-parallel-size: replicas behind the one endpoint (default 1) */
	enum sim_dp_balance dp_balance;  /* how requests go to replicas */
	uint32_t max_num_seqs;           /* 0 = vLLM's default for the GPU */
	uint32_t max_num_batched_tokens; /* 0 = vLLM's default for the GPU */
	uint32_t max_model_len;          /* 0 = the model's max_position_embeddings */
	enum sim_quant quant;
	enum sim_kv_dtype kv_dtype;
	double gpu_memory_utilization;      /* 0.9: the engine's memory fraction (its meaning: memory_rules) */
	enum sim_memory_rules memory_rules; /* whose KV sizing and start-up refusals (vLLM's) */
	uint64_t kv_tokens_fixed;           /* llama.cpp: the whole context allocated (0 = max_model_len) */
	bool kv_fail_fast;                  /* TensorRT-LLM: refuse a max_seq_len the KV cache cannot hold */
	struct sim_startup_model startup;   /* off: the §4.5 estimate × startup_scale */
	bool enable_prefix_caching;         /* true */
	/* speculative decoding (off: spec_method SIM_SPEC_NONE) */
	enum sim_spec_method spec_method;
	uint32_t spec_tokens;                       /* k, draft tokens per step */
	uint32_t spec_draft_tp;                     /* the draft model's TP (0 = the model's) */
	char spec_draft_model[SIM_NAME_MAX];        /* draft_model: a preset or HF id */
	struct sim_spec_acceptance spec_acceptance; /* n = 0: the method's default */
	uint32_t long_prefill_token_threshold;      /* 0 = off */
	uint64_t seed;
	double jitter_sigma; /* log-normal sigma per step (0.03) */
	/* faults (off by default) */
	double extra_jitter_sigma;      /* extra log-normal sigma per step */
	double fault_step_usec;         /* extra cost of every step, µs */
	double fault_step_per_seq_usec; /* extra µs per scheduled sequence, growing with the batch:
	                                  * n_seq² / 64 × this (a cost shape the model does not have) */
	double startup_scale;           /* multiplies the §4.5 start-up time (1 = realistic) */
	/* sim_simulate records no inter-token latencies (a result without ITL
	 * figures): for callers that read none, such as the digital twin, whose
	 * runs spent a third of their time on the percentiles of every gap */
	bool no_itl;
	/* disaggregated serving, and the link a KV cache crosses between workers */
	struct sim_pd_config pd;
	enum sim_interconnect interconnect;
	double interconnect_gbps; /* > 0: the link's raw GB/s (one direction, per GPU) instead of the preset's */

	/* resolved (sim_engine_config_resolve fills these from the names; a caller such
	 * as the digital twin may then edit profile before sim_engine_new) */
	bool resolved;
	struct sim_model model;
	struct sim_gpu gpu;
	struct sim_profile profile;
	struct sim_model draft_model; /* spec_method draft_model */
};

const char *sim_dp_balance_to_string(enum sim_dp_balance b);
int sim_dp_balance_from_string(const char *s, enum sim_dp_balance *ret);

/* The GPUs a configuration occupies: DP × TP × PP; disaggregated, P × TP_p + D × TP_d. */
uint32_t sim_engine_config_gpus(const struct sim_engine_config *c);

/* Defaults: llama-3.1-8b on 1×H100, TP 1, bf16, auto KV, gmu 0.9, profile vllm,
 * prefix caching on, jitter 3 %, seed 0, startup_scale 1. */
void sim_engine_config_init(struct sim_engine_config *c);

/* Applies one engine flag, given as "--name" or "name" with its value:
 * --model, --model-config, --gpu, --gpus, --max-num-seqs,
 * --max-num-batched-tokens, --quantization, --kv-cache-dtype,
 * --tensor-parallel-size (-tp), --gpu-memory-utilization, --max-model-len,
 * --profile, --profile-file, --seed, --jitter, --enable-prefix-caching,
 * --no-enable-prefix-caching (value ignored), --long-prefill-token-threshold,
 * --startup-model (no value), --weights-read-gbps, --init-seconds,
 * --graph-capture-seconds; parallelism: --data-parallel-size (-dp),
 * --pipeline-parallel-size (-pp), --dp-load-balance score|round_robin|
 * shortest_queue; speculative decoding: --speculative-config JSON (vLLM's:
 * method, num_speculative_tokens, model, draft_tensor_parallel_size;
 * prompt_lookup_* accepted), or its parts --spec-method, --spec-tokens,
 * --spec-draft-model, --spec-draft-tp, --spec-acceptance RATE|CURVE;
 * --prefix-caching on|off; disaggregated: --prefill-workers, --decode-workers,
 * --prefill-tp, --decode-tp, --prefill-max-num-seqs,
 * --prefill-max-num-batched-tokens, --decode-max-num-seqs,
 * --decode-max-num-batched-tokens, --interconnect nvlink|pcie|infiniband|
 * ethernet|auto, --interconnect-gbps G.
 * Returns 1 when applied, 0 when the flag is not an engine flag, negative errno
 * with err naming flag and value when the value is bad. Clears `resolved`. */
int sim_engine_config_apply_flag(struct sim_engine_config *c, const char *flag, const char *value, struct error *err);
/* The engine flag of a search-space knob, as the sim reads it: its name
 * with dashes, "_parallel" knobs as "--…-parallel-size" (tensor_parallel →
 * --tensor-parallel-size, spec_tokens → --spec-tokens, prefix_caching →
 * --prefix-caching). NULL when buf is too small. The dry run and the twin
 * apply a configuration's knobs with it (a flag the sim does not know is
 * an engine-specific knob with no effect in virtual time). */
const char *sim_knob_flag(const char *knob, char *buf, size_t size);
/* Whether flag (as above) takes a value (all but --no-enable-prefix-caching,
 * --enable-prefix-caching and --startup-model). */
bool sim_engine_flag_takes_value(const char *flag);
/* One help line per engine flag, indented two spaces. */
void sim_engine_flags_help(FILE *out);

/* Loads the model (preset or config file), the GPU and the profile (+file),
 * and fills defaults that depend on them (max_num_seqs, max_num_batched_tokens,
 * max_model_len, gpus). Idempotent on a resolved config. */
int sim_engine_config_resolve(struct sim_engine_config *c, struct error *err);

/* What the engine derived at start-up (for logs, /metrics, /v1/models). */
struct sim_engine_info {
	struct sim_memory memory;
	struct sim_startup_check check;
	uint32_t max_model_len; /* served: shortened where the engine does that (check.max_model_len_used) */
	uint32_t max_num_seqs, max_num_batched_tokens;
	uint64_t startup_usec;             /* the start-up model's total, or the §4.5 time × startup_scale */
	struct sim_startup_phases startup; /* the start-up model's phases (zero when it is off) */
	double usd_per_hour;               /* GPU price × the GPUs it holds (DP × TP × PP) */
	double weights_gib;                /* per GPU (the drafter's share included) */
	uint32_t replicas;                 /* data-parallel replicas */
	uint32_t spec_k;                   /* draft tokens per step (0: no speculation) */
	double spec_expected_tokens;       /* 1 + E[accepted] per sequence-step with drafts */
	uint32_t prefill_replicas;         /* disaggregated: replicas [0, prefill_replicas) prefill, the rest decode */
};

/* Callbacks, all optional. Times are the engine's (virtual or CLOCK_MONOTONIC) µs. */
struct sim_engine_callbacks {
	/* Output token `index` (0 = first) of req_id, sampled by the step that ended at
	 * time_usec. last: the request finished with this token. */
	void (*token)(void *userdata, uint64_t req_id, uint32_t index, uint64_t time_usec, bool last);
	/* After the last token: the request is gone from the engine (its id may be reused).
	 * n_cached: prompt tokens served from the prefix cache at its (last) admission. */
	void (*finished)(void *userdata, uint64_t req_id, uint64_t time_usec, uint32_t n_prompt, uint32_t n_output,
			 uint32_t n_cached);
	/* req_id's first step starts at time_usec: it leaves the waiting queue
	 * (vLLM's scheduled_ts; called once per request, not again after a preemption). */
	void (*scheduled)(void *userdata, uint64_t req_id, uint64_t time_usec);
	/* req_id was preempted (recompute) by the step starting at time_usec. */
	void (*preempted)(void *userdata, uint64_t req_id, uint64_t time_usec);
	/* A step was scheduled: it runs from start_usec to end_usec with batch b. */
	void (*step)(void *userdata, uint64_t start_usec, uint64_t end_usec, const struct sim_batch *b);
};

/* Creates an engine: resolves the config when needed and runs vLLM's start-up
 * checks (weights fit, KV holds one max_model_len sequence, TP vs heads and
 * GPUs), failing with vLLM's wording in err. The config is copied. */
int sim_engine_new(const struct sim_engine_config *c, const struct sim_engine_callbacks *cb, void *userdata,
		   struct sim_engine **ret, struct error *err);
struct sim_engine *sim_engine_free(struct sim_engine *e);

/* The start-up checks sim_engine_new runs, as a fact: resolves a copy of the
 * config and fills ret_check (cause SIM_STARTUP_OK when it would start).
 * Returns sim_engine_new's error for the same config, 0 when it starts;
 * errors resolving the config (an unknown model) leave ret_check untouched. */
int sim_engine_check_startup(const struct sim_engine_config *c, struct sim_startup_check *ret_check, struct error *err);
/* The start-up time a config takes (what sim_engine_new puts in
 * info.startup_usec), for a virtual-time runner to charge it; 0 when the
 * config does not resolve. */
uint64_t sim_engine_startup_usec(const struct sim_engine_config *c, struct sim_startup_phases *ret_phases);

const struct sim_engine_info *sim_engine_get_info(const struct sim_engine *e);
const struct sim_engine_config *sim_engine_get_config(const struct sim_engine *e);
const struct sim_perf *sim_engine_get_perf(const struct sim_engine *e);

/* Queues a request that arrived at now_usec. prompt_ids (n_prompt ids, may be
 * NULL: a prompt that shares nothing) is only read during the call. Errors:
 * -EEXIST for a req_id in the engine, -EINVAL for n_prompt or max_tokens 0,
 * -E2BIG when n_prompt + max_tokens > max_model_len (err has vLLM's wording).
 * The first step may start only at a later sim_engine_advance(). */
int sim_engine_submit(struct sim_engine *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
		      uint32_t max_tokens, uint64_t now_usec, struct error *err);

/* The client went away: drops the request wherever it is and frees its blocks
 * (no callbacks). -ENOENT when the engine does not hold req_id. */
int sim_engine_abort(struct sim_engine *e, uint64_t req_id);

/* End of the step in flight; or, when idle with queued work, the time the next
 * step may start; UINT64_MAX when there is nothing to do. */
uint64_t sim_engine_next_event_usec(const struct sim_engine *e);

/* Queues a request whose prompt a prefill worker of tp_src GPUs computed:
 * its KV cache arrives over the engine's link after the transfer time
 * (behind any transfer still going into the same replica), then the request
 * waits for a step like any other, the KV of its prompt already held, and
 * its first step computes the last prompt token to sample the first output
 * token. *ret_ready_usec (may be NULL) gets when the KV arrived. Errors as
 * sim_engine_submit. */
int sim_engine_submit_kv(struct sim_engine *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
			 uint32_t max_tokens, uint32_t tp_src, uint64_t now_usec, uint64_t *ret_ready_usec,
			 struct error *err);

/* The replica a request went to (0 without data parallelism; disaggregated,
 * the decode replicas follow the prefill ones); -ENOENT when the engine does
 * not hold it. */
int sim_engine_replica_of(const struct sim_engine *e, uint64_t req_id);

/* Completes every step ending at or before now_usec (emitting callbacks),
 * starting each next step at the previous one's end; when idle, starts a step
 * at max(now_usec of arrival, previous end) if work is queued. Returns the
 * number of steps completed. Callbacks may call sim_engine_abort and
 * sim_engine_submit. */
int sim_engine_advance(struct sim_engine *e, uint64_t now_usec);

struct sim_engine_stats {
	uint32_t running, waiting;
	uint64_t num_blocks, used_blocks; /* used: held by requests (cached free blocks are not used) */
	double kv_usage;                  /* used_blocks / num_blocks, 0..1 */
	uint64_t preemptions;             /* total */
	uint64_t prompt_tokens;           /* total prompt tokens of requests that got their first token */
	uint64_t generation_tokens;       /* total output tokens */
	uint64_t prefix_cache_queries;    /* prompt tokens looked up */
	uint64_t prefix_cache_hits;       /* of those, served from the cache */
	uint64_t steps;
	uint64_t busy_usec; /* Σ step durations */
	/* speculative decoding, as vLLM counts it (vllm:spec_decode_*) */
	uint64_t spec_drafts;       /* sequence-steps that verified drafts */
	uint64_t spec_draft_tokens; /* draft tokens verified */
	uint64_t spec_accepted;     /* of them, accepted */
	uint64_t spec_accepted_per_pos[SIM_SPEC_MAX_TOKENS];
	uint64_t requests_finished, requests_aborted;
	uint32_t last_step_tokens, last_step_seqs;
	uint64_t last_step_usec;
};
void sim_engine_get_stats(const struct sim_engine *e, struct sim_engine_stats *ret);
/* One replica's (i < info.replicas); running/waiting/KV are its own. */
void sim_engine_get_replica_stats(const struct sim_engine *e, uint32_t i, struct sim_engine_stats *ret);
