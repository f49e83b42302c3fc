/* cli-util.c — what several commands do the same way: open the store
 * read-only and load one study's report, logging the error a user sees;
 * print a JSON answer or say that memory ran out; set up an event loop that
 * stops on SIGINT and SIGTERM. */
#include "cli-util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>

#include "exit-status.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"

int cli_load_report(const char *db, const char *study, const struct report_options *ro, struct store **ret_store,
		    struct report **ret_report)
{
	struct store_open_options so = { .flags = STORE_OPEN_READ_ONLY };
	_cleanup_(store_closep) struct store *s = NULL;
	_cleanup_(report_freep) struct report *r = NULL;
	struct error err = { 0 };
	int q;

	q = store_open(db, &so, &s, &err);
	if (q >= 0)
		q = report_load(s, study, ro, &r, &err);
	if (q < 0) {
		log_error("%s", error_str(&err, q));
		return q;
	}
	*ret_store = TAKE_PTR(s);
	*ret_report = TAKE_PTR(r);
	return 0;
}

int cli_print_json(int q, const cJSON *j)
{
	_cleanup_(cjson_freep) char *text = NULL;

	if (q >= 0)
		text = cJSON_Print(j);
	if (!text)
		return log_error_errno(ENOMEM, "out of memory"), CLI_EXIT_FAILED;
	printf("%s\n", text);
	return 0;
}

int cli_event_new(sd_event_signal_handler_t handler, void *userdata, sd_event **ret)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	sigset_t mask;
	int r;

	r = sd_event_new(&e);
	if (r < 0)
		return log_error_errno(r, "cannot create the event loop");
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return log_error_errno(-errno, "cannot block signals");
	signal(SIGPIPE, SIG_IGN);
	r = sd_event_add_signal(e, NULL, SIGINT, handler, userdata);
	if (r >= 0)
		r = sd_event_add_signal(e, NULL, SIGTERM, handler, userdata);
	if (r < 0)
		return log_error_errno(r, "cannot watch signals");
	*ret = TAKE_PTR(e);
	return 0;
}
