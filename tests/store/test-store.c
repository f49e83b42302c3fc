/* The store as its users see it: a fresh file is created at the current
 * schema version and an older one is migrated with its rows intact; studies,
 * trials and load points read back exactly what was written (doubles
 * bit-exact); a trial is never duplicated; a restart turns in-flight trials
 * into interrupted ones; a full disk is a clear error that loses nothing
 * committed; and a reader sees committed data while a writer holds a
 * transaction open. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <ftw.h>
#include <time.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "sqlite-util.h"
#include "store.h"
#include "tests.h"

static char dir[] = "/tmp/goodput-test-store-XXXXXX";

static char *db_path(const char *name)
{
	static char buf[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

static struct store *open_rw(const char *path)
{
	struct error err = { 0 };
	struct store *s = NULL;

	CHECK_MSG(store_open(path, NULL, &s, &err) == 0, "%s", err.msg);
	return s;
}

static int64_t add_study(struct store *s, const char *name)
{
	struct store_study st = {
		.name = (char *)name,
		.spec_json = (char *)"{\"name\":\"x\"}",
		.engine = (char *)"sim",
		.model = (char *)"llama-3.1-8b",
		.seed = UINT64_C(0xfedcba9876543210),
		.algorithm = (char *)"LN_SBPLX",
		.nlopt_version = (char *)"2.7.1",
	};
	struct error err = { 0 };
	int64_t id = 0;

	CHECK_MSG(store_study_insert(s, &st, &id, &err) == 0, "%s", err.msg);
	CHECK(id > 0);
	return id;
}

static void fake_result(struct probe_result *r, double rate, bool met)
{
	*r = (struct probe_result){ 0 };
	r->request_rate = rate;
	r->burstiness = 1;
	r->num_prompts = 100;
	r->completed = 99;
	r->failed = 1;
	r->duration_s = 10;
	r->output_throughput = 1234.5678;
	r->good_output_throughput = 1000.0 / 3.0;
	r->request_throughput = rate * 0.99;
	r->attainment = met ? 0.95 : 0.5;
	r->sla_met = met;
	r->n_percentiles = 3;
	r->percentiles[0] = 50;
	r->percentiles[1] = 90;
	r->percentiles[2] = 99;
	for (int m = 0; m < _PROBE_METRIC_MAX; m++) {
		r->stat[m].n = 99;
		r->stat[m].mean_ms = 10 + m;
		r->stat[m].median_ms = 9 + m;
		r->stat[m].pct_ms[0] = 9 + m;
		r->stat[m].pct_ms[1] = 20 + m;
		r->stat[m].pct_ms[2] = 30.125 + m;
	}
}

static void test_fresh_file(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("fresh.db"));
	struct error err = { 0 };
	int v = 0;

	CHECK(store_schema_version(s, &v, &err) == 0);
	CHECK_INT_EQ(v, STORE_SCHEMA_VERSION);
	/* Opening again is a no-op migration. */
	store_close(TAKE_PTR(s));
	s = open_rw(db_path("fresh.db"));
	CHECK(store_schema_version(s, &v, &err) == 0);
	CHECK_INT_EQ(v, STORE_SCHEMA_VERSION);

	/* WAL with synchronous=NORMAL (1): a commit does not wait for the disk
	 * (goodputd commits on its loop), yet survives a kill -9. */
	int64_t sync = -1;
	CHECK_INT_EQ(store_debug_pragma_int(s, "synchronous", &sync), 0);
	CHECK_INT_EQ(sync, 1);
	CHECK_INT_EQ(store_debug_pragma_int(s, "synchronous; DROP TABLE studies", &sync), -EINVAL);

	/* Not a regular file: refused, not opened (a FIFO would block open()). */
	struct store *f = NULL;
	CHECK(mkfifo(db_path("fifo.db"), 0600) == 0);
	CHECK_INT_EQ(store_open(db_path("fifo.db"), NULL, &f, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not a regular file (a FIFO)");
	CHECK(unlink(db_path("fifo.db")) == 0);
}

static void test_migrate_from_previous(void)
{
	struct store_open_options o = { .target_version = STORE_SCHEMA_VERSION - 1 };
	_cleanup_(sqlite3_close_v2p) sqlite3 *db = NULL;
	_cleanup_(store_closep) struct store *s = NULL;
	struct store_study st = { 0 };
	struct store_trial *h = NULL;
	struct error err = { 0 };
	size_t n = 0;
	int v = 0;

	CHECK_MSG(store_open(db_path("old.db"), &o, &s, &err) == 0, "%s", err.msg);
	CHECK(store_schema_version(s, &v, &err) == 0);
	CHECK_INT_EQ(v, STORE_SCHEMA_VERSION - 1);
	store_close(TAKE_PTR(s));

	/* Rows as version 1 of goodput wrote them. */
	CHECK(sqlite3_open(db_path("old.db"), &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db,
			   "INSERT INTO studies (id, name, spec, state, created_usec, seed, algorithm, nlopt_version)"
			   " VALUES (7, 'old', '{}', 'running', 1, 42, 'LN_SBPLX', '2.7.1');"
			   "INSERT INTO trials (id, study_id, seq, kind, knobs, canonical_key, state)"
			   " VALUES (3, 7, 1, 'search', '{\"max_num_seqs\":8}', 'mns=8', 'probing');"
			   "INSERT INTO load_points (trial_id, seq, phase, request_rate, sla_met, result, created_usec)"
			   " VALUES (3, 1, 'search', 2.5, 1, '{}', 1);",
			   NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close_v2(TAKE_PTR(db));

	/* A read-only opener cannot migrate: clear error. */
	o = (struct store_open_options){ .flags = STORE_OPEN_READ_ONLY };
	CHECK_INT_EQ(store_open(db_path("old.db"), &o, &s, &err), -EPROTO);
	CHECK_STR_CONTAINS(err.msg, "read-write");

	s = open_rw(db_path("old.db"));
	CHECK(store_schema_version(s, &v, &err) == 0);
	CHECK_INT_EQ(v, STORE_SCHEMA_VERSION);
	CHECK_MSG(store_study_get(s, 7, &st, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(st.name, "old");
	CHECK(st.state == STORE_STUDY_RUNNING);
	CHECK(st.engine == NULL);
	CHECK_INT_EQ(st.seed, 42);
	store_study_done(&st);
	CHECK(store_trial_history(s, 7, &h, &n, &err) == 0);
	CHECK_INT_EQ(n, 1);
	CHECK_STR_EQ(h[0].canonical_key, "mns=8");
	CHECK(h[0].server_pgid == 0);
	CHECK(isnan(h[0].predicted_cost)); /* version 4: no prediction on an old row */
	store_trial_array_free(h, n);
	/* The new columns work on migrated rows. */
	CHECK_MSG(store_trial_set_predicted_cost(s, 3, 0.25, &err) == 0, "%s", err.msg);
	CHECK(store_trial_history(s, 7, &h, &n, &err) == 0);
	CHECK(n == 1 && h[0].predicted_cost == 0.25);
	store_trial_array_free(h, n);
	CHECK_INT_EQ(store_trial_set_predicted_cost(s, 99, 0.25, &err), -ENOENT);
	CHECK_MSG(store_trial_set_server(s, 3, &(struct store_server){ .pgid = 4242 }, "/tmp/x.log", &err) == 0, "%s",
		  err.msg);
	CHECK_INT_EQ(store_study_resume(s, 7, &err), 1);
	/* A load point of the old file has no GPU figures (NULL, read as NAN). */
	struct store_load_point *lps = NULL;
	CHECK_MSG(store_load_point_list(s, 3, &lps, &n, &err) == 0, "%s", err.msg);
	CHECK_INT_EQ(n, 1);
	CHECK(lps[0].request_rate == 2.5 && isnan(lps[0].gpu_util_mean) && isnan(lps[0].gpu_mem_peak_mib));
	store_load_point_array_free(lps, n);
}

/* Version 1 files (before the daemon's and the telemetry's columns) go all the way. */
static void test_migrate_from_v1(void)
{
	struct store_open_options o = { .target_version = 1 };
	_cleanup_(store_closep) struct store *s = NULL;
	struct store_load_point *lps = NULL;
	struct probe_result pr;
	struct error err = { 0 };
	int64_t study, trial;
	size_t n = 0;
	int v = 0;

	CHECK_MSG(store_open(db_path("v1.db"), &o, &s, &err) == 0, "%s", err.msg);
	CHECK(store_schema_version(s, &v, &err) == 0);
	CHECK_INT_EQ(v, 1);
	store_close(TAKE_PTR(s));
	s = open_rw(db_path("v1.db"));
	CHECK(store_schema_version(s, &v, &err) == 0);
	CHECK_INT_EQ(v, STORE_SCHEMA_VERSION);
	study = add_study(s, "v1");
	CHECK(store_trial_insert(s, study, "search", "{}", "k", &trial, &err) == 1);
	fake_result(&pr, 1.5, true);
	CHECK_MSG(store_load_point_insert_gpu(s, trial, 1, "search", &pr,
					      &(struct store_gpu_figures){ 80.5, 97, 30000.25, NAN }, NULL, &err) == 0,
		  "%s", err.msg);
	CHECK(store_load_point_list(s, trial, &lps, &n, &err) == 0);
	CHECK_INT_EQ(n, 1);
	CHECK(lps[0].gpu_util_mean == 80.5 && lps[0].gpu_util_peak == 97 && lps[0].gpu_mem_mean_mib == 30000.25);
	CHECK(isnan(lps[0].gpu_mem_peak_mib)); /* NAN in, NULL stored, NAN out */
	store_load_point_array_free(lps, n);
}

static void test_newer_file_refused(void)
{
	_cleanup_(sqlite3_close_v2p) sqlite3 *db = NULL;
	struct store *s = NULL;
	struct error err = { 0 };

	CHECK(sqlite3_open(db_path("newer.db"), &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, "PRAGMA user_version = 999", NULL, NULL, NULL) == SQLITE_OK);
	CHECK_INT_EQ(store_open(db_path("newer.db"), NULL, &s, &err), -EPROTONOSUPPORT);
	CHECK_STR_CONTAINS(err.msg, "999");
	/* And a file that is not a database at all. */
	FILE *f = fopen(db_path("junk.db"), "w");
	CHECK(f);
	fputs("this is not an SQLite database, not even close; it is a text file of some length.\n", f);
	fclose(f);
	CHECK(store_open(db_path("junk.db"), NULL, &s, &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "junk.db");
	/* Read-only open of a missing file. */
	struct store_open_options o = { .flags = STORE_OPEN_READ_ONLY };
	CHECK_INT_EQ(store_open(db_path("missing.db"), &o, &s, &err), -ENOENT);
}

static void test_round_trip(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("rt.db"));
	struct store_study st = { 0 }, *list = NULL;
	struct store_trial t = { 0 }, *h = NULL;
	struct store_load_point *lps = NULL;
	struct probe_result pr;
	struct error err = { 0 };
	int64_t study, trial, other;
	size_t n;

	study = add_study(s, "rt");
	CHECK(store_study_get_by_name(s, "rt", &st, &err) == 0);
	CHECK_INT_EQ(st.id, study);
	CHECK(st.state == STORE_STUDY_QUEUED);
	CHECK(st.seed == UINT64_C(0xfedcba9876543210));
	CHECK_STR_EQ(st.algorithm, "LN_SBPLX");
	CHECK_STR_EQ(st.model, "llama-3.1-8b");
	CHECK(st.created_usec > 0 && st.started_usec == 0);
	store_study_done(&st);
	CHECK_INT_EQ(store_study_get(s, 999, &st, &err), -ENOENT);

	CHECK(store_study_set_state(s, study, STORE_STUDY_RUNNING, NULL, &err) == 0);
	CHECK(store_trial_insert(s, study, "search", "{\"max_num_seqs\":64}", "mns=64", &trial, &err) == 1);
	CHECK(store_trial_insert(s, study, "search", "{\"max_num_seqs\":128}", "mns=128", &other, &err) == 1);
	CHECK(store_trial_set_state(s, trial, STORE_TRIAL_DEPLOYING, &err) == 0);
	CHECK(store_trial_set_server(s, trial, &(struct store_server){ .pgid = 12345, .identity = "b00t:777" },
				     "/var/log/t1.log", &err) == 0);
	CHECK(store_trial_set_state(s, trial, STORE_TRIAL_PROBING, &err) == 0);
	fake_result(&pr, 2.5, true);
	{
		/* store_epoch: a load point added leaves it, any other row written moves it */
		uint64_t e = store_epoch(s);

		CHECK_MSG(store_load_point_insert(s, trial, 1, "search", &pr, NULL, &err) == 0, "%s", err.msg);
		CHECK(store_epoch(s) == e);
		CHECK(store_trial_set_host(s, trial, "{}", &err) == 0);
		CHECK(store_epoch(s) > e);
		e = store_epoch(s);
		CHECK(store_study_set_state(s, study, STORE_STUDY_RUNNING, NULL, &err) == 0);
		CHECK(store_epoch(s) > e);
	}
	fake_result(&pr, INFINITY, false);
	pr.server.present = true;
	pr.server.kv_usage_peak = 0.875;
	CHECK_MSG(store_load_point_insert_gpu(s, trial, 2, "saturation", &pr,
					      &(struct store_gpu_figures){ 55.5, 100, 1234.5, 2048 }, NULL, &err) == 0,
		  "%s", err.msg);
	CHECK_INT_EQ(store_load_point_insert(s, trial, 2, "saturation", &pr, NULL, &err), -EEXIST);

	double cost = 0.1 + 0.2; /* not representable in few digits: must come back bit-exact */
	struct store_trial_outcome o = {
		.state = STORE_TRIAL_DONE,
		.deploy_seconds = 12.25,
		.max_rate = 2.5,
		.max_goodput = 1000.0 / 3.0,
		.concurrency = 17.5,
		.cost_per_mtok = cost,
	};
	CHECK(store_trial_finish(s, trial, &o, &err) == 0);
	o = (struct store_trial_outcome){ .state = STORE_TRIAL_INFEASIBLE,
					  .failure = STORE_FAILURE_OOM,
					  /* a server's log line: bytes that are not UTF-8 */
					  .failure_message = "CUDA out of memory \xff\xfe",
					  .deploy_seconds = NAN,
					  .max_rate = NAN,
					  .max_goodput = NAN,
					  .concurrency = NAN,
					  .cost_per_mtok = NAN,
					  .oom_cause = "kv_cache",
					  .suggested_max_model_len = 77008 };
	CHECK(store_trial_finish(s, other, &o, &err) == 0);
	o.state = STORE_TRIAL_PROBING;
	CHECK_INT_EQ(store_trial_finish(s, other, &o, &err), -EINVAL);

	CHECK(store_trial_get(s, trial, &t, &err) == 0);
	CHECK(t.state == STORE_TRIAL_DONE && t.failure == STORE_FAILURE_NONE);
	CHECK_INT_EQ(t.seq, 1);
	CHECK(memcmp(&t.cost_per_mtok, &cost, sizeof(cost)) == 0);
	CHECK(t.max_goodput == 1000.0 / 3.0);
	CHECK_STR_EQ(t.log_path, "/var/log/t1.log");
	/* finished, its server maybe still in its teardown: recorded until cleared */
	CHECK(t.server_pgid == 12345 && t.server_identity && strcmp(t.server_identity, "b00t:777") == 0);
	CHECK(t.started_usec > 0 && t.finished_usec >= t.started_usec);
	store_trial_done(&t);
	CHECK(store_trial_set_server(s, trial, NULL, NULL, &err) == 0);
	CHECK(store_trial_get(s, trial, &t, &err) == 0);
	CHECK(t.server_pgid == 0 && !t.server_identity && !t.server_unit);
	CHECK_STR_EQ(t.log_path, "/var/log/t1.log");
	store_trial_done(&t);

	CHECK(store_trial_history(s, study, &h, &n, &err) == 0);
	CHECK_INT_EQ(n, 2);
	CHECK_INT_EQ(h[0].id, trial);
	CHECK_INT_EQ(h[1].seq, 2);
	CHECK(h[1].state == STORE_TRIAL_INFEASIBLE && h[1].failure == STORE_FAILURE_OOM);
	/* Stored as valid UTF-8: every invalid byte became U+FFFD. */
	CHECK_STR_EQ(h[1].failure_message, "CUDA out of memory \xEF\xBF\xBD\xEF\xBF\xBD");
	CHECK(isnan(h[1].cost_per_mtok) && isnan(h[1].deploy_seconds));
	/* why it did not start, as the engine said */
	CHECK_STR_EQ(h[1].oom_cause, "kv_cache");
	CHECK_INT_EQ(h[1].suggested_max_model_len, 77008);
	CHECK(h[0].oom_cause == NULL && h[0].suggested_max_model_len == 0);
	store_trial_array_free(h, n);

	/* the pre-flight's estimates and the search phases, kept with the study */
	CHECK(store_study_set_preflight(s, study, "[{\"combination\":\"none tp=1\"}]", &err) == 0);
	CHECK(store_study_set_phases(s, study, "[{\"knob\":\"max_num_seqs\",\"trials\":7,\"max\":256}]", &err) == 0);
	CHECK(store_study_get(s, study, &st, &err) == 0);
	CHECK_STR_EQ(st.preflight_json, "[{\"combination\":\"none tp=1\"}]");
	CHECK_STR_CONTAINS(st.phases_json, "\"max\":256");
	store_study_done(&st);
	CHECK_INT_EQ(store_study_set_phases(s, 999, "[]", &err), -ENOENT);

	CHECK(store_load_point_list(s, trial, &lps, &n, &err) == 0);
	CHECK_INT_EQ(n, 2);
	CHECK(lps[0].request_rate == 2.5 && lps[0].sla_met);
	CHECK(lps[0].p90_ttft_ms == 20 && lps[0].p99_tpot_ms == 31.125 && lps[0].p50_ttft_ms == 9);
	CHECK(isnan(lps[0].kv_usage_peak));
	CHECK(isinf(lps[1].request_rate) && !lps[1].sla_met);
	CHECK(lps[1].kv_usage_peak == 0.875);
	/* GPU telemetry: NULL (NAN) without it, the figures with it */
	CHECK(isnan(lps[0].gpu_util_mean) && isnan(lps[0].gpu_util_peak) && isnan(lps[0].gpu_mem_mean_mib) &&
	      isnan(lps[0].gpu_mem_peak_mib));
	CHECK(lps[1].gpu_util_mean == 55.5 && lps[1].gpu_util_peak == 100 && lps[1].gpu_mem_mean_mib == 1234.5 &&
	      lps[1].gpu_mem_peak_mib == 2048);
	CHECK_STR_EQ(lps[1].phase, "saturation");
	CHECK(lps[0].result_json && lps[0].result_json[0] == '{');
	store_load_point_array_free(lps, n);

	/* The answer: the only measured configuration, until the runner records its choice. */
	struct store_study_best b = { 0 };
	CHECK(store_study_best(s, study, &b, &err) == 0);
	CHECK_INT_EQ(b.trial.id, trial);
	CHECK(b.cost_per_mtok == cost && b.n == 1 && b.spread == 0 && !b.have_runner_up);
	store_study_best_done(&b);
	CHECK_INT_EQ(store_study_set_best(s, study, 999, &err), -EINVAL);
	/* a recorded choice that was never measured does not hide the measured one */
	CHECK(store_study_set_best(s, study, other, &err) == 0);
	CHECK(store_study_best(s, study, &b, &err) == 0);
	CHECK_INT_EQ(b.trial.id, trial);
	store_study_best_done(&b);

	CHECK(store_study_set_state(s, study, STORE_STUDY_DONE, NULL, &err) == 0);
	CHECK(store_study_list(s, &list, &n, &err) == 0);
	CHECK_INT_EQ(n, 1);
	CHECK(list[0].state == STORE_STUDY_DONE && list[0].best_trial_id == other);
	CHECK(list[0].started_usec > 0 && list[0].finished_usec >= list[0].started_usec);
	store_study_array_free(list, n);

	/* Across studies: the best answer for this model + engine. */
	CHECK(store_study_set_best(s, study, trial, &err) == 0);
	CHECK_MSG(store_best_for(s, "llama-3.1-8b", "sim", NULL, &st, &b, &err) == 0, "%s", err.msg);
	CHECK_INT_EQ(st.id, study);
	CHECK_INT_EQ(b.trial.id, trial);
	CHECK(b.cost_per_mtok == cost);
	store_study_best_done(&b);
	store_study_done(&st);
	CHECK_INT_EQ(store_best_for(s, "llama-3.1-8b", "sim", "other label", &st, &b, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "other label");
	CHECK_INT_EQ(store_best_for(s, "llama-3.1-70b", "sim", NULL, &st, &b, &err), -ENOENT);

	/* No measured trial: a clear "none yet". */
	int64_t empty = add_study(s, "empty");
	CHECK_INT_EQ(store_study_best(s, empty, &b, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "no measured trial");
}

static int64_t add_done(struct store *s, int64_t study, const char *kind, const char *key, double cost)
{
	struct store_trial_outcome o = {
		.state = STORE_TRIAL_DONE,
		.deploy_seconds = NAN,
		.max_rate = 1,
		.max_goodput = 100 / cost,
		.concurrency = 1,
		.cost_per_mtok = cost,
	};
	struct error err = { 0 };
	char knobs[64];
	int64_t id;

	snprintf(knobs, sizeof(knobs), "{\"k\":\"%s\"}", key);
	CHECK(store_trial_insert(s, study, kind, knobs, key, &id, &err) == 1);
	CHECK(store_trial_set_state(s, id, STORE_TRIAL_DEPLOYING, &err) == 0);
	if (!isfinite(cost))
		o.max_goodput = NAN;
	CHECK_MSG(store_trial_finish(s, id, &o, &err) == 0, "%s", err.msg);
	return id;
}

/* The study's cost is the mean of its chosen configuration's measurements,
 * with their count and spread; the lowest mean wins until the runner records
 * its choice (ties: the configuration measured first). */
static void test_study_best(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("best.db"));
	struct store_study_best b = { 0 };
	struct error err = { 0 };
	int64_t study = add_study(s, "mean"), a1, b1;

	a1 = add_done(s, study, "search", "a", 1.0);
	b1 = add_done(s, study, "search", "b", 0.75);
	add_done(s, study, "search", "c", NAN); /* done, the SLA never met: not a measurement */
	add_done(s, study, "confirm-1", "a", 0.5);
	CHECK(store_study_best(s, study, &b, &err) == 0);
	/* a: (1.0 + 0.5) / 2 = 0.75, a tie with b, and measured first */
	CHECK_INT_EQ(b.trial.id, a1);
	CHECK(b.cost_per_mtok == 0.75 && b.n == 2 && b.cost_min == 0.5 && b.cost_max == 1.0);
	CHECK(fabs(b.spread - 0.5 / 0.75) < 1e-15);
	CHECK(b.trial.cost_per_mtok == 1.0); /* the row is its first measurement */
	CHECK(b.have_runner_up && b.runner_up_cost_per_mtok == 0.75 && b.runner_up_n == 1);
	CHECK_STR_EQ(b.runner_up_key, "b");
	CHECK_STR_EQ(b.runner_up_knobs_json, "{\"k\":\"b\"}");
	store_study_best_done(&b);

	/* the runner's recorded choice is the answer, at the mean of all its measurements */
	CHECK(store_study_set_best(s, study, b1, &err) == 0);
	add_done(s, study, "confirm-1", "b", 1.25);
	CHECK(store_study_best(s, study, &b, &err) == 0);
	CHECK_INT_EQ(b.trial.id, b1);
	CHECK(b.cost_per_mtok == 1.0 && b.n == 2 && b.spread == 0.5);
	CHECK(b.have_runner_up && b.runner_up_cost_per_mtok == 0.75 && b.runner_up_n == 2);
	CHECK_STR_EQ(b.runner_up_key, "a");
	store_study_best_done(&b);
}

/* A trial with search load points at the given rates and attainments (and a
 * saturation run all good, which does not count), finished in state. */
static int64_t add_measured(struct store *s, int64_t study, const char *key, enum store_trial_state state,
			    const double *rate, const double *attainment, size_t n)
{
	struct store_trial_outcome o = { .state = state,
					 .deploy_seconds = NAN,
					 .max_rate = NAN,
					 .max_goodput = NAN,
					 .concurrency = NAN,
					 .cost_per_mtok = NAN };
	struct probe_result pr;
	struct error err = { 0 };
	char knobs[64];
	int64_t id;

	snprintf(knobs, sizeof(knobs), "{\"k\":\"%s\"}", key);
	CHECK(store_trial_insert(s, study, "search", knobs, key, &id, &err) == 1);
	CHECK(store_trial_set_state(s, id, STORE_TRIAL_PROBING, &err) == 0);
	fake_result(&pr, INFINITY, true);
	pr.attainment = 1;
	CHECK_MSG(store_load_point_insert(s, id, 1, "saturation", &pr, NULL, &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < n; i++) {
		fake_result(&pr, rate[i], false);
		pr.attainment = attainment[i];
		CHECK_MSG(store_load_point_insert(s, id, (uint32_t)i + 2, "search", &pr, NULL, &err) == 0, "%s",
			  err.msg);
	}
	CHECK_MSG(store_trial_finish(s, id, &o, &err) == 0, "%s", err.msg);
	return id;
}

/* Nothing met the SLA: the closest attempt is the search point of highest
 * attainment over every trial, whatever its verdict (the night:
 * --parallel 1 at 97.5 % undecided at its cap, not --parallel 2 at 50 %),
 * never a saturation run, ties to the lower rate. */
static void test_study_closest(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("closest.db"));
	_cleanup_(store_study_closest_done) struct store_study_closest c = { 0 };
	struct error err = { 0 };
	int64_t study = add_study(s, "closest"), p1;

	CHECK_INT_EQ(store_study_closest(s, study, &c, &err), -ENOENT);
	add_measured(s, study, "parallel-2", STORE_TRIAL_INFEASIBLE, (const double[]){ 0.4, 0.2, 0.1 },
		     (const double[]){ 0.2, 0.5, 0.5 }, 3);
	p1 = add_measured(s, study, "parallel-1", STORE_TRIAL_DONE, (const double[]){ 0.25, 0.232 },
			  (const double[]){ 0.975, 0.9375 }, 2);
	add_measured(s, study, "parallel-4", STORE_TRIAL_INFEASIBLE, (const double[]){ 0.3, 0.05 },
		     (const double[]){ 0.975, 0.6 }, 2);
	CHECK_MSG(store_study_closest(s, study, &c, &err) == 0, "%s", err.msg);
	/* 97.5 % twice: the lower rate (0.25 of --parallel 1, not 0.3 of --parallel 4) */
	CHECK_INT_EQ(c.trial.id, p1);
	CHECK(c.rate == 0.25 && c.attainment == 0.975);
	CHECK(c.result_json && strstr(c.result_json, "\"request_rate\""));
}

static void test_uniqueness(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("uniq.db"));
	struct store_study st = { .name = (char *)"u",
				  .spec_json = (char *)"{}",
				  .algorithm = (char *)"a",
				  .nlopt_version = (char *)"2.7.1" };
	struct error err = { 0 };
	int64_t study, a, b, c;

	study = add_study(s, "u1");
	st.name = (char *)"u1";
	CHECK_INT_EQ(store_study_insert(s, &st, NULL, &err), -EEXIST);
	CHECK_STR_CONTAINS(err.msg, "u1");
	CHECK(store_trial_insert(s, study, "search", "{}", "k=1", &a, &err) == 1);
	CHECK(store_trial_insert(s, study, "search", "{}", "k=1", &b, &err) == 0);
	CHECK_INT_EQ(a, b);
	/* The same point confirmed is a different trial. */
	CHECK(store_trial_insert(s, study, "confirm", "{}", "k=1", &c, &err) == 1);
	CHECK(c != a);
	/* Trials of a missing study are refused. */
	CHECK(store_trial_insert(s, 4242, "search", "{}", "k=1", &c, &err) < 0);
	struct store_trial *h = NULL;
	size_t n;
	CHECK(store_trial_history(s, study, &h, &n, &err) == 0);
	CHECK_INT_EQ(n, 2);
	CHECK_INT_EQ(h[1].seq, 2);
	store_trial_array_free(h, n);
}

static void test_resume(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("resume.db"));
	struct store_trial t = { 0 };
	struct probe_result pr;
	struct error err = { 0 };
	int64_t study, t1, t2, t3, again;

	study = add_study(s, "r");
	CHECK(store_trial_insert(s, study, "search", "{}", "a", &t1, &err) == 1);
	CHECK(store_trial_insert(s, study, "search", "{}", "b", &t2, &err) == 1);
	CHECK(store_trial_insert(s, study, "search", "{}", "c", &t3, &err) == 1);
	CHECK(store_trial_set_state(s, t1, STORE_TRIAL_DEPLOYING, &err) == 0);
	struct store_trial_outcome o = { .state = STORE_TRIAL_DONE,
					 .cost_per_mtok = 1,
					 .max_rate = 1,
					 .max_goodput = 1,
					 .deploy_seconds = 1,
					 .concurrency = 1 };
	CHECK(store_trial_finish(s, t1, &o, &err) == 0);
	CHECK(store_trial_set_state(s, t2, STORE_TRIAL_DEPLOYING, &err) == 0);
	CHECK(store_trial_set_state(s, t2, STORE_TRIAL_PROBING, &err) == 0);
	fake_result(&pr, 1, true);
	CHECK(store_load_point_insert(s, t2, 1, "search", &pr, NULL, &err) == 0);
	store_close(TAKE_PTR(s));

	/* "Restart": the probing trial is interrupted, the others untouched. */
	s = open_rw(db_path("resume.db"));
	CHECK_INT_EQ(store_study_resume(s, study, &err), 1);
	CHECK_INT_EQ(store_study_resume(s, study, &err), 0);
	CHECK(store_trial_get(s, t2, &t, &err) == 0);
	CHECK(t.state == STORE_TRIAL_INTERRUPTED);
	store_trial_done(&t);
	CHECK(store_trial_get(s, t1, &t, &err) == 0);
	CHECK(t.state == STORE_TRIAL_DONE);
	store_trial_done(&t);
	CHECK(store_trial_get(s, t3, &t, &err) == 0);
	CHECK(t.state == STORE_TRIAL_PENDING);
	store_trial_done(&t);
	/* The runner asks for the same point again: same trial, no duplicate. */
	CHECK(store_trial_insert(s, study, "search", "{}", "b", &again, &err) == 0);
	CHECK_INT_EQ(again, t2);
	/* Redoing it starts clean: the partial attempt's load points are gone. */
	CHECK(store_trial_set_state(s, t2, STORE_TRIAL_DEPLOYING, &err) == 0);
	struct store_load_point *lps = NULL;
	size_t n = 99;
	CHECK(store_load_point_list(s, t2, &lps, &n, &err) == 0);
	CHECK_INT_EQ(n, 0);
	store_load_point_array_free(lps, n);
}

static void test_disk_full(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("full.db"));
	struct store_trial *h = NULL;
	struct error err = { 0 };
	int64_t study, id;
	size_t n = 0;
	int r = 0, i;
	char key[32];
	static char big[4096];

	study = add_study(s, "full");
	CHECK(store_trial_insert(s, study, "search", "{}", "first", &id, &err) == 1);
	/* Let the file grow by only a few pages more. */
	CHECK(store_debug_set_max_page_count(s, 12) == 0);
	memset(big, 'x', sizeof(big) - 1);
	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		r = store_trial_insert(s, study, "search", big, key, &id, &err);
		if (r < 0)
			break;
	}
	CHECK_MSG(r == -ENOSPC, "expected -ENOSPC, got %d after %d trials (%s)", r, i, err.msg);
	fprintf(stderr, "disk full after %d trials: %s\n", i, err.msg);
	CHECK_STR_CONTAINS(err.msg, "full.db");
	CHECK_STR_CONTAINS(err.msg, "full");
	/* Whatever was committed is still there, and the failed insert left no half row. */
	CHECK(store_trial_history(s, study, &h, &n, &err) == 0);
	CHECK_INT_EQ(n, (size_t)i + 1);
	CHECK_STR_EQ(h[0].canonical_key, "first");
	for (size_t k = 1; k < n; k++)
		CHECK_INT_EQ(h[k].seq, k + 1);
	store_trial_array_free(h, n);
	/* Small updates in place still work; after "freeing space" inserts do again. */
	CHECK(store_study_set_state(s, study, STORE_STUDY_RUNNING, NULL, &err) == 0);
	CHECK(store_debug_set_max_page_count(s, 1u << 30) == 0);
	CHECK(store_trial_insert(s, study, "search", big, "after", &id, &err) == 1);
	store_close(TAKE_PTR(s));
	s = open_rw(db_path("full.db"));
	CHECK(store_trial_history(s, study, &h, &n, &err) == 0);
	CHECK_INT_EQ(n, (size_t)i + 2);
	store_trial_array_free(h, n);
}

static void test_concurrent_reader(void)
{
	_cleanup_(store_closep) struct store *w = open_rw(db_path("wal.db"));
	_cleanup_(store_closep) struct store *rd = NULL;
	struct store_open_options ro = { .flags = STORE_OPEN_READ_ONLY, .busy_timeout_ms = 100 };
	struct store_trial *h = NULL;
	struct error err = { 0 };
	int64_t study, id;
	size_t n;

	study = add_study(w, "wal");
	CHECK(store_trial_insert(w, study, "search", "{}", "a", &id, &err) == 1);
	CHECK_MSG(store_open(db_path("wal.db"), &ro, &rd, &err) == 0, "%s", err.msg);

	/* The writer holds an open transaction with an uncommitted trial. */
	CHECK(store_begin(w, &err) == 0);
	CHECK(store_trial_insert(w, study, "search", "{}", "b", &id, &err) == 1);
	uint64_t t0 = (uint64_t)time(NULL);
	CHECK_MSG(store_trial_history(rd, study, &h, &n, &err) == 0, "%s", err.msg);
	CHECK_INT_EQ(n, 1); /* sees the committed state, without waiting */
	store_trial_array_free(h, n);
	CHECK((uint64_t)time(NULL) - t0 < 2);
	/* The reader cannot write. */
	CHECK_INT_EQ(store_study_set_state(rd, study, STORE_STUDY_DONE, NULL, &err), -EROFS);
	CHECK(store_commit(w, &err) == 0);
	CHECK(store_trial_history(rd, study, &h, &n, &err) == 0);
	CHECK_INT_EQ(n, 2);
	store_trial_array_free(h, n);

	/* A rolled-back transaction leaves nothing behind. */
	CHECK(store_begin(w, &err) == 0);
	CHECK(store_trial_insert(w, study, "search", "{}", "c", &id, &err) == 1);
	CHECK(store_rollback(w) == 0);
	CHECK(store_trial_history(rd, study, &h, &n, &err) == 0);
	CHECK_INT_EQ(n, 2);
	store_trial_array_free(h, n);
}

/* One writer per file, whatever path names it: a second writer through the
 * same path, a symlink or a hard link is refused, naming the holder;
 * readers are not; once the writer closes, the next one may write. */
static void test_writer_lock(void)
{
	struct store_open_options w = { .flags = STORE_OPEN_WRITER };
	struct store_open_options ro = { .flags = STORE_OPEN_READ_ONLY };
	const char *paths[] = { db_path("lock.db"), db_path("lock-link.db"), db_path("lock-hard.db") };
	struct store *a = NULL, *b = NULL;
	struct lock_holder h;
	struct error err = { 0 };
	int fds[2];
	pid_t child;
	char ok;

	CHECK_MSG(store_open(paths[0], &w, &a, &err) == 0, "%s", err.msg);
	add_study(a, "locked");
	CHECK(symlink(paths[0], paths[1]) == 0);
	CHECK(link(paths[0], paths[2]) == 0);
	for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
		CHECK_INT_EQ(store_open(paths[i], &w, &b, &err), -EBUSY);
		CHECK_STR_CONTAINS(err.msg, "locked by");
		/* (SQLite finds the WAL by the name: a hard link's reader sees none) */
		if (i == 2)
			continue;
		CHECK_MSG(store_open(paths[i], &ro, &b, &err) == 0, "%s", err.msg);
		b = store_close(b);
	}
	a = store_close(a);
	/* held by another process: it is named */
	CHECK(pipe(fds) == 0);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		struct store *c = NULL;

		close(fds[0]);
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed check */
		if (store_open(paths[2], &w, &c, &err) < 0)
			_exit(1);
		(void)!write(fds[1], "!", 1);
		pause();
		_exit(0);
	}
	close(fds[1]);
	CHECK(read(fds[0], &ok, 1) == 1);
	close(fds[0]);
	w.holder = &h;
	CHECK_INT_EQ(store_open(paths[1], &w, &b, &err), -EBUSY);
	CHECK_INT_EQ(h.pid, child);
	CHECK(h.comm[0]); /* (under valgrind not "test-store") */
	kill(child, SIGKILL);
	CHECK(waitpid(child, NULL, 0) == child);
	/* a killed writer's lock is gone with it */
	CHECK_MSG(store_open(paths[1], &w, &b, &err) == 0, "%s", err.msg);
	store_close(b);
}

