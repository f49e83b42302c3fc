/* runner-internal.h — the runner's state and the trial object, shared by
 * the runner's files. Not for other modules.
 *
 *   runner.c            life cycle, status, history, the step source
 *   runner-trial.c      the trial loop: ask the planner, record each proposed
 *                       trial, hand it to the evaluator, record its outcome,
 *                       see its server gone, go on
 *   runner-fill.c       what starts when: the waiting trials in order onto
 *                       free GPUs, the asks for more, the end of the study
 *   runner-slots.c      the study's GPUs as slots (packed by TP), and the
 *                       probe's capacity
 *   runner-host.c       glue to the host (deploy-host.h): facts recorded with
 *                       trials, GPU figures of load points, hygiene; the
 *                       wall-time budget
 *   runner-cluster.c    glue to a Slurm cluster (slurm.h): its client commands
 *                       checked, the study's orphaned jobs cancelled on start,
 *                       the partition's GPUs, jobs named, lost jobs redone
 *   runner-planner.c, runner-plan-twin.c      the planners (runner-planner.h)
 *   runner-eval-deploy.c, runner-quality.c,
 *   runner-probe.c,
 *   runner-eval-dry.c, runner-dryrun.c        the evaluators (runner-evaluator.h);
 *                       runner-probe.c runs a real trial's probe in a process of its own
 *
 * Calls run one way: the planners and evaluators know the trial and the
 * runner's state, never each other; the trial loop reaches them only
 * through their interfaces. */
#pragma once

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "deploy-host.h"
#include "deploy.h"
#include "engine-profile.h"
#include "opt.h"
#include "probe.h"
#include "runner-evaluator.h"
#include "runner-planner.h"
#include "runner-preflight.h"
#include "runner.h"
#include "slurm.h"
#include "store.h"
#include "study.h"

/* The study's baseline: the engine's default configuration (runner-baseline.c). */
struct runner_baseline {
	bool enabled;          /* chosen: the study asks for it and it is predicted to fit */
	cJSON *knobs;          /* what its trial deploys (owned) */
	char key[OPT_KEY_MAX]; /* its canonical key (the grid's when on_grid) */
	bool on_grid;          /* every knob on the grid: it enters the search's history */
	struct opt_config config;
	unsigned tp;
	char text[256]; /* "max_num_seqs=256 max_num_batched_tokens=2048 fp8 tp=4" */
	char why[160];  /* why there is none */
};

enum runner_action {
	RUNNER_ACTION_NONE,
	RUNNER_ACTION_PLAN,   /* ask the planner, start the proposed trials */
	RUNNER_ACTION_FINISH, /* end with pending_end */
};

enum runner_request {
	RUNNER_REQUEST_NONE,
	RUNNER_REQUEST_PAUSE,
	RUNNER_REQUEST_STOP,
	RUNNER_REQUEST_CANCEL,
	RUNNER_REQUEST_FAIL,   /* a failure no configuration can avoid: torn down, then FAILED (runner_fail_setup) */
	RUNNER_REQUEST_BUDGET, /* the wall-time budget ran out: stop what runs, end the study */
};

/* One trial in flight: from the planner's proposal (recorded, waiting for
 * its GPUs) to its server gone. */
struct runner_trial {
	struct runner *runner;
	struct runner_proposal proposal; /* what the planner asked for */
	int64_t id;                      /* store id */
	unsigned seq;                    /* within the study, 1-based */
	char kind[64];                   /* "search", "confirm-1", "dry-run-retry-2", ... */
	cJSON *knobs;                    /* the configuration as the store and the engine profile read it */
	char knobs_text[256];            /* "max_num_seqs=128 max_num_batched_tokens=2048 fp8 tp=1" */
	char *log_path;                  /* the server's log (NULL: no server) */
	enum runner_phase phase;         /* WAITING, DEPLOYING, QUALITY_CHECK, PROBING, TEARDOWN */
	bool open;                       /* recorded and not yet finished in the store */
	bool running;                    /* holds its GPUs: handed to the evaluator */
	double deploy_seconds;           /* start to ready (NAN: never ready, or a dry run) */
	unsigned n_points;               /* load points stored */
	double current_rate;             /* the probe's offered rate (0 none) */
	void *eval;                      /* the evaluator's state of this trial */

