/* engine.c — one vLLM V1 engine replica as a discrete-event model.
 *
 * State: a table of requests by id, a WAITING queue (FIFO; preempted requests
 * go back to its front), a RUNNING array in admission (FCFS) order, and the
 * KV cache as an array of 16-token blocks with reference counts. Blocks with
 * no reference sit in one free queue in LRU order; those that still hold a
 * full block of known content stay findable by hash (the prefix cache) until
 * the allocator takes them from the head of the queue. vLLM's scheduler
 * (v1/core/sched/scheduler.py) is followed closely: running requests first,
 * preempting the newest running request when a block cannot be had (and
 * admitting nobody new in a step that preempted), then waiting requests
 * while the token budget and max_num_seqs allow, chunking prompts.
 *
 * Time is the caller's: a step is scheduled at a start time, its duration
 * comes from the performance model (plus seeded log-normal jitter and the
 * optional fault costs), and it completes when the caller advances past its
 * end; the next step starts at that end. Per step the work is linear in the
 * number of scheduled requests plus the blocks they allocate, so 1,000
 * streams cost little.
 *
 * Block hashes: block i of a prompt hashes (hash of block i−1, its 16 ids);
 * blocks that hold generated tokens (or prompts given without ids) hash the
 * request's private serial number instead, so only the request itself can
 * find them again (after a preemption).
 *
 * This file holds the request table, the queues, construction and the
 * scheduler; engine-kv.c holds the KV blocks (free queue, prefix cache,
 * per-request allocation); engine-internal.h the state both share. */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine-internal.h"
#include "engine.h"
#include "macro.h"

/* ---- small helpers ---- */

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
	uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

static double rng_uniform(uint64_t s[4])
{
	return ((rng_next(s) >> 11) + 0.5) * 0x1.0p-53; /* (0, 1) */
}

static double rng_normal(uint64_t s[4])
{
	return sqrt(-2.0 * log(rng_uniform(s))) * cos(2.0 * M_PI * rng_uniform(s));
}

/* ---- request table ---- */

static size_t id_bucket(const struct sim_engine *e, uint64_t id)
{
	uint64_t x = id;

	return splitmix64(&x) & (e->n_buckets - 1);
}

static struct req *req_find(const struct sim_engine *e, uint64_t id)
{
	for (struct req *r = e->buckets[id_bucket(e, id)]; r; r = r->id_next)
		if (r->id == id)
			return r;
	return NULL;
}

static int table_grow(struct sim_engine *e)
{
	size_t n = e->n_buckets * 2;
	struct req **b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < e->n_buckets; i++)
		for (struct req *r = e->buckets[i], *next; r; r = next) {
			uint64_t x = r->id;
			size_t k = splitmix64(&x) & (n - 1);

			next = r->id_next;
			r->id_next = b[k];
			b[k] = r;
		}
	free(e->buckets);
	e->buckets = b;
	e->n_buckets = n;
	return 0;
}

static void table_remove(struct sim_engine *e, struct req *r)
{
	for (struct req **p = &e->buckets[id_bucket(e, r->id)]; *p; p = &(*p)->id_next)
		if (*p == r) {
			*p = r->id_next;
			e->n_reqs--;
			return;
		}
}

/* ---- waiting queue ---- */

static void wait_push_back(struct sim_engine *e, struct req *r)
{
	r->wnext = NULL;
	r->wprev = e->wait_tail;
	if (e->wait_tail)
		e->wait_tail->wnext = r;
	else
		e->wait_head = r;
	e->wait_tail = r;
	e->n_waiting++;
}

static void wait_push_front(struct sim_engine *e, struct req *r)
{
	r->wprev = NULL;
	r->wnext = e->wait_head;
	if (e->wait_head)
		e->wait_head->wprev = r;
	else
		e->wait_tail = r;
	e->wait_head = r;
	e->n_waiting++;
}

static void wait_remove(struct sim_engine *e, struct req *r)
{
	if (r->wprev)
		r->wprev->wnext = r->wnext;
	else
		e->wait_head = r->wnext;
	if (r->wnext)
		r->wnext->wprev = r->wprev;
	else
		e->wait_tail = r->wprev;
	r->wprev = r->wnext = NULL;
	e->n_waiting--;
}

/* ---- running array ---- */

static void running_compact(struct sim_engine *e)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < e->n_running_slots; i++)
		if (e->running[i]) {
			e->running[k] = e->running[i];
			e->running[k]->running_idx = k;
			k++;
		}
	e->n_running_slots = k;
}

