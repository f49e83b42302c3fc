/* bench-ratesearch — what the max-rate search costs and how sure its answer
 * is, with sequential load points (the probe's default) against fixed
 * counts per point (the rule before: N requests, a Wilson check at z 1.28,
 * a doubtful pass re-measured up to 4·N), in virtual time on goodput-sim's
 * engine model.
 *
 * Each search is what `goodput probe --find-max-rate` does, replayed on the
 * sim core: a saturation run (num_prompts at once), then the points the
 * search asks for, each a Poisson arrival sequence seeded once per search
 * and scaled to the point's rate. A sequential point is simulated for its
 * whole cap and then cut where the probe would have stopped: the test reads
 * requests in send order as they complete; at the completion that decides
 * it the probe stops sending, and the requests sent until then (the
 * decided ones and those in flight) are the point's. A fixed point is its N
 * requests. Each search uses its own seeds for the arrivals and the
 * engine's per-step jitter; "jitter" setups add an extra log-normal step
 * noise (goodput-sim's --fault-jitter).
 *
 * The truth is the largest rate whose attainment over long runs (16 seeds ×
 * 4,000 requests, pooled) reaches the target, by bisection to 0.1 %. A
 * search "places" the max rate when its answer lies within ±5 % of it.
 * Printed per setup and method: the share of searches that place it, the
 * mean answer/truth, load points after the saturation run, and requests and
 * virtual seconds per search (saturation run included). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "ratesearch.h"
#include "sequential.h"
#include "simulate.h"

struct setup {
	const char *name;
	const char *model, *gpu, *max_num_seqs;
	double in_len, out_len, range;
	const char *sla;
	double attainment;
	double extra_jitter;
};

static const struct setup setups[] = {
	{ "8b/L40S TTFT knee", "llama-3.1-8b", "L40S", "64", 512, 64, 0.5, "ttft:400,tpot:60", 0.9, 0 },
	{ "8b/L40S TTFT knee, jitter", "llama-3.1-8b", "L40S", "64", 512, 64, 0.5, "ttft:400,tpot:60", 0.9, 0.15 },
	{ "8b/L40S TPOT knee, jitter", "llama-3.1-8b", "L40S", "256", 256, 128, 0.5, "ttft:3000,tpot:45", 0.9, 0.15 },
	{ "8b/L40S 95 %, jitter", "llama-3.1-8b", "L40S", "64", 512, 64, 0.5, "ttft:400,tpot:60", 0.95, 0.15 },
	/* bench-ratesearch-live.py's setup, in virtual time */
	{ "8b/H100 short replies, jitter", "llama-3.1-8b", "H100", "64", 256, 16, 0.5, "ttft:150,tpot:25", 0.9, 0.15 },
};

struct method {
	const char *name;
	bool sequential;
	uint32_t n; /* fixed: requests per point; sequential: the saturation run's (cap 4·n) */
};

struct tally {
	unsigned searches, placed;
	double ratio_sum, points, requests, seconds;
};

static int engine_config(const struct setup *su, uint64_t seed, struct sim_engine_config *ret, struct error *err)
{
	struct sim_engine_config c;
	char buf[32];
	int r;

	sim_engine_config_init(&c);
	r = sim_engine_config_apply_flag(&c, "--model", su->model, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&c, "--gpu", su->gpu, err);
	if (r >= 0)
		r = sim_engine_config_apply_flag(&c, "--max-num-seqs", su->max_num_seqs, err);
	if (r >= 0) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)seed);
		r = sim_engine_config_apply_flag(&c, "--seed", buf, err);
	}
	if (r >= 0)
		r = sim_engine_config_resolve(&c, err);
	if (r < 0)
		return r;
	c.extra_jitter_sigma = su->extra_jitter;
	*ret = c;
	return 0;
}

static void workload_config(const struct setup *su, uint64_t seed, double rate, uint32_t n,
			    struct probe_workload_config *ret)
{
	struct probe_workload_config w;

	probe_workload_config_init(&w);
	w.input =
		(struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = su->in_len, .range_ratio = su->range };
	w.output =
		(struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = su->out_len, .range_ratio = su->range };
	w.num_prompts = n;
	w.lengths_only = true;
	w.seed = seed;
	if (isinf(rate))
		w.arrival = PROBE_ARRIVAL_INF;
	else {
		w.arrival = PROBE_ARRIVAL_POISSON;
		w.request_rate = rate;
	}
	*ret = w;
}

