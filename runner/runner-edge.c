/* runner-edge.c — search.extend_edges: when the search has ended with its
 * best on a bound of an integer range, and the evidence says a wider range
 * may be cheaper (study_find_edge: the SLA does not bind there and, for the
 * batch, the batch was full), the range is widened by one log2 step within
 * the engine's limits and the search goes on in a new phase.
 *
 * A phase is recorded with the study (its trials so far, the knob, its new
 * range, which end) before the search goes on, so a resumed runner applies
 * the same widenings to the spec's space and replays the same path
 * (opt_settings.phase_start). The history's configurations are moved into
 * the wider space by their canonical keys. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "runner-internal.h"

/* Where a knob may go when the profile does not say. */
#define LIMIT_MIN 1
#define LIMIT_MAX 65536

/* The search's settings for the last recorded phase. */
static void phase_settings(struct runner *r)
{
	const struct study_phase *last = r->n_phases ? &r->phases[r->n_phases - 1] : NULL;

	r->settings.phase_start = last ? last->trials : 0;
	r->settings.phase_knob = last ? opt_space_knob_index(r->study->space, last->knob) : -1;
	r->settings.phase_upper = last && last->upper;
}

int runner_phases_load(struct runner *r, struct error *err)
{
	struct study_options so = { .extra_knobs = r->profile->extra_knobs };
	int k;

	k = study_phases_parse(r->row.phases_json, r->phases, ELEMENTSOF(r->phases), &r->n_phases, err);
	if (k >= 0)
		k = study_apply_phases(r->study, r->phases, r->n_phases, &so, err);
	if (k < 0)
		return k;
	phase_settings(r);
	return 0;
}

/* The history's configurations (and the baseline's) in the new space. */
static int move_history(struct runner *r, char (*keys)[OPT_KEY_MAX], struct error *err)
{
	for (size_t i = 0; i < r->history.n; i++) {
		int k = opt_config_from_key(r->study->space, keys[i], &r->history.trials[i].config, err);

		if (k < 0)
			return error_prefix(err, k, "widening the search space");
	}
	return 0;
}

/* The evidence at the best's max rate; 0 without a best on the grid. */
static int best_evidence(struct runner *r, struct opt_config *ret_config, struct probe_result *ret_point,
			 bool *ret_have_point, double *ret_cost, struct error *err)
{
	struct store_study_best b = { 0 };
	struct store_load_point *lp = NULL;
	size_t n = 0;
	int k;

	*ret_have_point = false;
	k = store_study_best(r->store, r->study_id, &b, err);
	if (k == -ENOENT)
		return 0;
	if (k < 0)
		return k;
	if (!b.trial.canonical_key ||
	    opt_config_from_key(r->study->space, b.trial.canonical_key, ret_config, NULL) < 0) {
		store_study_best_done(&b);
		return 0; /* the engine's defaults off the grid: no range to widen */
	}
	*ret_cost = b.cost_per_mtok;
	k = store_load_point_list(r->store, b.trial.id, &lp, &n, err);
	if (k >= 0) {
		const struct store_load_point *at = store_load_point_at_max(lp, n, b.trial.max_rate);
		_cleanup_(cJSON_Deletep) cJSON *j = at && at->result_json ? cJSON_Parse(at->result_json) : NULL;
		struct error e = { 0 };

		*ret_have_point = j && probe_result_from_json(j, ret_point, &e) >= 0;
	}
	store_load_point_array_free(lp, n);
	store_study_best_done(&b);
	return k < 0 ? k : 1;
}

/* Whether the planner's model predicts a gain beyond the range
 * (study_edge_model_gain: its prediction beyond against its own at the
 * bound): 1 when it does, 0 (said in the log) when not. */
