/* test-twin — the digital twin: calibration recovers constants from
 * synthetic measurements, twin_next replays exactly from its history, falls
 * back honestly when the server does what the model cannot express, a
 * calibration survives a JSON round trip (and feeds goodput-sim's
 * --profile-file), a stored calibration that no longer matches is reported
 * as drift, and twin_next run in a forked child (as the runner does, off its
 * event loop) answers through a pipe exactly what it answers in process.
 * Measurements come from a second twin with known, perturbed constants
 * playing the real server (no noise unless stated). Run one part with
 * `test-twin NAME` (json, calibration, replay, fallback, drift, wire). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json-util.h"

#include "macro.h"
#include "tests.h"
#include "simulate.h"
#include "twin-internal.h"
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
	s->workload.input =
		(struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 768, .range_ratio = 1.0 / 3 };
	s->workload.output =
		(struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 192, .range_ratio = 1.0 / 3 };
	s->workload.num_prompts = 16;
	s->workload.arrival = PROBE_ARRIVAL_POISSON;
	s->rel_tol = 0.05;
	s->max_runs = 8;
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

/* The strategy's settings, with lighter fits than the default (the unit test
 * runs under valgrind; bench-twin measures the defaults). */
static void settings_init(struct twin_settings *s)
{
	twin_settings_init(s);
	s->fit.maxeval = 40;
	s->fit.restarts = 1;
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
	struct opt_config unseen =
		config_of(s, "max_num_seqs=128,max_num_batched_tokens=1024,quantization=fp8,tensor_parallel=1");
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
	fo.maxeval = 60; /* lighter than the default, for valgrind */
	fo.restarts = 1;
	CHECK_MSG(twin_calibrate(tw, tr, 3, &base, &fo, &fit, &err) >= 0, "%s", err.msg);
	printf("calibration: error %.2f %% (start %.1f %%), %u points, %u evals; mfu_fp8 %.3f/%.3f mbu_w %.3f/%.3f\n",
	       fit.error * 100, fit.start_error * 100, fit.n_points, fit.evals, *field(&fit.profile, "mfu_fp8"),
	       *field(&truth, "mfu_fp8"), *field(&fit.profile, "mbu_w"), *field(&truth, "mbu_w"));
	CHECK(fit.start_error > 0.05); /* the defaults are visibly off ... */
	CHECK(fit.error < 0.03);       /* ... the fit is not */
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
		CHECK(twin_calibrate(tw2, tr, 3, &base, &fo, &fit2, &err) >= 0);
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
	settings_init(&set);
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
	/* enough requests at once for the batch to grow where that cost shows */
	setup.workload.num_prompts = real_setup.workload.num_prompts = 48;
	CHECK(twin_new(s, &real_setup, &real, &err) >= 0);
	CHECK(twin_new(s, &setup, &tw, &err) >= 0);
	twin_base_profile(real, &truth);
	settings_init(&set);
	set.plain.max_trials = 8;
	twin_history_init(&h);
	run(tw, real, &truth, &set, NULL, 40, &h, cands, &n);
	for (size_t k = 0; k < n; k++)
		if (cands[k].fallback) {
			said = true;
			CHECK_STR_CONTAINS(cands[k].message, "poor fit");
		}
	for (size_t k = 0; k < n && !said; k++)
		printf("  %zu %s fit %.1f %% pred %.1f %%: %s\n", k, twin_phase_to_string(cands[k].phase),
		       cands[k].fit.error * 100, cands[k].pred_error * 100, cands[k].message);
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
	settings_init(&set);
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

static bool same_double(double a, double b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof(a)) == 0;
}

static char *candidate_text(const struct opt_space *s, const struct twin_candidate *c)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	char *text;

	CHECK(twin_candidate_to_json(s, c, &j) >= 0);
	text = cJSON_PrintUnformatted(j);
	CHECK(text);
	return text;
}

