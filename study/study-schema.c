/* study-schema.c — the study spec's table: every key with its type, range,
 * default and documentation, and the callbacks of the keys whose value is
 * more than one plain field (the name's characters, the window, "inf"
 * request rates, percentile lists, the SLA's bounds, the checkpoint map).
 *
 * json_dispatch (common/json-dispatch.h) reads a spec into struct
 * study_parse with this table, refusing unknown keys and wrong values with
 * their path; the reference text (`goodput tune --help-spec`) and the JSON
 * Schema (`--help-spec --json-schema`) are printed from it too. A new key is
 * one row here plus its field in struct study; what a key means together with
 * others (the command method's hooks, the workload's distributions, the SLA
 * against the scenario, the search space) is checked in study.c. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "parse.h"
#include "study-internal.h"
#include "utf8.h"
#include "workload-json.h"

static const char *const scenario_names[] = { "online", "offline", NULL };
static const char *const cost_tokens_names[] = { "output", "input+output", NULL };
const char *const study_method_names[] = { "exec", "systemd", "command", "slurm", NULL };
const char *const study_quant_names[] = { "none", "fp8", "int8", "awq", NULL };
const char *const study_shape_names[] = { "aggregated", "disaggregated", "both", NULL };

/* JSON_ENUM stores an int: the enums it fills must be int-sized, in the order of their names. */
_Static_assert(sizeof(enum opt_scenario) == sizeof(int), "enum opt_scenario is not int-sized");
_Static_assert(sizeof(enum opt_cost_tokens) == sizeof(int), "enum opt_cost_tokens is not int-sized");
_Static_assert(sizeof(enum study_deploy_method) == sizeof(int), "enum study_deploy_method is not int-sized");
_Static_assert(sizeof(enum study_shape) == sizeof(int) && STUDY_SHAPE_BOTH == 2, "enum study_shape follows its names");
_Static_assert(OPT_SCENARIO_OFFLINE == 1 && OPT_COST_TOKENS_TOTAL == 1 && STUDY_DEPLOY_SLURM == 3,
	       "the enums follow their names");

#define OFF(field) offsetof(struct study_parse, s.field)
#define RAW(field) offsetof(struct study_parse, field)
#define TOKENS_MAX ((double)PROBE_MAX_TOKENS_PER_REQUEST)
#define STR(x)     #x
#define XSTR(x)    STR(x)
#define RATE_MIN   1e-6
#define RATE_MAX   1e6
#define BOUND_MIN  0.001
#define BOUND_MAX  3.6e6

/* ---- callbacks ---- */

static int check_name(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	const char *name = v->valuestring;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	for (const char *p = name; *p; p++)
		if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') || *p == '_' ||
		      *p == '.' || *p == '-'))
			return error_set(err, -EINVAL, "%s: \"%s\": only letters, digits, '_', '.' and '-' are allowed",
					 path, name);
	if (name[0] == '.' || name[0] == '-')
		return error_set(err, -EINVAL, "%s: \"%s\": must not start with '.' or '-'", path, name);
	return 0;
}

/* A program to run: not an option, no control characters. */
static int check_binary(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	const char *b = v->valuestring;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	if (!b[0] || b[0] == '-')
		return error_set(err, -EINVAL, "%s: \"%.64s\": expected a program (a path or a name)", path, b);
	if (utf8_has_control(b))
		return error_set(err, -EINVAL, "%s: control characters are not allowed", path);
	return 0;
}

/* The keys are quantization names, said so when one is not. */
static int parse_checkpoints(const cJSON *v, const char *path, const struct json_field *f, void *base,
			     struct error *err)
{
	const cJSON *item;

	cJSON_ArrayForEach(item, v)
	{
		char p[128];

		if (study_quant_from_string(item->string) < 0)
			return error_set(err, -EINVAL, "%s: unknown quantization (expected none, fp8, int8 or awq)",
					 json_path_join(p, sizeof(p), path, item->string));
	}
	return json_dispatch(v, path, f->fields, 0, base, err);
}

/* The workload block is the probe's (probes/workload-json.h): read with
 * its table into the study's workload, percentiles beside it. */
static int parse_workload(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct study *s = &((struct study_parse *)base)->s;
	struct probe_workload_spec spec = { .config = s->workload };
	int r;

	(void)f;
	r = probe_workload_from_json(v, path, &spec, err);
	if (r < 0)
		return r;
	s->workload = spec.config;
	s->workload_captured = spec.captured;
	s->workload_spec_acceptance = spec.spec_acceptance;
	if (spec.n_percentiles) {
		memcpy(s->percentiles, spec.percentiles, sizeof(s->percentiles));
		s->n_percentiles = spec.n_percentiles;
	}
	return 0;
}

