/* report-plots.c — the gnuplot scripts and data files of the report's plots.
 *
 * Each function writes its data files (numbers only, "NaN" for a missing
 * value) and the script that draws them; the runner (report-plot.c) starts
 * gnuplot. The figures come from the store exactly as the tables show them,
 * so a plot and its table never disagree. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "report-plot-internal.h"
#include "study.h"

#define MAX_GROUPS 12
#define MAX_GRID   64

/* ---- workload ---- */

static int hist_file(struct plot_ctx *c, const char *name, const uint32_t *v, size_t n, double *ret_width,
		     double *ret_lo, double *ret_hi)
{
	uint32_t lo = UINT32_MAX, hi = 0;
	size_t nb;
	double w;
	_cleanup_(freep) size_t *cnt = NULL;
	FILE *f;

	for (size_t i = 0; i < n; i++) {
		lo = MIN(lo, v[i]);
		hi = MAX(hi, v[i]);
	}
	if ((uint64_t)hi - lo + 1 <= 40) {
		nb = hi - lo + 1;
		w = 1;
	} else {
		nb = 30;
		w = ((double)hi - lo) / 30.0;
	}
	cnt = calloc(nb, sizeof(*cnt));
	if (!cnt)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t b = w == 1 ? v[i] - lo : (size_t)(((double)v[i] - lo) / w);

		cnt[MIN(b, nb - 1)]++;
	}
	f = plot_open(c, name);
	if (!f)
		return plot_close_data(f);
	for (size_t b = 0; b < nb; b++)
		fprintf(f, "%.9g %zu\n", w == 1 ? (double)lo + (double)b : lo + (b + 0.5) * w, cnt[b]);
	*ret_width = w;
	*ret_lo = lo - w;
	*ret_hi = hi + w;
	return plot_close_data(f);
}

static int plot_workload(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	_cleanup_(freep) uint32_t *in = NULL, *out = NULL;
	double wi, wo, loi, hii, loo, hio;
	size_t n = 0;
	int q;

	q = report_workload_lengths(r, &in, &out, &n, ret_why);
	if (q < 0)
		return q == -ENOMEM ? q : 0;
	if (n == 0)
		return plot_why(ret_why, "the workload has no requests");
	q = hist_file(c, "wl-in.dat", in, n, &wi, &loi, &hii);
	if (q >= 0)
		q = hist_file(c, "wl-out.dat", out, n, &wo, &loo, &hio);
	if (q < 0)
		return q;
	plot_header(f, REPORT_PLOT_WORKLOAD, 900, 320);
	fprintf(f,
		"set multiplot layout 1,2 title 'Workload: %zu requests regenerated from the spec (seed %llu)'\n"
		"set style fill solid 0.85 border lc rgb '#2b4c7e'\n"
		"set ylabel 'requests'\nset yrange [0:*]\n"
		"set xlabel 'input length (tokens)'\nset boxwidth %.9g absolute\nset xrange [%.9g:%.9g]\n"
		"plot 'wl-in.dat' using 1:2 with boxes lc rgb '#4a7ab5'\n"
		"set xlabel 'output length (tokens)'\nset boxwidth %.9g absolute\nset xrange [%.9g:%.9g]\n"
		"plot 'wl-out.dat' using 1:2 with boxes lc rgb '#e08a2c'\n"
		"unset multiplot\n",
		n, (unsigned long long)r->parsed->workload.seed, wi * 0.9, loi, hii, wo * 0.9, loo, hio);
	return 1;
}

/* ---- latency-throughput curve of the best ---- */

static double lp_x(const struct store_load_point *lp)
{
	return isfinite(lp->request_rate) ? lp->request_rate : lp->request_throughput;
}

static int cmp_lp_x(const void *a, const void *b)
{
	double x = lp_x(*(const struct store_load_point *const *)a),
	       y = lp_x(*(const struct store_load_point *const *)b);

	return x < y ? -1 : x > y;
}

/* Sorted (by rate) pointers to the trial's measured load points (no warm-up). */
static int sorted_lps(const struct report_trial *t, const struct store_load_point ***ret, size_t *ret_n)
{
	const struct store_load_point **v = calloc(t->n_lps ? t->n_lps : 1, sizeof(*v));
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_lps; i++)
		if (!(t->lps[i].phase && strcmp(t->lps[i].phase, "warmup") == 0) && isfinite(lp_x(&t->lps[i])))
			v[n++] = &t->lps[i];
	qsort(v, n, sizeof(*v), cmp_lp_x);
	*ret = v;
	*ret_n = n;
	return 0;
}

