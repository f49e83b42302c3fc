/* test-engine.c — the engine's scheduler as a user of vLLM would check it:
 * FCFS order and the token budget, chunked prefill with the first token at
 * the last chunk, decodes scheduled before prefills, preemption of the newest
 * request when the KV cache runs out, prefix-cache hits shortening prefill,
 * abort freeing blocks, late callers catching up on absolute step ends, and
 * start-up/submit errors in vLLM's wording. Jitter is off unless stated. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "tests.h"

#define MAX_EV 20000

struct ev {
	char kind; /* 't' token, 'f' finished, 'p' preempted */
	uint64_t id;
	uint32_t index;
	uint64_t t;
	bool last;
	uint32_t n_cached;
};

static struct ev evs[MAX_EV];
static size_t n_evs;
static struct sim_batch last_batch;
static uint64_t n_steps;

static void on_token(void *u, uint64_t id, uint32_t index, uint64_t t, bool last)
{
	CHECK(n_evs < MAX_EV);
	evs[n_evs++] = (struct ev){ 't', id, index, t, last, 0 };
}

static void on_finished(void *u, uint64_t id, uint64_t t, uint32_t n_prompt, uint32_t n_output, uint32_t n_cached)
{
	CHECK(n_evs < MAX_EV);
	evs[n_evs++] = (struct ev){ 'f', id, n_output, t, true, n_cached };
}

static void on_preempted(void *u, uint64_t id, uint64_t t)
{
	CHECK(n_evs < MAX_EV);
	evs[n_evs++] = (struct ev){ 'p', id, 0, t, false, 0 };
}

static void on_step(void *u, uint64_t s, uint64_t e, const struct sim_batch *b)
{
	last_batch = *b;
	n_steps++;
}

static const struct sim_engine_callbacks cbs = {
	.token = on_token, .finished = on_finished, .preempted = on_preempted, .step = on_step
};

static void reset(void)
{
	n_evs = 0;
	n_steps = 0;
	memset(&last_batch, 0, sizeof(last_batch));
}

static struct sim_engine *make(const char *model, const char *gpu, uint32_t tp, uint32_t mns, uint32_t mbt,
			       uint32_t mml, double gmu)
{
	struct sim_engine_config c;
	struct sim_engine *e = NULL;
	struct error err = { 0 };

	sim_engine_config_init(&c);
	snprintf(c.model_name, sizeof(c.model_name), "%s", model);
	snprintf(c.gpu_name, sizeof(c.gpu_name), "%s", gpu);
	c.tp = tp;
	c.max_num_seqs = mns;
	c.max_num_batched_tokens = mbt;
	c.max_model_len = mml;
	c.gpu_memory_utilization = gmu;
	c.jitter_sigma = 0;
	CHECK_MSG(sim_engine_new(&c, &cbs, NULL, &e, &err) == 0, "%s", err.msg);
	reset();
	return e;
}

static void run_all(struct sim_engine *e)
{
	uint64_t t;

	while ((t = sim_engine_next_event_usec(e)) != UINT64_MAX)
		sim_engine_advance(e, t);
}

static const struct ev *find_ev(char kind, uint64_t id, uint32_t index)
{
	for (size_t i = 0; i < n_evs; i++)
		if (evs[i].kind == kind && evs[i].id == id && (kind != 't' || evs[i].index == index))
			return &evs[i];
	return NULL;
}

static size_t count_ev(char kind, uint64_t id)
{
	size_t n = 0;

	for (size_t i = 0; i < n_evs; i++)
		n += evs[i].kind == kind && (id == UINT64_MAX || evs[i].id == id);
	return n;
}

static uint32_t *ids(uint32_t n, uint32_t base)
{
	uint32_t *p = malloc(n * sizeof(*p));

	CHECK(p);
	for (uint32_t i = 0; i < n; i++)
		p[i] = base + i;
	return p;
}

/* Chunked prefill: a 5000-token prompt with a 2048 budget takes three steps;
 * the first token comes at the end of the third. */
