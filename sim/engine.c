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

static size_t id_bucket(const struct sim_replica *e, uint64_t id)
{
	uint64_t x = id;

	return splitmix64(&x) & (e->n_buckets - 1);
}

static struct req *req_find(const struct sim_replica *e, uint64_t id)
{
	for (struct req *r = e->buckets[id_bucket(e, id)]; r; r = r->id_next)
		if (r->id == id)
			return r;
	return NULL;
}

static int table_grow(struct sim_replica *e)
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

static void table_remove(struct sim_replica *e, struct req *r)
{
	for (struct req **p = &e->buckets[id_bucket(e, r->id)]; *p; p = &(*p)->id_next)
		if (*p == r) {
			*p = r->id_next;
			e->n_reqs--;
			return;
		}
}

/* ---- waiting queue ---- */

static void wait_push_back(struct sim_replica *e, struct req *r)
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

static void wait_push_front(struct sim_replica *e, struct req *r)
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

static void wait_remove(struct sim_replica *e, struct req *r)
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

static void running_compact(struct sim_replica *e)
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

static void running_append(struct sim_replica *e, struct req *r)
{
	/* Slots never exceed max_num_seqs: compaction runs before every admission round. */
	r->running = true;
	r->running_idx = e->n_running_slots;
	e->running[e->n_running_slots++] = r;
	e->n_running++;
}

static void running_remove(struct sim_replica *e, struct req *r)
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

int sim_replica_new(const struct sim_engine_config *c, const struct sim_perf *perf, const struct sim_spec *spec,
		    const struct sim_spec_acceptance *acc, uint32_t index, const struct sim_engine_info *info,
		    const struct sim_engine_callbacks *cb, void *userdata, struct sim_replica **ret)
{
	struct sim_replica *e;
	uint32_t cache_buckets = 1;
	uint64_t seed;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->cfg = *c;
	e->perf = *perf;
	e->spec = *spec;
	e->acceptance = *acc;
	e->index = index;
	e->info = *info;
	if (cb)
		e->cb = *cb;
	e->userdata = userdata;

	e->n_blk = (uint32_t)info->memory.num_blocks;
	e->blk = calloc(e->n_blk, sizeof(*e->blk));
	while (cache_buckets < e->n_blk)
		cache_buckets <<= 1;
	e->cache_buckets = calloc(cache_buckets, sizeof(*e->cache_buckets));
	e->n_buckets = 64;
	e->buckets = calloc(e->n_buckets, sizeof(*e->buckets));
	e->running = calloc(e->cfg.max_num_seqs, sizeof(*e->running));
	/* A pipeline of pp stages keeps up to pp micro-batches in flight. */
	e->max_mb = MAX(e->cfg.pp, 1u);
	e->mb = calloc(e->max_mb, sizeof(*e->mb));
	if (!e->blk || !e->cache_buckets || !e->buckets || !e->running || !e->mb) {
		sim_replica_free(e);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < e->max_mb; i++) {
		e->mb[i].sched = calloc(e->cfg.max_num_seqs, sizeof(*e->mb[i].sched));
		if (!e->mb[i].sched) {
			sim_replica_free(e);
			return -ENOMEM;
		}
	}
	e->cache_mask = cache_buckets - 1;
	e->free_head = e->free_tail = NIL;
	e->next_fresh = 0;
	e->n_free = e->n_blk; /* every block fresh */
	/* Replica 0 draws what a single engine always drew; the others their own streams. */
	seed = (e->cfg.seed ^ UINT64_C(0x51a0e7a1)) + (uint64_t)index * UINT64_C(0x9e3779b97f4a7c15);
	for (int i = 0; i < 4; i++)
		e->rng[i] = splitmix64(&seed);
	e->st.num_blocks = e->n_blk;
	*ret = e;
	return 0;
}

struct sim_replica *sim_replica_free(struct sim_replica *e)
{
	if (!e)
		return NULL;
	if (e->buckets)
		for (size_t i = 0; i < e->n_buckets; i++)
			for (struct req *r = e->buckets[i], *next; r; r = next) {
				next = r->id_next;
				req_destroy(r);
			}
	for (uint32_t i = 0; e->mb && i < e->max_mb; i++)
		free(e->mb[i].sched);
	free(e->mb);
	free(e->buckets);
	free(e->running);
	free(e->blk);
	free(e->cache_buckets);
	free(e);
	return NULL;
}

