/* The sequential verdict of a load point: what it promises (a load point at
 * the target is called "met" at most 1 − confidence of the time, one at p1
 * "missed" as rarely), how few requests a clear case takes, and that it
 * reads requests in the order they were sent. */
#include <math.h>
#include <stdlib.h>

#include "macro.h"
#include "rng.h"
#include "sequential.h"
#include "tests.h"
#include "time-util.h"

/* Runs one load point whose requests are good with probability p, in send
 * order; returns the verdict and the requests it rested on. */
static enum probe_verdict run(const struct probe_sequential_config *cfg, double p, struct probe_rng *rng,
			      uint32_t *ret_n)
{
	struct probe_sequential s;
	enum probe_verdict v = PROBE_VERDICT_NONE;

	CHECK_INT_EQ(probe_sequential_init(&s, cfg, NULL), 0);
	for (uint32_t i = 0; i < cfg->max_requests && v == PROBE_VERDICT_NONE; i++)
		v = probe_sequential_add(&s, i, probe_rng_double(rng) < p, i * USEC_PER_SEC);
	v = probe_sequential_finish(&s);
	*ret_n = s.judged;
	probe_sequential_done(&s);
	return v;
}

static void test_clear_cases(void)
{
	struct probe_sequential_config cfg;
	struct probe_rng rng;
	uint32_t n;

	probe_rng_init(&rng, 1, 1);
	probe_sequential_config_init(&cfg, 0.9, 800);
	/* every request good: log(19)/log(0.95/0.9) = 54.4, so the 55th decides */
	CHECK_INT_EQ(run(&cfg, 1.0, &rng, &n), PROBE_VERDICT_MET);
	CHECK_INT_EQ(n, 55);
	/* none good: as soon as min_requests are in */
	CHECK_INT_EQ(run(&cfg, 0.0, &rng, &n), PROBE_VERDICT_MISSED);
	CHECK_INT_EQ(n, PROBE_SEQUENTIAL_MIN_REQUESTS);
	/* a cap too small to tell 0.93 from 0.9 */
	cfg.max_requests = 40;
	CHECK_INT_EQ(run(&cfg, 1.0, &rng, &n), PROBE_VERDICT_UNDECIDED);
	CHECK_INT_EQ(n, 40);
	/* the aim lies between the target and p1 = 0.95 */
	CHECK(probe_sequential_aim(&cfg) > 0.92 && probe_sequential_aim(&cfg) < 0.935);
}

static void test_send_order(void)
{
	struct probe_sequential_config cfg;
	struct probe_sequential s;

	probe_sequential_config_init(&cfg, 0.9, 800);
	CHECK_INT_EQ(probe_sequential_init(&s, &cfg, NULL), 0);
	/* 99 fast good requests come back while the first is still out: no
	 * verdict, however strong the rest looks */
	for (uint32_t i = 1; i < 100; i++)
		CHECK_INT_EQ(probe_sequential_add(&s, i, true, i * USEC_PER_SEC), PROBE_VERDICT_NONE);
	CHECK_INT_EQ(s.judged, 0);
	/* the first one was slow and missed its bound: the test reads on from it,
	 * through all 100 (one bad request costs about 13 good ones: 55 + 13) */
	CHECK_INT_EQ(probe_sequential_add(&s, 0, false, 0), PROBE_VERDICT_MET);
	CHECK_INT_EQ(s.judged, 100);
	CHECK_INT_EQ(s.good, 99);
	/* repeats and requests past the cap change nothing */
	CHECK_INT_EQ(probe_sequential_add(&s, 3, false, 0), PROBE_VERDICT_MET);
	CHECK_INT_EQ(probe_sequential_add(&s, 5000, false, 0), PROBE_VERDICT_MET);
	CHECK_INT_EQ(s.judged, 100);
	/* the requests in flight when the verdict came can take it back (a load
	 * point whose queue was still building up): a few misses make it
	 * doubtful again (the probe sends on), more turn it round */
	for (uint32_t i = 100; i < 103; i++)
		(void)probe_sequential_add(&s, i, false, i * USEC_PER_SEC);
	CHECK_INT_EQ(s.verdict, PROBE_VERDICT_NONE);
	for (uint32_t i = 103; i < 140; i++)
		(void)probe_sequential_add(&s, i, false, i * USEC_PER_SEC);
	CHECK_INT_EQ(s.verdict, PROBE_VERDICT_MISSED);
	probe_sequential_done(&s);
}

