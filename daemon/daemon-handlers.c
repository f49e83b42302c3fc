/* daemon-handlers.c — goodputd's answers on the control socket, one
 * function per command of protocol.h.
 *
 * control.c has parsed the line and refused state-changing commands from
 * unprivileged peers; here each request is answered at once from the store
 * and the runner's status (a few indexed SQLite reads), never waiting for
 * anything, so 200 clients asking for `best` while a study runs cost the
 * loop a few milliseconds. A submitted spec is validated exactly as
 * `goodput tune` validates it (study_from_json against the engine profile)
 * before it is queued.
 *
 * `best` is what clients poll, often many at once, and a large study's
 * `trials` and Markdown `report` cost milliseconds each, so these answers
 * are kept (DAEMON_ANSWER_CACHE_MAX of them, the JSON already printed) and
 * served without touching SQLite while the store's epoch (store_epoch: it
 * moves with every row written, but the load points a running trial adds)
 * is the one they were computed at (a report, which names its time, for a
 * few seconds at most); a scheduling step, submit, cancel, pause, resume
 * and a reload of the engine profiles clear them all. Who asks how often is
 * control.c's business (each uid's budget of the loop's time). So a running
 * study's load points cost no recomputation, which takes the first client
 * of a burst 0.6-0.8 ms (most of it parsing the study's spec and engine
 * profile again for the findings). */
#include "daemon-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "engine-profile.h"
#include "json-util.h"
#include "report.h"
#include "log.h"
#include "utf8.h"

static cJSON *oom(void)
{
	return NULL; /* control.c answers "out of memory" */
}

static cJSON *store_error(const struct ctl_request *req, const struct error *err, int r)
{
	return ctl_response_error(req->id, "%s", error_str(err, r));
}

/* The study with its answer (best, when the caller has it: else looked up). */
static int add_study_best(struct daemon *d, cJSON *resp, const char *key, const struct store_study *st,
			  const struct store_study_best *best)
{
	struct store_study_best b = { 0 };
	cJSON *j = NULL;
	int r;

	if (!best && store_study_best(d->store, st->id, &b, NULL) >= 0)
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

static int add_study(struct daemon *d, cJSON *resp, const char *key, const struct store_study *st)
{
	return add_study_best(d, resp, key, st, NULL);
}

/* Every trial in flight: its number, GPUs, phase and knobs. */
static int add_trials(const struct runner *r, cJSON *current)
{
	struct runner_trial_status list[32];
	size_t n = runner_get_trials(r, list, ELEMENTSOF(list));
	cJSON *a = cJSON_AddArrayToObject(current, "trials");

	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < n && i < ELEMENTSOF(list); i++) {
		const struct runner_trial_status *t = &list[i];
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o)) {
			cJSON_Delete(o);
			return -ENOMEM;
		}
		if (json_add_number(o, "trial", t->seq) < 0 ||
		    json_add_number(o, "trial_id", (double)t->trial_id) < 0 ||
		    json_add_string(o, "phase", runner_phase_to_string(t->phase)) < 0 ||
		    json_add_string(o, "gpus", t->gpus) < 0 || json_add_string(o, "knobs", t->knobs) < 0 ||
		    json_add_bool(o, "confirming", t->confirming) < 0 || json_add_bool(o, "sweep", t->sweep) < 0 ||
		    json_add_number(o, "load_points", t->load_points) < 0 ||
		    json_add_number(o, "current_rate", t->current_rate) < 0)
			return -ENOMEM;
		/* a job on a cluster: which, how long it waited (or has been waiting) and why */
		if (t->job_id &&
		    (json_add_number(o, "job_id", (double)t->job_id) < 0 ||
		     (isfinite(t->pending_seconds) && json_add_number(o, "pending_seconds", t->pending_seconds) < 0) ||
		     (t->pending_reason[0] && json_add_string(o, "pending_reason", t->pending_reason) < 0)))
			return -ENOMEM;
	}
	return 0;
}

