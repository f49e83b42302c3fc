/* twin.h — the digital twin: goodput-sim's engine model calibrated to the
 * server under test, used to rank the whole search space in virtual time so
 * that real deployments are spent only on confirming the best candidates.
 *
 * Pieces, each usable on its own:
 *  - the twin itself (struct twin): a space, the study's setup (model, GPU,
 *    price, workload, SLA) and caches of virtual-time predictions per
 *    (profile, configuration). Pure caches: every result depends only on the
 *    arguments, never on what was asked before.
 *  - calibration (twin_calibrate): fits the efficiency constants of a
 *    sim_profile (MFU per precision, MBU for weights and KV, attention
 *    efficiency, fixed / per-sequence / per-token step overhead, TP overhead)
 *    to measured load points with NLopt (LN_SBPLX, bounded, in log space
 *    around a base profile, with a weak prior towards it), and reports the
 *    relative error per figure and overall.
 *  - the strategy (twin_next): ask/tell like opt_next — design trials, fit,
 *    rank in virtual time, probe the predicted best, refit, until the real
 *    best agrees with the twin and nothing untested is predicted to beat it by
 *    more than the twin's error; honest fallback to opt_next when the fit
 *    stays poor. Deterministic in (space, setup, settings, history, warm
 *    calibration): a restarted runner continues from its stored data.
 *  - calibrations as JSON (twin_calibration_*), keyed by engine, engine
 *    version, GPU, driver and model, for warm starts across studies. The
 *    "profile" object inside is exactly what `goodput-sim --profile-file`
 *    (server and simulate) reads; twin_calibration_write_profile writes it.
 *
 * No I/O except twin_calibration_write_profile. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cost.h"
#include "error.h"
#include "metrics.h"
#include "opt.h"
#include "perfmodel.h"
#include "space.h"
#include "workload.h"

#define TWIN_POINTS_MAX    16
#define TWIN_KEY_FIELD_MAX 64

/* ---- the study as the twin sees it ---- */

struct twin_setup {
	char model[SIM_NAME_MAX]; /* goodput-sim model preset or Hugging Face id */
	char gpu[16];             /* GPU preset name */
	unsigned gpus;            /* GPUs on the host (0 = the largest tensor_parallel) */
	char profile[16];         /* base profile preset: "vllm" (default) or "trtllm" */
	double usd_per_gpu_hour;  /* 0 = the GPU preset's price */
	enum opt_scenario scenario;
	enum opt_cost_tokens cost_tokens;
	struct probe_workload_config workload; /* synthetic lengths; dataset_path is not read */
	struct probe_sla sla;
	double rel_tol;            /* rate search of a prediction (0 = 0.03) */
	unsigned max_runs;         /* ... at most this many simulate runs (0 = 12) */
	uint32_t rank_num_prompts; /* requests per prediction run (0 = the workload's num_prompts) */
	/* The probe's rate-search tolerance: how coarsely a measured cost
	 * brackets the max rate, an error each configuration's measurement
	 * has alone (0 = rel_tol). A prediction brackets finer (runner:
	 * at most RUNNER_TWIN_PREDICT_TOL), so that its own bracket's landing
	 * does not reorder configurations the probe cannot tell apart. */
	double probe_tol;
	/* Unmodelled costs for benchmarks and tests, where a twin plays the real
	 * server (sim_engine_config's fault_step_usec / fault_step_per_seq_usec).
	 * 0 for a twin. */
	double fault_step_usec, fault_step_per_seq_usec;
	/* Speculative decoding as the study describes it (model.drafts,
	 * workload.spec_acceptance): the draft model of spec_method draft_model
	 * ("": none named) and, per method (enum sim_spec_method), the workload's
	 * acceptance as goodput-sim's --spec-acceptance reads it ("": the
	 * method's default). */
	char spec_draft_model[SIM_NAME_MAX];
	char spec_acceptance[_SIM_SPEC_MAX][128];
};

/* Defaults: llama-3.1-8b on H100, profile vllm, online, output tokens,
 * probe_workload_config_init's workload, no SLA, rel_tol 0.03, max_runs 12. */
void twin_setup_init(struct twin_setup *s);

struct twin;

/* A twin over space (borrowed: it must outlive the twin) for setup (copied).
 * Resolves the model and GPU presets (-EINVAL/-ENOENT with err naming them). */
int twin_new(const struct opt_space *space, const struct twin_setup *setup, struct twin **ret, struct error *err);
struct twin *twin_free(struct twin *t);
static inline void twin_freep(struct twin **p)
{
	if (*p)
		*p = twin_free(*p);
}

