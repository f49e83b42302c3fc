/* The command deployer against real hooks: a deploy script that starts
 * goodput-sim in the background and prints its URL becomes READY (the knob
 * values reached it as environment variables, verbatim, never through a
 * shell), and its teardown script stops the server; a health command can
 * replace the HTTP check; a deploy script that fails is classified with its
 * output and torn down; one that exits without a URL fails; one that hangs
 * runs into the start-up timeout, is killed and torn down; one that is the
 * server itself (runs in the foreground) serves past the start-up timeout
 * and ends with the deployment; a hook or a program it runs that is
 * missing is a setup failure (no configuration can start).
 *
 * Usage: test-deploy-command PATH-TO-goodput-sim */
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deploy-test-util.h"
#include "deploy.h"
#include "json-util.h"
#include "macro.h"
#include "tests.h"
#include "time-util.h"

static const char *sim_path;
static char dir[] = "/tmp/goodput-test-deploy-command-XXXXXX";

static void write_script(const char *name, const char *body)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f);
	fprintf(f, "#!/bin/sh\n%s", body);
	CHECK(fclose(f) == 0);
	CHECK(chmod(path, 0755) == 0);
}

static char *path_of(const char *name)
{
	static char bufs[8][512];
	static unsigned i;
	char *b = bufs[i++ % 8];

	snprintf(b, 512, "%s/%s", dir, name);
	return b;
}

