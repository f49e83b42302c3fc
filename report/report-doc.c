/* report-doc.c — the text of the report, written once for two formats.
 *
 * The sections follow what a credible benchmark report states (scenario and
 * SLA, lengths, load steps, TTFT/TPOT percentiles, throughput, goodput, GPU
 * memory, $/Mtok) and then what the study adds (search space, every trial,
 * landscape, progress, Pareto view, spread of the re-probed best). The tiny
 * writer of report-doc-writer.c (headings, paragraphs, notes, tables, code,
 * plots) turns it into Markdown or into HTML, escaped, so store text
 * (failure messages, knob values) can never inject markup. The HTML page is
 * self-contained: inline CSS and inline SVG, no scripts, no external URL. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "engine-profile.h"
#include "macro.h"
#include "report-internal.h"
#include "study.h"
#include "time-util.h"

/* ---- sections ---- */

static const char *fmt_time(char *buf, size_t size, uint64_t usec)
{
	return usec ? format_iso8601(buf, size, usec) : "-";
}

/* Why the study ended, in words: a budget spent or a search converged is
 * how studies end, said plainly; a failure is a warning. A study that met
 * nothing says so with its best section. */
/* m starts with word, alone or followed by ": " (the planner's reason and
 * its detail); *ret_rest the detail ("" none). */
static bool reason_is(const char *m, const char *word, const char **ret_rest)
{
	size_t n = strlen(word);

	if (strncmp(m, word, n) != 0 || (m[n] && strncmp(m + n, ": ", 2) != 0))
		return false;
	*ret_rest = m[n] ? m + n + 2 : "";
	return true;
}

/* Why the study ended, in words: a budget spent or a search converged is
 * how studies end, said plainly; a failure is a warning. A study that met
 * nothing says so with its best section. */
static void study_end(struct report_doc *d, const struct report *r)
{
	const char *m = r->study.message, *rest = "";
	unsigned budget = r->parsed ? r->parsed->budget.max_trials : 0;
	char spent[64] = "its budget";

	if (!m || !*m)
		return;
	if (budget)
		snprintf(spent, sizeof(spent), "its budget of %u deployments", budget);
	switch (r->study.state) {
	case STORE_STUDY_DONE:
		if (reason_is(m, "budget", &rest))
			report_doc_para(d, "The study ended when %s was spent%s%s.", spent, *rest ? ": " : "", rest);
		else if (reason_is(m, "converged", &rest))
			report_doc_para(d, "The study ended when the search converged: %s.",
					*rest ? rest : "no untried configuration promised a lower cost");
		else if (reason_is(m, "exhausted", &rest))
			report_doc_para(d, "The study ended once every allowed configuration was measured%s%s.",
					*rest ? ": " : "", rest);
		else
			report_doc_para(d, "The study ended: %s.", m);
		break;
	case STORE_STUDY_NO_FEASIBLE:
		break; /* the best section says it */
	case STORE_STUDY_FAILED:
		report_doc_note(d, "warning", "The study failed: %s.", m);
		break;
	case STORE_STUDY_CANCELLED:
		report_doc_note(d, "warning", "The study was cancelled%s%s.", strcmp(m, "cancelled") ? ": " : "",
				strcmp(m, "cancelled") ? m : "");
		break;
	default:
		report_doc_para(d, "Last word of the study: %s.", m);
	}
}

static void section_title(struct report_doc *d, const struct report *r)
{
	const struct report_trial *b = report_best(r);
	char t[256], now[64], knobs[256], c1[32], c2[32], c3[32], over[96];
	size_t failed = 0, infeasible = 0, done = 0, nocost = 0;

	snprintf(t, sizeof(t), "goodput report: %s", r->study.name);
	report_doc_heading(d, 1, "title", t);
	report_doc_para(d, "Study %s (id %" PRId64 "), state %s%s%s. Generated %s by goodput %s.", r->study.name,
			r->study.id, store_study_state_to_string(r->study.state), r->study.label ? "; label: " : "",
			r->study.label ? r->study.label : "", format_iso8601(now, sizeof(now), real_usec()),
			GOODPUT_VERSION);
	study_end(d, r);
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct store_trial *tr = &r->trials[i].t;

		failed += tr->state == STORE_TRIAL_FAILED;
		infeasible += tr->state == STORE_TRIAL_INFEASIBLE;
		done += tr->state == STORE_TRIAL_DONE;
		nocost += tr->state == STORE_TRIAL_DONE && !isfinite(tr->cost_per_mtok);
	}
	if (b) {
		const struct store_load_point *at = report_trial_best_lp(b);

		report_knobs_short(b, knobs, sizeof(knobs));
		report_doc_note(
			d, "verdict",
			"Best configuration: %s at $%s per million tokens%s (max goodput %s tokens/s at %s req/s, %u "
			"GPU%s per replica).",
			knobs, report_fmt(c1, sizeof(c1), 4, report_cost(r)), report_cost_note(r, over, sizeof(over)),
			report_fmt(c2, sizeof(c2), 1, b->t.max_goodput),
			at ? report_rate_sent_text(c3, sizeof(c3), at, b->t.max_rate)
			   : report_fmt(c3, sizeof(c3), 2, b->t.max_rate),
			b->gpus, b->gpus == 1 ? "" : "s");
	} else if (r->n_trials == 0) {
		report_doc_note(d, "warning",
				"The study has no trials yet: there is nothing to report but its set-up.");
	} else {
		report_doc_note(
			d, "warning",
			"No configuration met the SLA: of %zu trials, %zu finished without meeting it, %zu were "
			"infeasible "
			"and %zu failed. There is no best configuration and no cost.",
			r->n_trials, nocost, infeasible, failed);
	}
	if (b && (failed || infeasible))
		report_doc_para(d,
				"%zu of %zu trials were infeasible and %zu failed (see the table of trials for why).",
				infeasible, r->n_trials, failed);
	if (r->spec_error)
		report_doc_note(d, "warning",
				"The study spec could not be read back: %s. Sections that need it are incomplete.",
				r->spec_error);
	if (d->plots && d->plots->note)
		report_doc_note(d, "warning", "%s", d->plots->note);
}

