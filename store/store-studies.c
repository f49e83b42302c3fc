/* store-studies.c — the names of states and failure classes, and the rows
 * of the studies table (see store.h). Reading functions copy every column
 * out of SQLite's buffers before the statement is reset, so the structs they
 * fill own their strings. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "time-util.h"

/* ---- names ---- */

static const char *const study_state_names[_STORE_STUDY_STATE_MAX] = {
	[STORE_STUDY_QUEUED] = "queued", [STORE_STUDY_RUNNING] = "running", [STORE_STUDY_PAUSED] = "paused",
	[STORE_STUDY_DONE] = "done",     [STORE_STUDY_FAILED] = "failed",   [STORE_STUDY_CANCELLED] = "cancelled",
};

static const char *const trial_state_names[_STORE_TRIAL_STATE_MAX] = {
	[STORE_TRIAL_PENDING] = "pending",         [STORE_TRIAL_DEPLOYING] = "deploying",
	[STORE_TRIAL_PROBING] = "probing",         [STORE_TRIAL_DONE] = "done",
	[STORE_TRIAL_INFEASIBLE] = "infeasible",   [STORE_TRIAL_FAILED] = "failed",
	[STORE_TRIAL_INTERRUPTED] = "interrupted",
};

static const char *const failure_names[_STORE_FAILURE_MAX] = {
	[STORE_FAILURE_NONE] = "none",
	[STORE_FAILURE_OOM] = "oom",
	[STORE_FAILURE_STARTUP_TIMEOUT] = "startup_timeout",
	[STORE_FAILURE_CRASHED] = "crashed",
	[STORE_FAILURE_SLA_NEVER_MET] = "sla_never_met",
	[STORE_FAILURE_QUALITY_CHECK_FAILED] = "quality_check_failed",
	[STORE_FAILURE_CONSTRAINT] = "constraint",
	[STORE_FAILURE_DEPLOY_ERROR] = "deploy_error",
	[STORE_FAILURE_PROBE_ERROR] = "probe_error",
};

static int lookup_name(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; s && i < n; i++)
		if (strcmp(names[i], s) == 0)
			return (int)i;
	return -EINVAL;
}

const char *store_study_state_to_string(enum store_study_state s)
{
	return (unsigned)s < _STORE_STUDY_STATE_MAX ? study_state_names[s] : NULL;
}

int store_study_state_from_string(const char *s)
{
	return lookup_name(study_state_names, _STORE_STUDY_STATE_MAX, s);
}

const char *store_trial_state_to_string(enum store_trial_state s)
{
	return (unsigned)s < _STORE_TRIAL_STATE_MAX ? trial_state_names[s] : NULL;
}

int store_trial_state_from_string(const char *s)
{
	return lookup_name(trial_state_names, _STORE_TRIAL_STATE_MAX, s);
}

bool store_trial_state_is_final(enum store_trial_state s)
{
	return s == STORE_TRIAL_DONE || s == STORE_TRIAL_INFEASIBLE || s == STORE_TRIAL_FAILED;
}

const char *store_failure_to_string(enum store_failure f)
{
	return (unsigned)f < _STORE_FAILURE_MAX ? failure_names[f] : NULL;
}

int store_failure_from_string(const char *s)
{
	return lookup_name(failure_names, _STORE_FAILURE_MAX, s);
}

/* Grows an array of elements of size `size` to hold n + 1. */
int store_grow(void **a, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	void *p = reallocarray(*a, c, size);
	if (!p)
		return -ENOMEM;
	memset((char *)p + *cap * size, 0, (c - *cap) * size);
	*a = p;
	*cap = c;
	return 0;
}

/* ---- studies ---- */

void store_study_done(struct store_study *st)
{
	if (!st)
		return;
	free(st->name);
	free(st->spec_json);
	free(st->engine);
	free(st->model);
	free(st->label);
	free(st->message);
	free(st->algorithm);
	free(st->nlopt_version);
	*st = (struct store_study){ 0 };
}

void store_study_array_free(struct store_study *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++)
		store_study_done(&a[i]);
	free(a);
}

/* Reads a row of STUDY_COLS. */
static int study_from_row(sqlite3_stmt *st, struct store_study *ret)
{
	struct store_study t = { 0 };
	int r = 0, state;

	t.id = sqlite3_column_int64(st, 0);
	if (r == 0)
		r = store_col_text(st, 1, &t.name);
	if (r == 0)
		r = store_col_text(st, 2, &t.spec_json);
	if (r == 0)
		r = store_col_text(st, 3, &t.engine);
	if (r == 0)
		r = store_col_text(st, 4, &t.model);
	if (r == 0)
		r = store_col_text(st, 5, &t.label);
	state = store_study_state_from_string((const char *)sqlite3_column_text(st, 6));
	t.state = state < 0 ? STORE_STUDY_FAILED : (enum store_study_state)state;
	if (r == 0)
		r = store_col_text(st, 7, &t.message);
	t.created_usec = (uint64_t)sqlite3_column_int64(st, 8);
	t.started_usec = (uint64_t)sqlite3_column_int64(st, 9);
	t.finished_usec = (uint64_t)sqlite3_column_int64(st, 10);
	t.best_trial_id = sqlite3_column_int64(st, 11);
	t.seed = (uint64_t)sqlite3_column_int64(st, 12);
	if (r == 0)
		r = store_col_text(st, 13, &t.algorithm);
	if (r == 0)
		r = store_col_text(st, 14, &t.nlopt_version);
	if (r < 0) {
		store_study_done(&t);
		return r;
	}
	*ret = t;
	return 0;
}

