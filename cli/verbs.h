/* verbs.h — the commands of `goodput` as one table, in the spirit of
 * systemd's verbs.c.
 *
 * Each command file describes its command once: its name and one-line
 * summary, how many positional arguments it takes (and how its help names
 * them), its options and a function that takes one option's value. verbs.c
 * then does what every command used to write out: finds the command, runs
 * getopt_long over its options, answers --help (the command's text, then
 * the exit-status table every command shares), refuses an unknown option or
 * a wrong number of arguments with a usage error that points at --help, and
 * calls the command with its positional arguments only. A command that
 * parses its own argv (probe) sets `main` instead. */
#pragma once

#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "error.h"

#define VERB_ANY UINT_MAX

/* parse_option's "done": the option did all there was to do (printed a
 * reference); goodput exits with 0. */
#define VERB_DONE 1

struct verb {
	const char *name;
	const char *summary; /* one line for `goodput --help` */
	const char *args;    /* the positional arguments as usage errors name them ("STUDY", "[STUDY]") */
	unsigned min_args, max_args;
	const struct option *options; /* getopt_long's table, NULL-terminated, without --help; may be NULL */
	const char *short_options;    /* besides -h; may be NULL */
	/* One option and its value (NULL when it takes none): 0, VERB_DONE, or a
	 * negative errno with err saying what was wrong (a usage error). */
	int (*parse_option)(int opt, const char *value, struct error *err);
	/* The command's --help text on f, up to the exit-status table. */
	void (*help)(const struct verb *v, FILE *f);
	/* The command with its positional arguments; returns the exit status. */
	int (*run)(const struct verb *v, int argc, char **argv);
	/* Instead of all of the above but name and summary: a command that
	 * parses its own argv (argv[0] is its name). */
	int (*main)(int argc, char **argv);
	const void *data; /* the command's own (the client's request) */
};

/* Runs the command argv[0] names among verbs (n of them): the exit status. */
int verb_dispatch(const struct verb *const *verbs, size_t n, int argc, char **argv);
/* The commands and their summaries, for `goodput --help`. */
void verbs_list(const struct verb *const *verbs, size_t n, FILE *f);
