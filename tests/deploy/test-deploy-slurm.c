/* The slurm deployer against Slurm's client commands as fake-slurm.py plays
 * them (its jobs are real processes: the batch script goodput writes runs
 * `goodput job-exec`, which starts goodput-sim on a port it picks): a job
 * waits PENDING (its wait is no deploy time), runs, is READY at the address
 * its launcher reported and stops with scancel; a server that exits is
 * classified from its log; a job the cluster ends (NODE_FAIL), one it
 * cancels and one the queue forgets are lost (not the configuration's
 * doing), also when squeue answers slowly; a job stopped while pending
 * never runs; sbatch's refusal is a submit error, a controller it cannot
 * reach a wait; a deployment freed while its job runs cancels the job; a
 * disaggregated configuration is a job per role, the router's last.
 *
 * Usage: test-deploy-slurm FAKE_SLURM GOODPUT GOODPUT_SIM */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "child.h"
#include "deploy-test-util.h"
#include "deploy.h"
#include "file-util.h"
#include "json-util.h"
#include "slurm.h"
#include "tests.h"
#include "time-util.h"

static char dir[] = "/tmp/goodput-test-deploy-slurm-XXXXXX";
static const char *fake, *sim;
static sd_event *event;
static struct slurm_cluster *cluster;

/* The fake's record of a job: its state as squeue prints it. */
static void job_state(uint64_t id, char *buf, size_t size)
{
	char path[600];
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	const char *s = NULL;

	snprintf(path, sizeof(path), "%s/fake/job-%" PRIu64 ".json", dir, id);
	buf[0] = 0;
	if (json_parse_file(path, 1 << 20, &j, NULL) < 0)
		return;
	if (json_get_string(j, "", "job_state", 64, &s, NULL) > 0)
		snprintf(buf, size, "%s", s);
}

/* The process the fake runs as the job (the batch script, which becomes
 * the launcher and then the server). */
static long job_pid(uint64_t id)
{
	char path[600];
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	const cJSON *pid;

	snprintf(path, sizeof(path), "%s/fake/job-%" PRIu64 ".json", dir, id);
	CHECK(json_parse_file(path, 1 << 20, &j, NULL) >= 0);
	pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
	CHECK(cJSON_IsNumber(pid) && pid->valuedouble > 1);
	return (long)pid->valuedouble;
}

/* Whether the environment of process pid holds the entry exactly. */
static bool environ_has(long pid, const char *entry)
{
	char path[64];
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;

	snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
	CHECK(file_read_regular(path, 0, 1 << 20, &text, &len, NULL) >= 0);
	for (size_t i = 0; i < len; i += strlen(text + i) + 1)
		if (strcmp(text + i, entry) == 0)
			return true;
	return false;
}

/* fake-slurm.py VERB ID [ARG] */
static void fake_do(const char *verb, uint64_t id, const char *arg)
{
	char idtext[24];
	char *argv[] = { (char *)fake, (char *)verb, idtext, (char *)arg, NULL };
	struct child_options o = { .argv = argv, .output = CHILD_OUTPUT_INHERIT };
	struct child_exit how;

	snprintf(idtext, sizeof(idtext), "%" PRIu64, id);
	CHECK(child_run(&o, &how, NULL) >= 0);
	CHECK(child_exit_ok(&how));
}

struct run {
	struct deploy_outcome o;
	struct deployment *d;
	char log[600];
};

