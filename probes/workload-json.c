/* workload-json.c — the workload block's table, its checks across keys, and
 * the writer of a traffic shape (see workload-json.h).
 *
 * The table's offsets count from struct block below: the spec being built
 * plus what "not given" means for keys whose default depends on others (a
 * distribution follows the histogram or the range ratio given, output
 * lengths follow the input's kind, the arrival process follows the
 * burstiness). What a key means together with others is checked in
 * check_block() once every row was read. */
#include "workload-json.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "workload-internal.h"

struct block {
	struct probe_workload_spec s;
	int input_dist, output_dist, arrival; /* -1: not given */
	bool input_len_given, output_len_given, have_input_hist, have_output_hist;
	bool have_start, rate_given;
};

_Static_assert(sizeof(enum probe_dataset) == sizeof(int), "enum probe_dataset is not int-sized");

#define OFF(field) offsetof(struct block, s.config.field)
#define RAW(field) offsetof(struct block, field)
#define TOKENS_MAX ((double)PROBE_MAX_TOKENS_PER_REQUEST)
#define RATE_MIN   1e-6
#define RATE_MAX   1e6
#define STR(x)     #x
#define XSTR(x)    STR(x)

int probe_parse_time_of_day(const char *s, uint32_t *ret)
{
	unsigned h, m, sec = 0;
	int n = 0;

	if (sscanf(s, "%2u:%2u%n", &h, &m, &n) != 2)
		return -EINVAL;
	if (s[n] == ':') {
		int k = 0;

		if (sscanf(s + n + 1, "%2u%n", &sec, &k) != 1)
			return -EINVAL;
		n += 1 + k;
	}
	if (s[n] || h > 23 || m > 59 || sec > 59)
		return -EINVAL;
	*ret = h * 3600 + m * 60 + sec;
	return 0;
}

