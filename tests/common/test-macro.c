/* MIN, MAX and CLAMP: each argument is evaluated once (an argument may be a
 * costly call: the rate search once computed a load point's percentile four
 * times through MAX), nested uses work, and the result is what the plain
 * comparison gives. CONST_MAX works where a constant is needed. */
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "tests.h"

static unsigned calls;

static double counted(double v)
{
	calls++;
	return v;
}

static char sized[CONST_MAX(3, 5)];

int main(void)
{
	size_t n = 7;
	int i = 3;

	calls = 0;
	CHECK(MAX(counted(1.5), counted(2.5)) == 2.5 && calls == 2);
	calls = 0;
	CHECK(MIN(counted(1.5), counted(2.5)) == 1.5 && calls == 2);
	calls = 0;
	CHECK(CLAMP(counted(9), counted(0), counted(4)) == 4 && calls == 3);
	calls = 0;
	CHECK(CLAMP(counted(-1), counted(0), counted(4)) == 0 && calls == 3);
	calls = 0;
	CHECK(CLAMP(counted(2), counted(0), counted(4)) == 2 && calls == 3);

	/* nested, and an argument with an effect */
	CHECK(MAX(MAX(1, 5), MIN(9, MAX(2, 3))) == 5);
	CHECK(MAX(i++, 0) == 3 && i == 4);
	/* mixed types compare after the usual conversions, as before */
	CHECK(MIN(n, (size_t)i) == 4);
	CHECK(MAX(n, 2.5) == 7.0);
	CHECK(sizeof(sized) == 5);
	return 0;
}
