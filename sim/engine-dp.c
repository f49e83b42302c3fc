/* engine-dp.c — the engine of engine.h: one or more data-parallel replicas
 * (engine.c) behind one front end, and what the configuration resolves to
 * before any of them exists (the deployment's performance model, its
 * drafter, the start-up checks, the start-up time).
 *
 * With --data-parallel-size N the engine holds N replicas of one TP × PP
 * group, each with its own scheduler, KV cache and prefix cache, and sends
 * each request to one of them when it arrives, by the engine's rule:
 * vLLM's front end picks the replica with the fewest waiting × 4 + running
 * requests (v1/engine/core_client.py, DPLBAsyncMPClient; its counts come
 * from the replicas every 100 ms, here they are exact), SGLang's
 * controller goes round robin by default or to the shortest queue. A
 * request stays on its replica until it finishes. Time is the caller's for
 * all of them: the next event is the earliest of any replica's, and
 * advancing runs each up to the same instant. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine-internal.h"
#include "engine.h"
#include "macro.h"

/* The deployment one replica is: the roofline of its TP × PP group and its
 * drafter, with the drafter's memory on its GPUs. */
static int resolve_perf(const struct sim_engine_config *c, struct sim_perf *ret_perf, struct sim_spec *ret_spec,
			struct error *err)
{
	struct sim_perf perf;
	struct sim_spec spec;
	int r;

	r = sim_perf_init(&perf, &c->model, &c->gpu, c->quant, c->kv_dtype, c->tp, &c->profile, err);
	if (r >= 0)
		r = sim_perf_set_pipeline(&perf, MAX(c->pp, 1u), err);
	if (r >= 0)
		r = sim_spec_init(&spec, &perf, c->spec_method, c->spec_tokens,
				  c->spec_method == SIM_SPEC_DRAFT_MODEL ? &c->draft_model : NULL, c->spec_draft_tp,
				  err);
	if (r < 0)
		return r;
	*ret_perf = perf;
	if (ret_spec)
		*ret_spec = spec;
	return 0;
}

static int check_startup(const struct sim_engine_config *c, const struct sim_perf *perf, struct sim_startup_check *ret,
			 struct error *err)
{
	struct sim_memory_policy policy = {
		.rules = c->memory_rules,
		.fraction = c->gpu_memory_utilization,
		.kv_tokens = c->kv_tokens_fixed ? c->kv_tokens_fixed : c->max_model_len,
		.fail_fast = c->kv_fail_fast,
	};
	uint32_t gpus = sim_engine_config_gpus(c);
	int r;

	r = sim_perf_check_startup(perf, &policy, c->gpus, c->max_model_len, c->max_num_seqs, c->max_num_batched_tokens,
				   ret, err);
	if (r < 0 || gpus <= c->gpus)
		return r;
	/* Every replica needs GPUs of its own. */
	ret->cause = SIM_STARTUP_CONFIG;
	return error_set(err, -EINVAL,
			 "ValueError: data_parallel_size (%u) x tensor_parallel_size (%u) x pipeline_parallel_size "
			 "(%u) = %u GPUs, but only %u are available",
			 c->dp, c->tp, c->pp, gpus, c->gpus);
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
	if (sim_pd_enabled(&cfg.pd))
		return sim_pd_check_startup(&cfg, ret_check, err);
	r = resolve_perf(&cfg, &perf, NULL, err);
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

	if (sim_engine_config_resolve(&cfg, NULL) < 0)
		return 0;
	if (sim_pd_enabled(&cfg.pd))
		return sim_pd_startup_usec(&cfg, ret_phases);
	if (resolve_perf(&cfg, &perf, NULL, NULL) < 0)
		return 0;
	u = startup_usec(&cfg, &perf, &ph);
	if (ret_phases)
		*ret_phases = ph;
	return u;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct sim_engine *, sim_engine_free)

