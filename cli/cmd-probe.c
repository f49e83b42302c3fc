/* cmd-probe.c — `goodput probe`: benchmark an OpenAI-compatible server on
 * its own, with `vllm bench serve`'s flag names and report, plus goodput's
 * SLA, goodput and --find-max-rate.
 *
 * The command parses its flags (workload and SLA flags through
 * probes/workload-flags.h, shared with goodput-sim) into a probe
 * configuration, runs the probe on one sd-event loop with a progress line
 * on stderr, hands the outcome to probe-output.c (table or --json, the
 * vLLM-readable result file, the per-request lines, why requests failed)
 * and turns it into the exit status of exit-status.h: 1 when every request
 * failed (an unreachable server among them) or the search found a server
 * that fails requests, 3 when the search never met the SLA. The API key
 * never appears in any output. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <curl/curl.h>

#include "commands.h"
#include "exit-status.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "probe-output.h"
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
	ARG_RESULT_DIR,
	ARG_RESULT_FILENAME,
	ARG_SAVE_DETAILED,
	ARG_METADATA,
	ARG_LABEL,
	ARG_SAVE_REQUESTS,
	ARG_JSON,
	ARG_FIND_MAX_RATE,
	ARG_RATE_TOLERANCE,
	ARG_MAX_LOAD_POINTS,
	ARG_VERDICT,
	ARG_MAX_POINT_REQUESTS,
	ARG_MAX_POINT_SECONDS,
	ARG_CONFIDENCE,
	ARG_REQUEST_TIMEOUT,
	ARG_PROMPT_FORMAT,
	ARG_TTFT_INCLUDE_CONNECT,
	ARG_NO_KEEP_ALIVE,
	ARG_NO_PROGRESS,
	ARG_NO_METRICS,
	ARG_INSECURE,
	ARG_MAX_EVENT_BYTES,
	ARG_BACKEND,
	ARG_TOKENIZER,
	ARG_SERVED_MODEL_NAME,
	ARG_DISABLE_TQDM,
	ARG_IGNORED_VALUE, /* a vLLM flag with a value that means nothing here */
	ARG_IGNORED_FLAG,  /* ... without one */
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
	{ "save-result", optional_argument, NULL, ARG_SAVE_RESULT },
	{ "result-dir", required_argument, NULL, ARG_RESULT_DIR },
	{ "result-filename", required_argument, NULL, ARG_RESULT_FILENAME },
	{ "save-detailed", no_argument, NULL, ARG_SAVE_DETAILED },
	{ "metadata", required_argument, NULL, ARG_METADATA },
	{ "label", required_argument, NULL, ARG_LABEL },
	{ "save-requests", required_argument, NULL, ARG_SAVE_REQUESTS },
	{ "json", no_argument, NULL, ARG_JSON },
	{ "find-max-rate", no_argument, NULL, ARG_FIND_MAX_RATE },
	{ "rate-tolerance", required_argument, NULL, ARG_RATE_TOLERANCE },
	{ "max-load-points", required_argument, NULL, ARG_MAX_LOAD_POINTS },
	{ "verdict", required_argument, NULL, ARG_VERDICT },
	{ "max-point-requests", required_argument, NULL, ARG_MAX_POINT_REQUESTS },
	{ "max-point-seconds", required_argument, NULL, ARG_MAX_POINT_SECONDS },
	{ "confidence", required_argument, NULL, ARG_CONFIDENCE },
	{ "request-timeout", required_argument, NULL, ARG_REQUEST_TIMEOUT },
	{ "prompt-format", required_argument, NULL, ARG_PROMPT_FORMAT },
	{ "ttft-include-connect", no_argument, NULL, ARG_TTFT_INCLUDE_CONNECT },
	{ "no-keep-alive", no_argument, NULL, ARG_NO_KEEP_ALIVE },
	{ "no-progress", no_argument, NULL, ARG_NO_PROGRESS },
	{ "no-server-metrics", no_argument, NULL, ARG_NO_METRICS },
	{ "insecure", no_argument, NULL, ARG_INSECURE },
	{ "max-event-bytes", required_argument, NULL, ARG_MAX_EVENT_BYTES },
	/* vllm bench serve's habits: taken, so that a pasted command runs */
	{ "backend", required_argument, NULL, ARG_BACKEND },
	{ "tokenizer", required_argument, NULL, ARG_TOKENIZER },
	{ "served-model-name", required_argument, NULL, ARG_SERVED_MODEL_NAME },
	{ "disable-tqdm", no_argument, NULL, ARG_DISABLE_TQDM },
	{ "tokenizer-mode", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "logprobs", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "ready-check-timeout-sec", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "temperature", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "top-p", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "top-k", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "min-p", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "frequency-penalty", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "presence-penalty", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "repetition-penalty", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "trust-remote-code", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "skip-tokenizer-init", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "skip-chat-template", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "custom-skip-chat-template", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "disable-shuffle", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "no-oversample", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "no-stream", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "profile", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "use-beam-search", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "plot-timeline", no_argument, NULL, ARG_IGNORED_FLAG },
	{ "timeline-itl-thresholds", required_argument, NULL, ARG_IGNORED_VALUE },
	{ "plot-dataset-stats", no_argument, NULL, ARG_IGNORED_FLAG },
	{ NULL, 0, NULL, 0 },
};

