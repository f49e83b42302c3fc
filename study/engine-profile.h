/* engine-profile.h — engine profiles: how a configuration becomes the argv of
 * an inference server (configs/engines/NAME.json; data, not code).
 *
 * A profile holds:
 *   "name", "description", "sources" (where the facts below come from)
 *   "argv": the program and its fixed arguments, with placeholders {model},
 *           {served_model}, {host}, {port}, {gpu_type}, {gpu_count} and
 *           {KNOB} for any knob the profile maps (substituted inside strings);
 *   "knobs": { KNOB: { "flag": "--x" | ["--x", "--y"], "values": {VALUE:
 *              "flag value" | true | null}, "checkpoint_required": [quantization, ...] } }:
 *           each knob value appends `flag value` (two argv entries) for each
 *           of its flags; a value mapped to true passes the flags alone (a switch:
 *           "--flash-attn"); a value mapped to null omits the flags. A knob whose
 *           values all map to null needs no flag (a quantization that only
 *           selects a checkpoint), nor does a knob a derived flag names. Knobs other than the four canonical ones
 *           become extra knobs a study may search;
 *   "derived": [ { "flag": "--ctx-size", "product": ["max_num_seqs", "max_model_len"] } ]:
 *           flags whose value is computed, here the product of knob values
 *           (names) and constants (numbers) — llama.cpp's total context is the
 *           per-slot context times --parallel. Omitted when a named knob has
 *           no value in the configuration;
 *   "gpu_args": fixed arguments after argv's, only when the study has GPUs
 *           (gpu.type is not "cpu"): llama.cpp's ["--n-gpu-layers", "999"];
 *   "env": { NAME: "value with placeholders" }, "gpu_env": "CUDA_VISIBLE_DEVICES"
 *           (set to the trial's GPUs, by default 0..tensor_parallel−1);
 *   "port": { "mode": "free" (the deployer picks a free port) | "announce"
 *           (the server gets {port} = 0 and prints "announce_prefix HOST:PORT") };
 *   "health": { "path": "/health", "interval": seconds, "ready": [200],
 *           "loading": [503] }: the statuses that mean ready, and those that
 *           mean "still loading" (llama.cpp answers 503 while it loads; the
 *           others refuse connections until they are ready); any other answer
 *           is unhealthy;
 *   "startup_timeout", "stop_timeout": seconds;
 *   "oom_patterns": log substrings that mean out of memory;
 *   "failure_patterns": [ { "cause": "weights" | "kv_cache" | "cache_blocks" |
 *           "oom" | "gpu_busy", "pattern": "ERE", "after": "ERE", "before":
 *           "ERE" } ]: why a start-up failed, from the log (engine_profile_
 *           classify_failure); "after"/"before" scope a pattern to a phase;
 *           a kv_cache pattern's first group is the engine's suggested
 *           max_model_len;
 *   "startup_log": [ { "phase": "weights", "pattern": "ERE" } ]: the lines that
 *           mark start-up phases, their first group the phase's seconds;
 *   "version_unknown": ERE matching a version that names no release (a
 *           build without git: llama.cpp's "0 (unknown)"): the binary's
 *           size and build time are added to it;
 *   "version_command": argv; "version_pattern": ERE whose first group (or
 *           whole match) on the first matching line of the output is the
 *           version (default: the last non-empty line);
 *   "metrics": { "path": "/metrics", "format": "prometheus" |
 *           "trtllm_iteration_json", "series": { SERIES: "name" | ["name",
 *           ...] } }: where the engine's own metrics are and which of them are
 *           the probe's series (probes/prom-map.h);
 *   "help_command": argv printing every flag (default: argv[0] --help), read
 *           by `goodput check-engine`;
 *   "resources": { "cpus": N, "memory_gib": X }: what one server needs
 *           besides its GPUs, asked of a cluster scheduler with each trial's
 *           job (Slurm's --cpus-per-task and --mem);
 *   "roles": how the engine serves disaggregated (engine-profile-roles.c):
 *           { "prefill": { "args": [...], "env": {...} }, "decode": {...},
 *             "router": { "argv": [...], "env", "port", "health",
 *             "startup_timeout" } }: each worker is the engine's command for
 *           its side's knobs plus its role's args and env ({aux_port}: a
 *           second free port of its own, for a KV side channel or a
 *           bootstrap server); the router's argv holds groups (nested
 *           arrays) repeated for each worker ({prefill_url}, {prefill_host},
 *           {prefill_port}, {prefill_aux_port}; {decode_...} likewise).
 *
 * Rendering also refuses a tensor_parallel that does not divide the host's
 * GPU count.
 *
 * Errors name the file and the key: "vllm.json: knobs.quantization.values.fp9:
 * unknown quantization". */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <regex.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "prom-map.h"
