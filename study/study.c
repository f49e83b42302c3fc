/* study.c — the study object: defaults, the spec dispatched by the table of
 * study-schema.c, and the checks that span several keys (the command
 * method's hooks, the workload's distributions, the SLA against the scenario,
 * quantizations against the search space, and the search space itself). */
#include "study.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "json-util.h"
#include "macro.h"
#include "study-internal.h"
#include "time-util.h"

/* ---- names ---- */

const char *study_quant_to_string(enum study_quant q)
{
	return (unsigned)q < _STUDY_QUANT_MAX ? study_quant_names[q] : NULL;
}

int study_quant_from_string(const char *s)
{
	for (int i = 0; s && i < _STUDY_QUANT_MAX; i++)
		if (strcmp(study_quant_names[i], s) == 0)
			return i;
	return -EINVAL;
}

/* ---- checks across keys ---- */

/* The plain strings that reach the engine's command line, each possibly an
 * argument of its own ("vllm serve {model}"): one starting with '-' would be
 * taken for a flag. */
static int check_argv_values(const struct study *s, struct error *err)
{
	static const char *const checkpoint_paths[_STUDY_QUANT_MAX] = {
		"model.checkpoints.none", "model.checkpoints.fp8", "model.checkpoints.int8", "model.checkpoints.awq"
	};
	const struct {
		const char *path, *v;
	} values[] = {
		{ "model.name", s->model.name },
		{ "gpu.type", s->gpu.type },
		{ "deploy.host", s->deploy.host },
	};

	for (size_t i = 0; i < ELEMENTSOF(values); i++)
		if (values[i].v && values[i].v[0] == '-')
			return error_set(err, -EINVAL,
					 "%s: \"%.64s\" must not start with '-' (it would be taken for a flag)",
					 values[i].path, values[i].v);
	for (size_t q = 0; q < _STUDY_QUANT_MAX; q++)
		if (s->model.checkpoints[q] && s->model.checkpoints[q][0] == '-')
			return error_set(err, -EINVAL,
					 "%s: \"%.64s\" must not start with '-' (it would be taken for a flag)",
					 checkpoint_paths[q], s->model.checkpoints[q]);
	return 0;
}

/* The slurm method's keys: only with it; sbatch options that would hand
 * the job to a shell (--wrap) or take over what goodput sets are refused. */
static int check_slurm(struct study *s, struct error *err)
{
	static const char *const taken[] = { "--wrap",  "--parsable", "--job-name", "-J",     "--output", "-o",
					     "--error", "-e",         "--comment",  "--gres", "--chdir",  "-D" };
	const cJSON *deploy = cJSON_GetObjectItemCaseSensitive(s->json, "deploy");
	const struct {
		const char *key;
		bool given;
	} keys[] = {
		{ "partition", s->deploy.partition != NULL },
		{ "account", s->deploy.account != NULL },
		{ "time_limit", s->deploy.time_limit_usec > 0 },
		{ "extra_args", s->deploy.extra_args != NULL },
		{ "poll_interval", deploy && cJSON_GetObjectItemCaseSensitive(deploy, "poll_interval") },
	};

	s->deploy.host_given = deploy && cJSON_GetObjectItemCaseSensitive(deploy, "host");
	if (s->deploy.method != STUDY_DEPLOY_SLURM) {
		for (size_t i = 0; i < ELEMENTSOF(keys); i++)
			if (keys[i].given)
				return error_set(err, -EINVAL,
						 "deploy.%s: only for \"method\": \"slurm\" (method is %s)",
						 keys[i].key, study_method_names[s->deploy.method]);
		return 0;
	}
	for (size_t i = 0; s->deploy.extra_args && s->deploy.extra_args[i]; i++)
		for (size_t k = 0; k < ELEMENTSOF(taken); k++) {
			size_t n = strlen(taken[k]);
			const char *a = s->deploy.extra_args[i];

			if (strncmp(a, taken[k], n) == 0 && (a[n] == 0 || a[n] == '=' || taken[k][1] != '-'))
				return error_set(
					err, -EINVAL, "deploy.extra_args[%zu]: \"%.64s\": %s is goodput's to set%s", i,
					a, taken[k],
					strcmp(taken[k], "--wrap") == 0 ? " (it would run the job through a shell)"
									: "");
		}
	if (cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s->json, "gpu"), "devices"))
		return error_set(
			err, -EINVAL,
			"gpu.devices: not for \"method\": \"slurm\" (Slurm gives each job its GPUs; set gpu.count)");
	if (!s->deploy.host_given)
		s->deploy.host = "0.0.0.0";
	return 0;
}

