/* workload-measured.c — the parts of the workload generator that draw from
 * what was measured on a server: lengths from a histogram's buckets, and
 * arrivals that follow a rate profile over the day.
 *
 * A histogram says how many requests fell in each bucket, not where inside
 * it; uniform inside every bucket would put the mean at the buckets'
 * midpoints, which for vLLM's 1-2-5 bounds (a bucket from 1000 to 2000
 * tokens) is off by as much as a quarter. Inside a bucket lengths follow a
 * smooth CDF through the bounds (monotone cubic in ln(length)), which puts
 * the mass of a falling tail near the bucket's lower edge as a real length
 * distribution does. The server also exports the sum, so the mean is known:
 * one exponential tilt θ of every bucket's quantiles (a density ∝ e^(θ·v)
 * over v in [0, 1)) is solved so that the draws have that mean, keeping
 * every bucket's count exact.
 *
 * A rate profile warps the time of the arrival process: the unit-rate
 * process's k-th point τ_k becomes the time t at which the expected number
 * of arrivals Λ(t) = ∫ λ reaches τ_k, λ being the profile (scaled to the
 * config's mean rate) at the day time the run has reached. Poisson stays
 * Poisson with that varying rate, gamma keeps its burstiness. */
#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "time-util.h"
#include "workload-internal.h"

#define THETA_MAX 30.0

/* ---- histograms ---- */

/* Integer lengths of bucket i: lo .. lo + width − 1. */
static void bucket_range(const struct probe_length_histogram *h, uint32_t i, uint32_t *ret_lo, uint32_t *ret_width)
{
	double a = i ? h->le[i - 1] : 0, b = h->le[i];
	uint32_t lo = (uint32_t)MIN(floor(a) + 1, (double)PROBE_MAX_TOKENS_PER_REQUEST);
	uint32_t hi = (uint32_t)MIN(MAX(floor(b), (double)lo), (double)PROBE_MAX_TOKENS_PER_REQUEST);

	*ret_lo = lo;
	*ret_width = hi - lo + 1;
}

double probe_histogram_mean_uniform(const struct probe_length_histogram *h)
{
	double sum = 0, total = 0;

	for (uint32_t i = 0; i < h->n; i++) {
		uint32_t lo, w;

		if (!(h->count[i] > 0))
			continue;
		bucket_range(h, i, &lo, &w);
		sum += h->count[i] * (lo + (w - 1) / 2.0);
		total += h->count[i];
	}
	return total > 0 ? sum / total : NAN;
}

/* The histogram's CDF as a smooth curve through its bounds: monotone cubic
 * Hermite interpolation (Fritsch–Carlson) of F against ln(length), which
 * follows the bell of a length distribution inside a bucket instead of
 * flattening it. F is exact at every bound. */
struct cdf_curve {
	uint32_t n;                                /* knots: the lower edge, then each bound */
	double z[PROBE_HISTOGRAM_MAX_BUCKETS + 1]; /* ln(length) */
	double f[PROBE_HISTOGRAM_MAX_BUCKETS + 1]; /* F */
	double d[PROBE_HISTOGRAM_MAX_BUCKETS + 1]; /* dF/dz */
};

static void cdf_curve_init(const struct probe_length_histogram *h, double total, struct cdf_curve *c)
{
	double cum = 0, sec[PROBE_HISTOGRAM_MAX_BUCKETS];

	c->n = h->n + 1;
	c->z[0] = log(MIN(0.5, h->le[0] / 2));
	c->f[0] = 0;
	for (uint32_t i = 0; i < h->n; i++) {
		cum += MAX(h->count[i], 0.0);
		c->z[i + 1] = log(h->le[i]);
		c->f[i + 1] = MIN(cum / total, 1.0);
	}
	for (uint32_t k = 0; k + 1 < c->n; k++)
		sec[k] = (c->f[k + 1] - c->f[k]) / (c->z[k + 1] - c->z[k]);
	c->d[0] = sec[0];
	c->d[c->n - 1] = sec[c->n - 2];
	for (uint32_t k = 1; k + 1 < c->n; k++) {
		double h0 = c->z[k] - c->z[k - 1], h1 = c->z[k + 1] - c->z[k];
		double w1 = 2 * h1 + h0, w2 = h1 + 2 * h0;

		c->d[k] = sec[k - 1] > 0 && sec[k] > 0 ? (w1 + w2) / (w1 / sec[k - 1] + w2 / sec[k]) : 0;
	}
}

/* The length at which the curve reaches F = target inside segment k (knots k, k + 1). */
static double cdf_curve_invert(const struct cdf_curve *c, uint32_t k, double target)
{
	double h = c->z[k + 1] - c->z[k], lo = 0, hi = 1;

	for (int it = 0; it < 48; it++) {
		double t = (lo + hi) / 2, t2 = t * t, t3 = t2 * t;
		double v = (2 * t3 - 3 * t2 + 1) * c->f[k] + (t3 - 2 * t2 + t) * h * c->d[k] +
			   (-2 * t3 + 3 * t2) * c->f[k + 1] + (t3 - t2) * h * c->d[k + 1];

		if (v < target)
			lo = t;
		else
			hi = t;
	}
	return exp(c->z[k] + (lo + hi) / 2 * h);
}

