/* Checked number parsing: every malformed input is refused with a message
 * that names the field and the value. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "parse.h"
#include "tests.h"

static void test_u64(void)
{
	struct error err = { 0 };
	uint64_t v = 42;

	CHECK_INT_EQ(parse_u64("--n", "0", 0, 10, &v, &err), 0);
	CHECK_INT_EQ(v, 0);
	CHECK_INT_EQ(parse_u64("--n", "18446744073709551615", 0, UINT64_MAX, &v, &err), 0);
	CHECK(v == UINT64_MAX);

	v = 7;
	CHECK_INT_EQ(parse_u64("--num-prompts", "", 1, 10, &v, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "--num-prompts");
	CHECK_INT_EQ(parse_u64("--num-prompts", "12abc", 1, 100, &v, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "\"12abc\"");
	CHECK_INT_EQ(parse_u64("--num-prompts", "-1", 0, 100, &v, &err), -EINVAL);
	CHECK_INT_EQ(parse_u64("--num-prompts", " 5", 0, 100, &v, &err), -EINVAL);
	CHECK_INT_EQ(parse_u64("--num-prompts", "18446744073709551616", 0, UINT64_MAX, &v, &err), -ERANGE);
	CHECK_STR_CONTAINS(err.msg, "out of range");
	CHECK_INT_EQ(parse_u64("--num-prompts", "101", 1, 100, &v, &err), -ERANGE);
	CHECK_STR_CONTAINS(err.msg, "[1, 100]");
	CHECK_INT_EQ(parse_u64("--x", NULL, 1, 100, &v, NULL), -EINVAL); /* err may be NULL */
	CHECK_INT_EQ(v, 7);                                              /* untouched on failure */
}

static void test_i64_u32(void)
{
	struct error err = { 0 };
	int64_t i;
	uint32_t u;

	CHECK_INT_EQ(parse_i64("--off", "-5", -10, 10, &i, &err), 0);
	CHECK_INT_EQ(i, -5);
	CHECK_INT_EQ(parse_i64("--off", "-11", -10, 10, &i, &err), -ERANGE);
	CHECK_INT_EQ(parse_i64("--off", "9223372036854775808", INT64_MIN, INT64_MAX, &i, &err), -ERANGE);
	CHECK_INT_EQ(parse_u32("--port", "65535", 0, 65535, &u, &err), 0);
	CHECK_INT_EQ(u, 65535);
	CHECK_INT_EQ(parse_u32("--port", "65536", 0, 65535, &u, &err), -ERANGE);
	CHECK_STR_CONTAINS(err.msg, "--port");
}

static void test_double(void)
{
	struct error err = { 0 };
	double d = 1.5;

	CHECK_INT_EQ(parse_double("--request-rate", "2.5", 0, 1e6, &d, &err), 0);
	CHECK(d == 2.5);
	CHECK_INT_EQ(parse_double("--request-rate", "1e3", 0, 1e6, &d, &err), 0);
	CHECK(d == 1000);
	CHECK_INT_EQ(parse_double("--request-rate", "nan", 0, 1e6, &d, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "--request-rate");
	CHECK_STR_CONTAINS(err.msg, "\"nan\"");
	CHECK_INT_EQ(parse_double("--request-rate", "inf", 0, 1e6, &d, &err), -EINVAL);
	CHECK_INT_EQ(parse_double("--request-rate", "1e999", 0, 1e6, &d, &err), -EINVAL);
	CHECK_INT_EQ(parse_double("--request-rate", "3x", 0, 1e6, &d, &err), -EINVAL);
	CHECK_INT_EQ(parse_double("--request-rate", "", 0, 1e6, &d, &err), -EINVAL);
	CHECK_INT_EQ(parse_double("--attainment", "1.01", 0, 1, &d, &err), -ERANGE);
	CHECK_STR_CONTAINS(err.msg, "--attainment");
	CHECK(d == 1000);
}

static void test_bool(void)
{
	struct error err = { 0 };
	int b = -1;

	CHECK_INT_EQ(parse_bool("--x", "yes", &b, &err), 0);
	CHECK_INT_EQ(b, 1);
	CHECK_INT_EQ(parse_bool("--x", "OFF", &b, &err), 0);
	CHECK_INT_EQ(b, 0);
	CHECK_INT_EQ(parse_bool("--ignore-eos", "maybe", &b, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "--ignore-eos");
}

/* A struct of plain data through hex and back, bit-exact (NaN, -0 and the
 * padding included); malformed hex changes nothing. */
static void test_hex(void)
{
	struct {
		double a, b, c;
		uint32_t n;
		char text[5];
	} in, out, keep;
	char buf[2 * sizeof(in) + 1];

	memset(&in, 0xa5, sizeof(in));
	in.a = -0.0;
	in.b = NAN;
	in.c = 1.0 / 3;
	in.n = 0xdeadbeef;
	memcpy(in.text, "abcd", 5);
	CHECK_INT_EQ(hex_encode(&in, sizeof(in), buf), 2 * sizeof(in));
	CHECK_INT_EQ(strlen(buf), 2 * sizeof(in));
	CHECK_INT_EQ(hex_decode(buf, strlen(buf), &out, sizeof(out)), 0);
	CHECK(memcmp(&in, &out, sizeof(in)) == 0);
	memset(&keep, 0, sizeof(keep));
	out = keep;
	CHECK_INT_EQ(hex_decode(buf, strlen(buf) - 1, &out, sizeof(out)), -EINVAL);
	buf[3] = 'G';
	CHECK_INT_EQ(hex_decode(buf, strlen(buf), &out, sizeof(out)), -EINVAL);
	CHECK(memcmp(&out, &keep, sizeof(out)) == 0);
}

int main(void)
{
	test_hex();
	test_u64();
	test_i64_u32();
	test_double();
	test_bool();
	return 0;
}
