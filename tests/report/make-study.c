/* make-study.c — writes the report tests' synthetic studies (report-fixture.h)
 * into a new store: `make-study DB`. Used by the integration tests of
 * `goodput report`, `plan` and `compare`. */
#include <stdio.h>

#include "macro.h"
#include "report-fixture.h"
#include "store.h"
#include "tests.h"

int main(int argc, char **argv)
{
	_cleanup_(store_closep) struct store *s = NULL;
	struct error err = { 0 };

	if (argc != 2) {
		fprintf(stderr, "usage: make-study DB\n");
		return 2;
	}
	CHECK_MSG(store_open(argv[1], NULL, &s, &err) >= 0, "%s", err.msg);
	fix_fill(s);
	fix_fill_clustered(s);
	return 0;
}
