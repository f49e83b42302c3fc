/* Golden tests of every shipped engine profile: each renders the exact argv
 * and environment an operator would type for a set of knob values — the
 * edge values included (no quantization, TP 1, the largest batch) — and
 * refuses what the engine cannot run (a TP that does not divide the host's
 * GPUs, an unknown or unsupported quantization, a quantization whose
 * checkpoint the study lacks). Also: the derived-value and multi-flag parts
 * of the profile format, and the list of flags `goodput check-engine`
 * checks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine-profile.h"
#include "json-util.h"
#include "macro.h"
#include "tests.h"

static cJSON *J(const char *s)
{
	struct error err = { 0 };
	cJSON *j = NULL;

	CHECK_MSG(json_parse_strict("test", s, strlen(s), &j, &err) == 0, "%s", err.msg);
	return j;
}

static struct engine_profile *load(const char *name)
{
	struct engine_profile *p = NULL;
	struct error err = { 0 };

	CHECK_MSG(engine_profile_find(name, TEST_SOURCE_ROOT "/configs/engines", &p, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(p->name, name);
	return p;
}

static void check_strv(char **v, const char *const *want)
{
	size_t i = 0;

	for (; want[i]; i++) {
		CHECK_MSG(v[i], "ends at %zu, expected \"%s\"", i, want[i]);
		CHECK_STR_EQ(v[i], want[i]);
	}
	CHECK_MSG(v[i] == NULL, "extra entry \"%s\"", v[i]);
}

static const struct engine_render_params params8 = {
	.model = "meta-llama/Llama-3.1-8B-Instruct",
	.served_model = "llama",
	.host = "127.0.0.1",
	.port = 8123,
	.gpu_type = "H100",
	.gpu_count = 4,
};

/* Renders knobs and compares argv and env. */
static void golden(const char *engine, const struct engine_render_params *params, const char *knobs,
		   const char *const *want_argv, const char *const *want_env)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load(engine);
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *k = J(knobs);
	struct error err = { 0 };

	CHECK_MSG(engine_profile_render(p, params, k, &c, &err) == 0, "%s: %s", engine, err.msg);
	check_strv(c.argv, want_argv);
	check_strv(c.env, want_env);
}

static void refused(const char *engine, const struct engine_render_params *params, const char *knobs, const char *want)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load(engine);
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *k = J(knobs);
	struct error err = { 0 };

	CHECK_MSG(engine_profile_render(p, params, k, &c, &err) == -EINVAL, "%s accepted %s", engine, knobs);
	CHECK_STR_CONTAINS(err.msg, want);
}