/* The share of a tilted density ∝ e^(θv) on [0, 1) in [a, b). */
static double tilted_mass(double theta, double a, double b)
{
	if (fabs(theta) < 1e-9)
		return b - a;
	return (exp(theta * b) - exp(theta * a)) / expm1(theta);
}

/* Expected length at tilt θ: Σ over cells of their mass times their mean. */
static double mean_at(const double *cell_mean, double theta)
{
	double m = 0;

	for (uint32_t j = 0; j < PROBE_HISTOGRAM_GRID; j++)
		m += tilted_mass(theta, (double)j / PROBE_HISTOGRAM_GRID, (double)(j + 1) / PROBE_HISTOGRAM_GRID) *
		     cell_mean[j];
	return m;
}

void probe_histogram_prepare(const struct probe_length_dist *d, struct probe_histogram_draw *p)
{
	const struct probe_length_histogram *h = &d->hist;
	double total = 0, cell_mean[PROBE_HISTOGRAM_GRID] = { 0 }, lo_t = -THETA_MAX, hi_t = THETA_MAX;
	struct cdf_curve c;

	*p = (struct probe_histogram_draw){ .n = h->n };
	for (uint32_t i = 0; i < h->n; i++) {
		bucket_range(h, i, &p->lo[i], &p->width[i]);
		total += MAX(h->count[i], 0.0);
		p->cum[i] = total;
	}
	if (!(total > 0))
		return;
	cdf_curve_init(h, total, &c);
	for (uint32_t i = 0; i < h->n; i++) {
		double share = MAX(h->count[i], 0.0) / total;

		p->q[i][0] = exp(c.z[i]);
		p->q[i][PROBE_HISTOGRAM_GRID] = exp(c.z[i + 1]);
		for (uint32_t j = 1; j < PROBE_HISTOGRAM_GRID && share > 0; j++)
			p->q[i][j] = cdf_curve_invert(&c, i, c.f[i] + (c.f[i + 1] - c.f[i]) * j / PROBE_HISTOGRAM_GRID);
		for (uint32_t j = 0; j < PROBE_HISTOGRAM_GRID && share > 0; j++) {
			/* a length is the continuous value rounded up into the bucket's integers */
			double m = (p->q[i][j] + p->q[i][j + 1]) / 2 + 0.5;

			cell_mean[j] += share * MIN(MAX(m, (double)p->lo[i]), (double)(p->lo[i] + p->width[i] - 1));
		}
	}
	if (!isfinite(d->mean))
		return;
	if (d->mean <= mean_at(cell_mean, lo_t))
		p->theta = lo_t;
	else if (d->mean >= mean_at(cell_mean, hi_t))
		p->theta = hi_t;
	else {
		for (int k = 0; k < 80; k++) { /* the mean grows with θ: bisect */
			double mid = (lo_t + hi_t) / 2;

			if (mean_at(cell_mean, mid) < d->mean)
				lo_t = mid;
			else
				hi_t = mid;
		}
		p->theta = (lo_t + hi_t) / 2;
	}
}

uint32_t probe_histogram_draw(const struct probe_histogram_draw *p, struct probe_rng *rng)
{
	double x = probe_rng_double(rng) * p->cum[p->n - 1], u, pos, len;
	uint32_t a = 0, b = p->n - 1, j;

	while (a < b) { /* the first bucket whose cumulative count exceeds x */
		uint32_t mid = (a + b) / 2;

		if (p->cum[mid] > x)
			b = mid;
		else
			a = mid + 1;
	}
	u = probe_rng_double(rng);
	if (fabs(p->theta) >= 1e-9)
		u = log1p(u * expm1(p->theta)) / p->theta;
	pos = MIN(u, 1.0) * PROBE_HISTOGRAM_GRID;
	j = (uint32_t)MIN(floor(pos), PROBE_HISTOGRAM_GRID - 1.0);
	len = ceil(p->q[a][j] + (pos - j) * (p->q[a][j + 1] - p->q[a][j]));
	return (uint32_t)MIN(MAX(len, (double)p->lo[a]), (double)(p->lo[a] + p->width[a] - 1));
}

double probe_length_dist_mean(const struct probe_length_dist *d)
{
	switch (d->kind) {
	case PROBE_DIST_HISTOGRAM:
		return isfinite(d->mean) ? d->mean : probe_histogram_mean_uniform(&d->hist);
	case PROBE_DIST_SAMPLES:
		return NAN;
	case PROBE_DIST_UNIFORM:
	case PROBE_DIST_FIXED:
		return round(d->mean);
	case PROBE_DIST_LOGNORMAL:
		return d->mean * exp(d->stddev * d->stddev / 2);
	default:
		return d->mean;
	}
}

/* ---- rate profiles ---- */

/* The profile's segment holding second s of the day. */
static uint32_t segment_at(const struct probe_rate_profile *p, uint32_t s)
{
	uint32_t i = p->n - 1; /* before the first point: the last one still holds */

	for (uint32_t k = 0; k < p->n && p->second_of_day[k] <= s; k++)
		i = k;
	return i;
}

