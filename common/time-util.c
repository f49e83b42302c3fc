/* time-util.c — see time-util.h. */
#include "time-util.h"

#include <math.h>
#include <stdio.h>

uint64_t now_usec(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / NSEC_PER_USEC;
}

uint64_t sec_to_usec(double sec)
{
	if (!(sec > 0)) /* also NaN */
		return 0;
	if (sec >= (double)(USEC_INFINITY - 1) / 1e6)
		return USEC_INFINITY - 1;
	return (uint64_t)llround(sec * 1e6);
}

char *format_iso8601(char *buf, size_t size, uint64_t realtime_usec)
{
	time_t t = (time_t)(realtime_usec / USEC_PER_SEC);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

char *format_duration(char *buf, size_t size, uint64_t usec)
{
	uint64_t s = usec / USEC_PER_SEC;

	if (usec < USEC_PER_SEC)
		snprintf(buf, size, "%.0fms", usec_to_ms(usec));
	else if (s < 60)
		snprintf(buf, size, "%.1fs", usec_to_sec(usec));
	else if (s < 3600)
		snprintf(buf, size, "%llum%02llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
	else
		snprintf(buf, size, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	return buf;
}