static void running_append(struct sim_engine *e, struct req *r)
{
	/* Slots never exceed max_num_seqs: compaction runs before every admission round. */
	r->running = true;
	r->running_idx = e->n_running_slots;
	e->running[e->n_running_slots++] = r;
	e->n_running++;
}

static void running_remove(struct sim_engine *e, struct req *r)
{
	e->running[r->running_idx] = NULL;
	r->running = false;
	e->n_running--;
}

/* ---- KV blocks (the allocator and prefix cache are in engine-kv.c) ---- */

static void req_destroy(struct req *r)
{
	if (!r)
		return;
	free(r->prompt_hash);
	free(r->blocks);
	free(r);
}

/* ---- construction ---- */

DEFINE_TRIVIAL_CLEANUP_FUNC(struct sim_engine *, sim_engine_free)

static int check_startup(const struct sim_engine_config *c, const struct sim_perf *perf, struct sim_startup_check *ret,
			 struct error *err)
{
	struct sim_memory_policy policy = {
		.rules = c->memory_rules,
		.fraction = c->gpu_memory_utilization,
		.kv_tokens = c->kv_tokens_fixed ? c->kv_tokens_fixed : c->max_model_len,
		.fail_fast = c->kv_fail_fast,
	};

	return sim_perf_check_startup(perf, &policy, c->gpus, c->max_model_len, c->max_num_seqs,
				      c->max_num_batched_tokens, ret, err);
}

static uint64_t startup_usec(const struct sim_engine_config *c, const struct sim_perf *perf,
			     struct sim_startup_phases *ret_phases)
{
	*ret_phases = (struct sim_startup_phases){ 0 };
	if (c->startup.enabled) {
		sim_startup_model_phases(perf, &c->startup, ret_phases);
		return (uint64_t)llround(ret_phases->total_s * 1e6);
	}
	return (uint64_t)(sim_perf_startup_sec(perf) * c->startup_scale * 1e6);
}

int sim_engine_check_startup(const struct sim_engine_config *c, struct sim_startup_check *ret_check, struct error *err)
{
	struct sim_engine_config cfg = *c;
	struct sim_perf perf;
	int r;

	r = sim_engine_config_resolve(&cfg, err);
	if (r < 0)
		return r;
	r = sim_perf_init(&perf, &cfg.model, &cfg.gpu, cfg.quant, cfg.kv_dtype, cfg.tp, &cfg.profile, err);
	if (r < 0) {
		*ret_check = (struct sim_startup_check){ .cause = SIM_STARTUP_CONFIG };
		return r;
	}
	return check_startup(&cfg, &perf, ret_check, err);
}

uint64_t sim_engine_startup_usec(const struct sim_engine_config *c, struct sim_startup_phases *ret_phases)
{
	struct sim_engine_config cfg = *c;
	struct sim_startup_phases ph;
	struct sim_perf perf;
	uint64_t u;

	if (sim_engine_config_resolve(&cfg, NULL) < 0 ||
	    sim_perf_init(&perf, &cfg.model, &cfg.gpu, cfg.quant, cfg.kv_dtype, cfg.tp, &cfg.profile, NULL) < 0)
		return 0;
	u = startup_usec(&cfg, &perf, &ph);
	if (ret_phases)
		*ret_phases = ph;
	return u;
}

int sim_engine_new(const struct sim_engine_config *c, const struct sim_engine_callbacks *cb, void *userdata,
		   struct sim_engine **ret, struct error *err)
{
	_cleanup_(sim_engine_freep) struct sim_engine *e = NULL;
	uint32_t cache_buckets = 1;
	uint64_t seed;
	int r;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->cfg = *c;
	r = sim_engine_config_resolve(&e->cfg, err);
	if (r < 0)
		return r;
	if (cb)
		e->cb = *cb;
	e->userdata = userdata;