static int add_current(struct daemon *d, cJSON *resp)
{
	struct runner_status st;
	cJSON *j;

	if (!d->runner)
		return cJSON_AddNullToObject(resp, "current") ? 0 : -ENOMEM;
	runner_get_status(d->runner, &st);
	j = cJSON_AddObjectToObject(resp, "current");
	if (!j || json_add_string(j, "study", st.study_name ? st.study_name : "") < 0 ||
	    json_add_string(j, "phase", runner_phase_to_string(st.phase)) < 0 ||
	    json_add_number(j, "trial", st.trial) < 0 || json_add_number(j, "max_trials", st.max_trials) < 0 ||
	    json_add_number(j, "trial_id", (double)st.trial_id) < 0 ||
	    json_add_bool(j, "confirming", st.confirming) < 0 || json_add_string(j, "knobs", st.knobs) < 0 ||
	    json_add_number(j, "load_points", st.load_points) < 0 ||
	    json_add_number(j, "current_rate", st.current_rate) < 0 ||
	    json_add_number(j, "gpus_busy", st.gpus_busy) < 0 || json_add_number(j, "gpus_total", st.gpus_total) < 0 ||
	    add_trials(d->runner, j) < 0)
		return -ENOMEM;
	/* the live report goodputd rewrites after every trial, and the time left */
	{
		_cleanup_(freep) char *path = NULL;
		struct store_study row = { .id = st.study_id, .name = (char *)(st.study_name ? st.study_name : "") };

		if (daemon_report_path(d, &row, &path) == -ENOMEM)
			return -ENOMEM;
		if (path ? json_add_string(j, "report", path) < 0 : !cJSON_AddNullToObject(j, "report"))
			return -ENOMEM;
		if (st.eta_usec == USEC_INFINITY ? !cJSON_AddNullToObject(j, "eta_seconds")
						 : json_add_number(j, "eta_seconds", usec_to_sec(st.eta_usec)) < 0)
			return -ENOMEM;
	}
	if (st.have_best) {
		if (json_add_number(j, "best_cost_per_mtok", st.best_cost_per_mtok) < 0 ||
		    json_add_number(j, "best_measurements", st.best_n) < 0 ||
		    json_add_number(j, "best_spread", st.best_spread) < 0 ||
		    json_add_number(j, "best_max_goodput", st.best_max_goodput) < 0 ||
		    json_add_string(j, "best_knobs", st.best_knobs) < 0)
			return -ENOMEM;
	} else if (!cJSON_AddNullToObject(j, "best_cost_per_mtok"))
		return -ENOMEM;
	return 0;
}

static cJSON *handle_status(struct daemon *d, const struct ctl_request *req)
{
	_cleanup_(cJSON_Deletep) cJSON *resp = ctl_response_ok(req->id);
	struct store_study *a = NULL;
	struct error err = { 0 };
	size_t n = 0;
	cJSON *queue;
	int r;

	if (!resp)
		return oom();
	r = store_study_list(d->store, &a, &n, &err);
	/* with the database lost, status still says so (the rest answers its error) */
	if (r < 0 && d->state != DAEMON_FAILED)
		return store_error(req, &err, r);
	queue = cJSON_AddArrayToObject(resp, "queue");
	for (size_t i = 0; queue && i < n; i++) {
		if (a[i].state != STORE_STUDY_QUEUED && a[i].state != STORE_STUDY_RUNNING &&
		    a[i].state != STORE_STUDY_PAUSED)
			continue;
		if (!cJSON_AddItemToArray(queue, cJSON_CreateString(a[i].name)))
			queue = NULL;
	}
	store_study_array_free(a, n);
	if (!queue || json_add_string(resp, "version", GOODPUT_VERSION) < 0 ||
	    json_add_number(resp, "pid", getpid()) < 0 ||
	    json_add_number(resp, "uptime_seconds", usec_to_sec(mono_usec() - d->start_usec)) < 0 ||
	    json_add_string(resp, "state", daemon_state_to_string(d->state)) < 0 ||
	    json_add_string(resp, "status", d->status) < 0 || json_add_bool(resp, "dry_run", d->dry_run) < 0 ||
	    json_add_string(resp, "state_dir", d->state_dir) < 0 ||
	    json_add_number(resp, "connections", d->ctl ? ctl_server_n_connections(d->ctl) : 0) < 0 ||
	    add_current(d, resp) < 0 || daemon_watch_status_json(d, resp) < 0)
		return oom();
	return TAKE_PTR(resp);
}

/* list, best and trials: the store's answers (protocol-answers.c), the
 * same objects `goodput list|best|trials --db` builds offline. */
static cJSON *handle_list(struct daemon *d, const struct ctl_request *req)
{
	cJSON *resp = NULL;

	return ctl_answer_list(d->store, req, &resp) < 0 ? oom() : resp;
}

static cJSON *handle_best(struct daemon *d, const struct ctl_request *req)
{
	cJSON *resp = NULL;

	struct error err = { 0 };

	if (ctl_answer_best(d->store, req, d->best_dir, &resp) < 0)
		return oom();
	/* what the study found beside its answer: the defaults, the edge */
	if (report_best_findings(d->store, d->config->engines_dir, resp, &err) < 0)
		log_debug("best: %s", error_str(&err, -EIO));
	return resp;
}

