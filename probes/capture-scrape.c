/* capture-scrape.c — reads a server's /metrics every interval on the
 * caller's sd-event loop and hands each scrape, parsed, to the caller.
 *
 * Scrapes are due at absolute times (start + k · interval), so a slow
 * answer does not shift the ones after it; a scrape still in flight when
 * the next is due is not doubled (the next one waits for the one after).
 * `goodput workload capture` runs one for a window and goodputd one per
 * watched endpoint, forever. Nothing here blocks or logs. */
#include "capture-scrape.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "macro.h"
#include "time-util.h"

#define METRICS_MAX_BYTES (8u << 20)

struct probe_scraper {
	sd_event *event;
	struct probe_client *client;
	struct probe_metrics_map map;
	char *url, *path;
	uint64_t interval_usec, timeout_usec, next_usec;
	sd_event_source *timer;
	bool in_flight;
	probe_scraper_fn fn;
	void *userdata;
};

struct probe_scraper *probe_scraper_free(struct probe_scraper *s)
{
	if (!s)
		return NULL;
	sd_event_source_disable_unref(s->timer);
	probe_client_free(s->client);
	sd_event_unref(s->event);
	free(s->url);
	free(s->path);
	free(s);
	return NULL;
}

static void on_body(struct probe_client *c, int r, long status, const char *body, size_t len, const char *error,
		    void *userdata)
{
	struct probe_scraper *s = userdata;
	struct probe_capture_scrape scrape;
	struct error err = { 0 };
	uint64_t mono = mono_usec(), real = real_usec();

	(void)c;
	s->in_flight = false;
	if (r < 0) {
		error_set(&err, r, "%s: %s", s->url, error ? error : strerror(-r));
		s->fn(s, r, NULL, &err, s->userdata);
		return;
	}
	if (status != 200) {
		error_set(&err, -EIO, "%s: HTTP %ld", s->url, status);
		s->fn(s, -EIO, NULL, &err, s->userdata);
		return;
	}
	r = probe_capture_scrape_parse(body, len, &s->map, mono, real, &scrape, &err);
	if (r < 0)
		error_prefix(&err, r, "%s", s->url);
	s->fn(s, r, r < 0 ? NULL : &scrape, &err, s->userdata);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
	struct probe_scraper *s = userdata;
	struct error err = { 0 };
	int r;

	/* the next one is due an interval after this one was, however late this runs */
	do
		s->next_usec += s->interval_usec;
	while (s->next_usec <= usec);
	r = sd_event_source_set_time(source, s->next_usec);
	if (r >= 0)
		r = sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
	if (r < 0) {
		error_set(&err, r, "scrape timer: %s", strerror(-r));
		s->fn(s, r, NULL, &err, s->userdata);
		return 0;
	}
	if (s->in_flight)
		return 0;
	r = probe_client_get(s->client, s->path, METRICS_MAX_BYTES, s->timeout_usec, on_body, s);
	if (r < 0) {
		error_set(&err, r, "scrape: %s", strerror(-r));
		s->fn(s, r, NULL, &err, s->userdata);
		return 0;
	}
	s->in_flight = true;
	return 0;
}

/* "http://host:port/metrics" → base "http://host:port" and path "/metrics". */
static int split_url(const char *url, char **ret_base, char **ret_path, struct error *err)
{
	const char *scheme = strstr(url, "://"), *slash;
	char *base, *path;

	if (!scheme || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0))
		return error_set(err, -EINVAL, "%s: expected an http:// or https:// URL", url);
	slash = strchr(scheme + 3, '/');
	base = slash ? strndup(url, (size_t)(slash - url)) : strdup(url);
	path = strdup(slash ? slash : "/metrics");
	if (!base || !path) {
		free(base);
		free(path);
		return -ENOMEM;
	}
	*ret_base = base;
	*ret_path = path;
	return 0;
}

int probe_scraper_new(sd_event *e, const struct probe_scraper_config *cfg, probe_scraper_fn fn, void *userdata,
		      struct probe_scraper **ret, struct error *err)
{
	_cleanup_(probe_scraper_freep) struct probe_scraper *s = NULL;
	struct probe_client_config cc;
	_cleanup_(freep) char *base = NULL;
	int r;

	if (!cfg->interval_usec)
		return error_set(err, -EINVAL, "scrape interval: expected more than 0");
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->event = sd_event_ref(e);
	s->fn = fn;
	s->userdata = userdata;
	s->interval_usec = cfg->interval_usec;
	s->timeout_usec = cfg->timeout_usec ? cfg->timeout_usec : MIN(cfg->interval_usec, 10 * USEC_PER_SEC);
	if (cfg->map)
		s->map = *cfg->map;
	else
		probe_metrics_map_init_default(&s->map);
	s->url = strdup(cfg->url);
	if (!s->url)
		return -ENOMEM;
	r = split_url(cfg->url, &base, &s->path, err);
	if (r < 0)
		return r;
	probe_client_config_init(&cc);
	cc.base_url = base;
	r = probe_client_new(e, &cc, &s->client, err);
	if (r < 0)
		return r;
	s->next_usec = mono_usec();
	r = sd_event_add_time(e, &s->timer, CLOCK_MONOTONIC, s->next_usec, 1, on_timer, s);
	if (r < 0)
		return error_set(err, r, "scrape timer: %s", strerror(-r));
	(void)sd_event_source_set_description(s->timer, "capture-scrape");
	*ret = TAKE_PTR(s);
	return 0;
}
