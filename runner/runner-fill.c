/* runner-fill.c — what starts when. The plan step runs whenever something
 * changed (a trial's server gone, an answer, a busy GPU's wait over, a
 * resume) and does, in order:
 *
 *  1. start the waiting trials in trial order: each needs free GPUs
 *     (packed by TP, runner-slots.c), fewer than budget.parallel trials
 *     running, room in the probe's capacity, and — for a confirmation of
 *     the answer — nothing else running (and nothing starts beside it;
 *     on a cluster: a whole node free, the rest goes on).
 *     The first that does not fit reserves the block it waits for, the one
 *     that drains first; those behind it start only outside that block,
 *     so a trial that needs the whole host gets it once it drains;
 *  2. with at most that one waiting and GPUs free outside its block, ask
 *     the planner for as many configurations as could start there (free
 *     GPUs / the smallest TP), with every trial in flight as pending; its
 *     proposals are recorded at once (state pending) and start as in 1;
 *  3. with nothing in flight and the planner done (or the wall-time budget
 *     spent), finish the study — once the answer was measured alone on the
 *     host, when trials ran side by side (on a cluster that measurement is
 *     queued as soon as the planner is done), and its load-step sweep made
 *     where the budget has room for it (runner-sweep.c);
 *  4. otherwise wait for trials to end; a dry run's evaluator moves its
 *     virtual clock to the next trial's end (runner-eval-dry.c).
 *
 * Nothing of this runs while the evaluator is busy (a dry run's
 * evaluations in their child processes): what they tell decides what
 * starts next, and the evaluator plans again once they are in.
 *
 * Recording the proposals before they start is what keeps a resumed study
 * on its path: after a crash the trials that were waiting or running are
 * read back (runner_queue_load) and started first, in the same order, and
 * the planner is asked with the same trials in flight as before. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "runner-internal.h"
#include "time-util.h"

static unsigned n_running(const struct runner *r)
{
	unsigned n = 0;

	for (size_t i = 0; i < r->n_trials; i++)
		n += r->trials[i]->running;
	return n;
}

/* A confirmation alone holds the whole host (on a cluster only its node:
 * nothing else starts then). */
static bool alone_running(const struct runner *r)
{
	if (runner_alone_on_node(r))
		return false;
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i]->running && r->trials[i]->proposal.alone)
			return true;
	return false;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;

	r->retry_timer = sd_event_source_disable_unref(r->retry_timer);
	runner_schedule(r, RUNNER_ACTION_PLAN);
	return 0;
}

/* Plans again at `at` (runner clock; real runs only: a dry run never waits for a busy GPU). */
static void retry_at(struct runner *r, uint64_t at)
{
	int k;

	if (r->opts.dry_run)
		return;
	if (r->retry_timer) {
		uint64_t old = 0;

		if (sd_event_source_get_time(r->retry_timer, &old) >= 0 && old <= at)
			return;
		r->retry_timer = sd_event_source_disable_unref(r->retry_timer);
	}
	k = sd_event_add_time(r->event, &r->retry_timer, CLOCK_MONOTONIC, at, 1000, on_retry, r);
	if (k < 0) {
		log_warning("runner: cannot arm a timer: %s", strerror(-k));
		return;
	}
	(void)sd_event_source_set_description(r->retry_timer, "runner-retry");
}

/* GPUs a foreign process held: free again once their wait is over. */
static void unblock_gpus(struct runner *r, uint64_t now)
{
	for (unsigned i = 0; i < r->n_gpus; i++)
		if ((r->gpus_blocked & (UINT64_C(1) << i)) && r->gpu_free_at[i] <= now)
			r->gpus_blocked &= ~(UINT64_C(1) << i);
}

static uint64_t next_unblock(const struct runner *r)
{
	uint64_t at = UINT64_MAX;

	for (unsigned i = 0; i < r->n_gpus; i++)
		if (r->gpus_blocked & (UINT64_C(1) << i))
			at = MIN(at, r->gpu_free_at[i]);
	return at;
}

static unsigned n_waiting(const struct runner *r)
{
	return (unsigned)r->n_trials - n_running(r);
}

