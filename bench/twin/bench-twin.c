/* bench-twin — how many real deployments the twin-guided strategy needs,
 * against the plain NLopt search, on simulated "real" servers.
 *
 * Each instance is a goodput-sim engine model whose efficiency constants
 * (MFU per precision, MBU of weights and KV, attention efficiency, step
 * overheads, TP terms) are perturbed at random by up to ±30 % each: the
 * stand-in for a real GPU whose efficiency differs from the published
 * defaults. The tuner never sees them. Every fourth instance also carries
 * costs the model does not have (a fixed per-step cost and one growing with
 * the square of the batch). A deployment of a configuration is a rate search
 * on the instance in virtual time; the tuner sees its cost and load points
 * through the optimizer benchmark's noise model (multiplicative log-normal,
 * σ = 3 %, a fresh draw per deployment and per figure).
 *
 * Figures per instance: the deployments until the incumbent (the best mean
 * measured cost) is truly within 2 % of the instance's optimum (known from
 * its true constants), for the plain search (opt_next), the twin from a cold
 * start, and a second twin study on the same instance warm-started from the
 * first one's calibration. Then the mismatch case: instances with a strong
 * batch-squared step cost the twin cannot express, where the twin must
 * report the poor fit and still end no worse than the plain search at the
 * same budget (true regret of the final answer, medians over seeds). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench-twin-gpu.h"
#include "json-util.h"
#include "macro.h"
#include "twin.h"

#define TARGET      0.02
#define NOT_REACHED 1e9
#define TRACE_MAX   128

struct spec {
	const char *name, *model, *gpu;
	unsigned gpus;
	const char *space, *sla;
};

static const struct spec specs[] = {
	{ "8b/2xL40S", "llama-3.1-8b", "L40S", 2,
	  "{\"max_num_seqs\": {\"min\": 4, \"max\": 512, \"scale\": \"log2\"},"
	  "\"max_num_batched_tokens\": {\"min\": 256, \"max\": 16384, \"scale\": \"log2\"},"
	  "\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1, 2]}",
	  "ttft:1000,tpot:50" },
	{ "70b/4xH100", "llama-3.1-70b", "H100", 4,
	  "{\"max_num_seqs\": {\"min\": 8, \"max\": 1024, \"scale\": \"log2\"},"
	  "\"max_num_batched_tokens\": {\"min\": 512, \"max\": 32768, \"scale\": \"log2\"},"
	  "\"quantization\": [\"none\", \"fp8\", \"awq\"], \"tensor_parallel\": [1, 2, 4]}",
	  "ttft:2000,tpot:75" },
};

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

struct options {
	unsigned instances, mismatch, prompts, budget, mismatch_budget;
	double sigma, fault_seq, mismatch_seq;
	bool json, verbose;
	int only;            /* --verbose for this instance only; -1 = all */
	double check_median; /* 0 = no check */
};

/* One instance: the space, the hidden true model and what it measures. */
struct instance {
	const struct spec *sp;
	struct opt_space *space;
	struct twin_setup setup; /* what the tuner knows */
	struct twin *real;       /* the true model (with faults) */
	struct twin *tuner;      /* the tuner's twin (cache shared across its studies) */
	struct sim_profile truth;
	double optimum;
	size_t n_configs;
	struct twin_trial *meas; /* per grid ordinal: the noise-free measurement (lazy) */
	bool *have;
	double *true_cost; /* per grid ordinal (INFINITY: not measured), lazy */
};

static void instance_free(struct instance *in)
{
	twin_free(in->real);
	twin_free(in->tuner);
	opt_space_free(in->space);
	free(in->meas);
	free(in->have);
	free(in->true_cost);
}

