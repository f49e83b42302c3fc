/* study-edge.c — whether a study's best configuration sits on a bound of
 * an integer range, and what limits its goodput there.
 *
 * A best on the top of max_num_seqs' range whose latencies are far below
 * the SLA was stopped by the range, not by the SLA: a wider range may be
 * cheaper. The evidence is the load point at the best's max rate: each SLA
 * bound against the latency at the quantile it is judged at (the
 * attainment's for per-request bounds), and, where the server's metrics
 * were scraped, whether the batch was full (running = max_num_seqs with
 * requests waiting). Read by the summary of `goodput tune`, `goodput best`,
 * the report, and the runner's extend_edges phase: one function for all. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "study.h"

/* A bound is binding when the latency it judges is this close to it. */
#define BINDING 0.8
/* A widening paid off when the best got this much cheaper in its phase. */
#define PHASE_GAIN 0.02
/* The gain the engine model must predict beyond a bound to widen it. */
#define MODEL_GAIN 0.01

/* The latency of metric m at percentile pct in r (the smallest percentile
 * measured at or above pct, else the largest); NAN when none. */
static double latency_at(const struct probe_result *r, enum probe_metric m, double pct)
{
	double v = NAN, best_p = INFINITY, top_p = -1, top_v = NAN;

	for (size_t i = 0; i < r->n_percentiles; i++) {
		double p = r->percentiles[i];

		if (p >= pct - 1e-9 && p < best_p) {
			best_p = p;
			v = r->stat[m].pct_ms[i];
		}
		if (p > top_p) {
			top_p = p;
			top_v = r->stat[m].pct_ms[i];
		}
	}
	return isfinite(best_p) ? v : top_v;
}

/* The SLA bound closest to binding at r: its ratio, and its text. */
static double worst_bound(const struct study *s, const struct probe_result *r, char *buf, size_t size)
{
	double worst = 0;
	size_t len = 0;

	buf[0] = 0;
	for (size_t i = 0; i < s->sla.n_bounds; i++) {
		const struct probe_sla_bound *b = &s->sla.bounds[i];
		double pct = b->percentile > 0 ? b->percentile : s->sla.attainment * 100;
		double v = latency_at(r, b->metric, pct);
		int n;

		if (!isfinite(v))
			continue;
		worst = fmax(worst, v / b->bound_ms);
		n = snprintf(buf + len, size - len, "%s%s p%g %.0f ms of %g", len ? ", " : "",
			     probe_metric_name(b->metric), pct, v, b->bound_ms);
		if (n > 0 && (size_t)n < size - len)
			len += (size_t)n;
	}
	return worst;
}

/* Whether the batch was full at the load point for a max_num_seqs edge
 * (the server's running peak, else the client's peak in flight): 1, 0, or
 * -1 when that is not the question (another knob's edge, or no point). */
static int batch_full(const struct study_edge *e, const struct probe_result *at)
{
	if (!at || strcmp(e->knob, OPT_KNOB_MAX_NUM_SEQS) != 0)
		return -1;
	if (at->server.present)
		return at->server.running_peak >= e->value * 0.95;
	return at->max_concurrent_requests >= e->value;
}

int study_find_edge(const struct study *s, const struct opt_space *space, const struct opt_config *best,
		    const struct probe_result *at, struct study_edge *ret)
{
	struct study_edge e = { 0 };
	char bounds[200] = "";
	double ratio = 0;
	int full;

	if (at && s->scenario == OPT_SCENARIO_ONLINE)
		ratio = worst_bound(s, at, bounds, sizeof(bounds));
	for (size_t k = 0; k < space->n_knobs && !e.found; k++) {
		const struct opt_knob *knob = &space->knobs[k];

		if (knob->kind != OPT_KNOB_RANGE || knob->categorical || knob->n_values < 2)
			continue;
		/* a knob the best does not have (the other shape's) has no edge */
		if (!opt_knob_active(space, best, k))
			continue;
		if (best->idx[k] != 0 && best->idx[k] + 1u != knob->n_values)
			continue;
		e.found = true;
		e.upper = best->idx[k] != 0;
		e.value = knob->numbers[best->idx[k]];
		e.min = knob->min;
		e.max = knob->max;
		snprintf(e.knob, sizeof(e.knob), "%s", knob->name);
	}
	if (!e.found) {
		*ret = e;
		return 0;
	}
	full = batch_full(&e, at);
	study_edge_decide(&e, ratio);
	e.have_evidence = at != NULL;
	if (!at)
		snprintf(e.limiter, sizeof(e.limiter), "unknown (no load point at the best's max rate)");
	else if (e.sla_binding)
		snprintf(e.limiter, sizeof(e.limiter), "the SLA (%s)", bounds);
	else if (full > 0 && at->server.present)
		snprintf(e.limiter, sizeof(e.limiter),
			 "the full batch: %.0f of max_num_seqs %g running, %.0f waiting at peak; the SLA does not bind "
			 "(%s)",
			 at->server.running_peak, e.value, at->server.waiting_peak, bounds);
	else if (full > 0)
		snprintf(e.limiter, sizeof(e.limiter),
			 "the full batch: up to %.0f requests in flight against max_num_seqs %g; the SLA does not bind "
			 "(%s)",
			 at->max_concurrent_requests, e.value, bounds);
	else if (full == 0)
		snprintf(e.limiter, sizeof(e.limiter),
			 "not the SLA (%s): up to %.0f requests in flight of max_num_seqs %g at that rate, the batch "
			 "fills above it",
			 bounds, at->max_concurrent_requests, e.value);
	else
		snprintf(e.limiter, sizeof(e.limiter), "%s %g, not the SLA (%s)", e.knob, e.value,
			 bounds[0] ? bounds : "no latency bounds");
	if (!e.have_evidence)
		e.widen = false;
	*ret = e;
	return 0;
}

void study_edge_decide(struct study_edge *e, double sla_ratio)
{
	e->sla_ratio = sla_ratio;
	e->sla_binding = sla_ratio >= BINDING;
	/* a wider range may be cheaper where the range, not the SLA, stopped it
	 * going up (the batch may be short of full at the max SLA rate itself:
	 * the rate just above, where it filled, is the one that failed); below
	 * the range where the SLA binds */
	e->widen = e->found && (e->upper ? !e->sla_binding : e->sla_binding);
}

bool study_edge_worth_widening(const struct study_edge *e, const struct study_phase *phases, size_t n, double best_cost)
{
	if (!e->found || !e->widen)
		return false;
	for (size_t i = n; i-- > 0;)
		if (strcmp(phases[i].knob, e->knob) == 0 && phases[i].upper == e->upper)
			return !(phases[i].best_cost > 0) || best_cost < phases[i].best_cost * (1 - PHASE_GAIN);
	return true;
}

bool study_edge_model_gain(double predicted, double at_bound, double measured)
{
	return predicted < (isfinite(at_bound) ? at_bound : measured) * (1 - MODEL_GAIN);
}

void study_edge_format(const struct study_edge *e, char *buf, size_t size)
{
	if (!e->found) {
		snprintf(buf, size, "the best is inside every range");
		return;
	}
	snprintf(buf, size, "%s=%g is the %s of its range (%g–%g); what limits goodput there: %s%s", e->knob, e->value,
		 e->upper ? "top" : "bottom", e->min, e->max, e->limiter,
		 e->widen ? ": a wider range may be cheaper (search.extend_edges widens it)" : "");
}
