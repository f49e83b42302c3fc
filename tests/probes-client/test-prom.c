/* test-prom.c — reading vLLM's /metrics text and averaging scrapes. */
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
				"vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 42\n"
				"process_cpu_seconds_total 12.5\r\n"
				"\n";

static void test_parse(void)
{
	struct probe_prom_sample s;
	struct error err = { 0 };

	CHECK_INT_EQ(probe_prom_parse(vllm_page, strlen(vllm_page), &s, &err), 0);
	CHECK(s.have_running && s.have_waiting && s.have_kv && s.have_preemptions);
	CHECK(s.running == 5.0); /* series summed */
	CHECK(s.waiting == 7.0);
	CHECK(s.kv_usage == 0.25);
	CHECK(s.preemptions == 10.0);

	/* The newer name for KV usage, and none of the metrics at all. */
	CHECK_INT_EQ(probe_prom_parse("vllm:kv_cache_usage_perc 0.5\n", 29, &s, &err), 0);
	CHECK(s.have_kv && s.kv_usage == 0.5 && !s.have_running);
	CHECK_INT_EQ(probe_prom_parse("", 0, &s, &err), 0);
	CHECK(!s.have_kv && !s.have_running && !s.have_waiting && !s.have_preemptions);

	/* Not Prometheus text: refused with the line. */
	CHECK_INT_EQ(probe_prom_parse("<html>\n", 7, &s, &err), -EBADMSG);
	CHECK_STR_CONTAINS(err.msg, "line 1");
	CHECK(probe_prom_parse("a 1\nb{x=\"1\" 2\n", 14, &s, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "line 2");
	CHECK(probe_prom_parse("a fast\n", 7, &s, &err) < 0);
	CHECK(probe_prom_parse("a\n", 2, &s, &err) < 0);

	/* The buffer is a body as received, not a C string: a message quotes
	 * the bad line and never reads past len (here into "SECRET"). */
	static const char body[] = "vllm:num_requests_running 1\n<html>SECRET";
	CHECK_INT_EQ(probe_prom_parse(body, strlen(body) - 6, &s, &err), -EBADMSG);
	CHECK_STR_CONTAINS(err.msg, "line 2: not Prometheus text: \"<html>\"");
	CHECK(!strstr(err.msg, "SECRET"));
	CHECK(probe_prom_parse(body, strlen(body) - 12, &s, &err) == 0);
}

static void test_acc(void)
{
	struct probe_prom_acc a;
	struct probe_server_metrics m;
	struct probe_prom_sample s1 = { .have_running = true,
					.running = 2,
					.have_kv = true,
					.kv_usage = 0.2,
					.have_preemptions = true,
					.preemptions = 5 };
	struct probe_prom_sample s2 = { .have_running = true,
					.running = 6,
					.have_kv = true,
					.kv_usage = 0.6,
					.have_preemptions = true,
					.preemptions = 9 };

	probe_prom_acc_init(&a);
	probe_prom_acc_result(&a, &m);
	CHECK(!m.present); /* no samples: absent, not zero */
	probe_prom_acc_add(&a, &s1);
	probe_prom_acc_add(&a, &s2);
	probe_prom_acc_result(&a, &m);
	CHECK(m.present);
	CHECK_INT_EQ(m.samples, 2);
	CHECK(m.running_mean == 4 && m.running_peak == 6);
	CHECK(fabs(m.kv_usage_mean - 0.4) < 1e-12 && m.kv_usage_peak == 0.6);
	CHECK(m.preemptions == 4);
	CHECK(m.waiting_peak == 0);
}

int main(void)
{
	test_parse();
	test_acc();
	return 0;
}
