/* bench-twin-gpu.h — the stand-in for a real GPU that both twin benchmarks
 * measure against: the sim's engine model with some of its efficiency
 * constants perturbed, the same instance for the same number in bench-twin
 * (virtual time) and bench-twin-real (real goodput-sim servers). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "perfmodel.h"

/* Whether a sim_profile field is one a real GPU would have differently
 * (the MFU and MBU efficiencies, attention, step overheads, TP terms). */
bool bench_twin_perturbed(const char *field);

/* Instance idx's constants: each perturbed field of *p scaled by a factor
 * drawn uniformly from [0.7, 1.3] with a generator seeded by idx; the
 * other fields as they are. */
void bench_twin_perturb(struct sim_profile *p, unsigned idx);

/* The median of v[0..n) (sorts v); NAN when n is 0. */
double bench_twin_median(double *v, size_t n);
