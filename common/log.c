/* log.c — see log.h. One global level and program name: logging is the one
 * piece of process-wide state goodput allows itself. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

static const char *program = "goodput";
static int max_level = LOG_INFO;
static bool journal;
static void (*before_line)(void *userdata);
static void *before_line_userdata;

void log_detect_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	journal = false;
	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return;
	/* Only when stderr is still the stream systemd handed us, not a
	 * redirection done by a child's parent. */
	if (fstat(STDERR_FILENO, &st) < 0)
		return;
	journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

bool log_to_journal(void)
{
	return journal;
}

void log_set_program(const char *name)
{
	const char *slash = strrchr(name, '/');

	program = slash ? slash + 1 : name;
	log_detect_journal();
}

void log_set_max_level(int level)
{
	max_level = level;
}

int log_get_max_level(void)
{
	return max_level;
}

void log_set_before_line(void (*fn)(void *userdata), void *userdata)
{
	before_line = fn;
	before_line_userdata = userdata;
}

int log_internal(int level, int error, const char *fmt, ...)
{
	char msg[2048];
	int saved = errno;
	va_list ap;

	if (error < 0)
		error = -error;
	if (level > max_level) {
		errno = saved;
		return -error;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (journal)
		fprintf(stderr, "<%d>%s%s%s\n", level, msg, error ? ": " : "", error ? strerror(error) : "");
	else {
		if (before_line)
			before_line(before_line_userdata);
		fprintf(stderr, "%s: %s%s%s\n", program, msg, error ? ": " : "", error ? strerror(error) : "");
	}
	errno = saved;
	return -error;
}

/* One record to the journal with its fields; a negative errno when it
 * could not be sent. */
static int send_to_journal(int level, const char *msg, const char *const *fields)
{
	struct iovec iov[LOG_STRUCT_FIELDS_MAX + 3];
	char priority[32], ident[128], *message = NULL;
	size_t n = 0;
	int r;

	if (asprintf(&message, "MESSAGE=%s", msg) < 0)
		return -ENOMEM;
	snprintf(priority, sizeof(priority), "PRIORITY=%d", level);
	snprintf(ident, sizeof(ident), "SYSLOG_IDENTIFIER=%s", program);
	iov[n++] = (struct iovec){ message, strlen(message) };
	iov[n++] = (struct iovec){ priority, strlen(priority) };
	iov[n++] = (struct iovec){ ident, strlen(ident) };
	for (size_t i = 0; fields && fields[i] && i < LOG_STRUCT_FIELDS_MAX; i++)
		iov[n++] = (struct iovec){ (void *)fields[i], strlen(fields[i]) };
	r = sd_journal_sendv(iov, (int)n);
	free(message);
	return r;
}

int log_struct_internal(int level, const char *const *fields, const char *fmt, ...)
{
	char msg[2048];
	int saved = errno;
	va_list ap;

	if (level > max_level)
		return 0;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!journal || send_to_journal(level, msg, fields) < 0)
		(void)log_internal(level, 0, "%s", msg);
	errno = saved;
	return 0;
}
