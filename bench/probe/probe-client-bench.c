/* probe-client-bench.c — what the probe's client itself costs, so that the
 * instrument never limits the measurement (issue 4's figures):
 *
 *   burst:  CPU µs per streamed token and tokens/s ingested when the server
 *           writes whole responses at once (coalesced chunks);
 *   paced:  CPU µs per token when every token arrives alone, and whether
 *           the client's ITL p50/p99 stay within 1 ms of the server's actual
 *           send gaps at 10k..100k paced tokens/s (100 streams);
 *   starts: the TTFT the client adds when 256 requests start at once
 *           (the server answers the first token as soon as it reads a
 *           request), against one request alone.
 *
 * The server is bench/probe/stream-server.c in a forked child, recording its
 * send gaps in shared memory. CPU is the bench process's own (getrusage), so
 * the server's work is not counted. --quick runs a small version of each
 * (a test); --check fails when a quick figure is absurd (a broken client). */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "client.h"
#include "macro.h"
#include "run.h"
#include "stream-server.h"
#include "time-util.h"

static sd_event *event;
static struct bench_server_stats *stats;
static char base_url[64];
static bool quick;

static uint64_t cpu_usec(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec +
	       (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
}

static pid_t start_server(int *ret_stop)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd, p[2];
	pid_t pid;

	stats = mmap(NULL, sizeof(*stats), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED)
		exit(1);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4096) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0 || pipe(p) < 0)
		exit(1);
	snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%u", ntohs(a.sin_port));
	pid = fork();
	if (pid == 0) {
		close(p[1]);
		bench_server_run(fd, p[0], stats);
	}
	close(fd);
	close(p[0]);
	*ret_stop = p[1];
	return pid;
}

static struct probe_workload *make_workload(size_t n, uint32_t output_len)
{
	struct probe_workload *w = calloc(1, sizeof(*w));

	if (!w || !(w->requests = calloc(n, sizeof(*w->requests))))
		exit(1);
	w->n_requests = n;
	for (size_t i = 0; i < n; i++) {
		w->requests[i].index = (uint32_t)i;
		w->requests[i].input_len = 4;
		w->requests[i].output_len = output_len;
		w->requests[i].prompt_ids = calloc(4, sizeof(uint32_t));
		if (!w->requests[i].prompt_ids)
			exit(1);
		for (int k = 0; k < 4; k++)
			w->requests[i].prompt_ids[k] = 1000 + (uint32_t)k;
	}
	return w;
}

static void on_done(struct probe_run *run, void *userdata)
{
	*(bool *)userdata = true;
}

struct outcome {
	double wall_s;
	uint64_t cpu_usec, tokens;
	uint64_t t0_usec, last_send_usec; /* run start, latest actual send */
	size_t failed;
	double *itl_ms, *ttft_ms;
	size_t n_itl, n_ttft;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *x, size_t n, double p)
{
	double r;
	size_t lo;

	if (n == 0)
		return NAN;
	r = p / 100.0 * (double)(n - 1);
	lo = (size_t)r;
	return lo + 1 < n ? x[lo] + (x[lo + 1] - x[lo]) * (r - (double)lo) : x[n - 1];
}

/* One client per mode, kept for the whole bench (its connections stay open). */
static struct probe_client *clients[8];
static char *client_models[8];

static struct probe_client *client_for(const char *model)
{
	struct probe_client_config cfg;
	struct error err = { 0 };
	size_t i;

	for (i = 0; i < ELEMENTSOF(clients) && clients[i]; i++)
		if (strcmp(client_models[i], model) == 0)
			return clients[i];
	if (i == ELEMENTSOF(clients))
		exit(1);
	probe_client_config_init(&cfg);
	cfg.base_url = base_url;
	cfg.model = model;
	if (probe_client_new(event, &cfg, &clients[i], &err) < 0) {
		fprintf(stderr, "client: %s\n", err.msg);
		exit(1);
	}
	client_models[i] = strdup(model);
	return clients[i];
}

/* Runs n requests of output_len tokens in model's mode at concurrency conc
 * (0: all at once). */
