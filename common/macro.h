/* macro.h — the few macros every goodput program uses: scope-bound cleanup
 * (_cleanup_ + TAKE_PTR/TAKE_FD), array sizes, and cleanup helpers for the
 * handles of the libraries common links (cJSON, sd-event). Each helper
 * accepts NULL, so a cleanup variable may be left unset on any path. The
 * rooms that link curl, SQLite and NLopt keep those handles' helpers
 * (probes/curl-util.h, store/sqlite-util.h, optimizer/opt-internal.h). */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _noreturn_     __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x)    __builtin_expect(!!(x), 1)
#define _unlikely_(x)  __builtin_expect(!!(x), 0)

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* MIN, MAX and CLAMP evaluate each argument once: an argument may be a
 * call that costs (a percentile over every sample of a load point) or one
 * with effects. The names of the temporaries are made unique per use
 * (__COUNTER__), so that nested uses shadow nothing. In a constant
 * expression (an array size, a static initializer) use CONST_MAX. */
#define UNIQ_(x, n)  UNIQ__(x, n)
#define UNIQ__(x, n) x##_uniq_##n
#define MIN(a, b)    MIN_(a, b, __COUNTER__)
#define MIN_(a, b, n)                                                                                                  \
	__extension__({                                                                                                \
		__typeof__(a) UNIQ_(a_, n) = (a);                                                                      \
		__typeof__(b) UNIQ_(b_, n) = (b);                                                                      \
		UNIQ_(a_, n) < UNIQ_(b_, n) ? UNIQ_(a_, n) : UNIQ_(b_, n);                                             \
	})
#define MAX(a, b) MAX_(a, b, __COUNTER__)
#define MAX_(a, b, n)                                                                                                  \
	__extension__({                                                                                                \
		__typeof__(a) UNIQ_(a_, n) = (a);                                                                      \
		__typeof__(b) UNIQ_(b_, n) = (b);                                                                      \
		UNIQ_(a_, n) > UNIQ_(b_, n) ? UNIQ_(a_, n) : UNIQ_(b_, n);                                             \
	})
#define CLAMP(x, lo, hi) CLAMP_(x, lo, hi, __COUNTER__)
#define CLAMP_(x, lo, hi, n)                                                                                           \
	__extension__({                                                                                                \
		__typeof__(x) UNIQ_(x_, n) = (x);                                                                      \
		__typeof__(lo) UNIQ_(l_, n) = (lo);                                                                    \
		__typeof__(hi) UNIQ_(h_, n) = (hi);                                                                    \
		(UNIQ_(x_, n) < UNIQ_(l_, n))   ? UNIQ_(l_, n)                                                         \
		: (UNIQ_(x_, n) > UNIQ_(h_, n)) ? UNIQ_(h_, n)                                                         \
						: UNIQ_(x_, n);                                                        \
	})
#define CONST_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hand a pointer out of a _cleanup_ scope: returns the value, leaves NULL. */
#define TAKE_PTR(p)                                                                                                    \
	__extension__({                                                                                                \
		__typeof__(p) *_pp_ = &(p);                                                                            \
		__typeof__(p) _p_ = *_pp_;                                                                             \
		*_pp_ = NULL;                                                                                          \
		_p_;                                                                                                   \
	})

#define TAKE_FD(fd)                                                                                                    \
	__extension__({                                                                                                \
		int *_pfd_ = &(fd);                                                                                    \
		int _fd_ = *_pfd_;                                                                                     \
		*_pfd_ = -1;                                                                                           \
		_fd_;                                                                                                  \
	})

/* Defines static inline void <func>p(type *p) that calls func(*p) when set. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                                        \
	static inline void func##p(type *p)                                                                            \
	{                                                                                                              \
		if (*p)                                                                                                \
			func(*p);                                                                                      \
	}

static inline void freep(void *p)
{
	free(*(void **)p);
}

/* Closes a file descriptor, keeping errno; accepts negative values. */
static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return -1;
}

static inline void closep(int *fd)
{
	safe_close(*fd);
}

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete)
/* sd-event.h already provides sd_event_unrefp and sd_event_source_unrefp. */

/* cJSON_free takes void *, so the typed wrapper keeps freep-style use simple. */
static inline void cjson_freep(char **p)
{
	if (*p)
		cJSON_free(*p);
}
