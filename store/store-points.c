/* store-points.c — the rows of the load_points table: key figures of each
 * load point as columns beside the full result object (probe_result_to_json). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "time-util.h"

/* ---- load points ---- */

void store_load_point_done(struct store_load_point *lp)
{
	if (!lp)
		return;
	free(lp->phase);
	free(lp->result_json);
	*lp = (struct store_load_point){ 0 };
}

void store_load_point_array_free(struct store_load_point *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++)
		store_load_point_done(&a[i]);
	free(a);
}

/* The p-th percentile of metric m, or NAN when the result does not carry it. */
static double pct(const struct probe_result *r, enum probe_metric m, double p)
{
	if (r->stat[m].n == 0)
		return NAN;
	if (p == 50)
		return r->stat[m].median_ms;
	for (size_t i = 0; i < r->n_percentiles && i < PROBE_MAX_PERCENTILES; i++)
		if (r->percentiles[i] == p)
			return r->stat[m].pct_ms[i];
	return NAN;
}

static double mean(const struct probe_result *r, enum probe_metric m)
{
	return r->stat[m].n ? r->stat[m].mean_ms : NAN;
}

static double server(const struct probe_result *r, double v)
{
	return r->server.present ? v : NAN;
}

int store_load_point_insert(struct store *s, int64_t trial_id, uint32_t seq, const char *phase,
			    const struct probe_result *res, int64_t *ret_id, struct error *err)
{
	return store_load_point_insert_gpu(s, trial_id, seq, phase, res, NULL, ret_id, err);
}

int store_load_point_insert_gpu(struct store *s, int64_t trial_id, uint32_t seq, const char *phase,
				const struct probe_result *res, const struct store_gpu_figures *gpu, int64_t *ret_id,
				struct error *err)
{
	const struct store_gpu_figures none = { NAN, NAN, NAN, NAN };
	const char *what = "inserting a load point";
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(cjson_freep) char *json = NULL;
	sqlite3_stmt *st;
	int r, rc, i = 1;