#define MAX_IGNORED 32

/* What the command line asked for. Strings point into argv unless owned
 * (base_url_buf, header_buf). */
struct probe_args {
	struct probe_config cfg;
	struct probe_workload_flags wf;
	struct cli_probe_output out;
	const char *host, *served_model_name;
	uint32_t port;
	char *base_url_buf;
	const char *headers[MAX_HEADERS];
	char *header_buf[MAX_HEADERS];
	size_t n_headers;
	bool save_result;
	const char *result_file, *result_dir, *save_requests;
	const char *ignored[MAX_IGNORED]; /* vLLM flags taken without effect, for the note */
	size_t n_ignored;
	bool json, progress;
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
	       "TTFT runs from the moment a request is written to its connection to its first\n"
	       "token: opening connections and waiting inside goodput are not charged to the\n"
	       "server. E2E starts at the same moment; TPOT and ITL are the gaps between tokens.\n"
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
	       "  --ttft-include-connect   start TTFT and E2E when a request is handed to the client,\n"
	       "                           before its connection is opened, as vLLM's client does\n"
	       "  --no-keep-alive          a new connection for every request, as vLLM's client opens;\n"
	       "                           with --ttft-include-connect, compares with its figures\n"
	       "  --max-event-bytes N      largest SSE event accepted (default 1048576)\n"
	       "  --insecure               https without certificate checks\n"
	       "  --no-server-metrics      do not scrape /metrics during load points\n"
	       "  --backend NAME           vllm, openai or openai-chat: the result's backend\n"
	       "  --served-model-name NAME the \"model\" field, with --model naming model_id\n"
	       "  --tokenizer NAME         the result's tokenizer_id (no tokenizer is loaded: text\n"
	       "                           prompts follow the word rule, or are token ids)\n"
	       "  --disable-tqdm           as --no-progress\n"
	       "vllm bench serve's --trust-remote-code, --tokenizer-mode, --skip-tokenizer-init,\n"
	       "--skip-chat-template, --custom-skip-chat-template, --disable-shuffle,\n"
	       "--no-oversample, --no-stream, --profile, --use-beam-search, --logprobs,\n"
	       "--ready-check-timeout-sec, the plots (--plot-timeline, --timeline-itl-thresholds,\n"
	       "--plot-dataset-stats) and the sampling flags (--temperature, --top-p, --top-k,\n"
	       "--min-p, --frequency-penalty, --presence-penalty, --repetition-penalty) are\n"
	       "taken with a note and have no effect.\n"
	       "\n");
	probe_workload_flags_help(stdout);
	printf("\n"
	       "Search:\n"
	       "  --find-max-rate          saturation run, then search the largest rate meeting the SLA\n"
	       "  --rate-tolerance F       stop when the bracket is within F (default 0.05)\n"
	       "  --max-load-points N      finite-rate points before the search gives up (default 12)\n"
	       "  --verdict sequential|fixed\n"
	       "                           sequential (default): each load point sends until its\n"
	       "                           verdict is sure at --confidence (a sequential test on\n"
	       "                           attainment), at most --max-point-requests; fixed: each\n"
	       "                           sends --num-prompts, judged afterwards\n"
	       "  --max-point-requests N   cap of a sequential load point (default 4 x --num-prompts)\n"
	       "  --max-point-seconds SEC  a load point, the saturation run included, takes SEC at\n"
	       "                           most: it sends until SEC less a grace (SEC/4, at least\n"
	       "                           10 s, at most SEC/2), then requests that can no longer\n"
	       "                           meet the SLA are cut (their connections closed: the\n"
	       "                           server drops them), the rest at SEC\n"
	       "  --confidence F           of each sequential verdict (default 0.95)\n"
	       "The saturation run sends --num-prompts at once. The search's load points share\n"
	       "one arrival sequence (--seed), scaled to each rate; each reports the rate asked\n"
	       "for and the rate actually sent (offered).\n"
	       "\n"
	       "Output (vllm bench serve's names; the result is the file vLLM writes):\n"
	       "  --json                   print the result as JSON on stdout\n"
	       "  --save-result [FILE]     write the result to FILE, by default to vLLM's name\n"
	       "                           LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json\n"
	       "  --result-dir DIR         ... in DIR (made if missing; implies --save-result)\n"
	       "  --result-filename NAME   ... named NAME (implies --save-result)\n"
	       "  --save-detailed          add the per-request arrays (input_lens, output_lens,\n"
	       "                           ttfts and itls in seconds, errors)\n"
	       "  --metadata KEY=VALUE...  extra keys of the result (several words, or repeated)\n"
	       "  --label NAME             the result's label (default: the backend, openai or\n"
	       "                           openai-chat)\n"
	       "  --save-requests FILE     write one JSON line per request to FILE (ms; send_usec and\n"
	       "                           timestamp date each send: `goodput workload capture\n"
	       "                           --from-log FILE` reads it back)\n"
	       "  --no-progress            no progress line on stderr\n"
	       "  -h, --help               this help\n"
	       "\n"
	       "Failed requests are listed by reason with their counts. The probe fails (1)\n"
	       "when every request failed, the server unreachable included; with\n"
	       "--find-max-rate also when the server failed requests (all of a load point's, or\n"
	       "at the lowest rate more than the SLA allows while the rest met it), and it\n"
	       "exits 3 when the server answered but never met the SLA.\n"
	       "\n" CLI_EXIT_STATUS_HELP);
}

