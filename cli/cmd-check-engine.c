/* cmd-check-engine.c — `goodput check-engine PROFILE`: checks an engine
 * profile against the engine installed here.
 *
 * A profile names the engine's flags from its documentation; engines rename
 * flags between releases (vLLM's, SGLang's and TensorRT-LLM's have), and a
 * study that starts a server with a flag the installed version lacks fails
 * every trial. This command runs the engine's own help (the profile's
 * help_command, or `argv[0] --help`) as an argv — no shell — with a timeout,
 * and checks that every flag the profile can emit appears in it as a whole
 * word. It exits 0 when all are there, 1 when some are missing (listed), 2 on
 * a usage error and 77 ("skipped", the test convention) when the engine's
 * program is not installed here: absence is a fact to report, not a failure
 * of the profile. The engine's version (version_command) is printed too. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "commands.h"
#include "exit-status.h"
#include "engine-profile.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "time-util.h"

#define HELP_MAX_BYTES (4 * 1024 * 1024)

static void help(FILE *f)
{
	fprintf(f, "Usage: goodput check-engine [OPTIONS] PROFILE\n"
		   "\n"
		   "Checks that every flag engine profile PROFILE (a name in configs/engines or a\n"
		   "file) can put on a command line appears in the installed engine's --help.\n"
		   "\n"
		   "  --binary PATH        the engine's program (replaces the first word of the\n"
		   "                       profile's help and version commands)\n"
		   "  --engines-dir DIR    look for profiles here first\n"
		   "  --timeout SECONDS    for each command the check runs (default 60)\n"
		   "  --json               machine-readable result\n"
		   "  -h, --help           this text\n"
		   "\n"
		   "It fails (1) when flags are missing or the engine's help failed, and skips\n"
		   "(77) when the engine's program is not installed here.\n"
		   "\n" CLI_EXIT_STATUS_HELP);
}

/* Runs argv (no shell) in its own process group with stdout and stderr into
 * one buffer, killing the group after the timeout. */
static int run_capture(char *const *argv, uint64_t timeout_usec, char **ret_out, struct child_exit *ret_exit)
{
	struct child_options o = {
		.argv = argv,
		.output = CHILD_OUTPUT_CAPTURE,
		.capture_max = HELP_MAX_BYTES,
		.timeout_usec = timeout_usec,
	};
	_cleanup_(freep) char *out = NULL;
	struct child_exit how;
	int r;

	r = child_run(&o, &how, &out);
	if (r < 0)
		return r;
	if (how.timed_out)
		return -ETIMEDOUT;
	*ret_out = TAKE_PTR(out);
	*ret_exit = how;
	return 0;
}

static bool is_word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Whether flag appears in text as a whole word ("--port" not inside "--port-range"). */
static bool has_flag(const char *text, const char *flag)
{
	size_t n = strlen(flag);

	for (const char *p = strstr(text, flag); p; p = strstr(p + 1, flag)) {
		bool left = p == text || !is_word_char(p[-1]);
		bool right = !is_word_char(p[n]);

		if (left && right)
			return true;
	}
	return false;
}

/* argv with argv[0] replaced by binary (when set), NULL-terminated; the array is the caller's. */
static char **with_binary(const char *const *argv, const char *binary)
{
	size_t n = 0;
	char **v;

	while (argv[n])
		n++;
	v = calloc(n + 1, sizeof(char *));
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		v[i] = (char *)argv[i];
	if (binary)
		v[0] = (char *)binary;
	return v;
}