const char *probe_format_time_of_day(uint32_t t, char *buf, size_t size)
{
	t %= PROBE_SECONDS_PER_DAY;
	if (t % 60)
		snprintf(buf, size, "%02u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, size, "%02u:%02u", t / 3600, t / 60 % 60);
	return buf;
}

/* ---- callbacks ---- */

static int mark_len(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct block *b = base;

	if (strcmp(f->name, "input_len") == 0)
		b->input_len_given = true;
	else
		b->output_len_given = true;
	return json_dispatch_store(v, path, f, base, err);
}

static int parse_request_rate(const cJSON *v, const char *path, const struct json_field *f, void *base,
			      struct error *err)
{
	struct block *b = base;

	(void)f;
	b->rate_given = true;
	if (cJSON_IsString(v) && strcmp(v->valuestring, "inf") == 0) {
		b->s.config.request_rate = INFINITY;
		return 0;
	}
	if (json_value_double(v, path, RATE_MIN, RATE_MAX, &b->s.config.request_rate, err) < 0)
		return error_set(err, -EINVAL, "%s: expected requests/s in [%g, %g] or \"inf\"", path, RATE_MIN,
				 RATE_MAX);
	return 0;
}

static int parse_percentiles(const cJSON *v, const char *path, const struct json_field *f, void *base,
			     struct error *err)
{
	struct block *b = base;
	const cJSON *item;
	size_t i = 0;

	(void)f;
	cJSON_ArrayForEach(item, v)
	{
		if (!cJSON_IsNumber(item) || !(item->valuedouble > 0) || item->valuedouble > 100)
			return error_set(err, -EINVAL, "%s[%zu]: expected a number in (0, 100]", path, i);
		b->s.percentiles[i++] = item->valuedouble;
	}
	b->s.n_percentiles = i;
	return 0;
}

/* {"le": [bounds...], "count": [counts...]} */
static int parse_histogram(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	static const char *const keys[] = { "le", "count", NULL };
	struct block *b = base;
	bool input = strncmp(f->name, "input", 5) == 0;
	struct probe_length_histogram *h = input ? &b->s.config.input.hist : &b->s.config.output.hist;
	const cJSON *le, *count, *x;
	uint32_t i = 0;
	char p[160];
	int r;

	r = json_check_keys(v, path, keys, err);
	if (r < 0)
		return r;
	le = cJSON_GetObjectItemCaseSensitive(v, "le");
	count = cJSON_GetObjectItemCaseSensitive(v, "count");
	if (!cJSON_IsArray(le) || !cJSON_IsArray(count))
		return error_set(err, -EINVAL, "%s: expected {\"le\": [bucket bounds], \"count\": [counts]}", path);
	if (cJSON_GetArraySize(le) != cJSON_GetArraySize(count) || cJSON_GetArraySize(le) < 1 ||
	    cJSON_GetArraySize(le) > PROBE_HISTOGRAM_MAX_BUCKETS)
		return error_set(err, -EINVAL, "%s: le and count need the same number of entries, 1 to %u", path,
				 PROBE_HISTOGRAM_MAX_BUCKETS);
	cJSON_ArrayForEach(x, le)
	{
		snprintf(p, sizeof(p), "%s.le[%u]", path, i);
		r = json_value_double(x, p, 0, TOKENS_MAX, &h->le[i], err);
		if (r < 0)
			return r;
		if (!(h->le[i] > (i ? h->le[i - 1] : 0)))
			return error_set(err, -EINVAL, "%s: expected a bound above the one before, got %g", p,
					 h->le[i]);
		i++;
	}
	h->n = i;
	i = 0;
	cJSON_ArrayForEach(x, count)
	{
		snprintf(p, sizeof(p), "%s.count[%u]", path, i);
		r = json_value_double(x, p, 0, 1e15, &h->count[i], err);
		if (r < 0)
			return r;
		i++;
	}
	if (input)
		b->have_input_hist = true;
	else
		b->have_output_hist = true;
	return 0;
}

/* [["09:00", 4.5], ["12:00", 8], ...] */
static int parse_rate_profile(const cJSON *v, const char *path, const struct json_field *f, void *base,
			      struct error *err)
{
	struct probe_rate_profile *prof = &((struct block *)base)->s.config.profile;
	const cJSON *pt;
	uint32_t i = 0;
	char p[160];

	(void)f;
	cJSON_ArrayForEach(pt, v)
	{
		const cJSON *t = cJSON_GetArrayItem(pt, 0), *rate = cJSON_GetArrayItem(pt, 1);

		snprintf(p, sizeof(p), "%s[%u]", path, i);
		if (!cJSON_IsArray(pt) || cJSON_GetArraySize(pt) != 2 || !cJSON_IsString(t) ||
		    probe_parse_time_of_day(t->valuestring, &prof->second_of_day[i]) < 0)
			return error_set(err, -EINVAL, "%s: expected [\"HH:MM\", requests/s]", p);
		if (i && prof->second_of_day[i] <= prof->second_of_day[i - 1])
			return error_set(err, -EINVAL, "%s: \"%s\" must come after the point before", p,
					 t->valuestring);
		if (json_value_double(rate, p, 0, RATE_MAX, &prof->rate[i], err) < 0)
			return error_set(err, -EINVAL, "%s: expected [\"HH:MM\", requests/s in [0, %g]]", p, RATE_MAX);
		i++;
	}
	prof->n = i;
	if (!(probe_rate_profile_mean(prof) > 0))
		return error_set(err, -EINVAL, "%s: every rate is 0", path);
	return 0;
}

static int parse_profile_start(const cJSON *v, const char *path, const struct json_field *f, void *base,
			       struct error *err)
{
	struct block *b = base;

	(void)f;
	if (probe_parse_time_of_day(v->valuestring, &b->s.config.profile.start) < 0)
		return error_set(err, -EINVAL, "%s: expected \"HH:MM\" or \"HH:MM:SS\", got \"%s\"", path,
				 v->valuestring);
	b->have_start = true;
	return 0;
}

/* Acceptance rates: a rate in (0, 1] or a non-increasing array of them. */
static int check_rates(const cJSON *v, const char *path, struct error *err)
{
	const cJSON *e;
	double prev = 1;
	int i = 0;

	if (cJSON_IsNumber(v)) {
		if (!(v->valuedouble > 0 && v->valuedouble <= 1))
			return error_set(err, -EINVAL, "%s: expected a rate in (0, 1], got %g", path, v->valuedouble);
		return 0;
	}
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > 16)
		return error_set(err, -EINVAL, "%s: expected a rate or an array of 1 to 16 per-position rates", path);
	cJSON_ArrayForEach(e, v)
	{
		if (!cJSON_IsNumber(e) || !(e->valuedouble > 0 && e->valuedouble <= 1))
			return error_set(err, -EINVAL, "%s[%d]: expected a rate in (0, 1]", path, i);
		if (e->valuedouble > prev)
			return error_set(
				err, -EINVAL,
				"%s[%d]: %g is above the rate of the position before (%g): a draft position is "
				"accepted only after every earlier one",
				path, i, e->valuedouble, prev);
		prev = e->valuedouble;
		i++;
	}
	return 0;
}

