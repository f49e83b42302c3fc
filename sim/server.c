/* server.c — goodput-sim's HTTP server and real-time token pacing.
 *
 * One sd-event loop drives everything; libmicrohttpd runs without a thread of
 * its own (MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME): its epoll fd is an
 * sd-event io source and MHD_get_timeout() feeds one timer (PLATFORM.md).
 *
 * Pacing. The engine model (engine.h) owns the emulated time line: it tells
 * when the step in flight ends (sim_engine_next_event_usec) and, when
 * advanced to "now", completes the steps that ended, calling back with each
 * token and its step's scheduled end. Each later step starts at the previous
 * one's end, not at "now", so a late wake-up catches up instead of drifting.
 * A streaming connection whose next token is not due is SUSPENDED inside
 * MHD's content reader (a reader that returns 0 bytes instead busy-loops);
 * when a token arrives the connection is resumed. One timer serves all
 * streams: it fires at min(engine's next step end, earliest future deadline
 * in a min-heap of streams); it advances the engine, resumes every due
 * stream, then runs MHD once for the whole batch (MHD walks all suspended
 * connections after a resume, so one run per batch, not per stream).
 *
 * A suspended connection is not watched by MHD; a separate EPOLLRDHUP
 * watch notices a client that went away, aborts its request in the engine
 * (freeing its KV blocks) and resumes it so that MHD closes it.
 *
 * Requests: /v1/completions and /v1/chat/completions (openai.h), /health,
 * /v1/models, /metrics (server-metrics.c), /version. Errors are OpenAI-style
 * JSON. Each completion can be recorded in a JSONL trace with every token's
 * scheduled and actual send time (CLOCK_MONOTONIC µs).
 *
 * This file holds the routes, the responses, MHD's callbacks, the loop glue
 * and the lifecycle; server-stream.c holds the in-flight index, the deadline
 * heap, suspend/resume, the engine callbacks and the SSE content reader. */
#include "server.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <systemd/sd-daemon.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "server-internal.h"
#include "time-util.h"

#define READER_BLOCK_SIZE       2048
#define CONNECTION_MEMORY_LIMIT (16u * 1024u)
#ifndef PACER_MIN_GAP_USEC
#define PACER_MIN_GAP_USEC 100
#endif

static void server_rearm(struct sim_server *s);

void sim_server_config_init(struct sim_server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->host = "127.0.0.1";
	c->max_connections = SIM_SERVER_DEFAULT_MAX_CONNECTIONS;
	c->max_body_bytes = SIM_SERVER_DEFAULT_MAX_BODY;
	c->max_buffered_bytes = SIM_SERVER_DEFAULT_MAX_BUFFERED;
	c->idle_timeout_usec = SIM_SERVER_DEFAULT_IDLE_SEC * USEC_PER_SEC;
	c->header_timeout_usec = SIM_SERVER_DEFAULT_HEADER_SEC * USEC_PER_SEC;
	c->body_timeout_usec = SIM_SERVER_DEFAULT_BODY_SEC * USEC_PER_SEC;
	sim_faults_init(&c->faults, 0);
}

/* ---- responses ---- */

static enum MHD_Result queue_buffer(struct sim_req *r, unsigned status, const char *content_type, char *body)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (!body)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					      r->route == SIM_ROUTE_COMPLETIONS || r->route == SIM_ROUTE_CHAT ? "POST"
													      : "GET");
	ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	if (status / 100 >= 1 && status / 100 <= 5)
		r->server->http_responses[status / 100]++;
	return ret;
}

static enum MHD_Result queue_error(struct sim_req *r, unsigned status, const char *type, const char *param,
				   const char *message)
{
	const struct sim_dialect_options *d = &r->server->cfg.dialect;

	/* Each engine's error shape; vLLM's is OpenAI's. */
	if (d->dialect != SIM_DIALECT_VLLM)
		return queue_buffer(r, status, "application/json", sim_dialect_error_json(d, status, type, message));
	return queue_buffer(r, status, "application/json", sim_api_error_json(message, type, param, status));
}

enum MHD_Result sim_server_queue_error(struct sim_req *r, unsigned status, const char *type, const char *message)
{
	return queue_error(r, status, type, NULL, message);
}

/* A request on a connection past --max-connections: what uvicorn (vLLM's,
 * SGLang's and TensorRT-LLM's server) answers past --limit-concurrency —
 * 503, "Service Unavailable" as text, and the connection closed. */
static enum MHD_Result queue_over_limit(struct sim_req *r)
{
	static const char body[] = "Service Unavailable";
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(r->conn, MHD_HTTP_SERVICE_UNAVAILABLE, resp);
	MHD_destroy_response(resp);
	r->server->http_responses[5]++;
	r->server->conns_closed[SIM_CLOSE_OVER_LIMIT]++;
	return ret;
}

