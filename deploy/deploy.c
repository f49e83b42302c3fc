/* deploy.c — the deployment object: its configuration (copied), its state
 * and the deferred callback that reports READY, STOPPED and FAILED, the
 * failure and its message, and the choice of method. The start-up phase all
 * methods share is in deploy-startup.c, host facts (ports, logs,
 * environments) in deploy-util.c, the methods in deploy-<method>.c. */
#include "deploy-internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "time-util.h"

static const char *const state_names[] = {
	[DEPLOY_STARTING] = "starting", [DEPLOY_READY] = "ready",   [DEPLOY_STOPPING] = "stopping",
	[DEPLOY_STOPPED] = "stopped",   [DEPLOY_FAILED] = "failed", [DEPLOY_PENDING] = "pending",
};

static const char *const failure_names[] = {
	[DEPLOY_FAILURE_NONE] = "none",           [DEPLOY_FAILURE_OOM] = "oom",
	[DEPLOY_FAILURE_CRASHED] = "crashed",     [DEPLOY_FAILURE_STARTUP_TIMEOUT] = "startup_timeout",
	[DEPLOY_FAILURE_HOST_BUSY] = "host_busy", [DEPLOY_FAILURE_SETUP] = "setup",
	[DEPLOY_FAILURE_LOST] = "lost",           [DEPLOY_FAILURE_TIME_LIMIT] = "time_limit",
	[DEPLOY_FAILURE_SUBMIT] = "submit_error", [DEPLOY_FAILURE_UNREACHABLE] = "scheduler_unreachable",
};

const char *deploy_state_to_string(enum deploy_state s)
{
	return (unsigned)s < ELEMENTSOF(state_names) ? state_names[s] : "?";
}

const char *deploy_failure_to_string(enum deploy_failure f)
{
	return (unsigned)f < ELEMENTSOF(failure_names) ? failure_names[f] : "?";
}

void deploy_config_from_profile(struct deploy_config *cfg, const struct engine_profile *p,
				const struct engine_command *cmd, const char *log_path, const char *host, uint16_t port,
				uint64_t startup_timeout_usec, uint64_t stop_timeout_usec)
{
	*cfg = (struct deploy_config){
		.command = cmd,
		.log_path = log_path,
		.host = host,
		.port = port,
		.announce_prefix = p->port_mode == ENGINE_PORT_ANNOUNCE ? p->announce_prefix : NULL,
		.health_path = p->health_path,
		.health_interval_usec = p->health_interval_usec,
		.startup_timeout_usec = startup_timeout_usec ? startup_timeout_usec : p->startup_timeout_usec,
		.stop_timeout_usec = stop_timeout_usec ? stop_timeout_usec : p->stop_timeout_usec,
		.oom_patterns = p->oom_patterns,
		.profile = p,
	};
}

/* ---- state and callback ---- */

static int on_notify(sd_event_source *s, void *userdata)
{
	struct deployment *d = userdata;

	/* d may be freed by the callback: touch nothing after it. */
	if (d->cb)
		d->cb(d, d->state, d->userdata);
	return 0;
}

void deploy_set_state(struct deployment *d, enum deploy_state state)
{
	d->state = state;
	if (state == DEPLOY_READY && !d->ready_usec)
		d->ready_usec = mono_usec();
	if (state == DEPLOY_READY || state == DEPLOY_STOPPED || state == DEPLOY_FAILED || state == DEPLOY_PENDING ||
	    (state == DEPLOY_STARTING && d->ops->queued))
		(void)sd_event_source_set_enabled(d->notify_source, SD_EVENT_ONESHOT);
}

void deploy_set_failurev(struct deployment *d, enum deploy_failure f, const char *fmt, va_list ap)
{
	char *m = NULL;

	if (d->failure != DEPLOY_FAILURE_NONE)
		return; /* the first cause wins */
	d->failure = f;
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	free(d->message);
	d->message = m;
}

void deploy_set_failure(struct deployment *d, enum deploy_failure f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	deploy_set_failurev(d, f, fmt, ap);
	va_end(ap);
}