/* The WAL removed (or replaced) while the writer has it open: what it held
 * is written into the database, and commits after it survive a kill -9.
 * The database file removed: a copy of what the store saw is made, and
 * every later call says so instead of answering from a file nobody has. */
static void test_files_watch(void)
{
	struct store_open_options w = { .flags = STORE_OPEN_WRITER };
	const char *path = db_path("watch.db");
	char wal[300], msg[1024];
	struct store_study *list = NULL;
	struct store_trial *h = NULL;
	struct error err = { 0 };
	struct store *s = NULL;
	int64_t study, id;
	size_t n = 0;
	pid_t child;
	int status;

	snprintf(wal, sizeof(wal), "%s-wal", path);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		int fd;

		/* ends as a kill -9 would: no close, no checkpoint */
		if (store_open(path, &w, &s, &err) < 0)
			_exit(1);
		study = add_study(s, "before");
		if (store_check_files(s, msg, sizeof(msg), &err) != STORE_FILES_OK || unlink(wal) < 0)
			_exit(2);
		if (store_trial_insert(s, study, "search", "{}", "deleted", &id, &err) != 1)
			_exit(3);
		if (store_check_files(s, msg, sizeof(msg), &err) != STORE_FILES_WAL_RESTORED ||
		    !strstr(msg, "nothing was lost"))
			_exit(4);
		if (store_trial_insert(s, study, "search", "{}", "after", &id, &err) != 1)
			_exit(5);
		/* replaced by another file: moved aside, never applied */
		if (unlink(wal) < 0 || (fd = open(wal, O_WRONLY | O_CREAT, 0644)) < 0 || write(fd, "junk", 4) != 4)
			_exit(6);
		close(fd);
		if (store_check_files(s, msg, sizeof(msg), &err) != STORE_FILES_WAL_RESTORED ||
		    !strstr(msg, ".foreign-"))
			_exit(7);
		if (store_trial_insert(s, study, "search", "{}", "last", &id, &err) != 1)
			_exit(8);
		_exit(0);
	}
	CHECK(waitpid(child, &status, 0) == child);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer failed at step %d", WEXITSTATUS(status));
	CHECK_MSG(store_open(path, &w, &s, &err) == 0, "%s", err.msg);
	CHECK(store_study_list(s, &list, &n, &err) == 0 && n == 1);
	study = list[0].id;
	store_study_array_free(list, n);
	CHECK(store_trial_history(s, study, &h, &n, &err) == 0);
	CHECK_INT_EQ(n, 3);
	CHECK_STR_EQ(h[2].canonical_key, "last");
	store_trial_array_free(h, n);

	/* the database file removed: lost, saved, and said so from then on */
	CHECK(unlink(path) == 0);
	CHECK_INT_EQ(store_check_files(s, msg, sizeof(msg), &err), STORE_FILES_LOST);
	CHECK_STR_CONTAINS(msg, "was removed while it was open");
	CHECK_STR_CONTAINS(msg, ".rescued-");
	CHECK_INT_EQ(store_study_list(s, &list, &n, &err), -ESTALE);
	CHECK_STR_CONTAINS(err.msg, "saved as");
	CHECK_INT_EQ(store_check_files(s, msg, sizeof(msg), &err), STORE_FILES_LOST);
	{
		char copy[600], *p = strstr(msg, "saved as ");
		struct store_open_options ro = { .flags = STORE_OPEN_READ_ONLY };
		struct store *r = NULL;

		CHECK(p);
		snprintf(copy, sizeof(copy), "%.*s", (int)strcspn(p + 9, ";"), p + 9);
		CHECK_MSG(store_open(copy, &ro, &r, &err) == 0, "%s", err.msg);
		CHECK(store_trial_history(r, study, &h, &n, &err) == 0);
		CHECK_INT_EQ(n, 3);
		store_trial_array_free(h, n);
		store_close(r);
	}
	store_close(s);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

