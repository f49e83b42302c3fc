/* ratesearch.c — the rate search as a pure function of the load points
 * measured so far; see ratesearch.h for the method and its guarantees.
 *
 * Points measured at the same rate are pooled into one group (their good and
 * total counts add up), which is how the confidence check gets more requests
 * at the boundary without special state: asking for the same rate again is
 * enough. */
#include "ratesearch.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "sequential.h"

void probe_ratesearch_config_init(struct probe_ratesearch_config *cfg)
{
	*cfg = (struct probe_ratesearch_config){
		.target = 0.9,
		.tolerance = 0.05,
		.z = 1.2816,
		.min_rate_frac = 1.0 / 64,
		.num_requests = 200,
		.max_requests = 800,
		.max_points = 12,
		.confidence = PROBE_SEQUENTIAL_CONFIDENCE,
		.margin = PROBE_SEQUENTIAL_MARGIN,
	};
}

const char *probe_ratesearch_action_name(enum probe_ratesearch_action a)
{
	switch (a) {
	case PROBE_RATESEARCH_MEASURE:
		return "measure";
	case PROBE_RATESEARCH_DONE:
		return "done";
	case PROBE_RATESEARCH_NEVER:
		return "never";
	case PROBE_RATESEARCH_ALWAYS:
		return "always";
	}
	return "?";
}

void probe_wilson_interval(uint32_t good, uint32_t n, double z, double *ret_lo, double *ret_hi)
{
	double p, z2n, centre, half;

	if (n == 0) {
		*ret_lo = 0;
		*ret_hi = 1;
		return;
	}
	p = (double)good / n;
	z2n = z * z / n;
	centre = (p + z2n / 2) / (1 + z2n);
	half = z / (1 + z2n) * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n));
	*ret_lo = MAX(0.0, centre - half);
	*ret_hi = MIN(1.0, centre + half);
}

enum verdict {
	FAIL,
	PASS
};

struct group {
	double rate;
	uint64_t n, good;
	bool pct_fail;  /* failed a percentile bound although attainment held */
	bool last_met;  /* sla_met of the newest point */
	size_t last;    /* index of the newest point */
	enum verdict v; /* by the point estimate, doubtful ones at max_requests as FAIL */
	bool conclusive;
	enum probe_verdict verdict; /* of the newest point, when it was decided sequentially */
	bool undecided;             /* that verdict: the cap came first */
	bool knee;                  /* ... with attainment near the target: the knee is at this rate */
	double lw_sum;              /* Σ log(1/sla_ratio) over its points (informed steering) */
	uint32_t n_w;
	bool tpot_over;    /* some point's TPOT/ITL part over its bounds at the aim quantile */
	uint32_t n_points; /* load points pooled at this rate */
};

static bool same_rate(double a, double b)
{
	if (isinf(a) || isinf(b))
		return isinf(a) && isinf(b);
	return fabs(a - b) <= 1e-9 * MAX(fabs(a), fabs(b));
}

static void judge(const struct probe_ratesearch_config *cfg, struct group *g)
{
	double p, lo, hi;

	if (g->verdict != PROBE_VERDICT_NONE) {
		/* decided while it ran, as sure as the test makes it; sla_met
		 * follows the verdict and the percentile bounds (at the cap: the
		 * point estimate) */
		g->v = g->last_met ? PASS : FAIL;
		g->conclusive = true;
		g->undecided = g->verdict == PROBE_VERDICT_UNDECIDED;
		/* several points at one rate, the newest undecided too: judged
		 * by all their requests' point estimate (the lowest rate
		 * measured again while its interval held the target) */
		if (g->undecided && g->n_points > 1 && cfg->target > 0)
			g->v = (double)g->good >= cfg->target * (double)g->n - 1e-9 && !g->pct_fail ? PASS : FAIL;
		/* undecided within the test's indifference zone (|p − t| at most
		 * margin·(1 − t)), its 90 % interval within twice that: the knee
		 * (150 of 160 good). One far from the target (13 of 13 good when
		 * the time cap came), or with an interval wider than the zone (9
		 * of 10: 65-98 %), only had too few requests: it steers by its
		 * point estimate as a sure point would. */
		p = g->n ? (double)g->good / (double)g->n : 0;
		probe_wilson_interval((uint32_t)MIN(g->good, UINT32_MAX), (uint32_t)MIN(g->n, UINT32_MAX), PROBE_CAP_Z,
				      &lo, &hi);
		g->knee = g->undecided && cfg->target > 0 &&
			  fabs(p - cfg->target) <= cfg->margin * (1 - cfg->target) + 1e-9 &&
			  lo >= cfg->target - 2 * cfg->margin * (1 - cfg->target) - 1e-9 &&
			  hi <= cfg->target + 2 * cfg->margin * (1 - cfg->target) + 1e-9;
		return;
	}
	if (cfg->target <= 0 || g->n == 0) {
		g->v = g->last_met ? PASS : FAIL;
		g->conclusive = true;
		return;
	}
	p = (double)g->good / (double)g->n;
	if (g->pct_fail) {
		g->v = FAIL;
		g->conclusive = true;
		return;
	}
	g->v = p >= cfg->target - 1e-12 ? PASS : FAIL;
	probe_wilson_interval((uint32_t)MIN(g->good, UINT32_MAX), (uint32_t)MIN(g->n, UINT32_MAX), cfg->z, &lo, &hi);
	g->conclusive = lo >= cfg->target || hi < cfg->target;
	if (!g->conclusive && g->n >= cfg->max_requests) {
		/* as sure as we will get: doubt counts against the rate */
		g->v = FAIL;
		g->conclusive = true;
	}
}