/* The host's facts; on a cluster, those of the coordinating host, where
 * goodput and its probe ran. */
/* A host fact's name for people: "engine version" for engine_version. */
static void host_key_text(const char *key, char *buf, size_t size)
{
	static const char *const names[][2] = {
		{ "gpu_model", "GPU model" },
		{ "gpu_count", "GPUs" },
		{ "gpu_telemetry", "GPU telemetry" },
		{ "driver_version", "GPU driver" },
		{ "cuda_version", "CUDA" },
		{ "engine_version", "engine version" },
		{ "cpu_model", "CPU" },
		{ "hostname", "host name" },
	};
	size_t i;

	for (i = 0; i < ELEMENTSOF(names); i++)
		if (strcmp(key, names[i][0]) == 0) {
			snprintf(buf, size, "%s", names[i][1]);
			return;
		}
	snprintf(buf, size, "%s", key);
	for (i = 0; buf[i]; i++)
		if (buf[i] == '_')
			buf[i] = ' ';
}

static void host_rows(struct report_doc *d, const struct report *r, const char *label)
{
	const cJSON *it;

	if (!r->host) {
		report_doc_kv(d, label, "not recorded");
		return;
	}
	cJSON_ArrayForEach(it, r->host)
	{
		char k[96], name[64];

		host_key_text(it->string ? it->string : "?", name, sizeof(name));
		snprintf(k, sizeof(k), "%s: %s", label, name);
		if (cJSON_IsNull(it))
			report_doc_kv(d, k, "not reported by the host");
		else if (cJSON_IsString(it) && it->string && strcmp(it->string, "gpu_telemetry") == 0 &&
			 strcmp(it->valuestring, "nvml") != 0)
			report_doc_kv(d, k, "unavailable (no NVML on the host)");
		else if (cJSON_IsString(it))
			report_doc_kv(d, k, "%s", it->valuestring);
		else if (cJSON_IsNumber(it))
			report_doc_kv(d, k, "%g", it->valuedouble);
		else if (cJSON_IsBool(it))
			report_doc_kv(d, k, "%s", cJSON_IsTrue(it) ? "yes" : "no");
		else {
			_cleanup_(cjson_freep) char *s = cJSON_PrintUnformatted(it);
			report_doc_kv(d, k, "%s", s ? s : "?");
		}
	}
}

/* A string or an array of strings of the stored spec, as one row (shell
 * quoted where a word needs it; none when the spec has no such key). */
static void spec_strings(struct report_doc *d, const struct report *r, const char *key, const char *label)
{
	const cJSON *v = r->spec ? cJSON_GetObjectItemCaseSensitive(r->spec, key) : NULL, *item;
	_cleanup_(freep) char **argv = NULL;
	_cleanup_(freep) char *text = NULL;
	size_t n = 0;

	if (cJSON_IsString(v)) {
		report_doc_kv(d, label, "%s", v->valuestring);
		return;
	}
	if (!cJSON_IsArray(v) || !(argv = calloc((size_t)cJSON_GetArraySize(v) + 1, sizeof(char *))))
		return;
	cJSON_ArrayForEach(item, v) if (cJSON_IsString(item)) argv[n++] = item->valuestring;
	text = engine_command_format(&(struct engine_command){ .argv = argv });
	report_doc_kv(d, label, "%s", text ? text : "");
}

/* A study on a cluster: where its servers ran — each node with its trials'
 * count — and how long its jobs waited for their resources. */
static void cluster_rows(struct report_doc *d, const struct report *r)
{
	const struct study *s = r->parsed;
	const char *nodes[64];
	unsigned counts[64], n = 0, jobs = 0, lost = 0;
	double waited = 0, longest = 0;
	char list[512];
	size_t len = 0;

	for (size_t i = 0; i < r->n_trials; i++) {
		const struct store_trial *t = &r->trials[i].t;
		unsigned k = 0;

		lost += t->job_lost;
		if (isfinite(t->pending_seconds)) {
			jobs++;
			waited += t->pending_seconds;
			longest = MAX(longest, t->pending_seconds);
		}
		if (!t->job_node)
			continue;
		while (k < n && strcmp(nodes[k], t->job_node) != 0)
			k++;
		if (k == n && n < ELEMENTSOF(nodes)) {
			nodes[n] = t->job_node;
			counts[n++] = 0;
		}
		if (k < n)
			counts[k]++;
	}
	list[0] = 0;
	for (unsigned k = 0; k < n && len < sizeof(list); k++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s (%u trial%s)", k ? ", " : "", nodes[k],
					counts[k], counts[k] == 1 ? "" : "s");
	report_doc_kv(d, "deployment",
		      "Slurm jobs%s%s%s%s, each asking --gres=gpu:TENSOR_PARALLEL; the probe ran on the probe host",
		      s->deploy.partition ? " in partition " : "", s->deploy.partition ? s->deploy.partition : "",
		      s->deploy.account ? ", account " : "", s->deploy.account ? s->deploy.account : "");
	report_doc_kv(d, "server nodes", "%s", n ? list : "none recorded");
	if (jobs)
		report_doc_kv(d, "waiting for resources",
			      "%.1f s per job on average, %.1f s at most (not counted as deploy time)", waited / jobs,
			      longest);
	if (lost)
		report_doc_kv(d, "jobs the cluster ended",
			      "%u (preempted, node failures, cancelled outside goodput): redone, never "
			      "measured",
			      lost);
}

