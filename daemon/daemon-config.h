/* daemon-config.h — goodputd's own configuration file (default
 * /etc/goodput/goodputd.json), read at start and again on SIGHUP.
 *
 *   {
 *     "socket_group": "goodput",      group whose members may change state (submit, cancel, pause, resume)
 *     "engines_dir": "/etc/goodput/engines",  where engine profiles are looked for first
 *     "prices": { "H100": 2.49, ... }, $/GPU-hour for studies that give none, by gpu.type
 *     "metrics_file": "/run/goodputd/goodput.prom",  the Prometheus text file
 *                                     (default: goodput.prom in $RUNTIME_DIRECTORY, else none)
 *     "watch": [{                      production endpoints whose traffic is compared with a study's
 *       "metrics_url": "http://vllm-01:8000/metrics",  the engine's metrics page
 *       "study": "chat-prod",         the study tuned for this traffic (by name)
 *       "engine": "vllm",             profile whose metric names are read (default: the study's engine)
 *       "interval": "1m",             between scrapes: one watch interval
 *       "threshold": 0.2,             Kolmogorov–Smirnov distance of a length distribution that is drift
 *       "rate_threshold": 1.0,        relative rate change that is drift (1: doubled or halved)
 *       "consecutive": 2,             drifted intervals in a row before the flag goes up
 *       "min_requests": 20,           requests an interval needs to be judged (fewer: it waits for more)
 *       "retune": "notify",           "queue": also queue a re-tune of the study on the captured traffic
 *       "window": "22:00-06:00"       the re-tune's time window (default: the study's)
 *     }],
 *     "limits": {
 *       "max_connections": 512,       control-socket clients at once
 *       "max_connections_per_uid": 32, of those, held by one uid (root and goodputd's own are exempt)
 *       "reserved_connections": 64,   of those, kept for root, goodputd's user and socket_group
 *                                     (default: an eighth of max_connections)
 *       "max_request_bytes": 1048576, longest request line (a submitted spec)
 *       "idle_timeout": 60,           seconds a client may stay silent
 *       "max_queued_studies": 100     studies waiting or running at once
 *     }
 *   }
 *
 * Every key is optional; unknown keys and out-of-range values are errors
 * naming the key. A missing file means the defaults. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "error.h"

#define DAEMON_CONFIG_DEFAULT_PATH "/etc/goodput/goodputd.json"
#define DAEMON_CONFIG_MAX_BYTES    (256 * 1024)

enum daemon_retune {
	DAEMON_RETUNE_NOTIFY, /* log, status and metrics say it */
	DAEMON_RETUNE_QUEUE,  /* and a re-tune of the study on the captured traffic is queued */
};

#define DAEMON_WATCH_MAX 32

/* One watched production endpoint (strings into the configuration's JSON). */
struct daemon_watch_config {
	const char *metrics_url, *study, *engine, *window;
	uint64_t interval_usec;
	double threshold, rate_threshold;
	uint32_t consecutive, min_requests;
	int retune; /* enum daemon_retune */
};

struct daemon_config {
	cJSON *json;                       /* owned; strings below point into it (or are NULL) */
	const char *socket_group;          /* NULL: none (root and the daemon's user only) */
	gid_t socket_gid;                  /* resolved when socket_group is set */
	const char *engines_dir;           /* NULL: engine_profile_find's defaults */
	const cJSON *prices;               /* object gpu type -> $/GPU-hour; may be NULL */
	const char *metrics_file;          /* NULL: goodput.prom in $RUNTIME_DIRECTORY, else none */
	struct daemon_watch_config *watch; /* owned array */
	size_t n_watch;
	struct {
		uint32_t max_connections;
		uint32_t max_connections_per_uid;
		uint32_t reserved_connections;
		size_t max_request_bytes;
		uint64_t idle_timeout_usec;
		uint32_t max_queued_studies;
	} limits;
};

/* The defaults (no file). */
int daemon_config_new_default(struct daemon_config **ret);
/* Parses a configuration object; `what` names it in errors. The group is
 * resolved with getgrnam (an unknown group is an error). */
int daemon_config_from_json(const cJSON *j, const char *what, struct daemon_config **ret, struct error *err);
/* Reads path; when it does not exist and missing_ok, the defaults. */
int daemon_config_load(const char *path, bool missing_ok, struct daemon_config **ret, struct error *err);

struct daemon_config *daemon_config_free(struct daemon_config *c);
static inline void daemon_config_freep(struct daemon_config **c)
{
	if (*c)
		*c = daemon_config_free(*c);
}

/* The configured price for a GPU type (exact, then case-insensitive match);
 * -ENOENT when none. */
int daemon_config_price(const struct daemon_config *c, const char *gpu_type, double *ret);

/* The table the file is parsed with (goodputd(8) lists its keys from it). */
struct json_field;
const struct json_field *daemon_config_fields(void);
