/* server-router.c — goodput-sim as the proxy of a disaggregated deployment:
 * vLLM's toy_proxy_server.py (`goodput-sim proxy`, its flags) or SGLang's
 * router in PD mode (`goodput-sim router --pd-disaggregation`, or as
 * python3 -m sglang_router.launch_router).
 *
 * The server (server.c) runs without an engine: it is ready at once and
 * answers its health route (/healthcheck for vLLM's proxy, /health for
 * SGLang's router); a completion is relayed as vLLM's proxy does it:
 *   1. to the next prefill worker in turn, non-streaming, with max_tokens 1
 *      and kv_transfer_params {"do_remote_decode": true}; its answer's
 *      kv_transfer_params say where the KV cache is;
 *   2. to the next decode worker in turn, the client's request with those
 *      kv_transfer_params, its answer streamed back to the client as it
 *      comes (status, body and all: an error of the worker is the client's).
 * The workers are reached through the probe's HTTP client (libcurl on the
 * same sd-event loop). A client that goes away ends its relay; a worker
 * that cannot be reached is a 502 naming it.
 *
 * SGLang's router sends the request to both workers at once and the
 * prefill worker pushes the KV through its bootstrap server; the emulated
 * workers take vLLM's sequence in both dialects, so the router does too. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "client.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "server-internal.h"
#include "time-util.h"

#define PREFILL_ANSWER_MAX  (1u << 20)
#define RELAY_READER_BLOCK  4096
#define RELAY_BUFFER_MAX    (64u << 20)
#define WORKER_TIMEOUT_USEC (600 * USEC_PER_SEC)

struct sim_router {
	struct sim_server *server;
	struct probe_client **prefill, **decode;
	size_t n_prefill, n_decode, next_prefill, next_decode;
	uint64_t relayed, failed;
};

enum relay_stage {
	RELAY_PREFILL,
	RELAY_DECODE,
	RELAY_DONE,
};

/* One client request on its way through the workers. */
struct sim_relay {
	struct sim_req *r; /* NULL once the client went away */
	struct sim_router *router;
	cJSON *body; /* the client's request */
	char path[32];
	enum relay_stage stage;
	struct probe_client *worker; /* the one it is at */
	long status;                 /* the answer's (0: not known yet) */
	char *buf;                   /* the answer's bytes MHD has not read yet */
	size_t len, off, cap;
	bool ended;    /* the answer is complete */
	bool queued;   /* its response is queued on MHD */
	bool streamed; /* the client asked for a stream */
};

/* ---- the command line ---- */