/* ---- flags ---- */

static int add_header(struct probe_args *a, const char *arg, struct error *err)
{
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg)
		return error_set(err, -EINVAL, "--header: expected NAME=VALUE, got \"%s\"", arg);
	if (a->n_headers >= MAX_HEADERS)
		return error_set(err, -E2BIG, "--header: at most %d headers", MAX_HEADERS);
	if (asprintf(&a->header_buf[a->n_headers], "%.*s: %s", (int)(eq - arg), arg, eq + 1) < 0) {
		a->header_buf[a->n_headers] = NULL;
		return error_set(err, -ENOMEM, "out of memory");
	}
	a->headers[a->n_headers] = a->header_buf[a->n_headers];
	a->n_headers++;
	return 0;
}

/* vLLM's nargs="*": the KEY=VALUE words after --metadata are its too. */
static int add_metadata(struct probe_args *a, const char *arg, int argc, char **argv, struct error *err)
{
	for (;;) {
		if (cli_probe_metadata_check(arg) < 0)
			return error_set(err, -EINVAL, "--metadata: expected KEY=VALUE, got \"%s\"", arg);
		if (a->out.n_metadata >= CLI_PROBE_MAX_METADATA)
			return error_set(err, -E2BIG, "--metadata: at most %d items", CLI_PROBE_MAX_METADATA);
		a->out.metadata[a->out.n_metadata++] = arg;
		if (optind >= argc || argv[optind][0] == '-' || !strchr(argv[optind], '='))
			return 0;
		arg = argv[optind++];
	}
}