bool sim_replica_has(const struct sim_replica *e, uint64_t req_id)
{
	return req_find(e, req_id) != NULL;
}

/* ---- requests ---- */

int sim_replica_submit(struct sim_replica *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
		       uint32_t max_tokens, uint32_t n_remote, uint64_t now_usec, struct error *err)
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
	r->n_remote = MIN(n_remote, n_prompt);
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
	/* Prompt lookup proposes only where the context repeats itself. */
	if (e->spec.method == SIM_SPEC_NGRAM)
		r->lookup_rate = sim_spec_lookup_rate(prompt_ids, n_prompt);
	k = id_bucket(e, req_id);
	r->id_next = e->buckets[k];
	e->buckets[k] = r;
	e->n_reqs++;
	wait_push_back(e, r);
	e->blocked = false;
	return 0;
}

static struct microbatch *mb_at(struct sim_replica *e, uint32_t i)
{
	return &e->mb[(e->mb_head + i) % e->max_mb];
}

static void sched_forget(struct sim_replica *e, struct req *r)
{
	for (uint32_t m = 0; m < e->n_mb; m++) {
		struct microbatch *b = mb_at(e, m);

		for (uint32_t i = 0; i < b->n_sched; i++)
			if (b->sched[i].req == r)
				b->sched[i].req = NULL;
	}
}

/* Removes r from everything and frees it. */
static void req_drop(struct sim_replica *e, struct req *r)
{
	table_remove(e, r);
	if (r->running)
		running_remove(e, r);
	else
		wait_remove(e, r);
	if (r->in_flight) {
		sched_forget(e, r);
		r->in_flight = false;
		e->n_in_flight--;
	}
	sim_kv_req_free_blocks(e, r);
	req_destroy(r);
}

int sim_replica_abort(struct sim_replica *e, uint64_t req_id)
{
	struct req *r = req_find(e, req_id);

	if (!r)
		return -ENOENT;
	req_drop(e, r);
	e->st.requests_aborted++;
	e->blocked = false;
	return 0;
}

/* ---- scheduling ---- */

static void preempt(struct sim_replica *e, struct req *r, uint64_t t)
{
	running_remove(e, r);
	sim_kv_req_free_blocks(e, r);
	r->num_computed = 0;
	r->n_remote = 0; /* the KV it was sent is gone: the prompt is computed here */
	wait_push_front(e, r);
	e->st.preemptions++;
	if (e->cb.preempted)
		e->cb.preempted(e->userdata, r->id, t);
}

/* The newest running request not in a micro-batch in flight. */
static struct req *running_last(struct sim_replica *e)
{
	for (uint32_t i = e->n_running_slots; i > 0; i--)
		if (e->running[i - 1] && !e->running[i - 1]->in_flight)
			return e->running[i - 1];
	return NULL;
}

/* Draft tokens a decoding request verifies this step: k, or fewer near its
 * end, its length limit or the budget; none when prompt lookup finds
 * nothing to propose. */
static uint32_t drafts_for(struct sim_replica *e, const struct req *r, uint32_t budget)
{
	uint32_t d = e->spec.k, left = r->max_tokens - r->n_out;
	uint64_t room = e->cfg.max_model_len > r->num_computed + 1 ? e->cfg.max_model_len - r->num_computed - 1 : 0;

	if (e->spec.method == SIM_SPEC_NONE || left <= 1)
		return 0;
	if (e->spec.method == SIM_SPEC_NGRAM && !(rng_uniform(e->rng) < r->lookup_rate))
		return 0;
	d = MIN(d, left - 1);
	d = (uint32_t)MIN((uint64_t)d, room);
	return MIN(d, budget > 0 ? budget - 1 : 0);
}

/* Schedules a micro-batch starting at t from the requests not in flight;
 * returns whether anything runs. */
