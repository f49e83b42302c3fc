/* report-levers.c — what a study found about the levers beyond batch size
 * and TP: speculative decoding, the prefix cache and the replicas' layout.
 *
 * The answer names its speculation method and k, with the acceptance the
 * server counted, or says why none won: the cheapest configuration with
 * speculation and how much more it costs at its own max rate. Beside the
 * answer, its counterpart — the same configuration with speculation
 * toggled, or failing that the cheapest measured of the other kind — and
 * the two over the load steps both were measured at: TPOT and attainment
 * per rate, and the rate from which speculation stops paying (its p50 TPOT
 * no longer below the other's at the same rate, interpolated, or its SLA
 * missed where the other's holds). The prefix cache's hit rate is read
 * from the answer's load points; the layout from its knobs: data_parallel
 * replicas of tensor_parallel × pipeline_parallel GPUs each.
 *
 * Everything is read from what was measured (the trials and their load
 * points as stored): the same words in `goodput tune`'s summary, `goodput
 * report --summary` and the report's section. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json-util.h"
#include "macro.h"
#include "report-internal.h"
#include "space.h"
#include "study.h"

static const char *knob_str(const cJSON *knobs, const char *name, const char *def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, name);

	return cJSON_IsString(v) ? v->valuestring : def;
}

static double knob_num(const cJSON *knobs, const char *name, double def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(knobs, name);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static bool speculates(const cJSON *knobs)
{
	return strcmp(knob_str(knobs, OPT_KNOB_SPEC_METHOD, "none"), "none") != 0;
}

/* Whether a and b are the same configuration but for speculation. */
static bool same_but_speculation(const cJSON *a, const cJSON *b)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, a)
	{
		const cJSON *o;

		if (strcmp(e->string, OPT_KNOB_SPEC_METHOD) == 0 || strcmp(e->string, OPT_KNOB_SPEC_TOKENS) == 0 ||
		    strcmp(e->string, OPT_KNOB_SPEC_DRAFT_TP) == 0)
			continue;
		o = cJSON_GetObjectItemCaseSensitive(b, e->string);
		if (!o || !cJSON_Compare(e, o, true))
			return false;
	}
	cJSON_ArrayForEach(e, b) if (strcmp(e->string, OPT_KNOB_SPEC_METHOD) != 0 &&
				     strcmp(e->string, OPT_KNOB_SPEC_TOKENS) != 0 &&
				     strcmp(e->string, OPT_KNOB_SPEC_DRAFT_TP) != 0 &&
				     !cJSON_GetObjectItemCaseSensitive(a, e->string)) return false;
	return true;
}

/* A load point's server figure (result JSON "server" object), NAN when absent. */
static double server_figure(const struct store_load_point *lp, const char *key)
{
	_cleanup_(cJSON_Deletep) cJSON *j = lp->result_json ? cJSON_Parse(lp->result_json) : NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "server"), key);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const struct store_load_point *best_point(const struct report_levers_trial *t)
{
	return store_load_point_at_max(t->lps, t->n_lps, t->t->max_rate);
}

/* A trial's p50 TPOT at rate, interpolated between its measured rates;
 * NAN outside them. */
static double tpot_at(const struct report_levers_trial *t, double rate)
{
	const struct store_load_point *lo = NULL, *hi = NULL;

	for (size_t i = 0; i < t->n_lps; i++) {
		const struct store_load_point *p = &t->lps[i];

		if (!isfinite(p->request_rate) || !isfinite(p->p50_tpot_ms))
			continue;
		if (p->request_rate <= rate && (!lo || p->request_rate > lo->request_rate))
			lo = p;
		if (p->request_rate >= rate && (!hi || p->request_rate < hi->request_rate))
			hi = p;
	}
	if (!lo || !hi)
		return NAN;
	if (hi->request_rate == lo->request_rate)
		return lo->p50_tpot_ms;
	return lo->p50_tpot_ms +
	       (hi->p50_tpot_ms - lo->p50_tpot_ms) * (rate - lo->request_rate) / (hi->request_rate - lo->request_rate);
}