/* The base profile of the setup (the preset: the twin's uncalibrated guess). */
void twin_base_profile(const struct twin *t, struct sim_profile *ret);

/* ---- measurements ---- */

enum twin_figure {
	TWIN_FIG_TTFT_MEAN,
	TWIN_FIG_TTFT_P50,
	TWIN_FIG_TTFT_P90,
	TWIN_FIG_TTFT_P99,
	TWIN_FIG_TPOT_MEAN,
	TWIN_FIG_TPOT_P50,
	TWIN_FIG_TPOT_P90,
	TWIN_FIG_TPOT_P99,
	TWIN_FIG_THROUGHPUT, /* output tokens/s */
	_TWIN_FIG_MAX,
};
/* "mean_ttft_ms", "p50_ttft_ms", ..., "output_throughput" (the result keys). */
const char *twin_figure_name(enum twin_figure f);

/* One measured load point: the offered rate and its figures (0 = not measured). */
struct twin_point {
	double rate; /* requests/s; INFINITY for the saturated run */
	double fig[_TWIN_FIG_MAX];
	/* Which requests were sent, so the twin simulates the very same: the
	 * probe draws every load point of a trial from the workload's seed
	 * (the same lengths and arrival sequence, scaled to the point's rate)
	 * with other prompt ids per point (prompt variant = the point's number
	 * in its trial; 0 = the first, the only one with warm-up requests); a
	 * point sends as many requests as its verdict needs, a prefix of that
	 * sequence. */
	uint32_t index;       /* the point's number in its trial's probe: its prompt variant */
	uint32_t num_prompts; /* requests measured (0: the workload's) */
};

/* The figures of a load point's result and its number of requests (its
 * percentiles must include 50, 90 and 99; -EINVAL otherwise); index 0. */
int twin_point_from_result(const struct probe_result *r, struct twin_point *ret);

/* One real trial: the optimizer's view plus its load points. Plain data. */
struct twin_trial {
	struct opt_trial trial; /* config, outcome, cost ($/Mtok), confirm */
	double max_rate;        /* the max SLA rate measured (req/s); 0 = unknown */
	double predicted_cost;  /* what twin_next predicted when it asked (NAN = none): store it */
	bool alone;             /* a confirmation of the answer measured alone on the host (kind confirm-N): the
	                         * model search asks it once its search is over */
	size_t n_points;
	struct twin_point points[TWIN_POINTS_MAX];
};

struct twin_history {
	struct twin_trial *trials;
	size_t n, allocated;
};
void twin_history_init(struct twin_history *h);
void twin_history_done(struct twin_history *h);
/* Appends a copy; -EINVAL as opt_history_add, or for more than TWIN_POINTS_MAX points. */
int twin_history_add(struct twin_history *h, const struct twin_trial *t);

/* What a probe of config would measure on the model with profile p (and the
 * setup's fault costs): a rate search in virtual time; the points are the
 * saturated run, the run at the max SLA rate and one at half that rate.
 * outcome INFEASIBLE when the model refuses to start, SLA_NEVER_MET when no
 * rate met the SLA. predicted_cost is NAN. For benchmarks and tests. */
int twin_measure_sim(struct twin *t, const struct sim_profile *p, const struct opt_config *config,
		     struct twin_trial *ret, struct error *err);

/* ---- predictions ---- */

struct twin_prediction {
	enum opt_outcome outcome; /* MEASURED (cost valid), INFEASIBLE or SLA_NEVER_MET */
	double cost;              /* $/Mtok */
	double max_rate;          /* req/s */
};

/* The twin's prediction for one configuration with profile p (cached). */
int twin_predict(struct twin *t, const struct sim_profile *p, const struct opt_config *config,
		 struct twin_prediction *ret, struct error *err);

/* The prediction for config with one ordinal knob (max_num_seqs,
 * max_num_batched_tokens, max_model_len) at a value off the grid: beyond
 * a range's bound, where a widened range would go. Not cached. */
int twin_predict_beyond(struct twin *t, const struct sim_profile *p, const struct opt_config *config, const char *knob,
			double value, struct twin_prediction *ret, struct error *err);

/* The best of twin_predict_beyond along the row of the other batch knob
 * (config with knob at value, the other batch knob at each of its grid
 * values): whether widening the range can pay anywhere on it, and where
 * (*ret_config, with knob still at its value on the grid). */