static int instance_init(struct instance *in, const struct options *o, unsigned idx, double fault_seq,
			 double fault_step, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct twin_setup real_setup;
	struct opt_space_options so = { 0 };
	struct opt_config best;
	struct twin_prediction pr;
	int r;

	*in = (struct instance){ .sp = &specs[idx % ELEMENTSOF(specs)] };
	j = cJSON_Parse(in->sp->space);
	if (!j)
		return -EINVAL;
	so.gpus = in->sp->gpus;
	r = opt_space_from_json(j, "search_space", NULL, "constraints", &so, &in->space, err);
	if (r < 0)
		return r;
	twin_setup_init(&in->setup);
	snprintf(in->setup.model, sizeof(in->setup.model), "%s", in->sp->model);
	snprintf(in->setup.gpu, sizeof(in->setup.gpu), "%s", in->sp->gpu);
	in->setup.gpus = in->sp->gpus;
	in->setup.workload.input =
		(struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 768, .range_ratio = 1.0 / 3 };
	in->setup.workload.output =
		(struct probe_length_dist){ .kind = PROBE_DIST_UNIFORM, .mean = 192, .range_ratio = 1.0 / 3 };
	in->setup.workload.num_prompts = o->prompts;
	in->setup.workload.arrival = PROBE_ARRIVAL_POISSON;
	in->setup.rel_tol = 0.02;
	in->setup.max_runs = 10;
	r = probe_sla_parse(in->sp->sla, &in->setup.sla, err);
	if (r < 0)
		return r;
	in->setup.sla.attainment = 0.9;
	real_setup = in->setup;
	real_setup.fault_step_usec = fault_step;
	real_setup.fault_step_per_seq_usec = fault_seq;
	r = twin_new(in->space, &real_setup, &in->real, err);
	if (r < 0)
		return r;
	r = twin_new(in->space, &in->setup, &in->tuner, err);
	if (r < 0)
		return r;
	twin_base_profile(in->real, &in->truth);
	bench_twin_perturb(&in->truth, idx);
	r = twin_predict_best(in->real, &in->truth, &best, &pr, err);
	if (r < 0)
		return r;
	in->optimum = pr.cost;
	in->n_configs = in->space->n_grid;
	in->meas = calloc(in->n_configs, sizeof(*in->meas));
	in->have = calloc(in->n_configs, sizeof(bool));
	in->true_cost = malloc(in->n_configs * sizeof(double));
	if (!in->meas || !in->have || !in->true_cost)
		return -ENOMEM;
	return 0;
}

/* A deployment: the true measurement (cached) seen through fresh noise. */
static int deploy(struct instance *in, const struct opt_config *c, double sigma, struct rng *rng,
		  struct twin_trial *ret, struct error *err)
{
	uint64_t o = opt_config_ordinal(in->space, c);
	struct twin_trial tr;
	int r;

	if (!in->have[o]) {
		r = twin_measure_sim(in->real, &in->truth, c, &in->meas[o], err);
		if (r < 0)
			return r;
		in->have[o] = true;
		in->true_cost[o] =
			in->meas[o].trial.outcome == OPT_OUTCOME_MEASURED ? in->meas[o].trial.cost : INFINITY;
	}
	tr = in->meas[o];
	if (tr.trial.outcome == OPT_OUTCOME_MEASURED) {
		double f = exp(sigma * rng_normal(rng));

		tr.trial.cost *= f;
		tr.max_rate /= f;
	}
	for (size_t p = 0; p < tr.n_points; p++)
		for (size_t k = 0; k < _TWIN_FIG_MAX; k++)
			tr.points[p].fig[k] *= exp(sigma * rng_normal(rng));
	*ret = tr;
	return 0;
}

struct incumbent {
	double *sum;
	unsigned *cnt;
	uint64_t best;
};

static double regret_of(const struct instance *in, const struct incumbent *inc)
{
	return inc->best == UINT64_MAX ? INFINITY : in->true_cost[inc->best] / in->optimum - 1;
}

static void incumbent_tell(struct incumbent *inc, uint64_t o, size_t n, const struct opt_trial *t)
{
	if (t->outcome != OPT_OUTCOME_MEASURED)
		return;
	inc->sum[o] += t->cost;
	inc->cnt[o]++;
	inc->best = UINT64_MAX;
	for (size_t k = 0; k < n; k++)
		if (inc->cnt[k] &&
		    (inc->best == UINT64_MAX || inc->sum[k] / inc->cnt[k] < inc->sum[inc->best] / inc->cnt[inc->best]))
			inc->best = k;
}

struct study {
	double to_target;     /* deployments until within 2 %, NOT_REACHED */
	unsigned deployments; /* until done */
	double final_regret;
	bool fallback, drift, warm;
	double fit_error, tol;
	struct twin_calibration cal;
	bool have_cal;
	double regret[TRACE_MAX]; /* true regret of the incumbent after each deployment */
};

