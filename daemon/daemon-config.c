/* daemon-config.c — parses goodputd.json (see daemon-config.h for the keys).
 *
 * The daemon reads this file at start and on SIGHUP; a reload that fails
 * keeps the configuration in force, so every check happens here (one
 * json_dispatch table), before the daemon swaps the new object in. */
#include "daemon-config.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json-dispatch.h"
#include "json-util.h"
#include "macro.h"
#include "parse.h"
#include "time-util.h"

static void set_defaults(struct daemon_config *c)
{
	c->limits.max_connections = 512;
	c->limits.max_connections_per_uid = 32;
	c->limits.reserved_connections = 512 / 8;
	c->limits.max_request_bytes = 1024 * 1024;
	c->limits.idle_timeout_usec = 60 * USEC_PER_SEC;
	c->limits.max_queued_studies = 100;
}

int daemon_config_new_default(struct daemon_config **ret)
{
	struct daemon_config *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	set_defaults(c);
	*ret = c;
	return 0;
}

static int resolve_group(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct daemon_config *c = base;
	struct group *g;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	errno = 0;
	g = getgrnam(c->socket_group);
	if (!g)
		return error_set(err, errno > 0 ? -errno : -ENOENT, "%s: no group \"%s\" on this host", path,
				 c->socket_group);
	c->socket_gid = g->gr_gid;
	return 0;
}

static int check_prices(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	const cJSON *p;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(p, v)
	{
		if (!cJSON_IsNumber(p) || !isfinite(p->valuedouble) || p->valuedouble < 0 || p->valuedouble > 1000)
			return error_set(err, -EINVAL, "%s.%s: expected a price in [0, 1000] $/GPU-hour", path,
					 p->string);
	}
	return 0;
}

/* The reserved slots follow the total unless given (their row comes later). */
static int store_max_connections(const cJSON *v, const char *path, const struct json_field *f, void *base,
				 struct error *err)
{
	struct daemon_config *c = base;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	c->limits.reserved_connections = c->limits.max_connections / 8;
	return 0;
}

static int check_reserved(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct daemon_config *c = base;
	int r;

	r = json_dispatch_store(v, path, f, base, err);
	if (r < 0)
		return r;
	if (c->limits.reserved_connections >= c->limits.max_connections)
		return error_set(err, -EINVAL, "%s: %u leaves no connection for anyone else (max_connections is %u)",
				 path, c->limits.reserved_connections, c->limits.max_connections);
	return 0;
}

/* An absolute path ending in .prom: node_exporter reads only those, and a
 * relative one would depend on where goodputd was started. */
static int check_metrics_file(const cJSON *v, const char *path, const struct json_field *f, void *base,
			      struct error *err)
{
	size_t n = strlen(v->valuestring);

	if (v->valuestring[0] != '/' || n < 6 || strcmp(v->valuestring + n - 5, ".prom") != 0)
		return error_set(err, -EINVAL, "%s: expected an absolute path ending in .prom, got \"%.200s\"", path,
				 v->valuestring);
	return json_dispatch_store(v, path, f, base, err);
}

/* ---- watch ---- */

static const char *const retune_names[] = { "notify", "queue", NULL };

static int check_url(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	if (strncmp(v->valuestring, "http://", 7) != 0 && strncmp(v->valuestring, "https://", 8) != 0)
		return error_set(err, -EINVAL, "%s: expected an http:// or https:// URL, got \"%.200s\"", path,
				 v->valuestring);
	return json_dispatch_store(v, path, f, base, err);
}

/* The window the re-tune's spec gets: refused here as the spec would refuse it. */
static int check_window(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	unsigned start, end;
	int r;

	r = parse_daily_window(path, v->valuestring, &start, &end, err);
	if (r < 0)
		return r;
	return json_dispatch_store(v, path, f, base, err);
}

#define WOFF(field) offsetof(struct daemon_watch_config, field)

