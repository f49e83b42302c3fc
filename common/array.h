/* array.h — growing an array one element at a time, sorting one, and
 * finding its k-th smallest element without sorting it.
 *
 * The arrays goodput builds as it reads (history rows, dataset entries,
 * samples, a heap of deadlines) double when full, so that n appends cost
 * O(n) copies. One helper does it, so that the overflow check and the
 * error path are written once. */
#pragma once

#include <stddef.h>

/* Makes room for element n (0-based) of the array *a of elements of size
 * bytes, with room for *cap now: when n ≥ *cap the array doubles (from 16)
 * until it holds n, the new part zeroed, and *cap is updated. 0, or
 * -ENOMEM with *a and *cap as they were (an overflow of the size is
 * -ENOMEM too). */
int array_grow(void **a, size_t *cap, size_t n, size_t size);

/* The same for a typed array pointer: ARRAY_GROW(h->trials, h->allocated, h->n). */
#define ARRAY_GROW(a, cap, n) array_grow((void **)&(a), &(cap), (n), sizeof(*(a)))

/* qsort comparators, ascending (a NaN compares equal to everything). */
int array_cmp_double(const void *a, const void *b);
int array_cmp_u32(const void *a, const void *b);
int array_cmp_size(const void *a, const void *b);

/* The k-th smallest (0-based, k < n) of x[0..n), found in O(n) on average
 * (quickselect; a sort past a depth limit). Reorders x so that x[k] holds
 * it, nothing before it is larger and nothing after it is smaller. What one
 * percentile of many samples needs, without the O(n log n) of a sort. */
double array_select_double(double *x, size_t n, size_t k);
