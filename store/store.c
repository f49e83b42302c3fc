/* store.c — goodput's SQLite database: the schema and its migrations, the
 * statement cache, transactions and the translation of SQLite's result
 * codes into -errno plus a message. Opening the file (WAL mode, the
 * writer's lock) and watching it are store-file.c's.
 *
 * The schema is an ordered list of migrations; migration N brings a file from
 * user_version N−1 to N inside one transaction, so a file is always at a whole
 * version, and a daemon and a tuner that open the same old file race safely
 * (the second finds the work done once it holds the write lock). Statements
 * are constants prepared once per connection (SQLITE_PREPARE_PERSISTENT) and
 * every value is bound; no SQL is ever built from a string.
 *
 * Durability: journal_mode=WAL with synchronous=NORMAL. A commit is in the
 * WAL (the kernel's page cache) when the call returns, so a kill -9 of the
 * process right after loses nothing; the WAL is synced to the disk at each
 * checkpoint (every ~1000 pages), so a power loss or kernel crash may roll
 * back the commits since the last one — never corrupting the file. FULL
 * synced the WAL on every commit: an fsync of milliseconds on the loop of
 * goodputd, in front of every answer that waited behind it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "file-util.h"
#include "macro.h"
#include "store-internal.h"
#include "utf8.h"

/* ---- schema ---- */

struct migration {
	const char *const *sql; /* NULL-terminated; the last one sets user_version */
};

static const char *const migration_1[] = {
	"CREATE TABLE studies ("
	" id INTEGER PRIMARY KEY,"
	" name TEXT NOT NULL UNIQUE,"
	" spec TEXT NOT NULL,"
	" state TEXT NOT NULL,"
	" message TEXT,"
	" created_usec INTEGER NOT NULL,"
	" started_usec INTEGER,"
	" finished_usec INTEGER,"
	" best_trial_id INTEGER REFERENCES trials(id) ON DELETE SET NULL,"
	" seed INTEGER NOT NULL,"
	" algorithm TEXT NOT NULL,"
	" nlopt_version TEXT NOT NULL)",
	"CREATE TABLE trials ("
	" id INTEGER PRIMARY KEY,"
	" study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,"
	" seq INTEGER NOT NULL,"
	" kind TEXT NOT NULL,"
	" knobs TEXT NOT NULL,"
	" canonical_key TEXT NOT NULL,"
	" state TEXT NOT NULL,"
	" failure_class TEXT,"
	" failure_message TEXT,"
	" deploy_seconds REAL,"
	" max_rate REAL,"
	" max_goodput REAL,"
	" concurrency REAL,"
	" cost_per_mtok REAL,"
	" started_usec INTEGER,"
	" finished_usec INTEGER,"
	" log_path TEXT,"
	" UNIQUE (study_id, seq),"
	" UNIQUE (study_id, canonical_key, kind))",
	"CREATE TABLE load_points ("
	" id INTEGER PRIMARY KEY,"
	" trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
	" seq INTEGER NOT NULL,"
	" phase TEXT NOT NULL,"
	" request_rate REAL,"
	" max_concurrency INTEGER,"
	" attainment REAL,"
	" sla_met INTEGER NOT NULL,"
	" completed INTEGER,"
	" failed INTEGER,"
	" mean_ttft_ms REAL, p50_ttft_ms REAL, p90_ttft_ms REAL, p99_ttft_ms REAL,"
	" mean_tpot_ms REAL, p50_tpot_ms REAL, p90_tpot_ms REAL, p99_tpot_ms REAL,"
	" p99_itl_ms REAL, p99_e2el_ms REAL,"
	" request_throughput REAL, output_throughput REAL, total_token_throughput REAL,"
	" good_output_throughput REAL, request_goodput REAL, mean_concurrency REAL,"
	" kv_usage_peak REAL, running_peak REAL, waiting_peak REAL, preemptions REAL,"
	" result TEXT NOT NULL,"
	" created_usec INTEGER NOT NULL,"
	" UNIQUE (trial_id, seq))",
	"PRAGMA user_version = 1",
	NULL,
};

