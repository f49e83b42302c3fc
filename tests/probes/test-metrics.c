/* A load point's figures as vLLM's serving benchmark defines them, on
 * hand-built request results; the SLA grammar; the result JSON round trip and
 * the printed table. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "metrics.h"
#include "tests.h"

#define CLOSE(a, b)                                                                                                    \
	do {                                                                                                           \
		double _x = (a), _y = (b);                                                                             \
		CHECK_MSG(fabs(_x - _y) <= 1e-9 * fmax(1, fabs(_y)), "%.17g != %.17g", _x, _y);                        \
	} while (0)

static uint64_t gaps[10] = { 100000, 100000, 100000, 100000, 100000, 100000, 100000, 100000, 100000, 100000 };

/* r0: 11 tokens, TTFT 100 ms, E2E 1100 ms (TPOT 100 ms), ten 100 ms gaps;
 * r1: one token at 200 ms; r2: failed with HTTP 500. */
static void build(struct probe_request_result r[3])
{
	r[0] = (struct probe_request_result){ .index = 0,
					      .success = true,
					      .http_status = 200,
					      .send_usec = 0,
					      .ttft_usec = 100000,
					      .e2e_usec = 1100000,
					      .input_tokens = 50,
					      .output_tokens = 11,
					      .itl_usec = gaps,
					      .n_itl = 10 };
	r[1] = (struct probe_request_result){ .index = 1,
					      .success = true,
					      .http_status = 200,
					      .send_usec = 500000,
					      .ttft_usec = 200000,
					      .e2e_usec = 200000,
					      .input_tokens = 30,
					      .output_tokens = 1 };
	r[2] = (struct probe_request_result){ .index = 2,
					      .success = false,
					      .http_status = 500,
					      .send_usec = 900000,
					      .e2e_usec = 5000,
					      .input_tokens = 40 };
}

