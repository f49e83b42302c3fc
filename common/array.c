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
