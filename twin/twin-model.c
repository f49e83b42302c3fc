/* twin-model.c — the twin's view of the engine model: a grid point becomes a
 * goodput-sim engine configuration, and a profile (set of efficiency
 * constants) plus a configuration becomes a predicted $/Mtok in virtual time.
 *
 * Predictions are the expensive part (a rate search of several simulate
 * runs each), so the twin keeps them per profile (a few profiles, least
 * recently used replaced) and finds the best configuration by branch and
 * bound: one saturated run per configuration gives a lower bound on its cost
 * (no load that meets an SLA moves more tokens than everything at once, with
 * slack for small samples), and only configurations whose bound is below the
 * best cost found so far get the full rate search. The caches only save
 * time: every answer depends on the arguments alone, which is what makes
 * twin_next replayable.
 *
 * twin_measure_sim is the other side of the coin: what a probe would measure
 * on a model (with possibly different constants and unmodelled costs), for
 * benchmarks and tests where a twin plays the real server. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "twin-internal.h"

void twin_setup_init(struct twin_setup *s)
{
	*s = (struct twin_setup){ .gpus = 0, .scenario = OPT_SCENARIO_ONLINE, .cost_tokens = OPT_COST_TOKENS_OUTPUT };
	snprintf(s->model, sizeof(s->model), "llama-3.1-8b");
	snprintf(s->gpu, sizeof(s->gpu), "H100");
	snprintf(s->profile, sizeof(s->profile), "vllm");
	probe_workload_config_init(&s->workload);
}

uint64_t twin_hash(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	return h;
}

/* Speculation as the study describes it: the drafter of draft_model (on
 * one GPU, as the shipped engine profiles start it, unless the space has
 * spec_draft_tp) and the workload's acceptance of the method's drafts. */
static int speculation(const struct twin *t, struct sim_engine_config *c, struct error *err)
{
	const char *acceptance;
	int r = 0;

	if (c->spec_method == SIM_SPEC_NONE || c->spec_method >= _SIM_SPEC_MAX)
		return 0;
	if (c->spec_method == SIM_SPEC_DRAFT_MODEL && t->setup.spec_draft_model[0]) {
		r = sim_engine_config_apply_flag(c, "--spec-draft-model", t->setup.spec_draft_model, err);
		if (r >= 0 && c->spec_draft_tp == 0)
			r = sim_engine_config_apply_flag(c, "--spec-draft-tp", "1", err);
	}
	acceptance = t->setup.spec_acceptance[c->spec_method];
	if (r >= 0 && acceptance[0])
		r = sim_engine_config_apply_flag(c, "--spec-acceptance", acceptance, err);
	return r < 0 ? r : 0;
}

static int resolve_config(struct twin *t, size_t i, uint32_t gpus_max, struct error *err)
{
	struct sim_engine_config c;
	char buf[64];
	int r;

	sim_engine_config_init(&c);
	r = sim_engine_config_apply_flag(&c, "--model", t->setup.model, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&c, "--gpu", t->setup.gpu, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&c, "--profile", t->setup.profile, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&c, "--jitter", "0", err);
	/* every knob the configuration holds (an inactive one has no value):
	 * a flag the sim does not know has no effect in virtual time */
	for (size_t k = 0; k < t->space->n_knobs && r >= 0; k++) {
		char flag[OPT_KNOB_NAME_MAX + 8];

		if (opt_knob_active(t->space, &t->configs[i], k) &&
		    sim_knob_flag(t->space->knobs[k].name, flag, sizeof(flag)))
			r = sim_engine_config_apply_flag(
				&c, flag, opt_config_text(t->space, &t->configs[i], k, buf, sizeof(buf)), err);
	}
	if (r >= 0)
		r = speculation(t, &c, err);
	if (r < 0)
		return r;
	{
		int shape = opt_space_knob_index(t->space, OPT_KNOB_SHAPE);

		/* disaggregated with one worker a side unless the space says more */
		if (shape >= 0 && strcmp(opt_config_text(t->space, &t->configs[i], (size_t)shape, buf, sizeof(buf)),
					 "disaggregated") == 0) {
			c.pd.prefill_workers = MAX(c.pd.prefill_workers, 1u);
			c.pd.decode_workers = MAX(c.pd.decode_workers, 1u);
		}
	}
	/* The host's GPUs: as set up, else the most a configuration of the space holds. */
	c.gpus = t->setup.gpus ? t->setup.gpus : gpus_max;
	/* no figure the twin reads, nor its SLA unless it bounds the ITL, needs
	 * the inter-token latencies */
	c.no_itl = true;
	for (size_t b = 0; b < t->setup.sla.n_bounds; b++)
		if (t->setup.sla.bounds[b].metric == PROBE_METRIC_ITL)
			c.no_itl = false;
	c.fault_step_usec = t->setup.fault_step_usec;
	c.fault_step_per_seq_usec = t->setup.fault_step_per_seq_usec;
	r = sim_engine_config_resolve(&c, err);
	if (r < 0)
		return r;
	t->cfg[i] = c;
	return 0;
}

