/* report.c — the report's outputs: the Markdown text (for the daemon's
 * socket), the files of `goodput report --out DIR` (report.html with inline
 * plots, report.md with plot-*.svg beside it), and the summary printed on the
 * terminal or as JSON. Files are written to a temporary name and renamed, so
 * a reader never sees half a page. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-util.h"
#include "json-util.h"
#include "macro.h"
#include "report-internal.h"

void report_files_done(struct report_files *f)
{
	free(f->html_path);
	free(f->markdown_path);
	free(f->plot_note);
	*f = (struct report_files){ 0 };
}

static int mkdir_p(const char *dir)
{
	_cleanup_(freep) char *p = strdup(dir);

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Writes text to dir/name through a temporary file beside it and a rename;
 * the umask decides who may read it, as for a file any tool writes. */
static int write_file(const char *dir, const char *name, const char *text, size_t len, char **ret_path,
		      struct error *err)
{
	_cleanup_(freep) char *path = NULL;
	int q;

	if (asprintf(&path, "%s/%s", dir, name) < 0) {
		path = NULL;
		return -ENOMEM;
	}
	q = file_write_atomic(path, text, len, 0666, FILE_WRITE_UMASK);
	if (q < 0)
		return error_set(err, q, "%s: cannot write: %s", path, strerror(-q));
	if (ret_path)
		*ret_path = TAKE_PTR(path);
	return 0;
}

static int render(struct report *r, const struct report_plots *p, enum report_format fmt, bool files, char **ret,
		  size_t *ret_len)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int q;

	if (!f)
		return -ENOMEM;
	q = report_doc_write(r, p, fmt, files, f);
	if (fclose(f) != 0 && q >= 0)
		q = -ENOMEM;
	if (q < 0)
		return q;
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

int report_render_markdown(struct report *r, char **ret)
{
	size_t len;

	return render(r, NULL, REPORT_FORMAT_MARKDOWN, false, ret, &len);
}

int report_write_files(struct report *r, const char *dir, struct report_files *ret, struct error *err)
{
	struct report_plots plots = { 0 };
	struct report_files out = { 0 };
	_cleanup_(freep) char *html = NULL, *md = NULL;
	size_t hl = 0, ml = 0;
	int q;

	q = mkdir_p(dir);
	if (q < 0)
		return error_set(err, q, "%s: cannot create the folder: %s", dir, strerror(-q));
	q = report_plots_render(r, &plots);
	if (q < 0)
		return error_set(err, q, "drawing the plots failed: %s", strerror(-q));
	for (int k = 0; k < _REPORT_PLOT_MAX && q >= 0; k++) {
		char name[64];

		if (!plots.svg[k])
			continue;
		snprintf(name, sizeof(name), "plot-%s.svg", report_plot_name((enum report_plot_kind)k));
		_cleanup_(freep) char *doc = NULL;
		if (asprintf(&doc, "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n%s", plots.svg[k]) < 0) {
			q = -ENOMEM;
			break;
		}
		q = write_file(dir, name, doc, strlen(doc), NULL, err);
		if (q >= 0)
			out.n_plots++;
	}
	if (q >= 0)
		q = render(r, &plots, REPORT_FORMAT_HTML, false, &html, &hl);
	if (q >= 0)
		q = render(r, &plots, REPORT_FORMAT_MARKDOWN, true, &md, &ml);
	if (q >= 0)
		q = write_file(dir, "report.html", html, hl, &out.html_path, err);
	if (q >= 0)
		q = write_file(dir, "report.md", md, ml, &out.markdown_path, err);
	if (q >= 0 && plots.note)
		out.plot_note = strdup(plots.note);
	if (q >= 0 && !plots.note) {
		/* name the plots that could not be drawn */
		for (int k = 0; k < _REPORT_PLOT_MAX; k++)
			if (plots.why[k] && !out.plot_note)
				(void)asprintf(&out.plot_note, "the %s plot was not drawn: %s",
					       report_plot_name((enum report_plot_kind)k), plots.why[k]);
	}
	report_plots_done(&plots);
	if (q < 0) {
		report_files_done(&out);
		if (q == -ENOMEM && !err->msg[0])
			return error_set(err, q, "out of memory");
		return q;
	}
	*ret = out;
	return 0;
}

