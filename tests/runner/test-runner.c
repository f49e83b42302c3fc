/* test-runner.c — the study runner's life cycle in a dry run (virtual time,
 * no processes): a study paused and resumed, then stopped, then continued
 * by a fresh runner from the store alone, asks for exactly the trials an
 * uninterrupted run asks for, in the same order, and ends with the same
 * answer; cancel ends a study as cancelled; the status line reads as
 * goodputd's STATUS= wants it. A disk that fills up mid-study stops the
 * runner with an error naming the database, losing nothing measured, and a
 * new runner finishes the study once there is room again. The wall-time
 * budget survives a resume (what stored trials took counts) and is charged
 * with the time a deployment takes. Consecutive trials share a
 * quantization (checkpoint) whatever order the spec lists the knobs in.
 * With "search.strategy": "twin" the digital twin plans in a child process:
 * the loop keeps ticking meanwhile, each trial the twin predicted carries
 * its predicted cost, and a second study starts warm from the calibration
 * the first stored, and finishes though paused while the twin plans (the
 * child is killed and the ask made again on resume). The best the status
 * shows after every trial is the store's answer (store_study_best). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "time-util.h"
#include "engine-profile.h"
#include "json-util.h"
#include "runner.h"
#include "store.h"
#include "study.h"
#include "tests.h"

#define SPEC TEST_SOURCE_ROOT "/configs/studies/demo-sim-llama8b-l40s.json"

struct ctx {
	sd_event *e;
	unsigned trials_finished;
	unsigned pause_after, stop_after, cancel_after, full_after;
	bool stop_in_sweep; /* stop as the answer's sweep deploys */
	bool sweep_seen;
	struct store *store;
	bool paused_seen, resumed;
	enum runner_end end;
	char status_line[512];
	char message[1024];
	/* the loop's liveness while the twin plans */
	sd_event_source *ticker;
	bool planning;
	uint64_t plan_start_usec, last_tick_usec, plan_longest_usec, plan_max_gap_usec;
	unsigned plan_ticks, pause_in_plan_after;
	bool warm_seen;
	/* the live best against the store's answer after every trial */
	struct store *best_store;
	unsigned best_checked;
};

/* The runner's status shows the study's answer exactly as store_study_best gives it. */
static void check_live_best(struct ctx *c, const struct runner_status *st)
{
	struct store_study_best b = { 0 };
	struct error err = { 0 };
	int k = store_study_best(c->best_store, st->study_id, &b, &err);

	CHECK_MSG(k >= 0 || k == -ENOENT, "%s", err.msg);
	CHECK(st->have_best == (k >= 0));
	if (k >= 0) {
		CHECK(st->best_cost_per_mtok == b.cost_per_mtok && st->best_n == b.n && st->best_spread == b.spread);
		CHECK_INT_EQ(st->best_trial_id, b.trial.id);
		CHECK(st->best_max_goodput == b.trial.max_goodput);
	}
	store_study_best_done(&b);
	c->best_checked++;
}

#define TICK_USEC (20 * 1000)

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct ctx *c = userdata;
	uint64_t now = mono_usec();

	if (c->planning) {
		if (now - c->last_tick_usec > c->plan_max_gap_usec)
			c->plan_max_gap_usec = now - c->last_tick_usec;
		c->plan_ticks++;
	}
	c->last_tick_usec = now;
	(void)sd_event_source_set_time(s, now + TICK_USEC);
	return 0;
}

static int on_pause_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;
	struct runner_status st;

	runner_get_status(r, &st);
	if (st.phase == RUNNER_PLANNING)
		fprintf(stderr, "pausing while the twin plans\n");
	CHECK_INT_EQ(runner_pause(r), 0);
	return 0;
}

