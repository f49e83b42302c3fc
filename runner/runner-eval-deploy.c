/* runner-eval-deploy.c — the evaluator of a real server: deploy the
 * configuration, run the operator's quality check (runner-quality.c) once
 * the server is ready, probe the largest load that meets the SLA, and turn
 * the result into an outcome and a cost. Each step commits the trial's new
 * state to the store before acting, and each wait is an event source:
 * nothing here blocks.
 *
 * A server that dies is seen two ways: the deployer's child source (FAILED)
 * and the probe's failed requests. The probe may finish first (connection
 * refused is instant), so a probe that saw failed requests waits a moment
 * for the deployer's verdict before the trial's outcome is decided: a crash
 * then fails only this trial. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cost.h"
#include "deploy.h"
#include "log.h"
#include "ratesearch.h"
#include "runner-internal.h"
#include "runner-probe.h"
#include "runner-quality.h"
#include "time-util.h"

#define SETTLE_USEC       (1 * USEC_PER_SEC)
#define SETTLE_AGAIN_USEC (500 * USEC_PER_MSEC)
/* the longest a verdict is waited for: a scheduler that has not answered
 * by then leaves the failure to the configuration, as before */
#define SETTLE_MAX_USEC (120 * USEC_PER_SEC)

/* What one trial holds while it is measured. */
struct deploy_trial {
	struct deployment *deploy;
	struct runner_roles *roles; /* a disaggregated configuration's servers */
	struct runner_quality *quality;
	struct runner_probe *probe; /* in a process of its own */
	sd_event_source *settle_timer;
	uint64_t settle_until; /* CLOCK_MONOTONIC */
	int probe_result;      /* the probe's result while waiting for the deployer's verdict */
	int record_error;      /* the store refused the server's record: nothing ran, the study cannot go on */
	bool points_failed;    /* some load point had failed requests */
};

static struct deploy_trial *state_of(const struct runner_trial *t)
{
	return t->eval;
}

/* No configuration could have started: the study stops (t may be freed). */
static void fail_setup(struct runner_trial *t, const char *why)
{
	_cleanup_(freep) char *msg = NULL;

	if (asprintf(&msg, "no configuration can start (trial %u, %s): %s", t->seq, t->knobs_text, why) < 0) {
		msg = NULL;
		runner_fail(t->runner, "out of memory");
		return;
	}
	runner_fail_setup(t->runner, msg);
}

/* ---- probing ---- */

/* Where the probe is, for people: "trial 3 load point 2/12: 0.84 req/s,
 * 37/40 good so far". */
static void point_progress(struct runner_trial *t, const struct probe_event *ev, bool ended)
{
	const struct study *s = t->runner->study;
	struct runner_event rev = { 0 };

	rev.point.saturation = ev->saturation;
	rev.point.ended = ended;
	rev.point.sweep = t->proposal.sweep;
	if (t->proposal.sweep) {
		/* a sweep's points are known: all of them */
		double rates[RUNNER_SWEEP_STEPS];

		rev.point.index = (unsigned)ev->load_point + 1;
		rev.point.max = (unsigned)runner_sweep_rates(&t->proposal, rates);
	} else {
		rev.point.index = (unsigned)ev->load_point; /* the saturation run is point 0 */
		rev.point.max = s->probe.max_steps ? s->probe.max_steps : 12;
	}
	rev.point.rate = ev->rate;
	if (ended) {
		const struct probe_result *r = &ev->point->result;

		rev.point.done = r->num_prompts;
		rev.point.good = (unsigned)lround(r->attainment * r->num_prompts);
		rev.point.failed = r->failed;
		rev.point.total = r->num_prompts;
		rev.point.result = r;
	} else {
		rev.point.done = ev->progress.done;
		rev.point.good = ev->good;
		rev.point.failed = ev->progress.failed;
		rev.point.total = ev->progress.total;
	}
	runner_trial_point_progress(t, &rev);
}

static void on_probe_event(struct runner_probe *p, const struct probe_event *ev, void *userdata)
{
	struct runner_trial *t = userdata;
	struct deploy_trial *d = state_of(t);
	struct store_gpu_figures gpu;

	if (runner_failing(t->runner))
		return; /* runner_finish frees everything */

	if (ev->kind == PROBE_EVENT_LOAD_POINT_START) {
		runner_trial_set_rate(t, ev->rate);
		runner_gpu_point_start(t);
		return;
	}
	if (ev->kind == PROBE_EVENT_PROGRESS && !ev->progress.warmup) {
		point_progress(t, ev, false);
		return;
	}
	if (ev->kind != PROBE_EVENT_LOAD_POINT_DONE || !ev->point)
		return;
	point_progress(t, ev, true);
	runner_gpu_point_stop(t, &gpu);
	if (ev->point->result.failed > 0)
		d->points_failed = true;
	(void)runner_trial_load_point(t,
				      t->proposal.sweep       ? "sweep"
				      : ev->point->saturation ? "saturation"
							      : "search",
				      &ev->point->result, &gpu, true);
}

