/* study.c — the study spec: the keys that need code (names, checkpoints,
 * quantizations and the search space, the SLA, the window, the workload's
 * combinations) on top of the schema table's generic pass (study-schema.c),
 * and the study object itself. */
#include "study.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
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

/* ---- custom keys ---- */

static int parse_name(const struct study *s, struct error *err)
{
	for (const char *p = s->name; *p; p++)
		if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') || *p == '_' ||
		      *p == '.' || *p == '-'))
			return error_set(err, -EINVAL,
					 "name: \"%s\": only letters, digits, '_', '.' and '-' are allowed", s->name);
	if (s->name[0] == '.' || s->name[0] == '-')
		return error_set(err, -EINVAL, "name: \"%s\": must not start with '.' or '-'", s->name);
	return 0;
}

static int parse_checkpoints(struct study *s, struct error *err)
{
	const cJSON *cp = study_object_at(s->json, "model.checkpoints"), *item;

	if (!cp)
		return 0;
	cJSON_ArrayForEach(item, cp)
	{
		char p[128];
		int q = study_quant_from_string(item->string);

		snprintf(p, sizeof(p), "model.checkpoints.%s", item->string);
		if (q < 0)
			return error_set(err, -EINVAL, "%s: unknown quantization (expected none, fp8, int8 or awq)", p);
		if (s->model.checkpoints[q])
			return error_set(err, -EINVAL, "%s: duplicate key", p);
		if (!cJSON_IsString(item) || !item->valuestring[0] || strlen(item->valuestring) > 512)
			return error_set(err, -EINVAL, "%s: expected a non-empty checkpoint name", p);
		s->model.checkpoints[q] = item->valuestring;
	}
	return 0;
}

/* An argv array at deploy.KEY (NULL-terminated, array owned, strings in json). */
static int parse_argv_key(struct study *s, const char *key, const char ***ret, struct error *err)
{
	const cJSON *deploy = study_object_at(s->json, "deploy"), *a = NULL, *item;
	const char **v;
	size_t n, i = 0;
	int r;

	if (!deploy)
		return 0;
	r = json_get_array(deploy, "deploy", key, &a, err);
	if (r <= 0)
		return r;
	n = (size_t)cJSON_GetArraySize(a);
	if (n == 0 || n > 256)
		return error_set(err, -EINVAL, "deploy.%s: expected an argv array of 1 to 256 strings", key);
	v = calloc(n + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	cJSON_ArrayForEach(item, a)
	{
		if (!cJSON_IsString(item) || (i == 0 && !item->valuestring[0])) {
			free(v);
			return error_set(err, -EINVAL, "deploy.%s[%zu]: expected a%s string", key, i,
					 i == 0 ? " non-empty" : "");
		}
		v[i++] = item->valuestring;
	}
	*ret = v;
	return 1;
}

/* The command method's hooks: deploy and teardown are required with it,
 * and meaningless (refused) with the other methods. */
static int parse_deploy_commands(struct study *s, struct error *err)
{
	const struct {
		const char *key;
		const char ***dst;
	} keys[] = {
		{ "deploy_command", &s->deploy.deploy_command },
		{ "teardown_command", &s->deploy.teardown_command },
		{ "health_command", &s->deploy.health_command },
	};
	int r;

	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		r = parse_argv_key(s, keys[i].key, keys[i].dst, err);
		if (r < 0)
			return r;
		if (r > 0 && s->deploy.method != STUDY_DEPLOY_COMMAND)
			return error_set(err, -EINVAL, "deploy.%s: only for \"method\": \"command\" (method is %s)",
					 keys[i].key, study_method_names[s->deploy.method]);
	}
	if (s->deploy.method == STUDY_DEPLOY_COMMAND && (!s->deploy.deploy_command || !s->deploy.teardown_command))
		return error_set(err, -EINVAL,
				 "deploy.%s: missing (\"method\": \"command\" needs deploy_command and "
				 "teardown_command)",
				 s->deploy.deploy_command ? "teardown_command" : "deploy_command");
	if (s->deploy.user_bus && s->deploy.method != STUDY_DEPLOY_SYSTEMD)
		return error_set(err, -EINVAL, "deploy.user: only for \"method\": \"systemd\"");
	return 0;
}

