/* daemon-watch.c — goodputd watching production endpoints for drift.
 *
 * Each "watch" of goodputd.json names an engine's metrics page and the study
 * tuned for its traffic. A scraper (probes/capture-scrape.h) reads the page
 * every interval on the daemon's loop; each interval's delta (capture.h:
 * lengths from the histograms, arrivals from the engine's gauges) is
 *   - added to the hour, which is written to the store's traffic_shapes as
 *     it fills (one row per endpoint and hour: the production shape beside
 *     the tuned one in reports);
 *   - judged against the study's workload: the Kolmogorov–Smirnov distance
 *     of the interval's input and output lengths from the study's (its
 *     workload regenerated with its seed, at the histogram's bucket bounds)
 *     and the change of the arrival rate from the study's (its rate
 *     profile at this time of day, else what its capture measured). An
 *     interval with fewer than min_requests finished requests is judged
 *     together with the next.
 * After `consecutive` drifted intervals in a row the watch is flagged: the
 * log says so, `goodput status` and the metrics file show it, and with
 * "retune": "queue" a copy of the study whose workload is the traffic
 * captured since the drift began — its first drifted interval left out, a
 * mixture of the old traffic and the new — is queued (named
 * STUDY-retune-TIME, in the watch's window or the study's), to run when its
 * window opens. A clean
 * interval lowers the flag. Nothing here blocks the loop: a scrape is an
 * asynchronous GET, a judgement a few thousand comparisons, a store write
 * one upsert. */
#include "daemon-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "capture-scrape.h"
#include "engine-profile.h"
#include "json-util.h"
#include "log.h"
#include "workload-json.h"

#define TUNED_SAMPLES       4000
#define TUNED_RETRY_USEC    (60 * USEC_PER_SEC)
#define STUDY_NAME_HEAD_MAX 96

struct daemon_watch {
	struct daemon *d;
	struct daemon_watch_config cfg; /* strings: the copies below */
	char *url, *study, *engine, *window;
	struct probe_scraper *scraper;
	struct probe_capture_scrape last;
	bool have_last;

	/* the workload the study was tuned for */
	bool have_tuned;
	uint32_t *tuned_in, *tuned_out;
	size_t n_tuned;
	struct probe_rate_profile tuned_profile;
	double tuned_scale, tuned_rate; /* profile scale; the captured rate (NAN: unknown) */
	char *tuned_error;

	/* what is being added up: the interval(s) being judged; since the
	 * drift began, its first interval (a mixture of the old traffic and
	 * the new) apart from the rest; the hour */
	struct probe_capture_acc pending, drift_first, drifted, hour;
	uint64_t hour_usec;
	double hour_drift;
	bool hour_flagged;

	/* the latest judgement */
	bool judged;
	double drift, input_ks, output_ks, rate, rate_change;
	unsigned in_a_row;
	bool flagged;
	uint64_t flagged_usec;
	char *retune_study;

	unsigned scrapes, failed_scrapes;
	char *error;
};

static struct daemon_watch *watch_free(struct daemon_watch *w)
{
	if (!w)
		return NULL;
	probe_scraper_free(w->scraper);
	probe_capture_acc_done(&w->pending);
	probe_capture_acc_done(&w->drift_first);
	probe_capture_acc_done(&w->drifted);
	probe_capture_acc_done(&w->hour);
	free(w->tuned_in);
	free(w->tuned_out);
	free(w->tuned_error);
	free(w->retune_study);
	free(w->error);
	free(w->url);
	free(w->study);
	free(w->engine);
	free(w->window);
	free(w);
	return NULL;
}

static void set_text(char **field, const char *text)
{
	free(*field);
	*field = text ? strdup(text) : NULL;
}

/* ---- the study's workload ---- */

/* The stored study's spec and its engine's profile (whose extra knobs the
 * spec may use). */
static int load_spec(struct daemon_watch *w, cJSON **ret_spec, struct engine_profile **ret_p, struct error *err)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(cJSON_Deletep) cJSON *spec = NULL;
	struct store_study st = { 0 };
	int r;

	r = store_study_get_by_name(w->d->store, w->study, &st, err);
	if (r >= 0)
		r = json_parse_strict("stored spec", st.spec_json, strlen(st.spec_json), &spec, err);
	if (r >= 0)
		r = engine_profile_find(st.engine, w->d->config->engines_dir, &p, err);
	store_study_done(&st);
	if (r < 0)
		return r;
	*ret_spec = TAKE_PTR(spec);
	*ret_p = TAKE_PTR(p);
	return 0;
}

