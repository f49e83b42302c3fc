/* goodput.c — the `goodput` command line: global options, then one of the
 * commands (`goodput probe ...`, `goodput tune ...`), found and started by
 * the verbs table (verbs.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "exit-status.h"
#include "log.h"
#include "macro.h"

static const struct verb verb_probe = {
	.name = "probe",
	.summary = "benchmark an OpenAI-compatible server (vllm bench serve's flags), find its max rate",
	.main = cmd_probe,
};

static const struct verb *const verbs[] = {
	&verb_version, &verb_check_engine, &verb_probe,  &verb_workload, &verb_tune,   &verb_report,
	&verb_plan,    &verb_compare,      &verb_export, &verb_submit,   &verb_status, &verb_list,
	&verb_best,    &verb_trials,       &verb_cancel, &verb_pause,    &verb_resume, &verb_job_exec,
};

static void help(FILE *f)
{
	fprintf(f, "Usage: goodput [--help] [--version] [-v|--verbose] [--socket PATH] COMMAND [ARGS...]\n"
		   "\n"
		   "goodput finds the serving configuration of an LLM inference server with the\n"
		   "lowest cost per million tokens under a latency SLA. --socket PATH before the\n"
		   "command names goodputd's control socket for the commands that ask it (as\n"
		   "$GOODPUT_SOCKET does).\n"
		   "\n"
		   "Commands:\n");
	verbs_list(verbs, ELEMENTSOF(verbs), f);
	fprintf(f, "\nRun 'goodput COMMAND --help' for a command's options; the manual is "
		   "goodput(1).\n\n" CLI_EXIT_STATUS_HELP);
}

int main(int argc, char **argv)
{
	int i = 1;

	log_set_program("goodput");
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			help(stdout);
			return CLI_EXIT_OK;
		} else if (strcmp(argv[i], "--version") == 0) {
			/* the same as `goodput version`, stray arguments included */
			argv[i] = (char *)"version";
			return verb_dispatch(verbs, ELEMENTSOF(verbs), argc - i, argv + i);
		} else if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0) {
			log_set_max_level(LOG_DEBUG);
		} else if (strcmp(argv[i], "--socket") == 0 || strncmp(argv[i], "--socket=", 9) == 0) {
			const char *path = argv[i][8] == '=' ? argv[i] + 9 : i + 1 < argc ? argv[++i] : NULL;

			if (!path || !*path) {
				log_error("--socket needs a PATH (see 'goodput --help')");
				return CLI_EXIT_USAGE;
			}
			/* the client commands read it as they read the environment's */
			if (setenv("GOODPUT_SOCKET", path, 1) < 0) {
				log_error("out of memory");
				return CLI_EXIT_FAILED;
			}
		} else {
			log_error("unknown option '%s' (see 'goodput --help')", argv[i]);
			return CLI_EXIT_USAGE;
		}
	}
	if (i >= argc) {
		help(stderr);
		return CLI_EXIT_USAGE;
	}
	return verb_dispatch(verbs, ELEMENTSOF(verbs), argc - i, argv + i);
}
