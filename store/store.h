/* store.h — goodput's SQLite store: studies, trials and load points.
 *
 * The store is the only module that speaks SQL. One database file holds every
 * study a tuner or the daemon ran: the study spec and the settings needed to
 * replay its search (seed, algorithm, NLopt version), one row per trial (the
 * knob values, its state, why it failed, what it measured, $/Mtok) and one row
 * per load point (key figures as columns, the full result object as JSON).
 *
 * Every function commits before it returns (unless the caller holds a
 * transaction from store_begin()), so a state change written here survives a
 * kill -9 of the process that wrote it: callers commit first, then act. A
 * power loss may take back the commits since the last WAL checkpoint (see
 * store.c on synchronous=NORMAL); the file stays consistent.
 * WAL mode lets other programs open the file read-only while one writer works.
 *
 * Conventions: functions return >= 0 on success and -errno on failure, with a
 * message in err naming what was being done and SQLite's own message
 * ("goodput.db: inserting a trial: database or disk is full"). A full disk is
 * -ENOSPC; nothing committed earlier is lost. Ids are SQLite rowids (> 0).
 * Doubles are stored as 8-byte REALs, bit-exact; NAN in a struct means "no
 * value" (NULL in the table). Times are CLOCK_REALTIME µs (0 = not set). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "lock-file.h"
#include "metrics.h"

/* The schema version this code writes; older files are migrated on open. */
#define STORE_SCHEMA_VERSION 12

struct store;

enum store_open_flags {
	STORE_OPEN_READ_ONLY = 1 << 0, /* never writes; the file must exist at the current version */
	/* The one writer (goodputd, goodput tune): the file itself — whatever
	 * path names it: a symlink, a hard link — is locked before it is opened
	 * and while the store is (lock_inode_take); -EBUSY when another writer
	 * holds it. Readers need no lock. */
	STORE_OPEN_WRITER = 1 << 1,
};

struct store_open_options {
	unsigned flags;             /* enum store_open_flags */
	unsigned busy_timeout_ms;   /* 0: 5000 */
	int target_version;         /* 0: STORE_SCHEMA_VERSION; tests create older files with it */
	struct lock_holder *holder; /* STORE_OPEN_WRITER refused: who holds the lock (may be NULL) */
};

/* Opens (creating when needed) and migrates the database at path. opts may be
 * NULL. A file from a newer goodput is refused (-EPROTONOSUPPORT). */
int store_open(const char *path, const struct store_open_options *opts, struct store **ret, struct error *err);
/* Closes the database (finalizing cached statements). Accepts NULL; returns NULL. */
struct store *store_close(struct store *s);

/* What store_check_files found. */
enum store_files {
	STORE_FILES_OK,
	/* The WAL was removed or replaced while open: everything it held was
	 * written into the database file and a new WAL begun; nothing was lost. */
	STORE_FILES_WAL_RESTORED,
	/* The database file was removed or replaced while open: what this store
	 * still saw was copied to PATH.rescued-TIME (when it could be), and
	 * every later call fails with -ESTALE saying so. */
	STORE_FILES_LOST,
};
/* Whether the database file (and its WAL) at the store's path are still
 * the ones it opened: two stat calls, for a timer of the writer. A WAL
 * gone or replaced is restored at once (STORE_FILES_WAL_RESTORED); msg
 * then says what happened, for the journal. Returns an enum store_files
 * (≥ 0), or a negative errno. A reader is never checked. */
int store_check_files(struct store *s, char *msg, size_t size, struct error *err);

/* A count that moves whenever this connection changes a row (a load point
 * added to a running trial excepted): an answer computed from the store
 * stays true while it stands still. Writes through other connections do
 * not move it; goodputd is the state's only writer (its lock). */
uint64_t store_epoch(const struct store *s);
static inline void store_closep(struct store **s)
{
	if (*s)
		store_close(*s);
}

/* PRAGMA user_version of the open file. */
int store_schema_version(struct store *s, int *ret, struct error *err);

/* An explicit transaction (BEGIN IMMEDIATE) around several calls; the calls
 * inside commit nothing until store_commit(). Not nestable. */
int store_begin(struct store *s, struct error *err);
int store_commit(struct store *s, struct error *err);
int store_rollback(struct store *s);

