/* dialect-errors.c — what each emulated engine says when it cannot serve:
 * its out-of-memory errors by cause, a GPU another process holds, its
 * --version, the shape of its HTTP error bodies and its words for a prompt
 * over the context. Sources as in dialect-text.c (sim/README.md lists them;
 * tests/study/failures holds the engines' real texts beside these). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dialect-internal.h"
#include "macro.h"

/* ---- start-up failures ---- */

/* torch's CUDA OOM as vLLM, SGLang and TGI print it while the weights load. */
static void torch_oom(char *buf, size_t size, const struct sim_engine_config *ec, const struct sim_memory *mem)
{
	double total = ec->gpu.mem_bytes / SIM_GIB;

	snprintf(
		buf, size,
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity "
		"of %.2f GiB of which %.2f MiB is free. Including non-PyTorch memory, this process has %.2f GiB memory "
		"in use. Of the allocated memory %.2f GiB is allocated by PyTorch, and 62.31 MiB is reserved by "
		"PyTorch but unallocated. If reserved but unallocated memory is large try setting "
		"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
		"Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
		total, 301.06, total - 0.3, MIN(sim_gib(mem->weights), total - 0.5));
}

static void vllm_failure(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
			 const struct sim_startup_check *c, const char *msg)
{
	char oom[768];
	const char *ec0 = "EngineCore_0";
	char where[] = "core.py:700";

	sim_vlog(f, ec0, "ERROR", where, "EngineCore failed to start.");
	switch (c->cause) {
	case SIM_STARTUP_WEIGHTS:
		sim_vlog(f, ec0, "ERROR", where,
			 "  File \"/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/"
			 "default_loader.py\", line 269, in load_weights");
		torch_oom(oom, sizeof(oom), ec, &c->mem);
		sim_vlog(f, ec0, "ERROR", where, "%s", oom);
		break;
	case SIM_STARTUP_KV_CACHE:
		sim_vlog(f, ec0, "ERROR", where,
			 "ValueError: To serve at least one request with the models's max seq len (%u), (%.2f GiB KV "
			 "cache is needed, which is larger than the available KV cache memory (%.2f GiB). Based on "
			 "the available memory, the estimated maximum model length is %" PRIu64 ". Try increasing "
			 "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			 c->max_model_len, sim_gib(c->kv_need), sim_gib(MAX(c->mem.kv_avail, 0.0)),
			 c->est_max_model_len);
		break;
	case SIM_STARTUP_CACHE_BLOCKS:
		sim_vlog(f, ec0, "ERROR", where,
			 "ValueError: No available memory for the cache blocks. Try increasing "
			 "`gpu_memory_utilization` when initializing the engine.");
		break;
	default:
		fprintf(f, "%s\n", msg);
		return;
	}
	fprintf(f, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n");
	(void)opt;
}

static void llamacpp_failure(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
			     const struct sim_startup_check *c, const char *msg)
{
	const char *m = sim_dialect_model_of(opt, ec);
	double usable_mib = (ec->gpu.mem_bytes - SIM_CUDA_RESERVED_BYTES) / (1024.0 * 1024.0);

	switch (c->cause) {
	case SIM_STARTUP_WEIGHTS:
		fprintf(f,
			"ggml_backend_cuda_buffer_type_alloc_buffer: allocating %.2f MiB on device 0: cudaMalloc "
			"failed: out of memory\n",
			c->mem.weights / (1024.0 * 1024.0));
		fprintf(f, "alloc_tensor_range: failed to allocate CUDA0 buffer of size %.0f\n", c->mem.weights);
		fprintf(f, "llama_model_load: error loading model: unable to allocate CUDA0 buffer\n");
		fprintf(f, "llama_model_load_from_file_impl: failed to load model\n");
		fprintf(f, "common_init_from_params: failed to load model '%s'\n", m);
		break;
	case SIM_STARTUP_KV_CACHE:
		fprintf(f,
			"ggml_backend_cuda_buffer_type_alloc_buffer: allocating %.2f MiB on device 0: cudaMalloc "
			"failed: out of memory\n",
			c->mem.kv_avail / (1024.0 * 1024.0));
		fprintf(f, "llama_kv_cache_init: failed to allocate buffer for kv cache\n");
		fprintf(f, "llama_init_from_model: llama_kv_cache_init() failed for self-attention cache\n");
		fprintf(f, "common_init_from_params: failed to create context with model '%s'\n", m);
		break;
	case SIM_STARTUP_CACHE_BLOCKS:
		fprintf(f,
			"ggml_backend_cuda_buffer_type_alloc_buffer: allocating %.2f MiB on device 0: cudaMalloc "
			"failed: out of memory\n",
			MIN(c->mem.act_peak / (1024.0 * 1024.0), usable_mib));
		fprintf(f, "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size %.0f\n", c->mem.act_peak);
		fprintf(f, "llama_init_from_model: failed to allocate compute buffers\n");
		fprintf(f, "common_init_from_params: failed to create context with model '%s'\n", m);
		break;
	default:
		fprintf(f, "%s\n", msg);
		return;
	}
	fprintf(f, "srv    load_model: failed to load model, '%s'\n", m);
	fprintf(f, "main: exiting due to model loading error\n");
}

static void sglang_failure(FILE *f, const struct sim_engine_config *ec, const struct sim_startup_check *c,
			   const char *msg)
{
	char oom[768];
	switch (c->cause) {
	case SIM_STARTUP_WEIGHTS:
		sim_slog(f, "Scheduler hit an exception: Traceback (most recent call last):");
		torch_oom(oom, sizeof(oom), ec, &c->mem);
		fprintf(f, "%s\n", oom);
		break;
	case SIM_STARTUP_CACHE_BLOCKS:
	case SIM_STARTUP_KV_CACHE:
		sim_slog(f, "Scheduler hit an exception: Traceback (most recent call last):");
		fprintf(f, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n");
		break;
	default:
		fprintf(f, "%s\n", msg);
		return;
	}
	fprintf(f, "[%d] Received sigquit from a child process. It usually means the child failed.\n", (int)getpid());
}

static void tgi_failure(FILE *f, const struct sim_engine_config *ec, const struct sim_startup_check *c, const char *msg)
{
	char oom[768];
	const char *L = "text_generation_launcher";

	switch (c->cause) {
	case SIM_STARTUP_WEIGHTS:
		sim_tlog(f, "ERROR", "shard-manager: text_generation_launcher",
			 "Shard complete standard error output:");
		torch_oom(oom, sizeof(oom), ec, &c->mem);
		fprintf(f, "%s\n", oom);
		sim_tlog(f, "ERROR", L, "Shard 0 failed to start");
		fprintf(f, "Error: ShardCannotStart\n");
		break;
	case SIM_STARTUP_KV_CACHE:
		sim_tlog(f, "ERROR", "text_generation_router", "Not enough memory to handle `max_total_tokens=%u`",
			 c->max_model_len);
		fprintf(f, "Error: Backend(NotEnoughMemory(%u))\n", c->max_model_len);
		sim_tlog(f, "ERROR", L, "Webserver Crashed");
		fprintf(f, "Error: WebserverFailed\n");
		break;
	case SIM_STARTUP_CACHE_BLOCKS:
		fprintf(f,
			"RuntimeError: Not enough memory to handle %u prefill tokens. You need to decrease "
			"`--max-batch-prefill-tokens`\n",
			ec->max_num_batched_tokens);
		sim_tlog(f, "ERROR", L, "Method Warmup encountered an error.");
		sim_tlog(f, "ERROR", L, "Webserver Crashed");
		fprintf(f, "Error: WebserverFailed\n");
		break;
	default:
		fprintf(f, "%s\n", msg);
		break;
	}
}

static void trtllm_failure(FILE *f, const struct sim_engine_config *ec, const struct sim_startup_check *c,
			   const char *msg)
{
	double total = ec->gpu.mem_bytes / SIM_GIB, w = sim_gib(c->mem.weights);

	switch (c->cause) {
	case SIM_STARTUP_KV_CACHE:
		fprintf(f,
			"[TensorRT-LLM][WARNING] maxAttentionWindowVec too large to fit at least one sequence in "
			"kvCache. Old: (%u), New: (%" PRIu64 ")\n",
			c->max_model_len, c->est_max_model_len);
		fprintf(f,
			"RuntimeError: Attention window too large to fit even a single sequence in the KV cache. "
			"Failing fast rather than attempting an adjustment of the window sizes. Old: (%u), New: "
			"(%" PRIu64 ")\n",
			c->max_model_len, c->est_max_model_len);
		return;
	case SIM_STARTUP_WEIGHTS:
	case SIM_STARTUP_CACHE_BLOCKS:
		sim_rlog(f, "E",
			 "Failed to initialize executor on rank 0: Executor creation failed due to insufficient GPU "
			 "memory.");
		fprintf(f,
			"\nThe following component could not be created: %s\nTotal GPU memory (GiB): %.2f\n"
			"Free GPU memory before component creation attempt (GiB): %.2f\n",
			c->cause == SIM_STARTUP_WEIGHTS ? "Model" : "KV cache", total,
			c->cause == SIM_STARTUP_WEIGHTS ? total - 0.5 : MAX(total - 0.5 - w, 0.0));
		return;
	default:
		fprintf(f, "%s\n", msg);
		return;
	}
}

void sim_dialect_print_failure(FILE *f, const struct sim_dialect_options *opt, const struct sim_engine_config *ec,
			       const struct sim_startup_check *check, const char *msg)
{
	switch (opt->dialect) {
	case SIM_DIALECT_LLAMACPP:
		llamacpp_failure(f, opt, ec, check, msg);
		break;
	case SIM_DIALECT_SGLANG:
		sglang_failure(f, ec, check, msg);
		break;
	case SIM_DIALECT_TGI:
		tgi_failure(f, ec, check, msg);
		break;
	case SIM_DIALECT_TRTLLM:
		trtllm_failure(f, ec, check, msg);
		break;
	default:
		vllm_failure(f, opt, ec, check, msg);
		break;
	}
	fflush(f);
}

void sim_dialect_print_gpu_busy(FILE *f, const struct sim_dialect_options *opt, unsigned gpu, long holder_pid)
{
	char held[64] = "";

	if (holder_pid > 0)
		snprintf(held, sizeof(held), ": held by pid %ld", holder_pid);
	/* cudaErrorDevicesUnavailable, as each engine surfaces it; "GPU n busy" is goodput-sim's. */
	if (opt->dialect == SIM_DIALECT_LLAMACPP)
		fprintf(f,
			"ggml_cuda_init: failed to initialize CUDA: CUDA-capable device(s) is/are busy or unavailable "
			"(GPU %u busy%s)\n",
			gpu, held);
	else
		fprintf(f,
			"RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable (GPU %u busy%s)\n",
			gpu, held);
	fflush(f);
}

void sim_dialect_print_version(const struct sim_dialect_options *opt)
{
	switch (opt->dialect) {
	case SIM_DIALECT_LLAMACPP:
		/* common/arg.cpp: both lines to stderr. */
		fprintf(stderr, "version: %d (%s)\nbuilt with cc (GCC) %s for x86_64-linux-gnu\n",
			sim_llamacpp_build(opt), sim_llamacpp_commit(opt), __VERSION__);
		break;
	case SIM_DIALECT_TGI:
		printf("text-generation-launcher %s\n", SIM_TGI_VERSION);
		break;
	case SIM_DIALECT_SGLANG:
		printf("%s\n", SIM_SGLANG_VERSION);
		break;
	case SIM_DIALECT_TRTLLM:
		printf("[TensorRT-LLM] TensorRT-LLM version: %s\n%s\n", SIM_TRTLLM_VERSION, SIM_TRTLLM_VERSION);
		break;
	default:
		printf("%s\n", SIM_VLLM_VERSION);
		break;
	}
}

/* ---- HTTP error bodies ---- */

static char *print_json(cJSON *root)
{
	char *printed, *out;

	if (!root)
		return NULL;
	printed = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!printed)
		return NULL;
	out = strdup(printed);
	cJSON_free(printed);
	return out;
}

static const char *llamacpp_type(unsigned status)
{
	switch (status) {
	case 400:
		return "invalid_request_error";
	case 401:
		return "authentication_error";
	case 403:
		return "permission_error";
	case 404:
		return "not_found_error";
	case 501:
		return "not_supported_error";
	case 503:
		return "unavailable_error";
	default:
		return "server_error";
	}
}

char *sim_dialect_error_json(const struct sim_dialect_options *opt, unsigned status, const char *type,
			     const char *message)
{
	cJSON *root = cJSON_CreateObject(), *e;

	if (!root)
		return NULL;
	switch (opt->dialect) {
	case SIM_DIALECT_LLAMACPP:
		/* {"error": {"code", "message", "type"}} (format_error_response) */
		e = cJSON_AddObjectToObject(root, "error");
		if (!e || !cJSON_AddNumberToObject(e, "code", status) ||
		    !cJSON_AddStringToObject(e, "message", message) ||
		    !cJSON_AddStringToObject(e, "type", llamacpp_type(status)))
			goto oom;
		break;
	case SIM_DIALECT_TGI:
		/* {"error", "error_type"} (router ErrorResponse) */
		if (!cJSON_AddStringToObject(root, "error", message) ||
		    !cJSON_AddStringToObject(root, "error_type",
					     status == 429   ? "overloaded"
					     : status == 422 ? "validation"
					     : status >= 500 ? "generation"
							     : "validation"))
			goto oom;
		break;
	case SIM_DIALECT_SGLANG:
	case SIM_DIALECT_TRTLLM:
		/* {"object": "error", "message", "type", "param", "code"} */
		if (!cJSON_AddStringToObject(root, "object", "error") ||
		    !cJSON_AddStringToObject(root, "message", message) ||
		    !cJSON_AddStringToObject(root, "type", type) || !cJSON_AddNullToObject(root, "param") ||
		    !cJSON_AddNumberToObject(root, "code", status))
			goto oom;
		break;
	default:
		e = cJSON_AddObjectToObject(root, "error");
		if (!e || !cJSON_AddStringToObject(e, "message", message) ||
		    !cJSON_AddStringToObject(e, "type", type) || !cJSON_AddNullToObject(e, "param") ||
		    !cJSON_AddNumberToObject(e, "code", status))
			goto oom;
		break;
	}
	return print_json(root);
oom:
	cJSON_Delete(root);
	return NULL;
}

unsigned sim_dialect_context_error(const struct sim_dialect_options *opt, uint32_t max_model_len, uint32_t n_prompt,
				   uint64_t max_tokens, bool prompt_alone, char *buf, size_t size)
{
	switch (opt->dialect) {
	case SIM_DIALECT_LLAMACPP:
		snprintf(buf, size, "the request exceeds the available context size, try increasing it");
		return 400;
	case SIM_DIALECT_TGI:
		if (prompt_alone)
			snprintf(buf, size, "Input validation error: `inputs` must have less than %u tokens. Given: %u",
				 opt->max_input_tokens ? opt->max_input_tokens : max_model_len, n_prompt);
		else
			snprintf(buf, size,
				 "Input validation error: `inputs` tokens + `max_new_tokens` must be <= %u. Given: %u "
				 "`inputs` tokens and %" PRIu64 " `max_new_tokens`",
				 max_model_len, n_prompt, max_tokens);
		return 422;
	case SIM_DIALECT_SGLANG:
		if (prompt_alone)
			snprintf(buf, size,
				 "The input (%u tokens) is longer than the model's context length (%u tokens).",
				 n_prompt, max_model_len);
		else
			snprintf(buf, size,
				 "Requested token count exceeds the model's maximum context length of %u tokens. You "
				 "requested a total of %" PRIu64
				 " tokens: %u tokens from the input messages and %" PRIu64
				 " tokens for the completion. Please reduce the number of tokens in the input messages "
				 "or the completion to fit within the limit.",
				 max_model_len, n_prompt + max_tokens, n_prompt, max_tokens);
		return 400;
	default:
		if (prompt_alone)
			snprintf(buf, size,
				 "This model's maximum context length is %u tokens. However, your request has %u input "
				 "tokens. Please reduce the length of the input messages.",
				 max_model_len, n_prompt);
		else
			snprintf(buf, size,
				 "This model's maximum context length is %u tokens. However, you requested %" PRIu64
				 " tokens (%u in the messages, %" PRIu64
				 " in the completion). Please reduce the length of the messages or completion.",
				 max_model_len, n_prompt + max_tokens, n_prompt, max_tokens);
		return 400;
	}
}
