/* The search space as a study author sees it: a spec parses into the grid
 * they wrote, mistakes are refused naming the JSON path, constraints cut the
 * grid, and canonical keys are stable whatever the JSON order. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "json-util.h"
#include "cost.h"
#include "macro.h"
#include "space.h"
#include "tests.h"

static cJSON *parse(const char *s)
{
	struct error err = { 0 };
	cJSON *j = NULL;

	CHECK_MSG(json_parse_strict("test", s, strlen(s), &j, &err) == 0, "%s", err.msg);
	return j;
}

/* Parses {"search_space": ..., "constraints": ...} (constraints optional). */
static int space_from(const char *spec, unsigned gpus, const char *const *extra, struct opt_space **ret,
		      struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = parse(spec);
	struct opt_space_options o = { .gpus = gpus, .extra_knobs = extra };

	return opt_space_from_json(cJSON_GetObjectItemCaseSensitive(j, "search_space"), "search_space",
				   cJSON_GetObjectItemCaseSensitive(j, "constraints"), "constraints", &o, ret, err);
}

static struct opt_space *space_ok(const char *spec, unsigned gpus, const char *const *extra)
{
	struct error err = { 0 };
	struct opt_space *s = NULL;

	CHECK_MSG(space_from(spec, gpus, extra, &s, &err) == 0, "%s", err.msg);
	return s;
}

static void space_fails(const char *spec, unsigned gpus, const char *path_and_words)
{
	struct error err = { 0 };
	struct opt_space *s = NULL;

	CHECK_INT_EQ(space_from(spec, gpus, NULL, &s, &err), -EINVAL);
	CHECK(s == NULL);
	CHECK_STR_CONTAINS(err.msg, path_and_words);
}

static const char *example = "{\"search_space\": {"
			     "\"tensor_parallel\": [1, 2, 4],"
			     "\"quantization\": [\"none\", \"fp8\", \"awq\"],"
			     "\"max_num_batched_tokens\": {\"min\": 512, \"max\": 16384, \"scale\": \"log2\"},"
			     "\"max_num_seqs\": {\"min\": 8, \"max\": 512, \"scale\": \"log2\"}}}";

static void test_example(void)
{
	_cleanup_(opt_space_freep) struct opt_space *s = space_ok(example, 4, NULL);
	struct opt_config c;
	char key[OPT_KEY_MAX];
	double v;

	/* Canonical order, whatever the JSON order. */
	CHECK_INT_EQ(s->n_knobs, 4);
	CHECK_STR_EQ(s->knobs[0].name, "max_num_seqs");
	CHECK_STR_EQ(s->knobs[1].name, "max_num_batched_tokens");
	CHECK_STR_EQ(s->knobs[2].name, "quantization");
	CHECK_STR_EQ(s->knobs[3].name, "tensor_parallel");
	CHECK_INT_EQ(s->knobs[0].n_values, 7); /* 8 16 32 64 128 256 512 */
	CHECK_INT_EQ(s->knobs[1].n_values, 6); /* 512 ... 16384 */
	CHECK(!s->knobs[0].categorical && !s->knobs[1].categorical);
	CHECK(s->knobs[2].categorical && s->knobs[3].categorical);
	CHECK_INT_EQ(s->n_grid, 7 * 6 * 3 * 3);
	/* The default constraint holds everywhere here (512 >= every batch). */
	CHECK_INT_EQ(s->n_constraints, 1);
	CHECK_INT_EQ(opt_space_count(s), 378);

	c = (struct opt_config){ .idx = { 4, 2, 1, 0 } };
	CHECK_INT_EQ(opt_config_key(s, &c, key, sizeof(key)), 0);
	CHECK_STR_EQ(key, "max_num_seqs=128,max_num_batched_tokens=2048,quantization=fp8,tensor_parallel=1");
	CHECK_INT_EQ(opt_config_number(s, &c, "max_num_batched_tokens", &v), 0);
	CHECK(v == 2048);
	CHECK_INT_EQ(opt_config_number(s, &c, "quantization", &v), -EINVAL);
	CHECK_INT_EQ(opt_config_key(s, &c, key, 20), -ENOBUFS);
}

