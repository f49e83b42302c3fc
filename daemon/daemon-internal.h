/* daemon-internal.h — the state goodputd's core files share (daemon.c: the
 * loop, signals, notify and reload; daemon-queue.c: the queue and the
 * runner; daemon-handlers.c: answers on the control socket; daemon-best.c:
 * the best-configuration files). Not for other modules. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "control.h"
#include "daemon-config.h"
#include "daemon.h"
#include "runner.h"
#include "macro.h"
#include "store.h"
#include "study.h"
#include "time-util.h"

#define DAEMON_STATUS_MAX 512
/* How often the queue checks a waiting study's time window. */
#define DAEMON_WINDOW_TICK_USEC (15 * USEC_PER_SEC)
/* After SIGTERM, how long the running trial may take to tear down before
 * the daemon exits anyway (systemd's TimeoutStopSec is longer). */
#define DAEMON_STOP_GRACE_USEC (90 * USEC_PER_SEC)
/* How often the database and its WAL are checked to still be the files
 * opened (store_check_files: two stat calls). */
#define DAEMON_STORE_WATCH_USEC (2 * USEC_PER_SEC)
/* A study that cannot go on for a passing cause (a full disk) is tried
 * again after this, doubled on each failure up to the cap. */
#define DAEMON_RETRY_FIRST_USEC (2 * USEC_PER_SEC)
#define DAEMON_RETRY_MAX_USEC   (5 * 60 * USEC_PER_SEC)

/* HTML reports written by child processes at once (daemon-report.c). */
#define DAEMON_REPORT_JOBS 2

struct daemon_report_job;

/* `best`, `trials` and Markdown `report` answers kept in memory (see
 * daemon-handlers.c); an answer longer than DAEMON_ANSWER_CACHE_BODY_MAX is
 * not kept. */
#define DAEMON_ANSWER_CACHE_MAX      32
#define DAEMON_ANSWER_CACHE_BODY_MAX ((size_t)4 << 20)

struct daemon_answer_entry {
	char *key;             /* the question: the command, and a study name or model + engine + label */
	char *body;            /* the answer without an id, compact JSON */
	uint64_t epoch;        /* store_epoch() when it was computed: true while that stands */
	uint64_t expires_usec; /* and until then (CLOCK_MONOTONIC; USEC_INFINITY: no end) */
};

enum daemon_state {
	DAEMON_IDLE,     /* nothing queued */
	DAEMON_RUNNING,  /* a runner works on the head of the queue */
	DAEMON_PAUSED,   /* the head of the queue is paused */
	DAEMON_WAITING,  /* the head of the queue waits for its time window */
	DAEMON_STOPPING, /* SIGTERM: tearing down */
	DAEMON_FAILED,   /* the database file is gone or replaced: no more work (status says why) */
};

const char *daemon_state_to_string(enum daemon_state s);

struct daemon {
	sd_event *event;
	struct daemon_config *config;
	char *config_path;
	bool config_required; /* given on the command line: it must exist */
	char *state_dir, *db_path, *log_dir, *best_dir;
	struct store *store;
	struct ctl_server *ctl;
	sd_event_source *sig_term, *sig_int, *sig_hup, *schedule_source, *window_timer, *stop_timer;
	sd_event_source *sig_stall; /* SIGUSR1 when GOODPUTD_DEBUG_STALL_SECONDS is set */
	uint64_t debug_stall_usec;
	bool dry_run;
	uint32_t max_trials;
	uint64_t start_usec;

	enum daemon_state state;
	bool window_stop; /* runner_stop was asked because the window closed */
	/* the head waits for a passing cause (a full disk) until retry_at_usec
	 * (CLOCK_MONOTONIC; 0: not waiting), after `retries` failures in a row */
	uint64_t retry_at_usec;
	unsigned retries;
	sd_event_source *retry_timer, *store_watch_timer;
	char status[DAEMON_STATUS_MAX];
	char last_failure[DAEMON_STATUS_MAX]; /* "STUDY failed: why" of the last study that ended, or "" */

	/* The runner of the study at the head of the queue, when it runs. */
	struct runner *runner;
	int64_t runner_study_id;

	/* Reports being written by children, their answers deferred. */
	struct daemon_report_job *report_jobs;
	unsigned n_report_jobs;

	/* Answers of `best` until anything that could change them happens. */
	struct daemon_answer_entry answer_cache[DAEMON_ANSWER_CACHE_MAX];
	unsigned answer_cache_next;

	/* The metrics text file (daemon-metrics.c): rewritten when due */
	sd_event_source *metrics_timer;
	bool metrics_due;     /* a change is waiting for the debounce */
	bool metrics_failing; /* the last write failed (said once) */

	/* Production endpoints watched for drift (daemon-watch.c). */
	struct daemon_watch **watches;
	size_t n_watches;

