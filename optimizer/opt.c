/* opt.c — the ask/tell search, replayed from the history on every ask.
 *
 * A replay runs the whole search strategy (screen, local checks on the grid,
 * re-probes, restarted SBPLX runs; opt.h explains it) against an "oracle" that answers each configuration the
 * strategy wants from the history. The oracle reveals history entries one at
 * a time, in the order the strategy asks for them, and every decision of the
 * strategy (which combination next, where a run restarts, which points an
 * out-of-memory result rules out) reads only what has been revealed so far.
 * That makes a replay over a k-trial history walk exactly the path the
 * uninterrupted search walked, up to the first configuration not in the
 * history, which is the candidate; the replay then force-stops NLopt and
 * unwinds. A few thousand cached evaluations cost well under a millisecond
 * each, so a replay takes milliseconds even late in a study.
 *
 * NLopt minimises log(cost) over [0,1]^D (D = ordinal knobs with more than
 * one value); a configuration that cannot give a cost returns PENALTY plus a
 * small term that points towards feasible territory, finite and the same on
 * every replay. */
#include <errno.h>
#include <math.h>
#include <nlopt.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "opt.h"

#define PENALTY 100.0
#define RUN_MAXEVAL 400
#define RUNS_MAX 10000
#define SCREEN_LEVELS 3
#define REPROBES_MAX 4
/* The local check walks on while a cost stays within this of the best: two
 * noisy measurements of equal configurations differ by a few percent. */
#define LOCAL_TOLERANCE 0.05

/* ---- a small open-addressing map: grid ordinal -> int ---- */

struct imap {
	uint64_t *keys; /* ordinal + 1; 0 = empty */
	int *values;
	size_t n, cap;
};

static void imap_done(struct imap *m)
{
	free(m->keys);
	free(m->values);
	*m = (struct imap){ 0 };
}

static size_t imap_slot(const struct imap *m, uint64_t key)
{
	uint64_t h = (key + 1) * UINT64_C(0x9E3779B97F4A7C15);
	size_t i = (size_t)(h >> 20) & (m->cap - 1);

	while (m->keys[i] != 0 && m->keys[i] != key + 1)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int *imap_get(const struct imap *m, uint64_t key)
{
	size_t i;

	if (m->cap == 0)
		return NULL;
	i = imap_slot(m, key);
	return m->keys[i] ? &m->values[i] : NULL;
}

static int imap_put(struct imap *m, uint64_t key, int value)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap) {
		struct imap bigger = { .cap = m->cap ? m->cap * 2 : 64 };

		bigger.keys = calloc(bigger.cap, sizeof(uint64_t));
		bigger.values = calloc(bigger.cap, sizeof(int));
		if (!bigger.keys || !bigger.values) {
			imap_done(&bigger);
			return -ENOMEM;
		}
		for (size_t j = 0; j < m->cap; j++)
			if (m->keys[j]) {
				size_t k = imap_slot(&bigger, m->keys[j] - 1);

				bigger.keys[k] = m->keys[j];
				bigger.values[k] = m->values[j];
				bigger.n++;
			}
		imap_done(m);
		*m = bigger;
	}
	i = imap_slot(m, key);
	if (!m->keys[i]) {
		m->keys[i] = key + 1;
		m->n++;
	}
	m->values[i] = value;
	return 0;
}

/* ---- history ---- */

void opt_history_init(struct opt_history *h)
{
	*h = (struct opt_history){ 0 };
}

void opt_history_done(struct opt_history *h)
{
	free(h->trials);
	*h = (struct opt_history){ 0 };
}