static void add_point(const struct probe_ratesearch_config *cfg, struct group *g, const struct probe_rate_point *p,
		      size_t idx)
{
	double a = p->n ? (double)p->good / p->n : 0;

	g->rate = p->rate;
	g->n += p->n;
	g->good += MIN(p->good, p->n);
	if (!p->sla_met && (cfg->target <= 0 || a >= cfg->target - 1e-12))
		g->pct_fail = true;
	g->last_met = p->sla_met;
	g->last = idx;
	g->n_points++;
	g->verdict = p->verdict;
	if (p->sla_ratio > 0) {
		g->lw_sum -= log(p->sla_ratio);
		g->n_w++;
	}
	if (p->tpot_ratio > 1)
		g->tpot_over = true;
}

/* 1/sla_ratio of a group: > 1 clearly passing, < 1 failing (see ratesearch.h). */
static double group_w(const struct group *g)
{
	return g->n_w ? exp(g->lw_sum / g->n_w) : 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int cmp_group(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	return (x->rate > y->rate) - (x->rate < y->rate);
}

/* The attainment a load point is aimed at: where a sequential one drifts
 * to neither verdict; else where a point of n requests would pass
 * *conclusively*, so the boundary point rarely needs confirming. */
static double aim_attainment(const struct probe_ratesearch_config *cfg, size_t n)
{
	double t = cfg->target;

	if (cfg->sequential) {
		struct probe_sequential_config sc;

		probe_sequential_config_init(&sc, t, cfg->max_requests);
		sc.confidence = cfg->confidence;
		sc.margin = cfg->margin;
		return probe_sequential_aim(&sc);
	}
	return MIN(t + cfg->z * sqrt(t * (1 - t) / (double)n), 1 - 1.0 / (double)n);
}

/* logit(attainment) − logit(target), attainment clamped by half a request. */
static double score(const struct probe_ratesearch_config *cfg, const struct group *g)
{
	double n = (double)MAX(g->n, (uint64_t)1), a = (double)g->good / n, t = cfg->target;

	a = CLAMP(a, 0.5 / n, 1 - 0.5 / n);
	if (t <= 0 || t >= 1) /* percentile-only SLA: no attainment to steer by */
		return g->v == PASS ? 1 : -1;
	t = aim_attainment(cfg, cfg->num_requests);
	return log(a / (1 - a)) - log(t / (1 - t));
}

static void answer(struct probe_ratesearch_step *s, enum probe_ratesearch_action a, double rate, ssize_t best,
		   const char *why)
{
	s->action = a;
	s->rate = rate;
	s->best = best;
	s->why = why;
}

static void measure(struct probe_ratesearch_step *s, double rate, uint32_t n, const char *why)
{
	answer(s, PROBE_RATESEARCH_MEASURE, rate, -1, why);
	s->num_requests = n;
}

/* The next rate inside an open or closed bracket (log space), see ratesearch.h. */
static double next_rate(const struct probe_ratesearch_config *cfg, const struct group *lo, const struct group *hi,
			const struct group *sat, double x_sat, double min_rate, bool same_side_twice, bool flat_fail)
{
	double step = 0.95 * log1p(cfg->tolerance);
	double xl, xh, fl, fh, g, w;

	if (!lo && !hi)
		return 0.75 * x_sat;
	if (!lo) {
		/* extrapolate down against a virtual fully-good point at min_rate */
		struct group v = { .n = hi->n, .good = hi->n };

		xl = log(min_rate), fl = score(cfg, &v);
		xh = log(hi->rate), fh = score(cfg, hi);
		g = fh < fl ? xh - fh * (xh - xl) / (fh - fl) : xh - log(2);
		g = CLAMP(g, xh - log(4), xh - log(1.5));
		if (flat_fail) /* attainment did not improve with less load: go down fast */
			g = xh - log(4);
		/* no point just above the lowest useful rate: test that one instead */
		return exp(g) < min_rate * (1 + cfg->tolerance) ? min_rate : exp(g);
	}
	xl = log(lo->rate);
	fl = score(cfg, lo);
	if (hi) {
		xh = log(hi->rate);
		fh = score(cfg, hi);
	} else {
		/* the saturation run stands in for the failing end at X_sat */
		xh = log(x_sat);
		fh = MIN(score(cfg, sat), -0.5);
	}
	w = xh - xl;
	if (w <= 2 * step)
		return exp(xl + step);
	/* with all of lo good and hi far below the target the ends carry no slope */
	bool flat = lo->good >= lo->n && (!hi || (double)hi->good < (double)hi->n * cfg->target / 2);

	if (!hi && flat && w > step)
		return exp(xh - step); /* all good so far: try the cap itself */
	if (same_side_twice || flat || !(fl > fh))
		g = (xl + xh) / 2; /* regula falsi stalls on one side: bisect */
	else
		/* half a step below the estimate: if it passes, one step up from it
		 * closes the bracket */
		g = xl + fl * w / (fl - fh) - step / 2;
	g = CLAMP(g, xl + 0.1 * w, xh - 0.1 * w);
	if (g - xl < step)
		g = xl + step;
	if (xh - g < step)
		g = xh - step;
	return exp(g);
}

/* The saturation anchor of the steering line: w = 0 at X_sat, where the
 * queue grows without bound. Not the saturation run's own TPOT: it is no
 * steady state (every prompt's prefill stalls the decode steps at once:
 * goodput-sim's TPOT there was 3× its TPOT at 95% of X_sat). */
#define ANCHOR_W 0.0

/* Where the line through (x1, w1) and (x2, w2) reaches w = 1, or NAN when
 * it has no usable slope (w must fall as the rate rises). */
static double line_root(double x1, double w1, double x2, double w2)
{
	if (!((w1 - w2) * (x2 - x1) > 0))
		return NAN;
	return x1 + (w1 - 1) * (x2 - x1) / (w1 - w2);
}

/* The decay rate, per service time, of the wait's tail in an M/D/1 queue
 * at utilisation rho: the root x > 0 of rho·(e^x − 1) = x (Cramér–Lundberg). */
static double md1_decay(double rho)
{
	double lo = 1e-12, hi = 60;

	for (int k = 0; k < 80; k++) {
		double x = (lo + hi) / 2;

		if (rho * expm1(x) < x)
			lo = x;
		else
			hi = x;
	}
	return lo;
}

/* The utilisation at which a queue of Poisson arrivals and service rate
 * x_sat (req/s) keeps the wait within w_s for all but `miss` of its
 * requests: the wait exceeds w with probability about ρ·exp(−θ·w·x_sat),
 * θ between M/M/1's 1 − ρ and M/D/1's by the service time's squared
 * coefficient of variation c² (1: exponential; 0: every request alike). By
 * bisection (the probability rises with ρ); 0 when no wait is allowed. */
static double queue_knee(double w_s, double x_sat, double scv, double miss)
{
	double lo = 0, hi = 1;

	if (!(w_s > 0))
		return 0;
	if (!(miss < 1))
		return 1;
	for (int k = 0; k < 50; k++) {
		double rho = (lo + hi) / 2, theta = scv * (1 - rho) + (1 - scv) * md1_decay(rho);

		if (rho * exp(-theta * w_s * x_sat) <= miss)
			lo = rho;
		else
			hi = rho;
	}
	return lo;
}

/* The knee as queueing sets it (see ratesearch.h): the lower of what the
 * TTFT and the E2E bounds allow beyond the single-request latency; 1 when
 * neither is bounded or the latencies are unknown. A bound the fastest
 * request already breaks says nothing of queueing (no rate will meet it):
 * the search finds that fastest where points are short, near X_sat. */
static double first_frac_queueing(const struct probe_ratesearch_config *cfg, const struct probe_rate_point *sat,
				  double x_sat)
{
	double miss = 1 - (cfg->target > 0 && cfg->target < 1 ? aim_attainment(cfg, cfg->num_requests) : 0.9);
	double frac = 1, scv = sat->service_scv > 0 ? MIN(sat->service_scv, 1.0) : 1;

	if (sat->ttft_bound_s > sat->single_ttft_s && sat->single_ttft_s > 0)
		frac = MIN(frac, queue_knee(sat->ttft_bound_s - sat->single_ttft_s, x_sat, scv, miss));
	if (sat->e2e_bound_s > sat->single_e2e_s && sat->single_e2e_s > 0)
		frac = MIN(frac, queue_knee(sat->e2e_bound_s - sat->single_e2e_s, x_sat, scv, miss));
	return frac;
}

/* The first finite rate from the saturation run (see ratesearch.h). */
static double first_rate_informed(const struct probe_ratesearch_config *cfg, const struct probe_rate_point *sat,
				  double x_sat)
{
	double u = sat->tpot_ratio, f, frac = first_frac_queueing(cfg, sat, x_sat);

	if (u > 1) {
		/* TPOT = a/(1 − k·rate) through TPOT(X_sat) = u·bound, with the
		 * unloaded share f = a/TPOT(X_sat) taken from the fastest request
		 * of the saturation run (an upper bound of a), kept plausible */
		f = sat->tpot_floor > 0 ? sat->tpot_floor / u : 1.0 / 3;
		f = CLAMP(f, 0.15, 0.5);
		frac = MIN(frac, (1 - f * u) / (1 - f));
	}
	return x_sat * CLAMP(frac, 2 * cfg->min_rate_frac, 0.9);
}

/* The failing end's rate as the queue of the knee's estimate sees it, when
 * the point failed on its wait (TTFT or E2E) and its TPOT part held: the
 * service rate x at which a queue at hi's rate misses the share of requests
 * hi missed, then that queue's knee. w ∝ 1/rate (the TPOT model's step) is
 * no model of a wait: past the knee the aim quantile of the wait grows
 * with the queue, and a point of 48 good of 61 (TTFT p90 16× its bound)
 * stepped 16× down where the knee lay 6 % below. NAN when the saturation
 * run gave no single-request latency or hi failed otherwise. */
static double queue_fitted_rate(const struct probe_ratesearch_config *cfg, const struct group *hi,
				const struct probe_rate_point *sat)
{
	double miss_aim, m, scv, best = NAN;
	const double wait_s[2] = { sat->ttft_bound_s - sat->single_ttft_s, sat->e2e_bound_s - sat->single_e2e_s };
	const bool known[2] = { sat->ttft_bound_s > 0 && sat->single_ttft_s > 0,
				sat->e2e_bound_s > 0 && sat->single_e2e_s > 0 };

	if (hi->n == 0 || hi->pct_fail || hi->tpot_over || !(cfg->target > 0 && cfg->target < 1))
		return NAN;
	scv = sat->service_scv > 0 ? MIN(sat->service_scv, 1.0) : 1;
	m = CLAMP((double)(hi->n - hi->good) / (double)hi->n, 0.5 / (double)hi->n, 1.0);
	miss_aim = 1 - aim_attainment(cfg, cfg->num_requests);
	for (size_t b = 0; b < 2; b++) {
		double lo = hi->rate, up = hi->rate * 1e3, r;

		if (!known[b] || !(wait_s[b] > 0))
			continue;
		/* the miss share falls as the service rate rises: bisect in log x */
		for (int k = 0; k < 60; k++) {
			double x = sqrt(lo * up), rho = hi->rate / x,
			       theta = scv * (1 - rho) + (1 - scv) * md1_decay(rho);

			if (rho * exp(-theta * wait_s[b] * x) > m)
				lo = x;
			else
				up = x;
		}
		r = lo * queue_knee(wait_s[b], lo, scv, miss_aim);
		if (r > 0 && (isnan(best) || r < best))
			best = r;
	}
	return best;
}

/* The next rate when every point carries sla_ratio (see ratesearch.h).
 * groups are sorted by rate; repeat is +1 (−1) when the last two points both
 * passed (failed), for the Illinois weighting. */
static double next_rate_informed(const struct probe_ratesearch_config *cfg, const struct group *groups, size_t n_groups,
				 const struct group *lo, const struct group *hi, const struct probe_rate_point *sat,
				 double x_sat, double min_rate, int repeat)
{
	double step = 0.95 * log1p(cfg->tolerance);
	double r, g;

	if (n_groups == 0)
		return first_rate_informed(cfg, sat, x_sat);
	if (lo && hi) {
		double wl = group_w(lo), wh = group_w(hi), xl = log(lo->rate), xh = log(hi->rate);

		/* Illinois: the end kept twice in a row counts half */
		if (repeat > 0)
			wh = 1 + (wh - 1) / 2;
		else if (repeat < 0)
			wl = 1 + (wl - 1) / 2;
		if (!(wl > 1))
			g = xl + step; /* lo passed, but not by a margin: the closest test above it */
		else if (!(wh < 1))
			g = xh - step;
		else {
			r = line_root(lo->rate, wl, hi->rate, wh);
			g = isnan(r) ? (xl + xh) / 2 : log(r) - step / 2;
			/* the last point of a narrow bracket: anywhere in [xh − step,
			 * xl + step] closes it; unless the estimate falls inside, take
			 * the top (a pass there is the better answer, a fail closes) */
			if (xh - xl <= 2 * step && !(g + step / 2 > xh - step && g + step / 2 < xl + step))
				return exp(xl + step);
		}
		if (xh - xl <= 2 * step)
			return exp(CLAMP(g, xh - step, xl + step));
		return exp(CLAMP(g, xl + step, xh - step));
	}
	if (lo) {
		/* all passing so far: the line to the saturation anchor lies under
		 * a concave w, the secant of the two highest points over it: take
		 * the higher, an overshoot only closes the bracket */
		double wl = group_w(lo), xl = log(lo->rate), cap = x_sat / (1 + cfg->tolerance) * (1 + 1e-9);
		const struct group *l2 = lo > groups ? lo - 1 : NULL;

		r = line_root(lo->rate, wl, x_sat, ANCHOR_W);
		if (l2 && l2->v == PASS) {
			double r2 = line_root(l2->rate, group_w(l2), lo->rate, wl);

			if (isnan(r) || r2 > r)
				r = r2;
		}
		g = !(wl > 1) || isnan(r) ? xl + step : log(r) - step / 2;
		g = MAX(g, xl + step);
		return MIN(exp(g), cap);
	}
	/* all failing so far: where the wait failed the lowest point, the
	 * queue fitted to its misses; else the lower of the anchor line, the
	 * secant of the two lowest points, and rate ∝ 1/sla_ratio; at most 16×
	 * down */
	double wh = group_w(hi), xh = log(hi->rate), q = queue_fitted_rate(cfg, hi, sat);
	const struct group *h2 = hi + 1 < groups + n_groups ? hi + 1 : NULL;
	double cand[3] = { line_root(hi->rate, wh, x_sat, ANCHOR_W),
			   h2 ? line_root(hi->rate, wh, h2->rate, group_w(h2)) : NAN, hi->rate * wh };

	r = cand[2];
	for (size_t k = 0; k < 2; k++)
		if (cand[k] > 0 && cand[k] < r)
			r = cand[k];
	if (q > 0)
		r = q;
	g = CLAMP(log(MAX(r, 1e-300)) - step / 2, xh - log(16), xh - step);
	return exp(g) < min_rate * (1 + cfg->tolerance) ? min_rate : exp(g);
}

/* What one call of probe_ratesearch_next works on. */
struct search {
	const struct probe_ratesearch_config *cfg;
	const struct probe_rate_point *pts;
	size_t n;
	struct group *groups; /* finite rates, sorted by rate */
	size_t n_groups, n_finite;
	struct group sat;
	const struct group *lo, *hi; /* highest pass below the lowest fail, and that fail */
	double x_sat, min_rate;
	struct probe_ratesearch_step *step;
};

static int check_config(const struct probe_ratesearch_config *cfg, struct error *err)
{
	if (!(cfg->tolerance > 0 && cfg->tolerance < 1) || !(cfg->z > 0) || cfg->num_requests == 0 ||
	    !(cfg->target >= 0 && cfg->target <= 1) || !(cfg->min_rate_frac > 0 && cfg->min_rate_frac < 1) ||
	    (cfg->sequential && cfg->max_requests == 0))
		return error_set(err, -EINVAL, "rate search: bad settings (tolerance %g, z %g, target %g, requests %u)",
				 cfg->tolerance, cfg->z, cfg->target, cfg->num_requests);
	return 0;
}

/* Pools the points by rate (the saturation run apart), judges each group
 * and finds the bracket. */
static int build_groups(struct search *S, struct error *err)
{
	const struct probe_ratesearch_config *cfg = S->cfg;

	S->groups = calloc(S->n, sizeof(*S->groups));
	if (!S->groups)
		return -ENOMEM;
	S->sat = (struct group){ .rate = INFINITY };
	for (size_t i = 0; i < S->n; i++) {
		const struct probe_rate_point *p = &S->pts[i];
		struct group *g = NULL;

		if (isinf(p->rate)) {
			add_point(cfg, &S->sat, p, i);
			continue;
		}
		if (!(p->rate > 0))
			return error_set(err, -EINVAL, "rate search: load point %zu has rate %g", i, p->rate);
		S->n_finite++;
		for (size_t k = 0; k < S->n_groups; k++)
			if (same_rate(S->groups[k].rate, p->rate))
				g = &S->groups[k];
		if (!g)
			g = &S->groups[S->n_groups++];
		add_point(cfg, g, p, i);
	}
	judge(cfg, &S->sat);
	for (size_t k = 0; k < S->n_groups; k++)
		judge(cfg, &S->groups[k]);
	qsort(S->groups, S->n_groups, sizeof(*S->groups), cmp_group);
	for (size_t k = 0; k < S->n_groups && !S->hi; k++)
		if (S->groups[k].v == FAIL)
			S->hi = &S->groups[k];
	for (size_t k = S->n_groups; k > 0 && !S->lo; k--)
		if (S->groups[k - 1].v == PASS && (!S->hi || S->groups[k - 1].rate < S->hi->rate))
			S->lo = &S->groups[k - 1];
	S->step->lo = S->lo ? S->lo->rate : 0;
	S->step->hi = S->hi ? S->hi->rate : INFINITY;
	return 0;
}

/* An answer at rate (a group's, or the saturation run's), noting a sure
 * pass above it: the verdicts then disagree, and the answer says so rather
 * than quietly reporting less than was measured. */
static void answer_at(struct search *S, enum probe_ratesearch_action a, const struct group *g, const char *why)
{
	answer(S->step, a, g->rate, (ssize_t)g->last, why);
	for (size_t k = 0; k < S->n_groups; k++) {
		const struct group *x = &S->groups[k];

		if (x->rate > g->rate && !same_rate(x->rate, g->rate) && x->v == PASS && x->conclusive)
			S->step->met_above = x->rate;
	}
}

/* Missed at the cap by its point estimate, with the attainment's 90 %
 * interval over its requests (every point at its rate) still holding the
 * target: 8 of 9 good (62-97 %) does not rule a rate out. A percentile
 * bound that failed is no question of too few requests. */
static bool in_doubt(const struct probe_ratesearch_config *cfg, const struct group *g)
{
	double lo, hi;

	if (g->v != FAIL || !g->undecided || g->pct_fail || !(cfg->target > 0 && cfg->target < 1))
		return false;
	probe_wilson_interval((uint32_t)MIN(g->good, UINT32_MAX), (uint32_t)MIN(g->n, UINT32_MAX), PROBE_CAP_Z, &lo,
			      &hi);
	return hi >= cfg->target - 1e-9;
}

/* The answers the bracket gives, or a point that confirms its lower end:
 * true when the step is decided. */
static bool decide_from_bracket(struct search *S)
{
	const struct probe_ratesearch_config *cfg = S->cfg;
	const struct group *lo = S->lo, *hi = S->hi;

	if (!lo) {
		/* a lowest rate whose interval still holds the target is no
		 * proof: it is measured again (measure_in_doubt_at_floor) */
		if (hi && hi->rate <= S->min_rate * (1 + 1e-9) && !in_doubt(cfg, hi)) {
			answer(S->step, PROBE_RATESEARCH_NEVER, hi->rate, -1,
			       hi->undecided ? "the SLA fails at the lowest useful rate: its 90 % interval lies below "
					       "the target"
					     : "the SLA fails even at the lowest useful rate");
			return true;
		}
		return false;
	}
	bool closed_hi = hi && hi->rate <= lo->rate * (1 + cfg->tolerance) * (1 + 1e-12);
	bool at_cap = !hi && lo->rate * (1 + cfg->tolerance) >= S->x_sat;

	if (lo->knee && !closed_hi && !at_cap) {
		/* met by its point estimate at the cap: its attainment is not
		 * told apart from the target, so the knee is here */
		answer_at(S, PROBE_RATESEARCH_DONE, lo, "met at the cap: the knee is at this rate");
		return true;
	}
	if ((closed_hi || at_cap) && !lo->conclusive) {
		/* one more point brings the pool at this rate to max_requests */
		measure(S->step, lo->rate,
			(uint32_t)MAX((uint64_t)cfg->max_requests - lo->n, (uint64_t)cfg->num_requests),
			"confirming the boundary with more requests");
		return true;
	}
	if (closed_hi)
		answer_at(S, PROBE_RATESEARCH_DONE, lo,
			  hi->undecided ? "bracket within tolerance; the rate above it stayed undecided"
					: "bracket within tolerance");
	else if (at_cap)
		answer_at(S, PROBE_RATESEARCH_ALWAYS, lo, "the SLA holds up to the saturation throughput");
	return closed_hi || at_cap;
}

/* The requests a point at a finite rate asks for. */
static uint32_t point_requests(const struct probe_ratesearch_config *cfg)
{
	return cfg->sequential ? cfg->max_requests : cfg->num_requests;
}

/* max_points finite points spent, or the probe's time: the best sure
 * pass, or NEVER. */
static bool sure_pass(const struct probe_ratesearch_config *cfg, const struct group *g)
{
	double lo, hi;

	if (g->v != PASS || !g->conclusive)
		return false;
	if (!g->undecided || cfg->target <= 0)
		return true;
	/* met at its cap by its point estimate: sure when its 90 % interval
	 * reaches no lower than the knee's (150 of 160, 13 of 13), not a point
	 * the probe's time cut after a request or two (1 of 1: 27-100 %) */
	probe_wilson_interval((uint32_t)MIN(g->good, UINT32_MAX), (uint32_t)MIN(g->n, UINT32_MAX), PROBE_CAP_Z, &lo,
			      &hi);
	return lo >= cfg->target - 2 * cfg->margin * (1 - cfg->target) - 1e-9;
}

static void decide_budget_spent(struct search *S, bool out_of_time)
{
	const struct group *best = S->lo && sure_pass(S->cfg, S->lo) ? S->lo : NULL;

	/* else the highest rate that passed with confidence below the failing end */
	for (size_t k = 0; k < S->n_groups && !best; k++) {
		const struct group *g = &S->groups[S->n_groups - 1 - k];

		if (sure_pass(S->cfg, g) && (!S->hi || g->rate < S->hi->rate))
			best = g;
	}
	if (best)
		answer_at(S, PROBE_RATESEARCH_DONE, best, out_of_time ? "time spent" : "point budget spent");
	else if (!S->lo && S->hi && in_doubt(S->cfg, S->hi))
		answer(S->step, PROBE_RATESEARCH_NEVER, S->step->hi, -1,
		       out_of_time ? "time spent with the lowest rate undecided: its 90 % interval holds the target"
				   : "point budget spent with the lowest rate undecided: its 90 % interval holds the "
				     "target");
	else
		answer(S->step, PROBE_RATESEARCH_NEVER, S->step->hi, -1,
		       out_of_time ? "time spent without a passing rate" : "point budget spent without a passing rate");
	S->step->budget_spent = !out_of_time;
	S->step->out_of_time = out_of_time;
}

/* The lowest failing rate reached its cap undecided, with nothing passing
 * within a tolerance step below it: the knee lies just below, and a point
 * one step down closes the bracket when it passes. True when it measures. */
static bool measure_below_undecided(struct search *S)
{
	const struct probe_ratesearch_config *cfg = S->cfg;
	double r;

	if (!S->hi || !S->hi->knee)
		return false;
	r = S->hi->rate / pow(1 + cfg->tolerance, 0.95);
	if (S->lo && r <= S->lo->rate * (1 + 1e-9))
		return false; /* the bracket is narrower than a step: the others decide */
	if (r < S->min_rate)
		r = S->min_rate;
	measure(S->step, r, point_requests(cfg), "the knee is just below a rate undecided at the cap");
	return true;
}

/* Nothing passed, and the lowest useful rate missed at its cap with its
 * interval still holding the target: that rate again, its requests pooled
 * with those before, until the interval leaves the target (a pass, or a
 * sure miss) or the points or the probe's time run out. True when it
 * measures. */
static bool measure_in_doubt_at_floor(struct search *S)
{
	if (S->lo || !S->hi || S->hi->rate > S->min_rate * (1 + 1e-9) || !in_doubt(S->cfg, S->hi))
		return false;
	measure(S->step, S->hi->rate, point_requests(S->cfg),
		"the lowest rate is undecided: its 90 % interval holds the target; more requests there");
	return true;
}

/* The next point when every point carries sla_ratio (steering by latency). */
static void measure_informed(struct search *S)
{
	const struct probe_ratesearch_config *cfg = S->cfg;
	const struct group *lo_s = NULL, *hi_s = NULL;
	const struct probe_rate_point *pts = S->pts;
	size_t n = S->n;
	int repeat = 0;

	/* steer by conclusive passes: a pass still in doubt is no lower end */
	for (size_t k = 0; k < S->n_groups && !hi_s; k++)
		if (!(S->groups[k].v == PASS && S->groups[k].conclusive))
			hi_s = &S->groups[k];
		else
			lo_s = &S->groups[k];
	if (hi_s && hi_s->v == PASS && lo_s && hi_s->rate <= lo_s->rate * (1 + cfg->tolerance) * (1 + 1e-12)) {
		measure(S->step, hi_s->rate,
			(uint32_t)MAX((uint64_t)cfg->max_requests - MIN(hi_s->n, (uint64_t)cfg->max_requests),
				      (uint64_t)cfg->num_requests),
			"confirming a doubtful pass above the bracket");
		return;
	}
	if (n >= 3 && !isinf(pts[n - 1].rate) && !isinf(pts[n - 2].rate) && pts[n - 1].sla_met == pts[n - 2].sla_met)
		repeat = pts[n - 1].sla_met ? 1 : -1;
	measure(S->step,
		next_rate_informed(cfg, S->groups, S->n_groups, lo_s, hi_s, &pts[0], S->x_sat, S->min_rate, repeat),
		point_requests(cfg), S->n_finite == 0 ? "first load point" : "steering by latency");
}

/* The next point from attainment alone (points without sla_ratio). */
static void measure_blind(struct search *S)
{
	const struct probe_ratesearch_config *cfg = S->cfg;
	const struct probe_rate_point *pts = S->pts;
	const struct group *lo = S->lo, *hi = S->hi;
	size_t n = S->n;
	bool same_side_twice = false, flat_fail = false;

	if (n >= 3 && !isinf(pts[n - 1].rate) && !isinf(pts[n - 2].rate))
		same_side_twice = pts[n - 1].sla_met == pts[n - 2].sla_met;
	if (!lo && hi && hi + 1 < S->groups + S->n_groups) {
		const struct group *h2 = hi + 1; /* the next failing rate above (all fail without lo) */

		flat_fail = fabs((double)hi->good / (double)MAX(hi->n, (uint64_t)1) -
				 (double)h2->good / (double)MAX(h2->n, (uint64_t)1)) < 0.05;
	}
	measure(S->step, next_rate(cfg, lo, hi, &S->sat, S->x_sat, S->min_rate, same_side_twice, flat_fail),
		point_requests(cfg),
		S->n_finite == 0 ? "first load point"
		: lo && hi       ? "narrowing the bracket"
		: lo             ? "raising the rate"
				 : "lowering the rate");
}

/* Before any finite point: what the saturation run settles. True when it
 * settles the step. */
static bool decide_from_saturation(struct search *S)
{
	const struct probe_rate_point *pts = S->pts;

	S->x_sat = pts[0].throughput;
	S->step->saturation = S->x_sat;
	if (!(S->x_sat > 0)) {
		answer(S->step, PROBE_RATESEARCH_NEVER, 0, -1, "the saturation run completed no request");
		return true;
	}
	S->min_rate = S->x_sat * S->cfg->min_rate_frac;
	if (S->sat.v == PASS && S->sat.conclusive) {
		answer(S->step, PROBE_RATESEARCH_ALWAYS, S->x_sat, (ssize_t)S->sat.last,
		       "the SLA holds even with every request sent at once");
		return true;
	}
	if (S->sat.v == PASS && S->n_finite == 0) {
		measure(S->step, INFINITY, S->cfg->num_requests, "saturation run passed, but not conclusively");
		return true;
	}
	return false;
}

/* A NEVER while some rate met the SLA with confidence above a failing one
 * would hide a measured pass: the answer is that pass, and the failure
 * below it is named. */
static void never_over_a_pass(struct search *S)
{
	const struct group *best = NULL;

	if (S->step->action != PROBE_RATESEARCH_NEVER)
		return;
	for (size_t k = 0; k < S->n_groups; k++)
		if (S->groups[k].v == PASS && S->groups[k].conclusive)
			best = &S->groups[k];
	if (!best)
		return;
	answer_at(S, PROBE_RATESEARCH_DONE, best, "met above a rate that failed: the verdicts disagree");
	S->step->failed_below = S->hi ? S->hi->rate : 0;
}

int probe_ratesearch_next(const struct probe_ratesearch_config *cfg, const struct probe_rate_point *pts, size_t n,
			  struct probe_ratesearch_step *ret, struct error *err)
{
	struct probe_ratesearch_step s = { .best = -1, .hi = INFINITY };
	struct search S = { .cfg = cfg, .pts = pts, .n = n, .step = &s };
	bool informed;
	int r;

	r = check_config(cfg, err);
	if (r < 0)
		return r;
	if (n == 0) {
		measure(&s, INFINITY, cfg->num_requests, "saturation run");
		*ret = s;
		return 0;
	}
	if (!isinf(pts[0].rate))
		return error_set(err, -EINVAL,
				 "rate search: the first load point must be the saturation run (rate inf)");
	r = build_groups(&S, err);
	if (r >= 0 && !decide_from_saturation(&S) && !decide_from_bracket(&S)) {
		if (S.n_finite >= cfg->max_points || cfg->out_of_time)
			decide_budget_spent(&S, cfg->out_of_time && S.n_finite < cfg->max_points);
		else if (!measure_in_doubt_at_floor(&S) && !measure_below_undecided(&S)) {
			informed = true;
			for (size_t i = 0; i < n; i++)
				informed = informed && pts[i].sla_ratio > 0;
			if (informed)
				measure_informed(&S);
			else
				measure_blind(&S);
		}
		never_over_a_pass(&S);
	}
	free(S.groups);
	if (r < 0)
		return r;
	*ret = s;
	return 0;
}

#define RATIO_FAILED 1e6 /* a failed request: slower than any bound */

/* One request's worst latency/bound over the per-request bounds (TPOT and
 * ITL only when tpot_only); 0 when none applies. */
/* What a request the probe cut showed of metric m, ms: a lower bound of what
 * it would have shown — a TTFT of at least its time in flight when no token
 * came (its e2e_usec), else the figures of the tokens that came (no TPOT or
 * ITL when too few came to tell: no evidence against the bound). */
static double cut_value_ms(const struct probe_request_result *r, enum probe_metric m)
{
	struct probe_request_result shown = *r;

	if (m == PROBE_METRIC_TTFT && r->ttft_usec == 0)
		return (double)r->e2e_usec / 1000.0;
	shown.success = true;
	return probe_request_value_ms(&shown, m);
}

static double request_ratio(const struct probe_request_result *r, const struct probe_sla *sla, bool tpot_only)
{
	double worst = 0;

	for (size_t i = 0; i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];
		double v;

		if (b->percentile > 0 || !(b->bound_ms > 0))
			continue;
		if (tpot_only && b->metric != PROBE_METRIC_TPOT && b->metric != PROBE_METRIC_ITL)
			continue;
		v = r->cut ? cut_value_ms(r, b->metric) : probe_request_value_ms(r, b->metric);
		if (isinf(v))
			return RATIO_FAILED;
		worst = MAX(worst, v / b->bound_ms);
	}
	/* a cut request missed the SLA, by the cut's own rule */
	return r->cut && !tpot_only ? MAX(worst, 1.0) : worst;
}

