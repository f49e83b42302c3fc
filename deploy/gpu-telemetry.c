/* gpu-telemetry.c — NVML loaded at run time, sampled on sd-event, and the
 * host facts (engine version, GPU model, driver, count) stored with trials.
 *
 * NVML is the NVIDIA driver's management library. It ships with the driver,
 * not with goodput, so it is dlopen()ed by soname and resolved symbol by
 * symbol; any failure (no library, a missing symbol, nvmlInit failing
 * because there is no GPU) leaves the sampler "unavailable" with the reason,
 * and every call still succeeds. $GOODPUT_NVML_LIBRARY names another file
 * (the tests' stub library). The version command runs as a child process
 * whose output arrives through a pipe on the loop: `vllm --version` imports
 * Python packages for seconds, which must not stall the runner. */
#include "gpu-telemetry.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "json-util.h"
#include "time-util.h"

/* The NVML ABI, as its header declares it (only what is used). */
typedef int nvml_return;
typedef struct nvml_device *nvml_device;
struct nvml_utilization {
	unsigned int gpu, memory;
};
struct nvml_memory {
	unsigned long long total, free, used;
};

struct nvml {
	void *lib;
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	nvml_return (*count)(unsigned int *);
	nvml_return (*handle)(unsigned int, nvml_device *);
	nvml_return (*util)(nvml_device, struct nvml_utilization *);
	nvml_return (*mem)(nvml_device, struct nvml_memory *);
	nvml_return (*name)(nvml_device, char *, unsigned int);
	nvml_return (*driver)(char *, unsigned int);
};

struct gpu_telemetry {
	sd_event *event;
	uint64_t interval_usec;
	struct nvml nvml;
	bool available;
	char reason[256];
	unsigned n_gpus;
	nvml_device devices[GPU_TELEMETRY_MAX_GPUS];
	sd_event_source *timer;
	/* running statistics since start */
	unsigned samples;
	double util_sum, util_peak, mem_sum, mem_peak, mem_total;
};

static void unavailable(struct gpu_telemetry *t, const char *what, const char *detail)
{
	snprintf(t->reason, sizeof(t->reason), "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
	t->available = false;
}

static void failed(struct gpu_telemetry *t, const char *call, int code)
{
	char detail[32];

	snprintf(detail, sizeof(detail), "NVML error %d", code);
	unavailable(t, call, detail);
}

static void load_nvml(struct gpu_telemetry *t)
{
	const char *path = getenv("GOODPUT_NVML_LIBRARY");
	struct nvml *n = &t->nvml;
	struct {
		const char *sym;
		void **dst;
	} syms[] = {
		{ "nvmlInit_v2", (void **)&n->init },
		{ "nvmlShutdown", (void **)&n->shutdown },
		{ "nvmlDeviceGetCount_v2", (void **)&n->count },
		{ "nvmlDeviceGetHandleByIndex_v2", (void **)&n->handle },
		{ "nvmlDeviceGetUtilizationRates", (void **)&n->util },
		{ "nvmlDeviceGetMemoryInfo", (void **)&n->mem },
		{ "nvmlDeviceGetName", (void **)&n->name },
		{ "nvmlSystemGetDriverVersion", (void **)&n->driver },
	};
	unsigned count = 0;
	int r;

	n->lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		unavailable(t, dlerror(), NULL);
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(syms); i++) {
		*syms[i].dst = dlsym(n->lib, syms[i].sym);
		if (!*syms[i].dst) {
			unavailable(t, "the NVML library lacks", syms[i].sym);
			return;
		}
	}
	r = n->init();
	if (r != 0) {
		failed(t, "nvmlInit_v2", r);
		return;
	}
	r = n->count(&count);
	if (r != 0 || count == 0) {
		if (r)
			failed(t, "nvmlDeviceGetCount_v2", r);
		else
			unavailable(t, "nvmlDeviceGetCount_v2", "no GPU");
		(void)n->shutdown();
		return;
	}
	t->n_gpus = MIN(count, (unsigned)GPU_TELEMETRY_MAX_GPUS);
	for (unsigned i = 0; i < t->n_gpus; i++) {
		r = n->handle(i, &t->devices[i]);
		if (r != 0) {
			failed(t, "nvmlDeviceGetHandleByIndex_v2", r);
			(void)n->shutdown();
			return;
		}
	}
	t->available = true;
	t->reason[0] = 0;
}