static void test_percentiles(void)
{
	/* expected: numpy's linear method, computed by hand in python3 as
	 * s[lo] + (s[lo+1]-s[lo])*t on the sorted list (numpy is not installed);
	 * mean/std (population) likewise: 26.178571428571427, 32.732332826196455 */
	double x[] = { 0.5, 3.5, 7.25, 12.0, 18.0, 42.0, 100.0 };

	CLOSE(probe_percentile_sorted(x, 7, 50), 12.0);
	CLOSE(probe_percentile_sorted(x, 7, 90), 65.2);
	CLOSE(probe_percentile_sorted(x, 7, 99), 96.52);
	CLOSE(probe_percentile_sorted(x, 7, 99.9), 99.652);
	CLOSE(probe_percentile_sorted(x, 7, 0), 0.5);
	CLOSE(probe_percentile_sorted(x, 7, 100), 100.0);
	CLOSE(probe_percentile_sorted(x, 7, 33.3), 7.2425);
	CHECK(probe_percentile_sorted(x, 0, 50) == 0);
	CHECK(probe_percentile_sorted(x, 1, 99) == 0.5);

	/* the selection gives the same figures from any order */
	{
		static const double ps[] = { 0, 1, 33.3, 50, 90, 99, 99.9, 100 };
		double shuffled[] = { 42.0, 0.5, 100.0, 12.0, 7.25, 18.0, 3.5 }, y[7];

		for (size_t i = 0; i < ELEMENTSOF(ps); i++) {
			memcpy(y, shuffled, sizeof(y));
			CHECK_MSG(probe_percentile_select(y, 7, ps[i]) == probe_percentile_sorted(x, 7, ps[i]), "p%g",
				  ps[i]);
		}
		CHECK(probe_percentile_select(y, 0, 50) == 0);
		CHECK(probe_percentile_select(y, 1, 99) == y[0]);
	}
	/* ... and from arrays long enough for the selection's wider pivots, with
	 * values that repeat as measured latencies do: the same bits as a sort */
	{
		static const double ps[] = { 0, 0.1, 25, 50, 90, 95, 99, 99.9, 100 };
		static double in[2000], y[2000], sorted[2000];
		uint64_t seed = 7;

		for (size_t n = 2; n <= ELEMENTSOF(in); n = n * 3 + 1)
			for (size_t i = 0; i < ELEMENTSOF(ps); i++) {
				for (size_t k = 0; k < n; k++) {
					seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
					in[k] = (double)((seed >> 33) % 500) / 10.0;
				}
				memcpy(y, in, n * sizeof(double));
				memcpy(sorted, in, n * sizeof(double));
				qsort(sorted, n, sizeof(double), array_cmp_double);
				CHECK_MSG(probe_percentile_select(y, n, ps[i]) ==
						  probe_percentile_sorted(sorted, n, ps[i]),
					  "n %zu p%g", n, ps[i]);
			}
	}

	/* the same samples as TTFTs (ms) through probe_result_compute */
	struct probe_request_result r[7];
	double unsorted[] = { 12.0, 3.5, 7.25, 100.0, 42.0, 0.5, 18.0 };
	double pcts[] = { 90, 99.9 };
	struct probe_result res;

	for (int i = 0; i < 7; i++)
		r[i] = (struct probe_request_result){ .success = true,
						      .ttft_usec = (uint64_t)(unsorted[i] * 1000),
						      .e2e_usec = (uint64_t)(unsorted[i] * 1000),
						      .output_tokens = 1 };
	CHECK_INT_EQ(probe_result_compute(r, 7, 1.0, pcts, 2, NULL, &res, NULL), 0);
	CLOSE(res.stat[PROBE_METRIC_TTFT].mean_ms, 26.178571428571427);
	CLOSE(res.stat[PROBE_METRIC_TTFT].std_ms, 32.732332826196455);
	CLOSE(res.stat[PROBE_METRIC_TTFT].median_ms, 12.0);
	CLOSE(res.stat[PROBE_METRIC_TTFT].pct_ms[0], 65.2);
	CLOSE(res.stat[PROBE_METRIC_TTFT].pct_ms[1], 99.652);
	/* median of an even count is the mean of the middle two (np.median) */
	CHECK_INT_EQ(probe_result_compute(r, 6, 1.0, NULL, 0, NULL, &res, NULL), 0);
	CLOSE(res.stat[PROBE_METRIC_TTFT].median_ms, (7.25 + 12.0) / 2); /* of 0.5 3.5 7.25 12 42 100 */
	CHECK_INT_EQ(res.stat[PROBE_METRIC_TPOT].n, 0);                  /* one-token replies have no TPOT */
	CHECK(res.stat[PROBE_METRIC_TPOT].mean_ms == 0);
}