/* Version 4: the twin's calibrations, one row per key, replaced on upsert. */
static void test_twin_calibrations(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("twin.db"));
	struct store_twin_calibration c = {
		.key = "vllm|0.6.3|H100|550.54|llama-3.1-8b", .engine = "vllm", .engine_version = "0.6.3",
		.gpu = "H100", .driver = "550.54", .model = "llama-3.1-8b", .calibration_json = "{\"a\":1}",
		.fit_error = 0.0312345678901234567, .cost_error = NAN, .study_id = 0,
	}, got = { 0 };
	struct error err = { 0 };

	CHECK_INT_EQ(store_twin_calibration_get(s, c.key, &got, &err), -ENOENT);
	CHECK_STR_CONTAINS(err.msg, "no twin calibration");
	CHECK_MSG(store_twin_calibration_upsert(s, &c, &err) == 0, "%s", err.msg);
	CHECK_MSG(store_twin_calibration_get(s, c.key, &got, &err) == 0, "%s", err.msg);
	CHECK_STR_EQ(got.calibration_json, "{\"a\":1}");
	CHECK_STR_EQ(got.driver, "550.54");
	CHECK(got.fit_error == c.fit_error); /* bit-exact */
	CHECK(isnan(got.cost_error));
	CHECK(got.study_id == 0 && got.updated_usec > 0);
	store_twin_calibration_done(&got);
	/* drift: the new calibration replaces the old one */
	c.calibration_json = "{\"a\":2}";
	c.cost_error = 0.05;
	c.study_id = 3;
	CHECK_MSG(store_twin_calibration_upsert(s, &c, &err) == 0, "%s", err.msg);
	CHECK(store_twin_calibration_get(s, c.key, &got, &err) == 0);
	CHECK_STR_EQ(got.calibration_json, "{\"a\":2}");
	CHECK(got.cost_error == 0.05 && got.study_id == 3);
	store_twin_calibration_done(&got);
	store_twin_calibration_done(NULL);
	c.key = NULL;
	CHECK_INT_EQ(store_twin_calibration_upsert(s, &c, &err), -EINVAL);
}