static int cmp_step(const void *a, const void *b)
{
	double x = ((const struct report_levers_step *)a)->rate, y = ((const struct report_levers_step *)b)->rate;

	return x < y ? -1 : x > y;
}

/* The load steps of the spec-on and spec-off trials side by side. */
static void compare_steps(struct report_levers *lv, const struct report_levers_trial *on,
			  const struct report_levers_trial *off)
{
	const struct report_levers_trial *both[2] = { on, off };

	lv->n_steps = 0;
	for (int w = 0; w < 2; w++)
		for (size_t i = 0; i < both[w]->n_lps && lv->n_steps < REPORT_LEVERS_STEPS_MAX; i++) {
			const struct store_load_point *p = &both[w]->lps[i];
			struct report_levers_step *s = &lv->steps[lv->n_steps];

			if (!isfinite(p->request_rate) || p->request_rate <= 0)
				continue; /* the saturation run has no rate */
			*s = (struct report_levers_step){ .rate = p->request_rate, .from_on = w == 0 };
			s->on_tpot_ms = w == 0 ? p->p50_tpot_ms : tpot_at(on, p->request_rate);
			s->off_tpot_ms = w == 1 ? p->p50_tpot_ms : tpot_at(off, p->request_rate);
			s->met = p->sla_met;
			s->attainment = p->attainment;
			s->acceptance = server_figure(p, "spec_acceptance_rate");
			lv->n_steps++;
		}
	qsort(lv->steps, lv->n_steps, sizeof(lv->steps[0]), cmp_step);
	lv->stops_paying_rate = NAN;
	for (size_t i = 0; i < lv->n_steps; i++) {
		const struct report_levers_step *s = &lv->steps[i];

		if ((isfinite(s->on_tpot_ms) && isfinite(s->off_tpot_ms) && s->on_tpot_ms >= s->off_tpot_ms) ||
		    (s->from_on && !s->met && isfinite(off->t->max_rate) && s->rate <= off->t->max_rate)) {
			lv->stops_paying_rate = s->rate;
			break;
		}
	}
}

static void describe(const struct report_levers_trial *t, char *buf, size_t size)
{
	const char *m = knob_str(t->knobs, OPT_KNOB_SPEC_METHOD, "none");

	if (strcmp(m, "none") == 0)
		snprintf(buf, size, "no speculation");
	else
		snprintf(buf, size, "%s k=%.0f", m, knob_num(t->knobs, OPT_KNOB_SPEC_TOKENS, 0));
}

int report_levers_of(const struct study *s, const struct report_levers_trial *trials, size_t n, size_t best,
		     struct report_levers *ret)
{
	struct report_levers lv = {
		.acceptance = NAN, .accept_length = NAN, .prefix_hit_rate = NAN, .stops_paying_rate = NAN
	};
	const struct report_levers_trial *b = &trials[best], *counter = NULL, *cheapest_other = NULL;
	const struct opt_space *space = s ? s->space : NULL;
	const struct store_load_point *at = best_point(b);
	int km = space ? opt_space_knob_index(space, OPT_KNOB_SPEC_METHOD) : -ENOENT;
	bool on = speculates(b->knobs);
	char what[96], other[96];

	/* the layout */
	lv.dp = (unsigned)knob_num(b->knobs, OPT_KNOB_DATA_PARALLEL, 1);
	lv.tp = (unsigned)knob_num(b->knobs, OPT_KNOB_TENSOR_PARALLEL, 1);
	lv.pp = (unsigned)knob_num(b->knobs, OPT_KNOB_PIPELINE_PARALLEL, 1);
	lv.gpus = opt_knobs_gpus(b->knobs);
	if (lv.dp > 1)
		snprintf(lv.layout, sizeof(lv.layout),
			 "%u replicas × TP %u × PP %u = %u GPUs behind one endpoint, each request sent to one replica "
			 "by "
			 "the engine's own load balancing",
			 lv.dp, lv.tp, lv.pp, lv.gpus);
	else
		snprintf(lv.layout, sizeof(lv.layout), "one replica: TP %u × PP %u = %u GPU%s", lv.tp, lv.pp, lv.gpus,
			 lv.gpus == 1 ? "" : "s");

