/* test-runner-parallel.c — trials side by side, in a dry run on an emulated
 * 8-GPU host (virtual time, start-up times charged):
 *  - slot packing: trials that overlap in time never share a GPU, each
 *    holds exactly tensor_parallel GPUs of the study's, and several run at
 *    once; a TP 8 trial is not starved: no trial asked for after it starts
 *    before it (it waits for the host to drain);
 *  - confirmations of the answer run alone on the host;
 *  - the study killed (SIGKILL) with several trials in flight and resumed
 *    from the store asks the same candidates: its trials, their GPUs, their
 *    virtual times and costs equal an uninterrupted run's, and so does the
 *    answer;
 *  - probe-capacity hold-back: with a capacity one probe fills, no two
 *    trials run at once once a saturated throughput is known;
 *  - the status: the line summarises several trials and the list names
 *    each one's GPUs;
 *  - the serial study (budget.parallel 1) gives the same answer. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine-profile.h"
#include "json-util.h"
#include "runner.h"
#include "store.h"
#include "study.h"
#include "tests.h"
#include "time-util.h"

#define SPEC_FMT                                                                                                       \
	"{\"name\": \"%s\", \"engine\": \"sim\", \"model\": {\"name\": \"llama-3.1-8b\"},"                             \
	" \"quantizations\": [\"none\", \"fp8\"],"                                                                     \
	" \"gpu\": {\"type\": \"H100\", \"devices\": [0, 1, 2, 3, 4, 5, 6, 7], \"price_per_gpu_hour\": 3},"            \
	" \"search_space\": {\"max_num_seqs\": {\"min\": 16, \"max\": 256, \"scale\": \"log2\"},"                      \
	"   \"max_num_batched_tokens\": {\"min\": 512, \"max\": 8192, \"scale\": \"log2\"},"                           \
	"   \"tensor_parallel\": %s},"                                                                                 \
	" \"workload\": {\"input_len\": 512, \"output_len\": 64, \"range_ratio\": 0.25, \"num_prompts\": 60, "         \
	"\"seed\": "                                                                                                   \
	"5},"                                                                                                          \
	" \"sla\": {\"ttft_ms\": 500, \"tpot_ms\": 30},"                                                               \
	" \"probe\": {\"tolerance\": 0.1, \"max_steps\": 5},"                                                          \
	" \"budget\": {\"max_trials\": %u, \"parallel\": %s}}"

struct ctx {
	sd_event *e;
	unsigned finished, kill_after;
	unsigned max_in_flight, max_gpus_busy;
	bool several_listed;
	char multi_line[512];
	enum runner_end end;
};

static void on_event(struct runner *r, const struct runner_event *ev, void *userdata)
{
	struct ctx *c = userdata;
	struct runner_trial_status list[16];
	size_t n;

	if (ev->status->in_flight > c->max_in_flight)
		c->max_in_flight = ev->status->in_flight;
	if (ev->status->gpus_busy > c->max_gpus_busy)
		c->max_gpus_busy = ev->status->gpus_busy;
	if (ev->kind == RUNNER_EVENT_PHASE && ev->status->by_phase[RUNNER_PROBING] > 2 && !c->multi_line[0])
		runner_status_format(ev->status, c->multi_line, sizeof(c->multi_line));
	n = runner_get_trials(r, list, 16);
	if (n >= 3 && list[0].gpus[0] && list[1].gpus[0] && strcmp(list[0].gpus, list[1].gpus) != 0)
		c->several_listed = true;
	if (ev->kind == RUNNER_EVENT_TRIAL_FINISHED && ++c->finished == c->kill_after)
		raise(SIGKILL); /* kill -9 with trials in flight */
	if (ev->kind == RUNNER_EVENT_FINISHED) {
		c->end = ev->end;
		sd_event_exit(c->e, 0);
	}
}

static enum runner_end run(struct store *s, int64_t id, struct ctx *c, double probe_capacity)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	struct runner *r = NULL;
	struct runner_options o;
	struct error err = { 0 };
	int k;

	runner_options_init(&o);
	o.dry_run = true;
	o.startup_model = 1;
	o.probe_capacity_tps = probe_capacity;
	CHECK(sd_event_new(&e) >= 0);
	c->e = e;
	k = runner_new(e, s, id, &o, &r, &err);
	CHECK_MSG(k >= 0, "%s", error_str(&err, k));
	CHECK_INT_EQ(runner_start(r, on_event, c), 0);
	CHECK(sd_event_loop(e) >= 0);
	runner_free(r);
	return c->end;
}

static int64_t add_study(struct store *s, const char *name, const char *tp, unsigned max_trials, const char *parallel)
{
	_cleanup_(study_freep) struct study *st = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct study_options so = { 0 };
	struct error err = { 0 };
	char spec[2048];
	int64_t id;

	snprintf(spec, sizeof(spec), SPEC_FMT, name, tp, max_trials, parallel);
	CHECK(engine_profile_find("sim", NULL, &p, &err) >= 0);
	so.extra_knobs = p->extra_knobs;
	j = cJSON_Parse(spec);
	CHECK(j);
	CHECK_MSG(study_from_json(j, &so, &st, &err) >= 0, "%s", err.msg);
	CHECK(runner_study_insert(s, st, name, &id, &err) >= 0);
	return id;
}

