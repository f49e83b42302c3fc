/* twin-search.c — the model search: goodput's default strategy.
 *
 * Every ask is recomputed from the history (and the trials in flight), as
 * the replayed NLopt search and twin_next are, so a restarted runner asks
 * the same things. What an expert inference engineer does by hand, in five
 * pieces:
 *
 * 1. The prior. goodput-sim's engine model of the study's model and GPU
 *    predicts every configuration's max SLA rate and cost in virtual time,
 *    with the requests the probe sends (the workload's own sample: a
 *    smaller sample misranks chunk sizes under a tight TPOT tail, where the
 *    interleaving of prefill chunks with decodes sets the SLA). Before the
 *    first deployment this ranks the space; what the model cannot start is
 *    never deployed, and neither is what the memory pre-flight or an
 *    out-of-memory start-up rules out. As load points arrive the model's
 *    constants are fitted to them (twin_calibrate) at checkpoints of the
 *    history (after 1, 2, 3, 4, 6, 8, 12, 16, ... configurations measured),
 *    so a fit depends on a fixed prefix of the history and replays.
 * 2. The residual. log(measured / predicted) of every measured configuration
 *    is described by a Gaussian process over the knobs (optimizer/gp.h),
 *    its hyperparameters chosen by marginal likelihood and its noise
 *    estimated from the repeated measurements. Prior + residual give each
 *    untested configuration a mean and a standard deviation; a server the
 *    model describes badly has large residuals, so a large signal variance,
 *    so wide intervals: the search widens, it never stops on a model it
 *    cannot trust.
 * 3. The choice. The next deployment maximises expected improvement over
 *    the incumbent (the measured configuration with the lowest posterior
 *    mean). Several at once (free GPU slots, trials in flight): each chosen
 *    configuration is added as a fantasy observation at its posterior mean
 *    (the kriging believer) before the next is chosen, so a batch spreads.
 *    Noise: while the incumbent and its closest rival overlap (their means
 *    within twice their joint standard deviation) and nothing untested
 *    promises more than a quarter of the noise, the one measured less is
 *    measured again — never the same pair twice in a row, never a
 *    configuration more than REPROBE_MAX times. Side by side a re-probe is
 *    weighed as one at a time would weigh it (the expected improvement of
 *    the told measurements, not of the batch's fantasies), at most one an
 *    ask, never of the incumbent (the stop measures it again alone).
 * 4. The stop. Once the probability that any untested configuration beats
 *    the incumbent by more than the measurement noise (of the incumbent's
 *    mean cost: σ / √n, at least 1 %) is below stop_probability (5 %), and
 *    at least STOP_MIN configurations are measured, the search is over: the answer is measured
 *    again (confirm_probes), the message says how many deployments of the
 *    budget that saved. Then the answer (the lowest mean measured) races
 *    its closest rival by measured mean while the two overlap (the noise
 *    at least the settings'): the one measured less is measured again, up
 *    to RACE_MEASUREMENTS times each, since the lowest of several noisy
 *    means is biased low. With both serving shapes in the space (deploy.shape
 *    "both") the answer also says by how much its shape won: when nothing
 *    of the other shape was tried, the other shape's best as the model
 *    predicts it is measured once before the search ends. A budget that ends first says what is left: that
 *    probability and the largest expected improvement.
 *    Side by side (several asked for, or trials in flight) the stop is
 *    judged on the told measurements over what is neither measured nor in
 *    flight; once it holds the answer's confirmation is proposed at once —
 *    measured alone on the host, it waits for the trials in flight — and
 *    the search is over for good: a confirmation alone in the history or in
 *    flight (since the last widened range, plain.phase_start) says so, and
 *    from then on nothing new starts: should a trial in flight or the
 *    confirmation move the answer, the new answer is measured alone, then
 *    done. The rivals are not measured again beside it (one at a time they
 *    are, after the answer's confirmation): each would delay the answer by
 *    a trial on a landscape of near ties, and one that moved the answer
 *    would need another measurement alone.
 * 5. Ranges (search.extend_edges, settings.edges). One at a time, an answer
 *    not confirmed yet on the top of a range the calibrated model predicts
 *    a gain beyond (edge_gain) ends the search in that range at once: its
 *    confirmation is asked for, where the caller widens the range instead.
 *    The range's interior, which the model ranks below the next range, is
 *    not walked first; should the caller not widen, the confirmation is
 *    measured and the search goes on in the range.
 *
 * Knowledge as constraints (twin_search_rules, with the trial each one
 * read): a max_num_seqs at least twice the concurrency measured at the SLA
 * rate cannot bind — once a measured max_num_seqs that hardly binds (1.5 ×
 * the concurrency it carried) is known, the configurations with the same
 * other knobs and a max_num_seqs at least as large and at least twice that
 * concurrency equal it, and are not deployed; one at a quarter of it or less
 * cannot carry that rate and is not deployed while the model also predicts
 * it worse than the answer; a configuration the calibrated model predicts
 * never meets the SLA (its step times too long for the TPOT bound at any
 * rate) is left untested unless the residual says the model is wrong by
 * that much. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "macro.h"
#include "twin-internal.h"

#define REPROBE_MAX 4
/* the prior mean of a configuration the model predicts never meets the SLA: this factor above the best */
#define NEVER_MET_FACTOR 3.0
#define BIND_FACTOR      2.0 /* max_num_seqs ≥ this × the measured concurrency cannot bind */
#define STARVE_FACTOR    4.0 /* max_num_seqs ≤ the measured concurrency / this cannot carry the rate */
/* the stop needs this many configurations measured (the answer and its
 * neighbours), and the residual's spread stays wide until then */
#define EVIDENCE_MIN 5
#define STOP_MIN     3
/* the finest difference the stop rule resolves (log units) */
#define STOP_RESOLUTION 0.01
/* a fit is kept while it describes new measurements within this share of a new fit's error, plus the floor */
#define KEEP_FIT_SLACK 0.1
#define KEEP_FIT_FLOOR 0.005
/* the stop's probability may count this share of itself from lower bounds (never an earlier stop) */
#define STOP_TAIL 0.1
/* the search over, a rival that overlaps the answer is measured up to this often */
#define RIVAL_MEASUREMENTS 2
/* the search over, the answer and its closest rival race up to this many measurements each */
#define RACE_MEASUREMENTS 3
/* the gain the model must predict beyond a range's top to end the search in the range (study_edge_model_gain's) */
#define EDGE_GAIN 0.01

void twin_search_settings_init(struct twin_search_settings *s)
{
	*s = (struct twin_search_settings){
		.noise = 0.03,
		.stop_probability = 0.05,
	};
	opt_settings_init(&s->plain);
	twin_fit_options_init(&s->fit);
}

/* What the history says about one configuration. */
struct obs {
	unsigned n;        /* measured cost values */
	double sum, sumsq; /* of log cost */
	bool tried;        /* decided: measured, infeasible, SLA never met, or failed max_attempts times */
	bool measured;
	unsigned failures;
	double concurrency; /* mean requests in flight at its max SLA rate (0: unknown) */
	size_t first_trial; /* history index of its first trial */
	size_t conc_trial;  /* history index of the trial the concurrency came from */
};

struct search {
	struct twin *t;
	const struct twin_search_settings *s;
	const struct twin_history *h;
	size_t n_configs, dim;
	struct obs *obs;
	uint8_t *rule;      /* per config: enum twin_rule_kind of why it is not a candidate (0: it is) */
	size_t *rule_trial; /* the trial the rule read (SIZE_MAX: none) */
	size_t *rule_ref;   /* the configuration a "cannot bind" one equals */
	double *prior;      /* per config: log predicted cost (the model's), NAN: the model cannot start it */
	bool *exact;        /* per config: prior holds the prediction (else the lower bound of the cost) */
	size_t n_exact;     /* predictions made */
	double best_prediction, never_met_log;
	bool *never_met;  /* the model predicts it never meets the SLA */
	double *z;        /* n_configs × dim GP inputs */
	double noise_var; /* per measurement, log units² */
	unsigned measured_configs;
	struct twin_fit fit;
	bool calibrated;
	struct sim_profile profile;
	size_t prefix; /* trials the calibration used */
};

static void search_done(struct search *x)
{
	free(x->obs);
	free(x->rule);
	free(x->rule_trial);
	free(x->rule_ref);
	free(x->prior);
	free(x->exact);
	free(x->never_met);
	free(x->z);
}

