/* prom.c — reading what a server exports about itself for the few series
 * the probe records, and averaging them over a load point.
 *
 * Prometheus text: a line is `name{label="value",...} value [timestamp]`,
 * or a `#` comment (HELP/TYPE). The reader checks each line's shape so
 * that a page that is not Prometheus text (an HTML error page at /metrics)
 * is refused rather than read as zeros. TensorRT-LLM's trtllm-serve answers
 * /metrics with a JSON array of per-iteration statistics since the last
 * request; the newest element is the server's state now. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json-util.h"
#include "macro.h"
#include "prom.h"

/* Sums per series and name, numerator and divisor: a series' value is its
 * first name the page held. */
struct sums {
	bool have[_PROBE_SERIES_MAX][PROBE_SERIES_MAX_REFS][2];
	double v[_PROBE_SERIES_MAX][PROBE_SERIES_MAX_REFS][2];
};

static const struct probe_metrics_map *map_or_default(const struct probe_metrics_map *map)
{
	static struct probe_metrics_map def;
	static bool def_ready;

	if (map)
		return map;
	if (!def_ready) {
		probe_metrics_map_init_default(&def);
		def_ready = true;
	}
	return &def;
}

static bool name_is(const char *want, const char *n, size_t len)
{
	return strlen(want) == len && memcmp(want, n, len) == 0;
}

/* Adds a value of metric n to every place the map names it. KV usage (a
 * fraction) takes the largest of several series, the rest are summed. */
static void add(struct sums *acc, const struct probe_metrics_map *map, const char *n, size_t len, double v)
{
	if (!isfinite(v))
		return;
	for (size_t s = 0; s < _PROBE_SERIES_MAX; s++)
		for (size_t i = 0; i < map->n_refs[s]; i++)
			for (int part = 0; part < 2; part++) {
				const char *want = part ? map->refs[s][i].per : map->refs[s][i].name;
				bool *have = &acc->have[s][i][part];
				double *x = &acc->v[s][i][part];

				if (!want[0] || !name_is(want, n, len))
					continue;
				if ((s == PROBE_SERIES_KV_USAGE || s == PROBE_SERIES_SPEC_ACCEPT_LENGTH) &&
				    !map->refs[s][i].per[0])
					*x = *have ? MAX(*x, v) : v;
				else
					*x += v;
				*have = true;
			}
}

static void resolve(const struct sums *acc, const struct probe_metrics_map *map, struct probe_prom_sample *out)
{
	*out = (struct probe_prom_sample){ 0 };
	for (size_t s = 0; s < _PROBE_SERIES_MAX; s++)
		for (size_t i = 0; i < map->n_refs[s] && !out->have[s]; i++) {
			if (!acc->have[s][i][0])
				continue;
			if (!map->refs[s][i].per[0]) {
				out->v[s] = acc->v[s][i][0];
				out->have[s] = true;
			} else if (acc->have[s][i][1] && acc->v[s][i][1] > 0) {
				out->v[s] = acc->v[s][i][0] / acc->v[s][i][1];
				out->have[s] = true;
			}
		}
}

/* ---- Prometheus text ---- */

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

static int parse_value(const char *s, const char *end, double *ret);

/* Parses {a="x",b="y"} at *p (the '{'), leaving *p after the '}'. The value
 * of an `le` label (a histogram bucket's bound) goes to *ret_le. */
static int parse_labels(const char **p, const char *end, double *ret_le)
{
	const char *s = *p + 1;

	for (;;) {
		const char *label, *value;
		bool is_le;

		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s < end && *s == '}')
			break;
		if (s >= end || !name_char(*s, true))
			return -EBADMSG;
		label = s;
		while (s < end && name_char(*s, false))
			s++;
		is_le = s - label == 2 && label[0] == 'l' && label[1] == 'e';
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s >= end || *s != '=')
			return -EBADMSG;
		s++;
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s >= end || *s != '"')
			return -EBADMSG;
		value = s + 1;
		for (s++; s < end && *s != '"'; s++)
			if (*s == '\\') {
				s++;
				if (s >= end)
					return -EBADMSG;
			}
		if (s >= end)
			return -EBADMSG;
		if (is_le && ret_le && parse_value(value, s, ret_le) < 0)
			return -EBADMSG;
		s++;
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s < end && *s == ',') {
			s++;
			continue;
		}
		if (s < end && *s == '}')
			break;
		return -EBADMSG;
	}
	*p = s + 1;
	return 0;
}