/* 2: what the daemon needs to find studies and orphaned servers. */
static const char *const migration_2[] = {
	"ALTER TABLE studies ADD COLUMN engine TEXT",
	"ALTER TABLE studies ADD COLUMN model TEXT",
	"ALTER TABLE studies ADD COLUMN label TEXT",
	"CREATE INDEX studies_model_engine ON studies (model, engine)",
	"ALTER TABLE trials ADD COLUMN server_pgid INTEGER",
	"ALTER TABLE trials ADD COLUMN server_unit TEXT",
	"ALTER TABLE trials ADD COLUMN host_json TEXT",
	"PRAGMA user_version = 2",
	NULL,
};

/* 3: GPU telemetry of each load point (NULL: NVML unavailable). */
static const char *const migration_3[] = {
	"ALTER TABLE load_points ADD COLUMN gpu_util_mean REAL",
	"ALTER TABLE load_points ADD COLUMN gpu_util_peak REAL",
	"ALTER TABLE load_points ADD COLUMN gpu_mem_mean_mib REAL",
	"ALTER TABLE load_points ADD COLUMN gpu_mem_peak_mib REAL",
	"PRAGMA user_version = 3",
	NULL,
};

/* 4: the digital twin: what it predicted for each trial, and calibrations
 * kept across studies (keyed by engine, engine version, GPU, driver, model). */
static const char *const migration_4[] = {
	"ALTER TABLE trials ADD COLUMN predicted_cost REAL",
	"CREATE TABLE twin_calibrations ("
	" key TEXT PRIMARY KEY,"
	" engine TEXT, engine_version TEXT, gpu TEXT, driver TEXT, model TEXT,"
	" calibration_json TEXT NOT NULL,"
	" fit_error REAL,"
	" cost_error REAL,"
	" study_id INTEGER,"
	" updated_usec INTEGER)",
	"PRAGMA user_version = 4",
	NULL,
};

/* 5: trials side by side: the GPUs each trial ran on ("0,1"). */
static const char *const migration_5[] = {
	"ALTER TABLE trials ADD COLUMN gpus TEXT",
	"PRAGMA user_version = 5",
	NULL,
};

/* 6: views for people who read the file with sqlite3 (-csv, -json): the
 * trials with their study's name, the canonical knobs as columns, times in
 * ISO 8601 and the engine version; the load points with their trial's. A
 * row whose JSON is damaged shows NULLs there instead of failing the query. */