/* The command method's hooks: deploy and teardown are required with it,
 * and meaningless (refused) with the other methods. */
static int check_deploy(struct study *s, struct error *err)
{
	const struct {
		const char *key;
		const char **argv;
	} hooks[] = {
		{ "deploy_command", s->deploy.deploy_command },
		{ "teardown_command", s->deploy.teardown_command },
		{ "health_command", s->deploy.health_command },
	};

	for (size_t i = 0; i < ELEMENTSOF(hooks); i++)
		if (hooks[i].argv && s->deploy.method != STUDY_DEPLOY_COMMAND)
			return error_set(err, -EINVAL, "deploy.%s: only for \"method\": \"command\" (method is %s)",
					 hooks[i].key, study_method_names[s->deploy.method]);
	if (s->deploy.method == STUDY_DEPLOY_COMMAND && (!s->deploy.deploy_command || !s->deploy.teardown_command))
		return error_set(err, -EINVAL,
				 "deploy.%s: missing (\"method\": \"command\" needs deploy_command and "
				 "teardown_command)",
				 s->deploy.deploy_command ? "teardown_command" : "deploy_command");
	if (s->deploy.user_bus && s->deploy.method != STUDY_DEPLOY_SYSTEMD)
		return error_set(err, -EINVAL, "deploy.user: only for \"method\": \"systemd\"");
	return check_slurm(s, err);
}

/* The GPUs: gpu.devices gives the indices (and so the count); without it
 * the study uses 0..count−1. Both given must agree. */
static int check_gpus(struct study *s, struct error *err)
{
	const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(s->json, "gpu");
	bool count_given = gpu && cJSON_GetObjectItemCaseSensitive(gpu, "count");

	if (s->gpu.n_devices == 0) {
		for (unsigned i = 0; i < s->gpu.count; i++)
			s->gpu.devices[i] = i;
		s->gpu.n_devices = s->gpu.count;
		return 0;
	}
	if (count_given && s->gpu.count != s->gpu.n_devices)
		return error_set(err, -EINVAL, "gpu.devices: %u GPUs listed, but gpu.count is %u", s->gpu.n_devices,
				 s->gpu.count);
	s->gpu.count = s->gpu.n_devices;
	return 0;
}

/* A CPU host (gpu.type "cpu"): one server at a time on gpu.cores cores,
 * priced per core-hour; the cost reads what one server costs an hour, as
 * for one GPU. A GPU host: priced per GPU-hour. */
static int check_host_kind(struct study *s, struct error *err)
{
	const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(s->json, "gpu");

	s->gpu.cpu = strcasecmp(s->gpu.type, "cpu") == 0;
	if (!s->gpu.cpu) {
		if (cJSON_GetObjectItemCaseSensitive(gpu, "cores") ||
		    cJSON_GetObjectItemCaseSensitive(gpu, "price_per_core_hour"))
			return error_set(err, -EINVAL,
					 "gpu.%s: only for \"type\": \"cpu\" (a GPU host is priced per "
					 "GPU-hour)",
					 cJSON_GetObjectItemCaseSensitive(gpu, "cores") ? "cores"
											: "price_per_core_hour");
		if (!(s->gpu.price_per_gpu_hour > 0))
			return error_set(err, -EINVAL, "gpu.price_per_gpu_hour: missing");
		return 0;
	}
	if (cJSON_GetObjectItemCaseSensitive(gpu, "price_per_gpu_hour"))
		return error_set(err, -EINVAL,
				 "gpu.price_per_gpu_hour: a CPU host (\"type\": \"cpu\") is priced per core-hour: "
				 "gpu.price_per_core_hour");
	if (!(s->gpu.price_per_core_hour > 0))
		return error_set(err, -EINVAL,
				 "gpu.price_per_core_hour: missing (\"type\": \"cpu\" is priced per "
				 "core-hour)");
	if (s->gpu.count != 1 || s->gpu.n_devices > 1 || s->gpu.per_node > 1)
		return error_set(err, -EINVAL,
				 "gpu.count: a CPU host runs one server at a time; give its cores as gpu.cores");
	if (s->deploy.method == STUDY_DEPLOY_SLURM)
		return error_set(err, -EINVAL, "gpu.type: \"cpu\" is not for \"method\": \"slurm\"");
	if (s->gpu.cores == 0)
		s->gpu.cores = 1;
	s->gpu.price_per_gpu_hour = s->gpu.price_per_core_hour * s->gpu.cores;
	return 0;
}

