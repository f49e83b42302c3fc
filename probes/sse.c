/* sse.c — the probe's reader of streamed responses: Server-Sent Events
 * framing (WHATWG "event stream" rules, minus the parts an OpenAI stream
 * never uses) and a tree-less reader of OpenAI chunks.
 *
 * Both run once per streamed token in the client's write callback, so they
 * are written for the common case: a whole line inside one network read is
 * handled in place; only a line that spans reads is copied into `line`. The
 * chunk reader is a validating single-pass JSON scanner that remembers only
 * the few members the probe needs, so a token costs no allocation. Every
 * buffer is capped by max_event: a server cannot make the probe grow without
 * bound, and an oversized event is reported as such. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sse.h"

/* A line may exceed the event cap by its field name ("data: "). */
#define LINE_SLACK 64

void probe_sse_parser_init(struct probe_sse_parser *p, size_t max_event, probe_sse_event_fn on_event, void *userdata)
{
	*p = (struct probe_sse_parser){
		.max_event = max_event > 0 ? max_event : PROBE_SSE_MAX_EVENT_DEFAULT,
		.on_event = on_event,
		.userdata = userdata,
	};
}

void probe_sse_parser_reset(struct probe_sse_parser *p)
{
	p->line_len = 0;
	p->data_len = 0;
	p->has_data = false;
	p->skip_lf = false;
	p->failed = false;
	p->events = 0;
}

void probe_sse_parser_done(struct probe_sse_parser *p)
{
	free(p->line);
	free(p->data);
	p->line = p->data = NULL;
	p->line_cap = p->data_cap = 0;
	probe_sse_parser_reset(p);
}

/* Grows *buf to hold need bytes (need <= cap limit checked by the caller). */
static int reserve(char **buf, size_t *cap, size_t need)
{
	size_t n;
	char *b;

	if (need <= *cap)
		return 0;
	n = MAX(*cap * 2, MAX(need, (size_t)256));
	b = realloc(*buf, n);
	if (!b)
		return -ENOMEM;
	*buf = b;
	*cap = n;
	return 0;
}

static int fail(struct probe_sse_parser *p, struct error *err, int r, const char *what, size_t size)
{
	p->failed = true;
	if (r == -EMSGSIZE)
		return error_set(err, r, "SSE %s larger than the %zu-byte limit (at least %zu bytes)", what,
				 p->max_event, size > p->max_event ? size : p->max_event + 1);
	if (r == -ENOMEM)
		return error_set(err, r, "out of memory reading the SSE stream");
	return error_set(err, r, "SSE event handler failed");
}

static int dispatch(struct probe_sse_parser *p, struct error *err)
{
	int r;

	if (!p->has_data)
		return 0;
	r = reserve(&p->data, &p->data_cap, p->data_len + 1);
	if (r < 0)
		return fail(p, err, r, "event", p->data_len);
	p->data[p->data_len] = '\0';
	p->has_data = false;
	p->events++;
	r = p->on_event(p->data, p->data_len, p->userdata);
	p->data_len = 0;
	if (r < 0) {
		p->failed = true;
		if (err && err->msg[0] == '\0')
			error_set(err, r, "SSE event handler failed");
		return r;
	}
	return 0;
}

static int process_line(struct probe_sse_parser *p, const char *l, size_t n, struct error *err)
{
	const char *colon, *value;
	size_t vn, need;
	int r;

	if (n == 0)
		return dispatch(p, err);
	if (l[0] == ':')
		return 0; /* comment (keep-alive pings) */
	colon = memchr(l, ':', n);
	if (!colon && n == 4 && memcmp(l, "data", 4) == 0) {
		value = l + 4; /* "data" alone: a data line with an empty value */
		vn = 0;
	} else if (!colon || colon - l != 4 || memcmp(l, "data", 4) != 0)
		return 0; /* event, id, retry, or a field we do not know: ignored as the spec says */
	else {
		value = colon + 1;
		vn = n - 5;
	}
	if (vn > 0 && value[0] == ' ') {
		value++;
		vn--;
	}
	need = p->data_len + (p->has_data ? 1 : 0) + vn;
	if (need > p->max_event)
		return fail(p, err, -EMSGSIZE, "event", need);
	r = reserve(&p->data, &p->data_cap, need + 1);
	if (r < 0)
		return fail(p, err, r, "event", need);
	if (p->has_data)
		p->data[p->data_len++] = '\n';
	memcpy(p->data + p->data_len, value, vn);
	p->data_len += vn;
	p->has_data = true;
	return 0;
}

