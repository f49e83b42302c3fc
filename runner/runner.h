/* runner.h — the study runner: one tuning study as a state machine on the
 * caller's sd-event loop. Used by `goodput tune` (foreground) and by goodputd
 * (which answers its socket while a study runs), so it never blocks.
 *
 * The room owns the study's life cycle (start, pause, resume, stop, cancel,
 * resume after a crash), its trial loop, the two planners and the two
 * evaluators, and its status. It may use deploy/ (deployments, the host),
 * optimizer/ (the search and the cost model), twin/, probes/, store/,
 * study/ and the sim core (dry runs); nothing below calls back into it.
 *
 * Inside (runner-internal.h has the files):
 *
 *   planner ─ answers "next configuration(s)" from the history, or done:
 *             the NLopt replay search (opt_next), or the twin (twin_next in a
 *             forked child, "search.strategy": "twin")
 *   trial   ─ one proposal in flight (struct runner_trial): recorded before
 *             anything runs, measured by the evaluator, its outcome committed
 *             and told to the history, its server torn down
 *   slots   ─ the study's GPUs (gpu.devices): each trial holds an aligned
 *             set of tensor_parallel of them while it runs; trials wait in
 *             the order they were asked for (the first one that does not
 *             fit holds the rest back, so a TP 8 trial is not starved by
 *             TP 1 ones), up to budget.parallel at once; a confirmation of
 *             the answer runs alone
 *   evaluator ─ turns a configuration into a measured trial: deploy + quality
 *             check + probe on a real server, or the engine model in virtual
 *             time (dry run)
 *
 * One trial:
 *
 *   planner ──► PENDING (stored; waiting for its GPUs) ──► DEPLOYING (stored with its
 *      GPUs; deploy_start, pgid stored)
 *      ──► ready ──► [QUALITY_CHECK: the study's quality_check argv, knobs in env]
 *      ──► PROBING (stored; find-max-rate, every load point stored as it ends)
 *      ──► outcome (done / infeasible / failed, cost, stored) ──► TEARDOWN
 *      ──► its GPUs free: the next waiting trial, more asked of the planner, or DONE.
 *
 * With "deploy": {"method": "slurm"} each trial is a job on a Slurm
 * cluster (runner-cluster.c): the study's gpu.count are the cluster's GPUs
 * it may hold at once (at most the partition's), the slots count them and
 * Slurm places the jobs; a trial is QUEUED while its job waits for its
 * resources (wall time, not a deployment), a job the cluster takes away
 * (preempted, its node failed, cancelled by someone else) is redone, and a
 * resumed study first cancels every job of its own still in the queue.
 *
 * Several trials run at once on disjoint GPU sets (budget.parallel): the
 * planner is asked for as many configurations as could start, with the
 * trials in flight as pending; each trial gets its GPUs through the engine
 * profile's gpu_env, its own port, log and probe. A server that finds its
 * GPUs held by another process ("GPU n busy") is not an outcome: the trial
 * waits and is tried again. After a crash the trials that were waiting or
 * running are started again first, in the same order, so the study asks
 * the same candidates as it would have. A dry run keeps the same schedule
 * on a virtual clock (start-up times charged, runner_options).
 *
 * Every state change is committed to the store before it is acted on. On
 * start the runner calls store_study_resume (trials left deploying/probing
 * become interrupted and are redone) and kills orphaned servers by their
 * recorded process group. With dry_run the deploy and probe steps are
 * replaced by the sim core in virtual time (sim_find_max_rate), the trials
 * being stored as usual with kinds "dry-run", "dry-run-retry-N" and
 * "dry-run-confirm-N" (instead of "search", "search-retry-N", "confirm-N";
 * the search's own re-probes are "search-confirm-N") and host_json
 * {"dry_run":true}. A budget of wall time is checked before a trial starts
 * (on the virtual clock in a dry run): trials in flight run to their end. The status's best is the
 * study's answer as the store gives it (store_study_best): the same figure
 * `goodput report` and goodputd show.
 *
 * Ownership: the runner borrows the loop and the store (both must outlive
 * it) and reads the study spec from the store's studies row (spec_json). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "error.h"
#include "macro.h"

struct store;
struct runner;
struct probe_result;

enum runner_phase {
	RUNNER_IDLE,          /* created, not started */
	RUNNER_PLANNING,      /* asking the optimizer (momentary) */
	RUNNER_DEPLOYING,     /* starting the server, waiting for health */
	RUNNER_QUALITY_CHECK, /* the operator's quality check runs */
	RUNNER_PROBING,       /* load generator running */
	RUNNER_TEARDOWN,      /* stopping the server of the finished trial */
	RUNNER_PAUSING,       /* pause asked: tearing down, trial marked interrupted */
	RUNNER_PAUSED,        /* nothing runs; runner_resume continues */
	RUNNER_STOPPING,      /* stop/cancel asked: tearing down */
	RUNNER_FINISHED,      /* final: see runner_status.final_state */
	RUNNER_WAITING,       /* a trial: recorded, waiting for its GPUs, the probe's capacity or a busy GPU */
	RUNNER_QUEUED,        /* a trial: its job submitted to the cluster, waiting for its resources */
	_RUNNER_PHASE_MAX,
};