/* A node's GPUs: at most the study's, all of them when not given. */
static int check_per_node(struct study *s, struct error *err)
{
	if (s->gpu.per_node == 0)
		s->gpu.per_node = s->gpu.count;
	if (s->gpu.per_node > s->gpu.count)
		return error_set(err, -EINVAL, "gpu.per_node: %u is more than gpu.count (%u)", s->gpu.per_node,
				 s->gpu.count);
	return 0;
}

/* The quantization knob: checked against the allowed set, or added to the
 * search space from it (in the spec's order). */
static int quantization_knob(struct study *s, struct error *err)
{
	const cJSON *a, *item, *knob;
	size_t i = 0;

	knob = cJSON_GetObjectItemCaseSensitive(s->search_space, OPT_KNOB_QUANTIZATION);
	if (knob) {
		const cJSON *vals = cJSON_IsObject(knob) ? cJSON_GetObjectItemCaseSensitive(knob, "values") : knob;

		cJSON_ArrayForEach(item, vals)
		{
			int q = cJSON_IsString(item) ? study_quant_from_string(item->valuestring) : -EINVAL;

			if (q >= 0 && !(s->quantizations & (1u << q)))
				return error_set(err, -EINVAL,
						 "search_space.quantization[%zu]: \"%s\" is not among the allowed "
						 "quantizations (add it to \"quantizations\")",
						 i, item->valuestring);
			i++;
		}
		return 0;
	}
	if (s->quantizations == 1u << STUDY_QUANT_NONE)
		return 0; /* nothing to choose: the server runs unquantized */
	cJSON *list = cJSON_CreateArray();
	if (!list)
		return -ENOMEM;
	a = cJSON_GetObjectItemCaseSensitive(s->json, "quantizations");
	cJSON_ArrayForEach(item, a)
	{
		cJSON *v = cJSON_CreateString(item->valuestring);

		if (!v || !cJSON_AddItemToArray(list, v)) {
			cJSON_Delete(v);
			cJSON_Delete(list);
			return -ENOMEM;
		}
	}
	/* search_space points into our own copy of the spec */
	if (!cJSON_AddItemToObject((cJSON *)s->search_space, OPT_KNOB_QUANTIZATION, list)) {
		cJSON_Delete(list);
		return -ENOMEM;
	}
	return 0;
}

/* The longest request the workload sends, tokens (0: unknown: lengths
 * from a dataset, or unbounded). */
static double longest(const struct probe_length_dist *d)
{
	switch (d->kind) {
	case PROBE_DIST_FIXED:
		return d->mean;
	case PROBE_DIST_UNIFORM:
		return ceil(d->mean * (1 + d->range_ratio));
	case PROBE_DIST_NORMAL:
		return ceil(d->mean + 4 * d->stddev);
	case PROBE_DIST_LOGNORMAL:
		return ceil(d->mean * exp(4 * d->stddev));
	case PROBE_DIST_HISTOGRAM:
		for (uint32_t i = d->hist.n; i > 0; i--)
			if (d->hist.count[i - 1] > 0)
				return floor(d->hist.le[i - 1]);
		return 0;
	case PROBE_DIST_SAMPLES:
		return 0;
	}
	return 0;
}

/* model.max_model_len: "workload" resolved, and the fixed value made a knob
 * of one value (the engine gets its flag; knob text leaves it out). */
