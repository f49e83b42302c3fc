/* server-metrics-engines.c — /metrics as SGLang, TGI, llama.cpp and
 * TensorRT-LLM serve it (vLLM's is server-metrics.c).
 *
 * Names, types and buckets are the engines' own:
 *  - SGLang (python/sglang/srt/metrics/collector.py): sglang:num_running_reqs,
 *    num_queue_reqs, token_usage, prompt/generation_tokens_total, the TTFT,
 *    inter-token and end-to-end histograms, and with
 *    --collect-tokens-histogram the prompt and generation length histograms
 *    (default_bucket_prompt_tokens); only with --enable-metrics (404
 *    otherwise, FastAPI's {"detail":"Not Found"}).
 *  - TGI (router/src/server.rs, metrics-exporter-prometheus): tgi_queue_size,
 *    tgi_batch_current_size, tgi_batch_current_max_tokens,
 *    tgi_batch_max_total_tokens, tgi_request_* histograms (durations in 35
 *    geometric buckets, lengths in 100 linear ones), no HELP lines, no labels.
 *  - llama.cpp (b4748, tools/server): llamacpp:* counters and gauges without
 *    labels; kv_cache_usage_ratio and kv_cache_tokens were still there then
 *    (removed in ~b5450 by #13660); only with --metrics (501 otherwise).
 *  - TensorRT-LLM (tensorrt_llm/serve/openai_server.py): /metrics answers a
 *    JSON array of the iteration statistics gathered since the last request
 *    (empty unless enable_iter_perf_stats); /prometheus/metrics carries
 *    trtllm_* when return_perf_metrics is set (404 otherwise). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "server-internal.h"
#include "time-util.h"

static FILE *page(char **buf, size_t *len)
{
	*buf = NULL;
	*len = 0;
	return open_memstream(buf, len);
}

/* The page's text: open_memstream sets the buffer only when the stream closes. */
static char *done(FILE *f, char **buf)
{
	if (fclose(f) != 0) {
		free(*buf);
		return NULL;
	}
	return *buf;
}

/* How the page being written prints its numbers (sim_metric_number). */
static enum sim_number_style number_style;

static void put(FILE *f, const char *type, const char *name, const char *help, const char *labels, double v)
{
	char val[40];

	sim_metric_number(v, number_style, val, sizeof(val));
	if (help)
		fprintf(f, "# HELP %s %s\n", name, help);
	fprintf(f, "# TYPE %s %s\n", name, type);
	if (labels[0])
		fprintf(f, "%s{%s} %s\n", name, labels, val);
	else
		fprintf(f, "%s %s\n", name, val);
}

static void gauge(FILE *f, const char *name, const char *help, const char *labels, double v)
{
	put(f, "gauge", name, help, labels, v);
}

static void counter(FILE *f, const char *name, const char *help, const char *labels, double v)
{
	put(f, "counter", name, help, labels, v);
}

