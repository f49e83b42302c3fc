/* runner-sweep.c — the study's last deployment: a load-step sweep of its
 * answer.
 *
 * The rate search finds the largest rate a configuration sustains under the
 * SLA; it says little of how latency grows on the way there, or how much
 * headroom the answer has. Once the answer is confirmed (the planner done,
 * nothing in flight), one more deployment of it measures a fixed gradient
 * of load — RUNNER_SWEEP_STEPS from 20 % to 110 % of its max rate, each a
 * load point of workload.num_prompts requests, judged afterwards — the
 * latency–throughput curve a benchmark report draws, with its sweet spot
 * (the highest goodput that met the SLA). The trial is of kind "sweep"
 * ("dry-run-sweep"), runs alone on the host like a confirmation of the
 * answer, stores its load points with phase "sweep" and its sweet spot as
 * max_rate/max_goodput, and has no cost: it is no measurement of the
 * configuration's cost, so the search's history and the study's answer
 * never see it.
 *
 * Budgeted like a confirmation: it counts in budget.max_trials and never
 * goes past it (runner_new keeps one deployment out of the search's budget
 * for it when the budget has room, max_trials ≥ RUNNER_SWEEP_RESERVE_FROM;
 * with less it runs only where the search left one), is skipped when the
 * budget (deployments or wall time, with the sweep's own length estimated)
 * is spent, and is made once per study. Online studies only ("sweep":
 * false in the spec turns it off). A dry run sweeps in virtual time
 * (runner_dry_sweep). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "log.h"
#include "runner-dryrun.h"
#include "runner-internal.h"
#include "time-util.h"

_Static_assert(RUNNER_SWEEP_STEPS <= RUNNER_DRY_SWEEP_MAX && RUNNER_SWEEP_STEPS <= PROBE_SWEEP_MAX,
	       "a sweep fits a dry run's result and the probe's config");

/* The load steps, as fractions of the answer's max rate. */
static const double sweep_steps[RUNNER_SWEEP_STEPS] = { 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0, 1.1 };

bool runner_kind_is_sweep(const char *kind)
{
	return kind && strstr(kind, "sweep") != NULL;
}

size_t runner_sweep_rates(const struct runner_proposal *p, double *ret)
{
	if (!p->sweep || !(p->sweep_rate > 0) || !isfinite(p->sweep_rate))
		return 0;
	for (size_t i = 0; i < RUNNER_SWEEP_STEPS; i++)
		ret[i] = p->sweep_rate * sweep_steps[i];
	return RUNNER_SWEEP_STEPS;
}

static bool study_sweeps(const struct runner *r)
{
	return r->study->sweep && r->study->scenario == OPT_SCENARIO_ONLINE;
}

void runner_sweep_reserve(struct runner *r)
{
	if (study_sweeps(r) && r->status.max_trials >= RUNNER_SWEEP_RESERVE_FROM && r->settings.max_trials > 1)
		r->settings.max_trials--;
}

/* The max rate of the first measurement of configuration `key` (the one
 * the study's answer is recorded as, runner.c's record_best); -ENOENT when
 * it was never measured. */
static int first_max_rate(struct runner *r, const char *key, double *ret, struct error *err)
{
	struct store_trial *rows = NULL;
	size_t n = 0;
	int k;

	k = store_trial_history(r->store, r->study_id, &rows, &n, err);
	if (k < 0)
		return k;
	k = -ENOENT;
	for (size_t i = 0; i < n && k == -ENOENT; i++)
		if (rows[i].state == STORE_TRIAL_DONE && isfinite(rows[i].cost_per_mtok) && rows[i].cost_per_mtok > 0 &&
		    rows[i].canonical_key && strcmp(rows[i].canonical_key, key) == 0) {
			*ret = rows[i].max_rate;
			k = 0;
		}
	store_trial_array_free(rows, n);
	return k;
}

int runner_sweep_proposal(struct runner *r, const char *canonical_key, struct runner_proposal *ret, struct error *err)
{
	struct runner_proposal p = {
		.ask = OPT_ASK_TRIAL, .attempt = 1, .predicted_cost = NAN, .alone = true, .sweep = true
	};
	char key[OPT_KEY_MAX];
	int k;

	if (canonical_key) {
		k = opt_config_from_key(r->study->space, canonical_key, &p.config, err);
		if (k < 0)
			return error_prefix(err, k, "the sweep's configuration");
		snprintf(key, sizeof(key), "%s", canonical_key);
	} else {
		/* the answer as the study will record it: the planner's */
		struct opt_result best;

		opt_best(r->study->space, &r->history, &best, NULL);
		if (!best.valid)
			return -ENOENT;
		p.config = best.config;
		k = opt_config_key(r->study->space, &best.config, key, sizeof(key));
		if (k < 0)
			return error_set(err, k, "the answer's configuration key");
	}
	k = first_max_rate(r, key, &p.sweep_rate, err);
	if (k < 0)
		return k;
	*ret = p;
	return 0;
}