int probe_sse_feed(struct probe_sse_parser *p, const char *buf, size_t len, struct error *err)
{
	size_t pos = 0;
	int r;

	if (p->failed)
		return error_set(err, -EBADMSG, "SSE stream already failed");
	while (pos < len) {
		size_t eol;

		if (p->skip_lf) {
			p->skip_lf = false;
			if (buf[pos] == '\n') {
				pos++;
				continue;
			}
		}
		/* the first CR or LF: two memchr() passes beat a byte loop on ~200-byte lines */
		{
			const char *lf = memchr(buf + pos, '\n', len - pos);
			size_t lim = lf ? (size_t)(lf - buf) : len;
			const char *cr = memchr(buf + pos, '\r', lim - pos);

			eol = cr ? (size_t)(cr - buf) : lim;
		}
		if (eol == len) {
			size_t need = p->line_len + (len - pos);

			if (need > p->max_event + LINE_SLACK)
				return fail(p, err, -EMSGSIZE, "line", need);
			r = reserve(&p->line, &p->line_cap, need);
			if (r < 0)
				return fail(p, err, r, "line", need);
			memcpy(p->line + p->line_len, buf + pos, len - pos);
			p->line_len = need;
			break;
		}
		if (p->line_len > 0) {
			size_t need = p->line_len + (eol - pos);

			if (need > p->max_event + LINE_SLACK)
				return fail(p, err, -EMSGSIZE, "line", need);
			r = reserve(&p->line, &p->line_cap, need);
			if (r < 0)
				return fail(p, err, r, "line", need);
			memcpy(p->line + p->line_len, buf + pos, eol - pos);
			p->line_len = 0;
			r = process_line(p, p->line, need, err);
		} else if (eol - pos > p->max_event + LINE_SLACK)
			return fail(p, err, -EMSGSIZE, "line", eol - pos);
		else
			r = process_line(p, buf + pos, eol - pos, err);
		if (r < 0)
			return r;
		if (buf[eol] == '\r') {
			if (eol + 1 < len) {
				if (buf[eol + 1] == '\n')
					eol++;
			} else
				p->skip_lf = true;
		}
		pos = eol + 1;
	}
	return 0;
}

int probe_sse_finish(struct probe_sse_parser *p, struct error *err)
{
	int r;

	if (p->failed)
		return error_set(err, -EBADMSG, "SSE stream already failed");
	if (p->line_len > 0) {
		size_t n = p->line_len;

		p->line_len = 0;
		r = process_line(p, p->line, n, err);
		if (r < 0)
			return r;
	}
	return dispatch(p, err);
}

/* ---- OpenAI chunks ---- */

/* Where a JSON value sits, for the few places the probe reads. */
enum jctx {
	J_OTHER,
	J_ROOT,
	J_CHOICES,    /* root.choices */
	J_CHOICE0,    /* root.choices[0] */
	J_DELTA,      /* root.choices[0].delta */
	J_TEXT,       /* .text, .delta.content, .delta.reasoning_content */
	J_USAGE,      /* root.usage */
	J_COMPLETION, /* root.usage.completion_tokens */
	J_PROMPT,     /* root.usage.prompt_tokens */
	J_ERROR,      /* root.error */
	J_ERROR_MSG,  /* root.error.message, root.message */
	J_OBJECT,     /* root.object */
};

#define JSON_MAX_DEPTH 64

struct jscan {
	const char *p, *end;
	int depth;
	struct probe_chunk *out;
	const char *what; /* what was wrong, for the error */
};

