/* store-best.c — a study's answer, the one figure every caller shows
 * (goodput tune, the report, goodputd's status/list/best and its best
 * files, the runner's status line): the chosen configuration and its cost.
 *
 * Measurements of one configuration are its trials (one row per kind: the
 * search's and the re-probes) that finished as done with a cost; a single
 * measurement is noisy and the lowest of many is biased low, so the cost of
 * a configuration is the mean of all its measurements, summed in the order
 * they were made (seq), with their count and spread. The chosen
 * configuration is the one the runner recorded when the study ended
 * (studies.best_trial_id, the planner's answer) when it was measured; until
 * then the one with the lowest mean (ties: the one measured first). Read
 * from the stored trials alone, so every program that opens the database
 * gives the same answer. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "macro.h"
#include "store.h"

/* One measured configuration: its measurements among the study's trials. */
struct group {
	size_t first; /* index of its first measurement */
	double sum, min, max, mean;
	unsigned n;
	uint64_t last_finished_usec;
};

static bool measured(const struct store_trial *t)
{
	return t->state == STORE_TRIAL_DONE && isfinite(t->cost_per_mtok) && t->cost_per_mtok > 0;
}

static bool same_config(const struct store_trial *a, const struct store_trial *b)
{
	if (!a->canonical_key || !b->canonical_key)
		return a->id == b->id;
	return strcmp(a->canonical_key, b->canonical_key) == 0;
}

/* The measured configurations in the order they were first measured; the
 * caller frees *ret. */
static int group_trials(const struct store_trial *t, size_t n, struct group **ret, size_t *ret_n)
{
	struct group *g = calloc(n ? n : 1, sizeof(*g));
	size_t k = 0;

	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		bool first = measured(&t[i]);

		for (size_t j = 0; j < i && first; j++)
			first = !(measured(&t[j]) && same_config(&t[j], &t[i]));
		if (!first)
			continue;
		g[k] = (struct group){ .first = i, .min = INFINITY, .max = -INFINITY };
		for (size_t j = i; j < n; j++)
			if (measured(&t[j]) && same_config(&t[j], &t[i])) {
				g[k].sum += t[j].cost_per_mtok;
				g[k].min = fmin(g[k].min, t[j].cost_per_mtok);
				g[k].max = fmax(g[k].max, t[j].cost_per_mtok);
				g[k].n++;
				if (t[j].finished_usec > g[k].last_finished_usec)
					g[k].last_finished_usec = t[j].finished_usec;
			}
		g[k].mean = g[k].sum / g[k].n;
		k++;
	}
	*ret = g;
	*ret_n = k;
	return 0;
}

/* The group with the lowest mean other than `skip` (SIZE_MAX: none), ties
 * to the one measured first; SIZE_MAX when there is none. */
static size_t cheapest(const struct group *g, size_t n, size_t skip)
{
	size_t pick = SIZE_MAX;

	for (size_t i = 0; i < n; i++)
		if (i != skip && (pick == SIZE_MAX || g[i].mean < g[pick].mean))
			pick = i;
	return pick;
}

/* The group the study's recorded choice belongs to, or SIZE_MAX. */
static size_t chosen(const struct group *g, size_t n, const struct store_trial *t, size_t n_trials, int64_t best_id)
{
	for (size_t i = 0; best_id > 0 && i < n_trials; i++) {
		if (t[i].id != best_id)
			continue;
		for (size_t k = 0; k < n; k++)
			if (same_config(&t[g[k].first], &t[i]))
				return k;
	}
	return SIZE_MAX;
}

void store_study_best_done(struct store_study_best *b)
{
	if (!b)
		return;
	store_trial_done(&b->trial);
	free(b->runner_up_key);
	free(b->runner_up_knobs_json);
	free(b->engine_version);
	free(b->baseline_knobs_json);
	*b = (struct store_study_best){ 0 };
}

/* "engine_version" of a trial's host facts (NULL when absent) into *ret. */
static int engine_version(const struct store_trial *t, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *host = t->host_json ? cJSON_Parse(t->host_json) : NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(host, "engine_version");

	*ret = NULL;
	if (!cJSON_IsString(v) || !*v->valuestring)
		return 0;
	*ret = strdup(v->valuestring);
	return *ret ? 0 : -ENOMEM;
}