/* The study's lengths (regenerated with its seed) and rate. */
static int load_tuned(struct daemon_watch *w, struct error *err)
{
	_cleanup_(study_freep) struct study *s = NULL;
	_cleanup_(probe_workload_freep) struct probe_workload *wl = NULL;
	struct probe_workload_config c;
	struct store_study st = { 0 };
	const cJSON *rate;
	int r;

	r = store_study_get_by_name(w->d->store, w->study, &st, err);
	if (r >= 0)
		r = engine_profile_load_study(st.spec_json, st.engine, w->d->config->engines_dir, NULL, &s, err);
	store_study_done(&st);
	if (r < 0)
		return r;
	c = s->workload;
	c.num_prompts = TUNED_SAMPLES;
	c.num_warmup = 0;
	c.lengths_only = true;
	c.arrival = PROBE_ARRIVAL_INF; /* lengths only */
	r = probe_workload_generate(&c, &wl, err);
	if (r < 0)
		return r;
	free(w->tuned_in);
	free(w->tuned_out);
	w->tuned_in = malloc(wl->n_requests * sizeof(uint32_t));
	w->tuned_out = malloc(wl->n_requests * sizeof(uint32_t));
	if (!w->tuned_in || !w->tuned_out)
		return error_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < wl->n_requests; i++) {
		w->tuned_in[i] = wl->requests[i].input_len;
		w->tuned_out[i] = wl->requests[i].output_len;
	}
	w->n_tuned = wl->n_requests;
	qsort(w->tuned_in, w->n_tuned, sizeof(uint32_t), array_cmp_u32);
	qsort(w->tuned_out, w->n_tuned, sizeof(uint32_t), array_cmp_u32);
	w->tuned_profile = s->workload.profile;
	w->tuned_scale = s->workload.profile.n && isfinite(s->workload.request_rate)
				 ? s->workload.request_rate / probe_rate_profile_mean(&s->workload.profile)
				 : 1;
	rate = s->workload_captured ? cJSON_GetObjectItemCaseSensitive(s->workload_captured, "mean_rate") : NULL;
	w->tuned_rate = cJSON_IsNumber(rate) && rate->valuedouble > 0 ? rate->valuedouble : NAN;
	w->have_tuned = true;
	set_text(&w->tuned_error, NULL);
	return 0;
}

/* The study's rate at realtime now: its profile's, else its capture's. */
static double tuned_rate_at(const struct daemon_watch *w, uint64_t now)
{
	time_t t = (time_t)(now / USEC_PER_SEC);
	struct tm tm;

	if (w->tuned_profile.n && localtime_r(&t, &tm))
		return w->tuned_scale *
		       probe_rate_profile_at(&w->tuned_profile,
					     (uint32_t)(tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec));
	return w->tuned_rate;
}

/* ---- the hour in the store ---- */

static uint64_t hour_start(uint64_t real)
{
	time_t t = (time_t)(real / USEC_PER_SEC);
	struct tm tm;

	if (!localtime_r(&t, &tm))
		return real / (3600 * USEC_PER_SEC) * 3600 * USEC_PER_SEC;
	tm.tm_min = tm.tm_sec = 0;
	return (uint64_t)mktime(&tm) * USEC_PER_SEC;
}

static void store_hour(struct daemon_watch *w)
{
	_cleanup_(cJSON_Deletep) cJSON *block = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	struct probe_capture_summary s;
	struct probe_workload_config c;
	struct store_traffic_shape t;
	struct error err = { 0 };
	int r;

	if (!w->hour.n_intervals)
		return;
	probe_capture_summarize(&w->hour, &s);
	probe_workload_config_init(&c);
	if (probe_capture_acc_workload(&w->hour, &c, NULL) >= 0 &&
	    probe_capture_to_json(&w->hour, &c, "metrics", w->url, w->cfg.interval_usec, &block) >= 0)
		text = cJSON_PrintUnformatted(block);
	t = (struct store_traffic_shape){
		.watch = w->url,
		.study = w->study,
		.hour_usec = w->hour_usec,
		.seconds = w->hour.seconds,
		.requests = s.requests,
		.arrivals = s.arrivals,
		.mean_rate = s.mean_rate,
		.peak_rate = s.peak_rate,
		.burstiness = s.burstiness,
		.input_mean = s.input_mean,
		.output_mean = s.output_mean,
		.prefix_hit_rate = s.prefix_hit_rate,
		.drift = w->hour_drift,
		.rate_change = w->judged ? w->rate_change : NAN,
		.flagged = w->hour_flagged,
		.shape_json = text,
	};
	r = store_traffic_upsert(w->d->store, &t, &err);
	if (r < 0)
		log_warning("watch %s: %s", w->url, error_str(&err, r));
}

