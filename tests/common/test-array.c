/* Growing arrays: every appended element is kept, in order, the room grows
 * by doubling (few reallocations for many appends), the new room is zeroed,
 * and an impossible size fails without touching the array. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

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

int main(void)
{
	test_append();
	test_jump();
	test_overflow();
	return 0;
}