/* A job running goodput-sim (or argv0 instead, with the same arguments). */
static void start(struct run *r, const char *name, const char *argv0)
{
	char *argv[] = { (char *)(argv0 ? argv0 : sim),
			 "serve",
			 "--model",
			 "llama-3.1-8b",
			 "--gpu",
			 "L40S",
			 "--host",
			 "127.0.0.1",
			 "--port",
			 ENGINE_PORT_PLACEHOLDER,
			 NULL };
	char *env[] = { "GOODPUT_TEST_MARK=" ENGINE_PORT_PLACEHOLDER, NULL };
	struct engine_command cmd = { .argv = argv, .env = env };
	struct deploy_config cfg = {
		.command = &cmd,
		.host = "127.0.0.1",
		.health_path = "/health",
		.health_interval_usec = 100 * USEC_PER_MSEC,
		.startup_timeout_usec = 30 * USEC_PER_SEC,
		.stop_timeout_usec = 5 * USEC_PER_SEC,
		.cluster = cluster,
		.job_name = name,
		.job_comment = "goodput:test:1:1",
		.job_gpus = 2,
		.job_cpus = 1,
		.partition = "gpu",
		.time_limit_usec = 90 * USEC_PER_SEC,
	};
	struct error err = { 0 };

	snprintf(r->log, sizeof(r->log), "%s/logs/%s.log", dir, name);
	cfg.log_path = r->log;
	r->o = (struct deploy_outcome){ 0 };
	CHECK_MSG(deploy_start(event, STUDY_DEPLOY_SLURM, &cfg, deploy_test_on_event, &r->o, &r->d, &err) >= 0, "%s",
		  err.msg);
	CHECK_INT_EQ(deploy_get_state(r->d), DEPLOY_PENDING);
}

/* Runs until the deployment reports state (PENDING and STARTING may be
 * passed by a later state). */
static void wait_state(struct run *r, enum deploy_state state)
{
	uint64_t deadline = mono_usec() + 60 * USEC_PER_SEC;

	while (deploy_get_state(r->d) != state && mono_usec() < deadline) {
		r->o.done = false;
		CHECK(sd_event_run(event, 100 * USEC_PER_MSEC) >= 0);
		CHECK_MSG(deploy_get_state(r->d) != DEPLOY_FAILED || state == DEPLOY_FAILED, "failed: %s",
			  deploy_get_message(r->d));
	}
	CHECK_MSG(deploy_get_state(r->d) == state, "state %s, waited for %s",
		  deploy_state_to_string(deploy_get_state(r->d)), deploy_state_to_string(state));
	/* and its callback */
	while (!(r->o.done && r->o.state == state) && mono_usec() < deadline)
		CHECK(sd_event_run(event, 100 * USEC_PER_MSEC) >= 0);
}

static char *slurp(const char *path)
{
	char *text = NULL;
	FILE *f = fopen(path, "r");
	size_t n = 0;

	CHECK(f);
	CHECK(getdelim(&text, &n, 0, f) >= 0);
	fclose(f);
	return text;
}

/* PENDING for a while, then READY at the reported address; scancel stops it. */
static void test_ready_and_stop(void)
{
	struct run r;
	char state[32], expect[64];
	_cleanup_(freep) char *log = NULL;
	uint64_t id;

	setenv("FAKE_SLURM_PENDING", "1.0", 1);
	start(&r, "ready", NULL);
	wait_state(&r, DEPLOY_PENDING);
	id = deploy_get_job_id(r.d);
	CHECK(id >= 100);
	wait_state(&r, DEPLOY_READY);
	CHECK_STR_EQ(deploy_get_node(r.d), "fakenode");
	CHECK_STR_EQ(deploy_get_gpus(r.d), "0,1");
	/* the second in the queue is no start-up time */
	CHECK_MSG(deploy_get_pending_seconds(r.d) >= 0.9, "pending %.2f s", deploy_get_pending_seconds(r.d));
	CHECK_MSG(deploy_get_startup_seconds(r.d) < deploy_get_pending_seconds(r.d) + 5, "start-up %.2f s",
		  deploy_get_startup_seconds(r.d));
	CHECK(deploy_get_base_url(r.d) && strncmp(deploy_get_base_url(r.d), "http://127.0.0.1:", 17) == 0);
	/* the server listens on the port the launcher put into its argv, and
	 * finds the same port wherever its environment named the placeholder */
	snprintf(expect, sizeof(expect), "GOODPUT_TEST_MARK=%s", deploy_get_base_url(r.d) + 17);
	CHECK_MSG(environ_has(job_pid(id), expect), "no %s in the server's environment", expect);
	log = slurp(r.log);
	/* the sbatch line, the launcher's line; the port filled into argv and environment alike */
	CHECK_STR_CONTAINS(log, "--gres=gpu:2");
	CHECK_STR_CONTAINS(log, "--partition=gpu");
	CHECK_STR_CONTAINS(log, "--time=0-00:02:00");
	snprintf(expect, sizeof(expect), "job-exec: job %" PRIu64 " on fakenode (GPUs 0,1)", id);
	CHECK_STR_CONTAINS(log, expect);
	CHECK_INT_EQ(deploy_stop(r.d), 0);
	wait_state(&r, DEPLOY_STOPPED);
	job_state(id, state, sizeof(state));
	CHECK_STR_EQ(state, "CANCELLED");
	deploy_free(r.d);
	printf("ready: job %" PRIu64 " pending ~1 s, READY, stopped with scancel\n", id);
}

