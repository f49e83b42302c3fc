/* fuzz-sse.c — libFuzzer target for the probe's stream reader: any bytes,
 * cut at a point taken from the input, must neither crash nor leak nor read
 * out of bounds, and a cut must not change what is read. Built only with
 * clang (-fsanitize=fuzzer). Run: ./fuzz-sse -max_total_time=60 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_stream(const char *buf, size_t size, size_t cut, uint32_t *ret_chunks, int *ret_r)
{
	struct probe_request_result res = { 0 };
	struct probe_stream s;
	int r;

	probe_stream_init(&s, 512);
	probe_stream_begin(&s, &res, 0, 2);
	r = probe_stream_feed(&s, buf, cut, 1);
	if (r >= 0)
		r = probe_stream_feed(&s, buf + cut, size - cut, 2);
	if (r >= 0)
		r = probe_stream_end(&s);
	probe_stream_fill(&s, 0);
	*ret_chunks = s.chunks;
	*ret_r = r;
	probe_stream_done(&s);
	probe_request_result_done(&res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct probe_chunk c;
	uint32_t a, b;
	int ra, rb;

	(void)probe_sse_parse_chunk((const char *)data, size, &c, NULL);
	if (size == 0)
		return 0;
	read_stream((const char *)data, size, 0, &a, &ra);
	read_stream((const char *)data, size, data[0] % size, &b, &rb);
	/* Where the bytes were cut must not matter. */
	if (ra != rb || (ra >= 0 && a != b))
		abort();
	return 0;
}
