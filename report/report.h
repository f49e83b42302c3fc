/* report.h — turns a study in the store into the report an engineer trusts,
 * and answers the questions the study was run for.
 *
 * A report states the scenario (engine, model, GPU, versions), the workload
 * (length distributions, regenerated from the spec and drawn as histograms),
 * the SLA and its attainment target, the search space and budget, the best
 * configuration with the exact command that launches it, its latency–
 * throughput curve, every trial, the cost landscape, the search's progress, a
 * Pareto view (tokens/s per user against tokens/s per GPU), the server's KV
 * usage where it was scraped, the spread of the re-probed best, and — when
 * goodputd watches production for the study — the traffic production
 * served beside the workload the study was tuned for (lengths, rate by
 * hour, the drift flagged).
 *
 * Outputs: a self-contained HTML page (inline SVG plots drawn by gnuplot, no
 * network fetches), a Markdown page (plots as SVG files beside it), a short
 * summary (text or JSON). Without gnuplot the report is table-only and says
 * so. Plots are made by running gnuplot as a child process with an argv (no
 * shell); its data goes through files in a private temporary folder.
 *
 * `plan` sizes a deployment for a load; `compare` sets two studies of the same
 * workload and SLA side by side (before/after a driver, engine or hardware
 * change). The store is only read. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "study.h"

struct store;
struct report;

struct report_options {
	const char *engines_dir; /* where engine profiles are looked up (launch command); NULL: the default places */
	bool no_plots;           /* table-only report */
	const char *gnuplot;     /* the program; NULL: $GOODPUT_GNUPLOT, else "gnuplot" on PATH */
};

/* Reads study `study` (its name, or its numeric id) with its trials and load
 * points from the store, parses its spec and renders the best configuration's
 * launch command. A spec or engine profile that cannot be read does not fail
 * the report (the sections that need it say why they are missing). -ENOENT
 * with err naming the study when there is no such study. opts may be NULL.
 * The caller frees *ret with report_free. */
int report_load(struct store *s, const char *study, const struct report_options *opts, struct report **ret,
		struct error *err);
struct report *report_free(struct report *r);
static inline void report_freep(struct report **r)
{
	if (*r)
		report_free(*r);
}

/* The Markdown page, without plots (tables only); the caller frees *ret. */
int report_render_markdown(struct report *r, char **ret);

/* What report_write_files wrote (owned; report_files_done frees). */
struct report_files {
	char *html_path, *markdown_path;
	size_t n_plots;  /* SVG files written beside the Markdown */
	char *plot_note; /* why plots are missing or incomplete; NULL when all were drawn */
};
void report_files_done(struct report_files *f);

/* Creates dir when missing and writes report.html (self-contained), report.md
 * and the plots as plot-*.svg (referenced by report.md). Errors name the file. */
int report_write_files(struct report *r, const char *dir, struct report_files *ret, struct error *err);

/* A few lines for the terminal: study, best configuration, cost, goodput,
 * launch command (or why there is no best). 0, or -ENOMEM. */
int report_summary_print(struct report *r, FILE *f);
/* The same as JSON: {"study", "state", "trials", "best": {...} | null, ...}. */
int report_summary_json(struct report *r, cJSON **ret);

/* ---- what a study found beside its answer (report-findings.c) ---- */

struct store_study;
struct store_study_best;
struct store_load_point;

/* Which serving shape won a study that searched both (report-shape.c), by
 * per-GPU goodput: the answer's shape, and the best of the other. */
struct report_shape_compare {
	bool present; /* the answer has a shape knob */
	char winner[16], other[16];
	double winner_cost, other_cost; /* $/Mtok, each configuration's mean */
	char winner_knobs[256], other_knobs[256];
	unsigned winner_gpus, other_gpus;
	double winner_goodput_per_gpu, other_goodput_per_gpu; /* tok/s */
	bool have_other;                                      /* some configuration of the other shape was measured */
	unsigned other_measured; /* how many of the other shape's configurations met the SLA (the search's, not all) */
	double gain;             /* other_cost / winner_cost: the winner's per-GPU goodput over the other's */
};
struct store_study_best;
/* The comparison for a study's answer (best; NULL or a best without a
 * shape: present false). */
int report_shape_compare(struct store *store, int64_t study_id, const struct store_study_best *best,
			 struct report_shape_compare *ret, struct error *err);
/* "disaggregated wins, 1.40x the goodput per GPU of the best aggregated measured (3 configurations): ..." */
void report_shape_text(const struct report_shape_compare *c, char *buf, size_t size);
/* Adds {"shape": {"winner", "cost_per_mtok", ..., "other_best", "gain"}} to o. */
int report_shape_json(const struct report_shape_compare *c, cJSON *o);