/* The server and client flags: 0 taken, -ENOENT not one of them. */
static int client_option(struct probe_args *a, int opt, const char *arg, struct error *err)
{
	struct probe_client_config *cc = &a->cfg.client;
	uint64_t v;
	double d;
	int r = 0;

	switch (opt) {
	case ARG_BASE_URL:
		cc->base_url = arg;
		return 0;
	case ARG_HOST:
		a->host = arg;
		return 0;
	case ARG_PORT:
		return parse_u32("--port", arg, 1, 65535, &a->port, err);
	case ARG_ENDPOINT:
		cc->endpoint = arg;
		return 0;
	case ARG_MODEL:
		cc->model = a->out.model = arg;
		return 0;
	case ARG_HEADER:
		return add_header(a, arg, err);
	case ARG_API_KEY:
		cc->api_key = arg;
		return 0;
	case ARG_REQUEST_TIMEOUT:
		r = parse_double("--request-timeout", arg, 0.001, 86400, &d, err);
		if (r >= 0)
			cc->request_timeout_usec = sec_to_usec(d);
		return r;
	case ARG_PROMPT_FORMAT:
		if (strcmp(arg, "ids") == 0)
			cc->prompt_format = PROBE_PROMPT_IDS;
		else if (strcmp(arg, "text") == 0)
			cc->prompt_format = PROBE_PROMPT_TEXT;
		else
			return error_set(err, -EINVAL, "--prompt-format: expected ids or text, got \"%s\"", arg);
		return 0;
	case ARG_TTFT_INCLUDE_CONNECT:
		cc->ttft_include_connect = true;
		return 0;
	case ARG_NO_KEEP_ALIVE:
		cc->fresh_connections = true;
		return 0;
	case ARG_INSECURE:
		cc->insecure = true;
		return 0;
	case ARG_BACKEND:
		if (strcmp(arg, "vllm") != 0 && strcmp(arg, "openai") != 0 && strcmp(arg, "openai-chat") != 0)
			return error_set(err, -EINVAL,
					 "--backend: goodput probe streams text completions: expected vllm, openai or "
					 "openai-chat, got \"%s\"",
					 arg);
		a->out.backend = arg;
		return 0;
	case ARG_TOKENIZER:
		a->out.tokenizer = arg;
		return 0;
	case ARG_SERVED_MODEL_NAME:
		a->served_model_name = arg;
		return 0;
	case ARG_IGNORED_VALUE:
	case ARG_IGNORED_FLAG:
		return 0;
	case ARG_MAX_EVENT_BYTES:
		r = parse_u64("--max-event-bytes", arg, 1024, 256u << 20, &v, err);
		if (r >= 0)
			cc->max_event_bytes = (size_t)v;
		return r;
	default:
		return -ENOENT;
	}
}

/* The search and output flags: 0 taken, -ENOENT not one of them. */
static int output_option(struct probe_args *a, int opt, const char *arg, int argc, char **argv, struct error *err)
{
	switch (opt) {
	case ARG_SAVE_RESULT:
		a->save_result = true;
		/* vLLM's --save-result takes no value; goodput's took a FILE */
		if (!arg && optind < argc && argv[optind][0] != '-')
			arg = argv[optind++];
		if (arg)
			a->result_file = arg;
		return 0;
	case ARG_RESULT_DIR:
		a->save_result = true;
		a->result_dir = arg;
		return 0;
	case ARG_RESULT_FILENAME:
		a->save_result = true;
		if (a->result_file && strcmp(a->result_file, arg) != 0)
			return error_set(err, -EINVAL, "--result-filename: the file is named by --save-result already");
		a->result_file = arg;
		return 0;
	case ARG_SAVE_DETAILED:
		a->out.detailed = true;
		return 0;
	case ARG_METADATA:
		return add_metadata(a, arg, argc, argv, err);
	case ARG_LABEL:
		a->out.label = arg;
		return 0;
	case ARG_SAVE_REQUESTS:
		a->save_requests = arg;
		return 0;
	case ARG_JSON:
		a->json = true;
		return 0;
	case ARG_NO_PROGRESS:
	case ARG_DISABLE_TQDM:
		a->progress = false;
		return 0;
	case ARG_NO_METRICS:
		a->cfg.run.metrics_path = NULL;
		return 0;
	case ARG_FIND_MAX_RATE:
		a->cfg.find_max_rate = true;
		return 0;
	case ARG_RATE_TOLERANCE:
		return parse_double("--rate-tolerance", arg, 1e-4, 0.9, &a->cfg.rate_tolerance, err);
	case ARG_MAX_LOAD_POINTS:
		return parse_u32("--max-load-points", arg, 1, 100, &a->cfg.max_load_points, err);
	case ARG_VERDICT:
		if (strcmp(arg, "sequential") != 0 && strcmp(arg, "fixed") != 0)
			return error_set(err, -EINVAL, "--verdict: expected sequential or fixed, got \"%s\"", arg);
		a->cfg.fixed_count = strcmp(arg, "fixed") == 0;
		return 0;
	case ARG_MAX_POINT_SECONDS:
		return parse_double("--max-point-seconds", arg, 1, 86400, &a->cfg.max_point_seconds, err);
	case ARG_MAX_POINT_REQUESTS:
		return parse_u32("--max-point-requests", arg, 1, PROBE_MAX_REQUESTS, &a->cfg.max_point_requests, err);
	case ARG_CONFIDENCE:
		return parse_double("--confidence", arg, 0.5, 0.9999, &a->cfg.confidence, err);
	default:
		return -ENOENT;
	}
}

