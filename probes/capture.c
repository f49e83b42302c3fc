/* capture.c — scrapes into deltas, deltas into a window, a window into a
 * workload (see capture.h for what is measured and how).
 *
 * Histograms travel as struct probe_prom_histogram: cumulative counts as a
 * page writes them (a scrape), per-bucket counts once two scrapes were
 * subtracted (a delta, a window: cum[i] is then bucket i's own count and
 * inf the count above the last bound). */
#include "capture.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "json-util.h"
#include "macro.h"
#include "time-util.h"
#include "workload-json.h"

#define MAX_INTERVALS   (1u << 22)
#define PREFIX_GROUP    16   /* requests that share one prefix in a captured workload */
#define PREFIX_MIN_RATE 0.01 /* hit rates below this are noise, not shared prefixes */
#define BURSTINESS_MIN  0.01
#define BURSTINESS_MAX  100.0

/* ---- scrapes and deltas ---- */

static void missing_names(const struct probe_metrics_map *map, enum probe_series s, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; map && i < map->n_refs[s] && used < size; i++)
		used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", map->refs[s][i].name);
}

int probe_capture_scrape_parse(const char *text, size_t len, const struct probe_metrics_map *map, uint64_t mono_usec,
			       uint64_t real_usec, struct probe_capture_scrape *ret, struct error *err)
{
	static const enum probe_series hists[] = { PROBE_SERIES_PROMPT_LENGTH, PROBE_SERIES_GENERATION_LENGTH };
	struct probe_metrics_map def;
	int r;

	if (!map) {
		probe_metrics_map_init_default(&def);
		map = &def;
	}
	*ret = (struct probe_capture_scrape){ .mono_usec = mono_usec, .real_usec = real_usec };
	for (size_t i = 0; i < ELEMENTSOF(hists); i++) {
		struct probe_prom_histogram *h = i ? &ret->generation : &ret->prompt;
		char names[512];

		r = probe_prom_parse_histogram(text, len, map, hists[i], h, err);
		if (r < 0)
			return r;
		if (h->have)
			continue;
		missing_names(map, hists[i], names, sizeof(names));
		if (!names[0])
			return error_set(err, -ENOENT,
					 "%s: the engine profile names no metric for it (metrics.series.%s)",
					 probe_series_names[hists[i]], probe_series_names[hists[i]]);
		return error_set(err, -ENOENT, "%s (%s): not on the metrics page", probe_series_names[hists[i]], names);
	}
	return probe_prom_parse(text, len, map, &ret->counters, err);
}

static bool same_bounds(const struct probe_prom_histogram *a, const struct probe_prom_histogram *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->le[i] != b->le[i])
			return false;
	return true;
}

/* Cumulative → per-bucket, the last element being the overflow. */
static void per_bucket(const struct probe_prom_histogram *h, double *ret)
{
	double below = 0;

	for (size_t i = 0; i < h->n; i++) {
		ret[i] = h->cum[i] - below;
		below = h->cum[i];
	}
	ret[h->n] = h->inf - below;
}

/* Whether any bucket, the sum or the count went down. */
static bool hist_went_down(const struct probe_prom_histogram *prev, const struct probe_prom_histogram *cur)
{
	double a[PROBE_PROM_MAX_BUCKETS + 1], b[PROBE_PROM_MAX_BUCKETS + 1];

	if (cur->count < prev->count || cur->sum < prev->sum)
		return true;
	per_bucket(prev, a);
	per_bucket(cur, b);
	for (size_t i = 0; i <= cur->n; i++)
		if (b[i] < a[i])
			return true;
	return false;
}

/* cur − prev per bucket (cur alone after a reset). */
static void hist_delta(const struct probe_prom_histogram *prev, const struct probe_prom_histogram *cur, bool reset,
		       struct probe_prom_histogram *ret)
{
	double a[PROBE_PROM_MAX_BUCKETS + 1], b[PROBE_PROM_MAX_BUCKETS + 1];