void deploy_append_message(struct deployment *d, const char *fmt, ...)
{
	_cleanup_(freep) char *text = NULL;
	char *m = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0) {
		text = NULL;
		return;
	}
	if (asprintf(&m, "%s%s%s", d->message ? d->message : "", d->message ? "; " : "", text) < 0)
		return;
	free(d->message);
	d->message = m;
}

/* ---- the object ---- */

int deploy_record(struct deployment *d, const char *unit, struct error *err)
{
	struct deploy_server srv = { .pgid = d->pgid, .unit = unit };
	int r;

	if (!d->record)
		return 0;
	if (d->pgid > 0) {
		r = deploy_process_identity((pid_t)d->pgid, srv.identity, sizeof(srv.identity));
		if (r < 0)
			return error_set(err, r, "deploy: the server's process group %lld: %s", (long long)d->pgid,
					 strerror(-r));
	}
	return d->record(&srv, d->record_userdata, err);
}

static char *strdup_or_null(const char *s, bool *oom)
{
	char *c;

	if (!s)
		return NULL;
	c = strdup(s);
	if (!c)
		*oom = true;
	return c;
}

/* The method, after checking that the config has what it needs. */
static int choose_method(enum study_deploy_method method, const struct deploy_config *cfg,
			 const struct deploy_ops **ret, struct error *err)
{
	if (!cfg->command || !cfg->command->argv || !cfg->command->argv[0] || !cfg->log_path || !cfg->health_path)
		return error_set(err, -EINVAL, "deploy: a command, a log file and a health path are needed");
	switch (method) {
	case STUDY_DEPLOY_EXEC:
		*ret = &deploy_exec_ops;
		break;
	case STUDY_DEPLOY_SYSTEMD:
		if (!cfg->unit_name)
			return error_set(err, -EINVAL, "deploy: systemd needs a unit name");
		*ret = &deploy_systemd_ops;
		break;
	case STUDY_DEPLOY_COMMAND:
		if (!cfg->deploy_command || !cfg->deploy_command[0] || !cfg->teardown_command ||
		    !cfg->teardown_command[0])
			return error_set(err, -EINVAL, "deploy: the command method needs deploy and teardown commands");
		*ret = &deploy_command_ops;
		break;
	case STUDY_DEPLOY_SLURM:
		/* no GPUs: a job of a process that needs none (a disaggregated configuration's router) */
		if (!cfg->cluster || !cfg->job_name)
			return error_set(err, -EINVAL, "deploy: a job needs a cluster and a name");
		*ret = &deploy_slurm_ops;
		break;
	default:
		return error_set(err, -EOPNOTSUPP, "deploy: unknown method %d", (int)method);
	}
	/* The command method learns its URL from the deploy command. */
	if ((*ret)->find_address == NULL && cfg->port == 0 && !cfg->announce_prefix)
		return error_set(err, -EINVAL, "deploy: no port and no announce line to learn it from");
	return 0;
}

/* A server on this host loads its checkpoint from a path that must be
 * there: missing or unreadable, no configuration could start. */
static int check_model_path(const struct deploy_ops *ops, const struct deploy_config *cfg, struct error *err)
{
	if (!ops->wait_port_closed || !cfg->model_path || cfg->model_path[0] != '/')
		return 0;
	if (access(cfg->model_path, R_OK) < 0)
		return error_set(err, -errno, "deploy: %s %s: %s", cfg->model_key ? cfg->model_key : "the model path",
				 cfg->model_path, strerror(errno));
	return 0;
}

