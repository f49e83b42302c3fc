/* report-plan.c — the two questions a study is run for besides "which
 * configuration": how many GPUs does our traffic need (plan), and did the
 * answer change after a driver, engine or hardware change (compare).
 *
 * plan: one replica of the best configuration serves its max rate (requests/
 * s) or max goodput (tokens/s) under the SLA; replicas = ceil(load × (1 +
 * headroom) / capacity), GPUs = replicas × GPUs per replica, $/hour = GPUs ×
 * price. compare: each study's winner and cost, and whether A's winner still
 * meets the SLA in B, looked up by its canonical key among B's trials. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "report-internal.h"
#include "study.h"

#define PLAN_MAX_REPLICAS 1e9

int report_plan_compute(double load, bool by_tokens, double headroom, double capacity, unsigned gpus_per_replica,
			double usd_per_gpu_hour, unsigned gpus_per_host, double tokens_per_request,
			struct report_plan *ret, struct error *err)
{
	struct report_plan p = { 0 };
	double need;

	if (!isfinite(load) || load <= 0)
		return error_set(err, -EINVAL, "load: expected a number > 0, got %g", load);
	if (!isfinite(headroom) || headroom < 0)
		return error_set(err, -EINVAL, "headroom: expected a number >= 0, got %g", headroom);
	if (!isfinite(capacity) || capacity <= 0)
		return error_set(err, -EINVAL, "capacity per replica: expected a number > 0, got %g", capacity);
	if (!isfinite(usd_per_gpu_hour) || usd_per_gpu_hour < 0)
		return error_set(err, -EINVAL, "price per GPU-hour: expected a number >= 0, got %g", usd_per_gpu_hour);
	if (gpus_per_replica == 0)
		return error_set(err, -EINVAL, "GPUs per replica: expected at least 1");
	/* A load that is an exact multiple of the capacity needs exactly that many
	 * replicas: forgive the last bits of rounding before ceil(). */
	need = load * (1.0 + headroom) / capacity;
	if (need > PLAN_MAX_REPLICAS)
		return error_set(err, -EINVAL, "load: %g needs more than 10^9 replicas of %g each", load, capacity);
	p.replicas = (uint64_t)ceil(need * (1.0 - 1e-12));
	if (p.replicas == 0)
		p.replicas = 1;
	p.load = load;
	p.by_tokens = by_tokens;
	p.headroom = headroom;
	p.capacity = capacity;
	p.gpus_per_replica = gpus_per_replica;
	p.gpus = p.replicas * gpus_per_replica;
	p.hosts = gpus_per_host ? (p.gpus + gpus_per_host - 1) / gpus_per_host : 0;
	p.usd_per_hour = (double)p.gpus * usd_per_gpu_hour;
	p.utilisation = load / ((double)p.replicas * capacity);
	{
		double tps = by_tokens ? load : tokens_per_request > 0 ? load * tokens_per_request : NAN;

		p.usd_per_mtok = isfinite(tps) && tps > 0 ? p.usd_per_hour / (tps * 3600.0) * 1e6 : NAN;
	}
	*ret = p;
	return 0;
}

int report_plan_study(struct report *r, double load, bool by_tokens, double headroom, struct report_plan *ret,
		      struct error *err)
{
	const struct report_trial *b = report_best(r);
	double price = report_price(r), cap;

	if (!b)
		return error_set(err, -ENOENT,
				 "study %s: no configuration met the SLA, so there is nothing to plan with",
				 r->study.name);
	cap = by_tokens ? b->t.max_goodput : b->t.max_rate;
	if (!isfinite(price))
		return error_set(err, -EINVAL, "study %s: the GPU price is unknown (spec not readable)", r->study.name);
	return report_plan_compute(load, by_tokens, headroom, cap, b->gpus, price, report_host_gpus(r),
				   b->t.max_rate > 0 ? b->t.max_goodput / b->t.max_rate : 0, ret, err);
}