static void test_definitions(void)
{
	struct probe_request_result r[3];
	struct probe_result res;
	struct error err = { 0 };

	build(r);
	CHECK(probe_request_tpot_usec(&r[0]) == 100000);
	CHECK(probe_request_tpot_usec(&r[1]) == -1);
	CHECK(probe_request_tpot_usec(&r[2]) == -1);

	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, NULL, &res, &err), 0);
	CHECK_INT_EQ(res.num_prompts, 3);
	CHECK_INT_EQ(res.completed, 2);
	CHECK_INT_EQ(res.failed, 1);
	CHECK_INT_EQ(res.total_input_tokens, 80); /* failed requests' tokens are not counted (vLLM) */
	CHECK_INT_EQ(res.total_output_tokens, 12);
	CLOSE(res.request_throughput, 1.0);
	CLOSE(res.output_throughput, 6.0);
	CLOSE(res.total_token_throughput, 46.0);
	CHECK_INT_EQ(res.n_percentiles, 3);
	CLOSE(res.stat[PROBE_METRIC_TTFT].mean_ms, 150);
	CLOSE(res.stat[PROBE_METRIC_TTFT].median_ms, 150);
	CLOSE(res.stat[PROBE_METRIC_TTFT].std_ms, 50);
	CLOSE(res.stat[PROBE_METRIC_TTFT].pct_ms[2], 199); /* p99 of {100, 200}: 100 + 0.99·100 */
	CHECK_INT_EQ(res.stat[PROBE_METRIC_TPOT].n, 1);
	CLOSE(res.stat[PROBE_METRIC_TPOT].mean_ms, 100);
	CHECK_INT_EQ(res.stat[PROBE_METRIC_ITL].n, 10); /* pooled gaps */
	CLOSE(res.stat[PROBE_METRIC_ITL].mean_ms, 100);
	CLOSE(res.stat[PROBE_METRIC_ITL].std_ms, 0);
	CLOSE(res.stat[PROBE_METRIC_E2EL].mean_ms, 650);
	CLOSE(res.max_concurrent_requests, 2); /* r0 0..1.1 s overlaps r1 0.5..0.7 s and r2 */
	/* no SLA: every completed request is good; a failure means not met */
	CLOSE(res.attainment, 2.0 / 3);
	CHECK(!res.sla_met);
	CHECK_INT_EQ(probe_result_compute(r, 2, 2.0, NULL, 0, NULL, &res, &err), 0);
	CHECK(res.sla_met);

	CHECK_INT_EQ(probe_result_compute(r, 3, 0, NULL, 0, NULL, &res, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "duration");
	double bad[] = { 101 };
	CHECK_INT_EQ(probe_result_compute(r, 3, 1, bad, 1, NULL, &res, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "101");
	CHECK_INT_EQ(probe_result_compute(NULL, 0, 1, NULL, 0, NULL, &res, &err), 0);
	CHECK(res.stat[PROBE_METRIC_TTFT].mean_ms == 0 && !res.sla_met);
}

static void test_goodput(void)
{
	struct probe_request_result r[3];
	struct probe_result res;
	struct probe_sla sla = { 0 };
	struct error err = { 0 };

	build(r);
	/* r0 fails tpot (100 > 50), r1 fails ttft (200 > 150): nobody is good */
	CHECK_INT_EQ(probe_sla_parse("ttft:150,tpot:50", &sla, &err), 0);
	CHECK(sla.attainment == 0.9);
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, &sla, &res, &err), 0);
	CLOSE(res.attainment, 0);
	CLOSE(res.request_goodput, 0);
	CHECK(!res.sla_met);

	/* vLLM's form: both completed requests good, the failed one not */
	sla = (struct probe_sla){ 0 };
	CHECK_INT_EQ(probe_sla_parse("ttft:250 tpot:150", &sla, &err), 0);
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, &sla, &res, &err), 0);
	CLOSE(res.attainment, 2.0 / 3);
	CLOSE(res.request_goodput, 1.0);
	CLOSE(res.good_output_throughput, 6.0);
	CHECK(!res.sla_met); /* 0.667 < 0.9 */
	/* the same requests under the SLA scaled: at 0.5 (ttft 125, tpot 75)
	 * nobody is good, at 0.7 (175, 105) r0 is, at 1 what attainment says,
	 * at 2 the failed request still is not */
	CHECK(res.has_scaled_attainment);
	CHECK(probe_sla_scales[0] == 0.5 && probe_sla_scales[2] == 0.7 && probe_sla_scales[5] == 1.0 &&
	      probe_sla_scales[PROBE_SLA_SCALES - 1] == 2.0);
	CLOSE(res.scaled_attainment[0], 0);
	CLOSE(res.scaled_attainment[2], 1.0 / 3);
	CLOSE(res.scaled_attainment[5], res.attainment);
	CLOSE(res.scaled_attainment[PROBE_SLA_SCALES - 1], 2.0 / 3);
	for (size_t k = 1; k < PROBE_SLA_SCALES; k++)
		CHECK(res.scaled_attainment[k] >= res.scaled_attainment[k - 1]);
	sla.attainment = 0.6;
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, &sla, &res, &err), 0);
	CHECK(res.sla_met);

	/* ITL: every gap must meet the bound; a one-token reply has none */
	sla = (struct probe_sla){ 0 };
	CHECK_INT_EQ(probe_sla_parse("itl:99", &sla, &err), 0);
	CHECK(!probe_request_is_good(&r[0], &sla));
	CHECK(probe_request_is_good(&r[1], &sla));
	CHECK(!probe_request_is_good(&r[2], &sla));
	sla = (struct probe_sla){ 0 };
	CHECK_INT_EQ(probe_sla_parse("e2el:1100", &sla, &err), 0);
	CHECK(probe_request_is_good(&r[0], &sla));

	/* percentile bounds: p50 TTFT of {100, 200} is 150; one of three failed */
	sla = (struct probe_sla){ 0 };
	CHECK_INT_EQ(probe_sla_parse("p50:ttft:150", &sla, &err), 0);
	CHECK(sla.attainment == 0); /* no per-request bound, no attainment target */
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, &sla, &res, &err), 0);
	CHECK(res.sla_met);
	CHECK(!res.has_scaled_attainment); /* nothing per request to scale */
	sla = (struct probe_sla){ 0 };
	CHECK_INT_EQ(probe_sla_parse("p50:ttft:149", &sla, &err), 0);
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, &sla, &res, &err), 0);
	CHECK(!res.sla_met);
	sla = (struct probe_sla){ 0 };
	CHECK_INT_EQ(probe_sla_parse("p90:ttft:1000", &sla, &err), 0); /* 1/3 failed > 10% */
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, &sla, &res, &err), 0);
	CHECK(!res.sla_met);
}

