/* server-metrics.c — goodput-sim's metrics: what it counts about requests,
 * vLLM's /metrics page, and /v1/models.
 *
 * The server counts each finished request's latencies and lengths once
 * (struct sim_request_metrics) and each dialect renders them in its
 * engine's names and buckets: vLLM's here (vllm/v1/metrics/loggers.py: the
 * model_name and engine labels; prompt and generation lengths in 1-2-5
 * buckets up to max_model_len; TTFT, TPOT and request-latency buckets as
 * vLLM declares them), the others in server-metrics-engines.c. vLLM's page
 * also carries goodput-sim's own goodput_sim_* metrics, chiefly
 * goodput_sim_pacing_lateness_seconds: the actual time a token's chunk was
 * handed to the HTTP layer minus its scheduled step-end time, so that a host
 * whose CPU cannot keep up with a fast emulated GPU shows it. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "server-internal.h"
#include "time-util.h"

/* vllm/v1/metrics/loggers.py */
static const double vllm_ttft[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,   0.75,
				    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160., 640.0, 2560.0 };
static const double vllm_tpot[] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
				    0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0 };
static const double vllm_latency[] = { 0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
				       30.0, 40.0, 50.0, 60.0, 120., 240.0, 480.0, 960.0, 1920.0, 7680.0 };
/* sgl-project/sglang python/sglang/srt/metrics/collector.py */
static const double sglang_ttft[] = { 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400 };
static const double sglang_itl[] = { 0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
				     0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000 };
/* collector.py's default_bucket_prompt_tokens, for prompt and generation lengths */
static const double sglang_tokens[] = { 100,   300,   500,   700,   1000,  1500,   2000,   3000,   4000,   5000,
					6000,  7000,  8000,  9000,  10000, 12000,  15000,  20000,  22000,  25000,
					30000, 35000, 40000, 66000, 99000, 132000, 300000, 600000, 900000, 1100000 };
static const double sglang_e2e[] = { 0.1, 0.2, 0.4, 0.6, 0.8, 1,   2,   4,   6,    8,    10,
				     20,  40,  60,  80,  100, 200, 400, 600, 1200, 1800, 2400 };
static const double late_bounds[] = { 0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0015, 0.002,
				      0.003,   0.005,  0.0075, 0.01,   0.02,   0.05,    0.1,   0.25,   1.0 };

int sim_histogram_init(struct sim_histogram *h, const double *bounds, size_t n_bounds)
{
	sim_histogram_done(h);
	h->bounds = malloc(MAX(n_bounds, (size_t)1) * sizeof(double));
	h->counts = calloc(n_bounds + 1, sizeof(uint64_t));
	if (!h->bounds || !h->counts) {
		sim_histogram_done(h);
		return -ENOMEM;
	}
	memcpy(h->bounds, bounds, n_bounds * sizeof(double));
	h->n_bounds = n_bounds;
	return 0;
}

void sim_histogram_done(struct sim_histogram *h)
{
	free(h->bounds);
	free(h->counts);
	*h = (struct sim_histogram){ 0 };
}

void sim_histogram_observe(struct sim_histogram *h, double v)
{
	size_t lo = 0, hi = h->n_bounds;

	if (!h->counts)
		return;
	/* The first bound >= v (le semantics). */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (v > h->bounds[mid])
			lo = mid + 1;
		else
			hi = mid;
	}
	h->counts[lo]++;
	h->count++;
	h->sum += v;
}

