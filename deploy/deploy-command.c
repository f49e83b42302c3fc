/* deploy-command.c — the `command` deployer: the operator's own deploy,
 * teardown and health commands (docker, kubectl, a Slurm script).
 *
 * Each hook is an argv from the study spec, spawned without a shell in a
 * process group of its own (child.h), with stdin from /dev/null and stdout
 * and stderr appended to the trial's log. Knob values reach it only as
 * environment variables (GOODPUT_KNOB_MAX_NUM_SEQS=64, GOODPUT_PORT,
 * GOODPUT_TRIAL_ID, ...: deploy_hook_env) plus the engine's own
 * environment, and the deploy command gets the rendered engine argv
 * appended as arguments ("$@" in a script), so no value is ever pasted into
 * a shell string.
 *
 * The deploy command reports where the server is reachable by printing a
 * line "GOODPUT_BASE_URL=http://HOST:PORT"; the log is scanned for it, which
 * also works for a script that starts the server in the background and
 * exits (the background process keeps writing to the log, not to a pipe
 * that would break). Readiness is the health command's exit status 0 when
 * there is one, else the shared health GET.
 *
 * Failure: the deploy command exiting non-zero, exiting without a URL, or
 * the start-up timeout. In every case the teardown command runs afterwards
 * (a deploy command still running is terminated first), so a half-made
 * deployment is removed; FAILED (or STOPPED after deploy_stop) is reported
 * once both have ended. Only the groups of the hooks goodput spawned are
 * ever signalled; a deploy script's background server is the teardown
 * command's to stop. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child.h"
#include "deploy-internal.h"
#include "macro.h"
#include "time-util.h"

#define URL_PREFIX           "GOODPUT_BASE_URL="
#define HOOK_KILL_GRACE_USEC (2 * USEC_PER_SEC)

enum hook_kind {
	HOOK_DEPLOY,
	HOOK_HEALTH,
	HOOK_TEARDOWN,
	_HOOK_MAX
};

static const char *const hook_names[_HOOK_MAX] = { "deploy command", "health command", "teardown command" };

struct command_state {
	struct child *hooks[_HOOK_MAX];
	bool deploy_exited;
};

static struct command_state *C(struct deployment *d)
{
	return d->impl;
}

static bool hook_running(struct deployment *d, enum hook_kind kind)
{
	return C(d)->hooks[kind] && child_is_running(C(d)->hooks[kind]);
}

static void on_deploy_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct deployment *d = userdata;
	char text[128], status[96];

	C(d)->deploy_exited = true;
	/* Exiting with 0, the script leaves the server running in the background
	 * or handed over; after READY a deploy command's end is for the probe to notice. */
	if (child_exit_ok(how) || d->state != DEPLOY_STARTING)
		return;
	snprintf(text, sizeof(text), "the deploy command %s", child_exit_to_string(how, status, sizeof(status)));
	/* the shell's "command not found" / "not executable": a program the hook runs is missing */
	if (how->code == CLD_EXITED && (how->status == 126 || how->status == 127))
		deploy_cannot_run(d, text);
	else
		deploy_server_ended(d, text);
}

static void on_health_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	deploy_health_done(userdata, child_exit_ok(how));
}

static void on_teardown_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	char status[96];

	if (how->timed_out)
		deploy_append_message(userdata, "the teardown command timed out");
	else if (!child_exit_ok(how))
		deploy_append_message(userdata, "the teardown command failed (%s)",
				      child_exit_to_string(how, status, sizeof(status)));
}

static const child_exit_fn hook_exit[_HOOK_MAX] = { on_deploy_exit, on_health_exit, on_teardown_exit };

/* Spawns a hook: argv (+ extra args), stdout/stderr appended to the log. */
static int hook_spawn(struct deployment *d, enum hook_kind kind, char **argv, char **extra, uint64_t timeout_usec,
		      struct error *err)
{
	char **layers[] = { d->env, d->hook_env };
	struct command_state *x = C(d);
	_cleanup_(closep) int log_fd = -1;
	_cleanup_(freep) char **env = NULL, **full = NULL;
	/* under a keeper: a hook (and what it starts in its group) ends with
	 * goodput; the deploy command runs only once its group is recorded */
	struct child_options o = { .output = CHILD_OUTPUT_FD,
				   .timeout_usec = timeout_usec,
				   .kill_grace_usec = kind == HOOK_DEPLOY ? d->stop_timeout_usec : HOOK_KILL_GRACE_USEC,
				   .description = "deploy-hook",
				   .keeper = true,
				   .hold = kind == HOOK_DEPLOY };
	size_t n = 0, m = 0;
	int r;

	while (argv[n])
		n++;
	while (extra && extra[m])
		m++;
	full = calloc(n + m + 1, sizeof(char *));
	env = deploy_environment(layers, ELEMENTSOF(layers));
	if (!full || !env)
		return -ENOMEM;
	memcpy(full, argv, n * sizeof(char *));
	if (m)
		memcpy(full + n, extra, m * sizeof(char *));
	/* Health checks run every poll: the log names only the hooks that change things. */
	log_fd = kind == HOOK_HEALTH ? deploy_log_open(d, NULL, NULL, NULL, err)
				     : deploy_log_open(d, hook_names[kind], full, d->hook_env, err);
	if (log_fd < 0)
		return log_fd;
	o.argv = full;
	o.envp = env;
	o.out_fd = log_fd;
	x->hooks[kind] = child_free(x->hooks[kind]);
	r = child_spawn(d->event, &o, hook_exit[kind], d, &x->hooks[kind]);
	if (r < 0)
		return error_set(err, r, "deploy: cannot run the %s %s: %s", hook_names[kind], full[0], strerror(-r));
	return 0;
}

