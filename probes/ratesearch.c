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

#include "macro.h"

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

enum verdict { FAIL, PASS };

struct group {
	double rate;
	uint64_t n, good;
	bool pct_fail;   /* failed a percentile bound although attainment held */
	bool last_met;   /* sla_met of the newest point */
	size_t last;     /* index of the newest point */
	enum verdict v;  /* by the point estimate, doubtful ones at max_requests as FAIL */
	bool conclusive;
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
}

static int cmp_group(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	return (x->rate > y->rate) - (x->rate < y->rate);
}

/* logit(attainment) − logit(target), attainment clamped by half a request. */
static double score(const struct probe_ratesearch_config *cfg, const struct group *g)
{
	double n = (double)MAX(g->n, (uint64_t)1), a = (double)g->good / n, t = cfg->target;

	a = CLAMP(a, 0.5 / n, 1 - 0.5 / n);
	if (t <= 0 || t >= 1) /* percentile-only SLA: no attainment to steer by */
		return g->v == PASS ? 1 : -1;
	/* aim where a point of num_requests would pass *conclusively*, so the
	 * boundary point rarely needs confirming */
	t = MIN(t + cfg->z * sqrt(t * (1 - t) / cfg->num_requests), 1 - 1.0 / cfg->num_requests);
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

int probe_ratesearch_next(const struct probe_ratesearch_config *cfg, const struct probe_rate_point *pts, size_t n,
			  struct probe_ratesearch_step *ret, struct error *err)
{
	_cleanup_(freep) struct group *groups = NULL;
	struct probe_ratesearch_step s = { .best = -1, .hi = INFINITY };
	struct group sat = { .rate = INFINITY };
	struct group *lo = NULL, *hi = NULL;
	size_t n_groups = 0, n_finite = 0;
	double x_sat, min_rate;
	bool same_side_twice = false, flat_fail = false;

	if (!(cfg->tolerance > 0 && cfg->tolerance < 1) || !(cfg->z > 0) || cfg->num_requests == 0 ||
	    !(cfg->target >= 0 && cfg->target <= 1) || !(cfg->min_rate_frac > 0 && cfg->min_rate_frac < 1))
		return error_set(err, -EINVAL, "rate search: bad settings (tolerance %g, z %g, target %g, requests %u)",
				 cfg->tolerance, cfg->z, cfg->target, cfg->num_requests);
	if (n == 0) {
		measure(&s, INFINITY, cfg->num_requests, "saturation run");
		*ret = s;
		return 0;
	}
	if (!isinf(pts[0].rate))
		return error_set(err, -EINVAL, "rate search: the first load point must be the saturation run (rate inf)");

	groups = calloc(n, sizeof(*groups));
	if (!groups)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct group *g = NULL;

		if (isinf(pts[i].rate)) {
			add_point(cfg, &sat, &pts[i], i);
			continue;
		}
		if (!(pts[i].rate > 0))
			return error_set(err, -EINVAL, "rate search: load point %zu has rate %g", i, pts[i].rate);
		n_finite++;
		for (size_t k = 0; k < n_groups; k++)
			if (same_rate(groups[k].rate, pts[i].rate))
				g = &groups[k];
		if (!g)
			g = &groups[n_groups++];
		add_point(cfg, g, &pts[i], i);
	}
	judge(cfg, &sat);

	x_sat = pts[0].throughput;
	s.saturation = x_sat;
	if (!(x_sat > 0)) {
		answer(&s, PROBE_RATESEARCH_NEVER, 0, -1, "the saturation run completed no request");
		*ret = s;
		return 0;
	}
	min_rate = x_sat * cfg->min_rate_frac;
	if (sat.v == PASS && sat.conclusive) {
		answer(&s, PROBE_RATESEARCH_ALWAYS, x_sat, (ssize_t)sat.last,
		       "the SLA holds even with every request sent at once");
		*ret = s;
		return 0;
	}
	if (sat.v == PASS && n_finite == 0) {
		measure(&s, INFINITY, cfg->num_requests, "saturation run passed, but not conclusively");
		*ret = s;
		return 0;
	}

	for (size_t k = 0; k < n_groups; k++)
		judge(cfg, &groups[k]);
	qsort(groups, n_groups, sizeof(*groups), cmp_group);
	for (size_t k = 0; k < n_groups; k++)
		if (groups[k].v == FAIL) {
			hi = &groups[k];
			break;
		}
	for (size_t k = n_groups; k > 0; k--)
		if (groups[k - 1].v == PASS && (!hi || groups[k - 1].rate < hi->rate)) {
			lo = &groups[k - 1];
			break;
		}
	s.lo = lo ? lo->rate : 0;
	s.hi = hi ? hi->rate : INFINITY;

	if (lo) {
		bool closed_hi = hi && hi->rate <= lo->rate * (1 + cfg->tolerance) * (1 + 1e-12);
		bool at_cap = !hi && lo->rate * (1 + cfg->tolerance) >= x_sat;

		if ((closed_hi || at_cap) && !lo->conclusive) {
			/* one more point brings the pool at this rate to max_requests */
			measure(&s, lo->rate, (uint32_t)MAX((uint64_t)cfg->max_requests - lo->n, (uint64_t)cfg->num_requests),
				"confirming the boundary with more requests");
			*ret = s;
			return 0;
		}
		if (closed_hi) {
			answer(&s, PROBE_RATESEARCH_DONE, lo->rate, (ssize_t)lo->last, "bracket within tolerance");
			*ret = s;
			return 0;
		}
		if (at_cap) {
			answer(&s, PROBE_RATESEARCH_ALWAYS, lo->rate, (ssize_t)lo->last,
			       "the SLA holds up to the saturation throughput");
			*ret = s;
			return 0;
		}
	} else if (hi && hi->rate <= min_rate * (1 + 1e-9)) {
		answer(&s, PROBE_RATESEARCH_NEVER, hi->rate, -1, "the SLA fails even at the lowest useful rate");
		*ret = s;
		return 0;
	}
	if (n_finite >= cfg->max_points) {
		if (lo && lo->conclusive)
			answer(&s, PROBE_RATESEARCH_DONE, lo->rate, (ssize_t)lo->last, "point budget spent");
		else
			answer(&s, PROBE_RATESEARCH_NEVER, s.hi, -1, "point budget spent without a passing rate");
		*ret = s;
		return 0;
	}
	if (n >= 3 && !isinf(pts[n - 1].rate) && !isinf(pts[n - 2].rate))
		same_side_twice = pts[n - 1].sla_met == pts[n - 2].sla_met;
	if (!lo && hi && hi + 1 < groups + n_groups) {
		const struct group *h2 = hi + 1; /* the next failing rate above (all fail without lo) */

		flat_fail = fabs((double)hi->good / (double)MAX(hi->n, (uint64_t)1) -
				 (double)h2->good / (double)MAX(h2->n, (uint64_t)1)) < 0.05;
	}
	measure(&s, next_rate(cfg, lo, hi, &sat, x_sat, min_rate, same_side_twice, flat_fail), cfg->num_requests,
		n_finite == 0 ? "first load point" : lo && hi ? "narrowing the bracket" : lo ? "raising the rate" : "lowering the rate");
	*ret = s;
	return 0;
}