	unsigned tp;              /* GPUs it needs */
	uint64_t gpus;            /* positions in gpu.devices it holds (bit i) while running */
	uint64_t gpus_before;     /* the GPUs an earlier attempt was recorded with (a resumed trial) */
	char gpus_text[64];       /* "0,1" (host indices) */
	double probe_tps;         /* the load its probe is charged with (runner-slots.c) */
	uint64_t not_before_usec; /* a busy GPU: not started before this (runner clock) */
	unsigned busy_retries;
	/* a dry run: its start on the virtual clock, and one recorded by an
	 * earlier run that was interrupted (0: none) */
	uint64_t vstart_usec, vstart_before_usec;
	bool vstart_known;         /* vstart_before_usec was recorded (an interrupted dry-run trial) */
	uint64_t finished_at_usec; /* when its outcome is committed: the dry run's virtual time (0: now) */
	uint64_t started_usec;     /* when it began to run (runner clock) */
	/* on a cluster (runner-cluster.c): its job, when it was queued
	 * (runner clock), how long it waited once it ran (NAN: not yet), and
	 * how many of its jobs the cluster took away */
	uint64_t job_id;
	uint64_t queued_usec;
	double pending_seconds;
	unsigned lost;
};

struct orphan_hook;

struct runner {
	sd_event *event;
	struct store *store;
	int64_t study_id;
	struct runner_options opts;
	char *engines_dir, *log_dir;
	struct store_study row;
	struct study *study;
	struct engine_profile *profile;
	struct opt_settings settings;
	struct runner_preflight preflight;           /* the memory pre-flight (settings.preflight when usable) */
	struct runner_baseline baseline;             /* the engine's defaults, measured first */
	struct study_phase phases[STUDY_PHASES_MAX]; /* search.extend_edges' widenings (runner-edge.c) */
	size_t n_phases;

	/* the finished trials, in the order they were told: the planners'
	 * history, with each entry's store id */
	struct opt_history history;
	int64_t *trial_ids;
	unsigned *trial_seqs;
	size_t n_trial_ids;

	const struct runner_evaluator *evaluator;
	struct runner_planner *planner;
	bool plain_search;      /* the planner is the NLopt replay search (its edge phase widens ranges) */
	bool asking;            /* an answer of the planner is awaited */
	bool plan_waits_host;   /* the planner waits for the host facts */
	bool planner_done;      /* it said done while trials ran: ask again once one is told */
	char done_message[256]; /* why it said done */
	unsigned alone_added;   /* confirmations alone the runner added (runner-fill.c) */
	struct runner_trial *trials[RUNNER_ASK_MAX]; /* in flight (waiting or running), in trial order */
	size_t n_trials;

	/* the study's GPUs (runner-slots.c): positions in gpu.devices */
	unsigned n_gpus;
	unsigned parallel;      /* trials running at most */
	uint64_t gpus_busy;     /* held by running trials */
	uint64_t gpus_reserved; /* waited for by the first trial that could not start */
	bool head_waits;        /* ... which is the only one waiting */
	uint64_t gpus_blocked;  /* held by something else (a server said busy) until gpu_free_at */
	uint64_t gpu_free_at[STUDY_GPUS_MAX];
	sd_event_source *retry_timer;               /* a trial waits for a busy GPU */
	double probe_tps_by_tp[STUDY_GPUS_MAX + 1]; /* saturated tokens/s measured, by TP */

	/* the clock trials are timed by: CLOCK_MONOTONIC, or in a dry run the
	 * virtual clock (µs since the study's start, which is study_start_usec
	 * on CLOCK_REALTIME) */
	uint64_t vclock_usec;
	uint64_t study_start_usec;

	runner_event_fn cb;
	void *userdata;
	bool started;
	enum runner_request request;
	enum runner_end pending_end;
	enum runner_action action;
	sd_event_source *step_source;
	sd_event_source *wall_timer;
	uint64_t start_usec, wall_budget_usec;
	bool wall_expired;
	struct runner_status status;
	char message[ERROR_MSG_MAX];

	/* wall time: what stored trials of earlier runs took (a resumed study
	 * does not restart its clock), and the measured deploy times that the
	 * budget is charged with before a new deployment starts */
	uint64_t wall_used_before_usec;
	double deploy_sum_s;
	unsigned deploy_n;
	/* how long trials took, start to outcome (this run's and stored ones):
	 * a trial that cannot finish in what is left of the budget is not started */
	double trial_sum_s;
	unsigned trial_n;
	/* the last trial that ended with a measurement, start and duration
	 * (runner clock; a dry run's virtual one): side by side, the trials
	 * started with it are due about now (runner-fill.c, batch_due) */
	uint64_t last_measured_start_usec, last_measured_usec;
	/* a dry run's hold (batch_due) ends on the virtual clock at this time
	 * (vclock µs; 0: none): the evaluator's idle plans again then */
	uint64_t vwake_usec;

