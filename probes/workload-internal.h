/* workload-internal.h — what workload.c and workload-dataset.c share; not
 * part of the probe's public interface. */
#pragma once

#include <stdint.h>
#include <stddef.h>

#include "error.h"
#include "rng.h"
#include "workload.h"

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

/* Each loads a whole file and keeps the valid entries; at least one must be
 * valid. Errors name the file, the line or entry, and the field. */
int probe_dataset_load_sharegpt(const char *path, struct probe_dataset_entries **ret, struct error *err);
int probe_dataset_load_jsonl(const char *path, struct probe_dataset_entries **ret, struct error *err);

/* One draw from a length distribution, clamped to [min, max]. */
uint32_t probe_workload_draw_length(const struct probe_length_dist *d, struct probe_rng *rng);
