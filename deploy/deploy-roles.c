/* deploy-roles.c — a deployment of several servers as one unit: a
 * disaggregated configuration's prefill and decode workers and the
 * engine's router in front of them.
 *
 * The unit is a deployment like any other (deploy.h: the same states, the
 * same callback, the same getters), whose "method" starts its roles as
 * deployments of their own with the study's method (exec, systemd, slurm):
 * each role keeps everything a single server has — its command, its log,
 * its port, its health check, its record before it runs, its teardown —
 * and this file only composes them:
 *   - the workers start side by side; once every one is READY the router's
 *     config is asked for (deploy_router_fn: the router's command names
 *     where the workers serve) and the router starts;
 *   - the unit's start-up phase (deploy-startup.c: its timeout, its poll)
 *     finds the unit's address once the router is READY, and the unit is
 *     READY then;
 *   - a role that fails, or ends by itself, fails the unit with its failure
 *     class and cause, its message prefixed with the role's name; the unit
 *     is then torn down: every role is stopped, and the unit reports once
 *     every role has;
 *   - a job method's unit is PENDING until every worker's job runs, and
 *     tells the first worker's job id, and each role's node and GPUs.
 * Freeing the unit frees (kills) every role. */
#include "deploy-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "time-util.h"

struct role {
	char *name;
	bool prefill, router;
	struct deployment *d;
	struct deployment *unit;
};

struct roles_state {
	enum study_deploy_method method;
	struct role *roles; /* the workers, then the router */
	size_t n_workers, n;
	deploy_router_fn router_fn;
	void *router_userdata;
	char *router_name;
	bool router_started;
};

static struct roles_state *R(struct deployment *d)
{
	return d->impl;
}

static bool ended(const struct role *r)
{
	enum deploy_state s;

	if (!r->d)
		return true;
	s = deploy_get_state(r->d);
	return s == DEPLOY_STOPPED || s == DEPLOY_FAILED;
}

/* What the unit tells of its jobs: the first worker's id, each role's node and GPUs. */
static void sync_jobs(struct deployment *unit)
{
	struct roles_state *x = R(unit);
	size_t len = 0;

	unit->gpus[0] = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct deployment *d = x->roles[i].d;

		if (!d)
			continue;
		if (!unit->job_id && d->job_id)
			unit->job_id = d->job_id;
		if (!unit->node[0] && d->node[0])
			snprintf(unit->node, sizeof(unit->node), "%s", d->node);
		if (d->gpus[0] && len < sizeof(unit->gpus))
			len += (size_t)snprintf(unit->gpus + len, sizeof(unit->gpus) - len, "%s%s", len ? "," : "",
						d->gpus);
		if (!unit->pending_reason[0] && d->pending_reason[0] && d->state == DEPLOY_PENDING)
			snprintf(unit->pending_reason, sizeof(unit->pending_reason), "%s", d->pending_reason);
	}
}

static void on_role(struct deployment *d, enum deploy_state state, void *userdata);

static int start_router(struct deployment *unit, struct error *err)
{
	struct roles_state *x = R(unit);
	struct deploy_worker_address addrs[x->n_workers ? x->n_workers : 1];
	struct role *router = &x->roles[x->n_workers];
	struct deploy_config cfg;
	int r;

	for (size_t i = 0; i < x->n_workers; i++) {
		const struct deployment *w = x->roles[i].d;
		struct deploy_worker_address *a = &addrs[i];
		const char *url = deploy_get_base_url(w), *h = url ? strstr(url, "://") : NULL, *colon;

		*a = (struct deploy_worker_address){ .role = x->roles[i].name,
						     .prefill = x->roles[i].prefill,
						     .port = w->port,
						     .aux_port = w->aux_port,
						     .base_url = url };
		h = h ? h + 3 : w->host;
		colon = strrchr(h, ':');
		snprintf(a->host, sizeof(a->host), "%.*s", colon ? (int)(colon - h) : (int)strlen(h), h);
	}
	r = x->router_fn(x->router_userdata, addrs, x->n_workers, &cfg, err);
	if (r < 0)
		return r;
	x->router_started = true;
	return deploy_start(unit->event, x->method, &cfg, on_role, router, &router->d, err);
}