static void section_scenario(struct report_doc *d, const struct report *r)
{
	const struct study *s = r->parsed;
	char a[64], b[64], dur[32];

	report_doc_heading(d, 2, "scenario", "Scenario");
	report_doc_table_start(d, 2, (const char *const[]){ "item", "value" });
	report_doc_kv(d, "engine", "%s%s%s", r->study.engine, r->profile && r->profile->description ? " — " : "",
		      r->profile && r->profile->description ? r->profile->description : "");
	spec_strings(d, r, "engine_binary", "engine program");
	spec_strings(d, r, "engine_args", "engine arguments (after the profile's flags)");
	report_doc_kv(d, "model", "%s", r->study.model);
	if (s) {
		for (int q = 1; q < _STUDY_QUANT_MAX; q++)
			if (s->model.checkpoints[q])
				report_doc_kv(d, "checkpoint", "%s: %s", study_quant_to_string((enum study_quant)q),
					      s->model.checkpoints[q]);
		if (s->deploy.method == STUDY_DEPLOY_SLURM)
			report_doc_kv(d, "GPU",
				      "%s, %u of the cluster at once (%u per node at most), $%.4g per GPU-hour",
				      s->gpu.type, s->gpu.count, s->gpu.per_node, s->gpu.price_per_gpu_hour);
		else if (s->gpu.cpu)
			report_doc_kv(d, "host", "CPU, %u cores a server, $%.4g per core-hour ($%.4g per server-hour)",
				      s->gpu.cores, s->gpu.price_per_core_hour, s->gpu.price_per_gpu_hour);
		else
			report_doc_kv(d, "GPU", "%s, %u on the host, $%.4g per GPU-hour", s->gpu.type, s->gpu.count,
				      s->gpu.price_per_gpu_hour);
		report_doc_kv(d, "scenario", "%s; cost counts %s tokens", opt_scenario_to_string(s->scenario),
			      opt_cost_tokens_to_string(s->cost_tokens));
	}
	if (s && s->deploy.method == STUDY_DEPLOY_SLURM) {
		cluster_rows(d, r);
		host_rows(d, r, "probe host");
	} else
		host_rows(d, r, "host");
	report_doc_kv(d, "search", "%s, seed %" PRIu64 ", NLopt %s", r->study.algorithm ? r->study.algorithm : "-",
		      r->study.seed, r->study.nlopt_version ? r->study.nlopt_version : "-");
	report_doc_kv(d, "submitted / started / finished", "%s / %s / %s",
		      fmt_time(a, sizeof(a), r->study.created_usec), fmt_time(b, sizeof(b), r->study.started_usec),
		      r->study.finished_usec ? format_iso8601(dur, sizeof(dur), r->study.finished_usec) : "-");
	if (r->study.started_usec && r->study.finished_usec > r->study.started_usec)
		report_doc_kv(d, "wall time", "%s",
			      format_duration(dur, sizeof(dur), r->study.finished_usec - r->study.started_usec));
	report_doc_table_end(d);
}

/* v: sorted, n > 0 */
static void length_row(struct report_doc *d, const char *what, const uint32_t *v, size_t n)
{
	char c[6][32];
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += v[i];
	snprintf(c[0], sizeof(c[0]), "%u", v[0]);
	snprintf(c[1], sizeof(c[1]), "%.1f", sum / (double)n);
	snprintf(c[2], sizeof(c[2]), "%u", report_lengths_pct(v, n, 50));
	snprintf(c[3], sizeof(c[3]), "%u", report_lengths_pct(v, n, 90));
	snprintf(c[4], sizeof(c[4]), "%u", report_lengths_pct(v, n, 99));
	snprintf(c[5], sizeof(c[5]), "%u", v[n - 1]);
	report_doc_row(d, NULL, (const char *const[]){ what, c[0], c[1], c[2], c[3], c[4], c[5] });
}

static void dist_text(char *buf, size_t size, const struct probe_length_dist *l)
{
	switch (l->kind) {
	case PROBE_DIST_FIXED:
		snprintf(buf, size, "fixed %g", l->mean);
		break;
	case PROBE_DIST_UNIFORM:
		snprintf(buf, size, "uniform %g ± %g%%", l->mean, l->range_ratio * 100);
		break;
	case PROBE_DIST_NORMAL:
		snprintf(buf, size, "normal mean %g, sd %g", l->mean, l->stddev);
		break;
	case PROBE_DIST_LOGNORMAL:
		snprintf(buf, size, "lognormal median %g, sigma %g", l->mean, l->stddev);
		break;
	case PROBE_DIST_HISTOGRAM:
		snprintf(buf, size, "measured, %u buckets up to %g, mean %.1f", l->hist.n, l->hist.le[l->hist.n - 1],
			 l->mean);
		break;
	case PROBE_DIST_SAMPLES:
		snprintf(buf, size, "the logged requests' own");
		break;
	}
}

/* What the workload was measured from (`goodput workload capture`). */
static void captured_row(struct report_doc *d, const cJSON *c)
{
	const cJSON *src = cJSON_GetObjectItemCaseSensitive(c, "source");
	const cJSON *where = cJSON_IsString(src) ? cJSON_GetObjectItemCaseSensitive(c, src->valuestring) : NULL;
	const cJSON *from = cJSON_GetObjectItemCaseSensitive(c, "started"),
		    *to = cJSON_GetObjectItemCaseSensitive(c, "ended");
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "requests"),
		    *rate = cJSON_GetObjectItemCaseSensitive(c, "mean_rate");
	const cJSON *peak = cJSON_GetObjectItemCaseSensitive(c, "peak_rate"),
		    *b = cJSON_GetObjectItemCaseSensitive(c, "burstiness");

	report_doc_kv(d, "measured from", "%s %s, %s to %s: %.0f requests, %.3g req/s (peak %.3g), burstiness %.3g",
		      cJSON_IsString(src) ? src->valuestring : "?", cJSON_IsString(where) ? where->valuestring : "",
		      cJSON_IsString(from) ? from->valuestring : "?", cJSON_IsString(to) ? to->valuestring : "?",
		      cJSON_IsNumber(n) ? n->valuedouble : NAN, cJSON_IsNumber(rate) ? rate->valuedouble : NAN,
		      cJSON_IsNumber(peak) ? peak->valuedouble : NAN, cJSON_IsNumber(b) ? b->valuedouble : NAN);
}

