/* workload.h — the requests a benchmark sends, and when (curl-free).
 *
 * One generator serves both the probe (which sends the requests to a real
 * server) and goodput-sim's virtual-time mode (which feeds them to the engine
 * model), so for the same config and seed both see exactly the same prompts,
 * lengths and arrival times.
 *
 * Token-id prompts: a synthetic prompt of input_len tokens is an array of
 * token ids drawn from the seed (ids in [PROBE_TOKEN_ID_MIN, PROBE_TOKEN_ID_MAX)),
 * sent as `"prompt": [ids...]` where the server accepts it, so no tokenizer is
 * needed. Text prompts follow the *word rule*: a text's length in tokens is its
 * number of whitespace-separated words, and the text form of a token-id prompt
 * is one word per id ("w<id>"). goodput-sim counts text prompts by the same
 * rule, so lengths agree exactly against the sim.
 *
 * Prefix sharing: with prefix_len K > 0 and prefix_group_size N > 0, requests
 * 0..N-1 share one K-token prefix, N..2N-1 another, and so on; the rest of
 * each prompt is unique. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define PROBE_TOKEN_ID_MIN            1000u
#define PROBE_TOKEN_ID_MAX            30000u
#define PROBE_MAX_TOKENS_PER_REQUEST  (1u << 20)
#define PROBE_MAX_REQUESTS            10000000u
#define PROBE_MAX_TOTAL_PROMPT_TOKENS (UINT64_C(1) << 28) /* 1 GiB of ids */
#define PROBE_MAX_DATASET_BYTES       (UINT64_C(2) << 30)
#define PROBE_MAX_DATASET_LINE        (16u << 20)

enum probe_dataset {
	PROBE_DATASET_RANDOM,   /* synthetic lengths from input/output distributions */
	PROBE_DATASET_SHAREGPT, /* ShareGPT-format JSON: conversations[0] human -> gpt */
	PROBE_DATASET_CUSTOM,   /* JSONL: {"prompt": "...", "output_len": N?} per line */
};

enum probe_dist {
	PROBE_DIST_FIXED,     /* always mean */
	PROBE_DIST_UNIFORM,   /* integers in [⌊mean·(1−range_ratio)⌋, ⌈mean·(1+range_ratio)⌉], as vLLM's
	                       * current --random-range-ratio */
	PROBE_DIST_NORMAL,    /* mean, stddev; clamped to [min, max] */
	PROBE_DIST_LOGNORMAL, /* median = mean, sigma = stddev (of the log); clamped to [min, max] */
};

struct probe_length_dist {
	enum probe_dist kind;
	double mean;
	double range_ratio; /* uniform only, in [0, 1) */
	double stddev;      /* normal: tokens; lognormal: sigma of ln(length) */
	uint32_t min, max;  /* clamp; 0 = 1 and PROBE_MAX_TOKENS_PER_REQUEST */
};

enum probe_arrival {
	PROBE_ARRIVAL_POISSON,  /* exponential gaps at request_rate (gamma with burstiness 1) */
	PROBE_ARRIVAL_GAMMA,    /* gamma gaps, shape = burstiness, mean 1/request_rate (as vLLM) */
	PROBE_ARRIVAL_CONSTANT, /* exactly 1/request_rate apart */
	PROBE_ARRIVAL_INF,      /* all at time 0 (vLLM's --request-rate inf) */
};

struct probe_workload_config {
	enum probe_dataset dataset;
	const char *dataset_path; /* sharegpt/custom */
	struct probe_length_dist input, output;
	uint32_t num_prompts; /* measured requests */
	uint32_t num_warmup;  /* extra requests first, excluded from results */
	enum probe_arrival arrival;
	double request_rate;        /* requests/s; ignored for INF */
	double burstiness;          /* gamma shape; 1 = Poisson */
	uint32_t max_concurrency;   /* 0 = open loop; else at most this many in flight (closed loop when rate is INF) */
	uint32_t prefix_len;        /* K shared tokens; 0 = none */
	uint32_t prefix_group_size; /* N requests per shared prefix */
	bool ignore_eos;
	uint64_t seed;
	/* additions */
	uint32_t dataset_output_len; /* sharegpt/custom: fixed output length; 0 = from the dataset */
	bool lengths_only;           /* no prompt_ids (virtual-time simulation needs lengths only) */
};

