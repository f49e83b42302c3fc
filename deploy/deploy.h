/* deploy.h — deployers: start the server under test, tell when it is ready
 * (or why it is not), and tear it down so that the next trial starts clean.
 *
 * One interface, several methods: `exec` (a child process in its own process
 * group, deploy-exec.c), `systemd` (a transient unit through sd-bus,
 * deploy-systemd.c), `command` (the operator's deploy/teardown/health
 * commands, deploy-command.c) and `slurm` (a job on a Slurm cluster,
 * deploy-slurm.c). Everything runs on the caller's sd-event loop and never
 * blocks it. Nothing is ever killed that the deployer did not start: a
 * process group it spawned, a unit it created, a job it submitted.
 *
 * Life of a deployment:
 *
 *  (PENDING) ──► STARTING ──/health answers 200──► READY ──deploy_stop()──► STOPPING ──► STOPPED
 *      │                                │
 *      ├─ exited: oom / crashed ────────┴─ exited while serving: crashed ──► FAILED
 *      └─ no answer in time: startup_timeout (the server is torn down) ─────► FAILED
 *
 * A job on a cluster is PENDING first — submitted, waiting for the
 * scheduler to grant its resources; this is not start-up time — and
 * STARTING once it runs: the start-up timeout and the deploy time count
 * from there.
 *
 * The callback reports READY, FAILED and STOPPED, each once, from a deferred
 * event source (so the callee may free the deployment inside it); a job also
 * reports PENDING once its id is known and STARTING when it starts running
 * (a later state may come in their place when both happen at once: read
 * the job's facts with the getters on every call). FAILED and STOPPED come
 * only after the whole process group has exited and its port no longer
 * accepts connections (or the stop timeout ran out, said in the message);
 * for a job, once Slurm says it ended. The port is not waited for until it
 * can be bound again (its connections linger in TIME_WAIT for a minute):
 * the next server takes a fresh port from the kernel. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "child.h"
#include "engine-profile.h"
#include "error.h"
#include "study.h"

enum deploy_state {
	DEPLOY_STARTING,
	DEPLOY_READY,
	DEPLOY_STOPPING,
	DEPLOY_STOPPED,
	DEPLOY_FAILED,
	DEPLOY_PENDING, /* a job submitted, waiting for its resources */
};

enum deploy_failure {
	DEPLOY_FAILURE_NONE,
	DEPLOY_FAILURE_OOM,             /* exited, and the log matched an out-of-memory pattern */
	DEPLOY_FAILURE_CRASHED,         /* exited (before or after READY) */
	DEPLOY_FAILURE_STARTUP_TIMEOUT, /* health never answered 200 in time */
	DEPLOY_FAILURE_HOST_BUSY,       /* exited: its GPUs are held by another process ("GPU n busy",
	                                 * CUDA's "busy or unavailable"): not the configuration's fault */
	DEPLOY_FAILURE_SETUP,           /* could not run at all, the same for every configuration: the program,
	                                 * a hook or a program they run missing or not executable, the model
	                                 * path missing or unreadable, the log not writable, the service
	                                 * manager refusing the unit, a port the profile fixes held by
	                                 * another process */
	DEPLOY_FAILURE_LOST,            /* the cluster ended the job (preempted, its node failed, cancelled
	                                 * outside goodput): not the configuration's fault, redo it */
	DEPLOY_FAILURE_TIME_LIMIT,      /* the job reached its time limit (deploy.time_limit) */
	DEPLOY_FAILURE_SUBMIT,          /* the scheduler refused the job (sbatch failed) */
	DEPLOY_FAILURE_UNREACHABLE,     /* the scheduler did not take the job because it could not be reached
	                                 * (its controller down, restarting or overloaded): nothing was
	                                 * submitted, not the configuration's fault, try again later */
};

const char *deploy_state_to_string(enum deploy_state s);
const char *deploy_failure_to_string(enum deploy_failure f);

/* The server of a deployment as the caller records it before it runs
 * (deploy_config.record): a process group (exec; command: the deploy
 * command's) with its leader's identity, or a systemd unit. */
struct deploy_server {
	int64_t pgid;      /* 0: none */
	char identity[96]; /* deploy_process_identity of the group's leader; "" with no group */
	const char *unit;  /* NULL: none */
};

/* Records the server before anything of it runs (a negative errno with err
 * set fails the start: nothing ran). */
typedef int (*deploy_record_fn)(const struct deploy_server *server, void *userdata, struct error *err);

