/* study-schema.c — the study spec's schema: one table of every key with its
 * type, range, default and documentation, and the generic pass over it.
 *
 * Each row names the key's dotted path, its type and range, where a plain
 * value lands in struct study (offsetof), its default and a line of text. The
 * generic pass walks the table: it refuses unknown keys in every declared
 * object, reads each plain value with the strict getters of json-util.h and
 * writes it to its field. Keys whose meaning is more than one value (the
 * search space, the SLA's percentile bounds, "inf" request rates, the
 * checkpoint map) are marked CUSTOM and parsed by study.c. The reference
 * text (study_schema_print) is printed from the same table. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "json-util.h"
#include "macro.h"
#include "study-internal.h"
#include "time-util.h"

enum ktype {
	K_OBJECT, /* a nested object whose keys are rows below it */
	K_OPEN,   /* an object whose keys are checked by custom code */
	K_STRING,
	K_U32,
	K_U64,
	K_DOUBLE,
	K_BOOL,
	K_ENUM,     /* string among choices → int */
	K_DURATION, /* seconds (number) or "90s", "45m", "8h", "1h30m" → µs */
	K_CUSTOM,   /* parsed by code after the generic pass */
};

struct key {
	const char *path;
	enum ktype type;
	size_t offset; /* into struct study; plain types only */
	double min, max;
	const char *const *choices;
	bool required;
	const char *def; /* shown in the reference */
	const char *doc;
};

const char *const study_dataset_names[] = { "random", "sharegpt", "custom", NULL };
const char *const study_dist_names[] = { "fixed", "uniform", "normal", "lognormal", NULL };
const char *const study_arrival_names[] = { "poisson", "gamma", "constant", "inf", NULL };
static const char *const scenario_names[] = { "online", "offline", NULL };
static const char *const cost_tokens_names[] = { "output", "input+output", NULL };
const char *const study_method_names[] = { "exec", "systemd", "command", NULL };
const char *const study_quant_names[] = { "none", "fp8", "int8", "awq", NULL };

#define OFF(field) offsetof(struct study, field)
#define TOKENS_MAX ((double)PROBE_MAX_TOKENS_PER_REQUEST)