struct probe_request_spec {
	uint32_t index; /* 0-based; warm-up requests come first */
	bool warmup;
	uint64_t arrival_usec; /* offset from the benchmark's start (0 for INF) */
	uint32_t input_len;    /* tokens, by the word rule for text prompts */
	uint32_t output_len;   /* max_tokens to ask for */
	uint32_t *prompt_ids;  /* input_len ids, or NULL for dataset text prompts */
	char *prompt_text;     /* dataset prompts; NULL for synthetic ones */
	uint32_t prefix_id;    /* requests with equal prefix_id (> 0) share prefix_len leading tokens */
};

struct probe_workload {
	struct probe_workload_config config; /* copy; dataset_path not owned */
	struct probe_request_spec *requests;
	size_t n_requests; /* num_warmup + num_prompts */
};

/* Fills cfg with vLLM bench serve's defaults: random dataset, fixed 1024 in /
 * 128 out, 1000 prompts, Poisson at infinite rate (i.e. INF), seed 0.
 *
 * Generation rules (vLLM's random dataset where it has one):
 * - input_len = prefix_len + a draw from cfg->input (so the shared prefix
 *   comes on top of the drawn length, as vLLM's --random-prefix-len);
 *   prefix_group_size 0 with prefix_len > 0 means every request shares one
 *   prefix (vLLM's behaviour). Prefix groups count over all requests,
 *   warm-ups included.
 * - lengths, prompt ids and arrival gaps come from three independent PRNG
 *   streams derived from the seed, so changing the rate keeps the prompts.
 * - arrival_usec: warm-up requests have 0 (the caller runs them before the
 *   measured run and waits for them); measured requests start at 0 and follow
 *   the arrival process from there.
 * - sharegpt: the valid entries (a "human" turn followed by a "gpt" turn) are
 *   shuffled with the seed (as vLLM) and taken in order, reused cyclically when
 *   there are fewer than needed; output_len = words of the gpt reply unless
 *   dataset_output_len is set. custom (JSONL): lines in file order, reused
 *   cyclically; output_len from the line, else dataset_output_len, else a
 *   draw from cfg->output.
 * - caps: num_warmup + num_prompts <= PROBE_MAX_REQUESTS, total prompt ids
 *   <= PROBE_MAX_TOTAL_PROMPT_TOKENS, dataset files <= PROBE_MAX_DATASET_BYTES,
 *   a JSONL line <= PROBE_MAX_DATASET_LINE bytes. */
void probe_workload_config_init(struct probe_workload_config *cfg);

/* Generates the requests. Deterministic in (cfg, seed). Dataset errors name
 * the file, the line (JSONL) or entry (ShareGPT) and the field. */
int probe_workload_generate(const struct probe_workload_config *cfg, struct probe_workload **ret, struct error *err);
struct probe_workload *probe_workload_free(struct probe_workload *w);

/* The text form of a request's prompt (dataset text, or "w<id> w<id> ..."):
 * a new string the caller frees. */
char *probe_request_prompt_text(const struct probe_request_spec *r);

/* Number of tokens in a text by the word rule. */
uint32_t probe_count_words(const char *text);

/* Names for flags and JSON: "random"/"sharegpt"/"custom", "fixed"/"uniform"/
 * "normal"/"lognormal", "poisson"/"gamma"/"constant"/"inf"; the parsers return
 * the enum value or -EINVAL. */
const char *probe_dataset_name(enum probe_dataset d);
const char *probe_dist_name(enum probe_dist d);
const char *probe_arrival_name(enum probe_arrival a);
int probe_dataset_from_name(const char *s);
int probe_dist_from_name(const char *s);
int probe_arrival_from_name(const char *s);
