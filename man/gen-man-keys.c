/* gen-man-keys.c — the key references of goodput's man pages, written from
 * the tables goodput parses with, at build time.
 *
 * It copies a scdoc template to the output, replacing a line "@KEYS@" with
 * one entry per key of a json_dispatch table (json_fields_walk: the path,
 * the type and range, the default, "required", the row's documentation)
 * and "@MESSAGE_ID_...@" with goodputd's journal message ids. So
 * goodput-study(5) lists exactly the keys `goodput tune --help-spec` prints,
 * goodput-engine(5) the keys of an engine profile, goodputd(8) those of
 * goodputd.json, and no page can name a key the parser does not know.
 *
 * Usage: gen-man-keys study|engine|daemon-config TEMPLATE OUTPUT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-config.h"
#include "daemon-journal.h"
#include "engine-profile.h"
#include "json-dispatch.h"
#include "study.h"

/* Text as scdoc reads it literally: its markup characters escaped, and a
 * first character that would start a list, a table or a heading too. */
static void put_escaped(FILE *f, const char *s)
{
	if (*s && strchr("-[|:#.+", *s))
		fputc('\\', f);
	for (; *s; s++) {
		if (*s == '\\' || *s == '*' || *s == '_')
			fputc('\\', f);
		fputc(*s, f);
	}
}

static int put_key(const struct json_field *fld, const char *path, void *userdata)
{
	FILE *f = userdata;
	char type[256];

	fputc('*', f);
	put_escaped(f, path);
	fputs("* (", f);
	put_escaped(f, json_field_type_text(fld, type, sizeof(type)));
	if (fld->def) {
		fputs("; default ", f);
		put_escaped(f, fld->def);
	}
	fputs(fld->flags & JSON_MANDATORY ? "; *required*)\n" : ")\n", f);
	fputc('\t', f);
	put_escaped(f, fld->doc && *fld->doc ? fld->doc : "(undocumented)");
	fputs("\n\n", f);
	return 0;
}

static const struct {
	const char *name, *value;
} message_ids[] = {
	{ "@MESSAGE_ID_TRIAL_DONE@", DAEMON_MESSAGE_TRIAL_DONE },
	{ "@MESSAGE_ID_TRIAL_FAILED@", DAEMON_MESSAGE_TRIAL_FAILED },
	{ "@MESSAGE_ID_STUDY_DONE@", DAEMON_MESSAGE_STUDY_DONE },
};

/* A template line with its @MESSAGE_ID_...@ replaced. */
static void put_line(FILE *f, const char *line)
{
	while (*line) {
		size_t i = 0;

		for (; i < sizeof(message_ids) / sizeof(message_ids[0]); i++)
			if (strncmp(line, message_ids[i].name, strlen(message_ids[i].name)) == 0)
				break;
		if (i < sizeof(message_ids) / sizeof(message_ids[0])) {
			fputs(message_ids[i].value, f);
			line += strlen(message_ids[i].name);
		} else
			fputc(*line++, f);
	}
}

int main(int argc, char **argv)
{
	const struct json_field *table = NULL;
	char line[4096];
	FILE *in, *out;
	int r = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: gen-man-keys study|engine|daemon-config TEMPLATE OUTPUT\n");
		return 2;
	}
	if (strcmp(argv[1], "study") == 0)
		table = study_schema_fields();
	else if (strcmp(argv[1], "engine") == 0)
		table = engine_profile_fields();
	else if (strcmp(argv[1], "daemon-config") == 0)
		table = daemon_config_fields();
	if (!table) {
		fprintf(stderr, "gen-man-keys: unknown table \"%s\"\n", argv[1]);
		return 2;
	}
	in = fopen(argv[2], "re");
	if (!in) {
		fprintf(stderr, "gen-man-keys: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	out = fopen(argv[3], "we");
	if (!out) {
		fprintf(stderr, "gen-man-keys: %s: %s\n", argv[3], strerror(errno));
		fclose(in);
		return 1;
	}
	while (fgets(line, sizeof(line), in)) {
		if (strcmp(line, "@KEYS@\n") == 0)
			r = json_fields_walk(table, "", put_key, out);
		else
			put_line(out, line);
		if (r < 0)
			break;
	}
	if (ferror(in) || fclose(out) != 0 || r < 0) {
		fprintf(stderr, "gen-man-keys: writing %s failed\n", argv[3]);
		fclose(in);
		return 1;
	}
	fclose(in);
	return 0;
}