void report_plan_print(const struct report *r, const struct report_plan *p, FILE *f)
{
	const struct report_trial *b = report_best(r);
	char knobs[256], c[32];
	const char *unit = p->by_tokens ? "tokens/s" : "req/s";

	report_knobs_short(b, knobs, sizeof(knobs));
	fprintf(f, "study %s: best configuration %s\n", r->study.name, knobs);
	fprintf(f, "one replica: %g %s under the SLA, %u GPU%s\n", p->capacity, unit, p->gpus_per_replica,
		p->gpus_per_replica == 1 ? "" : "s");
	fprintf(f, "load: %g %s + %g%% headroom = %g %s\n", p->load, unit, p->headroom * 100,
		p->load * (1 + p->headroom), unit);
	fprintf(f, "replicas: %" PRIu64 "\n", p->replicas);
	fprintf(f, "GPUs: %" PRIu64, p->gpus);
	if (p->hosts)
		fprintf(f, " (%" PRIu64 " host%s of %u)", p->hosts, p->hosts == 1 ? "" : "s", report_host_gpus(r));
	fprintf(f, "\n$/hour: %.2f\n", p->usd_per_hour);
	fprintf(f, "utilisation at that load: %.0f%% of capacity\n", p->utilisation * 100);
	fprintf(f, "$/Mtok at that load: %s\n", report_fmt(c, sizeof(c), 4, p->usd_per_mtok));
}