static char *sglang_page(struct sim_server *s, const struct sim_engine_stats *st)
{
	const struct sim_request_metrics *m = &s->m;
	_cleanup_(freep) char *labels = NULL;
	char *buf;
	size_t len;
	FILE *f;

	if (asprintf(&labels, "model_name=\"%s\"", s->served_name_json) < 0)
		return NULL;
	f = page(&buf, &len);
	if (!f)
		return NULL;
	gauge(f, "sglang:num_running_reqs", "The number of running requests.", labels, st->running);
	gauge(f, "sglang:num_used_tokens", "The number of used tokens.", labels,
	      (double)st->used_blocks * SIM_BLOCK_SIZE);
	gauge(f, "sglang:token_usage", "The token usage.", labels, st->kv_usage);
	gauge(f, "sglang:num_queue_reqs", "The number of requests in the waiting queue.", labels, st->waiting);
	gauge(f, "sglang:cache_hit_rate", "The prefix cache hit rate.", labels,
	      st->prefix_cache_queries ? (double)st->prefix_cache_hits / (double)st->prefix_cache_queries : 0.0);
	gauge(f, "sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", labels,
	      (double)st->num_blocks * SIM_BLOCK_SIZE);
	counter(f, "sglang:prompt_tokens_total", "Number of prefill tokens processed.", labels,
		(double)m->prompt_tokens);
	counter(f, "sglang:generation_tokens_total", "Number of generation tokens processed.", labels,
		(double)m->generation_tokens);
	counter(f, "sglang:cached_tokens_total", "Number of cached prompt tokens.", labels,
		(double)st->prefix_cache_hits);
	counter(f, "sglang:num_requests_total", "Number of requests processed.", labels, (double)m->finished);
	/* speculative decoding: the mean tokens a draft step gives, its bonus token included */
	if (s->engine && sim_engine_get_info(s->engine)->spec_k > 0)
		gauge(f, "sglang:spec_accept_length", "The average acceptance length of speculative decoding.", labels,
		      st->spec_drafts ? 1.0 + (double)st->spec_accepted / (double)st->spec_drafts : 1.0);
	sim_histogram_put(f, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
			  labels, &m->ttft);
	sim_histogram_put(f, "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
			  labels, &m->tpot);
	sim_histogram_put(f, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
			  labels, &m->e2e);
	if (s->cfg.dialect.tokens_histogram) {
		sim_histogram_put(f, "sglang:prompt_tokens_histogram", "Histogram of prompt token length.", labels,
				  &m->prompt_len);
		sim_histogram_put(f, "sglang:generation_tokens_histogram", "Histogram of generation token length.",
				  labels, &m->gen_len);
	}
	return done(f, &buf);
}

static char *tgi_page(struct sim_server *s, const struct sim_engine_stats *st)
{
	const struct sim_request_metrics *m = &s->m;
	char *buf;
	size_t len;
	FILE *f = page(&buf, &len);

	if (!f)
		return NULL;
	counter(f, "tgi_request_count", NULL, "", (double)(m->finished + s->req_aborted));
	counter(f, "tgi_request_success", NULL, "", (double)m->finished);
	gauge(f, "tgi_queue_size", NULL, "", st->waiting);
	gauge(f, "tgi_batch_current_size", NULL, "", st->running);
	gauge(f, "tgi_batch_current_max_tokens", NULL, "", (double)st->used_blocks * SIM_BLOCK_SIZE);
	gauge(f, "tgi_batch_max_total_tokens", NULL, "", (double)st->num_blocks * SIM_BLOCK_SIZE);
	sim_histogram_put_rust(f, "tgi_request_duration", "", &m->e2e);
	sim_histogram_put_rust(f, "tgi_request_queue_duration", "", &m->queue);
	sim_histogram_put_rust(f, "tgi_request_inference_duration", "", &m->inference);
	sim_histogram_put_rust(f, "tgi_request_mean_time_per_token_duration", "", &m->mean_tpot);
	sim_histogram_put_rust(f, "tgi_request_input_length", "", &m->prompt_len);
	sim_histogram_put_rust(f, "tgi_request_generated_tokens", "", &m->gen_len);
	return done(f, &buf);
}

