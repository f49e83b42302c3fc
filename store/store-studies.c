/* store-studies.c — the names of states and failure classes, and the rows
 * of the studies table (see store.h): their column table (store-rows.c reads
 * by it), inserting, reading and changing them. */
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
	[STORE_STUDY_QUEUED] = "queued",
	[STORE_STUDY_RUNNING] = "running",
	[STORE_STUDY_PAUSED] = "paused",
	[STORE_STUDY_DONE] = "done",
	[STORE_STUDY_FAILED] = "failed",
	[STORE_STUDY_CANCELLED] = "cancelled",
	[STORE_STUDY_NO_FEASIBLE] = "no_feasible_config",
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
	[STORE_FAILURE_TIME_LIMIT] = "time_limit",
	[STORE_FAILURE_LOST] = "lost",
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

bool store_study_state_is_final(enum store_study_state s)
{
	return s == STORE_STUDY_DONE || s == STORE_STUDY_NO_FEASIBLE || s == STORE_STUDY_FAILED ||
	       s == STORE_STUDY_CANCELLED;
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

/* ---- studies ---- */

#define COL(type, field) STORE_COLUMN(type, struct store_study, field)
static const struct store_column study_columns[] = {
	COL(INT64, id), COL(TEXT, name), STORE_COLUMN_AS(TEXT, struct store_study, spec_json, "spec"),
	COL(TEXT, engine), COL(TEXT, model), COL(TEXT, label),
	/* A state written by a newer goodput reads as "failed" rather than nothing. */
	STORE_COLUMN_ENUM(struct store_study, state, "state", store_study_state_from_string, STORE_STUDY_FAILED,
			  STORE_STUDY_FAILED),
	COL(TEXT, message), COL(UINT64, created_usec), COL(UINT64, started_usec), COL(UINT64, finished_usec),
	COL(INT64, best_trial_id), COL(UINT64, seed), COL(TEXT, algorithm), COL(TEXT, nlopt_version),
	COL(TEXT, preflight_json), COL(TEXT, phases_json)
};
#undef COL

const struct store_row store_study_row = { study_columns, ELEMENTSOF(study_columns), sizeof(struct store_study) };

STORE_ROW_DONE_FUNC(store_study_row, struct store_study, store_study_done)
STORE_ROW_ARRAY_FREE_FUNC(store_study_row, struct store_study, store_study_array_free)

int store_study_insert(struct store *s, const struct store_study *in, int64_t *ret_id, struct error *err)
{
	int r;

	if (!in->name || !in->spec_json || !in->algorithm || !in->nlopt_version)
		return error_set(err, -EINVAL, "%s: a study needs a name, spec, algorithm and NLopt version", s->path);
	r = store_insert(s, STMT_STUDY_INSERT, "inserting a study",
			 STORE_VALUES(STORE_TEXT(in->name), STORE_TEXT(in->spec_json), STORE_TEXT(in->engine),
				      STORE_TEXT(in->model), STORE_TEXT(in->label), STORE_INT(real_usec()),
				      STORE_INT(in->seed), STORE_TEXT(in->algorithm), STORE_TEXT(in->nlopt_version)),
			 ret_id, err);
	if (r == -EEXIST)
		return error_set(err, -EEXIST, "%s: a study named \"%s\" exists already", s->path, in->name);
	return r < 0 ? r : 0;
}

int store_study_get(struct store *s, int64_t id, struct store_study *ret, struct error *err)
{
	char missing[64];

	snprintf(missing, sizeof(missing), "no study with id %lld", (long long)id);
	return store_get(s, STMT_STUDY_GET, "reading a study", STORE_VALUES(STORE_INT(id)), missing, ret, err);
}

int store_study_get_by_name(struct store *s, const char *name, struct store_study *ret, struct error *err)
{
	char missing[256];

	snprintf(missing, sizeof(missing), "no study named \"%.200s\"", name);
	return store_get(s, STMT_STUDY_GET_BY_NAME, "reading a study", STORE_VALUES(STORE_TEXT(name)), missing, ret,
			 err);
}

int store_study_list(struct store *s, struct store_study **ret, size_t *ret_n, struct error *err)
{
	return store_list(s, STMT_STUDY_LIST, "listing studies", NULL, 0, (void **)ret, ret_n, err);
}

int store_study_set_state(struct store *s, int64_t id, enum store_study_state state, const char *message,
			  struct error *err)
{
	int r;

	if (!store_study_state_to_string(state))
		return error_set(err, -EINVAL, "%s: invalid study state %d", s->path, (int)state);
	r = store_exec(s, STMT_STUDY_SET_STATE, "changing a study's state",
		       STORE_VALUES(STORE_INT(id), STORE_TEXT(store_study_state_to_string(state)), STORE_TEXT(message),
				    STORE_INT(real_usec())),
		       err);
	if (r == 0)
		return error_set(err, -ENOENT, "%s: no study with id %lld", s->path, (long long)id);
	return r < 0 ? r : 0;
}

int store_study_set_best(struct store *s, int64_t study_id, int64_t trial_id, struct error *err)
{
	int r;

	r = store_exec(s, STMT_STUDY_SET_BEST, "recording the best trial",
		       STORE_VALUES(STORE_INT(study_id), STORE_INT(trial_id)), err);
	if (r == 0)
		return error_set(err, -EINVAL, "%s: trial %lld is not a trial of study %lld", s->path,
				 (long long)trial_id, (long long)study_id);
	return r < 0 ? r : 0;
}

static int study_set_text(struct store *s, enum store_stmt stmt, int64_t id, const char *json, const char *what,
			  struct error *err)
{
	int r = store_exec(s, stmt, what, STORE_VALUES(STORE_INT(id), STORE_TEXT(json)), err);

	if (r == 0)
		return error_set(err, -ENOENT, "%s: no study with id %lld", s->path, (long long)id);
	return r < 0 ? r : 0;
}

int store_study_set_preflight(struct store *s, int64_t id, const char *json, struct error *err)
{
	return study_set_text(s, STMT_STUDY_SET_PREFLIGHT, id, json, "recording the memory pre-flight", err);
}

int store_study_set_phases(struct store *s, int64_t id, const char *json, struct error *err)
{
	return study_set_text(s, STMT_STUDY_SET_PHASES, id, json, "recording the search phases", err);
}

int store_study_set_algorithm(struct store *s, int64_t id, const char *algorithm, struct error *err)
{
	return study_set_text(s, STMT_STUDY_SET_ALGORITHM, id, algorithm, "recording the search", err);
}
