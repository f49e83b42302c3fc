/* The rate search against synthetic servers whose attainment-vs-rate curve
 * is known: it must find the largest rate meeting the SLA within tolerance,
 * in few load points, and say plainly when the SLA never or always holds. */
#include <errno.h>
#include <math.h>

#include "macro.h"
#include "ratesearch.h"
#include "rng.h"
#include "tests.h"

struct server {
	double capacity;   /* saturated throughput, requests/s */
	double truth;      /* largest rate with attainment >= target (logistic/step) */
	double width;      /* logistic width (rate units); 0 = a step */
	double floor;      /* attainment far above the knee */
	double sat_attain; /* attainment of the saturation run */
	bool noisy;        /* binomial sampling instead of the expected count */
	struct probe_rng rng;
};

static double attainment(const struct server *s, double rate, double target)
{
	if (isinf(rate))
		return s->sat_attain;
	if (s->width == 0)
		return rate <= s->truth ? 1.0 : s->floor;
	/* logistic from 1 down to floor, crossing target exactly at truth */
	double t = (target - s->floor) / (1 - s->floor);
	double centre = s->truth + s->width * log(t / (1 - t));

	return s->floor + (1 - s->floor) / (1 + exp((rate - centre) / s->width));
}

static struct probe_rate_point run(struct server *s, double rate, uint32_t n, double target)
{
	double a = attainment(s, rate, target);
	uint32_t good = 0;

	if (s->noisy) {
		for (uint32_t i = 0; i < n; i++)
			good += probe_rng_double(&s->rng) < a;
	} else
		good = (uint32_t)floor(a * n + 1e-9);
	return (struct probe_rate_point){
		.rate = rate,
		.n = n,
		.good = good,
		.sla_met = (double)good / n >= target,
		.throughput = isinf(rate) ? s->capacity : fmin(rate, s->capacity),
	};
}

/* Runs a search to its end; returns the final step and the number of finite points. */
static struct probe_ratesearch_step search(const struct probe_ratesearch_config *cfg, struct server *s,
					   size_t *ret_points)
{
	struct probe_rate_point pts[64];
	struct probe_ratesearch_step step;
	struct error err = { 0 };
	size_t n = 0, finite = 0;

	for (;;) {
		CHECK_INT_EQ(probe_ratesearch_next(cfg, pts, n, &step, &err), 0);
		if (step.action != PROBE_RATESEARCH_MEASURE)
			break;
		CHECK(n < 64);
		CHECK(step.num_requests > 0);
		CHECK(isinf(step.rate) || (step.rate > 0 && step.rate <= s->capacity * 1.0000001));
		pts[n++] = run(s, step.rate, step.num_requests, cfg->target);
		if (getenv("RS_DEBUG"))
			fprintf(stderr, "  rate %.3f n %u good %u (%s)\n", step.rate, pts[n - 1].n, pts[n - 1].good, step.why);
		finite += !isinf(step.rate);
	}
	if (getenv("RS_DEBUG"))
		fprintf(stderr, "-> %s %.3f after %zu points (%s)\n", probe_ratesearch_action_name(step.action), step.rate,
			finite, step.why);
	*ret_points = finite;
	return step;
}

static void test_wilson(void)
{
	double lo, hi;

	/* Wilson at z = 1.96, 90/100: (0.8256, 0.9448) (standard tables) */
	probe_wilson_interval(90, 100, 1.96, &lo, &hi);
	CHECK(fabs(lo - 0.8256) < 5e-4 && fabs(hi - 0.9448) < 5e-4);
	probe_wilson_interval(0, 0, 1.96, &lo, &hi);
	CHECK(lo == 0 && hi == 1);
	probe_wilson_interval(10, 10, 1.96, &lo, &hi);
	CHECK(hi == 1 && lo > 0.69 && lo < 0.73); /* 10/(10+z^2) = 0.7225 */
}

static void test_deterministic(void)
{
	static const double truths[] = { 3, 12, 31, 50, 64, 73, 82, 90 };
	static const double widths[] = { 0, 0.02, 0.05 };
	struct probe_ratesearch_config cfg;
	size_t worst = 0;

	probe_ratesearch_config_init(&cfg);
	for (size_t i = 0; i < ELEMENTSOF(truths); i++)
		for (size_t k = 0; k < ELEMENTSOF(widths); k++) {
			struct server s = { .capacity = 100, .truth = truths[i], .width = widths[k] * truths[i],
					    .floor = 0.05, .sat_attain = 0.1 };
			struct probe_ratesearch_step st;
			size_t points;

			st = search(&cfg, &s, &points);
			CHECK_MSG(st.action == PROBE_RATESEARCH_DONE, "truth %g width %g: %s (%s)", s.truth, s.width,
				  probe_ratesearch_action_name(st.action), st.why);
			/* the reported rate meets the SLA, and is within tolerance of the truth */
			CHECK_MSG(st.rate <= s.truth * 1.000001 && st.rate >= s.truth / (1 + cfg.tolerance) * 0.98,
				  "truth %g width %g: found %g", s.truth, s.width, st.rate);
			CHECK_MSG(getenv("RS_DEBUG") || points <= (s.truth < 10 ? 11u : 9u), "truth %g width %g: %zu points", s.truth, s.width, points);
			worst = points > worst ? points : worst;
		}
	fprintf(stderr, "deterministic: at most %zu load points after saturation\n", worst);
}