#define JSON_COL(doc, path) "json_extract(CASE WHEN json_valid(" doc ") THEN " doc " END, '" path "')"
#define ISO_TIME(usec)      "strftime('%Y-%m-%dT%H:%M:%fZ', " usec " / 1e6, 'unixepoch')"
static const char *const migration_6[] = {
	"CREATE VIEW trial_results AS SELECT"
	" s.name AS study, t.id AS trial_id, t.seq, t.kind, t.state, t.failure_class AS failure,"
	" " JSON_COL(
		"t.knobs",
		"$.max_num_seqs") " AS max_num_seqs,"
				  " " JSON_COL(
					  "t.knobs",
					  "$.max_num_batched_tokens") " AS max_num_batched_tokens,"
								      " " JSON_COL(
									      "t.knobs",
									      "$.quantization") " AS quantization,"
												" " JSON_COL(
													"t.knobs",
													"$.tensor_"
													"parallel") " A"
														    "S "
														    "te"
														    "ns"
														    "or"
														    "_p"
														    "ar"
														    "al"
														    "le"
														    "l,"
														    " t"
														    ".m"
														    "ax"
														    "_r"
														    "at"
														    "e,"
														    " t"
														    ".m"
														    "ax"
														    "_g"
														    "oo"
														    "dp"
														    "ut"
														    ", "
														    "t."
														    "co"
														    "nc"
														    "ur"
														    "re"
														    "nc"
														    "y,"
														    " t"
														    ".c"
														    "os"
														    "t_"
														    "pe"
														    "r_"
														    "mt"
														    "ok"
														    ","
														    " t"
														    ".p"
														    "re"
														    "di"
														    "ct"
														    "ed"
														    "_c"
														    "os"
														    "t "
														    "AS"
														    " p"
														    "re"
														    "di"
														    "ct"
														    "ed"
														    "_c"
														    "os"
														    "t_"
														    "pe"
														    "r_"
														    "mt"
														    "ok"
														    ", "
														    "t."
														    "de"
														    "pl"
														    "oy"
														    "_s"
														    "ec"
														    "on"
														    "ds"
														    ","
														    " " ISO_TIME("t.started_usec") " AS started, " ISO_TIME(
															    "t.finished_usec") " AS finished,"
																	       " " JSON_COL(
																		       "t.host_json",
																		       "$.engine_version") " AS engine_version, t.gpus,"
																					   " t.id IS s.best_trial_id AS chosen, t.knobs AS knobs, t.failure_message"
																					   " FROM trials t JOIN studies s ON s.id = t.study_id",
	"CREATE VIEW load_points_v AS SELECT"
	" tr.study, tr.seq AS trial_seq, tr.kind AS trial_kind, tr.state AS trial_state,"
	" tr.max_num_seqs, tr.max_num_batched_tokens, tr.quantization, tr.tensor_parallel,"
	" lp.seq, lp.phase, lp.request_rate, lp.max_concurrency, lp.attainment, lp.sla_met,"
	" lp.completed, lp.failed,"
	" lp.mean_ttft_ms, lp.p50_ttft_ms, lp.p90_ttft_ms, lp.p99_ttft_ms,"
	" lp.mean_tpot_ms, lp.p50_tpot_ms, lp.p90_tpot_ms, lp.p99_tpot_ms, lp.p99_itl_ms, lp.p99_e2el_ms,"
	" lp.request_throughput, lp.output_throughput, lp.total_token_throughput,"
	" lp.good_output_throughput, lp.request_goodput, lp.mean_concurrency,"
	" lp.kv_usage_peak, lp.running_peak, lp.waiting_peak, lp.preemptions,"
	" lp.gpu_util_mean, lp.gpu_util_peak, lp.gpu_mem_mean_mib, lp.gpu_mem_peak_mib,"
	" " ISO_TIME("lp.created_usec") " AS created"
					" FROM load_points lp JOIN trial_results tr ON tr.trial_id = lp.trial_id",
	"PRAGMA user_version = 6",
	NULL,
};
#undef JSON_COL
#undef ISO_TIME

/* 7: the traffic a watched endpoint served, hour by hour (goodputd's watch):
 * its shape as a workload block, the figures people plot, and the drift
 * from the study it is compared with. */
static const char *const migration_7[] = {
	"CREATE TABLE traffic_shapes ("
	" id INTEGER PRIMARY KEY,"
	" watch TEXT NOT NULL,"
	" study TEXT,"
	" hour_usec INTEGER NOT NULL,"
	" seconds REAL, requests REAL, arrivals REAL, mean_rate REAL, peak_rate REAL, burstiness REAL,"
	" input_mean REAL, output_mean REAL, prefix_hit_rate REAL,"
	" drift REAL, rate_change REAL, flagged INTEGER NOT NULL DEFAULT 0,"
	" shape TEXT,"
	" updated_usec INTEGER NOT NULL,"
	" UNIQUE (watch, hour_usec))",
	"CREATE INDEX traffic_shapes_study ON traffic_shapes (study, hour_usec)",
	"PRAGMA user_version = 7",
	NULL,
};

/* 8: why a server did not start (the engine's out-of-memory cause and the
 * max_model_len it said would fit), the memory pre-flight's estimates, and
 * the search phases of widened ranges. */
static const char *const migration_8[] = {
	"ALTER TABLE trials ADD COLUMN oom_cause TEXT",
	"ALTER TABLE trials ADD COLUMN suggested_max_model_len INTEGER",
	"ALTER TABLE studies ADD COLUMN preflight_json TEXT",
	"ALTER TABLE studies ADD COLUMN phases_json TEXT",
	"PRAGMA user_version = 8",
	NULL,
};

/* 9: the exact command each trial's server was launched with (JSON
 * {"argv": [...], "env": [...]}), so that a report never rebuilds it from
 * whatever profile it finds later. */
static const char *const migration_9[] = {
	"ALTER TABLE trials ADD COLUMN launch TEXT",
	"PRAGMA user_version = 9",
	NULL,
};

/* 10: trials as jobs on a cluster: the job that ran it, the node, how long
 * it waited for its resources, how often the cluster took it away. */
