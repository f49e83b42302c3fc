/* bench-methods.c — the evaluator every method measures through, and the
 * methods that run in this process: goodput's search, random order, and the
 * grid in vLLM auto_tune's order (TPE runs in Python: bench-serve.c).
 *
 * The search runs as the study runner drives it: opt_next with the study's
 * memory pre-flight, each re-probe a deployment, and — where the study asks
 * for it (search.extend_edges) — a widened range when the search ends with
 * its best on a bound the SLA does not hold it at, continued as a new search
 * phase. The peers search the study's space as written. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-methods.h"
#include "macro.h"
#include "runner-planner.h"

uint64_t bench_rng_next(struct bench_rng *r)
{
	uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

double bench_rng_uniform(struct bench_rng *r)
{
	return ((double)(bench_rng_next(r) >> 11) + 0.5) / 9007199254740992.0;
}

static double rng_normal(struct bench_rng *r)
{
	return sqrt(-2 * log(bench_rng_uniform(r))) * cos(2 * M_PI * bench_rng_uniform(r));
}

const char *bench_method_name(enum bench_method m)
{
	static const char *const names[_BENCH_METHOD_MAX] = { "search", "random", "grid", "tpe", "model" };

	return (unsigned)m < _BENCH_METHOD_MAX ? names[m] : "?";
}

/* ---- the trace and the evaluator ---- */

int bench_trace_push(struct bench_trace *t, double regret, bool started, bool dear)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		double *r = realloc(t->regret, cap * sizeof(double));
		bool *s;

		if (!r)
			return -ENOMEM;
		t->regret = r;
		s = realloc(t->started, cap * sizeof(bool));
		if (!s)
			return -ENOMEM;
		t->started = s;
		s = realloc(t->dear, cap * sizeof(bool));
		if (!s)
			return -ENOMEM;
		t->dear = s;
		t->cap = cap;
	}
	t->regret[t->n] = regret;
	t->dear[t->n] = dear;
	t->started[t->n++] = started;
	return 0;
}

void bench_trace_done(struct bench_trace *t)
{
	free(t->regret);
	free(t->started);
	free(t->dear);
	*t = (struct bench_trace){ 0 };
}

int bench_eval_init(struct bench_eval *e, const struct bench_space *bs, double sigma, uint64_t seed,
		    struct bench_trace *t)
{
	*e = (struct bench_eval){ .bs = bs, .sigma = sigma, .rng = { seed * 7919 + 1 }, .inc = SIZE_MAX, .trace = t };
	e->sum = calloc(bs->n, sizeof(double));
	e->cnt = calloc(bs->n, sizeof(unsigned));
	e->cap_deployments = 4 * bs->n + 64;
	t->n = 0;
	if (!e->sum || !e->cnt || bench_trace_push(t, INFINITY, true, false) < 0) {
		bench_eval_done(e);
		return -ENOMEM;
	}
	return 0;
}

void bench_eval_done(struct bench_eval *e)
{
	free(e->sum);
	free(e->cnt);
	e->sum = NULL;
	e->cnt = NULL;
}

int bench_eval_deploy(struct bench_eval *e, size_t i, enum opt_outcome *ret_outcome, double *ret_cost)
{
	const struct bench_point *p = &e->bs->truth[i];
	double cost = 0;

	if (e->trace->n >= e->cap_deployments)
		return -ENOSPC;
	if (p->outcome == OPT_OUTCOME_MEASURED) {
		cost = p->cost * exp(e->sigma * rng_normal(&e->rng));
		e->sum[i] += cost;
		e->cnt[i]++;
		/* the incumbent: the lowest mean (a re-probe may raise the old one's) */
		e->inc = i;
		for (size_t k = 0; k < e->bs->n; k++)
			if (e->cnt[k] && e->sum[k] / e->cnt[k] < e->sum[e->inc] / e->cnt[e->inc])
				e->inc = k;
	}
	*ret_outcome = p->outcome;
	*ret_cost = cost;
	return bench_trace_push(e->trace,
				e->inc == SIZE_MAX ? INFINITY : e->bs->truth[e->inc].cost / e->bs->optimum - 1,
				p->outcome != OPT_OUTCOME_INFEASIBLE,
				p->outcome != OPT_OUTCOME_MEASURED || p->cost > 1.5 * e->bs->optimum);
}

