/* dialect-args.c — goodput-sim's command line in each engine's dialect.
 *
 * Every dialect has a table of the engine's own flags (the ones the shipped
 * engine profiles pass, and the engine's common ones) and what each means
 * to the emulation: an engine setting, a server setting, a switch of the
 * dialect (struct sim_dialect_options), or a flag the emulation accepts and
 * has no use for (--threads, --trust-remote-code). The sim's own flags
 * (--gpu, --gpus, --load-time, --gpu-ledger, the start-up model, faults)
 * are accepted in every dialect; vLLM's engine flags are the vLLM dialect's
 * table. A flag a dialect does not know is refused in the engine's words
 * (argparse's "unrecognized arguments", clap's "unexpected argument",
 * click's "No such option"). After parsing, each engine's defaults apply:
 * llama.cpp's one slot and whole-context allocation, SGLang's static memory
 * fraction by TP, TGI's length limits and their validation, TensorRT-LLM's
 * batch limits and its options file. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "dialect-internal.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "server.h"
#include "time-util.h"

enum action {
	ACT_ENGINE, /* sim_engine_config_apply_flag(target, value) */
	ACT_SERVER, /* a server or sim flag: id */
	ACT_OPT,    /* a dialect switch: id */
	ACT_IGNORE, /* accepted, no effect on the emulation */
};

enum {
	S_HOST = 1,
	S_PORT,
	S_SERVED_NAME,
	S_LOAD_TIME,
	S_TRACE,
	S_MAX_CONNECTIONS,
	S_MAX_REQUEST_BYTES,
	S_MAX_BUFFERED_BYTES,
	S_IDLE_TIMEOUT,
	S_HEADER_TIMEOUT,
	S_BODY_TIMEOUT,
	S_FIXED_ITL,
	S_CRASH_AFTER,
	S_HANG_AFTER,
	S_FAIL_STARTUP,
	S_HTTP500,
	S_BAD_SSE,
	S_JITTER,
	S_STEP_OVERHEAD,
	S_GPU_LEDGER,
	S_DIALECT,
	S_VERBOSE,
	S_HELP,
	S_VERSION,
	/* dialect switches */
	O_MODEL,
	O_METRICS,
	O_PARALLEL,
	O_BATCH,
	O_UBATCH,
	O_CTX,
	O_MAX_CONCURRENT,
	O_MAX_INPUT,
	O_MAX_TOTAL,
	O_PREFILL_TOKENS,
	O_MAX_BATCH,
	O_EXTRA_OPTIONS,
	O_FAIL_FAST,
	O_NO_PREFIX_CACHE,
	O_BACKEND,
	O_TOKENS_HISTOGRAM,
	O_GPU_LAYERS,
	O_THREADS,
	O_THREADS_BATCH,
	O_FLASH_ATTN,
	O_NO_CONT_BATCHING,
	O_SPEC_DRAFT_TOKENS,
	O_SPECULATE,
	O_DRAFT_MODEL,
	O_KV_TRANSFER,
	O_DISAGG_MODE,
	O_DISAGG_BACKEND,
	O_BOOTSTRAP_PORT,
};

struct flag {
	const char *name; /* without its dashes */
	enum action action;
	int id;             /* ACT_SERVER, ACT_OPT */
	const char *target; /* ACT_ENGINE: the engine flag */
	bool value;
	const char *help; /* the engine's --help line after the flag (llama.cpp), or NULL */
};

/* The sim's own flags, in every dialect. */
static const struct flag sim_flags[] = {
	{ "load-time", ACT_SERVER, S_LOAD_TIME, NULL, true },
	{ "trace", ACT_SERVER, S_TRACE, NULL, true },
	{ "max-connections", ACT_SERVER, S_MAX_CONNECTIONS, NULL, true },
	{ "max-request-bytes", ACT_SERVER, S_MAX_REQUEST_BYTES, NULL, true },
	{ "max-buffered-bytes", ACT_SERVER, S_MAX_BUFFERED_BYTES, NULL, true },
	{ "idle-timeout", ACT_SERVER, S_IDLE_TIMEOUT, NULL, true },
	{ "header-timeout", ACT_SERVER, S_HEADER_TIMEOUT, NULL, true },
	{ "body-timeout", ACT_SERVER, S_BODY_TIMEOUT, NULL, true },
	{ "fixed-itl-ms", ACT_SERVER, S_FIXED_ITL, NULL, true },
	{ "fault-crash-after", ACT_SERVER, S_CRASH_AFTER, NULL, true },
	{ "fault-hang-after", ACT_SERVER, S_HANG_AFTER, NULL, true },
	{ "fault-fail-startup", ACT_SERVER, S_FAIL_STARTUP, NULL, false },
	{ "fault-http500", ACT_SERVER, S_HTTP500, NULL, true },
	{ "fault-bad-sse", ACT_SERVER, S_BAD_SSE, NULL, true },
	{ "fault-jitter", ACT_SERVER, S_JITTER, NULL, true },
	{ "fault-step-overhead-ms", ACT_SERVER, S_STEP_OVERHEAD, NULL, true },
	{ "gpu-ledger", ACT_SERVER, S_GPU_LEDGER, NULL, true },
	{ "dialect", ACT_SERVER, S_DIALECT, NULL, true },
	{ "help", ACT_SERVER, S_HELP, NULL, false },
	{ "h", ACT_SERVER, S_HELP, NULL, false },
	{ "version", ACT_SERVER, S_VERSION, NULL, false },
	{ "gpu", ACT_ENGINE, 0, "gpu", true },
	{ "gpus", ACT_ENGINE, 0, "gpus", true },
	{ "model-config", ACT_ENGINE, 0, "model-config", true },
	{ "profile", ACT_ENGINE, 0, "profile", true },
	{ "profile-file", ACT_ENGINE, 0, "profile-file", true },
	{ "jitter", ACT_ENGINE, 0, "jitter", true },
	{ "load-time-scale", ACT_ENGINE, 0, "load-time-scale", true },
	{ "startup-model", ACT_ENGINE, 0, "startup-model", false },
	{ "weights-read-gbps", ACT_ENGINE, 0, "weights-read-gbps", true },
	{ "init-seconds", ACT_ENGINE, 0, "init-seconds", true },
	{ "graph-capture-seconds", ACT_ENGINE, 0, "graph-capture-seconds", true },
	{ "spec-acceptance", ACT_ENGINE, 0, "spec-acceptance", true },
	{ "interconnect", ACT_ENGINE, 0, "interconnect", true },
	{ "interconnect-gbps", ACT_ENGINE, 0, "interconnect-gbps", true },
	{ 0 },
};