/* The next waiting trial after `after` (NULL: the first) that is not
 * started yet. */
static struct runner_trial *next_waiting(const struct runner *r, const struct runner_trial *after)
{
	bool past = !after;

	for (size_t i = 0; i < r->n_trials; i++) {
		if (r->trials[i] == after) {
			past = true;
			continue;
		}
		if (past && !r->trials[i]->running)
			return r->trials[i];
	}
	return NULL;
}

/* Step 1: the waiting trials in order. The first that cannot start
 * reserves the block it waits for (the whole host for a confirmation of
 * the answer); those behind it start only outside it. */
static void start_waiting(struct runner *r)
{
	struct runner_trial *t = NULL;
	bool blocked = false;

	r->gpus_reserved = 0;
	r->head_waits = false;
	while (!runner_failing(r) && r->request == RUNNER_REQUEST_NONE && (t = next_waiting(r, t))) {
		uint64_t now = runner_clock(r), gpus;

		unblock_gpus(r, now);
		if (alone_running(r) || n_running(r) >= r->parallel)
			return;
		if (t->not_before_usec > now) {
			/* a busy GPU: it waits a while, the others need not */
			retry_at(r, t->not_before_usec);
			continue;
		}
		if (t->proposal.alone && !runner_alone_on_node(r) && (n_running(r) > 0 || blocked)) {
			r->gpus_reserved = ~UINT64_C(0);
			r->head_waits = !blocked;
			return;
		}
		if (!runner_probe_fits(r, runner_probe_estimate(r, t->tp))) {
			log_debug("trial %u waits: the probes in flight would stream more than %.0f tokens/s", t->seq,
				  runner_probe_capacity(r));
			return;
		}
		if (runner_slots_find(r, runner_trial_slots(t), t->gpus_before, r->gpus_reserved, &gpus) < 0) {
			if (r->gpus_blocked)
				retry_at(r, next_unblock(r));
			if (!blocked) {
				blocked = true;
				r->gpus_reserved = runner_slots_reserve(r, runner_trial_slots(t));
				r->head_waits = true;
			} else
				r->head_waits = false;
			continue;
		}
		/* the list may change inside (a start that fails at once): look
		 * from the first again */
		if (runner_trial_start(t, gpus) < 0)
			return;
		t = NULL;
		if (!blocked)
			continue;
		/* behind a waiting one: recompute what it waits for */
		r->gpus_reserved = 0;
		blocked = false;
	}
}

/* Side by side, a trial that started with the last one measured (within
 * BATCH_DUE of its duration) is due about now: the next ask waits for it
 * — until it ends, or BATCH_DUE of that duration past when it is due —
 * so that what is asked next knows the batch's results. Asked at the
 * first of a batch's ends, the model search chose with one result of
 * eight, and the next round started a trial the batch's other results
 * made pointless (the stop held seconds later): the answer, which is
 * measured alone, waited a whole trial for it. */
#define BATCH_DUE 0.15

static bool batch_due(struct runner *r)
{
	uint64_t d = r->last_measured_usec, slack = (uint64_t)(BATCH_DUE * (double)d), now, until = 0;

	r->vwake_usec = 0;
	if (!runner_side_by_side(r) || d == 0)
		return false;
	now = r->opts.dry_run ? r->study_start_usec + r->vclock_usec : runner_clock(r);
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct runner_trial *t = r->trials[i];
		uint64_t s = t->started_usec, last = r->last_measured_start_usec;

		/* what the planner is told of: not a baseline off the grid */
		if (!t->running || t->proposal.alone || t->proposal.sweep ||
		    (t->proposal.baseline && !r->baseline.on_grid))
			continue;
		if ((s > last ? s - last : last - s) <= slack && now < s + d + slack)
			until = MAX(until, s + d + slack);
	}
	if (until == 0)
		return false;
	log_debug("the next ask waits for the trials started with the last one measured (due within %.0f s)",
		  (double)(until - now) / USEC_PER_SEC);
	if (r->opts.dry_run)
		r->vwake_usec = until - r->study_start_usec;
	else
		retry_at(r, until);
	return true;
}