static void track_planning(struct ctx *c, struct runner *r, const struct runner_event *ev)
{
	uint64_t now = mono_usec();

	if (ev->status->phase == RUNNER_PLANNING && !c->planning) {
		c->planning = true;
		c->plan_start_usec = c->last_tick_usec = now;
		if (c->pause_in_plan_after && c->trials_finished == c->pause_in_plan_after) {
			c->pause_in_plan_after = 0;
			CHECK(sd_event_add_time_relative(c->e, NULL, CLOCK_MONOTONIC, 20000, 1, on_pause_timer, r) >=
			      0);
		}
	} else if (ev->status->phase != RUNNER_PLANNING && c->planning) {
		c->planning = false;
		if (now - c->plan_start_usec > c->plan_longest_usec)
			c->plan_longest_usec = now - c->plan_start_usec;
		if (now - c->last_tick_usec > c->plan_max_gap_usec)
			c->plan_max_gap_usec = now - c->last_tick_usec;
	}
	if (strstr(ev->status->twin, "warm"))
		c->warm_seen = true;
}

static int on_resume_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;

	CHECK_INT_EQ(runner_resume(r), 0);
	return 0;
}

static int on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;

	CHECK_INT_EQ(runner_stop(r), 0);
	return 0;
}

static void on_event(struct runner *r, const struct runner_event *ev, void *userdata)
{
	struct ctx *c = userdata;

	switch (ev->kind) {
	case RUNNER_EVENT_PHASE:
		track_planning(c, r, ev);
		if (ev->status->phase == RUNNER_PAUSED) {
			struct runner_status st;

			c->paused_seen = true;
			runner_get_status(r, &st);
			CHECK_INT_EQ(st.phase, RUNNER_PAUSED);
			CHECK_INT_EQ(runner_pause(r), -EALREADY);
			/* resume from the loop, not from inside the callback */
			CHECK(sd_event_add_time_relative(c->e, NULL, CLOCK_MONOTONIC, 1000, 1, on_resume_timer, r) >=
			      0);
		}
		if (ev->status->phase == RUNNER_PROBING && ev->status->trial == 1)
			runner_status_format(ev->status, c->status_line, sizeof(c->status_line));
		if (ev->trial && ev->trial->sweep && ev->trial->phase == RUNNER_DEPLOYING && !c->sweep_seen) {
			c->sweep_seen = true;
			/* from the loop, as goodputd's socket would ask it */
			if (c->stop_in_sweep)
				CHECK(sd_event_add_time_relative(c->e, NULL, CLOCK_MONOTONIC, 0, 1, on_stop_timer, r) >=
				      0);
		}
		break;
	case RUNNER_EVENT_TRIAL_FINISHED:
		c->trials_finished++;
		if (c->best_store)
			check_live_best(c, ev->status);
		if (c->trials_finished == c->pause_after)
			CHECK_INT_EQ(runner_pause(r), 0);
		if (c->trials_finished == c->stop_after)
			CHECK_INT_EQ(runner_stop(r), 0);
		if (c->trials_finished == c->cancel_after)
			CHECK_INT_EQ(runner_cancel(r), 0);
		if (c->trials_finished == c->full_after) /* the disk is full from here on */
			CHECK(store_debug_set_max_page_count(c->store, 1) == 0);
		break;
	case RUNNER_EVENT_FINISHED:
		if (c->best_store)
			check_live_best(c, ev->status);
		c->end = ev->end;
		snprintf(c->message, sizeof(c->message), "%s", ev->status->message ? ev->status->message : "");
		sd_event_exit(c->e, 0);
		break;
	default:
		break;
	}
}

static enum runner_end run_opts(struct store *s, int64_t id, struct ctx *c, uint64_t wall_usec)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	struct runner *r = NULL;
	struct runner_options o;
	struct error err = { 0 };
	int k;

	runner_options_init(&o);
	o.dry_run = true;
	o.max_wall_time_usec = wall_usec;
	CHECK(sd_event_new(&e) >= 0);
	c->e = e;
	k = runner_new(e, s, id, &o, &r, &err);
	CHECK_MSG(k >= 0, "%s", error_str(&err, k));
	CHECK(sd_event_add_time_relative(e, &c->ticker, CLOCK_MONOTONIC, TICK_USEC, 1, on_tick, c) >= 0);
	CHECK(sd_event_source_set_enabled(c->ticker, SD_EVENT_ON) >= 0);
	c->last_tick_usec = mono_usec();
	CHECK_INT_EQ(runner_start(r, on_event, c), 0);
	CHECK(sd_event_loop(e) >= 0);
	c->ticker = sd_event_source_disable_unref(c->ticker);
	runner_free(r);
	return c->end;
}

