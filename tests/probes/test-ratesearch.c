/* The rate search against synthetic servers whose attainment-vs-rate curve
 * is known: it must find the largest rate meeting the SLA within tolerance,
 * in few load points, and say plainly when the SLA never or always holds. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "macro.h"
#include "ratesearch.h"
#include "rng.h"
#include "sequential.h"
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

/* A sequential load point (sequential.h) over goods drawn one by one. */
static struct probe_rate_point run_sequential(const struct probe_ratesearch_config *cfg, struct server *s, double rate,
					      double a)
{
	struct probe_sequential_config sc;
	struct probe_sequential q;
	enum probe_verdict v = PROBE_VERDICT_NONE;

	probe_sequential_config_init(&sc, cfg->target, cfg->max_requests);
	CHECK_INT_EQ(probe_sequential_init(&q, &sc, NULL), 0);
	for (uint32_t i = 0; i < cfg->max_requests && v == PROBE_VERDICT_NONE; i++)
		v = probe_sequential_add(&q, i,
					 s->noisy ? probe_rng_double(&s->rng) < a
						  : floor(a * (i + 1) + 1e-9) > floor(a * i + 1e-9),
					 (uint64_t)i * 1000000);
	v = probe_sequential_finish(&q);
	probe_sequential_done(&q);
	return (struct probe_rate_point){
		.rate = rate,
		.n = q.judged,
		.good = q.good,
		/* undecided at the cap: judged by its point estimate */
		.sla_met = v == PROBE_VERDICT_MET || (v == PROBE_VERDICT_UNDECIDED && q.good >= cfg->target * q.judged),
		.throughput = fmin(rate, s->capacity),
		.verdict = v,
	};
}

static struct probe_rate_point run(const struct probe_ratesearch_config *cfg, struct server *s, double rate, uint32_t n,
				   double target)
{
	double a = attainment(s, rate, target);
	uint32_t good = 0;

	if (cfg->sequential && !isinf(rate))
		return run_sequential(cfg, s, rate, a);
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

/* What the search must never do: answer below a rate it measured as met
 * with confidence (a sequential "met") without saying so, or answer NEVER
 * although some rate met the SLA. */
static void check_not_below_met(const struct probe_rate_point *pts, size_t n, const struct probe_ratesearch_step *st)
{
	for (size_t i = 0; i < n; i++) {
		if (pts[i].verdict != PROBE_VERDICT_MET)
			continue;
		CHECK_MSG(st->action != PROBE_RATESEARCH_NEVER, "NEVER although %g req/s met the SLA", pts[i].rate);
		CHECK_MSG(pts[i].rate <= st->rate * (1 + 1e-12) || st->met_above >= pts[i].rate * (1 - 1e-12),
			  "answered %g req/s below %g req/s, measured as met, without saying so", st->rate,
			  pts[i].rate);
	}
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
		pts[n++] = run(cfg, s, step.rate, step.num_requests, cfg->target);
		if (getenv("RS_DEBUG"))
			fprintf(stderr, "  rate %.3f n %u good %u (%s)\n", step.rate, pts[n - 1].n, pts[n - 1].good,
				step.why);
		finite += !isinf(step.rate);
	}
	if (getenv("RS_DEBUG"))
		fprintf(stderr, "-> %s %.3f after %zu points (%s)\n", probe_ratesearch_action_name(step.action),
			step.rate, finite, step.why);
	check_not_below_met(pts, n, &step);
	*ret_points = finite;
	return step;
}

/* A queueing server, request by request: TPOT = a/(1 − (1 − f)·ρ) (the batch
 * grows with the rate by Little's law), TTFT = prefill + an M/M/1-like wait
 * (mean S·ρ/(1 − ρ), and the backlog of a finite run past capacity), each
 * request with log-normal spread. The saturation run sends all N at once:
 * request i waits i/capacity; with drain, the last tenth decode in a
 * shrinking batch. noisy: fresh random numbers at every point; otherwise the
 * same ones (a deterministic, monotone attainment curve). */
struct qserver {
	double capacity, a_ms, f, prefill_ms, service_ms;
	uint32_t out;
	bool drain, noisy;
	struct probe_sla sla;
	uint64_t draws;
};

static double q_tpot_ms(const struct qserver *s, double rho)
{
	return s->a_ms / (1 - (1 - s->f) * MIN(rho, 1.0));
}

/* Spread of TPOT between requests: prefill chunks of other requests stall
 * decode steps more often the busier the server (goodput-sim: p99/p50 TPOT
 * about 1.06 at a fifth of its capacity). */
static double q_sigma(double rho)
{
	return 0.02 + 0.06 * MIN(rho, 1.0);
}

static double q_wait_ms(const struct qserver *s, double rho, uint32_t n)
{
	if (rho < 0.98)
		return s->service_ms * rho / (1 - rho);
	return s->service_ms * 49 + n / (2 * s->capacity) * 1000 * MAX(1 - 1 / rho, 0.0);
}

