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

static struct {
	const char *binary, *engines_dir;
	uint64_t timeout_usec;
	bool json;
} arg = { .timeout_usec = 60 * USEC_PER_SEC };

static const struct verb_option options[] = {
	{ "binary", 0, "PATH",
	  "the engine's program (replaces the first word of the\nprofile's help and version commands)", VERB_STRING,
	  &arg.binary },
	{ "engines-dir", 0, "DIR", "look for profiles here first", VERB_STRING, &arg.engines_dir },
	{ "timeout", 0, "SECONDS", "for each command the check runs (default 60)", VERB_SECONDS, &arg.timeout_usec,
	  0.001, 3600 },
	{ "json", 0, NULL, "machine-readable result", VERB_FLAG, &arg.json },
	VERB_OPTION_END,
};

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

/* The engine's version: the last non-empty line of its version command's
 * output (banners come first), or NULL. The command may name another
 * program (python3 -c ...): it runs only when that one is here too. */
static char *engine_version(const struct engine_profile *p)
{
	_cleanup_(freep) char **argv = NULL;
	_cleanup_(freep) char *out = NULL;
	struct child_exit how;
	char v[256];

	if (!p->version_command)
		return NULL;
	argv = with_binary(p->version_command, arg.binary);
	if (!argv || child_find_program(argv[0], NULL) < 0 || run_capture(argv, arg.timeout_usec, &out, &how) < 0 ||
	    !child_exit_ok(&how))
		return NULL;
	/* as the profile reads it (llama.cpp's "4748 (c392e5094)", not its compiler line) */
	return engine_profile_parse_version(p, out, v, sizeof(v)) > 0 ? strdup(v) : NULL;
}

/* The engine's help text, or an error said to the user. */
static int engine_help(char *const *argv, char **ret)
{
	_cleanup_(freep) char *out = NULL;
	struct child_exit how;
	char text[64];
	int r;

	r = run_capture(argv, arg.timeout_usec, &out, &how);
	if (r == -ETIMEDOUT)
		return log_error_errno(r, "check-engine: %s %s did not finish within %.0f s", argv[0],
				       argv[1] ? argv[1] : "", usec_to_sec(arg.timeout_usec));
	if (r < 0)
		return log_error_errno(r, "check-engine: cannot run %s: %s", argv[0], strerror(-r));
	/* Some engines print their help and exit non-zero: only a short output is a failure. */
	if (how.code != CLD_EXITED || (how.status != 0 && strlen(out) < 40))
		return log_error_errno(-EIO, "check-engine: %s's help failed (%s): %s", argv[0],
				       child_exit_to_string(&how, text, sizeof(text)), out);
	*ret = TAKE_PTR(out);
	return 0;
}

/* Looks for each flag in the help, prints the verdict: the exit status. */
static int check_flags(const struct engine_profile *p, const char *program, const char *version,
		       const char *const *flags, const char *help_text)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	_cleanup_(cjson_freep) char *text = NULL;
	cJSON *present = cJSON_AddArrayToObject(j, "present"), *absent = cJSON_AddArrayToObject(j, "missing");
	size_t missing = 0, n = 0;

	if (!j || !present || !absent || json_add_string(j, "profile", p->name) < 0 ||
	    json_add_string(j, "program", program) < 0 || (version && json_add_string(j, "version", version) < 0))
		return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
	if (!arg.json)
		printf("%s: %s%s%s\n", p->name, program, version ? ", version " : "", version ? version : "");
	for (; flags[n]; n++) {
		bool ok = has_flag(help_text, flags[n]);
		cJSON *name = cJSON_CreateString(flags[n]);

		if (!name || !cJSON_AddItemToArray(ok ? present : absent, name)) {
			cJSON_Delete(name);
			return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
		}
		missing += !ok;
		if (!arg.json)
			printf("  %-40s %s\n", flags[n], ok ? "ok" : "MISSING from --help");
	}
	if (arg.json) {
		if (json_add_bool(j, "ok", missing == 0) < 0 || !(text = cJSON_Print(j)))
			return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
		printf("%s\n", text);
	} else if (missing)
		printf("%zu of %zu flags missing: the profile does not match this version of %s\n", missing, n,
		       p->name);
	else
		printf("all %zu flags found\n", n);
	return missing ? CLI_EXIT_FAILED : CLI_EXIT_OK;
}

static int run(const struct verb *v, int argc, char **argv)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(freep) const char **flags = NULL;
	_cleanup_(freep) char **help_argv = NULL;
	_cleanup_(freep) char *program = NULL, *version = NULL, *help_text = NULL;
	const char *default_help[3] = { NULL, "--help", NULL };
	struct error err = { 0 };
	int r;

	r = engine_profile_find(argv[0], arg.engines_dir, &p, &err);
	if (r < 0) {
		log_error("%s", err.msg);
		return CLI_EXIT_FAILED;
	}
	r = engine_profile_flags(p, &flags);
	if (r < 0)
		return log_error_errno(r, "out of memory"), CLI_EXIT_FAILED;
	default_help[0] = p->argv[0];
	help_argv = with_binary(p->help_command ? p->help_command : default_help, arg.binary);
	if (!help_argv)
		return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
	if (child_find_program(help_argv[0], &program) < 0) {
		fprintf(arg.json ? stderr : stdout,
			"check-engine: %s: %s is not installed here (not found%s); skipped. "
			"Use --binary PATH to name it.\n",
			p->name, help_argv[0], strchr(help_argv[0], '/') ? "" : " in $PATH");
		return CLI_EXIT_SKIPPED;
	}
	version = engine_version(p);
	if (engine_help(help_argv, &help_text) < 0)
		return CLI_EXIT_FAILED;
	return check_flags(p, program, version, flags, help_text);
}

/* The command: what its help says, then how it runs; a few lines. */
/* clang-format off */
const struct verb verb_check_engine = {
	.summary = "check an engine profile's flags against the installed engine's --help",
	.about = "Checks that every flag engine profile PROFILE (a name, see goodput-engine(5), or\n"
		 "a file) can put on a command line appears in the installed engine's --help.",
	.name = "check-engine", .usage = "[OPTIONS] PROFILE", .args = { "PROFILE", 1, 1 },
	.options = options, .run = run,
	.notes = "It fails (1) when flags are missing or the engine's help failed, and skips\n"
		 "(77) when the engine's program is not installed here.\n",
};
/* clang-format on */