static enum runner_end run(struct store *s, int64_t id, struct ctx *c)
{
	return run_opts(s, id, c, 0);
}

static void sql(const char *path, const char *stmt)
{
	sqlite3 *db = NULL;

	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK_MSG(sqlite3_exec(db, stmt, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", stmt, sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* "key|kind|state|finished|cost" of every finished trial. */
static char *finished_list(struct store *s, int64_t id, unsigned *ret_n)
{
	struct store_trial *t = NULL;
	struct error err = { 0 };
	size_t n = 0, len = 0;
	char *buf = calloc(1, 65536);

	CHECK(buf);
	*ret_n = 0;
	CHECK(store_trial_history(s, id, &t, &n, &err) >= 0);
	for (size_t i = 0; i < n; i++)
		if (store_trial_state_is_final(t[i].state)) {
			len += (size_t)snprintf(buf + len, 65536 - len, "%s|%s|%s|%llu|%a\n", t[i].canonical_key,
						t[i].kind, store_trial_state_to_string(t[i].state),
						(unsigned long long)t[i].finished_usec, t[i].cost_per_mtok);
			(*ret_n)++;
		}
	store_trial_array_free(t, n);
	return buf;
}

/* "key|kind|state" of every trial, in order. */
static char *trial_list(struct store *s, int64_t id)
{
	struct store_trial *t = NULL;
	struct error err = { 0 };
	size_t n = 0, len = 0;
	char *buf = calloc(1, 65536);

	CHECK(buf);
	CHECK(store_trial_history(s, id, &t, &n, &err) >= 0);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, 65536 - len, "%s|%s|%s\n", t[i].canonical_key, t[i].kind,
					store_trial_state_to_string(t[i].state));
	store_trial_array_free(t, n);
	return buf;
}

static int64_t add_study(struct store *s, const char *name)
{
	_cleanup_(study_freep) struct study *st = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	struct study_options so = { 0 };
	struct error err = { 0 };
	int64_t id;
	int k;

	k = engine_profile_find("sim", NULL, &p, &err);
	CHECK_MSG(k >= 0, "%s", error_str(&err, k));
	so.extra_knobs = p->extra_knobs;
	k = study_load_file(SPEC, &so, &st, &err);
	CHECK_MSG(k >= 0, "%s", error_str(&err, k));
	k = runner_study_insert(s, st, name, &id, &err);
	CHECK_MSG(k >= 0, "%s", error_str(&err, k));
	CHECK_INT_EQ(runner_study_insert(s, st, name, &id, &err), -EEXIST);
	return id;
}

/* The edge landscape (its optimum above the initial max_num_seqs range,
 * search.extend_edges on), with a light workload and a large budget. */
static int64_t add_study_edges(struct store *s, const char *name)
{
	_cleanup_(study_freep) struct study *st = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct study_options so = { 0 };
	struct error err = { 0 };
	int64_t id;

	CHECK(engine_profile_find("sim", NULL, &p, &err) >= 0);
	so.extra_knobs = p->extra_knobs;
	CHECK(json_parse_file(TEST_SOURCE_ROOT "/bench/optimizer/landscapes/8b-l40s-edge.json", 1 << 20, &j, &err) >=
	      0);
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "workload"), "num_prompts",
					       cJSON_CreateNumber(60));
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "budget"), "max_trials",
					       cJSON_CreateNumber(60));
	CHECK_MSG(study_from_json(j, &so, &st, &err) >= 0, "%s", err.msg);
	CHECK(runner_study_insert(s, st, name, &id, &err) >= 0);
	return id;
}

