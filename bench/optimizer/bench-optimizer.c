/* bench-optimizer — how many deployments goodput's searches need on cost
 * landscapes, side by side with their peers: random search, the grid in
 * vLLM auto_tune's order, and Optuna's TPE sampler as a practitioner runs it.
 *
 * Each landscape's truth ($/Mtok, or infeasible / SLA never met per
 * configuration, and the load points a dry-run trial stores) is computed
 * once for the whole grid (bench-landscape.c): with --sim from study specs,
 * each configuration evaluated by `goodput tune --dry-run`'s evaluator;
 * else from a fast synthetic model. Every method then measures through the
 * same evaluator (bench-methods.h): multiplicative log-normal noise, a fresh
 * draw per deployment (and per load-point figure), seeded per run. TPE runs
 * in Python (bench-tpe.py: multivariate, grouped, with the memory
 * pre-flight's verdicts and re-measured repeats) and asks this program,
 * started with --serve, for each evaluation. Every run begins with the
 * runner's baseline deployment, counted for every method.
 *
 * Figures per method and landscape, over many seeds: deployments until the
 * configuration the method would answer (the lowest mean of its
 * measurements) is truly within 2 % of the optimum — median and p90 — the
 * share of seeds that got there within 20 and within 40 deployments, the
 * share of the first 40 deployments spent on configurations that cost more
 * than 1.5 × the optimum (or never met the SLA, or did not start), the
 * share that started, and the median run length.
 *
 * Debugging: BENCH_TRACE=SEED prints the searches' deployments for that seed. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array.h"
#include "bench-methods.h"
#include "json-util.h"
#include "macro.h"
#include "parse.h"

#define TARGET      0.02
#define NOT_REACHED 1e9
#define FIRST       40
#define WITHIN_A    20
#define WITHIN_B    40

struct summary {
	bool ran;
	double med, p90, within_a, within_b, dear, started, length;
};

static double quantile(double *v, size_t n, double q)
{
	qsort(v, n, sizeof(double), array_cmp_double);
	return v[(size_t)floor(q * (double)(n - 1) + 0.5)];
}

static double evals_to_target(const struct bench_trace *t)
{
	for (size_t k = 0; k < t->n; k++)
		if (t->regret[k] <= TARGET)
			return (double)(k + 1);
	return NOT_REACHED;
}

struct opts {
	unsigned seeds;
	double sigma;
	bool sim, json, dump;
	const char *cache_dir, *source_root, *python, *tpe_script, *self;
	size_t max_deployments; /* TPE's runs stop there (the others stop on their own or at the grid's end) */
	bool methods[_BENCH_METHOD_MAX];
};

static int run_method(const struct opts *o, enum bench_method m, size_t space_index, const struct bench_space *bs,
		      struct summary *ret)
{
	_cleanup_(freep) double *evals = calloc(o->seeds, sizeof(double));
	_cleanup_(freep) double *len = calloc(o->seeds, sizeof(double));
	double started = 0, dear = 0, counted = 0;
	unsigned within_a = 0, within_b = 0;
	struct bench_trace t = { 0 };
	int r = 0;

	if (!evals || !len)
		return -ENOMEM;
	for (unsigned s = 0; s < o->seeds; s++) {
		struct error err = { 0 };

		if (m == BENCH_TPE)
			r = bench_run_tpe(o->python, o->tpe_script, o->self, space_index, o->sim, o->source_root,
					  o->cache_dir, o->sigma, s, o->max_deployments, &t, &err);
		else
			r = bench_run(m, bs, o->sigma, s, o->max_deployments, &t, &err);
		if (r == -ENOPKG || r == -EOPNOTSUPP) {
			bench_trace_done(&t);
			*ret = (struct summary){ .ran = false };
			return 0;
		}
		if (r < 0) {
			fprintf(stderr, "%s, %s, seed %u: %s\n", bs->name, bench_method_name(m), s, error_str(&err, r));
			bench_trace_done(&t);
			return r;
		}
		evals[s] = evals_to_target(&t);
		within_a += evals[s] <= WITHIN_A;
		within_b += evals[s] <= WITHIN_B;
		len[s] = (double)t.n;
		/* the baseline (deployment 1) is nobody's choice */
		for (size_t k = 1; k < t.n && k < FIRST; k++) {
			started += t.started[k];
			dear += t.dear[k];
			counted++;
		}
	}
	bench_trace_done(&t);
	*ret = (struct summary){
		.ran = true,
		.med = quantile(evals, o->seeds, 0.5),
		.p90 = quantile(evals, o->seeds, 0.9),
		.within_a = (double)within_a / o->seeds,
		.within_b = (double)within_b / o->seeds,
		.dear = counted > 0 ? dear / counted : 0,
		.started = counted > 0 ? started / counted : 1,
		.length = quantile(len, o->seeds, 0.5),
	};
	return 0;
}