int twin_new(const struct opt_space *space, const struct twin_setup *setup, struct twin **ret, struct error *err)
{
	_cleanup_(twin_freep) struct twin *t = NULL;
	struct sim_engine_config probe;
	uint32_t gpus_max = 1;
	int r;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->space = space;
	t->setup = *setup;
	t->setup.workload.dataset_path = NULL;
	if (setup->workload.dataset != PROBE_DATASET_RANDOM)
		return error_set(err, -EINVAL, "twin: the workload must be synthetic (random dataset)");
	r = opt_space_enumerate(space, &t->configs, &t->n_configs);
	if (r < 0)
		return r;
	if (t->n_configs == 0)
		return error_set(err, -EINVAL, "twin: the constraints exclude every configuration");
	if (space->n_grid > (UINT64_C(1) << 24))
		return error_set(err, -E2BIG, "twin: the grid is too large");
	t->index_of = malloc(space->n_grid * sizeof(int32_t));
	t->cfg = calloc(t->n_configs, sizeof(*t->cfg));
	t->startable = malloc(t->n_configs);
	if (!t->index_of || !t->cfg || !t->startable)
		return -ENOMEM;
	for (uint64_t o = 0; o < space->n_grid; o++)
		t->index_of[o] = -1;
	for (size_t i = 0; i < t->n_configs; i++) {
		t->index_of[opt_config_ordinal(space, &t->configs[i])] = (int32_t)i;
		t->startable[i] = -1;
	}
	/* Names first, so that a typo is an error here and not a refusal later. */
	sim_engine_config_init(&probe);
	r = sim_engine_config_apply_flag(&probe, "--model", setup->model, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&probe, "--gpu", setup->gpu, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&probe, "--profile", setup->profile, err);
	if (r >= 0)
		r = sim_engine_config_resolve(&probe, err);
	if (r < 0)
		return error_prefix(err, r, "twin");
	t->base = probe.profile;
	t->usd_per_gpu_hour = setup->usd_per_gpu_hour > 0 ? setup->usd_per_gpu_hour : probe.gpu.usd_per_hour;
	for (size_t i = 0; i < t->n_configs; i++)
		gpus_max = MAX(gpus_max, opt_config_gpus(space, &t->configs[i]));
	for (size_t i = 0; i < t->n_configs; i++) {
		r = resolve_config(t, i, gpus_max, err);
		if (r < 0)
			return error_prefix(err, r, "twin");
	}
	*ret = TAKE_PTR(t);
	return 0;
}

static void rank_done(struct twin_rank *rk)
{
	free(rk->lb);
	free(rk->pred);
	free(rk->have);
	free(rk->fresh);
	*rk = (struct twin_rank){ 0 };
}

struct twin *twin_free(struct twin *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < TWIN_RANKS_MAX; i++)
		rank_done(&t->ranks[i]);
	free(t->configs);
	free(t->index_of);
	free(t->cfg);
	free(t->startable);
	free(t);
	return NULL;
}

