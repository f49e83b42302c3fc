/* server.h — goodput-sim's real-time OpenAI-compatible server.
 *
 * libmicrohttpd (MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, no MHD thread)
 * driven from the caller's sd-event loop, pacing streamed tokens at the
 * engine model's scheduled step-end times (sim/engine.h) against absolute
 * CLOCK_MONOTONIC deadlines. See server.c for the pacing design and
 * sim/README.md for the endpoints. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "dialect.h"
#include "engine.h"
#include "error.h"
#include "faults.h"

#define SIM_SERVER_DEFAULT_MAX_BODY        (4u << 20)
#define SIM_SERVER_DEFAULT_MAX_CONNECTIONS 4096u
#define SIM_SERVER_DEFAULT_MAX_BUFFERED    (64u << 20)
#define SIM_SERVER_DEFAULT_IDLE_SEC        60
#define SIM_SERVER_DEFAULT_HEADER_SEC      10
#define SIM_SERVER_DEFAULT_BODY_SEC        60

/* goodput-sim as the proxy of a disaggregated deployment (server-router.c). */
enum sim_router_style {
	SIM_ROUTER_VLLM_PROXY, /* vLLM's toy_proxy_server.py: /healthcheck */
	SIM_ROUTER_SGLANG,     /* SGLang's router in PD mode: /health */
};

struct sim_router_config {
	enum sim_router_style style;
	char **prefill, **decode; /* the workers' base URLs (owned) */
	size_t n_prefill, n_decode;
};

/* Parses the proxy's command line (argv[first..]) in the style's own
 * flags into rc (the caller frees it with sim_router_config_done) and sets
 * sc->router to it. Returns 0, or 1 + an exit status (help shown, or a
 * usage error printed in the proxy's words). */
int sim_router_args_parse(int argc, char **argv, int first, enum sim_router_style style, struct sim_server_config *sc,
			  struct sim_router_config *rc);
void sim_router_config_done(struct sim_router_config *rc);

struct sim_server_config {
	const char *host;              /* numeric address or name to bind; "127.0.0.1" */
	uint16_t port;                 /* 0 = any free port */
	const char *served_model_name; /* NULL = the engine's model name */
	bool load_usec_set;            /* load_usec overrides the engine's start-up estimate */
	uint64_t load_usec;
	const char *trace_path; /* JSONL per request; NULL = none */
	double fixed_itl_ms;    /* > 0: bypass the engine, one token per this (benchmarks) */
	uint32_t max_connections;
	size_t max_body_bytes;
	size_t max_buffered_bytes; /* request bodies of all connections together */
	/* A client must send its next request line, its headers and its body
	 * within these (server-conns.c); 0: no limit. */
	uint64_t idle_timeout_usec, header_timeout_usec, body_timeout_usec;
	uint64_t seed;
	struct sim_faults faults;
	struct sim_dialect_options dialect; /* the engine it passes for (vLLM by default) */
	const char *gpu_ledger;             /* directory of the host's GPU locks; NULL = none */
	/* not NULL: no engine, the proxy of these workers (borrowed; outlives the server) */
	const struct sim_router_config *router;
};

struct sim_server;

/* Sets the defaults above (host 127.0.0.1, port 0, limits, faults off). */
void sim_server_config_init(struct sim_server_config *c);

/* Creates the engine from ecfg and binds the socket, attaching everything
 * to event. The start-up then plays out in real time in the dialect's way:
 * its log lines at the end of each phase; llama.cpp listens at once and
 * answers 503 while loading, the others accept connections only once ready.
 * An engine whose start-up checks fail does NOT fail here: the server
 * "loads" up to the phase where the engine would fail, prints the engine's
 * words on stderr and exits the loop with 1. Errors here are the server's
 * own (bind, trace file, MHD). The configs are copied. */
int sim_server_new(sd_event *event, const struct sim_server_config *cfg, const struct sim_engine_config *ecfg,
		   struct sim_server **ret, struct error *err);

/* Resumes every suspended connection, stops MHD (completing each request),
 * frees the engine. Accepts NULL. */
struct sim_server *sim_server_free(struct sim_server *s);

/* The bound port (the kernel's choice when the config said 0). */
uint16_t sim_server_get_port(const struct sim_server *s);
/* The load delay the server will wait before it is ready. */
uint64_t sim_server_get_load_usec(const struct sim_server *s);
