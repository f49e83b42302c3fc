/* runner-dryrun.c — a configuration evaluated in virtual time instead of
 * deployed: the knobs become goodput-sim engine flags, the sim core runs the
 * study's workload through its engine model (sim_find_max_rate for online
 * studies, the saturated throughput for offline ones), and the cost model
 * turns the token rate into $/Mtok exactly as for a real trial. A whole
 * evaluation takes milliseconds, so a search over hundreds of configurations
 * runs in seconds (Vidur-style), and tests use it as the ground truth. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "engine.h"
#include "json-util.h"
#include "macro.h"
#include "runner-dryrun.h"
#include "simulate.h"

/* A knob's value as the sim's flags read it. */
static const char *value_text(const cJSON *v, char *buf, size_t size)
{
	if (cJSON_IsString(v))
		return v->valuestring;
	if (!cJSON_IsNumber(v))
		return NULL;
	if (floor(v->valuedouble) == v->valuedouble && fabs(v->valuedouble) < 1e15)
		snprintf(buf, size, "%.0f", v->valuedouble);
	else
		snprintf(buf, size, "%.17g", v->valuedouble);
	return buf;
}

/* The dry run models a GPU and a model only from goodput-sim's presets:
 * a study naming others is told so by its own keys, not by sim flags it
 * never typed. */
static int check_presets(const struct study *study, struct error *err)
{
	struct sim_model m;
	struct error e = { 0 };
	char names[256];
	size_t len = 0;

	if (!sim_gpu_find(study->gpu.type))
		return error_set(err, -EINVAL,
				 "gpu.type \"%s\": no performance preset for it (the dry run models H100, H200, A100, "
				 "L40S and MI300X)",
				 study->gpu.type);
	if (sim_model_preset(study->model.name, &m, &e) >= 0)
		return 0;
	names[0] = 0;
	for (size_t i = 0; sim_model_preset_name(i) && len < sizeof(names); i++) {
		int k = snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", sim_model_preset_name(i));

		len = k > 0 ? MIN(len + (size_t)k, sizeof(names)) : len;
	}
	return error_set(err, -EINVAL, "model.name \"%s\": no model preset for it (the dry run models %s)",
			 study->model.name, names);
}

/* Speculation as the study describes it: the draft model of the method
 * (model.drafts) and the workload's acceptance of its drafts. */
static int speculation(const struct study *study, struct sim_engine_config *c, struct error *err)
{
	const char *method = sim_spec_method_to_string(c->spec_method), *draft;
	char curve[256];
	int r;

	if (c->spec_method == SIM_SPEC_NONE)
		return 0;
	draft = study_draft_model(study, method);
	if (c->spec_method == SIM_SPEC_DRAFT_MODEL) {
		if (!draft)
			return error_set(err, -EINVAL, "model.drafts.draft_model: the draft model is not given");
		r = sim_engine_config_apply_flag(c, "--spec-draft-model", draft, err);
		/* the draft model on one GPU, as the shipped profiles start it */
		if (r >= 0 && c->spec_draft_tp == 0)
			r = sim_engine_config_apply_flag(c, "--spec-draft-tp", "1", err);
		if (r < 0)
			return r;
	}
	if (study_spec_acceptance_text(study, method, curve, sizeof(curve)))
		return sim_engine_config_apply_flag(c, "--spec-acceptance", curve, err);
	return 0;
}