/* The shortest text that reads back to v, in positional notation. */
static void shortest_positional(double v, char *buf, size_t size, int *ret_prec)
{
	int prec, exp10 = v != 0 ? (int)floor(log10(fabs(v))) : 0;

	for (prec = 1; prec < 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	if (strpbrk(buf, "eE"))
		snprintf(buf, size, "%.*f", MAX(0, prec - 1 - exp10), v);
	*ret_prec = prec;
}

const char *sim_metric_number(double v, enum sim_number_style style, char *buf, size_t size)
{
	int prec, exp10 = v != 0 && isfinite(v) ? (int)floor(log10(fabs(v))) : 0;

	if (!isfinite(v)) {
		snprintf(buf, size, "%s", isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
		return buf;
	}
	if (style == SIM_NUMBER_CXX) {
		snprintf(buf, size, "%g", v);
		return buf;
	}
	shortest_positional(v, buf, size, &prec);
	if (style == SIM_NUMBER_RUST)
		return buf;
	if (v > 0 && exp10 >= 6 && exp10 < 16)
		snprintf(buf, size, "%.*e", prec - 1, v);
	else if (exp10 < -4 || exp10 >= 16)
		snprintf(buf, size, "%.*g", prec, v);
	if (!strpbrk(buf, ".eE"))
		strncat(buf, ".0", size - strlen(buf) - 1);
	return buf;
}

static void put_histogram(FILE *f, const char *name, const char *help, const char *labels,
			  const struct sim_histogram *h, enum sim_number_style style)
{
	const char *sep = labels[0] ? "," : "";
	uint64_t cum = 0;
	char b[40], n[40];

	if (help)
		fprintf(f, "# HELP %s %s\n", name, help);
	fprintf(f, "# TYPE %s histogram\n", name);
	for (size_t i = 0; i < h->n_bounds; i++) {
		cum += h->counts[i];
		fprintf(f, "%s_bucket{%s%sle=\"%s\"} %s\n", name, labels, sep,
			sim_metric_number(h->bounds[i], style, b, sizeof(b)),
			sim_metric_number((double)cum, style, n, sizeof(n)));
	}
	cum += h->counts ? h->counts[h->n_bounds] : 0;
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %s\n", name, labels, sep,
		sim_metric_number((double)cum, style, n, sizeof(n)));
	sim_metric_number(h->sum, style, b, sizeof(b));
	sim_metric_number((double)h->count, style, n, sizeof(n));
	if (labels[0])
		fprintf(f, "%s_sum{%s} %s\n%s_count{%s} %s\n", name, labels, b, name, labels, n);
	else
		fprintf(f, "%s_sum %s\n%s_count %s\n", name, b, name, n);
}

void sim_histogram_put(FILE *f, const char *name, const char *help, const char *labels, const struct sim_histogram *h)
{
	put_histogram(f, name, help, labels, h, SIM_NUMBER_PYTHON);
}

void sim_histogram_put_rust(FILE *f, const char *name, const char *labels, const struct sim_histogram *h)
{
	put_histogram(f, name, NULL, labels, h, SIM_NUMBER_RUST);
}

size_t sim_buckets_1_2_5(double *ret, size_t max_n, double max)
{
	static const double mantissa[] = { 1, 2, 5 };
	size_t n = 0;

	for (double e = 1; n < max_n; e *= 10)
		for (size_t i = 0; i < ELEMENTSOF(mantissa); i++) {
			if (mantissa[i] * e > max || n >= max_n)
				return n;
			ret[n++] = mantissa[i] * e;
		}
	return n;
}

/* TGI (router/src/server.rs): durations in 35 geometric buckets from
 * 0.00015 s (×1.5), lengths in 100 equal steps up to their limit. */
static size_t tgi_duration_buckets(double *ret)
{
	double v = 0.0001;

	for (size_t i = 0; i < 35; i++)
		ret[i] = v *= 1.5;
	return 35;
}

static size_t linear_100(double *ret, double max)
{
	for (size_t i = 0; i < 100; i++)
		ret[i] = max / 100.0 * (double)(i + 1);
	return 100;
}

int sim_server_metrics_init(struct sim_server *s)
{
	struct sim_request_metrics *m = &s->m;
	enum sim_dialect d = s->cfg.dialect.dialect;
	double lens[64], dur[35], lin[100];
	size_t n_lens = sim_buckets_1_2_5(lens, ELEMENTSOF(lens), s->max_model_len);
	int r = 0;

	r |= sim_histogram_init(&s->lateness, late_bounds, ELEMENTSOF(late_bounds));
	switch (d) {
	case SIM_DIALECT_SGLANG:
		r |= sim_histogram_init(&m->ttft, sglang_ttft, ELEMENTSOF(sglang_ttft));
		r |= sim_histogram_init(&m->tpot, sglang_itl, ELEMENTSOF(sglang_itl));
		r |= sim_histogram_init(&m->e2e, sglang_e2e, ELEMENTSOF(sglang_e2e));
		r |= sim_histogram_init(&m->prompt_len, sglang_tokens, ELEMENTSOF(sglang_tokens));
		r |= sim_histogram_init(&m->gen_len, sglang_tokens, ELEMENTSOF(sglang_tokens));
		break;
	case SIM_DIALECT_TGI:
		tgi_duration_buckets(dur);
		r |= sim_histogram_init(&m->e2e, dur, 35);
		r |= sim_histogram_init(&m->queue, dur, 35);
		r |= sim_histogram_init(&m->inference, dur, 35);
		r |= sim_histogram_init(&m->mean_tpot, dur, 35);
		r |= sim_histogram_init(&m->prompt_len, lin,
					linear_100(lin, s->cfg.dialect.max_input_tokens
								? s->cfg.dialect.max_input_tokens
								: s->max_model_len));
		r |= sim_histogram_init(&m->gen_len, lin, linear_100(lin, s->max_model_len));
		break;
	case SIM_DIALECT_LLAMACPP:
		break; /* counters only */
	default:
		/* vLLM, and TensorRT-LLM's collector (which adapted vLLM's buckets) */
		r |= sim_histogram_init(&m->ttft, vllm_ttft, ELEMENTSOF(vllm_ttft));
		r |= sim_histogram_init(&m->tpot, vllm_tpot, ELEMENTSOF(vllm_tpot));
		r |= sim_histogram_init(&m->e2e, vllm_latency, ELEMENTSOF(vllm_latency));
		r |= sim_histogram_init(&m->queue, vllm_latency, ELEMENTSOF(vllm_latency));
		r |= sim_histogram_init(&m->inference, vllm_latency, ELEMENTSOF(vllm_latency));
		r |= sim_histogram_init(&m->prefill, vllm_latency, ELEMENTSOF(vllm_latency));
		r |= sim_histogram_init(&m->decode, vllm_latency, ELEMENTSOF(vllm_latency));
		r |= sim_histogram_init(&m->prompt_len, lens, n_lens);
		r |= sim_histogram_init(&m->gen_len, lens, n_lens);
		break;
	}
	if (d == SIM_DIALECT_TRTLLM) {
		s->iterations = calloc(SIM_ITERATIONS_MAX, sizeof(*s->iterations));
		if (!s->iterations)
			r = -ENOMEM;
	}
	return r ? -ENOMEM : 0;
}

void sim_server_metrics_done(struct sim_server *s)
{
	struct sim_histogram *hs[] = { &s->m.ttft,      &s->m.tpot,      &s->m.e2e,    &s->m.queue,
				       &s->m.inference, &s->m.prefill,   &s->m.decode, &s->m.prompt_len,
				       &s->m.gen_len,   &s->m.mean_tpot, &s->lateness };

	for (size_t i = 0; i < ELEMENTSOF(hs); i++)
		sim_histogram_done(hs[i]);
	free(s->iterations);
	s->iterations = NULL;
}

void sim_server_observe_finished(struct sim_server *s, const struct sim_req *r)
{
	struct sim_request_metrics *m = &s->m;
	uint64_t first = r->tokens[0].sched_usec, last = r->tokens[r->n_tokens - 1].sched_usec;
	/* Without the engine (--fixed-itl-ms) a request is scheduled when it arrives. */
	uint64_t sched = r->scheduled_usec ? MIN(r->scheduled_usec, first) : MIN(r->arrival_usec, first);
	double inference = usec_to_sec(last - sched);

	m->finished++;
	m->prompt_tokens += r->n_prompt;
	m->generation_tokens += r->n_tokens;
	m->prefill_seconds += usec_to_sec(first - sched);
	m->decode_seconds += usec_to_sec(last - first);
	sim_histogram_observe(&m->e2e, usec_to_sec(last - MIN(last, r->arrival_usec)));
	sim_histogram_observe(&m->queue, usec_to_sec(sched - MIN(sched, r->arrival_usec)));
	sim_histogram_observe(&m->inference, inference);
	sim_histogram_observe(&m->prefill, usec_to_sec(first - sched));
	sim_histogram_observe(&m->decode, usec_to_sec(last - first));
	sim_histogram_observe(&m->prompt_len, r->n_prompt);
	sim_histogram_observe(&m->gen_len, r->n_tokens);
	sim_histogram_observe(&m->mean_tpot, inference / MAX(r->n_tokens, 1u));
}

static void put_metric(FILE *f, const char *type, const char *name, const char *help, const char *labels, double v)
{
	char b[40];

	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %s\n", name, help, name, type, name, labels,
		sim_metric_number(v, SIM_NUMBER_PYTHON, b, sizeof(b)));
}

