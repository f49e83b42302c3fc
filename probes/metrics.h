/* metrics.h — per-request timings, the figures of one load point, and the
 * SLA (curl-free).
 *
 * Definitions are vLLM's serving benchmark's (benchmarks/serve): TTFT is send
 * → first chunk with content; TPOT = (E2E − TTFT)/(output tokens − 1), only
 * for requests with more than one output token; ITL pools every gap between
 * consecutive content chunks; E2E is send → last content chunk. Throughputs
 * are over the load point's wall time (first send → last completion).
 *
 * A load point's result is the one result object goodput uses everywhere
 * (`goodput probe --json`, `goodput-sim simulate --json`, the store, the
 * report): vLLM's key names for the figures vLLM reports (mean_ttft_ms,
 * median_tpot_ms, p99_itl_ms, output_throughput, request_throughput,
 * total_token_throughput, completed, ...) and goodput's own beside them
 * (attainment, good_output_throughput, sla_met, ...). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"

#define PROBE_MAX_PERCENTILES        8
#define PROBE_MAX_SLA_BOUNDS         8
#define PROBE_SLA_DEFAULT_ATTAINMENT 0.9
/* The SLA scales a load point's attainment is also counted at (DistServe's
 * "SLO scale"): every per-request bound multiplied by 0.5, 0.6, ... 2.0. */
#define PROBE_SLA_SCALES 16
extern const double probe_sla_scales[PROBE_SLA_SCALES];

/* What one request measured. Times are CLOCK_MONOTONIC µs (or virtual µs in
 * the sim); gaps and durations are µs. */
struct probe_request_result {
	uint32_t index;
	bool success;           /* completed with HTTP 200 and at least one token */
	bool cut;               /* not success: ended by the probe at the load point's cap, when it
	                         * could no longer meet the SLA (an SLA miss, not a server failure) */
	int http_status;        /* 0 when no response arrived */
	char *error;            /* owned; NULL on success */
	uint64_t send_usec;     /* request sent */
	uint64_t ttft_usec;     /* send → first content chunk */
	uint64_t e2e_usec;      /* send → last content chunk (cut with no chunk: send → the cut) */
	uint32_t input_tokens;  /* usage.prompt_tokens, else the workload's length */
	uint32_t output_tokens; /* usage.completion_tokens, else content chunks */
	uint32_t prompt_len;    /* the workload's length of its prompt, whatever the server counted */
	char *text;             /* owned; the generated text as JSON-escaped string contents, when kept */
	uint64_t *itl_usec;     /* owned; gaps between consecutive content chunks */
	size_t n_itl;
};

void probe_request_result_done(struct probe_request_result *r);

/* TPOT of one request in µs, or -1 when output_tokens <= 1 or it failed. */
double probe_request_tpot_usec(const struct probe_request_result *r);
enum probe_metric {
	PROBE_METRIC_TTFT,
	PROBE_METRIC_TPOT,
	PROBE_METRIC_ITL,
	PROBE_METRIC_E2EL,
	_PROBE_METRIC_MAX
};

/* "ttft", "tpot", "itl", "e2el" (vLLM's --percentile-metrics names). */
const char *probe_metric_name(enum probe_metric m);
/* The enum value of such a name, or -EINVAL. */
int probe_metric_from_name(const char *s);

/* A request's figure for a per-request bound on m, ms: INFINITY when it
 * failed; a one-token reply's TPOT is 0 (it meets any bound); ITL: its
 * largest gap. */
double probe_request_value_ms(const struct probe_request_result *r, enum probe_metric m);

/* An SLA is a set of bounds. A per-request bound (percentile == 0) must hold
 * for a request to be good; the load point meets the SLA when at least
 * `attainment` of its requests are good. A percentile bound (e.g. p99 TPOT <=
 * 50 ms) must hold over the load point instead. A request that failed is
 * never good. A metric with no bound is not checked. For a per-request ITL
 * bound every gap of the request must meet it; a TPOT bound does not apply to
 * a one-token reply (vLLM counts its TPOT as 0). A percentile bound pX holds
 * when the X-th percentile over the completed requests is within the bound
 * and at most (100 − X)% of the requests failed (a failed request counts as
 * slower than any bound). */