	r = sim_perf_init(&e->perf, &e->cfg.model, &e->cfg.gpu, e->cfg.quant, e->cfg.kv_dtype, e->cfg.tp,
			  &e->cfg.profile, err);
	if (r < 0)
		return r;
	r = check_startup(&e->cfg, &e->perf, &e->info.check, err);
	if (r < 0)
		return r;
	e->info.memory = e->info.check.mem;
	if (e->info.memory.num_blocks >= NIL / 2)
		return error_set(err, -E2BIG, "KV cache of %" PRIu64 " blocks is too large to emulate",
				 e->info.memory.num_blocks);
	/* SGLang and TensorRT-LLM serve shorter sequences rather than refuse. */
	e->cfg.max_model_len = e->info.check.max_model_len_used;
	e->info.max_model_len = e->cfg.max_model_len;
	e->info.max_num_seqs = e->cfg.max_num_seqs;
	e->info.max_num_batched_tokens = e->cfg.max_num_batched_tokens;
	e->info.startup_usec = startup_usec(&e->cfg, &e->perf, &e->info.startup);
	e->info.usd_per_hour = e->cfg.gpu.usd_per_hour * e->cfg.tp;
	e->info.weights_gib = e->info.memory.weights / SIM_GIB;

	e->n_blk = (uint32_t)e->info.memory.num_blocks;
	e->blk = calloc(e->n_blk, sizeof(*e->blk));
	while (cache_buckets < e->n_blk)
		cache_buckets <<= 1;
	e->cache_buckets = malloc(cache_buckets * sizeof(*e->cache_buckets));
	e->n_buckets = 64;
	e->buckets = calloc(e->n_buckets, sizeof(*e->buckets));
	e->running = calloc(e->cfg.max_num_seqs, sizeof(*e->running));
	e->sched = calloc(e->cfg.max_num_seqs, sizeof(*e->sched));
	if (!e->blk || !e->cache_buckets || !e->buckets || !e->running || !e->sched)
		return -ENOMEM;
	e->cache_mask = cache_buckets - 1;
	memset(e->cache_buckets, 0xff, cache_buckets * sizeof(*e->cache_buckets));
	e->free_head = e->free_tail = NIL;
	for (uint32_t b = 0; b < e->n_blk; b++) {
		e->blk[b].hnext = NIL;
		sim_kv_free_append(e, b);
	}
	seed = e->cfg.seed ^ UINT64_C(0x51a0e7a1);
	for (int i = 0; i < 4; i++)
		e->rng[i] = splitmix64(&seed);
	e->st.num_blocks = e->n_blk;
	*ret = TAKE_PTR(e);
	return 0;
}

struct sim_engine *sim_engine_free(struct sim_engine *e)
{
	if (!e)
		return NULL;
	if (e->buckets)
		for (size_t i = 0; i < e->n_buckets; i++)
			for (struct req *r = e->buckets[i], *next; r; r = next) {
				next = r->id_next;
				req_destroy(r);
			}
	free(e->buckets);
	free(e->running);
	free(e->sched);
	free(e->blk);
	free(e->cache_buckets);
	free(e);
	return NULL;
}

const struct sim_engine_info *sim_engine_get_info(const struct sim_engine *e)
{
	return &e->info;
}

const struct sim_engine_config *sim_engine_get_config(const struct sim_engine *e)
{
	return &e->cfg;
}

const struct sim_perf *sim_engine_get_perf(const struct sim_engine *e)
{
	return &e->perf;
}

/* ---- requests ---- */

int sim_engine_submit(struct sim_engine *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
		      uint32_t max_tokens, uint64_t now_usec, struct error *err)
{
	struct req *r;
	uint64_t h = UINT64_C(0x70726566697863);
	size_t k;
	int q;

	if (n_prompt == 0)
		return error_set(err, -EINVAL, "prompt: must hold at least one token");
	if (max_tokens == 0)
		return error_set(err, -EINVAL, "max_tokens: must be at least 1, got 0");
	if ((uint64_t)n_prompt + max_tokens > e->cfg.max_model_len)
		return error_set(err, -E2BIG,
				 "This model's maximum context length is %u tokens. However, you requested %" PRIu64
				 " tokens (%u in the messages, %u in the completion). Please reduce the length of the "
				 "messages or completion.",
				 e->cfg.max_model_len, (uint64_t)n_prompt + max_tokens, n_prompt, max_tokens);
	if (req_find(e, req_id))
		return error_set(err, -EEXIST, "request %" PRIu64 " is already in the engine", req_id);
	if (e->n_reqs >= e->n_buckets) {
		q = table_grow(e);
		if (q < 0)
			return q;
	}

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->id = req_id;
	r->serial = e->next_serial++;
	r->arrival_usec = now_usec;
	r->n_prompt = n_prompt;
	r->max_tokens = max_tokens;
	if (prompt_ids && e->cfg.enable_prefix_caching && n_prompt >= SIM_BLOCK_SIZE) {
		r->n_prompt_hash = n_prompt / SIM_BLOCK_SIZE;
		r->prompt_hash = malloc(r->n_prompt_hash * sizeof(*r->prompt_hash));
		if (!r->prompt_hash) {
			free(r);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < r->n_prompt_hash; i++) {
			for (uint32_t j = 0; j < SIM_BLOCK_SIZE; j++)
				h = mix(h, prompt_ids[i * SIM_BLOCK_SIZE + j]);
			r->prompt_hash[i] = h;
		}
	}
	k = id_bucket(e, req_id);
	r->id_next = e->buckets[k];
	e->buckets[k] = r;
	e->n_reqs++;
	wait_push_back(e, r);
	return 0;
}