static void put_sim_metrics(FILE *f, struct sim_server *s, const char *labels, const struct sim_engine_stats *st)
{
	sim_histogram_put(f, "goodput_sim_pacing_lateness_seconds",
			  "Actual time a token was handed to HTTP minus its scheduled step-end time.", labels,
			  &s->lateness);
	put_metric(f, "counter", "goodput_sim_steps_total", "Engine steps completed.", labels, (double)st->steps);
	put_metric(f, "counter", "goodput_sim_step_busy_seconds_total", "Sum of the emulated step times.", labels,
		   (double)st->busy_usec / 1e6);
	put_metric(f, "gauge", "goodput_sim_last_step_seconds", "Duration of the last emulated step.", labels,
		   (double)st->last_step_usec / 1e6);
	put_metric(f, "gauge", "goodput_sim_last_step_tokens", "Tokens scheduled in the last step.", labels,
		   st->last_step_tokens);
	put_metric(f, "gauge", "goodput_sim_last_step_seqs", "Sequences scheduled in the last step.", labels,
		   st->last_step_seqs);
	put_metric(f, "gauge", "goodput_sim_kv_cache_blocks", "KV-cache blocks (16 tokens each).", labels,
		   (double)st->num_blocks);
	put_metric(f, "gauge", "goodput_sim_kv_cache_used_blocks", "KV-cache blocks held by requests.", labels,
		   (double)st->used_blocks);
	put_metric(f, "counter", "goodput_sim_requests_aborted_total",
		   "Requests dropped because the client went away (KV blocks freed).", labels, (double)s->req_aborted);
	put_metric(f, "counter", "goodput_sim_fault_http500_total", "Requests answered 500 by --fault-http500.", labels,
		   (double)s->faults_http500);
	put_metric(f, "counter", "goodput_sim_fault_bad_sse_total", "Streams broken by --fault-bad-sse.", labels,
		   (double)s->faults_bad_sse);
	put_metric(f, "gauge", "goodput_sim_connections", "Open HTTP connections.", labels, s->n_conns);
	put_metric(f, "gauge", "goodput_sim_request_body_bytes", "Request bodies buffered, all connections.", labels,
		   (double)s->body_bytes);
	fprintf(f, "# HELP goodput_sim_connections_closed_total Connections the server closed, by reason.\n"
		   "# TYPE goodput_sim_connections_closed_total counter\n");
	for (int i = 0; i < _SIM_CLOSE_MAX; i++) {
		static const char *const reasons[_SIM_CLOSE_MAX] = {
			[SIM_CLOSE_IDLE] = "idle_timeout",       [SIM_CLOSE_HEADERS] = "header_timeout",
			[SIM_CLOSE_BODY] = "body_timeout",       [SIM_CLOSE_EVICTED] = "evicted_idle",
			[SIM_CLOSE_BUFFER_FULL] = "buffer_full", [SIM_CLOSE_OVER_LIMIT] = "over_limit",
		};

		fprintf(f, "goodput_sim_connections_closed_total{%s,reason=\"%s\"} %" PRIu64 "\n", labels, reasons[i],
			s->conns_closed[i]);
	}
	fprintf(f, "# HELP goodput_sim_http_responses_total HTTP responses by status class.\n"
		   "# TYPE goodput_sim_http_responses_total counter\n");
	for (int c = 1; c <= 5; c++)
		fprintf(f, "goodput_sim_http_responses_total{%s,code=\"%dxx\"} %" PRIu64 "\n", labels, c,
			s->http_responses[c]);
}

