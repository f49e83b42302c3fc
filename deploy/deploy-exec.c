/* deploy-exec.c — the `exec` deployer: the server as a child process.
 *
 * The server is spawned (child.h: no shell, a process group of its own,
 * stdin from /dev/null, an empty signal mask) with stdout and stderr
 * appended to the trial's log and the engine's environment on top of ours.
 * It runs under a keeper that ends its whole group when the caller dies,
 * and only once the caller has recorded the group (deploy_config.record):
 * whatever kills goodput, the server is either ended with it or found and
 * ended by the next goodput on that database.
 * Its exit is the end of the server; everything between — the address, the
 * health checks, the start-up timeout — is the shared start-up phase.
 *
 * Teardown sends SIGTERM to the whole group and SIGKILL after the grace
 * period. What the leader leaves behind in its group (a worker that ignores
 * SIGTERM) gets the same grace after the leader's exit and is then killed,
 * so that nothing of the server is left when the deployment reports. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "deploy-internal.h"
#include "macro.h"
#include "time-util.h"

struct exec_state {
	struct child *server;
	uint64_t exited_usec; /* when the leader exited; 0 while it runs */
	bool stragglers_killed;
};

static struct exec_state *X(struct deployment *d)
{
	return d->impl;
}

static void on_server_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct deployment *d = userdata;
	char text[96];

	X(d)->exited_usec = mono_usec();
	child_exit_to_string(how, text, sizeof(text));
	/* a wrapper (a script, /usr/bin/env) that found no program to run */
	if (how->code == CLD_EXITED && (how->status == 126 || how->status == 127))
		deploy_cannot_run(d, text);
	else
		deploy_server_ended(d, text);
}

static int exec_start(struct deployment *d, struct error *err)
{
	char **layers[] = { d->env };
	_cleanup_(closep) int log_fd = -1;
	_cleanup_(freep) char **env = NULL;
	struct child_options o = { .argv = d->argv,
				   .output = CHILD_OUTPUT_FD,
				   .description = "deploy-server",
				   .keeper = true,
				   .hold = true,
				   .kill_grace_usec = d->stop_timeout_usec };
	struct exec_state *x = X(d);
	int r;

	log_fd = deploy_log_open(d, "starting", d->argv, d->env, err);
	if (log_fd < 0)
		return log_fd;
	env = deploy_environment(layers, ELEMENTSOF(layers));
	if (!env)
		return -ENOMEM;
	o.envp = env;
	o.out_fd = log_fd;
	r = child_spawn(d->event, &o, on_server_exit, d, &x->server);
	if (r < 0)
		return error_set(err, r, "deploy: cannot run %s: %s", d->argv[0], strerror(-r));
	/* recorded, then run: a caller that dies before never runs the server */
	d->pgid = child_get_pid(x->server);
	r = deploy_record(d, NULL, err);
	if (r < 0)
		return r; /* destroy kills the held group */
	r = child_release(x->server);
	if (r < 0)
		return error_set(err, r, "deploy: the keeper of %s is gone: %s", d->argv[0], strerror(-r));
	return 0;
}

static void exec_terminate(struct deployment *d)
{
	child_terminate(X(d)->server, d->stop_timeout_usec);
}

static bool exec_gone(struct deployment *d)
{
	struct exec_state *x = X(d);

	if (child_is_running(x->server))
		return false;
	if (child_kill(x->server, 0) == -ESRCH)
		return true;
	if (!x->stragglers_killed && mono_usec() >= x->exited_usec + d->stop_timeout_usec) {
		(void)child_kill(x->server, SIGKILL);
		x->stragglers_killed = true;
	}
	return false;
}

/* The leader's grace, then the stragglers'. */
static uint64_t exec_teardown_usec(const struct deployment *d)
{
	return 2 * d->stop_timeout_usec;
}

/* Hard end: the group dies now; reaping the leader takes milliseconds. */
static void exec_destroy(struct deployment *d)
{
	child_free(X(d)->server);
}

/* The method's table, kept to a few lines. */
/* clang-format off */
const struct deploy_ops deploy_exec_ops = {
	.name = "exec", .state_size = sizeof(struct exec_state), .teardown_usec = exec_teardown_usec,
	.start = exec_start, .terminate = exec_terminate, .gone = exec_gone, .destroy = exec_destroy,
	.wait_port_closed = true,
};
/* clang-format on */