static int add_bound(struct study *s, const char *path, enum probe_metric m, double pct, double ms, struct error *err)
{
	if (s->sla.n_bounds >= PROBE_MAX_SLA_BOUNDS)
		return error_set(err, -EINVAL, "%s: more than %d bounds", path, PROBE_MAX_SLA_BOUNDS);
	s->sla.bounds[s->sla.n_bounds++] = (struct probe_sla_bound){ .metric = m, .percentile = pct, .bound_ms = ms };
	return 0;
}

/* sla.ttft_ms, tpot_ms, itl_ms, e2el_ms: the metric is the key without "_ms". */
static int parse_request_bound(const cJSON *v, const char *path, const struct json_field *f, void *base,
			       struct error *err)
{
	char metric[16];
	int m;

	snprintf(metric, sizeof(metric), "%.*s", (int)(strlen(f->name) - 3), f->name);
	m = probe_metric_from_name(metric);
	if (m < 0)
		return error_set(err, -EINVAL, "%s: unknown metric \"%s\"", path, metric);
	return add_bound(&((struct study_parse *)base)->s, path, (enum probe_metric)m, 0, v->valuedouble, err);
}

/* sla.p<P>_<metric>_ms, e.g. p99_tpot_ms or p99.9_ttft_ms. */
static int parse_percentile_bound(const cJSON *v, const char *path, const struct json_field *f, void *base,
				  struct error *err)
{
	const char *key = v->string;
	size_t len = strlen(key);
	char metric[16], *end;
	double pct;
	int m;

	(void)f;
	pct = strtod(key + 1, &end);
	if (end == key + 1 || *end != '_' || !(pct > 0) || pct > 100)
		return error_set(err, -EINVAL, "%s: unknown key (percentile bounds look like p99_tpot_ms)", path);
	snprintf(metric, sizeof(metric), "%.*s", (int)(len - 3 - (size_t)(end + 1 - key)), end + 1);
	m = probe_metric_from_name(metric);
	if (m < 0)
		return error_set(err, -EINVAL, "%s: unknown metric \"%s\" (expected ttft, tpot, itl or e2el)", path,
				 metric);
	return add_bound(&((struct study_parse *)base)->s, path, (enum probe_metric)m, pct, v->valuedouble, err);
}

static int parse_window(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct study *s = &((struct study_parse *)base)->s;
	int r;

	(void)f;
	r = parse_daily_window(path, v->valuestring, &s->window.start_min, &s->window.end_min, err);
	if (r < 0)
		return r;
	s->window.set = true;
	return 0;
}

/* A price of 0 would make every configuration free: the cost could rank nothing. */
static int check_price(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	if (!(v->valuedouble > 0))
		return error_set(err, -EINVAL, "%s: expected a price above 0 $, got %g", path, v->valuedouble);
	return json_dispatch_store(v, path, f, base, err);
}

/* model.drafts.*: a model id or path, rendered into JSON flags (vLLM's
 * --speculative-config): no quotes, backslashes or control characters. */
static int check_draft(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	for (const char *c = v->valuestring; *c; c++)
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
			return error_set(err, -EINVAL,
					 "%s: \"%.64s\": a model id or path without quotes or backslashes", path,
					 v->valuestring);
	return json_dispatch_store(v, path, f, base, err);
}

/* model.max_model_len: a length, or "workload" (what the workload's longest
 * request needs, set once the workload is known: study.c). */
static int parse_max_model_len(const cJSON *v, const char *path, const struct json_field *f, void *base,
			       struct error *err)
{
	struct study_parse *p = base;
	double len;

	(void)f;
	if (cJSON_IsString(v) && strcmp(v->valuestring, "workload") == 0) {
		p->s.model.max_model_len_from_workload = true;
		return 0;
	}
	if (json_value_double(v, path, 16, 16777216, &len, err) < 0 || floor(len) != len)
		return error_set(err, -EINVAL, "%s: expected an integer in [16, 16777216] or \"workload\"", path);
	p->s.model.max_model_len = (uint32_t)len;
	return 0;
}

