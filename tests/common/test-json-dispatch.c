/* Table-driven JSON objects: every type lands in its field, nested tables
 * and pattern rows take their keys, callbacks run in table order, and each
 * kind of mistake (unknown, duplicate, missing, wrong type, out of range,
 * null where null is not allowed) is refused with the JSON path and the
 * value. The same table prints its reference and a JSON Schema. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "json-dispatch.h"
#include "json-util.h"
#include "macro.h"
#include "tests.h"
#include "time-util.h"

enum colour {
	RED,
	GREEN,
	BLUE
};

struct thing {
	const char *name;
	uint32_t count;
	uint64_t seed;
	size_t bytes;
	double price;
	bool on;
	enum colour colour;
	unsigned colours;
	uint64_t timeout_usec, wall_usec;
	const char **argv, **tags;
	const cJSON *extra, *list;
	double bounds[4];
	size_t n_bounds;
	double any_value;
	struct {
		const char *path;
		double interval;
	} health;
};

static const char *const colours[] = { "red", "green", "blue", NULL };

/* Only "p<digits>": the rest of what the pattern matches is refused here. */
static int take_bound(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct thing *t = base;
	char *end;

	(void)f;
	strtod(v->string + 1, &end);
	if (end == v->string + 1 || *end != '_')
		return error_set(err, -EINVAL, "%s: bounds look like p99_ms", path);
	if (t->n_bounds >= ELEMENTSOF(t->bounds))
		return error_set(err, -EINVAL, "%s: too many bounds", path);
	t->bounds[t->n_bounds++] = v->valuedouble;
	return 0;
}

