/* report-data.c — reads a study for its report: the studies row, the spec
 * (validated with the engine profile's extra knobs when the profile is
 * found), every trial with its load points, the best configuration and its
 * launch command. Nothing here fails because a later section would lack data:
 * a spec that no longer parses or a profile that is gone leaves a note, and
 * the sections that need them say so. Also the small derived figures every
 * output shares (max-goodput point, tokens/s per user, spread of re-probes),
 * and the convenience entry points the daemon calls. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "engine-profile.h"
#include "json-util.h"
#include "macro.h"
#include "parse.h"
#include "cost.h"
#include "report-internal.h"
#include "study.h"
#include "workload.h"

static void report_trial_done(struct report_trial *t)
{
	store_trial_done(&t->t);
	cJSON_Delete(t->knobs);
	store_load_point_array_free(t->lps, t->n_lps);
}

struct report *report_free(struct report *r)
{
	if (!r)
		return NULL;
	store_study_done(&r->study);
	cJSON_Delete(r->spec);
	study_free(r->parsed);
	free(r->spec_error);
	engine_profile_free(r->profile);
	free(r->profile_error);
	for (size_t i = 0; i < r->n_trials; i++)
		report_trial_done(&r->trials[i]);
	free(r->trials);
	free(r->launch_command);
	free(r->launch_error);
	cJSON_Delete(r->host_owned);
	free(r->study_ref);
	store_study_best_done(&r->answer);
	report_production_done(&r->production);
	free(r);
	return NULL;
}

static int find_study(struct store *s, const char *ref, struct store_study *ret, struct error *err)
{
	int64_t id;
	int r;

	r = store_study_get_by_name(s, ref, ret, err);
	if (r != -ENOENT)
		return r;
	if (parse_i64("study id", ref, 1, INT64_MAX, &id, NULL) >= 0) {
		r = store_study_get(s, id, ret, NULL);
		if (r != -ENOENT)
			return r;
	}
	return error_set(err, -ENOENT, "no study named '%s' in the store", ref);
}

static void trial_derive(struct report_trial *t)
{
	t->knobs = t->t.knobs_json ? cJSON_Parse(t->t.knobs_json) : NULL;
	/* every replica's and stage's GPUs are paid for (opt_config_gpus' rule) */
	t->gpus = t->knobs ? opt_knobs_gpus(t->knobs) : 1;
	t->confirm = t->t.kind && strstr(t->t.kind, "confirm");
	t->sweep = t->t.kind && strstr(t->t.kind, "sweep");
	/* the load point the trial's answer came from: every figure of the
	 * "at max goodput" rows is that one point's (the search may have seen
	 * a higher rate met by its point estimate, but not with confidence) */
	t->best_lp = -1;
	for (size_t i = 0; i < t->n_lps && isfinite(t->t.max_rate); i++) {
		const struct store_load_point *lp = &t->lps[i];

		if (lp->sla_met && isfinite(lp->request_rate) &&
		    fabs(lp->request_rate - t->t.max_rate) <= 1e-9 * MAX(lp->request_rate, t->t.max_rate))
			t->best_lp = (long)i;
	}
	/* else (offline: the saturated run; or older records) the highest rate that met the SLA */
	for (size_t i = 0; i < t->n_lps && t->best_lp < 0; i++) {
		const struct store_load_point *lp = &t->lps[i];

		if (!lp->sla_met || !isfinite(lp->request_rate))
			continue;
		if (t->best_lp < 0 || lp->request_rate > t->lps[t->best_lp].request_rate)
			t->best_lp = (long)i;
	}
	/* the SLA held even with every request at once (the server outran
	 * the load): the answer is the saturation run */
	for (size_t i = 0; i < t->n_lps && t->best_lp < 0 && isfinite(t->t.max_rate); i++)
		if (t->lps[i].sla_met && t->lps[i].phase && strcmp(t->lps[i].phase, "saturation") == 0)
			t->best_lp = (long)i;
}

