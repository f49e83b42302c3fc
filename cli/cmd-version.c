/* cmd-version.c — `goodput version`: goodput's version and the versions of
 * the libraries it was built with and runs with (a report states them). */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>
#include <nlopt.h>
#include <sqlite3.h>

#include "commands.h"
#include "exit-status.h"
#include "config.h"
#include "macro.h"

int cmd_version(int argc, char **argv)
{
	int major, minor, bugfix;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("Usage: goodput version\n\nPrints goodput's version and its libraries' "
		       "versions.\n\n" CLI_EXIT_STATUS_HELP);
		return 0;
	}
	nlopt_version(&major, &minor, &bugfix);
	printf("goodput %s\n", GOODPUT_VERSION);
	printf("  libcurl %s\n", curl_version_info(CURLVERSION_NOW)->version);
	printf("  cJSON %s\n", cJSON_Version());
	printf("  NLopt %d.%d.%d\n", major, minor, bugfix);
	printf("  SQLite %s\n", sqlite3_libversion());
	return 0;
}
