/* ratesearch.h — finding the largest request rate that meets the SLA, as a
 * pure function of the load points measured so far (no I/O, no clock).
 *
 * The caller loops: ask probe_ratesearch_next(history) what to do; if it says
 * MEASURE, run a load point at that rate with that many requests, append it to
 * the history, ask again. Because the decision depends on the history alone,
 * a restarted study continues the same search from its stored load points.
 *
 * The method:
 * 1. Saturation: the first point is run at rate INFINITY (everything at once).
 *    Its completed-requests/s, X_sat, bounds every later rate (a server cannot
 *    sustain more). If it completed nothing, the answer is NEVER. If it meets
 *    the SLA conclusively, the answer is ALWAYS: the SLA holds up to the
 *    client's limit (rate = X_sat).
 * 2. Bracketing in log(rate): the first finite point is at 0.75·X_sat. After
 *    that the next rate interpolates (regula falsi) logit(attainment) −
 *    logit(target) linearly in log(rate) between the nearest passing and the
 *    nearest failing point — exact for a logistic attainment curve — kept
 *    10% inside the bracket, and nudged to one tolerance step from an end
 *    when it falls closer than that (so the next point either closes the
 *    bracket or moves it by a full step). With only failing points it
 *    extrapolates downward (at least halving); with only passing points it
 *    moves towards X_sat.
 * 3. Stopping: when the lowest failing rate ≤ (1 + tolerance) × the highest
 *    passing rate (default 5%), the answer is DONE at the passing rate; when
 *    a passing rate reaches X_sat/(1 + tolerance) with nothing failing above
 *    it, ALWAYS; when min_rate fails (or max_points run out with nothing
 *    passing), NEVER.
 *
 * Confidence. Sequential load points (cfg->sequential, what the probe
 * runs) come back decided: met or missed at the test's confidence, or
 * undecided at the cap, which counts as missed (sequential.h). Every such
 * point is sure, so the search never measures a rate twice; an answer
 * below a rate that met the SLA (a pass above a fail: the verdicts
 * disagree) names that rate in met_above instead of hiding it.
 * Points of a fixed count (the saturation run, and every point when
 * sequential is off) are judged here: a point's attainment good/n gets a
 * Wilson score interval (default z = 1.2816, one-sided 90%). It is
 * *conclusive* when the interval lies wholly on one side of the target.
 * During the search every point steers by its point estimate (its
 * sla_met). Before DONE or ALWAYS is answered, the passing point that
 * would be reported must be conclusive: if it is not, the same rate is
 * measured once more with enough requests to bring the pool at that rate
 * (counts of all points at one rate add up) to max_requests; a point
 * still inconclusive then is treated as failing — conservative, so the
 * reported rate is one the SLA holds at with confidence. Failing points
 * are never re-measured (treating a doubtful point as failing is the
 * conservative side already). Percentile-only SLAs (target 0) are judged
 * by sla_met alone.
 *
 * Steering by latency (when the points carry sla_ratio): attainment alone is
 * a step on a sharp knee (all good below, none above) and says nothing about
 * how far a point is from it. Every load point also carries sla_ratio, the
 * aim quantile over its requests of each request's worst latency/bound ratio
 * (probe_ratesearch_ratios()): a continuous figure that is 1 where the point
 * would just pass conclusively (a sequential point: where its test drifts
 * to neither verdict). Its inverse w = 1/sla_ratio is close to
 * linear in the rate on a queueing server — TTFT ≈ prefill/(1 − ρ) when the
 * knee is set by queueing, TPOT ≈ a/(1 − k·rate) when it is set by the batch
 * size (Little's law: concurrency = rate × E2E) — so the next rate solves
 * w = 1 on the line through the two points that bracket it (regula falsi,
 * Illinois-weighted when one end stays put), aimed half a tolerance step
 * below the estimate so that the next point passes and the one after, a
 * step up, closes the bracket. Only conclusive passes count as lower ends
 * for steering; a doubtful pass within a tolerance step of one is measured
 * again (pooled to max_requests) before the search moves past it. The first
 * point is the knee's estimate (below). With passing points only, the next rate is the
 * higher of the line to w = 0 at X_sat (where the queue grows without
 * bound) and the secant of the two highest points; with failing points only,
 * the lowest of that line, the secant, and rate × w (at most 16× down) —
 * unless the lowest failed on its wait (TTFT or E2E) with its TPOT part
 * held: w is then no line (past the knee the aim quantile of a wait grows
 * with the queue), and the next rate is the knee of the queue below (the
 * first point's model) whose service rate makes the point's own rate miss
 * the share of requests it missed. A request the probe cut counts by what
 * it showed: a TTFT of at least its time in flight, no TPOT without tokens.
 * Points without sla_ratio (0) steer by logit(attainment) as before.
 *
 * The knee's estimate, the first point: the lower of two. Queueing
 * (Little's law on the saturation run): the server completes X_sat
 * requests/s, so a request waits in a queue of service time 1/X_sat, whose
 * wait exceeds w with probability about ρ·exp(−θ·w·X_sat), θ between
 * M/M/1's 1 − ρ and M/D/1's Cramér–Lundberg root by c², the service time's
 * spread from the gaps between the saturation run's completions (at most
 * 1, and 1 when unknown);
 * w is what the TTFT (E2E) bound leaves beyond the single-request latency
 * (the saturation run's fastest request), and the knee is the ρ at which
 * that probability is the miss rate the aim attainment allows. On a slow
 * engine whose bound is a few service times (llama.cpp on CPU with one
 * slot: 2.5 s against 1.4 s a request) this puts the knee near a fifth of
 * X_sat, where a fixed fraction of X_sat started 4× too high; with a
 * generous bound it lands at the 0.9·X_sat cap. TPOT: when the TPOT/ITL
 * part is over its bounds at saturation (tpot_ratio > 1), the TPOT model
 * above, with the saturation run's fastest request bounding the unloaded
 * TPOT, places it (an all-at-once run's TPOT is inflated by every prefill
 * at once). The estimate is kept within [2·min_rate_frac, 0.9]·X_sat.
 *
 * At the cap: a sequential point that reached its cap (of requests or of
 * time) undecided is judged by its point estimate (sla_met). When that
 * estimate lies in the test's indifference zone (within margin·(1 − t) of
 * the target) and its 90 % interval within twice the zone (150 of 160 good,
 * not 9 of 10), its attainment is not told apart from the target, and it
 * tells where the knee is: one that met the target there is the answer
 * when nothing above it passed; one that missed puts the next point one
 * tolerance step below it, which closes the bracket when it passes. One
 * further from the target (every request good when a short time cap came)
 * only had too few requests, and steers as a sure point. Nothing rules a
 * configuration out on too few requests: when nothing passed and the lowest
 * useful rate missed at its cap with the attainment's 90 % interval still
 * holding the target (8 of 9 good: 62-97 %), that rate is measured again,
 * the points at it pooled (judged by all their requests' point estimate),
 * until the interval leaves the target — a pass, and the search goes on up
 * from it; or NEVER, "its 90 % interval lies below the target" — or the
 * points or the probe's time run out (NEVER, "... with the lowest rate
 * undecided"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "metrics.h"

struct probe_ratesearch_config {
	double target;         /* attainment target, e.g. 0.9; 0 = judge by sla_met only */
	double tolerance;      /* relative bracket width to stop at; default 0.05 */
	double z;              /* Wilson z; default 1.2816 */
	double min_rate_frac;  /* lowest useful rate as a fraction of X_sat; default 1/64 */
	uint32_t num_requests; /* requests per load point; default 200 */
	uint32_t max_requests; /* pooled requests per rate for the confidence check; default 4 × num_requests */
	uint32_t max_points;   /* finite-rate points before giving up; default 12 */
	/* Sequential load points (sequential.h): each finite-rate point sends
	 * up to max_requests and ends sure — met, missed, or undecided at the
	 * cap (treated as missed); num_requests is the saturation run's. */
	bool sequential;
	double confidence, margin; /* of the sequential test; defaults 0.95, 0.5 */
	/* The probe's time is up (its share of a wall-time budget): no more
	 * points; the answer is the best sure pass so far (out_of_time in the
	 * step), at the precision the bracket has. */
	bool out_of_time;
};