static int parse_spec_acceptance(const cJSON *v, const char *path, const struct json_field *f, void *base,
				 struct error *err)
{
	static const char *const methods[] = { "ngram", "draft_model", "eagle", "mtp", NULL };
	struct block *b = base;
	const cJSON *e;
	int r;

	(void)f;
	if (cJSON_IsObject(v)) {
		cJSON_ArrayForEach(e, v)
		{
			char p[256];
			bool known = false;

			for (size_t i = 0; methods[i]; i++)
				known = known || strcmp(e->string, methods[i]) == 0;
			if (!known)
				return error_set(err, -EINVAL, "%s.%s: unknown method (ngram, draft_model, eagle, mtp)",
						 path, e->string);
			snprintf(p, sizeof(p), "%s.%s", path, e->string);
			r = check_rates(e, p, err);
			if (r < 0)
				return r;
		}
	} else {
		r = check_rates(v, path, err);
		if (r < 0)
			return r;
	}
	b->s.spec_acceptance = v;
	return 0;
}

/* ---- the table ---- */

#define REQUEST_RATE_SCHEMA                                                                                            \
	"{\"anyOf\": [{\"type\": \"number\", \"minimum\": " XSTR(RATE_MIN) ", \"maximum\": " XSTR(                     \
		RATE_MAX) "}, {\"const\": \"inf\"}]}"
#define HISTOGRAM_SCHEMA                                                                                               \
	"{\"required\": [\"le\", \"count\"], \"additionalProperties\": false, \"properties\": {"                       \
	"\"le\": {\"type\": \"array\", \"minItems\": 1, \"maxItems\": 128, \"items\": {\"type\": \"number\", "         \
	"\"exclusiveMinimum\": 0}},"                                                                                   \
	"\"count\": {\"type\": \"array\", \"minItems\": 1, \"maxItems\": 128, \"items\": {\"type\": \"number\", "      \
	"\"minimum\": 0}}}}"
#define PROFILE_SCHEMA                                                                                                 \
	"{\"items\": {\"type\": \"array\", \"prefixItems\": [{\"type\": \"string\", \"pattern\": "                     \
	"\"^[0-9]{1,2}:[0-9]{2}(:[0-9]{2})?$\"}, {\"type\": \"number\", \"minimum\": 0}], \"minItems\": 2, "           \
	"\"maxItems\": 2}}"

#define RATES_SCHEMA                                                                                                   \
	"{\"anyOf\": [{\"type\": \"number\", \"exclusiveMinimum\": 0, \"maximum\": 1}, {\"type\": \"array\", "         \
	"\"minItems\": 1, \"maxItems\": 16, \"items\": {\"type\": \"number\", \"exclusiveMinimum\": 0, \"maximum\": "  \
	"1}}]}"
#define SPEC_ACCEPTANCE_SCHEMA                                                                                         \
	"{\"anyOf\": [" RATES_SCHEMA ", {\"type\": \"object\", \"additionalProperties\": false, \"properties\": {"     \
	"\"ngram\": " RATES_SCHEMA ", \"draft_model\": " RATES_SCHEMA ", \"eagle\": " RATES_SCHEMA                     \
	", \"mtp\": " RATES_SCHEMA "}}]}"

