/* runner-planner.c — the planner interface (runner-planner.h) and its
 * plainest planner, the NLopt replay search: each ask is opt_next_pending
 * over the history with the trials in flight at the constant liar's
 * stand-in, once per configuration wanted, answered at once (a replay costs
 * milliseconds). Side by side, a free slot first measures the incumbent
 * again. The twin is runner-plan-twin.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "runner-planner.h"

int runner_planner_ask(struct runner_planner *p, const struct runner_ask *a, struct runner_answer *ret,
		       struct error *err)
{
	if (a->k < 1 || a->k > RUNNER_ASK_MAX)
		return error_set(err, -EINVAL, "a planner is asked for 1 to %d configurations, not %zu", RUNNER_ASK_MAX,
				 a->k);
	return p->ops->ask(p, a, ret, err);
}

void runner_planner_cancel(struct runner_planner *p)
{
	if (p && p->ops->cancel)
		p->ops->cancel(p);
}

void runner_planner_describe(const struct runner_planner *p, char *buf, size_t size)
{
	buf[0] = 0;
	if (p && p->ops->describe)
		p->ops->describe(p, buf, size);
}

struct runner_planner *runner_planner_free(struct runner_planner *p)
{
	if (p)
		p->ops->free(p);
	return NULL;
}

/* ---- the NLopt replay search ---- */

struct search_planner {
	struct runner_planner base;
	const struct study *study; /* its space may be widened between asks (search phases) */
	const struct opt_settings *settings;
};

/* The replay's view of a configuration in flight: as if measured at its
 * stand-in cost (opt_stand_in, from the history alone). */
static struct opt_trial stand_in(const struct search_planner *s, const struct opt_history *h,
				 const struct runner_proposal *p)
{
	bool confirm = p->ask == OPT_ASK_CONFIRM;

	return (struct opt_trial){ .config = p->config,
				   .outcome = OPT_OUTCOME_MEASURED,
				   .cost = opt_stand_in(s->study->space, h, &p->config, confirm),
				   .confirm = confirm };
}

/* Side by side on a host that runs at least EARLY_MIN_SLOTS trials at
 * once, once the screen is over and while the budget left is at least
 * twice that, a slot is spent on measuring the incumbent again as soon as
 * it leads (the search would re-probe it only once its local check has
 * converged): the answer is confirmed sooner, and the replay consumes the
 * re-probe when it asks for it. Not when it was measured twice already or
 * a re-probe of it is in flight. On a narrow host or a tight budget the
 * deployment is one the search lacks (the demo's 2 GPUs and 12 trials). */
#define EARLY_MIN_SLOTS 4

static bool early_reprobe(const struct search_planner *s, const struct runner_ask *a, const struct opt_trial *pending,
			  size_t n_pending, struct runner_proposal *ret)
{
	struct opt_result best;

	opt_best(s->study->space, a->history, &best, NULL);
	if (!best.valid || best.n > 1)
		return false;
	for (size_t i = 0; i < n_pending; i++)
		if (pending[i].confirm && memcmp(&pending[i].config, &best.config, sizeof(best.config)) == 0)
			return false;
	*ret = (struct runner_proposal){
		.ask = OPT_ASK_CONFIRM, .config = best.config, .attempt = 1, .predicted_cost = NAN
	};
	return true;
}

/* k asks of opt_next_pending, each candidate in flight for the next. A
 * confirmation of the answer runs alone and only once the trials in flight
 * are told (they may change the answer): with some in flight, the batch
 * ends before it, and an empty answer then means "wait for them". Trials
 * in flight count against max_trials as told ones do. */
static int search_ask(struct runner_planner *p, const struct runner_ask *a, struct runner_answer *ret,
		      struct error *err)
{
	struct search_planner *s = (struct search_planner *)p;
	_cleanup_(freep) struct opt_trial *pending = NULL;
	struct runner_answer ans = { 0 };
	bool early = false;
	size_t n = 0;

	pending = calloc(a->n_pending + a->k, sizeof(*pending));
	if (!pending)
		return error_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < a->n_pending; i++)
		pending[n++] = stand_in(s, a->history, &a->pending[i]);
	while (ans.n < a->k) {
		struct runner_proposal *prop = &ans.proposals[ans.n];
		struct opt_candidate cand;
		int k;

		k = opt_next_pending(s->study->space, s->settings, a->history, pending, n, &cand, err);
		if (k < 0)
			return k;
		if (n == 0 && ans.n == 0)
			ans.search_over = (cand.ask == OPT_ASK_DONE || cand.phase == OPT_PHASE_CONFIRM) &&
					  (cand.reason == OPT_DONE_CONVERGED || cand.reason == OPT_DONE_EXHAUSTED);
		if (cand.ask == OPT_ASK_DONE) {
			if (ans.n == 0)
				ans.reason = cand.reason;
			break;
		}
		if (cand.phase == OPT_PHASE_CONFIRM && n > 0)
			break;
		/* past the screen, on a wide host, with budget to spare: the incumbent first */
		if (cand.phase == OPT_PHASE_SEARCH && !early && a->n_pending + a->k >= EARLY_MIN_SLOTS &&
		    (s->settings->max_trials == 0 ||
		     a->history->n + n + 2 * (a->n_pending + a->k) <= s->settings->max_trials) &&
		    early_reprobe(s, a, pending, n, prop)) {
			early = true;
			pending[n++] = stand_in(s, a->history, prop);
			ans.n++;
			continue;
		}
		*prop = (struct runner_proposal){ .ask = cand.ask,
						  .config = cand.config,
						  .attempt = cand.attempt,
						  .predicted_cost = NAN,
						  .alone = cand.phase == OPT_PHASE_CONFIRM };
		ans.n++;
		if (prop->alone)
			break;
		pending[n++] = stand_in(s, a->history, prop);
	}
	*ret = ans;
	return RUNNER_ASK_ANSWERED;
}

static void search_free(struct runner_planner *p)
{
	free(p);
}

static const struct runner_planner_ops search_ops = {
	.ask = search_ask,
	.free = search_free,
};

const struct runner_planner_ops *runner_planner_search_ops(void)
{
	return &search_ops;
}

int runner_planner_search_new(const struct runner_planner_env *env, runner_answer_fn cb, void *userdata,
			      struct runner_planner **ret, struct error *err)
{
	struct search_planner *s = calloc(1, sizeof(*s));

	if (!s)
		return error_set(err, -ENOMEM, "out of memory");
	s->base = (struct runner_planner){ .ops = &search_ops, .cb = cb, .userdata = userdata };
	s->study = env->study;
	s->settings = env->settings;
	*ret = &s->base;
	return 0;
}