static int build_engine_config(const struct study *study, const cJSON *knobs, unsigned variant,
			       const struct runner_dry_engine *engine, struct sim_engine_config *ret, struct error *err)
{
	struct sim_engine_config c;
	const cJSON *item;
	char num[32];
	int r;

	r = check_presets(study, err);
	if (r < 0)
		return r;
	sim_engine_config_init(&c);
	snprintf(num, sizeof(num), "%u", study->gpu.per_node);
	r = sim_engine_config_apply_flag(&c, "--model", study->model.name, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&c, "--gpu", study->gpu.type, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&c, "--gpus", num, err);
	if (r < 0)
		return error_prefix(err, r, "dry run");
	cJSON_ArrayForEach(item, knobs)
	{
		char flagbuf[OPT_KNOB_NAME_MAX + 8], valbuf[64];
		const char *flag = sim_knob_flag(item->string, flagbuf, sizeof(flagbuf));
		const char *value = value_text(item, valbuf, sizeof(valbuf));

		if (!flag || !value)
			continue;
		r = sim_engine_config_apply_flag(&c, flag, value, err);
		if (r < 0)
			return error_prefix(err, r, "dry run: knob %s", item->string);
		/* r == 0: not a sim flag (an engine-specific knob): no effect in virtual time */
	}
	r = speculation(study, &c, err);
	if (r < 0)
		return error_prefix(err, r, "dry run");
	/* disaggregated with one worker a side unless the configuration says more */
	if (opt_knobs_pd_shape(knobs, NULL)) {
		c.pd.prefill_workers = MAX(c.pd.prefill_workers, 1u);
		c.pd.decode_workers = MAX(c.pd.decode_workers, 1u);
	}
	c.seed = variant;
	if (engine) {
		if (engine->profile_file && engine->profile_file[0]) {
			r = sim_engine_config_apply_flag(&c, "--profile-file", engine->profile_file, err);
			if (r < 0)
				return error_prefix(err, r, "dry run");
		}
		c.fault_step_usec = engine->fault_step_usec;
		c.fault_step_per_seq_usec = engine->fault_step_per_seq_usec;
	}
	r = sim_engine_config_resolve(&c, err);
	if (r < 0)
		return error_prefix(err, r, "dry run");
	*ret = c;
	return 0;
}

static int evaluate_knobs(const struct study *study, const cJSON *knobs, unsigned variant,
			  const struct runner_dry_engine *engine, struct runner_dry_result *ret, struct error *err);

/* The sim core's start-up model for cfg: up to ready, or (refused) up to
 * where vLLM gives up, after its weights and initialisation. */
static double startup_seconds(const struct sim_engine_config *cfg, bool refused)
{
	struct sim_engine_config c = *cfg;
	struct sim_startup_phases ph = { 0 };

	sim_startup_model_init(&c.startup);
	c.startup.enabled = true;
	if (sim_engine_startup_usec(&c, &ph) == 0)
		return 0;
	return refused ? ph.weights_s + ph.init_s : ph.total_s;
}

/* The probe's time in virtual seconds: its saturation run, then the rate
 * search's points at about the answer's rate. */
static double probe_seconds(const struct study *study, const struct runner_dry_result *res)
{
	double sat = res->have_saturated ? res->saturated.duration_s : 0;
	double at = res->have_point ? res->point.duration_s : sat;
	unsigned points = RUNNER_DRY_SEARCH_POINTS;

	if (!res->have_saturated)
		return at;
	if (study->probe.max_steps > 1)
		points = MIN(points, study->probe.max_steps - 1);
	return sat + points * at;
}

int runner_dry_evaluate(const struct study *study, const struct opt_config *config, unsigned variant,
			struct runner_dry_result *ret, struct error *err)
{
	return runner_dry_evaluate_with(study, config, variant, NULL, ret, err);
}

int runner_dry_evaluate_with(const struct study *study, const struct opt_config *config, unsigned variant,
			     const struct runner_dry_engine *engine, struct runner_dry_result *ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *knobs = NULL;
	int r;

	r = opt_config_to_json(study->space, config, &knobs);
	if (r < 0)
		return error_set(err, r, "out of memory");
	return evaluate_knobs(study, knobs, variant, engine, ret, err);
}

int runner_dry_evaluate_knobs(const struct study *study, const cJSON *knobs, unsigned variant,
			      struct runner_dry_result *ret, struct error *err)
{
	return evaluate_knobs(study, knobs, variant, NULL, ret, err);
}

