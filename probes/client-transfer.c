/* client-transfer.c — one transfer of the probe's client, start to end.
 *
 * The request body (OpenAI completions or chat, token ids or text), curl's
 * write callback (SSE into the token timer for a stream, a capped buffer
 * for a GET or a non-200 body; one clock read per network read), the
 * pre-request callback that marks the send time, and the completion that
 * turns curl's result into a probe_request_result or a GET answer. client.c
 * owns the pool, the multi handle and the sd-event glue. */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client-internal.h"
#include "client.h"
#include "macro.h"
#include "sse.h"
#include "time-util.h"

/* ---- small buffers ---- */

static int buf_reserve(char **buf, size_t *cap, size_t need)
{
	size_t n;
	char *b;

	if (need <= *cap)
		return 0;
	n = MAX(need, *cap * 2);
	n = MAX(n, (size_t)1024);
	b = realloc(*buf, n);
	if (!b)
		return -ENOMEM;
	*buf = b;
	*cap = n;
	return 0;
}

static int buf_add(struct req *q, const char *s, size_t n)
{
	if (buf_reserve(&q->body, &q->body_cap, q->body_len + n + 1) < 0)
		return -ENOMEM;
	memcpy(q->body + q->body_len, s, n);
	q->body_len += n;
	q->body[q->body_len] = '\0';
	return 0;
}

static int buf_adds(struct req *q, const char *s)
{
	return buf_add(q, s, strlen(s));
}

static int buf_addf(struct req *q, const char *fmt, ...) _printf_(2, 3);
static int buf_addf(struct req *q, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -EINVAL;
	return buf_add(q, tmp, (size_t)n);
}

/* Appends s as a JSON string literal. */
static int buf_add_json_string(struct req *q, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const char *run = s;

	if (buf_add(q, "\"", 1) < 0)
		return -ENOMEM;
	for (const char *p = s; *p; p++) {
		unsigned char c = (unsigned char)*p;
		char esc[7];
		size_t en = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		if (buf_add(q, run, (size_t)(p - run)) < 0)
			return -ENOMEM;
		esc[0] = '\\';
		switch (c) {
		case '"':
			esc[1] = '"';
			break;
		case '\\':
			esc[1] = '\\';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			en = 6;
		}
		if (buf_add(q, esc, en) < 0)
			return -ENOMEM;
		run = p + 1;
	}
	if (buf_adds(q, run) < 0 || buf_add(q, "\"", 1) < 0)
		return -ENOMEM;
	return 0;
}

/* ---- the request body ---- */

/* Appends the prompt's ids, each with its separator before it ('[' or ','
 * for a JSON array, "w" or " w" for the word rule's text), then closer. */
static int buf_add_ids(struct req *q, const uint32_t *ids, uint32_t n, const char *first, const char *sep,
		       const char *closer)
{
	size_t lf = strlen(first), ls = strlen(sep);

	/* at most 10 digits and the separator per id */
	if (buf_reserve(&q->body, &q->body_cap, q->body_len + (size_t)n * (10 + MAX(lf, ls)) + strlen(closer) + 1) < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		char digits[10];
		size_t nd = 0;

		memcpy(q->body + q->body_len, i ? sep : first, i ? ls : lf);
		q->body_len += i ? ls : lf;
		for (uint32_t v = ids[i]; nd == 0 || v > 0; v /= 10)
			digits[nd++] = (char)('0' + v % 10);
		while (nd > 0)
			q->body[q->body_len++] = digits[--nd];
	}
	q->body[q->body_len] = '\0';
	return buf_adds(q, closer);
}

/* The prompt: a dataset's text as a JSON string, or the ids — as a JSON
 * array, or as text by the word rule (chat, or text asked for). */
static int add_prompt(struct probe_client *c, struct req *q, const struct probe_workload *w,
		      const struct probe_request_spec *spec)
{
	const char *text = probe_workload_prompt_text(w, spec);
	bool as_text = c->chat || c->cfg.prompt_format == PROBE_PROMPT_TEXT;
	int r = 0;

	r |= buf_adds(q, c->chat ? "\"messages\":[{\"role\":\"user\",\"content\":" : "\"prompt\":");
	if (text || !probe_workload_has_ids(w) || spec->input_len == 0)
		r |= buf_add_json_string(q, text ? text : "");
	else {
		uint32_t *ids = reallocarray(c->ids, MAX(spec->input_len, c->ids_cap), sizeof(uint32_t));

		if (!ids)
			return -ENOMEM;
		c->ids = ids;
		c->ids_cap = MAX(spec->input_len, c->ids_cap);
		if (probe_workload_prompt_ids(w, spec, ids) < 0)
			return -EINVAL;
		r |= as_text ? buf_add_ids(q, ids, spec->input_len, "\"w", " w", "\"")
			     : buf_add_ids(q, ids, spec->input_len, "[", ",", "]");
	}
	if (c->chat)
		r |= buf_adds(q, "}]");
	return r;
}

