/* log.h: errno text, return values, journal priority prefixes;
 * time-util.h: monotonic clock and formatting; error.h: prefixes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "tests.h"
#include "time-util.h"

/* Runs fn with stderr redirected to a temporary file; returns its contents. */
static char *capture_stderr(void (*fn)(void))
{
	static char buf[4096];
	char path[] = "/tmp/goodput-test-log-XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	ssize_t n;

	CHECK(fd >= 0 && saved >= 0);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	fn();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	CHECK(n >= 0);
	buf[n] = 0;
	close(fd);
	unlink(path);
	return buf;
}

static void emit(void)
{
	CHECK_INT_EQ(log_error_errno(-ENOENT, "Failed to open %s", "x.db"), -ENOENT);
	CHECK_INT_EQ(log_warning_errno(EACCES, "positive errno"), -EACCES);
	log_debug("hidden at info level");
	log_info("plain %d", 7);
}

/* A record with journal fields, outside the journal: the plain line. */
static void emit_struct(void)
{
	static const char *const fields[] = { "GOODPUT_STUDY=s1", "MESSAGE_ID=0123", NULL };

	log_struct(LOG_INFO, fields, "study %s: done", "s1");
	log_struct(LOG_DEBUG, fields, "hidden %d", 1);
}

static void emit_journal(void)
{
	struct stat st;
	char v[64];

	CHECK(fstat(STDERR_FILENO, &st) == 0);
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", v, 1);
	log_detect_journal();
	CHECK(log_to_journal());
	log_warning("to the journal");
	unsetenv("JOURNAL_STREAM");
	log_detect_journal();
}

static void test_log(void)
{
	char *out;

	log_set_program("/usr/bin/test-log");
	out = capture_stderr(emit);
	CHECK_STR_CONTAINS(out, "test-log: Failed to open x.db: No such file or directory\n");
	CHECK_STR_CONTAINS(out, "test-log: positive errno: Permission denied\n");
	CHECK(!strstr(out, "hidden"));
	CHECK_STR_CONTAINS(out, "test-log: plain 7\n");
	out = capture_stderr(emit_struct);
	CHECK_STR_EQ(out, "test-log: study s1: done\n");
	out = capture_stderr(emit_journal);
	CHECK_STR_EQ(out, "<4>to the journal\n");
	CHECK(!log_to_journal());
}

static void test_time(void)
{
	uint64_t a = mono_usec(), b = mono_usec();
	char buf[64];

	CHECK(b >= a);
	CHECK(real_usec() > UINT64_C(1600000000) * USEC_PER_SEC);
	CHECK_INT_EQ(sec_to_usec(1.5), 1500000);
	CHECK_INT_EQ(sec_to_usec(-1), 0);
	CHECK_INT_EQ(sec_to_usec(NAN), 0);
	CHECK_STR_EQ(format_iso8601(buf, sizeof(buf), 0), "1970-01-01T00:00:00Z");
	CHECK_STR_EQ(format_duration(buf, sizeof(buf), 450 * USEC_PER_MSEC), "450ms");
	CHECK_STR_EQ(format_duration(buf, sizeof(buf), 3200 * USEC_PER_MSEC), "3.2s");
	CHECK_STR_EQ(format_duration(buf, sizeof(buf), 725 * USEC_PER_SEC), "12m05s");
	CHECK_STR_EQ(format_duration(buf, sizeof(buf), 7380 * USEC_PER_SEC), "2h03m");
}

static void test_error(void)
{
	struct error err = { 0 };

	CHECK_STR_EQ(error_str(&err, -ENOENT), "No such file or directory");
	CHECK_INT_EQ(error_set(&err, EINVAL, "bad %s", "x"), -EINVAL);
	CHECK_INT_EQ(err.code, -EINVAL);
	CHECK_INT_EQ(error_prefix(&err, -EINVAL, "study %s", "s1"), -EINVAL);
	CHECK_STR_EQ(error_str(&err, -EINVAL), "study s1: bad x");
	CHECK_INT_EQ(error_set(NULL, -EIO, "ignored"), -EIO);
}

int main(void)
{
	test_log();
	test_time();
	test_error();
	return 0;
}