/* One metric family with a series per engine (vLLM V1 labels every
 * engine-side series with its data-parallel rank: engine="0", "1", ...). */
static void put_engines(FILE *f, const char *type, const char *name, const char *help, char *const *labels,
			const double *v, uint32_t n)
{
	char b[40];

	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%s{%s} %s\n", name, labels[i], sim_metric_number(v[i], SIM_NUMBER_PYTHON, b, sizeof(b)));
}

#define ENGINES_MAX 64

char *sim_server_render_metrics(struct sim_server *s)
{
	struct sim_engine_stats st = { 0 }, rs[ENGINES_MAX] = { { 0 } };
	const struct sim_request_metrics *m = &s->m;
	_cleanup_(freep) char *labels = NULL, *sim_labels = NULL;
	char *elabels[ENGINES_MAX] = { NULL };
	double v[ENGINES_MAX];
	uint32_t n = 1, k = 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = NULL;

	if (s->engine) {
		sim_engine_get_stats(s->engine, &st);
		n = MIN(MAX(sim_engine_get_info(s->engine)->replicas, 1u), (uint32_t)ENGINES_MAX);
		k = sim_engine_get_info(s->engine)->spec_k;
		for (uint32_t i = 0; i < n; i++)
			sim_engine_get_replica_stats(s->engine, i, &rs[i]);
	}
	/* vLLM V1's labels; goodput-sim's own series name the model only */
	if (asprintf(&labels, "model_name=\"%s\",engine=\"0\"", s->served_name_json) < 0 ||
	    asprintf(&sim_labels, "model_name=\"%s\"", s->served_name_json) < 0)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		if (asprintf(&elabels[i], "model_name=\"%s\",engine=\"%u\"", s->served_name_json, i) < 0)
			goto fail;
	f = open_memstream(&buf, &len);
	if (!f)
		goto fail;

#define PER_ENGINE(type, name, help, expr)                                                                             \
	do {                                                                                                           \
		for (uint32_t i = 0; i < n; i++)                                                                       \
			v[i] = (double)(expr);                                                                         \
		put_engines(f, type, name, help, elabels, v, n);                                                       \
	} while (0)

	PER_ENGINE("gauge", "vllm:num_requests_running", "Number of requests in model execution batches.",
		   rs[i].running);
	PER_ENGINE("gauge", "vllm:num_requests_waiting", "Number of requests waiting to be processed.", rs[i].waiting);
	PER_ENGINE("gauge", "vllm:gpu_cache_usage_perc",
		   "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
		   rs[i].kv_usage);
	PER_ENGINE("gauge", "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", rs[i].kv_usage);
	PER_ENGINE("counter", "vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
		   rs[i].preemptions);
	/* the fixed-ITL benchmark mode's tokens count on engine 0 */
	PER_ENGINE("counter", "vllm:prompt_tokens_total", "Number of prefill tokens processed.",
		   rs[i].prompt_tokens + (i == 0 ? s->fixed_prompt_tokens : 0));
	PER_ENGINE("counter", "vllm:generation_tokens_total", "Number of generation tokens processed.",
		   rs[i].generation_tokens + (i == 0 ? s->fixed_generation_tokens : 0));
	PER_ENGINE("counter", "vllm:prefix_cache_queries_total",
		   "Prefix cache queries, in terms of number of queried tokens.", rs[i].prefix_cache_queries);
	PER_ENGINE("counter", "vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
		   rs[i].prefix_cache_hits);
	/* vllm/v1/spec_decode/metrics.py: only with speculation configured */
	if (k > 0) {
		char b[40];

		PER_ENGINE("counter", "vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.",
			   rs[i].spec_drafts);
		PER_ENGINE("counter", "vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
			   rs[i].spec_draft_tokens);
		PER_ENGINE("counter", "vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
			   rs[i].spec_accepted);
		fprintf(f, "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft "
			   "position.\n# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n");
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t p = 0; p < k && p < SIM_SPEC_MAX_TOKENS; p++)
				fprintf(f,
					"vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position=\"%u\"} %s\n",
					elabels[i], p,
					sim_metric_number((double)rs[i].spec_accepted_per_pos[p], SIM_NUMBER_PYTHON, b,
							  sizeof(b)));
	}
