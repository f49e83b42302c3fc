/* runner-quality.c — the operator's quality check of a deployed
 * configuration (the study's quality_check argv, e.g. an eval harness): run
 * without a shell once the server is ready, the knob values and the base
 * URL in its environment (GOODPUT_BASE_URL, GOODPUT_MODEL, GOODPUT_STUDY,
 * GOODPUT_KNOBS, GOODPUT_KNOB_<NAME>), its output appended to the trial's
 * log. Exit status 0 passes; anything else, a signal or an hour without an
 * answer fails it (the deploy evaluator marks the trial infeasible,
 * quality_check_failed, and the search goes on). A child of child.h,
 * watched on the loop: nothing blocks. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "deploy.h"
#include "runner-internal.h"
#include "runner-quality.h"
#include "time-util.h"

extern char **environ;

#define QUALITY_CHECK_TIMEOUT_USEC (60 * 60 * USEC_PER_SEC)

struct runner_quality {
	struct child *child;
	const char *program;
	char *log_path;
	runner_quality_fn cb;
	void *userdata;
};

static inline void strv_freep(char ***p)
{
	deploy_strv_free(*p);
}

struct runner_quality *runner_quality_free(struct runner_quality *q)
{
	if (!q)
		return NULL;
	/* a check still running is SIGKILLed: reaping it is immediate */
	child_free(q->child);
	free(q->log_path);
	free(q);
	return NULL;
}

static void on_check_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct runner_quality *q = userdata;
	char why[ERROR_MSG_MAX];

	if (child_exit_ok(how)) {
		q->cb(q, true, NULL, q->userdata);
		return;
	}
	if (how->timed_out)
		snprintf(why, sizeof(why), "quality check did not finish in %llu s",
			 (unsigned long long)(QUALITY_CHECK_TIMEOUT_USEC / USEC_PER_SEC));
	else if (how->code == CLD_EXITED)
		snprintf(why, sizeof(why), "quality check %s exited with status %d (log: %s)", q->program, how->status,
			 q->log_path);
	else
		snprintf(why, sizeof(why), "quality check %s killed by signal %d (log: %s)", q->program, how->status,
			 q->log_path);
	q->cb(q, false, why, q->userdata);
}

static int env_add(char **envp, size_t *n, const char *key, const char *value)
{
	if (asprintf(&envp[*n], "%s=%s", key, value) < 0) {
		envp[*n] = NULL;
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

/* GOODPUT_BASE_URL, GOODPUT_MODEL, GOODPUT_STUDY, GOODPUT_KNOBS (JSON) and
 * GOODPUT_KNOB_<NAME> for each knob, on top of our environment. */
static char **environment(const struct runner_trial *t, const char *base_url)
{
	const struct runner *r = t->runner;
	const struct opt_space *space = r->study->space;
	_cleanup_(cjson_freep) char *knobs = cJSON_PrintUnformatted(t->knobs);
	_cleanup_(strv_freep) char **envp = NULL;
	size_t n_env = 0, n = 0;

	while (environ[n_env])
		n_env++;
	envp = calloc(n_env + space->n_knobs + 5, sizeof(char *));
	if (!envp || !knobs)
		return NULL;
	for (size_t i = 0; i < n_env; i++)
		if (strncmp(environ[i], "GOODPUT_", 8) != 0 && !(envp[n++] = strdup(environ[i])))
			return NULL;
	if (env_add(envp, &n, "GOODPUT_BASE_URL", base_url) < 0 ||
	    env_add(envp, &n, "GOODPUT_MODEL", r->study->model.name) < 0 ||
	    env_add(envp, &n, "GOODPUT_STUDY", r->row.name) < 0 || env_add(envp, &n, "GOODPUT_KNOBS", knobs) < 0)
		return NULL;
	for (size_t k = 0; k < space->n_knobs; k++) {
		char v[64], key[OPT_KNOB_NAME_MAX + 16];
		const char *val = opt_config_text(space, &t->proposal.config, k, v, sizeof(v));

		snprintf(key, sizeof(key), "GOODPUT_KNOB_%s", space->knobs[k].name);
		for (char *p = key; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		if (env_add(envp, &n, key, val) < 0)
			return NULL;
	}
	return TAKE_PTR(envp);
}

int runner_quality_start(const struct runner_trial *t, const char *base_url, runner_quality_fn cb, void *userdata,
			 struct runner_quality **ret, struct error *err)
{
	const char *program = t->runner->study->quality_check[0];
	_cleanup_(strv_freep) char **envp = environment(t, base_url);
	_cleanup_(closep) int fd = -1;
	struct child_options o = {
		/* argv straight from the spec: no shell */
		.argv = (char *const *)t->runner->study->quality_check,
		.output = CHILD_OUTPUT_FD,
		.timeout_usec = QUALITY_CHECK_TIMEOUT_USEC,
		.description = "runner-quality-check",
	};
	struct runner_quality *q;
	int k;

	if (!envp)
		return error_set(err, -ENOMEM, "out of memory");
	q = calloc(1, sizeof(*q));
	if (!q || !(q->log_path = strdup(t->log_path))) {
		free(q);
		return error_set(err, -ENOMEM, "out of memory");
	}
	q->program = program;
	q->cb = cb;
	q->userdata = userdata;
	o.envp = envp;
	fd = open(t->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	o.out_fd = fd;
	k = fd < 0 ? -errno : child_spawn(t->runner->event, &o, on_check_exit, q, &q->child);
	if (k < 0) {
		runner_quality_free(q);
		error_set(err, k, "quality check %s could not be started: %s", program, strerror(-k));
		return RUNNER_QUALITY_NOT_STARTED;
	}
	*ret = q;
	return RUNNER_QUALITY_RUNNING;
}