#include "study.h"

#define ENGINE_PROFILE_MAX_BYTES (256 * 1024)
#define ENGINE_MAX_KNOBS         16
#define ENGINE_MAX_ARGS          256
#define ENGINE_MAX_KNOB_FLAGS    4
#define ENGINE_MAX_DERIVED       8
#define ENGINE_MAX_PRODUCT       8
#define ENGINE_MAX_HEALTH_STATUS 8
#define ENGINE_MAX_PATTERNS      32

enum engine_port_mode {
	ENGINE_PORT_FREE,     /* the deployer finds a free port and passes it */
	ENGINE_PORT_ANNOUNCE, /* the server binds port 0 and prints where it listens */
};

struct engine_knob {
	const char *name; /* canonical or extra knob name */
	const char *flag; /* "--max-num-seqs": the first of flags, or NULL (values only) */
	const char *flags[ENGINE_MAX_KNOB_FLAGS];
	size_t n_flags;
	const cJSON *values;          /* value → flag value (string) or null (no flag); NULL = as is */
	unsigned checkpoint_required; /* quantization knob: bit 1 << enum study_quant */
	bool needs_flag;              /* no flag of its own: only a derived flag may use it */
};

/* A flag whose value is the product of knob values and constants. */
struct engine_derived {
	const char *flag;
	const cJSON *product; /* array of knob names (strings) and numbers */
};

/* Why a server failed to start, as its log tells. */
enum engine_failure_cause {
	ENGINE_FAILURE_NONE,
	ENGINE_FAILURE_WEIGHTS,      /* the weights do not fit */
	ENGINE_FAILURE_KV_CACHE,     /* the KV cache for max_model_len does not fit */
	ENGINE_FAILURE_CACHE_BLOCKS, /* no memory left for cache blocks or activations */
	ENGINE_FAILURE_OOM,          /* out of memory, the log does not say what for */
	ENGINE_FAILURE_GPU_BUSY,     /* a GPU is held by another process: the host is busy */
	_ENGINE_FAILURE_MAX,
};

/* "none", "weights", "kv_cache", "cache_blocks", "oom", "gpu_busy" (NULL-terminated). */
extern const char *const engine_failure_cause_names[];
const char *engine_failure_cause_to_string(enum engine_failure_cause c);

/* A regular expression of a profile, compiled (POSIX ERE, one line at a time). */
struct engine_regex {
	const char *text; /* into the profile's JSON; NULL when absent */
	regex_t re;
};

struct engine_failure_pattern {
	enum engine_failure_cause cause;
	struct engine_regex pattern, after, before;
};

struct engine_startup_line {
	const char *phase; /* "weights", "graphs", "ready", ... */
	struct engine_regex pattern;
};

enum engine_health_state {
	ENGINE_HEALTH_READY,
	ENGINE_HEALTH_LOADING,
	ENGINE_HEALTH_UNHEALTHY,
};

