/* server-startup.c — goodput-sim's start-up, played out as the emulated
 * engine's, and the requests an engine refuses by its own rules.
 *
 * The start-up delay is split into the engine's phases (dialect.h: devices,
 * weights, profile and KV cache, CUDA graphs; the start-up model's own
 * durations when it is on). One timer walks them: at each phase's end the
 * dialect's log lines for it are printed, with the phase's duration in
 * them; a configuration the engine would refuse fails at the phase where the
 * engine finds out (refused arguments at once, weights that do not fit
 * after loading them, the KV cache after profiling), in the engine's words,
 * and the loop exits with 1. The last phase makes the server ready; the
 * engines that listen only once loaded (all but llama.cpp) start serving
 * then, so that until then connections are refused while the port is held.
 *
 * Requests: llama.cpp refuses best_of on /v1/completions (as a server error,
 * its exception handler's 500); TGI refuses prompts over
 * --max-input-tokens (422) and answers 429 "Model is overloaded" beyond
 * --max-concurrent-requests. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "macro.h"
#include "server-internal.h"
#include "time-util.h"

static void arm(struct sim_server *s)
{
	(void)sd_event_source_set_time(s->load_timer, s->start_usec + s->timeline.end_usec[s->phase]);
	(void)sd_event_source_set_enabled(s->load_timer, SD_EVENT_ONESHOT);
}

static int fail(struct sim_server *s)
{
	const char *msg = error_str(&s->startup_err, s->startup_r);

	sim_dialect_print_failure(stderr, &s->cfg.dialect, &s->ecfg, &s->check, msg);
	return sd_event_exit(s->event, EXIT_FAILURE);
}

static int become_ready(struct sim_server *s)
{
	struct error err = { 0 };
	int r;

	if (s->cfg.faults.fail_startup) {
		fprintf(stderr, "RuntimeError: Engine core initialization failed. See root cause above. "
				"Failed core proc(s): {}\n"
				"goodput-sim: (fault injection: --fault-fail-startup)\n");
		return sd_event_exit(s->event, EXIT_FAILURE);
	}
	r = sim_server_start_mhd(s, &err);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		return sd_event_exit(s->event, EXIT_FAILURE);
	}
	s->ready = true;
	log_debug("ready: serving %s (max_model_len %" PRIu32 ", %" PRIu64 " KV blocks)", s->served_name,
		  s->max_model_len, s->info ? s->info->memory.num_blocks : 0);
	(void)sd_notify(false, "READY=1\nSTATUS=serving");
	sim_server_run_mhd(s);
	return 0;
}

static int on_phase(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct sim_server *s = userdata;
	enum sim_phase phase = (enum sim_phase)s->phase;

	if (!s->engine && phase >= sim_dialect_failure_phase(&s->check))
		return fail(s);
	sim_dialect_print_phase(sim_dialect_log_stream(&s->cfg.dialect), &s->cfg.dialect, &s->ecfg, s->info,
				&s->timeline, phase, s->url);
	if (++s->phase < _SIM_PHASE_MAX) {
		arm(s);
		return 0;
	}
	return become_ready(s);
}

int sim_server_startup_begin(struct sim_server *s, const char *host, struct error *err)
{
	int r;

	if (strchr(host, ':'))
		snprintf(s->url, sizeof(s->url), "http://[%s]:%u", host, s->port);
	else
		snprintf(s->url, sizeof(s->url), "http://%s:%u", host, s->port);
	if (s->router) {
		/* a proxy loads nothing: it serves at once */
		r = sim_server_start_mhd(s, err);
		if (r < 0)
			return r;
		s->ready = true;
		sim_router_print_startup(s);
		(void)sd_notify(false, "READY=1\nSTATUS=serving");
		return 0;
	}
	sim_timeline_build(&s->ecfg, &s->startup_phases, s->info ? s->info->memory.weights : s->check.mem.weights,
			   s->load_usec, &s->timeline);
	/* A refused argument is refused before anything loads. */
	if (!s->engine && s->check.cause == SIM_STARTUP_CONFIG)
		s->timeline.end_usec[SIM_PHASE_DEVICES] = 0;
	r = sd_event_add_time(s->event, &s->load_timer, CLOCK_MONOTONIC, 0, 1, on_phase, s);
	if (r < 0)
		return error_set(err, r, "cannot add the start-up timer");
	(void)sd_event_source_set_description(s->load_timer, "start-up");
	s->phase = 0;
	arm(s);
	return 0;
}

/* ---- requests the engine refuses ---- */

static bool body_has_key(const struct sim_req *r, const char *key)
{
	_cleanup_(cJSON_Deletep) cJSON *root = cJSON_ParseWithLength(r->body ? r->body : "", r->body_len);

	return cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, key);
}

unsigned sim_server_dialect_refuses(struct sim_server *s, struct sim_req *r, char *msg, size_t size)
{
	const struct sim_dialect_options *d = &s->cfg.dialect;

	if (d->dialect == SIM_DIALECT_LLAMACPP && r->route == SIM_ROUTE_COMPLETIONS) {
		static const char *const unsupported[] = { "best_of", "suffix" };

		for (size_t i = 0; i < ELEMENTSOF(unsupported); i++)
			if (body_has_key(r, unsupported[i])) {
				snprintf(msg, size, "Unsupported param: %s", unsupported[i]);
				return 500;
			}
	}
	if (d->dialect == SIM_DIALECT_TGI) {
		if (d->max_input_tokens && r->n_prompt > d->max_input_tokens) {
			snprintf(msg, size, "Input validation error: `inputs` must have less than %u tokens. Given: %u",
				 d->max_input_tokens, r->n_prompt);
			return 422;
		}
		if (d->max_concurrent && s->in_flight >= d->max_concurrent) {
			snprintf(msg, size, "Model is overloaded");
			return 429;
		}
	}
	s->in_flight++;
	r->counted = true;
	return 0;
}
