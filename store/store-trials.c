/* store-trials.c — the rows of the trials table: inserting a trial once per
 * (study, canonical key, kind), moving it through its states, finishing it
 * with its outcome, the optimizer's history and resuming after a restart
 * (a study's answer is store-best.c). Changes of more than one row run
 * inside store_tx_begin/end, so they happen whole or not at all, also when
 * the disk fills up half-way. */
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

/* ---- the row ---- */

#define COL(type, field) STORE_COLUMN(type, struct store_trial, field)
static const struct store_column trial_columns[] = {
	COL(INT64, id), COL(INT64, study_id), COL(UINT32, seq), COL(TEXT, kind),
	STORE_COLUMN_AS(TEXT, struct store_trial, knobs_json, "knobs"), COL(TEXT, canonical_key),
	STORE_COLUMN_ENUM(struct store_trial, state, "state", store_trial_state_from_string, STORE_TRIAL_FAILED,
			  STORE_TRIAL_FAILED),
	/* A class written by a newer goodput reads as "crashed" rather than nothing. */
	STORE_COLUMN_ENUM(struct store_trial, failure, "failure_class", store_failure_from_string, STORE_FAILURE_NONE,
			  STORE_FAILURE_CRASHED),
	COL(TEXT, failure_message), COL(DOUBLE, deploy_seconds), COL(DOUBLE, max_rate), COL(DOUBLE, max_goodput),
	COL(DOUBLE, concurrency), COL(DOUBLE, cost_per_mtok), COL(UINT64, started_usec), COL(UINT64, finished_usec),
	COL(TEXT, log_path), COL(INT64, server_pgid), COL(TEXT, server_unit), COL(TEXT, host_json),
	COL(DOUBLE, predicted_cost), COL(TEXT, gpus), COL(TEXT, oom_cause), COL(UINT32, suggested_max_model_len),
	STORE_COLUMN_AS(TEXT, struct store_trial, launch_json, "launch"), COL(INT64, job_id), COL(TEXT, job_node),
	COL(DOUBLE, pending_seconds), COL(UINT32, job_lost), COL(TEXT, server_identity)
};
#undef COL

const struct store_row store_trial_row = { trial_columns, ELEMENTSOF(trial_columns), sizeof(struct store_trial) };

STORE_ROW_DONE_FUNC(store_trial_row, struct store_trial, store_trial_done)
STORE_ROW_ARRAY_FREE_FUNC(store_trial_row, struct store_trial, store_trial_array_free)

/* Ends an UPDATE of one trial by id (r: store_exec's result): no trial with
 * that id is an error. */
static int trial_updated(struct store *s, int r, int64_t id, struct error *err)
{
	if (r == 0)
		return error_set(err, -ENOENT, "%s: no trial with id %lld", s->path, (long long)id);
	return r < 0 ? r : 0;
}

/* Sets one column of a trial (the statement's ?2) by its id (?1). */
static int trial_set(struct store *s, enum store_stmt stmt, const char *what, int64_t id, struct store_value v,
		     struct error *err)
{
	return trial_updated(s, store_exec(s, stmt, what, STORE_VALUES(STORE_INT(id), v), err), id, err);
}

/* ---- inserting and reading ---- */

static int trial_insert_locked(struct store *s, int64_t study_id, const char *kind, const char *knobs_json,
			       const char *key, int64_t *ret_id, struct error *err)
{
	const char *what = "inserting a trial";
	struct store_trial t;
	sqlite3_stmt *st;
	int64_t seq;
	int r;

	r = store_step_once(s, STMT_TRIAL_NEXT_SEQ, what, STORE_VALUES(STORE_INT(study_id)), &st, err);
	if (r < 0)
		return r;
	if (r != SQLITE_ROW)
		return error_set(err, -EIO, "%s: %s: no next sequence number", s->path, what);
	seq = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	r = store_insert(s, STMT_TRIAL_INSERT, what,
			 STORE_VALUES(STORE_INT(study_id), STORE_INT(seq), STORE_TEXT(kind), STORE_TEXT(knobs_json),
				      STORE_TEXT(key)),
			 ret_id, err);
	if (r == -EEXIST)
		return error_set(err, -ENOENT, "%s: %s: no study with id %lld", s->path, what, (long long)study_id);
	if (r != 0)
		return r;
	/* It existed: hand back its id. */
	r = store_trial_find(s, study_id, kind, key, &t, err);
	if (r < 0)
		return r;
	*ret_id = t.id;
	store_trial_done(&t);
	return 0;
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
	char missing[64];

	snprintf(missing, sizeof(missing), "no trial with id %lld", (long long)id);
	return store_get(s, STMT_TRIAL_GET, "reading a trial", STORE_VALUES(STORE_INT(id)), missing, ret, err);
}

