/* test-engine-failures.c — the shipped engine profiles read the engines'
 * own words: every start-up failure in tests/study/failures/ is classified
 * by its engine's profile (cause, and the suggested max_model_len where the
 * engine prints one), versions are parsed as the engines print them, health
 * answers mean what each engine means, and start-up lines give phases. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine-profile.h"
#include "macro.h"
#include "tests.h"

#define FAILURES TEST_SOURCE_ROOT "/tests/study/failures"

static struct engine_profile *load(const char *name)
{
	struct engine_profile *p = NULL;
	struct error err = { 0 };

	CHECK_MSG(engine_profile_find(name, TEST_SOURCE_ROOT "/configs/engines", &p, &err) == 0, "%s", err.msg);
	return p;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0;

	CHECK_MSG(f, "%s: %s", path, strerror(errno));
	buf = calloc(1, 1 << 20);
	CHECK(buf);
	len = fread(buf, 1, (1 << 20) - 1, f);
	buf[len] = 0;
	fclose(f);
	return buf;
}

/* "vllm-kv_cache-87840.log" → engine "vllm", cause "kv_cache", length 87840. */
static void classify_fixture(const char *file)
{
	char engine[32], cause[32], path[512];
	const char *dash = strchr(file, '-'), *rest;
	enum engine_failure_cause got;
	uint64_t len = 0, want_len = 0;
	_cleanup_(freep) char *text = NULL;
	size_t n;

	CHECK_MSG(dash, "%s: not ENGINE-CAUSE.log", file);
	snprintf(engine, sizeof(engine), "%.*s", (int)(dash - file), file);
	rest = dash + 1;
	n = strcspn(rest, "-.");
	snprintf(cause, sizeof(cause), "%.*s", (int)n, rest);
	if (rest[n] == '-')
		want_len = strtoull(rest + n + 1, NULL, 10);

	_cleanup_(engine_profile_freep) struct engine_profile *p = load(engine);
	snprintf(path, sizeof(path), "%s/%s", FAILURES, file);
	text = read_file(path);
	engine_profile_classify_failure(p, text, &got, &len);
	CHECK_MSG(strcmp(engine_failure_cause_to_string(got), cause) == 0, "%s: classified as %s", file,
		  engine_failure_cause_to_string(got));
	if (strcmp(cause, "kv_cache") == 0)
		CHECK_MSG(len == want_len, "%s: suggested length %llu, expected %llu", file, (unsigned long long)len,
			  (unsigned long long)want_len);
	else
		CHECK_INT_EQ(len, 0);
}

static void test_fixtures(void)
{
	DIR *d = opendir(FAILURES);
	struct dirent *de;
	unsigned n = 0, causes = 0;
	bool seen[_ENGINE_FAILURE_MAX] = { false };

	CHECK(d);
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len < 5 || strcmp(de->d_name + len - 4, ".log") != 0)
			continue;
		classify_fixture(de->d_name);
		for (int c = 1; c < _ENGINE_FAILURE_MAX; c++)
			if (strstr(de->d_name, engine_failure_cause_names[c]))
				seen[c] = true;
		n++;
	}
	closedir(d);
	for (int c = 1; c < _ENGINE_FAILURE_MAX; c++)
		causes += seen[c];
	/* Every engine, and every cause but the catch-all, has a captured text. */
	CHECK_MSG(n >= 16, "only %u fixtures", n);
	CHECK_INT_EQ(causes, 4);
}