static void run(const char *model, size_t n, uint32_t output_len, uint32_t conc, struct outcome *o)
{
	struct probe_client *c = client_for(model);
	struct probe_workload *w = make_workload(n, output_len);
	struct probe_run_config rc;
	struct probe_run *r = NULL;
	const struct probe_request_result *res;
	uint64_t t0, c0;
	size_t nres;
	bool done = false;

	probe_run_config_init(&rc);
	rc.metrics_path = NULL;
	rc.max_concurrency = conc;
	memset(o, 0, sizeof(*o));
	t0 = mono_usec();
	c0 = cpu_usec();
	if (probe_run_start(event, c, w, &rc, on_done, &done, &r) < 0)
		exit(1);
	while (!done)
		if (sd_event_run(event, UINT64_MAX) < 0)
			exit(1);
	o->cpu_usec = cpu_usec() - c0;
	o->wall_s = usec_to_sec(mono_usec() - t0);
	res = probe_run_results(r, &nres);
	o->t0_usec = t0;
	for (size_t i = 0; i < nres; i++) {
		o->last_send_usec = MAX(o->last_send_usec, res[i].send_usec);
		o->tokens += res[i].output_tokens;
		o->n_itl += res[i].n_itl;
		if (!res[i].success) {
			if (o->failed++ == 0)
				fprintf(stderr, "request failed: %s\n", res[i].error);
		}
	}
	o->itl_ms = calloc(o->n_itl + 1, sizeof(double));
	o->ttft_ms = calloc(nres + 1, sizeof(double));
	o->n_itl = 0;
	for (size_t i = 0; i < nres; i++) {
		for (size_t k = 0; k < res[i].n_itl; k++)
			o->itl_ms[o->n_itl++] = usec_to_ms(res[i].itl_usec[k]);
		if (res[i].success)
			o->ttft_ms[o->n_ttft++] = usec_to_ms(res[i].ttft_usec);
	}
	qsort(o->itl_ms, o->n_itl, sizeof(double), cmp_double);
	qsort(o->ttft_ms, o->n_ttft, sizeof(double), cmp_double);
	probe_run_free(r);
	probe_workload_free(w);
}

static void outcome_done(struct outcome *o)
{
	free(o->itl_ms);
	free(o->ttft_ms);
}

static double server_gap_pct(double p)
{
	uint64_t total = 0, want, seen = 0;

	for (size_t i = 0; i < BENCH_GAP_BUCKETS; i++)
		total += stats->gap_hist[i];
	if (total == 0)
		return NAN;
	want = (uint64_t)ceil(p / 100.0 * (double)total);
	for (size_t i = 0; i < BENCH_GAP_BUCKETS; i++) {
		seen += stats->gap_hist[i];
		if (seen >= want)
			return (double)i / 1000.0;
	}
	return NAN;
}

static int bench_burst(bool check)
{
	struct outcome o;
	size_t n = quick ? 32 : 256;
	uint32_t tokens = quick ? 500 : 4000;
	double per_token;

	run("burst", n, tokens, 16, &o);
	per_token = (double)o.cpu_usec / (double)o.tokens;
	printf("burst (coalesced chunks): %zu requests x %u tokens, 16 streams: %.3f CPU us/token, "
	       "%.0f tokens/s ingested (%.0f per CPU second), %zu failed\n",
	       n, tokens, per_token, (double)o.tokens / o.wall_s, 1e6 / per_token, o.failed);
	outcome_done(&o);
	return check && (o.failed > 0 || per_token > 20) ? 1 : 0;
}