/* "idle", "planning", "deploying", "quality-check", "probing", "teardown",
 * "pausing", "paused", "stopping", "finished", "waiting", "queued". */
const char *runner_phase_to_string(enum runner_phase p);

/* How a runner ended. */
enum runner_end {
	RUNNER_END_NONE,      /* still running */
	RUNNER_END_DONE,      /* the search finished (study state done) */
	RUNNER_END_STOPPED,   /* runner_stop: study left resumable (state running; trial interrupted) */
	RUNNER_END_CANCELLED, /* runner_cancel: study state cancelled */
	RUNNER_END_FAILED,    /* an error the runner cannot go on after (store error, ...); see message */
	/* The disk of the store or of the logs is full: the runner stopped, its
	 * servers ended, the trials in flight left to be redone and the study
	 * as it was (resumable): run it again once there is space (see message). */
	RUNNER_END_DISK_FULL,
};

const char *runner_end_to_string(enum runner_end e);

struct runner_options {
	const char *engines_dir; /* NULL: engine_profile_find's default places */
	const char *log_dir;     /* per-trial server logs; NULL: "." (created when missing) */
	bool dry_run;            /* virtual time (sim core) instead of deploy + probe */
	/* Overrides of the study's budget (0 = the study's). */
	uint32_t max_trials;
	uint64_t max_wall_time_usec;
	int confirm_probes; /* optimizer re-probes of best and runner-up; 0 = none; < 0 = the default (1) */
	unsigned parallel;  /* trials in flight at most; 0 = the study's budget.parallel */
	/* A dry run charges each trial its server's modelled start-up (weights
	 * read, initialisation, graph capture: runner-dryrun.h): 1 yes, 0 no,
	 * −1 (the default) yes unless the engine is goodput-sim, whose servers
	 * start in a fraction of a second unless told to model it. */
	int startup_model;
	/* What the probes in flight may take together (tokens/s the probe's one
	 * loop serves; 0 = RUNNER_PROBE_CAPACITY_TPS): a trial that would push
	 * the expected load past it waits. */
	double probe_capacity_tps;
};

/* The probe's capacity: ~10 µs of CPU per streamed token on its one loop
 * (its benchmark measures 7–9 µs for tokens arriving one per event), so
 * about 100k tokens/s; trials are held back above 70 % of it. */
#define RUNNER_PROBE_CAPACITY_TPS 100000.0

/* Zeroes o, with confirm_probes (−1) and startup_model (−1) at their defaults. */
void runner_options_init(struct runner_options *o);