static double knob_number(const struct twin *t, size_t i, int knob)
{
	return knob >= 0 ? t->space->knobs[knob].numbers[t->configs[i].idx[knob]] : 0;
}

/* The mean concurrency at a trial's max SLA rate, by Little's law from its
 * point at that rate: rate × (TTFT + TPOT × (output tokens − 1)). 0 when
 * it has no such point. */
static double trial_concurrency(const struct twin *t, const struct twin_trial *tr)
{
	const struct twin_point *at = NULL;
	double out = t->setup.workload.output.mean > 1 ? t->setup.workload.output.mean : 1;

	if (tr->trial.outcome != OPT_OUTCOME_MEASURED || !(tr->max_rate > 0))
		return 0;
	for (size_t p = 0; p < tr->n_points; p++)
		if (isfinite(tr->points[p].rate) &&
		    (!at || fabs(tr->points[p].rate - tr->max_rate) < fabs(at->rate - tr->max_rate)))
			at = &tr->points[p];
	if (!at || !(at->fig[TWIN_FIG_TTFT_MEAN] > 0))
		return 0;
	return tr->max_rate * (at->fig[TWIN_FIG_TTFT_MEAN] + at->fig[TWIN_FIG_TPOT_MEAN] * (out - 1)) / 1000;
}

static int read_history(struct search *x, struct error *err)
{
	const struct twin_history *h = x->h;
	struct twin *t = x->t;

	for (size_t k = 0; k < h->n; k++) {
		const struct twin_trial *tr = &h->trials[k];
		ssize_t i = twin_index(t, &tr->trial.config);
		struct obs *o;

		if (i < 0)
			return error_set(err, -EINVAL, "model search: trial %zu: configuration not in the space",
					 k + 1);
		o = &x->obs[i];
		if (!o->tried && o->failures == 0 && o->n == 0)
			o->first_trial = k;
		switch (tr->trial.outcome) {
		case OPT_OUTCOME_MEASURED: {
			double c = trial_concurrency(t, tr), l = log(tr->trial.cost);

			o->tried = o->measured = true;
			o->n++;
			o->sum += l;
			o->sumsq += l * l;
			if (c > o->concurrency) {
				o->concurrency = c;
				o->conc_trial = k;
			}
			break;
		}
		case OPT_OUTCOME_FAILED:
			if (++o->failures >= x->s->plain.max_attempts)
				o->tried = true;
			break;
		default:
			o->tried = true;
			break;
		}
	}
	for (size_t i = 0; i < x->n_configs; i++)
		x->measured_configs += x->obs[i].measured;
	return 0;
}

/* The measurement noise (log sd) pooled over repeated measurements, with
 * the settings' value as a prior worth two degrees of freedom. */
static void estimate_noise(struct search *x)
{
	double ss = 2 * x->s->noise * x->s->noise, dof = 2;

	for (size_t i = 0; i < x->n_configs; i++) {
		const struct obs *o = &x->obs[i];

		if (o->n >= 2) {
			ss += MAX(o->sumsq - o->sum * o->sum / o->n, 0.0);
			dof += o->n - 1;
		}
	}
	x->noise_var = MAX(ss / dof, 1e-6);
}

/* The calibration checkpoints: the number of measured configurations after
 * which the model is fitted again. */
static bool checkpoint(unsigned m)
{
	static const unsigned at[] = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128 };

	for (size_t j = 0; j < ELEMENTSOF(at); j++)
		if (at[j] == m)
			return true;
	return m > 128 && m % 64 == 0;
}

/* Fits the model at every checkpoint of the history, each from the
 * published constants (a fit started from the one before, without
 * restarts, stuck in its basin: on the batch-squared engine of
 * bench/optimizer one seed in 7 missed 2 %), keeping the earlier
 * constants while they describe the longer prefix about as well. The
 * fits are cached (and carried back from a forked ask), so an ask fits
 * at most the newest prefix. */
static int calibrate(struct search *x, struct error *err)
{
	const struct twin_history *h = x->h;
	_cleanup_(freep) bool *seen = calloc(MAX(x->n_configs, (size_t)1), sizeof(bool));
	_cleanup_(freep) size_t *prefixes = calloc(h->n + 1, sizeof(size_t));
	size_t n_prefixes = 0;
	unsigned m = 0;
	int r;

	if (!seen || !prefixes)
		return -ENOMEM;
	for (size_t k = 0; k < h->n; k++) {
		ssize_t i = twin_index(x->t, &h->trials[k].trial.config);

		if (i >= 0 && h->trials[k].trial.outcome == OPT_OUTCOME_MEASURED && h->trials[k].n_points > 0 &&
		    !seen[i]) {
			seen[i] = true;
			if (checkpoint(++m))
				prefixes[n_prefixes++] = k + 1;
		}
	}
	x->profile = x->t->base;
	x->prefix = 0;
	for (size_t j = 0; j < n_prefixes; j++) {
		struct twin_fit_options o = x->s->fit;
		struct twin_fit f, kept;

		r = twin_calibrate(x->t, h->trials, prefixes[j], &x->t->base, &o, &f, err);
		if (r == -ENODATA)
			continue;
		if (r < 0)
			return r;
		/* the constants move only when the new measurements say they
		 * must: the earlier fit within a tenth of the new one's error
		 * (and half a percent) stays, and with it every prediction made
		 * with it (the residual takes up the rest) */
		if (x->calibrated) {
			r = twin_evaluate(x->t, h->trials, prefixes[j], &x->fit.profile, &o, &kept, err);
			if (r < 0)
				return r;
			if (kept.error <= f.error * (1 + KEEP_FIT_SLACK) + KEEP_FIT_FLOOR) {
				kept.fitted = x->fit.fitted;
				f = kept;
			}
		}
		x->calibrated = true;
		x->fit = f;
		x->prefix = prefixes[j];
	}
	if (x->calibrated)
		x->profile = x->fit.profile;
	return 0;
}

static bool pre_excluded(const struct search *x, size_t i)
{
	const struct opt_preflight *p = x->s->plain.preflight;

	if (!twin_startable(x->t, i))
		return true;
	return p && p->fit && p->fit(x->t->space, &x->t->configs[i], p->userdata) == OPT_FIT_NO;
}

/* The model's prediction of configuration i as its prior (log cost), in
 * place of the lower bound it held: a configuration the model predicts
 * never meets the SLA gets NEVER_MET_FACTOR × the best prediction (never
 * less than its bound). */
static int ensure_prior(struct search *x, size_t i, struct error *err)
{
	struct twin_prediction pr;
	int r;

	if (x->exact[i] || isnan(x->prior[i]))
		return 0;
	r = twin_predict(x->t, &x->profile, &x->t->configs[i], &pr, err);
	if (r < 0)
		return r;
	x->exact[i] = true;
	x->n_exact++;
	if (pr.outcome == OPT_OUTCOME_MEASURED)
		x->prior[i] = log(pr.cost);
	else {
		x->never_met[i] = true;
		x->prior[i] = MAX(x->prior[i], x->never_met_log);
	}
	return 0;
}

/* The prior. Every configuration the model can start holds the lower
 * bound of its cost (one saturated run), and the model's prediction (a
 * rate search of several runs) only where a decision needs it: the best
 * prediction, by branch and bound over the bounds; every measured
 * configuration; and later what expected improvement or the stop rule
 * can still pick (ensure_prior). Which predictions are made depends only
 * on the history, never on what the twin's caches hold, so an ask is the
 * same with them or without. */
static int compute_prior(struct search *x, struct error *err)
{
	struct twin *t = x->t;
	struct twin_rank *rk;
	double best = INFINITY;
	_cleanup_(freep) size_t *order = NULL;
	size_t n = 0, predicted = 0;
	int r;

	r = twin_rank_lower_bounds(t, &x->profile, &rk, err);
	if (r < 0)
		return r;
	order = malloc(MAX(x->n_configs, (size_t)1) * sizeof(size_t));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < x->n_configs; i++)
		if (isfinite(rk->lb[i]))
			order[n++] = i;
	twin_sort_by(order, n, rk->lb);
	for (; predicted < n && rk->lb[order[predicted]] < best; predicted++) {
		struct twin_prediction pr;

		r = twin_predict(t, &x->profile, &t->configs[order[predicted]], &pr, err);
		if (r < 0)
			return r;
		if (pr.outcome == OPT_OUTCOME_MEASURED)
			best = MIN(best, pr.cost);
	}
	if (!isfinite(best))
		best = 1;
	x->best_prediction = best;
	x->never_met_log = log(best * NEVER_MET_FACTOR);
	for (size_t i = 0; i < x->n_configs; i++)
		x->prior[i] = isfinite(rk->lb[i]) && rk->lb[i] > 0 ? log(rk->lb[i]) : NAN;
	for (size_t k = 0; k < predicted; k++) {
		r = ensure_prior(x, order[k], err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < x->n_configs; i++)
		if (x->obs[i].measured) {
			r = ensure_prior(x, i, err);
			if (r < 0)
				return r;
		}
	return 0;
}