static void skip_ws(struct jscan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* Skips white space, then consumes c when it comes next. */
static bool eat(struct jscan *s, char c)
{
	skip_ws(s);
	if (s->p < s->end && *s->p == c) {
		s->p++;
		return true;
	}
	return false;
}

static int bad(struct jscan *s, const char *what)
{
	s->what = what;
	return -EBADMSG;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string at s->p (the opening quote); returns its raw contents. */
static int scan_string(struct jscan *s, const char **ret_start, size_t *ret_len)
{
	const char *start;

	if (s->p >= s->end || *s->p != '"')
		return bad(s, "expected a string");
	start = ++s->p;
	while (s->p < s->end) {
		unsigned char c = (unsigned char)*s->p;

		if (c == '"') {
			*ret_start = start;
			*ret_len = (size_t)(s->p - start);
			s->p++;
			return 0;
		}
		if (c < 0x20)
			return bad(s, "control character in a string");
		if (c == '\\') {
			s->p++;
			if (s->p >= s->end)
				break;
			switch (*s->p) {
			case '"':
			case '\\':
			case '/':
			case 'b':
			case 'f':
			case 'n':
			case 'r':
			case 't':
				s->p++;
				break;
			case 'u':
				if (s->end - s->p < 5 || !is_hex(s->p[1]) || !is_hex(s->p[2]) || !is_hex(s->p[3]) ||
				    !is_hex(s->p[4]))
					return bad(s, "bad \\u escape");
				s->p += 5;
				break;
			default:
				return bad(s, "bad escape in a string");
			}
			continue;
		}
		s->p++;
	}
	return bad(s, "unterminated string");
}

static int scan_number(struct jscan *s, enum jctx c)
{
	const char *start = s->p;
	bool integer = true;
	int64_t v = 0;
	bool overflow = false;

	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (s->p >= s->end || *s->p < '0' || *s->p > '9')
		return bad(s, "bad number");
	if (*s->p == '0')
		s->p++;
	else
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
			if (v > (INT64_MAX - 9) / 10)
				overflow = true;
			else
				v = v * 10 + (*s->p - '0');
			s->p++;
		}
	if (s->p < s->end && *s->p == '.') {
		integer = false;
		s->p++;
		if (s->p >= s->end || *s->p < '0' || *s->p > '9')
			return bad(s, "bad number");
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		integer = false;
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (s->p >= s->end || *s->p < '0' || *s->p > '9')
			return bad(s, "bad number");
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
	}
	if (integer && !overflow && start[0] != '-') {
		if (c == J_COMPLETION)
			s->out->completion_tokens = v;
		else if (c == J_PROMPT)
			s->out->prompt_tokens = v;
	}
	return 0;
}

static int scan_literal(struct jscan *s, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0)
		return bad(s, "unexpected character");
	s->p += n;
	return 0;
}

static void set_error_msg(struct probe_chunk *out, const char *m, size_t n)
{
	n = MIN(n, sizeof(out->error) - 1);
	memcpy(out->error, m, n);
	out->error[n] = '\0';
}

static bool key_is(const char *k, size_t kn, const char *lit)
{
	size_t n = strlen(lit);

	return kn == n && memcmp(k, lit, n) == 0;
}

static enum jctx member_ctx(enum jctx parent, const char *k, size_t kn)
{
	switch (parent) {
	case J_ROOT:
		if (key_is(k, kn, "choices"))
			return J_CHOICES;
		if (key_is(k, kn, "usage"))
			return J_USAGE;
		if (key_is(k, kn, "error"))
			return J_ERROR;
		if (key_is(k, kn, "object"))
			return J_OBJECT;
		if (key_is(k, kn, "message"))
			return J_ERROR_MSG;
		return J_OTHER;
	case J_CHOICE0:
		if (key_is(k, kn, "text"))
			return J_TEXT;
		if (key_is(k, kn, "delta"))
			return J_DELTA;
		return J_OTHER;
	case J_DELTA:
		if (key_is(k, kn, "content") || key_is(k, kn, "reasoning_content"))
			return J_TEXT;
		return J_OTHER;
	case J_USAGE:
		if (key_is(k, kn, "completion_tokens"))
			return J_COMPLETION;
		if (key_is(k, kn, "prompt_tokens"))
			return J_PROMPT;
		return J_OTHER;
	case J_ERROR:
		if (key_is(k, kn, "message"))
			return J_ERROR_MSG;
		return J_OTHER;
	default:
		return J_OTHER;
	}
}

static int scan_value(struct jscan *s, enum jctx c);

static int scan_object(struct jscan *s, enum jctx c)
{
	int r;

	s->p++; /* '{' */
	if (eat(s, '}'))
		return 0;
	for (;;) {
		const char *k;
		size_t kn;

		skip_ws(s);
		r = scan_string(s, &k, &kn);
		if (r < 0)
			return r;
		if (!eat(s, ':'))
			return bad(s, "expected ':'");
		skip_ws(s);
		r = scan_value(s, member_ctx(c, k, kn));
		if (r < 0)
			return r;
		if (eat(s, ','))
			continue;
		if (eat(s, '}'))
			return 0;
		return bad(s, "expected ',' or '}'");
	}
}

