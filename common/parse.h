/* parse.h — checked number parsing for flags, environment and text formats.
 *
 * Each parser accepts the whole string or nothing: empty input, leading or
 * trailing garbage, overflow, values outside [min, max], and (for doubles)
 * NaN and infinities are errors. `what` names the field in the message
 * ("--request-rate: expected a number in [0, 1e+06], got \"fast\""). */
#pragma once

#include <stdint.h>

#include "error.h"

int parse_u64(const char *what, const char *s, uint64_t min, uint64_t max, uint64_t *ret, struct error *err);
int parse_i64(const char *what, const char *s, int64_t min, int64_t max, int64_t *ret, struct error *err);
int parse_u32(const char *what, const char *s, uint32_t min, uint32_t max, uint32_t *ret, struct error *err);
int parse_double(const char *what, const char *s, double min, double max, double *ret, struct error *err);
/* A daily time window "HH:MM-HH:MM" (an end before the start wraps past
 * midnight; "24:00" is midnight at the end): start and end in minutes after
 * midnight. An empty window ("09:00-09:00") is refused. */
int parse_daily_window(const char *what, const char *s, unsigned *ret_start_min, unsigned *ret_end_min,
		       struct error *err);
/* "yes/no/true/false/1/0/on/off". */
int parse_bool(const char *what, const char *s, int *ret, struct error *err);

/* The bytes of p (n of them) as 2n lowercase hex digits and a NUL into buf
 * (2n + 1 bytes): how a forked copy of the program hands a struct of plain
 * data to its parent bit-exact. Returns 2n. */
size_t hex_encode(const void *p, size_t n, char *buf);
/* The reverse: exactly 2n hex digits at s into n bytes at p; -EINVAL (p
 * untouched) for any other length or a character that is not one. */
int hex_decode(const char *s, size_t len, void *p, size_t n);