int gpu_telemetry_new(sd_event *e, uint64_t interval_usec, struct gpu_telemetry **ret)
{
	struct gpu_telemetry *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->event = sd_event_ref(e);
	t->interval_usec = interval_usec ? interval_usec : 500 * USEC_PER_MSEC;
	load_nvml(t);
	*ret = t;
	return 0;
}

struct gpu_telemetry *gpu_telemetry_free(struct gpu_telemetry *t)
{
	if (!t)
		return NULL;
	sd_event_source_disable_unref(t->timer);
	if (t->available)
		(void)t->nvml.shutdown();
	if (t->nvml.lib)
		dlclose(t->nvml.lib);
	sd_event_unref(t->event);
	free(t);
	return NULL;
}

bool gpu_telemetry_available(const struct gpu_telemetry *t)
{
	return t && t->available;
}

const char *gpu_telemetry_unavailable_reason(const struct gpu_telemetry *t)
{
	return !t ? "no telemetry" : t->available ? NULL : t->reason;
}

/* One sample of every GPU; a GPU that fails to answer skips the sample. */
static void sample(struct gpu_telemetry *t)
{
	double util = 0, used = 0, total = 0;

	for (unsigned i = 0; i < t->n_gpus; i++) {
		struct nvml_utilization u;
		struct nvml_memory m;

		if (t->nvml.util(t->devices[i], &u) != 0 || t->nvml.mem(t->devices[i], &m) != 0)
			return;
		util += u.gpu;
		used += (double)m.used / (1024.0 * 1024.0);
		total += (double)m.total / (1024.0 * 1024.0);
	}
	util /= t->n_gpus;
	t->samples++;
	t->util_sum += util;
	t->mem_sum += used;
	t->util_peak = MAX(t->util_peak, util);
	t->mem_peak = MAX(t->mem_peak, used);
	t->mem_total = total;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct gpu_telemetry *t = userdata;

	sample(t);
	/* from now, not from when it was due: after a stall (a starved loop
	 * under valgrind) the readings do not come in a burst to catch up */
	(void)sd_event_source_set_time(s, mono_usec() + t->interval_usec);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

int gpu_telemetry_start(struct gpu_telemetry *t)
{
	int r;

	t->samples = 0;
	t->util_sum = t->util_peak = t->mem_sum = t->mem_peak = t->mem_total = 0;
	if (!t->available)
		return 0;
	sample(t);
	if (!t->timer) {
		r = sd_event_add_time_relative(t->event, &t->timer, CLOCK_MONOTONIC, t->interval_usec, 1000, on_timer,
					       t);
		if (r < 0)
			return r;
		(void)sd_event_source_set_description(t->timer, "gpu-telemetry");
		return 0;
	}
	r = sd_event_source_set_time(t->timer, mono_usec() + t->interval_usec);
	if (r >= 0)
		r = sd_event_source_set_enabled(t->timer, SD_EVENT_ONESHOT);
	return r;
}

int gpu_telemetry_stop(struct gpu_telemetry *t)
{
	if (t->timer)
		return sd_event_source_set_enabled(t->timer, SD_EVENT_OFF);
	return 0;
}

void gpu_telemetry_get(const struct gpu_telemetry *t, struct gpu_telemetry_stats *ret)
{
	*ret = (struct gpu_telemetry_stats){ .available = gpu_telemetry_available(t) };
	if (!ret->available)
		return;
	ret->gpus = t->n_gpus;
	ret->samples = t->samples;
	if (t->samples) {
		ret->util_peak = t->util_peak;
		ret->util_mean = t->util_sum / t->samples;
		ret->mem_used_peak_mib = t->mem_peak;
		ret->mem_used_mean_mib = t->mem_sum / t->samples;
		ret->mem_total_mib = t->mem_total;
	}
}

int gpu_telemetry_stats_to_json(const struct gpu_telemetry_stats *s, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_CreateObject();
	int r;

	if (!j)
		return -ENOMEM;
	r = json_add_bool(j, "available", s->available);
	if (r >= 0 && s->available) {
		r = json_add_number(j, "gpus", s->gpus);
		if (r >= 0)
			r = json_add_number(j, "samples", s->samples);
		if (r >= 0 && s->samples) {
			r = json_add_number(j, "util_peak", s->util_peak);
			if (r >= 0)
				r = json_add_number(j, "util_mean", s->util_mean);
			if (r >= 0)
				r = json_add_number(j, "mem_used_peak_mib", s->mem_used_peak_mib);
			if (r >= 0)
				r = json_add_number(j, "mem_used_mean_mib", s->mem_used_mean_mib);
			if (r >= 0)
				r = json_add_number(j, "mem_total_mib", s->mem_total_mib);
		}
	}
	if (r < 0)
		return r;
	*ret = TAKE_PTR(j);
	return 0;
}

int gpu_telemetry_memory_used(struct gpu_telemetry *t, double *ret_mib)
{
	double used = 0;

	if (!gpu_telemetry_available(t))
		return -ENODEV;
	for (unsigned i = 0; i < t->n_gpus; i++) {
		struct nvml_memory m;

		if (t->nvml.mem(t->devices[i], &m) != 0)
			return -EIO;
		used += (double)m.used / (1024.0 * 1024.0);
	}
	*ret_mib = used;
	return 0;
}

int gpu_telemetry_describe(struct gpu_telemetry *t, char *model, size_t model_size, char *driver, size_t driver_size,
			   unsigned *ret_count)
{
	char name[96] = "", drv[80] = "";

	if (!gpu_telemetry_available(t))
		return -ENODEV;
	if (t->nvml.name(t->devices[0], name, sizeof(name)) != 0 || t->nvml.driver(drv, sizeof(drv)) != 0)
		return -EIO;
	name[sizeof(name) - 1] = drv[sizeof(drv) - 1] = 0;
	snprintf(model, model_size, "%s", name);
	snprintf(driver, driver_size, "%s", drv);
	*ret_count = t->n_gpus;
	return 0;
}

/* ---- host information ---- */

#define VERSION_MAX_BYTES 65536

struct host_info_job {
	const struct engine_profile *profile; /* how its version command's output reads */
	struct gpu_telemetry *telemetry;
	host_info_fn cb;
	void *userdata;
	struct child *child; /* the version command */
	sd_event_source *defer;
	bool reported;
	char *program; /* the version command's program (a path or a name in $PATH) */
};

/* Where a program is: itself when it has a '/', else the first executable
 * of that name in $PATH. 0 with *ret_st, or -ENOENT. */
static int find_program(const char *program, char *buf, size_t size, struct stat *ret_st)
{
	const char *path = getenv("PATH");

	if (strchr(program, '/')) {
		snprintf(buf, size, "%s", program);
		return stat(buf, ret_st) < 0 ? -errno : 0;
	}
	for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(buf, size, "%.*s/%s", (int)n, n ? p : ".", program);
		if (access(buf, X_OK) == 0 && stat(buf, ret_st) == 0)
			return 0;
		p += n + (p[n] == ':');
	}
	return -ENOENT;
}

