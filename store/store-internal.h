/* store-internal.h — what store.c (connection, schema, transactions) shares
 * with the row functions (store-studies.c, store-trials.c, store-points.c).
 * Not installed, not for other modules. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

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
	STMT_STUDY_SET_PREFLIGHT,
	STMT_STUDY_SET_PHASES,
	STMT_STUDY_SET_ALGORITHM,
	STMT_TRIAL_NEXT_SEQ,
	STMT_TRIAL_INSERT,
	STMT_TRIAL_GET,
	STMT_TRIAL_FIND,
	STMT_TRIAL_SET_STATE,
	STMT_TRIAL_SET_STARTED,
	STMT_TRIAL_CLEAR_OUTCOME,
	STMT_TRIAL_SET_SERVER,
	STMT_TRIAL_ADD_SERVER,
	STMT_TRIAL_CLEAR_SERVERS,
	STMT_STUDY_ROLE_SERVERS,
	STMT_TRIAL_SET_HOST,
	STMT_TRIAL_SET_PREDICTED,
	STMT_TRIAL_SET_GPUS,
	STMT_TRIAL_SET_LAUNCH,
	STMT_TRIAL_SET_TIMES,
	STMT_TRIAL_SET_JOB,
	STMT_TRIAL_SET_JOB_START,
	STMT_TRIAL_JOB_LOST,
	STMT_TWIN_CAL_UPSERT,
	STMT_TWIN_CAL_GET,
	STMT_TRIAL_FINISH,
	STMT_TRIAL_HISTORY,
	STMT_TRIAL_INTERRUPT,
	STMT_TRIAL_STUDY,
	STMT_LP_DELETE_TRIAL,
	STMT_LP_INSERT,
	STMT_LP_LIST,
	STMT_TRAFFIC_UPSERT,
	STMT_TRAFFIC_LIST_STUDY,
	_STMT_MAX,
};

/* A file as opened: store_check_files compares the path's with it. */
struct store_file_id {
	bool known;
	dev_t dev;
	ino_t ino;
};

struct store {
	sqlite3 *db;
	char *path;
	bool read_only;
	unsigned busy_timeout_ms;
	sqlite3_stmt *stmts[_STMT_MAX];
	uint64_t epoch; /* store_epoch(): moved by the update hook */
	int lock_fd;    /* the writer's lock on the file (STORE_OPEN_WRITER), or -1 */
	struct store_file_id db_id, wal_id;
	char *lost; /* why the file is no longer the database (store_check_files): every call fails */
};

/* ---- store.c, for the opening in store-file.c ---- */

/* Runs SQL without parameters or rows (a PRAGMA, BEGIN). */
int store_exec_const(struct store *s, const char *sql, const char *what, struct error *err);
/* The first column of a one-row statement as text ("" when none). */
int store_pragma_text(struct store *s, const char *sql, char *buf, size_t size, struct error *err);
/* Brings the schema to version target, one migration per transaction. */
int store_migrate(struct store *s, int target, struct error *err);

/* Returns the statement, reset and with bindings cleared, or a -errno with err set. */
int store_stmt(struct store *s, enum store_stmt id, const char *what, sqlite3_stmt **ret, struct error *err);

/* A value for a statement's parameter, made with STORE_INT, STORE_DOUBLE
 * (NAN binds NULL) or STORE_TEXT (NULL binds NULL). */
struct store_value {
	enum {
		STORE_VALUE_INT,
		STORE_VALUE_DOUBLE,
		STORE_VALUE_TEXT,
	} type;
	int64_t i;
	double d;
	const char *t;
};

#define STORE_INT(v)                                                                                                   \
	{                                                                                                              \
		.type = STORE_VALUE_INT, .i = (int64_t)(v)                                                             \
	}
#define STORE_DOUBLE(v)                                                                                                \
	{                                                                                                              \
		.type = STORE_VALUE_DOUBLE, .d = (v)                                                                   \
	}
#define STORE_TEXT(v)                                                                                                  \
	{                                                                                                              \
		.type = STORE_VALUE_TEXT, .t = (v)                                                                     \
	}
/* The values and their count, for store_query and store_exec. */
#define STORE_VALUES(...)                                                                                              \
	(const struct store_value[]){ __VA_ARGS__ },                                                                   \
		sizeof((const struct store_value[]){ __VA_ARGS__ }) / sizeof(struct store_value)

/* The statement id with values bound to ?1, ?2, ... (store_stmt + binds). */
int store_query(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
		sqlite3_stmt **ret, struct error *err);
/* Steps the statement id with values once: SQLITE_ROW (read the row, then
 * sqlite3_reset *ret), SQLITE_DONE or SQLITE_CONSTRAINT (reset already), or
 * a negative errno with err set. */