static void test_chunking(void)
{
	struct sim_engine *e = make("llama-3.1-8b", "H100", 1, 256, 2048, 8192, 0.9);
	struct sim_engine_stats s;

	CHECK(sim_engine_submit(e, 1, NULL, 5000, 4, 0, NULL) == 0);
	CHECK(sim_engine_next_event_usec(e) == 0);
	CHECK_INT_EQ(sim_engine_advance(e, 0), 0); /* starts step 1 at t = 0 */
	CHECK_INT_EQ(last_batch.chunk_tokens, 2048);
	uint64_t t1 = sim_engine_next_event_usec(e);
	CHECK(t1 > 0 && t1 != UINT64_MAX);
	CHECK_INT_EQ(sim_engine_advance(e, t1), 1);
	CHECK_INT_EQ(last_batch.chunk_tokens, 2048);
	CHECK_INT_EQ(last_batch.chunk_offset_sum, 2048);
	CHECK(count_ev('t', 1) == 0);
	sim_engine_advance(e, sim_engine_next_event_usec(e));
	CHECK_INT_EQ(last_batch.chunk_tokens, 904);
	CHECK(count_ev('t', 1) == 0);
	uint64_t t3 = sim_engine_next_event_usec(e);
	sim_engine_advance(e, t3);
	CHECK(find_ev('t', 1, 0) && find_ev('t', 1, 0)->t == t3);
	CHECK_INT_EQ(last_batch.n_decode, 1); /* then it decodes */
	run_all(e);
	CHECK_INT_EQ(count_ev('t', 1), 4);
	CHECK(find_ev('t', 1, 3)->last);
	CHECK(find_ev('f', 1, 0) && find_ev('f', 1, 0)->index == 4);
	sim_engine_get_stats(e, &s);
	CHECK_INT_EQ(s.prompt_tokens, 5000);
	CHECK_INT_EQ(s.generation_tokens, 4);
	CHECK_INT_EQ(s.steps, 6);
	CHECK_INT_EQ(s.running, 0);
	CHECK_INT_EQ(s.used_blocks, 0);
	sim_engine_free(e);
}

/* Running decodes are scheduled before waiting prefills; waiting ones are
 * admitted FCFS within the budget; max_num_seqs caps the running set. */
static void test_order_and_budget(void)
{
	struct sim_engine *e = make("llama-3.1-8b", "H100", 1, 3, 1000, 8192, 0.9);
	struct sim_engine_stats s;

	CHECK(sim_engine_submit(e, 1, NULL, 600, 50, 0, NULL) == 0);
	CHECK(sim_engine_submit(e, 2, NULL, 600, 50, 0, NULL) == 0);
	CHECK(sim_engine_submit(e, 3, NULL, 100, 50, 0, NULL) == 0);
	CHECK(sim_engine_submit(e, 4, NULL, 100, 50, 0, NULL) == 0);
	sim_engine_advance(e, 0);
	/* Step 1: request 1 whole (600) + request 2 chunked (400). */
	CHECK_INT_EQ(last_batch.n_chunks, 2);
	CHECK_INT_EQ(last_batch.chunk_tokens, 1000);
	sim_engine_advance(e, sim_engine_next_event_usec(e));
	CHECK(find_ev('t', 1, 0) && !find_ev('t', 2, 0));
	/* Step 2: request 1 decodes (1), request 2 finishes its prompt (200), request 3 (100) joins;
	 * request 4 waits: max_num_seqs = 3. */
	CHECK_INT_EQ(last_batch.n_decode, 1);
	CHECK_INT_EQ(last_batch.n_chunks, 2);
	CHECK_INT_EQ(last_batch.chunk_tokens, 300);
	sim_engine_get_stats(e, &s);
	CHECK_INT_EQ(s.running, 3);
	CHECK_INT_EQ(s.waiting, 1);
	run_all(e);
	for (uint64_t id = 1; id <= 4; id++)
		CHECK_INT_EQ(count_ev('t', id), 50);
	/* FCFS: the first tokens come in submission order. */
	CHECK(find_ev('t', 1, 0)->t < find_ev('t', 2, 0)->t);
	CHECK(find_ev('t', 2, 0)->t == find_ev('t', 3, 0)->t);
	CHECK(find_ev('t', 3, 0)->t < find_ev('t', 4, 0)->t);
	/* Request 4 starts only when one of the first three finished. */
	CHECK(find_ev('t', 4, 0)->t > find_ev('f', 1, 0)->t);
	sim_engine_free(e);
}

/* The KV limit: requests that outgrow the cache preempt the newest running
 * one, which later re-prefills and still delivers all its tokens. */