static void outcome_from_point(const struct runner_trial *t, const struct probe_result *pt, double max_rate,
			       struct trial_result *res)
{
	const struct study *s = t->runner->study;
	struct opt_throughput tp = { 0 };
	double tps, in_per_req;
	int k;

	if (s->scenario == OPT_SCENARIO_OFFLINE) {
		tp.saturated_output_tps = pt->output_throughput;
		tp.saturated_input_tps = pt->duration_s > 0 ? (double)pt->total_input_tokens / pt->duration_s : 0;
	} else {
		in_per_req = pt->completed > 0 ? (double)pt->total_input_tokens / pt->completed : 0;
		tp.good_output_tps = pt->good_output_throughput;
		tp.good_input_tps = pt->request_goodput * in_per_req;
	}
	tps = opt_cost_tokens_per_sec(s->scenario, s->cost_tokens, &tp);
	trial_result_init(res, STORE_TRIAL_DONE, STORE_FAILURE_NONE);
	/* the GPUs it ran on: a baseline off the grid has no configuration to read them from */
	k = opt_cost_per_mtok(s->gpu.price_per_gpu_hour, t->tp, tps, &res->cost);
	if (k < 0) {
		trial_result_init(res, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET);
		snprintf(res->message, sizeof(res->message), "no tokens counted at the best load");
		return;
	}
	res->max_rate = max_rate;
	res->max_goodput = tps;
	res->concurrency = pt->mean_concurrency;
}

/* The server failed requests (every one of a load point, or at the lowest
 * rate more than the SLA allows while the rest met it): a failed trial,
 * its message the reasons as counted. */
static void server_failed(const struct probe_load_point *pt, struct trial_result *res)
{
	char why[384];

	probe_result_format_failures(&pt->result, why, sizeof(why));
	trial_result_init(res, STORE_TRIAL_FAILED, STORE_FAILURE_PROBE_ERROR);
	if (pt->saturation)
		snprintf(res->message, sizeof(res->message),
			 "the server failed %u of %u requests with every one at once: %s", pt->result.failed,
			 pt->result.num_prompts, why[0] ? why : "no reason given");
	else
		snprintf(res->message, sizeof(res->message), "the server failed %u of %u requests at %.4g req/s: %s",
			 pt->result.failed, pt->result.num_prompts, pt->result.request_rate,
			 why[0] ? why : "no reason given");
}

/* What ruled the configuration out at the lowest rate of the search: its
 * requests there (every point at that rate) and the attainment's 90 %
 * interval against the target — below it, or still holding it when the
 * trial's share of the budget (or the search's points) ran out. Empty
 * without a finite point or an attainment target. */
static void lowest_rate_verdict(const struct study *s, const struct runner_probe_point *pts, size_t n,
				const struct probe_outcome *o, char *buf, size_t size)
{
	double rate = INFINITY, target = s->sla.attainment, lo, hi;
	uint32_t total = 0, good = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n; i++)
		if (!pts[i].pt.saturation && pts[i].pt.result.request_rate < rate)
			rate = pts[i].pt.result.request_rate;
	if (!isfinite(rate) || !(target > 0 && target < 1))
		return;
	for (size_t i = 0; i < n; i++) {
		const struct probe_result *r = &pts[i].pt.result;

		if (pts[i].pt.saturation || fabs(r->request_rate - rate) > 1e-9 * rate)
			continue;
		total += r->num_prompts;
		good += (uint32_t)lround(r->attainment * r->num_prompts);
	}
	if (total == 0)
		return;
	probe_wilson_interval(good, total, PROBE_CAP_Z, &lo, &hi);
	if (hi < target)
		snprintf(buf, size,
			 "; ruled out at the lowest rate, %.4g req/s: %" PRIu32 " of %" PRIu32
			 " good, %.0f %% CI %.0f–%.0f %%, below the %.0f %% target",
			 rate, good, total, PROBE_CAP_CI_LEVEL * 100, lo * 100, hi * 100, target * 100);
	else if (o->out_of_time || o->budget_spent)
		snprintf(buf, size,
			 "; undecided at the lowest rate, %.4g req/s: %" PRIu32 " of %" PRIu32
			 " good, %.0f %% CI %.0f–%.0f %% holds the %.0f %% target when the %s ran out",
			 rate, good, total, PROBE_CAP_CI_LEVEL * 100, lo * 100, hi * 100, target * 100,
			 o->out_of_time ? "trial's share of the budget" : "search's load points");
	else
		snprintf(buf, size,
			 "; missed at the lowest rate, %.4g req/s, at the test's confidence: %" PRIu32 " of %" PRIu32
			 " good",
			 rate, good, total);
}