static void test_sglang(void)
{
	golden("sglang", &params8,
	       "{\"max_num_seqs\": 128, \"max_num_batched_tokens\": 8192, \"tensor_parallel\": 2,"
	       " \"quantization\": \"fp8\", \"gpu_memory_utilization\": 0.88, \"kv_cache_dtype\": \"fp8\"}",
	       (const char *const[]){ "python3",
				      "-m",
				      "sglang.launch_server",
				      "--model-path",
				      "meta-llama/Llama-3.1-8B-Instruct",
				      "--served-model-name",
				      "llama",
				      "--host",
				      "127.0.0.1",
				      "--port",
				      "8123",
				      "--enable-metrics",
				      "--max-running-requests",
				      "128",
				      "--chunked-prefill-size",
				      "8192",
				      "--tp-size",
				      "2",
				      "--quantization",
				      "fp8",
				      "--mem-fraction-static",
				      "0.88",
				      "--kv-cache-dtype",
				      "fp8_e4m3",
				      NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0,1", NULL });
	/* Edge values: no quantization (no flag), TP 1, the largest batch. */
	golden("sglang", &params8,
	       "{\"max_num_seqs\": 1024, \"max_num_batched_tokens\": 32768, \"tensor_parallel\": 1,"
	       " \"quantization\": \"none\"}",
	       (const char *const[]){ "python3", "-m", "sglang.launch_server", "--model-path",
				      "meta-llama/Llama-3.1-8B-Instruct", "--served-model-name", "llama", "--host",
				      "127.0.0.1", "--port", "8123", "--enable-metrics", "--max-running-requests",
				      "1024", "--chunked-prefill-size", "32768", "--tp-size", "1", NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0", NULL });
	refused("sglang", &params8, "{\"tensor_parallel\": 3}", "does not divide the host's 4 GPUs");
	refused("sglang", &params8, "{\"quantization\": \"int4\"}", "\"int4\"");
	refused("sglang", &params8, "{\"kv_cache_dtype\": \"fp16\"}", "\"fp16\"");
}

/* The levers: replicas, stages, prefix caching and speculation in each
 * engine's own flags; GPUs for every replica and stage. */
static void test_levers(void)
{
	struct engine_render_params spec = params8;

	spec.gpu_count = 8;
	spec.draft_model = "meta-llama/Llama-3.2-1B-Instruct";
	golden("vllm", &spec,
	       "{\"tensor_parallel\": 2, \"data_parallel\": 2, \"pipeline_parallel\": 2, \"prefix_caching\": \"off\","
	       " \"spec_method\": \"draft_model\", \"spec_tokens\": 4}",
	       (const char *const[]){ "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--host", "127.0.0.1",
				      "--port", "8123", "--served-model-name", "llama", "--tensor-parallel-size", "2",
				      "--data-parallel-size", "2", "--pipeline-parallel-size", "2",
				      "--no-enable-prefix-caching", "--speculative-config",
				      "{\"method\": \"draft_model\", \"model\": \"meta-llama/Llama-3.2-1B-Instruct\", "
				      "\"num_speculative_tokens\": 4, \"draft_tensor_parallel_size\": 1}",
				      NULL },
	       (const char *const[]){ "VLLM_NO_USAGE_STATS=1", "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", NULL });
	golden("vllm", &params8, "{\"spec_method\": \"ngram\", \"spec_tokens\": 3, \"prefix_caching\": \"on\"}",
	       (const char *const[]){
		       "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--host", "127.0.0.1", "--port", "8123",
		       "--served-model-name", "llama", "--enable-prefix-caching", "--speculative-config",
		       "{\"method\": \"ngram\", \"num_speculative_tokens\": 3, \"prompt_lookup_max\": 4, "
		       "\"prompt_lookup_min\": 2}",
		       NULL },
	       (const char *const[]){ "VLLM_NO_USAGE_STATS=1", "CUDA_VISIBLE_DEVICES=0", NULL });
	/* no speculation: no flag, and spec_tokens (its parts) has none of its own */
	golden("vllm", &params8, "{\"spec_method\": \"none\"}",
	       (const char *const[]){ "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--host", "127.0.0.1",
				      "--port", "8123", "--served-model-name", "llama", NULL },
	       (const char *const[]){ "VLLM_NO_USAGE_STATS=1", "CUDA_VISIBLE_DEVICES=0", NULL });
	/* a drafter the study does not name */
	refused("vllm", &params8, "{\"spec_method\": \"eagle\", \"spec_tokens\": 3}", "{draft_model}");
	/* more GPUs than the host has */
	refused("vllm", &params8, "{\"tensor_parallel\": 2, \"data_parallel\": 4}", "8 GPUs, more than the host's 4");
	spec.draft_model = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B";
	golden("sglang", &spec,
	       "{\"tensor_parallel\": 1, \"data_parallel\": 2, \"prefix_caching\": \"off\", \"spec_method\": \"eagle\","
	       " \"spec_tokens\": 3}",
	       (const char *const[]){ "python3",
				      "-m",
				      "sglang.launch_server",
				      "--model-path",
				      "meta-llama/Llama-3.1-8B-Instruct",
				      "--served-model-name",
				      "llama",
				      "--host",
				      "127.0.0.1",
				      "--port",
				      "8123",
				      "--enable-metrics",
				      "--tp-size",
				      "1",
				      "--dp-size",
				      "2",
				      "--disable-radix-cache",
				      "--speculative-algorithm",
				      "EAGLE",
				      "--speculative-draft-model-path",
				      "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
				      "--speculative-num-steps",
				      "3",
				      NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0,1", NULL });
	golden("tgi", &params8, "{\"spec_method\": \"ngram\", \"spec_tokens\": 2}",
	       (const char *const[]){ "text-generation-launcher", "--model-id", "meta-llama/Llama-3.1-8B-Instruct",
				      "--hostname", "127.0.0.1", "--port", "8123", "--speculate", "2", NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0", NULL });
	/* engines without the lever have no flag for it */
	refused("tgi", &params8, "{\"data_parallel\": 2}", "has no flag for it");
	refused("trtllm", &params8, "{\"spec_method\": \"ngram\"}", "has no flag for it");
}

static void test_tgi(void)
{
	golden("tgi", &params8,
	       "{\"max_num_seqs\": 64, \"max_num_batched_tokens\": 4096, \"tensor_parallel\": 4,"
	       " \"quantization\": \"awq\", \"max_concurrent_requests\": 512}",
	       (const char *const[]){ "text-generation-launcher", "--model-id", "meta-llama/Llama-3.1-8B-Instruct",
				      "--hostname", "127.0.0.1", "--port", "8123", "--max-batch-size", "64",
				      "--max-batch-prefill-tokens", "4096", "--num-shard", "4", "--quantize", "awq",
				      "--max-concurrent-requests", "512", NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0,1,2,3", NULL });
	golden("tgi", &params8, "{\"max_num_seqs\": 512, \"tensor_parallel\": 1, \"quantization\": \"none\"}",
	       (const char *const[]){ "text-generation-launcher", "--model-id", "meta-llama/Llama-3.1-8B-Instruct",
				      "--hostname", "127.0.0.1", "--port", "8123", "--max-batch-size", "512",
				      "--num-shard", "1", NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0", NULL });
	golden("tgi", &params8, "{\"quantization\": \"int8\"}",
	       (const char *const[]){ "text-generation-launcher", "--model-id", "meta-llama/Llama-3.1-8B-Instruct",
				      "--hostname", "127.0.0.1", "--port", "8123", "--quantize", "eetq", NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0", NULL });
	refused("tgi", &params8, "{\"tensor_parallel\": 8}", "does not divide the host's 4 GPUs");
	refused("tgi", &params8, "{\"quantization\": \"gguf\"}", "\"gguf\"");
}

static void test_llamacpp(void)
{
	const struct engine_render_params one = { .model = "/models/llama-3.1-8b-f16.gguf",
						  .served_model = "llama",
						  .host = "127.0.0.1",
						  .port = 8080,
						  .gpu_count = 1 };
	struct engine_render_params cpu = one;
	_cleanup_(engine_profile_freep) struct engine_profile *p = load("llamacpp");
	_cleanup_(cJSON_Deletep) cJSON *defaults = NULL, *given = cJSON_Parse("{\"max_num_seqs\": 2}");
	char text[256];

	/* --parallel from the batch knob, -b from the chunk knob and -ub from
	 * its own, the threads, the switches, --ctx-size derived from the
	 * study's context per slot: 4096 × 16 slots; on GPUs every layer
	 * offloaded. */
	golden("llamacpp", &one,
	       "{\"max_num_seqs\": 16, \"max_num_batched_tokens\": 2048, \"ubatch_size\": 256, \"threads\": 8,"
	       " \"threads_batch\": 16, \"flash_attn\": \"on\", \"cont_batching\": \"off\", \"tensor_parallel\": 1,"
	       " \"quantization\": \"none\", \"max_model_len\": 4096}",
	       (const char *const[]){ "llama-server",
				      "--model",
				      "/models/llama-3.1-8b-f16.gguf",
				      "--alias",
				      "llama",
				      "--host",
				      "127.0.0.1",
				      "--port",
				      "8080",
				      "--metrics",
				      "--n-gpu-layers",
				      "999",
				      "--parallel",
				      "16",
				      "--batch-size",
				      "2048",
				      "--ubatch-size",
				      "256",
				      "--threads",
				      "8",
				      "--threads-batch",
				      "16",
				      "--flash-attn",
				      "--no-cont-batching",
				      "--ctx-size",
				      "65536",
				      NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0", NULL });
	golden("llamacpp", &one, "{\"max_num_seqs\": 64, \"flash_attn\": \"off\", \"cont_batching\": \"on\"}",
	       (const char *const[]){ "llama-server", "--model", "/models/llama-3.1-8b-f16.gguf", "--alias", "llama",
				      "--host", "127.0.0.1", "--port", "8080", "--metrics", "--n-gpu-layers", "999",
				      "--parallel", "64", "--cont-batching", NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0", NULL });
	/* A CPU host: no --n-gpu-layers (a CPU build warns about it), no GPUs to name. */
	cpu.cpu = true;
	golden("llamacpp", &cpu, "{\"max_num_batched_tokens\": 512}",
	       (const char *const[]){ "llama-server", "--model", "/models/llama-3.1-8b-f16.gguf", "--alias", "llama",
				      "--host", "127.0.0.1", "--port", "8080", "--metrics", "--batch-size", "512",
				      NULL },
	       (const char *const[]){ NULL });
	/* No tensor parallelism, no FP8 in GGUF, no switch values it does not know. */
	refused("llamacpp", &params8, "{\"tensor_parallel\": 2}", "does not support \"2\"");
	refused("llamacpp", &one, "{\"quantization\": \"fp8\"}", "does not support \"fp8\"");
	refused("llamacpp", &one, "{\"flash_attn\": \"auto\"}", "does not support \"auto\"");
	/* The engine's defaults of what a configuration leaves unset, as flags. */
	CHECK_INT_EQ(engine_profile_default_knobs(p, "cpu", 0, &defaults), 0);
	CHECK_INT_EQ(engine_profile_defaults_text(p, defaults, given, text, sizeof(text)), 0);
	CHECK_STR_EQ(text, "--batch-size 2048 --ubatch-size 512 (flash_attn off: no flag) --cont-batching");
}

static void test_trtllm(void)
{
	golden("trtllm", &params8,
	       "{\"max_num_seqs\": 256, \"max_num_batched_tokens\": 8192, \"tensor_parallel\": 4,"
	       " \"quantization\": \"fp8\", \"kv_cache_free_gpu_memory_fraction\": 0.9}",
	       (const char *const[]){ "trtllm-serve", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--host",
				      "127.0.0.1", "--port", "8123", "--backend", "pytorch", "--max_batch_size", "256",
				      "--max_num_tokens", "8192", "--tp_size", "4",
				      "--kv_cache_free_gpu_memory_fraction", "0.9", NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0,1,2,3", NULL });
	golden("trtllm", &params8, "{\"max_num_seqs\": 2048, \"tensor_parallel\": 1, \"quantization\": \"none\"}",
	       (const char *const[]){ "trtllm-serve", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--host",
				      "127.0.0.1", "--port", "8123", "--backend", "pytorch", "--max_batch_size", "2048",
				      "--tp_size", "1", NULL },
	       (const char *const[]){ "CUDA_VISIBLE_DEVICES=0", NULL });
	refused("trtllm", &params8, "{\"tensor_parallel\": 3}", "does not divide");
	refused("trtllm", &params8, "{\"quantization\": \"int8\"}", "does not support \"int8\"");
	refused("trtllm", &params8, "{\"tensor_parallel\": 1.5}", "whole number");
}

/* The study picks the checkpoint that goes with a quantization. */
static void test_checkpoints(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load("llamacpp");
	_cleanup_(study_freep) struct study *s = NULL;
	_cleanup_(cJSON_Deletep) cJSON *spec = NULL, *k = NULL;
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	struct study_options o = { .extra_knobs = p->extra_knobs };
	struct error err = { 0 };

	spec = J("{\"name\": \"llama-gguf\", \"engine\": \"llamacpp\","
		 " \"model\": {\"name\": \"/m/model-f16.gguf\", \"checkpoints\": {\"int8\": \"/m/model-Q8_0.gguf\"}},"
		 " \"quantizations\": [\"none\", \"int8\"],"
		 " \"gpu\": {\"type\": \"L4\", \"count\": 1, \"price_per_gpu_hour\": 0.8},"
		 " \"search_space\": {\"max_num_seqs\": [1, 2, 4], \"max_num_batched_tokens\": [256, 512]},"
		 " \"workload\": {\"input_len\": 128, \"output_len\": 32}, \"scenario\": \"offline\"}");
	CHECK_MSG(study_from_json(spec, &o, &s, &err) == 0, "%s", err.msg);
	CHECK_MSG(engine_profile_check_study(p, s, &err) == 0, "%s", err.msg);
	k = J("{\"max_num_seqs\": 4, \"quantization\": \"int8\"}");
	CHECK_MSG(engine_profile_render_study(p, s, k, NULL, 9000, &c, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(c.argv[2], "/m/model-Q8_0.gguf");
	/* the served name stays the study's model name */
	CHECK_STR_EQ(c.argv[4], "/m/model-f16.gguf");
	engine_command_done(&c);
	cJSON_Delete(k);
	k = J("{\"quantization\": \"awq\"}");
	CHECK(engine_profile_render_study(p, s, k, NULL, 9000, &c, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "model.checkpoints.awq");
}

static void refused_profile(const char *json, const char *want)
{
	struct engine_profile *p = NULL;
	struct error err = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *j = J(json);

	CHECK_MSG(engine_profile_from_json(j, "bad.json", &p, &err) < 0, "accepted: %s", json);
	CHECK_STR_CONTAINS(err.msg, "bad.json");
	CHECK_STR_CONTAINS(err.msg, want);
}

#define BASE "\"name\": \"x\", \"argv\": [\"srv\", \"--port\", \"{port}\"], \"health\": {\"path\": \"/health\"}"

static void test_format_extensions(void)
{
	refused_profile("{" BASE ", \"knobs\": {\"max_num_seqs\": {}}}", "knobs.max_num_seqs.flag: missing");
	refused_profile("{" BASE ", \"knobs\": {\"quantization\": {\"values\": {\"fp8\": \"fp8\"}}}}",
			"knobs.quantization.flag: missing");
	refused_profile("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": [\"--a\", \"b\"]}}}",
			"knobs.max_num_seqs.flag: \"b\" is not a flag");
	refused_profile("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": []}}}", "knobs.max_num_seqs.flag");
	refused_profile("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": \"--n\"}},"
			" \"derived\": [{\"flag\": \"--ctx\", \"product\": [\"max_num_sqs\", 4096]}]}",
			"derived[0].product: \"max_num_sqs\" is not a knob");
	refused_profile("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": \"--n\"}},"
			" \"derived\": [{\"flag\": \"--ctx\", \"product\": [\"max_num_seqs\", -1]}]}",
			"derived[0].product: expected knob names and numbers");
	refused_profile("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": \"--n\"}},"
			" \"derived\": [{\"flag\": \"--ctx\", \"product\": [4096]}]}",
			"derived[0].product: names no knob");
	refused_profile("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": \"--n\"}},"
			" \"derived\": [{\"flag\": \"ctx\", \"product\": [\"max_num_seqs\"]}]}",
			"derived[0].flag: \"ctx\" is not a flag");
	refused_profile("{" BASE ", \"knobs\": {}, \"help_command\": \"srv --help\"}", "help_command");
}

static void test_flags_list(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load("llamacpp");
	_cleanup_(freep) const char **flags = NULL;

	CHECK(engine_profile_flags(p, &flags) == 0);
	/* "999" after --n-gpu-layers (gpu_args) is a value, the program is not a
	 * flag; a value that is its own arguments names its flag. */
	check_strv((char **)flags,
		   (const char *const[]){ "--model", "--alias", "--host", "--port", "--metrics", "--n-gpu-layers",
					  "--parallel", "--batch-size", "--ubatch-size", "--threads", "--threads-batch",
					  "--flash-attn", "--cont-batching", "--no-cont-batching", "--model-draft",
					  "--draft-max", "--ctx-size", NULL });

	/* python3 -m sglang.launch_server: the interpreter's -m is not SGLang's flag. */
	_cleanup_(engine_profile_freep) struct engine_profile *sg = load("sglang");
	_cleanup_(freep) const char **sg_flags = NULL;

	CHECK(engine_profile_flags(sg, &sg_flags) == 0);
	CHECK_STR_EQ(sg_flags[0], "--model-path");
	for (size_t i = 0; sg_flags[i]; i++)
		CHECK_MSG(strcmp(sg_flags[i], "-m") != 0, "-m listed as SGLang's flag");
}

/* Every shipped profile loads, has a help and version command and a
 * health path; the ones that need no checkpoint per quantization are TP-able. */
static void test_all_load(void)
{
	static const char *const names[] = { "sim", "vllm", "sglang", "tgi", "llamacpp", "trtllm" };

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		_cleanup_(engine_profile_freep) struct engine_profile *p = load(names[i]);

		CHECK_MSG(p->version_command && p->version_command[0], "%s: no version_command", names[i]);
		CHECK_MSG(p->help_command && p->help_command[0], "%s: no help_command", names[i]);
		CHECK(p->health_path[0] == '/');
		CHECK_MSG(p->oom_patterns[0], "%s: no oom_patterns", names[i]);
		CHECK(p->startup_timeout_usec >= 60 * UINT64_C(1000000));
	}
}

int main(void)
{
	test_levers();
	test_all_load();
	test_sglang();
	test_tgi();
	test_llamacpp();
	test_trtllm();
	test_checkpoints();
	test_format_extensions();
	test_flags_list();
	return 0;
}
