/* opt-search.c — the search strategy a replay walks (opt.c holds the replay).
 *
 * Screening (every categorical combination probed at one ordinal point),
 * the local check on the grid around a combination's best, and the
 * restarted SBPLX runs that NLopt drives over [0,1]^D, all asking the
 * replay's oracle (opt_replay_evaluate, opt_replay_reprobe) for costs.
 * Here too the objective NLopt minimises: log(cost), or PENALTY plus a
 * small pull towards feasible territory for a configuration without a
 * cost. Nothing here reads the history except through the oracle, which is
 * what keeps a replay on the path the uninterrupted search walked. */
#include <errno.h>
#include <math.h>
#include <nlopt.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "opt-internal.h"
#include "opt.h"

#define PENALTY       100.0
#define RUN_MAXEVAL   400
#define RUNS_MAX      10000
#define SCREEN_LEVELS 3
/* The local check walks on while a cost stays within this of the best: two
 * noisy measurements of equal configurations differ by a few percent. */
#define LOCAL_TOLERANCE 0.05
/* Combinations whose best is within this of the leader's take turns with it. */
#define CONTENDER 0.20
/* A later search phase goes on in the combinations this close to the best. */
#define PHASE_TOLERANCE 0.10

/* Sum of the normalised coordinates of the memory-monotone knobs. */
static double memory_load(const struct replay *r, const struct opt_config *c)
{
	double s = 0;

	for (size_t i = 0; i < r->space->n_knobs; i++)
		if (r->space->knobs[i].memory_monotone)
			s += opt_space_normalise(r->space, i, c->idx[i]);
	return s;
}