/* The worst pX/bound over the percentile bounds (TPOT/ITL only when
 * tpot_only); 0 when there are none. x has room for every ITL gap. */
static double percentile_ratio(const struct probe_request_result *reqs, size_t n, const struct probe_sla *sla,
			       bool tpot_only, double *x)
{
	double worst = 0;

	for (size_t i = 0; i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];
		size_t m = 0, failed = 0;

		if (!(b->percentile > 0) || !(b->bound_ms > 0))
			continue;
		if (tpot_only && b->metric != PROBE_METRIC_TPOT && b->metric != PROBE_METRIC_ITL)
			continue;
		for (size_t k = 0; k < n; k++) {
			const struct probe_request_result *r = &reqs[k];

			if (!r->success) {
				failed++;
				continue;
			}
			if (b->metric == PROBE_METRIC_TTFT)
				x[m++] = (double)r->ttft_usec;
			else if (b->metric == PROBE_METRIC_E2EL)
				x[m++] = (double)r->e2e_usec;
			else if (b->metric == PROBE_METRIC_TPOT && probe_request_tpot_usec(r) >= 0)
				x[m++] = probe_request_tpot_usec(r);
			else if (b->metric == PROBE_METRIC_ITL)
				for (size_t g = 0; g < r->n_itl; g++)
					x[m++] = (double)r->itl_usec[g];
		}
		if ((double)failed > (double)n * (100 - b->percentile) / 100) {
			worst = RATIO_FAILED;
			continue;
		}
		if (m == 0)
			continue;
		worst = MAX(worst, probe_percentile_select(x, m, b->percentile) / (b->bound_ms * 1000.0));
	}
	return worst;
}