int twin_predict_beyond_row(struct twin *t, const struct sim_profile *p, const struct opt_config *config,
			    const char *knob, double value, struct opt_config *ret_config, struct twin_prediction *ret,
			    struct error *err);

/* The configuration with the lowest predicted cost under p (cached;
 * configurations whose saturated throughput rules them out are not
 * rate-searched). -ENOENT when nothing is predicted to meet the SLA. */
int twin_predict_best(struct twin *t, const struct sim_profile *p, struct opt_config *ret_config,
		      struct twin_prediction *ret, struct error *err);

/* ---- calibration ---- */

struct twin_fit_options {
	unsigned maxeval;          /* NLopt evaluations per run (default 60) */
	double max_factor;         /* each constant within [base / f, base · f] (default 2) */
	double prior;              /* weight of Σ log(c / base)² (default 0.002) */
	unsigned points_per_trial; /* load points of each trial used (default 3) */
	unsigned max_trials;       /* trials used (default 6; 0 = all): the cheapest of each
	                            * (quantization, TP) class, then the cheapest others */
	unsigned restarts;         /* SBPLX restarts from the best point, maxeval each (default 2) */
};
void twin_fit_options_init(struct twin_fit_options *o);

struct twin_fit {
	struct sim_profile profile;            /* the fitted constants */
	double error;                          /* overall: exp(RMS of log(sim / measured)) − 1 */
	double error_by_figure[_TWIN_FIG_MAX]; /* the same per figure (0 when not measured) */
	double start_error;                    /* overall error of the base profile */
	unsigned n_trials, n_points, n_figures, evals;
	unsigned n_skipped; /* trials the model cannot run (refuses to start) */
	uint64_t fitted;    /* bit i: sim_profile_field(i) was fitted */
};

/* Fits the efficiency constants to every load point of the given trials
 * (each simulated at its rate with the setup's workload and seed), starting
 * from base. Deterministic. -ENODATA when no trial has a load point the model
 * can run. */
int twin_calibrate(struct twin *t, const struct twin_trial *trials, size_t n, const struct sim_profile *base,
		   const struct twin_fit_options *o, struct twin_fit *ret, struct error *err);

/* Overall and per-figure error of profile p on the trials without fitting
 * (ret->profile = *p, evals 1). */
int twin_evaluate(struct twin *t, const struct twin_trial *trials, size_t n, const struct sim_profile *p,
		  const struct twin_fit_options *o, struct twin_fit *ret, struct error *err);

/* Predicted against measured for every trial, as a JSON array: [{"config":
 * key, "measured_cost", "predicted_cost", "points": [{"rate", "figures":
 * {name: [measured, simulated]}}]}]. For reports. */
int twin_fit_report(struct twin *t, const struct twin_trial *trials, size_t n, const struct sim_profile *p, cJSON **ret,
		    struct error *err);

/* ---- calibrations across studies ---- */

struct twin_calibration {
	char engine[TWIN_KEY_FIELD_MAX]; /* engine profile name: "vllm", "sim" */
	char engine_version[TWIN_KEY_FIELD_MAX];
	char gpu[TWIN_KEY_FIELD_MAX];
	char driver[TWIN_KEY_FIELD_MAX];
	char model[SIM_NAME_MAX];
	struct sim_profile profile;
	double fit_error;  /* twin_fit.error */
	double cost_error; /* relative error of predicted vs measured cost */
	unsigned n_trials, n_points;
	uint64_t fitted;
};

/* {"engine", "engine_version", "gpu", "driver", "model", "fit_error",
 * "cost_error", "trials", "points", "fitted": [names], "profile": {...}}.
 * The caller owns *ret. */
int twin_calibration_to_json(const struct twin_calibration *c, cJSON **ret);
/* Reads it back; unknown keys and bad values are errors naming the key (at
 * JSON path `what`). */
int twin_calibration_from_json(const cJSON *j, const char *what, struct twin_calibration *ret, struct error *err);
/* The store key "engine|engine_version|gpu|driver|model" into buf. */
int twin_calibration_key(const struct twin_calibration *c, char *buf, size_t size);
/* Writes the "profile" object alone to path: `goodput-sim --profile-file PATH`. */
int twin_calibration_write_profile(const struct twin_calibration *c, const char *path, struct error *err);

/* ---- the strategy ---- */

