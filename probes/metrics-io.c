/* metrics-io.c — a load point's result as JSON (written and read back) and as
 * the table people read.
 *
 * The JSON is goodput's one result object (DESIGN.md): vLLM's key names for
 * what vLLM reports ("completed", "mean_ttft_ms", "p99_tpot_ms",
 * "request_goodput", "request_rate": "inf" for an unbounded rate, ...) so
 * scripts written for `vllm bench serve --save-result` read it unchanged, and
 * goodput's own keys beside them ("attainment", "good_output_throughput",
 * "sla_met", "sla", "metric_percentiles", "server"). Numbers are written with
 * cJSON's round-trip precision, so from_json(to_json(r)) == r.
 *
 * The table copies vLLM's layout ("{:<40} {:<10.2f}", 50-column rules) and
 * adds goodput's SLA lines at the end. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "metrics.h"

static const char *const metric_titles[_PROBE_METRIC_MAX] = {
	"TTFT",
	"TPOT",
	"ITL",
	"E2EL",
};
static const char *const metric_headers[_PROBE_METRIC_MAX] = {
	"Time to First Token",
	"Time per Output Token (excl. 1st token)",
	"Inter-token Latency",
	"End-to-end Latency",
};

/* vLLM's p_word: "99" for integers, Python's str(float) otherwise ("99.9"). */
static void pct_word(double p, char *buf, size_t size)
{
	if (p == floor(p))
		snprintf(buf, size, "%.0f", p);
	else
		snprintf(buf, size, "%.15g", p);
}

static void stat_key(char *buf, size_t size, const char *what, enum probe_metric m)
{
	snprintf(buf, size, "%s_%s_ms", what, probe_metric_name(m));
}

static int add_server(cJSON *obj, const struct probe_server_metrics *s)
{
	cJSON *o = cJSON_CreateObject();
	int r = 0;

	if (!o)
		return -ENOMEM;
	if (!cJSON_AddItemToObject(obj, "server", o)) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	if (json_add_number(o, "kv_cache_usage_mean", s->kv_usage_mean) < 0 ||
	    json_add_number(o, "kv_cache_usage_peak", s->kv_usage_peak) < 0 ||
	    json_add_number(o, "num_requests_running_mean", s->running_mean) < 0 ||
	    json_add_number(o, "num_requests_running_peak", s->running_peak) < 0 ||
	    json_add_number(o, "num_requests_waiting_mean", s->waiting_mean) < 0 ||
	    json_add_number(o, "num_requests_waiting_peak", s->waiting_peak) < 0 ||
	    json_add_number(o, "num_preemptions", s->preemptions) < 0 ||
	    json_add_number(o, "samples", (double)s->samples) < 0)
		r = -ENOMEM;
	return r;
}