static void record_trace(struct sim_server *s, struct sim_req *r)
{
	FILE *f = s->trace;

	if (!f)
		return;
	fprintf(f,
		"{\"id\":%" PRIu64 ",\"arrival_usec\":%" PRIu64 ",\"stream\":%s,\"prompt_tokens\":%" PRIu32
		",\"max_tokens\":%" PRIu32 ",\"cached_tokens\":%" PRIu32 ",\"finish\":\"%s\",\"tokens\":[",
		r->id, r->arrival_usec, r->api.stream ? "true" : "false", r->n_prompt, r->max_tokens, r->n_cached,
		r->aborted         ? "abort"
		: r->finish_reason ? r->finish_reason
				   : "none");
	for (uint32_t i = 0; i < r->n_tokens; i++)
		fprintf(f, "%s[%" PRIu64 ",%" PRIu64 "]", i ? "," : "", r->tokens[i].sched_usec,
			r->tokens[i].sent_usec);
	fputs("]}\n", f);
	fflush(f);
}

/* A prefill for a decode worker: the answer says where the prompt's KV is,
 * as vLLM's NixlConnector does (its engine, its blocks, the side channel it
 * listens on, its TP); goodput-sim's decode worker reads tp_size. Takes
 * body; NULL when out of memory. */
static char *add_kv_transfer_params(struct sim_server *s, const struct sim_req *r, char *body)
{
	_cleanup_(freep) char *blocks = NULL, *out = NULL;
	size_t n_blocks = (r->n_prompt + SIM_BLOCK_SIZE - 1) / SIM_BLOCK_SIZE, len = strlen(body), k = 0;
	const char *side = getenv("VLLM_NIXL_SIDE_CHANNEL_PORT"), *host = getenv("VLLM_NIXL_SIDE_CHANNEL_HOST");

	blocks = malloc(n_blocks * 12 + 3);
	if (!blocks || len < 2 || body[len - 1] != '}') {
		free(body);
		return NULL;
	}
	blocks[k++] = '[';
	for (size_t i = 0; i < n_blocks; i++)
		k += (size_t)sprintf(blocks + k, "%s%zu", i ? "," : "", (r->id * 131 + i) % 65536);
	blocks[k++] = ']';
	blocks[k] = '\0';
	body[len - 1] = '\0';
	if (asprintf(&out,
		     "%s,\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,"
		     "\"remote_block_ids\":%s,\"remote_engine_id\":\"goodput-sim-%ld\",\"remote_host\":\"%s\","
		     "\"remote_port\":%s,\"tp_size\":%u}}",
		     body, blocks, (long)getpid(), host && *host ? host : "localhost", side && *side ? side : "5600",
		     s->ecfg.tp) < 0)
		out = NULL;
	free(body);
	return TAKE_PTR(out);
}

static enum MHD_Result respond_completion_done(struct sim_req *r)
{
	struct sim_server *s = r->server;
	uint32_t *ids;
	uint64_t now = mono_usec();
	char *body;

	if (r->aborted)
		return MHD_NO;
	ids = calloc(MAX(r->n_tokens, 1u), sizeof(*ids));
	if (!ids)
		return MHD_NO;
	for (uint32_t i = 0; i < r->n_tokens; i++) {
		ids[i] = r->tokens[i].id;
		sim_req_observe_token(s, r, i, now);
	}
	r->n_sent = r->n_tokens;
	body = sim_api_format_response(&r->fmt, ids, r->n_tokens, r->finish_reason ? r->finish_reason : "length",
				       r->n_prompt);
	free(ids);
	if (body && r->kv_export)
		body = add_kv_transfer_params(s, r, body);
	r->done_sent = true;
	return queue_buffer(r, MHD_HTTP_OK, "application/json", body);
}

static enum MHD_Result handle_completion(struct sim_req *r)
{
	struct sim_server *s = r->server;
	struct error err = { 0 };
	struct MHD_Response *resp;
	enum MHD_Result ret;
	uint64_t now;
	int k;

