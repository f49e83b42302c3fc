/* store-internal.h — what store.c (connection, schema, transactions) shares
 * with the row functions (store-studies.c, store-trials.c, store-points.c).
 * Not installed, not for other modules. */
#pragma once

#include <sqlite3.h>

#include "sqlite-util.h"
#include "store.h"

/* Every statement the store runs, prepared once per connection on first use. */
enum store_stmt {
	STMT_STUDY_INSERT,
	STMT_STUDY_GET,
	STMT_STUDY_GET_BY_NAME,
	STMT_STUDY_LIST,
	STMT_STUDY_SET_STATE,
	STMT_STUDY_SET_BEST,
	STMT_TRIAL_NEXT_SEQ,
	STMT_TRIAL_INSERT,
	STMT_TRIAL_GET,
	STMT_TRIAL_FIND,
	STMT_TRIAL_SET_STATE,
	STMT_TRIAL_SET_STARTED,
	STMT_TRIAL_CLEAR_OUTCOME,
	STMT_TRIAL_SET_SERVER,
	STMT_TRIAL_SET_HOST,
	STMT_TRIAL_SET_PREDICTED,
	STMT_TWIN_CAL_UPSERT,
	STMT_TWIN_CAL_GET,
	STMT_TRIAL_FINISH,
	STMT_TRIAL_HISTORY,
	STMT_TRIAL_INTERRUPT,
	STMT_TRIAL_STUDY,
	STMT_LP_DELETE_TRIAL,
	STMT_LP_INSERT,
	STMT_LP_LIST,
	_STMT_MAX,
};

struct store {
	sqlite3 *db;
	char *path;
	bool read_only;
	sqlite3_stmt *stmts[_STMT_MAX];
};

/* Returns the statement, reset and with bindings cleared, or a -errno with err set. */
int store_stmt(struct store *s, enum store_stmt id, const char *what, sqlite3_stmt **ret, struct error *err);
/* Translates an SQLite result code to -errno and fills err with
 * "<file>: <what>: <sqlite message>". */
int store_sql_error(struct store *s, int rc, const char *what, struct error *err);
/* Runs a statement that returns no rows to completion. */
int store_step_done(struct store *s, sqlite3_stmt *st, const char *what, struct error *err);

/* Atomic groups inside the row functions: BEGIN IMMEDIATE when no transaction
 * is open, else a SAVEPOINT inside the caller's. */
/* Returns 1 when it began a transaction, 0 when it opened a savepoint. */
int store_tx_begin(struct store *s, const char *what, struct error *err);
/* Commits (r >= 0) or rolls back (r < 0) what store_tx_begin opened; returns r or the commit error. */
int store_tx_end(struct store *s, int began, int r, struct error *err);

/* Grows an array of elements of `size` bytes to hold n + 1 (zeroing new slots). */
int store_grow(void **a, size_t *cap, size_t n, size_t size);

/* Bind helpers: NULL strings and NAN doubles bind as SQL NULL. */
int store_bind_text(sqlite3_stmt *st, int idx, const char *v);
int store_bind_double(sqlite3_stmt *st, int idx, double v);
int store_bind_int64(sqlite3_stmt *st, int idx, int64_t v);
/* Column helpers: NULL reads as NULL/NAN/0. Text is strdup'ed (-ENOMEM). */
int store_col_text(sqlite3_stmt *st, int col, char **ret);
double store_col_double(sqlite3_stmt *st, int col);
