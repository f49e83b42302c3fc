/* nvml-stub-tune.c — a stand-in for libnvidia-ml.so.1 for the tune tests
 * (loaded via GOODPUT_NVML_LIBRARY). One "GPU" whose utilisation climbs 10
 * points per reading (wrapping at 100) and whose used memory is read from
 * the file $GOODPUT_NVML_STUB_MEMORY: "MIB" or "MIB UNTIL IDLE_MIB" (MIB
 * until the UNIX time UNTIL, IDLE_MIB after it); 1000 when the variable or
 * the file is missing. A test's deploy script makes the memory rise with a
 * server, its teardown lets it fall back a moment after the server is gone,
 * which the runner's hygiene between trials must wait for. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct nvml_utilization {
	unsigned int gpu, memory;
};
struct nvml_memory {
	unsigned long long total, free, used;
};

static int initialised;
static unsigned readings;
static int device;

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
	*count = 1;
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **ret)
{
	if (index >= 1)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*ret = &device;
	return 0;
}

int nvmlDeviceGetUtilizationRates(void *dev, struct nvml_utilization *u)
{
	u->gpu = (readings++ * 10 + 10) % 110;
	u->memory = 50;
	return 0;
}

int nvmlDeviceGetMemoryInfo(void *dev, struct nvml_memory *m)
{
	const char *path = getenv("GOODPUT_NVML_STUB_MEMORY");
	unsigned long long mib = 1000, until = 0, idle = 0;
	FILE *f = path ? fopen(path, "re") : NULL;

	if (f) {
		int n = fscanf(f, "%llu %llu %llu", &mib, &until, &idle);

		if (n < 1)
			mib = 1000;
		else if (n == 3 && (unsigned long long)time(NULL) >= until)
			mib = idle;
		fclose(f);
	}
	m->total = 46068ull << 20;
	m->used = mib << 20;
	m->free = m->total - m->used;
	return 0;
}

int nvmlDeviceGetName(void *dev, char *name, unsigned int length)
{
	snprintf(name, length, "NVIDIA L40S");
	return 0;
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	snprintf(version, length, "550.54.15");
	return 0;
}
