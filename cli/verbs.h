/* verbs.h — the commands of `goodput` as one table, in the spirit of
 * systemd's verbs.c.
 *
 * Each command file describes its command once: its name, one-line summary
 * and usage, how many positional arguments it takes, and a table of its
 * options — each with the variable it sets and how its value is read (a
 * flag, a string, a number in a range, or the command's own function) and
 * the line --help shows for it. verbs.c then does what every command used
 * to write out: finds the command, parses the options with getopt_long,
 * prints --help (usage, description, the options from the table, notes and
 * the exit-status table every command shares), refuses an unknown option, a
 * bad value or a wrong number of arguments with a usage error that points
 * at --help, and calls the command with its positional arguments only. A
 * command that parses its own argv (probe) sets `main` instead. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

#define VERB_ANY UINT_MAX

/* parse's "done": the option did all there was to do (printed a
 * reference); goodput exits with 0. */
#define VERB_DONE 1

enum verb_option_type {
	VERB_FLAG,    /* bool *: set */
	VERB_STRING,  /* const char **: the value */
	VERB_U32,     /* uint32_t *: an integer in [min, max] */
	VERB_DOUBLE,  /* double *: a number in [min, max] */
	VERB_SECONDS, /* uint64_t * µs: seconds in [min, max] */
	VERB_CALL,    /* the command's parse(id, value, err) */
};

struct verb_option {
	const char *name; /* "db" for --db */
	char short_name;  /* 'q' for -q, or 0 */
	/* The value's name in --help ("FILE"); NULL: it takes none; in
	 * brackets ("[NAME]"): it may be left out. */
	const char *value;
	const char *help; /* what it does; '\n' continues on an indented line */
	enum verb_option_type type;
	void *target;    /* what it sets; VERB_CALL: an id for parse (as intptr_t) */
	double min, max; /* numbers */
};

#define VERB_OPTION_END                                                                                                \
	{                                                                                                              \
		NULL, 0, NULL, NULL, 0, NULL, 0, 0                                                                     \
	}

struct verb {
	const char *name;
	const char *summary; /* one line for `goodput --help` */
	const char *usage;   /* what follows "Usage: goodput NAME "; '\n' starts another usage line */
	const char *about;   /* the description paragraph of --help */
	const char *notes;   /* after the options (may be NULL) */
	struct {
		const char *name; /* as usage errors name them ("STUDY") */
		unsigned min, max;
	} args; /* the positional arguments */
	/* Its options, each table ending with VERB_OPTION_END: its own, then a
	 * table several commands share; either may be NULL. */
	const struct verb_option *options, *shared_options;
	/* A VERB_CALL option: 0, VERB_DONE, or a negative errno with err set. */
	int (*parse)(intptr_t id, const char *value, struct error *err);
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
/* The command's --help, without the exit-status table. */
void verb_help(const struct verb *v, FILE *f);
