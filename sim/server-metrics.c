/* server-metrics.c — goodput-sim's Prometheus /metrics and /v1/models.
 *
 * Metric names follow vLLM's (vllm:num_requests_running, ...) so that
 * dashboards and goodput's own scrapers read the sim as they read vLLM; each
 * carries vLLM's model_name label. The sim adds goodput_sim_* metrics of its
 * own, chiefly goodput_sim_pacing_lateness_seconds: the actual time a token's
 * chunk was handed to the HTTP layer minus its scheduled step-end time, so
 * that a host whose CPU cannot keep up with a fast emulated GPU shows it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "server-internal.h"
#include "time-util.h"

static const double ttft_bounds[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,  0.75,
				      1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160., 640., 2560. };
static const double tpot_bounds[] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
				      0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0 };
static const double e2e_bounds[] = { 0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0, 15.0,
				     20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0 };
static const double late_bounds[] = { 0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0015, 0.002,
				      0.003,   0.005,  0.0075, 0.01,   0.02,   0.05,    0.1,   0.25,   1.0 };

void sim_histogram_init(struct sim_histogram *h, const double *bounds, size_t n_bounds)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->n_bounds = MIN(n_bounds, ELEMENTSOF(h->counts) - 1);
}

void sim_histogram_observe(struct sim_histogram *h, double v)
{
	size_t i = 0;

	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->count++;
	h->sum += v;
}

void sim_server_metrics_init(struct sim_server *s)
{
	sim_histogram_init(&s->ttft, ttft_bounds, ELEMENTSOF(ttft_bounds));
	sim_histogram_init(&s->tpot, tpot_bounds, ELEMENTSOF(tpot_bounds));
	sim_histogram_init(&s->e2e, e2e_bounds, ELEMENTSOF(e2e_bounds));
	sim_histogram_init(&s->queue_time, e2e_bounds, ELEMENTSOF(e2e_bounds));
	sim_histogram_init(&s->lateness, late_bounds, ELEMENTSOF(late_bounds));
}

static void put_histogram(FILE *f, const char *name, const char *help, const char *labels,
			  const struct sim_histogram *h)
{
	uint64_t cum = 0;

	fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (size_t i = 0; i < h->n_bounds; i++) {
		cum += h->counts[i];
		fprintf(f, "%s_bucket{%s,le=\"%g\"} %" PRIu64 "\n", name, labels, h->bounds[i], cum);
	}
	cum += h->counts[h->n_bounds];
	fprintf(f, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels, cum);
	fprintf(f, "%s_sum{%s} %.9g\n%s_count{%s} %" PRIu64 "\n", name, labels, h->sum, name, labels, h->count);
}

static void put_metric(FILE *f, const char *type, const char *name, const char *help, const char *labels, double v)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %.17g\n", name, help, name, type, name, labels, v);
}

char *sim_server_render_metrics(struct sim_server *s)
{
	struct sim_engine_stats st = { 0 };
	_cleanup_(freep) char *labels = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (s->engine)
		sim_engine_get_stats(s->engine, &st);
	if (asprintf(&labels, "model_name=\"%s\"", s->served_name_json) < 0)
		return NULL;
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;

	put_metric(f, "gauge", "vllm:num_requests_running", "Number of requests in model execution batches.", labels,
		   st.running);
	put_metric(f, "gauge", "vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
		   st.waiting);
	put_metric(f, "gauge", "vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", labels,
		   st.kv_usage);
	put_metric(f, "gauge", "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels,
		   st.kv_usage);
	put_metric(f, "counter", "vllm:num_preemptions_total", "Cumulative number of preemptions.", labels,
		   (double)st.preemptions);
	put_metric(f, "counter", "vllm:prompt_tokens_total", "Number of prefill tokens processed.", labels,
		   (double)(st.prompt_tokens + s->fixed_prompt_tokens));
	put_metric(f, "counter", "vllm:generation_tokens_total", "Number of generation tokens processed.", labels,
		   (double)(st.generation_tokens + s->fixed_generation_tokens));
	put_metric(f, "counter", "vllm:prefix_cache_queries_total", "Prefix-cache queries, in tokens.", labels,
		   (double)st.prefix_cache_queries);
	put_metric(f, "counter", "vllm:prefix_cache_hits_total", "Prefix-cache hits, in tokens.", labels,
		   (double)st.prefix_cache_hits);
	fprintf(f,
		"# HELP vllm:request_success_total Count of successfully processed requests.\n"
		"# TYPE vllm:request_success_total counter\n"
		"vllm:request_success_total{%s,finished_reason=\"length\"} %" PRIu64 "\n",
		labels, s->req_finished_length);
	put_histogram(f, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
		      &s->ttft);
	put_histogram(f, "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", labels,
		      &s->tpot);
	put_histogram(f, "vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
		      labels, &s->e2e);
	put_histogram(f, "vllm:request_queue_time_seconds",
		      "Histogram of time from arrival to the first scheduled token (simulated queue + prefill).",
		      labels, &s->queue_time);

	put_histogram(f, "goodput_sim_pacing_lateness_seconds",
		      "Actual time a token was handed to HTTP minus its scheduled step-end time.", labels,
		      &s->lateness);
	put_metric(f, "counter", "goodput_sim_steps_total", "Engine steps completed.", labels, (double)st.steps);
	put_metric(f, "counter", "goodput_sim_step_busy_seconds_total", "Sum of the emulated step times.", labels,
		   (double)st.busy_usec / 1e6);
	put_metric(f, "gauge", "goodput_sim_last_step_seconds", "Duration of the last emulated step.", labels,
		   (double)st.last_step_usec / 1e6);
	put_metric(f, "gauge", "goodput_sim_last_step_tokens", "Tokens scheduled in the last step.", labels,
		   st.last_step_tokens);
	put_metric(f, "gauge", "goodput_sim_last_step_seqs", "Sequences scheduled in the last step.", labels,
		   st.last_step_seqs);
	put_metric(f, "gauge", "goodput_sim_kv_cache_blocks", "KV-cache blocks (16 tokens each).", labels,
		   (double)st.num_blocks);
	put_metric(f, "gauge", "goodput_sim_kv_cache_used_blocks", "KV-cache blocks held by requests.", labels,
		   (double)st.used_blocks);
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
			[SIM_CLOSE_BUFFER_FULL] = "buffer_full",
		};

		fprintf(f, "goodput_sim_connections_closed_total{%s,reason=\"%s\"} %" PRIu64 "\n", labels, reasons[i],
			s->conns_closed[i]);
	}
	fprintf(f, "# HELP goodput_sim_http_responses_total HTTP responses by status class.\n"
		   "# TYPE goodput_sim_http_responses_total counter\n");
	for (int c = 1; c <= 5; c++)
		fprintf(f, "goodput_sim_http_responses_total{%s,code=\"%dxx\"} %" PRIu64 "\n", labels, c,
			s->http_responses[c]);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
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
