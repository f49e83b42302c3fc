/* run.c — the load point runner: turns a workload's arrival offsets into
 * sends on the event loop and gathers one result per request.
 *
 * Arrivals are a sorted list, so the runner needs only counters: `arrived`
 * requests are due, `sent` of them have left (the rest wait for a
 * concurrency slot), `done` have finished. One one-shot timer is armed for
 * the next arrival at its absolute time; when it fires, every request whose
 * time has come is released at once, so a late timer catches up instead of
 * shifting the schedule. A scrape of /metrics runs on its own timer, one at
 * a time, on the same client.
 *
 * Memory and loop time follow the requests in flight, not the load point's
 * size: a request is made (an opened workload's spec, then its prompt) and
 * handed to the client (its body written, a curl handle taken) only when
 * it is due and the client has room to start it — a few wait in the
 * client's queue (PROBE_CLIENT_QUEUE_AHEAD), the rest are a counter — at
 * most PROBE_RUN_MAX_IN_FLIGHT are in flight, and the results grow with
 * the requests sent. A burst of a million requests costs what its first
 * few thousand do. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "prom.h"
#include "run.h"
#include "time-util.h"

#define METRICS_MAX_BYTES (8u * 1024u * 1024u)

struct probe_run {
	sd_event *event;
	struct probe_client *client;
	struct probe_workload *w; /* opened: read as it is sent */
	struct probe_run_config cfg;
	probe_run_done_fn done_fn;
	void *userdata;

	sd_event_source *arrival_timer, *metrics_timer, *done_defer;
	bool warmup;                        /* phase */
	size_t first, end;                  /* the phase's requests: w's [first, end) */
	size_t n_warm;                      /* w's warm-up requests, the first ones */
	uint32_t index0;                    /* the first request's index: results are placed by index */
	size_t arrived, sent, done, failed; /* counts within the phase */
	uint64_t handed;                    /* requests the client took, both phases */
	uint32_t in_flight;
	uint64_t t0_usec, end_usec, base_arrival_usec;
	uint64_t pause_usec;   /* the schedule's shift: time spent stopped and resumed */
	uint64_t stopped_usec; /* when the sending stopped (0: it did not) */
	size_t full_end;       /* the phase's end before a stop */
	bool finished, completing;

	struct probe_request_result *results; /* measured requests, by place in send order */
	size_t n_results;                     /* the phase's (the requests sent, once it stopped) */
	size_t results_cap;                   /* slots allocated: at least the requests sent */
	/* the client's own lateness: how long after it was due each measured
	 * request of an open loop was handed to the client (ms) */
	double *lag_ms;
	size_t n_lag, lag_cap;

	/* server metrics */
	int scrape_tag; /* its address is the userdata of our GETs */
	bool scraping, scrape_in_flight;
	bool scrape_due; /* a tick came while the last scrape was out: ask again when it answers */
	struct probe_prom_acc acc;
};

void probe_run_config_init(struct probe_run_config *cfg)
{
	*cfg = (struct probe_run_config){
		.metrics_path = "/metrics",
		.metrics_interval_usec = 500 * USEC_PER_MSEC, /* 2 Hz: a short point still gets its samples */
	};
}

static void on_stream_done(struct probe_client *c, struct probe_request_result *r, void *userdata);
static int start_phase(struct probe_run *run, bool warmup);