static unsigned tp_of(const struct store_trial *t)
{
	_cleanup_(cJSON_Deletep) cJSON *k = cJSON_Parse(t->knobs_json);
	const cJSON *tp = cJSON_GetObjectItemCaseSensitive(k, "tensor_parallel");

	return cJSON_IsNumber(tp) ? (unsigned)tp->valueint : 1;
}

static uint64_t gpu_mask(const char *gpus)
{
	uint64_t m = 0;

	for (const char *p = gpus; p && *p;) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		CHECK(end != p && v < 8);
		CHECK_MSG(!(m & (UINT64_C(1) << v)), "GPU %lu listed twice in \"%s\"", v, gpus);
		m |= UINT64_C(1) << v;
		p = *end == ',' ? end + 1 : NULL;
	}
	return m;
}

static bool overlap(const struct store_trial *a, const struct store_trial *b)
{
	return a->started_usec < b->finished_usec && b->started_usec < a->finished_usec;
}

/* Packing, starvation and confirmations alone over the stored schedule;
 * returns how many trials ran at once at most. */
static unsigned check_schedule(struct store *s, int64_t id)
{
	struct store_trial *t = NULL;
	struct error err = { 0 };
	unsigned most = 0;
	size_t n = 0;

	CHECK(store_trial_history(s, id, &t, &n, &err) >= 0);
	CHECK(n > 0);
	for (size_t i = 0; i < n; i++) {
		unsigned at_once = 1; /* running when trial i started */

		CHECK_MSG(t[i].state == STORE_TRIAL_DONE || t[i].state == STORE_TRIAL_INFEASIBLE, "trial %u left %s",
			  t[i].seq, store_trial_state_to_string(t[i].state));
		CHECK_MSG(t[i].gpus, "trial %u has no GPUs recorded", t[i].seq);
		CHECK_INT_EQ(__builtin_popcountll(gpu_mask(t[i].gpus)), tp_of(&t[i]));
		CHECK(t[i].finished_usec > t[i].started_usec);
		for (size_t j = 0; j < n; j++) {
			if (j == i || !overlap(&t[i], &t[j]))
				continue;
			at_once += t[j].started_usec <= t[i].started_usec;
			CHECK_MSG(!(gpu_mask(t[i].gpus) & gpu_mask(t[j].gpus)),
				  "trials %u and %u share a GPU at once (%s, %s)", t[i].seq, t[j].seq, t[i].gpus,
				  t[j].gpus);
			CHECK_MSG(strcmp(t[i].kind, "dry-run-confirm-1") != 0 &&
					  strcmp(t[i].kind, "dry-run-confirm-2") != 0,
				  "confirmation %u ran beside trial %u", t[i].seq, t[j].seq);
		}
		/* a trial needing the whole host is not overtaken by later ones */
		if (tp_of(&t[i]) == 8)
			for (size_t j = 0; j < n; j++)
				CHECK_MSG(!(t[j].seq > t[i].seq && t[j].started_usec < t[i].started_usec),
					  "trial %u (TP 8) was overtaken by trial %u", t[i].seq, t[j].seq);
		most = MAX(most, at_once);
	}
	store_trial_array_free(t, n);
	return most;
}

/* "seq|kind|key|gpus|start|finish|cost" of every trial, times from the study's start. */
static char *schedule(struct store *s, int64_t id)
{
	struct store_study st = { 0 };
	struct store_trial *t = NULL;
	struct error err = { 0 };
	size_t n = 0, len = 0;
	char *buf = calloc(1, 1 << 17);

	CHECK(buf);
	CHECK(store_study_get(s, id, &st, &err) >= 0);
	CHECK(store_trial_history(s, id, &t, &n, &err) >= 0);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, (1 << 17) - len, "%u|%s|%s|%s|%llu|%llu|%a\n", t[i].seq, t[i].kind,
					t[i].canonical_key, t[i].gpus ? t[i].gpus : "-",
					(unsigned long long)(t[i].started_usec - st.started_usec),
					(unsigned long long)(t[i].finished_usec - st.started_usec), t[i].cost_per_mtok);
	store_trial_array_free(t, n);
	store_study_done(&st);
	return buf;
}

static void answer(struct store *s, int64_t id, char **ret_key, double *ret_cost, double *ret_tta)
{
	struct store_study_best b = { 0 };
	struct error err = { 0 };

	CHECK(store_study_best(s, id, &b, &err) >= 0);
	*ret_key = strdup(b.trial.canonical_key);
	*ret_cost = b.cost_per_mtok;
	*ret_tta = b.time_to_answer_s;
	CHECK(b.n >= 2); /* confirmed */
	store_study_best_done(&b);
}