int probe_result_to_json(const struct probe_result *r, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	cJSON *arr;
	char key[64], sla[512];
	int q = 0;

	if (!o)
		return -ENOMEM;
	if (isinf(r->request_rate))
		q |= json_add_string(o, "request_rate", "inf");
	else
		q |= json_add_number(o, "request_rate", r->request_rate);
	q |= json_add_number(o, "burstiness", r->burstiness);
	if (r->max_concurrency)
		q |= json_add_number(o, "max_concurrency", r->max_concurrency);
	else if (!cJSON_AddNullToObject(o, "max_concurrency"))
		q = -ENOMEM;
	q |= json_add_number(o, "num_prompts", r->num_prompts);
	q |= json_add_number(o, "duration", r->duration_s);
	q |= json_add_number(o, "completed", r->completed);
	q |= json_add_number(o, "failed", r->failed);
	q |= json_add_number(o, "total_input_tokens", (double)r->total_input_tokens);
	q |= json_add_number(o, "total_output_tokens", (double)r->total_output_tokens);
	q |= json_add_number(o, "request_throughput", r->request_throughput);
	q |= json_add_number(o, "request_goodput", r->request_goodput);
	q |= json_add_number(o, "output_throughput", r->output_throughput);
	q |= json_add_number(o, "total_token_throughput", r->total_token_throughput);
	q |= json_add_number(o, "max_concurrent_requests", r->max_concurrent_requests);
	q |= json_add_number(o, "mean_concurrency", r->mean_concurrency);
	for (int m = 0; m < _PROBE_METRIC_MAX; m++) {
		const struct probe_stat *s = &r->stat[m];

		stat_key(key, sizeof(key), "mean", m);
		q |= json_add_number(o, key, s->mean_ms);
		stat_key(key, sizeof(key), "median", m);
		q |= json_add_number(o, key, s->median_ms);
		stat_key(key, sizeof(key), "std", m);
		q |= json_add_number(o, key, s->std_ms);
		for (size_t k = 0; k < r->n_percentiles; k++) {
			char w[32];

			pct_word(r->percentiles[k], w, sizeof(w));
			snprintf(key, sizeof(key), "p%s_%s_ms", w, probe_metric_name(m));
			q |= json_add_number(o, key, s->pct_ms[k]);
		}
		snprintf(key, sizeof(key), "n_%s", probe_metric_name(m));
		q |= json_add_number(o, key, (double)s->n);
	}
	arr = cJSON_AddArrayToObject(o, "metric_percentiles");
	if (!arr)
		return -ENOMEM;
	for (size_t k = 0; k < r->n_percentiles; k++) {
		cJSON *n = cJSON_CreateNumber(r->percentiles[k]);

		if (!n || !cJSON_AddItemToArray(arr, n)) {
			cJSON_Delete(n);
			return -ENOMEM;
		}
	}
	probe_sla_to_string(&r->sla, sla, sizeof(sla));
	q |= json_add_string(o, "sla", sla);
	q |= json_add_number(o, "attainment_target", r->sla.attainment);
	q |= json_add_number(o, "attainment", r->attainment);
	q |= json_add_number(o, "good_output_throughput", r->good_output_throughput);
	q |= json_add_bool(o, "sla_met", r->sla_met);
	if (r->server.present && add_server(o, &r->server) < 0)
		return -ENOMEM;
	if (q < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

static int get_num(const cJSON *j, const char *key, bool required, double *ret, struct error *err)
{
	int r = required ? json_require_double(j, "", key, -1e300, 1e300, ret, err)
			 : json_get_double(j, "", key, -1e300, 1e300, ret, err);

	return r < 0 ? r : 0;
}

static int get_u32(const cJSON *j, const char *key, uint32_t *ret, struct error *err)
{
	uint64_t v;
	int r = json_require_u64(j, "", key, 0, UINT32_MAX, &v, err);

	if (r < 0)
		return r;
	*ret = (uint32_t)v;
	return 0;
}

static int read_server(const cJSON *j, struct probe_server_metrics *s, struct error *err)
{
	const cJSON *o = NULL;
	double samples = 0;
	int r;

	r = json_get_object(j, "", "server", &o, err);
	if (r <= 0)
		return r;
	s->present = true;
	if ((r = json_get_double(o, "server", "kv_cache_usage_mean", 0, 1e9, &s->kv_usage_mean, err)) < 0 ||
	    (r = json_get_double(o, "server", "kv_cache_usage_peak", 0, 1e9, &s->kv_usage_peak, err)) < 0 ||
	    (r = json_get_double(o, "server", "num_requests_running_mean", 0, 1e9, &s->running_mean, err)) < 0 ||
	    (r = json_get_double(o, "server", "num_requests_running_peak", 0, 1e9, &s->running_peak, err)) < 0 ||
	    (r = json_get_double(o, "server", "num_requests_waiting_mean", 0, 1e9, &s->waiting_mean, err)) < 0 ||
	    (r = json_get_double(o, "server", "num_requests_waiting_peak", 0, 1e9, &s->waiting_peak, err)) < 0 ||
	    (r = json_get_double(o, "server", "num_preemptions", 0, 1e18, &s->preemptions, err)) < 0 ||
	    (r = json_get_double(o, "server", "samples", 0, 1e18, &samples, err)) < 0)
		return r;
	s->samples = (size_t)samples;
	return 0;
}

int probe_result_from_json(const cJSON *j, struct probe_result *ret, struct error *err)
{
	struct probe_result res = { .burstiness = 1.0 };
	const cJSON *rate, *arr = NULL, *item;
	const char *sla = NULL;
	double v;
	bool b;
	char key[64];
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "result: expected a JSON object");
	rate = cJSON_GetObjectItemCaseSensitive(j, "request_rate");
	if (cJSON_IsString(rate) && strcmp(rate->valuestring, "inf") == 0)
		res.request_rate = INFINITY;
	else if ((r = json_get_double(j, "", "request_rate", 0, 1e300, &res.request_rate, err)) < 0)
		return r;
	if ((r = get_num(j, "burstiness", false, &res.burstiness, err)) < 0)
		return r;
	if ((r = json_get_u32(j, "", "max_concurrency", 0, UINT32_MAX, &res.max_concurrency, err)) < 0)
		return r;
	if ((r = get_u32(j, "num_prompts", &res.num_prompts, err)) < 0 ||
	    (r = get_u32(j, "completed", &res.completed, err)) < 0 ||
	    (r = get_u32(j, "failed", &res.failed, err)) < 0 ||
	    (r = json_require_u64(j, "", "total_input_tokens", 0, UINT64_MAX, &res.total_input_tokens, err)) < 0 ||
	    (r = json_require_u64(j, "", "total_output_tokens", 0, UINT64_MAX, &res.total_output_tokens, err)) < 0 ||
	    (r = get_num(j, "duration", true, &res.duration_s, err)) < 0 ||
	    (r = get_num(j, "request_throughput", true, &res.request_throughput, err)) < 0 ||
	    (r = get_num(j, "output_throughput", true, &res.output_throughput, err)) < 0 ||
	    (r = get_num(j, "total_token_throughput", true, &res.total_token_throughput, err)) < 0 ||
	    (r = get_num(j, "request_goodput", false, &res.request_goodput, err)) < 0 ||
	    (r = get_num(j, "max_concurrent_requests", false, &res.max_concurrent_requests, err)) < 0 ||
	    (r = get_num(j, "mean_concurrency", false, &res.mean_concurrency, err)) < 0 ||
	    (r = get_num(j, "attainment", false, &res.attainment, err)) < 0 ||
	    (r = get_num(j, "good_output_throughput", false, &res.good_output_throughput, err)) < 0)
		return r;

	r = json_get_array(j, "", "metric_percentiles", &arr, err);
	if (r < 0)
		return r;
	if (arr) {
		cJSON_ArrayForEach(item, arr)
		{
			if (res.n_percentiles >= PROBE_MAX_PERCENTILES || !cJSON_IsNumber(item) ||
			    !(item->valuedouble >= 0 && item->valuedouble <= 100))
				return error_set(err, -EINVAL,
						 "metric_percentiles: expected at most %d numbers in [0, 100]",
						 PROBE_MAX_PERCENTILES);
			res.percentiles[res.n_percentiles++] = item->valuedouble;
		}
	}
	for (int m = 0; m < _PROBE_METRIC_MAX; m++) {
		struct probe_stat *s = &res.stat[m];

		stat_key(key, sizeof(key), "mean", m);
		if ((r = get_num(j, key, false, &s->mean_ms, err)) < 0)
			return r;
		stat_key(key, sizeof(key), "median", m);
		if ((r = get_num(j, key, false, &s->median_ms, err)) < 0)
			return r;
		stat_key(key, sizeof(key), "std", m);
		if ((r = get_num(j, key, false, &s->std_ms, err)) < 0)
			return r;
		for (size_t k = 0; k < res.n_percentiles; k++) {
			char w[32];

			pct_word(res.percentiles[k], w, sizeof(w));
			snprintf(key, sizeof(key), "p%s_%s_ms", w, probe_metric_name(m));
			if ((r = get_num(j, key, false, &s->pct_ms[k], err)) < 0)
				return r;
		}
		snprintf(key, sizeof(key), "n_%s", probe_metric_name(m));
		v = 0;
		if ((r = get_num(j, key, false, &v, err)) < 0)
			return r;
		s->n = v > 0 ? (size_t)v : 0;
	}

	r = json_get_string(j, "", "sla", 0, &sla, err);
	if (r < 0 && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "sla")))
		r = 0; /* "" = no SLA */
	if (r < 0)
		return r;
	if (sla) {
		r = probe_sla_parse(sla, &res.sla, err);
		if (r < 0)
			return error_prefix(err, r, "sla");
	}
	if ((r = json_get_double(j, "", "attainment_target", 0, 1, &res.sla.attainment, err)) < 0)
		return r;
	b = false;
	if ((r = json_get_bool(j, "", "sla_met", &b, err)) < 0)
		return r;
	res.sla_met = b;
	r = read_server(j, &res.server, err);
	if (r < 0)
		return r;
	*ret = res;
	return 0;
}