static const struct key schema[] = {
	{ "name", K_STRING, OFF(name), 1, STUDY_NAME_MAX, NULL, true, NULL,
	  "unique name of the study ([A-Za-z0-9_.-])" },
	{ "engine", K_STRING, OFF(engine), 1, 64, NULL, true, NULL,
	  "engine profile (configs/engines/NAME.json): sim, vllm, ..." },
	{ "label", K_STRING, OFF(label), 1, 256, NULL, false, NULL,
	  "free text grouping studies of one workload/SLA for `goodput best`" },
	{ "model", K_OBJECT, 0, 0, 0, NULL, true, NULL, "the model to serve" },
	{ "model.name", K_STRING, OFF(model.name), 1, 512, NULL, true, NULL,
	  "model name or checkpoint (served as is for quantization none)" },
	{ "model.checkpoints", K_OPEN, 0, 0, 0, NULL, false, NULL,
	  "checkpoint per quantization where the engine needs one, e.g. {\"fp8\": \"org/model-FP8\"}" },
	{ "quantizations", K_CUSTOM, 0, 0, 0, study_quant_names, false, "[\"none\"]",
	  "quantizations the operator allows (none, fp8, int8, awq); they become the quantization knob unless "
	  "search_space has one, whose values must be among them" },
	{ "quality_check", K_CUSTOM, 0, 0, 0, NULL, false, NULL,
	  "argv of a command run against each deployed server (GOODPUT_BASE_URL, GOODPUT_MODEL in its "
	  "environment); a non-zero exit marks the trial infeasible" },
	{ "gpu", K_OBJECT, 0, 0, 0, NULL, true, NULL, "the hardware and its price" },
	{ "gpu.type", K_STRING, OFF(gpu.type), 1, 64, NULL, true, NULL, "GPU model, e.g. H100, A100-80GB, L40S" },
	{ "gpu.count", K_U32, OFF(gpu.count), 1, 64, NULL, false, "1",
	  "GPUs on the host (tensor_parallel divides it)" },
	{ "gpu.price_per_gpu_hour", K_DOUBLE, OFF(gpu.price_per_gpu_hour), 0, 1000, NULL, true, NULL,
	  "$ per GPU-hour" },
	{ "search_space", K_CUSTOM, 0, 0, 0, NULL, true, NULL,
	  "knobs and their grids (optimizer/space.h): {\"max_num_seqs\": {\"min\": 8, \"max\": 256, \"scale\": "
	  "\"log2\"}, ...}" },
	{ "constraints", K_CUSTOM, 0, 0, 0, NULL, false, "[\"max_num_batched_tokens >= max_num_seqs\"]",
	  "constraints between knobs, e.g. \"max_num_batched_tokens >= 2 * max_num_seqs\"" },
	{ "workload", K_OBJECT, 0, 0, 0, NULL, true, NULL, "the requests (as `goodput probe` takes them)" },
	{ "workload.dataset", K_ENUM, 0, 0, 0, study_dataset_names, false, "random",
	  "random, sharegpt or custom (JSONL)" },
	{ "workload.dataset_path", K_STRING, OFF(workload.dataset_path), 1, 4096, NULL, false, NULL,
	  "dataset file (sharegpt, custom)" },
	{ "workload.input_len", K_DOUBLE, 0, 1, TOKENS_MAX, NULL, false, "1024", "mean prompt length, tokens" },
	{ "workload.output_len", K_DOUBLE, 0, 1, TOKENS_MAX, NULL, false, "128", "mean output length, tokens" },
	{ "workload.range_ratio", K_DOUBLE, 0, 0, 0.999, NULL, false, "0",
	  "uniform lengths in [len·(1−r), len·(1+r)] (vLLM's --random-range-ratio)" },
	{ "workload.input_len_dist", K_ENUM, 0, 0, 0, study_dist_names, false, "fixed (uniform with range_ratio)",
	  "fixed, uniform, normal, lognormal" },
	{ "workload.output_len_dist", K_ENUM, 0, 0, 0, study_dist_names, false, "as input_len_dist",
	  "fixed, uniform, normal, lognormal" },
	{ "workload.input_len_std", K_DOUBLE, 0, 0, TOKENS_MAX, NULL, false, "0",
	  "normal: tokens; lognormal: sigma of ln(length)" },
	{ "workload.output_len_std", K_DOUBLE, 0, 0, TOKENS_MAX, NULL, false, "0",
	  "normal: tokens; lognormal: sigma of ln(length)" },
	{ "workload.num_prompts", K_U32, OFF(workload.num_prompts), 1, 1000000, NULL, false, "200",
	  "measured requests per load point" },
	{ "workload.num_warmups", K_U32, OFF(workload.num_warmup), 0, 100000, NULL, false, "0",
	  "warm-up requests before each load point" },
	{ "workload.request_rate", K_CUSTOM, 0, 0, 1e6, NULL, false, "inf",
	  "requests/s or \"inf\": the first rate of the search (each load point gets its own rate)" },
	{ "workload.burstiness", K_DOUBLE, OFF(workload.burstiness), 1e-3, 1e3, NULL, false, "1",
	  "gamma shape of arrivals (1 = Poisson)" },
	{ "workload.arrival", K_ENUM, 0, 0, 0, study_arrival_names, false, "poisson (gamma when burstiness is not 1)",
	  "poisson, gamma, constant or inf" },
	{ "workload.max_concurrency", K_U32, OFF(workload.max_concurrency), 0, 100000, NULL, false, "0",
	  "requests in flight at most (0 = open loop)" },
	{ "workload.prefix_len", K_U32, OFF(workload.prefix_len), 0, PROBE_MAX_TOKENS_PER_REQUEST, NULL, false, "0",
	  "shared prefix tokens" },
	{ "workload.prefix_group_size", K_U32, OFF(workload.prefix_group_size), 0, 1000000, NULL, false, "0",
	  "requests sharing one prefix" },
	{ "workload.ignore_eos", K_BOOL, OFF(workload.ignore_eos), 0, 0, NULL, false, "true",
	  "ask the server to generate exactly output_len tokens" },
	{ "workload.seed", K_U64, OFF(workload.seed), 0, 9007199254740992.0, NULL, false, "0", "workload seed" },
	{ "workload.percentiles", K_CUSTOM, 0, 0, 100, NULL, false, "[50, 90, 99]", "latency percentiles reported" },
	{ "sla", K_OPEN, 0, 0, 0, NULL, false, NULL,
	  "latency bounds (online): per request ttft_ms, tpot_ms, itl_ms, e2el_ms with attainment; percentile "
	  "bounds as p<P>_<metric>_ms, e.g. p99_tpot_ms" },
	{ "sla.ttft_ms", K_CUSTOM, 0, 0.001, 3.6e6, NULL, false, NULL, "time to first token, per request" },
	{ "sla.tpot_ms", K_CUSTOM, 0, 0.001, 3.6e6, NULL, false, NULL, "time per output token, per request" },
	{ "sla.itl_ms", K_CUSTOM, 0, 0.001, 3.6e6, NULL, false, NULL, "every inter-token gap, per request" },
	{ "sla.e2el_ms", K_CUSTOM, 0, 0.001, 3.6e6, NULL, false, NULL, "end-to-end latency, per request" },
	{ "sla.attainment", K_CUSTOM, 0, 0.01, 1, NULL, false, "0.9", "fraction of requests that must be good" },
	{ "sla.p<P>_<metric>_ms", K_CUSTOM, 0, 0.001, 3.6e6, NULL, false, NULL,
	  "percentile bound, e.g. p99_tpot_ms: 60 (metric ttft, tpot, itl, e2el; P in (0, 100])" },
	{ "scenario", K_ENUM, 0, 0, 0, scenario_names, false, "online",
	  "online: cost from max goodput under the SLA; offline: from saturated throughput" },
	{ "cost_tokens", K_ENUM, 0, 0, 0, cost_tokens_names, false, "output", "tokens the cost counts" },
	{ "budget", K_OBJECT, 0, 0, 0, NULL, false, NULL, "when to stop" },
	{ "budget.max_trials", K_U32, OFF(budget.max_trials), 1, 100000, NULL, false, "40",
	  "deployments at most (confirmations included)" },
	{ "budget.max_wall_time", K_DURATION, OFF(budget.max_wall_time_usec), 1, 3.1536e7, NULL, false, "none",
	  "seconds, or \"90m\", \"8h\", \"1h30m\"" },
	{ "probe", K_OBJECT, 0, 0, 0, NULL, false, NULL, "the rate search of each trial" },
	{ "probe.tolerance", K_DOUBLE, OFF(probe.tolerance), 0.001, 0.5, NULL, false, "0.05",
	  "relative resolution of the max rate" },
	{ "probe.min_rate", K_DOUBLE, OFF(probe.min_rate), 1e-4, 1e6, NULL, false, "0.05",
	  "lowest useful rate, requests/s: a configuration that fails the SLA there (or cannot complete it at "
	  "saturation) never meets it; the search also stops at 1/64 of the saturation throughput" },
	{ "probe.max_rate", K_DOUBLE, OFF(probe.max_rate), 0, 1e6, NULL, false, "0 (from the saturation run)",
	  "highest rate tried, requests/s: the answer is a measured rate at or below it" },
	{ "probe.max_steps", K_U32, OFF(probe.max_steps), 1, 100, NULL, false, "12", "load points per trial at most" },
	{ "probe.request_timeout", K_DURATION, OFF(probe.request_timeout_usec), 0.1, 86400, NULL, false, "300",
	  "per request" },
	{ "deploy", K_OBJECT, 0, 0, 0, NULL, false, NULL, "how servers are started" },
	{ "deploy.method", K_ENUM, 0, 0, 0, study_method_names, false, "exec",
	  "exec (a child process), systemd (a transient unit goodput-STUDY-TRIAL.service) or command "
	  "(the operator's deploy/teardown commands)" },
	{ "deploy.user", K_BOOL, OFF(deploy.user_bus), 0, 0, NULL, false, "false",
	  "systemd: start units on the user's service manager (systemctl --user) instead of the system's" },
	{ "deploy.deploy_command", K_CUSTOM, 0, 0, 0, NULL, false, NULL,
	  "command: argv run to deploy a trial's server, the rendered engine argv appended; knobs arrive as "
	  "GOODPUT_KNOB_<NAME>, plus GOODPUT_PORT, GOODPUT_TRIAL_ID, GOODPUT_STUDY, GOODPUT_MODEL; it prints "
	  "GOODPUT_BASE_URL=http://HOST:PORT on a line of stdout" },
	{ "deploy.teardown_command", K_CUSTOM, 0, 0, 0, NULL, false, NULL,
	  "command: argv run to remove the trial's server (same environment, plus GOODPUT_BASE_URL)" },
	{ "deploy.health_command", K_CUSTOM, 0, 0, 0, NULL, false, "GET BASE_URL + the profile's health path",
	  "command: argv whose exit status 0 means ready" },
	{ "deploy.command_timeout", K_DURATION, OFF(deploy.command_timeout_usec), 0.1, 86400, NULL, false, "120",
	  "command: time the teardown and each health command may take" },
	{ "deploy.host", K_STRING, OFF(deploy.host), 1, 255, NULL, false, "127.0.0.1",
	  "address the server listens on" },
	{ "deploy.startup_timeout", K_DURATION, OFF(deploy.startup_timeout_usec), 1, 86400, NULL, false,
	  "the engine profile's", "time for /health to answer" },
	{ "deploy.stop_timeout", K_DURATION, OFF(deploy.stop_timeout_usec), 0.1, 3600, NULL, false, "30",
	  "grace between SIGTERM and SIGKILL" },
	{ "search", K_OBJECT, 0, 0, 0, NULL, false, NULL, "the search (recorded for replay)" },
	{ "search.seed", K_U64, OFF(search.seed), 0, 9007199254740992.0, NULL, false, "1",
	  "seed of randomised algorithms" },
	{ "search.algorithm", K_STRING, OFF(search.algorithm), 1, 64, NULL, false, "LN_SBPLX",
	  "NLopt algorithm for the ordinal knobs" },
	{ "search.strategy", K_STRING, OFF(search.strategy), 1, 64, NULL, false, "the optimizer's",
	  "outer strategy over categorical knobs" },
	{ "window", K_CUSTOM, 0, 0, 0, NULL, false, "always",
	  "daily time window \"HH:MM-HH:MM\" (local time) in which the daemon runs trials" },
};

