/* workload-flags.h — the command-line flags that describe a workload, an SLA
 * and the reported percentiles, shared by `goodput probe` and
 * `goodput-sim simulate` so that both take exactly the same flags (named as
 * `vllm bench serve` names them) and build exactly the same workload.
 *
 * A command keeps its own getopt_long loop and delegates what it does not know:
 *
 *     struct probe_workload_flags wf;
 *     _cleanup_(freep) struct option *opts = NULL;
 *     probe_workload_flags_init(&wf);
 *     r = probe_workload_flags_merge_options(my_options, &opts);     // mine + shared
 *     while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
 *             switch (c) {
 *             case 'h': ...; case ARG_MY_FLAG: ...;
 *             default:
 *                     r = probe_workload_flags_handle(c, optarg, argc, argv, &wf, &err);
 *                     if (r < 0) fail(error_str(&err, r));
 *                     if (r == 0) usage error ('?' from getopt lands here too);
 *             }
 *     }
 *     r = probe_workload_flags_finish(&wf, &err);   // cross-flag checks, fills wf.workload
 *
 * The shared options use `val`s from PROBE_WORKLOAD_FLAG_BASE (1000) upwards, so
 * a command's own long options must use other values (e.g. 256..999).
 *
 * Flags (vLLM's names where vLLM has the concept):
 *   --dataset-name random|sharegpt|custom   --dataset-path FILE
 *   --random-input-len N  --random-output-len N  --random-range-ratio R
 *   --input-len-dist fixed|uniform|normal|lognormal  --input-len-std S
 *   --output-len-dist ...  --output-len-std S        (goodput additions)
 *   --random-prefix-len K (alias --prefix-len K)  --prefix-group-size N
 *   --dataset-output-len N (sharegpt/custom: fix every output length)
 *   --num-prompts N  --num-warmups N
 *   --request-rate R|inf  --burstiness B  --arrival poisson|gamma|constant|inf
 *   --max-concurrency N  --ignore-eos  --seed N
 *   --workload FILE   a workload block (workload-json.h: what a study spec
 *                     holds under "workload", what `goodput workload capture`
 *                     writes); the flags that describe lengths, arrivals and
 *                     datasets cannot be given with it, the counts, seed,
 *                     rate, concurrency and ignore-eos override it
 *   --percentile-metrics ttft,tpot,itl,e2el  --metric-percentiles 50,90,99
 *   --goodput "ttft:500 tpot:50" (vLLM's form, one argument or several words)
 *   --sla ttft:500,tpot:50 | p99:tpot:50   (goodput's form; not with --goodput)
 *   --attainment F
 *
 * Arrival rules (probe_workload_flags_finish): --request-rate inf (the
 * default) means all at once unless --arrival says otherwise; a finite rate
 * means Poisson, or gamma when --burstiness is not 1; --arrival overrides
 * (constant and gamma need a finite rate). */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "metrics.h"
#include "workload.h"

#define PROBE_WORKLOAD_FLAG_BASE 1000

struct probe_workload_flags {
	/* The workload, complete after probe_workload_flags_finish().
	 * dataset_path points into argv (not owned). */
	struct probe_workload_config workload;

	/* The SLA from --sla / --goodput / --attainment (empty when none given). */
	struct probe_sla sla;

	/* --metric-percentiles: default 50, 90, 99 (vLLM's default is 99 alone;
	 * the median is reported anyway). */
	double percentiles[PROBE_MAX_PERCENTILES];
	size_t n_percentiles;

	/* --percentile-metrics: which metrics the table shows (bit 1 << enum
	 * probe_metric); default ttft, tpot, itl, e2el. JSON always has all. */
	unsigned percentile_metrics;

	/* What was given explicitly (for messages and for commands that
	 * change defaults, e.g. a rate search ignoring --request-rate). */
	bool set_request_rate, set_arrival, set_burstiness, set_goodput, set_sla, set_attainment;
	bool set_num_prompts, set_seed, set_num_warmups, set_max_concurrency, set_ignore_eos, set_percentiles;

	/* --workload FILE: its document (owned: the workload points into it) */
	const char *workload_path;
	cJSON *workload_json;

	/* internal state of the parser */
	unsigned shape_flags; /* bit per flag that describes the shape (refused with --workload) */
	bool request_rate_inf;
	enum probe_dist input_dist_kind, output_dist_kind;
	double input_std, output_std;
	bool set_input_std, set_output_std, set_range_ratio, set_dataset_output_len;
};

/* Defaults: probe_workload_config_init's workload, percentiles 50/90/99,
 * every metric shown, no SLA. */
void probe_workload_flags_init(struct probe_workload_flags *f);

/* Frees what f owns (the --workload document); f->workload is invalid after. */
void probe_workload_flags_done(struct probe_workload_flags *f);

/* The shared long options, terminated by an all-zero entry. Static storage. */
const struct option *probe_workload_flags_options(void);

/* A new array: own (terminated by an all-zero entry, may be NULL) followed by
 * the shared options, terminated. The caller frees it with free(). */
int probe_workload_flags_merge_options(const struct option *own, struct option **ret);

/* Handles one option returned by getopt_long. Returns 1 when opt was a shared
 * flag and has been applied, 0 when it is not one of ours, negative errno
 * with err naming the flag and value when the value is bad. When argv is not
 * NULL, --goodput also takes the following words of the form NAME:VALUE
 * (vLLM's `--goodput ttft:500 tpot:50`), advancing optind past them. */
int probe_workload_flags_handle(int opt, const char *arg, int argc, char **argv, struct probe_workload_flags *f,
				struct error *err);

/* Checks combinations (--goodput with --sla, --dataset-path without a file
 * dataset, gamma without a finite rate, ...) and completes f->workload (the
 * arrival process, length distributions). Call once after the getopt loop. */
int probe_workload_flags_finish(struct probe_workload_flags *f, struct error *err);

/* Help text for the shared flags, one per line, indented two spaces. */
void probe_workload_flags_help(FILE *out);
