/* sim-main.c — the goodput-sim executable: `goodput-sim [serve] [FLAGS]` runs
 * the real-time OpenAI-compatible server (server.h) in the dialect of the
 * engine it passes for (dialect.h); `goodput-sim simulate` runs a workload
 * through the same engine model in virtual time (simulate.h). This file
 * parses the command line (dialect-args.c), takes the host's GPUs it
 * occupies (gpu-ledger.h) and runs the sd-event loop. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "config.h"
#include "dialect.h"
#include "engine.h"
#include "gpu-ledger.h"
#include "log.h"
#include "macro.h"
#include "server.h"
#include "simulate.h"
#include "time-util.h"

/* The GPUs this sim occupies: the first DP × TP × PP of those
 * CUDA_VISIBLE_DEVICES shows (all of the host's when it is unset), taken in
 * the host's ledger when there is one. Returns 0, or an exit status + 1
 * after printing the engine's words (no GPU, a GPU another sim holds). */
static int take_gpus(const struct sim_server_config *sc, struct sim_engine_config *ec, struct sim_gpu_ledger *ledger)
{
	const char *env = getenv("CUDA_VISIBLE_DEVICES");
	unsigned visible[SIM_LEDGER_MAX_GPUS], busy = 0;
	uint32_t tp = sim_engine_config_gpus(ec);
	struct error err = { 0 };
	long holder = 0;
	size_t n;
	int r;

	/* --gpus is the host's count; without it the host has what the process may see. */
	n = sim_visible_devices(env, ec->gpus ? ec->gpus : SIM_LEDGER_MAX_GPUS, visible, ELEMENTSOF(visible));
	if (!env && !ec->gpus)
		n = tp;
	if (n == 0) {
		fprintf(stderr, "RuntimeError: No CUDA GPUs are available\n");
		return 1 + 1;
	}
	/* The engine sees only the visible GPUs (vLLM checks TP against them). */
	if (env)
		ec->gpus = (uint32_t)n;
	if (!sc->gpu_ledger)
		return 0;
	r = sim_gpu_ledger_acquire(sc->gpu_ledger, visible, MIN((size_t)tp, n), ledger, &busy, &holder, &err);
	if (r == -EBUSY) {
		sim_dialect_print_gpu_busy(stderr, &sc->dialect, busy, holder);
		return 1 + 1;
	}
	if (r < 0) {
		fprintf(stderr, "goodput-sim: %s\n", error_str(&err, r));
		return 1 + 1;
	}
	return 0;
}

/* $GOODPUT_SIM_SPEC_ACCEPTANCE: the drafts' acceptance when no flag gives
 * it (an engine profile passes the study's workload through it, since the
 * real engines have no such flag). Returns 0, or an exit status + 1. */
static int acceptance_from_env(struct sim_engine_config *ec)
{
	const char *v = getenv("GOODPUT_SIM_SPEC_ACCEPTANCE");
	struct error err = { 0 };

	if (!v || !*v)
		return 0;
	if (sim_spec_acceptance_parse(v, &ec->spec_acceptance, &err) < 0) {
		fprintf(stderr, "goodput-sim: $GOODPUT_SIM_SPEC_ACCEPTANCE: %s\n", err.msg);
		return 1 + 2;
	}
	return 0;
}

/* How goodput-sim was asked to run: as a proxy of a disaggregated
 * deployment (`goodput-sim proxy` with vLLM's toy proxy's flags, `goodput-sim
 * router` or `python3 -m sglang_router.launch_router` with SGLang's
 * router's) or, by default, as an engine. *ret_first: where its flags begin. */
static bool router_mode(int argc, char **argv, enum sim_router_style *ret_style, int *ret_first)
{
	const char *base = strrchr(argv[0], '/');

	base = base ? base + 1 : argv[0];
	if (argc > 1 && strcmp(argv[1], "proxy") == 0) {
		*ret_style = SIM_ROUTER_VLLM_PROXY;
		*ret_first = 2;
		return true;
	}
	if (argc > 1 && strcmp(argv[1], "router") == 0) {
		*ret_style = SIM_ROUTER_SGLANG;
		*ret_first = 2;
		return true;
	}
	if (argc > 2 && (strcmp(base, "python3") == 0 || strcmp(base, "python") == 0) && strcmp(argv[1], "-m") == 0 &&
	    strcmp(argv[2], "sglang_router.launch_router") == 0) {
		*ret_style = SIM_ROUTER_SGLANG;
		*ret_first = 3;
		return true;
	}
	return false;
}

static int cmd_serve(int argc, char **argv)
{
	_cleanup_(sd_event_unrefp) sd_event *event = NULL;
	_cleanup_(sim_router_config_done) struct sim_router_config rc = { 0 };
	struct sim_gpu_ledger ledger = { .n = 0 };
	struct sim_server_config sc;
	struct sim_engine_config ec;
	struct sim_server *server = NULL;
	struct error err = { 0 };
	enum sim_router_style style;
	sigset_t mask;
	const char *host;
	int first, r;

	sim_server_config_init(&sc);
	sim_engine_config_init(&ec);
	if (router_mode(argc, argv, &style, &first)) {
		/* a proxy holds no GPU and loads no model */
		r = sim_router_args_parse(argc, argv, first, style, &sc, &rc);
		if (r > 0)
			return r - 1;
		sc.dialect.dialect = style == SIM_ROUTER_SGLANG ? SIM_DIALECT_SGLANG : SIM_DIALECT_VLLM;
		sc.served_model_name = "";
	} else {
		r = acceptance_from_env(&ec);
		if (r > 0)
			return r - 1;
		r = sim_args_parse(argc, argv, &sc, &ec, &sc.dialect);
		if (r > 0)
			return r - 1;
		r = take_gpus(&sc, &ec, &ledger);
		if (r > 0)
			return r - 1;
	}

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
	/* goodput-sim's own line, in every dialect: where its port is (port 0 too). */
	if (strchr(host, ':'))
		printf("goodput-sim: listening on http://[%s]:%u\n", host, sim_server_get_port(server));
	else
		printf("goodput-sim: listening on http://%s:%u\n", host, sim_server_get_port(server));
	fflush(stdout);
	log_debug("loading for %.3f s", usec_to_sec(sim_server_get_load_usec(server)));

	r = sd_event_loop(event);
	sim_server_free(server);
	sim_gpu_ledger_release(&ledger);
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