	/* The head of the queue as last scheduled, parsed (for its window). */
	int64_t head_id;
	struct study *head;
};

/* daemon.c */
/* Sends STATUS= (when it changed) and remembers it for `status`. */
void daemon_set_status(struct daemon *d, const char *fmt, ...) _printf_(2, 3);
/* Bounds the graceful stop: after DAEMON_STOP_GRACE_USEC the loop exits anyway. */
void daemon_arm_stop_timer(struct daemon *d);

/* daemon-queue.c */
int daemon_queue_init(struct daemon *d);
/* Looks at the queue soon (a deferred event): starts the head when possible. */
void daemon_schedule(struct daemon *d);
/* SIGTERM: stops the runner (the trial is marked interrupted); the loop
 * exits when it has finished. */
void daemon_queue_stop(struct daemon *d);
/* Studies not yet finished (queued, running, paused), in submission order. */
int daemon_queue_count(struct daemon *d, size_t *ret);
/* Kills servers a previous, killed daemon left behind (recorded pgids). */
void daemon_queue_kill_orphans(struct daemon *d);
/* The database and its WAL watched (store_check_files) on a timer. */
int daemon_store_watch_start(struct daemon *d);

/* daemon-handlers.c */
cJSON *daemon_handle_request(const struct ctl_peer *peer, const struct ctl_request *req, void *userdata);
/* Forgets every cached `best` answer: called on every runner event, every
 * scheduling step and every state-changing command. */
void daemon_answer_cache_clear(struct daemon *d);

/* daemon-report.c */
/* `report`: the Markdown at once, or (html) the files written by a child
 * process with the answer deferred until it exits. */
cJSON *daemon_handle_report(struct daemon *d, const struct ctl_peer *peer, const struct ctl_request *req);
/* The Markdown answer of `report` (without "html"). */
cJSON *daemon_report_markdown(struct daemon *d, const struct ctl_request *req);
#define DAEMON_REPORT_MAX_AGE_USEC (5 * USEC_PER_SEC)
/* Kills and reaps report writers still running (at exit). */
void daemon_report_jobs_free(struct daemon *d);
/* Rewrites the live report of study (after a trial, at its end) in a child;
 * errors are logged. */
void daemon_report_refresh(struct daemon *d, const char *study);
/* Where the report of st is written (reports/<study>/report.html); makes
 * the reports folder. *ret is the caller's. */
int daemon_report_path(struct daemon *d, const struct store_study *st, char **ret);

/* curl-lazy.c, linked into goodputd only (hence weak: NULL elsewhere).
 * Unloads libcurl when no curl handle is alive; the next use loads it. */
void daemon_curl_unload(void) __attribute__((weak));

/* daemon-log.c: a study's events with their journal fields (GOODPUT_STUDY=,
 * GOODPUT_TRIAL=, GOODPUT_PHASE=, MESSAGE_ID=) */
void daemon_log_trial_phase(const struct runner_event *ev);
void daemon_log_trial_finished(const struct runner_event *ev);
/* stopping: goodputd is stopping (else a time window closed) */
void daemon_log_study_end(const char *name, enum runner_end end, const struct runner_status *st, bool stopping);

/* daemon-metrics.c: the Prometheus text file for node_exporter */
/* Writes it once and keeps it up to date (a timer on the loop). */
int daemon_metrics_init(struct daemon *d);
/* Something it shows changed: rewritten within a second. */
void daemon_metrics_changed(struct daemon *d);
/* Rewrites it now: 0, or a negative errno (said once in the log). */
int daemon_metrics_write(struct daemon *d);
/* "# HELP" and "# TYPE" of a family. */
void daemon_metrics_family(FILE *f, const char *name, const char *type, const char *help);
/* A label value as the exposition format quotes it ("" for NULL). */
void daemon_metrics_label(FILE *f, const char *s);

/* daemon-best.c */
/* Writes best/<study>.json, .env and .cmd for a finished study. */
int daemon_write_best(struct daemon *d, int64_t study_id, struct error *err);
/* Paths of those files (the caller frees); NULL when out of memory. */
char *daemon_best_path(struct daemon *d, const char *study, const char *suffix);

/* daemon-watch.c: production endpoints watched for drift */
/* (Re)starts a watch for each entry of the configuration's "watch". */
int daemon_watch_start(struct daemon *d);
/* Stops every watch, their current hours written to the store. */
void daemon_watch_stop(struct daemon *d);
/* "watch": [...] of `status`: each endpoint's drift, flag and re-tune. */
int daemon_watch_status_json(struct daemon *d, cJSON *resp);
/* The goodput_watch_* families of the metrics file. */
void daemon_watch_metrics(struct daemon *d, FILE *f);