static void test_keys_stable(void)
{
	_cleanup_(opt_space_freep) struct opt_space *a = space_ok(example, 4, NULL);
	_cleanup_(opt_space_freep) struct opt_space *b =
		space_ok("{\"search_space\": {\"max_num_seqs\": {\"scale\": \"log2\", \"max\": 512, \"min\": 8},"
			 "\"max_num_batched_tokens\": {\"max\": 16384, \"min\": 512, \"scale\": \"log2\"},"
			 "\"tensor_parallel\": [1, 2, 4], \"quantization\": [\"none\", \"fp8\", \"awq\"]}}",
			 4, NULL);
	_cleanup_(freep) struct opt_config *all = NULL;
	struct error err = { 0 };
	size_t n = 0;

	CHECK_INT_EQ(opt_space_enumerate(a, &all, &n), 0);
	CHECK_INT_EQ(n, 378);
	for (size_t i = 0; i < n; i++) {
		char ka[OPT_KEY_MAX], kb[OPT_KEY_MAX];
		struct opt_config back;

		CHECK(opt_space_allowed(a, &all[i]));
		CHECK_INT_EQ(opt_config_key(a, &all[i], ka, sizeof(ka)), 0);
		CHECK_INT_EQ(opt_config_key(b, &all[i], kb, sizeof(kb)), 0);
		CHECK_STR_EQ(ka, kb);
		CHECK_MSG(opt_config_from_key(a, ka, &back, &err) == 0, "%s", err.msg);
		CHECK(memcmp(&back, &all[i], sizeof(back)) == 0);
		CHECK(opt_config_ordinal(a, &all[i]) == opt_config_ordinal(a, &back));
		if (i > 0)
			CHECK(opt_config_ordinal(a, &all[i]) > opt_config_ordinal(a, &all[i - 1]));
	}

	struct opt_config c;
	CHECK_INT_EQ(opt_config_from_key(a, "max_num_seqs=128,quantization=fp8,tensor_parallel=1", &c, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "max_num_batched_tokens");
	CHECK_INT_EQ(opt_config_from_key(a,
					 "max_num_seqs=100,max_num_batched_tokens=2048,quantization=fp8,"
					 "tensor_parallel=1",
					 &c, &err),
		     -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "max_num_seqs=100");
	/* Any order of pairs is accepted when reading back. */
	CHECK_INT_EQ(opt_config_from_key(a,
					 "tensor_parallel=2,quantization=awq,max_num_batched_tokens=512,"
					 "max_num_seqs=8",
					 &c, &err),
		     0);
	CHECK_INT_EQ(c.idx[2], 2);
	CHECK_INT_EQ(c.idx[3], 1);
}

static void test_errors(void)
{
	space_fails("{\"search_space\": {\"max_num_seq\": [1, 2]}}", 0, "search_space.max_num_seq: unknown knob");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"min\": 1, \"max\": 8, \"scal\": \"log2\"}}}", 0,
		    "search_space.max_num_seqs.scal: unknown key");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"min\": 1, \"max\": 8, \"scale\": \"log\"}}}", 0,
		    "search_space.max_num_seqs.scale");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"min\": 64, \"max\": 8}}}", 0,
		    "search_space.max_num_seqs.min: min (64) is larger than max (8)");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"max\": 8}}}", 0,
		    "search_space.max_num_seqs.min: missing");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"min\": 1, \"min\": 2, \"max\": 8}}}", 0,
		    "search_space.max_num_seqs.min: duplicate key");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"values\": null}}}", 0,
		    "search_space.max_num_seqs.values: expected an array, got null");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"values\": [8, 16], \"categorial\": true}}}", 0,
		    "search_space.max_num_seqs.categorial: unknown key");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"min\": 0, \"max\": 8}}}", 0, "search_space.max_num_seqs");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"min\": 8, \"max\": 500, \"scale\": \"log2\"}}}", 0,
		    "search_space.max_num_seqs.max");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"min\": 8, \"max\": 100, \"step\": 8}}}", 0,
		    "search_space.max_num_seqs.step");
	space_fails(
		"{\"search_space\": {\"max_num_seqs\": {\"min\": 8, \"max\": 64, \"scale\": \"log2\", \"step\": 2}}}",
		0, "search_space.max_num_seqs.step");
	space_fails("{\"search_space\": {\"max_num_seqs\": {\"min\": 1, \"max\": 100000}}}", 0,
		    "search_space.max_num_seqs: more than 4096 values");
	space_fails("{\"search_space\": {\"quantization\": []}}", 0, "search_space.quantization: empty list");
	space_fails("{\"search_space\": {\"quantization\": [\"none\", \"int4\"]}}", 0, "search_space.quantization[1]");
	space_fails("{\"search_space\": {\"quantization\": [\"fp8\", \"fp8\"]}}", 0,
		    "search_space.quantization[1]: duplicate");
	space_fails("{\"search_space\": {\"tensor_parallel\": [1, 2.5]}}", 0, "search_space.tensor_parallel[1]");
	space_fails("{\"search_space\": {\"tensor_parallel\": [1, 2, 4]}}", 2,
		    "search_space.tensor_parallel: tensor_parallel 4 is more than the 2 GPUs of one node");
	space_fails("{\"search_space\": {\"tensor_parallel\": [1, 3]}}", 4, "tensor_parallel 3");
	space_fails("{\"search_space\": {\"max_num_seqs\": \"big\"}}", 0, "search_space.max_num_seqs: expected");
	space_fails("{\"search_space\": {}}", 0, "search_space: no knobs");
	space_fails("{\"search_space\": {\"max_num_seqs\": [8, 16], \"max_num_batched_tokens\": [512]},"
		    "\"constraints\": [\"max_num_seqs >= max_num_batched_token\"]}",
		    0, "constraints[0]");
	space_fails("{\"search_space\": {\"max_num_seqs\": [8, 16]}, \"constraints\": [\"max_num_seqs >>= 4\"]}", 0,
		    "constraints[0]: expected \"KNOB OP KNOB\"");
	space_fails("{\"search_space\": {\"max_num_seqs\": [8, 16], \"quantization\": [\"fp8\"]},"
		    "\"constraints\": [\"max_num_seqs >= 4\", \"quantization >= 1\"]}",
		    0, "constraints[1]");
	space_fails("{\"search_space\": {\"max_num_seqs\": [8, 16]}, \"constraints\": [\"max_num_seqs > 16\"]}", 0,
		    "constraints: the constraints exclude every configuration");
	/* Extra knobs only when the engine profile declares them. */
	space_fails("{\"search_space\": {\"kv_cache_dtype\": [\"auto\", \"fp8\"]}}", 0,
		    "search_space.kv_cache_dtype: unknown knob");
}

