/* The memory pre-flight against goodput-sim's own start-up check: on every
 * preset model × GPU × quantization × TP (at the engine's default batch and
 * at a small one, at the model's full context and at a short one) the
 * pre-flight says "fits" exactly where the sim starts, names the cause the
 * sim refuses with, and a clear "does not fit" is never a configuration
 * the sim would start. The model's facts given as config.json keys in the
 * study give the same estimate as the preset; without facts it says
 * nothing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "json-util.h"
#include "macro.h"
#include "runner-preflight.h"
#include "study.h"
#include "tests.h"

static struct study *study_new(const char *model, const char *gpu, const char *space, const char *extra_model)
{
	static const char *const extra[] = { "max_model_len", "gpu_memory_utilization", "kv_cache_dtype", NULL };
	const struct study_options so = { .extra_knobs = extra };
	char text[4096];
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct study *s = NULL;
	struct error err = { 0 };

	snprintf(text, sizeof(text),
		 "{\"name\": \"pf\", \"engine\": \"sim\", \"model\": {\"name\": \"%s\"%s},"
		 " \"quantizations\": [\"none\", \"fp8\", \"int8\", \"awq\"],"
		 " \"gpu\": {\"type\": \"%s\", \"count\": 8, \"price_per_gpu_hour\": 1},"
		 " \"search_space\": %s, \"workload\": {}, \"sla\": {\"ttft_ms\": 500}}",
		 model, extra_model ? extra_model : "", gpu, space);
	CHECK_MSG(json_parse_strict("study", text, strlen(text), &j, &err) == 0, "%s", err.msg);
	CHECK_MSG(study_from_json(j, &so, &s, &err) == 0, "%s", err.msg);
	return s;
}

/* What goodput-sim does with the same flags: 0 when it starts, else its error. */
static int sim_starts(const char *model, const char *gpu, const struct study *s, const struct opt_config *c,
		      struct error *err)
{
	struct sim_engine_config cfg;
	struct sim_engine *e = NULL;
	int r;

	sim_engine_config_init(&cfg);
	CHECK(sim_engine_config_apply_flag(&cfg, "--model", model, err) > 0);
	CHECK(sim_engine_config_apply_flag(&cfg, "--gpu", gpu, err) > 0);
	CHECK(sim_engine_config_apply_flag(&cfg, "--gpus", "8", err) > 0);
	for (size_t k = 0; k < s->space->n_knobs; k++) {
		char flag[64], value[64];

		snprintf(flag, sizeof(flag), "--%s", s->space->knobs[k].name);
		for (char *p = flag; *p; p++)
			if (*p == '_')
				*p = '-';
		if (strcmp(flag, "--tensor-parallel") == 0)
			snprintf(flag, sizeof(flag), "--tensor-parallel-size");
		CHECK(sim_engine_config_apply_flag(&cfg, flag, opt_config_text(s->space, c, k, value, sizeof(value)),
						   err) > 0);
	}
	r = sim_engine_new(&cfg, NULL, NULL, &e, err);
	sim_engine_free(e);
	return r;
}

static void test_every_preset(void)
{
	static const char *const spaces[] = {
		"{\"quantization\": [\"none\", \"fp8\", \"int8\", \"awq\"], \"tensor_parallel\": [1, 2, 4, 8]}",
		"{\"quantization\": [\"none\", \"fp8\", \"int8\", \"awq\"], \"tensor_parallel\": [1, 2, 4, 8],"
		" \"max_num_seqs\": [8], \"max_num_batched_tokens\": [512], \"max_model_len\": [2048],"
		" \"gpu_memory_utilization\": [0.8, 0.95], \"kv_cache_dtype\": [\"auto\", \"fp8\"]}",
	};
	unsigned fits = 0, refused = 0, near = 0, cases = 0;

	for (size_t m = 0; sim_model_preset_name(m); m++)
		for (size_t g = 0; sim_gpu_get(g); g++)
			for (size_t sp = 0; sp < ELEMENTSOF(spaces); sp++) {
				const char *model = sim_model_preset_name(m), *gpu = sim_gpu_get(g)->name;
				_cleanup_(study_freep) struct study *s = NULL;
				_cleanup_(freep) struct opt_config *all = NULL;
				struct runner_preflight pf;
				struct error err = { 0 };
				size_t n = 0;

				/* llama-7b and llama-2-70b hold 2048 and 4096 tokens of context */
				s = study_new(model, gpu, spaces[sp], NULL);
				CHECK_INT_EQ(runner_preflight_init(&pf, s, &err), 0);
				CHECK_MSG(pf.usable, "%s on %s: %s", model, gpu, pf.why_not);
				CHECK_INT_EQ(opt_space_enumerate(s->space, &all, &n), 0);
				for (size_t i = 0; i < n; i++) {
					struct runner_estimate e;
					char key[OPT_KEY_MAX], what[256];
					int r;

					runner_preflight_estimate(&pf, s->space, &all[i], &e);
					r = sim_starts(model, gpu, s, &all[i], &err);
					(void)opt_config_key(s->space, &all[i], key, sizeof(key));
					runner_estimate_format(&e, what, sizeof(what));
					cases++;
					if (e.fit == OPT_FIT_YES) {
						CHECK_MSG(r == 0, "%s on %s, %s: predicted to fit (%s), the sim: %s",
							  model, gpu, key, what, err.msg);
						fits++;
						continue;
					}
					CHECK_MSG(r < 0, "%s on %s, %s: predicted not to fit (%s), the sim starts",
						  model, gpu, key, what);
					near += e.fit == OPT_FIT_NEAR;
					refused++;
					if (e.refused)
						CHECK_INT_EQ(r, -EINVAL);
					else if (e.cause == OPT_OOM_KV_CACHE)
						CHECK_MSG(r == -ENOSPC, "%s on %s, %s: KV cache (%s), the sim: %s",
							  model, gpu, key, what, err.msg);
					else
						CHECK_MSG(r == -ENOMEM || r == -EFBIG,
							  "%s on %s, %s: %s (%s), the sim: %s", model, gpu, key,
							  opt_oom_cause_to_string(e.cause), what, err.msg);
				}
			}
	fprintf(stderr, "pre-flight vs the sim's start-up check: %u configurations, %u fit, %u refused (%u near)\n",
		cases, fits, refused, near);
	CHECK(fits > 100 && refused > 100);
}