const struct json_field probe_workload_fields[] = {
	{ "dataset", JSON_ENUM, OFF(dataset), .choices = probe_dataset_names, .def = "random",
	  .doc = "random, sharegpt or custom (JSONL)" },
	{ "dataset_path", JSON_STRING, OFF(dataset_path), .max = 4096, .doc = "dataset file (sharegpt, custom)" },
	{ "input_len", JSON_DOUBLE, OFF(input.mean), .callback = mark_len, .min = 1, .max = TOKENS_MAX,
	  .def = "1024 (histogram: the buckets' own mean)", .doc = "mean prompt length, tokens" },
	{ "output_len", JSON_DOUBLE, OFF(output.mean), .callback = mark_len, .min = 1, .max = TOKENS_MAX,
	  .def = "128 (histogram: the buckets' own mean)", .doc = "mean output length, tokens" },
	{ "range_ratio", JSON_DOUBLE, OFF(input.range_ratio), .min = 0, .max = 0.999, .def = "0",
	  .doc = "uniform lengths in [len·(1−r), len·(1+r)] (vLLM's --random-range-ratio)" },
	{ "input_len_dist", JSON_ENUM, RAW(input_dist), .choices = probe_dist_names,
	  .def = "fixed (uniform with range_ratio, histogram with input_len_histogram)",
	  .doc = "fixed, uniform, normal, lognormal, histogram (input_len_histogram) or samples (samples_path)" },
	{ "output_len_dist", JSON_ENUM, RAW(output_dist), .choices = probe_dist_names,
	  .def = "histogram with output_len_histogram, else as input_len_dist (fixed after a histogram)",
	  .doc = "fixed, uniform, normal, lognormal, histogram (output_len_histogram) or samples (samples_path)" },
	{ "input_len_std", JSON_DOUBLE, OFF(input.stddev), .min = 0, .max = TOKENS_MAX, .def = "0",
	  .doc = "normal: tokens; lognormal: sigma of ln(length)" },
	{ "output_len_std", JSON_DOUBLE, OFF(output.stddev), .min = 0, .max = TOKENS_MAX, .def = "0",
	  .doc = "normal: tokens; lognormal: sigma of ln(length)" },
	{ "input_len_histogram", JSON_OBJECT, .callback = parse_histogram, .schema = HISTOGRAM_SCHEMA,
	  .doc = "{\"le\": [bucket upper bounds], \"count\": [requests per bucket]}: prompt lengths as a server's "
		 "histogram counts them (bucket i holds (le[i−1], le[i]]); drawn by count, inside a bucket tilted so "
		 "the mean is input_len" },
	{ "output_len_histogram", JSON_OBJECT, .callback = parse_histogram, .schema = HISTOGRAM_SCHEMA,
	  .doc = "the same for output lengths (mean output_len)" },
	{ "samples_path", JSON_STRING, OFF(samples_path), .max = 4096,
	  .doc = "a request log (goodput probe --save-requests lines, OpenAI request/response pairs with usage and "
		 "a timestamp, or {\"input_len\", \"output_len\", \"t\"} lines) for samples lengths and trace "
		 "arrivals" },
	{ "num_prompts", JSON_U32, OFF(num_prompts), .min = 1, .max = 1000000, .def = "200",
	  .doc = "requests of a single load point and of the saturation run; the search's load points send until "
		 "their verdict is sure, at most 4 × num_prompts (a study's probe.max_requests)" },
	{ "num_warmups", JSON_U32, OFF(num_warmup), .min = 0, .max = 100000, .def = "0",
	  .doc = "warm-up requests once per trial, after the server is ready and before its first load point "
		 "(not measured)" },
	{ "request_rate", JSON_ANY, .callback = parse_request_rate, .def = "inf (with rate_profile: its mean)",
	  .schema = REQUEST_RATE_SCHEMA,
	  .doc = "requests/s or \"inf\": the first rate of a study's search (each load point gets its own rate); "
		 "a rate profile and a trace are scaled to it" },
	{ "burstiness", JSON_DOUBLE, OFF(burstiness), .min = 1e-3, .max = 1e3, .def = "1",
	  .doc = "gamma shape of arrivals (1 = Poisson)" },
	{ "arrival", JSON_ENUM, RAW(arrival), .choices = probe_arrival_names,
	  .def = "poisson (gamma when burstiness is not 1)",
	  .doc = "poisson, gamma, constant, inf, or trace (the arrival times of samples_path)" },
	{ "rate_profile", JSON_ARRAY, .callback = parse_rate_profile, .min = 1, .max = PROBE_RATE_PROFILE_MAX,
	  .schema = PROFILE_SCHEMA,
	  .doc = "the rate over the day, [[\"HH:MM\", requests/s], ...], each holding until the next: arrivals "
		 "follow its shape scaled to request_rate; `goodput plan --rate-profile` sizes the day by it" },
	{ "rate_profile_start", JSON_STRING, .callback = parse_profile_start, .max = 8, .def = "the first point's time",
	  .doc = "where in the day a run starts, \"HH:MM\"" },
	{ "rate_profile_speed", JSON_DOUBLE, OFF(profile.speed), .min = 1e-3, .max = 1e6, .def = "1",
	  .doc = "day-seconds a run second covers (1: real time, 1440: a day in a minute)" },
	{ "max_concurrency", JSON_U32, OFF(max_concurrency), .min = 0, .max = 100000, .def = "0",
	  .doc = "requests in flight at most (0 = open loop)" },
	{ "prefix_len", JSON_U32, OFF(prefix_len), .min = 0, .max = PROBE_MAX_TOKENS_PER_REQUEST, .def = "0",
	  .doc = "shared prefix tokens, on top of each prompt's drawn input length" },
	{ "prefix_group_size", JSON_U32, OFF(prefix_group_size), .min = 0, .max = 1000000, .def = "0",
	  .doc = "requests sharing one prefix" },
	{ "ignore_eos", JSON_BOOL, OFF(ignore_eos), .def = "true",
	  .doc = "ask the server to generate exactly output_len tokens" },
	{ "seed", JSON_U64, OFF(seed), .min = 0, .max = 9007199254740992.0, .def = "0", .doc = "workload seed" },
	{ "percentiles", JSON_ARRAY, .callback = parse_percentiles, .min = 1, .max = PROBE_MAX_PERCENTILES,
	  .schema = "{\"items\": {\"type\": \"number\", \"exclusiveMinimum\": 0, \"maximum\": 100}}",
	  .def = "[50, 90, 99]", .doc = "latency percentiles reported" },
	{ "turns", JSON_U32, OFF(turns), .min = 1, .max = 1000, .def = "1",
	  .doc = "conversations: each request a turn that resends the turns before it and their answers "
		 "(what a prefix cache keeps between turns); random dataset only" },
	{ "prompt_repetition", JSON_DOUBLE, OFF(prompt_repetition), .min = 0, .max = 0.99, .def = "0",
	  .doc = "share of each prompt copied from earlier in it, in segments of 8–32 tokens: text that repeats "
		 "itself, where n-gram speculation finds drafts (random dataset only)" },
	{ "spec_acceptance", JSON_ANY, .callback = parse_spec_acceptance, .schema = SPEC_ACCEPTANCE_SCHEMA,
	  .def = "by method: ngram 0.6 (after a match), draft_model 0.7, eagle 0.75, mtp 0.85",
	  .doc = "how often speculative drafts are accepted on this workload: one rate for every draft position, "
		 "vLLM's per-position rates [p1, p2, ...] (accepted tokens per position / drafts), or an object of "
		 "either by method ({\"ngram\": 0.5, \"draft_model\": [0.8, 0.6, 0.45]}); for the dry run, the twin "
		 "and goodput-sim (a real engine measures its own)" },
	{ "captured", JSON_OBJECT, RAW(s.captured),
	  .doc = "what `goodput workload capture` measured (source, window, requests, mean and peak rate, "
		 "prefix-cache hit rate): kept as written, for the report and drift" },
	{ 0 },
};