int bench_eval_deploy_trial(struct bench_eval *e, size_t i, struct twin_trial *ret)
{
	const struct bench_point *p = &e->bs->truth[i];
	struct twin_trial tr = { .predicted_cost = NAN };
	int r;

	r = bench_eval_deploy(e, i, &tr.trial.outcome, &tr.trial.cost);
	if (r < 0)
		return r;
	tr.trial.config = e->bs->configs[i];
	if (p->outcome == OPT_OUTCOME_MEASURED)
		tr.max_rate = p->max_rate * p->cost / tr.trial.cost;
	tr.n_points = p->n_points;
	for (size_t k = 0; k < p->n_points; k++) {
		tr.points[k] = p->points[k];
		for (size_t f = 0; f < _TWIN_FIG_MAX; f++)
			tr.points[k].fig[f] *= exp(e->sigma * rng_normal(&e->rng));
	}
	*ret = tr;
	return 0;
}

/* ---- goodput's search ---- */

/* The search's space after the widenings so far. */
static int rebuild_space(const struct bench_space *bs, const cJSON *ss, struct opt_space **ret, struct error *err)
{
	struct opt_space_options o = { .gpus = bs->study->gpu.count, .extra_knobs = bs->profile->extra_knobs };

	return opt_space_from_json(ss, "search_space", bs->study->constraints, "constraints", &o, ret, err);
}