/* The spread of the service time: the squared coefficient of variation of
 * the gaps between completions of a point whose requests were all sent at
 * once (one slot: each gap is one request's service), the first completion
 * left out; 0 with fewer than 8 gaps. x has room for n values. */
static double service_scv(const struct probe_request_result *reqs, size_t n, double *x)
{
	double sum = 0, sum2 = 0, mean;
	size_t m = 0;

	for (size_t k = 0; k < n; k++)
		if (reqs[k].success)
			x[m++] = (double)(reqs[k].send_usec + reqs[k].e2e_usec);
	if (m < 9)
		return 0;
	qsort(x, m, sizeof(*x), cmp_double);
	for (size_t k = 1; k < m; k++) {
		double g = x[k] - x[k - 1];

		sum += g;
		sum2 += g * g;
	}
	mean = sum / (double)(m - 1);
	return mean > 0 ? MAX(sum2 / (double)(m - 1) / (mean * mean) - 1, 0.0) : 0;
}

/* The single-request latency (the fastest request's TTFT and E2E), the
 * service time's spread and the tightest TTFT and E2E bounds, s, for the
 * knee's estimate. */
static void single_latency(const struct probe_sla *sla, const struct probe_request_result *reqs, size_t n, double *x,
			   struct probe_rate_point *point)
{
	point->service_scv = service_scv(reqs, n, x);
	for (size_t k = 0; k < n; k++) {
		double ttft = (double)reqs[k].ttft_usec / 1e6, e2e = (double)reqs[k].e2e_usec / 1e6;

		if (!reqs[k].success)
			continue;
		if (ttft > 0 && (point->single_ttft_s == 0 || ttft < point->single_ttft_s))
			point->single_ttft_s = ttft;
		if (e2e > 0 && (point->single_e2e_s == 0 || e2e < point->single_e2e_s))
			point->single_e2e_s = e2e;
	}
	for (size_t i = 0; i < sla->n_bounds; i++) {
		double *b = sla->bounds[i].metric == PROBE_METRIC_TTFT   ? &point->ttft_bound_s
			    : sla->bounds[i].metric == PROBE_METRIC_E2EL ? &point->e2e_bound_s
									 : NULL;

		if (b && sla->bounds[i].bound_ms > 0 && (*b == 0 || sla->bounds[i].bound_ms / 1000 < *b))
			*b = sla->bounds[i].bound_ms / 1000;
	}
}