/* Wald's bounds: a load point at the target is "met", one at p1 "missed",
 * each at most 5 % of the time (with the Monte Carlo error of 4000 runs,
 * about 0.35 %, to spare). The cap, 10 times the longest mean, is never
 * reached (checked: a run cut by it would be neither), and it keeps each
 * run's arrays small (100,000 requests cost ASan a page fault per page of
 * every run's calloc: minutes). */
static void test_error_rates(void)
{
	static const double targets[] = { 0.5, 0.9, 0.95, 0.99 };
	const int runs = 4000;

	for (size_t k = 0; k < ELEMENTSOF(targets); k++) {
		struct probe_sequential_config cfg;
		struct probe_rng rng;
		double t = targets[k], p1 = t + (1 - t) / 2;
		int met_at_t = 0, missed_at_p1 = 0;
		uint64_t n_at_t = 0;
		uint32_t n, longest = 0;

		probe_sequential_config_init(&cfg, t, 15000);
		probe_rng_init(&rng, 7, k);
		for (int i = 0; i < runs; i++) {
			met_at_t += run(&cfg, t, &rng, &n) == PROBE_VERDICT_MET;
			n_at_t += n;
			longest = MAX(longest, n);
			missed_at_p1 += run(&cfg, p1, &rng, &n) == PROBE_VERDICT_MISSED;
			longest = MAX(longest, n);
		}
		CHECK_MSG(longest < cfg.max_requests, "target %g: a run reached the cap of %u requests", t,
			  cfg.max_requests);
		fprintf(stderr, "target %.2f: met at the target %.2f%%, missed at %.3f %.2f%%, mean %.0f requests\n", t,
			100.0 * met_at_t / runs, p1, 100.0 * missed_at_p1 / runs, (double)n_at_t / runs);
		CHECK_MSG(met_at_t <= 0.055 * runs, "target %g: met %d of %d", t, met_at_t, runs);
		CHECK_MSG(missed_at_p1 <= 0.055 * runs, "target %g: missed %d of %d", t, missed_at_p1, runs);
	}
}

/* Fast requests: no verdict until they span min_seconds, unless the cap
 * comes first. */
static void test_min_seconds(void)
{
	struct probe_sequential_config cfg;
	struct probe_sequential s;
	uint32_t i;

	probe_sequential_config_init(&cfg, 0.9, 800);
	CHECK_INT_EQ(probe_sequential_init(&s, &cfg, NULL), 0);
	/* 100 req/s: 55 good requests are 0.54 s; a verdict needs 3 s, 301 of them */
	for (i = 0; i < 800 && probe_sequential_add(&s, i, true, i * 10000ULL) == PROBE_VERDICT_NONE; i++)
		;
	CHECK_INT_EQ(s.verdict, PROBE_VERDICT_MET);
	CHECK_INT_EQ(s.judged, 301);
	probe_sequential_done(&s);

	cfg.max_requests = 100;
	CHECK_INT_EQ(probe_sequential_init(&s, &cfg, NULL), 0);
	for (i = 0; i < 100; i++)
		CHECK_INT_EQ(probe_sequential_add(&s, i, true, i * 10000ULL), PROBE_VERDICT_NONE);
	CHECK_INT_EQ(probe_sequential_finish(&s), PROBE_VERDICT_MET);
	probe_sequential_done(&s);
}

static void test_errors(void)
{
	struct probe_sequential_config cfg;
	struct probe_sequential s;
	struct error err = { 0 };

	probe_sequential_config_init(&cfg, 1.0, 100);
	CHECK(probe_sequential_init(&s, &cfg, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "target");
	probe_sequential_config_init(&cfg, 0.9, 10);
	CHECK(probe_sequential_init(&s, &cfg, &err) < 0); /* min_requests 16 > 10 */
	CHECK_STR_CONTAINS(err.msg, "min_requests");
}

int main(void)
{
	test_clear_cases();
	test_send_order();
	test_error_rates();
	test_min_seconds();
	test_errors();
	return 0;
}
