/* report-internal.h — what the report's files share: the loaded study, the
 * derived figures, the plot renderer and the Markdown/HTML writer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "macro.h"
#include "report.h"
#include "store.h"
#include "workload.h"

struct study;
struct engine_profile;

struct report_trial {
	struct store_trial t;
	cJSON *knobs;                 /* knobs_json parsed; NULL when unreadable */
	struct store_load_point *lps; /* in seq order */
	size_t n_lps;
	long best_lp;  /* the max-goodput load point: the SLA-meeting one at the highest rate; -1 none */
	unsigned gpus; /* GPUs the configuration holds: data_parallel × tensor_parallel × pipeline_parallel */
	bool confirm;  /* a re-probe ("confirm", "dry-run-confirm") */
	bool sweep;    /* the load-step sweep of the answer ("sweep", "dry-run-sweep"): load points, no cost */
};

/* The production traffic goodputd's watch recorded for the study
 * (report-production.c): its hours summed. */
struct report_production {
	size_t hours;     /* rows of traffic_shapes; 0: none recorded */
	char *watch;      /* the first endpoint's URL (owned) */
	size_t n_watches; /* endpoints */
	uint64_t first_usec, last_usec;
	double seconds, requests, arrivals, peak_rate, burstiness, prefix_hit_rate, max_drift;
	unsigned flagged_hours;
	struct probe_length_histogram input, output; /* summed over the hours of equal bounds; n 0: none */
	size_t skipped;                              /* hours of other bucket bounds, not summed */
	double input_mean, output_mean;
	double rate_by_hour[24];       /* mean arrival rate by local hour of the day; NAN: not seen */
	double tuned_rate_by_hour[24]; /* the study's rate profile by hour; NAN: it has none */
};

struct report {
	struct store_study study;
	cJSON *spec;          /* spec_json parsed; NULL when unreadable */
	struct study *parsed; /* validated spec; NULL when it does not parse (see spec_error) */
	char *spec_error;
	struct engine_profile *profile; /* NULL when not found (see profile_error) */
	char *profile_error;
	struct report_trial *trials;
	size_t n_trials;
	long best; /* index into trials (the best configuration's first measurement); -1 when none met the SLA */
	struct store_study_best answer; /* the study's answer (store_study_best), valid when best >= 0 */
	char *launch_command;           /* of the best; NULL with launch_error */
	char *launch_error;
	const cJSON *host; /* host JSON of the best trial, else of the last trial that has one (into a trial) */
	cJSON *host_owned;
	struct report_options opts;
	char *study_ref;
	struct report_production production;
	struct report_shape_compare shape; /* which serving shape won (present: the study searched both) */
};

struct report_doc;

/* The levers of the report's answer (report-levers.c); -ENOENT without one. */
int report_levers_from_report(const struct report *r, struct report_levers *ret);
/* The section "Speculation, prefix cache and replicas" (nothing when the study has none of them). */
void report_levers_section(struct report_doc *d, const struct report *r);

/* The section "Serving shape" with DistServe's figure (report-shape-plot.c;
 * nothing when the study searched one shape). */
void report_shape_section(struct report_doc *d, const struct report *r);

/* Loads the study's production traffic into r->production (none: hours 0). */
void report_production_load(struct report *r, struct store *s);
void report_production_done(struct report_production *p);
/* The section "Production traffic" (nothing without recorded traffic). */
void report_production_section(struct report_doc *d, const struct report *r);

/* Helpers over the loaded data (report-data.c). */
const struct report_trial *report_best(const struct report *r);
/* The study's cost: the mean of its best configuration's measurements
 * (store_study_best, as everywhere), NAN without a best. */
double report_cost(const struct report *r);
/* What the cost is over: ", the mean of 2 measurements, spread 1.6%"; ""
 * for one measurement or without a best. */
const char *report_cost_note(const struct report *r, char *buf, size_t size);
/* A knob's value as text ("128", "fp8"; "-" when absent) into buf. */
const char *report_knob_text(const struct report_trial *t, const char *knob, char *buf, size_t size);
/* A knob's numeric value, or NAN. */
double report_knob_number(const struct report_trial *t, const char *knob);
/* "max_num_seqs=64 max_num_batched_tokens=2048 fp8 tp=2" */
void report_knobs_short(const struct report_trial *t, char *buf, size_t size);
/* The max-goodput load point of a trial, or NULL. */
const struct store_load_point *report_trial_best_lp(const struct report_trial *t);
/* Whether a load point has any GPU telemetry (NVML figures); whether any
 * load point of a trial / of the whole study has. */
