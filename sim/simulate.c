/* simulate.c — goodput-sim's virtual-time mode.
 *
 * A workload from the probe's generator runs through the engine model with a
 * virtual clock: the loop always jumps to the earlier of the next send and
 * the end of the step in flight, so a run of thousands of requests takes
 * milliseconds. Sends follow the workload's arrival times (open loop) or, with
 * max_concurrency, wait for a free slot as vLLM's benchmark does with its
 * semaphore (send = max(arrival, the time a slot frees)). Each request's
 * timings are what a streaming client would see against an ideal network:
 * TTFT = first token's step end − send, ITL = gaps between its token times.
 * The load point is then reduced by probe_result_compute, the same code the
 * real probe uses, so the result object is identical in form.
 *
 * On top: a rate search by bisection (the virtual run is deterministic, so
 * no confidence intervals are needed), the saturated throughput, and the
 * `goodput-sim simulate` command. */

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "simulate.h"
#include "workload-flags.h"

struct sim_req_state {
	uint64_t send_usec, first_usec, last_usec;
	uint64_t *itl;
	uint32_t n_out, cap_itl;
	bool done, failed;
};

struct sim_run {
	struct sim_req_state *st;
	size_t n;
	uint32_t in_flight;
	/* step-weighted engine gauges */
	struct sim_engine *engine;
	double kv_sum, running_sum, waiting_sum;
	double kv_peak;
	uint32_t running_peak, waiting_peak;
	uint64_t samples;
	bool oom;
	/* a prompt's ids while it is submitted (only when the engine caches
	 * prefixes: nothing else reads them) */
	uint32_t *ids;
	uint32_t ids_cap;
};

static void on_token(void *userdata, uint64_t req_id, uint32_t index, uint64_t t, bool last)
{
	struct sim_run *run = userdata;
	struct sim_req_state *s = &run->st[req_id];

	if (index == 0)
		s->first_usec = t;
	else if (s->n_out - 1 < s->cap_itl)
		s->itl[s->n_out - 1] = t - s->last_usec;
	s->last_usec = t;
	s->n_out++;
}

static void on_finished(void *userdata, uint64_t req_id, uint64_t t, uint32_t n_prompt, uint32_t n_output,
			uint32_t n_cached)
{
	struct sim_run *run = userdata;

	run->st[req_id].done = true;
	run->in_flight--;
}

static void on_step(void *userdata, uint64_t start, uint64_t end, const struct sim_batch *b)
{
	struct sim_run *run = userdata;
	struct sim_engine_stats s;

	sim_engine_get_stats(run->engine, &s);
	run->kv_sum += s.kv_usage;
	run->running_sum += s.running;
	run->waiting_sum += s.waiting;
	run->kv_peak = MAX(run->kv_peak, s.kv_usage);
	run->running_peak = MAX(run->running_peak, s.running);
	run->waiting_peak = MAX(run->waiting_peak, s.waiting);
	run->samples++;
}

static void run_done(struct sim_run *run)
{
	if (run->st)
		for (size_t i = 0; i < run->n; i++)
			free(run->st[i].itl);
	free(run->st);
	run->st = NULL;
	free(run->ids);
	run->ids = NULL;
}

/* Sends request i at t (the engine rejects prompts longer than max_model_len:
 * that request fails as the server would answer 400). */
static int send_one(struct sim_run *run, const struct probe_workload *w, const struct probe_request_spec *q, size_t i,
		    uint64_t t, struct error *err)
{
	struct sim_req_state *s = &run->st[i];
	const uint32_t *ids = NULL;
	struct error e = { 0 };
	int r;

	if ((sim_engine_get_config(run->engine)->enable_prefix_caching ||
	     sim_engine_get_config(run->engine)->spec_method == SIM_SPEC_NGRAM) &&
	    !w->config.lengths_only && probe_workload_has_ids(w)) {
		if (q->input_len > run->ids_cap) {
			uint32_t *n = reallocarray(run->ids, q->input_len, sizeof(uint32_t));

			if (!n)
				return -ENOMEM;
			run->ids = n;
			run->ids_cap = q->input_len;
		}
		if (probe_workload_prompt_ids(w, q, run->ids) >= 0)
			ids = run->ids;
	}

	s->send_usec = t;
	s->cap_itl = q->output_len > 1 && !sim_engine_get_config(run->engine)->no_itl ? q->output_len - 1 : 0;
	if (s->cap_itl > 0) {
		s->itl = calloc(s->cap_itl, sizeof(*s->itl));
		if (!s->itl)
			return -ENOMEM;
	}
	r = sim_engine_submit(run->engine, i, ids, q->input_len, q->output_len, t, &e);
	if (r == -E2BIG || r == -EINVAL) {
		s->failed = true;
		s->done = true;
		return 0;
	}
	if (r < 0)
		return error_set(err, r, "engine: %s", error_str(&e, r));
	run->in_flight++;
	return 0;
}

