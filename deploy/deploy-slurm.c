/* deploy-slurm.c — the `slurm` deployer: each trial's server is a job on a
 * Slurm cluster (slurm.h talks to it).
 *
 * Start writes the job file (the rendered argv and environment, as JSON:
 * deploy-slurm-job.c) and the fixed batch script beside the trial's log,
 * and submits with sbatch --parsable: --gres=gpu:TP, the CPUs and memory
 * the engine profile declares, the job's name and comment (how a resumed
 * study finds it), its output appended to the trial's log, the study's
 * partition, account, time limit and extra options. The deployment is
 * PENDING from there: the job waits for its GPUs — Slurm decides where —
 * and that wait is no part of the start-up. Once the queue says RUNNING
 * the shared start-up phase begins: the address is the one the launcher
 * wrote to the address file (on the node's own free port), health is a GET
 * from this host, the start-up timeout counts from the job's start.
 *
 * How a job ended becomes a failure class here:
 *   FAILED, COMPLETED            the server exited: its log says why (crashed,
 *                                out of memory, host busy), as for any server
 *   OUT_OF_MEMORY                over the memory it asked for: out of memory
 *   TIMEOUT                      its time limit passed (deploy.time_limit)
 *   PREEMPTED, NODE_FAIL, BOOT_FAIL, DEADLINE, CANCELLED by someone else,
 *   gone from the queue          lost: the cluster took it away, not the
 *                                configuration's fault — the trial is redone
 * Teardown is scancel (Slurm signals the job, SIGKILL after its KillWait);
 * the deployment reports once the queue says the job ended. A deployment
 * freed while its job may still run cancels it on the spot (a bounded,
 * blocking scancel: a study that fails or exits at once leaves no job
 * behind). */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "deploy-internal.h"
#include "json-util.h"
#include "slurm.h"
#include "time-util.h"

#define SCRIPT_NAME    "goodput-job.sh"
#define ADDRESS_MAX    4096
#define KILL_WAIT_USEC (30 * USEC_PER_SEC) /* Slurm's default KillWait */
#define ARGS_MAX       96

struct job_state {
	struct slurm_op *submit, *cancel;
	struct slurm_watch *watch;
	char *job_file, *address_file, *script;
	bool cancel_sent;    /* scancel was run for the job */
	bool ended;          /* the queue said it ended (or it never was submitted) */
	uint64_t check_look; /* the look at the queue asked for by check_soon */
};

static struct job_state *J(struct deployment *d)
{
	return d->impl;
}

/* ---- the job's files ---- */

/* The job file and address file beside the log (made absolute: the node
 * knows nothing of this process's working directory), the script in its
 * folder. */
static int job_paths(struct deployment *d, char *dir, size_t dir_size, struct error *err)
{
	struct job_state *j = J(d);
	_cleanup_(freep) char *copy = strdup(d->log_path), *copy2 = strdup(d->log_path);
	char real[PATH_MAX], *base;

	if (!copy || !copy2)
		return -ENOMEM;
	base = basename(copy);
	if (!realpath(dirname(copy2), real))
		return error_set(err, -errno, "deploy: the log's folder of %s: %s", d->log_path, strerror(errno));
	snprintf(dir, dir_size, "%s", real);
	/* the log too: sbatch --output takes it as it is, relative to the job's working directory */
	free(d->log_path);
	if (asprintf(&d->log_path, "%s/%s", real, base) < 0 || asprintf(&j->job_file, "%s.job", d->log_path) < 0 ||
	    asprintf(&j->address_file, "%s.address", d->log_path) < 0 ||
	    asprintf(&j->script, "%s/" SCRIPT_NAME, real) < 0)
		return -ENOMEM;
	return 0;
}

static int write_files(struct deployment *d, struct error *err)
{
	struct job_state *j = J(d);
	int r;

	if (unlink(j->address_file) < 0 && errno != ENOENT)
		return error_set(err, -errno, "deploy: %s: %s", j->address_file, strerror(errno));
	r = deploy_job_file_write(j->job_file, d->argv, d->env, d->host, j->address_file, d->job_gpus, err);
	if (r >= 0)
		r = deploy_write_file_atomic(j->script, deploy_job_script_text(), 0755, err);
	return r;
}

/* ---- sbatch's arguments ---- */

struct args {
	char *v[ARGS_MAX + 1];
	size_t n;
	bool oom;
};

