/* commands.h — the commands of the `goodput` command line. Each lives in
 * its own file and describes itself as a struct verb (verbs.h): options,
 * arguments, help and what it does; it returns an exit status of
 * exit-status.h's table. goodput.c lists them. */
#pragma once

#include "verbs.h"

extern const struct verb verb_version;
/* cmd-check-engine.c: an engine profile against the installed engine's --help */
extern const struct verb verb_check_engine;
extern const struct verb verb_tune;
/* cmd-client.c: the daemon's client (goodputd's control socket) */
extern const struct verb verb_submit, verb_status, verb_list, verb_best, verb_trials, verb_cancel, verb_pause,
	verb_resume;
/* reports (report.h) */
extern const struct verb verb_report, verb_plan, verb_compare;
/* cmd-export.c: a study's trials and load points as JSON or CSV */
extern const struct verb verb_export;
/* cmd-workload.c: `goodput workload capture` */
extern const struct verb verb_workload;
/* cmd-job-exec.c: a trial's server inside a cluster job */
extern const struct verb verb_job_exec;
/* cmd-probe.c parses its own argv */
int cmd_probe(int argc, char **argv);
