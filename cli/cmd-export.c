/* cmd-export.c — `goodput export STUDY --format json|csv`: everything a
 * study measured, for notebooks and spreadsheets, read from the store
 * read-only (no daemon, safe while one writes).
 *
 * json: one object — the study row with its answer (as `goodput list`
 * shows it), its spec, its best (as `goodput best`), and every trial (as
 * `goodput trials`) with its host facts and its load points, each load
 * point one flat object: the result object the probe wrote (vLLM's key
 * names) plus the store's seq, phase, SLA verdict and GPU figures, so that
 * pandas' json_normalize gives one column per figure.
 * csv: one line per load point (a trial without any gets one line of its
 * own), the trial's columns first, its knobs as columns. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-util.h"
#include "commands.h"
#include "csv.h"
#include "exit-status.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "protocol.h"
#include "store.h"
#include "time-util.h"

static struct {
	const char *db, *format;
} arg = { .db = "goodput.db", .format = "json" };

static const struct verb_option options[] = {
	{ "db", 0, "FILE", "the store (default ./goodput.db; goodputd's: " CTL_DEFAULT_DB ")", VERB_STRING, &arg.db },
	{ "format", 0, "json|csv", "one JSON object (default), or CSV: a line per load point", VERB_STRING,
	  &arg.format },
	VERB_OPTION_END,
};

/* A load point's numbers, by the names load_points_v gives them. */
#define LP_COL(name)                                                                                                   \
	{                                                                                                              \
#name, offsetof(struct store_load_point, name)                                                         \
	}
static const struct {
	const char *name;
	size_t offset;
} lp_columns[] = {
	LP_COL(request_rate),
	LP_COL(attainment),
	LP_COL(mean_ttft_ms),
	LP_COL(p50_ttft_ms),
	LP_COL(p90_ttft_ms),
	LP_COL(p99_ttft_ms),
	LP_COL(mean_tpot_ms),
	LP_COL(p50_tpot_ms),
	LP_COL(p90_tpot_ms),
	LP_COL(p99_tpot_ms),
	LP_COL(p99_itl_ms),
	LP_COL(p99_e2el_ms),
	LP_COL(request_throughput),
	LP_COL(output_throughput),
	LP_COL(total_token_throughput),
	LP_COL(good_output_throughput),
	LP_COL(request_goodput),
	LP_COL(mean_concurrency),
	LP_COL(kv_usage_peak),
	LP_COL(running_peak),
	LP_COL(waiting_peak),
	LP_COL(preemptions),
	LP_COL(gpu_util_mean),
	LP_COL(gpu_util_peak),
	LP_COL(gpu_mem_mean_mib),
	LP_COL(gpu_mem_peak_mib),
};
#undef LP_COL

static double lp_number(const struct store_load_point *lp, size_t i)
{
	return *(const double *)((const char *)lp + lp_columns[i].offset);
}

/* Everything of one study, loaded once for either format. */
struct export
{
	struct store_study st;
	struct store_study_best best;
	bool have_best;
	struct store_trial *trials;
	size_t n_trials;
	struct store_load_point **lps; /* per trial */
	size_t *n_lps;
};

static void export_done(struct export *x)
{
	for (size_t i = 0; x->lps && i < x->n_trials; i++)
		store_load_point_array_free(x->lps[i], x->n_lps[i]);
	free(x->lps);
	free(x->n_lps);
	store_trial_array_free(x->trials, x->n_trials);
	store_study_best_done(&x->best);
	store_study_done(&x->st);
}