static void test_sla_parse(void)
{
	static const struct {
		const char *text, *needle;
	} bad[] = {
		{ "ttft", "ttft" },
		{ "foo:5", "unknown metric \"foo\"" },
		{ "ttft:-1", "\"-1\"" },
		{ "ttft:abc", "\"abc\"" },
		{ "ttft:0", "\"0\"" },
		{ "p101:ttft:5", "percentile \"101\"" },
		{ "px:ttft:5", "percentile \"x\"" },
		{ "ttft:5,ttft:6", "twice" },
		{ "", "no bounds" },
		{ " , ", "no bounds" },
		{ "ttft:5,tpot:5,itl:5,e2el:5,p50:ttft:1,p90:ttft:1,p99:ttft:1,p50:tpot:1,p90:tpot:1", "more than 8" },
	};
	struct probe_sla sla;
	struct error err;
	char buf[256];

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		sla = (struct probe_sla){ 0 };
		err = (struct error){ 0 };
		CHECK_MSG(probe_sla_parse(bad[i].text, &sla, &err) < 0, "\"%s\" parsed", bad[i].text);
		CHECK_STR_CONTAINS(err.msg, bad[i].needle);
		CHECK_INT_EQ(sla.n_bounds, 0); /* untouched on failure */
	}
	sla = (struct probe_sla){ 0 };
	CHECK_INT_EQ(probe_sla_parse("ttft:500,tpot:50 p99:itl:80.5 e2el:2000", &sla, NULL), 0);
	CHECK_INT_EQ(sla.n_bounds, 4);
	CHECK(sla.bounds[2].percentile == 99 && sla.bounds[2].metric == PROBE_METRIC_ITL &&
	      sla.bounds[2].bound_ms == 80.5);
	probe_sla_format(&sla, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "ttft<=500ms tpot<=50ms e2el<=2000ms @90%, p99 itl<=80.5ms");
	probe_sla_to_string(&sla, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "ttft:500,tpot:50,p99:itl:80.5,e2el:2000");
	struct probe_sla back = { 0 };
	CHECK_INT_EQ(probe_sla_parse(buf, &back, NULL), 0);
	CHECK(memcmp(&back, &sla, sizeof(sla)) == 0);
	probe_sla_format(NULL, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "none");
}