struct twin_settings {
	struct opt_settings plain; /* seed, max_trials (budget), confirm_probes; used as is in the fallback */
	struct twin_fit_options fit;
	unsigned n_design;     /* design trials of a cold start (default 2) */
	unsigned judge_after;  /* refits after the design before the fit is judged (default 2) */
	double max_fit_error;  /* fit worse than this (and than 2.5 × min_tol, the noise) when judged ->
	                              * fallback (default 0.08) */
	double max_pred_error; /* predicted-vs-measured cost error worse than this -> fallback (0.15) */
	double min_tol;        /* the error floor: measurement noise (default 0.03) */
	double drift_factor;   /* warm start: error > max(f × stored, stored + min_tol·2) is drift (2) */
	double unfitted_error; /* the twin's error for a configuration that depends on a constant not
	                              * fitted yet (an untried precision or TP): ranked that much lower (0.10) */
	unsigned near_probes;  /* after the margin rule stops: untested configurations the twin still
	                              * ranks above the best measured one that may be probed (default 2) */
};
void twin_settings_init(struct twin_settings *s);

enum twin_phase {
	TWIN_PHASE_DESIGN,   /* informative first trials */
	TWIN_PHASE_REFINE,   /* probing the twin's predicted best */
	TWIN_PHASE_CONFIRM,  /* re-probing the answer */
	TWIN_PHASE_FALLBACK, /* the fit is poor: opt_next decides */
	TWIN_PHASE_DONE,
};
const char *twin_phase_to_string(enum twin_phase p);

struct twin_candidate {
	struct opt_candidate opt; /* ask, config, best, runner_up, evaluated, reason: as opt_next */
	enum twin_phase phase;
	double predicted_cost; /* the twin's prediction for opt.config (NAN = none): store it with the trial */
	bool fallback;         /* the fit was judged poor: the plain search runs */
	bool warm;             /* started from a stored calibration (and it still holds) */
	bool drift;            /* the stored calibration disagreed with the new measurements */
	bool calibrated;       /* fit and calibration below are valid */
	double tol;            /* the twin's measured error used for agreement */
	double pred_error;     /* predicted-vs-measured cost error of the twin's own asks (0 = none yet) */
	struct twin_fit fit;   /* the current calibration's fit */
	char message[256];     /* for people: why this ask / why done / why fallback / drift */
};

/* Ask: the next thing to measure, or done. history holds every trial of the
 * study; warm (may be NULL) a stored calibration for the same key. The answer
 * (opt.best) is always a configuration measured for real (opt_best). */
int twin_next(struct twin *t, const struct twin_settings *s, const struct twin_history *history,
	      const struct twin_calibration *warm, struct twin_candidate *ret, struct error *err);

/* The informative first trials of a cold start: at the categorical values
 * (quantization, TP, ...) of the configuration the uncalibrated twin predicts
 * best (ret[0] is that configuration), then the extremes of the ordinal knobs
 * (batch and chunk) that the model can start: both at their largest, both at
 * their smallest, then mixed corners. Up to n configurations, distinct. */
int twin_design_initial(struct twin *t, const struct sim_profile *p, size_t n, struct opt_config *ret, size_t *ret_n,
			struct error *err);

/* ---- running twin_next off the event loop ----
 *
 * twin_next costs seconds of CPU (several fits of a few hundred simulations
 * each, then a ranking); a daemon must not run it on its sd-event loop. The
 * runner forks a child per ask: the child (which inherits the twin, the
 * settings, the history and the warm calibration) calls twin_next, writes
 * twin_candidate_to_json's text to a pipe and _exit()s; the loop watches the
 * pipe (sd_event_add_io) and the child (sd_event_add_child), reads the text
 * to EOF and turns it back into the candidate with twin_candidate_from_json.
 * It is bit-exact, so the answer is the one twin_next gives in process:
 * doubles are raw "%.17g" nodes (cJSON's own printing is exact only to an
 * epsilon), which is also why a tree twin_candidate_to_json builds must be
 * printed and parsed again before twin_candidate_from_json can read it. */

/* The candidate: {"ask", "opt_phase", "reason", "phase", "config" (unless
 * done), "best", "runner_up" (when valid), "predicted_cost" (unless none),
 * flags, "tol", "pred_error", "fit" (once made), "message", ...}. */
int twin_candidate_to_json(const struct opt_space *space, const struct twin_candidate *c, cJSON **ret);
int twin_candidate_from_json(const struct opt_space *space, const cJSON *j, const char *what,
			     struct twin_candidate *ret, struct error *err);