static void sla_lines(FILE *f, const struct report *r, enum probe_metric m)
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
	}
}

static int plot_latency(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	const struct report_trial *b = report_best(r);
	const struct store_load_point *blp;
	_cleanup_(freep) const struct store_load_point **v = NULL;
	char knobs[256], title[400];
	size_t n = 0;
	FILE *d;
	int q;

	if (!b)
		return plot_why(ret_why, "no configuration met the SLA, so there is no best configuration to draw");
	if (!r->parsed)
		return plot_why(ret_why, "the study spec is not readable (SLA unknown)");
	q = sorted_lps(b, &v, &n);
	if (q < 0)
		return q;
	if (n == 0)
		return plot_why(ret_why, "the best configuration has no load points recorded");
	d = plot_open(c, "lat.dat");
	if (!d)
		return plot_close_data(d);
	for (size_t i = 0; i < n; i++) {
		const struct store_load_point *lp = v[i];
		double pts[] = { lp_x(lp),
				 lp->p50_ttft_ms,
				 lp->p90_ttft_ms,
				 lp->p99_ttft_ms,
				 lp->p50_tpot_ms,
				 lp->p90_tpot_ms,
				 lp->p99_tpot_ms,
				 lp->output_throughput,
				 lp->good_output_throughput,
				 lp->attainment * 100 };

		for (size_t j = 0; j < ELEMENTSOF(pts); j++) {
			/* log scale: a zero latency cannot be drawn */
			plot_num(d, j >= 1 && j <= 6 && pts[j] <= 0 ? NAN : pts[j]);
			fputc(j + 1 < ELEMENTSOF(pts) ? ' ' : '\n', d);
		}
	}
	q = plot_close_data(d);
	if (q < 0)
		return q;
	blp = report_trial_best_lp(b);
	report_knobs_short(b, knobs, sizeof(knobs));
	snprintf(title, sizeof(title), "Best configuration: %s", knobs);
	plot_header(f, REPORT_PLOT_LATENCY, 1200, 420);
	fputs("set multiplot layout 1,3 title ", f);
	plot_quote(f, title);
	fputs("\nset key below\nset xlabel 'request rate (req/s)'\nset xrange [0:*]\n", f);
	if (blp) {
		double x = lp_x(blp);

		fprintf(f,
			"set arrow 1 from %.9g, graph 0 to %.9g, graph 1 nohead dt 3 lw 2 lc rgb '#2ca02c'\n"
			"set label 1 'max goodput' at %.9g, graph 0.96 right offset -0.5,0 tc rgb '#2ca02c'\n",
			x, x, x);
	}
	fputs("set logscale y\nset ylabel 'TTFT (ms)'\nset title 'TTFT percentiles'\n"
	      "plot 'lat.dat' using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#9ecae1' title 'p50', "
	      "'' using 1:3 with linespoints pt 7 ps 0.6 lc rgb '#4292c6' title 'p90', "
	      "'' using 1:4 with linespoints pt 7 ps 0.6 lc rgb '#08306b' title 'p99'",
	      f);
	sla_lines(f, r, PROBE_METRIC_TTFT);
	fputs("\nset ylabel 'TPOT (ms)'\nset title 'TPOT percentiles'\n"
	      "plot 'lat.dat' using 1:5 with linespoints pt 7 ps 0.6 lc rgb '#fdae6b' title 'p50', "
	      "'' using 1:6 with linespoints pt 7 ps 0.6 lc rgb '#f16913' title 'p90', "
	      "'' using 1:7 with linespoints pt 7 ps 0.6 lc rgb '#7f2704' title 'p99'",
	      f);
	sla_lines(f, r, PROBE_METRIC_TPOT);
	fputs("\nunset logscale y\nset yrange [0:*]\nset ylabel 'output tokens/s'\nset y2label 'attainment (%)'\n"
	      "set y2range [0:105]\nset y2tics 0,20,100\nset ytics nomirror\nset title 'Throughput and goodput'\n"
	      "plot 'lat.dat' using 1:8 with linespoints pt 7 ps 0.6 lc rgb '#7f7f7f' title 'output tokens/s', "
	      "'' using 1:9 with linespoints pt 7 ps 0.6 lw 2 lc rgb '#2ca02c' title 'goodput (tokens/s meeting the "
	      "SLA)', "
	      "'' using 1:10 axes x1y2 with linespoints pt 6 ps 0.6 dt 2 lc rgb '#9467bd' title 'attainment %'",
	      f);
	if (!probe_sla_empty(&r->parsed->sla))
		fprintf(f, ", %.9g axes x1y2 with lines dt 3 lc rgb '#9467bd' title 'attainment target'",
			r->parsed->sla.attainment * 100);
	if (blp) {
		d = plot_open(c, "lat-best.dat");
		if (!d)
			return plot_close_data(d);
		plot_num(d, lp_x(blp));
		fputc(' ', d);
		plot_num(d, blp->good_output_throughput);
		fputc('\n', d);
		q = plot_close_data(d);
		if (q < 0)
			return q;
		fprintf(f,
			", 'lat-best.dat' using 1:2 with points pt 7 ps 2.2 lc rgb '#2ca02c' title 'max goodput %.0f "
			"tokens/s'",
			blp->good_output_throughput);
	}
	fputs("\nunset multiplot\n", f);
	return 1;
}

