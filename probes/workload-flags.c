/* workload-flags.c — the one option table and parser for the workload, SLA
 * and percentile flags that `goodput probe` and `goodput-sim simulate` share
 * (see workload-flags.h for how a command delegates to it).
 *
 * Values are checked as they are parsed (each error names the flag and the
 * value); combinations are checked once at the end, in
 * probe_workload_flags_finish(), since getopt gives flags in any order. */
#include "workload-flags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "parse.h"
#include "workload-json.h"

enum {
	ARG_DATASET_NAME = PROBE_WORKLOAD_FLAG_BASE,
	ARG_DATASET_PATH,
	ARG_RANDOM_INPUT_LEN,
	ARG_RANDOM_OUTPUT_LEN,
	ARG_RANDOM_RANGE_RATIO,
	ARG_INPUT_LEN_DIST,
	ARG_INPUT_LEN_STD,
	ARG_OUTPUT_LEN_DIST,
	ARG_OUTPUT_LEN_STD,
	ARG_PREFIX_LEN,
	ARG_PREFIX_GROUP_SIZE,
	ARG_TURNS,
	ARG_PROMPT_REPETITION,
	ARG_DATASET_OUTPUT_LEN,
	ARG_NUM_PROMPTS,
	ARG_NUM_WARMUPS,
	ARG_REQUEST_RATE,
	ARG_BURSTINESS,
	ARG_ARRIVAL,
	ARG_MAX_CONCURRENCY,
	ARG_IGNORE_EOS,
	ARG_SEED,
	ARG_PERCENTILE_METRICS,
	ARG_METRIC_PERCENTILES,
	ARG_GOODPUT,
	ARG_SLA,
	ARG_ATTAINMENT,
	ARG_WORKLOAD,
	_ARG_END,
};

static const struct option options[] = {
	{ "dataset-name", required_argument, NULL, ARG_DATASET_NAME },
	{ "dataset-path", required_argument, NULL, ARG_DATASET_PATH },
	{ "random-input-len", required_argument, NULL, ARG_RANDOM_INPUT_LEN },
	{ "random-output-len", required_argument, NULL, ARG_RANDOM_OUTPUT_LEN },
	{ "random-range-ratio", required_argument, NULL, ARG_RANDOM_RANGE_RATIO },
	{ "input-len-dist", required_argument, NULL, ARG_INPUT_LEN_DIST },
	{ "input-len-std", required_argument, NULL, ARG_INPUT_LEN_STD },
	{ "output-len-dist", required_argument, NULL, ARG_OUTPUT_LEN_DIST },
	{ "output-len-std", required_argument, NULL, ARG_OUTPUT_LEN_STD },
	{ "random-prefix-len", required_argument, NULL, ARG_PREFIX_LEN },
	{ "prefix-len", required_argument, NULL, ARG_PREFIX_LEN },
	{ "prefix-group-size", required_argument, NULL, ARG_PREFIX_GROUP_SIZE },
	{ "turns", required_argument, NULL, ARG_TURNS },
	{ "prompt-repetition", required_argument, NULL, ARG_PROMPT_REPETITION },
	{ "dataset-output-len", required_argument, NULL, ARG_DATASET_OUTPUT_LEN },
	{ "sharegpt-output-len", required_argument, NULL, ARG_DATASET_OUTPUT_LEN },
	{ "custom-output-len", required_argument, NULL, ARG_DATASET_OUTPUT_LEN },
	{ "num-prompts", required_argument, NULL, ARG_NUM_PROMPTS },
	{ "num-warmups", required_argument, NULL, ARG_NUM_WARMUPS },
	{ "request-rate", required_argument, NULL, ARG_REQUEST_RATE },
	{ "burstiness", required_argument, NULL, ARG_BURSTINESS },
	{ "arrival", required_argument, NULL, ARG_ARRIVAL },
	{ "max-concurrency", required_argument, NULL, ARG_MAX_CONCURRENCY },
	{ "ignore-eos", no_argument, NULL, ARG_IGNORE_EOS },
	{ "seed", required_argument, NULL, ARG_SEED },
	{ "percentile-metrics", required_argument, NULL, ARG_PERCENTILE_METRICS },
	{ "metric-percentiles", required_argument, NULL, ARG_METRIC_PERCENTILES },
	{ "goodput", required_argument, NULL, ARG_GOODPUT },
	{ "sla", required_argument, NULL, ARG_SLA },
	{ "attainment", required_argument, NULL, ARG_ATTAINMENT },
	{ "workload", required_argument, NULL, ARG_WORKLOAD },
	{ NULL, 0, NULL, 0 },
};

