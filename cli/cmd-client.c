/* cmd-client.c — `goodput submit|status|list|best|trials|cancel|pause|resume`:
 * the daemon's client. Each command sends one request line to goodputd's
 * control socket (protocol.h), waits for the answer and prints it as a
 * readable table, or as the daemon's JSON object with --json. Exit codes: 0
 * ok, 1 the daemon refused or is not running, 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "exit-status.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "protocol.h"
#include "study.h"
#include "time-util.h"

struct client_args {
	const char *socket;
	bool json;
	uint64_t timeout_usec;
	const char *model, *engine, *label; /* best */
	const char *arg;                    /* the positional argument, if any */
};

enum {
	ARG_SOCKET = 256,
	ARG_JSON,
	ARG_TIMEOUT,
	ARG_MODEL,
	ARG_ENGINE,
	ARG_LABEL,
};

struct client_cmd {
	const char *name;
	enum ctl_command command;
	const char *args; /* usage of the positional argument */
	bool arg_required, arg_allowed, best_options;
	const char *summary; /* what it does, for --help */
};

static const struct client_cmd client_cmds[] = {
	{ "submit", CTL_SUBMIT, "SPEC.json|-", true, true, false,
	  "Queue a study (a study spec, see 'goodput tune --help-spec'); goodputd runs the queue\n"
	  "one study at a time in submission order." },
	{ "status", CTL_STATUS, "", false, false, false,
	  "Show what goodputd is doing: the study and trial in flight, the best so far, the queue." },
	{ "list", CTL_LIST, "", false, false, false,
	  "List every study goodputd knows, with its state and best $/Mtok." },
	{ "best", CTL_BEST, "[STUDY]", false, true, true,
	  "Show the best configuration of a study (its best so far while it runs), or with\n"
	  "--model and --engine the best finished study for that model and engine." },
	{ "trials", CTL_TRIALS, "STUDY", true, true, false, "List the trials of a study: knobs, outcome, $/Mtok." },
	{ "cancel", CTL_CANCEL, "STUDY", true, true, false,
	  "Cancel a study (the trial in flight is torn down; the study is not resumed)." },
	{ "pause", CTL_PAUSE, "[STUDY]", false, true, false,
	  "Pause a study (default: the head of the queue). The trial in flight is torn down\n"
	  "and redone on resume; a paused study holds the queue." },
	{ "resume", CTL_RESUME, "[STUDY]", false, true, false,
	  "Resume a paused study (default: the first paused one)." },
};

static void help(const struct client_cmd *c)
{
	printf("Usage: goodput %s [OPTIONS] %s\n\n%s\n\n", c->name, c->args, c->summary);
	if (c->best_options)
		printf("  --model NAME      with --engine: the best finished study for this model\n"
		       "  --engine NAME     engine profile name (vllm, sim, ...)\n"
		       "  --label TEXT      only studies with this workload/SLA label\n");
	printf("  --socket PATH     goodputd's control socket (default $GOODPUT_SOCKET, else %s)\n"
	       "  --json            print the daemon's answer as JSON\n"
	       "  --timeout SEC     give up waiting for an answer after SEC seconds (default 30)\n"
	       "  -h, --help        this help\n",
	       CTL_DEFAULT_SOCKET);
	if (c->command == CTL_SUBMIT)
		printf("\nPermission: submit, cancel, pause and resume need root, goodputd's user or\n"
		       "membership in the group named by socket_group in /etc/goodput/goodputd.json.\n");
	printf("\n" CLI_EXIT_STATUS_HELP);
}