	per_bucket(prev, a);
	per_bucket(cur, b);
	*ret = *cur;
	for (size_t i = 0; i < cur->n; i++)
		ret->cum[i] = reset ? b[i] : b[i] - a[i];
	ret->inf = reset ? b[cur->n] : b[cur->n] - a[cur->n];
	if (!reset) {
		ret->sum = cur->sum - prev->sum;
		ret->count = cur->count - prev->count;
	}
}

/* Whether a counter went down between two scrapes. */
static bool counter_went_down(const struct probe_prom_sample *prev, const struct probe_prom_sample *cur,
			      enum probe_series s)
{
	return cur->have[s] && prev->have[s] && cur->v[s] < prev->v[s];
}

/* A counter's increase; after a restart, its value (it counted from 0). */
static double counter_delta(const struct probe_prom_sample *prev, const struct probe_prom_sample *cur,
			    enum probe_series s, bool reset)
{
	if (!cur->have[s] || !prev->have[s])
		return NAN;
	return reset ? cur->v[s] : cur->v[s] - prev->v[s];
}

/* Requests in the engine at a scrape; NAN without the gauges. */
static double in_engine(const struct probe_prom_sample *s)
{
	if (!s->have[PROBE_SERIES_RUNNING] || !s->have[PROBE_SERIES_WAITING])
		return NAN;
	return s->v[PROBE_SERIES_RUNNING] + s->v[PROBE_SERIES_WAITING];
}

/* Arrivals between two scrapes: what is in the engine now, minus what was,
 * plus what left it (the requests counter counts aborted requests too;
 * without it the finished ones). */
static double arrivals(const struct probe_capture_scrape *prev, const struct probe_capture_scrape *cur, double finished,
		       bool reset, bool *ret_from_gauges)
{
	double before = in_engine(&prev->counters), now = in_engine(&cur->counters);
	double left = counter_delta(&prev->counters, &cur->counters, PROBE_SERIES_REQUESTS, reset);

	*ret_from_gauges = isfinite(before) && isfinite(now);
	if (!*ret_from_gauges)
		return finished;
	if (!isfinite(left))
		left = finished;
	/* after a restart the engine started empty */
	return MAX(now - (reset ? 0 : before) + left, 0.0);
}

int probe_capture_delta(const struct probe_capture_scrape *prev, const struct probe_capture_scrape *cur,
			struct probe_capture_delta *ret, struct error *err)
{
	static const enum probe_series counters[] = { PROBE_SERIES_REQUESTS, PROBE_SERIES_PREFIX_QUERIES,
						      PROBE_SERIES_PREFIX_HITS };
	struct probe_capture_delta d = {
		.mono_start_usec = prev->mono_usec,
		.mono_end_usec = cur->mono_usec,
		.real_end_usec = cur->real_usec,
	};
	bool reset;

	if (!same_bounds(&prev->prompt, &cur->prompt) || !same_bounds(&prev->generation, &cur->generation))
		return error_set(err, -EINVAL,
				 "%s: the bucket bounds changed between two scrapes (another server, or one restarted "
				 "with another max_model_len)",
				 same_bounds(&prev->prompt, &cur->prompt) ? cur->generation.name : cur->prompt.name);
	/* any counter that went down means the server restarted: every counter counts from 0 */
	reset = hist_went_down(&prev->prompt, &cur->prompt) || hist_went_down(&prev->generation, &cur->generation);
	for (size_t i = 0; i < ELEMENTSOF(counters); i++)
		reset = reset || counter_went_down(&prev->counters, &cur->counters, counters[i]);
	hist_delta(&prev->prompt, &cur->prompt, reset, &d.prompt);
	hist_delta(&prev->generation, &cur->generation, reset, &d.generation);
	d.reset = reset;
	d.requests = d.prompt.count;
	d.arrivals = arrivals(prev, cur, d.requests, reset, &d.arrivals_from_gauges);
	d.prefix_queries = counter_delta(&prev->counters, &cur->counters, PROBE_SERIES_PREFIX_QUERIES, reset);
	d.prefix_hits = counter_delta(&prev->counters, &cur->counters, PROBE_SERIES_PREFIX_HITS, reset);
	*ret = d;
	return 0;
}

/* ---- the window ---- */

void probe_capture_acc_init(struct probe_capture_acc *a)
{
	*a = (struct probe_capture_acc){ 0 };
}

