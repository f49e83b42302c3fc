/* runner-baseline.c — the study's baseline: the engine's default
 * configuration, measured first so that the answer can say how much
 * cheaper it is than what an operator runs without tuning.
 *
 * The batch and chunk size are the engine's defaults for the study's GPU
 * (the profile's "defaults", vLLM's depending on GPU memory); the
 * precision is the model's native one at the smallest TP the memory
 * pre-flight predicts to fit, else the first allowed quantization that
 * fits at some TP; knobs the profile names no default for are left to the
 * engine (absent from the command line), and a knob of one value keeps it
 * (a fixed max_model_len). The baseline is a trial of kind "baseline"
 * ("dry-run-baseline" in a dry run). It
 * enters the search's history only when its values lie on the grid; it
 * counts in max_trials either way (an off-grid baseline lowers the
 * search's budget by one, decided once per study so that the replay stays
 * exact). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "runner-internal.h"

#define BASELINE_KIND "baseline"

/* "baseline", or "dry-run-baseline" in a dry run. */
bool runner_kind_is_baseline(const char *kind)
{
	size_t n = kind ? strlen(kind) : 0;

	return n >= strlen(BASELINE_KIND) && strcmp(kind + n - strlen(BASELINE_KIND), BASELINE_KIND) == 0;
}

double runner_baseline_gpu_gib(const struct runner *r)
{
	return r->preflight.usable ? r->preflight.gpu.mem_bytes / SIM_GIB : r->study->gpu.memory_gib;
}

/* The values of a list or range knob, or NULL for a knob the space lacks. */
static const struct opt_knob *knob_of(const struct opt_space *s, const char *name)
{
	int k = opt_space_knob_index(s, name);

	return k < 0 ? NULL : &s->knobs[k];
}

static int set_number(cJSON *o, const char *name, double v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, name);
	return json_add_number(o, name, v);
}

static int set_string(cJSON *o, const char *name, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, name);
	return json_add_string(o, name, v);
}

/* A knob of disaggregated serving: no part of one server's defaults. */
static bool disaggregated_knob(const char *name)
{
	return strcmp(name, OPT_KNOB_SHAPE) == 0 || strncmp(name, "prefill_", 8) == 0 ||
	       strncmp(name, "decode_", 7) == 0;
}