/* gpu.devices: distinct GPU indices. */
static int parse_devices(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct study_parse *p = base;
	const cJSON *item;
	uint64_t seen = 0;
	unsigned i = 0;

	(void)f;
	cJSON_ArrayForEach(item, v)
	{
		double d = cJSON_IsNumber(item) ? item->valuedouble : -1;

		if (!(d >= 0) || d >= STUDY_GPUS_MAX || d != (unsigned)d)
			return error_set(err, -EINVAL, "%s[%u]: expected a GPU index in [0, %d]", path, i,
					 STUDY_GPUS_MAX - 1);
		if (seen & (UINT64_C(1) << (unsigned)d))
			return error_set(err, -EINVAL, "%s[%u]: GPU %u is listed twice", path, i, (unsigned)d);
		seen |= UINT64_C(1) << (unsigned)d;
		p->s.gpu.devices[i++] = (unsigned)d;
	}
	p->s.gpu.n_devices = i;
	return 0;
}

/* budget.parallel: "auto" (0) or a number of trials. */
static int parse_parallel(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct study_parse *p = base;
	struct error ignored = { 0 };
	uint64_t n;

	(void)f;
	if (cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0) {
		p->s.budget.parallel = 0;
		return 0;
	}
	if (json_value_u64(v, path, 1, STUDY_GPUS_MAX, &n, &ignored) < 0)
		return error_set(err, -EINVAL, "%s: expected \"auto\" or a number of trials in [1, %d]", path,
				 STUDY_GPUS_MAX);
	p->s.budget.parallel = (uint32_t)n;
	return 0;
}

/* ---- the table ---- */

static const struct json_field model_checkpoint_fields[] = {
	{ "none", JSON_STRING, OFF(model.checkpoints[STUDY_QUANT_NONE]), .max = 512, .doc = "unquantized checkpoint" },
	{ "fp8", JSON_STRING, OFF(model.checkpoints[STUDY_QUANT_FP8]), .max = 512, .doc = "FP8 checkpoint" },
	{ "int8", JSON_STRING, OFF(model.checkpoints[STUDY_QUANT_INT8]), .max = 512, .doc = "INT8 checkpoint" },
	{ "awq", JSON_STRING, OFF(model.checkpoints[STUDY_QUANT_AWQ]), .max = 512, .doc = "AWQ checkpoint" },
	{ 0 },
};

static const struct json_field model_draft_fields[] = {
	{ "draft_model", JSON_STRING, OFF(model.draft_model), .callback = check_draft, .max = 512,
	  .doc = "the draft model of spec_method draft_model (same tokenizer; goodput-sim: llama-3.2-1b, "
		 "llama-3.2-3b)" },
	{ "eagle", JSON_STRING, OFF(model.eagle), .callback = check_draft, .max = 512,
	  .doc = "the EAGLE head of spec_method eagle (e.g. yuhuili/EAGLE-LLaMA3.1-Instruct-8B)" },
	{ "mtp", JSON_STRING, OFF(model.mtp), .callback = check_draft, .max = 512,
	  .doc = "the multi-token-prediction module of spec_method mtp, when not the model's own" },
	{ 0 },
};

static const struct json_field model_fields[] = {
	{ "name", JSON_STRING, OFF(model.name), .flags = JSON_MANDATORY, .max = 512,
	  .doc = "model name or checkpoint (served as is for quantization none)" },
	{ "checkpoints", JSON_OBJECT, .fields = model_checkpoint_fields, .callback = parse_checkpoints,
	  .doc = "checkpoint per quantization where the engine needs one, e.g. {\"fp8\": \"org/model-FP8\"}" },
	{ "drafts", JSON_OBJECT, .fields = model_draft_fields,
	  .doc = "the drafters speculative decoding loads, by method: {\"draft_model\": \"org/small-model\", "
		 "\"eagle\": \"org/eagle-head\"} (ngram needs none)" },
	{ "architecture", JSON_OBJECT, OFF(model.architecture),
	  .def = "the preset of model.name, or config.json of a local checkpoint folder",
	  .doc = "the model's facts as Hugging Face's config.json names them (hidden_size, num_hidden_layers, "
		 "num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size, "
		 "max_position_embeddings): the memory pre-flight estimates weights and KV cache from them" },
	{ "max_model_len", JSON_ANY, .callback = parse_max_model_len, .def = "the engine's (the model's context)",
	  .schema = "{\"anyOf\": [{\"type\": \"integer\", \"minimum\": 16, \"maximum\": 16777216}, "
		    "{\"const\": \"workload\"}]}",
	  .doc = "the context every server is started with: tokens, or \"workload\" for the longest request "
		 "the workload sends (input + output + 10 %, rounded up to 256); a knob of one value where the engine "
		 "has max_model_len (search it instead as search_space.max_model_len)" },
	{ 0 },
};