void twin_base_profile(const struct twin *t, struct sim_profile *ret)
{
	*ret = t->base;
}

ssize_t twin_index(const struct twin *t, const struct opt_config *config)
{
	uint64_t o = opt_config_ordinal(t->space, config);

	if (o >= t->space->n_grid)
		return -1;
	return t->index_of[o];
}

int twin_engine_config(struct twin *t, size_t i, const struct sim_profile *p, struct sim_engine_config *ret,
		       struct error *err)
{
	if (i >= t->n_configs)
		return error_set(err, -EINVAL, "twin: configuration index %zu out of range", i);
	*ret = t->cfg[i];
	ret->profile = *p;
	return 0;
}

bool twin_startable(struct twin *t, size_t i)
{
	if (t->startable[i] < 0) {
		struct sim_engine *e = NULL;
		struct error err = { 0 };

		t->startable[i] = sim_engine_new(&t->cfg[i], NULL, NULL, &e, &err) >= 0;
		t->startable_fresh = true;
		sim_engine_free(e);
	}
	return t->startable[i] == 1;
}

/* A workload the model simulates: lengths only, no dataset file to read. */
static void for_simulation(struct probe_workload_config *c)
{
	c->dataset_path = NULL;
	c->lengths_only = !probe_workload_ids_matter(c);
}

void twin_workload_at(const struct twin *t, double rate, uint32_t num_prompts, struct probe_workload_config *ret)
{
	probe_workload_at_rate(&t->setup.workload, rate, ret);
	if (num_prompts)
		ret->num_prompts = num_prompts;
	for_simulation(ret);
}

void twin_point_workload(const struct twin *t, const struct twin_point *pt, struct probe_workload_config *ret)
{
	/* the requests the probe sent at that point (a point that stopped
	 * early sent a prefix of them) */
	probe_workload_at_point(&t->setup.workload, pt->rate, pt->index, pt->num_prompts, ret);
	for_simulation(ret);
}

double twin_cost(const struct twin *t, size_t i, const struct probe_result *r, bool saturated)
{
	struct opt_throughput tp = { 0 };
	double tps, cost, ratio = r->output_throughput > 0 ? r->total_token_throughput / r->output_throughput : 1;

	if (saturated) {
		tp.saturated_output_tps = r->output_throughput;
		tp.saturated_input_tps = r->total_token_throughput - r->output_throughput;
		tp.good_output_tps = r->output_throughput;
		tp.good_input_tps = tp.saturated_input_tps;
	} else {
		tp.good_output_tps = r->good_output_throughput;
		tp.good_input_tps = r->good_output_throughput * (ratio - 1);
	}
	tps = opt_cost_tokens_per_sec(saturated ? OPT_SCENARIO_OFFLINE : t->setup.scenario, t->setup.cost_tokens, &tp);
	if (opt_cost_per_mtok(t->usd_per_gpu_hour, opt_config_gpus(t->space, &t->configs[i]), tps, &cost) < 0)
		return INFINITY;
	return cost;
}

/* ---- predictions ---- */

int twin_rank_get(struct twin *t, const struct sim_profile *p, struct twin_rank **ret)
{
	struct twin_rank *rk = NULL;

	for (size_t i = 0; i < TWIN_RANKS_MAX; i++)
		if (t->ranks[i].used && memcmp(&t->ranks[i].profile, p, sizeof(*p)) == 0) {
			rk = &t->ranks[i];
			break;
		}
	if (!rk) {
		rk = &t->ranks[0];
		for (size_t i = 0; i < TWIN_RANKS_MAX; i++) {
			if (!t->ranks[i].used) {
				rk = &t->ranks[i];
				break;
			}
			if (t->ranks[i].stamp < rk->stamp)
				rk = &t->ranks[i];
		}
		rank_done(rk);
		rk->lb = malloc(t->n_configs * sizeof(double));
		rk->pred = calloc(t->n_configs, sizeof(*rk->pred));
		rk->have = calloc(t->n_configs, sizeof(bool));
		rk->fresh = calloc(t->n_configs, 1);
		if (!rk->lb || !rk->pred || !rk->have || !rk->fresh) {
			rank_done(rk);
			return -ENOMEM;
		}
		for (size_t i = 0; i < t->n_configs; i++)
			rk->lb[i] = NAN;
		rk->profile = *p;
		rk->used = true;
	}
	rk->stamp = ++t->clock;
	*ret = rk;
	return 0;
}