void daemon_answer_cache_clear(struct daemon *d)
{
	for (size_t i = 0; i < DAEMON_ANSWER_CACHE_MAX; i++) {
		free(d->answer_cache[i].key);
		free(d->answer_cache[i].body);
		d->answer_cache[i] = (struct daemon_answer_entry){ 0 };
	}
	d->answer_cache_next = 0;
}

/* The command, then length-prefixed fields, so that no two questions share
 * a key. */
static char *answer_cache_key(const struct ctl_request *req)
{
	const char *cmd = ctl_command_to_string(req->command);
	char *k = NULL;
	int n;

	if (req->study)
		n = asprintf(&k, "%s s%zu:%s", cmd, strlen(req->study), req->study);
	else
		n = asprintf(&k, "%s m%zu:%s%zu:%s%s%zu:%s", cmd, strlen(req->model), req->model, strlen(req->engine),
			     req->engine, req->label ? "l" : "-", req->label ? strlen(req->label) : 0,
			     req->label ? req->label : "");
	return n < 0 ? NULL : k;
}

/* The cached body with the request's id spliced in after "ok" (the body
 * always starts {"ok":true, or {"ok":false,), as a raw JSON item that
 * control.c prints verbatim. */
static cJSON *answer_cached(const char *body, const cJSON *id)
{
	_cleanup_(freep) char *line = NULL;
	_cleanup_(cjson_freep) char *idj = NULL;
	const char *comma;

	if (!id)
		return cJSON_CreateRaw(body);
	comma = strchr(body, ',');
	idj = cJSON_PrintUnformatted(id);
	if (!comma || !idj || asprintf(&line, "%.*s\"id\":%s,%s", (int)(comma + 1 - body), body, idj, comma + 1) < 0)
		return NULL;
	return cJSON_CreateRaw(line);
}

typedef cJSON *(*answer_fn)(struct daemon *d, const struct ctl_request *req);

/* Answers req from the cache while the store is as it was when the answer
 * was computed (and, with max_age_usec, for at most that long: a running
 * study's report names its time), else computes it with fn and keeps it.
 * What many clients ask, often (best), and what costs the loop
 * milliseconds (a large study's trials and report) then cost it nothing
 * until a trial changes the store. */
static cJSON *answer_with_cache(struct daemon *d, const struct ctl_request *req, answer_fn fn, uint64_t max_age_usec)
{
	_cleanup_(freep) char *key = answer_cache_key(req);
	struct ctl_request q = *req;
	struct daemon_answer_entry *e = NULL;
	uint64_t epoch = store_epoch(d->store), now = mono_usec();
	cJSON *resp;
	char *body;

	if (!key)
		return oom();
	for (size_t i = 0; i < DAEMON_ANSWER_CACHE_MAX; i++)
		if (d->answer_cache[i].key && strcmp(d->answer_cache[i].key, key) == 0) {
			if (d->answer_cache[i].epoch == epoch && now < d->answer_cache[i].expires_usec)
				return answer_cached(d->answer_cache[i].body, req->id);
			e = &d->answer_cache[i]; /* the store has changed since: answer again, here */
			break;
		}

	q.id = NULL;
	resp = fn(d, &q);
	if (!resp)
		return oom();
	body = cJSON_PrintUnformatted(resp);
	cJSON_Delete(resp);
	if (!body)
		return oom();
	/* Sent raw from now on (control.h): checked once, here. */
	if (!utf8_is_valid(body, strlen(body))) {
		char *fixed = utf8_sanitize(body);

		cJSON_free(body);
		if (!fixed)
			return oom();
		body = fixed;
	}
	if (strlen(body) > DAEMON_ANSWER_CACHE_BODY_MAX) {
		/* too large to keep: answered once, computed again next time */
		resp = answer_cached(body, req->id);
		free(body);
		return resp;
	}
	if (!e) {
		e = &d->answer_cache[d->answer_cache_next];
		d->answer_cache_next = (d->answer_cache_next + 1) % DAEMON_ANSWER_CACHE_MAX;
	}
	free(e->key);
	free(e->body);
	e->key = TAKE_PTR(key);
	e->body = body;
	e->epoch = epoch;
	e->expires_usec = max_age_usec ? now + max_age_usec : USEC_INFINITY;
	return answer_cached(e->body, req->id);
}

static cJSON *handle_trials(struct daemon *d, const struct ctl_request *req)
{
	cJSON *resp = NULL;

	return ctl_answer_trials(d->store, req, &resp) < 0 ? oom() : resp;
}

