/* runner-preflight.h — the memory pre-flight: before a configuration is
 * deployed, whether it fits the GPUs, estimated from the model's facts with
 * goodput-sim's memory model (sim/PERFMODEL.md §4.3).
 *
 * Model facts come from the study's model.architecture (config.json's keys),
 * else the sim preset model.name names, else config.json in model.name
 * when it is a local folder; the GPU's memory from gpu.memory_gib, else the
 * preset gpu.type names. Without both the pre-flight says nothing
 * (OPT_FIT_UNKNOWN) and every configuration is deployed.
 *
 * Per GPU the estimate is weights (parameters × bytes of the quantization ÷
 * (TP × PP), and a speculative drafter's share: a draft model sim knows by
 * name, an EAGLE or MTP head of the model), the activation peak of the profiling forward at the configuration's
 * batch knobs, and the KV cache one max_model_len sequence needs, against
 * memory × gpu_memory_utilization: what vLLM checks at start-up. Each knob
 * the configuration lacks takes the engine's default (max_model_len: the
 * model's context; gpu_memory_utilization 0.9; vLLM's batch defaults for the
 * GPU). A configuration of more GPUs (DP × TP × PP) than one node has is
 * refused outright: each replica and stage needs GPUs of its own. A
 * disaggregated configuration is estimated per side (each worker its
 * side's TP and batch knobs) and takes the worse side's verdict. The verdict keeps a margin for what the model does not know about a
 * real engine: need ≤ budget fits; need above (1 + margin) × budget does
 * not; in between is near — not predicted to fit, checked by one deployment
 * per combination (optimizer/opt.h). Pure functions of the study: the
 * search's replay asks them again on every ask. Internal to runner/ (and the
 * optimizer benchmark, which plans as the runner does). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "opt.h"
#include "perfmodel.h"
#include "study.h"

/* A configuration predicted not to fit when it needs more than this much
 * above the budget; between the budget and this, "near". */
#define RUNNER_PREFLIGHT_MARGIN 0.08

struct runner_preflight {
	bool usable;       /* model facts and GPU memory known */
	char why_not[160]; /* when not usable: what is missing */
	char source[160];  /* where the model's facts come from ("preset llama-3.1-70b", ...) */
	const struct study *study;
	struct sim_model model;
	struct sim_gpu gpu;
	struct sim_profile profile;
	struct opt_preflight hook; /* for opt_settings.preflight: fit below, this as userdata */
};

/* One configuration's estimate, per GPU. */
struct runner_estimate {
	enum opt_fit fit;
	enum opt_oom_cause cause; /* what the engine would say when it does not start */
	bool refused;             /* the engine refuses the TP for this model (cause unknown) */
	double budget_gib;        /* memory × gpu_memory_utilization */
	double memory_gib;        /* the GPU's memory */
	double weights_gib, activations_gib;
	double kv_gib;          /* KV cache of one max_model_len sequence */
	double need_gib;        /* weights + activations + kv */
	uint32_t max_model_len; /* the context estimated for */
	uint64_t kv_tokens;     /* KV capacity left by the budget (0: none) */
	unsigned tp, dp, pp;
	unsigned gpus;            /* dp × tp × pp */
	bool too_many_gpus;       /* more than one node has: refused before any estimate */
	const char *spec_method;  /* "none", "ngram", ... */
	double draft_gib;         /* the drafter's weights per GPU (included in weights_gib) */
	bool drafter_known;       /* false: a draft model the estimate could not size (left out) */
	const char *quantization; /* "none", "fp8", ... */
	const char *role;         /* disaggregated: the side this estimate is of (the worse one's); else NULL */
};

/* Reads the study's model and GPU facts; never fails for their absence
 * (usable false, why_not says what is missing). Errors: model.architecture
 * that does not parse (err names the key), -ENOMEM. study must outlive p. */
int runner_preflight_init(struct runner_preflight *p, const struct study *study, struct error *err);

/* The estimate of configuration c of space (the study's, or a widened one). */
void runner_preflight_estimate(const struct runner_preflight *p, const struct opt_space *space,
			       const struct opt_config *c, struct runner_estimate *ret);

/* The estimate of knob values that need not lie on a grid ({"max_num_seqs":
 * 256, "quantization": "fp8", ...}; absent knobs at the engine's defaults). */
void runner_preflight_estimate_knobs(const struct runner_preflight *p, const cJSON *knobs, struct runner_estimate *ret);

/* opt_preflight's function: userdata is the struct runner_preflight. */
enum opt_fit runner_preflight_fit(const struct opt_space *space, const struct opt_config *c, void *userdata);

/* "weights 35.3 + activations 2.1 + KV for 131072 tokens 10.7 = 48.1 GiB per
 * GPU of 40.2 GiB (48 GB × 0.90)" into buf. */
void runner_estimate_format(const struct runner_estimate *e, char *buf, size_t size);
