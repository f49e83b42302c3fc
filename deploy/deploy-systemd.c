/* deploy-systemd.c — the `systemd` deployer: the server as a transient
 * service unit, created and followed through sd-bus on the caller's loop.
 *
 * StartTransientUnit creates "goodput-<study>-<trial>.service" with the
 * rendered argv as ExecStart (no shell), the engine's environment,
 * KillMode=control-group (stopping it ends every process the server forked),
 * Type=exec (the start job fails when the program cannot be executed),
 * stdout and stderr appended to the trial's log (so out-of-memory patterns,
 * announce lines and the last lines of a failure come from one place, as
 * with exec), and CollectMode=inactive-or-failed so that nothing is left
 * loaded after the unit ends, even when it failed.
 *
 * The unit's state is followed through D-Bus signals: PropertiesChanged on
 * the unit's object (ActiveState) and the manager's JobRemoved for the start
 * job; the manager is asked to Subscribe first. Readiness is the profile's
 * health path answering 200 (libcurl on the loop), after the announce line
 * when the server was told to pick its own port. Teardown is StopUnit; the
 * deployment is STOPPED once the unit is inactive and the port is free.
 * Either the system's service manager (root) or the user's (deploy.user)
 * is used. Only the unit this deployer created is ever stopped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "client.h"
#include "deploy-internal.h"
#include "macro.h"
#include "time-util.h"

#define SD_DEST        "org.freedesktop.systemd1"
#define SD_PATH        "/org/freedesktop/systemd1"
#define SD_MANAGER     "org.freedesktop.systemd1.Manager"
#define TAIL_LINES     20
#define PORT_WAIT_USEC (10 * USEC_PER_SEC)

struct systemd_state {
	sd_bus *bus;
	char *unit_path;
	char *start_job;
	sd_bus_slot *props_slot, *jobs_slot, *call_slot;
	sd_event_source *poll_source, *timeout_source, *reap_source;
	uint64_t log_offset, scan_offset, reap_deadline_usec;
	struct probe_client *client;
	bool health_in_flight, unit_ended, stop_sent;
	bool started; /* the start job finished or the unit was seen (de)activating: "inactive" now means it ended */
	enum deploy_state final_state;
};

static struct systemd_state *S(struct deployment *d)
{
	return d->impl;
}

static char *tail(struct deployment *d)
{
	char *t = NULL;

	if (deploy_log_tail(d->log_path, S(d)->log_offset, TAIL_LINES, &t) < 0)
		return NULL;
	return t;
}

static void stop_watching(struct deployment *d)
{
	struct systemd_state *x = S(d);

	x->poll_source = sd_event_source_disable_unref(x->poll_source);
	x->timeout_source = sd_event_source_disable_unref(x->timeout_source);
	if (x->client)
		probe_client_cancel(x->client, d);
	x->health_in_flight = false;
}

/* ---- teardown ---- */