/* No load met the SLA: the load point that came closest (the highest
 * attainment; ties: the lower rate; the saturation run only when it is all
 * there is), which bound failed there and by how much, and why requests
 * failed there if any did. */
static void never_met(const struct study *s, const struct runner_probe_point *pts, size_t n,
		      const struct probe_outcome *o, struct trial_result *res)
{
	const struct probe_load_point *c = NULL;
	const char *shortfall = "";
	char sla[128], why[256] = "", lowest[256];
	int k;

	for (size_t i = 0; i < n; i++) {
		const struct probe_result *r = &pts[i].pt.result;

		if (!c || (c->saturation && !pts[i].pt.saturation) ||
		    (c->saturation == pts[i].pt.saturation &&
		     (r->attainment > c->result.attainment ||
		      (r->attainment == c->result.attainment && r->request_rate < c->result.request_rate)))) {
			c = &pts[i].pt;
			shortfall = pts[i].shortfall;
		}
	}
	probe_sla_format(&s->sla, sla, sizeof(sla));
	trial_result_init(res, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET);
	if (!c) {
		snprintf(res->message, sizeof(res->message), "no load met the SLA (%s): no load point ran", sla);
		return;
	}
	probe_result_format_failures(&c->result, why, sizeof(why));
	if (c->saturation && c->result.completed == 0 && c->result.cap == PROBE_CAP_SECONDS) {
		/* not one request in the time a point may take: the cap says why */
		snprintf(res->message, sizeof(res->message),
			 "no load met the SLA (%s): the saturation run completed no request within its time cap "
			 "(%.0f s, probe.max_point_seconds): %s",
			 sla, c->result.duration_s, why[0] ? why : "no reason given");
		return;
	}
	lowest_rate_verdict(s, pts, n, o, lowest, sizeof(lowest));
	k = snprintf(res->message, sizeof(res->message),
		     "no load met the SLA (%s) in %zu load points; closest %s%.4g req/s%s: %.1f%% good: %s%s%s%s", sla,
		     n, c->saturation ? "with every request at once, " : "at ",
		     c->saturation ? c->result.request_throughput : c->result.request_rate,
		     c->saturation ? " completed" : "", c->result.attainment * 100, shortfall,
		     why[0] ? "; failed: " : "", why, lowest);
	if (k >= (int)sizeof(res->message))
		log_debug("the closest attempt's message was cut at %zu bytes", sizeof(res->message) - 1);
}

/* A probe that ran out of its share of the wall-time budget: the answer
 * stands at the precision the search reached, and the trial says so. */
static void say_out_of_time(const struct runner_trial *t, const struct probe_outcome *o, struct trial_result *res)
{
	double share = (double)runner_trial_share_usec(t->runner) / USEC_PER_SEC;
	size_t len = strlen(res->message);
	char where[96];

	if (o->bracket_lo > 0 && isfinite(o->bracket_hi))
		snprintf(where, sizeof(where), "the max rate lies in [%.4g, %.4g] req/s (%.0f%% wide)", o->bracket_lo,
			 o->bracket_hi, (o->bracket_hi / o->bracket_lo - 1) * 100);
	else if (o->bracket_lo > 0)
		snprintf(where, sizeof(where), "the max rate is at least %.4g req/s", o->bracket_lo);
	else if (isfinite(o->bracket_hi))
		snprintf(where, sizeof(where), "no rate down to %.4g req/s met the SLA", o->bracket_hi);
	else
		snprintf(where, sizeof(where), "no rate was measured");
	snprintf(res->message + len, sizeof(res->message) - len,
		 "%slower precision: the trial's share of the wall-time budget (%.0f s) ran out; %s", len ? "; " : "",
		 share, where);
}

