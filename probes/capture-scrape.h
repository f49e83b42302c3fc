/* capture-scrape.h — a server's metrics page read every interval on the
 * caller's sd-event loop (capture-scrape.c), each scrape parsed for
 * capture.h. */
#pragma once

#include <stdint.h>

#include <systemd/sd-event.h>

#include "capture.h"
#include "error.h"
#include "macro.h"
#include "prom-map.h"

struct probe_scraper;

struct probe_scraper_config {
	const char *url;                     /* "http://host:port/metrics" (no path: /metrics) */
	const struct probe_metrics_map *map; /* copied; NULL: the default (vLLM, SGLang, TGI names) */
	uint64_t interval_usec;              /* > 0 */
	uint64_t timeout_usec;               /* per scrape; 0: the interval, at most 10 s */
};

/* One scrape, as it came: r >= 0 with scrape (valid during the call), or
 * r < 0 with err saying why (unreachable, HTTP status, a series missing,
 * not Prometheus text). Called from the loop; it must not free the scraper
 * (leave the loop, or defer it to another event source). */
typedef void (*probe_scraper_fn)(struct probe_scraper *s, int r, const struct probe_capture_scrape *scrape,
				 const struct error *err, void *userdata);

/* Starts scraping at once, then every interval. */
int probe_scraper_new(sd_event *e, const struct probe_scraper_config *cfg, probe_scraper_fn fn, void *userdata,
		      struct probe_scraper **ret, struct error *err);
struct probe_scraper *probe_scraper_free(struct probe_scraper *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct probe_scraper *, probe_scraper_free)