static int parse_args(const struct client_cmd *c, int argc, char **argv, struct client_args *a)
{
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "socket", required_argument, NULL, ARG_SOCKET },
		{ "json", no_argument, NULL, ARG_JSON },
		{ "timeout", required_argument, NULL, ARG_TIMEOUT },
		{ "model", required_argument, NULL, ARG_MODEL },
		{ "engine", required_argument, NULL, ARG_ENGINE },
		{ "label", required_argument, NULL, ARG_LABEL },
		{ NULL, 0, NULL, 0 },
	};
	struct error err = { 0 };
	double t;
	int o, r;

	a->socket = getenv("GOODPUT_SOCKET");
	if (!a->socket || !*a->socket)
		a->socket = CTL_DEFAULT_SOCKET;
	a->timeout_usec = 30 * USEC_PER_SEC;
	optind = 1;
	while ((o = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (o) {
		case 'h':
			help(c);
			return 0;
		case ARG_SOCKET:
			a->socket = optarg;
			break;
		case ARG_JSON:
			a->json = true;
			break;
		case ARG_TIMEOUT:
			r = parse_double("--timeout", optarg, 0.001, 86400, &t, &err);
			if (r < 0) {
				log_error("%s", error_str(&err, r));
				return -2;
			}
			a->timeout_usec = sec_to_usec(t);
			break;
		case ARG_MODEL:
		case ARG_ENGINE:
		case ARG_LABEL:
			if (!c->best_options) {
				log_error("%s: %s is only for 'goodput best'", c->name, argv[optind - 1]);
				return -2;
			}
			*(o == ARG_MODEL ? &a->model : o == ARG_ENGINE ? &a->engine : &a->label) = optarg;
			break;
		default:
			return -2;
		}
	}
	if (optind < argc && c->arg_allowed)
		a->arg = argv[optind++];
	if (optind < argc) {
		log_error("%s: unexpected argument '%s' (see 'goodput %s --help')", c->name, argv[optind], c->name);
		return -2;
	}
	if (c->arg_required && !a->arg) {
		log_error("%s: missing %s (see 'goodput %s --help')", c->name, c->args, c->name);
		return -2;
	}
	if (c->best_options && !a->arg && (!a->model || !a->engine)) {
		log_error("best: give a study name, or --model and --engine");
		return -2;
	}
	if (c->best_options && a->arg && (a->model || a->engine || a->label)) {
		log_error("best: give either a study name or --model/--engine/--label");
		return -2;
	}
	return 1;
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

static int build_request(const struct client_cmd *c, const struct client_args *a, cJSON **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *req = cJSON_CreateObject();
	int r;

	if (!req || json_add_string(req, "command", ctl_command_to_string(c->command)) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	if (c->command == CTL_SUBMIT) {
		cJSON *spec = NULL;

		r = read_spec(a->arg, &spec, err);
		if (r < 0)
			return r;
		if (!cJSON_AddItemToObject(req, "study", spec)) {
			cJSON_Delete(spec);
			return error_set(err, -ENOMEM, "out of memory");
		}
	} else if (a->arg && json_add_string(req, "study", a->arg) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	if ((a->model && json_add_string(req, "model", a->model) < 0) ||
	    (a->engine && json_add_string(req, "engine", a->engine) < 0) ||
	    (a->label && json_add_string(req, "label", a->label) < 0))
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
	}
	printf("queue:   ");
	cJSON_ArrayForEach(e, q)
	{
		printf("%s%s", n++ ? ", " : "", cJSON_IsString(e) ? e->valuestring : "?");
	}
	printf("%s\n", n ? "" : "(empty)");
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
	printf("engine:   %s, model %s\n", str(st, "engine"), str(st, "model"));
	printf("knobs:    %s\n", k);
	printf("cost:     %s/Mtok", money(m, sizeof(m), num(b, "cost_per_mtok")));
	if (num(b, "measurements") > 1)
		printf(" (mean of %.0f measurements, spread %.1f%%)", num(b, "measurements"), num(b, "spread") * 100);
	printf("\n");
	printf("goodput:  %.1f tok/s at %.3g req/s\n", num(b, "max_goodput"), num(b, "max_rate"));
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

static int run_client(const char *name, int argc, char **argv)
{
	_cleanup_(cJSON_Deletep) cJSON *req = NULL, *resp = NULL;
	const struct client_cmd *c = NULL;
	struct client_args a = { 0 };
	_cleanup_(closep) int fd = -1;
	struct error err = { 0 };
	int r;

	for (size_t i = 0; i < ELEMENTSOF(client_cmds); i++)
		if (strcmp(client_cmds[i].name, name) == 0)
			c = &client_cmds[i];
	if (!c)
		return CLI_EXIT_USAGE;
	r = parse_args(c, argc, argv, &a);
	if (r <= 0)
		return r == 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
	r = build_request(c, &a, &req, &err);
	if (r >= 0)
		r = ctl_client_connect(a.socket, &fd, &err);
	if (r >= 0)
		r = ctl_client_call(fd, req, a.timeout_usec, &resp, &err);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		return CLI_EXIT_FAILED;
	}
	if (a.json) {
		_cleanup_(cjson_freep) char *s = cJSON_Print(resp);

		if (s)
			printf("%s\n", s);
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "ok"))) {
		if (!a.json)
			log_error("goodputd: %s", str(resp, "error"));
		return CLI_EXIT_FAILED;
	}
	if (a.json)
		return 0;
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
		print_trials(resp);
		break;
	default:
		print_change(c, resp);
		break;
	}
	return 0;
}

int cmd_submit(int argc, char **argv)
{
	return run_client("submit", argc, argv);
}

int cmd_status(int argc, char **argv)
{
	return run_client("status", argc, argv);
}

int cmd_list(int argc, char **argv)
{
	return run_client("list", argc, argv);
}

int cmd_best(int argc, char **argv)
{
	return run_client("best", argc, argv);
}

int cmd_trials(int argc, char **argv)
{
	return run_client("trials", argc, argv);
}

int cmd_cancel(int argc, char **argv)
{
	return run_client("cancel", argc, argv);
}

int cmd_pause(int argc, char **argv)
{
	return run_client("pause", argc, argv);
}

int cmd_resume(int argc, char **argv)
{
	return run_client("resume", argc, argv);
}