static void q_requests(struct qserver *s, double rate, uint32_t n, struct probe_request_result *reqs)
{
	struct probe_rng rng;
	double rho = rate / s->capacity;

	probe_rng_init(&rng, 42, s->noisy ? ++s->draws : 1);
	for (uint32_t i = 0; i < n; i++) {
		double tpot, ttft;

		if (isinf(rate)) {
			double batch = i >= n * 0.9 && s->drain ? (double)(n - i) / (0.1 * n) : 1.0;

			tpot = q_tpot_ms(s, batch) * exp(q_sigma(batch) * probe_rng_normal(&rng));
			ttft = s->prefill_ms * exp(0.05 * probe_rng_normal(&rng)) + 1000.0 * i / s->capacity;
		} else {
			tpot = q_tpot_ms(s, rho) * exp(q_sigma(rho) * probe_rng_normal(&rng));
			ttft = s->prefill_ms * exp(0.05 * probe_rng_normal(&rng)) +
			       q_wait_ms(s, rho, n) * probe_rng_exp(&rng);
		}
		reqs[i] = (struct probe_request_result){
			.index = i,
			.success = true,
			.http_status = 200,
			.ttft_usec = (uint64_t)(ttft * 1000),
			.e2e_usec = (uint64_t)((ttft + tpot * (s->out - 1)) * 1000),
			.output_tokens = s->out,
		};
	}
}

/* The requests of a load point, kept from one to the next: thousands of
 * load points of up to 4000 requests each, and a fresh allocation each
 * time costs ASan a page fault per page. */
static struct probe_request_result *q_reqs;
static uint32_t q_reqs_cap;

static struct probe_rate_point q_run(struct qserver *s, const struct probe_ratesearch_config *cfg, double rate,
				     uint32_t n)
{
	struct probe_request_result *reqs;
	struct probe_rate_point pt = { .rate = rate, .n = n };

	if (n > q_reqs_cap) {
		free(q_reqs);
		q_reqs = calloc(n, sizeof(*q_reqs));
		CHECK(q_reqs);
		q_reqs_cap = n;
	}
	reqs = q_reqs;
	q_requests(s, rate, n, reqs);
	if (cfg->sequential && !isinf(rate)) {
		/* the verdict as the probe reaches it, on the first requests sent */
		struct probe_sequential_config sc;
		struct probe_sequential q;

		probe_sequential_config_init(&sc, cfg->target, n);
		CHECK_INT_EQ(probe_sequential_init(&q, &sc, NULL), 0);
		for (uint32_t i = 0; i < n && probe_sequential_add(&q, i, probe_request_is_good(&reqs[i], &s->sla),
								   (uint64_t)i * 1000000) == PROBE_VERDICT_NONE;
		     i++)
			;
		pt.verdict = probe_sequential_finish(&q);
		pt.n = n = q.judged;
		pt.good = q.good;
		pt.sla_met = pt.verdict == PROBE_VERDICT_MET ||
			     (pt.verdict == PROBE_VERDICT_UNDECIDED && pt.good >= cfg->target * pt.n);
		probe_sequential_done(&q);
	} else {
		for (uint32_t i = 0; i < n; i++)
			pt.good += probe_request_is_good(&reqs[i], &s->sla);
		pt.sla_met = pt.good >= cfg->target * n - 1e-9;
	}
	pt.throughput = isinf(rate) ? s->capacity : MIN(rate, s->capacity);
	CHECK_INT_EQ(probe_ratesearch_ratios(cfg, &s->sla, reqs, n, &pt), 0);
	if (getenv("RS_BLIND")) /* attainment only, as before latency steering */
		pt.sla_ratio = pt.tpot_ratio = pt.tpot_floor = 0;
	return pt;
}

/* The largest rate whose attainment (over n requests; the same random
 * numbers) reaches the target: bisection on a monotone curve. */
static double q_truth(struct qserver *s, const struct probe_ratesearch_config *search, uint32_t n)
{
	double lo = s->capacity * 1e-3, hi = s->capacity * 1.2;
	bool noisy = s->noisy;
	struct probe_ratesearch_config fixed = *search, *cfg = &fixed;

	fixed.sequential = false;

	s->noisy = false;
	for (int k = 0; k < 14; k++) { /* a bracket of 1200x halved (in log) 14 times: to 0.05% */
		double mid = sqrt(lo * hi);

		if (q_run(s, cfg, mid, n).sla_met)
			lo = mid;
		else
			hi = mid;
	}
	s->noisy = noisy;
	return lo;
}

static struct probe_ratesearch_step q_search(const struct probe_ratesearch_config *cfg, struct qserver *s,
					     size_t *ret_points, uint64_t *ret_requests)
{
	struct probe_rate_point pts[64];
	struct probe_ratesearch_step step;
	size_t n = 0, finite = 0;

	for (;;) {
		CHECK_INT_EQ(probe_ratesearch_next(cfg, pts, n, &step, NULL), 0);
		if (step.action != PROBE_RATESEARCH_MEASURE)
			break;
		CHECK(n < 64);
		pts[n++] = q_run(s, cfg, step.rate, step.num_requests);
		if (getenv("RS_DEBUG"))
			fprintf(stderr, "  rate %.3f n %u good %u ratio %.3f tpot %.3f floor %.3f (%s)\n", step.rate,
				pts[n - 1].n, pts[n - 1].good, pts[n - 1].sla_ratio, pts[n - 1].tpot_ratio,
				pts[n - 1].tpot_floor, step.why);
		finite += !isinf(step.rate);
		if (ret_requests)
			*ret_requests += pts[n - 1].n;
	}
	check_not_below_met(pts, n, &step);
	*ret_points = finite;
	return step;
}

/* A server whose knee sits at rho_knee of capacity, set by TPOT (kind 0),
 * by queueing/TTFT (kind 1), or by both bounds at once (kind 2). */