/* An hour of watched traffic: written, rewritten as it fills, read back
 * per study in time order (another study's watch apart). */
static void test_traffic(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("traffic.db"));
	struct store_traffic_shape t = {
		.watch = "http://a:8000/metrics",
		.study = "chat",
		.hour_usec = 7200000000,
		.seconds = 60,
		.requests = 300,
		.arrivals = 301,
		.mean_rate = 5.0166,
		.peak_rate = 9,
		.burstiness = 0.97,
		.input_mean = 256,
		.output_mean = 128,
		.prefix_hit_rate = NAN,
		.drift = 0.01,
		.rate_change = NAN,
		.shape_json = "{\"input_len\":256}",
	};
	struct store_traffic_shape *a = NULL;
	struct error err = { 0 };
	size_t n = 0;

	CHECK_MSG(store_traffic_upsert(s, &t, &err) == 0, "%s", err.msg);
	t.hour_usec = 3600000000;
	CHECK(store_traffic_upsert(s, &t, &err) == 0);
	/* the hour fills: the same row, newer figures */
	t.requests = 600;
	t.flagged = true;
	t.drift = 0.9;
	CHECK(store_traffic_upsert(s, &t, &err) == 0);
	t.watch = "http://b:8000/metrics";
	t.study = "rag";
	CHECK(store_traffic_upsert(s, &t, &err) == 0);
	CHECK_MSG(store_traffic_list_study(s, "chat", 0, &a, &n, &err) == 0, "%s", err.msg);
	CHECK(n == 2 && a[0].hour_usec == 3600000000 && a[0].requests == 600 && a[0].flagged && a[0].drift == 0.9);
	CHECK(a[1].hour_usec == 7200000000 && a[1].requests == 300 && !a[1].flagged && isnan(a[1].rate_change));
	CHECK(a[1].mean_rate == 5.0166 && a[1].updated_usec > 0);
	CHECK_STR_EQ(a[1].shape_json, "{\"input_len\":256}");
	store_traffic_shape_array_free(a, n);
	CHECK(store_traffic_list_study(s, "chat", 7200000000, &a, &n, &err) == 0 && n == 1);
	store_traffic_shape_array_free(a, n);
	CHECK(store_traffic_list_study(s, "rag", 0, &a, &n, &err) == 0 && n == 1);
	CHECK_STR_EQ(a[0].watch, "http://b:8000/metrics");
	store_traffic_shape_array_free(a, n);
	t.watch = NULL;
	CHECK_INT_EQ(store_traffic_upsert(s, &t, &err), -EINVAL);
}

