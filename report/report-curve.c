/* report-curve.c — the best configuration's latency–throughput curve: its
 * load points over a gradient of load and the plots drawn from them.
 *
 * A study that swept its answer (the runner's load-step sweep: 6–8 rates
 * from about 20 % to 110 % of the answer's max rate under the SLA, runner-
 * sweep.c) has a trial of kind "sweep" whose load points are the curve;
 * without one, the rate search's own load points stand in (the saturation
 * run, sent all at once, has no rate to put on the axis). The sweet spot is
 * the load point with the highest goodput that still meets the SLA — the
 * load a replica of this configuration should be run at — as the trial
 * recorded it (its max rate).
 *
 * Two plots: TTFT and TPOT percentiles, throughput, goodput and attainment
 * against the request rate (REPORT_PLOT_LATENCY), and the server's KV-cache
 * usage and running/waiting requests at each point (REPORT_PLOT_SERVER).
 * Their axes are fitted to the data, with the SLA's bounds and the
 * attainment target in view. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "report-plot-internal.h"
#include "study.h"

const struct report_trial *report_sweep(const struct report *r)
{
	const struct report_trial *b = report_best(r), *found = NULL;

	for (size_t i = 0; b && b->t.canonical_key && i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];

		if (t->sweep && t->t.state == STORE_TRIAL_DONE && t->t.canonical_key &&
		    strcmp(t->t.canonical_key, b->t.canonical_key) == 0)
			found = t; /* the latest */
	}
	return found;
}

static int cmp_rate(const void *a, const void *b)
{
	double x = (*(const struct store_load_point *const *)a)->request_rate,
	       y = (*(const struct store_load_point *const *)b)->request_rate;

	return x < y ? -1 : x > y;
}

int report_curve_of(const struct report *r, struct report_curve *ret)
{
	const struct report_trial *sw = report_sweep(r), *t = sw ? sw : report_best(r);
	struct report_curve c = { .sweep = sw != NULL, .sweet = -1 };

	if (!t) {
		*ret = c;
		return 0;
	}
	c.pts = calloc(t->n_lps ? t->n_lps : 1, sizeof(*c.pts));
	if (!c.pts)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_lps; i++) {
		const struct store_load_point *lp = &t->lps[i];

		if (lp->phase && (strcmp(lp->phase, "warmup") == 0 || strcmp(lp->phase, "saturation") == 0))
			continue;
		if (isfinite(lp->request_rate) && lp->request_rate > 0)
			c.pts[c.n++] = lp;
	}
	qsort(c.pts, c.n, sizeof(*c.pts), cmp_rate);
	/* the sweet spot as the trial recorded it (its max rate: the probe's
	 * choice, probe_sweep_best; for the rate search its answer's point) */
	for (size_t i = 0; i < c.n; i++)
		if (c.pts[i] == report_trial_best_lp(t))
			c.sweet = (long)i;
	*ret = c;
	return 0;
}

void report_curve_done(struct report_curve *c)
{
	free(c->pts);
	*c = (struct report_curve){ .sweet = -1 };
}

const char *report_rate_text(char *buf, size_t size, double rate)
{
	if (isinf(rate) && rate > 0)
		snprintf(buf, size, "all at once");
	else if (rate > 0 && rate < 0.1) /* a CPU server's 0.085 req/s, not 0.08 */
		snprintf(buf, size, "%.2g", rate);
	else
		report_fmt(buf, size, 2, rate);
	return buf;
}

const char *report_rate_sent_text(char *buf, size_t size, const struct store_load_point *lp, double asked)
{
	double sent = store_load_point_offered_rate(lp);
	char a[32], b[32];

	report_rate_text(a, sizeof(a), asked);
	if (isfinite(asked) && isfinite(sent) && fabs(sent / asked - 1) >= 0.005)
		snprintf(buf, size, "%.12s (%.12s sent)", a, report_rate_text(b, sizeof(b), sent));
	else
		snprintf(buf, size, "%s", a);
	return buf;
}

/* ---- the plots ---- */

static void sla_lines(FILE *f, const struct report *r, enum probe_metric m, double *marks, size_t *n_marks)
{
	static const char *const colors[] = { "#d62728", "#9467bd", "#8c564b" };
	const struct probe_sla *sla = &r->parsed->sla;
	unsigned k = 0;

	for (size_t i = 0; i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];
		char t[160];

		if (b->metric != m)
			continue;
		if (b->percentile > 0)
			snprintf(t, sizeof(t), "SLA: p%g %s <= %g ms", b->percentile, probe_metric_name(m),
				 b->bound_ms);
		else
			snprintf(t, sizeof(t), "SLA: %s <= %g ms for %g%% of requests", probe_metric_name(m),
				 b->bound_ms, sla->attainment * 100);
		fprintf(f, ", %.9g with lines dt 2 lw 2 lc rgb '%s' title ", b->bound_ms, colors[k++ % 3]);
		plot_quote(f, t);
		if (*n_marks < 4)
			marks[(*n_marks)++] = b->bound_ms;
	}
}

