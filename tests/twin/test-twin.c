/* test-twin — the digital twin: calibration recovers constants from
 * synthetic measurements, twin_next replays exactly from its history, falls
 * back honestly when the server does what the model cannot express, a
 * calibration survives a JSON round trip (and feeds goodput-sim's
 * --profile-file), and a stored calibration that no longer matches is
 * reported as drift. Measurements come from a second twin with known,
 * perturbed constants playing the real server (no noise unless stated). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "tests.h"
#include "twin.h"

static const char *small_space = "{\"max_num_seqs\": {\"min\": 16, \"max\": 256, \"scale\": \"log2\"},"
				 "\"max_num_batched_tokens\": [1024, 4096],"
				 "\"quantization\": [\"none\", \"fp8\"], \"tensor_parallel\": [1]}";

static struct opt_space *make_space(const char *json)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(json);
	struct opt_space_options so = { .gpus = 2 };
	struct opt_space *s = NULL;
	struct error err = { 0 };

	CHECK(j);
	CHECK_MSG(opt_space_from_json(j, "search_space", NULL, "constraints", &so, &s, &err) >= 0, "%s", err.msg);
	return s;
}

static void make_setup(struct twin_setup *s, double fault_seq)
{
	struct error err = { 0 };

	twin_setup_init(s);
	snprintf(s->model, sizeof(s->model), "llama-3.1-8b");
	snprintf(s->gpu, sizeof(s->gpu), "L40S");
	s->gpus = 2;
	s->workload.input = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 768, .range_ratio = 1.0 / 3 };
	s->workload.output = (struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 192, .range_ratio = 1.0 / 3 };
	s->workload.num_prompts = 32;
	s->workload.arrival = PROBE_ARRIVAL_POISSON;
	s->rel_tol = 0.02;
	s->max_runs = 10;
	CHECK(probe_sla_parse("ttft:1000,tpot:50", &s->sla, &err) >= 0);
	s->sla.attainment = 0.9;
	s->fault_step_per_seq_usec = fault_seq;
}

static double *field(struct sim_profile *p, const char *name)
{
	for (size_t i = 0; sim_profile_field_name(i); i++)
		if (strcmp(sim_profile_field_name(i), name) == 0)
			return sim_profile_field(p, i);
	CHECK_MSG(false, "no constant %s", name);
	return NULL;
}

/* The "real GPU": the base constants perturbed. */
static void perturbed(struct twin *t, double scale, struct sim_profile *ret)
{
	twin_base_profile(t, ret);
	*field(ret, "mfu_fp8") *= 1.0 + 0.2 * scale;
	*field(ret, "mfu_bf16") *= 1.0 - 0.15 * scale;
	*field(ret, "mbu_w") *= 1.0 - 0.2 * scale;
	*field(ret, "mbu_kv") *= 1.0 + 0.15 * scale;
	*field(ret, "c_seq_us") *= 1.0 + 0.25 * scale;
}

static struct opt_config config_of(const struct opt_space *s, const char *key)
{
	struct opt_config c;
	struct error err = { 0 };

	CHECK_MSG(opt_config_from_key(s, key, &c, &err) >= 0, "%s", err.msg);
	return c;
}

