/* cmd-client.c — `goodput submit|status|list|best|trials|cancel|pause|resume`:
 * the daemon's client. Each command sends one request line to goodputd's
 * control socket (protocol.h), waits for the answer and prints it as a
 * readable table, or as the daemon's JSON object with --json. Exit codes: 0
 * ok, 1 the daemon refused or is not running, 2 usage.
 *
 * list, best and trials also answer offline: with --db FILE they open the
 * store read-only (no lock: safe while a goodputd or goodput tune writes to
 * it, which WAL lets readers do) and build the answer goodputd would give,
 * with the same functions (protocol-answers.c), so --json prints the same
 * object either way. trials --csv prints the table for other tools. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "csv.h"
#include "exit-status.h"
#include "report.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "protocol.h"
#include "store.h"
#include "study.h"
#include "time-util.h"

static struct {
	const char *socket; /* NULL: $GOODPUT_SOCKET, else the default */
	bool json;
	uint64_t timeout_usec;
	const char *model, *engine, *label; /* best */
	const char *study;                  /* the positional argument, if any */
	const char *db;                     /* list, best, trials: read this store instead of asking goodputd */
	bool csv;                           /* trials */
} arg = { .timeout_usec = 30 * USEC_PER_SEC };

static const struct verb_option client_options[] = {
	{ "socket", 0, "PATH", "goodputd's control socket (default $GOODPUT_SOCKET, else " CTL_DEFAULT_SOCKET ")",
	  VERB_STRING, &arg.socket },
	{ "json", 0, NULL, "print the daemon's answer as JSON", VERB_FLAG, &arg.json },
	{ "timeout", 0, "SEC", "give up waiting for an answer after SEC seconds (default 30)", VERB_SECONDS,
	  &arg.timeout_usec, 0.001, 86400 },
	VERB_OPTION_END,
};

#define DB_OPTION                                                                                                      \
	{                                                                                                              \
		"db", 0, "FILE",                                                                                       \
			"read this store (goodputd's: " CTL_DEFAULT_DB ")\nread-only, instead of asking goodputd",     \
			VERB_STRING, &arg.db, 0, 0                                                                     \
	}

/* The queries also read a store offline; `best` takes a model and engine
 * instead of a study; `trials` prints CSV. */
static const struct verb_option list_options[] = {
	DB_OPTION,
	VERB_OPTION_END,
};

static const struct verb_option best_options[] = {
	{ "model", 0, "NAME", "with --engine: the best finished study for this model", VERB_STRING, &arg.model },
	{ "engine", 0, "NAME", "engine profile name (vllm, sim, ...)", VERB_STRING, &arg.engine },
	{ "label", 0, "TEXT", "only studies with this workload/SLA label", VERB_STRING, &arg.label },
	DB_OPTION,
	VERB_OPTION_END,
};

static const struct verb_option trials_options[] = {
	DB_OPTION,
	{ "csv", 0, NULL, "print the trials as CSV (RFC 4180, a header line, the knobs as columns)", VERB_FLAG,
	  &arg.csv },
	VERB_OPTION_END,
};

/* What a client command asks goodputd. */
struct client_cmd {
	enum ctl_command command;
};

#define PERMISSION_NOTE                                                                                                \
	"Permission: submit, cancel, pause and resume need root, goodputd's user or\n"                                 \
	"membership in the group named by socket_group in /etc/goodput/goodputd.json.\n"

/* `best` takes a study, or a model and engine (and label). */
static bool best_args_valid(void)
{
	if (!arg.study && (!arg.model || !arg.engine)) {
		log_error("best: give a study name, or --model and --engine");
		return false;
	}
	if (arg.study && (arg.model || arg.engine || arg.label)) {
		log_error("best: give either a study name or --model/--engine/--label");
		return false;
	}
	return true;
}

/* Reads a spec from a file or stdin ("-"), at most STUDY_SPEC_MAX_BYTES. */
static int read_spec(const char *path, cJSON **ret, struct error *err)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;

	if (strcmp(path, "-") != 0)
		return json_parse_file(path, STUDY_SPEC_MAX_BYTES, ret, err);
	buf = malloc(STUDY_SPEC_MAX_BYTES + 1);
	if (!buf)
		return error_set(err, -ENOMEM, "out of memory");
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf + len, STUDY_SPEC_MAX_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return error_set(err, -errno, "stdin: %s", strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > STUDY_SPEC_MAX_BYTES)
			return error_set(err, -EFBIG, "stdin: larger than %d bytes", STUDY_SPEC_MAX_BYTES);
	}
	return json_parse_strict("stdin", buf, len, ret, err);
}