/* The facts as config.json keys in the study: the same estimate as the preset. */
static void test_architecture_block(void)
{
	static const char *space = "{\"quantization\": [\"none\", \"fp8\"], \"tensor_parallel\": [1, 2, 4]}";
	static const char *arch =
		", \"architecture\": {\"hidden_size\": 8192, \"num_hidden_layers\": 80, \"num_attention_heads\": 64,"
		" \"num_key_value_heads\": 8, \"intermediate_size\": 28672, \"vocab_size\": 128256,"
		" \"max_position_embeddings\": 131072}";
	_cleanup_(study_freep) struct study *preset = study_new("llama-3.1-70b", "L40S", space, NULL);
	_cleanup_(study_freep) struct study *facts = study_new("my-org/some-70b", "L40S", space, arch);
	_cleanup_(study_freep) struct study *none = study_new("my-org/some-70b", "L40S", space, NULL);
	_cleanup_(freep) struct opt_config *all = NULL;
	struct runner_preflight a, b, c;
	struct error err = { 0 };
	size_t n = 0;

	CHECK_INT_EQ(runner_preflight_init(&a, preset, &err), 0);
	CHECK_INT_EQ(runner_preflight_init(&b, facts, &err), 0);
	CHECK_INT_EQ(runner_preflight_init(&c, none, &err), 0);
	CHECK(a.usable && b.usable && !c.usable);
	CHECK_STR_CONTAINS(c.why_not, "no model facts");
	CHECK_STR_EQ(b.source, "model.architecture");
	CHECK_INT_EQ(opt_space_enumerate(preset->space, &all, &n), 0);
	for (size_t i = 0; i < n; i++) {
		struct runner_estimate ea, eb, ec;

		runner_preflight_estimate(&a, preset->space, &all[i], &ea);
		runner_preflight_estimate(&b, facts->space, &all[i], &eb);
		runner_preflight_estimate(&c, none->space, &all[i], &ec);
		CHECK_INT_EQ(ea.fit, eb.fit);
		CHECK(fabs(ea.need_gib - eb.need_gib) < 0.02 * ea.need_gib);
		CHECK_INT_EQ(ec.fit, OPT_FIT_UNKNOWN);
	}
	/* 70B on 48 GB: bf16 fits nowhere, fp8 only at TP 4 */
	{
		struct opt_config cfg;
		struct runner_estimate e;

		CHECK_INT_EQ(opt_config_from_key(preset->space, "quantization=fp8,tensor_parallel=4", &cfg, &err), 0);
		runner_preflight_estimate(&a, preset->space, &cfg, &e);
		CHECK_INT_EQ(e.fit, OPT_FIT_YES);
		CHECK_INT_EQ(opt_config_from_key(preset->space, "quantization=none,tensor_parallel=1", &cfg, &err), 0);
		runner_preflight_estimate(&a, preset->space, &cfg, &e);
		CHECK_INT_EQ(e.fit, OPT_FIT_NO);
		CHECK_INT_EQ(e.cause, OPT_OOM_WEIGHTS);
		CHECK_INT_EQ(opt_config_from_key(preset->space, "quantization=fp8,tensor_parallel=2", &cfg, &err), 0);
		runner_preflight_estimate(&a, preset->space, &cfg, &e);
		CHECK_INT_EQ(e.fit, OPT_FIT_NO);
		CHECK_INT_EQ(e.cause, OPT_OOM_KV_CACHE);
		CHECK(e.kv_tokens > 4096 && e.kv_tokens < 131072);
	}
}

int main(void)
{
	test_every_preset();
	test_architecture_block();
	return 0;
}