static void test_calibration(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = make_space(small_space);
	_cleanup_(twin_freep) struct twin *real = NULL, *tw = NULL;
	struct twin_setup setup;
	struct sim_profile truth, base;
	struct twin_trial tr[3];
	struct twin_fit fit;
	struct error err = { 0 };
	const char *keys[] = {
		"max_num_seqs=16,max_num_batched_tokens=1024,quantization=fp8,tensor_parallel=1",
		"max_num_seqs=256,max_num_batched_tokens=4096,quantization=fp8,tensor_parallel=1",
		"max_num_seqs=64,max_num_batched_tokens=4096,quantization=fp8,tensor_parallel=1",
	};
	struct opt_config unseen = config_of(s, "max_num_seqs=128,max_num_batched_tokens=1024,quantization=fp8,tensor_parallel=1");
	struct twin_prediction p_true, p_fit, p_base;

	make_setup(&setup, 0);
	CHECK_MSG(twin_new(s, &setup, &real, &err) >= 0, "%s", err.msg);
	CHECK_MSG(twin_new(s, &setup, &tw, &err) >= 0, "%s", err.msg);
	perturbed(real, 1.0, &truth);
	twin_base_profile(tw, &base);
	for (size_t i = 0; i < 3; i++) {
		struct opt_config c = config_of(s, keys[i]);

		CHECK_MSG(twin_measure_sim(real, &truth, &c, &tr[i], &err) >= 0, "%s", err.msg);
		CHECK(tr[i].n_points >= 2);
	}
	struct twin_fit_options fo;
	twin_fit_options_init(&fo);
	CHECK_MSG(twin_calibrate(tw, tr, 3, &base, &fo, &fit, &err) >= 0, "%s", err.msg);
	printf("calibration: error %.2f %% (start %.1f %%), %u points, %u evals; mfu_fp8 %.3f/%.3f mbu_w %.3f/%.3f\n",
	       fit.error * 100, fit.start_error * 100, fit.n_points, fit.evals, *field(&fit.profile, "mfu_fp8"),
	       *field(&truth, "mfu_fp8"), *field(&fit.profile, "mbu_w"), *field(&truth, "mbu_w"));
	CHECK(fit.start_error > 0.05);       /* the defaults are visibly off ... */
	CHECK(fit.error < 0.03);             /* ... the fit is not */
	CHECK(fit.error < fit.start_error / 3);
	CHECK(fit.n_trials == 3 && fit.n_points >= 6);
	/* Constants the data determine: within 10 % of the truth. */
	CHECK_REL(*field(&fit.profile, "mbu_w"), *field(&truth, "mbu_w"), 0.10);
	CHECK_REL(*field(&fit.profile, "mfu_fp8"), *field(&truth, "mfu_fp8"), 0.10);
	/* bf16 was never measured: its constant stays where it was. */
	CHECK(*field(&fit.profile, "mfu_bf16") == *field(&base, "mfu_bf16"));
	/* The fitted twin predicts an unmeasured configuration's cost. */
	CHECK(twin_predict(real, &truth, &unseen, &p_true, &err) >= 0);
	CHECK(twin_predict(tw, &fit.profile, &unseen, &p_fit, &err) >= 0);
	CHECK(twin_predict(tw, &base, &unseen, &p_base, &err) >= 0);
	CHECK(p_true.outcome == OPT_OUTCOME_MEASURED && p_fit.outcome == OPT_OUTCOME_MEASURED);
	printf("unseen config: true %.4f fitted %.4f base %.4f $/Mtok\n", p_true.cost, p_fit.cost, p_base.cost);
	CHECK_REL(p_fit.cost, p_true.cost, 0.03);
	/* Deterministic: a fresh twin fits the same numbers. */
	{
		_cleanup_(twin_freep) struct twin *tw2 = NULL;
		struct twin_fit fit2;

		CHECK(twin_new(s, &setup, &tw2, &err) >= 0);
		CHECK(twin_calibrate(tw2, tr, 3, &base, NULL, &fit2, &err) >= 0);
		CHECK(memcmp(&fit.profile, &fit2.profile, sizeof(fit.profile)) == 0);
	}
}

/* Drives twin_next against a real twin until done or max_steps; returns the history. */
static void run(struct twin *tw, struct twin *real, const struct sim_profile *truth, const struct twin_settings *set,
		const struct twin_calibration *warm, unsigned max_steps, struct twin_history *h,
		struct twin_candidate *cands, size_t *ret_n)
{
	struct error err = { 0 };
	size_t n = 0;

	for (; n < max_steps; n++) {
		struct twin_candidate c;
		struct twin_trial tr;

		CHECK_MSG(twin_next(tw, set, h, warm, &c, &err) >= 0, "%s", err.msg);
		cands[n] = c;
		if (c.opt.ask == OPT_ASK_DONE) {
			n++;
			break;
		}
		CHECK_MSG(twin_measure_sim(real, truth, &c.opt.config, &tr, &err) >= 0, "%s", err.msg);
		tr.trial.confirm = c.opt.ask == OPT_ASK_CONFIRM;
		tr.predicted_cost = c.predicted_cost;
		CHECK(twin_history_add(h, &tr) >= 0);
	}
	*ret_n = n;
}

