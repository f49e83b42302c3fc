/* daemon.c — goodputd's life cycle: start-up, the loop, signals, sd_notify
 * and configuration reloads (systemd's oomd is the model).
 *
 * Start-up opens everything that can fail first — configuration, state
 * directory, store, control socket — and only then, in daemon_run, tells
 * systemd READY=1, so a unit that reports ready really answers. The
 * watchdog is sd-event's own (sd_event_set_watchdog pings at half of
 * WATCHDOG_USEC), which proves the loop turns; a loop stuck in a blocking
 * call gets the daemon killed and restarted (Restart=on-failure). Signals
 * arrive as event sources: SIGTERM and SIGINT start a graceful stop, a
 * second one forces it; SIGHUP re-reads goodputd.json and keeps the old
 * configuration when the new one is invalid. */
#include "daemon-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "parse.h"

const char *daemon_state_to_string(enum daemon_state s)
{
	static const char *const names[] = {
		[DAEMON_IDLE] = "idle",       [DAEMON_RUNNING] = "running",   [DAEMON_PAUSED] = "paused",
		[DAEMON_WAITING] = "waiting", [DAEMON_STOPPING] = "stopping", [DAEMON_FAILED] = "failed",
	};

	return s < ELEMENTSOF(names) ? names[s] : "unknown";
}

void daemon_set_status(struct daemon *d, const char *fmt, ...)
{
	char buf[DAEMON_STATUS_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (strcmp(buf, d->status) == 0)
		return;
	memcpy(d->status, buf, sizeof(buf));
	log_debug("status: %s", buf);
	(void)sd_notifyf(false, "STATUS=%s", buf);
}

static struct ctl_limits control_limits(const struct daemon_config *c)
{
	return (struct ctl_limits){
		.max_connections = c->limits.max_connections,
		.max_connections_per_uid = c->limits.max_connections_per_uid,
		.reserved_connections = c->limits.reserved_connections,
		.max_request_bytes = c->limits.max_request_bytes,
		.idle_timeout_usec = c->limits.idle_timeout_usec,
	};
}

static void apply_config(struct daemon *d)
{
	struct ctl_limits l = control_limits(d->config);

	if (!d->ctl)
		return;
	ctl_server_set_limits(d->ctl, &l);
	ctl_server_set_group(d->ctl, d->config->socket_group != NULL, d->config->socket_gid);
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct daemon *d = userdata;
	struct daemon_config *c = NULL;
	struct error err = { 0 };
	int r;

	(void)sd_notifyf(false, "RELOADING=1\nSTATUS=reloading %s", d->config_path);
	r = daemon_config_load(d->config_path, !d->config_required, &c, &err);
	if (r < 0)
		log_error("reload: %s; keeping the configuration in force", error_str(&err, r));
	else {
		daemon_config_free(d->config);
		d->config = c;
		apply_config(d);
		(void)daemon_watch_start(d);
		daemon_metrics_changed(d);
		log_info("reloaded %s", d->config_path);
	}
	(void)sd_notifyf(false, "READY=1\nSTATUS=%s", d->status);
	return 0;
}

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct daemon *d = userdata;

	if (d->state == DAEMON_STOPPING) {
		log_warning("second %s: exiting without waiting for the trial's teardown",
			    strsignal((int)si->ssi_signo));
		d->runner = runner_free(d->runner); /* kills the server's process group */
		return sd_event_exit(d->event, 0);
	}
	log_info("%s: stopping", strsignal((int)si->ssi_signo));
	daemon_queue_stop(d);
	return 0;
}

/* A debugging aid for the watchdog test (tests/daemon/test-goodputd-nspawn.sh):
 * when $GOODPUTD_DEBUG_STALL_SECONDS is set, SIGUSR1 blocks the loop for that
 * long on purpose, so that the watchdog pings stop and systemd kills and
 * restarts the service. Without the variable SIGUSR1 keeps its default
 * action and nothing here is reachable. */
static int on_debug_stall(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct daemon *d = userdata;
	uint64_t end = mono_usec() + d->debug_stall_usec;

	log_warning("SIGUSR1 with GOODPUTD_DEBUG_STALL_SECONDS set: stalling the loop for %.1f s",
		    usec_to_sec(d->debug_stall_usec));
	for (uint64_t now = mono_usec(); now < end; now = mono_usec()) {
		struct timespec ts = { .tv_sec = (time_t)((end - now) / USEC_PER_SEC),
				       .tv_nsec = (long)((end - now) % USEC_PER_SEC) * 1000 };

		(void)nanosleep(&ts, NULL);
	}
	log_info("the stall is over");
	return 0;
}