static void test_preemption(void)
{
	/* 70B FP8 on one H100 at gmu 0.95: a few thousand KV tokens. */
	struct sim_engine_config c;
	struct sim_engine *e = NULL;
	struct sim_engine_stats s;
	struct error err = { 0 };
	uint64_t kv;

	sim_engine_config_init(&c);
	snprintf(c.model_name, sizeof(c.model_name), "llama-3.1-70b");
	c.quant = SIM_QUANT_FP8;
	c.gpu_memory_utilization = 0.95;
	c.max_model_len = 2048;
	c.max_num_seqs = 64;
	c.max_num_batched_tokens = 2048;
	c.jitter_sigma = 0;
	CHECK_MSG(sim_engine_new(&c, &cbs, NULL, &e, &err) == 0, "%s", err.msg);
	reset();
	kv = sim_engine_get_info(e)->memory.kv_tokens;
	CHECK(kv >= 2048 && kv < 16384);

	/* Sixteen requests of 200 + 600 tokens: 12800 tokens, more than the cache. */
	CHECK(kv < 16 * 800);
	for (uint64_t id = 0; id < 16; id++)
		CHECK(sim_engine_submit(e, id, NULL, 200, 600, 0, NULL) == 0);
	run_all(e);
	sim_engine_get_stats(e, &s);
	CHECK(s.preemptions > 0);
	CHECK(count_ev('p', UINT64_MAX) == s.preemptions);
	/* The victim is the newest running request: never the oldest. */
	CHECK(count_ev('p', 0) == 0);
	for (uint64_t id = 0; id < 16; id++) {
		CHECK_INT_EQ(count_ev('t', id), 600);
		CHECK(find_ev('f', id, 0));
	}
	/* Tokens of each request come in order, at non-decreasing times. */
	for (size_t i = 0; i < n_evs; i++)
		for (size_t k = i + 1; k < n_evs; k++)
			if (evs[i].kind == 't' && evs[k].kind == 't' && evs[i].id == evs[k].id) {
				CHECK(evs[k].index > evs[i].index);
				CHECK(evs[k].t >= evs[i].t);
				break;
			}
	CHECK_INT_EQ(s.used_blocks, 0);
	CHECK_INT_EQ(s.generation_tokens, 16 * 600);
	sim_engine_free(e);
}

/* Prefix caching: a second request with the same 1024-token prefix prefills
 * only the rest; with caching off it prefills everything. */
static void test_prefix_cache(void)
{
	for (int on = 1; on >= 0; on--) {
		struct sim_engine_config c;
		struct sim_engine *e = NULL;
		struct sim_engine_stats s;
		struct error err = { 0 };
		uint32_t *a = ids(1100, 5000), *b = ids(1100, 5000);

		for (uint32_t i = 1024; i < 1100; i++)
			b[i] = 90000 + i; /* shares the first 1024 tokens (64 full blocks) */
		sim_engine_config_init(&c);
		c.enable_prefix_caching = on;
		c.jitter_sigma = 0;
		c.max_model_len = 8192;
		CHECK(sim_engine_new(&c, &cbs, NULL, &e, &err) == 0);
		reset();
		CHECK(sim_engine_submit(e, 1, a, 1100, 2, 0, NULL) == 0);
		run_all(e);
		uint64_t t0 = sim_engine_next_event_usec(e) == UINT64_MAX ? find_ev('f', 1, 0)->t : 0;
		CHECK(sim_engine_submit(e, 2, b, 1100, 2, t0 + 1000, NULL) == 0);
		sim_engine_advance(e, t0 + 1000);
		if (on) {
			CHECK_INT_EQ(last_batch.chunk_tokens, 1100 - 1024);
			CHECK_INT_EQ(last_batch.chunk_offset_sum, 1024);
		} else
			CHECK_INT_EQ(last_batch.chunk_tokens, 1100);
		run_all(e);
		CHECK(find_ev('f', 2, 0)->n_cached == (on ? 1024u : 0u));
		sim_engine_get_stats(e, &s);
		CHECK_INT_EQ(s.prefix_cache_queries, on ? 2200 : 0);
		CHECK_INT_EQ(s.prefix_cache_hits, on ? 1024 : 0);
		/* Its TTFT is shorter than the first one's. */
		if (on)
			CHECK(find_ev('t', 2, 0)->t - (t0 + 1000) < find_ev('t', 1, 0)->t / 2);
		/* An identical prompt hits all but its last block (the last token is recomputed). */
		if (on) {
			uint64_t t1 = find_ev('f', 2, 0)->t + 10;
			CHECK(sim_engine_submit(e, 3, a, 1100, 1, t1, NULL) == 0);
			sim_engine_advance(e, t1);
			CHECK_INT_EQ(last_batch.chunk_tokens, 1100 - 1088);
			run_all(e);
		}
		free(a);
		free(b);
		sim_engine_free(e);
	}
}

