/* prom-map.c — the canonical server series and the names engines export
 * them under (see prom-map.h). */
#include "prom-map.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"

const char *const probe_series_names[] = {
	[PROBE_SERIES_RUNNING] = "running",
	[PROBE_SERIES_WAITING] = "waiting",
	[PROBE_SERIES_KV_USAGE] = "kv_cache_usage",
	[PROBE_SERIES_PREEMPTIONS] = "preemptions",
	[PROBE_SERIES_PROMPT_TOKENS] = "prompt_tokens",
	[PROBE_SERIES_GENERATION_TOKENS] = "generation_tokens",
	[PROBE_SERIES_REQUESTS] = "requests",
	[PROBE_SERIES_PREFIX_QUERIES] = "prefix_cache_queries",
	[PROBE_SERIES_PREFIX_HITS] = "prefix_cache_hits",
	[PROBE_SERIES_PROMPT_LENGTH] = "prompt_length",
	[PROBE_SERIES_GENERATION_LENGTH] = "generation_length",
	[PROBE_SERIES_SPEC_DRAFTS] = "spec_drafts",
	[PROBE_SERIES_SPEC_DRAFT_TOKENS] = "spec_draft_tokens",
	[PROBE_SERIES_SPEC_ACCEPTED] = "spec_accepted_tokens",
	[PROBE_SERIES_SPEC_ACCEPT_LENGTH] = "spec_accept_length",
	[_PROBE_SERIES_MAX] = NULL,
};

const char *const probe_metrics_format_names[] = {
	[PROBE_METRICS_PROMETHEUS] = "prometheus",
	[PROBE_METRICS_TRTLLM_JSON] = "trtllm_iteration_json",
	[_PROBE_METRICS_FORMAT_MAX] = NULL,
};

bool probe_series_is_counter(enum probe_series s)
{
	return s == PROBE_SERIES_PREEMPTIONS || s == PROBE_SERIES_PROMPT_TOKENS ||
	       s == PROBE_SERIES_GENERATION_TOKENS || s == PROBE_SERIES_REQUESTS || s == PROBE_SERIES_PREFIX_QUERIES ||
	       s == PROBE_SERIES_PREFIX_HITS || s == PROBE_SERIES_SPEC_DRAFTS || s == PROBE_SERIES_SPEC_DRAFT_TOKENS ||
	       s == PROBE_SERIES_SPEC_ACCEPTED;
}

bool probe_series_is_histogram(enum probe_series s)
{
	return s == PROBE_SERIES_PROMPT_LENGTH || s == PROBE_SERIES_GENERATION_LENGTH;
}

int probe_series_from_string(const char *s)
{
	for (int i = 0; s && i < _PROBE_SERIES_MAX; i++)
		if (strcmp(s, probe_series_names[i]) == 0)
			return i;
	return -EINVAL;
}

void probe_metrics_map_init(struct probe_metrics_map *m)
{
	memset(m, 0, sizeof(*m));
	m->format = PROBE_METRICS_PROMETHEUS;
}

bool probe_metrics_map_is_empty(const struct probe_metrics_map *m)
{
	for (size_t i = 0; i < _PROBE_SERIES_MAX; i++)
		if (m->n_refs[i] > 0)
			return false;
	return true;
}

/* Metric names and JSON paths: letters, digits, '_', ':' and '.'. */
static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n >= PROBE_METRIC_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == ':' || c == '.'))
			return false;
	}
	return true;
}

static void trim(const char **s, size_t *n)
{
	while (*n > 0 && **s == ' ') {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && (*s)[*n - 1] == ' ')
		(*n)--;
}

int probe_metrics_map_add(struct probe_metrics_map *m, enum probe_series s, const char *name, struct error *err)
{
	const char *slash = strchr(name, '/'), *a = name, *b = slash ? slash + 1 : NULL;
	size_t na = slash ? (size_t)(slash - name) : strlen(name), nb = b ? strlen(b) : 0;
	struct probe_metric_ref *ref;

	if ((unsigned)s >= _PROBE_SERIES_MAX)
		return error_set(err, -EINVAL, "unknown series");
	if (m->n_refs[s] >= PROBE_SERIES_MAX_REFS)
		return error_set(err, -E2BIG, "%s: more than %d names", probe_series_names[s], PROBE_SERIES_MAX_REFS);
	trim(&a, &na);
	if (b)
		trim(&b, &nb);
	if (b && probe_series_is_histogram(s))
		return error_set(err, -EINVAL, "%s: \"%s\": a histogram is one metric, not a ratio",
				 probe_series_names[s], name);
	if (!name_ok(a, na) || (b && !name_ok(b, nb)))
		return error_set(
			err, -EINVAL,
			"%s: \"%s\" is not a metric name, nor \"name / name\" (letters, digits, '_', ':', '.')",
			probe_series_names[s], name);
	ref = &m->refs[s][m->n_refs[s]++];
	snprintf(ref->name, sizeof(ref->name), "%.*s", (int)na, a);
	snprintf(ref->per, sizeof(ref->per), "%.*s", (int)nb, b ? b : "");
	return 0;
}

