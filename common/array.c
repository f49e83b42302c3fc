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

static double median3(double a, double b, double c)
{
	if (a > b) {
		double t = a;

		a = b;
		b = t;
	}
	return c <= a ? a : c >= b ? b : c;
}

/* A pivot value for x[lo..hi]: the median of three values spread over the
 * range, or of three such medians for a long range (Tukey's ninther). The
 * values are read where they lie: taking them from the ends, and moving
 * them there, leaves the next range's ends biased after a three-way
 * partition, and the pivots crawl. */
static double pivot_of(const double *x, size_t lo, size_t hi)
{
	size_t n = hi - lo + 1, s = n / 8;

	if (n < 40)
		return median3(x[lo + n / 4], x[lo + n / 2], x[lo + 3 * n / 4]);
	return median3(median3(x[lo + s / 2], x[lo + s], x[lo + 3 * s / 2]),
		       median3(x[lo + 7 * s / 2], x[lo + 4 * s], x[lo + 9 * s / 2]),
		       median3(x[lo + 13 * s / 2], x[lo + 7 * s], x[lo + 15 * s / 2]));
}

double array_select_double(double *x, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;

	for (unsigned depth = 0; hi > lo; depth++) {
		size_t lt = lo, i = lo, gt = hi + 1;
		double pivot;

		if (depth > 64) {
			/* inputs that defeat the pivots: sort what is left */
			qsort(x + lo, hi - lo + 1, sizeof(*x), array_cmp_double);
			break;
		}
		pivot = pivot_of(x, lo, hi);
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
