/* goodput.c — the `goodput` command line: global options, then dispatch to a
 * subcommand (`goodput probe ...`, `goodput tune ...`). Each subcommand parses
 * its own flags and prints its own --help. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "exit-status.h"
#include "config.h"
#include "log.h"
#include "macro.h"

struct command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
	{ "version", "print the version of goodput and of the libraries it uses", cmd_version },
	{ "check-engine", "check an engine profile's flags against the installed engine's --help", cmd_check_engine },
	{ "probe", "benchmark an OpenAI-compatible server (vllm bench serve's flags), find its max rate", cmd_probe },
	{ "tune", "run a tuning study in the foreground: the configuration with the lowest $/Mtok", cmd_tune },
	{ "report", "write a study's benchmark report (HTML with plots, Markdown)", cmd_report },
	{ "plan", "replicas, GPUs and $/hour to serve a load with a study's best configuration", cmd_plan },
	{ "compare", "compare two studies of the same workload and SLA (before/after a change)", cmd_compare },
	{ "submit", "queue a study on goodputd (the service)", cmd_submit },
	{ "status", "what goodputd is doing: study, trial, best so far, queue", cmd_status },
	{ "list", "the studies goodputd knows, with state and best $/Mtok", cmd_list },
	{ "best", "the best configuration of a study, or for a model + engine", cmd_best },
	{ "trials", "the trials of a study on goodputd", cmd_trials },
	{ "cancel", "cancel a study on goodputd", cmd_cancel },
	{ "pause", "pause goodputd's study (the trial in flight is redone on resume)", cmd_pause },
	{ "resume", "resume a paused study on goodputd", cmd_resume },
};

static void help(FILE *f)
{
	fprintf(f, "Usage: goodput [--help] [--version] [-v|--verbose] COMMAND [ARGS...]\n"
		   "\n"
		   "goodput finds the serving configuration of an LLM inference server with the\n"
		   "lowest cost per million tokens under a latency SLA.\n"
		   "\n"
		   "Commands:\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nRun 'goodput COMMAND --help' for a command's options.\n\n" CLI_EXIT_STATUS_HELP);
}

int main(int argc, char **argv)
{
	int i = 1;

	log_set_program("goodput");
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			help(stdout);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			return cmd_version(1, argv + i);
		} else if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0) {
			log_set_max_level(LOG_DEBUG);
		} else {
			log_error("unknown option '%s' (see 'goodput --help')", argv[i]);
			return CLI_EXIT_USAGE;
		}
	}
	if (i >= argc) {
		help(stderr);
		return CLI_EXIT_USAGE;
	}
	for (size_t c = 0; c < ELEMENTSOF(commands); c++)
		if (strcmp(argv[i], commands[c].name) == 0)
			return commands[c].run(argc - i, argv + i);
	log_error("unknown command '%s' (see 'goodput --help')", argv[i]);
	return CLI_EXIT_USAGE;
}
