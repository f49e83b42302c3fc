/* daemon-metrics.c — goodputd's Prometheus text file, for node_exporter's
 * textfile collector (and anything else that reads the exposition format).
 *
 * goodputd is not scraped itself: monitoring on a GPU host already runs
 * node_exporter, whose textfile collector reads *.prom files. So the daemon
 * writes one file — metrics_file of goodputd.json, by default goodput.prom
 * in $RUNTIME_DIRECTORY (/run/goodputd under systemd); without either it
 * writes none — to a temporary name beside it and renames it over the old
 * one, so a scrape never reads half a file. It holds the daemon's own health
 * (version, start time, state, queue, connections, memory) and, for the
 * newest studies of the store, their state, trials by outcome, progress and
 * the answer — its cost from store_study_best(), the one figure every other
 * place shows. Names follow Prometheus' conventions: the goodput_ prefix,
 * base units in the name (_seconds, _bytes, _dollars), _ratio for 0..1.
 *
 * The file is rewritten at start, within a second of anything that changes
 * it (a runner event, a scheduling step), and every minute, on the loop: a
 * few indexed reads per study. */
#include "daemon-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "file-util.h"
#include "log.h"

#define METRICS_DEBOUNCE_USEC USEC_PER_SEC
#define METRICS_REFRESH_USEC  (60 * USEC_PER_SEC)
#define METRICS_MAX_STUDIES   100

/* The file to write (the caller frees), or NULL when there is none. */
static char *metrics_path(struct daemon *d)
{
	const char *rt = getenv("RUNTIME_DIRECTORY");
	char *p = NULL;

	if (d->config->metrics_file)
		return strdup(d->config->metrics_file);
	if (!rt || !*rt)
		return NULL;
	/* $RUNTIME_DIRECTORY may list several paths separated by ':'; the first is ours */
	if (asprintf(&p, "%.*s/goodput.prom", (int)strcspn(rt, ":"), rt) < 0)
		return NULL;
	return p;
}

void daemon_metrics_label(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

void daemon_metrics_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_study(FILE *f, const char *name, const char *study, double v)
{
	fprintf(f, "%s{study=", name);
	daemon_metrics_label(f, study);
	fprintf(f, "} %.17g\n", v);
}

static double resident_bytes(void)
{
	unsigned long pages_total, pages_resident;
	FILE *f = fopen("/proc/self/statm", "re");
	int n;

	if (!f)
		return NAN;
	n = fscanf(f, "%lu %lu", &pages_total, &pages_resident);
	fclose(f);
	return n == 2 ? (double)pages_resident * (double)sysconf(_SC_PAGESIZE) : NAN;
}

static void write_daemon(struct daemon *d, FILE *f)
{
	static const enum daemon_state states[] = { DAEMON_IDLE, DAEMON_RUNNING, DAEMON_PAUSED, DAEMON_WAITING,
						    DAEMON_STOPPING };
	uint64_t now = real_usec(), up = mono_usec() - d->start_usec;
	size_t queued = 0;
	double rss = resident_bytes();

	daemon_metrics_family(f, "goodput_daemon_info", "gauge", "goodputd's version");
	fprintf(f, "goodput_daemon_info{version=\"%s\"} 1\n", GOODPUT_VERSION);
	daemon_metrics_family(f, "goodput_daemon_start_time_seconds", "gauge", "when goodputd started (Unix time)");
	fprintf(f, "goodput_daemon_start_time_seconds %.3f\n", usec_to_sec(now - up));
	daemon_metrics_family(f, "goodput_daemon_last_update_time_seconds", "gauge",
			      "when goodputd wrote this file (Unix time)");
	fprintf(f, "goodput_daemon_last_update_time_seconds %.3f\n", usec_to_sec(now));
	daemon_metrics_family(f, "goodput_daemon_state", "gauge", "1 for goodputd's state, 0 for the others");
	for (size_t i = 0; i < ELEMENTSOF(states); i++)
		fprintf(f, "goodput_daemon_state{state=\"%s\"} %d\n", daemon_state_to_string(states[i]),
			d->state == states[i]);
	(void)daemon_queue_count(d, &queued);
	daemon_metrics_family(f, "goodput_daemon_queued_studies", "gauge", "studies queued, running or paused");
	fprintf(f, "goodput_daemon_queued_studies %zu\n", queued);
	daemon_metrics_family(f, "goodput_daemon_connections", "gauge", "clients on the control socket");
	fprintf(f, "goodput_daemon_connections %zu\n", d->ctl ? (size_t)ctl_server_n_connections(d->ctl) : 0);
	if (!isnan(rss)) {
		daemon_metrics_family(f, "goodput_daemon_resident_memory_bytes", "gauge", "goodputd's resident memory");
		fprintf(f, "goodput_daemon_resident_memory_bytes %.0f\n", rss);
	}
}

/* One study's figures, gathered before any is printed (families group
 * their samples in the format). */
struct study_figures {
	const struct store_study *st;
	unsigned counts[_STORE_TRIAL_STATE_MAX];
	double max_trials; /* NAN: unknown */
	bool have_best;
	double cost, goodput, measurements;
};

/* budget.max_trials of the stored spec, or the running study's (which
 * counts an override); NAN when neither says. */
static double max_trials_of(struct daemon *d, const struct store_study *st)
{
	_cleanup_(cJSON_Deletep) cJSON *spec = NULL;
	const cJSON *v;

	if (d->runner && d->runner_study_id == st->id) {
		struct runner_status rs;

		runner_get_status(d->runner, &rs);
		if (rs.max_trials > 0)
			return rs.max_trials;
	}
	spec = st->spec_json ? cJSON_Parse(st->spec_json) : NULL;
	v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(spec, "budget"), "max_trials");
	return cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble : NAN;
}