/* Knowledge as constraints, each with the trial it read. */
static int apply_rules(struct search *x, double best_log, struct error *err)
{
	struct twin *t = x->t;
	const struct opt_space *s = t->space;
	int mns = opt_space_knob_index(s, OPT_KNOB_MAX_NUM_SEQS);
	_cleanup_(freep) size_t *carried = malloc(MAX(x->measured_configs, 1u) * sizeof(size_t));
	size_t n_carried = 0;

	if (!carried)
		return -ENOMEM;
	/* the measured configurations with a concurrency at their SLA rate */
	for (size_t j = 0; j < x->n_configs && n_carried < x->measured_configs; j++)
		if (x->obs[j].measured && x->obs[j].concurrency > 0)
			carried[n_carried++] = j;
	for (size_t i = 0; i < x->n_configs; i++) {
		x->rule_trial[i] = SIZE_MAX;
		if (x->obs[i].tried)
			continue;
		if (pre_excluded(x, i)) {
			x->rule[i] = TWIN_RULE_MEMORY;
			continue;
		}
		for (size_t k = 0; k < x->h->n && !x->rule[i]; k++)
			if (opt_oom_rules_out(s, &x->h->trials[k].trial, &t->configs[i])) {
				x->rule[i] = TWIN_RULE_OUT_OF_MEMORY;
				x->rule_trial[i] = k;
			}
		if (x->rule[i] || mns < 0)
			continue;
		for (size_t c = 0; c < n_carried && !x->rule[i]; c++) {
			size_t j = carried[c];
			const struct obs *o = &x->obs[j];
			double v = knob_number(t, i, mns), w = knob_number(t, j, mns);
			bool same = true;

			for (size_t k = 0; k < s->n_knobs && same; k++)
				same = (int)k == mns || t->configs[i].idx[k] == t->configs[j].idx[k];
			/* w itself hardly binds (well above the concurrency it
			 * carried): every v from twice that concurrency on equals it */
			if (same && w >= 1.5 * o->concurrency && v >= MAX(w, BIND_FACTOR * o->concurrency)) {
				x->rule[i] = TWIN_RULE_CANNOT_BIND;
				x->rule_trial[i] = o->conc_trial;
				x->rule_ref[i] = j;
			}
			/* far below: across batch-chunk settings of the same
			 * precision and TP, while the model agrees it is worse */
			if (!x->rule[i] && v * STARVE_FACTOR <= o->concurrency && !isnan(x->prior[i])) {
				bool combo = true;
				int r;

				for (size_t k = 0; k < s->n_knobs && combo; k++)
					combo = !s->knobs[k].categorical ||
						t->configs[i].idx[k] == t->configs[j].idx[k];
				if (!combo)
					continue;
				/* the bound decides when it is above the answer already */
				if (x->prior[i] <= best_log) {
					r = ensure_prior(x, i, err);
					if (r < 0)
						return r;
				}
				if (x->prior[i] > best_log) {
					x->rule[i] = TWIN_RULE_STARVED;
					x->rule_trial[i] = o->conc_trial;
				}
			}
		}
	}
	return 0;
}

static void fill_z(struct search *x)
{
	const struct opt_space *s = x->t->space;

	for (size_t i = 0; i < x->n_configs; i++)
		for (size_t k = 0; k < x->dim; k++)
			x->z[i * x->dim + k] = s->knobs[k].categorical
						       ? (double)x->t->configs[i].idx[k]
						       : opt_space_normalise(s, k, x->t->configs[i].idx[k]);
}

/* The residual data: measured configurations with a prior, plus fantasies. */
struct gp_data {
	size_t n;
	size_t *cfg;
	double *x, *y, *noise;
};

static void gp_data_done(struct gp_data *d)
{
	free(d->cfg);
	free(d->x);
	free(d->y);
	free(d->noise);
}

static int gp_data_init(struct gp_data *d, const struct search *x, size_t extra)
{
	size_t cap = x->measured_configs + extra + 1;

	*d = (struct gp_data){ 0 };
	d->cfg = malloc(cap * sizeof(size_t));
	d->x = malloc(cap * x->dim * sizeof(double));
	d->y = malloc(cap * sizeof(double));
	d->noise = malloc(cap * sizeof(double));
	if (!d->cfg || !d->x || !d->y || !d->noise)
		return -ENOMEM;
	for (size_t i = 0; i < x->n_configs; i++) {
		const struct obs *o = &x->obs[i];

		if (!o->measured || isnan(x->prior[i]) || d->n >= OPT_GP_POINTS_MAX)
			continue;
		d->cfg[d->n] = i;
		memcpy(&d->x[d->n * x->dim], &x->z[i * x->dim], x->dim * sizeof(double));
		d->y[d->n] = o->sum / o->n - x->prior[i];
		d->noise[d->n] = x->noise_var / o->n;
		d->n++;
	}
	return 0;
}

static int gp_data_add(struct gp_data *d, const struct search *x, size_t i, double y, double noise)
{
	if (d->n >= OPT_GP_POINTS_MAX)
		return 0;
	d->cfg[d->n] = i;
	memcpy(&d->x[d->n * x->dim], &x->z[i * x->dim], x->dim * sizeof(double));
	d->y[d->n] = y;
	d->noise[d->n] = noise;
	d->n++;
	return 0;
}

/* The posterior of configuration i's log cost: prior + residual. */
static void posterior(const struct search *x, const struct opt_gp *gp, size_t i, double *ret_mean, double *ret_sd)
{
	double m, v;

	opt_gp_predict(gp, &x->z[i * x->dim], &m, &v);
	*ret_mean = x->prior[i] + m;
	*ret_sd = sqrt(v);
}

static int select_kernel(struct opt_gp *gp, const struct search *x, const struct gp_data *d)
{
	/* A few residuals cannot show that the model is good everywhere: below
	 * EVIDENCE_MIN measured configurations the residual keeps at least
	 * 5 % of prior spread, however small the residuals seen. */
	static const double signals[] = { 0.02, 0.05, 0.1, 0.2, 0.4 };
	size_t first = d->n < EVIDENCE_MIN ? 1 : 0;
	/* The probe's rate search brackets the max rate only to its
	 * tolerance, a prediction's to its own (rel_tol), and each reports
	 * the bracket's low end: where the true max rate lies in it is an
	 * error of that configuration alone. A bisection that stops once the
	 * bracket is within the tolerance leaves it between half and all of
	 * it wide, the max rate anywhere in it: σ ≈ 0.23 × the tolerance,
	 * the two brackets independent. (Half the probe's tolerance, as
	 * before, kept every untested near tie open: at the default 5 % the
	 * twelve landscapes of bench/optimizer walked their plateaus: runs of
	 * 5–25 deployments, 5–19 now, to the same answers.) */
	double rel = x->t->setup.rel_tol > 0 ? x->t->setup.rel_tol : 0.03;
	double tol = x->t->setup.probe_tol > 0 ? x->t->setup.probe_tol : rel;
	double nugget = MAX(0.01, 0.23 * sqrt(tol * tol + rel * rel));
	static const double ords[] = { 0.15, 0.3, 0.6, 1.2 };
	/* How far a residual carries to another quantization or TP: while no
	 * two measured configurations differ in a categorical knob the
	 * likelihood cannot tell (every length ties, and the first wins), and
	 * the model's constants are fitted across levels, so a residual it
	 * leaves is taken to carry (the longest length first). The shortest
	 * first left every level not yet measured open by ± 6.5 % whatever
	 * the answer's neighbours showed. */
	static const double cats[] = { 4, 1.5, 0.5 };

	gp->dim = x->dim;
	for (size_t k = 0; k < x->dim; k++)
		gp->categorical[k] = x->t->space->knobs[k].categorical;
	if (d->n == 0) {
		/* nothing measured: the prior's own uncertainty */
		const struct opt_gp_kernel k = {
			.signal = 0.1, .offset = 0.1, .nugget = nugget, .length_ord = 0.3, .length_cat = 1.5
		};

		return opt_gp_fit(gp, &k, 0, d->x, d->y, d->noise);
	}
	return opt_gp_select(gp, 0.1, nugget, signals + first, ELEMENTSOF(signals) - first, ords, ELEMENTSOF(ords),
			     cats, ELEMENTSOF(cats), d->n, d->x, d->y, d->noise);
}

