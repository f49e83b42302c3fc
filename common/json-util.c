/* json-util.c — see json-util.h. */
#include "json-util.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-util.h"
#include "macro.h"
#include "utf8.h"

static void line_col(const char *buf, size_t off, unsigned *ret_line, unsigned *ret_col)
{
	unsigned line = 1, col = 1;

	for (size_t i = 0; i < off; i++) {
		if (buf[i] == '\n') {
			line++;
			col = 1;
		} else
			col++;
	}
	*ret_line = line;
	*ret_col = col;
}

/* The offset of the first \u0000 escape inside a string of buf, or len.
 * cJSON turns it into a NUL that ends the C string early: "victim\u0000x"
 * would be read as "victim". An escaped backslash before a u ("\\u0000")
 * is text, not an escape. */
static size_t escaped_nul_offset(const char *buf, size_t len)
{
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		if (!in_string) {
			in_string = buf[i] == '"';
			continue;
		}
		if (buf[i] == '"')
			in_string = false;
		else if (buf[i] == '\\' && i + 1 < len) {
			if (buf[i + 1] == 'u' && i + 5 < len && memcmp(buf + i + 2, "0000", 4) == 0)
				return i;
			i++; /* the escaped character */
		}
	}
	return len;
}

int json_parse_strict(const char *what, const char *buf, size_t len, cJSON **ret, struct error *err)
{
	const char *end = NULL;
	unsigned line, col;
	cJSON *root;
	size_t off;

	if (len == 0)
		return error_set(err, -EINVAL, "%s: empty, expected a JSON value", what);
	if (memchr(buf, '\0', len))
		return error_set(err, -EINVAL, "%s: contains a NUL byte", what);
	off = utf8_invalid_offset(buf, len);
	if (off < len) {
		line_col(buf, off, &line, &col);
		return error_set(err, -EINVAL, "%s: invalid UTF-8 at line %u, column %u", what, line, col);
	}
	off = escaped_nul_offset(buf, len);
	if (off < len) {
		line_col(buf, off, &line, &col);
		return error_set(err, -EINVAL,
				 "%s: a string holds \\u0000 (a NUL) at line %u, column %u: no name, path or value may",
				 what, line, col);
	}
	root = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();

		off = (at && at >= buf && at <= buf + len) ? (size_t)(at - buf) : 0;
		line_col(buf, off, &line, &col);
		return error_set(err, -EINVAL, "%s: invalid JSON at line %u, column %u", what, line, col);
	}
	off = (size_t)(end - buf);
	while (off < len && (buf[off] == ' ' || buf[off] == '\t' || buf[off] == '\n' || buf[off] == '\r'))
		off++;
	if (off < len) {
		cJSON_Delete(root);
		line_col(buf, off, &line, &col);
		return error_set(err, -EINVAL, "%s: unexpected data after the JSON value at line %u, column %u", what,
				 line, col);
	}
	*ret = root;
	return 0;
}

int json_parse_file(const char *path, size_t max_bytes, cJSON **ret, struct error *err)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len;
	int r;

	r = file_read_regular(path, 0, max_bytes, &buf, &len, err);
	if (r < 0)
		return r;
	return json_parse_strict(path, buf, len, ret, err);
}

char *json_path_join(char *buf, size_t size, const char *path, const char *key)
{
	if (path && *path)
		snprintf(buf, size, "%s.%s", path, key);
	else
		snprintf(buf, size, "%s", key);
	return buf;
}

/* A short rendering of a value for error messages. */
static const char *show(const cJSON *item, char *buf, size_t size)
{
	char *s = cJSON_PrintUnformatted(item);

	snprintf(buf, size, "%s", s ? s : "?");
	if (s && strlen(s) >= size && size > 4)
		memcpy(buf + size - 4, "...", 4);
	cJSON_free(s);
	return buf;
}

const char *json_path_or_root(const char *path)
{
	return path && *path ? path : "(root)";
}

int json_wrong(const cJSON *v, const char *path, const char *expect, struct error *err)
{
	char shown[72];

	return error_set(err, -EINVAL, "%s: expected %s, got %s", json_path_or_root(path), expect,
			 show(v, shown, sizeof(shown)));
}