static void q_make(struct qserver *s, int kind, double rho_knee, double f, bool drain, bool noisy)
{
	*s = (struct qserver){ .capacity = 100,
			       .a_ms = 20,
			       .f = f,
			       .prefill_ms = 60,
			       .service_ms = 40,
			       .out = 128,
			       .drain = drain,
			       .noisy = noisy };
	s->sla.attainment = 0.9;
	s->sla.n_bounds = 2;
	s->sla.bounds[0] = (struct probe_sla_bound){ .metric = PROBE_METRIC_TTFT, .bound_ms = 60000 };
	s->sla.bounds[1] = (struct probe_sla_bound){ .metric = PROBE_METRIC_TPOT, .bound_ms = 60000 };
	if (kind != 1)
		s->sla.bounds[1].bound_ms = q_tpot_ms(s, rho_knee) * exp(q_sigma(rho_knee) * 1.2816);
	if (kind != 0)
		s->sla.bounds[0].bound_ms = s->prefill_ms * 1.07 + q_wait_ms(s, rho_knee, 200) * log(10);
	if (kind == 2)
		s->sla.bounds[1].bound_ms *= 1.03; /* the TTFT knee just below the TPOT one */
}

static void test_queueing(void)
{
	static const double knees[] = { 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.72, 0.8, 0.88, 0.95 };
	static const double fs[] = { 0.2, 0.35, 0.5 };
	struct probe_ratesearch_config cfg;
	size_t worst = 0, total = 0, runs = 0, hi_total = 0, hi_runs = 0, hi_worst = 0;
	double worst_err = 0;
	bool table = getenv("RS_TABLE");

	probe_ratesearch_config_init(&cfg);
	if (table)
		fprintf(stderr, "kind f drain noisy knee/cap found/truth points\n");
	for (int kind = 0; kind <= 2; kind++)
		for (size_t i = 0; i < ELEMENTSOF(knees); i += test_quick() ? 3 : 1)
			for (size_t fi = 0; fi < ELEMENTSOF(fs); fi++)
				for (int variant = 0; variant < 3; variant++) {
					struct qserver s;
					struct probe_ratesearch_step st;
					size_t points;
					double truth;

					if (kind == 1 && fi > 0)
						continue; /* f does not matter when TPOT is unbounded */
					if (getenv("RS_ONLY")) {
						int ok, oi, of, ov;

						if (sscanf(getenv("RS_ONLY"), "%d,%d,%d,%d", &ok, &oi, &of, &ov) != 4 ||
						    ok != kind || oi != (int)i || of != (int)fi || ov != variant)
							continue;
					}
					q_make(&s, kind, knees[i], fs[fi], variant != 1, variant == 2);
					truth = q_truth(&s, &cfg, variant == 2 ? 4000 : 200);
					st = q_search(&cfg, &s, &points, NULL);
					if (table)
						fprintf(stderr, "%d %.2f %d %d %.3f %.4f %zu %s\n", kind, fs[fi],
							variant != 1, variant == 2, truth / s.capacity, st.rate / truth,
							points, probe_ratesearch_action_name(st.action));
					CHECK_MSG(st.action == PROBE_RATESEARCH_DONE ||
							  st.action == PROBE_RATESEARCH_ALWAYS,
						  "kind %d knee %g: %s", kind, knees[i],
						  probe_ratesearch_action_name(st.action));
					/* never above the truth by more than the tolerance, nor below it */
					CHECK_MSG(st.rate <= truth * (1 + cfg.tolerance) &&
							  st.rate >= truth / (knees[i] < 0.15 ? 1.25
											      : 1 + 2 * cfg.tolerance),
						  "kind %d knee %g f %g variant %d: found %g, truth %g", kind, knees[i],
						  fs[fi], variant, st.rate, truth);
					CHECK_MSG(points <= 13, "kind %d knee %g: %zu points", kind, knees[i], points);
					if (knees[i] >= 0.5) {
						hi_total += points;
						hi_runs++;
						hi_worst = MAX(hi_worst, points);
					}
					worst = MAX(worst, points);
					worst_err = MAX(worst_err, fabs(st.rate / truth - 1));
					total += points;
					runs++;
				}
	fprintf(stderr,
		"queueing servers: %zu searches, at most %zu (mean %.2f) load points after saturation, "
		"worst error %.1f%%\n",
		runs, worst, (double)total / (double)runs, worst_err * 100);
	/* knees at half of X_sat and above: at most 5 load points on average */
	CHECK_MSG((double)hi_total / (double)hi_runs <= 5.0 && hi_worst <= 8,
		  "knees >= 0.5: mean %.2f, worst %zu points", (double)hi_total / (double)hi_runs, hi_worst);
}

/* The same servers with sequential load points: an answer every time,
 * never above the truth by more than the tolerance, never below a rate
 * measured as met (q_search checks it), and fewer requests than fixed
 * counts. A "met" needs attainment clearly above the target, so answers
 * lie lower than the fixed counts' (whose truth is their own rule's): by up
 * to a sixth, where attainment falls slowly with the rate (low knees, TTFT
 * spread), and up to a quarter for knees below a sixth of the capacity. */
