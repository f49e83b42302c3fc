/* commands.h — the subcommands of the `goodput` command line. Each lives in
 * its own file as `int cmd_<name>(int argc, char **argv)`, argv[0] being the
 * subcommand's name; it returns the process exit code, one of exit-status.h's
 * table, and prints that table in its --help. goodput.c lists them in its
 * dispatch table. */
#pragma once

int cmd_version(int argc, char **argv);
/* cmd-check-engine.c: an engine profile against the installed engine's --help */
int cmd_check_engine(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_tune(int argc, char **argv);
/* cmd-client.c: the daemon's client (goodputd's control socket) */
int cmd_submit(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_best(int argc, char **argv);
int cmd_trials(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
/* reports (report.h) */
int cmd_report(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_compare(int argc, char **argv);
