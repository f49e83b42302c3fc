/* probe-output.h — what `goodput probe` shows and writes once a probe has
 * run: the result object (vLLM's result file: its identifying keys,
 * metadata, per-request arrays in seconds with --save-detailed), where
 * --save-result puts it, one line per request for --save-requests, the
 * tables people read, and why requests failed.
 *
 * The result object's top level is one load point: the only one, or for
 * --find-max-rate the one at the max rate (else the one that shows the
 * failures, else the last), so that any tool reading vLLM's files reads
 * it; the search and every load point sit beside it. Nothing here runs
 * the probe or decides the exit code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "probe.h"

#define CLI_PROBE_MAX_METADATA 64

struct cli_probe_output {
	const char *label;     /* --label (vLLM); NULL: none */
	const char *model;     /* --model: model_id and tokenizer_id; NULL: the server's default */
	const char *backend;   /* --backend, else "openai" or "openai-chat" (vLLM's name of the endpoint type) */
	const char *tokenizer; /* --tokenizer (tokenizer_id); NULL: the model */
	const char *metadata[CLI_PROBE_MAX_METADATA]; /* "KEY=VALUE", checked */
	size_t n_metadata;
	bool detailed;  /* --save-detailed: the per-request arrays */
	time_t started; /* "date" and the default file name */
};

/* Checks one --metadata item ("KEY=VALUE", KEY not empty). 0 or -EINVAL. */
int cli_probe_metadata_check(const char *item);

/* The load point the result's top level describes, or SIZE_MAX when there
 * is none. */
size_t cli_probe_top_point(const struct probe *p);

/* The result object (see top). The caller owns *ret. 0 or -ENOMEM. */
int cli_probe_result_json(const struct probe *p, const struct probe_config *cfg, const struct cli_probe_output *o,
			  cJSON **ret);

/* Where --save-result writes: name (--save-result FILE or
 * --result-filename), else vLLM's "{label}-{rate}qps[-concurrency{N}]-
 * {model}-{date}.json" with label defaulting to the backend; inside dir
 * (--result-dir, made when missing) when given. *ret is the caller's. */
int cli_probe_result_path(const struct probe *p, const struct cli_probe_output *o, const char *dir, const char *name,
			  char **ret);

/* Writes j to path; logs and returns a negative errno on failure. */
int cli_probe_save_json(const char *path, const cJSON *j);
/* One JSON line per measured request of every load point (ms). Logs and
 * returns a negative errno on failure. */
int cli_probe_save_requests(const char *path, const struct probe *p);

/* The vLLM-like table (a search table first for --find-max-rate), then why
 * requests failed. */
void cli_probe_print(FILE *f, const struct probe *p, const struct probe_config *cfg);
/* "connection refused ×5", "HTTP 500 ×300: <first line of the body>": the
 * reasons the requests failed, most frequent first, each line starting
 * with indent. Nothing when none failed. */
void cli_probe_print_failures(FILE *f, const char *indent, const struct probe_request_result *reqs, size_t n);