bool report_lp_has_gpu(const struct store_load_point *lp);
bool report_trial_has_gpu(const struct report_trial *t);
bool report_has_gpu(const struct report *r);
/* The line the report prints when no load point has GPU telemetry. */
#define REPORT_GPU_UNAVAILABLE "GPU telemetry: unavailable (no NVML on the host)"
/* Tokens/s one user sees at the trial's max-goodput point (1000 / mean TPOT), NAN when unknown. */
double report_trial_tps_per_user(const struct report_trial *t);
/* GPU price per hour from the spec, NAN when unknown; GPUs on the host, 0 when unknown. */
double report_price(const struct report *r);
unsigned report_host_gpus(const struct report *r);
/* The study's SLA as text ("ttft<=2000ms tpot<=100ms @90%"), "none" when it has none. */
void report_sla_text(const struct report *r, char *buf, size_t size);
/* The measurements of the best (same canonical key, done with a cost, as
 * store_study_best counts them): n, mean, min, max of max goodput. n <= 1
 * leaves the figures 0. */
struct report_spread {
	size_t n;
	double goodput_mean, goodput_min, goodput_max;
};
void report_best_spread(const struct report *r, struct report_spread *ret);
/* The study's workload regenerated from its spec (lengths only, measured
 * requests): its input lengths and its output lengths, each sorted
 * ascending. On failure *ret_why (owned) says why (no spec, a dataset file
 * that is gone). */
int report_workload_lengths(const struct report *r, uint32_t **ret_in, uint32_t **ret_out, size_t *ret_n,
			    char **ret_why);
/* The pct-th percentile (nearest rank) of n > 0 sorted lengths. */
uint32_t report_lengths_pct(const uint32_t *sorted, size_t n, double pct);
/* Where the wall time went (the trials' intervals on their GPUs): from the
 * first start to the last finish, the share of GPU time trials held (of the
 * GPUs any trial used), and the most trials at once. */
struct report_schedule {
	double wall_s;   /* 0 when no trial finished */
	double gpu_busy; /* 0..1 */
	unsigned most_at_once;
	unsigned gpus; /* distinct GPUs trials ran on */
};
void report_schedule(const struct report *r, struct report_schedule *ret);
/* The cost of one configuration as the study counts it: the mean of its
 * measurements (its trials done with a cost, by canonical key; the same
 * rule as store_study_best's), with their count; NAN when none. The
 * study's answer is report_cost, never this. */
double report_config_cost(const struct report *r, const char *canonical_key, unsigned *ret_n);

/* ---- the latency–throughput curve of the best (report-curve.c) ---- */

/* The load-step sweep of the study's answer (report_best's configuration),
 * done; NULL when the study did not sweep it. */
const struct report_trial *report_sweep(const struct report *r);
/* The best configuration's load points over a gradient of load: its
 * sweep's, else its rate search's (the saturation run, whose rate is
 * "all at once", left out), by rate; sweet is the sweet spot among them —
 * the highest goodput that meets the SLA — or -1. */
struct report_curve {
	const struct store_load_point **pts; /* owned array, borrowed points */
	size_t n;
	bool sweep;
	long sweet;
};
int report_curve_of(const struct report *r, struct report_curve *ret);
void report_curve_done(struct report_curve *c);
/* A request rate for people: "42.96", or "all at once" for INFINITY. */
const char *report_rate_text(char *buf, size_t size, double rate);
/* A load point's rate as asked (asked: its own, or the answer's max rate),
 * and as sent beside it when the two differ by half a percent or more (a
 * short Poisson run sends more or fewer than asked): "0.136 (0.155 sent)". */
const char *report_rate_sent_text(char *buf, size_t size, const struct store_load_point *lp, double asked);

/* Formats a double with %.*f, or "-" when NAN; returns buf. */
const char *report_fmt(char *buf, size_t size, int digits, double v);

/* ---- plots (report-plot.c) ---- */