static const struct flag vllm_flags[] = {
	{ "host", ACT_SERVER, S_HOST, NULL, true },
	{ "port", ACT_SERVER, S_PORT, NULL, true },
	{ "served-model-name", ACT_SERVER, S_SERVED_NAME, NULL, true },
	{ "v", ACT_SERVER, S_VERBOSE, NULL, false },
	{ "verbose", ACT_SERVER, S_VERBOSE, NULL, false },
	{ "model", ACT_OPT, O_MODEL, NULL, true },
	{ "tp", ACT_ENGINE, 0, "tensor-parallel-size", true },
	{ "enforce-eager", ACT_IGNORE, 0, NULL, false },
	{ "trust-remote-code", ACT_IGNORE, 0, NULL, false },
	{ "disable-log-requests", ACT_IGNORE, 0, NULL, false },
	{ "disable-log-stats", ACT_IGNORE, 0, NULL, false },
	{ "dtype", ACT_IGNORE, 0, NULL, true },
	{ "kv-transfer-config", ACT_OPT, O_KV_TRANSFER, NULL, true },
	/* the rest: vLLM's engine flags, which goodput-sim's engine config speaks */
	{ 0 },
};

/* llama.cpp's flags as its --help shows them (common/arg.cpp, b4748):
 * `goodput check-engine` and the defaults an answer shows read them. */
static const struct flag llamacpp_flags[] = {
	{ "m", ACT_OPT, O_MODEL, NULL, true, NULL },
	{ "model", ACT_OPT, O_MODEL, NULL, true, "FNAME model path (default: `models/$filename`)" },
	{ "a", ACT_SERVER, S_SERVED_NAME, NULL, true, NULL },
	{ "alias", ACT_SERVER, S_SERVED_NAME, NULL, true, "STRING set alias for model name (to be used by REST API)" },
	{ "host", ACT_SERVER, S_HOST, NULL, true, "HOST ip address to listen (default: 127.0.0.1)" },
	{ "port", ACT_SERVER, S_PORT, NULL, true, "PORT port to listen (default: 8080)" },
	{ "metrics", ACT_OPT, O_METRICS, NULL, false,
	  "enable prometheus compatible metrics endpoint (default: disabled)" },
	{ "np", ACT_OPT, O_PARALLEL, NULL, true, NULL },
	{ "parallel", ACT_OPT, O_PARALLEL, NULL, true, "N number of parallel sequences to decode (default: 1)" },
	{ "b", ACT_OPT, O_BATCH, NULL, true, NULL },
	{ "batch-size", ACT_OPT, O_BATCH, NULL, true, "N logical maximum batch size (default: 2048)" },
	{ "ub", ACT_OPT, O_UBATCH, NULL, true, NULL },
	{ "ubatch-size", ACT_OPT, O_UBATCH, NULL, true, "N physical maximum batch size (default: 512)" },
	{ "c", ACT_OPT, O_CTX, NULL, true, NULL },
	{ "ctx-size", ACT_OPT, O_CTX, NULL, true,
	  "N size of the prompt context (default: 4096, 0 = loaded from model)" },
	{ "md", ACT_OPT, O_DRAFT_MODEL, NULL, true, NULL },
	{ "model-draft", ACT_OPT, O_DRAFT_MODEL, NULL, true,
	  "FNAME draft model for speculative decoding (default: unused)" },
	{ "draft", ACT_ENGINE, 0, "spec-tokens", true, NULL },
	{ "draft-n", ACT_ENGINE, 0, "spec-tokens", true, NULL },
	{ "draft-max", ACT_ENGINE, 0, "spec-tokens", true,
	  "N number of tokens to draft for speculative decoding (default: 16)" },
	{ "draft-n-min", ACT_IGNORE, 0, NULL, true, NULL },
	{ "draft-min", ACT_IGNORE, 0, NULL, true,
	  "N minimum number of draft tokens to use for speculative decoding (default: 5)" },
	{ "draft-p-min", ACT_IGNORE, 0, NULL, true,
	  "P minimum speculative decoding probability (greedy) (default: 0.9)" },
	{ "ngld", ACT_IGNORE, 0, NULL, true, NULL },
	{ "gpu-layers-draft", ACT_IGNORE, 0, NULL, true, NULL },
	{ "n-gpu-layers-draft", ACT_IGNORE, 0, NULL, true, "N number of layers to store in VRAM for the draft model" },
	{ "ctk", ACT_ENGINE, 0, "kv-cache-dtype", true, NULL },
	{ "cache-type-k", ACT_ENGINE, 0, "kv-cache-dtype", true, "TYPE KV cache data type for K (default: f16)" },
	{ "s", ACT_ENGINE, 0, "seed", true, NULL },
	{ "seed", ACT_ENGINE, 0, "seed", true, "SEED RNG seed (default: -1, use random seed for -1)" },
	{ "ngl", ACT_OPT, O_GPU_LAYERS, NULL, true, NULL },
	{ "gpu-layers", ACT_OPT, O_GPU_LAYERS, NULL, true, NULL },
	{ "n-gpu-layers", ACT_OPT, O_GPU_LAYERS, NULL, true, "N number of layers to store in VRAM" },
	{ "t", ACT_OPT, O_THREADS, NULL, true, NULL },
	{ "threads", ACT_OPT, O_THREADS, NULL, true, "N number of threads to use during generation (default: -1)" },
	{ "tb", ACT_OPT, O_THREADS_BATCH, NULL, true, NULL },
	{ "threads-batch", ACT_OPT, O_THREADS_BATCH, NULL, true,
	  "N number of threads to use during batch and prompt processing (default: same as --threads)" },
	{ "ctv", ACT_IGNORE, 0, NULL, true, NULL },
	{ "cache-type-v", ACT_IGNORE, 0, NULL, true, "TYPE KV cache data type for V (default: f16)" },
	{ "fa", ACT_OPT, O_FLASH_ATTN, NULL, false, NULL },
	{ "flash-attn", ACT_OPT, O_FLASH_ATTN, NULL, false, "enable Flash Attention (default: disabled)" },
	{ "cb", ACT_IGNORE, 0, NULL, false, NULL },
	{ "cont-batching", ACT_IGNORE, 0, NULL, false,
	  "enable continuous batching (a.k.a dynamic batching) (default: enabled)" },
	{ "nocb", ACT_OPT, O_NO_CONT_BATCHING, NULL, false, NULL },
	{ "no-cont-batching", ACT_OPT, O_NO_CONT_BATCHING, NULL, false, "disable continuous batching" },
	{ "no-mmap", ACT_IGNORE, 0, NULL, false,
	  "do not memory-map model (slower load but may reduce pageouts if not using mlock)" },
	{ "mlock", ACT_IGNORE, 0, NULL, false,
	  "force system to keep model in RAM rather than swapping or compressing" },
	{ "jinja", ACT_IGNORE, 0, NULL, false, "use jinja template for chat (default: disabled)" },
	{ "no-webui", ACT_IGNORE, 0, NULL, false, "Disable the Web UI (default: enabled)" },
	{ "slots", ACT_IGNORE, 0, NULL, false, "enable slots monitoring endpoint (default: disabled)" },
	{ "v", ACT_SERVER, S_VERBOSE, NULL, false, NULL },
	{ "verbose", ACT_SERVER, S_VERBOSE, NULL, false, "print verbose information" },
	{ 0 },
};

