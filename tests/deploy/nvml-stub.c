/* nvml-stub.c — a stand-in for libnvidia-ml.so.1 exporting the NVML calls
 * goodput uses, for test-gpu-telemetry (loaded via GOODPUT_NVML_LIBRARY).
 * Two "GPUs" whose utilisation climbs 10 points per reading (wrapping at
 * 100) and whose used memory grows 100 MiB per reading from 1000 MiB, so a
 * test can tell that peak, mean and sample counts come from real calls. */
#include <stdio.h>
#include <string.h>

struct nvml_utilization {
	unsigned int gpu, memory;
};
struct nvml_memory {
	unsigned long long total, free, used;
};

static int initialised;
static unsigned readings[2];
static struct {
	int index;
} devices[2] = { { 0 }, { 1 } };

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned int *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
int nvmlDeviceGetUtilizationRates(void *device, struct nvml_utilization *u);
int nvmlDeviceGetMemoryInfo(void *device, struct nvml_memory *m);
int nvmlDeviceGetName(void *device, char *name, unsigned int length);
int nvmlSystemGetDriverVersion(char *version, unsigned int length);

int nvmlInit_v2(void)
{
	initialised = 1;
	return 0;
}

int nvmlShutdown(void)
{
	initialised = 0;
	return 0;
}

int nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!initialised)
		return 1; /* NVML_ERROR_UNINITIALIZED */
	*count = 2;
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
	if (index >= 2)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*device = &devices[index];
	return 0;
}

int nvmlDeviceGetUtilizationRates(void *device, struct nvml_utilization *u)
{
	int i = *(int *)device;

	u->gpu = (readings[i] * 10 + 10) % 110;
	u->memory = 50;
	return 0;
}

int nvmlDeviceGetMemoryInfo(void *device, struct nvml_memory *m)
{
	int i = *(int *)device;

	m->total = 81559ull << 20;
	m->used = (1000ull + 100ull * readings[i]++) << 20;
	m->free = m->total - m->used;
	return 0;
}

int nvmlDeviceGetName(void *device, char *name, unsigned int length)
{
	snprintf(name, length, "NVIDIA H100 80GB HBM3");
	return 0;
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	snprintf(version, length, "550.54.15");
	return 0;
}