/* ---- cost landscape ---- */

struct axis {
	double v[MAX_GRID];
	size_t n;
};

static int axis_index(const struct axis *a, double x)
{
	for (size_t i = 0; i < a->n; i++)
		if (fabs(a->v[i] - x) <= 1e-9 * MAX(1.0, fabs(x)))
			return (int)i;
	return -1;
}

/* The knob's grid values: from the parsed space, else those the trials used. */
static void axis_fill(const struct report *r, const char *knob, struct axis *a)
{
	int k = r->parsed && r->parsed->space ? opt_space_knob_index(r->parsed->space, knob) : -ENOENT;

	a->n = 0;
	if (k >= 0 && r->parsed->space->knobs[k].numbers && r->parsed->space->knobs[k].n_values <= MAX_GRID) {
		const struct opt_knob *kn = &r->parsed->space->knobs[k];

		for (size_t i = 0; i < kn->n_values; i++)
			a->v[a->n++] = kn->numbers[i];
	} else {
		for (size_t i = 0; i < r->n_trials && a->n < MAX_GRID; i++) {
			double x = report_knob_number(&r->trials[i], knob);

			if (isfinite(x) && axis_index(a, x) < 0)
				a->v[a->n++] = x;
		}
	}
	qsort(a->v, a->n, sizeof(double), array_cmp_double);
}

static void group_name(const struct report_trial *t, char *buf, size_t size)
{
	char q[32], tp[24];

	report_knob_text(t, "quantization", q, sizeof(q));
	report_knob_text(t, "tensor_parallel", tp, sizeof(tp));
	snprintf(buf, size, "quantization %s, tp %s", strcmp(q, "-") == 0 ? "none" : q,
		 strcmp(tp, "-") == 0 ? "1" : tp);
}

static void tics(FILE *f, const char *axis, const struct axis *a)
{
	size_t every = a->n > 12 ? (a->n + 11) / 12 : 1;

	fprintf(f, "set %stics (", axis);
	for (size_t i = 0; i < a->n; i++) {
		if (i % every == 0)
			fprintf(f, "%s'%g' %zu", i ? ", " : "", a->v[i], i);
		else
			fprintf(f, ", '' %zu", i);
	}
	fputs(")\n", f);
}

/* The cost landscape: one panel per quantization × TP group, a cell per
 * max_num_seqs × max_num_batched_tokens, the cheapest measurement in it. */
struct landscape {
	struct axis ax, ay;
	char groups[MAX_GROUPS][96];
	size_t ng;
	double lo, hi;
	double *cost;       /* [g][x][y], NAN none */
	unsigned char *bad; /* [g][x][y], a trial there ended without a cost */
	int bg, bx, by;     /* the best trial's cell, bg -1 none */
};

static void landscape_done(struct landscape *l)
{
	free(l->cost);
	free(l->bad);
}