	/* the prefix cache at the answer's max rate */
	if (at) {
		lv.prefix_hit_rate = server_figure(at, "prefix_cache_hit_rate");
		lv.acceptance = server_figure(at, "spec_acceptance_rate");
		lv.accept_length = server_figure(at, "spec_mean_acceptance_length");
	}
	lv.prefix_caching_known = cJSON_GetObjectItemCaseSensitive(b->knobs, OPT_KNOB_PREFIX_CACHING) != NULL;
	snprintf(lv.prefix_caching, sizeof(lv.prefix_caching), "%s",
		 knob_str(b->knobs, OPT_KNOB_PREFIX_CACHING, "the engine's default"));

	/* speculation: in the space at all? */
	lv.spec_in_space = km >= 0 && space->knobs[km].kind == OPT_KNOB_LIST_STRING &&
			   (space->knobs[km].n_values > 1 || speculates(b->knobs));
	if (!lv.spec_in_space && !on) {
		*ret = lv;
		return 0;
	}
	describe(b, what, sizeof(what));
	snprintf(lv.method, sizeof(lv.method), "%s", knob_str(b->knobs, OPT_KNOB_SPEC_METHOD, "none"));
	lv.k = on ? (unsigned)knob_num(b->knobs, OPT_KNOB_SPEC_TOKENS, 0) : 0;

	/* its counterpart: the same but for speculation, else the cheapest of the other kind */
	for (size_t i = 0; i < n; i++) {
		const struct report_levers_trial *t = &trials[i];

		if (i == best || !t->knobs || speculates(t->knobs) == on || !isfinite(t->t->cost_per_mtok))
			continue;
		if (same_but_speculation(b->knobs, t->knobs) &&
		    (!counter || t->t->cost_per_mtok < counter->t->cost_per_mtok))
			counter = t;
		if (!cheapest_other || t->t->cost_per_mtok < cheapest_other->t->cost_per_mtok)
			cheapest_other = t;
	}
	lv.counterpart_same = counter != NULL;
	if (!counter)
		counter = cheapest_other;
	if (on) {
		char acc[96] = "";

		if (isfinite(lv.acceptance))
			snprintf(acc, sizeof(acc), ": %.0f %% of drafts accepted, %.2f tokens per step at its max rate",
				 lv.acceptance * 100, lv.accept_length);
		snprintf(lv.speculation, sizeof(lv.speculation), "%s%s", what, acc);
		if (counter && isfinite(counter->t->cost_per_mtok) && isfinite(b->t->cost_per_mtok)) {
			size_t l = strlen(lv.speculation);

			describe(counter, other, sizeof(other));
			snprintf(lv.speculation + l, sizeof(lv.speculation) - l, "; %s %s costs %+.0f %% ($%.4f/Mtok)",
				 other, lv.counterpart_same ? "with the other knobs the same" : "at best",
				 (counter->t->cost_per_mtok / b->t->cost_per_mtok - 1) * 100,
				 counter->t->cost_per_mtok);
		}
	} else if (counter && isfinite(counter->t->cost_per_mtok) && isfinite(b->t->cost_per_mtok)) {
		describe(counter, other, sizeof(other));
		snprintf(lv.speculation, sizeof(lv.speculation),
			 "none won: the cheapest with speculation (%s%s) costs %+.0f %% ($%.4f/Mtok) at its own max "
			 "rate — "
			 "drafts lower TPOT at low load, but at this SLA's rates proposing and verifying them costs "
			 "more than they save",
			 other, lv.counterpart_same ? ", the other knobs the same" : "",
			 (counter->t->cost_per_mtok / b->t->cost_per_mtok - 1) * 100, counter->t->cost_per_mtok);
	} else
		snprintf(lv.speculation, sizeof(lv.speculation),
			 "none won: no configuration with speculation met the SLA (or none was measured)");