static int export_load(struct store *s, const char *study, struct export *x, struct error *err)
{
	int r;

	r = store_study_get_by_name(s, study, &x->st, err);
	if (r < 0)
		return r;
	r = store_study_best(s, x->st.id, &x->best, err);
	if (r < 0 && r != -ENOENT)
		return r;
	x->have_best = r >= 0;
	r = store_trial_history(s, x->st.id, &x->trials, &x->n_trials, err);
	if (r < 0)
		return r;
	x->lps = calloc(x->n_trials ? x->n_trials : 1, sizeof(*x->lps));
	x->n_lps = calloc(x->n_trials ? x->n_trials : 1, sizeof(*x->n_lps));
	if (!x->lps || !x->n_lps)
		return error_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < x->n_trials; i++) {
		r = store_load_point_list(s, x->trials[i].id, &x->lps[i], &x->n_lps[i], err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- json ---- */

/* Parsed JSON text under key (null when absent or not JSON). */
static int add_parsed(cJSON *o, const char *key, const char *text)
{
	cJSON *v = text ? cJSON_Parse(text) : NULL;

	if (!v)
		v = cJSON_CreateNull();
	if (!v || !cJSON_AddItemToObject(o, key, v)) {
		cJSON_Delete(v);
		return -ENOMEM;
	}
	return 0;
}

static int lp_to_json(const struct store_load_point *lp, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = lp->result_json ? cJSON_Parse(lp->result_json) : NULL;
	char t[64];

	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		o = cJSON_CreateObject();
		if (!o)
			return -ENOMEM;
	}
	/* the store's own columns win over the result's keys of the same name */
	cJSON_DeleteItemFromObjectCaseSensitive(o, "seq");
	cJSON_DeleteItemFromObjectCaseSensitive(o, "phase");
	cJSON_DeleteItemFromObjectCaseSensitive(o, "sla_met");
	if (json_add_number(o, "seq", lp->seq) < 0 || json_add_string(o, "phase", lp->phase ? lp->phase : "") < 0 ||
	    json_add_bool(o, "sla_met", lp->sla_met) < 0 ||
	    json_add_string(o, "created", format_iso8601(t, sizeof(t), lp->created_usec)) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(lp_columns); i++) {
		double v = lp_number(lp, i);

		if (strncmp(lp_columns[i].name, "gpu_", 4) != 0 && strcmp(lp_columns[i].name, "kv_usage_peak") != 0 &&
		    strcmp(lp_columns[i].name, "running_peak") != 0 &&
		    strcmp(lp_columns[i].name, "waiting_peak") != 0 && strcmp(lp_columns[i].name, "preemptions") != 0)
			continue; /* the result object has the probe's figures */
		cJSON_DeleteItemFromObjectCaseSensitive(o, lp_columns[i].name);
		if ((isfinite(v) ? json_add_number(o, lp_columns[i].name, v)
				 : (cJSON_AddNullToObject(o, lp_columns[i].name) ? 0 : -ENOMEM)) < 0)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(o);
	return 0;
}

static int trial_to_json(const struct store_trial *t, const struct store_load_point *lps, size_t n, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = NULL;
	cJSON *a;
	int r;

	r = ctl_trial_to_json(t, &o);
	if (r < 0)
		return r;
	if (add_parsed(o, "host", t->host_json) < 0 || (t->gpus && json_add_string(o, "gpus", t->gpus) < 0) ||
	    (isfinite(t->predicted_cost) && json_add_number(o, "predicted_cost_per_mtok", t->predicted_cost) < 0))
		return -ENOMEM;
	a = cJSON_AddArrayToObject(o, "load_points");
	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		cJSON *p = NULL;

		r = lp_to_json(&lps[i], &p);
		if (r < 0 || !cJSON_AddItemToArray(a, p)) {
			cJSON_Delete(p);
			return -ENOMEM;
		}
	}
	*ret = TAKE_PTR(o);
	return 0;
}

static int export_json(const struct export *x)
{
	_cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
	cJSON *st = NULL, *best = NULL, *a;
	int r;

	if (!root)
		return -ENOMEM;
	r = ctl_study_to_json(&x->st, x->have_best ? &x->best : NULL, &st);
	if (r < 0 || !cJSON_AddItemToObject(root, "study", st)) {
		cJSON_Delete(st);
		return -ENOMEM;
	}
	if (add_parsed(root, "spec", x->st.spec_json) < 0)
		return -ENOMEM;
	if (x->have_best) {
		r = ctl_best_to_json(&x->best, &best);
		if (r < 0 || !cJSON_AddItemToObject(root, "best", best)) {
			cJSON_Delete(best);
			return -ENOMEM;
		}
	} else if (!cJSON_AddNullToObject(root, "best"))
		return -ENOMEM;
	a = cJSON_AddArrayToObject(root, "trials");
	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < x->n_trials; i++) {
		cJSON *t = NULL;

		r = trial_to_json(&x->trials[i], x->lps[i], x->n_lps[i], &t);
		if (r < 0 || !cJSON_AddItemToArray(a, t)) {
			cJSON_Delete(t);
			return -ENOMEM;
		}
	}
	return cli_print_json(0, root) == 0 ? 0 : -ENOMEM;
}

/* ---- csv ---- */

/* The knob names of every trial, in the order they first appear. */
static size_t knob_names(const struct export *x, cJSON **knobs, const char **names, size_t max)
{
	size_t n = 0;

	for (size_t t = 0; t < x->n_trials; t++) {
		const cJSON *k;

		cJSON_ArrayForEach(k, knobs[t])
		{
			size_t i = 0;

			while (i < n && strcmp(names[i], k->string) != 0)
				i++;
			if (i == n && n < max)
				names[n++] = k->string;
		}
	}
	return n;
}

static void csv_header(FILE *f, const char **knobs, size_t n_knobs)
{
	static const char *const trial_cols[] = { "study",       "trial_seq",     "trial_kind",
						  "trial_state", "failure",       "max_rate",
						  "max_goodput", "cost_per_mtok", "engine_version" };
	static const char *const lp_cols[] = { "seq", "phase", "max_concurrency", "sla_met", "completed", "failed" };

	for (size_t i = 0; i < ELEMENTSOF(trial_cols); i++)
		csv_text(f, i == 0, trial_cols[i]);
	for (size_t i = 0; i < n_knobs; i++)
		csv_text(f, false, knobs[i]);
	for (size_t i = 0; i < ELEMENTSOF(lp_cols); i++)
		csv_text(f, false, lp_cols[i]);
	for (size_t i = 0; i < ELEMENTSOF(lp_columns); i++)
		csv_text(f, false, lp_columns[i].name);
	csv_end(f);
}

