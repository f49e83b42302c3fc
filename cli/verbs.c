/* verbs.c — finding a command, parsing its options (from its table) and
 * arguments, its --help, and the usage errors every command gives the same
 * way (see verbs.h). */
#include "verbs.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "exit-status.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "time-util.h"

#define MAX_OPTIONS  64
#define OPTION_FIRST 256 /* getopt_long's value of option i is OPTION_FIRST + i */
#define HELP_COLUMN  23

static const struct verb_option help_option = { "help", 'h', NULL, "this text", VERB_FLAG, NULL, 0, 0 };

void verbs_list(const struct verb *const *verbs, size_t n, FILE *f)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-13s %s\n", verbs[i]->name, verbs[i]->summary);
}

/* The i-th of the command's options (its own, then the shared ones), or NULL. */
static const struct verb_option *option_at(const struct verb *v, size_t i)
{
	const struct verb_option *tables[] = { v->options, v->shared_options };

	for (size_t t = 0; t < ELEMENTSOF(tables); t++) {
		size_t n = 0;

		while (tables[t] && tables[t][n].name)
			n++;
		if (i < n)
			return &tables[t][i];
		i -= n;
	}
	return NULL;
}

/* ---- --help ---- */

/* "  -q, --quiet", "  --db FILE": the option's left column. */
static int option_words(const struct verb_option *o, char *buf, size_t size)
{
	char shortname[8] = "";

	if (o->short_name)
		snprintf(shortname, sizeof(shortname), "-%c, ", o->short_name);
	return snprintf(buf, size, "  %s--%s%s%s", shortname, o->name, o->value ? " " : "", o->value ? o->value : "");
}

/* text with each line after the first indented to the help column. */
static void print_indented(FILE *f, const char *text)
{
	for (const char *nl; (nl = strchr(text, '\n')); text = nl + 1)
		fprintf(f, "%.*s\n%*s", (int)(nl - text), text, HELP_COLUMN, "");
	fprintf(f, "%s\n", text);
}

static void print_option(FILE *f, const struct verb_option *o)
{
	char words[96];
	int n = option_words(o, words, sizeof(words));

	if (n < HELP_COLUMN - 1)
		fprintf(f, "%-*s", HELP_COLUMN, words);
	else
		fprintf(f, "%s\n%*s", words, HELP_COLUMN, "");
	print_indented(f, o->help);
}

void verb_help(const struct verb *v, FILE *f)
{
	fputs("Usage: ", f);
	for (const char *u = v->usage ? v->usage : "", *nl;; u = nl + 1) {
		nl = strchr(u, '\n');
		fprintf(f, "goodput %s%s%.*s\n", v->name, *u ? " " : "", nl ? (int)(nl - u) : (int)strlen(u), u);
		if (!nl)
			break;
		fputs("       ", f);
	}
	fprintf(f, "\n%s\n\nOptions:\n", v->about);
	for (size_t i = 0; option_at(v, i); i++)
		print_option(f, option_at(v, i));
	print_option(f, &help_option);
	if (v->notes)
		fprintf(f, "\n%s", v->notes);
	fprintf(f, "\nThe manual: goodput(1).\n");
}

/* ---- options ---- */