static int build_request(const struct client_cmd *c, cJSON **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *req = cJSON_CreateObject();
	int r;

	if (!req || json_add_string(req, "command", ctl_command_to_string(c->command)) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	if (c->command == CTL_SUBMIT) {
		cJSON *spec = NULL;

		r = read_spec(arg.study, &spec, err);
		if (r < 0)
			return r;
		if (!cJSON_AddItemToObject(req, "study", spec)) {
			cJSON_Delete(spec);
			return error_set(err, -ENOMEM, "out of memory");
		}
	} else if (arg.study && json_add_string(req, "study", arg.study) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	if ((arg.model && json_add_string(req, "model", arg.model) < 0) ||
	    (arg.engine && json_add_string(req, "engine", arg.engine) < 0) ||
	    (arg.label && json_add_string(req, "label", arg.label) < 0))
		return error_set(err, -ENOMEM, "out of memory");
	*ret = TAKE_PTR(req);
	return 0;
}

/* ---- readable output ---- */

static const char *str(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	return cJSON_IsString(v) ? v->valuestring : "-";
}

static double num(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void knobs_text(const cJSON *knobs, char *buf, size_t size)
{
	const cJSON *k;
	size_t n = 0;

	buf[0] = '\0';
	cJSON_ArrayForEach(k, knobs)
	{
		int w;

		if (cJSON_IsString(k))
			w = snprintf(buf + n, size - n, "%s%s=%s", n ? " " : "", k->string, k->valuestring);
		else
			w = snprintf(buf + n, size - n, "%s%s=%g", n ? " " : "", k->string, k->valuedouble);
		if (w < 0 || (size_t)w >= size - n)
			break;
		n += (size_t)w;
	}
}

static const char *money(char *buf, size_t size, double v)
{
	if (isnan(v))
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "$%.4f", v); /* as goodput tune and goodput report print it */
	return buf;
}

/* A string member, or "" when absent. */
static const char *opt_str(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* Every trial in flight, with its GPUs (when more than one runs, or one
 * is a job on a cluster: its job, and how long it has waited for its
 * resources, and why). */
static void print_in_flight(const cJSON *a)
{
	const cJSON *t;
	bool jobs = false;

	cJSON_ArrayForEach(t, a) jobs = jobs || cJSON_GetObjectItemCaseSensitive(t, "job_id");
	if (cJSON_GetArraySize(a) < 2 && !jobs)
		return;
	cJSON_ArrayForEach(t, a)
	{
		char job[160] = "";
		double pending = num(t, "pending_seconds");
		size_t len = 0;

		if (cJSON_GetObjectItemCaseSensitive(t, "job_id")) {
			len += (size_t)snprintf(job, sizeof(job), " (job %.0f", num(t, "job_id"));
			if (!isnan(pending) && len < sizeof(job))
				len += (size_t)snprintf(job + len, sizeof(job) - len, ", %s %.0f s",
							strcmp(str(t, "phase"), "queued") == 0 ? "pending" : "waited",
							pending);
			if (opt_str(t, "pending_reason")[0] && len < sizeof(job))
				len += (size_t)snprintf(job + len, sizeof(job) - len, ": %s",
							opt_str(t, "pending_reason"));
			if (len < sizeof(job))
				snprintf(job + len, sizeof(job) - len, ")");
		}
		printf("  %s %.0f on GPU %-8s %-13s %s%s\n",
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "sweep"))        ? "sweep  "
		       : cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "confirming")) ? "confirm"
											 : "trial  ",
		       num(t, "trial"), str(t, "gpus")[0] ? str(t, "gpus") : "-", str(t, "phase"), str(t, "knobs"),
		       job);
	}
}

