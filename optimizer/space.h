/* space.h — the search space of a tuning study: knobs, their grids, the
 * constraints between them, and configurations (one grid point each).
 *
 * A study spec's "search_space" object names each knob once. A knob is either
 * an integer range on a grid or a list of values:
 *
 *   "search_space": {
 *     "max_num_seqs":           { "min": 8, "max": 512, "scale": "log2" },
 *     "max_num_batched_tokens": { "min": 512, "max": 16384, "scale": "log2" },
 *     "quantization":           ["none", "fp8", "awq"],
 *     "tensor_parallel":        [1, 2, 4],
 *     "gpu_memory_utilization": [0.85, 0.9, 0.95]
 *   },
 *   "constraints": ["max_num_batched_tokens >= max_num_seqs"]
 *
 * Range keys: "min", "max" (integers in [0, 2^31-1], min <= max), "scale"
 * ("log2" or "linear", default "linear"), "step" (linear only, default 1;
 * max - min must be a multiple of it). A log2 range holds min, 2·min, 4·min
 * ... and needs min >= 1 and max = min·2^k. Optional "categorical": true|false
 * overrides how the search treats the knob.
 * Lists: 1–64 distinct values, all numbers or all strings (strings of
 * [A-Za-z0-9_.+-]). String lists, quantization and tensor_parallel are
 * categorical (searched by the outer strategy, one combination at a time);
 * ranges and other numeric lists are ordinal (searched by NLopt on their
 * normalised grid index). A list may be written as {"values": [...],
 * "categorical": false} to make it ordinal (its values are sorted).
 *
 * Knob names: the canonical ones (max_num_seqs, max_num_batched_tokens,
 * quantization, tensor_parallel) plus the extra names the engine profile
 * declares (options->extra_knobs); anything else is "unknown knob". quantization
 * values are none|fp8|int8|awq; tensor_parallel values must divide the GPU count
 * (options->gpus, 0 = unchecked).
 *
 * Constraints (constraint.c): each item of "constraints" is a string or an
 * allowed-combinations object.
 *   - A comparison "LHS OP RHS" with OP one of >= <= > < == != and each side
 *     a numeric knob, a number, or "N * knob" ("max_num_batched_tokens >= 2 *
 *     max_num_seqs");
 *   - a value test "knob == value", "knob != value" or "knob in [v1, v2]"
 *     for any knob of at most 64 values, strings bare ("kv_cache_dtype ==
 *     fp8", "quantization in [fp8, awq]");
 *   - an implication "TEST => TEST" of two of the above: "kv_cache_dtype ==
 *     fp8 => quantization == fp8";
 *   - {"allowed": [{"quantization": "fp8", "tensor_parallel": [2, 4]}, ...]}:
 *     a configuration must match one entry on every knob the entry names (a
 *     value or a list of values).
 * When "constraints" is absent and both batch knobs exist,
 * "max_num_batched_tokens >= max_num_seqs" applies (vLLM refuses to start
 * otherwise); an explicit [] means none.
 *
 * Conditional knobs: a knob may hold "when": "TEST" (one test of the
 * constraint language, on another knob: "spec_method != none"); where the
 * test fails the knob is inactive — the configuration has no value for it
 * (opt_config_to_json leaves it out, so no flag is rendered) and its index
 * is held at 0, so each inactive combination is one configuration
 * (opt_space_allowed refuses the others, opt_space_snap makes them). The
 * speculative-decoding knobs spec_tokens and spec_draft_tp are active only
 * when spec_method != none without saying so (when the space has
 * spec_method).
 *
 * Disaggregated serving: with a "shape" knob (aggregated |
 * disaggregated), the knobs of one side ("prefill_..." and "decode_...":
 * prefill_workers, decode_tensor_parallel, prefill_max_num_batched_tokens)
 * are active only when shape == disaggregated, and those of one server
 * (tensor_parallel, data_parallel, pipeline_parallel, max_num_seqs,
 * max_num_batched_tokens) only when shape == aggregated, without saying so.
 * The workers and each side's TP are GPU knobs: a disaggregated
 * configuration holds P × TP_p + D × TP_d GPUs.
 *
 * GPUs: data_parallel and pipeline_parallel are categorical like
 * tensor_parallel, and with options->gpus a configuration may hold at most
 * that many GPUs, data_parallel × tensor_parallel × pipeline_parallel
 * (opt_config_gpus; opt_space_allowed refuses the others).
 *
 * Memory roles: the search rules configurations out after an out-of-memory
 * start-up by what each knob does to memory: the batch knobs and
 * max_model_len need more of it as they grow, gpu_memory_utilization gives
 * more of it, kv_cache_dtype changes only the KV cache; any other knob is
 * assumed to change everything.
 *
 * Knobs are kept in canonical order (the four canonical knobs, then extras by
 * name), whatever the JSON order, so the canonical key of a configuration —
 * "max_num_seqs=128,max_num_batched_tokens=2048,quantization=fp8,tensor_parallel=1"
 * — is stable: the store uses it to deduplicate trials. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"

#define OPT_KNOBS_MAX        16
#define OPT_KNOB_NAME_MAX    48
#define OPT_LIST_MAX         64
#define OPT_RANGE_VALUES_MAX 4096
#define OPT_CONSTRAINTS_MAX  16
#define OPT_ALLOWED_MAX      32 /* entries of one allowed-combinations list */
/* The grid may hold at most this many configurations (product of the knobs'
 * value counts, before constraints). */
