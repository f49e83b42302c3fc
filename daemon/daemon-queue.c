/* daemon-queue.c — the queue of studies and the runner of the one that runs.
 *
 * The store is the queue: studies run one at a time in submission order,
 * the head being the first study that is queued, running or paused. A
 * paused head holds the queue (that is what `goodput pause` means to an
 * operator); a head with a time window outside it waits, its runner stopped
 * so that the server under test is torn down and the trial in flight is
 * marked interrupted, to be redone when the window opens. Because every
 * state change is committed by the runner before it acts, a daemon killed
 * at any point restarts with the same head, the runner resumes it (trials
 * in flight redone, orphaned servers killed by their recorded process
 * group), and nothing is lost or measured twice.
 *
 * Scheduling is a deferred event: anything that may change the head (a
 * submit, a cancel, a runner that finished, the window timer) asks for it,
 * and the step runs once from the loop.
 *
 * A study that cannot go on for a cause that passes — the disk of the store
 * or of the logs is full, or a failure could not even be recorded, so that
 * the study is still open — is never failed for it and never retried in a
 * loop: the daemon waits ("waiting: disk full" in its status), 2 s after
 * the first time, twice as long after each failure in a row up to 5 min,
 * and resumes the study (its trials in flight redone) once it can. A trial
 * that finishes again ends the backoff.
 *
 * The database and its WAL are watched (store_check_files, every 2 s): a
 * WAL removed or replaced is written back and said in the journal; a
 * database file removed or replaced ends the study in flight (its servers
 * killed, nothing more recorded), and the daemon takes no more work and
 * answers nothing from a file that is no longer its database. */
#include "daemon-internal.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "deploy.h"
#include "engine-profile.h"
#include "json-util.h"
#include "log.h"

static bool study_is_open(enum store_study_state s)
{
	return s == STORE_STUDY_QUEUED || s == STORE_STUDY_RUNNING || s == STORE_STUDY_PAUSED;
}

int daemon_queue_count(struct daemon *d, size_t *ret)
{
	struct store_study *a = NULL;
	size_t n = 0, open = 0;
	int r;

	r = store_study_list(d->store, &a, &n, NULL);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (study_is_open(a[i].state))
			open++;
	store_study_array_free(a, n);
	*ret = open;
	return 0;
}

/* Parses the head's spec once per head (its window is checked every tick). */
static int load_head(struct daemon *d, const struct store_study *st, struct error *err)
{
	struct study *s = NULL;
	int r;

	if (d->head && d->head_id == st->id)
		return 0;
	d->head = study_free(d->head);
	d->head_id = 0;
	r = engine_profile_load_study(st->spec_json, st->engine, d->config->engines_dir, NULL, &s, err);
	if (r < 0)
		return r;
	d->head = s;
	d->head_id = st->id;
	return 0;
}

static void fail_study(struct daemon *d, const struct store_study *st, const char *msg)
{
	struct error err = { 0 };
	int r;

	log_error("study %s cannot run: %s", st->name, msg);
	snprintf(d->last_failure, sizeof(d->last_failure), "%s failed: %s", st->name, msg);
	r = store_study_set_state(d->store, st->id, STORE_STUDY_FAILED, msg, &err);
	if (r < 0)
		log_error("study %s: %s", st->name, error_str(&err, r));
}

static void on_runner_event(struct runner *r, const struct runner_event *ev, void *userdata);

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct daemon *d = userdata;

	d->retry_timer = sd_event_source_disable_unref(d->retry_timer);
	daemon_schedule(d);
	return 0;
}

/* The head cannot go on for now (why: "disk full: ..."): wait, longer each time. */
static void wait_and_retry(struct daemon *d, const char *name, const char *why)
{
	uint64_t delay = DAEMON_RETRY_FIRST_USEC << MIN(d->retries, 16u);
	int r;

	delay = MIN(delay, DAEMON_RETRY_MAX_USEC);
	d->retries++;
	d->retry_at_usec = mono_usec() + delay;
	d->state = DAEMON_WAITING;
	daemon_set_status(d, "waiting: %s: %s; trying again in %.0f s", name, why, usec_to_sec(delay));
	d->retry_timer = sd_event_source_disable_unref(d->retry_timer);
	r = sd_event_add_time_relative(d->event, &d->retry_timer, CLOCK_MONOTONIC, delay, USEC_PER_SEC / 10, on_retry,
				       d);
	if (r < 0) {
		log_warning_errno(r, "cannot arm the retry timer");
		return; /* the window tick schedules again */
	}
	(void)sd_event_source_set_description(d->retry_timer, "queue-retry");
}

/* Whether the study is still open in the store (a failure that could not
 * be recorded leaves it so). */