/* ---- checks across keys ---- */

static int length_kind(struct block *b, const char *pre, bool input, struct error *err)
{
	struct probe_workload_config *w = &b->s.config;
	struct probe_length_dist *d = input ? &w->input : &w->output;
	int given = input ? b->input_dist : b->output_dist;
	bool hist = input ? b->have_input_hist : b->have_output_hist;
	const char *name = input ? "input" : "output";

	if (given >= 0)
		d->kind = (enum probe_dist)given;
	else if (hist)
		d->kind = PROBE_DIST_HISTOGRAM;
	else if (input)
		d->kind = w->input.range_ratio > 0 ? PROBE_DIST_UNIFORM : PROBE_DIST_FIXED;
	else
		d->kind = w->input.kind == PROBE_DIST_HISTOGRAM ? PROBE_DIST_FIXED : w->input.kind;
	if (d->kind == PROBE_DIST_HISTOGRAM && !hist)
		return error_set(err, -EINVAL, "%s%s_len_histogram: missing (%s_len_dist is histogram)", pre, name,
				 name);
	if (d->kind != PROBE_DIST_HISTOGRAM && hist)
		return error_set(err, -EINVAL, "%s%s_len_histogram: only with %s_len_dist histogram", pre, name, name);
	if ((d->kind == PROBE_DIST_NORMAL || d->kind == PROBE_DIST_LOGNORMAL) && !(d->stddev > 0))
		return error_set(err, -EINVAL, "%s%s_len_std: needed (> 0) for %s lengths", pre, name,
				 probe_dist_name(d->kind));
	if (d->kind == PROBE_DIST_SAMPLES && !w->samples_path)
		return error_set(err, -EINVAL, "%ssamples_path: missing (%s_len_dist is samples)", pre, name);
	if (d->kind == PROBE_DIST_HISTOGRAM && !(input ? b->input_len_given : b->output_len_given))
		d->mean = probe_histogram_mean_uniform(&d->hist);
	if (d->kind == PROBE_DIST_SAMPLES && !(input ? b->input_len_given : b->output_len_given))
		d->mean = NAN; /* the file's, known once it is read */
	return 0;
}

