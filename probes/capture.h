/* capture.h — the shape of the traffic a server serves, from its own
 * metrics or from a request log (curl-free).
 *
 * A server's /metrics page holds counters and histograms that only grow:
 * requests finished, prompt and generation lengths per request (vLLM's
 * vllm:request_prompt_tokens and vllm:request_generation_tokens with its
 * 1-2-5 bucket bounds, SGLang's and TGI's equivalents through the engine
 * profile's map), prefix-cache queries and hits. Two scrapes an interval
 * apart give a delta: what the server served in between. Deltas add up in
 * an accumulator, which turns into a workload block (workload-json.h):
 * length histograms with their exact means, the mean and peak rate, a
 * burstiness estimate, the rate per hour of the day, a shared prefix from
 * the prefix-cache hit rate. A counter that went down means the server
 * restarted: the delta counts from zero.
 *
 * Lengths are counted when a request finishes (that is when engines
 * observe their histograms). Arrivals are not a metric of any engine, but
 * they follow from two that are: the requests in the engine (running +
 * waiting, gauges read at the scrape) and those that left it (finished or
 * aborted, a counter), so an interval's arrivals are the change of the
 * first plus the increase of the second — at the scrape's own instant, not
 * a request's latency later, when finishing requests bunch up behind a long
 * prefill. Without those gauges in the profile's map, the finished requests
 * stand in for arrivals.
 *
 * Burstiness is the gamma shape whose arrivals vary as much as the
 * per-interval counts do: k = 1 / F, F the counts' dispersion (variance /
 * mean) measured on successive differences, F = Σ (c_i − c_{i−1})² /
 * (2 (m − 1) · mean c), which a change of rate between intervals (a busy
 * hour, a second load level) barely moves. Poisson arrivals give F = 1. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "prom-map.h"
#include "prom.h"
#include "workload.h"

/* One scrape of a server's metrics. */
struct probe_capture_scrape {
	uint64_t mono_usec, real_usec; /* when it was read */
	struct probe_prom_histogram prompt, generation;
	struct probe_prom_sample counters; /* running, waiting, requests, prefix_cache_queries, prefix_cache_hits */
};

/* Reads a /metrics body into a scrape. A missing length histogram is an
 * error naming the series and the names the map tried ("prompt_length
 * (vllm:request_prompt_tokens): not on the page"). map NULL: the default. */
int probe_capture_scrape_parse(const char *text, size_t len, const struct probe_metrics_map *map, uint64_t mono_usec,
			       uint64_t real_usec, struct probe_capture_scrape *ret, struct error *err);

/* What the server served between two scrapes: per-bucket increases (not
 * cumulative) of both histograms, their sums and counts, the prefix-cache
 * counters' increases (NAN when not exported). */
struct probe_capture_delta {
	uint64_t mono_start_usec, mono_end_usec, real_end_usec;
	struct probe_prom_histogram prompt, generation; /* cum[] holds per-bucket counts; inf the overflow */
	double requests;                                /* finished (the length histograms' count) */
	double arrivals;           /* entered the engine: Δ(running + waiting) + Δ(finished or aborted) */
	bool arrivals_from_gauges; /* false: the map names no running/waiting gauges; arrivals = requests */
	double prefix_queries, prefix_hits;
	bool reset; /* a counter went down: the server restarted, the delta counts from 0 */
};

/* The delta from prev to cur. -EINVAL with err when a histogram's bucket
 * bounds changed (another server, or one restarted with another
 * max_model_len). */
int probe_capture_delta(const struct probe_capture_scrape *prev, const struct probe_capture_scrape *cur,
			struct probe_capture_delta *ret, struct error *err);

/* One interval of a window: the requests that arrived in it, its length,
 * its end (seconds since the epoch). */
struct probe_capture_interval {
	double count, seconds, end;
};

