/* cmd-workload.c — `goodput workload capture`: the shape of the traffic a
 * server serves, as a workload block a study spec takes.
 *
 * From a server's metrics (--metrics-url): the page is read every interval
 * for the window, each interval's delta goes into one accumulator
 * (probes/capture.h) and a progress line to stderr; at the end the window
 * becomes the block. From a request log (--from-log): the log's requests
 * replayed exactly (samples lengths, trace arrivals), or with --shape its
 * histograms, rate, burstiness and rate per hour, as a server's metrics
 * would have given them. SIGINT or SIGTERM end a window early: what was
 * captured is still written, and goodput exits 130. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "capture-scrape.h"
#include "cli-util.h"
#include "commands.h"
#include "engine-profile.h"
#include "exit-status.h"
#include "json-dispatch.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"
#include "workload-json.h"

static struct {
	const char *metrics_url, *from_log, *output, *engine, *engines_dir;
	uint64_t duration_usec, interval_usec;
	bool shape;
} arg = { .duration_usec = 3600 * USEC_PER_SEC, .interval_usec = 15 * USEC_PER_SEC };

enum {
	OPT_DURATION,
	OPT_INTERVAL,
};

static int parse_opt(intptr_t id, const char *value, struct error *err)
{
	const char *name = id == OPT_DURATION ? "--duration" : "--interval";
	double s;

	if (json_parse_duration(value, &s) < 0 || !(s >= 0.1) || s > 31 * 86400.0)
		return error_set(err, -EINVAL, "%s: expected a duration (\"90\", \"15s\", \"45m\", \"1h\"), got \"%s\"",
				 name, value);
	*(id == OPT_DURATION ? &arg.duration_usec : &arg.interval_usec) = (uint64_t)(s * USEC_PER_SEC);
	return 0;
}

static const struct verb_option options[] = {
	{ "metrics-url", 0, "URL", "the serving engine's metrics (http://host:port/metrics)", VERB_STRING,
	  &arg.metrics_url },
	{ "from-log", 0, "FILE",
	  "a request log instead: goodput probe --save-requests lines, or JSONL\nof OpenAI request/response pairs "
	  "with a timestamp and usage",
	  VERB_STRING, &arg.from_log },
	{ "duration", 0, "D", "the window (default 1h; 90, 15s, 45m, 2h)", VERB_CALL, (void *)OPT_DURATION },
	{ "interval", 0, "I",
	  "between scrapes (default 15s); a log's arrivals are counted\nper interval for burstiness (wider for a "
	  "sparse log: at most\n4 intervals per request)",
	  VERB_CALL, (void *)OPT_INTERVAL },
	{ "output", 'o', "FILE", "write the workload block to FILE (default stdout)", VERB_STRING, &arg.output },
	{ "engine", 0, "PROFILE",
	  "the engine profile whose metric names are read (default vllm,\nelse the built-in vLLM, SGLang and TGI "
	  "names; sglang, tgi, sim,\nor a profile path)",
	  VERB_STRING, &arg.engine },
	{ "engines-dir", 0, "DIR", "look for engine profiles here first", VERB_STRING, &arg.engines_dir },
	{ "shape", 0, NULL,
	  "--from-log: write the log's shape (histograms, rate, burstiness,\nrate per hour) instead of replaying it",
	  VERB_FLAG, &arg.shape },
	VERB_OPTION_END,
};

/* ---- writing the block ---- */

static int write_block(const cJSON *j)
{
	_cleanup_(cjson_freep) char *text = cJSON_Print(j);
	_cleanup_(fclosep) FILE *f = NULL;

	if (!text)
		return log_error_errno(-ENOMEM, "out of memory");
	if (!arg.output) {
		printf("%s\n", text);
		return fflush(stdout) == 0 ? 0 : log_error_errno(-EIO, "cannot write the workload to stdout");
	}
	f = fopen(arg.output, "we");
	if (!f)
		return log_error_errno(-errno, "-o: cannot open %s: %s", arg.output, strerror(errno));
	fprintf(f, "%s\n", text);
	if (fflush(f) != 0 || ferror(f))
		return log_error_errno(-EIO, "-o: cannot write %s", arg.output);
	return 0;
}