static int check_block(struct block *b, const char *pre, struct error *err)
{
	struct probe_workload_config *w = &b->s.config;
	struct probe_rate_profile *prof = &w->profile;
	bool uniform = w->input.range_ratio > 0;
	int r;

	if (w->dataset != PROBE_DATASET_RANDOM && !w->dataset_path)
		return error_set(err, -EINVAL, "%sdataset_path: missing (dataset %s reads a file)", pre,
				 probe_dataset_name(w->dataset));
	if (w->dataset == PROBE_DATASET_RANDOM && w->dataset_path)
		return error_set(err, -EINVAL, "%sdataset_path: only for the sharegpt and custom datasets", pre);
	r = length_kind(b, pre, true, err);
	if (r >= 0)
		r = length_kind(b, pre, false, err);
	if (r < 0)
		return r;
	w->output.range_ratio = w->input.range_ratio;
	if (uniform && w->input.kind != PROBE_DIST_UNIFORM && w->output.kind != PROBE_DIST_UNIFORM)
		return error_set(err, -EINVAL, "%srange_ratio: only applies to uniform lengths", pre);
	if (w->prefix_len > 0 && w->prefix_len + w->input.mean > PROBE_MAX_TOKENS_PER_REQUEST)
		return error_set(err, -EINVAL, "%sprefix_len: %u + input_len %g is more than %u tokens", pre,
				 w->prefix_len, w->input.mean, PROBE_MAX_TOKENS_PER_REQUEST);
	if ((w->prefix_len > 0) != (w->prefix_group_size > 0))
		return error_set(err, -EINVAL, "%sprefix_group_size: set prefix_len and prefix_group_size together",
				 pre);
	if (w->dataset != PROBE_DATASET_RANDOM && (w->turns > 1 || w->prompt_repetition > 0))
		return error_set(err, -EINVAL, "%s%s: only for the random dataset (a dataset's prompts are its own)",
				 pre, w->turns > 1 ? "turns" : "prompt_repetition");
	if (b->arrival >= 0)
		w->arrival = (enum probe_arrival)b->arrival;
	else
		w->arrival = w->burstiness == 1.0 ? PROBE_ARRIVAL_POISSON : PROBE_ARRIVAL_GAMMA;
	if (w->arrival == PROBE_ARRIVAL_POISSON && w->burstiness != 1.0)
		return error_set(err, -EINVAL, "%sburstiness: %g, but arrival poisson has burstiness 1 (use gamma)",
				 pre, w->burstiness);
	if (w->arrival == PROBE_ARRIVAL_TRACE && !w->samples_path)
		return error_set(err, -EINVAL, "%ssamples_path: missing (arrival trace replays its times)", pre);
	if (w->samples_path && w->arrival != PROBE_ARRIVAL_TRACE && w->input.kind != PROBE_DIST_SAMPLES &&
	    w->output.kind != PROBE_DIST_SAMPLES)
		return error_set(err, -EINVAL, "%ssamples_path: only with samples lengths or arrival trace", pre);
	if (!prof->n && (b->have_start || prof->speed != 1))
		return error_set(err, -EINVAL, "%srate_profile: missing (rate_profile_start and _speed shape it)", pre);
	if (prof->n && (w->arrival == PROBE_ARRIVAL_TRACE || w->arrival == PROBE_ARRIVAL_INF))
		return error_set(err, -EINVAL, "%srate_profile: needs poisson, gamma or constant arrivals, not %s", pre,
				 probe_arrival_name(w->arrival));
	if (prof->n && !b->have_start)
		prof->start = prof->second_of_day[0];
	if (prof->n && !b->rate_given)
		w->request_rate = probe_rate_profile_mean(prof);
	return 0;
}

