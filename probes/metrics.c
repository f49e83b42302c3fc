/* metrics.c — from per-request timings to the figures of one load point,
 * exactly as vLLM's serving benchmark computes them, plus goodput's SLA
 * attainment and good-token throughput.
 *
 * vLLM (benchmarks/serve, calculate_metrics): only successful requests
 * contribute latencies and token totals; TTFT and E2E per request; TPOT per
 * request with more than one output token; ITL pools every gap of every
 * successful request; mean = np.mean, std = np.std (population), median =
 * np.median, percentiles = np.percentile with its default linear
 * interpolation; an empty list gives 0 for every statistic (vLLM's `or 0`).
 * Throughputs divide by the benchmark's duration. Goodput in vLLM counts good
 * requests per second; goodput also reports good output tokens per second,
 * which is what cost per token is computed from.
 *
 * The JSON writer and reader and the printed table are in metrics-io.c. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "ratesearch.h"
#include "time-util.h"

void probe_request_result_done(struct probe_request_result *r)
{
	if (!r)
		return;
	free(r->error);
	free(r->itl_usec);
	free(r->text);
	r->text = NULL;
	r->error = NULL;
	r->itl_usec = NULL;
	r->n_itl = 0;
}

double probe_request_tpot_usec(const struct probe_request_result *r)
{
	if (!r->success || r->output_tokens <= 1)
		return -1;
	return ((double)r->e2e_usec - (double)r->ttft_usec) / (double)(r->output_tokens - 1);
}

/* numpy.percentile(x, p) with method="linear" on sorted x (n > 0); numpy's
 * _lerp computes from the nearer end for t >= 0.5, which this mirrors so
 * results agree to the last bit on typical inputs. */
double probe_percentile_sorted(const double *x, size_t n, double p)
{
	double rank, t, a, b;
	size_t lo;

	if (n == 0)
		return 0;
	rank = p / 100.0 * (double)(n - 1);
	if (rank <= 0)
		return x[0];
	if (rank >= (double)(n - 1))
		return x[n - 1];
	lo = (size_t)floor(rank);
	t = rank - (double)lo;
	a = x[lo];
	b = x[lo + 1];
	return t >= 0.5 ? b - (b - a) * (1.0 - t) : a + (b - a) * t;
}

/* The positions of sorted x that probe_percentile_sorted(x, n, p) reads
 * (n > 0). */
static size_t percentile_ranks(size_t n, double p, size_t ret[2])
{
	double rank = p / 100.0 * (double)(n - 1);

	if (rank <= 0) {
		ret[0] = 0;
		return 1;
	}
	if (rank >= (double)(n - 1)) {
		ret[0] = n - 1;
		return 1;
	}
	ret[0] = (size_t)floor(rank);
	ret[1] = ret[0] + 1;
	return 2;
}

/* Puts at each of the positions ranks (any order, repeats allowed; sorted
 * here) what a sort of x would put there. Not a sort: each order statistic
 * is selected in turn, from the smallest up, over what the last one left
 * above it, so that the rest of the array costs nothing (an ITL array holds
 * every token gap of a load point). */
static void select_ranks(double *x, size_t n, size_t *ranks, size_t n_ranks)
{
	size_t from = 0;

	qsort(ranks, n_ranks, sizeof(ranks[0]), array_cmp_size);
	for (size_t k = 0; k < n_ranks; k++) {
		if (k > 0 && ranks[k] == ranks[k - 1])
			continue;
		(void)array_select_double(x + from, n - from, ranks[k] - from);
		from = ranks[k];
	}
}

double probe_percentile_select(double *x, size_t n, double p)
{
	size_t ranks[2];

	if (n == 0)
		return 0;
	select_ranks(x, n, ranks, percentile_ranks(n, p, ranks));
	return probe_percentile_sorted(x, n, p);
}

/* Mean, median, std and percentiles (ms) of n samples (ms), reordered in
 * place: only the positions the figures read hold what a sort would put
 * there (select_ranks). */