#define ALL_METRICS ((1u << _PROBE_METRIC_MAX) - 1)

void probe_workload_flags_init(struct probe_workload_flags *f)
{
	*f = (struct probe_workload_flags){
		.percentiles = { 50, 90, 99 },
		.n_percentiles = 3,
		.percentile_metrics = ALL_METRICS,
		.request_rate_inf = true,
	};
	probe_workload_config_init(&f->workload);
	f->input_dist_kind = f->workload.input.kind;
	f->output_dist_kind = f->workload.output.kind;
}

void probe_workload_flags_done(struct probe_workload_flags *f)
{
	cJSON_Delete(f->workload_json);
	f->workload_json = NULL;
}

const struct option *probe_workload_flags_options(void)
{
	return options;
}

int probe_workload_flags_merge_options(const struct option *own, struct option **ret)
{
	size_t n_own = 0, n_shared = ELEMENTSOF(options) - 1;
	struct option *all;

	while (own && own[n_own].name)
		n_own++;
	all = calloc(n_own + n_shared + 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	if (n_own)
		memcpy(all, own, n_own * sizeof(*all));
	memcpy(all + n_own, options, n_shared * sizeof(*all));
	*ret = all;
	return 0;
}

static int parse_percentile_metrics(const char *arg, unsigned *ret, struct error *err)
{
	_cleanup_(freep) char *copy = strdup(arg);
	char *save = NULL;
	unsigned mask = 0;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		int m = probe_metric_from_name(t);

		if (m < 0)
			return error_set(err, -EINVAL,
					 "--percentile-metrics: unknown metric \"%s\" (expected ttft, tpot, itl, e2el)",
					 t);
		mask |= 1u << m;
	}
	if (!mask)
		return error_set(err, -EINVAL, "--percentile-metrics: expected a list like ttft,tpot,itl, got \"%s\"",
				 arg);
	*ret = mask;
	return 0;
}

static int parse_percentiles(const char *arg, struct probe_workload_flags *f, struct error *err)
{
	_cleanup_(freep) char *copy = strdup(arg);
	double p[PROBE_MAX_PERCENTILES];
	char *save = NULL;
	size_t n = 0;
	int r;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		if (n >= PROBE_MAX_PERCENTILES)
			return error_set(err, -E2BIG, "--metric-percentiles: at most %d values", PROBE_MAX_PERCENTILES);
		r = parse_double("--metric-percentiles", t, 0, 100, &p[n], err);
		if (r < 0)
			return r;
		n++;
	}
	if (n == 0)
		return error_set(err, -EINVAL, "--metric-percentiles: expected a list like 50,90,99, got \"%s\"", arg);
	memcpy(f->percentiles, p, n * sizeof(double));
	f->n_percentiles = n;
	return 0;
}

/* vLLM's `--goodput ttft:500 tpot:50`: the words after the argument that look
 * like NAME:VALUE belong to it too. */
static int parse_goodput(const char *arg, int argc, char **argv, struct probe_workload_flags *f, struct error *err)
{
	int r;

	r = probe_sla_parse(arg, &f->sla, err);
	if (r < 0)
		return error_prefix(err, r, "--goodput");
	while (argv && optind < argc && argv[optind] && argv[optind][0] != '-' && strchr(argv[optind], ':')) {
		r = probe_sla_parse(argv[optind], &f->sla, err);
		if (r < 0)
			return error_prefix(err, r, "--goodput");
		optind++;
	}
	f->set_goodput = true;
	return 0;
}

static int parse_dist(const char *flag, const char *arg, enum probe_dist *ret, struct error *err)
{
	int d = probe_dist_from_name(arg);

	if (d < 0)
		return error_set(err, -EINVAL, "%s: expected fixed, uniform, normal or lognormal, got \"%s\"", flag,
				 arg);
	*ret = d;
	return 0;
}

static int parse_len(const char *flag, const char *arg, double *ret, struct error *err)
{
	uint32_t v;
	int r = parse_u32(flag, arg, 1, PROBE_MAX_TOKENS_PER_REQUEST, &v, err);

	if (r < 0)
		return r;
	*ret = v;
	return 0;
}