static void gather(struct daemon *d, const struct store_study *st, struct study_figures *fig)
{
	struct store_study_best b = { 0 };
	struct store_trial *t = NULL;
	size_t n = 0;

	*fig = (struct study_figures){ .st = st, .max_trials = max_trials_of(d, st) };
	if (store_trial_history(d->store, st->id, &t, &n, NULL) >= 0)
		for (size_t i = 0; i < n; i++)
			if ((unsigned)t[i].state < _STORE_TRIAL_STATE_MAX)
				fig->counts[t[i].state]++;
	store_trial_array_free(t, n);
	if (store_study_best(d->store, st->id, &b, NULL) >= 0) {
		fig->have_best = true;
		fig->cost = b.cost_per_mtok;
		fig->goodput = b.trial.max_goodput;
		fig->measurements = b.n;
	}
	store_study_best_done(&b);
}

static double progress(const struct study_figures *fig)
{
	unsigned finished =
		fig->counts[STORE_TRIAL_DONE] + fig->counts[STORE_TRIAL_INFEASIBLE] + fig->counts[STORE_TRIAL_FAILED];

	if (fig->st->state == STORE_STUDY_DONE || fig->st->state == STORE_STUDY_NO_FEASIBLE)
		return 1;
	if (isnan(fig->max_trials))
		return NAN;
	return fmin(1.0, finished / fig->max_trials);
}

static void write_studies(FILE *f, const struct study_figures *fig, size_t n)
{
	daemon_metrics_family(f, "goodput_study_info", "gauge", "1 for each study, with its state, engine and model");
	for (size_t i = 0; i < n; i++) {
		fputs("goodput_study_info{study=", f);
		daemon_metrics_label(f, fig[i].st->name);
		fprintf(f, ",state=\"%s\",engine=", store_study_state_to_string(fig[i].st->state));
		daemon_metrics_label(f, fig[i].st->engine);
		fputs(",model=", f);
		daemon_metrics_label(f, fig[i].st->model);
		fputs("} 1\n", f);
	}
	daemon_metrics_family(f, "goodput_study_trials", "gauge", "a study's trials by outcome");
	for (size_t i = 0; i < n; i++)
		for (int s = 0; s < _STORE_TRIAL_STATE_MAX; s++) {
			fputs("goodput_study_trials{study=", f);
			daemon_metrics_label(f, fig[i].st->name);
			fprintf(f, ",outcome=\"%s\"} %u\n", store_trial_state_to_string(s), fig[i].counts[s]);
		}
	daemon_metrics_family(f, "goodput_study_trials_max", "gauge", "a study's budget of trials");
	for (size_t i = 0; i < n; i++)
		if (!isnan(fig[i].max_trials))
			sample_study(f, "goodput_study_trials_max", fig[i].st->name, fig[i].max_trials);
	daemon_metrics_family(f, "goodput_study_progress_ratio", "gauge",
			      "the part of a study's trial budget spent (1 when done)");
	for (size_t i = 0; i < n; i++)
		if (!isnan(progress(&fig[i])))
			sample_study(f, "goodput_study_progress_ratio", fig[i].st->name, progress(&fig[i]));
	daemon_metrics_family(f, "goodput_study_best_cost_per_million_tokens_dollars", "gauge",
			      "a study's cost: the mean of every measurement of its chosen configuration");
	for (size_t i = 0; i < n; i++)
		if (fig[i].have_best)
			sample_study(f, "goodput_study_best_cost_per_million_tokens_dollars", fig[i].st->name,
				     fig[i].cost);
	daemon_metrics_family(f, "goodput_study_best_goodput_tokens_per_second", "gauge",
			      "the goodput of a study's chosen configuration at its largest rate meeting the SLA");
	for (size_t i = 0; i < n; i++)
		if (fig[i].have_best)
			sample_study(f, "goodput_study_best_goodput_tokens_per_second", fig[i].st->name,
				     fig[i].goodput);
	daemon_metrics_family(f, "goodput_study_best_measurements", "gauge",
			      "the measurements the study's cost is the mean of");
	for (size_t i = 0; i < n; i++)
		if (fig[i].have_best)
			sample_study(f, "goodput_study_best_measurements", fig[i].st->name, fig[i].measurements);
}