/* Deltas added up over a window. */
struct probe_capture_acc {
	struct probe_prom_histogram prompt, generation; /* per-bucket counts; n 0 until the first delta */
	double requests, arrivals, seconds;
	bool arrivals_from_gauges; /* every delta had them */
	double prefix_queries, prefix_hits;
	bool have_prefix;
	unsigned resets;
	uint64_t first_mono_usec, last_mono_usec, first_real_usec, last_real_usec;
	struct probe_capture_interval *intervals;
	size_t n_intervals, cap_intervals;
	double hour_requests[24], hour_seconds[24]; /* arrivals and seconds by the local hour of each interval's end */
	/* from a log: arrival times instead of intervals, binned into
	 * intervals of interval_usec (widened for a sparse log) */
	bool from_log;
	uint64_t interval_usec;
};

void probe_capture_acc_init(struct probe_capture_acc *a);
void probe_capture_acc_done(struct probe_capture_acc *a);
/* Adds a delta. -EINVAL when its bucket bounds differ from the window's. */
int probe_capture_acc_add(struct probe_capture_acc *a, const struct probe_capture_delta *d, struct error *err);

/* Adds window b to window a (b's intervals after a's). -EINVAL when their
 * bucket bounds differ. */
int probe_capture_acc_merge(struct probe_capture_acc *a, const struct probe_capture_acc *b, struct error *err);

/* A request log (probe_samples) as an accumulator: lengths into histograms
 * with vLLM's bounds (1-2-5 up to the longest length), arrivals binned into
 * intervals of interval_usec for the rate and its burstiness — widened for
 * a sparse log to at most 4 intervals per request (at least 64 in all), so
 * that the cost follows the requests, not the time they span — and the
 * log's wall-clock times (when it has them) for the hours of the day. */
int probe_capture_acc_from_samples(struct probe_capture_acc *a, const struct probe_samples *s, uint64_t interval_usec,
				   struct error *err);

/* What the window measured, beside the workload block. */
struct probe_capture_summary {
	double requests; /* finished in the window */
	double arrivals; /* arrived in the window */
	bool arrivals_from_gauges;
	double duration_s; /* the active span (from the first interval with an arrival to the last) */
	double mean_rate;  /* arrivals / duration_s */
	double peak_rate;  /* the busiest interval's */
	double burstiness; /* gamma shape; NAN with fewer than 3 active intervals */
	double input_mean, output_mean;
	double prefix_hit_rate; /* NAN: not exported */
	unsigned resets;
};

void probe_capture_summarize(const struct probe_capture_acc *a, struct probe_capture_summary *ret);

/* The window as a workload: histogram lengths (means exact), gamma arrivals
 * at the mean rate with the burstiness (Poisson below 3 intervals), the rate
 * per hour when the window covers two hours or more, a shared prefix when
 * the prefix cache hit more than 1 % of prompt tokens. -ENODATA when the
 * window saw no request. cfg holds the caller's defaults on entry. */
int probe_capture_acc_workload(const struct probe_capture_acc *a, struct probe_workload_config *cfg, struct error *err);

/* The length histograms of a window as the workload's (per-bucket counts,
 * trailing empty buckets dropped, the +Inf bucket folded into one more
 * bound twice the last); false when there were no requests. */
bool probe_capture_length_histogram(const struct probe_prom_histogram *h, struct probe_length_histogram *ret);

/* The captured block: the shape keys (probe_workload_shape_to_json) and
 * "captured": {source, ...summary, started, duration, interval, the rate
 * per hour, and — for windows of at most PROBE_CAPTURE_MAX_LISTED
 * intervals — "intervals": [[end, requests], ...], each interval's end in
 * seconds since the epoch and the requests that arrived in it}. source is
 * "metrics URL" or "log FILE". The caller owns *ret. */
#define PROBE_CAPTURE_MAX_LISTED 2880
int probe_capture_to_json(const struct probe_capture_acc *a, const struct probe_workload_config *cfg,
			  const char *source_kind, const char *source, uint64_t interval_usec, cJSON **ret);
