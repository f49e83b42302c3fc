/* protocol.h — the JSON-lines protocol of goodputd's control socket, shared
 * by the daemon (control.c, daemon-handlers.c) and the `goodput` client
 * (cmd-client.c). daemon/PROTOCOL.md is the reference for people.
 *
 * One JSON object per line in each direction. A request names a command:
 *
 *   {"command": "submit", "study": {...spec...}}
 *   {"command": "status"}                       {"command": "list"}
 *   {"command": "best", "study": "NAME"}        {"command": "best", "model": M, "engine": E, "label": L}
 *   {"command": "trials", "study": "NAME"}      {"command": "cancel", "study": "NAME"}
 *   {"command": "pause"[, "study": "NAME"]}     {"command": "resume"[, "study": "NAME"]}
 *   {"command": "report", "study": "NAME"[, "html": true]}
 *
 * An optional "id" (number or string) is echoed in the response, so a client
 * may pipeline requests. Responses are {"ok": true, ...} or
 * {"ok": false, "error": "message"}. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "macro.h"

struct store_study;
struct store_trial;
struct store_study_best;

#define CTL_DEFAULT_SOCKET "/run/goodputd.sock"
/* goodputd's database in its default state directory. */
#define CTL_DEFAULT_DB "/var/lib/goodputd/goodput.db"
/* A request line (a submitted spec is the largest) and a response line. */
#define CTL_REQUEST_MAX_DEFAULT ((size_t)1024 * 1024)
#define CTL_RESPONSE_MAX        ((size_t)64 * 1024 * 1024)

enum ctl_command {
	CTL_SUBMIT,
	CTL_STATUS,
	CTL_LIST,
	CTL_BEST,
	CTL_TRIALS,
	CTL_CANCEL,
	CTL_PAUSE,
	CTL_RESUME,
	CTL_REPORT,
	_CTL_COMMAND_MAX,
};

const char *ctl_command_to_string(enum ctl_command c);
/* -EINVAL for an unknown name. */
int ctl_command_from_string(const char *s);
/* submit, cancel, pause and resume change state: privileged peers only. */
bool ctl_command_changes_state(enum ctl_command c);

struct ctl_request {
	cJSON *json; /* owned; every pointer below points into it */
	enum ctl_command command;
	const cJSON *id;                    /* echoed in the response; NULL when absent */
	const char *study;                  /* a study name, or NULL */
	const cJSON *spec;                  /* submit: the study spec object */
	const char *model, *engine, *label; /* best without a study name */
	bool html;                          /* report: write the HTML report instead of answering Markdown */
};

/* Parses one request line (without its newline): strict JSON, an object,
 * a known command, the keys that command takes and no others. On failure
 * err names the field; *ret is untouched. ctl_request_done frees it. */
int ctl_request_parse(const char *line, size_t len, struct ctl_request *ret, struct error *err);
void ctl_request_done(struct ctl_request *r);

/* {"ok": true[, "id": id]} — the caller adds the payload. NULL on OOM. */
cJSON *ctl_response_ok(const cJSON *id);
/* {"ok": false, "error": "..."[, "id": id]}. NULL on OOM. */
cJSON *ctl_response_error(const cJSON *id, const char *fmt, ...) _printf_(2, 3);

/* Compact JSON plus '\n'. The caller frees *ret with free(). */
int ctl_format_line(const cJSON *j, char **ret, size_t *ret_len);

/* The wire form of a study row and of a trial row (knobs as an object).
 * best (NULL: none yet) is the study's answer (store_study_best): its cost
 * as best_cost_per_mtok, with best_measurements and best_spread. */
int ctl_study_to_json(const struct store_study *st, const struct store_study_best *best, cJSON **ret);
int ctl_trial_to_json(const struct store_trial *t, cJSON **ret);
/* The study's answer: the row of its first measurement (ctl_trial_to_json)
 * with cost_per_mtok the study's cost (the mean of its measurements),
 * measurements and spread, that one measurement's cost as
 * trial_cost_per_mtok, and the engine version it was measured with
 * (engine_version, null when not recorded). */
int ctl_best_to_json(const struct store_study_best *b, cJSON **ret);

/* ---- the read-only queries, answered from a store (protocol-answers.c) ---- */

struct store;

/* The answers to list, best and trials for req, read from s: goodputd's on
 * its socket and `goodput list|best|trials --db` offline build the same
 * objects with these. *ret is {"ok": true, ...} or an error answer ("no
 * study named ..."); the caller owns it. -ENOMEM only when out of memory.
 * best_dir (may be NULL) is where the best files of a finished study are:
 * the answer names them under "files". */
int ctl_answer_list(struct store *s, const struct ctl_request *req, cJSON **ret);
int ctl_answer_best(struct store *s, const struct ctl_request *req, const char *best_dir, cJSON **ret);
int ctl_answer_trials(struct store *s, const struct ctl_request *req, cJSON **ret);

/* ---- the client side ---- */

/* Connects to the daemon's socket (blocking, close-on-exec). err says how
 * to start the daemon when nobody listens. */
int ctl_client_connect(const char *path, int *ret_fd, struct error *err);
/* Sends one request and reads one response line (at most CTL_RESPONSE_MAX,
 * waiting at most timeout_usec in all). The caller owns *ret. */
int ctl_client_call(int fd, const cJSON *request, uint64_t timeout_usec, cJSON **ret, struct error *err);