/* ---- drift ---- */

static int queue_retune(struct daemon_watch *w, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *spec = NULL, *block = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	_cleanup_(study_freep) struct study *s = NULL;
	struct study_options so = { 0 };
	struct probe_workload_config c;
	cJSON *workload, *captured;
	char name[STUDY_NAME_MAX + 1], stamp[16];
	time_t now = time(NULL);
	struct tm tm;
	int64_t id;
	int r;

	r = load_spec(w, &spec, &p, err);
	if (r < 0)
		return r;
	/* the new traffic: the drifted intervals after the first, which mixes old and new, unless
	 * they are too few to say anything */
	if (w->drifted.requests < w->cfg.min_requests && probe_capture_acc_merge(&w->drifted, &w->drift_first, err) < 0)
		return -EINVAL;
	probe_workload_config_init(&c);
	r = probe_capture_acc_workload(&w->drifted, &c, err);
	if (r >= 0)
		r = probe_capture_to_json(&w->drifted, &c, "metrics", w->url, w->cfg.interval_usec, &block);
	if (r < 0)
		return r == -ENOMEM ? error_set(err, r, "out of memory") : r;
	/* the study's block keeps its counts, seed and percentiles; the traffic's shape replaces its own */
	workload = cJSON_GetObjectItemCaseSensitive(spec, "workload");
	if (!cJSON_IsObject(workload))
		return error_set(err, -EINVAL, "the stored spec of %s has no workload", w->study);
	cJSON_DeleteItemFromObjectCaseSensitive(workload, "captured");
	captured = cJSON_DetachItemFromObjectCaseSensitive(block, "captured");
	if (!captured || !cJSON_AddItemToObject(workload, "captured", captured)) {
		cJSON_Delete(captured);
		return error_set(err, -ENOMEM, "out of memory");
	}
	if (probe_workload_shape_to_json(&c, workload) < 0)
		return error_set(err, -ENOMEM, "out of memory");
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime_r(&now, &tm) ? &tm : gmtime_r(&now, &tm));
	snprintf(name, sizeof(name), "%.*s-retune-%s", STUDY_NAME_HEAD_MAX, w->study, stamp);
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "name");
	if (!cJSON_AddStringToObject(spec, "name", name))
		return error_set(err, -ENOMEM, "out of memory");
	if (w->window) {
		cJSON_DeleteItemFromObjectCaseSensitive(spec, "window");
		if (!cJSON_AddStringToObject(spec, "window", w->window))
			return error_set(err, -ENOMEM, "out of memory");
	}
	so.extra_knobs = (const char *const *)p->extra_knobs;
	r = study_from_json(spec, &so, &s, err);
	if (r >= 0)
		r = runner_study_insert(w->d->store, s, NULL, &id, err);
	if (r < 0)
		return r;
	set_text(&w->retune_study, name);
	daemon_answer_cache_clear(w->d);
	daemon_schedule(w->d);
	return 0;
}

static void raise_flag(struct daemon_watch *w)
{
	struct error err = { 0 };
	int r;

	w->flagged = true;
	w->flagged_usec = real_usec();
	w->hour_flagged = true;
	log_warning("watch %s: the traffic drifted from study %s's workload (length distance %.2f, rate %+.0f%%) "
		    "for %u intervals",
		    w->url, w->study, w->drift, w->rate_change * 100, w->in_a_row);
	if (w->cfg.retune != DAEMON_RETUNE_QUEUE)
		return;
	r = queue_retune(w, &err);
	if (r < 0)
		log_error("watch %s: queueing a re-tune of %s: %s", w->url, w->study, error_str(&err, r));
	else
		log_info("watch %s: queued study %s: a re-tune of %s on the captured traffic%s%s", w->url,
			 w->retune_study, w->study, w->window ? " in " : "", w->window ? w->window : "");
}

