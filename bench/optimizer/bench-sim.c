/* bench-sim.c — the benchmark's true costs: each configuration evaluated by
 * `goodput tune --dry-run`'s evaluator (runner_dry_evaluate: goodput-sim's
 * engine model in virtual time, the study's workload, SLA, rate-search
 * tolerance and cost model), so a landscape is exactly what a dry run of its
 * study spec measures. A configuration the engine refuses at start-up is
 * infeasible; one that meets the SLA at no rate is "SLA never met". Each
 * point keeps how close the SLA was at its max rate, the evidence the edge
 * rule reads. */
#include <errno.h>
#include <math.h>

#include "bench-landscape.h"
#include "runner-dryrun.h"

/* The load points a dry-run trial stores: the saturated run (rate
 * infinite) and the run at the max SLA rate, drawn with the workload's
 * seed (prompt variant 0). */
static void add_points(const struct runner_dry_result *res, struct bench_point *p)
{
	if (res->have_saturated && twin_point_from_result(&res->saturated, &p->points[p->n_points]) >= 0) {
		p->points[p->n_points].rate = INFINITY;
		p->n_points++;
	}
	if (res->have_point && res->max_rate > 0 && twin_point_from_result(&res->point, &p->points[p->n_points]) >= 0) {
		p->points[p->n_points].rate = res->max_rate;
		p->n_points++;
	}
}

int bench_sim_eval(const struct study *study, const struct runner_dry_engine *engine, const struct opt_config *c,
		   struct bench_point *ret, struct error *err)
{
	struct runner_dry_result res;
	struct study_edge edge;
	int r;

	r = runner_dry_evaluate_with(study, c, 0, engine, &res, err);
	if (r < 0)
		return r;
	if (res.infeasible) {
		*ret = (struct bench_point){ .outcome = OPT_OUTCOME_INFEASIBLE };
		return 0;
	}
	if (res.sla_never_met || !isfinite(res.cost_per_mtok)) {
		*ret = (struct bench_point){ .outcome = OPT_OUTCOME_SLA_NEVER_MET };
		add_points(&res, ret);
		return 0;
	}
	(void)study_find_edge(study, study->space, c, res.have_point ? &res.point : NULL, &edge);
	*ret = (struct bench_point){ .outcome = OPT_OUTCOME_MEASURED,
				     .cost = res.cost_per_mtok,
				     .sla_ratio = edge.sla_ratio,
				     .peak_in_flight = res.have_point ? res.point.max_concurrent_requests : 0,
				     .max_rate = res.max_rate };
	add_points(&res, ret);
	return 0;
}
