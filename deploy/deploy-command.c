/* deploy-command.c — the `command` deployer: the operator's own deploy,
 * teardown and health commands (docker, kubectl, a Slurm script).
 *
 * Each hook is an argv from the study spec, spawned without a shell in a
 * process group of its own, with stdin from /dev/null and stdout and stderr
 * appended to the trial's log. Knob values reach it only as environment
 * variables (GOODPUT_KNOB_MAX_NUM_SEQS=64, GOODPUT_PORT, GOODPUT_TRIAL_ID,
 * ...: deploy_hook_env) plus the engine's own environment, and the deploy
 * command gets the rendered engine argv appended as arguments ("$@" in a
 * script), so no value is ever pasted into a shell string.
 *
 * The deploy command reports where the server is reachable by printing a
 * line "GOODPUT_BASE_URL=http://HOST:PORT"; the log is scanned for it, which
 * also works for a script that starts the server in the background and
 * exits (the background process keeps writing to the log, not to a pipe
 * that would break). Then readiness is polled: the health command's exit
 * status 0, or GET base URL + health path answering 200 (libcurl on the
 * loop, so host names resolve without blocking).
 *
 * Failure: the deploy command exiting non-zero, exiting without a URL, or
 * the start-up timeout (the deploy command's group is killed). In every
 * case the teardown command runs afterwards, so a half-made deployment is
 * removed; FAILED (or STOPPED after deploy_stop) is reported once it has
 * finished or its timeout ran out. Only the groups of the hooks goodput
 * spawned are ever signalled. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "deploy-internal.h"
#include "macro.h"
#include "spawn-util.h"
#include "time-util.h"

extern char **environ;

#define URL_PREFIX           "GOODPUT_BASE_URL="
#define TAIL_LINES           20
#define HOOK_KILL_GRACE_USEC (2 * USEC_PER_SEC)

enum hook_kind {
	HOOK_DEPLOY,
	HOOK_HEALTH,
	HOOK_TEARDOWN,
	_HOOK_MAX
};

static const char *const hook_names[_HOOK_MAX] = { "deploy command", "health command", "teardown command" };

struct hook {
	pid_t pid; /* 0: not running */
	sd_event_source *child_source, *timeout_source;
	bool timed_out;
};

struct command_state {
	uint64_t log_offset, scan_offset;
	struct hook hooks[_HOOK_MAX];
	bool url_known, deploy_exited, teardown_started;
	sd_event_source *poll_source, *startup_timeout_source;
	struct probe_client *client;
	bool health_in_flight;
	enum deploy_state final_state; /* after teardown: STOPPED or FAILED */
};

static struct command_state *C(struct deployment *d)
{
	return d->impl;
}

static char *tail(struct deployment *d)
{
	char *t = NULL;

	if (deploy_log_tail(d->log_path, C(d)->log_offset, TAIL_LINES, &t) < 0)
		return NULL;
	return t;
}

/* environ, then the engine's environment, then the hook environment (later wins). */
static char **build_env(struct deployment *d)
{
	char **layers[] = { d->env, d->hook_env };
	size_t n = 0, k = 0;
	char **env;

	while (environ && environ[n])
		n++;
	for (size_t l = 0; l < ELEMENTSOF(layers); l++)
		for (size_t i = 0; layers[l] && layers[l][i]; i++)
			n++;
	env = calloc(n + 2, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; environ && environ[i]; i++)
		env[k++] = environ[i];
	for (size_t l = 0; l < ELEMENTSOF(layers); l++)
		for (size_t i = 0; layers[l] && layers[l][i]; i++) {
			const char *eq = strchr(layers[l][i], '=');
			size_t len = eq ? (size_t)(eq - layers[l][i]) + 1 : strlen(layers[l][i]);
			size_t j = 0;

			for (; j < k; j++)
				if (strncmp(env[j], layers[l][i], len) == 0)
					break;
			env[j] = layers[l][i];
			if (j == k)
				k++;
		}
	env[k] = NULL;
	return env;
}

static void hook_reset(struct hook *h)
{
	h->child_source = sd_event_source_disable_unref(h->child_source);
	h->timeout_source = sd_event_source_disable_unref(h->timeout_source);
	h->pid = 0;
}

static void hook_kill(struct hook *h, int sig)
{
	if (h->pid > 0)
		(void)kill(-h->pid, sig);
}

static void on_hook_exit(struct deployment *d, enum hook_kind kind, int status);

static int on_hook_child(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct deployment *d = userdata;
	struct command_state *x = C(d);
	enum hook_kind kind = _HOOK_MAX;
	int status;

	for (int k = 0; k < _HOOK_MAX; k++)
		if (x->hooks[k].child_source == s)
			kind = (enum hook_kind)k;
	if (kind == _HOOK_MAX)
		return 0;
	status = si->si_code == CLD_EXITED ? si->si_status : 128 + si->si_status;
	if (x->hooks[kind].timed_out)
		status = -ETIMEDOUT;
	/* Stragglers of the hook's group (a deploy script's background server
	 * stays: the teardown command owns it). */
	hook_reset(&x->hooks[kind]);
	on_hook_exit(d, kind, status);
	return 0;
}