static int max_model_len_knob(struct study *s, const struct study_options *opts, struct error *err)
{
	bool engine_has = false;
	const cJSON *knob;
	cJSON *list;

	if (s->model.max_model_len_from_workload) {
		double in = longest(&s->workload.input), out = longest(&s->workload.output);

		if (s->workload.dataset != PROBE_DATASET_RANDOM || !(in > 0) || !(out > 0))
			return error_set(err, -EINVAL,
					 "model.max_model_len: \"workload\" needs the random dataset's lengths (not "
					 "samples); give a number of tokens");
		s->model.max_model_len = (uint32_t)MIN(16777216.0, ceil((in + out) * 1.1 / 256) * 256);
	}
	if (!s->model.max_model_len)
		return 0;
	for (size_t i = 0; opts && opts->extra_knobs && opts->extra_knobs[i]; i++)
		engine_has = engine_has || strcmp(opts->extra_knobs[i], OPT_KNOB_MAX_MODEL_LEN) == 0;
	if (!engine_has)
		return error_set(err, -EINVAL, "model.max_model_len: the engine profile has no max_model_len knob");
	knob = cJSON_GetObjectItemCaseSensitive(s->search_space, OPT_KNOB_MAX_MODEL_LEN);
	if (knob) {
		/* a stored spec holds the knob this added when it was first read */
		if (cJSON_IsArray(knob) && cJSON_GetArraySize(knob) == 1 &&
		    cJSON_IsNumber(cJSON_GetArrayItem(knob, 0)) &&
		    cJSON_GetArrayItem(knob, 0)->valuedouble == s->model.max_model_len)
			return 0;
		return error_set(err, -EINVAL,
				 "model.max_model_len: search_space.max_model_len is given too (keep one of them)");
	}
	list = cJSON_CreateArray();
	if (!list || !cJSON_AddItemToArray(list, cJSON_CreateNumber(s->model.max_model_len)) ||
	    !cJSON_AddItemToObject((cJSON *)s->search_space, OPT_KNOB_MAX_MODEL_LEN, list)) {
		cJSON_Delete(list);
		return -ENOMEM;
	}
	return 0;
}

/* A knob of the disaggregated shape: the shape, its workers, a side's knob. */
static bool disaggregated_knob(const char *name)
{
	return strcmp(name, OPT_KNOB_SHAPE) == 0 || strncmp(name, "prefill_", 8) == 0 ||
	       strncmp(name, "decode_", 7) == 0;
}

/* deploy.shape: the "shape" knob it makes (["aggregated", "disaggregated"]
 * for both, ["disaggregated"] alone), and the knobs each shape has. A
 * stored spec holds the knob this added when it was first read. */
static int shape_knob(struct study *s, struct error *err)
{
	bool both = s->deploy.shape == STUDY_SHAPE_BOTH;
	const cJSON *item, *knob = cJSON_GetObjectItemCaseSensitive(s->search_space, OPT_KNOB_SHAPE);
	cJSON *list;

	cJSON_ArrayForEach(item, s->search_space)
	{
		if (s->deploy.shape == STUDY_SHAPE_AGGREGATED && disaggregated_knob(item->string))
			return error_set(err, -EINVAL,
					 "search_space.%s: a knob of disaggregated serving; set deploy.shape to "
					 "\"disaggregated\" or \"both\"",
					 item->string);
		if (s->deploy.shape == STUDY_SHAPE_DISAGGREGATED &&
		    (strcmp(item->string, OPT_KNOB_MAX_NUM_SEQS) == 0 ||
		     strcmp(item->string, OPT_KNOB_MAX_NUM_BATCHED_TOKENS) == 0 ||
		     strcmp(item->string, OPT_KNOB_TENSOR_PARALLEL) == 0 ||
		     strcmp(item->string, OPT_KNOB_DATA_PARALLEL) == 0 ||
		     strcmp(item->string, OPT_KNOB_PIPELINE_PARALLEL) == 0))
			return error_set(err, -EINVAL,
					 "search_space.%s: one server's knob; disaggregated, each side has its own "
					 "(prefill_%s, decode_%s)",
					 item->string, item->string, item->string);
	}
	if (s->deploy.shape == STUDY_SHAPE_AGGREGATED)
		return 0;
	if (knob) {
		int n = cJSON_GetArraySize(knob);

		if (cJSON_IsArray(knob) && n == (both ? 2 : 1) && cJSON_IsString(cJSON_GetArrayItem(knob, n - 1)) &&
		    strcmp(cJSON_GetArrayItem(knob, n - 1)->valuestring, "disaggregated") == 0)
			return 0;
		return error_set(err, -EINVAL,
				 "search_space.shape: deploy.shape sets it (remove it from search_space)");
	}
	list = both ? cJSON_CreateStringArray((const char *const[]){ "aggregated", "disaggregated" }, 2)
		    : cJSON_CreateStringArray((const char *const[]){ "disaggregated" }, 1);
	if (!list || !cJSON_AddItemToObject((cJSON *)s->search_space, OPT_KNOB_SHAPE, list)) {
		cJSON_Delete(list);
		return -ENOMEM;
	}
	return 0;
}