/* After the loop: what flags say together. */
static int finish_args(struct probe_args *a, struct error *err)
{
	struct probe_client_config *cc = &a->cfg.client;
	int r;

	r = probe_workload_flags_finish(&a->wf, err);
	if (r < 0)
		return r;
	if (cc->base_url && (a->host || a->port))
		return error_set(err, -EINVAL, "--base-url and --host/--port: give one or the other");
	if (!cc->base_url) {
		if (asprintf(&a->base_url_buf, "http://%s:%u", a->host ? a->host : "127.0.0.1",
			     a->port ? a->port : 8000) < 0) {
			a->base_url_buf = NULL;
			return error_set(err, -ENOMEM, "out of memory");
		}
		cc->base_url = a->base_url_buf;
	}
	cc->headers = a->headers;
	cc->n_headers = a->n_headers;
	cc->ignore_eos = a->wf.workload.ignore_eos;
	a->cfg.workload = a->wf.workload;
	a->cfg.sla = a->wf.sla;
	memcpy(a->cfg.percentiles, a->wf.percentiles, sizeof(a->cfg.percentiles));
	a->cfg.n_percentiles = a->wf.n_percentiles;
	if (!a->out.backend)
		a->out.backend = probe_endpoint_is_chat(cc->endpoint) ? "openai-chat" : "openai";
	if (a->served_model_name)
		cc->model = a->served_model_name; /* the request's "model"; --model stays model_id */
	cc->keep_text = a->out.detailed;
	return 0;
}

/* One line naming the vLLM flags that were taken without effect. */
static void note_ignored(const struct probe_args *a)
{
	if (a->n_ignored == 0)
		return;
	fprintf(stderr, "note: goodput probe loads no tokenizer, sends no sampling parameters and draws no plots; "
			"ignored:");
	for (size_t i = 0; i < a->n_ignored; i++)
		fprintf(stderr, "%s --%s", i ? "," : "", a->ignored[i]);
	fputc('\n', stderr);
}

static void probe_args_done(struct probe_args *a)
{
	probe_workload_flags_done(&a->wf);
	for (size_t i = 0; i < a->n_headers; i++)
		free(a->header_buf[i]);
	free(a->base_url_buf);
}

/* 1: run the probe; 0: --help was printed; < 0: a usage error, logged. */
static int parse_args(int argc, char **argv, struct probe_args *a)
{
	_cleanup_(freep) struct option *opts = NULL;
	struct error err = { 0 };
	int r, opt, li = 0;

	*a = (struct probe_args){ .progress = true };
	probe_workload_flags_init(&a->wf);
	probe_config_init(&a->cfg);
	a->cfg.client.api_key = getenv("OPENAI_API_KEY");
	a->out.started = time(NULL);
	r = probe_workload_flags_merge_options(own_options, &opts);
	if (r < 0)
		return log_error_errno(r, "out of memory");
	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", opts, &li)) >= 0) {
		if (opt == 'h') {
			help();
			return 0;
		}
		if ((opt == ARG_IGNORED_VALUE || opt == ARG_IGNORED_FLAG || opt == ARG_TOKENIZER) &&
		    a->n_ignored < MAX_IGNORED)
			a->ignored[a->n_ignored++] = opts[li].name;
		r = client_option(a, opt, optarg, &err);
		if (r == -ENOENT)
			r = output_option(a, opt, optarg, argc, argv, &err);
		if (r == -ENOENT) {
			r = probe_workload_flags_handle(opt, optarg, argc, argv, &a->wf, &err);
			if (r == 0) { /* getopt's '?' lands here: it has said what was wrong */
				log_error("see 'goodput probe --help'");
				return -EINVAL;
			}
		}
		if (r < 0) {
			log_error("%s", error_str(&err, r));
			return r;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s' (see 'goodput probe --help')", argv[optind]);
		return -EINVAL;
	}
	r = finish_args(a, &err);
	if (r < 0) {
		log_error("%s", error_str(&err, r));
		return r;
	}
	note_ignored(a);
	return 1;
}

