/* engine-profile-logs.c — what an engine profile says about the engine's
 * own output, and the pure functions that read that output with it.
 *
 * Engines tell what happened in their own words: vLLM that "the estimated
 * maximum model length is 77008", llama.cpp that it "failed to allocate
 * buffer for kv cache", SGLang "Not enough memory. Please try to increase
 * --mem-fraction-static". A profile holds those words as POSIX extended
 * regular expressions (compiled once at load time, matched one line at a
 * time) and this file turns a log or a command's output into facts: why a
 * start-up failed (engine_profile_classify_failure), the version
 * (engine_profile_parse_version), the start-up phases and their durations
 * (engine_profile_startup_phases), and what a health answer means
 * (engine_profile_health_state). Nothing here does I/O: callers hand in text.
 *
 * The keys' json_dispatch callbacks live here too, beside the code that uses
 * what they store; engine-profile.c's table names them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-profile-internal.h"
#include "json-util.h"
#include "macro.h"

#define LINE_MAX_BYTES 4096

const char *const engine_failure_cause_names[] = {
	[ENGINE_FAILURE_NONE] = "none",         [ENGINE_FAILURE_WEIGHTS] = "weights",
	[ENGINE_FAILURE_KV_CACHE] = "kv_cache", [ENGINE_FAILURE_CACHE_BLOCKS] = "cache_blocks",
	[ENGINE_FAILURE_OOM] = "oom",           [ENGINE_FAILURE_GPU_BUSY] = "gpu_busy",
	[_ENGINE_FAILURE_MAX] = NULL,
};

const char *engine_failure_cause_to_string(enum engine_failure_cause c)
{
	return (unsigned)c < _ENGINE_FAILURE_MAX ? engine_failure_cause_names[c] : "unknown";
}

/* ---- compiling ---- */

/* glibc's regcomp copies the tree under a '+' or an interval once per
 * repetition, so nested repetitions grow exponentially ("((a+)+)+..." takes
 * gigabytes). The copies a pattern would make are estimated first, and a
 * pattern above REGEX_MAX_NODES refused before regcomp sees it. Adjacent
 * repetition operators ("a**", "a+?") are undefined in POSIX EREs, and
 * glibc's closure of a run of them grows with its fourth power (100 '*'
 * after one character: 1.9 s to compile, 17 s under ASan): refused too. */
#define REGEX_MAX_DEPTH 32
#define REGEX_MAX_NODES 50000.0

/* Past a bracket expression that starts at s ('['): where it ends. */
static const char *skip_bracket(const char *s)
{
	s++;
	if (*s == '^')
		s++;
	if (*s == ']')
		s++;
	for (; *s && *s != ']'; s++)
		if (*s == '[' && (s[1] == ':' || s[1] == '.' || s[1] == '=')) {
			const char *e = strchr(s + 2, s[1]);

			while (e && e[1] != ']')
				e = strchr(e + 1, s[1]);
			if (!e)
				return s + strlen(s) - 1;
			s = e + 1;
		}
	return *s ? s : s - 1;
}

/* The repetition factor of an interval "{m}", "{m,}" or "{m,n}" at s, and
 * where it ends; 0 when it is not one. */
static double interval(const char **s)
{
	char *e;
	unsigned long m, n;

	m = strtoul(*s + 1, &e, 10);
	if (e == *s + 1)
		return 0;
	n = m;
	if (*e == ',') {
		const char *f = e + 1;

		n = strtoul(f, &e, 10);
		if (e == f)
			n = m;
	}
	if (*e != '}')
		return 0;
	*s = e;
	return (double)MAX(m, n) + 1;
}

/* The copies regcomp would make of pattern s; NAN when two repetition
 * operators are adjacent. */
