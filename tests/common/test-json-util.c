/* Strict JSON parsing and typed getters: wrong types, ranges, unknown and
 * duplicate keys and trailing garbage are refused with the JSON path. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "json-util.h"
#include "macro.h"
#include "tests.h"

static cJSON *parse(const char *s)
{
	struct error err = { 0 };
	cJSON *j = NULL;

	CHECK_MSG(json_parse_strict("test", s, strlen(s), &j, &err) == 0, "%s", err.msg);
	return j;
}

static void test_strict(void)
{
	struct error err = { 0 };
	cJSON *j = NULL;

	CHECK_INT_EQ(json_parse_strict("spec.json", "{\"a\":1} x", 9, &j, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "spec.json");
	CHECK_STR_CONTAINS(err.msg, "column 9");
	CHECK_INT_EQ(json_parse_strict("spec.json", "{\"a\":\n  nope}", 13, &j, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "line 2");
	CHECK_INT_EQ(json_parse_strict("body", "", 0, &j, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "empty");
	CHECK_INT_EQ(json_parse_strict("body", "{\"a\":NaN}", 9, &j, &err), -EINVAL);
	CHECK(j == NULL);
	CHECK_INT_EQ(json_parse_strict("body", " [1,2] \n", 8, &j, &err), 0);
	cJSON_Delete(j);

	/* a \u0000 escape would end the C string early ("victim\u0000x" read as
	 * "victim"): refused, naming where; an escaped backslash before u0000
	 * is text, and other escapes pass */
	{
		const char *nul = "{\"study\": \"victim\\u0000x\"}";
		const char *text = "{\"study\": \"a\\\\u0000b\", \"q\": \"\\\"\\u0041\"}";

		j = NULL;
		CHECK_INT_EQ(json_parse_strict("request", nul, strlen(nul), &j, &err), -EINVAL);
		CHECK(j == NULL);
		CHECK_STR_CONTAINS(err.msg, "\\u0000");
		CHECK_STR_CONTAINS(err.msg, "column 18");
		CHECK_INT_EQ(json_parse_strict("request", text, strlen(text), &j, &err), 0);
		CHECK_STR_EQ(cJSON_GetObjectItemCaseSensitive(j, "study")->valuestring, "a\\u0000b");
		CHECK_STR_EQ(cJSON_GetObjectItemCaseSensitive(j, "q")->valuestring, "\"A");
		cJSON_Delete(j);
	}
}

