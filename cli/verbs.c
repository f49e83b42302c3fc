/* verbs.c — finding a command, parsing its options and arguments, and the
 * errors every command gives the same way (see verbs.h). */
#include "verbs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "exit-status.h"
#include "log.h"
#include "macro.h"

#define MAX_OPTIONS 64

void verbs_list(const struct verb *const *verbs, size_t n, FILE *f)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-13s %s\n", verbs[i]->name, verbs[i]->summary);
}

static void help(const struct verb *v)
{
	v->help(v, stdout);
	printf("\n" CLI_EXIT_STATUS_HELP);
}

/* The command's options with --help added. */
static int option_table(const struct verb *v, struct option *table, char *shorts, size_t shorts_size)
{
	size_t n = 0;

	for (; v->options && v->options[n].name; n++) {
		if (n + 2 > MAX_OPTIONS)
			return -E2BIG;
		table[n] = v->options[n];
	}
	table[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	table[n] = (struct option){ 0 };
	snprintf(shorts, shorts_size, "h%s", v->short_options ? v->short_options : "");
	return 0;
}

/* Parses the options (optind is then the first positional argument).
 * Returns false when the command ends here, with *ret_status. */
static bool parse_options(const struct verb *v, int argc, char **argv, int *ret_status)
{
	struct option table[MAX_OPTIONS];
	struct error err = { 0 };
	char shorts[32];
	int opt, r;

	r = option_table(v, table, shorts, sizeof(shorts));
	if (r < 0) {
		log_error_errno(r, "%s: too many options", v->name);
		*ret_status = CLI_EXIT_FAILED;
		return false;
	}
	optind = 0;
	while ((opt = getopt_long(argc, argv, shorts, table, NULL)) >= 0) {
		if (opt == 'h') {
			help(v);
			*ret_status = CLI_EXIT_OK;
			return false;
		}
		r = opt == '?' || opt == ':' ? -EINVAL : v->parse_option(opt, optarg, &err);
		if (r < 0) {
			/* getopt_long said what was wrong with an unknown option itself */
			if (opt == '?' || opt == ':')
				log_error("see 'goodput %s --help'", v->name);
			else
				log_error("%s", error_str(&err, r));
			*ret_status = CLI_EXIT_USAGE;
			return false;
		}
		if (r == VERB_DONE) {
			*ret_status = CLI_EXIT_OK;
			return false;
		}
	}
	return true;
}

static int run(const struct verb *v, int argc, char **argv)
{
	unsigned n;
	int status;

	if (!parse_options(v, argc, argv, &status))
		return status;
	n = (unsigned)(argc - optind);
	if (n < v->min_args) {
		log_error("%s: missing %s (see 'goodput %s --help')", v->name, v->args, v->name);
		return CLI_EXIT_USAGE;
	}
	if (n > v->max_args) {
		log_error("%s: unexpected argument '%s' (see 'goodput %s --help')", v->name, argv[optind + v->max_args],
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