/* A server that exits: its log decides the class. */
static void test_server_exits(void)
{
	struct run r;

	setenv("FAKE_SLURM_PENDING", "0.1", 1);
	start(&r, "exits", "false");
	wait_state(&r, DEPLOY_FAILED);
	CHECK_INT_EQ(deploy_get_failure(r.d), DEPLOY_FAILURE_CRASHED);
	CHECK_STR_CONTAINS(deploy_get_message(r.d), "Slurm FAILED, exit status 1");
	deploy_free(r.d);
	printf("exits: crashed, from its log\n");
}

/* The cluster takes a serving job away, or the queue forgets it: lost. */
static void test_lost(const char *how)
{
	struct run r;
	uint64_t id;

	setenv("FAKE_SLURM_PENDING", "0.1", 1);
	start(&r, how, NULL);
	wait_state(&r, DEPLOY_READY);
	id = deploy_get_job_id(r.d);
	if (strcmp(how, "forget") == 0)
		fake_do("forget", id, NULL);
	else
		fake_do("end", id, how);
	wait_state(&r, DEPLOY_FAILED);
	CHECK_MSG(deploy_get_failure(r.d) == DEPLOY_FAILURE_LOST, "%s: %s", how, deploy_get_message(r.d));
	CHECK_STR_CONTAINS(deploy_get_message(r.d), "ended by the cluster");
	printf("%s: lost: %s\n", how, deploy_get_message(r.d));
	deploy_free(r.d);
}

/* A job cancelled while the controller is slow to answer squeue (longer
 * than the usual verdict wait): the verdict stays pending until a look
 * asked for after the server stopped answering has read the queue, and
 * then it is the cluster's doing, never the configuration's. */
static void test_slow_verdict(void)
{
	struct run r;
	uint64_t id, asked, waited = 0;

	setenv("FAKE_SLURM_PENDING", "0.1", 1);
	start(&r, "slow", NULL);
	wait_state(&r, DEPLOY_READY);
	id = deploy_get_job_id(r.d);
	setenv("FAKE_SLURM_SQUEUE_DELAY", "3", 1);
	fake_do("end", id, "CANCELLED");
	deploy_check_soon(r.d);
	asked = mono_usec();
	CHECK(deploy_verdict_pending(r.d));
	while (deploy_get_state(r.d) != DEPLOY_FAILED) {
		waited = mono_usec() - asked;
		CHECK_MSG(waited < 60 * USEC_PER_SEC, "no verdict within 60 s");
		CHECK_MSG(deploy_verdict_pending(r.d),
			  "%.1f s after the look was asked for: no verdict (%s: %s), none pending",
			  (double)waited / USEC_PER_SEC, deploy_state_to_string(deploy_get_state(r.d)),
			  deploy_get_message(r.d));
		CHECK(sd_event_run(event, 100 * USEC_PER_MSEC) >= 0);
	}
	unsetenv("FAKE_SLURM_SQUEUE_DELAY");
	CHECK_MSG(waited > deploy_verdict_usec(r.d), "the verdict came within the usual wait: squeue was not slow");
	CHECK_MSG(deploy_get_failure(r.d) == DEPLOY_FAILURE_LOST, "%s", deploy_get_message(r.d));
	CHECK(!deploy_verdict_pending(r.d));
	printf("slow verdict: after %.1f s: %s\n", (double)waited / USEC_PER_SEC, deploy_get_message(r.d));
	deploy_free(r.d);
}

