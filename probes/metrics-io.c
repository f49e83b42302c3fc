/* metrics-io.c — a load point's result as JSON (written and read back) and as
 * the table people read.
 *
 * The JSON is goodput's one result object (DESIGN.md): vLLM's key names for
 * what vLLM reports ("completed", "mean_ttft_ms", "p99_tpot_ms",
 * "request_goodput" — null, as vLLM writes it, when the SLA has no
 * per-request bound —, "request_rate": "inf" for an unbounded rate, ...) so
 * scripts written for `vllm bench serve --save-result` read it unchanged, and
 * goodput's own keys beside them ("attainment", "good_output_throughput",
 * "sla_met", "sla", "metric_percentiles", "server"). Numbers are written with
 * cJSON's round-trip precision, so from_json(to_json(r)) == r.
 *
 * The table copies vLLM's layout ("{:<40} {:<10.2f}", 50-column rules) and
 * adds goodput's SLA lines at the end. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "json-dispatch.h"
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
	    json_add_number(o, "prompt_tokens", s->prompt_tokens) < 0 ||
	    json_add_number(o, "generation_tokens", s->generation_tokens) < 0 ||
	    json_add_number(o, "prefix_cache_queries", s->prefix_queries) < 0 ||
	    json_add_number(o, "prefix_cache_hits", s->prefix_hits) < 0 ||
	    json_add_number(o, "prefix_cache_hit_rate", probe_server_prefix_hit_rate(s)) < 0 ||
	    json_add_number(o, "spec_decode_num_drafts", s->spec_drafts) < 0 ||
	    json_add_number(o, "spec_decode_num_draft_tokens", s->spec_draft_tokens) < 0 ||
	    json_add_number(o, "spec_decode_num_accepted_tokens", s->spec_accepted) < 0 ||
	    json_add_number(o, "spec_accept_length", s->spec_accept_length) < 0 ||
	    json_add_number(o, "spec_acceptance_rate", probe_server_spec_acceptance(s)) < 0 ||
	    json_add_number(o, "spec_mean_acceptance_length", probe_server_spec_accept_length(s)) < 0 ||
	    json_add_number(o, "samples", (double)s->samples) < 0)
		r = -ENOMEM;
	return r;
}

double probe_server_prefix_hit_rate(const struct probe_server_metrics *s)
{
	if (!s->present || !isfinite(s->prefix_queries) || !isfinite(s->prefix_hits) || s->prefix_queries <= 0)
		return NAN;
	return s->prefix_hits / s->prefix_queries;
}

double probe_server_spec_acceptance(const struct probe_server_metrics *s)
{
	if (!s->present || !isfinite(s->spec_draft_tokens) || !isfinite(s->spec_accepted) || s->spec_draft_tokens <= 0)
		return NAN;
	return s->spec_accepted / s->spec_draft_tokens;
}

double probe_server_spec_accept_length(const struct probe_server_metrics *s)
{
	if (!s->present)
		return NAN;
	if (isfinite(s->spec_drafts) && isfinite(s->spec_accepted) && s->spec_drafts > 0)
		return 1.0 + s->spec_accepted / s->spec_drafts;
	return s->spec_accept_length;
}

/* "failure_reasons": {"connection refused": 5, ...}, most frequent first. */
static int add_failure_reasons(cJSON *obj, const struct probe_result *r)
{
	cJSON *o = cJSON_AddObjectToObject(obj, "failure_reasons");

	if (!o)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_failure_reasons; i++)
		if (json_add_number(o, r->failure_reasons[i].reason, r->failure_reasons[i].count) < 0)
			return -ENOMEM;
	return 0;
}

