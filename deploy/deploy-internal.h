/* deploy-internal.h — what the deployment object and its start-up phase
 * (deploy.c, deploy-startup.c, deploy-util.c) share with each method
 * (deploy-exec.c, deploy-systemd.c, deploy-command.c).
 *
 * A method supplies only what varies between ways of running a server: how
 * it is started and torn down, how its end is seen, and — when the method
 * learns them its own way — where it listens and whether it is healthy. The
 * rest is written once in deploy-startup.c: the log's header and offset, the
 * poll that finds the address and checks health through the probe's HTTP
 * client, the start-up timeout, the classification of a server that ended
 * (crashed, out of memory) with the last lines of its log, and the wait
 * after a teardown until everything has ended and the port is closed. */
#pragma once

#include <sys/types.h>

#include "client.h"
#include "deploy.h"
#include "macro.h"

struct deploy_ops {
	const char *name;
	size_t state_size; /* of the method's own state, d->impl (zeroed, freed after destroy) */
	/* Starts the server (opening the log with deploy_log_open); fills
	 * d->pgid where there is a process group. */
	int (*start)(struct deployment *d, struct error *err);
	/* Learns where the server listens in the method's own way (sets it with
	 * deploy_set_base_url), called on each poll until it returns true; may
	 * fail the deployment (deploy_abort). NULL: the configured port, or the
	 * one the server's announce line names. */
	bool (*find_address)(struct deployment *d);
	/* Starts one health check of the method's own, which reports through
	 * deploy_health_done(). NULL: GET the health path through the probe's
	 * HTTP client. */
	int (*check_health)(struct deployment *d, struct error *err);
	/* Begins tearing down what the method started (called once). */
	void (*terminate)(struct deployment *d);
	/* Whether everything the method started has ended. */
	bool (*gone)(struct deployment *d);
	/* How long a teardown may take before the deployment reports anyway
	 * (NULL: the stop timeout). */
	uint64_t (*teardown_usec)(const struct deployment *d);
	/* Releases what the method's state holds, killing what still runs. */
	void (*destroy)(struct deployment *d);
	/* The server listens on this host: a teardown ends once its port no
	 * longer accepts connections. */
	bool wait_port_closed;
	/* start submits a job: the deployment is PENDING until the method calls
	 * deploy_job_running (the start-up phase begins there). */
	bool queued;
	/* A method that learns of its server's end by polling: look soon, and
	 * how long a verdict may take (NULL: at once). */
	void (*check_soon)(struct deployment *d);
	uint64_t (*verdict_usec)(const struct deployment *d);
	bool (*verdict_pending)(const struct deployment *d);
	/* For the start-up timeout's message: what was missing while the
	 * address was unknown ("the deploy command reported no GOODPUT_BASE_URL=
	 * line"; NULL: the server's announce line). */
	const char *no_address_text;
};

extern const struct deploy_ops deploy_exec_ops;
extern const struct deploy_ops deploy_command_ops;
extern const struct deploy_ops deploy_systemd_ops;
extern const struct deploy_ops deploy_slurm_ops;
extern const struct deploy_ops deploy_roles_ops, deploy_roles_job_ops;

struct deployment {
	const struct deploy_ops *ops;
	sd_event *event;
	deploy_event_fn cb;
	void *userdata;

	/* the config, copied */
	char **argv, **env;
	char *log_path, *host, *announce_prefix, *health_path;
	char **oom_patterns;
	const struct engine_profile *profile; /* borrowed; may be NULL */
	uint64_t health_interval_usec, startup_timeout_usec, stop_timeout_usec;
	char **deploy_command, **teardown_command, **health_command, **hook_env; /* command */
	uint64_t command_timeout_usec;
	char *unit_name; /* systemd */
	deploy_record_fn record;
	void *record_userdata;
	bool user_bus;
	struct slurm_cluster *cluster; /* slurm (borrowed) */
	char *job_name, *job_comment, *partition, *account;
	char **sbatch_args;
	unsigned job_gpus, job_cpus;
	uint64_t job_memory_mib, time_limit_usec;
	bool job_exclusive;

	enum deploy_state state;
	enum deploy_failure failure;
	enum engine_failure_cause cause; /* of a server that ended */
	uint64_t suggested_len;
	long last_health_status; /* 0: no answer yet */
	char *message;
	uint16_t port;
	uint16_t aux_port; /* a second port of the server's own (given, or its job's launcher picked it) */
	bool port_chosen;  /* the deployer chose the port (else the server's argv or its announce line has it) */
	char base_url[256];
	int64_t pgid;
	uint64_t start_usec, ready_usec; /* CLOCK_MONOTONIC */
	/* a job: when it was submitted (start_usec: when it began to run), its
	 * id, node, GPUs and why it waits */
	uint64_t submit_usec;
	bool job_ran;
	uint64_t job_id;
	char node[128], gpus[64], pending_reason[64];
	sd_event_source *notify_source; /* deferred callback */

	/* the start-up phase and the teardown wait (deploy-startup.c) */
	bool log_marked;      /* log_offset is set */
	uint64_t log_offset;  /* where this run's output starts in the log */
	uint64_t scan_offset; /* how far the log was scanned for the address */
	bool address_known, health_in_flight;
	struct probe_client *client; /* health GETs */
	sd_event_source *poll_source, *timeout_source, *reap_source;
	enum deploy_state final_state; /* after the teardown: STOPPED or FAILED */
	uint64_t reap_deadline_usec;

	void *impl; /* the method's own state */
};

/* ---- the start-up phase (deploy-startup.c) ---- */