/* One measured load point (a summary of its probe_result). */
struct probe_rate_point {
	double rate;       /* offered requests/s; INFINITY for the saturation run */
	uint32_t n;        /* measured requests */
	uint32_t good;     /* requests that met the per-request bounds */
	bool sla_met;      /* the load point's verdict (attainment and percentile bounds) */
	double throughput; /* completed requests/s achieved */
	/* Latency figures for steering (0 = unknown), see probe_ratesearch_ratios(). */
	double sla_ratio;  /* aim quantile of the per-request worst latency/bound ratio */
	double tpot_ratio; /* the same over the TPOT and ITL bounds only (0 when there are none) */
	double tpot_floor; /* lowest per-request TPOT / its bound (saturation run: unloaded TPOT bound) */
	/* The single-request latency the saturation run shows, against the
	 * bounds (0 = unknown or unbounded): the fastest request's TTFT and
	 * E2E, s, and the per-request bounds on them, s (the knee's estimate) */
	double single_ttft_s, single_e2e_s, ttft_bound_s, e2e_bound_s;
	double service_scv;         /* the service time's squared coefficient of variation (0: unknown) */
	enum probe_verdict verdict; /* decided while it ran (sequential.h); NONE: judged here by Wilson */
};

enum probe_ratesearch_action {
	PROBE_RATESEARCH_MEASURE, /* measure `rate` with `num_requests` requests */
	PROBE_RATESEARCH_DONE,    /* `rate` is the largest rate found meeting the SLA */
	PROBE_RATESEARCH_NEVER,   /* the SLA fails even at the lowest useful rate */
	PROBE_RATESEARCH_ALWAYS,  /* the SLA holds up to the saturation/client limit, `rate` */
};