/* A number as Prometheus writes it ("1.5", "+Inf", "NaN", "2e+06"). */
static int parse_value(const char *s, const char *end, double *ret)
{
	char buf[64];
	size_t n = 0;
	char *e;
	double v;

	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	while (s + n < end && s[n] != ' ' && s[n] != '\t')
		n++;
	if (n == 0 || n >= sizeof(buf))
		return -EBADMSG;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	v = strtod(buf, &e);
	if (*e != '\0')
		return -EBADMSG;
	*ret = v;
	return 0;
}

/* How much of a line to quote in a message: at most 40 bytes and never
 * past its end (the buffer need not hold a NUL). */
static int shown(const char *from, const char *line_end)
{
	return (int)MIN(line_end - from, 40);
}

/* One sample line of a page. */
struct prom_line {
	const char *name;
	size_t name_len;
	double value, le; /* le: NAN without an le label */
};

/* The next sample line from *p (comments and blank lines skipped): 1 with
 * ret filled, 0 at the end, < 0 for a line that is not Prometheus text. */
static int next_sample(const char **p, const char *end, size_t *line, struct prom_line *ret, struct error *err)
{
	while (*p < end) {
		const char *eol = memchr(*p, '\n', (size_t)(end - *p));
		const char *le = eol ? eol : end, *s = *p, *name;
		int r;

		(*line)++;
		*p = eol ? eol + 1 : end;
		if (le > s && le[-1] == '\r')
			le--;
		while (s < le && (*s == ' ' || *s == '\t'))
			s++;
		if (s == le || *s == '#')
			continue;
		name = s;
		if (!name_char(*s, true))
			return error_set(err, -EBADMSG, "metrics line %zu: not Prometheus text: \"%.*s\"", *line,
					 shown(name, le), name);
		while (s < le && name_char(*s, false))
			s++;
		*ret = (struct prom_line){ .name = name, .name_len = (size_t)(s - name), .le = NAN };
		if (s < le && *s == '{') {
			r = parse_labels(&s, le, &ret->le);
			if (r < 0)
				return error_set(err, r, "metrics line %zu: bad labels: \"%.*s\"", *line,
						 shown(name, le), name);
		}
		if (s >= le || (*s != ' ' && *s != '\t'))
			return error_set(err, -EBADMSG, "metrics line %zu: expected a value: \"%.*s\"", *line,
					 shown(name, le), name);
		r = parse_value(s, le, &ret->value);
		if (r < 0)
			return error_set(err, r, "metrics line %zu: bad value: \"%.*s\"", *line, shown(name, le), name);
		return 1;
	}
	return 0;
}

int probe_prom_parse(const char *text, size_t len, const struct probe_metrics_map *map, struct probe_prom_sample *ret,
		     struct error *err)
{
	const char *p = text, *end = text + len;
	struct sums acc = { 0 };
	struct prom_line l;
	size_t line = 0;
	int r;

	map = map_or_default(map);
	while ((r = next_sample(&p, end, &line, &l, err)) > 0)
		add(&acc, map, l.name, l.name_len, l.value);
	if (r < 0)
		return r;
	resolve(&acc, map, ret);
	return 0;
}

/* ---- histograms ---- */

/* Whether the sample is name + suffix. */
static bool is_part(const struct prom_line *l, const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);

	return l->name_len == n + k && memcmp(l->name, name, n) == 0 && memcmp(l->name + n, suffix, k) == 0;
}

/* Adds count to bucket le, keeping the bounds sorted; buckets of several
 * series (labels) with the same bound are summed. */
static int add_bucket(struct probe_prom_histogram *h, double le, double count)
{
	size_t i = 0;

	if (isinf(le) && le > 0) {
		h->inf += count;
		return 0;
	}
	while (i < h->n && h->le[i] < le)
		i++;
	if (i < h->n && h->le[i] == le) {
		h->cum[i] += count;
		return 0;
	}
	if (h->n >= PROBE_PROM_MAX_BUCKETS)
		return -E2BIG;
	memmove(&h->le[i + 1], &h->le[i], (h->n - i) * sizeof(double));
	memmove(&h->cum[i + 1], &h->cum[i], (h->n - i) * sizeof(double));
	h->le[i] = le;
	h->cum[i] = count;
	h->n++;
	return 0;
}