/* "attainment_by_sla_scale": [[0.5, 0.42], [0.6, 0.61], ... [2, 1]] */
static int add_scaled_attainment(cJSON *o, const struct probe_result *r)
{
	cJSON *arr = cJSON_AddArrayToObject(o, "attainment_by_sla_scale");

	if (!arr)
		return -ENOMEM;
	for (size_t k = 0; k < PROBE_SLA_SCALES; k++) {
		const double pair[2] = { probe_sla_scales[k], r->scaled_attainment[k] };
		cJSON *p = cJSON_CreateDoubleArray(pair, 2);

		if (!p || !cJSON_AddItemToArray(arr, p)) {
			cJSON_Delete(p);
			return -ENOMEM;
		}
	}
	return 0;
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
	if (!(r->offered_rate > 0)) {
		if (!cJSON_AddNullToObject(o, "offered_rate"))
			q = -ENOMEM;
	} else
		q |= json_add_number(o, "offered_rate", r->offered_rate);
	q |= json_add_number(o, "burstiness", r->burstiness);
	if (r->max_concurrency)
		q |= json_add_number(o, "max_concurrency", r->max_concurrency);
	else if (!cJSON_AddNullToObject(o, "max_concurrency"))
		q = -ENOMEM;
	q |= json_add_number(o, "num_prompts", r->num_prompts);
	q |= json_add_number(o, "duration", r->duration_s);
	q |= json_add_number(o, "completed", r->completed);
	q |= json_add_number(o, "failed", r->failed);
	if (r->cut)
		q |= json_add_number(o, "cut_at_cap", r->cut);
	q |= json_add_number(o, "total_input_tokens", (double)r->total_input_tokens);
	q |= json_add_number(o, "total_output_tokens", (double)r->total_output_tokens);
	q |= json_add_number(o, "request_throughput", r->request_throughput);
	/* vLLM writes null without --goodput: there is no goodput to speak of */
	if (probe_sla_has_request_bounds(&r->sla))
		q |= json_add_number(o, "request_goodput", r->request_goodput);
	else if (!cJSON_AddNullToObject(o, "request_goodput"))
		q = -ENOMEM;
	q |= json_add_number(o, "output_throughput", r->output_throughput);
	q |= json_add_number(o, "total_token_throughput", r->total_token_throughput);
	q |= json_add_number(o, "max_concurrent_requests", r->max_concurrent_requests);
	q |= json_add_number(o, "max_output_tokens_per_s", r->max_output_tokens_per_s);
	q |= json_add_number(o, "mean_concurrency", r->mean_concurrency);
	if (isfinite(r->client_lag_p95_ms))
		q |= json_add_number(o, "client_lag_p95_ms", r->client_lag_p95_ms);
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
	if (r->has_scaled_attainment && add_scaled_attainment(o, r) < 0)
		return -ENOMEM;
	q |= json_add_bool(o, "sla_met", r->sla_met);
	if (r->verdict != PROBE_VERDICT_NONE) {
		q |= json_add_string(o, "verdict", probe_verdict_name(r->verdict));
		q |= json_add_number(o, "verdict_requests", r->verdict_requests);
		q |= json_add_number(o, "verdict_confidence", r->verdict_confidence);
	}
	/* a point without a verdict (the saturation run) its time cap ended says so too */
	if (r->verdict == PROBE_VERDICT_UNDECIDED || r->cap != PROBE_CAP_NONE)
		q |= json_add_string(o, "cap", probe_cap_name(r->cap));
	if (r->verdict == PROBE_VERDICT_UNDECIDED) {
		cJSON *ci = cJSON_AddArrayToObject(o, "attainment_ci");

		q |= json_add_number(o, "attainment_ci_level", PROBE_CAP_CI_LEVEL);
		if (!ci || !cJSON_AddItemToArray(ci, cJSON_CreateNumber(r->attainment_lo)) ||
		    !cJSON_AddItemToArray(ci, cJSON_CreateNumber(r->attainment_hi)))
			q = -ENOMEM;
	}
	if (add_failure_reasons(o, r) < 0)
		return -ENOMEM;
	if (r->server.present && add_server(o, &r->server) < 0)
		return -ENOMEM;
	if (q < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

/* ---- reading a result back ---- */

static int read_rate(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct probe_result *res = base;

	if (cJSON_IsString(v) && strcmp(v->valuestring, "inf") == 0) {
		res->request_rate = INFINITY;
		return 0;
	}
	return json_value_double(v, path, f->min, f->max, &res->request_rate, err);
}

static int read_percentiles(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct probe_result *res = base;
	const cJSON *item;

	(void)f;
	cJSON_ArrayForEach(item, v)
	{
		if (res->n_percentiles >= PROBE_MAX_PERCENTILES || !cJSON_IsNumber(item) ||
		    !(item->valuedouble >= 0 && item->valuedouble <= 100))
			return error_set(err, -EINVAL, "%s: expected at most %d numbers in [0, 100]", path,
					 PROBE_MAX_PERCENTILES);
		res->percentiles[res->n_percentiles++] = item->valuedouble;
	}
	return 0;
}

/* "p99_ttft_ms": the percentile's slot of that metric, when metric_percentiles lists it. */
static int read_percentile_stat(const cJSON *v, const char *path, const struct json_field *f, void *base,
				struct error *err)
{
	struct probe_result *res = base;

	(void)path;
	(void)f;
	(void)err;
	for (int m = 0; m < _PROBE_METRIC_MAX; m++)
		for (size_t k = 0; k < res->n_percentiles; k++) {
			char w[32], key[64];

			pct_word(res->percentiles[k], w, sizeof(w));
			snprintf(key, sizeof(key), "p%s_%s_ms", w, probe_metric_name(m));
			if (strcmp(key, v->string) == 0) {
				res->stat[m].pct_ms[k] = v->valuedouble;
				return 0;
			}
		}
	return 0; /* a percentile this result does not list */
}

/* "sla": the bounds as probe_sla_to_string wrote them; "" = none. */
static int read_sla(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct probe_result *res = base;
	int r;

	(void)f;
	if (!cJSON_IsString(v))
		return json_wrong(v, path, "a string", err);
	if (!v->valuestring[0])
		return 0;
	r = probe_sla_parse(v->valuestring, &res->sla, err);
	return r < 0 ? error_prefix(err, r, "%s", path) : 0;
}

static int read_cap(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct probe_result *res = base;
	int k;

	if (!cJSON_IsString(v) || (k = probe_cap_from_name(v->valuestring)) < 0)
		return error_set(err, -EINVAL, "%s: expected requests or seconds", path);
	res->cap = (enum probe_cap)k;
	return 0;
}

static int read_attainment_ci(const cJSON *v, const char *path, const struct json_field *f, void *base,
			      struct error *err)
{
	struct probe_result *res = base;
	const cJSON *lo = cJSON_GetArrayItem(v, 0), *hi = cJSON_GetArrayItem(v, 1);

	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(lo) || !cJSON_IsNumber(hi) ||
	    !(lo->valuedouble >= 0 && lo->valuedouble <= hi->valuedouble && hi->valuedouble <= 1))
		return error_set(err, -EINVAL, "%s: expected [lo, hi] within [0, 1]", path);
	res->attainment_lo = lo->valuedouble;
	res->attainment_hi = hi->valuedouble;
	return 0;
}

static int read_scaled_attainment(const cJSON *v, const char *path, const struct json_field *f, void *base,
				  struct error *err)
{
	struct probe_result *res = base;
	const cJSON *p;
	size_t k = 0;

	(void)f;
	if (cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != PROBE_SLA_SCALES)
		return error_set(err, -EINVAL, "%s: expected %d [scale, attainment] pairs", path, PROBE_SLA_SCALES);
	cJSON_ArrayForEach(p, v)
	{
		const cJSON *s = cJSON_GetArrayItem(p, 0), *a = cJSON_GetArrayItem(p, 1);

		if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsNumber(s) || !cJSON_IsNumber(a) ||
		    fabs(s->valuedouble - probe_sla_scales[k]) > 1e-9 || !(a->valuedouble >= 0 && a->valuedouble <= 1))
			return error_set(err, -EINVAL, "%s[%zu]: expected [%g, attainment within [0, 1]]", path, k,
					 probe_sla_scales[k]);
		res->scaled_attainment[k++] = a->valuedouble;
	}
	res->has_scaled_attainment = true;
	return 0;
}