int store_step_once(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
		    sqlite3_stmt **ret, struct error *err);
/* Runs the INSERT id with values: 1 and the new row's id in *ret_id (may be
 * NULL), 0 when it inserted nothing (ON CONFLICT DO NOTHING), -EEXIST when
 * a constraint refused it. */
int store_insert(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
		 int64_t *ret_id, struct error *err);
/* Runs the statement id with values to completion; returns the number of
 * rows it changed. */
int store_exec(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
	       struct error *err);
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

/* Bind helpers: NULL strings and NAN doubles bind as SQL NULL. */
int store_bind_text(sqlite3_stmt *st, int idx, const char *v);
int store_bind_double(sqlite3_stmt *st, int idx, double v);
int store_bind_int64(sqlite3_stmt *st, int idx, int64_t v);
/* ---- rows (store-rows.c) ---- */

enum store_column_type {
	STORE_COL_INT64,  /* int64_t; NULL reads as 0 */
	STORE_COL_UINT64, /* uint64_t (times in µs); NULL reads as 0 */
	STORE_COL_UINT32, /* uint32_t; NULL reads as 0 */
	STORE_COL_BOOL,   /* bool, from an integer */
	STORE_COL_DOUBLE, /* double; NULL reads as NAN */
	STORE_COL_TEXT,   /* char *, copied; NULL stays NULL */
	STORE_COL_ENUM,   /* an enum stored by name, read through from_string */
};

/* One column of a row: its SQL name and the field of the struct it fills. */
struct store_column {
	const char *name;
	enum store_column_type type;
	size_t offset;
	bool required;                     /* NULL is an error (-EBADMSG) */
	int (*from_string)(const char *s); /* STORE_COL_ENUM: the value, or < 0 for an unknown name */
	int if_null, if_unknown;           /* STORE_COL_ENUM: the value for NULL, for an unknown name */
};

/* A kind of row: its columns in SELECT order and the struct's size. */
struct store_row {
	const struct store_column *columns;
	size_t n_columns;
	size_t size;
};

/* Table entries: a column named like its field, one named otherwise, and an
 * enum stored by name. */
#define STORE_COLUMN(type, st, field)                                                                                  \
	{                                                                                                              \
#field, STORE_COL_##type, offsetof(st, field), false, NULL, 0, 0                                       \
	}
#define STORE_COLUMN_AS(type, st, field, sql)                                                                          \
	{                                                                                                              \
		sql, STORE_COL_##type, offsetof(st, field), false, NULL, 0, 0                                          \
	}
#define STORE_COLUMN_ENUM(st, field, sql, from_string, if_null, if_unknown)                                            \
	{                                                                                                              \
		sql, STORE_COL_ENUM, offsetof(st, field), false, from_string, if_null, if_unknown                      \
	}

extern const struct store_row store_study_row, store_trial_row, store_load_point_row, store_twin_calibration_row,
	store_traffic_row, store_role_server_row;

/* Frees the strings of a row of type t and zeroes it; accepts NULL. */
void store_row_done(const struct store_row *t, void *row);
/* store_row_done on n rows, then frees the array. */
void store_row_array_free(const struct store_row *t, void *a, size_t n);

/* "SELECT <t's columns> <rest>", allocated (NULL: out of memory). */
char *store_row_select(const struct store_row *t, const char *rest);
/* "INSERT INTO table (<t's columns but the first, the id>) VALUES (?1, ...)",
 * allocated (NULL: out of memory). */
char *store_row_insert(const struct store_row *t, const char *table);
/* The kind of row the statement id reads or inserts (NULL for others). */
const struct store_row *store_stmt_row(enum store_stmt id);
/* Runs the SELECT id of a row with values, expecting at most one row, read
 * into ret: -ENOENT with "<path>: missing" when there is none. */
int store_get(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
	      const char *missing, void *ret, struct error *err);
/* Runs the SELECT id of a row with values into a new array of rows. */
int store_list(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n_values,
	       void **ret, size_t *ret_n, struct error *err);

/* Define the public x_done(type *) and x_array_free(type *, n) of a row. */
#define STORE_ROW_DONE_FUNC(row, type, name)                                                                           \
	void name(type *v)                                                                                             \
	{                                                                                                              \
		store_row_done(&(row), v);                                                                             \
	}
#define STORE_ROW_ARRAY_FREE_FUNC(row, type, name)                                                                     \
	void name(type *a, size_t n)                                                                                   \
	{                                                                                                              \
		store_row_array_free(&(row), a, n);                                                                    \
	}

/* Column helpers: NULL reads as NULL/NAN/0. Text is strdup'ed (-ENOMEM). */
int store_col_text(sqlite3_stmt *st, int col, char **ret);
double store_col_double(sqlite3_stmt *st, int col);
