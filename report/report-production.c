/* report-production.c — the traffic production served beside the workload
 * the study was tuned for.
 *
 * goodputd's watch (daemon-watch.c) keeps, for each production endpoint
 * compared with a study, one row per hour in the store's traffic_shapes:
 * the hour's figures and its shape as a workload block. Here a study's rows
 * are summed — the length histograms bucket by bucket (hours whose bounds
 * differ, another server's, are counted apart and left out), the rate by
 * hour of the day — and set beside the tuned workload regenerated from the
 * spec with its seed: means, percentiles (production's at its buckets'
 * resolution), the Kolmogorov–Smirnov distance at the bucket bounds, the
 * rate over the day against the spec's rate profile. A dry run's study
 * ("NAME.dry-run") is compared with the traffic of NAME. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "report-plot-internal.h"
#include "study.h"
#include "workload-json.h"

#define DRY_RUN_SUFFIX ".dry-run"

/* ---- loading ---- */

void report_production_done(struct report_production *p)
{
	free(p->watch);
	*p = (struct report_production){ 0 };
}

/* The hour's shape (the row's workload block) as histograms. */
static bool row_shape(const struct store_traffic_shape *t, struct probe_workload_config *ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = t->shape_json ? cJSON_Parse(t->shape_json) : NULL;
	struct probe_workload_spec spec = { 0 };

	if (!j)
		return false;
	probe_workload_config_init(&spec.config);
	if (probe_workload_from_json(j, "", &spec, NULL) < 0 || spec.config.input.kind != PROBE_DIST_HISTOGRAM ||
	    spec.config.output.kind != PROBE_DIST_HISTOGRAM)
		return false;
	*ret = spec.config;
	return true;
}

/* Adds b into a when their bounds agree (a empty: b). */
static bool hist_sum(struct probe_length_histogram *a, const struct probe_length_histogram *b)
{
	if (!a->n) {
		*a = *b;
		return true;
	}
	if (a->n != b->n || memcmp(a->le, b->le, a->n * sizeof(double)) != 0)
		return false;
	for (uint32_t i = 0; i < a->n; i++)
		a->count[i] += b->count[i];
	return true;
}

static void add_row(struct report_production *p, const struct store_traffic_shape *t, double *sec_by_hour,
		    double *arr_by_hour, double *in_sum, double *out_sum, double *weight_b)
{
	struct probe_workload_config c;
	time_t tt = (time_t)(t->hour_usec / 1000000);
	double weight = 0;
	struct tm tm;

	p->hours++;
	p->seconds += isfinite(t->seconds) ? t->seconds : 0;
	p->requests += isfinite(t->requests) ? t->requests : 0;
	p->arrivals += isfinite(t->arrivals) ? t->arrivals : 0;
	p->peak_rate = fmax(p->peak_rate, isfinite(t->peak_rate) ? t->peak_rate : 0);
	if (isfinite(t->burstiness) && isfinite(t->seconds)) {
		p->burstiness += t->burstiness * t->seconds;
		*weight_b += t->seconds;
	}
	if (isfinite(t->drift))
		p->max_drift = isnan(p->max_drift) ? t->drift : fmax(p->max_drift, t->drift);
	p->flagged_hours += t->flagged;
	if (!p->first_usec || t->hour_usec < p->first_usec)
		p->first_usec = t->hour_usec;
	p->last_usec = MAX(p->last_usec, t->hour_usec + 3600 * 1000000ull); /* the end of its hour */
	if (localtime_r(&tt, &tm) && isfinite(t->seconds) && t->seconds > 0 && isfinite(t->arrivals)) {
		sec_by_hour[tm.tm_hour] += t->seconds;
		arr_by_hour[tm.tm_hour] += t->arrivals;
	}
	if (!row_shape(t, &c))
		return;
	if (!hist_sum(&p->input, &c.input.hist) || !hist_sum(&p->output, &c.output.hist)) {
		p->skipped++;
		return;
	}
	/* the hour's mean, weighted by the requests its histogram counted */
	for (uint32_t i = 0; i < c.input.hist.n; i++)
		weight += c.input.hist.count[i];
	*in_sum += c.input.mean * weight;
	*out_sum += c.output.mean * weight;
}