int probe_workload_from_json(const cJSON *obj, const char *path, struct probe_workload_spec *spec, struct error *err)
{
	struct block b = { .s = *spec, .input_dist = -1, .output_dist = -1, .arrival = -1 };
	int r;

	if (!cJSON_IsObject(obj))
		return json_wrong(obj, json_path_or_root(path), "an object", err);
	b.s.config.profile = (struct probe_rate_profile){ .speed = 1 };
	b.s.config.input.hist.n = b.s.config.output.hist.n = 0;
	b.s.config.samples_path = NULL;
	b.s.captured = NULL;
	b.s.spec_acceptance = NULL;
	b.s.n_percentiles = 0;
	char pre[128];

	snprintf(pre, sizeof(pre), "%s%s", path ? path : "", path && *path ? "." : "");
	r = json_dispatch(obj, path, probe_workload_fields, 0, &b, err);
	if (r >= 0)
		r = check_block(&b, pre, err);
	if (r < 0)
		return r;
	*spec = b.s;
	return 0;
}

int probe_rate_profile_from_json(const cJSON *v, struct probe_rate_profile *ret, struct error *err)
{
	struct block b = { 0 };
	const cJSON *a = v;
	const char *path = "(root)";
	int r;

	if (cJSON_IsObject(v)) {
		const cJSON *captured = cJSON_GetObjectItemCaseSensitive(v, "captured");

		a = cJSON_GetObjectItemCaseSensitive(v, "rate_profile");
		path = "rate_profile";
		if (!a && cJSON_IsObject(captured)) {
			a = cJSON_GetObjectItemCaseSensitive(captured, "rate_profile");
			path = "captured.rate_profile";
		}
		if (!a)
			return error_set(err, -ENOENT, "no rate_profile (nor captured.rate_profile) in it");
	}
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > PROBE_RATE_PROFILE_MAX)
		return error_set(err, -EINVAL, "%s: expected [[\"HH:MM\", requests/s], ...] of 1 to %u points", path,
				 PROBE_RATE_PROFILE_MAX);
	r = parse_rate_profile(a, path, NULL, &b, err);
	if (r < 0)
		return r;
	b.s.config.profile.start = b.s.config.profile.second_of_day[0];
	b.s.config.profile.speed = 1;
	*ret = b.s.config.profile;
	return 0;
}

/* ---- the writer ---- */

static const char *const shape_keys[] = {
	"dataset",
	"dataset_path",
	"input_len",
	"output_len",
	"range_ratio",
	"input_len_dist",
	"output_len_dist",
	"input_len_std",
	"output_len_std",
	"input_len_histogram",
	"output_len_histogram",
	"samples_path",
	"request_rate",
	"burstiness",
	"arrival",
	"rate_profile",
	"rate_profile_start",
	"rate_profile_speed",
	"prefix_len",
	"prefix_group_size",
	"turns",
	"prompt_repetition",
	NULL,
};

static int add_number_array(cJSON *o, const char *key, const double *v, uint32_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	for (uint32_t i = 0; a && i < n; i++) {
		cJSON *x = cJSON_CreateNumber(v[i]);

		if (!x || !cJSON_AddItemToArray(a, x)) {
			cJSON_Delete(x);
			return -ENOMEM;
		}
	}
	return a ? 0 : -ENOMEM;
}

