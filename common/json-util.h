/* json-util.h — strict parsing and typed getters over cJSON.
 *
 * cJSON alone accepts trailing garbage, matches keys case-insensitively and
 * saturates integers silently (PLATFORM.md); these helpers refuse all of it
 * and report the JSON path of the bad field: "search_space.max_num_seqs.min:
 * expected an integer in [1, 65536], got 0".
 *
 * Getters take the object, the path of that object ("" for the root) and a
 * key. They return 1 when the key was present and *ret was set, 0 when the
 * key is absent or null (*ret untouched, so callers preset defaults), and a
 * negative errno with err filled when the value has the wrong type or range.
 * The json_require_* variants treat absence as an error too. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "error.h"

/* Parses exactly len bytes holding one JSON value (whitespace around it
 * allowed). Invalid UTF-8, NUL bytes and a string's \u0000 escape (which
 * would end its C string early) are refused, so every string of the result
 * is valid UTF-8 and whole. On failure names `what` (a file name, "request
 * body") and the line and column. The caller owns *ret. */
int json_parse_strict(const char *what, const char *buf, size_t len, cJSON **ret, struct error *err);
/* Reads and parses a regular file (at most max_bytes; file_read_regular:
 * a FIFO or device is refused, never waited on). */
int json_parse_file(const char *path, size_t max_bytes, cJSON **ret, struct error *err);

/* Child path "a.b" + "c" -> "a.b.c" (or "c" for the root); returns buf. */
char *json_path_join(char *buf, size_t size, const char *path, const char *key);

/* Checks of one value whose path is known ("workload.input_len"): 0 and
 * *ret set, or a negative errno with err naming the path and the value. */
int json_value_u64(const cJSON *v, const char *path, uint64_t min, uint64_t max, uint64_t *ret, struct error *err);
int json_value_double(const cJSON *v, const char *path, double min, double max, double *ret, struct error *err);
int json_value_bool(const cJSON *v, const char *path, bool *ret, struct error *err);
/* As json_get_string: *ret points into v; empty refused; max_len 0 = no limit. */
int json_value_string(const cJSON *v, const char *path, size_t max_len, const char **ret, struct error *err);
int json_value_enum(const cJSON *v, const char *path, const char *const *choices, int *ret, struct error *err);
/* "PATH: expected EXPECT, got VALUE" (the value shortened); returns -EINVAL. */
int json_wrong(const cJSON *v, const char *path, const char *expect, struct error *err);
/* The path as errors show it: "(root)" for the root. */
const char *json_path_or_root(const char *path);
/* The choices as "\"a\", \"b\", \"c\"" into buf. */
void json_choices_format(const char *const *choices, char *buf, size_t size);

int json_get_u64(const cJSON *obj, const char *path, const char *key, uint64_t min, uint64_t max, uint64_t *ret,
		 struct error *err);
int json_get_u32(const cJSON *obj, const char *path, const char *key, uint32_t min, uint32_t max, uint32_t *ret,
		 struct error *err);
int json_get_double(const cJSON *obj, const char *path, const char *key, double min, double max, double *ret,
		    struct error *err);
int json_get_bool(const cJSON *obj, const char *path, const char *key, bool *ret, struct error *err);
/* *ret points into obj (not copied). max_len 0 means no limit; empty strings are refused. */
int json_get_string(const cJSON *obj, const char *path, const char *key, size_t max_len, const char **ret,
		    struct error *err);
/* Array or object children, returned as the cJSON node. */
int json_get_array(const cJSON *obj, const char *path, const char *key, const cJSON **ret, struct error *err);
int json_get_object(const cJSON *obj, const char *path, const char *key, const cJSON **ret, struct error *err);
/* The string must be one of the NULL-terminated choices; *ret is its index. */
int json_get_enum(const cJSON *obj, const char *path, const char *key, const char *const *choices, int *ret,
		  struct error *err);

/* As the getters, absence being an error ("study.name: missing"). */
int json_require_u64(const cJSON *obj, const char *path, const char *key, uint64_t min, uint64_t max, uint64_t *ret,
		     struct error *err);
int json_require_double(const cJSON *obj, const char *path, const char *key, double min, double max, double *ret,
			struct error *err);
int json_require_string(const cJSON *obj, const char *path, const char *key, size_t max_len, const char **ret,
			struct error *err);
int json_require_object(const cJSON *obj, const char *path, const char *key, const cJSON **ret, struct error *err);

/* Refuses any key of obj not in the NULL-terminated list, and duplicate keys
 * (cJSON keeps both and finds the first): "study.budgett: unknown key". */
int json_check_keys(const cJSON *obj, const char *path, const char *const *allowed, struct error *err);

/* Adds a number/string/bool to obj; -ENOMEM when cJSON cannot allocate. */
int json_add_number(cJSON *obj, const char *key, double v);
int json_add_string(cJSON *obj, const char *key, const char *v);
int json_add_bool(cJSON *obj, const char *key, bool v);