static const struct flag sglang_flags[] = {
	{ "model-path", ACT_OPT, O_MODEL, NULL, true },
	{ "model", ACT_OPT, O_MODEL, NULL, true },
	{ "served-model-name", ACT_SERVER, S_SERVED_NAME, NULL, true },
	{ "host", ACT_SERVER, S_HOST, NULL, true },
	{ "port", ACT_SERVER, S_PORT, NULL, true },
	{ "tp-size", ACT_ENGINE, 0, "tensor-parallel-size", true },
	{ "tp", ACT_ENGINE, 0, "tensor-parallel-size", true },
	{ "max-running-requests", ACT_ENGINE, 0, "max-num-seqs", true },
	{ "chunked-prefill-size", ACT_ENGINE, 0, "max-num-batched-tokens", true },
	{ "quantization", ACT_ENGINE, 0, "quantization", true },
	{ "mem-fraction-static", ACT_ENGINE, 0, "gpu-memory-utilization", true },
	{ "kv-cache-dtype", ACT_ENGINE, 0, "kv-cache-dtype", true },
	{ "context-length", ACT_ENGINE, 0, "max-model-len", true },
	{ "random-seed", ACT_ENGINE, 0, "seed", true },
	{ "enable-metrics", ACT_OPT, O_METRICS, NULL, false },
	{ "collect-tokens-histogram", ACT_OPT, O_TOKENS_HISTOGRAM, NULL, false },
	{ "disable-radix-cache", ACT_OPT, O_NO_PREFIX_CACHE, NULL, false },
	{ "dp-size", ACT_ENGINE, 0, "data-parallel-size", true },
	{ "data-parallel-size", ACT_ENGINE, 0, "data-parallel-size", true },
	{ "dp", ACT_ENGINE, 0, "data-parallel-size", true },
	{ "load-balance-method", ACT_ENGINE, 0, "dp-load-balance", true },
	{ "pp-size", ACT_ENGINE, 0, "pipeline-parallel-size", true },
	{ "pipeline-parallel-size", ACT_ENGINE, 0, "pipeline-parallel-size", true },
	{ "speculative-algorithm", ACT_ENGINE, 0, "spec-method", true },
	{ "speculative-draft-model-path", ACT_ENGINE, 0, "spec-draft-model", true },
	{ "speculative-num-steps", ACT_ENGINE, 0, "spec-tokens", true },
	{ "speculative-num-draft-tokens", ACT_OPT, O_SPEC_DRAFT_TOKENS, NULL, true },
	{ "speculative-eagle-topk", ACT_IGNORE, 0, NULL, true },
	{ "disaggregation-mode", ACT_OPT, O_DISAGG_MODE, NULL, true },
	{ "disaggregation-transfer-backend", ACT_OPT, O_DISAGG_BACKEND, NULL, true },
	{ "disaggregation-bootstrap-port", ACT_OPT, O_BOOTSTRAP_PORT, NULL, true },
	{ "disaggregation-ib-device", ACT_IGNORE, 0, NULL, true },
	{ "base-gpu-id", ACT_IGNORE, 0, NULL, true },
	{ "trust-remote-code", ACT_IGNORE, 0, NULL, false },
	{ "disable-cuda-graph", ACT_IGNORE, 0, NULL, false },
	{ "log-level", ACT_IGNORE, 0, NULL, true },
	{ "dtype", ACT_IGNORE, 0, NULL, true },
	{ 0 },
};

static const struct flag tgi_flags[] = {
	{ "model-id", ACT_OPT, O_MODEL, NULL, true },
	{ "hostname", ACT_SERVER, S_HOST, NULL, true },
	{ "port", ACT_SERVER, S_PORT, NULL, true },
	{ "num-shard", ACT_ENGINE, 0, "tensor-parallel-size", true },
	{ "quantize", ACT_ENGINE, 0, "quantization", true },
	{ "max-batch-size", ACT_OPT, O_MAX_BATCH, NULL, true },
	{ "max-batch-prefill-tokens", ACT_OPT, O_PREFILL_TOKENS, NULL, true },
	{ "max-total-tokens", ACT_OPT, O_MAX_TOTAL, NULL, true },
	{ "max-input-tokens", ACT_OPT, O_MAX_INPUT, NULL, true },
	{ "max-input-length", ACT_OPT, O_MAX_INPUT, NULL, true },
	{ "max-concurrent-requests", ACT_OPT, O_MAX_CONCURRENT, NULL, true },
	{ "cuda-memory-fraction", ACT_ENGINE, 0, "gpu-memory-utilization", true },
	{ "kv-cache-dtype", ACT_ENGINE, 0, "kv-cache-dtype", true },
	{ "speculate", ACT_OPT, O_SPECULATE, NULL, true },
	{ "dtype", ACT_IGNORE, 0, NULL, true },
	{ "sharded", ACT_IGNORE, 0, NULL, true },
	{ "max-best-of", ACT_IGNORE, 0, NULL, true },
	{ "max-stop-sequences", ACT_IGNORE, 0, NULL, true },
	{ "trust-remote-code", ACT_IGNORE, 0, NULL, false },
	{ "json-output", ACT_IGNORE, 0, NULL, false },
	{ "disable-grammar-support", ACT_IGNORE, 0, NULL, false },
	{ 0 },
};