	/* a Slurm cluster (runner-cluster.c; NULL unless deploy.method is slurm
	 * and the run is real): planning waits until the study's orphaned jobs
	 * are cancelled and the partition's GPUs known */
	struct slurm_cluster *cluster;
	struct slurm_op *cluster_op;
	bool plan_waits_cluster;
	/* the command method's teardown commands for what an earlier run left
	 * (runner-orphans.c): planning waits while any runs */
	struct orphan_hook **orphan_hooks;
	size_t n_orphan_hooks;
	unsigned n_orphan_hooks_running;
	bool plan_waits_orphans;

	/* the host (runner-host.c; NULL in a dry run) */
	struct deploy_host *host;
	struct runner_trial *sampling; /* whose load point the GPUs are sampled for */
	bool sampling_shared;          /* another trial started meanwhile */
	uint64_t host_since_usec;      /* CLOCK_REALTIME start of this run */
};

/* runner.c */
void runner_emit(struct runner *r, const struct runner_event *ev);
/* The runner's clock: mono_usec(), or the virtual clock of a dry run. */
uint64_t runner_clock(const struct runner *r);
void runner_set_phase(struct runner *r, enum runner_phase p);
void runner_schedule(struct runner *r, enum runner_action a);
void runner_finish(struct runner *r, enum runner_end end);
/* A store error or another failure the study cannot go on after: ends the
 * study (FAILED) from the step source. */
void runner_fail(struct runner *r, const char *msg);
/* runner_fail for an error k: a full disk (-ENOSPC, -EDQUOT) passes, and
 * ends the runner RUNNER_END_DISK_FULL instead, the study left resumable. */
void runner_fail_errno(struct runner *r, int k, const char *msg);

/* ---- what an earlier run left (runner-orphans.c) ---- */

/* Ends every server the study's trials still have recorded; for the command
 * method starts the teardown command of each (planning waits for them). */
int runner_end_orphans(struct runner *r, struct error *err);
/* Kills the teardown commands still running; frees what they hold. */
void runner_orphans_free(struct runner *r);
/* Whether the disk of the trials' logs is full (what a server that ended
 * while writing to it may have died of). */
bool runner_logs_disk_full(const struct runner *r);
/* True once runner_fail was called: callbacks of what is still running
 * return at once (runner_finish frees it). */
bool runner_failing(const struct runner *r);
/* Nothing of a trial is left running: act on a pending pause/stop/cancel.
 * Returns true when it did (the caller must not continue). */
bool runner_settle_request(struct runner *r);
/* The status's best: the study's answer as the store gives it (store_study_best). */
int runner_update_best(struct runner *r, struct error *err);
/* Tells the history a finished trial, in its place by trial number. */
int runner_history_insert(struct runner *r, const struct opt_trial *t, int64_t trial_id, unsigned seq);
bool runner_kind_is_confirm(const char *kind);
/* A confirmation of the answer (measured alone), not a re-probe of the search's. */
bool runner_kind_is_alone(const char *kind);

/* ---- runner-memory.c ---- */

/* An engine's (deploy/) or the sim core's start-up failure cause as the
 * optimizer's; the optimizer's as the store's text (NULL: unknown) and back. */
enum opt_oom_cause runner_cause_of_engine(enum engine_failure_cause c);
enum opt_oom_cause runner_cause_of_sim(enum sim_startup_cause c);
const char *runner_cause_text(enum opt_oom_cause c);
enum opt_oom_cause runner_cause_from_text(const char *s);
/* Records the pre-flight's estimates with the study (per categorical
 * combination, at its smallest and largest batch knobs). */
int runner_preflight_record(struct runner *r, struct error *err);

/* ---- runner-edge.c ---- */

/* Applies the search phases recorded with the study to its space and the
 * search's settings (a resumed study widens as the first run did). */
int runner_phases_load(struct runner *r, struct error *err);
/* The search has ended: when its best sits on a range's bound where a wider
 * range may be cheaper (and the study extends edges), widens the range,
 * records the phase and sets the search on in it; 1 when it did. */
int runner_edge_phase(struct runner *r, struct error *err);