struct report_findings {
	bool have_baseline;            /* the study measured (or is measuring) the engine's defaults */
	double baseline_cost_per_mtok; /* NAN when they have no cost */
	char baseline_knobs[256];      /* "max_num_seqs=256 max_num_batched_tokens=2048 fp8 tp=4" */
	char baseline[512];            /* "$0.23/Mtok, 44 % cheaper than the engine's defaults ($0.42/Mtok: ...)" */
	bool have_edge;                /* the answer sits on a bound of a range */
	struct study_edge edge;
	char edge_text[768]; /* study_edge_format */
	/* the memory pre-flight: the combinations predicted not to fit at any
	 * batch size, never deployed ("bf16 tp=1", "bf16 tp=2", "fp8 tp=1"),
	 * each whole however many there are */
	char **predicted_infeasible;
	size_t n_predicted_infeasible;
	char max_model_len[200]; /* "max_model_len fixed at 1024 for the workload (...)"; "" when the engine's */
};

/* The levers beyond batch and TP in the answer (report-levers.c): its
 * speculation (method, k, the acceptance the server counted) or why none
 * won, speculation on and off over the load steps both were measured at
 * and the rate from which it stops paying, the prefix cache's hit rate,
 * the replicas' layout. Read from what was measured. */
struct report_levers_trial {
	const struct store_trial *t;
	const cJSON *knobs;
	const struct store_load_point *lps;
	size_t n_lps;
};

struct report_levers_step {
	double rate;                    /* requests/s of a measured load point */
	bool from_on;                   /* the point is the speculating side's (else the other's) */
	double on_tpot_ms, off_tpot_ms; /* p50 TPOT of each side at this rate (one interpolated); NAN: outside */
	bool met;                       /* the measured side met the SLA here */
	double attainment, acceptance;  /* the measured side's */
};

#define REPORT_LEVERS_STEPS_MAX 48

struct report_levers {
	bool spec_in_space;               /* the search space offers speculation */
	char method[32];                  /* the answer's spec_method ("none") */
	unsigned k;                       /* its spec_tokens (0: none) */
	double acceptance, accept_length; /* at the answer's max rate, as the server counted; NAN: unknown */
	char speculation[512];            /* the verdict, for people */
	char counterpart[96];             /* what the answer is compared with ("no speculation", "ngram k=3") */
	bool counterpart_same;            /* ... the same configuration but for speculation */
	bool have_compare;
	struct report_levers_step steps[REPORT_LEVERS_STEPS_MAX];
	size_t n_steps;
	double stops_paying_rate; /* NAN: it did not stop paying over the measured steps */
	double prefix_hit_rate;   /* at the answer's max rate; NAN: not exported */
	bool prefix_caching_known;
	char prefix_caching[32]; /* "on", "off", "the engine's default" */
	unsigned dp, tp, pp, gpus;
	char layout[256];
};

/* The levers of trials[best] among the study's measured trials (s: the
 * parsed study, for its space; may be NULL). 0. */
int report_levers_of(const struct study *s, const struct report_levers_trial *trials, size_t n, size_t best,
		     struct report_levers *ret);
/* The same from a store: the study's trials and their load points. -ENOENT without an answer. */
int report_levers_load(struct store *st, int64_t study_id, const struct study *s, struct report_levers *ret,
		       struct error *err);
/* "speculation: ...", "prefix cache: ...", "replicas: ..." lines, each line starting with indent. */
void report_levers_print(const struct report_levers *lv, const char *indent, FILE *f);
/* Adds "levers": {spec_method, spec_tokens, speculation, spec_acceptance_rate, ...} to o. */
int report_levers_json(const struct report_levers *lv, cJSON *o);

/* The findings of study row (its pre-flight) and s (parsed, its search
 * phases applied; may be NULL: no edge) from its answer b and the load point
 * at the best's max rate (may be NULL). The same words in every place the
 * answer is shown. 0, or -ENOMEM with *ret empty; report_findings_done()
 * frees what *ret holds. */
int report_findings_of(const struct store_study *row, const struct study *s, const struct store_study_best *b,
		       const struct store_load_point *at, struct report_findings *ret);
void report_findings_done(struct report_findings *f);
/* The combinations predicted not to fit, for people: "bf16 tp=1, fp8 tp=1". */
void report_findings_print_predicted(const struct report_findings *f, FILE *out);
/* Adds "baseline_cost_per_mtok" (null without), "baseline_knobs", "baseline",
 * "edge": {knob, bound: "max"|"min", value, limiter, sla_binding,
 * wider_may_be_cheaper, note} or null, "predicted_infeasible": [combination,
 * ...] and "max_model_len" (a note) to o. */
int report_findings_json(const struct report_findings *f, cJSON *o);
/* Adds the findings to an answer of `best` (the control protocol's: its
 * "study" names the study, its "best" object gets report_findings_json's
 * keys); an error answer is left alone. engines_dir as report_options'. */
int report_best_findings(struct store *s, const char *engines_dir, cJSON *resp, struct error *err);
/* Applies the search phases recorded with a study (row->phases_json) to its
 * parsed spec, so that a widened best is a configuration of its space. */
int report_study_phases(const struct store_study *row, struct study *s, const struct study_options *opts,
			struct error *err);

/* For the daemon's control socket: the Markdown of a study (tables only),
 * and the path of the written HTML (report_write_files into dir). */