/* For tests: PRAGMA max_page_count on this connection (simulates a full disk). */
int store_debug_set_max_page_count(struct store *s, uint32_t pages);
/* For tests: an integer PRAGMA of this connection (name: [a-z_]+), e.g. "synchronous". */
int store_debug_pragma_int(struct store *s, const char *name, int64_t *ret);

/* ---- studies ---- */

enum store_study_state {
	STORE_STUDY_QUEUED,
	STORE_STUDY_RUNNING,
	STORE_STUDY_PAUSED,
	STORE_STUDY_DONE,
	STORE_STUDY_FAILED,
	STORE_STUDY_CANCELLED,
	STORE_STUDY_NO_FEASIBLE, /* finished, and no configuration met the SLA ("no_feasible_config") */
	_STORE_STUDY_STATE_MAX,
};

const char *store_study_state_to_string(enum store_study_state s);
/* Whether a study in state s has ended (done, no_feasible_config, failed,
 * cancelled). */
bool store_study_state_is_final(enum store_study_state s);
/* -EINVAL for an unknown name. */
int store_study_state_from_string(const char *s);

struct store_study {
	int64_t id;
	char *name;      /* unique */
	char *spec_json; /* the study spec as submitted (canonical JSON) */
	char *engine;    /* engine profile name (for "best for this model + engine") */
	char *model;
	char *label; /* workload/SLA label; may be NULL */
	enum store_study_state state;
	char *message; /* why it failed or was cancelled; may be NULL */
	uint64_t created_usec, started_usec, finished_usec;
	int64_t best_trial_id; /* 0: none chosen yet */
	/* what replaying the search needs */
	uint64_t seed;
	char *algorithm;
	char *nlopt_version;
	/* the memory pre-flight's estimates (JSON array, the runner's); may be NULL */
	char *preflight_json;
	/* the search phases of widened ranges (JSON array, the runner's; replayed on resume); may be NULL */
	char *phases_json;
};

/* Frees the strings of an embedded study (and zeroes it). */
void store_study_done(struct store_study *st);
void store_study_array_free(struct store_study *a, size_t n);

/* Inserts a study in state `queued` (st->id, state, times and best are
 * ignored; created is now). -EEXIST when the name is taken. */
int store_study_insert(struct store *s, const struct store_study *st, int64_t *ret_id, struct error *err);
/* -ENOENT when there is no such study. The caller owns *ret (store_study_done). */
int store_study_get(struct store *s, int64_t id, struct store_study *ret, struct error *err);
int store_study_get_by_name(struct store *s, const char *name, struct store_study *ret, struct error *err);
/* All studies in submission order. The caller frees with store_study_array_free. */
int store_study_list(struct store *s, struct store_study **ret, size_t *ret_n, struct error *err);
/* Records the memory pre-flight's estimates / the search phases (JSON
 * text, NULL clears). */
int store_study_set_preflight(struct store *s, int64_t id, const char *json, struct error *err);
int store_study_set_phases(struct store *s, int64_t id, const char *json, struct error *err);
/* The search the study runs ("model", "twin", or the NLopt algorithm), once chosen. */
int store_study_set_algorithm(struct store *s, int64_t id, const char *algorithm, struct error *err);
/* Moves a study to state; `running` sets started (first time only), a final
 * state sets finished. message may be NULL (clears it). */
int store_study_set_state(struct store *s, int64_t id, enum store_study_state state, const char *message,
			  struct error *err);
/* Records the trial the runner chose as the study's answer (it must belong
 * to the study: -EINVAL otherwise). */
int store_study_set_best(struct store *s, int64_t study_id, int64_t trial_id, struct error *err);

/* ---- trials ---- */

enum store_trial_state {
	STORE_TRIAL_PENDING, /* recorded, not yet deployed */
	STORE_TRIAL_DEPLOYING,
	STORE_TRIAL_PROBING,
	STORE_TRIAL_DONE,        /* measured: max rate/goodput/cost set (cost NAN when the SLA was never met) */
	STORE_TRIAL_INFEASIBLE,  /* the configuration cannot run (oom, sla_never_met, ...) */
	STORE_TRIAL_FAILED,      /* something else went wrong (crash, time-out) */
	STORE_TRIAL_INTERRUPTED, /* the runner stopped mid-trial: to be redone */
	_STORE_TRIAL_STATE_MAX,
};

const char *store_trial_state_to_string(enum store_trial_state s);
int store_trial_state_from_string(const char *s);
/* done, infeasible and failed are final; the others are not. */
bool store_trial_state_is_final(enum store_trial_state s);