/* Each watched endpoint: its drift from its study, the flag, the re-tune. */
static void print_watch(const cJSON *a)
{
	const cJSON *w;

	cJSON_ArrayForEach(w, a)
	{
		double drift = num(w, "drift"), rc = num(w, "rate_change"), rate = num(w, "rate");
		bool flagged = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "flagged"));

		printf("watch:   %s against %s: ", str(w, "metrics_url"), str(w, "study"));
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "up")))
			printf("DOWN (%s)", opt_str(w, "error")[0] ? opt_str(w, "error") : "no scrape yet");
		else if (isnan(drift))
			printf("collecting%s%s", opt_str(w, "study_error")[0] ? "; " : "", opt_str(w, "study_error"));
		else {
			printf("drift %.2f (input %.2f, output %.2f; threshold %.2f)", drift, num(w, "input_ks"),
			       num(w, "output_ks"), num(w, "threshold"));
			if (!isnan(rate))
				printf(", %.3g req/s", rate);
			if (!isnan(rc))
				printf(" (%+.0f%%)", rc * 100);
		}
		if (flagged)
			printf(", DRIFT FLAGGED%s%s", opt_str(w, "retune_study")[0] ? ": re-tune queued as " : "",
			       opt_str(w, "retune_study"));
		printf("\n");
	}
}

static void print_status(const cJSON *r)
{
	const cJSON *cur = cJSON_GetObjectItemCaseSensitive(r, "current");
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(r, "queue"), *e;
	char up[32], m[32];
	size_t n = 0;

	printf("goodputd %s (pid %.0f), up %s, %s%s\n", str(r, "version"), num(r, "pid"),
	       format_duration(up, sizeof(up), sec_to_usec(num(r, "uptime_seconds"))), str(r, "state"),
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "dry_run")) ? " (dry run)" : "");
	printf("status:  %s\n", str(r, "status"));
	if (cJSON_IsObject(cur)) {
		printf("study:   %s, %s, trial %.0f", str(cur, "study"), str(cur, "phase"), num(cur, "trial"));
		if (num(cur, "max_trials") > 0)
			printf("/%.0f", num(cur, "max_trials"));
		printf(" (%s)\n", str(cur, "knobs"));
		if (!isnan(num(cur, "best_cost_per_mtok")))
			printf("best:    %s/Mtok at %.0f tok/s (%s)\n",
			       money(m, sizeof(m), num(cur, "best_cost_per_mtok")), num(cur, "best_max_goodput"),
			       str(cur, "best_knobs"));
		if (!isnan(num(cur, "eta_seconds")))
			printf("ETA:     %s (the budget's trials at the pace so far)\n",
			       format_duration(up, sizeof(up), sec_to_usec(num(cur, "eta_seconds"))));
		if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cur, "report")))
			printf("report:  %s (rewritten after every trial)\n", str(cur, "report"));
		print_in_flight(cJSON_GetObjectItemCaseSensitive(cur, "trials"));
	}
	printf("queue:   ");
	cJSON_ArrayForEach(e, q)
	{
		printf("%s%s", n++ ? ", " : "", cJSON_IsString(e) ? e->valuestring : "?");
	}
	printf("%s\n", n ? "" : "(empty)");
	print_watch(cJSON_GetObjectItemCaseSensitive(r, "watch"));
}

static void print_list(const cJSON *r)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "studies"), *s;
	char m[32];

	printf("%-5s %-32s %-10s %-8s %-24s %-12s %s\n", "ID", "NAME", "STATE", "ENGINE", "MODEL", "BEST $/MTOK",
	       "CREATED");
	cJSON_ArrayForEach(s, a)
	{
		printf("%-5.0f %-32s %-10s %-8s %-24s %-12s %s\n", num(s, "id"), str(s, "name"), str(s, "state"),
		       str(s, "engine"), str(s, "model"), money(m, sizeof(m), num(s, "best_cost_per_mtok")),
		       str(s, "created"));
	}
	if (cJSON_GetArraySize(a) == 0)
		printf("(no studies)\n");
}

