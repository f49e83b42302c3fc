/* engine-kv.c — the engine's KV cache: blocks, the free queue, the prefix cache.
 *
 * The cache is an array of 16-token blocks with reference counts. Blocks
 * with no reference sit in one free queue in LRU order; those that still
 * hold a full block of known content stay findable by hash (the prefix
 * cache, open hash chains through struct block) until the allocator takes
 * them from the head of the queue. Per request: allocation for the tokens a
 * step computes, registration of completed blocks, and the prefix-cache
 * lookup at admission. engine.c's scheduler is the only caller; the hashing
 * scheme is described at the top of engine.c. */
#include <errno.h>
#include <stdlib.h>

#include "engine-internal.h"
#include "engine.h"
#include "macro.h"

static void free_unlink(struct sim_replica *e, uint32_t b)
{
	struct block *k = &e->blk[b];

	if (k->prev != NIL)
		e->blk[k->prev].next = k->next;
	else
		e->free_head = k->next;
	if (k->next != NIL)
		e->blk[k->next].prev = k->prev;
	else
		e->free_tail = k->prev;
	k->prev = k->next = NIL;
	k->in_free = false;
	e->n_free--;
}

void sim_kv_free_append(struct sim_replica *e, uint32_t b)
{
	struct block *k = &e->blk[b];

	k->next = NIL;
	k->prev = e->free_tail;
	if (e->free_tail != NIL)
		e->blk[e->free_tail].next = b;
	else
		e->free_head = b;
	e->free_tail = b;
	k->in_free = true;
	e->n_free++;
}

/* A bucket holds its first block + 1 (0: empty), a block its next as NIL or an index. */
static uint32_t bucket_first(const struct sim_replica *e, uint64_t h)
{
	uint32_t v = e->cache_buckets[h & e->cache_mask];

	return v == 0 ? NIL : v - 1;
}

static void bucket_set_first(struct sim_replica *e, uint64_t h, uint32_t b)
{
	e->cache_buckets[h & e->cache_mask] = b == NIL ? 0 : b + 1;
}

static uint32_t cache_lookup(const struct sim_replica *e, uint64_t h)
{
	for (uint32_t b = bucket_first(e, h); b != NIL; b = e->blk[b].hnext)
		if (e->blk[b].hash == h)
			return b;
	return NIL;
}

static void cache_remove(struct sim_replica *e, uint32_t b)
{
	uint64_t h = e->blk[b].hash;
	uint32_t c = bucket_first(e, h);

	if (c == b)
		bucket_set_first(e, h, e->blk[b].hnext);
	else
		for (; c != NIL; c = e->blk[c].hnext)
			if (e->blk[c].hnext == b) {
				e->blk[c].hnext = e->blk[b].hnext;
				break;
			}
	e->blk[b].cached = false;
	e->blk[b].hnext = NIL;
}

static void cache_insert(struct sim_replica *e, uint32_t b, uint64_t h)
{
	e->blk[b].hash = h;
	e->blk[b].cached = true;
	e->blk[b].hnext = bucket_first(e, h);
	bucket_set_first(e, h, b);
}

/* Takes a block (ref 1) from the head of the free queue, evicting its cached
 * content: a fresh block while there are any (they are the queue's head). */
static uint32_t block_take(struct sim_replica *e)
{
	uint32_t b;

	if (e->next_fresh < e->n_blk) {
		b = e->next_fresh++;
		e->blk[b] = (struct block){ .ref = 1, .prev = NIL, .next = NIL, .hnext = NIL };
		e->n_free--;
		e->n_used++;
		return b;
	}
	b = e->free_head;
	free_unlink(e, b);
	if (e->blk[b].cached)
		cache_remove(e, b);
	e->blk[b].ref = 1;
	e->n_used++;
	return b;
}

static void block_ref(struct sim_replica *e, uint32_t b)
{
	if (e->blk[b].ref++ == 0) {
		free_unlink(e, b);
		e->n_used++;
	}
}

static void block_unref(struct sim_replica *e, uint32_t b)
{
	if (--e->blk[b].ref == 0) {
		sim_kv_free_append(e, b);
		e->n_used--;
	}
}

/* Hash of block i of r (valid for full blocks). */
static uint64_t req_block_hash(const struct req *r, uint32_t i)
{
	if (i < r->n_prompt_hash)
		return r->prompt_hash[i];
	return mix(mix(UINT64_C(0x5eed0f5e55100000), r->serial), i);
}

/* Frees every block of r, the last ones first so that a prefix shared with
 * others outlives its private tail in the LRU order. */
void sim_kv_req_free_blocks(struct sim_replica *e, struct req *r)
{
	for (uint32_t i = r->n_blocks; i > 0; i--)
		block_unref(e, r->blocks[i - 1]);
	r->n_blocks = 0;
	r->n_hashed = 0;
}

