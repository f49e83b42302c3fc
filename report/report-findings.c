/* report-findings.c — what a study found beside its answer, worded once for
 * every place that shows the answer (`goodput tune`'s summary, `goodput
 * best`, the report): how much cheaper the answer is than the engine's
 * default configuration, and whether the answer sits on a bound of a range
 * with what limits goodput there (study_find_edge).
 *
 * Read from the study's answer (store_study_best: the baseline's cost is
 * its configuration's mean, as every cost is) and the load point at the
 * best's max rate. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "engine-profile.h"
#include "json-util.h"
#include "macro.h"
#include "metrics.h"
#include "report.h"
#include "store.h"
#include "study.h"

static void baseline_sentence(const struct store_study_best *b, struct report_findings *f)
{
	_cleanup_(cJSON_Deletep) cJSON *j = b->baseline_knobs_json ? cJSON_Parse(b->baseline_knobs_json) : NULL;
	char knobs[200];

	study_knobs_json_text(j, knobs, sizeof(knobs));
	snprintf(f->baseline_knobs, sizeof(f->baseline_knobs), "%s", knobs);
	if (isfinite(b->baseline_cost_per_mtok)) {
		double gain = 1 - b->cost_per_mtok / b->baseline_cost_per_mtok;

		if (fabs(gain) < 0.005)
			snprintf(f->baseline, sizeof(f->baseline),
				 "$%.4f/Mtok, as cheap as the engine's defaults ($%.4f/Mtok: %s)", b->cost_per_mtok,
				 b->baseline_cost_per_mtok, knobs);
		else
			snprintf(f->baseline, sizeof(f->baseline),
				 "$%.4f/Mtok, %.0f %% %s than the engine's defaults ($%.4f/Mtok: %s)", b->cost_per_mtok,
				 fabs(gain) * 100, gain > 0 ? "cheaper" : "dearer", b->baseline_cost_per_mtok, knobs);
		return;
	}
	switch (b->baseline_state) {
	case STORE_TRIAL_INFEASIBLE:
		snprintf(f->baseline, sizeof(f->baseline), "$%.4f/Mtok; the engine's defaults (%s) %s",
			 b->cost_per_mtok, knobs,
			 b->baseline_failure == STORE_FAILURE_SLA_NEVER_MET ? "miss the SLA at any load"
									    : "did not start (out of memory)");
		break;
	case STORE_TRIAL_DONE:
		snprintf(f->baseline, sizeof(f->baseline),
			 "$%.4f/Mtok; the engine's defaults (%s) miss the SLA at any load", b->cost_per_mtok, knobs);
		break;
	case STORE_TRIAL_FAILED:
		snprintf(f->baseline, sizeof(f->baseline), "$%.4f/Mtok; the engine's defaults (%s) failed (%s)",
			 b->cost_per_mtok, knobs, store_failure_to_string(b->baseline_failure));
		break;
	default:
		snprintf(f->baseline, sizeof(f->baseline),
			 "$%.4f/Mtok; the engine's defaults (%s) are not measured yet", b->cost_per_mtok, knobs);
		break;
	}
}

/* The combinations the pre-flight ruled out at their smallest batch knobs. */
static int predicted(const char *json, struct report_findings *f)
{
	_cleanup_(cJSON_Deletep) cJSON *j = json ? cJSON_Parse(json) : NULL;
	const cJSON *c, *list = j ? cJSON_GetObjectItemCaseSensitive(j, "combinations") : NULL;
	size_t cap = 0;

	cJSON_ArrayForEach(c, list)
	{
		const cJSON *small = cJSON_GetObjectItemCaseSensitive(c, "smallest");
		const cJSON *fit = small ? cJSON_GetObjectItemCaseSensitive(small, "fit") : NULL;
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "combination");
		char *copy;

		if (!cJSON_IsString(fit) || strcmp(fit->valuestring, "does not fit") != 0 || !cJSON_IsString(name))
			continue;
		if (ARRAY_GROW(f->predicted_infeasible, cap, f->n_predicted_infeasible) < 0 ||
		    !(copy = strdup(name->valuestring)))
			return -ENOMEM;
		f->predicted_infeasible[f->n_predicted_infeasible++] = copy;
	}
	return 0;
}