static char *llamacpp_page(struct sim_server *s, const struct sim_engine_stats *st)
{
	const struct sim_request_metrics *m = &s->m;
	char *buf;
	size_t len;
	FILE *f = page(&buf, &len);
	double ctx = (double)s->ecfg.kv_tokens_fixed;

	if (!f)
		return NULL;
	/* all_metrics_def: counters, then gauges, each "llamacpp:" + name, no labels */
	counter(f, "llamacpp:prompt_tokens_total", "Number of prompt tokens processed.", "", (double)m->prompt_tokens);
	counter(f, "llamacpp:prompt_seconds_total", "Prompt process time", "", m->prefill_seconds);
	counter(f, "llamacpp:tokens_predicted_total", "Number of generation tokens processed.", "",
		(double)m->generation_tokens);
	counter(f, "llamacpp:tokens_predicted_seconds_total", "Predict process time", "", m->decode_seconds);
	counter(f, "llamacpp:n_decode_total", "Total number of llama_decode() calls", "", (double)m->decode_steps);
	counter(f, "llamacpp:n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", "",
		(double)m->busy_slots / (double)MAX(m->decode_steps, UINT64_C(1)));
	gauge(f, "llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s.", "",
	      m->prefill_seconds > 0 ? (double)m->prompt_tokens / m->prefill_seconds : 0.0);
	gauge(f, "llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s.", "",
	      m->decode_seconds > 0 ? (double)m->generation_tokens / m->decode_seconds : 0.0);
	gauge(f, "llamacpp:kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", "",
	      ctx > 0 ? (double)st->used_blocks * SIM_BLOCK_SIZE / ctx : 0.0);
	gauge(f, "llamacpp:kv_cache_tokens", "KV-cache tokens.", "", (double)st->used_blocks * SIM_BLOCK_SIZE);
	gauge(f, "llamacpp:requests_processing", "Number of requests processing.", "", st->running);
	gauge(f, "llamacpp:requests_deferred", "Number of requests deferred.", "", st->waiting);
	return done(f, &buf);
}

static char *trtllm_prometheus(struct sim_server *s)
{
	const struct sim_request_metrics *m = &s->m;
	static const char labels[] = "model_name=\"undefined\",engine_type=\"undefined\"";
	char *buf;
	size_t len;
	FILE *f = page(&buf, &len);

	if (!f)
		return NULL;
	fprintf(f,
		"# HELP trtllm_request_success_total Count of successfully processed requests.\n"
		"# TYPE trtllm_request_success_total counter\n"
		"trtllm_request_success_total{%s,finished_reason=\"length\"} %" PRIu64 "\n",
		labels, m->finished);
	sim_histogram_put(f, "trtllm_e2e_request_latency_seconds",
			  "Histogram of end to end request latency in seconds.", labels, &m->e2e);
	sim_histogram_put(f, "trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.",
			  labels, &m->ttft);
	sim_histogram_put(f, "trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.",
			  labels, &m->tpot);
	sim_histogram_put(f, "trtllm_request_queue_time_seconds",
			  "Histogram of time spent in WAITING phase for request.", labels, &m->queue);
	return done(f, &buf);
}

/* The iteration statistics since the last request, oldest first; the
 * queue is emptied (trtllm-serve's get_stats_async). Blocks are counted in
 * TensorRT-LLM's 32-token blocks (the engine's are 16). */
static char *trtllm_iterations(struct sim_server *s)
{
	char *buf;
	size_t len;
	FILE *f = page(&buf, &len);
	char ts[40];
	time_t now = time(NULL);
	struct tm tm;

	if (!f)
		return NULL;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%m-%d-%Y %H:%M:%S", &tm);
	fputc('[', f);
	for (size_t k = 0; k < s->iter_len; k++) {
		const struct sim_iteration *it = &s->iterations[(s->iter_head + k) % SIM_ITERATIONS_MAX];

		fprintf(f,
			"%s{\"cpuMemUsage\":0,\"gpuMemUsage\":%.0f,\"iter\":%" PRIu64 ",\"iterLatencyMS\":%.3f,"
			"\"maxBatchSizeRuntime\":%u,\"maxNumActiveRequests\":%u,\"maxNumTokensRuntime\":%u,"
			"\"numActiveRequests\":%u,\"numCompletedRequests\":%u,\"numNewActiveRequests\":0,"
			"\"numQueuedRequests\":%u,\"pinnedMemUsage\":0,\"timestamp\":\"%s\","
			"\"inflightBatchingStats\":{\"avgNumDecodedTokensPerIter\":1.0,\"microBatchId\":0,"
			"\"numContextRequests\":%u,\"numCtxTokens\":%u,\"numGenRequests\":%u,\"numPausedRequests\":0,"
			"\"numScheduledRequests\":%u},"
			"\"kvCacheStats\":{\"allocNewBlocks\":0,\"allocTotalBlocks\":%" PRIu64 ",\"cacheHitRate\":0.0,"
			"\"freeNumBlocks\":%" PRIu64 ",\"maxNumBlocks\":%" PRIu64
			",\"missedBlocks\":0,\"reusedBlocks\":0,"
			"\"tokensPerBlock\":%d,\"usedNumBlocks\":%" PRIu64 "}}",
			k ? "," : "", s->info ? s->info->memory.weights : 0.0, it->iter, (double)it->usec / 1000.0,
			s->ecfg.max_num_seqs, s->ecfg.max_num_seqs, s->ecfg.max_num_batched_tokens, it->running,
			it->completed, it->waiting, ts, it->ctx_requests, it->ctx_tokens, it->gen_requests,
			it->scheduled, (it->used_blocks + 1) / 2,
			(it->max_blocks - MIN(it->used_blocks, it->max_blocks)) / 2, it->max_blocks / 2,
			2 * SIM_BLOCK_SIZE, (it->used_blocks + 1) / 2);
	}
	fputc(']', f);
	s->iter_head = s->iter_len = 0;
	return done(f, &buf);
}