/* The incumbent: the measured configuration with the lowest posterior
 * mean (SIZE_MAX: none), its mean and the runner-up. */
static size_t incumbent(const struct search *x, const struct opt_gp *gp, double *ret_mean, size_t *ret_second)
{
	size_t best = SIZE_MAX, second = SIZE_MAX;
	double bm = INFINITY, sm = INFINITY;

	for (size_t i = 0; i < x->n_configs; i++) {
		double m, sd;

		if (!x->obs[i].measured)
			continue;
		if (isnan(x->prior[i]))
			m = x->obs[i].sum / x->obs[i].n; /* the model cannot run it: its measurements alone */
		else
			posterior(x, gp, i, &m, &sd);
		if (m < bm) {
			second = best;
			sm = bm;
			best = i;
			bm = m;
		} else if (m < sm) {
			second = i;
			sm = m;
		}
	}
	*ret_mean = bm;
	*ret_second = second;
	return best;
}

/* The spread of configuration i's mean measured log cost. */
static double measured_sd(const struct search *x, size_t i)
{
	return sqrt(x->noise_var / MAX(x->obs[i].n, 1u));
}

/* The closest rival of the incumbent measured fewer than
 * RIVAL_MEASUREMENTS times whose posterior mean lies within twice the
 * spread of the two measured means, and not in flight (SIZE_MAX: none). */
static size_t rival(const struct search *x, const struct opt_gp *gp, size_t inc, const bool *busy)
{
	double m1, sd, best = INFINITY;
	size_t pick = SIZE_MAX;

	if (inc == SIZE_MAX || isnan(x->prior[inc]))
		return SIZE_MAX;
	posterior(x, gp, inc, &m1, &sd);
	for (size_t i = 0; i < x->n_configs; i++) {
		double m2, pair;

		if (i == inc || !x->obs[i].measured || x->obs[i].n >= RIVAL_MEASUREMENTS || isnan(x->prior[i]) ||
		    busy[i])
			continue;
		posterior(x, gp, i, &m2, &sd);
		pair = sqrt(measured_sd(x, inc) * measured_sd(x, inc) + measured_sd(x, i) * measured_sd(x, i));
		if (m2 - m1 < 2 * pair && m2 < best) {
			best = m2;
			pick = i;
		}
	}
	return pick;
}

/* The search over, the answer is the configuration with the lowest mean
 * measured cost (opt_best), and that mean is the lowest of several noisy
 * ones: on a landscape of near ties it is biased low (the winner's curse).
 * The race: the answer a and its closest rival by measured mean, while
 * the two overlap (within twice their joint spread), the one of them
 * measured less (ties: the answer, whose mean is the biased one) is
 * measured again, each at most RACE_MEASUREMENTS times. Returns the
 * configuration to measure (SIZE_MAX: none). */
static size_t race(const struct search *x, size_t a, const bool *busy)
{
	double ma, best = INFINITY;
	/* a few repeats understate the noise: never below the settings' */
	double floor_var = MAX(x->noise_var, x->s->noise * x->s->noise);
	size_t b = SIZE_MAX, which;

	if (a == SIZE_MAX || !x->obs[a].measured)
		return SIZE_MAX;
	ma = x->obs[a].sum / x->obs[a].n;
	for (size_t i = 0; i < x->n_configs; i++) {
		double mi, pair;

		if (i == a || !x->obs[i].measured || busy[i])
			continue;
		mi = x->obs[i].sum / x->obs[i].n;
		pair = sqrt(floor_var * (1.0 / x->obs[a].n + 1.0 / x->obs[i].n));
		if (mi - ma < 2 * pair && mi < best) {
			best = mi;
			b = i;
		}
	}
	if (b == SIZE_MAX)
		return SIZE_MAX;
	which = x->obs[b].n < x->obs[a].n ? b : a;
	if (x->obs[which].n >= RACE_MEASUREMENTS || busy[which])
		which = which == a ? b : a;
	return x->obs[which].n < RACE_MEASUREMENTS && !busy[which] ? which : SIZE_MAX;
}

/* Whether configuration i was measured alone on the host (a confirmation
 * of the answer once the search was over). */
static bool measured_alone(const struct twin *t, const struct twin_history *h, size_t i)
{
	for (size_t k = 0; k < h->n; k++)
		if (h->trials[k].alone && h->trials[k].trial.outcome == OPT_OUTCOME_MEASURED &&
		    twin_index(t, &h->trials[k].trial.config) == (ssize_t)i)
			return true;
	return false;
}

/* Whether a re-probe of configuration a or b is in flight. */
static bool pair_in_flight(const struct twin *t, const struct twin_pending *pending, size_t n, size_t a, size_t b)
{
	for (size_t p = 0; p < n; p++) {
		ssize_t i = pending[p].confirm ? twin_index(t, &pending[p].config) : -1;

		if (i >= 0 && ((size_t)i == a || (size_t)i == b))
			return true;
	}
	return false;
}

/* Whether configurations i and j have every categorical knob alike. */
static bool same_combination(const struct search *x, size_t i, size_t j)
{
	const struct opt_space *s = x->t->space;

	for (size_t k = 0; k < s->n_knobs; k++)
		if (s->knobs[k].categorical && x->t->configs[i].idx[k] != x->t->configs[j].idx[k])
			return false;
	return true;
}

/* An untested configuration the choice weighs: its residual's posterior
 * (mean, sd) and a sort key. */
struct weigh {
	size_t i;
	double mu, sd, key;
};

static int cmp_weigh(const void *a, const void *b)
{
	const struct weigh *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1; /* largest first */
	return x->i < y->i ? -1 : x->i > y->i;
}

/* What a choice maximises at posterior mean m: expected improvement over
 * ref, or (ref NAN: nothing measured nor in flight) −m, the model's best
 * first. Both fall as m rises, so a lower bound of the prior gives an
 * upper bound of it. */
static double acquisition(double ref, double m, double sd)
{
	return isnan(ref) ? -m : opt_expected_improvement(ref, m, sd);
}

/* The candidates: every untested configuration the model can start that
 * no rule covers and nothing in flight holds, with its residual's
 * posterior. Returns how many. */
static size_t gather(const struct search *x, const struct opt_gp *gp, const bool *busy, struct weigh *weigh)
{
	size_t n = 0;

	for (size_t i = 0; i < x->n_configs; i++) {
		double v;

		if (x->obs[i].tried || x->rule[i] || busy[i] || isnan(x->prior[i]))
			continue;
		weigh[n] = (struct weigh){ .i = i };
		opt_gp_predict(gp, &x->z[i * x->dim], &weigh[n].mu, &v);
		weigh[n].sd = sqrt(v);
		n++;
	}
	return n;
}

/* The candidate with the largest acquisition (ties: the lowest index), by
 * branch and bound: each is weighed with its prior as it stands (a lower
 * bound unless predicted), from the most promising down, and predicted
 * only while its bound can still beat the best found. */
static int choose(struct search *x, struct weigh *weigh, size_t n, double ref, size_t *ret_pick, double *ret_best,
		  struct error *err)
{
	size_t pick = SIZE_MAX;
	double best = 0;
	int r;

	for (size_t k = 0; k < n; k++)
		weigh[k].key = acquisition(ref, x->prior[weigh[k].i] + weigh[k].mu, weigh[k].sd);
	qsort(weigh, n, sizeof(*weigh), cmp_weigh);
	for (size_t k = 0; k < n; k++) {
		const struct weigh *w = &weigh[k];
		double a;

		if (pick != SIZE_MAX && (w->key < best || (w->key == best && w->i > pick)))
			break;
		r = ensure_prior(x, w->i, err);
		if (r < 0)
			return r;
		a = acquisition(ref, x->prior[w->i] + w->mu, w->sd);
		if (pick == SIZE_MAX || a > best || (a == best && w->i < pick)) {
			pick = w->i;
			best = a;
		}
	}
	*ret_pick = pick;
	*ret_best = best;
	return 0;
}