static const char *const migration_10[] = {
	"ALTER TABLE trials ADD COLUMN job_id INTEGER",
	"ALTER TABLE trials ADD COLUMN job_node TEXT",
	"ALTER TABLE trials ADD COLUMN pending_seconds REAL",
	"ALTER TABLE trials ADD COLUMN job_lost INTEGER NOT NULL DEFAULT 0",
	"PRAGMA user_version = 10",
	NULL,
};

/* 11: the identity of a trial's server's process group leader (boot id and
 * start time), recorded with its pgid before it runs: a pid the kernel gave
 * to another program since is never ended as an orphan. */
static const char *const migration_11[] = {
	"ALTER TABLE trials ADD COLUMN server_identity TEXT",
	"PRAGMA user_version = 11",
	NULL,
};

/* 12: the servers of a trial of several (a disaggregated configuration's
 * workers and router), each recorded by role before it runs. */
static const char *const migration_12[] = {
	"CREATE TABLE trial_servers ("
	" trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,"
	" role TEXT NOT NULL,"
	" pgid INTEGER,"
	" identity TEXT,"
	" unit TEXT,"
	" PRIMARY KEY (trial_id, role))",
	"PRAGMA user_version = 12",
	NULL,
};

static const struct migration migrations[] = {
	{ migration_1 }, { migration_2 }, { migration_3 }, { migration_4 },  { migration_5 },  { migration_6 },
	{ migration_7 }, { migration_8 }, { migration_9 }, { migration_10 }, { migration_11 }, { migration_12 },
};

_Static_assert(ELEMENTSOF(migrations) == STORE_SCHEMA_VERSION, "one migration per schema version");

/* ---- statements ---- */

/* Every statement: its SQL; or for a SELECT of a row, what follows the
 * column list (made from the row's table); or for an INSERT of a whole row,
 * the table it goes into. */
struct stmt_def {
	const struct store_row *row;
	const char *sql;
	bool insert;
};

