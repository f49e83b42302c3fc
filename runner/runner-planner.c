/* runner-planner.c — the planner interface (runner-planner.h) and its
 * plainest planner, the NLopt replay search: each ask is one opt_next over
 * the history, answered at once (a replay costs milliseconds). The twin is
 * runner-plan-twin.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	const struct opt_space *space;
	const struct opt_settings *settings;
};

static int search_ask(struct runner_planner *p, const struct runner_ask *a, struct runner_answer *ret,
		      struct error *err)
{
	struct search_planner *s = (struct search_planner *)p;
	struct opt_candidate cand;
	int k;

	if (a->k != 1 || a->n_pending > 0)
		return error_set(err, -EOPNOTSUPP, "the search plans one trial at a time");
	k = opt_next(s->space, s->settings, a->history, &cand, err);
	if (k < 0)
		return k;
	*ret = (struct runner_answer){ .reason = cand.reason };
	if (cand.ask != OPT_ASK_DONE) {
		ret->n = 1;
		ret->proposals[0] = (struct runner_proposal){
			.ask = cand.ask, .config = cand.config, .attempt = cand.attempt, .predicted_cost = NAN
		};
	}
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

int runner_planner_search_new(const struct runner_planner_env *env, runner_answer_fn cb, void *userdata,
			      struct runner_planner **ret, struct error *err)
{
	struct search_planner *s = calloc(1, sizeof(*s));

	if (!s)
		return error_set(err, -ENOMEM, "out of memory");
	s->base = (struct runner_planner){ .ops = &search_ops, .cb = cb, .userdata = userdata };
	s->space = env->study->space;
	s->settings = env->settings;
	*ret = &s->base;
	return 0;
}
