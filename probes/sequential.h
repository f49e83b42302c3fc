/* sequential.h — the verdict of one load point, decided while its requests
 * come back: "meets the SLA at this rate" or not, at a stated confidence,
 * with as few requests as the evidence allows (no I/O, no clock).
 *
 * A fixed count per load point cannot be both cheap and sure: 40 requests
 * tell a server at 97 % attainment from one at 90 % only when nearly all of
 * them are good, and a server far from the target is clear after ten. So
 * the probe keeps sending at the load point and asks after every request
 * whether the question is settled — Wald's sequential probability ratio
 * test on good/not good:
 *
 *   H0: attainment = t (the target)  against  H1: attainment = p1,
 *   p1 = t + margin·(1 − t)          (margin 0.5: 0.95 for t = 0.9),
 *
 * summing log(p1/t) for each good request and log((1 − p1)/(1 − t)) for
 * each other one (failed requests are never good). "met" when the sum
 * reaches log((1 − α)/α), "missed" when it falls to log(α/(1 − α)), with
 * α = 1 − confidence on both sides. Wald's bounds hold however often the
 * sum is looked at: a load point whose attainment is the target or lower is
 * called "met" with probability at most α, one at p1 or higher "missed" at
 * most α; in between either verdict is a small error in rate, because
 * attainment falls steeply with the rate near the knee. At confidence 0.95
 * and t = 0.9 a load point with every request good is "met" after 55
 * requests, one with half of them good "missed" as soon as min_requests
 * have come back; near the target it takes a few hundred. Nor does a
 * verdict rest on requests sent within less than min_seconds (3 s): the
 * requests of a short window share one state of the server's queue, and
 * at a high rate 55 requests are a fraction of a second — goodput-sim in
 * virtual time, at 85 req/s, then placed the max rate 6 % too high on
 * average (the queue had no time to build), and within 0.1 % with 3 s. A load
 * point that reaches max_requests without a verdict is "undecided": its
 * attainment is indistinguishable from the target at that count, and the
 * rate search treats it as not met.
 *
 * The test reads requests in the order they were sent, not the order they
 * finished: a slow request (the one likely to miss its bound) would
 * otherwise be judged after the fast ones sent after it, and the verdict
 * would lean towards "met". When the sum first crosses a boundary the probe
 * stops sending; the requests then in flight come back and are read too,
 * and the verdict is where the sum over every request sent ends: past the
 * same boundary, past the other one (the late requests of a load point
 * whose queue was still building up), or between them — then the probe
 * takes the sending up again.
 *
 * Wald's bounds assume independent requests. Misses that come in runs (a
 * burst of arrivals) are not; discounting them (dividing the sum by the
 * mean run length) was tried on goodput-sim in virtual time and changed
 * how often the search placed the max rate not at all while costing 5–10 %
 * more requests, and it read an overloaded server's one long run of misses
 * as a single event: so the test stays Wald's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "metrics.h"

#define PROBE_SEQUENTIAL_CONFIDENCE   0.95
#define PROBE_SEQUENTIAL_MARGIN       0.5
#define PROBE_SEQUENTIAL_MIN_REQUESTS 16u
#define PROBE_SEQUENTIAL_MIN_SECONDS  3.0

struct probe_sequential_config {
	double target;         /* attainment target t, in (0, 1) */
	double confidence;     /* 1 − α; default 0.95 */
	double margin;         /* p1 = t + margin·(1 − t); default 0.5 */
	uint32_t min_requests; /* no verdict on fewer; default 16 */
	double min_seconds;    /* nor on requests sent over less time; default 3 s */
	uint32_t max_requests; /* the cap: requests a load point sends at most */
};

void probe_sequential_config_init(struct probe_sequential_config *cfg, double target, uint32_t max_requests);

struct probe_sequential {
	struct probe_sequential_config cfg;
	double step_good, step_bad; /* log-likelihood ratio per good / other request */
	double upper, lower;        /* the verdict boundaries */
	double llr;                 /* over the judged prefix */
	uint32_t judged, good;      /* the prefix in send order that the test has read */
	uint8_t *seen;              /* per request: 0 still out, 1 good, 2 not good */
	uint64_t *send_usec;        /* per request, as it came back */
	enum probe_verdict verdict; /* over the requests read so far */
};

/* Checks cfg (err names what is wrong) and readies s for one load point. */
int probe_sequential_init(struct probe_sequential *s, const struct probe_sequential_config *cfg, struct error *err);
void probe_sequential_done(struct probe_sequential *s);

/* Request number i (0-based, in send order), sent at send_usec, ended,
 * good or not. Returns
 * the verdict over the requests read so far: NONE while the sum lies
 * between the boundaries (or fewer than min_requests were read), else MET
 * or MISSED. Requests past the cap and repeats are ignored. */
enum probe_verdict probe_sequential_add(struct probe_sequential *s, uint32_t i, bool good, uint64_t send_usec);

/* The load point has ended (everything sent came back): the verdict, which
 * is UNDECIDED when the test had none (min_seconds yields to the cap). */
enum probe_verdict probe_sequential_finish(struct probe_sequential *s);

/* The attainment at which the test drifts towards neither verdict: the
 * rate search aims its load points at it (ratesearch.h). */
double probe_sequential_aim(const struct probe_sequential_config *cfg);
