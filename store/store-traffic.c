/* store-traffic.c — the traffic a watched endpoint served, hour by hour.
 *
 * goodputd's watch (daemon-watch.c) scrapes a production server and keeps
 * one row per endpoint and hour, rewritten as the hour fills: the figures a
 * report plots as columns (rate, lengths, burstiness, drift) and the whole
 * shape as the workload block capture writes, opaque here. A study's rows
 * are the production traffic beside the workload it was tuned for. */
#include <errno.h>
#include <stdio.h>

#include "macro.h"
#include "store-internal.h"
#include "time-util.h"

#define COL(type, field) STORE_COLUMN(type, struct store_traffic_shape, field)
static const struct store_column traffic_columns[] = {
	COL(INT64, id),
	{ "watch", STORE_COL_TEXT, offsetof(struct store_traffic_shape, watch), .required = true },
	COL(TEXT, study),
	COL(UINT64, hour_usec),
	COL(DOUBLE, seconds),
	COL(DOUBLE, requests),
	COL(DOUBLE, arrivals),
	COL(DOUBLE, mean_rate),
	COL(DOUBLE, peak_rate),
	COL(DOUBLE, burstiness),
	COL(DOUBLE, input_mean),
	COL(DOUBLE, output_mean),
	COL(DOUBLE, prefix_hit_rate),
	COL(DOUBLE, drift),
	COL(DOUBLE, rate_change),
	COL(BOOL, flagged),
	STORE_COLUMN_AS(TEXT, struct store_traffic_shape, shape_json, "shape"),
	COL(UINT64, updated_usec),
};
#undef COL

const struct store_row store_traffic_row = { traffic_columns, ELEMENTSOF(traffic_columns),
					     sizeof(struct store_traffic_shape) };

STORE_ROW_DONE_FUNC(store_traffic_row, struct store_traffic_shape, store_traffic_shape_done)
STORE_ROW_ARRAY_FREE_FUNC(store_traffic_row, struct store_traffic_shape, store_traffic_shape_array_free)

int store_traffic_upsert(struct store *s, const struct store_traffic_shape *t, struct error *err)
{
	const char *what = "recording an hour of traffic";
	int r;

	if (!t->watch || !*t->watch)
		return error_set(err, -EINVAL, "%s: %s: the watch is required", s->path, what);
	r = store_exec(s, STMT_TRAFFIC_UPSERT, what,
		       STORE_VALUES(STORE_TEXT(t->watch), STORE_TEXT(t->study), STORE_INT(t->hour_usec),
				    STORE_DOUBLE(t->seconds), STORE_DOUBLE(t->requests), STORE_DOUBLE(t->arrivals),
				    STORE_DOUBLE(t->mean_rate), STORE_DOUBLE(t->peak_rate), STORE_DOUBLE(t->burstiness),
				    STORE_DOUBLE(t->input_mean), STORE_DOUBLE(t->output_mean),
				    STORE_DOUBLE(t->prefix_hit_rate), STORE_DOUBLE(t->drift),
				    STORE_DOUBLE(t->rate_change), STORE_INT(t->flagged), STORE_TEXT(t->shape_json),
				    STORE_INT(real_usec())),
		       err);
	return r < 0 ? r : 0;
}

int store_traffic_list_study(struct store *s, const char *study, uint64_t since_usec, struct store_traffic_shape **ret,
			     size_t *ret_n, struct error *err)
{
	return store_list(s, STMT_TRAFFIC_LIST_STUDY, "reading a study's traffic",
			  STORE_VALUES(STORE_TEXT(study), STORE_INT(since_usec)), (void **)ret, ret_n, err);
}