static int on_reap(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct systemd_state *x = S(d);
	bool port_free = !d->port || deploy_port_is_free(d->host, d->port);

	if (!x->unit_ended || (!port_free && mono_usec() < x->reap_deadline_usec)) {
		if (x->unit_ended || mono_usec() < x->reap_deadline_usec) {
			(void)sd_event_source_set_time(s, mono_usec() + 50 * USEC_PER_MSEC);
			(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
			return 0;
		}
	}
	if (!x->unit_ended || !port_free) {
		char *m = NULL;
		if (asprintf(&m, "%s%s%s", d->message ? d->message : "", d->message ? "; " : "",
			     !x->unit_ended ? "the unit did not stop in time"
					    : "the port is still in use after teardown") >= 0) {
			free(d->message);
			d->message = m;
		}
	}
	x->reap_source = sd_event_source_disable_unref(x->reap_source);
	deploy_set_state(d, x->final_state);
	return 0;
}

static void begin_reap(struct deployment *d)
{
	struct systemd_state *x = S(d);

	if (x->reap_source)
		return;
	x->reap_deadline_usec = mono_usec() + d->stop_timeout_usec + PORT_WAIT_USEC;
	if (sd_event_add_time(d->event, &x->reap_source, CLOCK_MONOTONIC, mono_usec(), 1000, on_reap, d) < 0) {
		deploy_set_state(d, x->final_state);
		return;
	}
	(void)sd_event_source_set_description(x->reap_source, "deploy-systemd-reap");
}

static void send_stop(struct deployment *d)
{
	struct systemd_state *x = S(d);

	if (x->stop_sent || x->unit_ended)
		return;
	x->stop_sent = true;
	/* The reply carries only the stop job; the end is seen through the signals. */
	(void)sd_bus_call_method_async(x->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "StopUnit", NULL, NULL, "ss",
				       d->unit_name, "replace");
}

static void begin_terminate(struct deployment *d, enum deploy_state final)
{
	struct systemd_state *x = S(d);

	stop_watching(d);
	x->final_state = final;
	d->state = DEPLOY_STOPPING;
	send_stop(d);
	begin_reap(d);
}

/* The unit ended (inactive or failed): classify when it was not asked to. */
static void unit_ended(struct deployment *d, const char *how)
{
	struct systemd_state *x = S(d);
	_cleanup_(freep) char *t = NULL;
	bool oom;

	if (x->unit_ended)
		return;
	x->unit_ended = true;
	if (d->state != DEPLOY_STARTING && d->state != DEPLOY_READY)
		return;
	t = tail(d);
	oom = deploy_log_matches_oom(d, x->log_offset);
	deploy_set_failure(d, oom ? DEPLOY_FAILURE_OOM : DEPLOY_FAILURE_CRASHED, "unit %s %s %s%s; last log lines:\n%s",
			   d->unit_name, how, d->state == DEPLOY_STARTING ? "during start-up" : "while serving",
			   oom ? " (out of memory)" : "", t ? t : "");
	/* A failed transient unit stays loaded until reset: let it go. */
	(void)sd_bus_call_method_async(x->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "ResetFailedUnit", NULL, NULL, "s",
				       d->unit_name);
	begin_terminate(d, DEPLOY_FAILED);
}

/* ---- signals ---- */

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct deployment *d = userdata;
	const char *iface = NULL, *name = NULL, *state = NULL;
	int r;

	r = sd_bus_message_read(m, "s", &iface);
	if (r < 0 || strcmp(iface, "org.freedesktop.systemd1.Unit") != 0)
		return 0;
	r = sd_bus_message_enter_container(m, 'a', "{sv}");
	if (r < 0)
		return 0;
	while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
		if (sd_bus_message_read(m, "s", &name) < 0)
			return 0;
		if (strcmp(name, "ActiveState") == 0) {
			if (sd_bus_message_read(m, "v", "s", &state) < 0)
				return 0;
		} else if (sd_bus_message_skip(m, "v") < 0)
			return 0;
		if (sd_bus_message_exit_container(m) < 0)
			return 0;
	}
	if (!state)
		return 0;
	/* A transient unit is announced inactive before it starts: that one means nothing. */
	if (strcmp(state, "failed") == 0)
		unit_ended(d, "failed");
	else if (strcmp(state, "inactive") == 0 && S(d)->started)
		unit_ended(d, "exited");
	else if (strcmp(state, "inactive") != 0)
		S(d)->started = true;
	return 0;
}

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct deployment *d = userdata;
	struct systemd_state *x = S(d);
	const char *job = NULL, *unit = NULL, *result = NULL;
	uint32_t id;

	if (sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) < 0)
		return 0;
	if (!unit || strcmp(unit, d->unit_name) != 0)
		return 0;
	if (x->stop_sent) {
		if (strcmp(result, "done") == 0)
			x->unit_ended = true;
	} else if (strcmp(result, "done") == 0)
		x->started = true;
	else
		/* The program could not be executed, or a dependency failed. */
		unit_ended(d, result);
	return 0;
}

static int on_start_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct deployment *d = userdata;
	struct systemd_state *x = S(d);
	const sd_bus_error *e = sd_bus_message_get_error(m);
	const char *job = NULL;

	x->call_slot = sd_bus_slot_unref(x->call_slot);
	if (e) {
		deploy_set_failure(d, DEPLOY_FAILURE_CRASHED, "StartTransientUnit %s: %s", d->unit_name,
				   e->message ? e->message : e->name);
		x->unit_ended = true;
		begin_terminate(d, DEPLOY_FAILED);
		return 0;
	}
	if (sd_bus_message_read(m, "o", &job) >= 0 && job)
		x->start_job = strdup(job);
	return 0;
}

/* ---- readiness ---- */