/* n requests at rate in virtual time. */
static int simulate(const struct setup *su, uint64_t seed, double rate, uint32_t n, struct probe_request_result **ret,
		    double *ret_duration)
{
	struct sim_engine_config c;
	struct probe_workload_config wc;
	struct probe_workload *w = NULL;
	struct error err = { 0 };
	size_t got;
	int r;

	r = engine_config(su, seed, &c, &err);
	if (r >= 0) {
		workload_config(su, seed, rate, n, &wc);
		r = probe_workload_generate(&wc, &w, &err);
	}
	if (r >= 0)
		r = sim_simulate_requests(&c, w, ret, &got, ret_duration, NULL, &err);
	probe_workload_free(w);
	if (r < 0)
		fprintf(stderr, "simulate: %s\n", error_str(&err, r));
	return r;
}

static void free_requests(struct probe_request_result *q, size_t n)
{
	for (size_t i = 0; q && i < n; i++)
		probe_request_result_done(&q[i]);
	free(q);
}

static int cmp_done(const void *a, const void *b, void *userdata)
{
	const struct probe_request_result *q = userdata;
	uint64_t x = q[*(const size_t *)a].send_usec + q[*(const size_t *)a].e2e_usec;
	uint64_t y = q[*(const size_t *)b].send_usec + q[*(const size_t *)b].e2e_usec;

	return (x > y) - (x < y);
}

static uint64_t done_at(const struct probe_request_result *q)
{
	return q->send_usec + q->e2e_usec;
}

/* The requests sent by time t (at least `at_least`). */
static size_t sent_by(const struct probe_request_result *q, size_t n, uint64_t t, size_t at_least)
{
	size_t sent = 0;

	while (sent < n && q[sent].send_usec <= t)
		sent++;
	return MAX(sent, at_least);
}

/* Where the probe would have ended a sequential point of these requests,
 * replaying probe.c: completions in time order feed the test; a verdict
 * stops the sending (the requests sent by then stay in flight and are
 * read as they come back); when the last of them is back and the verdict
 * no longer holds, the sending goes on (the requests not sent meanwhile
 * are taken as sent without the pause). Returns the requests sent. */
static size_t sequential_cut(const struct probe_request_result *q, size_t n, const struct probe_sla *sla,
			     const struct probe_ratesearch_config *cfg, enum probe_verdict *ret_v, uint32_t *ret_judged)
{
	struct probe_sequential_config sc;
	struct probe_sequential s;
	size_t *order = calloc(n, sizeof(*order)), stop = 0, used = n;
	bool *fed = calloc(n, sizeof(*fed));
	enum probe_verdict v = PROBE_VERDICT_NONE;

	probe_sequential_config_init(&sc, cfg->target, (uint32_t)n);
	sc.confidence = cfg->confidence;
	sc.margin = cfg->margin;
	if (!order || !fed || probe_sequential_init(&s, &sc, NULL) < 0) {
		free(order);
		free(fed);
		*ret_v = PROBE_VERDICT_UNDECIDED;
		*ret_judged = (uint32_t)n;
		return n;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_done, (void *)q);
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];
		uint64_t t = done_at(&q[i]);

		if (stop && i >= stop)
			continue; /* not sent while the sending was stopped */
		v = probe_sequential_add(&s, (uint32_t)i, probe_request_is_good(&q[i], sla), q[i].send_usec);
		fed[i] = true;
		if (!stop) {
			if (v != PROBE_VERDICT_NONE)
				stop = sent_by(q, n, t, s.judged);
			continue;
		}
		if (s.judged < stop)
			continue; /* some still in flight */
		if (v != PROBE_VERDICT_NONE) {
			used = stop;
			break;
		}
		/* the verdict fell back: go on, with what finished meanwhile */
		for (size_t j = stop; j < n; j++)
			if (!fed[j] && done_at(&q[j]) <= t) {
				v = probe_sequential_add(&s, (uint32_t)j, probe_request_is_good(&q[j], sla),
							 q[j].send_usec);
				fed[j] = true;
			}
		stop = v != PROBE_VERDICT_NONE ? sent_by(q, n, t, s.judged) : 0;
	}
	*ret_v = probe_sequential_finish(&s);
	*ret_judged = s.judged;
	probe_sequential_done(&s);
	free(order);
	free(fed);
	return used;
}