static int both_sla_forms(struct error *err)
{
	return error_set(err, -EINVAL,
			 "--goodput and --sla: give one of them (--goodput is vLLM's spelling of the same bounds)");
}

static int handle_value(int opt, const char *arg, int argc, char **argv, struct probe_workload_flags *f,
			struct error *err)
{
	struct probe_workload_config *w = &f->workload;
	int r = 0, v;

	switch (opt) {
	case ARG_DATASET_NAME:
		v = probe_dataset_from_name(arg);
		if (v < 0)
			return error_set(err, -EINVAL,
					 "--dataset-name: expected random, sharegpt or custom, got \"%s\"", arg);
		w->dataset = v;
		return 0;
	case ARG_DATASET_PATH:
		if (!*arg)
			return error_set(err, -EINVAL, "--dataset-path: empty");
		w->dataset_path = arg;
		return 0;
	case ARG_RANDOM_INPUT_LEN:
		return parse_len("--random-input-len", arg, &w->input.mean, err);
	case ARG_RANDOM_OUTPUT_LEN:
		return parse_len("--random-output-len", arg, &w->output.mean, err);
	case ARG_RANDOM_RANGE_RATIO:
		r = parse_double("--random-range-ratio", arg, 0, 0.999999, &w->input.range_ratio, err);
		w->output.range_ratio = w->input.range_ratio;
		f->set_range_ratio = true;
		return r;
	case ARG_INPUT_LEN_DIST:
		return parse_dist("--input-len-dist", arg, &f->input_dist_kind, err);
	case ARG_OUTPUT_LEN_DIST:
		return parse_dist("--output-len-dist", arg, &f->output_dist_kind, err);
	case ARG_INPUT_LEN_STD:
		f->set_input_std = true;
		return parse_double("--input-len-std", arg, 0, PROBE_MAX_TOKENS_PER_REQUEST, &f->input_std, err);
	case ARG_OUTPUT_LEN_STD:
		f->set_output_std = true;
		return parse_double("--output-len-std", arg, 0, PROBE_MAX_TOKENS_PER_REQUEST, &f->output_std, err);
	case ARG_PREFIX_LEN:
		return parse_u32("--random-prefix-len", arg, 0, PROBE_MAX_TOKENS_PER_REQUEST - 1, &w->prefix_len, err);
	case ARG_PREFIX_GROUP_SIZE:
		return parse_u32("--prefix-group-size", arg, 1, PROBE_MAX_REQUESTS, &w->prefix_group_size, err);
	case ARG_TURNS:
		return parse_u32("--turns", arg, 1, 1000, &w->turns, err);
	case ARG_PROMPT_REPETITION:
		return parse_double("--prompt-repetition", arg, 0, 0.99, &w->prompt_repetition, err);
	case ARG_DATASET_OUTPUT_LEN:
		f->set_dataset_output_len = true;
		return parse_u32("--dataset-output-len", arg, 1, PROBE_MAX_TOKENS_PER_REQUEST, &w->dataset_output_len,
				 err);
	case ARG_NUM_PROMPTS:
		f->set_num_prompts = true;
		return parse_u32("--num-prompts", arg, 1, PROBE_MAX_REQUESTS, &w->num_prompts, err);
	case ARG_NUM_WARMUPS:
		return parse_u32("--num-warmups", arg, 0, PROBE_MAX_REQUESTS, &w->num_warmup, err);
	case ARG_REQUEST_RATE:
		f->set_request_rate = true;
		if (strcmp(arg, "inf") == 0 || strcmp(arg, "infinity") == 0) {
			f->request_rate_inf = true;
			w->request_rate = INFINITY;
			return 0;
		}
		r = parse_double("--request-rate", arg, 1e-6, 1e7, &w->request_rate, err);
		if (r < 0)
			return error_set(err, r,
					 "--request-rate: expected a rate in requests/s > 0 or \"inf\", got \"%s\"",
					 arg);
		f->request_rate_inf = false;
		return 0;
	case ARG_BURSTINESS:
		f->set_burstiness = true;
		r = parse_double("--burstiness", arg, 1e-3, 1e3, &w->burstiness, err);
		return r;
	case ARG_ARRIVAL:
		v = probe_arrival_from_name(arg);
		if (v < 0)
			return error_set(err, -EINVAL,
					 "--arrival: expected poisson, gamma, constant or inf, got \"%s\"", arg);
		w->arrival = v;
		f->set_arrival = true;
		return 0;
	case ARG_MAX_CONCURRENCY:
		return parse_u32("--max-concurrency", arg, 1, 1000000, &w->max_concurrency, err);
	case ARG_IGNORE_EOS:
		w->ignore_eos = true;
		return 0;
	case ARG_SEED:
		f->set_seed = true;
		return parse_u64("--seed", arg, 0, UINT64_MAX, &w->seed, err);
	case ARG_PERCENTILE_METRICS:
		return parse_percentile_metrics(arg, &f->percentile_metrics, err);
	case ARG_METRIC_PERCENTILES:
		f->set_percentiles = true;
		return parse_percentiles(arg, f, err);
	case ARG_GOODPUT:
		if (f->set_sla)
			return both_sla_forms(err);
		return parse_goodput(arg, argc, argv, f, err);
	case ARG_SLA:
		if (f->set_goodput)
			return both_sla_forms(err);
		f->set_sla = true;
		r = probe_sla_parse(arg, &f->sla, err);
		return r < 0 ? error_prefix(err, r, "--sla") : 0;
	case ARG_ATTAINMENT:
		f->set_attainment = true;
		r = parse_double("--attainment", arg, 0, 1, &f->sla.attainment, err);
		if (r >= 0 && f->sla.attainment <= 0)
			return error_set(err, -EINVAL, "--attainment: expected a fraction in (0, 1], got \"%s\"", arg);
		return r;
	default:
		return -ENOENT;
	}
}