static void on_health_get(struct probe_client *c, int r, long status, const char *body, size_t len, const char *error,
			  void *userdata)
{
	struct deployment *d = userdata;

	S(d)->health_in_flight = false;
	if (r >= 0 && status == 200 && d->state == DEPLOY_STARTING) {
		stop_watching(d);
		deploy_set_state(d, DEPLOY_READY);
	}
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct systemd_state *x = S(d);

	if (d->state != DEPLOY_STARTING)
		return 0;
	if (!d->port && d->announce_prefix)
		(void)deploy_scan_announce(d, d->announce_prefix, &x->scan_offset);
	if (d->port && !x->client) {
		struct probe_client_config cfg;
		struct error err = { 0 };

		probe_client_config_init(&cfg);
		cfg.base_url = d->base_url;
		cfg.connect_timeout_usec = 5 * USEC_PER_SEC;
		(void)probe_client_new(d->event, &cfg, &x->client, &err);
	}
	if (x->client && !x->health_in_flight &&
	    probe_client_get(x->client, d->health_path, 4096, 5 * USEC_PER_SEC, on_health_get, d) >= 0)
		x->health_in_flight = true;
	(void)sd_event_source_set_time(s, mono_usec() + d->health_interval_usec);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

static int on_startup_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	_cleanup_(freep) char *t = NULL;

	if (d->state != DEPLOY_STARTING)
		return 0;
	t = tail(d);
	deploy_set_failure(d, DEPLOY_FAILURE_STARTUP_TIMEOUT,
			   "%s did not answer 200 within %.0f s; last log lines:\n%s", d->health_path,
			   usec_to_sec(d->startup_timeout_usec), t ? t : "");
	begin_terminate(d, DEPLOY_FAILED);
	return 0;
}

/* ---- start ---- */

/* ExecStart needs an absolute path: look argv[0] up in $PATH as exec would. */
static char *resolve_program(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (strchr(prog, '/'))
		return realpath(prog, NULL);
	for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p;) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		struct stat st;

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, prog);
		if (n && stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
			return strdup(buf);
		p += n;
		if (*p == ':')
			p++;
	}
	return NULL;
}

static int append_properties(struct deployment *d, sd_bus_message *m, const char *program)
{
	int r;

	r = sd_bus_message_append(m, "(sv)", "Description", "s", "goodput trial server");
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "Type", "s", "exec");
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "KillMode", "s", "control-group");
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "CollectMode", "s", "inactive-or-failed");
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "TimeoutStopUSec", "t", d->stop_timeout_usec);
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "StandardInput", "s", "null");
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "StandardOutputFileToAppend", "s", d->log_path);
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "StandardErrorFileToAppend", "s", d->log_path);
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "WorkingDirectory", "s", "/");
	if (r >= 0) {
		r = sd_bus_message_open_container(m, 'r', "sv");
		if (r >= 0)
			r = sd_bus_message_append(m, "s", "Environment");
		if (r >= 0)
			r = sd_bus_message_open_container(m, 'v', "as");
		if (r >= 0)
			r = sd_bus_message_append_strv(m, d->env);
		if (r >= 0)
			r = sd_bus_message_close_container(m);
		if (r >= 0)
			r = sd_bus_message_close_container(m);
	}
	/* ExecStart: a(sasb) — path, argv (argv[0] included), ignore failure. */
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'r', "sv");
	if (r >= 0)
		r = sd_bus_message_append(m, "s", "ExecStart");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'v', "a(sasb)");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "(sasb)");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'r', "sasb");
	if (r >= 0)
		r = sd_bus_message_append(m, "s", program);
	if (r >= 0)
		r = sd_bus_message_append_strv(m, d->argv);
	if (r >= 0)
		r = sd_bus_message_append(m, "b", 0);
	for (int i = 0; i < 4 && r >= 0; i++)
		r = sd_bus_message_close_container(m);
	return r;
}

