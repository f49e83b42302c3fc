/* report-plot-internal.h — between the gnuplot runner (report-plot.c) and
 * the plot scripts (report-plots.c). */
#pragma once

#include <stdio.h>

#include "report-internal.h"

struct plot_ctx;

/* Creates a file in the plot's private folder (removed afterwards). */
FILE *plot_open(struct plot_ctx *c, const char *name);
/* Writes s as a gnuplot single-quoted string. */
void plot_quote(FILE *f, const char *s);
/* Every plot is drawn this wide (px) in one font size, so the page shows
 * them at one scale: text the same size in every figure. */
#define REPORT_PLOT_WIDTH 1160
#define REPORT_PLOT_FONT  13

/* The terminal, output and common settings of plot k (REPORT_PLOT_WIDTH
 * wide, height px high). */
void plot_header(FILE *f, enum report_plot_kind k, unsigned height);

/* After a plot command: gnuplot states the panel's axis ranges and the
 * range of the data it drew (its GPVAL_ figures) as one JSON line, which
 * the SVG carries in <metadata class="goodput-axes"> — what a reader (the
 * report test) checks the axes' fit by. marks_y / marks_y2 are reference
 * lines the axis must show (SLA bounds, the attainment target). panel: a
 * plain name (letters, digits, spaces). */
enum {
	PLOT_AXES_LOG_Y = 1 << 0,       /* y is on a log scale */
	PLOT_AXES_CATEGORICAL = 1 << 1, /* x and y are grid positions (a heatmap, a row per GPU): no fit to check */
};
void plot_axes(FILE *f, const char *panel, unsigned flags, const double *marks_y, size_t n_y, const double *marks_y2,
	       size_t n_y2);
/* A fitted range for data from lo to hi (a log axis: by factors):
 * margin of the span on each side, at least a little room around a single
 * value. */
void plot_fit_range(double lo, double hi, bool log, double *ret_lo, double *ret_hi);

/* A number for a data file ("NaN" when not finite). */
void plot_num(FILE *f, double v);
/* *ret = strdup(s) (why a plot is not drawn); -ENOMEM. */
int plot_why(char **ret, const char *s);
/* Closes a data file from plot_open: 0 or -errno (a NULL f: the open's error). */
int plot_close_data(FILE *f);
/* Production beside the tuned-for workload (report-production.c): lengths and rate by hour. */
int report_plot_production(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why);
/* The best configuration's curve (report-curve.c): latency, throughput and
 * goodput against the request rate; the server's state at each point. */
int report_plot_latency(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why);
int report_plot_server(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why);
/* Both serving shapes' best configurations (report-shape-plot.c): SLO
 * attainment against the rate per GPU and against the SLA scaled. */
int report_plot_shapes(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why);
/* The Gantt plot (report-plot-gantt.c): trials over wall time, one row per GPU. */
int report_plot_gantt(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why);

/* Writes the gnuplot script of plot k to f (data files through plot_open).
 * Returns 1 when there is something to draw, 0 with *ret_why (owned) when
 * not, -errno on failure. */
int report_plot_script(struct plot_ctx *c, const struct report *r, enum report_plot_kind k, FILE *f, char **ret_why);