static const struct json_field gpu_fields[] = {
	{ "type", JSON_STRING, OFF(gpu.type), .flags = JSON_MANDATORY, .max = 64,
	  .doc = "GPU model, e.g. H100, A100-80GB, L40S; \"cpu\" for a host without GPUs (llama.cpp on CPU): one "
		 "server at a time on gpu.cores cores, priced per core-hour" },
	{ "count", JSON_U32, OFF(gpu.count), .min = 1, .max = STUDY_GPUS_MAX, .def = "1",
	  .doc = "GPUs on the host the study may use (tensor_parallel divides it; with devices, their number); with "
		 "\"method\": \"slurm\", the cluster's GPUs the study may hold at once" },
	{ "per_node", JSON_U32, OFF(gpu.per_node), .min = 1, .max = STUDY_GPUS_MAX, .def = "count",
	  .doc = "GPUs of one node: a server's GPUs are all on one node (tensor_parallel at most this); a dry run "
		 "packs trials onto nodes of this size" },
	{ "devices", JSON_ARRAY, .callback = parse_devices, .min = 1, .max = STUDY_GPUS_MAX,
	  .schema = "{\"items\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 63}, \"uniqueItems\": true}",
	  .def = "[0, ..., count − 1]",
	  .doc = "the GPU indices the study may use (CUDA_VISIBLE_DEVICES numbering); trials get disjoint sets" },
	{ "price_per_gpu_hour", JSON_DOUBLE, OFF(gpu.price_per_gpu_hour), .callback = check_price, .min = 0,
	  .max = 1000, .schema = "{\"exclusiveMinimum\": 0}",
	  .doc = "$ per GPU-hour (above 0: the cost ranks configurations by it); required unless gpu.type is "
		 "\"cpu\"" },
	{ "cores", JSON_U32, OFF(gpu.cores), .min = 1, .max = 4096, .def = "1",
	  .doc = "gpu.type \"cpu\": the cores a server may use, which the cost is charged for" },
	{ "price_per_core_hour", JSON_DOUBLE, OFF(gpu.price_per_core_hour), .callback = check_price, .min = 0,
	  .max = 1000, .schema = "{\"exclusiveMinimum\": 0}",
	  .doc = "gpu.type \"cpu\": $ per core-hour (required there): a server costs price_per_core_hour × cores "
		 "an hour" },
	{ "memory_gib", JSON_DOUBLE, OFF(gpu.memory_gib), .min = 1, .max = 4096, .def = "the preset of gpu.type",
	  .doc = "memory of one GPU, GiB: for the memory pre-flight when gpu.type is not a known preset" },
	{ 0 },
};

/* What optimizer/space.h accepts for one knob: a list, a range, or {"values": [...]}. */
#define KNOB_SCHEMA                                                                                                    \
	"{\"anyOf\": ["                                                                                                \
	"{\"type\": \"array\", \"minItems\": 1, \"maxItems\": 64, \"items\": {\"type\": [\"number\", \"string\"]}},"   \
	"{\"type\": \"object\", \"required\": [\"min\", \"max\"], \"additionalProperties\": false, \"properties\": {"  \
	"\"min\": {\"type\": \"integer\", \"minimum\": 0}, \"max\": {\"type\": \"integer\", \"minimum\": 0},"          \
	"\"scale\": {\"enum\": [\"linear\", \"log2\"]}, \"step\": {\"type\": \"integer\", \"minimum\": 1},"            \
	"\"categorical\": {\"type\": \"boolean\"}, \"when\": {\"type\": \"string\"}}},"                                \
	"{\"type\": \"object\", \"required\": [\"values\"], \"additionalProperties\": false, \"properties\": {"        \
	"\"values\": {\"type\": \"array\", \"minItems\": 1, \"maxItems\": 64},"                                        \
	"\"categorical\": {\"type\": \"boolean\"}, \"when\": {\"type\": \"string\"}}}]}"

static const struct json_field sla_fields[] = {
	{ "ttft_ms", JSON_DOUBLE, .callback = parse_request_bound, .min = BOUND_MIN, .max = BOUND_MAX,
	  .doc = "time to first token, per request" },
	{ "tpot_ms", JSON_DOUBLE, .callback = parse_request_bound, .min = BOUND_MIN, .max = BOUND_MAX,
	  .doc = "time per output token, per request" },
	{ "itl_ms", JSON_DOUBLE, .callback = parse_request_bound, .min = BOUND_MIN, .max = BOUND_MAX,
	  .doc = "every inter-token gap, per request" },
	{ "e2el_ms", JSON_DOUBLE, .callback = parse_request_bound, .min = BOUND_MIN, .max = BOUND_MAX,
	  .doc = "end-to-end latency, per request" },
	{ "attainment", JSON_DOUBLE, RAW(attainment), .min = 0.01, .max = 1, .def = "0.9",
	  .doc = "fraction of requests that must be good" },
	{ "p<P>_<metric>_ms", JSON_DOUBLE, .pattern = "p[0-9]*_ms", .callback = parse_percentile_bound,
	  .min = BOUND_MIN, .max = BOUND_MAX,
	  .doc = "percentile bound, e.g. p99_tpot_ms: 60 (metric ttft, tpot, itl, e2el; P in (0, 100])" },
	{ 0 },
};

