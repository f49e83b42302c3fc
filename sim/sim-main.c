/* sim-main.c — the goodput-sim executable: `goodput-sim [serve] [FLAGS]` runs
 * the real-time OpenAI-compatible server (server.h); `goodput-sim simulate`
 * runs a workload through the same engine model in virtual time
 * (simulate.h). This file only parses flags and runs the sd-event loop. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "config.h"
#include "engine.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "server.h"
#include "simulate.h"
#include "time-util.h"

/* Start-up time of the emulated engine relative to PERFMODEL §4.5's estimate:
 * 0.005 turns an 8B model's ~1 min into ~0.3 s and a 70B model's ~2.5 min
 * into ~0.75 s, so tests and demos start in under a second. */
#define DEFAULT_LOAD_TIME_SCALE 0.005

static void help(void)
{
	printf("Usage: goodput-sim [serve] [MODEL] [FLAGS]\n"
	       "       goodput-sim simulate [ENGINE FLAGS] [WORKLOAD FLAGS] [--json]   (see simulate --help)\n"
	       "\n"
	       "An emulated vLLM-style inference server: OpenAI-compatible HTTP API whose tokens are\n"
	       "paced in real time by a roofline model of continuous batching on the chosen GPUs.\n"
	       "When it listens it prints one line \"goodput-sim: listening on http://HOST:PORT\";\n"
	       "/health answers 503 while the model \"loads\", then 200.\n"
	       "\n"
	       "Engine flags (vLLM's names):\n");
	sim_engine_flags_help(stdout);
	printf("  (default --load-time-scale for serve: %g, so start-up takes well under a second)\n"
	       "\n"
	       "Server flags:\n"
	       "  --host ADDR                   address to bind (default 127.0.0.1)\n"
	       "  --port N                      port; 0 = any free port (default 8000)\n"
	       "  --served-model-name NAME      the model name clients must send (default: --model)\n"
	       "  --load-time SECONDS           start-up delay, overriding the modelled one\n"
	       "  --trace FILE                  JSONL, one line per completion: id, arrival_usec and\n"
	       "                                tokens [[scheduled_usec, sent_usec], ...] (CLOCK_MONOTONIC)\n"
	       "  --max-connections N           concurrent connections (default %u)\n"
	       "  --max-request-bytes N         largest request body; larger gets 413 (default %u)\n"
	       "  --max-buffered-bytes N        request bodies of all connections together; a body that\n"
	       "                                would pass it closes its connection (default %u)\n"
	       "  --idle-timeout SECONDS        a connection's next request line must come within this\n"
	       "                                (default %d; near --max-connections the longest-idle\n"
	       "                                connections are closed first)\n"
	       "  --header-timeout SECONDS      ... its headers within this after the request line (default %d)\n"
	       "  --body-timeout SECONDS        ... its body within this after the headers (default %d);\n"
	       "                                0 turns a timeout off\n"
	       "  --fixed-itl-ms MS             benchmark mode: ignore the engine model, send one token\n"
	       "                                every MS ms per stream (first after MS)\n"
	       "  -v, --verbose                 debug logging\n"
	       "  -h, --help                    this text\n"
	       "  --version                     print the version\n"
	       "\n"
	       "Fault injection (off by default):\n"
	       "  --fault-crash-after N         die by SIGKILL on the completion request after N\n"
	       "  --fault-hang-after N          stop answering anything after N completion requests\n"
	       "  --fault-fail-startup          fail after the load delay with vLLM's engine-init error\n"
	       "  --fault-http500 FRACTION      answer this fraction of completions with HTTP 500\n"
	       "  --fault-bad-sse FRACTION      this fraction of streams gets a malformed chunk halfway\n"
	       "                                through and ends without [DONE]\n"
	       "  --fault-jitter SIGMA          extra log-normal jitter (sigma) of every step time\n"
	       "  --fault-step-overhead-ms MS   extra cost of every step, outside the performance model\n",
	       DEFAULT_LOAD_TIME_SCALE, SIM_SERVER_DEFAULT_MAX_CONNECTIONS, SIM_SERVER_DEFAULT_MAX_BODY,
	       SIM_SERVER_DEFAULT_MAX_BUFFERED, SIM_SERVER_DEFAULT_IDLE_SEC, SIM_SERVER_DEFAULT_HEADER_SEC,
	       SIM_SERVER_DEFAULT_BODY_SEC);
}

enum {
	OPT_NONE,
	OPT_HOST,
	OPT_PORT,
	OPT_SERVED_NAME,
	OPT_LOAD_TIME,
	OPT_TRACE,
	OPT_MAX_CONNECTIONS,
	OPT_MAX_REQUEST_BYTES,
	OPT_MAX_BUFFERED_BYTES,
	OPT_IDLE_TIMEOUT,
	OPT_HEADER_TIMEOUT,
	OPT_BODY_TIMEOUT,
	OPT_FIXED_ITL,
	OPT_CRASH_AFTER,
	OPT_HANG_AFTER,
	OPT_FAIL_STARTUP,
	OPT_HTTP500,
	OPT_BAD_SSE,
	OPT_JITTER,
	OPT_STEP_OVERHEAD,
	OPT_VERBOSE,
	OPT_HELP,
	OPT_VERSION,
};

