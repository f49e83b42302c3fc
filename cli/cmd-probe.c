/* cmd-probe.c — `goodput probe`: benchmark an OpenAI-compatible server on
 * its own, with `vllm bench serve`'s flag names and report, plus goodput's
 * SLA, goodput and --find-max-rate.
 *
 * The command parses flags (workload and SLA flags through
 * probes/workload-flags.h, shared with goodput-sim), runs a probe on one
 * sd-event loop, prints a progress line on stderr while it runs, and then
 * the vLLM-like table or --json. --save-result writes the JSON to a file,
 * --save-requests one line per request. The API key never appears in any
 * output. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "commands.h"
#include "exit-status.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "probe.h"
#include "time-util.h"
#include "workload-flags.h"

#define MAX_HEADERS 64

enum {
	ARG_BASE_URL = 256,
	ARG_HOST,
	ARG_PORT,
	ARG_ENDPOINT,
	ARG_MODEL,
	ARG_HEADER,
	ARG_API_KEY,
	ARG_SAVE_RESULT,
	ARG_SAVE_REQUESTS,
	ARG_JSON,
	ARG_FIND_MAX_RATE,
	ARG_RATE_TOLERANCE,
	ARG_MAX_LOAD_POINTS,
	ARG_REQUEST_TIMEOUT,
	ARG_PROMPT_FORMAT,
	ARG_NO_PROGRESS,
	ARG_NO_METRICS,
	ARG_INSECURE,
	ARG_MAX_EVENT_BYTES,
};

static const struct option own_options[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "base-url", required_argument, NULL, ARG_BASE_URL },
	{ "host", required_argument, NULL, ARG_HOST },
	{ "port", required_argument, NULL, ARG_PORT },
	{ "endpoint", required_argument, NULL, ARG_ENDPOINT },
	{ "model", required_argument, NULL, ARG_MODEL },
	{ "header", required_argument, NULL, ARG_HEADER },
	{ "api-key", required_argument, NULL, ARG_API_KEY },
	{ "save-result", required_argument, NULL, ARG_SAVE_RESULT },
	{ "save-requests", required_argument, NULL, ARG_SAVE_REQUESTS },
	{ "json", no_argument, NULL, ARG_JSON },
	{ "find-max-rate", no_argument, NULL, ARG_FIND_MAX_RATE },
	{ "rate-tolerance", required_argument, NULL, ARG_RATE_TOLERANCE },
	{ "max-load-points", required_argument, NULL, ARG_MAX_LOAD_POINTS },
	{ "request-timeout", required_argument, NULL, ARG_REQUEST_TIMEOUT },
	{ "prompt-format", required_argument, NULL, ARG_PROMPT_FORMAT },
	{ "no-progress", no_argument, NULL, ARG_NO_PROGRESS },
	{ "no-server-metrics", no_argument, NULL, ARG_NO_METRICS },
	{ "insecure", no_argument, NULL, ARG_INSECURE },
	{ "max-event-bytes", required_argument, NULL, ARG_MAX_EVENT_BYTES },
	{ NULL, 0, NULL, 0 },
};

struct ctx {
	sd_event *event;
	bool json, progress, tty;
	uint64_t start_usec, last_progress_usec;
	size_t progress_len;
	unsigned percentile_metrics;
	int result;
	bool done;
};

static void help(void)
{
	printf("Usage: goodput probe [OPTIONS]\n"
	       "\n"
	       "Benchmarks an OpenAI-compatible server (vLLM, SGLang, llama.cpp, goodput-sim, ...)\n"
	       "with streaming requests and reports TTFT, TPOT, ITL, E2E, throughput and goodput\n"
	       "under an SLA, like `vllm bench serve`; --find-max-rate searches for the largest\n"
	       "request rate that meets the SLA.\n"
	       "\n"
	       "Server:\n"
	       "  --base-url URL           server URL (default http://127.0.0.1:8000)\n"
	       "  --host HOST, --port N    instead of --base-url\n"
	       "  --endpoint PATH          /v1/completions (default) or /v1/chat/completions\n"
	       "  --model NAME             the \"model\" field (omitted when not given)\n"
	       "  --header NAME=VALUE      an extra HTTP header (repeatable)\n"
	       "  --api-key KEY            bearer token (default: $OPENAI_API_KEY)\n"
	       "  --prompt-format ids|text token-id arrays (default for completions) or text\n"
	       "  --request-timeout SEC    per request (default 600)\n"
	       "  --max-event-bytes N      largest SSE event accepted (default 1048576)\n"
	       "  --insecure               https without certificate checks\n"
	       "  --no-server-metrics      do not scrape /metrics during load points\n"
	       "\n"
	       "Workload, arrivals and SLA (vllm bench serve's names):\n");
	probe_workload_flags_help(stdout);
	printf("\n"
	       "Search and output:\n"
	       "  --find-max-rate          saturation run, then search the largest rate meeting the SLA\n"
	       "  --rate-tolerance F       stop when the bracket is within F (default 0.05)\n"
	       "  --max-load-points N      finite-rate points before the search gives up (default 12)\n"
	       "  --json                   print the result as JSON (vLLM's key names)\n"
	       "  --save-result FILE       write the JSON result to FILE\n"
	       "  --save-requests FILE     write one JSON line per request to FILE\n"
	       "  --no-progress            no progress line on stderr\n"
	       "  -h, --help               this help\n"
	       "\n" CLI_EXIT_STATUS_HELP);
}

static const char *rate_str(char *buf, size_t size, double rate)
{
	if (isinf(rate))
		snprintf(buf, size, "inf");
	else
		snprintf(buf, size, "%.3g/s", rate);
	return buf;
}

static void clear_progress(struct ctx *c)
{
	if (c->tty && c->progress_len > 0) {
		fprintf(stderr, "\r%*s\r", (int)c->progress_len, "");
		c->progress_len = 0;
	}
}

static void on_event(struct probe *p, const struct probe_event *ev, void *userdata)
{
	struct ctx *c = userdata;
	char rb[32], el[32], line[256];
	uint64_t now = mono_usec();
	int n;

	if (!c->progress)
		return;
	switch (ev->kind) {
	case PROBE_EVENT_LOAD_POINT_START:
		clear_progress(c);
		fprintf(stderr, "load point %zu: %s, rate %s\n", ev->load_point + 1,
			ev->saturation ? "saturation" : "search", rate_str(rb, sizeof(rb), ev->rate));
		return;
	case PROBE_EVENT_PROGRESS:
		/* A terminal gets a line rewritten in place; a log a line every 10 s. */
		if (!c->tty && now - c->last_progress_usec < 10 * USEC_PER_SEC)
			return;
		c->last_progress_usec = now;
		n = snprintf(line, sizeof(line), "%s%u/%u requests done (%u failed), %s elapsed, rate %s",
			     ev->progress.warmup ? "warm-up: " : "", ev->progress.done, ev->progress.total,
			     ev->progress.failed, format_duration(el, sizeof(el), ev->progress.elapsed_usec),
			     rate_str(rb, sizeof(rb),
				      ev->progress.elapsed_usec > 0
					      ? ev->progress.done / usec_to_sec(ev->progress.elapsed_usec)
					      : 0));
		if (c->tty) {
			clear_progress(c);
			fprintf(stderr, "%s", line);
			c->progress_len = n > 0 ? (size_t)n : 0;
		} else
			fprintf(stderr, "%s\n", line);
		return;
	case PROBE_EVENT_LOAD_POINT_DONE:
		clear_progress(c);
		fprintf(stderr, "load point %zu: %u completed, %u failed, attainment %.1f%%, SLA %s\n",
			ev->load_point + 1, ev->point->result.completed, ev->point->result.failed,
			ev->point->result.attainment * 100, ev->point->result.sla_met ? "met" : "missed");
		return;
	}
}

