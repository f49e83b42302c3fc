/* engine-profile.h — engine profiles: how a configuration becomes the argv of
 * an inference server (configs/engines/NAME.json; data, not code).
 *
 * A profile holds:
 *   "name", "description"
 *   "argv": the program and its fixed arguments, with placeholders {model},
 *           {served_model}, {host}, {port}, {gpu_type}, {gpu_count} and
 *           {KNOB} for any knob the profile maps (substituted inside strings);
 *   "knobs": { KNOB: { "flag": "--x" | ["--x", "--y"], "values": {VALUE:
 *              "flag value" | null}, "checkpoint_required": [quantization, ...] } }:
 *           each knob value appends `flag value` (two argv entries) for each
 *           of its flags; a value mapped to null omits the flags. A knob whose
 *           values all map to null needs no flag (a quantization that only
 *           selects a checkpoint). Knobs other than the four canonical ones
 *           become extra knobs a study may search;
 *   "derived": [ { "flag": "--ctx-size", "product": ["max_num_seqs", 4096] } ]:
 *           flags whose value is computed, here the product of knob values
 *           (names) and constants (numbers) — llama.cpp's total context is the
 *           per-slot context times --parallel. Omitted when a named knob has
 *           no value in the configuration;
 *   "env": { NAME: "value with placeholders" }, "gpu_env": "CUDA_VISIBLE_DEVICES"
 *           (set to the trial's GPUs, by default 0..tensor_parallel−1);
 *   "port": { "mode": "free" (the deployer picks a free port) | "announce"
 *           (the server gets {port} = 0 and prints "announce_prefix HOST:PORT") };
 *   "health": { "path": "/health", "interval": seconds } (ready = HTTP 200);
 *   "startup_timeout", "stop_timeout": seconds;
 *   "oom_patterns": log substrings that mean out of memory;
 *   "version_command": argv; "metrics_path": Prometheus path;
 *   "help_command": argv printing every flag (default: argv[0] --help), read
 *           by `goodput check-engine`.
 *
 * Rendering also refuses a tensor_parallel that does not divide the host's
 * GPU count.
 *
 * Errors name the file and the key: "vllm.json: knobs.quantization.values.fp9:
 * unknown quantization". */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "study.h"

#define ENGINE_PROFILE_MAX_BYTES (256 * 1024)
#define ENGINE_MAX_KNOBS         16
#define ENGINE_MAX_ARGS          256
#define ENGINE_MAX_KNOB_FLAGS    4
#define ENGINE_MAX_DERIVED       8
#define ENGINE_MAX_PRODUCT       8

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
};

/* A flag whose value is the product of knob values and constants. */
struct engine_derived {
	const char *flag;
	const cJSON *product; /* array of knob names (strings) and numbers */
};

struct engine_profile {
	cJSON *json; /* owned; strings below point into it */
	char *path;  /* where it was loaded from */
	const char *name, *description;
	const char **argv; /* template, NULL-terminated (array owned) */
	size_t n_argv;
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
	uint64_t startup_timeout_usec, stop_timeout_usec;
	const char **oom_patterns;    /* NULL-terminated (array owned) */
	const char **version_command; /* NULL-terminated (array owned) or NULL */
	const char *metrics_path;     /* or NULL */
	const char **help_command;    /* NULL-terminated (array owned) or NULL */
};

/* Every distinct flag a profile can put on a command line (fixed arguments
 * of argv that start with '-', knob flags, derived flags), in profile order,
 * NULL-terminated. The array is owned by the caller (free()); the strings
 * point into the profile. */
int engine_profile_flags(const struct engine_profile *p, const char ***ret);

/* Parses and validates a profile; `what` names it in errors (a file name). */
int engine_profile_from_json(const cJSON *j, const char *what, struct engine_profile **ret, struct error *err);
int engine_profile_load_file(const char *path, struct engine_profile **ret, struct error *err);
/* Finds NAME.json in engines_dir (when not NULL), /etc/goodput/engines,
 * GOODPUT_DATADIR/engines and GOODPUT_SOURCE_ROOT/configs/engines, in that
 * order, and loads the first. A name containing '/' is a path. -ENOENT
 * names the places searched. */
int engine_profile_find(const char *name, const char *engines_dir, struct engine_profile **ret, struct error *err);

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
	/* the GPUs the server may use (host indices, as many as tensor_parallel):
	 * what gpu_env says; NULL: 0..tensor_parallel−1 */
	const unsigned *devices;
	unsigned n_devices;
};

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
 * the study's model name as served name, its GPU type and count. */
int engine_profile_render_study(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, struct engine_command *ret, struct error *err);
/* As engine_profile_render_study, for a trial that runs on the given GPUs
 * (host indices, one per tensor-parallel rank). */
int engine_profile_render_trial(const struct engine_profile *p, const struct study *s, const cJSON *knobs,
				const char *host, uint16_t port, const unsigned *devices, unsigned n_devices,
				struct engine_command *ret, struct error *err);

/* Checks that a study can run on this profile: every knob of its search
 * space is mapped, every allowed quantization has a flag value, and each
 * quantization that needs a checkpoint has one. */
int engine_profile_check_study(const struct engine_profile *p, const struct study *s, struct error *err);

/* "NAME=value ... prog 'arg with space' ..." — for people (reports, logs),
 * shell-quoted; never executed. The caller frees it. */
char *engine_command_format(const struct engine_command *c);
