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
 * each prompt is unique.
 *
 * Conversations: with turns T > 1 the requests are C = ⌈requests / T⌉
 * conversations, request i turn ⌊i / C⌋ of conversation i mod C (so a
 * conversation's turns come C requests apart, as users take turns); a
 * turn's prompt is the previous turn's prompt, that turn's answer
 * (output_len tokens of its own) and a new message (the drawn input
 * length) — what a chat client resends, and what a prefix cache keeps.
 *
 * Repetition: with prompt_repetition ρ each prompt's own tokens come in
 * segments of 8–32, each a copy of an earlier stretch of the same prompt
 * with probability ρ (else fresh ids): text that repeats itself, as code
 * edits and summaries do, where n-gram speculation (prompt lookup) finds
 * its drafts. 
 *
 * Measured workloads (what `goodput workload capture` writes): lengths from
 * a histogram (a server's bucket bounds and counts) or from a file of
 * samples (a request log), arrivals replayed from that log, and a rate
 * profile over the day that the arrival process follows. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define PROBE_TOKEN_ID_MIN           1000u
#define PROBE_TOKEN_ID_MAX           30000u
#define PROBE_MAX_TOKENS_PER_REQUEST (1u << 20)
#define PROBE_MAX_REQUESTS           10000000u
#define PROBE_MAX_DATASET_BYTES      (UINT64_C(2) << 30)
#define PROBE_MAX_DATASET_LINE       (16u << 20)
#define PROBE_HISTOGRAM_MAX_BUCKETS  128
#define PROBE_RATE_PROFILE_MAX       96 /* a step every 15 minutes of a day */
#define PROBE_SECONDS_PER_DAY        86400u

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
	PROBE_DIST_HISTOGRAM, /* a bucket by its count, then a length inside it (see below) */
	PROBE_DIST_SAMPLES,   /* the lengths of the samples file (config.samples_path) */
};

/* Bucket i holds the integer lengths in (le[i−1], le[i]] (le[−1] = 0), as a
 * Prometheus histogram's cumulative buckets delta'd into per-bucket counts. */
struct probe_length_histogram {
	uint32_t n;
	double le[PROBE_HISTOGRAM_MAX_BUCKETS];    /* increasing, > 0 */
	double count[PROBE_HISTOGRAM_MAX_BUCKETS]; /* >= 0, not all 0 */
};

struct probe_length_dist {
	enum probe_dist kind;
	double mean;        /* histogram: the mean to match; NAN: the buckets' own (uniform inside each) */
	double range_ratio; /* uniform only, in [0, 1) */
	double stddev;      /* normal: tokens; lognormal: sigma of ln(length) */
	uint32_t min, max;  /* clamp; 0 = 1 and PROBE_MAX_TOKENS_PER_REQUEST */
	struct probe_length_histogram hist; /* histogram only */
};

/* A request rate over the day: rate[i] requests/s from second_of_day[i]
 * until the next point (the last one holds until the first, across
 * midnight). A run starts at `start` in the day and moves through it at
 * `speed` day-seconds per second (1: real time; 1440: a day in a minute).
 * The arrival process keeps its shape (Poisson, gamma, constant) in the
 * time the profile warps: with Λ(t) the expected arrivals by t, request k
 * arrives when Λ reaches the k-th point of the unit-rate process. The
 * profile is scaled so that its mean over the day is the config's
 * request_rate, so a rate search moves the whole curve. */
struct probe_rate_profile {
	uint32_t n;                                     /* 0: no profile */
	uint32_t second_of_day[PROBE_RATE_PROFILE_MAX]; /* increasing, < PROBE_SECONDS_PER_DAY */
	double rate[PROBE_RATE_PROFILE_MAX];            /* >= 0, mean over the day > 0 */
	uint32_t start;                                 /* second of the day a run starts at */
	double speed;                                   /* > 0 */
};

enum probe_arrival {
	PROBE_ARRIVAL_POISSON,  /* exponential gaps at request_rate (gamma with burstiness 1) */
	PROBE_ARRIVAL_GAMMA,    /* gamma gaps, shape = burstiness, mean 1/request_rate (as vLLM) */
	PROBE_ARRIVAL_CONSTANT, /* exactly 1/request_rate apart */
	PROBE_ARRIVAL_INF,      /* all at time 0 (vLLM's --request-rate inf) */
	PROBE_ARRIVAL_TRACE,    /* the samples file's arrival times, scaled to request_rate */
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
	uint32_t turns;             /* > 1: conversations of this many turns, each resending the ones before */
	double prompt_repetition;   /* [0, 1): share of each prompt copied from earlier in it (n-gram friendly) */
	bool ignore_eos;
	uint64_t seed;
	/* > 0: other prompts for the same seed — other token ids (and shared
	 * prefixes), or the dataset's entries further on — with the same
	 * synthetic lengths and arrival times (a rate search's load points) */
	uint32_t prompt_variant;
	/* > 0: other arrival times for the same seed (Poisson or gamma), the
	 * lengths kept: a rate measured again, whose requests are pooled with
	 * those before it, adds draws of its own rather than the same gaps */
	uint32_t arrival_variant;
	/* > 0 (Poisson or gamma arrivals at a constant rate): the load point
	 * sends for this long at most (its cap), so only the arrivals of its
	 * first rate × window s go out; the sequence is stretched or shrunk so
	 * that those come at the rate asked on average. A fixed seed's first
	 * dozen draws stray from their mean by a third (1/√k): unscaled, every
	 * capped point of a search would send a fixed factor more (or less)
	 * than it asks, and the answer's rate would be off by that factor. */
	double arrival_window_s;
	/* additions */
	uint32_t dataset_output_len; /* sharegpt/custom: fixed output length; 0 = from the dataset */
	bool lengths_only;           /* no prompts: dataset texts not kept (virtual time needs lengths only) */
	/* measured workloads */
	const char *samples_path;          /* a request log: lengths (PROBE_DIST_SAMPLES), arrivals (TRACE) */
	struct probe_rate_profile profile; /* n = 0: the rate is constant */
};

/* One request, compact: its prompt is not kept but made when it is sent
 * (probe_workload_prompt_ids, probe_workload_prompt_text), so a workload of
 * a million requests holds their lengths and times, not their prompts. */
struct probe_request_spec {
	uint64_t arrival_usec; /* offset from the benchmark's start (0 for INF) */
	uint32_t index;        /* 0-based; warm-up requests come first */
	uint32_t input_len;    /* tokens, by the word rule for text prompts */
	uint32_t output_len;   /* max_tokens to ask for */
	uint32_t prefix_id;    /* requests with equal prefix_id (> 0) share prefix_len leading tokens */
	uint32_t entry;        /* dataset prompts: the dataset entry it takes */
	bool warmup;
};

struct probe_dataset_entries;
struct probe_workload_stream;

struct probe_workload {
	struct probe_workload_config config; /* copy; dataset_path not owned */
	/* generated: every request; opened (probe_workload_open): NULL */
	struct probe_request_spec *requests;
	size_t n_requests; /* num_warmup + num_prompts */
	/* dataset prompts: each entry once, however many requests take it
	 * (NULL for token-id prompts, and with lengths_only) */
	struct probe_dataset_entries *dataset;
	struct probe_workload_stream *stream; /* opened: the generator */
};

/* Whether the workload's token ids matter to a model of the server (a prefix
 * cache or prompt lookup sees them): shared prefixes, conversations,
 * repetition. Without them lengths are all a simulation needs. */
bool probe_workload_ids_matter(const struct probe_workload_config *cfg);

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
 * - histogram lengths: a bucket is drawn by its count, then a length in it:
 *   an integer in (le[i−1], le[i]] with density ∝ e^(θ·u) over the bucket's
 *   width (u in [0, 1)), one θ for every bucket, solved so that the mean is
 *   `mean` (θ = 0, uniform, when mean is NAN or cannot be reached).
 * - samples (lengths from samples_path, see probe_samples_load): taken in the
 *   file's order with TRACE arrivals (a replay), else in an order shuffled
 *   with the seed; reused cyclically.
 * - TRACE arrivals: the samples' arrival offsets times (the log's mean rate /
 *   request_rate), exactly the log's when request_rate is its mean rate or
 *   not finite; past the log's end it starts again one mean gap later.
 * - a rate profile warps Poisson, gamma and constant arrivals (see struct
 *   probe_rate_profile).
 * - caps: num_warmup + num_prompts <= PROBE_MAX_REQUESTS, dataset files
 *   <= PROBE_MAX_DATASET_BYTES, a JSONL line <= PROBE_MAX_DATASET_LINE
 *   bytes. Prompts are made as they are sent, so their total is not capped. */
