/* CSV as RFC 4180 has it: a field with a comma, a quote or a line break is
 * quoted with its quotes doubled, lines end in CRLF, an unknown number is
 * an empty field, and JSON values print as a table reader expects. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "csv.h"
#include "macro.h"
#include "tests.h"

/* What the calls of fn wrote. */
static char *written(void (*fn)(FILE *f))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f);
	fn(f);
	CHECK(fclose(f) == 0);
	return buf;
}

static void texts(FILE *f)
{
	csv_text(f, true, "plain");
	csv_text(f, false, "a,b");
	csv_text(f, false, "say \"hi\"");
	csv_text(f, false, "two\nlines");
	csv_text(f, false, NULL);
	csv_text(f, false, "");
	csv_end(f);
}

static void numbers(FILE *f)
{
	csv_number(f, true, 0.1);
	csv_number(f, false, 64);
	csv_number(f, false, NAN);
	csv_number(f, false, INFINITY);
	csv_number(f, false, 1.0 / 3);
	csv_end(f);
}

static void json_values(FILE *f)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_Parse("{\"s\":\"x,y\",\"n\":2.5,\"t\":true,\"z\":null,\"a\":[1,2]}");

	CHECK(o);
	csv_json(f, true, cJSON_GetObjectItemCaseSensitive(o, "s"));
	csv_json(f, false, cJSON_GetObjectItemCaseSensitive(o, "n"));
	csv_json(f, false, cJSON_GetObjectItemCaseSensitive(o, "t"));
	csv_json(f, false, cJSON_GetObjectItemCaseSensitive(o, "z"));
	csv_json(f, false, cJSON_GetObjectItemCaseSensitive(o, "missing"));
	csv_json(f, false, cJSON_GetObjectItemCaseSensitive(o, "a"));
	csv_end(f);
}

int main(void)
{
	char *s;

	s = written(texts);
	CHECK_STR_EQ(s, "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",,\r\n");
	free(s);
	s = written(numbers);
	CHECK_STR_EQ(s, "0.1,64,,inf,0.333333333333333\r\n");
	free(s);
	s = written(json_values);
	CHECK_STR_EQ(s, "\"x,y\",2.5,true,,,\"[1,2]\"\r\n");
	free(s);
	return 0;
}
