/* probe.h — a whole probe: warm-up, then one load point or a search for the
 * largest request rate that meets the SLA, on the caller's sd-event loop.
 *
 * Used by `goodput probe` and by the tuner. The probe owns its client and
 * its load points; it reports progress and every finished load point
 * through an event callback and ends with a done callback (deferred, so the
 * callee may free the probe there).
 *
 * find-max-rate: a saturation run (every request at once, or closed loop at
 * max_concurrency) measures the rate the server completes requests at; the
 * search (probes/ratesearch.h) then looks below it for the largest rate whose
 * load point meets the SLA with confidence, stopping when the bracket is
 * within rate_tolerance (relative). Each load point of the search keeps
 * sending until its verdict is sure (sequential.h: met or missed at the
 * stated confidence, or undecided at max_point_requests), so its length
 * follows from the decision; fixed_count sends num_prompts at every point
 * instead, judged afterwards. The points share one arrival sequence and one
 * set of lengths (the workload's seed), scaled to each rate, so that they
 * differ only in rate; each sends other prompt ids (a prompt variant) so
 * that a prefix cache does not flatter later points. Each point reports the
 * rate it asked for and the rate actually sent (offered_rate). Warm-up
 * requests are sent once, before the first load point.
 *
 * A sweep (sweep_rates): a fixed list of rates, one load point of
 * num_prompts requests at each in turn, judged afterwards — a latency–
 * throughput curve; its best point is the one of highest goodput that met
 * the SLA.
 *
 * A server that fails requests is told apart from one that is too slow: the
 * search stops at a load point where every request failed, and a search
 * that never met the SLA is put down to failures when, at the lowest rate
 * tried, the requests that completed would have met it on their own.
 *
 * Bounded in time: a point of the search, its saturation run included,
 * takes max_point_seconds at most, the probe max_seconds at most (see
 * probe_config). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "client.h"
#include "macro.h"
#include "metrics.h"
#include "run.h"
#include "workload.h"

/* Rates of one sweep at most. */
#define PROBE_SWEEP_MAX 16

struct probe_config {
	struct probe_client_config client;
	struct probe_workload_config workload; /* rate/arrival/concurrency of a single load point */
	struct probe_sla sla;
	double percentiles[PROBE_MAX_PERCENTILES];
	size_t n_percentiles;        /* 0: 50, 90, 99 */
	struct probe_run_config run; /* max_concurrency is taken from workload */
	bool find_max_rate;
	double rate_tolerance;    /* relative bracket width; default 0.05 */
	uint32_t max_load_points; /* finite-rate points before the search gives up; default 12 */
	/* Bounds of the search in requests/s (0: none). max_rate caps the rates
	 * tried below the saturation throughput (the saturation run then does
	 * not count as passing: the answer is a measured rate <= max_rate);
	 * min_rate raises the lowest useful rate (1/64 of the saturation
	 * throughput otherwise): a server that cannot complete min_rate at
	 * saturation, or fails the SLA there, never meets it. */
	double min_rate, max_rate;
	/* The verdict of each load point of the search: sequential (the
	 * default) up to max_point_requests (0: 4 × num_prompts) at confidence
	 * (0: 0.95), or fixed_count: num_prompts each, judged afterwards. */
	bool fixed_count;
	uint32_t max_point_requests;
	double confidence;
	/* Bounds in time (0: none). A load point of the search (or a single
	 * one) ends by max_point_seconds, its cap: it stops sending a grace
	 * before it (a quarter of the cap, at least 10 s, at most half the
	 * cap), and what is still in flight at the cap is cut (counted not
	 * good); its verdict is then what was measured (metrics.h: at the cap).
	 * The saturation run sends everything at once and is cut at the cap:
	 * its throughput is what completed by then. The probe as a whole has
	 * max_seconds: each point is capped to what is left, and once too
	 * little is left for a point the search ends with its best sure pass,
	 * at the precision its bracket has (outcome.out_of_time). */
	double max_point_seconds, max_seconds;
	/* A sweep instead (find_max_rate false): a load point at each of these
	 * rates in turn, num_prompts requests each; n_sweep 0: none. */
	uint32_t n_sweep;
	double sweep_rates[PROBE_SWEEP_MAX];
};

