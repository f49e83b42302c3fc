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
 * every replay.
 *
 * This file holds the history, the replay's state and its oracle, opt_next
 * and opt_best; the strategy itself (screening, local checks, the SBPLX
 * runs and their objective) is in opt-search.c. */
#include <errno.h>
#include <math.h>
#include <nlopt.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "opt-internal.h"
#include "opt.h"

/* ---- a small open-addressing map: grid ordinal -> int ---- */

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

int *opt_imap_get(const struct imap *m, uint64_t key)
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

bool opt_trial_is_valid(const struct opt_trial *t)
{
	return t->outcome < _OPT_OUTCOME_MAX &&
	       (t->outcome != OPT_OUTCOME_MEASURED || (isfinite(t->cost) && t->cost > 0));
}

int opt_history_add(struct opt_history *h, const struct opt_trial *t)
{
	if (!opt_trial_is_valid(t))
		return -EINVAL;
	if (ARRAY_GROW(h->trials, h->allocated, h->n) < 0)
		return -ENOMEM;
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
		.phase_knob = -1,
	};
}

/* ---- the replay ---- */

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
	free(r->combo_turns);
	free(r->combo_best_cfg);
	free(r->combo_done);
	free(r->combo_near);
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

	*r = (struct replay){ .space = space, .set = set, .deployed = (unsigned)h->n };
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
		slot = opt_imap_get(&r->hist_map, o);
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
		e->cause = t->cause;
		e->suggested_len = t->suggested_len;
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
	r->combo_near = calloc(r->n_combos, sizeof(enum near_check));
	r->combo_converged = calloc(r->n_combos, sizeof(bool));
	r->combo_checked = calloc(r->n_combos, sizeof(bool));
	r->combo_checked_cfg = calloc(r->n_combos, sizeof(struct opt_config));
	r->combo_runs = calloc(r->n_combos, sizeof(unsigned));
	r->combo_turns = calloc(r->n_combos, sizeof(unsigned));
	if (!r->combo_best || !r->combo_screen || !r->combo_best_cfg || !r->combo_done || !r->combo_near ||
	    !r->combo_converged || !r->combo_checked || !r->combo_checked_cfg || !r->combo_runs || !r->combo_turns)
		return -ENOMEM;
	for (size_t c = 0; c < r->n_combos; c++)
		r->combo_best[c] = r->combo_screen[c] = INFINITY;
	r->best = INFINITY;
	return 0;
}

size_t opt_replay_combo_of(const struct replay *r, const struct opt_config *c)
{
	size_t k = 0;

	for (size_t i = 0; i < r->n_cat; i++)
		k = k * r->space->knobs[r->cat[i]].n_values + c->idx[r->cat[i]];
	return k;
}

/* The configuration with combination k's categorical values, the rest 0. */
void opt_replay_combo_base(const struct replay *r, size_t k, struct opt_config *ret)
{
	struct opt_config c = { 0 };

	for (size_t i = r->n_cat; i-- > 0;) {
		size_t n = r->space->knobs[r->cat[i]].n_values;

		c.idx[r->cat[i]] = (uint16_t)(k % n);
		k /= n;
	}
	*ret = c;
}

static int remember(struct replay *r, const struct opt_config *c, uint64_t o, enum eval_kind kind, double cost,
		    bool told)
{
	int q;

	if (ARRAY_GROW(r->seen, r->cap_seen, r->n_seen) < 0)
		return -ENOMEM;
	q = imap_put(&r->seen_map, o, (int)r->n_seen);
	if (q < 0)
		return q;
	r->seen[r->n_seen++] = (struct revealed){
		.kind = kind, .cost = cost, .config = *c, .n = kind == EVAL_MEASURED, .sum = cost, .told = told
	};
	return 0;
}

void opt_replay_stop_error(struct replay *r, int error)
{
	r->error = error;
	r->stopped = true;
}

/* The oracle: what the search learns about configuration c (which must meet
 * the constraints). Reveals history entries in ask order; the first
 * configuration that needs a deployment stops the replay. */
enum eval_kind opt_replay_evaluate(struct replay *r, const struct opt_config *c, double *ret_cost)
{
	uint64_t o = opt_config_ordinal(r->space, c);
	const struct hist_entry *e;
	enum eval_kind kind;
	int *slot, q;