static const struct json_field budget_fields[] = {
	{ "max_trials", JSON_U32, OFF(budget.max_trials), .min = 1, .max = 100000, .def = "40",
	  .doc = "deployments at most: every server started counts, the baseline, retries and re-probes included "
		 "(the search keeps a reserve for the final confirmations; side by side, the answer's measurement "
		 "alone counts too)" },
	{ "max_wall_time", JSON_DURATION, OFF(budget.max_wall_time_usec), .min = 1, .max = 3.1536e7, .def = "none",
	  .doc = "seconds, or \"90m\", \"8h\", \"1h30m\"" },
	{ "parallel", JSON_ANY, .callback = parse_parallel, .def = "1",
	  .schema = "{\"anyOf\": [{\"const\": \"auto\"}, {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 64}]}",
	  .doc = "trials in flight at once on disjoint GPU sets: a number, or \"auto\" (as many as the GPUs allow)" },
	{ "min_configurations", JSON_U32, OFF(budget.min_configurations), .min = 1, .max = 1000, .def = "3",
	  .doc = "with max_wall_time: the configurations the study should compare at least; no trial takes more than "
		 "max_wall_time ÷ this (a probe that would finishes early, at the precision it reached, and says so)" },
	{ 0 },
};

static const struct json_field probe_fields[] = {
	{ "tolerance", JSON_DOUBLE, OFF(probe.tolerance), .min = 0.001, .max = 0.5, .def = "0.05",
	  .doc = "relative resolution of the max rate" },
	{ "min_rate", JSON_DOUBLE, OFF(probe.min_rate), .min = 1e-4, .max = 1e6, .def = "0.05",
	  .doc = "lowest useful rate, requests/s: a configuration that fails the SLA there (or cannot complete it "
		 "at saturation) never meets it; the search also stops at 1/64 of the saturation throughput" },
	{ "max_rate", JSON_DOUBLE, OFF(probe.max_rate), .min = 0, .max = 1e6, .def = "0 (from the saturation run)",
	  .doc = "highest rate tried, requests/s: the answer is a measured rate at or below it" },
	{ "max_steps", JSON_U32, OFF(probe.max_steps), .min = 1, .max = 100, .def = "12",
	  .doc = "load points per trial at most" },
	{ "request_timeout", JSON_DURATION, OFF(probe.request_timeout_usec), .min = 0.1, .max = 86400, .def = "300",
	  .doc = "per request" },
	{ "max_requests", JSON_U32, OFF(probe.max_requests), .min = 1, .max = 1000000,
	  .def = "4 × workload.num_prompts",
	  .doc = "requests a load point of the search sends at most: each sends until its verdict on attainment "
		 "is sure at `confidence` (a sequential test); one still in doubt here is judged by what it measured "
		 "(attainment against the target, with its 90 % interval stated: \"met at the cap\")" },
	{ "confidence", JSON_DOUBLE, OFF(probe.confidence), .min = 0.5, .max = 0.9999, .def = "0.95",
	  .doc = "of each load point's verdict: a load point at the attainment target is called met, one at "
		 "half its miss rate missed, at most 1 − confidence of the time" },
	{ "max_point_seconds", JSON_DURATION, OFF(probe.max_point_usec), .min = 1, .max = 86400,
	  .def = "a sixth of a trial's share of max_wall_time, within 30 s and 10 min; 10 min without a budget",
	  .doc = "how long a load point of the search takes at most, its saturation run included: it sends until a "
		 "grace before the cap (a quarter of it, at least 10 s, at most half) and what is still in flight at "
		 "the cap is cut and counts as not good; a point still undecided then is judged by what it measured "
		 "(attainment against the target, with its 90 % interval stated: \"met at the cap\"), the saturation "
		 "run's throughput is what completed by then" },
	{ 0 },
};