/* Stopped while it waits: cancelled, it never runs. */
static void test_stop_pending(void)
{
	struct run r;
	char state[32];
	uint64_t id;

	setenv("FAKE_SLURM_PENDING", "hold", 1);
	start(&r, "held", NULL);
	wait_state(&r, DEPLOY_PENDING);
	id = deploy_get_job_id(r.d);
	CHECK(id > 0);
	/* why it waits, once the queue was read */
	for (uint64_t end = mono_usec() + 10 * USEC_PER_SEC; !deploy_get_pending_reason(r.d)[0] && mono_usec() < end;)
		CHECK(sd_event_run(event, 100 * USEC_PER_MSEC) >= 0);
	CHECK_STR_EQ(deploy_get_pending_reason(r.d), "Resources");
	CHECK_INT_EQ(deploy_stop(r.d), 0);
	wait_state(&r, DEPLOY_STOPPED);
	CHECK(isnan(deploy_get_pending_seconds(r.d)));
	job_state(id, state, sizeof(state));
	CHECK_STR_EQ(state, "CANCELLED");
	deploy_free(r.d);
	printf("held: stopped while pending, cancelled\n");
}

/* A deployment freed while its job runs: the job does not outlive it. */
static void test_free_running(void)
{
	struct run r;
	char state[32];
	uint64_t id;

	setenv("FAKE_SLURM_PENDING", "0.1", 1);
	start(&r, "freed", NULL);
	wait_state(&r, DEPLOY_READY);
	id = deploy_get_job_id(r.d);
	deploy_free(r.d);
	job_state(id, state, sizeof(state));
	CHECK_STR_EQ(state, "CANCELLED");
	printf("freed: job %" PRIu64 " cancelled on the spot\n", id);
}

/* sbatch refuses the job. */
static void test_refused(void)
{
	struct run r;

	setenv("FAKE_SLURM_REFUSE", "Invalid partition name specified", 1);
	start(&r, "refused", NULL);
	wait_state(&r, DEPLOY_FAILED);
	CHECK_INT_EQ(deploy_get_failure(r.d), DEPLOY_FAILURE_SUBMIT);
	CHECK_STR_CONTAINS(deploy_get_message(r.d), "Invalid partition name specified");
	CHECK_INT_EQ(deploy_get_job_id(r.d), 0);
	deploy_free(r.d);
	unsetenv("FAKE_SLURM_REFUSE");
	printf("refused: %s\n", "submit error");

	/* no controller answered: nothing submitted, tried again later */
	setenv("FAKE_SLURM_REFUSE", "Batch job submission failed: Unable to contact slurm controller (connect failure)",
	       1);
	start(&r, "unreachable", NULL);
	wait_state(&r, DEPLOY_FAILED);
	CHECK_MSG(deploy_get_failure(r.d) == DEPLOY_FAILURE_UNREACHABLE, "%s", deploy_get_message(r.d));
	CHECK_STR_CONTAINS(deploy_get_message(r.d), "controller did not answer");
	CHECK_INT_EQ(deploy_get_job_id(r.d), 0);
	deploy_free(r.d);
	unsetenv("FAKE_SLURM_REFUSE");
	printf("unreachable: %s\n", "scheduler_unreachable");
}

static int rm(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

/* fake-slurm.py under each command's name, first in PATH with goodput's programs. */
static void install_fake(const char *goodput)
{
	static const char *const names[] = { "sbatch", "squeue", "scancel", "sinfo", "sacct" };
	_cleanup_(freep) char *gdir = strdup(goodput), *sdir = strdup(sim), *path = NULL;
	char bin[600], link[700];

	snprintf(bin, sizeof(bin), "%s/bin", dir);
	CHECK(mkdir(bin, 0755) == 0);
	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		snprintf(link, sizeof(link), "%s/%s", bin, names[i]);
		CHECK(symlink(fake, link) == 0);
	}
	CHECK(asprintf(&path, "%s:%s:%s:%s", bin, dirname(gdir), dirname(sdir), getenv("PATH")) > 0);
	CHECK(setenv("PATH", path, 1) == 0);
	snprintf(link, sizeof(link), "%s/fake", dir);
	CHECK(setenv("FAKE_SLURM_DIR", link, 1) == 0);
	snprintf(link, sizeof(link), "%s/logs", dir);
	CHECK(mkdir(link, 0755) == 0);
	snprintf(link, sizeof(link), "%s/ledger", dir);
	CHECK(mkdir(link, 0755) == 0);
	CHECK(setenv("GOODPUT_SIM_GPU_LEDGER", link, 1) == 0);
}