/* The value of key in obj, or NULL when it is absent or null; its path goes to p. */
static const cJSON *lookup(const cJSON *obj, const char *path, const char *key, char *p, size_t size)
{
	const cJSON *item;

	if (!cJSON_IsObject(obj))
		return NULL;
	item = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!item || cJSON_IsNull(item))
		return NULL;
	json_path_join(p, size, path, key);
	return item;
}

static bool is_integral(double v)
{
	return isfinite(v) && floor(v) == v;
}

int json_value_u64(const cJSON *v, const char *path, uint64_t min, uint64_t max, uint64_t *ret, struct error *err)
{
	char expect[96];
	double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;

	/* Above 2^53 a double no longer holds every integer: refuse rather than round. */
	if (is_integral(d) && d >= (double)min && d <= (double)max && d <= 9007199254740992.0) {
		*ret = (uint64_t)d;
		return 0;
	}
	snprintf(expect, sizeof(expect), "an integer in [%" PRIu64 ", %" PRIu64 "]", min, max);
	return json_wrong(v, path, expect, err);
}

int json_value_double(const cJSON *v, const char *path, double min, double max, double *ret, struct error *err)
{
	char expect[96];

	if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= min && v->valuedouble <= max) {
		*ret = v->valuedouble;
		return 0;
	}
	snprintf(expect, sizeof(expect), "a number in [%g, %g]", min, max);
	return json_wrong(v, path, expect, err);
}

int json_value_bool(const cJSON *v, const char *path, bool *ret, struct error *err)
{
	if (!cJSON_IsBool(v))
		return json_wrong(v, path, "true or false", err);
	*ret = cJSON_IsTrue(v);
	return 0;
}

int json_value_string(const cJSON *v, const char *path, size_t max_len, const char **ret, struct error *err)
{
	if (!cJSON_IsString(v) || !v->valuestring)
		return json_wrong(v, path, "a string", err);
	if (!v->valuestring[0])
		return error_set(err, -EINVAL, "%s: must not be empty", json_path_or_root(path));
	if (max_len && strlen(v->valuestring) > max_len)
		return error_set(err, -EINVAL, "%s: longer than %zu characters", json_path_or_root(path), max_len);
	*ret = v->valuestring;
	return 0;
}

void json_choices_format(const char *const *choices, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; choices[i] && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s\"%s\"", i ? ", " : "", choices[i]);
}

int json_value_enum(const cJSON *v, const char *path, const char *const *choices, int *ret, struct error *err)
{
	char expect[256] = "one of ";

	if (cJSON_IsString(v) && v->valuestring)
		for (int i = 0; choices[i]; i++)
			if (strcmp(v->valuestring, choices[i]) == 0) {
				*ret = i;
				return 0;
			}
	json_choices_format(choices, expect + strlen(expect), sizeof(expect) - strlen(expect));
	return json_wrong(v, path, expect, err);
}

int json_get_u64(const cJSON *obj, const char *path, const char *key, uint64_t min, uint64_t max, uint64_t *ret,
		 struct error *err)
{
	char p[256];
	const cJSON *item = lookup(obj, path, key, p, sizeof(p));
	int r;

	if (!item)
		return 0;
	r = json_value_u64(item, p, min, max, ret, err);
	return r < 0 ? r : 1;
}

int json_get_u32(const cJSON *obj, const char *path, const char *key, uint32_t min, uint32_t max, uint32_t *ret,
		 struct error *err)
{
	uint64_t v;
	int r;

	r = json_get_u64(obj, path, key, min, max, &v, err);
	if (r > 0)
		*ret = (uint32_t)v;
	return r;
}

int json_get_double(const cJSON *obj, const char *path, const char *key, double min, double max, double *ret,
		    struct error *err)
{
	char p[256];
	const cJSON *item = lookup(obj, path, key, p, sizeof(p));
	int r;

	if (!item)
		return 0;
	r = json_value_double(item, p, min, max, ret, err);
	return r < 0 ? r : 1;
}

int json_get_bool(const cJSON *obj, const char *path, const char *key, bool *ret, struct error *err)
{
	char p[256];
	const cJSON *item = lookup(obj, path, key, p, sizeof(p));
	int r;

	if (!item)
		return 0;
	r = json_value_bool(item, p, ret, err);
	return r < 0 ? r : 1;
}

