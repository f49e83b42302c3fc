/* probe.c — the probe driver: a sequence of load points on one client.
 *
 * Each load point opens its workload from the same config and seed (the
 * same lengths and arrival sequence, scaled to the rate the search asks
 * for; other prompt ids at each point; each request made when it is sent,
 * so a point of a million requests holds those in flight), runs it with
 * probe_run, and
 * turns the results into a probe_result. A point of the search judges its
 * requests as they come back (sequential.h) and stops sending once its
 * verdict is sure. The search decides the next rate from the points so far.
 *
 * The search itself is probes/ratesearch.h, a pure function of the points
 * so far: the driver summarises each load point for it, asks what to do
 * next (measure a rate with so many requests, or stop with an answer), and
 * runs that. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "probe.h"
#include "ratesearch.h"
#include "sequential.h"
#include "time-util.h"

#define PROGRESS_INTERVAL_USEC (500 * USEC_PER_MSEC)
/* A load point whose own client sent its requests this late (p95; at slow
 * rates a twentieth of the mean gap between arrivals) measured a starved
 * client, not the server: it is run again, at most twice, while the probe's
 * time allows a point more. */
#define LAG_REDO_MS  20.0
#define LAG_REDO_MAX 2

struct probe {
	sd_event *event;
	struct probe_config cfg;
	struct probe_client *client;
	probe_event_fn on_event;
	probe_done_fn on_done;
	void *userdata;

	struct probe_workload *workload; /* of the current point */
	struct probe_run *run;
	sd_event_source *progress_timer, *done_defer, *cap_timer, *cut_timer;
	uint64_t start_usec;   /* the probe's start, for max_seconds */
	bool cur_capped;       /* the current point's time ran out: it sends no more */
	double cur_cap_s;      /* the current point's time cap, s (0: none) */
	uint64_t cut_all_usec; /* at the cap: when what is still in flight is cut whatever it is (0: never) */
	double cur_rate;
	bool cur_saturation;
	unsigned cur_redone;         /* times the current point was run again */
	struct probe_sequential seq; /* the current point's verdict, when seq_active */
	bool seq_active, seq_stopped;
	uint32_t cur_good; /* measured requests of the current point good so far */

	struct probe_load_point *points;
	size_t n_points;

	struct probe_ratesearch_config search;
	uint32_t next_num_prompts; /* what the search asked for */
	struct probe_outcome outcome;
	char why[128]; /* outcome.why when the probe words it itself */
	int result;
	struct error err;
};

void probe_config_init(struct probe_config *cfg)
{
	*cfg = (struct probe_config){
		.rate_tolerance = 0.05,
		.max_load_points = 12,
	};
	probe_client_config_init(&cfg->client);
	probe_workload_config_init(&cfg->workload);
	probe_run_config_init(&cfg->run);
}

size_t probe_sweep_best(const struct probe_result *const *pts, size_t n)
{
	size_t best = SIZE_MAX;

	for (size_t i = 0; i < n; i++)
		if (pts[i]->sla_met &&
		    (best == SIZE_MAX || pts[i]->good_output_throughput > pts[best]->good_output_throughput))
			best = i;
	return best;
}

const char *probe_search_outcome_name(enum probe_search_outcome o)
{
	switch (o) {
	case PROBE_SEARCH_NONE:
		return "none";
	case PROBE_SEARCH_FOUND:
		return "found";
	case PROBE_SEARCH_NEVER_MET:
		return "never_met";
	case PROBE_SEARCH_CLIENT_LIMIT:
		return "client_limit";
	case PROBE_SEARCH_SERVER_FAILED:
		return "server_failed";
	}
	return "unknown";
}