	if (r->too_large) {
		char msg[128];

		snprintf(msg, sizeof(msg), "request body larger than %zu bytes", s->cfg.max_body_bytes);
		return queue_error(r, MHD_HTTP_CONTENT_TOO_LARGE, "BadRequestError", NULL, msg);
	}
	if (!s->ready)
		return queue_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "ServiceUnavailableError", NULL,
				   s->cfg.dialect.dialect == SIM_DIALECT_LLAMACPP ? "Loading model"
										  : "The model is still loading.");

	s->n_completion_requests++;
	if (s->cfg.faults.crash_after > 0 && s->n_completion_requests > s->cfg.faults.crash_after) {
		fprintf(stderr, "goodput-sim: fault injection: crashing after %" PRIu64 " requests\n",
			s->cfg.faults.crash_after);
		fflush(stderr);
		raise(SIGKILL);
	}
	if (s->cfg.faults.hang_after > 0 && s->n_completion_requests > s->cfg.faults.hang_after) {
		log_warning("fault injection: hanging after %" PRIu64 " requests", s->cfg.faults.hang_after);
		s->hung = true;
		return MHD_YES; /* no response, ever */
	}

	k = sim_api_parse_request(r->route == SIM_ROUTE_CHAT ? SIM_API_CHAT : SIM_API_COMPLETIONS, r->body, r->body_len,
				  &r->api, &err);
	if (k == -ENOMEM)
		return MHD_NO;
	if (k < 0)
		return queue_error(r, MHD_HTTP_BAD_REQUEST, "BadRequestError", NULL, error_str(&err, k));
	if (r->api.model && strcmp(r->api.model, s->served_name) != 0) {
		char msg[512];

		snprintf(msg, sizeof(msg), "The model `%.300s` does not exist.", r->api.model);
		return queue_error(r, MHD_HTTP_NOT_FOUND, "NotFoundError", "model", msg);
	}
	if (sim_faults_draw_http500(&s->cfg.faults)) {
		s->faults_http500++;
		return queue_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalServerError", NULL,
				   "fault injection: internal server error");
	}

	r->n_prompt = (uint32_t)r->api.n_prompt;
	if (s->cfg.dialect.dialect == SIM_DIALECT_LLAMACPP && r->n_prompt >= s->max_model_len &&
	    s->max_model_len >= 8) {
		/* b4748 with context shift on (its default) truncates a prompt that
		 * does not fit its slot, keeping the end in blocks of half the
		 * slot (n_keep 0), and shifts the context while it generates:
		 * no refusal */
		uint32_t block = s->max_model_len / 2, erased = (r->n_prompt - block) / block;

		r->n_prompt -= erased * block;
	}
	if (r->api.has_max_tokens)
		r->max_tokens = r->api.max_tokens;
	else if (r->n_prompt < s->max_model_len)
		r->max_tokens = s->max_model_len - r->n_prompt; /* vLLM's default */
	if (s->cfg.dialect.dialect == SIM_DIALECT_LLAMACPP &&
	    (uint64_t)r->n_prompt + r->max_tokens > s->max_model_len && r->max_tokens < s->max_model_len) {
		/* the context shift while it generates discards about as much of
		 * the prompt as the reply overflows the slot: modelled as a
		 * shorter prompt */
		r->n_prompt = (uint32_t)(s->max_model_len - r->max_tokens);
	}
	if (r->n_prompt >= s->max_model_len || (uint64_t)r->n_prompt + r->max_tokens > s->max_model_len) {
		char msg[512];
		unsigned status =
			sim_dialect_context_error(&s->cfg.dialect, s->max_model_len, r->n_prompt, r->max_tokens,
						  r->n_prompt >= s->max_model_len, msg, sizeof(msg));

		return queue_error(r, status, "BadRequestError", NULL, msg);
	}
	{
		char msg[512];
		unsigned status = sim_server_dialect_refuses(s, r, msg, sizeof(msg));

		if (status)
			return queue_error(r, status, status >= 500 ? "InternalServerError" : "BadRequestError", NULL,
					   msg);
	}

	now = mono_usec();
	r->id = ++s->next_id;
	r->arrival_usec = now;
	r->fmt = (struct sim_api_stream){
		.kind = r->route == SIM_ROUTE_CHAT ? SIM_API_CHAT : SIM_API_COMPLETIONS,
		.id = r->id,
		.created = real_usec() / USEC_PER_SEC,
		.model_json = s->served_name_json,
	};
	if (r->api.stream && sim_faults_draw_bad_sse(&s->cfg.faults)) {
		r->bad_sse = true;
		s->faults_bad_sse++;
	}

	if (s->cfg.fixed_itl_ms > 0) {
		uint64_t itl = (uint64_t)(s->cfg.fixed_itl_ms * 1000.0);

		for (uint32_t i = 0; i < r->max_tokens; i++)
			if (sim_req_push_token(r, now + (i + 1) * itl) < 0)
				return MHD_NO;
		r->finished = true;
		r->finish_reason = "length";
		s->fixed_prompt_tokens += r->n_prompt;
		s->fixed_generation_tokens += r->max_tokens;
	} else {
		enum sim_pd_role role = s->cfg.dialect.pd_role;
		bool decode = role != SIM_PD_NONE &&
			      (r->api.kv_remote_prefill ||
			       (role == SIM_PD_DECODE && s->cfg.dialect.dialect == SIM_DIALECT_SGLANG));

		if (role == SIM_PD_DECODE && s->cfg.dialect.dialect == SIM_DIALECT_SGLANG && !r->api.kv_remote_prefill)
			/* its router sends it where the prefill worker's KV goes */
			return queue_error(r, MHD_HTTP_BAD_REQUEST, "BadRequestError", NULL,
					   "a decode worker (--disaggregation-mode decode) serves the requests its "
					   "router sends, with the prefill worker's bootstrap_room");
		r->kv_export = role != SIM_PD_NONE && !decode && (r->api.kv_remote_decode || role == SIM_PD_PREFILL) &&
			       !r->api.stream;
		if (decode)
			k = sim_engine_submit_kv(s->engine, r->id, r->api.prompt_ids, r->n_prompt, r->max_tokens,
						 r->api.kv_remote_tp ? r->api.kv_remote_tp : s->ecfg.tp, now, NULL,
						 &err);
		else
			k = sim_engine_submit(s->engine, r->id, r->api.prompt_ids, r->n_prompt, r->max_tokens, now,
					      &err);
		if (k < 0)
			return queue_error(r, MHD_HTTP_BAD_REQUEST, "BadRequestError", NULL, error_str(&err, k));
		r->in_engine = true;
		sim_req_index(s, r);
	}

	if (!r->api.stream) {
		/* Answered from the access handler once the last token is due. */
		sim_req_suspend(r);
		sim_req_schedule(r, now);
		return MHD_YES;
	}
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, READER_BLOCK_SIZE, sim_req_stream_reader, r, NULL);
	if (!resp)
		return MHD_NO;
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	ret = MHD_queue_response(r->conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	s->http_responses[2]++;
	return ret;
}