static int histogram_named(const char *text, size_t len, const char *name, struct probe_prom_histogram *h,
			   struct error *err)
{
	const char *p = text, *end = text + len;
	struct prom_line l;
	size_t line = 0;
	int r;

	*h = (struct probe_prom_histogram){ 0 };
	while ((r = next_sample(&p, end, &line, &l, err)) > 0) {
		if (!isfinite(l.value) && !isinf(l.value))
			continue;
		if (is_part(&l, name, "_bucket")) {
			if (isnan(l.le))
				return error_set(err, -EBADMSG, "metrics line %zu: %s_bucket without an le label", line,
						 name);
			if (add_bucket(h, l.le, l.value) < 0)
				return error_set(err, -E2BIG, "%s: more than %d buckets", name, PROBE_PROM_MAX_BUCKETS);
			h->have = true;
		} else if (is_part(&l, name, "_sum")) {
			h->sum += l.value;
			h->have = true;
		} else if (is_part(&l, name, "_count")) {
			h->count += l.value;
			h->have = true;
		}
	}
	if (r < 0)
		return r;
	if (h->have && h->inf == 0 && h->count > 0)
		h->inf = h->count; /* a page without the +Inf bucket: its count is the total */
	snprintf(h->name, sizeof(h->name), "%s", name);
	return 0;
}

int probe_prom_parse_histogram(const char *text, size_t len, const struct probe_metrics_map *map, enum probe_series s,
			       struct probe_prom_histogram *ret, struct error *err)
{
	map = map_or_default(map);
	*ret = (struct probe_prom_histogram){ 0 };
	if ((unsigned)s >= _PROBE_SERIES_MAX || !probe_series_is_histogram(s))
		return error_set(err, -EINVAL, "series %d is not a histogram", (int)s);
	for (size_t i = 0; i < map->n_refs[s]; i++) {
		int r = histogram_named(text, len, map->refs[s][i].name, ret, err);

		if (r < 0 || ret->have)
			return r;
	}
	*ret = (struct probe_prom_histogram){ 0 };
	return 0;
}

/* ---- TensorRT-LLM's iteration statistics ---- */

/* The number at a dotted path ("kvCacheStats.usedNumBlocks") in o. */
static bool json_path_number(const cJSON *o, const char *path, double *ret)
{
	char key[PROBE_METRIC_NAME_MAX];

	while (o && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(key))
			return false;
		memcpy(key, path, n);
		key[n] = 0;
		o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
		path += n + (path[n] == '.');
	}
	if (!cJSON_IsNumber(o))
		return false;
	*ret = o->valuedouble;
	return true;
}

static int parse_iteration_json(const char *text, size_t len, const struct probe_metrics_map *map,
				struct probe_prom_sample *ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *root = NULL;
	struct sums acc = { 0 };
	const cJSON *last;
	int r;

	r = json_parse_strict("metrics", text, len, &root, err);
	if (r < 0)
		return r;
	if (!cJSON_IsArray(root))
		return error_set(err, -EBADMSG, "metrics: expected a JSON array of iteration statistics");
	last = cJSON_GetArrayItem(root, cJSON_GetArraySize(root) - 1);
	if (last && !cJSON_IsObject(last))
		return error_set(err, -EBADMSG, "metrics: expected iteration statistics (objects)");
	for (size_t s = 0; last && s < _PROBE_SERIES_MAX; s++)
		for (size_t i = 0; i < map->n_refs[s]; i++)
			for (int part = 0; part < 2; part++) {
				const char *path = part ? map->refs[s][i].per : map->refs[s][i].name;

				if (path[0] && json_path_number(last, path, &acc.v[s][i][part]))
					acc.have[s][i][part] = true;
			}
	resolve(&acc, map, ret);
	return 0;
}