static void section_workload(struct report_doc *d, const struct report *r)
{
	const struct study *s = r->parsed;
	_cleanup_(freep) uint32_t *in = NULL, *out = NULL;
	_cleanup_(freep) char *why = NULL;
	char a[128], b[128];
	size_t n = 0;

	report_doc_heading(d, 2, "workload", "Workload");
	if (!s) {
		report_doc_note(d, "missing", "The workload is unknown: the study spec is not readable.");
		return;
	}
	dist_text(a, sizeof(a), &s->workload.input);
	dist_text(b, sizeof(b), &s->workload.output);
	report_doc_table_start(d, 2, (const char *const[]){ "item", "value" });
	report_doc_kv(d, "dataset", "%s%s%s", probe_dataset_name(s->workload.dataset),
		      s->workload.dataset_path ? " " : "", s->workload.dataset_path ? s->workload.dataset_path : "");
	if (s->workload.dataset == PROBE_DATASET_RANDOM) {
		report_doc_kv(d, "input length", "%s tokens", a);
		report_doc_kv(d, "output length", "%s tokens%s", b, s->workload.ignore_eos ? " (ignore_eos)" : "");
	}
	if (s->workload.prefix_len)
		report_doc_kv(d, "shared prefix", "%u tokens per group of %u requests", s->workload.prefix_len,
			      s->workload.prefix_group_size);
	report_doc_kv(d, "requests per load point", "%u measured + %u warm-up", s->workload.num_prompts,
		      s->workload.num_warmup);
	report_doc_kv(d, "arrivals", "%s%s%s", probe_arrival_name(s->workload.arrival),
		      s->workload.arrival == PROBE_ARRIVAL_GAMMA ? " (burstiness set)" : "",
		      s->workload.profile.n ? ", following a rate profile over the day" : "");
	if (s->workload_captured)
		captured_row(d, s->workload_captured);
	if (s->workload.max_concurrency)
		report_doc_kv(d, "max concurrency", "%u", s->workload.max_concurrency);
	report_doc_kv(d, "seed", "%" PRIu64, s->workload.seed);
	report_doc_table_end(d);
	if (report_workload_lengths(r, &in, &out, &n, &why) >= 0 && n > 0) {
		report_doc_para(d,
				"Length distributions of the %zu requests regenerated from the spec (the same seed "
				"gives the same "
				"requests the probe sent):",
				n);
		report_doc_table_start(d, 7,
				       (const char *const[]){ "tokens", "min", "mean", "p50", "p90", "p99", "max" });
		length_row(d, "input", in, n);
		length_row(d, "output", out, n);
		report_doc_table_end(d);
	} else if (why) {
		report_doc_note(d, "missing", "%s", why);
	}
	report_doc_plot(d, REPORT_PLOT_WORKLOAD);
}

static void section_sla(struct report_doc *d, const struct report *r)
{
	const struct study *s = r->parsed;
	const struct report_trial *b = report_best(r);
	const struct store_load_point *lp = b ? report_trial_best_lp(b) : NULL;
	char t[256];

	report_doc_heading(d, 2, "sla", "SLA");
	report_sla_text(r, t, sizeof(t));
	report_doc_para(d, "SLA: %s.", t);
	if (s && !probe_sla_empty(&s->sla)) {
		report_doc_table_start(d, 3, (const char *const[]){ "metric", "bound", "applies to" });
		for (size_t i = 0; i < s->sla.n_bounds; i++) {
			const struct probe_sla_bound *bd = &s->sla.bounds[i];
			char bound[32], applies[96];

			snprintf(bound, sizeof(bound), "%g ms", bd->bound_ms);
			if (bd->percentile > 0)
				snprintf(applies, sizeof(applies), "p%g over the load point", bd->percentile);
			else
				snprintf(applies, sizeof(applies),
					 "each request; at least %g%% of requests must meet it",
					 s->sla.attainment * 100);
			report_doc_row(d, NULL, (const char *const[]){ probe_metric_name(bd->metric), bound, applies });
		}
		report_doc_table_end(d);
	}
	if (lp) {
		char rate[48];

		if (!isfinite(lp->request_rate))
			report_doc_para(d,
					"Attainment of the best configuration with every request at once (the SLA held "
					"even then): %.1f%% of requests met the SLA.",
					lp->attainment * 100);
		else
			report_doc_para(
				d,
				"Attainment of the best configuration at its max-goodput load (%s req/s): %.1f%% of "
				"requests met the SLA.",
				report_rate_sent_text(rate, sizeof(rate), lp, lp->request_rate), lp->attainment * 100);
	}
}

