/* prom.h — the server-side view of a load point: readers of what a server
 * exports about itself (Prometheus text, or TensorRT-LLM's JSON iteration
 * statistics), and the running figures (means, peaks, counter increases)
 * built from periodic scrapes.
 *
 * Which metrics mean what comes from a map (prom-map.h): an engine profile's,
 * or the default one (vLLM, SGLang, llama.cpp and TGI names). Series of one
 * metric with different labels (one per model or engine) are summed; KV
 * usage is their maximum. Labels are parsed (quoted values with escapes)
 * but their contents are not used. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "metrics.h"
#include "prom-map.h"

/* One scrape: the value of each series the page held. */
struct probe_prom_sample {
	bool have[_PROBE_SERIES_MAX];
	double v[_PROBE_SERIES_MAX];
};

/* Parses one Prometheus /metrics body with map (NULL: the default map).
 * Lines it cannot read make it fail with the line number; metrics the map
 * does not name are skipped. */
int probe_prom_parse(const char *text, size_t len, const struct probe_metrics_map *map, struct probe_prom_sample *ret,
		     struct error *err);

/* Parses one body in the map's format (Prometheus text, or a JSON array of
 * iteration statistics whose newest element is read; an empty array is a
 * sample with nothing in it). map may be NULL (the default map). */
int probe_metrics_parse(const char *text, size_t len, const struct probe_metrics_map *map,
			struct probe_prom_sample *ret, struct error *err);

/* Accumulates samples over a load point. */
struct probe_prom_acc {
	size_t n;
	size_t n_have[_PROBE_SERIES_MAX];
	double sum[_PROBE_SERIES_MAX], peak[_PROBE_SERIES_MAX];   /* gauges */
	double first[_PROBE_SERIES_MAX], last[_PROBE_SERIES_MAX]; /* counters: first and last value */
	double increase[_PROBE_SERIES_MAX];                       /* counters: increase so far */
};

void probe_prom_acc_init(struct probe_prom_acc *a);
void probe_prom_acc_add(struct probe_prom_acc *a, const struct probe_prom_sample *s);
/* present = at least one sample held one of the series. */
void probe_prom_acc_result(const struct probe_prom_acc *a, struct probe_server_metrics *ret);