void report_findings_done(struct report_findings *f)
{
	for (size_t i = 0; i < f->n_predicted_infeasible; i++)
		free(f->predicted_infeasible[i]);
	free(f->predicted_infeasible);
	f->predicted_infeasible = NULL;
	f->n_predicted_infeasible = 0;
}

void report_findings_print_predicted(const struct report_findings *f, FILE *out)
{
	for (size_t i = 0; i < f->n_predicted_infeasible; i++)
		fprintf(out, "%s%s", i ? ", " : "", f->predicted_infeasible[i]);
}

int report_findings_of(const struct store_study *row, const struct study *s, const struct store_study_best *b,
		       const struct store_load_point *at, struct report_findings *ret)
{
	struct report_findings f = { .baseline_cost_per_mtok = NAN };

	if (row && predicted(row->preflight_json, &f) < 0) {
		report_findings_done(&f);
		*ret = (struct report_findings){ .baseline_cost_per_mtok = NAN };
		return -ENOMEM;
	}
	if (s && s->model.max_model_len)
		snprintf(f.max_model_len, sizeof(f.max_model_len),
			 "max_model_len fixed at %u tokens for every server%s (the engine's default is the model's "
			 "whole context)",
			 s->model.max_model_len,
			 s->model.max_model_len_from_workload ? ", from the workload's longest request + 10 %" : "");

	if (b->have_baseline) {
		f.have_baseline = true;
		f.baseline_cost_per_mtok = b->baseline_cost_per_mtok;
		baseline_sentence(b, &f);
	}
	if (s && b->trial.canonical_key) {
		_cleanup_(cJSON_Deletep) cJSON *j = at && at->result_json ? cJSON_Parse(at->result_json) : NULL;
		struct probe_result pr;
		struct opt_config c;
		struct error err = { 0 };
		bool have_point = j && probe_result_from_json(j, &pr, &err) >= 0;

		if (opt_config_from_key(s->space, b->trial.canonical_key, &c, NULL) >= 0 &&
		    study_find_edge(s, s->space, &c, have_point ? &pr : NULL, &f.edge) >= 0 && f.edge.found) {
			struct study_phase phases[STUDY_PHASES_MAX];
			size_t n = 0;
			bool tried = false;

			/* widened at this end already, without gain: said so */
			if (row && study_phases_parse(row->phases_json, phases, ELEMENTSOF(phases), &n, &err) >= 0 &&
			    f.edge.widen && !study_edge_worth_widening(&f.edge, phases, n, b->cost_per_mtok)) {
				f.edge.widen = false;
				tried = true;
			}
			f.have_edge = true;
			study_edge_format(&f.edge, f.edge_text, sizeof(f.edge_text));
			if (tried) {
				size_t len = strlen(f.edge_text);

				snprintf(f.edge_text + len, sizeof(f.edge_text) - len,
					 "; the search widened this range already and the last step brought no gain");
			}
		}
	}
	*ret = f;
	return 0;
}