static int add_url(char ***v, size_t *n, const char *url)
{
	char **t = reallocarray(*v, *n + 1, sizeof(char *));

	if (!t)
		return -ENOMEM;
	*v = t;
	t[*n] = strdup(url);
	if (!t[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

void sim_router_config_done(struct sim_router_config *c)
{
	for (size_t i = 0; i < c->n_prefill; i++)
		free(c->prefill[i]);
	for (size_t i = 0; i < c->n_decode; i++)
		free(c->decode[i]);
	free(c->prefill);
	free(c->decode);
	*c = (struct sim_router_config){ 0 };
}

/* The values of a flag that takes one or more (argparse's nargs="+"). */
static int take_values(int argc, char **argv, int *i, const char **ret, size_t max, size_t *ret_n)
{
	size_t n = 0;

	while (*i + 1 < argc && argv[*i + 1][0] != '-' && n < max)
		ret[n++] = argv[++*i];
	*ret_n = n;
	return n > 0 ? 0 : -EINVAL;
}

/* vLLM's toy_proxy_server.py: --host, --port, --prefiller-hosts H...,
 * --prefiller-ports P..., --decoder-hosts H..., --decoder-ports P... */
static int parse_proxy(int argc, char **argv, int first, struct sim_server_config *sc, struct sim_router_config *rc)
{
	const char *ph[64] = { "localhost" }, *pp[64] = { "8100" }, *dh[64] = { "localhost" }, *dp[64] = { "8200" };
	size_t n_ph = 1, n_pp = 1, n_dh = 1, n_dp = 1;
	struct error err = { 0 };
	uint64_t port;

	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		int r = 0;

		if (strcmp(a, "--prefiller-hosts") == 0 || strcmp(a, "--prefiller-host") == 0)
			r = take_values(argc, argv, &i, ph, ELEMENTSOF(ph), &n_ph);
		else if (strcmp(a, "--prefiller-ports") == 0 || strcmp(a, "--prefiller-port") == 0)
			r = take_values(argc, argv, &i, pp, ELEMENTSOF(pp), &n_pp);
		else if (strcmp(a, "--decoder-hosts") == 0 || strcmp(a, "--decoder-host") == 0)
			r = take_values(argc, argv, &i, dh, ELEMENTSOF(dh), &n_dh);
		else if (strcmp(a, "--decoder-ports") == 0 || strcmp(a, "--decoder-port") == 0)
			r = take_values(argc, argv, &i, dp, ELEMENTSOF(dp), &n_dp);
		else if (strcmp(a, "--host") == 0 && i + 1 < argc)
			sc->host = argv[++i];
		else if (strcmp(a, "--port") == 0 && i + 1 < argc) {
			if (parse_u64("--port", argv[++i], 0, 65535, &port, &err) < 0) {
				fprintf(stderr,
					"toy_proxy_server.py: error: argument --port: invalid int value: '%s'\n",
					argv[i]);
				return 1 + 2;
			}
			sc->port = (uint16_t)port;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			printf("usage: toy_proxy_server.py [-h] [--port PORT] [--host HOST]\n"
			       "                           [--prefiller-hosts PREFILLER_HOSTS [PREFILLER_HOSTS ...]]\n"
			       "                           [--prefiller-ports PREFILLER_PORTS [PREFILLER_PORTS ...]]\n"
			       "                           [--decoder-hosts DECODER_HOSTS [DECODER_HOSTS ...]]\n"
			       "                           [--decoder-ports DECODER_PORTS [DECODER_PORTS ...]]\n"
			       "\ngoodput-sim plays vLLM's disaggregated-prefill proxy "
			       "(tests/v1/kv_connector/nixl_integration/toy_proxy_server.py).\n");
			return 1;
		} else if (strcmp(a, "--gpu-ledger") == 0 && i + 1 < argc)
			i++; /* the sim's own, given to every role: the proxy holds no GPU */
		else
			r = -EINVAL;
		if (r < 0) {
			fprintf(stderr, "toy_proxy_server.py: error: unrecognized arguments: %s\n", a);
			return 1 + 2;
		}
	}
	if (n_ph != n_pp || n_dh != n_dp) {
		fprintf(stderr, "ValueError: Number of %s hosts must match number of %s ports\n",
			n_ph != n_pp ? "prefiller" : "decoder", n_ph != n_pp ? "prefiller" : "decoder");
		return 1 + 1;
	}
	for (size_t k = 0; k < n_ph + n_dh; k++) {
		bool pre = k < n_ph;
		const char *h = pre ? ph[k] : dh[k - n_ph], *p = pre ? pp[k] : dp[k - n_ph];
		char url[300];

		if (parse_u64("port", p, 1, 65535, &port, &err) < 0) {
			fprintf(stderr, "toy_proxy_server.py: error: invalid int value: '%s'\n", p);
			return 1 + 2;
		}
		snprintf(url, sizeof(url), "http://%s%s%s:%" PRIu64, strchr(h, ':') ? "[" : "", h,
			 strchr(h, ':') ? "]" : "", port);
		if (add_url(pre ? &rc->prefill : &rc->decode, pre ? &rc->n_prefill : &rc->n_decode, url) < 0)
			return 1 + 1;
	}
	return 0;
}

/* SGLang's router: --pd-disaggregation, --prefill URL [BOOTSTRAP_PORT]
 * (repeated), --decode URL (repeated), --host, --port, --policy ... */
static int parse_sglang(int argc, char **argv, int first, struct sim_server_config *sc, struct sim_router_config *rc)
{
	struct error err = { 0 };
	bool pd = false;
	uint64_t port;

	for (int i = first; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--pd-disaggregation") == 0)
			pd = true;
		else if ((strcmp(a, "--prefill") == 0 || strcmp(a, "--decode") == 0) && i + 1 < argc) {
			bool pre = strcmp(a, "--prefill") == 0;

			if (add_url(pre ? &rc->prefill : &rc->decode, pre ? &rc->n_prefill : &rc->n_decode, argv[++i]) <
			    0)
				return 1 + 1;
			/* the prefill server's bootstrap port, or "none" */
			if (pre && i + 1 < argc && argv[i + 1][0] != '-')
				i++;
		} else if (strcmp(a, "--host") == 0 && i + 1 < argc)
			sc->host = argv[++i];
		else if (strcmp(a, "--port") == 0 && i + 1 < argc) {
			if (parse_u64("--port", argv[++i], 0, 65535, &port, &err) < 0) {
				fprintf(stderr, "error: argument --port: invalid int value: '%s'\n", argv[i]);
				return 1 + 2;
			}
			sc->port = (uint16_t)port;
		} else if ((strcmp(a, "--policy") == 0 || strcmp(a, "--prefill-policy") == 0 ||
			    strcmp(a, "--decode-policy") == 0 || strcmp(a, "--log-level") == 0 ||
			    strcmp(a, "--gpu-ledger") == 0) &&
			   i + 1 < argc)
			i++; /* round robin whatever the policy: the emulated workers report no load */
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			printf("usage: launch_router.py [-h] [--host HOST] [--port PORT] [--pd-disaggregation]\n"
			       "                        [--prefill URL [BOOTSTRAP_PORT]] [--decode URL] [--policy "
			       "POLICY]\n"
			       "\ngoodput-sim plays SGLang's router in prefill-decode mode (sglang_router).\n");
			return 1;
		} else {
			fprintf(stderr, "launch_router.py: error: unrecognized arguments: %s\n", a);
			return 1 + 2;
		}
	}
	if (!pd || rc->n_prefill == 0 || rc->n_decode == 0) {
		fprintf(stderr, "launch_router.py: error: goodput-sim plays the router in PD mode only: "
				"--pd-disaggregation with at least one --prefill and one --decode\n");
		return 1 + 2;
	}
	return 0;
}

int sim_router_args_parse(int argc, char **argv, int first, enum sim_router_style style, struct sim_server_config *sc,
			  struct sim_router_config *rc)
{
	int r;

	*rc = (struct sim_router_config){ .style = style };
	sc->port = style == SIM_ROUTER_SGLANG ? 30000 : 8000;
	r = style == SIM_ROUTER_SGLANG ? parse_sglang(argc, argv, first, sc, rc)
				       : parse_proxy(argc, argv, first, sc, rc);
	if (r != 0)
		sim_router_config_done(rc);
	sc->router = r == 0 ? rc : NULL;
	return r;
}

/* ---- the workers ---- */

static struct probe_client *worker_new(struct sim_server *s, const char *url)
{
	struct probe_client_config cfg;
	struct probe_client *c = NULL;
	struct error err = { 0 };

	probe_client_config_init(&cfg);
	cfg.base_url = url;
	cfg.request_timeout_usec = WORKER_TIMEOUT_USEC;
	if (probe_client_new(s->event, &cfg, &c, &err) < 0) {
		log_error("worker %s: %s", url, err.msg);
		return NULL;
	}
	return c;
}

int sim_router_new(struct sim_server *s, const struct sim_router_config *rc, struct error *err)
{
	struct sim_router *rt = calloc(1, sizeof(*rt));

	if (!rt)
		return -ENOMEM;
	s->router = rt;
	rt->server = s;
	rt->prefill = calloc(rc->n_prefill, sizeof(*rt->prefill));
	rt->decode = calloc(rc->n_decode, sizeof(*rt->decode));
	if (!rt->prefill || !rt->decode)
		return -ENOMEM;
	for (size_t i = 0; i < rc->n_prefill; i++) {
		rt->prefill[i] = worker_new(s, rc->prefill[i]);
		if (!rt->prefill[i])
			return error_set(err, -EINVAL, "prefill worker %s: not a URL goodput-sim can reach",
					 rc->prefill[i]);
		rt->n_prefill++;
	}
	for (size_t i = 0; i < rc->n_decode; i++) {
		rt->decode[i] = worker_new(s, rc->decode[i]);
		if (!rt->decode[i])
			return error_set(err, -EINVAL, "decode worker %s: not a URL goodput-sim can reach",
					 rc->decode[i]);
		rt->n_decode++;
	}
	return 0;
}

void sim_router_free(struct sim_router *rt)
{
	if (!rt)
		return;
	for (size_t i = 0; i < rt->n_prefill; i++)
		probe_client_free(rt->prefill[i]);
	for (size_t i = 0; i < rt->n_decode; i++)
		probe_client_free(rt->decode[i]);
	free(rt->prefill);
	free(rt->decode);
	free(rt);
}

/* ---- one relay ---- */

static void relay_free(struct sim_relay *x)
{
	if (!x)
		return;
	cJSON_Delete(x->body);
	free(x->buf);
	free(x);
}

/* Appends to what the client has yet to read; false when it cannot hold it. */
static bool relay_append(struct sim_relay *x, const char *data, size_t len)
{
	if (x->off > 0 && x->off == x->len)
		x->off = x->len = 0;
	if (x->len + len > RELAY_BUFFER_MAX)
		return false;
	if (x->len + len > x->cap) {
		size_t cap = MAX(x->cap * 2, x->len + len);
		char *b = realloc(x->buf, cap);

		if (!b)
			return false;
		x->buf = b;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, data, len);
	x->len += len;
	return true;
}

/* The client's connection gets to run: its response is queued or read on. */
static void relay_wake(struct sim_relay *x)
{
	if (!x->r)
		return;
	sim_req_resume(x->r);
	sim_server_wake(x->router->server);
}

/* The relay failed before the answer began: a 502 naming the worker. */
static void relay_fail(struct sim_relay *x, const char *fmt, ...) _printf_(2, 3);
static void relay_fail(struct sim_relay *x, const char *fmt, ...)
{
	_cleanup_(freep) char *msg = NULL, *body = NULL;
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vasprintf(&msg, fmt, ap);
	va_end(ap);
	x->router->failed++;
	x->stage = RELAY_DONE;
	x->ended = true;
	if (k < 0) {
		msg = NULL;
		x->status = 500;
	} else {
		x->status = 502;
		log_debug("relay: %s", msg);
		body = sim_api_error_json(msg, "BadGatewayError", NULL, 502);
		if (body)
			(void)relay_append(x, body, strlen(body));
	}
	relay_wake(x);
}

static bool on_decode_data(struct probe_client *c, long status, const char *data, size_t len, void *userdata)
{
	struct sim_relay *x = userdata;

	if (!x->r)
		return false;
	x->status = status;
	if (!relay_append(x, data, len))
		return false;
	relay_wake(x);
	return true;
}

static void on_decode_done(struct probe_client *c, int r, long status, const char *body, size_t len, const char *error,
			   void *userdata)
{
	struct sim_relay *x = userdata;

	if (!x->r) {
		relay_free(x);
		return;
	}
	if (r < 0 && x->status == 0) {
		relay_fail(x, "decode worker %s: %s", probe_client_url(c), error ? error : "no answer");
		return;
	}
	if (x->status == 0)
		x->status = status;
	x->stage = RELAY_DONE;
	x->ended = true;
	x->router->relayed++;
	relay_wake(x);
}

/* The prefill worker's answer: its kv_transfer_params go with the client's
 * request to the next decode worker. */
static void on_prefill_done(struct probe_client *c, int r, long status, const char *body, size_t len, const char *error,
			    void *userdata)
{
	struct sim_relay *x = userdata;
	struct sim_router *rt = x->router;
	_cleanup_(cJSON_Deletep) cJSON *answer = NULL;
	_cleanup_(freep) char *text = NULL;
	cJSON *kv;
	int k;

	if (!x->r) {
		relay_free(x);
		return;
	}
	if (r < 0) {
		relay_fail(x, "prefill worker %s: %s", probe_client_url(c), error ? error : "no answer");
		return;
	}
	if (status != 200) {
		/* the worker's refusal is the client's answer */
		x->status = status;
		x->stage = RELAY_DONE;
		x->ended = true;
		if (!relay_append(x, body, len))
			x->status = 500;
		relay_wake(x);
		return;
	}
	answer = cJSON_ParseWithLength(body, len);
	kv = cJSON_DetachItemFromObjectCaseSensitive(answer, "kv_transfer_params");
	if (kv && !cJSON_ReplaceItemInObjectCaseSensitive(x->body, "kv_transfer_params", kv) &&
	    !cJSON_AddItemToObject(x->body, "kv_transfer_params", kv)) {
		cJSON_Delete(kv);
		relay_fail(x, "out of memory");
		return;
	}
	text = cJSON_PrintUnformatted(x->body);
	if (!text) {
		relay_fail(x, "out of memory");
		return;
	}
	x->stage = RELAY_DECODE;
	x->worker = rt->decode[rt->next_decode];
	rt->next_decode = (rt->next_decode + 1) % rt->n_decode;
	k = probe_client_post(x->worker, x->path, text, strlen(text), 0, 0, on_decode_data, on_decode_done, x);
	if (k < 0)
		relay_fail(x, "decode worker %s: %s", probe_client_url(x->worker), strerror(-k));
}

/* Sets key to a new item, replacing one already there. */
static bool set_item(cJSON *obj, const char *key, cJSON *item)
{
	if (!item)
		return false;
	if (cJSON_GetObjectItemCaseSensitive(obj, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item);
	if (cJSON_AddItemToObject(obj, key, item))
		return true;
	cJSON_Delete(item);
	return false;
}

/* The request the prefill worker gets: one token, no stream, the KV kept for a decode worker. */
static char *prefill_body(const cJSON *client)
{
	_cleanup_(cJSON_Deletep) cJSON *b = cJSON_Duplicate(client, true), *kv = NULL;

	kv = cJSON_CreateObject();
	if (!b || !kv || !cJSON_AddBoolToObject(kv, "do_remote_decode", true) ||
	    !cJSON_AddBoolToObject(kv, "do_remote_prefill", false) || !cJSON_AddNullToObject(kv, "remote_engine_id") ||
	    !cJSON_AddNullToObject(kv, "remote_block_ids") || !cJSON_AddNullToObject(kv, "remote_host") ||
	    !cJSON_AddNullToObject(kv, "remote_port"))
		return NULL;
	if (!set_item(b, "kv_transfer_params", TAKE_PTR(kv)) || !set_item(b, "stream", cJSON_CreateBool(false)) ||
	    !set_item(b, "max_tokens", cJSON_CreateNumber(1)))
		return NULL;
	if (cJSON_GetObjectItemCaseSensitive(b, "max_completion_tokens") &&
	    !set_item(b, "max_completion_tokens", cJSON_CreateNumber(1)))
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(b, "stream_options");
	cJSON_DeleteItemFromObjectCaseSensitive(b, "min_tokens");
	cJSON_DeleteItemFromObjectCaseSensitive(b, "min_completion_tokens");
	return cJSON_PrintUnformatted(b);
}

enum MHD_Result sim_router_forward(struct sim_req *r, const char *url)
{
	struct sim_server *s = r->server;
	struct sim_router *rt = s->router;
	_cleanup_(freep) char *text = NULL;
	struct sim_relay *x;
	const cJSON *stream;
	int k;

	x = calloc(1, sizeof(*x));
	if (!x)
		return MHD_NO;
	x->router = rt;
	x->body = cJSON_ParseWithLength(r->body ? r->body : "", r->body_len);
	if (!cJSON_IsObject(x->body)) {
		relay_free(x);
		return sim_server_queue_error(r, 400, "BadRequestError", "request body: expected a JSON object");
	}
	/* the workers' API is under /v1, as the proxy's clients' */
	snprintf(x->path, sizeof(x->path), "%s", url);
	stream = cJSON_GetObjectItemCaseSensitive(x->body, "stream");
	x->streamed = cJSON_IsTrue(stream);
	text = prefill_body(x->body);
	if (!text) {
		relay_free(x);
		return MHD_NO;
	}
	x->r = r;
	r->relay = x;
	r->id = ++s->next_id;
	r->arrival_usec = mono_usec();
	x->worker = rt->prefill[rt->next_prefill];
	rt->next_prefill = (rt->next_prefill + 1) % rt->n_prefill;
	k = probe_client_post(x->worker, x->path, text, strlen(text), PREFILL_ANSWER_MAX, 0, NULL, on_prefill_done, x);
	if (k < 0)
		relay_fail(x, "prefill worker %s: %s", probe_client_url(x->worker), strerror(-k));
	sim_req_suspend(r);
	return MHD_YES;
}

/* MHD's content reader of a relayed answer: what arrived, suspended while
 * nothing has. */
static ssize_t relay_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sim_req *r = cls;
	struct sim_relay *x = r->relay;
	size_t n;

	if (!x || r->server->stopping)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	n = MIN(max, x->len - x->off);
	if (n > 0) {
		memcpy(buf, x->buf + x->off, n);
		x->off += n;
		return (ssize_t)n;
	}
	if (x->ended) {
		r->done_sent = true;
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	sim_req_suspend(r);
	return 0;
}

enum MHD_Result sim_router_resumed(struct sim_req *r)
{
	struct sim_relay *x = r->relay;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (x->queued || (x->status == 0 && !x->ended)) {
		sim_req_suspend(r);
		return MHD_YES;
	}
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, RELAY_READER_BLOCK, relay_reader, r, NULL);
	if (!resp)
		return MHD_NO;
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				      x->streamed && x->status == 200 ? "text/event-stream; charset=utf-8"
								      : "application/json");
	ret = MHD_queue_response(r->conn, (unsigned)(x->status ? x->status : 502), resp);
	MHD_destroy_response(resp);
	x->queued = true;
	if (x->status / 100 >= 1 && x->status / 100 <= 5)
		r->server->http_responses[x->status / 100]++;
	return ret;
}