static int fill(struct store_trial *t, size_t n, const struct group *g, size_t n_groups, size_t best, size_t second,
		struct store_study_best *ret)
{
	struct store_study_best b = {
		.cost_per_mtok = g[best].mean,
		.n = g[best].n,
		.cost_min = g[best].min,
		.cost_max = g[best].max,
		.spread = (g[best].max - g[best].min) / g[best].mean,
		.runner_up_cost_per_mtok = NAN,
		.answered_usec = g[best].last_finished_usec,
		.time_to_answer_s = NAN,
	};

	for (size_t i = 0; i < n; i++)
		if (t[i].started_usec > 0 && (!b.first_started_usec || t[i].started_usec < b.first_started_usec))
			b.first_started_usec = t[i].started_usec;
	if (b.first_started_usec && b.answered_usec > b.first_started_usec)
		b.time_to_answer_s = (double)(b.answered_usec - b.first_started_usec) / 1e6;

	if (engine_version(&t[g[best].first], &b.engine_version) < 0)
		return -ENOMEM;
	if (second != SIZE_MAX) {
		const struct store_trial *ru = &t[g[second].first];

		b.have_runner_up = true;
		b.runner_up_cost_per_mtok = g[second].mean;
		b.runner_up_n = g[second].n;
		b.runner_up_spread = (g[second].max - g[second].min) / g[second].mean;
		if ((ru->canonical_key && !(b.runner_up_key = strdup(ru->canonical_key))) ||
		    (ru->knobs_json && !(b.runner_up_knobs_json = strdup(ru->knobs_json)))) {
			store_study_best_done(&b);
			return -ENOMEM;
		}
	}
	/* the engine's defaults, as the study measured them */
	b.baseline_cost_per_mtok = NAN;
	for (size_t i = 0; i < n && !b.have_baseline; i++) {
		if (!t[i].kind || !strstr(t[i].kind, "baseline"))
			continue;
		b.have_baseline = true;
		b.baseline_state = t[i].state;
		b.baseline_failure = t[i].failure;
		for (size_t k = 0; k < n_groups; k++)
			if (same_config(&t[g[k].first], &t[i]) && measured(&t[i]))
				b.baseline_cost_per_mtok = g[k].mean;
		if (t[i].knobs_json && !(b.baseline_knobs_json = strdup(t[i].knobs_json))) {
			store_study_best_done(&b);
			return -ENOMEM;
		}
	}
	/* the row is handed over */
	b.trial = t[g[best].first];
	t[g[best].first] = (struct store_trial){ 0 };
	*ret = b;
	return 0;
}

int store_study_best(struct store *s, int64_t study_id, struct store_study_best *ret, struct error *err)
{
	struct store_study st = { 0 };
	struct store_trial *t = NULL;
	struct group *g = NULL;
	size_t n = 0, n_groups = 0, best, second;
	int r;

	r = store_study_get(s, study_id, &st, err);
	if (r < 0)
		return r;
	r = store_trial_history(s, study_id, &t, &n, err);
	if (r >= 0 && group_trials(t, n, &g, &n_groups) < 0)
		r = error_set(err, -ENOMEM, "out of memory");
	if (r >= 0 && n_groups == 0)
		r = error_set(err, -ENOENT, "study %s has no measured trial yet", st.name);
	if (r >= 0) {
		best = chosen(g, n_groups, t, n, st.best_trial_id);
		if (best == SIZE_MAX)
			best = cheapest(g, n_groups, SIZE_MAX);
		second = cheapest(g, n_groups, best);
		if (fill(t, n, g, n_groups, best, second, ret) < 0)
			r = error_set(err, -ENOMEM, "out of memory");
	}
	free(g);
	store_trial_array_free(t, n);
	store_study_done(&st);
	return r < 0 ? r : 0;
}

