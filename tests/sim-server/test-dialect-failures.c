/* test-dialect-failures.c — goodput-sim's start-up failures, in each
 * dialect, are what the shipped engine profiles read back: a configuration
 * the emulated engine refuses (given with the engine's own flags) fails for
 * the expected cause in the sim's memory model, and the text the dialect
 * prints for it is classified by the engine's profile as that cause, with
 * vLLM's and TensorRT-LLM's suggested max_model_len read back exactly. The
 * engines' real texts beside these are tests/study/failures (test-engine-
 * failures). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialect.h"
#include "engine-profile.h"
#include "macro.h"
#include "server.h"
#include "tests.h"

struct sim_run {
	struct sim_server_config sc;
	struct sim_engine_config ec;
	struct sim_startup_check check;
	char *text; /* the dialect's failure text */
};

/* Parses argv (NULL-terminated, argv[0] the program name) as goodput-sim
 * does and prints its log as the server does for a configuration that does
 * not start: the lines of the phases before the failure, then the failure. */
static void run(const char *const *argv, struct sim_run *ret)
{
	struct error err = { 0 };
	struct sim_timeline tl;
	size_t len = 0;
	FILE *f;
	int argc = 0, r;

	while (argv[argc])
		argc++;
	sim_server_config_init(&ret->sc);
	sim_engine_config_init(&ret->ec);
	r = sim_args_parse(argc, (char **)argv, &ret->sc, &ret->ec, &ret->sc.dialect);
	CHECK_MSG(r == 0, "%s %s: parse returned %d", argv[0], argv[1], r);
	(void)sim_engine_check_startup(&ret->ec, &ret->check, &err);
	CHECK_INT_EQ(sim_engine_config_resolve(&ret->ec, &err), 0);
	ret->text = NULL;
	f = open_memstream(&ret->text, &len);
	CHECK(f);
	sim_timeline_build(&ret->ec, NULL, ret->check.mem.weights, 60 * 1000000, &tl);
	for (int ph = 0; ph < (int)sim_dialect_failure_phase(&ret->check); ph++)
		sim_dialect_print_phase(f, &ret->sc.dialect, &ret->ec, NULL, &tl, (enum sim_phase)ph,
					"http://127.0.0.1:8000");
	sim_dialect_print_failure(f, &ret->sc.dialect, &ret->ec, &ret->check, err.msg);
	CHECK(fclose(f) == 0);
}

static struct engine_profile *load(const char *name)
{
	struct engine_profile *p = NULL;
	struct error err = { 0 };

	CHECK_MSG(engine_profile_find(name, TEST_SOURCE_ROOT "/configs/engines", &p, &err) == 0, "%s", err.msg);
	return p;
}

/* argv fails for sim_cause and the profile reads want_cause from its text;
 * returns the suggested length the profile read. */
static uint64_t expect(const char *profile, const char *const *argv, enum sim_startup_cause sim_cause,
		       enum engine_failure_cause want)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load(profile);
	enum engine_failure_cause cause;
	uint64_t suggested = 0;
	struct sim_run s;

	run(argv, &s);
	CHECK_MSG(s.check.cause == sim_cause, "%s: sim cause %d, expected %d", profile, s.check.cause, sim_cause);
	engine_profile_classify_failure(p, s.text, &cause, &suggested);
	CHECK_MSG(cause == want, "%s: %s classified as %s, expected %s:\n%s", profile, argv[1],
		  engine_failure_cause_to_string(cause), engine_failure_cause_to_string(want), s.text);
	if (sim_cause == SIM_STARTUP_KV_CACHE && suggested)
		CHECK_MSG(suggested == s.check.est_max_model_len, "%s: suggested %llu, the sim estimated %llu", profile,
			  (unsigned long long)suggested, (unsigned long long)s.check.est_max_model_len);
	free(s.text);
	return suggested;
}

#define ARGV(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void test_vllm(void)
{
	expect("vllm", ARGV("vllm", "serve", "llama-3.1-70b", "--gpu", "L40S"), SIM_STARTUP_WEIGHTS,
	       ENGINE_FAILURE_WEIGHTS);
	CHECK(expect("vllm",
		     ARGV("vllm", "serve", "llama-3.1-8b", "--gpu", "A100", "--max-model-len", "131072",
			  "--gpu-memory-utilization", "0.3"),
		     SIM_STARTUP_KV_CACHE, ENGINE_FAILURE_KV_CACHE) > 0);
	expect("vllm", ARGV("vllm", "serve", "llama-3.1-8b", "--gpu", "L40S", "--gpu-memory-utilization", "0.3"),
	       SIM_STARTUP_CACHE_BLOCKS, ENGINE_FAILURE_CACHE_BLOCKS);
	/* the sim profile reads vLLM's words too */
	expect("sim", ARGV("goodput-sim", "--model", "llama-3.1-70b", "--gpu", "L40S"), SIM_STARTUP_WEIGHTS,
	       ENGINE_FAILURE_WEIGHTS);
}