	if (counter) {
		compare_steps(&lv, on ? b : counter, on ? counter : b);
		lv.have_compare = lv.n_steps > 0;
		describe(counter, lv.counterpart, sizeof(lv.counterpart));
	}
	*ret = lv;
	return 0;
}

void report_levers_print(const struct report_levers *lv, const char *indent, FILE *f)
{
	if (lv->spec_in_space || lv->k > 0)
		fprintf(f, "%sspeculation:     %s\n", indent, lv->speculation);
	if (lv->spec_in_space && isfinite(lv->stops_paying_rate))
		fprintf(f, "%s                 speculation stops paying from about %.2f requests/s\n", indent,
			lv->stops_paying_rate);
	if (isfinite(lv->prefix_hit_rate))
		fprintf(f, "%sprefix cache:    %s, %.1f %% of prompt tokens found at the max rate\n", indent,
			lv->prefix_caching, lv->prefix_hit_rate * 100);
	if (lv->dp > 1 || lv->pp > 1)
		fprintf(f, "%sreplicas:        %s\n", indent, lv->layout);
}

int report_levers_json(const struct report_levers *lv, cJSON *o)
{
	cJSON *l = cJSON_AddObjectToObject(o, "levers");
	int r = 0;

	if (!l)
		return -ENOMEM;
	r |= json_add_string(l, "spec_method", lv->spec_in_space || lv->k ? lv->method : NULL);
	r |= json_add_number(l, "spec_tokens", lv->k ? (double)lv->k : NAN);
	r |= json_add_string(l, "speculation", lv->spec_in_space || lv->k ? lv->speculation : NULL);
	r |= json_add_number(l, "spec_acceptance_rate", lv->acceptance);
	r |= json_add_number(l, "spec_mean_acceptance_length", lv->accept_length);
	r |= json_add_number(l, "spec_stops_paying_rate", lv->stops_paying_rate);
	r |= json_add_number(l, "prefix_cache_hit_rate", lv->prefix_hit_rate);
	r |= json_add_number(l, "data_parallel", lv->dp);
	r |= json_add_number(l, "tensor_parallel", lv->tp);
	r |= json_add_number(l, "pipeline_parallel", lv->pp);
	r |= json_add_number(l, "gpus", lv->gpus);
	r |= json_add_string(l, "layout", lv->layout);
	return r ? -ENOMEM : 0;
}

/* ---- the report's section ---- */

/* v with `decimals` decimals (× scale, then suffix), or a dash when unknown. */
static void fmt_or_dash(char *buf, size_t size, int decimals, double scale, const char *suffix, double v)
{
	if (isfinite(v))
		snprintf(buf, size, "%.*f%s", decimals, v * scale, suffix);
	else
		snprintf(buf, size, "–");
}

int report_levers_from_report(const struct report *r, struct report_levers *ret)
{
	_cleanup_(freep) struct report_levers_trial *v = NULL;
	size_t best = SIZE_MAX;

	if (!report_best(r))
		return -ENOENT;
	v = calloc(r->n_trials, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];

		v[i] = (struct report_levers_trial){ .t = &t->t, .knobs = t->knobs, .lps = t->lps, .n_lps = t->n_lps };
		if (t == report_best(r))
			best = i;
	}
	if (best == SIZE_MAX || !v[best].knobs)
		return -ENOENT;
	return report_levers_of(r->parsed, v, r->n_trials, best, ret);
}