static void stat_compute(double *x, size_t n, const double *pcts, size_t n_pcts, struct probe_stat *ret)
{
	size_t ranks[2 * PROBE_MAX_PERCENTILES + 2], n_ranks = 0;
	double sum = 0, var = 0, mean;

	*ret = (struct probe_stat){ .n = n };
	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
		sum += x[i];
	mean = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean);
	ret->mean_ms = mean;
	ret->std_ms = sqrt(var / (double)n);

	ranks[n_ranks++] = n / 2;
	if (n % 2 == 0)
		ranks[n_ranks++] = n / 2 - 1;
	for (size_t k = 0; k < n_pcts && k < PROBE_MAX_PERCENTILES; k++)
		n_ranks += percentile_ranks(n, pcts[k], ranks + n_ranks);
	select_ranks(x, n, ranks, n_ranks);
	ret->median_ms = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2.0;
	for (size_t k = 0; k < n_pcts; k++)
		ret->pct_ms[k] = probe_percentile_sorted(x, n, pcts[k]);
}

/* Samples of one metric (ms) over the successful requests. The caller frees
 * *ret; it may be NULL when there are none. */
static int collect(const struct probe_request_result *reqs, size_t n_reqs, enum probe_metric m, double **ret,
		   size_t *ret_n)
{
	size_t n = 0, cap = 0;
	double *x;

	for (size_t i = 0; i < n_reqs; i++)
		if (reqs[i].success)
			cap += m == PROBE_METRIC_ITL ? reqs[i].n_itl : 1;
	x = malloc(MAX(cap, (size_t)1) * sizeof(double));
	if (!x)
		return -ENOMEM;
	for (size_t i = 0; i < n_reqs; i++) {
		const struct probe_request_result *r = &reqs[i];
		double tpot;

		if (!r->success)
			continue;
		switch (m) {
		case PROBE_METRIC_TTFT:
			x[n++] = (double)r->ttft_usec / 1000.0;
			break;
		case PROBE_METRIC_TPOT:
			tpot = probe_request_tpot_usec(r);
			if (tpot >= 0)
				x[n++] = tpot / 1000.0;
			break;
		case PROBE_METRIC_ITL:
			for (size_t k = 0; k < r->n_itl; k++)
				x[n++] = (double)r->itl_usec[k] / 1000.0;
			break;
		case PROBE_METRIC_E2EL:
		default:
			x[n++] = (double)r->e2e_usec / 1000.0;
			break;
		}
	}
	*ret = x;
	*ret_n = n;
	return 0;
}

struct conc_event {
	uint64_t t;
	int delta;
};

static int cmp_event(const void *a, const void *b)
{
	const struct conc_event *x = a, *y = b;

	if (x->t != y->t)
		return (x->t > y->t) - (x->t < y->t);
	return x->delta - y->delta; /* ends (-1) before starts (+1) at the same instant */
}

/* Peak number of requests in flight, from send and finish times. */
static int peak_concurrency(const struct probe_request_result *reqs, size_t n, double *ret)
{
	_cleanup_(freep) struct conc_event *ev = NULL;
	int cur = 0, peak = 0;

	if (n == 0) {
		*ret = 0;
		return 0;
	}
	ev = malloc(2 * n * sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		ev[2 * i] = (struct conc_event){ reqs[i].send_usec, +1 };
		ev[2 * i + 1] = (struct conc_event){ reqs[i].send_usec + reqs[i].e2e_usec, -1 };
	}
	qsort(ev, 2 * n, sizeof(*ev), cmp_event);
	for (size_t i = 0; i < 2 * n; i++) {
		cur += ev[i].delta;
		peak = MAX(peak, cur);
	}
	*ret = peak;
	return 0;
}

#define PEAK_BUCKETS_MAX (10u * 1000 * 1000) /* one-second buckets: 115 days */

/* vLLM's max_output_tokens_per_s: the most content chunks (vLLM counts
 * the first token and each gap after it) of the successful requests in one
 * one-second bucket, buckets counted from their earliest send. */