static void test_queueing_sequential(void)
{
	static const double knees[] = { 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.72, 0.8, 0.88, 0.95 };
	static const double fs[] = { 0.2, 0.35, 0.5 };
	struct probe_ratesearch_config cfg, fixed;
	size_t runs = 0, total = 0, worst = 0;
	uint64_t requests = 0, fixed_requests = 0;
	double worst_err = 0;
	bool table = getenv("RS_TABLE");

	probe_ratesearch_config_init(&cfg);
	cfg.sequential = true;
	fixed = cfg;
	fixed.sequential = false;
	for (int kind = 0; kind <= 2; kind++)
		for (size_t i = 0; i < ELEMENTSOF(knees); i += test_quick() ? 3 : 1)
			for (size_t fi = 0; fi < ELEMENTSOF(fs); fi++)
				for (int variant = 0; variant < 3; variant++) {
					struct qserver s;
					struct probe_ratesearch_step st;
					size_t points, fixed_points;
					double truth;

					if (kind == 1 && fi > 0)
						continue;
					q_make(&s, kind, knees[i], fs[fi], variant != 1, variant == 2);
					truth = q_truth(&s, &cfg, 4000);
					(void)q_search(&fixed, &s, &fixed_points, &fixed_requests);
					st = q_search(&cfg, &s, &points, &requests);
					if (table)
						fprintf(stderr, "seq %d %.2f %d %d %.3f %.4f %zu %s (%s)\n", kind,
							fs[fi], variant != 1, variant == 2, truth / s.capacity,
							st.rate / truth, points,
							probe_ratesearch_action_name(st.action), st.why);
					CHECK_MSG(st.action == PROBE_RATESEARCH_DONE ||
							  st.action == PROBE_RATESEARCH_ALWAYS,
						  "kind %d knee %g: %s", kind, knees[i],
						  probe_ratesearch_action_name(st.action));
					CHECK_MSG(st.rate <= truth * (1 + cfg.tolerance) &&
							  st.rate >= truth / (knees[i] < 0.15 ? 1.5 : 1.2),
						  "kind %d knee %g f %g variant %d: found %g, truth %g", kind, knees[i],
						  fs[fi], variant, st.rate, truth);
					CHECK_MSG(points <= 10, "kind %d knee %g: %zu points", kind, knees[i], points);
					worst = MAX(worst, points);
					worst_err = MAX(worst_err, fabs(st.rate / truth - 1));
					total += points;
					runs++;
				}
	fprintf(stderr,
		"queueing servers, sequential: %zu searches, at most %zu (mean %.2f) load points after saturation, "
		"worst error %.1f%%, %.0f requests per search (fixed counts: %.0f)\n",
		runs, worst, (double)total / (double)runs, worst_err * 100, (double)requests / (double)runs,
		(double)fixed_requests / (double)runs);
	CHECK_MSG(requests < fixed_requests * 0.6, "sequential %llu requests, fixed %llu", (unsigned long long)requests,
		  (unsigned long long)fixed_requests);
}

/* A slow engine of one slot (llama.cpp on two CPU cores): each request
 * takes prefill + decode seconds, with log-normal spread, one after the
 * other; Poisson arrivals wait their turn (Lindley's recursion). The SLA
 * bounds TTFT at a few service times, so the knee lies near a fifth of the
 * saturation throughput. The same random numbers at every rate: a
 * monotone attainment curve whose truth bisection finds. */
struct slow_server {
	double prefill_s, decode_s, sigma;
	struct probe_sla sla;
};

static struct probe_rate_point slow_run(const struct probe_ratesearch_config *cfg, const struct slow_server *s,
					double rate, uint32_t n)
{
	struct probe_request_result *reqs = calloc(n, sizeof(*reqs));
	struct probe_rate_point pt = { .rate = rate, .n = n };
	struct probe_rng rng;
	double free_at = 0, t = 0, last_end = 0;

	CHECK(reqs);
	probe_rng_init(&rng, 7, 1);
	for (uint32_t i = 0; i < n; i++) {
		double jitter = exp(s->sigma * probe_rng_normal(&rng)), pre = s->prefill_s * jitter,
		       dec = s->decode_s * jitter, start;

		t += isinf(rate) ? 0 : probe_rng_exp(&rng) / rate;
		start = MAX(t, free_at);
		free_at = start + pre + dec;
		last_end = MAX(last_end, free_at);
		reqs[i] = (struct probe_request_result){
			.index = i,
			.success = true,
			.http_status = 200,
			.ttft_usec = (uint64_t)((start - t + pre) * 1e6),
			.e2e_usec = (uint64_t)((free_at - t) * 1e6),
			.output_tokens = 32,
		};
		pt.good += probe_request_is_good(&reqs[i], &s->sla);
	}
	pt.sla_met = pt.good >= cfg->target * n - 1e-9;
	pt.throughput = isinf(rate) ? n / last_end : MIN(rate, n / last_end);
	CHECK_INT_EQ(probe_ratesearch_ratios(cfg, &s->sla, reqs, n, &pt), 0);
	free(reqs);
	return pt;
}

/* A slow server's SLA: TTFT and TPOT bounds, 90 % of requests. */
static void slow_sla(struct slow_server *s, double ttft_ms, double tpot_ms)
{
	s->sla.attainment = 0.9;
	s->sla.n_bounds = 2;
	s->sla.bounds[0] = (struct probe_sla_bound){ .metric = PROBE_METRIC_TTFT, .bound_ms = ttft_ms };
	s->sla.bounds[1] = (struct probe_sla_bound){ .metric = PROBE_METRIC_TPOT, .bound_ms = tpot_ms };
}

