/* The exec deployer against real processes: goodput-sim becomes ready and
 * stops cleanly (no process left, port closed), and at once even while a
 * client holds a connection open; a configuration whose weights
 * do not fit is classified out-of-memory; a failing start-up is a crash with
 * the log's last lines; a server that never answers times out and is torn
 * down; a server that dies while serving is reported; a process that
 * ignores SIGTERM is killed after the grace period; a missing program is an
 * immediate error; failures no configuration can avoid are setup failures.
 *
 * Usage: test-deploy-exec PATH-TO-goodput-sim */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "deploy-test-util.h"
#include "deploy.h"
#include "engine-profile.h"
#include "json-util.h"
#include "macro.h"
#include "tests.h"
#include "time-util.h"

static const char *sim_path;
static char dir[] = "/tmp/goodput-test-deploy-XXXXXX";
static struct engine_profile *sim_profile;

static bool group_gone(int64_t pgid)
{
	return kill(-(pid_t)pgid, 0) < 0 && errno == ESRCH;
}

/* The sim profile rendered for knobs, with our own build of goodput-sim. */
static void sim_command(const char *model, const char *gpu, const char *knobs, const char *const *more,
			struct engine_command *ret)
{
	struct engine_render_params params = {
		.model = model, .host = "127.0.0.1", .port = 0, .gpu_type = gpu, .gpu_count = 1
	};
	struct error err = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *k = NULL;
	size_t n = 0, m = 0;

	CHECK(json_parse_strict("knobs", knobs, strlen(knobs), &k, &err) == 0);
	CHECK_MSG(engine_profile_render(sim_profile, &params, k, ret, &err) == 0, "%s", err.msg);
	free(ret->argv[0]);
	ret->argv[0] = strdup(sim_path);
	while (ret->argv[n])
		n++;
	while (more && more[m])
		m++;
	ret->argv = realloc(ret->argv, (n + m + 1) * sizeof(char *));
	CHECK(ret->argv);
	for (size_t i = 0; i < m; i++)
		ret->argv[n + i] = strdup(more[i]);
	ret->argv[n + m] = NULL;
}

static struct deployment *start(sd_event *e, const struct engine_command *c, const char *log_name, uint16_t port,
				uint64_t startup_usec, uint64_t stop_usec, struct deploy_outcome *o)
{
	struct deploy_config cfg;
	struct deployment *d = NULL;
	struct error err = { 0 };
	char log_path[256];

	snprintf(log_path, sizeof(log_path), "%s/%s.log", dir, log_name);
	deploy_config_from_profile(&cfg, sim_profile, c, log_path, "127.0.0.1", port, startup_usec, stop_usec);
	if (port)
		cfg.announce_prefix = NULL;
	CHECK_MSG(deploy_start(e, STUDY_DEPLOY_EXEC, &cfg, deploy_test_on_event, o, &d, &err) == 0, "%s", err.msg);
	return d;
}

static void test_ready_and_stop(sd_event *e)
{
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	struct deploy_outcome o = { 0 };
	struct deployment *d;
	int64_t pgid;
	uint16_t port;

	sim_command("llama-3.1-8b", "H100", "{\"max_num_seqs\": 16, \"max_num_batched_tokens\": 2048}", NULL, &c);
	d = start(e, &c, "ready", 0, 0, 0, &o);
	CHECK(deploy_get_state(d) == DEPLOY_STARTING);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_READY, "state %s: %s", deploy_state_to_string(o.state), deploy_get_message(d));
	port = deploy_get_port(d);
	pgid = deploy_get_pgid(d);
	CHECK(port > 0 && pgid > 1);
	CHECK_STR_CONTAINS(deploy_get_base_url(d), "http://127.0.0.1:");
	CHECK(isfinite(deploy_get_startup_seconds(d)));
	fprintf(stderr, "goodput-sim ready in %.3f s on port %u\n", deploy_get_startup_seconds(d), port);
	CHECK(deploy_port_accepts("127.0.0.1", port));
	CHECK(deploy_stop(d) == 0);
	CHECK(deploy_stop(d) == -EALREADY);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_STOPPED && o.calls == 2);
	CHECK(deploy_get_failure(d) == DEPLOY_FAILURE_NONE);
	CHECK(group_gone(pgid));
	CHECK(!deploy_port_accepts("127.0.0.1", port));
	deploy_free(d);
}

/* A connection to the port, kept open (a client's kept-alive connection
 * that nobody closes): its descriptor. */
static int hold_connection(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	char buf[512];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1));
	CHECK(read(fd, buf, sizeof(buf)) > 0);
	return fd;
}