static void on_role(struct deployment *d, enum deploy_state state, void *userdata)
{
	struct role *role = userdata;
	struct deployment *unit = role->unit;
	struct roles_state *x = R(unit);
	bool workers_ready = true, workers_running = true;
	struct error err = { 0 };
	int r;

	sync_jobs(unit);
	if (unit->state != DEPLOY_PENDING && unit->state != DEPLOY_STARTING && unit->state != DEPLOY_READY)
		return; /* torn down: the reap waits for every role */
	if (state == DEPLOY_FAILED || state == DEPLOY_STOPPED) {
		/* the first role to fail names the unit's failure */
		if (state == DEPLOY_FAILED) {
			unit->cause = d->cause;
			unit->suggested_len = d->suggested_len;
		}
		deploy_abort(unit, state == DEPLOY_FAILED ? d->failure : DEPLOY_FAILURE_CRASHED, "%s: %s", role->name,
			     state == DEPLOY_FAILED ? deploy_get_message(d) : "stopped by itself");
		return;
	}
	for (size_t i = 0; i < x->n_workers; i++) {
		workers_ready = workers_ready && x->roles[i].d->state == DEPLOY_READY;
		workers_running = workers_running && x->roles[i].d->job_ran;
	}
	if (unit->state == DEPLOY_PENDING) {
		if (workers_running)
			(void)deploy_job_running(unit);
		else
			deploy_set_state(unit, DEPLOY_PENDING); /* the runner reads the jobs' facts again */
		return;
	}
	if (workers_ready && !x->router_started) {
		r = start_router(unit, &err);
		if (r < 0)
			deploy_abort(unit, DEPLOY_FAILURE_SETUP, "%s: %s", x->router_name, error_str(&err, r));
	}
}

/* The unit serves where its router does, once the router is ready. */
static bool roles_find_address(struct deployment *unit)
{
	struct roles_state *x = R(unit);
	const struct deployment *router = x->router_started ? x->roles[x->n_workers].d : NULL;

	if (!router || router->state != DEPLOY_READY)
		return false;
	if (deploy_set_base_url(unit, deploy_get_base_url(router)) < 0) {
		deploy_abort(unit, DEPLOY_FAILURE_CRASHED, "%s: its address %s is not a URL", x->router_name,
			     deploy_get_base_url(router));
		return false;
	}
	return true;
}

/* The router checked its own health: ready is ready. */
static int roles_check_health(struct deployment *unit, struct error *err)
{
	deploy_health_done(unit, true);
	return 0;
}

static int roles_start(struct deployment *unit, struct error *err)
{
	return 0; /* deploy_start_roles starts the workers */
}

static void roles_terminate(struct deployment *unit)
{
	struct roles_state *x = R(unit);

	for (size_t i = 0; i < x->n; i++)
		if (x->roles[i].d)
			(void)deploy_stop(x->roles[i].d);
}

static bool roles_gone(struct deployment *unit)
{
	struct roles_state *x = R(unit);

	for (size_t i = 0; i < x->n; i++)
		if (!ended(&x->roles[i]))
			return false;
	return true;
}

/* Each role tears itself down within its own time: the longest, and a margin. */
static uint64_t roles_teardown_usec(const struct deployment *unit)
{
	const struct roles_state *x = unit->impl;
	uint64_t t = 0;

	for (size_t i = 0; i < x->n; i++)
		if (x->roles[i].d) {
			const struct deployment *d = x->roles[i].d;

			t = MAX(t, d->ops->teardown_usec ? d->ops->teardown_usec(d) : d->stop_timeout_usec);
		}
	return t + 5 * USEC_PER_SEC;
}

static void roles_destroy(struct deployment *unit)
{
	struct roles_state *x = R(unit);

	for (size_t i = 0; x->roles && i < x->n; i++) {
		x->roles[i].d = deploy_free(x->roles[i].d);
		free(x->roles[i].name);
	}
	free(x->roles);
	free(x->router_name);
}

static void roles_check_soon(struct deployment *unit)
{
	struct roles_state *x = R(unit);

	for (size_t i = 0; i < x->n; i++)
		if (x->roles[i].d)
			deploy_check_soon(x->roles[i].d);
}

static uint64_t roles_verdict_usec(const struct deployment *unit)
{
	const struct roles_state *x = unit->impl;
	uint64_t t = 0;

	for (size_t i = 0; i < x->n; i++)
		if (x->roles[i].d)
			t = MAX(t, deploy_verdict_usec(x->roles[i].d));
	return t;
}

