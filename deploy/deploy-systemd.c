/* deploy-systemd.c — the `systemd` deployer: the server as a transient
 * service unit, created and followed through sd-bus on the caller's loop.
 *
 * StartTransientUnit creates "goodput-<study>-<trial>.service" with the
 * rendered argv as ExecStart (no shell), the engine's environment,
 * KillMode=control-group (stopping it ends every process the server forked),
 * Type=exec (the start job fails when the program cannot be executed,
 * and also when it ran but ended at once: main_program_ran tells which),
 * stdout and stderr appended to the trial's log (so out-of-memory patterns,
 * announce lines and the last lines of a failure come from one place, as
 * with exec), and CollectMode=inactive-or-failed so that nothing is left
 * loaded after the unit ends, even when it failed.
 *
 * The unit's state is followed through D-Bus signals: PropertiesChanged on
 * the unit's object (ActiveState) and the manager's JobRemoved for the start
 * job; the manager is asked to Subscribe first. Readiness (the announce
 * line, the health path) is the shared start-up phase. Teardown is
 * StopUnit; the deployment is STOPPED once the unit is inactive and the
 * port is free.
 * Either the system's service manager (root) or the user's (deploy.user)
 * is used. Only the unit this deployer created is ever stopped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "child.h"
#include "deploy-internal.h"
#include "macro.h"
#include "time-util.h"

#define SD_DEST    "org.freedesktop.systemd1"
#define SD_PATH    "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"

struct systemd_state {
	sd_bus *bus;
	char *unit_path;
	char *start_job;
	sd_bus_slot *props_slot, *jobs_slot, *call_slot;
	bool unit_ended, stop_sent;
	bool started;  /* the start job finished or the unit was seen (de)activating: "inactive" now means it ended */
	bool job_done; /* the start job finished: the program was executed */
	bool failed_early; /* the unit failed before that: its start job's result says why */
	int main_code;     /* the main process's end as the Service's ExecMainCode (0 while none) and */
	int main_status;   /* ExecMainStatus: an exit status, or the signal that killed it */
};

static struct systemd_state *S(struct deployment *d)
{
	return d->impl;
}

/* ---- teardown ---- */

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

static bool systemd_gone(struct deployment *d)
{
	return S(d)->unit_ended;
}

/* The unit ended (inactive or failed): a failure when it was not asked to;
 * cannot_run: its program never ran (a setup failure). */
static void unit_ended(struct deployment *d, const char *how, bool cannot_run)
{
	struct systemd_state *x = S(d);
	char text[512];

	if (x->unit_ended)
		return;
	x->unit_ended = true;
	if (d->state != DEPLOY_STARTING && d->state != DEPLOY_READY)
		return;
	/* A failed transient unit stays loaded until reset: let it go. */
	(void)sd_bus_call_method_async(x->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "ResetFailedUnit", NULL, NULL, "s",
				       d->unit_name);
	snprintf(text, sizeof(text), "unit %s %s", d->unit_name, how);
	if (cannot_run)
		deploy_cannot_run(d, text);
	else
		deploy_server_ended(d, text);
}

/* Whether the unit's main program ran before its start job failed. With
 * Type=exec the start job fails both when the program could not be executed
 * and when it was, but ended before systemd saw the exec succeed (a server
 * refusing a flag at once). The main process's end tells them apart:
 * systemd's own exit statuses, 200 to 245 (EXIT_CHDIR .. EXIT_BPF), mean it
 * failed while setting the process up, before the program; no end at all
 * means no process (a dependency failed, the unit was refused). The Service
 * interface's change signal comes before the job's removal, so the end is
 * known when JobRemoved arrives. */
static bool main_program_ran(const struct systemd_state *x)
{
	if (x->main_code == 0)
		return false;
	if (x->main_code != CLD_EXITED)
		return true; /* killed by a signal or dumped core: it ran */
	return x->main_status < 200 || x->main_status > 245;
}

/* ---- signals ---- */