struct probe_sla_bound {
	enum probe_metric metric;
	double percentile; /* 0: per request; else (0, 100] */
	double bound_ms;
};

struct probe_sla {
	struct probe_sla_bound bounds[PROBE_MAX_SLA_BOUNDS];
	size_t n_bounds;
	double attainment; /* (0, 1], default 0.9 when per-request bounds exist */
};

/* Parses "ttft:500,tpot:50[,e2el:..,itl:..]" (per request) and/or
 * "p90:ttft:500,p99:tpot:50" (percentile bounds), adding to *sla. Also takes
 * vLLM's --goodput form, which is space-separated "ttft:500 tpot:50".
 * Errors name the offending item. */
int probe_sla_parse(const char *text, struct probe_sla *sla, struct error *err);
/* "ttft<=500ms tpot<=50ms @90%" or "p99 tpot<=50ms" — for people. */
void probe_sla_format(const struct probe_sla *sla, char *buf, size_t size);
bool probe_sla_empty(const struct probe_sla *sla);
bool probe_sla_has_request_bounds(const struct probe_sla *sla);
/* The comma form probe_sla_parse() reads back ("ttft:500,p99:tpot:50"; the
 * attainment target is not part of it). "" for an empty SLA. */
void probe_sla_to_string(const struct probe_sla *sla, char *buf, size_t size);
/* Whether one request is good under the per-request bounds. */
bool probe_request_is_good(const struct probe_request_result *r, const struct probe_sla *sla);

struct probe_stat {
	double mean_ms, median_ms, std_ms;
	double pct_ms[PROBE_MAX_PERCENTILES]; /* at probe_result.percentiles[] */
	size_t n;                             /* samples */
};

/* Server-side figures scraped from Prometheus /metrics during a load point. */
struct probe_server_metrics {
	bool present;
	/* gauges' means and peaks: NAN with fewer than two samples */
	double kv_usage_mean, kv_usage_peak; /* 0..1 */
	double running_mean, running_peak;
	double waiting_mean, waiting_peak;
	double preemptions;       /* increase over the load point */
	double prompt_tokens;     /* increase over the load point, as the server counts; NAN: not exported */
	double generation_tokens; /* likewise */
	/* what the levers change; increases over the load point, NAN: not exported */
	double prefix_queries, prefix_hits; /* prompt tokens looked up in the prefix cache, and found */
	double spec_drafts;                 /* speculative decoding: sequence-steps with drafts */
	double spec_draft_tokens;           /* draft tokens verified */
	double spec_accepted;               /* of them, accepted */
	double spec_accept_length;          /* mean tokens per draft step, bonus included (an engine's gauge) */
	size_t samples;
};

/* The prefix cache's hit rate over a load point (hits / queries), NAN when
 * the server does not say or nothing was looked up. */
double probe_server_prefix_hit_rate(const struct probe_server_metrics *s);
/* Speculative decoding's acceptance rate (accepted / draft tokens) and mean
 * acceptance length (1 + accepted / drafts, the bonus token included; an
 * engine's own gauge where it exports no counters), NAN when unknown. */
double probe_server_spec_acceptance(const struct probe_server_metrics *s);
double probe_server_spec_accept_length(const struct probe_server_metrics *s);

/* A load point's verdict when it was decided while its requests came back
 * (sequential.h); NONE when it sent a fixed count and sla_met alone judges
 * it. */
enum probe_verdict {
	PROBE_VERDICT_NONE,
	PROBE_VERDICT_MET,       /* attainment above the target, at the stated confidence */
	PROBE_VERDICT_MISSED,    /* attainment below it, at the stated confidence */
	PROBE_VERDICT_UNDECIDED, /* the cap came first: not told apart from the target */
};

/* "met", "missed", "undecided" ("none" for NONE); the parser returns the
 * value or -EINVAL. */
const char *probe_verdict_name(enum probe_verdict v);
int probe_verdict_from_name(const char *s);

/* What ended a load point of the search before its verdict was sure: its
 * cap of requests, or of time (probe.max_point_seconds, or what was left of
 * the probe's share of a wall-time budget); for a point without a verdict
 * (the saturation run), SECONDS when its time cap ended it. */
enum probe_cap {
	PROBE_CAP_NONE,
	PROBE_CAP_REQUESTS,
	PROBE_CAP_SECONDS,
};