int store_study_insert(struct store *s, const struct store_study *in, int64_t *ret_id, struct error *err)
{
	sqlite3_stmt *st;
	int r, rc;

	if (!in->name || !in->spec_json || !in->algorithm || !in->nlopt_version)
		return error_set(err, -EINVAL, "%s: a study needs a name, spec, algorithm and NLopt version", s->path);
	r = store_stmt(s, STMT_STUDY_INSERT, "inserting a study", &st, err);
	if (r < 0)
		return r;
	r = store_bind_text(st, 1, in->name);
	if (r == 0)
		r = store_bind_text(st, 2, in->spec_json);
	if (r == 0)
		r = store_bind_text(st, 3, in->engine);
	if (r == 0)
		r = store_bind_text(st, 4, in->model);
	if (r == 0)
		r = store_bind_text(st, 5, in->label);
	if (r == 0)
		r = store_bind_int64(st, 6, (int64_t)real_usec());
	if (r == 0)
		r = store_bind_int64(st, 7, (int64_t)in->seed);
	if (r == 0)
		r = store_bind_text(st, 8, in->algorithm);
	if (r == 0)
		r = store_bind_text(st, 9, in->nlopt_version);
	if (r < 0)
		return error_set(err, r, "%s: inserting a study: binding values failed", s->path);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if ((rc & 0xff) == SQLITE_CONSTRAINT)
		return error_set(err, -EEXIST, "%s: a study named \"%s\" exists already", s->path, in->name);
	if (rc != SQLITE_DONE)
		return store_sql_error(s, rc, "inserting a study", err);
	if (ret_id)
		*ret_id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

/* Steps a one-row SELECT of STUDY_COLS. */
static int study_get_one(struct store *s, sqlite3_stmt *st, const char *what, const char *missing,
			 struct store_study *ret, struct error *err)
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
	r = study_from_row(st, ret);
	sqlite3_reset(st);
	return r < 0 ? error_set(err, r, "%s: %s: out of memory", s->path, what) : 0;
}

int store_study_get(struct store *s, int64_t id, struct store_study *ret, struct error *err)
{
	sqlite3_stmt *st;
	char missing[64];
	int r;

	r = store_stmt(s, STMT_STUDY_GET, "reading a study", &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r < 0)
		return error_set(err, r, "%s: reading a study: binding failed", s->path);
	snprintf(missing, sizeof(missing), "no study with id %lld", (long long)id);
	return study_get_one(s, st, "reading a study", missing, ret, err);
}

int store_study_get_by_name(struct store *s, const char *name, struct store_study *ret, struct error *err)
{
	sqlite3_stmt *st;
	char missing[256];
	int r;

	r = store_stmt(s, STMT_STUDY_GET_BY_NAME, "reading a study", &st, err);
	if (r < 0)
		return r;
	r = store_bind_text(st, 1, name);
	if (r < 0)
		return error_set(err, r, "%s: reading a study: binding failed", s->path);
	snprintf(missing, sizeof(missing), "no study named \"%.200s\"", name);
	return study_get_one(s, st, "reading a study", missing, ret, err);
}

int store_study_list(struct store *s, struct store_study **ret, size_t *ret_n, struct error *err)
{
	struct store_study *a = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st;
	int r, rc;

	r = store_stmt(s, STMT_STUDY_LIST, "listing studies", &st, err);
	if (r < 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		r = store_grow((void **)&a, &cap, n, sizeof(*a));
		if (r == 0)
			r = study_from_row(st, &a[n]);
		if (r < 0) {
			sqlite3_reset(st);
			store_study_array_free(a, n);
			return error_set(err, r, "%s: listing studies: out of memory", s->path);
		}
		n++;
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		store_study_array_free(a, n);
		return store_sql_error(s, rc, "listing studies", err);
	}
	*ret = a;
	*ret_n = n;
	return 0;
}

int store_study_set_state(struct store *s, int64_t id, enum store_study_state state, const char *message,
			  struct error *err)
{
	sqlite3_stmt *st;
	int r;

	if (!store_study_state_to_string(state))
		return error_set(err, -EINVAL, "%s: invalid study state %d", s->path, (int)state);
	r = store_stmt(s, STMT_STUDY_SET_STATE, "changing a study's state", &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, id);
	if (r == 0)
		r = store_bind_text(st, 2, store_study_state_to_string(state));
	if (r == 0)
		r = store_bind_text(st, 3, message);
	if (r == 0)
		r = store_bind_int64(st, 4, (int64_t)real_usec());
	if (r < 0)
		return error_set(err, r, "%s: changing a study's state: binding failed", s->path);
	r = store_step_done(s, st, "changing a study's state", err);
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) == 0)
		return error_set(err, -ENOENT, "%s: no study with id %lld", s->path, (long long)id);
	return 0;
}

int store_study_set_best(struct store *s, int64_t study_id, int64_t trial_id, struct error *err)
{
	sqlite3_stmt *st;
	int r;

	r = store_stmt(s, STMT_STUDY_SET_BEST, "recording the best trial", &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, study_id);
	if (r == 0)
		r = store_bind_int64(st, 2, trial_id);
	if (r < 0)
		return error_set(err, r, "%s: recording the best trial: binding failed", s->path);
	r = store_step_done(s, st, "recording the best trial", err);
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) == 0)
		return error_set(err, -EINVAL, "%s: trial %lld is not a trial of study %lld", s->path,
				 (long long)trial_id, (long long)study_id);
	return 0;
}
