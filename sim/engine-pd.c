/* engine-pd.c — disaggregated prefill and decode: P prefill workers and D
 * decode workers behind the engine's proxy, each side an engine of its own
 * (engine-dp.c: its workers are its data-parallel replicas, each request
 * to the next in turn, as vLLM's proxy and SGLang's router send them), and
 * the KV cache's way between them over the interconnect.
 *
 * A request is first prefilled on a prefill worker with one output token
 * (vLLM's proxy asks the prefill worker for max_tokens 1 and drops its
 * answer). When that token is sampled the prompt's KV cache leaves for a
 * decode worker: kv_bytes_token × prompt tokens over each GPU's link of the
 * smaller TP group, one transfer at a time into each decode worker, plus
 * the hand-off. On arrival the request waits for the decode worker's
 * scheduler like any other, its prompt's KV already held; its first step
 * computes the last prompt token to sample the first output token (vLLM's
 * decode worker does so with the remote KV; SGLang's would stream the
 * prefill worker's token — one decode step earlier), and from then on the
 * decode worker's steps hold decodes only: no prompt chunk interferes.
 *
 * Time: the caller's, for both sides. Advancing runs the prefill side to
 * now first, so every transfer that starts by now is queued (arriving later
 * than it left) before the decode side schedules its steps up to now: no
 * decode step ever starts without a request that had arrived by then.
 *
 * The link (PERFMODEL §12): NVLink at the GPU preset's bandwidth, PCIe Gen5
 * or Gen4 by GPU, one InfiniBand NIC per GPU (NDR 400 Gb/s, or HDR 200 on
 * A100 hosts), or 25 Gb/s Ethernet, each at its measured efficiency. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine-internal.h"
#include "engine.h"
#include "macro.h"

/* A request between its arrival and its hand-off to a decode worker: what
 * the prefill worker (asked for one token) does not carry. */
struct pending {
	uint64_t id;
	uint32_t max_tokens;
	struct pending *next;
};

#define PENDING_BUCKETS 1024

/* The engine's own state when it is disaggregated. */
struct sim_pd {
	struct sim_engine *prefill, *decode;
	struct sim_engine_callbacks cb; /* the caller's */
	void *userdata;
	uint32_t prefill_tp;
	struct pending *buckets[PENDING_BUCKETS];
};

static struct pending **pending_slot(struct sim_pd *pd, uint64_t id)
{
	uint64_t x = id;
	struct pending **p = &pd->buckets[splitmix64(&x) & (PENDING_BUCKETS - 1)];

	while (*p && (*p)->id != id)
		p = &(*p)->next;
	return p;
}

/* Takes the request's entry out (max_tokens 0 when it has none). */
static uint32_t pending_take(struct sim_pd *pd, uint64_t id)
{
	struct pending **p = pending_slot(pd, id), *q = *p;
	uint32_t n;

	if (!q)
		return 0;
	*p = q->next;
	n = q->max_tokens;
	free(q);
	return n;
}

/* ---- the interconnect ---- */

static const char *const link_names[_SIM_LINK_MAX] = {
	[SIM_LINK_AUTO] = "auto",         [SIM_LINK_NVLINK] = "nvlink",
	[SIM_LINK_PCIE] = "pcie",         [SIM_LINK_INFINIBAND] = "infiniband",
	[SIM_LINK_ETHERNET] = "ethernet",
};

const char *sim_interconnect_to_string(enum sim_interconnect i)
{
	return i < _SIM_LINK_MAX ? link_names[i] : NULL;
}

int sim_interconnect_from_string(const char *s, enum sim_interconnect *ret)
{
	for (int i = 0; s && i < _SIM_LINK_MAX; i++)
		if (strcasecmp(s, link_names[i]) == 0) {
			*ret = (enum sim_interconnect)i;
			return 0;
		}
	if (s && strcasecmp(s, "ib") == 0) {
		*ret = SIM_LINK_INFINIBAND;
		return 0;
	}
	return -EINVAL;
}

/* Whether the GPU is of the generation with PCIe Gen5 hosts and NDR NICs. */
static bool gen5_host(const struct sim_gpu *g)
{
	return strcmp(g->name, "H100") == 0 || strcmp(g->name, "H200") == 0 || strcmp(g->name, "MI300X") == 0;
}