int probe_client_build_body(struct probe_client *c, struct req *q, const struct probe_workload *w,
			    const struct probe_request_spec *spec)
{
	int r = 0;

	q->body_len = 0;
	r |= buf_adds(q, "{");
	if (c->model) {
		r |= buf_adds(q, "\"model\":");
		r |= buf_add_json_string(q, c->model);
		r |= buf_adds(q, ",");
	}
	r |= add_prompt(c, q, w, spec);
	r |= buf_addf(q, ",\"max_tokens\":%" PRIu32 ",\"stream\":true", spec->output_len);
	if (c->cfg.include_usage)
		r |= buf_adds(q, ",\"stream_options\":{\"include_usage\":true}");
	if (c->cfg.ignore_eos)
		r |= buf_adds(q, ",\"ignore_eos\":true");
	r |= buf_adds(q, "}");
	return r < 0 ? -ENOMEM : 0;
}

/* ---- streaming: SSE events and the write callback ---- */

size_t probe_client_on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct req *q = userdata;
	size_t len = size * nmemb;
	uint64_t now = mono_usec();

	if (q->status == 0)
		(void)curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &q->status);
	if (q->kind == REQ_POST)
		return probe_client_post_write(q, ptr, len);
	if (q->kind == REQ_GET || q->status != 200) {
		size_t take = len;

		if (q->kind == REQ_STREAM)
			take = MIN(len, q->resp_max > q->resp_len ? q->resp_max - q->resp_len : 0);
		else if (q->resp_len + len > q->resp_max) {
			req_set_error(q, "response larger than %zu bytes", q->resp_max);
			return 0;
		}
		if (take > 0) {
			if (buf_reserve(&q->resp, &q->resp_cap, q->resp_len + take + 1) < 0) {
				req_set_error(q, "out of memory");
				return 0;
			}
			memcpy(q->resp + q->resp_len, ptr, take);
			q->resp_len += take;
			q->resp[q->resp_len] = '\0';
		}
		return len;
	}
	if (probe_stream_feed(&q->st, ptr, len, now) < 0)
		return 0; /* makes curl stop with CURLE_WRITE_ERROR */
	return len;
}

size_t probe_client_post_write(struct req *q, char *ptr, size_t len)
{
	if (q->post_data) {
		if (!q->post_data(q->client, q->status, ptr, len, q->userdata)) {
			req_set_error(q, "the relay was stopped");
			return 0;
		}
		return len;
	}
	if (q->resp_len + len > q->resp_max) {
		req_set_error(q, "response larger than %zu bytes", q->resp_max);
		return 0;
	}
	if (buf_reserve(&q->resp, &q->resp_cap, q->resp_len + len + 1) < 0) {
		req_set_error(q, "out of memory");
		return 0;
	}
	memcpy(q->resp + q->resp_len, ptr, len);
	q->resp_len += len;
	q->resp[q->resp_len] = '\0';
	return len;
}

/* The request is about to be written to its connection (new or reused):
 * that is its send time. Between probe_client_send() and here the request
 * only waited in this process — for curl to get to it, or for a connection —
 * and that wait is the client's, not the server's. With ttft_include_connect
 * the time it was handed in stays, as vLLM's client counts. */
int probe_client_on_prereq(void *userdata, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
			   int conn_local_port)
{
	struct req *q = userdata;

	if (q->kind == REQ_STREAM && !q->client->cfg.ttft_include_connect) {
		q->res.send_usec = mono_usec();
		q->st.send_usec = q->st.last_usec = q->res.send_usec;
	}
	return CURL_PREREQFUNC_OK;
}

/* ---- completion ---- */

/* The part of curl's TLS message that names the problem: OpenSSL's reason
 * after its last "::" ("error:0A00010B:SSL routines::wrong version
 * number"), or what follows curl's own prefix ("SSL certificate problem:
 * self-signed certificate"). */
