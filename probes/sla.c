/* sla.c — latency SLAs: parsing goodput's `--sla` and vLLM's `--goodput`
 * forms, printing them, and judging one request against the per-request
 * bounds (see metrics.h for what a bound means).
 *
 * Grammar (items separated by commas and/or whitespace):
 *   item      = [ "p" PERCENTILE ":" ] METRIC ":" MILLISECONDS
 *   METRIC    = ttft | tpot | itl | e2el
 * "ttft:500 tpot:50" (vLLM), "ttft:500,tpot:50" and "p99:tpot:50" all parse.
 * probe_sla_to_string() writes the comma form back, so the SLA survives a
 * round trip through the result JSON. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "metrics.h"
#include "parse.h"

static const char *const metric_names[_PROBE_METRIC_MAX] = {
	[PROBE_METRIC_TTFT] = "ttft",
	[PROBE_METRIC_TPOT] = "tpot",
	[PROBE_METRIC_ITL] = "itl",
	[PROBE_METRIC_E2EL] = "e2el",
};

const char *probe_metric_name(enum probe_metric m)
{
	return (unsigned)m < _PROBE_METRIC_MAX ? metric_names[m] : "?";
}

int probe_metric_from_name(const char *s)
{
	for (int i = 0; i < _PROBE_METRIC_MAX; i++)
		if (strcmp(s, metric_names[i]) == 0)
			return i;
	return -EINVAL;
}

bool probe_sla_empty(const struct probe_sla *sla)
{
	return !sla || sla->n_bounds == 0;
}

bool probe_sla_has_request_bounds(const struct probe_sla *sla)
{
	for (size_t i = 0; sla && i < sla->n_bounds; i++)
		if (sla->bounds[i].percentile == 0)
			return true;
	return false;
}

static int parse_item(const char *item, struct probe_sla *sla, struct error *err)
{
	char buf[128], *metric, *value, *colon;
	double pct = 0, ms;
	int m, r;

	if (strlen(item) >= sizeof(buf))
		return error_set(err, -EINVAL, "SLA item \"%.40s...\": too long", item);
	strcpy(buf, item);
	metric = buf;
	if (buf[0] == 'p' || buf[0] == 'P') {
		colon = strchr(buf, ':');
		if (!colon)
			return error_set(err, -EINVAL, "SLA item \"%s\": expected METRIC:MS or pNN:METRIC:MS", item);
		*colon = '\0';
		r = parse_double("SLA percentile", buf + 1, 0, 100, &pct, NULL);
		if (r < 0 || pct <= 0)
			return error_set(err, -EINVAL, "SLA item \"%s\": percentile \"%s\" must be in (0, 100]", item,
					 buf + 1);
		metric = colon + 1;
	}
	colon = strchr(metric, ':');
	if (!colon)
		return error_set(err, -EINVAL, "SLA item \"%s\": expected METRIC:MS (e.g. ttft:500)", item);
	*colon = '\0';
	value = colon + 1;
	m = probe_metric_from_name(metric);
	if (m < 0)
		return error_set(err, -EINVAL,
				 "SLA item \"%s\": unknown metric \"%s\" (expected ttft, tpot, itl or e2el)", item,
				 metric);
	r = parse_double("SLA bound", value, 0, 1e9, &ms, NULL);
	if (r < 0 || ms <= 0)
		return error_set(err, -EINVAL, "SLA item \"%s\": bound \"%s\" must be a number of milliseconds > 0",
				 item, value);
	for (size_t i = 0; i < sla->n_bounds; i++)
		if (sla->bounds[i].metric == (enum probe_metric)m && sla->bounds[i].percentile == pct)
			return error_set(err, -EINVAL, "SLA item \"%s\": %s is bounded twice", item, metric);
	if (sla->n_bounds >= PROBE_MAX_SLA_BOUNDS)
		return error_set(err, -E2BIG, "SLA item \"%s\": more than %d bounds", item, PROBE_MAX_SLA_BOUNDS);
	sla->bounds[sla->n_bounds++] = (struct probe_sla_bound){ .metric = m, .percentile = pct, .bound_ms = ms };
	return 0;
}

int probe_sla_parse(const char *text, struct probe_sla *sla, struct error *err)
{
	static const char *const seps = ", \t\n";
	struct probe_sla tmp = *sla;
	_cleanup_(freep) char *copy = NULL;
	char *save = NULL;
	size_t n = 0;
	int r;

	if (!text)
		return error_set(err, -EINVAL, "SLA: missing");
	copy = strdup(text);
	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, seps, &save); tok; tok = strtok_r(NULL, seps, &save)) {
		r = parse_item(tok, &tmp, err);
		if (r < 0)
			return r;
		n++;
	}
	if (n == 0)
		return error_set(err, -EINVAL, "SLA \"%s\": no bounds (expected e.g. ttft:500,tpot:50)", text);
	if (tmp.attainment == 0 && probe_sla_has_request_bounds(&tmp))
		tmp.attainment = PROBE_SLA_DEFAULT_ATTAINMENT;
	*sla = tmp;
	return 0;
}

static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) _printf_(4, 5);
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len >= size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = MIN(size, *len + (size_t)n);
}

void probe_sla_format(const struct probe_sla *sla, char *buf, size_t size)
{
	size_t len = 0;
	bool per_request = false;

	if (size == 0)
		return;
	buf[0] = '\0';
	if (probe_sla_empty(sla)) {
		append(buf, size, &len, "none");
		return;
	}
	for (size_t i = 0; i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];

		if (b->percentile > 0)
			continue;
		append(buf, size, &len, "%s%s<=%gms", len ? " " : "", probe_metric_name(b->metric), b->bound_ms);
		per_request = true;
	}
	if (per_request)
		append(buf, size, &len, " @%g%%", sla->attainment * 100);
	for (size_t i = 0; i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];

		if (b->percentile == 0)
			continue;
		append(buf, size, &len, "%sp%g %s<=%gms", len ? ", " : "", b->percentile, probe_metric_name(b->metric),
		       b->bound_ms);
	}
}

void probe_sla_to_string(const struct probe_sla *sla, char *buf, size_t size)
{
	size_t len = 0;

	if (size == 0)
		return;
	buf[0] = '\0';
	for (size_t i = 0; sla && i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];

		if (b->percentile > 0)
			append(buf, size, &len, "%sp%.17g:%s:%.17g", len ? "," : "", b->percentile,
			       probe_metric_name(b->metric), b->bound_ms);
		else
			append(buf, size, &len, "%s%s:%.17g", len ? "," : "", probe_metric_name(b->metric),
			       b->bound_ms);
	}
}

bool probe_request_is_good(const struct probe_request_result *r, const struct probe_sla *sla)
{
	if (!r->success)
		return false;
	for (size_t i = 0; sla && i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];
		double bound_usec = b->bound_ms * 1000.0, tpot;

		if (b->percentile > 0)
			continue;
		switch (b->metric) {
		case PROBE_METRIC_TTFT:
			if ((double)r->ttft_usec > bound_usec)
				return false;
			break;
		case PROBE_METRIC_TPOT:
			/* vLLM counts TPOT as 0 for a single-token reply: it meets any bound */
			tpot = probe_request_tpot_usec(r);
			if (tpot > bound_usec)
				return false;
			break;
		case PROBE_METRIC_ITL:
			for (size_t k = 0; k < r->n_itl; k++)
				if ((double)r->itl_usec[k] > bound_usec)
					return false;
			break;
		case PROBE_METRIC_E2EL:
			if ((double)r->e2e_usec > bound_usec)
				return false;
			break;
		default:
			break;
		}
	}
	return true;
}
