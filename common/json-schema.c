/* json-schema.c — what a json_dispatch table tells people and tools: the
 * reference text of its keys (json_fields_print) and a JSON Schema, draft
 * 2020-12 (json_fields_schema). Both walk the table the parser walks, so
 * documentation and validation cannot drift from what goodput accepts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "json-dispatch.h"
#include "json-util.h"
#include "macro.h"

/* ---- the reference text ---- */

const char *json_field_type_text(const struct json_field *f, char *buf, size_t size)
{
	size_t n = 0;

	switch (f->type) {
	case JSON_OBJECT:
		return "object";
	case JSON_STRING:
		return "string";
	case JSON_U32:
	case JSON_U64:
	case JSON_SIZE:
		snprintf(buf, size, "integer %g..%g", f->min, f->max);
		return buf;
	case JSON_DOUBLE:
		snprintf(buf, size, "number %g..%g", f->min, f->max);
		return buf;
	case JSON_SECONDS:
		snprintf(buf, size, "seconds %g..%g", f->min, f->max);
		return buf;
	case JSON_BOOL:
		return "boolean";
	case JSON_ENUM:
	case JSON_ENUM_SET:
		n = (size_t)snprintf(buf, size, "%s", f->type == JSON_ENUM_SET ? "array of " : "");
		for (size_t i = 0; f->choices[i] && n < size; i++)
			n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "|" : "", f->choices[i]);
		return buf;
	case JSON_DURATION:
		return "duration";
	case JSON_STRV:
		return f->flags & JSON_ARGV ? "argv array" : "array of strings";
	case JSON_ARRAY:
		return "array";
	case JSON_ANY:
		break;
	}
	return "see text";
}

