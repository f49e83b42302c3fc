/* cmd-report.c — `goodput report STUDY`: like list, best and trials, asks
 * goodputd (the `report` command of daemon/PROTOCOL.md, on --socket,
 * $GOODPUT_SOCKET or the default socket): it writes the report into its
 * state directory and answers the path, or answers the Markdown
 * (--markdown). With --db FILE the store is read offline instead: the
 * report (HTML with inline plots, Markdown with SVG files) is written into
 * --out DIR and a summary printed (text or --json). The store is opened
 * read-only, so a report can be made while a tuner or the daemon is still
 * writing the study (WAL). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-util.h"
#include "commands.h"
#include "exit-status.h"
#include "log.h"
#include "macro.h"
#include "protocol.h"
#include "report.h"
#include "store.h"

/* How long a report written by goodputd (gnuplot for every plot) may take. */
#define REPORT_SOCKET_TIMEOUT_USEC (300ULL * 1000 * 1000)

static struct {
	const char *db, *out, *socket;
	struct report_options ro;
	bool json, markdown;
} arg;

static const struct verb_option options[] = {
	{ "db", 0, "FILE", "read this store offline instead of asking goodputd", VERB_STRING, &arg.db },
	{ "out", 0, "DIR", "with --db: where to write report.html, report.md and\nplots (default ./report-STUDY)",
	  VERB_STRING, &arg.out },
	{ "markdown", 0, NULL, "print the Markdown (tables only) instead of writing files", VERB_FLAG, &arg.markdown },
	{ "no-plots", 0, NULL, "table-only report", VERB_FLAG, &arg.ro.no_plots },
	{ "engines-dir", 0, "DIR", "engine profiles (for the launch command)", VERB_STRING, &arg.ro.engines_dir },
	{ "json", 0, NULL, "print the summary as JSON", VERB_FLAG, &arg.json },
	{ "socket", 0, "PATH",
	  "goodputd's control socket (default $GOODPUT_SOCKET, else\n" CTL_DEFAULT_SOCKET "): it writes the report "
	  "into its state\ndirectory (reports/STUDY/) and prints the path, or with\n"
	  "--markdown prints the Markdown",
	  VERB_STRING, &arg.socket },
	VERB_OPTION_END,
};

/* `goodput report --socket PATH STUDY`: goodputd makes the report. */
static int report_from_daemon(const char *path, const char *study, bool markdown, bool json)
{
	_cleanup_(cJSON_Deletep) cJSON *req = cJSON_CreateObject(), *resp = NULL;
	_cleanup_(closep) int fd = -1;
	struct error err = { 0 };
	const cJSON *e;
	int q;

	if (!req || !cJSON_AddStringToObject(req, "command", "report") ||
	    !cJSON_AddStringToObject(req, "study", study) || !cJSON_AddBoolToObject(req, "html", !markdown))
		return log_error_errno(ENOMEM, "out of memory"), CLI_EXIT_FAILED;
	q = ctl_client_connect(path, &fd, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		log_info("to read a store without goodputd: goodput report --db FILE %s", study);
		return CLI_EXIT_FAILED;
	}
	q = ctl_client_call(fd, req, REPORT_SOCKET_TIMEOUT_USEC, &resp, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	if (json) {
		_cleanup_(cjson_freep) char *text = cJSON_Print(resp);

		if (!text)
			return log_error_errno(ENOMEM, "out of memory"), CLI_EXIT_FAILED;
		printf("%s\n", text);
		return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "ok")) ? CLI_EXIT_OK : CLI_EXIT_FAILED;
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "ok"))) {
		e = cJSON_GetObjectItemCaseSensitive(resp, "error");
		log_error("goodputd: %s", cJSON_IsString(e) ? e->valuestring : "request failed");
		return CLI_EXIT_FAILED;
	}
	e = cJSON_GetObjectItemCaseSensitive(resp, markdown ? "markdown" : "html");
	if (!cJSON_IsString(e)) {
		log_error("goodputd's answer has no \"%s\"", markdown ? "markdown" : "html");
		return CLI_EXIT_FAILED;
	}
	if (markdown)
		fputs(e->valuestring, stdout);
	else
		printf("report: %s\n", e->valuestring);
	return 0;
}

