/* report-shape-plot.c — the serving-shape section of a study that searched
 * both shapes (deploy.shape "both"), and its figure as DistServe draws it:
 * SLO attainment of each shape's best configuration against the request
 * rate per GPU, and against the SLA's tightness (every per-request bound
 * multiplied by 0.5 ... 2, counted from each load point's requests when
 * it was measured: its result's attainment_by_sla_scale).
 *
 * Each shape's best is the configuration report_shape_compare names (the
 * answer, and the cheapest of the other shape as the study counts cost);
 * its load points are those of every trial of that configuration (its
 * re-probes and the answer's load-step sweep too) at a rate, by rate. The
 * scaled-SLA panel is at each shape's max-goodput load point: how much of
 * its traffic would still meet an SLA half as tight or twice as loose. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report-internal.h"
#include "report-plot-internal.h"

enum {
	SHAPE_WINNER,
	SHAPE_OTHER,
	_SHAPE_MAX
};

struct shape_curve {
	const char *shape;                   /* "aggregated" or "disaggregated" */
	const struct report_trial *first;    /* the configuration's first trial */
	const struct store_load_point **pts; /* owned array, borrowed points, by rate */
	size_t n;
	const struct store_load_point *best; /* the max-goodput point; NULL none */
	bool scaled;                         /* best's result holds attainment_by_sla_scale */
	double scaled_attainment[PROBE_SLA_SCALES];
};

static const char *trial_shape(const struct report_trial *t)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(t->knobs, "shape");

	if (!cJSON_IsString(v))
		return NULL;
	return strcmp(v->valuestring, "disaggregated") == 0 ? "disaggregated" : "aggregated";
}

/* The cheapest configuration of a shape as the study counts cost (the mean
 * of its measurements); its canonical key, NULL when none has a cost. */
static const char *cheapest_of(const struct report *r, const char *shape)
{
	const char *key = NULL;
	double best = INFINITY;

	for (size_t i = 0; i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];
		const char *s = trial_shape(t);
		double cost;

		if (t->t.state != STORE_TRIAL_DONE || !(t->t.cost_per_mtok > 0) || !t->t.canonical_key || !s ||
		    strcmp(s, shape) != 0)
			continue;
		cost = report_config_cost(r, t->t.canonical_key, NULL);
		if (cost < best) {
			best = cost;
			key = t->t.canonical_key;
		}
	}
	return key;
}

static int cmp_rate(const void *a, const void *b)
{
	const struct store_load_point *p = *(const struct store_load_point *const *)a;
	const struct store_load_point *q = *(const struct store_load_point *const *)b;

	return p->request_rate < q->request_rate ? -1 : p->request_rate > q->request_rate;
}

static void read_scaled(struct shape_curve *c)
{
	_cleanup_(cJSON_Deletep) cJSON *j = c->best && c->best->result_json ? cJSON_Parse(c->best->result_json) : NULL;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "attainment_by_sla_scale"), *p;
	size_t k = 0;

	if (cJSON_GetArraySize(a) != PROBE_SLA_SCALES)
		return;
	cJSON_ArrayForEach(p, a)
	{
		const cJSON *v = cJSON_GetArrayItem(p, 1);

		if (!cJSON_IsNumber(v))
			return;
		c->scaled_attainment[k++] = v->valuedouble;
	}
	c->scaled = true;
}

static int curve_fill(const struct report *r, const char *key, const char *shape, struct shape_curve *c)
{
	size_t n = 0;

	*c = (struct shape_curve){ .shape = shape };
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i].t.canonical_key && strcmp(r->trials[i].t.canonical_key, key) == 0)
			n += r->trials[i].n_lps;
	c->pts = calloc(MAX(n, (size_t)1), sizeof(*c->pts));
	if (!c->pts)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];
		const struct store_load_point *b = report_trial_best_lp(t);

		if (!t->t.canonical_key || strcmp(t->t.canonical_key, key) != 0)
			continue;
		if (!c->first)
			c->first = t;
		for (size_t j = 0; j < t->n_lps; j++)
			if (isfinite(t->lps[j].request_rate) && t->lps[j].request_rate > 0 &&
			    !(t->lps[j].phase && strcmp(t->lps[j].phase, "warmup") == 0))
				c->pts[c->n++] = &t->lps[j];
		if (b && !t->sweep && isfinite(b->request_rate) &&
		    (!c->best || b->request_rate > c->best->request_rate))
			c->best = b;
	}
	qsort(c->pts, c->n, sizeof(*c->pts), cmp_rate);
	read_scaled(c);
	return 0;
}

static void curves_done(struct shape_curve c[_SHAPE_MAX])
{
	for (size_t i = 0; i < _SHAPE_MAX; i++)
		free(c[i].pts);
}

/* Both shapes' best configurations, each with a load point at a rate;
 * 0 with *ret_why when the study has no such pair. */