	if (r->stopped)
		return EVAL_STOP;
	slot = opt_imap_get(&r->seen_map, o);
	if (slot) {
		*ret_cost = r->seen[*slot].cost;
		return r->seen[*slot].kind;
	}
	if (opt_replay_dominated(r, c)) {
		q = remember(r, c, o, EVAL_INFEASIBLE, 0, false);
		if (q < 0) {
			opt_replay_stop_error(r, q);
			return EVAL_STOP;
		}
		r->inferred++;
		return EVAL_INFEASIBLE;
	}
	slot = opt_imap_get(&r->hist_map, o);
	e = slot ? &r->hist[*slot] : NULL;
	if (!e && opt_replay_predicted_infeasible(r, c)) {
		/* the pre-flight: never deployed */
		q = remember(r, c, o, EVAL_INFEASIBLE, 0, false);
		if (q < 0) {
			opt_replay_stop_error(r, q);
			return EVAL_STOP;
		}
		r->inferred++;
		r->predicted++;
		return EVAL_INFEASIBLE;
	}
	if (!e || (!e->decided && e->failures < r->set->max_attempts)) {
		if (!opt_replay_budget_left(r))
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
	q = remember(r, c, o, kind, e->cost, true);
	if (q >= 0 && kind == EVAL_INFEASIBLE && e->decided)
		q = opt_replay_add_oom(r, c, e->cause, e->suggested_len);
	if (kind != EVAL_FAILED)
		opt_replay_near_revealed(r, c, kind != EVAL_INFEASIBLE);
	if (q < 0) {
		opt_replay_stop_error(r, q);
		return EVAL_STOP;
	}
	r->evaluated++;
	r->new_point = true;
	if (kind == EVAL_MEASURED) {
		size_t k = opt_replay_combo_of(r, c);

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
 * re-probe moved a mean (in reveal order, as opt_replay_evaluate() keeps them). */
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
		k = opt_replay_combo_of(r, &v->config);
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
bool opt_replay_reprobe(struct replay *r, const struct opt_config *c)
{
	int *slot = opt_imap_get(&r->seen_map, opt_config_ordinal(r->space, c));
	const struct hist_entry *e;
	struct revealed *v;
	unsigned j;

	if (r->stopped || !slot)
		return false;
	v = &r->seen[*slot];
	slot = opt_imap_get(&r->hist_map, opt_config_ordinal(r->space, c));
	if (v->kind != EVAL_MEASURED || !slot)
		return false;
	e = &r->hist[*slot];
	j = v->reprobes;
	if (j >= REPROBES_MAX)
		return false;
	if (j >= e->n_reprobes) {
		if (!opt_replay_budget_left(r))
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

/* Allowed configurations the pre-flight rules out that were never deployed. */
static unsigned count_predicted(const struct replay *r)
{
	unsigned n = 0;

	if (!r->set->preflight)
		return 0;
	for (uint64_t o = 0; o < r->space->n_grid; o++) {
		struct opt_config c;

		opt_config_from_ordinal(r->space, o, &c);
		n += opt_space_allowed(r->space, &c) && !opt_imap_get(&r->hist_map, o) &&
		     opt_replay_predicted_infeasible(r, &c);
	}
	return n;
}

/* The history the replay reads: the told trials, then the pending ones as
 * if told with their stand-in costs. */
static int merge_pending(const struct opt_history *history, const struct opt_trial *pending, size_t n_pending,
			 struct opt_history *ret, struct error *err)
{
	opt_history_init(ret);
	for (size_t i = 0; i < history->n + n_pending; i++) {
		const struct opt_trial *t = i < history->n ? &history->trials[i] : &pending[i - history->n];
		int q = opt_history_add(ret, t);

		if (q < 0) {
			opt_history_done(ret);
			if (q == -EINVAL)
				return error_set(err, q, "pending trial %zu: a stand-in cost must be finite and > 0",
						 i - history->n);
			return error_set(err, q, "out of memory");
		}
	}
	return 0;
}

int opt_next_pending(const struct opt_space *space, const struct opt_settings *settings,
		     const struct opt_history *history, const struct opt_trial *pending, size_t n_pending,
		     struct opt_candidate *ret, struct error *err)
{
	struct opt_candidate cand = { 0 };
	struct opt_history all;
	struct replay r;
	int q;

	if (settings->max_attempts < 1 || !(settings->promising >= 0) || !(settings->screen_level >= 0) ||
	    !(settings->screen_level <= 1))
		return error_set(err, -EINVAL, "optimizer settings out of range");
	if (settings->phase_start > history->n)
		return error_set(err, -EINVAL, "search phase starts after trial %zu of a history of %zu",
				 settings->phase_start, history->n);
	for (size_t i = 0; i < n_pending; i++)
		if (pending[i].outcome != OPT_OUTCOME_MEASURED)
			return error_set(err, -EINVAL, "pending trial %zu: it stands in as measured", i);
	q = merge_pending(history, pending, n_pending, &all, err);
	if (q < 0)
		return q;
	q = replay_init(&r, space, settings, &all, err);
	if (q >= 0) {
		if (settings->phase_start > 0) {
			opt_replay_prime(&r, &all, settings->phase_start);
			opt_replay_cover(&r, NULL);
		} else
			opt_replay_screen(&r);
		opt_replay_search(&r);
		q = r.error;
		if (q < 0)
			error_set(err, q, "optimizer replay failed");
	}
	cand.evaluated = r.evaluated;
	cand.inferred = r.inferred;
	cand.predicted = q >= 0 ? count_predicted(&r) : 0;
	/* the answer is what was measured, never a stand-in */
	opt_best(space, history, &cand.best, &cand.runner_up);
	if (q >= 0 && r.stopped && !r.budget) {
		cand.ask = r.reprobe ? OPT_ASK_CONFIRM : OPT_ASK_TRIAL;
		cand.phase = r.phase;
		cand.config = r.candidate;
		cand.attempt = r.attempt;
	} else if (q >= 0) {
		const struct opt_result *top[2] = { &cand.best, &cand.runner_up };
		unsigned total;

		cand.reason = r.budget                   ? OPT_DONE_BUDGET
			      : opt_replay_exhausted(&r) ? OPT_DONE_EXHAUSTED
							 : OPT_DONE_CONVERGED;
		cand.ask = OPT_ASK_DONE;
		cand.phase = OPT_PHASE_DONE;
		/* Confirm the top two by mean cost, within max_trials (trials in
		 * flight count); bounded, since a noisy re-probe may reorder them
		 * more than once. */
		for (size_t i = 0;
		     i < 2 && cand.ask == OPT_ASK_DONE && (settings->max_trials == 0 || all.n < settings->max_trials);
		     i++)
			if (top[i]->valid && confirms_of(&all, &top[i]->config, &total) < settings->confirm_probes &&
			    total - MIN(total, r.reprobes) < settings->confirm_probes * 4) {
				cand.ask = OPT_ASK_CONFIRM;
				cand.phase = OPT_PHASE_CONFIRM;
				cand.config = top[i]->config;
				cand.attempt = 1;
			}
	}
	replay_done(&r);
	opt_history_done(&all);
	if (q < 0)
		return q;
	*ret = cand;
	return 0;
}

int opt_next(const struct opt_space *space, const struct opt_settings *settings, const struct opt_history *history,
	     struct opt_candidate *ret, struct error *err)
{
	return opt_next_pending(space, settings, history, NULL, 0, ret, err);
}

double opt_stand_in(const struct opt_space *space, const struct opt_history *history, const struct opt_config *config,
		    bool confirm)
{
	struct opt_result best, mine;

	if (confirm) {
		result_of(space, history, config, &mine);
		if (mine.valid)
			return mine.cost;
	}
	opt_best(space, history, &best, NULL);
	return best.valid ? best.cost * (1 + OPT_LIAR_MARGIN) : 1.0;
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

const char *opt_oom_cause_to_string(enum opt_oom_cause c)
{
	static const char *const names[_OPT_OOM_CAUSE_MAX] = { "unknown", "weights", "kv_cache", "cache_blocks" };

	return (unsigned)c < _OPT_OOM_CAUSE_MAX ? names[c] : "?";
}
