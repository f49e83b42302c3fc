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
	plot_header(f, REPORT_PLOT_WORKLOAD, 340);
	fprintf(f,
		"set multiplot layout 1,2 title 'Workload: %zu requests regenerated from the spec (seed %llu)'\n"
		"set style fill solid 0.85 border lc rgb '#2b4c7e'\n"
		"set ylabel 'requests'\nset yrange [0:*]\n"
		"set xlabel 'input length (tokens)'\nset boxwidth %.9g absolute\nset xrange [%.9g:%.9g]\n%s"
		"plot 'wl-in.dat' using 1:2 with boxes lc rgb '#4a7ab5'\n",
		n, (unsigned long long)r->parsed->workload.seed, wi * 0.9, loi, hii,
		hii - loi <= 12 ? "set xtics 1\n" : "set xtics autofreq\n"); /* lengths are whole tokens */
	/* bars stand on 0: it is part of what they draw */
	plot_axes(f, "input lengths", 0, (const double[]){ 0 }, 1, NULL, 0);
	fprintf(f,
		"set xlabel 'output length (tokens)'\nset boxwidth %.9g absolute\nset xrange [%.9g:%.9g]\n%s"
		"plot 'wl-out.dat' using 1:2 with boxes lc rgb '#e08a2c'\n",
		wo * 0.9, loo, hio, hio - loo <= 12 ? "set xtics 1\n" : "set xtics autofreq\n");
	plot_axes(f, "output lengths", 0, (const double[]){ 0 }, 1, NULL, 0);
	fputs("unset multiplot\n", f);
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
	int bg, bx, by;     /* the best configuration's cell, bg -1 none */
	size_t best_cell;   /* its index; SIZE_MAX none */
};

static void landscape_done(struct landscape *l)
{
	free(l->cost);
	free(l->bad);
}

/* A trial into its cell: the cell shows the cheapest configuration in it
 * at its cost as the study counts it (the mean of its measurements), the
 * best's cell the study's own cost; a cell where trials ended without a
 * cost and none has one is marked. The sweep of the answer measures no
 * cost: it is no point of the landscape. */