/* Copies what the deployment keeps of cfg, with the defaults filled in. */
static int copy_config(struct deployment *d, const struct deploy_config *cfg)
{
	bool oom = false;

	d->argv = deploy_strv_copy(cfg->command->argv);
	d->env = deploy_strv_copy(cfg->command->env);
	d->oom_patterns = deploy_strv_copy((char *const *)cfg->oom_patterns);
	d->hook_env = deploy_strv_copy((char *const *)cfg->hook_env);
	d->log_path = strdup_or_null(cfg->log_path, &oom);
	d->host = strdup_or_null(cfg->host ? cfg->host : "127.0.0.1", &oom);
	d->announce_prefix = strdup_or_null(cfg->announce_prefix, &oom);
	d->health_path = strdup_or_null(cfg->health_path, &oom);
	d->unit_name = strdup_or_null(cfg->unit_name, &oom);
	d->health_interval_usec = cfg->health_interval_usec ? cfg->health_interval_usec : USEC_PER_SEC;
	d->startup_timeout_usec = cfg->startup_timeout_usec ? cfg->startup_timeout_usec : 600 * USEC_PER_SEC;
	d->stop_timeout_usec = cfg->stop_timeout_usec ? cfg->stop_timeout_usec : 30 * USEC_PER_SEC;
	d->command_timeout_usec = cfg->command_timeout_usec ? cfg->command_timeout_usec : 120 * USEC_PER_SEC;
	d->user_bus = cfg->user_bus;
	d->record = cfg->record;
	d->record_userdata = cfg->record_userdata;
	d->profile = cfg->profile;
	d->cluster = cfg->cluster;
	d->job_name = strdup_or_null(cfg->job_name, &oom);
	d->job_comment = strdup_or_null(cfg->job_comment, &oom);
	d->partition = strdup_or_null(cfg->partition, &oom);
	d->account = strdup_or_null(cfg->account, &oom);
	d->job_gpus = cfg->job_gpus;
	d->job_cpus = cfg->job_cpus;
	d->job_memory_mib = cfg->job_memory_mib;
	d->job_exclusive = cfg->job_exclusive;
	d->time_limit_usec = cfg->time_limit_usec;
	d->aux_port = cfg->aux_port;
	if (cfg->sbatch_args && !(d->sbatch_args = deploy_strv_copy((char *const *)cfg->sbatch_args)))
		oom = true;
	if (cfg->deploy_command && !(d->deploy_command = deploy_strv_copy((char *const *)cfg->deploy_command)))
		oom = true;
	if (cfg->teardown_command && !(d->teardown_command = deploy_strv_copy((char *const *)cfg->teardown_command)))
		oom = true;
	if (cfg->health_command && !(d->health_command = deploy_strv_copy((char *const *)cfg->health_command)))
		oom = true;
	if (oom || !d->argv || !d->env || !d->oom_patterns || !d->hook_env)
		return -ENOMEM;
	if (cfg->port) {
		deploy_set_port(d, d->host, cfg->port);
		d->port_chosen = true;
	}
	return 0;
}

int deploy_new(sd_event *e, const struct deploy_ops *ops, deploy_event_fn cb, void *userdata, struct deployment **ret,
	       struct error *err)
{
	struct deployment *d;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->ops = ops;
	d->impl = calloc(1, ops->state_size);
	if (!d->impl) {
		free(d);
		return -ENOMEM;
	}
	d->event = sd_event_ref(e);
	d->cb = cb;
	d->userdata = userdata;
	d->state = ops->queued ? DEPLOY_PENDING : DEPLOY_STARTING;
	d->start_usec = d->submit_usec = mono_usec();
	r = sd_event_add_defer(e, &d->notify_source, on_notify, d);
	if (r >= 0)
		r = sd_event_source_set_enabled(d->notify_source, SD_EVENT_OFF);
	if (r < 0) {
		deploy_free(d);
		return error_set(err, r, "deploy: cannot create an event source: %s", strerror(-r));
	}
	(void)sd_event_source_set_description(d->notify_source, "deploy-notify");
	*ret = d;
	return 0;
}

int deploy_start(sd_event *e, enum study_deploy_method method, const struct deploy_config *cfg, deploy_event_fn cb,
		 void *userdata, struct deployment **ret, struct error *err)
{
	const struct deploy_ops *ops = NULL;
	struct deployment *d;
	int r;

	r = choose_method(method, cfg, &ops, err);
	if (r >= 0)
		r = check_model_path(ops, cfg, err);
	if (r >= 0)
		r = deploy_new(e, ops, cb, userdata, &d, err);
	if (r < 0)
		return r;
	r = copy_config(d, cfg);
	if (r < 0) {
		deploy_free(d);
		return error_set(err, r, "deploy: out of memory");
	}
	r = d->ops->start(d, err);
	if (r >= 0 && !d->ops->queued)
		r = deploy_startup_begin(d, err);
	if (r < 0) {
		deploy_free(d);
		return r;
	}
	*ret = d;
	return 0;
}

