/* probe-output.c — `goodput probe`'s results: the vLLM-readable result
 * object and its file, the per-request lines, the tables and the failure
 * summary (see probe-output.h).
 *
 * vLLM (vllm/benchmarks/serve.py) writes its file as: identifying keys
 * (date, endpoint_type, backend, label, model_id, tokenizer_id,
 * num_prompts), then --metadata KEY=VALUE pairs, then the traffic
 * (request_rate, "inf" when unbounded; burstiness; max_concurrency, null
 * when unbounded), then the result, later keys replacing earlier ones. With
 * --save-detailed it keeps the per-request arrays input_lens, output_lens,
 * ttfts (s), itls (a list of lists, s) and errors ("" for a success). Its
 * request_goodput is null without --goodput. Everything here follows that,
 * and goodput's own keys sit beside vLLM's. */
#include "probe-output.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"

#define MAX_REASONS_SHOWN 10

int cli_probe_metadata_check(const char *item)
{
	const char *eq = strchr(item, '=');

	return eq && eq > item ? 0 : -EINVAL;
}

size_t cli_probe_top_point(const struct probe *p)
{
	struct probe_outcome o;
	size_t n;

	(void)probe_load_points(p, &n);
	probe_get_outcome(p, &o);
	if (n == 0)
		return SIZE_MAX;
	if (o.best_point < n)
		return o.best_point;
	if (o.failed_point < n)
		return o.failed_point;
	return n - 1;
}

/* Python's str(float): the fewest significant digits that read back the
 * same, in fixed notation for 1e-4 <= |v| < 1e16 (with ".0" on whole
 * numbers), else as 1.5e-05; "inf" for infinity. vLLM's file names use it. */
static void py_float(char *buf, size_t size, double v)
{
	char *e;
	int digits = 17, exp10;

	if (isinf(v)) {
		snprintf(buf, size, "inf");
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, size, "%.*e", p - 1, v);
		if (strtod(buf, NULL) == v) {
			digits = p;
			break;
		}
	}
	e = strchr(buf, 'e');
	exp10 = e ? atoi(e + 1) : 0;
	if (v != 0 && (fabs(v) < 1e-4 || fabs(v) >= 1e16))
		return; /* "%.*e" is Python's form there */
	snprintf(buf, size, "%.*f", MAX(digits - 1 - exp10, 0), v);
	if (!strchr(buf, '.'))
		strncat(buf, ".0", size - strlen(buf) - 1);
}

static void date_str(char *buf, size_t size, time_t t)
{
	struct tm tm;

	if (!localtime_r(&t, &tm) || strftime(buf, size, "%Y%m%d-%H%M%S", &tm) == 0)
		snprintf(buf, size, "unknown");
}

/* Sets key in obj to item (replacing an earlier one: later keys win, as
 * in vLLM's merges). Takes item even on failure. */
