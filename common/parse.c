/* parse.c — see parse.h. strtoull() alone accepts " -1" (wrapping it to
 * 2^64-1), "12abc" and "" without complaint; these wrappers refuse all three. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int bad(struct error *err, const char *what, const char *s, const char *expect)
{
	return error_set(err, -EINVAL, "%s: expected %s, got \"%.64s\"", what, expect, s ? s : "(null)");
}

int parse_u64(const char *what, const char *s, uint64_t min, uint64_t max, uint64_t *ret, struct error *err)
{
	char expect[96], *end;
	unsigned long long v;

	snprintf(expect, sizeof(expect), "an integer in [%" PRIu64 ", %" PRIu64 "]", min, max);
	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return bad(err, what, s, expect);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		return bad(err, what, s, expect);
	if (errno == ERANGE || v < min || v > max) {
		error_set(err, -ERANGE, "%s: %.64s is out of range, expected %s", what, s, expect);
		return -ERANGE;
	}
	*ret = v;
	return 0;
}

int parse_i64(const char *what, const char *s, int64_t min, int64_t max, int64_t *ret, struct error *err)
{
	char expect[96], *end;
	long long v;

	snprintf(expect, sizeof(expect), "an integer in [%" PRId64 ", %" PRId64 "]", min, max);
	if (!s || !*s || isspace((unsigned char)*s) || *s == '+')
		return bad(err, what, s, expect);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end)
		return bad(err, what, s, expect);
	if (errno == ERANGE || v < min || v > max)
		return error_set(err, -ERANGE, "%s: %.64s is out of range, expected %s", what, s, expect);
	*ret = v;
	return 0;
}

int parse_u32(const char *what, const char *s, uint32_t min, uint32_t max, uint32_t *ret, struct error *err)
{
	uint64_t v;
	int r;

	r = parse_u64(what, s, min, max, &v, err);
	if (r < 0)
		return r;
	*ret = (uint32_t)v;
	return 0;
}

int parse_double(const char *what, const char *s, double min, double max, double *ret, struct error *err)
{
	char expect[96], *end;
	double v;

	snprintf(expect, sizeof(expect), "a number in [%g, %g]", min, max);
	if (!s || !*s || isspace((unsigned char)*s))
		return bad(err, what, s, expect);
	errno = 0;
	v = strtod(s, &end);
	if (*end || !isfinite(v))
		return bad(err, what, s, expect);
	if (errno == ERANGE && fabs(v) > 1.0) /* overflow; underflow to ~0 is harmless */
		return error_set(err, -ERANGE, "%s: %.64s is out of range, expected %s", what, s, expect);
	if (v < min || v > max)
		return error_set(err, -ERANGE, "%s: %.64s is out of range, expected %s", what, s, expect);
	*ret = v;
	return 0;
}

int parse_bool(const char *what, const char *s, int *ret, struct error *err)
{
	static const char *const yes[] = { "1", "yes", "true", "on" }, *const no[] = { "0", "no", "false", "off" };

	for (size_t i = 0; s && i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*ret = 0;
			return 0;
		}
	}
	return bad(err, what, s, "a boolean (yes/no, true/false, 1/0, on/off)");
}

int parse_daily_window(const char *what, const char *s, unsigned *ret_start_min, unsigned *ret_end_min,
		       struct error *err)
{
	unsigned h1, m1, h2, m2;
	int n = 0;

	if (sscanf(s, "%2u:%2u-%2u:%2u%n", &h1, &m1, &h2, &m2, &n) != 4 || (size_t)n != strlen(s) || h1 > 23 ||
	    h2 > 24 || m1 > 59 || m2 > 59 || (h2 == 24 && m2 != 0))
		return error_set(err, -EINVAL, "%s: expected \"HH:MM-HH:MM\" (e.g. \"22:00-06:00\"), got \"%.40s\"",
				 what, s);
	if (h1 * 60 + m1 == h2 * 60 + m2)
		return error_set(err, -EINVAL, "%s: \"%s\" is empty", what, s);
	*ret_start_min = h1 * 60 + m1;
	*ret_end_min = h2 * 60 + m2;
	return 0;
}

size_t hex_encode(const void *p, size_t n, char *buf)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		buf[2 * i] = digits[b[i] >> 4];
		buf[2 * i + 1] = digits[b[i] & 15];
	}
	buf[2 * n] = '\0';
	return 2 * n;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int hex_decode(const char *s, size_t len, void *p, size_t n)
{
	unsigned char *b = p;

	if (len != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (hex_digit(s[i]) < 0)
			return -EINVAL;
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(hex_digit(s[2 * i]) << 4 | hex_digit(s[2 * i + 1]));
	return 0;
}