/* The largest rate a slow server meets its SLA at over 400 requests, by
 * bisection below hi (a rate it cannot meet). */
static double slow_truth(const struct probe_ratesearch_config *cfg, const struct slow_server *s, double hi)
{
	double lo = 0.001;

	for (int k = 0; k < 30; k++) {
		double mid = sqrt(lo * hi);

		if (slow_run(cfg, s, mid, 400).sla_met)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The first point of the search after the saturation run lies within 2×
 * of the largest rate that meets the SLA (bisection over 4,000 requests),
 * and the search ends within its tolerance of it. */
static void test_slow_engine(void)
{
	static const double bounds_s[] = { 1.6, 2.5, 4.0, 8.0 };
	struct probe_ratesearch_config cfg;

	probe_ratesearch_config_init(&cfg);
	cfg.num_requests = 40;
	for (size_t b = 0; b < ELEMENTSOF(bounds_s); b++) {
		struct slow_server s = { .prefill_s = 0.85, .decode_s = 0.55, .sigma = 0.15 };
		struct probe_rate_point pts[32];
		struct probe_ratesearch_step st;
		double truth, first = 0;
		size_t n = 0;

		slow_sla(&s, bounds_s[b] * 1000, 60);
		truth = slow_truth(&cfg, &s, 1 / 1.4);
		for (;;) {
			CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, n, &st, NULL), 0);
			if (st.action != PROBE_RATESEARCH_MEASURE)
				break;
			CHECK(n < ELEMENTSOF(pts));
			if (n == 1)
				first = st.rate;
			pts[n++] = slow_run(&cfg, &s, st.rate, isinf(st.rate) ? 40 : 400);
			if (getenv("RS_DEBUG"))
				fprintf(stderr, "  rate %.4f n %u good %u ratio %.3f (%s)\n", st.rate, pts[n - 1].n,
					pts[n - 1].good, pts[n - 1].sla_ratio, st.why);
		}
		fprintf(stderr,
			"slow engine, TTFT <= %.1f s: truth %.3f req/s (%.2f of X_sat), first point %.3f, "
			"answer %.3f after %zu points\n",
			bounds_s[b], truth, truth * 1.4, first, st.rate, n - 1);
		CHECK_MSG(first >= truth / 2 && first <= truth * 2, "TTFT <= %g s: first point %g, truth %g",
			  bounds_s[b], first, truth);
		CHECK_MSG(st.action == PROBE_RATESEARCH_DONE && st.rate <= truth * (1 + 2 * cfg.tolerance) &&
				  st.rate >= truth / 1.5,
			  "TTFT <= %g s: answered %s %g, truth %g", bounds_s[b],
			  probe_ratesearch_action_name(st.action), st.rate, truth);
	}
}

/* A first point past the knee of a queue (llama.cpp on CPU, one slot: 0.6 s
 * a request, TTFT <= 2.5 s): most of its requests still good, its TTFT p90
 * many times the bound. The next point is fitted to the queue's misses, near
 * the knee — not the rate scaled by bound/p90, which stepped 16× down. A
 * point that failed on its TPOT still steps by its ratio. */
static void test_past_the_knee(void)
{
	struct probe_ratesearch_config cfg;
	struct slow_server s = { .prefill_s = 0.46, .decode_s = 0.13, .sigma = 0.1 };
	struct probe_rate_point pts[3];
	struct probe_ratesearch_step st;
	double truth, x_sat;

	probe_ratesearch_config_init(&cfg);
	cfg.num_requests = 40;
	slow_sla(&s, 2500, 18);
	truth = slow_truth(&cfg, &s, 1 / 0.59);
	pts[0] = slow_run(&cfg, &s, INFINITY, 40);
	x_sat = pts[0].throughput;
	pts[1] = slow_run(&cfg, &s, 0.98 * x_sat, 120);
	CHECK(!pts[1].sla_met && pts[1].sla_ratio > 1);
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 2, &st, NULL), 0);
	fprintf(stderr,
		"past the knee: truth %.3f req/s, X_sat %.3f, failed at %.3f (%u of %u good, ratio %.1f), next %.3f\n",
		truth, x_sat, pts[1].rate, pts[1].good, pts[1].n, pts[1].sla_ratio, st.rate);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_MEASURE);
	CHECK_MSG(st.rate >= truth / 2 && st.rate < pts[1].rate, "next %g after a miss at %g, truth %g", st.rate,
		  pts[1].rate, truth);

	/* the same point failing on its TPOT part: the step follows its ratio */
	pts[1].tpot_ratio = pts[1].sla_ratio;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 2, &st, NULL), 0);
	CHECK_MSG(st.rate <= pts[1].rate / pts[1].sla_ratio * (1 + 1e-9), "a TPOT miss of ratio %g stepped to %g",
		  pts[1].sla_ratio, st.rate);
}

/* Requests the probe cut at a point's cap count by what they showed: a
 * TTFT of at least their time in flight, no TPOT where no token came —
 * not as failed requests, whose ratio (1e6) took the point's aim quantile
 * and stepped the search 16× down. */