static char *read_file(const char *name)
{
	static char buf[4096];
	FILE *f = fopen(path_of(name), "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	return buf;
}

static bool exists(const char *name)
{
	return access(path_of(name), F_OK) == 0;
}

static struct deployment *start(sd_event *e, const char *log_name, char **engine_argv, const char *deploy,
				const char *health, uint64_t startup_usec, char **hook_env, struct deploy_outcome *o)
{
	struct engine_command c = { .argv = engine_argv, .env = (char *[]){ (char *)"ENGINE_VAR=1", NULL } };
	const char *deploy_argv[] = { path_of(deploy), NULL };
	const char *teardown_argv[] = { path_of("teardown.sh"), NULL };
	const char *health_argv[] = { health ? path_of(health) : NULL, NULL };
	struct deploy_config cfg = {
		.command = &c,
		.host = "127.0.0.1",
		.health_path = "/health",
		.health_interval_usec = 50 * USEC_PER_MSEC,
		.startup_timeout_usec = startup_usec,
		.stop_timeout_usec = 2 * USEC_PER_SEC,
		.deploy_command = deploy_argv,
		.teardown_command = teardown_argv,
		.health_command = health ? health_argv : NULL,
		.command_timeout_usec = 5 * USEC_PER_SEC,
		.hook_env = (const char *const *)hook_env,
		.oom_patterns = (const char *const[]){ "CUDA out of memory", NULL },
	};
	struct deployment *d = NULL;
	struct error err = { 0 };
	char log_path[512];

	snprintf(log_path, sizeof(log_path), "%s/%s.log", dir, log_name);
	cfg.log_path = log_path;
	CHECK_MSG(deploy_start(e, STUDY_DEPLOY_COMMAND, &cfg, deploy_test_on_event, o, &d, &err) == 0, "%s", err.msg);
	return d;
}

static const char deploy_sim[] =
	"# the engine argv is \"$@\"; the server keeps running after this script exits\n"
	"printf '%s\\n' \"$GOODPUT_KNOB_MAX_NUM_SEQS\" > \"$(dirname \"$0\")/knob-seqs\"\n"
	"printf '%s\\n' \"$GOODPUT_KNOB_KV_CACHE_DTYPE\" > \"$(dirname \"$0\")/knob-odd\"\n"
	"printf '%s\\n' \"$ENGINE_VAR $GOODPUT_TRIAL_ID $GOODPUT_STUDY\" > \"$(dirname \"$0\")/env-seen\"\n"
	"\"$@\" > \"$(dirname \"$0\")/server.out\" 2>&1 &\n"
	"echo $! > \"$(dirname \"$0\")/server.pid\"\n"
	"echo \"deploying on port $GOODPUT_PORT\"\n"
	"echo \"GOODPUT_BASE_URL=http://127.0.0.1:$GOODPUT_PORT\"\n";

static const char teardown[] =
	"touch \"$(dirname \"$0\")/teardown-ran\"\n"
	"f=\"$(dirname \"$0\")/server.pid\"\n"
	"[ -e \"$f\" ] || exit 0\n"
	"pid=$(cat \"$f\"); rm -f \"$f\"\n"
	"kill \"$pid\" 2>/dev/null || exit 0\n"
	"i=0; while kill -0 \"$pid\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n";

static void test_sim(sd_event *e, const char *health)
{
	_cleanup_(cJSON_Deletep) cJSON *knobs = NULL;
	struct deploy_outcome o = { 0 };
	struct error err = { 0 };
	struct deployment *d;
	char **hook_env = NULL, port_s[16], url[64];
	uint16_t port;
	pid_t pid;
	const char *odd = "$(touch /tmp/goodput-pwned); `id` 'q' \"dq\"";

	CHECK(deploy_pick_free_port("127.0.0.1", &port, &err) == 0);
	snprintf(port_s, sizeof(port_s), "%u", port);
	knobs = cJSON_CreateObject();
	CHECK(knobs && json_add_number(knobs, "max_num_seqs", 64) == 0 &&
	      json_add_string(knobs, "kv_cache_dtype", odd) == 0);
	CHECK(deploy_hook_env(knobs, "study-x", 42, "llama-3.1-8b", "127.0.0.1", port, &hook_env) == 0);
	d = start(e, health ? "sim-health" : "sim",
		  (char *[]){ (char *)sim_path, (char *)"serve", (char *)"--host", (char *)"127.0.0.1",
			      (char *)"--port", port_s, NULL },
		  "deploy-sim.sh", health, 30 * USEC_PER_SEC, hook_env, &o);
	deploy_strv_free(hook_env);
	deploy_test_run(e, &o.done, 40 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_READY, "%s: %s", deploy_state_to_string(o.state), deploy_get_message(d));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
	CHECK_STR_EQ(deploy_get_base_url(d), url);
	CHECK(deploy_get_port(d) == port);
	/* the health command calls it ready on its third call, perhaps before it listens */
	CHECK(health || deploy_port_accepts("127.0.0.1", port));
	CHECK_STR_EQ(read_file("knob-seqs"), "64");
	CHECK_STR_EQ(read_file("knob-odd"), odd); /* verbatim: nothing evaluated it */
	CHECK(access("/tmp/goodput-pwned", F_OK) < 0);
	CHECK_STR_EQ(read_file("env-seen"), "1 42 study-x");
	if (health)
		CHECK_STR_EQ(read_file("health-calls"), "3");
	pid = (pid_t)atoi(read_file("server.pid"));
	CHECK(pid > 1 && kill(pid, 0) == 0);
	fprintf(stderr, "command deploy%s ready in %.3f s at %s\n", health ? " (health command)" : "",
		deploy_get_startup_seconds(d), url);

	CHECK(deploy_stop(d) == 0);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_STOPPED && o.calls == 2, "%s: %s", deploy_state_to_string(o.state),
		  deploy_get_message(d));
	CHECK(exists("teardown-ran"));
	CHECK(kill(pid, 0) < 0 && errno == ESRCH);
	CHECK(!deploy_port_accepts("127.0.0.1", port));
	deploy_free(d);
	unlink(path_of("teardown-ran"));
	unlink(path_of("health-calls"));
}