int main(void)
{
	char dir[] = "/tmp/goodput-test-parallel-XXXXXX", path[128];
	_cleanup_(store_closep) struct store *s = NULL;
	struct error err = { 0 };
	struct ctx c;
	int64_t a, b, x;
	char *ka, *kb, *sa, *sb;
	double ca, cb, ta, tb;
	unsigned most;

	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t.db", dir);
	CHECK(store_open(path, NULL, &s, &err) >= 0);

	/* straight through, side by side */
	a = add_study(s, "parallel", "[1, 2]", 24, "\"auto\"");
	c = (struct ctx){ 0 };
	CHECK_INT_EQ(run(s, a, &c, 0), RUNNER_END_DONE);
	most = check_schedule(s, a);
	fprintf(stderr, "parallel: %u trials, %u at once at most, %u GPUs busy at most; \"%s\"\n", c.finished, most,
		c.max_gpus_busy, c.multi_line);
	CHECK(most >= 4);
	CHECK(c.max_gpus_busy >= 6);
	CHECK(c.several_listed);
	CHECK_STR_CONTAINS(c.multi_line, "trials ");
	CHECK_STR_CONTAINS(c.multi_line, "/8 GPUs");
	answer(s, a, &ka, &ca, &ta);

	/* one at a time: the same answer, later */
	b = add_study(s, "serial", "[1, 2]", 24, "1");
	c = (struct ctx){ 0 };
	CHECK_INT_EQ(run(s, b, &c, 0), RUNNER_END_DONE);
	CHECK_INT_EQ(check_schedule(s, b), 1);
	answer(s, b, &kb, &cb, &tb);
	fprintf(stderr, "answer: side by side %s $%.4f after %.0f s, one at a time %s $%.4f after %.0f s\n", ka, ca, ta,
		kb, cb, tb);
	CHECK_REL(ca, cb, 0.02);
	CHECK(ta * 2 < tb);
	free(kb);

	/* killed (SIGKILL) with trials in flight, resumed: the same schedule */
	x = add_study(s, "killed", "[1, 2]", 24, "\"auto\"");
	{
		pid_t pid = fork();
		int status;
		/* half the first batch ended, the other four due: killed while
		 * the next ask waits for them, which the resumed run must do
		 * too (it asked at once, and its schedule differed, before the
		 * last measured trial was read back from the store) */
		const unsigned kill_after = 4;
		unsigned open = 0;
		struct store_trial *t = NULL;
		size_t n = 0;

		CHECK(pid >= 0);
		if (pid == 0) {
			struct store *cs = NULL;

			CHECK(store_open(path, NULL, &cs, &err) >= 0);
			c = (struct ctx){ .kill_after = kill_after };
			run(cs, x, &c, 0);
			_exit(3); /* not reached */
		}
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %d", status);
		CHECK(store_trial_history(s, x, &t, &n, &err) >= 0);
		for (size_t i = 0; i < n; i++)
			open += !store_trial_state_is_final(t[i].state);
		store_trial_array_free(t, n);
		fprintf(stderr, "killed after %u trials with %u in flight\n", kill_after, open);
		CHECK(open >= 2);
	}
	c = (struct ctx){ 0 };
	CHECK_INT_EQ(run(s, x, &c, 0), RUNNER_END_DONE);
	sa = schedule(s, a);
	sb = schedule(s, x);
	CHECK_MSG(strcmp(sa, sb) == 0, "resumed schedule differs:\n%s---\n%s", sa, sb);
	free(sa);
	free(sb);

	/* a TP 8 trial waits for the host to drain, and gets it */
	x = add_study(s, "whole-host", "[1, 8]", 16, "\"auto\"");
	c = (struct ctx){ 0 };
	CHECK_INT_EQ(run(s, x, &c, 0), RUNNER_END_DONE);
	(void)check_schedule(s, x);

	/* the probe's capacity: one probe fills it, so trials run one at a time once one is measured */
	x = add_study(s, "held-back", "[1, 2]", 10, "\"auto\"");
	c = (struct ctx){ 0 };
	CHECK_INT_EQ(run(s, x, &c, 1.0), RUNNER_END_DONE);
	{
		struct store_trial *t = NULL;
		size_t n = 0;
		uint64_t first_end = UINT64_MAX;

		CHECK(store_trial_history(s, x, &t, &n, &err) >= 0);
		for (size_t i = 0; i < n; i++)
			first_end = MIN(first_end, t[i].finished_usec);
		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j < n; j++)
				if (i != j && t[i].started_usec >= first_end && overlap(&t[i], &t[j]))
					CHECK_MSG(0, "trials %u and %u ran at once past the probe's capacity", t[i].seq,
						  t[j].seq);
		store_trial_array_free(t, n);
	}

	free(ka);
	s = store_close(s);
	unlink(path);
	snprintf(path, sizeof(path), "%s/t.db-wal", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/t.db-shm", dir);
	unlink(path);
	rmdir(dir);
	return 0;
}
