/* test-prom.c — reading engines' /metrics through a name map (Prometheus
 * text and TensorRT-LLM's iteration statistics) and averaging scrapes. */
#include <errno.h>
#include <string.h>

#include "prom.h"
#include "tests.h"

static const char vllm_page[] = "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
				"# TYPE vllm:num_requests_running gauge\n"
				"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
				"vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 2.0\n"
				"vllm:num_requests_waiting{model_name=\"a \\\"quoted\\\" name, with {braces}\"} 7\n"
				"vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n"
				"vllm:num_preemptions_total{model_name=\"m\"} 10 1700000000000\n"
				"vllm:prompt_tokens_total{model_name=\"m\"} 4096\n"
				"vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 42\n"
				"process_cpu_seconds_total 12.5\r\n"
				"\n";

#define S(x) PROBE_SERIES_##x

static void test_parse_default(void)
{
	struct probe_prom_sample s;
	struct error err = { 0 };

	CHECK_INT_EQ(probe_prom_parse(vllm_page, strlen(vllm_page), NULL, &s, &err), 0);
	CHECK(s.have[S(RUNNING)] && s.have[S(WAITING)] && s.have[S(KV_USAGE)] && s.have[S(PREEMPTIONS)]);
	CHECK(s.v[S(RUNNING)] == 5.0); /* series summed */
	CHECK(s.v[S(WAITING)] == 7.0);
	CHECK(s.v[S(KV_USAGE)] == 0.25);
	CHECK(s.v[S(PREEMPTIONS)] == 10.0);
	CHECK(s.have[S(PROMPT_TOKENS)] && s.v[S(PROMPT_TOKENS)] == 4096);
	CHECK(!s.have[S(GENERATION_TOKENS)]);

	/* The newer name for KV usage wins over the deprecated one when both are there. */
	static const char both[] = "vllm:gpu_cache_usage_perc 0.1\nvllm:kv_cache_usage_perc 0.5\n";
	CHECK_INT_EQ(probe_prom_parse(both, strlen(both), NULL, &s, &err), 0);
	CHECK(s.have[S(KV_USAGE)] && s.v[S(KV_USAGE)] == 0.5 && !s.have[S(RUNNING)]);
	CHECK_INT_EQ(probe_prom_parse("", 0, NULL, &s, &err), 0);
	for (size_t i = 0; i < _PROBE_SERIES_MAX; i++)
		CHECK(!s.have[i]);

	/* llama.cpp's and TGI's names are in the default map too. */
	static const char llama[] = "llamacpp:requests_processing 4\nllamacpp:requests_deferred 2\n"
				    "llamacpp:tokens_predicted_total 900\n";
	CHECK_INT_EQ(probe_prom_parse(llama, strlen(llama), NULL, &s, &err), 0);
	CHECK(s.v[S(RUNNING)] == 4 && s.v[S(WAITING)] == 2 && s.v[S(GENERATION_TOKENS)] == 900);

	/* Not Prometheus text: refused with the line. */
	CHECK_INT_EQ(probe_prom_parse("<html>\n", 7, NULL, &s, &err), -EBADMSG);
	CHECK_STR_CONTAINS(err.msg, "line 1");
	CHECK(probe_prom_parse("a 1\nb{x=\"1\" 2\n", 14, NULL, &s, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "line 2");
	CHECK(probe_prom_parse("a fast\n", 7, NULL, &s, &err) < 0);
	CHECK(probe_prom_parse("a\n", 2, NULL, &s, &err) < 0);
	/* The buffer is a body as received, not a C string: a message quotes
	 * the bad line and never reads past len (here into "SECRET"). */
	static const char body[] = "vllm:num_requests_running 1\n<html>SECRET";
	CHECK_INT_EQ(probe_prom_parse(body, strlen(body) - 6, NULL, &s, &err), -EBADMSG);
	CHECK_STR_CONTAINS(err.msg, "line 2: not Prometheus text: \"<html>\"");
	CHECK(!strstr(err.msg, "SECRET"));
	CHECK(probe_prom_parse(body, strlen(body) - 12, NULL, &s, &err) == 0);
}

/* A profile's own map: only its names count, a ratio divides two metrics. */
static void test_parse_map(void)
{
	struct probe_metrics_map m;
	struct probe_prom_sample s;
	struct error err = { 0 };
	static const char page[] = "tgi_batch_current_size 6\ntgi_queue_size 3\n"
				   "vllm:num_requests_running 99\n"
				   "used_blocks{engine=\"0\"} 30\nused_blocks{engine=\"1\"} 10\nall_blocks 200\n";

	probe_metrics_map_init(&m);
	CHECK(probe_metrics_map_is_empty(&m));
	CHECK_INT_EQ(probe_metrics_map_add(&m, S(RUNNING), "tgi_batch_current_size", &err), 0);
	CHECK_INT_EQ(probe_metrics_map_add(&m, S(WAITING), "tgi_queue_size", &err), 0);
	CHECK_INT_EQ(probe_metrics_map_add(&m, S(KV_USAGE), "used_blocks / all_blocks", &err), 0);
	CHECK_STR_EQ(m.refs[S(KV_USAGE)][0].name, "used_blocks");
	CHECK_STR_EQ(m.refs[S(KV_USAGE)][0].per, "all_blocks");
	CHECK_INT_EQ(probe_prom_parse(page, strlen(page), &m, &s, &err), 0);
	CHECK(s.v[S(RUNNING)] == 6 && s.v[S(WAITING)] == 3);
	CHECK(s.have[S(KV_USAGE)] && fabs(s.v[S(KV_USAGE)] - 0.2) < 1e-12);

	CHECK(probe_metrics_map_add(&m, S(RUNNING), "bad name!", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "running: \"bad name!\"");
	CHECK(probe_metrics_map_add(&m, S(RUNNING), " / x", &err) == -EINVAL);
	for (int i = 0; i < 3; i++)
		CHECK_INT_EQ(probe_metrics_map_add(&m, S(PREEMPTIONS), "p", &err), 0);
	CHECK_INT_EQ(probe_metrics_map_add(&m, S(PREEMPTIONS), "p", &err), 0);
	CHECK(probe_metrics_map_add(&m, S(PREEMPTIONS), "p", &err) == -E2BIG);
	CHECK_INT_EQ(probe_series_from_string("kv_cache_usage"), S(KV_USAGE));
	CHECK(probe_series_from_string("kv") < 0);
}

/* TensorRT-LLM: the newest iteration of a JSON array. */
static void test_parse_trtllm(void)
{
	struct probe_metrics_map m;
	struct probe_prom_sample s;
	struct error err = { 0 };
	static const char body[] = "[{\"iter\":1,\"numActiveRequests\":1,\"numQueuedRequests\":0,"
				   "\"kvCacheStats\":{\"usedNumBlocks\":4,\"maxNumBlocks\":100}},"
				   "{\"iter\":2,\"numActiveRequests\":5,\"numQueuedRequests\":2,"
				   "\"kvCacheStats\":{\"usedNumBlocks\":25,\"maxNumBlocks\":100}}]";

	probe_metrics_map_init(&m);
	m.format = PROBE_METRICS_TRTLLM_JSON;
	CHECK_INT_EQ(probe_metrics_map_add(&m, S(RUNNING), "numActiveRequests", &err), 0);
	CHECK_INT_EQ(probe_metrics_map_add(&m, S(WAITING), "numQueuedRequests", &err), 0);
	CHECK_INT_EQ(
		probe_metrics_map_add(&m, S(KV_USAGE), "kvCacheStats.usedNumBlocks / kvCacheStats.maxNumBlocks", &err),
		0);
	CHECK_INT_EQ(probe_metrics_parse(body, strlen(body), &m, &s, &err), 0);
	CHECK(s.v[S(RUNNING)] == 5 && s.v[S(WAITING)] == 2 && s.v[S(KV_USAGE)] == 0.25);
	CHECK_INT_EQ(probe_metrics_parse("[]", 2, &m, &s, &err), 0);
	CHECK(!s.have[S(RUNNING)]);
	CHECK(probe_metrics_parse("{}", 2, &m, &s, &err) < 0);
	CHECK(probe_metrics_parse("# HELP x\n", 9, &m, &s, &err) < 0);
}

static void test_acc(void)
{
	struct probe_prom_acc a;
	struct probe_server_metrics m;
	struct probe_prom_sample s1 = { 0 }, s2 = { 0 }, s3 = { 0 };

	s1.have[S(RUNNING)] = s1.have[S(KV_USAGE)] = s1.have[S(PREEMPTIONS)] = s1.have[S(PROMPT_TOKENS)] = true;
	s1.v[S(RUNNING)] = 2, s1.v[S(KV_USAGE)] = 0.2, s1.v[S(PREEMPTIONS)] = 5, s1.v[S(PROMPT_TOKENS)] = 100;
	s2 = s1;
	s2.v[S(RUNNING)] = 6, s2.v[S(KV_USAGE)] = 0.6, s2.v[S(PREEMPTIONS)] = 9, s2.v[S(PROMPT_TOKENS)] = 400;
	/* The server restarted: its counter starts again from 0. */
	s3 = s2;
	s3.v[S(PROMPT_TOKENS)] = 50;
	s3.have[S(RUNNING)] = s3.have[S(KV_USAGE)] = false;

	probe_prom_acc_init(&a);
	probe_prom_acc_result(&a, &m);
	CHECK(!m.present); /* no samples: absent, not zero */
	probe_prom_acc_add(&a, &s1);
	probe_prom_acc_add(&a, &s2);
	probe_prom_acc_add(&a, &s3);
	probe_prom_acc_result(&a, &m);
	CHECK(m.present);
	CHECK_INT_EQ(m.samples, 3);
	CHECK(m.running_mean == 4 && m.running_peak == 6);
	CHECK(fabs(m.kv_usage_mean - 0.4) < 1e-12 && m.kv_usage_peak == 0.6);
	CHECK(m.preemptions == 4);
	CHECK(m.prompt_tokens == 350);
	CHECK(isnan(m.generation_tokens)); /* never exported: unknown, not 0 */
	CHECK(isnan(m.waiting_peak));      /* never exported: unknown, not 0 */
	/* one sample of a gauge is no peak (the saturation run: one
	 * sample before the load, peaks of 0 with 40 requests outstanding) */
	probe_prom_acc_init(&a);
	probe_prom_acc_add(&a, &s1);
	probe_prom_acc_add(&a, &s3);
	probe_prom_acc_result(&a, &m);
	CHECK(m.present && isnan(m.running_peak) && isnan(m.running_mean) && isnan(m.kv_usage_peak));
	CHECK(m.prompt_tokens == 50); /* counters: the increase over both samples */
}

int main(void)
{
	test_parse_default();
	test_parse_map();
	test_parse_trtllm();
	test_acc();
	return 0;
}