static int on_done_defer(sd_event_source *s, void *userdata)
{
	struct probe_run *run = userdata;

	(void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
	run->done_fn(run, run->userdata);
	return 0;
}

static void finish(struct probe_run *run)
{
	int r;

	run->finished = true;
	run->end_usec = mono_usec();
	run->scraping = false;
	(void)sd_event_source_set_enabled(run->metrics_timer, SD_EVENT_OFF);
	probe_client_cancel(run->client, &run->scrape_tag);
	r = sd_event_add_defer(run->event, &run->done_defer, on_done_defer, run);
	if (r < 0) /* cannot defer: call now rather than never */
		run->done_fn(run, run->userdata);
	else
		(void)sd_event_source_set_description(run->done_defer, "probe-run-done");
}

static void record(struct probe_run *run, struct probe_request_result *r, size_t pos)
{
	if (!r->success)
		run->failed++;
	if (run->warmup) {
		probe_request_result_done(r);
		return;
	}
	run->results[pos - run->first] = *r;
	*r = (struct probe_request_result){ 0 };
	if (run->cfg.on_request)
		run->cfg.on_request(run, pos - run->first, &run->results[pos - run->first], run->userdata);
}

/* Whether one more request may go to the client: the concurrency limit,
 * the cap on requests in flight, and room in the client's start queue. */
static bool may_send(const struct probe_run *run)
{
	if (run->cfg.max_concurrency > 0 && run->in_flight >= run->cfg.max_concurrency)
		return false;
	if (run->in_flight >= (run->cfg.max_in_flight > 0 ? MIN(run->cfg.max_in_flight, PROBE_RUN_MAX_IN_FLIGHT)
							  : PROBE_RUN_MAX_IN_FLIGHT))
		return false;
	return probe_client_queued(run->client) < PROBE_CLIENT_QUEUE_AHEAD;
}

/* Sends what is due and allowed (may_send). */
static void dispatch(struct probe_run *run)
{
	while (run->sent < run->arrived && may_send(run)) {
		struct probe_request_spec spec;
		int r;

		/* a slot for its result (the measured phase's results grow with the requests sent) */
		if (!run->warmup && ARRAY_GROW(run->results, run->results_cap, run->sent) < 0) {
			probe_run_stop_sending(run);
			return;
		}
		/* made now, when it is sent (an opened workload holds none ahead) */
		r = probe_workload_request(run->w, run->first + run->sent, &spec);
		if (r < 0) {
			probe_run_stop_sending(run);
			return;
		}
		run->sent++;
		r = probe_client_send(run->client, run->w, &spec, on_stream_done, run);
		if (r < 0) {
			struct probe_request_result res = {
				.index = spec.index,
				.send_usec = mono_usec(),
				.input_tokens = spec.input_len,
				.prompt_len = spec.input_len,
			};

			if (asprintf(&res.error, "could not send: %s", strerror(-r)) < 0)
				res.error = NULL;
			record(run, &res, run->first + run->sent - 1);
			run->done++;
			continue;
		}
		run->handed++;
		run->in_flight++;
	}
}

static void on_client_room(struct probe_client *c, void *userdata)
{
	struct probe_run *run = userdata;

	if (!run->finished && !run->completing)
		dispatch(run);
}

static void phase_complete(struct probe_run *run)
{
	run->completing = true;
	if (run->warmup && start_phase(run, false) >= 0) {
		run->completing = false;
		return;
	}
	finish(run);
}

static void on_stream_done(struct probe_client *c, struct probe_request_result *r, void *userdata)
{
	struct probe_run *run = userdata;
	size_t pos = run->first;

	/* Results come back by index; requests are laid out in index order. */
	if (r->index >= run->index0)
		pos = r->index - run->index0;
	run->in_flight--;
	run->done++;
	record(run, r, pos);
	probe_request_result_done(r);
	dispatch(run);
	if (run->done == run->end - run->first && !run->finished && !run->completing)
		phase_complete(run);
}

/* When the phase's request i is due: its arrival, read ahead of the
 * requests (i only grows, but for a step back when a stopped sending is
 * taken up again). */
static uint64_t due_usec(const struct probe_run *run, size_t i)
{
	return run->t0_usec + run->pause_usec +
	       (probe_workload_arrival(run->w, run->first + i) - run->base_arrival_usec);
}

static int on_arrival(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct probe_run *run = userdata;
	size_t n = run->end - run->first;
	uint64_t now = mono_usec();

	while (run->arrived < n && due_usec(run, run->arrived) <= now) {
		/* late past its due time only when the loop was: a closed loop's
		 * requests (and those of a burst, all due at once) wait for slots
		 * or for their turn, not for a late timer */
		if (!run->warmup && run->cfg.max_concurrency == 0 && run->w->config.arrival != PROBE_ARRIVAL_INF &&
		    ARRAY_GROW(run->lag_ms, run->lag_cap, run->n_lag) >= 0)
			run->lag_ms[run->n_lag++] = usec_to_ms(now - due_usec(run, run->arrived));
		run->arrived++;
	}
	dispatch(run);
	n = run->end - run->first; /* a request that failed at once may have stopped the sending */
	if (run->finished || run->completing)
		return 0;
	if (run->arrived < n) {
		(void)sd_event_source_set_time(s, due_usec(run, run->arrived));
		(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	}
	if (run->done == n)
		phase_complete(run);
	return 0;
}

/* ---- /metrics ---- */

static void scrape(struct probe_run *run);

static void on_metrics(struct probe_client *c, int r, long status, const char *body, size_t len, const char *error,
		       void *userdata)
{
	struct probe_run *run = (struct probe_run *)((char *)userdata - offsetof(struct probe_run, scrape_tag));
	struct probe_prom_sample sample;

	run->scrape_in_flight = false;
	if (r >= 0 && status < 500 && status != 200) {
		/* No /metrics here (404, 501 without --metrics): stop asking; present stays false. */
		run->scraping = false;
		return;
	}
	/* 5xx, a timeout: slow or busy (llama.cpp answers between decode steps): the next one may come */
	if (r >= 0 && status == 200) {
		if (probe_metrics_parse(body, len, run->cfg.metrics_map, &sample, NULL) < 0) {
			run->scraping = false;
			return;
		}
		probe_prom_acc_add(&run->acc, &sample);
	}
	/* the cadence's tick came while this one was out (a CPU engine's step
	 * of a second): ask again now rather than at the next tick, so that a
	 * point keeps as close to the cadence as the engine answers */
	if (run->scrape_due)
		scrape(run);
}

/* One GET of /metrics at a time: a second would wait behind the first in
 * the engine (and take one of llama.cpp's few HTTP threads from a request). */
static void scrape(struct probe_run *run)
{
	run->scrape_due = false;
	if (!run->scraping)
		return;
	if (run->scrape_in_flight) {
		run->scrape_due = true;
		return;
	}
	/* an engine answers /metrics between its steps, which on a CPU take
	 * seconds: a scrape may wait that long */
	if (probe_client_get(run->client, run->cfg.metrics_path, METRICS_MAX_BYTES, 30 * USEC_PER_SEC, on_metrics,
			     &run->scrape_tag) >= 0)
		run->scrape_in_flight = true;
}

static int on_metrics_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct probe_run *run = userdata;

	if (!run->scraping)
		return 0;
	scrape(run);
	(void)sd_event_source_set_time(s, usec + run->cfg.metrics_interval_usec);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

/* ---- phases ---- */

static int start_phase(struct probe_run *run, bool warmup)
{
	int r;

	run->warmup = warmup;
	run->first = warmup ? 0 : run->n_warm;
	run->end = warmup ? run->n_warm : run->w->n_requests;
	run->arrived = run->sent = run->done = run->failed = 0;
	run->pause_usec = run->stopped_usec = 0;
	run->t0_usec = mono_usec();
	if (run->end == run->first)
		return -ENOENT; /* an empty phase: the caller moves on */
	run->base_arrival_usec = probe_workload_arrival(run->w, run->first);
	if (warmup)
		run->arrived = run->end - run->first; /* all at once */
	else if (run->cfg.metrics_path && run->cfg.metrics_interval_usec > 0) {
		run->scraping = true;
		r = sd_event_add_time(run->event, &run->metrics_timer, CLOCK_MONOTONIC, run->t0_usec, 1000,
				      on_metrics_timer, run);
		if (r < 0)
			return r;
		(void)sd_event_source_set_description(run->metrics_timer, "probe-run-metrics");
	}
	if (!run->arrival_timer) {
		r = sd_event_add_time(run->event, &run->arrival_timer, CLOCK_MONOTONIC, run->t0_usec, 1, on_arrival,
				      run);
		if (r < 0)
			return r;
		(void)sd_event_source_set_description(run->arrival_timer, "probe-run-arrivals");
	} else {
		r = sd_event_source_set_time(run->arrival_timer, run->t0_usec);
		if (r >= 0)
			r = sd_event_source_set_enabled(run->arrival_timer, SD_EVENT_ONESHOT);
		if (r < 0)
			return r;
	}
	return 0;
}

int probe_run_start(sd_event *e, struct probe_client *c, struct probe_workload *w, const struct probe_run_config *cfg,
		    probe_run_done_fn done, void *userdata, struct probe_run **ret)
{
	struct probe_run *run;
	size_t n_warm = 0;
	int r;

	/* results are placed by index: a laid-out workload's must follow on
	 * (an opened one's do), and its warm-ups are those marked so */
	if (w->requests) {
		for (size_t i = 0; i < w->n_requests; i++)
			if (w->requests[i].index != w->requests[0].index + i)
				return -EINVAL;
		while (n_warm < w->n_requests && w->requests[n_warm].warmup)
			n_warm++;
	} else
		n_warm = MIN((size_t)w->config.num_warmup, w->n_requests);
	run = calloc(1, sizeof(*run));
	if (!run)
		return -ENOMEM;
	run->event = sd_event_ref(e);
	run->client = c;
	run->w = w;
	run->cfg = *cfg;
	run->done_fn = done;
	run->userdata = userdata;
	probe_prom_acc_init(&run->acc);
	run->n_warm = n_warm;
	run->index0 = w->requests && w->n_requests ? w->requests[0].index : 0;
	run->n_results = w->n_requests - n_warm;
	if (ARRAY_GROW(run->results, run->results_cap, 0) < 0) {
		probe_run_free(run);
		return -ENOMEM;
	}
	probe_client_set_room_fn(c, on_client_room, run);
	r = start_phase(run, true);
	if (r == -ENOENT)
		r = start_phase(run, false);
	if (r == -ENOENT) { /* nothing to send at all */
		run->t0_usec = mono_usec();
		finish(run);
		r = 0;
	}
	if (r < 0) {
		probe_run_free(run);
		return r;
	}
	*ret = run;
	return 0;
}

struct probe_run *probe_run_free(struct probe_run *run)
{
	if (!run)
		return NULL;
	if (run->client) {
		probe_client_set_room_fn(run->client, NULL, NULL);
		probe_client_cancel(run->client, run);
		probe_client_cancel(run->client, &run->scrape_tag);
	}
	sd_event_source_disable_unref(run->arrival_timer);
	free(run->lag_ms);
	sd_event_source_disable_unref(run->metrics_timer);
	sd_event_source_disable_unref(run->done_defer);
	for (size_t i = 0; i < MIN(run->n_results, run->results_cap) && run->results; i++)
		probe_request_result_done(&run->results[i]);
	free(run->results);
	sd_event_unref(run->event);
	free(run);
	return NULL;
}

void probe_run_stop_sending(struct probe_run *run)
{
	if (run->warmup || run->finished || run->sent == run->end - run->first)
		return;
	/* the unsent requests were never part of the load point */
	run->full_end = run->end;
	run->end = run->first + run->sent;
	run->arrived = run->sent;
	run->n_results = run->sent;
	run->stopped_usec = mono_usec();
	(void)sd_event_source_set_enabled(run->arrival_timer, SD_EVENT_OFF);
	if (run->done == run->sent && !run->completing)
		phase_complete(run);
}

int probe_run_resume_sending(struct probe_run *run)
{
	uint64_t now = mono_usec();
	int r;

	if (run->warmup || run->finished || run->completing || run->stopped_usec == 0)
		return -ESTALE;
	run->end = run->full_end;
	run->n_results = run->end - run->first;
	/* the rest of the schedule moves by the pause, its gaps kept */
	run->pause_usec += now - run->stopped_usec;
	run->stopped_usec = 0;
	r = sd_event_source_set_time(run->arrival_timer, due_usec(run, run->arrived));
	if (r >= 0)
		r = sd_event_source_set_enabled(run->arrival_timer, SD_EVENT_ONESHOT);
	return r;
}

bool probe_run_finished(const struct probe_run *run)
{
	return run->finished;
}

void probe_run_get_progress(const struct probe_run *run, struct probe_run_progress *ret)
{
	*ret = (struct probe_run_progress){
		.warmup = run->warmup,
		.total = (uint32_t)(run->end - run->first),
		.sent = (uint32_t)run->sent,
		.done = (uint32_t)run->done,
		.failed = (uint32_t)run->failed,
		.elapsed_usec = (run->finished ? run->end_usec : mono_usec()) - run->t0_usec,
	};
}

size_t probe_run_cut(struct probe_run *run, uint64_t ttft_usec, uint64_t tpot_usec)
{
	if (run->finished || run->warmup)
		return 0;
	return probe_client_cut_streams(run->client, run, mono_usec(), ttft_usec, tpot_usec);
}

uint64_t probe_run_requests_sent(const struct probe_run *run)
{
	return run->handed;
}

const struct probe_request_result *probe_run_results(const struct probe_run *run, size_t *ret_n)
{
	*ret_n = run->results ? MIN(run->n_results, run->results_cap) : 0;
	return run->results;
}

double probe_run_duration_s(const struct probe_run *run)
{
	uint64_t d = run->end_usec > run->t0_usec ? run->end_usec - run->t0_usec : 0;

	return MAX(usec_to_sec(d), 1e-6);
}

double probe_run_client_lag_ms(struct probe_run *run, double pct)
{
	if (run->n_lag == 0)
		return NAN;
	return probe_percentile_select(run->lag_ms, run->n_lag, pct);
}

void probe_run_server_metrics(const struct probe_run *run, struct probe_server_metrics *ret)
{
	probe_prom_acc_result(&run->acc, ret);
}

struct probe_request_result *probe_run_steal_results(struct probe_run *run, size_t *ret_n)
{
	*ret_n = run->results ? MIN(run->n_results, run->results_cap) : 0;
	run->n_results = run->results_cap = 0;
	return TAKE_PTR(run->results);
}