int report_plan_to_json(const struct report *r, const struct report_plan *p, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	const struct report_trial *b = report_best(r);
	int q = 0;

	if (!o)
		return -ENOMEM;
	q |= json_add_string(o, "study", r->study.name);
	q |= json_add_string(o, "best", b && b->t.canonical_key ? b->t.canonical_key : "");
	q |= json_add_number(o, "load", p->load);
	q |= json_add_string(o, "unit", p->by_tokens ? "tokens/s" : "req/s");
	q |= json_add_number(o, "headroom", p->headroom);
	q |= json_add_number(o, "capacity_per_replica", p->capacity);
	q |= json_add_number(o, "replicas", (double)p->replicas);
	q |= json_add_number(o, "gpus_per_replica", p->gpus_per_replica);
	q |= json_add_number(o, "gpus", (double)p->gpus);
	q |= json_add_number(o, "hosts", (double)p->hosts);
	q |= json_add_number(o, "usd_per_hour", p->usd_per_hour);
	q |= json_add_number(o, "utilisation", p->utilisation);
	if (isfinite(p->usd_per_mtok))
		q |= json_add_number(o, "usd_per_mtok", p->usd_per_mtok);
	else if (!cJSON_AddNullToObject(o, "usd_per_mtok"))
		q = -ENOMEM;
	if (q)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

/* ---- compare ---- */

static const char *const old_best_names[_REPORT_OLD_BEST_MAX] = {
	[REPORT_OLD_BEST_NONE] = "none",
	[REPORT_OLD_BEST_MEETS_SLA] = "meets_sla",
	[REPORT_OLD_BEST_MISSES_SLA] = "misses_sla",
	[REPORT_OLD_BEST_FAILED] = "failed",
	[REPORT_OLD_BEST_NOT_MEASURED] = "not_measured",
	[REPORT_OLD_BEST_PENDING] = "pending",
};

const char *report_old_best_to_string(enum report_old_best v)
{
	return v < _REPORT_OLD_BEST_MAX ? old_best_names[v] : NULL;
}

struct comparison {
	const struct report_trial *best_a, *best_b;
	const struct report_trial *old_in_b; /* A's best as measured in B (the cheapest finished measurement) */
	enum report_old_best verdict;
	bool same_workload, same_sla;
	double cost_change; /* (B − A) / A */
};

static bool same_section(const struct report *a, const struct report *b, const char *key)
{
	const cJSON *x = a->spec ? cJSON_GetObjectItemCaseSensitive(a->spec, key) : NULL;
	const cJSON *y = b->spec ? cJSON_GetObjectItemCaseSensitive(b->spec, key) : NULL;

	if (!a->spec || !b->spec)
		return false;
	if (!x && !y)
		return true;
	return x && y && cJSON_Compare(x, y, true);
}

static void compare(const struct report *a, const struct report *b, struct comparison *c)
{
	*c = (struct comparison){ .best_a = report_best(a), .best_b = report_best(b), .cost_change = NAN };
	c->same_workload = same_section(a, b, "workload");
	c->same_sla = same_section(a, b, "sla");
	if (c->best_a && c->best_b)
		c->cost_change = (report_cost(b) - report_cost(a)) / report_cost(a);
	if (!c->best_a || !c->best_a->t.canonical_key) {
		c->verdict = REPORT_OLD_BEST_NONE;
		return;
	}
	c->verdict = REPORT_OLD_BEST_NOT_MEASURED;
	for (size_t i = 0; i < b->n_trials; i++) {
		const struct report_trial *t = &b->trials[i];
		enum report_old_best v;

		if (!t->t.canonical_key || strcmp(t->t.canonical_key, c->best_a->t.canonical_key) != 0)
			continue;
		if (t->t.state == STORE_TRIAL_DONE)
			v = isfinite(t->t.cost_per_mtok) ? REPORT_OLD_BEST_MEETS_SLA : REPORT_OLD_BEST_MISSES_SLA;
		else if (t->t.state == STORE_TRIAL_INFEASIBLE && t->t.failure == STORE_FAILURE_SLA_NEVER_MET)
			v = REPORT_OLD_BEST_MISSES_SLA;
		else if (store_trial_state_is_final(t->t.state))
			v = REPORT_OLD_BEST_FAILED;
		else
			v = REPORT_OLD_BEST_PENDING;
		/* One good measurement in B answers "still meets the SLA"; otherwise
		 * report the most informative one. */
		if (v == REPORT_OLD_BEST_MEETS_SLA) {
			if (c->verdict != REPORT_OLD_BEST_MEETS_SLA ||
			    t->t.cost_per_mtok < c->old_in_b->t.cost_per_mtok)
				c->old_in_b = t;
			c->verdict = v;
		} else if (c->verdict == REPORT_OLD_BEST_NOT_MEASURED || c->verdict == REPORT_OLD_BEST_PENDING) {
			c->verdict = v;
			c->old_in_b = t;
		}
	}
}

static void print_side(FILE *f, const char *label, const struct report *r, const struct report_trial *b)
{
	char knobs[256], c1[32], c2[32], note[96];

	if (!b) {
		fprintf(f, "%s %s: no configuration met the SLA (%zu trials)\n", label, r->study.name, r->n_trials);
		return;
	}
	report_knobs_short(b, knobs, sizeof(knobs));
	fprintf(f, "%s %s: best %s: $%s/Mtok%s, max goodput %s tokens/s (%zu trials)\n", label, r->study.name, knobs,
		report_fmt(c1, sizeof(c1), 4, report_cost(r)), report_cost_note(r, note, sizeof(note)),
		report_fmt(c2, sizeof(c2), 1, b->t.max_goodput), r->n_trials);
}

int report_compare_print(struct report *a, struct report *b, FILE *f, enum report_old_best *ret_verdict)
{
	struct comparison c;
	char c1[32], c2[32];

	compare(a, b, &c);
	if (!c.same_workload || !c.same_sla)
		fprintf(f, "warning: the two studies differ in their %s: the comparison is only indicative\n",
			!c.same_workload && !c.same_sla ? "workload and SLA"
			: !c.same_workload              ? "workload"
							: "SLA");
	print_side(f, "A (before)", a, c.best_a);
	print_side(f, "B (after) ", b, c.best_b);
	if (c.best_a && c.best_b) {
		bool same = c.best_a->t.canonical_key && c.best_b->t.canonical_key &&
			    strcmp(c.best_a->t.canonical_key, c.best_b->t.canonical_key) == 0;

		fprintf(f, "winner: %s\n",
			same ? "the same configuration won in both" : "a different configuration won in B");
		fprintf(f, "cost change: %+.1f%% ($%s -> $%s per Mtok)\n", c.cost_change * 100,
			report_fmt(c1, sizeof(c1), 4, report_cost(a)), report_fmt(c2, sizeof(c2), 4, report_cost(b)));
	} else if (c.best_a) {
		fprintf(f, "cost change: B found no configuration that meets the SLA\n");
	} else if (c.best_b) {
		fprintf(f, "cost change: A found no configuration that meets the SLA; B does\n");
	}
	switch (c.verdict) {
	case REPORT_OLD_BEST_NONE:
		fprintf(f, "old best: A has none, nothing to check\n");
		break;
	case REPORT_OLD_BEST_MEETS_SLA:
		fprintf(f, "old best: still meets the SLA in B ($%s/Mtok, max goodput %s tokens/s there)\n",
			report_fmt(c1, sizeof(c1), 4, c.old_in_b->t.cost_per_mtok),
			report_fmt(c2, sizeof(c2), 1, c.old_in_b->t.max_goodput));
		break;
	case REPORT_OLD_BEST_MISSES_SLA:
		fprintf(f, "old best: NO LONGER MEETS THE SLA in B (trial %u)\n", c.old_in_b->t.seq);
		break;
	case REPORT_OLD_BEST_FAILED:
		fprintf(f, "old best: FAILED in B (trial %u: %s%s%s)\n", c.old_in_b->t.seq,
			store_trial_state_to_string(c.old_in_b->t.state), c.old_in_b->t.failure ? ", " : "",
			c.old_in_b->t.failure ? store_failure_to_string(c.old_in_b->t.failure) : "");
		break;
	case REPORT_OLD_BEST_NOT_MEASURED:
		fprintf(f,
			"old best: not measured in B (%s was never tried there), so whether it still meets the SLA is "
			"unknown\n",
			c.best_a->t.canonical_key);
		break;
	case REPORT_OLD_BEST_PENDING:
		fprintf(f, "old best: being measured in B (trial %u not finished)\n", c.old_in_b->t.seq);
		break;
	default:
		break;
	}
	if (ret_verdict)
		*ret_verdict = c.verdict;
	return 0;
}

static int side_json(cJSON *o, const char *key, const struct report *r, const struct report_trial *b)
{
	cJSON *s = cJSON_AddObjectToObject(o, key);
	int q = 0;

	if (!s)
		return -ENOMEM;
	q |= json_add_string(s, "study", r->study.name);
	q |= json_add_number(s, "trials", (double)r->n_trials);
	if (!b)
		return q || !cJSON_AddNullToObject(s, "best") ? -ENOMEM : 0;
	q |= json_add_string(s, "best", b->t.canonical_key ? b->t.canonical_key : "");
	q |= json_add_number(s, "cost_per_mtok", report_cost(r));
	q |= json_add_number(s, "measurements", r->answer.n);
	q |= json_add_number(s, "max_goodput", b->t.max_goodput);
	return q ? -ENOMEM : 0;
}

int report_compare_json(struct report *a, struct report *b, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	struct comparison c;
	int q = 0;

	if (!o)
		return -ENOMEM;
	compare(a, b, &c);
	q |= side_json(o, "a", a, c.best_a);
	q |= side_json(o, "b", b, c.best_b);
	q |= json_add_bool(o, "same_workload", c.same_workload);
	q |= json_add_bool(o, "same_sla", c.same_sla);
	if (c.best_a && c.best_b) {
		q |= json_add_bool(o, "same_winner",
				   c.best_a->t.canonical_key && c.best_b->t.canonical_key &&
					   strcmp(c.best_a->t.canonical_key, c.best_b->t.canonical_key) == 0);
		q |= json_add_number(o, "cost_change", c.cost_change);
	} else if (!cJSON_AddNullToObject(o, "same_winner") || !cJSON_AddNullToObject(o, "cost_change")) {
		q = -ENOMEM;
	}
	q |= json_add_string(o, "old_best", report_old_best_to_string(c.verdict));
	if (c.old_in_b) {
		q |= json_add_number(o, "old_best_trial_in_b", c.old_in_b->t.seq);
		if (isfinite(c.old_in_b->t.cost_per_mtok))
			q |= json_add_number(o, "old_best_cost_in_b", c.old_in_b->t.cost_per_mtok);
	}
	if (q)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}
