/* rng.h — goodput's own seeded pseudo-random numbers (curl-free, header only).
 *
 * xoshiro256** seeded through splitmix64, as their authors recommend. The
 * workload generator uses it so that a seed gives the same requests on every
 * platform and libc (rand() gives neither); tests and the sim may use it for
 * reproducible noise. Sampling methods are fixed here, never "whatever libm
 * does": uniform doubles from the top 53 bits, normals by Box–Muller (one
 * value per call; the pair's second half is dropped so the stream position
 * does not depend on call history), gamma by Marsaglia–Tsang. */
#pragma once

#include <math.h>
#include <stdint.h>

struct probe_rng {
	uint64_t s[4];
};

static inline uint64_t probe_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Seeds a stream from (seed, stream): distinct streams are independent. */
static inline void probe_rng_init(struct probe_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * UINT64_C(0xd1b54a32d192ed03));

	for (int i = 0; i < 4; i++)
		r->s[i] = probe_splitmix64(&x);
}

static inline uint64_t probe_rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t probe_rng_next(struct probe_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = probe_rng_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = probe_rng_rotl(s[3], 45);
	return result;
}

/* Uniform in [0, 1). */
static inline double probe_rng_double(struct probe_rng *r)
{
	return (double)(probe_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in (0, 1]: safe for log(). */
static inline double probe_rng_double_pos(struct probe_rng *r)
{
	return ((double)(probe_rng_next(r) >> 11) + 1.0) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n > 0, without modulo bias (Lemire's method). */
static inline uint64_t probe_rng_below(struct probe_rng *r, uint64_t n)
{
	__uint128_t m = (__uint128_t)probe_rng_next(r) * n;
	uint64_t lo = (uint64_t)m;

	if (lo < n) {
		uint64_t t = -n % n;

		while (lo < t) {
			m = (__uint128_t)probe_rng_next(r) * n;
			lo = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

/* Standard normal. */
static inline double probe_rng_normal(struct probe_rng *r)
{
	double u1 = probe_rng_double_pos(r), u2 = probe_rng_double(r);

	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Exponential with mean 1. */
static inline double probe_rng_exp(struct probe_rng *r)
{
	return -log(probe_rng_double_pos(r));
}

/* Gamma(shape, 1), shape > 0 (Marsaglia & Tsang 2000; shape < 1 by boosting). */
static inline double probe_rng_gamma(struct probe_rng *r, double shape)
{
	double boost = 1.0, d, c;

	if (shape < 1.0) {
		boost = pow(probe_rng_double_pos(r), 1.0 / shape);
		shape += 1.0;
	}
	d = shape - 1.0 / 3.0;
	c = 1.0 / sqrt(9.0 * d);
	for (;;) {
		double x, v, u;

		do {
			x = probe_rng_normal(r);
			v = 1.0 + c * x;
		} while (v <= 0.0);
		v = v * v * v;
		u = probe_rng_double_pos(r);
		if (u < 1.0 - 0.0331 * x * x * x * x)
			return boost * d * v;
		if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
			return boost * d * v;
	}
}