int probe_ratesearch_ratios(const struct probe_ratesearch_config *cfg, const struct probe_sla *sla,
			    const struct probe_request_result *reqs, size_t n, struct probe_rate_point *point)
{
	_cleanup_(freep) double *x = NULL;
	double ratio[2] = { 0, 0 }, floor_ratio = 0, t = cfg->target, q;
	size_t m = n, has_tpot_bound = 0;

	point->sla_ratio = point->tpot_ratio = point->tpot_floor = 0;
	point->single_ttft_s = point->single_e2e_s = point->ttft_bound_s = point->e2e_bound_s = 0;
	if (!sla || n == 0)
		return 0;
	for (size_t k = 0; k < n; k++)
		m += reqs[k].n_itl;
	x = calloc(m, sizeof(*x));
	if (!x)
		return -ENOMEM;
	single_latency(sla, reqs, n, x, point);
	/* aim at the fewest good requests that pass the Wilson check, so that
	 * sla_ratio <= 1 exactly when this point passes conclusively; a
	 * sequential point at the attainment where its test turns to "met" */
	q = 0;
	if (t > 0 && cfg->sequential)
		q = aim_attainment(cfg, n);
	else if (t > 0) {
		size_t k = n;

		while (k > 1) {
			double lo, hi;

			probe_wilson_interval((uint32_t)(k - 1), (uint32_t)n, cfg->z, &lo, &hi);
			if (lo < t)
				break;
			k--;
		}
		q = (double)k / (double)n;
	}
	for (int tpot_only = 0; tpot_only <= 1; tpot_only++) {
		if (q > 0 && probe_sla_has_request_bounds(sla)) {
			size_t idx;

			for (size_t k = 0; k < n; k++)
				x[k] = request_ratio(&reqs[k], sla, tpot_only);
			/* the smallest value that ceil(q·n) requests stay within */
			idx = (size_t)lround(q * (double)n);
			ratio[tpot_only] = array_select_double(x, n, CLAMP(idx, (size_t)1, n) - 1);
		}
		ratio[tpot_only] = MAX(ratio[tpot_only], percentile_ratio(reqs, n, sla, tpot_only, x));
	}
	for (size_t i = 0; i < sla->n_bounds; i++)
		if (sla->bounds[i].metric == PROBE_METRIC_TPOT && sla->bounds[i].bound_ms > 0) {
			has_tpot_bound = 1;
			for (size_t k = 0; k < n; k++) {
				double tp = probe_request_tpot_usec(&reqs[k]) / (sla->bounds[i].bound_ms * 1000.0);

				if (tp > 0 && (floor_ratio == 0 || tp < floor_ratio))
					floor_ratio = tp;
			}
			break;
		}
	/* ratios are used in logs: keep them positive and finite */
	point->sla_ratio = ratio[0] > 0 ? CLAMP(ratio[0], 1e-6, RATIO_FAILED) : 0;
	point->tpot_ratio = ratio[1] > 0 ? CLAMP(ratio[1], 1e-6, RATIO_FAILED) : 0;
	point->tpot_floor = has_tpot_bound ? floor_ratio : 0;
	return 0;
}