static void check_same_candidate(const struct twin_candidate *a, const struct twin_candidate *b)
{
	CHECK_INT_EQ(a->opt.ask, b->opt.ask);
	CHECK_INT_EQ(a->phase, b->phase);
	CHECK(a->opt.ask == OPT_ASK_DONE || memcmp(&a->opt.config, &b->opt.config, sizeof(a->opt.config)) == 0);
	CHECK(same_double(a->predicted_cost, b->predicted_cost));
	CHECK(a->opt.best.valid == b->opt.best.valid);
	CHECK(!a->opt.best.valid || memcmp(&a->opt.best.config, &b->opt.best.config, sizeof(a->opt.best.config)) == 0);
	CHECK(!a->opt.best.valid || same_double(a->opt.best.cost, b->opt.best.cost));
	CHECK(a->fallback == b->fallback && a->warm == b->warm && a->calibrated == b->calibrated);
	CHECK(same_double(a->tol, b->tol));
	CHECK(memcmp(&a->fit.profile, &b->fit.profile, sizeof(a->fit.profile)) == 0);
	CHECK(same_double(a->fit.error, b->fit.error));
	CHECK(a->fit.fitted == b->fit.fitted);
	CHECK_STR_EQ(a->message, b->message);
}

/* What the runner does per ask, off its event loop: a forked child runs
 * twin_next and writes the candidate to a pipe; the parent reads it to EOF
 * and parses it back. */
static void next_in_child(const struct opt_space *s, struct twin *tw, const struct twin_settings *set,
			  const struct twin_history *h, const struct twin_calibration *warm, struct twin_candidate *ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(freep) char *buf = NULL;
	struct error err = { 0 };
	size_t len = 0, cap = 1 << 16;
	int fds[2], status;
	pid_t pid;

	CHECK(pipe2(fds, O_CLOEXEC) == 0);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct twin_candidate c;
		cJSON *out = NULL;
		char *text = NULL;
		size_t n, off = 0;
		int r;

		close(fds[0]);
		r = twin_next(tw, set, h, warm, &c, &err);
		if (r >= 0)
			r = twin_candidate_to_json(s, &c, &out);
		if (r >= 0)
			text = cJSON_PrintUnformatted(out);
		cJSON_Delete(out);
		if (!text)
			_exit(1);
		n = strlen(text);
		while (off < n) {
			ssize_t k = write(fds[1], text + off, n - off);

			if (k <= 0)
				break;
			off += (size_t)k;
		}
		free(text);
		/* _exit: the parent's cleanups and stdio buffers are not the child's to run */
		_exit(off == n ? 0 : 1);
	}
	close(fds[1]);
	buf = malloc(cap);
	CHECK(buf);
	for (;;) {
		ssize_t k = read(fds[0], buf + len, cap - len);

		CHECK(k >= 0);
		if (k == 0)
			break;
		len += (size_t)k;
		CHECK(len < cap);
	}
	close(fds[0]);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_MSG(json_parse_strict("child", buf, len, &j, &err) >= 0, "%s", err.msg);
	CHECK_MSG(twin_candidate_from_json(s, j, "candidate", ret, &err) >= 0, "%s", err.msg);
}