static int scan_array(struct jscan *s, enum jctx c)
{
	size_t i = 0;
	int r;

	s->p++; /* '[' */
	if (eat(s, ']'))
		return 0;
	if (c == J_CHOICES)
		s->out->has_choices = true;
	for (;; i++) {
		skip_ws(s);
		r = scan_value(s, c == J_CHOICES && i == 0 ? J_CHOICE0 : J_OTHER);
		if (r < 0)
			return r;
		if (eat(s, ','))
			continue;
		if (eat(s, ']'))
			return 0;
		return bad(s, "expected ',' or ']'");
	}
}

static int scan_value(struct jscan *s, enum jctx c)
{
	const char *str;
	size_t n;
	int r;

	if (s->p >= s->end)
		return bad(s, "unexpected end");
	switch (*s->p) {
	case '{':
		if (++s->depth > JSON_MAX_DEPTH)
			return bad(s, "nested too deeply");
		if (c == J_ERROR)
			s->out->is_error = true;
		r = scan_object(s, c);
		s->depth--;
		return r;
	case '[':
		if (++s->depth > JSON_MAX_DEPTH)
			return bad(s, "nested too deeply");
		r = scan_array(s, c);
		s->depth--;
		return r;
	case '"':
		r = scan_string(s, &str, &n);
		if (r < 0)
			return r;
		if (c == J_TEXT && n > 0) {
			s->out->has_content = true;
			s->out->text = str;
			s->out->text_len = n;
		} else if (c == J_ERROR) {
			s->out->is_error = true;
			if (s->out->error[0] == '\0')
				set_error_msg(s->out, str, n);
		} else if (c == J_ERROR_MSG)
			set_error_msg(s->out, str, n);
		else if (c == J_OBJECT && key_is(str, n, "error"))
			s->out->is_error = true;
		return 0;
	case 't':
		if (c == J_ERROR)
			s->out->is_error = true;
		return scan_literal(s, "true");
	case 'f':
		return scan_literal(s, "false");
	case 'n':
		return scan_literal(s, "null");
	default:
		if (c == J_ERROR)
			s->out->is_error = true;
		return scan_number(s, c);
	}
}

int probe_sse_parse_chunk(const char *data, size_t len, struct probe_chunk *ret, struct error *err)
{
	struct probe_chunk out = { .completion_tokens = -1, .prompt_tokens = -1 };
	struct jscan s = { .p = data, .end = data + len, .out = &out };
	int r;

	skip_ws(&s);
	if ((size_t)(s.end - s.p) >= 6 && memcmp(s.p, "[DONE]", 6) == 0) {
		s.p += 6;
		skip_ws(&s);
		if (s.p == s.end) {
			out.done = true;
			*ret = out;
			return 0;
		}
	}
	if (s.p >= s.end || *s.p != '{')
		return error_set(err, -EBADMSG, "SSE data is not a JSON object: \"%.40s\"", data);
	r = scan_value(&s, J_ROOT);
	if (r >= 0) {
		skip_ws(&s);
		if (s.p != s.end)
			r = bad(&s, "trailing characters");
	}
	if (r < 0)
		return error_set(err, r, "SSE data is not valid JSON (%s at byte %zu): \"%.40s\"", s.what,
				 (size_t)(s.p - data), data);
	if (out.is_error && out.error[0] == '\0')
		set_error_msg(&out, "error object in stream", strlen("error object in stream"));
	else if (!out.is_error)
		out.error[0] = '\0';
	*ret = out;
	return 0;
}

/* ---- one streamed response ---- */

/* Appends a chunk's text to the request's, up to PROBE_TEXT_MAX bytes (a
 * whole escape sequence or nothing: chunks hold whole JSON strings). */
static int append_text(struct probe_stream *s, const char *text, size_t len)
{
	struct probe_request_result *res = s->res;
	char *t;

	if (s->text_len + len > PROBE_TEXT_MAX)
		return 0;
	t = realloc(res->text, s->text_len + len + 1);
	if (!t)
		return -ENOMEM;
	memcpy(t + s->text_len, text, len);
	s->text_len += len;
	t[s->text_len] = '\0';
	res->text = t;
	return 0;
}

