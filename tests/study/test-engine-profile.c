/* Engine profiles: the shipped sim and vLLM profiles load from the source
 * tree, render the exact argv and environment a person would type for a set
 * of knob values (edge values included), refuse what the engine cannot run,
 * and broken profiles are refused with the file and the key named. */
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

static void check_argv(char **argv, const char *const *want)
{
	size_t i = 0;

	for (; want[i]; i++) {
		CHECK_MSG(argv[i], "argv ends at %zu, expected \"%s\"", i, want[i]);
		CHECK_STR_EQ(argv[i], want[i]);
	}
	CHECK_MSG(argv[i] == NULL, "extra argument \"%s\"", argv[i]);
}

static struct study *load_study(const char *file, const struct engine_profile *p)
{
	struct study_options o = { .extra_knobs = p->extra_knobs };
	struct error err = { 0 };
	struct study *s = NULL;
	char path[512];

	snprintf(path, sizeof(path), "%s/configs/studies/%s", TEST_SOURCE_ROOT, file);
	CHECK_MSG(study_load_file(path, &o, &s, &err) == 0, "%s", err.msg);
	return s;
}

static void test_vllm(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(study_freep) struct study *s = NULL;
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	struct error err = { 0 };
	cJSON *k;

	CHECK_MSG(engine_profile_find("vllm", NULL, &p, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(p->name, "vllm");
	CHECK(p->startup_timeout_usec == 1200 * UINT64_C(1000000));
	CHECK(p->port_mode == ENGINE_PORT_FREE);
	CHECK_STR_EQ(p->health_path, "/health");
	CHECK_STR_EQ(p->extra_knobs[0], "data_parallel");
	CHECK_STR_EQ(p->extra_knobs[2], "gpu_memory_utilization");
	s = load_study("vllm-h100-llama70b.json", p);
	CHECK_MSG(engine_profile_check_study(p, s, &err) == 0, "%s", err.msg);

	k = J("{\"max_num_seqs\": 128, \"max_num_batched_tokens\": 4096, \"quantization\": \"fp8\","
	      " \"tensor_parallel\": 4, \"gpu_memory_utilization\": 0.95}");
	CHECK_MSG(engine_profile_render_study(p, s, k, NULL, 8123, &c, &err) == 0, "%s", err.msg);
	check_argv(c.argv, (const char *const[]){ "vllm",
						  "serve",
						  "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
						  "--host",
						  "127.0.0.1",
						  "--port",
						  "8123",
						  "--served-model-name",
						  "meta-llama/Llama-3.1-70B-Instruct",
						  "--max-num-seqs",
						  "128",
						  "--max-num-batched-tokens",
						  "4096",
						  "--tensor-parallel-size",
						  "4",
						  "--quantization",
						  "fp8",
						  "--gpu-memory-utilization",
						  "0.95",
						  NULL });
	check_argv(c.env, (const char *const[]){ "VLLM_NO_USAGE_STATS=1", "CUDA_VISIBLE_DEVICES=0,1,2,3", NULL });
	_cleanup_(freep) char *shown = engine_command_format(&c);
	CHECK_STR_CONTAINS(shown, "VLLM_NO_USAGE_STATS=1 CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve "
				  "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8 --host 127.0.0.1");
	engine_command_done(&c);
	cJSON_Delete(k);

	/* Edge values: no quantization (no flag, base checkpoint), TP 1 (one GPU), the largest batch. */
	k = J("{\"max_num_seqs\": 512, \"max_num_batched_tokens\": 16384, \"quantization\": \"none\","
	      " \"tensor_parallel\": 1, \"gpu_memory_utilization\": 0.85}");
	CHECK_MSG(engine_profile_render_study(p, s, k, NULL, 9000, &c, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(c.argv[2], "meta-llama/Llama-3.1-70B-Instruct");
	for (size_t i = 0; c.argv[i]; i++)
		CHECK(strcmp(c.argv[i], "--quantization") != 0);
	check_argv(c.env, (const char *const[]){ "VLLM_NO_USAGE_STATS=1", "CUDA_VISIBLE_DEVICES=0", NULL });
	engine_command_done(&c);
	cJSON_Delete(k);

	/* AWQ maps to the Marlin kernel and its own checkpoint. */
	k = J("{\"quantization\": \"awq\"}");
	CHECK(engine_profile_render_study(p, s, k, NULL, 9000, &c, &err) == 0);
	CHECK_STR_EQ(c.argv[2], "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4");
	CHECK_STR_EQ(c.argv[10], "awq_marlin");
	engine_command_done(&c);
	cJSON_Delete(k);

	/* Refused: a quantization needing a checkpoint the study lacks, values and knobs the engine lacks. */
	k = J("{\"quantization\": \"int8\"}");
	CHECK(engine_profile_render_study(p, s, k, NULL, 9000, &c, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "model.checkpoints.int8");
	cJSON_Delete(k);
	k = J("{\"quantization\": \"int4\"}");
	CHECK(engine_profile_render_study(p, s, k, NULL, 9000, &c, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "\"int4\"");
	cJSON_Delete(k);
	k = J("{\"speculative_tokens\": 4}");
	CHECK(engine_profile_render_study(p, s, k, NULL, 9000, &c, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "speculative_tokens");
	cJSON_Delete(k);

	/* A value never becomes a flag: "vllm serve {model}" with a model
	 * named like a flag, and a string knob value that is one. */
	k = J("{\"max_num_seqs\": 64}");
	CHECK(engine_profile_render(p, &(struct engine_render_params){ .model = "--trust-remote-code", .port = 9000 },
				    k, &c, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "argv[2]: \"--trust-remote-code\" would be taken for a flag");
	cJSON_Delete(k);
	k = J("{\"quantization\": \"-x\"}");
	CHECK(engine_profile_render(p, &(struct engine_render_params){ .model = "m", .port = 9000 }, k, &c, &err) ==
	      -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "knob quantization: \"-x\" would be taken for a flag");
	cJSON_Delete(k);
}

static void test_sim(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(study_freep) struct study *s = NULL;
	_cleanup_(engine_command_done) struct engine_command c = { 0 };
	struct error err = { 0 };
	cJSON *k;

	CHECK_MSG(engine_profile_find("sim", TEST_SOURCE_ROOT "/configs/engines", &p, &err) == 0, "%s", err.msg);
	CHECK(p->port_mode == ENGINE_PORT_ANNOUNCE);
	s = load_study("sim-demo.json", p);
	CHECK_MSG(engine_profile_check_study(p, s, &err) == 0, "%s", err.msg);
	k = J("{\"max_num_seqs\": 32, \"max_num_batched_tokens\": 1024, \"quantization\": \"awq\", "
	      "\"tensor_parallel\": 2}");
	CHECK_MSG(engine_profile_render_study(p, s, k, NULL, 0, &c, &err) == 0, "%s", err.msg);
	check_argv(c.argv, (const char *const[]){ "goodput-sim",
						  "serve",
						  "--model",
						  "llama-3.1-70b",
						  "--gpu",
						  "L40S",
						  "--gpus",
						  "4",
						  "--host",
						  "127.0.0.1",
						  "--port",
						  "0",
						  "--served-model-name",
						  "llama-3.1-70b",
						  "--max-num-seqs",
						  "32",
						  "--max-num-batched-tokens",
						  "1024",
						  "--tensor-parallel-size",
						  "2",
						  "--quantization",
						  "awq",
						  NULL });
	/* its GPUs through gpu_env: the first tensor_parallel of them by default */
	CHECK(c.env && c.env[0] && c.env[1] == NULL);
	CHECK_STR_EQ(c.env[0], "CUDA_VISIBLE_DEVICES=0,1");
	engine_command_done(&c);
	/* a trial side by side with others: its own GPUs */
	CHECK(engine_profile_render_trial(p, s, k, NULL, 0, (const unsigned[]){ 2, 3 }, 2, &c, &err) == 0);
	CHECK_STR_EQ(c.env[0], "CUDA_VISIBLE_DEVICES=2,3");
	engine_command_done(&c);
	CHECK(engine_profile_render_trial(p, s, k, NULL, 0, (const unsigned[]){ 2 }, 1, &c, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "tensor_parallel");
	/* the study's engine_binary and engine_args: the program replaced, the
	 * arguments after every flag the profile renders, verbatim ('$' stays) */
	s->engine_binary = "/opt/sim/bin/goodput-sim";
	s->engine_args = (const char *[]){ "--seed", "$HOME", "", NULL };
	CHECK_MSG(engine_profile_render_study(p, s, k, NULL, 0, &c, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(c.argv[0], "/opt/sim/bin/goodput-sim");
	{
		size_t n = 0;
		_cleanup_(freep) char *json = NULL;
		_cleanup_(engine_command_done) struct engine_command back = { 0 };

		while (c.argv[n])
			n++;
		CHECK(n == 25);
		CHECK_STR_EQ(c.argv[21], "awq"); /* the profile's last flag */
		CHECK_STR_EQ(c.argv[22], "--seed");
		CHECK_STR_EQ(c.argv[23], "$HOME");
		CHECK_STR_EQ(c.argv[24], "");
		/* what the store keeps of a launch reads back the same */
		CHECK(engine_command_to_json(&c, &json) == 0);
		CHECK(engine_command_from_json(json, &back) == 0);
		for (size_t i = 0; i <= n; i++)
			CHECK(back.argv[i] == c.argv[i] || strcmp(back.argv[i], c.argv[i]) == 0);
		CHECK_STR_EQ(back.env[0], c.env[0]);
		CHECK(engine_command_from_json("{\"argv\": []}", &back) == -EINVAL);
	}
	s->engine_binary = NULL;
	s->engine_args = NULL;
	engine_command_done(&c);
	cJSON_Delete(k);
	/* A study knob the profile lacks is caught before any deployment. */
	CHECK(engine_profile_find("no-such-engine", NULL, &p, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "no-such-engine");
	CHECK(engine_profile_find(".hidden", NULL, &p, &err) == -EINVAL);
	/* A name with a slash is a file. */
	CHECK(engine_profile_find("/nonexistent/x.json", NULL, &p, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/x.json");
}

static void test_format(void)
{
	struct engine_command c = { .argv = (char *[]){ (char *)"srv", (char *)"--name", (char *)"it's a model",
							(char *)"", (char *)"$HOME;rm", NULL },
				    .env = (char *[]){ (char *)"A=x y", (char *)"B=plain", NULL } };
	_cleanup_(freep) char *s = engine_command_format(&c);

	CHECK_STR_EQ(s, "A='x y' B=plain srv --name 'it'\\''s a model' '' '$HOME;rm'");
}

static void refused(const char *json, const char *want)
{
	struct engine_profile *p = NULL;
	struct error err = { 0 };
	cJSON *j = J(json);

	CHECK_MSG(engine_profile_from_json(j, "bad.json", &p, &err) < 0, "accepted: %s", json);
	CHECK_STR_CONTAINS(err.msg, "bad.json");
	CHECK_STR_CONTAINS(err.msg, want);
	cJSON_Delete(j);
}

#define BASE "\"name\": \"x\", \"argv\": [\"srv\", \"--port\", \"{port}\"], \"health\": {\"path\": \"/health\"}"

static void test_invalid_profiles(void)
{
	refused("{" BASE ", \"knobs\": {}, \"helth\": 1}", "helth: unknown key");
	refused("{\"name\": \"x\", \"argv\": [\"srv\"], \"knobs\": {}}", "health: missing");
	refused("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flg\": \"--x\"}}}", "knobs.max_num_seqs.flg: unknown key");
	refused("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": \"x\"}}}", "knobs.max_num_seqs.flag");
	refused("{" BASE ", \"knobs\": {\"quantization\": {\"flag\": \"--q\", \"values\": {\"fp9\": \"x\"}}}}",
		"knobs.quantization.values.fp9: unknown quantization");
	refused("{\"name\": \"x\", \"argv\": [\"srv\", \"{prot}\"], \"health\": {\"path\": \"/h\"}, \"knobs\": {}}",
		"argv[1]: \"{prot}\": unknown placeholder");
	refused("{" BASE ", \"knobs\": {}, \"port\": {\"mode\": \"announce\"}}", "port.announce_prefix");
	refused("{" BASE ", \"knobs\": {}, \"startup_timeout\": 0}", "startup_timeout");
	refused("{" BASE ", \"knobs\": {}, \"env\": {\"A\": 1}}", "env.A");
	refused("{" BASE ", \"knobs\": {}, \"Name\": \"y\"}", "Name: unknown key");
	refused("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": \"--a\"}, \"max_num_seqs\": {\"flag\": \"--b\"}}}",
		"knobs.max_num_seqs: duplicate key");
	refused("{" BASE ", \"knobs\": {\"Max\": {\"flag\": \"--a\"}}}", "knobs.Max: knob names are [a-z0-9_]");
	refused("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": \"--a\", \"checkpoint_required\": [\"fp8\"]}}}",
		"knobs.max_num_seqs.checkpoint_required: only for the quantization knob");
	refused("{" BASE ", \"knobs\": {\"quantization\": {\"flag\": \"--q\", \"checkpoint_required\": [\"fp9\"]}}}",
		"knobs.quantization.checkpoint_required[0]: expected one of");
	refused("{" BASE ", \"knobs\": {}, \"stop_timeout\": \"30s\"}",
		"stop_timeout: expected a number in [0.1, 3600]");
	refused("{" BASE ", \"knobs\": {\"max_num_seqs\": {\"flag\": \"--a\"}},"
		" \"derived\": [{\"flag\": \"--ctx\", \"product\": [4096]}]}",
		"derived[0].product: names no knob");
	refused("{" BASE ", \"knobs\": {}, \"derived\": [{\"product\": [4096]}]}", "derived[0].flag: missing");
	refused("{" BASE ", \"knobs\": {}, \"metrics\": {\"path\": \"metrics\"}}",
		"metrics.path: \"metrics\" does not start");
	refused("{" BASE ", \"knobs\": {\"max_model_len\": {}}}", "knobs.max_model_len.flag: missing");
	refused("{" BASE ", \"knobs\": {}, \"metrics\": {\"series\": {\"runing\": \"x\"}}}",
		"metrics.series.runing: unknown series");
	refused("{" BASE ", \"knobs\": {}, \"metrics\": {\"series\": {\"running\": \"a b\"}}}",
		"metrics.series: running: \"a b\" is not a metric name");
	refused("{" BASE ", \"knobs\": {}, \"metrics\": {\"format\": \"json\"}}", "metrics.format");
	refused("{" BASE ", \"knobs\": {}, \"version_pattern\": \"(unclosed\"}",
		"version_pattern: \"(unclosed\" is not a regular expression");
	refused("{" BASE ", \"knobs\": {}, \"failure_patterns\": [{\"cause\": \"disk\", \"pattern\": \"x\"}]}",
		"failure_patterns[0].cause");
	refused("{" BASE ", \"knobs\": {}, \"failure_patterns\": [{\"cause\": \"oom\", \"pattern\": \"[\"}]}",
		"failure_patterns[0].pattern");
	refused("{" BASE ", \"knobs\": {}, \"startup_log\": [{\"phase\": \"Weights\", \"pattern\": \"x\"}]}",
		"startup_log[0].phase");
	refused("{\"name\": \"x\", \"argv\": [\"srv\"], \"knobs\": {}, \"health\": {\"path\": \"/h\", \"ready\": "
		"[700]}}",
		"health.ready[0]");
}

int main(void)
{
	test_vllm();
	test_sim();
	test_invalid_profiles();
	test_format();
	return 0;
}