/* ---- generic pass ---- */

/* Splits "a.b.c" into parent "a.b" and leaf "c". */
static void split_path(const char *path, char *parent, size_t size, const char **ret_leaf)
{
	const char *dot = strrchr(path, '.');

	if (!dot) {
		parent[0] = 0;
		*ret_leaf = path;
		return;
	}
	snprintf(parent, size, "%.*s", (int)(dot - path), path);
	*ret_leaf = dot + 1;
}

/* The object at a dotted path, or NULL when it (or a parent) is absent. */
const cJSON *study_object_at(const cJSON *root, const char *path)
{
	char buf[128], *save = NULL;
	const cJSON *o = root;

	if (!*path)
		return root;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *tok = strtok_r(buf, ".", &save); tok && o; tok = strtok_r(NULL, ".", &save)) {
		o = cJSON_GetObjectItemCaseSensitive(o, tok);
		if (cJSON_IsNull(o))
			o = NULL;
	}
	return o;
}

/* Refuses keys of each declared object that the table does not list. */
static int check_unknown_keys(const cJSON *root, struct error *err)
{
	const char *allowed[64];

	for (ssize_t o = -1; o < (ssize_t)ELEMENTSOF(schema); o++) {
		const char *path = o < 0 ? "" : schema[o].path;
		const cJSON *obj;
		size_t n = 0;
		int r;

		if (o >= 0 && schema[o].type != K_OBJECT)
			continue;
		obj = study_object_at(root, path);
		if (!obj)
			continue;
		for (size_t i = 0; i < ELEMENTSOF(schema) && n < ELEMENTSOF(allowed) - 1; i++) {
			char parent[128];
			const char *leaf;

			split_path(schema[i].path, parent, sizeof(parent), &leaf);
			if (strcmp(parent, path) == 0)
				allowed[n++] = leaf;
		}
		allowed[n] = NULL;
		r = json_check_keys(obj, path, allowed, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "90", "90s", "45m", "8h", "1h30m", "2d" → seconds. */
static int parse_duration(const char *s, double *ret)
{
	double total = 0;
	bool any = false;

	while (*s) {
		char *end;
		double v = strtod(s, &end);
		double unit = 1;

		if (end == s || !isfinite(v) || v < 0)
			return -EINVAL;
		switch (*end) {
		case 's':
			end++;
			break;
		case 'm':
			unit = 60;
			end++;
			break;
		case 'h':
			unit = 3600;
			end++;
			break;
		case 'd':
			unit = 86400;
			end++;
			break;
		case 0:
			if (any)
				return -EINVAL; /* "1h30" is ambiguous */
			break;
		default:
			return -EINVAL;
		}
		total += v * unit;
		any = true;
		s = end;
	}
	if (!any)
		return -EINVAL;
	*ret = total;
	return 0;
}

static int get_duration(const cJSON *obj, const char *path, const struct key *k, const char *leaf, uint64_t *ret,
			struct error *err)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, leaf);
	double sec;
	int r;

	if (!item || cJSON_IsNull(item))
		return 0;
	if (cJSON_IsString(item)) {
		if (parse_duration(item->valuestring, &sec) < 0 || sec < k->min || sec > k->max)
			return error_set(
				err, -EINVAL,
				"%s: expected seconds in [%g, %g] or a duration like \"90s\", \"45m\", \"8h\", "
				"got \"%s\"",
				k->path, k->min, k->max, item->valuestring);
	} else {
		r = json_get_double(obj, path, leaf, k->min, k->max, &sec, err);
		if (r <= 0)
			return r;
	}
	*ret = sec_to_usec(sec);
	return 1;
}

/* Reads one plain key into dst (a field of struct study, or of struct study_raw). */
static int read_plain(const cJSON *root, const struct key *k, void *dst, struct error *err)
{
	char parent[128];
	const char *leaf, *str = NULL;
	const cJSON *obj;
	uint64_t u64 = 0;
	int r = 0, idx;

	split_path(k->path, parent, sizeof(parent), &leaf);
	obj = study_object_at(root, parent);
	if (!obj || !cJSON_GetObjectItemCaseSensitive(obj, leaf) ||
	    cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(obj, leaf))) {
		if (k->required)
			return error_set(err, -EINVAL, "%s: missing", k->path);
		return 0;
	}
	switch (k->type) {
	case K_OBJECT:
	case K_OPEN: {
		const cJSON *o = NULL;

		r = json_get_object(obj, parent, leaf, &o, err);
		break;
	}
	case K_STRING:
		r = json_get_string(obj, parent, leaf, (size_t)k->max, &str, err);
		if (r > 0)
			*(const char **)dst = str;
		break;
	case K_U32:
		r = json_get_u32(obj, parent, leaf, (uint32_t)k->min, (uint32_t)k->max, dst, err);
		break;
	case K_U64:
		r = json_get_u64(obj, parent, leaf, (uint64_t)k->min, (uint64_t)k->max, dst, err);
		break;
	case K_DOUBLE:
		r = json_get_double(obj, parent, leaf, k->min, k->max, dst, err);
		break;
	case K_BOOL:
		r = json_get_bool(obj, parent, leaf, dst, err);
		break;
	case K_ENUM:
		r = json_get_enum(obj, parent, leaf, k->choices, &idx, err);
		if (r > 0)
			*(int *)dst = idx;
		break;
	case K_DURATION:
		r = get_duration(obj, parent, k, leaf, &u64, err);
		if (r > 0)
			*(uint64_t *)dst = u64;
		break;
	case K_CUSTOM:
		break;
	}
	return r;
}