static void test_json(void)
{
	struct probe_request_result r[3];
	struct probe_result res, back;
	struct probe_sla sla = { 0 };
	double pcts[] = { 50, 90, 99, 99.9 };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(cJSON_Deletep) cJSON *j2 = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	_cleanup_(cjson_freep) char *text2 = NULL;
	struct error err = { 0 };

	build(r);
	CHECK_INT_EQ(probe_sla_parse("ttft:250,tpot:150,p50:e2el:5000", &sla, NULL), 0);
	sla.attainment = 0.6;
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, pcts, 4, &sla, &res, NULL), 0);
	res.request_rate = INFINITY;
	res.max_concurrency = 64;
	res.server = (struct probe_server_metrics){ .present = true,
						    .kv_usage_mean = 0.25,
						    .kv_usage_peak = 0.5,
						    .running_mean = 3.5,
						    .running_peak = 8,
						    .preemptions = 2,
						    .samples = 12 };
	/* three sends over 0.9 s: 2 / 0.9 req/s as sent; the failure kept by its reason */
	CHECK_REL(res.offered_rate, 2 / 0.9, 1e-9);
	CHECK_INT_EQ(res.n_failure_reasons, 1);
	CHECK_INT_EQ(res.failure_reasons[0].count, 1);
	probe_result_set_verdict(&res, PROBE_VERDICT_MET, 3, 0.95, PROBE_CAP_NONE);
	CHECK_INT_EQ(probe_result_to_json(&res, &j), 0);
	text = cJSON_PrintUnformatted(j);
	CHECK(text);
	CHECK_STR_CONTAINS(text, "\"verdict\":\"met\"");
	CHECK_STR_CONTAINS(text, "\"verdict_requests\":3");
	CHECK_STR_CONTAINS(text, "\"failure_reasons\":{\"");
	/* vLLM's keys and values */
	CHECK_STR_CONTAINS(text, "\"request_rate\":\"inf\"");
	CHECK_STR_CONTAINS(text, "\"completed\":2");
	CHECK_STR_CONTAINS(text, "\"failed\":1");
	CHECK_STR_CONTAINS(text, "\"mean_ttft_ms\":150");
	CHECK_STR_CONTAINS(text, "\"median_ttft_ms\":150");
	CHECK_STR_CONTAINS(text, "\"std_ttft_ms\":50");
	CHECK_STR_CONTAINS(text, "\"p99_ttft_ms\":199");
	CHECK_STR_CONTAINS(text, "\"p99.9_ttft_ms\":");
	CHECK_STR_CONTAINS(text, "\"mean_tpot_ms\":100");
	CHECK_STR_CONTAINS(text, "\"p90_itl_ms\":100");
	CHECK_STR_CONTAINS(text, "\"median_e2el_ms\":650");
	CHECK_STR_CONTAINS(text, "\"total_input_tokens\":80");
	CHECK_STR_CONTAINS(text, "\"output_throughput\":6");
	CHECK_STR_CONTAINS(text, "\"total_token_throughput\":46");
	CHECK_STR_CONTAINS(text, "\"request_goodput\":1");
	CHECK_STR_CONTAINS(text, "\"max_concurrency\":64");
	/* goodput's */
	CHECK_STR_CONTAINS(text, "\"good_output_throughput\":6");
	CHECK_STR_CONTAINS(text, "\"sla\":\"ttft:250,tpot:150,p50:e2el:5000\"");
	CHECK_STR_CONTAINS(text, "\"sla_met\":true");
	CHECK_STR_CONTAINS(text, "\"kv_cache_usage_peak\":0.5");
	CHECK_STR_CONTAINS(text, "\"attainment_by_sla_scale\":[[0.5,0],");

	CHECK_INT_EQ(probe_result_from_json(j, &back, &err), 0);
	CHECK(isinf(back.request_rate));
	back.request_rate = res.request_rate = 0; /* inf != inf in memcmp terms is fine, but keep it simple */
	CHECK(memcmp(&back, &res, sizeof(res)) == 0);
	/* and once more through text */
	back.request_rate = 4.5;
	CHECK_INT_EQ(probe_result_to_json(&back, &j2), 0);
	text2 = cJSON_PrintUnformatted(j2);
	CHECK_STR_CONTAINS(text2, "\"request_rate\":4.5");

	/* bad input names the field */
	cJSON_ReplaceItemInObjectCaseSensitive(j, "completed", cJSON_CreateString("two"));
	CHECK_INT_EQ(probe_result_from_json(j, &back, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "completed");
}

#define RESULT_BASE                                                                                                    \
	"\"num_prompts\": 2, \"completed\": 2, \"failed\": 0, \"total_input_tokens\": 80, \"total_output_tokens\": "   \
	"12,"                                                                                                          \
	" \"request_throughput\": 1, \"output_throughput\": 6, \"total_token_throughput\": 46"

static int result_from(const char *text, struct probe_result *ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(text);

	CHECK_MSG(j, "not JSON: %s", text);
	return probe_result_from_json(j, ret, err);
}

/* Results as the store keeps them: null is "not measured", keys of other
 * versions pass, percentile keys follow metric_percentiles. */