int cmd_check_engine(int argc, char **argv)
{
	static const struct option options[] = {
		{ "binary", required_argument, NULL, 'b' },  { "engines-dir", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 't' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 },
	};
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(freep) const char **flags = NULL;
	_cleanup_(freep) char **help_argv = NULL, **version_argv = NULL;
	_cleanup_(freep) char *out = NULL, *version = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	const char *binary = NULL, *engines_dir = NULL;
	const char *default_help[3] = { NULL, "--help", NULL };
	uint64_t timeout_usec = 60 * USEC_PER_SEC;
	struct error err = { 0 };
	bool json = false;
	_cleanup_(freep) char *path = NULL;
	size_t missing = 0, n_flags = 0;
	struct child_exit status;
	int c, r;

	optind = 0;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'b':
			binary = optarg;
			break;
		case 'd':
			engines_dir = optarg;
			break;
		case 't': {
			double sec;
			if (parse_double("--timeout", optarg, 0.001, 3600, &sec, &err) < 0) {
				log_error("%s", err.msg);
				return CLI_EXIT_USAGE;
			}
			timeout_usec = sec_to_usec(sec);
			break;
		}
		case 'j':
			json = true;
			break;
		case 'h':
			help(stdout);
			return 0;
		default:
			return CLI_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		help(stderr);
		return CLI_EXIT_USAGE;
	}
	r = engine_profile_find(argv[optind], engines_dir, &p, &err);
	if (r < 0) {
		log_error("%s", err.msg);
		return CLI_EXIT_FAILED;
	}
	r = engine_profile_flags(p, &flags);
	if (r < 0)
		return log_error_errno(r, "out of memory"), CLI_EXIT_FAILED;
	default_help[0] = p->argv[0];
	help_argv = with_binary(p->help_command ? p->help_command : default_help, binary);
	if (!help_argv)
		return CLI_EXIT_FAILED;
	if (child_find_program(help_argv[0], &path) < 0) {
		fprintf(json ? stderr : stdout,
			"check-engine: %s: %s is not installed here (not found%s%s); skipped. "
			"Use --binary PATH to name it.\n",
			p->name, help_argv[0], strchr(help_argv[0], '/') ? "" : " in $PATH", "");
		return CLI_EXIT_SKIPPED;
	}
	if (p->version_command) {
		_cleanup_(freep) char *vout = NULL;
		struct child_exit vexit;

		version_argv = with_binary(p->version_command, binary);
		/* The version command may name another program (python3 -c ...): only
		 * run it when that one is here too. */
		if (version_argv && child_find_program(version_argv[0], NULL) >= 0 &&
		    run_capture(version_argv, timeout_usec, &vout, &vexit) == 0 && child_exit_ok(&vexit)) {
			char *nl;
			/* the last non-empty line: banners come first */
			while ((nl = strrchr(vout, '\n')) && nl[1] == 0)
				*nl = 0;
			nl = strrchr(vout, '\n');
			version = strdup(nl ? nl + 1 : vout);
		}
	}
	r = run_capture(help_argv, timeout_usec, &out, &status);
	if (r == -ETIMEDOUT) {
		log_error("check-engine: %s %s did not finish within %.0f s", help_argv[0],
			  help_argv[1] ? help_argv[1] : "", usec_to_sec(timeout_usec));
		return CLI_EXIT_FAILED;
	}
	if (r < 0) {
		log_error("check-engine: cannot run %s: %s", help_argv[0], strerror(-r));
		return CLI_EXIT_FAILED;
	}
	if (status.code != CLD_EXITED || (status.status != 0 && strlen(out) < 40)) {
		char how[64];

		log_error("check-engine: %s's help failed (%s): %s", help_argv[0],
			  child_exit_to_string(&status, how, sizeof(how)), out);
		return CLI_EXIT_FAILED;
	}

	j = cJSON_CreateObject();
	cJSON *present = cJSON_AddArrayToObject(j, "present"), *absent = cJSON_AddArrayToObject(j, "missing");
	if (!j || !present || !absent || json_add_string(j, "profile", p->name) < 0 ||
	    json_add_string(j, "program", path) < 0 || (version && json_add_string(j, "version", version) < 0))
		return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
	if (!json)
		printf("%s: %s%s%s\n", p->name, path, version ? ", version " : "", version ? version : "");
	for (size_t i = 0; flags[i]; i++, n_flags++) {
		bool ok = has_flag(out, flags[i]);
		cJSON *s = cJSON_CreateString(flags[i]);

		if (!s || !cJSON_AddItemToArray(ok ? present : absent, s)) {
			cJSON_Delete(s);
			return CLI_EXIT_FAILED;
		}
		if (!ok)
			missing++;
		if (!json)
			printf("  %-40s %s\n", flags[i], ok ? "ok" : "MISSING from --help");
	}
	if (json) {
		_cleanup_(cjson_freep) char *s = NULL;

		if (json_add_bool(j, "ok", missing == 0) < 0)
			return CLI_EXIT_FAILED;
		s = cJSON_Print(j);
		if (!s)
			return CLI_EXIT_FAILED;
		printf("%s\n", s);
	} else if (missing)
		printf("%zu of %zu flags missing: the profile does not match this version of %s\n", missing, n_flags,
		       p->name);
	else
		printf("all %zu flags found\n", n_flags);
	return missing ? CLI_EXIT_FAILED : CLI_EXIT_OK;
}