void report_production_load(struct report *r, struct store *s)
{
	struct report_production *p = &r->production;
	struct store_traffic_shape *rows = NULL;
	double sec[24] = { 0 }, arr[24] = { 0 }, in_sum = 0, out_sum = 0, wb = 0, counted = 0;
	char base[STUDY_NAME_MAX + 1];
	size_t n = 0, len = strlen(r->study.name);

	*p = (struct report_production){ .max_drift = NAN, .prefix_hit_rate = NAN };
	for (unsigned h = 0; h < 24; h++)
		p->rate_by_hour[h] = p->tuned_rate_by_hour[h] = NAN;
	snprintf(base, sizeof(base), "%s", r->study.name);
	if (len > strlen(DRY_RUN_SUFFIX) && strcmp(r->study.name + len - strlen(DRY_RUN_SUFFIX), DRY_RUN_SUFFIX) == 0)
		base[len - strlen(DRY_RUN_SUFFIX)] = '\0';
	if (store_traffic_list_study(s, base, 0, &rows, &n, NULL) < 0 || n == 0) {
		store_traffic_shape_array_free(rows, n);
		return;
	}
	p->watch = strdup(rows[0].watch);
	for (size_t i = 0; i < n; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(rows[k].watch, rows[i].watch) == 0;
		p->n_watches += !seen;
		add_row(p, &rows[i], sec, arr, &in_sum, &out_sum, &wb);
	}
	for (uint32_t i = 0; i < p->input.n; i++)
		counted += p->input.count[i];
	p->input_mean = counted > 0 ? in_sum / counted : NAN;
	p->output_mean = counted > 0 ? out_sum / counted : NAN;
	p->burstiness = wb > 0 ? p->burstiness / wb : NAN;
	for (unsigned h = 0; h < 24; h++)
		if (sec[h] > 0)
			p->rate_by_hour[h] = arr[h] / sec[h];
	if (r->parsed && r->parsed->workload.profile.n) {
		const struct probe_workload_config *w = &r->parsed->workload;
		double scale = isfinite(w->request_rate) ? w->request_rate / probe_rate_profile_mean(&w->profile) : 1;

		for (unsigned h = 0; h < 24; h++)
			p->tuned_rate_by_hour[h] = scale * probe_rate_profile_at(&w->profile, h * 3600);
	}
	store_traffic_shape_array_free(rows, n);
}

/* ---- the section ---- */

/* The bound of the first bucket holding the p-th percentile: "≤ 500". */
static const char *hist_pct(char *buf, size_t size, const struct probe_length_histogram *h, double pct)
{
	double total = 0, cum = 0;

	for (uint32_t i = 0; i < h->n; i++)
		total += h->count[i];
	for (uint32_t i = 0; i < h->n && total > 0; i++) {
		cum += h->count[i];
		if (cum >= pct / 100 * total) {
			snprintf(buf, size, "≤ %g", h->le[i]);
			return buf;
		}
	}
	return "-";
}

static const char *lens_pct(char *buf, size_t size, const uint32_t *v, size_t n, double pct)
{
	if (!n)
		return "-";
	snprintf(buf, size, "%u", report_lengths_pct(v, n, pct));
	return buf;
}

static void length_rows(struct report_doc *d, const char *what, const struct probe_length_histogram *h,
			double prod_mean, const uint32_t *tuned, size_t n)
{
	static const double pcts[] = { 50, 90, 99 };
	char a[64], b[64], label[64];
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += tuned[i];
	snprintf(a, sizeof(a), "%.1f", n ? sum / (double)n : NAN);
	snprintf(b, sizeof(b), "%.1f", prod_mean);
	snprintf(label, sizeof(label), "%s length, mean", what);
	report_doc_row(d, NULL, (const char *const[]){ label, a, b });
	for (size_t k = 0; k < ELEMENTSOF(pcts); k++) {
		snprintf(label, sizeof(label), "%s length, p%g", what, pcts[k]);
		report_doc_row(d, NULL,
			       (const char *const[]){ label, lens_pct(a, sizeof(a), tuned, n, pcts[k]),
						      hist_pct(b, sizeof(b), h, pcts[k]) });
	}
	snprintf(label, sizeof(label), "%s length, KS distance at the buckets", what);
	snprintf(b, sizeof(b), "%.3f", n && h->n ? probe_histogram_ks(h, tuned, n) : NAN);
	report_doc_row(d, NULL, (const char *const[]){ label, "", b });
}