/* A version that names no release ("0 (unknown)": built from a tarball)
 * with the binary's size and build time beside it, so that two builds
 * stay apart: "0 (unknown; llama-server of 5242880 bytes built
 * 2025-12-03 22:17 UTC)". */
static void identify_binary(const char *program, char *version, size_t size)
{
	char path[4096], when[32];
	const char *base;
	struct stat st;
	struct tm tm;
	size_t n = strlen(version);

	if (!program || find_program(program, path, sizeof(path), &st) < 0 || !gmtime_r(&st.st_mtime, &tm) ||
	    size < n + 160)
		return;
	base = strrchr(path, '/');
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
	if (n > 0 && version[n - 1] == ')')
		n--; /* inside its parentheses */
	snprintf(version + n, size - n, "%s%.64s of %lld bytes built %.24s)",
		 n == 0              ? "unknown ("
		 : version[n] == ')' ? "; "
				     : " (",
		 base ? base + 1 : path, (long long)st.st_size, when);
}

/* version: the version command's output, NULL when it failed or is absent. */
static void report(struct host_info_job *j, char *version)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	char model[96], driver[80], found[256], *json = NULL;
	unsigned count = 0;
	struct utsname u;
	int r;

	if (j->reported)
		return;
	j->reported = true;
	if (!o) {
		j->cb(j, NULL, j->userdata);
		return;
	}
	/* The profile says which line is the version ("version: 4748 (c392e5094)",
	 * not the compiler line after it); by default the last non-empty line. */
	if (version && engine_profile_parse_version(j->profile, version, found, sizeof(found)) > 0) {
		if (engine_profile_version_unknown(j->profile, found))
			identify_binary(j->program, found, sizeof(found));
		r = json_add_string(o, "engine_version", found);
	} else
		r = cJSON_AddNullToObject(o, "engine_version") ? 0 : -ENOMEM;
	if (r >= 0 && j->telemetry &&
	    gpu_telemetry_describe(j->telemetry, model, sizeof(model), driver, sizeof(driver), &count) == 0) {
		r = json_add_string(o, "gpu_model", model);
		if (r >= 0)
			r = json_add_string(o, "driver_version", driver);
		if (r >= 0)
			r = json_add_number(o, "gpu_count", count);
	} else if (r >= 0) {
		char why[300];

		snprintf(why, sizeof(why), "unavailable: %s", gpu_telemetry_unavailable_reason(j->telemetry));
		r = cJSON_AddNullToObject(o, "gpu_model") ? 0 : -ENOMEM;
		if (r >= 0)
			r = json_add_string(o, "gpu_telemetry", why);
	}
	if (r >= 0 && uname(&u) == 0) {
		r = json_add_string(o, "hostname", u.nodename);
		if (r >= 0)
			r = json_add_string(o, "kernel", u.release);
	}
	if (r >= 0) {
		char *s = cJSON_PrintUnformatted(o);
		if (s) {
			json = strdup(s);
			cJSON_free(s);
		}
	}
	j->cb(j, json, j->userdata);
}

