/* prom.h — the server-side view of a load point: a small reader of the
 * Prometheus text exposition format, and the running figures (means, peaks,
 * preemption increase) built from periodic scrapes of /metrics.
 *
 * Only what the probe reports is read: vLLM's vllm:num_requests_running,
 * vllm:num_requests_waiting, vllm:gpu_cache_usage_perc (or the newer
 * vllm:kv_cache_usage_perc) and vllm:num_preemptions_total, and SGLang's
 * equivalents (sglang:num_running_reqs, sglang:num_queue_reqs,
 * sglang:token_usage). Series of one metric with different labels (one per
 * model or engine) are summed; usage is their maximum. Labels are parsed
 * (quoted values with escapes) but their contents are not used. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "metrics.h"

struct probe_prom_sample {
	bool have_running, have_waiting, have_kv, have_preemptions;
	double running, waiting, kv_usage, preemptions;
};

/* Parses one /metrics body. Lines it cannot read make it fail with the line
 * number; unknown metrics are skipped. */
int probe_prom_parse(const char *text, size_t len, struct probe_prom_sample *ret, struct error *err);

/* Accumulates samples over a load point. */
struct probe_prom_acc {
	size_t n;
	double running_sum, waiting_sum, kv_sum;
	size_t n_running, n_waiting, n_kv;
	double running_peak, waiting_peak, kv_peak;
	bool have_preemptions;
	double preemptions_first, preemptions_last;
};

void probe_prom_acc_init(struct probe_prom_acc *a);
void probe_prom_acc_add(struct probe_prom_acc *a, const struct probe_prom_sample *s);
/* present = at least one sample held one of the metrics. */
void probe_prom_acc_result(const struct probe_prom_acc *a, struct probe_server_metrics *ret);