static void landscape_add(struct landscape *l, const struct report_trial *t, const struct report_trial *best)
{
	int xi = axis_index(&l->ax, report_knob_number(t, "max_num_seqs"));
	int yi = axis_index(&l->ay, report_knob_number(t, "max_num_batched_tokens"));
	char g[96];
	size_t gi, cell;

	if (xi < 0 || yi < 0 || !store_trial_state_is_final(t->t.state))
		return;
	group_name(t, g, sizeof(g));
	for (gi = 0; gi < l->ng && strcmp(l->groups[gi], g) != 0; gi++)
		;
	if (gi == l->ng) {
		if (l->ng == MAX_GROUPS)
			return;
		snprintf(l->groups[l->ng++], sizeof(l->groups[0]), "%s", g);
	}
	cell = (gi * l->ax.n + (size_t)xi) * l->ay.n + (size_t)yi;
	if (t->t.state == STORE_TRIAL_DONE && isfinite(t->t.cost_per_mtok)) {
		if (!isfinite(l->cost[cell]) || t->t.cost_per_mtok < l->cost[cell])
			l->cost[cell] = t->t.cost_per_mtok;
		l->lo = MIN(l->lo, t->t.cost_per_mtok);
		l->hi = MAX(l->hi, t->t.cost_per_mtok);
	} else {
		l->bad[cell] = 1;
	}
	if (t == best) {
		l->bg = (int)gi;
		l->bx = xi;
		l->by = yi;
	}
}

/* Fills the grid from the finished trials; 0 when there is nothing to draw
 * (*ret_why says why), 1 when there is. */
static int landscape_fill(struct landscape *l, const struct report *r, char **ret_why)
{
	const struct report_trial *best = report_best(r);
	size_t cells;

	axis_fill(r, "max_num_seqs", &l->ax);
	axis_fill(r, "max_num_batched_tokens", &l->ay);
	if (l->ax.n == 0 || l->ay.n == 0)
		return plot_why(ret_why, "the search space has no max_num_seqs × max_num_batched_tokens grid");
	cells = MAX_GROUPS * l->ax.n * l->ay.n;
	l->cost = malloc(sizeof(double) * cells);
	l->bad = calloc(cells, 1);
	if (!l->cost || !l->bad)
		return -ENOMEM;
	for (size_t i = 0; i < cells; i++)
		l->cost[i] = NAN;
	for (size_t i = 0; i < r->n_trials; i++)
		landscape_add(l, &r->trials[i], best);
	if (l->ng == 0)
		return plot_why(ret_why, "no finished trial has both max_num_seqs and max_num_batched_tokens");
	if (!isfinite(l->lo)) {
		l->lo = 0;
		l->hi = 1;
	} else if (l->hi <= l->lo) {
		l->hi = l->lo * 1.05 + 1e-6;
	}
	return 1;
}

/* Writes panel g's data files and its plot command. */
static int landscape_panel(struct plot_ctx *c, const struct landscape *l, size_t g, FILE *f)
{
	char cname[32], xname[32];
	bool any_cost = false, any_bad = false;
	FILE *dc, *dx;
	int q;

	snprintf(cname, sizeof(cname), "ls-%zu-c.dat", g);
	snprintf(xname, sizeof(xname), "ls-%zu-x.dat", g);
	dc = plot_open(c, cname);
	if (!dc)
		return plot_close_data(dc);
	dx = plot_open(c, xname);
	if (!dx) {
		fclose(dc);
		return plot_close_data(dx);
	}
	for (size_t x = 0; x < l->ax.n; x++)
		for (size_t y = 0; y < l->ay.n; y++) {
			size_t cell = (g * l->ax.n + x) * l->ay.n + y;

			if (isfinite(l->cost[cell])) {
				fprintf(dc, "%zu %zu %.9g\n", x, y, l->cost[cell]);
				any_cost = true;
			} else if (l->bad[cell]) {
				fprintf(dx, "%zu %zu\n", x, y);
				any_bad = true;
			}
		}
	q = plot_close_data(dc);
	if (q >= 0)
		q = plot_close_data(dx);
	if (q < 0)
		return q;
	fputs("set title ", f);
	plot_quote(f, l->groups[g]);
	fputs("\nplot ", f);
	/* an invisible point keeps a panel with no data valid */
	fputs("1/0 notitle", f);
	if (any_cost) {
		fprintf(f, ", '%s' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder lc palette notitle",
			cname);
		if (l->ax.n * l->ay.n <= MAX_GRID)
			fprintf(f, ", '%s' using 1:2:(sprintf('%%.3g', $3)) with labels font ',9' notitle", cname);
	}
	if (any_bad)
		fprintf(f, ", '%s' using 1:2 with points pt 2 ps 2 lw 2 lc rgb '#888888' notitle", xname);
	if ((int)g == l->bg) {
		FILE *db = plot_open(c, "ls-best.dat");

		if (!db)
			return plot_close_data(db);
		fprintf(db, "%d %d\n", l->bx, l->by);
		q = plot_close_data(db);
		if (q < 0)
			return q;
		fputs(", 'ls-best.dat' using 1:2:(0.5):(0.5) with boxxyerror fs empty border lw 3 lc rgb '#000000' "
		      "notitle",
		      f);
	}
	fputc('\n', f);
	return 0;
}