static const struct stmt_def stmt_defs[_STMT_MAX] = {
	[STMT_STUDY_INSERT] = { NULL,
				"INSERT INTO studies (name, spec, engine, model, label, state, created_usec, seed,"
				" algorithm, nlopt_version) VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7, ?8, ?9)" },
	[STMT_STUDY_GET] = { &store_study_row, "FROM studies WHERE id = ?1" },
	[STMT_STUDY_GET_BY_NAME] = { &store_study_row, "FROM studies WHERE name = ?1" },
	[STMT_STUDY_LIST] = { &store_study_row, "FROM studies ORDER BY id" },
	[STMT_STUDY_SET_STATE] = { NULL, "UPDATE studies SET state = ?2, message = ?3,"
					 " started_usec = CASE WHEN ?2 = 'running' AND started_usec IS NULL THEN ?4"
					 " ELSE started_usec END,"
					 " finished_usec = CASE WHEN ?2 IN ('done', 'no_feasible_config', 'failed', "
					 "'cancelled') THEN ?4"
					 " ELSE NULL END WHERE id = ?1" },
	[STMT_STUDY_SET_PREFLIGHT] = { NULL, "UPDATE studies SET preflight_json = ?2 WHERE id = ?1" },
	[STMT_STUDY_SET_PHASES] = { NULL, "UPDATE studies SET phases_json = ?2 WHERE id = ?1" },
	[STMT_STUDY_SET_ALGORITHM] = { NULL, "UPDATE studies SET algorithm = ?2 WHERE id = ?1" },
	[STMT_STUDY_SET_BEST] = { NULL, "UPDATE studies SET best_trial_id = ?2 WHERE id = ?1"
					" AND EXISTS (SELECT 1 FROM trials WHERE id = ?2 AND study_id = ?1)" },
	[STMT_TRIAL_NEXT_SEQ] = { NULL, "SELECT COALESCE(MAX(seq), 0) + 1 FROM trials WHERE study_id = ?1" },
	[STMT_TRIAL_INSERT] = { NULL, "INSERT INTO trials (study_id, seq, kind, knobs, canonical_key, state)"
				      " VALUES (?1, ?2, ?3, ?4, ?5, 'pending')"
				      " ON CONFLICT (study_id, canonical_key, kind) DO NOTHING" },
	[STMT_TRIAL_GET] = { &store_trial_row, "FROM trials WHERE id = ?1" },
	[STMT_TRIAL_FIND] = { &store_trial_row,
			      "FROM trials WHERE study_id = ?1 AND kind = ?2 AND canonical_key = ?3" },
	[STMT_TRIAL_SET_STATE] = { NULL, "UPDATE trials SET state = ?2 WHERE id = ?1" },
	[STMT_TRIAL_SET_STARTED] = { NULL, "UPDATE trials SET started_usec = ?2, finished_usec = NULL WHERE id = ?1" },
	[STMT_TRIAL_CLEAR_OUTCOME] = { NULL, "UPDATE trials SET failure_class = NULL, failure_message = NULL,"
					     " deploy_seconds = NULL, max_rate = NULL, max_goodput = NULL,"
					     " concurrency = NULL, cost_per_mtok = NULL, job_node = NULL,"
					     " pending_seconds = NULL WHERE id = ?1" },
	[STMT_TRIAL_SET_SERVER] = { NULL, "UPDATE trials SET server_pgid = ?2, server_unit = ?3,"
					  " log_path = COALESCE(?4, log_path), server_identity = ?5 WHERE id = ?1" },
	[STMT_TRIAL_ADD_SERVER] = { NULL, "INSERT OR REPLACE INTO trial_servers (trial_id, role, pgid, identity, unit)"
					  " VALUES (?1, ?2, ?3, ?4, ?5)" },
	[STMT_TRIAL_CLEAR_SERVERS] = { NULL, "DELETE FROM trial_servers WHERE trial_id = ?1" },
	[STMT_STUDY_ROLE_SERVERS] = { &store_role_server_row,
				      "FROM trial_servers WHERE trial_id IN (SELECT id FROM trials WHERE study_id = ?1)"
				      " ORDER BY trial_id, role" },
	[STMT_TRIAL_SET_HOST] = { NULL, "UPDATE trials SET host_json = ?2 WHERE id = ?1" },
	[STMT_TRIAL_SET_PREDICTED] = { NULL, "UPDATE trials SET predicted_cost = ?2 WHERE id = ?1" },
	[STMT_TRIAL_SET_GPUS] = { NULL, "UPDATE trials SET gpus = ?2 WHERE id = ?1" },
	[STMT_TRIAL_SET_LAUNCH] = { NULL, "UPDATE trials SET launch = ?2 WHERE id = ?1" },
	[STMT_TRIAL_SET_TIMES] = { NULL, "UPDATE trials SET started_usec = ?2, finished_usec = ?3 WHERE id = ?1" },
	[STMT_TRIAL_SET_JOB] = { NULL,
				 "UPDATE trials SET job_id = ?2, log_path = COALESCE(?3, log_path) WHERE id = ?1" },
	[STMT_TRIAL_SET_JOB_START] = { NULL, "UPDATE trials SET job_node = ?2, pending_seconds = ?3,"
					     " gpus = COALESCE(?4, gpus) WHERE id = ?1" },
	[STMT_TRIAL_JOB_LOST] = { NULL, "UPDATE trials SET job_lost = job_lost + 1 WHERE id = ?1" },
	[STMT_TWIN_CAL_UPSERT] = { NULL,
				   "INSERT INTO twin_calibrations (key, engine, engine_version, gpu, driver, model,"
				   " calibration_json, fit_error, cost_error, study_id, updated_usec)"
				   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
				   " ON CONFLICT (key) DO UPDATE SET engine = ?2, engine_version = ?3, gpu = ?4,"
				   " driver = ?5, model = ?6, calibration_json = ?7, fit_error = ?8, cost_error = ?9,"
				   " study_id = ?10, updated_usec = ?11" },
	[STMT_TWIN_CAL_GET] = { &store_twin_calibration_row, "FROM twin_calibrations WHERE key = ?1" },
	[STMT_TRIAL_FINISH] = { NULL, "UPDATE trials SET state = ?2, failure_class = ?3, failure_message = ?4,"
				      " deploy_seconds = ?5, max_rate = ?6, max_goodput = ?7, concurrency = ?8,"
				      " cost_per_mtok = ?9, finished_usec = ?10, oom_cause = ?11,"
				      " suggested_max_model_len = ?12 WHERE id = ?1" },
	[STMT_TRIAL_HISTORY] = { &store_trial_row, "FROM trials WHERE study_id = ?1 ORDER BY seq" },
	[STMT_TRIAL_INTERRUPT] = { NULL, "UPDATE trials SET state = 'interrupted'"
					 " WHERE study_id = ?1 AND state IN ('deploying', 'probing')" },
	[STMT_TRIAL_STUDY] = { NULL, "SELECT study_id FROM trials WHERE id = ?1" },
	[STMT_LP_DELETE_TRIAL] = { NULL, "DELETE FROM load_points WHERE trial_id = ?1" },
	[STMT_LP_INSERT] = { &store_load_point_row, "load_points", true },
	[STMT_LP_LIST] = { &store_load_point_row, "FROM load_points WHERE trial_id = ?1 ORDER BY seq" },
	[STMT_TRAFFIC_UPSERT] = { NULL,
				  "INSERT INTO traffic_shapes (watch, study, hour_usec, seconds, requests, arrivals,"
				  " mean_rate, peak_rate, burstiness, input_mean, output_mean, prefix_hit_rate, drift,"
				  " rate_change, flagged, shape, updated_usec)"
				  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
				  " ON CONFLICT (watch, hour_usec) DO UPDATE SET study = ?2, seconds = ?4,"
				  " requests = ?5, arrivals = ?6, mean_rate = ?7, peak_rate = ?8, burstiness = ?9,"
				  " input_mean = ?10, output_mean = ?11, prefix_hit_rate = ?12, drift = ?13,"
				  " rate_change = ?14, flagged = ?15, shape = ?16, updated_usec = ?17" },
	[STMT_TRAFFIC_LIST_STUDY] = { &store_traffic_row, "FROM traffic_shapes WHERE study = ?1 AND hour_usec >= ?2 "
							  "ORDER BY hour_usec, watch" },
};