static void section_space(struct report_doc *d, const struct report *r)
{
	const struct study *s = r->parsed;
	char buf[64];
	uint64_t wall = r->study.started_usec && r->study.finished_usec > r->study.started_usec
				? r->study.finished_usec - r->study.started_usec
				: 0;

	report_doc_heading(d, 2, "space", "Search space and budget");
	if (!s || !s->space) {
		report_doc_note(d, "missing", "The search space is unknown: the study spec is not readable.");
		return;
	}
	report_doc_table_start(d, 2, (const char *const[]){ "knob", "values" });
	for (size_t i = 0; i < s->space->n_knobs; i++) {
		const struct opt_knob *k = &s->space->knobs[i];
		char vals[1024];
		size_t used = 0;

		vals[0] = '\0';
		if (k->kind == OPT_KNOB_RANGE)
			used = (size_t)snprintf(vals, sizeof(vals),
						"%" PRId64 "..%" PRId64 " (%s, %zu values): ", k->min, k->max,
						k->scale == OPT_SCALE_LOG2 ? "log2" : "linear", k->n_values);
		for (size_t j = 0; j < k->n_values && used + 24 < sizeof(vals); j++) {
			if (k->strings)
				used += (size_t)snprintf(vals + used, sizeof(vals) - used, "%s%s", j ? ", " : "",
							 k->strings[j]);
			else
				used += (size_t)snprintf(vals + used, sizeof(vals) - used, "%s%g", j ? ", " : "",
							 k->numbers[j]);
		}
		report_doc_row(d, NULL, (const char *const[]){ k->name, vals });
	}
	report_doc_table_end(d);
	report_doc_table_start(d, 2, (const char *const[]){ "item", "value" });
	for (size_t i = 0; i < s->space->n_constraints; i++)
		report_doc_kv(d, "constraint", "%s", s->space->constraints[i].text);
	report_doc_kv(d, "configurations", "%" PRIu64 " allowed of %" PRIu64 " on the grid", opt_space_count(s->space),
		      s->space->n_grid);
	report_doc_kv(d, "budget", "%u trials, wall time %s", s->budget.max_trials,
		      s->budget.max_wall_time_usec == USEC_INFINITY
			      ? "unlimited"
			      : format_duration(buf, sizeof(buf), s->budget.max_wall_time_usec));
	report_doc_kv(d, "used", "%zu trials, wall time %s", r->n_trials,
		      wall ? format_duration(buf, sizeof(buf), wall) : "-");
	report_doc_kv(d, "rate search", "tolerance %g, at most %u load points per trial", s->probe.tolerance,
		      s->probe.max_steps);
	report_doc_table_end(d);
}

static void section_best(struct report_doc *d, const struct report *r)
{
	const struct report_trial *b = report_best(r);
	const struct store_load_point *lp;
	const cJSON *k;
	char c[16][32];

	report_doc_heading(d, 2, "best", "Best configuration");
	if (!b) {
		if (r->study.state == STORE_STUDY_NO_FEASIBLE && r->study.message)
			report_doc_note(
				d, "warning",
				"No configuration met the SLA, so there is no best configuration to launch: %s.",
				r->study.message);
		else
			report_doc_note(d, "warning",
					"No configuration met the SLA, so there is no best configuration to launch.");
		return;
	}
	report_doc_table_start(d, 2, (const char *const[]){ "knob", "value" });
	report_doc_kv(d, "engine version (as measured)", "%s",
		      r->answer.engine_version ? r->answer.engine_version : "not recorded");
	cJSON_ArrayForEach(k, b->knobs)
	{
		char v[64];

		report_doc_row(d, NULL,
			       (const char *const[]){ k->string, report_knob_text(b, k->string, v, sizeof(v)) });
	}
	report_doc_table_end(d);
	if (r->launch_command) {
		report_doc_para(d, "The command its server was launched with, as recorded with the trial (its port and "
				   "GPUs were that trial's):");
		report_doc_code(d, r->launch_command);
	} else {
		report_doc_note(d, "missing", "No launch command: %s.",
				r->launch_error ? r->launch_error : "unknown engine");
	}
	lp = report_trial_best_lp(b);
	report_doc_table_start(d, 2, (const char *const[]){ "at max goodput", "value" });
	report_doc_kv(d, "$/Mtok (the mean of its measurements)", "%s", report_fmt(c[0], 32, 4, report_cost(r)));
	report_doc_kv(d, "max goodput (tokens/s counted for cost)", "%s", report_fmt(c[0], 32, 1, b->t.max_goodput));
	report_doc_kv(d, "max request rate under the SLA (req/s asked, sent)", "%s",
		      lp ? report_rate_sent_text(c[0], 32, lp, b->t.max_rate) : report_fmt(c[0], 32, 3, b->t.max_rate));
	report_doc_kv(d, "mean concurrency", "%s", report_fmt(c[0], 32, 1, b->t.concurrency));
	if (lp) {
		report_doc_kv(d, "TTFT p50 / p90 / p99 (ms)", "%s / %s / %s", report_fmt(c[0], 32, 1, lp->p50_ttft_ms),
			      report_fmt(c[1], 32, 1, lp->p90_ttft_ms), report_fmt(c[2], 32, 1, lp->p99_ttft_ms));
		report_doc_kv(d, "TPOT p50 / p90 / p99 (ms)", "%s / %s / %s", report_fmt(c[0], 32, 2, lp->p50_tpot_ms),
			      report_fmt(c[1], 32, 2, lp->p90_tpot_ms), report_fmt(c[2], 32, 2, lp->p99_tpot_ms));
		report_doc_kv(d, "ITL p99 / E2E p99 (ms)", "%s / %s", report_fmt(c[0], 32, 2, lp->p99_itl_ms),
			      report_fmt(c[1], 32, 1, lp->p99_e2el_ms));
		report_doc_kv(d, "output / total tokens/s", "%s / %s", report_fmt(c[0], 32, 1, lp->output_throughput),
			      report_fmt(c[1], 32, 1, lp->total_token_throughput));
		report_doc_kv(d, "attainment", "%s%%", report_fmt(c[0], 32, 1, lp->attainment * 100));
		report_doc_kv(d, "tokens/s per user (1000 / mean TPOT)", "%s",
			      report_fmt(c[0], 32, 1, report_trial_tps_per_user(b)));
		if (report_lp_has_gpu(lp)) {
			report_doc_kv(d, "GPU utilisation mean / peak (%)", "%s / %s",
				      report_fmt(c[0], 32, 0, lp->gpu_util_mean),
				      report_fmt(c[1], 32, 0, lp->gpu_util_peak));
			report_doc_kv(d, "GPU memory used mean / peak (MiB)", "%s / %s",
				      report_fmt(c[0], 32, 0, lp->gpu_mem_mean_mib),
				      report_fmt(c[1], 32, 0, lp->gpu_mem_peak_mib));
		}
	}
	report_doc_table_end(d);
	report_doc_curve(d, r);
}