/* The first line starting with GOODPUT_BASE_URL= sets the URL. */
static bool match_url(struct deployment *d, char *line)
{
	return strncmp(line, URL_PREFIX, strlen(URL_PREFIX)) == 0 &&
	       deploy_set_base_url(d, line + strlen(URL_PREFIX)) >= 0;
}

static bool command_find_address(struct deployment *d)
{
	_cleanup_(freep) char *t = NULL;
	bool exited = C(d)->deploy_exited;

	/* Read "exited" first: a deploy command's output is in the log before its exit is seen. */
	if (deploy_log_scan(d, match_url))
		return true;
	if (exited) {
		t = deploy_tail(d);
		deploy_abort(d, DEPLOY_FAILURE_CRASHED,
			     "the deploy command exited without printing a " URL_PREFIX "... line; last log lines:\n%s",
			     t ? t : "");
	}
	return false;
}

/* The health command, when there is one, replaces the GET of the health path. */
static int command_check_health(struct deployment *d, struct error *err)
{
	if (!d->health_command)
		return deploy_health_get(d, err);
	return hook_spawn(d, HOOK_HEALTH, d->health_command, NULL, d->command_timeout_usec, err);
}

static int command_start(struct deployment *d, struct error *err)
{
	int r;

	/* No timeout of its own: a deploy command that hangs is ended by the
	 * start-up timeout's teardown, and one that is the server itself (runs in
	 * the foreground) lives as long as the deployment. */
	r = hook_spawn(d, HOOK_DEPLOY, d->deploy_command, d->argv, 0, err);
	if (r < 0)
		return r;
	/* recorded, then run (what the deploy command starts outside its own
	 * group, a container, is the teardown command's to end) */
	d->pgid = child_get_pid(C(d)->hooks[HOOK_DEPLOY]);
	r = deploy_record(d, NULL, err);
	if (r < 0)
		return r; /* destroy kills the held group */
	r = child_release(C(d)->hooks[HOOK_DEPLOY]);
	if (r < 0)
		return error_set(err, r, "deploy: the keeper of the deploy command is gone: %s", strerror(-r));
	return 0;
}

static void command_terminate(struct deployment *d)
{
	struct command_state *x = C(d);
	struct error err = { 0 };

	if (hook_running(d, HOOK_HEALTH))
		(void)child_kill(x->hooks[HOOK_HEALTH], SIGKILL);
	/* A deploy command still running (a foreground server, a hung script) goes first. */
	if (hook_running(d, HOOK_DEPLOY))
		child_terminate(x->hooks[HOOK_DEPLOY], d->stop_timeout_usec);
	if (hook_spawn(d, HOOK_TEARDOWN, d->teardown_command, NULL, d->command_timeout_usec, &err) < 0)
		deploy_append_message(d, "%s", err.msg);
}

static bool command_gone(struct deployment *d)
{
	for (int k = 0; k < _HOOK_MAX; k++)
		if (hook_running(d, (enum hook_kind)k))
			return false;
	return true;
}

static uint64_t command_teardown_usec(const struct deployment *d)
{
	return MAX(d->stop_timeout_usec, d->command_timeout_usec + HOOK_KILL_GRACE_USEC) + USEC_PER_SEC;
}

static void command_destroy(struct deployment *d)
{
	for (int k = 0; k < _HOOK_MAX; k++)
		child_free(C(d)->hooks[k]);
}

/* The method's table, kept to a few lines. */
/* clang-format off */
const struct deploy_ops deploy_command_ops = {
	.name = "command", .state_size = sizeof(struct command_state), .teardown_usec = command_teardown_usec,
	.start = command_start, .terminate = command_terminate, .gone = command_gone,
	.destroy = command_destroy, .find_address = command_find_address, .check_health = command_check_health,
	.no_address_text = "the deploy command reported no " URL_PREFIX " line",
};
/* clang-format on */

/* ---- an earlier run's deployment ---- */

int deploy_teardown_orphan(sd_event *e, char *const *argv, char *const *hook_env, const char *log_path,
			   uint64_t timeout_usec, child_exit_fn cb, void *userdata, struct child **ret,
			   struct error *err)
{
	char **layers[] = { (char **)hook_env };
	struct child_options o = { .argv = argv,
				   .output = CHILD_OUTPUT_FD,
				   .timeout_usec = timeout_usec ? timeout_usec : 120 * USEC_PER_SEC,
				   .kill_grace_usec = HOOK_KILL_GRACE_USEC,
				   .description = "deploy-orphan-teardown",
				   .keeper = true };
	static const char header[] = "\n==> goodput: teardown command of a deployment an earlier run left "
				     "(goodput ended before its teardown)\n";
	_cleanup_(freep) char **env = NULL;
	_cleanup_(closep) int fd = -1;
	int r;

	if (!argv || !argv[0])
		return error_set(err, -EINVAL, "deploy: no teardown command");
	fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0)
		return error_set(err, -errno, "deploy: %s: %s", log_path, strerror(errno));
	(void)!write(fd, header, sizeof(header) - 1);
	env = deploy_environment(layers, ELEMENTSOF(layers));
	if (!env)
		return -ENOMEM;
	o.envp = env;
	o.out_fd = fd;
	r = child_spawn(e, &o, cb, userdata, ret);
	if (r < 0)
		return error_set(err, r, "deploy: cannot run the teardown command %s: %s", argv[0], strerror(-r));
	return 0;
}