static void test_constraints_and_extras(void)
{
	static const char *const extra[] = { "kv_cache_dtype", "gpu_memory_utilization", NULL };
	_cleanup_(opt_space_freep) struct opt_space *d =
		space_ok("{\"search_space\": {\"max_num_seqs\": {\"min\": 64, \"max\": 1024, \"scale\": \"log2\"},"
			 "\"max_num_batched_tokens\": {\"min\": 256, \"max\": 4096, \"scale\": \"log2\"}}}",
			 0, NULL);
	_cleanup_(opt_space_freep) struct opt_space *none = space_ok(
		"{\"search_space\": {\"max_num_seqs\": {\"min\": 64, \"max\": 1024, \"scale\": \"log2\"},"
		"\"max_num_batched_tokens\": {\"min\": 256, \"max\": 4096, \"scale\": \"log2\"}}, \"constraints\": []}",
		0, NULL);
	_cleanup_(opt_space_freep) struct opt_space *twice =
		space_ok("{\"search_space\": {\"max_num_seqs\": {\"min\": 64, \"max\": 1024, \"scale\": \"log2\"},"
			 "\"max_num_batched_tokens\": {\"min\": 256, \"max\": 4096, \"scale\": \"log2\"}},"
			 "\"constraints\": [\"max_num_batched_tokens >= 2 * max_num_seqs\", \"max_num_seqs != 128\"]}",
			 0, NULL);
	_cleanup_(opt_space_freep) struct opt_space *x =
		space_ok("{\"search_space\": {\"max_num_seqs\": {\"min\": 16, \"max\": 256, \"step\": 16},"
			 "\"gpu_memory_utilization\": [0.95, 0.85, 0.9], \"kv_cache_dtype\": [\"auto\", \"fp8_e5m2\"],"
			 "\"max_num_batched_tokens\": {\"values\": [8192, 2048, 4096]}}}",
			 0, extra);
	struct opt_config c = { 0 };
	char key[OPT_KEY_MAX];
	double u[OPT_KNOBS_MAX];
	struct opt_space *bad = NULL;
	struct error err = { 0 };

	/* A string value becomes a flag's value: one that is itself a flag is refused. */
	CHECK(space_from("{\"search_space\": {\"kv_cache_dtype\": [\"auto\", \"--enforce-eager\"]}}", 0, extra, &bad,
			 &err) < 0);
	CHECK(!bad);
	CHECK_STR_CONTAINS(err.msg, "search_space.kv_cache_dtype[1]: expected 1-32 characters of [A-Za-z0-9_.+-], "
				    "not starting with '-'");

	/* mbt >= mns: (64: 5) (128: 5) (256: 5) (512: 4) (1024: 3) */
	CHECK_INT_EQ(opt_space_count(d), 22);
	CHECK_INT_EQ(opt_space_count(none), 25);
	/* mbt >= 2 mns and mns != 128: (64: 5) (256: 4) (512: 3) (1024: 2) */
	CHECK_INT_EQ(opt_space_count(twice), 14);
	c.idx[0] = 4; /* 1024 */
	c.idx[1] = 2; /* 1024 */
	CHECK(opt_space_allowed(d, &c));
	CHECK(!opt_space_allowed(twice, &c));

	/* Extras sort after the canonical knobs, by name; numeric lists are
	 * ordinal and sorted; linear ranges expand by step. */
	CHECK_INT_EQ(x->n_knobs, 4);
	CHECK_STR_EQ(x->knobs[0].name, "max_num_seqs");
	CHECK_INT_EQ(x->knobs[0].n_values, 16);
	CHECK_STR_EQ(x->knobs[2].name, "gpu_memory_utilization");
	CHECK(!x->knobs[2].categorical);
	CHECK(x->knobs[2].numbers[0] == 0.85 && x->knobs[2].numbers[2] == 0.95);
	CHECK_STR_EQ(x->knobs[3].name, "kv_cache_dtype");
	CHECK(x->knobs[3].categorical);
	CHECK(x->knobs[0].memory_monotone && x->knobs[1].memory_monotone && !x->knobs[2].memory_monotone);
	CHECK(x->knobs[1].numbers[0] == 2048 && x->knobs[1].numbers[2] == 8192);

	/* Snapping a normalised point rounds to the nearest grid index. */
	u[0] = 0.5;  /* 15 * 0.5 = 7.5 -> 8 -> 144 */
	u[1] = 0.74; /* 2 * 0.74 = 1.48 -> 1 -> 4096 */
	u[2] = 2.0;  /* clamped -> 0.95 */
	u[3] = -1;   /* clamped -> auto */
	opt_space_snap(x, u, &c);
	CHECK_INT_EQ(opt_config_key(x, &c, key, sizeof(key)), 0);
	CHECK_STR_EQ(key, "max_num_seqs=144,max_num_batched_tokens=4096,gpu_memory_utilization=0.95,"
			  "kv_cache_dtype=auto");
	CHECK(opt_space_normalise(x, 2, 1) == 0.5);

	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	CHECK_INT_EQ(opt_config_to_json(x, &c, &j), 0);
	text = cJSON_PrintUnformatted(j);
	CHECK_STR_EQ(text, "{\"max_num_seqs\":144,\"max_num_batched_tokens\":4096,\"gpu_memory_utilization\":0.95,"
			   "\"kv_cache_dtype\":\"auto\"}");
}