/* The history's configurations moved into a widened space (by key). */
static int move_history(const struct opt_space *from, const struct opt_space *to, struct opt_history *h,
			struct error *err)
{
	for (size_t i = 0; i < h->n; i++) {
		char key[OPT_KEY_MAX];
		int r = opt_config_key(from, &h->trials[i].config, key, sizeof(key));

		if (r >= 0)
			r = opt_config_from_key(to, key, &h->trials[i].config, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Widens the range the best sits on, when the study asks for it and the
 * SLA does not hold the best there; 1 when it did. */
/* The model search's gate (the runner's runner-edge.c does the same): the
 * calibrated model must predict a gain at the new bound against its own
 * prediction at the bound (study_edge_model_gain). */
struct model_gate {
	struct twin *twin;
	const struct sim_profile *profile;
	struct twin_history *history; /* moved into the widened space with the rest */
};

static int widen(const struct bench_space *bs, cJSON *ss, struct opt_space **space, const struct opt_result *best,
		 struct opt_history *h, struct opt_settings *set, struct study_phase *phases, size_t *n_phases,
		 const struct model_gate *gate, struct error *err)
{
	_cleanup_(opt_space_freep) struct opt_space *wider = NULL;
	struct study_edge edge;
	ssize_t i = bench_space_lookup(bs, *space, &best->config);
	int64_t min, max;
	int k, r;

	if (!bs->study || !bs->study->search.extend_edges || i < 0)
		return 0;
	(void)study_find_edge(bs->study, *space, &best->config, NULL, &edge);
	/* the evidence the runner reads off the best's load point */
	study_edge_decide(&edge, bs->truth[i].sla_ratio);
	if (*n_phases >= STUDY_PHASES_MAX || !study_edge_worth_widening(&edge, phases, *n_phases, best->cost))
		return 0;
	/* the truth's range is this benchmark's engine limit */
	k = opt_space_knob_index(bs->space, edge.knob);
	if (k < 0)
		return 0;
	if (gate) {
		_cleanup_(cJSON_Deletep) cJSON *copy = cJSON_Duplicate(ss, true);
		struct twin_prediction pr, here = { .cost = INFINITY };

		if (!copy)
			return -ENOMEM;
		r = opt_space_widen_json(copy, edge.knob, edge.upper, bs->space->knobs[k].min, bs->space->knobs[k].max,
					 &min, &max);
		if (r == -ERANGE)
			return 0;
		if (r >= 0) {
			struct opt_config where;

			r = twin_predict_beyond_row(gate->twin, gate->profile, &best->config, edge.knob,
						    (double)(edge.upper ? max : min), &where, &pr, err);
			if (r >= 0)
				r = twin_predict_beyond_row(gate->twin, gate->profile, &best->config, edge.knob,
							    edge.value, &where, &here, err);
		}
		if (r < 0)
			return r;
		if (pr.outcome != OPT_OUTCOME_MEASURED ||
		    !study_edge_model_gain(pr.cost, here.outcome == OPT_OUTCOME_MEASURED ? here.cost : NAN, best->cost))
			return 0;
	}
	r = opt_space_widen_json(ss, edge.knob, edge.upper, bs->space->knobs[k].min, bs->space->knobs[k].max, &min,
				 &max);
	if (r == -ERANGE)
		return 0;
	if (r >= 0)
		r = rebuild_space(bs, ss, &wider, err);
	if (r >= 0 && h)
		r = move_history(*space, wider, h, err);
	for (size_t j = 0; r >= 0 && gate && j < gate->history->n; j++) {
		struct opt_config *c = &gate->history->trials[j].trial.config;
		char key[OPT_KEY_MAX];

		r = opt_config_key(*space, c, key, sizeof(key));
		if (r >= 0)
			r = opt_config_from_key(wider, key, c, err);
	}
	if (r < 0)
		return r;
	opt_space_free(*space);
	*space = TAKE_PTR(wider);
	set->phase_knob = opt_space_knob_index(*space, edge.knob);
	set->phase_upper = edge.upper;
	phases[*n_phases] = (struct study_phase){ .trials = h ? h->n : gate->history->n,
						  .min = min,
						  .max = max,
						  .upper = edge.upper,
						  .best_cost = best->cost };
	snprintf(phases[*n_phases].knob, sizeof(phases[*n_phases].knob), "%s", edge.knob);
	(*n_phases)++;
	return 1;
}

static int run_search(const struct bench_space *bs, double sigma, uint64_t seed, size_t max_deployments,
		      struct bench_trace *t, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *ss = bs->start_space_json ? cJSON_Duplicate(bs->start_space_json, true) : NULL;
	_cleanup_(opt_space_freep) struct opt_space *space = NULL;
	struct study_phase phases[STUDY_PHASES_MAX];
	size_t n_phases = 0;
	struct opt_settings set;
	struct opt_history h;
	struct bench_eval e;
	int r;

	r = bench_eval_init(&e, bs, sigma, seed, t);
	if (r < 0)
		return r;
	e.cap_deployments = MIN(e.cap_deployments, max_deployments);
	if (bs->study)
		r = ss ? rebuild_space(bs, ss, &space, err) : -ENOMEM;
	if (r < 0) {
		bench_eval_done(&e);
		return r;
	}
	opt_settings_init(&set);
	set.seed = seed;
	if (bs->study && bs->preflight.usable)
		set.preflight = &bs->preflight.hook;
	opt_history_init(&h);
	for (;;) {
		const struct opt_space *s = space ? space : bs->space;
		struct opt_candidate c;
		struct opt_trial tr = { 0 };
		ssize_t i;

		r = opt_next(s, &set, &h, &c, err);
		if (r < 0)
			break;
		if (c.ask == OPT_ASK_DONE) {
			if (c.reason == OPT_DONE_BUDGET || !c.best.valid || !space)
				break;
			r = widen(bs, ss, &space, &c.best, &h, &set, phases, &n_phases, NULL, err);
			if (r <= 0)
				break;
			if (getenv("BENCH_TRACE") && strtoull(getenv("BENCH_TRACE"), NULL, 10) == seed)
				fprintf(stderr, "--- widened: %s\n", cJSON_PrintUnformatted(ss));
			set.phase_start = h.n;
			continue;
		}
		i = bench_space_lookup(bs, s, &c.config);
		if (i < 0) {
			r = error_set(err, -EINVAL, "the search asked for a configuration outside the truth");
			break;
		}
		tr.config = c.config;
		tr.confirm = c.ask == OPT_ASK_CONFIRM;
		r = bench_eval_deploy(&e, (size_t)i, &tr.outcome, &tr.cost);
		if (getenv("BENCH_TRACE") && strtoull(getenv("BENCH_TRACE"), NULL, 10) == seed) {
			char key[OPT_KEY_MAX];

			(void)opt_config_key(s, &c.config, key, sizeof(key));
			fprintf(stderr, "%3zu %-7s %-7s %-80s %s %.3f  regret %.3f\n", h.n + 1,
				opt_phase_to_string(c.phase), opt_ask_to_string(c.ask), key,
				opt_outcome_to_string(tr.outcome), tr.cost / bs->optimum, t->regret[t->n - 1]);
		}
		if (r == -ENOSPC) {
			r = 0;
			break;
		}
		if (tr.outcome == OPT_OUTCOME_INFEASIBLE) {
			struct runner_estimate est;

			/* the engine's log says why (the sim's cause) */
			runner_preflight_estimate(&bs->preflight, s, &c.config, &est);
			tr.cause = bs->study ? est.cause : OPT_OOM_UNKNOWN;
			tr.suggested_len = est.cause == OPT_OOM_KV_CACHE ? (uint32_t)est.kv_tokens : 0;
		}
		if (r >= 0)
			r = opt_history_add(&h, &tr);
		if (r < 0)
			break;
	}
	opt_history_done(&h);
	bench_eval_done(&e);
	return r;
}

/* ---- the model search ---- */

/* The twin of the study the methods start in, as the runner makes it. */
static int model_twin(const struct bench_space *bs, struct twin **ret, struct error *err)
{
	struct twin_setup setup;
	int r;

	if (bs->twin) {
		*ret = bs->twin;
		return 0;
	}
	r = runner_twin_setup(bs->study, "sim", &setup, err);
	if (r >= 0)
		r = twin_new(bs->study->space, &setup, &((struct bench_space *)bs)->twin, err);
	if (r < 0)
		return r;
	*ret = bs->twin;
	return 0;
}

static int run_model(const struct bench_space *bs, double sigma, uint64_t seed, size_t max_deployments,
		     struct bench_trace *t, struct error *err)
{
	const char *trace = getenv("BENCH_TRACE");
	bool verbose = trace && strtoull(trace, NULL, 10) == seed;
	_cleanup_(cJSON_Deletep) cJSON *ss = NULL;
	_cleanup_(opt_space_freep) struct opt_space *space = NULL;
	_cleanup_(twin_freep) struct twin *own = NULL;
	struct study_phase phases[STUDY_PHASES_MAX];
	size_t n_phases = 0;
	struct twin_search_settings set;
	struct twin_history h;
	struct bench_eval e;
	struct twin *tw;
	int r;

	if (!bs->study)
		return error_set(err, -EOPNOTSUPP, "the model search needs a study landscape (--sim)");
	r = model_twin(bs, &tw, err);
	if (r < 0)
		return r;
	ss = cJSON_Duplicate(bs->start_space_json, true);
	if (!ss)
		return -ENOMEM;
	r = bench_eval_init(&e, bs, sigma, seed, t);
	if (r < 0)
		return r;
	e.cap_deployments = MIN(e.cap_deployments, max_deployments);
	twin_search_settings_init(&set);
	set.plain.seed = seed;
	set.edges = bs->study->search.extend_edges;
	if (bs->preflight.usable)
		set.plain.preflight = &bs->preflight.hook;
	twin_history_init(&h);
	for (;;) {
		struct twin_candidate c;
		struct twin_trial tr;
		size_t n = 0;
		ssize_t i;

		const struct opt_space *s = space ? space : bs->study->space;

		r = twin_search_ask(tw, &set, &h, NULL, 0, 1, &c, &n, err);
		if (r < 0 || n == 0)
			break;
		/* the search over: done, or the answer's confirmation and the
		 * races after it (converged or exhausted) — where the runner
		 * widens a range (runner_on_answer's search_over), before
		 * measuring the answer again in a range it is about to leave */
		if (c.opt.ask == OPT_ASK_DONE ||
		    (c.opt.phase == OPT_PHASE_CONFIRM &&
		     (c.opt.reason == OPT_DONE_CONVERGED || c.opt.reason == OPT_DONE_EXHAUSTED))) {
			bool done = c.opt.ask == OPT_ASK_DONE;
			struct sim_profile base;
			struct model_gate gate = { .twin = tw, .profile = &c.fit.profile, .history = &h };

			if (verbose && done)
				fprintf(stderr, "--- done: %s\n", c.message);
			if (!c.calibrated) {
				twin_base_profile(tw, &base);
				gate.profile = &base;
			}
			r = 0;
			if (c.opt.reason != OPT_DONE_BUDGET && c.opt.best.valid && bs->study->search.extend_edges) {
				if (!space)
					r = rebuild_space(bs, ss, &space, err);
				if (r >= 0)
					r = widen(bs, ss, &space, &c.opt.best, NULL, &set.plain, phases, &n_phases,
						  &gate, err);
			}
			if (r < 0 || (r == 0 && done))
				break;
		}
		if (r > 0) {
			struct twin_setup setup;

			if (verbose && c.opt.ask != OPT_ASK_DONE)
				fprintf(stderr, "--- search over (the answer's confirmation next): %s\n", c.message);
			/* a twin of the widened space, as the runner's planner makes one */
			r = runner_twin_setup(bs->study, "sim", &setup, err);
			if (r >= 0) {
				twin_free(own);
				own = NULL;
				r = twin_new(space, &setup, &own, err);
			}
			if (r < 0)
				break;
			tw = own;
			if (verbose)
				fprintf(stderr, "--- widened: %s\n", cJSON_PrintUnformatted(ss));
			continue;
		}
		i = bench_space_lookup(bs, s, &c.opt.config);
		if (i < 0) {
			r = error_set(err, -EINVAL, "the model search asked for a configuration outside the truth");
			break;
		}
		r = bench_eval_deploy_trial(&e, (size_t)i, &tr);
		if (r == -ENOSPC) {
			r = 0;
			break;
		}
		if (r < 0)
			break;
		tr.trial.config = c.opt.config;
		tr.trial.confirm = c.opt.ask == OPT_ASK_CONFIRM;
		tr.predicted_cost = c.predicted_cost;
		if (tr.trial.outcome == OPT_OUTCOME_INFEASIBLE) {
			struct runner_estimate est;

			runner_preflight_estimate(&bs->preflight, s, &c.opt.config, &est);
			tr.trial.cause = est.cause;
			tr.trial.suggested_len = est.cause == OPT_OOM_KV_CACHE ? (uint32_t)est.kv_tokens : 0;
		}
		if (verbose) {
			char key[OPT_KEY_MAX];

			(void)opt_config_key(s, &c.opt.config, key, sizeof(key));
			fprintf(stderr, "%3zu %-7s %-80s %s %.3f (pred %.3f) regret %.3f | %s\n", h.n + 2,
				opt_ask_to_string(c.opt.ask), key, opt_outcome_to_string(tr.trial.outcome),
				tr.trial.cost / bs->optimum, c.predicted_cost / bs->optimum, t->regret[t->n - 1],
				c.message);
		}
		r = twin_history_add(&h, &tr);
		if (r < 0)
			break;
	}
	twin_history_done(&h);
	bench_eval_done(&e);
	return r;
}

/* ---- the peers ---- */

static int run_order(const struct bench_space *bs, double sigma, uint64_t seed, const size_t *order, size_t n,
		     size_t max_deployments, struct bench_trace *t)
{
	struct bench_eval e;
	int r;

	r = bench_eval_init(&e, bs, sigma, seed, t);
	e.cap_deployments = MIN(e.cap_deployments, max_deployments);
	for (size_t k = 0; k < n && r >= 0; k++) {
		enum opt_outcome o;
		double cost;

		r = bench_eval_deploy(&e, order[k], &o, &cost);
	}
	bench_eval_done(&e);
	return r == -ENOSPC ? 0 : r;
}

static const struct opt_space *grid_space;

/* vLLM auto_tune's grid order: for each quantization × TP combination (as
 * the spec lists them), max_num_seqs ascending, then max_num_batched_tokens
 * ascending. */
static int auto_tune_cmp(const void *a, const void *b)
{
	static const char *const order[] = { OPT_KNOB_QUANTIZATION, OPT_KNOB_TENSOR_PARALLEL, OPT_KNOB_MAX_NUM_SEQS,
					     OPT_KNOB_MAX_NUM_BATCHED_TOKENS };
	const struct opt_config *x = a, *y = b;

	for (size_t i = 0; i < ELEMENTSOF(order); i++) {
		int k = opt_space_knob_index(grid_space, order[i]);

		if (k >= 0 && x->idx[k] != y->idx[k])
			return x->idx[k] < y->idx[k] ? -1 : 1;
	}
	return memcmp(x, y, sizeof(*x));
}

/* The start space's allowed configurations as truth indices: in grid order,
 * or vLLM auto_tune's (auto_tune_cmp) when auto_tune is set. */
static int start_configs(const struct bench_space *bs, bool auto_tune, size_t **ret, size_t *ret_n)
{
	const struct opt_space *s = bench_space_start(bs);
	_cleanup_(freep) struct opt_config *all = NULL;
	_cleanup_(freep) size_t *v = NULL;
	size_t n = 0, m = 0;
	int r;

	r = opt_space_enumerate(s, &all, &n);
	if (r < 0)
		return r;
	if (auto_tune) {
		grid_space = s;
		qsort(all, n, sizeof(all[0]), auto_tune_cmp);
	}
	v = calloc(n ? n : 1, sizeof(size_t));
	if (!v)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		ssize_t i = bench_space_lookup(bs, s, &all[k]);

		if (i >= 0)
			v[m++] = (size_t)i;
	}
	*ret = TAKE_PTR(v);
	*ret_n = m;
	return 0;
}

int bench_run(enum bench_method m, const struct bench_space *bs, double sigma, uint64_t seed, size_t max_deployments,
	      struct bench_trace *t, struct error *err)
{
	_cleanup_(freep) size_t *order = NULL;
	size_t n = 0;
	int r;

	switch (m) {
	case BENCH_SEARCH:
		return run_search(bs, sigma, seed, max_deployments, t, err);
	case BENCH_MODEL:
		return run_model(bs, sigma, seed, max_deployments, t, err);
	case BENCH_RANDOM: {
		struct bench_rng rng = { seed * 104729 + 3 };

		r = start_configs(bs, false, &order, &n);
		if (r < 0)
			return r;
		for (size_t i = n; i > 1; i--) {
			size_t j = (size_t)(bench_rng_next(&rng) % i), tmp = order[i - 1];

			order[i - 1] = order[j];
			order[j] = tmp;
		}
		return run_order(bs, sigma, seed, order, n, max_deployments, t);
	}
	case BENCH_GRID:
		r = start_configs(bs, true, &order, &n);
		if (r < 0)
			return r;
		return run_order(bs, sigma, seed, order, n, max_deployments, t);
	default:
		return error_set(err, -EINVAL, "method %s does not run in this process", bench_method_name(m));
	}
}