static const struct json_field watch_fields[] = {
	{ "metrics_url", JSON_STRING, WOFF(metrics_url), .callback = check_url, .flags = JSON_MANDATORY, .max = 2048,
	  .doc = "the production engine's metrics page, e.g. http://vllm-01:8000/metrics" },
	{ "study", JSON_STRING, WOFF(study), .flags = JSON_MANDATORY, .max = 128,
	  .doc = "the study (by name, in goodputd's store) tuned for this traffic: its workload is what the traffic "
		 "is compared with" },
	{ "engine", JSON_STRING, WOFF(engine), .max = 256, .def = "the study's engine",
	  .doc = "engine profile whose metric names are read (metrics.series)" },
	{ "interval", JSON_DURATION, WOFF(interval_usec), .min = 1, .max = 86400, .def = "60",
	  .doc = "between scrapes: one watch interval, the unit drift is judged in" },
	{ "threshold", JSON_DOUBLE, WOFF(threshold), .min = 0.01, .max = 1, .def = "0.2",
	  .doc = "Kolmogorov–Smirnov distance (at the histogram's buckets) of the input or output lengths from the "
		 "study's that counts as drift" },
	{ "rate_threshold", JSON_DOUBLE, WOFF(rate_threshold), .min = 0.01, .max = 1000, .def = "1",
	  .doc = "relative change of the arrival rate from the study's (its rate profile, else what its capture "
		 "measured) that counts as drift: 1 = doubled or halved" },
	{ "consecutive", JSON_U32, WOFF(consecutive), .min = 1, .max = 1000, .def = "2",
	  .doc = "drifted intervals in a row before drift is flagged" },
	{ "min_requests", JSON_U32, WOFF(min_requests), .min = 1, .max = 1000000, .def = "20",
	  .doc = "requests an interval needs to be judged; a quieter one is judged with the next" },
	{ "retune", JSON_ENUM, WOFF(retune), .choices = retune_names, .def = "notify",
	  .doc = "notify (the log, status and metrics say it) or queue (also queue a re-tune of the study on the "
		 "captured traffic, into its window)" },
	{ "window", JSON_STRING, WOFF(window), .callback = check_window, .max = 16, .def = "the study's",
	  .doc = "the re-tune's daily time window \"HH:MM-HH:MM\"" },
	{ 0 },
};

static int parse_watch(const cJSON *v, const char *path, const struct json_field *f, void *base, struct error *err)
{
	struct daemon_config *c = base;
	const cJSON *item;
	size_t i = 0;

	(void)f;
	c->watch = calloc((size_t)MAX(cJSON_GetArraySize(v), 1), sizeof(*c->watch));
	if (!c->watch)
		return error_set(err, -ENOMEM, "out of memory");
	cJSON_ArrayForEach(item, v)
	{
		struct daemon_watch_config *w = &c->watch[i];
		char p[64];
		int r;

		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (!cJSON_IsObject(item))
			return json_wrong(item, p, "an object {\"metrics_url\": ..., \"study\": ...}", err);
		*w = (struct daemon_watch_config){ .interval_usec = 60 * USEC_PER_SEC,
						   .threshold = 0.2,
						   .rate_threshold = 1,
						   .consecutive = 2,
						   .min_requests = 20 };
		r = json_dispatch(item, p, watch_fields, 0, w, err);
		if (r < 0)
			return r;
		for (size_t k = 0; k < i; k++)
			if (strcmp(c->watch[k].metrics_url, w->metrics_url) == 0)
				return error_set(err, -EINVAL, "%s.metrics_url: \"%.200s\" is watched already", p,
						 w->metrics_url);
		c->n_watch = ++i;
	}
	return 0;
}

#define OFF(field) offsetof(struct daemon_config, field)

static const struct json_field limits_fields[] = {
	{ "max_connections", JSON_U32, OFF(limits.max_connections), .callback = store_max_connections, .min = 1,
	  .max = 65536, .def = "512", .doc = "control-socket clients at once" },
	{ "max_connections_per_uid", JSON_U32, OFF(limits.max_connections_per_uid), .min = 1, .max = 65536, .def = "32",
	  .doc = "of those, held by one uid (root and goodputd's own are exempt)" },
	{ "reserved_connections", JSON_U32, OFF(limits.reserved_connections), .callback = check_reserved, .min = 0,
	  .max = 65535, .def = "an eighth of max_connections",
	  .doc = "of those, kept for root, goodputd's user and socket_group" },
	{ "max_request_bytes", JSON_SIZE, OFF(limits.max_request_bytes), .min = 1024, .max = 64 * 1024 * 1024,
	  .def = "1048576", .doc = "longest request line (a submitted spec)" },
	{ "idle_timeout", JSON_SECONDS, OFF(limits.idle_timeout_usec), .min = 0.1, .max = 86400, .def = "60",
	  .doc = "seconds a client may stay silent" },
	{ "max_queued_studies", JSON_U32, OFF(limits.max_queued_studies), .min = 1, .max = 100000, .def = "100",
	  .doc = "studies waiting or running at once" },
	{ 0 },
};