/* How long the sweep would take: a deployment and its load points. */
static double sweep_seconds(const struct runner *r, const struct runner_proposal *p)
{
	double rates[RUNNER_SWEEP_STEPS], s = r->deploy_n ? r->deploy_sum_s / r->deploy_n : 0;
	size_t n = runner_sweep_rates(p, rates);

	for (size_t i = 0; i < n; i++)
		s += r->study->workload.num_prompts / rates[i];
	return s;
}

bool runner_sweep_queue(struct runner *r)
{
	struct store_trial *rows = NULL;
	struct runner_proposal p;
	struct error err = { 0 };
	char why[256];
	size_t n = 0;
	bool swept = false;
	int k;

	if (!study_sweeps(r) || r->n_trials > 0 || r->request != RUNNER_REQUEST_NONE)
		return false;
	k = store_trial_history(r->store, r->study_id, &rows, &n, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return false;
	}
	for (size_t i = 0; i < n; i++)
		swept = swept || runner_kind_is_sweep(rows[i].kind);
	store_trial_array_free(rows, n);
	/* once per study; every trial recorded was (or is) a deployment */
	if (swept || (r->status.max_trials > 0 && n >= r->status.max_trials))
		return false;
	k = runner_sweep_proposal(r, NULL, &p, &err);
	if (k == -ENOENT)
		return false; /* nothing met the SLA: no answer to sweep */
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return false;
	}
	if (!(p.sweep_rate > 0) || !isfinite(p.sweep_rate))
		return false;
	if (runner_wall_budget_spent(r, why, sizeof(why)))
		return false;
	if (r->wall_budget_usec && r->wall_budget_usec != UINT64_MAX) {
		uint64_t used = r->wall_used_before_usec + (runner_clock(r) - r->start_usec);
		double left = used < r->wall_budget_usec ? (double)(r->wall_budget_usec - used) / USEC_PER_SEC : 0;

		if (left < sweep_seconds(r, &p)) {
			log_debug("no sweep: %.0f s of wall time left, the sweep takes about %.0f s", left,
				  sweep_seconds(r, &p));
			return false;
		}
	}
	k = runner_queue_add(r, &p, &err);
	if (k < 0) {
		runner_fail(r, error_str(&err, k));
		return false;
	}
	return true;
}

void runner_sweep_outcome(const struct runner_trial *t, const struct probe_result *sweet, size_t n_points,
			  struct trial_result *ret)
{
	const struct study *s = t->runner->study;
	struct opt_throughput tp = { 0 };
	double in_per_req;

	if (n_points == 0) {
		trial_result_init(ret, STORE_TRIAL_FAILED, STORE_FAILURE_PROBE_ERROR);
		snprintf(ret->message, sizeof(ret->message), "the sweep measured no load point");
		return;
	}
	/* done, without a cost: the curve is what it measured */
	trial_result_init(ret, STORE_TRIAL_DONE, STORE_FAILURE_NONE);
	if (!sweet) {
		snprintf(ret->message, sizeof(ret->message),
			 "no rate of the sweep met the SLA (%zu load points, up to %.4g req/s)", n_points,
			 t->proposal.sweep_rate * sweep_steps[RUNNER_SWEEP_STEPS - 1]);
		return;
	}
	in_per_req = sweet->completed > 0 ? (double)sweet->total_input_tokens / sweet->completed : 0;
	tp.good_output_tps = sweet->good_output_throughput;
	tp.good_input_tps = sweet->request_goodput * in_per_req;
	ret->max_rate = sweet->request_rate;
	ret->max_goodput = opt_cost_tokens_per_sec(s->scenario, s->cost_tokens, &tp);
	ret->concurrency = sweet->mean_concurrency;
}

void runner_sweep_probe_config(const struct runner_trial *t, struct probe_config *pc)
{
	pc->find_max_rate = false;
	pc->fixed_count = true;
	pc->n_sweep = (uint32_t)runner_sweep_rates(&t->proposal, pc->sweep_rates);
}

int runner_sweep_store_dry(struct runner_trial *t, const struct runner_dry_result *res, struct trial_result *ret)
{
	const struct probe_result *pts[RUNNER_SWEEP_STEPS];
	size_t n = MIN((size_t)res->n_sweep, (size_t)RUNNER_SWEEP_STEPS), best;
	int k;

	if (res->infeasible) {
		/* the answer no longer starts: say so, as a failure of this deployment */
		trial_result_init(ret, STORE_TRIAL_FAILED, STORE_FAILURE_OOM);
		snprintf(ret->message, sizeof(ret->message), "the sweep's server did not start: %.400s", res->message);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		k = runner_trial_load_point(t, "sweep", &res->sweep[i], NULL, true);
		if (k < 0)
			return k;
		pts[i] = &res->sweep[i];
	}
	best = probe_sweep_best(pts, n);
	runner_sweep_outcome(t, best == SIZE_MAX ? NULL : pts[best], n, ret);
	return 0;
}
