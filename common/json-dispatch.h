/* json-dispatch.h — a JSON object into a C struct, driven by one table.
 *
 * A table is an array of struct json_field closed by an empty row ({ 0 }).
 * Each row declares one key: its name, its type, where its value lands (an
 * offset from the base pointer handed to json_dispatch) or a callback, flags,
 * its range or choices, its default and a line of documentation. From the
 * same table come the parser (json_dispatch), the reference text
 * (json_fields_print) and a JSON Schema (json_fields_schema), so adding a
 * key is one row plus its field.
 *
 * json_dispatch refuses what cJSON lets through (PLATFORM.md): keys are
 * matched case-sensitively, duplicate keys and unknown keys are errors, and
 * every error names the JSON path and the wrong value:
 *   "workload.input_len: expected a number in [1, 131072], got 0"
 *   "budgett: unknown key"   "sla.ttft_ms: duplicate key"   "gpu.type: missing"
 * Rows are dispatched in table order (not the document's), so a callback may
 * read what the rows above it stored. Nested objects are rows of type
 * JSON_OBJECT with a table of their own, dispatched with the same base. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"

enum json_type {
	JSON_STRING,   /* const char * into the document; max = longest length (0: any); "" and control
		        * characters are refused */
	JSON_U32,      /* uint32_t in [min, max] */
	JSON_U64,      /* uint64_t in [min, max] (at most 2^53) */
	JSON_SIZE,     /* size_t in [min, max] */
	JSON_DOUBLE,   /* double in [min, max] */
	JSON_BOOL,     /* bool */
	JSON_ENUM,     /* a string among choices → its index, an int (or an enum of int's size) */
	JSON_ENUM_SET, /* an array of distinct choices, [min, max] of them → unsigned, bit i for choices[i] */
	JSON_SECONDS,  /* seconds in [min, max] (a number) → uint64_t µs */
	JSON_DURATION, /* seconds, or a string "90s", "45m", "8h", "1h30m", "2d"; in [min, max] → uint64_t µs */
	JSON_STRV,     /* [min, max] non-empty strings → const char ** NULL-terminated: the array is the
		        * caller's to free(), the strings point into the document */
	JSON_OBJECT,   /* with fields: a nested table, same base; without: const cJSON * at offset */
	JSON_ARRAY,    /* [min, max] elements (max 0: any) → const cJSON * at offset; with fields, its
		        * elements are objects of that table, read by the row's callback (the
		        * reference names their keys "key[].field") */
	JSON_ANY,      /* any value: the callback reads it (schema says what it accepts) */
};

enum json_field_flags {
	JSON_MANDATORY = 1 << 0, /* absence is an error: "PATH: missing" */
	JSON_NULLABLE = 1 << 1,  /* null is accepted and means absent; otherwise null is a wrong type */
	JSON_ARGV = 1 << 2,      /* JSON_STRV holding a command: only the first string must be non-empty */
};

enum json_dispatch_flags {
	JSON_ALLOW_UNKNOWN = 1 << 0, /* keys no row names are skipped, not refused (records from older versions) */
};

struct json_field;

/* Called for a present value after its type (and range, for numbers) was
 * checked, instead of the store; base is json_dispatch's. A callback may
 * store first with json_dispatch_store() and then check further. Returns 0
 * or a negative errno with err set (naming path). */
typedef int (*json_dispatch_fn)(const cJSON *v, const char *path, const struct json_field *f, void *base,
				struct error *err);

struct json_field {
	const char *name; /* the key; with pattern, how the reference names the keys it takes ("p<P>_<metric>_ms") */
	enum json_type type;
	size_t offset;                   /* where the value lands, from the base (no callback, or one that stores) */
	json_dispatch_fn callback;       /* optional, see above */
	unsigned flags;                  /* enum json_field_flags */
	double min, max;                 /* numbers: the range; strings: max length; arrays: element count */
	const char *const *choices;      /* JSON_ENUM, JSON_ENUM_SET: NULL-terminated */
	const struct json_field *fields; /* JSON_OBJECT: the nested table */
	const char *pattern;             /* fnmatch(3) glob: the row takes every key it matches that no row names */
	const char *schema;              /* a JSON object merged into the row's generated schema */
	const char *def;                 /* the default, as people read it */
	const char *doc;                 /* one line of documentation */
};

/* Dispatches obj (at path, "" for the root) into base by table. Returns 0,
 * or a negative errno with err naming the path: -EINVAL for the document's
 * mistakes, -ENOMEM. What was stored before a failure stays stored (the
 * caller's cleanup frees JSON_STRV arrays). */
int json_dispatch(const cJSON *obj, const char *path, const struct json_field *table, unsigned flags, void *base,
		  struct error *err);

/* The built-in store of a row for a value already checked: for callbacks
 * that store and then check more. */
int json_dispatch_store(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err);

/* "90", "90s", "45m", "8h", "1h30m", "2d" → seconds; -EINVAL otherwise. */
int json_parse_duration(const char *s, double *ret);

/* Calls fn for every row with its full path ("workload.input_len"), a row
 * before the rows of its nested table; stops at fn's first negative return
 * and returns it. What a man page or any other reference is written from. */
typedef int (*json_field_visit_fn)(const struct json_field *f, const char *path, void *userdata);
int json_fields_walk(const struct json_field *table, const char *prefix, json_field_visit_fn fn, void *userdata);

/* A row's type as the reference shows it: "integer 1..64", "online|offline",
 * "duration", "array of strings" ...; buf holds it when it is built. */
const char *json_field_type_text(const struct json_field *f, char *buf, size_t size);

/* The reference of every row, recursively, one key per entry:
 *   "  workload.input_len  (number 1..131072; default 1024)\n      mean prompt length, tokens\n"
 * with " *" after mandatory keys; prefix is the path of the table ("" at the root). */
void json_fields_print(FILE *f, const struct json_field *table, const char *prefix);

/* A JSON Schema (draft 2020-12) of an object the table dispatches: types,
 * ranges, enums, required keys, descriptions (with defaults) and
 * "additionalProperties": false (unless flags has JSON_ALLOW_UNKNOWN). The
 * caller owns *ret (cJSON_Delete). -EINVAL when a row's schema text is not
 * a JSON object. */
int json_fields_schema(const struct json_field *table, unsigned flags, cJSON **ret);
