/* sequential.c — Wald's sequential probability ratio test on a load
 * point's requests, read in send order; see sequential.h for the test and
 * what its verdicts promise. */
#include "sequential.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "macro.h"

enum {
	OUT = 0,
	GOOD = 1,
	BAD = 2,
};

void probe_sequential_config_init(struct probe_sequential_config *cfg, double target, uint32_t max_requests)
{
	*cfg = (struct probe_sequential_config){
		.target = target,
		.confidence = PROBE_SEQUENTIAL_CONFIDENCE,
		.margin = PROBE_SEQUENTIAL_MARGIN,
		.min_requests = PROBE_SEQUENTIAL_MIN_REQUESTS,
		.min_seconds = PROBE_SEQUENTIAL_MIN_SECONDS,
		.max_requests = max_requests,
	};
}

static double p1_of(const struct probe_sequential_config *cfg)
{
	return cfg->target + cfg->margin * (1 - cfg->target);
}

int probe_sequential_init(struct probe_sequential *s, const struct probe_sequential_config *cfg, struct error *err)
{
	double t = cfg->target, p1 = p1_of(cfg), alpha = 1 - cfg->confidence;

	if (!(t > 0 && t < 1))
		return error_set(err, -EINVAL, "sequential verdict: the attainment target must be in (0, 1), got %g",
				 t);
	if (!(cfg->confidence >= 0.5 && cfg->confidence < 1))
		return error_set(err, -EINVAL, "sequential verdict: confidence must be in [0.5, 1), got %g",
				 cfg->confidence);
	if (!(cfg->margin > 0 && cfg->margin < 1))
		return error_set(err, -EINVAL, "sequential verdict: margin must be in (0, 1), got %g", cfg->margin);
	if (!(cfg->min_seconds >= 0))
		return error_set(err, -EINVAL, "sequential verdict: min_seconds must be >= 0, got %g",
				 cfg->min_seconds);
	if (cfg->max_requests == 0 || cfg->min_requests > cfg->max_requests)
		return error_set(err, -EINVAL,
				 "sequential verdict: expected 0 < min_requests (%u) <= max_requests (%u)",
				 cfg->min_requests, cfg->max_requests);
	*s = (struct probe_sequential){
		.cfg = *cfg,
		.step_good = log(p1 / t),
		.step_bad = log((1 - p1) / (1 - t)),
		.upper = log((1 - alpha) / alpha),
		.lower = log(alpha / (1 - alpha)),
		.seen = calloc(cfg->max_requests, 1),
		.send_usec = calloc(cfg->max_requests, sizeof(uint64_t)),
	};
	if (!s->seen || !s->send_usec) {
		probe_sequential_done(s);
		return error_set(err, -ENOMEM, "sequential verdict: out of memory");
	}
	return 0;
}

void probe_sequential_done(struct probe_sequential *s)
{
	free(s->seen);
	free(s->send_usec);
	s->seen = NULL;
	s->send_usec = NULL;
}

/* The send times the requests read so far span, s. */
static double span_s(const struct probe_sequential *s)
{
	uint64_t a = s->send_usec[0], b = s->judged ? s->send_usec[s->judged - 1] : a;

	return b > a ? (double)(b - a) / 1e6 : 0;
}

/* Where the sum over the judged prefix stands: past a boundary, or between. */
static enum probe_verdict boundary_crossed(const struct probe_sequential *s)
{
	if (s->llr >= s->upper)
		return PROBE_VERDICT_MET;
	return s->llr <= s->lower ? PROBE_VERDICT_MISSED : PROBE_VERDICT_NONE;
}

enum probe_verdict probe_sequential_add(struct probe_sequential *s, uint32_t i, bool good, uint64_t send_usec)
{
	if (i >= s->cfg.max_requests || s->seen[i] != OUT)
		return s->verdict;
	s->seen[i] = good ? GOOD : BAD;
	s->send_usec[i] = send_usec;
	/* read on in send order as far as every request has come back */
	while (s->judged < s->cfg.max_requests && s->seen[s->judged] != OUT) {
		bool g = s->seen[s->judged] == GOOD;

		s->llr += g ? s->step_good : s->step_bad;
		s->good += g;
		s->judged++;
	}
	if (s->judged >= s->cfg.min_requests && span_s(s) >= s->cfg.min_seconds)
		s->verdict = boundary_crossed(s);
	return s->verdict;
}

enum probe_verdict probe_sequential_finish(struct probe_sequential *s)
{
	/* a cap reached before min_seconds passed: the sum says what it says */
	if (s->verdict == PROBE_VERDICT_NONE && s->judged >= s->cfg.min_requests)
		s->verdict = boundary_crossed(s);
	if (s->verdict == PROBE_VERDICT_NONE)
		s->verdict = PROBE_VERDICT_UNDECIDED;
	return s->verdict;
}

double probe_sequential_aim(const struct probe_sequential_config *cfg)
{
	double t = cfg->target, p1 = p1_of(cfg), g = log(p1 / t), b = log((1 - p1) / (1 - t));

	/* p·g + (1 − p)·b = 0: the expected step is zero */
	return -b / (g - b);
}