int store_trial_find(struct store *s, int64_t study_id, const char *kind, const char *canonical_key,
		     struct store_trial *ret, struct error *err)
{
	char missing[256];

	snprintf(missing, sizeof(missing), "study %lld has no %.20s trial \"%.150s\"", (long long)study_id,
		 kind ? kind : "?", canonical_key ? canonical_key : "?");
	return store_get(s, STMT_TRIAL_FIND, "finding a trial",
			 STORE_VALUES(STORE_INT(study_id), STORE_TEXT(kind), STORE_TEXT(canonical_key)), missing, ret,
			 err);
}

int store_trial_history(struct store *s, int64_t study_id, struct store_trial **ret, size_t *ret_n, struct error *err)
{
	return store_list(s, STMT_TRIAL_HISTORY, "reading a study's history", STORE_VALUES(STORE_INT(study_id)),
			  (void **)ret, ret_n, err);
}

/* ---- changing ---- */

static int trial_set_state_locked(struct store *s, int64_t id, enum store_trial_state state, struct error *err)
{
	const char *what = "changing a trial's state";
	int r;

	r = store_exec(s, STMT_TRIAL_SET_STATE, what,
		       STORE_VALUES(STORE_INT(id), STORE_TEXT(store_trial_state_to_string(state))), err);
	r = trial_updated(s, r, id, err);
	if (r < 0 || state != STORE_TRIAL_DEPLOYING)
		return r;
	/* A new attempt: forget what an interrupted one measured. */
	r = store_exec(s, STMT_LP_DELETE_TRIAL, what, STORE_VALUES(STORE_INT(id)), err);
	if (r >= 0)
		r = store_exec(s, STMT_TRIAL_CLEAR_OUTCOME, what, STORE_VALUES(STORE_INT(id)), err);
	if (r >= 0)
		r = store_exec(s, STMT_TRIAL_SET_STARTED, what, STORE_VALUES(STORE_INT(id), STORE_INT(real_usec())),
			       err);
	return r < 0 ? r : 0;
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

int store_trial_set_server(struct store *s, int64_t id, const struct store_server *server, const char *log_path,
			   struct error *err)
{
	/* A pgid of 0 clears it: NULL, like the unit. */
	const struct store_value pgid = server && server->pgid > 0 ? (struct store_value)STORE_INT(server->pgid)
								   : (struct store_value)STORE_TEXT(NULL);
	int r;

	r = store_exec(s, STMT_TRIAL_SET_SERVER, "recording a trial's server",
		       STORE_VALUES(STORE_INT(id), pgid, STORE_TEXT(server ? server->unit : NULL), STORE_TEXT(log_path),
				    STORE_TEXT(server && server->pgid > 0 ? server->identity : NULL)),
		       err);
	/* cleared: the servers of its roles too */
	if (r > 0 && !server) {
		int k = store_exec(s, STMT_TRIAL_CLEAR_SERVERS, "clearing a trial's servers",
				   STORE_VALUES(STORE_INT(id)), err);

		if (k < 0)
			return k;
	}
	return trial_updated(s, r, id, err);
}

int store_trial_set_host(struct store *s, int64_t id, const char *host_json, struct error *err)
{
	return trial_set(s, STMT_TRIAL_SET_HOST, "recording a trial's host", id,
			 (struct store_value)STORE_TEXT(host_json), err);
}

int store_trial_set_predicted_cost(struct store *s, int64_t id, double cost, struct error *err)
{
	return trial_set(s, STMT_TRIAL_SET_PREDICTED, "recording a trial's predicted cost", id,
			 (struct store_value)STORE_DOUBLE(cost), err);
}

int store_trial_set_gpus(struct store *s, int64_t id, const char *gpus, struct error *err)
{
	return trial_set(s, STMT_TRIAL_SET_GPUS, "recording a trial's GPUs", id, (struct store_value)STORE_TEXT(gpus),
			 err);
}

int store_trial_set_launch(struct store *s, int64_t id, const char *launch_json, struct error *err)
{
	return trial_set(s, STMT_TRIAL_SET_LAUNCH, "recording a trial's launch command", id,
			 (struct store_value)STORE_TEXT(launch_json), err);
}

int store_trial_set_job(struct store *s, int64_t id, int64_t job_id, const char *log_path, struct error *err)
{
	const struct store_value job =
		job_id > 0 ? (struct store_value)STORE_INT(job_id) : (struct store_value)STORE_TEXT(NULL);

	return trial_updated(s,
			     store_exec(s, STMT_TRIAL_SET_JOB, "recording a trial's job",
					STORE_VALUES(STORE_INT(id), job, STORE_TEXT(log_path)), err),
			     id, err);
}

int store_trial_set_job_start(struct store *s, int64_t id, const char *node, const char *gpus, double pending_seconds,
			      struct error *err)
{
	int r;

	r = store_exec(s, STMT_TRIAL_SET_JOB_START, "recording where a trial's job runs",
		       STORE_VALUES(STORE_INT(id), STORE_TEXT(node), STORE_DOUBLE(pending_seconds), STORE_TEXT(gpus)),
		       err);
	return trial_updated(s, r, id, err);
}

int store_trial_job_lost(struct store *s, int64_t id, struct error *err)
{
	return trial_updated(
		s, store_exec(s, STMT_TRIAL_JOB_LOST, "counting a trial's lost job", STORE_VALUES(STORE_INT(id)), err),
		id, err);
}

int store_trial_set_times(struct store *s, int64_t id, uint64_t started_usec, uint64_t finished_usec, struct error *err)
{
	int r;

	r = store_exec(s, STMT_TRIAL_SET_TIMES, "recording a trial's times",
		       STORE_VALUES(STORE_INT(id), STORE_INT(started_usec), STORE_INT(finished_usec)), err);
	return trial_updated(s, r, id, err);
}

int store_trial_finish(struct store *s, int64_t id, const struct store_trial_outcome *o, struct error *err)
{
	const char *what = "finishing a trial";
	int r;

	if (!store_trial_state_is_final(o->state))
		return error_set(err, -EINVAL, "%s: %s: state %s is not final", s->path, what, state_name(o->state));
	if (!store_failure_to_string(o->failure))
		return error_set(err, -EINVAL, "%s: %s: invalid failure class %d", s->path, what, (int)o->failure);
	r = store_exec(
		s, STMT_TRIAL_FINISH, what,
		STORE_VALUES(STORE_INT(id), STORE_TEXT(store_trial_state_to_string(o->state)),
			     STORE_TEXT(o->failure == STORE_FAILURE_NONE ? NULL : store_failure_to_string(o->failure)),
			     STORE_TEXT(o->failure_message), STORE_DOUBLE(o->deploy_seconds), STORE_DOUBLE(o->max_rate),
			     STORE_DOUBLE(o->max_goodput), STORE_DOUBLE(o->concurrency), STORE_DOUBLE(o->cost_per_mtok),
			     STORE_INT(o->finished_usec ? o->finished_usec : real_usec()), STORE_TEXT(o->oom_cause),
			     o->suggested_max_model_len ? (struct store_value)STORE_INT(o->suggested_max_model_len)
							: (struct store_value)STORE_TEXT(NULL)),
		err);
	return trial_updated(s, r, id, err);
}

int store_study_resume(struct store *s, int64_t study_id, struct error *err)
{
	return store_exec(s, STMT_TRIAL_INTERRUPT, "marking interrupted trials", STORE_VALUES(STORE_INT(study_id)),
			  err);
}