/* "requests", "seconds" ("none"); the parser returns the value or -EINVAL. */
const char *probe_cap_name(enum probe_cap c);
int probe_cap_from_name(const char *s);

/* The confidence of the attainment interval stated with a verdict at the cap. */
#define PROBE_CAP_CI_LEVEL 0.90
#define PROBE_CAP_Z        1.6449 /* its two-sided normal quantile */

#define PROBE_MAX_FAILURE_REASONS 8
#define PROBE_FAILURE_REASON_MAX  160

/* One reason requests failed for, kept in the result (the text cut to fit). */
struct probe_failure_count {
	char reason[PROBE_FAILURE_REASON_MAX];
	uint32_t count;
};

struct probe_result {
	/* the load */
	double request_rate; /* the rate asked for, requests/s; INFINITY for "inf" */
	double offered_rate; /* the rate actually sent: (requests − 1) / (last send − first send); 0 unknown */
	double burstiness;
	uint32_t max_concurrency; /* 0 = none */
	/* counts and totals */
	uint32_t num_prompts; /* measured requests sent */
	uint32_t completed;
	uint32_t failed; /* by the server or the connection */
	uint32_t cut;    /* ended by the probe at the point's cap, past hope of meeting the SLA
	                  * (probe_client_cut_streams): neither completed nor failed, not good */
	uint64_t total_input_tokens, total_output_tokens;
	double duration_s;
	/* throughputs over duration_s */
	double request_throughput, output_throughput, total_token_throughput;
	double max_concurrent_requests; /* peak in flight, from the send/finish times */
	double max_output_tokens_per_s; /* vLLM's: most content chunks in one second */
	double mean_concurrency;        /* Σ E2E / duration: Little's law */
	/* latencies */
	size_t n_percentiles;
	double percentiles[PROBE_MAX_PERCENTILES]; /* e.g. 50, 90, 99 */
	struct probe_stat stat[_PROBE_METRIC_MAX];
	/* SLA */
	struct probe_sla sla;
	double attainment;             /* good / num_prompts (failed count as not good) */
	double request_goodput;        /* good requests / s (vLLM's "request_goodput") */
	double good_output_throughput; /* output tokens/s of good requests */
	/* attainment with every per-request bound multiplied by
	 * probe_sla_scales[i] (failed requests count as not good, as above),
	 * from the same requests: how the load point fares under a tighter or
	 * looser SLA. Only with per-request bounds (has_scaled_attainment). */
	bool has_scaled_attainment;
	double scaled_attainment[PROBE_SLA_SCALES];
	bool sla_met;         /* attainment >= target (or the verdict "met") and every percentile bound holds */
	bool percentiles_met; /* every percentile bound holds (not in JSON) */
	/* the sequential verdict (NONE: a fixed count) */
	enum probe_verdict verdict;
	uint32_t verdict_requests; /* the requests it rests on, the first sent */
	double verdict_confidence; /* e.g. 0.95 */
	/* UNDECIDED: which cap came first, and attainment's Wilson interval
	 * at PROBE_CAP_CI_LEVEL over the requests measured (sla_met is the
	 * point estimate against the target); without a verdict, SECONDS when
	 * the time cap ended the point */
	enum probe_cap cap;
	double attainment_lo, attainment_hi;
	/* why requests failed, most frequent first (at most PROBE_MAX_FAILURE_REASONS) */
	struct probe_failure_count failure_reasons[PROBE_MAX_FAILURE_REASONS];
	size_t n_failure_reasons;
	/* server side, when scraped */
	struct probe_server_metrics server;
	/* the client's own lateness: p95 of how long after it was due a request
	 * was sent (open loop; NAN when not measured: closed loops, virtual
	 * time). A lagging client measures itself, not the server. */
	double client_lag_p95_ms;
	/* table only (not in JSON): bit 1 << metric for each metric shown; 0 = all */
	unsigned percentile_metrics;
};