static void test_wire(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = make_space(small_space);
	_cleanup_(twin_freep) struct twin *real = NULL, *tw = NULL, *fresh = NULL;
	_cleanup_(cJSON_Deletep) cJSON *bad = NULL;
	struct twin_setup setup;
	struct twin_settings set;
	struct sim_profile truth;
	struct twin_history h, back;
	struct twin_candidate cands[30], c, c2;
	struct twin_calibration cal;
	struct error err = { 0 };
	size_t n;

	make_setup(&setup, 0);
	CHECK(twin_new(s, &setup, &real, &err) >= 0);
	CHECK(twin_new(s, &setup, &tw, &err) >= 0);
	CHECK(twin_new(s, &setup, &fresh, &err) >= 0);
	perturbed(real, 1.0, &truth);
	settings_init(&set);
	set.plain.max_trials = 12;
	set.plain.seed = UINT64_C(0x8000000000000001); /* beyond a double's integers */
	set.near_probes = 1;
	twin_history_init(&h);
	run(tw, real, &truth, &set, NULL, 30, &h, cands, &n);
	CHECK(h.n >= 3 && cands[n - 1].calibrated);

	/* A forked child gives the in-process answer, on every prefix of the study
	 * and with a warm calibration. */
	twin_calibration_from_fit(&cands[n - 1].fit, cands[n - 1].tol, &cal);
	twin_history_init(&back);
	for (size_t k = 0; k <= h.n; k = k < 2 ? 2 : k < h.n ? h.n : h.n + 1) {
		back.n = 0;
		for (size_t q = 0; q < k; q++)
			CHECK(twin_history_add(&back, &h.trials[q]) >= 0);
		for (int w = 0; w < 1 + (k == h.n); w++) {
			_cleanup_(freep) char *t1 = NULL, *t2 = NULL;

			CHECK(twin_next(tw, &set, &back, w ? &cal : NULL, &c, &err) >= 0);
			/* (a child inherits the parent's caches: one twin that has them, one that has not) */
			next_in_child(s, k == 2 ? fresh : tw, &set, &back, w ? &cal : NULL, &c2);
			check_same_candidate(&c, &c2);
			/* ... and reads back to the same text. */
			t1 = candidate_text(s, &c);
			t2 = candidate_text(s, &c2);
			CHECK_STR_EQ(t1, t2);
			if (k == h.n && w)
				printf("wire: candidate %zu bytes: %s\n", strlen(t1), c.message);
		}
	}
	twin_history_done(&back);

	/* Bad input is refused by name. */
	bad = cJSON_Parse("{\"ask\": \"trial\", \"opt_phase\": \"search\", \"reason\": \"none\", \"phase\": \"refine\","
			  " \"config\": \"max_num_seqs=3\"}");
	CHECK(twin_candidate_from_json(s, bad, "candidate", &c, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "candidate.config");
	twin_history_done(&h);
}

/* A point as the probe measures it: the k-th of its trial, drawn by the
 * probe's rule (probe_workload_at_point: the workload's seed, the same
 * lengths and arrivals at every point scaled to the rate, prompt variant k),
 * as many requests as its verdict needed — a prefix of the sequence the probe
 * generated. Simulated as drawn, the model it came from fits it exactly; with
 * the workload's size, or with the seed moved per point as the probe once drew
 * them, it does not. */
static void test_point_draw(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = make_space(small_space);
	_cleanup_(twin_freep) struct twin *tw = NULL;
	struct twin_setup setup;
	struct sim_engine_config cfg;
	struct probe_workload_config wc;
	struct probe_workload *w = NULL, *longer = NULL;
	struct probe_result res;
	struct twin_trial tr = { .predicted_cost = NAN };
	struct twin_fit_options o;
	struct twin_fit as_drawn, as_sized, as_seeded;
	struct sim_profile base;
	struct error err = { 0 };

	make_setup(&setup, 0);
	CHECK(twin_new(s, &setup, &tw, &err) >= 0);
	sim_engine_config_init(&cfg);
	CHECK(sim_engine_config_apply_flag(&cfg, "--model", "llama-3.1-8b", &err) > 0);
	CHECK(sim_engine_config_apply_flag(&cfg, "--gpu", "L40S", &err) > 0);
	CHECK(sim_engine_config_apply_flag(&cfg, "--gpus", "2", &err) > 0);
	CHECK(sim_engine_config_apply_flag(&cfg, "--max-num-seqs", "64", &err) > 0);
	CHECK(sim_engine_config_apply_flag(&cfg, "--max-num-batched-tokens", "4096", &err) > 0);
	CHECK(sim_engine_config_apply_flag(&cfg, "--jitter", "0", &err) > 0);
	CHECK(sim_engine_config_resolve(&cfg, &err) >= 0);
	tr.trial = (struct opt_trial){ .config = config_of(s, "max_num_seqs=64,max_num_batched_tokens=4096,"
							      "quantization=none,tensor_parallel=1"),
				       .outcome = OPT_OUTCOME_MEASURED,
				       .cost = 1 };
	for (uint32_t k = 1; k <= 3; k++) {
		uint32_t sent = 12 + 6 * k;

		/* the probe's own rule for its k-th point; it generated four
		 * times as many requests and the point sent a prefix */
		probe_workload_at_point(&setup.workload, 1.5 * k, k, 4 * sent, &wc);
		wc.lengths_only = true;
		CHECK(probe_workload_generate(&wc, &longer, &err) >= 0);
		wc.num_prompts = sent;
		CHECK(probe_workload_generate(&wc, &w, &err) >= 0);
		for (uint32_t i = 0; i < sent; i++) {
			CHECK_INT_EQ(w->requests[i].arrival_usec, longer->requests[i].arrival_usec);
			CHECK_INT_EQ(w->requests[i].input_len, longer->requests[i].input_len);
			CHECK_INT_EQ(w->requests[i].output_len, longer->requests[i].output_len);
		}
		probe_workload_free(longer);
		CHECK(sim_simulate(&cfg, w, NULL, NULL, 0, &res, NULL, &err) >= 0);
		probe_workload_free(w);
		res.request_rate = wc.request_rate;
		CHECK(twin_point_from_result(&res, &tr.points[tr.n_points]) >= 0);
		CHECK_INT_EQ(tr.points[tr.n_points].num_prompts, sent);
		tr.points[tr.n_points++].index = k;
	}
	twin_base_profile(tw, &base);
	twin_fit_options_init(&o);
	CHECK(twin_evaluate(tw, &tr, 1, &base, &o, &as_drawn, &err) >= 0);
	for (size_t k = 0; k < tr.n_points; k++)
		tr.points[k].num_prompts = 0;
	CHECK(twin_evaluate(tw, &tr, 1, &base, &o, &as_sized, &err) >= 0);
	/* the seed moved by the point's number: what the twin simulated while
	 * the probe drew each point with its own seed */
	setup.workload.seed += 1;
	twin_free(tw);
	CHECK(twin_new(s, &setup, &tw, &err) >= 0);
	for (size_t k = 0; k < tr.n_points; k++)
		tr.points[k].num_prompts = 12 + 6 * (uint32_t)(k + 1);
	CHECK(twin_evaluate(tw, &tr, 1, &base, &o, &as_seeded, &err) >= 0);
	fprintf(stderr,
		"simulated as drawn: %.2f %% error; with the workload's size: %.1f %%; with another seed: %.1f %%\n",
		as_drawn.error * 100, as_sized.error * 100, as_seeded.error * 100);
	CHECK(as_drawn.error < 0.005);
	CHECK(as_sized.error > 4 * as_drawn.error + 0.02);
	CHECK(as_seeded.error > 4 * as_drawn.error + 0.02);
}

/* The levers in the engine model the prior ranks with: a configuration's
 * speculation (its drafter and the workload's acceptance, as the study
 * says them), data-parallel replicas and the prefix cache reach the sim's
 * engine configuration; an inactive spec_tokens does not; under a TPOT
 * bound only speculation meets at 8B on H100, two replicas carry about
 * twice the rate of one (at the same cost per token, twice the GPUs), and
 * the host's GPUs are the most a configuration holds. */
static void test_levers(void)
{
	static const char *const extra[] = { "spec_method", "spec_tokens", "data_parallel", "prefix_caching", NULL };
	_cleanup_(cJSON_Deletep) cJSON *j =
		cJSON_Parse("{\"max_num_seqs\": [64], \"max_num_batched_tokens\": [2048], \"tensor_parallel\": [1],"
			    "\"data_parallel\": [1, 2], \"prefix_caching\": [\"on\", \"off\"],"
			    "\"spec_method\": [\"none\", \"ngram\", \"draft_model\"], \"spec_tokens\": [3]}");
	struct opt_space_options so = { .gpus = 2, .extra_knobs = extra };
	_cleanup_(opt_space_freep) struct opt_space *s = NULL;
	_cleanup_(twin_freep) struct twin *t = NULL;
	struct twin_setup setup;
	struct sim_profile base;
	struct sim_engine_config c;
	struct twin_prediction none1, none2, draft;
	struct error err = { 0 };
	struct opt_config cn1 = { 0 }, cn2, cd;

	CHECK(j);
	CHECK_MSG(opt_space_from_json(j, "search_space", NULL, "constraints", &so, &s, &err) >= 0, "%s", err.msg);
	make_setup(&setup, 0);
	snprintf(setup.gpu, sizeof(setup.gpu), "H100");
	setup.gpus = 0; /* the most a configuration holds: 2 */
	setup.workload.input = (struct probe_length_dist){ .kind = PROBE_DIST_FIXED, .mean = 256 };
	setup.workload.output = (struct probe_length_dist){ .kind = PROBE_DIST_FIXED, .mean = 128 };
	setup.workload.num_prompts = 200;
	setup.sla = (struct probe_sla){ 0 };
	CHECK(probe_sla_parse("ttft:1000,tpot:7", &setup.sla, &err) >= 0);
	setup.sla.attainment = 0.9;
	snprintf(setup.spec_draft_model, sizeof(setup.spec_draft_model), "llama-3.2-1b");
	snprintf(setup.spec_acceptance[SIM_SPEC_DRAFT_MODEL], sizeof(setup.spec_acceptance[0]), "0.8");
	CHECK_MSG(twin_new(s, &setup, &t, &err) >= 0, "%s", err.msg);
	twin_base_profile(t, &base);

	cn1 = config_of(s, "max_num_seqs=64,max_num_batched_tokens=2048,tensor_parallel=1,data_parallel=1,"
			   "prefix_caching=off,spec_method=none,spec_tokens=3");
	cn2 = config_of(s, "max_num_seqs=64,max_num_batched_tokens=2048,tensor_parallel=1,data_parallel=2,"
			   "prefix_caching=on,spec_method=none,spec_tokens=3");
	cd = config_of(s, "max_num_seqs=64,max_num_batched_tokens=2048,tensor_parallel=1,data_parallel=1,"
			  "prefix_caching=on,spec_method=draft_model,spec_tokens=3");
	CHECK(twin_engine_config(t, (size_t)twin_index(t, &cn1), &base, &c, &err) >= 0);
	CHECK(c.spec_method == SIM_SPEC_NONE && c.spec_tokens == 0 && c.dp == 1 && !c.enable_prefix_caching);
	CHECK_INT_EQ(c.gpus, 2);
	CHECK(twin_engine_config(t, (size_t)twin_index(t, &cn2), &base, &c, &err) >= 0);
	CHECK(c.dp == 2 && c.enable_prefix_caching);
	CHECK(twin_engine_config(t, (size_t)twin_index(t, &cd), &base, &c, &err) >= 0);
	CHECK(c.spec_method == SIM_SPEC_DRAFT_MODEL && c.spec_tokens == 3 && c.spec_draft_tp == 1);
	CHECK_STR_EQ(c.spec_draft_model, "llama-3.2-1b");
	CHECK(c.spec_acceptance.n == 1 && fabs(c.spec_acceptance.cond[0] - 0.8) < 1e-9);

	/* with TPOT 7 ms, one 8B replica decodes too slowly without drafts */
	CHECK_MSG(twin_predict(t, &base, &cn1, &none1, &err) >= 0, "%s", err.msg);
	CHECK_MSG(twin_predict(t, &base, &cd, &draft, &err) >= 0, "%s", err.msg);
	printf("levers: none %s %.2f req/s, draft_model k=3 %s %.2f req/s $%.4f/Mtok\n",
	       opt_outcome_to_string(none1.outcome), none1.max_rate, opt_outcome_to_string(draft.outcome),
	       draft.max_rate, draft.cost);
	CHECK(none1.outcome == OPT_OUTCOME_SLA_NEVER_MET);
	CHECK(draft.outcome == OPT_OUTCOME_MEASURED && draft.max_rate > 0);

	/* a loose TPOT bound: two replicas carry about twice one's rate */
	twin_free(TAKE_PTR(t));
	setup.sla = (struct probe_sla){ 0 };
	CHECK(probe_sla_parse("ttft:1000,tpot:50", &setup.sla, &err) >= 0);
	setup.sla.attainment = 0.9;
	CHECK_MSG(twin_new(s, &setup, &t, &err) >= 0, "%s", err.msg);
	CHECK_MSG(twin_predict(t, &base, &cn1, &none1, &err) >= 0, "%s", err.msg);
	CHECK_MSG(twin_predict(t, &base, &cn2, &none2, &err) >= 0, "%s", err.msg);
	printf("levers: dp=1 %.2f req/s $%.4f/Mtok, dp=2 %.2f req/s $%.4f/Mtok\n", none1.max_rate, none1.cost,
	       none2.max_rate, none2.cost);
	CHECK(none1.outcome == OPT_OUTCOME_MEASURED && none2.outcome == OPT_OUTCOME_MEASURED);
	CHECK(none2.max_rate > 1.6 * none1.max_rate);
	CHECK_REL(none2.cost, none1.cost, 0.25);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "json", test_json },       { "calibration", test_calibration },
		{ "replay", test_replay },   { "fallback", test_fallback },
		{ "drift", test_drift },     { "wire", test_wire },
		{ "draw", test_point_draw }, { "levers", test_levers },
	};
	unsigned ran = 0;

	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		struct timespec a, b;

		if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
			continue;
		ran++;
		clock_gettime(CLOCK_MONOTONIC, &a);
		tests[i].fn();
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("-- %s: %.1f s\n", tests[i].name, (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
	}
	if (ran == 0) {
		fprintf(stderr, "test-twin: no part named %s\n", argv[1]);
		return 2;
	}
	return 0;
}
