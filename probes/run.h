/* run.h — one load point: a workload's requests sent on schedule through a
 * probe_client, every result collected, the server's /metrics scraped.
 *
 * Warm-up requests (spec.warmup) go first, all at once within the
 * concurrency limit, and are waited for; they are not part of the results.
 * Then the measured requests are sent at absolute times t0 + arrival_usec
 * (one sd-event timer, accuracy 1 µs, catching up when late), each waiting
 * for a free slot when max_concurrency is set (vLLM's semaphore: closed loop
 * when every arrival is 0). The send time of a request is when it leaves,
 * not when it was due. At most PROBE_RUN_MAX_IN_FLIGHT requests are in
 * flight at once, whatever the load asks for: the rest of a burst (every
 * request at once) waits for one to end, as a client out of connections
 * would; no engine batches that many sequences.
 *
 * A caller that judges the load point as it goes (sequential.h) hears of
 * each measured request as it ends and may stop the sending early
 * (probe_run_stop_sending): the requests in flight then finish, and the
 * load point's results are the requests sent — unless the caller, having
 * heard them, takes the sending up again (probe_run_resume_sending).
 * At a load point's cap the caller may also end requests still in flight
 * that can no longer be good (probe_run_cut), so that a server's queue
 * does not hold the point past its cap.
 *
 * Every measured request ends with a result, failed or not. The wall time
 * runs from the measured phase's start to the last completion. The run
 * never blocks the loop; its done callback comes from a deferred event
 * source, so the callee may free the run (and the client) there. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "client.h"
#include "macro.h"
#include "metrics.h"
#include "prom-map.h"
#include "workload.h"

struct probe_run;

#define PROBE_RUN_MAX_IN_FLIGHT 4000u

/* A measured request ended: pos is its place in send order (0-based), r is
 * borrowed for the call. */
typedef void (*probe_run_request_fn)(struct probe_run *run, size_t pos, const struct probe_request_result *r,
				     void *userdata);

struct probe_run_config {
	uint32_t max_concurrency;        /* 0 = no limit */
	probe_run_request_fn on_request; /* NULL = none; called with the run's userdata */
	const char *metrics_path;        /* "/metrics"; NULL = do not scrape */
	/* which metrics mean what (an engine profile's); NULL = the default map.
	 * Borrowed: it must outlive the run. */
	const struct probe_metrics_map *metrics_map;
	uint64_t metrics_interval_usec; /* default 0.5 s */
	uint32_t max_in_flight;         /* 0 = PROBE_RUN_MAX_IN_FLIGHT (a lower cap, for tests) */
};

void probe_run_config_init(struct probe_run_config *cfg);

struct probe_run_progress {
	bool warmup;    /* still in the warm-up phase */
	uint32_t total; /* requests of the current phase (at most, when it may stop early) */
	uint32_t sent, done, failed;
	uint64_t elapsed_usec; /* since the current phase began */
};

typedef void (*probe_run_done_fn)(struct probe_run *run, void *userdata);

/* Starts sending w's requests through c on e. w must outlive the run; an
 * opened workload (probe_workload_open) is read by the run alone, each
 * request made when it is sent. */
int probe_run_start(sd_event *e, struct probe_client *c, struct probe_workload *w, const struct probe_run_config *cfg,
		    probe_run_done_fn done, void *userdata, struct probe_run **ret);
/* Cancels what is in flight (no callback) and frees everything. */
struct probe_run *probe_run_free(struct probe_run *run);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct probe_run *, probe_run_free)

/* Sends no more measured requests: the run ends when those in flight have,
 * and its results are the requests sent. No effect during the warm-up or
 * once everything was sent. */
void probe_run_stop_sending(struct probe_run *run);
/* Takes the sending up again where it stopped, the rest of the schedule
 * moved by the pause. Only before the run ended, i.e. from the on_request
 * call of the last request in flight (or earlier); -ESTALE otherwise. */
int probe_run_resume_sending(struct probe_run *run);

/* Ends the measured requests in flight that can no longer meet per-request
 * bounds ttft_usec and tpot_usec (probe_client_cut_streams; 0, 0: every
 * one): each closes its connection and ends as a result with cut set.
 * Returns how many. */
size_t probe_run_cut(struct probe_run *run, uint64_t ttft_usec, uint64_t tpot_usec);

bool probe_run_finished(const struct probe_run *run);
void probe_run_get_progress(const struct probe_run *run, struct probe_run_progress *ret);
/* The requests the client took from this run so far, warm-up included (a
 * send that failed at once never reached the server and is not counted). */
uint64_t probe_run_requests_sent(const struct probe_run *run);

/* After the done callback: the measured requests' results (in workload
 * order, still owned by the run), the wall time and the server figures. */
const struct probe_request_result *probe_run_results(const struct probe_run *run, size_t *ret_n);
double probe_run_duration_s(const struct probe_run *run);
/* How late the client itself sent the measured requests of an open loop:
 * the pct percentile of (handed to the client − due) over them, in ms; NAN
 * for a closed loop or a burst (requests wait for slots or their turn, not
 * for the client). A loop
 * starved of CPU — by probes of trials side by side, say — shows here. */
double probe_run_client_lag_ms(struct probe_run *run, double pct);
void probe_run_server_metrics(const struct probe_run *run, struct probe_server_metrics *ret);
/* Hands the results array over to the caller (free each with
 * probe_request_result_done, then the array). */
struct probe_request_result *probe_run_steal_results(struct probe_run *run, size_t *ret_n);