static void landscape_add(struct landscape *l, const struct report *r, const struct report_trial *t,
			  const struct report_trial *best)
{
	int xi = axis_index(&l->ax, report_knob_number(t, "max_num_seqs"));
	int yi = axis_index(&l->ay, report_knob_number(t, "max_num_batched_tokens"));
	char g[96];
	size_t gi, cell;
	double cost;
	bool is_best;

	if (xi < 0 || yi < 0 || !store_trial_state_is_final(t->t.state) || t->sweep)
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
	is_best = best && t->t.canonical_key && best->t.canonical_key &&
		  strcmp(t->t.canonical_key, best->t.canonical_key) == 0;
	if (is_best) {
		cost = report_cost(r);
		l->bg = (int)gi;
		l->bx = xi;
		l->by = yi;
		l->best_cell = cell;
	} else
		cost = report_config_cost(r, t->t.canonical_key, NULL);
	if (t->t.state == STORE_TRIAL_DONE && isfinite(t->t.cost_per_mtok) && isfinite(cost)) {
		if (is_best || (cell != l->best_cell && (!isfinite(l->cost[cell]) || cost < l->cost[cell])))
			l->cost[cell] = cost;
		l->lo = MIN(l->lo, cost);
		l->hi = MAX(l->hi, cost);
	} else {
		l->bad[cell] = 1;
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
	l->best_cell = SIZE_MAX;
	for (size_t i = 0; i < r->n_trials; i++)
		landscape_add(l, r, &r->trials[i], best);
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

/* Writes panel g's data files and its plot command. labels: the cells
 * are large enough for their cost in the plots' one font size. */
static int landscape_panel(struct plot_ctx *c, const struct landscape *l, size_t g, bool labels, FILE *f)
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
	/* one colour scale for the figure, in its right margin */
	if (g == 1)
		fputs("unset colorbox\n", f);
	fputs("set title ", f);
	plot_quote(f, l->groups[g]);
	fputs("\nplot ", f);
	/* an invisible point keeps a panel with no data valid */
	fputs("1/0 notitle", f);
	if (any_cost) {
		fprintf(f, ", '%s' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder lc palette notitle",
			cname);
		if (labels)
			fprintf(f, ", '%s' using 1:2:(sprintf('%%.4f', $3)) with labels notitle", cname);
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
	plot_axes(f, "landscape", PLOT_AXES_CATEGORICAL, NULL, 0, NULL, 0);
	return 0;
}

static int plot_landscape(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	struct landscape l = { .lo = INFINITY, .hi = -INFINITY, .bg = -1, .bx = -1, .by = -1 };
	size_t cols, rows;
	unsigned panel_h = 400;
	bool labels;
	int q;

	q = landscape_fill(&l, r, ret_why);
	if (q <= 0)
		goto out;
	cols = l.ng < 3 ? l.ng : 3;
	rows = (l.ng + cols - 1) / cols;
	/* panels of one size, one colour scale at the right; a cell's cost as
	 * the report writes costs ("0.2635") needs about 46 px by 20 at the
	 * plots' font: a panel is its share of 84 % of the width less the
	 * spacing and its axis labels */
	labels = ((double)REPORT_PLOT_WIDTH * 0.84 / (double)cols - 70) / (double)l.ax.n >= 46 &&
		 (panel_h - 110.0) / (double)l.ay.n >= 20;
	plot_header(f, REPORT_PLOT_LANDSCAPE, (unsigned)(rows * panel_h + 50));
	fprintf(f,
		"set multiplot layout %zu,%zu margins 0.07,0.91,%.4f,%.4f spacing 0.07,%.4f title '$/Mtok over batch x "
		"chunk (green is cheaper; black frame: best; x: no cost - failed, infeasible or SLA never met)'\n"
		"set palette defined (0 '#1a9850', 0.5 '#fee08b', 1 '#d73027')\n"
		"set colorbox user origin screen 0.935, screen %.4f size screen 0.015, screen %.4f\n"
		"set cbrange [%.9g:%.9g]\nset cblabel '$/Mtok'\nunset grid\n"
		"set xrange [-0.5:%zu.5]\nset yrange [-0.5:%zu.5]\n"
		"set xlabel 'max_num_seqs'\nset ylabel 'max_num_batched_tokens'\n",
		rows, cols, 60.0 / (rows * panel_h + 50), 1 - 80.0 / (rows * panel_h + 50),
		110.0 / (rows * panel_h + 50), 0.2, 0.6, l.lo, l.hi, l.ax.n - 1, l.ay.n - 1);
	tics(f, "x", &l.ax);
	tics(f, "y", &l.ay);
	for (size_t g = 0; g < l.ng && q >= 0; g++)
		q = landscape_panel(c, &l, g, labels, f);
	if (q >= 0) {
		fputs("unset multiplot\n", f);
		q = 1;
	}
out:
	landscape_done(&l);
	return q;
}

/* ---- search progress ---- */

/* A finished trial, in the order trials finished. */
struct fin {
	const struct report_trial *t;
	double wall;      /* since the first trial started, in the plot's unit */
	double cost;      /* its own measurement ($/Mtok), NAN none */
	double best;      /* the best so far once it finished */
	bool measurement; /* a measurement of a configuration (cost) */
};

static int cmp_fin(const void *a, const void *b)
{
	const struct store_trial *x = &((const struct fin *)a)->t->t, *y = &((const struct fin *)b)->t->t;

	if (x->finished_usec != y->finished_usec)
		return x->finished_usec < y->finished_usec ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The trials that finished, by finish time, each with the best so far then:
 * the lowest cost of any configuration as the study counts it (the mean of
 * its measurements finished by then), never rising — a re-probe that
 * raises a configuration's mean leaves the line where it was. *ret_answer:
 * the position of the answer's last measurement (-1 none). */
static int progress_rows(const struct report *r, uint64_t t0, double scale, struct fin **ret, size_t *ret_n,
			 long *ret_answer)
{
	const struct report_trial *b = report_best(r);
	_cleanup_(freep) struct fin *v = calloc(r->n_trials ? r->n_trials : 1, sizeof(*v));
	_cleanup_(freep) const char **keys = calloc(r->n_trials ? r->n_trials : 1, sizeof(*keys));
	_cleanup_(freep) double *sum = calloc(r->n_trials ? r->n_trials : 1, sizeof(*sum));
	_cleanup_(freep) unsigned *cnt = calloc(r->n_trials ? r->n_trials : 1, sizeof(*cnt));
	double best = NAN;
	size_t n = 0, nk = 0;
	long answer = -1;

	if (!v || !keys || !sum || !cnt)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct store_trial *t = &r->trials[i].t;

		if (store_trial_state_is_final(t->state) && t->finished_usec >= t0 && t->finished_usec > 0)
			v[n++] = (struct fin){ .t = &r->trials[i] };
	}
	qsort(v, n, sizeof(*v), cmp_fin);
	for (size_t i = 0; i < n; i++) {
		const struct store_trial *t = &v[i].t->t;
		size_t k;

		v[i].wall = (double)(t->finished_usec - t0) / 1e6 / scale;
		v[i].cost = NAN;
		v[i].measurement = t->state == STORE_TRIAL_DONE && isfinite(t->cost_per_mtok) && t->cost_per_mtok > 0 &&
				   t->canonical_key;
		if (v[i].measurement) {
			v[i].cost = t->cost_per_mtok;
			for (k = 0; k < nk && strcmp(keys[k], t->canonical_key) != 0; k++)
				;
			if (k == nk)
				keys[nk++] = t->canonical_key;
			sum[k] += t->cost_per_mtok;
			cnt[k]++;
			if (!isfinite(best) || sum[k] / cnt[k] < best)
				best = sum[k] / cnt[k];
			if (b && b->t.canonical_key && strcmp(t->canonical_key, b->t.canonical_key) == 0)
				answer = (long)i;
		}
		v[i].best = best;
	}
	*ret = TAKE_PTR(v);
	*ret_n = n;
	*ret_answer = answer;
	return 0;
}

static int plot_progress(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	uint64_t t0 = r->study.started_usec, tmax = 0;
	double scale = 60.0;
	const char *unit = "min";
	_cleanup_(freep) struct fin *v = NULL;
	bool any = false, any_deploy = false;
	char note[96];
	size_t n = 0;
	long answer = -1;
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
		any_deploy = any_deploy || isfinite(t->deploy_seconds);
	}
	if (!any)
		return plot_why(ret_why, "no trial met the SLA, so there is no cost to follow");
	if (tmax > t0 && tmax - t0 < 120 * 1000000ull) {
		scale = 1.0;
		unit = "s";
	} else if (tmax > t0 && tmax - t0 > 5 * 3600 * 1000000ull) {
		scale = 3600.0;
		unit = "h";
	}
	q = progress_rows(r, t0, scale, &v, &n, &answer);
	if (q < 0)
		return q;
	if (n == 0)
		return plot_why(ret_why, "no trial has finished yet");
	d = plot_open(c, "prog.dat");
	if (!d)
		return plot_close_data(d);
	/* finish position, search cost, re-probe cost, best so far, deploy s, wall time */
	for (size_t i = 0; i < n; i++) {
		fprintf(d, "%zu ", i + 1);
		plot_num(d, v[i].t->confirm ? NAN : v[i].cost);
		fputc(' ', d);
		plot_num(d, v[i].t->confirm ? v[i].cost : NAN);
		fputc(' ', d);
		plot_num(d, v[i].best);
		fputc(' ', d);
		plot_num(d, v[i].t->t.deploy_seconds);
		fputc(' ', d);
		plot_num(d, v[i].wall);
		fputc('\n', d);
	}
	q = plot_close_data(d);
	if (q < 0)
		return q;
	if (answer >= 0) {
		d = plot_open(c, "prog-answer.dat");
		if (!d)
			return plot_close_data(d);
		fprintf(d, "%ld %.9g %.9g\n", answer + 1, v[answer].wall, report_cost(r));
		q = plot_close_data(d);
		if (q < 0)
			return q;
	}
	report_cost_note(r, note, sizeof(note));
	plot_header(f, REPORT_PLOT_PROGRESS, 480);
	/* two panels of one size, one key under both */
	fprintf(f,
		"set multiplot layout 1,2 margins 0.07,0.95,0.36,0.9 spacing %.2f,0 title 'Search progress: the best "
		"$/Mtok so far, as trials finished'\n"
		"set key at screen 0.5, screen 0.2 center top vertical Left reverse samplen 2\n"
		"set style fill solid 0.35 noborder\nset boxwidth 0.6 relative\n"
		"set xlabel 'trials finished, in the order they finished'\nset ylabel '$/Mtok'\nset ytics nomirror\n"
		"set xrange [0.5:%zu.5]\n",
		any_deploy ? 0.14 : 0.1, n); /* room for the deploy times' axis between the panels */
	/* deploy time as bars on the right axis, when recorded (dry runs deploy nothing) */
	if (any_deploy)
		fputs("set y2label 'deploy time (s)'\nset y2tics\nset y2range [0:*]\n"
		      "plot 'prog.dat' using 1:5 axes x1y2 with boxes lc rgb '#bbbbbb' title 'deploy time (s, right "
		      "axis)', ",
		      f);
	else
		fputs("plot ", f);
	fputs("'prog.dat' using 1:2 with points pt 7 ps 0.9 lc rgb '#1f77b4' title '$/Mtok of the trial', "
	      "'' using 1:3 with points pt 6 ps 1.1 lw 2 lc rgb '#1f77b4' title 're-probe', "
	      "'' using 1:4 with steps lw 2 lc rgb '#d62728' title 'best so far'",
	      f);
	if (answer >= 0) {
		char title[160];

		snprintf(title, sizeof(title), "the answer: $%.4f/Mtok%s", report_cost(r), note);
		fputs(", 'prog-answer.dat' using 1:3 with points pt 8 ps 1.6 lw 2 lc rgb '#2ca02c' title ", f);
		plot_quote(f, title);
	}
	fputc('\n', f);
	/* the deploy-time bars stand on 0 */
	plot_axes(f, "by trial", 0, NULL, 0, (const double[]){ 0 }, any_deploy ? 1 : 0);
	fprintf(f,
		"unset y2tics\nunset y2label\nset key off\nset xrange [0:*]\n"
		"set xlabel 'wall time since the first trial started (%s)'\n"
		"plot 'prog.dat' using 6:2 with points pt 7 ps 0.9 lc rgb '#1f77b4' title '$/Mtok of the trial', "
		"'' using 6:3 with points pt 6 ps 1.1 lw 2 lc rgb '#1f77b4' title 're-probe', "
		"'' using 6:4 with steps lw 2 lc rgb '#d62728' title 'best so far'",
		unit);
	if (answer >= 0)
		fputs(", 'prog-answer.dat' using 2:3 with points pt 8 ps 1.6 lw 2 lc rgb '#2ca02c' notitle", f);
	fputc('\n', f);
	plot_axes(f, "by wall time", 0, NULL, 0, NULL, 0);
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

		if (t->t.state != STORE_TRIAL_DONE || t->sweep || !isfinite(t->t.max_goodput) || !isfinite(y))
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
	/* fitted to the trials: a little room around them, not from 0 */
	double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		x0 = MIN(x0, p[i].x);
		x1 = MAX(x1, p[i].x);
		y0 = MIN(y0, p[i].y);
		y1 = MAX(y1, p[i].y);
	}
	plot_fit_range(x0, x1, false, &x0, &x1);
	plot_fit_range(y0, y1, false, &y0, &y1);
	plot_header(f, REPORT_PLOT_PARETO, 460);
	fprintf(f,
		"set title 'Tokens/s per user against tokens/s per GPU (each finished trial at its max goodput)'\n"
		"set key below\nset xlabel 'goodput per GPU (tokens/s)'\nset ylabel 'tokens/s per user (1000 / mean "
		"TPOT)'\n"
		"set xrange [%.9g:%.9g]\nset yrange [%.9g:%.9g]\n"
		"plot 'par.dat' using 1:2 with points pt 7 ps 1 lc rgb '#1f77b4' title 'trial', "
		"'par-front.dat' using 1:2 with linespoints lw 2 pt 6 ps 1.4 lc rgb '#ff7f0e' title 'Pareto frontier'",
		MAX(x0, 0), x1, MAX(y0, 0), y1);
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
	plot_axes(f, "Pareto", 0, NULL, 0, NULL, 0);
	return 1;
}

int report_plot_script(struct plot_ctx *c, const struct report *r, enum report_plot_kind k, FILE *f, char **ret_why)
{
	switch (k) {
	case REPORT_PLOT_WORKLOAD:
		return plot_workload(c, r, f, ret_why);
	case REPORT_PLOT_LATENCY:
		return report_plot_latency(c, r, f, ret_why);
	case REPORT_PLOT_LANDSCAPE:
		return plot_landscape(c, r, f, ret_why);
	case REPORT_PLOT_PROGRESS:
		return plot_progress(c, r, f, ret_why);
	case REPORT_PLOT_PARETO:
		return plot_pareto(c, r, f, ret_why);
	case REPORT_PLOT_SERVER:
		return report_plot_server(c, r, f, ret_why);
	case REPORT_PLOT_GANTT:
		return report_plot_gantt(c, r, f, ret_why);
	case REPORT_PLOT_PRODUCTION:
		return report_plot_production(c, r, f, ret_why);
	case REPORT_PLOT_SHAPES:
		return report_plot_shapes(c, r, f, ret_why);
	default:
		return -EINVAL;
	}
}