/* report.html, report.md and the plots into --out (default report-STUDY). */
static int write_files(struct report *r, const char *study)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(freep) char *outdir = NULL;
	struct report_files files = { 0 };
	struct error err = { 0 };
	const char *out = arg.out;
	int q;

	if (!out) {
		if (asprintf(&outdir, "report-%s", study) < 0)
			return log_error_errno(ENOMEM, "out of memory"), CLI_EXIT_FAILED;
		out = outdir;
	}
	q = report_write_files(r, out, &files, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	if (files.plot_note)
		log_warning("%s", files.plot_note);
	if (arg.json) {
		q = report_summary_json(r, &j);
		if (q >= 0 && (!cJSON_AddStringToObject(j, "html", files.html_path) ||
			       !cJSON_AddStringToObject(j, "markdown", files.markdown_path) ||
			       !cJSON_AddNumberToObject(j, "plots", (double)files.n_plots)))
			q = -ENOMEM;
		q = cli_print_json(q, j);
	} else {
		if (report_summary_print(r, stdout) < 0) {
			log_error_errno(-ENOMEM, "out of memory");
			q = CLI_EXIT_FAILED;
		} else {
			printf("report: %s (%zu plots), %s\n", files.html_path, files.n_plots, files.markdown_path);
			q = CLI_EXIT_OK;
		}
	}
	report_files_done(&files);
	return q;
}

static int run(const struct verb *v, int argc, char **argv)
{
	_cleanup_(store_closep) struct store *s = NULL;
	_cleanup_(report_freep) struct report *r = NULL;
	_cleanup_(freep) char *md = NULL;
	int q;

	if (arg.db && arg.socket) {
		log_error("report: --db and --socket exclude each other (see 'goodput report --help')");
		return CLI_EXIT_USAGE;
	}
	if (!arg.db) {
		const char *env = getenv("GOODPUT_SOCKET");

		if (arg.out || arg.ro.no_plots || arg.ro.engines_dir) {
			log_error("report: --out, --no-plots and --engines-dir go with --db (goodputd writes its "
				  "reports in its state directory)");
			return CLI_EXIT_USAGE;
		}
		return report_from_daemon(arg.socket    ? arg.socket
					  : env && *env ? env
							: CTL_DEFAULT_SOCKET,
					  argv[0], arg.markdown, arg.json);
	}
	if (cli_load_report(arg.db, argv[0], &arg.ro, &s, &r) < 0)
		return CLI_EXIT_FAILED;
	if (!arg.markdown)
		return write_files(r, argv[0]);
	q = report_render_markdown(r, &md);
	if (q < 0)
		return log_error_errno(q, "rendering the report failed"), CLI_EXIT_FAILED;
	fputs(md, stdout);
	return CLI_EXIT_OK;
}

/* The command: what its help says, then how it runs; a few lines. */
/* clang-format off */
const struct verb verb_report = {
	.summary = "write a study's benchmark report (HTML with plots, Markdown)",
	.about = "Asks goodputd to write the benchmark report of a study (its name or id), or\n"
		 "with --db writes it from a store: scenario, workload,\n"
		 "SLA, search space, the best configuration with its launch command and\n"
		 "latency-throughput curve, every trial, the cost landscape, search progress,\n"
		 "a Pareto view and GPU memory. report.html is self-contained (inline SVG\n"
		 "plots drawn with gnuplot); report.md has the same text with plot-*.svg.",
	.name = "report", .usage = "[OPTIONS] STUDY", .args = { "STUDY (name or id)", 1, 1 },
	.options = options, .run = run,
};
/* clang-format on */