#define OPT_SPACE_CONFIGS_MAX (UINT64_C(1) << 20)
/* Longest canonical key, NUL included. */
#define OPT_KEY_MAX (OPT_KNOBS_MAX * (OPT_KNOB_NAME_MAX + 32))

#define OPT_KNOB_MAX_NUM_SEQS           "max_num_seqs"
#define OPT_KNOB_MAX_NUM_BATCHED_TOKENS "max_num_batched_tokens"
#define OPT_KNOB_QUANTIZATION           "quantization"
#define OPT_KNOB_TENSOR_PARALLEL        "tensor_parallel"
#define OPT_KNOB_MAX_MODEL_LEN          "max_model_len"
#define OPT_KNOB_GPU_MEMORY_UTILIZATION "gpu_memory_utilization"
#define OPT_KNOB_KV_CACHE_DTYPE         "kv_cache_dtype"
/* the levers beyond batch and TP (engine profiles declare them) */
#define OPT_KNOB_DATA_PARALLEL     "data_parallel"     /* replicas behind one endpoint */
#define OPT_KNOB_PIPELINE_PARALLEL "pipeline_parallel" /* stages of layers */
#define OPT_KNOB_PREFIX_CACHING    "prefix_caching"    /* on | off */
#define OPT_KNOB_SPEC_METHOD       "spec_method"       /* none | ngram | draft_model | eagle | mtp */
#define OPT_KNOB_SPEC_TOKENS       "spec_tokens"       /* draft tokens per step */
#define OPT_KNOB_SPEC_DRAFT_TP     "spec_draft_tp"     /* the draft model's TP */
/* disaggregated serving (deploy.shape): the shape, and each side's workers
 * and TP; any other knob of a side is "prefill_" or "decode_" and the
 * engine's knob (prefill_max_num_batched_tokens) */
#define OPT_KNOB_SHAPE                   "shape" /* aggregated | disaggregated */
#define OPT_KNOB_PREFILL_WORKERS         "prefill_workers"
#define OPT_KNOB_DECODE_WORKERS          "decode_workers"
#define OPT_KNOB_PREFILL_TENSOR_PARALLEL "prefill_tensor_parallel"
#define OPT_KNOB_DECODE_TENSOR_PARALLEL  "decode_tensor_parallel"

enum opt_knob_kind {
	OPT_KNOB_RANGE,       /* integer range on a log2 or linear grid */
	OPT_KNOB_LIST_NUMBER, /* list of numbers (integers or not) */
	OPT_KNOB_LIST_STRING, /* list of strings */
};

enum opt_scale {
	OPT_SCALE_LINEAR,
	OPT_SCALE_LOG2,
};

/* What a knob does to the memory a server needs at start-up (by its name;
 * the directions hold only for ordinal knobs, whose values are sorted). */