static double regex_nodes(const char *s)
{
	double sum[REGEX_MAX_DEPTH + 1] = { 0 }, last[REGEX_MAX_DEPTH + 1] = { 0 }, total = 0, f;
	int d = 0;
	bool repeated = false; /* the previous token was a repetition operator */

	for (; *s; s++) {
		bool repeat = *s == '*' || *s == '+' || *s == '?';

		if (*s == '{' && (f = interval(&s)) > 0) {
			if (repeated)
				return NAN;
			last[d] *= f;
			repeated = true;
			continue;
		}
		if (repeat && repeated)
			return NAN;
		repeated = repeat;
		switch (*s) {
		case '(':
			if (d == REGEX_MAX_DEPTH)
				return INFINITY;
			sum[d] += last[d];
			last[d] = 0;
			d++;
			sum[d] = last[d] = 0;
			break;
		case ')':
			if (d > 0) {
				f = sum[d] + last[d] + 1;
				d--;
				sum[d] += last[d];
				last[d] = f;
			}
			break;
		case '|':
			sum[d] += last[d];
			last[d] = 0;
			break;
		case '+':
			last[d] *= 2;
			break;
		default:
			if (*s == '\\' && s[1])
				s++;
			else if (*s == '[')
				s = skip_bracket(s);
			sum[d] += last[d];
			last[d] = 1;
			break;
		}
	}
	for (; d >= 0; d--)
		total += sum[d] + last[d];
	return total;
}

static int regex_compile(struct engine_regex *r, const char *text, const char *path, struct error *err)
{
	char msg[160];
	int k;

	double nodes = regex_nodes(text);

	if (isnan(nodes))
		return error_set(err, -EINVAL,
				 "%s: \"%.60s\" has adjacent repetition operators (\"**\", \"+?\"), undefined in a "
				 "POSIX ERE",
				 path, text);
	if (nodes > REGEX_MAX_NODES)
		return error_set(err, -EINVAL, "%s: \"%.60s\" repeats too much to compile (nested + or {m,n})", path,
				 text);
	k = regcomp(&r->re, text, REG_EXTENDED | REG_NEWLINE);
	if (k != 0) {
		regerror(k, &r->re, msg, sizeof(msg));
		return error_set(err, -EINVAL, "%s: \"%s\" is not a regular expression (POSIX ERE): %s", path, text,
				 msg);
	}
	r->text = text;
	return 0;
}

static void regex_free(struct engine_regex *r)
{
	if (r->text)
		regfree(&r->re);
	r->text = NULL;
}

void engine_profile_free_regexes(struct engine_profile *p)
{
	for (size_t i = 0; i < p->n_failure_patterns; i++) {
		regex_free(&p->failure_patterns[i].pattern);
		regex_free(&p->failure_patterns[i].after);
		regex_free(&p->failure_patterns[i].before);
	}
	for (size_t i = 0; i < p->n_startup_log; i++)
		regex_free(&p->startup_log[i].pattern);
	regex_free(&p->version_pattern);
	regex_free(&p->version_unknown);
}

/* A row's string compiled into the regex at the row's offset. */
static int store_regex(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	return regex_compile((struct engine_regex *)((char *)base + f->offset), v->valuestring, path, err);
}

int engine_profile_parse_version_pattern(const cJSON *v, const char *path, const struct json_field *f, void *base,
					 struct error *err)
{
	return store_regex(v, path, f, base, err);
}

/* ---- failure_patterns ---- */

#define FP(field) offsetof(struct engine_failure_pattern, field)

static const struct json_field failure_fields[] = {
	{ "cause", JSON_ENUM, FP(cause), .flags = JSON_MANDATORY, .choices = engine_failure_cause_names + 1,
	  .doc = "weights, kv_cache, cache_blocks, oom or gpu_busy" },
	{ "pattern", JSON_STRING, FP(pattern), .callback = store_regex, .flags = JSON_MANDATORY, .max = 512,
	  .doc = "POSIX extended regular expression matched against each log line" },
	{ "after", JSON_STRING, FP(after), .callback = store_regex, .max = 512,
	  .doc = "only after a line matching this (the phase began)" },
	{ "before", JSON_STRING, FP(before), .callback = store_regex, .max = 512,
	  .doc = "only before a line matching this (the phase had not ended)" },
	{ 0 },
};