static const struct json_field deploy_fields[] = {
	{ "method", JSON_ENUM, OFF(deploy.method), .choices = study_method_names, .def = "exec",
	  .doc = "exec (a child process), systemd (a transient unit goodput-STUDY-TRIAL.service) or command "
		 "(the operator's deploy/teardown commands)" },
	{ "user", JSON_BOOL, OFF(deploy.user_bus), .def = "false",
	  .doc = "systemd: start units on the user's service manager (systemctl --user) instead of the system's" },
	{ "deploy_command", JSON_STRV, OFF(deploy.deploy_command), .flags = JSON_ARGV, .min = 1, .max = 256,
	  .doc = "command: argv run to deploy a trial's server, the rendered engine argv appended; knobs arrive as "
		 "GOODPUT_KNOB_<NAME>, plus GOODPUT_PORT, GOODPUT_TRIAL_ID, GOODPUT_STUDY, GOODPUT_MODEL; it prints "
		 "GOODPUT_BASE_URL=http://HOST:PORT on a line of stdout" },
	{ "teardown_command", JSON_STRV, OFF(deploy.teardown_command), .flags = JSON_ARGV, .min = 1, .max = 256,
	  .doc = "command: argv run to remove the trial's server (same environment, plus GOODPUT_BASE_URL); "
		 "also run when a resumed study finds a trial an earlier, killed run left deployed, then without "
		 "GOODPUT_PORT and GOODPUT_BASE_URL: it must end the deployment from GOODPUT_STUDY and "
		 "GOODPUT_TRIAL_ID alone and succeed when there is nothing to end" },
	{ "health_command", JSON_STRV, OFF(deploy.health_command), .flags = JSON_ARGV, .min = 1, .max = 256,
	  .def = "GET BASE_URL + the profile's health path", .doc = "command: argv whose exit status 0 means ready" },
	{ "command_timeout", JSON_DURATION, OFF(deploy.command_timeout_usec), .min = 0.1, .max = 86400, .def = "120",
	  .doc = "command: time the teardown and each health command may take" },
	{ "host", JSON_STRING, OFF(deploy.host), .max = 255, .def = "127.0.0.1 (slurm: 0.0.0.0)",
	  .doc = "address the server listens on" },
	{ "startup_timeout", JSON_DURATION, OFF(deploy.startup_timeout_usec), .min = 1, .max = 86400,
	  .def = "the engine profile's", .doc = "time for /health to answer" },
	{ "stop_timeout", JSON_DURATION, OFF(deploy.stop_timeout_usec), .min = 0.1, .max = 3600, .def = "30",
	  .doc = "grace between SIGTERM and SIGKILL" },
	{ "partition", JSON_STRING, OFF(deploy.partition), .max = 255, .def = "the cluster's default",
	  .doc = "slurm: the partition each trial's job is submitted to (sbatch --partition)" },
	{ "account", JSON_STRING, OFF(deploy.account), .max = 255, .def = "the user's default",
	  .doc = "slurm: the account the jobs are charged to (sbatch --account)" },
	{ "time_limit", JSON_DURATION, OFF(deploy.time_limit_usec), .min = 60, .max = 3.1536e7,
	  .def = "the partition's", .doc = "slurm: how long one trial's job may run (sbatch --time)" },
	{ "extra_args", JSON_STRV, OFF(deploy.extra_args), .max = 64,
	  .doc = "slurm: more sbatch options, one argument each (\"--qos=tune\", \"--constraint=h100\"); "
		 "never --wrap" },
	{ "poll_interval", JSON_DURATION, OFF(deploy.poll_interval_usec), .min = 0.1, .max = 600, .def = "2",
	  .doc = "slurm: how often the queue is read (squeue --json) for the states of the study's jobs" },
	{ "shape", JSON_ENUM, OFF(deploy.shape), .choices = study_shape_names, .def = "aggregated",
	  .doc = "aggregated (one server: prefill and decode on the same GPUs), disaggregated (prefill workers, "
		 "decode workers and the engine's router: search_space's prefill_workers, decode_workers and "
		 "prefill_/decode_ knobs) or both (the search's \"shape\" knob chooses; the answer compares them)" },
	{ "router_binary", JSON_STRING, OFF(deploy.router_binary), .max = 4096, .def = "the profile's",
	  .doc = "disaggregated: the router's program instead of the profile's roles.router.argv[0] (vLLM does not "
		 "install its toy_proxy_server.py: a path to it, made executable)" },
	{ 0 },
};