static void classify_probe(struct runner_trial *t, int result)
{
	const struct study *s = t->runner->study;
	struct deploy_trial *d = state_of(t);
	const struct runner_probe_point *points;
	struct probe_outcome o;
	struct trial_result res;
	size_t n;

	if (result < 0) {
		trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_PROBE_ERROR);
		snprintf(res.message, sizeof(res.message), "probe failed: %s", runner_probe_error(d->probe));
		runner_trial_finish(t, &res);
		return;
	}
	points = runner_probe_points(d->probe, &n);
	runner_probe_outcome(d->probe, &o);
	if (t->proposal.sweep && o.search == PROBE_SEARCH_SERVER_FAILED && o.failed_point < n)
		server_failed(&points[o.failed_point].pt, &res);
	else if (t->proposal.sweep)
		runner_sweep_outcome(t, o.best_point < n ? &points[o.best_point].pt.result : NULL, n, &res);
	else if (s->scenario == OPT_SCENARIO_OFFLINE) {
		if (n == 0 || points[n - 1].pt.result.completed == 0) {
			trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_PROBE_ERROR);
			snprintf(res.message, sizeof(res.message), "no request completed");
			if (n > 0)
				server_failed(&points[n - 1].pt, &res);
		} else
			outcome_from_point(t, &points[n - 1].pt.result, points[n - 1].pt.result.request_throughput,
					   &res);
	} else if (o.search == PROBE_SEARCH_SERVER_FAILED && o.failed_point < n)
		server_failed(&points[o.failed_point].pt, &res);
	else if (o.search == PROBE_SEARCH_NEVER_MET || !(o.max_rate > 0) || o.best_point >= n)
		never_met(s, points, n, &o, &res);
	else
		outcome_from_point(t, &points[o.best_point].pt.result, o.max_rate, &res);
	if (o.out_of_time)
		say_out_of_time(t, &o, &res);
	runner_trial_finish(t, &res);
}

static int on_settle(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner_trial *t = userdata;
	struct deploy_trial *d = state_of(t);

	if (runner_failing(t->runner))
		return 0; /* runner_finish frees everything */

	/* the deployer would have said FAILED by now if the server had died,
	 * unless its scheduler has yet to answer the look asked for */
	if (deploy_verdict_pending(d->deploy) && usec < d->settle_until &&
	    sd_event_source_set_time_relative(s, SETTLE_AGAIN_USEC) >= 0 &&
	    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) >= 0)
		return 0;
	d->settle_timer = sd_event_source_disable_unref(d->settle_timer);
	classify_probe(t, d->probe_result);
	return 0;
}

static void on_probe_done(struct runner_probe *p, int result, void *userdata)
{
	struct runner_trial *t = userdata;
	struct deploy_trial *d = state_of(t);
	int k;

	if (runner_failing(t->runner))
		return; /* runner_finish frees everything */

	if (result < 0 || d->points_failed) {
		d->probe_result = result;
		/* a job the cluster ended is seen by a look at its queue */
		deploy_check_soon(d->deploy);
		d->settle_until = mono_usec() + SETTLE_MAX_USEC;
		k = sd_event_add_time_relative(t->runner->event, &d->settle_timer, CLOCK_MONOTONIC,
					       MAX(SETTLE_USEC, deploy_verdict_usec(d->deploy)), 1000, on_settle, t);
		if (k >= 0) {
			(void)sd_event_source_set_description(d->settle_timer, "runner-settle");
			return;
		}
	}
	classify_probe(t, result);
}

/* The probe's time: each point of the search at most the study's point
 * cap; with a wall-time budget, the whole trial at most its share (the
 * deployment took some already), so that the budget compares
 * configurations rather than measuring one. */
static void time_bounds(const struct runner_trial *t, struct probe_config *pc)
{
	struct runner *r = t->runner;
	uint64_t share = runner_trial_share_usec(r), used = runner_clock(r) - t->started_usec;

	pc->max_point_seconds = (double)study_point_cap_usec(r->study, share) / USEC_PER_SEC;
	/* however long the deployment took, a probe gets half a point's worth */
	if (share > 0)
		pc->max_seconds =
			MAX((double)(share > used ? share - used : 0) / USEC_PER_SEC, pc->max_point_seconds / 2);
}

static void probe_config(const struct runner_trial *t, struct probe_config *pc)
{
	const struct study *s = t->runner->study;

	probe_config_init(pc);
	pc->client.base_url = deploy_get_base_url(state_of(t)->deploy);
	pc->client.model = s->model.name;
	pc->client.ignore_eos = s->workload.ignore_eos;
	if (s->probe.request_timeout_usec > 0)
		pc->client.request_timeout_usec = s->probe.request_timeout_usec;
	pc->workload = s->workload;
	memcpy(pc->percentiles, s->percentiles, sizeof(pc->percentiles));
	pc->n_percentiles = s->n_percentiles;
	pc->run.metrics_path = t->runner->profile->metrics_path;
	if (!probe_metrics_map_is_empty(&t->runner->profile->metrics))
		pc->run.metrics_map = &t->runner->profile->metrics;
	if (s->scenario == OPT_SCENARIO_OFFLINE) {
		pc->find_max_rate = false;
		pc->workload.arrival = PROBE_ARRIVAL_INF;
	} else {
		pc->sla = s->sla;
		pc->find_max_rate = true;
		if (s->probe.tolerance > 0)
			pc->rate_tolerance = s->probe.tolerance;
		if (s->probe.max_steps > 0)
			pc->max_load_points = s->probe.max_steps;
		pc->min_rate = s->probe.min_rate;
		pc->max_rate = s->probe.max_rate;
		pc->max_point_requests = s->probe.max_requests;
		pc->confidence = s->probe.confidence;
		time_bounds(t, pc);
	}
	if (t->proposal.sweep)
		runner_sweep_probe_config(t, pc);
}