_Static_assert(sizeof(enum engine_failure_cause) == sizeof(int), "cause is stored as an int");

int engine_profile_parse_failure_patterns(const cJSON *v, const char *path, const struct json_field *f, void *base,
					  struct error *err)
{
	struct engine_profile *p = base;
	const cJSON *item;
	int r;

	(void)f;
	cJSON_ArrayForEach(item, v)
	{
		struct engine_failure_pattern *fp = &p->failure_patterns[p->n_failure_patterns];
		char where[64];

		if (p->n_failure_patterns >= ENGINE_MAX_PATTERNS)
			return error_set(err, -EINVAL, "%s: more than %d patterns", path, ENGINE_MAX_PATTERNS);
		snprintf(where, sizeof(where), "%s[%zu]", path, p->n_failure_patterns);
		/* Counted before dispatching, so that what compiled is freed on failure. */
		p->n_failure_patterns++;
		r = json_dispatch(item, where, failure_fields, 0, fp, err);
		if (r < 0)
			return r;
		/* The enum's names start at "weights" (index 1). */
		fp->cause++;
	}
	return 0;
}

/* ---- startup_log ---- */

static int check_phase(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	const char *s = v->valuestring;

	if (strspn(s, "abcdefghijklmnopqrstuvwxyz_") != strlen(s))
		return error_set(err, -EINVAL, "%s: \"%s\": phase names are [a-z_]", path, s);
	return json_dispatch_store(v, path, f, base, err);
}

#define SL(field) offsetof(struct engine_startup_line, field)

static const struct json_field startup_fields[] = {
	{ "phase", JSON_STRING, SL(phase), .callback = check_phase, .flags = JSON_MANDATORY, .max = 32,
	  .doc = "the phase the line ends (weights, compile, graphs, ready, ...)" },
	{ "pattern", JSON_STRING, SL(pattern), .callback = store_regex, .flags = JSON_MANDATORY, .max = 512,
	  .doc = "POSIX extended regular expression; its first group, when there is one, is the phase's seconds" },
	{ 0 },
};

int engine_profile_parse_startup_log(const cJSON *v, const char *path, const struct json_field *f, void *base,
				     struct error *err)
{
	struct engine_profile *p = base;
	const cJSON *item;
	int r;