static void test_well_behaved_five(void)
{
	/* the target, at most 5 load points after saturation, holds for a
	 * knee at 75-100% of the saturation throughput (step-like servers: all
	 * good below the knee, none above); lower knees take 6-9 (see
	 * test_deterministic) */
	static const double truths[] = { 76, 81, 88, 93 };
	struct probe_ratesearch_config cfg;

	probe_ratesearch_config_init(&cfg);
	for (size_t i = 0; i < ELEMENTSOF(truths); i++) {
		struct server s = { .capacity = 100, .truth = truths[i], .width = 0, .floor = 0, .sat_attain = 0.05 };
		size_t points;
		struct probe_ratesearch_step st = search(&cfg, &s, &points);

		CHECK(st.action == PROBE_RATESEARCH_DONE);
		CHECK_REL(st.rate, s.truth, cfg.tolerance);
		CHECK_MSG(getenv("RS_DEBUG") || points <= 5, "truth %g: %zu points", s.truth, points);
	}
}

static void test_noisy(void)
{
	static const double truths[] = { 10, 40, 70 };
	struct probe_ratesearch_config cfg;

	probe_ratesearch_config_init(&cfg);
	for (size_t i = 0; i < ELEMENTSOF(truths); i++)
		for (uint64_t seed = 1; seed <= 5; seed++) {
			struct server s = { .capacity = 100, .truth = truths[i], .width = 0.02 * truths[i], .floor = 0.05,
					    .sat_attain = 0.1, .noisy = true };
			struct probe_ratesearch_step st;
			size_t points;

			probe_rng_init(&s.rng, seed, 7);
			st = search(&cfg, &s, &points);
			CHECK_MSG(st.action == PROBE_RATESEARCH_DONE, "truth %g seed %llu: %s", s.truth,
				  (unsigned long long)seed, probe_ratesearch_action_name(st.action));
			/* noise may cost a step on the conservative side, never a rate above the truth + tolerance */
			CHECK_MSG(st.rate <= s.truth * (1 + cfg.tolerance) && st.rate >= s.truth * (1 - 3 * cfg.tolerance),
				  "truth %g seed %llu: found %g", s.truth, (unsigned long long)seed, st.rate);
			CHECK_MSG(points <= 10, "truth %g seed %llu: %zu points", s.truth, (unsigned long long)seed,
				  points);
		}
}

static void test_never_always(void)
{
	struct probe_ratesearch_config cfg;
	struct probe_ratesearch_step st;
	size_t points;

	probe_ratesearch_config_init(&cfg);

	/* never: half the requests miss the SLA at any rate */
	struct server never = { .capacity = 100, .truth = 0, .width = 0, .floor = 0.5, .sat_attain = 0.3 };
	st = search(&cfg, &never, &points);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_NEVER);
	CHECK(points <= 6);

	/* always, seen already in the saturation run */
	struct server always = { .capacity = 100, .truth = 1e9, .width = 0, .floor = 1, .sat_attain = 1.0 };
	st = search(&cfg, &always, &points);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_ALWAYS);
	CHECK_INT_EQ(points, 0);
	CHECK(st.rate == 100);

	/* always up to capacity, though everything-at-once fails (a queue of 200) */
	struct server upto = { .capacity = 100, .truth = 1e9, .width = 0, .floor = 1, .sat_attain = 0.2 };
	st = search(&cfg, &upto, &points);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_ALWAYS);
	CHECK(st.rate >= 100 / (1 + cfg.tolerance) && st.rate <= 100);
	CHECK(points <= 3);

	/* nothing completed at all */
	struct probe_rate_point dead = { .rate = INFINITY, .n = 10, .good = 0, .throughput = 0 };
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, &dead, 1, &st, NULL), 0);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_NEVER);
}

static void test_boundary_confidence(void)
{
	/* A point just above the target with few requests is not conclusive: the
	 * search asks for the same rate again before answering. */
	struct probe_ratesearch_config cfg;
	struct probe_ratesearch_step st;
	struct probe_rate_point pts[] = {
		{ .rate = INFINITY, .n = 200, .good = 20, .sla_met = false, .throughput = 100 },
		{ .rate = 50, .n = 200, .good = 182, .sla_met = true, .throughput = 50 },
		{ .rate = 52, .n = 200, .good = 100, .sla_met = false, .throughput = 52 },
	};

	probe_ratesearch_config_init(&cfg);
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 3, &st, NULL), 0);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_MEASURE);
	CHECK(st.rate == 50);
	CHECK(st.lo == 50 && st.hi == 52);

	/* a clearly good point closes it */
	pts[1].good = 196;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 3, &st, NULL), 0);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_DONE);
	CHECK(st.rate == 50);
	CHECK_INT_EQ(st.best, 1);
}

static void test_errors(void)
{
	struct probe_ratesearch_config cfg;
	struct probe_ratesearch_step st;
	struct error err = { 0 };
	struct probe_rate_point p = { .rate = 5, .n = 10, .good = 10, .sla_met = true, .throughput = 5 };

	probe_ratesearch_config_init(&cfg);
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, &p, 1, &st, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "saturation");
	cfg.tolerance = 0;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, NULL, 0, &st, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "tolerance");
}

int main(void)
{
	test_wilson();
	test_deterministic();
	test_well_behaved_five();
	test_noisy();
	test_never_always();
	test_boundary_confidence();
	test_errors();
	return 0;
}