static void start_probe(struct runner_trial *t)
{
	struct runner *r = t->runner;
	struct deploy_trial *d = state_of(t);
	struct probe_config pc;
	struct trial_result res;
	struct error err = { 0 };
	int k;

	probe_config(t, &pc);
	k = store_trial_set_state(r->store, t->id, STORE_TRIAL_PROBING, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	t->n_points = 0;
	d->points_failed = false;
	k = runner_probe_start(r->event, &pc, on_probe_event, on_probe_done, t, &d->probe, &err);
	if (k < 0) {
		trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_PROBE_ERROR);
		snprintf(res.message, sizeof(res.message), "probe could not start: %s", error_str(&err, k));
		runner_trial_finish(t, &res);
		return;
	}
	runner_trial_set_phase(t, RUNNER_PROBING);
}

/* ---- the quality check ---- */

static void on_quality(struct runner_quality *q, bool passed, const char *why, void *userdata)
{
	struct runner_trial *t = userdata;
	struct deploy_trial *d = state_of(t);
	struct trial_result res;

	if (runner_failing(t->runner))
		return; /* runner_finish frees everything */

	d->quality = runner_quality_free(d->quality);
	if (passed) {
		start_probe(t);
		return;
	}
	trial_result_init(&res, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_QUALITY_CHECK_FAILED);
	snprintf(res.message, sizeof(res.message), "%s", why);
	runner_trial_finish(t, &res);
}

static void start_quality_check(struct runner_trial *t)
{
	struct deploy_trial *d = state_of(t);
	struct error err = { 0 };
	int k;

	k = runner_quality_start(t, deploy_get_base_url(d->deploy), on_quality, t, &d->quality, &err);
	if (k < 0) {
		runner_fail_errno(t->runner, k, error_str(&err, k));
		return;
	}
	if (k == RUNNER_QUALITY_NOT_STARTED) {
		/* the check's program cannot be run: the same for every configuration */
		fail_setup(t, err.msg);
		return;
	}
	runner_trial_set_phase(t, RUNNER_QUALITY_CHECK);
}

/* ---- deployment ---- */

static void deploy_failed(struct runner_trial *t, struct deployment *dep)
{
	struct trial_result res;

	/* a server that could not write its log may have died of it: a passing
	 * cause, never the configuration's outcome (the trial is redone) */
	if (runner_logs_disk_full(t->runner)) {
		runner_fail_errno(t->runner, -ENOSPC, "the server ended while the disk of its log was full");
		return;
	}

	switch (deploy_get_failure(dep)) {
	case DEPLOY_FAILURE_OOM: {
		enum engine_failure_cause cause;
		uint64_t suggested;

		trial_result_init(&res, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_OOM);
		/* why, as the engine's log said: it decides what else is ruled out */
		deploy_get_failure_cause(dep, &cause, &suggested);
		res.cause = runner_cause_of_engine(cause);
		res.suggested_len = res.cause == OPT_OOM_KV_CACHE ? (uint32_t)MIN(suggested, UINT32_MAX) : 0;
		break;
	}
	case DEPLOY_FAILURE_STARTUP_TIMEOUT:
		trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_STARTUP_TIMEOUT);
		break;
	case DEPLOY_FAILURE_TIME_LIMIT:
		trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_TIME_LIMIT);
		break;
	case DEPLOY_FAILURE_SUBMIT:
		trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_DEPLOY_ERROR);
		break;
	default:
		trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_CRASHED);
		break;
	}
	snprintf(res.message, sizeof(res.message), "%s%s", t->phase == RUNNER_PROBING ? "crashed while probing: " : "",
		 deploy_get_message(dep));
	runner_trial_finish(t, &res);
}

/* "GPU 3 busy" (or CUDA's line) out of a failure message, for the log. */
static const char *busy_line(const char *msg)
{
	static char line[128];
	const char *p = msg ? strstr(msg, "GPU ") : NULL;
	unsigned gpu;
	char word[8] = "";

	for (; p; p = strstr(p + 4, "GPU "))
		if (sscanf(p, "GPU %u %7s", &gpu, word) == 2 && strncmp(word, "busy", 4) == 0) {
			snprintf(line, sizeof(line), "GPU %u busy", gpu);
			return line;
		}
	return "its GPUs are busy or unavailable";
}

/* What a job's deployment learned, recorded as it comes: its id at once
 * (what a resumed study cancels it by), then where it runs, how long it
 * waited and the GPUs Slurm gave it. The trial leaves the queue phase once
 * the job runs. */