/* A server as some engines are: its sockets without SO_REUSEADDR, its
 * client connections closed from its side when it exits. */
static const char plain_server[] =
	"import signal, socket, sys\n"
	"s = socket.socket()\n"
	"s.bind(('127.0.0.1', 0)); s.listen(16)\n"
	"print('goodput-sim: listening on http://127.0.0.1:%d' % s.getsockname()[1], flush=True)\n"
	"signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
	"conns = []\n"
	"while True:\n"
	"    c, _ = s.accept(); conns.append(c)\n"
	"    c.recv(4096)\n"
	"    c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok')\n";

/* No dead time after a trial: with a client's connection still open the
 * server's end lingers (FIN_WAIT2, then TIME_WAIT: the port cannot be bound
 * for a minute), yet the teardown ends as soon as the server's group is
 * gone and the port refuses connections, and the kernel hands out another
 * port next. */
static void test_teardown_with_open_connection(sd_event *e)
{
	struct engine_command c = { .argv = (char *[]){ (char *)"python3", (char *)"-c", (char *)plain_server, NULL },
				    .env = (char *[]){ NULL } };
	struct deploy_outcome o = { 0 };
	struct deployment *d;
	struct error err = { 0 };
	uint64_t t0, gap;
	uint16_t port, next;
	int fd;

	d = start(e, &c, "open-connection", 0, 0, 10 * USEC_PER_SEC, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_READY, "state %s: %s", deploy_state_to_string(o.state), deploy_get_message(d));
	port = deploy_get_port(d);
	fd = hold_connection(port);
	t0 = mono_usec();
	CHECK(deploy_stop(d) == 0);
	deploy_test_run(e, &o.done, 60 * USEC_PER_SEC);
	gap = mono_usec() - t0;
	CHECK_MSG(o.state == DEPLOY_STOPPED, "%s: %s", deploy_state_to_string(o.state), deploy_get_message(d));
	fprintf(stderr, "teardown with a connection held open: %.3f s\n", usec_to_sec(gap));
	CHECK_MSG(gap < 5 * USEC_PER_SEC, "teardown took %.1f s", usec_to_sec(gap));
	CHECK(!deploy_port_accepts("127.0.0.1", port));
	CHECK(deploy_pick_free_port("127.0.0.1", &next, &err) == 0);
	CHECK(next != port);
	close(fd);
	deploy_free(d);
}

static void test_oom(sd_event *e)
{
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	struct deploy_outcome o = { 0 };
	struct deployment *d;

	/* 70B in bf16 is ~140 GB: it cannot fit one 48 GB L40S. */
	sim_command("llama-3.1-70b", "L40S", "{\"tensor_parallel\": 1}", NULL, &c);
	d = start(e, &c, "oom", 0, 0, 0, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_OOM, "%s: %s",
		  deploy_failure_to_string(deploy_get_failure(d)), deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "CUDA out of memory");
	CHECK(group_gone(deploy_get_pgid(d)));
	deploy_free(d);
}

static void test_fail_startup(sd_event *e)
{
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	struct deploy_outcome o = { 0 };
	struct deployment *d;

	sim_command("llama-3.1-8b", "H100", "{}", (const char *const[]){ "--fault-fail-startup", NULL }, &c);
	d = start(e, &c, "fail", 0, 0, 0, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_CRASHED, "%s", deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "during start-up");
	CHECK_STR_CONTAINS(deploy_get_message(d), "Engine core initialization failed");
	deploy_free(d);
}

static void test_startup_timeout(sd_event *e)
{
	struct engine_command c = { .argv = (char *[]){ (char *)"sleep", (char *)"30", NULL },
				    .env = (char *[]){ NULL } };
	struct deploy_outcome o = { 0 };
	struct error err = { 0 };
	struct deployment *d;
	uint16_t port;
	uint64_t t0 = mono_usec();

	CHECK(deploy_pick_free_port("127.0.0.1", &port, &err) == 0);
	d = start(e, &c, "hang", port, USEC_PER_SEC, USEC_PER_SEC, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED);
	CHECK(deploy_get_failure(d) == DEPLOY_FAILURE_STARTUP_TIMEOUT);
	CHECK_STR_CONTAINS(deploy_get_message(d), "/health never answered within 1 s");
	CHECK(group_gone(deploy_get_pgid(d)));
	CHECK(mono_usec() - t0 < 20 * USEC_PER_SEC);
	deploy_free(d);
}