static const struct flag trtllm_flags[] = {
	{ "host", ACT_SERVER, S_HOST, NULL, true },
	{ "port", ACT_SERVER, S_PORT, NULL, true },
	{ "backend", ACT_OPT, O_BACKEND, NULL, true },
	{ "tp_size", ACT_ENGINE, 0, "tensor-parallel-size", true },
	{ "max_batch_size", ACT_ENGINE, 0, "max-num-seqs", true },
	{ "max_num_tokens", ACT_ENGINE, 0, "max-num-batched-tokens", true },
	{ "max_seq_len", ACT_ENGINE, 0, "max-model-len", true },
	{ "kv_cache_free_gpu_memory_fraction", ACT_ENGINE, 0, "gpu-memory-utilization", true },
	{ "extra_llm_api_options", ACT_OPT, O_EXTRA_OPTIONS, NULL, true },
	{ "config", ACT_OPT, O_EXTRA_OPTIONS, NULL, true },
	{ "fail_fast_on_attention_window_too_large", ACT_OPT, O_FAIL_FAST, NULL, false },
	{ "pp_size", ACT_ENGINE, 0, "pipeline-parallel-size", true },
	{ "ep_size", ACT_IGNORE, 0, NULL, true },
	{ "tokenizer", ACT_IGNORE, 0, NULL, true },
	{ "log_level", ACT_IGNORE, 0, NULL, true },
	{ "num_postprocess_workers", ACT_IGNORE, 0, NULL, true },
	{ "trust_remote_code", ACT_IGNORE, 0, NULL, false },
	{ "enable_chunked_prefill", ACT_IGNORE, 0, NULL, false },
	{ 0 },
};

static const struct flag *const dialect_flags[_SIM_DIALECT_MAX] = {
	[SIM_DIALECT_VLLM] = vllm_flags, [SIM_DIALECT_LLAMACPP] = llamacpp_flags, [SIM_DIALECT_SGLANG] = sglang_flags,
	[SIM_DIALECT_TGI] = tgi_flags,   [SIM_DIALECT_TRTLLM] = trtllm_flags,
};