void probe_capture_acc_done(struct probe_capture_acc *a)
{
	free(a->intervals);
	*a = (struct probe_capture_acc){ 0 };
}

static int push_interval(struct probe_capture_acc *a, double count, double seconds, double end)
{
	if (a->n_intervals >= MAX_INTERVALS)
		return 0; /* a window this long has said what it can about burstiness */
	if (ARRAY_GROW(a->intervals, a->cap_intervals, a->n_intervals) < 0)
		return -ENOMEM;
	a->intervals[a->n_intervals++] = (struct probe_capture_interval){ count, seconds, end };
	return 0;
}

static void hist_add(struct probe_prom_histogram *acc, const struct probe_prom_histogram *d)
{
	if (!acc->have) {
		*acc = *d;
		return;
	}
	for (size_t i = 0; i < d->n; i++)
		acc->cum[i] += d->cum[i];
	acc->inf += d->inf;
	acc->sum += d->sum;
	acc->count += d->count;
}

static int local_hour(uint64_t real_usec)
{
	time_t t = (time_t)(real_usec / USEC_PER_SEC);
	struct tm tm;

	return localtime_r(&t, &tm) ? tm.tm_hour : 0;
}

int probe_capture_acc_add(struct probe_capture_acc *a, const struct probe_capture_delta *d, struct error *err)
{
	double seconds = (double)(d->mono_end_usec - MIN(d->mono_start_usec, d->mono_end_usec)) / 1e6;
	int h;

	if ((a->prompt.have && !same_bounds(&a->prompt, &d->prompt)) ||
	    (a->generation.have && !same_bounds(&a->generation, &d->generation)))
		return error_set(err, -EINVAL, "%s: the bucket bounds changed within the window", d->prompt.name);
	if (push_interval(a, d->arrivals, seconds, (double)d->real_end_usec / 1e6) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	a->arrivals_from_gauges = (a->n_intervals == 1 || a->arrivals_from_gauges) && d->arrivals_from_gauges;
	hist_add(&a->prompt, &d->prompt);
	hist_add(&a->generation, &d->generation);
	a->requests += d->requests;
	a->arrivals += d->arrivals;
	a->seconds += seconds;
	if (isfinite(d->prefix_queries) && isfinite(d->prefix_hits)) {
		a->prefix_queries += d->prefix_queries;
		a->prefix_hits += d->prefix_hits;
		a->have_prefix = true;
	}
	a->resets += d->reset;
	if (!a->first_mono_usec) {
		a->first_mono_usec = d->mono_start_usec;
		a->first_real_usec = d->real_end_usec - (d->mono_end_usec - d->mono_start_usec);
	}
	a->last_mono_usec = d->mono_end_usec;
	a->last_real_usec = d->real_end_usec;
	h = local_hour(d->real_end_usec);
	a->hour_requests[h] += d->arrivals;
	a->hour_seconds[h] += seconds;
	return 0;
}

int probe_capture_acc_merge(struct probe_capture_acc *a, const struct probe_capture_acc *b, struct error *err)
{
	if (!b->n_intervals && !b->prompt.have)
		return 0;
	if ((a->prompt.have && b->prompt.have && !same_bounds(&a->prompt, &b->prompt)) ||
	    (a->generation.have && b->generation.have && !same_bounds(&a->generation, &b->generation)))
		return error_set(err, -EINVAL, "%s: the bucket bounds changed", b->prompt.name);
	/* as in probe_capture_acc_add: every interval had the gauges */
	a->arrivals_from_gauges = (a->n_intervals == 0 || a->arrivals_from_gauges) && b->arrivals_from_gauges;
	for (size_t i = 0; i < b->n_intervals; i++)
		if (push_interval(a, b->intervals[i].count, b->intervals[i].seconds, b->intervals[i].end) < 0)
			return error_set(err, -ENOMEM, "out of memory");
	if (b->prompt.have)
		hist_add(&a->prompt, &b->prompt);
	if (b->generation.have)
		hist_add(&a->generation, &b->generation);
	a->requests += b->requests;
	a->arrivals += b->arrivals;
	a->seconds += b->seconds;
	a->prefix_queries += b->prefix_queries;
	a->prefix_hits += b->prefix_hits;
	a->have_prefix = a->have_prefix || b->have_prefix;
	a->resets += b->resets;
	if (!a->first_mono_usec) {
		a->first_mono_usec = b->first_mono_usec;
		a->first_real_usec = b->first_real_usec;
	}
	a->last_mono_usec = MAX(a->last_mono_usec, b->last_mono_usec);
	a->last_real_usec = MAX(a->last_real_usec, b->last_real_usec);
	for (unsigned h = 0; h < 24; h++) {
		a->hour_requests[h] += b->hour_requests[h];
		a->hour_seconds[h] += b->hour_seconds[h];
	}
	return 0;
}

/* ---- from a log ---- */

/* vLLM's length buckets (1, 2, 5, 10, 20, 50, ...) up to the first that holds max. */
static void bounds_1_2_5(struct probe_prom_histogram *h, uint32_t max)
{
	static const double mantissa[] = { 1, 2, 5 };

	h->n = 0;
	for (double e = 1; h->n < PROBE_PROM_MAX_BUCKETS; e *= 10)
		for (size_t i = 0; i < ELEMENTSOF(mantissa) && h->n < PROBE_PROM_MAX_BUCKETS; i++) {
			h->le[h->n++] = mantissa[i] * e;
			if (mantissa[i] * e >= max)
				return;
		}
}

static void observe(struct probe_prom_histogram *h, double v)
{
	size_t i = 0;

	while (i < h->n && v > h->le[i])
		i++;
	if (i < h->n)
		h->cum[i]++;
	else
		h->inf++;
	h->sum += v;
	h->count++;
}

/* Seconds of [from, to) (µs since the epoch) that fall in each local hour.
 * Whole days give every hour of the day an hour each (a day the clocks
 * change is taken as 24 hours); only the rest, less than a day, is walked
 * hour by hour — a log whose times span centuries must not cost a clock
 * lookup per hour of them. */
static void spread_hours(struct probe_capture_acc *a, uint64_t from, uint64_t to)
{
	const uint64_t day = 24 * 3600 * USEC_PER_SEC;

	if (to > from && to - from >= day) {
		uint64_t days = (to - from) / day;

		for (size_t h = 0; h < 24; h++)
			a->hour_seconds[h] += (double)days * 3600;
		from += days * day;
	}
	while (from < to) {
		uint64_t next = (from / (3600 * USEC_PER_SEC) + 1) * 3600 * USEC_PER_SEC; /* whole hours */
		uint64_t end = MIN(next, to);

		a->hour_seconds[local_hour(from)] += (double)(end - from) / 1e6;
		from = end;
	}
}

int probe_capture_acc_from_samples(struct probe_capture_acc *a, const struct probe_samples *s, uint64_t interval_usec,
				   struct error *err)
{
	uint32_t max_in = 1, max_out = 1;
	uint64_t span = s->n ? s->t_usec[s->n - 1] : 0, real0, max_bins;
	size_t bins, k = 0;

	probe_capture_acc_init(a);
	a->from_log = true;
	for (size_t i = 0; i < s->n; i++) {
		max_in = MAX(max_in, s->input[i]);
		max_out = MAX(max_out, s->output[i]);
	}
	bounds_1_2_5(&a->prompt, max_in);
	bounds_1_2_5(&a->generation, max_out);
	a->prompt.have = a->generation.have = true;
	snprintf(a->prompt.name, sizeof(a->prompt.name), "input lengths");
	snprintf(a->generation.name, sizeof(a->generation.name), "output lengths");
	for (size_t i = 0; i < s->n; i++) {
		observe(&a->prompt, s->input[i]);
		observe(&a->generation, s->output[i]);
	}
	a->requests = a->arrivals = (double)s->n;
	a->seconds = (double)span / 1e6;
	/* a sparse log (two requests a year apart) in a few wide intervals, not
	 * millions of empty ones */
	max_bins = MAX((uint64_t)64, 4 * (uint64_t)s->n);
	if (interval_usec && span / interval_usec > max_bins)
		interval_usec = (span + max_bins - 1) / max_bins;
	a->interval_usec = interval_usec;
	/* arrivals per interval: only whole intervals count for burstiness */
	bins = s->have_time && interval_usec ? (size_t)(span / interval_usec) : 0;
	for (size_t b = 0; b < bins && b < MAX_INTERVALS; b++) {
		double c = 0;

		while (k < s->n && s->t_usec[k] < (b + 1) * interval_usec) {
			c++;
			k++;
		}
		if (push_interval(a, c, (double)interval_usec / 1e6,
				  isfinite(s->first_realtime)
					  ? s->first_realtime + (double)((b + 1) * interval_usec) / 1e6
					  : (double)((b + 1) * interval_usec) / 1e6) < 0)
			return error_set(err, -ENOMEM, "out of memory");
	}
	if (s->have_time && isfinite(s->first_realtime)) {
		real0 = (uint64_t)llround(s->first_realtime * 1e6);
		for (size_t i = 0; i < s->n; i++)
			a->hour_requests[local_hour(real0 + s->t_usec[i])]++;
		spread_hours(a, real0, real0 + span);
		a->first_real_usec = real0;
		a->last_real_usec = real0 + span;
	}
	return 0;
}

/* ---- what the window says ---- */

static double estimate_burstiness(const struct probe_capture_acc *a, size_t from, size_t to)
{
	double mean_d = 0, sum = 0, sq = 0;
	size_t m = to - from;

	if (m < 3)
		return NAN;
	for (size_t i = from; i < to; i++)
		mean_d += a->intervals[i].seconds / (double)m;
	for (size_t i = from; i < to; i++) {
		double x = a->intervals[i].count * mean_d / a->intervals[i].seconds;

		sum += x;
		if (i > from) {
			double y = a->intervals[i - 1].count * mean_d / a->intervals[i - 1].seconds;

			sq += (x - y) * (x - y);
		}
	}
	if (!(sum > 0))
		return NAN;
	/* F = variance / mean, the variance from successive differences */
	sq /= 2.0 * (double)(m - 1);
	if (!(sq > 0))
		return BURSTINESS_MAX;
	return MIN(MAX(1.0 / (sq / (sum / (double)m)), BURSTINESS_MIN), BURSTINESS_MAX);
}

void probe_capture_summarize(const struct probe_capture_acc *a, struct probe_capture_summary *ret)
{
	struct probe_capture_summary s = {
		.requests = a->requests,
		.arrivals = a->arrivals,
		.arrivals_from_gauges = a->arrivals_from_gauges,
		.burstiness = NAN,
		.prefix_hit_rate = NAN,
	};
	size_t first = 0, last = a->n_intervals;

	if (!a->from_log) {
		/* the active span: idle intervals before the first request and after the last are not traffic */
		while (first < last && a->intervals[first].count == 0)
			first++;
		while (last > first && a->intervals[last - 1].count == 0)
			last--;
		for (size_t i = first; i < last; i++)
			s.duration_s += a->intervals[i].seconds;
		s.mean_rate = s.duration_s > 0 ? a->arrivals / s.duration_s : NAN;
	} else {
		s.duration_s = a->seconds;
		s.mean_rate = a->requests > 1 && a->seconds > 0 ? (a->requests - 1) / a->seconds : NAN;
	}
	for (size_t i = first; i < last; i++)
		if (a->intervals[i].seconds > 0)
			s.peak_rate = MAX(s.peak_rate, a->intervals[i].count / a->intervals[i].seconds);
	s.burstiness = estimate_burstiness(a, first, last);
	s.input_mean = a->prompt.count > 0 ? a->prompt.sum / a->prompt.count : NAN;
	s.output_mean = a->generation.count > 0 ? a->generation.sum / a->generation.count : NAN;
	if (a->have_prefix && a->prefix_queries > 0)
		s.prefix_hit_rate = a->prefix_hits / a->prefix_queries;
	s.resets = a->resets;
	*ret = s;
}

bool probe_capture_length_histogram(const struct probe_prom_histogram *h, struct probe_length_histogram *ret)
{
	struct probe_length_histogram out = { 0 };
	size_t n = h->n;
	double le[PROBE_PROM_MAX_BUCKETS + 1], c[PROBE_PROM_MAX_BUCKETS + 1];

	memcpy(le, h->le, n * sizeof(double));
	memcpy(c, h->cum, n * sizeof(double));
	if (h->inf > 0) { /* above every bound: one more bucket, twice as wide */
		le[n] = MIN(n ? 2 * le[n - 1] : 1.0, (double)PROBE_MAX_TOKENS_PER_REQUEST);
		c[n++] = h->inf;
	}
	while (n > 0 && !(c[n - 1] > 0))
		n--;
	if (n == 0)
		return false;
	while (n > PROBE_HISTOGRAM_MAX_BUCKETS) { /* merge neighbours until it fits */
		size_t k = 0;

		for (size_t i = 0; i < n; i += 2, k++) {
			le[k] = le[MIN(i + 1, n - 1)];
			c[k] = c[i] + (i + 1 < n ? c[i + 1] : 0);
		}
		n = k;
	}
	out.n = (uint32_t)n;
	memcpy(out.le, le, n * sizeof(double));
	memcpy(out.count, c, n * sizeof(double));
	*ret = out;
	return true;
}

/* A shared prefix that gives the hit rate: K tokens shared by groups of G
 * requests hit K·(G−1)/G of each prompt; the body's histogram moves down
 * by K. */
static void capture_prefix(double hit_rate, struct probe_workload_config *w)
{
	struct probe_length_histogram *h = &w->input.hist;
	double k = floor(hit_rate * w->input.mean * PREFIX_GROUP / (PREFIX_GROUP - 1));
	uint32_t n = 0;

	if (!(hit_rate >= PREFIX_MIN_RATE) || !(k >= 16) || k >= w->input.mean - 1)
		return;
	for (uint32_t i = 0; i < h->n; i++) {
		double le = h->le[i] - k;

		if (le < 1) { /* everything at or below the prefix: the shortest body */
			le = 1;
			if (n > 0) {
				h->count[0] += h->count[i];
				continue;
			}
		}
		h->le[n] = le;
		h->count[n++] = h->count[i];
	}
	h->n = n;
	w->input.mean -= k;
	w->prefix_len = (uint32_t)k;
	w->prefix_group_size = PREFIX_GROUP;
}

/* An hour's rate needs a quarter of the hour observed: a one-minute
 * window across the top of an hour gave a "profile" of two hours read from
 * 19 and 40 seconds (3.6 and 5.8 req/s where the load had stepped from 4 to
 * 8 req/s within the minute), and a study on it sized replicas for a day
 * that was never seen (35 % dearer than the lengths alone). */
#define HOUR_MIN_SECONDS 900.0

/* The rate in each hour of the day the window covered (a quarter of it at
 * least), one point per hour. */
static void hours_profile(const struct probe_capture_acc *a, struct probe_rate_profile *ret)
{
	*ret = (struct probe_rate_profile){ .speed = 1 };
	for (unsigned h = 0; h < 24; h++)
		if (a->hour_seconds[h] >= HOUR_MIN_SECONDS) {
			ret->second_of_day[ret->n] = h * 3600;
			ret->rate[ret->n++] = a->hour_requests[h] / a->hour_seconds[h];
		}
	ret->start = ret->second_of_day[0];
}

int probe_capture_acc_workload(const struct probe_capture_acc *a, struct probe_workload_config *cfg, struct error *err)
{
	struct probe_workload_config w = *cfg;
	struct probe_capture_summary s;

	probe_capture_summarize(a, &s);
	if (!(a->requests > 0) || !probe_capture_length_histogram(&a->prompt, &w.input.hist) ||
	    !probe_capture_length_histogram(&a->generation, &w.output.hist) || !isfinite(s.mean_rate))
		return error_set(err, -ENODATA, "no request finished in the window: nothing to measure");
	w.dataset = PROBE_DATASET_RANDOM;
	w.dataset_path = w.samples_path = NULL;
	w.input.kind = w.output.kind = PROBE_DIST_HISTOGRAM;
	w.input.mean = s.input_mean;
	w.output.mean = s.output_mean;
	w.input.min = w.input.max = w.output.min = w.output.max = 0;
	w.request_rate = s.mean_rate;
	w.burstiness = isfinite(s.burstiness) ? s.burstiness : 1.0;
	w.arrival = w.burstiness == 1.0 ? PROBE_ARRIVAL_POISSON : PROBE_ARRIVAL_GAMMA;
	w.prefix_len = w.prefix_group_size = 0;
	hours_profile(a, &w.profile);
	if (w.profile.n < 2 || !(probe_rate_profile_mean(&w.profile) > 0))
		w.profile.n = 0;
	if (isfinite(s.prefix_hit_rate))
		capture_prefix(s.prefix_hit_rate, &w);
	*cfg = w;
	return 0;
}

/* ---- the block ---- */

static int add_finite(cJSON *o, const char *key, double v)
{
	if (isfinite(v))
		return json_add_number(o, key, v);
	return cJSON_AddNullToObject(o, key) ? 0 : -ENOMEM;
}

static int add_time(cJSON *o, const char *key, uint64_t real_usec)
{
	time_t t = (time_t)(real_usec / USEC_PER_SEC);
	struct tm tm;
	char buf[32];

	if (!real_usec || !gmtime_r(&t, &tm))
		return 0;
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_add_string(o, key, buf);
}

static int add_intervals(cJSON *c, const struct probe_capture_acc *a)
{
	cJSON *arr;

	if (a->n_intervals > PROBE_CAPTURE_MAX_LISTED)
		return 0;
	arr = cJSON_AddArrayToObject(c, "intervals");
	if (!arr)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_intervals; i++) {
		cJSON *pt = cJSON_CreateArray();

		if (!pt || !cJSON_AddItemToArray(arr, pt)) {
			cJSON_Delete(pt);
			return -ENOMEM;
		}
		if (!cJSON_AddItemToArray(pt, cJSON_CreateNumber(round(a->intervals[i].end * 1e6) / 1e6)) ||
		    !cJSON_AddItemToArray(pt, cJSON_CreateNumber(a->intervals[i].count)))
			return -ENOMEM;
	}
	return 0;
}