static void rate_table(struct report_doc *d, const struct report_production *p)
{
	bool tuned = !isnan(p->tuned_rate_by_hour[0]);

	report_doc_table_start(d, 3, (const char *const[]){ "hour", "production req/s", "tuned for req/s" });
	for (unsigned h = 0; h < 24; h++) {
		char hour[8], a[32], b[32];

		if (isnan(p->rate_by_hour[h]) && !tuned)
			continue;
		snprintf(hour, sizeof(hour), "%02u:00", h);
		report_doc_row(d, NULL,
			       (const char *const[]){ hour, report_fmt(a, sizeof(a), 3, p->rate_by_hour[h]),
						      report_fmt(b, sizeof(b), 3, p->tuned_rate_by_hour[h]) });
	}
	report_doc_table_end(d);
}

void report_production_section(struct report_doc *d, const struct report *r)
{
	const struct report_production *p = &r->production;
	_cleanup_(freep) uint32_t *in = NULL, *out = NULL;
	_cleanup_(freep) char *why = NULL;
	char from[32], to[32], a[32], b[32];
	time_t t0 = (time_t)(p->first_usec / 1000000), t1 = (time_t)(p->last_usec / 1000000);
	struct tm tm;
	size_t n = 0;

	if (!p->hours)
		return;
	report_doc_heading(d, 2, "production", "Production traffic");
	strftime(from, sizeof(from), "%Y-%m-%d %H:%M", localtime_r(&t0, &tm));
	strftime(to, sizeof(to), "%Y-%m-%d %H:%M", localtime_r(&t1, &tm));
	report_doc_para(
		d,
		"The traffic goodputd's watch recorded from %s%s (%zu endpoint%s) against this study, in %zu hour%s "
		"between %s and %s: %.0f requests. Beside it, the workload the study was tuned for, regenerated from "
		"its spec:",
		p->watch, p->n_watches > 1 ? " and others" : "", p->n_watches, p->n_watches == 1 ? "" : "s", p->hours,
		p->hours == 1 ? "" : "s", from, to, p->requests);
	(void)report_workload_lengths(r, &in, &out, &n, &why);
	report_doc_table_start(d, 3, (const char *const[]){ "figure", "tuned for", "production" });
	length_rows(d, "input", &p->input, p->input_mean, in, n);
	length_rows(d, "output", &p->output, p->output_mean, out, n);
	report_doc_row(
		d, NULL,
		(const char *const[]){
			"mean rate (req/s)",
			report_fmt(a, sizeof(a), 3,
				   r->parsed && r->parsed->workload.profile.n ? r->parsed->workload.request_rate : NAN),
			report_fmt(b, sizeof(b), 3, p->seconds > 0 ? p->arrivals / p->seconds : NAN) });
	report_doc_row(d, NULL,
		       (const char *const[]){ "burstiness (gamma shape)",
					      report_fmt(a, sizeof(a), 2,
							 r->parsed && r->parsed->workload.arrival == PROBE_ARRIVAL_GAMMA
								 ? r->parsed->workload.burstiness
								 : 1.0),
					      report_fmt(b, sizeof(b), 2, p->burstiness) });
	report_doc_table_end(d);
	if (p->skipped)
		report_doc_note(d, "missing",
				"%zu hour%s with other bucket bounds (another server) left out of the "
				"length distributions.",
				p->skipped, p->skipped == 1 ? "" : "s");
	if (p->flagged_hours)
		report_doc_note(d, "warning",
				"Drift was flagged in %u hour%s (the largest length distance %.2f): the traffic is not "
				"the one the study was tuned for.",
				p->flagged_hours, p->flagged_hours == 1 ? "" : "s", p->max_drift);
	report_doc_para(d, "Arrival rate by hour of the day (local time):");
	rate_table(d, p);
	report_doc_plot(d, REPORT_PLOT_PRODUCTION);
}

/* ---- the plot ---- */

