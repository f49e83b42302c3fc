/* perf-memory.c — goodput-sim's memory budget, the start-up checks that
 * follow from it, and how long a start-up takes (PERFMODEL.md §4.3, §4.5).
 *
 * Each engine sizes its KV cache by its own rule (enum sim_memory_rules):
 * vLLM and TGI give it what is left of memory × fraction after the weights
 * and the activation peak of a profiling forward at the chunk size; SGLang's
 * static fraction holds weights and KV cache together; TensorRT-LLM gives the
 * KV cache a fraction of what is free after the model; llama.cpp allocates
 * its whole context up front. The refusals follow: the weights do not fit
 * the GPU at all (a CUDA OOM while loading), nothing is left for cache
 * blocks, or the cache cannot hold one max_model_len sequence — which vLLM,
 * TGI and llama.cpp refuse, SGLang and TensorRT-LLM answer by serving
 * shorter sequences. The check returns the fact (struct sim_startup_check);
 * err carries vLLM's wording, and the server words the fact in the dialect
 * it speaks. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>

#include "macro.h"
#include "perfmodel.h"

void sim_perf_memory(const struct sim_perf *p, const struct sim_memory_policy *policy, uint32_t max_num_batched_tokens,
		     uint32_t max_num_seqs, uint32_t block_size, struct sim_memory *ret)
{
	const struct sim_model *m = &p->model;
	const struct sim_profile *pr = &p->profile;
	struct sim_memory mem = { .block_size = block_size ? block_size : 16 };
	double usable = p->gpu.mem_bytes - SIM_CUDA_RESERVED_BYTES;

	/* Each GPU holds 1/(TP·PP) of the model, and a drafter's share beside it. */
	mem.weights = p->w_resident / p->tp / (p->pp ? p->pp : 1) + p->draft_weights_gpu;
	/* The profiling forward at max_num_batched_tokens (§4.3): two live activations of
	 * (2d + ffn/TP) bf16 per token, fp32 logits for every sequence, graphs, non-torch,
	 * and NCCL's buffers when the GPUs talk (TP all-reduces, PP sends). */
	mem.act_peak = 2.0 * max_num_batched_tokens * (2.0 * m->hidden + (double)m->ffn / p->tp) * 2.0 +
		       4.0 * max_num_seqs * (double)m->vocab +
		       (pr->act_graphs_gib + pr->act_base_gib + (p->tp * p->pp > 1 ? pr->act_nccl_gib : 0.0)) * SIM_GIB;
	/* A drafter's layers keep their KV in the same cache. */
	mem.kv_bytes_token_gpu = p->kv_bytes_token_gpu + p->draft_kv_bytes_token_gpu;
	switch (policy->rules) {
	case SIM_MEMORY_SGLANG:
		mem.budget = p->gpu.mem_bytes * policy->fraction;
		mem.kv_avail = mem.budget - mem.weights;
		break;
	case SIM_MEMORY_TRTLLM:
		mem.budget = usable;
		mem.kv_avail = policy->fraction * (usable - mem.weights - mem.act_peak);
		break;
	case SIM_MEMORY_LLAMACPP:
		mem.budget = usable;
		mem.kv_avail = (double)policy->kv_tokens * mem.kv_bytes_token_gpu;
		mem.num_blocks = (policy->kv_tokens + mem.block_size - 1) / mem.block_size;
		break;
	case SIM_MEMORY_VLLM:
	case SIM_MEMORY_TGI:
	default:
		mem.budget = p->gpu.mem_bytes * policy->fraction;
		mem.kv_avail = mem.budget - mem.weights - mem.act_peak;
		break;
	}
	if (policy->rules != SIM_MEMORY_LLAMACPP && mem.kv_avail > 0)
		mem.num_blocks = (uint64_t)floor(mem.kv_avail / (mem.block_size * mem.kv_bytes_token_gpu));
	mem.kv_tokens = mem.num_blocks * mem.block_size;
	*ret = mem;
}

/* Refusals of the arguments, before any memory is looked at. */
static int check_config(const struct sim_perf *p, const struct sim_memory_policy *policy, uint32_t gpus,
			uint32_t max_model_len, uint32_t max_num_seqs, uint32_t max_num_batched_tokens,
			struct error *err)
{
	const struct sim_model *m = &p->model;

