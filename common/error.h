/* error.h — the one way a library function tells its caller *what* was wrong.
 *
 * Functions return a negative errno; those that can fail on user input also
 * take a `struct error *err` (may be NULL) and, on failure, write a message
 * that names the field and the value ("workload.input_len: expected an
 * integer in [1, 1048576], got \"-3\""). Programs decide whether and how to
 * print it; libraries never print. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#define ERROR_MSG_MAX 512

struct error {
	int code;                /* the negative errno that went with the message */
	char msg[ERROR_MSG_MAX]; /* "" when nothing was set */
};

/* Formats a message into err (when not NULL) and returns r, which must be
 * negative; a positive r is negated so callers may write error_set(err, EINVAL, ...). */
int error_set(struct error *err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int error_setv(struct error *err, int r, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* Prepends "prefix: " to an existing message (adding context on the way up). */
int error_prefix(struct error *err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The message, or strerror(-r) when none was set. Never NULL. */
const char *error_str(const struct error *err, int r);
