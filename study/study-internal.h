/* study-internal.h — what the study spec's table (study-schema.c) shares
 * with the checks that span several keys (study.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "json-dispatch.h"
#include "study.h"

/* A study while its spec is dispatched: the table's offsets count from
 * here. Keys whose absence means "derived from other keys" land beside the
 * study, with a value that says "not given". */
struct study_parse {
	struct study s;
	double attainment; /* NAN: not given */
};

/* The study spec: every key, its type, range, default and documentation. */
extern const struct json_field study_fields[];

extern const char *const study_method_names[];
extern const char *const study_quant_names[];