static int evaluate_knobs(const struct study *study, const cJSON *knobs, unsigned variant,
			  const struct runner_dry_engine *engine, struct runner_dry_result *ret, struct error *err)
{
	struct runner_dry_result res = { .cost_per_mtok = NAN, .max_rate = 0 };
	struct sim_engine_config cfg;
	struct sim_startup_check check = { 0 };
	struct opt_throughput tp = { 0 };
	struct error e = { 0 };
	const struct probe_result *pt;
	double tps, in_per_req;
	int r;

	r = build_engine_config(study, knobs, variant, engine, &cfg, err);
	if (r < 0)
		return r;
	/* vLLM's start-up checks first: a refusal is the configuration's outcome,
	 * with the cause the engine's log would give */
	r = sim_engine_check_startup(&cfg, &check, &e);
	if (r < 0) {
		res.infeasible = true;
		res.cause = check.cause;
		res.suggested_max_model_len =
			check.cause == SIM_STARTUP_KV_CACHE ? (uint32_t)MIN(check.est_max_model_len, UINT32_MAX) : 0;
		snprintf(res.message, sizeof(res.message), "%s", error_str(&e, r));
		res.startup_s = startup_seconds(&cfg, true);
		*ret = res;
		return 0;
	}
	res.startup_s = startup_seconds(&cfg, false);

	if (study->scenario == OPT_SCENARIO_OFFLINE) {
		r = sim_saturated_throughput(&cfg, &study->workload, &res.point, err);
		if (r < 0)
			return error_prefix(err, r, "dry run");
		res.have_point = true;
		pt = &res.point;
		tp.saturated_output_tps = pt->output_throughput;
		tp.saturated_input_tps = pt->duration_s > 0 ? (double)pt->total_input_tokens / pt->duration_s : 0;
		res.max_rate = pt->request_throughput;
	} else {
		struct sim_rate_search s;

		r = sim_find_max_rate(&cfg, &study->workload, &study->sla, study->probe.tolerance, 0, &s, err);
		if (r < 0)
			return error_prefix(err, r, "dry run");
		res.saturated = s.saturated;
		res.have_saturated = true;
		if (!(s.max_rate > 0)) {
			res.sla_never_met = true;
			snprintf(res.message, sizeof(res.message), "no request rate met the SLA in virtual time");
			res.probe_s = probe_seconds(study, &res);
			*ret = res;
			return 0;
		}
		res.point = s.at_max;
		res.have_point = true;
		res.max_rate = s.max_rate;
		pt = &res.point;
		in_per_req = pt->completed > 0 ? (double)pt->total_input_tokens / pt->completed : 0;
		tp.good_output_tps = pt->good_output_throughput;
		tp.good_input_tps = pt->request_goodput * in_per_req;
	}
	res.concurrency = pt->mean_concurrency;
	res.probe_s = probe_seconds(study, &res);
	tps = opt_cost_tokens_per_sec(study->scenario, study->cost_tokens, &tp);
	res.tokens_per_sec = tps;
	r = opt_cost_per_mtok(study->gpu.price_per_gpu_hour, sim_engine_config_gpus(&cfg), tps, &res.cost_per_mtok);
	if (r == -EDOM) {
		res.sla_never_met = true;
		res.cost_per_mtok = NAN;
		snprintf(res.message, sizeof(res.message), "no tokens counted at the best load");
	} else if (r < 0)
		return error_set(err, r, "dry run: cost model refused the price or GPU count");
	*ret = res;
	return 0;
}

int runner_dry_sweep(const struct study *study, const cJSON *knobs, unsigned variant, const double *rates, size_t n,
		     struct runner_dry_result *ret, struct error *err)
{
	struct runner_dry_result res = { .cost_per_mtok = NAN };
	struct sim_engine_config cfg;
	struct sim_startup_check check = { 0 };
	struct error e = { 0 };
	int r;

	if (n > RUNNER_DRY_SWEEP_MAX)
		return error_set(err, -EINVAL, "dry run: a sweep of %zu rates (at most %u)", n, RUNNER_DRY_SWEEP_MAX);
	r = build_engine_config(study, knobs, variant, NULL, &cfg, err);
	if (r < 0)
		return r;
	r = sim_engine_check_startup(&cfg, &check, &e);
	if (r < 0) {
		res.infeasible = true;
		res.cause = check.cause;
		snprintf(res.message, sizeof(res.message), "%s", error_str(&e, r));
		res.startup_s = startup_seconds(&cfg, true);
		*ret = res;
		return 0;
	}
	res.startup_s = startup_seconds(&cfg, false);
	for (size_t i = 0; i < n; i++) {
		struct probe_workload_config wc;
		struct probe_workload *w = NULL;

		/* as the probe's sweep: point i of one arrival sequence */
		probe_workload_at_point(&study->workload, rates[i], (uint32_t)i, 0, &wc);
		r = probe_workload_generate(&wc, &w, err);
		if (r >= 0)
			r = sim_simulate(&cfg, w, &study->sla, study->percentiles, study->n_percentiles, &res.sweep[i],
					 NULL, err);
		probe_workload_free(w);
		if (r < 0)
			return error_prefix(err, r, "dry run: the sweep at %.4g req/s", rates[i]);
		res.sweep[i].request_rate = rates[i];
		res.probe_s += res.sweep[i].duration_s;
		res.n_sweep++;
	}
	*ret = res;
	return 0;
}