struct engine_profile {
	cJSON *json; /* owned; strings below point into it */
	char *path;  /* where it was loaded from */
	const char *name, *description;
	const char **sources; /* NULL-terminated (array owned) or NULL */
	const char **argv;    /* template, NULL-terminated (array owned) */
	size_t n_argv;
	const char **gpu_args; /* after argv, only with GPUs (NULL-terminated, array owned) or NULL */
	struct engine_knob knobs[ENGINE_MAX_KNOBS];
	size_t n_knobs;
	struct engine_derived derived[ENGINE_MAX_DERIVED];
	size_t n_derived;
	const char **extra_knobs; /* non-canonical knob names, NULL-terminated (array owned) */
	const cJSON *env;         /* object or NULL */
	const char *gpu_env;      /* or NULL */
	enum engine_port_mode port_mode;
	const char *announce_prefix;
	const char *health_path;
	uint64_t health_interval_usec;
	const cJSON *health_ready, *health_loading; /* arrays of statuses, or NULL (ready: [200]) */
	uint64_t startup_timeout_usec, stop_timeout_usec;
	const char **oom_patterns; /* NULL-terminated (array owned) */
	struct engine_failure_pattern failure_patterns[ENGINE_MAX_PATTERNS];
	size_t n_failure_patterns;
	struct engine_startup_line startup_log[ENGINE_MAX_PATTERNS];
	size_t n_startup_log;
	const char **version_command; /* NULL-terminated (array owned) or NULL */
	struct engine_regex version_pattern;
	struct engine_regex version_unknown;
	const char *metrics_path;         /* or NULL */
	struct probe_metrics_map metrics; /* names of the probe's series (empty: the default map) */
	const char **help_command;        /* NULL-terminated (array owned) or NULL */
	uint32_t job_cpus;                /* resources.cpus (default 1) */
	double job_memory_gib;            /* resources.memory_gib (0: the scheduler's default) */
	/* disaggregated serving ("roles"; present false: the engine has none) */
	struct {
		bool present;
		char *knob_names; /* the study knobs roles add (extra_knobs points into it; owned) */
		const cJSON *prefill_args, *decode_args; /* arrays of strings, or NULL */
		const cJSON *prefill_env, *decode_env;   /* objects, or NULL */
		const cJSON *router_argv;                /* strings and groups (arrays of strings) */
		const cJSON *router_env;                 /* object, or NULL */
		enum engine_port_mode router_port_mode;
		const char *router_announce_prefix;
		const char *router_health_path;
		uint64_t router_health_interval_usec, router_startup_timeout_usec;
	} roles;
	/* goodput-sim as installed with this goodput (owned): the commands
	 * above that name it point here; NULL: left to $PATH */
	char *own_program;
	/* what the engine does when a knob is not given (engine-profile-defaults.c) */
	struct {
		const cJSON *knobs;        /* {"max_num_seqs": 256, ...} or NULL */
		double large_min_gib;      /* GPUs with this much memory or more take large_knobs */
		const char **large_except; /* ... except these GPU types (array owned) or NULL */
		const cJSON *large_knobs;  /* or NULL */
		const cJSON *limits;       /* {"max_num_seqs": [1, 4096], ...} or NULL */
	} defaults;
};

/* The knob values the engine uses when it is not given them, on a GPU of
 * this type and memory (GiB; 0: unknown, the small-GPU defaults):
 * {"max_num_seqs": 256, ...}, empty when the profile says nothing. The
 * caller owns *ret. */
int engine_profile_default_knobs(const struct engine_profile *p, const char *gpu_type, double gpu_memory_gib,
				 cJSON **ret);
/* The engine's defaults (engine_profile_default_knobs) of the knobs that
 * `knobs` does not set, as the flags they would be passed with: "--ubatch-size
 * 512 --cont-batching (flash_attn off: no flag)"; "" when there are none.
 * -ENOBUFS when it does not fit (buf holds what did). */
int engine_profile_defaults_text(const struct engine_profile *p, const cJSON *defaults, const cJSON *knobs, char *buf,
				 size_t size);
/* How far a knob may go ("defaults.limits"); -ENOENT when the profile does
 * not say. */
int engine_profile_knob_limits(const struct engine_profile *p, const char *knob, double *ret_min, double *ret_max);

/* Why a start-up failed, from the log text: the first failure pattern (in
 * profile order) that matches, else ENGINE_FAILURE_OOM when an oom_patterns
 * substring occurs, else ENGINE_FAILURE_NONE. *ret_suggested_len is the
 * engine's suggested max_model_len (a kv_cache pattern's first group), 0
 * when it printed none. Pure: no I/O. */
void engine_profile_classify_failure(const struct engine_profile *p, const char *log_text,
				     enum engine_failure_cause *ret_cause, uint64_t *ret_suggested_len);

/* The engine's version from its version command's output: the first group
 * (or the whole match) of version_pattern on the first line it matches, or
 * without a pattern the last non-empty line. Returns 1 with the version in
 * buf, 0 when the output holds none. */
int engine_profile_parse_version(const struct engine_profile *p, const char *output, char *buf, size_t size);
/* Whether a parsed version names no release (version_unknown matches it, or
 * it is empty): the caller identifies the binary instead. */
bool engine_profile_version_unknown(const struct engine_profile *p, const char *version);

/* What a health answer means: ready, still loading, or unhealthy. */
enum engine_health_state engine_profile_health_state(const struct engine_profile *p, long http_status);