static void summary_line(const struct probe_capture_acc *a)
{
	struct probe_capture_summary s;

	probe_capture_summarize(a, &s);
	log_info("%.0f requests in %.0f s: %.3g req/s arriving (peak %.3g), burstiness %.3g; input %.1f, output %.1f "
		 "tokens on average%s",
		 s.requests, s.duration_s, s.mean_rate, s.peak_rate, s.burstiness, s.input_mean, s.output_mean,
		 s.resets ? " (the server restarted during the window)" : "");
}

/* ---- from a log ---- */

static int from_log(void)
{
	_cleanup_(probe_samples_freep) struct probe_samples *s = NULL;
	_cleanup_(probe_capture_acc_done) struct probe_capture_acc a = { 0 };
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(freep) char *path = NULL;
	struct probe_workload_config w;
	struct error err = { 0 };
	int r;

	r = probe_samples_load(arg.from_log, &s, &err);
	if (r >= 0)
		r = probe_capture_acc_from_samples(&a, s, arg.interval_usec, &err);
	if (r < 0)
		return log_error_errno(r, "%s", error_str(&err, r));
	if (s->skipped_failed)
		log_warning("%s: %zu failed requests left out", arg.from_log, s->skipped_failed);
	probe_workload_config_init(&w);
	if (arg.shape) {
		r = probe_capture_acc_workload(&a, &w, &err);
		if (r < 0)
			return log_error_errno(r, "%s: %s", arg.from_log, error_str(&err, r));
	} else {
		/* the log replayed: its lengths in its order, its arrival times */
		path = realpath(arg.from_log, NULL);
		if (!path)
			return log_error_errno(-errno, "%s: %s", arg.from_log, strerror(errno));
		w.samples_path = path;
		w.input.kind = w.output.kind = PROBE_DIST_SAMPLES;
		w.input.mean = a.prompt.count > 0 ? a.prompt.sum / a.prompt.count : NAN;
		w.output.mean = a.generation.count > 0 ? a.generation.sum / a.generation.count : NAN;
		w.num_prompts = (uint32_t)MIN(s->n, (size_t)PROBE_MAX_REQUESTS);
		w.arrival = s->have_time && s->n > 1 ? PROBE_ARRIVAL_TRACE : PROBE_ARRIVAL_POISSON;
		w.request_rate = w.arrival == PROBE_ARRIVAL_TRACE ? probe_samples_rate(s) : 1.0;
		if (!isfinite(w.request_rate) || w.request_rate <= 0) {
			w.arrival = PROBE_ARRIVAL_POISSON;
			w.request_rate = 1.0;
		}
	}
	r = probe_capture_to_json(&a, &w, "log", arg.from_log, arg.interval_usec, &j);
	if (r >= 0 && !arg.shape)
		r = json_add_number(j, "num_prompts", w.num_prompts);
	if (r < 0)
		return log_error_errno(r, "out of memory");
	summary_line(&a);
	return write_block(j);
}

/* ---- from a server's metrics ---- */

struct capture {
	sd_event *event;
	struct probe_scraper *scraper;
	struct probe_capture_acc acc;
	struct probe_capture_scrape last;
	bool have_last, stopped_by_signal;
	unsigned failed_scrapes;
	uint64_t start_usec, end_usec;
	int r;
};