static const struct json_field config_fields[] = {
	{ "socket_group", JSON_STRING, OFF(socket_group), .callback = resolve_group, .max = 256,
	  .def = "none (root and the daemon's user only)",
	  .doc = "group whose members may change state (submit, cancel, pause, resume)" },
	{ "engines_dir", JSON_STRING, OFF(engines_dir), .max = 4096,
	  .doc = "where engine profiles are looked for first" },
	{ "prices", JSON_OBJECT, OFF(prices), .callback = check_prices,
	  .schema = "{\"additionalProperties\": {\"type\": \"number\", \"minimum\": 0, \"maximum\": 1000}}",
	  .doc = "$/GPU-hour by gpu.type, for studies that give none" },
	{ "metrics_file", JSON_STRING, OFF(metrics_file), .callback = check_metrics_file, .max = 4096,
	  .def = "goodput.prom in $RUNTIME_DIRECTORY (/run/goodputd under systemd), else none",
	  .doc = "the Prometheus text file for node_exporter's textfile collector (an absolute path ending in "
		 ".prom), rewritten atomically" },
	{ "watch", JSON_ARRAY, .callback = parse_watch, .fields = watch_fields, .max = DAEMON_WATCH_MAX,
	  .doc = "production endpoints whose traffic goodputd captures hour by hour into the store and compares "
		 "with the workload a study was tuned for, flagging drift" },
	{ "limits", JSON_OBJECT, .fields = limits_fields, .doc = "what clients may ask of the daemon" },
	{ 0 },
};

int daemon_config_from_json(const cJSON *j, const char *what, struct daemon_config **ret, struct error *err)
{
	_cleanup_(daemon_config_freep) struct daemon_config *c = NULL;
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected a JSON object", what);
	r = daemon_config_new_default(&c);
	if (r < 0)
		return error_set(err, r, "out of memory");
	c->json = cJSON_Duplicate(j, true);
	if (!c->json)
		return error_set(err, -ENOMEM, "out of memory");
	r = json_dispatch(c->json, "", config_fields, 0, c, err);
	if (r < 0)
		return error_prefix(err, r, "%s", what);
	*ret = TAKE_PTR(c);
	return 0;
}

int daemon_config_load(const char *path, bool missing_ok, struct daemon_config **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	int r;

	r = json_parse_file(path, DAEMON_CONFIG_MAX_BYTES, &j, err);
	if (r == -ENOENT && missing_ok) {
		r = daemon_config_new_default(ret);
		return r < 0 ? error_set(err, r, "out of memory") : 0;
	}
	if (r < 0)
		return r;
	return daemon_config_from_json(j, path, ret, err);
}

struct daemon_config *daemon_config_free(struct daemon_config *c)
{
	if (!c)
		return NULL;
	cJSON_Delete(c->json);
	free(c->watch);
	free(c);
	return NULL;
}

int daemon_config_price(const struct daemon_config *c, const char *gpu_type, double *ret)
{
	const cJSON *p;

	if (!c || !c->prices || !gpu_type)
		return -ENOENT;
	p = cJSON_GetObjectItemCaseSensitive(c->prices, gpu_type);
	if (!p) {
		cJSON_ArrayForEach(p, c->prices)
		{
			if (p->string && strcasecmp(p->string, gpu_type) == 0)
				break;
		}
	}
	if (!p)
		return -ENOENT;
	*ret = p->valuedouble;
	return 0;
}

const struct json_field *daemon_config_fields(void)
{
	return config_fields;
}
