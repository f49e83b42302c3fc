/* GPU telemetry and host information: without NVML everything is
 * "unavailable" and nothing fails; with a stub NVML library (built by meson,
 * named by GOODPUT_NVML_LIBRARY) sampling on sd-event yields peak/mean
 * utilisation and memory from real calls, and the host JSON names the GPU
 * model, driver and count, plus the engine version from the profile's
 * version command run on the loop.
 *
 * Usage: test-gpu-telemetry PATH-TO-libnvml-stub.so PATH-TO-goodput-sim */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-profile.h"
#include "gpu-telemetry.h"
#include "json-util.h"
#include "tests.h"
#include "time-util.h"

static const char *stub_path, *sim_path;

static void run_for(sd_event *e, uint64_t usec)
{
	uint64_t end = mono_usec() + usec;

	while (mono_usec() < end)
		CHECK(sd_event_run(e, end - mono_usec()) >= 0);
}

struct host {
	bool done;
	char *json;
};

static void on_host(struct host_info_job *j, char *json, void *userdata)
{
	struct host *h = userdata;

	h->json = json;
	h->done = true;
}

static char *host_info(sd_event *e, const struct engine_profile *p, struct gpu_telemetry *t)
{
	struct host h = { 0 };
	struct host_info_job *j = NULL;
	uint64_t end = mono_usec() + 20 * USEC_PER_SEC;

	CHECK(host_info_start(e, p, NULL, t, 10 * USEC_PER_SEC, on_host, &h, &j) == 0);
	while (!h.done && mono_usec() < end)
		CHECK(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
	CHECK(h.done && h.json);
	host_info_job_free(j);
	return h.json;
}

static struct engine_profile *profile(const char *version_prog)
{
	struct engine_profile *p = NULL;
	struct error err = { 0 };
	char buf[1024];
	cJSON *j = NULL;

	snprintf(buf, sizeof(buf),
		 "{\"name\": \"t\", \"argv\": [\"srv\"], \"knobs\": {}, \"health\": {\"path\": \"/health\"},"
		 " \"version_command\": [\"%s\", \"--version\"]}",
		 version_prog);
	CHECK(json_parse_strict("p", buf, strlen(buf), &j, &err) == 0);
	CHECK_MSG(engine_profile_from_json(j, "t.json", &p, &err) == 0, "%s", err.msg);
	cJSON_Delete(j);
	return p;
}

static void test_unavailable(sd_event *e)
{
	_cleanup_(gpu_telemetry_freep) struct gpu_telemetry *t = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = profile("/nonexistent/engine");
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(freep) char *s = NULL, *host = NULL;
	struct gpu_telemetry_stats st;
	double mib;

	setenv("GOODPUT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	CHECK(gpu_telemetry_new(e, 10 * USEC_PER_MSEC, &t) == 0);
	CHECK(!gpu_telemetry_available(t));
	CHECK_STR_CONTAINS(gpu_telemetry_unavailable_reason(t), "/nonexistent/libnvidia-ml.so.1");
	CHECK(gpu_telemetry_start(t) == 0);
	run_for(e, 50 * USEC_PER_MSEC);
	CHECK(gpu_telemetry_stop(t) == 0);
	gpu_telemetry_get(t, &st);
	CHECK(!st.available && st.samples == 0);
	CHECK(gpu_telemetry_stats_to_json(&st, &j) == 0);
	s = cJSON_PrintUnformatted(j);
	CHECK_STR_EQ(s, "{\"available\":false}");
	CHECK(gpu_telemetry_memory_used(t, &mib) == -ENODEV);
	host = host_info(e, p, t);
	CHECK_STR_CONTAINS(host, "\"engine_version\":null");
	CHECK_STR_CONTAINS(host, "\"gpu_model\":null");
	CHECK_STR_CONTAINS(host, "\"gpu_telemetry\":\"unavailable: ");
	fprintf(stderr, "without NVML: %s\n", host);
}

static void test_stub(sd_event *e)
{
	_cleanup_(gpu_telemetry_freep) struct gpu_telemetry *t = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = profile(sim_path);
	_cleanup_(freep) char *host = NULL;
	struct gpu_telemetry_stats st;
	uint64_t t0, ran;
	double mib;

	setenv("GOODPUT_NVML_LIBRARY", stub_path, 1);
	CHECK(gpu_telemetry_new(e, 20 * USEC_PER_MSEC, &t) == 0);
	CHECK_MSG(gpu_telemetry_available(t), "%s", gpu_telemetry_unavailable_reason(t));
	t0 = mono_usec();
	CHECK(gpu_telemetry_start(t) == 0);
	run_for(e, 300 * USEC_PER_MSEC);
	CHECK(gpu_telemetry_stop(t) == 0);
	ran = mono_usec() - t0;
	gpu_telemetry_get(t, &st);
	/* one at start, then every 20 ms: at least a few, never more than the
	 * time it ran allows (a starved loop under valgrind runs past 300 ms) */
	CHECK_MSG(st.available && st.gpus == 2 && st.samples >= 4 && st.samples <= 2 + ran / (20 * USEC_PER_MSEC),
		  "%u samples in %.0f ms", st.samples, (double)ran / USEC_PER_MSEC);
	/* utilisation 10, 20, ... per reading: mean (n+1)*5 for n <= 10 samples, peak the last */
	CHECK(st.util_peak >= st.util_mean && st.util_mean >= 10);
	CHECK(st.util_peak == (st.samples <= 10 ? st.samples * 10 : 100));
	/* memory: 2 GPUs × (1000 + 100 k) MiB at reading k */
	CHECK(st.mem_used_peak_mib == 2 * (1000 + 100 * (st.samples - 1)));
	CHECK(st.mem_used_mean_mib == 2 * (1000 + 50.0 * (st.samples - 1)));
	CHECK(st.mem_total_mib == 2 * 81559);
	/* Stopped means stopped: no more readings. */
	run_for(e, 100 * USEC_PER_MSEC);
	gpu_telemetry_get(t, &st);
	CHECK(st.mem_used_peak_mib == 2 * (1000 + 100 * (st.samples - 1)));
	CHECK(gpu_telemetry_memory_used(t, &mib) == 0 && mib == 2 * (1000 + 100 * st.samples));
	fprintf(stderr, "stub NVML: %u samples, util peak %.0f %% mean %.1f %%, memory peak %.0f MiB\n", st.samples,
		st.util_peak, st.util_mean, st.mem_used_peak_mib);

	host = host_info(e, p, t);
	CHECK_STR_CONTAINS(host, "\"engine_version\":\"goodput-sim ");
	CHECK_STR_CONTAINS(host, "\"gpu_model\":\"NVIDIA H100 80GB HBM3\"");
	CHECK_STR_CONTAINS(host, "\"driver_version\":\"550.54.15\"");
	CHECK_STR_CONTAINS(host, "\"gpu_count\":2");
	fprintf(stderr, "with the stub: %s\n", host);

	/* A second start forgets the first load point. */
	CHECK(gpu_telemetry_start(t) == 0);
	gpu_telemetry_get(t, &st);
	CHECK(st.samples == 1);
}

int main(int argc, char **argv)
{
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;

	CHECK_MSG(argc == 3, "usage: test-gpu-telemetry STUB-LIBRARY GOODPUT-SIM");
	stub_path = argv[1];
	sim_path = argv[2];
	CHECK(sd_event_default(&e) >= 0);
	test_unavailable(e);
	test_stub(e);
	return 0;
}
