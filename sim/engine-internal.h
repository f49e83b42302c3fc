/* engine-internal.h — the engine's state, shared by engine.c (one replica:
 * requests, queues, the scheduler), engine-kv.c (a replica's KV blocks and
 * prefix cache) and engine-dp.c (the engine: data-parallel replicas behind
 * one front end). Not a public API: engine.h is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define NIL UINT32_MAX

struct block {
	uint64_t hash;
	uint32_t ref;
	uint32_t prev, next; /* free queue (when ref == 0) */
	uint32_t hnext;      /* hash bucket chain (when cached) */
	bool cached;
	bool in_free;
};

struct req {
	uint64_t id;
	uint64_t serial;
	uint64_t arrival_usec;
	uint32_t n_prompt, max_tokens, n_out, num_computed, n_cached;
	uint32_t n_remote; /* prompt tokens whose KV a prefill worker sent (until its first admission) */
	bool running;
	bool was_scheduled; /* its first step has been scheduled */
	bool in_flight;     /* in a micro-batch still going through the pipeline */
	double lookup_rate; /* ngram: how often prompt lookup finds a continuation (sim_spec_lookup_rate) */
	uint32_t running_idx;
	uint64_t *prompt_hash; /* one per full prompt block; NULL when ids were not given */
	uint32_t n_prompt_hash;
	uint32_t *blocks;
	uint32_t n_blocks, cap_blocks;
	uint32_t n_hashed; /* leading blocks already registered in the cache */
	struct req *wprev, *wnext;
	struct req *id_next;
};

struct sched {
	struct req *req;
	uint32_t n_new;
	uint32_t n_draft; /* of n_new, draft tokens to verify */
};

/* A step in flight: with pipeline stages, up to pp of them at once, each
 * with its own requests. */
struct microbatch {
	uint64_t start, end;
	struct sched *sched;
	uint32_t n_sched;
};

/* One replica: a TP × PP group with its own scheduler and KV cache. */
struct sim_replica {
	struct sim_engine_config cfg;
	struct sim_engine_callbacks cb;
	void *userdata;
	struct sim_perf perf;
	struct sim_engine_info info;
	struct sim_spec spec;
	struct sim_spec_acceptance acceptance;
	uint32_t index; /* among the engine's replicas */

	/* requests */
	struct req **buckets;
	size_t n_buckets, n_reqs;
	uint64_t next_serial;
	struct req *wait_head, *wait_tail;
	uint32_t n_waiting;
	struct req **running;
	uint32_t n_running_slots, n_running; /* slots may hold NULL holes until compaction */
	uint32_t n_in_flight;                /* running requests in a micro-batch in flight */

	/* KV blocks. Blocks from next_fresh on have never been used: they are
	 * the head of the free queue, in index order, ahead of free_head..free_tail,
	 * and their memory is not touched until taken (a replica is made for every
	 * simulation the search runs; most use a fraction of a large cache). */
	struct block *blk;
	uint32_t n_blk, n_free, n_used;
	uint32_t next_fresh;
	uint32_t free_head, free_tail;
	uint32_t *cache_buckets; /* block + 1, 0 for none (zeroed memory is empty) */
	uint32_t cache_mask;

	/* the steps in flight, oldest first (a ring of pp micro-batches) */
	struct microbatch *mb;
	uint32_t n_mb, mb_head, max_mb;
	uint64_t last_end;   /* the last step's end (completed) */
	uint64_t stage_free; /* when the first stage can take the next micro-batch */
	bool blocked;        /* nothing could be scheduled: wait for a step to end */

	uint64_t rng[4];
	struct sim_engine_stats st;
	uint64_t link_free; /* when its link is free to take the next KV transfer in */
};

/* ---- small helpers ---- */

static inline uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline uint64_t mix(uint64_t h, uint64_t v)
{
	uint64_t x = h ^ (v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2));

	return splitmix64(&x);
}

static inline uint32_t div_up(uint64_t a, uint32_t b)
{
	return (uint32_t)((a + b - 1) / b);
}

/* The engine of engine.h: its replicas behind one front end; or, when
 * disaggregated (engine-pd.c), a prefill and a decode engine of its own. */