static int on_hook_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct command_state *x = C(d);

	for (int k = 0; k < _HOOK_MAX; k++) {
		struct hook *h = &x->hooks[k];

		if (h->timeout_source != s)
			continue;
		if (!h->timed_out) {
			/* TERM first, KILL after a short grace: re-arm this timer. */
			h->timed_out = true;
			hook_kill(h, SIGTERM);
			(void)sd_event_source_set_time(s, mono_usec() + HOOK_KILL_GRACE_USEC);
			(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
		} else
			hook_kill(h, SIGKILL);
	}
	return 0;
}

/* Spawns a hook: argv (+ extra args), stdout/stderr appended to the log. */
static int hook_spawn(struct deployment *d, enum hook_kind kind, char **argv, char **extra, uint64_t timeout_usec,
		      struct error *err)
{
	struct command_state *x = C(d);
	struct hook *h = &x->hooks[kind];
	_cleanup_(closep) int log_fd = -1;
	_cleanup_(freep) char **env = NULL, **full = NULL;
	size_t n = 0, m = 0;
	int r;

	while (argv[n])
		n++;
	while (extra && extra[m])
		m++;
	full = calloc(n + m + 1, sizeof(char *));
	env = build_env(d);
	if (!full || !env)
		return -ENOMEM;
	memcpy(full, argv, n * sizeof(char *));
	if (m)
		memcpy(full + n, extra, m * sizeof(char *));
	log_fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
	if (log_fd < 0)
		return error_set(err, -errno, "deploy: cannot open the log %s: %s", d->log_path, strerror(errno));
	if (kind != HOOK_HEALTH) {
		struct engine_command shown = { .argv = full, .env = d->hook_env };
		_cleanup_(freep) char *line = engine_command_format(&shown);
		if (line)
			(void)dprintf(log_fd, "==> goodput: %s: %s\n", hook_names[kind], line);
	}
	r = spawn_block_sigchld();
	if (r < 0)
		return error_set(err, r, "deploy: cannot block SIGCHLD: %s", strerror(-r));
	r = spawn_process(full, env, log_fd, &h->pid);
	if (r < 0) {
		h->pid = 0;
		return error_set(err, r, "deploy: cannot run the %s %s: %s", hook_names[kind], full[0], strerror(-r));
	}
	h->timed_out = false;
	r = sd_event_add_child(d->event, &h->child_source, h->pid, WEXITED, on_hook_child, d);
	if (r >= 0)
		r = sd_event_add_time_relative(d->event, &h->timeout_source, CLOCK_MONOTONIC, timeout_usec, 1000,
					       on_hook_timeout, d);
	if (r < 0) {
		hook_kill(h, SIGKILL);
		(void)waitpid(h->pid, NULL, 0);
		hook_reset(h);
		return error_set(err, r, "deploy: cannot watch the %s: %s", hook_names[kind], strerror(-r));
	}
	(void)sd_event_source_set_description(h->child_source, "deploy-hook-child");
	(void)sd_event_source_set_description(h->timeout_source, "deploy-hook-timeout");
	return 0;
}

/* ---- teardown ---- */

static void stop_watching(struct deployment *d)
{
	struct command_state *x = C(d);

	x->poll_source = sd_event_source_disable_unref(x->poll_source);
	x->startup_timeout_source = sd_event_source_disable_unref(x->startup_timeout_source);
	if (x->client)
		probe_client_cancel(x->client, d);
	x->health_in_flight = false;
	if (x->hooks[HOOK_HEALTH].pid > 0) {
		hook_kill(&x->hooks[HOOK_HEALTH], SIGKILL);
		/* its exit is still reaped by the child source (ignored below) */
	}
}

/* Adds "; text" to the deployment's message. */
static void append_message(struct deployment *d, const char *text)
{
	char *m = NULL;

	if (asprintf(&m, "%s%s%s", d->message ? d->message : "", d->message ? "; " : "", text) >= 0) {
		free(d->message);
		d->message = m;
	}
}