/* The lowest and highest finite, positive value of columns [from, to) of
 * the curve's rows, folded into *lo / *hi. */
static void span_of(double (*rows)[10], size_t n, size_t from, size_t to, double *lo, double *hi)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = from; j < to; j++)
			if (isfinite(rows[i][j]) && rows[i][j] > 0) {
				*lo = MIN(*lo, rows[i][j]);
				*hi = MAX(*hi, rows[i][j]);
			}
}

/* A log axis over the latencies and the SLA's bounds on them. */
static void log_range(FILE *f, double lo, double hi, const double *marks, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		lo = MIN(lo, marks[i]);
		hi = MAX(hi, marks[i]);
	}
	if (!isfinite(lo) || !isfinite(hi)) {
		fputs("set yrange [*:*]\n", f);
		return;
	}
	plot_fit_range(lo, hi, true, &lo, &hi);
	fprintf(f, "set yrange [%.9g:%.9g]\n", lo, hi);
	/* labelled tics at 1, 2 and 5 of each decade: a range of less than a
	 * decade or two still reads */
	fputs("set ytics (", f);
	for (double dec = pow(10, floor(log10(lo))), k = 0; dec <= hi; dec *= 10)
		for (int m = 0; m < 3; m++) {
			double v = dec * (m == 0 ? 1 : m == 1 ? 2 : 5);

			if (v >= lo && v <= hi)
				fprintf(f, "%s%.9g", k++ ? ", " : "", v);
		}
	fputs(")\n", f);
}