static void test_replay(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = make_space(small_space);
	_cleanup_(twin_freep) struct twin *real = NULL, *tw = NULL, *fresh = NULL;
	struct twin_setup setup;
	struct twin_settings set;
	struct sim_profile truth;
	struct twin_history h, prefix;
	struct twin_candidate cands[30];
	struct error err = { 0 };
	size_t n;

	make_setup(&setup, 0);
	CHECK(twin_new(s, &setup, &real, &err) >= 0);
	CHECK(twin_new(s, &setup, &tw, &err) >= 0);
	CHECK(twin_new(s, &setup, &fresh, &err) >= 0);
	perturbed(real, 1.0, &truth);
	twin_settings_init(&set);
	set.plain.max_trials = 12;
	twin_history_init(&h);
	run(tw, real, &truth, &set, NULL, 30, &h, cands, &n);
	CHECK(n >= 3);
	CHECK(cands[0].phase == TWIN_PHASE_DESIGN);
	CHECK(cands[n - 1].opt.ask == OPT_ASK_DONE);
	CHECK(cands[n - 1].opt.best.valid && !cands[n - 1].fallback);
	printf("replay: %zu asks, done: %s\n", n, cands[n - 1].message);
	/* A restarted runner: a twin with empty caches, asked on every prefix. */
	twin_history_init(&prefix);
	for (size_t k = 0; k < n; k++) {
		struct twin_candidate c;

		CHECK(twin_next(fresh, &set, &prefix, NULL, &c, &err) >= 0);
		CHECK_INT_EQ(c.opt.ask, cands[k].opt.ask);
		CHECK_INT_EQ(c.phase, cands[k].phase);
		CHECK(memcmp(&c.opt.config, &cands[k].opt.config, sizeof(c.opt.config)) == 0 ||
		      c.opt.ask == OPT_ASK_DONE);
		CHECK(memcmp(&c.predicted_cost, &cands[k].predicted_cost, sizeof(double)) == 0);
		if (k < h.n)
			CHECK(twin_history_add(&prefix, &h.trials[k]) >= 0);
	}
	/* The answer was measured for real. */
	{
		bool found = false;

		for (size_t k = 0; k < h.n; k++)
			found = found || (h.trials[k].trial.outcome == OPT_OUTCOME_MEASURED &&
					  memcmp(&h.trials[k].trial.config, &cands[n - 1].opt.best.config,
						 sizeof(struct opt_config)) == 0);
		CHECK(found);
	}
	twin_history_done(&prefix);
	twin_history_done(&h);
}

static void test_fallback(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = make_space(small_space);
	_cleanup_(twin_freep) struct twin *real = NULL, *tw = NULL;
	struct twin_setup setup, real_setup;
	struct twin_settings set;
	struct sim_profile truth;
	struct twin_history h;
	struct twin_candidate cands[40];
	struct error err = { 0 };
	bool said = false;
	size_t n;

	make_setup(&setup, 0);
	make_setup(&real_setup, 1000); /* a batch-squared step cost the model has no term for */
	CHECK(twin_new(s, &real_setup, &real, &err) >= 0);
	CHECK(twin_new(s, &setup, &tw, &err) >= 0);
	twin_base_profile(real, &truth);
	twin_settings_init(&set);
	set.plain.max_trials = 8;
	twin_history_init(&h);
	run(tw, real, &truth, &set, NULL, 40, &h, cands, &n);
	for (size_t k = 0; k < n; k++)
		if (cands[k].fallback) {
			said = true;
			CHECK_STR_CONTAINS(cands[k].message, "poor fit");
		}
	printf("fallback: %s\n", said ? "reported" : "not reported");
	CHECK(said);
	CHECK(cands[n - 1].opt.ask == OPT_ASK_DONE);
	CHECK(cands[n - 1].opt.best.valid);
	{
		bool found = false;

		for (size_t k = 0; k < h.n; k++)
			found = found || (h.trials[k].trial.outcome == OPT_OUTCOME_MEASURED &&
					  memcmp(&h.trials[k].trial.config, &cands[n - 1].opt.best.config,
						 sizeof(struct opt_config)) == 0);
		CHECK(found);
	}
	twin_history_done(&h);
}

