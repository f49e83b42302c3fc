/* What the search knows about memory without deploying: each out-of-memory
 * cause rules out what it should and no more (the weights: the whole
 * quantization × TP combination; the KV cache for max_model_len: that
 * context and longer, or beyond the engine's suggested length; cache blocks:
 * larger batches), gpu_memory_utilization and max_model_len are searched
 * around such failures, the pre-flight keeps predicted failures from being
 * deployed (checking a near one once per combination), and the seed changes
 * the path while the replay stays exact. The landscape is shaped like a 70B
 * model on 48 GB GPUs with vLLM's default max_model_len of 131072. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "opt.h"
#include "tests.h"

static struct opt_space *space_new(const char *search_space, const char *constraints)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL, *k = NULL;
	static const char *const extra[] = { "max_model_len", "gpu_memory_utilization", "kv_cache_dtype", NULL };
	struct opt_space_options o = { .gpus = 4, .extra_knobs = extra };
	struct opt_space *s = NULL;
	struct error err = { 0 };

	CHECK_MSG(json_parse_strict("test", search_space, strlen(search_space), &j, &err) == 0, "%s", err.msg);
	if (constraints)
		CHECK_MSG(json_parse_strict("test", constraints, strlen(constraints), &k, &err) == 0, "%s", err.msg);
	CHECK_MSG(opt_space_from_json(j, "search_space", k, "constraints", &o, &s, &err) == 0, "%s", err.msg);
	return s;
}

static double num_or(const struct opt_space *s, const struct opt_config *c, const char *knob, double def)
{
	double v;

	return opt_config_number(s, c, knob, &v) == 0 ? v : def;
}

static const char *text(const struct opt_space *s, const struct opt_config *c, const char *knob)
{
	char buf[64];
	int k = opt_space_knob_index(s, knob);

	return k < 0 ? "none" : opt_config_text(s, c, (size_t)k, buf, sizeof(buf));
}

/* GB per GPU of a configuration, as the engine's memory check sees it. */
struct memory {
	double budget, weights, act, kv_per_token;
	double mml;
};

static struct memory memory_of(const struct opt_space *s, const struct opt_config *c)
{
	const char *q = text(s, c, "quantization");
	double tp = num_or(s, c, "tensor_parallel", 1);
	double wfac = strcmp(q, "none") == 0 ? 1 : strcmp(q, "fp8") == 0 ? 0.5 : 0.28;
	struct memory m = {
		.budget = 48 * num_or(s, c, "gpu_memory_utilization", 0.9),
		.weights = 141 * wfac / tp,
		.act = 1.5 + num_or(s, c, "max_num_batched_tokens", 2048) * 0.0004 +
		       num_or(s, c, "max_num_seqs", 64) * 0.001,
		.kv_per_token = 0.000327 / tp * (strcmp(text(s, c, "kv_cache_dtype"), "fp8") == 0 ? 0.5 : 1),
		.mml = num_or(s, c, "max_model_len", 131072),
	};
	return m;
}

/* Whether a cause is told (the landscape of an engine whose log says why). */
static bool tell_cause = true;

static void big(const struct opt_space *s, const struct opt_config *c, const struct opt_history *h, struct opt_trial *t)
{
	struct memory m = memory_of(s, c);
	double kv_tokens = (m.budget - m.weights - m.act) / m.kv_per_token;
	double b = num_or(s, c, "max_num_seqs", 64), tp = num_or(s, c, "tensor_parallel", 1);
	double mbt = num_or(s, c, "max_num_batched_tokens", 2048);

	*t = (struct opt_trial){ .config = *c, .outcome = OPT_OUTCOME_INFEASIBLE };
	if (m.weights > m.budget)
		t->cause = OPT_OOM_WEIGHTS;
	else if (kv_tokens <= 0)
		t->cause = OPT_OOM_CACHE_BLOCKS;
	else if (kv_tokens < m.mml) {
		t->cause = OPT_OOM_KV_CACHE;
		t->suggested_len = (uint32_t)kv_tokens;
	} else {
		double step = m.weights / 0.8 + 0.05 * MIN(b, kv_tokens / 600) / tp + 1.5 * (tp - 1);
		double tput = MIN(b, kv_tokens / 600) / step * 1000 / (1 + 600 / mbt) / (1 + mbt / 40000);

		t->outcome = OPT_OUTCOME_MEASURED;
		t->cost = 0.99 * tp / (tput * 3600) * 1e6;
	}
	if (!tell_cause) {
		t->cause = OPT_OOM_UNKNOWN;
		t->suggested_len = 0;
	}
	(void)h;
}