int probe_metrics_parse(const char *text, size_t len, const struct probe_metrics_map *map,
			struct probe_prom_sample *ret, struct error *err)
{
	map = map_or_default(map);
	if (map->format == PROBE_METRICS_TRTLLM_JSON)
		return parse_iteration_json(text, len, map, ret, err);
	return probe_prom_parse(text, len, map, ret, err);
}

/* ---- accumulation ---- */

void probe_prom_acc_init(struct probe_prom_acc *a)
{
	*a = (struct probe_prom_acc){ 0 };
}

void probe_prom_acc_add(struct probe_prom_acc *a, const struct probe_prom_sample *s)
{
	a->n++;
	for (size_t i = 0; i < _PROBE_SERIES_MAX; i++) {
		double v = s->v[i];

		if (!s->have[i])
			continue;
		if (probe_series_is_counter(i)) {
			/* A counter that went down was reset (the server restarted): it counts from 0. */
			if (a->n_have[i] > 0)
				a->increase[i] += v >= a->last[i] ? v - a->last[i] : v;
			else
				a->first[i] = v;
			a->last[i] = v;
		} else {
			a->sum[i] += v;
			a->peak[i] = a->n_have[i] > 0 ? MAX(a->peak[i], v) : v;
		}
		a->n_have[i]++;
	}
}

/* A gauge's mean and peak need two samples at least: one sample (taken
 * before the load arrived, or the only one a busy server answered) would
 * report a peak of 0 with the server full. NAN: not known. */
static double mean(const struct probe_prom_acc *a, enum probe_series s)
{
	return a->n_have[s] >= 2 ? a->sum[s] / (double)a->n_have[s] : NAN;
}

static double peak(const struct probe_prom_acc *a, enum probe_series s)
{
	return a->n_have[s] >= 2 ? a->peak[s] : NAN;
}

void probe_prom_acc_result(const struct probe_prom_acc *a, struct probe_server_metrics *ret)
{
	struct probe_server_metrics m = { 0 };

	for (size_t i = 0; i < _PROBE_SERIES_MAX; i++)
		m.present = m.present || a->n_have[i] > 0;
	m.samples = a->n;
	m.running_mean = mean(a, PROBE_SERIES_RUNNING);
	m.running_peak = peak(a, PROBE_SERIES_RUNNING);
	m.waiting_mean = mean(a, PROBE_SERIES_WAITING);
	m.waiting_peak = peak(a, PROBE_SERIES_WAITING);
	m.kv_usage_mean = mean(a, PROBE_SERIES_KV_USAGE);
	m.kv_usage_peak = peak(a, PROBE_SERIES_KV_USAGE);
	m.preemptions = a->increase[PROBE_SERIES_PREEMPTIONS];
	m.prompt_tokens = a->n_have[PROBE_SERIES_PROMPT_TOKENS] ? a->increase[PROBE_SERIES_PROMPT_TOKENS] : NAN;
	m.generation_tokens =
		a->n_have[PROBE_SERIES_GENERATION_TOKENS] ? a->increase[PROBE_SERIES_GENERATION_TOKENS] : NAN;
	m.prefix_queries = a->n_have[PROBE_SERIES_PREFIX_QUERIES] ? a->increase[PROBE_SERIES_PREFIX_QUERIES] : NAN;
	m.prefix_hits = a->n_have[PROBE_SERIES_PREFIX_HITS] ? a->increase[PROBE_SERIES_PREFIX_HITS] : NAN;
	m.spec_drafts = a->n_have[PROBE_SERIES_SPEC_DRAFTS] ? a->increase[PROBE_SERIES_SPEC_DRAFTS] : NAN;
	m.spec_draft_tokens =
		a->n_have[PROBE_SERIES_SPEC_DRAFT_TOKENS] ? a->increase[PROBE_SERIES_SPEC_DRAFT_TOKENS] : NAN;
	m.spec_accepted = a->n_have[PROBE_SERIES_SPEC_ACCEPTED] ? a->increase[PROBE_SERIES_SPEC_ACCEPTED] : NAN;
	m.spec_accept_length =
		a->n_have[PROBE_SERIES_SPEC_ACCEPT_LENGTH] ? mean(a, PROBE_SERIES_SPEC_ACCEPT_LENGTH) : NAN;
	*ret = m;
}