static int plot_landscape(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	struct landscape l = { .lo = INFINITY, .hi = -INFINITY, .bg = -1, .bx = -1, .by = -1 };
	size_t cols, rows;
	int q;

	q = landscape_fill(&l, r, ret_why);
	if (q <= 0)
		goto out;
	cols = l.ng < 3 ? l.ng : 3;
	rows = (l.ng + cols - 1) / cols;
	/* a single panel is 420 px wide: the title in three lines there */
	plot_header(f, REPORT_PLOT_LANDSCAPE, (unsigned)(cols * 420), (unsigned)(rows * 380 + (cols == 1 ? 80 : 40)));
	fprintf(f,
		"set multiplot layout %zu,%zu title %s\n"
		"set palette defined (0 '#1a9850', 0.5 '#fee08b', 1 '#d73027')\n"
		"set cbrange [%.9g:%.9g]\nset cblabel '$/Mtok'\nunset grid\n"
		"set xrange [-0.5:%zu.5]\nset yrange [-0.5:%zu.5]\n"
		"set xlabel 'max_num_seqs'\nset ylabel 'max_num_batched_tokens'\n",
		rows, cols,
		cols == 1
			? "\"$/Mtok over batch x chunk\\n(green is cheaper; black frame: best;\\nx: no cost - failed, "
			  "infeasible or SLA never met)\""
			: "'$/Mtok over batch x chunk (green is cheaper; x: no cost - failed, infeasible or SLA never "
			  "met; black frame: best)'",
		l.lo, l.hi, l.ax.n - 1, l.ay.n - 1);
	tics(f, "x", &l.ax);
	tics(f, "y", &l.ay);
	for (size_t g = 0; g < l.ng && q >= 0; g++)
		q = landscape_panel(c, &l, g, f);
	if (q >= 0) {
		fputs("unset multiplot\n", f);
		q = 1;
	}
out:
	landscape_done(&l);
	return q;
}

/* ---- search progress ---- */

