/* csv.h — RFC 4180 CSV for the tables goodput prints for other tools
 * (`goodput trials --csv`, `goodput export --format csv`): fields separated
 * by commas, a field quoted when it holds a comma, a quote or a line break,
 * lines ending in CRLF as the RFC says (pandas, R and spreadsheets read it).
 * An unknown number is an empty field. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* One field; the first of a line when first, else after a comma. NULL is empty. */
void csv_text(FILE *f, bool first, const char *s);
/* A number to 15 significant digits; NAN: empty, infinities "inf". */
void csv_number(FILE *f, bool first, double v);
/* A JSON value: a string as text, a number, a boolean as true/false, null
 * (or NULL) empty, anything else as compact JSON. */
void csv_json(FILE *f, bool first, const cJSON *v);
/* Ends the line. */
void csv_end(FILE *f);