static int load_trials(struct report *r, struct store *s, struct error *err)
{
	struct store_trial *h = NULL;
	size_t n = 0;
	int q;

	q = store_trial_history(s, r->study.id, &h, &n, err);
	if (q < 0)
		return q;
	r->trials = calloc(n ? n : 1, sizeof(*r->trials));
	if (!r->trials) {
		store_trial_array_free(h, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		r->trials[i].t = h[i];
		memset(&h[i], 0, sizeof(h[i]));
	}
	r->n_trials = n;
	store_trial_array_free(h, n);
	for (size_t i = 0; i < n; i++) {
		struct report_trial *t = &r->trials[i];

		q = store_load_point_list(s, t->t.id, &t->lps, &t->n_lps, err);
		if (q < 0)
			return q;
		trial_derive(t);
	}
	return 0;
}

static void find_best(struct report *r, struct store *s)
{
	r->best = -1;
	if (store_study_best(s, r->study.id, &r->answer, NULL) < 0)
		return;
	for (size_t i = 0; i < r->n_trials; i++)
		if (r->trials[i].t.id == r->answer.trial.id)
			r->best = (long)i;
}

static char *strdup_err(const struct error *e, int q)
{
	return strdup(error_str(e, q));
}

static void load_spec_and_profile(struct report *r)
{
	struct error e = { 0 };
	int q;

	if (r->study.spec_json)
		r->spec = cJSON_Parse(r->study.spec_json);
	if (!r->spec) {
		r->spec_error = strdup("the stored study spec is not valid JSON");
		return;
	}
	q = engine_profile_find(r->study.engine, r->opts.engines_dir, &r->profile, &e);
	if (q < 0) {
		r->profile_error = strdup_err(&e, q);
		r->profile = NULL;
	}
	struct study_options so = { .extra_knobs = r->profile ? (const char *const *)r->profile->extra_knobs : NULL };
	e = (struct error){ 0 };
	q = study_from_json(r->spec, &so, &r->parsed, &e);
	/* the space as the search left it (search.extend_edges' widenings) */
	if (q >= 0)
		q = report_study_phases(&r->study, r->parsed, &so, &e);
	if (q < 0) {
		r->spec_error = strdup_err(&e, q);
		r->parsed = study_free(r->parsed);
	}
}

/* The command the best trial's server was launched with, as the store
 * kept it: never rebuilt from whatever profile is found now. */
static void render_launch(struct report *r)
{
	const struct report_trial *b = report_best(r);
	_cleanup_(engine_command_done) struct engine_command cmd = { 0 };

	if (!b)
		return;
	if (!b->t.launch_json) {
		r->launch_error = strdup("the store holds none for the best trial (recorded before goodput kept "
					 "each trial's launch command)");
		return;
	}
	if (engine_command_from_json(b->t.launch_json, &cmd) < 0) {
		r->launch_error = strdup("the stored launch command of the best trial is not readable");
		return;
	}
	r->launch_command = engine_command_format(&cmd);
}

static void find_host(struct report *r)
{
	const struct report_trial *b = report_best(r);

	if (b && b->t.host_json)
		r->host_owned = cJSON_Parse(b->t.host_json);
	for (size_t i = r->n_trials; !r->host_owned && i > 0; i--)
		if (r->trials[i - 1].t.host_json)
			r->host_owned = cJSON_Parse(r->trials[i - 1].t.host_json);
	r->host = r->host_owned;
}

int report_load(struct store *s, const char *study, const struct report_options *opts, struct report **ret,
		struct error *err)
{
	_cleanup_(report_freep) struct report *r = NULL;
	int q;

	if (!s || !study || !ret)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->best = -1;
	if (opts)
		r->opts = *opts;
	r->study_ref = strdup(study);
	if (!r->study_ref)
		return -ENOMEM;
	q = find_study(s, study, &r->study, err);
	if (q < 0)
		return q;
	q = load_trials(r, s, err);
	if (q < 0)
		return q;
	find_best(r, s);
	/* not fatal: without it the report has no shape section */
	if (report_shape_compare(s, r->study.id, r->best >= 0 ? &r->answer : NULL, &r->shape, NULL) < 0)
		r->shape.present = false;
	load_spec_and_profile(r);
	report_production_load(r, s);
	render_launch(r);
	find_host(r);
	*ret = TAKE_PTR(r);
	return 0;
}

/* ---- derived figures ---- */

const struct report_trial *report_best(const struct report *r)
{
	return r->best >= 0 ? &r->trials[r->best] : NULL;
}

const char *report_knob_text(const struct report_trial *t, const char *knob, char *buf, size_t size)
{
	const cJSON *v = t->knobs ? cJSON_GetObjectItemCaseSensitive(t->knobs, knob) : NULL;

	if (cJSON_IsString(v))
		snprintf(buf, size, "%s", v->valuestring);
	else if (cJSON_IsNumber(v))
		snprintf(buf, size, "%g", v->valuedouble);
	else
		snprintf(buf, size, "-");
	return buf;
}

double report_knob_number(const struct report_trial *t, const char *knob)
{
	const cJSON *v = t->knobs ? cJSON_GetObjectItemCaseSensitive(t->knobs, knob) : NULL;

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void report_knobs_short(const struct report_trial *t, char *buf, size_t size)
{
	const cJSON *k;
	size_t used = 0;

	buf[0] = '\0';
	if (!t->knobs) {
		snprintf(buf, size, "%s", t->t.canonical_key ? t->t.canonical_key : "?");
		return;
	}
	cJSON_ArrayForEach(k, t->knobs)
	{
		char v[64];
		int n;

		if (cJSON_IsString(k))
			snprintf(v, sizeof(v), "%s", k->valuestring);
		else if (cJSON_IsNumber(k))
			snprintf(v, sizeof(v), "%g", k->valuedouble);
		else
			continue;
		if (strcmp(k->string, "tensor_parallel") == 0)
			n = snprintf(buf + used, size - used, "%stp=%s", used ? " " : "", v);
		else if (strcmp(k->string, "quantization") == 0)
			n = snprintf(buf + used, size - used, "%s%s", used ? " " : "", v);
		else
			n = snprintf(buf + used, size - used, "%s%s=%s", used ? " " : "", k->string, v);
		if (n < 0 || (size_t)n >= size - used)
			break;
		used += (size_t)n;
	}
}

const struct store_load_point *report_trial_best_lp(const struct report_trial *t)
{
	return t->best_lp >= 0 ? &t->lps[t->best_lp] : NULL;
}

bool report_lp_has_gpu(const struct store_load_point *lp)
{
	return isfinite(lp->gpu_util_mean) || isfinite(lp->gpu_util_peak) || isfinite(lp->gpu_mem_mean_mib) ||
	       isfinite(lp->gpu_mem_peak_mib);
}

bool report_trial_has_gpu(const struct report_trial *t)
{
	for (size_t i = 0; i < t->n_lps; i++)
		if (report_lp_has_gpu(&t->lps[i]))
			return true;
	return false;
}

bool report_has_gpu(const struct report *r)
{
	for (size_t i = 0; i < r->n_trials; i++)
		if (report_trial_has_gpu(&r->trials[i]))
			return true;
	return false;
}

double report_trial_tps_per_user(const struct report_trial *t)
{
	const struct store_load_point *lp = report_trial_best_lp(t);

	if (!lp || !isfinite(lp->mean_tpot_ms) || lp->mean_tpot_ms <= 0)
		return NAN;
	return 1000.0 / lp->mean_tpot_ms;
}

double report_price(const struct report *r)
{
	const cJSON *gpu, *p;

	if (r->parsed)
		return r->parsed->gpu.price_per_gpu_hour;
	gpu = r->spec ? cJSON_GetObjectItemCaseSensitive(r->spec, "gpu") : NULL;
	p = gpu ? cJSON_GetObjectItemCaseSensitive(gpu, "price_per_gpu_hour") : NULL;
	return cJSON_IsNumber(p) ? p->valuedouble : NAN;
}

unsigned report_host_gpus(const struct report *r)
{
	return r->parsed ? r->parsed->gpu.count : 0;
}

void report_sla_text(const struct report *r, char *buf, size_t size)
{
	if (!r->parsed) {
		snprintf(buf, size, "unknown (spec not readable)");
		return;
	}
	if (probe_sla_empty(&r->parsed->sla)) {
		snprintf(buf, size, "none (offline: cost from saturated throughput)");
		return;
	}
	probe_sla_format(&r->parsed->sla, buf, size);
}

double report_cost(const struct report *r)
{
	return r->best >= 0 ? r->answer.cost_per_mtok : NAN;
}

const char *report_cost_note(const struct report *r, char *buf, size_t size)
{
	if (r->best >= 0 && r->answer.n > 1)
		snprintf(buf, size, ", the mean of %u measurements, spread %.1f%%", r->answer.n,
			 r->answer.spread * 100);
	else if (size > 0)
		buf[0] = 0;
	return buf;
}

double report_config_cost(const struct report *r, const char *canonical_key, unsigned *ret_n)
{
	double sum = 0;
	unsigned n = 0;

	/* in trial order, as the store sums them */
	for (size_t i = 0; canonical_key && i < r->n_trials; i++) {
		const struct store_trial *t = &r->trials[i].t;

		if (t->state != STORE_TRIAL_DONE || !isfinite(t->cost_per_mtok) || !(t->cost_per_mtok > 0) ||
		    !t->canonical_key || strcmp(t->canonical_key, canonical_key) != 0)
			continue;
		sum += t->cost_per_mtok;
		n++;
	}
	if (ret_n)
		*ret_n = n;
	return n ? sum / n : NAN;
}

void report_best_spread(const struct report *r, struct report_spread *ret)
{
	const struct report_trial *b = report_best(r);
	struct report_spread sp = { 0 };

	for (size_t i = 0; b && b->t.canonical_key && i < r->n_trials; i++) {
		const struct report_trial *t = &r->trials[i];

		if (t->t.state != STORE_TRIAL_DONE || !t->t.canonical_key ||
		    strcmp(t->t.canonical_key, b->t.canonical_key) != 0 || !isfinite(t->t.cost_per_mtok) ||
		    !(t->t.cost_per_mtok > 0) || !isfinite(t->t.max_goodput))
			continue;
		if (sp.n == 0)
			sp.goodput_min = sp.goodput_max = t->t.max_goodput;
		sp.goodput_min = MIN(sp.goodput_min, t->t.max_goodput);
		sp.goodput_max = MAX(sp.goodput_max, t->t.max_goodput);
		sp.goodput_mean += t->t.max_goodput;
		sp.n++;
	}
	if (sp.n > 0)
		sp.goodput_mean /= (double)sp.n;
	if (sp.n <= 1)
		sp = (struct report_spread){ .n = sp.n };
	*ret = sp;
}

#define WORKLOAD_SAMPLE_MAX 20000u

uint32_t report_lengths_pct(const uint32_t *sorted, size_t n, double pct)
{
	return sorted[(size_t)MIN((double)(n - 1), floor(pct / 100 * (double)(n - 1) + 0.5))];
}

int report_workload_lengths(const struct report *r, uint32_t **ret_in, uint32_t **ret_out, size_t *ret_n,
			    char **ret_why)
{
	struct probe_workload_config cfg;
	struct probe_workload *w = NULL;
	_cleanup_(freep) uint32_t *in = NULL, *out = NULL;
	struct error e = { 0 };
	int q;

	if (!r->parsed) {
		*ret_why = strdup("the study spec is not readable");
		return -EINVAL;
	}
	cfg = r->parsed->workload;
	cfg.lengths_only = true;
	cfg.num_warmup = 0;
	cfg.arrival = PROBE_ARRIVAL_INF; /* lengths only: the arrival times do not matter */
	cfg.num_prompts = MIN(MAX(cfg.num_prompts, 1u), WORKLOAD_SAMPLE_MAX);
	q = probe_workload_generate(&cfg, &w, &e);
	if (q < 0) {
		if (asprintf(ret_why, "regenerating the workload failed: %s", error_str(&e, q)) < 0)
			*ret_why = NULL;
		return q;
	}
	in = calloc(w->n_requests ? w->n_requests : 1, sizeof(*in));
	out = calloc(w->n_requests ? w->n_requests : 1, sizeof(*out));
	if (!in || !out) {
		probe_workload_free(w);
		return -ENOMEM;
	}
	for (size_t i = 0; i < w->n_requests; i++) {
		in[i] = w->requests[i].input_len;
		out[i] = w->requests[i].output_len;
	}
	qsort(in, w->n_requests, sizeof(*in), array_cmp_u32);
	qsort(out, w->n_requests, sizeof(*out), array_cmp_u32);
	*ret_n = w->n_requests;
	probe_workload_free(w);
	*ret_in = TAKE_PTR(in);
	*ret_out = TAKE_PTR(out);
	return 0;
}

const char *report_fmt(char *buf, size_t size, int digits, double v)
{
	if (!isfinite(v))
		snprintf(buf, size, "%s", isinf(v) ? (v > 0 ? "inf" : "-inf") : "-");
	else
		snprintf(buf, size, "%.*f", digits, v);
	return buf;
}

/* ---- entry points for the daemon ---- */

int report_markdown(struct store *s, const char *study, const struct report_options *opts, char **ret_markdown,
		    struct error *err)
{
	_cleanup_(report_freep) struct report *r = NULL;
	int q;

	q = report_load(s, study, opts, &r, err);
	if (q < 0)
		return q;
	return report_render_markdown(r, ret_markdown);
}

int report_write_html(struct store *s, const char *study, const char *dir, const struct report_options *opts,
		      char **ret_html_path, struct error *err)
{
	_cleanup_(report_freep) struct report *r = NULL;
	struct report_files files = { 0 };
	int q;

	q = report_load(s, study, opts, &r, err);
	if (q < 0)
		return q;
	q = report_write_files(r, dir, &files, err);
	if (q < 0)
		return q;
	*ret_html_path = TAKE_PTR(files.html_path);
	report_files_done(&files);
	return 0;
}

/* The GPUs a trial held (bit i: GPU i; none recorded: GPU 0). */
static uint64_t trial_gpu_mask(const struct store_trial *t)
{
	uint64_t m = 0;

	for (const char *p = t->gpus; p && *p;) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || v >= 64)
			break;
		m |= UINT64_C(1) << v;
		p = *end == ',' ? end + 1 : NULL;
	}
	return m ? m : 1;
}

void report_schedule(const struct report *r, struct report_schedule *ret)
{
	uint64_t t0 = 0, t1 = 0, all = 0;
	double held = 0;

	*ret = (struct report_schedule){ 0 };
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct store_trial *t = &r->trials[i].t;
		unsigned at_once = 0;

		if (!t->started_usec || t->finished_usec <= t->started_usec)
			continue;
		t0 = !t0 || t->started_usec < t0 ? t->started_usec : t0;
		t1 = MAX(t1, t->finished_usec);
		all |= trial_gpu_mask(t);
		held += (double)__builtin_popcountll(trial_gpu_mask(t)) * (double)(t->finished_usec - t->started_usec);
		for (size_t j = 0; j < r->n_trials; j++) {
			const struct store_trial *u = &r->trials[j].t;

			at_once += u->started_usec && u->started_usec <= t->started_usec &&
				   t->started_usec < u->finished_usec;
		}
		ret->most_at_once = MAX(ret->most_at_once, at_once);
	}
	if (t1 <= t0)
		return;
	ret->wall_s = (double)(t1 - t0) / 1e6;
	ret->gpus = (unsigned)__builtin_popcountll(all);
	ret->gpu_busy = held / 1e6 / (ret->wall_s * ret->gpus);
}