/* Runs after "count" (table order): may read it. */
static int take_any(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct thing *t = base;

	(void)f;
	if (cJSON_IsString(v) && strcmp(v->valuestring, "count") == 0) {
		t->any_value = t->count;
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return json_wrong(v, path, "a number or \"count\"", err);
	t->any_value = v->valuedouble;
	return 0;
}

#define OFF(f) offsetof(struct thing, f)

static const struct json_field health_fields[] = {
	{ "path", JSON_STRING, OFF(health.path), .flags = JSON_MANDATORY, .max = 64, .doc = "the health path" },
	{ "interval", JSON_DOUBLE, OFF(health.interval), .min = 0.01, .max = 60, .def = "1", .doc = "seconds" },
	{ 0 },
};

static const struct json_field fields[] = {
	{ "name", JSON_STRING, OFF(name), .flags = JSON_MANDATORY, .max = 8, .doc = "its name" },
	{ "count", JSON_U32, OFF(count), .min = 1, .max = 64, .def = "1", .doc = "how many" },
	{ "seed", JSON_U64, OFF(seed), .max = 9007199254740992.0, .doc = "a seed" },
	{ "bytes", JSON_SIZE, OFF(bytes), .min = 1024, .max = 1 << 20, .doc = "a size" },
	{ "price", JSON_DOUBLE, OFF(price), .min = 0, .max = 1000, .flags = JSON_NULLABLE, .doc = "$" },
	{ "on", JSON_BOOL, OFF(on), .doc = "a switch" },
	{ "colour", JSON_ENUM, OFF(colour), .choices = colours, .doc = "one colour" },
	{ "colours", JSON_ENUM_SET, OFF(colours), .min = 1, .choices = colours, .doc = "some colours" },
	{ "timeout", JSON_SECONDS, OFF(timeout_usec), .min = 0.1, .max = 60, .doc = "seconds" },
	{ "wall", JSON_DURATION, OFF(wall_usec), .min = 1, .max = 86400, .doc = "a duration" },
	{ "argv", JSON_STRV, OFF(argv), .flags = JSON_ARGV, .min = 1, .max = 4, .doc = "a command" },
	{ "tags", JSON_STRV, OFF(tags), .max = 3, .doc = "words" },
	{ "extra", JSON_OBJECT, OFF(extra), .doc = "anything" },
	{ "list", JSON_ARRAY, OFF(list), .max = 2, .doc = "a short list" },
	{ "health", JSON_OBJECT, .fields = health_fields, .flags = JSON_MANDATORY, .doc = "readiness" },
	{ "value", JSON_ANY, .callback = take_any,
	  .schema = "{\"anyOf\": [{\"type\": \"number\"}, {\"const\": \"count\"}]}", .doc = "a number, or \"count\"" },
	{ "p<N>_ms", JSON_DOUBLE, .pattern = "p[0-9]*_ms", .callback = take_bound, .min = 0, .max = 1000,
	  .doc = "a bound" },
	{ 0 },
};

static cJSON *parse(const char *s)
{
	struct error err = { 0 };
	cJSON *j = NULL;

	CHECK_MSG(json_parse_strict("test", s, strlen(s), &j, &err) == 0, "%s", err.msg);
	return j;
}

static void thing_done(struct thing *t)
{
	free(t->argv);
	free(t->tags);
}

static int dispatch(const char *text, struct thing *t, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = parse(text);

	*t = (struct thing){ .count = 1, .health.interval = 1 };
	return json_dispatch(j, "thing", fields, 0, t, err);
}

static void test_values(void)
{
	_cleanup_(cJSON_Deletep) cJSON *j =
		parse("{\"name\": \"x\", \"count\": 3, \"seed\": 9007199254740992, \"bytes\": 4096, \"price\": 2.5,"
		      " \"on\": true, \"colour\": \"blue\", \"colours\": [\"red\", \"blue\"], \"timeout\": 0.5,"
		      " \"wall\": \"1h30m\", \"argv\": [\"srv\", \"\", \"--x\"], \"tags\": [], \"extra\": {\"k\": 1},"
		      " \"list\": [1, \"a\"], \"health\": {\"path\": \"/h\"}, \"value\": \"count\","
		      " \"p99_ms\": 60, \"p50.5_ms\": 20}");
	struct thing t = { .count = 1, .health.interval = 1 };
	struct error err = { 0 };

	CHECK_MSG(json_dispatch(j, "", fields, 0, &t, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(t.name, "x");
	CHECK_INT_EQ(t.count, 3);
	CHECK(t.seed == 9007199254740992ULL);
	CHECK_INT_EQ(t.bytes, 4096);
	CHECK(t.price == 2.5 && t.on);
	CHECK(t.colour == BLUE);
	CHECK_INT_EQ(t.colours, 1u << RED | 1u << BLUE);
	CHECK(t.timeout_usec == 500 * USEC_PER_MSEC);
	CHECK(t.wall_usec == 5400 * USEC_PER_SEC);
	CHECK(t.argv && strcmp(t.argv[0], "srv") == 0 && strcmp(t.argv[1], "") == 0 && t.argv[3] == NULL);
	CHECK(t.tags && t.tags[0] == NULL);
	CHECK(cJSON_IsObject(t.extra) && cJSON_GetArraySize(t.list) == 2);
	CHECK_STR_EQ(t.health.path, "/h");
	CHECK(t.health.interval == 1); /* absent: the preset default stays */
	CHECK(t.any_value == 3);       /* the callback saw "count" dispatched above it */
	CHECK_INT_EQ(t.n_bounds, 2);   /* pattern rows take keys in document order */
	CHECK(t.bounds[0] == 60 && t.bounds[1] == 20);
	thing_done(&t);

	/* null: absent where the row allows it */
	CHECK_MSG(dispatch("{\"name\": \"x\", \"price\": null, \"health\": {\"path\": \"/h\"}}", &t, &err) == 0, "%s",
		  err.msg);
	CHECK(t.price == 0);
	thing_done(&t);
}

static void refused(const char *text, const char *want)
{
	struct thing t;
	struct error err = { 0 };

	CHECK_MSG(dispatch(text, &t, &err) == -EINVAL, "accepted: %s", text);
	CHECK_MSG(strstr(err.msg, want), "%s: message \"%s\" lacks \"%s\"", text, err.msg, want);
	thing_done(&t);
}

#define H "\"health\": {\"path\": \"/h\"}"

static void test_errors(void)
{
	refused("{\"name\": \"x\", " H ", \"nmae\": 1}", "thing.nmae: unknown key");
	refused("{\"name\": \"x\", " H ", \"Name\": \"y\"}", "thing.Name: unknown key"); /* case-sensitive */
	refused("{\"name\": \"x\", " H ", \"count\": 2, \"count\": 3}", "thing.count: duplicate key");
	refused("{\"name\": \"x\", \"health\": {\"path\": \"/h\", \"intervall\": 1}}",
		"thing.health.intervall: unknown key");
	refused("{\"name\": \"x\", \"health\": {}}", "thing.health.path: missing");
	refused("{\"name\": \"x\"}", "thing.health: missing");
	refused("{" H "}", "thing.name: missing");
	refused("{\"name\": null, " H "}", "thing.name: expected a string, got null");
	refused("{\"name\": \"toolongname\", " H "}", "thing.name: longer than 8 characters");
	refused("{\"name\": \"\", " H "}", "thing.name: must not be empty");
	refused("{\"name\": \"x\", " H ", \"count\": 0}", "thing.count: expected an integer in [1, 64], got 0");
	refused("{\"name\": \"x\", " H ", \"count\": 2.5}", "thing.count: expected an integer in [1, 64], got 2.5");
	refused("{\"name\": \"x\", " H ", \"count\": \"3\"}", "got \"3\"");
	refused("{\"name\": \"x\", " H ", \"seed\": 1e300}", "thing.seed: expected an integer");
	refused("{\"name\": \"x\", " H ", \"bytes\": 10}", "thing.bytes: expected an integer in [1024, 1048576]");
	refused("{\"name\": \"x\", " H ", \"price\": -1}", "thing.price: expected a number in [0, 1000], got -1");
	refused("{\"name\": \"x\", " H ", \"on\": 1}", "thing.on: expected true or false, got 1");
	refused("{\"name\": \"x\", " H ", \"colour\": \"pink\"}",
		"thing.colour: expected one of \"red\", \"green\", \"blue\", got \"pink\"");
	refused("{\"name\": \"x\", " H ", \"colours\": []}", "thing.colours: expected an array of at least 1");
	refused("{\"name\": \"x\", " H ", \"colours\": [\"red\", \"red\"]}",
		"thing.colours[1]: \"red\" is listed twice");
	refused("{\"name\": \"x\", " H ", \"colours\": [\"red\", 3]}", "thing.colours[1]: expected one of");
	refused("{\"name\": \"x\", " H ", \"timeout\": \"5s\"}", "thing.timeout: expected a number in [0.1, 60]");
	refused("{\"name\": \"x\", " H ", \"wall\": \"1h30\"}",
		"thing.wall: expected seconds in [1, 86400] or a duration");
	refused("{\"name\": \"x\", " H ", \"wall\": \"2d\"}", "thing.wall: expected seconds");
	refused("{\"name\": \"x\", " H ", \"wall\": 0}", "thing.wall: expected a number in [1, 86400], got 0");
	refused("{\"name\": \"x\", " H ", \"argv\": []}", "thing.argv: expected an array of 1 to 4 strings, got 0");
	refused("{\"name\": \"x\", " H ", \"argv\": [\"\"]}", "thing.argv[0]: expected a non-empty string");
	refused("{\"name\": \"x\", " H ", \"argv\": [\"a\", 3]}", "thing.argv[1]: expected a string, got 3");
	refused("{\"name\": \"x\", " H ", \"tags\": [\"a\", \"\"]}", "thing.tags[1]: expected a non-empty string");
	refused("{\"name\": \"x\", " H ", \"tags\": \"a\"}", "thing.tags: expected an array of strings, got \"a\"");
	refused("{\"name\": \"x\", " H ", \"extra\": []}", "thing.extra: expected an object, got []");
	refused("{\"name\": \"x\", " H ", \"list\": [1, 2, 3]}", "thing.list: expected an array of 0 to 2 elements");
	refused("{\"name\": \"x\", \"health\": 1}", "thing.health: expected an object, got 1");
	refused("{\"name\": \"x\", " H ", \"value\": true}", "thing.value: expected a number or \"count\", got true");
	refused("{\"name\": \"x\", " H ", \"p99_ms\": 2000}", "thing.p99_ms: expected a number in [0, 1000], got 2000");
	refused("{\"name\": \"x\", " H ", \"p9x_ms\": 1}", "thing.p9x_ms: bounds look like p99_ms");
	refused("{\"name\": \"x\", " H ", \"q99_ms\": 1}", "thing.q99_ms: unknown key");
	refused("[1]", "thing: expected an object, got [1]");
}

static void test_allow_unknown(void)
{
	_cleanup_(cJSON_Deletep) cJSON *j = parse("{\"name\": \"x\", \"health\": {\"path\": \"/h\", \"new\": 1},"
						  " \"later\": 2}");
	_cleanup_(cJSON_Deletep) cJSON *dup =
		parse("{\"name\": \"x\", \"health\": {\"path\": \"/h\"}, \"z\": 1, \"z\": 2}");
	struct thing t = { 0 };
	struct error err = { 0 };

	CHECK_MSG(json_dispatch(j, "", fields, JSON_ALLOW_UNKNOWN, &t, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(t.name, "x");
	CHECK_INT_EQ(json_dispatch(dup, "", fields, JSON_ALLOW_UNKNOWN, &t, &err), -EINVAL);
	CHECK_STR_EQ(err.msg, "z: duplicate key");
}

static void test_reference(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f);
	json_fields_print(f, fields, "");
	fclose(f);
	CHECK_STR_CONTAINS(buf, "  name *  (string)\n      its name\n");
	CHECK_STR_CONTAINS(buf, "  count  (integer 1..64; default 1)\n");
	CHECK_STR_CONTAINS(buf, "  colour  (red|green|blue)");
	CHECK_STR_CONTAINS(buf, "  colours  (array of red|green|blue)");
	CHECK_STR_CONTAINS(buf, "  health.path *  (string)\n      the health path\n");
	CHECK_STR_CONTAINS(buf, "  p<N>_ms  (number 0..1000)");
	free(buf);
}

static int collect_path(const struct json_field *f, const char *path, void *userdata)
{
	char *buf = userdata;

	(void)f;
	strcat(buf, path);
	strcat(buf, " ");
	return strcmp(path, "p<N>_ms") == 0 ? -ECANCELED : 0;
}

static void test_walk(void)
{
	char paths[1024] = "";

	/* parents before their nested rows; fn's error stops the walk */
	CHECK_INT_EQ(json_fields_walk(fields, "", collect_path, paths), -ECANCELED);
	CHECK_STR_CONTAINS(paths, "name count seed ");
	CHECK_STR_CONTAINS(paths, " health health.path health.interval value p<N>_ms ");
}

static const cJSON *at(const cJSON *o, const char *path)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *tok = strtok_r(buf, "/", &save); tok && o; tok = strtok_r(NULL, "/", &save))
		o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(o, tok);
	CHECK_MSG(o, "no %s in the schema", path);
	return o;
}

static void test_schema(void)
{
	_cleanup_(cJSON_Deletep) cJSON *s = NULL;
	_cleanup_(cjson_freep) char *text = NULL;

	CHECK_INT_EQ(json_fields_schema(fields, 0, &s), 0);
	text = cJSON_PrintUnformatted(s);
	CHECK(cJSON_IsFalse(at(s, "additionalProperties")));
	CHECK_STR_CONTAINS(text, "\"required\":[\"name\",\"health\"]");
	CHECK_STR_EQ(at(s, "properties/count/type")->valuestring, "integer");
	CHECK(at(s, "properties/count/minimum")->valuedouble == 1 &&
	      at(s, "properties/count/maximum")->valuedouble == 64);
	CHECK_STR_EQ(at(s, "properties/count/description")->valuestring, "how many (default: 1)");
	CHECK_STR_EQ(at(s, "properties/colour/enum/2")->valuestring, "blue");
	CHECK(cJSON_IsTrue(at(s, "properties/colours/uniqueItems")));
	CHECK_STR_EQ(at(s, "properties/price/anyOf/1/type")->valuestring, "null"); /* nullable */
	CHECK_STR_EQ(at(s, "properties/argv/prefixItems/0/type")->valuestring, "string");
	CHECK(at(s, "properties/argv/maxItems")->valuedouble == 4);
	CHECK_STR_EQ(at(s, "properties/wall/anyOf/1/type")->valuestring, "string");
	CHECK_STR_EQ(at(s, "properties/health/required/0")->valuestring, "path");
	CHECK(cJSON_IsFalse(at(s, "properties/health/additionalProperties")));
	CHECK_STR_EQ(at(s, "properties/value/anyOf/1/const")->valuestring, "count"); /* the row's schema text */
	CHECK_STR_EQ(at(s, "patternProperties/^p[0-9].*_ms$/type")->valuestring, "number");
}

int main(void)
{
	test_values();
	test_errors();
	test_allow_unknown();
	test_reference();
	test_walk();
	test_schema();
	return 0;
}
