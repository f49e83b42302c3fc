/* report-shape.c — which serving shape won a study that searched both
 * (deploy.shape "both"): one server with prefill and decode on the same
 * GPUs, or prefill and decode workers behind the engine's router — and by
 * how much, with the best of the other shape beside it.
 *
 * DistServe's measure is per-GPU goodput (the largest rate meeting the SLA,
 * divided by the GPUs the deployment holds); at one price per GPU-hour it
 * is the inverse of the cost per token, so the winner is the answer (the
 * cheapest) and its gain is the other shape's best cost over the answer's.
 * Each configuration counts with the mean of its measurements (its
 * re-probes included), as the answer does; the GPUs are the ones its
 * trials ran on. The other shape's best is the best the search measured
 * (it stops measuring a shape once it is ruled out), so the count of its
 * configurations measured is said with it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "report.h"
#include "store.h"

/* "disaggregated" or "aggregated" by a trial's knobs; NULL without a shape knob. */
static const char *shape_of(const char *knobs_json)
{
	_cleanup_(cJSON_Deletep) cJSON *k = knobs_json ? cJSON_Parse(knobs_json) : NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(k, "shape");

	if (!cJSON_IsString(v))
		return NULL;
	return strcmp(v->valuestring, "disaggregated") == 0 ? "disaggregated" : "aggregated";
}

/* The GPUs a trial ran on ("0,1", "node1:0,1"); 0 when not recorded. */
static unsigned gpus_of(const char *text)
{
	const char *p = text ? strrchr(text, ':') : NULL;
	unsigned n = 0;

	p = p ? p + 1 : text;
	if (!p || !*p)
		return 0;
	for (n = 1; *p; p++)
		n += *p == ',';
	return n;
}

/* A knobs object as people read it ("2 prefill ... "), from its JSON text. */
static void knobs_text(const char *knobs_json, char *buf, size_t size)
{
	_cleanup_(cJSON_Deletep) cJSON *k = knobs_json ? cJSON_Parse(knobs_json) : NULL;

	study_knobs_json_text(k, buf, size);
}

/* One configuration's measurements. */
struct config_sum {
	const struct store_trial *first;
	double cost_sum, goodput_sum;
	unsigned n, gpus;
};

int report_shape_compare(struct store *store, int64_t study_id, const struct store_study_best *best,
			 struct report_shape_compare *ret, struct error *err)
{
	struct report_shape_compare c = { .present = false };
	_cleanup_(freep) struct config_sum *sums = NULL;
	struct store_trial *t = NULL;
	const char *winner;
	size_t n = 0, n_sums = 0;
	int k;

	*ret = c;
	winner = best ? shape_of(best->trial.knobs_json) : NULL;
	if (!winner)
		return 0;
	k = store_trial_history(store, study_id, &t, &n, err);
	if (k < 0)
		return k;
	sums = calloc(MAX(n, (size_t)1), sizeof(*sums));
	if (!sums) {
		store_trial_array_free(t, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		size_t j;

		if (t[i].state != STORE_TRIAL_DONE || !(t[i].cost_per_mtok > 0) || !shape_of(t[i].knobs_json) ||
		    !t[i].canonical_key)
			continue;
		for (j = 0; j < n_sums; j++)
			if (strcmp(sums[j].first->canonical_key, t[i].canonical_key) == 0)
				break;
		if (j == n_sums)
			sums[n_sums++].first = &t[i];
		sums[j].cost_sum += t[i].cost_per_mtok;
		sums[j].goodput_sum += t[i].max_goodput;
		sums[j].n++;
		sums[j].gpus = MAX(sums[j].gpus, gpus_of(t[i].gpus));
	}
	c.present = true;
	snprintf(c.winner, sizeof(c.winner), "%s", winner);
	snprintf(c.other, sizeof(c.other), "%s", strcmp(winner, "aggregated") == 0 ? "disaggregated" : "aggregated");
	c.winner_cost = best->cost_per_mtok;
	knobs_text(best->trial.knobs_json, c.winner_knobs, sizeof(c.winner_knobs));
	for (size_t j = 0; j < n_sums; j++) {
		const struct config_sum *s = &sums[j];
		double cost = s->cost_sum / s->n;

		if (strcmp(s->first->canonical_key, best->trial.canonical_key ? best->trial.canonical_key : "") == 0) {
			c.winner_gpus = s->gpus;
			c.winner_goodput_per_gpu = s->gpus ? s->goodput_sum / s->n / s->gpus : NAN;
			continue;
		}
		if (strcmp(shape_of(s->first->knobs_json), c.other) != 0)
			continue;
		c.other_measured++;
		if (c.have_other && cost >= c.other_cost)
			continue;
		c.have_other = true;
		c.other_cost = cost;
		c.other_gpus = s->gpus;
		c.other_goodput_per_gpu = s->gpus ? s->goodput_sum / s->n / s->gpus : NAN;
		knobs_text(s->first->knobs_json, c.other_knobs, sizeof(c.other_knobs));
	}
	c.gain = c.have_other && c.winner_cost > 0 ? c.other_cost / c.winner_cost : NAN;
	store_trial_array_free(t, n);
	*ret = c;
	return 0;
}

void report_shape_text(const struct report_shape_compare *c, char *buf, size_t size)
{
	if (!c->present) {
		snprintf(buf, size, "one shape searched");
		return;
	}
	if (!c->have_other) {
		snprintf(buf, size, "%s (no %s configuration met the SLA)", c->winner, c->other);
		return;
	}
	snprintf(buf, size,
		 "%s wins, %.2fx the goodput per GPU of the best %s measured (%u configuration%s): $%.4f/Mtok (%s, %u "
		 "GPU%s, %.1f tok/s per GPU) against $%.4f/Mtok (%s, %u GPU%s, %.1f tok/s per GPU)",
		 c->winner, c->gain, c->other, c->other_measured, c->other_measured == 1 ? "" : "s", c->winner_cost,
		 c->winner_knobs, c->winner_gpus, c->winner_gpus == 1 ? "" : "s", c->winner_goodput_per_gpu,
		 c->other_cost, c->other_knobs, c->other_gpus, c->other_gpus == 1 ? "" : "s", c->other_goodput_per_gpu);
}

int report_shape_json(const struct report_shape_compare *c, cJSON *o)
{
	cJSON *s;

	if (!c->present)
		return 0;
	s = cJSON_AddObjectToObject(o, "shape");
	if (!s || json_add_string(s, "winner", c->winner) < 0 ||
	    json_add_number(s, "cost_per_mtok", c->winner_cost) < 0 || json_add_number(s, "gpus", c->winner_gpus) < 0 ||
	    json_add_number(s, "goodput_per_gpu", c->winner_goodput_per_gpu) < 0 ||
	    json_add_string(s, "other", c->other) < 0 || json_add_number(s, "other_measured", c->other_measured) < 0)
		return -ENOMEM;
	if (!c->have_other)
		return 0;
	if (json_add_string(s, "other_best", c->other_knobs) < 0 ||
	    json_add_number(s, "other_cost_per_mtok", c->other_cost) < 0 ||
	    json_add_number(s, "other_gpus", c->other_gpus) < 0 ||
	    json_add_number(s, "other_goodput_per_gpu", c->other_goodput_per_gpu) < 0 ||
	    json_add_number(s, "gain", c->gain) < 0)
		return -ENOMEM;
	return 0;
}