static int sync_job(struct runner_trial *t, struct deployment *dep)
{
	struct runner *r = t->runner;
	struct error err = { 0 };
	uint64_t id = deploy_get_job_id(dep);
	double pending = deploy_get_pending_seconds(dep);
	const char *node = deploy_get_node(dep), *gpus = deploy_get_gpus(dep);
	char text[sizeof(t->gpus_text)];
	int k = 0;

	if (id && id != t->job_id) {
		t->job_id = id;
		k = store_trial_set_job(r->store, t->id, (int64_t)id, t->log_path, &err);
		log_debug("trial %u: job %" PRIu64, t->seq, id);
	}
	if (k >= 0 && isfinite(pending) && isnan(t->pending_seconds)) {
		t->pending_seconds = pending;
		k = store_trial_set_job_start(r->store, t->id, node[0] ? node : NULL, NULL, pending, &err);
		if (t->phase == RUNNER_QUEUED)
			runner_trial_set_phase(t, RUNNER_DEPLOYING);
	}
	snprintf(text, sizeof(text), "%s:%s", node, gpus);
	if (k >= 0 && gpus[0] && strcmp(text, t->gpus_text) != 0) {
		snprintf(t->gpus_text, sizeof(t->gpus_text), "%s", text);
		k = store_trial_set_job_start(r->store, t->id, node[0] ? node : NULL, gpus, t->pending_seconds, &err);
	}
	if (k < 0)
		runner_fail_errno(r, k, error_str(&err, k));
	return k;
}

static void on_deploy(struct deployment *dep, enum deploy_state state, void *userdata)
{
	struct runner_trial *t = userdata;

	if (runner_failing(t->runner))
		return; /* runner_finish frees everything */
	if (deploy_get_job_id(dep) && sync_job(t, dep) < 0)
		return;

	switch (state) {
	case DEPLOY_READY:
		if (t->phase != RUNNER_DEPLOYING || !t->open)
			return;
		t->deploy_seconds = deploy_get_startup_seconds(dep);
		if (t->runner->study->quality_check)
			start_quality_check(t);
		else
			start_probe(t);
		return;
	case DEPLOY_FAILED:
		if (t->open && t->phase == RUNNER_DEPLOYING && deploy_get_failure(dep) == DEPLOY_FAILURE_SETUP)
			fail_setup(t, deploy_get_message(dep));
		else if (t->open && deploy_get_failure(dep) == DEPLOY_FAILURE_HOST_BUSY)
			/* another process holds a GPU: wait and try again, never an outcome */
			runner_trial_host_busy(t, busy_line(deploy_get_message(dep)));
		else if (t->open && deploy_get_failure(dep) == DEPLOY_FAILURE_UNREACHABLE)
			/* nothing was submitted: wait for the controller, never an outcome */
			runner_trial_host_busy(t, deploy_get_message(dep));
		else if (t->open && deploy_get_failure(dep) == DEPLOY_FAILURE_LOST)
			/* the cluster took the job away: run it again, never an outcome */
			runner_trial_lost(t, deploy_get_message(dep));
		else if (t->open)
			deploy_failed(t, dep);
		else
			runner_trial_gone(t);
		return;
	case DEPLOY_STOPPED:
		runner_trial_gone(t);
		return;
	default:
		return;
	}
}

static int ensure_dir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int runner_method_config(const struct runner_trial *t, struct deploy_config *cfg, const char *host, uint16_t port,
			 struct runner_method_strings *m, struct error *err)
{
	const struct runner *r = t->runner;
	const struct study *s = r->study;
	int k;

	switch (s->deploy.method) {
	case STUDY_DEPLOY_SYSTEMD:
		k = deploy_unit_name(r->row.name, t->id, m->unit, sizeof(m->unit));
		if (k < 0)
			return error_set(err, k, "cannot name the unit of trial %u", t->seq);
		cfg->unit_name = m->unit;
		cfg->user_bus = s->deploy.user_bus;
		return 0;
	case STUDY_DEPLOY_COMMAND:
		cfg->deploy_command = s->deploy.deploy_command;
		cfg->teardown_command = s->deploy.teardown_command;
		cfg->health_command = s->deploy.health_command;
		cfg->command_timeout_usec = s->deploy.command_timeout_usec;
		k = deploy_hook_env(t->knobs, r->row.name, t->id, s->model.name, host, port, &m->hook_env);
		if (k < 0)
			return error_set(err, k, "cannot build the deploy hooks' environment");
		cfg->hook_env = (const char *const *)m->hook_env;
		return 0;
	case STUDY_DEPLOY_SLURM:
		runner_job_name(t, m->job_name, sizeof(m->job_name));
		runner_job_comment(t, m->job_comment, sizeof(m->job_comment));
		cfg->cluster = r->cluster;
		cfg->job_name = m->job_name;
		cfg->job_comment = m->job_comment;
		cfg->job_gpus = t->tp;
		/* a confirmation of the answer is measured with its node to itself */
		cfg->job_exclusive = t->proposal.alone;
		cfg->job_cpus = r->profile->job_cpus;
		cfg->job_memory_mib = (uint64_t)(r->profile->job_memory_gib * 1024 + 0.5);
		cfg->partition = s->deploy.partition;
		cfg->account = s->deploy.account;
		cfg->time_limit_usec = s->deploy.time_limit_usec;
		cfg->sbatch_args = s->deploy.extra_args;
		return 0;
	case STUDY_DEPLOY_EXEC:
		return 0;
	}
	return error_set(err, -EINVAL, "unknown deploy method %d", (int)s->deploy.method);
}