static int bench_paced(double rate, double seconds, bool check)
{
	const uint32_t streams = 100;
	uint64_t itl = (uint64_t)(streams * 1e6 / rate);
	uint32_t tokens = (uint32_t)(seconds * 1e6 / (double)itl) + 1;
	struct outcome o;
	char model[32];
	double c50, c99, s50, s99, per_token;
	bool faithful;

	memset(stats->gap_hist, 0, sizeof(stats->gap_hist));
	snprintf(model, sizeof(model), "paced:%llu", (unsigned long long)itl);
	run(model, streams, tokens, 0, &o);
	per_token = (double)o.cpu_usec / (double)o.tokens;
	c50 = pct(o.itl_ms, o.n_itl, 50);
	c99 = pct(o.itl_ms, o.n_itl, 99);
	s50 = server_gap_pct(50);
	s99 = server_gap_pct(99);
	faithful = fabs(c50 - s50) <= 1.0 && fabs(c99 - s99) <= 1.0;
	printf("paced %6.0f tokens/s (100 streams, ITL %.2f ms): %.3f CPU us/token; ITL p50 %.3f / p99 %.3f ms "
	       "vs server sends p50 %.3f / p99 %.3f ms: %s; %zu failed\n",
	       rate, (double)itl / 1000.0, per_token, c50, c99, s50, s99, faithful ? "faithful" : "NOT faithful",
	       o.failed);
	outcome_done(&o);
	return check && (o.failed > 0 || !isfinite(c50)) ? 1 : 0;
}

/* The server holds every first token for 50 ms, as a real prefill would, so
 * the client's sends and reads of 256 streams do not queue behind each
 * other's responses; what the client adds is its TTFT minus the server's
 * 50 ms. */
static int bench_starts(bool check)
{
	const size_t n = 256;
	const double hold_ms = 50;
	struct outcome o, one;
	double base;

	/* Cold: the client opens 256 connections at once. */
	run("paced:0:50000", n, 1, 0, &o);
	printf("256 simultaneous starts, new connections: TTFT p50 %.3f / p99 %.3f / max %.3f ms (server holds %.0f "
	       "ms)\n",
	       pct(o.ttft_ms, o.n_ttft, 50), pct(o.ttft_ms, o.n_ttft, 99), o.ttft_ms[o.n_ttft ? o.n_ttft - 1 : 0],
	       hold_ms);
	outcome_done(&o);
	run("paced:0:50000", 1, 1, 0, &one);
	base = one.ttft_ms[0];
	outcome_done(&one);
	run("paced:0:50000", n, 1, 0, &o);
	printf("256 simultaneous starts, kept-alive connections: TTFT p50 %.3f / p99 %.3f / max %.3f ms; one alone "
	       "%.3f ms: the client adds +%.3f ms at p99, +%.3f ms at max; the last request left %.3f ms after the "
	       "start; %zu failed\n",
	       pct(o.ttft_ms, o.n_ttft, 50), pct(o.ttft_ms, o.n_ttft, 99), o.ttft_ms[o.n_ttft ? o.n_ttft - 1 : 0], base,
	       pct(o.ttft_ms, o.n_ttft, 99) - hold_ms, o.ttft_ms[o.n_ttft ? o.n_ttft - 1 : 0] - hold_ms,
	       usec_to_ms(o.last_send_usec - o.t0_usec), o.failed);
	outcome_done(&o);
	return check && o.failed > 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	bool check = false;
	int stop, status, fails = 0;
	pid_t pid;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0)
			quick = true;
		else if (strcmp(argv[i], "--check") == 0)
			check = true;
		else {
			printf("Usage: probe-client-bench [--quick] [--check]\n");
			return strcmp(argv[i], "--help") == 0 ? 0 : 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	pid = start_server(&stop);
	if (sd_event_new(&event) < 0)
		return 1;
	fails += bench_burst(check);
	if (quick)
		fails += bench_paced(10000, 0.5, check);
	else {
		const double rates[] = { 10000, 25000, 50000, 75000, 100000 };

		for (size_t i = 0; i < ELEMENTSOF(rates); i++)
			fails += bench_paced(rates[i], 3, check);
	}
	fails += bench_starts(check);
	for (size_t i = 0; i < ELEMENTSOF(clients); i++) {
		probe_client_free(clients[i]);
		free(client_models[i]);
	}
	close(stop);
	waitpid(pid, &status, 0);
	sd_event_unref(event);
	curl_global_cleanup();
	munmap(stats, sizeof(*stats));
	return fails ? 1 : 0;
}
