/* faults.c — fault-injection decisions for goodput-sim (see faults.h).
 *
 * A private splitmix64 generator keeps the fault draws apart from the
 * engine's and the text generator's randomness: turning a fault on does not
 * change which tokens or timings an unaffected request sees. */
#include "faults.h"

#include <string.h>

void sim_faults_init(struct sim_faults *f, uint64_t seed)
{
	memset(f, 0, sizeof(*f));
	sim_faults_seed(f, seed);
}

void sim_faults_seed(struct sim_faults *f, uint64_t seed)
{
	f->rng_state = seed ^ UINT64_C(0x6661756c74733031); /* "faults01" */
}

bool sim_faults_any(const struct sim_faults *f)
{
	return f->crash_after > 0 || f->hang_after > 0 || f->fail_startup || f->http500_fraction > 0 ||
	       f->bad_sse_fraction > 0 || f->jitter_sigma > 0 || f->step_overhead_ms > 0;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

double sim_faults_uniform(struct sim_faults *f)
{
	return (double)(splitmix64(&f->rng_state) >> 11) * 0x1.0p-53;
}

bool sim_faults_draw_http500(struct sim_faults *f)
{
	if (f->http500_fraction <= 0)
		return false;
	return sim_faults_uniform(f) < f->http500_fraction;
}

bool sim_faults_draw_bad_sse(struct sim_faults *f)
{
	if (f->bad_sse_fraction <= 0)
		return false;
	return sim_faults_uniform(f) < f->bad_sse_fraction;
}