static int plot_progress(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	uint64_t t0 = r->study.started_usec, tmax = 0;
	double best = NAN, scale = 60.0;
	const char *unit = "min";
	bool any = false, any_wall = false, any_deploy = false;
	FILE *d;
	int q;

	if (r->n_trials == 0)
		return plot_why(ret_why, "the study has no trials yet");
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct store_trial *t = &r->trials[i].t;

		if (t->started_usec && (!t0 || t->started_usec < t0))
			t0 = t->started_usec;
		tmax = MAX(tmax, t->finished_usec);
		any = any || (t->state == STORE_TRIAL_DONE && isfinite(t->cost_per_mtok));
	}
	if (!any)
		return plot_why(ret_why, "no trial met the SLA, so there is no cost to follow");
	if (tmax > t0 && tmax - t0 < 120 * 1000000ull) {
		scale = 1.0;
		unit = "s";
	}
	d = plot_open(c, "prog.dat");
	if (!d)
		return plot_close_data(d);
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct store_trial *t = &r->trials[i].t;
		double cost = t->state == STORE_TRIAL_DONE ? t->cost_per_mtok : NAN;

		if (isfinite(cost) && (!isfinite(best) || cost < best))
			best = cost;
		any_deploy = any_deploy || isfinite(t->deploy_seconds);
		any_wall = any_wall || (t->finished_usec && t0 && t->finished_usec >= t0 && isfinite(cost));
		fprintf(d, "%u ", t->seq);
		plot_num(d, cost);
		fputc(' ', d);
		plot_num(d, best);
		fputc(' ', d);
		plot_num(d, t->deploy_seconds);
		fputc(' ', d);
		plot_num(d, t->finished_usec && t0 && t->finished_usec >= t0
				    ? (double)(t->finished_usec - t0) / 1e6 / scale
				    : NAN);
		fputc('\n', d);
	}
	q = plot_close_data(d);
	if (q < 0)
		return q;
	plot_header(f, REPORT_PLOT_PROGRESS, any_wall ? 1100 : 600, 380);
	fprintf(f,
		"set multiplot layout 1,%d title 'Search progress: best $/Mtok so far'\n"
		"set key below\nset style fill solid 0.35 noborder\nset boxwidth 0.6 relative\n"
		"set xlabel 'trial'\nset ylabel '$/Mtok'\nset ytics nomirror\nset xrange [0.5:%zu.5]\n",
		any_wall ? 2 : 1, r->n_trials);
	/* deploy time as bars on the right axis, when recorded (dry runs deploy nothing) */
	if (any_deploy)
		fputs("set y2label 'deploy time (s)'\nset y2tics\nset y2range [0:*]\n"
		      "plot 'prog.dat' using 1:4 axes x1y2 with boxes lc rgb '#bbbbbb' title 'deploy time (s, right "
		      "axis)', ",
		      f);
	else
		fputs("plot ", f);
	fputs("'prog.dat' using 1:2 with points pt 7 ps 0.9 lc rgb '#1f77b4' title '$/Mtok of the trial', "
	      "'' using 1:3 with steps lw 2 lc rgb '#d62728' title 'best so far'\n",
	      f);
	/* the wall-time panel needs finish times (not recorded for every kind of trial) */
	if (any_wall)
		fprintf(f,
			"unset y2tics\nunset y2label\nset xrange [0:*]\nset xlabel 'wall time since the study started "
			"(%s)'\n"
			"plot 'prog.dat' using 5:2 with points pt 7 ps 0.9 lc rgb '#1f77b4' title '$/Mtok of the "
			"trial', "
			"'' using 5:3 with steps lw 2 lc rgb '#d62728' title 'best so far'\n",
			unit);
	fputs("unset multiplot\n", f);
	return 1;
}

/* ---- Pareto: tokens/s per user vs tokens/s per GPU ---- */

struct pp {
	double x, y;
};

static int cmp_pp(const void *a, const void *b)
{
	const struct pp *p = a, *q = b;

	return p->x < q->x ? -1 : p->x > q->x ? 1 : (p->y > q->y ? -1 : p->y < q->y);
}

static int plot_pareto(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	_cleanup_(freep) struct pp *p = calloc(r->n_trials ? r->n_trials : 1, sizeof(*p));
	const struct report_trial *b = report_best(r);
	size_t n = 0;
	FILE *d;
	int q;

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];
		double y = report_trial_tps_per_user(t);

		if (t->t.state != STORE_TRIAL_DONE || !isfinite(t->t.max_goodput) || !isfinite(y))
			continue;
		p[n++] = (struct pp){ t->t.max_goodput / t->gpus, y };
	}
	if (n == 0)
		return plot_why(ret_why, "no trial has both a max goodput and a TPOT at that load");
	qsort(p, n, sizeof(*p), cmp_pp);
	d = plot_open(c, "par.dat");
	if (!d)
		return plot_close_data(d);
	for (size_t i = 0; i < n; i++)
		fprintf(d, "%.9g %.9g\n", p[i].x, p[i].y);
	q = plot_close_data(d);
	if (q < 0)
		return q;
	/* The frontier: walking from the highest tokens/s per GPU down, keep each
	 * point that beats every point to its right on tokens/s per user. */
	d = plot_open(c, "par-front.dat");
	if (!d)
		return plot_close_data(d);
	double ymax = -INFINITY;
	_cleanup_(freep) struct pp *front = calloc(n, sizeof(*front));
	size_t nf = 0;
	if (!front) {
		fclose(d);
		return -ENOMEM;
	}
	for (size_t i = n; i > 0; i--)
		if (p[i - 1].y > ymax) {
			ymax = p[i - 1].y;
			front[nf++] = p[i - 1];
		}
	for (size_t i = nf; i > 0; i--)
		fprintf(d, "%.9g %.9g\n", front[i - 1].x, front[i - 1].y);
	q = plot_close_data(d);
	if (q < 0)
		return q;
	plot_header(f, REPORT_PLOT_PARETO, 720, 460);
	fputs("set title 'Tokens/s per user against tokens/s per GPU (each finished trial at its max goodput)'\n"
	      "set key below height 1\nset xlabel 'goodput per GPU (tokens/s)'\nset ylabel 'tokens/s per user (1000 / "
	      "mean "
	      "TPOT)'\n"
	      "set xrange [0:*]\nset yrange [0:*]\n"
	      "plot 'par.dat' using 1:2 with points pt 7 ps 1 lc rgb '#1f77b4' title 'trial', "
	      "'par-front.dat' using 1:2 with linespoints lw 2 pt 6 ps 1.4 lc rgb '#ff7f0e' title 'Pareto frontier'",
	      f);
	if (b && isfinite(report_trial_tps_per_user(b))) {
		d = plot_open(c, "par-best.dat");
		if (!d)
			return plot_close_data(d);
		fprintf(d, "%.9g %.9g\n", b->t.max_goodput / b->gpus, report_trial_tps_per_user(b));
		q = plot_close_data(d);
		if (q < 0)
			return q;
		fputs(", 'par-best.dat' using 1:2 with points pt 7 ps 2.4 lc rgb '#2ca02c' title 'lowest $/Mtok'", f);
	}
	fputc('\n', f);
	return 1;
}

