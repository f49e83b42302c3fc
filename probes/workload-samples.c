/* workload-samples.c — a request log read as samples of a workload: when
 * each request arrived and how long its prompt and its answer were.
 *
 * Three kinds of log are read (workload.h lists their keys): the probe's own
 * --save-requests lines, which is what a benchmark actually sent; OpenAI
 * request/response pairs as a gateway or an application logs them, whose
 * `usage` has the server's token counts; and a plain form a script can
 * write. The generator replays such a file (lengths, arrivals) and
 * `goodput workload capture --from-log` measures its shape. Times are kept
 * as µs offsets from the first request, so a replay reproduces them exactly;
 * the wall-clock time of the first request (when the log has one) places the
 * log in the day for a rate profile. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "json-util.h"
#include "macro.h"
#include "workload-internal.h"

struct sample {
	double t;     /* probe: monotonic µs; others: seconds (epoch for OpenAI, relative for plain) */
	double wall;  /* probe: seconds since the epoch when the line has it; else NAN */
	size_t order; /* line order, to keep ties stable */
	uint32_t input, output;
	bool have_t;
};

struct reader {
	const char *path;
	struct sample *v;
	size_t n, cap;
	bool format_known;
	enum probe_samples_format format;
	size_t skipped_failed;
};

struct probe_samples *probe_samples_free(struct probe_samples *s)
{
	if (!s)
		return NULL;
	free(s->t_usec);
	free(s->input);
	free(s->output);
	free(s);
	return NULL;
}

double probe_samples_rate(const struct probe_samples *s)
{
	if (!s->have_time || s->n < 2 || s->t_usec[s->n - 1] == 0)
		return NAN;
	return (double)(s->n - 1) / ((double)s->t_usec[s->n - 1] / 1e6);
}

/* "2025-03-01T09:30:00.25Z" or with "+01:00": seconds since the epoch. */
static int parse_rfc3339(const char *s, double *ret)
{
	struct tm tm = { 0 };
	int n = 0, oh = 0, om = 0;
	double frac = 0;
	const char *p;
	time_t t;

	if (sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
		   &tm.tm_sec, &n) != 6)
		return -EINVAL;
	p = s + n;
	if (*p == '.') {
		char *end;

		frac = strtod(p, &end);
		p = end;
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d%n", &oh, &om, &n) == 2) {
		int sign = *p == '+' ? 1 : -1;

		p += 1 + n;
		oh *= sign;
		om *= sign;
	} else
		return -EINVAL;
	if (*p || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
	    tm.tm_min > 59 || tm.tm_sec > 60)
		return -EINVAL;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*ret = (double)t + frac - oh * 3600.0 - om * 60.0;
	return 0;
}

static int get_tokens(const cJSON *o, const char *where, const char *key, uint32_t min, uint32_t *ret,
		      struct error *err)
{
	uint32_t v = 0;
	int r = json_get_u32(o, where, key, 0, PROBE_MAX_TOKENS_PER_REQUEST, &v, err);

	if (r == 0)
		return error_set(err, -EINVAL, "%s.%s: missing", where, key);
	if (r < 0)
		return r;
	*ret = MAX(v, min);
	return 0;
}

static int probe_line(struct reader *rd, const cJSON *o, const char *where, struct sample *s, struct error *err)
{
	uint64_t send;
	bool ok = true;
	int r;

	r = json_require_u64(o, where, "send_usec", 0, UINT64_C(1) << 53, &send, err);
	if (r >= 0)
		r = json_get_bool(o, where, "success", &ok, err);
	if (r < 0)
		return r;
	if (!ok) {
		rd->skipped_failed++;
		return 0;
	}
	r = get_tokens(o, where, "input_tokens", 1, &s->input, err);
	if (r >= 0)
		r = get_tokens(o, where, "output_tokens", 1, &s->output, err);
	if (r >= 0)
		r = json_get_double(o, where, "timestamp", 0, 1e11, &s->wall, err);
	if (r < 0)
		return r;
	s->t = (double)send;
	s->have_t = true;
	return 1;
}

static int openai_line(const cJSON *o, const char *where, struct sample *s, struct error *err)
{
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(o, "response");
	const cJSON *usage = cJSON_GetObjectItemCaseSensitive(o, "usage");
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, "timestamp");
	char p[160];
	int r;

	if (!usage && cJSON_IsObject(resp))
		usage = cJSON_GetObjectItemCaseSensitive(resp, "usage");
	if (!cJSON_IsObject(usage))
		return error_set(err, -EINVAL, "%s: usage: missing (prompt_tokens and completion_tokens)", where);
	snprintf(p, sizeof(p), "%s.usage", where);
	r = get_tokens(usage, p, "prompt_tokens", 1, &s->input, err);
	if (r >= 0)
		r = get_tokens(usage, p, "completion_tokens", 1, &s->output, err);
	if (r < 0)
		return r;
	if (!ts && cJSON_IsObject(resp))
		ts = cJSON_GetObjectItemCaseSensitive(resp, "created");
	if (cJSON_IsNumber(ts) && ts->valuedouble >= 0 && ts->valuedouble < 1e11)
		s->t = ts->valuedouble;
	else if (!cJSON_IsString(ts) || parse_rfc3339(ts->valuestring, &s->t) < 0)
		return error_set(err, -EINVAL,
				 "%s: timestamp: expected seconds since the epoch or RFC 3339 text "
				 "(\"2025-03-01T09:30:00Z\"), or the response's \"created\"",
				 where);
	s->have_t = true;
	return 1;
}

