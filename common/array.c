/* array.c — see array.h. */
#include "array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int array_grow(void **a, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *p;

	if (n < *cap)
		return 0;
	while (c <= n) {
		if (c > SIZE_MAX / 2)
			return -ENOMEM;
		c *= 2;
	}
	if (size > 0 && c > SIZE_MAX / size)
		return -ENOMEM;
	p = realloc(*a, c * size);
	if (!p)
		return -ENOMEM;
	memset((char *)p + *cap * size, 0, (c - *cap) * size);
	*a = p;
	*cap = c;
	return 0;
}

int array_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int array_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int array_cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return (x > y) - (x < y);
}

static void swap_double(double *x, size_t i, size_t j)
{
	double t = x[i];

	x[i] = x[j];
	x[j] = t;
}

double array_select_double(double *x, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;

	for (unsigned depth = 0; hi > lo; depth++) {
		size_t mid = lo + (hi - lo) / 2, lt = lo, i = lo, gt = hi + 1;
		double pivot;

		if (depth > 64) {
			/* inputs that defeat the pivots: sort what is left */
			qsort(x + lo, hi - lo + 1, sizeof(*x), array_cmp_double);
			break;
		}
		/* the median of three as the pivot */
		if (x[mid] < x[lo])
			swap_double(x, lo, mid);
		if (x[hi] < x[lo])
			swap_double(x, lo, hi);
		if (x[hi] < x[mid])
			swap_double(x, mid, hi);
		pivot = x[mid];
		/* three ways, as measured samples repeat values: [lo, lt) below the
		 * pivot, [lt, gt) equal (a NaN counts as equal), [gt, hi] above */
		while (i < gt) {
			if (x[i] < pivot)
				swap_double(x, lt++, i++);
			else if (x[i] > pivot)
				swap_double(x, i, --gt);
			else
				i++;
		}
		if (k < lt)
			hi = lt - 1;
		else if (k >= gt)
			lo = gt;
		else
			return x[k];
	}
	return x[k];
}