static enum sim_route route_of(const char *url, const char *method, bool *ret_method_ok)
{
	static const struct {
		const char *path, *method;
		enum sim_route route;
	} table[] = {
		{ "/health", "GET", SIM_ROUTE_HEALTH },
		{ "/healthcheck", "GET", SIM_ROUTE_HEALTH }, /* vLLM's toy proxy */
		{ "/v1/models", "GET", SIM_ROUTE_MODELS },
		{ "/metrics", "GET", SIM_ROUTE_METRICS },
		{ "/prometheus/metrics", "GET", SIM_ROUTE_PROMETHEUS },
		{ "/version", "GET", SIM_ROUTE_VERSION },
		{ "/props", "GET", SIM_ROUTE_PROPS },
		{ "/v1/completions", "POST", SIM_ROUTE_COMPLETIONS },
		{ "/v1/chat/completions", "POST", SIM_ROUTE_CHAT },
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		if (strcmp(url, table[i].path) == 0) {
			*ret_method_ok = strcmp(method, table[i].method) == 0 ||
					 (strcmp(table[i].method, "GET") == 0 && strcmp(method, "HEAD") == 0);
			return table[i].route;
		}
	*ret_method_ok = false;
	return SIM_ROUTE_UNKNOWN;
}

/* The proxy's routes: its health (vLLM's toy proxy has only /healthcheck,
 * SGLang's router /health) and the completions it relays. */
static enum MHD_Result handle_router(struct sim_req *r, const char *url)
{
	struct sim_server *s = r->server;
	bool vllm = s->cfg.router->style == SIM_ROUTER_VLLM_PROXY;
	char msg[300];

	if (r->route == SIM_ROUTE_HEALTH && strcmp(url, vllm ? "/healthcheck" : "/health") == 0)
		return queue_buffer(r, MHD_HTTP_OK, "application/json", sim_router_render_health(s));
	if (r->route == SIM_ROUTE_COMPLETIONS || r->route == SIM_ROUTE_CHAT)
		return sim_router_forward(r, url);
	snprintf(msg, sizeof(msg), "Not Found: %.200s", url);
	return queue_error(r, MHD_HTTP_NOT_FOUND, "NotFoundError", NULL, msg);
}

static enum MHD_Result handle_final(struct sim_req *r, const char *url, const char *method)
{
	struct sim_server *s = r->server;