/* Failure classes; stored as these strings. */
enum store_failure {
	STORE_FAILURE_NONE,
	STORE_FAILURE_OOM,                  /* out of memory at start-up or under load */
	STORE_FAILURE_STARTUP_TIMEOUT,      /* health never answered */
	STORE_FAILURE_CRASHED,              /* exited on its own */
	STORE_FAILURE_SLA_NEVER_MET,        /* not even the lowest load met the SLA */
	STORE_FAILURE_QUALITY_CHECK_FAILED, /* the operator's quality check refused it */
	STORE_FAILURE_CONSTRAINT,           /* excluded by a constraint or learned infeasibility */
	STORE_FAILURE_DEPLOY_ERROR,         /* could not start at all (bad argv, spawn failed) */
	STORE_FAILURE_PROBE_ERROR,          /* the probe failed (server errors, unreachable) */
	STORE_FAILURE_TIME_LIMIT,           /* its job reached the cluster's time limit */
	STORE_FAILURE_LOST,                 /* the cluster kept ending its jobs (preempted, node failures) */
	_STORE_FAILURE_MAX,
};

const char *store_failure_to_string(enum store_failure f);
int store_failure_from_string(const char *s);

struct store_trial {
	int64_t id, study_id;
	uint32_t seq;        /* 1, 2, ... within the study, in insertion order */
	char *kind;          /* "search", "confirm", ...: one trial per (study, key, kind) */
	char *knobs_json;    /* {"max_num_seqs": 64, ...} */
	char *canonical_key; /* the optimizer's key for the knob values */
	enum store_trial_state state;
	enum store_failure failure;
	char *failure_message;
	double deploy_seconds;
	double max_rate;      /* requests/s at the largest load meeting the SLA */
	double max_goodput;   /* tokens/s counted for cost at that load */
	double concurrency;   /* mean requests in flight at that load */
	double cost_per_mtok; /* $ per million tokens */
	uint64_t started_usec, finished_usec;
	char *log_path;
	/* the server under test, recorded before it runs so that a restarted
	 * runner can end an orphan (struct store_server); kept until it is gone */
	int64_t server_pgid;   /* 0: none */
	char *server_identity; /* its leader's identity, or NULL (recorded before goodput kept it) */
	char *server_unit;     /* systemd unit name, or NULL */
	/* the host it ran on: engine version, GPU model, driver, count (JSON); may be NULL */
	char *host_json;
	/* what the digital twin predicted for it ($/Mtok); NAN: no prediction */
	double predicted_cost;
	/* the GPU indices it ran on ("0,1"), or NULL (recorded before trials ran side by side) */
	char *gpus;
	/* why it did not start, as the engine's log said ("weights", "kv_cache",
	 * "cache_blocks"), and the max_model_len the engine said fits; NULL / 0 */
	char *oom_cause;
	uint32_t suggested_max_model_len;
	/* the command its server was launched with: {"argv": [...], "env": [...]}; NULL when it never
	 * launched (or was recorded before goodput kept it) */
	char *launch_json;
	/* a job on a cluster: its id (0: none), the node it ran on (or NULL),
	 * the seconds it waited for its resources (NAN: none), and how often
	 * the cluster ended one of its jobs before it finished (it was redone) */
	int64_t job_id;
	char *job_node;
	double pending_seconds;
	uint32_t job_lost;
};

void store_trial_done(struct store_trial *t);
void store_trial_array_free(struct store_trial *a, size_t n);

/* Inserts a trial in state `pending` with the next seq of its study. When
 * (study, canonical_key, kind) exists already nothing is inserted and its id
 * is returned: a resumed runner never duplicates a trial. Returns 1 when
 * inserted, 0 when it existed. */
int store_trial_insert(struct store *s, int64_t study_id, const char *kind, const char *knobs_json,
		       const char *canonical_key, int64_t *ret_id, struct error *err);
int store_trial_get(struct store *s, int64_t id, struct store_trial *ret, struct error *err);
/* -ENOENT when the study has no such trial. */
int store_trial_find(struct store *s, int64_t study_id, const char *kind, const char *canonical_key,
		     struct store_trial *ret, struct error *err);
/* Moves a trial to a non-final state. `deploying` sets started (and clears
 * the outcome and load points of an earlier, interrupted attempt). */