static void test_json_read(void)
{
	struct probe_result r;
	struct error err = { 0 };

	CHECK_MSG(result_from("{" RESULT_BASE ", \"duration\": 2, \"max_concurrency\": null,"
			      " \"p99.9_ttft_ms\": 5, \"metric_percentiles\": [50, 99.9], \"p50_ttft_ms\": 3,"
			      " \"p90_ttft_ms\": 4, \"mean_ttft_ms\": null, \"future_key\": 1, \"sla\": \"\","
			      " \"server\": {\"samples\": 3, \"newer\": 2}}",
			      &r, &err) == 0,
		  "%s", err.msg);
	CHECK(r.request_rate == 0 && r.burstiness == 1 && r.max_concurrency == 0 && r.duration_s == 2);
	CHECK_INT_EQ(r.n_percentiles, 2);
	CHECK(r.stat[PROBE_METRIC_TTFT].pct_ms[0] == 3 && r.stat[PROBE_METRIC_TTFT].pct_ms[1] == 5);
	CHECK(r.stat[PROBE_METRIC_TTFT].mean_ms == 0);
	CHECK(probe_sla_empty(&r.sla));
	CHECK(r.server.present && r.server.samples == 3);

	CHECK_INT_EQ(result_from("{" RESULT_BASE "}", &r, &err), -EINVAL);
	CHECK_STR_EQ(err.msg, "duration: missing");
	CHECK_INT_EQ(result_from("{" RESULT_BASE ", \"duration\": null}", &r, &err), -EINVAL);
	CHECK_STR_EQ(err.msg, "duration: missing");
	CHECK_INT_EQ(result_from("{" RESULT_BASE ", \"duration\": 2, \"completed\": 3}", &r, &err), -EINVAL);
	CHECK_STR_EQ(err.msg, "completed: duplicate key");
	CHECK_INT_EQ(result_from("{" RESULT_BASE ", \"duration\": 2, \"request_rate\": \"fast\"}", &r, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "request_rate: expected a number");
	CHECK_INT_EQ(result_from("{" RESULT_BASE ", \"duration\": 2, \"server\": {\"samples\": -1}}", &r, &err),
		     -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "server.samples: expected an integer");
	CHECK_INT_EQ(result_from("{" RESULT_BASE ", \"duration\": 2, \"sla\": \"ttft:x\"}", &r, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "sla: ");
}

static void test_print(void)
{
	struct probe_request_result r[3];
	struct probe_result res;
	struct probe_sla sla = { 0 };
	char *buf = NULL;
	size_t size = 0;
	FILE *f;

	build(r);
	CHECK_INT_EQ(probe_sla_parse("ttft:250 tpot:150", &sla, NULL), 0);
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, &sla, &res, NULL), 0);
	res.request_rate = 4;
	res.percentile_metrics = 1u << PROBE_METRIC_TTFT | 1u << PROBE_METRIC_TPOT;
	f = open_memstream(&buf, &size);
	CHECK(f);
	probe_result_print(f, &res);
	fclose(f);
	/* vLLM's layout: "{:<40} {:<10}" and 50-column rules */
	CHECK_STR_CONTAINS(buf, "============ Serving Benchmark Result ============\n");
	CHECK_STR_CONTAINS(buf, "Successful requests:                     2         \n");
	CHECK_STR_CONTAINS(buf, "Benchmark duration (s):                  2.00      \n");
	CHECK_STR_CONTAINS(buf, "Request goodput (req/s):                 1.00      \n");
	CHECK_STR_CONTAINS(buf, "---------------Time to First Token----------------\n");
	CHECK_STR_CONTAINS(buf, "-----Time per Output Token (excl. 1st token)------\n");
	CHECK_STR_CONTAINS(buf, "P99 TTFT (ms):                           199.00    \n");
	CHECK_STR_CONTAINS(buf, "SLA attainment (%):                      66.67     \n");
	CHECK(!strstr(buf, "Inter-token Latency")); /* not selected */
	CHECK_STR_CONTAINS(buf, "\n==================================================\n");
	free(buf);
}

