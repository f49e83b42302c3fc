/* daemon-config.c — parses goodputd.json (see daemon-config.h for the keys).
 *
 * The daemon reads this file at start and on SIGHUP; a reload that fails
 * keeps the configuration in force, so every check happens here, before the
 * daemon swaps the new object in. */
#include "daemon-config.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json-util.h"
#include "macro.h"
#include "time-util.h"

static void set_defaults(struct daemon_config *c)
{
	c->limits.max_connections = 512;
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

static int parse_limits(struct daemon_config *c, const cJSON *limits, const char *what, struct error *err)
{
	static const char *const keys[] = { "max_connections", "max_request_bytes", "idle_timeout",
					    "max_queued_studies", NULL };
	uint64_t bytes;
	double idle;
	int r;

	r = json_check_keys(limits, "limits", keys, err);
	if (r < 0)
		return r;
	r = json_get_u32(limits, "limits", "max_connections", 1, 65536, &c->limits.max_connections, err);
	if (r < 0)
		return r;
	r = json_get_u64(limits, "limits", "max_request_bytes", 1024, 64 * 1024 * 1024, &bytes, err);
	if (r < 0)
		return r;
	if (r > 0)
		c->limits.max_request_bytes = (size_t)bytes;
	r = json_get_double(limits, "limits", "idle_timeout", 0.1, 86400, &idle, err);
	if (r < 0)
		return r;
	if (r > 0)
		c->limits.idle_timeout_usec = sec_to_usec(idle);
	r = json_get_u32(limits, "limits", "max_queued_studies", 1, 100000, &c->limits.max_queued_studies, err);
	if (r < 0)
		return r;
	return 0;
}

static int parse_prices(const cJSON *prices, struct error *err)
{
	const cJSON *p;

	cJSON_ArrayForEach(p, prices)
	{
		if (!cJSON_IsNumber(p) || !isfinite(p->valuedouble) || p->valuedouble < 0 || p->valuedouble > 1000)
			return error_set(err, -EINVAL, "prices.%s: expected a price in [0, 1000] $/GPU-hour",
					 p->string ? p->string : "?");
	}
	return 0;
}

int daemon_config_from_json(const cJSON *j, const char *what, struct daemon_config **ret, struct error *err)
{
	static const char *const keys[] = { "socket_group", "engines_dir", "prices", "limits", NULL };
	_cleanup_(daemon_config_freep) struct daemon_config *c = NULL;
	const cJSON *limits = NULL, *prices = NULL;
	int r;

	if (!cJSON_IsObject(j))
		return error_set(err, -EINVAL, "%s: expected a JSON object", what);
	r = daemon_config_new_default(&c);
	if (r < 0)
		return error_set(err, r, "out of memory");
	c->json = cJSON_Duplicate(j, true);
	if (!c->json)
		return error_set(err, -ENOMEM, "out of memory");

	r = json_check_keys(c->json, "", keys, err);
	if (r < 0)
		goto fail;
	r = json_get_string(c->json, "", "socket_group", 256, &c->socket_group, err);
	if (r < 0)
		goto fail;
	if (c->socket_group) {
		struct group *g;

		errno = 0;
		g = getgrnam(c->socket_group);
		if (!g) {
			r = error_set(err, errno > 0 ? -errno : -ENOENT, "socket_group: no group \"%s\" on this host",
				      c->socket_group);
			goto fail;
		}
		c->socket_gid = g->gr_gid;
	}
	r = json_get_string(c->json, "", "engines_dir", 4096, &c->engines_dir, err);
	if (r < 0)
		goto fail;
	r = json_get_object(c->json, "", "prices", &prices, err);
	if (r < 0)
		goto fail;
	if (prices) {
		r = parse_prices(prices, err);
		if (r < 0)
			goto fail;
		c->prices = prices;
	}
	r = json_get_object(c->json, "", "limits", &limits, err);
	if (r < 0)
		goto fail;
	if (limits) {
		r = parse_limits(c, limits, what, err);
		if (r < 0)
			goto fail;
	}
	*ret = TAKE_PTR(c);
	return 0;
fail:
	return error_prefix(err, r, "%s", what);
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