int probe_new(sd_event *e, const struct probe_config *cfg, struct probe **ret, struct error *err)
{
	_cleanup_(probe_client_freep) struct probe_client *c = NULL;
	struct probe *p;
	int r;

	if (!(cfg->rate_tolerance > 0 && cfg->rate_tolerance < 1))
		return error_set(err, -EINVAL, "--rate-tolerance: expected a fraction in (0, 1), got %g",
				 cfg->rate_tolerance);
	if (!(cfg->min_rate >= 0) || !(cfg->max_rate >= 0) || (cfg->max_rate > 0 && cfg->min_rate >= cfg->max_rate))
		return error_set(err, -EINVAL,
				 "rate bounds: expected 0 <= min_rate < max_rate (or max_rate 0), got %g and %g",
				 cfg->min_rate, cfg->max_rate);
	if (cfg->workload.num_prompts == 0)
		return error_set(err, -EINVAL, "--num-prompts: expected at least 1, got 0");
	if (cfg->confidence != 0 && !(cfg->confidence >= 0.5 && cfg->confidence < 1))
		return error_set(err, -EINVAL, "confidence: expected a fraction in [0.5, 1), got %g", cfg->confidence);
	if (!(cfg->max_point_seconds >= 0) || !(cfg->max_seconds >= 0))
		return error_set(err, -EINVAL, "time bounds: expected seconds >= 0, got %g and %g",
				 cfg->max_point_seconds, cfg->max_seconds);
	if (cfg->max_point_requests > PROBE_MAX_REQUESTS)
		return error_set(err, -EINVAL, "requests per load point: at most %u, got %u", PROBE_MAX_REQUESTS,
				 cfg->max_point_requests);
	if (cfg->n_sweep > PROBE_SWEEP_MAX || (cfg->n_sweep && cfg->find_max_rate))
		return error_set(err, -EINVAL, "a sweep: at most %u rates, and no rate search with it",
				 PROBE_SWEEP_MAX);
	for (uint32_t i = 0; i < cfg->n_sweep; i++)
		if (!(cfg->sweep_rates[i] > 0) || !isfinite(cfg->sweep_rates[i]))
			return error_set(err, -EINVAL, "sweep rate %u: expected a rate > 0, got %g", i + 1,
					 cfg->sweep_rates[i]);
	if (!cfg->find_max_rate && !cfg->n_sweep && cfg->workload.arrival != PROBE_ARRIVAL_INF &&
	    !(cfg->workload.request_rate > 0))
		return error_set(err, -EINVAL, "--request-rate: expected a rate > 0, got %g",
				 cfg->workload.request_rate);
	r = probe_client_new(e, &cfg->client, &c, err);
	if (r < 0)
		return r;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->event = sd_event_ref(e);
	p->cfg = *cfg;
	p->cfg.client = (struct probe_client_config){ 0 }; /* strings belong to the caller; the client has copies */
	p->client = TAKE_PTR(c);
	p->outcome.best_point = SIZE_MAX;
	p->outcome.failed_point = SIZE_MAX;
	probe_ratesearch_config_init(&p->search);
	p->search.tolerance = cfg->rate_tolerance;
	p->search.num_requests = cfg->workload.num_prompts;
	p->search.max_requests = cfg->max_point_requests > 0 ? cfg->max_point_requests
							     : (uint32_t)MIN(cfg->workload.num_prompts * UINT64_C(4),
									     (uint64_t)PROBE_MAX_REQUESTS);
	p->search.max_points = cfg->max_load_points;
	if (cfg->confidence > 0)
		p->search.confidence = cfg->confidence;
	if (probe_sla_has_request_bounds(&cfg->sla))
		p->search.target = cfg->sla.attainment > 0 ? cfg->sla.attainment : PROBE_SLA_DEFAULT_ATTAINMENT;
	else
		p->search.target = 0; /* percentile bounds only: judged by sla_met */
	/* a verdict on attainment needs a target below 1 to be told apart from */
	p->search.sequential = !cfg->fixed_count && p->search.target > 0 && p->search.target < 1;
	p->next_num_prompts = cfg->workload.num_prompts;
	*ret = p;
	return 0;
}

struct probe *probe_free(struct probe *p)
{
	if (!p)
		return NULL;
	probe_run_free(p->run);
	probe_workload_free(p->workload);
	probe_sequential_done(&p->seq);
	sd_event_source_disable_unref(p->progress_timer);
	sd_event_source_disable_unref(p->done_defer);
	sd_event_source_disable_unref(p->cap_timer);
	sd_event_source_disable_unref(p->cut_timer);
	for (size_t i = 0; i < p->n_points; i++) {
		for (size_t k = 0; k < p->points[i].n_requests; k++)
			probe_request_result_done(&p->points[i].requests[k]);
		free(p->points[i].requests);
	}
	free(p->points);
	probe_client_free(p->client);
	sd_event_unref(p->event);
	free(p);
	return NULL;
}