static void test_getters(void)
{
	_cleanup_(cJSON_Deletep) cJSON *j = parse("{\"n\": 8, \"neg\": -1, \"frac\": 2.5, \"big\": 1e300,"
						  " \"s\": \"abc\", \"empty\": \"\", \"b\": true, \"nul\": null,"
						  " \"arr\": [1], \"obj\": {\"k\": \"fp8\"}, \"N\": 3}");
	struct error err = { 0 };
	const cJSON *child = NULL;
	const char *s = NULL;
	uint64_t u = 99;
	uint32_t u32;
	double d;
	bool b;
	int e;
	static const char *const quants[] = { "none", "fp8", "int8", "awq", NULL };

	CHECK_INT_EQ(json_get_u64(j, "spec", "n", 1, 16, &u, &err), 1);
	CHECK_INT_EQ(u, 8);
	CHECK_INT_EQ(json_get_u64(j, "spec", "missing", 1, 16, &u, &err), 0);
	CHECK_INT_EQ(json_get_u64(j, "spec", "nul", 1, 16, &u, &err), 0); /* null = absent */
	CHECK_INT_EQ(u, 8);
	CHECK_INT_EQ(json_get_u64(j, "spec", "neg", 0, 16, &u, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "spec.neg");
	CHECK_STR_CONTAINS(err.msg, "-1");
	CHECK_INT_EQ(json_get_u64(j, "spec", "frac", 0, 16, &u, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "an integer");
	CHECK_INT_EQ(json_get_u64(j, "spec", "big", 0, UINT64_MAX, &u, &err), -EINVAL);
	CHECK_INT_EQ(json_get_u64(j, "spec", "s", 0, 16, &u, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "\"abc\"");
	CHECK_INT_EQ(json_get_u64(j, "", "n", 9, 16, &u, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "n: expected an integer in [9, 16], got 8");
	CHECK_INT_EQ(json_get_u64(j, "", "N", 0, 16, &u, &err), 1); /* case-sensitive: N is not n */
	CHECK_INT_EQ(u, 3);
	CHECK_INT_EQ(json_get_u32(j, "", "n", 0, 16, &u32, &err), 1);
	CHECK_INT_EQ(u32, 8);

	CHECK_INT_EQ(json_get_double(j, "", "frac", 0, 10, &d, &err), 1);
	CHECK(d == 2.5);
	CHECK_INT_EQ(json_get_double(j, "", "big", 0, 1e6, &d, &err), -EINVAL);
	CHECK_INT_EQ(json_get_bool(j, "", "b", &b, &err), 1);
	CHECK(b);
	CHECK_INT_EQ(json_get_bool(j, "", "n", &b, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "true or false");
	CHECK_INT_EQ(json_get_string(j, "", "s", 0, &s, &err), 1);
	CHECK_STR_EQ(s, "abc");
	CHECK_INT_EQ(json_get_string(j, "", "s", 2, &s, &err), -EINVAL);
	CHECK_INT_EQ(json_get_string(j, "", "empty", 0, &s, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "empty: must not be empty");
	CHECK_INT_EQ(json_get_array(j, "", "arr", &child, &err), 1);
	CHECK_INT_EQ(json_get_array(j, "", "obj", &child, &err), -EINVAL);
	CHECK_INT_EQ(json_get_object(j, "", "obj", &child, &err), 1);
	CHECK_INT_EQ(json_get_enum(child, "spec.obj", "k", quants, &e, &err), 1);
	CHECK_INT_EQ(e, 1);
	CHECK_INT_EQ(json_get_enum(j, "spec", "s", quants, &e, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "spec.s: expected one of \"none\", \"fp8\"");

	CHECK_INT_EQ(json_require_u64(j, "study", "name", 0, 1, &u, &err), -EINVAL);
	CHECK_STR_EQ(err.msg, "study.name: missing");
	CHECK_INT_EQ(json_require_string(j, "study", "s", 0, &s, &err), 1);
	CHECK_INT_EQ(json_require_double(j, "study", "frac", 0, 3, &d, &err), 1);
	CHECK_INT_EQ(json_require_object(j, "study", "arr", &child, &err), -EINVAL);
}

static void test_keys(void)
{
	static const char *const allowed[] = { "name", "budget", NULL };
	_cleanup_(cJSON_Deletep) cJSON *ok = parse("{\"name\": \"x\", \"budget\": {}}");
	_cleanup_(cJSON_Deletep) cJSON *typo = parse("{\"name\": \"x\", \"budgett\": {}}");
	_cleanup_(cJSON_Deletep) cJSON *dup = parse("{\"name\": \"x\", \"name\": \"y\"}");
	struct error err = { 0 };

	CHECK_INT_EQ(json_check_keys(ok, "study", allowed, &err), 0);
	CHECK_INT_EQ(json_check_keys(typo, "study", allowed, &err), -EINVAL);
	CHECK_STR_EQ(err.msg, "study.budgett: unknown key");
	CHECK_INT_EQ(json_check_keys(dup, "study", allowed, &err), -EINVAL);
	CHECK_STR_EQ(err.msg, "study.name: duplicate key");
}

static void test_file(void)
{
	char path[] = "/tmp/goodput-test-json-XXXXXX";
	struct error err = { 0 };
	cJSON *j = NULL;
	int fd;

	CHECK_INT_EQ(json_parse_file("/nonexistent/x.json", 1024, &j, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/x.json");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "{\"a\": [1, 2, 3]}\n", 17) == 17);
	close(fd);
	CHECK_INT_EQ(json_parse_file(path, 8, &j, &err), -EFBIG);
	CHECK_INT_EQ(json_parse_file(path, 1024, &j, &err), 0);
	CHECK_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "a")), 3);
	cJSON_Delete(j);
	unlink(path);
}

static void test_add(void)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
	_cleanup_(cjson_freep) char *s = NULL;

	CHECK(o);
	CHECK_INT_EQ(json_add_number(o, "x", 1.5), 0);
	CHECK_INT_EQ(json_add_number(o, "nan", NAN), 0);
	CHECK_INT_EQ(json_add_string(o, "s", "v"), 0);
	CHECK_INT_EQ(json_add_bool(o, "b", false), 0);
	s = cJSON_PrintUnformatted(o);
	CHECK_STR_EQ(s, "{\"x\":1.5,\"nan\":null,\"s\":\"v\",\"b\":false}");
}

int main(void)
{
	test_strict();
	test_getters();
	test_keys();
	test_file();
	test_add();
	return 0;
}