int probe_capture_to_json(const struct probe_capture_acc *a, const struct probe_workload_config *cfg,
			  const char *source_kind, const char *source, uint64_t interval_usec, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	struct probe_capture_summary s;
	struct probe_rate_profile hours;
	cJSON *c;
	int r = 0;

	if (!o || probe_workload_shape_to_json(cfg, o) < 0)
		return -ENOMEM;
	probe_capture_summarize(a, &s);
	hours_profile(a, &hours);
	c = cJSON_AddObjectToObject(o, "captured");
	if (!c)
		return -ENOMEM;
	r |= json_add_string(c, "source", source_kind);
	r |= json_add_string(c, source_kind, source);
	r |= add_time(c, "started", a->first_real_usec);
	r |= add_time(c, "ended", a->last_real_usec);
	r |= json_add_number(c, "duration_s", s.duration_s);
	if (a->from_log && a->interval_usec)
		interval_usec = a->interval_usec; /* as widened for a sparse log */
	if (interval_usec)
		r |= json_add_number(c, "interval_s", (double)interval_usec / 1e6);
	r |= json_add_number(c, "requests", s.requests);
	if (!a->from_log) {
		r |= json_add_number(c, "arrivals", s.arrivals);
		r |= json_add_string(c, "arrivals_from",
				     s.arrivals_from_gauges ? "running + waiting + finished" : "finished requests");
	}
	r |= add_finite(c, "mean_rate", s.mean_rate);
	r |= add_finite(c, "peak_rate", s.peak_rate);
	r |= add_finite(c, "burstiness", s.burstiness);
	r |= add_finite(c, "input_len_mean", s.input_mean);
	r |= add_finite(c, "output_len_mean", s.output_mean);
	r |= add_finite(c, "prefix_cache_hit_rate", s.prefix_hit_rate);
	r |= json_add_number(c, "counter_resets", s.resets);
	if (r < 0 || probe_rate_profile_points_to_json(c, "rate_profile", &hours) < 0 || add_intervals(c, a) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}