	if (r->route == SIM_ROUTE_UNKNOWN) {
		char msg[300];

		snprintf(msg, sizeof(msg), "Not Found: %.200s", url);
		return queue_error(r, MHD_HTTP_NOT_FOUND, "NotFoundError", NULL, msg);
	}
	if (!r->method_ok) {
		char msg[300];

		snprintf(msg, sizeof(msg), "Method %.20s not allowed for %.200s", method, url);
		return queue_error(r, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL, msg);
	}
	if (s->router)
		return handle_router(r, url);
	/* llama.cpp answers every route but its web page with 503 while it loads. */
	if (!s->ready && s->cfg.dialect.dialect == SIM_DIALECT_LLAMACPP)
		return queue_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", NULL, "Loading model");
	switch (r->route) {
	case SIM_ROUTE_HEALTH:
		if (!s->ready)
			return queue_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "ServiceUnavailableError", NULL,
					   "The model is still loading.");
		return queue_buffer(
			r, MHD_HTTP_OK, "application/json",
			strdup(s->cfg.dialect.dialect == SIM_DIALECT_LLAMACPP ? "{\"status\":\"ok\"}" : ""));
	case SIM_ROUTE_MODELS:
		return queue_buffer(r, MHD_HTTP_OK, "application/json", sim_server_render_models(s));
	case SIM_ROUTE_METRICS:
	case SIM_ROUTE_PROMETHEUS: {
		unsigned status = 200;
		const char *type = "text/plain; version=0.0.4; charset=utf-8";
		char *body = sim_server_render_dialect_metrics(s, r->route == SIM_ROUTE_PROMETHEUS, &status, &type);

		if (status != 200) {
			_cleanup_(freep) char *msg = body;

			return queue_error(r, status, status == 404 ? "NotFoundError" : "not_supported_error", NULL,
					   msg ? msg : "");
		}
		return queue_buffer(r, MHD_HTTP_OK, type, body);
	}
	case SIM_ROUTE_VERSION:
		return queue_buffer(r, MHD_HTTP_OK, "application/json",
				    strdup("{\"version\":\"" GOODPUT_VERSION "\",\"server\":\"goodput-sim\"}"));
	case SIM_ROUTE_PROPS:
		if (s->cfg.dialect.dialect != SIM_DIALECT_LLAMACPP)
			return queue_error(r, MHD_HTTP_NOT_FOUND, "NotFoundError", NULL, "Not Found: /props");
		return queue_buffer(r, MHD_HTTP_OK, "application/json; charset=utf-8", sim_server_render_props(s));
	case SIM_ROUTE_COMPLETIONS:
	case SIM_ROUTE_CHAT:
		return handle_completion(r);
	case SIM_ROUTE_UNKNOWN:
		break;
	}
	return MHD_NO;
}

static void req_body_free(struct sim_req *r)
{
	r->server->body_bytes -= r->body_cap;
	free(r->body);
	r->body = NULL;
	r->body_len = r->body_cap = 0;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				 const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct sim_server *s = cls;
	struct sim_req *r = *con_cls;

	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->server = s;
		r->conn = conn;
		r->heap_idx = SIZE_MAX;
		r->route = route_of(url, method, &r->method_ok);
		r->all_next = s->all;
		if (s->all)
			s->all->all_prev = r;
		s->all = r;
		*con_cls = r;
		if (s->n_conns - s->n_closing > s->conn_limit) {
			r->handled = true;
			log_debug("%u connections, more than %u: answering 503", s->n_conns, s->conn_limit);
			return queue_over_limit(r);
		}
		sim_conns_set_phase(s, conn, SIM_CONN_BODY);
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		if (r->too_large)
			return MHD_YES;
		if (r->body_len + n > s->cfg.max_body_bytes) {
			r->too_large = true;
			req_body_free(r);
			return MHD_YES;
		}
		if (r->body_len + n + 1 > r->body_cap) {
			size_t cap = MIN(MAX(r->body_cap * 2, r->body_len + n + 1), s->cfg.max_body_bytes + 1);
			char *b;

			/* Bodies held open one byte short must not add up without bound. */
			if (s->body_bytes - r->body_cap + cap > s->cfg.max_buffered_bytes) {
				log_debug("request bodies would pass %zu bytes: closing a connection",
					  s->cfg.max_buffered_bytes);
				s->conns_closed[SIM_CLOSE_BUFFER_FULL]++;
				return MHD_NO;
			}
			b = realloc(r->body, cap);
			if (!b)
				return MHD_NO;
			s->body_bytes += cap - r->body_cap;
			r->body = b;
			r->body_cap = cap;
		}
		memcpy(r->body + r->body_len, upload_data, n);
		r->body_len += n;
		r->body[r->body_len] = '\0';
		return MHD_YES;
	}
	if (r->handled) {
		/* A resumed non-streaming completion (or a spurious wake-up). */
		if (r->aborted || s->stopping || s->hung)
			return MHD_NO;
		if (r->relay)
			return sim_router_resumed(r);
		if (r->finished && sim_req_next_due(r) <= mono_usec())
			return respond_completion_done(r);
		sim_req_suspend(r);
		sim_req_schedule(r, mono_usec());
		return MHD_YES;
	}
	r->handled = true;
	sim_conns_set_phase(s, conn, SIM_CONN_ACTIVE);
	return handle_final(r, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct sim_server *s = cls;
	struct sim_req *r = *con_cls;

	if (!r)
		return;
	*con_cls = NULL;
	if (r->in_engine && s->engine) {
		(void)sim_engine_abort(s->engine, r->id);
		s->req_aborted++;
	}
	if (r->counted)
		s->in_flight--;
	sim_router_request_done(r);
	if (r->id > 0 && !r->done_sent)
		r->aborted = true;
	sim_req_unindex(s, r);
	sim_req_heap_remove(s, r);
	if (r->all_prev)
		r->all_prev->all_next = r->all_next;
	else
		s->all = r->all_next;
	if (r->all_next)
		r->all_next->all_prev = r->all_prev;
	if (r->id > 0)
		record_trace(s, r);
	sd_event_source_disable_unref(r->rdhup);
	sim_api_request_done(&r->api);
	free(r->tokens);
	req_body_free(r);
	free(r);
	/* Keep-alive: the next request line is awaited. */
	sim_conns_set_phase(s, conn, SIM_CONN_IDLE);
}