static bool still_open(struct daemon *d, int64_t id)
{
	struct store_study st = { 0 };
	bool open;

	if (store_study_get(d->store, id, &st, NULL) < 0)
		return true;
	open = study_is_open(st.state);
	store_study_done(&st);
	return open;
}

static int start_runner(struct daemon *d, const struct store_study *st, struct error *err)
{
	_cleanup_(runner_freep) struct runner *r = NULL;
	struct runner_options o;
	int k;

	runner_options_init(&o);
	o.engines_dir = d->config->engines_dir;
	o.log_dir = d->log_dir;
	o.dry_run = d->dry_run;
	o.max_trials = d->max_trials;
	k = runner_new(d->event, d->store, st->id, &o, &r, err);
	if (k < 0)
		return k;
	d->runner = TAKE_PTR(r);
	d->runner_study_id = st->id;
	d->state = DAEMON_RUNNING;
	log_info("study %s: %s", st->name, st->state == STORE_STUDY_QUEUED ? "starting" : "resuming");
	k = runner_start(d->runner, on_runner_event, d);
	if (k < 0) {
		d->runner = runner_free(d->runner);
		d->runner_study_id = 0;
		return error_set(err, k, "starting the runner: %s", strerror(-k));
	}
	return 0;
}

static void window_text(const struct study *s, char *buf, size_t size)
{
	snprintf(buf, size, "%02u:%02u-%02u:%02u", s->window.start_min / 60, s->window.start_min % 60,
		 s->window.end_min / 60, s->window.end_min % 60);
}

/* One look at the queue. Returns true when it should look again at once
 * (a study was failed on the way). */
static bool queue_step(struct daemon *d)
{
	struct store_study *a = NULL, *head = NULL;
	struct error err = { 0 };
	size_t n = 0;
	bool again = false;
	int r;

	daemon_answer_cache_clear(d);
	if (d->state == DAEMON_STOPPING || d->state == DAEMON_FAILED || d->runner)
		return false;
	if (d->retry_at_usec > mono_usec())
		return false; /* waiting for a passing cause: the retry timer schedules */
	d->retry_at_usec = 0;
	r = store_study_list(d->store, &a, &n, &err);
	if (r < 0) {
		log_error("the queue: %s", error_str(&err, r));
		return false;
	}
	for (size_t i = 0; i < n && !head; i++)
		if (study_is_open(a[i].state))
			head = &a[i];

	if (!head) {
		d->state = DAEMON_IDLE;
		d->head = study_free(d->head);
		d->head_id = 0;
		/* why the last study ended, when it failed: the operator's next question */
		if (d->last_failure[0])
			daemon_set_status(d, "idle: no study queued; %s", d->last_failure);
		else
			daemon_set_status(d, "idle: no study queued");
	} else if (head->state == STORE_STUDY_PAUSED) {
		d->state = DAEMON_PAUSED;
		daemon_set_status(d, "%s: paused ('goodput resume' continues it)", head->name);
	} else if ((r = load_head(d, head, &err)) < 0) {
		fail_study(d, head, error_str(&err, r));
		again = true;
	} else if (!study_in_window(d->head, real_usec())) {
		char w[32];

		window_text(d->head, w, sizeof(w));
		d->state = DAEMON_WAITING;
		daemon_set_status(d, "%s: waiting for its window %s", head->name, w);
	} else if ((r = start_runner(d, head, &err)) < 0) {
		if (r == -ENOSPC || r == -EDQUOT)
			wait_and_retry(d, head->name, error_str(&err, r));
		else {
			fail_study(d, head, error_str(&err, r));
			again = true;
		}
	}
	store_study_array_free(a, n);
	return again;
}

static int on_schedule(sd_event_source *s, void *userdata)
{
	struct daemon *d = userdata;

	/* Bounded: each round fails one study at most. */
	for (int i = 0; i < 64 && queue_step(d); i++)
		;
	return 0;
}

void daemon_schedule(struct daemon *d)
{
	daemon_metrics_changed(d);
	(void)sd_event_source_set_enabled(d->schedule_source, SD_EVENT_ONESHOT);
}

static int on_window_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct daemon *d = userdata;

	(void)sd_event_source_set_time_relative(s, DAEMON_WINDOW_TICK_USEC);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	if (d->state == DAEMON_WAITING)
		daemon_schedule(d);
	else if (d->runner && !d->window_stop && d->head && d->head_id == d->runner_study_id &&
		 !study_in_window(d->head, real_usec())) {
		struct runner_status st;

		runner_get_status(d->runner, &st);
		if (st.phase == RUNNER_PAUSED || st.phase == RUNNER_STOPPING || st.phase == RUNNER_FINISHED)
			return 0;
		log_info("study %s: its window closed, tearing down until it opens again", st.study_name);
		d->window_stop = true;
		if (runner_stop(d->runner) < 0)
			d->window_stop = false;
	}
	return 0;
}