void sim_link_resolve(const struct sim_gpu *g, enum sim_interconnect i, double gbps, struct sim_link *ret)
{
	struct sim_link l = { .kind = i, .latency_s = 0.5e-3 };
	double raw, eff;

	/* A GPU without NVLink (L40S) has its PCIe link as its GPU link. */
	if (l.kind == SIM_LINK_AUTO)
		l.kind = g->link_bw >= 100e9 ? SIM_LINK_NVLINK : SIM_LINK_PCIE;
	switch (l.kind) {
	case SIM_LINK_NVLINK:
		/* the all-reduce's bus efficiency on the same link (PERFMODEL §6 B_bus) */
		raw = g->link_bw >= 100e9 ? g->link_bw : (gen5_host(g) ? 64e9 : 32e9);
		eff = 0.8;
		break;
	case SIM_LINK_PCIE:
		raw = gen5_host(g) ? 64e9 : 32e9; /* x16, one direction */
		eff = 0.8;
		break;
	case SIM_LINK_INFINIBAND:
		/* Mooncake's transfer engine: 190 GB/s over 8×400 Gb/s RDMA (0.475) */
		raw = gen5_host(g) ? 50e9 : 25e9;
		eff = 0.475;
		l.latency_s = 1e-3;
		break;
	default:
		raw = 25e9 / 8; /* DistServe's cross-node testbed: 25 Gb/s */
		eff = 0.5;
		l.latency_s = 1e-3;
		break;
	}
	if (gbps > 0)
		raw = gbps * 1e9;
	l.bw = raw * eff;
	*ret = l;
}

double sim_link_transfer_seconds(const struct sim_link *l, double kv_bytes_token, uint64_t n_tokens, uint32_t tp_src,
				 uint32_t tp_dst)
{
	uint32_t lanes = MAX(MIN(tp_src, tp_dst), 1u);

	if (!(l->bw > 0))
		return l->latency_s;
	return l->latency_s + kv_bytes_token * (double)n_tokens / (l->bw * lanes);
}

/* ---- the workers' configurations ---- */

static uint32_t or_default(uint32_t v, uint32_t d)
{
	return v ? v : d;
}

/* One side's engine: its workers as replicas, each of the side's TP and
 * batch limits, sent requests in turn. */
static void side_config(const struct sim_engine_config *c, bool prefill, struct sim_engine_config *ret)
{
	const struct sim_pd_config *pd = &c->pd;
	struct sim_engine_config s = *c;

	s.pd = (struct sim_pd_config){ 0 };
	s.dp = prefill ? pd->prefill_workers : pd->decode_workers;
	s.tp = or_default(prefill ? pd->prefill_tp : pd->decode_tp, MAX(c->tp, 1u));
	s.pp = 1;
	s.dp_balance = SIM_DP_ROUND_ROBIN;
	s.max_num_seqs = or_default(prefill ? pd->prefill_max_num_seqs : pd->decode_max_num_seqs, c->max_num_seqs);
	s.max_num_batched_tokens =
		or_default(prefill ? pd->prefill_max_num_batched_tokens : pd->decode_max_num_batched_tokens,
			   c->max_num_batched_tokens);
	/* each worker is a server of its own, on GPUs of its own */
	s.gpus = s.dp * s.tp;
	/* speculation drafts output tokens: the decode side's alone */
	if (prefill) {
		s.spec_method = SIM_SPEC_NONE;
		s.spec_tokens = 0;
	}
	s.seed = c->seed ^ (prefill ? UINT64_C(0x7072656669) : UINT64_C(0x6465636f6465));
	*ret = s;
}

/* The start-up checks of both sides, each named in the message, and that
 * the host has the GPUs for all of them. */
int sim_pd_check_startup(const struct sim_engine_config *c, struct sim_startup_check *ret, struct error *err)
{
	struct sim_engine_config side;
	uint32_t need = sim_engine_config_gpus(c);
	int r;

	for (int i = 0; i < 2; i++) {
		side_config(c, i == 0, &side);
		r = sim_engine_check_startup(&side, ret, err);
		if (r < 0)
			return error_prefix(err, r, "%s worker", i == 0 ? "prefill" : "decode");
	}
	if (c->gpus && need > c->gpus) {
		ret->cause = SIM_STARTUP_CONFIG;
		return error_set(err, -EINVAL,
				 "ValueError: %u prefill worker(s) of TP %u and %u decode worker(s) of TP %u need %u "
				 "GPUs, but only %u are available",
				 c->pd.prefill_workers, or_default(c->pd.prefill_tp, c->tp), c->pd.decode_workers,
				 or_default(c->pd.decode_tp, c->tp), need, c->gpus);
	}
	return 0;
}

/* The workers start side by side: the slower side sets the time. */
uint64_t sim_pd_startup_usec(const struct sim_engine_config *c, struct sim_startup_phases *ret_phases)
{
	struct sim_startup_phases ph[2] = { { 0 } };
	struct sim_engine_config side;
	uint64_t u[2];

	for (int i = 0; i < 2; i++) {
		side_config(c, i == 0, &side);
		u[i] = sim_engine_startup_usec(&side, &ph[i]);
	}
	if (ret_phases)
		*ret_phases = u[0] >= u[1] ? ph[0] : ph[1];
	return MAX(u[0], u[1]);
}