static int read_verdict(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct probe_result *res = base;
	int k;

	(void)f;
	if (!cJSON_IsString(v) || (k = probe_verdict_from_name(v->valuestring)) < 0)
		return json_wrong(v, path, "\"met\", \"missed\", \"undecided\" or \"none\"", err);
	res->verdict = (enum probe_verdict)k;
	return 0;
}

static int read_failure_reasons(const cJSON *v, const char *path, const struct json_field *f, void *base,
				struct error *err)
{
	struct probe_result *res = base;
	const cJSON *item;

	(void)f;
	if (!cJSON_IsObject(v))
		return json_wrong(v, path, "an object", err);
	cJSON_ArrayForEach(item, v)
	{
		struct probe_failure_count *c;

		if (res->n_failure_reasons >= PROBE_MAX_FAILURE_REASONS)
			break; /* the most frequent come first */
		if (!cJSON_IsNumber(item) || !(item->valuedouble >= 0 && item->valuedouble <= UINT32_MAX))
			return error_set(err, -EINVAL, "%s.%s: expected a count", path, item->string);
		c = &res->failure_reasons[res->n_failure_reasons++];
		snprintf(c->reason, sizeof(c->reason), "%s", item->string);
		c->count = (uint32_t)item->valuedouble;
	}
	return 0;
}

