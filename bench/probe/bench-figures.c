/* bench-figures.c — what a load point's figures cost the loop they run in.
 *
 * goodputd and `goodput tune` compute a load point's figures
 * (probe_result_compute: mean, median, std and percentiles of TTFT, TPOT,
 * ITL and E2EL) and the rate search's ratios (probe_ratesearch_ratios) on
 * their event loop, between answers. The ITL array holds every token gap of
 * the point. This prints, over several runs, the time of each for N
 * requests of T tokens, and beside them the time a sort of the same ITL
 * samples takes alone (what the figures cost when they sorted).
 *
 * Usage: bench-figures [--requests N] [--tokens T] [--runs R] [--check-ms MS] */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "metrics.h"
#include "parse.h"
#include "ratesearch.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t next(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

/* Requests with TTFT 100–200 ms and token gaps of 20–40 ms. */
static struct probe_request_result *make_requests(size_t n, size_t tokens)
{
	struct probe_request_result *r = calloc(n, sizeof(*r));
	uint64_t s = 1;

	if (!r)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		uint64_t t;

		r[i].index = (uint32_t)i;
		r[i].success = true;
		r[i].http_status = 200;
		r[i].send_usec = i * 1000;
		r[i].ttft_usec = 100000 + next(&s) % 100000;
		r[i].input_tokens = 512;
		r[i].output_tokens = (uint32_t)tokens;
		r[i].n_itl = tokens - 1;
		r[i].itl_usec = malloc(r[i].n_itl * sizeof(uint64_t));
		if (!r[i].itl_usec)
			return NULL;
		t = r[i].ttft_usec;
		for (size_t k = 0; k < r[i].n_itl; k++) {
			r[i].itl_usec[k] = 20000 + next(&s) % 20000;
			t += r[i].itl_usec[k];
		}
		r[i].e2e_usec = t;
	}
	return r;
}

static void summary(const char *what, double *ms, size_t runs)
{
	qsort(ms, runs, sizeof(*ms), array_cmp_double);
	printf("  %-36s median %7.2f ms  (min %.2f, max %.2f, %zu runs)\n", what, ms[runs / 2], ms[0], ms[runs - 1],
	       runs);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },           { "requests", required_argument, NULL, 'n' },
		{ "tokens", required_argument, NULL, 't' },   { "runs", required_argument, NULL, 'r' },
		{ "check-ms", required_argument, NULL, 'c' }, { NULL, 0, NULL, 0 },
	};
	uint32_t n = 1000, tokens = 256, runs = 7;
	double check_ms = 0, *t_fig, *t_ratio, *t_sort;
	struct probe_request_result *reqs;
	struct probe_ratesearch_config cfg;
	struct probe_sla sla = { .attainment = 0.9, .n_bounds = 2 };
	size_t n_itl;
	int ch;

	while ((ch = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		struct error err = { 0 };
		int r = 0;

		switch (ch) {
		case 'h':
			printf("Usage: bench-figures [--requests N] [--tokens T] [--runs R] [--check-ms MS]\n\n"
			       "Times a load point's figures (probe_result_compute) and the rate search's ratios\n"
			       "for N requests of T tokens (default 1000 x 256, 7 runs), beside a sort of the same\n"
			       "ITL samples. --check-ms fails when the figures' median exceeds MS.\n");
			return 0;
		case 'n':
			r = parse_u32("--requests", optarg, 2, 1000000, &n, &err);
			break;
		case 't':
			r = parse_u32("--tokens", optarg, 2, 100000, &tokens, &err);
			break;
		case 'r':
			r = parse_u32("--runs", optarg, 1, 1000, &runs, &err);
			break;
		case 'c':
			r = parse_double("--check-ms", optarg, 0, 1e6, &check_ms, &err);
			break;
		default:
			return 2;
		}
		if (r < 0) {
			fprintf(stderr, "bench-figures: %s\n", err.msg);
			return 2;
		}
	}
	reqs = make_requests(n, tokens);
	t_fig = calloc(runs, sizeof(double));
	t_ratio = calloc(runs, sizeof(double));
	t_sort = calloc(runs, sizeof(double));
	if (!reqs || !t_fig || !t_ratio || !t_sort) {
		fprintf(stderr, "bench-figures: out of memory\n");
		return 1;
	}
	sla.bounds[0] = (struct probe_sla_bound){ .metric = PROBE_METRIC_TTFT, .bound_ms = 500 };
	sla.bounds[1] = (struct probe_sla_bound){ .metric = PROBE_METRIC_ITL, .percentile = 99, .bound_ms = 50 };
	probe_ratesearch_config_init(&cfg);
	n_itl = (size_t)n * (tokens - 1);
	printf("a load point of %u requests x %u tokens (%zu ITL samples):\n", n, tokens, n_itl);
	for (uint32_t k = 0; k < runs; k++) {
		struct probe_result res;
		struct probe_rate_point pt = { 0 };
		struct error err = { 0 };
		double *x = malloc(n_itl * sizeof(double)), t0;
		size_t m = 0;

		if (!x) {
			fprintf(stderr, "bench-figures: out of memory\n");
			return 1;
		}
		t0 = now_ms();
		if (probe_result_compute(reqs, n, 10.0, NULL, 0, &sla, &res, &err) < 0) {
			fprintf(stderr, "bench-figures: %s\n", err.msg);
			return 1;
		}
		t_fig[k] = now_ms() - t0;
		t0 = now_ms();
		if (probe_ratesearch_ratios(&cfg, &sla, reqs, n, &pt) < 0)
			return 1;
		t_ratio[k] = now_ms() - t0;
		for (size_t i = 0; i < n; i++)
			for (size_t g = 0; g < reqs[i].n_itl; g++)
				x[m++] = (double)reqs[i].itl_usec[g] / 1e3;
		t0 = now_ms();
		qsort(x, m, sizeof(double), array_cmp_double);
		t_sort[k] = now_ms() - t0;
		free(x);
	}
	summary("figures (probe_result_compute)", t_fig, runs);
	summary("ratios (probe_ratesearch_ratios)", t_ratio, runs);
	summary("for comparison: one sort of the ITL", t_sort, runs);
	for (size_t i = 0; i < n; i++)
		probe_request_result_done(&reqs[i]);
	free(reqs);
	free(t_ratio);
	free(t_sort);
	if (check_ms > 0 && t_fig[runs / 2] > check_ms) {
		fprintf(stderr, "FAIL: figures took %.2f ms (median), more than %.2f\n", t_fig[runs / 2], check_ms);
		free(t_fig);
		return 1;
	}
	free(t_fig);
	return 0;
}