/* Abort frees the request's blocks wherever it is, and its id can be reused. */
static void test_abort(void)
{
	struct sim_engine *e = make("llama-3.1-8b", "H100", 1, 256, 2048, 8192, 0.9);
	struct sim_engine_stats s;

	CHECK(sim_engine_submit(e, 1, NULL, 3000, 100, 0, NULL) == 0);
	CHECK(sim_engine_submit(e, 2, NULL, 100, 100, 0, NULL) == 0);
	sim_engine_advance(e, 0);
	sim_engine_get_stats(e, &s);
	CHECK_INT_EQ(s.used_blocks, 2048 / 16); /* request 1's first chunk; request 2 waits */
	CHECK(sim_engine_abort(e, 1) == 0);     /* mid-prefill, in the step in flight */
	CHECK(sim_engine_abort(e, 1) == -ENOENT);
	CHECK(sim_engine_abort(e, 77) == -ENOENT);
	sim_engine_get_stats(e, &s);
	CHECK_INT_EQ(s.running + s.waiting, 1);
	run_all(e);
	CHECK_INT_EQ(count_ev('t', 1), 0);
	CHECK_INT_EQ(count_ev('t', 2), 100);
	sim_engine_get_stats(e, &s);
	CHECK_INT_EQ(s.used_blocks, 0);
	CHECK_INT_EQ(s.requests_aborted, 1);
	CHECK(sim_engine_submit(e, 1, NULL, 10, 5, s.busy_usec + 1000000, NULL) == 0);
	/* Abort while decoding. */
	sim_engine_advance(e, s.busy_usec + 1000000);
	sim_engine_advance(e, sim_engine_next_event_usec(e));
	CHECK(sim_engine_abort(e, 1) == 0);
	sim_engine_get_stats(e, &s);
	CHECK_INT_EQ(s.used_blocks, 0);
	CHECK(sim_engine_next_event_usec(e) != UINT64_MAX); /* the step in flight still ends */
	run_all(e);
	CHECK(sim_engine_next_event_usec(e) == UINT64_MAX);
	sim_engine_free(e);
}

/* A late caller gets the same absolute times as a punctual one. */
static void test_catch_up(void)
{
	struct sim_engine *e = make("llama-3.1-8b", "H100", 1, 256, 2048, 8192, 0.9);
	uint64_t punctual[40], late_t;

	CHECK(sim_engine_submit(e, 1, NULL, 100, 40, 0, NULL) == 0);
	run_all(e);
	CHECK_INT_EQ(count_ev('t', 1), 40);
	for (uint32_t i = 0; i < 40; i++)
		punctual[i] = find_ev('t', 1, i)->t;
	sim_engine_free(e);

	e = make("llama-3.1-8b", "H100", 1, 256, 2048, 8192, 0.9);
	CHECK(sim_engine_submit(e, 1, NULL, 100, 40, 0, NULL) == 0);
	sim_engine_advance(e, 0);
	late_t = punctual[20] + 3; /* wake up 20 steps late */
	CHECK_INT_EQ(sim_engine_advance(e, late_t), 21);
	run_all(e);
	for (uint32_t i = 0; i < 40; i++)
		CHECK_INT_EQ(find_ev('t', 1, i)->t, punctual[i]);
	/* Decode steps of 8B on H100 at batch 1: ≈7 ms (PERFMODEL §6). */
	CHECK_REL((double)(punctual[39] - punctual[0]) / 39, 7050, 0.05);
	sim_engine_free(e);
}

