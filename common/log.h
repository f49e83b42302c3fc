/* log.h — logging for goodput's programs.
 *
 * Levels are syslog's. Lines go to stderr as "program: message"; when stderr
 * is connected to the journal (JOURNAL_STREAM names it) each line starts with
 * a "<N>" priority prefix instead, so journald records the level. A record
 * with fields of its own (log_struct: GOODPUT_STUDY=..., MESSAGE_ID=...) is
 * sent to the journal natively there, so journalctl can select by them, and
 * is the same plain line on stderr anywhere else. Only
 * programs log at info level and above; libraries return errors (error.h) and
 * log at debug level at most. */
#pragma once

#include <stdbool.h>
#include <syslog.h>

void log_set_program(const char *name);
void log_set_max_level(int level);
int log_get_max_level(void);
/* fn(userdata) runs before each line goes to stderr (not to the journal):
 * a program that keeps a status line on a terminal clears it there, so a
 * log line never lands at its end. NULL: none. */
void log_set_before_line(void (*fn)(void *userdata), void *userdata);
/* Re-reads JOURNAL_STREAM (called once by log_set_program). */
void log_detect_journal(void);
bool log_to_journal(void);

/* Writes one line when level <= max level. error is an errno (either sign, 0
 * for none): when non-zero its text is appended (": No such file ...").
 * Returns -|error| so that log_*_errno can be returned directly. */
int log_internal(int level, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* As log_internal, with journal fields: "KEY=value" strings (NULL-terminated
 * array, at most LOG_STRUCT_FIELDS_MAX; keys as the journal wants them,
 * [A-Z0-9_]). Under the journal the record goes with sd_journal_send
 * (MESSAGE=, PRIORITY=, SYSLOG_IDENTIFIER= and the fields); elsewhere, or
 * when that fails, the fields are left out of the line. */
#define LOG_STRUCT_FIELDS_MAX 16
int log_struct_internal(int level, const char *const *fields, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define log_struct(level, fields, ...) ((void)log_struct_internal((level), (fields), __VA_ARGS__))

#define log_full_errno(level, error, ...) log_internal((level), (error), __VA_ARGS__)
#define log_full(level, ...)              ((void)log_internal((level), 0, __VA_ARGS__))

#define log_debug(...)   log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)    log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...)  log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...)   log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(r, ...)   log_full_errno(LOG_DEBUG, (r), __VA_ARGS__)
#define log_info_errno(r, ...)    log_full_errno(LOG_INFO, (r), __VA_ARGS__)
#define log_warning_errno(r, ...) log_full_errno(LOG_WARNING, (r), __VA_ARGS__)
#define log_error_errno(r, ...)   log_full_errno(LOG_ERR, (r), __VA_ARGS__)