int sim_engine_new(const struct sim_engine_config *c, const struct sim_engine_callbacks *cb, void *userdata,
		   struct sim_engine **ret, struct error *err)
{
	_cleanup_(sim_engine_freep) struct sim_engine *e = NULL;
	struct sim_spec_acceptance acc = { 0 };
	struct sim_spec spec;
	int r;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->cfg = *c;
	r = sim_engine_config_resolve(&e->cfg, err);
	if (r < 0)
		return r;
	sim_link_resolve(&e->cfg.gpu, e->cfg.interconnect, e->cfg.interconnect_gbps, &e->link);
	if (sim_pd_enabled(&e->cfg.pd)) {
		r = sim_pd_new(e, cb, userdata, err);
		if (r < 0)
			return r;
		*ret = TAKE_PTR(e);
		return 0;
	}
	r = resolve_perf(&e->cfg, &e->perf, &spec, err);
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
	e->info.usd_per_hour = e->cfg.gpu.usd_per_hour * sim_engine_config_gpus(&e->cfg);
	e->info.weights_gib = e->info.memory.weights / SIM_GIB;
	e->info.replicas = e->cfg.dp;
	if (spec.method != SIM_SPEC_NONE) {
		acc = e->cfg.spec_acceptance;
		if (acc.n == 0)
			sim_spec_acceptance_default(spec.method, &acc);
		e->info.spec_k = spec.k;
		e->info.spec_expected_tokens = sim_spec_expected_tokens(&acc, spec.k);
	}

	e->rep = calloc(e->cfg.dp, sizeof(*e->rep));
	if (!e->rep)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->cfg.dp; i++) {
		r = sim_replica_new(&e->cfg, &e->perf, &spec, &acc, i, &e->info, cb, userdata, &e->rep[i]);
		if (r < 0)
			return r;
		e->n_rep++;
	}
	*ret = TAKE_PTR(e);
	return 0;
}

struct sim_engine *sim_engine_free(struct sim_engine *e)
{
	if (!e)
		return NULL;
	sim_pd_free(e->pd);
	for (uint32_t i = 0; i < e->n_rep; i++)
		sim_replica_free(e->rep[i]);
	free(e->rep);
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

/* The replica a new request goes to. */
static uint32_t pick_replica(struct sim_engine *e)
{
	uint32_t best = 0;
	uint64_t best_score = UINT64_MAX;

	if (e->n_rep == 1)
		return 0;
	if (e->cfg.dp_balance == SIM_DP_ROUND_ROBIN) {
		best = e->next_rr;
		e->next_rr = (e->next_rr + 1) % e->n_rep;
		return best;
	}
	/* The first of the least loaded, as vLLM's front end searches (its start index is fixed). */
	for (uint32_t i = 0; i < e->n_rep; i++) {
		const struct sim_replica *r = e->rep[i];
		uint64_t score = e->cfg.dp_balance == SIM_DP_SCORE ? (uint64_t)r->n_waiting * 4 + r->n_running
								   : (uint64_t)r->n_waiting + r->n_running;

		if (score < best_score) {
			best_score = score;
			best = i;
		}
	}
	return best;
}

int sim_engine_submit(struct sim_engine *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
		      uint32_t max_tokens, uint64_t now_usec, struct error *err)
{
	if (e->pd)
		return sim_pd_submit(e, req_id, prompt_ids, n_prompt, max_tokens, now_usec, err);
	if (e->n_rep > 1 && sim_engine_replica_of(e, req_id) >= 0)
		return error_set(err, -EEXIST, "request %" PRIu64 " is already in the engine", req_id);
	return sim_replica_submit(e->rep[pick_replica(e)], req_id, prompt_ids, n_prompt, max_tokens, 0, now_usec, err);
}

int sim_engine_submit_kv(struct sim_engine *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
			 uint32_t max_tokens, uint32_t tp_src, uint64_t now_usec, uint64_t *ret_ready_usec,
			 struct error *err)
{
	struct sim_replica *rep;
	uint64_t ready;
	int r;