/* ---- a disaggregated configuration: a job per role ---- */

static char router_args[6][64];
static char *router_argv[16];
static struct engine_command router_cmd;
static char router_log[600];
static uint16_t seen_aux[2];

/* The router's command, from where the worker jobs serve. */
static int roles_router(void *userdata, const struct deploy_worker_address *a, size_t n, struct deploy_config *ret,
			struct error *err)
{
	size_t k = 0;

	CHECK_INT_EQ(n, 2);
	CHECK(a[0].prefill && !a[1].prefill);
	for (size_t i = 0; i < n; i++) {
		CHECK_STR_EQ(a[i].host, "127.0.0.1");
		CHECK(a[i].port > 0 && a[i].aux_port > 0 && a[i].aux_port != a[i].port);
		seen_aux[i] = a[i].aux_port;
		snprintf(router_args[2 * i], sizeof(router_args[0]), "%.63s", a[i].host);
		snprintf(router_args[2 * i + 1], sizeof(router_args[0]), "%u", a[i].port);
	}
	router_argv[k++] = (char *)sim;
	router_argv[k++] = "proxy";
	router_argv[k++] = "--host";
	router_argv[k++] = "127.0.0.1";
	router_argv[k++] = "--port";
	router_argv[k++] = ENGINE_PORT_PLACEHOLDER;
	router_argv[k++] = "--prefiller-hosts";
	router_argv[k++] = router_args[0];
	router_argv[k++] = "--prefiller-ports";
	router_argv[k++] = router_args[1];
	router_argv[k++] = "--decoder-hosts";
	router_argv[k++] = router_args[2];
	router_argv[k++] = "--decoder-ports";
	router_argv[k++] = router_args[3];
	router_argv[k] = NULL;
	router_cmd = (struct engine_command){ .argv = router_argv };
	snprintf(router_log, sizeof(router_log), "%s/logs/roles-router.log", dir);
	*ret = (struct deploy_config){
		.command = &router_cmd,
		.log_path = router_log,
		.host = "127.0.0.1",
		.health_path = "/healthcheck",
		.health_interval_usec = 100 * USEC_PER_MSEC,
		.startup_timeout_usec = 30 * USEC_PER_SEC,
		.stop_timeout_usec = 5 * USEC_PER_SEC,
		.cluster = cluster,
		.job_name = "roles-router",
		.job_comment = "goodput:test:1:1",
		.job_cpus = 1,
		.partition = "gpu",
		.time_limit_usec = 90 * USEC_PER_SEC,
	};
	return 0;
}

/* The id of the fake's job of that name from first on (0: none). */
static uint64_t job_named(uint64_t first, const char *name)
{
	for (uint64_t id = first; id < first + 64; id++) {
		char path[600];
		_cleanup_(cJSON_Deletep) cJSON *j = NULL;
		const char *s = NULL;

		snprintf(path, sizeof(path), "%s/fake/job-%" PRIu64 ".json", dir, id);
		if (json_parse_file(path, 1 << 20, &j, NULL) >= 0 &&
		    json_get_string(j, "", "name", 256, &s, NULL) > 0 && strcmp(s, name) == 0)
			return id;
	}
	return 0;
}

/* The ids of the fake's jobs above first, in order. */
static size_t jobs_since(uint64_t first, uint64_t *ids, size_t max)
{
	size_t n = 0;

	for (uint64_t id = first; id < first + 64 && n < max; id++) {
		char path[600];

		snprintf(path, sizeof(path), "%s/fake/job-%" PRIu64 ".json", dir, id);
		if (access(path, F_OK) == 0)
			ids[n++] = id;
	}
	return n;
}

