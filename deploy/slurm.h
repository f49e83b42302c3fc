/* slurm.h — a Slurm cluster as goodput sees it: through Slurm's stable
 * client interfaces only — `sbatch --parsable` to submit a job, `squeue
 * --json` (and `sacct --json` for a job the queue forgot) for job states,
 * `sinfo --json` for the GPUs of a partition, `scancel` to end jobs. No
 * human-formatted output is ever read, and no node is ever chosen or
 * touched here: Slurm decides where, goodput decides what.
 *
 * One cluster object per study run (the runner's): it spawns the commands
 * on the caller's sd-event loop (common/child.h, never a shell) and reads
 * the queue once per poll interval for every job watched — squeue of
 * Slurm 22.05 prints every job whatever its filters, so one call serves
 * them all, and at most one runs at a time.
 *
 *   slurm_cluster_new(e, &opts, &c, &err)     fails at once when sbatch (or
 *                                             squeue, scancel) is not in PATH
 *   slurm_submit(c, args, cb, ...)            sbatch --parsable ARGS: the job id
 *   slurm_watch_new(c, id, cb, ...)           cb on each change of the job's state
 *   slurm_cancel(c, ids, n, cb, ...)          scancel IDS
 *   slurm_list(c, cb, ...)                    the user's jobs (resume: orphans)
 *   slurm_partition_gpus(c, p, cb, ...)       GPUs of the partition's nodes
 *
 * Callbacks come from the loop, once per operation; freeing an operation
 * (slurm_op_free) before its callback drops the callback and kills the
 * command; after it, the handle is gone (slurm_op_free inside the callback
 * does nothing). Callbacks must not free the cluster. The JSON readers are
 * pure functions, for tests. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "error.h"
#include "macro.h"

/* A job's state, as goodput acts on it. */
enum slurm_state {
	SLURM_STATE_UNKNOWN,       /* not seen yet */
	SLURM_STATE_PENDING,       /* waiting for resources (PENDING, CONFIGURING, REQUEUED, SUSPENDED...) */
	SLURM_STATE_RUNNING,       /* RUNNING */
	SLURM_STATE_COMPLETING,    /* ended, its processes being cleaned up: the final state follows */
	SLURM_STATE_COMPLETED,     /* the batch script exited 0 */
	SLURM_STATE_FAILED,        /* ... non-zero */
	SLURM_STATE_CANCELLED,     /* scancel (by goodput, or by someone else) */
	SLURM_STATE_TIMEOUT,       /* its time limit passed */
	SLURM_STATE_OUT_OF_MEMORY, /* over its --mem */
	SLURM_STATE_NODE_FAIL,     /* its node failed */
	SLURM_STATE_PREEMPTED,     /* a job of higher priority took its resources */
	SLURM_STATE_BOOT_FAIL,     /* its node did not boot */
	SLURM_STATE_DEADLINE,      /* its deadline passed */
	SLURM_STATE_GONE,          /* neither the queue nor accounting knows it any longer */
	_SLURM_STATE_MAX,
};

/* "pending", "running", ... (goodput's names, lower case). */
const char *slurm_state_to_string(enum slurm_state s);
/* Slurm's name ("NODE_FAIL", "CANCELLED by 0" reads as CANCELLED); UNKNOWN
 * for a name goodput does not know. */
enum slurm_state slurm_state_from_name(const char *name);
/* Over for good: the job holds nothing any longer. */
bool slurm_state_is_final(enum slurm_state s);

struct slurm_job {
	uint64_t id;
	enum slurm_state state;
	char state_name[32]; /* as Slurm said it: "PENDING", "NODE_FAIL" */
	char reason[64];     /* why it is pending: "Resources", "Priority" ("None" otherwise) */
	char name[128];
	char comment[256];
	char nodes[256];                  /* where it runs ("" while pending) */
	int64_t user_id;                  /* -1: not said */
	int exit_code;                    /* the batch script's exit status; -1: not known */
	int exit_signal;                  /* the signal that ended it; 0: none */
	uint64_t submit_time, start_time; /* Unix seconds; 0: not (yet) known */
};

/* The jobs of `squeue --json` or `sacct --json` output (both formats of
 * Slurm 22.05 to 24.x: job_state a string or a list, numbers plain or
 * {"number": N}). Jobs without an id are skipped. The caller frees *ret. */
int slurm_parse_jobs(const char *json, size_t len, struct slurm_job **ret, size_t *ret_n, struct error *err);
/* The GPUs of `sinfo --json`'s nodes (their gres "gpu:8", "gpu:h100:8(S:0-1)")
 * in partition (NULL: every node): the sum, the number of nodes with GPUs
 * and the most on one node. */