void report_levers_section(struct report_doc *d, const struct report *r)
{
	struct report_levers lv;
	char a[32], b[32], c[32], e[32], rate[32];

	if (report_levers_from_report(r, &lv) < 0)
		return;
	if (!lv.spec_in_space && lv.k == 0 && !isfinite(lv.prefix_hit_rate) && lv.dp <= 1 && lv.pp <= 1)
		return;
	report_doc_heading(d, 2, "levers", "Speculation, prefix cache and replicas");
	report_doc_table_start(d, 2, (const char *const[]){ "", "" });
	if (lv.spec_in_space || lv.k)
		report_doc_kv(d, "Speculation", "%s", lv.speculation);
	if (isfinite(lv.prefix_hit_rate))
		report_doc_kv(d, "Prefix cache", "%s: %.1f %% of prompt tokens found in it at the max rate",
			      lv.prefix_caching, lv.prefix_hit_rate * 100);
	report_doc_kv(d, "Replicas", "%s", lv.layout);
	report_doc_table_end(d);
	if (!lv.have_compare)
		return;
	report_doc_para(d,
			"Speculation on and off across the load steps both were measured at (p50 TPOT; the other "
			"side's interpolated between its own rates): the answer against %s%s.",
			lv.counterpart, lv.counterpart_same ? ", the other knobs the same" : "");
	report_doc_table_start(d, 5,
			       (const char *const[]){ "rate (req/s)", "TPOT p50, speculation (ms)",
						      "TPOT p50, none (ms)", "drafts accepted",
						      "SLA met (measured side)" });
	for (size_t i = 0; i < lv.n_steps; i++) {
		const struct report_levers_step *s = &lv.steps[i];

		snprintf(rate, sizeof(rate), "%.2f", s->rate);
		fmt_or_dash(a, sizeof(a), 2, 1, "", s->on_tpot_ms);
		fmt_or_dash(b, sizeof(b), 2, 1, "", s->off_tpot_ms);
		fmt_or_dash(c, sizeof(c), 0, 100, " %", s->acceptance);
		snprintf(e, sizeof(e), "%s (%s, %.0f %%)", s->met ? "yes" : "no", s->from_on ? "speculation" : "none",
			 s->attainment * 100);
		report_doc_row(d, NULL, (const char *const[]){ rate, a, b, c, e });
	}
	report_doc_table_end(d);
	if (isfinite(lv.stops_paying_rate))
		report_doc_para(d,
				"Speculation stops paying from about %.2f requests/s: from there its TPOT is no "
				"lower than without it, or it misses the SLA where the other meets it.",
				lv.stops_paying_rate);
	else
		report_doc_para(d, "Speculation did not stop paying over the measured load steps.");
}

int report_levers_load(struct store *st, int64_t study_id, const struct study *s, struct report_levers *ret,
		       struct error *err)
{
	_cleanup_(store_study_best_done) struct store_study_best b = { 0 };
	struct report_levers_trial *v = NULL;
	struct store_trial *trials = NULL;
	size_t n = 0, best = SIZE_MAX;
	int r;

	r = store_study_best(st, study_id, &b, err);
	if (r < 0)
		return r;
	r = store_trial_history(st, study_id, &trials, &n, err);
	if (r < 0)
		return r;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		r = -ENOMEM;
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		struct store_load_point *lps = NULL;
		size_t n_lps = 0;

		v[i].t = &trials[i];
		v[i].knobs = trials[i].knobs_json ? cJSON_Parse(trials[i].knobs_json) : NULL;
		if (trials[i].id == b.trial.id)
			best = i;
		/* the load points of those that can stand beside the answer: measured, with a cost */
		if (isfinite(trials[i].cost_per_mtok) || trials[i].id == b.trial.id) {
			r = store_load_point_list(st, trials[i].id, &lps, &n_lps, err);
			if (r < 0)
				goto done;
			v[i].lps = lps;
			v[i].n_lps = n_lps;
		}
	}
	if (best == SIZE_MAX || !v[best].knobs) {
		r = -ENOENT;
		goto done;
	}
	r = report_levers_of(s, v, n, best, ret);
done:
	for (size_t i = 0; v && i < n; i++) {
		cJSON_Delete((cJSON *)v[i].knobs);
		store_load_point_array_free((struct store_load_point *)v[i].lps, v[i].n_lps);
	}
	free(v);
	store_trial_array_free(trials, n);
	return r;
}