/* One study: twin (use_twin) or plain, on instance in, with noise seed. */
static int near_probes = -1;

static int run_study(struct instance *in, bool use_twin, const struct twin_calibration *warm, unsigned budget,
		     double sigma, uint64_t seed, bool verbose, struct study *ret, struct error *err)
{
	struct twin_settings set;
	struct twin_history h;
	struct rng rng = { seed * 7919 + 1 };
	struct incumbent inc = { .best = UINT64_MAX };
	struct study st = { .to_target = NOT_REACHED, .final_regret = INFINITY };
	int r = 0;

	inc.sum = calloc(in->n_configs, sizeof(double));
	inc.cnt = calloc(in->n_configs, sizeof(unsigned));
	if (!inc.sum || !inc.cnt) {
		free(inc.sum);
		free(inc.cnt);
		return -ENOMEM;
	}
	twin_settings_init(&set);
	if (near_probes >= 0)
		set.near_probes = (unsigned)near_probes;
	set.plain.seed = seed;
	set.plain.max_trials = budget;
	twin_history_init(&h);
	for (;;) {
		struct twin_candidate c;
		struct twin_trial tr;
		uint64_t o;

		if (use_twin) {
			r = twin_next(in->tuner, &set, &h, warm, &c, err);
		} else {
			struct opt_history oh;

			opt_history_init(&oh);
			for (size_t k = 0; k < h.n && r >= 0; k++)
				r = opt_history_add(&oh, &h.trials[k].trial);
			if (r >= 0)
				r = opt_next(in->space, &set.plain, &oh, &c.opt, err);
			opt_history_done(&oh);
			c.predicted_cost = NAN;
		}
		if (r < 0)
			break;
		if (use_twin) {
			st.fallback = st.fallback || c.fallback;
			if (c.fallback)
				st.fit_error = c.fit.error;
			st.drift = st.drift || c.drift;
			st.warm = c.warm;
			if (c.calibrated) {
				st.fit_error = c.fit.error;
				st.tol = c.tol;
				twin_calibration_from_fit(&c.fit, c.tol, &st.cal);
				st.have_cal = true;
			}
		}
		if (c.opt.ask == OPT_ASK_DONE) {
			if (verbose && use_twin)
				fprintf(stderr, "    done: %s\n", c.message);
			break;
		}
		r = deploy(in, &c.opt.config, sigma, &rng, &tr, err);
		if (r < 0)
			break;
		tr.trial.confirm = c.opt.ask == OPT_ASK_CONFIRM;
		tr.predicted_cost = c.predicted_cost;
		r = twin_history_add(&h, &tr);
		if (r < 0)
			break;
		o = opt_config_ordinal(in->space, &c.opt.config);
		incumbent_tell(&inc, o, in->n_configs, &tr.trial);
		st.deployments++;
		st.final_regret = regret_of(in, &inc);
		if (st.deployments <= TRACE_MAX)
			st.regret[st.deployments - 1] = st.final_regret;
		if (st.final_regret <= TARGET && st.to_target >= NOT_REACHED)
			st.to_target = st.deployments;
		if (verbose && use_twin) {
			char key[OPT_KEY_MAX];

			(void)opt_config_key(in->space, &c.opt.config, key, sizeof(key));
			fprintf(stderr, "    %2u %-8s %-80s true %.3f pred %.3f  %s\n", st.deployments,
				twin_phase_to_string(c.phase), key, in->true_cost[o] / in->optimum,
				c.predicted_cost / in->optimum, c.message);
		}
	}
	twin_history_done(&h);
	free(inc.sum);
	free(inc.cnt);
	if (r < 0)
		return r;
	*ret = st;
	return 0;
}

/* The study's true regret after k deployments (its final one when it stopped earlier). */
static double regret_at(const struct study *st, unsigned k)
{
	if (k == 0)
		return INFINITY;
	if (k >= st->deployments || k > TRACE_MAX)
		return st->final_regret;
	return st->regret[k - 1];
}

static void print_count(double v)
{
	if (v >= NOT_REACHED)
		printf(" %6s", "never");
	else
		printf(" %6.0f", v);
}