static void sched_forget(struct sim_engine *e, struct req *r)
{
	for (uint32_t i = 0; i < e->n_sched; i++)
		if (e->sched[i].req == r)
			e->sched[i].req = NULL;
}

/* Removes r from everything and frees it. */
static void req_drop(struct sim_engine *e, struct req *r, bool in_sched)
{
	table_remove(e, r);
	if (r->running)
		running_remove(e, r);
	else
		wait_remove(e, r);
	if (in_sched)
		sched_forget(e, r);
	sim_kv_req_free_blocks(e, r);
	req_destroy(r);
}

int sim_engine_abort(struct sim_engine *e, uint64_t req_id)
{
	struct req *r = req_find(e, req_id);

	if (!r)
		return -ENOENT;
	req_drop(e, r, r->running);
	e->st.requests_aborted++;
	return 0;
}

/* ---- scheduling ---- */

static void preempt(struct sim_engine *e, struct req *r, uint64_t t)
{
	running_remove(e, r);
	sim_kv_req_free_blocks(e, r);
	r->num_computed = 0;
	wait_push_front(e, r);
	e->st.preemptions++;
	if (e->cb.preempted)
		e->cb.preempted(e->userdata, r->id, t);
}

static struct req *running_last(struct sim_engine *e)
{
	for (uint32_t i = e->n_running_slots; i > 0; i--)
		if (e->running[i - 1])
			return e->running[i - 1];
	return NULL;
}

/* Schedules the step starting at t; returns whether anything runs. */
static bool step_start(struct sim_engine *e, uint64_t t)
{
	uint32_t budget = e->cfg.max_num_batched_tokens;
	struct sim_batch batch = { 0 };
	bool preempted = false;
	double dt;

	running_compact(e);
	e->n_sched = 0;

	/* 1. RUNNING, FCFS. */
	for (uint32_t i = 0; i < e->n_running_slots && budget > 0; i++) {
		struct req *r = e->running[i];
		uint32_t n_new;
		bool ok = false;

		if (!r)
			continue; /* preempted earlier in this loop */
		n_new = r->n_prompt + r->n_out - r->num_computed;
		if (e->cfg.long_prefill_token_threshold > 0)
			n_new = MIN(n_new, e->cfg.long_prefill_token_threshold);
		n_new = MIN(n_new, budget);
		if (n_new == 0)
			continue;
		for (;;) {
			struct req *victim;

			if (sim_kv_req_allocate(e, r, n_new)) {
				ok = true;
				break;
			}
			victim = running_last(e);
			preempt(e, victim, t);
			preempted = true;
			if (victim == r)
				break;
		}
		if (!ok)
			break;
		e->sched[e->n_sched++] = (struct sched){ r, n_new };
		budget -= n_new;
	}

	/* 2. WAITING, unless this step preempted (as vLLM). */
	if (!preempted) {
		running_compact(e);
		while (e->wait_head && budget > 0 && e->n_running < e->cfg.max_num_seqs) {
			struct req *r = e->wait_head;
			uint32_t n_new;

			if (r->arrival_usec > t)
				break;
			if (!sim_kv_req_admit_blocks(e, r, budget, &n_new))
				break;
			wait_remove(e, r);
			running_append(e, r);
			if (!r->was_scheduled) {
				r->was_scheduled = true;
				if (e->cb.scheduled)
					e->cb.scheduled(e->userdata, r->id, t);
			}
			e->sched[e->n_sched++] = (struct sched){ r, n_new };
			budget -= n_new;
		}
	}

	if (e->n_sched == 0)
		return false;

	for (uint32_t i = 0; i < e->n_sched; i++) {
		const struct req *r = e->sched[i].req;

		if (r->n_out > 0 && e->sched[i].n_new == 1 && r->num_computed + 1 == r->n_prompt + r->n_out)
			sim_batch_add_decode(&batch, (uint64_t)r->num_computed + 1);
		else
			sim_batch_add_chunk(&batch, e->sched[i].n_new, r->num_computed);
	}
	dt = sim_perf_step_time(&e->perf, &batch, NULL);
	if (e->cfg.jitter_sigma > 0) {
		double s = e->cfg.jitter_sigma;
		dt *= exp(s * rng_normal(e->rng) - s * s / 2);
	}
	if (e->cfg.extra_jitter_sigma > 0) {
		double s = e->cfg.extra_jitter_sigma;
		dt *= exp(s * rng_normal(e->rng) - s * s / 2);
	}
	dt += (e->cfg.fault_step_usec + e->cfg.fault_step_per_seq_usec * (double)e->n_sched * e->n_sched / 64.0) * 1e-6;

	e->in_flight = true;
	e->step_start = t;
	e->step_end = t + MAX((uint64_t)llround(dt * 1e6), UINT64_C(1));
	e->st.last_step_tokens = (uint32_t)sim_batch_tokens(&batch);
	e->st.last_step_seqs = e->n_sched;
	e->st.last_step_usec = e->step_end - t;
	if (e->cb.step)
		e->cb.step(e->userdata, t, e->step_end, &batch);
	return true;
}