/* A prefill job, a decode job (each its second port picked by its launcher
 * and reported back), then the router's job naming them: the unit is READY
 * at the router's address and stops with every job ended. A decode worker that cannot start fails
 * the unit with its name, and no job is left running. */
static void test_roles(bool decode_fails)
{
	static char *pre_argv[] = { NULL,
				    "serve",
				    "--model",
				    "llama-3.1-8b",
				    "--gpu",
				    "L40S",
				    "--host",
				    "127.0.0.1",
				    "--port",
				    ENGINE_PORT_PLACEHOLDER,
				    "--kv-transfer-config",
				    "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}",
				    NULL };
	static char *dec_argv[] = { NULL,
				    "serve",
				    "--model",
				    "llama-3.1-8b",
				    "--gpu",
				    "L40S",
				    "--host",
				    "127.0.0.1",
				    "--port",
				    ENGINE_PORT_PLACEHOLDER,
				    "--kv-transfer-config",
				    "{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}",
				    NULL,
				    NULL };
	static char *aux_env[] = { "VLLM_NIXL_SIDE_CHANNEL_PORT=" ENGINE_AUX_PORT_PLACEHOLDER, NULL };
	struct engine_command pre = { .argv = pre_argv, .env = aux_env }, dec = { .argv = dec_argv, .env = aux_env };
	struct deploy_role w[2];
	char logs[2][600], state[32], expect[64];
	uint64_t ids[8], first = 0;
	struct run r = { 0 };
	struct error err = { 0 };
	size_t n;

	pre_argv[0] = dec_argv[0] = (char *)sim;
	dec_argv[12] = decode_fails ? "--fault-fail-startup" : NULL;
	/* the next job ids */
	for (first = 100; jobs_since(first, ids, 1) == 1; first = ids[0] + 1)
		;
	for (int i = 0; i < 2; i++) {
		snprintf(logs[i], sizeof(logs[i]), "%s/logs/roles-%d-%s.log", dir, decode_fails,
			 i ? "decode" : "prefill");
		w[i] = (struct deploy_role){
			.name = i ? "decode-0" : "prefill-0",
			.prefill = i == 0,
			.config = { .command = i ? &dec : &pre,
				    .log_path = logs[i],
				    .host = "127.0.0.1",
				    .health_path = "/health",
				    .health_interval_usec = 100 * USEC_PER_MSEC,
				    .startup_timeout_usec = 30 * USEC_PER_SEC,
				    .stop_timeout_usec = 5 * USEC_PER_SEC,
				    .cluster = cluster,
				    .job_name = i ? "roles-decode-0" : "roles-prefill-0",
				    .job_comment = "goodput:test:1:1",
				    .job_gpus = 1,
				    .job_cpus = 1,
				    .partition = "gpu",
				    .time_limit_usec = 90 * USEC_PER_SEC },
		};
	}
	setenv("FAKE_SLURM_PENDING", "0.2", 1);
	CHECK_MSG(deploy_start_roles(event, STUDY_DEPLOY_SLURM,
				     &(struct deploy_roles_config){ .workers = w,
								    .n_workers = 2,
								    .router = roles_router,
								    .router_name = "router",
								    .startup_timeout_usec = 60 * USEC_PER_SEC,
								    .health_interval_usec = 100 * USEC_PER_MSEC },
				     deploy_test_on_event, &r.o, &r.d, &err) >= 0,
		  "%s", err.msg);
	CHECK_INT_EQ(deploy_get_state(r.d), DEPLOY_PENDING);
	if (decode_fails) {
		wait_state(&r, DEPLOY_FAILED);
		CHECK_MSG(strncmp(deploy_get_message(r.d), "decode-0: ", 10) == 0, "%s", deploy_get_message(r.d));
		printf("roles: %s\n", deploy_get_message(r.d));
	} else {
		wait_state(&r, DEPLOY_READY);
		n = jobs_since(first, ids, 8);
		CHECK_INT_EQ(n, 3);
		/* each worker's second port: in its environment, and the router was told it */
		for (int i = 0; i < 2; i++) {
			snprintf(expect, sizeof(expect), "VLLM_NIXL_SIDE_CHANNEL_PORT=%u", seen_aux[i]);
			CHECK_MSG(environ_has(job_pid(job_named(first, w[i].config.job_name)), expect),
				  "no %s in %s's environment", expect, w[i].name);
		}
		/* the unit serves where the router's job does */
		CHECK(deploy_get_base_url(r.d) && strncmp(deploy_get_base_url(r.d), "http://127.0.0.1:", 17) == 0);
		CHECK_INT_EQ(deploy_get_port(r.d) > 0, 1);
		CHECK_INT_EQ(deploy_stop(r.d), 0);
		wait_state(&r, DEPLOY_STOPPED);
	}
	n = jobs_since(first, ids, 8);
	CHECK(n >= 2);
	for (size_t i = 0; i < n; i++) {
		job_state(ids[i], state, sizeof(state));
		CHECK_MSG(strcmp(state, "RUNNING") != 0 && strcmp(state, "PENDING") != 0, "job %" PRIu64 ": %s", ids[i],
			  state);
	}
	deploy_free(r.d);
	if (!decode_fails)
		printf("roles: prefill, decode and router jobs READY at the router's address, all ended\n");
}

