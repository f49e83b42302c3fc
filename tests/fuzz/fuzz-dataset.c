/* fuzz-dataset.c — libFuzzer target for the probe's dataset readers: the
 * input, after its first byte (which picks JSONL or ShareGPT), is the file's
 * content; it is read through a memfd as any user-named file is (opened
 * non-blocking, checked to be regular), then turned into a workload. No
 * crash, leak or out-of-bounds access; a refusal says why. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "workload-internal.h"
#include "workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct probe_dataset_entries *d = NULL;
	struct probe_workload_config cfg;
	struct probe_workload *w = NULL;
	struct error err = { 0 };
	char path[64];
	bool sharegpt;
	int fd, r;

	if (size == 0)
		return 0;
	sharegpt = data[0] & 1;
	fd = memfd_create("dataset", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if (size > 1 && write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	r = sharegpt ? probe_dataset_load_sharegpt(path, &d, &err) : probe_dataset_load_jsonl(path, &d, &err);
	if (r < 0) {
		if (!err.msg[0] || d)
			abort();
	} else {
		if (d->n == 0)
			abort();
		probe_dataset_free(d);
		probe_workload_config_init(&cfg);
		cfg.dataset = sharegpt ? PROBE_DATASET_SHAREGPT : PROBE_DATASET_CUSTOM;
		cfg.dataset_path = path;
		cfg.num_prompts = 16;
		cfg.seed = 1;
		if (probe_workload_generate(&cfg, &w, &err) == 0)
			probe_workload_free(w);
	}
	close(fd);
	return 0;
}