static void print_best(const cJSON *r)
{
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "study");
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "best");
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(r, "files");
	char k[512], m[32];

	knobs_text(cJSON_GetObjectItemCaseSensitive(b, "knobs"), k, sizeof(k));
	printf("study:    %s (%s%s)\n", str(st, "name"), str(st, "state"),
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "final")) ? "" : ", best so far");
	if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "engine_version")))
		printf("engine:   %s, version %s, model %s\n", str(st, "engine"), str(b, "engine_version"),
		       str(st, "model"));
	else
		printf("engine:   %s (version not recorded), model %s\n", str(st, "engine"), str(st, "model"));
	printf("knobs:    %s\n", k);
	printf("cost:     %s/Mtok", money(m, sizeof(m), num(b, "cost_per_mtok")));
	if (num(b, "measurements") > 1)
		printf(" (mean of %.0f measurements, spread %.1f%%)", num(b, "measurements"), num(b, "spread") * 100);
	printf("\n");
	printf("goodput:  %.1f tok/s at %.3g req/s", num(b, "max_goodput"), num(b, "max_rate"));
	if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(b, "offered_rate")))
		printf(" (%.3g sent)", num(b, "offered_rate"));
	printf("\n");
	if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "baseline")))
		printf("defaults: %s\n", str(b, "baseline"));
	if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(b, "edge")))
		printf("edge:     %s\n", str(cJSON_GetObjectItemCaseSensitive(b, "edge"), "note"));
	if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(b, "predicted_infeasible"))) {
		const cJSON *c;

		printf("not deployed (predicted not to fit):");
		cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(b, "predicted_infeasible"))
			printf(" %s", cJSON_IsString(c) ? c->valuestring : "?");
		printf("\n");
	}
	printf("trial:    %.0f (%s)\n", num(b, "seq"), str(b, "kind"));
	if (cJSON_IsObject(files))
		printf("files:    %s\n          %s\n          %s\n", str(files, "json"), str(files, "env"),
		       str(files, "command"));
}

static void print_trials(const cJSON *r)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "trials"), *t;
	char k[256], m[32];

	printf("%-4s %-14s %-11s %-9s %-10s %-10s %-56s %s\n", "SEQ", "KIND", "STATE", "RATE/S", "TOK/S", "$/MTOK",
	       "KNOBS", "FAILURE");
	cJSON_ArrayForEach(t, a)
	{
		knobs_text(cJSON_GetObjectItemCaseSensitive(t, "knobs"), k, sizeof(k));
		printf("%-4.0f %-14s %-11s %-9.3g %-10.1f %-10s %-56s %s\n", num(t, "seq"), str(t, "kind"),
		       str(t, "state"), num(t, "max_rate"), num(t, "max_goodput"),
		       money(m, sizeof(m), num(t, "cost_per_mtok")), k, str(t, "failure"));
	}
	if (cJSON_GetArraySize(a) == 0)
		printf("(no trials yet)\n");
}

/* The knob names of every trial, in the order they first appear. */
static size_t knob_names(const cJSON *trials, const char **names, size_t max)
{
	const cJSON *t, *k;
	size_t n = 0;

	cJSON_ArrayForEach(t, trials)
	{
		cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(t, "knobs"))
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

/* trials --csv: one line per trial, its knobs as columns. */
static void print_trials_csv(const cJSON *r)
{
	static const char *const head[] = { "seq", "kind", "state", "failure" };
	static const char *const tail[] = { "max_rate",       "max_goodput", "concurrency", "cost_per_mtok",
					    "deploy_seconds", "started",     "finished",    "failure_message" };
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "trials"), *t;
	const char *study = str(cJSON_GetObjectItemCaseSensitive(r, "study"), "name");
	const char *knobs[64];
	size_t n = knob_names(a, knobs, ELEMENTSOF(knobs));

	csv_text(stdout, true, "study");
	for (size_t i = 0; i < ELEMENTSOF(head); i++)
		csv_text(stdout, false, head[i]);
	for (size_t i = 0; i < n; i++)
		csv_text(stdout, false, knobs[i]);
	for (size_t i = 0; i < ELEMENTSOF(tail); i++)
		csv_text(stdout, false, tail[i]);
	csv_end(stdout);
	cJSON_ArrayForEach(t, a)
	{
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(t, "knobs");

		csv_text(stdout, true, study);
		for (size_t i = 0; i < ELEMENTSOF(head); i++)
			csv_json(stdout, false, cJSON_GetObjectItemCaseSensitive(t, head[i]));
		for (size_t i = 0; i < n; i++)
			csv_json(stdout, false, cJSON_GetObjectItemCaseSensitive(k, knobs[i]));
		for (size_t i = 0; i < ELEMENTSOF(tail); i++)
			csv_json(stdout, false, cJSON_GetObjectItemCaseSensitive(t, tail[i]));
		csv_end(stdout);
	}
}

