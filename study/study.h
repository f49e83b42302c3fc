/* study.h — the study spec: what a tuning study searches, under which SLA,
 * on which hardware, with which budget.
 *
 * A spec is one JSON object with snake_case keys (configs/studies/ has
 * examples). Every key is declared once, in the table of study-schema.c,
 * with its type, range, default and a line of documentation; the parser
 * (common/json-dispatch.h), the unknown-key check, the reference text
 * (study_schema_print, shown by `goodput tune --help-spec`) and the JSON
 * Schema (study_schema_json) all read that table. Unknown keys and
 * out-of-range values are errors that name the key path
 * ("workload.input_len: expected an integer in [1, 1048576], got 0").
 *
 * Top-level keys: name, engine, model {name, checkpoints}, quantizations,
 * quality_check, gpu {type, count, devices, price_per_gpu_hour}, search_space,
 * constraints, workload {...}, sla {...}, scenario, cost_tokens, budget
 * {max_trials, max_wall_time, parallel}, probe {...}, deploy {...}, search {seed,
 * algorithm, strategy, extend_edges, preflight}, baseline, sweep, window, label. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cost.h"
#include "error.h"
#include "metrics.h"
#include "space.h"
#include "workload.h"

/* Canonical quantizations (DESIGN.md). */
enum study_quant {
	STUDY_QUANT_NONE,
	STUDY_QUANT_FP8,
	STUDY_QUANT_INT8,
	STUDY_QUANT_AWQ,
	_STUDY_QUANT_MAX,
};

const char *study_quant_to_string(enum study_quant q);
/* -EINVAL for an unknown name. */
int study_quant_from_string(const char *s);

enum study_deploy_method {
	STUDY_DEPLOY_EXEC,    /* a child process of goodput (deploy-exec.c) */
	STUDY_DEPLOY_SYSTEMD, /* a transient systemd unit (deploy-systemd.c) */
	STUDY_DEPLOY_COMMAND, /* operator hooks: deploy/teardown/health commands (deploy-command.c) */
	STUDY_DEPLOY_SLURM,   /* each trial a job on a Slurm cluster (deploy-slurm.c) */
};

/* How a configuration serves: one server, or prefill and decode workers behind a router. */
enum study_shape {
	STUDY_SHAPE_AGGREGATED,
	STUDY_SHAPE_DISAGGREGATED,
	STUDY_SHAPE_BOTH, /* the search's "shape" knob chooses */
};

#define STUDY_NAME_MAX       128
#define STUDY_GPUS_MAX       64 /* GPUs a study may use, and the largest index + 1 */
#define STUDY_SPEC_MAX_BYTES (1024 * 1024)

struct study {
	cJSON *json; /* the spec as parsed (owned); every const char * below points into it */

	const char *name;   /* [A-Za-z0-9_.-], at most STUDY_NAME_MAX */
	const char *engine; /* engine profile name */
	/* the engine's program instead of the profile's argv[0] (a path, or a
	 * name looked up in PATH); NULL: the profile's */
	const char *engine_binary;
	/* arguments appended verbatim after the profile's flags (argv,
	 * NULL-terminated; array owned, strings in json); NULL: none */
	const char **engine_args;
	const char *label; /* free text for "best for this workload"; may be NULL */

	struct {
		const char *name;                          /* served model name / checkpoint for "none" */
		const char *checkpoints[_STUDY_QUANT_MAX]; /* NULL where none given */
		const cJSON *architecture;                 /* config.json-style facts (into json); NULL: none */
		uint32_t max_model_len;                    /* fixed for every server; 0: the engine's */
		/* speculative decoding's drafters, by the spec_method knob's value (NULL: none given) */
		const char *draft_model, *eagle, *mtp;
		bool max_model_len_from_workload; /* max_model_len was "workload" (it holds the result) */
	} model;

	unsigned quantizations;     /* allowed: bit 1 << enum study_quant */
	const char **quality_check; /* argv, NULL-terminated (array owned, strings in json); NULL = none */