/* ---- the two sides' callbacks ---- */

static void prefill_scheduled(void *userdata, uint64_t req_id, uint64_t t)
{
	struct sim_engine *e = userdata;

	if (e->pd->cb.scheduled)
		e->pd->cb.scheduled(e->pd->userdata, req_id, t);
}

/* The prefill worker's one token is dropped, as vLLM's proxy drops it. */
static void prefill_token(void *userdata, uint64_t req_id, uint32_t index, uint64_t t, bool last)
{
}

/* The prompt is prefilled: its KV cache leaves for a decode worker. */
static void prefill_finished(void *userdata, uint64_t req_id, uint64_t t, uint32_t n_prompt, uint32_t n_output,
			     uint32_t n_cached)
{
	struct sim_engine *e = userdata;
	struct sim_pd *pd = e->pd;
	uint32_t max_tokens = pending_take(pd, req_id);
	struct error err = { 0 };

	/* the decode side takes what the prefill side took (same model and length limits) */
	if (max_tokens > 0)
		(void)sim_engine_submit_kv(pd->decode, req_id, NULL, n_prompt, max_tokens, pd->prefill_tp, t, NULL,
					   &err);
}

static void pass_step(void *userdata, uint64_t start, uint64_t end, const struct sim_batch *b)
{
	struct sim_engine *e = userdata;

	if (e->pd->cb.step)
		e->pd->cb.step(e->pd->userdata, start, end, b);
}

static void pass_preempted(void *userdata, uint64_t req_id, uint64_t t)
{
	struct sim_engine *e = userdata;

	if (e->pd->cb.preempted)
		e->pd->cb.preempted(e->pd->userdata, req_id, t);
}

static void decode_token(void *userdata, uint64_t req_id, uint32_t index, uint64_t t, bool last)
{
	struct sim_engine *e = userdata;

	if (e->pd->cb.token)
		e->pd->cb.token(e->pd->userdata, req_id, index, t, last);
}

static void decode_finished(void *userdata, uint64_t req_id, uint64_t t, uint32_t n_prompt, uint32_t n_output,
			    uint32_t n_cached)
{
	struct sim_engine *e = userdata;

	if (e->pd->cb.finished)
		e->pd->cb.finished(e->pd->userdata, req_id, t, n_prompt, n_output, n_cached);
}

/* ---- the engine ---- */

int sim_pd_new(struct sim_engine *e, const struct sim_engine_callbacks *cb, void *userdata, struct error *err)
{
	static const struct sim_engine_callbacks prefill_cb = {
		.token = prefill_token,
		.finished = prefill_finished,
		.scheduled = prefill_scheduled,
		.preempted = pass_preempted,
		.step = pass_step,
	};
	static const struct sim_engine_callbacks decode_cb = {
		.token = decode_token,
		.finished = decode_finished,
		.preempted = pass_preempted,
		.step = pass_step,
	};
	const struct sim_engine_info *pi, *di;
	struct sim_engine_config side;
	struct sim_pd *pd;
	int r;

	r = sim_pd_check_startup(&e->cfg, &e->info.check, err);
	if (r < 0)
		return r;
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	e->pd = pd;
	if (cb)
		pd->cb = *cb;
	pd->userdata = userdata;
	side_config(&e->cfg, true, &side);
	pd->prefill_tp = side.tp;
	r = sim_engine_new(&side, &prefill_cb, e, &pd->prefill, err);
	if (r < 0)
		return error_prefix(err, r, "prefill worker");
	side_config(&e->cfg, false, &side);
	r = sim_engine_new(&side, &decode_cb, e, &pd->decode, err);
	if (r < 0)
		return error_prefix(err, r, "decode worker");

	/* What the engine reports is the decode side's (its batch, its KV cache),
	 * its cost and start-up the whole deployment's. */
	pi = sim_engine_get_info(pd->prefill);
	di = sim_engine_get_info(pd->decode);
	e->perf = *sim_engine_get_perf(pd->decode);
	e->info = *di;
	e->info.check = di->check;
	e->info.usd_per_hour = e->cfg.gpu.usd_per_hour * sim_engine_config_gpus(&e->cfg);
	e->info.startup_usec = MAX(pi->startup_usec, di->startup_usec);
	e->info.startup = pi->startup_usec >= di->startup_usec ? pi->startup : di->startup;
	e->info.replicas = pi->replicas + di->replicas;
	e->info.prefill_replicas = pi->replicas;
	e->info.max_model_len = MIN(pi->max_model_len, di->max_model_len);
	e->cfg.max_model_len = e->info.max_model_len;
	return 0;
}