/* The caches across a fork. A forked child that computes an ask fills its
 * own copy of the twin's caches (the predictions and lower bounds under
 * each profile, the fits, which configurations start), and they die with
 * it. twin_cache_to_json gives what this process computed itself (*ret
 * NULL when nothing), bit-exactly; the parent merges it into its twin with
 * twin_cache_merge_json, so the next child starts with everything earlier
 * asks computed and an ask that needs no new fit and no new profile costs
 * milliseconds. The caches only save time: every answer is the same with
 * them or without (a restarted daemon asks the same things). */
int twin_cache_to_json(const struct twin *t, cJSON **ret);
int twin_cache_merge_json(struct twin *t, const cJSON *j, const char *what, struct error *err);

/* The calibration to store at the end of a study (key fields from the caller). */
void twin_calibration_from_fit(const struct twin_fit *f, double cost_error, struct twin_calibration *ret);

/* ---- the model search (twin-search.c): goodput's default strategy ----
 *
 * goodput-sim's engine model as the prior (calibrated at checkpoints of the
 * history), a Gaussian process over the knobs for what it gets wrong,
 * expected improvement for each deployment (a kriging believer for several
 * at once), statistical re-probes, knowledge as recorded rules, and a stop
 * once no untested configuration is likely to beat the answer by more than
 * the measurement noise. Deterministic in (space, setup, settings, history,
 * pending): twin-search.c explains each step. */

struct twin_search_settings {
	struct opt_settings plain; /* seed, max_trials (every deployment counts), confirm_probes,
	                            * max_attempts, preflight (a NO is never deployed) */
	struct twin_fit_options fit;
	double noise;            /* prior measurement noise, log sd (0.03); refined from re-probes */
	double stop_probability; /* stop once P(an untested configuration beats the answer by more than the
	                          * noise) is below this (0.05) */
	bool edges;              /* search.extend_edges: an unconfirmed answer on the top of a range the model
	                          * predicts a gain beyond ends the search in this range (the caller widens it) */
};
void twin_search_settings_init(struct twin_search_settings *s);

/* A trial in flight: asked for, not told yet. */
struct twin_pending {
	struct opt_config config;
	bool confirm;
	bool alone; /* a confirmation of the answer, alone on the host */
};

/* Up to k configurations to measure now (ret holds k), or one DONE
 * candidate: ret[i].opt as opt_next's (ask, phase, config, best,
 * reason), predicted_cost the posterior mean ($/Mtok), message why. A
 * confirmation of the answer (phase OPT_PHASE_CONFIRM: measured alone)
 * ends the batch. One at a time (k 1, nothing in flight) it is proposed
 * with nothing in flight. Side by side (k > 1 or trials in flight) the
 * stop rule counts the trials in flight as untested; once it holds the
 * answer's confirmation is proposed at once (it waits for the trials in
 * flight) and the search is over for good: an alone confirmation in the
 * history or in flight says so, and from then on only the answer is
 * confirmed and its rivals measured again (beside each other), never a
 * new configuration. *ret_n ≥ 1 unless k is 0. */
int twin_search_ask(struct twin *t, const struct twin_search_settings *s, const struct twin_history *h,
		    const struct twin_pending *pending, size_t n_pending, size_t k, struct twin_candidate *ret,
		    size_t *ret_n, struct error *err);

/* Why a configuration was never deployed: the rule and the measurement it read. */
enum twin_rule_kind {
	TWIN_RULE_NONE,
	TWIN_RULE_MEMORY,        /* the memory pre-flight (or the model's start-up checks) */
	TWIN_RULE_OUT_OF_MEMORY, /* a trial with less ran out of memory (opt_oom_rules_out) */
	TWIN_RULE_CANNOT_BIND,   /* max_num_seqs ≥ 2 × the concurrency measured at the SLA rate */
	TWIN_RULE_STARVED,       /* max_num_seqs ≤ ¼ of it, and the model predicts it worse */
	TWIN_RULE_NEVER_MET,     /* the calibrated model predicts no rate meets the SLA */
	_TWIN_RULE_MAX,
};
const char *twin_rule_to_string(enum twin_rule_kind k);

struct twin_rule {
	struct opt_config config;
	enum twin_rule_kind kind;
	size_t trial; /* index in the history of the trial it read (SIZE_MAX: none) */
	char text[192];
};

/* The rules in force after history h, one per configuration not deployed
 * that one of them covers. The caller frees *ret. */
int twin_search_rules(struct twin *t, const struct twin_search_settings *s, const struct twin_history *h,
		      struct twin_rule **ret, size_t *ret_n, struct error *err);