static int setup_debug_stall(struct daemon *d, struct error *err)
{
	const char *e = getenv("GOODPUTD_DEBUG_STALL_SECONDS");
	sigset_t ss;
	uint32_t sec;
	int r;

	if (!e || !*e)
		return 0;
	r = parse_u32("GOODPUTD_DEBUG_STALL_SECONDS", e, 1, 3600, &sec, err);
	if (r < 0)
		return r;
	d->debug_stall_usec = (uint64_t)sec * USEC_PER_SEC;
	sigemptyset(&ss);
	sigaddset(&ss, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
		return error_set(err, -errno, "sigprocmask: %s", strerror(errno));
	r = sd_event_add_signal(d->event, &d->sig_stall, SIGUSR1, on_debug_stall, d);
	if (r < 0)
		return error_set(err, r, "signal source: %s", strerror(-r));
	(void)sd_event_source_set_description(d->sig_stall, "signal-debug-stall");
	log_warning("debugging: SIGUSR1 stalls the loop for %u s (GOODPUTD_DEBUG_STALL_SECONDS)", sec);
	return 0;
}

static int on_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct daemon *d = userdata;

	log_warning("the trial did not finish its teardown in time: exiting anyway");
	d->runner = runner_free(d->runner);
	return sd_event_exit(d->event, 0);
}