/* The exact command of the trial's server, kept with the trial. */
static int record_launch(struct runner_trial *t, const struct engine_command *cmd, struct error *err)
{
	_cleanup_(freep) char *json = NULL;
	int k;

	k = engine_command_to_json(cmd, &json);
	if (k < 0)
		return error_set(err, k, "cannot record the launch command of trial %u", t->seq);
	return store_trial_set_launch(t->runner->store, t->id, json, err);
}

const char *runner_model_of(const struct runner_trial *t, char *key, size_t size)
{
	const struct study *s = t->runner->study;
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(t->knobs, OPT_KNOB_QUANTIZATION);
	int quant = cJSON_IsString(q) ? study_quant_from_string(q->valuestring) : STUDY_QUANT_NONE;

	if (quant >= 0 && s->model.checkpoints[quant]) {
		snprintf(key, size, "model.checkpoints.%s", study_quant_to_string((enum study_quant)quant));
		return s->model.checkpoints[quant];
	}
	snprintf(key, size, "model.name");
	return s->model.name;
}

/* The engine's command for the trial: on this host with its own GPUs
 * (through the profile's gpu_env) and port; as a job, the port the job's
 * launcher picks on its node and the GPUs Slurm gives it. */
static int render(struct runner_trial *t, const char *host, uint16_t port, struct engine_command *cmd,
		  struct error *err)
{
	struct runner *r = t->runner;
	unsigned devices[STUDY_GPUS_MAX], n_devices = 0;

	if (runner_on_cluster(r))
		return engine_profile_render_job(r->profile, r->study, t->knobs, host, cmd, err);
	for (unsigned i = 0; i < r->n_gpus; i++)
		if (t->gpus & (UINT64_C(1) << i))
			devices[n_devices++] = r->study->gpu.devices[i];
	return engine_profile_render_trial(r->profile, r->study, t->knobs, host, port, devices, n_devices, cmd, err);
}

/* The deployer's record hook: the trial's server (its process group, or its
 * unit) is committed before anything of it runs, so that a goodput killed
 * at any moment leaves nothing a restarted one cannot find. */
static int record_server(const struct deploy_server *srv, void *userdata, struct error *err)
{
	struct runner_trial *t = userdata;
	struct store_server s = { .pgid = srv->pgid, .identity = srv->identity, .unit = srv->unit };
	int k;

	k = store_trial_set_server(t->runner->store, t->id, &s, t->log_path, err);
	if (k < 0)
		state_of(t)->record_error = k;
	return k;
}

/* Renders the engine's command for the trial, records it and starts the deployment.
 * *ret_setup tells a failure of the deployment's start, which no
 * configuration can avoid, from one of rendering this configuration. */
static int launch(struct runner_trial *t, bool *ret_setup, struct error *err)
{
	struct runner *r = t->runner;
	struct engine_command cmd = { 0 };
	struct deploy_config cfg;
	const char *host = r->study->deploy.host ? r->study->deploy.host : "127.0.0.1";
	bool command = r->study->deploy.method == STUDY_DEPLOY_COMMAND;
	struct runner_method_strings m = { .hook_env = NULL };
	char model_key[64];
	uint16_t port = 0;
	int k = 0;

	/* prefill and decode workers behind a router: a unit of several servers */
	if (opt_knobs_pd_shape(t->knobs, NULL)) {
		k = runner_roles_launch(t, host, on_deploy, &state_of(t)->roles, &state_of(t)->deploy, ret_setup, err);
		state_of(t)->record_error = runner_roles_record_error(state_of(t)->roles);
		return k;
	}

	/* The command method's hooks report a URL, not an announce line: they
	 * always get a port (free here; on another host only a suggestion). */
	if (!runner_on_cluster(r) && (r->profile->port_mode == ENGINE_PORT_FREE || command)) {
		k = deploy_pick_free_port(host, &port, err);
		if (k < 0 && command)
			k = deploy_pick_free_port("127.0.0.1", &port, err);
	}
	if (k >= 0)
		k = render(t, host, port, &cmd, err);
	if (k >= 0) {
		deploy_config_from_profile(&cfg, r->profile, &cmd, t->log_path, host, port,
					   r->study->deploy.startup_timeout_usec, r->study->deploy.stop_timeout_usec);
		cfg.model_path = runner_model_of(t, model_key, sizeof(model_key));
		cfg.model_key = model_key;
		cfg.record = record_server;
		cfg.record_userdata = t;
		k = runner_method_config(t, &cfg, host, port, &m, err);
	}
	if (k >= 0)
		k = record_launch(t, &cmd, err);
	if (k >= 0) {
		k = deploy_start(r->event, r->study->deploy.method, &cfg, on_deploy, t, &state_of(t)->deploy, err);
		*ret_setup = k < 0;
	}
	deploy_strv_free(m.hook_env); /* deploy_start copied it */
	engine_command_done(&cmd);
	return k;
}