	struct {
		const char *type;  /* "H100", "A100-80GB", ... (free text; the sim uses it as a preset) */
		uint32_t count;    /* GPUs the study may use (= n_devices; slurm: of the cluster, at once) */
		uint32_t per_node; /* GPUs of one node: a server's GPUs are on one node (default: count) */
		unsigned devices[STUDY_GPUS_MAX]; /* their indices on the host (default 0..count−1), distinct */
		unsigned n_devices;
		/* $, > 0; a CPU host: what one server costs an hour
		 * (price_per_core_hour × cores), so that every cost reads it alike */
		double price_per_gpu_hour;
		double memory_gib; /* one GPU's memory; 0: the preset's */
		/* gpu.type "cpu": a CPU host, one server at a time on `cores`
		 * cores priced per core-hour (count, devices and per_node are 1) */
		bool cpu;
		uint32_t cores;
		double price_per_core_hour;
	} gpu;

	const cJSON *search_space, *constraints; /* into json (constraints may be NULL) */
	struct opt_space *space;                 /* parsed search space (owned) */

	struct probe_workload_config workload; /* dataset_path, samples_path point into json */
	const cJSON *workload_captured;        /* workload.captured (into json): what a capture measured; or NULL */
	const cJSON *workload_spec_acceptance; /* workload.spec_acceptance (into json, checked); or NULL */
	double percentiles[PROBE_MAX_PERCENTILES];
	size_t n_percentiles;
	struct probe_sla sla; /* empty for offline studies */

	enum opt_scenario scenario;
	enum opt_cost_tokens cost_tokens;

	struct {
		uint32_t max_trials;
		uint64_t max_wall_time_usec; /* USEC_INFINITY: none */
		uint32_t parallel;           /* trials in flight at most; 0 = "auto" (as many as the GPUs allow) */
		/* with a wall-time budget: no trial takes more than
		 * max_wall_time ÷ this (the configurations the study should
		 * at least compare) */
		uint32_t min_configurations;
	} budget;

	struct {
		double tolerance;              /* relative resolution of the rate search */
		double min_rate, max_rate;     /* requests/s bounds of the rate search (max 0: from saturation) */
		uint32_t max_steps;            /* load points per trial at most */
		uint64_t request_timeout_usec; /* per request */
		uint32_t max_requests;         /* of one load point of the search; 0: 4 × workload.num_prompts */
		double confidence;             /* of each load point's verdict; 0: the probe's (0.95) */
		uint64_t max_point_usec;       /* a load point of the search at most; 0: sized to the budget */
	} probe;

	struct {
		enum study_deploy_method method;
		const char *host;              /* where the server listens (exec: 127.0.0.1) */
		uint64_t startup_timeout_usec; /* 0: the engine profile's default */
		uint64_t stop_timeout_usec;    /* SIGTERM → SIGKILL grace */
		bool user_bus;                 /* systemd: the user's service manager instead of the system's */
		/* command: argv arrays (NULL-terminated, arrays owned, strings in json); health may be NULL */
		const char **deploy_command, **teardown_command, **health_command;
		uint64_t command_timeout_usec; /* teardown and health commands */
		/* slurm: where jobs go and how long they may run (NULL / 0: the cluster's defaults),
		 * sbatch options of the operator's own (NULL-terminated, array owned), and how
		 * often the queue is read */
		const char *partition, *account;
		uint64_t time_limit_usec;
		const char **extra_args;
		uint64_t poll_interval_usec;
		bool host_given; /* deploy.host was in the spec (slurm servers listen on 0.0.0.0 otherwise) */
		enum study_shape shape;
		const char *router_binary; /* disaggregated: the router's program; NULL: the profile's */
	} deploy;