/* The space from the spec's search_space as it now stands: a server's GPUs
 * are on one node, so tensor_parallel must fit gpu.per_node. */
static int parse_space(const struct study *s, const struct study_options *opts, struct opt_space **ret,
		       struct error *err)
{
	struct opt_space_options so = {
		.gpus = s->gpu.per_node,
		.extra_knobs = opts ? opts->extra_knobs : NULL,
	};

	return opt_space_from_json(s->search_space, "search_space", s->constraints, "constraints", &so, ret, err);
}

static int build_space(struct study *s, const struct study_options *opts, struct error *err)
{
	int r;

	r = quantization_knob(s, err);
	if (r >= 0)
		r = max_model_len_knob(s, opts, err);
	if (r >= 0)
		r = shape_knob(s, err);
	if (r < 0)
		return r;
	return parse_space(s, opts, &s->space, err);
}

/* What a study's rate search needs of the workload (the block itself was
 * checked by its reader, probe_workload_from_json). */
static int build_workload(struct study_parse *p, struct error *err)
{
	struct probe_workload_config *w = &p->s.workload;

	if (w->arrival == PROBE_ARRIVAL_INF && !w->max_concurrency)
		return error_set(
			err, -EINVAL,
			"workload.arrival: inf sends every request at once; set max_concurrency for a closed loop");
	return 0;
}

/* The SLA's attainment, and the SLA against the scenario. */
static int check_sla(struct study_parse *p, struct error *err)
{
	struct study *s = &p->s;
	bool request_bounds = probe_sla_has_request_bounds(&s->sla);

	if (!isnan(p->attainment) && !request_bounds)
		return error_set(err, -EINVAL,
				 "sla.attainment: needs a per-request bound (ttft_ms, tpot_ms, itl_ms or e2el_ms)");
	if (!isnan(p->attainment))
		s->sla.attainment = p->attainment;
	else if (request_bounds)
		s->sla.attainment = PROBE_SLA_DEFAULT_ATTAINMENT;
	if (s->scenario == OPT_SCENARIO_ONLINE && probe_sla_empty(&s->sla))
		return error_set(err, -EINVAL,
				 "sla: an online study needs latency bounds (or use \"scenario\": \"offline\")");
	if (s->scenario == OPT_SCENARIO_OFFLINE && !probe_sla_empty(&s->sla))
		return error_set(err, -EINVAL,
				 "sla: an offline study has no latency bounds (remove \"sla\" or use online)");
	return 0;
}

/* ---- the whole ---- */

static void study_defaults(struct study_parse *p)
{
	struct study *s = &p->s;

	probe_workload_config_init(&s->workload);
	s->workload.num_prompts = 200;
	s->workload.ignore_eos = true;
	s->workload.input.mean = 1024;
	s->workload.output.mean = 128;
	s->n_percentiles = 3;
	s->percentiles[0] = 50;
	s->percentiles[1] = 90;
	s->percentiles[2] = 99;
	s->quantizations = 1u << STUDY_QUANT_NONE;
	s->gpu.count = 1;
	s->budget.max_trials = 40;
	s->budget.max_wall_time_usec = USEC_INFINITY;
	s->budget.parallel = 1;
	s->budget.min_configurations = 3;
	s->probe.tolerance = 0.05;
	s->probe.min_rate = 0.05;
	s->probe.max_steps = 12;
	s->probe.request_timeout_usec = 300 * USEC_PER_SEC;
	s->deploy.host = "127.0.0.1";
	s->deploy.stop_timeout_usec = 30 * USEC_PER_SEC;
	s->deploy.command_timeout_usec = 120 * USEC_PER_SEC;
	s->deploy.poll_interval_usec = 2 * USEC_PER_SEC;
	s->search.seed = 1;
	s->baseline = true;
	s->sweep = true;
	s->search.preflight = true;
	s->search.algorithm = "LN_SBPLX";
	p->attainment = NAN;
}