void probe_workload_config_init(struct probe_workload_config *cfg);

/* Generates the requests. Deterministic in (cfg, seed). Dataset errors name
 * the file, the line (JSONL) or entry (ShareGPT) and the field. */
int probe_workload_generate(const struct probe_workload_config *cfg, struct probe_workload **ret, struct error *err);

/* A workload made as it is read — the probe's, whose memory then follows
 * the requests in flight, not the load point's size: probe_workload_open
 * checks cfg and readies the generator (a dataset or samples file read, a
 * capped point's window measured by running its arrivals ahead) but makes
 * no request, and each request is made when it is read. It holds O(1) per
 * request, but for conversations (turns > 1), which keep each request's two
 * lengths (8 bytes) for the later turns that resend it. The requests are
 * exactly those probe_workload_generate lays out: it reads them so.
 *
 * probe_workload_request: request i (0-based, warm-ups first) into *ret,
 * and its prompt from probe_workload_prompt_ids/_text as for a generated
 * workload's. Reading on from the last request is O(1); a gap makes the
 * ones between and a step back starts again from the first (O(i)).
 * -ERANGE past the end. A generated workload's request i is copied.
 *
 * probe_workload_arrival: request i's arrival_usec (0 for a warm-up,
 * UINT64_MAX past the end), read ahead of the requests by a cursor of its
 * own — a load point's timer needs the next arrival while the requests
 * before it still wait for a slot — at the same costs. */