int report_plot_production(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	const struct report_production *p = &r->production;
	_cleanup_(freep) uint32_t *in = NULL, *out = NULL;
	size_t n = 0;
	FILE *d;
	int q;

	if (!p->hours)
		return 0; /* no watch: the plot is not for this study, nothing to say */
	if (!p->input.n)
		return plot_why(ret_why, "the recorded hours hold no length histograms");
	q = report_workload_lengths(r, &in, &out, &n, ret_why);
	if (q < 0)
		return q == -ENOMEM ? q : 0;
	for (int k = 0; k < 2; k++) {
		const struct probe_length_histogram *h = k ? &p->output : &p->input;
		const uint32_t *v = k ? out : in;
		double total = 0, tuned[PROBE_HISTOGRAM_MAX_BUCKETS] = { 0 };
		uint32_t first = h->n, last = 0;

		for (uint32_t i = 0; i < h->n; i++) {
			for (size_t j = 0; j < n; j++)
				tuned[i] += v[j] > (i ? h->le[i - 1] : 0) && v[j] <= h->le[i];
			total += h->count[i];
			if (tuned[i] > 0 || h->count[i] > 0) {
				first = MIN(first, i);
				last = i;
			}
		}
		d = plot_open(c, k ? "prod-out.dat" : "prod-in.dat");
		if (!d)
			return plot_close_data(d);
		/* each bucket that holds requests of either: its bound, the tuned share, production's share */
		for (uint32_t i = first; i <= last && i < h->n; i++) {
			fprintf(d, "\"≤%g\" ", h->le[i]);
			plot_num(d, n ? tuned[i] / (double)n : NAN);
			fputc(' ', d);
			plot_num(d, total > 0 ? h->count[i] / total : NAN);
			fputc('\n', d);
		}
		q = plot_close_data(d);
		if (q < 0)
			return q;
	}
	d = plot_open(c, "prod-rate.dat");
	if (!d)
		return plot_close_data(d);
	for (unsigned h = 0; h < 24; h++) {
		fprintf(d, "%u ", h);
		plot_num(d, p->rate_by_hour[h]);
		fputc(' ', d);
		plot_num(d, p->tuned_rate_by_hour[h]);
		fputc('\n', d);
	}
	q = plot_close_data(d);
	if (q < 0)
		return q;
	plot_header(f, REPORT_PLOT_PRODUCTION, 380);
	fprintf(f,
		"set multiplot layout 1,3 title 'Production traffic (%zu hour%s) beside the workload tuned for'\n"
		"set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.85\n"
		"set key top center horizontal\nset ylabel 'share of requests'\nset yrange [0:1.3]\n"
		"set xtics rotate by -45\n"
		"set xlabel 'input length (tokens)'\n"
		"plot 'prod-in.dat' using 2:xtic(1) title 'tuned for' lc rgb '#4a7ab5', '' using 3 title "
		"'production' lc rgb '#e08a2c'\n",
		p->hours, p->hours == 1 ? "" : "s");
	plot_axes(f, "input lengths", PLOT_AXES_CATEGORICAL, NULL, 0, NULL, 0);
	fputs("set xlabel 'output length (tokens)'\n"
	      "plot 'prod-out.dat' using 2:xtic(1) title 'tuned for' lc rgb '#4a7ab5', '' using 3 title "
	      "'production' lc rgb '#e08a2c'\n",
	      f);
	plot_axes(f, "output lengths", PLOT_AXES_CATEGORICAL, NULL, 0, NULL, 0);
	fputs("set style data linespoints\nset xtics norotate\nset xrange [-0.5:23.5]\nset xtics 0,3,23\n"
	      "set xlabel 'hour of the day'\nset ylabel 'requests/s'\nset yrange [0:*]\n"
	      "plot 'prod-rate.dat' using 1:2 title 'production' lc rgb '#e08a2c' pt 7, '' using ($1-0.5):3 "
	      "with steps title 'tuned for (rate profile)' lc rgb '#4a7ab5'\n",
	      f);
	plot_axes(f, "rate by hour", PLOT_AXES_CATEGORICAL, NULL, 0, NULL, 0);
	fputs("unset multiplot\n", f);
	return 1;
}
