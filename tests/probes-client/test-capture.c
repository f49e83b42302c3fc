/* Capture from metrics pages: histograms read from Prometheus text (labels
 * summed, +Inf, a missing series named with the names tried), deltas of two
 * scrapes with arrivals from the engine's gauges, a restarted server's
 * counters, a change of bucket bounds refused; the window's burstiness on
 * known processes; the window as a workload (histograms, means, rate, rate
 * per hour, shared prefix); the KS distances; a log as a window. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "capture.h"
#include "json-util.h"
#include "macro.h"
#include "rng.h"
#include "workload-json.h"
#include "tests.h"
#include "time-util.h"

/* A vLLM page: prompt lengths in 1-2-5 buckets, two model labels. */
static char *page(double in_engine, double finished, double b100, double b200, double b500, double gen50,
		  double queries, double hits)
{
	char *s = NULL;
	double n = b100 + b200 + b500;

	CHECK(asprintf(&s,
		       "# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n"
		       "vllm:num_requests_running{model_name=\"a\",engine=\"0\"} %g\n"
		       "vllm:num_requests_waiting{model_name=\"a\",engine=\"0\"} 0\n"
		       "vllm:request_success_total{model_name=\"a\",finished_reason=\"length\"} %g\n"
		       "vllm:request_success_total{model_name=\"a\",finished_reason=\"abort\"} 0\n"
		       "vllm:prefix_cache_queries_total{model_name=\"a\"} %g\n"
		       "vllm:prefix_cache_hits_total{model_name=\"a\"} %g\n"
		       "vllm:request_prompt_tokens_bucket{model_name=\"a\",le=\"100.0\"} %g\n"
		       "vllm:request_prompt_tokens_bucket{model_name=\"a\",le=\"200.0\"} %g\n"
		       "vllm:request_prompt_tokens_bucket{model_name=\"a\",le=\"500.0\"} %g\n"
		       "vllm:request_prompt_tokens_bucket{model_name=\"a\",le=\"+Inf\"} %g\n"
		       "vllm:request_prompt_tokens_sum{model_name=\"a\"} %g\n"
		       "vllm:request_prompt_tokens_count{model_name=\"a\"} %g\n"
		       "vllm:request_generation_tokens_bucket{model_name=\"a\",le=\"50.0\"} %g\n"
		       "vllm:request_generation_tokens_bucket{model_name=\"a\",le=\"+Inf\"} %g\n"
		       "vllm:request_generation_tokens_sum{model_name=\"a\"} %g\n"
		       "vllm:request_generation_tokens_count{model_name=\"a\"} %g\n",
		       in_engine, finished, queries, hits, b100, b100 + b200, n, n, b100 * 80 + b200 * 150 + b500 * 300,
		       n, gen50, gen50, gen50 * 32, gen50) >= 0);
	return s;
}

static void scrape(const char *text, uint64_t t_sec, struct probe_capture_scrape *ret)
{
	struct error err = { 0 };
	int r = probe_capture_scrape_parse(text, strlen(text), NULL, t_sec * 1000000, (1700000000 + t_sec) * 1000000,
					   ret, &err);

	CHECK_MSG(r == 0, "%s", error_str(&err, r));
}