/* Judges what is pending: 1 when it drifted, 0 when not, -1 when it cannot
 * be judged yet (too few requests, no tuned workload). */
static int judge(struct daemon_watch *w, uint64_t now)
{
	struct probe_length_histogram in, out;
	double tuned = tuned_rate_at(w, now);
	bool lengths;

	if (w->pending.requests < w->cfg.min_requests || !w->have_tuned)
		return -1;
	lengths = probe_capture_length_histogram(&w->pending.prompt, &in) &&
		  probe_capture_length_histogram(&w->pending.generation, &out);
	w->input_ks = lengths ? probe_histogram_ks(&in, w->tuned_in, w->n_tuned) : NAN;
	w->output_ks = lengths ? probe_histogram_ks(&out, w->tuned_out, w->n_tuned) : NAN;
	w->drift = fmax(w->input_ks, w->output_ks);
	w->rate = w->pending.seconds > 0 ? w->pending.arrivals / w->pending.seconds : NAN;
	w->rate_change = isfinite(tuned) && tuned > 0 ? w->rate / tuned - 1 : NAN;
	w->judged = true;
	w->hour_drift = isnan(w->hour_drift) ? w->drift : fmax(w->hour_drift, w->drift);
	return w->drift > w->cfg.threshold ||
	       (isfinite(w->rate_change) && fabs(log1p(w->rate_change)) > log1p(w->cfg.rate_threshold));
}

static void evaluate(struct daemon_watch *w, uint64_t now)
{
	struct error err = { 0 };
	int verdict;

	if (!w->have_tuned) { /* the study may be submitted after the watch started */
		int r = load_tuned(w, &err);

		if (r < 0 && (!w->tuned_error || strcmp(w->tuned_error, error_str(&err, r)) != 0)) {
			log_warning("watch %s: study %s: %s (drift is judged once it can be read)", w->url, w->study,
				    error_str(&err, r));
			set_text(&w->tuned_error, error_str(&err, r));
		}
	}
	if (!w->have_tuned) { /* nothing to compare with: the hour is still kept */
		probe_capture_acc_done(&w->pending);
		probe_capture_acc_init(&w->pending);
		return;
	}
	verdict = judge(w, now);
	if (verdict < 0)
		return;
	if (verdict) {
		w->in_a_row++;
		if (probe_capture_acc_merge(w->in_a_row == 1 ? &w->drift_first : &w->drifted, &w->pending, &err) < 0)
			log_warning("watch %s: %s", w->url, error_str(&err, -EINVAL));
		if (!w->flagged && w->in_a_row >= w->cfg.consecutive)
			raise_flag(w);
	} else {
		if (w->flagged)
			log_info("watch %s: the traffic matches study %s's workload again", w->url, w->study);
		w->in_a_row = 0;
		w->flagged = false;
		probe_capture_acc_done(&w->drift_first);
		probe_capture_acc_done(&w->drifted);
		probe_capture_acc_init(&w->drift_first);
		probe_capture_acc_init(&w->drifted);
	}
	probe_capture_acc_done(&w->pending);
	probe_capture_acc_init(&w->pending);
	daemon_metrics_changed(w->d);
}

static void add_interval(struct daemon_watch *w, const struct probe_capture_delta *dl)
{
	uint64_t hour = hour_start(dl->real_end_usec);
	struct error err = { 0 };

	if (w->hour_usec && hour != w->hour_usec) {
		store_hour(w);
		probe_capture_acc_done(&w->hour);
		probe_capture_acc_init(&w->hour);
		w->hour_drift = NAN;
		w->hour_flagged = w->flagged;
	}
	w->hour_usec = hour;
	if (probe_capture_acc_add(&w->hour, dl, &err) < 0 || probe_capture_acc_add(&w->pending, dl, &err) < 0) {
		/* other bounds: the server was replaced; start the hour and the judgement afresh */
		log_warning("watch %s: %s", w->url, error_str(&err, -EINVAL));
		store_hour(w);
		probe_capture_acc_done(&w->hour);
		probe_capture_acc_done(&w->pending);
		probe_capture_acc_init(&w->hour);
		probe_capture_acc_init(&w->pending);
		return;
	}
	evaluate(w, dl->real_end_usec);
	store_hour(w);
}