static const struct flag *lookup(const struct flag *table, const char *name)
{
	for (size_t i = 0; table && table[i].name; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

/* ---- refusing a flag the way the engine does ---- */

static int unknown_flag(enum sim_dialect d, const char *arg)
{
	switch (d) {
	case SIM_DIALECT_LLAMACPP:
		fprintf(stderr, "error: invalid argument: %s\n", arg);
		return 1 + 1;
	case SIM_DIALECT_TGI:
		fprintf(stderr,
			"error: unexpected argument '%s' found\n\nUsage: text-generation-launcher [OPTIONS]\n\n"
			"For more information, try '--help'.\n",
			arg);
		return 1 + 2;
	case SIM_DIALECT_TRTLLM:
		fprintf(stderr,
			"Usage: trtllm-serve serve [OPTIONS] MODEL\nTry 'trtllm-serve serve --help' for help.\n\n"
			"Error: No such option: %s\n",
			arg);
		return 1 + 2;
	case SIM_DIALECT_SGLANG:
		fprintf(stderr, "launch_server.py: error: unrecognized arguments: %s\n", arg);
		return 1 + 2;
	default:
		fprintf(stderr, "vllm serve: error: unrecognized arguments: %s\n", arg);
		return 1 + 2;
	}
}

static int bad_value(enum sim_dialect d, const struct error *err, int r)
{
	fprintf(stderr, "%s: %s\n", d == SIM_DIALECT_VLLM ? "goodput-sim" : sim_dialect_to_string(d),
		error_str(err, r));
	return 1 + 2;
}

/* ---- the flags' effects ---- */

static int apply_server(int id, const char *what, const char *v, struct sim_server_config *sc,
			struct sim_engine_config *ec, struct error *err)
{
	uint64_t u;
	double d;
	int r = 0;

	switch (id) {
	case S_HOST:
		sc->host = v;
		break;
	case S_PORT:
		r = parse_u64(what, v, 0, 65535, &u, err);
		sc->port = (uint16_t)u;
		break;
	case S_SERVED_NAME:
		sc->served_model_name = v;
		break;
	case S_LOAD_TIME:
		r = parse_double(what, v, 0, 3600, &d, err);
		sc->load_usec_set = true;
		sc->load_usec = sec_to_usec(d);
		break;
	case S_TRACE:
		sc->trace_path = v;
		break;
	case S_MAX_CONNECTIONS:
		r = parse_u64(what, v, 1, 1000000, &u, err);
		sc->max_connections = (uint32_t)u;
		break;
	case S_MAX_REQUEST_BYTES:
		r = parse_u64(what, v, 1024, 1u << 30, &u, err);
		sc->max_body_bytes = (size_t)u;
		break;
	case S_MAX_BUFFERED_BYTES:
		r = parse_u64(what, v, 1024, UINT64_C(1) << 40, &u, err);
		sc->max_buffered_bytes = (size_t)u;
		break;
	case S_IDLE_TIMEOUT:
	case S_HEADER_TIMEOUT:
	case S_BODY_TIMEOUT:
		r = parse_double(what, v, 0, 86400, &d, err);
		*(id == S_IDLE_TIMEOUT     ? &sc->idle_timeout_usec
		  : id == S_HEADER_TIMEOUT ? &sc->header_timeout_usec
					   : &sc->body_timeout_usec) = sec_to_usec(d);
		break;
	case S_FIXED_ITL:
		r = parse_double(what, v, 0.01, 60000, &sc->fixed_itl_ms, err);
		break;
	case S_CRASH_AFTER:
		r = parse_u64(what, v, 1, UINT64_MAX, &sc->faults.crash_after, err);
		break;
	case S_HANG_AFTER:
		r = parse_u64(what, v, 1, UINT64_MAX, &sc->faults.hang_after, err);
		break;
	case S_FAIL_STARTUP:
		sc->faults.fail_startup = true;
		break;
	case S_HTTP500:
		r = parse_double(what, v, 0, 1, &sc->faults.http500_fraction, err);
		break;
	case S_BAD_SSE:
		r = parse_double(what, v, 0, 1, &sc->faults.bad_sse_fraction, err);
		break;
	case S_JITTER:
		r = parse_double(what, v, 0, 2, &sc->faults.jitter_sigma, err);
		ec->extra_jitter_sigma = sc->faults.jitter_sigma;
		break;
	case S_STEP_OVERHEAD:
		r = parse_double(what, v, 0, 60000, &sc->faults.step_overhead_ms, err);
		ec->fault_step_usec = sc->faults.step_overhead_ms * 1000.0;
		break;
	case S_GPU_LEDGER:
		sc->gpu_ledger = v;
		break;
	case S_VERBOSE:
		log_set_max_level(LOG_DEBUG);
		break;
	default:
		break;
	}
	return r;
}

/* vLLM's --kv-transfer-config: a KVTransferConfig as JSON. The connectors
 * its registry has (vllm/distributed/kv_transfer/kv_connector/factory.py)
 * and its three roles; the role only matters where the connector reads it
 * (NixlConnector does not: the proxy decides). */
static int apply_kv_transfer(const char *what, const char *v, struct sim_dialect_options *opt, struct error *err)
{
	static const char *const connectors[] = { "NixlConnector",          "P2pNcclConnector",
						  "LMCacheConnectorV1",     "MooncakeConnector",
						  "SharedStorageConnector", "MultiConnector",
						  "ExampleConnector",       NULL };
	static const char *const keys[] = { "kv_connector",
					    "kv_role",
					    "kv_buffer_device",
					    "kv_buffer_size",
					    "kv_rank",
					    "kv_parallel_size",
					    "kv_ip",
					    "kv_port",
					    "engine_id",
					    "kv_connector_extra_config",
					    "kv_load_failure_policy",
					    "kv_connector_module_path",
					    "enable_permute_local_kv",
					    NULL };
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_ParseWithLength(v, strlen(v));
	const cJSON *c, *role, *e;
	bool known = false;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected a JSON object, got \"%.60s\"", what, v);
	cJSON_ArrayForEach(e, j)
	{
		bool ok = false;

		for (size_t i = 0; keys[i]; i++)
			ok = ok || strcmp(e->string, keys[i]) == 0;
		if (!ok)
			return error_set(err, -EINVAL, "%s: unexpected keyword argument '%s'", what, e->string);
	}
	c = cJSON_GetObjectItemCaseSensitive(j, "kv_connector");
	role = cJSON_GetObjectItemCaseSensitive(j, "kv_role");
	if (!cJSON_IsString(c))
		return error_set(err, -EINVAL, "%s: kv_connector is required", what);
	for (size_t i = 0; connectors[i]; i++)
		known = known || strcmp(c->valuestring, connectors[i]) == 0;
	if (!known)
		return error_set(err, -EINVAL, "%s: ValueError: Unsupported connector type: %.40s", what,
				 c->valuestring);
	if (role && !cJSON_IsString(role))
		return error_set(err, -EINVAL, "%s: kv_role must be a string", what);
	if (!role || strcmp(role->valuestring, "kv_both") == 0)
		opt->pd_role = SIM_PD_BOTH;
	else if (strcmp(role->valuestring, "kv_producer") == 0)
		opt->pd_role = SIM_PD_PREFILL;
	else if (strcmp(role->valuestring, "kv_consumer") == 0)
		opt->pd_role = SIM_PD_DECODE;
	else
		return error_set(err, -EINVAL,
				 "%s: Unsupported kv_role: %.40s. Supported roles are kv_producer, "
				 "kv_consumer and kv_both",
				 what, role->valuestring);
	/* NixlConnector reads no role: the proxy decides which worker prefills */
	if (strcmp(c->valuestring, "NixlConnector") == 0)
		opt->pd_role = SIM_PD_BOTH;
	snprintf(opt->kv_connector, sizeof(opt->kv_connector), "%s", c->valuestring);
	return 0;
}

static int apply_opt(int id, const char *what, const char *v, struct sim_dialect_options *opt,
		     struct sim_dialect_pending *pd, struct sim_engine_config *ec, struct error *err)
{
	int r = 0;

	switch (id) {
	case O_MODEL:
		pd->model = v;
		break;
	case O_METRICS:
		opt->metrics_enabled = true;
		break;
	case O_TOKENS_HISTOGRAM:
		opt->tokens_histogram = true;
		break;
	case O_PARALLEL:
		r = parse_u32(what, v, 1, 65536, &pd->parallel, err);
		break;
	case O_BATCH:
		r = parse_u32(what, v, 1, 1u << 22, &pd->batch, err);
		break;
	case O_UBATCH:
		r = parse_u32(what, v, 1, 1u << 22, &pd->ubatch, err);
		break;
	case O_CTX:
		r = parse_u32(what, v, 0, 1u << 24, &pd->ctx, err);
		pd->have_ctx = true;
		break;
	case O_MAX_CONCURRENT:
		r = parse_u32(what, v, 1, 1u << 24, &opt->max_concurrent, err);
		break;
	case O_MAX_INPUT:
		r = parse_u32(what, v, 1, 1u << 24, &pd->max_input, err);
		break;
	case O_MAX_TOTAL:
		r = parse_u32(what, v, 1, 1u << 24, &pd->max_total, err);
		break;
	case O_PREFILL_TOKENS:
		r = parse_u32(what, v, 1, 1u << 24, &pd->prefill_tokens, err);
		break;
	case O_MAX_BATCH:
		r = parse_u32(what, v, 1, 65536, &pd->max_batch, err);
		break;
	case O_EXTRA_OPTIONS:
		pd->extra_options = v;
		break;
	case O_FAIL_FAST:
		ec->kv_fail_fast = true;
		break;
	case O_GPU_LAYERS:
		r = parse_u32(what, v, 0, 1u << 20, &pd->gpu_layers, err);
		opt->llamacpp.gpu_layers = (int32_t)pd->gpu_layers;
		break;
	case O_THREADS:
	case O_THREADS_BATCH: {
		int64_t t;

		/* -1: the physical cores; llama.cpp takes any other value as it is */
		r = parse_i64(what, v, -1, 1 << 20, &t, err);
		if (r >= 0 && t == 0)
			r = error_set(err, -EINVAL, "%s: 0 threads", what);
		*(id == O_THREADS ? &opt->llamacpp.threads : &opt->llamacpp.threads_batch) = (int32_t)t;
		break;
	}
	case O_FLASH_ATTN:
		opt->llamacpp.flash_attn = true;
		break;
	case O_NO_CONT_BATCHING:
		opt->llamacpp.no_cont_batching = true;
		break;
	case O_NO_PREFIX_CACHE:
		ec->enable_prefix_caching = false;
		break;
	case O_SPEC_DRAFT_TOKENS:
		r = parse_u32(what, v, 2, SIM_SPEC_MAX_TOKENS + 1, &pd->spec_draft_tokens, err);
		break;
	case O_DRAFT_MODEL:
		pd->draft_model = v;
		break;
	case O_SPECULATE:
		/* TGI: n-gram speculation unless the model ships Medusa heads */
		r = parse_u32(what, v, 1, SIM_SPEC_MAX_TOKENS, &ec->spec_tokens, err);
		if (r >= 0)
			ec->spec_method = SIM_SPEC_NGRAM;
		break;
	case O_KV_TRANSFER:
		r = apply_kv_transfer(what, v, opt, err);
		break;
	case O_DISAGG_MODE:
		if (strcmp(v, "prefill") == 0)
			opt->pd_role = SIM_PD_PREFILL;
		else if (strcmp(v, "decode") == 0)
			opt->pd_role = SIM_PD_DECODE;
		else if (strcmp(v, "null") == 0)
			opt->pd_role = SIM_PD_NONE;
		else
			r = error_set(err, -EINVAL,
				      "argument %s: invalid choice: '%s' (choose from 'null', 'prefill', "
				      "'decode')",
				      what, v);
		break;
	case O_DISAGG_BACKEND:
		if (strcmp(v, "mooncake") != 0 && strcmp(v, "nixl") != 0 && strcmp(v, "ascend") != 0 &&
		    strcmp(v, "fake") != 0)
			r = error_set(err, -EINVAL,
				      "argument %s: invalid choice: '%s' (choose from 'mooncake', 'nixl', "
				      "'ascend', 'fake')",
				      what, v);
		else
			snprintf(opt->kv_connector, sizeof(opt->kv_connector), "%s", v);
		break;
	case O_BOOTSTRAP_PORT: {
		uint32_t port;

		r = parse_u32(what, v, 1, 65535, &port, err);
		opt->bootstrap_port = (uint16_t)port;
		break;
	}
	case O_BACKEND:
		if (strcmp(v, "pytorch") != 0 && strcmp(v, "trt") != 0 && strcmp(v, "tensorrt") != 0 &&
		    strcmp(v, "_autodeploy") != 0)
			r = error_set(err, -EINVAL, "Invalid value for '--backend': '%s'", v);
		break;
	default:
		break;
	}
	return r;
}

/* ---- help ---- */

/* Whether two rows of a table are one flag's names (-t and --threads). */
static bool same_flag(const struct flag *a, const struct flag *b)
{
	return a->action == b->action && a->id == b->id && a->value == b->value &&
	       (a->target == b->target || (a->target && b->target && strcmp(a->target, b->target) == 0));
}

/* llama.cpp's --help: "-t,    --threads N    number of threads ... (default: -1)",
 * each flag with its aliases and its default as the engine words it. */
static void llamacpp_help(const struct flag *t)
{
	printf("----- common params -----\n\n");
	for (size_t i = 0; t[i].name; i++) {
		char names[96] = "";
		size_t len = 0, first = i;
		const char *text = t[i].help, *sp;

		if (!text)
			continue;
		while (first > 0 && !t[first - 1].help && same_flag(&t[first - 1], &t[i]))
			first--;
		for (size_t k = first; k <= i; k++) {
			bool short_form = strlen(t[k].name) <= 4 && k < i;
			char one[64];

			/* "-t,    --threads N": a short form padded to seven columns */
			snprintf(one, sizeof(one), "%s%s%s", short_form ? "-" : "--", t[k].name, k < i ? "," : "");
			len += (size_t)snprintf(names + len, sizeof(names) - len,
						short_form && k == first ? "%-7s" : "%s ", one);
		}
		if (len > 0 && names[len - 1] == ' ')
			names[--len] = 0;
		/* a flag with a value: the help's first word is its placeholder */
		sp = t[i].value ? strchr(text, ' ') : NULL;
		if (sp)
			snprintf(names + len, sizeof(names) - len, " %.*s", (int)(sp - text), text);
		printf("%-39s %s\n", names, sp ? sp + 1 : text);
	}
}

/* The engine's flags as its --help lists them (a profile's flags checked
 * with `goodput check-engine` are found), then the sim's own. */
static void dialect_help(enum sim_dialect d)
{
	static const char *const usage[_SIM_DIALECT_MAX] = {
		[SIM_DIALECT_LLAMACPP] = "usage: llama-server [options]",
		[SIM_DIALECT_SGLANG] = "usage: launch_server.py [-h] --model-path MODEL_PATH [options]",
		[SIM_DIALECT_TGI] = "Usage: text-generation-launcher [OPTIONS]",
		[SIM_DIALECT_TRTLLM] = "Usage: trtllm-serve serve [OPTIONS] MODEL",
	};
	const struct flag *t = dialect_flags[d];

	if (d == SIM_DIALECT_LLAMACPP) {
		llamacpp_help(t);
		printf("\n(goodput-sim in llamacpp's dialect: the flags above are the engine's own; see "
		       "goodput-sim(1))\n\ngoodput-sim's own flags:\n");
		for (size_t i = 0; sim_flags[i].name; i++)
			printf("  %s%s%s\n", strlen(sim_flags[i].name) <= 1 ? "-" : "--", sim_flags[i].name,
			       sim_flags[i].value ? " VALUE" : "");
		return;
	}
	printf("%s\n\n(goodput-sim in %s's dialect: these flags are the engine's own; see goodput-sim(1))\n\n",
	       usage[d] ? usage[d] : "", sim_dialect_to_string(d));
	for (size_t i = 0; t[i].name; i++)
		printf("  %s%s%s\n", strlen(t[i].name) <= 3 ? "-" : "--", t[i].name, t[i].value ? " VALUE" : "");
	printf("\ngoodput-sim's own flags:\n");
	for (size_t i = 0; sim_flags[i].name; i++)
		printf("  %s%s%s\n", strlen(sim_flags[i].name) <= 1 ? "-" : "--", sim_flags[i].name,
		       sim_flags[i].value ? " VALUE" : "");
}

/* ---- which dialect ---- */

/* The program name a symlink gives goodput-sim. */
static int dialect_of_program(const char *argv0, enum sim_dialect *ret)
{
	const char *base = strrchr(argv0, '/');

	base = base ? base + 1 : argv0;
	if (strcmp(base, "llama-server") == 0)
		*ret = SIM_DIALECT_LLAMACPP;
	else if (strcmp(base, "vllm") == 0)
		*ret = SIM_DIALECT_VLLM;
	else if (strcmp(base, "text-generation-launcher") == 0)
		*ret = SIM_DIALECT_TGI;
	else if (strcmp(base, "trtllm-serve") == 0)
		*ret = SIM_DIALECT_TRTLLM;
	else
		return 0;
	return 1;
}

static bool is_python(const char *argv0)
{
	const char *base = strrchr(argv0, '/');

	base = base ? base + 1 : argv0;
	return strcmp(base, "python3") == 0 || strcmp(base, "python") == 0;
}

/* As python3, goodput-sim runs what the sglang and trtllm profiles run:
 * `-m sglang.launch_server ...` and the version one-liners. Returns 0 to
 * go on as SGLang (*ret_skip: the arguments consumed), or 1 + an exit status. */
static int python_mode(int argc, char **argv, int *ret_skip)
{
	if (argc > 2 && strcmp(argv[1], "-m") == 0 && strcmp(argv[2], "sglang.launch_server") == 0) {
		*ret_skip = 2;
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "-c") == 0 && strstr(argv[2], "import sglang")) {
		printf("%s\n", SIM_SGLANG_VERSION);
		return 1;
	}
	if (argc > 2 && strcmp(argv[1], "-c") == 0 && strstr(argv[2], "import tensorrt_llm")) {
		/* Importing tensorrt_llm prints its banner first. */
		printf("[TensorRT-LLM] TensorRT-LLM version: %s\n%s\n", SIM_TRTLLM_VERSION, SIM_TRTLLM_VERSION);
		return 1;
	}
	fprintf(stderr, "goodput-sim: run as python3 it emulates only `-m sglang.launch_server` and the sglang and "
			"tensorrt_llm version commands\n");
	return 1 + 2;
}