static int peak_output_rate(const struct probe_request_result *reqs, size_t n, double *ret)
{
	_cleanup_(freep) uint32_t *bucket = NULL;
	uint64_t t0 = UINT64_MAX, end = 0, peak = 0;
	size_t n_buckets;

	for (size_t i = 0; i < n; i++)
		if (reqs[i].success) {
			t0 = MIN(t0, reqs[i].send_usec);
			end = MAX(end, reqs[i].send_usec + reqs[i].e2e_usec);
		}
	*ret = 0;
	if (t0 == UINT64_MAX)
		return 0;
	n_buckets = (size_t)((end - t0 + USEC_PER_SEC - 1) / USEC_PER_SEC) + 1;
	if (n_buckets > PEAK_BUCKETS_MAX)
		return 0;
	bucket = calloc(n_buckets, sizeof(*bucket));
	if (!bucket)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t t;

		if (!reqs[i].success)
			continue;
		t = reqs[i].send_usec + reqs[i].ttft_usec;
		for (size_t g = 0;; g++) {
			size_t b = (size_t)((t - t0) / USEC_PER_SEC);

			if (b < n_buckets) {
				bucket[b]++;
				peak = MAX(peak, (uint64_t)bucket[b]);
			}
			if (g >= reqs[i].n_itl)
				break;
			t += reqs[i].itl_usec[g];
		}
	}
	*ret = (double)peak;
	return 0;
}

/* Whether the percentile bounds hold (see metrics.h). */
static int percentile_bounds_hold(const struct probe_request_result *reqs, size_t n_reqs, uint32_t failed,
				  const struct probe_sla *sla, bool *ret)
{
	bool ok = true;

	for (size_t i = 0; sla && i < sla->n_bounds && ok; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];
		_cleanup_(freep) double *x = NULL;
		size_t n = 0;
		int r;

		if (b->percentile == 0)
			continue;
		if ((double)failed > (100.0 - b->percentile) / 100.0 * (double)n_reqs) {
			ok = false;
			break;
		}
		r = collect(reqs, n_reqs, b->metric, &x, &n);
		if (r < 0)
			return r;
		if (n > 0 && probe_percentile_select(x, n, b->percentile) > b->bound_ms)
			ok = false;
	}
	*ret = ok;
	return 0;
}

/* (requests − 1) over the span of their send times; 0 with fewer than two
 * requests or no span (everything sent at once). */
static double offered_rate(const struct probe_request_result *reqs, size_t n)
{
	uint64_t first = UINT64_MAX, last = 0;

	for (size_t i = 0; i < n; i++) {
		first = MIN(first, reqs[i].send_usec);
		last = MAX(last, reqs[i].send_usec);
	}
	if (n < 2 || last <= first)
		return 0;
	return (double)(n - 1) / ((double)(last - first) / 1e6);
}

/* The most frequent reasons, their texts cut at a character boundary. */
static int keep_failure_reasons(const struct probe_request_result *reqs, size_t n, struct probe_result *res)
{
	_cleanup_(freep) struct probe_failure_reason *why = NULL;
	size_t n_why = 0;
	int r;

	r = probe_failure_reasons(reqs, n, &why, &n_why);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_why && i < PROBE_MAX_FAILURE_REASONS; i++) {
		struct probe_failure_count *c = &res->failure_reasons[i];
		size_t len = strlen(why[i].reason);

		if (len >= sizeof(c->reason)) {
			len = sizeof(c->reason) - 1;
			while (len > 0 && ((unsigned char)why[i].reason[len] & 0xC0) == 0x80)
				len--; /* not inside a UTF-8 sequence */
		}
		memcpy(c->reason, why[i].reason, len);
		c->reason[len] = 0;
		c->count = why[i].count;
		res->n_failure_reasons++;
	}
	return 0;
}

void probe_result_set_verdict(struct probe_result *r, enum probe_verdict v, uint32_t requests, double confidence,
			      enum probe_cap cap)
{
	double target = r->sla.attainment > 0 ? r->sla.attainment : PROBE_SLA_DEFAULT_ATTAINMENT;
	uint32_t good = (uint32_t)lround(r->attainment * r->num_prompts);