/* Arms the poll and the start-up timeout once the method has started. */
int deploy_startup_begin(struct deployment *d, struct error *err);
/* One GET of the health path through the probe's HTTP client. */
int deploy_health_get(struct deployment *d, struct error *err);
/* A health check of the method's own has finished. */
void deploy_health_done(struct deployment *d, bool healthy);
/* The server ended by itself (how: "exited with status 1", "unit X failed"):
 * while starting or serving, the deployment fails — out of memory when its
 * log says so, crashed otherwise — and is torn down. */
void deploy_server_ended(struct deployment *d, const char *how);
/* The server, or the method's start of it, could not run at all — a
 * program missing or not executable (an exit status of 126 or 127), the
 * service manager refusing the unit: the same for every configuration.
 * While starting, the deployment fails (DEPLOY_FAILURE_SETUP) and is torn down. */
void deploy_cannot_run(struct deployment *d, const char *how);
/* Fails the deployment with a message and tears it down. */
void deploy_abort(struct deployment *d, enum deploy_failure f, const char *fmt, ...) _printf_(3, 4);
/* Tears down (ops->terminate) and reports final (STOPPED or FAILED) once
 * everything has ended and the port is free, or the time for it ran out. */
void deploy_teardown(struct deployment *d, enum deploy_state final);
/* Stops the start-up phase's timers and health checks. */
void deploy_startup_end(struct deployment *d);
/* A queued method's job began to run: the start-up phase (and its clock)
 * begins, STARTING is reported. */
int deploy_job_running(struct deployment *d);

/* Opens the log for appending and writes "==> goodput: <what>: <command>"
 * (nothing when what is NULL); the first call marks where this run's output
 * starts. Returns the descriptor (the caller closes it). */
int deploy_log_open(struct deployment *d, const char *what, char *const *argv, char *const *env, struct error *err);
/* The last lines of this run's output (NULL when it cannot be read). */
char *deploy_tail(struct deployment *d);

/* ---- the object (deploy.c) ---- */

/* A deployment of method ops with nothing configured yet: its state
 * (STARTING, or PENDING for a queued method) and its callback's source. */
int deploy_new(sd_event *e, const struct deploy_ops *ops, deploy_event_fn cb, void *userdata, struct deployment **ret,
	       struct error *err);

/* Hands the server to the caller's record hook before it runs: d->pgid's
 * group (with its leader's identity) and unit. A negative errno fails the
 * start (err set). */
int deploy_record(struct deployment *d, const char *unit, struct error *err);

/* Moves to state and schedules the callback (READY, STOPPED, FAILED). */
void deploy_set_state(struct deployment *d, enum deploy_state state);
/* Records a failure; the first one wins. The message is owned by d. */
void deploy_set_failure(struct deployment *d, enum deploy_failure f, const char *fmt, ...) _printf_(3, 4);
void deploy_set_failurev(struct deployment *d, enum deploy_failure f, const char *fmt, va_list ap) _printf_(3, 0);
/* Adds "; text" to the message. */
void deploy_append_message(struct deployment *d, const char *fmt, ...) _printf_(2, 3);

/* ---- a job's files (deploy-slurm-job.c) ---- */

/* The batch script every job runs: fixed text, nothing of the trial in it. */
const char *deploy_job_script_text(void);
/* Writes text to path through a temporary file and a rename. */
int deploy_write_file_atomic(const char *path, const char *text, mode_t mode, struct error *err);
/* The job file the launcher reads: the rendered argv and environment (with
 * ENGINE_PORT_PLACEHOLDER), the address to listen on, where to report and
 * how many of the job's GPUs the server uses (0: all). */
int deploy_job_file_write(const char *path, char *const *argv, char *const *env, const char *host,
			  const char *address_file, unsigned gpus, struct error *err);

/* ---- pieces (deploy-util.c) ---- */

/* Sets port and base URL. */
void deploy_set_port(struct deployment *d, const char *host, uint16_t port);
/* Sets the base URL (and port, when the URL names one) from a URL a hook reported. */
int deploy_set_base_url(struct deployment *d, const char *url);
/* Whether the log since offset contains one of the out-of-memory patterns. */
bool deploy_log_matches_oom(const struct deployment *d, uint64_t offset);
/* Whether the log from offset on says the server's GPUs are held by another
 * process: goodput-sim's "GPU n busy", CUDA's "CUDA-capable device(s) is/are
 * busy or unavailable" (exclusive compute mode). */
bool deploy_log_matches_busy(const struct deployment *d, uint64_t offset);
/* Whether the log from offset on says the server could not bind its port
 * because something else holds it ("Address already in use", llama.cpp's
 * "couldn't bind HTTP server socket"). */
bool deploy_log_matches_port_in_use(const struct deployment *d, uint64_t offset);
/* Why the server failed, from the log since offset with the profile's
 * failure patterns (without a profile: ENGINE_FAILURE_OOM when an
 * out-of-memory pattern matches, else none). */
void deploy_log_classify(const struct deployment *d, uint64_t offset, enum engine_failure_cause *ret_cause,
			 uint64_t *ret_suggested_len);
/* Calls match on each complete line of the log from d->scan_offset on,
 * advancing it, until match returns true (then returns true). */
bool deploy_log_scan(struct deployment *d, bool (*match)(struct deployment *d, char *line));
/* match for deploy_log_scan: "<announce_prefix>HOST:PORT" sets host, port and base URL. */
bool deploy_match_announce(struct deployment *d, char *line);
/* environ with each layer's NAME=value entries replacing same-named ones,
 * later layers winning. The strings are borrowed: free only the array. */
char **deploy_environment(char **const *layers, size_t n_layers);
char **deploy_strv_copy(char *const *v);