/* vLLM's max_output_tokens_per_s: chunks per one-second bucket from the
 * earliest send. r0's chunks come at 0.1..1.1 s (nine in the first second),
 * r1's one at 0.7 s: ten in the first bucket; the failed r2 counts not. */
static void test_peak_output(void)
{
	struct probe_request_result r[3];
	struct probe_result res;
	struct error err = { 0 };

	build(r);
	CHECK_INT_EQ(probe_result_compute(r, 3, 2.0, NULL, 0, NULL, &res, &err), 0);
	CLOSE(res.max_output_tokens_per_s, 10);
}

static void test_failure_reasons(void)
{
	struct probe_request_result r[6] = {
		{ .success = false, .error = "connection refused" },
		{ .success = true },
		{ .success = false, .error = "HTTP 500: x" },
		{ .success = false, .error = "connection refused" },
		{ .success = false },
		{ .success = false, .error = "connection refused" },
	};
	_cleanup_(freep) struct probe_failure_reason *why = NULL;
	struct probe_failure_reason *none = NULL;
	size_t n = 99;

	CHECK_INT_EQ(probe_failure_reasons(r, 6, &why, &n), 0);
	CHECK_INT_EQ(n, 3);
	CHECK_STR_EQ(why[0].reason, "connection refused");
	CHECK_INT_EQ(why[0].count, 3);
	/* equal counts: alphabetical */
	CHECK_STR_EQ(why[1].reason, "HTTP 500: x");
	CHECK_INT_EQ(why[1].count, 1);
	CHECK_STR_EQ(why[2].reason, "unknown error");
	CHECK_INT_EQ(probe_failure_reasons(r + 1, 1, &none, &n), 0);
	CHECK(!none && n == 0);
	free(why);
	why = NULL;

	/* failures of one kind whose texts quote each request's event or body
	 * are one reason, with the first as its example */
	struct probe_request_result k[5] = {
		{ .success = false,
		  .error = "SSE data is not valid JSON (expected ',' at byte 30): \"{\\\"id\\\":\\\"cmpl-2\"" },
		{ .success = false,
		  .error = "SSE data is not valid JSON (expected ',' at byte 30): \"{\\\"id\\\":\\\"cmpl-1\"" },
		{ .success = false, .error = "HTTP 500: request req-7 failed" },
		{ .success = false, .error = "HTTP 500: request req-8 failed" },
		{ .success = false, .error = "server sent an error in the stream: request 9 aborted" },
	};
	CHECK_INT_EQ(probe_failure_reasons(k, 5, &why, &n), 0);
	CHECK_INT_EQ(n, 3);
	CHECK_INT_EQ(why[0].count, 2);
	CHECK_STR_EQ(why[0].reason, "HTTP 500: request req-7 failed");
	CHECK_INT_EQ(probe_failure_kind_len(why[0].reason), strlen("HTTP 500"));
	CHECK_INT_EQ(why[1].count, 2);
	CHECK_INT_EQ(probe_failure_kind_len(why[1].reason),
		     strlen("SSE data is not valid JSON (expected ',' at byte 30)"));
	CHECK_INT_EQ(probe_failure_kind_len("connection refused"), strlen("connection refused"));
	CHECK_INT_EQ(probe_failure_kind_len("TLS: wrong version number"), strlen("TLS: wrong version number"));
	CHECK_INT_EQ(probe_failure_kind_len(why[2].reason), strlen("server sent an error in the stream"));
}

/* Which bound missed, and by how much: the figure at the attainment
 * target's quantile (failed requests slower than any bound). */