/* P(no untested configuration costs less than bar): the product over the
 * candidates of P(it does not). Predicted from the most likely down until
 * the bounds of the rest add up to at most STOP_TAIL of the stop
 * probability; the rest count with their bounds, which can only make the
 * stop later, never earlier. */
static int p_no_better(struct search *x, struct weigh *weigh, size_t n, double bar, double *ret, struct error *err)
{
	double tail = 0, p = 1;
	size_t exact = 0;
	int r;

	for (size_t k = 0; k < n; k++) {
		weigh[k].key = opt_normal_cdf((bar - x->prior[weigh[k].i] - weigh[k].mu) / MAX(weigh[k].sd, 1e-9));
		tail += weigh[k].key;
	}
	qsort(weigh, n, sizeof(*weigh), cmp_weigh);
	while (exact < n && tail > STOP_TAIL * x->s->stop_probability)
		tail -= weigh[exact++].key;
	for (size_t k = 0; k < n; k++) {
		struct weigh *w = &weigh[k];

		if (k < exact) {
			r = ensure_prior(x, w->i, err);
			if (r < 0)
				return r;
			w->key = opt_normal_cdf((bar - x->prior[w->i] - w->mu) / MAX(w->sd, 1e-9));
		}
		p *= 1 - w->key;
	}
	*ret = p;
	return 0;
}

/* With both serving shapes in the space, the answer is also a comparison:
 * when nothing of the other shape than the incumbent's has been tried, the
 * configuration of that shape with the lowest posterior mean (one the model
 * can start and predicts to meet the SLA), measured once so that the answer
 * says by how much its shape won; SIZE_MAX otherwise. By branch and bound:
 * from the lowest bound up, predicted while the bound can still win. */
static int shape_rival(struct search *x, const struct opt_gp *gp, size_t inc, struct weigh *weigh, size_t *ret,
		       struct error *err)
{
	const struct opt_space *space = x->t->space;
	int k = opt_space_knob_index(space, OPT_KNOB_SHAPE);
	double best = INFINITY, m, sd;
	size_t pick = SIZE_MAX, n = 0;
	int r;

	*ret = SIZE_MAX;
	if (k < 0 || inc == SIZE_MAX || space->knobs[k].n_values < 2)
		return 0;
	for (size_t i = 0; i < x->n_configs; i++)
		if (x->t->configs[i].idx[k] != x->t->configs[inc].idx[k] && x->obs[i].tried)
			return 0;
	for (size_t i = 0; i < x->n_configs; i++) {
		if (x->t->configs[i].idx[k] == x->t->configs[inc].idx[k] || x->rule[i] || isnan(x->prior[i]) ||
		    x->never_met[i])
			continue;
		posterior(x, gp, i, &m, &sd);
		weigh[n++] = (struct weigh){ .i = i, .key = -m };
	}
	qsort(weigh, n, sizeof(*weigh), cmp_weigh);
	for (size_t j = 0; j < n && -weigh[j].key < best; j++) {
		size_t i = weigh[j].i;

		r = ensure_prior(x, i, err);
		if (r < 0)
			return r;
		if (x->never_met[i])
			continue;
		posterior(x, gp, i, &m, &sd);
		if (m < best) {
			best = m;
			pick = i;
		}
	}
	*ret = pick;
	return 0;
}

/* With search.extend_edges: whether configuration b sits on the top of a
 * range the calibrated model predicts a gain beyond — its best along the
 * other batch knob one widening above the bound (twice it on a log2
 * scale, the range's span further on a linear one) more than 1 % below
 * the same at the bound, the gate the caller widens by. Sets *ret_knob
 * and *ret_gain (predicted beyond / at the bound − 1). */
static int edge_gain(struct search *x, size_t b, int *ret_knob, double *ret_gain, struct error *err)
{
	const struct opt_space *s = x->t->space;
	const struct opt_config *c = &x->t->configs[b];

	*ret_knob = -1;
	for (size_t k = 0; k < s->n_knobs; k++) {
		const struct opt_knob *kn = &s->knobs[k];
		struct twin_prediction beyond, here;
		struct opt_config where;
		double v, next;
		int r;

		if (kn->kind != OPT_KNOB_RANGE || kn->categorical || kn->n_values < 2 ||
		    c->idx[k] + 1u != kn->n_values || !opt_knob_active(s, c, k))
			continue;
		v = kn->numbers[c->idx[k]];
		next = kn->scale == OPT_SCALE_LOG2 ? 2 * v : v + (v - kn->numbers[0]);
		r = twin_predict_beyond_row(x->t, &x->profile, c, kn->name, next, &where, &beyond, err);
		if (r >= 0)
			r = twin_predict_beyond_row(x->t, &x->profile, c, kn->name, v, &where, &here, err);
		if (r < 0)
			return r;
		if (beyond.outcome == OPT_OUTCOME_MEASURED && here.outcome == OPT_OUTCOME_MEASURED &&
		    beyond.cost < here.cost * (1 - EDGE_GAIN)) {
			*ret_knob = (int)k;
			*ret_gain = beyond.cost / here.cost - 1;
			return 0;
		}
	}
	return 0;
}

/* The search is over: the answer's confirmation is asked for. */
static void confirm_answer(struct twin_candidate *c)
{
	c->opt.ask = OPT_ASK_CONFIRM;
	c->opt.phase = OPT_PHASE_CONFIRM;
	c->opt.reason = OPT_DONE_CONVERGED;
	c->opt.config = c->opt.best.config;
	c->opt.attempt = 1;
	c->phase = TWIN_PHASE_CONFIRM;
}