enum opt_memory_role {
	OPT_MEMORY_ANY,      /* unknown: may change anything (kept equal by every rule) */
	OPT_MEMORY_BATCH,    /* max_num_seqs, max_num_batched_tokens: activations grow with it */
	OPT_MEMORY_CONTEXT,  /* max_model_len: the KV cache one sequence needs grows with it */
	OPT_MEMORY_FRACTION, /* gpu_memory_utilization: more of the GPU as it grows */
	OPT_MEMORY_KV_DTYPE, /* kv_cache_dtype: the KV cache's bytes per token only */
};

/* One knob: its values, index 0..n_values-1 (ascending for ranges and
 * ordinal lists; spec order for categorical lists). */
struct opt_knob {
	char name[OPT_KNOB_NAME_MAX];
	enum opt_knob_kind kind;
	bool categorical;
	/* Larger values need more memory at start-up (the batch knobs): an
	 * out-of-memory result at value v makes values >= v infeasible too. */
	bool memory_monotone;
	enum opt_memory_role memory; /* OPT_MEMORY_ANY for categorical knobs other than kv_cache_dtype */
	enum opt_scale scale;        /* ranges only */
	bool conditional;            /* "when": active only where `when` holds */
	char when_text[96];          /* as written */
	int64_t min, max, step;      /* ranges only */
	size_t n_values;
	double *numbers; /* RANGE and LIST_NUMBER: the value of each index */
	char **strings;  /* LIST_STRING: the value of each index */
};

struct opt_test;
/* A grid point: one value index per knob, in the space's knob order. Plain
 * data: copy and compare with memcmp (unused slots are zero). */
struct opt_config {
	uint16_t idx[OPT_KNOBS_MAX];
};

enum opt_cmp {
	OPT_CMP_GE,
	OPT_CMP_LE,
	OPT_CMP_GT,
	OPT_CMP_LT,
	OPT_CMP_EQ,
	OPT_CMP_NE,
};

/* One test of a constraint: a comparison, lhs_coef · knob[lhs_knob] (or
 * lhs_const when lhs_knob < 0) OP the same for rhs; or a value test, knob's
 * value index in the set `values` (bit i = index i). */
struct opt_test {
	bool is_set;
	int lhs_knob, rhs_knob;
	double lhs_coef, rhs_coef;
	double lhs_const, rhs_const;
	enum opt_cmp cmp;
	int knob;
	uint64_t values;
};

/* One entry of an allowed-combinations list: per knob the set of value
 * indices it allows (all ones for a knob the entry does not name). */
struct opt_allowed_entry {
	uint64_t values[OPT_KNOBS_MAX];
};

enum opt_constraint_kind {
	OPT_CONSTRAINT_TEST,    /* test */
	OPT_CONSTRAINT_IMPLIES, /* test => then */
	OPT_CONSTRAINT_ALLOWED, /* one of allowed[0..n_allowed) matches */
};

struct opt_constraint {
	enum opt_constraint_kind kind;
	struct opt_test test, then;
	struct opt_allowed_entry *allowed; /* owned */
	size_t n_allowed;
	char text[96]; /* as written (an allowed list: "allowed [N combinations]") */
};

struct opt_space {
	size_t n_knobs;
	struct opt_knob knobs[OPT_KNOBS_MAX];
	struct opt_test *when[OPT_KNOBS_MAX]; /* each conditional knob's test (owned), else NULL */
	size_t n_constraints;
	struct opt_constraint constraints[OPT_CONSTRAINTS_MAX];
	unsigned gpus;   /* as given in the options; 0 = unchecked */
	uint64_t n_grid; /* product of n_values (constraints not applied) */
};

struct opt_space_options {
	unsigned gpus;                  /* GPUs on the host (tensor_parallel must divide it); 0 = unchecked */
	const char *const *extra_knobs; /* NULL-terminated extra knob names an engine profile adds; may be NULL */
};

/* Parses a study's "search_space" object (at JSON path `path`, e.g.
 * "search_space") and its "constraints" array (may be NULL: absent, see
 * above; at `constraints_path`). Errors name the JSON path and value:
 * "search_space.max_num_seqs.scale: expected \"log2\" or \"linear\", got \"log\"".
 * The caller owns *ret (opt_space_free). */
int opt_space_from_json(const cJSON *search_space, const char *path, const cJSON *constraints,
			const char *constraints_path, const struct opt_space_options *options, struct opt_space **ret,
			struct error *err);

