/* cmd-version.c — `goodput version`: goodput's version and the versions of
 * the libraries it was built with and runs with (a report states them). */
#include <stdio.h>

#include <curl/curl.h>
#include <nlopt.h>
#include <sqlite3.h>

#include "commands.h"
#include "config.h"
#include "exit-status.h"
#include "macro.h"

static int run(const struct verb *v, int argc, char **argv)
{
	int major, minor, bugfix;

	nlopt_version(&major, &minor, &bugfix);
	printf("goodput %s\n", GOODPUT_VERSION);
	printf("  libcurl %s\n", curl_version_info(CURLVERSION_NOW)->version);
	printf("  cJSON %s\n", cJSON_Version());
	printf("  NLopt %d.%d.%d\n", major, minor, bugfix);
	printf("  SQLite %s\n", sqlite3_libversion());
	return CLI_EXIT_OK;
}

/* The command: what its help says, then how it runs; a few lines. */
/* clang-format off */
const struct verb verb_version = {
	.summary = "print the version of goodput and of the libraries it uses",
	.about = "Prints goodput's version and its libraries' versions.",
	.name = "version", .usage = "",
	.run = run,
};
/* clang-format on */