struct deploy_config {
	const struct engine_command *command; /* argv + extra env; copied */
	const char *log_path;                 /* server stdout+stderr (appended) */
	const char *host;                     /* numeric address the server listens on; NULL = 127.0.0.1 */
	uint16_t port;                        /* 0: learn it from the announce line */
	uint16_t aux_port;                    /* a second port the command names ({aux_port}); 0: none */
	const char *announce_prefix;          /* "goodput-sim: listening on http://" (port 0 only) */
	const char *health_path;              /* "/health" */
	uint64_t health_interval_usec;        /* 0: 1 s */
	uint64_t startup_timeout_usec;        /* 0: 10 min */
	uint64_t stop_timeout_usec;           /* SIGTERM → SIGKILL; 0: 30 s */
	const char *const *oom_patterns;      /* NULL-terminated; may be NULL */
	/* The engine's profile: what its health answers mean and why it failed
	 * (failure_patterns). Borrowed, must outlive the deployment; may be NULL
	 * (ready = 200, out of memory = an oom_patterns substring). */
	const struct engine_profile *profile;

	/* command: the operator's hooks (argv arrays, NULL-terminated). The
	 * deploy command gets the engine argv appended and must print
	 * "GOODPUT_BASE_URL=URL" on a line of its output; health may be NULL
	 * (then GET URL + health_path must answer 200). */
	const char *const *deploy_command, *const *teardown_command, *const *health_command;
	uint64_t command_timeout_usec; /* teardown / one health command; 0: 120 s */
	const char *const *hook_env;   /* "NAME=value" for the hooks (deploy_hook_env); may be NULL */

	/* systemd: the unit to create ("goodput-STUDY-TRIAL.service", deploy_unit_name)
	 * and which service manager (the user's or the system's). */
	const char *unit_name;
	bool user_bus;

	/* The checkpoint the server loads when it is a path (it starts with
	 * '/'; anything else is a model id): for servers on this host (exec,
	 * systemd) it must be there and readable, else the start fails at once
	 * (a setup failure) naming model_key ("model.checkpoints.awq"). May be NULL. */
	const char *model_path, *model_key;
	/* slurm: the cluster (borrowed, must outlive the deployment), the job's
	 * name and comment (how a resumed study finds it), what it asks for
	 * (GPUs, CPUs, memory in MiB, 0: the cluster's default), where and for
	 * how long (NULL / 0: the cluster's defaults) and the operator's own
	 * sbatch options (NULL-terminated; may be NULL). The job's files (its
	 * argv, the address it reports) go beside log_path, which must be on a
	 * file system the nodes share; the batch script runs `goodput job-exec`
	 * on the node (deploy_job_exec). */
	struct slurm_cluster *cluster;
	const char *job_name, *job_comment;
	unsigned job_gpus, job_cpus;
	uint64_t job_memory_mib;
	bool job_exclusive; /* the node to itself (sbatch --exclusive) */
	const char *partition, *account;
	uint64_t time_limit_usec;
	const char *const *sbatch_args;

	/* Called once, synchronously inside deploy_start, when the server's
	 * process group exists but has run nothing yet (exec, command: the
	 * processes wait for it under a keeper, child.h), or before the unit is
	 * asked for (systemd): what the caller records there is what a
	 * restarted goodput ends (deploy_end_orphan, deploy_stop_orphan_unit).
	 * A job (slurm) is found by its name. May be NULL. Every process the
	 * exec and command methods start ends with the caller, however it
	 * dies: a server never outlives the goodput that started it. */
	deploy_record_fn record;
	void *record_userdata;
};

/* The environment the command method's hooks receive: GOODPUT_KNOB_<NAME>=v
 * for every knob (name upper-cased), GOODPUT_PORT, GOODPUT_HOST,
 * GOODPUT_TRIAL_ID, GOODPUT_STUDY, GOODPUT_MODEL (each when known).
 * NULL-terminated, owned by the caller (free each, then the array). */
int deploy_hook_env(const cJSON *knobs, const char *study, int64_t trial_id, const char *model, const char *host,
		    uint16_t port, char ***ret);
void deploy_strv_free(char **v);
/* "goodput-<study>-<trial>.service"; characters a unit name cannot hold
 * become '_'. */
int deploy_unit_name(const char *study, int64_t trial_id, char *buf, size_t size);

/* Fills a config from an engine profile and a rendered command; the study
 * may override the start-up and stop timeouts (0 = the profile's). */
void deploy_config_from_profile(struct deploy_config *cfg, const struct engine_profile *p,
				const struct engine_command *cmd, const char *log_path, const char *host, uint16_t port,
				uint64_t startup_timeout_usec, uint64_t stop_timeout_usec);