/* What to ask for: as many as could start on the free GPUs (outside a
 * block a waiting trial reserves). Nothing while more than that one waits. */
static size_t ask_size(const struct runner *r)
{
	unsigned running = n_running(r), waiting = n_waiting(r), k, free;

	if (running >= r->parallel || r->n_trials >= RUNNER_ASK_MAX || waiting > 1 || (waiting == 1 && !r->head_waits))
		return 0;
	free = r->n_gpus -
	       (unsigned)__builtin_popcountll((r->gpus_busy | r->gpus_blocked | r->gpus_reserved) &
					      (r->n_gpus >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << r->n_gpus) - 1));
	k = free / runner_min_gpus(r);
	k = MIN(k, r->parallel - running);
	k = MIN(k, (unsigned)(RUNNER_ASK_MAX - r->n_trials));
	return k;
}

static void take_answer(struct runner *r, const struct runner_answer *a)
{
	struct error err = { 0 };
	int k;

	runner_planner_describe(r->planner, r->status.twin, sizeof(r->status.twin));
	if (a->search_over && r->n_trials == 0) {
		/* search.extend_edges: a wider range, and the search goes on */
		k = runner_edge_phase(r, &err);
		if (k < 0) {
			runner_fail_errno(r, k, error_str(&err, k));
			return;
		}
		if (k > 0) {
			r->planner_done = false;
			runner_schedule(r, RUNNER_ACTION_PLAN);
			return;
		}
	}
	if (a->n == 0) {
		snprintf(r->done_message, sizeof(r->done_message), "%s",
			 a->message[0] ? a->message : opt_done_reason_to_string(a->reason));
		r->planner_done = true;
		return;
	}
	for (size_t i = 0; i < a->n; i++) {
		k = runner_queue_add(r, &a->proposals[i], &err);
		if (k < 0) {
			runner_fail_errno(r, k, error_str(&err, k));
			return;
		}
	}
}

void runner_on_answer(struct runner_planner *p, int k, const struct runner_answer *a, const char *message,
		      void *userdata)
{
	struct runner *r = userdata;

	r->asking = false;
	if (k < 0) {
		runner_fail(r, message ? message : strerror(-k));
		return;
	}
	take_answer(r, a);
	if (!runner_failing(r))
		runner_schedule(r, RUNNER_ACTION_PLAN);
}

/* Step 2. Returns false when the ask is in flight (or failed). */
static bool ask(struct runner *r, size_t n)
{
	_cleanup_(freep) struct runner_proposal *pending = NULL;
	struct runner_answer answer;
	struct runner_ask a;
	struct error err = { 0 };
	size_t n_pending = 0;
	int k;

	pending = calloc(r->n_trials ? r->n_trials : 1, sizeof(*pending));
	if (!pending) {
		runner_fail(r, "out of memory");
		return false;
	}
	/* a baseline off the grid is no configuration of the search */
	for (size_t i = 0; i < r->n_trials; i++)
		if (!r->trials[i]->proposal.baseline || r->baseline.on_grid)
			pending[n_pending++] = r->trials[i]->proposal;
	if (n_running(r) == 0)
		runner_set_phase(r, RUNNER_PLANNING);
	r->plan_waits_host = false;
	a = (struct runner_ask){
		.history = &r->history,
		.trial_ids = r->trial_ids,
		.pending = pending,
		.n_pending = n_pending,
		.k = n,
		.host_json = r->host ? deploy_host_facts(r->host) : NULL,
		.host_pending = r->host && deploy_host_facts_pending(r->host),
	};
	k = runner_planner_ask(r->planner, &a, &answer, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return false;
	}
	switch (k) {
	case RUNNER_ASK_WAIT_HOST:
		/* runner-host.c plans again once the facts are known */
		r->plan_waits_host = true;
		return false;
	case RUNNER_ASK_PENDING:
		r->asking = true;
		return false;
	default:
		take_answer(r, &answer);
		return !runner_failing(r);
	}
}