#undef PER_ENGINE
	/* Every request ends at max_tokens (the sim has no EOS): all "length". */
	fprintf(f,
		"# HELP vllm:request_success_total Count of successfully processed requests.\n"
		"# TYPE vllm:request_success_total counter\n"
		"vllm:request_success_total{%s,finished_reason=\"stop\"} 0\n"
		"vllm:request_success_total{%s,finished_reason=\"length\"} %" PRIu64 "\n"
		"vllm:request_success_total{%s,finished_reason=\"abort\"} %" PRIu64 "\n",
		labels, labels, s->req_finished_length, labels, s->req_aborted);
	sim_histogram_put(f, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", labels,
			  &m->prompt_len);
	sim_histogram_put(f, "vllm:request_generation_tokens", "Number of generation tokens processed.", labels,
			  &m->gen_len);
	sim_histogram_put(f, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
			  &m->ttft);
	sim_histogram_put(f, "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
			  labels, &m->tpot);
	sim_histogram_put(f, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", labels,
			  &m->e2e);
	sim_histogram_put(f, "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
			  labels, &m->queue);
	sim_histogram_put(f, "vllm:request_inference_time_seconds",
			  "Histogram of time spent in RUNNING phase for request.", labels, &m->inference);
	sim_histogram_put(f, "vllm:request_prefill_time_seconds",
			  "Histogram of time spent in PREFILL phase for request.", labels, &m->prefill);
	sim_histogram_put(f, "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
			  labels, &m->decode);

	put_sim_metrics(f, s, sim_labels, &st);
	if (fclose(f) != 0) {
		f = NULL;
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++)
		free(elabels[i]);
	return buf;

