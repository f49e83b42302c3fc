/* time-util.h — microsecond clocks. All goodput times are uint64_t µs named
 * *_usec: CLOCK_MONOTONIC for measurement and pacing, CLOCK_REALTIME only for
 * timestamps shown to people or stored. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define USEC_PER_SEC  UINT64_C(1000000)
#define USEC_PER_MSEC UINT64_C(1000)
#define NSEC_PER_USEC UINT64_C(1000)
#define USEC_INFINITY UINT64_MAX

uint64_t now_usec(clockid_t clock);
static inline uint64_t mono_usec(void)
{
	return now_usec(CLOCK_MONOTONIC);
}
static inline uint64_t real_usec(void)
{
	return now_usec(CLOCK_REALTIME);
}
static inline double usec_to_ms(uint64_t usec)
{
	return (double)usec / 1000.0;
}
static inline double usec_to_sec(uint64_t usec)
{
	return (double)usec / 1e6;
}
/* Seconds (finite, >= 0) to µs, saturating at USEC_INFINITY - 1. */
uint64_t sec_to_usec(double sec);

/* "2026-11-30T04:27:40Z" for a realtime µs value; returns buf. */
char *format_iso8601(char *buf, size_t size, uint64_t realtime_usec);
/* "3.2s", "450ms", "12m05s", "2h03m" — a short human duration; returns buf. */
char *format_duration(char *buf, size_t size, uint64_t usec);