/* Python's "{s:{c}^{n}}": centred, the odd fill character going right. */
static void print_rule(FILE *f, const char *title, char c)
{
	int len = (int)strlen(title), pad = MAX(50 - len, 0);

	for (int i = 0; i < pad / 2; i++)
		fputc(c, f);
	fputs(title, f);
	for (int i = 0; i < pad - pad / 2; i++)
		fputc(c, f);
	fputc('\n', f);
}

static void line_f(FILE *f, const char *label, double v)
{
	fprintf(f, "%-40s %-10.2f\n", label, v);
}

static void line_u(FILE *f, const char *label, unsigned long long v)
{
	fprintf(f, "%-40s %-10llu\n", label, v);
}

static void line_s(FILE *f, const char *label, const char *v)
{
	fprintf(f, "%-40s %-10s\n", label, v);
}

void probe_result_print(FILE *f, const struct probe_result *r)
{
	unsigned shown = r->percentile_metrics ? r->percentile_metrics : (1u << _PROBE_METRIC_MAX) - 1;
	char buf[512];

	print_rule(f, " Serving Benchmark Result ", '=');
	line_u(f, "Successful requests:", r->completed);
	line_u(f, "Failed requests:", r->failed);
	if (r->max_concurrency)
		line_u(f, "Maximum request concurrency:", r->max_concurrency);
	if (isinf(r->request_rate))
		line_s(f, "Request rate configured (RPS):", "inf");
	else if (r->request_rate > 0)
		line_f(f, "Request rate configured (RPS):", r->request_rate);
	line_f(f, "Benchmark duration (s):", r->duration_s);
	line_u(f, "Total input tokens:", (unsigned long long)r->total_input_tokens);
	line_u(f, "Total generated tokens:", (unsigned long long)r->total_output_tokens);
	line_f(f, "Request throughput (req/s):", r->request_throughput);
	if (!probe_sla_empty(&r->sla))
		line_f(f, "Request goodput (req/s):", r->request_goodput);
	line_f(f, "Output token throughput (tok/s):", r->output_throughput);
	line_f(f, "Total Token throughput (tok/s):", r->total_token_throughput);
	line_f(f, "Peak concurrent requests:", r->max_concurrent_requests);
	for (int m = 0; m < _PROBE_METRIC_MAX; m++) {
		const struct probe_stat *s = &r->stat[m];
		char label[64];

		if (!(shown & (1u << m)))
			continue;
		print_rule(f, metric_headers[m], '-');
		snprintf(label, sizeof(label), "Mean %s (ms):", metric_titles[m]);
		line_f(f, label, s->mean_ms);
		snprintf(label, sizeof(label), "Median %s (ms):", metric_titles[m]);
		line_f(f, label, s->median_ms);
		for (size_t k = 0; k < r->n_percentiles; k++) {
			char w[32];

			pct_word(r->percentiles[k], w, sizeof(w));
			snprintf(label, sizeof(label), "P%s %s (ms):", w, metric_titles[m]);
			line_f(f, label, s->pct_ms[k]);
		}
	}
	print_rule(f, "SLA and Goodput", '-');
	probe_sla_format(&r->sla, buf, sizeof(buf));
	line_s(f, "SLA:", buf);
	line_f(f, "SLA attainment (%):", r->attainment * 100);
	line_f(f, "Good output throughput (tok/s):", r->good_output_throughput);
	line_s(f, "SLA met:", r->sla_met ? "yes" : "no");
	if (r->server.present) {
		print_rule(f, "Server (/metrics)", '-');
		line_f(f, "Mean KV cache usage (%):", r->server.kv_usage_mean * 100);
		line_f(f, "Peak KV cache usage (%):", r->server.kv_usage_peak * 100);
		line_f(f, "Mean running requests:", r->server.running_mean);
		line_f(f, "Mean waiting requests:", r->server.waiting_mean);
		line_f(f, "Peak waiting requests:", r->server.waiting_peak);
		line_f(f, "Preemptions:", r->server.preemptions);
	}
	print_rule(f, "", '=');
}