/* The fake's jobs run in sessions of their own, out of this process's
 * group: when meson's timeout ends the test (SIGTERM to its group, SIGKILL
 * 0.5 s later) they would be left running — a runner holding a job, a
 * goodput-sim serving. `fake-slurm.py cleanup` ends them by their sessions
 * and removes the test's folder; it runs in a session of its own, so the
 * SIGKILL does not stop it halfway. */
static char *cleanup_argv[4];
static pid_t main_pid;

static pid_t spawn_cleanup(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		(void)setsid();
		execv(cleanup_argv[0], cleanup_argv);
		_exit(127);
	}
	return pid;
}

/* fork, setsid and execv are async-signal-safe; the argv is made before */
static void on_term(int sig)
{
	(void)spawn_cleanup();
	_exit(128 + sig);
}

/* exit(1) of a failed check (and the end of a run that passed) */
static void cleanup_at_exit(void)
{
	pid_t pid;

	if (getpid() != main_pid)
		return; /* a forked copy's exit */
	pid = spawn_cleanup();
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
}

static void clean_up_when_killed(void)
{
	struct sigaction sa = { .sa_handler = on_term };

	main_pid = getpid();
	cleanup_argv[0] = (char *)fake;
	cleanup_argv[1] = (char *)"cleanup";
	cleanup_argv[2] = dir;
	CHECK(atexit(cleanup_at_exit) == 0);
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGTERM, &sa, NULL) == 0 && sigaction(SIGINT, &sa, NULL) == 0 &&
	      sigaction(SIGHUP, &sa, NULL) == 0);
}

int main(int argc, char **argv)
{
	struct slurm_options o = { .poll_interval_usec = 200 * USEC_PER_MSEC };
	struct error err = { 0 };
	char *goodput;

	CHECK(argc == 4);
	/* the jobs run in their own folder: every path absolute */
	fake = realpath(argv[1], NULL);
	sim = realpath(argv[3], NULL);
	goodput = realpath(argv[2], NULL);
	CHECK(fake && sim && goodput);
	CHECK(mkdtemp(dir));
	install_fake(goodput);
	clean_up_when_killed();
	CHECK(child_block_sigchld() >= 0);
	CHECK(sd_event_default(&event) >= 0);
	CHECK_MSG(slurm_cluster_new(event, &o, &cluster, &err) >= 0, "%s", err.msg);

	test_ready_and_stop();
	test_server_exits();
	test_lost("NODE_FAIL");
	test_lost("PREEMPTED");
	test_lost("CANCELLED");
	test_lost("forget");
	test_slow_verdict();
	test_stop_pending();
	test_free_running();
	test_refused();
	test_roles(false);
	test_roles(true);

	slurm_cluster_free(cluster);
	sd_event_unref(event);
	nftw(dir, rm, 16, FTW_DEPTH | FTW_PHYS);
	free((char *)fake);
	free((char *)sim);
	free(goodput);
	return 0;
}
