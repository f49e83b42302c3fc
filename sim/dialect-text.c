/* dialect-text.c — what each emulated engine prints as it starts: its
 * start-up log lines, phase by phase, with the phases' real durations (its
 * errors are in dialect-errors.c).
 *
 * The wording is the engines' own, taken from their source and issue
 * trackers (sim/README.md lists where; the engine profiles in configs/engines hold the
 * patterns goodput reads them back with, and tests/study/failures the
 * engines' real texts beside these). Numbers in the lines are the emulated
 * engine's: weights and KV sizes from the memory model, durations from the
 * start-up timeline. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dialect-internal.h"
#include "macro.h"

static const char *const dialect_names[_SIM_DIALECT_MAX] = {
	[SIM_DIALECT_VLLM] = "vllm", [SIM_DIALECT_LLAMACPP] = "llamacpp", [SIM_DIALECT_SGLANG] = "sglang",
	[SIM_DIALECT_TGI] = "tgi",   [SIM_DIALECT_TRTLLM] = "trtllm",
};

const char *sim_dialect_to_string(enum sim_dialect d)
{
	return (unsigned)d < _SIM_DIALECT_MAX ? dialect_names[d] : "?";
}

int sim_dialect_from_string(const char *s, enum sim_dialect *ret)
{
	for (int i = 0; s && i < _SIM_DIALECT_MAX; i++)
		if (strcmp(s, dialect_names[i]) == 0) {
			*ret = (enum sim_dialect)i;
			return 0;
		}
	return -EINVAL;
}

void sim_dialect_options_init(struct sim_dialect_options *o)
{
	const char *no_git = getenv("GOODPUT_SIM_LLAMACPP_NO_GIT");

	*o = (struct sim_dialect_options){ .dialect = SIM_DIALECT_VLLM, .metrics_enabled = true };
	o->llamacpp.gpu_layers = o->llamacpp.threads = o->llamacpp.threads_batch = -1;
	o->bootstrap_port = 8998;
	o->llamacpp.unknown_build = no_git && strcmp(no_git, "1") == 0;
}

int sim_llamacpp_build(const struct sim_dialect_options *opt)
{
	return opt->llamacpp.unknown_build ? 0 : SIM_LLAMACPP_BUILD;
}

const char *sim_llamacpp_commit(const struct sim_dialect_options *opt)
{
	return opt->llamacpp.unknown_build ? "unknown" : SIM_LLAMACPP_COMMIT;
}

FILE *sim_dialect_log_stream(const struct sim_dialect_options *opt)
{
	/* vLLM's and TGI's loggers write to stdout, llama.cpp's, SGLang's and TensorRT-LLM's to stderr. */
	return opt->dialect == SIM_DIALECT_VLLM || opt->dialect == SIM_DIALECT_TGI ? stdout : stderr;
}

/* ---- the start-up timeline ---- */

void sim_timeline_build(const struct sim_engine_config *ec, const struct sim_startup_phases *ph, double weights_bytes,
			uint64_t total_usec, struct sim_timeline *ret)
{
	double part[_SIM_PHASE_MAX], sum = 0, t = 0;

	if (ec->startup.enabled && ph) {
		part[SIM_PHASE_DEVICES] = ph->init_s / 2;
		part[SIM_PHASE_WEIGHTS] = ph->weights_s;
		part[SIM_PHASE_PROFILE] = ph->init_s / 2;
		part[SIM_PHASE_GRAPHS] = ph->graphs_s;
	} else {
		const struct sim_profile *pr = &ec->profile;
		double w = weights_bytes * ec->tp;

		/* §4.5's parts, scaled to the delay. */
		part[SIM_PHASE_DEVICES] = pr->start_proc_s + (ec->tp > 1 ? pr->start_tp_s : 0);
		part[SIM_PHASE_WEIGHTS] = pr->load_gbps > 0 ? w / (pr->load_gbps * 1e9) : 0;
		part[SIM_PHASE_PROFILE] = pr->start_compile_s + pr->start_profile_s;
		part[SIM_PHASE_GRAPHS] = pr->start_graphs_s;
	}
	for (int i = 0; i < _SIM_PHASE_MAX; i++)
		sum += part[i];
	for (int i = 0; i < _SIM_PHASE_MAX; i++) {
		double share = sum > 0 ? part[i] / sum : 0.25;

		ret->seconds[i] = share * (double)total_usec / 1e6;
		t += ret->seconds[i];
		ret->end_usec[i] = i == _SIM_PHASE_MAX - 1 ? total_usec : (uint64_t)llround(t * 1e6);
	}
}

