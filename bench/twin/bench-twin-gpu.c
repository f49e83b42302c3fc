/* bench-twin-gpu.c — see bench-twin-gpu.h. */
#include "bench-twin-gpu.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"

static const char *const perturbed[] = { "mfu_bf16", "mfu_fp8",    "mfu_int8", "awq_q_eff", "mbu_w",   "mbu_kv",
					 "f_attn",   "t_fixed_ms", "c_seq_us", "c_tok_us",  "t_tp_ms", "busbw_frac" };

bool bench_twin_perturbed(const char *field)
{
	for (size_t k = 0; k < ELEMENTSOF(perturbed); k++)
		if (strcmp(field, perturbed[k]) == 0)
			return true;
	return false;
}

/* splitmix64, as a double in (0, 1) */
static double uniform(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	z ^= z >> 31;
	return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

void bench_twin_perturb(struct sim_profile *p, unsigned idx)
{
	uint64_t rng = UINT64_C(0x5eed) + idx * UINT64_C(1000003);

	/* one draw per perturbed field, in the profile's field order */
	for (size_t i = 0; sim_profile_field_name(i); i++)
		if (bench_twin_perturbed(sim_profile_field_name(i)))
			*sim_profile_field(p, i) *= 0.7 + 0.6 * uniform(&rng);
}

double bench_twin_median(double *v, size_t n)
{
	if (n == 0)
		return NAN;
	qsort(v, n, sizeof(double), array_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
