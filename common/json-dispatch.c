/* json-dispatch.c — the table-driven object parser, its reference text and
 * its JSON Schema (see json-dispatch.h).
 *
 * Dispatching an object is two passes. The first walks the document's keys:
 * each must be named by a row or matched by a row's pattern (unless the
 * caller allows unknown keys), and none may repeat (cJSON keeps both copies
 * and finds the first, so a repeated key would silently lose its second
 * value). The second walks the table in order: each row finds its value,
 * refuses absence when mandatory, checks type and range through the value
 * checks of json-util.h (one wording for every message), and then stores the
 * value at its offset, hands it to the row's callback, or recurses into a
 * nested table. The reference text and the JSON Schema of a table are
 * written in json-schema.c. */
#include "json-dispatch.h"

#include <assert.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "utf8.h"
#include "time-util.h"

/* A checked value before it is stored. */
union json_value {
	const char *s;
	uint64_t u;
	double d;
	bool b;
	int i;
	unsigned set;
	const cJSON *j;
};

static int dispatch_object(const cJSON *obj, const char *path, const struct json_field *table, unsigned flags,
			   void *base, struct error *err);

int json_parse_duration(const char *s, double *ret)
{
	double total = 0;
	bool any = false;

	while (*s) {
		char *end;
		double v = strtod(s, &end);
		double unit = 1;

		if (end == s || !isfinite(v) || v < 0)
			return -EINVAL;
		switch (*end) {
		case 's':
			end++;
			break;
		case 'm':
			unit = 60;
			end++;
			break;
		case 'h':
			unit = 3600;
			end++;
			break;
		case 'd':
			unit = 86400;
			end++;
			break;
		case 0:
			if (any)
				return -EINVAL; /* "1h30" is ambiguous */
			break;
		default:
			return -EINVAL;
		}
		total += v * unit;
		any = true;
		s = end;
	}
	if (!any)
		return -EINVAL;
	*ret = total;
	return 0;
}

static int check_duration(const cJSON *v, const char *path, const struct json_field *f, double *ret, struct error *err)
{
	double sec;

	if (!cJSON_IsString(v))
		return json_value_double(v, path, f->min, f->max, ret, err);
	if (json_parse_duration(v->valuestring, &sec) < 0 || sec < f->min || sec > f->max)
		return error_set(err, -EINVAL,
				 "%s: expected seconds in [%g, %g] or a duration like \"90s\", \"45m\", \"8h\", got "
				 "\"%s\"",
				 path, f->min, f->max, v->valuestring);
	*ret = sec;
	return 0;
}

static int check_count(const cJSON *v, const char *path, const struct json_field *f, const char *what,
		       struct error *err)
{
	size_t n = (size_t)cJSON_GetArraySize(v);

	if (n >= f->min && (f->max <= 0 || n <= f->max))
		return 0;
	if (f->max > 0)
		return error_set(err, -EINVAL, "%s: expected an array of %g to %g %s, got %zu", path, f->min, f->max,
				 what, n);
	return error_set(err, -EINVAL, "%s: expected an array of at least %g %s, got %zu", path, f->min, what, n);
}