static void on_scrape(struct probe_scraper *sc, int r, const struct probe_capture_scrape *scrape,
		      const struct error *err, void *userdata)
{
	struct daemon_watch *w = userdata;
	struct probe_capture_delta dl;
	struct error e = { 0 };

	(void)sc;
	w->scrapes++;
	if (r < 0) {
		if (!w->error || strcmp(w->error, error_str(err, r)) != 0)
			log_warning("watch: %s", error_str(err, r));
		set_text(&w->error, error_str(err, r));
		w->failed_scrapes++;
		return;
	}
	if (w->error)
		log_info("watch %s: scraping again", w->url);
	set_text(&w->error, NULL);
	if (w->have_last) {
		r = probe_capture_delta(&w->last, scrape, &dl, &e);
		if (r < 0) {
			log_warning("watch %s: %s", w->url, error_str(&e, r));
			set_text(&w->error, error_str(&e, r));
		} else
			add_interval(w, &dl);
	}
	w->last = *scrape;
	w->have_last = true;
}

/* ---- starting and stopping ---- */

/* The metric names: the watch's engine profile, else the study's, else the default map. */
static void watch_map(struct daemon_watch *w, struct probe_metrics_map *ret)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	struct store_study st = { 0 };
	const char *engine = w->engine;
	struct error err = { 0 };

	if (!engine && store_study_get_by_name(w->d->store, w->study, &st, NULL) >= 0)
		engine = st.engine;
	if (engine && engine_profile_find(engine, w->d->config->engines_dir, &p, &err) < 0)
		log_warning("watch %s: %s (reading vLLM's, SGLang's and TGI's names)", w->url,
			    error_str(&err, -ENOENT));
	if (p && !probe_metrics_map_is_empty(&p->metrics))
		*ret = p->metrics;
	else
		probe_metrics_map_init_default(ret);
	store_study_done(&st);
}

static int watch_start(struct daemon *d, const struct daemon_watch_config *cfg, struct daemon_watch **ret)
{
	struct daemon_watch *w = calloc(1, sizeof(*w));
	struct probe_scraper_config sc = { .interval_usec = cfg->interval_usec };
	struct probe_metrics_map map;
	struct error err = { 0 };
	int r;

	if (!w)
		return -ENOMEM;
	w->d = d;
	w->cfg = *cfg;
	w->url = strdup(cfg->metrics_url);
	w->study = strdup(cfg->study);
	w->engine = cfg->engine ? strdup(cfg->engine) : NULL;
	w->window = cfg->window ? strdup(cfg->window) : NULL;
	w->hour_drift = NAN;
	w->drift = w->input_ks = w->output_ks = w->rate = w->rate_change = NAN;
	probe_capture_acc_init(&w->pending);
	probe_capture_acc_init(&w->drift_first);
	probe_capture_acc_init(&w->drifted);
	probe_capture_acc_init(&w->hour);
	if (!w->url || !w->study || (cfg->engine && !w->engine) || (cfg->window && !w->window)) {
		watch_free(w);
		return -ENOMEM;
	}
	watch_map(w, &map);
	sc.url = w->url;
	sc.map = &map;
	r = probe_scraper_new(d->event, &sc, on_scrape, w, &w->scraper, &err);
	if (r < 0) {
		log_error("watch %s: %s", w->url, error_str(&err, r));
		watch_free(w);
		return r;
	}
	log_info("watching %s every %.0f s against study %s (%s on drift)", w->url, usec_to_sec(cfg->interval_usec),
		 w->study, cfg->retune == DAEMON_RETUNE_QUEUE ? "a re-tune queued" : "notify");
	*ret = w;
	return 0;
}

void daemon_watch_stop(struct daemon *d)
{
	for (size_t i = 0; i < d->n_watches; i++) {
		store_hour(d->watches[i]);
		watch_free(d->watches[i]);
	}
	free(d->watches);
	d->watches = NULL;
	d->n_watches = 0;
}

int daemon_watch_start(struct daemon *d)
{
	daemon_watch_stop(d);
	if (!d->config->n_watch)
		return 0;
	d->watches = calloc(d->config->n_watch, sizeof(*d->watches));
	if (!d->watches)
		return -ENOMEM;
	for (size_t i = 0; i < d->config->n_watch; i++)
		if (watch_start(d, &d->config->watch[i], &d->watches[d->n_watches]) >= 0)
			d->n_watches++;
	return 0;
}