static void test_oom_from_log(sd_event *e)
{
	/* The test's own fixed script, not user values. */
	struct engine_command c = {
		.argv = (char *[]){ (char *)"/bin/sh", (char *)"-c",
				    (char *)"echo starting; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to "
					    "allocate 2.00 GiB' >&2; exit 1",
				    NULL },
		.env = (char *[]){ (char *)"GOODPUT_TEST_VAR=1", NULL },
	};
	struct deploy_outcome o = { 0 };
	struct deployment *d;

	d = start(e, &c, "cuda-oom", 1, 0, 0, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED && deploy_get_failure(d) == DEPLOY_FAILURE_OOM);
	CHECK_STR_CONTAINS(deploy_get_message(d), "exited with status 1");
	CHECK_STR_CONTAINS(deploy_get_message(d), "starting\ntorch.OutOfMemoryError");
	/* The log says what ran; the failure message holds only the server's own lines. */
	_cleanup_(freep) char *log = NULL;
	char log_path[256];
	snprintf(log_path, sizeof(log_path), "%s/cuda-oom.log", dir);
	CHECK(deploy_log_tail(log_path, 0, 10, &log) == 0);
	CHECK_STR_CONTAINS(log, "==> goodput: starting: GOODPUT_TEST_VAR=1 /bin/sh -c 'echo starting;");
	CHECK(!strstr(deploy_get_message(d), "==> goodput"));
	deploy_free(d);
}

static void test_crash_while_serving(sd_event *e)
{
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	struct deploy_outcome o = { 0 };
	struct deployment *d;

	sim_command("llama-3.1-8b", "H100", "{}", NULL, &c);
	d = start(e, &c, "crash", 0, 0, 0, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_READY);
	CHECK(kill((pid_t)deploy_get_pgid(d), SIGKILL) == 0);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED && deploy_get_failure(d) == DEPLOY_FAILURE_CRASHED);
	CHECK_STR_CONTAINS(deploy_get_message(d), "killed by signal 9");
	CHECK_STR_CONTAINS(deploy_get_message(d), "while serving");
	CHECK(deploy_stop(d) == -EALREADY);
	deploy_free(d);
}

static void test_sigterm_ignored(sd_event *e)
{
	_cleanup_(engine_command_done) struct engine_command sim = { 0 };
	struct engine_command c = { 0 };
	struct deploy_outcome o = { 0 };
	struct deployment *d;
	size_t n = 0;
	int64_t pgid;

	/* A shell that leaves a TERM-ignoring child in the group, then becomes the sim. */
	sim_command("llama-3.1-8b", "H100", "{}", NULL, &sim);
	while (sim.argv[n])
		n++;
	c.argv = calloc(n + 4, sizeof(char *));
	CHECK(c.argv);
	c.argv[0] = (char *)"/bin/sh";
	c.argv[1] = (char *)"-c";
	c.argv[2] = (char *)"trap '' TERM; sleep 60 & exec \"$0\" \"$@\"";
	for (size_t i = 0; i < n; i++)
		c.argv[3 + i] = sim.argv[i];
	c.env = (char *[]){ NULL };
	d = start(e, &c, "stubborn", 0, 0, USEC_PER_SEC, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_READY, "%s", deploy_get_message(d));
	pgid = deploy_get_pgid(d);
	CHECK(deploy_stop(d) == 0);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_STOPPED);
	CHECK(group_gone(pgid));
	deploy_free(d);
	free(c.argv);
}

