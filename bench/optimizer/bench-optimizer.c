/* bench-optimizer — how many deployments the search needs, against an
 * exhaustive grid sweep and random search, on realistic cost landscapes.
 *
 * Each space's true cost landscape ($/Mtok, or infeasible / SLA never met
 * per configuration) is computed once for the whole grid, either from a
 * closed-form model shaped like the real thing (throughput rising with the
 * batch until the TPOT bound, KV capacity or the chunk budget caps it; small
 * chunks break TTFT; large batch × chunk runs out of memory; rate-search
 * plateaus) or, with --sim, from goodput-sim's engine model in virtual time
 * (the max SLA rate of each configuration). The searches then see that
 * landscape through multiplicative log-normal measurement noise, a fresh
 * draw for every deployment, seeded per run.
 *
 * Figures per method and space, over many seeds: the number of distinct
 * deployments until the incumbent (the best *measured* configuration so
 * far) is truly within 2 % of the optimum — median and quartiles — and the
 * median true regret of the incumbent after a fixed budget of deployments.
 * The search's re-probes count as deployments; its incumbent is what the
 * tuner would answer (lowest mean cost, opt_best).
 *
 * Debugging: BENCH_TRACE=SEED prints the search's deployments for that seed,
 * BENCH_DEBUG=1 a line per seed. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench-landscape.h"
#include "json-util.h"
#include "macro.h"
#include "opt.h"

#define TARGET      0.02
#define NOT_REACHED 1e9

static const unsigned budgets[] = { 10, 20, 30, 40, 60, 80 };
#define N_BUDGETS ELEMENTSOF(budgets)

struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static double rng_uniform(struct rng *r)
{
	return ((double)(rng_next(r) >> 11) + 0.5) / 9007199254740992.0;
}

static double rng_normal(struct rng *r)
{
	return sqrt(-2 * log(rng_uniform(r))) * cos(2 * M_PI * rng_uniform(r));
}

/* One method's run: the true regret of the incumbent after each deployment. */
struct trace {
	double *regret; /* [0, n) */
	size_t n;
};

struct ctx {
	const struct bench_space *bs;
	double sigma;
};

/* A measurement of truth[i] (the caller draws noise in deployment order). */
static void measure(const struct ctx *x, size_t i, struct rng *rng, enum opt_outcome *ret_o, double *ret_cost)
{
	const struct bench_point *p = &x->bs->truth[i];

	*ret_o = p->outcome;
	*ret_cost = p->outcome == OPT_OUTCOME_MEASURED ? p->cost * exp(x->sigma * rng_normal(rng)) : 0;
}

/* Tracks the incumbent (lowest measured cost) and records its true regret. */
static void record(const struct ctx *x, struct trace *t, size_t i, enum opt_outcome o, double measured,
		   double *inc_measured, size_t *inc)
{
	if (o == OPT_OUTCOME_MEASURED && measured < *inc_measured) {
		*inc_measured = measured;
		*inc = i;
	}
	t->regret[t->n++] = *inc == SIZE_MAX ? INFINITY : x->bs->truth[*inc].cost / x->bs->optimum - 1;
}

/* The search, as the study runner drives it. A re-probe (OPT_ASK_CONFIRM)
 * is a deployment too; the incumbent is what the tuner would answer: the
 * configuration with the lowest mean of its measurements (opt_best). */