static int rate_search_config(struct twin *t, struct sim_engine_config *cfg, uint32_t num_prompts,
			      struct sim_rate_search *ret, struct error *err);

/* The rate search shared by predictions and twin_measure_sim, so that a twin
 * with the true constants predicts exactly what it measures. */
static int rate_search(struct twin *t, size_t i, const struct sim_profile *p, uint32_t num_prompts,
		       struct sim_rate_search *ret, struct error *err)
{
	struct sim_engine_config c;
	int r;

	r = twin_engine_config(t, i, p, &c, err);
	if (r < 0)
		return r;
	return rate_search_config(t, &c, num_prompts, ret, err);
}

static int rate_search_config(struct twin *t, struct sim_engine_config *cfg, uint32_t num_prompts,
			      struct sim_rate_search *ret, struct error *err)
{
	struct sim_engine_config c = *cfg;
	struct probe_workload_config w;
	int r;

	twin_workload_at(t, INFINITY, num_prompts, &w);
	w.arrival = t->setup.workload.arrival; /* sim_find_max_rate sets the arrival per run */
	if (t->setup.scenario == OPT_SCENARIO_OFFLINE) {
		*ret = (struct sim_rate_search){ .usd_per_mtok = INFINITY };
		r = sim_saturated_throughput(&c, &w, &ret->saturated, err);
		ret->at_max = ret->saturated;
		ret->max_rate = ret->saturated.request_throughput;
		ret->runs = 1;
		return r;
	}
	return sim_find_max_rate(&c, &w, &t->setup.sla, t->setup.rel_tol, t->setup.max_runs ? t->setup.max_runs : 12,
				 ret, err);
}

static int predict_index(struct twin *t, struct twin_rank *rk, size_t i, struct error *err)
{
	struct sim_rate_search rs;
	struct twin_prediction pr = { .outcome = OPT_OUTCOME_INFEASIBLE, .cost = INFINITY };
	int r;

	if (rk->have[i])
		return 0;
	if (twin_startable(t, i)) {
		r = rate_search(t, i, &rk->profile, t->setup.rank_num_prompts, &rs, err);
		if (r < 0)
			return r;
		pr.outcome = OPT_OUTCOME_SLA_NEVER_MET;
		if (rs.max_rate > 0) {
			pr.cost = twin_cost(t, i, &rs.at_max, t->setup.scenario == OPT_SCENARIO_OFFLINE);
			pr.max_rate = rs.max_rate;
			if (isfinite(pr.cost))
				pr.outcome = OPT_OUTCOME_MEASURED;
		}
	}
	rk->pred[i] = pr;
	rk->have[i] = true;
	rk->fresh[i] |= TWIN_FRESH_PRED;
	rk->any_fresh = true;
	return 0;
}

static int lower_bound(struct twin *t, struct twin_rank *rk, size_t i, struct error *err)
{
	struct sim_engine_config c;
	struct probe_workload_config w;
	struct probe_result res;
	int r;

	if (!isnan(rk->lb[i]))
		return 0;
	if (!twin_startable(t, i)) {
		rk->lb[i] = INFINITY;
		return 0;
	}
	r = twin_engine_config(t, i, &rk->profile, &c, err);
	if (r < 0)
		return r;
	twin_workload_at(t, INFINITY, t->setup.rank_num_prompts, &w);
	r = sim_saturated_throughput(&c, &w, &res, err);
	if (r < 0)
		return r;
	rk->lb[i] = twin_cost(t, i, &res, true) * (t->setup.scenario == OPT_SCENARIO_OFFLINE ? 1.0 : TWIN_LB_SLACK);
	rk->fresh[i] |= TWIN_FRESH_LB;
	rk->any_fresh = true;
	return 0;
}

