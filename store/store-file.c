/* store-file.c — the database file itself: opening and closing the
 * connection, the one writer's lock on the file, and the watch that the
 * file (and its WAL) are still the ones opened.
 *
 * The lock. Two writers on one database run the same trials twice and
 * take each other's servers for orphans. A lock on a path's text is
 * bypassed by any other path to the file (a symlink, a hard link, a bind
 * mount), so the writer locks the file it is about to open: its inode,
 * with an open file description lock (lock_inode_take) taken on a
 * descriptor the store keeps, before SQLite opens the file; and once SQLite
 * has, the path must still name that same file. Readers take no lock.
 *
 * The watch. A WAL removed while the store has it open (a careless
 * `rm goodput.db-*`) goes on taking commits into a file no other process
 * sees, and the next start finds none of them: everything since the last
 * checkpoint is lost, silently. store_check_files compares the inodes of
 * the database and its WAL with the ones opened (two stat calls: cheap on
 * a timer). A WAL that is gone or replaced is rescued: a checkpoint writes
 * everything it holds into the database file, a file now at its place is
 * moved aside (SQLite would apply or delete it), and the connection is
 * opened again, with a new WAL. A database file that is gone or replaced
 * is copied as it stands (VACUUM INTO beside the path) and the store is
 * lost: every later call fails with a message that says so, so nothing is
 * reported from a file that is no longer the database. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file-util.h"
#include "lock-file.h"
#include "macro.h"
#include "store-internal.h"

/* Every row this connection inserts, updates or deletes, but the load
 * points a running trial adds (many, and read by no answer about a study
 * until their trial's row changes as it ends). */
static void on_row_change(void *userdata, int op, const char *db, const char *table, sqlite3_int64 rowid)
{
	struct store *s = userdata;

	if (op == SQLITE_INSERT && strcmp(table, "load_points") == 0)
		return;
	s->epoch++;
}

/* Opens s->path as an SQLite connection with the store's settings (WAL and
 * synchronous=NORMAL for a writer). */