static int req_reserve_blocks(struct req *r, uint32_t n)
{
	uint32_t *b;
	uint32_t cap;

	if (n <= r->cap_blocks)
		return 0;
	cap = MAX(n, r->cap_blocks * 2);
	cap = MAX(cap, 4u);
	b = realloc(r->blocks, cap * sizeof(*b));
	if (!b)
		return -ENOMEM;
	r->blocks = b;
	r->cap_blocks = cap;
	return 0;
}

/* Ensures r holds blocks for num_computed + n_new tokens. False when the free
 * queue cannot supply them (nothing changes then). */
bool sim_kv_req_allocate(struct sim_replica *e, struct req *r, uint32_t n_new)
{
	uint32_t need = div_up((uint64_t)r->num_computed + n_new, SIM_BLOCK_SIZE);

	if (need <= r->n_blocks)
		return true;
	if (need - r->n_blocks > e->n_free)
		return false;
	if (req_reserve_blocks(r, need) < 0)
		return false;
	while (r->n_blocks < need)
		r->blocks[r->n_blocks++] = block_take(e);
	return true;
}

/* Registers r's newly completed full blocks in the prefix cache. */
void sim_kv_req_cache_blocks(struct sim_replica *e, struct req *r)
{
	uint32_t full = MIN(r->num_computed / SIM_BLOCK_SIZE, r->n_blocks);

	for (; r->n_hashed < full; r->n_hashed++) {
		uint32_t b = r->blocks[r->n_hashed];
		uint64_t h = req_block_hash(r, r->n_hashed);

		if (e->blk[b].cached)
			continue; /* found in the cache at admission */
		if (cache_lookup(e, h) == NIL)
			cache_insert(e, b, h);
	}
}

/* Admission of a request whose prompt KV another worker sent: blocks for all
 * of it, every prompt token but the last computed (that one is computed here
 * to sample from, as a full prefix-cache hit is); the prefix cache is not
 * consulted. False, changing nothing, when the blocks cannot be had. */
static bool admit_remote(struct sim_replica *e, struct req *r, uint32_t budget, uint32_t *ret_n_new)
{
	uint32_t have = MIN(r->n_remote, r->n_prompt + r->n_out - 1), n_new;

	n_new = MIN(r->n_prompt + r->n_out - have, budget);
	if (div_up((uint64_t)have + n_new, SIM_BLOCK_SIZE) > e->n_free)
		return false;
	r->n_blocks = 0;
	r->n_hashed = 0;
	r->num_computed = 0;
	if (!sim_kv_req_allocate(e, r, have + n_new))
		return false;
	r->num_computed = have;
	r->n_remote = 0;
	r->n_cached = 0;
	*ret_n_new = n_new;
	return true;
}

/* Prefix-cache lookup at admission: touches the cached leading blocks of r
 * (at most all but the last token, which must be computed to sample) and sets
 * num_computed. Returns false, changing nothing, when the hits plus the blocks
 * for n_new further tokens cannot be had. */
bool sim_kv_req_admit_blocks(struct sim_replica *e, struct req *r, uint32_t budget, uint32_t *ret_n_new)
{
	uint32_t num_tokens = r->n_prompt + r->n_out, hits = 0, hit_free = 0, n_new, need;
	uint32_t max_hits = (num_tokens - 1) / SIM_BLOCK_SIZE;

	if (r->n_remote > 0)
		return admit_remote(e, r, budget, ret_n_new);
	if (e->cfg.enable_prefix_caching) {
		/* Look up in slices of 64 so the scratch array stays on the stack. */
		while (hits < max_hits) {
			uint32_t b = cache_lookup(e, req_block_hash(r, hits));

			if (b == NIL)
				break;
			if (hits >= r->cap_blocks && req_reserve_blocks(r, MIN(max_hits, hits + 64)) < 0)
				break;
			r->blocks[hits] = b;
			if (e->blk[b].ref == 0)
				hit_free++;
			hits++;
		}
	}

	n_new = num_tokens - hits * SIM_BLOCK_SIZE;
	if (e->cfg.long_prefill_token_threshold > 0)
		n_new = MIN(n_new, e->cfg.long_prefill_token_threshold);
	n_new = MIN(n_new, budget);
	need = div_up((uint64_t)hits * SIM_BLOCK_SIZE + n_new, SIM_BLOCK_SIZE);
	if (need - hits + hit_free > e->n_free)
		return false;
	if (req_reserve_blocks(r, need) < 0)
		return false;
	for (uint32_t i = 0; i < hits; i++)
		block_ref(e, r->blocks[i]);
	r->n_blocks = hits;
	r->n_hashed = hits;
	r->num_computed = hits * SIM_BLOCK_SIZE;
	if (!sim_kv_req_allocate(e, r, n_new)) {
		/* Cannot happen after the count above; undo to stay consistent. */
		sim_kv_req_free_blocks(e, r);
		r->num_computed = 0;
		return false;
	}
	r->n_cached = hits * SIM_BLOCK_SIZE;
	if (r->n_out == 0 && e->cfg.enable_prefix_caching) {
		e->st.prefix_cache_queries += r->n_prompt;
		e->st.prefix_cache_hits += MIN(r->n_cached, r->n_prompt);
	}
	*ret_n_new = n_new;
	return true;
}