static void test_cut_requests_ratio(void)
{
	struct probe_ratesearch_config cfg;
	struct probe_request_result reqs[61] = { 0 };
	struct probe_rate_point pt = { .rate = 1.5, .n = 61 };
	struct probe_sla sla = { .attainment = 0.9, .n_bounds = 2 };

	probe_ratesearch_config_init(&cfg);
	cfg.num_requests = 40;
	sla.bounds[0] = (struct probe_sla_bound){ .metric = PROBE_METRIC_TTFT, .bound_ms = 2500 };
	sla.bounds[1] = (struct probe_sla_bound){ .metric = PROBE_METRIC_TPOT, .bound_ms = 18 };
	for (size_t i = 0; i < ELEMENTSOF(reqs); i++) {
		bool late = i >= 48, cut = i >= 56;

		reqs[i] = (struct probe_request_result){ .index = (uint32_t)i,
							 .success = !cut,
							 .cut = cut,
							 .http_status = 200,
							 .output_tokens = cut ? 0 : 32 };
		/* 8 late (TTFT 3-4 s), 5 cut while queued for 2.8-3.2 s */
		reqs[i].ttft_usec = cut ? 0 : (uint64_t)((late ? 3.0 + 0.1 * (double)(i - 48) : 0.8) * 1e6);
		reqs[i].e2e_usec =
			cut ? (uint64_t)((2.8 + 0.1 * (double)(i - 56)) * 1e6) : reqs[i].ttft_usec + 31 * 5000;
		pt.good += probe_request_is_good(&reqs[i], &sla);
	}
	CHECK_INT_EQ(probe_ratesearch_ratios(&cfg, &sla, reqs, ELEMENTSOF(reqs), &pt), 0);
	CHECK_MSG(pt.sla_ratio > 1 && pt.sla_ratio < 2, "sla_ratio %g (TTFT 3-4 s and cuts at 3 s, bound 2.5 s)",
		  pt.sla_ratio);
	CHECK_MSG(pt.tpot_ratio > 0 && pt.tpot_ratio < 1, "tpot_ratio %g (5 ms a token, bound 18 ms)", pt.tpot_ratio);
}

/* A point undecided at its cap says where the knee is: met by its point
 * estimate, it is the answer; missed, the next point is one tolerance step
 * below it. With the probe's time up, the answer is the best sure pass. */
static void test_at_the_cap(void)
{
	struct probe_ratesearch_config cfg;
	struct probe_ratesearch_step st;
	struct probe_rate_point pts[4] = {
		{ .rate = INFINITY, .n = 40, .good = 2, .throughput = 0.7 },
		/* the point: 150 of 160 good (93.8 %) at 0.147 req/s, undecided */
		{ .rate = 0.147,
		  .n = 160,
		  .good = 150,
		  .sla_met = true,
		  .throughput = 0.147,
		  .verdict = PROBE_VERDICT_UNDECIDED },
	};

	probe_ratesearch_config_init(&cfg);
	cfg.sequential = true;
	cfg.max_requests = 160;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 2, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_DONE && st.rate == 0.147 && st.best == 1, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* 13 of 13 good when a short time cap came: too few requests, not the
	 * knee; the search goes on upwards */
	pts[1].n = pts[1].good = 13;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 2, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_MEASURE && st.rate > 0.147, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* 9 of 10 (90 %, 90 % CI 65-98 %): on the target, but too few requests
	 * to place the knee; met by its point estimate, the search goes on
	 * upwards. Missed (8 of 10), it goes down as from a sure miss. */
	pts[1].n = 10;
	pts[1].good = 9;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 2, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_MEASURE && st.rate > 0.147 * 1.06, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	pts[1].good = 8;
	pts[1].sla_met = false;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 2, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_MEASURE && st.rate < 0.147 / 1.06, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	pts[1].sla_met = true;
	pts[1].n = 160;
	/* 140 of 160 (87.5 %): missed at the cap; a step below, not a bisection down */
	pts[1].good = 140;
	pts[1].sla_met = false;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 2, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_MEASURE && st.rate < 0.147 && st.rate > 0.147 / 1.06, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* ... which closes the bracket when it passes */
	pts[2] = (struct probe_rate_point){ .rate = st.rate,
					    .n = 60,
					    .good = 60,
					    .sla_met = true,
					    .throughput = st.rate,
					    .verdict = PROBE_VERDICT_MET };
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 3, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_DONE && st.rate == pts[2].rate, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* time up with a sure pass below a failing rate: that pass, said so */
	pts[2].rate = 0.09;
	cfg.out_of_time = true;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 3, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_DONE && st.rate == 0.09 && st.out_of_time && !st.budget_spent &&
			  st.lo == 0.09 && st.hi == 0.147,
		  "%s %g (%s)", probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* time up after a point the probe's time cut at 1 of 1 good (a real
	 * night's trial, 90 % CI 27-100 %): not a sure pass, the answer stays
	 * the one below it */
	pts[3] = (struct probe_rate_point){
		.rate = 0.12, .n = 1, .good = 1, .sla_met = true, .throughput = 0.12, .verdict = PROBE_VERDICT_UNDECIDED
	};
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_DONE && st.rate == 0.09 && st.out_of_time, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* 13 of 13 at the cap (83-100 %) is */
	pts[3].n = pts[3].good = 13;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_DONE && st.rate == 0.12 && st.out_of_time, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* time up with nothing passing: never, said so */
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 2, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_NEVER && st.out_of_time, "%s (%s)",
		  probe_ratesearch_action_name(st.action), st.why);
}