enum sim_phase sim_dialect_failure_phase(const struct sim_startup_check *check)
{
	switch (check->cause) {
	case SIM_STARTUP_WEIGHTS:
		return SIM_PHASE_WEIGHTS;
	case SIM_STARTUP_KV_CACHE:
	case SIM_STARTUP_CACHE_BLOCKS:
		return SIM_PHASE_PROFILE;
	default:
		return SIM_PHASE_DEVICES;
	}
}

/* ---- log line prefixes ---- */

void sim_dialect_stamp(char *buf, size_t size, enum sim_stamp_format fmt)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	switch (fmt) {
	case STAMP_SGLANG:
		strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
		break;
	case STAMP_TGI:
		strftime(buf, size, "%Y-%m-%dT%H:%M:%S.000000Z", &tm);
		break;
	case STAMP_TRTLLM:
		strftime(buf, size, "%m/%d/%Y-%H:%M:%S", &tm);
		break;
	default:
		strftime(buf, size, "%m-%d %H:%M:%S", &tm);
		break;
	}
}

/* "(EngineCore_0 pid=123) INFO 08-20 10:00:00 [core.py:74] " */
void sim_vlog(FILE *f, const char *who, const char *level, const char *where, const char *fmt, ...)
{
	char ts[32];
	va_list ap;

	sim_dialect_stamp(ts, sizeof(ts), STAMP_VLLM);
	fprintf(f, "(%s pid=%d) %s %s [%s] ", who, (int)getpid(), level, ts, where);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

/* "[2025-12-23 14:18:00 TP0] " */
void sim_slog(FILE *f, const char *fmt, ...)
{
	char ts[32];
	va_list ap;

	sim_dialect_stamp(ts, sizeof(ts), STAMP_SGLANG);
	fprintf(f, "[%s TP0] ", ts);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

/* "2025-03-02T10:10:00.000000Z  INFO text_generation_launcher: " */
void sim_tlog(FILE *f, const char *level, const char *target, const char *fmt, ...)
{
	char ts[40];
	va_list ap;

	sim_dialect_stamp(ts, sizeof(ts), STAMP_TGI);
	fprintf(f, "%s %5s %s: ", ts, level, target);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

/* "[08/20/2025-10:00:00] [TRT-LLM] [I] " */
void sim_rlog(FILE *f, const char *level, const char *fmt, ...)
{
	char ts[32];
	va_list ap;

	sim_dialect_stamp(ts, sizeof(ts), STAMP_TRTLLM);
	fprintf(f, "[%s] [TRT-LLM] [%s] ", ts, level);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

/* "435,136" as vLLM prints token counts. */
const char *sim_dialect_grouped(uint64_t v, char *buf, size_t size)
{
	char raw[32];
	size_t n, o = 0;

	snprintf(raw, sizeof(raw), "%" PRIu64, v);
	n = strlen(raw);
	for (size_t i = 0; i < n && o + 2 < size; i++) {
		if (i > 0 && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = raw[i];
	}
	buf[o] = 0;
	return buf;
}

const char *sim_dialect_model_of(const struct sim_dialect_options *opt, const struct sim_engine_config *ec)
{
	return opt->model_arg ? opt->model_arg : ec->model_name;
}

double sim_gib(double bytes)
{
	return bytes / SIM_GIB;
}

/* ---- start-up lines, phase by phase ---- */

static void vllm_phase(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
		       const struct sim_engine_info *info, const struct sim_timeline *tl, enum sim_phase phase,
		       const char *url)
{
	const char *ec0 = "EngineCore_0", *api = "APIServer";
	char a[32], b[32];

	switch (phase) {
	case SIM_PHASE_DEVICES:
		sim_vlog(f, api, "INFO", "api_server.py:1805", "vLLM API server version %s", SIM_VLLM_VERSION);
		sim_vlog(f, api, "INFO", "__init__.py:1750", "Using max model len %u", ec->max_model_len);
		sim_vlog(f, ec0, "INFO", "core.py:74",
			 "Initializing a V1 LLM engine (v%s) with config: model='%s', speculative_config=%s, "
			 "tensor_parallel_size=%u, pipeline_parallel_size=%u, data_parallel_size=%u, "
			 "quantization=%s, kv_cache_dtype=%s, max_seq_len=%u, enable_prefix_caching=%s",
			 SIM_VLLM_VERSION, sim_dialect_model_of(opt, ec),
			 ec->spec_method == SIM_SPEC_NONE ? "None" : sim_spec_method_to_string(ec->spec_method), ec->tp,
			 ec->pp ? ec->pp : 1, ec->dp ? ec->dp : 1,
			 ec->quant == SIM_QUANT_NONE ? "None" : sim_quant_to_string(ec->quant),
			 sim_kv_dtype_to_string(ec->kv_dtype), ec->max_model_len,
			 ec->enable_prefix_caching ? "True" : "False");
		sim_vlog(f, ec0, "INFO", "gpu_model_runner.py:1953", "Starting to load model %s...",
			 sim_dialect_model_of(opt, ec));
		break;
	case SIM_PHASE_WEIGHTS:
		sim_vlog(f, ec0, "INFO", "default_loader.py:262", "Loading weights took %.2f seconds",
			 tl->seconds[SIM_PHASE_WEIGHTS]);
		sim_vlog(f, ec0, "INFO", "gpu_model_runner.py:2007", "Model loading took %.4f GiB and %.6f seconds",
			 info ? info->weights_gib : 0.0, tl->seconds[SIM_PHASE_WEIGHTS]);
		break;
	case SIM_PHASE_PROFILE:
		sim_vlog(f, ec0, "INFO", "monitor.py:34", "torch.compile takes %.2f s in total",
			 tl->seconds[SIM_PHASE_PROFILE]);
		if (!info)
			break;
		sim_vlog(f, ec0, "INFO", "gpu_worker.py:276", "Available KV cache memory: %.2f GiB",
			 sim_gib(info->memory.kv_avail));
		sim_vlog(f, ec0, "INFO", "kv_cache_utils.py:849", "GPU KV cache size: %s tokens",
			 sim_dialect_grouped(info->memory.kv_tokens, a, sizeof(a)));
		sim_vlog(f, ec0, "INFO", "kv_cache_utils.py:853",
			 "Maximum concurrency for %s tokens per request: %.2fx",
			 sim_dialect_grouped(info->max_model_len, b, sizeof(b)),
			 (double)info->memory.kv_tokens / MAX(info->max_model_len, 1u));
		break;
	case SIM_PHASE_GRAPHS:
		sim_vlog(f, ec0, "INFO", "gpu_model_runner.py:2708",
			 "Graph capturing finished in %.0f secs, took 0.53 GiB", tl->seconds[SIM_PHASE_GRAPHS]);
		sim_vlog(f, ec0, "INFO", "core.py:214",
			 "init engine (profile, create kv cache, warmup model) took %.2f seconds",
			 tl->seconds[SIM_PHASE_PROFILE] + tl->seconds[SIM_PHASE_GRAPHS]);
		sim_vlog(f, api, "INFO", "api_server.py:1880", "Starting vLLM API server 0 on %s", url);
		fprintf(f, "(APIServer pid=%d) INFO:     Started server process [%d]\n", (int)getpid(), (int)getpid());
		fprintf(f, "(APIServer pid=%d) INFO:     Waiting for application startup.\n", (int)getpid());
		fprintf(f, "(APIServer pid=%d) INFO:     Application startup complete.\n", (int)getpid());
		break;
	default:
		break;
	}
}

static void llamacpp_phase(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
			   const struct sim_engine_info *info, enum sim_phase phase, const char *url)
{
	const char *hostport = strstr(url, "://") ? strstr(url, "://") + 3 : url;

	switch (phase) {
	case SIM_PHASE_DEVICES:
		fprintf(f, "build: %d (%s) with cc (GCC) %s for x86_64-linux-gnu\n", sim_llamacpp_build(opt),
			sim_llamacpp_commit(opt), __VERSION__);
		fprintf(f, "main: HTTP server is listening, hostname: %.*s, port: %s, http threads: 7\n",
			(int)strcspn(hostport, ":"), hostport,
			strrchr(hostport, ':') ? strrchr(hostport, ':') + 1 : "");
		fprintf(f, "main: loading model\n");
		fprintf(f, "srv    load_model: loading model '%s'\n", sim_dialect_model_of(opt, ec));
		fprintf(f,
			"ggml_cuda_init: found %u CUDA devices:\n  Device 0: NVIDIA %s, compute capability 9.0, "
			"VMM: yes\n",
			ec->gpus ? ec->gpus : 1, ec->gpu_name);
		break;
	case SIM_PHASE_WEIGHTS: {
		/* b4748 offloads nothing without --n-gpu-layers (its CUDA default is 0) */
		uint32_t all = ec->model.layers + 1,
			 on_gpu = opt->llamacpp.gpu_layers < 0 ? 0 : MIN((uint32_t)opt->llamacpp.gpu_layers, all);

		if (on_gpu > 0)
			fprintf(f, "load_tensors: offloading %u repeating layers to GPU\n",
				MIN(on_gpu, ec->model.layers));
		fprintf(f, "load_tensors: offloaded %u/%u layers to GPU\n", on_gpu, all);
		fprintf(f, "load_tensors: %12s model buffer size = %.2f MiB\n", on_gpu > 0 ? "CUDA0" : "CPU_Mapped",
			info ? info->memory.weights / (1024.0 * 1024.0) : 0.0);
		break;
	}
	case SIM_PHASE_PROFILE: {
		const char *dev = opt->llamacpp.gpu_layers > 0 ? "CUDA0" : "CPU";

		fprintf(f, "llama_init_from_model: n_seq_max     = %u\n", ec->max_num_seqs);
		fprintf(f, "llama_init_from_model: n_ctx         = %" PRIu64 "\n", ec->kv_tokens_fixed);
		fprintf(f, "llama_init_from_model: n_ctx_per_seq = %u\n", ec->max_model_len);
		fprintf(f, "llama_init_from_model: n_batch       = %u\n", opt->llamacpp.batch);
		fprintf(f, "llama_init_from_model: n_ubatch      = %u\n", opt->llamacpp.ubatch);
		fprintf(f, "llama_init_from_model: flash_attn    = %d\n", opt->llamacpp.flash_attn ? 1 : 0);
		if (info) {
			fprintf(f, "llama_kv_cache_init: %12s KV buffer size = %.2f MiB\n", dev,
				info->memory.kv_avail / (1024.0 * 1024.0));
			fprintf(f, "llama_init_from_model: %12s compute buffer size = %.2f MiB\n", dev,
				info->memory.act_peak / (1024.0 * 1024.0));
		}
		break;
	}
	case SIM_PHASE_GRAPHS:
		fprintf(f, "srv          init: initializing slots, n_slots = %u\n", ec->max_num_seqs);
		fprintf(f, "main: model loaded\n");
		fprintf(f, "main: server is listening on %s - starting the main loop\n", url);
		fprintf(f, "srv  update_slots: all slots are idle\n");
		break;
	default:
		break;
	}
}

static void sglang_phase(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
			 const struct sim_engine_info *info, const struct sim_timeline *tl, enum sim_phase phase,
			 const char *url)
{
	double mem = ec->gpu.mem_bytes / SIM_GIB, w = info ? sim_gib(info->memory.weights) : 0;
	double kv = info ? sim_gib(info->memory.kv_avail) : 0;

	switch (phase) {
	case SIM_PHASE_DEVICES:
		sim_slog(f,
			 "server_args=ServerArgs(model_path='%s', tp_size=%u, mem_fraction_static=%g, "
			 "max_running_requests=%u, chunked_prefill_size=%u, context_length=%u)",
			 sim_dialect_model_of(opt, ec), ec->tp, ec->gpu_memory_utilization, ec->max_num_seqs,
			 ec->max_num_batched_tokens, ec->max_model_len);
		sim_slog(f, "Init torch distributed begin.");
		sim_slog(f, "Init torch distributed ends. mem usage=0.00 GB");
		sim_slog(f, "Load weight begin. avail mem=%.2f GB", mem);
		break;
	case SIM_PHASE_WEIGHTS:
		sim_slog(f,
			 "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=%.2f GB, mem "
			 "usage=%.2f GB.",
			 mem - w, w);
		break;
	case SIM_PHASE_PROFILE:
		if (!info)
			break;
		sim_slog(f, "KV Cache is allocated. #tokens: %" PRIu64 ", K size: %.2f GB, V size: %.2f GB",
			 info->memory.kv_tokens, kv / 2, kv / 2);
		sim_slog(f, "Memory pool end. avail mem=%.2f GB", mem - w - kv);
		break;
	case SIM_PHASE_GRAPHS:
		sim_slog(f, "Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB",
			 mem - w - kv);
		sim_slog(f, "Capture cuda graph end. Time elapsed: %.2f s. mem usage=0.41 GB. avail mem=%.2f GB.",
			 tl->seconds[SIM_PHASE_GRAPHS], mem - w - kv - 0.41);
		if (info)
			sim_slog(f,
				 "max_total_num_tokens=%" PRIu64 ", chunked_prefill_size=%u, max_prefill_tokens=16384, "
				 "max_running_requests=%u, context_len=%u",
				 info->memory.kv_tokens, ec->max_num_batched_tokens, ec->max_num_seqs,
				 info->max_model_len);
		fprintf(f,
			"INFO:     Started server process [%d]\nINFO:     Waiting for application startup.\n"
			"INFO:     Application startup complete.\n"
			"INFO:     Uvicorn running on %s (Press CTRL+C to quit)\n",
			(int)getpid(), url);
		sim_slog(f, "The server is fired up and ready to roll!");
		break;
	default:
		break;
	}
}

static void tgi_phase(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
		      const struct sim_engine_info *info, const struct sim_timeline *tl, enum sim_phase phase)
{
	const char *L = "text_generation_launcher", *R = "text_generation_router_v3";

	switch (phase) {
	case SIM_PHASE_DEVICES:
		sim_tlog(f, "INFO", L,
			 "Args { model_id: \"%s\", num_shard: Some(%u), max_total_tokens: Some(%u), "
			 "max_batch_prefill_tokens: Some(%u) }",
			 sim_dialect_model_of(opt, ec), ec->tp, ec->max_model_len, ec->max_num_batched_tokens);
		sim_tlog(f, "INFO", "download: text_generation_launcher", "Starting check and download process for %s",
			 sim_dialect_model_of(opt, ec));
		sim_tlog(f, "INFO", "shard-manager: text_generation_launcher", "Starting shard rank=0");
		break;
	case SIM_PHASE_WEIGHTS:
		sim_tlog(f, "INFO", L, "Server started at unix:///tmp/text-generation-server-0");
		sim_tlog(f, "INFO", "shard-manager: text_generation_launcher", "Shard ready in %.2fs rank=0",
			 tl->seconds[SIM_PHASE_DEVICES] + tl->seconds[SIM_PHASE_WEIGHTS]);
		sim_tlog(f, "INFO", L, "Starting Webserver");
		break;
	case SIM_PHASE_PROFILE:
		sim_tlog(f, "INFO", R, "backends/v3/src/lib.rs:125: Warming up model");
		break;
	case SIM_PHASE_GRAPHS:
		if (info)
			sim_tlog(f, "INFO", R, "backends/v3/src/lib.rs:137: Setting max batch total tokens to %" PRIu64,
				 info->memory.kv_tokens);
		sim_tlog(f, "INFO", R, "backends/v3/src/lib.rs:166: Using backend V3");
		sim_tlog(f, "INFO", "text_generation_router::server", "router/src/server.rs:2484: Connected");
		break;
	default:
		break;
	}
}

static void trtllm_phase(FILE *f, const struct sim_engine_config *ec, const struct sim_engine_info *info,
			 enum sim_phase phase, const char *url)
{
	switch (phase) {
	case SIM_PHASE_DEVICES:
		fprintf(f, "[TensorRT-LLM] TensorRT-LLM version: %s\n", SIM_TRTLLM_VERSION);
		sim_rlog(f, "I", "Using LLM with PyTorch backend");
		break;
	case SIM_PHASE_WEIGHTS:
		sim_rlog(f, "I",
			 "Memory used after loading model weights (inside torch) in memory usage profiling: %.2f GiB",
			 info ? sim_gib(info->memory.weights) : 0.0);
		break;
	case SIM_PHASE_PROFILE:
		if (!info)
			break;
		if (info->max_model_len < ec->max_model_len ||
		    info->check.max_model_len_used < info->check.max_model_len) {
			fprintf(f,
				"[TensorRT-LLM][WARNING] maxAttentionWindowVec too large to fit at least one sequence "
				"in kvCache. Old: (%u), New: (%u)\n",
				info->check.max_model_len, info->check.max_model_len_used);
			fprintf(f, "[TensorRT-LLM][WARNING] maxSequenceLen is reduced to maxAttentionWindow: %u\n",
				info->check.max_model_len_used);
		}
		fprintf(f, "[TensorRT-LLM][INFO] Number of tokens per block: 32.\n");
		fprintf(f,
			"[TensorRT-LLM][INFO] [MemUsageChange] Allocated %.2f GiB for max tokens in paged KV cache "
			"(%" PRIu64 ").\n",
			sim_gib(info->memory.kv_avail), info->memory.kv_tokens);
		break;
	case SIM_PHASE_GRAPHS:
		fprintf(f,
			"INFO:     Started server process [%d]\nINFO:     Waiting for application startup.\n"
			"INFO:     Application startup complete.\n"
			"INFO:     Uvicorn running on %s (Press CTRL+C to quit)\n",
			(int)getpid(), url);
		break;
	default:
		break;
	}
}

void sim_dialect_print_phase(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
			     const struct sim_engine_info *info, const struct sim_timeline *tl, enum sim_phase phase,
			     const char *url)
{
	switch (opt->dialect) {
	case SIM_DIALECT_LLAMACPP:
		llamacpp_phase(f, opt, ec, info, phase, url);
		break;
	case SIM_DIALECT_SGLANG:
		sglang_phase(f, opt, ec, info, tl, phase, url);
		break;
	case SIM_DIALECT_TGI:
		tgi_phase(f, opt, ec, info, tl, phase);
		break;
	case SIM_DIALECT_TRTLLM:
		trtllm_phase(f, ec, info, phase, url);
		break;
	default:
		vllm_phase(f, opt, ec, info, tl, phase, url);
		break;
	}
	fflush(f);
}