static int curves_of(const struct report *r, struct shape_curve c[_SHAPE_MAX], const char **ret_why)
{
	const char *other_key;
	int q;

	memset(c, 0, sizeof(*c) * _SHAPE_MAX);
	if (!r->shape.present || !r->answer.trial.canonical_key) {
		*ret_why = "the study searched one serving shape";
		return 0;
	}
	other_key = cheapest_of(r, r->shape.other);
	if (!other_key) {
		*ret_why = "no configuration of the other shape met the SLA";
		return 0;
	}
	q = curve_fill(r, r->answer.trial.canonical_key, r->shape.winner, &c[SHAPE_WINNER]);
	if (q >= 0)
		q = curve_fill(r, other_key, r->shape.other, &c[SHAPE_OTHER]);
	if (q < 0)
		return q;
	if (!c[SHAPE_WINNER].n || !c[SHAPE_OTHER].n || !c[SHAPE_WINNER].first->gpus || !c[SHAPE_OTHER].first->gpus) {
		*ret_why = "a shape's best configuration has no load point at a rate";
		return 0;
	}
	return 1;
}

static const char *shape_color(const struct shape_curve *c)
{
	return strcmp(c->shape, "disaggregated") == 0 ? "#d62728" : "#1f77b4";
}

/* The end of a panel's plot command: the attainment target's line (none: NAN). */
static void target_line(FILE *f, double target)
{
	if (isfinite(target))
		fprintf(f, ", %.9g with lines dt 3 lc rgb '#555555' title 'attainment target'", target);
	fputc('\n', f);
}

int report_plot_shapes(struct plot_ctx *pc, const struct report *r, FILE *f, char **ret_why)
{
	struct shape_curve c[_SHAPE_MAX];
	const char *why = NULL;
	double x0 = INFINITY, x1 = -INFINITY, att_lo = 100, att_hi = 0, scaled_lo = 100, scaled_hi = 0, target;
	bool scaled;
	int q;

	if (!r->shape.present)
		return 0; /* not for this study: no plot, no note */
	q = curves_of(r, c, &why);
	if (q <= 0) {
		curves_done(c);
		return q < 0 ? q : plot_why(ret_why, why);
	}
	target = r->parsed && probe_sla_has_request_bounds(&r->parsed->sla) ? r->parsed->sla.attainment * 100 : NAN;
	scaled = c[SHAPE_WINNER].scaled || c[SHAPE_OTHER].scaled;
	for (size_t s = 0; s < _SHAPE_MAX && q >= 0; s++) {
		char name[32];
		FILE *d;

		snprintf(name, sizeof(name), "shape-%zu.dat", s);
		d = plot_open(pc, name);
		if (!d) {
			q = plot_close_data(d);
			break;
		}
		for (size_t i = 0; i < c[s].n; i++) {
			double x = c[s].pts[i]->request_rate / c[s].first->gpus;

			plot_num(d, x);
			fputc(' ', d);
			plot_num(d, c[s].pts[i]->attainment * 100);
			fputc('\n', d);
			x0 = MIN(x0, x);
			x1 = MAX(x1, x);
			att_lo = MIN(att_lo, c[s].pts[i]->attainment * 100);
			att_hi = MAX(att_hi, c[s].pts[i]->attainment * 100);
		}
		q = plot_close_data(d);
		if (q < 0 || !c[s].scaled)
			continue;
		snprintf(name, sizeof(name), "shape-scaled-%zu.dat", s);
		d = plot_open(pc, name);
		if (!d) {
			q = plot_close_data(d);
			break;
		}
		for (size_t k = 0; k < PROBE_SLA_SCALES; k++) {
			fprintf(d, "%g ", probe_sla_scales[k]);
			plot_num(d, c[s].scaled_attainment[k] * 100);
			fputc('\n', d);
			scaled_lo = MIN(scaled_lo, c[s].scaled_attainment[k] * 100);
			scaled_hi = MAX(scaled_hi, c[s].scaled_attainment[k] * 100);
		}
		q = plot_close_data(d);
	}
	if (q < 0) {
		curves_done(c);
		return q;
	}
	/* each panel's attainment axis fitted to its attainments and the
	 * target, within 0..100 % and a little room */
	if (isfinite(target)) {
		att_lo = MIN(att_lo, target);
		att_hi = MAX(att_hi, target);
		scaled_lo = MIN(scaled_lo, target);
		scaled_hi = MAX(scaled_hi, target);
	}
	plot_fit_range(att_lo, att_hi, false, &att_lo, &att_hi);
	plot_fit_range(scaled_lo, scaled_hi, false, &scaled_lo, &scaled_hi);
	att_lo = MAX(att_lo, -2), att_hi = MIN(att_hi, 102);
	scaled_lo = MAX(scaled_lo, -2), scaled_hi = MIN(scaled_hi, 102);
	plot_fit_range(x0, x1, false, &x0, &x1);

	plot_header(f, REPORT_PLOT_SHAPES, 500);
	fprintf(f, "set multiplot layout 1,%d margins 0.06,0.97,0.30,0.86 spacing 0.08,0 title ", scaled ? 2 : 1);
	plot_quote(f, "SLO attainment of each shape's best configuration (DistServe's figure)");
	fprintf(f,
		"\nset key at graph 0.5, graph -0.2 center top vertical Left reverse samplen 2\n"
		"set ylabel 'SLO attainment (%%)'\nset yrange [%.9g:%.9g]\n",
		att_lo, att_hi);
	/* attainment against the rate per GPU */
	fprintf(f,
		"set title 'Attainment against request rate per GPU'\nset xlabel 'request rate per GPU (req/s)'\n"
		"set xrange [%.9g:%.9g]\nplot ",
		MAX(x0, 0), x1);
	for (size_t s = 0; s < _SHAPE_MAX; s++) {
		char title[100];

		/* the configurations themselves are in the section's text: a key this wide would not fit */
		snprintf(title, sizeof(title), "best %s (%u GPU%s)", c[s].shape, c[s].first->gpus,
			 c[s].first->gpus == 1 ? "" : "s");
		fprintf(f, "%s'shape-%zu.dat' using 1:2 with linespoints pt %d ps 0.8 lw 2 lc rgb '%s' title ",
			s ? ", " : "", s, s ? 6 : 7, shape_color(&c[s]));
		plot_quote(f, title);
	}
	target_line(f, target);
	plot_axes(f, "Attainment against rate", 0, isfinite(target) ? &target : NULL, isfinite(target), NULL, 0);
	/* attainment against the SLA's scale, at each shape's max-goodput point */
	if (scaled) {
		fprintf(f, "set yrange [%.9g:%.9g]\n", scaled_lo, scaled_hi);
		fputs("set title 'Attainment against the SLA scaled (each at its max-goodput rate)'\n"
		      "set xlabel 'SLA scale (every per-request bound multiplied by it; 1: the study''s SLA)'\n"
		      "set xrange [0.45:2.05]\nset arrow 1 from 1, graph 0 to 1, graph 1 nohead dt 3 lw 2 lc rgb "
		      "'#2ca02c'\nplot ",
		      f);
		for (size_t s = 0, n = 0; s < _SHAPE_MAX; s++) {
			char title[200];

			if (!c[s].scaled)
				continue;
			snprintf(title, sizeof(title), "%s at %.3g req/s per GPU", c[s].shape,
				 c[s].best->request_rate / c[s].first->gpus);
			fprintf(f,
				"%s'shape-scaled-%zu.dat' using 1:2 with linespoints pt %d ps 0.8 lw 2 lc rgb '%s' "
				"title ",
				n++ ? ", " : "", s, s ? 6 : 7, shape_color(&c[s]));
			plot_quote(f, title);
		}
		target_line(f, target);
		plot_axes(f, "Attainment against SLA scale", 0, isfinite(target) ? &target : NULL, isfinite(target),
			  NULL, 0);
	}
	fputs("unset multiplot\n", f);
	curves_done(c);
	return 1;
}