/* Where the keys that need translation land before the post-pass. */
static void *raw_field(struct study_raw *raw, const char *path, bool **ret_set)
{
	static const struct {
		const char *path;
		size_t off;
		ssize_t set_off;
	} map[] = {
		{ "workload.dataset", offsetof(struct study_raw, dataset), -1 },
		{ "workload.input_len", offsetof(struct study_raw, input_len), -1 },
		{ "workload.output_len", offsetof(struct study_raw, output_len), -1 },
		{ "workload.range_ratio", offsetof(struct study_raw, range_ratio), -1 },
		{ "workload.input_len_dist", offsetof(struct study_raw, input_dist),
		  offsetof(struct study_raw, set_input_dist) },
		{ "workload.output_len_dist", offsetof(struct study_raw, output_dist),
		  offsetof(struct study_raw, set_output_dist) },
		{ "workload.input_len_std", offsetof(struct study_raw, input_std), -1 },
		{ "workload.output_len_std", offsetof(struct study_raw, output_std), -1 },
		{ "workload.arrival", offsetof(struct study_raw, arrival), -1 },
		{ "scenario", offsetof(struct study_raw, scenario), -1 },
		{ "cost_tokens", offsetof(struct study_raw, cost_tokens), -1 },
		{ "deploy.method", offsetof(struct study_raw, method), -1 },
	};

	*ret_set = NULL;
	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (strcmp(map[i].path, path) == 0) {
			if (map[i].set_off >= 0)
				*ret_set = (bool *)((char *)raw + map[i].set_off);
			return (char *)raw + map[i].off;
		}
	return NULL;
}

