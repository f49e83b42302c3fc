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

/* ---- the row ---- */

#define COL(type, field) STORE_COLUMN(type, struct store_load_point, field)
static const struct store_column lp_columns[] = { COL(INT64, id),
						  COL(INT64, trial_id),
						  COL(UINT32, seq),
						  COL(TEXT, phase),
						  COL(DOUBLE, request_rate),
						  COL(UINT32, max_concurrency),
						  COL(DOUBLE, attainment),
						  COL(BOOL, sla_met),
						  COL(UINT32, completed),
						  COL(UINT32, failed),
						  COL(DOUBLE, mean_ttft_ms),
						  COL(DOUBLE, p50_ttft_ms),
						  COL(DOUBLE, p90_ttft_ms),
						  COL(DOUBLE, p99_ttft_ms),
						  COL(DOUBLE, mean_tpot_ms),
						  COL(DOUBLE, p50_tpot_ms),
						  COL(DOUBLE, p90_tpot_ms),
						  COL(DOUBLE, p99_tpot_ms),
						  COL(DOUBLE, p99_itl_ms),
						  COL(DOUBLE, p99_e2el_ms),
						  COL(DOUBLE, request_throughput),
						  COL(DOUBLE, output_throughput),
						  COL(DOUBLE, total_token_throughput),
						  COL(DOUBLE, good_output_throughput),
						  COL(DOUBLE, request_goodput),
						  COL(DOUBLE, mean_concurrency),
						  COL(DOUBLE, kv_usage_peak),
						  COL(DOUBLE, running_peak),
						  COL(DOUBLE, waiting_peak),
						  COL(DOUBLE, preemptions),
						  COL(DOUBLE, gpu_util_mean),
						  COL(DOUBLE, gpu_util_peak),
						  COL(DOUBLE, gpu_mem_mean_mib),
						  COL(DOUBLE, gpu_mem_peak_mib),
						  STORE_COLUMN_AS(TEXT, struct store_load_point, result_json, "result"),
						  COL(UINT64, created_usec) };
#undef COL

const struct store_row store_load_point_row = { lp_columns, ELEMENTSOF(lp_columns), sizeof(struct store_load_point) };

STORE_ROW_DONE_FUNC(store_load_point_row, struct store_load_point, store_load_point_done)
STORE_ROW_ARRAY_FREE_FUNC(store_load_point_row, struct store_load_point, store_load_point_array_free)

/* ---- load points ---- */

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
	int r;

	r = probe_result_to_json(res, &j);
	if (r < 0)
		return error_set(err, r, "%s: %s: cannot encode the result", s->path, what);
	json = cJSON_PrintUnformatted(j);
	if (!json)
		return error_set(err, -ENOMEM, "%s: %s: out of memory", s->path, what);
	if (!gpu)
		gpu = &none;
	r = store_insert(
		s, STMT_LP_INSERT, what,
		STORE_VALUES(
			STORE_INT(trial_id), STORE_INT(seq), STORE_TEXT(phase ? phase : "search"),
			STORE_DOUBLE(res->request_rate), STORE_INT(res->max_concurrency), STORE_DOUBLE(res->attainment),
			STORE_INT(res->sla_met), STORE_INT(res->completed), STORE_INT(res->failed),
			STORE_DOUBLE(mean(res, PROBE_METRIC_TTFT)), STORE_DOUBLE(pct(res, PROBE_METRIC_TTFT, 50)),
			STORE_DOUBLE(pct(res, PROBE_METRIC_TTFT, 90)), STORE_DOUBLE(pct(res, PROBE_METRIC_TTFT, 99)),
			STORE_DOUBLE(mean(res, PROBE_METRIC_TPOT)), STORE_DOUBLE(pct(res, PROBE_METRIC_TPOT, 50)),
			STORE_DOUBLE(pct(res, PROBE_METRIC_TPOT, 90)), STORE_DOUBLE(pct(res, PROBE_METRIC_TPOT, 99)),
			STORE_DOUBLE(pct(res, PROBE_METRIC_ITL, 99)), STORE_DOUBLE(pct(res, PROBE_METRIC_E2EL, 99)),
			STORE_DOUBLE(res->request_throughput), STORE_DOUBLE(res->output_throughput),
			STORE_DOUBLE(res->total_token_throughput), STORE_DOUBLE(res->good_output_throughput),
			STORE_DOUBLE(res->request_goodput), STORE_DOUBLE(res->mean_concurrency),
			STORE_DOUBLE(server(res, res->server.kv_usage_peak)),
			STORE_DOUBLE(server(res, res->server.running_peak)),
			STORE_DOUBLE(server(res, res->server.waiting_peak)),
			STORE_DOUBLE(server(res, res->server.preemptions)), STORE_DOUBLE(gpu->util_mean),
			STORE_DOUBLE(gpu->util_peak), STORE_DOUBLE(gpu->mem_mean_mib), STORE_DOUBLE(gpu->mem_peak_mib),
			STORE_TEXT(json), STORE_INT(real_usec())),
		ret_id, err);
	if (r == -EEXIST)
		return error_set(err, -EEXIST, "%s: %s: trial %lld has no such trial or load point %u exists already",
				 s->path, what, (long long)trial_id, seq);
	return r < 0 ? r : 0;
}

int store_load_point_list(struct store *s, int64_t trial_id, struct store_load_point **ret, size_t *ret_n,
			  struct error *err)
{
	return store_list(s, STMT_LP_LIST, "listing load points", STORE_VALUES(STORE_INT(trial_id)), (void **)ret,
			  ret_n, err);
}

double store_load_point_offered_rate(const struct store_load_point *lp)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	const cJSON *v;

	if (!lp || !lp->result_json || !isfinite(lp->request_rate))
		return NAN;
	j = cJSON_Parse(lp->result_json);
	v = cJSON_GetObjectItemCaseSensitive(j, "offered_rate");
	return cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble : NAN;
}

const struct store_load_point *store_load_point_at_max(const struct store_load_point *lp, size_t n, double max_rate)
{
	const struct store_load_point *best = NULL;

	for (size_t i = 0; i < n; i++) {
		if (!lp[i].sla_met)
			continue;
		if (!best || fabs(lp[i].request_rate - max_rate) < fabs(best->request_rate - max_rate))
			best = &lp[i];
	}
	return best ? best : (n > 0 ? &lp[n - 1] : NULL);
}