	if (p->tp > gpus)
		return error_set(err, -EINVAL,
				 "AssertionError: please set tensor_parallel_size (%u) to less than max local gpu "
				 "count (%u)",
				 p->tp, gpus);
	if (p->tp * p->pp > gpus)
		return error_set(err, -EINVAL,
				 "AssertionError: please ensure that world_size (%u) is less than than max local gpu "
				 "count (%u)",
				 p->tp * p->pp, gpus);
	if (m->heads % p->tp != 0)
		return error_set(err, -EINVAL,
				 "ValueError: Total number of attention heads (%u) must be divisible by tensor "
				 "parallel size (%u).",
				 m->heads, p->tp);
	if (p->tp >= m->kv_heads ? p->tp % m->kv_heads != 0 : m->kv_heads % p->tp != 0)
		return error_set(err, -EINVAL,
				 "AssertionError: the number of key/value heads (%u) and tensor parallel size (%u) "
				 "must divide one another",
				 m->kv_heads, p->tp);
	if (policy->rules != SIM_MEMORY_LLAMACPP && policy->fraction > 1.0)
		return error_set(err, -EINVAL, "ValueError: GPU memory utilization must be less than 1.0. Got %g.",
				 policy->fraction);
	/* llama.cpp only warns about a context beyond the training context. */
	if (policy->rules != SIM_MEMORY_LLAMACPP && max_model_len > m->max_position)
		return error_set(err, -EINVAL,
				 "ValueError: User-specified max_model_len (%u) is greater than the derived "
				 "max_model_len (max_position_embeddings=%u or model_max_length=None in model's "
				 "config.json). This may lead to incorrect model outputs or CUDA errors. To allow "
				 "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
				 max_model_len, m->max_position);
	if (policy->rules == SIM_MEMORY_VLLM && max_num_batched_tokens < max_num_seqs)
		return error_set(err, -EINVAL,
				 "ValueError: max_num_batched_tokens (%u) must be greater than or equal to "
				 "max_num_seqs (%u).",
				 max_num_batched_tokens, max_num_seqs);
	return 0;
}

static int no_cache_blocks(const struct sim_perf *p, const struct sim_memory *mem, struct error *err)
{
	return error_set(err, -ENOMEM,
			 "ValueError: No available memory for the cache blocks. Try increasing "
			 "`gpu_memory_utilization` when initializing the engine. (weights %.2f GiB + "
			 "activation peak %.2f GiB per GPU vs %.2f GiB = %.0f GB x gpu_memory_utilization)",
			 mem->weights / SIM_GIB, mem->act_peak / SIM_GIB, mem->budget / SIM_GIB,
			 p->gpu.mem_bytes / 1e9);
}

/* The cache cannot hold one max_model_len sequence: refused (fail) or the
 * engine serves what fits. */