static int connect_db(struct store *s, struct error *err)
{
	int rc, r, flags;
	char mode[16];

	flags = (s->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
		SQLITE_OPEN_NOMUTEX;
	rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
	if (rc != SQLITE_OK)
		return store_sql_error(s, rc, s->read_only ? "opening the database read-only" : "opening the database",
				       err);
	sqlite3_extended_result_codes(s->db, 0);
	sqlite3_busy_timeout(s->db, (int)s->busy_timeout_ms);
	r = store_exec_const(s, "PRAGMA foreign_keys = ON", "enabling foreign keys", err);
	if (r < 0 || s->read_only)
		return r;
	r = store_pragma_text(s, "PRAGMA journal_mode = WAL", mode, sizeof(mode), err);
	if (r < 0)
		return r;
	if (strcasecmp(mode, "wal") != 0)
		return error_set(err, -EIO, "%s: could not switch to WAL mode (journal mode is \"%s\")", s->path, mode);
	r = store_exec_const(s, "PRAGMA synchronous = NORMAL", "setting synchronous mode", err);
	if (r < 0)
		return r;
	sqlite3_update_hook(s->db, on_row_change, s);
	return 0;
}

/* The writer's file must be whole: SQLite's quick_check (every page of
 * every b-tree read once; under a second for a database of 100 MB). A
 * damaged page would otherwise fail every request that reads it, long
 * after a goodputd that looked healthy had started on the file. */
static int check_integrity(struct store *s, struct error *err)
{
	char first[256];
	int r;

	r = store_pragma_text(s, "PRAGMA quick_check(1)", first, sizeof(first), err);
	if (r < 0 && r != -EBADMSG)
		return r;
	if (r >= 0 && strcmp(first, "ok") == 0)
		return 0;
	for (char *p = first; *p; p++) /* "*** in database main ***\nPage 4: ..." on one line */
		if (*p == '\n')
			*p = ' ';
	return error_set(err, -EBADMSG,
			 "%s: the database is damaged (SQLite's quick_check: %s); nothing will run on it. Move it "
			 "aside and start afresh, or save what it holds first: sqlite3 %s .recover | sqlite3 NEW.db",
			 s->path, r < 0 ? err->msg : first, s->path);
}

static void disconnect_db(struct store *s)
{
	for (size_t i = 0; i < _STMT_MAX; i++)
		s->stmts[i] = (sqlite3_finalize(s->stmts[i]), NULL);
	sqlite3_close_v2(s->db);
	s->db = NULL;
}

static bool same_file(const struct stat *a, const struct store_file_id *id)
{
	return id->known && a->st_dev == id->dev && a->st_ino == id->ino;
}

static void remember(struct store_file_id *id, const struct stat *st)
{
	*id = (struct store_file_id){ .known = true, .dev = st->st_dev, .ino = st->st_ino };
}

/* The WAL's path, "<path>-wal", into buf. */
static void wal_path(const struct store *s, char *buf, size_t size)
{
	snprintf(buf, size, "%s-wal", s->path);
}

static void remember_wal(struct store *s)
{
	char wal[4096];
	struct stat st;

	wal_path(s, wal, sizeof(wal));
	if (stat(wal, &st) == 0)
		remember(&s->wal_id, &st);
}

/* The writer's lock, on the file the path names now (created when new). */
static int lock_file(struct store *s, struct lock_holder *holder, struct error *err)
{
	struct lock_holder h = { 0 };
	struct stat st;
	int r;

	s->lock_fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
	if (s->lock_fd < 0)
		return error_set(err, -errno, "%s: %s", s->path, strerror(errno));
	if (fstat(s->lock_fd, &st) < 0)
		return error_set(err, -errno, "%s: %s", s->path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return error_set(err, -EINVAL, "%s: not a regular file (%s)", s->path, file_type_name(st.st_mode));
	r = lock_inode_take(s->lock_fd, &h);
	if (holder)
		*holder = h;
	if (r == -EBUSY && h.pid > 0)
		return error_set(err, r, "%s: locked by %s (pid %d), which writes to it", s->path,
				 h.comm[0] ? h.comm : "a process", (int)h.pid);
	if (r == -EBUSY)
		return error_set(err, r, "%s: locked by another process, which writes to it", s->path);
	if (r < 0)
		return error_set(err, r, "%s: locking: %s", s->path, strerror(-r));
	remember(&s->db_id, &st);
	return 0;
}

int store_open(const char *path, const struct store_open_options *opts, struct store **ret, struct error *err)
{
	struct store_open_options o = opts ? *opts : (struct store_open_options){ 0 };
	_cleanup_(store_closep) struct store *s = NULL;
	int r, version;
	struct stat st;

	if (!path || !*path)
		return error_set(err, -EINVAL, "store: no database path given");
	if (o.target_version <= 0)
		o.target_version = STORE_SCHEMA_VERSION;
	if (o.target_version > STORE_SCHEMA_VERSION)
		return error_set(err, -EINVAL, "store: schema version %d is unknown", o.target_version);
	if ((o.flags & STORE_OPEN_READ_ONLY) && (o.flags & STORE_OPEN_WRITER))
		return error_set(err, -EINVAL, "store: a reader is not the writer");
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lock_fd = -1;
	s->path = strdup(path);
	if (!s->path)
		return -ENOMEM;
	s->read_only = o.flags & STORE_OPEN_READ_ONLY;
	s->busy_timeout_ms = o.busy_timeout_ms ? o.busy_timeout_ms : 5000;
	/* SQLite opens without O_NONBLOCK: a FIFO named as the database would
	 * block the caller in open(). */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return error_set(err, -EINVAL, "%s: not a regular file (%s)", path, file_type_name(st.st_mode));
	if (o.flags & STORE_OPEN_WRITER) {
		r = lock_file(s, o.holder, err);
		if (r < 0)
			return r;
	}
	r = connect_db(s, err);
	if (r < 0)
		return r;
	if (s->db_id.known && (stat(path, &st) < 0 || !same_file(&st, &s->db_id)))
		return error_set(err, -EBUSY, "%s: the file was replaced while it was being opened", path);
	if (o.flags & STORE_OPEN_WRITER) {
		r = check_integrity(s, err);
		if (r < 0)
			return r;
	}
	r = store_schema_version(s, &version, err);
	if (r < 0)
		return r;
	if (version > STORE_SCHEMA_VERSION)
		return error_set(err, -EPROTONOSUPPORT,
				 "%s: schema version %d is newer than this goodput knows (%d): upgrade goodput", path,
				 version, STORE_SCHEMA_VERSION);
	if (s->read_only) {
		if (version < o.target_version)
			return error_set(err, version == 0 ? -ENOENT : -EPROTO,
					 version == 0
						 ? "%s: not a goodput database (schema version %d)"
						 : "%s: schema version %d is older than %d: open it read-write once "
						   "to migrate it",
					 path, version, o.target_version);
		*ret = TAKE_PTR(s);
		return 0;
	}
	r = store_migrate(s, o.target_version, err);
	if (r < 0)
		return r;
	if (!s->db_id.known && stat(path, &st) == 0)
		remember(&s->db_id, &st);
	remember_wal(s);
	*ret = TAKE_PTR(s);
	return 0;
}

uint64_t store_epoch(const struct store *s)
{
	return s->epoch;
}

struct store *store_close(struct store *s)
{
	if (!s)
		return NULL;
	if (s->db)
		disconnect_db(s);
	safe_close(s->lock_fd);
	free(s->lost);
	free(s->path);
	free(s);
	return NULL;
}

/* ---- the watch ---- */

/* The database file is not the one opened: what this connection still
 * sees is copied beside the path, and every later call fails. */
static int lose(struct store *s, const char *what, char *msg, size_t size)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	char copy[4096], stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	int rc;

	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", gmtime_r(&now, &tm));
	snprintf(copy, sizeof(copy), "%s.rescued-%s", s->path, stamp);
	rc = sqlite3_prepare_v2(s->db, "VACUUM INTO ?1", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(st, 1, copy, -1, SQLITE_TRANSIENT);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		snprintf(msg, size,
			 "%s %s while it was open: everything it held is saved as %s; nothing more is read from or "
			 "written to it (move the copy back and start again)",
			 s->path, what, copy);
	else
		snprintf(msg, size,
			 "%s %s while it was open, and it could not be saved (%s: %s); nothing more is read from "
			 "or written to it",
			 s->path, what, copy, sqlite3_errmsg(s->db));
	free(s->lost);
	s->lost = strdup(msg);
	if (!s->lost)
		s->lost = strdup("the database file is no longer the one opened");
	return STORE_FILES_LOST;
}

/* The WAL is not the one opened: its commits go into the database file,
 * and a new connection begins a new WAL. */
static int restore_wal(struct store *s, const char *what, bool replaced, char *msg, size_t size, struct error *err)
{
	char wal[4096], aside[4200], result[64] = "";
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc, r, busy = 1, frames = -1, done = -2;

	rc = sqlite3_prepare_v2(s->db, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		busy = sqlite3_column_int(st, 0);
		frames = sqlite3_column_int(st, 1);
		done = sqlite3_column_int(st, 2);
	}
	st = (sqlite3_finalize(st), NULL);
	if (busy || frames != done) {
		snprintf(result, sizeof(result), "its WAL %s and could not be written back", what);
		return lose(s, result, msg, size);
	}
	wal_path(s, wal, sizeof(wal));
	snprintf(aside, sizeof(aside), "%s.foreign-%lld", wal, (long long)time(NULL));
	if (replaced && rename(wal, aside) < 0)
		aside[0] = 0;
	disconnect_db(s);
	r = connect_db(s, err);
	if (r < 0) {
		snprintf(result, sizeof(result), "could not be opened again after its WAL %s", what);
		return lose(s, result, msg, size);
	}
	remember_wal(s);
	snprintf(msg, size,
		 "%s-wal %s while the database was open: what it held was written into %s, nothing was lost%s%s",
		 s->path, what, s->path, replaced && aside[0] ? "; the file found in its place is now " : "",
		 replaced && aside[0] ? aside : "");
	return STORE_FILES_WAL_RESTORED;
}

int store_check_files(struct store *s, char *msg, size_t size, struct error *err)
{
	char wal[4096];
	struct stat st;

	msg[0] = 0;
	if (s->lost) {
		snprintf(msg, size, "%s", s->lost);
		return STORE_FILES_LOST;
	}
	if (s->read_only || !s->db_id.known)
		return STORE_FILES_OK;
	if (stat(s->path, &st) < 0)
		return lose(s, "was removed", msg, size);
	if (!same_file(&st, &s->db_id))
		return lose(s, "was replaced by another file", msg, size);
	wal_path(s, wal, sizeof(wal));
	if (stat(wal, &st) < 0) {
		if (!s->wal_id.known)
			return STORE_FILES_OK;
		return restore_wal(s, "was removed", false, msg, size, err);
	}
	if (!s->wal_id.known) {
		remember(&s->wal_id, &st);
		return STORE_FILES_OK;
	}
	if (!same_file(&st, &s->wal_id))
		return restore_wal(s, "was replaced by another file", true, msg, size, err);
	return STORE_FILES_OK;
}