	r->verdict = v;
	r->verdict_requests = requests;
	r->verdict_confidence = confidence;
	r->cap = PROBE_CAP_NONE;
	if (v == PROBE_VERDICT_UNDECIDED) {
		/* never a silent "missed": what was measured decides, its
		 * precision stated */
		r->cap = cap != PROBE_CAP_NONE ? cap : PROBE_CAP_REQUESTS;
		probe_wilson_interval(good, r->num_prompts, PROBE_CAP_Z, &r->attainment_lo, &r->attainment_hi);
		r->sla_met = r->attainment >= target - 1e-12 && r->percentiles_met;
	} else if (v != PROBE_VERDICT_NONE)
		r->sla_met = v == PROBE_VERDICT_MET && r->percentiles_met;
}

void probe_result_verdict_text(const struct probe_result *r, char *buf, size_t size)
{
	if (size == 0)
		return;
	buf[0] = 0;
	if (r->verdict == PROBE_VERDICT_MET || r->verdict == PROBE_VERDICT_MISSED)
		snprintf(buf, size, "%s at %.0f %% confidence (first %" PRIu32 " requests)",
			 probe_verdict_name(r->verdict), r->verdict_confidence * 100, r->verdict_requests);
	else if (r->verdict == PROBE_VERDICT_UNDECIDED)
		snprintf(buf, size, "%s at the cap: %.1f %%, %.0f %% CI %.0f–%.0f %% (%" PRIu32 " requests; %s cap)",
			 r->sla_met ? "met" : "missed", r->attainment * 100, PROBE_CAP_CI_LEVEL * 100,
			 r->attainment_lo * 100, r->attainment_hi * 100, r->num_prompts,
			 r->cap == PROBE_CAP_SECONDS ? "time" : "request");
}

static const char *const cap_names[] = { "none", "requests", "seconds", NULL };

const char *probe_cap_name(enum probe_cap c)
{
	return (unsigned)c < ELEMENTSOF(cap_names) - 1 ? cap_names[c] : "?";
}

int probe_cap_from_name(const char *s)
{
	for (size_t i = 0; cap_names[i]; i++)
		if (strcmp(cap_names[i], s) == 0)
			return (int)i;
	return -EINVAL;
}

static const char *const verdict_names[] = { "none", "met", "missed", "undecided", NULL };

const char *probe_verdict_name(enum probe_verdict v)
{
	return (unsigned)v < ELEMENTSOF(verdict_names) - 1 ? verdict_names[v] : "?";
}

int probe_verdict_from_name(const char *s)
{
	for (size_t i = 0; verdict_names[i]; i++)
		if (strcmp(verdict_names[i], s) == 0)
			return (int)i;
	return -EINVAL;
}

const double probe_sla_scales[PROBE_SLA_SCALES] = { 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2,
						    1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0 };

/* The attainment of the requests under sla with its per-request bounds scaled. */
static void scaled_attainment(const struct probe_request_result *reqs, size_t n_reqs, const struct probe_sla *sla,
			      struct probe_result *res)
{
	if (!probe_sla_has_request_bounds(sla) || n_reqs == 0)
		return;
	for (size_t k = 0; k < PROBE_SLA_SCALES; k++) {
		struct probe_sla scaled = *sla;
		size_t good = 0;

		for (size_t b = 0; b < scaled.n_bounds; b++)
			scaled.bounds[b].bound_ms *= probe_sla_scales[k];
		for (size_t i = 0; i < n_reqs; i++)
			good += probe_request_is_good(&reqs[i], &scaled);
		res->scaled_attainment[k] = (double)good / (double)n_reqs;
	}
	res->has_scaled_attainment = true;
}