int report_plot_latency(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	const struct report_trial *b = report_best(r);
	_cleanup_(report_curve_done) struct report_curve cv = { .sweet = -1 };
	_cleanup_(freep) double(*rows)[10] = NULL;
	char knobs[256], title[512];
	double x0, x1, lo, hi, marks[4], att_lo, att_hi;
	size_t n_marks;
	FILE *d;
	int q;

	if (!b)
		return plot_why(ret_why, "no configuration met the SLA, so there is no best configuration to draw");
	if (!r->parsed)
		return plot_why(ret_why, "the study spec is not readable (SLA unknown)");
	q = report_curve_of(r, &cv);
	if (q < 0)
		return q;
	if (cv.n == 0)
		return plot_why(ret_why, "the best configuration has no load point at a finite rate recorded");
	rows = calloc(cv.n, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	d = plot_open(c, "lat.dat");
	if (!d)
		return plot_close_data(d);
	for (size_t i = 0; i < cv.n; i++) {
		const struct store_load_point *lp = cv.pts[i];
		double pts[10] = { lp->request_rate,    lp->p50_ttft_ms,       lp->p90_ttft_ms,
				   lp->p99_ttft_ms,     lp->p50_tpot_ms,       lp->p90_tpot_ms,
				   lp->p99_tpot_ms,     lp->output_throughput, lp->good_output_throughput,
				   lp->attainment * 100 };

		for (size_t j = 0; j < ELEMENTSOF(pts); j++) {
			/* log scale: a zero latency cannot be drawn */
			rows[i][j] = j >= 1 && j <= 6 && pts[j] <= 0 ? NAN : pts[j];
			plot_num(d, rows[i][j]);
			fputc(j + 1 < ELEMENTSOF(pts) ? ' ' : '\n', d);
		}
	}
	q = plot_close_data(d);
	if (q < 0)
		return q;
	plot_fit_range(rows[0][0], rows[cv.n - 1][0], false, &x0, &x1);
	report_knobs_short(b, knobs, sizeof(knobs));
	if (cv.sweep)
		snprintf(title, sizeof(title), "Best configuration: %s. Load-step sweep, %zu rates", knobs, cv.n);
	else
		snprintf(title, sizeof(title), "Best configuration: %s. The rate search's %zu load point%s", knobs,
			 cv.n, cv.n == 1 ? "" : "s");
	plot_header(f, REPORT_PLOT_LATENCY, 520);
	/* three panels of one size, each with its key under its axis */
	fputs("set multiplot layout 1,3 margins 0.06,0.93,0.31,0.85 spacing 0.075,0 title ", f);
	plot_quote(f, title);
	fprintf(f,
		"\nset key at graph 0.5, graph -0.2 center top vertical Left reverse samplen 2\n"
		"set xlabel 'request rate (req/s)'\nset xrange [%.9g:%.9g]\n",
		x0, x1);
	if (cv.sweet >= 0) {
		double x = rows[cv.sweet][0];

		fprintf(f,
			"set arrow 1 from %.9g, graph 0 to %.9g, graph 1 nohead dt 3 lw 2 lc rgb '#2ca02c'\n"
			"set label 1 'sweet spot' at %.9g, graph 0.96 right offset -0.5,0 tc rgb '#2ca02c'\n",
			x, x, x);
	}
	/* TTFT */
	lo = INFINITY, hi = -INFINITY, n_marks = 0;
	span_of(rows, cv.n, 1, 4, &lo, &hi);
	fputs("set logscale y\nset ylabel 'TTFT (ms)'\nset title 'TTFT percentiles'\n", f);
	for (size_t i = 0; i < r->parsed->sla.n_bounds && n_marks < 4; i++)
		if (r->parsed->sla.bounds[i].metric == PROBE_METRIC_TTFT)
			marks[n_marks++] = r->parsed->sla.bounds[i].bound_ms;
	log_range(f, lo, hi, marks, n_marks);
	fputs("plot 'lat.dat' using 1:2 with linespoints pt 7 ps 0.7 lc rgb '#9ecae1' title 'p50', "
	      "'' using 1:3 with linespoints pt 7 ps 0.7 lc rgb '#4292c6' title 'p90', "
	      "'' using 1:4 with linespoints pt 7 ps 0.7 lc rgb '#08306b' title 'p99'",
	      f);
	n_marks = 0;
	sla_lines(f, r, PROBE_METRIC_TTFT, marks, &n_marks);
	fputc('\n', f);
	plot_axes(f, "TTFT percentiles", PLOT_AXES_LOG_Y, marks, n_marks, NULL, 0);
	/* TPOT */
	lo = INFINITY, hi = -INFINITY, n_marks = 0;
	span_of(rows, cv.n, 4, 7, &lo, &hi);
	fputs("set ylabel 'TPOT (ms)'\nset title 'TPOT percentiles'\n", f);
	for (size_t i = 0; i < r->parsed->sla.n_bounds && n_marks < 4; i++)
		if (r->parsed->sla.bounds[i].metric == PROBE_METRIC_TPOT)
			marks[n_marks++] = r->parsed->sla.bounds[i].bound_ms;
	log_range(f, lo, hi, marks, n_marks);
	fputs("plot 'lat.dat' using 1:5 with linespoints pt 7 ps 0.7 lc rgb '#fdae6b' title 'p50', "
	      "'' using 1:6 with linespoints pt 7 ps 0.7 lc rgb '#f16913' title 'p90', "
	      "'' using 1:7 with linespoints pt 7 ps 0.7 lc rgb '#7f2704' title 'p99'",
	      f);
	n_marks = 0;
	sla_lines(f, r, PROBE_METRIC_TPOT, marks, &n_marks);
	fputc('\n', f);
	plot_axes(f, "TPOT percentiles", PLOT_AXES_LOG_Y, marks, n_marks, NULL, 0);
	/* throughput, goodput and attainment, each axis fitted to its data:
	 * the rate search's points sit close to its answer, where an axis from
	 * 0 would leave most of the panel empty; the attainment axis keeps the
	 * target in view */
	att_lo = INFINITY, att_hi = -INFINITY;
	for (size_t i = 0; i < cv.n; i++)
		if (isfinite(rows[i][9])) {
			att_lo = MIN(att_lo, rows[i][9]);
			att_hi = MAX(att_hi, rows[i][9]);
		}
	n_marks = 0;
	if (!probe_sla_empty(&r->parsed->sla)) {
		marks[n_marks++] = r->parsed->sla.attainment * 100;
		att_lo = MIN(att_lo, marks[0]);
		att_hi = MAX(att_hi, marks[0]);
	}
	if (!isfinite(att_lo)) {
		att_lo = 0;
		att_hi = 100;
	}
	plot_fit_range(att_lo, att_hi, false, &att_lo, &att_hi);
	att_lo = MAX(0, att_lo);
	att_hi = MIN(102, att_hi);
	lo = INFINITY, hi = -INFINITY;
	span_of(rows, cv.n, 7, 9, &lo, &hi);
	if (isfinite(lo))
		plot_fit_range(lo, hi, false, &lo, &hi);
	else {
		lo = 0;
		hi = 1;
	}
	fprintf(f,
		"unset logscale y\nset yrange [%.9g:%.9g]\nset ytics autofreq nomirror\nset ylabel 'output tokens/s'\n"
		"set y2label 'attainment (%%)'\nset y2range [%.9g:%.9g]\nset y2tics\nset title 'Throughput and "
		"goodput'\n"
		"plot 'lat.dat' using 1:8 with linespoints pt 7 ps 0.7 lc rgb '#7f7f7f' title 'output tokens/s', "
		"'' using 1:9 with linespoints pt 7 ps 0.7 lw 2 lc rgb '#2ca02c' title 'goodput (tokens/s meeting the "
		"SLA)', "
		"'' using 1:10 axes x1y2 with linespoints pt 6 ps 0.7 dt 2 lc rgb '#9467bd' title 'attainment %%'",
		MAX(0, lo), hi, att_lo, att_hi);
	if (n_marks)
		fprintf(f, ", %.9g axes x1y2 with lines dt 3 lc rgb '#9467bd' title 'attainment target'", marks[0]);
	if (cv.sweet >= 0) {
		d = plot_open(c, "lat-best.dat");
		if (!d)
			return plot_close_data(d);
		plot_num(d, rows[cv.sweet][0]);
		fputc(' ', d);
		plot_num(d, rows[cv.sweet][8]);
		fputc('\n', d);
		q = plot_close_data(d);
		if (q < 0)
			return q;
		fprintf(f,
			", 'lat-best.dat' using 1:2 with points pt 7 ps 2.2 lc rgb '#2ca02c' title 'sweet spot: %.0f "
			"tokens/s at %.3g req/s'",
			rows[cv.sweet][8], rows[cv.sweet][0]);
	}
	fputc('\n', f);
	plot_axes(f, "Throughput and goodput", 0, NULL, 0, marks, n_marks);
	fputs("unset multiplot\n", f);
	return 1;
}

int report_plot_server(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	_cleanup_(report_curve_done) struct report_curve cv = { .sweet = -1 };
	double x0 = INFINITY, x1 = -INFINITY, klo = INFINITY, khi = -INFINITY, nlo = INFINITY, nhi = -INFINITY;
	size_t used = 0;
	FILE *d;
	int q;

	if (!report_best(r))
		return plot_why(ret_why, "no configuration met the SLA");
	q = report_curve_of(r, &cv);
	if (q < 0)
		return q;
	d = plot_open(c, "srv.dat");
	if (!d)
		return plot_close_data(d);
	for (size_t i = 0; i < cv.n; i++) {
		const struct store_load_point *lp = cv.pts[i];
		double kv = lp->kv_usage_peak * 100, v[] = { lp->running_peak, lp->waiting_peak };

		if (!isfinite(lp->kv_usage_peak) && !isfinite(lp->running_peak))
			continue;
		plot_num(d, lp->request_rate);
		fputc(' ', d);
		plot_num(d, kv);
		fputc(' ', d);
		plot_num(d, v[0]);
		fputc(' ', d);
		plot_num(d, v[1]);
		fputc('\n', d);
		x0 = MIN(x0, lp->request_rate);
		x1 = MAX(x1, lp->request_rate);
		if (isfinite(kv)) {
			klo = MIN(klo, kv);
			khi = MAX(khi, kv);
		}
		for (size_t k = 0; k < ELEMENTSOF(v); k++)
			if (isfinite(v[k])) {
				nlo = MIN(nlo, v[k]);
				nhi = MAX(nhi, v[k]);
			}
		used++;
	}
	q = plot_close_data(d);
	if (q < 0)
		return q;
	if (used == 0)
		return plot_why(ret_why,
				"the server's metrics (KV-cache usage, running requests) were not recorded for the "
				"best configuration's load points");
	plot_fit_range(x0, x1, false, &x0, &x1);
	plot_header(f, REPORT_PLOT_SERVER, 420);
	fprintf(f,
		"set title 'Server state at each load point of the best configuration (peaks scraped from "
		"/metrics)'\nset key below height 1\nset xlabel 'request rate (req/s)'\nset xrange [%.9g:%.9g]\n"
		"set ylabel 'KV-cache usage peak (%%)'\nset y2label 'requests'\nset ytics nomirror\nset y2tics\n",
		x0, x1);
	/* from 0 (how full the cache is) unless the data sit high above it;
	 * never past 100 % */
	if (isfinite(klo)) {
		bool from0 = klo < khi * 0.5 || klo == khi;

		plot_fit_range(klo, khi, false, &klo, &khi);
		if (from0)
			klo = 0;
		fprintf(f, "set yrange [%.9g:%.9g]\n", MAX(klo, 0), MIN(khi, 100));
	}
	if (isfinite(nlo)) {
		plot_fit_range(nlo, nhi, false, &nlo, &nhi);
		fprintf(f, "set y2range [%.9g:%.9g]\n", MAX(nlo, 0), nhi);
	}
	fputs("plot 'srv.dat' using 1:2 with linespoints pt 7 lw 2 lc rgb '#d62728' title 'KV-cache usage peak %', "
	      "'' using 1:3 axes x1y2 with linespoints pt 5 lc rgb '#1f77b4' title 'running requests (peak)', "
	      "'' using 1:4 axes x1y2 with linespoints pt 4 dt 2 lc rgb '#7f7f7f' title 'waiting requests (peak)'\n",
	      f);
	plot_axes(f, "Server state", 0, NULL, 0, NULL, 0);
	return 1;
}
