/* cli-util.h — small pieces several commands share: loading a study's
 * report from the store, printing a JSON answer, an event loop that stops
 * on a signal. They log what went wrong; the caller turns it into the exit
 * code. */
#pragma once

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "report.h"
#include "store.h"

/* Opens the store at db read-only and loads study (name or id) from it.
 * Logs the error and returns a negative errno on failure; on success the
 * caller owns *ret_store and *ret_report. ro may be NULL. */
int cli_load_report(const char *db, const char *study, const struct report_options *ro, struct store **ret_store,
		    struct report **ret_report);

/* A new event loop that hands SIGINT and SIGTERM to handler (blocked, so
 * that only the loop sees them), with SIGPIPE ignored: for commands that
 * stop gracefully on a signal. Logs what failed. */
int cli_event_new(sd_event_signal_handler_t handler, void *userdata, sd_event **ret);

/* Prints j, indented, and a newline on stdout. q is the result of building
 * j: when it is negative, or printing fails, logs "out of memory". Returns
 * the exit code: 0 printed, 1 not. */
int cli_print_json(int q, const cJSON *j);
