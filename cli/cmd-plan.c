/* cmd-plan.c — `goodput plan STUDY --rate R | --tokens-per-second T |
 * --rate-profile FILE`: how many replicas and GPUs of the study's best
 * configuration serve that load under the SLA, and what they cost per hour
 * — or, for a day's rate profile, each hour and the day, with the runner-up
 * where it is cheaper (report-plan.c and report-plan-day.c have the
 * arithmetic). */
#include <errno.h>
#include <stdio.h>

#include "cli-util.h"
#include "commands.h"
#include "exit-status.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "json-util.h"
#include "report.h"
#include "store.h"
#include "workload-json.h"

static struct {
	const char *db, *rate_profile;
	double load, headroom;
	unsigned loads; /* how many of --rate and --tokens-per-second were given */
	bool by_tokens, json;
} arg = { .db = "goodput.db", .headroom = 0.2 };

enum {
	LOAD_RATE,
	LOAD_TOKENS,
};

static int parse_load(intptr_t id, const char *value, struct error *err)
{
	arg.by_tokens = id == LOAD_TOKENS;
	arg.loads++;
	return parse_double(arg.by_tokens ? "--tokens-per-second" : "--rate", value, 1e-9, 1e12, &arg.load, err);
}

static const struct verb_option options[] = {
	{ "rate", 0, "R", "requests/s to serve", VERB_CALL, (void *)LOAD_RATE },
	{ "tokens-per-second", 0, "T", "tokens/s to serve (counted as the study counts cost)", VERB_CALL,
	  (void *)LOAD_TOKENS },
	{ "rate-profile", 0, "FILE",
	  "the rate over the day: what `goodput workload capture` wrote (its\nrate per hour), a block with "
	  "rate_profile, or [[\"HH:MM\", req/s], ...]",
	  VERB_STRING, &arg.rate_profile },
	{ "headroom", 0, "F", "spare capacity on top of the load (default 0.2 = 20%)", VERB_DOUBLE, &arg.headroom, 0,
	  10 },
	{ "db", 0, "FILE", "the store (default ./goodput.db)", VERB_STRING, &arg.db },
	{ "json", 0, NULL, "print the plan as JSON", VERB_FLAG, &arg.json },
	VERB_OPTION_END,
};

static int plan_day(struct report *r)
{
	_cleanup_(cJSON_Deletep) cJSON *doc = NULL, *j = NULL;
	struct probe_rate_profile profile;
	struct report_plan_day day;
	struct error err = { 0 };
	int q;

	q = json_parse_file(arg.rate_profile, 1u << 20, &doc, &err);
	if (q >= 0)
		q = probe_rate_profile_from_json(doc, &profile, &err);
	if (q < 0) {
		log_error("--rate-profile %s: %s", arg.rate_profile, error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	q = report_plan_day_study(r, &profile, arg.headroom, &day, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	if (arg.json) {
		q = report_plan_day_to_json(r, &day, &j);
		return cli_print_json(q, j);
	}
	report_plan_day_print(r, &day, stdout);
	return CLI_EXIT_OK;
}

static int run(const struct verb *v, int argc, char **argv)
{
	_cleanup_(store_closep) struct store *s = NULL;
	_cleanup_(report_freep) struct report *r = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct report_plan plan;
	struct error err = { 0 };
	int q;

	if (arg.loads + !!arg.rate_profile != 1) {
		log_error("give exactly one of --rate, --tokens-per-second and --rate-profile");
		return CLI_EXIT_USAGE;
	}
	if (cli_load_report(arg.db, argv[0], NULL, &s, &r) < 0)
		return CLI_EXIT_FAILED;
	if (arg.rate_profile)
		return plan_day(r);
	q = report_plan_study(r, arg.load, arg.by_tokens, arg.headroom, &plan, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return CLI_EXIT_FAILED;
	}
	if (arg.json) {
		q = report_plan_to_json(r, &plan, &j);
		return cli_print_json(q, j);
	}
	report_plan_print(r, &plan, stdout);
	return CLI_EXIT_OK;
}

/* The command: what its help says, then how it runs; a few lines. */
/* clang-format off */
const struct verb verb_plan = {
	.summary = "replicas, GPUs and $/hour to serve a load with a study's best configuration",
	.about = "Sizes a deployment of the study's best configuration for a load: replicas =\n"
		 "ceil(load x (1 + headroom) / what one replica serves under the SLA), GPUs =\n"
		 "replicas x GPUs per replica, $/hour = GPUs x price per GPU-hour.\n"
		 "\n"
		 "With --rate-profile, every hour of the day is sized for the profile's highest\n"
		 "rate in it, with the best configuration and with the runner-up: the day's cost\n"
		 "with the best, and with the runner-up in the hours it is cheaper (a replica of\n"
		 "fewer GPUs wastes less of a quiet hour).",
	.name = "plan", .usage = "[OPTIONS] STUDY (--rate R | --tokens-per-second T | --rate-profile FILE)",
	.args = { "STUDY (name or id)", 1, 1 },
	.options = options, .parse = parse_load, .run = run,
};
/* clang-format on */