int twin_predict_beyond(struct twin *t, const struct sim_profile *p, const struct opt_config *config, const char *knob,
			double value, struct twin_prediction *ret, struct error *err)
{
	struct twin_prediction pr = { .outcome = OPT_OUTCOME_INFEASIBLE, .cost = INFINITY };
	struct sim_engine_config c;
	struct sim_engine *e = NULL;
	struct sim_rate_search rs;
	struct error e2 = { 0 };
	char flag[OPT_KNOB_NAME_MAX + 8];
	ssize_t i = twin_index(t, config);
	char buf[32];
	int r;

	if (i < 0)
		return error_set(err, -EINVAL, "twin: configuration not in the space");
	c = t->cfg[i];
	snprintf(buf, sizeof(buf), "%.0f", value);
	r = sim_knob_flag(knob, flag, sizeof(flag)) ? sim_engine_config_apply_flag(&c, flag, buf, err) : 0;
	if (r == 0)
		return error_set(err, -EINVAL, "twin: the engine model has no knob %s", knob);
	if (r > 0)
		r = sim_engine_config_resolve(&c, err);
	if (r < 0)
		return r;
	c.profile = *p;
	if (sim_engine_new(&c, NULL, NULL, &e, &e2) >= 0) {
		sim_engine_free(e);
		r = rate_search_config(t, &c, t->setup.rank_num_prompts, &rs, err);
		if (r < 0)
			return r;
		pr.outcome = OPT_OUTCOME_SLA_NEVER_MET;
		if (rs.max_rate > 0) {
			pr.cost = twin_cost(t, (size_t)i, &rs.at_max, t->setup.scenario == OPT_SCENARIO_OFFLINE);
			pr.max_rate = rs.max_rate;
			if (isfinite(pr.cost))
				pr.outcome = OPT_OUTCOME_MEASURED;
		}
	}
	*ret = pr;
	return 0;
}

int twin_predict_beyond_row(struct twin *t, const struct sim_profile *p, const struct opt_config *config,
			    const char *knob, double value, struct opt_config *ret_config, struct twin_prediction *ret,
			    struct error *err)
{
	const struct opt_space *s = t->space;
	int k = opt_space_knob_index(s, knob), other = -1;
	struct twin_prediction best = { .outcome = OPT_OUTCOME_INFEASIBLE, .cost = INFINITY };
	struct opt_config bc = *config;
	int r;

	if (k < 0)
		return error_set(err, -EINVAL, "twin: no knob %s", knob);
	/* the other batch knob (max_num_seqs with max_num_batched_tokens) varies over its grid */
	for (size_t i = 0; i < s->n_knobs && other < 0; i++)
		if ((int)i != k && s->knobs[i].memory == OPT_MEMORY_BATCH && !s->knobs[i].categorical)
			other = (int)i;
	for (size_t v = 0; v < (other >= 0 ? s->knobs[other].n_values : 1); v++) {
		struct opt_config c = *config;
		struct twin_prediction pr;

		if (other >= 0)
			c.idx[other] = (uint16_t)v;
		if (twin_index(t, &c) < 0)
			continue; /* not allowed on the grid */
		r = twin_predict_beyond(t, p, &c, knob, value, &pr, err);
		if (r < 0)
			return r;
		if (pr.outcome == OPT_OUTCOME_MEASURED && pr.cost < best.cost) {
			best = pr;
			bc = c;
		}
	}
	*ret_config = bc;
	*ret = best;
	return 0;
}

int twin_predict(struct twin *t, const struct sim_profile *p, const struct opt_config *config,
		 struct twin_prediction *ret, struct error *err)
{
	struct twin_rank *rk;
	ssize_t i = twin_index(t, config);
	int r;