/* ---- server metrics of the best ---- */

static int plot_server(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	const struct report_trial *b = report_best(r);
	_cleanup_(freep) const struct store_load_point **v = NULL;
	size_t n = 0, used = 0;
	FILE *d;
	int q;

	if (!b)
		return plot_why(ret_why, "no configuration met the SLA");
	q = sorted_lps(b, &v, &n);
	if (q < 0)
		return q;
	d = plot_open(c, "srv.dat");
	if (!d)
		return plot_close_data(d);
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(v[i]->kv_usage_peak) && !isfinite(v[i]->running_peak))
			continue;
		plot_num(d, lp_x(v[i]));
		fputc(' ', d);
		plot_num(d, v[i]->kv_usage_peak * 100);
		fputc(' ', d);
		plot_num(d, v[i]->running_peak);
		fputc(' ', d);
		plot_num(d, v[i]->waiting_peak);
		fputc('\n', d);
		used++;
	}
	q = plot_close_data(d);
	if (q < 0)
		return q;
	if (used == 0)
		return plot_why(ret_why,
				"the server's metrics (KV-cache usage, running requests) were not recorded for the "
				"best configuration");
	plot_header(f, REPORT_PLOT_SERVER, 760, 400);
	fputs("set title 'Server state at each load point (peaks scraped from /metrics)'\nset key below\n"
	      "set xlabel 'request rate (req/s)'\nset ylabel 'KV-cache usage peak (%)'\nset yrange [0:105]\n"
	      "set y2label 'requests'\nset y2range [0:*]\nset ytics nomirror\nset y2tics\nset xrange [0:*]\n"
	      "plot 'srv.dat' using 1:2 with linespoints pt 7 lw 2 lc rgb '#d62728' title 'KV-cache usage peak %', "
	      "'' using 1:3 axes x1y2 with linespoints pt 5 lc rgb '#1f77b4' title 'running requests (peak)', "
	      "'' using 1:4 axes x1y2 with linespoints pt 4 dt 2 lc rgb '#7f7f7f' title 'waiting requests (peak)'\n",
	      f);
	return 1;
}

int report_plot_script(struct plot_ctx *c, const struct report *r, enum report_plot_kind k, FILE *f, char **ret_why)
{
	switch (k) {
	case REPORT_PLOT_WORKLOAD:
		return plot_workload(c, r, f, ret_why);
	case REPORT_PLOT_LATENCY:
		return plot_latency(c, r, f, ret_why);
	case REPORT_PLOT_LANDSCAPE:
		return plot_landscape(c, r, f, ret_why);
	case REPORT_PLOT_PROGRESS:
		return plot_progress(c, r, f, ret_why);
	case REPORT_PLOT_PARETO:
		return plot_pareto(c, r, f, ret_why);
	case REPORT_PLOT_SERVER:
		return plot_server(c, r, f, ret_why);
	case REPORT_PLOT_GANTT:
		return report_plot_gantt(c, r, f, ret_why);
	case REPORT_PLOT_PRODUCTION:
		return report_plot_production(c, r, f, ret_why);
	default:
		return -EINVAL;
	}
}