static const struct {
	const char *name;
	int id;
	bool value;
} server_flags[] = {
	{ "host", OPT_HOST, true },
	{ "port", OPT_PORT, true },
	{ "served-model-name", OPT_SERVED_NAME, true },
	{ "load-time", OPT_LOAD_TIME, true },
	{ "trace", OPT_TRACE, true },
	{ "max-connections", OPT_MAX_CONNECTIONS, true },
	{ "max-request-bytes", OPT_MAX_REQUEST_BYTES, true },
	{ "max-buffered-bytes", OPT_MAX_BUFFERED_BYTES, true },
	{ "idle-timeout", OPT_IDLE_TIMEOUT, true },
	{ "header-timeout", OPT_HEADER_TIMEOUT, true },
	{ "body-timeout", OPT_BODY_TIMEOUT, true },
	{ "fixed-itl-ms", OPT_FIXED_ITL, true },
	{ "fault-crash-after", OPT_CRASH_AFTER, true },
	{ "fault-hang-after", OPT_HANG_AFTER, true },
	{ "fault-fail-startup", OPT_FAIL_STARTUP, false },
	{ "fault-http500", OPT_HTTP500, true },
	{ "fault-bad-sse", OPT_BAD_SSE, true },
	{ "fault-jitter", OPT_JITTER, true },
	{ "fault-step-overhead-ms", OPT_STEP_OVERHEAD, true },
	{ "verbose", OPT_VERBOSE, false },
	{ "help", OPT_HELP, false },
	{ "version", OPT_VERSION, false },
};

static int apply_server_flag(int id, const char *what, const char *v, struct sim_server_config *sc,
			     struct sim_engine_config *ec, struct error *err)
{
	uint64_t u;
	double d;
	int r = 0;

	switch (id) {
	case OPT_HOST:
		sc->host = v;
		break;
	case OPT_PORT:
		r = parse_u64(what, v, 0, 65535, &u, err);
		sc->port = (uint16_t)u;
		break;
	case OPT_SERVED_NAME:
		sc->served_model_name = v;
		break;
	case OPT_LOAD_TIME:
		r = parse_double(what, v, 0, 3600, &d, err);
		sc->load_usec_set = true;
		sc->load_usec = sec_to_usec(d);
		break;
	case OPT_TRACE:
		sc->trace_path = v;
		break;
	case OPT_MAX_CONNECTIONS:
		r = parse_u64(what, v, 1, 1000000, &u, err);
		sc->max_connections = (uint32_t)u;
		break;
	case OPT_MAX_REQUEST_BYTES:
		r = parse_u64(what, v, 1024, 1u << 30, &u, err);
		sc->max_body_bytes = (size_t)u;
		break;
	case OPT_MAX_BUFFERED_BYTES:
		r = parse_u64(what, v, 1024, UINT64_C(1) << 40, &u, err);
		sc->max_buffered_bytes = (size_t)u;
		break;
	case OPT_IDLE_TIMEOUT:
	case OPT_HEADER_TIMEOUT:
	case OPT_BODY_TIMEOUT:
		r = parse_double(what, v, 0, 86400, &d, err);
		*(id == OPT_IDLE_TIMEOUT     ? &sc->idle_timeout_usec
		  : id == OPT_HEADER_TIMEOUT ? &sc->header_timeout_usec
					     : &sc->body_timeout_usec) = sec_to_usec(d);
		break;
	case OPT_FIXED_ITL:
		r = parse_double(what, v, 0.01, 60000, &sc->fixed_itl_ms, err);
		break;
	case OPT_CRASH_AFTER:
		r = parse_u64(what, v, 1, UINT64_MAX, &sc->faults.crash_after, err);
		break;
	case OPT_HANG_AFTER:
		r = parse_u64(what, v, 1, UINT64_MAX, &sc->faults.hang_after, err);
		break;
	case OPT_FAIL_STARTUP:
		sc->faults.fail_startup = true;
		break;
	case OPT_HTTP500:
		r = parse_double(what, v, 0, 1, &sc->faults.http500_fraction, err);
		break;
	case OPT_BAD_SSE:
		r = parse_double(what, v, 0, 1, &sc->faults.bad_sse_fraction, err);
		break;
	case OPT_JITTER:
		r = parse_double(what, v, 0, 2, &sc->faults.jitter_sigma, err);
		ec->extra_jitter_sigma = sc->faults.jitter_sigma;
		break;
	case OPT_STEP_OVERHEAD:
		r = parse_double(what, v, 0, 60000, &sc->faults.step_overhead_ms, err);
		ec->fault_step_usec = sc->faults.step_overhead_ms * 1000.0;
		break;
	case OPT_VERBOSE:
		log_set_max_level(LOG_DEBUG);
		break;
	}
	return r < 0 ? r : 1;
}