/* getopt_long's tables for the command's options and --help. */
static int getopt_tables(const struct verb *v, struct option *longs, char *shorts, size_t shorts_size)
{
	const struct verb_option *o;
	size_t n = 0, s = 0;

	for (; (o = option_at(v, n)); n++) {
		int has_arg = !o->value ? no_argument : o->value[0] == '[' ? optional_argument : required_argument;

		if (n + 2 > MAX_OPTIONS || s + 4 > shorts_size)
			return -E2BIG;
		longs[n] = (struct option){ o->name, has_arg, NULL, OPTION_FIRST + (int)n };
		if (o->short_name) {
			shorts[s++] = o->short_name;
			if (has_arg != no_argument)
				shorts[s++] = ':';
			if (has_arg == optional_argument)
				shorts[s++] = ':';
		}
	}
	longs[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	longs[n] = (struct option){ 0 };
	shorts[s++] = 'h';
	shorts[s] = 0;
	return 0;
}

/* The option getopt_long returned opt for (a long one, or a short name). */
static const struct verb_option *find_option(const struct verb *v, int opt)
{
	const struct verb_option *o;

	for (size_t i = 0; (o = option_at(v, i)); i++)
		if (opt == OPTION_FIRST + (int)i || opt == o->short_name)
			return o;
	return NULL;
}

/* Sets the option's variable from its value: 0, VERB_DONE or a negative errno. */
static int set_option(const struct verb *v, const struct verb_option *o, const char *value, struct error *err)
{
	char what[64];
	double d;
	int r;

	snprintf(what, sizeof(what), "--%s", o->name);
	switch (o->type) {
	case VERB_FLAG:
		*(bool *)o->target = true;
		return 0;
	case VERB_STRING:
		*(const char **)o->target = value;
		return 0;
	case VERB_U32:
		return parse_u32(what, value, (uint32_t)o->min, (uint32_t)o->max, o->target, err);
	case VERB_DOUBLE:
		return parse_double(what, value, o->min, o->max, o->target, err);
	case VERB_SECONDS:
		r = parse_double(what, value, o->min, o->max, &d, err);
		if (r >= 0)
			*(uint64_t *)o->target = sec_to_usec(d);
		return r;
	case VERB_CALL:
		return v->parse((intptr_t)o->target, value, err);
	}
	return -EINVAL;
}

/* Parses the options (optind is then the first positional argument).
 * Returns false when the command ends here, with *ret_status. */
static bool parse_options(const struct verb *v, int argc, char **argv, int *ret_status)
{
	struct option longs[MAX_OPTIONS];
	struct error err = { 0 };
	const struct verb_option *o;
	char shorts[3 * MAX_OPTIONS];
	int opt, r;

	r = getopt_tables(v, longs, shorts, sizeof(shorts));
	if (r < 0) {
		log_error_errno(r, "%s: too many options", v->name);
		*ret_status = CLI_EXIT_FAILED;
		return false;
	}
	optind = 0;
	while ((opt = getopt_long(argc, argv, shorts, longs, NULL)) >= 0) {
		if (opt == 'h') {
			verb_help(v, stdout);
			printf("\n" CLI_EXIT_STATUS_HELP);
			*ret_status = CLI_EXIT_OK;
			return false;
		}
		o = find_option(v, opt);
		r = o ? set_option(v, o, optarg, &err) : -EINVAL;
		if (r < 0 || r == VERB_DONE) {
			/* getopt_long has said what was wrong with an unknown option */
			if (r < 0 && o)
				log_error("%s", error_str(&err, r));
			else if (r < 0)
				log_error("see 'goodput %s --help'", v->name);
			*ret_status = r < 0 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
			return false;
		}
	}
	return true;
}

/* ---- commands ---- */

static int run(const struct verb *v, int argc, char **argv)
{
	unsigned n;
	int status;

	if (!parse_options(v, argc, argv, &status))
		return status;
	n = (unsigned)(argc - optind);
	if (n < v->args.min) {
		log_error("%s: missing %s (see 'goodput %s --help')", v->name, v->args.name, v->name);
		return CLI_EXIT_USAGE;
	}
	if (n > v->args.max) {
		log_error("%s: unexpected argument '%s' (see 'goodput %s --help')", v->name, argv[optind + v->args.max],
			  v->name);
		return CLI_EXIT_USAGE;
	}
	return v->run(v, (int)n, argv + optind);
}

int verb_dispatch(const struct verb *const *verbs, size_t n, int argc, char **argv)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(argv[0], verbs[i]->name) != 0)
			continue;
		if (verbs[i]->main)
			return verbs[i]->main(argc, argv);
		return run(verbs[i], argc, argv);
	}
	log_error("unknown command '%s' (see 'goodput --help')", argv[0]);
	return CLI_EXIT_USAGE;
}