/* ---- runner-baseline.c ---- */

bool runner_kind_is_baseline(const char *kind);
/* One GPU's memory (GiB) as the engine's defaults depend on it: the
 * pre-flight's, else gpu.memory_gib (0: unknown). */
double runner_baseline_gpu_gib(const struct runner *r);
/* Chooses the baseline's knobs (r->baseline; enabled false with why when
 * the study asks for none or nothing is predicted to fit). */
int runner_baseline_choose(struct runner *r, struct error *err);
void runner_baseline_done(struct runner_baseline *b);
/* Queues the baseline trial first when the study has none yet. */
int runner_baseline_queue(struct runner *r, struct error *err);
/* ---- runner-trial.c: the trial loop ---- */

/* The outcome of a trial, as an evaluator decides it. */
struct trial_result {
	enum store_trial_state state;
	enum store_failure failure;
	char message[ERROR_MSG_MAX];
	double max_rate, max_goodput, concurrency, cost;
	enum opt_oom_cause cause; /* INFEASIBLE out of memory: why, as the engine said */
	uint32_t suggested_len;   /* cause KV cache: the max_model_len the engine said fits (0: not said) */
};

static inline void trial_result_init(struct trial_result *t, enum store_trial_state state, enum store_failure failure)
{
	*t = (struct trial_result){
		.state = state, .failure = failure, .max_rate = NAN, .max_goodput = NAN, .concurrency = NAN, .cost = NAN
	};
}

/* The plan step (runner-fill.c): starts the waiting trials that fit, asks
 * the planner for more when GPUs are free, finishes the study when nothing
 * is left; in a dry run with nothing else to do, moves the virtual clock
 * (the evaluator's idle). */
void runner_plan(struct runner *r);
/* Reads the trials recorded but not finished (pending, interrupted) back
 * as waiting trials, in trial order: they are redone first. */
int runner_queue_load(struct runner *r, struct error *err);
/* Takes a planner's proposals: each recorded (state pending) as a waiting trial. */
int runner_queue_add(struct runner *r, const struct runner_proposal *p, struct error *err);
/* Hands a waiting trial its GPUs and the evaluator (state deploying). */
int runner_trial_start(struct runner_trial *t, uint64_t gpus);
/* The trial's status as runner.h shows it. */
void runner_trial_status_of(const struct runner_trial *t, struct runner_trial_status *ret);
/* Recounts the status's trial figures (in flight, by phase, GPUs). */
void runner_status_count(struct runner *r);
/* A server refused the trial's GPUs as busy: it waits again (state
 * pending), its GPUs are left alone for a while; never an outcome. */
void runner_trial_host_busy(struct runner_trial *t, const char *why);
/* The planner's callback: an answer that came later, or the error that ended the ask. */
void runner_on_answer(struct runner_planner *p, int k, const struct runner_answer *a, const char *message,
		      void *userdata);
/* For evaluators: the trial's phase (the runner's status follows it). */
void runner_trial_set_phase(struct runner_trial *t, enum runner_phase p);
/* The probe offers a new rate (status). */
void runner_trial_set_rate(struct runner_trial *t, double rate);
/* Where a trial's probe is (a RUNNER_EVENT_POINT_PROGRESS); ev's point is
 * filled by the caller. */
void runner_trial_point_progress(struct runner_trial *t, struct runner_event *ev);
/* Stores a load point (gpu may be NULL) and, when announce, emits it as a
 * RUNNER_EVENT_LOAD_POINT. < 0 when the store failed (the study fails). */
int runner_trial_load_point(struct runner_trial *t, const char *phase, const struct probe_result *res,
			    const struct store_gpu_figures *gpu, bool announce);
/* Records the outcome, tells the history, tears the server down. */
void runner_trial_finish(struct runner_trial *t, const struct trial_result *res);
/* The trial's server is gone (or there was none): its record is cleared and
 * the runner goes on. */
void runner_trial_gone(struct runner_trial *t);
/* pause/stop/cancel asked: aborts what runs (trials → interrupted), tears
 * servers down, then settles the request. */
void runner_halt(struct runner *r);
/* A trial met a failure no configuration can avoid (the engine or a hook
 * cannot be run, the model path is missing, a fixed port is held by another
 * process): the study stops at once instead of spending its budget on the
 * same failure. Every trial in flight is torn down as for a stop and left
 * interrupted (redone on a resume once the cause is fixed, since it says
 * nothing of its configuration); then the study ends FAILED with msg. The
 * trial may be freed inside: the caller touches it no more. */
