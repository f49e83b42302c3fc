/* sqlite-util.h — cleanup helpers for SQLite's handles, for _cleanup_()
 * (macro.h): common does not link SQLite, the store does. Each accepts NULL. */
#pragma once

#include <sqlite3.h>

#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3 *, sqlite3_close_v2)
DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt *, sqlite3_finalize)