	(void)f;
	cJSON_ArrayForEach(item, v)
	{
		char where[64];

		if (p->n_startup_log >= ENGINE_MAX_PATTERNS)
			return error_set(err, -EINVAL, "%s: more than %d lines", path, ENGINE_MAX_PATTERNS);
		snprintf(where, sizeof(where), "%s[%zu]", path, p->n_startup_log);
		r = json_dispatch(item, where, startup_fields, 0, &p->startup_log[p->n_startup_log++], err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- health.ready / health.loading ---- */

int engine_profile_parse_statuses(const cJSON *v, const char *path, const struct json_field *f, void *base,
				  struct error *err)
{
	const cJSON *item;
	size_t i = 0;

	cJSON_ArrayForEach(item, v)
	{
		char where[64];
		uint64_t status;
		int r;

		snprintf(where, sizeof(where), "%s[%zu]", path, i++);
		r = json_value_u64(item, where, 100, 599, &status, err);
		if (r < 0)
			return r;
	}
	return json_dispatch_store(v, path, f, base, err);
}

static bool status_in(const cJSON *list, long status)
{
	const cJSON *item;

	cJSON_ArrayForEach(item, list) if ((long)item->valuedouble == status) return true;
	return false;
}

enum engine_health_state engine_profile_health_state(const struct engine_profile *p, long http_status)
{
	if (p && p->health_ready ? status_in(p->health_ready, http_status) : http_status == 200)
		return ENGINE_HEALTH_READY;
	if (p && p->health_loading && status_in(p->health_loading, http_status))
		return ENGINE_HEALTH_LOADING;
	return ENGINE_HEALTH_UNHEALTHY;
}

/* ---- metrics.series ---- */

int engine_profile_parse_series(const cJSON *v, const char *path, const struct json_field *f, void *base,
				struct error *err)
{
	struct engine_profile *p = base;
	const cJSON *item;

	(void)f;
	cJSON_ArrayForEach(item, v)
	{
		int s = probe_series_from_string(item->string);
		const cJSON *name;
		char where[160];
		int r;

		json_path_join(where, sizeof(where), path, item->string);
		if (s < 0) {
			char choices[256];

			json_choices_format(probe_series_names, choices, sizeof(choices));
			return error_set(err, -EINVAL, "%s: unknown series (%s)", where, choices);
		}
		if (cJSON_IsString(item)) {
			r = probe_metrics_map_add(&p->metrics, s, item->valuestring, err);
			if (r < 0)
				return error_prefix(err, r, "%s", path);
			continue;
		}
		if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) < 1)
			return json_wrong(item, where, "a metric name or an array of them", err);
		cJSON_ArrayForEach(name, item)
		{
			if (!cJSON_IsString(name))
				return json_wrong(name, where, "metric names (strings)", err);
			r = probe_metrics_map_add(&p->metrics, s, name->valuestring, err);
			if (r < 0)
				return error_prefix(err, r, "%s", path);
		}
	}
	return 0;
}

/* ---- reading text ---- */

/* Calls fn for each line of text (without its newline, at most
 * LINE_MAX_BYTES; longer lines are cut) until fn returns false. */
static void for_each_line(const char *text, bool (*fn)(const char *line, void *userdata), void *userdata)
{
	char line[LINE_MAX_BYTES];

	while (text && *text) {
		size_t n = strcspn(text, "\n");

		snprintf(line, sizeof(line), "%.*s", (int)MIN(n, sizeof(line) - 1), text);
		if (n > 0 && line[MIN(n, sizeof(line) - 1) - 1] == '\r')
			line[MIN(n, sizeof(line) - 1) - 1] = 0;
		if (!fn(line, userdata))
			return;
		text += n + (text[n] == '\n');
	}
}

static bool matches(const struct engine_regex *r, const char *line, regmatch_t *m, size_t nm)
{
	return r->text && regexec(&r->re, line, nm, m, 0) == 0;
}

/* A number from a match's first group (NAN without one). */
static double group_number(const char *line, const regmatch_t *m)
{
	char buf[64];

	if (m[1].rm_so < 0 || m[1].rm_eo - m[1].rm_so >= (regoff_t)sizeof(buf))
		return NAN;
	snprintf(buf, sizeof(buf), "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
	/* "114,432" as vLLM prints token counts. */
	for (char *c = strchr(buf, ','); c; c = strchr(c, ','))
		memmove(c, c + 1, strlen(c));
	return strtod(buf, NULL);
}

struct classify {
	const struct engine_profile *p;
	bool after_seen[ENGINE_MAX_PATTERNS], before_seen[ENGINE_MAX_PATTERNS];
	bool matched[ENGINE_MAX_PATTERNS];
	double number[ENGINE_MAX_PATTERNS];
	bool oom_substring;
};

static bool classify_line(const char *line, void *userdata)
{
	struct classify *c = userdata;
	const struct engine_profile *p = c->p;

	for (size_t i = 0; i < p->n_failure_patterns; i++) {
		const struct engine_failure_pattern *fp = &p->failure_patterns[i];
		regmatch_t m[2];

		/* A phase-scoped pattern counts only between its bounds; the line
		 * that opens or closes the phase is outside it. */
		if (!c->matched[i] && (!fp->after.text || c->after_seen[i]) && !c->before_seen[i] &&
		    matches(&fp->pattern, line, m, 2)) {
			c->matched[i] = true;
			c->number[i] = group_number(line, m);
		}
		if (matches(&fp->after, line, m, 1))
			c->after_seen[i] = true;
		if ((!fp->after.text || c->after_seen[i]) && matches(&fp->before, line, m, 1))
			c->before_seen[i] = true;
	}
	for (size_t i = 0; p->oom_patterns && p->oom_patterns[i] && !c->oom_substring; i++)
		c->oom_substring = strstr(line, p->oom_patterns[i]) != NULL;
	return true;
}

void engine_profile_classify_failure(const struct engine_profile *p, const char *log_text,
				     enum engine_failure_cause *ret_cause, uint64_t *ret_suggested_len)
{
	struct classify c = { .p = p };

	*ret_cause = ENGINE_FAILURE_NONE;
	*ret_suggested_len = 0;
	for_each_line(log_text, classify_line, &c);
	for (size_t i = 0; i < p->n_failure_patterns; i++)
		if (c.matched[i]) {
			*ret_cause = p->failure_patterns[i].cause;
			if (*ret_cause == ENGINE_FAILURE_KV_CACHE && c.number[i] >= 1 && c.number[i] < 1e12)
				*ret_suggested_len = (uint64_t)c.number[i];
			return;
		}
	if (c.oom_substring)
		*ret_cause = ENGINE_FAILURE_OOM;
}

struct version {
	const struct engine_profile *p;
	char *buf;
	size_t size;
	bool found;
};

static bool version_line(const char *line, void *userdata)
{
	struct version *v = userdata;
	regmatch_t m[2];
	int g;

	if (!matches(&v->p->version_pattern, line, m, 2))
		return true;
	g = m[1].rm_so >= 0 ? 1 : 0;
	snprintf(v->buf, v->size, "%.*s", (int)(m[g].rm_eo - m[g].rm_so), line + m[g].rm_so);
	v->found = v->buf[0] != 0;
	return !v->found;
}

static bool last_line(const char *line, void *userdata)
{
	struct version *v = userdata;
	const char *s = line;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s) {
		snprintf(v->buf, v->size, "%s", s);
		v->buf[strcspn(v->buf, "\r")] = 0;
		for (size_t n = strlen(v->buf); n > 0 && v->buf[n - 1] == ' '; n--)
			v->buf[n - 1] = 0;
		v->found = true;
	}
	return true;
}

bool engine_profile_version_unknown(const struct engine_profile *p, const char *version)
{
	regmatch_t m[1];

	if (!version || !version[0])
		return true;
	return p && p->version_unknown.text && matches(&p->version_unknown, version, m, 1);
}

int engine_profile_parse_version(const struct engine_profile *p, const char *output, char *buf, size_t size)
{
	struct version v = { .p = p, .buf = buf, .size = size };

	if (size == 0)
		return 0;
	buf[0] = 0;
	for_each_line(output, p && p->version_pattern.text ? version_line : last_line, &v);
	return v.found ? 1 : 0;
}

struct phases {
	const struct engine_profile *p;
	engine_startup_phase_fn cb;
	void *userdata;
};

static bool phase_line(const char *line, void *userdata)
{
	struct phases *ph = userdata;

	for (size_t i = 0; i < ph->p->n_startup_log; i++) {
		regmatch_t m[2];

		if (matches(&ph->p->startup_log[i].pattern, line, m, 2))
			ph->cb(ph->p->startup_log[i].phase, group_number(line, m), ph->userdata);
	}
	return true;
}

void engine_profile_startup_phases(const struct engine_profile *p, const char *log_text, engine_startup_phase_fn cb,
				   void *userdata)
{
	struct phases ph = { .p = p, .cb = cb, .userdata = userdata };

	for_each_line(log_text, phase_line, &ph);
}
