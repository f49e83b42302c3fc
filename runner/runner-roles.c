/* runner-roles.c — a disaggregated trial's servers: its prefill workers,
 * its decode workers and the engine's router, started and stopped as one
 * unit (deploy_start_roles) by the study's method.
 *
 * Each worker is the engine's command for its side's knobs and its role
 * (engine_profile_render_worker) on GPUs of its own: the trial's GPUs in
 * turn, each side's workers its TP of them (on a cluster, a job of its own
 * asking for its TP). Each server gets its own log (the trial's log,
 * suffixed with the role: "...-trial-003-search.prefill-0.log"), port and
 * second port ({aux_port}: vLLM's NIXL side channel, SGLang's bootstrap
 * server), systemd unit ("goodput-STUDY-TRIAL-prefill-0.service") or job
 * ("goodput-STUDY-SEQ-prefill-0", with the study's job comment, so that a
 * resumed study finds it), and is recorded by role before it runs
 * (store_trial_add_server), so that a goodput killed at any moment leaves
 * nothing a restarted one cannot end. The router's command names where the
 * workers serve; it is rendered once they all are ready. The launch
 * command kept with the trial holds every role's ({"argv", "env"} of the
 * router, and "roles": [{"role", "argv", "env"}, ...]). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "runner-internal.h"

#define ROLES_MAX 64

/* One server of the unit: its strings, its record. */
struct role_server {
	struct runner_roles *x;
	char name[32];
	enum engine_role role;
	struct engine_command cmd;
	char *log_path;
	struct runner_method_strings m;
};

struct runner_roles {
	struct runner_trial *t;
	struct role_server *servers; /* the workers, then the router */
	size_t n_workers;
	struct deploy_role *workers;
	cJSON *launch; /* {"roles": [...]} as recorded */
	int record_error;
	char model_key[64];
};

int runner_roles_record_error(const struct runner_roles *x)
{
	return x ? x->record_error : 0;
}

struct runner_roles *runner_roles_free(struct runner_roles *x)
{
	if (!x)
		return NULL;
	for (size_t i = 0; x->servers && i <= x->n_workers; i++) {
		engine_command_done(&x->servers[i].cmd);
		free(x->servers[i].log_path);
		deploy_strv_free(x->servers[i].m.hook_env);
	}
	free(x->servers);
	free(x->workers);
	cJSON_Delete(x->launch);
	free(x);
	return NULL;
}

/* The role's server recorded before it runs. */
static int record_role(const struct deploy_server *srv, void *userdata, struct error *err)
{
	struct role_server *rs = userdata;
	struct runner_trial *t = rs->x->t;
	struct store_server s = { .pgid = srv->pgid, .identity = srv->identity, .unit = srv->unit };
	int k;

	k = store_trial_add_server(t->runner->store, t->id, rs->name, &s, err);
	if (k < 0)
		rs->x->record_error = k;
	return k;
}

/* Every role's command, kept with the trial (the router's once it is known). */
static int record_launch(struct runner_roles *x, const struct role_server *rs, struct error *err)
{
	_cleanup_(freep) char *json = NULL, *text = NULL;
	_cleanup_(cJSON_Deletep) cJSON *one = NULL;
	cJSON *roles = cJSON_GetObjectItemCaseSensitive(x->launch, "roles");
	int k;

	k = engine_command_to_json(&rs->cmd, &json);
	one = k >= 0 ? cJSON_Parse(json) : NULL;
	if (!one || json_add_string(one, "role", rs->name) < 0 || !cJSON_AddItemToArray(roles, one))
		return error_set(err, -ENOMEM, "cannot record the launch command of trial %u", x->t->seq);
	one = NULL;
	if (rs->role == ENGINE_ROLE_ROUTER) {
		/* the unit's entry point: what a client talks to */
		const cJSON *last = cJSON_GetArrayItem(roles, cJSON_GetArraySize(roles) - 1);

		cJSON_DeleteItemFromObjectCaseSensitive(x->launch, "argv");
		cJSON_DeleteItemFromObjectCaseSensitive(x->launch, "env");
		if (!cJSON_AddItemToObject(x->launch, "argv",
					   cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(last, "argv"), true)) ||
		    !cJSON_AddItemToObject(x->launch, "env",
					   cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(last, "env"), true)))
			return error_set(err, -ENOMEM, "out of memory");
	}
	text = cJSON_PrintUnformatted(x->launch);
	if (!text)
		return error_set(err, -ENOMEM, "out of memory");
	return store_trial_set_launch(x->t->runner->store, x->t->id, text, err);
}