int json_get_string(const cJSON *obj, const char *path, const char *key, size_t max_len, const char **ret,
		    struct error *err)
{
	char p[256];
	const cJSON *item = lookup(obj, path, key, p, sizeof(p));
	int r;

	if (!item)
		return 0;
	r = json_value_string(item, p, max_len, ret, err);
	return r < 0 ? r : 1;
}

int json_get_array(const cJSON *obj, const char *path, const char *key, const cJSON **ret, struct error *err)
{
	char p[256];
	const cJSON *item = lookup(obj, path, key, p, sizeof(p));

	if (!item)
		return 0;
	if (!cJSON_IsArray(item))
		return json_wrong(item, p, "an array", err);
	*ret = item;
	return 1;
}

int json_get_object(const cJSON *obj, const char *path, const char *key, const cJSON **ret, struct error *err)
{
	char p[256];
	const cJSON *item = lookup(obj, path, key, p, sizeof(p));

	if (!item)
		return 0;
	if (!cJSON_IsObject(item))
		return json_wrong(item, p, "an object", err);
	*ret = item;
	return 1;
}

int json_get_enum(const cJSON *obj, const char *path, const char *key, const char *const *choices, int *ret,
		  struct error *err)
{
	char p[256];
	const cJSON *item = lookup(obj, path, key, p, sizeof(p));
	int r;

	if (!item)
		return 0;
	r = json_value_enum(item, p, choices, ret, err);
	return r < 0 ? r : 1;
}

static int missing(const char *path, const char *key, struct error *err)
{
	char p[256];

	return error_set(err, -EINVAL, "%s: missing", json_path_join(p, sizeof(p), path, key));
}

int json_require_u64(const cJSON *obj, const char *path, const char *key, uint64_t min, uint64_t max, uint64_t *ret,
		     struct error *err)
{
	int r = json_get_u64(obj, path, key, min, max, ret, err);

	return r == 0 ? missing(path, key, err) : r;
}

int json_require_double(const cJSON *obj, const char *path, const char *key, double min, double max, double *ret,
			struct error *err)
{
	int r = json_get_double(obj, path, key, min, max, ret, err);

	return r == 0 ? missing(path, key, err) : r;
}

int json_require_string(const cJSON *obj, const char *path, const char *key, size_t max_len, const char **ret,
			struct error *err)
{
	int r = json_get_string(obj, path, key, max_len, ret, err);

	return r == 0 ? missing(path, key, err) : r;
}

int json_require_object(const cJSON *obj, const char *path, const char *key, const cJSON **ret, struct error *err)
{
	int r = json_get_object(obj, path, key, ret, err);

	return r == 0 ? missing(path, key, err) : r;
}

int json_check_keys(const cJSON *obj, const char *path, const char *const *allowed, struct error *err)
{
	const cJSON *item, *other;
	char p[256];

	if (!cJSON_IsObject(obj))
		return error_set(err, -EINVAL, "%s: expected an object", path && *path ? path : "(root)");
	cJSON_ArrayForEach(item, obj)
	{
		bool known = false;

		for (size_t i = 0; allowed[i] && !known; i++)
			known = strcmp(item->string, allowed[i]) == 0;
		if (!known)
			return error_set(err, -EINVAL, "%s: unknown key",
					 json_path_join(p, sizeof(p), path, item->string));
		for (other = item->next; other; other = other->next)
			if (strcmp(other->string, item->string) == 0)
				return error_set(err, -EINVAL, "%s: duplicate key",
						 json_path_join(p, sizeof(p), path, item->string));
	}
	return 0;
}

int json_add_number(cJSON *obj, const char *key, double v)
{
	cJSON *item = isfinite(v) ? cJSON_AddNumberToObject(obj, key, v) : cJSON_AddNullToObject(obj, key);

	return item ? 0 : -ENOMEM;
}

int json_add_string(cJSON *obj, const char *key, const char *v)
{
	cJSON *item = v ? cJSON_AddStringToObject(obj, key, v) : cJSON_AddNullToObject(obj, key);

	return item ? 0 : -ENOMEM;
}

int json_add_bool(cJSON *obj, const char *key, bool v)
{
	return cJSON_AddBoolToObject(obj, key, v) ? 0 : -ENOMEM;
}