/* ---- errors ---- */

static int errno_from_sqlite(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_TOOBIG:
		return -E2BIG;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	case SQLITE_MISUSE:
	case SQLITE_RANGE:
		return -EINVAL;
	default:
		return -EIO;
	}
}

static int sqlite_errno_or_eio(int rc)
{
	int r = errno_from_sqlite(rc);

	return r < 0 ? r : -EIO;
}

int store_sql_error(struct store *s, int rc, const char *what, struct error *err)
{
	int r = errno_from_sqlite(rc);
	const char *msg = s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);

	if (r == 0)
		r = -EIO;
	/* sqlite3_errmsg may describe a later call; the code's own text is the fallback. */
	if (!msg || !*msg || strcmp(msg, "not an error") == 0)
		msg = sqlite3_errstr(rc);
	if ((rc & 0xff) == SQLITE_FULL)
		return error_set(err, r,
				 "%s: %s: %s (the disk or the database's size limit is full; nothing "
				 "committed earlier was lost)",
				 s ? s->path : "store", what, msg);
	return error_set(err, r, "%s: %s: %s", s ? s->path : "store", what, msg);
}

/* ---- statement cache ---- */

const struct store_row *store_stmt_row(enum store_stmt id)
{
	return stmt_defs[id].row;
}

int store_stmt(struct store *s, enum store_stmt id, const char *what, sqlite3_stmt **ret, struct error *err)
{
	int rc;

	if (s->lost)
		return error_set(err, -ESTALE, "%s", s->lost);
	if (!s->stmts[id]) {
		const struct stmt_def *def = &stmt_defs[id];
		_cleanup_(freep) char *made = !def->row     ? NULL
					      : def->insert ? store_row_insert(def->row, def->sql)
							    : store_row_select(def->row, def->sql);

		if (def->row && !made)
			return error_set(err, -ENOMEM, "%s: %s: out of memory", s->path, what);
		rc = sqlite3_prepare_v3(s->db, made ? made : def->sql, -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[id],
					NULL);
		if (rc != SQLITE_OK)
			return store_sql_error(s, rc, what, err);
	}
	sqlite3_reset(s->stmts[id]);
	sqlite3_clear_bindings(s->stmts[id]);
	*ret = s->stmts[id];
	return 0;
}

static int bind_value(sqlite3_stmt *st, int idx, const struct store_value *v)
{
	switch (v->type) {
	case STORE_VALUE_INT:
		return store_bind_int64(st, idx, v->i);
	case STORE_VALUE_DOUBLE:
		return store_bind_double(st, idx, v->d);
	case STORE_VALUE_TEXT:
		return store_bind_text(st, idx, v->t);
	}
	return -EINVAL;
}