static int model_gain(struct runner *r, const struct opt_config *best, const struct study_edge *edge, double cost,
		      double lo, double hi, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *copy = cJSON_Duplicate(r->study->search_space, true);
	int64_t min, max;
	double beyond, predicted, here;
	int k;

	if (!copy)
		return error_set(err, -ENOMEM, "out of memory");
	k = opt_space_widen_json(copy, edge->knob, edge->upper, (int64_t)lo, (int64_t)hi, &min, &max);
	if (k == -ERANGE)
		return 0;
	if (k < 0)
		return error_set(err, k, "search_space.%s: cannot be widened", edge->knob);
	beyond = (double)(edge->upper ? max : min);
	k = r->planner->ops->beyond(r->planner, best, edge->knob, beyond, &predicted, err);
	if (k >= 0)
		k = r->planner->ops->beyond(r->planner, best, edge->knob, edge->value, &here, err);
	if (k < 0)
		return k;
	if (!study_edge_model_gain(predicted, here, cost)) {
		log_info("study %s: %s=%g is the %s of its range, but the model predicts no gain at %g ($%.4g/Mtok "
			 "against $%.4g at %g; $%.4g measured): the range stays",
			 r->row.name, edge->knob, edge->value, edge->upper ? "top" : "bottom", beyond, predicted, here,
			 edge->value, cost);
		return 0;
	}
	log_info("study %s: the model predicts $%.4g/Mtok at %s=%g, beyond the range, against $%.4g at %g ($%.4g/Mtok "
		 "measured)",
		 r->row.name, predicted, edge->knob, beyond, here, edge->value, cost);
	return 1;
}

int runner_edge_phase(struct runner *r, struct error *err)
{
	struct study_options so = { .extra_knobs = r->profile->extra_knobs };
	_cleanup_(freep) char(*keys)[OPT_KEY_MAX] = NULL;
	_cleanup_(freep) char *json = NULL;
	struct study_phase phase = { .trials = r->history.n };
	struct study_edge edge;
	struct opt_config best;
	struct probe_result at;
	bool have_point;
	double lo = LIMIT_MIN, hi = LIMIT_MAX, cost = 0;
	int64_t min, max;
	int k;

	if (!r->study->search.extend_edges || (!r->plain_search && !r->planner->ops->beyond) ||
	    r->n_phases >= ELEMENTSOF(r->phases))
		return 0;
	k = best_evidence(r, &best, &at, &have_point, &cost, err);
	if (k <= 0)
		return k;
	(void)study_find_edge(r->study, r->study->space, &best, have_point ? &at : NULL, &edge);
	if (!study_edge_worth_widening(&edge, r->phases, r->n_phases, cost))
		return 0;
	(void)engine_profile_knob_limits(r->profile, edge.knob, &lo, &hi);
	if (!r->plain_search) {
		k = model_gain(r, &best, &edge, cost, lo, hi, err);
		if (k <= 0)
			return k;
	}
	/* the keys first: the space they index is replaced */
	keys = calloc(r->history.n ? r->history.n : 1, sizeof(*keys));
	if (!keys)
		return error_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < r->history.n; i++)
		if (opt_config_key(r->study->space, &r->history.trials[i].config, keys[i], sizeof(keys[i])) < 0)
			return error_set(err, -ENOBUFS, "a configuration does not fit a key");
	k = opt_space_widen_json((cJSON *)r->study->search_space, edge.knob, edge.upper, (int64_t)lo, (int64_t)hi, &min,
				 &max);
	if (k == -ERANGE)
		return 0; /* at the engine's limit */
	if (k < 0)
		return error_set(err, k, "search_space.%s: cannot be widened", edge.knob);
	snprintf(phase.knob, sizeof(phase.knob), "%s", edge.knob);
	phase.min = min;
	phase.max = max;
	phase.upper = edge.upper;
	phase.best_cost = cost;
	r->phases[r->n_phases++] = phase;
	json = study_phases_format(r->phases, r->n_phases);
	if (!json)
		return error_set(err, -ENOMEM, "out of memory");
	/* recorded before the search goes on: a resume widens the same way */
	k = store_study_set_phases(r->store, r->study_id, json, err);
	if (k >= 0)
		k = study_apply_phases(r->study, &r->phases[r->n_phases - 1], 1, &so, err);
	if (k >= 0)
		k = move_history(r, keys, err);
	if (k >= 0 && r->baseline.on_grid)
		k = opt_config_from_key(r->study->space, r->baseline.key, &r->baseline.config, err);
	if (k < 0)
		return k;
	phase_settings(r);
	log_info("study %s: %s=%g is the %s of its range (what limits goodput there: %s): the search goes on with %s "
		 "in %lld–%lld",
		 r->row.name, edge.knob, edge.value, edge.upper ? "top" : "bottom", edge.limiter, edge.knob,
		 (long long)min, (long long)max);
	return 1;
}
