/* Growing arrays: every appended element is kept, in order, the room grows
 * by doubling (few reallocations for many appends), the new room is zeroed,
 * and an impossible size fails without touching the array. Selection: the
 * k-th smallest is what a sort puts at k, for every k, on random, repeated,
 * sorted and reversed values. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "tests.h"

struct pair {
	uint64_t a;
	uint32_t b;
};

static void test_append(void)
{
	struct pair *v = NULL;
	size_t cap = 0, n = 0, grows = 0;

	for (uint32_t i = 0; i < 100000; i++) {
		size_t before = cap;

		CHECK_INT_EQ(ARRAY_GROW(v, cap, n), 0);
		CHECK(cap > n);
		if (cap != before) {
			grows++;
			/* the new room is zeroed */
			for (size_t j = n; j < cap; j++)
				CHECK(v[j].a == 0 && v[j].b == 0);
		}
		v[n++] = (struct pair){ .a = (uint64_t)i * 3, .b = i };
	}
	for (uint32_t i = 0; i < n; i++)
		CHECK(v[i].a == (uint64_t)i * 3 && v[i].b == i);
	CHECK_MSG(grows <= 14, "%zu reallocations for 100000 appends", grows);
	free(v);
}

static void test_jump(void)
{
	int *v = NULL;
	size_t cap = 0;

	/* room for element 1000 at once, from nothing */
	CHECK_INT_EQ(ARRAY_GROW(v, cap, 1000), 0);
	CHECK(cap > 1000);
	v[1000] = 7;
	CHECK(v[0] == 0 && v[999] == 0);
	free(v);
}

static void test_overflow(void)
{
	int *v = NULL;
	size_t cap = 0;

	CHECK_INT_EQ(ARRAY_GROW(v, cap, 3), 0);
	v[0] = 42;
	CHECK_INT_EQ(ARRAY_GROW(v, cap, SIZE_MAX / 2), -ENOMEM);
	CHECK(v && v[0] == 42 && cap == 16);
	free(v);
}

/* x[k] is the k-th smallest, and x is split around it. */
static void check_select(const double *in, size_t n, const char *what)
{
	double *sorted = malloc(n * sizeof(*sorted)), *x = malloc(n * sizeof(*x));

	CHECK(sorted && x);
	memcpy(sorted, in, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), array_cmp_double);
	for (size_t k = 0; k < n; k++) {
		double v;

		memcpy(x, in, n * sizeof(*x));
		v = array_select_double(x, n, k);
		CHECK_MSG(v == sorted[k] && x[k] == v, "%s, n %zu, k %zu: %g, sorted %g", what, n, k, v, sorted[k]);
		for (size_t i = 0; i < k; i++)
			CHECK_MSG(x[i] <= v, "%s, n %zu, k %zu: x[%zu] = %g before it", what, n, k, i, x[i]);
		for (size_t i = k + 1; i < n; i++)
			CHECK_MSG(x[i] >= v, "%s, n %zu, k %zu: x[%zu] = %g after it", what, n, k, i, x[i]);
	}
	free(sorted);
	free(x);
}

static void test_select(void)
{
	double in[300];
	uint64_t s = 12345;

	for (size_t n = 1; n <= ELEMENTSOF(in); n += n < 20 ? 1 : 37) {
		for (size_t i = 0; i < n; i++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			in[i] = (double)(s >> 33) / 4294967296.0;
		}
		check_select(in, n, "random");
		for (size_t i = 0; i < n; i++)
			in[i] = floor(in[i] * 5); /* five values, many times each */
		check_select(in, n, "repeated");
		for (size_t i = 0; i < n; i++)
			in[i] = (double)i;
		check_select(in, n, "sorted");
		for (size_t i = 0; i < n; i++)
			in[i] = (double)(n - i);
		check_select(in, n, "reversed");
		for (size_t i = 0; i < n; i++)
			in[i] = (double)(i < n / 2 ? i : n - i); /* organ pipe */
		check_select(in, n, "organ pipe");
	}
	/* a NaN among the values ends, with a value from the array */
	in[0] = 3, in[1] = NAN, in[2] = 1, in[3] = 2;
	{
		double v = array_select_double(in, 4, 1);

		CHECK(isnan(v) || v == 1 || v == 2 || v == 3);
	}
}

int main(void)
{
	test_select();
	test_append();
	test_jump();
	test_overflow();
	return 0;
}