static int run_search(const struct ctx *x, uint64_t seed, struct trace *t)
{
	const struct bench_space *bs = x->bs;
	struct opt_history h;
	struct opt_settings set;
	struct rng rng = { seed * 7919 + 1 };
	_cleanup_(freep) double *sum = calloc(bs->n, sizeof(double));
	_cleanup_(freep) unsigned *cnt = calloc(bs->n, sizeof(unsigned));
	size_t inc = SIZE_MAX;
	int r = 0;
	bool touched = false;

	if (!sum || !cnt)
		return -ENOMEM;
	opt_settings_init(&set);
	set.seed = seed;
	opt_history_init(&h);
	for (;;) {
		struct opt_candidate c;
		struct opt_trial tr = { 0 };
		struct error err = { 0 };
		size_t i;

		r = opt_next(bs->space, &set, &h, &c, &err);
		if (r < 0) {
			fprintf(stderr, "opt_next: %s\n", error_str(&err, r));
			break;
		}
		if (c.ask == OPT_ASK_DONE)
			break;
		i = bench_space_index(bs, &c.config);
		tr.config = c.config;
		tr.confirm = c.ask == OPT_ASK_CONFIRM;
		measure(x, i, &rng, &tr.outcome, &tr.cost);
		r = opt_history_add(&h, &tr);
		if (r < 0)
			break;
		if (tr.outcome == OPT_OUTCOME_MEASURED) {
			sum[i] += tr.cost;
			cnt[i]++;
			if (inc == i || inc == SIZE_MAX || sum[i] / cnt[i] < sum[inc] / cnt[inc]) {
				inc = i;
				for (size_t k = 0; k < bs->n; k++) /* the incumbent's mean may have risen */
					if (cnt[k] && sum[k] / cnt[k] < sum[inc] / cnt[inc])
						inc = k;
			}
		}
		t->regret[t->n++] = inc == SIZE_MAX ? INFINITY : bs->truth[inc].cost / bs->optimum - 1;
		touched = touched ||
			  (tr.outcome == OPT_OUTCOME_MEASURED && bs->truth[i].cost <= bs->optimum * (1 + TARGET));
		if (getenv("BENCH_TRACE") && strtoull(getenv("BENCH_TRACE"), NULL, 10) == seed) {
			char key[OPT_KEY_MAX];

			(void)opt_config_key(bs->space, &c.config, key, sizeof(key));
			fprintf(stderr, "%3zu %-7s %-7s %-90s %s %.3f  regret %.3f\n", h.n,
				opt_phase_to_string(c.phase), opt_ask_to_string(c.ask), key,
				opt_outcome_to_string(tr.outcome), tr.cost / bs->optimum, t->regret[t->n - 1]);
		}
	}
	if (getenv("BENCH_DEBUG"))
		fprintf(stderr, "seed %" PRIu64 ": %s a configuration within the target\n", seed,
			touched ? "measured" : "never measured");
	opt_history_done(&h);
	return r;
}

/* Random search: a random permutation of the allowed configurations. */
static void run_random(const struct ctx *x, uint64_t seed, struct trace *t, size_t *perm)
{
	struct rng rng = { seed * 104729 + 3 };
	double inc_m = INFINITY;
	size_t inc = SIZE_MAX;

	for (size_t i = 0; i < x->bs->n; i++)
		perm[i] = i;
	for (size_t i = x->bs->n; i > 1; i--) {
		size_t j = (size_t)(rng_next(&rng) % i), tmp = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = tmp;
	}
	for (size_t k = 0; k < x->bs->n; k++) {
		enum opt_outcome o;
		double m;

		measure(x, perm[k], &rng, &o, &m);
		record(x, t, perm[k], o, m, &inc_m, &inc);
	}
}

/* Exhaustive grid: every allowed configuration in grid order. */
static void run_grid(const struct ctx *x, uint64_t seed, struct trace *t)
{
	struct rng rng = { seed * 15485863 + 5 };
	double inc_m = INFINITY;
	size_t inc = SIZE_MAX;

	for (size_t k = 0; k < x->bs->n; k++) {
		enum opt_outcome o;
		double m;

		measure(x, k, &rng, &o, &m);
		record(x, t, k, o, m, &inc_m, &inc);
	}
}

static double evals_to_target(const struct trace *t)
{
	for (size_t k = 0; k < t->n; k++)
		if (t->regret[k] <= TARGET)
			return (double)(k + 1);
	return NOT_REACHED;
}