/* The start-up phases a log shows, in log order: cb(phase, seconds) for each
 * startup_log line found (seconds: its first group, NAN without one). */
typedef void (*engine_startup_phase_fn)(const char *phase, double seconds, void *userdata);
void engine_profile_startup_phases(const struct engine_profile *p, const char *log_text, engine_startup_phase_fn cb,
				   void *userdata);

/* Every distinct flag a profile can put on a command line (fixed arguments
 * of argv that start with '-' — past a Python interpreter's "-m MODULE" —,
 * knob flags, derived flags), in profile order, NULL-terminated. The array is owned by the caller (free()); the strings
 * point into the profile. */
int engine_profile_flags(const struct engine_profile *p, const char ***ret);

/* Parses and validates a profile; `what` names it in errors (a file name). */
int engine_profile_from_json(const cJSON *j, const char *what, struct engine_profile **ret, struct error *err);
int engine_profile_load_file(const char *path, struct engine_profile **ret, struct error *err);
/* The operator's profiles, searched before the installed ones. */
#define ENGINE_PROFILE_SYSCONF_DIR "/etc/goodput/engines"

/* Finds NAME.json in engines_dir (when not NULL), $GOODPUT_ENGINES_DIR
 * (when set), /etc/goodput/engines and GOODPUT_DATADIR/engines (the
 * installed profiles), in that order, and loads the first. A name
 * containing '/' is a path. -ENOENT names the places searched. */
int engine_profile_find(const char *name, const char *engines_dir, struct engine_profile **ret, struct error *err);
/* The table a profile is parsed with (goodput-engine(5) is written from it). */
struct json_field;
const struct json_field *engine_profile_fields(void);

struct engine_profile *engine_profile_free(struct engine_profile *p);
static inline void engine_profile_freep(struct engine_profile **p)
{
	if (*p)
		*p = engine_profile_free(*p);
}

/* What a rendered configuration needs besides the knobs. */
struct engine_render_params {
	const char *model;        /* checkpoint to load */
	const char *served_model; /* name clients send; NULL = model */
	const char *host;
	uint16_t port; /* 0 with ENGINE_PORT_ANNOUNCE */
	const char *gpu_type;
	unsigned gpu_count;
	/* the study has no GPUs (gpu.type "cpu"): no gpu_args, no gpu_env */
	bool cpu;
	/* the GPUs the server may use (host indices, as many as the knobs' DP × TP
	 * × PP): what gpu_env says; NULL: 0..DP×TP×PP−1 */
	const unsigned *devices;
	unsigned n_devices;
	/* the program instead of the profile's argv[0]; NULL: the profile's */
	const char *binary;
	/* appended verbatim after every flag the profile renders (NULL-terminated); NULL: none */
	const char *const *extra_args;
	/* A job on a cluster: {port} becomes this text (filled in by the job's
	 * launcher once it has picked a port on its node) instead of the number,
	 * and gpu_env is left out (the scheduler sets it). NULL: a local server. */
	const char *port_text;
	/* speculative decoding: {draft_model}, the drafter of the knobs' spec_method
	 * (NULL: none named), and {spec_acceptance}, the workload's acceptance of
	 * its drafts as goodput-sim reads it (NULL: ""); filled in from the study */
	const char *draft_model;
	const char *spec_acceptance;
};

/* What {port} renders as in a job's command (deploy-slurm-job.c fills it in). */
#define ENGINE_PORT_PLACEHOLDER "@GOODPUT_PORT@"
/* ... and a worker's {aux_port} (a second free port on its node). */
#define ENGINE_AUX_PORT_PLACEHOLDER "@GOODPUT_AUX_PORT@"

/* A server's command line and extra environment ("NAME=value"), both
 * NULL-terminated and owned (engine_command_free). */
struct engine_command {
	char **argv;
	char **env;
};

void engine_command_done(struct engine_command *c);

/* Renders argv and env for knob values ({"max_num_seqs": 64, "quantization":
 * "fp8", ...}: numbers or strings). Knobs the profile does not map and
 * values a "values" table does not list are errors naming the knob. */
int engine_profile_render(const struct engine_profile *p, const struct engine_render_params *params, const cJSON *knobs,
			  struct engine_command *ret, struct error *err);