static int on_done_defer(sd_event_source *s, void *userdata)
{
	struct probe *p = userdata;

	(void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
	p->on_done(p, p->result, p->userdata);
	return 0;
}

static void finish(struct probe *p, int r)
{
	p->result = r;
	(void)sd_event_source_set_enabled(p->progress_timer, SD_EVENT_OFF);
	if (sd_event_add_defer(p->event, &p->done_defer, on_done_defer, p) < 0)
		p->on_done(p, r, p->userdata);
}

static void emit_progress(struct probe *p)
{
	struct probe_event ev = {
		.kind = PROBE_EVENT_PROGRESS,
		.load_point = p->n_points,
		.rate = p->cur_rate,
		.saturation = p->cur_saturation,
		.good = p->cur_good,
	};

	if (!p->run || !p->on_event)
		return;
	probe_run_get_progress(p->run, &ev.progress);
	p->on_event(p, &ev, p->userdata);
}

static int on_progress(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct probe *p = userdata;

	emit_progress(p);
	(void)sd_event_source_set_time(s, usec + PROGRESS_INTERVAL_USEC);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

static void on_run_done(struct probe_run *run, void *userdata);
static void start_cutting(struct probe *p);

/* Each measured request as it ends: counted, and judged by the point's
 * sequential test. A verdict stops the sending (and starts the cut of what
 * can no longer meet the SLA); when the last request in flight is back and
 * the verdict over everything sent no longer holds, the sending goes on. */
static void on_request(struct probe_run *run, size_t pos, const struct probe_request_result *r, void *userdata)
{
	struct probe *p = userdata;
	bool good = probe_request_is_good(r, &p->cfg.sla);
	struct probe_run_progress pr;
	enum probe_verdict v;

	p->cur_good += good;
	if (!p->seq_active || pos > UINT32_MAX)
		return;
	v = probe_sequential_add(&p->seq, (uint32_t)pos, good, r->send_usec);
	if (v != PROBE_VERDICT_NONE && !p->seq_stopped) {
		p->seq_stopped = true;
		probe_run_stop_sending(run);
		start_cutting(p);
		return;
	}
	probe_run_get_progress(run, &pr);
	/* past its time cap a point never sends again */
	if (v == PROBE_VERDICT_NONE && p->seq_stopped && !p->cur_capped && pr.done == pr.sent &&
	    probe_run_resume_sending(run) >= 0)
		p->seq_stopped = false;
}

/* What is left of max_seconds, s (INFINITY without it). */
static double time_left(const struct probe *p)
{
	if (!(p->cfg.max_seconds > 0))
		return INFINITY;
	return p->cfg.max_seconds - (double)(mono_usec() - p->start_usec) / USEC_PER_SEC;
}

/* The time cap of a point of the search: max_point_seconds, at most what is
 * left of max_seconds; 0 for none. */
static double point_cap_seconds(const struct probe *p)
{
	double cap = p->cfg.max_point_seconds > 0 ? p->cfg.max_point_seconds : INFINITY;

	cap = MIN(cap, time_left(p));
	return isfinite(cap) ? MAX(cap, 1.0) : 0;
}

/* The per-request bounds of the SLA, µs (UINT64_MAX: none): TTFT, and the
 * gap per output token (the tighter of TPOT and ITL). Percentile bounds
 * count too: a request over one can only add to the tail. */
static void sla_request_bounds(const struct probe_sla *sla, uint64_t *ret_ttft, uint64_t *ret_tpot)
{
	*ret_ttft = *ret_tpot = UINT64_MAX;
	for (size_t i = 0; i < sla->n_bounds; i++) {
		const struct probe_sla_bound *b = &sla->bounds[i];
		uint64_t usec = (uint64_t)(b->bound_ms * USEC_PER_MSEC);

		if (!(b->bound_ms > 0))
			continue;
		if (b->metric == PROBE_METRIC_TTFT)
			*ret_ttft = MIN(*ret_ttft, usec);
		else if (b->metric == PROBE_METRIC_TPOT || b->metric == PROBE_METRIC_ITL)
			*ret_tpot = MIN(*ret_tpot, usec);
	}
}

/* Once a point stops sending (its time to send is up, or its verdict is
 * sure), every CUT_TICK: requests in flight that can no longer meet the
 * SLA are ended — one still queued in the server past the TTFT bound, or
 * unfinished past TTFT + (max_tokens − 1) × TPOT after its send — closing
 * their connections, so that the server drops them; they count as not
 * good, as they would have. At the cap the rest is cut too: the cap bounds
 * a point's wall time however deep the server's queue.
 *
 * The grace between the end of the sending and the cap lets the requests
 * sent last finish (one still out at the cap counts as not good): a
 * quarter of the cap, at least CUT_GRACE_MIN (a CPU server takes seconds
 * per request), but at most half of the cap, so that a short cap still
 * sends for half its time. */
#define CUT_TICK_USEC      (250 * USEC_PER_MSEC)
#define CUT_GRACE_FRACTION 0.25
#define CUT_GRACE_MIN_S    10.0

/* How long a point of the search capped at cap_s sends: the cap less its
 * grace (above). */
static double sending_seconds(double cap_s)
{
	return cap_s - MIN(MAX(cap_s * CUT_GRACE_FRACTION, CUT_GRACE_MIN_S), cap_s / 2);
}

static int on_cut_tick(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct probe *p = userdata;
	uint64_t ttft, tpot, now = mono_usec();

	if (!p->run || probe_run_finished(p->run))
		return 0;
	sla_request_bounds(&p->cfg.sla, &ttft, &tpot);
	/* the saturation run measures throughput: a request past the SLA's
	 * bounds still counts there, and is cut only at the cap */
	if (p->cur_saturation)
		ttft = tpot = UINT64_MAX;
	if (p->cut_all_usec && now >= p->cut_all_usec)
		ttft = tpot = 0;
	/* the cut's callbacks may end the run (its done callback is deferred) */
	(void)probe_run_cut(p->run, ttft, tpot);
	/* the next tick, the cap's at the latest */
	if (!probe_run_finished(p->run) &&
	    sd_event_source_set_time(s, p->cut_all_usec > now ? MIN(now + CUT_TICK_USEC, p->cut_all_usec)
							      : now + CUT_TICK_USEC) >= 0)
		(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

/* The point stopped sending: the cut starts ticking (once). */
static void start_cutting(struct probe *p)
{
	if (p->cut_timer || !p->run || probe_run_finished(p->run))
		return;
	if (sd_event_add_time_relative(p->event, &p->cut_timer, CLOCK_MONOTONIC, 0, 10 * USEC_PER_MSEC, on_cut_tick,
				       p) >= 0)
		(void)sd_event_source_set_description(p->cut_timer, "probe-point-cut");
}

/* The point's time to send is up (the saturation run's: its cap): no more
 * requests are sent; those in flight come back or are cut (above), at the
 * cap whatever they are, and the verdict is what they all say (at the
 * cap). */
static int on_cap(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct probe *p = userdata;

	p->cur_capped = true;
	if (p->run && !probe_run_finished(p->run)) {
		p->seq_stopped = true;
		probe_run_stop_sending(p->run);
		start_cutting(p);
	}
	return 0;
}

/* Readies the sequential verdict of a point of the search (none for the
 * saturation run or a fixed count). */
static int start_verdict(struct probe *p, bool saturation, uint32_t max_requests)
{
	struct probe_sequential_config sc;

	probe_sequential_done(&p->seq);
	p->seq_active = p->seq_stopped = false;
	if (!p->cfg.find_max_rate || saturation || !p->search.sequential)
		return 0;
	probe_sequential_config_init(&sc, p->search.target, max_requests);
	sc.confidence = p->search.confidence;
	sc.margin = p->search.margin;
	sc.min_requests = MIN(sc.min_requests, max_requests);
	p->seq_active = true;
	return probe_sequential_init(&p->seq, &sc, &p->err);
}

/* Starts a load point at rate (INFINITY: all at once / closed loop). */
static int start_point(struct probe *p, double rate, bool saturation)
{
	struct probe_workload_config wc;
	uint64_t start_usec;
	double send_s;
	int r;

	/* without a search, rate is the workload's own (INFINITY for INF) */
	probe_workload_at_point(&p->cfg.workload, rate, (uint32_t)MIN(p->n_points, (size_t)UINT32_MAX),
				p->cfg.find_max_rate ? p->next_num_prompts : 0, &wc);
	probe_workload_free(p->workload);
	p->workload = NULL;
	/* the cap bounds a point of the search (the saturation run too), or a
	 * single load point: sending stops a grace before it (none for the
	 * saturation run, all at once), and what is still out is cut at it */
	p->cur_cap_s = p->cfg.find_max_rate || p->cfg.n_sweep == 0 ? point_cap_seconds(p) : 0;
	send_s = saturation ? p->cur_cap_s : sending_seconds(p->cur_cap_s);
	/* a capped point of the search draws the arrivals of its time to send:
	 * it sends at the rate asked */
	if (p->cfg.find_max_rate && !saturation && p->cur_cap_s > 0)
		wc.arrival_window_s = send_s;
	/* a rate measured again pools its requests with those before: fresh
	 * arrival draws, not the same gaps once more */
	for (size_t i = 0; p->cfg.find_max_rate && !saturation && i < p->n_points; i++)
		wc.arrival_variant +=
			!p->points[i].saturation && fabs(p->points[i].result.request_rate - rate) <= 1e-9 * rate;
	/* opened, not generated: each request is made when it is sent */
	r = probe_workload_open(&wc, &p->workload, &p->err);
	if (r < 0)
		return r;
	r = start_verdict(p, saturation, wc.num_prompts);
	if (r < 0)
		return r;
	p->cfg.run.max_concurrency = wc.max_concurrency;
	p->cfg.run.on_request = on_request;
	p->cur_rate = wc.arrival == PROBE_ARRIVAL_INF ? INFINITY : wc.request_rate;
	p->cur_saturation = saturation;
	p->cur_good = 0;
	p->cur_capped = false;
	p->cap_timer = sd_event_source_disable_unref(p->cap_timer);
	p->cut_timer = sd_event_source_disable_unref(p->cut_timer);
	start_usec = mono_usec();
	p->cut_all_usec = p->cur_cap_s > 0 ? start_usec + (uint64_t)(p->cur_cap_s * USEC_PER_SEC) : 0;
	r = probe_run_start(p->event, p->client, p->workload, &p->cfg.run, on_run_done, p, &p->run);
	if (r < 0)
		return error_set(&p->err, r, "could not start the load point: %s", strerror(-r));
	if (p->cur_cap_s > 0) {
		r = sd_event_add_time(p->event, &p->cap_timer, CLOCK_MONOTONIC,
				      start_usec + (uint64_t)(send_s * USEC_PER_SEC), 10 * USEC_PER_MSEC, on_cap, p);
		if (r < 0)
			return error_set(&p->err, r, "could not arm the load point's time cap: %s", strerror(-r));
		(void)sd_event_source_set_description(p->cap_timer, "probe-point-cap");
	}
	if (p->on_event) {
		struct probe_event ev = {
			.kind = PROBE_EVENT_LOAD_POINT_START,
			.load_point = p->n_points,
			.rate = p->cur_rate,
			.saturation = saturation,
		};

		p->on_event(p, &ev, p->userdata);
	}
	return 0;
}

/* Asks the rate search what comes next: 1 and *ret_rate to measure, 0 when
 * the search is over (outcome filled in). */
static int search_next(struct probe *p, double *ret_rate)
{
	_cleanup_(freep) struct probe_rate_point *hist = NULL;
	struct probe_ratesearch_step step;
	int r;

	hist = calloc(MAX(p->n_points, (size_t)1), sizeof(*hist));
	if (!hist)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_points; i++) {
		const struct probe_result *res = &p->points[i].result;

		hist[i] = (struct probe_rate_point){
			.rate = p->points[i].saturation ? INFINITY : res->request_rate,
			.n = res->num_prompts,
			.good = (uint32_t)lround(res->attainment * res->num_prompts),
			.sla_met = res->sla_met,
			.throughput = res->request_throughput,
			.verdict = res->verdict,
		};
		/* latency figures that steer the search (ratesearch.h) */
		r = probe_ratesearch_ratios(&p->search, &p->cfg.sla, p->points[i].requests, p->points[i].n_requests,
					    &hist[i]);
		if (r < 0)
			return r;
	}
	if (p->n_points > 0 && p->points[0].saturation && hist[0].throughput > 0) {
		double x_sat = hist[0].throughput;

		if (p->cfg.max_rate > 0 && x_sat > p->cfg.max_rate) {
			/* the cap stands in for the saturation throughput, and the
			 * saturation run (above the cap) proves nothing at or below it */
			x_sat = hist[0].throughput = p->cfg.max_rate;
			for (size_t i = 0; i < p->n_points; i++)
				if (p->points[i].saturation) {
					hist[i].sla_met = false;
					hist[i].good = 0;
				}
		}
		if (p->cfg.min_rate > 0 && p->cfg.min_rate >= x_sat) {
			p->outcome.saturation_rate = hist[0].throughput;
			p->outcome.search = PROBE_SEARCH_NEVER_MET;
			p->outcome.max_rate = 0;
			p->outcome.best_point = SIZE_MAX;
			return 0; /* the server cannot even complete min_rate */
		}
		if (p->cfg.min_rate > 0)
			p->search.min_rate_frac = MAX(p->search.min_rate_frac, p->cfg.min_rate / x_sat);
	}
	/* too little time left for a point that could say anything: the
	 * search answers with what it has (a point needs its sequential
	 * test's minimum time, and a quarter of its own cap) */
	p->search.out_of_time =
		p->n_points > 0 && time_left(p) < MAX(2 * PROBE_SEQUENTIAL_MIN_SECONDS, p->cfg.max_point_seconds / 4);
	r = probe_ratesearch_next(&p->search, hist, p->n_points, &step, &p->err);
	if (r < 0)
		return r;
	p->outcome.saturation_rate = step.saturation;
	switch (step.action) {
	case PROBE_RATESEARCH_MEASURE:
		p->next_num_prompts = step.num_requests;
		*ret_rate = step.rate;
		return 1;
	case PROBE_RATESEARCH_DONE:
		p->outcome.search = PROBE_SEARCH_FOUND;
		break;
	case PROBE_RATESEARCH_ALWAYS:
		p->outcome.search = PROBE_SEARCH_CLIENT_LIMIT;
		break;
	case PROBE_RATESEARCH_NEVER:
		p->outcome.search = PROBE_SEARCH_NEVER_MET;
		break;
	}
	p->outcome.max_rate = step.action == PROBE_RATESEARCH_NEVER ? 0 : step.rate;
	p->outcome.best_point = step.best >= 0 && (size_t)step.best < p->n_points ? (size_t)step.best : SIZE_MAX;
	p->outcome.why = step.why;
	/* a saturation run its cap ended before any request completed: the cap says why */
	if (step.action == PROBE_RATESEARCH_NEVER && p->n_points > 0 && p->points[0].saturation &&
	    p->points[0].result.completed == 0 && p->points[0].result.cap == PROBE_CAP_SECONDS) {
		snprintf(p->why, sizeof(p->why), "the saturation run completed no request within its time cap (%.3g s)",
			 p->cur_cap_s);
		p->outcome.why = p->why;
	}
	p->outcome.budget_spent = step.budget_spent;
	p->outcome.out_of_time = step.out_of_time;
	p->outcome.bracket_lo = step.lo;
	p->outcome.bracket_hi = step.hi;
	p->outcome.met_above = step.met_above;
	p->outcome.failed_below = step.failed_below;
	return 0;
}

static int add_point(struct probe *p, struct probe_run *run)
{
	struct probe_load_point pt = { .saturation = p->cur_saturation };
	struct probe_load_point *a;
	int r;

	a = realloc(p->points, (p->n_points + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	p->points = a;
	pt.requests = probe_run_steal_results(run, &pt.n_requests);
	r = probe_result_compute(pt.requests, pt.n_requests, probe_run_duration_s(run), p->cfg.percentiles,
				 p->cfg.n_percentiles, &p->cfg.sla, &pt.result, &p->err);
	if (r < 0) {
		for (size_t k = 0; k < pt.n_requests; k++)
			probe_request_result_done(&pt.requests[k]);
		free(pt.requests);
		return r;
	}
	pt.result.request_rate = p->cur_rate;
	if (p->seq_active)
		probe_result_set_verdict(&pt.result, probe_sequential_finish(&p->seq), p->seq.judged,
					 p->seq.cfg.confidence, p->cur_capped ? PROBE_CAP_SECONDS : PROBE_CAP_REQUESTS);
	else if (p->cur_capped)
		pt.result.cap = PROBE_CAP_SECONDS; /* a point without a verdict (the saturation run) says it too */
	pt.result.burstiness = p->workload->config.burstiness > 0 ? p->workload->config.burstiness : 1.0;
	pt.result.max_concurrency = p->workload->config.max_concurrency;
	probe_run_server_metrics(run, &pt.result.server);
	p->points[p->n_points++] = pt;
	return 0;
}

/* Whether point i's requests that completed meet the SLA on their own:
 * then what kept the point from meeting it was the requests that failed. */
static bool completed_meet_sla(struct probe *p, size_t i)
{
	const struct probe_load_point *pt = &p->points[i];
	_cleanup_(freep) struct probe_request_result *ok = NULL;
	struct probe_result res;
	struct error err = { 0 };
	size_t n = 0;

	if (pt->result.completed == 0)
		return false;
	ok = calloc(pt->n_requests, sizeof(*ok));
	if (!ok)
		return false;
	/* shallow copies: ok[] borrows the requests' arrays and frees nothing */
	for (size_t k = 0; k < pt->n_requests; k++)
		if (pt->requests[k].success)
			ok[n++] = pt->requests[k];
	return probe_result_compute(ok, n, pt->result.duration_s, p->cfg.percentiles, p->cfg.n_percentiles, &p->cfg.sla,
				    &res, &err) >= 0 &&
	       res.sla_met;
}

/* After a search that never met the SLA: was it the failures? Judged at
 * the lowest finite rate tried (the saturation run when there is none). */
static void blame_failures(struct probe *p)
{
	size_t low = SIZE_MAX;

	for (size_t i = 0; i < p->n_points; i++)
		if (!p->points[i].saturation &&
		    (low == SIZE_MAX || p->points[i].result.request_rate < p->points[low].result.request_rate))
			low = i;
	if (low == SIZE_MAX && p->n_points > 0)
		low = p->n_points - 1;
	if (low != SIZE_MAX && p->points[low].result.failed > 0 && completed_meet_sla(p, low)) {
		p->outcome.search = PROBE_SEARCH_SERVER_FAILED;
		p->outcome.failed_point = low;
	}
}

/* A server that completed nothing at a point is broken, not slow: no rate
 * will do. One whose requests were all cut at the point's cap is slow at
 * that rate. */
static bool server_broken(const struct probe_result *r)
{
	return r->completed == 0 && r->cut == 0;
}

/* A sweep: the next rate, or the end — its best point the one of highest
 * goodput that met the SLA. A point where the server was broken ends it. */
static void sweep_next(struct probe *p)
{
	const struct probe_result *last = &p->points[p->n_points - 1].result;
	int r;

	p->outcome.search = PROBE_SEARCH_NONE;
	if (server_broken(last)) {
		p->outcome.search = PROBE_SEARCH_SERVER_FAILED;
		p->outcome.failed_point = p->n_points - 1;
	} else if (p->n_points < p->cfg.n_sweep) {
		r = start_point(p, p->cfg.sweep_rates[p->n_points], false);
		if (r < 0)
			finish(p, r);
		return;
	}
	{
		const struct probe_result *pts[PROBE_SWEEP_MAX];
		size_t n = MIN(p->n_points, (size_t)PROBE_SWEEP_MAX), best;

		for (size_t i = 0; i < n; i++)
			pts[i] = &p->points[i].result;
		best = probe_sweep_best(pts, n);
		if (best != SIZE_MAX) {
			p->outcome.best_point = best;
			p->outcome.max_rate = pts[best]->request_rate;
		}
	}
	finish(p, 0);
}

static void on_run_done(struct probe_run *run, void *userdata)
{
	struct probe *p = userdata;
	double rate = 0, lag = probe_run_client_lag_ms(run, 95), redo_ms = LAG_REDO_MS;
	int r;

	emit_progress(p);
	p->cap_timer = sd_event_source_disable_unref(p->cap_timer);
	p->cut_timer = sd_event_source_disable_unref(p->cut_timer);
	/* a lag distorts the arrivals when it is a fair part of their gaps: at
	 * a CPU engine's 0.1 req/s (10 s apart) a lag of 100 ms is not a
	 * starved client, and running the point again would spend the trial's
	 * share of the budget on one rate */
	if (isfinite(p->cur_rate) && p->cur_rate > 0)
		redo_ms = MAX(redo_ms, 0.05 * 1000 / p->cur_rate);
	if (isfinite(lag) && lag > redo_ms && p->cur_redone < LAG_REDO_MAX &&
	    time_left(p) >= MAX(p->cfg.max_point_seconds, 2 * PROBE_SEQUENTIAL_MIN_SECONDS)) {
		/* the same point again: the same rate and, with the same point
		 * number, the same requests */
		p->outcome.redone_requests += probe_run_requests_sent(run);
		p->run = probe_run_free(p->run);
		p->cur_redone++;
		p->outcome.redone_points++;
		r = start_point(p, p->cur_rate, p->cur_saturation);
		if (r < 0)
			finish(p, r);
		return;
	}
	p->cur_redone = 0;
	r = add_point(p, run);
	if (r >= 0)
		p->points[p->n_points - 1].result.client_lag_p95_ms = lag;
	p->run = probe_run_free(p->run);
	if (r < 0) {
		finish(p, r);
		return;
	}
	if (p->on_event) {
		struct probe_event ev = {
			.kind = PROBE_EVENT_LOAD_POINT_DONE,
			.load_point = p->n_points - 1,
			.rate = p->cur_rate,
			.saturation = p->cur_saturation,
			.point = &p->points[p->n_points - 1],
		};

		p->on_event(p, &ev, p->userdata);
	}
	if (p->cfg.n_sweep) {
		sweep_next(p);
		return;
	}
	if (!p->cfg.find_max_rate) {
		p->outcome.search = PROBE_SEARCH_NONE;
		p->outcome.best_point = p->points[0].result.sla_met ? 0 : SIZE_MAX;
		p->outcome.max_rate = p->points[0].result.sla_met ? p->points[0].result.request_rate : 0;
		finish(p, 0);
		return;
	}
	if (server_broken(&p->points[p->n_points - 1].result)) {
		p->outcome.search = PROBE_SEARCH_SERVER_FAILED;
		p->outcome.failed_point = p->n_points - 1;
		p->outcome.max_rate = 0;
		p->outcome.best_point = SIZE_MAX;
		finish(p, 0);
		return;
	}
	r = search_next(p, &rate);
	if (r > 0)
		r = start_point(p, rate, isinf(rate));
	else if (r == 0) {
		if (p->outcome.search == PROBE_SEARCH_NEVER_MET)
			blame_failures(p);
		r = -1; /* the search is over */
	}
	if (r < 0)
		finish(p, r == -1 ? 0 : r);
}

int probe_start(struct probe *p, probe_event_fn on_event, probe_done_fn on_done, void *userdata)
{
	int r;

	p->on_event = on_event;
	p->on_done = on_done;
	p->userdata = userdata;
	p->start_usec = mono_usec();
	r = sd_event_add_time(p->event, &p->progress_timer, CLOCK_MONOTONIC, mono_usec() + PROGRESS_INTERVAL_USEC,
			      10 * USEC_PER_MSEC, on_progress, p);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(p->progress_timer, "probe-progress");
	if (p->cfg.find_max_rate) {
		double rate = INFINITY;

		r = search_next(p, &rate);
		if (r < 0)
			return r;
		return start_point(p, rate, isinf(rate));
	}
	if (p->cfg.n_sweep)
		return start_point(p, p->cfg.sweep_rates[0], false);
	return start_point(p, p->cfg.workload.arrival == PROBE_ARRIVAL_INF ? INFINITY : p->cfg.workload.request_rate,
			   false);
}

const struct probe_load_point *probe_load_points(const struct probe *p, size_t *ret_n)
{
	*ret_n = p->n_points;
	return p->points;
}

void probe_get_outcome(const struct probe *p, struct probe_outcome *ret)
{
	*ret = p->outcome;
}

const char *probe_error(const struct probe *p)
{
	return error_str(&p->err, p->result);
}