int report_markdown(struct store *s, const char *study, const struct report_options *opts, char **ret_markdown,
		    struct error *err);
int report_write_html(struct store *s, const char *study, const char *dir, const struct report_options *opts,
		      char **ret_html_path, struct error *err);

/* ---- plan: replicas, GPUs and $/hour for a load ---- */

struct report_plan {
	double load;       /* requests/s or tokens/s asked for */
	bool by_tokens;    /* load is tokens/s (else requests/s) */
	double headroom;   /* fraction added on top of the load */
	double capacity;   /* what one replica serves under the SLA (same unit as load) */
	uint64_t replicas; /* ceil(load × (1 + headroom) / capacity) */
	unsigned gpus_per_replica;
	uint64_t gpus;       /* replicas × gpus_per_replica */
	uint64_t hosts;      /* hosts of the study's GPU count (0 when unknown) */
	double usd_per_hour; /* gpus × price */
	double utilisation;  /* load / (replicas × capacity) */
	double usd_per_mtok; /* at the load asked for (NAN when the token rate is unknown) */
};

/* The arithmetic of a plan. tokens_per_request converts a request rate into
 * tokens/s for the effective cost (0: unknown). gpus_per_host 0: unknown.
 * -EINVAL with err for a load or capacity that is not > 0, a negative
 * headroom or price, or a plan of more than 10^9 replicas. */
int report_plan_compute(double load, bool by_tokens, double headroom, double capacity, unsigned gpus_per_replica,
			double usd_per_gpu_hour, unsigned gpus_per_host, double tokens_per_request,
			struct report_plan *ret, struct error *err);

/* The plan for a study: its best configuration's max rate (by_tokens false)
 * or max goodput (by_tokens true) as the capacity of one replica. -ENOENT
 * with err when no configuration met the SLA. */
int report_plan_study(struct report *r, double load, bool by_tokens, double headroom, struct report_plan *ret,
		      struct error *err);
void report_plan_print(const struct report *r, const struct report_plan *p, FILE *f);
int report_plan_to_json(const struct report *r, const struct report_plan *p, cJSON **ret);

/* ---- plan over a day: replicas hour by hour for a rate profile ---- */

struct probe_rate_profile;

/* One configuration's deployment for one hour. */
struct report_plan_slot {
	uint64_t replicas, gpus;
	double usd; /* for the hour */
};

struct report_plan_hour {
	double load; /* the profile's highest rate in the hour, requests/s */
	struct report_plan_slot best, runner_up;
	bool runner_up_cheaper; /* the runner-up costs less for this hour */
};

struct report_plan_day {
	double headroom;
	double capacity, runner_up_capacity; /* requests/s one replica serves under the SLA */
	unsigned gpus_per_replica, runner_up_gpus_per_replica;
	bool have_runner_up;                       /* measured, with a max rate */
	struct report_plan_hour hours[24];         /* by hour of the day, local time as the profile gives it */
	double usd_best, usd_runner_up, usd_mixed; /* a day: the best all day, the runner-up all day,
							     * the cheaper of the two each hour */
	uint64_t peak_gpus_best;
	unsigned runner_up_hours; /* hours the runner-up is cheaper */
};

/* Sizes each hour of the day for the profile's highest rate in it with the
 * study's best configuration (store_study_best, as everywhere) and with its
 * runner-up: replicas = ceil(load × (1 + headroom) / max rate). -ENOENT when
 * nothing met the SLA. */
int report_plan_day_study(struct report *r, const struct probe_rate_profile *p, double headroom,
			  struct report_plan_day *ret, struct error *err);
void report_plan_day_print(const struct report *r, const struct report_plan_day *d, FILE *f);
int report_plan_day_to_json(const struct report *r, const struct report_plan_day *d, cJSON **ret);

/* ---- compare: the same workload and SLA measured twice ---- */

enum report_old_best {
	REPORT_OLD_BEST_NONE,         /* study A has no best configuration */
	REPORT_OLD_BEST_MEETS_SLA,    /* measured in B and met the SLA there */
	REPORT_OLD_BEST_MISSES_SLA,   /* measured in B, never met the SLA */
	REPORT_OLD_BEST_FAILED,       /* measured in B, failed or could not run */
	REPORT_OLD_BEST_NOT_MEASURED, /* B never measured it */
	REPORT_OLD_BEST_PENDING,      /* B has it, but not finished */
	_REPORT_OLD_BEST_MAX,
};

/* "none", "meets_sla", "misses_sla", "failed", "not_measured", "pending". */
const char *report_old_best_to_string(enum report_old_best v);

/* Prints (or returns as JSON) the comparison of study a (before) and b
 * (after): each one's winner, the cost change, whether the winner changed,
 * whether A's best still meets the SLA in B, and whether workload and SLA
 * are the same. ret_verdict (may be NULL) gets the old-best verdict. */
int report_compare_print(struct report *a, struct report *b, FILE *f, enum report_old_best *ret_verdict);
int report_compare_json(struct report *a, struct report *b, cJSON **ret);
