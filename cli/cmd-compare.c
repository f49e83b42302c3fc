/* cmd-compare.c — `goodput compare STUDY_A STUDY_B`: the same workload and
 * SLA measured twice (before and after a driver, engine or hardware change):
 * each study's winner, the cost change, and whether A's best still meets the
 * SLA in B. The two studies may live in different stores (--db-b). */
#include <errno.h>
#include <stdio.h>

#include "cli-util.h"
#include "commands.h"
#include "exit-status.h"
#include "log.h"
#include "macro.h"
#include "report.h"
#include "store.h"

static struct {
	const char *db, *db_b;
	bool json;
} arg = { .db = "goodput.db" };

static const struct verb_option options[] = {
	{ "db", 0, "FILE", "the store (default ./goodput.db)", VERB_STRING, &arg.db },
	{ "db-b", 0, "FILE", "the store of STUDY_B (default: the same)", VERB_STRING, &arg.db_b },
	{ "json", 0, NULL, "print the comparison as JSON", VERB_FLAG, &arg.json },
	VERB_OPTION_END,
};

static int run(const struct verb *v, int argc, char **argv)
{
	struct store_open_options so = { .flags = STORE_OPEN_READ_ONLY };
	_cleanup_(store_closep) struct store *sa = NULL, *sb = NULL;
	_cleanup_(report_freep) struct report *a = NULL, *b = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct error err = { 0 };
	int q;

	q = store_open(arg.db, &so, &sa, &err);
	if (q >= 0 && arg.db_b)
		q = store_open(arg.db_b, &so, &sb, &err);
	if (q >= 0)
		q = report_load(sa, argv[0], NULL, &a, &err);
	if (q >= 0)
		q = report_load(sb ? sb : sa, argv[1], NULL, &b, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	if (!arg.json) {
		report_compare_print(a, b, stdout, NULL);
		return CLI_EXIT_OK;
	}
	q = report_compare_json(a, b, &j);
	return cli_print_json(q, j);
}

/* The command: what its help says, then how it runs; a few lines. */
/* clang-format off */
const struct verb verb_compare = {
	.summary = "compare two studies of the same workload and SLA (before/after a change)",
	.about = "Compares two studies of the same workload and SLA (A before, B after a change):\n"
		 "which configuration won in each, the cost change, and whether A's best\n"
		 "configuration still meets the SLA in B (looked up among B's trials).",
	.name = "compare", .usage = "[OPTIONS] STUDY_A STUDY_B", .args = { "STUDY_A and STUDY_B", 2, 2 },
	.options = options, .run = run,
};
/* clang-format on */