/* An exact pre-flight with a 10 % margin: NEAR within it. */
static enum opt_fit exact_fit(const struct opt_space *s, const struct opt_config *c, void *userdata)
{
	struct memory m = memory_of(s, c);
	double need = m.weights + m.act + m.mml * m.kv_per_token;

	(void)userdata;
	if (need <= m.budget)
		return OPT_FIT_YES;
	return need > m.budget * 1.1 ? OPT_FIT_NO : OPT_FIT_NEAR;
}

static struct opt_candidate study(const struct opt_space *s, const struct opt_settings *set, struct opt_history *h)
{
	struct opt_candidate cand = { 0 };
	struct error err = { 0 };

	for (size_t step = 0; step < 1000; step++) {
		struct opt_trial t;

		CHECK_MSG(opt_next(s, set, h, &cand, &err) == 0, "%s", err.msg);
		if (cand.ask == OPT_ASK_DONE)
			break;
		big(s, &cand.config, h, &t);
		t.confirm = cand.ask == OPT_ASK_CONFIRM;
		CHECK_INT_EQ(opt_history_add(h, &t), 0);
	}
	return cand;
}

static size_t combo_of(const struct opt_space *s, const struct opt_config *c)
{
	int q = opt_space_knob_index(s, "quantization"), tp = opt_space_knob_index(s, "tensor_parallel");

	return (size_t)c->idx[q] * 8 + c->idx[tp];
}

static size_t count_ooms(const struct opt_history *h)
{
	size_t n = 0;

	for (size_t i = 0; i < h->n; i++)
		n += h->trials[i].outcome == OPT_OUTCOME_INFEASIBLE;
	return n;
}

static const char *demo_space = "{\"max_num_seqs\": {\"min\": 8, \"max\": 128, \"scale\": \"log2\"},"
				"\"max_num_batched_tokens\": {\"min\": 512, \"max\": 4096, \"scale\": \"log2\"},"
				"\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1, 2, 4]}";

/* The weights and the KV cache for the full context rule out their whole
 * combination after one deployment: with the causes told, the search
 * deploys one failure per combination that cannot start (7 of 9 here) and
 * then explores the batch knobs where they can; told nothing, it deploys
 * the failing combinations again at smaller batches. */
static void test_causes_prune_combinations(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(demo_space, NULL);
	struct opt_history h, blind;
	struct opt_settings set;
	struct opt_candidate c;
	bool failed[32] = { false };
	size_t measured_in[32] = { 0 };

	opt_settings_init(&set);
	set.max_trials = 16;
	opt_history_init(&h);
	tell_cause = true;
	c = study(s, &set, &h);
	for (size_t i = 0; i < h.n; i++) {
		size_t k = combo_of(s, &h.trials[i].config);

		CHECK_MSG(!failed[k], "trial %zu deployed a combination already known not to start", i);
		if (h.trials[i].outcome == OPT_OUTCOME_INFEASIBLE) {
			CHECK(h.trials[i].cause == OPT_OOM_WEIGHTS || h.trials[i].cause == OPT_OOM_KV_CACHE);
			failed[k] = true;
		} else
			measured_in[k]++;
	}
	fprintf(stderr, "causes told: %zu trials, %zu out of memory; fp8 tp4 %zu, awq tp4 %zu measured\n", h.n,
		count_ooms(&h), measured_in[1 * 8 + 2], measured_in[2 * 8 + 2]);
	CHECK_INT_EQ(count_ooms(&h), 7);
	CHECK(h.n <= 16);
	CHECK(c.best.valid);
	opt_history_done(&h);

	/* with the pre-flight, none of them is deployed: the budget goes to the
	 * batch knobs of the two that start */
	{
		struct opt_preflight pf = { .fit = exact_fit };

		set.preflight = &pf;
		opt_history_init(&h);
		c = study(s, &set, &h);
		set.preflight = NULL;
	}
	memset(measured_in, 0, sizeof(measured_in));
	for (size_t i = 0; i < h.n; i++)
		measured_in[combo_of(s, &h.trials[i].config)] += h.trials[i].outcome == OPT_OUTCOME_MEASURED;
	fprintf(stderr, "pre-flight: %zu trials, %zu out of memory, %u predicted; fp8 tp4 %zu, awq tp4 %zu measured\n",
		h.n, count_ooms(&h), c.predicted, measured_in[1 * 8 + 2], measured_in[2 * 8 + 2]);
	/* at most the one check of a near prediction (bf16 at TP 4 is near) */
	CHECK(count_ooms(&h) <= 1);
	CHECK(c.predicted >= 6 * 20);
	CHECK(measured_in[1 * 8 + 2] >= 1 && measured_in[2 * 8 + 2] >= 3);

	opt_history_init(&blind);
	tell_cause = false;
	study(s, &set, &blind);
	tell_cause = true;
	fprintf(stderr, "no cause told: %zu out of memory of %zu\n", count_ooms(&blind), blind.n);
	CHECK(count_ooms(&blind) > count_ooms(&h));
	opt_history_done(&blind);
	opt_history_done(&h);
}