static bool roles_verdict_pending(const struct deployment *unit)
{
	const struct roles_state *x = unit->impl;

	for (size_t i = 0; i < x->n; i++)
		if (x->roles[i].d && deploy_verdict_pending(x->roles[i].d))
			return true;
	return false;
}

/* clang-format off */
const struct deploy_ops deploy_roles_ops = {
	.name = "roles", .state_size = sizeof(struct roles_state), .start = roles_start,
	.find_address = roles_find_address, .check_health = roles_check_health, .terminate = roles_terminate,
	.gone = roles_gone, .teardown_usec = roles_teardown_usec, .destroy = roles_destroy,
	.check_soon = roles_check_soon, .verdict_usec = roles_verdict_usec,
	.verdict_pending = roles_verdict_pending,
	.no_address_text = "the router was not ready",
};
const struct deploy_ops deploy_roles_job_ops = {
	.name = "roles", .state_size = sizeof(struct roles_state), .start = roles_start,
	.find_address = roles_find_address, .check_health = roles_check_health, .terminate = roles_terminate,
	.gone = roles_gone, .teardown_usec = roles_teardown_usec, .destroy = roles_destroy,
	.check_soon = roles_check_soon, .verdict_usec = roles_verdict_usec,
	.verdict_pending = roles_verdict_pending, .queued = true,
	.no_address_text = "the router was not ready",
};
/* clang-format on */

int deploy_start_roles(sd_event *e, enum study_deploy_method method, const struct deploy_roles_config *cfg,
		       deploy_event_fn cb, void *userdata, struct deployment **ret, struct error *err)
{
	struct deployment *unit = NULL;
	struct roles_state *x;
	int r;

	if (cfg->n_workers == 0 || !cfg->router)
		return error_set(err, -EINVAL, "deploy: a unit of several servers needs workers and a router");
	if (method == STUDY_DEPLOY_COMMAND)
		return error_set(err, -EOPNOTSUPP,
				 "deploy: the command method deploys one server; disaggregated serving needs the exec, "
				 "systemd or slurm method");
	r = deploy_new(e, method == STUDY_DEPLOY_SLURM ? &deploy_roles_job_ops : &deploy_roles_ops, cb, userdata, &unit,
		       err);
	if (r < 0)
		return r;
	x = R(unit);
	x->method = method;
	x->router_fn = cfg->router;
	x->router_userdata = cfg->router_userdata;
	x->n_workers = cfg->n_workers;
	x->n = cfg->n_workers + 1;
	x->roles = calloc(x->n, sizeof(*x->roles));
	x->router_name = strdup(cfg->router_name ? cfg->router_name : "router");
	unit->health_path = strdup("(the router's)");
	unit->host = strdup("127.0.0.1");
	if (!x->roles || !x->router_name || !unit->health_path || !unit->host) {
		deploy_free(unit);
		return -ENOMEM;
	}
	unit->health_interval_usec = cfg->health_interval_usec ? cfg->health_interval_usec : USEC_PER_SEC;
	unit->startup_timeout_usec = cfg->startup_timeout_usec ? cfg->startup_timeout_usec : 1200 * USEC_PER_SEC;
	unit->stop_timeout_usec = 30 * USEC_PER_SEC;
	for (size_t i = 0; i < x->n; i++) {
		struct role *role = &x->roles[i];

		role->unit = unit;
		role->router = i == cfg->n_workers;
		role->prefill = !role->router && cfg->workers[i].prefill;
		role->name = strdup(role->router ? x->router_name : cfg->workers[i].name);
		if (!role->name) {
			deploy_free(unit);
			return -ENOMEM;
		}
	}
	/* the workers, side by side */
	for (size_t i = 0; i < cfg->n_workers; i++) {
		r = deploy_start(e, method, &cfg->workers[i].config, on_role, &x->roles[i], &x->roles[i].d, err);
		if (r < 0) {
			error_prefix(err, r, "%s", x->roles[i].name);
			deploy_free(unit);
			return r;
		}
	}
	if (!unit->ops->queued) {
		r = deploy_startup_begin(unit, err);
		if (r < 0) {
			deploy_free(unit);
			return r;
		}
	}
	*ret = unit;
	return 0;
}
