/* report-doc-curve.c — the best configuration's latency–throughput curve in
 * the report's text: what the load-step sweep measured (its rates, as a
 * share of the answer's max rate under the SLA) and its sweet spot (the
 * highest goodput that meets the SLA), the plot, and the load points as a
 * table — the sweep's, then the rate search's that found the max rate. A
 * study without a sweep says why the curve is the rate search's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report-internal.h"
#include "study.h"

static void lp_cells(const struct store_load_point *lp, char c[][32])
{
	report_rate_sent_text(c[0], 32, lp, lp->request_rate);
	snprintf(c[1], 32, "%s", lp->phase ? lp->phase : "-");
	report_fmt(c[2], 32, 1, lp->attainment * 100);
	snprintf(c[3], 32, "%s", lp->sla_met ? "yes" : "no");
	report_fmt(c[4], 32, 1, lp->p50_ttft_ms);
	report_fmt(c[5], 32, 1, lp->p99_ttft_ms);
	report_fmt(c[6], 32, 2, lp->p50_tpot_ms);
	report_fmt(c[7], 32, 2, lp->p99_tpot_ms);
	report_fmt(c[8], 32, 1, lp->output_throughput);
	report_fmt(c[9], 32, 1, lp->good_output_throughput);
	report_fmt(c[10], 32, 0, isfinite(lp->kv_usage_peak) ? lp->kv_usage_peak * 100 : NAN);
	report_fmt(c[11], 32, 0, lp->gpu_util_mean);
	report_fmt(c[12], 32, 0, lp->gpu_util_peak);
	report_fmt(c[13], 32, 0, lp->gpu_mem_mean_mib);
	report_fmt(c[14], 32, 0, lp->gpu_mem_peak_mib);
}

/* A table of load points; `mark` (may be NULL) is the highlighted one. */
static void lp_table(struct report_doc *d, const struct store_load_point *const *lps, size_t n,
		     const struct store_load_point *mark, bool gpu)
{
	char c[16][32];

	report_doc_table_start(d, gpu ? 15 : 11,
			       (const char *const[]){ "req/s (sent)", "phase", "attainment %", "SLA met", "TTFT p50",
						      "TTFT p99", "TPOT p50", "TPOT p99", "output tok/s",
						      "goodput tok/s", "KV peak %", "GPU util % mean",
						      "GPU util % peak", "GPU mem MiB mean", "GPU mem MiB peak" });
	for (size_t i = 0; i < n; i++) {
		lp_cells(lps[i], c);
		report_doc_row(d, lps[i] == mark ? "best" : NULL,
			       (const char *const[]){ c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10],
						      c[11], c[12], c[13], c[14] });
	}
	report_doc_table_end(d);
}

/* Says why there are no GPU figures: none in the whole study (no NVML), or
 * none for this configuration. */
static void gpu_missing(struct report_doc *d, const struct report *r)
{
	if (!report_has_gpu(r))
		report_doc_note(d, "missing", REPORT_GPU_UNAVAILABLE ".");
	else
		report_doc_note(d, "missing", "GPU telemetry: not recorded for this configuration's load points.");
}

static void sweep_text(struct report_doc *d, const struct report *r, const struct report_curve *cv)
{
	const struct report_trial *b = report_best(r);
	double max_rate = b->t.max_rate;
	char lo[32], hi[32], at[32], g[32];

	if (!cv->sweep) {
		if (r->parsed && r->parsed->scenario == OPT_SCENARIO_OFFLINE)
			report_doc_para(d, "An offline study has no SLA to sweep a load against: the load points "
					   "below are the saturated runs.");
		else if (r->parsed && !r->parsed->sweep)
			report_doc_para(d, "The study's spec turned the load-step sweep off (\"sweep\": false): the "
					   "curve is drawn from the rate search's load points.");
		else if (report_is_live(r))
			report_doc_para(d, "Once the answer is confirmed, the study sweeps it over a gradient of "
					   "load; until then the curve is the rate search's load points.");
		else
			report_doc_para(d, "The study has no load-step sweep of its answer (the budget was spent "
					   "before it, or it was recorded before goodput swept): the curve is drawn "
					   "from the rate search's load points.");
		return;
	}
	report_rate_text(lo, sizeof(lo), cv->pts[0]->request_rate);
	report_rate_text(hi, sizeof(hi), cv->pts[cv->n - 1]->request_rate);
	report_rate_text(at, sizeof(at), max_rate);
	if (isfinite(max_rate) && max_rate > 0)
		report_doc_para(d,
				"After its answer was confirmed, the study swept it: %zu request rates from %s to %s "
				"req/s, %.0f %% to %.0f %% of its max rate under the SLA (%s req/s).",
				cv->n, lo, hi, cv->pts[0]->request_rate / max_rate * 100,
				cv->pts[cv->n - 1]->request_rate / max_rate * 100, at);
	else
		report_doc_para(d,
				"After its answer was confirmed, the study swept it: %zu request rates from %s to "
				"%s req/s.",
				cv->n, lo, hi);
	if (cv->sweet >= 0) {
		const struct store_load_point *s = cv->pts[cv->sweet];

		report_rate_sent_text(at, sizeof(at), s, s->request_rate);
		report_doc_note(
			d, "verdict",
			"Sweet spot: %s tokens/s of goodput at %s req/s (%.1f%% of requests within the SLA, "
			"TTFT p99 %s ms, TPOT p99 %s ms) — the highest goodput of the sweep that meets the SLA.",
			report_fmt(g, sizeof(g), 1, s->good_output_throughput), at, s->attainment * 100,
			report_fmt(lo, sizeof(lo), 1, s->p99_ttft_ms), report_fmt(hi, sizeof(hi), 2, s->p99_tpot_ms));
	} else
		report_doc_note(d, "warning",
				"No rate of the sweep met the SLA, although the rate search found %s req/s did: the "
				"answer's max rate is not a safe operating point.",
				at);
}

void report_doc_curve(struct report_doc *d, const struct report *r)
{
	const struct report_trial *b = report_best(r), *sw = report_sweep(r);
	struct report_curve cv = { .sweet = -1 };
	const struct store_load_point **search = NULL;
	bool gpu;

	if (!b || report_curve_of(r, &cv) < 0)
		return;
	report_doc_heading(d, 3, "curve", "Latency–throughput curve");
	sweep_text(d, r, &cv);
	report_doc_plot(d, REPORT_PLOT_LATENCY);
	gpu = report_trial_has_gpu(b) || (sw && report_trial_has_gpu(sw));
	if (cv.sweep) {
		report_doc_para(d, "The sweep's load points (the sweet spot highlighted):");
		lp_table(d, cv.pts, cv.n, cv.sweet >= 0 ? cv.pts[cv.sweet] : NULL, gpu);
	}
	search = calloc(b->n_lps ? b->n_lps : 1, sizeof(*search));
	if (search) {
		for (size_t i = 0; i < b->n_lps; i++)
			search[i] = &b->lps[i];
		report_doc_para(d, "The load points of its rate search, which found its max rate (highlighted):");
		lp_table(d, search, b->n_lps, report_trial_best_lp(b), gpu);
	}
	if (!gpu)
		gpu_missing(d, r);
	free(search);
	report_curve_done(&cv);
}