int probe_result_compute(const struct probe_request_result *reqs, size_t n_reqs, double duration_s, const double *pcts,
			 size_t n_pcts, const struct probe_sla *sla, struct probe_result *ret, struct error *err)
{
	static const double default_pcts[] = { 50, 90, 99 };
	struct probe_result res = { .burstiness = 1.0, .client_lag_p95_ms = NAN };
	uint64_t good_tokens = 0, sum_e2e = 0;
	uint32_t good = 0;
	bool pct_ok = true;
	int r;

	if (!(duration_s > 0) || !isfinite(duration_s))
		return error_set(err, -EINVAL, "duration: expected a time > 0 s, got %g", duration_s);
	if (n_pcts > PROBE_MAX_PERCENTILES)
		return error_set(err, -E2BIG, "percentiles: at most %d, got %zu", PROBE_MAX_PERCENTILES, n_pcts);
	if (n_pcts == 0) {
		pcts = default_pcts;
		n_pcts = ELEMENTSOF(default_pcts);
	}
	for (size_t k = 0; k < n_pcts; k++)
		if (!(pcts[k] >= 0 && pcts[k] <= 100))
			return error_set(err, -EINVAL, "percentiles: %g is not in [0, 100]", pcts[k]);
	if (n_reqs > UINT32_MAX)
		return error_set(err, -E2BIG, "requests: too many (%zu)", n_reqs);

	res.n_percentiles = n_pcts;
	memcpy(res.percentiles, pcts, n_pcts * sizeof(double));
	if (sla)
		res.sla = *sla;
	res.num_prompts = (uint32_t)n_reqs;
	res.duration_s = duration_s;

	for (size_t i = 0; i < n_reqs; i++) {
		const struct probe_request_result *q = &reqs[i];

		sum_e2e += q->e2e_usec;
		if (!q->success) {
			if (q->cut)
				res.cut++;
			else
				res.failed++;
			continue;
		}
		res.completed++;
		res.total_input_tokens += q->input_tokens;
		res.total_output_tokens += q->output_tokens;
		if (probe_request_is_good(q, sla)) {
			good++;
			good_tokens += q->output_tokens;
		}
	}
	res.request_throughput = res.completed / duration_s;
	res.output_throughput = (double)res.total_output_tokens / duration_s;
	res.total_token_throughput = (double)(res.total_input_tokens + res.total_output_tokens) / duration_s;
	res.mean_concurrency = (double)sum_e2e / 1e6 / duration_s;
	r = peak_concurrency(reqs, n_reqs, &res.max_concurrent_requests);
	if (r >= 0)
		r = peak_output_rate(reqs, n_reqs, &res.max_output_tokens_per_s);
	if (r < 0)
		return error_set(err, r, "metrics: out of memory");

	for (int m = 0; m < _PROBE_METRIC_MAX; m++) {
		_cleanup_(freep) double *x = NULL;
		size_t n = 0;

		r = collect(reqs, n_reqs, m, &x, &n);
		if (r < 0)
			return error_set(err, r, "metrics: out of memory");
		stat_compute(x, n, res.percentiles, res.n_percentiles, &res.stat[m]);
	}

	res.offered_rate = offered_rate(reqs, n_reqs);
	r = keep_failure_reasons(reqs, n_reqs, &res);
	if (r < 0)
		return error_set(err, r, "metrics: out of memory");

	res.attainment = n_reqs ? (double)good / (double)n_reqs : 0;
	res.request_goodput = good / duration_s;
	res.good_output_throughput = (double)good_tokens / duration_s;
	scaled_attainment(reqs, n_reqs, sla, &res);
	r = percentile_bounds_hold(reqs, n_reqs, res.failed, sla, &pct_ok);
	if (r < 0)
		return error_set(err, r, "metrics: out of memory");
	res.percentiles_met = pct_ok;
	if (probe_sla_has_request_bounds(sla)) {
		double target = res.sla.attainment > 0 ? res.sla.attainment : PROBE_SLA_DEFAULT_ATTAINMENT;

		/* a hair of slack so that 9/10 meets 0.9 despite rounding */
		res.sla_met = res.attainment >= target - 1e-12 && pct_ok;
	} else if (!probe_sla_empty(sla))
		res.sla_met = pct_ok;
	else
		res.sla_met = res.failed == 0 && n_reqs > 0;
	*ret = res;
	return 0;
}

/* ---- failures ---- */

/* The kind of a failure: the words before what varies from request to
 * request. "HTTP 500: <body>" and "server sent an error in the stream:
 * <message>" are of the kind before the colon; otherwise the text before a
 * quoted or JSON detail ('SSE data is not valid JSON (...): "{\"id\":..."'),
 * else the whole text ("connection refused", "TLS: wrong version number"). */