/* Lines that are not failures, and the phase scoping of patterns. */
static void test_not_failures(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *v = load("vllm");
	enum engine_failure_cause c;
	uint64_t len;

	engine_profile_classify_failure(v, "INFO Starting to load model x...\nINFO Model loading took 1 GiB and 2 s\n",
					&c, &len);
	CHECK_INT_EQ(c, ENGINE_FAILURE_NONE);
	engine_profile_classify_failure(v, "", &c, &len);
	CHECK_INT_EQ(c, ENGINE_FAILURE_NONE);
	/* A CUDA OOM with no phase around it is out of memory, cause untold. */
	engine_profile_classify_failure(v, "torch.OutOfMemoryError: CUDA out of memory.\n", &c, &len);
	CHECK_INT_EQ(c, ENGINE_FAILURE_OOM);
	/* The KV check without vLLM's estimate: the cause, no length. */
	engine_profile_classify_failure(
		v,
		"ValueError: To serve at least one request with the models's max seq len (9), "
		"(1.00 GiB KV cache is needed, which is larger than the available KV cache memory "
		"(0.50 GiB). Try increasing `gpu_memory_utilization`\n",
		&c, &len);
	CHECK_INT_EQ(c, ENGINE_FAILURE_KV_CACHE);
	CHECK_INT_EQ(len, 0);
}

static void check_version(const char *engine, const char *output, const char *want)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = load(engine);
	char buf[128];

	CHECK_MSG(engine_profile_parse_version(p, output, buf, sizeof(buf)) == (want != NULL), "%s: %s", engine,
		  output);
	if (want)
		CHECK_STR_EQ(buf, want);
}

static void test_versions(void)
{
	/* llama.cpp writes the build and then the compiler: the build is the version. */
	check_version("llamacpp",
		      "version: 4748 (c392e5094)\nbuilt with cc (Debian 12.2.0-14) 12.2.0 for x86_64-linux-gnu\n",
		      "4748 (c392e5094)");
	check_version("vllm", "INFO 08-20 10:00:00 [__init__.py:241] Automatically detected platform cuda.\n0.10.1.1\n",
		      "0.10.1.1");
	check_version("tgi", "text-generation-launcher 3.3.4\n", "3.3.4");
	check_version("trtllm", "[TensorRT-LLM] TensorRT-LLM version: 1.0.0\n1.0.0\n", "1.0.0");
	check_version("sglang", "0.4.6.post1\n", "0.4.6.post1");
	check_version("sim", "goodput-sim 0.1.0\n", "0.1.0");
	check_version("llamacpp", "error: unknown argument\n", NULL);
	/* Without a pattern: the last non-empty line, as before. */
	check_version("sim", "", NULL);
	char buf[64];
	CHECK(engine_profile_parse_version(NULL, "banner\n 1.2.3 \n\n", buf, sizeof(buf)) == 1);
	CHECK_STR_EQ(buf, "1.2.3");
}

static void test_health(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *l = load("llamacpp");
	_cleanup_(engine_profile_freep) struct engine_profile *v = load("vllm");

	CHECK_INT_EQ(engine_profile_health_state(l, 200), ENGINE_HEALTH_READY);
	CHECK_INT_EQ(engine_profile_health_state(l, 503), ENGINE_HEALTH_LOADING);
	CHECK_INT_EQ(engine_profile_health_state(l, 500), ENGINE_HEALTH_UNHEALTHY);
	CHECK_INT_EQ(engine_profile_health_state(v, 200), ENGINE_HEALTH_READY);
	CHECK_INT_EQ(engine_profile_health_state(v, 503), ENGINE_HEALTH_UNHEALTHY);
	CHECK_INT_EQ(engine_profile_health_state(NULL, 200), ENGINE_HEALTH_READY);
}

struct phase_log {
	char names[8][32];
	double secs[8];
	unsigned n;
};

static void on_phase(const char *phase, double seconds, void *userdata)
{
	struct phase_log *pl = userdata;

	CHECK(pl->n < 8);
	snprintf(pl->names[pl->n], sizeof(pl->names[0]), "%s", phase);
	pl->secs[pl->n++] = seconds;
}