/* Computes a load point's figures from its requests. duration_s > 0 is the
 * wall time; percentiles (n <= PROBE_MAX_PERCENTILES) default to 50, 90, 99
 * when n_pcts is 0. sla may be NULL (no bounds: every completed request is
 * good, and sla_met means no request failed). Sample order does not matter.
 * The offered rate comes from the send times, the failure reasons from the
 * failed requests' texts. The load's description (request_rate, burstiness,
 * max_concurrency) and server metrics are left for the caller to fill in
 * (rate 0, burstiness 1). */
int probe_result_compute(const struct probe_request_result *reqs, size_t n_reqs, double duration_s, const double *pcts,
			 size_t n_pcts, const struct probe_sla *sla, struct probe_result *ret, struct error *err);

/* Sets the sequential verdict of a load point whose figures r holds:
 * sla_met then follows the verdict (and the percentile bounds); an
 * UNDECIDED one (the cap came first) is judged by its point estimate,
 * attainment against the target, with its interval at PROBE_CAP_CI_LEVEL
 * (cap: which one). */
void probe_result_set_verdict(struct probe_result *r, enum probe_verdict v, uint32_t requests, double confidence,
			      enum probe_cap cap);
/* The verdict for people: "met at 95 % confidence (first 55 requests)",
 * "met at the cap: 93.8 %, 90 % CI 89–97 % (37 requests; time cap)"; ""
 * for a point of a fixed count. */
void probe_result_verdict_text(const struct probe_result *r, char *buf, size_t size);

/* Which bound a load point's requests missed and by how much, for people:
 * for each bound of sla, the figure it must hold at — a per-request bound
 * at the attainment target's quantile over the requests (a failed request
 * counts as slower than any bound), a percentile bound at its percentile —
 * against the bound: "ttft p90 812 ms over 500 ms (+62%), tpot p90 48 ms
 * within 50 ms". "" for no requests. -ENOMEM, -EINVAL (size 0). */
int probe_sla_shortfall(const struct probe_request_result *reqs, size_t n, const struct probe_sla *sla, char *buf,
			size_t size);

/* The same from a result's own figures (no requests: a stored load point),
 * every bound with its margin: "ttft p90 2310 ms within 2500 ms (−8%), tpot
 * p90 78 ms over 18 ms (+333%)" — the percentile the bound holds at, or the
 * nearest one the result has. "" without bounds. -EINVAL (size 0). */
int probe_result_margins(const struct probe_result *r, char *buf, size_t size);

/* A result's failed requests by reason, for people: "connection refused
 * ×5, HTTP 500: boom ×3" (and how many failed for reasons not kept); ""
 * when none failed. */
void probe_result_format_failures(const struct probe_result *r, char *buf, size_t size);

/* One kind of failure, one example of it, and how many requests failed so. */
struct probe_failure_reason {
	const char *reason; /* the first failed request's error text of its kind, borrowed from the requests */
	uint32_t count;
};

/* How much of a failure's text names its kind: "HTTP 500" of "HTTP 500:
 * <body>", the words before a quoted or JSON detail that differs per request
 * (an event with its request id), else the whole text. */
size_t probe_failure_kind_len(const char *text);

/* The failed requests among reqs by the kind of their failure, most
 * frequent first (equal counts: alphabetical), each with one example text.
 * A failed request without a text counts as "unknown error". *ret is
 * free()d by the caller and borrows the texts from reqs; NULL when none
 * failed. 0 or -ENOMEM. */
int probe_failure_reasons(const struct probe_request_result *reqs, size_t n, struct probe_failure_reason **ret,
			  size_t *ret_n);

/* numpy.percentile(x, p) (linear interpolation) of n sorted samples; 0 when n is 0. */
double probe_percentile_sorted(const double *x, size_t n, double p);
/* The same of n samples in any order, reordered in place: a selection, not
 * a sort, for one percentile of many samples (the ITL of a load point). */
double probe_percentile_select(double *x, size_t n, double p);

/* The result object (see top). Keys for percentiles follow vLLM: "p99_ttft_ms",
 * "p99.9_ttft_ms" for fractional ones. The caller owns *ret. */
int probe_result_to_json(const struct probe_result *r, cJSON **ret);
/* Reads back what probe_result_to_json wrote (for the store and reports). */
int probe_result_from_json(const cJSON *j, struct probe_result *ret, struct error *err);
/* A table like vLLM's "Serving Benchmark Result" block. */
void probe_result_print(FILE *f, const struct probe_result *r);