/* Fills a missing gpu.price_per_gpu_hour from the configured prices (a
 * CPU host is priced per core-hour, by its spec alone). */
static int apply_default_price(struct daemon *d, cJSON *spec)
{
	cJSON *gpu = cJSON_GetObjectItemCaseSensitive(spec, "gpu");
	const cJSON *type;
	double price;

	if (!cJSON_IsObject(gpu) || cJSON_GetObjectItemCaseSensitive(gpu, "price_per_gpu_hour") ||
	    cJSON_GetObjectItemCaseSensitive(gpu, "price_per_core_hour"))
		return 0;
	type = cJSON_GetObjectItemCaseSensitive(gpu, "type");
	if (!cJSON_IsString(type) || strcasecmp(type->valuestring, "cpu") == 0 ||
	    daemon_config_price(d->config, type->valuestring, &price) < 0)
		return 0;
	return json_add_number(gpu, "price_per_gpu_hour", price);
}

static cJSON *handle_submit(struct daemon *d, const struct ctl_peer *peer, const struct ctl_request *req)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(cJSON_Deletep) cJSON *spec = NULL, *resp = NULL;
	_cleanup_(study_freep) struct study *s = NULL;
	struct study_options so = { 0 };
	struct store_study st = { 0 };
	const char *engine = NULL;
	struct error err = { 0 };
	size_t open = 0;
	int64_t id = 0;
	int r;

	spec = cJSON_Duplicate(req->spec, true);
	if (!spec || apply_default_price(d, spec) < 0)
		return oom();
	r = json_require_string(spec, "", "engine", 256, &engine, &err);
	if (r < 0)
		return ctl_response_error(req->id, "%s", error_str(&err, r));
	r = engine_profile_find(engine, d->config->engines_dir, &p, &err);
	if (r < 0)
		return ctl_response_error(req->id, "%s", error_str(&err, r));
	so.extra_knobs = (const char *const *)p->extra_knobs;
	r = study_from_json(spec, &so, &s, &err);
	if (r >= 0 && !d->dry_run)
		r = engine_profile_check_study(p, s, &err);
	if (r < 0)
		return ctl_response_error(req->id, "%s", error_str(&err, r));

	r = daemon_queue_count(d, &open);
	if (r >= 0 && open >= d->config->limits.max_queued_studies)
		return ctl_response_error(req->id, "the queue is full (%zu studies; limits.max_queued_studies)", open);
	r = runner_study_insert(d->store, s, NULL, &id, &err);
	if (r == -EEXIST)
		return ctl_response_error(req->id, "a study named \"%s\" exists already: give the new one another name",
					  s->name);
	if (r < 0)
		return store_error(req, &err, r);
	log_info("study %s submitted by uid %u (pid %d)", s->name, (unsigned)peer->uid, (int)peer->pid);
	daemon_answer_cache_clear(d);
	daemon_schedule(d);

	r = store_study_get(d->store, id, &st, &err);
	if (r < 0)
		return store_error(req, &err, r);
	resp = ctl_response_ok(req->id);
	r = resp ? add_study(d, resp, "study", &st) : -ENOMEM;
	if (r >= 0)
		r = json_add_number(resp, "position", (double)open + 1);
	store_study_done(&st);
	return r < 0 ? oom() : TAKE_PTR(resp);
}

/* The study a pause/resume without a name acts on: the head of the queue,
 * or for resume the first paused study. */
static int pick_target(struct daemon *d, bool want_paused, struct store_study *ret, struct error *err)
{
	struct store_study *a = NULL;
	size_t n = 0;
	int r;

	r = store_study_list(d->store, &a, &n, err);
	if (r < 0)
		return r;
	r = -ENOENT;
	for (size_t i = 0; i < n; i++) {
		bool match = want_paused ? a[i].state == STORE_STUDY_PAUSED
					 : (a[i].state == STORE_STUDY_QUEUED || a[i].state == STORE_STUDY_RUNNING ||
					    a[i].state == STORE_STUDY_PAUSED);
		if (match) {
			*ret = a[i];
			a[i] = (struct store_study){ 0 };
			r = 0;
			break;
		}
	}
	store_study_array_free(a, n);
	return r;
}