/* Frees what a study owns, leaving it empty. */
static void study_done(struct study *s)
{
	opt_space_free(s->space);
	free(s->engine_args);
	free(s->quality_check);
	free(s->deploy.deploy_command);
	free(s->deploy.teardown_command);
	free(s->deploy.health_command);
	free(s->deploy.extra_args);
	cJSON_Delete(s->json);
	*s = (struct study){ 0 };
}

static void study_parse_done(struct study_parse *p)
{
	study_done(&p->s);
}

uint64_t study_point_cap_usec(const struct study *s, uint64_t share)
{
	if (s->probe.max_point_usec > 0)
		return s->probe.max_point_usec;
	/* a saturation run and about five points of the search in a share */
	if (share > 0)
		return CLAMP(share / 6, 30 * USEC_PER_SEC, 600 * USEC_PER_SEC);
	return 600 * USEC_PER_SEC;
}

int study_from_json(const cJSON *j, const struct study_options *opts, struct study **ret, struct error *err)
{
	_cleanup_(study_parse_done) struct study_parse p = { 0 };
	struct study *s;
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "study: expected a JSON object");
	p.s.json = cJSON_Duplicate(j, true);
	if (!p.s.json)
		return -ENOMEM;
	study_defaults(&p);
	r = json_dispatch(p.s.json, "", study_fields, 0, &p, err);
	if (r == 0)
		r = check_gpus(&p.s, err);
	if (r == 0)
		r = check_per_node(&p.s, err);
	if (r == 0)
		r = check_host_kind(&p.s, err);
	if (r == 0)
		r = check_deploy(&p.s, err);
	if (r == 0)
		r = check_argv_values(&p.s, err);
	if (r == 0)
		r = build_workload(&p, err);
	if (r == 0)
		r = check_sla(&p, err);
	if (r < 0)
		return r;
	if (p.s.probe.max_rate > 0 && p.s.probe.max_rate <= p.s.probe.min_rate)
		return error_set(err, -EINVAL, "probe.max_rate: %g must be above probe.min_rate (%g)",
				 p.s.probe.max_rate, p.s.probe.min_rate);
	r = build_space(&p.s, opts, err);
	if (r < 0)
		return r;
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	*s = p.s;
	p.s = (struct study){ 0 }; /* now owned by s */
	*ret = s;
	return 0;
}

int study_load_file(const char *path, const struct study_options *opts, struct study **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	int r;

	r = json_parse_file(path, STUDY_SPEC_MAX_BYTES, &j, err);
	if (r < 0)
		return r;
	r = study_from_json(j, opts, ret, err);
	if (r < 0)
		return error_prefix(err, r, "%s", path);
	return 0;
}

struct study *study_free(struct study *s)
{
	if (!s)
		return NULL;
	study_done(s);
	free(s);
	return NULL;
}

char *study_to_string(const struct study *s)
{
	char *c = cJSON_PrintUnformatted(s->json), *copy;

	if (!c)
		return NULL;
	copy = strdup(c);
	cJSON_free(c);
	return copy;
}

const char *study_checkpoint(const struct study *s, enum study_quant q)
{
	if ((unsigned)q < _STUDY_QUANT_MAX && s->model.checkpoints[q])
		return s->model.checkpoints[q];
	return s->model.name;
}

const char *study_draft_model(const struct study *s, const char *method)
{
	if (!method)
		return NULL;
	if (strcmp(method, "draft_model") == 0)
		return s->model.draft_model;
	if (strcmp(method, "eagle") == 0)
		return s->model.eagle;
	if (strcmp(method, "mtp") == 0)
		return s->model.mtp;
	return NULL;
}

bool study_spec_acceptance_text(const struct study *s, const char *method, char *buf, size_t size)
{
	const cJSON *v = s->workload_spec_acceptance, *e;
	size_t len = 0;

	if (cJSON_IsObject(v))
		v = method ? cJSON_GetObjectItemCaseSensitive(v, method) : NULL;
	if (!v || size == 0)
		return false;
	buf[0] = 0;
	if (cJSON_IsNumber(v)) {
		snprintf(buf, size, "%.10g", v->valuedouble);
		return true;
	}
	cJSON_ArrayForEach(e, v)
	{
		int n = snprintf(buf + len, size - len, "%s%.10g", len ? "," : "", e->valuedouble);

		if (n < 0 || (size_t)n >= size - len)
			return false;
		len += (size_t)n;
	}
	return len > 0;
}