static int kv_too_small(struct sim_startup_check *c, bool fail, struct error *err)
{
	const struct sim_memory *mem = &c->mem;

	c->est_max_model_len = mem->kv_tokens;
	c->kv_need = ceil((double)c->max_model_len / mem->block_size) * mem->block_size * mem->kv_bytes_token_gpu;
	if (!fail) {
		c->max_model_len_used = (uint32_t)MIN(mem->kv_tokens, (uint64_t)c->max_model_len);
		return 0;
	}
	c->cause = SIM_STARTUP_KV_CACHE;
	return error_set(err, -ENOSPC,
			 "ValueError: To serve at least one request with the models's max seq len (%u), (%.2f GiB KV "
			 "cache is needed, which is larger than the available KV cache memory (%.2f GiB). Based on the "
			 "available memory, the estimated maximum model length is %" PRIu64 ". Try increasing "
			 "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			 c->max_model_len, c->kv_need / SIM_GIB, MAX(mem->kv_avail, 0.0) / SIM_GIB, mem->kv_tokens);
}

static int check_memory(const struct sim_perf *p, const struct sim_memory_policy *policy,
			uint32_t max_num_batched_tokens, struct sim_startup_check *c, struct error *err)
{
	const struct sim_memory *mem = &c->mem;
	double usable = p->gpu.mem_bytes - SIM_CUDA_RESERVED_BYTES;

	if (mem->weights > usable) {
		c->cause = SIM_STARTUP_WEIGHTS;
		return error_set(err, -EFBIG,
				 "torch.OutOfMemoryError: CUDA out of memory. Weights of %.2f GiB per GPU do not fit "
				 "in GPU 0's total capacity of %.2f GiB.",
				 mem->weights / SIM_GIB, p->gpu.mem_bytes / SIM_GIB);
	}
	switch (policy->rules) {
	case SIM_MEMORY_LLAMACPP:
		/* All of it allocated up front: weights, the whole context, the compute buffers. */
		if (mem->weights + mem->kv_avail > usable)
			return kv_too_small(c, true, err);
		if (mem->weights + mem->kv_avail + mem->act_peak > usable) {
			c->cause = SIM_STARTUP_CACHE_BLOCKS;
			return no_cache_blocks(p, mem, err);
		}
		return 0;
	case SIM_MEMORY_TGI:
		/* The warm-up runs a prefill of max_batch_prefill_tokens. */
		if (mem->budget - mem->weights < mem->act_peak || mem->num_blocks == 0) {
			c->cause = SIM_STARTUP_CACHE_BLOCKS;
			return no_cache_blocks(p, mem, err);
		}
		break;
	case SIM_MEMORY_SGLANG:
		/* Activations and graphs live outside the static pool. */
		if (mem->kv_avail <= 0 || mem->num_blocks == 0 || p->gpu.mem_bytes - mem->budget < mem->act_peak) {
			c->cause = SIM_STARTUP_CACHE_BLOCKS;
			return no_cache_blocks(p, mem, err);
		}
		break;
	default:
		if (mem->kv_avail <= 0 || mem->num_blocks == 0) {
			c->cause = SIM_STARTUP_CACHE_BLOCKS;
			return no_cache_blocks(p, mem, err);
		}
		break;
	}
	(void)max_num_batched_tokens;
	if (mem->kv_tokens < c->max_model_len)
		return kv_too_small(c,
				    policy->rules == SIM_MEMORY_VLLM || policy->rules == SIM_MEMORY_TGI ||
					    (policy->rules == SIM_MEMORY_TRTLLM && policy->fail_fast),
				    err);
	return 0;
}

int sim_perf_check_startup(const struct sim_perf *p, const struct sim_memory_policy *policy, uint32_t gpus,
			   uint32_t max_model_len, uint32_t max_num_seqs, uint32_t max_num_batched_tokens,
			   struct sim_startup_check *ret_check, struct error *err)
{
	struct sim_startup_check c = {
		.max_model_len = max_model_len,
		.max_model_len_used = max_model_len,
	};
	int r;

	sim_perf_memory(p, policy, max_num_batched_tokens, max_num_seqs, 16, &c.mem);
	r = check_config(p, policy, gpus, max_model_len, max_num_seqs, max_num_batched_tokens, err);
	if (r < 0)
		c.cause = SIM_STARTUP_CONFIG;
	else
		r = check_memory(p, policy, max_num_batched_tokens, &c, err);
	if (ret_check)
		*ret_check = c;
	return r;
}

double sim_perf_startup_sec(const struct sim_perf *p)
{
	const struct sim_profile *pr = &p->profile;

	return pr->start_proc_s + (p->tp * p->pp > 1 ? pr->start_tp_s : 0.0) + p->w_resident / (pr->load_gbps * 1e9) +
	       pr->start_compile_s + pr->start_profile_s + pr->start_graphs_s;
}

void sim_startup_model_init(struct sim_startup_model *m)
{
	*m = (struct sim_startup_model){
		.enabled = false,
		.weights_read_gbps = 2.0,
		.init_seconds = 20.0,
		.graph_capture_seconds = 15.0,
	};
}

void sim_startup_model_phases(const struct sim_perf *p, const struct sim_startup_model *m,
			      struct sim_startup_phases *ret)
{
	struct sim_startup_phases ph = { 0 };

	ph.weights_gb = p->w_resident / 1e9;
	ph.weights_s = m->weights_read_gbps > 0 ? ph.weights_gb / m->weights_read_gbps : 0.0;
	ph.init_s = m->init_seconds + SIM_STARTUP_TP_RANK_SECONDS * (double)(p->tp * p->pp - 1);
	ph.graphs_s = m->graph_capture_seconds;
	ph.total_s = ph.weights_s + ph.init_s + ph.graphs_s;
	*ret = ph;
}