static void args_add(struct args *a, const char *fmt, ...) _printf_(2, 3);
static void args_add(struct args *a, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	if (a->n >= ARGS_MAX) {
		a->oom = true;
		return;
	}
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0) {
		s = NULL;
		a->oom = true;
	}
	va_end(ap);
	if (s)
		a->v[a->n++] = s;
}

static void args_done(struct args *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
}

/* "D-HH:MM:SS", rounded up to whole minutes (Slurm counts minutes). */
static void time_limit_text(uint64_t usec, char *buf, size_t size)
{
	uint64_t min = (usec + 60 * USEC_PER_SEC - 1) / (60 * USEC_PER_SEC);

	snprintf(buf, size, "%" PRIu64 "-%02" PRIu64 ":%02" PRIu64 ":00", min / 1440, min / 60 % 24, min % 60);
}

static int sbatch_args(struct deployment *d, const char *dir, struct args *a)
{
	struct job_state *j = J(d);
	char limit[32];

	args_add(a, "--job-name=%s", d->job_name);
	if (d->job_comment)
		args_add(a, "--comment=%s", d->job_comment);
	args_add(a, "--output=%s", d->log_path);
	args_add(a, "--open-mode=append");
	args_add(a, "--chdir=%s", dir);
	args_add(a, "--nodes=1");
	args_add(a, "--ntasks=1");
	if (d->job_gpus)
		args_add(a, "--gres=gpu:%u", d->job_gpus);
	args_add(a, "--cpus-per-task=%u", d->job_cpus ? d->job_cpus : 1);
	if (d->job_memory_mib)
		args_add(a, "--mem=%" PRIu64 "M", d->job_memory_mib);
	if (d->job_exclusive)
		args_add(a, "--exclusive");
	if (d->partition)
		args_add(a, "--partition=%s", d->partition);
	if (d->account)
		args_add(a, "--account=%s", d->account);
	if (d->time_limit_usec) {
		time_limit_text(d->time_limit_usec, limit, sizeof(limit));
		args_add(a, "--time=%s", limit);
	}
	for (size_t i = 0; d->sbatch_args && d->sbatch_args[i]; i++)
		args_add(a, "%s", d->sbatch_args[i]);
	args_add(a, "%s", j->script);
	args_add(a, "%s", j->job_file);
	return a->oom ? -ENOMEM : 0;
}

/* ---- the job's life ---- */

static void cancel_job(struct deployment *d);

/* How an ended job ends the deployment (slurm.h's states, the list above). */
static void job_ended(struct deployment *d, const struct slurm_job *job)
{
	char how[192];

	switch (job->state) {
	case SLURM_STATE_FAILED:
	case SLURM_STATE_COMPLETED:
		/* it may have run and ended between two looks at the queue */
		if (d->state == DEPLOY_PENDING && deploy_job_running(d) < 0)
			return;
		if (job->exit_signal)
			snprintf(how, sizeof(how), "job %" PRIu64 " ended (Slurm %s, killed by signal %d)", d->job_id,
				 job->state_name, job->exit_signal);
		else
			snprintf(how, sizeof(how), "job %" PRIu64 " ended (Slurm %s, exit status %d)", d->job_id,
				 job->state_name, job->exit_code);
		deploy_server_ended(d, how);
		return;
	case SLURM_STATE_OUT_OF_MEMORY:
		deploy_abort(d, DEPLOY_FAILURE_OOM,
			     "job %" PRIu64
			     " ran out of memory (Slurm OUT_OF_MEMORY: more host memory than it asked for, "
			     "the engine profile's resources.memory_gib)",
			     d->job_id);
		return;
	case SLURM_STATE_TIMEOUT:
		deploy_abort(d, DEPLOY_FAILURE_TIME_LIMIT,
			     "job %" PRIu64 " reached its time limit (Slurm TIMEOUT; deploy.time_limit)", d->job_id);
		return;
	case SLURM_STATE_GONE:
		deploy_abort(d, DEPLOY_FAILURE_LOST,
			     "job %" PRIu64 " was ended by the cluster: it vanished from the queue (neither squeue nor "
			     "sacct knows it): not the configuration's doing",
			     d->job_id);
		return;
	default:
		deploy_abort(d, DEPLOY_FAILURE_LOST,
			     "job %" PRIu64 " was ended by the cluster (Slurm %s%s%s%s): not the configuration's doing",
			     d->job_id, job->state_name,
			     job->state == SLURM_STATE_CANCELLED ? ", cancelled outside goodput" : "",
			     job->nodes[0] ? " on " : "", job->nodes);
		return;
	}
}