/* ---- what status and the metrics file show ---- */

static int add_number_or_null(cJSON *o, const char *key, double v)
{
	if (isfinite(v))
		return json_add_number(o, key, v);
	return cJSON_AddNullToObject(o, key) ? 0 : -ENOMEM;
}

int daemon_watch_status_json(struct daemon *d, cJSON *resp)
{
	cJSON *a = cJSON_AddArrayToObject(resp, "watch");

	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < d->n_watches; i++) {
		const struct daemon_watch *w = d->watches[i];
		cJSON *o = cJSON_CreateObject();
		int r = 0;

		if (!o || !cJSON_AddItemToArray(a, o)) {
			cJSON_Delete(o);
			return -ENOMEM;
		}
		r |= json_add_string(o, "metrics_url", w->url);
		r |= json_add_string(o, "study", w->study);
		r |= json_add_number(o, "interval_seconds", usec_to_sec(w->cfg.interval_usec));
		r |= json_add_bool(o, "up", w->have_last && !w->error);
		if (w->error)
			r |= json_add_string(o, "error", w->error);
		if (!w->have_tuned && w->tuned_error)
			r |= json_add_string(o, "study_error", w->tuned_error);
		r |= json_add_number(o, "scrapes", w->scrapes);
		r |= json_add_number(o, "failed_scrapes", w->failed_scrapes);
		r |= add_number_or_null(o, "drift", w->drift);
		r |= add_number_or_null(o, "input_ks", w->input_ks);
		r |= add_number_or_null(o, "output_ks", w->output_ks);
		r |= add_number_or_null(o, "rate", w->rate);
		r |= add_number_or_null(o, "rate_change", w->rate_change);
		r |= json_add_number(o, "threshold", w->cfg.threshold);
		r |= json_add_number(o, "drifted_intervals", w->in_a_row);
		r |= json_add_bool(o, "flagged", w->flagged);
		if (w->flagged)
			r |= json_add_number(o, "flagged_since", usec_to_sec(w->flagged_usec));
		r |= json_add_string(o, "retune", w->cfg.retune == DAEMON_RETUNE_QUEUE ? "queue" : "notify");
		if (w->retune_study)
			r |= json_add_string(o, "retune_study", w->retune_study);
		if (r < 0)
			return -ENOMEM;
	}
	return 0;
}

static void sample(FILE *f, const char *name, const struct daemon_watch *w, double v)
{
	if (!isfinite(v))
		return;
	fprintf(f, "%s{watch=", name);
	daemon_metrics_label(f, w->url);
	fputs(",study=", f);
	daemon_metrics_label(f, w->study);
	fprintf(f, "} %.17g\n", v);
}

void daemon_watch_metrics(struct daemon *d, FILE *f)
{
	static const struct {
		const char *name, *type, *help;
	} families[] = {
		{ "goodput_watch_up", "gauge", "1 when the watched endpoint's last scrape succeeded" },
		{ "goodput_watch_drift_ratio", "gauge",
		  "Kolmogorov-Smirnov distance of the latest interval's lengths from the study's (the larger of "
		  "input and output)" },
		{ "goodput_watch_rate_change_ratio", "gauge",
		  "the latest interval's arrival rate against the study's, minus 1" },
		{ "goodput_watch_requests_per_second", "gauge", "the latest judged interval's arrival rate" },
		{ "goodput_watch_drifted_intervals", "gauge", "drifted intervals in a row" },
		{ "goodput_watch_drift_flagged", "gauge", "1 while drift is flagged" },
		{ "goodput_watch_scrape_failures_total", "counter", "scrapes of the endpoint that failed" },
	};

	for (size_t k = 0; k < ELEMENTSOF(families) && d->n_watches; k++) {
		daemon_metrics_family(f, families[k].name, families[k].type, families[k].help);
		for (size_t i = 0; i < d->n_watches; i++) {
			const struct daemon_watch *w = d->watches[i];
			double v[] = {
				w->have_last && !w->error, w->drift, w->rate_change, w->rate, w->in_a_row, w->flagged,
				w->failed_scrapes
			};

			sample(f, families[k].name, w, v[k]);
		}
	}
}