static int put(cJSON *obj, const char *key, cJSON *item)
{
	if (!item)
		return -ENOMEM;
	if (cJSON_GetObjectItemCaseSensitive(obj, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item) ? 0 : (cJSON_Delete(item), -ENOMEM);
	return cJSON_AddItemToObject(obj, key, item) ? 0 : (cJSON_Delete(item), -ENOMEM);
}

static cJSON *string_or_null(const char *s)
{
	return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static int add_identity(cJSON *root, const struct probe_config *cfg, const struct cli_probe_output *o)
{
	char date[32];
	int r = 0;

	date_str(date, sizeof(date), o->started);
	r = r < 0 ? r : put(root, "date", cJSON_CreateString(date));
	r = r < 0 ? r : put(root, "endpoint_type", cJSON_CreateString(o->backend));
	r = r < 0 ? r : put(root, "backend", cJSON_CreateString(o->backend));
	r = r < 0 ? r : put(root, "label", string_or_null(o->label));
	r = r < 0 ? r : put(root, "model_id", string_or_null(o->model));
	r = r < 0 ? r : put(root, "tokenizer_id", string_or_null(o->tokenizer ? o->tokenizer : o->model));
	r = r < 0 ? r : put(root, "num_prompts", cJSON_CreateNumber(cfg->workload.num_prompts));
	for (size_t i = 0; r >= 0 && i < o->n_metadata; i++) {
		const char *eq = strchr(o->metadata[i], '=');
		_cleanup_(freep) char *key = strndup(o->metadata[i], (size_t)(eq - o->metadata[i]));

		r = key ? put(root, key, cJSON_CreateString(eq + 1)) : -ENOMEM;
	}
	return r;
}

/* Moves every key of from into to (replacing), and frees from. */
static int merge(cJSON *to, cJSON *from)
{
	cJSON *c;
	int r = 0;

	while (r >= 0 && (c = from->child)) {
		_cleanup_(freep) char *key = strdup(c->string);

		(void)cJSON_DetachItemViaPointer(from, c);
		r = key ? put(to, key, c) : (cJSON_Delete(c), -ENOMEM);
	}
	cJSON_Delete(from);
	return r;
}

static int add_number_to_array(cJSON *arr, double v)
{
	cJSON *n = cJSON_CreateNumber(v);

	if (!n || !cJSON_AddItemToArray(arr, n)) {
		cJSON_Delete(n);
		return -ENOMEM;
	}
	return 0;
}

/* A request's generated text (kept JSON-escaped) as a string; "" when none. */
static cJSON *generated_text(const struct probe_request_result *q)
{
	_cleanup_(freep) char *quoted = NULL;
	cJSON *s;

	if (!q->success || !q->text || asprintf(&quoted, "\"%s\"", q->text) < 0)
		return cJSON_CreateString("");
	s = cJSON_ParseWithLength(quoted, strlen(quoted));
	if (s && cJSON_IsString(s))
		return s;
	cJSON_Delete(s);
	return cJSON_CreateString("");
}

/* vLLM's per-request arrays, in request order, times in seconds; input_lens
 * are the lengths of the prompts as the workload made them (vLLM counts its
 * own prompts, not the server's usage). */
static int add_detailed(cJSON *root, const struct probe_load_point *pt)
{
	cJSON *in, *out, *ttfts, *itls, *lat, *texts, *errors;

	/* put() takes each array, failing or not; root owns them after */
	if (put(root, "input_lens", in = cJSON_CreateArray()) < 0 ||
	    put(root, "output_lens", out = cJSON_CreateArray()) < 0 ||
	    put(root, "ttfts", ttfts = cJSON_CreateArray()) < 0 || put(root, "itls", itls = cJSON_CreateArray()) < 0 ||
	    put(root, "latencies", lat = cJSON_CreateArray()) < 0 ||
	    put(root, "generated_texts", texts = cJSON_CreateArray()) < 0 ||
	    put(root, "errors", errors = cJSON_CreateArray()) < 0)
		return -ENOMEM;
	for (size_t k = 0; k < pt->n_requests; k++) {
		const struct probe_request_result *q = &pt->requests[k];
		cJSON *gaps = cJSON_CreateArray(), *e, *t;

		t = generated_text(q);
		if (!t || !cJSON_AddItemToArray(texts, t)) {
			cJSON_Delete(t);
			cJSON_Delete(gaps);
			return -ENOMEM;
		}
		if (!gaps || !cJSON_AddItemToArray(itls, gaps)) {
			cJSON_Delete(gaps);
			return -ENOMEM;
		}
		for (size_t g = 0; q->success && g < q->n_itl; g++)
			if (add_number_to_array(gaps, usec_to_sec(q->itl_usec[g])) < 0)
				return -ENOMEM;
		e = cJSON_CreateString(q->success ? "" : q->error ? q->error : "unknown error");
		if (!e || !cJSON_AddItemToArray(errors, e)) {
			cJSON_Delete(e);
			return -ENOMEM;
		}
		if (add_number_to_array(in, q->prompt_len ? q->prompt_len : q->input_tokens) < 0 ||
		    add_number_to_array(lat, q->success ? usec_to_sec(q->e2e_usec) : 0) < 0 ||
		    add_number_to_array(out, q->success ? q->output_tokens : 0) < 0 ||
		    add_number_to_array(ttfts, q->success ? usec_to_sec(q->ttft_usec) : 0) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int add_failure_reasons(cJSON *root, const struct probe_load_point *pt)
{
	_cleanup_(freep) struct probe_failure_reason *why = NULL;
	cJSON *o;
	size_t n = 0;
	int r;

	r = put(root, "failure_reasons", o = cJSON_CreateObject());
	if (r < 0)
		return r;
	if (!pt)
		return 0;
	r = probe_failure_reasons(pt->requests, pt->n_requests, &why, &n);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = put(o, why[i].reason, cJSON_CreateNumber(why[i].count));
	return r;
}

static int add_search(cJSON *root, const struct probe *p, const struct probe_config *cfg)
{
	const struct probe_load_point *pts;
	struct probe_outcome o;
	cJSON *arr;
	size_t n;
	int r;

	pts = probe_load_points(p, &n);
	probe_get_outcome(p, &o);
	r = put(root, "load_points", arr = cJSON_CreateArray());
	r = r < 0 ? r : put(root, "search", cJSON_CreateString(probe_search_outcome_name(o.search)));
	r = r < 0 ? r : put(root, "max_request_rate", cJSON_CreateNumber(o.max_rate));
	r = r < 0 ? r
		  : put(root, "max_offered_rate",
			o.best_point < n && pts[o.best_point].result.offered_rate > 0
				? cJSON_CreateNumber(pts[o.best_point].result.offered_rate)
				: cJSON_CreateNull());
	r = r < 0 ? r : put(root, "saturation_request_rate", cJSON_CreateNumber(o.saturation_rate));
	r = r < 0 ? r : put(root, "rate_tolerance", cJSON_CreateNumber(cfg->rate_tolerance));
	r = r < 0 ? r : put(root, "num_load_points", cJSON_CreateNumber((double)n));
	r = r < 0 ? r
		  : put(root, "best_load_point",
			o.best_point < n ? cJSON_CreateNumber((double)o.best_point) : cJSON_CreateNull());
	for (size_t i = 0; r >= 0 && i < n; i++) {
		cJSON *j = NULL;

		r = probe_result_to_json(&pts[i].result, &j);
		if (r < 0)
			break;
		if (!cJSON_AddBoolToObject(j, "saturation", pts[i].saturation) || !cJSON_AddItemToArray(arr, j)) {
			cJSON_Delete(j);
			r = -ENOMEM;
		}
	}
	return r;
}

/* A whole number printed as Python prints a float ("10.0"): cJSON would
 * print "10", which Python reads as an int. */
static int as_float(cJSON *item)
{
	char buf[64], *text;

	if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble != floor(item->valuedouble) ||
	    fabs(item->valuedouble) >= 1e16)
		return 0;
	snprintf(buf, sizeof(buf), "%.1f", item->valuedouble);
	text = strdup(buf);
	if (!text)
		return -ENOMEM;
	item->type = cJSON_Raw;
	item->valuestring = text;
	return 0;
}

static bool is_vllm_float_key(const char *k)
{
	static const char *const keys[] = { "request_rate",
					    "burstiness",
					    "duration",
					    "request_throughput",
					    "request_goodput",
					    "output_throughput",
					    "total_token_throughput",
					    "max_output_tokens_per_s",
					    "rtfx",
					    "ttfts",
					    "itls",
					    "latencies" };
	size_t n = strlen(k);

	for (size_t i = 0; i < ELEMENTSOF(keys); i++)
		if (strcmp(k, keys[i]) == 0)
			return true;
	/* mean_ttft_ms, p99_tpot_ms, ... */
	return n > 3 && strcmp(k + n - 3, "_ms") == 0 &&
	       (strncmp(k, "mean_", 5) == 0 || strncmp(k, "median_", 7) == 0 || strncmp(k, "std_", 4) == 0 ||
		(k[0] == 'p' && k[1] >= '0' && k[1] <= '9'));
}

static int floats_within(cJSON *item)
{
	cJSON *c;
	int r = 0;

	if (!cJSON_IsArray(item))
		return as_float(item);
	cJSON_ArrayForEach(c, item) r = r < 0 ? r : floats_within(c);
	return r;
}

/* The figures vLLM writes as floats, written as floats. */
static int vllm_floats(cJSON *root)
{
	cJSON *c;
	int r = 0;

	cJSON_ArrayForEach(c, root) if (c->string && is_vllm_float_key(c->string)) r = r < 0 ? r : floats_within(c);
	return r;
}

int cli_probe_result_json(const struct probe *p, const struct probe_config *cfg, const struct cli_probe_output *o,
			  cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
	const struct probe_load_point *pts;
	size_t n, top = cli_probe_top_point(p);
	int r;

	if (!root)
		return -ENOMEM;
	pts = probe_load_points(p, &n);
	r = add_identity(root, cfg, o);
	if (r >= 0 && top < n) {
		cJSON *res = NULL;

		r = probe_result_to_json(&pts[top].result, &res);
		if (r >= 0)
			r = merge(root, res);
		if (r >= 0 && o->detailed)
			r = add_detailed(root, &pts[top]);
	}
	if (r >= 0)
		r = add_failure_reasons(root, top < n ? &pts[top] : NULL);
	if (r >= 0) {
		struct probe_outcome oc;

		/* load points run again because the client itself lagged */
		probe_get_outcome(p, &oc);
		r = put(root, "redone_load_points", cJSON_CreateNumber(oc.redone_points));
		if (r >= 0)
			r = put(root, "redone_requests", cJSON_CreateNumber((double)oc.redone_requests));
	}
	if (r >= 0 && cfg->find_max_rate)
		r = add_search(root, p, cfg);
	if (r >= 0)
		r = vllm_floats(root);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(root);
	return 0;
}

/* mkdir -p: every missing folder of path. */
static int make_dirs(const char *path)
{
	_cleanup_(freep) char *d = strdup(path);

	if (!d)
		return -ENOMEM;
	for (char *s = d + 1;; s++) {
		bool end = *s == '\0';

		if (*s != '/' && !end)
			continue;
		*s = '\0';
		if (mkdir(d, 0777) < 0 && errno != EEXIST)
			return -errno;
		if (end)
			return 0;
		*s = '/';
	}
}

int cli_probe_result_path(const struct probe *p, const struct cli_probe_output *o, const char *dir, const char *name,
			  char **ret)
{
	_cleanup_(freep) char *def = NULL;
	const struct probe_load_point *pts;
	size_t n, top = cli_probe_top_point(p);
	char *path;
	int r;

	pts = probe_load_points(p, &n);
	if (!name) {
		const char *model = o->model ? o->model : "default", *slash = strrchr(model, '/');
		char rate[40], conc[32] = "", date[32];

		py_float(rate, sizeof(rate), top < n ? pts[top].result.request_rate : INFINITY);
		if (top < n && pts[top].result.max_concurrency)
			snprintf(conc, sizeof(conc), "-concurrency%" PRIu32, pts[top].result.max_concurrency);
		date_str(date, sizeof(date), o->started);
		if (asprintf(&def, "%s-%sqps%s-%s-%s.json", o->label ? o->label : o->backend, rate, conc,
			     slash ? slash + 1 : model, date) < 0)
			return -ENOMEM;
		name = def;
	}
	if (dir) {
		r = make_dirs(dir);
		if (r < 0)
			return log_error_errno(r, "--result-dir: cannot make %s", dir);
		if (asprintf(&path, "%s/%s", dir, name) < 0)
			return -ENOMEM;
	} else if (!(path = strdup(name)))
		return -ENOMEM;
	*ret = path;
	return 0;
}

int cli_probe_save_json(const char *path, const cJSON *j)
{
	_cleanup_(cjson_freep) char *s = cJSON_Print(j);
	_cleanup_(fclosep) FILE *f = NULL;

	if (!s)
		return log_error_errno(-ENOMEM, "--save-result: out of memory");
	f = fopen(path, "we");
	if (!f)
		return log_error_errno(-errno, "--save-result: cannot open %s", path);
	fprintf(f, "%s\n", s);
	if (fflush(f) != 0 || ferror(f))
		return log_error_errno(errno ? -errno : -EIO, "--save-result: cannot write %s", path);
	return 0;
}

/* realtime_offset: CLOCK_REALTIME − CLOCK_MONOTONIC in µs, to date the sends. */
static int request_line(FILE *f, size_t point, const struct probe_request_result *r, int64_t realtime_offset)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	_cleanup_(cjson_freep) char *s = NULL;
	cJSON *itl = cJSON_CreateArray();
	double tpot = probe_request_tpot_usec(r);

	if (!j || !itl || !cJSON_AddItemToObject(j, "itl_ms", itl)) {
		cJSON_Delete(itl);
		return -ENOMEM;
	}
	if (json_add_number(j, "load_point", (double)point) < 0 || json_add_number(j, "index", r->index) < 0 ||
	    json_add_bool(j, "success", r->success) < 0 || json_add_number(j, "http_status", r->http_status) < 0 ||
	    (r->error && json_add_string(j, "error", r->error) < 0) ||
	    json_add_number(j, "send_usec", (double)r->send_usec) < 0 ||
	    json_add_number(j, "timestamp", ((double)r->send_usec + (double)realtime_offset) / 1e6) < 0 ||
	    json_add_number(j, "ttft_ms", usec_to_ms(r->ttft_usec)) < 0 ||
	    (tpot >= 0 && json_add_number(j, "tpot_ms", tpot / 1000.0) < 0) ||
	    json_add_number(j, "e2el_ms", usec_to_ms(r->e2e_usec)) < 0 ||
	    json_add_number(j, "input_tokens", r->input_tokens) < 0 ||
	    json_add_number(j, "output_tokens", r->output_tokens) < 0)
		return -ENOMEM;
	for (size_t g = 0; g < r->n_itl; g++)
		if (add_number_to_array(itl, usec_to_ms(r->itl_usec[g])) < 0)
			return -ENOMEM;
	s = cJSON_PrintUnformatted(j);
	if (!s)
		return -ENOMEM;
	fprintf(f, "%s\n", s);
	return 0;
}

int cli_probe_save_requests(const char *path, const struct probe *p)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "we");
	const struct probe_load_point *pts;
	int64_t offset = (int64_t)real_usec() - (int64_t)mono_usec();
	size_t n;

	if (!f)
		return log_error_errno(-errno, "--save-requests: cannot open %s", path);
	pts = probe_load_points(p, &n);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < pts[i].n_requests; k++)
			if (request_line(f, i, &pts[i].requests[k], offset) < 0)
				return log_error_errno(-ENOMEM, "--save-requests: out of memory");
	if (fflush(f) != 0 || ferror(f))
		return log_error_errno(errno ? -errno : -EIO, "--save-requests: cannot write %s", path);
	return 0;
}