int study_schema_apply(struct study *s, struct study_raw *raw, struct error *err)
{
	int r;

	r = check_unknown_keys(s->json, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(schema); i++) {
		const struct key *k = &schema[i];
		bool *set = NULL;
		void *dst;

		if (k->type == K_CUSTOM)
			continue;
		dst = raw_field(raw, k->path, &set);
		if (!dst) {
			/* Plain rows that are not translated must name their field. */
			assert(k->offset != 0 || k->type == K_OBJECT || k->type == K_OPEN);
			dst = (char *)s + k->offset;
		}
		r = read_plain(s->json, k, dst, err);
		if (r < 0)
			return r;
		if (r > 0 && set)
			*set = true;
	}
	return 0;
}

static const char *type_name(const struct key *k, char *buf, size_t size)
{
	switch (k->type) {
	case K_OBJECT:
	case K_OPEN:
		return "object";
	case K_STRING:
		return "string";
	case K_U32:
	case K_U64:
		snprintf(buf, size, "integer %g..%g", k->min, k->max);
		return buf;
	case K_DOUBLE:
		snprintf(buf, size, "number %g..%g", k->min, k->max);
		return buf;
	case K_BOOL:
		return "boolean";
	case K_ENUM: {
		size_t len = 0;
		buf[0] = 0;
		for (size_t i = 0; k->choices[i]; i++)
			len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%s", i ? "|" : "",
						k->choices[i]);
		return buf;
	}
	case K_DURATION:
		return "duration";
	case K_CUSTOM:
		break;
	}
	return "see text";
}

void study_schema_print(FILE *f)
{
	fprintf(f, "Study spec keys (JSON; * = required):\n\n");
	for (size_t i = 0; i < ELEMENTSOF(schema); i++) {
		const struct key *k = &schema[i];
		char buf[96];

		fprintf(f, "  %s%s  (%s%s%s)\n      %s\n", k->path, k->required ? " *" : "",
			type_name(k, buf, sizeof(buf)), k->def ? "; default " : "", k->def ? k->def : "", k->doc);
	}
}
