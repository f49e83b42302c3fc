/* cmd-plan.c — `goodput plan STUDY --rate R | --tokens-per-second T`: how
 * many replicas and GPUs of the study's best configuration serve that load
 * under the SLA, and what they cost per hour (report-plan.c has the
 * arithmetic). */
#include <errno.h>
#include <getopt.h>
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

static void help(void)
{
	printf("Usage: goodput plan [OPTIONS] STUDY (--rate R | --tokens-per-second T)\n"
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
	       "  -h, --help               this text\n"
	       "\n" CLI_EXIT_STATUS_HELP);
}

int cmd_plan(int argc, char **argv)
{
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "db", required_argument, NULL, ARG_DB },
		{ "rate", required_argument, NULL, ARG_RATE },
		{ "tokens-per-second", required_argument, NULL, ARG_TPS },
		{ "headroom", required_argument, NULL, ARG_HEADROOM },
		{ "json", no_argument, NULL, ARG_JSON },
		{ NULL, 0, NULL, 0 },
	};
	_cleanup_(store_closep) struct store *s = NULL;
	_cleanup_(report_freep) struct report *r = NULL;
	const char *db = "goodput.db";
	double load = 0, headroom = 0.2;
	int kinds = 0, c, q;
	bool by_tokens = false, json = false;
	struct report_plan plan;
	struct error err = { 0 };

	optind = 0;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return 0;
		case ARG_DB:
			db = optarg;
			break;
		case ARG_RATE:
		case ARG_TPS:
			q = parse_double(c == ARG_RATE ? "--rate" : "--tokens-per-second", optarg, 1e-9, 1e12, &load,
					 &err);
			if (q < 0) {
				log_error("%s", error_str(&err, q));
				return CLI_EXIT_USAGE;
			}
			by_tokens = c == ARG_TPS;
			kinds++;
			break;
		case ARG_HEADROOM:
			q = parse_double("--headroom", optarg, 0, 10, &headroom, &err);
			if (q < 0) {
				log_error("%s", error_str(&err, q));
				return CLI_EXIT_USAGE;
			}
			break;
		case ARG_JSON:
			json = true;
			break;
		default:
			log_error("see 'goodput plan --help'");
			return CLI_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		log_error("expected one STUDY (name or id) (see 'goodput plan --help')");
		return CLI_EXIT_USAGE;
	}
	if (kinds != 1) {
		log_error("give exactly one of --rate and --tokens-per-second");
		return CLI_EXIT_USAGE;
	}
	if (cli_load_report(db, argv[optind], NULL, &s, &r) < 0)
		return CLI_EXIT_FAILED;
	q = report_plan_study(r, load, by_tokens, headroom, &plan, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	if (json) {
		_cleanup_(cJSON_Deletep) cJSON *j = NULL;

		q = report_plan_to_json(r, &plan, &j);
		return cli_print_json(q, j);
	}
	report_plan_print(r, &plan, stdout);
	return 0;
}