	if (i < 0)
		return error_set(err, -EINVAL, "twin: configuration not in the space");
	r = twin_rank_get(t, p, &rk);
	if (r < 0)
		return r;
	r = predict_index(t, rk, (size_t)i, err);
	if (r < 0)
		return r;
	*ret = rk->pred[i];
	return 0;
}

static const double *sort_keys;

static int cmp_by_key(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	if (sort_keys[x] != sort_keys[y])
		return sort_keys[x] < sort_keys[y] ? -1 : 1;
	return x < y ? -1 : x > y; /* ties in grid order: deterministic */
}

int twin_rank_lower_bounds(struct twin *t, const struct sim_profile *p, struct twin_rank **ret, struct error *err)
{
	struct twin_rank *rk;
	int r;

	r = twin_rank_get(t, p, &rk);
	if (r < 0)
		return r;
	for (size_t i = 0; i < t->n_configs; i++) {
		r = lower_bound(t, rk, i, err);
		if (r < 0)
			return r;
	}
	*ret = rk;
	return 0;
}

void twin_sort_by(size_t *order, size_t n, const double *key)
{
	sort_keys = key;
	qsort(order, n, sizeof(size_t), cmp_by_key);
	sort_keys = NULL;
}

int twin_rank_best(struct twin *t, const struct sim_profile *p, const bool *exclude, const double *discount,
		   size_t *ret_index, struct twin_prediction *ret, struct error *err)
{
	_cleanup_(freep) double *key = NULL;
	_cleanup_(freep) size_t *order = NULL;
	struct twin_rank *rk;
	double best = INFINITY;
	size_t bi = SIZE_MAX;
	int r;

	r = twin_rank_get(t, p, &rk);
	if (r < 0)
		return r;
	order = malloc(t->n_configs * sizeof(size_t));
	key = malloc(t->n_configs * sizeof(double));
	if (!order || !key)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_configs; i++) {
		order[i] = i;
		r = lower_bound(t, rk, i, err);
		if (r < 0)
			return r;
		key[i] = rk->lb[i] * (discount ? discount[i] : 1.0);
	}
	sort_keys = key;
	qsort(order, t->n_configs, sizeof(size_t), cmp_by_key);
	sort_keys = NULL;
	for (size_t k = 0; k < t->n_configs; k++) {
		size_t i = order[k];

		if (!(key[i] < best))
			break;
		if (exclude && exclude[i])
			continue;
		r = predict_index(t, rk, i, err);
		if (r < 0)
			return r;
		if (rk->pred[i].outcome == OPT_OUTCOME_MEASURED &&
		    rk->pred[i].cost * (discount ? discount[i] : 1.0) < best) {
			best = rk->pred[i].cost * (discount ? discount[i] : 1.0);
			bi = i;
		}
	}
	if (bi == SIZE_MAX)
		return -ENOENT;
	*ret_index = bi;
	*ret = rk->pred[bi];
	return 0;
}

int twin_predict_best(struct twin *t, const struct sim_profile *p, struct opt_config *ret_config,
		      struct twin_prediction *ret, struct error *err)
{
	struct twin_prediction pr;
	size_t i;
	int r;

	r = twin_rank_best(t, p, NULL, NULL, &i, &pr, err);
	if (r < 0)
		return r;
	*ret_config = t->configs[i];
	*ret = pr;
	return 0;
}

/* ---- measurements ---- */

static const double fig_pcts[] = { 50, 90, 99 };