/* The objective NLopt sees for one configuration. */
static double objective_of(struct replay *r, const struct opt_config *c)
{
	double cost = 0;

	if (!opt_space_allowed(r->space, c))
		return 2 * PENALTY + opt_space_violation(r->space, c);
	switch (opt_replay_evaluate(r, c, &cost)) {
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

/* One SBPLX run over the ordinal knobs of `start`'s combination; `run`
 * numbers it (with the seed, it sets the initial simplex steps). */
static int run_sbplx(struct replay *r, const struct opt_config *start, uint64_t run)
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
		step[i] = MIN(0.5, MAX(0.25, g)) * (0.75 + 0.5 * opt_seed_unit(r->set->seed, run, i));
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

/* Whether c is known not to start without deploying it: revealed so, ruled
 * out by an out-of-memory result, or predicted by the pre-flight. */
static bool ruled_out(const struct replay *r, const struct opt_config *c)
{
	int *slot = opt_imap_get(&r->seen_map, opt_config_ordinal(r->space, c));

	if (slot)
		return r->seen[*slot].kind == EVAL_INFEASIBLE;
	return opt_replay_dominated(r, c) || opt_replay_predicted_infeasible(r, c);
}

/* The allowed configuration of combination k nearest (in normalised grid
 * coordinates) to `level` on every ordinal knob that is not known to fail
 * to start; -ENOENT when none. */
static int screen_point(const struct replay *r, size_t k, double level, struct opt_config *ret)
{
	const struct opt_space *s = r->space;
	double full[OPT_KNOBS_MAX] = { 0 }, best_d = INFINITY;
	struct opt_config base, c, best = { 0 };
	uint64_t n_sub = 1;

	opt_replay_combo_base(r, k, &base);
	for (size_t i = 0; i < s->n_knobs; i++)
		full[i] = s->knobs[i].categorical ? opt_space_normalise(s, i, base.idx[i]) : level;
	opt_space_snap(s, full, &c);
	if (opt_space_allowed(s, &c) && !ruled_out(r, &c)) {
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
		if (d < best_d && opt_space_allowed(s, &c) && !ruled_out(r, &c)) {
			best_d = d;
			best = c;
		}
	}
	if (!isfinite(best_d))
		return -ENOENT;
	*ret = best;
	return 0;
}

/* Whether some configuration deployed so far holds value v of knob d. */
static bool level_covered(const struct replay *r, size_t d, unsigned v)
{
	for (size_t i = 0; i < r->n_seen; i++)
		if (r->seen[i].told && r->seen[i].config.idx[d] == v)
			return true;
	return false;
}

/* The study's baseline, when it is a configuration of this space that may run. */
static const struct opt_config *usable_baseline(const struct replay *r)
{
	const struct opt_config *b = r->set->baseline;

	if (!b)
		return NULL;
	for (size_t i = 0; i < OPT_KNOBS_MAX; i++)
		if (i < r->space->n_knobs ? b->idx[i] >= r->space->knobs[i].n_values : b->idx[i] != 0)
			return NULL;
	return opt_space_allowed(r->space, b) && !ruled_out(r, b) ? b : NULL;
}

/* Where value v of knob d is measured: the baseline when it holds v, else
 * the allowed configuration with v that is not known to fail to start and
 * lies nearest the centre (the best so far; before anything was measured,
 * the screen level on every ordinal knob and the first revealed
 * configuration's categorical values) — the other ordinal knobs by their
 * normalised distance, each categorical value apart counting more than the
 * whole ordinal range. -ENOENT when there is none. */
static int cover_point(const struct replay *r, size_t d, unsigned v, struct opt_config *ret)
{
	const struct opt_space *s = r->space;
	const struct opt_config *b = usable_baseline(r);
	double centre[OPT_KNOBS_MAX] = { 0 }, best_d = INFINITY;
	struct opt_config base = { 0 }, best = { 0 };

	if (b && b->idx[d] == v) {
		*ret = *b;
		return 0;
	}
	if (isfinite(r->best))
		base = r->best_cfg;
	else if (r->n_seen > 0)
		base = r->seen[0].config;
	for (size_t i = 0; i < s->n_knobs; i++)
		centre[i] = isfinite(r->best) || s->knobs[i].categorical ? opt_space_normalise(s, i, base.idx[i])
									 : r->set->screen_level;
	for (uint64_t o = 0; o < s->n_grid; o++) {
		struct opt_config c;
		double dist = 0;

		opt_config_from_ordinal(s, o, &c);
		if (c.idx[d] != v)
			continue;
		for (size_t i = 0; i < s->n_knobs; i++)
			if (s->knobs[i].categorical)
				dist += c.idx[i] != base.idx[i] ? (double)s->n_knobs : 0;
			else if (i != d)
				dist += pow(opt_space_normalise(s, i, c.idx[i]) - centre[i], 2);
		if (dist < best_d && opt_space_allowed(s, &c) && !ruled_out(r, &c)) {
			best_d = dist;
			best = c;
		}
	}
	if (!isfinite(best_d))
		return -ENOENT;
	*ret = best;
	return 0;
}

void opt_replay_cover(struct replay *r, bool *combo_measured)
{
	const struct opt_space *s = r->space;

	for (size_t i = 0; i < r->n_dim && !r->stopped; i++) {
		size_t d = r->dim[i], n = s->knobs[d].n_values;
		unsigned from;

		if (n > OPT_COVER_LEVELS)
			continue;
		/* nearest the centre's value first, the lower of two as near */
		from = isfinite(r->best) ? r->best_cfg.idx[d] : 0;
		for (unsigned step = 0; step < 2 * n && !r->stopped; step++) {
			int v = step % 2 == 0 ? (int)from - (int)(step / 2) : (int)from + (int)(step / 2) + 1;
			struct opt_config c;
			double cost;

			if (v < 0 || v >= (int)n || level_covered(r, d, (unsigned)v) ||
			    cover_point(r, d, (unsigned)v, &c) < 0)
				continue;
			if (opt_replay_evaluate(r, &c, &cost) == EVAL_MEASURED && combo_measured)
				combo_measured[opt_replay_combo_of(r, &c)] = true;
		}
	}
}

/* Screening in passes: every combination at the screen level first; those
 * that did not run there at the smallest point (an out-of-memory result
 * there rules the whole combination out in one deployment, as when the
 * weights do not fit), then at half the screen level (the smallest point
 * alone would make a combination look worse than it is). Early deployments
 * so cover all combinations. */
void opt_replay_screen(struct replay *r)
{
	const double levels[SCREEN_LEVELS] = { r->set->screen_level, 0.0, r->set->screen_level * 0.5 };
	bool *first = calloc(r->n_combos, sizeof(bool)); /* screened at the first level */
	/* the seed picks which value of the most significant categorical knob
	 * (the quantization) is screened first: a rotation by whole groups,
	 * so the restart-aware order keeps its switches */
	size_t group = r->n_cat > 0 ? r->n_combos / r->space->knobs[r->cat[0]].n_values : 1;
	size_t rot = group * (size_t)(opt_seed_unit(r->set->seed, 0, 0) * (double)(r->n_combos / group));

	if (!first) {
		opt_replay_stop_error(r, -ENOMEM);
		return;
	}
	r->phase = OPT_PHASE_SCREEN;
	for (size_t l = 0; l < SCREEN_LEVELS && !r->stopped; l++) {
		if (l == 1) {
			/* every value of the small knobs once (opt.h, "Levels"); a
			 * combination measured there is screened */
			bool *covered = calloc(r->n_combos, sizeof(bool));

			if (!covered) {
				opt_replay_stop_error(r, -ENOMEM);
				break;
			}
			opt_replay_cover(r, covered);
			for (size_t k = 0; k < r->n_combos; k++)
				if (covered[k] && !isfinite(r->combo_screen[k])) {
					r->combo_screen[k] = r->combo_best[k];
					first[k] = true;
				}
			free(covered);
		}
		for (size_t j = 0; j < r->n_combos && !r->stopped; j++) {
			size_t k = (j + rot) % r->n_combos;
			struct opt_config c;
			double cost;

			if (r->combo_done[k] || (l < 2 ? isfinite(r->combo_screen[k]) : first[k]))
				continue;
			if (screen_point(r, k, levels[l], &c) < 0) {
				r->combo_done[k] = true;
				continue;
			}
			if (opt_replay_evaluate(r, &c, &cost) == EVAL_MEASURED) {
				r->combo_screen[k] = MIN(r->combo_screen[k], cost);
				first[k] = l == 0;
			}
		}
	}
	free(first);
}

/* The new bound of a widened knob, at the best's other values, and along
 * each other ordinal knob from there: on a flat or noisy landscape the local
 * check, which moves only to better points, would not look there. */
static void phase_row(struct replay *r)
{
	const struct opt_space *s = r->space;
	int knob = r->set->phase_knob;
	struct opt_config c;
	double cost;

	if (knob < 0 || (size_t)knob >= s->n_knobs || !isfinite(r->best) || s->knobs[knob].categorical)
		return;
	c = r->best_cfg;
	c.idx[knob] = (uint16_t)(r->set->phase_upper ? s->knobs[knob].n_values - 1 : 0);
	for (size_t i = 0; i < r->n_dim && !r->stopped; i++) {
		size_t d = r->dim[i];

		for (size_t v = 0; v < s->knobs[d].n_values && !r->stopped; v++) {
			struct opt_config x = c;

			x.idx[d] = (uint16_t)v;
			if ((int)d != knob && opt_space_allowed(s, &x))
				(void)opt_replay_evaluate(r, &x, &cost);
		}
	}
	if (!r->stopped && opt_space_allowed(s, &c))
		(void)opt_replay_evaluate(r, &c, &cost);
}

void opt_replay_prime(struct replay *r, const struct opt_history *h, size_t n)
{
	r->phase = OPT_PHASE_SEARCH;
	for (size_t i = 0; i < n && !r->stopped; i++) {
		const struct opt_trial *t = &h->trials[i];
		size_t k = opt_replay_combo_of(r, &t->config);
		double cost;

		if (!opt_space_allowed(r->space, &t->config))
			continue;
		if (t->confirm) {
			(void)opt_replay_reprobe(r, &t->config);
			continue;
		}
		if (t->outcome == OPT_OUTCOME_FAILED)
			continue; /* revealed once decided, by a later trial of the same configuration */
		if (opt_replay_evaluate(r, &t->config, &cost) == EVAL_MEASURED)
			r->combo_screen[k] = MIN(r->combo_screen[k], cost);
	}
	/* the widening matters where the search ended: a combination with
	 * nothing measured in earlier phases, or whose best is clearly worse
	 * than the overall best, stays as the earlier phases left it */
	for (size_t k = 0; k < r->n_combos; k++)
		if (!isfinite(r->combo_screen[k]) || r->combo_best[k] > r->best * (1 + PHASE_TOLERANCE))
			r->combo_done[k] = true;
	phase_row(r);
}

/* Where combination k's search starts: the ordinal values of the best
 * configuration so far (the batch knobs that suit one quantization/TP tend
 * to suit the others), unless that is ruled out; else its own best. */
static void run_start(const struct replay *r, size_t k, struct opt_config *ret)
{
	struct opt_config c = r->combo_best_cfg[k];

	if (r->combo_runs[k] == 0 && opt_replay_combo_of(r, &r->best_cfg) != k) {
		struct opt_config t = r->best_cfg;

		for (size_t i = 0; i < r->n_cat; i++)
			t.idx[r->cat[i]] = c.idx[r->cat[i]];
		if (opt_space_allowed(r->space, &t) && !opt_replay_dominated(r, &t))
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
static bool local_check(struct replay *r, size_t k)
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
					if (opt_replay_evaluate(r, &c, &cost) != EVAL_MEASURED)
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
				moved = opt_replay_evaluate(r, &c, &cost) == EVAL_MEASURED && cost < centre_cost;
			}
		}
		/* a move ends the turn: close contenders take theirs between moves */
		if (moved)
			return true;
		/* Converged on the centre: measure it again once before
		 * believing it (its cost may be a lucky draw). */
		{
			int *slot = opt_imap_get(&r->seen_map, opt_config_ordinal(s, &centre));

			size_t v = slot ? (size_t)*slot : SIZE_MAX;

			if (r->set->confirm_probes == 0 || v == SIZE_MAX || r->seen[v].reprobes > 0)
				return false;
			(void)opt_replay_reprobe(r, &centre);
			if (!r->stopped && r->seen[v].reprobes == 0)
				return false; /* cannot happen: a revealed centre can be re-probed */
		}
	}
	return false;
}