/* The knobs of a baseline at quantization q (NULL: no such knob) and TP tp (0: none). */
static int baseline_knobs(const struct runner *r, const cJSON *defaults, const char *q, double tp, cJSON **ret)
{
	const struct opt_space *s = r->study->space;
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	const cJSON *item;

	if (!o)
		return -ENOMEM;
	/* only what the search space has: the rest is the engine's own anyway */
	cJSON_ArrayForEach(item, defaults)
	{
		if (!knob_of(s, item->string))
			continue;
		if (cJSON_IsNumber(item) ? set_number(o, item->string, item->valuedouble) < 0
					 : set_string(o, item->string, item->valuestring) < 0)
			return -ENOMEM;
	}
	/* a knob the study fixes and the engine names no default for (a
	 * max_model_len the workload needs) keeps its one value */
	for (size_t k = 0; k < s->n_knobs; k++)
		if (s->knobs[k].n_values == 1 && !cJSON_GetObjectItemCaseSensitive(defaults, s->knobs[k].name) &&
		    !disaggregated_knob(s->knobs[k].name)) {
			struct opt_config c = { 0 };
			char buf[64];

			if (s->knobs[k].kind == OPT_KNOB_LIST_STRING
				    ? set_string(o, s->knobs[k].name, opt_config_text(s, &c, k, buf, sizeof(buf))) < 0
				    : set_number(o, s->knobs[k].name, s->knobs[k].numbers[0]) < 0)
				return -ENOMEM;
		}
	if ((q && set_string(o, OPT_KNOB_QUANTIZATION, q) < 0) ||
	    (tp > 0 && set_number(o, OPT_KNOB_TENSOR_PARALLEL, tp) < 0))
		return -ENOMEM;
	/* what the engine runs untuned is one server */
	if (knob_of(s, OPT_KNOB_SHAPE) && set_string(o, OPT_KNOB_SHAPE, "aggregated") < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

/* The canonical key of knob values, in the space's order; a knob the
 * engine's defaults leave unset (the profile names no default for it) is
 * "knob=default". 1 when it is a configuration of the grid (ret_config set). */
static int key_of(const struct runner *r, const cJSON *knobs, char *buf, size_t size, struct opt_config *ret_config)
{
	const struct opt_space *s = r->study->space;
	size_t len = 0;
	bool all = true;

	buf[0] = 0;
	for (size_t k = 0; k < s->n_knobs; k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, s->knobs[k].name);
		char val[64];
		int n;

		if (!v) {
			all = false;
			snprintf(val, sizeof(val), "default");
		} else if (cJSON_IsString(v))
			snprintf(val, sizeof(val), "%s", v->valuestring);
		else if (floor(v->valuedouble) == v->valuedouble)
			snprintf(val, sizeof(val), "%.0f", v->valuedouble);
		else
			snprintf(val, sizeof(val), "%.17g", v->valuedouble);
		n = snprintf(buf + len, size - len, "%s%s=%s", len ? "," : "", s->knobs[k].name, val);
		if (n < 0 || (size_t)n >= size - len)
			return -ENOBUFS;
		len += (size_t)n;
	}
	return all && opt_config_from_key(s, buf, ret_config, NULL) >= 0 ? 1 : 0;
}

/* The quantizations to try: the native precision first, then the allowed
 * others in the space's order (NULL entries end the list). */
static size_t quantizations(const struct runner *r, const char **ret, size_t max)
{
	const struct opt_knob *q = knob_of(r->study->space, OPT_KNOB_QUANTIZATION);
	size_t n = 0;

	if (!q) {
		ret[n++] = NULL; /* no choice: the checkpoint as it is */
		return n;
	}
	for (size_t pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < q->n_values && n < max; i++)
			if ((strcmp(q->strings[i], "none") == 0) == (pass == 0))
				ret[n++] = q->strings[i];
	return n;
}

int runner_baseline_choose(struct runner *r, struct error *err)
{
	struct runner_baseline *b = &r->baseline;
	const struct opt_knob *tpk = knob_of(r->study->space, OPT_KNOB_TENSOR_PARALLEL);
	_cleanup_(cJSON_Deletep) cJSON *defaults = NULL;
	const char *quants[OPT_LIST_MAX];
	size_t n_quants;
	double mem_gib = runner_baseline_gpu_gib(r);
	int k;

	*b = (struct runner_baseline){ 0 };
	if (!r->study->baseline) {
		snprintf(b->why, sizeof(b->why), "the study asks for no baseline");
		return 0;
	}
	if (r->settings.max_trials == 1) {
		/* max_trials counts the baseline: one deployment is the search's */
		snprintf(b->why, sizeof(b->why), "max_trials 1 leaves no room for a baseline");
		return 0;
	}
	k = engine_profile_default_knobs(r->profile, r->study->gpu.type, mem_gib, &defaults);
	if (k < 0)
		return error_set(err, k, "out of memory");
	n_quants = quantizations(r, quants, ELEMENTSOF(quants));
	for (size_t qi = 0; qi < n_quants && !b->enabled; qi++)
		for (size_t ti = 0; ti < (tpk ? tpk->n_values : 1) && !b->enabled; ti++) {
			_cleanup_(cJSON_Deletep) cJSON *knobs = NULL;
			struct runner_estimate e;

			k = baseline_knobs(r, defaults, quants[qi], tpk ? tpk->numbers[ti] : 0, &knobs);
			if (k < 0)
				return error_set(err, k, "out of memory");
			runner_preflight_estimate_knobs(&r->preflight, knobs, &e);
			/* the smallest TP that fits (TP lists are ascending once sorted) */
			if (e.fit != OPT_FIT_YES && e.fit != OPT_FIT_UNKNOWN)
				continue;
			b->enabled = true;
			b->knobs = TAKE_PTR(knobs);
			b->tp = tpk ? (unsigned)tpk->numbers[ti] : 1;
		}
	if (!b->enabled) {
		snprintf(b->why, sizeof(b->why),
			 "the engine's defaults are predicted to fit no allowed quantization and tensor_parallel");
		return 0;
	}
	k = key_of(r, b->knobs, b->key, sizeof(b->key), &b->config);
	if (k < 0)
		return error_set(err, k, "the baseline's knobs do not fit a key");
	b->on_grid = k > 0;
	study_knobs_json_text(b->knobs, b->text, sizeof(b->text));
	return 0;
}

void runner_baseline_done(struct runner_baseline *b)
{
	cJSON_Delete(b->knobs);
	*b = (struct runner_baseline){ 0 };
}

int runner_baseline_queue(struct runner *r, struct error *err)
{
	struct store_trial *rows = NULL;
	size_t n = 0;
	bool have = false;
	int k;

	if (!r->baseline.enabled)
		return 0;
	k = store_trial_history(r->store, r->study_id, &rows, &n, err);
	if (k < 0)
		return k;
	for (size_t i = 0; i < n; i++)
		have = have || runner_kind_is_baseline(rows[i].kind);
	store_trial_array_free(rows, n);
	if (have)
		return 0; /* measured, or queued again by runner_queue_load */
	return runner_queue_add(r,
				&(struct runner_proposal){ .ask = OPT_ASK_TRIAL,
							   .config = r->baseline.config,
							   .attempt = 1,
							   .predicted_cost = NAN,
							   .baseline = true },
				err);
}