int probe_workload_flags_handle(int opt, const char *arg, int argc, char **argv, struct probe_workload_flags *f,
				struct error *err)
{
	int r;

	if (opt < PROBE_WORKLOAD_FLAG_BASE || opt >= _ARG_END)
		return 0;
	if (!arg)
		arg = "";
	if ((opt >= ARG_DATASET_NAME && opt <= ARG_DATASET_OUTPUT_LEN) || opt == ARG_BURSTINESS || opt == ARG_ARRIVAL)
		f->shape_flags |= 1u << (opt - PROBE_WORKLOAD_FLAG_BASE);
	switch (opt) {
	case ARG_WORKLOAD:
		if (!*arg)
			return error_set(err, -EINVAL, "--workload: empty");
		f->workload_path = arg;
		return 1;
	case ARG_NUM_WARMUPS:
		f->set_num_warmups = true;
		break;
	case ARG_MAX_CONCURRENCY:
		f->set_max_concurrency = true;
		break;
	case ARG_IGNORE_EOS:
		f->set_ignore_eos = true;
		break;
	default:
		break;
	}
	r = handle_value(opt, arg, argc, argv, f, err);
	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : 1;
}

static int finish_dist(const char *name, enum probe_dist kind, bool set_std, double std, struct probe_length_dist *d,
		       bool range_set, struct error *err)
{
	/* vLLM: a range ratio alone means uniform lengths */
	if (kind == PROBE_DIST_FIXED && range_set && d->range_ratio > 0)
		kind = PROBE_DIST_UNIFORM;
	if ((kind == PROBE_DIST_NORMAL || kind == PROBE_DIST_LOGNORMAL) && !set_std)
		return error_set(err, -EINVAL, "--%s-len-dist %s: needs --%s-len-std", name, probe_dist_name(kind),
				 name);
	if (set_std && kind != PROBE_DIST_NORMAL && kind != PROBE_DIST_LOGNORMAL)
		return error_set(err, -EINVAL, "--%s-len-std: only with --%s-len-dist normal or lognormal", name, name);
	if (kind == PROBE_DIST_LOGNORMAL && std > 10)
		return error_set(err, -EINVAL,
				 "--%s-len-std: for lognormal it is the sigma of ln(length), at most 10, got %g", name,
				 std);
	d->kind = kind;
	d->stddev = std;
	return 0;
}

