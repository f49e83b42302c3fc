/* cmd-compare.c — `goodput compare STUDY_A STUDY_B`: the same workload and
 * SLA measured twice (before and after a driver, engine or hardware change):
 * each study's winner, the cost change, and whether A's best still meets the
 * SLA in B. The two studies may live in different stores (--db-b). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "cli-util.h"
#include "commands.h"
#include "exit-status.h"
#include "log.h"
#include "macro.h"
#include "report.h"
#include "store.h"

enum {
	ARG_DB = 256,
	ARG_DB_B,
	ARG_JSON,
};

static void help(void)
{
	printf("Usage: goodput compare [OPTIONS] STUDY_A STUDY_B\n"
	       "\n"
	       "Compares two studies of the same workload and SLA (A before, B after a change):\n"
	       "which configuration won in each, the cost change, and whether A's best\n"
	       "configuration still meets the SLA in B (looked up among B's trials).\n"
	       "\n"
	       "Options:\n"
	       "  --db FILE      the store (default ./goodput.db)\n"
	       "  --db-b FILE    the store of STUDY_B (default: the same)\n"
	       "  --json         print the comparison as JSON\n"
	       "  -h, --help     this text\n"
	       "\n" CLI_EXIT_STATUS_HELP);
}

int cmd_compare(int argc, char **argv)
{
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "db", required_argument, NULL, ARG_DB },
		{ "db-b", required_argument, NULL, ARG_DB_B },
		{ "json", no_argument, NULL, ARG_JSON },
		{ NULL, 0, NULL, 0 },
	};
	struct store_open_options so = { .flags = STORE_OPEN_READ_ONLY };
	_cleanup_(store_closep) struct store *sa = NULL, *sb = NULL;
	_cleanup_(report_freep) struct report *a = NULL, *b = NULL;
	const char *db = "goodput.db", *db_b = NULL;
	struct error err = { 0 };
	bool json = false;
	int c, q;

	optind = 0;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return 0;
		case ARG_DB:
			db = optarg;
			break;
		case ARG_DB_B:
			db_b = optarg;
			break;
		case ARG_JSON:
			json = true;
			break;
		default:
			log_error("see 'goodput compare --help'");
			return CLI_EXIT_USAGE;
		}
	}
	if (optind + 2 != argc) {
		log_error("expected two studies, STUDY_A and STUDY_B (see 'goodput compare --help')");
		return CLI_EXIT_USAGE;
	}
	q = store_open(db, &so, &sa, &err);
	if (q >= 0 && db_b)
		q = store_open(db_b, &so, &sb, &err);
	if (q >= 0)
		q = report_load(sa, argv[optind], NULL, &a, &err);
	if (q >= 0)
		q = report_load(sb ? sb : sa, argv[optind + 1], NULL, &b, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	if (json) {
		_cleanup_(cJSON_Deletep) cJSON *j = NULL;

		q = report_compare_json(a, b, &j);
		return cli_print_json(q, j);
	}
	report_compare_print(a, b, stdout, NULL);
	return 0;
}