/* Renders for a study: the checkpoint of the knobs' quantization (refusing a
 * quantization the profile needs a checkpoint for when the study names none),
 * the study's model name as served name, its GPU type and count, its
 * engine_binary and engine_args. */
int engine_profile_render_study(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, struct engine_command *ret, struct error *err);
/* As engine_profile_render_study, for a trial that runs on the given GPUs
 * (host indices, one per tensor-parallel rank). */
int engine_profile_render_trial(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, const unsigned *devices, unsigned n_devices,
				struct engine_command *ret, struct error *err);

/* As engine_profile_render_study, for a job on a cluster: {port} is
 * ENGINE_PORT_PLACEHOLDER and gpu_env is left to the scheduler. */
int engine_profile_render_job(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
			      const char *host, struct engine_command *ret, struct error *err);

/* ---- disaggregated serving (engine-profile-roles.c) ---- */

enum engine_role {
	ENGINE_ROLE_PREFILL,
	ENGINE_ROLE_DECODE,
	ENGINE_ROLE_ROUTER,
	_ENGINE_ROLE_MAX,
};

/* "prefill", "decode", "router". */
const char *engine_role_to_string(enum engine_role r);

/* A disaggregated configuration's shape: opt_knobs_pd_shape (cost.h). */

/* The profile's knob a study's knob sets: itself, or a side's knob's
 * engine knob (prefill_max_num_seqs: max_num_seqs); NULL for the shape's own
 * (shape, prefill_workers, decode_workers), which no flag renders. */
const char *engine_role_knob_base(const char *name);

/* One worker's knobs: the configuration's knobs that apply to every
 * server (quantization, kv_cache_dtype, ...) and its side's (prefill_X
 * becomes X), without the shape's own. The caller owns *ret. */
int engine_role_knobs(const cJSON *knobs, enum engine_role role, cJSON **ret);

/* A worker's command: the engine's command for its knobs (as
 * engine_profile_render_trial, or a job's when port_text is set: see
 * engine_render_params) with its role's args and env; aux_port fills
 * {aux_port} (aux_text instead for a job). */
int engine_profile_render_worker(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				 enum engine_role role, const char *host, uint16_t port, uint16_t aux_port,
				 const unsigned *devices, unsigned n_devices, bool job, struct engine_command *ret,
				 struct error *err);

/* Where a worker serves, for the router's command. */
struct engine_worker_address {
	const char *host; /* numeric or a node's name */
	uint16_t port, aux_port;
};

/* The router's command for workers serving at the given addresses; port
 * 0 with the router's port mode "announce"; job: {port} is
 * ENGINE_PORT_PLACEHOLDER, for the job's launcher to fill in. */
int engine_profile_render_router(const struct engine_profile *p, const struct study *s, const char *host, uint16_t port,
				 bool job, const struct engine_worker_address *prefill, size_t n_prefill,
				 const struct engine_worker_address *decode, size_t n_decode,
				 struct engine_command *ret, struct error *err);

/* The commands of every role of a disaggregated configuration, one line
 * each ("prefill-0: CUDA_VISIBLE_DEVICES=0,1 vllm serve ..."), the workers
 * on GPUs 0.. in turn and on ports from port + 100, the router on port:
 * what an operator runs by hand. For people; never executed. */
int engine_profile_format_roles(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, char **ret, struct error *err);

/* A stored spec (its JSON text) as a study, the extra knobs of its engine's
 * profile (engine_profile_find) allowed; the profile to *ret_profile when
 * that is not NULL. Errors name what failed: the spec, the profile, a key. */
int engine_profile_load_study(const char *spec_json, const char *engine, const char *engines_dir,
			      struct engine_profile **ret_profile, struct study **ret, struct error *err);
/* Checks that a study can run on this profile: every knob of its search
 * space is mapped, every allowed quantization has a flag value, and each
 * quantization that needs a checkpoint has one. */
int engine_profile_check_study(const struct engine_profile *p, const struct study *s, struct error *err);

/* "NAME=value ... prog 'arg with space' ..." — for people (reports, logs),
 * shell-quoted; never executed. The caller frees it. */
char *engine_command_format(const struct engine_command *c);
/* The command as JSON {"argv": [...], "env": [...]} (what the store keeps
 * of each trial's launch), and back. -ENOMEM; -EINVAL for JSON that is not
 * such an object. */
int engine_command_to_json(const struct engine_command *c, char **ret);
int engine_command_from_json(const char *json, struct engine_command *ret);