/* Runs requests [from, to) of w with the given time origin and concurrency cap;
 * returns the time the last one finished. */
static int run_range(struct sim_run *run, const struct probe_workload *w, size_t from, size_t to, uint64_t t0,
		     uint32_t cap, uint64_t *ret_end, struct error *err)
{
	size_t next = from;
	uint64_t now = t0, end = t0;
	int r;

	for (;;) {
		uint64_t t_send = UINT64_MAX, t_eng = sim_engine_next_event_usec(run->engine);

		if (next < to && (cap == 0 || run->in_flight < cap))
			t_send = MAX(now, t0 + w->requests[next].arrival_usec);
		if (t_send == UINT64_MAX && t_eng == UINT64_MAX)
			break;
		if (t_send <= t_eng) {
			now = t_send;
			/* Everything due at this instant goes in before the engine schedules. */
			while (next < to && (cap == 0 || run->in_flight < cap) &&
			       t0 + w->requests[next].arrival_usec <= now) {
				r = send_one(run, w, &w->requests[next], next, now, err);
				if (r < 0)
					return r;
				next++;
			}
			sim_engine_advance(run->engine, now);
		} else {
			now = t_eng;
			sim_engine_advance(run->engine, now);
			end = now;
		}
	}
	for (size_t i = from; i < to; i++)
		if (!run->st[i].done)
			return error_set(err, -EIO, "simulate: request %zu never finished (engine stalled)", i);
	*ret_end = end;
	return 0;
}

int sim_simulate_requests(const struct sim_engine_config *cfg, const struct probe_workload *w,
			  struct probe_request_result **ret_reqs, size_t *ret_n, double *ret_duration_s,
			  struct sim_simulate_stats *ret_stats, struct error *err)
{
	const struct sim_engine_callbacks cb = { .token = on_token, .finished = on_finished, .step = on_step };
	struct sim_run run = { .n = w->n_requests };
	struct probe_request_result *res = NULL;
	uint64_t t_warm = 0, t_end = 0, t_first = UINT64_MAX, t_last = 0;
	struct sim_engine_stats before = { 0 };
	size_t n_warm = 0, n_meas;
	uint64_t prompt_tokens = 0;
	int r;

	for (size_t i = 0; i < w->n_requests && !w->config.lengths_only; i++)
		prompt_tokens += w->requests[i].input_len;
	if (prompt_tokens > SIM_SIMULATE_MAX_PROMPT_TOKENS)
		return error_set(err, -E2BIG,
				 "workload: more than %" PRIu64
				 " prompt tokens in all to simulate; fewer or shorter prompts",
				 (uint64_t)SIM_SIMULATE_MAX_PROMPT_TOKENS);
	run.st = calloc(MAX(w->n_requests, (size_t)1), sizeof(*run.st));
	if (!run.st)
		return -ENOMEM;
	r = sim_engine_new(cfg, &cb, &run, &run.engine, err);
	if (r < 0)
		goto fail;

	while (n_warm < w->n_requests && w->requests[n_warm].warmup)
		n_warm++;
	n_meas = w->n_requests - n_warm;
	/* Warm-ups first, all at once (within the concurrency cap), then the measured run. */
	if (n_warm > 0) {
		r = run_range(&run, w, 0, n_warm, 0, w->config.max_concurrency, &t_warm, err);
		if (r < 0)
			goto fail;
		run.kv_sum = run.running_sum = run.waiting_sum = 0;
		run.kv_peak = 0;
		run.running_peak = run.waiting_peak = 0;
		run.samples = 0;
		sim_engine_get_stats(run.engine, &before);
	}
	r = run_range(&run, w, n_warm, w->n_requests, t_warm, w->config.max_concurrency, &t_end, err);
	if (r < 0)
		goto fail;

