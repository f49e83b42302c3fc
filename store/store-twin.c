/* store-twin.c — the digital twin's calibrations kept across studies: one
 * row per key ("engine|engine_version|gpu|driver|model"), written when a
 * twin study ends with a good fit and read when the next study on the same
 * host, engine and model starts (a warm start). The calibration itself is
 * the twin's JSON, opaque here; the key fields and the fit's errors are
 * columns so that people (and `sqlite3`) can read them. */
#include <errno.h>
#include <stdio.h>

#include "macro.h"
#include "store-internal.h"
#include "time-util.h"

#define COL(type, field) STORE_COLUMN(type, struct store_twin_calibration, field)
static const struct store_column cal_columns[] = {
	{ "key", STORE_COL_TEXT, offsetof(struct store_twin_calibration, key), .required = true },
	COL(TEXT, engine),
	COL(TEXT, engine_version),
	COL(TEXT, gpu),
	COL(TEXT, driver),
	COL(TEXT, model),
	{ "calibration_json", STORE_COL_TEXT, offsetof(struct store_twin_calibration, calibration_json),
	  .required = true },
	COL(DOUBLE, fit_error),
	COL(DOUBLE, cost_error),
	COL(INT64, study_id),
	COL(UINT64, updated_usec)
};
#undef COL

const struct store_row store_twin_calibration_row = { cal_columns, ELEMENTSOF(cal_columns),
						      sizeof(struct store_twin_calibration) };

STORE_ROW_DONE_FUNC(store_twin_calibration_row, struct store_twin_calibration, store_twin_calibration_done)

int store_twin_calibration_upsert(struct store *s, const struct store_twin_calibration *c, struct error *err)
{
	const char *what = "recording a twin calibration";
	/* No study (0) is NULL. */
	const struct store_value study =
		c->study_id > 0 ? (struct store_value)STORE_INT(c->study_id) : (struct store_value)STORE_TEXT(NULL);
	int r;

	if (!c->key || !*c->key || !c->calibration_json)
		return error_set(err, -EINVAL, "%s: %s: a key and the calibration are required", s->path, what);
	r = store_exec(s, STMT_TWIN_CAL_UPSERT, what,
		       STORE_VALUES(STORE_TEXT(c->key), STORE_TEXT(c->engine), STORE_TEXT(c->engine_version),
				    STORE_TEXT(c->gpu), STORE_TEXT(c->driver), STORE_TEXT(c->model),
				    STORE_TEXT(c->calibration_json), STORE_DOUBLE(c->fit_error),
				    STORE_DOUBLE(c->cost_error), study, STORE_INT(real_usec())),
		       err);
	return r < 0 ? r : 0;
}

int store_twin_calibration_get(struct store *s, const char *key, struct store_twin_calibration *ret, struct error *err)
{
	char missing[300];

	snprintf(missing, sizeof(missing), "no twin calibration for %.250s", key);
	return store_get(s, STMT_TWIN_CAL_GET, "reading a twin calibration", STORE_VALUES(STORE_TEXT(key)), missing,
			 ret, err);
}
