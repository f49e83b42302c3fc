/* exit-status.h — the one table of exit codes every `goodput` command
 * returns, and the paragraph each command's --help prints about them.
 *
 * A script that runs any command can tell the outcomes apart by number
 * alone: a usage error is never confused with a server that failed, and a
 * search that ran fine but found nothing meeting the SLA is neither. Codes
 * a command cannot produce are still listed, so the table reads the same
 * everywhere. */
#pragma once

enum {
	CLI_EXIT_OK = 0,            /* done, as asked */
	CLI_EXIT_FAILED = 1,        /* errors: unreachable server, every request failed, bad file, ... */
	CLI_EXIT_USAGE = 2,         /* unknown flag, bad value, missing argument */
	CLI_EXIT_SLA_NOT_MET = 3,   /* ran fine, but nothing met the SLA */
	CLI_EXIT_SKIPPED = 77,      /* check-engine: the engine is not installed here */
	CLI_EXIT_INTERRUPTED = 130, /* SIGINT/SIGTERM */
};

/* The paragraph for --help (ends with a newline). */
#define CLI_EXIT_STATUS_HELP                                                                                           \
	"Exit status (the same for every goodput command):\n"                                                          \
	"  0    ok\n"                                                                                                  \
	"  1    failed: errors, the server unreachable, every request failed\n"                                        \
	"  2    usage error\n"                                                                                         \
	"  3    nothing met the SLA (probe --find-max-rate; a study that ended no_feasible_config: tune, best)\n"      \
	"  77   skipped: the engine is not installed (check-engine)\n"                                                 \
	"  130  stopped by SIGINT or SIGTERM\n"