static void print_change(const struct client_cmd *c, const cJSON *r)
{
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "study");
	const cJSON *note = cJSON_GetObjectItemCaseSensitive(r, "note");

	if (c->command == CTL_SUBMIT) {
		printf("submitted study %s (id %.0f), position %.0f in the queue\n", str(st, "name"), num(st, "id"),
		       num(r, "position"));
		return;
	}
	if (cJSON_IsObject(st))
		printf("study %s: %s", str(st, "name"), str(st, "state"));
	if (cJSON_IsString(note))
		printf("%s%s", cJSON_IsObject(st) ? " (" : "", note->valuestring);
	printf("%s\n", cJSON_IsObject(st) && cJSON_IsString(note) ? ")" : "");
}

/* Prints goodputd's answer as the command's table. */
static void print_answer(const struct client_cmd *c, const cJSON *resp)
{
	switch (c->command) {
	case CTL_STATUS:
		print_status(resp);
		break;
	case CTL_LIST:
		print_list(resp);
		break;
	case CTL_BEST:
		print_best(resp);
		break;
	case CTL_TRIALS:
		if (arg.csv)
			print_trials_csv(resp);
		else
			print_trials(resp);
		break;
	default:
		print_change(c, resp);
		break;
	}
}

/* The best files of a finished study beside the store (a state directory's
 * best/), when that folder exists; else NULL. */
static char *best_dir_of(const char *db)
{
	const char *slash = strrchr(db, '/');
	struct stat st;
	char *p = NULL;

	if (asprintf(&p, "%.*sbest", slash ? (int)(slash + 1 - db) : 0, db) < 0)
		return NULL;
	if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
		return p;
	free(p);
	return NULL;
}

/* The answer goodputd would give, from the store at arg.db opened read-only. */
static int answer_offline(const struct client_cmd *c, const cJSON *req, cJSON **ret, struct error *err)
{
	struct store_open_options so = { .flags = STORE_OPEN_READ_ONLY };
	_cleanup_(store_closep) struct store *s = NULL;
	_cleanup_(cjson_freep) char *line = cJSON_PrintUnformatted(req);
	_cleanup_(freep) char *best_dir = NULL;
	struct ctl_request parsed = { 0 };
	int r;

	if (!line)
		return error_set(err, -ENOMEM, "out of memory");
	/* the request as goodputd would read it: the same checks, the same struct */
	r = ctl_request_parse(line, strlen(line), &parsed, err);
	if (r >= 0)
		r = store_open(arg.db, &so, &s, err);
	if (r >= 0 && c->command == CTL_BEST)
		best_dir = best_dir_of(arg.db);
	if (r >= 0) {
		r = c->command == CTL_LIST   ? ctl_answer_list(s, &parsed, ret)
		    : c->command == CTL_BEST ? ctl_answer_best(s, &parsed, best_dir, ret)
					     : ctl_answer_trials(s, &parsed, ret);
		if (r < 0)
			error_set(err, r, "out of memory");
		else if (c->command == CTL_BEST)
			/* what goodputd adds: the defaults, the edge */
			r = report_best_findings(s, NULL, *ret, err);
	}
	ctl_request_done(&parsed);
	return r;
}

/* The answer from goodputd's socket. */
static int answer_online(const cJSON *req, cJSON **ret, struct error *err)
{
	_cleanup_(closep) int fd = -1;
	int r;

	if (!arg.socket) {
		const char *env = getenv("GOODPUT_SOCKET");

		arg.socket = env && *env ? env : CTL_DEFAULT_SOCKET;
	}
	r = ctl_client_connect(arg.socket, &fd, err);
	if (r >= 0)
		r = ctl_client_call(fd, req, arg.timeout_usec, ret, err);
	return r;
}