static int parse_quality_check(struct study *s, struct error *err)
{
	const cJSON *a = NULL, *item;
	size_t n, i = 0;
	int r;

	r = json_get_array(s->json, "", "quality_check", &a, err);
	if (r <= 0)
		return r;
	n = (size_t)cJSON_GetArraySize(a);
	if (n == 0 || n > 256)
		return error_set(err, -EINVAL, "quality_check: expected an argv array of 1 to 256 strings");
	s->quality_check = calloc(n + 1, sizeof(char *));
	if (!s->quality_check)
		return -ENOMEM;
	cJSON_ArrayForEach(item, a)
	{
		if (!cJSON_IsString(item) || (i == 0 && !item->valuestring[0]))
			return error_set(err, -EINVAL, "quality_check[%zu]: expected a%s string", i,
					 i == 0 ? " non-empty" : "");
		s->quality_check[i++] = item->valuestring;
	}
	return 0;
}

/* "quantizations" → the allowed set; and the quantization knob: checked
 * against the set, or added to the search space from it. */
static int parse_quantizations(struct study *s, struct error *err)
{
	const cJSON *a = NULL, *item, *knob;
	size_t i = 0;
	int r;

	r = json_get_array(s->json, "", "quantizations", &a, err);
	if (r < 0)
		return r;
	if (r == 0) {
		s->quantizations = 1u << STUDY_QUANT_NONE;
	} else {
		if (cJSON_GetArraySize(a) == 0)
			return error_set(err, -EINVAL, "quantizations: must name at least one of none, fp8, int8, awq");
		cJSON_ArrayForEach(item, a)
		{
			int q = cJSON_IsString(item) ? study_quant_from_string(item->valuestring) : -EINVAL;

			if (q < 0)
				return error_set(
					err, -EINVAL,
					"quantizations[%zu]: expected one of \"none\", \"fp8\", \"int8\", \"awq\"", i);
			if (s->quantizations & (1u << q))
				return error_set(err, -EINVAL, "quantizations[%zu]: \"%s\" is listed twice", i,
						 item->valuestring);
			s->quantizations |= 1u << q;
			i++;
		}
	}
	if (!cJSON_IsObject(s->search_space))
		return 0; /* reported by the search-space parser */
	knob = cJSON_GetObjectItemCaseSensitive(s->search_space, OPT_KNOB_QUANTIZATION);
	if (knob) {
		const cJSON *vals = cJSON_IsObject(knob) ? cJSON_GetObjectItemCaseSensitive(knob, "values") : knob;

		i = 0;
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
	/* Add the knob (spec order) to our copy of the spec. */
	cJSON *list = cJSON_CreateArray();
	if (!list)
		return -ENOMEM;
	cJSON_ArrayForEach(item, a)
	{
		cJSON *v = cJSON_CreateString(item->valuestring);

		if (!v || !cJSON_AddItemToArray(list, v)) {
			cJSON_Delete(v);
			cJSON_Delete(list);
			return -ENOMEM;
		}
	}
	if (!cJSON_AddItemToObject((cJSON *)s->search_space, OPT_KNOB_QUANTIZATION, list)) {
		cJSON_Delete(list);
		return -ENOMEM;
	}
	return 0;
}

static int parse_space(struct study *s, const struct study_options *opts, struct error *err)
{
	struct opt_space_options so = {
		.gpus = s->gpu.count,
		.extra_knobs = opts ? opts->extra_knobs : NULL,
	};
	const cJSON *c;
	int r;

	r = json_require_object(s->json, "", "search_space", &s->search_space, err);
	if (r < 0)
		return r;
	c = cJSON_GetObjectItemCaseSensitive(s->json, "constraints");
	if (c && !cJSON_IsNull(c)) {
		if (!cJSON_IsArray(c))
			return error_set(err, -EINVAL, "constraints: expected an array of strings");
		s->constraints = c;
	}
	r = parse_quantizations(s, err);
	if (r < 0)
		return r;
	return opt_space_from_json(s->search_space, "search_space", s->constraints, "constraints", &so, &s->space, err);
}

static int parse_request_rate(struct study *s, bool *ret_set, struct error *err)
{
	const cJSON *w = study_object_at(s->json, "workload");
	const cJSON *item = w ? cJSON_GetObjectItemCaseSensitive(w, "request_rate") : NULL;
	int r;

	*ret_set = false;
	if (!item || cJSON_IsNull(item))
		return 0;
	*ret_set = true;
	if (cJSON_IsString(item) && strcmp(item->valuestring, "inf") == 0) {
		s->workload.request_rate = INFINITY;
		return 0;
	}
	r = json_get_double(w, "workload", "request_rate", 1e-6, 1e6, &s->workload.request_rate, err);
	if (r < 0)
		return error_set(err, r, "workload.request_rate: expected requests/s in [1e-06, 1e+06] or \"inf\"");
	return 0;
}

static int parse_percentiles(struct study *s, struct error *err)
{
	const cJSON *w = study_object_at(s->json, "workload"), *a = NULL, *item;
	size_t i = 0;
	int r;

	s->n_percentiles = 3;
	s->percentiles[0] = 50;
	s->percentiles[1] = 90;
	s->percentiles[2] = 99;
	r = w ? json_get_array(w, "workload", "percentiles", &a, err) : 0;
	if (r <= 0)
		return r;
	if (cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > PROBE_MAX_PERCENTILES)
		return error_set(err, -EINVAL, "workload.percentiles: expected 1 to %d numbers", PROBE_MAX_PERCENTILES);
	cJSON_ArrayForEach(item, a)
	{
		if (!cJSON_IsNumber(item) || !(item->valuedouble > 0) || item->valuedouble > 100)
			return error_set(err, -EINVAL, "workload.percentiles[%zu]: expected a number in (0, 100]", i);
		s->percentiles[i++] = item->valuedouble;
	}
	s->n_percentiles = i;
	return 0;
}

static int add_bound(struct study *s, const char *key, enum probe_metric m, double pct, double ms, struct error *err)
{
	if (s->sla.n_bounds >= PROBE_MAX_SLA_BOUNDS)
		return error_set(err, -EINVAL, "sla.%s: more than %d bounds", key, PROBE_MAX_SLA_BOUNDS);
	s->sla.bounds[s->sla.n_bounds++] = (struct probe_sla_bound){ .metric = m, .percentile = pct, .bound_ms = ms };
	return 0;
}

/* sla: ttft_ms, tpot_ms, itl_ms, e2el_ms, attainment, p<P>_<metric>_ms. */
static int parse_sla(struct study *s, struct error *err)
{
	const cJSON *sla = study_object_at(s->json, "sla"), *item;
	bool attainment_set = false;
	int r;

	if (!sla)
		return 0;
	cJSON_ArrayForEach(item, sla)
	{
		const char *key = item->string;
		char p[96], metric[16];
		double pct = 0, v;
		size_t len = strlen(key);
		int m = -1;

		snprintf(p, sizeof(p), "sla.%s", key);
		for (const cJSON *o = item->next; o; o = o->next)
			if (strcmp(o->string, key) == 0)
				return error_set(err, -EINVAL, "%s: duplicate key", p);
		if (strcmp(key, "attainment") == 0) {
			r = json_get_double(sla, "sla", key, 0.01, 1, &s->sla.attainment, err);
			if (r < 0)
				return r;
			attainment_set = true;
			continue;
		}
		if (key[0] == 'p' && len > 4 && strcmp(key + len - 3, "_ms") == 0) {
			char *end;
			pct = strtod(key + 1, &end);
			if (end == key + 1 || *end != '_' || !(pct > 0) || pct > 100)
				return error_set(err, -EINVAL,
						 "%s: unknown key (percentile bounds look like p99_tpot_ms)", p);
			snprintf(metric, sizeof(metric), "%.*s", (int)(len - 3 - (size_t)(end + 1 - key)), end + 1);
		} else if (len > 3 && strcmp(key + len - 3, "_ms") == 0) {
			snprintf(metric, sizeof(metric), "%.*s", (int)(len - 3), key);
		} else
			return error_set(err, -EINVAL, "%s: unknown key", p);
		m = probe_metric_from_name(metric);
		if (m < 0)
			return error_set(err, -EINVAL, "%s: unknown metric \"%s\" (expected ttft, tpot, itl or e2el)",
					 p, metric);
		r = json_get_double(sla, "sla", key, 0.001, 3.6e6, &v, err);
		if (r < 0)
			return r;
		r = add_bound(s, key, (enum probe_metric)m, pct, v, err);
		if (r < 0)
			return r;
	}
	if (!attainment_set && probe_sla_has_request_bounds(&s->sla))
		s->sla.attainment = PROBE_SLA_DEFAULT_ATTAINMENT;
	if (attainment_set && !probe_sla_has_request_bounds(&s->sla))
		return error_set(err, -EINVAL,
				 "sla.attainment: needs a per-request bound (ttft_ms, tpot_ms, itl_ms or e2el_ms)");
	return 0;
}

static int parse_window(struct study *s, struct error *err)
{
	const char *w = NULL;
	unsigned h1, m1, h2, m2;
	int n = 0, r;

	r = json_get_string(s->json, "", "window", 16, &w, err);
	if (r <= 0)
		return r;
	if (sscanf(w, "%2u:%2u-%2u:%2u%n", &h1, &m1, &h2, &m2, &n) != 4 || (size_t)n != strlen(w) || h1 > 23 ||
	    h2 > 24 || m1 > 59 || m2 > 59 || (h2 == 24 && m2 != 0))
		return error_set(err, -EINVAL, "window: expected \"HH:MM-HH:MM\" (e.g. \"22:00-06:00\"), got \"%s\"",
				 w);
	s->window.set = true;
	s->window.start_min = h1 * 60 + m1;
	s->window.end_min = h2 * 60 + m2;
	if (s->window.start_min == s->window.end_min)
		return error_set(err, -EINVAL, "window: \"%s\" is empty", w);
	return 0;
}

static int build_workload(struct study *s, const struct study_raw *raw, struct error *err)
{
	struct probe_workload_config *w = &s->workload;
	bool uniform = raw->range_ratio > 0;

	w->dataset = (enum probe_dataset)raw->dataset;
	if (w->dataset != PROBE_DATASET_RANDOM && !w->dataset_path)
		return error_set(err, -EINVAL, "workload.dataset_path: missing (dataset %s reads a file)",
				 study_dataset_names[raw->dataset]);
	if (w->dataset == PROBE_DATASET_RANDOM && w->dataset_path)
		return error_set(err, -EINVAL, "workload.dataset_path: only for the sharegpt and custom datasets");
	w->input.mean = raw->input_len;
	w->output.mean = raw->output_len;
	w->input.kind = raw->set_input_dist ? (enum probe_dist)raw->input_dist
			: uniform           ? PROBE_DIST_UNIFORM
					    : PROBE_DIST_FIXED;
	w->output.kind = raw->set_output_dist ? (enum probe_dist)raw->output_dist : w->input.kind;
	w->input.range_ratio = w->output.range_ratio = raw->range_ratio;
	w->input.stddev = raw->input_std;
	w->output.stddev = raw->output_std;
	if (uniform && w->input.kind != PROBE_DIST_UNIFORM && w->output.kind != PROBE_DIST_UNIFORM)
		return error_set(err, -EINVAL, "workload.range_ratio: only applies to uniform lengths");
	if ((w->input.kind == PROBE_DIST_NORMAL || w->input.kind == PROBE_DIST_LOGNORMAL) && !(raw->input_std > 0))
		return error_set(err, -EINVAL, "workload.input_len_std: needed (> 0) for %s lengths",
				 study_dist_names[w->input.kind]);
	if ((w->output.kind == PROBE_DIST_NORMAL || w->output.kind == PROBE_DIST_LOGNORMAL) && !(raw->output_std > 0))
		return error_set(err, -EINVAL, "workload.output_len_std: needed (> 0) for %s lengths",
				 study_dist_names[w->output.kind]);
	if (w->prefix_len > 0 && w->prefix_len >= raw->input_len)
		return error_set(err, -EINVAL, "workload.prefix_len: %u must be below input_len (%g)", w->prefix_len,
				 raw->input_len);
	if ((w->prefix_len > 0) != (w->prefix_group_size > 0))
		return error_set(err, -EINVAL,
				 "workload.prefix_group_size: set prefix_len and prefix_group_size together");
	/* The rate search sets the rate of each load point, so the process
	 * follows burstiness unless the spec names one. */
	if (raw->arrival >= 0)
		w->arrival = (enum probe_arrival)raw->arrival;
	else
		w->arrival = w->burstiness == 1.0 ? PROBE_ARRIVAL_POISSON : PROBE_ARRIVAL_GAMMA;
	if (w->arrival == PROBE_ARRIVAL_POISSON && w->burstiness != 1.0)
		return error_set(err, -EINVAL,
				 "workload.burstiness: %g, but arrival poisson has burstiness 1 (use gamma)",
				 w->burstiness);
	if (w->arrival == PROBE_ARRIVAL_INF && !w->max_concurrency)
		return error_set(
			err, -EINVAL,
			"workload.arrival: inf sends every request at once; set max_concurrency for a closed loop");
	return 0;
}

/* ---- the whole ---- */

static void study_defaults(struct study *s, struct study_raw *raw)
{
	probe_workload_config_init(&s->workload);
	s->workload.num_prompts = 200;
	s->workload.ignore_eos = true;
	s->gpu.count = 1;
	s->budget.max_trials = 40;
	s->budget.max_wall_time_usec = USEC_INFINITY;
	s->probe.tolerance = 0.05;
	s->probe.min_rate = 0.05;
	s->probe.max_steps = 12;
	s->probe.request_timeout_usec = 300 * USEC_PER_SEC;
	s->deploy.host = "127.0.0.1";
	s->deploy.stop_timeout_usec = 30 * USEC_PER_SEC;
	s->deploy.command_timeout_usec = 120 * USEC_PER_SEC;
	s->search.seed = 1;
	s->search.algorithm = "LN_SBPLX";
	*raw = (struct study_raw){ .input_len = 1024, .output_len = 128, .arrival = -1 };
}

int study_from_json(const cJSON *j, const struct study_options *opts, struct study **ret, struct error *err)
{
	_cleanup_(study_freep) struct study *s = NULL;
	bool rate_set;
	struct study_raw raw;
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "study: expected a JSON object");
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->json = cJSON_Duplicate(j, true);
	if (!s->json)
		return -ENOMEM;
	study_defaults(s, &raw);
	r = study_schema_apply(s, &raw, err);
	if (r < 0)
		return r;
	s->scenario = (enum opt_scenario)raw.scenario;
	s->cost_tokens = (enum opt_cost_tokens)raw.cost_tokens;
	s->deploy.method = (enum study_deploy_method)raw.method;
	r = parse_deploy_commands(s, err);
	if (r == 0)
		r = parse_name(s, err);
	if (r == 0)
		r = parse_checkpoints(s, err);
	if (r == 0)
		r = parse_quality_check(s, err);
	if (r == 0)
		r = parse_request_rate(s, &rate_set, err);
	if (r == 0)
		r = parse_percentiles(s, err);
	if (r == 0)
		r = parse_sla(s, err);
	if (r == 0)
		r = parse_window(s, err);
	if (r == 0)
		r = build_workload(s, &raw, err);
	if (r < 0)
		return r;
	if (s->scenario == OPT_SCENARIO_ONLINE && probe_sla_empty(&s->sla))
		return error_set(err, -EINVAL,
				 "sla: an online study needs latency bounds (or use \"scenario\": \"offline\")");
	if (s->scenario == OPT_SCENARIO_OFFLINE && !probe_sla_empty(&s->sla))
		return error_set(err, -EINVAL,
				 "sla: an offline study has no latency bounds (remove \"sla\" or use online)");
	if (s->probe.max_rate > 0 && s->probe.max_rate <= s->probe.min_rate)
		return error_set(err, -EINVAL, "probe.max_rate: %g must be above probe.min_rate (%g)",
				 s->probe.max_rate, s->probe.min_rate);
	r = parse_space(s, opts, err);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
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
	opt_space_free(s->space);
	free(s->quality_check);
	free(s->deploy.deploy_command);
	free(s->deploy.teardown_command);
	free(s->deploy.health_command);
	cJSON_Delete(s->json);
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