/* r finished in the step being completed, at sched slot i. */
static void finish(struct sim_engine *e, uint32_t i, struct req *r, uint64_t t)
{
	uint64_t id = r->id;
	uint32_t n_prompt = r->n_prompt, n_out = r->n_out, n_cached = r->n_cached;

	e->sched[i].req = NULL;
	req_drop(e, r, false);
	e->st.requests_finished++;
	if (e->cb.finished)
		e->cb.finished(e->userdata, id, t, n_prompt, n_out, n_cached);
}

static void step_complete(struct sim_engine *e)
{
	uint64_t t = e->step_end;

	e->in_flight = false;
	e->st.steps++;
	e->st.busy_usec += t - e->step_start;
	e->last_end = t;
	for (uint32_t i = 0; i < e->n_sched; i++) {
		struct req *r = e->sched[i].req;
		uint32_t idx;
		bool last;

		if (!r)
			continue; /* aborted meanwhile */
		r->num_computed += e->sched[i].n_new;
		if (e->cfg.enable_prefix_caching)
			sim_kv_req_cache_blocks(e, r);
		if (r->num_computed < r->n_prompt + r->n_out)
			continue; /* a chunk that is not the last */
		idx = r->n_out++;
		e->st.generation_tokens++;
		if (idx == 0)
			e->st.prompt_tokens += r->n_prompt;
		last = r->n_out >= r->max_tokens || r->n_prompt + r->n_out >= e->cfg.max_model_len;
		if (e->cb.token)
			e->cb.token(e->userdata, r->id, idx, t, last);
		/* The callback may have aborted r: its slot is NULL then. */
		if (last && e->sched[i].req)
			finish(e, i, r, t);
	}
	e->n_sched = 0;
}

uint64_t sim_engine_next_event_usec(const struct sim_engine *e)
{
	if (e->in_flight)
		return e->step_end;
	if (e->wait_head)
		return MAX(e->last_end, e->wait_head->arrival_usec);
	return UINT64_MAX;
}

int sim_engine_advance(struct sim_engine *e, uint64_t now_usec)
{
	int n = 0;

	for (;;) {
		if (e->in_flight) {
			if (e->step_end > now_usec)
				break;
			step_complete(e);
			n++;
			if (!step_start(e, e->last_end))
				continue; /* idle: maybe a later arrival can start */
		} else {
			uint64_t t;

			if (!e->wait_head)
				break;
			t = MAX(e->last_end, e->wait_head->arrival_usec);
			if (t > now_usec || !step_start(e, t))
				break;
		}
	}
	return n;
}

void sim_engine_get_stats(const struct sim_engine *e, struct sim_engine_stats *ret)
{
	struct sim_engine_stats s = e->st;

	s.running = e->n_running;
	s.waiting = e->n_waiting;
	s.num_blocks = e->n_blk;
	s.used_blocks = e->n_used;
	s.kv_usage = e->n_blk ? (double)e->n_used / e->n_blk : 0.0;
	*ret = s;
}