size_t probe_failure_kind_len(const char *text)
{
	static const char *const prefixed[] = { "server sent an error in the stream:" };
	const char *colon = strchr(text, ':');
	size_t n;

	if (strncmp(text, "HTTP ", 5) == 0 && colon && colon > text + 5 &&
	    strspn(text + 5, "0123456789") == (size_t)(colon - text - 5))
		return (size_t)(colon - text);
	for (size_t i = 0; i < ELEMENTSOF(prefixed); i++)
		if (strncmp(text, prefixed[i], strlen(prefixed[i])) == 0)
			return strlen(prefixed[i]) - 1;
	n = strcspn(text, "\"{[");
	if (text[n] == '\0')
		return n;
	while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == ':'))
		n--;
	return n;
}

static int cmp_kind(const char *a, const char *b)
{
	size_t na = probe_failure_kind_len(a), nb = probe_failure_kind_len(b);
	int c = strncmp(a, b, MIN(na, nb));

	if (c != 0)
		return c;
	return na == nb ? 0 : na < nb ? -1 : 1;
}

static int cmp_str(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	int c = cmp_kind(x, y);

	return c != 0 ? c : strcmp(x, y);
}

static int cmp_reason(const void *a, const void *b)
{
	const struct probe_failure_reason *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->reason, y->reason);
}

int probe_failure_reasons(const struct probe_request_result *reqs, size_t n, struct probe_failure_reason **ret,
			  size_t *ret_n)
{
	_cleanup_(freep) const char **texts = NULL;
	struct probe_failure_reason *out;
	size_t n_failed = 0, n_out = 0;

	for (size_t i = 0; i < n; i++)
		n_failed += !reqs[i].success;
	*ret = NULL;
	*ret_n = 0;
	if (n_failed == 0)
		return 0;
	texts = calloc(n_failed, sizeof(*texts));
	out = calloc(n_failed, sizeof(*out));
	if (!texts || !out) {
		free(out);
		return -ENOMEM;
	}
	n_failed = 0;
	for (size_t i = 0; i < n; i++)
		if (!reqs[i].success)
			texts[n_failed++] = reqs[i].error ? reqs[i].error : "unknown error";
	qsort(texts, n_failed, sizeof(*texts), cmp_str);
	for (size_t i = 0; i < n_failed; i++) {
		if (n_out > 0 && cmp_kind(out[n_out - 1].reason, texts[i]) == 0)
			out[n_out - 1].count++;
		else
			out[n_out++] = (struct probe_failure_reason){ .reason = texts[i], .count = 1 };
	}
	qsort(out, n_out, sizeof(*out), cmp_reason);
	*ret = out;
	*ret_n = n_out;
	return 0;
}

/* ---- why a load point missed its SLA ---- */

double probe_request_value_ms(const struct probe_request_result *r, enum probe_metric m)
{
	double v = 0;

	if (!r->success)
		return INFINITY;
	switch (m) {
	case PROBE_METRIC_TTFT:
		return (double)r->ttft_usec / 1000.0;
	case PROBE_METRIC_TPOT:
		return MAX(probe_request_tpot_usec(r), 0.0) / 1000.0;
	case PROBE_METRIC_ITL:
		for (size_t k = 0; k < r->n_itl; k++)
			v = MAX(v, (double)r->itl_usec[k] / 1000.0);
		return v;
	default:
		return (double)r->e2e_usec / 1000.0;
	}
}

static void append_bound(char *buf, size_t size, size_t *len, const char *metric, const char *pct, double v,
			 double bound)
{
	int k;

	if (*len >= size)
		return;
	if (isinf(v))
		k = snprintf(buf + *len, size - *len, "%s%s %s: failed requests", *len ? ", " : "", metric, pct);
	else if (v > bound)
		k = snprintf(buf + *len, size - *len, "%s%s %s %.4g ms over %.4g ms (+%.0f%%)", *len ? ", " : "",
			     metric, pct, v, bound, (v / bound - 1) * 100);
	else
		k = snprintf(buf + *len, size - *len, "%s%s %s %.4g ms within %.4g ms (−%.0f%%)", *len ? ", " : "",
			     metric, pct, v, bound, (1 - v / bound) * 100);
	*len = k > 0 ? MIN(*len + (size_t)k, size) : *len;
}