/* Engine settings goodput-sim's config has under names vLLM does not: the
 * vLLM dialect refuses them as vLLM would (its speculative-decoding and
 * prefix-caching flags are --speculative-config and --[no-]enable-prefix-caching). */
static bool sim_only(const char *name)
{
	static const char *const names[] = {
		"spec-method", "spec-tokens", "spec-draft-model", "spec-draft-tp", "prefix-caching", "dp-load-balance",
		/* a disaggregated deployment is several servers, each a worker of its own */
		"prefill-workers", "decode-workers", "prefill-tp", "decode-tp", "prefill-tensor-parallel-size",
		"decode-tensor-parallel-size", "prefill-max-num-seqs", "prefill-max-num-batched-tokens",
		"decode-max-num-seqs", "decode-max-num-batched-tokens", NULL
	};

	for (size_t i = 0; names[i]; i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* ---- the command line ---- */

struct parse {
	enum sim_dialect d;
	struct sim_server_config *sc;
	struct sim_engine_config *ec;
	struct sim_dialect_options *opt;
	struct sim_dialect_pending pd;
	bool quant_explicit, gmu_set, model_seen;
	struct error err;
};

/* One flag (name without dashes, v its value or NULL). Returns 0, 1 + an
 * exit status, or -errno with p->err set. */
static int one_flag(struct parse *p, const char *arg, const char *name, const char *v, bool *ret_takes_value,
		    bool probe)
{
	const struct flag *f = lookup(dialect_flags[p->d], name);
	char what[140];
	int r;

	if (!f)
		f = lookup(sim_flags, name);
	if (!f && p->d == SIM_DIALECT_VLLM && !sim_only(name)) {
		/* vLLM's engine flags, as goodput-sim's engine config names them. */
		if (probe) {
			*ret_takes_value = sim_engine_flag_takes_value(name);
			return 0;
		}
		r = sim_engine_config_apply_flag(p->ec, name, v, &p->err);
		if (r == 0)
			return unknown_flag(p->d, arg);
		goto applied_engine;
	}
	if (!f)
		return probe ? 0 : unknown_flag(p->d, arg);
	if (probe) {
		*ret_takes_value = f->value;
		return 0;
	}
	snprintf(what, sizeof(what), "%s", arg);
	what[strcspn(what, "=")] = 0;
	switch (f->action) {
	case ACT_SERVER:
		if (f->id == S_HELP) {
			if (p->opt->explicit_dialect && p->d != SIM_DIALECT_VLLM)
				dialect_help(p->d);
			else
				sim_args_help();
			return 1;
		}
		if (f->id == S_VERSION) {
			if (p->opt->explicit_dialect)
				sim_dialect_print_version(p->opt);
			else
				printf("goodput-sim %s\n", GOODPUT_VERSION);
			return 1;
		}
		if (f->id == S_DIALECT)
			return 0; /* read before */
		return apply_server(f->id, what, v, p->sc, p->ec, &p->err);
	case ACT_OPT:
		return apply_opt(f->id, what, v, p->opt, &p->pd, p->ec, &p->err);
	case ACT_IGNORE:
		return 0;
	case ACT_ENGINE:
		name = f->target;
		r = sim_engine_config_apply_flag(p->ec, f->target, v, &p->err);
		if (r < 0)
			return r;
		goto applied_engine;
	}
	return 0;

applied_engine:
	if (r < 0)
		return r;
	if (strcmp(name, "quantization") == 0 || strcmp(name, "q") == 0)
		p->quant_explicit = true;
	if (strcmp(name, "gpu-memory-utilization") == 0)
		p->gmu_set = true;
	if (strcmp(name, "model") == 0) {
		p->model_seen = true;
		p->opt->model_arg = v;
	}
	return 0;
}

/* A positional argument: vLLM's and TensorRT-LLM's `serve MODEL`. */
static int positional(struct parse *p, const char *arg)
{
	if ((p->d == SIM_DIALECT_VLLM || p->d == SIM_DIALECT_TRTLLM) && !p->pd.model && !p->model_seen) {
		p->pd.model = arg;
		return 0;
	}
	if (p->d == SIM_DIALECT_LLAMACPP)
		return unknown_flag(p->d, arg);
	fprintf(stderr, "goodput-sim: unexpected argument '%s'\n", arg);
	return 1 + 2;
}

static int scan_dialect(int argc, char **argv, struct sim_dialect_options *opt)
{
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;

		if (strcmp(argv[i], "--dialect") == 0 && i + 1 < argc)
			v = argv[i + 1];
		else if (strncmp(argv[i], "--dialect=", 10) == 0)
			v = argv[i] + 10;
		if (!v)
			continue;
		if (sim_dialect_from_string(v, &opt->dialect) < 0) {
			fprintf(stderr,
				"goodput-sim: --dialect: expected vllm, llamacpp, sglang, tgi or trtllm, got "
				"\"%s\"\n",
				v);
			return 1 + 2;
		}
		opt->explicit_dialect = true;
	}
	return 0;
}

static int parse_loop(struct parse *p, int argc, char **argv, int first)
{
	for (int i = first; i < argc; i++) {
		const char *arg = argv[i], *name, *eq, *v = NULL;
		char flag[128];
		bool takes_value = false;
		int r;

		if (i == first && strcmp(arg, "serve") == 0 && (p->d == SIM_DIALECT_VLLM || p->d == SIM_DIALECT_TRTLLM))
			continue;
		if (p->d == SIM_DIALECT_SGLANG && i == first && strcmp(arg, "-m") == 0 && i + 1 < argc &&
		    strcmp(argv[i + 1], "sglang.launch_server") == 0) {
			i++;
			continue;
		}
		if (arg[0] != '-' || arg[1] == '\0') {
			r = positional(p, arg);
			if (r != 0)
				return r;
			continue;
		}
		name = arg + (arg[1] == '-' ? 2 : 1);
		eq = strchr(name, '=');
		snprintf(flag, sizeof(flag), "%.*s", eq ? (int)(eq - name) : (int)strlen(name), name);
		if (eq && strcmp(flag, "help") == 0)
			eq = NULL; /* vLLM's --help=all, --help=ModelConfig */
		(void)one_flag(p, arg, flag, NULL, &takes_value, true);
		if (takes_value) {
			if (eq)
				v = eq + 1;
			else if (i + 1 < argc)
				v = argv[++i];
			else {
				fprintf(stderr, "goodput-sim: %s: expected a value\n", arg);
				return 1 + 2;
			}
		} else if (eq) {
			fprintf(stderr, "goodput-sim: %s takes no value\n", flag);
			return 1 + 2;
		}
		r = one_flag(p, arg, flag, v, &takes_value, false);
		if (r < 0)
			return bad_value(p->d, &p->err, r);
		if (r > 0)
			return r;
	}
	return 0;
}

int sim_args_parse(int argc, char **argv, struct sim_server_config *sc, struct sim_engine_config *ec,
		   struct sim_dialect_options *opt)
{
	struct parse p = { .sc = sc, .ec = ec, .opt = opt };
	const char *ledger = getenv("GOODPUT_SIM_GPU_LEDGER");
	int first = 1, r;

	sim_dialect_options_init(opt);
	ec->startup_scale = SIM_DEFAULT_LOAD_TIME_SCALE;
	sc->port = 8000;
	if (ledger && *ledger)
		sc->gpu_ledger = ledger;
	if (is_python(argv[0])) {
		int skip = 0;

		r = python_mode(argc, argv, &skip);
		if (r > 0)
			return r;
		opt->dialect = SIM_DIALECT_SGLANG;
		opt->explicit_dialect = true;
		first += skip;
	} else if (dialect_of_program(argv[0], &opt->dialect))
		opt->explicit_dialect = true;
	r = scan_dialect(argc, argv, opt);
	if (r > 0)
		return r;
	p.d = opt->dialect;
	sc->port = p.d == SIM_DIALECT_LLAMACPP ? 8080
		   : p.d == SIM_DIALECT_SGLANG ? 30000
		   : p.d == SIM_DIALECT_TGI    ? 3000
					       : 8000;
	/* Engines without --metrics/--enable-metrics switches always export them. */
	opt->metrics_enabled = p.d != SIM_DIALECT_LLAMACPP && p.d != SIM_DIALECT_SGLANG;
	ec->kv_fail_fast = p.d != SIM_DIALECT_TRTLLM;
	/* SGLang's data-parallel controller goes round robin unless told otherwise. */
	ec->dp_balance = p.d == SIM_DIALECT_SGLANG ? SIM_DP_ROUND_ROBIN : SIM_DP_SCORE;
	r = parse_loop(&p, argc, argv, first);
	if (r != 0)
		return r;
	/* SGLang: with one draft token per step (topk 1) the steps are the draft length; NGRAM has no
	 * steps, only its draft tokens after the verified one. */
	if (p.pd.spec_draft_tokens && ec->spec_method != SIM_SPEC_NONE && ec->spec_tokens == 0)
		ec->spec_tokens = p.pd.spec_draft_tokens - 1;
	if (p.pd.draft_model) {
		r = sim_dialect_set_draft_model(p.d, p.pd.draft_model, ec, &p.err);
		if (r < 0)
			return bad_value(p.d, &p.err, r);
	}
	if (p.pd.model) {
		opt->model_arg = p.pd.model;
		r = sim_dialect_set_model(p.d, p.pd.model, p.quant_explicit, ec, &p.err);
		if (r < 0)
			return bad_value(p.d, &p.err, r);
	}
	r = sim_dialect_apply_defaults(p.d, ec, opt, &p.pd, p.gmu_set, &p.err);
	if (r < 0)
		return bad_value(p.d, &p.err, r);
	if (r > 0)
		return r;
	sc->seed = ec->seed;
	sim_faults_seed(&sc->faults, ec->seed);
	return 0;
}