void probe_metrics_map_init_default(struct probe_metrics_map *m)
{
	static const struct {
		enum probe_series s;
		const char *name;
	} names[] = {
		{ PROBE_SERIES_RUNNING, "vllm:num_requests_running" },
		{ PROBE_SERIES_RUNNING, "sglang:num_running_reqs" },
		{ PROBE_SERIES_RUNNING, "llamacpp:requests_processing" },
		{ PROBE_SERIES_RUNNING, "tgi_batch_current_size" },
		{ PROBE_SERIES_WAITING, "vllm:num_requests_waiting" },
		{ PROBE_SERIES_WAITING, "sglang:num_queue_reqs" },
		{ PROBE_SERIES_WAITING, "llamacpp:requests_deferred" },
		{ PROBE_SERIES_WAITING, "tgi_queue_size" },
		{ PROBE_SERIES_KV_USAGE, "vllm:kv_cache_usage_perc" },
		{ PROBE_SERIES_KV_USAGE, "vllm:gpu_cache_usage_perc" },
		{ PROBE_SERIES_KV_USAGE, "sglang:token_usage" },
		{ PROBE_SERIES_KV_USAGE, "llamacpp:kv_cache_usage_ratio" },
		{ PROBE_SERIES_PREEMPTIONS, "vllm:num_preemptions_total" },
		{ PROBE_SERIES_PROMPT_TOKENS, "vllm:prompt_tokens_total" },
		{ PROBE_SERIES_PROMPT_TOKENS, "sglang:prompt_tokens_total" },
		{ PROBE_SERIES_PROMPT_TOKENS, "llamacpp:prompt_tokens_total" },
		{ PROBE_SERIES_PROMPT_TOKENS, "tgi_request_input_length_sum" },
		{ PROBE_SERIES_GENERATION_TOKENS, "vllm:generation_tokens_total" },
		{ PROBE_SERIES_GENERATION_TOKENS, "sglang:generation_tokens_total" },
		{ PROBE_SERIES_GENERATION_TOKENS, "llamacpp:tokens_predicted_total" },
		{ PROBE_SERIES_GENERATION_TOKENS, "tgi_request_generated_tokens_sum" },
		{ PROBE_SERIES_REQUESTS, "vllm:request_success_total" },
		{ PROBE_SERIES_REQUESTS, "sglang:num_requests_total" },
		{ PROBE_SERIES_REQUESTS, "tgi_request_success" },
		{ PROBE_SERIES_PREFIX_QUERIES, "vllm:prefix_cache_queries_total" },
		{ PROBE_SERIES_PREFIX_HITS, "vllm:prefix_cache_hits_total" },
		{ PROBE_SERIES_SPEC_DRAFTS, "vllm:spec_decode_num_drafts_total" },
		{ PROBE_SERIES_SPEC_DRAFT_TOKENS, "vllm:spec_decode_num_draft_tokens_total" },
		{ PROBE_SERIES_SPEC_ACCEPTED, "vllm:spec_decode_num_accepted_tokens_total" },
		{ PROBE_SERIES_SPEC_ACCEPT_LENGTH, "sglang:spec_accept_length" },
		{ PROBE_SERIES_PROMPT_LENGTH, "vllm:request_prompt_tokens" },
		{ PROBE_SERIES_PROMPT_LENGTH, "sglang:prompt_tokens_histogram" },
		{ PROBE_SERIES_PROMPT_LENGTH, "tgi_request_input_length" },
		{ PROBE_SERIES_GENERATION_LENGTH, "vllm:request_generation_tokens" },
		{ PROBE_SERIES_GENERATION_LENGTH, "sglang:generation_tokens_histogram" },
		{ PROBE_SERIES_GENERATION_LENGTH, "tgi_request_generated_tokens" },
	};

	probe_metrics_map_init(m);
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		(void)probe_metrics_map_add(m, names[i].s, names[i].name, NULL);
}