/* What this deployer follows of a change signal's changed-properties array
 * (m is in it), from the Unit interface or the Service interface, whose
 * names do not overlap: ActiveState into *state (NULL when it did not
 * change), and the main process's end (ExecMainCode, ExecMainStatus). */
static int read_changes(struct systemd_state *x, sd_bus_message *m, const char **state)
{
	const char *name = NULL;
	int r;

	while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
		if (sd_bus_message_read(m, "s", &name) < 0)
			return -EBADMSG;
		if (strcmp(name, "ActiveState") == 0)
			r = sd_bus_message_read(m, "v", "s", state);
		else if (strcmp(name, "ExecMainCode") == 0)
			r = sd_bus_message_read(m, "v", "i", &x->main_code);
		else if (strcmp(name, "ExecMainStatus") == 0)
			r = sd_bus_message_read(m, "v", "i", &x->main_status);
		else
			r = sd_bus_message_skip(m, "v");
		if (r < 0 || sd_bus_message_exit_container(m) < 0)
			return -EBADMSG;
	}
	return r;
}

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct deployment *d = userdata;
	const char *iface = NULL, *state = NULL;

	if (sd_bus_message_read(m, "s", &iface) < 0)
		return 0;
	if (strcmp(iface, "org.freedesktop.systemd1.Unit") != 0 &&
	    strcmp(iface, "org.freedesktop.systemd1.Service") != 0)
		return 0;
	if (sd_bus_message_enter_container(m, 'a', "{sv}") < 0 || read_changes(S(d), m, &state) < 0)
		return 0;
	if (!state)
		return 0;
	/* A transient unit is announced inactive before it starts: that one means nothing. */
	if (strcmp(state, "failed") == 0 && !S(d)->job_done && !S(d)->stop_sent)
		/* whether its program ran at all: the start job's result and the main
		 * process's end tell (on_job_removed) */
		S(d)->failed_early = true;
	else if (strcmp(state, "failed") == 0)
		unit_ended(d, "failed", false);
	else if (strcmp(state, "inactive") == 0 && S(d)->started)
		unit_ended(d, "exited", false);
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
	} else if (strcmp(result, "done") == 0) {
		x->started = true;
		x->job_done = true;
		if (x->failed_early)
			unit_ended(d, "failed", false);
	} else
		/* Type=exec: the program could not be executed, or a dependency
		 * failed — before any configuration mattered — unless the program
		 * ran and ended before systemd saw it start */
		unit_ended(d, result, !main_program_ran(x));
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
		x->unit_ended = true;
		/* refused (access denied, a bad property): whatever the configuration */
		deploy_abort(d, DEPLOY_FAILURE_SETUP, "StartTransientUnit %s: %s", d->unit_name,
			     e->message ? e->message : e->name);
		return 0;
	}
	if (sd_bus_message_read(m, "o", &job) >= 0 && job)
		x->start_job = strdup(job);
	return 0;
}

/* ---- start ---- */

/* ExecStart needs an absolute path: argv[0] as exec would find it. */
static char *resolve_program(const char *prog)
{
	_cleanup_(freep) char *found = NULL;

	if (child_find_program(prog, &found) < 0)
		return NULL;
	return realpath(found, NULL);
}

/* Opens property name's (sv) and its variant of the given signature. */
static int open_property(sd_bus_message *m, const char *name, const char *signature)
{
	int r = sd_bus_message_open_container(m, 'r', "sv");

	if (r >= 0)
		r = sd_bus_message_append(m, "s", name);
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'v', signature);
	return r;
}