void sim_pd_free(struct sim_pd *pd)
{
	if (!pd)
		return;
	sim_engine_free(pd->prefill);
	sim_engine_free(pd->decode);
	for (size_t i = 0; i < PENDING_BUCKETS; i++)
		while (pd->buckets[i]) {
			struct pending *q = pd->buckets[i];

			pd->buckets[i] = q->next;
			free(q);
		}
	free(pd);
}

int sim_pd_submit(struct sim_engine *e, uint64_t req_id, const uint32_t *prompt_ids, uint32_t n_prompt,
		  uint32_t max_tokens, uint64_t now_usec, struct error *err)
{
	struct sim_pd *pd = e->pd;
	struct pending *q;
	int r;

	if (max_tokens == 0)
		return error_set(err, -EINVAL, "max_tokens: must be at least 1, got 0");
	if ((uint64_t)n_prompt + max_tokens > e->cfg.max_model_len)
		return error_set(err, -E2BIG,
				 "This model's maximum context length is %u tokens. However, you requested %" PRIu64
				 " tokens (%u in the messages, %u in the completion). Please reduce the length of the "
				 "messages or completion.",
				 e->cfg.max_model_len, (uint64_t)n_prompt + max_tokens, n_prompt, max_tokens);
	if (sim_pd_replica_of(e, req_id) >= 0 || *pending_slot(pd, req_id))
		return error_set(err, -EEXIST, "request %" PRIu64 " is already in the engine", req_id);
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	r = sim_engine_submit(pd->prefill, req_id, prompt_ids, n_prompt, 1, now_usec, err);
	if (r < 0) {
		free(q);
		return r;
	}
	q->id = req_id;
	q->max_tokens = max_tokens;
	q->next = *pending_slot(pd, req_id);
	*pending_slot(pd, req_id) = q;
	return 0;
}

int sim_pd_replica_of(const struct sim_engine *e, uint64_t req_id)
{
	int i = sim_engine_replica_of(e->pd->prefill, req_id);

	if (i >= 0)
		return i;
	i = sim_engine_replica_of(e->pd->decode, req_id);
	return i < 0 ? i : i + (int)e->info.prefill_replicas;
}

int sim_pd_abort(struct sim_engine *e, uint64_t req_id)
{
	int r = sim_engine_abort(e->pd->prefill, req_id);

	(void)pending_take(e->pd, req_id);
	if (r == -ENOENT)
		r = sim_engine_abort(e->pd->decode, req_id);
	return r;
}

uint64_t sim_pd_next_event_usec(const struct sim_engine *e)
{
	return MIN(sim_engine_next_event_usec(e->pd->prefill), sim_engine_next_event_usec(e->pd->decode));
}

int sim_pd_advance(struct sim_engine *e, uint64_t now_usec)
{
	/* the prefill side first: every KV cache that leaves by now is on its way
	 * before the decode side schedules up to now */
	int n = sim_engine_advance(e->pd->prefill, now_usec);

	return n + sim_engine_advance(e->pd->decode, now_usec);
}

void sim_pd_get_stats(const struct sim_engine *e, struct sim_engine_stats *ret)
{
	struct sim_engine_stats p, d, s;

	sim_engine_get_stats(e->pd->prefill, &p);
	sim_engine_get_stats(e->pd->decode, &d);
	/* requests count where the client sees them: prompts prefilled, tokens decoded */
	s = d;
	s.running = p.running + d.running;
	s.waiting = p.waiting + d.waiting;
	s.num_blocks = p.num_blocks + d.num_blocks;
	s.used_blocks = p.used_blocks + d.used_blocks;
	s.kv_usage = s.num_blocks ? (double)s.used_blocks / s.num_blocks : 0.0;
	s.preemptions = p.preemptions + d.preemptions;
	s.prompt_tokens = p.prompt_tokens;
	s.prefix_cache_queries = p.prefix_cache_queries;
	s.prefix_cache_hits = p.prefix_cache_hits;
	s.steps = p.steps + d.steps;
	s.busy_usec = p.busy_usec + d.busy_usec;
	s.requests_aborted = p.requests_aborted + d.requests_aborted;
	*ret = s;
}

void sim_pd_get_replica_stats(const struct sim_engine *e, uint32_t i, struct sim_engine_stats *ret)
{
	if (i < e->info.prefill_replicas)
		sim_engine_get_replica_stats(e->pd->prefill, i, ret);
	else
		sim_engine_get_replica_stats(e->pd->decode, i - e->info.prefill_replicas, ret);
}