int probe_workload_open(const struct probe_workload_config *cfg, struct probe_workload **ret, struct error *err);
int probe_workload_request(struct probe_workload *w, size_t i, struct probe_request_spec *ret);
uint64_t probe_workload_arrival(struct probe_workload *w, size_t i);

struct probe_workload *probe_workload_free(struct probe_workload *w);
static inline void probe_workload_freep(struct probe_workload **w)
{
	probe_workload_free(*w);
}

/* Whether the measured requests' arrival times at rate R are those at rate 1
 * divided by R, so that one generated sequence serves every rate of a
 * search: true for Poisson, gamma, constant, all-at-once and trace
 * arrivals; false with a rate profile, whose curve is warped, not scaled. */
bool probe_workload_arrivals_scale(const struct probe_workload_config *cfg);

/* A load point of a rate search: what the probe sends and what a model of
 * the server simulates to reproduce it, so that both draw the same requests.
 *
 * probe_workload_at_rate: base at rate — INFINITY: all at once (INF);
 * a finite rate: request_rate = rate, and INF arrivals become Poisson, or
 * gamma with base's burstiness when that is neither 0 nor 1.
 *
 * probe_workload_at_point: the rate's workload for the point_index-th point
 * (0-based) of a search, with num_prompts requests (0: base's): the same seed
 * at every point (the same lengths and arrival sequence, scaled to the rate;
 * a point stopped early by its verdict sent a prefix of it), other prompt ids
 * at each (prompt_variant = point_index, so a server's prefix cache does not
 * make later points look faster), and warm-up only before the first point. */
void probe_workload_at_rate(const struct probe_workload_config *base, double rate, struct probe_workload_config *ret);
void probe_workload_at_point(const struct probe_workload_config *base, double rate, uint32_t point_index,
			     uint32_t num_prompts, struct probe_workload_config *ret);

/* Whether w's prompts are token ids (synthetic: the random dataset, or a
 * workload made by hand with a zero config) rather than dataset texts. */
bool probe_workload_has_ids(const struct probe_workload *w);

/* Writes the token ids of r's prompt (r->input_len of them) to ids: its
 * shared prefix (prefix_len ids drawn for its prefix group) and the rest
 * drawn for the request alone, from the seed moved by the prompt variant and
 * its length (two workloads of one seed share no prompt beginnings) —
 * so any request's prompt is made on its own, in any order, the same every
 * time. -ENODATA when w's prompts are texts. */