int opt_history_add(struct opt_history *h, const struct opt_trial *t)
{
	if (t->outcome >= _OPT_OUTCOME_MAX || (t->outcome == OPT_OUTCOME_MEASURED && !(isfinite(t->cost) && t->cost > 0)))
		return -EINVAL;
	if (h->n == h->allocated) {
		size_t cap = h->allocated ? h->allocated * 2 : 32;
		struct opt_trial *v = realloc(h->trials, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->trials = v;
		h->allocated = cap;
	}
	h->trials[h->n++] = *t;
	return 0;
}

void opt_settings_init(struct opt_settings *s)
{
	*s = (struct opt_settings){
		.seed = 0,
		.max_trials = 0,
		.confirm_probes = 1,
		.max_attempts = 2,
		.promising = 1.0,
		.screen_level = 0.5,
	};
}

/* ---- the replay ---- */

enum eval_kind {
	EVAL_MEASURED,
	EVAL_INFEASIBLE, /* told, or inferred by dominance */
	EVAL_SLA,
	EVAL_FAILED, /* gave up after max_attempts */
	EVAL_STOP,   /* the replay has stopped: unwind */
};

/* What the history says about one configuration: its search trials, and
 * the first REPROBES_MAX re-probes (confirm trials) in the order told. */
struct hist_entry {
	bool decided;
	enum opt_outcome outcome;
	double cost;
	unsigned failures;
	unsigned n_reprobes;
	bool reprobe_measured[REPROBES_MAX];
	double reprobe_cost[REPROBES_MAX];
};

/* What the replay has learnt about one configuration. For a measured one,
 * cost is the mean of its n revealed measurements. */
struct revealed {
	enum eval_kind kind;
	double cost;
	struct opt_config config;
	unsigned n;        /* measurements (MEASURED) */
	unsigned reprobes; /* re-probes consumed from the history */
	double sum;
};

struct replay {
	const struct opt_space *space;
	const struct opt_settings *set;
	struct imap hist_map; /* ordinal -> index in hist */
	struct hist_entry *hist;
	struct imap seen_map; /* ordinal -> index in seen */
	struct revealed *seen;
	size_t n_seen, cap_seen;
	struct opt_config *oom; /* revealed out-of-memory configurations */
	size_t n_oom, cap_oom;
	unsigned evaluated, inferred;
	unsigned reprobes; /* re-probes consumed from the history */

	/* categorical combinations and ordinal dimensions */
	size_t cat[OPT_KNOBS_MAX], n_cat;
	size_t dim[OPT_KNOBS_MAX], n_dim; /* ordinal knobs with more than one value */
	size_t n_combos;
	double *combo_best;               /* lowest revealed cost per combination (INFINITY: none) */
	double *combo_screen;             /* its cost at the screening point (INFINITY: none) */
	struct opt_config *combo_best_cfg;
	bool *combo_done;
	bool *combo_converged;            /* NLopt runs from the best ask for nothing new */
	bool *combo_checked;              /* the local check passed at combo_checked_cfg */
	struct opt_config *combo_checked_cfg;
	unsigned *combo_runs;
	double best;                      /* lowest revealed cost overall */
	struct opt_config best_cfg;

	/* the NLopt run in progress */
	struct opt_config base; /* categorical values of the run's combination */
	bool new_point;         /* the current run revealed something */

	/* how the replay stopped */
	int error;
	bool stopped, budget;
	enum opt_phase phase;
	bool reprobe; /* the candidate is a re-probe (asked as OPT_ASK_CONFIRM) */
	struct opt_config candidate;
	unsigned attempt;
};

static void replay_done(struct replay *r)
{
	imap_done(&r->hist_map);
	imap_done(&r->seen_map);
	free(r->hist);
	free(r->seen);
	free(r->oom);
	free(r->combo_best);
	free(r->combo_screen);
	free(r->combo_runs);
	free(r->combo_best_cfg);
	free(r->combo_done);
	free(r->combo_converged);
	free(r->combo_checked);
	free(r->combo_checked_cfg);
}

static bool config_valid(const struct opt_space *space, const struct opt_config *c)
{
	for (size_t i = 0; i < OPT_KNOBS_MAX; i++)
		if (i < space->n_knobs ? c->idx[i] >= space->knobs[i].n_values : c->idx[i] != 0)
			return false;
	return true;
}

static int replay_init(struct replay *r, const struct opt_space *space, const struct opt_settings *set,
		       const struct opt_history *h, struct error *err)
{
	size_t n_entries = 0;
	int q;

	*r = (struct replay){ .space = space, .set = set };
	r->hist = calloc(h->n ? h->n : 1, sizeof(*r->hist));
	if (!r->hist)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++) {
		const struct opt_trial *t = &h->trials[i];
		struct hist_entry *e;
		uint64_t o;
		int *slot;

		if (!config_valid(space, &t->config))
			return error_set(err, -EINVAL, "trial %zu: configuration is not on the search space's grid", i);
		o = opt_config_ordinal(space, &t->config);
		slot = imap_get(&r->hist_map, o);
		if (t->confirm) {
			/* A re-probe: only of a configuration already measured. */
			e = slot ? &r->hist[*slot] : NULL;
			if (e && e->decided && e->n_reprobes < REPROBES_MAX) {
				e->reprobe_measured[e->n_reprobes] = t->outcome == OPT_OUTCOME_MEASURED;
				e->reprobe_cost[e->n_reprobes++] = t->cost;
			}
			continue;
		}
		if (!slot) {
			q = imap_put(&r->hist_map, o, (int)n_entries);
			if (q < 0)
				return q;
			e = &r->hist[n_entries++];
		} else
			e = &r->hist[*slot];
		if (e->decided)
			continue;
		if (t->outcome == OPT_OUTCOME_FAILED) {
			e->failures++;
			continue;
		}
		e->decided = true;
		e->outcome = t->outcome;
		e->cost = t->cost;
	}

	r->n_combos = 1;
	for (size_t i = 0; i < space->n_knobs; i++) {
		if (space->knobs[i].categorical) {
			r->cat[r->n_cat++] = i;
			r->n_combos *= space->knobs[i].n_values;
		} else if (space->knobs[i].n_values > 1)
			r->dim[r->n_dim++] = i;
	}
	/* Restart-aware order: combinations are numbered (and so screened, and
	 * ties broken) with the quantization most significant, then the tensor-
	 * parallel degree, whatever order the spec lists them in, so that
	 * consecutive deployments share a checkpoint (its files warm in the page
	 * cache) and a TP layout as long as possible. A function of the space
	 * alone: replay stays exact. */
	for (size_t pass = 0, front = 0; pass < 2; pass++) {
		const char *name = pass == 0 ? OPT_KNOB_QUANTIZATION : OPT_KNOB_TENSOR_PARALLEL;

		for (size_t j = front; j < r->n_cat; j++)
			if (strcmp(space->knobs[r->cat[j]].name, name) == 0) {
				size_t knob = r->cat[j];

				memmove(&r->cat[front + 1], &r->cat[front], (j - front) * sizeof(r->cat[0]));
				r->cat[front++] = knob;
				break;
			}
	}
	r->combo_best = malloc(r->n_combos * sizeof(double));
	r->combo_screen = malloc(r->n_combos * sizeof(double));
	r->combo_best_cfg = calloc(r->n_combos, sizeof(struct opt_config));
	r->combo_done = calloc(r->n_combos, sizeof(bool));
	r->combo_converged = calloc(r->n_combos, sizeof(bool));
	r->combo_checked = calloc(r->n_combos, sizeof(bool));
	r->combo_checked_cfg = calloc(r->n_combos, sizeof(struct opt_config));
	r->combo_runs = calloc(r->n_combos, sizeof(unsigned));
	if (!r->combo_best || !r->combo_screen || !r->combo_best_cfg || !r->combo_done || !r->combo_converged ||
	    !r->combo_checked || !r->combo_checked_cfg ||
	    !r->combo_runs)
		return -ENOMEM;
	for (size_t c = 0; c < r->n_combos; c++)
		r->combo_best[c] = r->combo_screen[c] = INFINITY;
	r->best = INFINITY;
	return 0;
}