int daemon_queue_init(struct daemon *d)
{
	int r;

	r = sd_event_add_defer(d->event, &d->schedule_source, on_schedule, d);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(d->schedule_source, SD_EVENT_OFF);
	(void)sd_event_source_set_description(d->schedule_source, "queue-schedule");
	r = sd_event_add_time_relative(d->event, &d->window_timer, CLOCK_MONOTONIC, DAEMON_WINDOW_TICK_USEC,
				       USEC_PER_SEC, on_window_tick, d);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(d->window_timer, "queue-window");
	return 0;
}

static void runner_finished(struct daemon *d, struct runner *r, enum runner_end end)
{
	struct runner_status st;
	struct error err = { 0 };
	int64_t id = d->runner_study_id;
	char name[STUDY_NAME_MAX + 1];
	int k;

	runner_get_status(r, &st);
	snprintf(name, sizeof(name), "%s", st.study_name ? st.study_name : "?");
	daemon_log_study_end(name, end, &st, d->state == DAEMON_STOPPING);
	if (end == RUNNER_END_DISK_FULL || (end == RUNNER_END_FAILED && d->state != DAEMON_STOPPING &&
					    d->state != DAEMON_FAILED && still_open(d, id))) {
		/* a cause that passes: the study waits, resumable, and is tried again later */
		char why[DAEMON_STATUS_MAX];

		snprintf(why, sizeof(why), "%s%s",
			 end == RUNNER_END_FAILED ? "its failure could not be recorded: " : "",
			 st.message ? st.message : "disk full");
		d->runner = runner_free(d->runner);
		d->runner_study_id = 0;
		d->window_stop = false;
		if (d->state == DAEMON_STOPPING) {
			(void)sd_event_exit(d->event, 0);
			return;
		}
		wait_and_retry(d, name, why);
		return;
	}
	if (end == RUNNER_END_FAILED)
		snprintf(d->last_failure, sizeof(d->last_failure), "%s failed: %s", name,
			 st.message ? st.message : "unknown error");
	else
		d->last_failure[0] = 0;
	if (end == RUNNER_END_DONE) {
		k = daemon_write_best(d, id, &err);
		if (k < 0 && k != -ENOENT)
			log_error("study %s: writing the best configuration: %s", name, error_str(&err, k));
	}
	if (d->state != DAEMON_STOPPING)
		daemon_report_refresh(d, name); /* the final report, without the progress header */
	/* The runner may be freed inside its FINISHED event. */
	d->runner = runner_free(d->runner);
	d->runner_study_id = 0;
	d->window_stop = false;
	/* A study's history and models are gone: give the memory back while
	 * idle, and libcurl too (goodputd loads it only for real trials). */
	if (daemon_curl_unload)
		daemon_curl_unload();
	(void)malloc_trim(0);
	if (d->state == DAEMON_STOPPING) {
		(void)sd_event_exit(d->event, 0);
		return;
	}
	d->state = DAEMON_IDLE;
	daemon_schedule(d);
}

static void on_runner_event(struct runner *r, const struct runner_event *ev, void *userdata)
{
	struct daemon *d = userdata;
	char buf[DAEMON_STATUS_MAX];

	if (ev->kind == RUNNER_EVENT_POINT_PROGRESS)
		return; /* twice a second per trial: nothing the daemon shows changes */
	/* The cached `best` answers need no clearing here: each holds the store's
	 * epoch it was computed at, and what a trial writes moves it. */
	daemon_metrics_changed(d);
	switch (ev->kind) {
	case RUNNER_EVENT_PHASE:
		daemon_log_trial_phase(ev);
		if (ev->status && runner_status_format(ev->status, buf, sizeof(buf)) >= 0) {
			if (d->state == DAEMON_STOPPING)
				daemon_set_status(d, "stopping: %s", buf);
			else
				daemon_set_status(d, "%s", buf);
		}
		if (ev->status && ev->status->phase == RUNNER_PAUSED && d->state == DAEMON_RUNNING)
			d->state = DAEMON_PAUSED;
		else if (ev->status && ev->status->phase != RUNNER_PAUSED && d->state == DAEMON_PAUSED)
			d->state = DAEMON_RUNNING;
		break;
	case RUNNER_EVENT_TRIAL_FINISHED:
		daemon_log_trial_finished(ev);
		if (ev->status && ev->status->study_name)
			daemon_report_refresh(d, ev->status->study_name);
		d->retries = 0; /* going again: a later wait starts short */
		break;
	case RUNNER_EVENT_LOAD_POINT:
	case RUNNER_EVENT_POINT_PROGRESS:
		break;
	case RUNNER_EVENT_FINISHED:
		runner_finished(d, r, ev->end);
		break;
	}
}

