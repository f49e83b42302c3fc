/* workload-internal.h — what workload.c and workload-dataset.c share; not
 * part of the probe's public interface. */
#pragma once

#include <stdint.h>
#include <stddef.h>

#include "error.h"
#include "rng.h"
#include "workload.h"

/* The names of enum probe_dataset, probe_dist and probe_arrival, in enum
 * order, NULL-terminated (for a JSON_ENUM's choices). */
extern const char *const probe_dataset_names[];
extern const char *const probe_dist_names[];
extern const char *const probe_arrival_names[];

struct probe_dataset_entry {
	char *prompt;        /* owned */
	uint32_t input_len;  /* words of prompt */
	uint32_t output_len; /* 0 = not given */
};

struct probe_dataset_entries {
	struct probe_dataset_entry *entries;
	size_t n;
};

struct probe_dataset_entries *probe_dataset_free(struct probe_dataset_entries *d);
static inline void probe_dataset_freep(struct probe_dataset_entries **d)
{
	probe_dataset_free(*d);
}

/* Reads a regular file line by line (at most PROBE_MAX_DATASET_BYTES, each
 * line at most PROBE_MAX_DATASET_LINE bytes, no NUL byte: errors name the
 * file and the line) and hands each line, its newline included, with its
 * number from 1 to fn; stops at fn's first error (fn sets err). */
typedef int (*probe_line_fn)(size_t lineno, const char *line, size_t len, void *userdata, struct error *err);
int probe_read_lines(const char *path, probe_line_fn fn, void *userdata, struct error *err);

/* Each loads a whole file and keeps the valid entries; at least one must be
 * valid. Errors name the file, the line or entry, and the field. */
int probe_dataset_load_sharegpt(const char *path, struct probe_dataset_entries **ret, struct error *err);
int probe_dataset_load_jsonl(const char *path, struct probe_dataset_entries **ret, struct error *err);

/* One draw from a length distribution, clamped to [min, max]. */
uint32_t probe_workload_draw_length(const struct probe_length_dist *d, struct probe_rng *rng);

/* A histogram ready to draw from (workload-measured.c): each bucket's
 * integer range, the cumulative counts, the lengths at GRID + 1 quantiles of
 * each bucket, and the tilt of those quantiles that matches the mean. */
#define PROBE_HISTOGRAM_GRID 32
struct probe_histogram_draw {
	uint32_t n;
	double cum[PROBE_HISTOGRAM_MAX_BUCKETS];
	uint32_t lo[PROBE_HISTOGRAM_MAX_BUCKETS], width[PROBE_HISTOGRAM_MAX_BUCKETS];
	double q[PROBE_HISTOGRAM_MAX_BUCKETS][PROBE_HISTOGRAM_GRID + 1];
	double theta;
};

void probe_histogram_prepare(const struct probe_length_dist *d, struct probe_histogram_draw *ret);
uint32_t probe_histogram_draw(const struct probe_histogram_draw *p, struct probe_rng *rng);

/* A run's walk through a rate profile: call probe_profile_warp with
 * increasing unit-rate times τ, it returns the run's seconds. */
struct probe_profile_warp {
	const struct probe_rate_profile *p;
	double scale;         /* requests/s per unit of the profile */
	uint32_t seg;         /* the segment the walk is in */
	double seg_day_start; /* where it began, day seconds from the run's start */
	double day;           /* the walk's day seconds from the run's start */
	double lambda_at;     /* expected arrivals by then */
};

void probe_profile_warp_init(const struct probe_rate_profile *p, double mean_rate, struct probe_profile_warp *ret);
double probe_profile_warp(struct probe_profile_warp *w, double tau);