/* Rows that another writer left: state and failure names that only a newer
 * goodput knows read back as failed and crashed rather than as nothing;
 * columns left NULL read as "none". */
static void test_foreign_rows(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("foreign.db"));
	_cleanup_(sqlite3_close_v2p) sqlite3 *db = NULL;
	struct store_study st = { 0 };
	struct store_trial t = { 0 };
	struct error err = { 0 };

	CHECK(sqlite3_open(db_path("foreign.db"), &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db,
			   "INSERT INTO studies (id, name, spec, state, created_usec, seed, algorithm, nlopt_version)"
			   " VALUES (5, 'future', '{}', 'hibernating', 1, 7, 'LN_SBPLX', '2.7.1');"
			   "INSERT INTO trials (id, study_id, seq, kind, knobs, canonical_key, state, failure_class)"
			   " VALUES (9, 5, 1, 'search', '{}', 'k', 'migrating', 'gpu_fell_off_the_bus');"
			   "INSERT INTO trials (id, study_id, seq, kind, knobs, canonical_key, state)"
			   " VALUES (10, 5, 2, 'search', '{}', 'k2', 'done');",
			   NULL, NULL, NULL) == SQLITE_OK);
	CHECK_MSG(store_study_get(s, 5, &st, &err) == 0, "%s", err.msg);
	CHECK(st.state == STORE_STUDY_FAILED && st.seed == 7 && !st.label && st.best_trial_id == 0);
	store_study_done(&st);
	CHECK_MSG(store_trial_get(s, 9, &t, &err) == 0, "%s", err.msg);
	CHECK(t.state == STORE_TRIAL_FAILED && t.failure == STORE_FAILURE_CRASHED && t.seq == 1);
	store_trial_done(&t);
	CHECK_MSG(store_trial_get(s, 10, &t, &err) == 0, "%s", err.msg);
	CHECK(t.state == STORE_TRIAL_DONE && t.failure == STORE_FAILURE_NONE && isnan(t.cost_per_mtok));
	CHECK(!t.failure_message && !t.server_unit && t.server_pgid == 0);
	store_trial_done(&t);
}