static size_t combo_of(const struct replay *r, const struct opt_config *c)
{
	size_t k = 0;

	for (size_t i = 0; i < r->n_cat; i++)
		k = k * r->space->knobs[r->cat[i]].n_values + c->idx[r->cat[i]];
	return k;
}

/* The configuration with combination k's categorical values, the rest 0. */
static void combo_base(const struct replay *r, size_t k, struct opt_config *ret)
{
	struct opt_config c = { 0 };

	for (size_t i = r->n_cat; i-- > 0;) {
		size_t n = r->space->knobs[r->cat[i]].n_values;

		c.idx[r->cat[i]] = (uint16_t)(k % n);
		k /= n;
	}
	*ret = c;
}

/* Out-of-memory dominance: some revealed OOM configuration has the same
 * values on every knob except the memory-monotone ones, where c is >=. */
static bool dominated(const struct replay *r, const struct opt_config *c)
{
	for (size_t j = 0; j < r->n_oom; j++) {
		const struct opt_config *o = &r->oom[j];
		bool dom = true;

		for (size_t i = 0; i < r->space->n_knobs && dom; i++)
			dom = r->space->knobs[i].memory_monotone ? c->idx[i] >= o->idx[i] : c->idx[i] == o->idx[i];
		if (dom)
			return true;
	}
	return false;
}