int store_query(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
		sqlite3_stmt **ret, struct error *err)
{
	sqlite3_stmt *st;
	int r;

	r = store_stmt(s, id, what, &st, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		r = bind_value(st, (int)i + 1, &values[i]);
		if (r < 0)
			return error_set(err, r, "%s: %s: binding failed", s->path, what);
	}
	*ret = st;
	return 0;
}

int store_step_once(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
		    sqlite3_stmt **ret, struct error *err)
{
	sqlite3_stmt *st;
	int r, rc;

	r = store_query(s, id, what, values, n, &st, err);
	if (r < 0)
		return r;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*ret = st;
		return rc;
	}
	sqlite3_reset(st);
	if (rc == SQLITE_DONE || (rc & 0xff) == SQLITE_CONSTRAINT)
		return rc & 0xff;
	return store_sql_error(s, rc, what, err);
}

int store_insert(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
		 int64_t *ret_id, struct error *err)
{
	sqlite3_stmt *st;
	int rc;

	rc = store_step_once(s, id, what, values, n, &st, err);
	if (rc == SQLITE_ROW)
		sqlite3_reset(st);
	if (rc < 0)
		return rc;
	if (rc == SQLITE_CONSTRAINT)
		return error_set(err, -EEXIST, "%s: %s: refused by a constraint", s->path, what);
	if (sqlite3_changes(s->db) == 0)
		return 0;
	if (ret_id)
		*ret_id = sqlite3_last_insert_rowid(s->db);
	return 1;
}

int store_exec(struct store *s, enum store_stmt id, const char *what, const struct store_value *values, size_t n,
	       struct error *err)
{
	sqlite3_stmt *st;
	int r;

	r = store_query(s, id, what, values, n, &st, err);
	if (r >= 0)
		r = store_step_done(s, st, what, err);
	return r < 0 ? r : sqlite3_changes(s->db);
}

int store_step_done(struct store *s, sqlite3_stmt *st, const char *what, struct error *err)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		int r = store_sql_error(s, rc, what, err);

		sqlite3_reset(st);
		return r;
	}
	sqlite3_reset(st);
	return 0;
}

int store_bind_text(sqlite3_stmt *st, int idx, const char *v)
{
	int rc;

	if (!v)
		rc = sqlite3_bind_null(st, idx);
	else if (utf8_is_valid(v, strlen(v)))
		rc = sqlite3_bind_text(st, idx, v, -1, SQLITE_TRANSIENT);
	else {
		/* Text from elsewhere (a server's log in a failure message):
		 * stored strings are valid UTF-8, or every answer carrying them
		 * would be invalid JSON. */
		char *t = utf8_sanitize(v);

		if (!t)
			return -ENOMEM;
		rc = sqlite3_bind_text(st, idx, t, -1, free); /* frees t even when it fails */
	}
	return rc == SQLITE_OK ? 0 : sqlite_errno_or_eio(rc);
}

int store_bind_double(sqlite3_stmt *st, int idx, double v)
{
	/* SQLite turns NaN into NULL anyway; be explicit so every NAN reads back as "no value". */
	int rc = isnan(v) ? sqlite3_bind_null(st, idx) : sqlite3_bind_double(st, idx, v);

	return rc == SQLITE_OK ? 0 : sqlite_errno_or_eio(rc);
}

int store_bind_int64(sqlite3_stmt *st, int idx, int64_t v)
{
	int rc = sqlite3_bind_int64(st, idx, v);

	return rc == SQLITE_OK ? 0 : sqlite_errno_or_eio(rc);
}

int store_col_text(sqlite3_stmt *st, int col, char **ret)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	if (!t) {
		*ret = NULL;
		return 0;
	}
	*ret = strdup((const char *)t);
	return *ret ? 0 : -ENOMEM;
}

double store_col_double(sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return NAN;
	return sqlite3_column_double(st, col);
}

/* ---- transactions ---- */

int store_exec_const(struct store *s, const char *sql, const char *what, struct error *err)
{
	int rc;

	if (s->lost)
		return error_set(err, -ESTALE, "%s", s->lost);
	rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : store_sql_error(s, rc, what, err);
}

