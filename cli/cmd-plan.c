/* cmd-plan.c — `goodput plan STUDY --rate R | --tokens-per-second T`: how
 * many replicas and GPUs of the study's best configuration serve that load
 * under the SLA, and what they cost per hour (report-plan.c has the
 * arithmetic). */
#include <errno.h>
#include <stdio.h>

#include "cli-util.h"
#include "commands.h"
#include "exit-status.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "report.h"
#include "store.h"

enum {
	ARG_DB = 256,
	ARG_RATE,
	ARG_TPS,
	ARG_HEADROOM,
	ARG_JSON,
};

static const struct option options[] = {
	{ "db", required_argument, NULL, ARG_DB },
	{ "rate", required_argument, NULL, ARG_RATE },
	{ "tokens-per-second", required_argument, NULL, ARG_TPS },
	{ "headroom", required_argument, NULL, ARG_HEADROOM },
	{ "json", no_argument, NULL, ARG_JSON },
	{ NULL, 0, NULL, 0 },
};

static struct {
	const char *db;
	double load, headroom;
	unsigned loads; /* how many of --rate and --tokens-per-second were given */
	bool by_tokens, json;
} arg = { .db = "goodput.db", .headroom = 0.2 };

static void help(const struct verb *v, FILE *f)
{
	fprintf(f, "Usage: goodput plan [OPTIONS] STUDY (--rate R | --tokens-per-second T)\n"
		   "\n"
		   "Sizes a deployment of the study's best configuration for a load: replicas =\n"
		   "ceil(load x (1 + headroom) / what one replica serves under the SLA), GPUs =\n"
		   "replicas x GPUs per replica, $/hour = GPUs x price per GPU-hour.\n"
		   "\n"
		   "Options:\n"
		   "  --rate R                 requests/s to serve\n"
		   "  --tokens-per-second T    tokens/s to serve (counted as the study counts cost)\n"
		   "  --headroom F             spare capacity on top of the load (default 0.2 = 20%%)\n"
		   "  --db FILE                the store (default ./goodput.db)\n"
		   "  --json                   print the plan as JSON\n"
		   "  -h, --help               this text\n");
}

static int parse_option(int opt, const char *value, struct error *err)
{
	switch (opt) {
	case ARG_DB:
		arg.db = value;
		return 0;
	case ARG_RATE:
	case ARG_TPS:
		arg.by_tokens = opt == ARG_TPS;
		arg.loads++;
		return parse_double(arg.by_tokens ? "--tokens-per-second" : "--rate", value, 1e-9, 1e12, &arg.load,
				    err);
	case ARG_HEADROOM:
		return parse_double("--headroom", value, 0, 10, &arg.headroom, err);
	case ARG_JSON:
		arg.json = true;
		return 0;
	}
	return 0;
}

static int run(const struct verb *v, int argc, char **argv)
{
	_cleanup_(store_closep) struct store *s = NULL;
	_cleanup_(report_freep) struct report *r = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct report_plan plan;
	struct error err = { 0 };
	int q;

	if (arg.loads != 1) {
		log_error("give exactly one of --rate and --tokens-per-second");
		return CLI_EXIT_USAGE;
	}
	if (cli_load_report(arg.db, argv[0], NULL, &s, &r) < 0)
		return CLI_EXIT_FAILED;
	q = report_plan_study(r, arg.load, arg.by_tokens, arg.headroom, &plan, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	if (!arg.json) {
		report_plan_print(r, &plan, stdout);
		return CLI_EXIT_OK;
	}
	q = report_plan_to_json(r, &plan, &j);
	return cli_print_json(q, j);
}

const struct verb verb_plan = {
	.name = "plan",
	.summary = "replicas, GPUs and $/hour to serve a load with a study's best configuration",
	.args = "STUDY (name or id)",
	.min_args = 1,
	.max_args = 1,
	.options = options,
	.parse_option = parse_option,
	.help = help,
	.run = run,
};
