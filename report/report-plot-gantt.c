/* report-plot-gantt.c — where the study's wall time went: one row per GPU,
 * each trial a bar over the time it held that GPU — deploying (the server's
 * start-up) in orange, probing in blue (the answer's load-step sweep in
 * purple), the trial's number on it where the bar has room — and the
 * gaps between bars the time a GPU stood idle. A vertical line marks the
 * time to the answer (the end of the answer's last measurement). Times
 * come from the store's trials (started, start-up seconds, finished), so a
 * dry run draws its virtual schedule the same way. Trials recorded before
 * trials ran side by side carry no GPUs: they are drawn on GPU 0. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "report-plot-internal.h"

#define GANTT_GPUS_MAX 64

/* The GPU indices of a trial ("0,1"); none recorded: GPU 0. */
static size_t trial_gpus(const struct store_trial *t, unsigned *ret, size_t max)
{
	size_t n = 0;

	for (const char *p = t->gpus; p && *p && n < max;) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || v >= GANTT_GPUS_MAX)
			break;
		ret[n++] = (unsigned)v;
		p = *end == ',' ? end + 1 : NULL;
	}
	if (n == 0)
		ret[n++] = 0;
	return n;
}

int report_plot_gantt(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why)
{
	uint64_t t0 = 0, tmax = 0;
	double scale = 60.0, answer = NAN;
	const char *unit = "min";
	unsigned top = 0;
	bool sweep = false;
	FILE *d;
	int q;

	for (size_t i = 0; i < r->n_trials; i++) {
		const struct store_trial *t = &r->trials[i].t;

		if (!t->started_usec || t->finished_usec <= t->started_usec)
			continue;
		if (!t0 || t->started_usec < t0)
			t0 = t->started_usec;
		tmax = MAX(tmax, t->finished_usec);
	}
	if (!t0)
		return plot_why(ret_why, "no trial has finished yet");
	if (tmax - t0 < 120 * 1000000ull) {
		scale = 1.0;
		unit = "s";
	} else if (tmax - t0 > 5 * 3600 * 1000000ull) {
		scale = 3600.0;
		unit = "h";
	}
	if (r->best >= 0 && r->answer.answered_usec > t0)
		answer = (double)(r->answer.answered_usec - t0) / 1e6 / scale;
	d = plot_open(c, "gantt.dat");
	if (!d)
		return plot_close_data(d);
	/* one line per (trial, GPU, phase): GPU, from, to, phase (0 deploy, 1
	 * probe, 2 sweep), trial, whether its number fits on the bar (about
	 * 30 px of the plot's ~1040) */
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct store_trial *t = &r->trials[i].t;
		unsigned phase = r->trials[i].sweep ? 2 : 1;

		sweep = sweep || r->trials[i].sweep;
		double from = (double)(t->started_usec - t0) / 1e6, to = (double)(t->finished_usec - t0) / 1e6;
		double ready = isfinite(t->deploy_seconds) ? MIN(from + t->deploy_seconds, to) : from;
		unsigned g[GANTT_GPUS_MAX];
		size_t n;

		if (!t->started_usec || t->finished_usec <= t->started_usec)
			continue;
		n = trial_gpus(t, g, GANTT_GPUS_MAX);
		for (size_t k = 0; k < n; k++) {
			top = MAX(top, g[k]);
			bool room = (to - from) / ((double)(tmax - t0) / 1e6) * 1040 >= 30;

			if (ready > from)
				fprintf(d, "%u %.6g %.6g 0 %u %d\n", g[k], from / scale, ready / scale, t->seq, room);
			fprintf(d, "%u %.6g %.6g %u %u %d\n", g[k], ready / scale, to / scale, phase, t->seq, room);
		}
	}
	q = plot_close_data(d);
	if (q < 0)
		return q;
	plot_header(f, REPORT_PLOT_GANTT, 130 + 40 * (top + 1));
	fprintf(f,
		"set title 'Trials over wall time, per GPU (orange: deploying, blue: probing%s, white: idle)'\n"
		"set key off\nset xlabel 'wall time since the first trial started (%s)'\nset ylabel 'GPU'\n"
		"set yrange [%g:-0.6]\nset ytics 1\nset xrange [0:*]\nset grid xtics\nset style fill solid 0.8 border "
		"lc rgb '#ffffff'\n",
		sweep ? ", purple: the load-step sweep" : "", unit, top + 0.6);
	if (isfinite(answer))
		fprintf(f,
			"set arrow from %.6g, graph 0 to %.6g, graph 1 nohead lw 2 dt 2 lc rgb '#2ca02c'\n"
			"set label 'answer' at %.6g, graph 1.03 center tc rgb '#2ca02c'\n",
			answer, answer, answer);
	fprintf(f, "plot 'gantt.dat' using (($2+$3)/2):1:2:3:($1-0.38):($1+0.38):($4 == 0 ? 0xff7f0e : $4 == 2 ? "
		   "0x9467bd : 0x1f77b4) with boxxyerror lc rgb variable, '' using (($2+$3)/2):1:(stringcolumn(4) ne "
		   "'0' && $6 > 0 ? sprintf('%%d', $5) : '') with labels tc rgb '#ffffff'\n");
	plot_axes(f, "Gantt", PLOT_AXES_CATEGORICAL, NULL, 0, NULL, 0);
	return 1;
}