static void test_shortfall(void)
{
	struct probe_request_result r[10];
	struct probe_sla sla = { 0 };
	struct probe_result res;
	char buf[256];

	for (uint32_t i = 0; i < 10; i++)
		r[i] = (struct probe_request_result){ .index = i,
						      .success = i != 9,
						      .ttft_usec = (i + 1) * 100000ULL,
						      .e2e_usec = (i + 1) * 100000ULL + 900000ULL,
						      .output_tokens = 10,
						      .error = i == 9 ? (char *)"connection refused" : NULL };
	CHECK_INT_EQ(probe_sla_parse("ttft:500,tpot:200", &sla, NULL), 0);
	sla.attainment = 0.8;
	/* TTFT at the 8th of 10: 800 ms; TPOT 100 ms for every completed request */
	CHECK_INT_EQ(probe_sla_shortfall(r, 10, &sla, buf, sizeof(buf)), 0);
	CHECK_STR_EQ(buf, "ttft p80 800 ms over 500 ms (+60%), tpot p80 100 ms within 200 ms (−50%)");
	sla.attainment = 1;
	CHECK_INT_EQ(probe_sla_shortfall(r, 10, &sla, buf, sizeof(buf)), 0);
	CHECK_STR_CONTAINS(buf, "ttft p100: failed requests");
	/* the reasons, kept in the result */
	CHECK_INT_EQ(probe_result_compute(r, 10, 1.0, NULL, 0, &sla, &res, NULL), 0);
	probe_result_format_failures(&res, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "connection refused ×1");
}

/* A point that reached its cap undecided is judged by what it measured,
 * its precision stated: 150 of 160 good against 90 % is met at the cap. */
static void test_verdict_at_cap(void)
{
	struct probe_result res = { .num_prompts = 160, .attainment = 150.0 / 160, .percentiles_met = true };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct probe_result back;
	char buf[160];

	res.sla.attainment = 0.9;
	probe_result_set_verdict(&res, PROBE_VERDICT_UNDECIDED, 160, 0.95, PROBE_CAP_SECONDS);
	CHECK(res.sla_met && res.cap == PROBE_CAP_SECONDS);
	CHECK(res.attainment_lo > 0.89 && res.attainment_lo < 0.9 && res.attainment_hi > 0.96 &&
	      res.attainment_hi < 0.97);
	probe_result_verdict_text(&res, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "met at the cap: 93.8 %, 90 % CI 90–96 % (160 requests; time cap)");
	CHECK_INT_EQ(probe_result_to_json(&res, &j), 0);
	CHECK_INT_EQ(probe_result_from_json(j, &back, NULL), 0);
	CHECK(back.verdict == PROBE_VERDICT_UNDECIDED && back.cap == PROBE_CAP_SECONDS && back.sla_met);
	CHECK(back.attainment_lo == res.attainment_lo && back.attainment_hi == res.attainment_hi);
	/* 140 of 160: missed at the cap, said so */
	res.attainment = 140.0 / 160;
	probe_result_set_verdict(&res, PROBE_VERDICT_UNDECIDED, 160, 0.95, PROBE_CAP_REQUESTS);
	probe_result_verdict_text(&res, buf, sizeof(buf));
	CHECK(!res.sla_met);
	CHECK_STR_EQ(buf, "missed at the cap: 87.5 %, 90 % CI 83–91 % (160 requests; request cap)");
	/* a sure verdict keeps its words */
	probe_result_set_verdict(&res, PROBE_VERDICT_MET, 55, 0.95, PROBE_CAP_NONE);
	probe_result_verdict_text(&res, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "met at 95 % confidence (first 55 requests)");
	CHECK(res.sla_met && res.cap == PROBE_CAP_NONE);
	/* a point without a verdict (the saturation run) that its time cap
	 * ended says so in its record too, and nothing of a verdict */
	{
		struct probe_result sat = { .num_prompts = 40, .completed = 12, .cut = 28, .cap = PROBE_CAP_SECONDS };
		_cleanup_(cJSON_Deletep) cJSON *js = NULL;

		CHECK_INT_EQ(probe_result_to_json(&sat, &js), 0);
		CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(js, "cap")), "seconds");
		CHECK(!cJSON_GetObjectItem(js, "attainment_ci") && !cJSON_GetObjectItem(js, "verdict"));
		CHECK_INT_EQ(probe_result_from_json(js, &back, NULL), 0);
		CHECK(back.verdict == PROBE_VERDICT_NONE && back.cap == PROBE_CAP_SECONDS);
	}
}

int main(void)
{
	test_verdict_at_cap();
	test_shortfall();
	test_percentiles();
	test_definitions();
	test_goodput();
	test_sla_parse();
	test_json();
	test_json_read();
	test_print();
	test_peak_output();
	test_failure_reasons();
	return 0;
}