static int read_server(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct probe_result *res = base;

	res->server.present = true;
	/* not in older records */
	res->server.prompt_tokens = res->server.generation_tokens = NAN;
	res->server.prefix_queries = res->server.prefix_hits = NAN;
	res->server.spec_drafts = res->server.spec_draft_tokens = res->server.spec_accepted = NAN;
	res->server.spec_accept_length = NAN;
	return json_dispatch(v, path, f->fields, JSON_ALLOW_UNKNOWN, base, err);
}

#define OFF(field)  offsetof(struct probe_result, field)
#define ANY_NUMBER  .min = -1e300, .max = 1e300
#define INTEGER_MAX 9007199254740992.0

/* The statistics of one metric, as stat_key() names them. */
// clang-format off
#define METRIC_ROWS(m, name)                                                                            \
	{ "mean_" name "_ms", JSON_DOUBLE, OFF(stat[m].mean_ms), .flags = JSON_NULLABLE, ANY_NUMBER },     \
	{ "median_" name "_ms", JSON_DOUBLE, OFF(stat[m].median_ms), .flags = JSON_NULLABLE, ANY_NUMBER }, \
	{ "std_" name "_ms", JSON_DOUBLE, OFF(stat[m].std_ms), .flags = JSON_NULLABLE, ANY_NUMBER },       \
	{ "n_" name, JSON_SIZE, OFF(stat[m].n), .flags = JSON_NULLABLE, .max = INTEGER_MAX }
// clang-format on

static const struct json_field server_fields[] = {
	{ "kv_cache_usage_mean", JSON_DOUBLE, OFF(server.kv_usage_mean), .flags = JSON_NULLABLE, .max = 1e9 },
	{ "kv_cache_usage_peak", JSON_DOUBLE, OFF(server.kv_usage_peak), .flags = JSON_NULLABLE, .max = 1e9 },
	{ "num_requests_running_mean", JSON_DOUBLE, OFF(server.running_mean), .flags = JSON_NULLABLE, .max = 1e9 },
	{ "num_requests_running_peak", JSON_DOUBLE, OFF(server.running_peak), .flags = JSON_NULLABLE, .max = 1e9 },
	{ "num_requests_waiting_mean", JSON_DOUBLE, OFF(server.waiting_mean), .flags = JSON_NULLABLE, .max = 1e9 },
	{ "num_requests_waiting_peak", JSON_DOUBLE, OFF(server.waiting_peak), .flags = JSON_NULLABLE, .max = 1e9 },
	{ "num_preemptions", JSON_DOUBLE, OFF(server.preemptions), .flags = JSON_NULLABLE, .max = 1e18 },
	{ "prompt_tokens", JSON_DOUBLE, OFF(server.prompt_tokens), .flags = JSON_NULLABLE, .max = 1e18 },
	{ "generation_tokens", JSON_DOUBLE, OFF(server.generation_tokens), .flags = JSON_NULLABLE, .max = 1e18 },
	{ "prefix_cache_queries", JSON_DOUBLE, OFF(server.prefix_queries), .flags = JSON_NULLABLE, .max = 1e18 },
	{ "prefix_cache_hits", JSON_DOUBLE, OFF(server.prefix_hits), .flags = JSON_NULLABLE, .max = 1e18 },
	{ "spec_decode_num_drafts", JSON_DOUBLE, OFF(server.spec_drafts), .flags = JSON_NULLABLE, .max = 1e18 },
	{ "spec_decode_num_draft_tokens", JSON_DOUBLE, OFF(server.spec_draft_tokens), .flags = JSON_NULLABLE,
	  .max = 1e18 },
	{ "spec_decode_num_accepted_tokens", JSON_DOUBLE, OFF(server.spec_accepted), .flags = JSON_NULLABLE,
	  .max = 1e18 },
	{ "spec_accept_length", JSON_DOUBLE, OFF(server.spec_accept_length), .flags = JSON_NULLABLE, .max = 1e6 },
	{ "samples", JSON_SIZE, OFF(server.samples), .flags = JSON_NULLABLE, .max = INTEGER_MAX },
	{ 0 },
};