static int add_length(cJSON *o, const char *name, const struct probe_length_dist *d)
{
	char key[32];
	int r = 0;

	snprintf(key, sizeof(key), "%s_len_dist", name);
	r |= json_add_string(o, key, probe_dist_name(d->kind));
	snprintf(key, sizeof(key), "%s_len", name);
	if (isfinite(d->mean))
		r |= json_add_number(o, key, d->mean);
	if (d->kind == PROBE_DIST_NORMAL || d->kind == PROBE_DIST_LOGNORMAL) {
		snprintf(key, sizeof(key), "%s_len_std", name);
		r |= json_add_number(o, key, d->stddev);
	}
	if (d->kind == PROBE_DIST_HISTOGRAM) {
		cJSON *h;

		snprintf(key, sizeof(key), "%s_len_histogram", name);
		h = cJSON_AddObjectToObject(o, key);
		if (!h || add_number_array(h, "le", d->hist.le, d->hist.n) < 0 ||
		    add_number_array(h, "count", d->hist.count, d->hist.n) < 0)
			return -ENOMEM;
	}
	return r ? -ENOMEM : 0;
}

int probe_rate_profile_points_to_json(cJSON *o, const char *key, const struct probe_rate_profile *p)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);
	char t[16];

	if (!a)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n; i++) {
		cJSON *pt = cJSON_CreateArray();

		if (!pt || !cJSON_AddItemToArray(a, pt)) {
			cJSON_Delete(pt);
			return -ENOMEM;
		}
		if (!cJSON_AddItemToArray(
			    pt, cJSON_CreateString(probe_format_time_of_day(p->second_of_day[i], t, sizeof(t)))) ||
		    !cJSON_AddItemToArray(pt, cJSON_CreateNumber(p->rate[i])))
			return -ENOMEM;
	}
	return 0;
}

static int add_profile(cJSON *o, const struct probe_rate_profile *p)
{
	char t[16];

	if (probe_rate_profile_points_to_json(o, "rate_profile", p) < 0)
		return -ENOMEM;
	if (p->start != p->second_of_day[0] &&
	    json_add_string(o, "rate_profile_start", probe_format_time_of_day(p->start, t, sizeof(t))) < 0)
		return -ENOMEM;
	if (p->speed != 1 && json_add_number(o, "rate_profile_speed", p->speed) < 0)
		return -ENOMEM;
	return 0;
}

int probe_workload_shape_to_json(const struct probe_workload_config *w, cJSON *o)
{
	int r = 0;

	for (size_t i = 0; shape_keys[i]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(o, shape_keys[i]);
	if (w->dataset != PROBE_DATASET_RANDOM) {
		r |= json_add_string(o, "dataset", probe_dataset_name(w->dataset));
		r |= json_add_string(o, "dataset_path", w->dataset_path);
	} else
		r |= add_length(o, "input", &w->input);
	if (r >= 0 && w->dataset != PROBE_DATASET_SHAREGPT)
		r |= add_length(o, "output", &w->output);
	if (r >= 0 && w->input.kind == PROBE_DIST_UNIFORM)
		r |= json_add_number(o, "range_ratio", w->input.range_ratio);
	if (w->samples_path)
		r |= json_add_string(o, "samples_path", w->samples_path);
	r |= json_add_string(o, "arrival", probe_arrival_name(w->arrival));
	if (isfinite(w->request_rate))
		r |= json_add_number(o, "request_rate", w->request_rate);
	else
		r |= json_add_string(o, "request_rate", "inf");
	if (w->arrival == PROBE_ARRIVAL_GAMMA)
		r |= json_add_number(o, "burstiness", w->burstiness);
	if (w->prefix_len > 0) {
		r |= json_add_number(o, "prefix_len", w->prefix_len);
		r |= json_add_number(o, "prefix_group_size", w->prefix_group_size);
	}
	if (w->turns > 1)
		r |= json_add_number(o, "turns", w->turns);
	if (w->prompt_repetition > 0)
		r |= json_add_number(o, "prompt_repetition", w->prompt_repetition);
	if (r >= 0 && w->profile.n)
		r |= add_profile(o, &w->profile);
	return r ? -ENOMEM : 0;
}
