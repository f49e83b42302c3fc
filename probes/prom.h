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

#define PROBE_PROM_MAX_BUCKETS 160

/* A histogram as one scrape read it: buckets of every series of the name
 * (one per model, engine, ...) summed per bound. */
struct probe_prom_histogram {
	bool have;                          /* the page held it */
	char name[PROBE_METRIC_NAME_MAX];   /* the name it was found under */
	size_t n;                           /* finite bounds */
	double le[PROBE_PROM_MAX_BUCKETS];  /* increasing */
	double cum[PROBE_PROM_MAX_BUCKETS]; /* cumulative counts at each bound */
	double inf;                         /* the +Inf bucket: every observation */
	double sum, count;
};

/* Reads histogram series s (probe_series_is_histogram) from a Prometheus
 * page: the first of the map's names the page holds. ret->have is false
 * when the page holds none of them. Errors: a page that is not Prometheus
 * text, a bucket without its le, more than PROBE_PROM_MAX_BUCKETS bounds. */
int probe_prom_parse_histogram(const char *text, size_t len, const struct probe_metrics_map *map, enum probe_series s,
			       struct probe_prom_histogram *ret, struct error *err);

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
/* present = at least one sample held one of the series; a gauge's mean and
 * peak are NAN with fewer than two samples of it (never a peak of one). */
void probe_prom_acc_result(const struct probe_prom_acc *a, struct probe_server_metrics *ret);