enum report_plot_kind {
	REPORT_PLOT_WORKLOAD,   /* input/output length histograms */
	REPORT_PLOT_LATENCY,    /* TTFT/TPOT percentiles and goodput vs request rate, best config */
	REPORT_PLOT_LANDSCAPE,  /* $/Mtok heatmap over batch × chunk per quantization/TP */
	REPORT_PLOT_PROGRESS,   /* best-so-far cost vs trial and vs wall time, deploy time */
	REPORT_PLOT_PARETO,     /* tokens/s per user vs tokens/s per GPU */
	REPORT_PLOT_SERVER,     /* KV-cache usage and running requests vs request rate, best config */
	REPORT_PLOT_GANTT,      /* trials over wall time per GPU: deploying, probing, idle */
	REPORT_PLOT_PRODUCTION, /* the tuned-for lengths and rate beside production's (goodputd's watch) */
	REPORT_PLOT_SHAPES,     /* both serving shapes' attainment vs rate per GPU and vs a scaled SLA */
	_REPORT_PLOT_MAX,
};

struct report_plots {
	char *svg[_REPORT_PLOT_MAX]; /* the SVG document (XML prolog removed); NULL when not drawn */
	char *why[_REPORT_PLOT_MAX]; /* why it was not drawn; NULL when drawn */
	char *note;                  /* report-wide note (gnuplot missing ...); NULL when fine */
};

const char *report_plot_name(enum report_plot_kind k); /* "workload", "latency", ... (file plot-NAME.svg) */
/* Draws every plot it can; never fails for a missing tool (it fills note). */
int report_plots_render(const struct report *r, struct report_plots *ret);
void report_plots_done(struct report_plots *p);

/* ---- the document (report-doc.c): one text, two formats ---- */

enum report_format {
	REPORT_FORMAT_MARKDOWN,
	REPORT_FORMAT_HTML,
};

/* The writer the sections write through (report-doc-writer.c): every text
 * escaped for the format. */
struct report_doc {
	FILE *f;
	enum report_format fmt;
	const struct report_plots *plots;
	bool plot_files;
	size_t cols; /* of the open table */
};

void report_doc_esc(struct report_doc *d, const char *s);
void report_doc_heading(struct report_doc *d, int level, const char *id, const char *text);
/* A paragraph; cls (may be NULL) marks a highlighted one: "verdict", "warning", "missing". */
void report_doc_para_start(struct report_doc *d, const char *cls);
void report_doc_para_end(struct report_doc *d, const char *cls);
void report_doc_para(struct report_doc *d, const char *fmt, ...) _printf_(2, 3);
void report_doc_note(struct report_doc *d, const char *cls, const char *fmt, ...) _printf_(3, 4);
/* A table of n columns; rows of cells as strings (NULL shows as "-"); cls marks a row (HTML). */
void report_doc_table_start(struct report_doc *d, size_t n, const char *const *headers);
void report_doc_row(struct report_doc *d, const char *cls, const char *const *cells);
/* A row of a two-column table. */
void report_doc_kv(struct report_doc *d, const char *k, const char *fmt, ...) _printf_(3, 4);
void report_doc_table_end(struct report_doc *d);
void report_doc_code(struct report_doc *d, const char *text);
/* Plot k inline (HTML), as a file reference (Markdown), or why it is missing. */
void report_doc_plot(struct report_doc *d, enum report_plot_kind k);

/* Writes the report body. plots may be NULL (tables only); for Markdown,
 * plot_files says the plots exist as plot-NAME.svg beside the page. */
int report_doc_write(const struct report *r, const struct report_plots *plots, enum report_format fmt, bool plot_files,
		     FILE *f);

/* ---- what the study found (report-doc-findings.c) ---- */

/* The comparison with the engine's defaults, the edge, the memory
 * pre-flight and a fixed max_model_len, after the best configuration.
 * 0, or -ENOMEM. */
int report_doc_findings(struct report_doc *d, const struct report *r);
/* The best configuration's latency–throughput curve (report-doc-curve.c):
 * the load-step sweep and its sweet spot, the plot, the load points. */
void report_doc_curve(struct report_doc *d, const struct report *r);
/* Whether the study is still to run or running (queued, running, paused). */
bool report_is_live(const struct report *r);
/* The progress header of a live study (report-doc-live.c); nothing otherwise. */
void report_doc_live(struct report_doc *d, const struct report *r);
