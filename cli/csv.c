/* csv.c — see csv.h. */
#include "csv.h"

#include <math.h>
#include <string.h>

#include "macro.h"

void csv_text(FILE *f, bool first, const char *s)
{
	if (!first)
		fputc(',', f);
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

void csv_number(FILE *f, bool first, double v)
{
	if (!first)
		fputc(',', f);
	if (isnan(v))
		return;
	if (isinf(v))
		fputs(v > 0 ? "inf" : "-inf", f);
	else
		fprintf(f, "%.15g", v);
}

void csv_json(FILE *f, bool first, const cJSON *v)
{
	if (!v || cJSON_IsNull(v))
		csv_text(f, first, NULL);
	else if (cJSON_IsString(v))
		csv_text(f, first, v->valuestring);
	else if (cJSON_IsNumber(v))
		csv_number(f, first, v->valuedouble);
	else if (cJSON_IsBool(v))
		csv_text(f, first, cJSON_IsTrue(v) ? "true" : "false");
	else {
		_cleanup_(cjson_freep) char *s = cJSON_PrintUnformatted(v);

		csv_text(f, first, s);
	}
}

void csv_end(FILE *f)
{
	fputs("\r\n", f);
}