static cJSON *answer_state(struct daemon *d, const struct ctl_request *req, int64_t id, const char *note)
{
	_cleanup_(cJSON_Deletep) cJSON *resp = ctl_response_ok(req->id);
	struct store_study st = { 0 };
	struct error err = { 0 };
	int r;

	if (!resp)
		return oom();
	r = store_study_get(d->store, id, &st, &err);
	if (r < 0)
		return store_error(req, &err, r);
	r = add_study(d, resp, "study", &st);
	if (r >= 0 && note)
		r = json_add_string(resp, "note", note);
	store_study_done(&st);
	return r < 0 ? oom() : TAKE_PTR(resp);
}

static cJSON *handle_change(struct daemon *d, const struct ctl_peer *peer, const struct ctl_request *req)
{
	struct store_study st = { 0 };
	struct error err = { 0 };
	bool ours;
	const char *note = NULL;
	char msg[128];
	cJSON *resp;
	int r;

	if (req->study)
		r = store_study_get_by_name(d->store, req->study, &st, &err);
	else
		r = pick_target(d, req->command == CTL_RESUME, &st, &err);
	if (r == -ENOENT && req->study)
		return ctl_response_error(req->id, "no study named \"%s\"", req->study);
	if (r == -ENOENT) {
		resp = ctl_response_ok(req->id);
		if (resp &&
		    (!cJSON_AddNullToObject(resp, "study") ||
		     json_add_string(resp, "note",
				     req->command == CTL_RESUME ? "nothing is paused" : "nothing is queued") < 0))
			cJSON_Delete(resp), resp = NULL;
		return resp;
	}
	if (r < 0)
		return store_error(req, &err, r);
	if (store_study_state_is_final(st.state)) {
		resp = ctl_response_error(req->id, "study %s has finished (%s)", st.name,
					  store_study_state_to_string(st.state));
		store_study_done(&st);
		return resp;
	}
	ours = d->runner && d->runner_study_id == st.id;
	snprintf(msg, sizeof(msg), "%s by uid %u", req->command == CTL_CANCEL ? "cancelled" : "paused",
		 (unsigned)peer->uid);

	switch (req->command) {
	case CTL_CANCEL:
		if (ours) {
			r = runner_cancel(d->runner);
			note = r == -EALREADY ? "already stopping" : "cancelling: the trial in flight is torn down";
			r = 0;
		} else
			r = store_study_set_state(d->store, st.id, STORE_STUDY_CANCELLED, msg, &err);
		break;
	case CTL_PAUSE:
		if (ours) {
			r = runner_pause(d->runner);
			note = r == -EALREADY ? "already paused"
					      : "pausing: the trial in flight is torn down and redone on resume";
			r = 0;
		} else if (st.state == STORE_STUDY_PAUSED) {
			note = "already paused";
		} else
			r = store_study_set_state(d->store, st.id, STORE_STUDY_PAUSED, NULL, &err);
		break;
	case CTL_RESUME:
		if (ours) {
			r = runner_resume(d->runner);
			note = r < 0 ? "not paused" : "resumed";
			r = 0;
		} else if (st.state != STORE_STUDY_PAUSED) {
			note = "not paused";
		} else
			r = store_study_set_state(d->store, st.id,
						  st.started_usec ? STORE_STUDY_RUNNING : STORE_STUDY_QUEUED, NULL,
						  &err);
		break;
	default:
		break;
	}
	if (r < 0) {
		resp = store_error(req, &err, r);
		store_study_done(&st);
		return resp;
	}
	log_info("study %s: %s by uid %u (pid %d)", st.name, ctl_command_to_string(req->command), (unsigned)peer->uid,
		 (int)peer->pid);
	daemon_answer_cache_clear(d);
	daemon_schedule(d);
	resp = answer_state(d, req, st.id, note);
	store_study_done(&st);
	return resp;
}

cJSON *daemon_handle_request(const struct ctl_peer *peer, const struct ctl_request *req, void *userdata)
{
	struct daemon *d = userdata;

	switch (req->command) {
	case CTL_STATUS:
		return handle_status(d, req);
	case CTL_LIST:
		return handle_list(d, req);
	case CTL_BEST:
		return answer_with_cache(d, req, handle_best, 0);
	case CTL_TRIALS:
		return answer_with_cache(d, req, handle_trials, 0);
	case CTL_SUBMIT:
		return handle_submit(d, peer, req);
	case CTL_CANCEL:
	case CTL_PAUSE:
	case CTL_RESUME:
		return handle_change(d, peer, req);
	case CTL_REPORT:
		/* the Markdown names the time it was made: kept a few seconds at most */
		if (!req->html)
			return answer_with_cache(d, req, daemon_report_markdown, DAEMON_REPORT_MAX_AGE_USEC);
		return daemon_handle_report(d, peer, req);
	default:
		return ctl_response_error(req->id, "unknown command");
	}
}
