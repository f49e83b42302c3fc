/* report-plan-day.c — capacity for the day's curve: how many replicas and
 * GPUs each hour of a rate profile needs, and what the day costs.
 *
 * Traffic is not flat: a captured rate profile (`goodput workload capture`,
 * its rate per hour) says what each hour of the day asks. Each hour is sized
 * for the profile's highest rate in it, with the study's answer
 * (store_study_best: the best configuration and its runner-up, their
 * first measurement's max rate as one replica's capacity, as `plan --rate`
 * does). A configuration that is cheaper per token at full load can lose at
 * low load: a replica is a whole unit, and a runner-up on one GPU fills a
 * quiet hour that the best's two-GPU replica would half waste. The day is
 * priced three ways: the best all day, the runner-up all day, and the
 * cheaper of the two each hour. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "report-internal.h"
#include "workload.h"

/* The profile's highest rate within hour h. */
static double hour_peak(const struct probe_rate_profile *p, unsigned h)
{
	uint32_t from = h * 3600, to = from + 3600;
	double peak = probe_rate_profile_at(p, from);

	for (uint32_t i = 0; i < p->n; i++)
		if (p->second_of_day[i] > from && p->second_of_day[i] < to)
			peak = MAX(peak, p->rate[i]);
	return peak;
}

/* The runner-up's first measurement among the trials (as the best's is). */
static const struct report_trial *runner_up(const struct report *r)
{
	const char *key = r->answer.have_runner_up ? r->answer.runner_up_key : NULL;

	for (size_t i = 0; key && i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];

		if (t->t.canonical_key && strcmp(t->t.canonical_key, key) == 0 && t->t.state == STORE_TRIAL_DONE &&
		    isfinite(t->t.cost_per_mtok) && t->t.max_rate > 0)
			return t;
	}
	return NULL;
}

static int slot(double load, double headroom, double capacity, unsigned gpus, double price,
		struct report_plan_slot *ret, struct error *err)
{
	struct report_plan p;
	int q;

	if (!(load > 0)) { /* a quiet hour: nothing deployed */
		*ret = (struct report_plan_slot){ 0 };
		return 0;
	}
	q = report_plan_compute(load, false, headroom, capacity, gpus, price, 0, 0, &p, err);
	if (q < 0)
		return q;
	*ret = (struct report_plan_slot){ .replicas = p.replicas, .gpus = p.gpus, .usd = p.usd_per_hour };
	return 0;
}

int report_plan_day_study(struct report *r, const struct probe_rate_profile *p, double headroom,
			  struct report_plan_day *ret, struct error *err)
{
	const struct report_trial *b = report_best(r), *ru = runner_up(r);
	double price = report_price(r);
	struct report_plan_day d = { .headroom = headroom };
	int q;

	if (!b)
		return error_set(err, -ENOENT,
				 "study %s: no configuration met the SLA, so there is nothing to plan with",
				 r->study.name);
	if (!isfinite(price))
		return error_set(err, -EINVAL, "study %s: the GPU price is unknown (spec not readable)", r->study.name);
	if (!p->n)
		return error_set(err, -EINVAL, "the rate profile is empty");
	d.capacity = b->t.max_rate;
	d.gpus_per_replica = b->gpus;
	d.have_runner_up = ru != NULL;
	if (ru) {
		d.runner_up_capacity = ru->t.max_rate;
		d.runner_up_gpus_per_replica = ru->gpus;
	}
	for (unsigned h = 0; h < 24; h++) {
		struct report_plan_hour *x = &d.hours[h];

		x->load = hour_peak(p, h);
		q = slot(x->load, headroom, d.capacity, d.gpus_per_replica, price, &x->best, err);
		if (q >= 0 && ru)
			q = slot(x->load, headroom, d.runner_up_capacity, d.runner_up_gpus_per_replica, price,
				 &x->runner_up, err);
		if (q < 0)
			return error_prefix(err, q, "%02u:00", h);
		x->runner_up_cheaper = ru && x->runner_up.usd < x->best.usd;
		d.usd_best += x->best.usd;
		d.usd_runner_up += x->runner_up.usd;
		d.usd_mixed += x->runner_up_cheaper ? x->runner_up.usd : x->best.usd;
		d.peak_gpus_best = MAX(d.peak_gpus_best, x->best.gpus);
		d.runner_up_hours += x->runner_up_cheaper;
	}
	*ret = d;
	return 0;
}