bool study_in_window(const struct study *s, uint64_t realtime_usec)
{
	time_t t = (time_t)(realtime_usec / USEC_PER_SEC);
	struct tm tm;
	unsigned now;

	if (!s->window.set)
		return true;
	if (!localtime_r(&t, &tm))
		return true;
	now = (unsigned)(tm.tm_hour * 60 + tm.tm_min);
	if (s->window.start_min < s->window.end_min)
		return now >= s->window.start_min && now < s->window.end_min;
	return now >= s->window.start_min || now < s->window.end_min;
}

/* ---- search phases ---- */

int study_phases_parse(const char *json, struct study_phase *ret, size_t max, size_t *ret_n, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	const cJSON *item;
	size_t n = 0;

	*ret_n = 0;
	if (!json || !*json)
		return 0;
	j = cJSON_ParseWithLength(json, strlen(json));
	if (!cJSON_IsArray(j))
		return error_set(err, -EINVAL, "search phases: expected a JSON array");
	cJSON_ArrayForEach(item, j)
	{
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(item, "trials");
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(item, "knob");
		const cJSON *lo = cJSON_GetObjectItemCaseSensitive(item, "min");
		const cJSON *hi = cJSON_GetObjectItemCaseSensitive(item, "max");
		const cJSON *up = cJSON_GetObjectItemCaseSensitive(item, "upper");
		const cJSON *bc = cJSON_GetObjectItemCaseSensitive(item, "best_cost");

		if (n >= max)
			return error_set(err, -E2BIG, "search phases: more than %zu", max);
		if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0) || !cJSON_IsString(k) ||
		    strlen(k->valuestring) >= OPT_KNOB_NAME_MAX || !cJSON_IsNumber(lo) || !cJSON_IsNumber(hi) ||
		    !(lo->valuedouble >= 0) || !(hi->valuedouble >= lo->valuedouble) || !cJSON_IsBool(up))
			return error_set(err, -EINVAL,
					 "search phases[%zu]: expected {\"trials\", \"knob\", \"min\", \"max\", "
					 "\"upper\"}",
					 n);
		ret[n] = (struct study_phase){ .trials = (size_t)t->valuedouble,
					       .min = (int64_t)lo->valuedouble,
					       .max = (int64_t)hi->valuedouble,
					       .upper = cJSON_IsTrue(up),
					       .best_cost = cJSON_IsNumber(bc) ? bc->valuedouble : 0 };
		snprintf(ret[n].knob, sizeof(ret[n].knob), "%s", k->valuestring);
		n++;
	}
	*ret_n = n;
	return 0;
}

char *study_phases_format(const struct study_phase *p, size_t n)
{
	_cleanup_(cJSON_Deletep) cJSON *a = cJSON_CreateArray();
	char *c, *copy;

	if (!a)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o) || json_add_number(o, "trials", (double)p[i].trials) < 0 ||
		    json_add_string(o, "knob", p[i].knob) < 0 || json_add_number(o, "min", (double)p[i].min) < 0 ||
		    json_add_number(o, "max", (double)p[i].max) < 0 || !cJSON_AddBoolToObject(o, "upper", p[i].upper) ||
		    json_add_number(o, "best_cost", p[i].best_cost) < 0)
			return NULL;
	}
	c = cJSON_PrintUnformatted(a);
	if (!c)
		return NULL;
	copy = strdup(c);
	cJSON_free(c);
	return copy;
}

int study_apply_phases(struct study *s, const struct study_phase *p, size_t n, const struct study_options *opts,
		       struct error *err)
{
	struct opt_space *space = NULL;
	int r;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (opt_space_set_range_json((cJSON *)s->search_space, p[i].knob, p[i].min, p[i].max) < 0)
			return error_set(err, -EINVAL, "search phase %zu: search_space.%s is not a range", i,
					 p[i].knob);
	r = parse_space(s, opts, &space, err);
	if (r < 0)
		return error_prefix(err, r, "search phases");
	opt_space_free(s->space);
	s->space = space;
	return 0;
}
