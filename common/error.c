/* error.c — formatting of struct error messages (see error.h). */
#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int error_setv(struct error *err, int r, const char *fmt, va_list ap)
{
	if (r > 0)
		r = -r;
	if (r == 0)
		r = -EIO; /* a failure always carries an errno */
	if (err) {
		err->code = r;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	}
	return r;
}

int error_set(struct error *err, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r = error_setv(err, r, fmt, ap);
	va_end(ap);
	return r;
}

int error_prefix(struct error *err, int r, const char *fmt, ...)
{
	char prefix[ERROR_MSG_MAX], old[ERROR_MSG_MAX];
	va_list ap;

	if (r > 0)
		r = -r;
	if (r == 0)
		r = -EIO;
	if (!err)
		return r;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	if (err->msg[0])
		snprintf(old, sizeof(old), "%s", err->msg);
	else
		snprintf(old, sizeof(old), "%s", strerror(-r));
	/* Truncation is fine here: a long message loses its tail. */
	size_t n = strlen(prefix);
	if (n > sizeof(err->msg) - 3)
		n = sizeof(err->msg) - 3;
	memcpy(err->msg, prefix, n);
	memcpy(err->msg + n, ": ", 2);
	n += 2;
	size_t m = strlen(old);
	if (m > sizeof(err->msg) - 1 - n)
		m = sizeof(err->msg) - 1 - n;
	memcpy(err->msg + n, old, m);
	err->msg[n + m] = 0;
	err->code = r;
	return r;
}

const char *error_str(const struct error *err, int r)
{
	if (err && err->msg[0])
		return err->msg;
	return strerror(r < 0 ? -r : r);
}