void runner_fail_setup(struct runner *r, const char *msg);
/* Frees every trial in flight (killing servers) and drops an ask in flight. */
void runner_release_trials(struct runner *r);
/* Frees one trial and takes it off the list (its GPUs are freed). */
void runner_trial_remove(struct runner *r, struct runner_trial *t);

/* ---- runner-slots.c ---- */

unsigned runner_slots_free(const struct runner *r);
/* Whether a confirmation alone holds one node (a cluster: Slurm studies,
 * their dry runs too) rather than the whole host; the slots a trial holds
 * (its DP × TP × PP GPUs, or a whole node for such a confirmation). */
bool runner_alone_on_node(const struct runner *r);
unsigned runner_trial_slots(const struct runner_trial *t);
/* The GPUs c holds (opt_config_gpus: DP × TP × PP), and the least any configuration needs. */
unsigned runner_config_gpus(const struct runner *r, const struct opt_config *c);
unsigned runner_min_gpus(const struct runner *r);
/* Whether trials can run side by side here (budget.parallel and the GPUs
 * allow two at once): the answer is then measured once alone at the end. */
bool runner_side_by_side(const struct runner *r);
/* A free set of n GPUs (positions) outside exclude, packed by TP; prefer is
 * taken when it is free. -EBUSY when none is. */
int runner_slots_find(const struct runner *r, unsigned n, uint64_t prefer, uint64_t exclude, uint64_t *ret);
/* The block a trial of n GPUs that cannot start waits for: the aligned one
 * with the fewest GPUs in use (it drains first). */
uint64_t runner_slots_reserve(const struct runner *r, unsigned n);
/* "0,1": the host indices of a set. */
void runner_slots_format(const struct runner *r, uint64_t set, char *buf, size_t size);
/* A recorded "0,1" back into positions (unknown indices are dropped). */
uint64_t runner_slots_parse(const struct runner *r, const char *text);
/* The position of a host index; -ENOENT when the study does not use it. */
int runner_slots_position(const struct runner *r, unsigned device);
/* The probe's capacity: a saturated throughput measured for TP tp; the
 * load a trial of TP tp is charged with; whether one more such load fits. */
void runner_probe_note(struct runner *r, unsigned tp, double saturated_tps);
double runner_probe_estimate(const struct runner *r, unsigned tp);
double runner_probe_capacity(const struct runner *r);
bool runner_probe_fits(const struct runner *r, double add_tps);

/* ---- runner-sweep.c: the load-step sweep of the answer ---- */

#define RUNNER_SWEEP_STEPS 8
/* The budget from which the search keeps a deployment for the sweep: a
 * smaller one is the search's (and its confirmations') alone. */
#define RUNNER_SWEEP_RESERVE_FROM 10

struct runner_dry_result;
bool runner_kind_is_sweep(const char *kind);
/* Keeps one deployment of max_trials out of the search's budget for the
 * sweep (a study that sweeps, a budget of RUNNER_SWEEP_RESERVE_FROM or more). */
void runner_sweep_reserve(struct runner *r);
/* The plan step once the planner is done and nothing is in flight: queues
 * the sweep when it is due and the budget has room for it; true when it did
 * (a store error fails the study). */
bool runner_sweep_queue(struct runner *r);
/* The proposal of a sweep of the configuration canonical_key (NULL: the
 * answer's, opt_best over the history, as the study records it), scaled to
 * the max rate of its first measurement: for a new sweep and for a recorded
 * one that is redone. -ENOENT when nothing met the SLA. */
int runner_sweep_proposal(struct runner *r, const char *canonical_key, struct runner_proposal *ret, struct error *err);
/* The rates of a sweep proposal into ret (RUNNER_SWEEP_STEPS of them); 0
 * for another proposal. */
size_t runner_sweep_rates(const struct runner_proposal *p, double *ret);
/* The outcome of a sweep of n_points load points, sweet its sweet spot
 * (NULL: none met the SLA): done, without a cost. */
void runner_sweep_outcome(const struct runner_trial *t, const struct probe_result *sweet, size_t n_points,
			  struct trial_result *ret);
/* A real sweep: its probe runs the rates in turn (runner-eval-deploy.c). */
void runner_sweep_probe_config(const struct runner_trial *t, struct probe_config *pc);
/* A dry run's sweep: its load points stored, its outcome into ret; < 0
 * when the store failed. */