/* ---- the loop ---- */

void sim_server_run_mhd(struct sim_server *s)
{
	bool resumed = s->need_run;

	if (s->hung || !s->mhd)
		return;
	s->need_run = false;
	(void)MHD_run(s->mhd);
	/* A resumed connection takes two runs: the first moves it back to the
	 * active set, the second calls the content reader and sends. */
	if (resumed)
		(void)MHD_run(s->mhd);
	server_rearm(s);
}

static void server_rearm(struct sim_server *s)
{
	MHD_UNSIGNED_LONG_LONG ms;
	uint64_t t = UINT64_MAX, now;

	if (s->hung) {
		(void)sd_event_source_set_enabled(s->pacer, SD_EVENT_OFF);
		(void)sd_event_source_set_enabled(s->mhd_timer, SD_EVENT_OFF);
		(void)sd_event_source_set_enabled(s->mhd_io, SD_EVENT_OFF);
		return;
	}
	now = mono_usec();
	if (!s->mhd)
		(void)sd_event_source_set_enabled(s->mhd_timer, SD_EVENT_OFF);
	else if (MHD_get_timeout(s->mhd, &ms) == MHD_YES) {
		(void)sd_event_source_set_time(s->mhd_timer, now + ms * USEC_PER_MSEC);
		(void)sd_event_source_set_enabled(s->mhd_timer, SD_EVENT_ONESHOT);
	} else
		(void)sd_event_source_set_enabled(s->mhd_timer, SD_EVENT_OFF);

	if (s->engine && s->ready)
		t = sim_engine_next_event_usec(s->engine);
	if (s->heap_len > 0)
		t = MIN(t, s->heap[0]->deadline);
	/* Batch wake-ups under load: each batch costs MHD a walk over every
	 * suspended connection, so runs closer than PACER_MIN_GAP_USEC merge. */
	if (t != UINT64_MAX && t < s->pacer_last_usec + PACER_MIN_GAP_USEC)
		t = s->pacer_last_usec + PACER_MIN_GAP_USEC;
	if (t == UINT64_MAX)
		(void)sd_event_source_set_enabled(s->pacer, SD_EVENT_OFF);
	else {
		(void)sd_event_source_set_time(s->pacer, MAX(t, 1u));
		(void)sd_event_source_set_enabled(s->pacer, SD_EVENT_ONESHOT);
	}
}

static int on_pacer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct sim_server *s = userdata;
	uint64_t now = mono_usec();

	if (s->hung)
		return 0;
	s->pacer_last_usec = now;
	if (s->engine && s->ready)
		(void)sim_engine_advance(s->engine, now);
	while (s->heap_len > 0 && s->heap[0]->deadline <= now)
		sim_req_resume(s->heap[0]);
	if (s->need_run)
		sim_server_run_mhd(s);
	else
		server_rearm(s);
	return 0;
}

void sim_server_wake(struct sim_server *s)
{
	s->need_run = true;
	(void)sd_event_source_set_time(s->pacer, 1);
	(void)sd_event_source_set_enabled(s->pacer, SD_EVENT_ONESHOT);
}

static int on_mhd_io(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	sim_server_run_mhd(userdata);
	return 0;
}

static int on_mhd_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	sim_server_run_mhd(userdata);
	return 0;
}

static void raise_nofile(uint32_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur >= (rlim_t)want + 64)
		return;
	rl.rlim_cur = MIN(rl.rlim_max, (rlim_t)want + 64);
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	log_debug("libmicrohttpd: %s", buf);
}

/* Binds the server's socket (port 0: the kernel's choice) without listening:
 * the engines that accept connections only once loaded (vLLM, SGLang, TGI,
 * TensorRT-LLM) refuse them until sim_server_start_mhd, yet hold the port. */
