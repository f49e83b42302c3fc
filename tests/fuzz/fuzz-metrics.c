/* fuzz-metrics.c — libFuzzer target for the /metrics reader: a body as
 * received (a raw buffer, not NUL-terminated: libFuzzer's copy ends exactly
 * at size, so AddressSanitizer sees any read past it) is read or refused
 * with the line's number, and samples fold into a load point's figures;
 * the same body read as TensorRT-LLM's JSON iteration statistics is read or
 * refused with a message. */
#include <stdint.h>
#include <stdlib.h>

#include "prom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct probe_prom_sample s;
	struct probe_prom_acc acc;
	struct probe_server_metrics m;
	struct probe_metrics_map trt;
	struct error err = { 0 };

	probe_metrics_map_init(&trt);
	trt.format = PROBE_METRICS_TRTLLM_JSON;
	if (probe_metrics_map_add(&trt, PROBE_SERIES_KV_USAGE, "kvCacheStats.usedNumBlocks / kvCacheStats.maxNumBlocks",
				  &err) < 0 ||
	    probe_metrics_map_add(&trt, PROBE_SERIES_RUNNING, "numActiveRequests", &err) < 0)
		abort();
	if (probe_metrics_parse((const char *)data, size, &trt, &s, &err) < 0 && !err.msg[0])
		abort();
	err.msg[0] = 0;

	probe_prom_acc_init(&acc);
	if (probe_prom_parse((const char *)data, size, NULL, &s, &err) < 0) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	probe_prom_acc_add(&acc, &s);
	probe_prom_acc_add(&acc, &s);
	probe_prom_acc_result(&acc, &m);
	return 0;
}
