/* store-trials.c — the rows of the trials table: inserting a trial once per
 * (study, canonical key, kind), moving it through its states, finishing it
 * with its outcome, the optimizer's history and resuming after a restart
 * (a study's answer is store-best.c). Changes of more than one
 * row run inside store_tx_begin/end, so they happen whole or not at all, also
 * when the disk fills up half-way. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "time-util.h"

static const char *state_name(enum store_trial_state s)
{
	const char *n = store_trial_state_to_string(s);

	return n ? n : "?";
}

/* ---- trials ---- */

void store_trial_done(struct store_trial *t)
{
	if (!t)
		return;
	free(t->kind);
	free(t->knobs_json);
	free(t->canonical_key);
	free(t->failure_message);
	free(t->log_path);
	free(t->server_unit);
	free(t->host_json);
	*t = (struct store_trial){ 0 };
}

void store_trial_array_free(struct store_trial *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++)
		store_trial_done(&a[i]);
	free(a);
}

/* Reads a row of TRIAL_COLS. */
static int trial_from_row(sqlite3_stmt *st, struct store_trial *ret)
{
	struct store_trial t = { 0 };
	int r = 0, v;

	t.id = sqlite3_column_int64(st, 0);
	t.study_id = sqlite3_column_int64(st, 1);
	t.seq = (uint32_t)sqlite3_column_int64(st, 2);
	if (r == 0)
		r = store_col_text(st, 3, &t.kind);
	if (r == 0)
		r = store_col_text(st, 4, &t.knobs_json);
	if (r == 0)
		r = store_col_text(st, 5, &t.canonical_key);
	v = store_trial_state_from_string((const char *)sqlite3_column_text(st, 6));
	t.state = v < 0 ? STORE_TRIAL_FAILED : (enum store_trial_state)v;
	v = sqlite3_column_type(st, 7) == SQLITE_NULL
		    ? STORE_FAILURE_NONE
		    : store_failure_from_string((const char *)sqlite3_column_text(st, 7));
	/* A class written by a newer goodput reads as "crashed" rather than nothing. */
	t.failure = v < 0 ? STORE_FAILURE_CRASHED : (enum store_failure)v;
	if (r == 0)
		r = store_col_text(st, 8, &t.failure_message);
	t.deploy_seconds = store_col_double(st, 9);
	t.max_rate = store_col_double(st, 10);
	t.max_goodput = store_col_double(st, 11);
	t.concurrency = store_col_double(st, 12);
	t.cost_per_mtok = store_col_double(st, 13);
	t.started_usec = (uint64_t)sqlite3_column_int64(st, 14);
	t.finished_usec = (uint64_t)sqlite3_column_int64(st, 15);
	if (r == 0)
		r = store_col_text(st, 16, &t.log_path);
	t.server_pgid = sqlite3_column_int64(st, 17);
	if (r == 0)
		r = store_col_text(st, 18, &t.server_unit);
	if (r == 0)
		r = store_col_text(st, 19, &t.host_json);
	t.predicted_cost = store_col_double(st, 20);
	if (r < 0) {
		store_trial_done(&t);
		return r;
	}
	*ret = t;
	return 0;
}

/* Steps a SELECT of TRIAL_COLS expecting at most one row. */
static int trial_get_one(struct store *s, sqlite3_stmt *st, const char *what, const char *missing,
			 struct store_trial *ret, struct error *err)
{
	int rc = sqlite3_step(st), r;

	if (rc == SQLITE_DONE) {
		sqlite3_reset(st);
		return error_set(err, -ENOENT, "%s: %s", s->path, missing);
	}
	if (rc != SQLITE_ROW) {
		r = store_sql_error(s, rc, what, err);
		sqlite3_reset(st);
		return r;
	}
	r = trial_from_row(st, ret);
	sqlite3_reset(st);
	return r < 0 ? error_set(err, r, "%s: %s: out of memory", s->path, what) : 0;
}

/* Steps a SELECT of TRIAL_COLS into a new array. */
static int trial_get_all(struct store *s, sqlite3_stmt *st, const char *what, struct store_trial **ret, size_t *ret_n,
			 struct error *err)
{
	struct store_trial *a = NULL;
	size_t n = 0, cap = 0;
	int r, rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		r = store_grow((void **)&a, &cap, n, sizeof(*a));
		if (r == 0)
			r = trial_from_row(st, &a[n]);
		if (r < 0) {
			sqlite3_reset(st);
			store_trial_array_free(a, n);
			return error_set(err, r, "%s: %s: out of memory", s->path, what);
		}
		n++;
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		store_trial_array_free(a, n);
		return store_sql_error(s, rc, what, err);
	}
	*ret = a;
	*ret_n = n;
	return 0;
}