/* The whole text into *ret (the caller frees). */
static int metrics_text(struct daemon *d, char **ret, size_t *ret_len)
{
	struct store_study *a = NULL;
	struct study_figures *fig = NULL;
	size_t n = 0, first, len = 0;
	char *buf = NULL;
	FILE *f;

	if (store_study_list(d->store, &a, &n, NULL) < 0)
		n = 0;
	first = n > METRICS_MAX_STUDIES ? n - METRICS_MAX_STUDIES : 0;
	fig = calloc(n - first + 1, sizeof(*fig));
	f = fig ? open_memstream(&buf, &len) : NULL;
	if (!f) {
		free(fig);
		store_study_array_free(a, n);
		return -ENOMEM;
	}
	write_daemon(d, f);
	for (size_t i = first; i < n; i++)
		gather(d, &a[i], &fig[i - first]);
	write_studies(f, fig, n - first);
	daemon_watch_metrics(d, f);
	free(fig);
	store_study_array_free(a, n);
	if (fclose(f) != 0 || !buf) {
		free(buf);
		return -ENOMEM;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}

int daemon_metrics_write(struct daemon *d)
{
	_cleanup_(freep) char *path = metrics_path(d), *text = NULL;
	size_t len = 0;
	int r;

	(void)sd_event_source_set_time_relative(d->metrics_timer, METRICS_REFRESH_USEC);
	(void)sd_event_source_set_enabled(d->metrics_timer, SD_EVENT_ONESHOT);
	d->metrics_due = false;
	if (!path)
		return 0;
	r = metrics_text(d, &text, &len);
	if (r >= 0)
		/* readable by everyone (node_exporter runs as its own user)
		 * whatever goodputd's umask */
		r = file_write_atomic(path, text, len, 0644, 0);
	if (r < 0 && !d->metrics_failing)
		log_warning_errno(r, "metrics: writing %s", path);
	else if (r >= 0 && d->metrics_failing)
		log_info("metrics: writing %s again", path);
	d->metrics_failing = r < 0;
	return r;
}

static int on_metrics_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	(void)daemon_metrics_write(userdata);
	return 0;
}

void daemon_metrics_changed(struct daemon *d)
{
	if (!d->metrics_timer || d->metrics_due)
		return;
	d->metrics_due = true;
	(void)sd_event_source_set_time_relative(d->metrics_timer, METRICS_DEBOUNCE_USEC);
	(void)sd_event_source_set_enabled(d->metrics_timer, SD_EVENT_ONESHOT);
}

int daemon_metrics_init(struct daemon *d)
{
	int r;

	r = sd_event_add_time_relative(d->event, &d->metrics_timer, CLOCK_MONOTONIC, METRICS_REFRESH_USEC,
				       100 * USEC_PER_MSEC, on_metrics_timer, d);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(d->metrics_timer, "metrics-textfile");
	(void)daemon_metrics_write(d);
	return 0;
}
