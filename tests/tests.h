/* tests.h — the assertions goodput's C tests share. A failed check prints
 * file:line and the values, then exits 1; exit 77 marks a skip (meson's
 * convention), used only when a tool a test needs is truly absent. */
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test-config.h" /* TEST_SOURCE_ROOT: the source tree, for the tests' own inputs */

#define TEST_SKIP 77

/* Set in scripts/test's valgrind run (GOODPUT_TEST_QUICK=1): the tests
 * that sweep many cases for a statistical figure sweep a subset, which
 * takes every code path at a fraction of the cost; the full sweeps and
 * their figures are checked in the normal and the ASan runs. */
static inline int test_quick(void)
{
	const char *q = getenv("GOODPUT_TEST_QUICK");

	return q && *q && strcmp(q, "0") != 0;
}

#define CHECK(cond)                                                                                                    \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                       \
			exit(1);                                                                                       \
		}                                                                                                      \
	} while (0)

#define CHECK_MSG(cond, ...)                                                                                           \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                       \
			fprintf(stderr, __VA_ARGS__);                                                                  \
			fputc('\n', stderr);                                                                           \
			exit(1);                                                                                       \
		}                                                                                                      \
	} while (0)

#define CHECK_INT_EQ(a, b)                                                                                             \
	do {                                                                                                           \
		long long _a = (long long)(a), _b = (long long)(b);                                                    \
		CHECK_MSG(_a == _b, "%lld != %lld", _a, _b);                                                           \
	} while (0)

#define CHECK_STR_EQ(a, b)                                                                                             \
	do {                                                                                                           \
		const char *_a = (a), *_b = (b);                                                                       \
		CHECK_MSG(_a &&_b &&strcmp(_a, _b) == 0, "\"%s\" != \"%s\"", _a ? _a : "(null)", _b ? _b : "(null)");  \
	} while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                                                \
	do {                                                                                                           \
		const char *_h = (hay), *_n = (needle);                                                                \
		CHECK_MSG(_h &&strstr(_h, _n), "\"%s\" does not contain \"%s\"", _h ? _h : "(null)", _n);              \
	} while (0)

/* |a - b| <= tol * |b| */
#define CHECK_REL(a, b, tol)                                                                                           \
	do {                                                                                                           \
		double _a = (a), _b = (b);                                                                             \
		CHECK_MSG(fabs(_a - _b) <= (tol)*fabs(_b), "%g vs %g: off by %+.1f%% (allowed %.1f%%)", _a, _b,        \
			  _b != 0 ? (_a - _b) / _b * 100 : 0.0, (tol)*100);                                            \
	} while (0)
