/* dialect-internal.h — shared by the dialect-*.c files: the engines' log
 * line prefixes and the arguments' state between parsing and each engine's
 * defaults. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dialect.h"
#include "error.h"
#include "macro.h"

enum sim_stamp_format {
	STAMP_VLLM,   /* 08-20 10:00:00 */
	STAMP_SGLANG, /* 2025-12-23 14:18:00 */
	STAMP_TGI,    /* 2025-03-02T10:10:00.000000Z */
	STAMP_TRTLLM, /* 08/20/2025-10:00:00 */
};

/* The wall clock in the engine's log format, into buf. */
void sim_dialect_stamp(char *buf, size_t size, enum sim_stamp_format fmt);
/* vLLM: "(EngineCore_0 pid=123) INFO 08-20 10:00:00 [core.py:74] " + the line. */
void _printf_(5, 6) sim_vlog(FILE *f, const char *who, const char *level, const char *where, const char *fmt, ...);
/* SGLang: "[2025-12-23 14:18:00 TP0] " + the line. */
void _printf_(2, 3) sim_slog(FILE *f, const char *fmt, ...);
/* TGI: "2025-03-02T10:10:00.000000Z  INFO text_generation_launcher: " + the line. */
void _printf_(4, 5) sim_tlog(FILE *f, const char *level, const char *target, const char *fmt, ...);
/* TensorRT-LLM: "[08/20/2025-10:00:00] [TRT-LLM] [I] " + the line. */
void _printf_(3, 4) sim_rlog(FILE *f, const char *level, const char *fmt, ...);
/* "435,136" as vLLM prints token counts. */
const char *sim_dialect_grouped(uint64_t v, char *buf, size_t size);
/* The model as the engine was given it (a GGUF path, an HF id), else the preset. */
const char *sim_dialect_model_of(const struct sim_dialect_options *opt, const struct sim_engine_config *ec);
double sim_gib(double bytes);

/* Start-up time relative to PERFMODEL §4.5's estimate without the start-up
 * model: 0.005 turns an 8B model's ~1 min into ~0.3 s and a 70B model's ~2.5
 * min into ~0.75 s, so tests and demos start in under a second. */
#define SIM_DEFAULT_LOAD_TIME_SCALE 0.005

/* dialect-help.c: goodput-sim's --help (the vLLM dialect's). */
void sim_args_help(void);

/* What the dialect's switches collected, applied once every flag is read. */
struct sim_dialect_pending {
	const char *model;
	uint32_t parallel, batch, ubatch, ctx, gpu_layers;
	bool have_ctx;
	uint32_t max_total, max_input, prefill_tokens, max_batch;
	const char *extra_options;
	uint32_t spec_draft_tokens; /* SGLang's --speculative-num-draft-tokens */
	const char *draft_model;    /* llama.cpp's -md */
};

/* dialect-engines.c: the model as the engine is given it (llama.cpp: a GGUF
 * file whose tag is its quantization; the others: a checkpoint whose name
 * may say its quantization, unless --quantization did). */
int sim_dialect_set_model(enum sim_dialect d, const char *model, bool quant_explicit, struct sim_engine_config *ec,
			  struct error *err);
/* A draft model as the engine is given it (llama.cpp's -md GGUF file):
 * speculative decoding with it. */
int sim_dialect_set_draft_model(enum sim_dialect d, const char *model, struct sim_engine_config *ec, struct error *err);
/* Each engine's defaults and argument validation after parsing. Returns 0,
 * 1 + an exit status after printing the engine's refusal, or -errno with
 * err set. */
int sim_dialect_apply_defaults(enum sim_dialect d, struct sim_engine_config *ec, struct sim_dialect_options *opt,
			       const struct sim_dialect_pending *pd, bool gmu_set, struct error *err);