static void on_done(struct probe *p, int r, void *userdata)
{
	struct ctx *c = userdata;

	c->result = r;
	c->done = true;
	(void)sd_event_exit(c->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct ctx *c = userdata;

	c->result = -EINTR;
	return sd_event_exit(c->event, 0);
}

static cJSON *build_json(const struct probe *p, const struct probe_config *cfg)
{
	_cleanup_(cJSON_Deletep) cJSON *root = NULL, *arr = NULL;
	const struct probe_load_point *pts;
	struct probe_outcome o;
	size_t n;

	pts = probe_load_points(p, &n);
	probe_get_outcome(p, &o);
	if (!cfg->find_max_rate) {
		if (n == 0 || probe_result_to_json(&pts[0].result, &root) < 0)
			return NULL;
		return TAKE_PTR(root);
	}
	root = cJSON_CreateObject();
	arr = cJSON_CreateArray();
	if (!root || !arr)
		return NULL;
	if (json_add_string(root, "search", probe_search_outcome_name(o.search)) < 0 ||
	    json_add_number(root, "max_request_rate", o.max_rate) < 0 ||
	    json_add_number(root, "saturation_request_rate", o.saturation_rate) < 0 ||
	    json_add_number(root, "rate_tolerance", cfg->rate_tolerance) < 0 ||
	    json_add_number(root, "num_load_points", (double)n) < 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		cJSON *j = NULL;

		if (probe_result_to_json(&pts[i].result, &j) < 0)
			return NULL;
		if (!cJSON_AddBoolToObject(j, "saturation", pts[i].saturation) || !cJSON_AddItemToArray(arr, j)) {
			cJSON_Delete(j);
			return NULL;
		}
	}
	if (o.best_point < n) {
		cJSON *best = NULL;

		if (probe_result_to_json(&pts[o.best_point].result, &best) < 0)
			return NULL;
		if (!cJSON_AddItemToObject(root, "best", best)) {
			cJSON_Delete(best);
			return NULL;
		}
	}
	if (!cJSON_AddItemToObject(root, "load_points", arr))
		return NULL;
	arr = NULL;
	return TAKE_PTR(root);
}

static int write_requests(const char *path, const struct probe *p)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "we");
	const struct probe_load_point *pts;
	size_t n;

	if (!f)
		return log_error_errno(errno, "--save-requests: cannot open %s", path);
	pts = probe_load_points(p, &n);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < pts[i].n_requests; k++) {
			const struct probe_request_result *r = &pts[i].requests[k];
			_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
			_cleanup_(cjson_freep) char *s = NULL;
			cJSON *itl = cJSON_CreateArray();
			double tpot = probe_request_tpot_usec(r);

			if (!j || !itl || !cJSON_AddItemToObject(j, "itl_ms", itl)) {
				cJSON_Delete(itl);
				return log_error_errno(ENOMEM, "--save-requests");
			}
			if (json_add_number(j, "load_point", (double)i) < 0 ||
			    json_add_number(j, "index", r->index) < 0 || json_add_bool(j, "success", r->success) < 0 ||
			    json_add_number(j, "http_status", r->http_status) < 0 ||
			    (r->error && json_add_string(j, "error", r->error) < 0) ||
			    json_add_number(j, "send_usec", (double)r->send_usec) < 0 ||
			    json_add_number(j, "ttft_ms", usec_to_ms(r->ttft_usec)) < 0 ||
			    (tpot >= 0 && json_add_number(j, "tpot_ms", tpot / 1000.0) < 0) ||
			    json_add_number(j, "e2el_ms", usec_to_ms(r->e2e_usec)) < 0 ||
			    json_add_number(j, "input_tokens", r->input_tokens) < 0 ||
			    json_add_number(j, "output_tokens", r->output_tokens) < 0)
				return log_error_errno(ENOMEM, "--save-requests");
			for (size_t g = 0; g < r->n_itl; g++) {
				cJSON *v = cJSON_CreateNumber(usec_to_ms(r->itl_usec[g]));

				if (!v || !cJSON_AddItemToArray(itl, v)) {
					cJSON_Delete(v);
					return log_error_errno(ENOMEM, "--save-requests");
				}
			}
			s = cJSON_PrintUnformatted(j);
			if (!s)
				return log_error_errno(ENOMEM, "--save-requests");
			fprintf(f, "%s\n", s);
		}
	if (fflush(f) != 0 || ferror(f))
		return log_error_errno(errno ? errno : EIO, "--save-requests: cannot write %s", path);
	return 0;
}

