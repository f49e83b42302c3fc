/* prom.c — reading Prometheus text format for the few gauges and counters
 * the probe records, and averaging them over a load point.
 *
 * A line is `name{label="value",...} value [timestamp]`, or a `#` comment
 * (HELP/TYPE). The reader checks each line's shape so that a page that is
 * not Prometheus text (an HTML error page at /metrics) is refused rather
 * than read as zeros. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "prom.h"

enum which {
	W_NONE,
	W_RUNNING,
	W_WAITING,
	W_KV,
	W_PREEMPT
};

static const struct {
	const char *name;
	enum which w;
} known[] = {
	{ "vllm:num_requests_running", W_RUNNING },  { "vllm:num_requests_waiting", W_WAITING },
	{ "vllm:gpu_cache_usage_perc", W_KV },       { "vllm:kv_cache_usage_perc", W_KV },
	{ "vllm:num_preemptions_total", W_PREEMPT }, { "sglang:num_running_reqs", W_RUNNING },
	{ "sglang:num_queue_reqs", W_WAITING },      { "sglang:token_usage", W_KV },
};

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

static enum which lookup(const char *n, size_t len)
{
	for (size_t i = 0; i < ELEMENTSOF(known); i++)
		if (strlen(known[i].name) == len && memcmp(known[i].name, n, len) == 0)
			return known[i].w;
	return W_NONE;
}

/* Parses {a="x",b="y"} at *p (the '{'), leaving *p after the '}'. */
static int parse_labels(const char **p, const char *end)
{
	const char *s = *p + 1;

	for (;;) {
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s < end && *s == '}')
			break;
		if (s >= end || !name_char(*s, true))
			return -EBADMSG;
		while (s < end && name_char(*s, false))
			s++;
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s >= end || *s != '=')
			return -EBADMSG;
		s++;
		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		if (s >= end || *s != '"')
			return -EBADMSG;
		for (s++; s < end && *s != '"'; s++)
			if (*s == '\\') {
				s++;
				if (s >= end)
					return -EBADMSG;
			}
		if (s >= end)
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

static void add(struct probe_prom_sample *out, enum which w, double v)
{
	if (!isfinite(v))
		return;
	switch (w) {
	case W_RUNNING:
		out->running += v;
		out->have_running = true;
		break;
	case W_WAITING:
		out->waiting += v;
		out->have_waiting = true;
		break;
	case W_KV:
		out->kv_usage = out->have_kv ? MAX(out->kv_usage, v) : v;
		out->have_kv = true;
		break;
	case W_PREEMPT:
		out->preemptions += v;
		out->have_preemptions = true;
		break;
	default:
		break;
	}
}

/* How much of a line to quote in a message: at most 40 bytes and never
 * past its end (the buffer need not hold a NUL). */
static int shown(const char *from, const char *line_end)
{
	return (int)MIN(line_end - from, 40);
}

int probe_prom_parse(const char *text, size_t len, struct probe_prom_sample *ret, struct error *err)
{
	struct probe_prom_sample out = { 0 };
	const char *p = text, *end = text + len;
	size_t line = 0;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *le = eol ? eol : end, *s = p, *name;
		enum which w;
		double v;
		int r;

		line++;
		p = eol ? eol + 1 : end;
		if (le > s && le[-1] == '\r')
			le--;
		while (s < le && (*s == ' ' || *s == '\t'))
			s++;
		if (s == le || *s == '#')
			continue;
		name = s;
		if (!name_char(*s, true))
			return error_set(err, -EBADMSG, "metrics line %zu: not Prometheus text: \"%.*s\"", line,
					 shown(name, le), name);
		while (s < le && name_char(*s, false))
			s++;
		w = lookup(name, (size_t)(s - name));
		if (s < le && *s == '{') {
			r = parse_labels(&s, le);
			if (r < 0)
				return error_set(err, r, "metrics line %zu: bad labels: \"%.*s\"", line,
						 shown(name, le), name);
		}
		if (s >= le || (*s != ' ' && *s != '\t'))
			return error_set(err, -EBADMSG, "metrics line %zu: expected a value: \"%.*s\"", line,
					 shown(name, le), name);
		r = parse_value(s, le, &v);
		if (r < 0)
			return error_set(err, r, "metrics line %zu: bad value: \"%.*s\"", line, shown(name, le), name);
		add(&out, w, v);
	}
	*ret = out;
	return 0;
}

void probe_prom_acc_init(struct probe_prom_acc *a)
{
	*a = (struct probe_prom_acc){ 0 };
}

void probe_prom_acc_add(struct probe_prom_acc *a, const struct probe_prom_sample *s)
{
	a->n++;
	if (s->have_running) {
		a->running_sum += s->running;
		a->running_peak = a->n_running++ ? MAX(a->running_peak, s->running) : s->running;
	}
	if (s->have_waiting) {
		a->waiting_sum += s->waiting;
		a->waiting_peak = a->n_waiting++ ? MAX(a->waiting_peak, s->waiting) : s->waiting;
	}
	if (s->have_kv) {
		a->kv_sum += s->kv_usage;
		a->kv_peak = a->n_kv++ ? MAX(a->kv_peak, s->kv_usage) : s->kv_usage;
	}
	if (s->have_preemptions) {
		if (!a->have_preemptions)
			a->preemptions_first = s->preemptions;
		a->preemptions_last = s->preemptions;
		a->have_preemptions = true;
	}
}

void probe_prom_acc_result(const struct probe_prom_acc *a, struct probe_server_metrics *ret)
{
	struct probe_server_metrics m = { 0 };

	m.present = a->n_running + a->n_waiting + a->n_kv > 0 || a->have_preemptions;
	m.samples = a->n;
	if (a->n_running) {
		m.running_mean = a->running_sum / (double)a->n_running;
		m.running_peak = a->running_peak;
	}
	if (a->n_waiting) {
		m.waiting_mean = a->waiting_sum / (double)a->n_waiting;
		m.waiting_peak = a->waiting_peak;
	}
	if (a->n_kv) {
		m.kv_usage_mean = a->kv_sum / (double)a->n_kv;
		m.kv_usage_peak = a->kv_peak;
	}
	/* A counter that went down was reset (server restarted): count from 0. */
	if (a->have_preemptions)
		m.preemptions = a->preemptions_last >= a->preemptions_first ? a->preemptions_last - a->preemptions_first
									    : a->preemptions_last;
	*ret = m;
}