int probe_result_margins(const struct probe_result *r, char *buf, size_t size)
{
	double t = r->sla.attainment > 0 ? r->sla.attainment : PROBE_SLA_DEFAULT_ATTAINMENT;
	size_t len = 0;

	if (size == 0)
		return -EINVAL;
	buf[0] = 0;
	for (size_t i = 0; i < r->sla.n_bounds; i++) {
		const struct probe_sla_bound *b = &r->sla.bounds[i];
		double want = b->percentile > 0 ? b->percentile : t * 100, v;
		size_t best = SIZE_MAX;
		char pct[32];

		/* the percentile the bound must hold at, or the nearest measured */
		for (size_t k = 0; k < r->n_percentiles; k++)
			if (best == SIZE_MAX || fabs(r->percentiles[k] - want) < fabs(r->percentiles[best] - want))
				best = k;
		if (best == SIZE_MAX || r->stat[b->metric].n == 0)
			continue;
		v = r->stat[b->metric].pct_ms[best];
		snprintf(pct, sizeof(pct), "p%.4g", r->percentiles[best]);
		append_bound(buf, size, &len, probe_metric_name(b->metric), pct, v, b->bound_ms);
	}
	return 0;
}

int probe_sla_shortfall(const struct probe_request_result *reqs, size_t n, const struct probe_sla *sla, char *buf,
			size_t size)
{
	double t = sla->attainment > 0 ? sla->attainment : PROBE_SLA_DEFAULT_ATTAINMENT;
	size_t len = 0;
	char pct[32];

	if (size == 0)
		return -EINVAL;
	buf[0] = 0;
	if (n == 0)
		return 0;
	for (size_t i = 0; i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];
		_cleanup_(freep) double *x = NULL;
		size_t m = 0;
		double v;
		int r;

		if (b->percentile == 0) {
			/* the figure at the attainment target's quantile: what the bound must hold */
			x = calloc(n, sizeof(*x));
			if (!x)
				return -ENOMEM;
			for (size_t k = 0; k < n; k++)
				x[k] = probe_request_value_ms(&reqs[k], b->metric);
			/* the smallest figure ceil(t·n) of the requests stay within */
			v = array_select_double(x, n, CLAMP((size_t)ceil(t * (double)n - 1e-9), (size_t)1, n) - 1);
			snprintf(pct, sizeof(pct), "p%.4g", t * 100);
		} else {
			size_t failed = 0;

			for (size_t k = 0; k < n; k++)
				failed += !reqs[k].success;
			r = collect(reqs, n, b->metric, &x, &m);
			if (r < 0)
				return r;
			v = (double)failed > (100.0 - b->percentile) / 100.0 * (double)n || m == 0
				    ? INFINITY
				    : probe_percentile_select(x, m, b->percentile);
			snprintf(pct, sizeof(pct), "p%.4g", b->percentile);
		}
		append_bound(buf, size, &len, probe_metric_name(b->metric), pct, v, b->bound_ms);
	}
	return 0;
}

void probe_result_format_failures(const struct probe_result *r, char *buf, size_t size)
{
	size_t len = 0, shown = 0;

	if (size == 0)
		return;
	buf[0] = 0;
	for (size_t i = 0; i < r->n_failure_reasons && len < size; i++) {
		int k = snprintf(buf + len, size - len, "%s%s ×%" PRIu32, i ? ", " : "", r->failure_reasons[i].reason,
				 r->failure_reasons[i].count);

		shown += r->failure_reasons[i].count;
		len = k > 0 ? MIN(len + (size_t)k, size) : len;
	}
	if (shown < r->failed && len < size)
		snprintf(buf + len, size - len, "%s%" PRIu32 " for other reasons", len ? ", " : "",
			 r->failed - (uint32_t)shown);
}