/* One load point as the probe would measure it. */
static int measure_point(const struct setup *su, const struct probe_sla *sla, const struct probe_ratesearch_config *cfg,
			 uint64_t seed, double rate, uint32_t n, struct probe_rate_point *ret, double *ret_seconds)
{
	struct probe_request_result *q = NULL;
	struct probe_result res;
	enum probe_verdict v = PROBE_VERDICT_NONE;
	uint32_t judged = 0;
	size_t used = n;
	double duration;
	uint64_t first = UINT64_MAX, last = 0;
	int r;

	r = simulate(su, seed, rate, n, &q, &duration);
	if (r < 0)
		return r;
	if (cfg->sequential && !isinf(rate))
		used = sequential_cut(q, n, sla, cfg, &v, &judged);
	for (size_t i = 0; i < used; i++) {
		first = MIN(first, q[i].send_usec);
		last = MAX(last, q[i].send_usec + q[i].e2e_usec);
	}
	duration = last > first ? (double)(last - first) / 1e6 : 1e-6;
	r = probe_result_compute(q, used, duration, NULL, 0, sla, &res, NULL);
	if (r >= 0 && v != PROBE_VERDICT_NONE)
		probe_result_set_verdict(&res, v, judged, cfg->confidence, PROBE_CAP_REQUESTS);
	*ret = (struct probe_rate_point){
		.rate = rate,
		.n = (uint32_t)used,
		.good = (uint32_t)lround(res.attainment * (double)used),
		.sla_met = res.sla_met,
		.throughput = res.request_throughput,
		.verdict = v,
	};
	if (r >= 0)
		r = probe_ratesearch_ratios(cfg, sla, q, used, ret);
	*ret_seconds = duration;
	free_requests(q, n);
	return r;
}

/* A whole search; the answer's rate (0 for none), points and requests. */
static int search(const struct setup *su, const struct probe_sla *sla, const struct method *m, uint64_t seed,
		  double *ret_rate, unsigned *ret_points, double *ret_requests, double *ret_seconds)
{
	struct probe_ratesearch_config cfg;
	struct probe_rate_point pts[32];
	struct probe_ratesearch_step st;
	size_t n = 0;
	int r;

	probe_ratesearch_config_init(&cfg);
	cfg.target = sla->attainment;
	cfg.num_requests = m->n;
	cfg.max_requests = 4 * m->n;
	cfg.sequential = m->sequential;
	*ret_points = 0;
	*ret_requests = *ret_seconds = 0;
	for (;;) {
		double secs;

		r = probe_ratesearch_next(&cfg, pts, n, &st, NULL);
		if (r < 0)
			return r;
		if (st.action != PROBE_RATESEARCH_MEASURE || n == ELEMENTSOF(pts))
			break;
		r = measure_point(su, sla, &cfg, seed, st.rate, st.num_requests, &pts[n], &secs);
		if (r < 0)
			return r;
		*ret_requests += pts[n].n;
		*ret_seconds += secs;
		*ret_points += !isinf(st.rate);
		if (getenv("BR_DEBUG"))
			fprintf(stderr, "    %s %.3f: %u requests, good %u, %s (%s)\n", m->name, st.rate, pts[n].n,
				pts[n].good, probe_verdict_name(pts[n].verdict), st.why);
		n++;
	}
	*ret_rate = st.action == PROBE_RATESEARCH_NEVER ? 0 : st.rate;
	return 0;
}

/* Attainment pooled over seeds × n requests at rate. */
static int long_attainment(const struct setup *su, const struct probe_sla *sla, double rate, unsigned seeds, uint32_t n,
			   double *ret)
{
	uint64_t good = 0, total = 0;

	for (unsigned s = 0; s < seeds; s++) {
		struct probe_request_result *q = NULL;
		double d;
		int r = simulate(su, 1000 + s, rate, n, &q, &d);

		if (r < 0)
			return r;
		for (uint32_t i = 0; i < n; i++)
			good += probe_request_is_good(&q[i], sla);
		total += n;
		free_requests(q, n);
	}
	*ret = (double)good / (double)total;
	return 0;
}

static int truth(const struct setup *su, const struct probe_sla *sla, unsigned seeds, uint32_t n, double *ret,
		 double *ret_sat)
{
	struct probe_request_result *q = NULL;
	struct probe_result sat;
	double lo, hi, d, a;
	int r;

	r = simulate(su, 1000, INFINITY, 400, &q, &d);
	if (r < 0)
		return r;
	r = probe_result_compute(q, 400, d, NULL, 0, sla, &sat, NULL);
	free_requests(q, 400);
	if (r < 0)
		return r;
	lo = sat.request_throughput / 100;
	hi = sat.request_throughput * 1.2;
	while (hi > lo * 1.001) {
		double mid = sqrt(lo * hi);

		r = long_attainment(su, sla, mid, seeds, n, &a);
		if (r < 0)
			return r;
		if (a >= sla->attainment)
			lo = mid;
		else
			hi = mid;
	}
	*ret = lo;
	*ret_sat = sat.request_throughput;
	return 0;
}