/* ---- for people ---- */

/* "HTTP 500 ×3: body" for an HTTP error, "reason ×3" otherwise. */
/* "KIND ×N: the example's detail", or "TEXT ×N" when the kind is all of it. */
static void print_reason(FILE *f, const char *indent, const struct probe_failure_reason *w)
{
	size_t head = probe_failure_kind_len(w->reason);
	const char *rest = w->reason + head;

	rest += strspn(rest, ": ");
	if (*rest)
		fprintf(f, "%s%.*s ×%" PRIu32 ": %s\n", indent, (int)head, w->reason, w->count, rest);
	else
		fprintf(f, "%s%s ×%" PRIu32 "\n", indent, w->reason, w->count);
}

void cli_probe_print_failures(FILE *f, const char *indent, const struct probe_request_result *reqs, size_t n)
{
	_cleanup_(freep) struct probe_failure_reason *why = NULL;
	size_t n_why = 0, rest = 0;

	if (probe_failure_reasons(reqs, n, &why, &n_why) < 0) {
		fprintf(f, "%s(out of memory counting the reasons)\n", indent);
		return;
	}
	for (size_t i = 0; i < n_why; i++) {
		if (i < MAX_REASONS_SHOWN)
			print_reason(f, indent, &why[i]);
		else
			rest += why[i].count;
	}
	if (n_why > MAX_REASONS_SHOWN)
		fprintf(f, "%s... %zu other reasons ×%zu\n", indent, n_why - MAX_REASONS_SHOWN, rest);
}