static int trial_insert_locked(struct store *s, int64_t study_id, const char *kind, const char *knobs_json,
			       const char *key, int64_t *ret_id, struct error *err)
{
	const char *what = "inserting a trial";
	sqlite3_stmt *st;
	int64_t seq;
	int r, rc;

	r = store_stmt(s, STMT_TRIAL_NEXT_SEQ, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, study_id);
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		r = store_sql_error(s, rc, what, err);
		sqlite3_reset(st);
		return r;
	}
	seq = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);

	r = store_stmt(s, STMT_TRIAL_INSERT, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, study_id);
	if (r == 0)
		r = store_bind_int64(st, 2, seq);
	if (r == 0)
		r = store_bind_text(st, 3, kind);
	if (r == 0)
		r = store_bind_text(st, 4, knobs_json);
	if (r == 0)
		r = store_bind_text(st, 5, key);
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if ((rc & 0xff) == SQLITE_CONSTRAINT)
		return error_set(err, -ENOENT, "%s: %s: no study with id %lld", s->path, what, (long long)study_id);
	if (rc != SQLITE_DONE)
		return store_sql_error(s, rc, what, err);
	if (sqlite3_changes(s->db) > 0) {
		*ret_id = sqlite3_last_insert_rowid(s->db);
		return 1;
	}
	/* It existed: hand back its id. */
	struct store_trial t;
	r = store_trial_find(s, study_id, kind, key, &t, err);
	if (r < 0)
		return r;
	*ret_id = t.id;
	store_trial_done(&t);
	return 0;
}

/* Ends an UPDATE of one trial by id: a failed bind (bind_r < 0), a failed
 * step, or no trial with that id is an error naming what was being done. */
static int trial_update_done(struct store *s, sqlite3_stmt *st, int bind_r, const char *what, int64_t id,
			     struct error *err)
{
	int r;

	if (bind_r < 0)
		return error_set(err, bind_r, "%s: %s: binding failed", s->path, what);
	r = store_step_done(s, st, what, err);
	if (r >= 0 && sqlite3_changes(s->db) == 0)
		return error_set(err, -ENOENT, "%s: no trial with id %lld", s->path, (long long)id);
	return r;
}

int store_trial_insert(struct store *s, int64_t study_id, const char *kind, const char *knobs_json,
		       const char *canonical_key, int64_t *ret_id, struct error *err)
{
	int64_t id = 0;
	int began, r;

	if (!kind || !*kind || !knobs_json || !canonical_key || !*canonical_key)
		return error_set(err, -EINVAL, "%s: a trial needs a kind, knob values and a canonical key", s->path);
	began = store_tx_begin(s, "inserting a trial", err);
	if (began < 0)
		return began;
	r = trial_insert_locked(s, study_id, kind, knobs_json, canonical_key, &id, err);
	r = store_tx_end(s, began, r, err);
	if (r >= 0 && ret_id)
		*ret_id = id;
	return r;
}

int store_trial_get(struct store *s, int64_t id, struct store_trial *ret, struct error *err)
{
	sqlite3_stmt *st;
	char missing[64];
	int r;

	r = store_stmt(s, STMT_TRIAL_GET, "reading a trial", &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r < 0)
		return error_set(err, r, "%s: reading a trial: binding failed", s->path);
	snprintf(missing, sizeof(missing), "no trial with id %lld", (long long)id);
	return trial_get_one(s, st, "reading a trial", missing, ret, err);
}

int store_trial_find(struct store *s, int64_t study_id, const char *kind, const char *canonical_key,
		     struct store_trial *ret, struct error *err)
{
	sqlite3_stmt *st;
	char missing[256];
	int r;

	r = store_stmt(s, STMT_TRIAL_FIND, "finding a trial", &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, study_id);
	if (r == 0)
		r = store_bind_text(st, 2, kind);
	if (r == 0)
		r = store_bind_text(st, 3, canonical_key);
	if (r < 0)
		return error_set(err, r, "%s: finding a trial: binding failed", s->path);
	snprintf(missing, sizeof(missing), "study %lld has no %.20s trial \"%.150s\"", (long long)study_id,
		 kind ? kind : "?", canonical_key ? canonical_key : "?");
	return trial_get_one(s, st, "finding a trial", missing, ret, err);
}

/* Runs a one-parameter-id statement; -ENOENT when it changed nothing. */
static int run_on_trial(struct store *s, enum store_stmt id, int64_t trial_id, const char *what, struct error *err)
{
	sqlite3_stmt *st;
	int r;

	r = store_stmt(s, id, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, trial_id);
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	return store_step_done(s, st, what, err);
}