/* Returns 0 to serve, or exit status + 1 (help/version/usage error). */
static int parse_args(int argc, char **argv, struct sim_server_config *sc, struct sim_engine_config *ec)
{
	struct error err = { 0 };
	bool model_seen = false;
	int r;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *name, *eq, *v = NULL;
		char flag[128];
		int id = OPT_NONE;
		bool takes_value = true;

		if (i == 1 && strcmp(arg, "serve") == 0)
			continue;
		if (strcmp(arg, "-h") == 0)
			arg = "--help";
		else if (strcmp(arg, "-v") == 0)
			arg = "--verbose";
		else if (strcmp(arg, "-tp") == 0)
			arg = "--tensor-parallel-size";
		if (arg[0] != '-' || arg[1] == '\0') {
			/* vLLM's `serve MODEL` positional form. */
			if (model_seen) {
				fprintf(stderr, "goodput-sim: unexpected argument '%s'\n", arg);
				return 3;
			}
			model_seen = true;
			r = sim_engine_config_apply_flag(ec, "--model", arg, &err);
			if (r < 0) {
				fprintf(stderr, "goodput-sim: %s\n", error_str(&err, r));
				return 3;
			}
			continue;
		}
		name = arg + (arg[1] == '-' ? 2 : 1);
		eq = strchr(name, '=');
		snprintf(flag, sizeof(flag), "%.*s", eq ? (int)(eq - name) : (int)strlen(name), name);
		for (size_t k = 0; k < ELEMENTSOF(server_flags); k++)
			if (strcmp(flag, server_flags[k].name) == 0) {
				id = server_flags[k].id;
				takes_value = server_flags[k].value;
			}
		if (id == OPT_NONE)
			takes_value = sim_engine_flag_takes_value(flag);
		if (takes_value) {
			if (eq)
				v = eq + 1;
			else if (i + 1 < argc)
				v = argv[++i];
			else {
				fprintf(stderr, "goodput-sim: --%s: expected a value\n", flag);
				return 3;
			}
		} else if (eq) {
			fprintf(stderr, "goodput-sim: --%s takes no value\n", flag);
			return 3;
		}
		if (id == OPT_HELP) {
			help();
			return 1;
		}
		if (id == OPT_VERSION) {
			printf("goodput-sim %s\n", GOODPUT_VERSION);
			return 1;
		}
		if (id != OPT_NONE) {
			char what[140];

			snprintf(what, sizeof(what), "--%s", flag);
			r = apply_server_flag(id, what, v, sc, ec, &err);
		} else {
			r = sim_engine_config_apply_flag(ec, flag, v, &err);
			if (r == 0) {
				fprintf(stderr, "goodput-sim: unknown flag '--%s' (see --help)\n", flag);
				return 3;
			}
		}
		if (r < 0) {
			fprintf(stderr, "goodput-sim: %s\n", error_str(&err, r));
			return 3;
		}
	}
	sc->seed = ec->seed;
	sim_faults_seed(&sc->faults, ec->seed);
	return 0;
}

static int cmd_serve(int argc, char **argv)
{
	_cleanup_(sd_event_unrefp) sd_event *event = NULL;
	struct sim_server_config sc;
	struct sim_engine_config ec;
	struct sim_server *server = NULL;
	struct error err = { 0 };
	sigset_t mask;
	const char *host;
	int r;

	sim_server_config_init(&sc);
	sc.port = 8000;
	sim_engine_config_init(&ec);
	ec.startup_scale = DEFAULT_LOAD_TIME_SCALE;
	r = parse_args(argc, argv, &sc, &ec);
	if (r > 0)
		return r - 1;

	(void)signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
		log_error_errno(errno, "cannot block signals");
		return 1;
	}

	r = sd_event_default(&event);
	if (r < 0) {
		log_error_errno(r, "cannot create the event loop");
		return 1;
	}
	if (sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL) < 0 ||
	    sd_event_add_signal(event, NULL, SIGINT, NULL, NULL) < 0) {
		log_error("cannot watch SIGTERM/SIGINT");
		return 1;
	}

	host = sc.host;
	r = sim_server_new(event, &sc, &ec, &server, &err);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		return 1;
	}
	if (strchr(host, ':'))
		printf("goodput-sim: listening on http://[%s]:%u\n", host, sim_server_get_port(server));
	else
		printf("goodput-sim: listening on http://%s:%u\n", host, sim_server_get_port(server));
	fflush(stdout);
	log_debug("loading for %.3f s", usec_to_sec(sim_server_get_load_usec(server)));

	r = sd_event_loop(event);
	sim_server_free(server);
	if (r < 0) {
		log_error_errno(r, "event loop failed");
		return 1;
	}
	return r;
}

int main(int argc, char **argv)
{
	log_set_program("goodput-sim");
	if (argc > 1 && strcmp(argv[1], "simulate") == 0)
		return sim_cmd_simulate(argc - 1, argv + 1);
	return cmd_serve(argc, argv);
}
