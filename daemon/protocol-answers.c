/* protocol-answers.c — the answers to the read-only queries of the control
 * protocol (list, best, trials), built from the store alone.
 *
 * goodputd answers them on its socket from the database it writes; `goodput
 * list|best|trials --db FILE` builds the very same objects from a database
 * it opens read-only, with no daemon running. Both call these functions, so
 * the two answers cannot drift apart: a script may switch between them and
 * read the same keys. */
#include "protocol.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "json-util.h"
#include "store.h"

static int store_error(const cJSON *id, const struct error *err, int r, cJSON **ret)
{
	*ret = ctl_response_error(id, "%s", error_str(err, r));
	return *ret ? 0 : -ENOMEM;
}

/* Adds the study row (with its answer, looked up when best is NULL) as key. */
static int add_study(struct store *s, cJSON *resp, const char *key, const struct store_study *st,
		     const struct store_study_best *best)
{
	struct store_study_best b = { 0 };
	cJSON *j = NULL;
	int r;

	if (!best && store_study_best(s, st->id, &b, NULL) >= 0)
		best = &b;
	r = ctl_study_to_json(st, best, &j);
	store_study_best_done(&b);
	if (r < 0)
		return r;
	if (!cJSON_AddItemToObject(resp, key, j)) {
		cJSON_Delete(j);
		return -ENOMEM;
	}
	return 0;
}

int ctl_answer_list(struct store *s, const struct ctl_request *req, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *resp = ctl_response_ok(req->id);
	struct store_study *a = NULL;
	struct error err = { 0 };
	size_t n = 0;
	cJSON *arr;
	int r;

	if (!resp)
		return -ENOMEM;
	r = store_study_list(s, &a, &n, &err);
	if (r < 0)
		return store_error(req->id, &err, r, ret);
	arr = cJSON_AddArrayToObject(resp, "studies");
	r = arr ? 0 : -ENOMEM;
	for (size_t i = 0; i < n && r >= 0; i++) {
		struct store_study_best b = { 0 };
		bool have = store_study_best(s, a[i].id, &b, NULL) >= 0;
		cJSON *j = NULL;

		r = ctl_study_to_json(&a[i], have ? &b : NULL, &j);
		store_study_best_done(&b);
		if (r >= 0 && !cJSON_AddItemToArray(arr, j)) {
			cJSON_Delete(j);
			r = -ENOMEM;
		}
	}
	store_study_array_free(a, n);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(resp);
	return 0;
}

/* The paths of the best files of a finished study under best_dir. */
static int add_files(cJSON *resp, const char *best_dir, const char *study)
{
	static const char *const keys[][2] = { { "json", ".json" }, { "env", ".env" }, { "command", ".cmd" } };
	cJSON *files = cJSON_AddObjectToObject(resp, "files");

	if (!files)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		_cleanup_(freep) char *p = NULL;

		if (asprintf(&p, "%s/%s%s", best_dir, study, keys[i][1]) < 0 ||
		    json_add_string(files, keys[i][0], p) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The study a best request names, or the cheapest finished study for its
 * model and engine; *ret_error is an error answer instead when there is none. */
static int find_best(struct store *s, const struct ctl_request *req, struct store_study *ret_st,
		     struct store_study_best *ret_b, cJSON **ret_error)
{
	struct error err = { 0 };
	int r;

	*ret_error = NULL;
	if (!req->study) {
		r = store_best_for(s, req->model, req->engine, req->label, ret_st, ret_b, &err);
		return r < 0 ? store_error(req->id, &err, r, ret_error) : 0;
	}
	r = store_study_get_by_name(s, req->study, ret_st, &err);
	if (r == -ENOENT) {
		*ret_error = ctl_response_error(req->id, "no study named \"%s\"", req->study);
		return *ret_error ? 0 : -ENOMEM;
	}
	if (r >= 0)
		r = store_study_best(s, ret_st->id, ret_b, &err);
	if (r == -ENOENT && ret_st->state == STORE_STUDY_NO_FEASIBLE) {
		/* the study's message names the closest attempt, as tune and the report say */
		*ret_error = ctl_response_error(req->id, "study %s (%s): %s", ret_st->name,
						store_study_state_to_string(ret_st->state),
						ret_st->message ? ret_st->message : "no configuration met the SLA");
		if (*ret_error && json_add_bool(*ret_error, "no_feasible_config", true) < 0)
			*ret_error = (cJSON_Delete(*ret_error), NULL);
	} else if (r == -ENOENT)
		*ret_error = ctl_response_error(req->id, "study %s (%s) has no configuration that met the SLA yet",
						ret_st->name, store_study_state_to_string(ret_st->state));
	else if (r < 0)
		return store_error(req->id, &err, r, ret_error);
	else
		return 0;
	store_study_done(ret_st);
	return *ret_error ? 0 : -ENOMEM;
}

int ctl_answer_best(struct store *s, const struct ctl_request *req, const char *best_dir, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *resp = NULL;
	struct store_study st = { 0 };
	struct store_study_best b = { 0 };
	cJSON *bj = NULL, *error = NULL;
	int r;

	r = find_best(s, req, &st, &b, &error);
	if (r < 0 || error) {
		*ret = error;
		return r;
	}
	resp = ctl_response_ok(req->id);
	r = resp ? add_study(s, resp, "study", &st, &b) : -ENOMEM;
	if (r >= 0)
		r = json_add_bool(resp, "final", st.state == STORE_STUDY_DONE);
	if (r >= 0)
		r = ctl_best_to_json(&b, &bj);
	if (r >= 0 && !cJSON_AddItemToObject(resp, "best", bj)) {
		cJSON_Delete(bj);
		r = -ENOMEM;
	}
	if (r >= 0 && st.state == STORE_STUDY_DONE && best_dir)
		r = add_files(resp, best_dir, st.name);
	store_study_best_done(&b);
	store_study_done(&st);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(resp);
	return 0;
}

int ctl_answer_trials(struct store *s, const struct ctl_request *req, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *resp = NULL;
	struct store_study st = { 0 };
	struct store_trial *t = NULL;
	struct error err = { 0 };
	size_t n = 0;
	cJSON *arr;
	int r;

	r = store_study_get_by_name(s, req->study, &st, &err);
	if (r == -ENOENT) {
		*ret = ctl_response_error(req->id, "no study named \"%s\"", req->study);
		return *ret ? 0 : -ENOMEM;
	}
	if (r >= 0)
		r = store_trial_history(s, st.id, &t, &n, &err);
	if (r < 0) {
		store_study_done(&st);
		return store_error(req->id, &err, r, ret);
	}
	resp = ctl_response_ok(req->id);
	r = resp ? add_study(s, resp, "study", &st, NULL) : -ENOMEM;
	arr = r >= 0 ? cJSON_AddArrayToObject(resp, "trials") : NULL;
	if (!arr)
		r = -ENOMEM;
	for (size_t i = 0; i < n && r >= 0; i++) {
		cJSON *j = NULL;

		r = ctl_trial_to_json(&t[i], &j);
		if (r >= 0 && !cJSON_AddItemToArray(arr, j)) {
			cJSON_Delete(j);
			r = -ENOMEM;
		}
	}
	store_trial_array_free(t, n);
	store_study_done(&st);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(resp);
	return 0;
}