	res = calloc(MAX(n_meas, (size_t)1), sizeof(*res));
	if (!res) {
		r = -ENOMEM;
		goto fail;
	}
	for (size_t k = 0; k < n_meas; k++) {
		const struct probe_request_spec *q = &w->requests[n_warm + k];
		struct sim_req_state *s = &run.st[n_warm + k];
		struct probe_request_result *o = &res[k];

		o->index = q->index;
		o->send_usec = s->send_usec;
		o->input_tokens = q->input_len;
		t_first = MIN(t_first, s->send_usec);
		if (s->failed || s->n_out == 0) {
			o->http_status = 400;
			o->error = strdup("prompt plus max_tokens exceed max_model_len");
			if (!o->error) {
				r = -ENOMEM;
				goto fail_res;
			}
			continue;
		}
		o->success = true;
		o->http_status = 200;
		o->ttft_usec = s->first_usec - s->send_usec;
		o->e2e_usec = s->last_usec - s->send_usec;
		o->output_tokens = s->n_out;
		o->itl_usec = TAKE_PTR(s->itl);
		o->n_itl = o->itl_usec ? s->n_out - 1 : 0;
		t_last = MAX(t_last, s->last_usec);
	}
	if (ret_stats) {
		struct sim_simulate_stats st = { 0 };
		double n = run.samples ? (double)run.samples : 1.0;

		sim_engine_get_stats(run.engine, &st.engine);
		st.kv_usage_mean = run.kv_sum / n;
		st.kv_usage_peak = run.kv_peak;
		st.running_mean = run.running_sum / n;
		st.waiting_mean = run.waiting_sum / n;
		st.running_peak = run.running_peak;
		st.waiting_peak = run.waiting_peak;
		st.virtual_usec = t_last > t_first ? t_last - t_first : 0;
		st.prompt_tokens = st.engine.prompt_tokens - before.prompt_tokens;
		st.generation_tokens = st.engine.generation_tokens - before.generation_tokens;
		st.prefix_queries = st.engine.prefix_cache_queries - before.prefix_cache_queries;
		st.prefix_hits = st.engine.prefix_cache_hits - before.prefix_cache_hits;
		st.spec_drafts = st.engine.spec_drafts - before.spec_drafts;
		st.spec_draft_tokens = st.engine.spec_draft_tokens - before.spec_draft_tokens;
		st.spec_accepted = st.engine.spec_accepted - before.spec_accepted;
		st.spec = sim_engine_get_info(run.engine)->spec_k > 0;
		*ret_stats = st;
	}
	*ret_duration_s = t_last > t_first && t_first != UINT64_MAX ? (double)(t_last - t_first) / 1e6 : 1e-6;
	*ret_reqs = res;
	*ret_n = n_meas;
	sim_engine_free(run.engine);
	run_done(&run);
	return 0;

fail_res:
	for (size_t k = 0; k < n_meas; k++)
		probe_request_result_done(&res[k]);
	free(res);
fail:
	sim_engine_free(run.engine);
	run_done(&run);
	return r;
}

int sim_simulate(const struct sim_engine_config *cfg, const struct probe_workload *w, const struct probe_sla *sla,
		 const double *pcts, size_t n_pcts, struct probe_result *ret_result,
		 struct sim_simulate_stats *ret_stats, struct error *err)
{
	struct probe_request_result *reqs = NULL;
	struct sim_simulate_stats st;
	struct probe_result res;
	size_t n = 0;
	double duration;
	int r;

	r = sim_simulate_requests(cfg, w, &reqs, &n, &duration, &st, err);
	if (r < 0)
		return r;
	r = probe_result_compute(reqs, n, duration, pcts, n_pcts, sla, &res, err);
	for (size_t i = 0; i < n; i++)
		probe_request_result_done(&reqs[i]);
	free(reqs);
	if (r < 0)
		return r;
	res.request_rate = w->config.arrival == PROBE_ARRIVAL_INF ? INFINITY : w->config.request_rate;
	res.burstiness = w->config.arrival == PROBE_ARRIVAL_GAMMA ? w->config.burstiness : 1.0;
	res.max_concurrency = w->config.max_concurrency;
	res.server = (struct probe_server_metrics){
		.present = true,
		.kv_usage_mean = st.kv_usage_mean,
		.kv_usage_peak = st.kv_usage_peak,
		.running_mean = st.running_mean,
		.running_peak = st.running_peak,
		.waiting_mean = st.waiting_mean,
		.waiting_peak = st.waiting_peak,
		.preemptions = (double)st.engine.preemptions,
		.prompt_tokens = (double)st.prompt_tokens,
		.generation_tokens = (double)st.generation_tokens,
		.prefix_queries = (double)st.prefix_queries,
		.prefix_hits = (double)st.prefix_hits,
		/* as vLLM: spec_decode_* exist only when speculation is configured */
		.spec_drafts = st.spec ? (double)st.spec_drafts : NAN,
		.spec_draft_tokens = st.spec ? (double)st.spec_draft_tokens : NAN,
		.spec_accepted = st.spec ? (double)st.spec_accepted : NAN,
		.spec_accept_length = NAN,
		.samples = (size_t)st.engine.steps,
	};
	*ret_result = res;
	if (ret_stats)
		*ret_stats = st;
	return 0;
}

