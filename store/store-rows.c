/* store-rows.c — reading rows into structs by a column table.
 *
 * Each kind of row the store hands out (a study, a trial, a load point, a
 * twin calibration) is described once by a table of its columns: the SQL
 * name, the C type and the offset of the field it fills. The table gives
 * both the column list of every SELECT of that row (store.c builds the
 * statements from it, so the order can never drift from the reader) and the
 * reading itself: one loop copies every column out of SQLite's buffers
 * before the statement is reset, so the structs own their strings. States
 * and failure classes are stored by name and read back through their
 * from_string functions, with a stated value for NULL and for a name a newer
 * goodput wrote. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "store-internal.h"

static int read_column(sqlite3_stmt *st, int i, const struct store_column *c, char *row)
{
	void *field = row + c->offset;
	bool null = sqlite3_column_type(st, i) == SQLITE_NULL;
	int v;

	if (null && c->required)
		return -EBADMSG;
	switch (c->type) {
	case STORE_COL_INT64:
		*(int64_t *)field = sqlite3_column_int64(st, i);
		return 0;
	case STORE_COL_UINT64:
		*(uint64_t *)field = (uint64_t)sqlite3_column_int64(st, i);
		return 0;
	case STORE_COL_UINT32:
		*(uint32_t *)field = (uint32_t)sqlite3_column_int64(st, i);
		return 0;
	case STORE_COL_BOOL:
		*(bool *)field = sqlite3_column_int(st, i) != 0;
		return 0;
	case STORE_COL_DOUBLE:
		*(double *)field = null ? NAN : sqlite3_column_double(st, i);
		return 0;
	case STORE_COL_TEXT:
		return store_col_text(st, i, (char **)field);
	case STORE_COL_ENUM:
		v = null ? c->if_null : c->from_string((const char *)sqlite3_column_text(st, i));
		*(int *)field = v < 0 ? c->if_unknown : v;
		return 0;
	}
	return -EINVAL;
}

void store_row_done(const struct store_row *t, void *row)
{
	if (!row)
		return;
	for (size_t i = 0; i < t->n_columns; i++)
		if (t->columns[i].type == STORE_COL_TEXT)
			free(*(char **)((char *)row + t->columns[i].offset));
	memset(row, 0, t->size);
}

void store_row_array_free(const struct store_row *t, void *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++)
		store_row_done(t, (char *)a + i * t->size);
	free(a);
}

/* Reads the current row into row (zeroed first); on failure frees what was read. */
static int read_row(sqlite3_stmt *st, const struct store_row *t, void *row)
{
	int r = 0;

	memset(row, 0, t->size);
	for (size_t i = 0; i < t->n_columns && r >= 0; i++)
		r = read_column(st, (int)i, &t->columns[i], row);
	if (r < 0)
		store_row_done(t, row);
	return r;
}

static int row_error(struct store *s, int r, const char *what, struct error *err)
{
	return error_set(err, r, "%s: %s: %s", s->path, what,
			 r == -EBADMSG ? "a required column is NULL" : "out of memory");
}

int store_get(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
	      const char *missing, void *ret, struct error *err)
{
	sqlite3_stmt *st;
	int r;

	r = store_step_once(s, id, what, values, n, &st, err);
	if (r < 0)
		return r;
	if (r != SQLITE_ROW)
		return error_set(err, -ENOENT, "%s: %s", s->path, missing);
	r = read_row(st, store_stmt_row(id), ret);
	sqlite3_reset(st);
	return r < 0 ? row_error(s, r, what, err) : 0;
}

int store_list(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n_values,
	       void **ret, size_t *ret_n, struct error *err)
{
	const struct store_row *t = store_stmt_row(id);
	sqlite3_stmt *st;
	void *a = NULL;
	size_t n = 0, cap = 0;
	int r, rc;

	r = store_query(s, id, what, values, n_values, &st, err);
	if (r < 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		r = array_grow(&a, &cap, n, t->size);
		if (r == 0)
			r = read_row(st, t, (char *)a + n * t->size);
		if (r < 0) {
			sqlite3_reset(st);
			store_row_array_free(t, a, n);
			return row_error(s, r, what, err);
		}
		n++;
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		store_row_array_free(t, a, n);
		return store_sql_error(s, rc, what, err);
	}
	*ret = a;
	*ret_n = n;
	return 0;
}

/* Room for the column names from column `from` on, with separators. */
static size_t names_len(const struct store_row *t, size_t from)
{
	size_t len = 0;

	for (size_t i = from; i < t->n_columns; i++)
		len += strlen(t->columns[i].name) + 2;
	return len;
}

/* Appends "a, b, c" (the names from column `from` on) at p; returns the end. */
static char *append_names(char *p, const struct store_row *t, size_t from)
{
	for (size_t i = from; i < t->n_columns; i++)
		p = stpcpy(stpcpy(p, i > from ? ", " : ""), t->columns[i].name);
	return p;
}

char *store_row_select(const struct store_row *t, const char *rest)
{
	char *sql = malloc(strlen("SELECT ") + names_len(t, 0) + strlen(rest) + 2);

	if (sql)
		stpcpy(stpcpy(append_names(stpcpy(sql, "SELECT "), t, 0), " "), rest);
	return sql;
}

char *store_row_insert(const struct store_row *t, const char *table)
{
	size_t n = t->n_columns - 1;
	char *sql = malloc(strlen("INSERT INTO  () VALUES ()") + strlen(table) + names_len(t, 1) + n * 8 + 1), *p;

	if (!sql)
		return NULL;
	p = stpcpy(stpcpy(stpcpy(sql, "INSERT INTO "), table), " (");
	p = stpcpy(append_names(p, t, 1), ") VALUES (");
	for (size_t i = 1; i <= n; i++)
		p += snprintf(p, 8, "%s?%zu", i > 1 ? ", " : "", i);
	stpcpy(p, ")");
	return sql;
}