/* Runs the teardown command (once); the final state follows its end. */
static void begin_teardown(struct deployment *d, enum deploy_state final)
{
	struct command_state *x = C(d);
	struct error err = { 0 };
	int r;

	stop_watching(d);
	d->state = DEPLOY_STOPPING;
	x->final_state = final;
	if (x->teardown_started)
		return;
	x->teardown_started = true;
	/* A deploy command still running (a foreground server, a hung script) goes first. */
	if (x->hooks[HOOK_DEPLOY].pid > 0) {
		struct hook *h = &x->hooks[HOOK_DEPLOY];

		hook_kill(h, SIGTERM);
		/* SIGKILL after the grace period (the timer's second firing). */
		h->timed_out = true;
		h->timeout_source = sd_event_source_disable_unref(h->timeout_source);
		if (sd_event_add_time_relative(d->event, &h->timeout_source, CLOCK_MONOTONIC, d->stop_timeout_usec,
					       1000, on_hook_timeout, d) < 0)
			hook_kill(h, SIGKILL);
	}
	r = hook_spawn(d, HOOK_TEARDOWN, d->teardown_command, NULL, d->command_timeout_usec, &err);
	if (r < 0) {
		append_message(d, err.msg);
		if (x->hooks[HOOK_DEPLOY].pid == 0)
			deploy_set_state(d, final);
	}
}

/* Reports the final state once the teardown and the deploy command are both done. */
static void maybe_finish(struct deployment *d)
{
	struct command_state *x = C(d);

	if (d->state != DEPLOY_STOPPING || !x->teardown_started)
		return;
	if (x->hooks[HOOK_TEARDOWN].pid > 0 || x->hooks[HOOK_DEPLOY].pid > 0)
		return;
	deploy_set_state(d, x->final_state);
}

/* ---- readiness ---- */

static void became_ready(struct deployment *d)
{
	struct command_state *x = C(d);

	stop_watching(d);
	/* A deploy command that is the server itself (runs in the foreground)
	 * now lives as long as the deployment. */
	x->hooks[HOOK_DEPLOY].timeout_source = sd_event_source_disable_unref(x->hooks[HOOK_DEPLOY].timeout_source);
	deploy_set_state(d, DEPLOY_READY);
}

static void on_health_get(struct probe_client *c, int r, long status, const char *body, size_t len, const char *error,
			  void *userdata)
{
	struct deployment *d = userdata;

	C(d)->health_in_flight = false;
	if (r >= 0 && status == 200 && d->state == DEPLOY_STARTING)
		became_ready(d);
}

static int start_client(struct deployment *d)
{
	struct command_state *x = C(d);
	struct probe_client_config cfg;
	struct error err = { 0 };

	probe_client_config_init(&cfg);
	cfg.base_url = d->base_url;
	cfg.connect_timeout_usec = 5 * USEC_PER_SEC;
	return probe_client_new(d->event, &cfg, &x->client, &err);
}

static bool deploy_scan_url(struct deployment *d);

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct command_state *x = C(d);

	if (d->state != DEPLOY_STARTING)
		return 0;
	if (!x->url_known && deploy_scan_url(d))
		x->url_known = true;
	if (x->url_known) {
		if (d->health_command) {
			struct error err = { 0 };

			if (x->hooks[HOOK_HEALTH].pid == 0 &&
			    hook_spawn(d, HOOK_HEALTH, d->health_command, NULL, d->command_timeout_usec, &err) < 0) {
				deploy_set_failure(d, DEPLOY_FAILURE_CRASHED, "%s", err.msg);
				begin_teardown(d, DEPLOY_FAILED);
				return 0;
			}
		} else if (!x->health_in_flight) {
			if (!x->client && start_client(d) < 0) {
				deploy_set_failure(d, DEPLOY_FAILURE_CRASHED,
						   "the deploy command reported \"%s\", not a usable URL", d->base_url);
				begin_teardown(d, DEPLOY_FAILED);
				return 0;
			}
			if (probe_client_get(x->client, d->health_path, 4096,
					     MIN(d->health_interval_usec * 4, 10 * USEC_PER_SEC), on_health_get,
					     d) >= 0)
				x->health_in_flight = true;
		}
	} else if (x->deploy_exited) {
		_cleanup_(freep) char *t = tail(d);
		deploy_set_failure(d, DEPLOY_FAILURE_CRASHED,
				   "the deploy command exited without printing a " URL_PREFIX
				   "... line; last log lines:\n%s",
				   t ? t : "");
		begin_teardown(d, DEPLOY_FAILED);
		return 0;
	}
	(void)sd_event_source_set_time(
		s, mono_usec() + MIN(d->health_interval_usec, x->url_known ? UINT64_MAX : 100 * USEC_PER_MSEC));
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