static void on_job(struct slurm_watch *w, const struct slurm_job *job, void *userdata)
{
	struct deployment *d = userdata;
	struct job_state *j = J(d);

	if (job->nodes[0])
		snprintf(d->node, sizeof(d->node), "%.*s", (int)sizeof(d->node) - 1, job->nodes);
	if (slurm_state_is_final(job->state))
		j->ended = true;
	if (d->state == DEPLOY_STOPPING || d->state == DEPLOY_STOPPED || d->state == DEPLOY_FAILED)
		return; /* being torn down: the reap sees it ended */
	switch (job->state) {
	case SLURM_STATE_PENDING:
		snprintf(d->pending_reason, sizeof(d->pending_reason), "%s", job->reason);
		return;
	case SLURM_STATE_RUNNING:
		(void)deploy_job_running(d);
		return;
	case SLURM_STATE_UNKNOWN:
	case SLURM_STATE_COMPLETING:
		return; /* the final state follows */
	default:
		job_ended(d, job);
		return;
	}
}

/* sbatch's words when it reached no controller, so that nothing was
 * submitted (a timeout is not one: the job may have been taken). */
static bool controller_unreachable(const char *message)
{
	return message && (strstr(message, "Unable to contact slurm controller") ||
			   strstr(message, "Slurm temporarily unable to accept job"));
}

static void on_submitted(struct slurm_cluster *c, int r, uint64_t job_id, const char *message, void *userdata)
{
	struct deployment *d = userdata;
	struct job_state *j = J(d);
	int k;

	j->submit = NULL;
	if (r < 0) {
		j->ended = true;
		deploy_append_message(d, "sbatch failed");
		if (d->state == DEPLOY_PENDING && controller_unreachable(message))
			deploy_abort(d, DEPLOY_FAILURE_UNREACHABLE,
				     "the cluster's controller did not answer sbatch: %s", message);
		else if (d->state == DEPLOY_PENDING)
			deploy_abort(d, DEPLOY_FAILURE_SUBMIT, "the job was not submitted: %s", message);
		return;
	}
	d->job_id = job_id;
	k = slurm_watch_new(d->cluster, job_id, on_job, d, &j->watch);
	if (k < 0) {
		deploy_abort(d, DEPLOY_FAILURE_CRASHED, "cannot watch job %" PRIu64 ": %s", job_id, strerror(-k));
		return;
	}
	if (d->state == DEPLOY_STOPPING) {
		cancel_job(d); /* stopped while sbatch ran */
		return;
	}
	if (d->state == DEPLOY_PENDING)
		deploy_set_state(d, DEPLOY_PENDING); /* the job id is known: report it */
}

static int slurm_start(struct deployment *d, struct error *err)
{
	struct job_state *j = J(d);
	struct args a = { 0 };
	_cleanup_(closep) int log_fd = -1;
	char dir[PATH_MAX];
	int r;

	r = job_paths(d, dir, sizeof(dir), err);
	if (r == -ENOMEM)
		return error_set(err, r, "out of memory");
	if (r >= 0)
		r = write_files(d, err);
	if (r >= 0)
		r = sbatch_args(d, dir, &a);
	if (r == -ENOMEM)
		error_set(err, r, "out of memory");
	if (r >= 0) {
		/* the log names what runs: the engine's command, then the job's submission */
		log_fd = deploy_log_open(d, "submitting a Slurm job for", d->argv, d->env, err);
		r = log_fd;
	}
	if (r >= 0) {
		(void)dprintf(log_fd, "==> goodput: sbatch --parsable");
		for (size_t i = 0; i < a.n; i++)
			(void)dprintf(log_fd, " %s", a.v[i]);
		(void)dprintf(log_fd, "\n");
		r = slurm_submit(d->cluster, a.v, on_submitted, d, &j->submit, err);
	}
	args_done(&a);
	return r;
}

/* ---- the start-up phase's hooks ---- */