static double regret_at(const struct trace *t, unsigned budget)
{
	if (t->n == 0)
		return INFINITY;
	return t->regret[MIN((size_t)budget, t->n) - 1];
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double quantile(double *v, size_t n, double q)
{
	qsort(v, n, sizeof(double), cmp_double);
	return v[(size_t)floor(q * (double)(n - 1) + 0.5)];
}

struct summary {
	double med, p25, p75, reached;
	double regret[N_BUDGETS];
};

static void print_count(double v)
{
	if (v >= NOT_REACHED)
		printf("  %6s", "never");
	else
		printf("  %6.0f", v);
}

static int bench_one(const struct bench_space *bs, unsigned seeds, double sigma, bool json, cJSON *out)
{
	static const char *const names[] = { "search", "random", "grid" };
	struct ctx x = { .bs = bs, .sigma = sigma };
	_cleanup_(freep) double *evals = calloc(seeds, sizeof(double));
	_cleanup_(freep) double *reg = calloc(seeds * N_BUDGETS, sizeof(double));
	_cleanup_(freep) size_t *perm = calloc(bs->n, sizeof(size_t));
	struct summary sum[3];
	struct trace t = { 0 };
	char key[OPT_KEY_MAX];

	t.regret = calloc(bs->n * 4 + 64, sizeof(double));
	if (!evals || !reg || !perm || !t.regret) {
		free(t.regret);
		return -ENOMEM;
	}
	for (int m = 0; m < 3; m++) {
		unsigned reached = 0;

		for (unsigned s = 0; s < seeds; s++) {
			t.n = 0;
			if (m == 0) {
				int r = run_search(&x, s, &t);

				if (r < 0) {
					free(t.regret);
					return r;
				}
			} else if (m == 1)
				run_random(&x, s, &t, perm);
			else
				run_grid(&x, s, &t);
			evals[s] = evals_to_target(&t);
			if (getenv("BENCH_DEBUG") && m == 0)
				fprintf(stderr, "seed %u: %zu deployments, final regret %.3f, to-target %g\n", s, t.n,
					t.n ? t.regret[t.n - 1] : -1, evals[s]);
			reached += evals[s] < NOT_REACHED;
			for (size_t b = 0; b < N_BUDGETS; b++)
				reg[b * seeds + s] = regret_at(&t, budgets[b]);
		}
		sum[m].p25 = quantile(evals, seeds, 0.25);
		sum[m].med = quantile(evals, seeds, 0.5);
		sum[m].p75 = quantile(evals, seeds, 0.75);
		sum[m].reached = (double)reached / seeds;
		for (size_t b = 0; b < N_BUDGETS; b++)
			sum[m].regret[b] = quantile(reg + b * seeds, seeds, 0.5);
	}
	free(t.regret);

	(void)opt_config_key(bs->space, &bs->configs[bs->optimum_index], key, sizeof(key));
	if (!json) {
		printf("\n%s: %zu configurations (%zu feasible), optimum $%.4g/Mtok at %s\n", bs->name, bs->n,
		       bs->n_feasible, bs->optimum, key);
		if (bs->workload[0])
			printf("  workload %s%s\n", bs->workload, bs->from_cache ? " (landscape from the cache)" : "");
		printf("  %-7s %31s %8s | median regret %% after N deployments\n", "method",
		       "deployments to within 2 % (p25 median p75)", "reached");
		printf("  %-7s %39s %8s |", "", "", "");
		for (size_t b = 0; b < N_BUDGETS; b++)
			printf(" %6u", budgets[b]);
		printf("\n");
		for (int m = 0; m < 3; m++) {
			printf("  %-7s %15s", names[m], "");
			print_count(sum[m].p25);
			print_count(sum[m].med);
			print_count(sum[m].p75);
			printf("  %5.0f %%  %5.1f%% |",
			       sum[m].med < NOT_REACHED ? sum[m].med / (double)bs->n * 100 : 100.0,
			       sum[m].reached * 100);
			for (size_t b = 0; b < N_BUDGETS; b++)
				printf(" %6.1f", sum[m].regret[b] * 100);
			printf("\n");
		}
	} else {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(out, o))
			return -ENOMEM;
		if (json_add_string(o, "space", bs->name) < 0 ||
		    json_add_number(o, "configurations", (double)bs->n) < 0 ||
		    json_add_number(o, "optimum", bs->optimum) < 0 || json_add_string(o, "optimum_config", key) < 0 ||
		    json_add_string(o, "workload", bs->workload) < 0)
			return -ENOMEM;
		for (int m = 0; m < 3; m++) {
			cJSON *mo = cJSON_AddObjectToObject(o, names[m]);

			if (!mo ||
			    json_add_number(mo, "median_evals", sum[m].med < NOT_REACHED ? sum[m].med : NAN) < 0 ||
			    json_add_number(mo, "p25_evals", sum[m].p25 < NOT_REACHED ? sum[m].p25 : NAN) < 0 ||
			    json_add_number(mo, "p75_evals", sum[m].p75 < NOT_REACHED ? sum[m].p75 : NAN) < 0 ||
			    json_add_number(mo, "reached_fraction", sum[m].reached) < 0)
				return -ENOMEM;
			for (size_t b = 0; b < N_BUDGETS; b++) {
				char k[32];

				snprintf(k, sizeof(k), "median_regret_at_%u", budgets[b]);
				if (json_add_number(mo, k, sum[m].regret[b]) < 0)
					return -ENOMEM;
			}
		}
	}

	/* The targets, checked so that a small run can be a test. */
	{
		bool ok = sum[0].med <= 0.10 * (double)bs->n;

		for (size_t b = 0; b < N_BUDGETS; b++)
			ok = ok && sum[0].regret[b] <= sum[1].regret[b];
		if (!json)
			printf("  target (median ≤ 10 %% of the grid, below random at every budget): %s\n",
			       ok ? "met" : "MISSED");
		return ok ? 0 : 1;
	}
}