static int remember(struct replay *r, const struct opt_config *c, uint64_t o, enum eval_kind kind, double cost)
{
	int q;

	if (r->n_seen == r->cap_seen) {
		size_t cap = r->cap_seen ? r->cap_seen * 2 : 64;
		struct revealed *v = realloc(r->seen, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		r->seen = v;
		r->cap_seen = cap;
	}
	q = imap_put(&r->seen_map, o, (int)r->n_seen);
	if (q < 0)
		return q;
	r->seen[r->n_seen++] = (struct revealed){
		.kind = kind, .cost = cost, .config = *c, .n = kind == EVAL_MEASURED, .sum = cost
	};
	return 0;
}

static int add_oom(struct replay *r, const struct opt_config *c)
{
	if (r->n_oom == r->cap_oom) {
		size_t cap = r->cap_oom ? r->cap_oom * 2 : 16;
		struct opt_config *v = realloc(r->oom, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		r->oom = v;
		r->cap_oom = cap;
	}
	r->oom[r->n_oom++] = *c;
	return 0;
}

static void stop_error(struct replay *r, int error)
{
	r->error = error;
	r->stopped = true;
}

/* The oracle: what the search learns about configuration c (which must meet
 * the constraints). Reveals history entries in ask order; the first
 * configuration that needs a deployment stops the replay. */
static enum eval_kind evaluate(struct replay *r, const struct opt_config *c, double *ret_cost)
{
	uint64_t o = opt_config_ordinal(r->space, c);
	const struct hist_entry *e;
	enum eval_kind kind;
	int *slot, q;

	if (r->stopped)
		return EVAL_STOP;
	slot = imap_get(&r->seen_map, o);
	if (slot) {
		*ret_cost = r->seen[*slot].cost;
		return r->seen[*slot].kind;
	}
	if (dominated(r, c)) {
		q = remember(r, c, o, EVAL_INFEASIBLE, 0);
		if (q < 0) {
			stop_error(r, q);
			return EVAL_STOP;
		}
		r->inferred++;
		return EVAL_INFEASIBLE;
	}
	slot = imap_get(&r->hist_map, o);
	e = slot ? &r->hist[*slot] : NULL;
	if (!e || (!e->decided && e->failures < r->set->max_attempts)) {
		if (!e && r->set->max_trials > 0 && r->evaluated + r->reprobes >= r->set->max_trials)
			r->budget = true;
		else {
			r->candidate = *c;
			r->attempt = (e ? e->failures : 0) + 1;
		}
		r->stopped = true;
		return EVAL_STOP;
	}

	if (!e->decided)
		kind = EVAL_FAILED;
	else if (e->outcome == OPT_OUTCOME_MEASURED)
		kind = EVAL_MEASURED;
	else if (e->outcome == OPT_OUTCOME_SLA_NEVER_MET)
		kind = EVAL_SLA;
	else
		kind = EVAL_INFEASIBLE;
	q = remember(r, c, o, kind, e->cost);
	if (q >= 0 && kind == EVAL_INFEASIBLE)
		q = add_oom(r, c);
	if (q < 0) {
		stop_error(r, q);
		return EVAL_STOP;
	}
	r->evaluated++;
	r->new_point = true;
	if (kind == EVAL_MEASURED) {
		size_t k = combo_of(r, c);

		if (e->cost < r->combo_best[k]) {
			r->combo_best[k] = e->cost;
			r->combo_best_cfg[k] = *c;
		}
		if (e->cost < r->best) {
			r->best = e->cost;
			r->best_cfg = *c;
		}
		*ret_cost = e->cost;
	}
	return kind;
}

/* The lowest mean cost per combination and overall, recomputed after a
 * re-probe moved a mean (in reveal order, as evaluate() keeps them). */
static void rescan_best(struct replay *r)
{
	for (size_t k = 0; k < r->n_combos; k++)
		r->combo_best[k] = INFINITY;
	r->best = INFINITY;
	for (size_t i = 0; i < r->n_seen; i++) {
		const struct revealed *v = &r->seen[i];
		size_t k;

		if (v->kind != EVAL_MEASURED)
			continue;
		k = combo_of(r, &v->config);
		if (v->cost < r->combo_best[k]) {
			r->combo_best[k] = v->cost;
			r->combo_best_cfg[k] = v->config;
		}
		if (v->cost < r->best) {
			r->best = v->cost;
			r->best_cfg = v->config;
		}
	}
}

/* Measures a measured configuration once more (a single measurement of the
 * incumbent is biased low: it was picked for being the lowest of many noisy
 * ones). Answered from the configuration's re-probes in the history, in
 * order; else the replay stops with c as a re-probe candidate. Counts
 * against max_trials. Returns true when a new measurement was revealed. */
static bool reprobe(struct replay *r, const struct opt_config *c)
{
	int *slot = imap_get(&r->seen_map, opt_config_ordinal(r->space, c));
	const struct hist_entry *e;
	struct revealed *v;
	unsigned j;

	if (r->stopped || !slot)
		return false;
	v = &r->seen[*slot];
	slot = imap_get(&r->hist_map, opt_config_ordinal(r->space, c));
	if (v->kind != EVAL_MEASURED || !slot)
		return false;
	e = &r->hist[*slot];
	j = v->reprobes;
	if (j >= REPROBES_MAX)
		return false;
	if (j >= e->n_reprobes) {
		if (r->set->max_trials > 0 && r->evaluated + r->reprobes >= r->set->max_trials)
			r->budget = true;
		else {
			r->candidate = *c;
			r->attempt = 1;
			r->reprobe = true;
		}
		r->stopped = true;
		return false;
	}
	v->reprobes++;
	r->reprobes++;
	r->new_point = true;
	if (!e->reprobe_measured[j])
		return false;
	v->n++;
	v->sum += e->reprobe_cost[j];
	v->cost = v->sum / v->n;
	rescan_best(r);
	return true;
}

/* Sum of the normalised coordinates of the memory-monotone knobs. */
static double memory_load(const struct replay *r, const struct opt_config *c)
{
	double s = 0;

	for (size_t i = 0; i < r->space->n_knobs; i++)
		if (r->space->knobs[i].memory_monotone)
			s += opt_space_normalise(r->space, i, c->idx[i]);
	return s;
}

static bool holds(enum opt_cmp cmp, double a, double b)
{
	switch (cmp) {
	case OPT_CMP_GE:
		return a >= b;
	case OPT_CMP_LE:
		return a <= b;
	case OPT_CMP_GT:
		return a > b;
	case OPT_CMP_LT:
		return a < b;
	case OPT_CMP_EQ:
		return a == b;
	default:
		return a != b;
	}
}

static double side(const struct opt_space *space, const struct opt_config *c, int knob, double coef, double constant)
{
	return knob < 0 ? constant : coef * space->knobs[knob].numbers[c->idx[knob]];
}

/* How far a configuration is from meeting the constraints (0 when it does),
 * in log2 units for positive values. */
static double violation(const struct opt_space *space, const struct opt_config *c)
{
	double v = 0;

	for (size_t i = 0; i < space->n_constraints; i++) {
		const struct opt_constraint *k = &space->constraints[i];
		double a = side(space, c, k->lhs_knob, k->lhs_coef, k->lhs_const);
		double b = side(space, c, k->rhs_knob, k->rhs_coef, k->rhs_const);

		if (!holds(k->cmp, a, b))
			v += 1 + (a > 0 && b > 0 ? fabs(log2(a / b)) : fabs(a - b) / (fabs(b) + 1));
	}
	return v;
}

/* The objective NLopt sees for one configuration. */
static double objective_of(struct replay *r, const struct opt_config *c)
{
	double cost = 0;

	if (!opt_space_allowed(r->space, c))
		return 2 * PENALTY + violation(r->space, c);
	switch (evaluate(r, c, &cost)) {
	case EVAL_MEASURED:
		return log(cost);
	case EVAL_INFEASIBLE:
		return PENALTY + 1 + memory_load(r, c);
	case EVAL_SLA:
	case EVAL_FAILED:
		return PENALTY + 0.5 * memory_load(r, c);
	default:
		return 3 * PENALTY;
	}
}

struct run_ctx {
	struct replay *r;
	nlopt_opt opt;
};

static double nlopt_objective(unsigned n, const double *x, double *grad, void *data)
{
	struct run_ctx *ctx = data;
	struct replay *r = ctx->r;
	double full[OPT_KNOBS_MAX] = { 0 };
	struct opt_config c;
	double v;

	if (r->stopped) {
		nlopt_force_stop(ctx->opt);
		return 3 * PENALTY;
	}
	for (size_t i = 0; i < r->space->n_knobs; i++)
		full[i] = opt_space_normalise(r->space, i, r->base.idx[i]);
	for (unsigned i = 0; i < n; i++)
		full[r->dim[i]] = x[i];
	opt_space_snap(r->space, full, &c);
	v = objective_of(r, &c);
	if (r->stopped)
		nlopt_force_stop(ctx->opt);
	return v;
}

/* One SBPLX run over the ordinal knobs of `start`'s combination. */
static int run_sbplx(struct replay *r, const struct opt_config *start)
{
	double x[OPT_KNOBS_MAX], lb[OPT_KNOBS_MAX], ub[OPT_KNOBS_MAX], step[OPT_KNOBS_MAX], xtol[OPT_KNOBS_MAX];
	_cleanup_(nlopt_destroyp) nlopt_opt opt = NULL;
	struct run_ctx ctx = { .r = r };
	double minf;
	unsigned n = (unsigned)r->n_dim;

	opt = nlopt_create(NLOPT_LN_SBPLX, n);
	if (!opt)
		return -ENOMEM;
	ctx.opt = opt;
	for (unsigned i = 0; i < n; i++) {
		double g = 1.0 / (double)(r->space->knobs[r->dim[i]].n_values - 1);

		x[i] = opt_space_normalise(r->space, r->dim[i], start->idx[r->dim[i]]);
		lb[i] = 0;
		ub[i] = 1;
		step[i] = MIN(0.5, MAX(0.25, g));
		xtol[i] = g;
	}
	r->base = *start;
	if (nlopt_set_lower_bounds(opt, lb) < 0 || nlopt_set_upper_bounds(opt, ub) < 0 ||
	    nlopt_set_min_objective(opt, nlopt_objective, &ctx) < 0 || nlopt_set_initial_step(opt, step) < 0 ||
	    nlopt_set_xtol_abs(opt, xtol) < 0 || nlopt_set_maxeval(opt, RUN_MAXEVAL) < 0)
		return -EIO;
	nlopt_srand(r->set->seed);
	/* The result code is not trusted (PLATFORM.md): r->stopped says whether
	 * the run asked for something new. */
	(void)nlopt_optimize(opt, x, &minf);
	return 0;
}

/* The allowed configuration of combination k nearest (in normalised grid
 * coordinates) to `level` on every ordinal knob; -ENOENT when none. */
static int screen_point(const struct replay *r, size_t k, double level, struct opt_config *ret)
{
	const struct opt_space *s = r->space;
	double full[OPT_KNOBS_MAX] = { 0 }, best_d = INFINITY;
	struct opt_config base, c, best = { 0 };
	uint64_t n_sub = 1;

	combo_base(r, k, &base);
	for (size_t i = 0; i < s->n_knobs; i++)
		full[i] = s->knobs[i].categorical ? opt_space_normalise(s, i, base.idx[i]) : level;
	opt_space_snap(s, full, &c);
	if (opt_space_allowed(s, &c)) {
		*ret = c;
		return 0;
	}
	for (size_t i = 0; i < r->n_dim; i++)
		n_sub *= s->knobs[r->dim[i]].n_values;
	for (uint64_t o = 0; o < n_sub; o++) {
		uint64_t rest = o;
		double d = 0;

		c = base;
		for (size_t i = r->n_dim; i-- > 0;) {
			size_t n = s->knobs[r->dim[i]].n_values;

			c.idx[r->dim[i]] = (uint16_t)(rest % n);
			rest /= n;
			d += pow(opt_space_normalise(s, r->dim[i], c.idx[r->dim[i]]) - level, 2);
		}
		if (d < best_d && opt_space_allowed(s, &c)) {
			best_d = d;
			best = c;
		}
	}
	if (!isfinite(best_d))
		return -ENOENT;
	*ret = best;
	return 0;
}

/* Screening in passes: every combination at the screen level first; those
 * that did not run there at the smallest point (an out-of-memory result
 * there rules the whole combination out in one deployment, as when the
 * weights do not fit), then at half the screen level (the smallest point
 * alone would make a combination look worse than it is). Early deployments
 * so cover all combinations. */
static void screen(struct replay *r)
{
	const double levels[SCREEN_LEVELS] = { r->set->screen_level, 0.0, r->set->screen_level * 0.5 };
	bool *first = calloc(r->n_combos, sizeof(bool)); /* screened at the first level */

	if (!first) {
		stop_error(r, -ENOMEM);
		return;
	}
	r->phase = OPT_PHASE_SCREEN;
	for (size_t l = 0; l < SCREEN_LEVELS && !r->stopped; l++)
		for (size_t k = 0; k < r->n_combos && !r->stopped; k++) {
			struct opt_config c;
			double cost;

			if (r->combo_done[k] || (l < 2 ? isfinite(r->combo_screen[k]) : first[k]))
				continue;
			if (screen_point(r, k, levels[l], &c) < 0) {
				r->combo_done[k] = true;
				continue;
			}
			if (evaluate(r, &c, &cost) == EVAL_MEASURED) {
				r->combo_screen[k] = MIN(r->combo_screen[k], cost);
				first[k] = l == 0;
			}
		}
	free(first);
}

/* Where combination k's search starts: the ordinal values of the best
 * configuration so far (the batch knobs that suit one quantization/TP tend
 * to suit the others), unless that is ruled out; else its own best. */
static void run_start(const struct replay *r, size_t k, struct opt_config *ret)
{
	struct opt_config c = r->combo_best_cfg[k];

	if (r->combo_runs[k] == 0 && combo_of(r, &r->best_cfg) != k) {
		struct opt_config t = r->best_cfg;

		for (size_t i = 0; i < r->n_cat; i++)
			t.idx[r->cat[i]] = c.idx[r->cat[i]];
		if (opt_space_allowed(r->space, &t) && !dominated(r, &t))
			c = t;
	}
	*ret = c;
}

/* The local check on the snapped grid, which NLopt's simplex cannot be
 * trusted to do on a flat, noisy landscape: from combination k's best, each
 * ordinal knob is walked down and up one grid step at a time, the other
 * knobs held, for as long as the cost stays within LOCAL_TOLERANCE of the
 * best (a plateau, or measurement noise) and the grid goes on; then the
 * knob's smallest and largest values are tried (optima sit on grid edges).
 * A point that beats the best becomes the centre and the check starts again
 * from it. Returns when no point of the check beats the centre (or the
 * replay stopped). */
static void local_check(struct replay *r, size_t k)
{
	const struct opt_space *s = r->space;

	while (!r->stopped) {
		struct opt_config centre = r->combo_best_cfg[k];
		double centre_cost = r->combo_best[k];
		bool moved = false;

		for (size_t i = 0; i < r->n_dim && !moved && !r->stopped; i++) {
			size_t d = r->dim[i];
			int top = (int)s->knobs[d].n_values - 1;

			for (int dir = -1; dir <= 1 && !moved && !r->stopped; dir += 2)
				for (int at = centre.idx[d] + dir; at >= 0 && at <= top; at += dir) {
					struct opt_config c = centre;
					double cost = INFINITY;

					c.idx[d] = (uint16_t)at;
					if (!opt_space_allowed(s, &c))
						break;
					if (evaluate(r, &c, &cost) != EVAL_MEASURED)
						break;
					if (cost < centre_cost) {
						moved = true;
						break;
					}
					if (cost > centre_cost * (1 + LOCAL_TOLERANCE))
						break;
				}
			for (int e = 0; e < 2 && !moved && !r->stopped; e++) {
				struct opt_config c = centre;
				double cost = INFINITY;

				c.idx[d] = (uint16_t)(e ? top : 0);
				if (c.idx[d] == centre.idx[d] || !opt_space_allowed(s, &c))
					continue;
				moved = evaluate(r, &c, &cost) == EVAL_MEASURED && cost < centre_cost;
			}
		}
		if (moved)
			continue;
		/* Converged on the centre: measure it again once before
		 * believing it (its cost may be a lucky draw). */
		{
			int *slot = imap_get(&r->seen_map, opt_config_ordinal(s, &centre));

			size_t v = slot ? (size_t)*slot : SIZE_MAX;

			if (r->set->confirm_probes == 0 || v == SIZE_MAX || r->seen[v].reprobes > 0)
				return;
			(void)reprobe(r, &centre);
			if (!r->stopped && r->seen[v].reprobes == 0)
				return; /* cannot happen: a revealed centre can be re-probed */
		}
	}
}

static void search(struct replay *r)
{
	double screen_best = INFINITY;

	if (r->stopped)
		return;
	r->phase = OPT_PHASE_SEARCH;
	for (size_t k = 0; k < r->n_combos; k++)
		screen_best = MIN(screen_best, r->combo_screen[k]);
	for (unsigned runs = 0; runs < RUNS_MAX && !r->stopped; runs++) {
		struct opt_config start;
		size_t pick = SIZE_MAX;
		bool need_local;

		/* Promising: screened within `promising` of the best screen;
		 * the one with the lowest cost so far goes first. */
		for (size_t k = 0; k < r->n_combos; k++)
			if (!r->combo_done[k] && isfinite(r->combo_best[k]) &&
			    r->combo_screen[k] <= screen_best * (1 + r->set->promising) &&
			    (pick == SIZE_MAX || r->combo_best[k] < r->combo_best[pick]))
				pick = k;
		if (pick == SIZE_MAX)
			return;
		if (r->n_dim == 0) {
			r->combo_done[pick] = true;
			continue;
		}
		r->new_point = false;
		need_local = !r->combo_checked[pick] ||
			     memcmp(&r->combo_checked_cfg[pick], &r->combo_best_cfg[pick], sizeof(struct opt_config)) != 0;
		if (need_local) {
			struct opt_config before = r->combo_best_cfg[pick];

			if (r->combo_runs[pick] == 0) {
				double cost;

				run_start(r, pick, &start);
				r->combo_runs[pick]++;
				(void)evaluate(r, &start, &cost);
				if (r->stopped)
					return;
			}
			local_check(r, pick);
			if (r->stopped)
				return;
			r->combo_checked[pick] = true;
			r->combo_checked_cfg[pick] = r->combo_best_cfg[pick];
			if (memcmp(&before, &r->combo_best_cfg[pick], sizeof(before)) != 0)
				r->combo_converged[pick] = false;
			continue;
		}
		if (!r->combo_converged[pick]) {
			start = r->combo_best_cfg[pick];
			r->combo_runs[pick]++;
			if (run_sbplx(r, &start) < 0) {
				stop_error(r, -EIO);
				return;
			}
			if (!r->new_point && !r->stopped)
				r->combo_converged[pick] = true;
			continue;
		}
		r->combo_done[pick] = true;
	}
}

/* Every allowed configuration has been revealed or ruled out. */
static bool exhausted(const struct replay *r)
{
	for (uint64_t o = 0; o < r->space->n_grid; o++) {
		struct opt_config c;

		opt_config_from_ordinal(r->space, o, &c);
		if (opt_space_allowed(r->space, &c) && !imap_get(&r->seen_map, o) && !dominated(r, &c))
			return false;
	}
	return true;
}

/* ---- results and confirmation ---- */

static int cmp_result(const struct opt_result *a, const struct opt_result *b, const struct opt_space *s)
{
	if (a->cost != b->cost)
		return a->cost < b->cost ? -1 : 1;
	return opt_config_ordinal(s, &a->config) < opt_config_ordinal(s, &b->config) ? -1 : 1;
}

/* Fills res with the mean, count and spread of config's MEASURED trials. */
static void result_of(const struct opt_space *space, const struct opt_history *h, const struct opt_config *config,
		      struct opt_result *res)
{
	double sum = 0, lo = INFINITY, hi = -INFINITY;
	unsigned n = 0;

	for (size_t i = 0; i < h->n; i++) {
		const struct opt_trial *t = &h->trials[i];

		if (t->outcome != OPT_OUTCOME_MEASURED || memcmp(&t->config, config, sizeof(*config)) != 0)
			continue;
		sum += t->cost;
		lo = MIN(lo, t->cost);
		hi = MAX(hi, t->cost);
		n++;
	}
	*res = (struct opt_result){ .valid = n > 0, .config = *config, .n = n };
	if (n > 0) {
		res->cost = sum / n;
		res->spread = (hi - lo) / res->cost;
	}
	(void)space;
}

void opt_best(const struct opt_space *space, const struct opt_history *history, struct opt_result *ret_best,
	      struct opt_result *ret_runner_up)
{
	struct opt_result best = { 0 }, second = { 0 };

	for (size_t i = 0; i < history->n; i++) {
		const struct opt_trial *t = &history->trials[i];
		struct opt_result res;
		bool first = true;

		if (t->outcome != OPT_OUTCOME_MEASURED)
			continue;
		for (size_t j = 0; j < i && first; j++)
			first = !(history->trials[j].outcome == OPT_OUTCOME_MEASURED &&
				  memcmp(&history->trials[j].config, &t->config, sizeof(t->config)) == 0);
		if (!first)
			continue;
		result_of(space, history, &t->config, &res);
		if (!best.valid || cmp_result(&res, &best, space) < 0) {
			second = best;
			best = res;
		} else if (!second.valid || cmp_result(&res, &second, space) < 0)
			second = res;
	}
	if (ret_best)
		*ret_best = best;
	if (ret_runner_up)
		*ret_runner_up = second;
}

static unsigned confirms_of(const struct opt_history *h, const struct opt_config *c, unsigned *ret_total)
{
	unsigned n = 0, total = 0;

	for (size_t i = 0; i < h->n; i++)
		if (h->trials[i].confirm) {
			total++;
			n += memcmp(&h->trials[i].config, c, sizeof(*c)) == 0;
		}
	*ret_total = total;
	return n;
}

int opt_next(const struct opt_space *space, const struct opt_settings *settings, const struct opt_history *history,
	     struct opt_candidate *ret, struct error *err)
{
	struct opt_candidate cand = { 0 };
	struct replay r;
	int q;

	if (settings->max_attempts < 1 || !(settings->promising >= 0) || !(settings->screen_level >= 0) ||
	    !(settings->screen_level <= 1))
		return error_set(err, -EINVAL, "optimizer settings out of range");
	q = replay_init(&r, space, settings, history, err);
	if (q >= 0) {
		screen(&r);
		search(&r);
		q = r.error;
		if (q < 0)
			error_set(err, q, "optimizer replay failed");
	}
	cand.evaluated = r.evaluated;
	cand.inferred = r.inferred;
	opt_best(space, history, &cand.best, &cand.runner_up);
	if (q >= 0 && r.stopped && !r.budget) {
		cand.ask = r.reprobe ? OPT_ASK_CONFIRM : OPT_ASK_TRIAL;
		cand.phase = r.phase;
		cand.config = r.candidate;
		cand.attempt = r.attempt;
	} else if (q >= 0) {
		const struct opt_result *top[2] = { &cand.best, &cand.runner_up };
		unsigned total;

		cand.reason = r.budget ? OPT_DONE_BUDGET : exhausted(&r) ? OPT_DONE_EXHAUSTED : OPT_DONE_CONVERGED;
		cand.ask = OPT_ASK_DONE;
		cand.phase = OPT_PHASE_DONE;
		/* Confirm the top two by mean cost; bounded, since a noisy
		 * re-probe may reorder them more than once. */
		for (size_t i = 0; i < 2 && cand.ask == OPT_ASK_DONE; i++)
			if (top[i]->valid && confirms_of(history, &top[i]->config, &total) < settings->confirm_probes &&
			    total - MIN(total, r.reprobes) < settings->confirm_probes * 4) {
				cand.ask = OPT_ASK_CONFIRM;
				cand.phase = OPT_PHASE_CONFIRM;
				cand.config = top[i]->config;
				cand.attempt = 1;
			}
	}
	replay_done(&r);
	if (q < 0)
		return q;
	*ret = cand;
	return 0;
}

/* ---- names ---- */

static const char *const outcome_names[_OPT_OUTCOME_MAX] = {
	[OPT_OUTCOME_MEASURED] = "measured",
	[OPT_OUTCOME_INFEASIBLE] = "infeasible",
	[OPT_OUTCOME_SLA_NEVER_MET] = "sla_never_met",
	[OPT_OUTCOME_FAILED] = "failed",
};

const char *opt_outcome_to_string(enum opt_outcome o)
{
	return o < _OPT_OUTCOME_MAX ? outcome_names[o] : "?";
}

int opt_outcome_from_string(const char *s, enum opt_outcome *ret)
{
	for (int i = 0; i < _OPT_OUTCOME_MAX; i++)
		if (strcmp(s, outcome_names[i]) == 0) {
			*ret = (enum opt_outcome)i;
			return 0;
		}
	return -EINVAL;
}

const char *opt_ask_to_string(enum opt_ask a)
{
	return a == OPT_ASK_TRIAL ? "trial" : a == OPT_ASK_CONFIRM ? "confirm" : "done";
}

const char *opt_phase_to_string(enum opt_phase p)
{
	static const char *const names[] = { "screen", "search", "confirm", "done" };

	return p <= OPT_PHASE_DONE ? names[p] : "?";
}

const char *opt_done_reason_to_string(enum opt_done_reason r)
{
	static const char *const names[] = { "", "converged", "budget", "exhausted" };

	return r <= OPT_DONE_EXHAUSTED ? names[r] : "?";
}