static void test_llamacpp(void)
{
	char ctx[32];
	bool found = false;

	expect("llamacpp", ARGV("llama-server", "-m", "/models/llama-3.1-70b-F16.gguf", "--gpu", "L40S"),
	       SIM_STARTUP_WEIGHTS, ENGINE_FAILURE_WEIGHTS);
	CHECK(expect("llamacpp",
		     ARGV("llama-server", "-m", "/models/llama-3.1-8b-Q8_0.gguf", "--gpu", "L40S", "-c", "1048576",
			  "-np", "8"),
		     SIM_STARTUP_KV_CACHE, ENGINE_FAILURE_KV_CACHE) == 0);
	/* A context that just fits leaves no room for the compute buffers. */
	for (unsigned c = 400000; c > 100000 && !found; c -= 1000) {
		struct sim_run s;

		snprintf(ctx, sizeof(ctx), "%u", c);
		run(ARGV("llama-server", "-m", "/models/llama-3.1-8b-Q8_0.gguf", "--gpu", "L40S", "-c", ctx), &s);
		found = s.check.cause == SIM_STARTUP_CACHE_BLOCKS;
		free(s.text);
	}
	CHECK_MSG(found, "no context leaves too little for llama.cpp's compute buffers");
	expect("llamacpp", ARGV("llama-server", "-m", "/models/llama-3.1-8b-Q8_0.gguf", "--gpu", "L40S", "-c", ctx),
	       SIM_STARTUP_CACHE_BLOCKS, ENGINE_FAILURE_CACHE_BLOCKS);
}

static void test_sglang(void)
{
	expect("sglang",
	       ARGV("python3", "-m", "sglang.launch_server", "--model-path", "llama-3.1-70b", "--gpu", "L40S"),
	       SIM_STARTUP_WEIGHTS, ENGINE_FAILURE_WEIGHTS);
	expect("sglang",
	       ARGV("python3", "-m", "sglang.launch_server", "--model-path", "llama-3.1-8b", "--gpu", "L40S",
		    "--mem-fraction-static", "0.3"),
	       SIM_STARTUP_CACHE_BLOCKS, ENGINE_FAILURE_CACHE_BLOCKS);
}

static void test_tgi(void)
{
	expect("tgi", ARGV("text-generation-launcher", "--model-id", "llama-3.1-70b", "--gpu", "L40S"),
	       SIM_STARTUP_WEIGHTS, ENGINE_FAILURE_WEIGHTS);
	expect("tgi",
	       ARGV("text-generation-launcher", "--model-id", "llama-3.1-8b", "--gpu", "A100", "--max-total-tokens",
		    "131072", "--max-input-tokens", "131000", "--max-batch-prefill-tokens", "131072",
		    "--cuda-memory-fraction", "0.4"),
	       SIM_STARTUP_KV_CACHE, ENGINE_FAILURE_KV_CACHE);
	expect("tgi",
	       ARGV("text-generation-launcher", "--model-id", "llama-3.1-8b", "--gpu", "L40S", "--cuda-memory-fraction",
		    "0.3"),
	       SIM_STARTUP_CACHE_BLOCKS, ENGINE_FAILURE_CACHE_BLOCKS);
}

static void test_trtllm(void)
{
	expect("trtllm", ARGV("trtllm-serve", "serve", "llama-3.1-70b", "--gpu", "L40S"), SIM_STARTUP_WEIGHTS,
	       ENGINE_FAILURE_WEIGHTS);
	CHECK(expect("trtllm",
		     ARGV("trtllm-serve", "serve", "llama-3.1-8b", "--gpu", "L40S", "--max_seq_len", "131072",
			  "--kv_cache_free_gpu_memory_fraction", "0.1", "--fail_fast_on_attention_window_too_large"),
		     SIM_STARTUP_KV_CACHE, ENGINE_FAILURE_KV_CACHE) > 0);
}

int main(void)
{
	test_vllm();
	test_llamacpp();
	test_sglang();
	test_tgi();
	test_trtllm();
	return 0;
}