static void test_failing(sd_event *e)
{
	struct deploy_outcome o = { 0 };
	struct deployment *d;

	d = start(e, "failing", (char *[]){ (char *)"engine", NULL }, "deploy-fail.sh", NULL, 30 * USEC_PER_SEC, NULL,
		  &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED && o.calls == 1);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_CRASHED, "%s", deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "the deploy command exited with status 3");
	CHECK_STR_CONTAINS(deploy_get_message(d), "Error from server (Forbidden)");
	CHECK(exists("teardown-ran"));
	deploy_free(d);
	unlink(path_of("teardown-ran"));

	/* A CUDA OOM in its output is classified as out of memory. */
	d = start(e, "failing-oom", (char *[]){ (char *)"engine", NULL }, "deploy-oom.sh", NULL, 30 * USEC_PER_SEC,
		  NULL, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_OOM, "%s", deploy_get_message(d));
	deploy_free(d);
	unlink(path_of("teardown-ran"));

	d = start(e, "no-url", (char *[]){ (char *)"engine", NULL }, "deploy-nourl.sh", NULL, 30 * USEC_PER_SEC, NULL,
		  &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED);
	CHECK_STR_CONTAINS(deploy_get_message(d), "without printing a GOODPUT_BASE_URL=");
	CHECK_STR_CONTAINS(deploy_get_message(d), "deployment.apps/llm patched");
	CHECK(exists("teardown-ran"));
	deploy_free(d);
	unlink(path_of("teardown-ran"));
}

/* Failures no configuration can avoid are setup failures: a deploy script
 * whose program is missing (the shell's status 127), a health command that
 * cannot be run, a deploy command that is not there at all. */
static void test_setup(sd_event *e)
{
	struct engine_command c = { .argv = (char *[]){ (char *)"engine", NULL }, .env = (char *[]){ NULL } };
	struct deploy_outcome o = { 0 };
	struct deployment *d = NULL;
	struct error err = { 0 };

	d = start(e, "setup-127", (char *[]){ (char *)"engine", NULL }, "deploy-127.sh", NULL, 30 * USEC_PER_SEC, NULL,
		  &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED && o.calls == 1);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_SETUP, "%s: %s",
		  deploy_failure_to_string(deploy_get_failure(d)), deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "the deploy command exited with status 127");
	CHECK_STR_CONTAINS(deploy_get_message(d), "kubectl-not-installed");
	CHECK(exists("teardown-ran"));
	deploy_free(d);
	unlink(path_of("teardown-ran"));

	d = start(e, "setup-health", (char *[]){ (char *)"engine", NULL }, "deploy-url.sh", "no-such-health.sh",
		  30 * USEC_PER_SEC, NULL, &o);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_SETUP, "%s", deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "no-such-health.sh: No such file or directory");
	deploy_free(d);
	unlink(path_of("teardown-ran"));

	/* not there at all: at once (a setup failure by deploy_start's contract) */
	{
		const char *deploy_argv[] = { path_of("no-such-deploy.sh"), NULL };
		const char *teardown_argv[] = { path_of("teardown.sh"), NULL };
		char log_path[512];
		struct deploy_config cfg = { .command = &c,
					     .host = "127.0.0.1",
					     .health_path = "/health",
					     .deploy_command = deploy_argv,
					     .teardown_command = teardown_argv };

		snprintf(log_path, sizeof(log_path), "%s/setup-missing.log", dir);
		cfg.log_path = log_path;
		CHECK_INT_EQ(deploy_start(e, STUDY_DEPLOY_COMMAND, &cfg, deploy_test_on_event, &o, &d, &err), -ENOENT);
		CHECK_STR_CONTAINS(err.msg, "cannot run the deploy command");
		CHECK_STR_CONTAINS(err.msg, "no-such-deploy.sh");
	}
}

static void test_hanging(sd_event *e)
{
	struct deploy_outcome o = { 0 };
	struct deployment *d;
	uint64_t t0 = mono_usec();
	int64_t pgid;

	d = start(e, "hanging", (char *[]){ (char *)"engine", NULL }, "deploy-hang.sh", NULL, USEC_PER_SEC, NULL, &o);
	pgid = deploy_get_pgid(d);
	CHECK(pgid > 1);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK(o.state == DEPLOY_FAILED);
	CHECK_MSG(deploy_get_failure(d) == DEPLOY_FAILURE_STARTUP_TIMEOUT, "%s", deploy_get_message(d));
	CHECK_STR_CONTAINS(deploy_get_message(d), "reported no GOODPUT_BASE_URL= line within 1 s");
	CHECK(exists("teardown-ran"));
	CHECK(kill(-(pid_t)pgid, 0) < 0 && errno == ESRCH);
	CHECK(mono_usec() - t0 < 15 * USEC_PER_SEC);
	deploy_free(d);
}