void opt_replay_search(struct replay *r)
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
		 * the one with the lowest cost so far leads. Contenders close
		 * to it take turns with it (the fewest turns first), so that
		 * each has its batch knobs explored before a long refinement
		 * of the leader spends the budget. */
		for (size_t k = 0; k < r->n_combos; k++)
			if (!r->combo_done[k] && isfinite(r->combo_best[k]) &&
			    r->combo_screen[k] <= screen_best * (1 + r->set->promising) &&
			    (pick == SIZE_MAX || r->combo_best[k] < r->combo_best[pick]))
				pick = k;
		if (pick == SIZE_MAX)
			return;
		for (size_t k = 0, lead = pick; k < r->n_combos; k++)
			if (k != pick && !r->combo_done[k] && isfinite(r->combo_best[k]) &&
			    r->combo_screen[k] <= screen_best * (1 + r->set->promising) &&
			    r->combo_best[k] <= r->combo_best[lead] * (1 + CONTENDER) &&
			    (r->combo_turns[k] < r->combo_turns[pick] ||
			     (r->combo_turns[k] == r->combo_turns[pick] && r->combo_best[k] < r->combo_best[pick])))
				pick = k;
		r->combo_turns[pick]++;
		if (r->n_dim == 0) {
			r->combo_done[pick] = true;
			continue;
		}
		r->new_point = false;
		need_local = !r->combo_checked[pick] || memcmp(&r->combo_checked_cfg[pick], &r->combo_best_cfg[pick],
							       sizeof(struct opt_config)) != 0;
		if (need_local) {
			struct opt_config before = r->combo_best_cfg[pick];

			if (r->combo_runs[pick] == 0) {
				double cost;

				run_start(r, pick, &start);
				r->combo_runs[pick]++;
				(void)opt_replay_evaluate(r, &start, &cost);
				if (r->stopped)
					return;
			}
			if (local_check(r, pick))
				continue; /* moved: the check goes on at its next turn */
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
			if (run_sbplx(r, &start, (uint64_t)pick * 1000 + r->combo_runs[pick]) < 0) {
				opt_replay_stop_error(r, -EIO);
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
bool opt_replay_exhausted(const struct replay *r)
{
	for (uint64_t o = 0; o < r->space->n_grid; o++) {
		struct opt_config c;

		opt_config_from_ordinal(r->space, o, &c);
		if (opt_space_allowed(r->space, &c) && !opt_imap_get(&r->seen_map, o) && !opt_replay_dominated(r, &c))
			return false;
	}
	return true;
}