void probe_stream_set_error(struct probe_stream *s, const char *fmt, ...)
{
	va_list ap;

	if (s->error)
		return; /* the first reason is the real one */
	va_start(ap, fmt);
	if (vasprintf(&s->error, fmt, ap) < 0)
		s->error = NULL;
	va_end(ap);
}

static int stream_on_event(const char *data, size_t len, void *userdata)
{
	struct probe_stream *s = userdata;
	struct probe_request_result *res = s->res;
	struct probe_chunk ch;
	struct error err = { 0 };
	int r;

	if (s->done_seen)
		return 0; /* nothing counts after [DONE] */
	r = probe_sse_parse_chunk(data, len, &ch, &err);
	if (r < 0) {
		probe_stream_set_error(s, "%s", error_str(&err, r));
		return r;
	}
	if (ch.done) {
		s->done_seen = true;
		return 0;
	}
	if (ch.is_error) {
		probe_stream_set_error(s, "server sent an error in the stream: %s", ch.error);
		return -EPROTO;
	}
	if (ch.completion_tokens >= 0)
		s->usage_completion = ch.completion_tokens;
	if (ch.prompt_tokens >= 0)
		s->usage_prompt = ch.prompt_tokens;
	if (!ch.has_content)
		return 0;
	if (s->keep_text && append_text(s, ch.text, ch.text_len) < 0) {
		probe_stream_set_error(s, "out of memory");
		return -ENOMEM;
	}
	if (s->chunks == 0)
		res->ttft_usec = s->now_usec - s->send_usec;
	else {
		if (res->n_itl >= s->itl_cap) {
			size_t n = MAX(s->itl_cap * 2, (size_t)64);
			uint64_t *a = realloc(res->itl_usec, n * sizeof(*a));

			if (!a) {
				probe_stream_set_error(s, "out of memory");
				return -ENOMEM;
			}
			res->itl_usec = a;
			s->itl_cap = n;
		}
		res->itl_usec[res->n_itl++] = s->now_usec - s->last_usec;
	}
	s->last_usec = s->now_usec;
	s->chunks++;
	return 0;
}

void probe_stream_init(struct probe_stream *s, size_t max_event)
{
	*s = (struct probe_stream){ .usage_completion = -1, .usage_prompt = -1 };
	probe_sse_parser_init(&s->sse, max_event, stream_on_event, s);
}

void probe_stream_begin(struct probe_stream *s, struct probe_request_result *res, uint64_t send_usec, size_t itl_hint)
{
	probe_sse_parser_reset(&s->sse);
	free(s->error);
	s->error = NULL;
	s->res = res;
	s->send_usec = s->now_usec = s->last_usec = send_usec;
	s->chunks = 0;
	s->usage_completion = s->usage_prompt = -1;
	s->done_seen = false;
	s->itl_cap = 0;
	s->text_len = 0;
	if (itl_hint > 0 && !res->itl_usec) {
		res->itl_usec = malloc(itl_hint * sizeof(uint64_t));
		if (res->itl_usec)
			s->itl_cap = itl_hint;
	}
}

int probe_stream_feed(struct probe_stream *s, const char *buf, size_t len, uint64_t now_usec)
{
	struct error err = { 0 };
	int r;

	s->now_usec = now_usec;
	r = probe_sse_feed(&s->sse, buf, len, &err);
	if (r < 0)
		probe_stream_set_error(s, "%s", error_str(&err, r));
	return r;
}

int probe_stream_end(struct probe_stream *s)
{
	struct error err = { 0 };
	int r;

	if (s->error)
		return -EBADMSG;
	r = probe_sse_finish(&s->sse, &err);
	if (r < 0)
		probe_stream_set_error(s, "%s", error_str(&err, r));
	return r;
}

void probe_stream_fill(struct probe_stream *s, uint32_t input_len)
{
	struct probe_request_result *res = s->res;

	if (s->chunks > 0)
		res->e2e_usec = s->last_usec - s->send_usec;
	res->output_tokens =
		s->usage_completion >= 0 ? (uint32_t)MIN(s->usage_completion, (int64_t)UINT32_MAX) : s->chunks;
	res->input_tokens = s->usage_prompt >= 0 ? (uint32_t)MIN(s->usage_prompt, (int64_t)UINT32_MAX) : input_len;
	res->prompt_len = input_len;
}

void probe_stream_done(struct probe_stream *s)
{
	probe_sse_parser_done(&s->sse);
	free(s->error);
	s->error = NULL;
	s->res = NULL;
}