static void section_spread(struct report_doc *d, const struct report *r)
{
	struct report_spread sp;
	char c[6][32];

	if (!report_best(r))
		return;
	report_doc_heading(d, 2, "spread", "Re-probed best");
	report_best_spread(r, &sp);
	if (r->answer.n <= 1 || sp.n <= 1) {
		report_doc_para(d, "The best configuration was measured once (no confirmation re-probe was recorded), "
				   "so its spread "
				   "is unknown.");
		return;
	}
	report_doc_para(d,
			"The best configuration was measured %u times (search and confirmation re-probes); its cost is "
			"the mean:",
			r->answer.n);
	report_doc_table_start(d, 5, (const char *const[]){ "figure", "mean", "min", "max", "spread (max−min)/mean" });
	snprintf(c[3], 32, "%.1f%%", (sp.goodput_max - sp.goodput_min) / sp.goodput_mean * 100);
	report_doc_row(d, NULL,
		       (const char *const[]){ "max goodput (tokens/s)", report_fmt(c[0], 32, 1, sp.goodput_mean),
					      report_fmt(c[1], 32, 1, sp.goodput_min),
					      report_fmt(c[2], 32, 1, sp.goodput_max), c[3] });
	snprintf(c[3], 32, "%.1f%%", r->answer.spread * 100);
	report_doc_row(d, NULL,
		       (const char *const[]){ "$/Mtok", report_fmt(c[0], 32, 4, r->answer.cost_per_mtok),
					      report_fmt(c[1], 32, 4, r->answer.cost_min),
					      report_fmt(c[2], 32, 4, r->answer.cost_max), c[3] });
	report_doc_table_end(d);
}

/* Every load point that had failed requests, with their reasons as the
 * probe counted them (kept in the stored result). */
static void section_failed_requests(struct report_doc *d, const struct report *r)
{
	bool any = false;

	for (size_t i = 0; i < r->n_trials; i++)
		for (size_t k = 0; k < r->trials[i].n_lps; k++) {
			const struct store_load_point *lp = &r->trials[i].lps[k];
			_cleanup_(cJSON_Deletep) cJSON *j = NULL;
			struct probe_result res;
			struct error e = { 0 };
			char seq[16], rate[32], failed[32], why[512];

			if (lp->failed == 0 || !lp->result_json || !(j = cJSON_Parse(lp->result_json)) ||
			    probe_result_from_json(j, &res, &e) < 0)
				continue;
			if (!any) {
				report_doc_heading(d, 3, "failed-requests", "Failed requests");
				report_doc_table_start(d, 4,
						       (const char *const[]){ "#", "req/s", "failed", "why (count)" });
				any = true;
			}
			probe_result_format_failures(&res, why, sizeof(why));
			snprintf(seq, sizeof(seq), "%u", r->trials[i].t.seq);
			if (isfinite(lp->request_rate))
				report_fmt(rate, sizeof(rate), 3, lp->request_rate);
			else
				snprintf(rate, sizeof(rate), "all at once");
			snprintf(failed, sizeof(failed), "%u of %u", lp->failed, res.num_prompts);
			report_doc_row(d, "bad",
				       (const char *const[]){ seq, rate, failed, why[0] ? why : "not recorded" });
		}
	if (any)
		report_doc_table_end(d);
}

static void section_trials(struct report_doc *d, const struct report *r)
{
	report_doc_heading(d, 2, "trials", "All trials");
	if (r->n_trials == 0) {
		report_doc_para(d, "No trials yet.");
		return;
	}
	report_doc_table_start(d, 11,
			       (const char *const[]){ "#", "kind", "configuration", "state", "failure",
						      "max req/s (sent)", "max goodput tok/s", "$/Mtok", "deploy s",
						      "KV peak %", "message" });
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];
		const struct store_load_point *lp = report_trial_best_lp(t);
		char seq[16], knobs[256], c[5][32];
		const char *state = store_trial_state_to_string(t->t.state);

		snprintf(seq, sizeof(seq), "%u%s", t->t.seq, (long)i == r->best ? " ★" : "");
		report_knobs_short(t, knobs, sizeof(knobs));
		if (t->t.state == STORE_TRIAL_DONE && t->sweep)
			state = "done (a sweep: no cost)";
		else if (t->t.state == STORE_TRIAL_DONE && !isfinite(t->t.cost_per_mtok))
			state = "done (SLA not met)";
		if (lp)
			report_rate_sent_text(c[0], 32, lp, t->t.max_rate);
		else
			report_fmt(c[0], 32, 3, t->t.max_rate);
		report_fmt(c[1], 32, 1, t->t.max_goodput);
		report_fmt(c[2], 32, 4, t->t.cost_per_mtok);
		report_fmt(c[3], 32, 1, t->t.deploy_seconds);
		report_fmt(c[4], 32, 0, lp && isfinite(lp->kv_usage_peak) ? lp->kv_usage_peak * 100 : NAN);
		report_doc_row(d,
			       (long)i == r->best               ? "best"
			       : t->t.state == STORE_TRIAL_DONE ? NULL
								: "bad",
			       (const char *const[]){ seq, t->t.kind, knobs, state,
						      t->t.failure ? store_failure_to_string(t->t.failure) : "", c[0],
						      c[1], c[2], c[3], c[4],
						      t->t.failure_message ? t->t.failure_message : "" });
	}
	report_doc_table_end(d);
	if (r->best >= 0)
		report_doc_para(d, "★ marks the best configuration.");
	section_failed_requests(d, r);
}

/* The twin strategy: what the twin predicted for each trial it asked for
 * against what was measured. */