	r = probe_result_to_json(res, &j);
	if (r < 0)
		return error_set(err, r, "%s: %s: cannot encode the result", s->path, what);
	json = cJSON_PrintUnformatted(j);
	if (!json)
		return error_set(err, -ENOMEM, "%s: %s: out of memory", s->path, what);
	r = store_stmt(s, STMT_LP_INSERT, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, i++, trial_id);
	if (r == 0)
		r = store_bind_int64(st, i++, seq);
	if (r == 0)
		r = store_bind_text(st, i++, phase ? phase : "search");
	if (r == 0)
		r = store_bind_double(st, i++, res->request_rate);
	if (r == 0)
		r = store_bind_int64(st, i++, res->max_concurrency);
	if (r == 0)
		r = store_bind_double(st, i++, res->attainment);
	if (r == 0)
		r = store_bind_int64(st, i++, res->sla_met);
	if (r == 0)
		r = store_bind_int64(st, i++, res->completed);
	if (r == 0)
		r = store_bind_int64(st, i++, res->failed);
	if (r == 0)
		r = store_bind_double(st, i++, mean(res, PROBE_METRIC_TTFT));
	if (r == 0)
		r = store_bind_double(st, i++, pct(res, PROBE_METRIC_TTFT, 50));
	if (r == 0)
		r = store_bind_double(st, i++, pct(res, PROBE_METRIC_TTFT, 90));
	if (r == 0)
		r = store_bind_double(st, i++, pct(res, PROBE_METRIC_TTFT, 99));
	if (r == 0)
		r = store_bind_double(st, i++, mean(res, PROBE_METRIC_TPOT));
	if (r == 0)
		r = store_bind_double(st, i++, pct(res, PROBE_METRIC_TPOT, 50));
	if (r == 0)
		r = store_bind_double(st, i++, pct(res, PROBE_METRIC_TPOT, 90));
	if (r == 0)
		r = store_bind_double(st, i++, pct(res, PROBE_METRIC_TPOT, 99));
	if (r == 0)
		r = store_bind_double(st, i++, pct(res, PROBE_METRIC_ITL, 99));
	if (r == 0)
		r = store_bind_double(st, i++, pct(res, PROBE_METRIC_E2EL, 99));
	if (r == 0)
		r = store_bind_double(st, i++, res->request_throughput);
	if (r == 0)
		r = store_bind_double(st, i++, res->output_throughput);
	if (r == 0)
		r = store_bind_double(st, i++, res->total_token_throughput);
	if (r == 0)
		r = store_bind_double(st, i++, res->good_output_throughput);
	if (r == 0)
		r = store_bind_double(st, i++, res->request_goodput);
	if (r == 0)
		r = store_bind_double(st, i++, res->mean_concurrency);
	if (r == 0)
		r = store_bind_double(st, i++, server(res, res->server.kv_usage_peak));
	if (r == 0)
		r = store_bind_double(st, i++, server(res, res->server.running_peak));
	if (r == 0)
		r = store_bind_double(st, i++, server(res, res->server.waiting_peak));
	if (r == 0)
		r = store_bind_double(st, i++, server(res, res->server.preemptions));
	if (r == 0)
		r = store_bind_text(st, i++, json);
	if (r == 0)
		r = store_bind_int64(st, i++, (int64_t)real_usec());
	if (!gpu)
		gpu = &none;
	if (r == 0)
		r = store_bind_double(st, i++, gpu->util_mean);
	if (r == 0)
		r = store_bind_double(st, i++, gpu->util_peak);
	if (r == 0)
		r = store_bind_double(st, i++, gpu->mem_mean_mib);
	if (r == 0)
		r = store_bind_double(st, i++, gpu->mem_peak_mib);
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if ((rc & 0xff) == SQLITE_CONSTRAINT)
		return error_set(err, -EEXIST, "%s: %s: trial %lld has no such trial or load point %u exists already",
				 s->path, what, (long long)trial_id, seq);
	if (rc != SQLITE_DONE)
		return store_sql_error(s, rc, what, err);
	if (ret_id)
		*ret_id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

static int lp_from_row(sqlite3_stmt *st, struct store_load_point *ret)
{
	struct store_load_point p = { 0 };
	int r = 0, c = 0;

	p.id = sqlite3_column_int64(st, c++);
	p.trial_id = sqlite3_column_int64(st, c++);
	p.seq = (uint32_t)sqlite3_column_int64(st, c++);
	if (r == 0)
		r = store_col_text(st, c++, &p.phase);
	p.request_rate = store_col_double(st, c++);
	p.max_concurrency = (uint32_t)sqlite3_column_int64(st, c++);
	p.attainment = store_col_double(st, c++);
	p.sla_met = sqlite3_column_int(st, c++) != 0;
	p.completed = (uint32_t)sqlite3_column_int64(st, c++);
	p.failed = (uint32_t)sqlite3_column_int64(st, c++);
	double *d[] = { &p.mean_ttft_ms,
			&p.p50_ttft_ms,
			&p.p90_ttft_ms,
			&p.p99_ttft_ms,
			&p.mean_tpot_ms,
			&p.p50_tpot_ms,
			&p.p90_tpot_ms,
			&p.p99_tpot_ms,
			&p.p99_itl_ms,
			&p.p99_e2el_ms,
			&p.request_throughput,
			&p.output_throughput,
			&p.total_token_throughput,
			&p.good_output_throughput,
			&p.request_goodput,
			&p.mean_concurrency,
			&p.kv_usage_peak,
			&p.running_peak,
			&p.waiting_peak,
			&p.preemptions,
			&p.gpu_util_mean,
			&p.gpu_util_peak,
			&p.gpu_mem_mean_mib,
			&p.gpu_mem_peak_mib };
	for (size_t k = 0; k < ELEMENTSOF(d); k++)
		*d[k] = store_col_double(st, c++);
	if (r == 0)
		r = store_col_text(st, c++, &p.result_json);
	p.created_usec = (uint64_t)sqlite3_column_int64(st, c++);
	if (r < 0) {
		store_load_point_done(&p);
		return r;
	}
	*ret = p;
	return 0;
}

int store_load_point_list(struct store *s, int64_t trial_id, struct store_load_point **ret, size_t *ret_n,
			  struct error *err)
{
	const char *what = "listing load points";
	struct store_load_point *a = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st;
	int r, rc;

	r = store_stmt(s, STMT_LP_LIST, what, &st, err);
	if (r < 0)
		return r;
	r = store_bind_int64(st, 1, trial_id);
	if (r < 0)
		return error_set(err, r, "%s: %s: binding failed", s->path, what);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		r = store_grow((void **)&a, &cap, n, sizeof(*a));
		if (r == 0)
			r = lp_from_row(st, &a[n]);
		if (r < 0) {
			sqlite3_reset(st);
			store_load_point_array_free(a, n);
			return error_set(err, r, "%s: %s: out of memory", s->path, what);
		}
		n++;
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		store_load_point_array_free(a, n);
		return store_sql_error(s, rc, what, err);
	}
	*ret = a;
	*ret_n = n;
	return 0;
}
