/* opt-memory.c — what the search knows about memory without deploying, and
 * how many deployments it may still make.
 *
 * An engine that runs out of memory at start-up says why, and the cause
 * tells how far the failure reaches (opt.h): weights that do not fit rule
 * out every batch, context and KV dtype of the quantization × TP
 * combination; a KV cache too small for max_model_len rules out that
 * context and longer at any batch; no room for cache blocks or activations
 * rules out larger batches only. Each knob's memory role (space.h) says
 * whether it is free under a cause, must be at least as large (needs more
 * memory as it grows), at most as large (gives more memory), or equal.
 *
 * The pre-flight is the caller's estimate, asked per configuration: a clear
 * "does not fit" is never deployed; a "does not fit, within the margin" is
 * deployed once per combination, and that check decides for the rest of
 * the combination. Both read only revealed outcomes, so a replay stays on
 * its path.
 *
 * The budget counts every trial of the history as a deployment — whatever
 * the replay revealed — because each one was. */
#include <errno.h>
#include <stdlib.h>

#include "array.h"
#include "macro.h"
#include "opt-internal.h"
#include "opt.h"

/* Whether out-of-memory entry o rules out configuration c. */
static bool rules_out(const struct opt_space *s, const struct oom_entry *o, const struct opt_config *c)
{
	bool weights = o->cause == OPT_OOM_WEIGHTS, kv = o->cause == OPT_OOM_KV_CACHE;

	for (size_t i = 0; i < s->n_knobs; i++) {
		const struct opt_knob *k = &s->knobs[i];
		unsigned ci = c->idx[i], oi = o->config.idx[i];

		switch (k->memory) {
		case OPT_MEMORY_BATCH:
			/* weights and a full-length sequence's KV cache do not
			 * depend on the batch */
			if (!weights && !kv && ci < oi)
				return false;
			break;
		case OPT_MEMORY_CONTEXT:
			if (weights)
				break;
			if (kv && o->suggested_len > 0) {
				if (!(k->numbers[ci] > (double)o->suggested_len))
					return false;
			} else if (ci < oi)
				return false;
			break;
		case OPT_MEMORY_FRACTION:
			if (ci > oi)
				return false;
			break;
		case OPT_MEMORY_KV_DTYPE:
			if (!weights && ci != oi)
				return false;
			break;
		case OPT_MEMORY_ANY:
			if (ci != oi)
				return false;
			break;
		}
	}
	return true;
}

bool opt_oom_rules_out(const struct opt_space *space, const struct opt_trial *oom, const struct opt_config *c)
{
	const struct oom_entry o = { .config = oom->config,
				     .cause = (unsigned)oom->cause < _OPT_OOM_CAUSE_MAX ? oom->cause : OPT_OOM_UNKNOWN,
				     .suggested_len = oom->suggested_len };

	return oom->outcome == OPT_OUTCOME_INFEASIBLE && rules_out(space, &o, c);
}

bool opt_replay_dominated(const struct replay *r, const struct opt_config *c)
{
	for (size_t j = 0; j < r->n_oom; j++)
		if (rules_out(r->space, &r->oom[j], c))
			return true;
	return false;
}

int opt_replay_add_oom(struct replay *r, const struct opt_config *c, enum opt_oom_cause cause, uint32_t suggested_len)
{
	if (ARRAY_GROW(r->oom, r->cap_oom, r->n_oom) < 0)
		return -ENOMEM;
	r->oom[r->n_oom++] = (struct oom_entry){
		.config = *c,
		.cause = (unsigned)cause < _OPT_OOM_CAUSE_MAX ? cause : OPT_OOM_UNKNOWN,
		.suggested_len = suggested_len,
	};
	return 0;
}

enum opt_fit opt_replay_fit(const struct replay *r, const struct opt_config *c)
{
	const struct opt_preflight *p = r->set->preflight;

	return p && p->fit ? p->fit(r->space, c, p->userdata) : OPT_FIT_UNKNOWN;
}

bool opt_replay_predicted_infeasible(const struct replay *r, const struct opt_config *c)
{
	switch (opt_replay_fit(r, c)) {
	case OPT_FIT_NO:
		return true;
	case OPT_FIT_NEAR:
		return r->combo_near[opt_replay_combo_of(r, c)] == NEAR_CONFIRMED;
	default:
		return false;
	}
}

void opt_replay_near_revealed(struct replay *r, const struct opt_config *c, bool started)
{
	size_t k = opt_replay_combo_of(r, c);

	if (r->combo_near[k] == NEAR_UNCHECKED && opt_replay_fit(r, c) == OPT_FIT_NEAR)
		r->combo_near[k] = started ? NEAR_REFUTED : NEAR_CONFIRMED;
}

unsigned opt_confirm_reserve(const struct opt_settings *s)
{
	return s->max_trials > 0 ? MIN(2 * s->confirm_probes, s->max_trials / 4) : 0;
}

bool opt_replay_budget_left(const struct replay *r)
{
	const struct opt_settings *s = r->set;

	return s->max_trials == 0 || r->deployed + opt_confirm_reserve(s) < s->max_trials;
}

double opt_seed_unit(uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t z = seed * UINT64_C(0x9E3779B97F4A7C15) + a * UINT64_C(0xBF58476D1CE4E5B9) +
		     b * UINT64_C(0x94D049BB133111EB) + 1;

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0;
}
