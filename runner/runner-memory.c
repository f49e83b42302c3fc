/* runner-memory.c — what the runner knows about memory before and after a
 * server starts: the out-of-memory cause an engine's log gave (deploy/'s
 * classifier, or the sim core's start-up check in a dry run) as the
 * optimizer's cause and as the store's text, and the memory pre-flight
 * (runner-preflight.c) handed to the search and recorded with the study:
 * per quantization × TP combination, whether it fits at its smallest and at
 * its largest batch knobs, with the estimate — the report shows the
 * combinations predicted not to fit, which are never deployed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "runner-internal.h"

enum opt_oom_cause runner_cause_of_engine(enum engine_failure_cause c)
{
	switch (c) {
	case ENGINE_FAILURE_WEIGHTS:
		return OPT_OOM_WEIGHTS;
	case ENGINE_FAILURE_KV_CACHE:
		return OPT_OOM_KV_CACHE;
	case ENGINE_FAILURE_CACHE_BLOCKS:
		return OPT_OOM_CACHE_BLOCKS;
	default:
		return OPT_OOM_UNKNOWN;
	}
}

enum opt_oom_cause runner_cause_of_sim(enum sim_startup_cause c)
{
	switch (c) {
	case SIM_STARTUP_WEIGHTS:
		return OPT_OOM_WEIGHTS;
	case SIM_STARTUP_KV_CACHE:
		return OPT_OOM_KV_CACHE;
	case SIM_STARTUP_CACHE_BLOCKS:
		return OPT_OOM_CACHE_BLOCKS;
	default:
		return OPT_OOM_UNKNOWN;
	}
}

const char *runner_cause_text(enum opt_oom_cause c)
{
	return c == OPT_OOM_UNKNOWN ? NULL : opt_oom_cause_to_string(c);
}

enum opt_oom_cause runner_cause_from_text(const char *s)
{
	for (int c = OPT_OOM_WEIGHTS; s && c < _OPT_OOM_CAUSE_MAX; c++)
		if (strcmp(s, opt_oom_cause_to_string((enum opt_oom_cause)c)) == 0)
			return (enum opt_oom_cause)c;
	return OPT_OOM_UNKNOWN;
}

/* ---- the pre-flight ---- */

static const char *const fit_names[] = { "unknown", "fits", "near", "does not fit" };

/* The configuration of combination base (categorical values set) with every
 * ordinal knob at its smallest (top = false) or largest allowed value. */
static bool extreme(const struct opt_space *s, const struct opt_config *base, bool top, struct opt_config *ret)
{
	struct opt_config c = *base;

	for (size_t k = 0; k < s->n_knobs; k++)
		if (!s->knobs[k].categorical)
			c.idx[k] = (uint16_t)(top ? s->knobs[k].n_values - 1 : 0);
	/* constraints between the batch knobs: step the largest down until allowed */
	for (unsigned guard = 0; guard < 64 && !opt_space_allowed(s, &c); guard++) {
		bool moved = false;

		for (size_t k = 0; k < s->n_knobs && !moved; k++)
			if (!s->knobs[k].categorical && (top ? c.idx[k] > 0 : c.idx[k] + 1u < s->knobs[k].n_values)) {
				c.idx[k] = (uint16_t)(top ? c.idx[k] - 1 : c.idx[k] + 1);
				moved = true;
			}
		if (!moved)
			return false;
	}
	if (!opt_space_allowed(s, &c))
		return false;
	*ret = c;
	return true;
}

static int estimate_json(const struct runner_estimate *e, cJSON *o)
{
	char text[320];

	runner_estimate_format(e, text, sizeof(text));
	if (json_add_string(o, "fit", fit_names[e->fit]) < 0 ||
	    (e->fit != OPT_FIT_YES && runner_cause_text(e->cause) &&
	     json_add_string(o, "cause", runner_cause_text(e->cause)) < 0) ||
	    json_add_number(o, "need_gib", e->need_gib) < 0 || json_add_number(o, "budget_gib", e->budget_gib) < 0 ||
	    json_add_string(o, "estimate", text) < 0)
		return -ENOMEM;
	if (e->fit != OPT_FIT_YES && e->cause == OPT_OOM_KV_CACHE && e->kv_tokens > 0 &&
	    json_add_number(o, "longest_max_model_len", (double)e->kv_tokens) < 0)
		return -ENOMEM;
	return 0;
}

int runner_preflight_record(struct runner *r, struct error *err)
{
	const struct opt_space *s = r->study->space;
	_cleanup_(cJSON_Deletep) cJSON *root = NULL, *combos = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	uint64_t n_combos = 1;
	int k;

	if (!r->preflight.usable)
		return store_study_set_preflight(r->store, r->study_id, NULL, err);
	root = cJSON_CreateObject();
	if (!root || json_add_string(root, "source", r->preflight.source) < 0 ||
	    json_add_number(root, "margin", RUNNER_PREFLIGHT_MARGIN) < 0 ||
	    !(combos = cJSON_AddArrayToObject(root, "combinations")))
		return error_set(err, -ENOMEM, "out of memory");
	combos = NULL; /* owned by root */
	for (size_t i = 0; i < s->n_knobs; i++)
		if (s->knobs[i].categorical)
			n_combos *= s->knobs[i].n_values;
	for (uint64_t m = 0; m < n_combos; m++) {
		struct opt_config base = { 0 }, lo, hi;
		struct runner_estimate elo, ehi;
		char name[256];
		uint64_t rest = m;
		cJSON *o, *ol, *oh;

		for (size_t i = s->n_knobs; i-- > 0;)
			if (s->knobs[i].categorical) {
				base.idx[i] = (uint16_t)(rest % s->knobs[i].n_values);
				rest /= s->knobs[i].n_values;
			}
		if (!extreme(s, &base, false, &lo) || !extreme(s, &base, true, &hi))
			continue;
		runner_preflight_estimate(&r->preflight, s, &lo, &elo);
		runner_preflight_estimate(&r->preflight, s, &hi, &ehi);
		study_knobs_text(s, &base, true, name, sizeof(name));
		o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(root, "combinations"), o) ||
		    json_add_string(o, "combination", name[0] ? name : "the configuration") < 0 ||
		    !(ol = cJSON_AddObjectToObject(o, "smallest")) || !(oh = cJSON_AddObjectToObject(o, "largest")) ||
		    estimate_json(&elo, ol) < 0 || estimate_json(&ehi, oh) < 0)
			return error_set(err, -ENOMEM, "out of memory");
	}
	text = cJSON_PrintUnformatted(root);
	if (!text)
		return error_set(err, -ENOMEM, "out of memory");
	k = store_study_set_preflight(r->store, r->study_id, text, err);
	return k < 0 ? k : 0;
}