static void help(void)
{
	printf("bench-twin [OPTIONS] — deployments the twin-guided search needs vs the plain search\n"
	       "  --instances N       perturbed goodput-sim instances (default 20)\n"
	       "  --mismatch N        seeds of the mismatch case (default 8; 0 = skip)\n"
	       "  --prompts N         requests per load point (default 48)\n"
	       "  --budget N          max distinct deployments per study (default 40)\n"
	       "  --mismatch-budget N budget of the mismatch comparison (default 15)\n"
	       "  --sigma S           log-normal measurement noise (default 0.03)\n"
	       "  --check-median X    exit 1 unless the twin's median to 2 %% is <= X, the warm study's is\n"
	       "                      no larger and it is done in fewer deployments, and the mismatch case\n"
	       "                      reported the poor fit and was no worse than plain (also at plain's\n"
	       "                      deployments)\n"
	       "  --verbose           trace every twin deployment on stderr\n"
	       "  --only N            run instance N only (and mismatch seed N)\n"
	       "  --near-probes N     the twin's near_probes setting (default: twin_settings_init's)\n"
	       "  --json              print the summary as JSON\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "instances", required_argument, NULL, 'i' },
		{ "mismatch", required_argument, NULL, 'm' },
		{ "prompts", required_argument, NULL, 'p' },
		{ "budget", required_argument, NULL, 'b' },
		{ "mismatch-budget", required_argument, NULL, 'B' },
		{ "sigma", required_argument, NULL, 's' },
		{ "check-median", required_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "only", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "near-probes", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { .instances = 20,
			     .mismatch = 8,
			     .prompts = 48,
			     .budget = 40,
			     .mismatch_budget = 15,
			     .sigma = 0.03,
			     .fault_seq = 3.0,
			     .mismatch_seq = 1000,
			     .only = -1 };
	/* per instance: deployments to 2 % (plain, twin, warm), until done (same) */
	_cleanup_(freep) double *v = NULL, *mm = NULL;
	double *to[3], *done[3], *mm_plain, *mm_twin, *mm_twin_same;
	unsigned n_run = 0, n_mm = 0, reached[3] = { 0 }, n_fallback = 0, n_fallback_mm = 0, warm_fewer = 0;
	double med_to[3], med_done[3], med_mm_plain = NAN, med_mm_twin = NAN, med_mm_twin_same = NAN;
	clock_t t0 = clock();
	int c, r;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) >= 0) {
		switch (c) {
		case 'i':
			o.instances = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'm':
			o.mismatch = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'p':
			o.prompts = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			o.budget = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'B':
			o.mismatch_budget = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 's':
			o.sigma = strtod(optarg, NULL);
			break;
		case 'c':
			o.check_median = strtod(optarg, NULL);
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'o':
			o.only = atoi(optarg);
			break;
		case 'j':
			o.json = true;
			break;
		case 'n':
			near_probes = atoi(optarg);
			break;
		case 'h':
			help();
			return 0;
		default:
			return 2;
		}
	}
	if (o.instances == 0 || o.prompts < 8 || o.budget == 0 || !(o.sigma >= 0 && o.sigma < 1)) {
		fprintf(stderr, "bench-twin: --instances >= 1, --prompts >= 8, --budget >= 1, --sigma in [0, 1)\n");
		return 2;
	}
	v = calloc(6 * (size_t)o.instances, sizeof(double));
	mm = calloc(3 * ((size_t)o.mismatch + 1), sizeof(double));
	if (!v || !mm)
		return 1;
	for (size_t k = 0; k < 3; k++) {
		to[k] = v + k * o.instances;
		done[k] = v + (3 + k) * o.instances;
	}
	mm_plain = mm;
	mm_twin = mm + o.mismatch + 1;
	mm_twin_same = mm + 2 * (o.mismatch + 1);

	if (!o.json) {
		printf("twin benchmark: %u instances (constants ±30 %%, every 4th with unmodelled step costs), "
		       "%.0f %% noise, %u prompts per load point, budget %u\n",
		       o.instances, o.sigma * 100, o.prompts, o.budget);
		printf("deployments until the incumbent is within 2 %% of the optimum, and until done (#)\n");
		printf("%4s %-11s %6s %5s | %6s %6s %6s | %6s %6s %6s | %7s %7s %s\n", "inst", "space", "configs",
		       "fault", "plain", "twin", "warm", "plain#", "twin#", "warm#", "fit err", "tol", "notes");
	}
	for (unsigned i = 0; i < o.instances; i++) {
		struct instance in;
		bool verbose = o.verbose;
		struct study sp, st, sw;
		struct error err = { 0 };
		bool fault = i % 4 == 3;

		if (o.only >= 0 && (unsigned)o.only != i)
			continue;
		r = instance_init(&in, &o, i, fault ? o.fault_seq : 0, fault ? 1000 : 0, &err);
		if (r >= 0)
			r = run_study(&in, false, NULL, o.budget, o.sigma, 100 + i, false, &sp, &err);
		if (r >= 0 && verbose)
			fprintf(stderr, "instance %u (%s) cold:\n", i, in.sp->name);
		if (r >= 0)
			r = run_study(&in, true, NULL, o.budget, o.sigma, 100 + i, verbose, &st, &err);
		if (r >= 0 && verbose)
			fprintf(stderr, "instance %u warm:\n", i);
		if (r >= 0)
			r = run_study(&in, true, st.have_cal ? &st.cal : NULL, o.budget, o.sigma, 5000 + i, verbose,
				      &sw, &err);
		if (r < 0) {
			fprintf(stderr, "instance %u: %s\n", i, error_str(&err, r));
			instance_free(&in);
			return 1;
		}
		to[0][n_run] = sp.to_target;
		to[1][n_run] = st.to_target;
		to[2][n_run] = sw.to_target;
		done[0][n_run] = sp.deployments;
		done[1][n_run] = st.deployments;
		done[2][n_run] = sw.deployments;
		for (size_t k = 0; k < 3; k++)
			reached[k] += to[k][n_run] < NOT_REACHED;
		n_run++;
		n_fallback += st.fallback;
		warm_fewer += sw.deployments < st.deployments;
		if (!o.json) {
			printf("%4u %-11s %6" PRIu64 " %5s |", i, in.sp->name, opt_space_count(in.space),
			       fault ? "yes" : "no");
			print_count(sp.to_target);
			print_count(st.to_target);
			print_count(sw.to_target);
			printf(" | %6u %6u %6u | %6.1f%% %6.1f%% %s%s%s\n", sp.deployments, st.deployments,
			       sw.deployments, st.fit_error * 100, st.tol * 100, st.fallback ? "fallback " : "",
			       sw.drift ? "drift " : "", sw.warm ? "" : "(warm start dropped)");
			fflush(stdout);
		}
		instance_free(&in);
	}
	for (size_t k = 0; k < 3; k++) {
		med_to[k] = bench_twin_median(to[k], n_run);
		med_done[k] = bench_twin_median(done[k], n_run);
	}

	if (o.mismatch && !o.json) {
		printf("\nmismatch: a batch-squared step cost the twin cannot express (%.0f us x n^2/64), budget %u\n",
		       o.mismatch_seq, o.mismatch_budget);
		printf("%4s %-11s | %12s %12s %12s | %7s %6s %6s | %s\n", "seed", "space", "plain regret",
		       "twin regret", "twin@plain#", "fit err", "plain#", "twin#", "twin says");
	}
	for (unsigned m = 0; m < o.mismatch; m++) {
		struct instance in;
		struct study sp, st;
		struct error err = { 0 };

		if (o.only >= 0 && (unsigned)o.only != m)
			continue;
		/* Space 0 (the 8B) only: the 70B's large batches are too slow with it. */
		r = instance_init(&in, &o, 2 * (1000 + m), o.mismatch_seq, 0, &err);
		if (r >= 0)
			r = run_study(&in, false, NULL, o.mismatch_budget, o.sigma, 300 + m, false, &sp, &err);
		if (r >= 0 && o.verbose)
			fprintf(stderr, "mismatch %u:\n", m);
		if (r >= 0)
			r = run_study(&in, true, NULL, o.mismatch_budget, o.sigma, 300 + m, o.verbose, &st, &err);
		if (r < 0) {
			fprintf(stderr, "mismatch %u: %s\n", m, error_str(&err, r));
			instance_free(&in);
			return 1;
		}
		mm_plain[n_mm] = sp.final_regret;
		mm_twin[n_mm] = st.final_regret;
		/* the same budget: the twin's incumbent after as many deployments as the plain search made */
		mm_twin_same[n_mm] = regret_at(&st, sp.deployments);
		n_mm++;
		n_fallback_mm += st.fallback;
		if (!o.json)
			printf("%4u %-11s | %11.1f%% %11.1f%% %11.1f%% | %6.1f%% %6u %6u | %s\n", m, in.sp->name,
			       sp.final_regret * 100, st.final_regret * 100, mm_twin_same[n_mm - 1] * 100,
			       st.fit_error * 100, sp.deployments, st.deployments,
			       st.fallback ? "poor fit: fell back to the plain search" : "fit ok");
		instance_free(&in);
	}
	if (n_mm) {
		med_mm_plain = bench_twin_median(mm_plain, n_mm);
		med_mm_twin = bench_twin_median(mm_twin, n_mm);
		med_mm_twin_same = bench_twin_median(mm_twin_same, n_mm);
	}

	if (o.json) {
		_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
		_cleanup_(cjson_freep) char *text = NULL;

		if (!j || json_add_number(j, "instances", n_run) < 0 ||
		    json_add_number(j, "median_to_target_plain", med_to[0]) < 0 ||
		    json_add_number(j, "median_to_target_twin", med_to[1]) < 0 ||
		    json_add_number(j, "median_to_target_warm", med_to[2]) < 0 ||
		    json_add_number(j, "median_done_plain", med_done[0]) < 0 ||
		    json_add_number(j, "median_done_twin", med_done[1]) < 0 ||
		    json_add_number(j, "median_done_warm", med_done[2]) < 0 ||
		    json_add_number(j, "reached_plain", reached[0]) < 0 ||
		    json_add_number(j, "reached_twin", reached[1]) < 0 ||
		    json_add_number(j, "reached_warm", reached[2]) < 0 ||
		    json_add_number(j, "false_fallbacks", n_fallback) < 0 ||
		    json_add_number(j, "mismatch_seeds", n_mm) < 0 ||
		    json_add_number(j, "mismatch_fallbacks", n_fallback_mm) < 0 ||
		    (n_mm && (json_add_number(j, "mismatch_median_regret_plain", med_mm_plain) < 0 ||
			      json_add_number(j, "mismatch_median_regret_twin", med_mm_twin) < 0 ||
			      json_add_number(j, "mismatch_median_regret_twin_same_budget", med_mm_twin_same) < 0)))
			return 1;
		text = cJSON_Print(j);
		if (!text)
			return 1;
		puts(text);
	} else {
		printf("\nmedian deployments to 2 %%: plain %.1f, twin %.1f, warm %.1f (reached %u, %u, %u of %u)\n",
		       med_to[0], med_to[1], med_to[2], reached[0], reached[1], reached[2], n_run);
		printf("median deployments until done: plain %.1f, twin %.1f, warm %.1f (warm fewer than cold on "
		       "%u/%u)\n",
		       med_done[0], med_done[1], med_done[2], warm_fewer, n_run);
		printf("false fallbacks (healthy instances handed to the plain search): %u/%u\n", n_fallback, n_run);
		if (n_mm)
			printf("mismatch: poor fit reported on %u/%u; median final regret plain %.1f %%, twin %.1f %% "
			       "(%.1f %% after as many deployments as plain)\n",
			       n_fallback_mm, n_mm, med_mm_plain * 100, med_mm_twin * 100, med_mm_twin_same * 100);
		printf("cpu time %.0f s\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
	}
	if (o.check_median > 0) {
		bool ok = med_to[1] <= o.check_median && med_to[2] <= med_to[1] && med_done[2] < med_done[1];

		if (n_mm)
			ok = ok && n_fallback_mm * 2 > n_mm && med_mm_twin <= med_mm_plain + 1e-9 &&
			     med_mm_twin_same <= med_mm_plain + 1e-9;
		if (!ok) {
			fprintf(stderr,
				"bench-twin: check failed (twin median %.1f, limit %.1f; warm %.1f; until done twin "
				"%.1f, "
				"warm %.1f; mismatch fallbacks %u/%u, regret twin %.3f (same budget %.3f) vs plain "
				"%.3f)\n",
				med_to[1], o.check_median, med_to[2], med_done[1], med_done[2], n_fallback_mm, n_mm,
				med_mm_twin, med_mm_twin_same, med_mm_plain);
			return 1;
		}
	}
	return 0;
}
