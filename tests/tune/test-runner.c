/* test-runner.c — the study runner's life cycle in a dry run (virtual time,
 * no processes): a study paused and resumed, then stopped, then continued
 * by a fresh runner from the store alone, asks for exactly the trials an
 * uninterrupted run asks for, in the same order, and ends with the same
 * answer; cancel ends a study as cancelled; the status line reads as
 * goodputd's STATUS= wants it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "engine-profile.h"
#include "runner.h"
#include "store.h"
#include "study.h"
#include "tests.h"

#define SPEC GOODPUT_SOURCE_ROOT "/configs/studies/demo-sim-llama8b-l40s.json"

struct ctx {
	sd_event *e;
	unsigned trials_finished;
	unsigned pause_after, stop_after, cancel_after;
	bool paused_seen, resumed;
	enum runner_end end;
	char status_line[512];
};

static int on_resume_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;

	CHECK_INT_EQ(runner_resume(r), 0);
	return 0;
}

static void on_event(struct runner *r, const struct runner_event *ev, void *userdata)
{
	struct ctx *c = userdata;

	switch (ev->kind) {
	case RUNNER_EVENT_PHASE:
		if (ev->status->phase == RUNNER_PAUSED) {
			struct runner_status st;

			c->paused_seen = true;
			runner_get_status(r, &st);
			CHECK_INT_EQ(st.phase, RUNNER_PAUSED);
			CHECK_INT_EQ(runner_pause(r), -EALREADY);
			/* resume from the loop, not from inside the callback */
			CHECK(sd_event_add_time_relative(c->e, NULL, CLOCK_MONOTONIC, 1000, 1, on_resume_timer, r) >= 0);
		}
		if (ev->status->phase == RUNNER_PROBING && ev->status->trial == 1)
			runner_status_format(ev->status, c->status_line, sizeof(c->status_line));
		break;
	case RUNNER_EVENT_TRIAL_FINISHED:
		c->trials_finished++;
		if (c->trials_finished == c->pause_after)
			CHECK_INT_EQ(runner_pause(r), 0);
		if (c->trials_finished == c->stop_after)
			CHECK_INT_EQ(runner_stop(r), 0);
		if (c->trials_finished == c->cancel_after)
			CHECK_INT_EQ(runner_cancel(r), 0);
		break;
	case RUNNER_EVENT_FINISHED:
		c->end = ev->end;
		sd_event_exit(c->e, 0);
		break;
	default:
		break;
	}
}

static enum runner_end run(struct store *s, int64_t id, struct ctx *c)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	struct runner *r = NULL;
	struct runner_options o;
	struct error err = { 0 };
	int k;

	runner_options_init(&o);
	o.dry_run = true;
	CHECK(sd_event_new(&e) >= 0);
	c->e = e;
	k = runner_new(e, s, id, &o, &r, &err);
	CHECK_MSG(k >= 0, "%s", error_str(&err, k));
	CHECK_INT_EQ(runner_start(r, on_event, c), 0);
	CHECK(sd_event_loop(e) >= 0);
	runner_free(r);
	return c->end;
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

	/* reference: straight through */
	a = add_study(s, "straight");
	c = (struct ctx){ 0 };
	CHECK_INT_EQ(run(s, a, &c), RUNNER_END_DONE);
	CHECK(c.trials_finished >= 4);
	CHECK_STR_CONTAINS(c.status_line, "trial 1/12 probing max_num_seqs=");

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
		struct store_trial ta = { 0 }, tb = { 0 };

		CHECK(store_study_best_trial(s, a, &ta, &err) >= 0);
		CHECK(store_study_best_trial(s, b, &tb, &err) >= 0);
		CHECK_STR_EQ(ta.canonical_key, tb.canonical_key);
		CHECK(ta.cost_per_mtok == tb.cost_per_mtok);
		store_trial_done(&ta);
		store_trial_done(&tb);
	}

	/* cancel */
	x = add_study(s, "cancelled");
	c = (struct ctx){ .cancel_after = 1 };
	CHECK_INT_EQ(run(s, x, &c), RUNNER_END_CANCELLED);
	CHECK(store_study_get(s, x, &row, &err) >= 0);
	CHECK_INT_EQ(row.state, STORE_STUDY_CANCELLED);
	store_study_done(&row);

	s = store_close(s);
	unlink(path);
	snprintf(path, sizeof(path), "%s/t.db-wal", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/t.db-shm", dir);
	unlink(path);
	rmdir(dir);
	return 0;
}
