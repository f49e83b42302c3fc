/* report-fixture.h — synthetic studies in a store, built through the store
 * API with figures a real study would record, for the report tests. */
#pragma once

#include <stdint.h>

struct store;

/* The figures the tests check against (price 0.99 $/GPU-hour). */
#define FIX_PRICE             0.99
#define FIX_A                 "before" /* 9 trials: done, infeasible (oom, SLA), failed, a confirm, a sweep; best trial 3 */
#define FIX_B                 "after"         /* same workload/SLA; A's best misses the SLA, a new winner */
#define FIX_C                 "nothing-meets" /* every trial failed or missed the SLA */
#define FIX_D                 "after-other"   /* same workload/SLA; never tried A's best */
#define FIX_A_BEST_KEY        "max_num_seqs=32,max_num_batched_tokens=1024,quantization=fp8,tensor_parallel=1"
#define FIX_A_BEST_RATE       4.0
#define FIX_A_BEST_GOODPUT    250.0
#define FIX_A_CONFIRM_GOODPUT 240.0 /* its re-probe: the study's cost is the mean of the two */
#define FIX_B_BEST_GOODPUT    500.0
#define FIX_LAUNCH_PORT       41000               /* + the trial's number: the port each trial was launched on */
#define FIX_T0_USEC           1767225600000000ull /* 2026-01-01: trial n runs 100 s from 2 min × (n − 1) */
/* GPU telemetry (study A only; B, C, D have none): utilisation %, memory MiB
 * at each trial's SLA-edge load point (A's best: 4.0 req/s) */
#define FIX_GPU_UTIL_MEAN 60.0
#define FIX_GPU_UTIL_PEAK 80.0
#define FIX_GPU_MEM_MEAN  30000.0
#define FIX_GPU_MEM_PEAK  34000.0

/* $/Mtok as the cost model computes it. */
double fix_cost(unsigned gpus, double goodput);

/* Creates the four studies in s. Exits the test on failure. */
void fix_fill(struct store *s);

/* A study whose best runs on 2 GPUs (10 req/s a replica) and whose
 * runner-up on 1 (4 req/s): the runner-up is cheaper at low load. */
#define FIX_E "two-sizes"
void fix_fill_two_sizes(struct store *s);
/* One trial, no sweep: its rate search's load points at 85-100 % of its
 * max rate, as a real search leaves them (make-study writes it too). */
#define FIX_F "clustered"
void fix_fill_clustered(struct store *s);