int store_trial_set_state(struct store *s, int64_t id, enum store_trial_state state, struct error *err);
/* What ends a trial's server: its process group, with the identity of the
 * group's leader ("BOOT_ID:START_TICKS", deploy_process_identity: a pid the
 * kernel gave to another program since is never taken for it), or its
 * systemd unit. */
struct store_server {
	int64_t pgid;         /* 0: none */
	const char *identity; /* NULL: unknown */
	const char *unit;     /* NULL: none */
};
/* Records the server of a trial before it runs (NULL clears it, once it is
 * gone); log_path NULL keeps the one recorded. */
int store_trial_set_server(struct store *s, int64_t id, const struct store_server *server, const char *log_path,
			   struct error *err);
/* One server of a trial of several (a disaggregated configuration's
 * "prefill-0", "decode-0", "router"), recorded before it runs as
 * store_trial_set_server records a single one; store_trial_set_server(NULL)
 * clears them all. */
int store_trial_add_server(struct store *s, int64_t id, const char *role, const struct store_server *server,
			   struct error *err);
/* The role servers recorded for a study's trials (what a restarted runner
 * or goodputd ends), by trial. */
struct store_role_server {
	int64_t trial_id;
	char *role;
	int64_t pgid;   /* 0: none */
	char *identity; /* NULL: unknown */
	char *unit;     /* NULL: none */
};
int store_study_role_servers(struct store *s, int64_t study_id, struct store_role_server **ret, size_t *ret_n,
			     struct error *err);
void store_role_server_done(struct store_role_server *r);
void store_role_server_array_free(struct store_role_server *a, size_t n);
int store_trial_set_host(struct store *s, int64_t id, const char *host_json, struct error *err);

/* Records the twin's predicted $/Mtok of a trial (NAN clears it). */
int store_trial_set_predicted_cost(struct store *s, int64_t id, double cost, struct error *err);
/* Records the GPUs a trial runs on ("0,1"; NULL clears it). */
int store_trial_set_gpus(struct store *s, int64_t id, const char *gpus, struct error *err);
/* Records the exact command the trial's server was launched with (JSON, see
 * store_trial.launch_json). */
int store_trial_set_launch(struct store *s, int64_t id, const char *launch_json, struct error *err);
/* A trial's job: its id once submitted, with the log its output goes to
 * (NULL: kept), so that a goodput killed while the job ends still names
 * it; where it ran, the GPUs it got there and how long it waited once it
 * ran (gpus NULL: kept); one more job the cluster took away (preempted,
 * its node failed). */
int store_trial_set_job(struct store *s, int64_t id, int64_t job_id, const char *log_path, struct error *err);
int store_trial_set_job_start(struct store *s, int64_t id, const char *node, const char *gpus, double pending_seconds,
			      struct error *err);
int store_trial_job_lost(struct store *s, int64_t id, struct error *err);
/* Overwrites a trial's start and finish times: a dry run's trials carry
 * the virtual times of its simulated schedule (the study's start plus
 * virtual µs) instead of the moments they were computed. */
int store_trial_set_times(struct store *s, int64_t id, uint64_t started_usec, uint64_t finished_usec,
			  struct error *err);

struct store_trial_outcome {
	enum store_trial_state state; /* done, infeasible or failed */
	enum store_failure failure;
	const char *failure_message;                                              /* may be NULL */
	double deploy_seconds, max_rate, max_goodput, concurrency, cost_per_mtok; /* NAN: unknown */
	uint64_t finished_usec;           /* 0: now (a dry run gives its virtual time) */
	const char *oom_cause;            /* "weights", "kv_cache", "cache_blocks"; NULL: none */
	uint32_t suggested_max_model_len; /* 0: not said */
};

/* Finishes a trial with its outcome (sets finished; the server stays
 * recorded until store_trial_set_server clears it, once it is gone). */
int store_trial_finish(struct store *s, int64_t id, const struct store_trial_outcome *o, struct error *err);

/* Every trial of a study in seq order: the optimizer's history. */
int store_trial_history(struct store *s, int64_t study_id, struct store_trial **ret, size_t *ret_n, struct error *err);
/* After a restart: trials of the study left in deploying/probing become
 * interrupted (to be redone). Returns how many. */
int store_study_resume(struct store *s, int64_t study_id, struct error *err);
/* ---- the study's answer ---- */

