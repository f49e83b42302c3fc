/* stream-server.h — the probe benchmark's minimal streaming server (runs in
 * a forked child; see stream-server.c). */
#pragma once

#include <stdint.h>

#define BENCH_GAP_BUCKETS  100000 /* µs; the last bucket holds everything longer */
#define BENCH_MAX_REQUESTS 1024   /* request ids whose send times are kept */
#define BENCH_MAX_TOKENS   512    /* ... for their first so many tokens */
#define BENCH_MAX_TOKEN_ID 32768  /* above the workload's token ids */

/* Lives in shared memory: the parent reads what the child recorded. */
struct bench_server_stats {
	uint64_t requests, tokens;
	uint64_t gap_hist[BENCH_GAP_BUCKETS]; /* actual gaps between a stream's sends, µs */
	/* when token K of request ID went out (CLOCK_MONOTONIC µs, 0: not
	 * sent): [ID * BENCH_MAX_TOKENS + K] */
	uint64_t send_usec[BENCH_MAX_REQUESTS * BENCH_MAX_TOKENS];
	/* the server knows a request by its prompt's first token id: ID + 1
	 * of the request whose prompt starts with token T is request_of[T]
	 * (0: none, or more than one — not recorded); the parent fills it in */
	uint32_t request_of[BENCH_MAX_TOKEN_ID];
};

/* Serves on listen_fd until stop_fd becomes readable; never returns. */
void bench_server_run(int listen_fd, int stop_fd, struct bench_server_stats *stats) __attribute__((noreturn));