void report_plan_day_print(const struct report *r, const struct report_plan_day *d, FILE *f)
{
	const struct report_trial *b = report_best(r), *ru = runner_up(r);
	char knobs[256];
	bool show_ru = d->have_runner_up && d->runner_up_hours > 0;

	report_knobs_short(b, knobs, sizeof(knobs));
	fprintf(f, "study %s: best configuration %s\n", r->study.name, knobs);
	fprintf(f, "one replica: %g req/s under the SLA, %u GPU%s\n", d->capacity, d->gpus_per_replica,
		d->gpus_per_replica == 1 ? "" : "s");
	if (ru) {
		report_knobs_short(ru, knobs, sizeof(knobs));
		fprintf(f, "runner-up %s: %g req/s, %u GPU%s per replica\n", knobs, d->runner_up_capacity,
			d->runner_up_gpus_per_replica, d->runner_up_gpus_per_replica == 1 ? "" : "s");
	}
	fprintf(f, "headroom %g%%\n\n", d->headroom * 100);
	fprintf(f, "hour   req/s    replicas  GPUs  $/hour%s\n",
		show_ru ? "    runner-up: replicas  GPUs  $/hour" : "");
	for (unsigned h = 0; h < 24; h++) {
		const struct report_plan_hour *x = &d->hours[h];

		fprintf(f, "%02u:00  %7.3g  %8" PRIu64 "  %4" PRIu64 "  %7.2f", h, x->load, x->best.replicas,
			x->best.gpus, x->best.usd);
		if (show_ru)
			fprintf(f, "    %18" PRIu64 "  %4" PRIu64 "  %7.2f%s", x->runner_up.replicas, x->runner_up.gpus,
				x->runner_up.usd, x->runner_up_cheaper ? "  <- runner-up" : "");
		fputc('\n', f);
	}
	fprintf(f, "\n$/day with the best: %.2f (peak %" PRIu64 " GPUs)\n", d->usd_best, d->peak_gpus_best);
	if (show_ru)
		fprintf(f,
			"$/day with the runner-up all day: %.2f\n"
			"$/day with the runner-up in the %u hour%s it is cheaper: %.2f (%.1f%% less)\n",
			d->usd_runner_up, d->runner_up_hours, d->runner_up_hours == 1 ? "" : "s", d->usd_mixed,
			d->usd_best > 0 ? (d->usd_best - d->usd_mixed) / d->usd_best * 100 : 0.0);
	else if (d->have_runner_up)
		fprintf(f, "the runner-up is cheaper in no hour ($/day all day: %.2f)\n", d->usd_runner_up);
}

static int slot_json(cJSON *o, const char *key, const struct report_plan_slot *s)
{
	cJSON *x = cJSON_AddObjectToObject(o, key);

	if (!x || json_add_number(x, "replicas", (double)s->replicas) < 0 ||
	    json_add_number(x, "gpus", (double)s->gpus) < 0 || json_add_number(x, "usd", s->usd) < 0)
		return -ENOMEM;
	return 0;
}

int report_plan_day_to_json(const struct report *r, const struct report_plan_day *d, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	const struct report_trial *b = report_best(r), *ru = runner_up(r);
	cJSON *hours;
	int q = 0;

	if (!o)
		return -ENOMEM;
	q |= json_add_string(o, "study", r->study.name);
	q |= json_add_string(o, "best", b->t.canonical_key ? b->t.canonical_key : "");
	q |= json_add_number(o, "capacity_per_replica", d->capacity);
	q |= json_add_number(o, "gpus_per_replica", d->gpus_per_replica);
	if (ru) {
		q |= json_add_string(o, "runner_up", ru->t.canonical_key);
		q |= json_add_number(o, "runner_up_capacity_per_replica", d->runner_up_capacity);
		q |= json_add_number(o, "runner_up_gpus_per_replica", d->runner_up_gpus_per_replica);
		q |= json_add_number(o, "usd_per_day_runner_up", d->usd_runner_up);
		q |= json_add_number(o, "usd_per_day_mixed", d->usd_mixed);
		q |= json_add_number(o, "runner_up_hours", d->runner_up_hours);
	}
	q |= json_add_number(o, "headroom", d->headroom);
	q |= json_add_number(o, "usd_per_day", d->usd_best);
	q |= json_add_number(o, "peak_gpus", (double)d->peak_gpus_best);
	hours = cJSON_AddArrayToObject(o, "hours");
	if (q || !hours)
		return -ENOMEM;
	for (unsigned h = 0; h < 24; h++) {
		const struct report_plan_hour *x = &d->hours[h];
		cJSON *e = cJSON_CreateObject();
		char t[8];

		if (!e || !cJSON_AddItemToArray(hours, e)) {
			cJSON_Delete(e);
			return -ENOMEM;
		}
		snprintf(t, sizeof(t), "%02u:00", h);
		if (json_add_string(e, "hour", t) < 0 || json_add_number(e, "load", x->load) < 0 ||
		    slot_json(e, "best", &x->best) < 0 || (ru && slot_json(e, "runner_up", &x->runner_up) < 0) ||
		    json_add_string(e, "choice", x->runner_up_cheaper ? "runner_up" : "best") < 0)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(o);
	return 0;
}