static void on_scrape(struct probe_scraper *sc, int r, const struct probe_capture_scrape *scrape,
		      const struct error *err, void *userdata)
{
	struct capture *c = userdata;
	struct probe_capture_delta d;
	struct error e = { 0 };

	(void)sc;
	if (r < 0) {
		/* before the first scrape there is nothing to measure against: give up */
		if (!c->have_last) {
			log_error("%s", error_str(err, r));
			c->r = r;
			(void)sd_event_exit(c->event, 0);
			return;
		}
		c->failed_scrapes++;
		log_warning("%s (the next scrape counts from the last good one)", error_str(err, r));
		return;
	}
	if (c->have_last) {
		r = probe_capture_delta(&c->last, scrape, &d, &e);
		if (r >= 0)
			r = probe_capture_acc_add(&c->acc, &d, &e);
		if (r < 0) {
			log_error("%s", error_str(&e, r));
			c->r = r;
			(void)sd_event_exit(c->event, 0);
			return;
		}
		fprintf(stderr, "%6.0fs  %6.0f finished  %7.3g req/s  input %7.1f  output %7.1f%s\n",
			(double)(scrape->mono_usec - c->start_usec) / 1e6, c->acc.requests,
			d.arrivals / ((double)(d.mono_end_usec - d.mono_start_usec) / 1e6),
			c->acc.prompt.count > 0 ? c->acc.prompt.sum / c->acc.prompt.count : 0.0,
			c->acc.generation.count > 0 ? c->acc.generation.sum / c->acc.generation.count : 0.0,
			d.reset ? "  (counters reset: the server restarted)" : "");
	} else
		c->start_usec = scrape->mono_usec;
	c->last = *scrape;
	c->have_last = true;
	if (scrape->mono_usec >= c->start_usec + arg.duration_usec)
		(void)sd_event_exit(c->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct capture *c = userdata;

	(void)si;
	c->stopped_by_signal = true;
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int load_map(struct probe_metrics_map *ret)
{
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	struct error err = { 0 };
	int r;

	r = engine_profile_find(arg.engine ? arg.engine : "vllm", arg.engines_dir, &p, &err);
	if (r == -ENOENT && !arg.engine) {
		/* no profiles installed: the built-in names (vLLM's, SGLang's, TGI's) */
		probe_metrics_map_init_default(ret);
		return 0;
	}
	if (r < 0)
		return log_error_errno(r, "--engine: %s", error_str(&err, r));
	if (p->metrics.format != PROBE_METRICS_PROMETHEUS)
		return log_error_errno(-EINVAL,
				       "--engine %s: its metrics are not Prometheus text (%s), which has no request "
				       "lengths to capture",
				       p->name, probe_metrics_format_names[p->metrics.format]);
	if (probe_metrics_map_is_empty(&p->metrics))
		probe_metrics_map_init_default(ret);
	else
		*ret = p->metrics;
	return 0;
}

static int from_metrics(void)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	struct capture c = { .r = 0 };
	struct probe_metrics_map map;
	struct probe_workload_config w;
	struct probe_scraper_config sc = { .url = arg.metrics_url, .map = &map, .interval_usec = arg.interval_usec };
	struct error err = { 0 };
	int r;

	r = load_map(&map);
	if (r < 0)
		return r;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	r = cli_event_new(on_signal, &c, &c.event);
	if (r < 0)
		return r;
	probe_capture_acc_init(&c.acc);
	r = probe_scraper_new(c.event, &sc, on_scrape, &c, &c.scraper, &err);
	if (r < 0)
		log_error_errno(r, "--metrics-url: %s", error_str(&err, r));
	else
		r = sd_event_loop(c.event);
	if (r >= 0)
		r = c.r;
	c.scraper = probe_scraper_free(c.scraper);
	c.event = sd_event_unref(c.event);
	if (r >= 0) {
		if (c.failed_scrapes)
			log_warning("%u scrapes failed during the window", c.failed_scrapes);
		probe_workload_config_init(&w);
		r = probe_capture_acc_workload(&c.acc, &w, &err);
		if (r < 0)
			log_error_errno(r, "%s: %s", arg.metrics_url, error_str(&err, r));
	}
	if (r >= 0) {
		r = probe_capture_to_json(&c.acc, &w, "metrics", arg.metrics_url, arg.interval_usec, &j);
		if (r < 0)
			log_error_errno(r, "out of memory");
	}
	if (r >= 0) {
		summary_line(&c.acc);
		r = write_block(j);
	}
	probe_capture_acc_done(&c.acc);
	curl_global_cleanup();
	if (r >= 0 && c.stopped_by_signal)
		return 1;
	return r;
}

/* ---- generate: the requests a block makes ---- */

static int generate(const char *path)
{
	_cleanup_(cJSON_Deletep) cJSON *doc = NULL;
	_cleanup_(probe_workload_freep) struct probe_workload *w = NULL;
	struct probe_workload_spec spec = { 0 };
	struct error err = { 0 };
	int r;

	r = json_parse_file(path, 1u << 20, &doc, &err);
	if (r >= 0) {
		probe_workload_config_init(&spec.config);
		spec.config.num_prompts = 200; /* a study's default */
		r = probe_workload_from_json(doc, "", &spec, &err);
	}
	if (r >= 0) {
		spec.config.lengths_only = true;
		r = probe_workload_generate(&spec.config, &w, &err);
	}
	if (r < 0)
		return log_error_errno(r, "%s: %s", path, error_str(&err, r));
	for (size_t i = 0; i < w->n_requests; i++) {
		const struct probe_request_spec *q = &w->requests[i];

		printf("{\"index\": %u, \"warmup\": %s, \"arrival_usec\": %" PRIu64
		       ", \"input_len\": %u, \"output_len\": %u, \"prefix_id\": %u}\n",
		       q->index, q->warmup ? "true" : "false", q->arrival_usec, q->input_len, q->output_len,
		       q->prefix_id);
	}
	return fflush(stdout) == 0 ? 0 : log_error_errno(-EIO, "cannot write to stdout");
}

static int run(const struct verb *v, int argc, char **argv)
{
	int r;

	(void)v;
	if (strcmp(argv[0], "generate") == 0) {
		if (argc != 2) {
			log_error("usage: goodput workload generate FILE");
			return CLI_EXIT_USAGE;
		}
		return generate(argv[1]) < 0 ? CLI_EXIT_FAILED : CLI_EXIT_OK;
	}
	if (strcmp(argv[0], "capture") != 0 || argc != 1) {
		log_error("unknown workload command '%s' (expected capture or generate; see 'goodput workload --help')",
			  argv[0]);
		return CLI_EXIT_USAGE;
	}
	if (!arg.metrics_url == !arg.from_log) {
		log_error("give one of --metrics-url and --from-log");
		return CLI_EXIT_USAGE;
	}
	if (arg.shape && !arg.from_log) {
		log_error("--shape: only with --from-log (a server's metrics always give the shape)");
		return CLI_EXIT_USAGE;
	}
	if (arg.interval_usec > arg.duration_usec) {
		log_error("--interval: longer than --duration");
		return CLI_EXIT_USAGE;
	}
	r = arg.from_log ? from_log() : from_metrics();
	if (r == 1)
		return CLI_EXIT_INTERRUPTED;
	return r < 0 ? CLI_EXIT_FAILED : CLI_EXIT_OK;
}

/* clang-format off */
const struct verb verb_workload = {
	.name = "workload",
	.summary = "capture the traffic a server serves as a study's workload block",
	.usage = "capture (--metrics-url URL | --from-log FILE) [--duration D] [--interval I] [-o FILE]\n"
		 "generate FILE",
	.about = "Measures the workload a serving engine actually serves, for a study to tune on:\n"
		 "input and output length distributions (the deltas of the engine's length\n"
		 "histograms over the window), the mean and peak rate, a burstiness estimate\n"
		 "(the gamma shape of the variation of per-interval requests), the rate per\n"
		 "hour of the day, and the prefix-cache hit rate as a shared prefix. Counter\n"
		 "resets (a restarted server) are handled; a missing series is an error that\n"
		 "names it. A progress line goes to stderr every interval. Requests are\n"
		 "counted when they finish, as engines count them.\n"
		 "\n"
		 "--from-log reads a request log instead and writes a block that replays it\n"
		 "exactly: each request's lengths and arrival time, in order.\n"
		 "\n"
		 "generate prints the requests a workload block makes (one JSON line each:\n"
		 "arrival_usec, input_len, output_len), as the probe and the virtual-time\n"
		 "simulation would send them for its seed (num_prompts 200 unless it says).",
	.notes = "The block goes into a study spec as \"workload\" (keep num_prompts, seed and\n"
		 "ignore_eos of your own), or to `goodput probe --workload FILE`. SIGINT ends the\n"
		 "window early; what was captured is written.",
	.args = { "capture|generate", 1, 2 },
	.options = options, .parse = parse_opt, .run = run,
};
/* clang-format on */