/* The demo study with its search space listed tensor_parallel first. */
/* The demo study for the plain search ("search.strategy": "plain"), its
 * knobs listed TP first when tp_first. */
static int64_t add_study_plain(struct store *s, const char *name, bool tp_first)
{
	_cleanup_(study_freep) struct study *st = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct study_options so = { 0 };
	struct error err = { 0 };
	cJSON *space, *copy, *search;
	int64_t id;

	CHECK(engine_profile_find("sim", NULL, &p, &err) >= 0);
	so.extra_knobs = p->extra_knobs;
	CHECK(json_parse_file(SPEC, 1 << 20, &j, &err) >= 0);
	search = cJSON_GetObjectItemCaseSensitive(j, "search");
	CHECK(search && cJSON_AddStringToObject(search, "strategy", "plain"));
	space = cJSON_DetachItemFromObjectCaseSensitive(j, "search_space");
	CHECK(space);
	copy = cJSON_CreateObject();
	CHECK(copy);
	if (tp_first)
		CHECK(cJSON_AddItemToObject(copy, "tensor_parallel",
					    cJSON_DetachItemFromObjectCaseSensitive(space, "tensor_parallel")));
	while (space->child) {
		cJSON *item = cJSON_DetachItemViaPointer(space, space->child);

		CHECK(cJSON_AddItemToObject(copy, item->string, item));
	}
	cJSON_Delete(space);
	CHECK(cJSON_AddItemToObject(j, "search_space", copy));
	CHECK_MSG(study_from_json(j, &so, &st, &err) >= 0, "%s", err.msg);
	CHECK(runner_study_insert(s, st, name, &id, &err) >= 0);
	return id;
}

/* The demo study with "search.strategy": "twin" (and no baseline). */
static int64_t add_study_twin(struct store *s, const char *name)
{
	_cleanup_(study_freep) struct study *st = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct study_options so = { 0 };
	struct error err = { 0 };
	cJSON *search;
	int64_t id;

	CHECK(engine_profile_find("sim", NULL, &p, &err) >= 0);
	so.extra_knobs = p->extra_knobs;
	CHECK(json_parse_file(SPEC, 1 << 20, &j, &err) >= 0);
	search = cJSON_GetObjectItemCaseSensitive(j, "search");
	CHECK(search);
	cJSON_DeleteItemFromObjectCaseSensitive(search, "strategy");
	CHECK(cJSON_AddStringToObject(search, "strategy", "twin"));
	/* the twin's own trials only: what it plans is what is checked */
	CHECK(cJSON_AddFalseToObject(j, "baseline"));
	CHECK_MSG(study_from_json(j, &so, &st, &err) >= 0, "%s", err.msg);
	CHECK(runner_study_insert(s, st, name, &id, &err) >= 0);
	return id;
}

/* The search's deployments after which the next one uses another
 * quantization; *ret_qt the (quantization, tp) sequence. */
static unsigned quant_switches(struct store *s, int64_t id, char *ret_qt, size_t size)
{
	struct store_trial *t = NULL;
	struct error err = { 0 };
	char prev[32] = "";
	size_t n = 0, len = 0;
	unsigned sw = 0;

	CHECK(store_trial_history(s, id, &t, &n, &err) >= 0);
	ret_qt[0] = 0;
	for (size_t i = 0; i < n; i++) {
		_cleanup_(cJSON_Deletep) cJSON *k = cJSON_Parse(t[i].knobs_json);
		const cJSON *q = cJSON_GetObjectItemCaseSensitive(k, "quantization");
		const cJSON *tp = cJSON_GetObjectItemCaseSensitive(k, "tensor_parallel");

		CHECK(cJSON_IsString(q) && cJSON_IsNumber(tp));
		if (strstr(t[i].kind, "baseline"))
			continue; /* the engine's defaults, before the search */
		if (prev[0] && strcmp(prev, q->valuestring) != 0)
			sw++;
		snprintf(prev, sizeof(prev), "%s", q->valuestring);
		len += (size_t)snprintf(ret_qt + len, size - len, "%s/%d ", q->valuestring, tp->valueint);
	}
	store_trial_array_free(t, n);
	return sw;
}