static int bind_socket(struct sim_server *s, const char *host, struct error *err)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *ai = NULL;
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int one = 1, r, fd;

	r = getaddrinfo(host, NULL, &hints, &ai);
	if (r != 0)
		return error_set(err, -EINVAL, "--host: cannot resolve \"%s\": %s", host, gai_strerror(r));
	if (ai->ai_family == AF_INET)
		((struct sockaddr_in *)ai->ai_addr)->sin_port = htons(s->cfg.port);
	else if (ai->ai_family == AF_INET6)
		((struct sockaddr_in6 *)ai->ai_addr)->sin6_port = htons(s->cfg.port);
	s->ipv6 = ai->ai_family == AF_INET6;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* Without SO_REUSEADDR first, so that nobody else binds the port while
	 * we load (a port prober's bind fails); with it when connections of an
	 * earlier server linger in TIME_WAIT. */
	if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno == EADDRINUSE)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	else
		one = 0;
	if (fd < 0 || (one && bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		r = -errno;
		freeaddrinfo(ai);
		safe_close(fd);
		return error_set(err, -EADDRNOTAVAIL, "cannot listen on %s port %u: %s", host, s->cfg.port,
				 strerror(-r));
	}
	freeaddrinfo(ai);
	s->listen_fd = fd;
	s->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
						 : ((struct sockaddr_in *)&sa)->sin_port);
	return 0;
}

int sim_server_start_mhd(struct sim_server *s, struct error *err)
{
	const union MHD_DaemonInfo *di;
	struct rlimit rl;
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (s->ipv6 ? MHD_USE_IPv6 : 0);
	unsigned limit, overflow;
	int r;

	if (s->mhd)
		return 0;
	/* past --max-connections a few more are accepted, to be told 503 */
	overflow = MAX(s->cfg.max_connections / 16, 16u);
	raise_nofile(s->cfg.max_connections + overflow);
	limit = s->cfg.max_connections;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)limit + overflow + 64)
		limit = rl.rlim_cur > 128 + overflow ? (unsigned)rl.rlim_cur - 64 - overflow : 64;
	r = sim_conns_init(s, limit);
	s->conn_overflow = overflow;
	if (r < 0)
		return error_set(err, r, "cannot add a timer");
	/* Now SO_REUSEADDR: the connections it accepts inherit it, so that their
	 * TIME_WAIT does not keep the next server off the port. */
	(void)setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
	if (listen(s->listen_fd, 1024) < 0)
		return error_set(err, -errno, "cannot listen on port %u: %s", s->port, strerror(errno));

	s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_access, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s,
				  MHD_OPTION_LISTEN_SOCKET, s->listen_fd, MHD_OPTION_CONNECTION_LIMIT, limit + overflow,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY_LIMIT,
				  MHD_OPTION_CONNECTION_TIMEOUT, 0u, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				  MHD_OPTION_NOTIFY_CONNECTION, sim_conns_notify, s, MHD_OPTION_URI_LOG_CALLBACK,
				  sim_conns_uri_logged, s, MHD_OPTION_END);
	if (!s->mhd)
		return error_set(err, -EADDRNOTAVAIL, "cannot serve on port %u", s->port);
	s->listen_fd = -1; /* MHD's now */
	di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di)
		return error_set(err, -EIO, "libmicrohttpd has no epoll fd");

	r = sd_event_add_io(s->event, &s->mhd_io, di->epoll_fd, EPOLLIN, on_mhd_io, s);
	if (r < 0)
		return error_set(err, r, "cannot watch libmicrohttpd's epoll fd");
	(void)sd_event_source_set_description(s->mhd_io, "mhd-io");
	r = sd_event_add_time(s->event, &s->mhd_timer, CLOCK_MONOTONIC, 0, 1, on_mhd_timer, s);
	if (r < 0)
		return error_set(err, r, "cannot add a timer");
	(void)sd_event_source_set_description(s->mhd_timer, "mhd-timeout");
	(void)sd_event_source_set_enabled(s->mhd_timer, SD_EVENT_OFF);
	server_rearm(s);
	return 0;
}

static int add_pacer(struct sim_server *s, struct error *err)
{
	int r;

	r = sd_event_add_time(s->event, &s->pacer, CLOCK_MONOTONIC, 0, 1, on_pacer, s);
	if (r < 0)
		return error_set(err, r, "cannot add a timer");
	(void)sd_event_source_set_description(s->pacer, "pacer");
	(void)sd_event_source_set_enabled(s->pacer, SD_EVENT_OFF);
	/* Run the pacer before MHD's own sources when both are due. */
	(void)sd_event_source_set_priority(s->pacer, SD_EVENT_PRIORITY_IMPORTANT);
	return 0;
}