/* Constraints on categorical knobs: value tests, implications and
 * allowed-combination lists, and their mistakes named by path. */
static void test_categorical_constraints(void)
{
	static const char *const extra[] = { "kv_cache_dtype", NULL };
	static const char *space = "\"search_space\": {\"max_num_seqs\": [8, 16], \"max_num_batched_tokens\": [1024],"
				   "\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1, 2, 4],"
				   "\"kv_cache_dtype\": [\"auto\", \"fp8\"]}";
	static const struct {
		const char *constraints;
		uint64_t count;
	} cases[] = {
		{ "[]", 36 },
		{ "[\"kv_cache_dtype == fp8 => quantization == fp8\"]", 24 },
		{ "[\"quantization in [fp8, awq]\"]", 24 },
		{ "[\"quantization != none\", \"tensor_parallel in [2, 4]\"]", 16 },
		{ "[\"tensor_parallel >= 2 => kv_cache_dtype == auto\"]", 24 },
		{ "[{\"allowed\": [{\"quantization\": \"fp8\", \"tensor_parallel\": [2, 4]},"
		  "{\"quantization\": \"none\", \"tensor_parallel\": 4, \"kv_cache_dtype\": \"auto\"}]}]",
		  10 },
	};
	static const struct {
		const char *constraints, *message;
	} bad[] = {
		{ "[\"kv_cache_dtype == int4\"]", "constraints[0]: \"kv_cache_dtype == int4\": int4 is not a value" },
		{ "[\"quantization >= fp8\"]",
		  "constraints[0]: \"quantization >= fp8\": quantization takes == != or in" },
		{ "[\"quantization in fp8\"]", "expected [value, ...] after \"in\"" },
		{ "[\"quantization == fp8 => tensor_parallel == 2 => kv_cache_dtype == auto\"]",
		  "one => per constraint" },
		{ "[{\"allowed\": [{\"quantisation\": \"fp8\"}]}]",
		  "constraints[0].allowed[0].quantisation: not a knob" },
		{ "[{\"allowed\": [{\"tensor_parallel\": 3}]}]",
		  "constraints[0].allowed[0].tensor_parallel: 3 is not a value" },
		{ "[{\"allowed\": []}]", "constraints[0].allowed: expected 1 to" },
		{ "[{\"allowd\": []}]", "constraints[0]: expected a string or {\"allowed\"" },
	};
	char spec[1024];

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(opt_space_freep) struct opt_space *s = NULL;

		snprintf(spec, sizeof(spec), "{%s, \"constraints\": %s}", space, cases[i].constraints);
		s = space_ok(spec, 4, extra);
		CHECK_MSG(opt_space_count(s) == cases[i].count, "%s: %" PRIu64 " configurations, expected %" PRIu64,
			  cases[i].constraints, opt_space_count(s), cases[i].count);
	}
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct opt_space *s = NULL;
		struct error err = { 0 };

		snprintf(spec, sizeof(spec), "{%s, \"constraints\": %s}", space, bad[i].constraints);
		CHECK_INT_EQ(space_from(spec, 4, extra, &s, &err), -EINVAL);
		CHECK_STR_CONTAINS(err.msg, bad[i].message);
	}

	/* The implication: kv fp8 only with quantization fp8. */
	{
		_cleanup_(opt_space_freep) struct opt_space *s = NULL;
		struct opt_config c;
		struct error err = { 0 };

		snprintf(spec, sizeof(spec),
			 "{%s, \"constraints\": [\"kv_cache_dtype == fp8 => quantization == fp8\"]}", space);
		s = space_ok(spec, 4, extra);
		CHECK_INT_EQ(opt_config_from_key(s,
						 "max_num_seqs=8,max_num_batched_tokens=1024,quantization=awq,"
						 "tensor_parallel=2,kv_cache_dtype=fp8",
						 &c, &err),
			     0);
		CHECK(!opt_space_allowed(s, &c));
		CHECK(opt_space_violation(s, &c) >= 1);
		CHECK_INT_EQ(opt_config_from_key(s,
						 "max_num_seqs=8,max_num_batched_tokens=1024,quantization=fp8,"
						 "tensor_parallel=2,kv_cache_dtype=fp8",
						 &c, &err),
			     0);
		CHECK(opt_space_allowed(s, &c));
		CHECK(opt_space_violation(s, &c) == 0);
	}
}