int store_best_for(struct store *s, const char *model, const char *engine, const char *label,
		   struct store_study *ret_study, struct store_study_best *ret, struct error *err)
{
	struct store_study *a = NULL;
	struct store_study_best pick = { 0 };
	size_t n = 0, at = SIZE_MAX;
	int r;

	if (!model || !engine)
		return error_set(err, -EINVAL, "finding the best configuration: a model and an engine are needed");
	r = store_study_list(s, &a, &n, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r >= 0; i++) {
		struct store_study_best b;

		if (a[i].state != STORE_STUDY_DONE || !a[i].model || !a[i].engine || strcmp(a[i].model, model) != 0 ||
		    strcmp(a[i].engine, engine) != 0 || (label && (!a[i].label || strcmp(a[i].label, label) != 0)))
			continue;
		r = store_study_best(s, a[i].id, &b, err);
		if (r == -ENOENT) {
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		if (at == SIZE_MAX || b.cost_per_mtok < pick.cost_per_mtok) {
			store_study_best_done(&pick);
			pick = b;
			at = i;
		} else
			store_study_best_done(&b);
	}
	if (r >= 0 && at == SIZE_MAX)
		r = error_set(err, -ENOENT,
			      "no finished study with a result for model \"%.150s\", engine \"%.60s\"%s%.150s%s", model,
			      engine, label ? ", label \"" : "", label ? label : "", label ? "\"" : "");
	if (r >= 0) {
		*ret_study = a[at];
		a[at] = (struct store_study){ 0 }; /* handed over */
		*ret = pick;
	} else
		store_study_best_done(&pick);
	store_study_array_free(a, n);
	return r < 0 ? r : 0;
}

/* ---- when nothing met the SLA ---- */

void store_study_closest_done(struct store_study_closest *c)
{
	store_trial_done(&c->trial);
	free(c->result_json);
	*c = (struct store_study_closest){ 0 };
}

/* Whether load point (a, r) came closer than the best so far. */
static bool closer(double a, double r, double best_a, double best_r)
{
	if (isnan(best_a))
		return true;
	if (a != best_a)
		return a > best_a;
	return r < best_r;
}

int store_study_closest(struct store *s, int64_t study_id, struct store_study_closest *ret, struct error *err)
{
	struct store_trial *t = NULL;
	size_t n = 0, best = SIZE_MAX;
	double best_a = NAN, best_r = NAN;
	char *best_json = NULL;
	int r;

	r = store_trial_history(s, study_id, &t, &n, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r >= 0; i++) {
		struct store_load_point *lp = NULL;
		size_t m = 0;

		/* trials that ended with an outcome, and those cut short (a
		 * budget's end): their load points were measured all the same */
		if (t[i].state != STORE_TRIAL_DONE && t[i].state != STORE_TRIAL_INFEASIBLE &&
		    t[i].state != STORE_TRIAL_FAILED && t[i].state != STORE_TRIAL_INTERRUPTED)
			continue;
		r = store_load_point_list(s, t[i].id, &lp, &m, err);
		for (size_t k = 0; r >= 0 && k < m; k++) {
			if (!lp[k].phase || strcmp(lp[k].phase, "saturation") == 0 || !isfinite(lp[k].request_rate))
				continue;
			if (closer(isfinite(lp[k].attainment) ? lp[k].attainment : 0, lp[k].request_rate, best_a,
				   best_r)) {
				best_a = isfinite(lp[k].attainment) ? lp[k].attainment : 0;
				best_r = lp[k].request_rate;
				best = i;
				free(best_json);
				best_json = lp[k].result_json ? strdup(lp[k].result_json) : NULL;
			}
		}
		store_load_point_array_free(lp, m);
	}
	if (r >= 0 && best == SIZE_MAX)
		r = error_set(err, -ENOENT, "study %lld: no trial measured a load point", (long long)study_id);
	if (r >= 0) {
		*ret = (struct store_study_closest){
			.trial = t[best], .rate = best_r, .attainment = best_a, .result_json = TAKE_PTR(best_json)
		};
		t[best] = (struct store_trial){ 0 };
	}
	free(best_json);
	store_trial_array_free(t, n);
	return r < 0 ? r : 0;
}
