/* runner-internal.h — the runner's state, shared by runner.c (life cycle,
 * status, history) and runner-trial.c (one trial: deploy, quality check,
 * probe, outcome, teardown; dry-run evaluation). Not for other modules. */
#pragma once

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "deploy.h"
#include "engine-profile.h"
#include "gpu-telemetry.h"
#include "opt.h"
#include "probe.h"
#include "runner.h"
#include "store.h"
#include "study.h"
#include "twin.h"

enum runner_action {
	RUNNER_ACTION_NONE,
	RUNNER_ACTION_PLAN,     /* ask the optimizer, start the next trial */
	RUNNER_ACTION_DRY_EVAL, /* evaluate the current trial in virtual time */
	RUNNER_ACTION_FINISH,   /* end with pending_end */
};

enum runner_request {
	RUNNER_REQUEST_NONE,
	RUNNER_REQUEST_PAUSE,
	RUNNER_REQUEST_STOP,
	RUNNER_REQUEST_CANCEL,
};

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
	struct opt_history history;
	int64_t *trial_ids;    /* store id of each history entry */
	double *trial_goodput; /* max goodput of each history entry */
	size_t n_trial_ids;
	struct opt_result best;

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

	/* the current trial */
	struct opt_candidate cand;
	int64_t trial_id;
	char kind[64];
	cJSON *knobs;
	char *log_path;
	struct deployment *deploy;
	struct probe *probe;
	pid_t qc_pid;
	sd_event_source *qc_child, *qc_timer, *settle_timer;
	unsigned n_points;
	bool points_failed; /* some load point had failed requests */
	int probe_result;   /* the probe's result while waiting for the deployer's verdict */
	bool trial_open;    /* started and not yet finished in the store */
	double deploy_seconds;

	/* wall time: what stored trials of earlier runs took (a resumed study
	 * does not restart its clock), and the measured deploy times that the
	 * budget is charged with before a new deployment starts */
	uint64_t wall_used_before_usec;
	double deploy_sum_s;
	unsigned deploy_n;

	/* the host (runner-host.c): GPU telemetry, host facts, hygiene */
	struct gpu_telemetry *gpu;
	double gpu_idle_mib; /* GPU memory in use at start (NAN: no NVML) */
	struct host_info_job *host_job;
	char *host_json;          /* engine version, GPU model, driver, count; NULL until known */
	uint64_t host_since_usec; /* CLOCK_REALTIME start of this run */
	sd_event_source *hygiene_timer;
	uint64_t hygiene_start_usec;

	/* the twin strategy (runner-twin.c): "search.strategy": "twin" */
	bool twin_on;
	struct twin *twin;
	struct twin_settings twin_settings;
	struct twin_candidate twin_cand; /* the last answer (valid once twin_asked) */
	bool twin_asked;
	bool twin_wait_host; /* the first ask waits for the host facts (the warm key) */
	bool twin_key_known;
	struct twin_calibration twin_keycal; /* key fields only */
	char twin_key[5 * TWIN_KEY_FIELD_MAX + SIM_NAME_MAX];
	struct twin_calibration twin_warm;
	bool twin_have_warm;
	struct twin_history twin_hist; /* rebuilt before each ask */
	pid_t twin_pid;                /* the child computing twin_next (0: none) */
	int twin_fd;                   /* its pipe's read end (-1: none) */
	sd_event_source *twin_io, *twin_child;
	char *twin_buf;
	size_t twin_len;
	bool twin_eof, twin_exited;
	int twin_status; /* the child's siginfo code/status */
	int twin_code;
	uint64_t twin_ask_usec;
};

void runner_emit(struct runner *r, const struct runner_event *ev);
void runner_set_phase(struct runner *r, enum runner_phase p);
void runner_schedule(struct runner *r, enum runner_action a);
void runner_finish(struct runner *r, enum runner_end end);
void runner_fail(struct runner *r, const char *msg);
bool runner_settle_request(struct runner *r);
void runner_update_best(struct runner *r);
int runner_history_push(struct runner *r, const struct opt_trial *t, int64_t trial_id, double goodput);
int runner_best_trial_id(struct runner *r, const struct opt_config *c);
bool runner_kind_is_confirm(const char *kind);
void runner_knobs_text(const struct opt_space *space, const struct opt_config *c, char *buf, size_t size);

/* The outcome of a trial, as runner-trial.c and runner-quality.c decide it. */
struct trial_result {
	enum store_trial_state state;
	enum store_failure failure;
	char message[ERROR_MSG_MAX];
	double max_rate, max_goodput, concurrency, cost;
};

static inline void trial_result_init(struct trial_result *t, enum store_trial_state state, enum store_failure failure)
{
	*t = (struct trial_result){
		.state = state, .failure = failure, .max_rate = NAN, .max_goodput = NAN, .concurrency = NAN, .cost = NAN
	};
}

/* runner-trial.c */
/* Records the outcome, tells the optimizer, tears the server down. */
void runner_finish_trial(struct runner *r, const struct trial_result *t);
void runner_start_probe(struct runner *r);
/* runner-quality.c */
void runner_start_quality_check(struct runner *r);
void runner_kill_quality_check(struct runner *r);

void runner_plan(struct runner *r);
/* Goes on with r->cand (asked of opt_next or the twin): a trial, or done
 * with done_message (NULL: opt_next's reason). */
void runner_plan_candidate(struct runner *r, const char *done_message);

/* runner-twin.c */
/* Sets up the twin when the study asks for it (strategy "twin"). */
int runner_twin_init(struct runner *r, struct error *err);
void runner_twin_free(struct runner *r);
/* Asks the twin in a child process; the answer continues with runner_plan_candidate. */
void runner_twin_ask(struct runner *r);
/* Kills the child of an ask in flight (pause, stop, cancel, free). */
void runner_twin_kill(struct runner *r);
/* The host facts arrived: an ask that waited for them goes on. */
void runner_twin_host_known(struct runner *r);
void runner_dry_step(struct runner *r);
/* pause/stop/cancel asked: abort what runs (trial → interrupted), tear down. */
void runner_halt(struct runner *r);
/* Frees the trial's probe, deployment (killing it) and quality check. */
void runner_trial_release(struct runner *r);

/* runner-host.c */
/* Opens NVML (absence is normal), reads the idle GPU memory and starts the
 * host facts job; never fails the study. Not for dry runs. */
void runner_host_start(struct runner *r);
void runner_host_free(struct runner *r);
/* Records the host facts with a new trial when they are known (else the
 * host job's callback does it). */
int runner_host_record(struct runner *r, int64_t trial_id, struct error *err);
/* GPU sampling around one load point; stop fills ret (NAN: unavailable). */
void runner_gpu_point_start(struct runner *r);
void runner_gpu_point_stop(struct runner *r, struct store_gpu_figures *ret);
/* The server is gone: once GPU memory is back near its idle level (or a
 * minute passed; at once without NVML), act on a pending request or plan
 * the next trial. */
void runner_after_server_gone(struct runner *r);
/* Whether the wall-time budget is spent, or too little of it is left for a
 * deployment (message filled). */
bool runner_wall_budget_spent(struct runner *r, char *msg, size_t size);