static void test_json(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = make_space(small_space);
	_cleanup_(twin_freep) struct twin *tw = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j = NULL, *back = NULL, *bad = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	struct twin_setup setup;
	struct twin_calibration c = { 0 }, c2;
	struct twin_fit fit = { 0 };
	struct sim_profile loaded;
	struct error err = { 0 };
	char key[512], path[] = "/tmp/test-twin-profile-XXXXXX";
	int fd;

	make_setup(&setup, 0);
	CHECK(twin_new(s, &setup, &tw, &err) >= 0);
	twin_base_profile(tw, &fit.profile);
	*field(&fit.profile, "mbu_w") = 0.123456789012345678;
	*field(&fit.profile, "t_fixed_ms") = 1.0 / 3.0;
	fit.error = 0.0421;
	fit.n_trials = 3;
	fit.n_points = 9;
	fit.fitted = 0x31;
	twin_calibration_from_fit(&fit, 0.05, &c);
	snprintf(c.engine, sizeof(c.engine), "vllm");
	snprintf(c.engine_version, sizeof(c.engine_version), "0.6.3");
	snprintf(c.gpu, sizeof(c.gpu), "NVIDIA L40S");
	snprintf(c.driver, sizeof(c.driver), "550.54.15");
	snprintf(c.model, sizeof(c.model), "meta-llama/Llama-3.1-8B-Instruct");
	CHECK(twin_calibration_to_json(&c, &j) >= 0);
	text = cJSON_PrintUnformatted(j);
	CHECK(text);
	back = cJSON_Parse(text);
	CHECK(back);
	CHECK_MSG(twin_calibration_from_json(back, "calibration", &c2, &err) >= 0, "%s", err.msg);
	CHECK(memcmp(&c.profile, &c2.profile, sizeof(c.profile)) == 0);
	CHECK_STR_EQ(c2.model, c.model);
	CHECK_STR_EQ(c2.driver, c.driver);
	CHECK(c2.fit_error == c.fit_error && c2.cost_error == c.cost_error);
	CHECK(c2.n_trials == 3 && c2.n_points == 9 && c2.fitted == 0x31);
	CHECK(twin_calibration_key(&c2, key, sizeof(key)) >= 0);
	CHECK_STR_EQ(key, "vllm|0.6.3|NVIDIA L40S|550.54.15|meta-llama/Llama-3.1-8B-Instruct");
	/* Unknown keys and broken constants are refused by name. */
	bad = cJSON_Parse("{\"engine\": \"vllm\", \"colour\": 1, \"profile\": {}}");
	CHECK(twin_calibration_from_json(bad, "calibration", &c2, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "colour");
	cJSON_Delete(bad);
	bad = cJSON_Parse(text);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(bad, "profile"), "mbu_w", cJSON_CreateNumber(-1));
	CHECK(twin_calibration_from_json(bad, "calibration", &c2, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "mbu_w");
	/* The profile file is what goodput-sim --profile-file reads. */
	fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	CHECK(twin_calibration_write_profile(&c, path, &err) >= 0);
	twin_base_profile(tw, &loaded);
	CHECK_MSG(sim_profile_load_file(&loaded, path, &err) >= 0, "%s", err.msg);
	unlink(path);
	CHECK(memcmp(&loaded, &c.profile, sizeof(loaded)) == 0);
}

static void test_drift(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = make_space(small_space);
	_cleanup_(twin_freep) struct twin *real = NULL, *tw = NULL;
	struct twin_setup setup;
	struct twin_settings set;
	struct sim_profile truth, moved;
	struct twin_history h;
	struct twin_candidate cands[30], c;
	struct twin_calibration cal;
	struct twin_trial tr;
	struct error err = { 0 };
	size_t n;

	make_setup(&setup, 0);
	CHECK(twin_new(s, &setup, &real, &err) >= 0);
	CHECK(twin_new(s, &setup, &tw, &err) >= 0);
	perturbed(real, 1.0, &truth);
	twin_settings_init(&set);
	set.plain.max_trials = 10;
	/* A first study leaves a calibration ... */
	twin_history_init(&h);
	run(tw, real, &truth, &set, NULL, 30, &h, cands, &n);
	CHECK(cands[n - 1].calibrated);
	twin_calibration_from_fit(&cands[n - 1].fit, cands[n - 1].tol, &cal);
	twin_history_done(&h);

	/* ... a second study on the same server starts from it: no design, no drift. */
	twin_history_init(&h);
	CHECK(twin_next(tw, &set, &h, &cal, &c, &err) >= 0);
	CHECK(c.warm && !c.drift && c.phase == TWIN_PHASE_REFINE);
	CHECK(twin_measure_sim(real, &truth, &c.opt.config, &tr, &err) >= 0);
	tr.predicted_cost = c.predicted_cost;
	CHECK(twin_history_add(&h, &tr) >= 0);
	CHECK(twin_next(tw, &set, &h, &cal, &c, &err) >= 0);
	CHECK(c.warm && !c.drift);
	twin_history_done(&h);

	/* A server that changed (a driver update halved the weight bandwidth): drift. */
	moved = truth;
	*field(&moved, "mbu_w") *= 0.6;
	twin_history_init(&h);
	CHECK(twin_next(tw, &set, &h, &cal, &c, &err) >= 0);
	CHECK(twin_measure_sim(real, &moved, &c.opt.config, &tr, &err) >= 0);
	tr.predicted_cost = c.predicted_cost;
	CHECK(twin_history_add(&h, &tr) >= 0);
	CHECK(twin_next(tw, &set, &h, &cal, &c, &err) >= 0);
	printf("drift: %s\n", c.message);
	CHECK(c.drift && !c.warm);
	CHECK_STR_CONTAINS(c.message, "drift");
	CHECK(c.phase == TWIN_PHASE_DESIGN); /* recalibrating from scratch */
	twin_history_done(&h);
}

int main(int argc, char **argv)
{
	test_json();
	test_calibration();
	test_replay();
	test_fallback();
	test_drift();
	return 0;
}