static int check_strv(const cJSON *v, const char *path, const struct json_field *f, struct error *err)
{
	const cJSON *item;
	size_t i = 0;
	int r;

	if (!cJSON_IsArray(v))
		return json_wrong(v, path, "an array of strings", err);
	r = check_count(v, path, f, "strings", err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(item, v)
	{
		bool may_be_empty = (f->flags & JSON_ARGV) && i > 0;
		char p[256];

		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (!cJSON_IsString(item) || !item->valuestring)
			return json_wrong(item, p, may_be_empty ? "a string" : "a non-empty string", err);
		if (!may_be_empty && !item->valuestring[0])
			return error_set(err, -EINVAL, "%s: expected a non-empty string", p);
		i++;
	}
	return 0;
}

static int check_enum_set(const cJSON *v, const char *path, const struct json_field *f, unsigned *ret,
			  struct error *err)
{
	const cJSON *item;
	unsigned set = 0;
	size_t i = 0;
	char what[256] = "of ";
	int r;

	if (!cJSON_IsArray(v))
		return json_wrong(v, path, "an array", err);
	json_choices_format(f->choices, what + strlen(what), sizeof(what) - strlen(what));
	r = check_count(v, path, f, what, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(item, v)
	{
		char p[256];
		int c;

		snprintf(p, sizeof(p), "%s[%zu]", path, i++);
		r = json_value_enum(item, p, f->choices, &c, err);
		if (r < 0)
			return r;
		if (set & (1u << c))
			return error_set(err, -EINVAL, "%s: \"%s\" is listed twice", p, item->valuestring);
		set |= 1u << c;
	}
	*ret = set;
	return 0;
}

/* Checks v against the row's type and range into *ret (JSON_STRV: checked only). */
static int check_value(const cJSON *v, const char *path, const struct json_field *f, union json_value *ret,
		       struct error *err)
{
	switch (f->type) {
	case JSON_STRING: {
		int r = json_value_string(v, path, (size_t)f->max, &ret->s, err);

		/* A name, a path or a word: a newline or an escape sequence in it
		 * breaks every table and log line that shows it. */
		if (r >= 0 && utf8_has_control(ret->s))
			return error_set(err, -EINVAL,
					 "%s: control characters (newline, tab, escape, ...) are not allowed", path);
		return r;
	}
	case JSON_U32:
	case JSON_U64:
	case JSON_SIZE:
		return json_value_u64(v, path, (uint64_t)f->min, (uint64_t)f->max, &ret->u, err);
	case JSON_DOUBLE:
	case JSON_SECONDS:
		return json_value_double(v, path, f->min, f->max, &ret->d, err);
	case JSON_BOOL:
		return json_value_bool(v, path, &ret->b, err);
	case JSON_ENUM:
		return json_value_enum(v, path, f->choices, &ret->i, err);
	case JSON_ENUM_SET:
		return check_enum_set(v, path, f, &ret->set, err);
	case JSON_DURATION:
		return check_duration(v, path, f, &ret->d, err);
	case JSON_STRV:
		return check_strv(v, path, f, err);
	case JSON_OBJECT:
		if (!cJSON_IsObject(v))
			return json_wrong(v, path, "an object", err);
		ret->j = v;
		return 0;
	case JSON_ARRAY:
		if (!cJSON_IsArray(v))
			return json_wrong(v, path, "an array", err);
		ret->j = v;
		return check_count(v, path, f, "elements", err);
	case JSON_ANY:
		ret->j = v;
		return 0;
	}
	return -EINVAL;
}

static int store_strv(const cJSON *v, const struct json_field *f, void *base)
{
	const char ***dst = (const char ***)((char *)base + f->offset);
	size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
	const cJSON *item;
	const char **strv;

	strv = calloc(n + 1, sizeof(char *));
	if (!strv)
		return -ENOMEM;
	cJSON_ArrayForEach(item, v) strv[i++] = item->valuestring;
	free(*dst);
	*dst = strv;
	return 0;
}

static void store(const struct json_field *f, const union json_value *val, void *base)
{
	void *dst = (char *)base + f->offset;

	switch (f->type) {
	case JSON_STRING:
		*(const char **)dst = val->s;
		break;
	case JSON_U32:
		*(uint32_t *)dst = (uint32_t)val->u;
		break;
	case JSON_U64:
		*(uint64_t *)dst = val->u;
		break;
	case JSON_SIZE:
		*(size_t *)dst = (size_t)val->u;
		break;
	case JSON_DOUBLE:
		*(double *)dst = val->d;
		break;
	case JSON_BOOL:
		*(bool *)dst = val->b;
		break;
	case JSON_ENUM:
		*(int *)dst = val->i;
		break;
	case JSON_ENUM_SET:
		*(unsigned *)dst = val->set;
		break;
	case JSON_SECONDS:
	case JSON_DURATION:
		*(uint64_t *)dst = sec_to_usec(val->d);
		break;
	case JSON_OBJECT:
	case JSON_ARRAY:
		*(const cJSON **)dst = val->j;
		break;
	case JSON_STRV:
	case JSON_ANY:
		break;
	}
}

int json_dispatch_store(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	union json_value val = { 0 };
	int r;

	r = check_value(v, path, f, &val, err);
	if (r < 0)
		return r;
	if (f->type == JSON_STRV)
		return store_strv(v, f, base) < 0 ? error_set(err, -ENOMEM, "%s: out of memory", path) : 0;
	store(f, &val, base);
	return 0;
}

static int dispatch_value(const cJSON *v, const char *path, const struct json_field *f, unsigned flags, void *base,
			  struct error *err)
{
	union json_value val = { 0 };
	int r;

	if (!f->callback) {
		assert(f->type != JSON_ANY); /* a row of any type is read by its callback */
		if (f->type == JSON_OBJECT && f->fields)
			return dispatch_object(v, path, f->fields, flags, base, err);
		return json_dispatch_store(v, path, f, base, err);
	}
	r = check_value(v, path, f, &val, err);
	if (r < 0)
		return r;
	return f->callback(v, path, f, base, err);
}

/* The row that names key, else the first whose pattern matches it. */
static const struct json_field *find_row(const struct json_field *table, const char *key)
{
	for (const struct json_field *f = table; f->name; f++)
		if (!f->pattern && strcmp(f->name, key) == 0)
			return f;
	for (const struct json_field *f = table; f->name; f++)
		if (f->pattern && fnmatch(f->pattern, key, 0) == 0)
			return f;
	return NULL;
}

static int check_keys(const cJSON *obj, const char *path, const struct json_field *table, unsigned flags,
		      struct error *err)
{
	const cJSON *item;
	char p[256];

	cJSON_ArrayForEach(item, obj)
	{
		if (!(flags & JSON_ALLOW_UNKNOWN) && !find_row(table, item->string))
			return error_set(err, -EINVAL, "%s: unknown key",
					 json_path_join(p, sizeof(p), path, item->string));
		for (const cJSON *other = item->next; other; other = other->next)
			if (strcmp(other->string, item->string) == 0)
				return error_set(err, -EINVAL, "%s: duplicate key",
						 json_path_join(p, sizeof(p), path, item->string));
	}
	return 0;
}

static int dispatch_row(const cJSON *obj, const char *path, const struct json_field *table, const struct json_field *f,
			unsigned flags, void *base, struct error *err)
{
	const cJSON *item;
	char p[256];
	int r;

	if (f->pattern) {
		cJSON_ArrayForEach(item, obj)
		{
			if (fnmatch(f->pattern, item->string, 0) != 0 || find_row(table, item->string) != f ||
			    (cJSON_IsNull(item) && (f->flags & JSON_NULLABLE)))
				continue;
			r = dispatch_value(item, json_path_join(p, sizeof(p), path, item->string), f, flags, base, err);
			if (r < 0)
				return r;
		}
		return 0;
	}
	json_path_join(p, sizeof(p), path, f->name);
	item = cJSON_GetObjectItemCaseSensitive(obj, f->name);
	if (!item || (cJSON_IsNull(item) && (f->flags & JSON_NULLABLE))) {
		if (f->flags & JSON_MANDATORY)
			return error_set(err, -EINVAL, "%s: missing", p);
		return 0;
	}
	return dispatch_value(item, p, f, flags, base, err);
}

static int dispatch_object(const cJSON *obj, const char *path, const struct json_field *table, unsigned flags,
			   void *base, struct error *err)
{
	int r;

	if (!cJSON_IsObject(obj))
		return json_wrong(obj, path, "an object", err);
	r = check_keys(obj, path, table, flags, err);
	if (r < 0)
		return r;
	for (const struct json_field *f = table; f->name; f++) {
		r = dispatch_row(obj, path, table, f, flags, base, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int json_dispatch(const cJSON *obj, const char *path, const struct json_field *table, unsigned flags, void *base,
		  struct error *err)
{
	return dispatch_object(obj, path ? path : "", table, flags, base, err);
}