static void print_count(double v)
{
	if (v >= NOT_REACHED)
		printf(" %7s", "never");
	else
		printf(" %7.0f", v);
}

static int add_summary(cJSON *o, const char *name, const struct summary *s)
{
	cJSON *m = cJSON_AddObjectToObject(o, name);

	if (!m || json_add_number(m, "median_deployments", s->med < NOT_REACHED ? s->med : NAN) < 0 ||
	    json_add_number(m, "p90_deployments", s->p90 < NOT_REACHED ? s->p90 : NAN) < 0 ||
	    json_add_number(m, "within_20_fraction", s->within_a) < 0 ||
	    json_add_number(m, "within_40_fraction", s->within_b) < 0 ||
	    json_add_number(m, "dear_fraction", s->dear) < 0 ||
	    json_add_number(m, "started_fraction", s->started) < 0 ||
	    json_add_number(m, "median_run_length", s->length) < 0)
		return -ENOMEM;
	return 0;
}

static int bench_one(const struct opts *o, size_t space_index, const struct bench_space *bs, cJSON *out)
{
	struct summary sum[_BENCH_METHOD_MAX] = { 0 };
	char key[OPT_KEY_MAX];
	int r;
	bool ok;

	for (int m = 0; m < _BENCH_METHOD_MAX; m++)
		if (o->methods[m]) {
			r = run_method(o, (enum bench_method)m, space_index, bs, &sum[m]);
			if (r < 0)
				return r;
		}
	(void)opt_config_key(bs->space, &bs->configs[bs->optimum_index], key, sizeof(key));
	if (out) {
		cJSON *l = cJSON_CreateObject();

		if (!l || !cJSON_AddItemToArray(out, l) || json_add_string(l, "landscape", bs->name) < 0 ||
		    json_add_number(l, "configurations", (double)bs->n) < 0 ||
		    json_add_number(l, "feasible", (double)bs->n_feasible) < 0 ||
		    json_add_number(l, "optimum", bs->optimum) < 0 || json_add_string(l, "optimum_config", key) < 0)
			return -ENOMEM;
		for (int m = 0; m < _BENCH_METHOD_MAX; m++)
			if (sum[m].ran && add_summary(l, bench_method_name((enum bench_method)m), &sum[m]) < 0)
				return -ENOMEM;
	} else {
		printf("\n%s: %zu configurations (%zu feasible), optimum $%.4g/Mtok at %s%s\n", bs->name, bs->n,
		       bs->n_feasible, bs->optimum, key, bs->from_cache ? " (landscape from the cache)" : "");
		if (bs->label[0])
			printf("  %s\n", bs->label);
		printf("  %-7s %s\n", "method",
		       "to 2 %: median    p90 | within 20 | within 40 | > 1.5x opt | started | run");
		for (int m = 0; m < _BENCH_METHOD_MAX; m++) {
			if (!o->methods[m])
				continue;
			if (!sum[m].ran) {
				printf("  %-7s skipped (python3-optuna not installed, or not a study landscape)\n",
				       bench_method_name((enum bench_method)m));
				continue;
			}
			printf("  %-7s %6s", bench_method_name((enum bench_method)m), "");
			print_count(sum[m].med);
			print_count(sum[m].p90);
			printf(" | %8.0f %% | %8.0f %% | %9.0f %% | %6.0f %% | %4.0f\n", sum[m].within_a * 100,
			       sum[m].within_b * 100, sum[m].dear * 100, sum[m].started * 100, sum[m].length);
		}
	}

	/* the targets, checked so that a small run can be a test */
	if (o->sim) {
		ok = !sum[BENCH_MODEL].ran || !sum[BENCH_TPE].ran ||
		     (sum[BENCH_MODEL].med <= 0.5 * sum[BENCH_TPE].med && sum[BENCH_MODEL].within_b >= 0.95 &&
		      sum[BENCH_MODEL].dear <= 0.10);
		if (!out)
			printf("  target (model: median <= 1/2 of TPE's, >= 95 %% within 40, <= 10 %% > 1.5x): %s\n",
			       !sum[BENCH_TPE].ran || !sum[BENCH_MODEL].ran ? "not run"
			       : ok                                         ? "met"
									    : "MISSED");
	} else {
		ok = sum[BENCH_SEARCH].med <= 0.10 * (double)bs->n;
		if (!out)
			printf("  target (median <= 10 %% of the grid): %s\n", ok ? "met" : "MISSED");
	}
	return ok ? 0 : 1;
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
	size_t nq = q >= 0 ? s->knobs[q].n_values : 1, nt = t >= 0 ? s->knobs[t].n_values : 1;
	char buf[64];

	if (a < 0 || b < 0)
		return;
	for (size_t qi = 0; qi < nq; qi++)
		for (size_t ti = 0; ti < nt; ti++) {
			struct opt_config c = { 0 };

			if (q >= 0)
				c.idx[q] = (uint16_t)qi;
			if (t >= 0)
				c.idx[t] = (uint16_t)ti;
			printf("  quantization=%s tensor_parallel=%s (cost / optimum)\n    %6s",
			       q >= 0 ? opt_config_text(s, &c, (size_t)q, buf, sizeof(buf)) : "none",
			       t >= 0 ? opt_config_text(s, &c, (size_t)t, buf + 32, 32) : "1", "seqs");
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
	printf("bench-optimizer [--seeds N] [--sigma S] [--sim] [--methods LIST] [--tpe SCRIPT] [--python PATH]\n"
	       "                [--space I] [--cache-dir DIR | --no-cache] [--source-root DIR] [--dump] [--json]\n"
	       "bench-optimizer --serve I --seed S [--sim] [--sigma S] [...]\n"
	       "Compares goodput's searches (the model search, the plain search) with random search, the grid in\n"
	       "vLLM auto_tune's order and Optuna's TPE: deployments until the answer is within 2 %% of the\n"
	       "optimum (median, p90), the share of seeds there within 20 and 40 deployments, the share of\n"
	       "deployments on configurations > 1.5x the optimum, the share that started.\n"
	       "  --seeds N       runs per method and landscape (default 21)\n"
	       "  --sigma S       log-normal measurement noise per deployment (default 0.03)\n"
	       "  --sim           the study landscapes, each configuration as `goodput tune --dry-run`\n"
	       "                  evaluates it (bench/optimizer/landscapes/, configs/studies/sim-demo.json)\n"
	       "  --methods LIST  comma-separated: search,random,grid,tpe,model (default all)\n"
	       "  --tpe SCRIPT    bench-tpe.py (TPE is skipped without it, or without python3-optuna)\n"
	       "  --python PATH   the Python that has Optuna (default /usr/bin/python3)\n"
	       "  --space I       only landscape I\n"
	       "  --max-deployments N  where every run stops (default 60: \"never\" beyond)\n"
	       "  --cache-dir DIR where --sim landscapes are cached (default: this program's directory)\n"
	       "  --no-cache      compute --sim landscapes afresh and store nothing\n"
	       "  --source-root DIR  where the study specs are (default: the source tree it was built from)\n"
	       "  --dump          print each landscape (cost relative to the optimum)\n"
	       "  --json          machine-readable output\n"
	       "  --serve I       the evaluator of landscape I over stdin/stdout (bench-serve.c), seeded by --seed\n"
	       "Exit status 1 when a target is missed.\n");
}

static int parse_methods(const char *list, bool *ret)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	memset(ret, 0, sizeof(bool) * _BENCH_METHOD_MAX);
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		bool found = false;

		for (int m = 0; m < _BENCH_METHOD_MAX; m++)
			if (strcmp(w, bench_method_name((enum bench_method)m)) == 0)
				ret[m] = found = true;
		if (!found)
			return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "seeds", required_argument, NULL, 's' },
		{ "sigma", required_argument, NULL, 'n' },
		{ "sim", no_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "cache-dir", required_argument, NULL, 'C' },
		{ "no-cache", no_argument, NULL, 'N' },
		{ "dump", no_argument, NULL, 'D' },
		{ "methods", required_argument, NULL, 'm' },
		{ "tpe", required_argument, NULL, 'T' },
		{ "python", required_argument, NULL, 'P' },
		{ "space", required_argument, NULL, 'i' },
		{ "serve", required_argument, NULL, 'v' },
		{ "seed", required_argument, NULL, 'e' },
		{ "source-root", required_argument, NULL, 'R' },
		{ "max-deployments", required_argument, NULL, 'M' },
		{ 0 },
	};
	struct opts o = { .seeds = 21, .sigma = 0.03, .python = "/usr/bin/python3", .source_root = BENCH_SOURCE_ROOT };
	int64_t only = -1, serve = -1;
	uint64_t seed = 0, max_deployments = 60;
	struct error err = { 0 };
	bool no_cache = false;
	char exe[4096];
	_cleanup_(cJSON_Deletep) cJSON *out = NULL;
	int c, r = 0, missed = 0;
	ssize_t n;

	for (int m = 0; m < _BENCH_METHOD_MAX; m++)
		o.methods[m] = true;
	while (r >= 0 && (c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
		switch (c) {
		case 's':
			r = parse_u32("--seeds", optarg, 1, 100000, &o.seeds, &err);
			break;
		case 'n':
			r = parse_double("--sigma", optarg, 0, 1, &o.sigma, &err);
			break;
		case 'S':
			o.sim = true;
			break;
		case 'j':
			o.json = true;
			break;
		case 'C':
			o.cache_dir = optarg;
			break;
		case 'N':
			no_cache = true;
			break;
		case 'D':
			o.dump = true;
			break;
		case 'm':
			r = parse_methods(optarg, o.methods);
			if (r < 0)
				error_set(&err, r,
					  "--methods: expected a list of search,random,grid,tpe,model, got \"%s\"",
					  optarg);
			break;
		case 'T':
			o.tpe_script = optarg;
			break;
		case 'P':
			o.python = optarg;
			break;
		case 'i':
			r = parse_i64("--space", optarg, 0, 999, &only, &err);
			break;
		case 'v':
			r = parse_i64("--serve", optarg, 0, 999, &serve, &err);
			break;
		case 'e':
			r = parse_u64("--seed", optarg, 0, UINT64_MAX, &seed, &err);
			break;
		case 'R':
			o.source_root = optarg;
			break;
		case 'M':
			r = parse_u64("--max-deployments", optarg, 1, 1000000, &max_deployments, &err);
			break;
		case 'h':
			help();
			return 0;
		default:
			return 2;
		}
	if (r < 0) {
		fprintf(stderr, "bench-optimizer: %s\n", error_str(&err, r));
		return 2;
	}
	o.max_deployments = (size_t)max_deployments;
	/* the cache and the TPE script's --serve both need this program's path */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	o.self = exe;
	if (no_cache)
		o.cache_dir = NULL;
	else if (!o.cache_dir) {
		static char dir[4096];
		char *slash;

		snprintf(dir, sizeof(dir), "%s", exe);
		slash = strrchr(dir, '/');
		if (slash && slash != dir) {
			*slash = 0;
			o.cache_dir = dir;
		} else
			o.cache_dir = ".";
	}
	if (!o.tpe_script)
		o.methods[BENCH_TPE] = false;

	if (serve >= 0) {
		struct bench_space *bs = NULL;

		r = (size_t)serve < bench_n_spaces(o.sim)
			    ? bench_space_new((size_t)serve, o.sim, o.source_root, o.cache_dir, &bs, &err)
			    : error_set(&err, -EINVAL, "--serve: no landscape %" PRId64, serve);

		if (r >= 0)
			r = bench_serve(bs, o.sigma, seed, o.max_deployments, STDIN_FILENO, STDOUT_FILENO, &err);
		bench_space_free(bs);
		if (r < 0) {
			fprintf(stderr, "bench-optimizer --serve: %s\n", error_str(&err, r));
			return 1;
		}
		return 0;
	}

	if (o.json) {
		out = cJSON_CreateArray();
		if (!out)
			return 1;
	} else
		printf("optimizer benchmark: %u seeds, %.1f %% measurement noise, costs from %s\n", o.seeds,
		       o.sigma * 100,
		       o.sim ? "goodput tune --dry-run's evaluator (goodput-sim, virtual time)"
			     : "the synthetic model");
	for (size_t i = 0; i < bench_n_spaces(o.sim); i++) {
		struct bench_space *bs = NULL;

		if (only >= 0 && (size_t)only != i)
			continue;
		r = bench_space_new(i, o.sim, o.source_root, o.cache_dir, &bs, &err);
		if (r < 0) {
			fprintf(stderr, "landscape %zu: %s\n", i, error_str(&err, r));
			return 1;
		}
		if (o.dump && !o.json) {
			printf("\n%s\n", bs->name);
			dump(bs);
		}
		r = bench_one(&o, i, bs, out);
		bench_space_free(bs);
		if (r < 0) {
			fprintf(stderr, "benchmark failed: %s\n", strerror(-r));
			return 1;
		}
		missed += r;
	}
	if (out) {
		_cleanup_(cjson_freep) char *s = cJSON_Print(out);

		if (!s)
			return 1;
		printf("%s\n", s);
	}
	return missed ? 1 : 0;
}