static void print_point(FILE *f, const struct probe_load_point *pt)
{
	probe_result_print(f, &pt->result);
	if (pt->result.failed > 0) {
		fprintf(f, "Failed requests by reason:\n");
		cli_probe_print_failures(f, "  ", pt->requests, pt->n_requests);
	}
}

static void print_search(FILE *f, const struct probe *p, const struct probe_config *cfg)
{
	const struct probe_load_point *pts;
	struct probe_outcome o;
	char sla[256];
	size_t n;

	pts = probe_load_points(p, &n);
	probe_get_outcome(p, &o);
	probe_sla_format(&cfg->sla, sla, sizeof(sla));
	fprintf(f, "============ goodput max-rate search ============\n");
	fprintf(f, "SLA: %s\n", sla);
	fprintf(f, "%-4s %-11s %9s %6s %10s %8s %10s %11s %11s %11s %s\n", "#", "rate (r/s)", "offered", "sent",
		"done/s", "failed", "attain", "p99 TTFT", "p99 TPOT", "goodput r/s", "SLA");
	for (size_t i = 0; i < n; i++) {
		const struct probe_result *r = &pts[i].result;
		char rb[32], ob[32], verdict[64];
		size_t k99 = r->n_percentiles;

		for (size_t k = 0; k < r->n_percentiles; k++)
			if (r->percentiles[k] == 99)
				k99 = k;
		if (pts[i].saturation) {
			snprintf(rb, sizeof(rb), "sat (inf)");
			snprintf(ob, sizeof(ob), "-");
		} else {
			snprintf(rb, sizeof(rb), "%.3f", r->request_rate);
			snprintf(ob, sizeof(ob), "%.3f", r->offered_rate);
		}
		if (r->verdict != PROBE_VERDICT_NONE)
			snprintf(verdict, sizeof(verdict), "%s (%s, %.0f%%)", r->sla_met ? "met" : "missed",
				 probe_verdict_name(r->verdict), r->verdict_confidence * 100);
		else
			snprintf(verdict, sizeof(verdict), "%s", r->sla_met ? "met" : "missed");
		fprintf(f, "%-4zu %-11s %9s %6" PRIu32 " %10.3f %8" PRIu32 " %9.1f%% %9.1fms %9.1fms %11.3f %s\n",
			i + 1, rb, ob, r->num_prompts, r->request_throughput, r->failed, r->attainment * 100,
			k99 < r->n_percentiles ? r->stat[PROBE_METRIC_TTFT].pct_ms[k99] : NAN,
			k99 < r->n_percentiles ? r->stat[PROBE_METRIC_TPOT].pct_ms[k99] : NAN, r->request_goodput,
			verdict);
	}
	switch (o.search) {
	case PROBE_SEARCH_FOUND:
		if (o.budget_spent)
			fprintf(f,
				"Max request rate meeting the SLA: %.3f req/s; the search stopped at its limit of %u "
				"load points, so a higher rate may meet it too\n",
				o.max_rate, cfg->max_load_points);
		else
			fprintf(f, "Max request rate meeting the SLA: %.3f req/s (a rate %.0f%% higher did not)\n",
				o.max_rate, cfg->rate_tolerance * 100);
		if (o.best_point < n && pts[o.best_point].result.offered_rate > 0)
			fprintf(f,
				"  as sent: %.3f req/s over its %" PRIu32 " requests (one arrival sequence, scaled)\n",
				pts[o.best_point].result.offered_rate, pts[o.best_point].result.num_prompts);
		if (o.met_above > 0)
			fprintf(f,
				"Note: %.3f req/s, above it, met the SLA too, but a rate between did not: the verdicts "
				"disagree (noise, or a server that changed while it was measured)\n",
				o.met_above);
		if (o.failed_below > 0)
			fprintf(f,
				"Note: %.3f req/s, below it, did not meet the SLA: the verdicts disagree (noise, or a "
				"server that changed while it was measured)\n",
				o.failed_below);
		break;
	case PROBE_SEARCH_NEVER_MET:
		fprintf(f, "The server never met the SLA, even at the lowest rate tried.\n");
		break;
	case PROBE_SEARCH_CLIENT_LIMIT:
		if (o.best_point < n && pts[o.best_point].saturation)
			fprintf(f,
				"The SLA held even with every request at once (%.3f req/s completed): the server is "
				"not "
				"the limit of this workload; raise --num-prompts or --max-concurrency.\n",
				o.saturation_rate);
		else
			fprintf(f,
				"The SLA held at every rate tried up to %.3f req/s, within %.0f%% of what the server "
				"completes with every request at once (%.3f req/s): its limit is its throughput, not "
				"the SLA.\n",
				o.max_rate, cfg->rate_tolerance * 100, o.saturation_rate);
		break;
	case PROBE_SEARCH_SERVER_FAILED:
		if (o.failed_point < n && pts[o.failed_point].result.completed == 0)
			fprintf(f, "The server failed every request of load point %zu: it is broken, not slow.\n",
				o.failed_point + 1);
		else
			fprintf(f,
				"The server failed requests: at the lowest rate tried (load point %zu) the requests "
				"that completed met the SLA, the failed ones kept it from holding.\n",
				o.failed_point + 1);
		break;
	default:
		break;
	}
}

void cli_probe_print(FILE *f, const struct probe *p, const struct probe_config *cfg)
{
	const struct probe_load_point *pts;
	size_t n, top = cli_probe_top_point(p);
	struct probe_outcome o;

	pts = probe_load_points(p, &n);
	probe_get_outcome(p, &o);
	if (cfg->find_max_rate) {
		print_search(f, p, cfg);
		if (top < n && top == o.best_point)
			fprintf(f, "\nAt the max rate:\n");
		else if (top < n)
			fprintf(f, "\nLoad point %zu:\n", top + 1);
	}
	if (top < n)
		print_point(f, &pts[top]);
}
