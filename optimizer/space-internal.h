/* space-internal.h — what space.c (knobs and grids) shares with
 * constraint.c (the constraints between knobs). Not a public API: space.h is. */
#pragma once

#include <cjson/cJSON.h>

#include "error.h"
#include "space.h"

/* Parses one item of "constraints" — a string, or an allowed-combinations
 * object — into space->constraints (at JSON path `path`). text may be given
 * instead of item (a built-in constraint). The knobs must be parsed first. */
int opt_space_add_constraint(struct opt_space *space, const cJSON *item, const char *text, const char *path,
			     struct error *err);
/* One test of the constraint language ("spec_method != none") into *ret. */
int opt_space_parse_test(const struct opt_space *space, const char *text, const char *path, struct opt_test *ret,
			 struct error *err);
/* Whether a test names knob k. */
bool opt_test_names(const struct opt_test *t, int k);