static void section_twin(struct report_doc *d, const struct report *r)
{
	const char *strategy = r->parsed ? r->parsed->search.strategy : NULL;
	double sum = 0;
	size_t n = 0;

	if (!strategy || strcmp(strategy, "twin") != 0)
		return;
	report_doc_heading(d, 2, "twin", "Twin: predicted vs measured");
	report_doc_para(
		d, "The digital twin (goodput-sim's engine model calibrated to this server's measurements) chose the "
		   "trials below; each row shows the $/Mtok it predicted when it asked for the trial and what was "
		   "measured. Design trials and confirmation re-probes carry no prediction.");
	report_doc_table_start(
		d, 6,
		(const char *const[]){ "#", "kind", "configuration", "predicted $/Mtok", "measured $/Mtok", "error" });
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];
		char seq[16], knobs[256], c[3][32];
		double pred = t->t.predicted_cost, meas = t->t.cost_per_mtok;
		bool both = isfinite(pred) && pred > 0 && isfinite(meas) && meas > 0 && t->t.state == STORE_TRIAL_DONE;

		snprintf(seq, sizeof(seq), "%u%s", t->t.seq, (long)i == r->best ? " ★" : "");
		report_knobs_short(t, knobs, sizeof(knobs));
		report_fmt(c[0], 32, 4, pred > 0 ? pred : NAN);
		report_fmt(c[1], 32, 4, t->t.state == STORE_TRIAL_DONE ? meas : NAN);
		if (both) {
			snprintf(c[2], 32, "%+.1f%%", (pred - meas) / meas * 100);
			sum += fabs(pred - meas) / meas;
			n++;
		} else
			snprintf(c[2], 32, "-");
		report_doc_row(d, (long)i == r->best ? "best" : NULL,
			       (const char *const[]){ seq, t->t.kind, knobs, c[0], c[1], c[2] });
	}
	report_doc_table_end(d);
	if (n > 0)
		report_doc_para(d, "Mean absolute error of the twin's predictions: %.1f%% over %zu trial%s.",
				sum / n * 100, n, n == 1 ? "" : "s");
	else
		report_doc_para(d, "No trial carries both a prediction and a measured cost.");
}

static void section_landscape(struct report_doc *d, const struct report *r)
{
	report_doc_heading(d, 2, "landscape", "Cost landscape");
	report_doc_para(
		d,
		"$/Mtok of each measured configuration over batch size (max_num_seqs) and chunked-prefill size "
		"(max_num_batched_tokens), one panel per quantization and tensor-parallel size. Blank cells were not "
		"measured.");
	report_doc_plot(d, REPORT_PLOT_LANDSCAPE);
}

/* The time to the answer and where the wall time went (the Gantt plot). */
static void section_schedule(struct report_doc *d, const struct report *r)
{
	struct report_schedule sc;
	char a[32], w[32];

	report_schedule(r, &sc);
	if (sc.wall_s <= 0)
		return;
	report_doc_heading(d, 3, "schedule", "Time to the answer");
	if (r->best >= 0 && isfinite(r->answer.time_to_answer_s))
		report_doc_para(d,
				"Time to the answer: %s, from the first trial's start to the end of the answer's last "
				"measurement%s. The trials took %s of wall time on %u GPU%s, at most %u at once; GPUs "
				"were busy "
				"%.0f%% of it.",
				format_duration(a, sizeof(a), sec_to_usec(r->answer.time_to_answer_s)),
				strstr(r->study.name, ".dry-run") ? " (virtual time: the schedule a real study keeps)"
								  : "",
				format_duration(w, sizeof(w), sec_to_usec(sc.wall_s)), sc.gpus, sc.gpus == 1 ? "" : "s",
				sc.most_at_once, sc.gpu_busy * 100);
	report_doc_plot(d, REPORT_PLOT_GANTT);
}

static void section_progress(struct report_doc *d, const struct report *r)
{
	const struct report_trial *b = report_best(r);
	double deploy = 0;
	char buf[32];

	report_doc_heading(d, 2, "progress", "Search progress");
	for (size_t i = 0; i < r->n_trials; i++)
		if (isfinite(r->trials[i].t.deploy_seconds))
			deploy += r->trials[i].t.deploy_seconds;
	if (b) {
		report_doc_para(d,
				"The best configuration was first measured at trial %u of %zu. Deploying servers took "
				"%s in all. The best so far is the lowest cost of any configuration as the study "
				"counts it (the mean of its measurements by then) and never rises: a re-probe that "
				"raises a configuration's mean leaves the line where it was; the triangle is the "
				"answer at its cost.",
				b->t.seq, r->n_trials, format_duration(buf, sizeof(buf), sec_to_usec(deploy)));
	}
	report_doc_plot(d, REPORT_PLOT_PROGRESS);
	section_schedule(d, r);
}

static void section_pareto(struct report_doc *d, const struct report *r)
{
	report_doc_heading(d, 2, "pareto", "Per-user speed against per-GPU throughput");
	report_doc_para(
		d, "Larger batches raise tokens/s per GPU (cheaper) and lower each user's tokens/s (slower replies); "
		   "the frontier shows the best trade-offs measured.");
	report_doc_plot(d, REPORT_PLOT_PARETO);
}