/* One figure shown everywhere (store-best.c): the chosen configuration —
 * the runner's recorded choice (best_trial_id) once the study is done, until
 * then the configuration with the lowest mean cost (ties: the one measured
 * first) — and its cost: the mean of all its measurements (trials finished
 * as done with a cost, the search's and the re-probes), with their count
 * and spread. */
struct store_study_best {
	struct store_trial trial;  /* the configuration's first measurement: knobs, goodput, rate, load points */
	double cost_per_mtok;      /* the mean of its measurements ($/Mtok) */
	unsigned n;                /* measurements */
	double cost_min, cost_max; /* their range */
	double spread;             /* (max − min) / mean; 0 for one */
	/* the runner-up: the lowest mean among the other configurations */
	bool have_runner_up;
	char *runner_up_key, *runner_up_knobs_json;
	double runner_up_cost_per_mtok; /* NAN: none */
	unsigned runner_up_n;
	double runner_up_spread;
	/* time to the answer: from the study's first trial's start to the end
	 * of the answer's last measurement (a dry run's: on its virtual clock) */
	uint64_t first_started_usec, answered_usec; /* 0: unknown */
	double time_to_answer_s;                    /* NAN: unknown */
	/* the engine's version as its version command printed it where the
	 * answer was measured (its first measurement's host facts); NULL:
	 * not recorded (a dry run, no version command) */
	char *engine_version;
	/* the engine's default configuration (the trial of kind "baseline" or
	 * "dry-run-baseline"),
	 * when the study measured it: how it ended and its cost (the mean of
	 * its configuration's measurements, as every cost is) */
	bool have_baseline;
	enum store_trial_state baseline_state; /* done, infeasible (did not start / SLA never met), failed, ... */
	enum store_failure baseline_failure;
	double baseline_cost_per_mtok; /* NAN when it has no measurement */
	char *baseline_knobs_json;
};

/* Frees the strings of an embedded answer (and zeroes it). */
void store_study_best_done(struct store_study_best *b);
/* The study's answer. -ENOENT when nothing was measured yet. The caller owns
 * *ret (store_study_best_done). */
int store_study_best(struct store *s, int64_t study_id, struct store_study_best *ret, struct error *err);
/* When nothing met the SLA: the attempt that came closest — the trial
 * whose search load point (not the saturation run) reached the highest
 * attainment (ties: the lower rate; a percentile-only SLA: the lowest
 * rate tried), with that point's rate and attainment. The trial's
 * failure_message says which bound failed there and by how much. */
struct store_study_closest {
	struct store_trial trial;
	double rate, attainment; /* of that load point */
	char *result_json;       /* its result object (owned) */
};

void store_study_closest_done(struct store_study_closest *c);
/* The load point of the search that came closest to the SLA: the highest
 * attainment over the study's trials with an outcome, or stopped mid-way
 * (what they measured stands), ties going to the lower rate. -ENOENT when
 * no trial of the study measured a load point. The caller owns *ret
 * (store_study_closest_done). */
int store_study_closest(struct store *s, int64_t study_id, struct store_study_closest *ret, struct error *err);

/* The cheapest answer over finished (`done`) studies of a model on an
 * engine (and label, when not NULL): the study (ret_study, the caller's to
 * store_study_done) and its answer. -ENOENT when there is none. */
int store_best_for(struct store *s, const char *model, const char *engine, const char *label,
		   struct store_study *ret_study, struct store_study_best *ret, struct error *err);

/* ---- twin calibrations ---- */

/* A digital-twin calibration kept across studies, one per key
 * ("engine|engine_version|gpu|driver|model"); calibration_json is the
 * twin's own format (twin_calibration_to_json), opaque to the store. */
struct store_twin_calibration {
	char *key;
	char *engine, *engine_version, *gpu, *driver, *model; /* may be NULL */
	char *calibration_json;
	double fit_error, cost_error; /* NAN: unknown */
	int64_t study_id;             /* the study that wrote it (0: none) */
	uint64_t updated_usec;
};

void store_twin_calibration_done(struct store_twin_calibration *c);
/* Inserts or replaces the row of c->key (key and calibration_json required:
 * -EINVAL otherwise); updated is set to now. */
int store_twin_calibration_upsert(struct store *s, const struct store_twin_calibration *c, struct error *err);
/* -ENOENT when there is none for key. The caller owns *ret (store_twin_calibration_done). */
int store_twin_calibration_get(struct store *s, const char *key, struct store_twin_calibration *ret, struct error *err);

/* ---- load points ---- */