static void print_table(const struct probe *p, const struct probe_config *cfg)
{
	const struct probe_load_point *pts;
	struct probe_outcome o;
	char sla[256];
	size_t n;

	pts = probe_load_points(p, &n);
	probe_get_outcome(p, &o);
	if (!cfg->find_max_rate) {
		if (n > 0)
			probe_result_print(stdout, &pts[0].result);
		return;
	}
	probe_sla_format(&cfg->sla, sla, sizeof(sla));
	printf("============ goodput max-rate search ============\n");
	printf("SLA: %s\n", sla);
	printf("%-4s %-11s %10s %10s %11s %11s %11s %6s\n", "#", "rate (r/s)", "done/s", "attain", "p99 TTFT",
	       "p99 TPOT", "goodput r/s", "SLA");
	for (size_t i = 0; i < n; i++) {
		const struct probe_result *r = &pts[i].result;
		char rb[32];
		size_t k99 = r->n_percentiles;

		for (size_t k = 0; k < r->n_percentiles; k++)
			if (r->percentiles[k] == 99)
				k99 = k;
		if (pts[i].saturation)
			snprintf(rb, sizeof(rb), "sat (inf)");
		else
			snprintf(rb, sizeof(rb), "%.3f", r->request_rate);
		printf("%-4zu %-11s %10.3f %9.1f%% %9.1fms %9.1fms %11.3f %6s\n", i + 1, rb, r->request_throughput,
		       r->attainment * 100, k99 < r->n_percentiles ? r->stat[PROBE_METRIC_TTFT].pct_ms[k99] : NAN,
		       k99 < r->n_percentiles ? r->stat[PROBE_METRIC_TPOT].pct_ms[k99] : NAN, r->request_goodput,
		       r->sla_met ? "met" : "missed");
	}
	switch (o.search) {
	case PROBE_SEARCH_FOUND:
		printf("Max request rate meeting the SLA: %.3f req/s (within %.0f%%)\n", o.max_rate,
		       cfg->rate_tolerance * 100);
		break;
	case PROBE_SEARCH_NEVER_MET:
		printf("The server never met the SLA, even at the lowest rate tried.\n");
		break;
	case PROBE_SEARCH_CLIENT_LIMIT:
		printf("The SLA held even with every request at once (%.3f req/s completed): the server is not the "
		       "limit of this workload; raise --num-prompts or --max-concurrency.\n",
		       o.saturation_rate);
		break;
	default:
		break;
	}
	if (o.best_point < n) {
		printf("\nAt the max rate:\n");
		probe_result_print(stdout, &pts[o.best_point].result);
	}
}