static const struct json_field search_fields[] = {
	{ "seed", JSON_U64, OFF(search.seed), .min = 0, .max = 9007199254740992.0, .def = "1",
	  .doc = "seeds the order in which quantization/TP combinations are screened, the initial simplex steps of "
		 "every SBPLX run, and randomised NLopt algorithms; the same seed and history replay the same path" },
	{ "algorithm", JSON_STRING, OFF(search.algorithm), .max = 64, .def = "LN_SBPLX",
	  .doc = "NLopt algorithm for the ordinal knobs" },
	{ "strategy", JSON_STRING, OFF(search.strategy), .max = 64, .def = "model",
	  .doc = "\"model\": goodput-sim's calibrated engine model as the prior, a Gaussian process for its "
		 "errors, expected improvement, a stop once nothing untested is likely to beat the answer (the "
		 "default where the model and GPU have presets and the workload is synthetic); \"plain\": the "
		 "NLopt replay search (the fall-back); \"twin\": the earlier digital twin" },
	{ "extend_edges", JSON_BOOL, OFF(search.extend_edges), .def = "false",
	  .doc = "when the search ends with its best on a bound of an integer range that the SLA does not limit, "
		 "widen that range by log2 steps (within the engine's limits) and go on; each widening is stored as "
		 "a search phase a resumed study replays" },
	{ "preflight", JSON_BOOL, OFF(search.preflight), .def = "true",
	  .doc = "skip configurations the memory estimate (the model's weights and KV cache against the GPU's "
		 "memory) says do not fit, recording them as predicted infeasible; false deploys them and lets the "
		 "engine say why they do not start" },
	{ 0 },
};