struct deployment;

typedef void (*deploy_event_fn)(struct deployment *d, enum deploy_state state, void *userdata);

/* Starts a server. Fails at once (with err) when the method is not available,
 * the log cannot be opened, the program (or the command method's deploy
 * hook) cannot be executed or the model path is missing: a failure of class
 * DEPLOY_FAILURE_SETUP, since nothing there depends on the configuration.
 * Everything later is reported through cb. The caller's signal mask gets
 * SIGCHLD blocked (sd-event needs it); children start with an empty mask. */
int deploy_start(sd_event *e, enum study_deploy_method method, const struct deploy_config *cfg, deploy_event_fn cb,
		 void *userdata, struct deployment **ret, struct error *err);

/* ---- a deployment of several servers (deploy-roles.c) ----
 *
 * A disaggregated configuration is prefill and decode workers and the
 * engine's router in front, started and stopped as one unit by any method
 * (each role a server of its own: its process group, unit or job, its log,
 * its health check, recorded with its own record hook before it runs). The
 * workers start side by side; once every one is READY the router's
 * command is made from where they serve and the router starts. The unit is
 * READY when the router is, and serves at its address; it FAILS as soon as
 * any role does, with the role's failure class, cause and message, named
 * ("decode-0: exited with status 1 during start-up ..."), and the other
 * roles are torn down. A job method's unit is PENDING until every worker's
 * job runs. */

/* Where a worker serves, for the router's command. */
struct deploy_worker_address {
	const char *role;     /* "prefill-0" */
	bool prefill;         /* a prefill worker, else a decode worker */
	char host[256];       /* as its base URL names it (a node's name or address) */
	uint16_t port;        /* from its base URL */
	uint16_t aux_port;    /* deploy_get_aux_port */
	const char *base_url; /* "http://host:port" */
};

/* Fills *ret with the router's config for workers serving at addrs (every
 * worker, prefill ones first); what it points to must stay valid until the
 * next call or until the deployment is freed. A negative errno with err
 * set fails the unit (a setup failure). */
typedef int (*deploy_router_fn)(void *userdata, const struct deploy_worker_address *addrs, size_t n,
				struct deploy_config *ret, struct error *err);

struct deploy_role {
	const char *name; /* "prefill-0", "decode-1": names it in messages and records */
	bool prefill;
	struct deploy_config config;
};

struct deploy_roles_config {
	const struct deploy_role *workers; /* copied by deploy_start_roles */
	size_t n_workers;
	deploy_router_fn router;
	void *router_userdata;
	const char *router_name;       /* "router" */
	uint64_t startup_timeout_usec; /* the unit's, from its start (or its jobs' start) to READY; 0: 20 min */
	uint64_t health_interval_usec; /* how often the unit looks at its roles while starting; 0: 1 s */
};

/* Starts the workers of a unit of several servers; the router follows.
 * Fails at once, as deploy_start does, when a worker cannot be started
 * (err names it); the workers already started are then ended. */
int deploy_start_roles(sd_event *e, enum study_deploy_method method, const struct deploy_roles_config *cfg,
		       deploy_event_fn cb, void *userdata, struct deployment **ret, struct error *err);

/* Begins teardown (SIGTERM to the group, SIGKILL after the grace period);
 * STOPPED follows. -EALREADY when it is stopping or finished already. */
int deploy_stop(struct deployment *d);

/* Frees the deployment. A server still running is killed (SIGKILL to its
 * process group) and its leader reaped: call deploy_stop() and wait for
 * STOPPED for a graceful end. Accepts NULL. */
struct deployment *deploy_free(struct deployment *d);

enum deploy_state deploy_get_state(const struct deployment *d);
enum deploy_failure deploy_get_failure(const struct deployment *d);
/* Why it failed, with the last lines of the log; "" otherwise. */
const char *deploy_get_message(const struct deployment *d);
/* Why a server that ended did so, from its log and its profile's
 * failure_patterns: the cause (ENGINE_FAILURE_NONE when the log does not
 * say) and the engine's suggested max_model_len (0 when none). Set with the
 * FAILED state of a server that ended by itself. */
void deploy_get_failure_cause(const struct deployment *d, enum engine_failure_cause *ret_cause,
			      uint64_t *ret_suggested_len);
/* "http://127.0.0.1:PORT" once known, else NULL. */
const char *deploy_get_base_url(const struct deployment *d);
uint16_t deploy_get_port(const struct deployment *d);
/* The second port of the server's own (the config's, or the one its job's launcher picked); 0: none. */
uint16_t deploy_get_aux_port(const struct deployment *d);
/* The server's process group (record it: a restarted runner kills orphans with
 * it); exec and command (the deploy command's group). 0 for systemd. */