/* Start-up and submit errors carry vLLM's wording. */
static void test_errors(void)
{
	struct sim_engine_config c;
	struct sim_engine *e = NULL;
	struct error err = { 0 };

	sim_engine_config_init(&c);
	snprintf(c.model_name, sizeof(c.model_name), "llama-3.1-70b");
	/* 131 GiB of BF16 weights on one 80 GB GPU: a CUDA OOM while loading. */
	CHECK(sim_engine_new(&c, &cbs, NULL, &e, &err) == -EFBIG);
	CHECK_STR_CONTAINS(err.msg, "CUDA out of memory");
	CHECK(!e);
	struct sim_startup_check chk;
	CHECK(sim_engine_check_startup(&c, &chk, &err) == -EFBIG);
	CHECK_INT_EQ(chk.cause, SIM_STARTUP_WEIGHTS);
	/* FP8 weights fit the GPU but not the 0.9 budget: no cache blocks. */
	c.quant = SIM_QUANT_FP8;
	CHECK(sim_engine_new(&c, &cbs, NULL, &e, &err) == -ENOMEM);
	CHECK_STR_CONTAINS(err.msg, "No available memory for the cache blocks");
	CHECK(sim_engine_check_startup(&c, &chk, &err) == -ENOMEM);
	CHECK_INT_EQ(chk.cause, SIM_STARTUP_CACHE_BLOCKS);
	c.quant = SIM_QUANT_NONE;

	c.tp = 4;
	CHECK(sim_engine_new(&c, &cbs, NULL, &e, &err) == 0); /* gpus defaults to TP */
	sim_engine_free(e);
	e = NULL;
	c.gpus = 2;
	c.resolved = false;
	CHECK(sim_engine_new(&c, &cbs, NULL, &e, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "tensor_parallel_size");

	sim_engine_config_init(&c);
	snprintf(c.model_name, sizeof(c.model_name), "qwen2.5-7b");
	c.tp = 8;
	CHECK(sim_engine_new(&c, &cbs, NULL, &e, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "must be divisible by tensor parallel size");

	sim_engine_config_init(&c);
	snprintf(c.model_name, sizeof(c.model_name), "llama-3.1-70b");
	c.quant = SIM_QUANT_FP8;
	c.gpu_memory_utilization = 0.95;
	CHECK(sim_engine_new(&c, &cbs, NULL, &e, &err) == -ENOSPC);
	CHECK_STR_CONTAINS(err.msg, "max seq len (131072)");
	CHECK_STR_CONTAINS(err.msg, "Try increasing `gpu_memory_utilization` or decreasing `max_model_len`");

	e = make("llama-3.1-8b", "H100", 1, 256, 2048, 4096, 0.9);
	CHECK(sim_engine_submit(e, 1, NULL, 4000, 200, 0, &err) == -E2BIG);
	CHECK_STR_CONTAINS(err.msg, "maximum context length is 4096 tokens");
	CHECK(sim_engine_submit(e, 1, NULL, 0, 200, 0, &err) == -EINVAL);
	CHECK(sim_engine_submit(e, 1, NULL, 10, 0, 0, &err) == -EINVAL);
	CHECK(sim_engine_submit(e, 1, NULL, 10, 10, 0, &err) == 0);
	CHECK(sim_engine_submit(e, 1, NULL, 10, 10, 0, &err) == -EEXIST);
	sim_engine_free(e);

	/* Flags: bad values are named. */
	sim_engine_config_init(&c);
	CHECK(sim_engine_config_apply_flag(&c, "--max-num-seqs", "zero", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "--max-num-seqs");
	CHECK(sim_engine_config_apply_flag(&c, "--quantization", "q4", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "q4");
	CHECK(sim_engine_config_apply_flag(&c, "--gpu", "h200", &err) == 1);
	CHECK_STR_EQ(c.gpu_name, "H200");
	CHECK(sim_engine_config_apply_flag(&c, "--port", "0", &err) == 0);
	CHECK(sim_engine_config_apply_flag(&c, "--model", "Qwen/Qwen2.5-7B-Instruct", &err) == 1);
	CHECK(sim_engine_config_resolve(&c, &err) == 0);
	CHECK_STR_EQ(c.model.name, "qwen2.5-7b");
	CHECK_INT_EQ(c.max_num_batched_tokens, 8192);
	CHECK_INT_EQ(c.max_model_len, 32768);
}

/* Many streams: a thousand requests through one engine stay cheap and consistent. */
static void test_many(void)
{
	struct sim_engine *e = make("llama-3.1-8b", "H100", 1, 1024, 8192, 8192, 0.9);
	struct sim_engine_stats s;

	for (uint64_t id = 0; id < 1000; id++)
		CHECK(sim_engine_submit(e, id, NULL, 64 + id % 200, 16, id * 100, NULL) == 0);
	run_all(e);
	sim_engine_get_stats(e, &s);
	CHECK_INT_EQ(s.requests_finished, 1000);
	CHECK_INT_EQ(s.generation_tokens, 16000);
	CHECK_INT_EQ(s.used_blocks, 0);
	sim_engine_free(e);
}

int main(void)
{
	test_chunking();
	test_order_and_budget();
	test_preemption();
	test_prefix_cache();
	test_abort();
	test_catch_up();
	test_errors();
	test_many();
	return 0;
}