int deploy_stop(struct deployment *d)
{
	if (d->state != DEPLOY_STARTING && d->state != DEPLOY_READY && d->state != DEPLOY_PENDING)
		return -EALREADY;
	deploy_teardown(d, DEPLOY_STOPPED);
	return 0;
}

struct deployment *deploy_free(struct deployment *d)
{
	if (!d)
		return NULL;
	deploy_startup_end(d);
	d->reap_source = sd_event_source_disable_unref(d->reap_source);
	d->client = probe_client_free(d->client);
	d->ops->destroy(d);
	free(d->impl);
	sd_event_source_disable_unref(d->notify_source);
	sd_event_unref(d->event);
	{
		char **strvs[] = {
			d->argv,           d->env,      d->oom_patterns, d->deploy_command, d->teardown_command,
			d->health_command, d->hook_env, d->sbatch_args
		};
		char *strs[] = { d->unit_name, d->log_path, d->host,        d->announce_prefix, d->health_path,
				 d->message,   d->job_name, d->job_comment, d->partition,       d->account };

		for (size_t i = 0; i < ELEMENTSOF(strvs); i++)
			deploy_strv_free(strvs[i]);
		for (size_t i = 0; i < ELEMENTSOF(strs); i++)
			free(strs[i]);
	}
	free(d);
	return NULL;
}

enum deploy_state deploy_get_state(const struct deployment *d)
{
	return d->state;
}

enum deploy_failure deploy_get_failure(const struct deployment *d)
{
	return d->failure;
}

const char *deploy_get_message(const struct deployment *d)
{
	return d->message ? d->message : "";
}

void deploy_get_failure_cause(const struct deployment *d, enum engine_failure_cause *ret_cause,
			      uint64_t *ret_suggested_len)
{
	*ret_cause = d->cause;
	*ret_suggested_len = d->suggested_len;
}

const char *deploy_get_base_url(const struct deployment *d)
{
	return d->base_url[0] ? d->base_url : NULL;
}

uint16_t deploy_get_port(const struct deployment *d)
{
	return d->port;
}

uint16_t deploy_get_aux_port(const struct deployment *d)
{
	return d->aux_port;
}

int64_t deploy_get_pgid(const struct deployment *d)
{
	return d->pgid;
}

const char *deploy_get_unit(const struct deployment *d)
{
	return d->ops == &deploy_systemd_ops ? d->unit_name : NULL;
}

double deploy_get_startup_seconds(const struct deployment *d)
{
	return d->ready_usec ? usec_to_sec(d->ready_usec - d->start_usec) : NAN;
}

uint64_t deploy_get_job_id(const struct deployment *d)
{
	return d->job_id;
}

double deploy_get_pending_seconds(const struct deployment *d)
{
	return d->ops->queued && d->job_ran ? usec_to_sec(d->start_usec - d->submit_usec) : NAN;
}

const char *deploy_get_node(const struct deployment *d)
{
	return d->node;
}

const char *deploy_get_gpus(const struct deployment *d)
{
	return d->gpus;
}

const char *deploy_get_pending_reason(const struct deployment *d)
{
	return d->state == DEPLOY_PENDING ? d->pending_reason : "";
}

void deploy_check_soon(struct deployment *d)
{
	if (d->ops->check_soon)
		d->ops->check_soon(d);
}

uint64_t deploy_verdict_usec(const struct deployment *d)
{
	return d->ops->verdict_usec ? d->ops->verdict_usec(d) : 0;
}

bool deploy_verdict_pending(const struct deployment *d)
{
	/* reached, and told once the server is torn down (DEPLOY_FAILED) */
	if (d->state == DEPLOY_STOPPING && d->failure != DEPLOY_FAILURE_NONE)
		return true;
	return d->ops->verdict_pending && d->ops->verdict_pending(d);
}
