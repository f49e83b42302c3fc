/* prom-map.h — which of a server's metrics mean what: the canonical series
 * the probe records (requests running and waiting, KV-cache usage,
 * preemptions, prompt and generation tokens) and, for each, the names an
 * engine exports them under.
 *
 * Speculative decoding's counters (vLLM's vllm:spec_decode_num_drafts,
 * ..._num_draft_tokens, ..._num_accepted_tokens) give a load point's
 * acceptance; SGLang exports a gauge of the mean accepted length instead.
 *
 * Engines name the same thing differently: vLLM's vllm:num_requests_running
 * is SGLang's sglang:num_running_reqs, llama.cpp's
 * llamacpp:requests_processing and TGI's tgi_batch_current_size. An engine
 * profile declares its names (study/engine-profile.h, "metrics.series"); the
 * probe reads the series through this map. `goodput workload capture` reads
 * the request counters and the length histograms (vLLM's
 * vllm:request_prompt_tokens, SGLang's sglang:prompt_tokens_histogram, TGI's
 * tgi_request_input_length) through the same map. A series may list several names:
 * the first one a page holds is used (a newer name before a deprecated one).
 * A name "a / b" is a ratio of two metrics (TensorRT-LLM's KV usage is used
 * blocks over all blocks). For TensorRT-LLM's JSON iteration statistics the
 * names are dotted paths into the newest iteration ("kvCacheStats.usedNumBlocks").
 *
 * Pure data and string handling: no I/O, so that the study room, which
 * parses profiles, can hold a map too. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

enum probe_series {
	PROBE_SERIES_RUNNING,            /* gauge: requests in the running batch */
	PROBE_SERIES_WAITING,            /* gauge: requests queued */
	PROBE_SERIES_KV_USAGE,           /* gauge: KV-cache usage, a fraction 0..1 */
	PROBE_SERIES_PREEMPTIONS,        /* counter */
	PROBE_SERIES_PROMPT_TOKENS,      /* counter */
	PROBE_SERIES_GENERATION_TOKENS,  /* counter */
	PROBE_SERIES_REQUESTS,           /* counter: requests finished */
	PROBE_SERIES_PREFIX_QUERIES,     /* counter: prompt tokens looked up in the prefix cache */
	PROBE_SERIES_PREFIX_HITS,        /* counter: of them, found */
	PROBE_SERIES_PROMPT_LENGTH,      /* histogram: prompt tokens per finished request */
	PROBE_SERIES_GENERATION_LENGTH,  /* histogram: generated tokens per finished request */
	PROBE_SERIES_SPEC_DRAFTS,        /* counter: sequence-steps that verified draft tokens */
	PROBE_SERIES_SPEC_DRAFT_TOKENS,  /* counter: draft tokens verified */
	PROBE_SERIES_SPEC_ACCEPTED,      /* counter: of them, accepted */
	PROBE_SERIES_SPEC_ACCEPT_LENGTH, /* gauge: mean tokens per draft step, the bonus token included (SGLang) */
	_PROBE_SERIES_MAX,
};

/* The series' names as profiles spell them ("running", "kv_cache_usage", ...),
 * NULL-terminated, in enum order. */
extern const char *const probe_series_names[];
/* Whether the series is a counter (its increase over a load point counts),
 * not a gauge (its mean and peak count). */
bool probe_series_is_counter(enum probe_series s);
/* Whether the series is a histogram: its names are the histogram's, whose
 * NAME_bucket{le=...}, NAME_sum and NAME_count lines the page holds
 * (prom.h: probe_prom_parse_histogram). */
bool probe_series_is_histogram(enum probe_series s);
int probe_series_from_string(const char *s);

enum probe_metrics_format {
	PROBE_METRICS_PROMETHEUS,  /* Prometheus text exposition */
	PROBE_METRICS_TRTLLM_JSON, /* a JSON array of iteration statistics, newest last */
	_PROBE_METRICS_FORMAT_MAX,
};

/* "prometheus", "trtllm_iteration_json", NULL-terminated, in enum order. */
extern const char *const probe_metrics_format_names[];

#define PROBE_SERIES_MAX_REFS 4
#define PROBE_METRIC_NAME_MAX 128

/* One name of a series: a metric, or the ratio of two. Strings are the
 * map's own. */
struct probe_metric_ref {
	char name[PROBE_METRIC_NAME_MAX];
	char per[PROBE_METRIC_NAME_MAX]; /* divisor; "" for none */
};

struct probe_metrics_map {
	enum probe_metrics_format format;
	struct probe_metric_ref refs[_PROBE_SERIES_MAX][PROBE_SERIES_MAX_REFS];
	size_t n_refs[_PROBE_SERIES_MAX];
};

/* An empty map (format Prometheus, no names). */
void probe_metrics_map_init(struct probe_metrics_map *m);
/* The map `goodput probe` uses when no engine profile names the series:
 * vLLM's names, then SGLang's, llama.cpp's and TGI's. */
void probe_metrics_map_init_default(struct probe_metrics_map *m);

/* Adds a name ("vllm:num_requests_running", "a / b") to series s.
 * -EINVAL with err for a malformed name, -E2BIG past PROBE_SERIES_MAX_REFS. */
int probe_metrics_map_add(struct probe_metrics_map *m, enum probe_series s, const char *name, struct error *err);

/* Whether the map names anything at all. */
bool probe_metrics_map_is_empty(const struct probe_metrics_map *m);
