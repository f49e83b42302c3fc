/* The systemd deployer against a real systemd (run inside a throw-away
 * systemd-nspawn container by test-systemd-nspawn.sh): goodput-sim starts as
 * transient unit goodput-<study>-<trial>.service, answers /health and a
 * model list, stops, and no goodput unit is left loaded; a server started
 * with a bad flag is classified as failed with the unit's log lines, and its
 * failed unit does not linger either; a program that runs and exits at once
 * is a crashed server, every time; a program systemd cannot execute is a
 * setup failure.
 *
 * Usage: test-deploy-systemd PATH-TO-goodput-sim LOG-DIR
 * Exits 77 when there is no systemd bus (not inside the container). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <systemd/sd-bus.h>

#include "client.h"
#include "deploy-test-util.h"
#include "deploy.h"
#include "macro.h"
#include "tests.h"
#include "time-util.h"

static const char *sim_path, *log_dir;

/* Units whose name starts with goodput- (loaded at all). */
static unsigned goodput_units(sd_bus *bus, bool verbose)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	const char *name;
	unsigned n = 0;
	int r;

	r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
			       "org.freedesktop.systemd1.Manager", "ListUnitsByPatterns", &e, &reply, "asas", 0, 1,
			       "goodput-*");
	CHECK_MSG(r >= 0, "ListUnitsByPatterns: %s", e.message);
	CHECK(sd_bus_message_enter_container(reply, 'a', "(ssssssouso)") >= 0);
	while ((r = sd_bus_message_read(reply, "(ssssssouso)", &name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
					NULL)) > 0) {
		if (verbose)
			fprintf(stderr, "loaded: %s\n", name);
		n++;
	}
	CHECK(r >= 0);
	return n;
}

struct get {
	bool done;
	long status;
	char body[512];
};

static void on_get(struct probe_client *c, int r, long status, const char *body, size_t len, const char *error,
		   void *userdata)
{
	struct get *g = userdata;

	g->status = r < 0 ? -1 : status;
	snprintf(g->body, sizeof(g->body), "%s", body ? body : "");
	g->done = true;
}

static struct deployment *start(sd_event *e, char **argv, const char *unit, struct deploy_outcome *o)
{
	struct engine_command c = { .argv = argv, .env = (char *[]){ (char *)"GOODPUT_TEST=1", NULL } };
	struct deploy_config cfg = {
		.command = &c,
		.host = "127.0.0.1",
		.announce_prefix = "goodput-sim: listening on http://",
		.health_path = "/health",
		.health_interval_usec = 50 * USEC_PER_MSEC,
		.startup_timeout_usec = 20 * USEC_PER_SEC,
		.stop_timeout_usec = 5 * USEC_PER_SEC,
		.oom_patterns = (const char *const[]){ "No available memory for the cache blocks", NULL },
		.unit_name = unit,
	};
	struct deployment *d = NULL;
	struct error err = { 0 };
	char log_path[512];

	snprintf(log_path, sizeof(log_path), "%s/%s.log", log_dir, unit);
	cfg.log_path = log_path;
	CHECK_MSG(deploy_start(e, STUDY_DEPLOY_SYSTEMD, &cfg, deploy_test_on_event, o, &d, &err) == 0, "%s", err.msg);
	return d;
}

static void test_sim(sd_event *e, sd_bus *bus)
{
	_cleanup_(probe_client_freep) struct probe_client *client = NULL;
	struct probe_client_config cc;
	struct deploy_outcome o = { 0 };
	struct error err = { 0 };
	struct get g = { 0 };
	struct deployment *d;
	char unit[128];
	uint16_t port;

	CHECK(deploy_unit_name("nspawn-demo", 1, unit, sizeof(unit)) == 0);
	CHECK_STR_EQ(unit, "goodput-nspawn-demo-1.service");
	d = start(e,
		  (char *[]){ (char *)sim_path, (char *)"serve", (char *)"--host", (char *)"127.0.0.1",
			      (char *)"--port", (char *)"0", (char *)"--served-model-name", (char *)"demo", NULL },
		  unit, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_READY, "%s: %s", deploy_state_to_string(o.state), deploy_get_message(d));
	CHECK_STR_EQ(deploy_get_unit(d), unit);
	port = deploy_get_port(d);
	CHECK(port > 0);
	fprintf(stderr, "unit %s ready in %.3f s at %s\n", unit, deploy_get_startup_seconds(d), deploy_get_base_url(d));
	CHECK(goodput_units(bus, true) == 1);

	/* Probe it: the model list names the served model. */
	probe_client_config_init(&cc);
	cc.base_url = deploy_get_base_url(d);
	CHECK_MSG(probe_client_new(e, &cc, &client, &err) == 0, "%s", err.msg);
	CHECK(probe_client_get(client, "/v1/models", 65536, 5 * USEC_PER_SEC, on_get, &g) == 0);
	deploy_test_run(e, &g.done, 10 * USEC_PER_SEC);
	CHECK_MSG(g.status == 200, "GET /v1/models: %ld %s", g.status, g.body);
	CHECK_STR_CONTAINS(g.body, "\"demo\"");

	CHECK(deploy_stop(d) == 0);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_STOPPED && o.calls == 2, "%s: %s", deploy_state_to_string(o.state),
		  deploy_get_message(d));
	CHECK(!deploy_port_accepts("127.0.0.1", port));
	deploy_free(d);
	/* The transient unit is gone (collected once inactive). */
	for (unsigned i = 0; i < 50 && goodput_units(bus, false) > 0; i++)
		CHECK(sd_event_run(e, 20 * USEC_PER_MSEC) >= 0);
	CHECK(goodput_units(bus, true) == 0);
}