void probe_config_init(struct probe_config *cfg);

/* The sweet spot of a sweep's load points: the one of highest goodput that
 * met the SLA; SIZE_MAX when none did. */
size_t probe_sweep_best(const struct probe_result *const *pts, size_t n);

struct probe_load_point {
	bool saturation; /* the saturation run of a search */
	struct probe_result result;
	struct probe_request_result *requests; /* measured requests, owned */
	size_t n_requests;
};

enum probe_search_outcome {
	PROBE_SEARCH_NONE,          /* a single load point or a sweep was asked for */
	PROBE_SEARCH_FOUND,         /* max_rate meets the SLA, a slightly higher rate does not */
	PROBE_SEARCH_NEVER_MET,     /* even the lowest rate tried missed the SLA */
	PROBE_SEARCH_CLIENT_LIMIT,  /* the SLA held even at saturation: the server outran the load */
	PROBE_SEARCH_SERVER_FAILED, /* requests failed: every one at a load point, or at the lowest
	                             * rate tried more than the SLA allows while the rest met it */
};

const char *probe_search_outcome_name(enum probe_search_outcome o);

struct probe_outcome {
	enum probe_search_outcome search;
	double max_rate;               /* requests/s meeting the SLA (0 when none) */
	double saturation_rate;        /* completed requests/s at saturation */
	size_t best_point;             /* index of the load point at max_rate, or SIZE_MAX */
	size_t failed_point;           /* SERVER_FAILED: the load point that shows it, else SIZE_MAX */
	unsigned redone_points;        /* load points run again because the client itself lagged (p95 of its
	                           * requests sent over 20 ms late; at most twice each) */
	uint64_t redone_requests;      /* the requests those discarded runs sent: the server got them,
	                           * no load point counts them */
	const char *why;               /* the search's last word ("bracket within tolerance"); NULL */
	bool budget_spent;             /* the answer came because max_load_points ran out */
	bool out_of_time;              /* ... or because max_seconds did: the search ended early */
	double bracket_lo, bracket_hi; /* where the max rate lies by the search's points (0 / INFINITY: open) */
	double met_above;              /* a higher rate that met the SLA although one between failed; 0 */
	double failed_below;           /* a lower rate that failed although max_rate met it; 0 */
};

enum probe_event_kind {
	PROBE_EVENT_LOAD_POINT_START, /* rate, load_point, saturation */
	PROBE_EVENT_PROGRESS,         /* progress (about twice a second) */
	PROBE_EVENT_LOAD_POINT_DONE,  /* point */
};

struct probe_event {
	enum probe_event_kind kind;
	size_t load_point; /* 0-based */
	double rate;       /* offered rate; INFINITY for all at once */
	bool saturation;
	struct probe_run_progress progress;
	uint32_t good; /* PROGRESS: measured requests of the point good under the SLA so far */
	const struct probe_load_point *point;
};

struct probe;

typedef void (*probe_event_fn)(struct probe *p, const struct probe_event *ev, void *userdata);
/* r < 0: the probe could not run (err text from probe_error()). */
typedef void (*probe_done_fn)(struct probe *p, int r, void *userdata);

/* Checks cfg and creates the client; err names what is wrong. The client's
 * strings are copied; cfg->workload.dataset_path must outlive the probe. */
int probe_new(sd_event *e, const struct probe_config *cfg, struct probe **ret, struct error *err);
/* Starts; callbacks come from the loop. */
int probe_start(struct probe *p, probe_event_fn on_event, probe_done_fn on_done, void *userdata);
struct probe *probe_free(struct probe *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct probe *, probe_free)

const struct probe_load_point *probe_load_points(const struct probe *p, size_t *ret_n);
void probe_get_outcome(const struct probe *p, struct probe_outcome *ret);
const char *probe_error(const struct probe *p);
