/* runner-quality.c — the operator's quality check of a deployed
 * configuration (the study's quality_check argv, e.g. an eval harness): run
 * without a shell once the server is ready, the knob values and the base
 * URL in its environment (GOODPUT_BASE_URL, GOODPUT_MODEL, GOODPUT_STUDY,
 * GOODPUT_KNOBS, GOODPUT_KNOB_<NAME>), its output appended to the trial's
 * log. Exit status 0 lets the probe start; anything else, a signal or an
 * hour without an answer marks the trial infeasible (quality_check_failed),
 * and the search goes on. Watched by an sd-event child source: nothing
 * blocks. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "runner-internal.h"
#include "time-util.h"

extern char **environ;

#define QUALITY_CHECK_TIMEOUT_USEC (60 * 60 * USEC_PER_SEC)

void runner_kill_quality_check(struct runner *r)
{
	r->qc_child = sd_event_source_disable_unref(r->qc_child);
	r->qc_timer = sd_event_source_disable_unref(r->qc_timer);
	if (r->qc_pid > 0) {
		(void)kill(-r->qc_pid, SIGKILL);
		/* SIGKILLed: the wait is immediate */
		(void)waitpid(r->qc_pid, NULL, 0);
		r->qc_pid = 0;
	}
}

static int on_qc_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;
	struct trial_result t;

	if (r->action == RUNNER_ACTION_FINISH)
		return 0; /* failing: runner_finish frees everything */

	trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_QUALITY_CHECK_FAILED);
	snprintf(t.message, sizeof(t.message), "quality check did not finish in %llu s",
		 (unsigned long long)(QUALITY_CHECK_TIMEOUT_USEC / USEC_PER_SEC));
	runner_finish_trial(r, &t);
	return 0;
}

static int on_qc_exit(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct runner *r = userdata;
	struct trial_result t;

	if (r->action == RUNNER_ACTION_FINISH)
		return 0; /* failing: runner_finish frees everything */

	r->qc_pid = 0; /* reaped by sd-event */
	r->qc_child = sd_event_source_disable_unref(r->qc_child);
	r->qc_timer = sd_event_source_disable_unref(r->qc_timer);
	if (si->si_code == CLD_EXITED && si->si_status == 0) {
		runner_start_probe(r);
		return 0;
	}
	trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_QUALITY_CHECK_FAILED);
	if (si->si_code == CLD_EXITED)
		snprintf(t.message, sizeof(t.message), "quality check %s exited with status %d (log: %s)",
			 r->study->quality_check[0], si->si_status, r->log_path);
	else
		snprintf(t.message, sizeof(t.message), "quality check %s killed by signal %d (log: %s)",
			 r->study->quality_check[0], si->si_status, r->log_path);
	runner_finish_trial(r, &t);
	return 0;
}

/* GOODPUT_BASE_URL, GOODPUT_MODEL, GOODPUT_STUDY, GOODPUT_KNOBS (JSON) and
 * GOODPUT_KNOB_<NAME> for each knob, on top of our environment. */
static char **qc_environment(struct runner *r)
{
	size_t n_env = 0, n = 0;
	char **envp;
	_cleanup_(cjson_freep) char *knobs = cJSON_PrintUnformatted(r->knobs);

	while (environ[n_env])
		n_env++;
	envp = calloc(n_env + r->study->space->n_knobs + 5, sizeof(char *));
	if (!envp || !knobs)
		goto oom;
	for (size_t i = 0; i < n_env; i++)
		if (strncmp(environ[i], "GOODPUT_", 8) != 0 && !(envp[n++] = strdup(environ[i])))
			goto oom;
	if (asprintf(&envp[n++], "GOODPUT_BASE_URL=%s", deploy_get_base_url(r->deploy)) < 0 ||
	    asprintf(&envp[n++], "GOODPUT_MODEL=%s", r->study->model.name) < 0 ||
	    asprintf(&envp[n++], "GOODPUT_STUDY=%s", r->row.name) < 0 ||
	    asprintf(&envp[n++], "GOODPUT_KNOBS=%s", knobs) < 0)
		goto oom;
	for (size_t k = 0; k < r->study->space->n_knobs; k++) {
		char v[64], name[OPT_KNOB_NAME_MAX];
		const char *val = opt_config_text(r->study->space, &r->cand.config, k, v, sizeof(v));

		snprintf(name, sizeof(name), "%s", r->study->space->knobs[k].name);
		for (char *p = name; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		if (asprintf(&envp[n++], "GOODPUT_KNOB_%s=%s", name, val) < 0)
			goto oom;
	}
	return envp;
oom:
	for (size_t i = 0; envp && i < n; i++)
		free(envp[i]);
	free(envp);
	return NULL;
}

void runner_start_quality_check(struct runner *r)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t empty, def;
	struct trial_result t;
	char **envp = qc_environment(r);
	pid_t pid;
	int k;

	if (!envp) {
		runner_fail(r, "out of memory");
		return;
	}
	sigemptyset(&empty);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGCHLD);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, r->log_path, O_WRONLY | O_APPEND | O_CREAT, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &empty);
	posix_spawnattr_setsigdefault(&attr, &def);
	/* argv straight from the spec: no shell */
	k = -posix_spawnp(&pid, r->study->quality_check[0], &fa, &attr, (char *const *)r->study->quality_check, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	for (size_t i = 0; envp[i]; i++)
		free(envp[i]);
	free(envp);
	if (k < 0) {
		trial_result_init(&t, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_QUALITY_CHECK_FAILED);
		snprintf(t.message, sizeof(t.message), "quality check %s could not be started: %s",
			 r->study->quality_check[0], strerror(-k));
		runner_finish_trial(r, &t);
		return;
	}
	r->qc_pid = pid;
	k = sd_event_add_child(r->event, &r->qc_child, pid, WEXITED, on_qc_exit, r);
	if (k >= 0)
		k = sd_event_add_time_relative(r->event, &r->qc_timer, CLOCK_MONOTONIC, QUALITY_CHECK_TIMEOUT_USEC,
					       USEC_PER_SEC, on_qc_timeout, r);
	if (k < 0) {
		runner_fail(r, "cannot watch the quality check");
		return;
	}
	(void)sd_event_source_set_description(r->qc_child, "runner-quality-check");
	runner_set_phase(r, RUNNER_QUALITY_CHECK);
}