struct runner_status {
	enum runner_phase phase;
	enum runner_end end; /* RUNNER_END_NONE until FINISHED */
	int64_t study_id;
	const char *study_name; /* valid while the runner lives */
	unsigned trial;         /* k: trials started so far in this study (1-based; 0 before the first) */
	unsigned max_trials;    /* n: the budget (0 = no limit) */
	int64_t trial_id;       /* store id of the current trial (0 none) */
	bool confirming;        /* current trial is a confirmation re-probe */
	char knobs[256];        /* current trial "max_num_seqs=128 max_num_batched_tokens=2048 fp8 tp=1" */
	unsigned load_points;   /* load points finished in the current trial */
	double current_rate;    /* request rate being probed (0 none) */
	/* the study's answer so far, as store_study_best gives it */
	bool have_best;
	double best_cost_per_mtok; /* the mean of its measurements ($/Mtok) */
	unsigned best_n;           /* ... over this many */
	double best_spread;        /* (max − min) / mean */
	double best_max_goodput;   /* tokens/s of its first measurement */
	int64_t best_trial_id;     /* its first measurement */
	char best_knobs[256];
	const char *message; /* why FAILED / last error, or NULL; valid until the next event */
	char twin[128];      /* the twin strategy's state ("twin refine, warm, fit error 3.1%"); "" otherwise */
	/* trials side by side */
	unsigned in_flight;                   /* recorded, not finished: running or waiting */
	unsigned by_phase[_RUNNER_PHASE_MAX]; /* ... by their phase */
	unsigned first_seq, last_seq;         /* the lowest and highest trial number in flight */
	unsigned gpus_busy, gpus_total;       /* GPUs held by trials in flight, of the study's */
	uint64_t clock_usec; /* the study's wall clock since its first trial started (virtual in a dry run) */
	uint64_t eta_usec; /* the time the budget has left, estimated (study_budget_eta_usec); USEC_INFINITY: unknown */
};

/* One trial in flight, for status lists (goodputd's `status`, progress lines). */
struct runner_trial_status {
	int64_t trial_id;
	unsigned seq; /* its number in the study */
	bool confirming;
	bool sweep;              /* the load-step sweep of the answer */
	enum runner_phase phase; /* WAITING, DEPLOYING, QUALITY_CHECK, PROBING or TEARDOWN */
	char gpus[64];           /* "0,1" (host indices; on a cluster "NODE:0,1"); "" while waiting */
	char knobs[256];
	unsigned load_points;
	double current_rate;   /* 0 none */
	double deploy_seconds; /* start to ready (NAN: not yet) */
	/* on a cluster: its job (0: none yet), how long it waited (or has been
	 * waiting, while queued; NAN: not at all) and why it waits */
	uint64_t job_id;
	double pending_seconds;
	char pending_reason[64];
};

/* "trial 7/40 probing max_num_seqs=128 ... tp=1; best $0.213/Mtok" — one line for
 * sd_notify STATUS= and progress output. */
int runner_status_format(const struct runner_status *st, char *buf, size_t size);

enum runner_event_kind {
	RUNNER_EVENT_PHASE,          /* the phase changed (status filled) */
	RUNNER_EVENT_LOAD_POINT,     /* a load point of the current trial finished (load_point set) */
	RUNNER_EVENT_POINT_PROGRESS, /* a load point of a trial is running, or just ended (point set) */
	RUNNER_EVENT_TRIAL_FINISHED, /* trial_id finished (trial_state/failure/cost set) */
	RUNNER_EVENT_FINISHED,       /* the runner reached FINISHED (end set); last event */
};

struct runner_event {
	enum runner_event_kind kind;
	const struct runner_status *status;
	/* PHASE of a trial, LOAD_POINT, TRIAL_FINISHED: the trial (NULL for the runner's own phases) */
	const struct runner_trial_status *trial;
	/* LOAD_POINT */
	const struct probe_result *load_point;
	/* POINT_PROGRESS: where the trial's probe is */
	struct {
		bool saturation;                    /* the saturation run (else the search's load point `index`) */
		bool ended;                         /* the load point just ended (its last word) */
		bool sweep;                         /* a point of the answer's load-step sweep */
		unsigned index;                     /* 1, 2, ...: the search's load points after the saturation run,
		                                     * or the sweep's */
		unsigned max;                       /* the search's load points at most (probe.max_steps: it may end
		                                     * sooner), or the sweep's points (all are run) */
		double rate;                        /* asked for, requests/s (INFINITY: all at once) */
		unsigned done, good, failed, total; /* requests so far; total: at most */
		const struct probe_result *result;  /* ended: what it measured (rate sent, verdict) */
	} point;
	/* TRIAL_FINISHED */
	int64_t trial_id;
	int trial_state;             /* enum store_trial_state */
	int failure;                 /* enum store_failure */
	const char *failure_message; /* may be NULL */
	double cost_per_mtok;        /* NAN when none */
	double max_goodput;
	double deploy_seconds; /* start to ready (NAN: never ready, or a dry run) */
	/* FINISHED */
	enum runner_end end;
};