/* Conditional knobs: spec_tokens exists only with speculation (implicitly),
 * an explicit "when" on any knob; one configuration per inactive
 * combination, inactive knobs out of the JSON; DP × TP × PP within the GPUs. */
static void test_conditional_and_gpus(void)
{
	static const char *const extra[] = { "data_parallel",
					     "pipeline_parallel",
					     "prefix_caching",
					     "spec_method",
					     "spec_tokens",
					     "kv_cache_dtype",
					     NULL };
	_cleanup_(opt_space_freep) struct opt_space *s = space_ok(
		"{\"search_space\": {\"spec_method\": [\"none\", \"ngram\", \"eagle\"], \"spec_tokens\": {\"min\": 1, "
		"\"max\": 4}, \"tensor_parallel\": [1, 2], \"data_parallel\": [1, 2, 4]}}",
		4, extra);
	_cleanup_(freep) struct opt_config *all = NULL;
	size_t n = 0, with_tokens = 0;
	int km = opt_space_knob_index(s, "spec_method"), kt = opt_space_knob_index(s, "spec_tokens");
	struct error err = { 0 };
	struct opt_space *bad = NULL;

	CHECK(km >= 0 && kt >= 0);
	CHECK(s->knobs[kt].conditional);
	CHECK_STR_EQ(s->knobs[kt].when_text, "spec_method != none");
	/* data_parallel is categorical, like tensor_parallel */
	CHECK(s->knobs[opt_space_knob_index(s, "data_parallel")].categorical);
	/* (1 none + 2 methods × 4 tokens) × the (tp, dp) pairs within 4 GPUs: 1×1, 1×2, 1×4, 2×1, 2×2 */
	CHECK_INT_EQ(opt_space_count(s), 9 * 5);
	CHECK(opt_space_enumerate(s, &all, &n) == 0);
	for (size_t i = 0; i < n; i++) {
		_cleanup_(cJSON_Deletep) cJSON *j = NULL;
		bool spec = strcmp(s->knobs[km].strings[all[i].idx[km]], "none") != 0;

		CHECK(opt_config_gpus(s, &all[i]) <= 4);
		CHECK(opt_knob_active(s, &all[i], (size_t)kt) == spec);
		if (!spec)
			CHECK_INT_EQ(all[i].idx[kt], 0);
		CHECK(opt_config_to_json(s, &all[i], &j) == 0);
		CHECK((cJSON_GetObjectItemCaseSensitive(j, "spec_tokens") != NULL) == spec);
		with_tokens += spec;
	}
	CHECK_INT_EQ(with_tokens, 8 * 5);
	/* a point NLopt asks for with speculation off snaps to the one such configuration */
	{
		double x[OPT_KNOBS_MAX] = { 0 };
		struct opt_config c;

		x[kt] = 1.0;
		opt_space_snap(s, x, &c);
		CHECK_INT_EQ(c.idx[kt], 0);
		CHECK(opt_space_allowed(s, &c));
		c.idx[kt] = 3;
		CHECK(!opt_space_allowed(s, &c));
		CHECK(opt_space_violation(s, &c) >= 1);
	}
	/* an explicit condition on any knob; a condition may not name its own knob */
	{
		_cleanup_(opt_space_freep) struct opt_space *w = space_ok(
			"{\"search_space\": {\"prefix_caching\": [\"on\", \"off\"], \"kv_cache_dtype\": {\"values\": "
			"[\"auto\", \"fp8\"], \"when\": \"prefix_caching == on\"}}}",
			0, extra);

		CHECK_INT_EQ(opt_space_count(w), 3);
	}
	CHECK(space_from("{\"search_space\": {\"spec_method\": [\"none\", \"ngram\"], \"spec_tokens\": {\"min\": 1, "
			 "\"max\": 4, \"when\": \"spec_tokens > 2\"}}}",
			 0, extra, &bad, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "search_space.spec_tokens.when");
	CHECK(space_from("{\"search_space\": {\"spec_method\": [\"none\", \"ngram\"], \"spec_tokens\": {\"min\": 1, "
			 "\"max\": 4, \"when\": \"spec_method == medusa\"}}}",
			 0, extra, &bad, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "medusa is not a value of spec_method");
	/* a GPU knob beyond the host */
	CHECK(space_from("{\"search_space\": {\"data_parallel\": [1, 8]}}", 4, extra, &bad, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "data_parallel 8 is more than the 4 GPUs");
}

/* Both shapes in one space: each configuration has its shape's knobs only
 * (one per inactive combination), a disaggregated one holds P × TP_p + D ×
 * TP_d GPUs within the host's, and a side's batch knob has a batch knob's
 * memory role. */
static void test_shapes(void)
{
	static const char *const extra[] = { "shape",
					     "prefill_workers",
					     "decode_workers",
					     "prefill_tensor_parallel",
					     "decode_tensor_parallel",
					     "prefill_max_num_batched_tokens",
					     "decode_max_num_seqs",
					     NULL };
	_cleanup_(opt_space_freep) struct opt_space *s = space_ok(
		"{\"search_space\": {\"shape\": [\"aggregated\", \"disaggregated\"], \"tensor_parallel\": [2, 4],"
		" \"max_num_batched_tokens\": {\"min\": 512, \"max\": 2048, \"scale\": \"log2\"},"
		" \"prefill_workers\": [1, 2, 3], \"prefill_tensor_parallel\": [2, 4], \"decode_workers\": [1, 2],"
		" \"decode_tensor_parallel\": [2, 4], \"prefill_max_num_batched_tokens\": [4096, 8192],"
		" \"decode_max_num_seqs\": [64, 128]}, \"constraints\": []}",
		8, extra);
	_cleanup_(freep) struct opt_config *all = NULL;
	size_t n = 0, n_agg = 0, n_pd = 0;
	int shape = opt_space_knob_index(s, "shape"), mbt = opt_space_knob_index(s, "max_num_batched_tokens"),
	    pmbt = opt_space_knob_index(s, "prefill_max_num_batched_tokens");

	CHECK(shape >= 0 && mbt >= 0 && pmbt >= 0);
	CHECK_STR_EQ(s->knobs[mbt].when_text, "shape == aggregated");
	CHECK_STR_EQ(s->knobs[pmbt].when_text, "shape == disaggregated");
	CHECK(s->knobs[pmbt].memory == OPT_MEMORY_BATCH);
	CHECK(s->knobs[opt_space_knob_index(s, "prefill_workers")].categorical);
	CHECK(opt_space_enumerate(s, &all, &n) == 0);
	for (size_t i = 0; i < n; i++) {
		_cleanup_(cJSON_Deletep) cJSON *k = NULL;
		char buf[32];
		bool pd = strcmp(opt_config_text(s, &all[i], (size_t)shape, buf, sizeof(buf)), "disaggregated") == 0;
		unsigned gpus = opt_config_gpus(s, &all[i]);

		CHECK(opt_config_to_json(s, &all[i], &k) == 0);
		CHECK(pd == opt_knobs_pd_shape(k, NULL));
		CHECK(pd == !cJSON_GetObjectItemCaseSensitive(k, "tensor_parallel"));
		CHECK(pd == !!cJSON_GetObjectItemCaseSensitive(k, "prefill_workers"));
		CHECK_INT_EQ(gpus, opt_knobs_gpus(k));
		CHECK(gpus <= 8);
		n_agg += !pd;
		n_pd += pd;
	}
	/* aggregated: 2 TP × 3 chunk sizes; disaggregated: the (P, TP_p, D, TP_d)
	 * within 8 GPUs (10 of 24) × 2 × 2 side knobs */
	CHECK_INT_EQ(n_agg, 6);
	CHECK_INT_EQ(n_pd, 10 * 4);
}

int main(void)
{
	test_shapes();
	test_conditional_and_gpus();
	test_example();
	test_keys_stable();
	test_errors();
	test_constraints_and_extras();
	test_categorical_constraints();
	return 0;
}