fail:
	if (f)
		fclose(f);
	free(buf);
	for (uint32_t i = 0; i < n; i++)
		free(elabels[i]);
	return NULL;
}

char *sim_server_render_dialect_metrics(struct sim_server *s, bool prometheus_route, unsigned *ret_status,
					const char **ret_type)
{
	*ret_status = 200;
	if (s->cfg.dialect.dialect == SIM_DIALECT_VLLM) {
		if (prometheus_route) {
			*ret_status = 404;
			return strdup("Not Found");
		}
		return sim_server_render_metrics(s);
	}
	return sim_server_render_engine_metrics(s, prometheus_route, ret_status, ret_type);
}

char *sim_server_render_props(struct sim_server *s)
{
	const struct sim_dialect_options *d = &s->cfg.dialect;
	_cleanup_(freep) char *path = sim_api_json_escape(d->model_arg ? d->model_arg : s->served_name);
	char *out = NULL;

	if (!path ||
	    asprintf(
		    &out,
		    "{\"default_generation_settings\":{\"id\":0,\"id_task\":-1,\"n_ctx\":%" PRIu32
		    ",\"speculative\":false,\"is_processing\":false,\"non_causal\":false,\"params\":{\"n_predict\":-1,"
		    "\"seed\":4294967295,\"temperature\":0.800000011920929,\"top_k\":40,\"top_p\":0.949999988079071,"
		    "\"min_p\":0.05000000074505806,\"max_tokens\":-1,\"n_keep\":0,\"n_discard\":0,\"ignore_eos\":false,"
		    "\"stream\":true,\"n_probs\":0,\"speculative.n_max\":16,\"speculative.n_min\":0,"
		    "\"speculative.p_min\":0.75},\"prompt\":\"\",\"next_token\":{\"has_next_token\":true,"
		    "\"has_new_line\":false,\"n_remain\":-1,\"n_decoded\":0,\"stopping_word\":\"\"}},"
		    "\"total_slots\":%" PRIu32 ",\"model_path\":\"%s\",\"chat_template\":\"\",\"bos_token\":\"<s>\","
		    "\"eos_token\":\"</s>\",\"build_info\":\"b%d-%s\"}",
		    s->max_model_len, d->slots ? d->slots : 1, path, sim_llamacpp_build(d), sim_llamacpp_commit(d)) < 0)
		return NULL;
	return out;
}

char *sim_server_render_models(struct sim_server *s)
{
	char *out = NULL;

	if (asprintf(&out,
		     "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\",\"created\":%" PRIu64
		     ",\"owned_by\":\"goodput-sim\",\"root\":\"%s\",\"parent\":null,\"max_model_len\":%" PRIu32 "}]}",
		     s->served_name_json, (uint64_t)(real_usec() / USEC_PER_SEC), s->served_name_json,
		     s->max_model_len) < 0)
		return NULL;
	return out;
}