/* With trials side by side, the answer is measured once alone before the
 * study ends (its other measurements may have had neighbours): true when a
 * confirmation of it was queued. At most twice per run (a confirmation
 * that changes the answer asks for the new one's), and only within
 * max_trials: every deployment counts (runner_new keeps one out of the
 * search's budget for it). */
static bool confirm_alone(struct runner *r)
{
	struct store_trial *rows = NULL;
	struct runner_proposal p;
	struct opt_result best;
	struct error err = { 0 };
	char key[OPT_KEY_MAX];
	bool alone = false;
	size_t n = 0;
	int k;

	if (!runner_side_by_side(r) || r->alone_added >= 2)
		return false;
	opt_best(r->study->space, &r->history, &best, NULL);
	if (!best.valid || opt_config_key(r->study->space, &best.config, key, sizeof(key)) < 0)
		return false;
	k = store_trial_history(r->store, r->study_id, &rows, &n, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return false;
	}
	for (size_t i = 0; i < n; i++)
		alone = alone || (rows[i].state == STORE_TRIAL_DONE && runner_kind_is_alone(rows[i].kind) &&
				  strcmp(rows[i].canonical_key, key) == 0);
	store_trial_array_free(rows, n);
	/* every trial recorded was (or is) a deployment */
	if (alone || (r->status.max_trials > 0 && n >= r->status.max_trials))
		return false;
	p = (struct runner_proposal){
		.ask = OPT_ASK_CONFIRM, .config = best.config, .attempt = 1, .predicted_cost = NAN, .alone = true
	};
	k = runner_queue_add(r, &p, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return false;
	}
	r->alone_added++;
	return true;
}

/* When to measure the answer alone: once nothing else runs; on a cluster,
 * where it holds only a node, as soon as the search is done (the trials
 * still in flight run on beside it, on other nodes; should one of them
 * change the answer, the new one is measured alone once they ended). */
static bool confirm_now(const struct runner *r)
{
	if (r->n_trials == 0)
		return true;
	if (!runner_alone_on_node(r) || r->n_trials >= RUNNER_ASK_MAX)
		return false;
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i]->proposal.alone)
			return false;
	return true;
}

void runner_plan(struct runner *r)
{
	bool spent;
	size_t n;

	if (r->request != RUNNER_REQUEST_NONE) {
		if (n_running(r) == 0)
			(void)runner_settle_request(r);
		return;
	}
	if (runner_failing(r) || r->status.phase == RUNNER_FINISHED || r->status.phase == RUNNER_PAUSED)
		return;
	/* what the evaluator works out decides what starts next: it plans again once done */
	if (r->evaluator->busy && r->evaluator->busy(r))
		return;
	if (r->plan_waits_cluster)
		return; /* runner-cluster.c plans once the queue is clean */
	if (r->plan_waits_orphans)
		return; /* runner-orphans.c plans once the teardown commands ended */
	spent = runner_wall_budget_spent(r, r->message, sizeof(r->message));
	if (!spent) {
		start_waiting(r);
		/* a trial that could not start at all may have ended the study */
		if (runner_failing(r) || r->request != RUNNER_REQUEST_NONE)
			return;
		if (!r->asking && !r->plan_waits_host && !r->planner_done && !alone_running(r) &&
		    (n = ask_size(r)) > 0 && !batch_due(r)) {
			if (!ask(r, n))
				return;
			start_waiting(r);
		}
	}
	if (runner_failing(r) || r->asking || r->plan_waits_host)
		return;
	if (!spent && r->planner_done && confirm_now(r) && (confirm_alone(r) || runner_sweep_queue(r))) {
		start_waiting(r);
		if (r->evaluator->idle && !runner_failing(r))
			r->evaluator->idle(r);
		return;
	}
	if (r->n_trials == 0 && (spent || r->planner_done)) {
		if (!spent)
			snprintf(r->message, sizeof(r->message), "%s", r->done_message);
		runner_finish(r, RUNNER_END_DONE);
		return;
	}
	if (spent && n_running(r) == 0) {
		/* the waiting ones stay recorded (pending) for a resume */
		runner_finish(r, RUNNER_END_DONE);
		return;
	}
	if (n_running(r) > 0 && r->evaluator->idle)
		r->evaluator->idle(r);
}