static void on_version_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	_cleanup_(freep) char *out = strdup(child_get_output(c, NULL));

	report(userdata, child_exit_ok(how) ? out : NULL);
}

static int on_defer(sd_event_source *s, void *userdata)
{
	report(userdata, NULL);
	return 0;
}

/* The version command, its program the study's engine_binary when it is the
 * profile's own (llama-server --version; not python3 -c ...). */
static char **version_argv(const struct engine_profile *p, const char *binary)
{
	size_t n = 0;
	char **v;

	if (!p || !p->version_command)
		return NULL;
	while (p->version_command[n])
		n++;
	v = calloc(n + 1, sizeof(char *));
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		v[i] = (char *)p->version_command[i];
	if (binary && n > 0 && p->argv && p->argv[0] && strcmp(v[0], p->argv[0]) == 0)
		v[0] = (char *)binary;
	return v;
}

int host_info_start(sd_event *e, const struct engine_profile *p, const char *binary, struct gpu_telemetry *t,
		    uint64_t timeout_usec, host_info_fn cb, void *userdata, struct host_info_job **ret)
{
	_cleanup_(freep) char **argv = version_argv(p, binary);
	struct child_options o = {
		.argv = argv,
		.output = CHILD_OUTPUT_CAPTURE,
		.capture_max = VERSION_MAX_BYTES,
		.timeout_usec = timeout_usec ? timeout_usec : 60 * USEC_PER_SEC,
		.description = "host-info-version",
	};
	struct host_info_job *j = calloc(1, sizeof(*j));
	int r;

	if (!j)
		return -ENOMEM;
	j->profile = p;
	j->telemetry = t;
	if (argv && argv[0] && !(j->program = strdup(argv[0]))) {
		free(j);
		return -ENOMEM;
	}
	j->cb = cb;
	j->userdata = userdata;
	/* No version command, or a program that cannot start: report at once (version null). */
	if (o.argv && child_spawn(e, &o, on_version_exit, j, &j->child) >= 0) {
		*ret = j;
		return 0;
	}
	r = sd_event_add_defer(e, &j->defer, on_defer, j);
	if (r < 0) {
		host_info_job_free(j);
		return r;
	}
	(void)sd_event_source_set_description(j->defer, "host-info");
	*ret = j;
	return 0;
}

struct host_info_job *host_info_job_free(struct host_info_job *j)
{
	if (!j)
		return NULL;
	child_free(j->child);
	sd_event_source_disable_unref(j->defer);
	free(j->program);
	free(j);
	return NULL;
}
