/* deploy-startup.c — the phase every deployment goes through, whatever
 * starts the server: from "started" to READY or to a classified failure,
 * and from a teardown to STOPPED or FAILED.
 *
 * Start-up. A timer polls: first for where the server listens (the port
 * given in the config, the line a server told to bind port 0 announces in
 * its log, or what the method learns its own way), then for its health —
 * the health path answering 200 to a GET through the probe's HTTP client
 * (libcurl on the loop: host names resolve without blocking, https works),
 * or the method's own check. One check is in flight at a time. A second
 * timer bounds the whole start-up; when it fires, the deployment fails
 * with what never came (the address, or a healthy answer) and the last lines
 * of the log, and is torn down.
 *
 * A server that ends by itself while starting or serving is classified
 * here: host busy when its log says its GPUs are held by another process
 * (the profile's gpu_busy patterns, or deploy_log_matches_busy), out of
 * memory when its log (this run's part of it) matches one of the engine
 * profile's out-of-memory patterns, crashed otherwise, with how it ended and
 * the log's last lines, and with the cause its profile's failure patterns
 * read in the log (the weights do not fit, the KV cache for max_model_len
 * does not fit — with the length the engine suggests — no memory for cache
 * blocks). A failure no configuration can avoid is a setup failure: a
 * program that could not be run at all (deploy_cannot_run: the method saw
 * an exec fail, an exit status of 126 or 127, the service manager refuse
 * the unit), or a port the profile fixes held by another process. This is
 * the one place where a server's end becomes a failure class. What a health
 * answer means (ready, still loading, unhealthy) is the profile's too.
 *
 * Teardown. The method begins it (SIGTERM to a group, StopUnit, the
 * teardown command); a timer then waits until the method says everything it
 * started has ended and, for servers on this host, nothing accepts
 * connections on the port any more, so that the next trial finds the host
 * clean. It does not wait until the port could be bound again: the old
 * server's connections sit in TIME_WAIT for a minute (or FIN_WAIT2, when the
 * probe's kept-alive connections were not closed), and the next trial takes
 * a fresh port from the kernel instead. When the teardown takes longer than
 * the method allows, the deployment reports anyway and says what was left
 * in its message. */
#include "deploy-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "time-util.h"

#define TAIL_LINES          20
#define FIRST_POLL_USEC     (50 * USEC_PER_MSEC)
#define ADDRESS_POLL_USEC   (100 * USEC_PER_MSEC)
#define HEALTH_TIMEOUT_USEC (5 * USEC_PER_SEC)
#define HEALTH_BODY_MAX     4096
#define REAP_INTERVAL_USEC  (20 * USEC_PER_MSEC)
#define REAP_SLACK_USEC     (2 * USEC_PER_SEC) /* for a SIGKILL at the limit to take effect */

/* ---- the log ---- */

int deploy_log_open(struct deployment *d, const char *what, char *const *argv, char *const *env, struct error *err)
{
	struct engine_command shown = { .argv = (char **)argv, .env = (char **)env };
	_cleanup_(freep) char *cmdline = what ? engine_command_format(&shown) : NULL;
	_cleanup_(closep) int fd = -1;
	struct stat st;

	fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0)
		return error_set(err, -errno, "deploy: cannot open the log %s: %s", d->log_path, strerror(errno));
	/* Say in the log what ran, for whoever reads it later. */
	if (what)
		(void)dprintf(fd, "==> goodput: %s: %s\n", what, cmdline ? cmdline : argv[0]);
	if (!d->log_marked) {
		if (fstat(fd, &st) < 0)
			return error_set(err, -errno, "deploy: %s: %s", d->log_path, strerror(errno));
		d->log_offset = d->scan_offset = (uint64_t)st.st_size;
		d->log_marked = true;
	}
	return TAKE_FD(fd);
}

char *deploy_tail(struct deployment *d)
{
	char *t = NULL;

	if (deploy_log_tail(d->log_path, d->log_offset, TAIL_LINES, &t) < 0)
		return NULL;
	return t;
}

/* ---- failures ---- */

void deploy_abort(struct deployment *d, enum deploy_failure f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	deploy_set_failurev(d, f, fmt, ap);
	va_end(ap);
	deploy_teardown(d, DEPLOY_FAILED);
}

/* Why a server that ended did so: the failure class, its cause from the
 * log (the profile's failure patterns) and a note for the message. A GPU
 * another process holds is not the configuration's fault: host busy, never
 * "out of memory". A port held by another process is a setup failure when
 * the deployer did not choose it (the profile's argv fixes it): every
 * configuration would meet it; a port the deployer found free and lost in
 * the moment before the server bound it is a crash of this trial only. */