/* What a server of the unit is started with, besides its command: its log,
 * its method's unit or job (named by its role), its record. */
static int server_config(struct runner_roles *x, struct role_server *rs, const char *host, uint16_t port,
			 uint16_t aux_port, unsigned gpus, struct deploy_config *cfg, struct error *err)
{
	struct runner_trial *t = x->t;
	const struct runner *r = t->runner;
	const struct engine_profile *p = r->profile;
	bool router = rs->role == ENGINE_ROLE_ROUTER;
	const char *dot = strrchr(t->log_path, '.');
	int k;

	free(rs->log_path);
	if (asprintf(&rs->log_path, "%.*s.%s.log", dot ? (int)(dot - t->log_path) : (int)strlen(t->log_path),
		     t->log_path, rs->name) < 0) {
		rs->log_path = NULL;
		return -ENOMEM;
	}
	deploy_config_from_profile(cfg, p, &rs->cmd, rs->log_path, host, port, r->study->deploy.startup_timeout_usec,
				   r->study->deploy.stop_timeout_usec);
	if (router) {
		/* the router is no engine: its own port mode, health and time, no engine's failure words */
		cfg->announce_prefix =
			p->roles.router_port_mode == ENGINE_PORT_ANNOUNCE ? p->roles.router_announce_prefix : NULL;
		cfg->health_path = p->roles.router_health_path;
		cfg->health_interval_usec = p->roles.router_health_interval_usec;
		cfg->startup_timeout_usec = p->roles.router_startup_timeout_usec;
		cfg->oom_patterns = NULL;
		cfg->profile = NULL;
	} else {
		cfg->model_path = runner_model_of(t, x->model_key, sizeof(x->model_key));
		cfg->model_key = x->model_key;
	}
	cfg->aux_port = aux_port;
	cfg->record = record_role;
	cfg->record_userdata = rs;
	k = runner_method_config(t, cfg, host, port, &rs->m, err);
	if (k < 0)
		return k;
	/* each server of the unit its own unit or job, named by its role */
	if (cfg->unit_name) {
		char *svc = strstr(rs->m.unit, ".service");

		if (svc)
			snprintf(svc, sizeof(rs->m.unit) - (size_t)(svc - rs->m.unit), "-%s.service", rs->name);
	}
	if (cfg->job_name) {
		size_t n = strlen(rs->m.job_name);

		snprintf(rs->m.job_name + n, sizeof(rs->m.job_name) - n, "-%s", rs->name);
		cfg->job_gpus = gpus;
	}
	return 0;
}

/* The router's config once the workers serve: its command names them. */
static int router_config(void *userdata, const struct deploy_worker_address *addrs, size_t n, struct deploy_config *ret,
			 struct error *err)
{
	struct runner_roles *x = userdata;
	struct runner_trial *t = x->t;
	const struct runner *r = t->runner;
	struct role_server *rs = &x->servers[x->n_workers];
	struct engine_worker_address pre[ROLES_MAX], dec[ROLES_MAX];
	const char *host = r->study->deploy.host ? r->study->deploy.host : "127.0.0.1";
	bool cluster = runner_on_cluster(r);
	size_t n_pre = 0, n_dec = 0;
	uint16_t port = 0;
	int k = 0;

	for (size_t i = 0; i < n && i < ROLES_MAX; i++) {
		struct engine_worker_address *a = addrs[i].prefill ? &pre[n_pre++] : &dec[n_dec++];

		*a = (struct engine_worker_address){ addrs[i].host, addrs[i].port, addrs[i].aux_port };
	}
	if (!cluster && r->profile->roles.router_port_mode == ENGINE_PORT_FREE)
		k = deploy_pick_free_port(host, &port, err);
	engine_command_done(&rs->cmd);
	if (k >= 0)
		k = engine_profile_render_router(r->profile, r->study, host, port, cluster, pre, n_pre, dec, n_dec,
						 &rs->cmd, err);
	if (k >= 0)
		k = server_config(x, rs, host, port, 0, 0, ret, err);
	if (k >= 0)
		k = record_launch(x, rs, err);
	return k;
}

