/* runner-orphans.c — what an earlier run of the study left deployed,
 * ended before the study goes on. Every server a trial still has recorded
 * (the record is cleared only once a server is gone) is ended: its process
 * group by its leader's identity (deploy_end_orphan: never a stranger that
 * got the pid since), its systemd unit by name. The command method's
 * deploy command may have started what lives outside its group (a
 * container, a pod): for each such trial the operator's teardown command
 * runs again, with the trial's hook environment, and planning waits for it
 * (for the Slurm method, runner-cluster.c cancels the study's jobs). The
 * servers of a trial of several (a disaggregated configuration's roles) are
 * recorded by role and ended alike. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "deploy.h"
#include "log.h"
#include "runner-internal.h"

struct orphan_hook {
	struct runner *runner;
	struct child *child;
	int64_t trial_id;
	unsigned seq;
};

static void hooks_done(struct runner *r)
{
	r->plan_waits_orphans = false;
	if (!runner_failing(r) && r->status.phase != RUNNER_FINISHED && r->started)
		runner_schedule(r, RUNNER_ACTION_PLAN);
}

static void on_teardown(struct child *c, const struct child_exit *how, void *userdata)
{
	struct orphan_hook *h = userdata;
	struct runner *r = h->runner;
	struct error err = { 0 };
	char text[96];
	int k;

	if (child_exit_ok(how)) {
		log_info("study %s: trial %u: the teardown command ended what an earlier run left", r->row.name,
			 h->seq);
		/* done: nothing of it is left to end (a failed one runs again next time) */
		k = store_trial_set_server(r->store, h->trial_id, NULL, NULL, &err);
		if (k < 0)
			runner_fail_errno(r, k, error_str(&err, k));
	} else
		log_warning("study %s: trial %u: the teardown command of what an earlier run left %s%s", r->row.name,
			    h->seq, how->timed_out ? "timed out: " : "", child_exit_to_string(how, text, sizeof(text)));
	h->child = child_free(h->child);
	if (--r->n_orphan_hooks_running == 0)
		hooks_done(r);
}

/* The teardown command for trial t, its environment the trial's hooks'. */
static int start_teardown(struct runner *r, const struct store_trial *t, struct error *err)
{
	const struct study *s = r->study;
	_cleanup_(cJSON_Deletep) cJSON *knobs = NULL;
	struct orphan_hook *h, **grown;
	char **env = NULL;
	int k;

	knobs = t->knobs_json ? cJSON_Parse(t->knobs_json) : NULL;
	k = deploy_hook_env(knobs, r->row.name, t->id, s->model.name, s->deploy.host ? s->deploy.host : "127.0.0.1", 0,
			    &env);
	if (k < 0)
		return error_set(err, k, "out of memory");
	grown = realloc(r->orphan_hooks, (r->n_orphan_hooks + 1) * sizeof(*grown));
	h = calloc(1, sizeof(*h));
	if (grown)
		r->orphan_hooks = grown;
	if (!grown || !h) {
		free(h);
		deploy_strv_free(env);
		return error_set(err, -ENOMEM, "out of memory");
	}
	*h = (struct orphan_hook){ .runner = r, .trial_id = t->id, .seq = t->seq };
	r->orphan_hooks[r->n_orphan_hooks++] = h;
	k = deploy_teardown_orphan(r->event, (char *const *)s->deploy.teardown_command, env, t->log_path,
				   s->deploy.command_timeout_usec, on_teardown, h, &h->child, err);
	deploy_strv_free(env);
	if (k < 0)
		return k;
	r->n_orphan_hooks_running++;
	return 0;
}

/* The servers of trials of several (a disaggregated configuration's
 * workers and router), each recorded by role: ended the same way. */
static int end_role_orphans(struct runner *r, struct error *err)
{
	struct store_role_server *a = NULL;
	size_t n = 0;
	int k;

	k = store_study_role_servers(r->store, r->study_id, &a, &n, err);
	if (k < 0)
		return k;
	for (size_t i = 0; i < n; i++) {
		if (a[i].unit && deploy_stop_orphan_unit(a[i].unit, r->study->deploy.user_bus) > 0)
			log_info("stopped the orphaned unit %s (%s)", a[i].unit, a[i].role);
		if (a[i].pgid > 0 && deploy_end_orphan(a[i].pgid, a[i].identity) > 0)
			log_info("killed the orphaned %s of trial id %lld (process group %lld)", a[i].role,
				 (long long)a[i].trial_id, (long long)a[i].pgid);
	}
	for (size_t i = 0; i < n && k >= 0; i++)
		if (i == 0 || a[i].trial_id != a[i - 1].trial_id)
			k = store_trial_set_server(r->store, a[i].trial_id, NULL, NULL, err);
	store_role_server_array_free(a, n);
	return k < 0 ? k : 0;
}

int runner_end_orphans(struct runner *r, struct error *err)
{
	bool command = r->study->deploy.method == STUDY_DEPLOY_COMMAND && !r->opts.dry_run;
	struct store_trial *t = NULL;
	size_t n = 0;
	int k;

	k = store_trial_history(r->store, r->study_id, &t, &n, err);
	if (k < 0)
		return k;
	for (size_t i = 0; i < n && k >= 0; i++) {
		if (t[i].server_pgid <= 0 && !t[i].server_unit)
			continue;
		/* a unit first (this blocks for up to a few seconds: start-up only) */
		if (t[i].server_unit && deploy_stop_orphan_unit(t[i].server_unit, r->study->deploy.user_bus) > 0)
			log_info("stopped the orphaned unit %s of trial %u", t[i].server_unit, t[i].seq);
		if (t[i].server_pgid > 0 && deploy_end_orphan(t[i].server_pgid, t[i].server_identity) > 0)
			log_info("killed the orphaned server of trial %u (process group %lld)", t[i].seq,
				 (long long)t[i].server_pgid);
		if (command && r->study->deploy.teardown_command) {
			k = start_teardown(r, &t[i], err);
			if (k < 0)
				break;
		}
		/* the teardown command is recorded in the trial's log; a goodput
		 * killed meanwhile runs it again */
		if (!command)
			k = store_trial_set_server(r->store, t[i].id, NULL, NULL, err);
	}
	store_trial_array_free(t, n);
	if (k >= 0)
		k = end_role_orphans(r, err);
	if (k < 0)
		return k;
	if (r->n_orphan_hooks_running > 0) {
		log_info("study %s: running the teardown command for %u deployment%s an earlier run left", r->row.name,
			 r->n_orphan_hooks_running, r->n_orphan_hooks_running == 1 ? "" : "s");
		r->plan_waits_orphans = true;
	}
	return 0;
}

void runner_orphans_free(struct runner *r)
{
	for (size_t i = 0; i < r->n_orphan_hooks; i++) {
		child_free(r->orphan_hooks[i]->child);
		free(r->orphan_hooks[i]);
	}
	free(r->orphan_hooks);
	r->orphan_hooks = NULL;
	r->n_orphan_hooks = r->n_orphan_hooks_running = 0;
}