/* The result object. Null is "not measured" (the writer turns NaN into
 * null); the rows are in the order the reading needs: metric_percentiles
 * before the p<P>_<metric>_ms keys, sla before attainment_target. */
static const struct json_field result_fields[] = {
	{ "request_rate", JSON_ANY, .callback = read_rate, .flags = JSON_NULLABLE, .min = 0, .max = 1e300 },
	{ "offered_rate", JSON_DOUBLE, OFF(offered_rate), .flags = JSON_NULLABLE, .min = 0, .max = 1e300 },
	{ "burstiness", JSON_DOUBLE, OFF(burstiness), .flags = JSON_NULLABLE, ANY_NUMBER },
	{ "max_concurrency", JSON_U32, OFF(max_concurrency), .flags = JSON_NULLABLE, .max = UINT32_MAX },
	{ "num_prompts", JSON_U32, OFF(num_prompts), .flags = JSON_MANDATORY, .max = UINT32_MAX },
	{ "completed", JSON_U32, OFF(completed), .flags = JSON_MANDATORY, .max = UINT32_MAX },
	{ "failed", JSON_U32, OFF(failed), .flags = JSON_MANDATORY, .max = UINT32_MAX },
	{ "cut_at_cap", JSON_U32, OFF(cut), .max = UINT32_MAX },
	{ "total_input_tokens", JSON_U64, OFF(total_input_tokens), .flags = JSON_MANDATORY, .max = INTEGER_MAX },
	{ "total_output_tokens", JSON_U64, OFF(total_output_tokens), .flags = JSON_MANDATORY, .max = INTEGER_MAX },
	{ "duration", JSON_DOUBLE, OFF(duration_s), .flags = JSON_MANDATORY | JSON_NULLABLE, ANY_NUMBER },
	{ "request_throughput", JSON_DOUBLE, OFF(request_throughput), .flags = JSON_MANDATORY | JSON_NULLABLE,
	  ANY_NUMBER },
	{ "output_throughput", JSON_DOUBLE, OFF(output_throughput), .flags = JSON_MANDATORY | JSON_NULLABLE,
	  ANY_NUMBER },
	{ "total_token_throughput", JSON_DOUBLE, OFF(total_token_throughput), .flags = JSON_MANDATORY | JSON_NULLABLE,
	  ANY_NUMBER },
	{ "request_goodput", JSON_DOUBLE, OFF(request_goodput), .flags = JSON_NULLABLE, ANY_NUMBER },
	{ "max_concurrent_requests", JSON_DOUBLE, OFF(max_concurrent_requests), .flags = JSON_NULLABLE, ANY_NUMBER },
	{ "max_output_tokens_per_s", JSON_DOUBLE, OFF(max_output_tokens_per_s), .flags = JSON_NULLABLE, ANY_NUMBER },
	{ "mean_concurrency", JSON_DOUBLE, OFF(mean_concurrency), .flags = JSON_NULLABLE, ANY_NUMBER },
	{ "client_lag_p95_ms", JSON_DOUBLE, OFF(client_lag_p95_ms), .flags = JSON_NULLABLE, ANY_NUMBER },
	{ "attainment", JSON_DOUBLE, OFF(attainment), .flags = JSON_NULLABLE, ANY_NUMBER },
	{ "good_output_throughput", JSON_DOUBLE, OFF(good_output_throughput), .flags = JSON_NULLABLE, ANY_NUMBER },
	{ "attainment_by_sla_scale", JSON_ANY, .callback = read_scaled_attainment, .flags = JSON_NULLABLE },
	{ "metric_percentiles", JSON_ARRAY, .callback = read_percentiles, .flags = JSON_NULLABLE },
	METRIC_ROWS(PROBE_METRIC_TTFT, "ttft"),
	METRIC_ROWS(PROBE_METRIC_TPOT, "tpot"),
	METRIC_ROWS(PROBE_METRIC_ITL, "itl"),
	METRIC_ROWS(PROBE_METRIC_E2EL, "e2el"),
	{ "p<P>_<metric>_ms", JSON_DOUBLE, .pattern = "p*_ms", .callback = read_percentile_stat, .flags = JSON_NULLABLE,
	  ANY_NUMBER },
	{ "sla", JSON_ANY, .callback = read_sla, .flags = JSON_NULLABLE },
	{ "attainment_target", JSON_DOUBLE, OFF(sla.attainment), .flags = JSON_NULLABLE, .min = 0, .max = 1 },
	{ "sla_met", JSON_BOOL, OFF(sla_met), .flags = JSON_NULLABLE },
	{ "verdict", JSON_ANY, .callback = read_verdict, .flags = JSON_NULLABLE },
	{ "verdict_requests", JSON_U32, OFF(verdict_requests), .flags = JSON_NULLABLE, .max = UINT32_MAX },
	{ "verdict_confidence", JSON_DOUBLE, OFF(verdict_confidence), .flags = JSON_NULLABLE, .min = 0, .max = 1 },
	{ "cap", JSON_ANY, .callback = read_cap, .flags = JSON_NULLABLE },
	{ "attainment_ci", JSON_ANY, .callback = read_attainment_ci, .flags = JSON_NULLABLE },
	{ "failure_reasons", JSON_ANY, .callback = read_failure_reasons, .flags = JSON_NULLABLE },
	{ "server", JSON_OBJECT, .fields = server_fields, .callback = read_server, .flags = JSON_NULLABLE },
	{ 0 },
};