int64_t deploy_get_pgid(const struct deployment *d);
/* The systemd unit (record it as the trial's server_unit), else NULL. */
const char *deploy_get_unit(const struct deployment *d);
/* Seconds from start to READY (NAN before): for a job, from when it began
 * to run. */
double deploy_get_startup_seconds(const struct deployment *d);

/* A job: its id (0 until sbatch answered), the seconds it waited for its
 * resources (NAN while it waits or when it never did), where it runs and the
 * GPUs it got there ("0,1"; "" until known). */
uint64_t deploy_get_job_id(const struct deployment *d);
double deploy_get_pending_seconds(const struct deployment *d);
const char *deploy_get_node(const struct deployment *d);
const char *deploy_get_gpus(const struct deployment *d);
/* Why the job waits, as the scheduler says ("Resources", "Priority"); "". */
const char *deploy_get_pending_reason(const struct deployment *d);
/* Looks at the job's state soon: a server that stopped answering may be a
 * job the cluster ended. Nothing for other methods. How long until a
 * verdict can be expected: deploy_verdict_usec; whether it is still to
 * come after that (a loaded scheduler slow to answer, or a verdict told
 * once the server is torn down): deploy_verdict_pending. */
void deploy_check_soon(struct deployment *d);
uint64_t deploy_verdict_usec(const struct deployment *d);
bool deploy_verdict_pending(const struct deployment *d);

/* The job's launcher on a node (`goodput job-exec FILE`): reads the argv,
 * environment and listen address the deployer wrote into FILE, picks a free
 * port there, puts it into the argv and environment where the command has
 * ENGINE_PORT_PLACEHOLDER, writes the address the coordinating host reaches
 * it at (with the node's name and the GPUs Slurm gave the job) to the
 * address file, and executes the engine in its place. Returns only on
 * failure (err says why). */
int deploy_job_exec(const char *path, struct error *err);

/* A port on host that is free right now: the kernel's choice for a bind to
 * port 0, which never is one that still holds connections (TIME_WAIT), for
 * profiles whose servers take a --port. */
int deploy_pick_free_port(const char *host, uint16_t *ret, struct error *err);
/* Whether something accepts TCP connections on host:port right now (a
 * connect that never waits: refused is false; no answer yet is true). */
bool deploy_port_accepts(const char *host, uint16_t port);

/* The identity of process pid for deploy_end_orphan: "BOOT_ID:START_TICKS"
 * (the boot's id and the process's start time in clock ticks since boot, as
 * /proc says). -ESRCH when there is no such process. */
int deploy_process_identity(pid_t pid, char *buf, size_t size);
/* SIGKILL to a process group left over from an earlier run, by its recorded
 * pgid and its leader's identity: only when that group is still the one
 * recorded — its leader is the same process (same boot, same start time),
 * or the leader is gone and the group lives on, which the kernel allows
 * only for the group it was (a pid is not given again while a group of
 * that id exists). A NULL identity (recorded by an older goodput) is
 * trusted as it was then. Returns 1 when one was there, 0 when not; never
 * our own group or 1. */
int deploy_end_orphan(int64_t pgid, const char *identity);
/* Runs the command method's teardown command for a trial an earlier run left
 * deployed (goodput ended before it tore it down): argv with hook_env
 * (deploy_hook_env; GOODPUT_PORT may be missing) on top of goodput's
 * environment, under a keeper, its output appended to log_path after a
 * line that says why, ended after timeout_usec. cb is called once it
 * exited (c may be freed there). What the deploy command started outside
 * its own process group (a container, a pod) only this can end. */
int deploy_teardown_orphan(sd_event *e, char *const *argv, char *const *hook_env, const char *log_path,
			   uint64_t timeout_usec, child_exit_fn cb, void *userdata, struct child **ret,
			   struct error *err);
/* Stops a unit left over from an earlier run (by its recorded name) on the
 * system or user bus and waits until it has stopped (at most 15 s), so that
 * a trial redone at once can start a unit of that name: blocking, for
 * start-up only. Only names starting with "goodput-" are touched. Returns 1
 * when it was loaded, 0 when not. */
int deploy_stop_orphan_unit(const char *unit, bool user_bus);

/* The last max_lines lines of a file from offset on (at most 64 KiB are
 * read). The caller frees *ret. */
int deploy_log_tail(const char *path, uint64_t offset, unsigned max_lines, char **ret);