static int save_json(const char *path, const cJSON *j)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "we");
	_cleanup_(cjson_freep) char *s = cJSON_Print(j);

	if (!s)
		return log_error_errno(ENOMEM, "--save-result");
	if (!f)
		return log_error_errno(errno, "--save-result: cannot open %s", path);
	fprintf(f, "%s\n", s);
	if (fflush(f) != 0 || ferror(f))
		return log_error_errno(errno ? errno : EIO, "--save-result: cannot write %s", path);
	return 0;
}

int cmd_probe(int argc, char **argv)
{
	_cleanup_(freep) struct option *opts = NULL;
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	_cleanup_(probe_freep) struct probe *p = NULL;
	_cleanup_(freep) char *base_url = NULL;
	_cleanup_(cJSON_Deletep) cJSON *json = NULL;
	struct probe_workload_flags wf;
	struct probe_config cfg;
	struct error err = { 0 };
	struct ctx c = { .progress = true };
	const char *host = NULL, *save_result = NULL, *save_requests = NULL;
	const char *headers[MAX_HEADERS];
	char *header_buf[MAX_HEADERS] = { 0 };
	size_t n_headers = 0;
	uint32_t port = 0;
	double d;
	sigset_t mask;
	int r, opt, ret = CLI_EXIT_FAILED;

	probe_workload_flags_init(&wf);
	probe_config_init(&cfg);
	cfg.client.api_key = getenv("OPENAI_API_KEY");
	r = probe_workload_flags_merge_options(own_options, &opts);
	if (r < 0)
		return log_error_errno(r, "out of memory"), CLI_EXIT_FAILED;
	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		r = 0;
		switch (opt) {
		case 'h':
			help();
			ret = 0;
			goto out;
		case ARG_BASE_URL:
			cfg.client.base_url = optarg;
			break;
		case ARG_HOST:
			host = optarg;
			break;
		case ARG_PORT:
			r = parse_u32("--port", optarg, 1, 65535, &port, &err);
			break;
		case ARG_ENDPOINT:
			cfg.client.endpoint = optarg;
			break;
		case ARG_MODEL:
			cfg.client.model = optarg;
			break;
		case ARG_HEADER: {
			const char *eq = strchr(optarg, '=');

			if (!eq || eq == optarg) {
				r = error_set(&err, -EINVAL, "--header: expected NAME=VALUE, got \"%s\"", optarg);
				break;
			}
			if (n_headers >= MAX_HEADERS) {
				r = error_set(&err, -E2BIG, "--header: at most %d headers", MAX_HEADERS);
				break;
			}
			if (asprintf(&header_buf[n_headers], "%.*s: %s", (int)(eq - optarg), optarg, eq + 1) < 0) {
				header_buf[n_headers] = NULL;
				r = error_set(&err, -ENOMEM, "out of memory");
				break;
			}
			headers[n_headers] = header_buf[n_headers];
			n_headers++;
			break;
		}
		case ARG_API_KEY:
			cfg.client.api_key = optarg;
			break;
		case ARG_SAVE_RESULT:
			save_result = optarg;
			break;
		case ARG_SAVE_REQUESTS:
			save_requests = optarg;
			break;
		case ARG_JSON:
			c.json = true;
			break;
		case ARG_FIND_MAX_RATE:
			cfg.find_max_rate = true;
			break;
		case ARG_RATE_TOLERANCE:
			r = parse_double("--rate-tolerance", optarg, 1e-4, 0.9, &cfg.rate_tolerance, &err);
			break;
		case ARG_MAX_LOAD_POINTS:
			r = parse_u32("--max-load-points", optarg, 1, 100, &cfg.max_load_points, &err);
			break;
		case ARG_REQUEST_TIMEOUT:
			r = parse_double("--request-timeout", optarg, 0.001, 86400, &d, &err);
			if (r >= 0)
				cfg.client.request_timeout_usec = sec_to_usec(d);
			break;
		case ARG_PROMPT_FORMAT:
			if (strcmp(optarg, "ids") == 0)
				cfg.client.prompt_format = PROBE_PROMPT_IDS;
			else if (strcmp(optarg, "text") == 0)
				cfg.client.prompt_format = PROBE_PROMPT_TEXT;
			else
				r = error_set(&err, -EINVAL, "--prompt-format: expected ids or text, got \"%s\"",
					      optarg);
			break;
		case ARG_NO_PROGRESS:
			c.progress = false;
			break;
		case ARG_NO_METRICS:
			cfg.run.metrics_path = NULL;
			break;
		case ARG_INSECURE:
			cfg.client.insecure = true;
			break;
		case ARG_MAX_EVENT_BYTES: {
			uint64_t v;

			r = parse_u64("--max-event-bytes", optarg, 1024, 256u << 20, &v, &err);
			if (r >= 0)
				cfg.client.max_event_bytes = (size_t)v;
			break;
		}
		default:
			r = probe_workload_flags_handle(opt, optarg, argc, argv, &wf, &err);
			if (r == 0) {
				log_error("see 'goodput probe --help'");
				ret = CLI_EXIT_USAGE;
				goto out;
			}
		}
		if (r < 0) {
			log_error("%s", error_str(&err, r));
			ret = CLI_EXIT_USAGE;
			goto out;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s' (see 'goodput probe --help')", argv[optind]);
		ret = CLI_EXIT_USAGE;
		goto out;
	}
	r = probe_workload_flags_finish(&wf, &err);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		ret = CLI_EXIT_USAGE;
		goto out;
	}
	if (cfg.client.base_url && (host || port)) {
		log_error("--base-url and --host/--port: give one or the other");
		ret = CLI_EXIT_USAGE;
		goto out;
	}
	if (!cfg.client.base_url) {
		if (asprintf(&base_url, "http://%s:%u", host ? host : "127.0.0.1", port ? port : 8000) < 0) {
			log_error("out of memory");
			goto out;
		}
		cfg.client.base_url = base_url;
	}
	cfg.client.headers = headers;
	cfg.client.n_headers = n_headers;
	cfg.client.ignore_eos = wf.workload.ignore_eos;
	cfg.workload = wf.workload;
	cfg.sla = wf.sla;
	memcpy(cfg.percentiles, wf.percentiles, sizeof(cfg.percentiles));
	cfg.n_percentiles = wf.n_percentiles;
	c.percentile_metrics = wf.percentile_metrics;
	c.tty = isatty(STDERR_FILENO);

	curl_global_init(CURL_GLOBAL_DEFAULT);
	r = sd_event_new(&e);
	if (r < 0) {
		log_error_errno(r, "cannot create the event loop");
		goto out_curl;
	}
	c.event = e;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (sd_event_add_signal(e, NULL, SIGINT, on_signal, &c) < 0 ||
	    sd_event_add_signal(e, NULL, SIGTERM, on_signal, &c) < 0) {
		log_error("cannot watch signals");
		goto out_curl;
	}
	r = probe_new(e, &cfg, &p, &err);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		ret = r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
		goto out_curl;
	}
	r = probe_start(p, on_event, on_done, &c);
	if (r < 0) {
		log_error("%s", probe_error(p));
		goto out_curl;
	}
	r = sd_event_loop(e);
	clear_progress(&c);
	if (r < 0) {
		log_error_errno(r, "event loop failed");
		goto out_curl;
	}
	if (c.result == -EINTR) {
		log_error("interrupted");
		ret = CLI_EXIT_INTERRUPTED;
		goto out_curl;
	}
	if (c.result < 0) {
		log_error("probe failed: %s", probe_error(p));
		goto out_curl;
	}
	json = build_json(p, &cfg);
	if (!json) {
		log_error("out of memory building the result");
		goto out_curl;
	}
	if (c.json) {
		_cleanup_(cjson_freep) char *s = cJSON_Print(json);

		if (!s) {
			log_error("out of memory");
			goto out_curl;
		}
		printf("%s\n", s);
	} else
		print_table(p, &cfg);
	ret = CLI_EXIT_OK;
	if (cfg.find_max_rate) {
		struct probe_outcome o;

		probe_get_outcome(p, &o);
		if (o.search == PROBE_SEARCH_NEVER_MET)
			ret = CLI_EXIT_SLA_NOT_MET;
	}
	if (save_result && save_json(save_result, json) < 0)
		ret = CLI_EXIT_FAILED;
	if (save_requests && write_requests(save_requests, p) < 0)
		ret = CLI_EXIT_FAILED;
out_curl:
	p = probe_free(p);
	curl_global_cleanup();
out:
	for (size_t i = 0; i < n_headers; i++)
		free(header_buf[i]);
	return ret;
}