struct opt_space *opt_space_free(struct opt_space *space);
static inline void opt_space_freep(struct opt_space **p)
{
	if (*p)
		*p = opt_space_free(*p);
}

/* Knob index by name, or -ENOENT. */
int opt_space_knob_index(const struct opt_space *space, const char *name);

/* Whether knob k has a value in the configuration: it has no "when", or
 * its test holds. */
bool opt_knob_active(const struct opt_space *space, const struct opt_config *config, size_t k);
/* Whether the configuration meets every constraint, holds its inactive
 * knobs at their first value, and fits the GPUs (options->gpus). */
bool opt_space_allowed(const struct opt_space *space, const struct opt_config *config);
/* How far a configuration is from meeting the constraints: 0 when it does,
 * else at least 1 per broken constraint plus, for comparisons of positive
 * values, their distance in log2 units (NLopt's pull towards allowed ground). */
double opt_space_violation(const struct opt_space *space, const struct opt_config *config);

/* The canonical key "name=value,name=value,..." of a configuration into buf
 * (OPT_KEY_MAX bytes suffice). Returns -ENOBUFS when it does not fit. */
int opt_config_key(const struct opt_space *space, const struct opt_config *config, char *buf, size_t size);

/* Widens the range of `knob` in a "search_space" object by one log2 step:
 * its max doubled (upper) or its min halved; a linear range grows by as
 * many steps as it holds, on its step. Values stay on the grid they were
 * on, so every configuration of the old space is one of the new. The new
 * bound stays within [lower_limit, upper_limit] (the engine's limits);
 * -ERANGE when nothing is left to widen, -EINVAL when knob is not a range.
 * search_space is changed in place; *ret_min and *ret_max get the new range. */
int opt_space_widen_json(cJSON *search_space, const char *knob, bool upper, int64_t lower_limit, int64_t upper_limit,
			 int64_t *ret_min, int64_t *ret_max);
/* Sets the range of `knob` in a "search_space" object to [min, max] (a
 * stored widening replayed); -EINVAL when knob is not a range. */
int opt_space_set_range_json(cJSON *search_space, const char *knob, int64_t min, int64_t max);

/* Parses a canonical key back into a configuration: every knob exactly once,
 * in any order, with a value of its grid. */
int opt_config_from_key(const struct opt_space *space, const char *key, struct opt_config *ret, struct error *err);

/* A knob's value in a configuration: as a number (ranges and numeric lists;
 * -EINVAL for string knobs), or as text ("128", "0.9", "fp8"; never NULL for
 * a valid knob index; the string points into the space or into buf). */
int opt_config_number(const struct opt_space *space, const struct opt_config *config, const char *knob, double *ret);
const char *opt_config_text(const struct opt_space *space, const struct opt_config *config, size_t knob, char *buf,
			    size_t size);

/* The configuration as a JSON object {"max_num_seqs": 128, "quantization":
 * "fp8", ...}, its inactive knobs left out. The caller owns *ret. */
int opt_config_to_json(const struct opt_space *space, const struct opt_config *config, cJSON **ret);

/* Position of a configuration in the full grid (mixed radix, first knob most
 * significant) and back; allowed or not. */
uint64_t opt_config_ordinal(const struct opt_space *space, const struct opt_config *config);
void opt_config_from_ordinal(const struct opt_space *space, uint64_t ordinal, struct opt_config *ret);

/* Every allowed configuration, in ordinal order. *ret_configs is malloc'ed
 * (the caller frees it); *ret_n may be 0 when the constraints exclude all. */
int opt_space_enumerate(const struct opt_space *space, struct opt_config **ret_configs, size_t *ret_n);

/* Number of allowed configurations. */
uint64_t opt_space_count(const struct opt_space *space);

/* Snaps a normalised point (x[i] in [0, 1] per knob, clamped) to the grid:
 * idx = round(x · (n_values − 1)). For ranges on a log2 scale this is
 * snapping in log space. Inactive knobs go to their first value; the
 * constraints are not applied. */
void opt_space_snap(const struct opt_space *space, const double *x, struct opt_config *ret);

/* The normalised coordinate of a knob's value index (0 when it has one value). */
double opt_space_normalise(const struct opt_space *space, size_t knob, unsigned idx);