int twin_point_from_result(const struct probe_result *r, struct twin_point *ret)
{
	struct twin_point pt = { .rate = r->request_rate };
	size_t idx[3];

	for (size_t k = 0; k < 3; k++) {
		idx[k] = SIZE_MAX;
		for (size_t j = 0; j < r->n_percentiles; j++)
			if (r->percentiles[j] == fig_pcts[k])
				idx[k] = j;
		if (idx[k] == SIZE_MAX)
			return -EINVAL;
	}
	pt.fig[TWIN_FIG_TTFT_MEAN] = r->stat[PROBE_METRIC_TTFT].mean_ms;
	pt.fig[TWIN_FIG_TPOT_MEAN] = r->stat[PROBE_METRIC_TPOT].mean_ms;
	for (size_t k = 0; k < 3; k++) {
		pt.fig[TWIN_FIG_TTFT_P50 + k] = r->stat[PROBE_METRIC_TTFT].pct_ms[idx[k]];
		pt.fig[TWIN_FIG_TPOT_P50 + k] = r->stat[PROBE_METRIC_TPOT].pct_ms[idx[k]];
	}
	pt.fig[TWIN_FIG_THROUGHPUT] = r->output_throughput;
	pt.num_prompts = r->num_prompts;
	*ret = pt;
	return 0;
}

const char *twin_figure_name(enum twin_figure f)
{
	static const char *const names[_TWIN_FIG_MAX] = {
		"mean_ttft_ms", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",       "mean_tpot_ms",
		"p50_tpot_ms",  "p90_tpot_ms", "p99_tpot_ms", "output_throughput",
	};

	return f < _TWIN_FIG_MAX ? names[f] : NULL;
}

int twin_measure_sim(struct twin *t, const struct sim_profile *p, const struct opt_config *config,
		     struct twin_trial *ret, struct error *err)
{
	struct twin_trial tr = { .trial.config = *config, .predicted_cost = NAN };
	struct sim_rate_search rs;
	ssize_t i = twin_index(t, config);
	int r;

	if (i < 0)
		return error_set(err, -EINVAL, "twin: configuration not in the space");
	if (!twin_startable(t, (size_t)i)) {
		tr.trial.outcome = OPT_OUTCOME_INFEASIBLE;
		*ret = tr;
		return 0;
	}
	r = rate_search(t, (size_t)i, p, 0, &rs, err);
	if (r < 0)
		return r;
	rs.saturated.request_rate = INFINITY;
	r = twin_point_from_result(&rs.saturated, &tr.points[tr.n_points]);
	if (r >= 0)
		tr.n_points++;
	tr.trial.outcome = OPT_OUTCOME_SLA_NEVER_MET;
	if (rs.max_rate > 0) {
		double cost = twin_cost(t, (size_t)i, &rs.at_max, t->setup.scenario == OPT_SCENARIO_OFFLINE);

		if (isfinite(cost)) {
			tr.trial.outcome = OPT_OUTCOME_MEASURED;
			tr.trial.cost = cost;
			tr.max_rate = rs.max_rate;
		}
	}
	/* Two more points below saturation: at the max SLA rate (or, when none met it,
	 * at half the saturated rate) and at half of that. */
	for (unsigned k = 0; k < 2 && t->setup.scenario == OPT_SCENARIO_ONLINE; k++) {
		double rate = (rs.max_rate > 0 ? rs.max_rate : rs.saturated.request_throughput / 2) / (k ? 2.0 : 1.0);
		struct sim_engine_config c;
		struct probe_workload_config wc;
		struct probe_workload *w = NULL;
		struct probe_result res;

		if (!(rate > 0) || isinf(rate))
			break;
		if (k == 0 && rs.max_rate > 0 && !rs.saturated.sla_met) {
			res = rs.at_max;
		} else {
			r = twin_engine_config(t, (size_t)i, p, &c, err);
			if (r < 0)
				return r;
			twin_workload_at(t, rate, 0, &wc);
			r = probe_workload_generate(&wc, &w, err);
			if (r < 0)
				return r;
			r = sim_simulate(&c, w, NULL, NULL, 0, &res, NULL, err);
			probe_workload_free(w);
			if (r < 0)
				return r;
		}
		res.request_rate = rate;
		if (twin_point_from_result(&res, &tr.points[tr.n_points]) >= 0)
			tr.n_points++;
	}
	*ret = tr;
	return 0;
}