/* ---- running ---- */

struct ctx {
	sd_event *event;
	bool progress, tty;
	uint64_t last_progress_usec;
	size_t progress_len;
	int result;
};

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

static void show_progress(struct ctx *c, const struct probe_event *ev)
{
	const struct probe_run_progress *pr = &ev->progress;
	char rb[32], el[32], line[256];
	uint64_t now = mono_usec();
	int n;

	/* A terminal gets a line rewritten in place; a log a line every 10 s. */
	if (!c->tty && now - c->last_progress_usec < 10 * USEC_PER_SEC)
		return;
	c->last_progress_usec = now;
	n = snprintf(line, sizeof(line), "%s%u/%u requests done (%u good, %u failed), %s elapsed, rate %s",
		     pr->warmup ? "warm-up: " : "", pr->done, pr->total, pr->warmup ? 0 : ev->good, pr->failed,
		     format_duration(el, sizeof(el), pr->elapsed_usec),
		     rate_str(rb, sizeof(rb), pr->elapsed_usec > 0 ? pr->done / usec_to_sec(pr->elapsed_usec) : 0));
	if (c->tty) {
		clear_progress(c);
		fprintf(stderr, "%s", line);
		c->progress_len = n > 0 ? (size_t)n : 0;
	} else
		fprintf(stderr, "%s\n", line);
}

static void on_event(struct probe *p, const struct probe_event *ev, void *userdata)
{
	struct ctx *c = userdata;
	char rb[32];

	if (!c->progress)
		return;
	switch (ev->kind) {
	case PROBE_EVENT_LOAD_POINT_START:
		clear_progress(c);
		fprintf(stderr, "load point %zu: %s, rate %s\n", ev->load_point + 1,
			ev->saturation ? "saturation" : "search", rate_str(rb, sizeof(rb), ev->rate));
		return;
	case PROBE_EVENT_PROGRESS:
		show_progress(c, ev);
		return;
	case PROBE_EVENT_LOAD_POINT_DONE: {
		const struct probe_result *r = &ev->point->result;

		clear_progress(c);
		fprintf(stderr, "load point %zu: %u completed, %u failed, attainment %.1f%%, SLA %s",
			ev->load_point + 1, r->completed, r->failed, r->attainment * 100,
			r->sla_met ? "met" : "missed");
		if (r->verdict != PROBE_VERDICT_NONE)
			fprintf(stderr, " (%s at %.0f%% confidence after %u requests)", probe_verdict_name(r->verdict),
				r->verdict_confidence * 100, r->verdict_requests);
		fputc('\n', stderr);
		return;
	}
	}
}