	struct {
		uint64_t seed;
		const char *algorithm; /* NLopt algorithm name, e.g. "LN_SBPLX" */
		const char *strategy;  /* outer strategy for categorical knobs; NULL = the optimizer's default */
		bool extend_edges;     /* widen a range whose bound holds the best (runner) */
		bool preflight;        /* skip configurations the memory estimate rules out (runner) */
	} search;

	bool baseline; /* measure the engine's default configuration first */
	bool sweep;    /* after the answer: one deployment of it measures a load-step sweep (online studies) */

	struct {
		bool set;
		unsigned start_min, end_min; /* minutes after midnight, local time; end < start wraps */
	} window;
};

struct study_options {
	/* Knob names the engine profile adds (NULL-terminated; may be NULL). */
	const char *const *extra_knobs;
};

/* Validates a spec and builds the study. j is copied (the caller keeps its
 * own). Errors name the key path. The caller frees *ret with study_free. */
int study_from_json(const cJSON *j, const struct study_options *opts, struct study **ret, struct error *err);
/* Reads, parses and validates a spec file (at most STUDY_SPEC_MAX_BYTES). */
int study_load_file(const char *path, const struct study_options *opts, struct study **ret, struct error *err);

struct study *study_free(struct study *s);
static inline void study_freep(struct study **s)
{
	if (*s)
		*s = study_free(*s);
}

/* The spec as compact JSON (for the store). The caller frees with free(). */
char *study_to_string(const struct study *s);

/* How long a load point of the search may take, µs: probe.max_point_seconds,
 * else a sixth of a trial's share of the wall-time budget (share_usec: the
 * budget ÷ budget.min_configurations; 0 without one) within [30 s, 10 min],
 * else 10 min. */
uint64_t study_point_cap_usec(const struct study *s, uint64_t share_usec);

/* The model name the server is started with for a quantization: the
 * checkpoint when the spec names one, else model.name. */
const char *study_checkpoint(const struct study *s, enum study_quant q);

/* The drafter a speculative method loads (model.drafts: a draft model, an
 * EAGLE head, an MTP module), NULL when the study names none (ngram needs
 * none). */
const char *study_draft_model(const struct study *s, const char *method);
/* The workload's acceptance of a method's drafts as goodput-sim's
 * --spec-acceptance reads it ("0.7", or per-position rates "0.8,0.6,0.45"):
 * workload.spec_acceptance, or its entry for method. False when the study
 * does not say (the method's default applies). */
bool study_spec_acceptance_text(const struct study *s, const char *method, char *buf, size_t size);

/* Whether realtime_usec (CLOCK_REALTIME) lies inside the study's window
 * (always true without one), using local time. */
bool study_in_window(const struct study *s, uint64_t realtime_usec);

/* A search phase: a range widened when the search ended with its best on
 * its bound (search.extend_edges), recorded with the study so that a resumed
 * study and every report see the same space. */
struct study_phase {
	size_t trials;                /* trials made before it began */
	char knob[OPT_KNOB_NAME_MAX]; /* the range widened */
	int64_t min, max;             /* its new bounds */
	bool upper;                   /* widened at the top (else the bottom) */
	double best_cost;             /* the best's cost when it began ($/Mtok; 0: unknown) */
};

#define STUDY_PHASES_MAX 32

/* Reads the phases recorded with a study (a JSON array, NULL or "" for
 * none); errors name the entry. */
int study_phases_parse(const char *json, struct study_phase *ret, size_t max, size_t *ret_n, struct error *err);
/* The phases as a JSON array (the caller frees the text). */
char *study_phases_format(const struct study_phase *p, size_t n);
/* Applies the phases to the study's search space (ranges widened, the space
 * parsed again with the same options). */
int study_apply_phases(struct study *s, const struct study_phase *p, size_t n, const struct study_options *opts,
		       struct error *err);