/* The deploy command execs the server: it stays the deployment's process
 * group leader and outlives the start-up timeout while serving. */
static void test_foreground(sd_event *e)
{
	struct deploy_outcome o = { 0 };
	struct error err = { 0 };
	struct deployment *d;
	char port_s[16], **hook_env = NULL;
	uint16_t port;
	int64_t pgid;

	CHECK(deploy_pick_free_port("127.0.0.1", &port, &err) == 0);
	snprintf(port_s, sizeof(port_s), "%u", port);
	CHECK(deploy_hook_env(NULL, "study-f", 7, NULL, "127.0.0.1", port, &hook_env) == 0);
	d = start(e, "foreground",
		  (char *[]){ (char *)sim_path, (char *)"serve", (char *)"--host", (char *)"127.0.0.1",
			      (char *)"--port", port_s, NULL },
		  "deploy-foreground.sh", NULL, 2 * USEC_PER_SEC, hook_env, &o);
	deploy_strv_free(hook_env);
	pgid = deploy_get_pgid(d);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_READY, "%s: %s", deploy_state_to_string(o.state), deploy_get_message(d));
	/* Past the start-up timeout (and the grace a hook's own timeout would have had). */
	for (uint64_t end = mono_usec() + 4 * USEC_PER_SEC; mono_usec() < end;)
		CHECK(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
	CHECK(o.calls == 1 && deploy_get_state(d) == DEPLOY_READY);
	CHECK(kill(-(pid_t)pgid, 0) == 0);
	CHECK(deploy_stop(d) == 0);
	deploy_test_run(e, &o.done, 30 * USEC_PER_SEC);
	CHECK_MSG(o.state == DEPLOY_STOPPED && o.calls == 2, "%s: %s", deploy_state_to_string(o.state),
		  deploy_get_message(d));
	CHECK(kill(-(pid_t)pgid, 0) < 0 && errno == ESRCH);
	CHECK(!deploy_port_accepts("127.0.0.1", port));
	deploy_free(d);
	unlink(path_of("teardown-ran"));
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

int main(int argc, char **argv)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;

	CHECK_MSG(argc == 2, "usage: test-deploy-command PATH-TO-goodput-sim");
	sim_path = argv[1];
	CHECK(mkdtemp(dir));
	write_script("deploy-sim.sh", deploy_sim);
	write_script("teardown.sh", teardown);
	write_script("health.sh", "f=\"$(dirname \"$0\")/health-calls\"\n"
				  "n=$(( $(cat \"$f\" 2>/dev/null || echo 0) + 1 )); echo $n > \"$f\"\n"
				  "[ $n -ge 3 ]\n");
	write_script("deploy-fail.sh",
		     "echo 'Error from server (Forbidden): deployments.apps \"llm\" is forbidden' >&2\n"
		     "exit 3\n");
	write_script("deploy-oom.sh", "echo 'torch.OutOfMemoryError: CUDA out of memory' >&2\nexit 1\n");
	write_script("deploy-nourl.sh", "echo 'deployment.apps/llm patched'\nexit 0\n");
	write_script("deploy-127.sh", "kubectl-not-installed apply -f llm.yaml\n");
	write_script("deploy-url.sh", "echo GOODPUT_BASE_URL=http://127.0.0.1:9\n");
	write_script("deploy-hang.sh", "echo 'waiting for rollout'\nexec sleep 600\n");
	write_script("deploy-foreground.sh", "echo \"GOODPUT_BASE_URL=http://127.0.0.1:$GOODPUT_PORT\"\nexec \"$@\"\n");
	CHECK(sd_event_default(&e) >= 0);

	test_sim(e, NULL);
	test_sim(e, "health.sh");
	test_failing(e);
	test_setup(e);
	test_hanging(e);
	test_foreground(e);

	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