static int finish_arrival(struct probe_workload_flags *f, struct error *err)
{
	struct probe_workload_config *w = &f->workload;

	if (!f->set_arrival) {
		if (f->request_rate_inf)
			w->arrival = PROBE_ARRIVAL_INF;
		else
			w->arrival = w->burstiness == 1.0 ? PROBE_ARRIVAL_POISSON : PROBE_ARRIVAL_GAMMA;
		return 0;
	}
	switch (w->arrival) {
	case PROBE_ARRIVAL_INF:
		if (f->set_request_rate && !f->request_rate_inf)
			return error_set(err, -EINVAL,
					 "--arrival inf: sends everything at once, but --request-rate is %g",
					 w->request_rate);
		w->request_rate = INFINITY;
		break;
	case PROBE_ARRIVAL_TRACE:
		return error_set(err, -EINVAL, "--arrival trace: replays a log; give it with --workload FILE");
	case PROBE_ARRIVAL_POISSON:
		if (f->set_burstiness && w->burstiness != 1.0)
			return error_set(
				err, -EINVAL,
				"--arrival poisson: has burstiness 1, but --burstiness is %g (use --arrival gamma)",
				w->burstiness);
		__attribute__((fallthrough));
	case PROBE_ARRIVAL_GAMMA:
	case PROBE_ARRIVAL_CONSTANT:
		if (f->request_rate_inf)
			return error_set(err, -EINVAL, "--arrival %s: needs a finite --request-rate",
					 probe_arrival_name(w->arrival));
		break;
	}
	return 0;
}

static int finish_sla(struct probe_workload_flags *f, struct error *err);

/* The first shape flag given, by name, for the message refusing it. */
static const char *first_shape_flag(unsigned mask)
{
	for (const struct option *o = options; o->name; o++)
		if (mask & (1u << (o->val - PROBE_WORKLOAD_FLAG_BASE)))
			return o->name;
	return "?";
}

/* --workload FILE: the block with the probe's defaults under it, and the
 * flags that override a block on top. */
static int finish_block(struct probe_workload_flags *f, struct error *err)
{
	struct probe_workload_spec spec = { 0 };
	const struct probe_workload_config given = f->workload;
	int r;

	if (f->shape_flags)
		return error_set(err, -EINVAL, "--%s: not with --workload (the file describes the traffic)",
				 first_shape_flag(f->shape_flags));
	r = json_parse_file(f->workload_path, 1u << 20, &f->workload_json, err);
	if (r < 0)
		return error_prefix(err, r, "--workload");
	probe_workload_config_init(&spec.config);
	r = probe_workload_from_json(f->workload_json, "", &spec, err);
	if (r < 0)
		return error_prefix(err, r, "--workload %s", f->workload_path);
	f->workload = spec.config;
	if (spec.n_percentiles && !f->set_percentiles) {
		memcpy(f->percentiles, spec.percentiles, sizeof(f->percentiles));
		f->n_percentiles = spec.n_percentiles;
	}
	if (f->set_num_prompts)
		f->workload.num_prompts = given.num_prompts;
	if (f->set_num_warmups)
		f->workload.num_warmup = given.num_warmup;
	if (f->set_seed)
		f->workload.seed = given.seed;
	if (f->set_max_concurrency)
		f->workload.max_concurrency = given.max_concurrency;
	if (f->set_ignore_eos)
		f->workload.ignore_eos = true;
	if (f->set_request_rate && f->request_rate_inf) {
		f->workload.arrival = PROBE_ARRIVAL_INF;
		f->workload.request_rate = INFINITY;
	} else if (f->set_request_rate) {
		f->workload.request_rate = given.request_rate;
		if (f->workload.arrival == PROBE_ARRIVAL_INF)
			f->workload.arrival =
				f->workload.burstiness == 1.0 ? PROBE_ARRIVAL_POISSON : PROBE_ARRIVAL_GAMMA;
	}
	return 0;
}

int probe_workload_flags_finish(struct probe_workload_flags *f, struct error *err)
{
	struct probe_workload_config *w = &f->workload;
	int r;

	if (f->workload_path) {
		r = finish_block(f, err);
		if (r < 0)
			return r;
		return finish_sla(f, err);
	}

	if (w->dataset == PROBE_DATASET_RANDOM && w->dataset_path)
		return error_set(err, -EINVAL, "--dataset-path: only with --dataset-name sharegpt or custom");
	if (w->dataset != PROBE_DATASET_RANDOM && !w->dataset_path)
		return error_set(err, -EINVAL, "--dataset-name %s: needs --dataset-path",
				 probe_dataset_name(w->dataset));
	if (w->dataset == PROBE_DATASET_RANDOM && f->set_dataset_output_len)
		return error_set(err, -EINVAL,
				 "--dataset-output-len: only with a dataset file (use --random-output-len)");
	if (w->prefix_group_size && !w->prefix_len)
		return error_set(err, -EINVAL, "--prefix-group-size: needs --random-prefix-len");
	if (w->dataset != PROBE_DATASET_RANDOM && w->prefix_len)
		return error_set(err, -EINVAL, "--random-prefix-len: only with --dataset-name random");
	if (w->dataset != PROBE_DATASET_RANDOM && (w->turns > 1 || w->prompt_repetition > 0))
		return error_set(err, -EINVAL, "%s: only with --dataset-name random",
				 w->turns > 1 ? "--turns" : "--prompt-repetition");
	r = finish_dist("input", f->input_dist_kind, f->set_input_std, f->input_std, &w->input, f->set_range_ratio,
			err);
	if (r < 0)
		return r;
	r = finish_dist("output", f->output_dist_kind, f->set_output_std, f->output_std, &w->output, f->set_range_ratio,
			err);
	if (r < 0)
		return r;
	r = finish_arrival(f, err);
	if (r < 0)
		return r;
	return finish_sla(f, err);
}