/* The best configuration on a bound of an integer range (study-edge.c). */
struct study_edge {
	bool found;                   /* the best is on a bound of a range knob */
	char knob[OPT_KNOB_NAME_MAX]; /* the first such knob, in the space's order */
	bool upper;                   /* on the range's largest value (else its smallest) */
	double value, min, max;       /* the best's value and the range */
	bool have_evidence;           /* a load point at the best's max rate was given */
	double sla_ratio;             /* the worst latency/bound ratio at `at` (0: no evidence, or offline) */
	bool sla_binding;             /* an SLA bound is within 20 % of its limit there (ratio >= 0.8) */
	bool widen;        /* a wider range may be cheaper: up where the SLA does not bind, down where it does */
	char limiter[512]; /* what limits goodput there, with the figures */
};

/* Whether best (a configuration of space, the study's or a widened one) is
 * on a range bound, with the evidence of `at`, the load point at its max
 * rate (NULL: none). Always 0. */
int study_find_edge(const struct study *s, const struct opt_space *space, const struct opt_config *best,
		    const struct probe_result *at, struct study_edge *ret);
/* Sets the judgement of a found edge from the worst latency/bound ratio at
 * the best's max rate: what study_find_edge does with its load point. */
void study_edge_decide(struct study_edge *e, double sla_ratio);
/* Whether widening at this edge is worth a phase: it may be cheaper (widen)
 * and, when the same end of the same range was widened before, that phase
 * paid off (the best is now at least 2 % cheaper than when it began; a
 * plateau keeps its best on the bound by chance). */
bool study_edge_worth_widening(const struct study_edge *e, const struct study_phase *phases, size_t n,
			       double best_cost);
/* Whether the engine model predicts a gain from widening: its prediction
 * beyond the bound (predicted) more than 1 % below its own prediction at
 * the bound (at_bound), each the best along the other batch knob. Against
 * the model's own figure, the model's bias and the noise of the best's
 * measurements (a few percent a deployment, against a 1 % threshold)
 * cancel: a best measured low by chance does not hide a gain. Without a
 * prediction at the bound (not finite), against the measured cost. */
bool study_edge_model_gain(double predicted, double at_bound, double measured);
/* "max_num_seqs=128 is the top of its range (8–128); what limits goodput
 * there: ..." for people. */
void study_edge_format(const struct study_edge *e, char *buf, size_t size);

/* Appends one knob as people read it, after a space when *len > 0: the
 * quantization alone ("fp8"; "bf16" for none), "tp=N", else "name=value".
 * False (buf holding what fit) when it does not fit. */
bool study_knob_append(char *buf, size_t size, size_t *len, const char *name, const char *val);
/* "max_num_seqs=128 max_num_batched_tokens=2048 fp8 tp=1": the knobs of c
 * that have a choice (with categorical_only, only the quantization, TP and
 * other categorical ones: "fp8 tp=4"). */
void study_knobs_text(const struct opt_space *space, const struct opt_config *c, bool categorical_only, char *buf,
		      size_t size);
/* The same for a knobs object as stored ({"max_num_seqs": 256, ...,
 * "quantization": "fp8", "tensor_parallel": 4}), every knob in its order;
 * "" for NULL. */
void study_knobs_json_text(const cJSON *knobs, char *buf, size_t size);

/* The reference of every key: path, type, range/default and description. */
void study_schema_print(FILE *f);
/* The same as a JSON Schema (draft 2020-12) for editors and validators:
 * types, ranges, enums, required keys, descriptions, no unknown keys. The
 * caller owns *ret (cJSON_Delete). */
int study_schema_json(cJSON **ret);
/* The table itself, for references made elsewhere (the man page
 * goodput-study(5) is written from it at build time). */
struct json_field;
const struct json_field *study_schema_fields(void);

/* The time a study still needs, estimated: its wall clock per finished
 * trial times the trials left of max_trials (0: no trial budget), capped by
 * what is left of max_wall_time_usec (USEC_INFINITY or 0: none).
 * USEC_INFINITY when nothing bounds it. */
uint64_t study_budget_eta_usec(uint64_t elapsed_usec, unsigned finished, unsigned max_trials,
			       uint64_t max_wall_time_usec);