static enum deploy_failure classify_end(struct deployment *d, char *note, size_t size)
{
	if (!d->port_chosen && deploy_log_matches_port_in_use(d, d->log_offset)) {
		snprintf(note, size,
			 " (its port is held by another process, and the engine profile fixes the port: no "
			 "configuration can start while it is)");
		return DEPLOY_FAILURE_SETUP;
	}
	deploy_log_classify(d, d->log_offset, &d->cause, &d->suggested_len);
	if (d->cause == ENGINE_FAILURE_GPU_BUSY || deploy_log_matches_busy(d, d->log_offset)) {
		d->cause = ENGINE_FAILURE_GPU_BUSY;
		snprintf(note, size, " (host busy: its GPUs are held by another process)");
		return DEPLOY_FAILURE_HOST_BUSY;
	}
	switch (d->cause) {
	case ENGINE_FAILURE_NONE:
	case ENGINE_FAILURE_GPU_BUSY:
		note[0] = 0;
		return DEPLOY_FAILURE_CRASHED;
	case ENGINE_FAILURE_WEIGHTS:
		snprintf(note, size, " (out of memory: the weights do not fit)");
		break;
	case ENGINE_FAILURE_KV_CACHE:
		if (d->suggested_len > 0)
			snprintf(note, size,
				 " (out of memory: the KV cache for max_model_len does not fit; the engine suggests "
				 "max_model_len %" PRIu64 ")",
				 d->suggested_len);
		else
			snprintf(note, size, " (out of memory: the KV cache for max_model_len does not fit)");
		break;
	case ENGINE_FAILURE_CACHE_BLOCKS:
		snprintf(note, size, " (out of memory: no memory left for cache blocks or activations)");
		break;
	default:
		snprintf(note, size, " (out of memory)");
		break;
	}
	return DEPLOY_FAILURE_OOM;
}

void deploy_server_ended(struct deployment *d, const char *how)
{
	_cleanup_(freep) char *t = NULL;
	enum deploy_failure f;
	char note[256];

	if (d->state != DEPLOY_STARTING && d->state != DEPLOY_READY)
		return;
	t = deploy_tail(d);
	f = classify_end(d, note, sizeof(note));
	deploy_abort(d, f, "%s %s%s; last log lines:\n%s", how,
		     d->state == DEPLOY_STARTING ? "during start-up" : "while serving", note, t ? t : "");
}

void deploy_cannot_run(struct deployment *d, const char *how)
{
	_cleanup_(freep) char *t = NULL;

	if (d->state != DEPLOY_STARTING)
		return;
	t = deploy_tail(d);
	deploy_abort(d, DEPLOY_FAILURE_SETUP,
		     "%s during start-up (a program could not be run: the same for every "
		     "configuration); last log lines:\n%s",
		     how, t ? t : "");
}

static int on_startup_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	_cleanup_(freep) char *t = NULL;
	char missing[512];

	if (d->state != DEPLOY_STARTING)
		return 0;
	if (!d->address_known)
		snprintf(missing, sizeof(missing), "%s",
			 d->ops->no_address_text ? d->ops->no_address_text : "the server announced no port");
	else if (d->health_command)
		snprintf(missing, sizeof(missing), "the health command never succeeded");
	else if (d->last_health_status == 0)
		snprintf(missing, sizeof(missing), "%s never answered", d->health_path);
	else
		snprintf(missing, sizeof(missing), "%s was not ready (last answer %ld: %s)", d->health_path,
			 d->last_health_status,
			 engine_profile_health_state(d->profile, d->last_health_status) == ENGINE_HEALTH_LOADING
				 ? "still loading"
				 : "unhealthy");
	t = deploy_tail(d);
	deploy_abort(d, DEPLOY_FAILURE_STARTUP_TIMEOUT, "%s within %.0f s; last log lines:\n%s", missing,
		     usec_to_sec(d->startup_timeout_usec), t ? t : "");
	return 0;
}

/* ---- readiness ---- */

static void became_ready(struct deployment *d)
{
	deploy_startup_end(d);
	deploy_set_state(d, DEPLOY_READY);
}

void deploy_health_done(struct deployment *d, bool healthy)
{
	d->health_in_flight = false;
	if (healthy && d->state == DEPLOY_STARTING)
		became_ready(d);
}

/* What an answer means is the engine's: llama.cpp's 503 is "still
 * loading", vLLM's would be "unhealthy"; either way only "ready" ends the
 * start-up, and the last answer is told when it times out. */
static void on_health_get(struct probe_client *c, int r, long status, const char *body, size_t len, const char *error,
			  void *userdata)
{
	struct deployment *d = userdata;

	if (r >= 0 && status > 0)
		d->last_health_status = status;
	deploy_health_done(d, r >= 0 && engine_profile_health_state(d->profile, status) == ENGINE_HEALTH_READY);
}