/* The landscape as a table per categorical combination: rows max_num_seqs,
 * columns max_num_batched_tokens, cells cost relative to the optimum
 * ("oom" infeasible, "sla" SLA never met, "-" not allowed). */
static void dump(const struct bench_space *bs)
{
	const struct opt_space *s = bs->space;
	int a = opt_space_knob_index(s, OPT_KNOB_MAX_NUM_SEQS),
	    b = opt_space_knob_index(s, OPT_KNOB_MAX_NUM_BATCHED_TOKENS);
	int q = opt_space_knob_index(s, OPT_KNOB_QUANTIZATION), t = opt_space_knob_index(s, OPT_KNOB_TENSOR_PARALLEL);
	char buf[64];

	if (a < 0 || b < 0 || q < 0 || t < 0)
		return;
	for (size_t qi = 0; qi < s->knobs[q].n_values; qi++)
		for (size_t ti = 0; ti < s->knobs[t].n_values; ti++) {
			struct opt_config c = { 0 };

			c.idx[q] = (uint16_t)qi;
			c.idx[t] = (uint16_t)ti;
			printf("  quantization=%s tensor_parallel=%s (cost / optimum)\n    %6s",
			       opt_config_text(s, &c, (size_t)q, buf, sizeof(buf)),
			       opt_config_text(s, &c, (size_t)t, buf + 32, 32), "seqs");
			for (size_t j = 0; j < s->knobs[b].n_values; j++)
				printf(" %6.0f", s->knobs[b].numbers[j]);
			printf("\n");
			for (size_t i = 0; i < s->knobs[a].n_values; i++) {
				printf("    %6.0f", s->knobs[a].numbers[i]);
				for (size_t j = 0; j < s->knobs[b].n_values; j++) {
					int32_t k;

					c.idx[a] = (uint16_t)i;
					c.idx[b] = (uint16_t)j;
					k = bs->index_of[opt_config_ordinal(s, &c)];
					if (k < 0)
						printf(" %6s", "-");
					else if (bs->truth[k].outcome == OPT_OUTCOME_MEASURED)
						printf(" %6.3f", bs->truth[k].cost / bs->optimum);
					else
						printf(" %6s",
						       bs->truth[k].outcome == OPT_OUTCOME_INFEASIBLE ? "oom" : "sla");
				}
				printf("\n");
			}
		}
}