int twin_search_ask(struct twin *t, const struct twin_search_settings *s, const struct twin_history *h,
		    const struct twin_pending *pending, size_t n_pending, size_t k, struct twin_candidate *ret,
		    size_t *ret_n, struct error *err)
{
	struct search x = { .t = t, .s = s, .h = h, .n_configs = t->n_configs, .dim = t->space->n_knobs };
	struct opt_history oh;
	struct opt_gp gp;
	struct gp_data d = { 0 };
	_cleanup_(freep) bool *busy = NULL;
	_cleanup_(freep) struct weigh *weigh = NULL;
	_cleanup_(freep) ssize_t *pidx = NULL; /* each trial in flight's configuration, -1: none */
	size_t got = 0, deployed = h->n + n_pending;
	unsigned inferred = 0;
	unsigned reserve = opt_confirm_reserve(&s->plain);
	/* side by side: several asked for, or trials in flight */
	bool sbs = k > 1 || n_pending > 0, latched = false, alone_pending = false, stop_told = false, reprobed = false;
	double ei_told = 0, p_told = 1, delta_told = 0;
	int r;

	opt_gp_init(&gp);
	opt_history_init(&oh);
	x.obs = calloc(x.n_configs, sizeof(*x.obs));
	x.rule = calloc(x.n_configs, 1);
	x.rule_trial = calloc(x.n_configs, sizeof(size_t));
	x.rule_ref = calloc(x.n_configs, sizeof(size_t));
	x.prior = malloc(x.n_configs * sizeof(double));
	x.never_met = calloc(x.n_configs, sizeof(bool));
	x.z = malloc(x.n_configs * MAX(x.dim, (size_t)1) * sizeof(double));
	x.exact = calloc(x.n_configs, sizeof(bool));
	busy = calloc(x.n_configs, sizeof(bool));
	weigh = malloc(x.n_configs * sizeof(*weigh));
	pidx = malloc(MAX(n_pending, (size_t)1) * sizeof(*pidx));
	if (!x.obs || !x.rule || !x.rule_trial || !x.rule_ref || !x.prior || !x.exact || !x.never_met || !x.z ||
	    !busy || !weigh || !pidx) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < x.n_configs; i++)
		x.prior[i] = NAN;
	r = read_history(&x, err);
	for (size_t j = 0; j < h->n && r >= 0; j++)
		r = opt_history_add(&oh, &h->trials[j].trial);
	if (r < 0)
		goto out;
	estimate_noise(&x);
	r = calibrate(&x, err);
	if (r >= 0)
		r = compute_prior(&x, err);
	if (r < 0)
		goto out;
	fill_z(&x);
	r = gp_data_init(&d, &x, n_pending + k);
	if (r >= 0)
		r = select_kernel(&gp, &x, &d);
	if (r < 0)
		goto out;

	/* the trials in flight are not candidates */
	for (size_t p = 0; p < n_pending; p++) {
		ssize_t i = twin_index(t, &pending[p].config);

		pidx[p] = -1;
		if (i < 0 || isnan(x.prior[i]))
			continue;
		r = ensure_prior(&x, (size_t)i, err);
		if (r < 0)
			goto out;
		busy[i] = true;
		pidx[p] = i;
	}
	/* the rules, and side by side what the search decides from the told
	 * measurements alone (no fantasies): the stop over what is neither
	 * measured nor in flight, and the expected improvement a re-probe is
	 * weighed against, as one at a time */
	{
		double m0;
		size_t second0, inc0 = incumbent(&x, &gp, &m0, &second0);

		r = apply_rules(&x, isfinite(m0) ? m0 : INFINITY, err);
		if (r < 0)
			goto out;
		for (size_t i = 0; i < x.n_configs; i++)
			inferred += x.rule[i] != 0;
		/* (a range widened after it starts the search again: plain.phase_start) */
		for (size_t j = s->plain.phase_start; j < h->n && sbs; j++)
			latched = latched || h->trials[j].alone;
		for (size_t p = 0; p < n_pending && sbs; p++)
			alone_pending = alone_pending || pending[p].alone;
		latched = latched || alone_pending;
		if (sbs && !latched && inc0 != SIZE_MAX) {
			size_t n0 = gather(&x, &gp, busy, weigh), pick0;

			delta_told = MAX(STOP_RESOLUTION, measured_sd(&x, inc0));
			r = p_no_better(&x, weigh, n0, m0 - delta_told, &p_told, err);
			if (r >= 0)
				r = choose(&x, weigh, n0, m0, &pick0, &ei_told, err);
			if (r < 0)
				goto out;
			stop_told = 1 - p_told < s->stop_probability && x.measured_configs >= STOP_MIN;
		}
	}

	/* the trials in flight: fantasies at their posterior means */
	for (size_t p = 0; p < n_pending; p++) {
		ssize_t i = pidx[p];
		double m, sd;

		if (i < 0)
			continue;
		posterior(&x, &gp, (size_t)i, &m, &sd);
		r = gp_data_add(&d, &x, (size_t)i, m - x.prior[i], x.noise_var / (x.obs[i].n + 1));
		if (r >= 0)
			r = opt_gp_fit(&gp, &gp.kernel, d.n, d.x, d.y, d.noise);
		if (r < 0)
			goto out;
	}

	/* the reserve kept for the answer's confirmation: only what it still needs */
	{
		struct opt_result b;

		opt_best(t->space, &oh, &b, NULL);
		if (b.valid)
			reserve =
				MIN(reserve, b.n < 1 + s->plain.confirm_probes ? 1 + s->plain.confirm_probes - b.n : 0);
	}
	while (got < k) {
		struct twin_candidate *c = &ret[got];
		double best_m, best_ei = 0, p_none = 1, delta;
		size_t second, pick = SIZE_MAX, untested = 0;
		bool over, verify;
		size_t inc = incumbent(&x, &gp, &best_m, &second);
		double ref = best_m;

		/* "more than the noise": the noise of the answer's mean cost, as
		 * far as its measurements resolve it, but never below STOP_RESOLUTION */
		delta = MAX(STOP_RESOLUTION, inc != SIZE_MAX ? measured_sd(&x, inc) : sqrt(x.noise_var));
		bool budget = s->plain.max_trials && deployed + got + reserve >= s->plain.max_trials;

		*c = (struct twin_candidate){ .predicted_cost = NAN, .calibrated = x.calibrated, .fit = x.fit };
		c->tol = delta;
		opt_best(t->space, &oh, &c->opt.best, &c->opt.runner_up);
		c->opt.evaluated = x.measured_configs;
		/* search.extend_edges, one at a time: the answer, not confirmed yet,
		 * on the top of a range the model predicts a gain beyond — the
		 * search is over in this range, with its confirmation asked for
		 * (where the caller widens the range instead; should it not, the
		 * confirmation is measured and the search goes on in the range).
		 * Walking the range's interior first only spends deployments on
		 * configurations the model already ranks below the next range. */
		if (s->edges && !sbs && got == 0 && !budget && c->opt.best.valid && s->plain.confirm_probes > 0 &&
		    c->opt.best.n < 1 + s->plain.confirm_probes) {
			ssize_t b = twin_index(t, &c->opt.best.config);
			double gain = 0;
			int knob = -1;

			if (b >= 0 && !isnan(x.prior[b])) {
				r = edge_gain(&x, (size_t)b, &knob, &gain, err);
				if (r < 0)
					goto out;
			}
			if (knob >= 0) {
				confirm_answer(c);
				snprintf(
					c->message, sizeof(c->message),
					"the answer is the top of the range of %s (%g) and the model predicts %+.1f %% "
					"beyond it: the search is over in this range after %zu deployment%s",
					t->space->knobs[knob].name,
					t->space->knobs[knob].numbers[c->opt.best.config.idx[knob]], 100 * gain,
					deployed, deployed == 1 ? "" : "s");
				got++;
				break;
			}
		}
		/* side by side, once the stop held: the answer measured alone, nothing new */
		over = sbs && inc != SIZE_MAX && (latched || stop_told);
		if (over) {
			ssize_t b = c->opt.best.valid ? twin_index(t, &c->opt.best.config) : -1;
			bool room = !s->plain.max_trials || deployed + got < s->plain.max_trials;
			bool alone_done = b >= 0 && measured_alone(t, h, (size_t)b);

			c->opt.inferred = inferred;
			if (b >= 0 && !alone_done && !alone_pending && s->plain.confirm_probes > 0 && room &&
			    got == 0 && (!latched || n_pending == 0)) {
				confirm_answer(c);
				c->tol = latched ? delta : delta_told;
				if (latched)
					snprintf(c->message, sizeof(c->message),
						 "the search is over: measuring the answer alone");
				else
					snprintf(c->message, sizeof(c->message),
						 "converged: P(an untested configuration beats the answer by more than "
						 "the noise %.1f %%) = %.1f %% < %.0f %% after %zu deployments (%zu in "
						 "flight): the answer is measured alone, nothing new starts",
						 100 * delta_told, 100 * (1 - p_told), 100 * s->stop_probability,
						 deployed, n_pending);
				got++;
				break;
			}
			if (got > 0)
				break;
			/* nothing to confirm: done below (or, with trials in flight, wait for them) */
		}
		/* nothing measured: a batch spreads around what is in flight already */
		for (size_t i = 0; i < x.n_configs && inc == SIZE_MAX; i++)
			if (busy[i] && !isnan(x.prior[i])) {
				double m, sd;

				posterior(&x, &gp, i, &m, &sd);
				ref = isfinite(ref) ? MIN(ref, m) : m;
			}
		r = 0;
		untested = gather(&x, &gp, busy, weigh);
		if (inc != SIZE_MAX)
			r = p_no_better(&x, weigh, untested, best_m - delta, &p_none, err);
		/* the stop holds but rests on fewer than STOP_MIN configurations:
		 * the next one checks the model beside the answer — of the answer's
		 * quantization, TP and other categorical knobs where any is left,
		 * the untested configuration most likely to beat it by more than
		 * the noise (the stop's own term). Expected improvement is next to
		 * nothing everywhere then: its largest value was an AWQ at
		 * max_num_seqs 512 the stop had already ruled out (0.4 %), which
		 * on an engine whose AWQ the model cannot describe cost 2.5x the
		 * optimum, and which says nothing about the answer's neighbours. */
		verify = r >= 0 && !over && !budget && inc != SIZE_MAX && untested > 0 &&
			 1 - p_none < s->stop_probability && x.measured_configs + got < STOP_MIN;
		if (verify) {
			double m, sd;
			bool near = false;

			for (size_t j = 0; j < untested && !near; j++)
				near = same_combination(&x, weigh[j].i, inc);
			/* by branch and bound: a key from a lower bound is an upper bound of it */
			for (;;) {
				struct weigh *w = NULL;

				for (size_t j = 0; j < untested; j++)
					if ((!near || same_combination(&x, weigh[j].i, inc)) &&
					    (!w || weigh[j].key > w->key ||
					     (weigh[j].key == w->key && weigh[j].i < w->i)))
						w = &weigh[j];
				if (x.exact[w->i]) {
					pick = w->i;
					break;
				}
				r = ensure_prior(&x, w->i, err);
				if (r < 0)
					goto out;
				w->key = opt_normal_cdf((best_m - delta - x.prior[w->i] - w->mu) / MAX(w->sd, 1e-9));
			}
			posterior(&x, &gp, pick, &m, &sd);
			best_ei = opt_expected_improvement(best_m, m, sd);
		}
		/* the expected improvement decides only where the search goes on (the
		 * budget's last word says it too) */
		else if (r >= 0 && !over &&
			 (inc == SIZE_MAX || budget || untested == 0 || 1 - p_none >= s->stop_probability ||
			  x.measured_configs + got < STOP_MIN))
			r = choose(&x, weigh, untested,
				   !isfinite(ref)    ? NAN
				   : inc == SIZE_MAX ? ref
						     : best_m,
				   &pick, &best_ei, err);
		else if (untested > 0)
			pick = weigh[0].i; /* any: the search is over */
		if (r < 0)
			goto out;
		c->opt.inferred = inferred;

		if (inc == SIZE_MAX && pick == SIZE_MAX) {
			c->opt.ask = OPT_ASK_DONE;
			c->opt.phase = OPT_PHASE_DONE;
			c->opt.reason = OPT_DONE_EXHAUSTED;
			c->phase = TWIN_PHASE_DONE;
			snprintf(c->message, sizeof(c->message),
				 "exhausted: no configuration is left that the model can start and nothing ran");
			got++;
			break;
		}
		if (inc != SIZE_MAX && !budget && pick != SIZE_MAX && !over &&
		    (1 - p_none >= s->stop_probability || x.measured_configs + got < STOP_MIN)) {
			double dm, sd_pair;
			bool reprobe = false;
			size_t which = inc;

			/* the incumbent and its rival overlap: measure again the one
			 * measured less (confirm_probes 0: nothing is measured twice).
			 * Side by side only where one at a time would (the expected
			 * improvement of the told measurements, not of the fantasies),
			 * once an ask, not while one of the pair is measured again, and
			 * never the incumbent: once the stop holds it is measured alone */
			if (second != SIZE_MAX && (sbs ? ei_told : best_ei) < delta / 4 &&
			    s->plain.confirm_probes > 0 &&
			    !(sbs && (reprobed || pair_in_flight(t, pending, n_pending, inc, second)))) {
				double m2, sd2, m1, sd1;

				posterior(&x, &gp, second, &m2, &sd2);
				posterior(&x, &gp, inc, &m1, &sd1);
				dm = m2 - m1;
				sd_pair = sqrt(measured_sd(&x, inc) * measured_sd(&x, inc) +
					       measured_sd(&x, second) * measured_sd(&x, second));
				which = x.obs[second].n < x.obs[inc].n ? second : inc;
				reprobe = dm < 2 * sd_pair && x.obs[which].n < REPROBE_MAX && !busy[which] &&
					  !(sbs && which == inc) &&
					  !(h->n > 0 && h->trials[h->n - 1].trial.confirm &&
					    (twin_index(t, &h->trials[h->n - 1].trial.config) == (ssize_t)inc ||
					     twin_index(t, &h->trials[h->n - 1].trial.config) == (ssize_t)second));
			}
			if (reprobe) {
				c->opt.ask = OPT_ASK_CONFIRM;
				c->opt.phase = OPT_PHASE_SEARCH;
				c->opt.config = t->configs[which];
				c->opt.attempt = 1;
				c->phase = TWIN_PHASE_REFINE;
				c->predicted_cost = exp(x.prior[which]);
				snprintf(c->message, sizeof(c->message),
					 "the answer and its rival overlap (%.1f %% apart, noise %.1f %%): measuring "
					 "the "
					 "one measured less again",
					 100 * (exp(dm) - 1), 100 * delta);
				busy[which] = true;
				reprobed = true;
			} else {
				double m, sd;

				posterior(&x, &gp, pick, &m, &sd);
				c->opt.ask = OPT_ASK_TRIAL;
				c->opt.phase = OPT_PHASE_SEARCH;
				c->opt.config = t->configs[pick];
				c->opt.attempt = x.obs[pick].failures + 1;
				c->phase = TWIN_PHASE_REFINE;
				c->predicted_cost = exp(m);
				if (verify)
					snprintf(c->message, sizeof(c->message),
						 "P(something untested beats the answer by more than the noise) = %.1f "
						 "%% < %.0f %%, but on %u configurations: measuring the one most "
						 "likely to (predicted %+.1f %% ± %.1f %% against the answer)",
						 100 * (1 - p_none), 100 * s->stop_probability,
						 x.measured_configs + (unsigned)got, 100 * (exp(m - best_m) - 1),
						 100 * sd);
				else
					snprintf(c->message, sizeof(c->message),
						 "expected improvement %.2f %% (predicted %+.1f %% ± %.1f %% against "
						 "the answer); P(something untested beats it by more than the noise) = "
						 "%.0f %%",
						 100 * best_ei, 100 * (exp(m - best_m) - 1), 100 * sd,
						 100 * (1 - p_none));
				busy[pick] = true;
				r = gp_data_add(&d, &x, pick, m - x.prior[pick], x.noise_var);
				if (r >= 0)
					r = opt_gp_fit(&gp, &gp.kernel, d.n, d.x, d.y, d.noise);
				if (r < 0)
					goto out;
			}
			got++;
			continue;
		}
		if (inc == SIZE_MAX && budget) {
			/* nothing measured, and no deployment left: the batch ends here
			 * (max_trials counts every server started, side by side too) */
			if (got == 0) {
				c->opt.ask = OPT_ASK_DONE;
				c->opt.phase = OPT_PHASE_DONE;
				c->opt.reason = OPT_DONE_BUDGET;
				c->phase = TWIN_PHASE_DONE;
				snprintf(c->message, sizeof(c->message), "budget: %zu deployments", deployed);
				got++;
			}
			break;
		}
		if (inc == SIZE_MAX) {
			double m, sd;

			/* nothing measured yet: the model's best */
			posterior(&x, &gp, pick, &m, &sd);
			c->opt.ask = OPT_ASK_TRIAL;
			c->opt.phase = OPT_PHASE_SCREEN;
			c->opt.config = t->configs[pick];
			c->opt.attempt = x.obs[pick].failures + 1;
			c->phase = TWIN_PHASE_DESIGN;
			c->predicted_cost = exp(m);
			snprintf(c->message, sizeof(c->message), "the model's best before anything was measured");
			busy[pick] = true;
			r = gp_data_add(&d, &x, pick, m - x.prior[pick], x.noise_var);
			if (r >= 0)
				r = opt_gp_fit(&gp, &gp.kernel, d.n, d.x, d.y, d.noise);
			if (r < 0)
				goto out;
			got++;
			continue;
		}
		/* the search is over: confirm the answer, then done (alone: nothing else in flight) */
		c->opt.reason = budget ? OPT_DONE_BUDGET : pick == SIZE_MAX ? OPT_DONE_EXHAUSTED : OPT_DONE_CONVERGED;
		if (c->opt.best.valid && c->opt.best.n < 1 + s->plain.confirm_probes && n_pending + got == 0 &&
		    (!s->plain.max_trials || deployed < s->plain.max_trials)) {
			c->opt.ask = OPT_ASK_CONFIRM;
			c->opt.phase = OPT_PHASE_CONFIRM;
			c->opt.config = c->opt.best.config;
			c->opt.attempt = 1;
			c->phase = TWIN_PHASE_CONFIRM;
		} else if (!over && s->plain.confirm_probes > 0 && n_pending + got == 0 &&
			   (!s->plain.max_trials || deployed < s->plain.max_trials) &&
			   (second = race(&x, c->opt.best.valid ? (size_t)twin_index(t, &c->opt.best.config) : SIZE_MAX,
					  busy)) != SIZE_MAX) {
			c->opt.ask = OPT_ASK_CONFIRM;
			c->opt.phase = OPT_PHASE_CONFIRM;
			c->opt.config = t->configs[second];
			c->opt.attempt = 1;
			c->phase = TWIN_PHASE_CONFIRM;
		} else if (!over && (second = rival(&x, &gp, inc, busy)) != SIZE_MAX && s->plain.confirm_probes > 0 &&
			   n_pending + got == 0 && (!s->plain.max_trials || deployed < s->plain.max_trials)) {
			/* a rival within the noise of the answer: measure the one of
			 * the two measured less, never the same one twice in a row */
			size_t which = x.obs[inc].n < x.obs[second].n ? inc : second;

			if (h->n > 0 && h->trials[h->n - 1].trial.confirm &&
			    twin_index(t, &h->trials[h->n - 1].trial.config) == (ssize_t)which)
				which = which == inc ? second : inc;
			c->opt.ask = OPT_ASK_CONFIRM;
			c->opt.phase = OPT_PHASE_CONFIRM;
			c->opt.config = t->configs[which];
			c->opt.attempt = 1;
			c->phase = TWIN_PHASE_CONFIRM;
		} else if (n_pending + got == 0 && (!s->plain.max_trials || deployed < s->plain.max_trials) &&
			   ((r = shape_rival(&x, &gp, inc, weigh, &second, err)) < 0 || second != SIZE_MAX)) {
			double m, sd;

			if (r < 0)
				goto out;
			posterior(&x, &gp, second, &m, &sd);
			c->opt.ask = OPT_ASK_TRIAL;
			c->opt.phase = OPT_PHASE_SEARCH;
			c->opt.config = t->configs[second];
			c->opt.attempt = x.obs[second].failures + 1;
			c->phase = TWIN_PHASE_CONFIRM;
			c->predicted_cost = exp(m);
			snprintf(c->message, sizeof(c->message),
				 "the answer's shape against the other: measuring the other shape's best as the model "
				 "predicts it (%+.1f %% against the answer)",
				 100 * (exp(m - best_m) - 1));
			got++;
			continue;
		} else {
			c->opt.ask = OPT_ASK_DONE;
			c->opt.phase = OPT_PHASE_DONE;
			c->phase = TWIN_PHASE_DONE;
		}
		if (budget)
			snprintf(c->message, sizeof(c->message),
				 "budget: %zu deployments; %zu configurations left untested, P(one beats the answer "
				 "by more than the noise) = %.0f %%, the best expected improvement %.1f %%",
				 deployed, untested, 100 * (1 - p_none), 100 * best_ei);
		else if (pick == SIZE_MAX)
			snprintf(c->message, sizeof(c->message),
				 "exhausted: every configuration the model can start is measured or ruled out");
		else if (over && latched)
			snprintf(c->message, sizeof(c->message),
				 "converged: side by side nothing new starts once the stop holds, and the answer was "
				 "measured alone; P(an untested configuration beats it by more than the noise %.1f %%) "
				 "= %.1f %% now, after %zu deployments",
				 100 * delta, 100 * (1 - p_none), deployed);
		else if (s->plain.max_trials)
			snprintf(c->message, sizeof(c->message),
				 "converged: P(an untested configuration beats the answer by more than the noise "
				 "%.1f %%) = %.1f %% < %.0f %% after %zu deployments, %zu of the budget saved",
				 100 * delta, 100 * (1 - p_none), 100 * s->stop_probability, deployed,
				 (size_t)s->plain.max_trials - MIN(deployed, (size_t)s->plain.max_trials));
		else
			snprintf(c->message, sizeof(c->message),
				 "converged: P(an untested configuration beats the answer by more than the noise "
				 "%.1f %%) = %.1f %% < %.0f %% after %zu deployments",
				 100 * delta, 100 * (1 - p_none), 100 * s->stop_probability, deployed);
		got++;
		break;
	}
	*ret_n = got;
	r = 0;