static void test_missing_program(sd_event *e)
{
	struct engine_command c = { .argv = (char *[]){ (char *)"/nonexistent/engine-server", NULL },
				    .env = (char *[]){ NULL } };
	struct deploy_config cfg;
	struct deployment *d = NULL;
	struct error err = { 0 };
	char log_path[256];

	snprintf(log_path, sizeof(log_path), "%s/missing.log", dir);
	deploy_config_from_profile(&cfg, sim_profile, &c, log_path, NULL, 0, 0, 0);
	CHECK_INT_EQ(deploy_start(e, STUDY_DEPLOY_EXEC, &cfg, deploy_test_on_event, NULL, &d, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/engine-server");
	CHECK(d == NULL);
	/* The other methods need their own settings. */
	CHECK_INT_EQ(deploy_start(e, STUDY_DEPLOY_SYSTEMD, &cfg, deploy_test_on_event, NULL, &d, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "unit name");
	CHECK_INT_EQ(deploy_start(e, STUDY_DEPLOY_COMMAND, &cfg, deploy_test_on_event, NULL, &d, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "deploy and teardown commands");
}

/* Failures no configuration can avoid are setup failures, and only those:
 * a wrapper whose program is missing (status 127), a port the server's
 * argv fixes held by another process (but a port the deployer chose and
 * lost is a crash of one trial), a program that is not executable, a
 * model path that is not there. */
static void test_setup(sd_event *e)
{
	struct engine_command wrapper = { .argv = (char *[]){ (char *)"/bin/sh", (char *)"-c",
							      (char *)"exec /nonexistent/engine-server \"$@\"",
							      (char *)"sh", (char *)"serve", NULL },
					  .env = (char *[]){ NULL } };
	struct deploy_outcome o = { 0 };
	struct deployment *d = NULL;
	struct deploy_config cfg;
	struct error err = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	char port_s[16], log_path[256];
	uint16_t held;
	int fd;

	d = start(e, &wrapper, "setup-127", 0, 0, 0, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_SETUP, "%s: %s",
		  deploy_failure_to_string(deploy_get_failure(d)), deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "exited with status 127");
	CHECK_STR_CONTAINS(deploy_get_message(d), "/nonexistent/engine-server");
	deploy_free(d);

	/* another process listens on the port the argv names */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 1) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	held = ntohs(sa.sin_port);
	snprintf(port_s, sizeof(port_s), "%u", held);
	{
		_cleanup_(engine_command_done) struct engine_command c = { 0 };

		sim_command("llama-3.1-8b", "H100", "{}", (const char *const[]){ "--port", port_s, NULL }, &c);
		d = start(e, &c, "setup-port", 0, 0, 0, &o);
		deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
		CHECK(o.state == DEPLOY_FAILED);
		CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_SETUP, "%s: %s",
			  deploy_failure_to_string(deploy_get_failure(d)), deploy_get_message(d));
		CHECK_STR_CONTAINS(deploy_get_message(d), "Address already in use");
		CHECK_STR_CONTAINS(deploy_get_message(d), "the engine profile fixes the port");
		deploy_free(d);
		/* the deployer's own choice, lost: this trial's crash only (its
		 * teardown then waits ~10 s for the port, in vain) */
		d = start(e, &c, "lost-port", held, 0, USEC_PER_SEC / 2, &o);
		deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
		CHECK(o.state == DEPLOY_FAILED);
		CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_CRASHED, "%s: %s",
			  deploy_failure_to_string(deploy_get_failure(d)), deploy_get_message(d));
		deploy_free(d);
	}
	safe_close(fd);

	/* not executable, and a model path that is not there: at once */
	snprintf(log_path, sizeof(log_path), "%s/not-executable", dir);
	fd = open(log_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	safe_close(fd);
	wrapper.argv = (char *[]){ log_path, NULL };
	deploy_config_from_profile(&cfg, sim_profile, &wrapper, log_path, NULL, 0, 0, 0);
	snprintf(log_path, sizeof(log_path), "%s/setup.log", dir);
	CHECK_INT_EQ(deploy_start(e, STUDY_DEPLOY_EXEC, &cfg, deploy_test_on_event, &o, &d, &err), -EACCES);
	CHECK_STR_CONTAINS(err.msg, "Permission denied");
	wrapper.argv = (char *[]){ (char *)sim_path, NULL };
	cfg.model_path = "/nonexistent/models/llama-3.1-8b-awq";
	cfg.model_key = "model.checkpoints.awq";
	CHECK_INT_EQ(deploy_start(e, STUDY_DEPLOY_EXEC, &cfg, deploy_test_on_event, &o, &d, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg,
			   "model.checkpoints.awq /nonexistent/models/llama-3.1-8b-awq: No such file or directory");
	/* a model id is no path */
	cfg.model_path = "meta-llama/Llama-3.1-8B";
	CHECK_INT_EQ(deploy_start(e, STUDY_DEPLOY_EXEC, &cfg, deploy_test_on_event, &o, &d, &err), 0);
	deploy_free(d);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

int main(int argc, char **argv)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	struct error err = { 0 };

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH-TO-goodput-sim\n", argv[0]);
		return 2;
	}
	sim_path = argv[1];
	CHECK(mkdtemp(dir));
	CHECK_MSG(engine_profile_find("sim", TEST_SOURCE_ROOT "/configs/engines", &sim_profile, &err) == 0, "%s",
		  err.msg);
	CHECK(sd_event_default(&e) >= 0);
	test_missing_program(e);
	test_ready_and_stop(e);
	test_teardown_with_open_connection(e);
	test_oom(e);
	test_fail_startup(e);
	test_startup_timeout(e);
	test_oom_from_log(e);
	test_crash_while_serving(e);
	test_sigterm_ignored(e);
	test_setup(e);
	engine_profile_free(sim_profile);
	CHECK(nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0);
	return 0;
}