static void test_bad_flag(sd_event *e, sd_bus *bus)
{
	struct deploy_outcome o = { 0 };
	struct deployment *d;

	d = start(e, (char *[]){ (char *)sim_path, (char *)"serve", (char *)"--max-num-seqz", (char *)"8", NULL },
		  "goodput-nspawn-demo-2.service", &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED && o.calls == 1);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_CRASHED, "%s", deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "unit goodput-nspawn-demo-2.service failed during start-up");
	CHECK_STR_CONTAINS(deploy_get_message(d), "max-num-seqz"); /* the server's own complaint */
	fprintf(stderr, "bad flag: %s\n", deploy_get_message(d));
	deploy_free(d);
	for (unsigned i = 0; i < 50 && goodput_units(bus, false) > 0; i++)
		CHECK(sd_event_run(e, 20 * USEC_PER_MSEC) >= 0);
	CHECK(goodput_units(bus, true) == 0);

	/* A program that does not exist fails at once. */
	struct engine_command c = { .argv = (char *[]){ (char *)"/nonexistent/server", NULL },
				    .env = (char *[]){ NULL } };
	struct deploy_config cfg = { .command = &c,
				     .log_path = "/tmp/x.log",
				     .health_path = "/health",
				     .port = 1,
				     .unit_name = "goodput-nspawn-demo-3.service" };
	struct error err = { 0 };
	CHECK(deploy_start(e, STUDY_DEPLOY_SYSTEMD, &cfg, deploy_test_on_event, &o, &d, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/server");
}

/* A program that runs and exits at once with a status of its own failed
 * as a server, not as a setup: its start job may fail before systemd has
 * seen the exec succeed, and the unit's main status tells the two apart.
 * Repeated, because which of the two systemd sees first is a race. */
static void test_exits_at_once(sd_event *e, sd_bus *bus)
{
	unsigned setup = 0;

	for (unsigned i = 0; i < 20; i++) {
		struct deploy_outcome o = { 0 };
		struct deployment *d;

		d = start(e, (char *[]){ (char *)"false", NULL }, "goodput-nspawn-demo-5.service", &o);
		deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
		CHECK(o.state == DEPLOY_FAILED && o.calls == 1);
		if (deploy_get_failure(d) != DEPLOY_FAILURE_CRASHED) {
			fprintf(stderr, "run %u: %s: %s\n", i, deploy_failure_to_string(deploy_get_failure(d)),
				deploy_get_message(d));
			setup++;
		}
		deploy_free(d);
		for (unsigned j = 0; j < 50 && goodput_units(bus, false) > 0; j++)
			CHECK(sd_event_run(e, 20 * USEC_PER_MSEC) >= 0);
		CHECK(goodput_units(bus, true) == 0);
	}
	CHECK_MSG(setup == 0, "%u of 20 runs of a program that exits at once were not classified as crashed", setup);
}

/* A program we can see but systemd cannot execute (its interpreter is
 * missing): the start job fails, a setup failure — no configuration could
 * start it. */
static void test_cannot_exec(sd_event *e, sd_bus *bus)
{
	struct deploy_outcome o = { 0 };
	struct deployment *d;
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/no-interpreter.sh", log_dir);
	f = fopen(path, "w");
	CHECK(f);
	fprintf(f, "#!/nonexistent/interpreter\n");
	CHECK(fclose(f) == 0);
	CHECK(chmod(path, 0755) == 0);
	d = start(e, (char *[]){ path, NULL }, "goodput-nspawn-demo-4.service", &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED && o.calls == 1);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_SETUP, "%s: %s",
		  deploy_failure_to_string(deploy_get_failure(d)), deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "unit goodput-nspawn-demo-4.service failed during start-up");
	fprintf(stderr, "cannot exec: %s\n", deploy_get_message(d));
	deploy_free(d);
	for (unsigned i = 0; i < 50 && goodput_units(bus, false) > 0; i++)
		CHECK(sd_event_run(e, 20 * USEC_PER_MSEC) >= 0);
	CHECK(goodput_units(bus, true) == 0);
}

int main(int argc, char **argv)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	int r;

	CHECK_MSG(argc == 3, "usage: test-deploy-systemd PATH-TO-goodput-sim LOG-DIR");
	sim_path = argv[1];
	log_dir = argv[2];
	r = sd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "SKIP: no system bus here (%s): run through test-systemd-nspawn.sh\n", strerror(-r));
		return TEST_SKIP;
	}
	CHECK(sd_event_default(&e) >= 0);
	test_sim(e, bus);
	test_bad_flag(e, bus);
	test_exits_at_once(e, bus);
	test_cannot_exec(e, bus);
	fprintf(stderr, "systemd deployer: all checks passed\n");
	return 0;
}