const struct json_field study_fields[] = {
	{ "name", JSON_STRING, OFF(name), .callback = check_name, .flags = JSON_MANDATORY, .max = STUDY_NAME_MAX,
	  .schema = "{\"pattern\": \"^[A-Za-z0-9_][A-Za-z0-9_.-]*$\"}",
	  .doc = "unique name of the study ([A-Za-z0-9_.-])" },
	{ "engine", JSON_STRING, OFF(engine), .flags = JSON_MANDATORY, .max = 64,
	  .doc = "engine profile: a name (sim, vllm, ...; see goodput-engine(5)) or a file" },
	{ "engine_binary", JSON_STRING, OFF(engine_binary), .callback = check_binary, .max = 4096,
	  .def = "the profile's program",
	  .doc = "the engine's program, a path or a name looked up in PATH: "
		 "\"/opt/llama.cpp/build/bin/llama-server\"" },
	{ "engine_args", JSON_STRV, OFF(engine_args), .flags = JSON_ARGV, .min = 1, .max = 256,
	  .doc = "arguments appended verbatim after the profile's flags, never through a shell: fixed flags such as "
		 "[\"--threads\", \"8\", \"--ctx-size\", \"4096\"] (an engine that reads a flag twice takes the "
		 "last)" },
	{ "label", JSON_STRING, OFF(label), .max = 256,
	  .doc = "free text grouping studies of one workload/SLA for `goodput best`" },
	{ "model", JSON_OBJECT, .fields = model_fields, .flags = JSON_MANDATORY, .doc = "the model to serve" },
	{ "quantizations", JSON_ENUM_SET, OFF(quantizations), .min = 1, .choices = study_quant_names,
	  .def = "[\"none\"]",
	  .doc = "quantizations the operator allows (none, fp8, int8, awq); they become the quantization knob unless "
		 "search_space has one, whose values must be among them" },
	{ "quality_check", JSON_STRV, OFF(quality_check), .flags = JSON_ARGV, .min = 1, .max = 256,
	  .doc = "argv of a command run against each deployed server (GOODPUT_BASE_URL, GOODPUT_MODEL in its "
		 "environment); a non-zero exit marks the trial infeasible" },
	{ "gpu", JSON_OBJECT, .fields = gpu_fields, .flags = JSON_MANDATORY,
	  .schema =
		  "{\"if\": {\"properties\": {\"type\": {\"pattern\": \"^[Cc][Pp][Uu]$\"}}}, \"then\": {\"required\": "
		  "[\"price_per_core_hour\"], \"not\": {\"required\": [\"price_per_gpu_hour\"]}}, \"else\": "
		  "{\"required\": [\"price_per_gpu_hour\"], \"properties\": {\"cores\": false, "
		  "\"price_per_core_hour\": false}}}",
	  .doc = "the hardware and its price" },
	{ "search_space", JSON_OBJECT, OFF(search_space), .flags = JSON_MANDATORY,
	  .schema = "{\"propertyNames\": {\"pattern\": \"^[a-z0-9_]+$\"}, \"additionalProperties\": " KNOB_SCHEMA "}",
	  .doc = "knobs and their grids: {\"max_num_seqs\": {\"min\": 8, \"max\": 256, "
		 "\"scale\": \"log2\"}, ...}; a knob with \"when\": \"TEST\" exists only where the test holds "
		 "(spec_tokens: only with spec_method != none, without saying so); data_parallel × tensor_parallel "
		 "× pipeline_parallel GPUs at most gpu.per_node" },
	{ "constraints", JSON_ARRAY, OFF(constraints),
	  .schema = "{\"items\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"object\", \"required\": "
		    "[\"allowed\"], \"additionalProperties\": false, \"properties\": {\"allowed\": {\"type\": "
		    "\"array\", \"minItems\": 1, \"items\": {\"type\": \"object\"}}}}]}}",
	  .def = "[\"max_num_batched_tokens >= max_num_seqs\"]",
	  .doc = "constraints between knobs: comparisons \"max_num_batched_tokens >= 2 * max_num_seqs\"; value tests "
		 "\"quantization in [fp8, awq]\", \"kv_cache_dtype != fp8\"; implications \"kv_cache_dtype == fp8 => "
		 "quantization == fp8\"; allowed combinations {\"allowed\": [{\"quantization\": \"fp8\", "
		 "\"tensor_parallel\": [2, 4]}, ...]} (a configuration matches one entry on every knob it names)" },
	{ "workload", JSON_OBJECT, .fields = probe_workload_fields, .callback = parse_workload, .flags = JSON_MANDATORY,
	  .doc = "the requests (as `goodput probe --workload` takes them, and `goodput workload capture` writes)" },
	{ "sla", JSON_OBJECT, .fields = sla_fields,
	  .doc = "latency bounds (online): per request ttft_ms, tpot_ms, itl_ms, e2el_ms with attainment; "
		 "percentile bounds as p<P>_<metric>_ms, e.g. p99_tpot_ms" },
	{ "scenario", JSON_ENUM, OFF(scenario), .choices = scenario_names, .def = "online",
	  .doc = "online: cost from max goodput under the SLA; offline: from saturated throughput" },
	{ "cost_tokens", JSON_ENUM, OFF(cost_tokens), .choices = cost_tokens_names, .def = "output",
	  .doc = "tokens the cost counts" },
	{ "budget", JSON_OBJECT, .fields = budget_fields, .doc = "when to stop" },
	{ "probe", JSON_OBJECT, .fields = probe_fields, .doc = "the rate search of each trial" },
	{ "deploy", JSON_OBJECT, .fields = deploy_fields, .doc = "how servers are started" },
	{ "search", JSON_OBJECT, .fields = search_fields, .doc = "the search (recorded for replay)" },
	{ "baseline", JSON_BOOL, OFF(baseline), .def = "true",
	  .doc = "measure the engine's default configuration first (its default batch and chunk size at the "
		 "smallest TP predicted to fit, native precision if it fits): the summary and report compare the "
		 "best with it; it counts in budget.max_trials (none with max_trials 1)" },
	{ "sweep", JSON_BOOL, OFF(sweep), .def = "true",
	  .doc = "online studies: once the answer is confirmed, one more deployment of it measures 8 request rates "
		 "from 20 % to 110 % of its max rate under the SLA (the report's latency-throughput curve and its "
		 "sweet spot); it counts in budget.max_trials, never past it, and is skipped when the budget is "
		 "spent (the search keeps one deployment for it when max_trials is 10 or more); false skips it" },
	{ "window", JSON_STRING, .callback = parse_window, .max = 16, .def = "always",
	  .schema = "{\"pattern\": \"^[0-9]{1,2}:[0-9]{1,2}-[0-9]{1,2}:[0-9]{1,2}$\"}",
	  .doc = "daily time window \"HH:MM-HH:MM\" (local time) in which the daemon runs trials" },
	{ 0 },
};

/* ---- the reference ---- */

void study_schema_print(FILE *f)
{
	fprintf(f, "Study spec keys (JSON; * = required):\n\n");
	json_fields_print(f, study_fields, "");
}

int study_schema_json(cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *s = cJSON_CreateObject(), *body = NULL;
	cJSON *item;
	int r;

	if (!s)
		return -ENOMEM;
	r = json_fields_schema(study_fields, 0, &body);
	if (r < 0)
		return r;
	if (!cJSON_AddStringToObject(s, "$schema", "https://json-schema.org/draft/2020-12/schema") ||
	    !cJSON_AddStringToObject(s, "title", "goodput study spec") ||
	    !cJSON_AddStringToObject(s, "description",
				     "A tuning study for goodput: what to search, under which SLA, on which "
				     "hardware, with which budget (goodput tune --help-spec)."))
		return -ENOMEM;
	while ((item = body->child)) {
		cJSON_DetachItemViaPointer(body, item);
		if (!cJSON_AddItemToObject(s, item->string, item)) {
			cJSON_Delete(item);
			return -ENOMEM;
		}
	}
	*ret = TAKE_PTR(s);
	return 0;
}

const struct json_field *study_schema_fields(void)
{
	return study_fields;
}