struct probe_ratesearch_step {
	enum probe_ratesearch_action action;
	double rate;
	uint32_t num_requests; /* MEASURE only */
	ssize_t best;          /* DONE/ALWAYS: index of a point at `rate`; else -1 */
	double lo, hi;         /* current bracket (0 / INFINITY when open) */
	double saturation;     /* X_sat, 0 before the saturation run */
	const char *why;       /* a short static explanation for logs */
	/* DONE/ALWAYS: a higher rate that met the SLA with confidence although a
	 * rate between failed (the verdicts disagree: noise, or a server that
	 * changed); 0 when none */
	double met_above;
	double failed_below; /* DONE: a lower rate failed although `rate` met (the same disagreement); 0 */
	bool budget_spent;   /* the answer came because max_points ran out */
	bool out_of_time;    /* ... or because the probe's time was up (cfg->out_of_time) */
};

void probe_ratesearch_config_init(struct probe_ratesearch_config *cfg);

/* The next step for this history (points in the order measured, the first
 * being the saturation run). Errors (-EINVAL with err) for a bad config or a
 * history that does not start with a saturation run. */
int probe_ratesearch_next(const struct probe_ratesearch_config *cfg, const struct probe_rate_point *pts, size_t n,
			  struct probe_ratesearch_step *ret, struct error *err);

/* Wilson score interval of good/n at z. n = 0 gives [0, 1]. */
void probe_wilson_interval(uint32_t good, uint32_t n, double z, double *ret_lo, double *ret_hi);

const char *probe_ratesearch_action_name(enum probe_ratesearch_action a);

/* The steering figures of a load point from its requests (see top): the
 * quantile min(target + z·sqrt(target(1 − target)/n), 1 − 1/n) over requests
 * of max over the per-request bounds of latency/bound (a failed request:
 * 1e6), and for percentile bounds pX/bound; then the same over TPOT and ITL
 * bounds alone, and the fastest request's TPOT/bound. Writes 0 for what
 * sla does not bound. Deterministic in its inputs; the caller stores the
 * figures in its probe_rate_point. -ENOMEM only. */
int probe_ratesearch_ratios(const struct probe_ratesearch_config *cfg, const struct probe_sla *sla,
			    const struct probe_request_result *reqs, size_t n, struct probe_rate_point *point);