static int append_properties(struct deployment *d, sd_bus_message *m, const char *program)
{
	const struct {
		const char *name, *value;
	} strings[] = {
		{ "Description", "goodput trial server" },
		{ "Type", "exec" },
		{ "KillMode", "control-group" },
		{ "CollectMode", "inactive-or-failed" },
		{ "StandardInput", "null" },
		{ "StandardOutputFileToAppend", d->log_path },
		{ "StandardErrorFileToAppend", d->log_path },
		{ "WorkingDirectory", "/" },
	};
	int r = 0;

	for (size_t i = 0; i < ELEMENTSOF(strings) && r >= 0; i++)
		r = sd_bus_message_append(m, "(sv)", strings[i].name, "s", strings[i].value);
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)", "TimeoutStopUSec", "t", d->stop_timeout_usec);
	if (r >= 0)
		r = open_property(m, "Environment", "as");
	if (r >= 0)
		r = sd_bus_message_append_strv(m, d->env);
	for (int i = 0; i < 2 && r >= 0; i++)
		r = sd_bus_message_close_container(m);
	/* ExecStart: a(sasb) — path, argv (argv[0] included), ignore failure. */
	if (r >= 0)
		r = open_property(m, "ExecStart", "a(sasb)");
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

/* Asks the service manager for the unit (the answer comes to on_start_reply). */
static int start_unit(struct deployment *d, const char *program)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
	struct systemd_state *x = S(d);
	int r;

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
	return r;
}

static int systemd_start(struct deployment *d, struct error *err)
{
	_cleanup_(freep) char *program = NULL, *what = NULL;
	struct systemd_state *x = S(d);
	int r;

	program = resolve_program(d->argv[0]);
	if (!program)
		return error_set(err, -ENOENT, "deploy: cannot run %s: not found", d->argv[0]);
	/* The log exists (and records what ran) before the unit appends to it. */
	if (asprintf(&what, "starting unit %s", d->unit_name) < 0)
		return -ENOMEM;
	r = deploy_log_open(d, what, d->argv, d->env, err);
	if (r < 0)
		return r;
	safe_close(r);
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
	if (r < 0)
		return error_set(err, r, "deploy: cannot ask systemd for unit %s: %s", d->unit_name, strerror(-r));
	/* recorded, then started: a restarted goodput stops the unit by its name */
	r = deploy_record(d, d->unit_name, err);
	if (r < 0)
		return r;
	r = start_unit(d, program);
	if (r < 0)
		return error_set(err, r, "deploy: cannot ask systemd for unit %s: %s", d->unit_name, strerror(-r));
	return 0;
}

static void systemd_terminate(struct deployment *d)
{
	send_stop(d);
}

static void systemd_destroy(struct deployment *d)
{
	struct systemd_state *x = S(d);

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
}

/* The method's table, kept to a few lines. */
/* clang-format off */
const struct deploy_ops deploy_systemd_ops = {
	.name = "systemd", .state_size = sizeof(struct systemd_state), .start = systemd_start,
	.terminate = systemd_terminate, .gone = systemd_gone, .destroy = systemd_destroy,
	.wait_port_closed = true,
};
/* clang-format on */

/* Polls until unit is no longer loaded or has stopped (inactive or failed):
 * 0, -ETIMEDOUT after timeout_usec, or -errno from the bus. */
static int wait_unit_gone(sd_bus *bus, const char *unit, uint64_t timeout_usec)
{
	uint64_t deadline = now_usec(CLOCK_MONOTONIC) + timeout_usec;

	for (;;) {
		sd_bus_error e = SD_BUS_ERROR_NULL;
		_cleanup_(freep) char *path = NULL, *state = NULL;
		int r;

		r = sd_bus_path_encode(SD_PATH "/unit", unit, &path);
		if (r < 0)
			return r;
		r = sd_bus_get_property_string(bus, SD_DEST, path, "org.freedesktop.systemd1.Unit", "ActiveState", &e,
					       &state);
		sd_bus_error_free(&e);
		/* an unknown unit (collected) answers with an error or as inactive */
		if (r < 0 || strcmp(state, "inactive") == 0 || strcmp(state, "failed") == 0)
			return 0;
		if (now_usec(CLOCK_MONOTONIC) >= deadline)
			return -ETIMEDOUT;
		(void)usleep(50 * 1000);
	}
}

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
	/* StopUnit only queues the stop: wait until the unit is gone, so that a
	 * trial redone at once can start a unit of the same name */
	(void)wait_unit_gone(bus, unit, 15 * USEC_PER_SEC);
	(void)sd_bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, "ResetFailedUnit", NULL, NULL, "s", unit);
	return 1;
}