	if (e->pd)
		return error_set(err, -EOPNOTSUPP, "a disaggregated engine takes prompts, not KV caches");
	if (e->n_rep > 1 && sim_engine_replica_of(e, req_id) >= 0)
		return error_set(err, -EEXIST, "request %" PRIu64 " is already in the engine", req_id);
	rep = e->rep[pick_replica(e)];
	/* one transfer at a time into a replica: a later one waits for the link */
	ready = MAX(now_usec, rep->link_free) +
		(uint64_t)llround(1e6 * sim_link_transfer_seconds(&e->link, e->perf.kv_bytes_token, n_prompt,
								  MAX(tp_src, 1u), e->cfg.tp));
	r = sim_replica_submit(rep, req_id, prompt_ids, n_prompt, max_tokens, n_prompt, ready, err);
	if (r < 0)
		return r;
	rep->link_free = ready;
	if (ret_ready_usec)
		*ret_ready_usec = ready;
	return 0;
}

int sim_engine_replica_of(const struct sim_engine *e, uint64_t req_id)
{
	if (e->pd)
		return sim_pd_replica_of(e, req_id);
	for (uint32_t i = 0; i < e->n_rep; i++)
		if (sim_replica_has(e->rep[i], req_id))
			return (int)i;
	return -ENOENT;
}

int sim_engine_abort(struct sim_engine *e, uint64_t req_id)
{
	int i;

	if (e->pd)
		return sim_pd_abort(e, req_id);
	i = sim_engine_replica_of(e, req_id);
	return i < 0 ? i : sim_replica_abort(e->rep[i], req_id);
}

uint64_t sim_engine_next_event_usec(const struct sim_engine *e)
{
	uint64_t t = UINT64_MAX;

	if (e->pd)
		return sim_pd_next_event_usec(e);
	for (uint32_t i = 0; i < e->n_rep; i++)
		t = MIN(t, sim_replica_next_event_usec(e->rep[i]));
	return t;
}

int sim_engine_advance(struct sim_engine *e, uint64_t now_usec)
{
	int n = 0;

	if (e->pd)
		return sim_pd_advance(e, now_usec);
	for (uint32_t i = 0; i < e->n_rep; i++)
		n += sim_replica_advance(e->rep[i], now_usec);
	return n;
}

void sim_engine_get_replica_stats(const struct sim_engine *e, uint32_t i, struct sim_engine_stats *ret)
{
	if (e->pd) {
		sim_pd_get_replica_stats(e, i, ret);
		return;
	}
	sim_replica_get_stats(e->rep[MIN(i, e->n_rep - 1)], ret);
}

void sim_engine_get_stats(const struct sim_engine *e, struct sim_engine_stats *ret)
{
	struct sim_engine_stats s = { 0 };

	if (e->pd) {
		sim_pd_get_stats(e, ret);
		return;
	}
	for (uint32_t i = 0; i < e->n_rep; i++) {
		struct sim_engine_stats r;

		sim_replica_get_stats(e->rep[i], &r);
		s.running += r.running;
		s.waiting += r.waiting;
		s.num_blocks += r.num_blocks;
		s.used_blocks += r.used_blocks;
		s.preemptions += r.preemptions;
		s.prompt_tokens += r.prompt_tokens;
		s.generation_tokens += r.generation_tokens;
		s.prefix_cache_queries += r.prefix_cache_queries;
		s.prefix_cache_hits += r.prefix_cache_hits;
		s.steps += r.steps;
		s.busy_usec += r.busy_usec;
		s.requests_finished += r.requests_finished;
		s.requests_aborted += r.requests_aborted;
		s.spec_drafts += r.spec_drafts;
		s.spec_draft_tokens += r.spec_draft_tokens;
		s.spec_accepted += r.spec_accepted;
		for (int p = 0; p < SIM_SPEC_MAX_TOKENS; p++)
			s.spec_accepted_per_pos[p] += r.spec_accepted_per_pos[p];
		if (i == 0 || r.last_step_usec > 0) {
			s.last_step_tokens = r.last_step_tokens;
			s.last_step_seqs = r.last_step_seqs;
			s.last_step_usec = r.last_step_usec;
		}
	}
	s.kv_usage = s.num_blocks ? (double)s.used_blocks / s.num_blocks : 0.0;
	*ret = s;
}