static void deploy_eval_start(struct runner_trial *t)
{
	struct runner *r = t->runner;
	struct deploy_trial *d;
	struct trial_result res;
	struct error err = { 0 };
	char msg[ERROR_MSG_MAX];
	bool setup = false;
	int k;

	d = calloc(1, sizeof(*d));
	if (!d) {
		runner_fail(r, "out of memory");
		return;
	}
	t->eval = d;
	k = runner_host_record(r, t->id, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	k = ensure_dir(r->log_dir);
	if (k < 0) {
		snprintf(msg, sizeof(msg), "log directory %s: %s", r->log_dir, strerror(-k));
		runner_fail_errno(r, k, msg);
		return;
	}
	free(t->log_path);
	if (asprintf(&t->log_path, "%s/%s-trial-%03u-%s.log", r->log_dir, r->row.name, t->seq, t->kind) < 0) {
		t->log_path = NULL;
		runner_fail(r, "out of memory");
		return;
	}
	k = launch(t, &setup, &err);
	if (k < 0 && d->record_error < 0) {
		/* a store that cannot record is no fault of the configuration */
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	if (k < 0 && setup) {
		fail_setup(t, error_str(&err, k));
		return;
	}
	if (k < 0) {
		trial_result_init(&res, STORE_TRIAL_FAILED, STORE_FAILURE_DEPLOY_ERROR);
		snprintf(res.message, sizeof(res.message), "%s", error_str(&err, k));
		runner_trial_finish(t, &res);
		return;
	}
	if (deploy_get_state(d->deploy) == DEPLOY_PENDING) {
		/* a job, waiting for its resources: wall time, not start-up time */
		t->queued_usec = runner_clock(r);
		runner_trial_set_phase(t, RUNNER_QUEUED);
		return;
	}
	runner_trial_set_phase(t, RUNNER_DEPLOYING);
}

/* ---- the evaluator ---- */

static void deploy_eval_abort(struct runner_trial *t)
{
	struct deploy_trial *d = state_of(t);

	if (!d)
		return;
	d->settle_timer = sd_event_source_disable_unref(d->settle_timer);
	d->quality = runner_quality_free(d->quality);
	d->probe = runner_probe_free(d->probe);
}

static enum runner_server deploy_eval_server(const struct runner_trial *t)
{
	const struct deploy_trial *d = state_of(t);

	if (!d || !d->deploy)
		return RUNNER_SERVER_NONE;
	switch (deploy_get_state(d->deploy)) {
	case DEPLOY_PENDING:
	case DEPLOY_STARTING:
	case DEPLOY_READY:
		return RUNNER_SERVER_RUNNING;
	case DEPLOY_STOPPING:
		return RUNNER_SERVER_STOPPING;
	default:
		return RUNNER_SERVER_NONE;
	}
}

static int deploy_eval_stop_server(struct runner_trial *t)
{
	return deploy_stop(state_of(t)->deploy);
}

static void deploy_eval_release(struct runner_trial *t)
{
	struct deploy_trial *d = state_of(t);

	if (!d)
		return;
	deploy_eval_abort(t);
	d->deploy = deploy_free(d->deploy);
	d->roles = runner_roles_free(d->roles); /* after the unit: its router's config was made from it */
	free(d);
	t->eval = NULL;
}

static const char *deploy_eval_pending_reason(const struct runner_trial *t)
{
	const struct deploy_trial *d = state_of(t);

	return d && d->deploy ? deploy_get_pending_reason(d->deploy) : "";
}

const struct runner_evaluator runner_evaluator_deploy = {
	.kind = "search",
	.confirm_prefix = "",
	.start = deploy_eval_start,
	.abort = deploy_eval_abort,
	.server = deploy_eval_server,
	.stop_server = deploy_eval_stop_server,
	.release = deploy_eval_release,
	.pending_reason = deploy_eval_pending_reason,
};