/* A real night's trial: nothing passed, and the lowest useful rate (0.05
 * req/s) missed at its time cap with 8 of 9 good (90 % CI 62-97 %): too
 * few requests to rule the configuration out. That rate is measured again,
 * its requests pooled, until the interval leaves the target: above it the
 * search goes on up, below it the configuration is out; with the probe's
 * time spent first, it is out, said so. */
static void test_undecided_at_the_floor(void)
{
	struct probe_ratesearch_config cfg;
	struct probe_ratesearch_step st;
	struct probe_rate_point pts[5] = {
		{ .rate = INFINITY, .n = 40, .good = 1, .throughput = 0.28 },
		{ .rate = 0.1,
		  .n = 15,
		  .good = 8,
		  .sla_met = false,
		  .throughput = 0.1,
		  .verdict = PROBE_VERDICT_UNDECIDED },
		{ .rate = 0.05,
		  .n = 9,
		  .good = 8,
		  .sla_met = false,
		  .throughput = 0.05,
		  .verdict = PROBE_VERDICT_UNDECIDED },
	};

	probe_ratesearch_config_init(&cfg);
	cfg.sequential = true;
	cfg.max_requests = 160;
	cfg.min_rate_frac = 0.05 / 0.28; /* probe.min_rate 0.05 */
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 3, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_MEASURE && fabs(st.rate - 0.05) < 1e-9, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* 9 of 9 more: 17 of 18 (94 %) passes; the search goes up from it */
	pts[3] = (struct probe_rate_point){
		.rate = 0.05, .n = 9, .good = 9, .sla_met = true, .throughput = 0.05, .verdict = PROBE_VERDICT_UNDECIDED
	};
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_MEASURE && st.rate > 0.05 * 1.04 && st.rate < 0.1, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	CHECK(st.lo == 0.05 && st.hi == 0.1);
	/* 7 of 9 more: 15 of 18 (83 %, CI 65-93 %) still holds the target */
	pts[3].good = 7;
	pts[3].sla_met = false;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_MEASURE && fabs(st.rate - 0.05) < 1e-9, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	/* ... until the probe's time is spent: out, and the step says why */
	cfg.out_of_time = true;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_NEVER && st.out_of_time && strstr(st.why, "undecided"), "%s (%s)",
		  probe_ratesearch_action_name(st.action), st.why);
	cfg.out_of_time = false;
	/* 3 of 9 more: 11 of 18 (61 %, CI 42-77 %) lies below the target: out */
	pts[3].good = 3;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_NEVER && !st.out_of_time && strstr(st.why, "below"), "%s (%s)",
		  probe_ratesearch_action_name(st.action), st.why);
	/* --parallel 2's TPOT tail: 7 of 9 (CI 50-92 %), then 7 of 9 again
	 * (14 of 18, CI 59-90 %): two points rule it out */
	pts[2].good = pts[3].good = 7;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 3, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_MEASURE && fabs(st.rate - 0.05) < 1e-9, "%s %g (%s)",
		  probe_ratesearch_action_name(st.action), st.rate, st.why);
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_MSG(st.action == PROBE_RATESEARCH_NEVER, "%s %g (%s)", probe_ratesearch_action_name(st.action), st.rate,
		  st.why);
	/* a sure miss at the floor (decided while it ran) ends it at once */
	pts[2].verdict = PROBE_VERDICT_MISSED;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 3, &st, NULL), 0);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_NEVER);
}