static int systemd_start(struct deployment *d, struct error *err)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
	_cleanup_(freep) char *program = NULL;
	struct systemd_state *x;
	struct stat st;
	FILE *f;
	int r;

	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	d->impl = x;
	program = resolve_program(d->argv[0]);
	if (!program)
		return error_set(err, -ENOENT, "deploy: cannot run %s: not found", d->argv[0]);
	/* The log exists (and records what ran) before the unit appends to it. */
	f = fopen(d->log_path, "ae");
	if (!f)
		return error_set(err, -errno, "deploy: cannot open the log %s: %s", d->log_path, strerror(errno));
	{
		struct engine_command shown = { .argv = d->argv, .env = d->env };
		_cleanup_(freep) char *line = engine_command_format(&shown);
		fprintf(f, "==> goodput: starting unit %s: %s\n", d->unit_name, line ? line : d->argv[0]);
	}
	fclose(f);
	if (stat(d->log_path, &st) == 0)
		x->log_offset = x->scan_offset = (uint64_t)st.st_size;

	r = d->user_bus ? sd_bus_open_user(&x->bus) : sd_bus_open_system(&x->bus);
	if (r < 0)
		return error_set(err, r, "deploy: cannot connect to the %s bus: %s", d->user_bus ? "user" : "system",
				 strerror(-r));
	r = sd_bus_attach_event(x->bus, d->event, SD_EVENT_PRIORITY_NORMAL);
	if (r >= 0)
		r = sd_bus_path_encode(SD_PATH "/unit", d->unit_name, &x->unit_path);
	if (r >= 0)
		r = sd_bus_match_signal_async(x->bus, &x->props_slot, SD_DEST, x->unit_path,
					      "org.freedesktop.DBus.Properties", "PropertiesChanged",
					      on_properties_changed, NULL, d);
	if (r >= 0)
		r = sd_bus_match_signal_async(x->bus, &x->jobs_slot, SD_DEST, SD_PATH, SD_MANAGER, "JobRemoved",
					      on_job_removed, NULL, d);
	if (r >= 0)
		r = sd_bus_call_method_async(x->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "Subscribe", NULL, NULL, "");
	if (r >= 0)
		r = sd_bus_message_new_method_call(x->bus, &m, SD_DEST, SD_PATH, SD_MANAGER, "StartTransientUnit");
	if (r >= 0)
		r = sd_bus_message_append(m, "ss", d->unit_name, "fail");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "(sv)");
	if (r >= 0)
		r = append_properties(d, m, program);
	if (r >= 0)
		r = sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd_bus_message_append(m, "a(sa(sv))", 0);
	if (r >= 0)
		r = sd_bus_call_async(x->bus, &x->call_slot, m, on_start_reply, d, 30 * USEC_PER_SEC);
	if (r < 0)
		return error_set(err, r, "deploy: cannot ask systemd for unit %s: %s", d->unit_name, strerror(-r));

	r = sd_event_add_time_relative(d->event, &x->timeout_source, CLOCK_MONOTONIC, d->startup_timeout_usec, 1000,
				       on_startup_timeout, d);
	if (r >= 0)
		r = sd_event_add_time_relative(d->event, &x->poll_source, CLOCK_MONOTONIC,
					       MIN(d->health_interval_usec, 50 * USEC_PER_MSEC), 1000, on_poll, d);
	if (r < 0)
		return error_set(err, r, "deploy: cannot arm timers: %s", strerror(-r));
	(void)sd_event_source_set_description(x->timeout_source, "deploy-startup-timeout");
	(void)sd_event_source_set_description(x->poll_source, "deploy-poll");
	return 0;
}

static int systemd_stop(struct deployment *d)
{
	begin_terminate(d, DEPLOY_STOPPED);
	return 0;
}

static void systemd_destroy(struct deployment *d)
{
	struct systemd_state *x = S(d);

	if (!x)
		return;
	stop_watching(d);
	x->reap_source = sd_event_source_disable_unref(x->reap_source);
	x->client = probe_client_free(x->client);
	x->props_slot = sd_bus_slot_unref(x->props_slot);
	x->jobs_slot = sd_bus_slot_unref(x->jobs_slot);
	x->call_slot = sd_bus_slot_unref(x->call_slot);
	if (x->bus) {
		/* A unit still running is killed with its whole cgroup; flushing
		 * sends the request before the connection closes. */
		if (!x->unit_ended)
			(void)sd_bus_call_method_async(x->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "KillUnit", NULL,
						       NULL, "ssi", d->unit_name, "all", 9);
		(void)sd_bus_call_method_async(x->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "StopUnit", NULL, NULL, "ss",
					       d->unit_name, "replace");
		(void)sd_bus_detach_event(x->bus);
		x->bus = sd_bus_flush_close_unref(x->bus);
	}
	free(x->unit_path);
	free(x->start_job);
	free(x);
	d->impl = NULL;
}

const struct deploy_ops deploy_systemd_ops = {
	.name = "systemd",
	.start = systemd_start,
	.stop = systemd_stop,
	.destroy = systemd_destroy,
};

int deploy_stop_orphan_unit(const char *unit, bool user_bus)
{
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	int r;

	if (!unit || strncmp(unit, "goodput-", 8) != 0)
		return 0;
	r = user_bus ? sd_bus_open_user(&bus) : sd_bus_open_system(&bus);
	if (r < 0)
		return r;
	(void)sd_bus_set_method_call_timeout(bus, 5 * USEC_PER_SEC);
	r = sd_bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, "StopUnit", &e, NULL, "ss", unit, "replace");
	if (r < 0) {
		bool missing = sd_bus_error_has_name(&e, "org.freedesktop.systemd1.NoSuchUnit");

		sd_bus_error_free(&e);
		return missing ? 0 : r;
	}
	(void)sd_bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, "ResetFailedUnit", NULL, NULL, "s", unit);
	return 1;
}