/* The address file the launcher wrote: {"url": ..., "node": ..., "gpus": ...}. */
static bool slurm_find_address(struct deployment *d)
{
	struct job_state *j = J(d);
	_cleanup_(cJSON_Deletep) cJSON *a = NULL;
	const char *url = NULL, *node = NULL, *gpus = NULL;
	struct error err = { 0 };

	if (access(j->address_file, F_OK) < 0)
		return false;
	if (json_parse_file(j->address_file, ADDRESS_MAX, &a, &err) < 0 ||
	    json_require_string(a, "", "url", 300, &url, &err) < 0 || deploy_set_base_url(d, url) < 0) {
		deploy_abort(d, DEPLOY_FAILURE_CRASHED, "the job's address file %s is unreadable: %s", j->address_file,
			     err.msg[0] ? err.msg
			     : url      ? url
					: "?");
		return false;
	}
	if (json_get_string(a, "", "node", 127, &node, NULL) > 0)
		snprintf(d->node, sizeof(d->node), "%s", node);
	if (json_get_string(a, "", "gpus", 63, &gpus, NULL) > 0)
		snprintf(d->gpus, sizeof(d->gpus), "%s", gpus);
	{
		uint32_t aux = 0;

		/* a second port the launcher picked for the server (a role's side channel) */
		if (json_get_u32(a, "", "aux_port", 1, 65535, &aux, NULL) > 0)
			d->aux_port = (uint16_t)aux;
	}
	return true;
}

static void on_cancelled(struct slurm_cluster *c, int r, const char *message, void *userdata)
{
	struct deployment *d = userdata;

	J(d)->cancel = NULL;
	if (r < 0)
		deploy_append_message(d, "%s", message);
	slurm_cluster_poll_soon(d->cluster);
}

static void cancel_job(struct deployment *d)
{
	struct job_state *j = J(d);
	struct error err = { 0 };

	if (j->cancel_sent || j->ended || !d->job_id)
		return;
	j->cancel_sent = true;
	if (slurm_cancel(d->cluster, &d->job_id, 1, on_cancelled, d, &j->cancel, &err) < 0)
		deploy_append_message(d, "%s", err.msg);
	slurm_cluster_poll_soon(d->cluster);
}

/* A job still being submitted is cancelled once sbatch answers (on_submitted). */
static void slurm_terminate(struct deployment *d)
{
	cancel_job(d);
}

static bool slurm_gone(struct deployment *d)
{
	struct job_state *j = J(d);

	return !j->submit && (j->ended || !d->job_id);
}

/* scancel's grace (Slurm's KillWait) and two looks at the queue. */
static uint64_t slurm_teardown_usec(const struct deployment *d)
{
	return MAX(d->stop_timeout_usec, KILL_WAIT_USEC) + 2 * slurm_cluster_poll_interval(d->cluster) +
	       10 * USEC_PER_SEC;
}

static void slurm_check_soon(struct deployment *d)
{
	J(d)->check_look = slurm_cluster_poll_soon(d->cluster);
}

/* A look at the queue, and the next one when the job is still completing. */
static uint64_t slurm_verdict_usec(const struct deployment *d)
{
	return 2 * slurm_cluster_poll_interval(d->cluster) + USEC_PER_SEC;
}

/* Until the look asked for has read the queue, and while the job is
 * between running and its final state: a loaded controller answers
 * squeue in tens of seconds, and a verdict before it would blame the
 * configuration for a job the cluster ended. */
static bool slurm_verdict_pending(const struct deployment *d)
{
	const struct job_state *j = d->impl;

	if (j->ended || !d->job_id)
		return false;
	return !slurm_cluster_answered(d->cluster, j->check_look) || (j->watch && slurm_watch_settling(j->watch));
}

static void slurm_destroy(struct deployment *d)
{
	struct job_state *j = J(d);

	j->submit = slurm_op_free(j->submit);
	j->cancel = slurm_op_free(j->cancel);
	j->watch = slurm_watch_free(j->watch);
	/* a job that may still run is not left behind */
	if (d->job_id && !j->ended && d->cluster)
		(void)slurm_cancel_now(d->cluster, &d->job_id, 1);
	if (j->address_file)
		(void)unlink(j->address_file);
	free(j->job_file);
	free(j->address_file);
	free(j->script);
}

/* The method's table, kept to a few lines. */
/* clang-format off */
const struct deploy_ops deploy_slurm_ops = {
	.name = "slurm", .state_size = sizeof(struct job_state), .teardown_usec = slurm_teardown_usec,
	.start = slurm_start, .terminate = slurm_terminate, .gone = slurm_gone, .destroy = slurm_destroy,
	.find_address = slurm_find_address, .queued = true, .check_soon = slurm_check_soon,
	.verdict_usec = slurm_verdict_usec, .verdict_pending = slurm_verdict_pending,
	.no_address_text = "the job's launcher (goodput job-exec on the node) wrote no address file",
};
/* clang-format on */