int sim_server_new(sd_event *event, const struct sim_server_config *cfg, const struct sim_engine_config *ecfg,
		   struct sim_server **ret, struct error *err)
{
	static const struct sim_engine_callbacks cb = {
		.token = sim_server_engine_token,
		.finished = sim_server_engine_finished,
		.scheduled = sim_server_engine_scheduled,
		.step = sim_server_engine_step,
	};
	struct sim_server *s;
	const char *name;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->event = sd_event_ref(event);
	s->listen_fd = -1;
	s->cfg = *cfg;
	s->ecfg = *ecfg;
	s->start_usec = mono_usec();
	s->n_buckets = 4096;
	s->buckets = calloc(s->n_buckets, sizeof(*s->buckets));
	if (!s->buckets) {
		sim_server_free(s);
		return -ENOMEM;
	}

	if (cfg->router) {
		/* a proxy: no engine, the workers' clients */
		r = sim_router_new(s, cfg->router, err);
		if (r < 0) {
			sim_server_free(s);
			return r;
		}
		(void)sim_engine_config_resolve(&s->ecfg, NULL);
	} else if ((r = sim_engine_new(&s->ecfg, &cb, s, &s->engine, &s->startup_err)) < 0) {
		s->engine = NULL;
		s->startup_r = r;
		(void)sim_engine_check_startup(&s->ecfg, &s->check, NULL);
		(void)sim_engine_config_resolve(&s->ecfg, NULL); /* for the log lines */
	} else {
		s->ecfg = *sim_engine_get_config(s->engine);
		s->info = sim_engine_get_info(s->engine);
		s->max_model_len = s->info->max_model_len;
	}
	if (s->max_model_len == 0)
		s->max_model_len = s->ecfg.max_model_len ? s->ecfg.max_model_len : 4096;
	if (sim_server_metrics_init(s) < 0) {
		sim_server_free(s);
		return -ENOMEM;
	}
	/* A configuration that does not start still takes its time to fail. */
	s->load_usec = cfg->router ? 0 : sim_engine_startup_usec(&s->ecfg, &s->startup_phases);
	if (s->cfg.load_usec_set)
		s->load_usec = s->cfg.load_usec;

	name = s->cfg.served_model_name ? s->cfg.served_model_name : s->ecfg.model_name;
	s->served_name = strdup(name);
	s->served_name_json = sim_api_json_escape(name);
	if (!s->served_name || !s->served_name_json) {
		sim_server_free(s);
		return -ENOMEM;
	}
	/* The caller's strings are not kept: the copies above replace them. */
	s->cfg.served_model_name = s->served_name;
	s->cfg.host = NULL;

	if (cfg->trace_path) {
		s->trace = fopen(cfg->trace_path, "we");
		if (!s->trace) {
			r = error_set(err, -errno, "--trace: cannot open %s: %s", cfg->trace_path, strerror(errno));
			sim_server_free(s);
			return r;
		}
	}
	s->cfg.trace_path = NULL;

	r = bind_socket(s, cfg->host, err);
	if (r >= 0)
		r = add_pacer(s, err);
	/* llama.cpp serves (503 "Loading model") while it loads. */
	if (r >= 0 && s->cfg.dialect.dialect == SIM_DIALECT_LLAMACPP)
		r = sim_server_start_mhd(s, err);
	if (r >= 0)
		r = sim_server_startup_begin(s, cfg->host, err);
	if (r < 0) {
		sim_server_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

struct sim_server *sim_server_free(struct sim_server *s)
{
	if (!s)
		return NULL;
	s->stopping = true;
	if (s->mhd) {
		/* MHD_stop_daemon refuses suspended connections: wake them all first. */
		for (struct sim_req *r = s->all; r; r = r->all_next)
			sim_req_resume(r);
		s->hung = false;
		(void)MHD_run(s->mhd);
		MHD_stop_daemon(s->mhd);
		s->mhd = NULL;
	}
	sd_event_source_disable_unref(s->mhd_io);
	sd_event_source_disable_unref(s->mhd_timer);
	sd_event_source_disable_unref(s->pacer);
	sd_event_source_disable_unref(s->load_timer);
	sd_event_source_disable_unref(s->conn_timer);
	sd_event_source_disable_unref(s->conn_reap);
	safe_close(s->listen_fd);
	sim_server_metrics_done(s);
	sim_engine_free(s->engine);
	sim_router_free(s->router);
	if (s->trace)
		fclose(s->trace);
	free(s->heap);
	free(s->buckets);
	free(s->served_name);
	free(s->served_name_json);
	sd_event_unref(s->event);
	free(s);
	return NULL;
}

uint16_t sim_server_get_port(const struct sim_server *s)
{
	return s->port;
}

uint64_t sim_server_get_load_usec(const struct sim_server *s)
{
	return s->load_usec;
}