/* Events come from the loop. The runner may be freed inside the callback of
 * RUNNER_EVENT_FINISHED (and only there, or when not started/finished). */
typedef void (*runner_event_fn)(struct runner *r, const struct runner_event *ev, void *userdata);

/* Loads the study (spec from the store), its engine profile and history.
 * -ENOENT with err when the study or the engine profile is missing; errors
 * in the stored spec name the key. Does not yet touch the study's state. */
int runner_new(sd_event *e, struct store *store, int64_t study_id, const struct runner_options *opts,
	       struct runner **ret, struct error *err);

/* Starts (or resumes) the study: marks it running, resumes interrupted
 * trials, kills orphans, and enters the trial loop. A finished study (done)
 * ends at once with RUNNER_END_DONE. */
int runner_start(struct runner *r, runner_event_fn cb, void *userdata);

/* Pause: tear down the server under test, mark the trial interrupted (redone
 * on resume), study state paused; phase PAUSED. -EALREADY when paused. */
int runner_pause(struct runner *r);
/* Continue after runner_pause (study state running). */
int runner_resume(struct runner *r);

/* Graceful stop: tear down the server, mark the running trial interrupted,
 * leave the study resumable (state running), then FINISHED with
 * RUNNER_END_STOPPED. Safe to call in any phase; -EALREADY once stopping. */
int runner_stop(struct runner *r);
/* As runner_stop, but the study ends in state cancelled (RUNNER_END_CANCELLED). */
int runner_cancel(struct runner *r);

/* Records a study in the store (state queued) from a parsed spec: the spec
 * as JSON, engine, model, label and the search's replay settings (seed,
 * algorithm, NLopt version). name overrides study->name when not NULL (a
 * dry run is stored as "NAME.dry-run"). -EEXIST (err says so) when the name
 * is taken. */
struct study;
int runner_study_insert(struct store *store, const struct study *study, const char *name, int64_t *ret_id,
			struct error *err);

/* The study as the runner searches it (its search phases applied). */
const struct study *runner_get_study(const struct runner *r);

/* A snapshot of the status; strings point into the runner. */
void runner_get_status(const struct runner *r, struct runner_status *ret);
/* The trials in flight, in trial order, into ret (at most n); returns how many there are. */
size_t runner_get_trials(const struct runner *r, struct runner_trial_status *ret, size_t n);

/* The knobs of a stored trial (its canonical_key) as the status shows them:
 * "max_num_seqs=128 max_num_batched_tokens=2048 fp8 tp=1". -EINVAL when
 * the key is not a configuration of the study's space. */
int runner_describe_config(const struct runner *r, const char *canonical_key, char *buf, size_t size);

/* The engine's defaults for what knobs_json does not set, as flags (the
 * profile's defaults for the study's GPU): "--ubatch-size 512
 * --cont-batching"; "" when the profile names none. */
int runner_format_defaults(const struct runner *r, const char *knobs_json, char *buf, size_t size);

/* The command line that runs the study's engine with knobs (a JSON object
 * such as a trial's knobs_json), on host:port, shell-quoted for people
 * (engine_command_format). The caller frees *ret. */
int runner_format_command(const struct runner *r, const char *knobs_json, const char *host, uint16_t port, char **ret,
			  struct error *err);

/* Frees the runner; a server still running is killed (deploy_free). Accepts NULL. */
struct runner *runner_free(struct runner *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct runner *, runner_free)