static int finish_sla(struct probe_workload_flags *f, struct error *err)
{
	if (f->set_goodput && f->set_sla)
		return both_sla_forms(err);
	if (f->set_attainment && !probe_sla_has_request_bounds(&f->sla))
		return error_set(err, -EINVAL, "--attainment: needs per-request bounds from --sla or --goodput");
	if (!f->set_attainment && f->sla.attainment == 0 && probe_sla_has_request_bounds(&f->sla))
		f->sla.attainment = PROBE_SLA_DEFAULT_ATTAINMENT;
	return 0;
}

void probe_workload_flags_help(FILE *out)
{
	fputs("Workload (as vllm bench serve):\n"
	      "  --dataset-name random|sharegpt|custom  Where prompts come from (default random)\n"
	      "  --dataset-path FILE        ShareGPT JSON, or JSONL {\"prompt\": ..., \"output_len\": N}\n"
	      "  --random-input-len N       Input tokens (default 1024)\n"
	      "  --random-output-len N      Output tokens to ask for (default 128)\n"
	      "  --random-range-ratio R     Lengths uniform in [N(1-R), N(1+R)], R in [0, 1), as vLLM\n"
	      "                             reads it now (default 0; older vLLM drew from [N*R, N])\n"
	      "  --input-len-dist D         fixed|uniform|normal|lognormal (goodput)\n"
	      "  --input-len-std S          Normal: tokens; lognormal: sigma of ln(length)\n"
	      "  --output-len-dist D, --output-len-std S   The same for output lengths\n"
	      "  --random-prefix-len K      K shared prefix tokens on top of the input (alias --prefix-len)\n"
	      "  --prefix-group-size N      N requests share each prefix (default: all)\n"
	      "  --turns N                  Conversations of N turns, each resending the turns\n"
	      "                             before it and their answers (goodput; default 1)\n"
	      "  --prompt-repetition F      Share F of each prompt copied from earlier in it: text\n"
	      "                             n-gram speculation finds drafts in (goodput; default 0)\n"
	      "  --dataset-output-len N     Fix output lengths of a dataset\n"
	      "                             (aliases --sharegpt-output-len, --custom-output-len)\n"
	      "  --num-prompts N            Measured requests (default 1000)\n"
	      "  --num-warmups N            Warm-up requests first, not measured (default 0)\n"
	      "  --request-rate R|inf       Requests/s (default inf: all at once)\n"
	      "  --burstiness B             Gamma arrivals, shape B (1 = Poisson, default)\n"
	      "  --arrival A                poisson|gamma|constant|inf (default from rate and burstiness)\n"
	      "  --max-concurrency N        At most N requests in flight\n"
	      "  --ignore-eos               Ask the server to ignore EOS so lengths hold\n"
	      "  --seed N                   Seed of every random draw (default 0)\n"
	      "  --workload FILE            A workload block (a study's \"workload\", or what\n"
	      "                             `goodput workload capture` writes): histogram or logged\n"
	      "                             lengths, a rate profile, a replayed trace\n"
	      "Metrics and SLA:\n"
	      "  --percentile-metrics LIST  ttft,tpot,itl,e2el shown in the table (default all)\n"
	      "  --metric-percentiles LIST  Percentiles reported (default 50,90,99)\n"
	      "  --sla ttft:MS,tpot:MS[,itl:MS,e2el:MS]  Per-request bounds; pNN:METRIC:MS for percentile bounds\n"
	      "  --goodput ttft:MS tpot:MS  vLLM's form of the same (not together with --sla)\n"
	      "  --attainment F             Fraction of requests that must be good (default 0.9)\n",
	      out);
}