int runner_sweep_store_dry(struct runner_trial *t, const struct runner_dry_result *res, struct trial_result *ret);

/* ---- runner-cluster.c ---- */

/* Whether the study's trials are jobs on a cluster (deploy.method slurm, a real run). */
bool runner_on_cluster(const struct runner *r);
/* Makes the cluster (the study fails at once, with err, when sbatch,
 * squeue or scancel is missing), then — without blocking — cancels every
 * job of the study still in the queue (interrupted trials: those recorded
 * and those submitted but not yet recorded, found by their comment) and
 * reads the partition's GPUs (gpu.count is capped to them); planning waits
 * until both are done. Nothing for other methods. */
int runner_cluster_start(struct runner *r, struct error *err);
void runner_cluster_free(struct runner *r);
/* The job's name ("goodput-STUDY-SEQ") and comment (which study, of which
 * store, which trial: what a resumed study looks for). */
void runner_job_name(const struct runner_trial *t, char *buf, size_t size);
void runner_job_comment(const struct runner_trial *t, char *buf, size_t size);
/* The cluster took the trial's job away (preempted, its node failed,
 * cancelled by someone else): it waits to be run again (state pending),
 * never an outcome; the fifth time it fails (lost). */
void runner_trial_lost(struct runner_trial *t, const char *why);

/* ---- runner-host.c ---- */

/* Opens the host (GPU telemetry; absence is normal) and starts gathering
 * its facts; never fails the study. Not for dry runs. */
void runner_host_start(struct runner *r);
void runner_host_free(struct runner *r);
/* Records the host facts with a new trial when they are known (else they
 * follow once they are). */
int runner_host_record(struct runner *r, int64_t trial_id, struct error *err);
/* GPU sampling around one load point of t; stop fills ret (NAN:
 * unavailable, or another trial ran beside it). A trial that starts tells
 * a sampling in flight (runner_gpu_note_start). */
void runner_gpu_point_start(struct runner_trial *t);
void runner_gpu_point_stop(struct runner_trial *t, struct store_gpu_figures *ret);
void runner_gpu_note_start(struct runner *r);
/* A trial's server is gone: with no other trial running, once GPU memory is
 * back near its idle level (or a minute passed; at once without NVML), act
 * on a pending request or plan; with others running, plan at once. */
void runner_after_server_gone(struct runner *r);
/* Stops waiting for GPU memory (a request to act on at once). Returns true
 * when a wait was ended. */
bool runner_host_stop_waiting(struct runner *r);
/* A trial's share of the wall-time budget: the budget ÷
 * budget.min_configurations, µs; 0 without a budget. */
uint64_t runner_trial_share_usec(const struct runner *r);
/* Whether the wall-time budget is spent, or too little of it is left for a
 * deployment (message filled). */
bool runner_wall_budget_spent(struct runner *r, char *msg, size_t size);

/* ---- runner-eval-deploy.c: what each server of a trial is started with ---- */

/* The strings a method's config points to while a deployment starts. */
struct runner_method_strings {
	char unit[256], job_name[256], job_comment[320];
	char **hook_env; /* the caller's to free (deploy_strv_free) */
};
/* The method-specific part of a deployment: the unit name (systemd), the
 * hooks and their environment (command), the job (slurm). */
int runner_method_config(const struct runner_trial *t, struct deploy_config *cfg, const char *host, uint16_t port,
			 struct runner_method_strings *m, struct error *err);
/* The checkpoint the trial's servers load, and the key that names it. */
const char *runner_model_of(const struct runner_trial *t, char *key, size_t size);

/* ---- runner-roles.c: a disaggregated trial's servers ---- */

struct runner_roles;
/* Renders, records and starts a disaggregated configuration's workers on
 * the trial's GPUs (each side's workers its TP of them, in turn), each a
 * server of the study's method with its own log (the trial's, suffixed
 * with its role), port, unit or job, recorded by role before it runs; the
 * router follows once they are ready. The unit reports to cb (userdata t)
 * like a single server's deployment. *ret_setup tells a failure no
 * configuration avoids. */
int runner_roles_launch(struct runner_trial *t, const char *host, deploy_event_fn cb, struct runner_roles **ret_roles,
			struct deployment **ret, bool *ret_setup, struct error *err);
/* Whether the store refused to record a role (nothing of it ran). */
int runner_roles_record_error(const struct runner_roles *x);
struct runner_roles *runner_roles_free(struct runner_roles *x);
