/* dialect.h — the engines goodput-sim can pass for.
 *
 * `goodput-sim --dialect vllm|llamacpp|sglang|tgi|trtllm` (vLLM by default)
 * emulates that engine's surface, so that each shipped engine profile can
 * run goodput-sim where the real engine would run: its command-line flags
 * (dialect-args.c), what /health answers while it loads, the names and
 * shapes of its /metrics (server-metrics*.c), its start-up and
 * out-of-memory log lines, its --version output and its streaming quirks
 * (dialect-text.c, dialect-errors.c, dialect-engines.c). Invoked under an engine's program name (a symlink
 * called llama-server, vllm, text-generation-launcher or trtllm-serve; or
 * python3 running `-m sglang.launch_server`), it takes that engine's dialect.
 *
 * What each dialect does, with the engine's source it was read from, is in
 * sim/README.md. The performance model is the same for every dialect; only
 * the engine's rules for memory (perfmodel.h, enum sim_memory_rules) and its
 * surface change. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"

enum sim_dialect {
	SIM_DIALECT_VLLM,
	SIM_DIALECT_LLAMACPP,
	SIM_DIALECT_SGLANG,
	SIM_DIALECT_TGI,
	SIM_DIALECT_TRTLLM,
	_SIM_DIALECT_MAX,
};

/* "vllm", "llamacpp", "sglang", "tgi", "trtllm". */
const char *sim_dialect_to_string(enum sim_dialect d);
int sim_dialect_from_string(const char *s, enum sim_dialect *ret);

/* The versions goodput-sim reports in each dialect (the engine releases its
 * behaviour follows). */
#define SIM_VLLM_VERSION    "0.10.1.1"
#define SIM_LLAMACPP_BUILD  4748
#define SIM_LLAMACPP_COMMIT "c392e5094"
#define SIM_SGLANG_VERSION  "0.4.6.post1"
#define SIM_TGI_VERSION     "3.3.4"
#define SIM_TRTLLM_VERSION  "1.0.0"

/* A worker's part in disaggregated serving, as its KV connector says. */
enum sim_pd_role {
	SIM_PD_NONE,    /* no connector: kv_transfer_params are not acted on */
	SIM_PD_BOTH,    /* vLLM's kv_both (its NixlConnector does not tell roles apart): each request says */
	SIM_PD_PREFILL, /* vLLM kv_producer, SGLang --disaggregation-mode prefill */
	SIM_PD_DECODE,  /* vLLM kv_consumer, SGLang --disaggregation-mode decode */
};

/* What a dialect's flags set besides the engine config and the server's own
 * settings: the engine-specific switches the server acts on. */
struct sim_dialect_options {
	enum sim_dialect dialect;
	bool explicit_dialect;     /* chosen by --dialect or the program name (--version answers as the engine) */
	bool metrics_enabled;      /* llama.cpp --metrics, SGLang --enable-metrics; always for the others */
	bool tokens_histogram;     /* SGLang --collect-tokens-histogram: prompt/generation length histograms */
	bool iter_perf_stats;      /* TensorRT-LLM: enable_iter_perf_stats (its /metrics JSON) */
	bool perf_metrics;         /* TensorRT-LLM: return_perf_metrics (/prometheus/metrics) */
	uint32_t max_concurrent;   /* TGI --max-concurrent-requests: more in flight get 429 (0 = no limit) */
	uint32_t max_input_tokens; /* TGI: longest prompt accepted */
	uint32_t slots;            /* llama.cpp --parallel */
	const char *model_arg;     /* the model as given (a GGUF path, an HF id), for log lines */
	/* disaggregated serving (vLLM --kv-transfer-config, SGLang --disaggregation-*) */
	enum sim_pd_role pd_role;
	char kv_connector[48];   /* vLLM's kv_connector, SGLang's transfer backend */
	uint16_t bootstrap_port; /* SGLang --disaggregation-bootstrap-port (8998) */
	/* llama.cpp's own: what /props and the start-up log tell */
	struct {
		int32_t gpu_layers; /* --n-gpu-layers; -1: not given (b4748 offloads nothing then) */
		int32_t threads;    /* --threads; -1: the physical cores */
		int32_t threads_batch;
		uint32_t batch, ubatch; /* -b (the step's token budget), -ub (as llama.cpp clamps it to -b) */
		bool flash_attn, no_cont_batching;
		bool unknown_build; /* as built without git: build 0, commit "unknown" */
	} llamacpp;
};