static int run(const struct verb *v, int argc, char **argv)
{
	_cleanup_(cJSON_Deletep) cJSON *req = NULL, *resp = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	const struct client_cmd *c = v->data;
	struct error err = { 0 };
	int r;

	arg.study = argc > 0 ? argv[0] : NULL;
	if (c->command == CTL_BEST && !best_args_valid())
		return CLI_EXIT_USAGE;
	if (arg.csv && arg.json) {
		log_error("%s: --csv and --json exclude each other (see 'goodput %s --help')", v->name, v->name);
		return CLI_EXIT_USAGE;
	}
	if (arg.db && arg.socket) {
		log_error("%s: --db and --socket exclude each other (see 'goodput %s --help')", v->name, v->name);
		return CLI_EXIT_USAGE;
	}
	r = build_request(c, &req, &err);
	if (r >= 0)
		r = arg.db ? answer_offline(c, req, &resp, &err) : answer_online(req, &resp, &err);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		return CLI_EXIT_FAILED;
	}
	if (arg.json && (text = cJSON_Print(resp)))
		printf("%s\n", text);
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "ok"))) {
		if (!arg.json)
			log_error("%s%s", arg.db ? "" : "goodputd: ", str(resp, "error"));
		/* a study that ended with nothing meeting the SLA is an answer, not an error */
		return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "no_feasible_config")) ? CLI_EXIT_SLA_NOT_MET
												  : CLI_EXIT_FAILED;
	}
	if (!arg.json)
		print_answer(c, resp);
	return CLI_EXIT_OK;
}

/* One client command: its verb and what it asks. */
#define CLIENT_VERB(id, arguments, min, max, opts, cmd, note, one_line, about_text)                                    \
	const struct verb verb_##id = { .name = #id,                                                                   \
					.summary = one_line,                                                           \
					.usage = "[OPTIONS] " arguments,                                               \
					.about = about_text,                                                           \
					.notes = note,                                                                 \
					.args = { arguments, min, max },                                               \
					.options = opts,                                                               \
					.shared_options = client_options,                                              \
					.run = run,                                                                    \
					.data = &(const struct client_cmd){ cmd } }

/* The queries, then the changes (which need privileges); a few lines each. */
/* clang-format off */
CLIENT_VERB(status, "", 0, 0, NULL, CTL_STATUS, NULL,
	    "what goodputd is doing: study, trial, best so far, queue",
	    "Show what goodputd is doing: the study and trial in flight, the best so far, the queue.");
CLIENT_VERB(list, "", 0, 0, list_options, CTL_LIST, NULL,
	    "the studies goodputd knows (or a store holds), with state and best $/Mtok",
	    "List every study goodputd knows, with its state and best $/Mtok; with --db, every\n"
	    "study of that store, read without a daemon.");
CLIENT_VERB(trials, "STUDY", 1, 1, trials_options, CTL_TRIALS, NULL,
	    "the trials of a study: knobs, outcome, $/Mtok (--csv for other tools)",
	    "List the trials of a study: knobs, outcome, $/Mtok; from goodputd, or with --db from\n"
	    "a store read without a daemon.");
CLIENT_VERB(best, "[STUDY]", 0, 1, best_options, CTL_BEST, NULL,
	    "the best configuration of a study, or for a model + engine",
	    "Show the best configuration of a study (its best so far while it runs), or with\n"
	    "--model and --engine the best finished study for that model and engine; from\n"
	    "goodputd, or with --db from a store read without a daemon.");
CLIENT_VERB(submit, "SPEC.json|-", 1, 1, NULL, CTL_SUBMIT, PERMISSION_NOTE,
	    "queue a study on goodputd (the service)",
	    "Queue a study (a study spec, see goodput-study(5)); goodputd runs the queue\n"
	    "one study at a time in submission order.");
CLIENT_VERB(pause, "[STUDY]", 0, 1, NULL, CTL_PAUSE, PERMISSION_NOTE,
	    "pause goodputd's study (the trial in flight is redone on resume)",
	    "Pause a study (default: the head of the queue). The trial in flight is torn down\n"
	    "and redone on resume; a paused study holds the queue.");
CLIENT_VERB(resume, "[STUDY]", 0, 1, NULL, CTL_RESUME, PERMISSION_NOTE, "resume a paused study on goodputd",
	    "Resume a paused study (default: the first paused one).");
CLIENT_VERB(cancel, "STUDY", 1, 1, NULL, CTL_CANCEL, PERMISSION_NOTE, "cancel a study on goodputd",
	    "Cancel a study (the trial in flight is torn down; the study is not resumed).");
/* clang-format on */
