/* engine-profile-internal.h — what engine-profile.c (loading, validation)
 * shares with engine-profile-render.c (rendering). Not a public API. */
#pragma once

#include "engine-profile.h"

/* The knob of p named name, NULL when p has none. Borrowed from p. */
const struct engine_knob *engine_profile_find_knob(const struct engine_profile *p, const char *name);