/* The build llama.cpp says it is: "4748 (c392e5094)", or built without
 * git (GOODPUT_SIM_LLAMACPP_NO_GIT=1, a source tarball) "0 (unknown)". */
int sim_llamacpp_build(const struct sim_dialect_options *opt);
const char *sim_llamacpp_commit(const struct sim_dialect_options *opt);

void sim_dialect_options_init(struct sim_dialect_options *o);

/* ---- dialect-args.c: the command line ---- */

struct sim_server_config;

/* Parses goodput-sim's command line: the dialect (--dialect, else the
 * program name), the dialect's own flags for the engine's knobs, and the
 * sim's own flags (--gpu, --gpus, --load-time, --gpu-ledger, faults, ...),
 * which every dialect accepts. Returns 0 to serve, or 1 + the exit status
 * when the process is done (help, version, a usage error already printed
 * in the engine's style). */
int sim_args_parse(int argc, char **argv, struct sim_server_config *sc, struct sim_engine_config *ec,
		   struct sim_dialect_options *opt);

/* ---- dialect-text.c: what the engine prints ---- */

/* The start-up phases as the server plays them out in real time: offsets
 * from the process start, each with the log lines the engine prints when
 * the phase ends. */
enum sim_phase {
	SIM_PHASE_DEVICES, /* processes up, GPUs initialised (half the init time) */
	SIM_PHASE_WEIGHTS, /* weights loaded */
	SIM_PHASE_PROFILE, /* compiled, memory profiled, KV cache allocated (the other half) */
	SIM_PHASE_GRAPHS,  /* CUDA graphs captured: ready */
	_SIM_PHASE_MAX,
};

struct sim_timeline {
	uint64_t end_usec[_SIM_PHASE_MAX]; /* from the process start */
	double seconds[_SIM_PHASE_MAX];    /* each phase's own duration */
};

/* Splits a start-up of total_usec into phases: the start-up model's own
 * (ph) when it is on, else §4.5's proportions (process, weights of
 * weights_bytes per GPU, compile and profile, graphs). */
void sim_timeline_build(const struct sim_engine_config *ec, const struct sim_startup_phases *ph, double weights_bytes,
			uint64_t total_usec, struct sim_timeline *ret);

/* Writes the lines the engine prints when phase ends to f; url is where it
 * serves ("http://127.0.0.1:8000"). */
void sim_dialect_print_phase(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
			     const struct sim_engine_info *info, const struct sim_timeline *tl, enum sim_phase phase,
			     const char *url);

/* The phase whose end a start-up failure shows at (config errors: at once). */
enum sim_phase sim_dialect_failure_phase(const struct sim_startup_check *check);

/* Writes the engine's own words for a start-up that fails (the check's
 * cause; msg is the core's vLLM wording, used for refused arguments). */
void sim_dialect_print_failure(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
			       const struct sim_startup_check *check, const char *msg);

/* The engine's words for a GPU another process holds; `GPU n busy` is in it. */
void sim_dialect_print_gpu_busy(FILE *f, const struct sim_dialect_options *opt, unsigned gpu, long holder_pid);

/* `--version` as the engine answers it (to stdout or stderr, as it does). */
void sim_dialect_print_version(const struct sim_dialect_options *opt);

/* Which stream the engine logs to. */
FILE *sim_dialect_log_stream(const struct sim_dialect_options *opt);

/* An error body in the engine's format for an HTTP status ("type" is
 * OpenAI's error type for the dialects that use OpenAI's shape). A new
 * string the caller frees; NULL when out of memory. */
char *sim_dialect_error_json(const struct sim_dialect_options *opt, unsigned status, const char *type,
			     const char *message);

/* The message for a prompt (+ max_tokens) over the context, in the engine's
 * words, into buf; returns the HTTP status the engine answers with. */
unsigned sim_dialect_context_error(const struct sim_dialect_options *opt, uint32_t max_model_len, uint32_t n_prompt,
				   uint64_t max_tokens, bool prompt_alone, char *buf, size_t size);