static void help(void)
{
	printf("bench-optimizer [--seeds N] [--sigma S] [--sim] [--cache-dir DIR | --no-cache] [--dump] [--json]\n"
	       "Compares the tuner's search with an exhaustive grid and random search: deployments\n"
	       "until the incumbent is within 2 %% of the optimum, and its regret after N deployments.\n"
	       "  --seeds N       runs per method and space (default 101)\n"
	       "  --sigma S       log-normal measurement noise per deployment (default 0.03)\n"
	       "  --sim           true costs from goodput-sim's engine model in virtual time\n"
	       "                  (a chat workload per space, see bench-landscape.c)\n"
	       "  --cache-dir DIR where --sim landscapes are cached (default: the directory of this\n"
	       "                  program, i.e. the build directory)\n"
	       "  --no-cache      compute --sim landscapes afresh and store nothing\n"
	       "  --dump          print each landscape (cost relative to the optimum)\n"
	       "  --json          machine-readable output\n"
	       "Exit status 1 when a target is missed.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "seeds", required_argument, NULL, 's' },
		{ "sigma", required_argument, NULL, 'n' },
		{ "sim", no_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "cache-dir", required_argument, NULL, 'C' },
		{ "no-cache", no_argument, NULL, 'N' },
		{ "dump", no_argument, NULL, 'D' },
		{ 0 },
	};
	unsigned seeds = 101;
	double sigma = 0.03;
	bool json = false, sim = false, dump_landscape = false;
	const char *cache_dir = NULL;
	bool no_cache = false;
	char exe_dir[4096];
	_cleanup_(cJSON_Deletep) cJSON *out = NULL;
	int c, missed = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0)
		switch (c) {
		case 's':
			seeds = (unsigned)strtoul(optarg, NULL, 10);
			if (seeds < 1 || seeds > 100000) {
				fprintf(stderr, "--seeds: expected 1..100000, got \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 'n':
			sigma = strtod(optarg, NULL);
			if (!(sigma >= 0 && sigma <= 1)) {
				fprintf(stderr, "--sigma: expected 0..1, got \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 'S':
			sim = true;
			break;
		case 'j':
			json = true;
			break;
		case 'C':
			cache_dir = optarg;
			break;
		case 'N':
			no_cache = true;
			break;
		case 'D':
			dump_landscape = true;
			break;
		case 'h':
			help();
			return 0;
		default:
			return 2;
		}
	if (no_cache)
		cache_dir = NULL;
	else if (!cache_dir) {
		/* Next to the program: the build directory, never the source tree. */
		ssize_t n = readlink("/proc/self/exe", exe_dir, sizeof(exe_dir) - 1);
		char *slash;

		exe_dir[n > 0 ? n : 0] = 0;
		slash = strrchr(exe_dir, '/');
		if (slash && slash != exe_dir) {
			*slash = 0;
			cache_dir = exe_dir;
		} else
			cache_dir = ".";
	}
	if (json) {
		out = cJSON_CreateArray();
		if (!out)
			return 1;
	}
	if (!json)
		printf("optimizer benchmark: %u seeds, %.1f %% measurement noise, costs from %s\n", seeds, sigma * 100,
		       sim ? "goodput-sim (virtual time)" : "the synthetic model");
	for (size_t i = 0; i < bench_n_spaces(); i++) {
		struct bench_space *bs = NULL;
		struct error err = { 0 };
		int r = bench_space_new(i, sim, cache_dir, &bs, &err);

		if (r < 0) {
			fprintf(stderr, "space %zu: %s\n", i, error_str(&err, r));
			return 1;
		}
		if (dump_landscape && !json) {
			printf("\n%s\n", bs->name);
			dump(bs);
		}
		r = bench_one(bs, seeds, sigma, json, out);
		bench_space_free(bs);
		if (r < 0) {
			fprintf(stderr, "benchmark failed: %s\n", strerror(-r));
			return 1;
		}
		missed += r;
	}
	if (json) {
		_cleanup_(cjson_freep) char *s = cJSON_Print(out);

		if (!s)
			return 1;
		printf("%s\n", s);
	}
	return missed ? 1 : 0;
}
