/* log.c — see log.h. One global level and program name: logging is the one
 * piece of process-wide state goodput allows itself. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *program = "goodput";
static int max_level = LOG_INFO;
static bool journal;

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
	else
		fprintf(stderr, "%s: %s%s%s\n", program, msg, error ? ": " : "", error ? strerror(error) : "");
	errno = saved;
	return -error;
}