/* A trial of several servers: each role recorded before it runs, listed for
 * the orphan sweep, all cleared with the trial's server. */
static void test_role_servers(void)
{
	_cleanup_(store_closep) struct store *s = open_rw(db_path("roles.db"));
	struct store_role_server *a = NULL;
	struct error err = { 0 };
	int64_t study, trial;
	size_t n = 0;

	study = add_study(s, "roles");
	CHECK(store_trial_insert(s, study, "search", "{\"shape\":\"disaggregated\"}", "shape=disaggregated", &trial,
				 &err) == 1);
	CHECK(store_trial_add_server(s, trial, "prefill-0", &(struct store_server){ .pgid = 101, .identity = "b:1" },
				     &err) == 0);
	CHECK(store_trial_add_server(s, trial, "decode-0",
				     &(struct store_server){ .unit = "goodput-x-1-decode-0.service" }, &err) == 0);
	CHECK(store_trial_add_server(s, trial, "router", &(struct store_server){ .pgid = 103 }, &err) == 0);
	/* a role recorded again (a redone trial) replaces its row */
	CHECK(store_trial_add_server(s, trial, "router", &(struct store_server){ .pgid = 104, .identity = "b:4" },
				     &err) == 0);
	CHECK_INT_EQ(store_trial_add_server(s, trial, "", &(struct store_server){ .pgid = 1 }, &err), -EINVAL);
	CHECK(store_study_role_servers(s, study, &a, &n, &err) == 0);
	CHECK_INT_EQ(n, 3);
	CHECK_STR_EQ(a[0].role, "decode-0");
	CHECK(a[0].pgid == 0 && !a[0].identity);
	CHECK_STR_EQ(a[0].unit, "goodput-x-1-decode-0.service");
	CHECK_STR_EQ(a[1].role, "prefill-0");
	CHECK(a[1].pgid == 101 && a[1].trial_id == trial);
	CHECK_STR_EQ(a[1].identity, "b:1");
	CHECK(a[2].pgid == 104);
	store_role_server_array_free(a, n);
	CHECK(store_trial_set_server(s, trial, NULL, NULL, &err) == 0);
	CHECK(store_study_role_servers(s, study, &a, &n, &err) == 0);
	CHECK_INT_EQ(n, 0);
	store_role_server_array_free(a, n);
}

int main(void)
{
	CHECK(mkdtemp(dir));
	test_role_servers();
	test_fresh_file();
	test_migrate_from_previous();
	test_migrate_from_v1();
	test_newer_file_refused();
	test_round_trip();
	test_study_best();
	test_study_closest();
	test_uniqueness();
	test_resume();
	test_disk_full();
	test_concurrent_reader();
	test_twin_calibrations();
	test_traffic();
	test_foreign_rows();
	test_writer_lock();
	test_files_watch();
	CHECK(nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0);
	return 0;
}