out:
	gp_data_done(&d);
	opt_gp_done(&gp);
	opt_history_done(&oh);
	search_done(&x);
	return r;
}

static const char *const rule_names[_TWIN_RULE_MAX] = {
	[TWIN_RULE_NONE] = "",
	[TWIN_RULE_MEMORY] = "memory",
	[TWIN_RULE_OUT_OF_MEMORY] = "out_of_memory",
	[TWIN_RULE_CANNOT_BIND] = "cannot_bind",
	[TWIN_RULE_STARVED] = "starved",
	[TWIN_RULE_NEVER_MET] = "never_met",
};

const char *twin_rule_to_string(enum twin_rule_kind k)
{
	return (unsigned)k < _TWIN_RULE_MAX ? rule_names[k] : "?";
}

int twin_search_rules(struct twin *t, const struct twin_search_settings *s, const struct twin_history *h,
		      struct twin_rule **ret, size_t *ret_n, struct error *err)
{
	struct search x = { .t = t, .s = s, .h = h, .n_configs = t->n_configs, .dim = t->space->n_knobs };
	struct twin_rule *rules = NULL;
	double best = INFINITY;
	size_t n = 0;
	int r;

	x.obs = calloc(x.n_configs, sizeof(*x.obs));
	x.rule = calloc(x.n_configs, 1);
	x.rule_trial = calloc(x.n_configs, sizeof(size_t));
	x.rule_ref = calloc(x.n_configs, sizeof(size_t));
	x.prior = malloc(x.n_configs * sizeof(double));
	x.never_met = calloc(x.n_configs, sizeof(bool));
	x.exact = calloc(x.n_configs, sizeof(bool));
	x.z = malloc(x.n_configs * MAX(x.dim, (size_t)1) * sizeof(double));
	if (!x.obs || !x.rule || !x.rule_trial || !x.rule_ref || !x.prior || !x.exact || !x.never_met || !x.z) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < x.n_configs; i++)
		x.prior[i] = NAN;
	r = read_history(&x, err);
	if (r >= 0)
		r = calibrate(&x, err);
	if (r >= 0)
		r = compute_prior(&x, err);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < x.n_configs; i++)
		if (x.obs[i].measured)
			best = MIN(best, x.obs[i].sum / x.obs[i].n);
	/* every prediction: the list says which configurations never meet the SLA */
	for (size_t i = 0; i < x.n_configs && r >= 0; i++)
		r = ensure_prior(&x, i, err);
	if (r >= 0)
		r = apply_rules(&x, best, err);
	if (r < 0)
		goto out;
	rules = calloc(MAX(x.n_configs, (size_t)1), sizeof(*rules));
	if (!rules) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < x.n_configs; i++) {
		struct twin_rule *u = &rules[n];
		char ref[OPT_KEY_MAX] = "";

		if (!x.rule[i] && !(x.never_met[i] && !x.obs[i].tried))
			continue;
		*u = (struct twin_rule){ .config = t->configs[i],
					 .kind = x.rule[i] ? x.rule[i] : TWIN_RULE_NEVER_MET,
					 .trial = x.rule_trial[i] };
		if (u->kind == TWIN_RULE_CANNOT_BIND)
			(void)opt_config_key(t->space, &t->configs[x.rule_ref[i]], ref, sizeof(ref));
		switch (u->kind) {
		case TWIN_RULE_MEMORY:
			snprintf(u->text, sizeof(u->text), "the memory pre-flight says it does not fit");
			break;
		case TWIN_RULE_OUT_OF_MEMORY:
			snprintf(u->text, sizeof(u->text), "trial %zu ran out of memory with less", u->trial + 1);
			break;
		case TWIN_RULE_CANNOT_BIND:
			/* a long knob key is cut: the text is for people, the trial cited */
			if (snprintf(
				    u->text, sizeof(u->text),
				    "max_num_seqs cannot bind: concurrency %.1f at the SLA rate (trial %zu); equals %s",
				    x.obs[x.rule_ref[i]].concurrency, u->trial + 1, ref) >= (int)sizeof(u->text))
				strcpy(u->text + sizeof(u->text) - 4, "...");
			break;
		case TWIN_RULE_STARVED:
			snprintf(u->text, sizeof(u->text),
				 "max_num_seqs far below the concurrency measured at the SLA rate (trial %zu)",
				 u->trial + 1);
			break;
		default:
			snprintf(u->text, sizeof(u->text),
				 "the calibrated model predicts no rate meets the SLA (step times too long for it)");
			break;
		}
		n++;
	}
	*ret = TAKE_PTR(rules);
	*ret_n = n;
	r = 0;
out:
	free(rules);
	search_done(&x);
	return r;
}