static void test_phases(void)
{
	_cleanup_(engine_profile_freep) struct engine_profile *v = load("vllm");
	struct phase_log pl = { 0 };
	/* Lines from vLLM issue #20264's start-up log. */
	static const char log[] =
		"INFO 06-19 23:05:01 [loader.py:447] Loading weights took 0.69 seconds\n"
		"INFO 06-19 23:05:01 [gpu_model_runner.py:1273] Model loading took 3.4213 GiB and 0.902026 seconds\n"
		"INFO 06-19 23:05:18 [monitor.py:33] torch.compile takes 7.51 s in total\n"
		"INFO 06-19 23:05:18 [kv_cache_utils.py:578] GPU KV cache size: 613,024 tokens\n"
		"INFO 06-19 23:05:35 [gpu_model_runner.py:1608] Graph capturing finished in 17 secs, took 0.48 GiB\n"
		"INFO 06-19 23:05:35 [core.py:162] init engine (profile, create kv cache, warmup model) took 34.11 "
		"seconds\n"
		"INFO:     Application startup complete.\n";

	engine_profile_startup_phases(v, log, on_phase, &pl);
	CHECK_INT_EQ(pl.n, 6);
	CHECK_STR_EQ(pl.names[0], "weights");
	CHECK(pl.secs[0] == 0.69);
	CHECK_STR_EQ(pl.names[1], "model_loaded");
	CHECK(pl.secs[1] == 0.902026);
	CHECK_STR_EQ(pl.names[2], "compile");
	CHECK(pl.secs[2] == 7.51);
	CHECK_STR_EQ(pl.names[3], "graphs");
	CHECK(pl.secs[3] == 17);
	CHECK_STR_EQ(pl.names[4], "engine_init");
	CHECK(pl.secs[4] == 34.11);
	CHECK_STR_EQ(pl.names[5], "ready");
	CHECK(isnan(pl.secs[5]));
}

/* A profile with a pattern (version_pattern) as given. */
static int profile_with_pattern(const char *pattern, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j =
		cJSON_Parse("{\"name\": \"x\", \"argv\": [\"srv\", \"--port\", \"{port}\"], \"knobs\": {}, "
			    "\"health\": {\"path\": \"/health\"}}");
	struct engine_profile *p = NULL;
	int r;

	CHECK(j && cJSON_AddStringToObject(j, "version_pattern", pattern));
	r = engine_profile_from_json(j, "x.json", &p, err);
	engine_profile_free(p);
	return r;
}

/* Patterns whose compilation would take gigabytes (glibc copies the tree
 * under each nested repetition) are refused; the engines' own are not. */
static void test_costly_patterns(void)
{
	struct error err = { 0 };

	CHECK_INT_EQ(profile_with_pattern("^([0-9]+\\.[0-9]+\\.[0-9]+[^ ]*)$", &err), 0);
	CHECK_INT_EQ(profile_with_pattern("version: ([0-9]+ \\([0-9a-f]+\\))", &err), 0);
	CHECK_INT_EQ(profile_with_pattern("[0-9]{1,8}(x|y){2}", &err), 0);
	CHECK_INT_EQ(profile_with_pattern("((((((((((((((((((a+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+", &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "repeats too much");
	CHECK_INT_EQ(profile_with_pattern("(a{1000}){1000}", &err), -EINVAL);
	CHECK_INT_EQ(profile_with_pattern("([]+{]{300}){300}", &err), -EINVAL);
	CHECK_INT_EQ(profile_with_pattern("[]+{]{300}(b{300})", &err), 0);
	CHECK_INT_EQ(profile_with_pattern("[[:digit:]]+ [[:alpha:]]+", &err), 0);
	/* a run of stars after one character took regcomp 1.9 s (100) */
	CHECK_INT_EQ(profile_with_pattern("^g****************************************************************", &err),
		     -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "adjacent repetition operators");
	CHECK_INT_EQ(profile_with_pattern("took ([0-9.]+)+? s", &err), -EINVAL);
	CHECK_INT_EQ(profile_with_pattern("a{2}*", &err), -EINVAL);
	CHECK_INT_EQ(profile_with_pattern("[*+?]+ \\*+ (a*)* a{2}b*", &err), 0);
}

int main(void)
{
	test_fixtures();
	test_not_failures();
	test_versions();
	test_health();
	test_phases();
	test_costly_patterns();
	return 0;
}