static int simulate_at(const struct sim_engine_config *cfg, const struct probe_workload_config *wcfg, double rate,
		       const struct probe_sla *sla, struct probe_result *ret, struct error *err)
{
	struct probe_workload_config c;
	struct probe_workload *w = NULL;
	int r;

	probe_workload_at_rate(wcfg, rate, &c);
	r = probe_workload_generate(&c, &w, err);
	if (r < 0)
		return r;
	r = sim_simulate(cfg, w, sla, NULL, 0, ret, NULL, err);
	probe_workload_free(w);
	return r;
}

double sim_usd_per_mtok(double usd_per_hour, double tokens_per_sec)
{
	if (!(tokens_per_sec > 0))
		return INFINITY;
	return usd_per_hour / (tokens_per_sec * 3600.0) * 1e6;
}

int sim_saturated_throughput(const struct sim_engine_config *cfg, const struct probe_workload_config *wcfg,
			     struct probe_result *ret, struct error *err)
{
	struct probe_workload_config c = *wcfg;

	c.max_concurrency = 0;
	return simulate_at(cfg, &c, INFINITY, NULL, ret, err);
}

int sim_find_max_rate(const struct sim_engine_config *cfg, const struct probe_workload_config *wcfg,
		      const struct probe_sla *sla, double rel_tol, unsigned max_runs, struct sim_rate_search *ret,
		      struct error *err)
{
	struct sim_rate_search s = { .usd_per_mtok = INFINITY };
	struct sim_engine_config c = *cfg;
	struct probe_result res;
	double lo = 0, hi, x_sat;
	int r;

	if (rel_tol <= 0)
		rel_tol = 0.03;
	if (max_runs == 0)
		max_runs = 16;
	r = sim_engine_config_resolve(&c, err);
	if (r < 0)
		return r;

	r = simulate_at(&c, wcfg, INFINITY, sla, &s.saturated, err);
	if (r < 0)
		return r;
	s.runs = 1;
	x_sat = s.saturated.request_throughput;
	if (!(x_sat > 0))
		goto done;
	if (s.saturated.sla_met) {
		/* Holds even with everything at once: the server's limit is the answer. */
		s.max_rate = x_sat;
		s.at_max = s.saturated;
		goto done;
	}
	/* Halve down from X_sat until a rate passes (or 1/64 of it fails too). */
	hi = x_sat;
	for (double rate = x_sat; s.runs < max_runs && rate >= x_sat / 64; rate /= 2) {
		r = simulate_at(&c, wcfg, rate, sla, &res, err);
		if (r < 0)
			return r;
		s.runs++;
		if (res.sla_met) {
			lo = rate;
			s.max_rate = rate;
			s.at_max = res;
			break;
		}
		hi = rate;
	}
	if (lo == 0)
		goto done;
	/* Geometric bisection of [lo, hi]. */
	while (s.runs < max_runs && hi > lo * (1 + rel_tol)) {
		double mid = sqrt(lo * hi);

		r = simulate_at(&c, wcfg, mid, sla, &res, err);
		if (r < 0)
			return r;
		s.runs++;
		if (res.sla_met) {
			lo = mid;
			s.max_rate = mid;
			s.at_max = res;
		} else
			hi = mid;
	}
done:
	if (s.max_rate > 0)
		s.usd_per_mtok = sim_usd_per_mtok(c.gpu.usd_per_hour * sim_engine_config_gpus(&c),
						  s.at_max.good_output_throughput);
	*ret = s;
	return 0;
}
