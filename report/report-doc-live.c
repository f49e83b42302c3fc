/* report-doc-live.c — the progress header of a study still running.
 *
 * goodputd rewrites a running study's report after every trial; the page
 * then says where the study stands (deployments done of the budget, the
 * wall time it has run and has left, the estimated time to its end — the
 * one estimate the progress lines and `status` show, study_budget_eta_usec —
 * and the best so far, the study's one cost) and reloads itself. A finished
 * study's report has neither. */
#include <math.h>
#include <stdio.h>

#include "report-internal.h"
#include "time-util.h"

bool report_is_live(const struct report *r)
{
	return r->study.state == STORE_STUDY_QUEUED || r->study.state == STORE_STUDY_RUNNING ||
	       r->study.state == STORE_STUDY_PAUSED;
}

void report_doc_live(struct report_doc *d, const struct report *r)
{
	unsigned finished = 0, in_flight = 0, budget = r->parsed ? r->parsed->budget.max_trials : 0;
	uint64_t wall = r->parsed ? r->parsed->budget.max_wall_time_usec : USEC_INFINITY, now = real_usec();
	uint64_t elapsed = r->study.started_usec && now > r->study.started_usec ? now - r->study.started_usec : 0;
	uint64_t eta;
	char a[32], b[32], c[32], budget_text[32] = "", best[96];

	if (!report_is_live(r))
		return;
	for (size_t i = 0; i < r->n_trials; i++) {
		enum store_trial_state s = r->trials[i].t.state;

		if (s == STORE_TRIAL_DONE || s == STORE_TRIAL_INFEASIBLE || s == STORE_TRIAL_FAILED)
			finished++;
		else if (s == STORE_TRIAL_PENDING || s == STORE_TRIAL_DEPLOYING || s == STORE_TRIAL_PROBING)
			in_flight++;
	}
	eta = study_budget_eta_usec(elapsed, finished, budget, wall);
	if (budget > 0)
		snprintf(budget_text, sizeof(budget_text), "/%u", budget);
	if (isnan(report_cost(r)))
		snprintf(best, sizeof(best), "none meets the SLA yet");
	else
		snprintf(best, sizeof(best), "$%.4f/Mtok", report_cost(r));
	report_doc_heading(d, 2, "live", "Progress (study running: this page reloads every 30 s)");
	report_doc_table_start(d, 2, (const char *const[]){ "item", "value" });
	report_doc_kv(d, "state", "%s", store_study_state_to_string(r->study.state));
	report_doc_kv(d, "deployments done", "%u%s (%u in flight)", finished, budget_text, in_flight);
	report_doc_kv(d, "wall time", "%s elapsed, %s left", format_duration(a, sizeof(a), elapsed),
		      wall == USEC_INFINITY || wall == 0
			      ? "no limit"
			      : format_duration(b, sizeof(b), wall > elapsed ? wall - elapsed : 0));
	report_doc_kv(d, "estimated time to the end", "%s",
		      eta == USEC_INFINITY ? "unknown yet" : format_duration(c, sizeof(c), eta));
	report_doc_kv(d, "best so far", "%s", best);
	report_doc_table_end(d);
}