/* With max_model_len searched, a KV-cache failure rules out only the
 * contexts longer than the engine's suggested length: shorter ones of the
 * same combination are deployed and measured, longer ones never. */
static void test_kv_cause_with_context_searched(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s =
		space_new("{\"max_num_seqs\": {\"min\": 8, \"max\": 128, \"scale\": \"log2\"},"
			  "\"max_num_batched_tokens\": [2048], \"quantization\": [\"none\", \"fp8\"],"
			  "\"tensor_parallel\": [2, 4], \"max_model_len\": [4096, 16384, 131072]}",
			  NULL);
	struct opt_history h;
	struct opt_settings set;
	uint32_t suggested[32] = { 0 };
	bool measured_none_tp4 = false;

	opt_settings_init(&set);
	set.confirm_probes = 0;
	opt_history_init(&h);
	study(s, &set, &h);
	for (size_t i = 0; i < h.n; i++) {
		const struct opt_trial *t = &h.trials[i];
		size_t k = combo_of(s, &t->config);
		double mml = num_or(s, &t->config, "max_model_len", 0);

		CHECK_MSG(!(suggested[k] > 0 && mml > suggested[k]),
			  "trial %zu: max_model_len %g beyond the suggested %u was deployed", i, mml, suggested[k]);
		if (t->outcome == OPT_OUTCOME_INFEASIBLE && t->cause == OPT_OOM_KV_CACHE)
			suggested[k] = suggested[k] ? MIN(suggested[k], t->suggested_len) : t->suggested_len;
		measured_none_tp4 = measured_none_tp4 || (t->outcome == OPT_OUTCOME_MEASURED &&
							  strcmp(text(s, &t->config, "quantization"), "none") == 0 &&
							  num_or(s, &t->config, "tensor_parallel", 0) == 4);
	}
	/* bf16 at TP 4 holds 4096 or 16384 tokens, not 131072 */
	CHECK(measured_none_tp4);
	opt_history_done(&h);
}

/* A weights failure at one gpu_memory_utilization leaves larger ones to try. */
static void test_weights_cause_with_fraction_searched(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s =
		space_new("{\"max_num_seqs\": [16, 32], \"quantization\": [\"fp8\"], \"tensor_parallel\": [2],"
			  "\"max_model_len\": [4096], \"gpu_memory_utilization\": [0.7, 0.8, 0.95]}",
			  "[]");
	struct opt_history h;
	struct opt_settings set;
	struct opt_candidate c;

	/* fp8 70B at TP 2: 35 GB of weights; 48 × 0.7 = 33.6 GB does not hold them */
	opt_settings_init(&set);
	set.confirm_probes = 0;
	opt_history_init(&h);
	c = study(s, &set, &h);
	CHECK(c.best.valid);
	CHECK(num_or(s, &c.best.config, "gpu_memory_utilization", 0) > 0.7);
	for (size_t i = 0; i < h.n; i++)
		if (num_or(s, &h.trials[i].config, "gpu_memory_utilization", 0) == 0.7)
			CHECK(h.trials[i].outcome == OPT_OUTCOME_INFEASIBLE);
	opt_history_done(&h);
}