int main(void)
{
	char dir[] = "/tmp/goodput-test-runner-XXXXXX", path[128];
	_cleanup_(store_closep) struct store *s = NULL;
	struct store_study row = { 0 };
	struct error err = { 0 };
	struct ctx c;
	int64_t a, b, x;
	char *la, *lb;

	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t.db", dir);
	CHECK(store_open(path, NULL, &s, &err) >= 0);

	/* reference: straight through; its live best is the store's answer all along */
	a = add_study(s, "straight");
	c = (struct ctx){ .best_store = s };
	CHECK_INT_EQ(run(s, a, &c), RUNNER_END_DONE);
	CHECK(c.trials_finished >= 4);
	CHECK_INT_EQ(c.best_checked, c.trials_finished + 1);
	/* the engine's defaults first: the baseline */
	CHECK_STR_CONTAINS(c.status_line, "trial 1/12 probing baseline max_num_seqs=256 max_num_batched_tokens=2048");
	/* the default is the model search: each trial it asked for carries its prediction */
	{
		struct store_trial *t = NULL;
		size_t n = 0;
		unsigned asked = 0, predicted = 0;

		CHECK(store_trial_history(s, a, &t, &n, &err) >= 0);
		for (size_t i = 0; i < n; i++)
			if (!strstr(t[i].kind, "baseline") && !strstr(t[i].kind, "confirm") &&
			    !strstr(t[i].kind, "sweep")) {
				asked++;
				predicted += isfinite(t[i].predicted_cost) && t[i].predicted_cost > 0;
			}
		store_trial_array_free(t, n);
		CHECK(asked >= 1);
		CHECK_INT_EQ(predicted, asked);
	}

	/* paused after 2, resumed, stopped after 4; then a new runner finishes it */
	b = add_study(s, "interrupted");
	c = (struct ctx){ .pause_after = 2, .stop_after = 4 };
	CHECK_INT_EQ(run(s, b, &c), RUNNER_END_STOPPED);
	CHECK(c.paused_seen);
	CHECK(store_study_get(s, b, &row, &err) >= 0);
	CHECK_INT_EQ(row.state, STORE_STUDY_RUNNING); /* resumable */
	store_study_done(&row);
	c = (struct ctx){ 0 };
	CHECK_INT_EQ(run(s, b, &c), RUNNER_END_DONE);

	la = trial_list(s, a);
	lb = trial_list(s, b);
	CHECK_STR_EQ(la, lb);
	free(la);
	free(lb);
	{
		struct store_study_best ta = { 0 }, tb = { 0 };

		CHECK(store_study_best(s, a, &ta, &err) >= 0);
		CHECK(store_study_best(s, b, &tb, &err) >= 0);
		CHECK_STR_EQ(ta.trial.canonical_key, tb.trial.canonical_key);
		CHECK(ta.cost_per_mtok == tb.cost_per_mtok && ta.n == tb.n);
		store_study_best_done(&ta);
		store_study_best_done(&tb);
	}

	/* the answer's load-step sweep: the last trial, 8 load points from 20 %
	 * to 110 % of the answer's first measurement's max rate, its sweet
	 * spot as its max rate, no cost — the study's answer does not count it */
	{
		static const double steps[] = { 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0, 1.1 };
		struct store_study_best best = { 0 };
		struct store_load_point *lp = NULL;
		struct store_trial *t = NULL;
		size_t n = 0, m = 0, sweet = SIZE_MAX;

		CHECK(store_trial_history(s, a, &t, &n, &err) >= 0);
		CHECK(n <= 13 && n >= 2);
		CHECK_STR_EQ(t[n - 1].kind, "dry-run-sweep");
		CHECK_INT_EQ(t[n - 1].state, STORE_TRIAL_DONE);
		CHECK(isnan(t[n - 1].cost_per_mtok));
		CHECK(store_study_best(s, a, &best, &err) >= 0);
		CHECK_STR_EQ(best.trial.canonical_key, t[n - 1].canonical_key);
		for (size_t i = 0; i + 1 < n; i++)
			CHECK(strstr(t[i].kind, "sweep") == NULL);
		CHECK(store_load_point_list(s, t[n - 1].id, &lp, &m, &err) >= 0);
		CHECK_INT_EQ(m, 8);
		for (size_t i = 0; i < m; i++) {
			CHECK_STR_EQ(lp[i].phase, "sweep");
			CHECK(fabs(lp[i].request_rate - steps[i] * best.trial.max_rate) <= 1e-9 * lp[i].request_rate);
			if (lp[i].sla_met &&
			    (sweet == SIZE_MAX || lp[i].good_output_throughput > lp[sweet].good_output_throughput))
				sweet = i;
		}
		CHECK(sweet != SIZE_MAX);
		CHECK(t[n - 1].max_rate == lp[sweet].request_rate);
		/* its latency grows with the load */
		CHECK(lp[7].p99_ttft_ms > lp[0].p99_ttft_ms);
		store_load_point_array_free(lp, m);
		store_trial_array_free(t, n);
		store_study_best_done(&best);
	}

	/* stopped as the sweep deploys: a new runner redoes it, the same study */
	x = add_study(s, "stopped-in-sweep");
	c = (struct ctx){ .stop_in_sweep = true };
	CHECK_INT_EQ(run(s, x, &c), RUNNER_END_STOPPED);
	CHECK(c.sweep_seen);
	c = (struct ctx){ 0 };
	CHECK_INT_EQ(run(s, x, &c), RUNNER_END_DONE);
	la = trial_list(s, a);
	lb = trial_list(s, x);
	CHECK_STR_EQ(la, lb);
	free(la);
	free(lb);

	/* cancel */
	x = add_study(s, "cancelled");
	c = (struct ctx){ .cancel_after = 1 };
	CHECK_INT_EQ(run(s, x, &c), RUNNER_END_CANCELLED);
	CHECK(store_study_get(s, x, &row, &err) >= 0);
	CHECK_INT_EQ(row.state, STORE_STUDY_CANCELLED);
	store_study_done(&row);

	/* the disk fills up after 3 trials: a clear message, a study left
	 * resumable (never failed for a cause that passes), nothing measured lost */
	{
		unsigned n_before, n_after;
		char *before, *after;

		x = add_study(s, "disk-full");
		c = (struct ctx){ .full_after = 3, .store = s };
		CHECK_INT_EQ(run(s, x, &c), RUNNER_END_DISK_FULL);
		CHECK_STR_CONTAINS(c.message, "disk full: ");
		CHECK_STR_CONTAINS(c.message, "t.db");
		CHECK_STR_CONTAINS(c.message, "disk is full");
		CHECK(store_study_get(s, x, &row, &err) >= 0);
		CHECK_INT_EQ(row.state, STORE_STUDY_RUNNING);
		store_study_done(&row);
		before = finished_list(s, x, &n_before);
		CHECK(n_before >= 3);
		fprintf(stderr, "disk full after %u finished trials: %s\n", n_before, c.message);
		/* room again: a new runner finishes the same search */
		CHECK(store_debug_set_max_page_count(s, 1u << 30) == 0);
		c = (struct ctx){ 0 };
		CHECK_INT_EQ(run(s, x, &c), RUNNER_END_DONE);
		after = finished_list(s, x, &n_after);
		CHECK(n_after > n_before);
		CHECK_MSG(strncmp(before, after, strlen(before)) == 0, "finished trials changed:\n%s---\n%s", before,
			  after);
		free(before);
		free(after);
		la = trial_list(s, a);
		lb = trial_list(s, x);
		CHECK_STR_EQ(la, lb);
		free(la);
		free(lb);
	}

	/* the wall-time budget survives a resume: stored trials took 2 x 3 s */
	{
		unsigned n;
		char *l;

		x = add_study(s, "walled");
		c = (struct ctx){ .stop_after = 2 };
		CHECK_INT_EQ(run(s, x, &c), RUNNER_END_STOPPED);
		sql(path, "UPDATE trials SET started_usec = finished_usec - 3000000 WHERE study_id ="
			  " (SELECT id FROM studies WHERE name = 'walled')");
		c = (struct ctx){ 0 };
		CHECK_INT_EQ(run_opts(s, x, &c, 5 * 1000000ULL), RUNNER_END_DONE);
		CHECK_STR_CONTAINS(c.message, "wall-time budget reached (6 s used of 5 s)");
		CHECK_INT_EQ(c.trials_finished, 0);
		l = finished_list(s, x, &n);
		CHECK_INT_EQ(n, 2);
		free(l);

		/* and charged with the deployments: 40 s each, 10 s left of 16 s */
		x = add_study(s, "deploy-charged");
		c = (struct ctx){ .stop_after = 2 };
		CHECK_INT_EQ(run(s, x, &c), RUNNER_END_STOPPED);
		sql(path,
		    "UPDATE trials SET started_usec = finished_usec - 3000000, deploy_seconds = 40 WHERE study_id ="
		    " (SELECT id FROM studies WHERE name = 'deploy-charged')");
		c = (struct ctx){ 0 };
		CHECK_INT_EQ(run_opts(s, x, &c, 16 * 1000000ULL), RUNNER_END_DONE);
		CHECK_STR_CONTAINS(c.message, "less than a deployment takes (40.0 s on average)");
		CHECK_INT_EQ(c.trials_finished, 0);
	}

	/* restart-aware order: the spec's key order no longer decides it */
	{
		char qa[1024], qx[1024];
		unsigned swa, swx;

		int64_t y = add_study_plain(s, "plain-order", false);

		/* the plain search's screen (the model search screens nothing) */
		x = add_study_plain(s, "tp-first", true);
		c = (struct ctx){ 0 };
		CHECK_INT_EQ(run(s, x, &c), RUNNER_END_DONE);
		c = (struct ctx){ 0 };
		CHECK_INT_EQ(run(s, y, &c), RUNNER_END_DONE);
		swa = quant_switches(s, y, qa, sizeof(qa));
		swx = quant_switches(s, x, qx, sizeof(qx));
		fprintf(stderr, "quantization switches: %u (%s) and, knobs listed TP first, %u (%s)\n", swa, qa, swx,
			qx);
		CHECK_STR_EQ(qa, qx);
		/* the screen covers 3 quantizations x 2 TP with 2 switches (the
		 * seed picks the quantization it starts with) */
		{
			static const char *const twice =
				"none/1 none/2 fp8/1 fp8/2 awq/1 awq/2 none/1 none/2 fp8/1 fp8/2 awq/1 awq/2 ";
			char first[39];

			snprintf(first, sizeof(first), "%.38s", qa);
			CHECK_MSG(strstr(twice, first) && first[strcspn(first, " ") - 1] == '1',
				  "the screen does not keep the quantizations together: %s", qa);
		}
	}

	/* search.extend_edges: the ranges widened are recorded as phases, and a
	 * study stopped anywhere and resumed widens and searches exactly as the
	 * straight run did */
	{
		struct store_study ra = { 0 }, rb = { 0 };
		unsigned total;

		a = add_study_edges(s, "edges");
		c = (struct ctx){ 0 };
		CHECK_INT_EQ(run(s, a, &c), RUNNER_END_DONE);
		total = c.trials_finished;
		CHECK(store_study_get(s, a, &ra, &err) >= 0);
		CHECK_MSG(ra.phases_json && strstr(ra.phases_json, "\"knob\":\"max_num_seqs\""),
			  "no widening recorded: %s", ra.phases_json ? ra.phases_json : "(none)");
		fprintf(stderr, "edges: %u trials, phases %s\n", total, ra.phases_json);
		/* the model's best, max_num_seqs 32, is the top of its range and the
		 * model predicts a third less beyond it: the range is widened after
		 * that first measurement, before the range's interior is walked */
		{
			struct study_phase ph[STUDY_PHASES_MAX];
			size_t n_ph = 0;

			CHECK_MSG(study_phases_parse(ra.phases_json, ph, ELEMENTSOF(ph), &n_ph, &err) >= 0, "%s",
				  err.msg);
			CHECK(n_ph >= 1);
			CHECK_MSG(ph[0].trials <= 2, "the range was widened after %zu trials", ph[0].trials);
		}
		la = trial_list(s, a);
		for (unsigned stop = 5; stop < total; stop += 7) {
			char name[32];

			snprintf(name, sizeof(name), "edges-%u", stop);
			b = add_study_edges(s, name);
			c = (struct ctx){ .stop_after = stop };
			CHECK_INT_EQ(run(s, b, &c), RUNNER_END_STOPPED);
			c = (struct ctx){ 0 };
			CHECK_INT_EQ(run(s, b, &c), RUNNER_END_DONE);
			lb = trial_list(s, b);
			CHECK_MSG(strcmp(la, lb) == 0, "stopped after %u and resumed: the trials differ", stop);
			CHECK(store_study_get(s, b, &rb, &err) >= 0);
			CHECK_STR_EQ(ra.phases_json, rb.phases_json);
			store_study_done(&rb);
			free(lb);
		}
		free(la);
		store_study_done(&ra);
	}

	/* the twin plans in a child: the loop ticks on meanwhile */
	{
		struct store_trial *t = NULL;
		size_t n = 0;
		unsigned predicted = 0;

		a = add_study_twin(s, "twin");
		c = (struct ctx){ 0 };
		CHECK_INT_EQ(run(s, a, &c), RUNNER_END_DONE);
		fprintf(stderr, "twin: %u trials; longest ask %.2f s, %u ticks while planning, longest gap %.0f ms\n",
			c.trials_finished, (double)c.plan_longest_usec / 1e6, c.plan_ticks,
			(double)c.plan_max_gap_usec / 1e3);
		CHECK(c.trials_finished >= 2);
		/* an ask long enough to see the loop tick through it (quiet: 180 ms) */
		CHECK_MSG(c.plan_longest_usec >= 50 * 1000, "the longest twin ask took only %.0f ms",
			  (double)c.plan_longest_usec / 1e3);
		/* a blocked loop would show one gap as long as the ask */
		CHECK_MSG(c.plan_max_gap_usec * 2 < c.plan_longest_usec, "the loop stalled %.0f ms in a %.0f ms ask",
			  (double)c.plan_max_gap_usec / 1e3, (double)c.plan_longest_usec / 1e3);
		CHECK(store_trial_history(s, a, &t, &n, &err) >= 0);
		for (size_t i = 0; i < n; i++)
			if (isfinite(t[i].predicted_cost) && t[i].predicted_cost > 0)
				predicted++;
		store_trial_array_free(t, n);
		fprintf(stderr, "twin: %u trials with a prediction\n", predicted);
		CHECK(!c.warm_seen);

		/* the first stored a calibration: this one starts warm; paused
		 * while the twin plans (the child is killed), resumed, it finishes */
		b = add_study_twin(s, "twin-paused");
		c = (struct ctx){ .pause_in_plan_after = 1 };
		CHECK_INT_EQ(run(s, b, &c), RUNNER_END_DONE);
		CHECK(c.paused_seen);
		CHECK(c.warm_seen);
		{
			struct store_twin_calibration cal = { 0 };

			CHECK(store_twin_calibration_get(s, "sim|dry-run|L40S||llama-3.1-8b", &cal, &err) >= 0);
			CHECK(cal.fit_error >= 0 && cal.fit_error < 0.5);
			CHECK_STR_CONTAINS(cal.calibration_json, "\"profile\"");
			store_twin_calibration_done(&cal);
		}
	}

	s = store_close(s);
	unlink(path);
	snprintf(path, sizeof(path), "%s/t.db-wal", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/t.db-shm", dir);
	unlink(path);
	rmdir(dir);
	return 0;
}