char *sim_server_render_engine_metrics(struct sim_server *s, bool prometheus_route, unsigned *ret_status,
				       const char **ret_type)
{
	struct sim_engine_stats st = { 0 };
	const struct sim_dialect_options *d = &s->cfg.dialect;

	if (s->engine)
		sim_engine_get_stats(s->engine, &st);
	*ret_status = 200;
	number_style = d->dialect == SIM_DIALECT_LLAMACPP ? SIM_NUMBER_CXX
		       : d->dialect == SIM_DIALECT_TGI    ? SIM_NUMBER_RUST
							  : SIM_NUMBER_PYTHON;
	if (d->dialect == SIM_DIALECT_TRTLLM) {
		if (!prometheus_route) {
			*ret_type = "application/json";
			return d->iter_perf_stats ? trtllm_iterations(s) : strdup("[]");
		}
		if (!d->perf_metrics) {
			*ret_status = 404;
			return strdup("Not Found");
		}
		return trtllm_prometheus(s);
	}
	if (prometheus_route) {
		*ret_status = 404;
		return strdup("Not Found");
	}
	switch (d->dialect) {
	case SIM_DIALECT_SGLANG:
		if (!d->metrics_enabled) {
			*ret_status = 404;
			return strdup("Not Found");
		}
		return sglang_page(s, &st);
	case SIM_DIALECT_TGI:
		return tgi_page(s, &st);
	case SIM_DIALECT_LLAMACPP:
		if (!d->metrics_enabled) {
			*ret_status = 501;
			return strdup("This server does not support metrics endpoint. Start it with `--metrics`");
		}
		return llamacpp_page(s, &st);
	default:
		return sim_server_render_metrics(s);
	}
}

void sim_server_engine_step(void *userdata, uint64_t start_usec, uint64_t end_usec, const struct sim_batch *b)
{
	struct sim_server *s = userdata;
	struct sim_engine_stats st;
	struct sim_iteration *it;

	s->m.decode_steps++;
	s->m.busy_slots += b->n_decode + b->n_chunks;
	if (!s->iterations || !s->cfg.dialect.iter_perf_stats || !s->engine)
		return;
	sim_engine_get_stats(s->engine, &st);
	if (s->iter_len == SIM_ITERATIONS_MAX) {
		/* Full: the oldest gives way, as the executor's bounded queue does. */
		s->iter_head = (s->iter_head + 1) % SIM_ITERATIONS_MAX;
		s->iter_len--;
	}
	it = &s->iterations[(s->iter_head + s->iter_len++) % SIM_ITERATIONS_MAX];
	*it = (struct sim_iteration){
		.iter = s->iter_count++,
		.usec = end_usec - start_usec,
		.end_usec = end_usec,
		.running = st.running,
		.waiting = st.waiting,
		.scheduled = b->n_decode + b->n_chunks,
		.ctx_requests = b->n_chunks,
		.gen_requests = b->n_decode,
		.ctx_tokens = (uint32_t)b->chunk_tokens,
		.used_blocks = st.used_blocks,
		.max_blocks = st.num_blocks,
	};
}