int json_fields_walk(const struct json_field *table, const char *prefix, json_field_visit_fn fn, void *userdata)
{
	for (const struct json_field *f = table; f->name; f++) {
		char path[256];
		int r;

		json_path_join(path, sizeof(path), prefix, f->name);
		r = fn(f, path, userdata);
		if (r < 0)
			return r;
		if (f->type == JSON_OBJECT && f->fields) {
			r = json_fields_walk(f->fields, path, fn, userdata);
			if (r < 0)
				return r;
		}
		if (f->type == JSON_ARRAY && f->fields) {
			strncat(path, "[]", sizeof(path) - strlen(path) - 1);
			r = json_fields_walk(f->fields, path, fn, userdata);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int print_row(const struct json_field *f, const char *path, void *userdata)
{
	char type[160];

	fprintf(userdata, "  %s%s  (%s%s%s)\n      %s\n", path, f->flags & JSON_MANDATORY ? " *" : "",
		json_field_type_text(f, type, sizeof(type)), f->def ? "; default " : "", f->def ? f->def : "",
		f->doc ? f->doc : "");
	return 0;
}

void json_fields_print(FILE *out, const struct json_field *table, const char *prefix)
{
	json_fields_walk(table, prefix, print_row, out);
}

/* ---- the JSON Schema ---- */

/* A glob as an anchored ECMA-262 regular expression ("p*_ms" → "^p.*_ms$"). */
static void glob_to_regex(const char *glob, char *buf, size_t size)
{
	size_t n = 0;
	bool in_class = false;

	buf[n++] = '^';
	for (const char *c = glob; *c && n + 4 < size; c++) {
		if (in_class) {
			if (*c == ']')
				in_class = false;
			buf[n++] = *c;
		} else if (*c == '[') {
			in_class = true;
			buf[n++] = '[';
			if (c[1] == '!') {
				buf[n++] = '^';
				c++;
			}
		} else if (*c == '*') {
			buf[n++] = '.';
			buf[n++] = '*';
		} else if (*c == '?')
			buf[n++] = '.';
		else {
			if (strchr(".\\+()[]{}|^$", *c))
				buf[n++] = '\\';
			buf[n++] = *c;
		}
	}
	buf[n++] = '$';
	buf[n] = 0;
}

static int add_range(cJSON *s, const char *min_key, const char *max_key, double min, double max)
{
	if (min_key && !cJSON_AddNumberToObject(s, min_key, min))
		return -ENOMEM;
	if (max_key && !cJSON_AddNumberToObject(s, max_key, max))
		return -ENOMEM;
	return 0;
}

static int add_string_array(cJSON *s, const char *key, const char *const *v)
{
	cJSON *a = cJSON_AddArrayToObject(s, key);

	if (!a)
		return -ENOMEM;
	for (size_t i = 0; v[i]; i++) {
		cJSON *e = cJSON_CreateString(v[i]);

		if (!e || !cJSON_AddItemToArray(a, e)) {
			cJSON_Delete(e);
			return -ENOMEM;
		}
	}
	return 0;
}

/* Adds a new object to the array a; NULL when out of memory. */
static cJSON *add_object_to_array(cJSON *a)
{
	cJSON *o = cJSON_CreateObject();

	if (o && !cJSON_AddItemToArray(a, o)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int string_schema(cJSON *s, size_t max_len)
{
	if (!cJSON_AddStringToObject(s, "type", "string") || add_range(s, "minLength", NULL, 1, 0) < 0)
		return -ENOMEM;
	return max_len ? add_range(s, NULL, "maxLength", 0, (double)max_len) : 0;
}

static int array_counts(cJSON *s, const struct json_field *f)
{
	int r = 0;

	if (f->min > 0)
		r = add_range(s, "minItems", NULL, f->min, 0);
	if (r >= 0 && f->max > 0)
		r = add_range(s, NULL, "maxItems", 0, f->max);
	return r;
}

static int strv_schema(cJSON *s, const struct json_field *f)
{
	cJSON *items, *first, *prefix;

	if (!cJSON_AddStringToObject(s, "type", "array") || array_counts(s, f) < 0)
		return -ENOMEM;
	items = cJSON_AddObjectToObject(s, "items");
	if (!items)
		return -ENOMEM;
	if (!(f->flags & JSON_ARGV))
		return string_schema(items, 0);
	/* a command: the program must be named, its arguments may be "" */
	if (!cJSON_AddStringToObject(items, "type", "string"))
		return -ENOMEM;
	prefix = cJSON_AddArrayToObject(s, "prefixItems");
	first = prefix ? add_object_to_array(prefix) : NULL;
	return first ? string_schema(first, 0) : -ENOMEM;
}

static int duration_schema(cJSON *s, const struct json_field *f)
{
	cJSON *any = cJSON_AddArrayToObject(s, "anyOf"), *num, *str;

	num = any ? add_object_to_array(any) : NULL;
	str = any ? add_object_to_array(any) : NULL;
	if (!num || !str)
		return -ENOMEM;
	if (!cJSON_AddStringToObject(num, "type", "number") || add_range(num, "minimum", "maximum", f->min, f->max) < 0)
		return -ENOMEM;
	/* what json_parse_duration takes: plain seconds, or numbers with units */
	if (!cJSON_AddStringToObject(str, "type", "string") ||
	    !cJSON_AddStringToObject(str, "pattern",
				     "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)$|^(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)[smhd])+$"))
		return -ENOMEM;
	return 0;
}

static int object_schema(cJSON *s, const struct json_field *table, unsigned flags);

/* The schema of one row's value, before its description and merged text. */
static int value_schema(cJSON *s, const struct json_field *f, unsigned flags)
{
	cJSON *items;

	switch (f->type) {
	case JSON_STRING:
		return string_schema(s, (size_t)f->max);
	case JSON_U32:
	case JSON_U64:
	case JSON_SIZE:
		if (!cJSON_AddStringToObject(s, "type", "integer"))
			return -ENOMEM;
		return add_range(s, "minimum", "maximum", f->min, f->max);
	case JSON_DOUBLE:
	case JSON_SECONDS:
		if (!cJSON_AddStringToObject(s, "type", "number"))
			return -ENOMEM;
		return add_range(s, "minimum", "maximum", f->min, f->max);
	case JSON_BOOL:
		return cJSON_AddStringToObject(s, "type", "boolean") ? 0 : -ENOMEM;
	case JSON_ENUM:
		return add_string_array(s, "enum", f->choices);
	case JSON_ENUM_SET:
		if (!cJSON_AddStringToObject(s, "type", "array") || !cJSON_AddTrueToObject(s, "uniqueItems") ||
		    array_counts(s, f) < 0)
			return -ENOMEM;
		items = cJSON_AddObjectToObject(s, "items");
		return items ? add_string_array(items, "enum", f->choices) : -ENOMEM;
	case JSON_DURATION:
		return duration_schema(s, f);
	case JSON_STRV:
		return strv_schema(s, f);
	case JSON_OBJECT:
		if (f->fields)
			return object_schema(s, f->fields, flags);
		return cJSON_AddStringToObject(s, "type", "object") ? 0 : -ENOMEM;
	case JSON_ARRAY:
		if (!cJSON_AddStringToObject(s, "type", "array") || array_counts(s, f) < 0)
			return -ENOMEM;
		if (!f->fields)
			return 0;
		items = cJSON_AddObjectToObject(s, "items");
		return items ? object_schema(items, f->fields, flags) : -ENOMEM;
	case JSON_ANY:
		return 0;
	}
	return -EINVAL;
}

/* Adds every key of the row's schema text to s, replacing what is there. */
static int merge_schema_text(cJSON *s, const char *text)
{
	_cleanup_(cJSON_Deletep) cJSON *extra = cJSON_Parse(text);
	cJSON *item;

	if (!cJSON_IsObject(extra))
		return -EINVAL;
	while ((item = extra->child)) {
		cJSON_DetachItemViaPointer(extra, item);
		cJSON_DeleteItemFromObjectCaseSensitive(s, item->string);
		cJSON_AddItemToObject(s, item->string, item);
	}
	return 0;
}

static int describe(cJSON *s, const struct json_field *f)
{
	char text[1024];

	if (!f->doc)
		return 0;
	if (f->def)
		snprintf(text, sizeof(text), "%s (default: %s)", f->doc, f->def);
	else
		snprintf(text, sizeof(text), "%s", f->doc);
	return cJSON_AddStringToObject(s, "description", text) ? 0 : -ENOMEM;
}

/* s becomes {"anyOf": [s, {"type": "null"}]}. */
static int allow_null(cJSON **s)
{
	_cleanup_(cJSON_Deletep) cJSON *wrap = cJSON_CreateObject();
	cJSON *any = wrap ? cJSON_AddArrayToObject(wrap, "anyOf") : NULL, *null;

	if (!any || !cJSON_AddItemToArray(any, *s))
		return -ENOMEM;
	*s = NULL; /* now in wrap */
	null = add_object_to_array(any);
	if (!null || !cJSON_AddStringToObject(null, "type", "null"))
		return -ENOMEM;
	*s = TAKE_PTR(wrap);
	return 0;
}

static int row_schema(const struct json_field *f, unsigned flags, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *s = cJSON_CreateObject();
	int r;

	if (!s)
		return -ENOMEM;
	r = value_schema(s, f, flags);
	if (r >= 0 && f->schema)
		r = merge_schema_text(s, f->schema);
	if (r >= 0 && (f->flags & JSON_NULLABLE))
		r = allow_null(&s);
	if (r >= 0)
		r = describe(s, f);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
	return 0;
}

static int add_required(cJSON *s, cJSON **required, const char *name)
{
	cJSON *n;

	if (!*required && !(*required = cJSON_AddArrayToObject(s, "required")))
		return -ENOMEM;
	n = cJSON_CreateString(name);
	if (!n || !cJSON_AddItemToArray(*required, n)) {
		cJSON_Delete(n);
		return -ENOMEM;
	}
	return 0;
}

static int object_schema(cJSON *s, const struct json_field *table, unsigned flags)
{
	cJSON *props, *patterns = NULL, *required = NULL;
	int r;

	if (!cJSON_AddStringToObject(s, "type", "object"))
		return -ENOMEM;
	props = cJSON_AddObjectToObject(s, "properties");
	if (!props)
		return -ENOMEM;
	for (const struct json_field *f = table; f->name; f++) {
		cJSON *row = NULL, *into = props;
		char key[256];

		snprintf(key, sizeof(key), "%s", f->name);
		if (f->pattern) {
			if (!patterns && !(patterns = cJSON_AddObjectToObject(s, "patternProperties")))
				return -ENOMEM;
			glob_to_regex(f->pattern, key, sizeof(key));
			into = patterns;
		}
		r = row_schema(f, flags, &row);
		if (r < 0)
			return r;
		if (!cJSON_AddItemToObject(into, key, row)) {
			cJSON_Delete(row);
			return -ENOMEM;
		}
		if (f->flags & JSON_MANDATORY) {
			r = add_required(s, &required, f->name);
			if (r < 0)
				return r;
		}
	}
	if (!(flags & JSON_ALLOW_UNKNOWN) && !cJSON_AddFalseToObject(s, "additionalProperties"))
		return -ENOMEM;
	return 0;
}

int json_fields_schema(const struct json_field *table, unsigned flags, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *s = cJSON_CreateObject();
	int r;

	if (!s)
		return -ENOMEM;
	r = object_schema(s, table, flags);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
	return 0;
}