/* The smallest SLA scale at which a curve meets the target; NAN: none within 2. */
static double tightest(const struct shape_curve *c, double target)
{
	for (size_t k = 0; k < PROBE_SLA_SCALES; k++)
		if (c->scaled_attainment[k] >= target - 1e-12)
			return probe_sla_scales[k];
	return NAN;
}

void report_shape_section(struct report_doc *d, const struct report *r)
{
	struct shape_curve c[_SHAPE_MAX];
	const char *why = NULL;
	char text[1400];
	double target;
	int q;

	if (!r->shape.present)
		return;
	report_doc_heading(d, 2, "shape", "Serving shape: aggregated or disaggregated");
	report_shape_text(&r->shape, text, sizeof(text));
	report_doc_para(d,
			"The study searched both serving shapes: one server with prefill and decode on the same "
			"GPUs, or prefill and decode workers behind the engine's router. %s.",
			text);
	q = curves_of(r, c, &why);
	if (q > 0) {
		report_doc_para(
			d, "As DistServe plots it: the share of requests meeting the SLA for each shape's best "
			   "configuration, against the request rate per GPU (every load point measured of it), and "
			   "against the SLA made tighter or looser (every per-request bound multiplied by 0.5 to 2, "
			   "counted from the requests of its max-goodput load point).");
		target = r->parsed ? r->parsed->sla.attainment : NAN;
		for (size_t s = 0; s < _SHAPE_MAX && isfinite(target); s++) {
			double t = c[s].scaled ? tightest(&c[s], target) : NAN;

			if (!c[s].scaled)
				report_doc_note(d, "missing",
						"The %s configuration's load points hold no attainment under a scaled "
						"SLA (measured before goodput counted it).",
						c[s].shape);
			else if (isfinite(t))
				report_doc_para(
					d,
					"At its max-goodput rate (%.3g req/s per GPU) the best %s configuration "
					"meets the attainment target down to the SLA scaled by %.1f.",
					c[s].best->request_rate / c[s].first->gpus, c[s].shape, t);
			else
				report_doc_para(
					d,
					"At its max-goodput rate (%.3g req/s per GPU) the best %s configuration "
					"misses the attainment target even with the SLA doubled.",
					c[s].best->request_rate / c[s].first->gpus, c[s].shape);
		}
	}
	curves_done(c);
	if (q < 0)
		return;
	report_doc_plot(d, REPORT_PLOT_SHAPES);
}