/* The first line starting with GOODPUT_BASE_URL= sets the URL. */
static bool deploy_scan_url(struct deployment *d)
{
	struct command_state *x = C(d);
	_cleanup_(closep) int fd = -1;
	char buf[16384];
	ssize_t n;

	fd = open(d->log_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return false;
	n = pread(fd, buf, sizeof(buf) - 1, (off_t)x->scan_offset);
	if (n <= 0)
		return false;
	buf[n] = 0;
	for (char *line = buf, *nl; (nl = memchr(line, '\n', (size_t)(buf + n - line))); line = nl + 1) {
		*nl = 0;
		x->scan_offset += (uint64_t)(nl + 1 - line);
		if (strncmp(line, URL_PREFIX, strlen(URL_PREFIX)) == 0 &&
		    deploy_set_base_url(d, line + strlen(URL_PREFIX)) >= 0)
			return true;
	}
	return false;
}

static int on_startup_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct deployment *d = userdata;
	struct command_state *x = C(d);
	_cleanup_(freep) char *t = NULL;

	if (d->state != DEPLOY_STARTING)
		return 0;
	t = tail(d);
	deploy_set_failure(d, DEPLOY_FAILURE_STARTUP_TIMEOUT, "%s within %.0f s; last log lines:\n%s",
			   !x->url_known       ? "the deploy command reported no " URL_PREFIX " line"
			   : d->health_command ? "the health command never succeeded"
					       : "the server's health path never answered 200",
			   usec_to_sec(d->startup_timeout_usec), t ? t : "");
	/* A deploy command that hangs is killed; the teardown cleans up after it. */
	hook_kill(&x->hooks[HOOK_DEPLOY], SIGKILL);
	begin_teardown(d, DEPLOY_FAILED);
	return 0;
}

static void on_hook_exit(struct deployment *d, enum hook_kind kind, int status)
{
	struct command_state *x = C(d);
	char msg[96];

	switch (kind) {
	case HOOK_DEPLOY:
		x->deploy_exited = true;
		if (d->state == DEPLOY_STARTING && status != 0) {
			_cleanup_(freep) char *t = tail(d);
			bool oom = deploy_log_matches_oom(d, x->log_offset);

			deploy_set_failure(d, oom ? DEPLOY_FAILURE_OOM : DEPLOY_FAILURE_CRASHED,
					   "the deploy command %s %d%s; last log lines:\n%s",
					   status > 128 ? "was killed by signal" : "exited with status",
					   status > 128 ? status - 128 : status, oom ? " (out of memory)" : "",
					   t ? t : "");
			begin_teardown(d, DEPLOY_FAILED);
		}
		break;
	case HOOK_HEALTH:
		if (d->state == DEPLOY_STARTING && status == 0)
			became_ready(d);
		break;
	case HOOK_TEARDOWN:
		if (status == -ETIMEDOUT)
			append_message(d, "the teardown command timed out");
		else if (status != 0) {
			snprintf(msg, sizeof(msg), "the teardown command failed (status %d)", status);
			append_message(d, msg);
		}
		break;
	default:
		break;
	}
	maybe_finish(d);
}

/* ---- ops ---- */

static int command_start(struct deployment *d, struct error *err)
{
	struct command_state *x;
	struct stat st;
	int r;

	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	d->impl = x;
	/* The scan starts where this trial's output starts. */
	if (stat(d->log_path, &st) == 0)
		x->log_offset = x->scan_offset = (uint64_t)st.st_size;
	r = hook_spawn(d, HOOK_DEPLOY, d->deploy_command, d->argv, d->startup_timeout_usec + USEC_PER_SEC, err);
	if (r < 0)
		return r;
	d->pgid = x->hooks[HOOK_DEPLOY].pid;
	r = sd_event_add_time_relative(d->event, &x->startup_timeout_source, CLOCK_MONOTONIC, d->startup_timeout_usec,
				       1000, on_startup_timeout, d);
	if (r >= 0) {
		(void)sd_event_source_set_description(x->startup_timeout_source, "deploy-startup-timeout");
		r = sd_event_add_time_relative(d->event, &x->poll_source, CLOCK_MONOTONIC, 50 * USEC_PER_MSEC, 1000,
					       on_poll, d);
	}
	if (r < 0)
		return error_set(err, r, "deploy: cannot arm timers: %s", strerror(-r));
	(void)sd_event_source_set_description(x->poll_source, "deploy-poll");
	return 0;
}

static int command_stop(struct deployment *d)
{
	begin_teardown(d, DEPLOY_STOPPED);
	maybe_finish(d);
	return 0;
}

static void command_destroy(struct deployment *d)
{
	struct command_state *x = C(d);

	if (!x)
		return;
	x->poll_source = sd_event_source_disable_unref(x->poll_source);
	x->startup_timeout_source = sd_event_source_disable_unref(x->startup_timeout_source);
	x->client = probe_client_free(x->client);
	for (int k = 0; k < _HOOK_MAX; k++) {
		struct hook *h = &x->hooks[k];
		pid_t pid = h->pid;

		hook_reset(h);
		if (pid > 0) {
			(void)kill(-pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
	}
	free(x);
	d->impl = NULL;
}

const struct deploy_ops deploy_command_ops = {
	.name = "command",
	.start = command_start,
	.stop = command_stop,
	.destroy = command_destroy,
};