void daemon_queue_stop(struct daemon *d)
{
	struct runner_status st;

	d->state = DAEMON_STOPPING;
	(void)sd_notify(false, "STOPPING=1");
	daemon_set_status(d, "stopping");
	/* No new requests while the trial is torn down. */
	d->ctl = ctl_server_free(d->ctl);
	if (!d->runner) {
		(void)sd_event_exit(d->event, 0);
		return;
	}
	runner_get_status(d->runner, &st);
	if (st.phase == RUNNER_PAUSED) {
		/* Nothing runs; the study stays paused in the store. */
		d->runner = runner_free(d->runner);
		(void)sd_event_exit(d->event, 0);
		return;
	}
	daemon_arm_stop_timer(d);
	if (runner_stop(d->runner) < 0 && st.phase == RUNNER_FINISHED) {
		d->runner = runner_free(d->runner);
		(void)sd_event_exit(d->event, 0);
	}
}

/* The servers of a study's trials of several (a disaggregated
 * configuration's roles), recorded by role: ended as a single server is.
 * The runner that resumes the study clears their records. */
static void end_role_orphans(struct daemon *d, const struct store_study *st)
{
	struct store_role_server *rs = NULL;
	size_t n = 0;

	if (store_study_role_servers(d->store, st->id, &rs, &n, NULL) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (rs[i].pgid > 0 && deploy_end_orphan(rs[i].pgid, rs[i].identity) > 0)
			log_warning("study %s: killed the orphaned %s (process group %lld)", st->name, rs[i].role,
				    (long long)rs[i].pgid);
	store_role_server_array_free(rs, n);
}

void daemon_queue_kill_orphans(struct daemon *d)
{
	struct store_study *a = NULL;
	size_t n = 0;
	int r;

	r = store_study_list(d->store, &a, &n, NULL);
	if (r < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct store_trial *t = NULL;
		size_t nt = 0;

		if (a[i].state != STORE_STUDY_RUNNING && a[i].state != STORE_STUDY_PAUSED)
			continue;
		if (store_trial_history(d->store, a[i].id, &t, &nt, NULL) < 0)
			continue;
		for (size_t j = 0; j < nt; j++) {
			/* a finished trial's server may have been in its teardown */
			if (t[j].server_pgid <= 0)
				continue;
			if (deploy_end_orphan(t[j].server_pgid, t[j].server_identity) > 0)
				log_warning("study %s trial %u: killed the orphaned server (process group %lld)",
					    a[i].name, t[j].seq, (long long)t[j].server_pgid);
		}
		store_trial_array_free(t, nt);
		end_role_orphans(d, &a[i]);
		r = store_study_resume(d->store, a[i].id, NULL);
		if (r > 0)
			log_info("study %s: %d trial(s) interrupted by the last shutdown will be redone", a[i].name, r);
	}
	store_study_array_free(a, n);
}

/* ---- the database's files ---- */

static int on_store_watch(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct daemon *d = userdata;
	char msg[DAEMON_STATUS_MAX * 2];
	struct error err = { 0 };
	int r;

	(void)sd_event_source_set_time_relative(s, DAEMON_STORE_WATCH_USEC);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	if (d->state == DAEMON_FAILED)
		return 0;
	r = store_check_files(d->store, msg, sizeof(msg), &err);
	if (r < 0) {
		log_warning("checking the database's files: %s", error_str(&err, r));
		return 0;
	}
	if (r == STORE_FILES_WAL_RESTORED) {
		log_error("%s", msg);
		return 0;
	}
	if (r != STORE_FILES_LOST)
		return 0;
	log_error("%s; goodputd takes no more work", msg);
	d->state = DAEMON_FAILED;
	daemon_set_status(d, "failed: %s", msg);
	/* the study in flight can record nothing more: its servers end now */
	d->runner = runner_free(d->runner);
	d->runner_study_id = 0;
	d->retry_timer = sd_event_source_disable_unref(d->retry_timer);
	daemon_answer_cache_clear(d);
	daemon_metrics_changed(d);
	return 0;
}

int daemon_store_watch_start(struct daemon *d)
{
	int r;

	r = sd_event_add_time_relative(d->event, &d->store_watch_timer, CLOCK_MONOTONIC, DAEMON_STORE_WATCH_USEC,
				       USEC_PER_SEC / 10, on_store_watch, d);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(d->store_watch_timer, "store-watch");
	return 0;
}