static int plain_line(const cJSON *o, const char *where, struct sample *s, struct error *err)
{
	int r;

	r = get_tokens(o, where, "input_len", 1, &s->input, err);
	if (r >= 0)
		r = get_tokens(o, where, "output_len", 1, &s->output, err);
	if (r >= 0)
		r = json_get_double(o, where, "t", 0, 1e11, &s->t, err);
	if (r < 0)
		return r;
	s->have_t = r > 0;
	return 1;
}

static int add_line(struct reader *rd, size_t lineno, const char *line, size_t len, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *o = NULL;
	struct sample s = { .wall = NAN, .order = lineno };
	enum probe_samples_format format;
	char where[128];
	int r;

	if (strspn(line, " \t\r\n") == len)
		return 0;
	snprintf(where, sizeof(where), "%s:%zu", rd->path, lineno);
	r = json_parse_strict(where, line, len, &o, err);
	if (r < 0)
		return r;
	if (!cJSON_IsObject(o))
		return error_set(err, -EINVAL, "%s: expected a JSON object", where);
	if (cJSON_GetObjectItemCaseSensitive(o, "send_usec"))
		format = PROBE_SAMPLES_PROBE;
	else if (cJSON_GetObjectItemCaseSensitive(o, "usage") || cJSON_GetObjectItemCaseSensitive(o, "response"))
		format = PROBE_SAMPLES_OPENAI;
	else if (cJSON_GetObjectItemCaseSensitive(o, "input_len"))
		format = PROBE_SAMPLES_PLAIN;
	else
		return error_set(err, -EINVAL,
				 "%s: expected a `goodput probe --save-requests` line, an OpenAI request/response "
				 "pair with \"usage\" and a timestamp, or {\"input_len\": N, \"output_len\": M}",
				 where);
	if (rd->format_known && format != rd->format)
		return error_set(err, -EINVAL, "%s: a line of another kind than line 1's", where);
	rd->format = format;
	rd->format_known = true;
	r = format == PROBE_SAMPLES_PROBE    ? probe_line(rd, o, where, &s, err)
	    : format == PROBE_SAMPLES_OPENAI ? openai_line(o, where, &s, err)
					     : plain_line(o, where, &s, err);
	if (r <= 0)
		return r;
	if (rd->n > 0 && s.have_t != rd->v[0].have_t)
		return error_set(err, -EINVAL, "%s: t: given on some lines only", where);
	if (rd->n >= PROBE_MAX_REQUESTS)
		return error_set(err, -E2BIG, "%s: more than %u requests", rd->path, PROBE_MAX_REQUESTS);
	if (ARRAY_GROW(rd->v, rd->cap, rd->n) < 0)
		return -ENOMEM;
	rd->v[rd->n++] = s;
	return 0;
}

/* One line of the log (probe_line_fn). */
static int read_line(size_t lineno, const char *line, size_t len, void *userdata, struct error *err)
{
	struct reader *rd = userdata;
	int r = add_line(rd, lineno, line, len, err);

	if (r == -ENOMEM)
		return error_set(err, r, "%s: out of memory", rd->path);
	return r;
}

static int by_time(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

int probe_samples_load(const char *path, struct probe_samples **ret, struct error *err)
{
	struct reader rd = { .path = path };
	_cleanup_(probe_samples_freep) struct probe_samples *s = NULL;
	double t0, scale;
	int r;

	r = probe_read_lines(path, read_line, &rd, err);
	if (r >= 0 && rd.n == 0)
		r = error_set(err, -EINVAL, "%s: no requests%s", path,
			      rd.skipped_failed ? " (every one of them failed)" : "");
	if (r >= 0 && !(s = calloc(1, sizeof(*s))))
		r = -ENOMEM;
	if (r >= 0) {
		s->t_usec = calloc(rd.n, sizeof(uint64_t));
		s->input = calloc(rd.n, sizeof(uint32_t));
		s->output = calloc(rd.n, sizeof(uint32_t));
		if (!s->t_usec || !s->input || !s->output)
			r = error_set(err, -ENOMEM, "%s: out of memory", path);
	}
	if (r < 0) {
		free(rd.v);
		return r;
	}
	s->format = rd.format;
	s->n = rd.n;
	s->skipped_failed = rd.skipped_failed;
	s->have_time = rd.v[0].have_t;
	s->first_realtime = NAN;
	if (s->have_time)
		qsort(rd.v, rd.n, sizeof(*rd.v), by_time);
	/* probe logs count in µs already; the others in seconds */
	scale = rd.format == PROBE_SAMPLES_PROBE ? 1 : 1e6;
	t0 = rd.v[0].t;
	if (rd.format == PROBE_SAMPLES_OPENAI)
		s->first_realtime = t0;
	else if (rd.format == PROBE_SAMPLES_PROBE)
		s->first_realtime = rd.v[0].wall;
	for (size_t i = 0; i < rd.n; i++) {
		s->t_usec[i] = s->have_time ? (uint64_t)llround((rd.v[i].t - t0) * scale) : 0;
		s->input[i] = rd.v[i].input;
		s->output[i] = rd.v[i].output;
	}
	free(rd.v);
	*ret = TAKE_PTR(s);
	return 0;
}