static void section_server(struct report_doc *d, const struct report *r)
{
	bool any = false, gpu = report_has_gpu(r);

	report_doc_heading(d, 2, "server", "GPU memory and server state");
	for (size_t i = 0; i < r->n_trials && !any; i++)
		for (size_t j = 0; j < r->trials[i].n_lps; j++)
			any = any || isfinite(r->trials[i].lps[j].kv_usage_peak) ||
			      isfinite(r->trials[i].lps[j].running_peak);
	if (!any && !gpu) {
		report_doc_para(d, "Server state was not recorded: no load point scraped the server's /metrics "
				   "(KV-cache usage, running and waiting requests).");
		report_doc_note(d, "missing", REPORT_GPU_UNAVAILABLE ".");
		return;
	}
	if (any) {
		report_doc_para(d,
				"KV-cache usage (the share of GPU memory set aside for the KV cache that is in use) "
				"and running "
				"requests, peaks scraped from the server's /metrics at each trial's max-goodput load:");
		report_doc_plot(d, REPORT_PLOT_SERVER);
	} else {
		report_doc_para(d, "Server state was not recorded (no load point scraped the server's /metrics); "
				   "GPU figures at each trial's max-goodput load:");
	}
	if (gpu)
		report_doc_para(
			d, "GPU utilisation (mean over the GPUs) and memory used (summed over the GPUs) were sampled "
			   "with NVML during each load point.");
	report_doc_table_start(d, gpu ? 10 : 6,
			       (const char *const[]){ "#", "configuration", "KV peak %", "running peak", "waiting peak",
						      "preemptions", "GPU util % mean", "GPU util % peak",
						      "GPU mem MiB mean", "GPU mem MiB peak" });
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];
		const struct store_load_point *lp = report_trial_best_lp(t);
		char seq[16], knobs[256], c[8][32];

		if (!lp)
			continue;
		snprintf(seq, sizeof(seq), "%u", t->t.seq);
		report_knobs_short(t, knobs, sizeof(knobs));
		report_doc_row(d, (long)i == r->best ? "best" : NULL,
			       (const char *const[]){ seq, knobs, report_fmt(c[0], 32, 0, lp->kv_usage_peak * 100),
						      report_fmt(c[1], 32, 0, lp->running_peak),
						      report_fmt(c[2], 32, 0, lp->waiting_peak),
						      report_fmt(c[3], 32, 0, lp->preemptions),
						      report_fmt(c[4], 32, 0, lp->gpu_util_mean),
						      report_fmt(c[5], 32, 0, lp->gpu_util_peak),
						      report_fmt(c[6], 32, 0, lp->gpu_mem_mean_mib),
						      report_fmt(c[7], 32, 0, lp->gpu_mem_peak_mib) });
	}
	report_doc_table_end(d);
	if (!gpu)
		report_doc_note(d, "missing", REPORT_GPU_UNAVAILABLE ".");
}

static const char html_head[] =
	"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	"<title>%s</title>\n<style>\n"
	"body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;max-width:1240px;"
	"padding:1em 2em;color:#222;line-height:1.4}\n"
	"h1{border-bottom:2px solid #2ca02c;padding-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd}\n"
	"table{border-collapse:collapse;margin:.6em 0;font-size:.9em}\n"
	"th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}\n"
	"th{background:#f3f5f7}tbody tr:nth-child(even){background:#fafafa}\n"
	"tr.best{background:#e6f4e6!important;font-weight:600}tr.bad td{color:#a33}\n"
	"p.verdict{background:#e6f4e6;border-left:5px solid #2ca02c;padding:.6em 1em;font-size:1.1em}\n"
	"p.warning{background:#fdf1e6;border-left:5px solid #e67e22;padding:.6em 1em}\n"
	"p.missing{color:#777;font-style:italic}\n"
	"pre{background:#f6f8fa;padding:.8em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}\n"
	"figure.plot{margin:1em 0}figure.plot svg{max-width:100%;height:auto;display:block}\n"
	"nav a{margin-right:1em}\n"
	"</style>\n</head>\n<body>\n";

int report_doc_write(const struct report *r, const struct report_plots *plots, enum report_format fmt, bool plot_files,
		     FILE *f)
{
	struct report_doc d = { .f = f, .fmt = fmt, .plots = plots, .plot_files = plot_files };
	int q;

	if (fmt == REPORT_FORMAT_HTML) {
		char title[256];

		snprintf(title, sizeof(title), "goodput report: %s", r->study.name);
		/* the study name is escaped on its own line */
		fprintf(f, "%.*s", (int)(strstr(html_head, "<title>") - html_head), html_head);
		if (report_is_live(r)) /* goodputd rewrites it after every trial */
			fputs("<meta http-equiv=\"refresh\" content=\"30\">\n", f);
		fputs("<title>", f);
		report_doc_esc(&d, title);
		fputs(strstr(html_head, "%s") + 2, f);
		fputs("<nav>", f);
		static const char *const nav[][2] = {
			{ "scenario", "Scenario" },   { "workload", "Workload" }, { "sla", "SLA" },
			{ "space", "Search space" },  { "best", "Best" },         { "trials", "Trials" },
			{ "landscape", "Landscape" }, { "progress", "Progress" }, { "pareto", "Pareto" },
			{ "server", "GPU memory" }
		};
		for (size_t i = 0; i < ELEMENTSOF(nav); i++)
			fprintf(f, "<a href=\"#%s\">%s</a>", nav[i][0], nav[i][1]);
		if (r->shape.present)
			fputs("<a href=\"#shape\">Shape</a>", f);
		if (r->production.hours)
			fputs("<a href=\"#production\">Production</a>", f);
		fputs("</nav>\n", f);
	}
	section_title(&d, r);
	report_doc_live(&d, r);
	section_scenario(&d, r);
	section_workload(&d, r);
	section_sla(&d, r);
	section_space(&d, r);
	section_best(&d, r);
	report_levers_section(&d, r);
	report_shape_section(&d, r);
	q = report_doc_findings(&d, r);
	section_spread(&d, r);
	section_trials(&d, r);
	section_twin(&d, r);
	section_landscape(&d, r);
	section_progress(&d, r);
	section_pareto(&d, r);
	section_server(&d, r);
	report_production_section(&d, r);
	if (fmt == REPORT_FORMAT_HTML)
		fputs("</body>\n</html>\n", f);
	if (q < 0)
		return q;
	return ferror(f) ? -EIO : 0;
}