int slurm_parse_gpus(const char *json, size_t len, const char *partition, unsigned *ret_gpus, unsigned *ret_nodes,
		     unsigned *ret_per_node, struct error *err);

struct slurm_options {
	/* The commands (a name looked up in PATH, or a path); NULL: sbatch,
	 * squeue, scancel, sacct, sinfo. */
	const char *sbatch, *squeue, *scancel, *sacct, *sinfo;
	uint64_t poll_interval_usec;   /* 0: 2 s */
	uint64_t command_timeout_usec; /* one command; 0: 60 s */
};

struct slurm_cluster;
struct slurm_op;
struct slurm_watch;

/* Checks that sbatch, squeue and scancel can be run (-ENOENT with a
 * message naming the missing one) and makes the object; nothing is spawned
 * yet. The commands inherit the caller's environment (SLURM_CONF included)
 * without what systemd hands to a service's main process alone. */
int slurm_cluster_new(sd_event *e, const struct slurm_options *o, struct slurm_cluster **ret, struct error *err);
/* Kills the commands still running; callbacks are dropped. Jobs are left as
 * they are. Accepts NULL. */
struct slurm_cluster *slurm_cluster_free(struct slurm_cluster *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct slurm_cluster *, slurm_cluster_free)

/* Drops an operation's callback and kills its command. Accepts NULL. */
struct slurm_op *slurm_op_free(struct slurm_op *op);

/* sbatch --parsable ARGS (options, the script and its arguments). cb gets
 * the job id, or r < 0 and a message (sbatch's last lines). */
typedef void (*slurm_submit_fn)(struct slurm_cluster *c, int r, uint64_t job_id, const char *message, void *userdata);
int slurm_submit(struct slurm_cluster *c, char *const *args, slurm_submit_fn cb, void *userdata, struct slurm_op **ret,
		 struct error *err);

/* scancel IDS. cb (may be NULL) when it has exited. */
typedef void (*slurm_done_fn)(struct slurm_cluster *c, int r, const char *message, void *userdata);
int slurm_cancel(struct slurm_cluster *c, const uint64_t *ids, size_t n, slurm_done_fn cb, void *userdata,
		 struct slurm_op **ret, struct error *err);
/* scancel IDS on a loop of its own, waiting for it (at most the command
 * timeout): for a deployment freed while its job may still run. */
int slurm_cancel_now(struct slurm_cluster *c, const uint64_t *ids, size_t n);

/* The jobs of the calling user (squeue --json --me, filtered here). */
typedef void (*slurm_list_fn)(struct slurm_cluster *c, int r, const struct slurm_job *jobs, size_t n,
			      const char *message, void *userdata);
int slurm_list(struct slurm_cluster *c, slurm_list_fn cb, void *userdata, struct slurm_op **ret, struct error *err);

/* The GPUs of a partition's nodes (sinfo --json; NULL: every node). */
typedef void (*slurm_gpus_fn)(struct slurm_cluster *c, int r, unsigned gpus, unsigned nodes, unsigned per_node,
			      const char *message, void *userdata);
int slurm_partition_gpus(struct slurm_cluster *c, const char *partition, slurm_gpus_fn cb, void *userdata,
			 struct slurm_op **ret, struct error *err);

/* Watches a job: cb whenever its state, reason or nodes change (the first
 * time once it is seen), GONE when neither squeue nor sacct knows it any
 * longer; after a final state nothing more is said. */
typedef void (*slurm_watch_fn)(struct slurm_watch *w, const struct slurm_job *job, void *userdata);
int slurm_watch_new(struct slurm_cluster *c, uint64_t job_id, slurm_watch_fn cb, void *userdata,
		    struct slurm_watch **ret);
struct slurm_watch *slurm_watch_free(struct slurm_watch *w);
/* The job as last seen (state UNKNOWN before the first poll saw it). */
const struct slurm_job *slurm_watch_job(const struct slurm_watch *w);
/* Reads the queue soon (within ~50 ms) instead of at the next interval: a
 * server stopped answering, a job was just submitted. Returns the look
 * that starts after now: slurm_cluster_answered(c, look) once it has read
 * the queue (however long a loaded controller takes to answer). */
uint64_t slurm_cluster_poll_soon(struct slurm_cluster *c);
bool slurm_cluster_answered(const struct slurm_cluster *c, uint64_t look);
/* Whether the watch's job ended but its final state is still to come:
 * completing, or being looked up in accounting. */
bool slurm_watch_settling(const struct slurm_watch *w);
/* The poll interval. */
uint64_t slurm_cluster_poll_interval(const struct slurm_cluster *c);