struct sim_engine {
	struct sim_engine_config cfg;
	struct sim_engine_info info;
	struct sim_perf perf; /* one replica's */
	struct sim_replica **rep;
	uint32_t n_rep;
	uint32_t next_rr;     /* round robin's next replica; the score's start of search */
	struct sim_link link; /* what a KV cache sent to it crosses */
	struct sim_pd *pd;    /* disaggregated: the workers (NULL: one engine) */
};

/* ---- engine.c: one replica ---- */

/* Creates replica index of config c (resolved; the start-up checks passed)
 * with perf, the drafter and its acceptance already resolved. */
int sim_replica_new(const struct sim_engine_config *c, const struct sim_perf *perf, const struct sim_spec *spec,
		    const struct sim_spec_acceptance *acc, uint32_t index, const struct sim_engine_info *info,
		    const struct sim_engine_callbacks *cb, void *userdata, struct sim_replica **ret);
struct sim_replica *sim_replica_free(struct sim_replica *e);
bool sim_replica_has(const struct sim_replica *e, uint64_t req_id);
/* n_remote: leading prompt tokens whose KV another worker computed (0: none). */
int sim_replica_submit(struct sim_replica *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
		       uint32_t max_tokens, uint32_t n_remote, uint64_t now_usec, struct error *err);
int sim_replica_abort(struct sim_replica *e, uint64_t req_id);
uint64_t sim_replica_next_event_usec(const struct sim_replica *e);
int sim_replica_advance(struct sim_replica *e, uint64_t now_usec);
void sim_replica_get_stats(const struct sim_replica *e, struct sim_engine_stats *ret);

/* ---- engine-pd.c: the disaggregated engine ---- */

struct sim_pd;
/* Creates the prefill and decode workers of e (its config resolved, pd set)
 * and fills e->info; errors name the worker whose start-up check failed. */
int sim_pd_new(struct sim_engine *e, const struct sim_engine_callbacks *cb, void *userdata, struct error *err);
void sim_pd_free(struct sim_pd *pd);
int sim_pd_check_startup(const struct sim_engine_config *c, struct sim_startup_check *ret, struct error *err);
uint64_t sim_pd_startup_usec(const struct sim_engine_config *c, struct sim_startup_phases *ret_phases);
int sim_pd_submit(struct sim_engine *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
		  uint32_t max_tokens, uint64_t now_usec, struct error *err);
int sim_pd_replica_of(const struct sim_engine *e, uint64_t req_id);
int sim_pd_abort(struct sim_engine *e, uint64_t req_id);
uint64_t sim_pd_next_event_usec(const struct sim_engine *e);
int sim_pd_advance(struct sim_engine *e, uint64_t now_usec);
void sim_pd_get_stats(const struct sim_engine *e, struct sim_engine_stats *ret);
void sim_pd_get_replica_stats(const struct sim_engine *e, uint32_t i, struct sim_engine_stats *ret);

/* ---- engine-kv.c ---- */

/* Puts unreferenced block b at the tail of the free queue (LRU order). */
void sim_kv_free_append(struct sim_replica *e, uint32_t b);
/* Frees every block of r, the last ones first so that a prefix shared with
 * others outlives its private tail in the LRU order. */
void sim_kv_req_free_blocks(struct sim_replica *e, struct req *r);
/* Ensures r holds blocks for num_computed + n_new tokens. False when the free
 * queue cannot supply them (nothing changes then). */
bool sim_kv_req_allocate(struct sim_replica *e, struct req *r, uint32_t n_new);
/* Registers r's newly completed full blocks in the prefix cache. */
void sim_kv_req_cache_blocks(struct sim_replica *e, struct req *r);
/* Prefix-cache lookup at admission: touches the cached leading blocks of r
 * (at most all but the last token) and sets num_computed; *ret_n_new gets
 * the tokens to compute this step. False, changing nothing, when the hits
 * plus the blocks for them cannot be had. */
bool sim_kv_req_admit_blocks(struct sim_replica *e, struct req *r, uint32_t budget, uint32_t *ret_n_new);