/* $STATE_DIRECTORY may list several paths separated by ':'; the first is ours. */
static int default_state_dir(char **ret)
{
	const char *e = getenv("STATE_DIRECTORY");
	char *p;

	if (e && *e)
		p = strndup(e, strcspn(e, ":"));
	else
		p = strdup(DAEMON_DEFAULT_STATE_DIR);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

static int make_dir(const char *path, struct error *err)
{
	if (mkdir(path, 0750) < 0 && errno != EEXIST)
		return error_set(err, -errno, "%s: %s", path, strerror(errno));
	return 0;
}

static int join_path(const char *a, const char *b, char **ret)
{
	if (asprintf(ret, "%s/%s", a, b) < 0)
		return -ENOMEM;
	return 0;
}

/* One daemon per database: a second one would take the first one's servers
 * for orphans and kill them, and insert the same trials twice. The store
 * locks the file itself (STORE_OPEN_WRITER), whatever path names it, and
 * holds the lock while it is open. */
static int open_store(struct daemon *d, struct error *err)
{
	struct store_open_options so = { .flags = STORE_OPEN_WRITER };
	struct lock_holder h = { 0 };
	int r;

	so.holder = &h;
	r = store_open(d->db_path, &so, &d->store, err);
	if (r == -EBUSY && h.pid > 0)
		return error_set(err, r,
				 "another %s (pid %d) uses this state directory (%s): its database %s is locked",
				 h.comm[0] ? h.comm : "goodputd", (int)h.pid, d->state_dir, d->db_path);
	if (r == -EBUSY)
		return error_set(err, r, "another process uses this state directory (%s): its database %s is locked",
				 d->state_dir, d->db_path);
	return r;
}

static int setup_paths(struct daemon *d, const struct daemon_options *o, struct error *err)
{
	int r;

	if (o->state_dir)
		d->state_dir = strdup(o->state_dir);
	else if (default_state_dir(&d->state_dir) < 0)
		d->state_dir = NULL;
	if (!d->state_dir || join_path(d->state_dir, "goodput.db", &d->db_path) < 0 ||
	    join_path(d->state_dir, "logs", &d->log_dir) < 0 || join_path(d->state_dir, "best", &d->best_dir) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	r = make_dir(d->state_dir, err);
	if (r >= 0)
		r = make_dir(d->log_dir, err);
	if (r >= 0)
		r = make_dir(d->best_dir, err);
	return r;
}

/* Room for the connection limit plus the study's own files and sockets. */
static void raise_fd_limit(unsigned want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : MIN((rlim_t)want, rl.rlim_max);
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

static int setup_socket(struct daemon *d, const struct daemon_options *o, struct error *err)
{
	struct ctl_limits l = control_limits(d->config);
	const char *path = o->socket_path ? o->socket_path : CTL_DEFAULT_SOCKET;
	int fd = -1, r;
	bool bound = false;

	r = ctl_listen_fds(&fd, err);
	if (r < 0)
		return r;
	if (r == 0) {
		gid_t gid = d->config->socket_group ? d->config->socket_gid : (gid_t)-1;

		r = ctl_listen_unix(path, o->socket_mode, gid, &fd, err);
		if (r < 0)
			return r;
		bound = true;
		log_info("listening on %s", path);
	} else
		log_info("listening on the socket systemd passed");
	r = ctl_server_new(d->event, fd, &l, daemon_handle_request, d, &d->ctl);
	if (r < 0) {
		if (bound)
			(void)unlink(path);
		return error_set(err, r, "control socket: %s", strerror(-r));
	}
	if (bound && ctl_server_set_unlink_path(d->ctl, path) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	apply_config(d);
	return 0;
}

static int setup_signals(struct daemon *d, struct error *err)
{
	sigset_t ss;
	int r;

	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigaddset(&ss, SIGCHLD); /* the deployer's children, through sd-event */
	if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
		return error_set(err, -errno, "sigprocmask: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	r = sd_event_add_signal(d->event, &d->sig_term, SIGTERM, on_sigterm, d);
	if (r >= 0)
		r = sd_event_add_signal(d->event, &d->sig_int, SIGINT, on_sigterm, d);
	if (r >= 0)
		r = sd_event_add_signal(d->event, &d->sig_hup, SIGHUP, on_sighup, d);
	if (r < 0)
		return error_set(err, r, "signal sources: %s", strerror(-r));
	(void)sd_event_source_set_description(d->sig_term, "signal-term");
	(void)sd_event_source_set_description(d->sig_int, "signal-int");
	(void)sd_event_source_set_description(d->sig_hup, "signal-hup");
	return 0;
}

int daemon_new(const struct daemon_options *o, struct daemon **ret, struct error *err)
{
	_cleanup_(daemon_freep) struct daemon *d = calloc(1, sizeof(*d));
	int r;

	if (!d)
		return error_set(err, -ENOMEM, "out of memory");
	d->dry_run = o->dry_run;
	d->max_trials = o->max_trials;
	d->start_usec = mono_usec();
	d->config_required = o->config_path != NULL;
	d->config_path = strdup(o->config_path ? o->config_path : DAEMON_CONFIG_DEFAULT_PATH);
	if (!d->config_path)
		return error_set(err, -ENOMEM, "out of memory");
	r = daemon_config_load(d->config_path, !d->config_required, &d->config, err);
	if (r < 0)
		return r;
	r = setup_paths(d, o, err);
	if (r < 0)
		return r;
	r = open_store(d, err);
	if (r < 0)
		return r;
	r = sd_event_default(&d->event);
	if (r < 0)
		return error_set(err, r, "sd_event_default: %s", strerror(-r));
	r = setup_signals(d, err);
	if (r >= 0)
		r = setup_debug_stall(d, err);
	if (r < 0)
		return r;
	raise_fd_limit(d->config->limits.max_connections + 256);
	r = setup_socket(d, o, err);
	if (r < 0)
		return r;
	r = daemon_queue_init(d);
	if (r < 0)
		return error_set(err, r, "event sources: %s", strerror(-r));
	*ret = TAKE_PTR(d);
	return 0;
}

int daemon_run(struct daemon *d)
{
	int r;

	daemon_queue_kill_orphans(d);
	r = sd_event_set_watchdog(d->event, true);
	if (r < 0)
		log_warning_errno(r, "watchdog");
	r = sd_event_add_time(d->event, &d->stop_timer, CLOCK_MONOTONIC, UINT64_MAX, USEC_PER_SEC, on_stop_timeout, d);
	if (r < 0)
		return log_error_errno(r, "stop timer");
	(void)sd_event_source_set_enabled(d->stop_timer, SD_EVENT_OFF);
	(void)sd_event_source_set_description(d->stop_timer, "stop-grace");

	daemon_set_status(d, "starting: resuming the queue");
	daemon_schedule(d);
	r = daemon_metrics_init(d);
	if (r < 0)
		return log_error_errno(r, "metrics timer");
	r = daemon_watch_start(d);
	if (r < 0)
		return log_error_errno(r, "watch");
	r = daemon_store_watch_start(d);
	if (r < 0)
		return log_error_errno(r, "the database's watch");
	log_info("goodputd ready (state %s%s)", d->state_dir, d->dry_run ? ", dry run" : "");
	(void)sd_notifyf(false, "READY=1\nSTATUS=%s", d->status);

	r = sd_event_loop(d->event);
	if (r < 0)
		return log_error_errno(r, "event loop");
	return 0;
}

struct daemon *daemon_free(struct daemon *d)
{
	if (!d)
		return NULL;
	d->runner = runner_free(d->runner);
	d->ctl = ctl_server_free(d->ctl);
	daemon_watch_stop(d);
	daemon_report_jobs_free(d);
	daemon_answer_cache_clear(d);
	study_free(d->head);
	sd_event_source_disable_unref(d->sig_term);
	sd_event_source_disable_unref(d->sig_int);
	sd_event_source_disable_unref(d->sig_hup);
	sd_event_source_disable_unref(d->sig_stall);
	sd_event_source_disable_unref(d->schedule_source);
	sd_event_source_disable_unref(d->window_timer);
	sd_event_source_disable_unref(d->stop_timer);
	sd_event_source_disable_unref(d->metrics_timer);
	sd_event_source_disable_unref(d->retry_timer);
	sd_event_source_disable_unref(d->store_watch_timer);
	store_close(d->store);
	daemon_config_free(d->config);
	sd_event_unref(d->event);
	free(d->config_path);
	free(d->state_dir);
	free(d->db_path);
	free(d->log_dir);
	free(d->best_dir);
	free(d);
	return NULL;
}

void daemon_arm_stop_timer(struct daemon *d)
{
	(void)sd_event_source_set_time_relative(d->stop_timer, DAEMON_STOP_GRACE_USEC);
	(void)sd_event_source_set_enabled(d->stop_timer, SD_EVENT_ONESHOT);
}