int report_summary_print(struct report *r, FILE *f)
{
	struct report_findings fi;
	const struct report_trial *b = report_best(r);
	char knobs[256], c1[32], c2[32], c3[32], sla[256], note[96];

	report_sla_text(r, sla, sizeof(sla));
	fprintf(f, "study %s (%s): %s on %s, %zu trials\n", r->study.name, store_study_state_to_string(r->study.state),
		r->study.model, r->study.engine, r->n_trials);
	fprintf(f, "SLA: %s\n", sla);
	if (!b) {
		fprintf(f, "no configuration met the SLA: there is no best configuration\n");
		return 0;
	}
	report_knobs_short(b, knobs, sizeof(knobs));
	fprintf(f, "best: %s (trial %u)\n", knobs, b->t.seq);
	fprintf(f, "cost: $%s/Mtok%s; max goodput %s tokens/s at %s req/s; %u GPU%s per replica\n",
		report_fmt(c1, sizeof(c1), 4, report_cost(r)), report_cost_note(r, note, sizeof(note)),
		report_fmt(c2, sizeof(c2), 1, b->t.max_goodput),
		report_trial_best_lp(b) ? report_rate_sent_text(c3, sizeof(c3), report_trial_best_lp(b), b->t.max_rate)
					: report_fmt(c3, sizeof(c3), 3, b->t.max_rate),
		b->gpus, b->gpus == 1 ? "" : "s");
	if (r->launch_command)
		fprintf(f, "launch: %s\n", r->launch_command);
	else
		fprintf(f, "launch: unavailable (%s)\n", r->launch_error ? r->launch_error : "?");
	if (report_findings_of(&r->study, r->parsed, &r->answer, report_trial_best_lp(b), &fi) < 0)
		return -ENOMEM;
	if (fi.have_baseline)
		fprintf(f, "vs defaults: %s\n", fi.baseline);
	if (fi.have_edge)
		fprintf(f, "edge: %s\n", fi.edge_text);
	if (fi.n_predicted_infeasible > 0) {
		fprintf(f, "not deployed (predicted not to fit): ");
		report_findings_print_predicted(&fi, f);
		fprintf(f, "\n");
	}
	report_findings_done(&fi);
	{
		struct report_levers lv;

		if (report_levers_from_report(r, &lv) >= 0)
			report_levers_print(&lv, "", f);
	}
	return 0;
}

static int add_num_or_null(cJSON *o, const char *k, double v)
{
	if (isfinite(v))
		return json_add_number(o, k, v);
	return cJSON_AddNullToObject(o, k) ? 0 : -ENOMEM;
}

int report_summary_json(struct report *r, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	const struct report_trial *b = report_best(r);
	struct report_findings fi;
	char sla[256];
	int q = 0;

	if (!o)
		return -ENOMEM;
	report_sla_text(r, sla, sizeof(sla));
	q |= json_add_string(o, "study", r->study.name);
	q |= json_add_number(o, "id", (double)r->study.id);
	q |= json_add_string(o, "state", store_study_state_to_string(r->study.state));
	q |= json_add_string(o, "engine", r->study.engine);
	q |= json_add_string(o, "model", r->study.model);
	q |= json_add_string(o, "sla", sla);
	q |= json_add_number(o, "trials", (double)r->n_trials);
	if (!b) {
		if (!cJSON_AddNullToObject(o, "best"))
			return -ENOMEM;
	} else {
		cJSON *bj = cJSON_AddObjectToObject(o, "best");
		cJSON *k = b->knobs ? cJSON_Duplicate(b->knobs, 1) : cJSON_CreateObject();

		if (!bj || !k || !cJSON_AddItemToObject(bj, "knobs", k)) {
			cJSON_Delete(k);
			return -ENOMEM;
		}
		q |= json_add_number(bj, "trial", b->t.seq);
		q |= json_add_string(bj, "canonical_key", b->t.canonical_key ? b->t.canonical_key : "");
		q |= add_num_or_null(bj, "cost_per_mtok", report_cost(r));
		q |= json_add_number(bj, "measurements", r->answer.n);
		q |= add_num_or_null(bj, "spread", r->answer.spread);
		q |= add_num_or_null(bj, "max_goodput", b->t.max_goodput);
		q |= add_num_or_null(bj, "max_rate", b->t.max_rate);
		q |= add_num_or_null(bj, "offered_rate",
				     report_trial_best_lp(b) ? store_load_point_offered_rate(report_trial_best_lp(b))
							     : NAN);
		q |= json_add_number(bj, "gpus_per_replica", b->gpus);
		if (r->answer.engine_version)
			q |= json_add_string(bj, "engine_version", r->answer.engine_version);
		if (r->launch_command)
			q |= json_add_string(bj, "launch_command", r->launch_command);
		if (report_findings_of(&r->study, r->parsed, &r->answer, report_trial_best_lp(b), &fi) < 0)
			return -ENOMEM;
		q |= report_findings_json(&fi, bj);
		report_findings_done(&fi);
		{
			struct report_levers lv;

			if (report_levers_from_report(r, &lv) >= 0)
				q |= report_levers_json(&lv, bj);
		}
	}
	if (q)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}