int probe_workload_prompt_ids(const struct probe_workload *w, const struct probe_request_spec *r, uint32_t *ids);

/* A dataset prompt's text, borrowed from w (valid while w is); NULL for
 * token-id prompts and with lengths_only. */
const char *probe_workload_prompt_text(const struct probe_workload *w, const struct probe_request_spec *r);

/* The text form of a request's prompt (dataset text, or "w<id> w<id> ..."):
 * a new string the caller frees; NULL on ENOMEM, "" when w holds no prompts
 * (a dataset's lengths only). */
char *probe_request_prompt_text(const struct probe_workload *w, const struct probe_request_spec *r);

/* Number of tokens in a text by the word rule. */
uint32_t probe_count_words(const char *text);

/* A request log read as samples (workload-samples.c): each request's
 * arrival offset and lengths, in arrival order. One JSON object per line, in
 * one of three forms (the whole file in one):
 *  - `goodput probe --save-requests`: send_usec, input_tokens, output_tokens
 *    (what the server reported), success (failed requests are left out),
 *    timestamp (seconds since the epoch, when written);
 *  - an OpenAI request/response pair: usage.prompt_tokens and
 *    usage.completion_tokens (at the top or in "response"), and the time as
 *    "timestamp" (seconds since the epoch, or RFC 3339 text) or the
 *    response's "created";
 *  - {"input_len": N, "output_len": M, "t": seconds (optional)}.
 * Blank lines are skipped; any other line is an error naming file, line and
 * field. A completion of 0 tokens counts as 1 (every request asks for one). */
enum probe_samples_format {
	PROBE_SAMPLES_PROBE,
	PROBE_SAMPLES_OPENAI,
	PROBE_SAMPLES_PLAIN,
};

struct probe_samples {
	enum probe_samples_format format;
	size_t n;
	uint64_t *t_usec; /* arrival offsets from the first request, not decreasing; all 0 without times */
	uint32_t *input, *output;
	bool have_time;
	double first_realtime; /* seconds since the epoch of the first request; NAN: unknown */
	size_t skipped_failed; /* failed requests of a probe log, left out */
};

int probe_samples_load(const char *path, struct probe_samples **ret, struct error *err);
struct probe_samples *probe_samples_free(struct probe_samples *s);
static inline void probe_samples_freep(struct probe_samples **s)
{
	probe_samples_free(*s);
}
/* The log's mean rate: (n − 1) / its span, requests/s; NAN without times
 * or with fewer than two requests over a span > 0. */
double probe_samples_rate(const struct probe_samples *s);

/* The mean length a distribution draws (the histogram's matched mean, the
 * samples' mean needs the file: NAN). */
double probe_length_dist_mean(const struct probe_length_dist *d);

/* A histogram's mean with lengths uniform inside each bucket. */
double probe_histogram_mean_uniform(const struct probe_length_histogram *h);

/* Kolmogorov–Smirnov distance, at the histogram's bounds, between its
 * distribution and n lengths (0 when they agree at every bound). */
double probe_histogram_ks(const struct probe_length_histogram *h, const uint32_t *lengths, size_t n);
/* The same between two histograms, at the bounds of a (b's CDF read at a's
 * bounds by linear interpolation inside b's buckets). */
double probe_histogram_ks2(const struct probe_length_histogram *a, const struct probe_length_histogram *b);

/* The rate profile's mean over the day (requests/s), and its rate at a
 * second of the day (unscaled); 0 without a profile. */
double probe_rate_profile_mean(const struct probe_rate_profile *p);
double probe_rate_profile_at(const struct probe_rate_profile *p, uint32_t second_of_day);

/* Names for flags and JSON: "random"/"sharegpt"/"custom", "fixed"/"uniform"/
 * "normal"/"lognormal"/"histogram"/"samples", "poisson"/"gamma"/"constant"/
 * "inf"/"trace"; the parsers return the enum value or -EINVAL. */
const char *probe_dataset_name(enum probe_dataset d);
const char *probe_dist_name(enum probe_dist d);
const char *probe_arrival_name(enum probe_arrival a);
int probe_dataset_from_name(const char *s);
int probe_dist_from_name(const char *s);
int probe_arrival_from_name(const char *s);