static void test_ratios(void)
{
	/* ten requests: TTFT 100..1000 ms, TPOT 10..100 ms (the reverse order),
	 * under ttft:500,tpot:50; the ninth fails */
	struct probe_request_result reqs[10];
	struct probe_ratesearch_config cfg;
	struct probe_sla sla = { .attainment = 0.9 };
	struct probe_rate_point pt = { 0 };
	struct error err = { 0 };

	probe_ratesearch_config_init(&cfg);
	cfg.target = 0.5;
	for (uint32_t i = 0; i < 10; i++)
		reqs[i] = (struct probe_request_result){
			.success = i != 8,
			.ttft_usec = (i + 1) * 100000ULL,
			.e2e_usec = (i + 1) * 100000ULL + 10 * (10 - i) * 10000ULL,
			.output_tokens = 11,
		};
	CHECK_INT_EQ(probe_sla_parse("ttft:500,tpot:50", &sla, &err), 0);
	CHECK_INT_EQ(probe_ratesearch_ratios(&cfg, &sla, reqs, 10, &pt), 0);
	/* per-request worst ratios: max(ttft/500, tpot/50) = 2, 1.8, 1.6, 1.4, 1.2, 1.2, 1.4, 1.6, failed, 2;
	 * Wilson (z 1.28) at target 0.5 needs 8 of 10 good (7/10: lower end 0.497): the 8th smallest is 2 */
	CHECK_REL(pt.sla_ratio, 2.0, 1e-9);
	/* TPOT alone: 2, 1.8, ..., 0.6, failed, 0.2 -> 8th smallest 1.8; fastest TPOT 10 ms = 0.2 */
	CHECK_REL(pt.tpot_ratio, 1.8, 1e-9);
	CHECK_REL(pt.tpot_floor, 0.2, 1e-9);

	/* a percentile bound: p50 TTFT over the 9 completed = 500 ms -> 0.5 of 1000 */
	sla = (struct probe_sla){ 0 };
	CHECK_INT_EQ(probe_sla_parse("p50:ttft:1000", &sla, &err), 0);
	cfg.target = 0;
	CHECK_INT_EQ(probe_ratesearch_ratios(&cfg, &sla, reqs, 10, &pt), 0);
	CHECK_REL(pt.sla_ratio, 0.5, 1e-9);
	CHECK(pt.tpot_ratio == 0 && pt.tpot_floor == 0);
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
			struct server s = { .capacity = 100,
					    .truth = truths[i],
					    .width = widths[k] * truths[i],
					    .floor = 0.05,
					    .sat_attain = 0.1 };
			struct probe_ratesearch_step st;
			size_t points;

			st = search(&cfg, &s, &points);
			CHECK_MSG(st.action == PROBE_RATESEARCH_DONE, "truth %g width %g: %s (%s)", s.truth, s.width,
				  probe_ratesearch_action_name(st.action), st.why);
			/* the reported rate meets the SLA, and is within tolerance of the truth */
			CHECK_MSG(st.rate <= s.truth * 1.000001 && st.rate >= s.truth / (1 + cfg.tolerance) * 0.98,
				  "truth %g width %g: found %g", s.truth, s.width, st.rate);
			CHECK_MSG(getenv("RS_DEBUG") || points <= (s.truth < 10 ? 11u : 9u),
				  "truth %g width %g: %zu points", s.truth, s.width, points);
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

static void test_noisy(bool sequential)
{
	static const double truths[] = { 10, 40, 70 };
	struct probe_ratesearch_config cfg;

	probe_ratesearch_config_init(&cfg);
	cfg.sequential = sequential;
	for (size_t i = 0; i < ELEMENTSOF(truths); i++)
		for (uint64_t seed = 1; seed <= (sequential && !test_quick() ? 40 : 5); seed++) {
			struct server s = { .capacity = 100,
					    .truth = truths[i],
					    .width = 0.02 * truths[i],
					    .floor = 0.05,
					    .sat_attain = 0.1,
					    .noisy = true };
			struct probe_ratesearch_step st;
			size_t points;

			probe_rng_init(&s.rng, seed, 7);
			st = search(&cfg, &s, &points);
			CHECK_MSG(st.action == PROBE_RATESEARCH_DONE, "truth %g seed %llu: %s", s.truth,
				  (unsigned long long)seed, probe_ratesearch_action_name(st.action));
			/* noise may cost a step on the conservative side, never a rate above the truth + tolerance */
			CHECK_MSG(st.rate <= s.truth * (1 + cfg.tolerance) &&
					  st.rate >= s.truth * (1 - 3 * cfg.tolerance),
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

/* Sure verdicts that disagree (a pass above a fail) are said, not hidden. */
static void test_disagreeing_verdicts(void)
{
	struct probe_ratesearch_config cfg;
	struct probe_ratesearch_step st;
	struct probe_rate_point pts[] = {
		{ .rate = INFINITY, .n = 200, .good = 20, .sla_met = false, .throughput = 100 },
		{ .rate = 40, .n = 60, .good = 60, .sla_met = true, .throughput = 40, .verdict = PROBE_VERDICT_MET },
		{ .rate = 41.5,
		  .n = 30,
		  .good = 20,
		  .sla_met = false,
		  .throughput = 41,
		  .verdict = PROBE_VERDICT_MISSED },
		{ .rate = 45, .n = 60, .good = 60, .sla_met = true, .throughput = 45, .verdict = PROBE_VERDICT_MET },
	};

	probe_ratesearch_config_init(&cfg);
	cfg.sequential = true;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_DONE);
	CHECK(st.rate == 40 && st.best == 1);
	CHECK(st.met_above == 45);
	check_not_below_met(pts, 4, &st);

	/* every pass above the lowest fail, and the points spent: not NEVER */
	pts[1] = (struct probe_rate_point){
		.rate = 10, .n = 30, .good = 10, .sla_met = false, .throughput = 10, .verdict = PROBE_VERDICT_MISSED
	};
	cfg.max_points = 3;
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 4, &st, NULL), 0);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_DONE);
	CHECK(st.rate == 45 && st.failed_below == 10);
	CHECK(st.budget_spent);
	check_not_below_met(pts, 4, &st);

	/* an undecided point counts as not met */
	pts[1] = (struct probe_rate_point){
		.rate = 40, .n = 60, .good = 60, .sla_met = true, .throughput = 40, .verdict = PROBE_VERDICT_MET
	};
	pts[2].verdict = PROBE_VERDICT_UNDECIDED;
	pts[2].good = 29;
	pts[3] = pts[2];
	CHECK_INT_EQ(probe_ratesearch_next(&cfg, pts, 3, &st, NULL), 0);
	CHECK_INT_EQ(st.action, PROBE_RATESEARCH_DONE);
	CHECK(st.rate == 40);
	CHECK_STR_CONTAINS(st.why, "undecided");
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
	test_slow_engine();
	test_past_the_knee();
	test_cut_requests_ratio();
	test_at_the_cap();
	test_undecided_at_the_floor();
	test_wilson();
	test_deterministic();
	test_well_behaved_five();
	test_queueing();
	test_queueing_sequential();
	test_ratios();
	test_noisy(false);
	test_noisy(true);
	test_never_always();
	test_boundary_confidence();
	test_disagreeing_verdicts();
	test_errors();
	free(q_reqs);
	return 0;
}