/* Cache blocks: only larger batches are ruled out. */
static void test_cache_blocks_cause(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(demo_space, NULL);
	struct opt_history h;
	struct opt_settings set;
	struct opt_candidate c;
	struct error err = { 0 };
	struct opt_config oom;
	int seqs = opt_space_knob_index(s, "max_num_seqs");

	opt_settings_init(&set);
	opt_history_init(&h);
	/* the first screen point, told "cache blocks": its combination at
	 * smaller batches is still asked for */
	CHECK_INT_EQ(opt_next(s, &set, &h, &c, &err), 0);
	oom = c.config;
	CHECK_INT_EQ(opt_history_add(&h, &(struct opt_trial){ .config = oom,
							      .outcome = OPT_OUTCOME_INFEASIBLE,
							      .cause = OPT_OOM_CACHE_BLOCKS }),
		     0);
	for (size_t step = 0; step < 200; step++) {
		struct opt_trial t;

		CHECK_INT_EQ(opt_next(s, &set, &h, &c, &err), 0);
		if (c.ask == OPT_ASK_DONE)
			break;
		if (combo_of(s, &c.config) == combo_of(s, &oom)) {
			CHECK(c.config.idx[seqs] < oom.idx[seqs] || c.config.idx[seqs + 1] < oom.idx[seqs + 1]);
			break;
		}
		big(s, &c.config, &h, &t);
		t.confirm = c.ask == OPT_ASK_CONFIRM;
		CHECK_INT_EQ(opt_history_add(&h, &t), 0);
	}
	opt_history_done(&h);
}

/* The pre-flight: nothing predicted not to fit by a clear margin is
 * deployed, a near prediction is checked at most once per combination, and
 * at least 80 % of the deployments start. */
static void test_preflight(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s =
		space_new("{\"max_num_seqs\": {\"min\": 8, \"max\": 512, \"scale\": \"log2\"},"
			  "\"max_num_batched_tokens\": {\"min\": 512, \"max\": 8192, \"scale\": \"log2\"},"
			  "\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1, 2, 4]}",
			  NULL);
	struct opt_preflight pf = { .fit = exact_fit };
	struct opt_history h;
	struct opt_settings set;
	struct opt_candidate c;
	size_t near[32] = { 0 }, started = 0;

	opt_settings_init(&set);
	set.preflight = &pf;
	set.max_trials = 30;
	opt_history_init(&h);
	c = study(s, &set, &h);
	for (size_t i = 0; i < h.n; i++) {
		enum opt_fit f = exact_fit(s, &h.trials[i].config, NULL);

		CHECK_MSG(f != OPT_FIT_NO, "trial %zu was predicted not to fit", i);
		if (f == OPT_FIT_NEAR && h.trials[i].outcome == OPT_OUTCOME_INFEASIBLE)
			CHECK_MSG(++near[combo_of(s, &h.trials[i].config)] == 1,
				  "a second near configuration deployed after the check failed");
		started += h.trials[i].outcome != OPT_OUTCOME_INFEASIBLE;
	}
	fprintf(stderr, "pre-flight: %zu of %zu deployments started, %u predicted infeasible\n", started, h.n,
		c.predicted);
	CHECK(started * 10 >= h.n * 8);
	CHECK(c.predicted > 0);
	CHECK(c.best.valid);
	opt_history_done(&h);
}

/* The seed changes the path; the same seed replays it exactly. */
static void test_seed(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_new(demo_space, NULL);
	struct opt_history a, b;
	struct opt_settings set;
	bool differ = false;

	opt_settings_init(&set);
	for (uint64_t seed = 1; seed < 6; seed++) {
		set.seed = 0;
		opt_history_init(&a);
		study(s, &set, &a);
		set.seed = seed;
		opt_history_init(&b);
		study(s, &set, &b);
		differ = differ || a.n != b.n || memcmp(a.trials, b.trials, a.n * sizeof(a.trials[0])) != 0;
		/* resumed half-way with the same seed: the same trials */
		opt_history_done(&a);
		opt_history_init(&a);
		for (size_t i = 0; i < b.n / 2; i++)
			CHECK_INT_EQ(opt_history_add(&a, &b.trials[i]), 0);
		study(s, &set, &a);
		CHECK_INT_EQ(a.n, b.n);
		CHECK(memcmp(a.trials, b.trials, a.n * sizeof(a.trials[0])) == 0);
		opt_history_done(&a);
		opt_history_done(&b);
	}
	CHECK(differ);
}

int main(void)
{
	test_causes_prune_combinations();
	test_kv_cause_with_context_searched();
	test_weights_cause_with_fraction_searched();
	test_cache_blocks_cause();
	test_preflight();
	test_seed();
	return 0;
}
