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
/* The terminal, output and common settings of plot k. */
void plot_header(FILE *f, enum report_plot_kind k, unsigned width, unsigned height);

/* A number for a data file ("NaN" when not finite). */
void plot_num(FILE *f, double v);
/* *ret = strdup(s) (why a plot is not drawn); -ENOMEM. */
int plot_why(char **ret, const char *s);
/* Closes a data file from plot_open: 0 or -errno (a NULL f: the open's error). */
int plot_close_data(FILE *f);
/* Production beside the tuned-for workload (report-production.c): lengths and rate by hour. */
int report_plot_production(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why);
/* The Gantt plot (report-plot-gantt.c): trials over wall time, one row per GPU. */
int report_plot_gantt(struct plot_ctx *c, const struct report *r, FILE *f, char **ret_why);

/* Writes the gnuplot script of plot k to f (data files through plot_open).
 * Returns 1 when there is something to draw, 0 with *ret_why (owned) when
 * not, -errno on failure. */
int report_plot_script(struct plot_ctx *c, const struct report *r, enum report_plot_kind k, FILE *f, char **ret_why);
