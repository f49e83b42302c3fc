/* store-twin.c — the digital twin's calibrations kept across studies: one
 * row per key ("engine|engine_version|gpu|driver|model"), written when a
 * twin study ends with a good fit and read when the next study on the same
 * host, engine and model starts (a warm start). The calibration itself is
 * the twin's JSON, opaque here; the key fields and the fit's errors are
 * columns so that people (and `sqlite3`) can read them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "time-util.h"

void store_twin_calibration_done(struct store_twin_calibration *c)
{
	if (!c)
		return;
	free(c->key);
	free(c->engine);
	free(c->engine_version);
	free(c->gpu);
	free(c->driver);
	free(c->model);
	free(c->calibration_json);
	*c = (struct store_twin_calibration){ 0 };
}

int store_twin_calibration_upsert(struct store *s, const struct store_twin_calibration *c, struct error *err)
{
	const char *what = "recording a twin calibration";
	sqlite3_stmt *st;
	int r;

	if (!c->key || !*c->key || !c->calibration_json)
		return error_set(err, -EINVAL, "%s: %s: a key and the calibration are required", s->path, what);
	r = store_stmt(s, STMT_TWIN_CAL_UPSERT, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_text(st, 1, c->key);
	if (r == 0)
		r = store_bind_text(st, 2, c->engine);
	if (r == 0)
		r = store_bind_text(st, 3, c->engine_version);
	if (r == 0)
		r = store_bind_text(st, 4, c->gpu);
	if (r == 0)
		r = store_bind_text(st, 5, c->driver);
	if (r == 0)
		r = store_bind_text(st, 6, c->model);
	if (r == 0)
		r = store_bind_text(st, 7, c->calibration_json);
	if (r == 0)
		r = store_bind_double(st, 8, c->fit_error);
	if (r == 0)
		r = store_bind_double(st, 9, c->cost_error);
	if (r == 0)
		r = c->study_id > 0 ? store_bind_int64(st, 10, c->study_id) : (sqlite3_bind_null(st, 10) ? -EIO : 0);
	if (r == 0)
		r = store_bind_int64(st, 11, (int64_t)real_usec());
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	return store_step_done(s, st, what, err);
}

int store_twin_calibration_get(struct store *s, const char *key, struct store_twin_calibration *ret, struct error *err)
{
	const char *what = "reading a twin calibration";
	struct store_twin_calibration c = { 0 };
	sqlite3_stmt *st;
	int r, rc;

	r = store_stmt(s, STMT_TWIN_CAL_GET, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_text(st, 1, key);
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_reset(st);
		return error_set(err, -ENOENT, "%s: no twin calibration for %s", s->path, key);
	}
	if (rc != SQLITE_ROW) {
		r = store_sql_error(s, rc, what, err);
		sqlite3_reset(st);
		return r;
	}
	r = store_col_text(st, 0, &c.key);
	if (r == 0)
		r = store_col_text(st, 1, &c.engine);
	if (r == 0)
		r = store_col_text(st, 2, &c.engine_version);
	if (r == 0)
		r = store_col_text(st, 3, &c.gpu);
	if (r == 0)
		r = store_col_text(st, 4, &c.driver);
	if (r == 0)
		r = store_col_text(st, 5, &c.model);
	if (r == 0)
		r = store_col_text(st, 6, &c.calibration_json);
	c.fit_error = store_col_double(st, 7);
	c.cost_error = store_col_double(st, 8);
	c.study_id = sqlite3_column_int64(st, 9);
	c.updated_usec = (uint64_t)sqlite3_column_int64(st, 10);
	sqlite3_reset(st);
	if (r < 0 || !c.key || !c.calibration_json) {
		store_twin_calibration_done(&c);
		return error_set(err, r < 0 ? r : -EBADMSG, "%s: %s: %s", s->path, what,
				 r < 0 ? "out of memory" : "a required column is NULL");
	}
	*ret = c;
	return 0;
}