/* The trial's columns (study first), then its knobs. */
static void csv_trial(FILE *f, const struct export *x, size_t t, const cJSON *knobs, const char **names, size_t n)
{
	const struct store_trial *tr = &x->trials[t];
	_cleanup_(cJSON_Deletep) cJSON *host = tr->host_json ? cJSON_Parse(tr->host_json) : NULL;

	csv_text(f, true, x->st.name);
	csv_number(f, false, tr->seq);
	csv_text(f, false, tr->kind);
	csv_text(f, false, store_trial_state_to_string(tr->state));
	csv_text(f, false, tr->failure == STORE_FAILURE_NONE ? NULL : store_failure_to_string(tr->failure));
	csv_number(f, false, tr->max_rate);
	csv_number(f, false, tr->max_goodput);
	csv_number(f, false, tr->cost_per_mtok);
	csv_json(f, false, cJSON_GetObjectItemCaseSensitive(host, "engine_version"));
	for (size_t i = 0; i < n; i++)
		csv_json(f, false, cJSON_GetObjectItemCaseSensitive(knobs, names[i]));
}

static int export_csv(const struct export *x)
{
	_cleanup_(freep) cJSON **knobs = calloc(x->n_trials ? x->n_trials : 1, sizeof(*knobs));
	const char *names[64];
	size_t n;

	if (!knobs)
		return -ENOMEM;
	for (size_t t = 0; t < x->n_trials; t++)
		knobs[t] = cJSON_Parse(x->trials[t].knobs_json ? x->trials[t].knobs_json : "{}");
	n = knob_names(x, knobs, names, ELEMENTSOF(names));
	csv_header(stdout, names, n);
	for (size_t t = 0; t < x->n_trials; t++) {
		for (size_t i = 0; i < x->n_lps[t]; i++) {
			const struct store_load_point *lp = &x->lps[t][i];

			csv_trial(stdout, x, t, knobs[t], names, n);
			csv_number(stdout, false, lp->seq);
			csv_text(stdout, false, lp->phase);
			csv_number(stdout, false, lp->max_concurrency);
			csv_text(stdout, false, lp->sla_met ? "true" : "false");
			csv_number(stdout, false, lp->completed);
			csv_number(stdout, false, lp->failed);
			for (size_t c = 0; c < ELEMENTSOF(lp_columns); c++)
				csv_number(stdout, false, lp_number(lp, c));
			csv_end(stdout);
		}
		if (x->n_lps[t] == 0) {
			csv_trial(stdout, x, t, knobs[t], names, n);
			for (size_t c = 0; c < 6 + ELEMENTSOF(lp_columns); c++)
				csv_text(stdout, false, NULL);
			csv_end(stdout);
		}
	}
	for (size_t t = 0; t < x->n_trials; t++)
		cJSON_Delete(knobs[t]);
	return fflush(stdout) == 0 ? 0 : -errno;
}

static int run(const struct verb *v, int argc, char **argv)
{
	struct store_open_options so = { .flags = STORE_OPEN_READ_ONLY };
	_cleanup_(store_closep) struct store *s = NULL;
	struct export x = { 0 };
	struct error err = { 0 };
	bool csv = strcmp(arg.format, "csv") == 0;
	int r;

	if (!csv && strcmp(arg.format, "json") != 0) {
		log_error("export: --format: expected json or csv, got \"%s\" (see 'goodput export --help')",
			  arg.format);
		return CLI_EXIT_USAGE;
	}
	r = store_open(arg.db, &so, &s, &err);
	if (r >= 0)
		r = export_load(s, argv[0], &x, &err);
	if (r == -ENOENT && x.st.id == 0 && s)
		error_set(&err, r, "%s: no study named \"%s\"", arg.db, argv[0]);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		export_done(&x);
		return CLI_EXIT_FAILED;
	}
	r = csv ? export_csv(&x) : export_json(&x);
	export_done(&x);
	if (r < 0)
		return log_error_errno(r, "export: writing the %s", csv ? "CSV" : "JSON"), CLI_EXIT_FAILED;
	return CLI_EXIT_OK;
}

/* The command: what its help says, then how it runs; a few lines. */
/* clang-format off */
const struct verb verb_export = {
	.summary = "everything a study measured, as JSON or CSV, for notebooks",
	.about = "Writes every trial of a study and every load point it measured to stdout, read\n"
		 "from the store without a daemon: --format json (the study, its spec, its best and\n"
		 "its trials, each with its host facts and load points) or --format csv (one line\n"
		 "per load point, the trial's knobs as columns). The store also has SQL views for\n"
		 "sqlite3 -csv: trial_results and load_points_v (see goodput(1)).",
	.name = "export", .usage = "[OPTIONS] STUDY",
	.args = { "STUDY", 1, 1 },
	.options = options, .run = run,
};
/* clang-format on */