int runner_roles_launch(struct runner_trial *t, const char *host, deploy_event_fn cb, struct runner_roles **ret_roles,
			struct deployment **ret, bool *ret_setup, struct error *err)
{
	struct runner *r = t->runner;
	const struct study *s = r->study;
	bool cluster = runner_on_cluster(r);
	struct runner_roles *x;
	struct opt_pd_shape pd;
	struct deploy_roles_config rc;
	unsigned positions[STUDY_GPUS_MAX], n_positions = 0, next = 0;
	int k = 0;

	*ret_setup = false;
	if (!opt_knobs_pd_shape(t->knobs, &pd) || pd.prefill_workers + pd.decode_workers > ROLES_MAX)
		return error_set(err, -EINVAL, "trial %u: not a disaggregated configuration of at most %d workers",
				 t->seq, ROLES_MAX);
	for (unsigned i = 0; i < r->n_gpus; i++)
		if (t->gpus & (UINT64_C(1) << i))
			positions[n_positions++] = i;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	*ret_roles = x; /* freed by the caller, whatever happens */
	x->t = t;
	x->n_workers = pd.prefill_workers + pd.decode_workers;
	x->servers = calloc(x->n_workers + 1, sizeof(*x->servers));
	x->workers = calloc(x->n_workers, sizeof(*x->workers));
	x->launch = cJSON_CreateObject();
	if (!x->servers || !x->workers || !x->launch || !cJSON_AddArrayToObject(x->launch, "roles"))
		return -ENOMEM;
	for (size_t i = 0; i <= x->n_workers; i++) {
		struct role_server *rs = &x->servers[i];
		bool prefill = i < pd.prefill_workers;

		rs->x = x;
		rs->role = i == x->n_workers ? ENGINE_ROLE_ROUTER : prefill ? ENGINE_ROLE_PREFILL : ENGINE_ROLE_DECODE;
		if (rs->role == ENGINE_ROLE_ROUTER)
			snprintf(rs->name, sizeof(rs->name), "router");
		else
			snprintf(rs->name, sizeof(rs->name), "%s-%zu", engine_role_to_string(rs->role),
				 prefill ? i : i - pd.prefill_workers);
	}
	for (size_t i = 0; i < x->n_workers && k >= 0; i++) {
		struct role_server *rs = &x->servers[i];
		struct deploy_role *w = &x->workers[i];
		unsigned tp = rs->role == ENGINE_ROLE_PREFILL ? pd.prefill_tp : pd.decode_tp, devices[STUDY_GPUS_MAX];
		uint16_t port = 0, aux = 0;

		/* the trial's GPUs in turn, each worker its side's TP of them */
		for (unsigned g = 0; g < tp && !cluster; g++) {
			if (next >= n_positions) {
				k = error_set(err, -ENOSPC, "trial %u: %u GPUs for %u workers of %s", t->seq,
					      n_positions, pd.prefill_workers + pd.decode_workers, t->knobs_text);
				break;
			}
			devices[g] = s->gpu.devices[positions[next++]];
		}
		if (k < 0)
			break;
		if (!cluster) {
			if (r->profile->port_mode == ENGINE_PORT_FREE)
				k = deploy_pick_free_port(host, &port, err);
			do
				if (k >= 0)
					k = deploy_pick_free_port(host, &aux, err);
			while (k >= 0 && aux == port);
		}
		if (k >= 0)
			k = engine_profile_render_worker(r->profile, s, t->knobs, rs->role, host, port, aux, devices,
							 cluster ? 0 : tp, cluster, &rs->cmd, err);
		if (k >= 0) {
			w->name = rs->name;
			w->prefill = rs->role == ENGINE_ROLE_PREFILL;
			k = server_config(x, rs, host, port, aux, tp, &w->config, err);
		}
		if (k >= 0)
			k = record_launch(x, rs, err);
	}
	if (k < 0)
		return k;
	rc = (struct deploy_roles_config){
		.workers = x->workers,
		.n_workers = x->n_workers,
		.router = router_config,
		.router_userdata = x,
		.router_name = "router",
		/* the workers start side by side, then the router: the longer of the two waits, then the router's */
		.startup_timeout_usec = (s->deploy.startup_timeout_usec ? s->deploy.startup_timeout_usec
									: r->profile->startup_timeout_usec) +
					r->profile->roles.router_startup_timeout_usec,
		.health_interval_usec = r->profile->roles.router_health_interval_usec,
	};
	k = deploy_start_roles(r->event, s->deploy.method, &rc, cb, t, ret, err);
	*ret_setup = k < 0 && x->record_error == 0;
	if (k >= 0)
		log_debug("trial %u: %zu workers and a router", t->seq, x->n_workers);
	return k;
}