int probe_result_from_json(const cJSON *j, struct probe_result *ret, struct error *err)
{
	struct probe_result res = { .burstiness = 1.0, .client_lag_p95_ms = NAN };
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "result: expected a JSON object");
	/* Results from older versions may carry keys this one no longer writes. */
	r = json_dispatch(j, "", result_fields, JSON_ALLOW_UNKNOWN, &res, err);
	if (r < 0)
		return r;
	/* null goodput: no per-request bounds, so every completed request was good */
	if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "request_goodput")))
		res.request_goodput = res.request_throughput;
	/* not written: a result that missed its SLA with attainment enough (or
	 * despite the verdict "met") missed a percentile bound */
	if (res.verdict == PROBE_VERDICT_NONE)
		res.percentiles_met =
			res.sla_met ||
			res.attainment < (res.sla.attainment > 0 ? res.sla.attainment : PROBE_SLA_DEFAULT_ATTAINMENT);
	else
		res.percentiles_met = res.sla_met || res.verdict != PROBE_VERDICT_MET;
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
	if (!isinf(r->request_rate) && r->offered_rate > 0)
		line_f(f, "Request rate offered (RPS):", r->offered_rate);
	line_f(f, "Benchmark duration (s):", r->duration_s);
	line_u(f, "Total input tokens:", (unsigned long long)r->total_input_tokens);
	line_u(f, "Total generated tokens:", (unsigned long long)r->total_output_tokens);
	line_f(f, "Request throughput (req/s):", r->request_throughput);
	if (probe_sla_has_request_bounds(&r->sla))
		line_f(f, "Request goodput (req/s):", r->request_goodput);
	line_f(f, "Output token throughput (tok/s):", r->output_throughput);
	line_f(f, "Peak output token throughput (tok/s):", r->max_output_tokens_per_s);
	line_f(f, "Peak concurrent requests:", r->max_concurrent_requests);
	line_f(f, "Total Token throughput (tok/s):", r->total_token_throughput);
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
	if (r->verdict != PROBE_VERDICT_NONE) {
		probe_result_verdict_text(r, buf, sizeof(buf));
		line_s(f, "SLA verdict:", buf);
	}
	if (r->server.present) {
		print_rule(f, "Server (/metrics)", '-');
		line_f(f, "Mean KV cache usage (%):", r->server.kv_usage_mean * 100);
		line_f(f, "Peak KV cache usage (%):", r->server.kv_usage_peak * 100);
		line_f(f, "Mean running requests:", r->server.running_mean);
		line_f(f, "Mean waiting requests:", r->server.waiting_mean);
		line_f(f, "Peak waiting requests:", r->server.waiting_peak);
		line_f(f, "Preemptions:", r->server.preemptions);
		if (isfinite(probe_server_prefix_hit_rate(&r->server)))
			line_f(f, "Prefix cache hit rate (%):", probe_server_prefix_hit_rate(&r->server) * 100);
		if (isfinite(probe_server_spec_acceptance(&r->server)))
			line_f(f, "Draft acceptance rate (%):", probe_server_spec_acceptance(&r->server) * 100);
		if (isfinite(probe_server_spec_accept_length(&r->server)))
			line_f(f, "Mean acceptance length:", probe_server_spec_accept_length(&r->server));
	}
	print_rule(f, "", '=');
}