static void usage(void)
{
	printf("Usage: bench-ratesearch [--seeds N] [--setups N] [--truth-seeds N] [--truth-requests N]\n"
	       "                        [--fixed N,N,...] [--prompts N]\n"
	       "  --seeds N           searches per setup and method (default 100)\n"
	       "  --setups N          the first N setups only (default all)\n"
	       "  --truth-seeds N     seeds of the long runs that give the truth (default 16)\n"
	       "  --truth-requests N  requests of each such run (default 4000)\n"
	       "  --fixed N,...       fixed counts to compare with (default 40,100,200,400)\n"
	       "  --prompts N         the sequential search's saturation run (default 200; cap 4·N)\n"
	       "  --check             exit 1 unless the sequential search places the max rate at\n"
	       "                      least as often as the best fixed count, with fewer requests\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "seeds", required_argument, NULL, 's' },
		{ "setups", required_argument, NULL, 'u' },
		{ "truth-seeds", required_argument, NULL, 't' },
		{ "truth-requests", required_argument, NULL, 'q' },
		{ "fixed", required_argument, NULL, 'f' },
		{ "prompts", required_argument, NULL, 'p' },
		{ "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct method methods[8] = { { "sequential", true, 200 } };
	size_t n_methods = 1, n_setups = ELEMENTSOF(setups);
	unsigned seeds = 100, truth_seeds = 16;
	uint32_t truth_requests = 4000;
	bool check = false, ok = true;
	const char *fixed = "40,100,200,400";
	static char names[8][32];
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 's':
			seeds = (unsigned)atoi(optarg);
			break;
		case 'u':
			n_setups = MIN((size_t)atoi(optarg), n_setups);
			break;
		case 't':
			truth_seeds = (unsigned)atoi(optarg);
			break;
		case 'q':
			truth_requests = (uint32_t)atoi(optarg);
			break;
		case 'f':
			fixed = optarg;
			break;
		case 'p':
			methods[0].n = (uint32_t)atoi(optarg);
			break;
		case 'c':
			check = true;
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	for (const char *p = fixed; *p && n_methods < ELEMENTSOF(methods);
	     p = strchr(p, ',') ? strchr(p, ',') + 1 : "") {
		unsigned v = (unsigned)atoi(p);

		if (v == 0)
			break;
		snprintf(names[n_methods], sizeof(names[n_methods]), "fixed %u", v);
		methods[n_methods] = (struct method){ names[n_methods], false, v };
		n_methods++;
	}
	if (seeds == 0 || truth_seeds == 0 || truth_requests == 0 || methods[0].n == 0) {
		usage();
		return 2;
	}

	printf("| setup | method | placed within ±5 %% | answer/truth | load points | requests | virtual s |\n");
	printf("| --- | --- | --- | --- | --- | --- | --- |\n");
	for (size_t k = 0; k < n_setups; k++) {
		const struct setup *su = &setups[k];

		if (getenv("BR_SETUP") && (size_t)atoi(getenv("BR_SETUP")) != k)
			continue;
		struct probe_sla sla = { 0 };
		struct tally t[8] = { 0 };
		double R, x_sat;

		if (probe_sla_parse(su->sla, &sla, NULL) < 0)
			return 1;
		sla.attainment = su->attainment;
		if (truth(su, &sla, truth_seeds, truth_requests, &R, &x_sat) < 0)
			return 1;
		for (unsigned s = 1; s <= seeds; s++)
			for (size_t m = 0; m < n_methods; m++) {
				double rate, req, secs;
				unsigned pts;

				if (search(su, &sla, &methods[m], s, &rate, &pts, &req, &secs) < 0)
					return 1;
				if (getenv("BR_DEBUG"))
					fprintf(stderr, "  seed %u %s: %.3f (%.3f)\n", s, methods[m].name, rate,
						rate / R);
				t[m].searches++;
				t[m].placed += fabs(rate / R - 1) <= 0.05;
				t[m].ratio_sum += rate / R;
				t[m].points += pts;
				t[m].requests += req;
				t[m].seconds += secs;
			}
		for (size_t m = 0; m < n_methods; m++)
			printf("| %s (max rate %.2f req/s, %.2f × saturation) | %s | %.0f %% | %.3f | %.1f | %.0f | "
			       "%.0f |\n",
			       su->name, R, R / x_sat, methods[m].name, 100.0 * t[m].placed / t[m].searches,
			       t[m].ratio_sum / t[m].searches, t[m].points / t[m].searches,
			       t[m].requests / t[m].searches, t[m].seconds / t[m].searches);
		fflush(stdout);
		if (check) {
			/* the fixed count that places it most often, and how many requests that costs */
			size_t best = 1;

			for (size_t m = 2; m < n_methods; m++)
				if (t[m].placed > t[best].placed)
					best = m;
			if (n_methods > 1 &&
			    (t[0].placed + seeds / 20 < t[best].placed || t[0].requests >= t[best].requests))
				ok = false;
		}
	}
	return ok ? 0 : 1;
}