void sim_router_request_done(struct sim_req *r)
{
	struct sim_relay *x = r->relay;

	if (!x)
		return;
	r->relay = NULL;
	x->r = NULL;
	if (x->stage != RELAY_DONE && x->worker) {
		/* a callback of the worker's would find it gone: no callback follows a cancel */
		probe_client_cancel(x->worker, x);
	}
	relay_free(x);
}

char *sim_router_render_health(struct sim_server *s)
{
	struct sim_router *rt = s->router;
	char *body = NULL;

	if (s->cfg.router->style == SIM_ROUTER_SGLANG)
		return strdup("");
	if (asprintf(&body, "{\"status\":\"ok\",\"prefill_instances\":%zu,\"decode_instances\":%zu}", rt->n_prefill,
		     rt->n_decode) < 0)
		return NULL;
	return body;
}

void sim_router_print_startup(struct sim_server *s)
{
	const struct sim_router_config *rc = s->cfg.router;

	if (rc->style == SIM_ROUTER_VLLM_PROXY) {
		printf("Initialized %zu prefill clients and %zu decode clients.\n", rc->n_prefill, rc->n_decode);
		printf("INFO:     Started server process [%ld]\nINFO:     Waiting for application startup.\n"
		       "INFO:     Application startup complete.\nINFO:     Uvicorn running on %s (Press CTRL+C to "
		       "quit)\n",
		       (long)getpid(), s->url);
	} else {
		for (size_t i = 0; i < rc->n_prefill; i++)
			printf("INFO  sgl_router: Added prefill worker %s\n", rc->prefill[i]);
		for (size_t i = 0; i < rc->n_decode; i++)
			printf("INFO  sgl_router: Added decode worker %s\n", rc->decode[i]);
		printf("INFO  sgl_router: Starting server on %s in PD disaggregated mode\n", s->url);
	}
	fflush(stdout);
}