/* Where the segment after i starts, in seconds from the start of i's day
 * (beyond a day for the last one). */
static double segment_end(const struct probe_rate_profile *p, uint32_t i)
{
	return i + 1 < p->n ? p->second_of_day[i + 1] : PROBE_SECONDS_PER_DAY + (double)p->second_of_day[0];
}

double probe_rate_profile_at(const struct probe_rate_profile *p, uint32_t second_of_day)
{
	return p->n ? p->rate[segment_at(p, second_of_day % PROBE_SECONDS_PER_DAY)] : 0;
}

double probe_rate_profile_mean(const struct probe_rate_profile *p)
{
	double sum = 0;

	for (uint32_t i = 0; i < p->n; i++)
		sum += p->rate[i] * (segment_end(p, i) - p->second_of_day[i]);
	return p->n ? sum / PROBE_SECONDS_PER_DAY : 0;
}

void probe_profile_warp_init(const struct probe_rate_profile *p, double mean_rate, struct probe_profile_warp *ret)
{
	double pm = probe_rate_profile_mean(p);
	uint32_t seg = segment_at(p, p->start % PROBE_SECONDS_PER_DAY);
	/* day seconds from the start of seg's occurrence to the run's start */
	double into = (double)(p->start % PROBE_SECONDS_PER_DAY) - p->second_of_day[seg];

	if (into < 0)
		into += PROBE_SECONDS_PER_DAY; /* the last segment, past midnight */
	*ret = (struct probe_profile_warp){
		.p = p,
		.scale = pm > 0 ? mean_rate / pm : 0,
		.seg = seg,
		.seg_day_start = -into,
	};
}

/* Day seconds (from the run's start) → run seconds. */
static double run_time(const struct probe_profile_warp *w, double day)
{
	return day / w->p->speed;
}

double probe_profile_warp(struct probe_profile_warp *w, double tau)
{
	const struct probe_rate_profile *p = w->p;

	/* Λ counts in run time: a day second lasts 1/speed run seconds. */
	for (unsigned guard = 0; guard < 1000000; guard++) {
		double start = MAX(w->seg_day_start, w->day),
		       end = w->seg_day_start + segment_end(p, w->seg) - p->second_of_day[w->seg];
		double lambda = w->scale * p->rate[w->seg]; /* arrivals per run second */
		double gain = lambda * run_time(w, end - start);

		if (w->lambda_at + gain >= tau && lambda > 0) {
			double day = start + (tau - w->lambda_at) / lambda * p->speed;

			w->lambda_at = tau;
			w->day = day;
			return run_time(w, day);
		}
		w->lambda_at += gain;
		w->day = end;
		w->seg_day_start = end;
		w->seg = (w->seg + 1) % p->n;
	}
	return INFINITY; /* unreachable with a mean rate > 0 */
}

/* ---- distances between length distributions ---- */

double probe_histogram_ks(const struct probe_length_histogram *h, const uint32_t *lengths, size_t n)
{
	uint32_t *v = malloc(MAX(n, (size_t)1) * sizeof(uint32_t));
	double total = 0, cum = 0, ks = 0;
	size_t k = 0;

	if (!v || n == 0) {
		free(v);
		return NAN;
	}
	memcpy(v, lengths, n * sizeof(uint32_t));
	qsort(v, n, sizeof(uint32_t), array_cmp_u32);
	for (uint32_t i = 0; i < h->n; i++)
		total += h->count[i];
	for (uint32_t i = 0; i < h->n && total > 0; i++) {
		cum += h->count[i];
		while (k < n && v[k] <= h->le[i])
			k++;
		ks = MAX(ks, fabs(cum / total - (double)k / (double)n));
	}
	free(v);
	return ks;
}

/* b's CDF at x, linear inside its buckets. */
static double cdf_at(const struct probe_length_histogram *b, double total, double x)
{
	double cum = 0;

	for (uint32_t i = 0; i < b->n; i++) {
		double lo = i ? b->le[i - 1] : 0;

		if (x >= b->le[i]) {
			cum += b->count[i];
			continue;
		}
		if (x > lo)
			cum += b->count[i] * (x - lo) / (b->le[i] - lo);
		break;
	}
	return total > 0 ? cum / total : 0;
}

double probe_histogram_ks2(const struct probe_length_histogram *a, const struct probe_length_histogram *b)
{
	double ta = 0, tb = 0, cum = 0, ks = 0;

	for (uint32_t i = 0; i < a->n; i++)
		ta += a->count[i];
	for (uint32_t i = 0; i < b->n; i++)
		tb += b->count[i];
	if (!(ta > 0) || !(tb > 0))
		return NAN;
	for (uint32_t i = 0; i < a->n; i++) {
		cum += a->count[i];
		ks = MAX(ks, fabs(cum / ta - cdf_at(b, tb, a->le[i])));
	}
	/* past a's last bound a is 1; b may still hold mass */
	return MAX(ks, 1 - cdf_at(b, tb, a->le[a->n - 1]));
}