static int trial_set_state_locked(struct store *s, int64_t id, enum store_trial_state state, struct error *err)
{
	const char *what = "changing a trial's state";
	sqlite3_stmt *st;
	int r;

	r = store_stmt(s, STMT_TRIAL_SET_STATE, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r == 0)
		r = store_bind_text(st, 2, store_trial_state_to_string(state));
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	r = store_step_done(s, st, what, err);
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) == 0)
		return error_set(err, -ENOENT, "%s: no trial with id %lld", s->path, (long long)id);
	if (state != STORE_TRIAL_DEPLOYING)
		return 0;
	/* A new attempt: forget what an interrupted one measured. */
	r = run_on_trial(s, STMT_LP_DELETE_TRIAL, id, what, err);
	if (r == 0)
		r = run_on_trial(s, STMT_TRIAL_CLEAR_OUTCOME, id, what, err);
	if (r < 0)
		return r;
	r = store_stmt(s, STMT_TRIAL_SET_STARTED, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r == 0)
		r = store_bind_int64(st, 2, (int64_t)real_usec());
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	return store_step_done(s, st, what, err);
}

int store_trial_set_state(struct store *s, int64_t id, enum store_trial_state state, struct error *err)
{
	int began, r;

	if (!store_trial_state_to_string(state) || store_trial_state_is_final(state))
		return error_set(err, -EINVAL, "%s: a trial is finished with store_trial_finish, not set to %s",
				 s->path, state_name(state));
	began = store_tx_begin(s, "changing a trial's state", err);
	if (began < 0)
		return began;
	r = trial_set_state_locked(s, id, state, err);
	return store_tx_end(s, began, r, err);
}

int store_trial_set_server(struct store *s, int64_t id, int64_t pgid, const char *unit, const char *log_path,
			   struct error *err)
{
	const char *what = "recording a trial's server";
	sqlite3_stmt *st;
	int r;

	r = store_stmt(s, STMT_TRIAL_SET_SERVER, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r == 0)
		r = (pgid > 0 ? store_bind_int64(st, 2, pgid) : store_bind_text(st, 2, NULL));
	if (r == 0)
		r = store_bind_text(st, 3, unit);
	if (r == 0)
		r = store_bind_text(st, 4, log_path);
	return trial_update_done(s, st, r, what, id, err);
}

int store_trial_set_host(struct store *s, int64_t id, const char *host_json, struct error *err)
{
	const char *what = "recording a trial's host";
	sqlite3_stmt *st;
	int r;

	r = store_stmt(s, STMT_TRIAL_SET_HOST, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r == 0)
		r = store_bind_text(st, 2, host_json);
	return trial_update_done(s, st, r, what, id, err);
}

int store_trial_finish(struct store *s, int64_t id, const struct store_trial_outcome *o, struct error *err)
{
	const char *what = "finishing a trial";
	sqlite3_stmt *st;
	int r;

	if (!store_trial_state_is_final(o->state))
		return error_set(err, -EINVAL, "%s: %s: state %s is not final", s->path, what, state_name(o->state));
	if (!store_failure_to_string(o->failure))
		return error_set(err, -EINVAL, "%s: %s: invalid failure class %d", s->path, what, (int)o->failure);
	r = store_stmt(s, STMT_TRIAL_FINISH, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r == 0)
		r = store_bind_text(st, 2, store_trial_state_to_string(o->state));
	if (r == 0)
		r = store_bind_text(st, 3,
				    o->failure == STORE_FAILURE_NONE ? NULL : store_failure_to_string(o->failure));
	if (r == 0)
		r = store_bind_text(st, 4, o->failure_message);
	if (r == 0)
		r = store_bind_double(st, 5, o->deploy_seconds);
	if (r == 0)
		r = store_bind_double(st, 6, o->max_rate);
	if (r == 0)
		r = store_bind_double(st, 7, o->max_goodput);
	if (r == 0)
		r = store_bind_double(st, 8, o->concurrency);
	if (r == 0)
		r = store_bind_double(st, 9, o->cost_per_mtok);
	if (r == 0)
		r = store_bind_int64(st, 10, (int64_t)real_usec());
	return trial_update_done(s, st, r, what, id, err);
}

int store_trial_history(struct store *s, int64_t study_id, struct store_trial **ret, size_t *ret_n, struct error *err)
{
	sqlite3_stmt *st;
	int r;

	r = store_stmt(s, STMT_TRIAL_HISTORY, "reading a study's history", &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, study_id);
	if (r < 0)
		return error_set(err, r, "%s: reading a study's history: binding failed", s->path);
	return trial_get_all(s, st, "reading a study's history", ret, ret_n, err);
}

int store_study_resume(struct store *s, int64_t study_id, struct error *err)
{
	int r = run_on_trial(s, STMT_TRIAL_INTERRUPT, study_id, "marking interrupted trials", err);

	return r < 0 ? r : sqlite3_changes(s->db);
}

int store_trial_set_predicted_cost(struct store *s, int64_t id, double cost, struct error *err)
{
	const char *what = "recording a trial's predicted cost";
	sqlite3_stmt *st;
	int r;

	r = store_stmt(s, STMT_TRIAL_SET_PREDICTED, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r == 0)
		r = store_bind_double(st, 2, cost);
	return trial_update_done(s, st, r, what, id, err);
}