static void test_histograms(void)
{
	static const char two_models[] = "m_bucket{model=\"a\",le=\"10\"} 1\nm_bucket{model=\"b\",le=\"10\"} 2\n"
					 "m_bucket{le=\"20\",model=\"a\"} 4\nm_bucket{model=\"b\",le=\"20\"} 2\n"
					 "m_bucket{model=\"a\",le=\"+Inf\"} 5\nm_bucket{model=\"b\",le=\"+Inf\"} 3\n"
					 "m_sum{model=\"a\"} 70\nm_sum{model=\"b\"} 30\nm_count{model=\"a\"} 5\n"
					 "m_count{model=\"b\"} 3\n";
	struct probe_metrics_map map;
	struct probe_prom_histogram h;
	struct probe_capture_scrape s;
	struct error err = { 0 };

	probe_metrics_map_init(&map);
	CHECK(probe_metrics_map_add(&map, PROBE_SERIES_PROMPT_LENGTH, "missing_first", NULL) == 0);
	CHECK(probe_metrics_map_add(&map, PROBE_SERIES_PROMPT_LENGTH, "m", NULL) == 0);
	CHECK(probe_metrics_map_add(&map, PROBE_SERIES_PROMPT_LENGTH, "a / b", &err) == -EINVAL);
	CHECK(probe_prom_parse_histogram(two_models, strlen(two_models), &map, PROBE_SERIES_PROMPT_LENGTH, &h, &err) ==
	      0);
	CHECK(h.have && strcmp(h.name, "m") == 0 && h.n == 2 && h.le[0] == 10 && h.le[1] == 20);
	CHECK(h.cum[0] == 3 && h.cum[1] == 6 && h.inf == 8 && h.sum == 100 && h.count == 8);
	/* a page without the series: named with what was tried */
	CHECK(probe_capture_scrape_parse(two_models, strlen(two_models), NULL, 1, 1, &s, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "prompt_length (vllm:request_prompt_tokens, sglang:prompt_tokens_histogram, "
				    "tgi_request_input_length): not on the metrics page");
	probe_metrics_map_init(&map);
	CHECK(probe_capture_scrape_parse(two_models, strlen(two_models), &map, 1, 1, &s, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "the engine profile names no metric for it (metrics.series.prompt_length)");
	/* a bucket without its bound is not a histogram */
	CHECK(probe_prom_parse_histogram("vllm:request_prompt_tokens_bucket 3\n", 36, NULL, PROBE_SERIES_PROMPT_LENGTH,
					 &h, &err) == -EBADMSG);
}

static void test_deltas(void)
{
	_cleanup_(freep) char *p0 = page(0, 0, 0, 0, 0, 0, 0, 0);
	_cleanup_(freep) char *p1 = page(3, 8, 2, 5, 1, 8, 1000, 100);
	_cleanup_(freep) char *p2 = page(1, 2, 1, 1, 0, 2, 200, 180); /* restarted */
	_cleanup_(freep) char *p3 = strdup(p1);
	struct probe_capture_scrape a, b, c, d;
	struct probe_capture_delta x, y;
	struct error err = { 0 };
	char *k;

	scrape(p0, 0, &a);
	scrape(p1, 10, &b);
	CHECK(probe_capture_delta(&a, &b, &x, &err) == 0);
	CHECK(!x.reset && x.requests == 8 && x.prompt.cum[0] == 2 && x.prompt.cum[1] == 5 && x.prompt.cum[2] == 1);
	/* 3 in the engine now, 8 left it: 11 arrived */
	CHECK(x.arrivals_from_gauges && x.arrivals == 11);
	CHECK(x.prefix_queries == 1000 && x.prefix_hits == 100);
	/* a restarted server: counters went down, the delta counts from 0 */
	scrape(p2, 20, &c);
	CHECK(probe_capture_delta(&b, &c, &y, &err) == 0);
	CHECK_MSG(y.reset && y.requests == 2 && y.prompt.cum[0] == 1 && y.prefix_hits == 180 && y.arrivals == 3,
		  "%d %g %g %g %g", y.reset, y.requests, y.prompt.cum[0], y.prefix_hits, y.arrivals);
	/* other bounds: another server */
	k = strstr(p3, "le=\"200.0\"");
	memcpy(k, "le=\"250.0\"", 10);
	scrape(p3, 30, &d);
	CHECK(probe_capture_delta(&b, &d, &y, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "vllm:request_prompt_tokens: the bucket bounds changed");
}

/* A window of m intervals of 1 s whose counts are a gamma(k) process at the rates given. */
static void window_of(struct probe_capture_acc *a, double shape, const double *rates, size_t n_rates, size_t m,
		      uint64_t seed)
{
	struct probe_rng rng;
	double t;

	probe_rng_init(&rng, seed, 1);
	t = probe_rng_gamma(&rng, shape) / (shape * rates[0]); /* the first arrival */
	probe_capture_acc_init(a);
	for (size_t i = 0; i < m; i++) {
		double rate = rates[i * n_rates / m], end = (double)(i + 1);
		struct probe_capture_delta d = { .mono_start_usec = i * 1000000 + 1,
						 .mono_end_usec = (i + 1) * 1000000 + 1,
						 .real_end_usec = (1700000000 + i + 1) * 1000000ull,
						 .prompt = { .have = true, .n = 1, .le = { 100 } },
						 .generation = { .have = true, .n = 1, .le = { 100 } },
						 .prefix_queries = NAN,
						 .prefix_hits = NAN };

		for (; t < end; t += probe_rng_gamma(&rng, shape) / (shape * rate))
			d.arrivals++;
		d.requests = d.prompt.count = d.generation.count = d.prompt.cum[0] = d.generation.cum[0] = d.arrivals;
		d.prompt.sum = d.arrivals * 60;
		d.generation.sum = d.arrivals * 20;
		CHECK(probe_capture_acc_add(a, &d, NULL) == 0);
	}
}

/* One interval of 1 s ending at second `end` in which n requests arrived
 * and finished, counted from the gauges or not. */
static void add_interval(struct probe_capture_acc *a, uint64_t end, double n, bool from_gauges)
{
	struct probe_capture_delta d = {
		.mono_start_usec = (end - 1) * 1000000 + 1,
		.mono_end_usec = end * 1000000 + 1,
		.real_end_usec = (1700000000 + end) * 1000000ull,
		.prompt = { .have = true, .n = 1, .le = { 100 }, .cum = { n }, .count = n },
		.generation = { .have = true, .n = 1, .le = { 100 }, .cum = { n }, .count = n },
		.requests = n,
		.arrivals = n,
		.arrivals_from_gauges = from_gauges,
		.prefix_queries = NAN,
		.prefix_hits = NAN
	};

	CHECK(probe_capture_acc_add(a, &d, NULL) == 0);
}

static void test_merge(void)
{
	_cleanup_(probe_capture_acc_done) struct probe_capture_acc a = { 0 }, b = { 0 }, c = { 0 };

	/* an idle interval without the gauges, then a busy one with them: the
	 * window's arrivals did not all come from the gauges */
	add_interval(&a, 1, 0, false);
	add_interval(&b, 2, 5, true);
	CHECK(probe_capture_acc_merge(&a, &b, NULL) == 0);
	CHECK(a.n_intervals == 2 && a.intervals[1].count == 5 && a.requests == 5);
	CHECK(!a.arrivals_from_gauges);
	/* merged into an empty window, they did */
	CHECK(probe_capture_acc_merge(&c, &b, NULL) == 0);
	CHECK(c.n_intervals == 1 && c.arrivals_from_gauges);
}

/* A window over two hours of the day, a quarter of each observed: the rate
 * per hour becomes the workload's rate profile, and the block lists it
 * under captured too. A minute across the top of an hour is no profile. */
static void test_hours(void)
{
	_cleanup_(probe_capture_acc_done) struct probe_capture_acc a = { 0 }, minute = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct probe_workload_config w;
	struct probe_rate_profile listed;
	struct error err = { 0 };

	setenv("TZ", "UTC", 1); /* from 22:13 and from 23:13 */
	tzset();
	for (uint64_t s = 1; s <= 900; s++)
		add_interval(&a, s, 4, true);
	for (uint64_t s = 3601; s <= 4500; s++)
		add_interval(&a, s, 8, true);
	/* 19 s before 23:00, 41 from it (1700000000 is 22:13:20) */
	for (uint64_t s = 2781; s <= 2840; s++)
		add_interval(&minute, s, s <= 2800 ? 4 : 8, true);
	probe_workload_config_init(&w);
	CHECK_MSG(probe_capture_acc_workload(&minute, &w, &err) == 0, "%s", err.msg);
	CHECK_INT_EQ(w.profile.n, 0);
	probe_workload_config_init(&w);
	CHECK_MSG(probe_capture_acc_workload(&a, &w, &err) == 0, "%s", err.msg);
	CHECK(w.profile.n == 2 && w.profile.rate[0] == 4 && w.profile.rate[1] == 8);
	CHECK(w.profile.second_of_day[0] == 22 * 3600 && w.profile.second_of_day[1] == 23 * 3600);
	CHECK(probe_capture_to_json(&a, &w, "metrics", "http://x/metrics", 1000000, &j) == 0);
	CHECK_MSG(probe_rate_profile_from_json(cJSON_GetObjectItem(j, "captured"), &listed, &err) == 0, "%s", err.msg);
	CHECK(listed.n == 2 && listed.rate[0] == 4 && listed.rate[1] == 8);
	CHECK(listed.second_of_day[0] == w.profile.second_of_day[0]);
}

static void test_burstiness(void)
{
	static const double one[] = { 20 }, two[] = { 10, 30 };
	struct probe_capture_acc a;
	struct probe_capture_summary s;

	/* Poisson at 20/s over 3000 s: k = 1 */
	window_of(&a, 1.0, one, 1, 3000, 1);
	probe_capture_summarize(&a, &s);
	CHECK_REL(s.burstiness, 1.0, 0.1);
	CHECK_REL(s.mean_rate, 20, 0.02);
	probe_capture_acc_done(&a);
	/* gamma(4) at 20/s: counts vary a quarter as much */
	window_of(&a, 4.0, one, 1, 3000, 2);
	probe_capture_summarize(&a, &s);
	CHECK_REL(s.burstiness, 4.0, 0.15);
	probe_capture_acc_done(&a);
	/* Poisson at two levels: the change of rate does not read as bursts */
	window_of(&a, 1.0, two, 2, 3000, 3);
	probe_capture_summarize(&a, &s);
	CHECK_REL(s.burstiness, 1.0, 0.1);
	CHECK_REL(s.mean_rate, 20, 0.02);
	CHECK(s.peak_rate > 30);
	probe_capture_acc_done(&a);
}

static void test_window_workload(void)
{
	_cleanup_(freep) char *p0 = page(0, 0, 0, 0, 0, 0, 0, 0);
	_cleanup_(freep) char *p1 = page(0, 80, 20, 50, 10, 80, 80000, 40000);
	_cleanup_(probe_capture_acc_done) struct probe_capture_acc a = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct probe_capture_scrape s0, s1;
	struct probe_capture_delta d;
	struct probe_workload_config w;
	struct probe_workload_spec back = { 0 };
	struct error err = { 0 };

	scrape(p0, 0, &s0);
	scrape(p1, 3600, &s1);
	CHECK(probe_capture_delta(&s0, &s1, &d, &err) == 0);
	probe_capture_acc_init(&a);
	CHECK(probe_capture_acc_add(&a, &d, &err) == 0);
	probe_workload_config_init(&w);
	CHECK(probe_capture_acc_workload(&a, &w, &err) == 0);
	/* 80 requests, prompts 20×80 + 50×150 + 10×300 = 12100 tokens: mean 151.25; a hit rate of 50 % is a
	 * shared prefix: 16 requests per prefix, 151.25 × 0.5 × 16/15 = 80 tokens */
	CHECK(w.input.kind == PROBE_DIST_HISTOGRAM && w.output.kind == PROBE_DIST_HISTOGRAM);
	CHECK(w.prefix_len == 80 && w.prefix_group_size == 16);
	CHECK_REL(w.input.mean + w.prefix_len, 151.25, 1e-9);
	CHECK(w.input.hist.n == 3 && w.input.hist.le[0] == 20 && w.input.hist.count[1] == 50);
	CHECK(w.output.mean == 32 && w.output.hist.n == 1);
	CHECK_REL(w.request_rate, 80.0 / 3600, 1e-9);
	CHECK(w.arrival == PROBE_ARRIVAL_POISSON && w.profile.n == 0);
	/* the block reads back as a workload */
	CHECK(probe_capture_to_json(&a, &w, "metrics", "http://x/metrics", 3600 * 1000000ull, &j) == 0);
	probe_workload_config_init(&back.config);
	CHECK_MSG(probe_workload_from_json(j, "", &back, &err) == 0, "%s", err.msg);
	CHECK(back.captured && back.config.prefix_len == 80);
	CHECK(json_get_double(back.captured, "", "requests", 0, 1e9, &(double){ 0 }, &err) == 1);

	/* nothing arrived: nothing to measure */
	{
		_cleanup_(probe_capture_acc_done) struct probe_capture_acc e = { 0 };

		probe_capture_acc_init(&e);
		CHECK(probe_capture_acc_workload(&e, &w, &err) == -ENODATA);
	}
}

static void test_distances(void)
{
	struct probe_length_histogram h = { .n = 3, .le = { 10, 20, 30 }, .count = { 1, 2, 1 } };
	struct probe_length_histogram g = { .n = 2, .le = { 20, 40 }, .count = { 3, 1 } };
	uint32_t same[] = { 5, 15, 16, 25 }, shifted[] = { 25, 26, 27, 28 };

	CHECK(probe_histogram_ks(&h, same, 4) == 0);
	CHECK(probe_histogram_ks(&h, shifted, 4) == 0.75);
	/* g at h's bounds: 3/4 at 20 (exact), 3/4 + 1/4 · (30 − 20)/(40 − 20) at 30 */
	CHECK_REL(probe_histogram_ks2(&h, &g), 0.125, 1e-12);
	CHECK(probe_histogram_ks2(&h, &h) == 0);
}

static void test_from_log(void)
{
	struct probe_samples s = { .n = 6, .have_time = true, .first_realtime = 1700000000.0 };
	uint64_t t[] = { 0, 500000, 1000000, 1500000, 2000000, 3000000 };
	uint32_t in[] = { 3, 30, 300, 3000, 30, 30 }, out[] = { 7, 7, 7, 7, 7, 70 };
	_cleanup_(probe_capture_acc_done) struct probe_capture_acc a = { 0 };
	struct probe_capture_summary sum;
	struct error err = { 0 };

	s.t_usec = t;
	s.input = in;
	s.output = out;
	CHECK(probe_capture_acc_from_samples(&a, &s, 1000000, &err) == 0);
	probe_capture_summarize(&a, &sum);
	CHECK(sum.requests == 6 && sum.mean_rate == 5.0 / 3 && sum.duration_s == 3);
	CHECK_REL(sum.input_mean, 3393.0 / 6, 1e-12);
	/* 1-2-5 bounds up to the longest length */
	CHECK(a.prompt.n == 12 && a.prompt.le[11] == 5000 && a.generation.le[a.generation.n - 1] == 100);
	CHECK(a.n_intervals == 3 && a.intervals[0].count == 2 && a.intervals[1].count == 2 &&
	      a.intervals[2].count == 1);
}

/* Two requests whose times are as far apart as a log's may be (the epoch,
 * and the largest timestamp read): a few wide intervals, not millions of
 * empty 15 s ones (a two-line log took seconds to minutes and 100 MB), and
 * the log's seconds spread over the hours of the day at once, each hour
 * getting its share. */
static void test_from_log_span(void)
{
	struct probe_samples s = { .n = 2, .have_time = true, .first_realtime = 0 };
	uint64_t t[] = { 0, UINT64_C(99999999999) * USEC_PER_SEC };
	uint32_t in[] = { 100, 200 }, out[] = { 20, 30 };
	_cleanup_(probe_capture_acc_done) struct probe_capture_acc a = { 0 };
	struct error err = { 0 };
	double total = 0;

	s.t_usec = t;
	s.input = in;
	s.output = out;
	CHECK(probe_capture_acc_from_samples(&a, &s, 15 * USEC_PER_SEC, &err) == 0);
	CHECK_MSG(a.n_intervals <= 64 && a.n_intervals >= 32 && a.interval_usec >= t[1] / 64,
		  "%zu intervals of %" PRIu64 " µs", a.n_intervals, a.interval_usec);
	for (size_t h = 0; h < 24; h++) {
		CHECK_REL(a.hour_seconds[h], 99999999999.0 / 24, 1e-6);
		total += a.hour_seconds[h];
	}
	CHECK_REL(total, 99999999999.0, 1e-12);
	CHECK(a.hour_requests[0] >= 1);
}

int main(void)
{
	test_histograms();
	test_deltas();
	test_burstiness();
	test_merge();
	test_hours();
	test_window_workload();
	test_distances();
	test_from_log();
	test_from_log_span();
	return 0;
}
