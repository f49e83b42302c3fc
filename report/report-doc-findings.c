/* report-doc-findings.c — the report's section on what the study found
 * beside its answer: how much cheaper the answer is than the engine's
 * default configuration, whether the answer sits on a bound of a range (with
 * what limits goodput there, and the widenings search.extend_edges made),
 * what the memory pre-flight kept from being deployed (each quantization ×
 * TP combination with its estimate), and a max_model_len the study fixed.
 * The words are report_findings_of's, as in `goodput tune` and `goodput best`. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "report-internal.h"
#include "study.h"

static double number_of(const cJSON *o, const char *key)
{
	const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *text_of(const cJSON *o, const char *key)
{
	const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;

	return cJSON_IsString(v) ? v->valuestring : "-";
}

/* The pre-flight's table: each combination at its smallest and largest batch knobs. */
static void preflight_table(struct report_doc *d, const struct report *r)
{
	_cleanup_(cJSON_Deletep) cJSON *j = r->study.preflight_json ? cJSON_Parse(r->study.preflight_json) : NULL;
	const cJSON *list = j ? cJSON_GetObjectItemCaseSensitive(j, "combinations") : NULL, *c;
	static const char *const headers[] = { "combination", "smallest batch", "largest batch",
					       "estimate (smallest)" };

	if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
		return;
	report_doc_heading(d, 3, "preflight", "Memory pre-flight");
	report_doc_para(d,
			"Before anything is deployed, weights, activations and the KV cache of one max_model_len "
			"sequence are estimated per GPU from the model's facts (%s) and compared with the GPU's memory "
			"× gpu_memory_utilization. A combination that does not fit at its smallest batch knobs by more "
			"than %.0f %% is never deployed; one within that margin is deployed once to check.",
			text_of(j, "source"), number_of(j, "margin") * 100);
	report_doc_table_start(d, ELEMENTSOF(headers), headers);
	cJSON_ArrayForEach(c, list)
	{
		const cJSON *lo = cJSON_GetObjectItemCaseSensitive(c, "smallest");
		const cJSON *hi = cJSON_GetObjectItemCaseSensitive(c, "largest");
		char small[96], large[96];
		const char *cause = text_of(lo, "cause");

		snprintf(small, sizeof(small), "%s%s%s%s", text_of(lo, "fit"), strcmp(cause, "-") ? " (" : "",
			 strcmp(cause, "-") ? cause : "", strcmp(cause, "-") ? ")" : "");
		snprintf(large, sizeof(large), "%s", text_of(hi, "fit"));
		report_doc_row(
			d, strcmp(text_of(lo, "fit"), "does not fit") == 0 ? "infeasible" : NULL,
			(const char *const[]){ text_of(c, "combination"), small, large, text_of(lo, "estimate") });
	}
	report_doc_table_end(d);
}

int report_doc_findings(struct report_doc *d, const struct report *r)
{
	const struct report_trial *b = report_best(r);
	struct report_findings f;
	struct study_phase phases[STUDY_PHASES_MAX];
	struct error err = { 0 };
	size_t n = 0;

	if (!b)
		return 0;
	if (report_findings_of(&r->study, r->parsed, &r->answer, report_trial_best_lp(b), &f) < 0)
		return -ENOMEM;
	report_doc_heading(d, 2, "findings", "Compared with the defaults, at the edges, not deployed");
	if (f.have_baseline)
		report_doc_note(d, "verdict", "%s.", f.baseline);
	else
		report_doc_para(d, "The engine's default configuration was not measured (\"baseline\": false, or "
				   "nothing was predicted to fit at its defaults).");
	if (f.have_edge)
		report_doc_note(d, "warning", "%s.", f.edge_text);
	if (study_phases_parse(r->study.phases_json, phases, ELEMENTSOF(phases), &n, &err) >= 0 && n > 0) {
		static const char *const headers[] = { "after trial", "range widened", "new range", "best then" };

		report_doc_para(d, "search.extend_edges widened %zu range%s when the search ended on a bound:", n,
				n == 1 ? "" : "s");
		report_doc_table_start(d, ELEMENTSOF(headers), headers);
		for (size_t i = 0; i < n; i++) {
			char after[24], range[64], cost[32];

			snprintf(after, sizeof(after), "%zu", phases[i].trials);
			snprintf(range, sizeof(range), "%lld–%lld", (long long)phases[i].min, (long long)phases[i].max);
			snprintf(cost, sizeof(cost), "$%.4f/Mtok", phases[i].best_cost);
			report_doc_row(d, NULL,
				       (const char *const[]){ after, phases[i].knob, range,
							      phases[i].best_cost > 0 ? cost : "-" });
		}
		report_doc_table_end(d);
	}
	if (f.n_predicted_infeasible > 0) {
		report_doc_para_start(d, NULL);
		report_doc_esc(d, "Not deployed, predicted not to fit at any batch size: ");
		for (size_t i = 0; i < f.n_predicted_infeasible; i++) {
			if (i)
				report_doc_esc(d, ", ");
			report_doc_esc(d, f.predicted_infeasible[i]);
		}
		report_doc_esc(d, ".");
		report_doc_para_end(d, NULL);
	}
	if (f.max_model_len[0])
		report_doc_para(d, "%s.", f.max_model_len);
	report_findings_done(&f);
	preflight_table(d, r);
	return 0;
}