int report_findings_json(const struct report_findings *f, cJSON *o)
{
	cJSON *e;

	if (!(f->have_baseline && isfinite(f->baseline_cost_per_mtok)
		      ? cJSON_AddNumberToObject(o, "baseline_cost_per_mtok", f->baseline_cost_per_mtok)
		      : cJSON_AddNullToObject(o, "baseline_cost_per_mtok")))
		return -ENOMEM;
	if (f->have_baseline && (json_add_string(o, "baseline_knobs", f->baseline_knobs) < 0 ||
				 json_add_string(o, "baseline", f->baseline) < 0))
		return -ENOMEM;
	if (f->max_model_len[0] && json_add_string(o, "max_model_len", f->max_model_len) < 0)
		return -ENOMEM;
	if (f->n_predicted_infeasible > 0) {
		cJSON *a = cJSON_AddArrayToObject(o, "predicted_infeasible");

		if (!a)
			return -ENOMEM;
		for (size_t i = 0; i < f->n_predicted_infeasible; i++)
			if (!cJSON_AddItemToArray(a, cJSON_CreateString(f->predicted_infeasible[i])))
				return -ENOMEM;
	}
	if (!f->have_edge)
		return cJSON_AddNullToObject(o, "edge") ? 0 : -ENOMEM;
	e = cJSON_AddObjectToObject(o, "edge");
	if (!e || json_add_string(e, "knob", f->edge.knob) < 0 ||
	    json_add_string(e, "bound", f->edge.upper ? "max" : "min") < 0 ||
	    json_add_number(e, "value", f->edge.value) < 0 || json_add_string(e, "limiter", f->edge.limiter) < 0 ||
	    !cJSON_AddBoolToObject(e, "sla_binding", f->edge.sla_binding) ||
	    !cJSON_AddBoolToObject(e, "wider_may_be_cheaper", f->edge.widen) ||
	    json_add_string(e, "note", f->edge_text) < 0)
		return -ENOMEM;
	return 0;
}

int report_study_phases(const struct store_study *row, struct study *s, const struct study_options *opts,
			struct error *err)
{
	struct study_phase phases[STUDY_PHASES_MAX];
	size_t n = 0;
	int k;

	k = study_phases_parse(row->phases_json, phases, ELEMENTSOF(phases), &n, err);
	if (k >= 0)
		k = study_apply_phases(s, phases, n, opts, err);
	return k;
}

int report_best_findings(struct store *s, const char *engines_dir, cJSON *resp, struct error *err)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(study_freep) struct study *parsed = NULL;
	const cJSON *study = cJSON_GetObjectItemCaseSensitive(resp, "study");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(study, "name");
	cJSON *best = cJSON_GetObjectItemCaseSensitive(resp, "best");
	struct store_study st = { 0 };
	struct store_study_best b = { 0 };
	struct store_load_point *lp = NULL;
	const struct store_load_point *at = NULL;
	struct report_findings f;
	struct error e = { 0 };
	size_t n = 0;
	int r;

	if (!cJSON_IsString(name) || !cJSON_IsObject(best))
		return 0; /* an error answer: nothing to add */
	r = store_study_get_by_name(s, name->valuestring, &st, err);
	if (r >= 0)
		r = store_study_best(s, st.id, &b, err);
	if (r >= 0)
		r = store_load_point_list(s, b.trial.id, &lp, &n, err);
	if (r >= 0) {
		/* a spec that no longer parses (a profile gone) still has its baseline */
		if (engine_profile_load_study(st.spec_json, st.engine, engines_dir, &p, &parsed, &e) >= 0) {
			struct study_options so = { .extra_knobs = (const char *const *)p->extra_knobs };

			if (report_study_phases(&st, parsed, &so, &e) < 0)
				parsed = study_free(parsed);
		}
		at = store_load_point_at_max(lp, n, b.trial.max_rate);
		r = report_findings_of(&st, parsed, &b, at, &f);
		if (r >= 0)
			r = report_findings_json(&f, best);
		/* the rate the answer's load point sent, beside the rate it asked */
		if (r >= 0 && at && isfinite(store_load_point_offered_rate(at)) &&
		    !cJSON_AddNumberToObject(best, "offered_rate", store_load_point_offered_rate(at)))
			r = -ENOMEM;
		report_findings_done(&f);
		if (r < 0)
			r = error_set(err, -ENOMEM, "out of memory");
	}
	store_load_point_array_free(lp, n);
	store_study_best_done(&b);
	store_study_done(&st);
	return r == -ENOENT ? 0 : r;
}
