/* runner-cluster.c — the runner's glue to a Slurm cluster (slurm.h), for
 * studies whose trials are jobs ("deploy": {"method": "slurm"}).
 *
 * On start the cluster's client commands are looked for: without sbatch,
 * squeue or scancel the study fails at once, saying which. Then, before
 * anything is planned, the queue is read and every job of this study still
 * in it is cancelled: the jobs of trials interrupted by a crash or a kill
 * -9 of goodput or goodputd. A job is the study's when its id is recorded
 * with one of its trials, or — submitted, but killed before sbatch's answer
 * was recorded — when its comment names this study of this store
 * ("goodput:STUDY:CREATED:SEQ", runner_job_comment). Such trials are redone
 * like any interrupted trial; no job is left behind. Then the partition's
 * GPUs are read (sinfo) and the study's slots (gpu.count) capped to them.
 *
 * The slots count the study's GPUs on the cluster; Slurm decides where each
 * job runs. A job waiting in the queue holds its trial's slots and its
 * wait counts against the wall time, never as a deployment; once the wall
 * time is spent its job is cancelled like every trial in flight (recorded
 * interrupted: a resume redoes it). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deploy.h"
#include "log.h"
#include "runner-internal.h"
#include "time-util.h"

bool runner_on_cluster(const struct runner *r)
{
	return r->study->deploy.method == STUDY_DEPLOY_SLURM && !r->opts.dry_run;
}

void runner_job_name(const struct runner_trial *t, char *buf, size_t size)
{
	snprintf(buf, size, "goodput-%s-%u", t->runner->row.name, t->seq);
}

/* "goodput:STUDY:CREATED:" — the study of this store (two stores may hold
 * studies of one name) */
static void comment_prefix(const struct runner *r, char *buf, size_t size)
{
	snprintf(buf, size, "goodput:%s:%" PRIu64 ":", r->row.name, r->row.created_usec);
}

void runner_job_comment(const struct runner_trial *t, char *buf, size_t size)
{
	char prefix[256];

	comment_prefix(t->runner, prefix, sizeof(prefix));
	snprintf(buf, size, "%s%u", prefix, t->seq);
}

/* ---- start: orphans, the partition ---- */

static void cluster_ready(struct runner *r)
{
	r->plan_waits_cluster = false;
	if (!runner_failing(r) && r->status.phase != RUNNER_FINISHED)
		runner_schedule(r, RUNNER_ACTION_PLAN);
}

static void on_partition(struct slurm_cluster *c, int k, unsigned gpus, unsigned nodes, unsigned per_node,
			 const char *message, void *userdata)
{
	struct runner *r = userdata;
	const char *part = r->study->deploy.partition;

	r->cluster_op = NULL;
	if (k < 0 || gpus == 0) {
		log_warning("study %s: the GPUs of %s%s are unknown (%s): the study counts on its gpu.count (%u)",
			    r->row.name, part ? "partition " : "the cluster", part ? part : "",
			    k < 0 ? message : "no node with GPUs", r->n_gpus);
		cluster_ready(r);
		return;
	}
	log_info("study %s: %s%s has %u GPUs on %u nodes (at most %u on one); the study holds up to %u at once",
		 r->row.name, part ? "partition " : "the cluster", part ? part : "", gpus, nodes, per_node,
		 MIN(r->n_gpus, gpus));
	if (gpus < r->n_gpus) {
		r->n_gpus = gpus;
		runner_status_count(r);
	}
	if (r->study->gpu.per_node > per_node)
		log_warning("study %s: gpu.per_node is %u, but no node has more than %u GPUs: larger jobs wait forever "
			    "or are refused",
			    r->row.name, r->study->gpu.per_node, per_node);
	cluster_ready(r);
}

static void read_partition(struct runner *r)
{
	struct error err = { 0 };

	if (slurm_partition_gpus(r->cluster, r->study->deploy.partition, on_partition, r, &r->cluster_op, &err) < 0) {
		log_warning("study %s: cannot read the partition's GPUs: %s", r->row.name, err.msg);
		cluster_ready(r);
	}
}

static void on_orphans_cancelled(struct slurm_cluster *c, int k, const char *message, void *userdata)
{
	struct runner *r = userdata;

	r->cluster_op = NULL;
	if (k < 0)
		log_warning("study %s: cancelling its jobs left from an earlier run: %s", r->row.name, message);
	read_partition(r);
}

/* Whether a job in the queue is one of this study's (see the top). */
static bool is_ours(const struct runner *r, const struct slurm_job *j, const struct store_trial *t, size_t n,
		    const char *prefix)
{
	if (strncmp(j->comment, prefix, strlen(prefix)) == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (t[i].job_id > 0 && (uint64_t)t[i].job_id == j->id)
			return true;
	return false;
}

static void on_queue(struct slurm_cluster *c, int k, const struct slurm_job *jobs, size_t n, const char *message,
		     void *userdata)
{
	struct runner *r = userdata;
	struct store_trial *t = NULL;
	struct error err = { 0 };
	uint64_t ids[64];
	char prefix[256], list[256] = "";
	size_t n_trials = 0, n_ids = 0, len = 0;

	r->cluster_op = NULL;
	if (k < 0) {
		char msg[ERROR_MSG_MAX];

		/* without the queue no job of an interrupted trial can be found: never submit blind */
		snprintf(msg, sizeof(msg), "cannot read the Slurm queue: %s", message);
		runner_fail(r, msg);
		return;
	}
	k = store_trial_history(r->store, r->study_id, &t, &n_trials, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	comment_prefix(r, prefix, sizeof(prefix));
	for (size_t i = 0; i < n && n_ids < ELEMENTSOF(ids); i++) {
		if (slurm_state_is_final(jobs[i].state) || !is_ours(r, &jobs[i], t, n_trials, prefix))
			continue;
		ids[n_ids++] = jobs[i].id;
		if (len < sizeof(list))
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%" PRIu64, n_ids > 1 ? " " : "",
						jobs[i].id);
	}
	store_trial_array_free(t, n_trials);
	if (n_ids == 0) {
		read_partition(r);
		return;
	}
	log_info("study %s: cancelling %zu job%s of interrupted trials left in the queue: %s", r->row.name, n_ids,
		 n_ids == 1 ? "" : "s", list);
	if (slurm_cancel(r->cluster, ids, n_ids, on_orphans_cancelled, r, &r->cluster_op, &err) < 0) {
		runner_fail(r, err.msg);
		return;
	}
}

int runner_cluster_start(struct runner *r, struct error *err)
{
	const struct slurm_options o = { .poll_interval_usec = r->study->deploy.poll_interval_usec };
	int k;

	if (!runner_on_cluster(r) || r->cluster)
		return 0;
	k = slurm_cluster_new(r->event, &o, &r->cluster, err);
	if (k < 0)
		return k;
	k = slurm_list(r->cluster, on_queue, r, &r->cluster_op, err);
	if (k < 0)
		return k;
	r->plan_waits_cluster = true;
	return 0;
}

void runner_cluster_free(struct runner *r)
{
	r->cluster_op = slurm_op_free(r->cluster_op);
	r->cluster = slurm_cluster_free(r->cluster);
}