static const char *tls_reason(const char *msg)
{
	const char *p = NULL, *t;

	for (t = strstr(msg, "::"); t; t = strstr(t + 2, "::"))
		p = t + 2;
	if (!p && (t = strrchr(msg, ':')))
		p = t + 1;
	if (!p)
		return msg;
	while (*p == ' ')
		p++;
	return *p ? p : msg;
}

static bool is_tls_error(CURLcode code)
{
	switch (code) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CLIENTCERT:
		return true;
	default:
		return false;
	}
}

/* Why a transfer failed at the transport level, in words that are the same
 * for every request failing the same way (no elapsed times, no addresses
 * curl adds), so that a summary can count them: "connection refused",
 * "timeout after 30 s", "TLS: wrong version number". */
static void set_transport_error(struct probe_client *c, struct req *q, CURLcode code)
{
	const char *msg = q->curl_err[0] ? q->curl_err : curl_easy_strerror(code);
	long os_errno = 0;

	(void)curl_easy_getinfo(q->easy, CURLINFO_OS_ERRNO, &os_errno);
	if (code == CURLE_OPERATION_TIMEDOUT) {
		curl_off_t connect_usec = 0;

		(void)curl_easy_getinfo(q->easy, CURLINFO_CONNECT_TIME_T, &connect_usec);
		if (connect_usec == 0 && q->status == 0)
			req_set_error(q, "connect timeout after %g s", usec_to_sec(c->cfg.connect_timeout_usec));
		else
			req_set_error(q, "timeout after %g s", usec_to_sec(c->cfg.request_timeout_usec));
	} else if (code == CURLE_COULDNT_CONNECT && os_errno == ECONNREFUSED)
		req_set_error(q, "connection refused");
	else if (code == CURLE_COULDNT_CONNECT && os_errno > 0)
		req_set_error(q, "could not connect: %s", strerror((int)os_errno));
	else if (is_tls_error(code))
		req_set_error(q, "TLS: %s", tls_reason(msg));
	else if (code == CURLE_GOT_NOTHING)
		req_set_error(q, "connection closed before a response");
	else if (q->st.chunks > 0 || q->status != 0)
		req_set_error(q, "connection failed mid-response: %s", msg);
	else
		req_set_error(q, "%s", msg);
}

/* "HTTP 500: " and the first non-empty line of the body (capped): a server
 * that fails every request the same way gives one reason. */
static void set_http_error(struct req *q)
{
	const char *p = q->resp ? q->resp : "", *end = p + q->resp_len;
	size_t n;

	while (p < end && (*p == '\n' || *p == '\r' || *p == ' '))
		p++;
	for (n = 0; p + n < end && p[n] != '\n' && p[n] != '\r';)
		n++;
	req_set_error(q, "HTTP %ld: %.*s", q->status, (int)MIN(n, (size_t)200), p);
}

void probe_client_finish_stream(struct probe_client *c, struct req *q, CURLcode code)
{
	struct probe_request_result *res = &q->res;

	res->http_status = (int)q->status;
	if (code == CURLE_OK && q->status == 200)
		(void)probe_stream_end(&q->st);
	if (code != CURLE_OK)
		set_transport_error(c, q, code);
	else if (q->status != 200)
		set_http_error(q);
	else if (q->st.chunks == 0)
		req_set_error(q, "no content in the response (%" PRIu64 " SSE events%s)", q->st.sse.events,
			      q->st.done_seen ? ", [DONE] seen" : "");

	probe_stream_fill(&q->st, q->spec_input_len);
	res->success = !q->st.error;
	res->error = TAKE_PTR(q->st.error);
	q->stream_done(c, res, q->userdata);
	/* The callee owns the contents now. */
	*res = (struct probe_request_result){ 0 };
	q->st.itl_cap = 0;
}

void probe_client_finish_get(struct probe_client *c, struct req *q, CURLcode code)
{
	/* A response without a body (vLLM's /health) never reached probe_client_on_write. */
	if (code == CURLE_OK && q->status == 0)
		(void)curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &q->status);
	if (code != CURLE_OK)
		req_set_error(q, "%s", q->curl_err[0] ? q->curl_err : curl_easy_strerror(code));
	q->get_done(c, q->st.error ? -EIO : 0, q->st.error ? 0 : q->status, q->resp ? q->resp : "",
		    q->st.error ? 0 : q->resp_len, q->st.error, q->userdata);
}