static void on_done(struct probe *p, int r, void *userdata)
{
	struct ctx *c = userdata;

	c->result = r;
	(void)sd_event_exit(c->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct ctx *c = userdata;

	c->result = -EINTR;
	return sd_event_exit(c->event, 0);
}

/* Streams need a descriptor each: as many as the hard limit allows. */
static void raise_open_files(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Runs the probe to its end on a loop of its own. The exit status on
 * failure (logged), else 0 with *ret the probe that ran. */
static int run(struct probe_args *a, struct probe **ret)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	_cleanup_(probe_freep) struct probe *p = NULL;
	struct ctx c = { .progress = a->progress, .tty = isatty(STDERR_FILENO) };
	struct error err = { 0 };
	sigset_t mask;
	int r;

	r = sd_event_new(&e);
	if (r < 0)
		return log_error_errno(r, "cannot create the event loop"), CLI_EXIT_FAILED;
	c.event = e;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (sd_event_add_signal(e, NULL, SIGINT, on_signal, &c) < 0 ||
	    sd_event_add_signal(e, NULL, SIGTERM, on_signal, &c) < 0)
		return log_error("cannot watch signals"), CLI_EXIT_FAILED;
	raise_open_files();
	r = probe_new(e, &a->cfg, &p, &err);
	if (r < 0)
		return log_error("%s", error_str(&err, r)), r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
	r = probe_start(p, on_event, on_done, &c);
	if (r < 0)
		return log_error("%s", probe_error(p)), CLI_EXIT_FAILED;
	r = sd_event_loop(e);
	clear_progress(&c);
	if (r < 0)
		return log_error_errno(r, "event loop failed"), CLI_EXIT_FAILED;
	if (c.result == -EINTR)
		return log_error("interrupted"), CLI_EXIT_INTERRUPTED;
	if (c.result < 0)
		return log_error("probe failed: %s", probe_error(p)), CLI_EXIT_FAILED;
	*ret = TAKE_PTR(p);
	return CLI_EXIT_OK;
}

/* Whether no request of the result's load point completed. */
static bool nothing_completed(const struct probe *p)
{
	const struct probe_load_point *pts;
	size_t n, top = cli_probe_top_point(p);

	pts = probe_load_points(p, &n);
	return top < n && pts[top].result.num_prompts > 0 && pts[top].result.completed == 0;
}

/* The exit status the outcome calls for; says on stderr why it fails. */
static int outcome_status(const struct probe *p, const struct probe_config *cfg)
{
	const struct probe_load_point *pts;
	struct probe_outcome o;
	size_t n, top = cli_probe_top_point(p);

	pts = probe_load_points(p, &n);
	probe_get_outcome(p, &o);
	if (top < n && pts[top].result.num_prompts > 0 && pts[top].result.completed == 0) {
		if (pts[top].result.cap == PROBE_CAP_SECONDS && pts[top].result.failed == 0)
			log_error("no request completed within the load point's time cap (--max-point-seconds %g):",
				  MAX(cfg->max_point_seconds, 1.0));
		else
			log_error("every request failed:");
		cli_probe_print_failures(stderr, "  ", pts[top].requests, pts[top].n_requests);
		return CLI_EXIT_FAILED;
	}
	if (!cfg->find_max_rate)
		return CLI_EXIT_OK;
	if (o.search == PROBE_SEARCH_SERVER_FAILED) {
		log_error("the server failed requests (load point %zu):", o.failed_point + 1);
		if (o.failed_point < n)
			cli_probe_print_failures(stderr, "  ", pts[o.failed_point].requests,
						 pts[o.failed_point].n_requests);
		return CLI_EXIT_FAILED;
	}
	if (o.search == PROBE_SEARCH_NEVER_MET) {
		log_error("the SLA was never met, even at the lowest rate tried");
		return CLI_EXIT_SLA_NOT_MET;
	}
	return CLI_EXIT_OK;
}

/* The table or JSON, the files; then the exit status. */
static int report(struct probe_args *a, const struct probe *p)
{
	_cleanup_(cJSON_Deletep) cJSON *json = NULL;
	int status, r;

	r = cli_probe_result_json(p, &a->cfg, &a->out, &json);
	if (r < 0)
		return log_error_errno(r, "out of memory building the result"), CLI_EXIT_FAILED;
	if (a->json) {
		_cleanup_(cjson_freep) char *s = cJSON_Print(json);

		if (!s)
			return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
		printf("%s\n", s);
	} else if (a->cfg.find_max_rate || !nothing_completed(p))
		cli_probe_print(stdout, p, &a->cfg); /* else a table of zeros: the reasons follow on stderr */
	fflush(stdout);
	status = outcome_status(p, &a->cfg);
	if (a->save_result) {
		_cleanup_(freep) char *path = NULL;

		r = cli_probe_result_path(p, &a->out, a->result_dir, a->result_file, &path);
		if (r >= 0)
			r = cli_probe_save_json(path, json);
		if (r < 0)
			status = CLI_EXIT_FAILED;
		else if (!a->json)
			printf("Result written to %s\n", path);
	}
	if (a->save_requests && cli_probe_save_requests(a->save_requests, p) < 0)
		status = CLI_EXIT_FAILED;
	return status;
}

int cmd_probe(int argc, char **argv)
{
	_cleanup_(probe_freep) struct probe *p = NULL;
	struct probe_args a;
	int r, status;

	r = parse_args(argc, argv, &a);
	if (r <= 0) {
		probe_args_done(&a);
		return r == 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	status = run(&a, &p);
	if (status == CLI_EXIT_OK)
		status = report(&a, p);
	p = probe_free(p);
	curl_global_cleanup();
	probe_args_done(&a);
	return status;
}