static bool step_start(struct sim_replica *e, uint64_t t)
{
	uint32_t budget = e->cfg.max_num_batched_tokens, n_sample = 0;
	uint64_t preemptions = e->st.preemptions, sample_ctx = 0, chunk_tokens = 0;
	struct microbatch *mb = mb_at(e, e->n_mb);
	struct sim_batch batch = { 0 };
	struct sim_step_parts parts;
	bool preempted = false;
	double f = 1, draft, total, stage;

	running_compact(e);
	mb->n_sched = 0;

	/* 1. RUNNING, FCFS. */
	for (uint32_t i = 0; i < e->n_running_slots && budget > 0; i++) {
		struct req *r = e->running[i];
		uint32_t n_new, n_draft = 0;
		bool ok = false;

		if (!r || r->in_flight)
			continue; /* preempted earlier in this loop, or in another micro-batch */
		n_new = r->n_prompt + r->n_out - r->num_computed;
		if (e->cfg.long_prefill_token_threshold > 0)
			n_new = MIN(n_new, e->cfg.long_prefill_token_threshold);
		n_new = MIN(n_new, budget);
		if (n_new == 0)
			continue;
		if (n_new == 1 && r->n_out > 0) {
			n_draft = drafts_for(e, r, budget);
			n_new += n_draft;
		}
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
		mb->sched[mb->n_sched++] = (struct sched){ r, n_new, n_draft };
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
			mb->sched[mb->n_sched++] = (struct sched){ r, n_new, 0 };
			budget -= n_new;
		}
	}

	if (mb->n_sched == 0) {
		/* Nothing fits until a step ends or a request leaves; after a preemption, try again. */
		e->blocked = e->st.preemptions == preemptions;
		return false;
	}

	for (uint32_t i = 0; i < mb->n_sched; i++) {
		struct sched *sc = &mb->sched[i];
		struct req *r = sc->req;
		uint64_t ctx = (uint64_t)r->num_computed + sc->n_new - sc->n_draft;

		r->in_flight = true;
		e->n_in_flight++;
		if (r->n_out > 0 && sc->n_new - sc->n_draft == 1 && r->num_computed + 1 == r->n_prompt + r->n_out)
			sim_batch_add_verify(&batch, (uint64_t)r->num_computed + 1, sc->n_draft);
		else {
			sim_batch_add_chunk(&batch, sc->n_new, r->num_computed);
			chunk_tokens += sc->n_new;
		}
		/* the drafter proposes for every sequence this step samples from */
		if (r->num_computed + sc->n_new - sc->n_draft >= r->n_prompt + r->n_out) {
			n_sample++;
			sample_ctx += ctx;
		}
	}
	(void)sim_perf_step_time(&e->perf, &batch, &parts);
	if (e->cfg.jitter_sigma > 0) {
		double sg = e->cfg.jitter_sigma;
		f *= exp(sg * rng_normal(e->rng) - sg * sg / 2);
	}
	if (e->cfg.extra_jitter_sigma > 0) {
		double sg = e->cfg.extra_jitter_sigma;
		f *= exp(sg * rng_normal(e->rng) - sg * sg / 2);
	}
	draft = sim_spec_draft_time(&e->spec, n_sample, sample_ctx,
				    e->spec.method == SIM_SPEC_NGRAM ? 0 : chunk_tokens);
	total = parts.total * f + draft;
	stage = parts.stage * f + draft;
	total += (e->cfg.fault_step_usec + e->cfg.fault_step_per_seq_usec * (double)mb->n_sched * mb->n_sched / 64.0) *
		 1e-6;

	mb->start = t;
	mb->end = t + MAX((uint64_t)llround(total * 1e6), UINT64_C(1));
	/* Micro-batches leave the pipeline in the order they entered. */
	if (e->n_mb > 0)
		mb->end = MAX(mb->end, mb_at(e, e->n_mb - 1)->end);
	e->stage_free = e->max_mb > 1 ? t + MAX((uint64_t)llround(stage * 1e6), UINT64_C(1)) : mb->end;
	e->n_mb++;
	e->st.last_step_tokens = (uint32_t)sim_batch_tokens(&batch);
	e->st.last_step_seqs = mb->n_sched;
	e->st.last_step_usec = mb->end - t;
	if (e->cb.step)
		e->cb.step(e->userdata, t, mb->end, &batch);
	return true;
}

/* r finished in the micro-batch being completed, at sched slot i. */
static void finish(struct sim_replica *e, struct microbatch *mb, uint32_t i, struct req *r, uint64_t t)
{
	uint64_t id = r->id;
	uint32_t n_prompt = r->n_prompt, n_out = r->n_out, n_cached = r->n_cached;

	mb->sched[i].req = NULL;
	req_drop(e, r);
	e->st.requests_finished++;
	if (e->cb.finished)
		e->cb.finished(e->userdata, id, t, n_prompt, n_out, n_cached);
}