struct store_load_point {
	int64_t id, trial_id;
	uint32_t seq;        /* order within the trial */
	char *phase;         /* "warmup", "saturation", "search", "confirm" ... */
	double request_rate; /* INFINITY for "inf" */
	uint32_t max_concurrency;
	double attainment;
	bool sla_met;
	uint32_t completed, failed;
	double mean_ttft_ms, p50_ttft_ms, p90_ttft_ms, p99_ttft_ms;
	double mean_tpot_ms, p50_tpot_ms, p90_tpot_ms, p99_tpot_ms;
	double p99_itl_ms, p99_e2el_ms;
	double request_throughput, output_throughput, total_token_throughput;
	double good_output_throughput, request_goodput;
	double mean_concurrency;
	double kv_usage_peak, running_peak, waiting_peak, preemptions; /* NAN when not scraped */
	/* GPU telemetry during the load point (NVML): utilisation in % (the mean
	 * over GPUs), memory used in MiB (summed over GPUs); NAN when unavailable */
	double gpu_util_mean, gpu_util_peak, gpu_mem_mean_mib, gpu_mem_peak_mib;
	char *result_json; /* the full result object */
	uint64_t created_usec;
};

void store_load_point_done(struct store_load_point *lp);
void store_load_point_array_free(struct store_load_point *a, size_t n);

/* The rate a load point sent, requests/s, beside the one it asked for
 * (request_rate): its result's offered_rate; NAN when unknown (all at once,
 * or a result of an older version). */
double store_load_point_offered_rate(const struct store_load_point *lp);

/* The load point at (nearest) max_rate among those that met the SLA, else
 * the last; NULL without points. Points into lp. */
const struct store_load_point *store_load_point_at_max(const struct store_load_point *lp, size_t n, double max_rate);

/* GPU figures of a load point (NAN: unavailable, stored as NULL). */
struct store_gpu_figures {
	double util_mean, util_peak;       /* % */
	double mem_mean_mib, mem_peak_mib; /* MiB, summed over GPUs */
};

/* Records one load point of a trial; -EEXIST when (trial, seq) exists. The
 * GPU columns are NULL. */
int store_load_point_insert(struct store *s, int64_t trial_id, uint32_t seq, const char *phase,
			    const struct probe_result *r, int64_t *ret_id, struct error *err);
/* As store_load_point_insert, with the GPU figures measured during it (gpu
 * may be NULL: unavailable). */
int store_load_point_insert_gpu(struct store *s, int64_t trial_id, uint32_t seq, const char *phase,
				const struct probe_result *r, const struct store_gpu_figures *gpu, int64_t *ret_id,
				struct error *err);
/* The load points of a trial in seq order. */
int store_load_point_list(struct store *s, int64_t trial_id, struct store_load_point **ret, size_t *ret_n,
			  struct error *err);

/* ---- traffic shapes: what a watched endpoint served, hour by hour ---- */

/* One hour of one watched endpoint (goodputd's watch): the figures people
 * plot as columns, the shape as a workload block (capture's JSON, opaque
 * here), and the drift from the study it is compared with. */
struct store_traffic_shape {
	int64_t id;
	char *watch;        /* the metrics URL */
	char *study;        /* the study it is compared with; may be NULL */
	uint64_t hour_usec; /* the hour's start (CLOCK_REALTIME µs) */
	double seconds;     /* observed in the hour */
	double requests, arrivals, mean_rate, peak_rate, burstiness, input_mean, output_mean, prefix_hit_rate;
	double drift;       /* the largest length distance in the hour (NAN: none measured) */
	double rate_change; /* the rate against the study's, −1 .. (NAN: unknown) */
	bool flagged;       /* drift was flagged in the hour */
	char *shape_json;   /* the hour as a workload block; may be NULL */
	uint64_t updated_usec;
};

void store_traffic_shape_done(struct store_traffic_shape *t);
void store_traffic_shape_array_free(struct store_traffic_shape *a, size_t n);
/* Inserts the hour, or replaces it (watch, hour_usec) with newer figures;
 * updated is now. watch is required. */
int store_traffic_upsert(struct store *s, const struct store_traffic_shape *t, struct error *err);
/* The hours since since_usec (0: all) of a study's watches, oldest first. */
int store_traffic_list_study(struct store *s, const char *study, uint64_t since_usec, struct store_traffic_shape **ret,
			     size_t *ret_n, struct error *err);
