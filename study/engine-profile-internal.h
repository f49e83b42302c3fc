/* engine-profile-internal.h — what engine-profile.c (loading, validation)
 * shares with engine-profile-render.c (rendering). Not a public API. */
#pragma once

#include "engine-profile.h"
#include "json-dispatch.h"

/* The knob of p named name, NULL when p has none. Borrowed from p. */
const struct engine_knob *engine_profile_find_knob(const struct engine_profile *p, const char *name);

/* ---- engine-profile-logs.c: what a profile says about an engine's output ---- */

/* json_dispatch callbacks of the keys engine-profile-logs.c reads:
 * failure_patterns, startup_log, version_pattern, health.ready/loading,
 * metrics.series. */
int engine_profile_parse_failure_patterns(const cJSON *v, const char *path, const struct json_field *f, void *base,
					  struct error *err);
int engine_profile_parse_startup_log(const cJSON *v, const char *path, const struct json_field *f, void *base,
				     struct error *err);
int engine_profile_parse_version_pattern(const cJSON *v, const char *path, const struct json_field *f, void *base,
					 struct error *err);
int engine_profile_parse_statuses(const cJSON *v, const char *path, const struct json_field *f, void *base,
				  struct error *err);
int engine_profile_parse_series(const cJSON *v, const char *path, const struct json_field *f, void *base,
				struct error *err);
/* ---- engine-profile-defaults.c ---- */

/* The "defaults" key's table (read after "knobs": it names them). */
extern const struct json_field engine_profile_defaults_fields[];

/* ---- engine-profile-roles.c ---- */

/* The "roles" key's table and its callback (read after "knobs"). */
extern const struct json_field engine_profile_roles_fields[];
int engine_profile_parse_roles(const cJSON *v, const char *path, const struct json_field *f, void *base,
			       struct error *err);
/* Adds the knobs a study may search with roles to p->extra_knobs: shape,
 * prefill_workers, decode_workers, and prefill_/decode_ before each of the
 * profile's knobs. */
int engine_profile_add_role_knobs(struct engine_profile *p);

/* Frees the compiled expressions. */
void engine_profile_free_regexes(struct engine_profile *p);