/* How many of n_draft drafts are accepted: each position in turn, with its
 * conditional rate, until the first rejection. */
static uint32_t accept_drafts(struct sim_replica *e, uint32_t n_draft)
{
	uint32_t a = 0;

	while (a < n_draft && rng_uniform(e->rng) < sim_spec_acceptance_at(&e->acceptance, a))
		a++;
	e->st.spec_drafts++;
	e->st.spec_draft_tokens += n_draft;
	e->st.spec_accepted += a;
	for (uint32_t i = 0; i < a && i < SIM_SPEC_MAX_TOKENS; i++)
		e->st.spec_accepted_per_pos[i]++;
	return a;
}

/* Completes the oldest micro-batch in flight. */
static void step_complete(struct sim_replica *e)
{
	struct microbatch *mb = mb_at(e, 0);
	uint64_t t = mb->end;

	e->mb_head = (e->mb_head + 1) % e->max_mb;
	e->n_mb--;
	e->blocked = false;
	e->st.steps++;
	e->st.busy_usec += t - mb->start;
	e->last_end = t;
	for (uint32_t i = 0; i < mb->n_sched; i++) {
		struct req *r = mb->sched[i].req;
		uint32_t n_emit = 1;

		if (!r)
			continue; /* aborted meanwhile */
		r->in_flight = false;
		e->n_in_flight--;
		if (mb->sched[i].n_draft > 0) {
			/* Rejected drafts' KV slots are dropped: only the accepted ones count. */
			uint32_t a = accept_drafts(e, mb->sched[i].n_draft);

			r->num_computed += mb->sched[i].n_new - mb->sched[i].n_draft + a;
			n_emit += a;
		} else
			r->num_computed += mb->sched[i].n_new;
		if (e->cfg.enable_prefix_caching)
			sim_kv_req_cache_blocks(e, r);
		if (r->num_computed < r->n_prompt + r->n_out)
			continue; /* a chunk that is not the last */
		for (uint32_t j = 0; j < n_emit; j++) {
			uint32_t idx = r->n_out++;
			bool last = r->n_out >= r->max_tokens || r->n_prompt + r->n_out >= e->cfg.max_model_len;

			e->st.generation_tokens++;
			if (idx == 0)
				e->st.prompt_tokens += r->n_prompt;
			if (e->cb.token)
				e->cb.token(e->userdata, r->id, idx, t, last);
			/* The callback may have aborted r: its slot is NULL then. */
			if (!mb->sched[i].req)
				break;
			if (last) {
				finish(e, mb, i, r, t);
				break;
			}
		}
	}
	mb->n_sched = 0;
}

/* When the next micro-batch could start (UINT64_MAX: not before a step ends). */
static uint64_t next_start(const struct sim_replica *e)
{
	if (e->n_mb >= e->max_mb || e->blocked)
		return UINT64_MAX;
	if (e->n_running > e->n_in_flight)
		return MAX(e->stage_free, e->last_end);
	if (e->wait_head)
		return MAX(MAX(e->stage_free, e->last_end), e->wait_head->arrival_usec);
	return UINT64_MAX;
}

uint64_t sim_replica_next_event_usec(const struct sim_replica *e)
{
	uint64_t end = e->n_mb ? e->mb[e->mb_head].end : UINT64_MAX;

	return MIN(end, next_start(e));
}

int sim_replica_advance(struct sim_replica *e, uint64_t now_usec)
{
	int n = 0;

	for (;;) {
		uint64_t end = e->n_mb ? mb_at(e, 0)->end : UINT64_MAX, start = next_start(e);

		/* A step that ends when the next could start completes first: its requests may go on. */
		if (end <= start) {
			if (end > now_usec)
				break;
			step_complete(e);
			n++;
			continue;
		}
		if (start > now_usec)
			break;
		(void)step_start(e, start);
	}
	return n;
}

void sim_replica_get_stats(const struct sim_replica *e, struct sim_engine_stats *ret)
{
	struct sim_engine_stats s = e->st;

	s.running = e->n_running;
	s.waiting = e->n_waiting;
	s.num_blocks = e->n_blk;
	s.used_blocks = e->n_used;
	s.kv_usage = e->n_blk ? (double)e->n_used / e->n_blk : 0.0;
	*ret = s;
}