int deploy_health_get(struct deployment *d, struct error *err)
{
	struct probe_client_config cfg;
	int r;

	if (!d->client) {
		probe_client_config_init(&cfg);
		cfg.base_url = d->base_url;
		cfg.connect_timeout_usec = HEALTH_TIMEOUT_USEC;
		r = probe_client_new(d->event, &cfg, &d->client, err);
		if (r < 0)
			return r;
	}
	/* Connection refused (not listening yet) comes back as a failed GET: the next poll tries again. */
	if (probe_client_get(d->client, d->health_path, HEALTH_BODY_MAX, HEALTH_TIMEOUT_USEC, on_health_get, d) < 0)
		d->health_in_flight = false;
	return 0;
}

static bool find_address(struct deployment *d)
{
	if (d->ops->find_address)
		return d->ops->find_address(d);
	if (d->port)
		return true;
	return deploy_log_scan(d, deploy_match_announce);
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct error err = { 0 };
	int r;

	if (!d->address_known)
		d->address_known = find_address(d);
	if (d->state != DEPLOY_STARTING)
		return 0; /* find_address failed the deployment */
	if (d->address_known && !d->health_in_flight) {
		d->health_in_flight = true;
		r = d->ops->check_health ? d->ops->check_health(d, &err) : deploy_health_get(d, &err);
		if (r < 0) {
			/* the health command cannot be run (or no client made): whatever the configuration */
			deploy_abort(d, DEPLOY_FAILURE_SETUP, "cannot check the health of %s: %s", d->base_url,
				     error_str(&err, r));
			return 0;
		}
		if (d->state != DEPLOY_STARTING)
			return 0;
	}
	(void)sd_event_source_set_time(s, mono_usec() + (d->address_known
								 ? d->health_interval_usec
								 : MIN(d->health_interval_usec, ADDRESS_POLL_USEC)));
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

int deploy_startup_begin(struct deployment *d, struct error *err)
{
	int r;

	r = sd_event_add_time_relative(d->event, &d->timeout_source, CLOCK_MONOTONIC, d->startup_timeout_usec, 1000,
				       on_startup_timeout, d);
	if (r >= 0) {
		(void)sd_event_source_set_description(d->timeout_source, "deploy-startup-timeout");
		r = sd_event_add_time_relative(d->event, &d->poll_source, CLOCK_MONOTONIC,
					       MIN(d->health_interval_usec, FIRST_POLL_USEC), 1000, on_poll, d);
	}
	if (r < 0)
		return error_set(err, r, "deploy: cannot arm timers: %s", strerror(-r));
	(void)sd_event_source_set_description(d->poll_source, "deploy-poll");
	return 0;
}

int deploy_job_running(struct deployment *d)
{
	struct error err = { 0 };
	int r;

	if (d->state != DEPLOY_PENDING)
		return 0;
	d->job_ran = true;
	d->start_usec = mono_usec();
	deploy_set_state(d, DEPLOY_STARTING);
	r = deploy_startup_begin(d, &err);
	if (r < 0)
		deploy_abort(d, DEPLOY_FAILURE_CRASHED, "%s", err.msg);
	return r;
}

void deploy_startup_end(struct deployment *d)
{
	d->poll_source = sd_event_source_disable_unref(d->poll_source);
	d->timeout_source = sd_event_source_disable_unref(d->timeout_source);
	if (d->client)
		probe_client_cancel(d->client, d);
	d->health_in_flight = false;
}

/* ---- teardown ---- */

static int on_reap(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	bool gone = d->ops->gone(d);
	bool port_closed = !d->ops->wait_port_closed || !d->port || !deploy_port_accepts(d->host, d->port);
	uint64_t now = mono_usec();

	if (!(gone && port_closed) && now < d->reap_deadline_usec) {
		(void)sd_event_source_set_time(s, now + REAP_INTERVAL_USEC);
		(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
		return 0;
	}
	if (!gone)
		deploy_append_message(d, "the server did not stop in time");
	else if (!port_closed)
		deploy_append_message(d, "port %u still accepts connections after teardown", d->port);
	d->reap_source = sd_event_source_disable_unref(d->reap_source);
	deploy_set_state(d, d->final_state);
	return 0;
}

void deploy_teardown(struct deployment *d, enum deploy_state final)
{
	uint64_t limit = d->ops->teardown_usec ? d->ops->teardown_usec(d) : d->stop_timeout_usec;
	int r;

	if (d->state == DEPLOY_STOPPING || d->state == DEPLOY_STOPPED || d->state == DEPLOY_FAILED)
		return;
	deploy_startup_end(d);
	d->state = DEPLOY_STOPPING;
	d->final_state = final;
	d->ops->terminate(d);
	d->reap_deadline_usec = mono_usec() + limit + REAP_SLACK_USEC;
	r = sd_event_add_time(d->event, &d->reap_source, CLOCK_MONOTONIC, mono_usec(), 1000, on_reap, d);
	if (r < 0) {
		/* Cannot wait: report now rather than hang. */
		deploy_set_state(d, final);
		return;
	}
	(void)sd_event_source_set_description(d->reap_source, "deploy-reap");
}
