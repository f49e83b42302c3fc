/* utf8.h — UTF-8 checks for text that crosses a trust boundary.
 *
 * JSON is UTF-8 by definition (RFC 8259), and goodput's answers are JSON: a
 * string holding invalid UTF-8 that is stored and echoed makes every later
 * answer that carries it invalid. Input is therefore checked where it
 * arrives (json_parse_strict), names are refused when they hold control
 * characters (a newline in a study's label breaks every table that shows
 * it), and text from elsewhere (a server's log) is repaired before it is
 * stored. Validity is strict: no overlong forms, no surrogates, nothing
 * above U+10FFFF. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The offset of the first byte that does not begin a valid sequence, or len
 * when all of s[0..len) is valid UTF-8. */
size_t utf8_invalid_offset(const char *s, size_t len);
static inline bool utf8_is_valid(const char *s, size_t len)
{
	return utf8_invalid_offset(s, len) == len;
}

/* A copy of the NUL-terminated s with every invalid byte replaced by U+FFFD;
 * NULL when out of memory. */
char *utf8_sanitize(const char *s);

/* Whether s holds a C0 control character, DEL or a C1 control (U+0080 to
 * U+009F); s must be valid UTF-8. */
bool utf8_has_control(const char *s);