int store_tx_begin(struct store *s, const char *what, struct error *err)
{
	int r;

	if (sqlite3_get_autocommit(s->db)) {
		r = store_exec_const(s, "BEGIN IMMEDIATE", what, err);
		return r < 0 ? r : 1;
	}
	r = store_exec_const(s, "SAVEPOINT store_op", what, err);
	return r < 0 ? r : 0;
}

int store_tx_end(struct store *s, int began, int r, struct error *err)
{
	if (r >= 0) {
		int q = store_exec_const(s, began ? "COMMIT" : "RELEASE store_op", "committing", err);

		if (q >= 0)
			return r;
		r = q;
	}
	/* SQLite may already have rolled back (SQLITE_FULL does in some cases). */
	if (began) {
		if (!sqlite3_get_autocommit(s->db))
			(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	} else if (!sqlite3_get_autocommit(s->db)) {
		(void)sqlite3_exec(s->db, "ROLLBACK TO store_op", NULL, NULL, NULL);
		(void)sqlite3_exec(s->db, "RELEASE store_op", NULL, NULL, NULL);
	}
	return r;
}

int store_begin(struct store *s, struct error *err)
{
	if (!sqlite3_get_autocommit(s->db))
		return error_set(err, -EBUSY, "%s: a transaction is already open", s->path);
	return store_exec_const(s, "BEGIN IMMEDIATE", "beginning a transaction", err);
}

int store_commit(struct store *s, struct error *err)
{
	int r = store_exec_const(s, "COMMIT", "committing", err);

	if (r < 0)
		store_rollback(s);
	return r;
}

int store_rollback(struct store *s)
{
	if (!sqlite3_get_autocommit(s->db))
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return 0;
}

int store_debug_set_max_page_count(struct store *s, uint32_t pages)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc;

	/* PRAGMA takes no bound parameters; the value is a number we format ourselves. */
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %u", pages);
	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sqlite_errno_or_eio(rc);
	rc = sqlite3_step(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sqlite_errno_or_eio(rc);
}

int store_debug_pragma_int(struct store *s, const char *name, int64_t *ret)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	char sql[64];
	int rc;

	/* PRAGMA names cannot be bound: only a plain name is formatted in. */
	if (!*name || strspn(name, "abcdefghijklmnopqrstuvwxyz_") != strlen(name) || strlen(name) > 32)
		return -EINVAL;
	snprintf(sql, sizeof(sql), "PRAGMA %s", name);
	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sqlite_errno_or_eio(rc);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return rc == SQLITE_DONE ? -ENOENT : sqlite_errno_or_eio(rc);
	*ret = sqlite3_column_int64(st, 0);
	return 0;
}

/* ---- open, migrate, close ---- */

static int read_version(struct store *s, int *ret, struct error *err)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_sql_error(s, rc, "reading the schema version", err);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return store_sql_error(s, rc, "reading the schema version", err);
	*ret = sqlite3_column_int(st, 0);
	return 0;
}

int store_schema_version(struct store *s, int *ret, struct error *err)
{
	return read_version(s, ret, err);
}

int store_migrate(struct store *s, int target, struct error *err)
{
	int version, r;

	for (int v = 1; v <= target; v++) {
		char what[64];

		snprintf(what, sizeof(what), "migrating the schema to version %d", v);
		r = store_exec_const(s, "BEGIN IMMEDIATE", what, err);
		if (r < 0)
			return r;
		/* Under the write lock: another process may have migrated meanwhile. */
		r = read_version(s, &version, err);
		if (r >= 0 && version < v)
			for (const char *const *sql = migrations[v - 1].sql; *sql && r >= 0; sql++)
				r = store_exec_const(s, *sql, what, err);
		if (r >= 0)
			r = store_exec_const(s, "COMMIT", what, err);
		if (r < 0) {
			store_rollback(s);
			return r;
		}
	}
	return 0;
}

int store_pragma_text(struct store *s, const char *sql, char *buf, size_t size, struct error *err)
{
	_cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_sql_error(s, rc, sql, err);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store_sql_error(s, rc, sql, err);
	snprintf(buf, size, "%s",
		 rc == SQLITE_ROW && sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "");
	return 0;
}
