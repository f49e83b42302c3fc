/* report-doc-writer.c — the report's tiny writer: headings, paragraphs,
 * notes, tables, code and plots, in Markdown or in HTML, every text escaped
 * for the format, so store text (failure messages, knob values) can never
 * inject markup. The sections (report-doc.c, report-doc-findings.c, report-production.c) write
 * through it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report-internal.h"

void report_doc_esc(struct report_doc *d, const char *s)
{
	for (; s && *s; s++) {
		if (d->fmt == REPORT_FORMAT_HTML) {
			switch (*s) {
			case '&':
				fputs("&amp;", d->f);
				break;
			case '<':
				fputs("&lt;", d->f);
				break;
			case '>':
				fputs("&gt;", d->f);
				break;
			case '"':
				fputs("&quot;", d->f);
				break;
			default:
				fputc(*s, d->f);
			}
		} else {
			if (strchr("\\`*_|<>[]#", *s))
				fputc('\\', d->f);
			fputc(*s == '\n' ? ' ' : *s, d->f);
		}
	}
}

void report_doc_heading(struct report_doc *d, int level, const char *id, const char *text)
{
	if (d->fmt == REPORT_FORMAT_HTML) {
		fprintf(d->f, "<h%d id=\"%s\">", level, id);
		report_doc_esc(d, text);
		fprintf(d->f, "</h%d>\n", level);
	} else {
		fprintf(d->f, "\n%.*s ", level, "######");
		report_doc_esc(d, text);
		fputs("\n\n", d->f);
	}
}

void report_doc_para_start(struct report_doc *d, const char *cls)
{
	if (d->fmt == REPORT_FORMAT_HTML)
		fprintf(d->f, "<p%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
	else if (cls)
		fputs("> **", d->f);
}

void report_doc_para_end(struct report_doc *d, const char *cls)
{
	if (d->fmt == REPORT_FORMAT_HTML)
		fputs("</p>\n", d->f);
	else
		fputs(cls ? "**\n\n" : "\n\n", d->f);
}

void report_doc_para(struct report_doc *d, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	report_doc_para_start(d, NULL);
	report_doc_esc(d, buf);
	report_doc_para_end(d, NULL);
}

/* A highlighted statement: the verdict, or a warning. */
void report_doc_note(struct report_doc *d, const char *cls, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	report_doc_para_start(d, cls);
	report_doc_esc(d, buf);
	report_doc_para_end(d, cls);
}

void report_doc_table_start(struct report_doc *d, size_t n, const char *const *headers)
{
	d->cols = n;
	if (d->fmt == REPORT_FORMAT_HTML) {
		fputs("<table>\n<thead><tr>", d->f);
		for (size_t i = 0; i < n; i++) {
			fputs("<th>", d->f);
			report_doc_esc(d, headers[i]);
			fputs("</th>", d->f);
		}
		fputs("</tr></thead>\n<tbody>\n", d->f);
	} else {
		fputc('|', d->f);
		for (size_t i = 0; i < n; i++) {
			fputc(' ', d->f);
			report_doc_esc(d, headers[i]);
			fputs(" |", d->f);
		}
		fputs("\n|", d->f);
		for (size_t i = 0; i < n; i++)
			fputs(" --- |", d->f);
		fputc('\n', d->f);
	}
}

/* One row; cells as strings (NULL shows as "-"). cls marks the row (HTML). */
void report_doc_row(struct report_doc *d, const char *cls, const char *const *cells)
{
	if (d->fmt == REPORT_FORMAT_HTML) {
		fprintf(d->f, "<tr%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
		for (size_t i = 0; i < d->cols; i++) {
			fputs("<td>", d->f);
			report_doc_esc(d, cells[i] ? cells[i] : "-");
			fputs("</td>", d->f);
		}
		fputs("</tr>\n", d->f);
	} else {
		fputc('|', d->f);
		for (size_t i = 0; i < d->cols; i++) {
			fputc(' ', d->f);
			report_doc_esc(d, cells[i] && *cells[i] ? cells[i] : "-");
			fputs(" |", d->f);
		}
		fputc('\n', d->f);
	}
}

void report_doc_kv(struct report_doc *d, const char *k, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	report_doc_row(d, NULL, (const char *const[]){ k, buf });
}

void report_doc_table_end(struct report_doc *d)
{
	fputs(d->fmt == REPORT_FORMAT_HTML ? "</tbody>\n</table>\n" : "\n", d->f);
	d->cols = 0;
}

void report_doc_code(struct report_doc *d, const char *text)
{
	if (d->fmt == REPORT_FORMAT_HTML) {
		fputs("<pre><code>", d->f);
		report_doc_esc(d, text);
		fputs("</code></pre>\n", d->f);
	} else {
		fprintf(d->f, "```\n%s\n```\n\n", text);
	}
}

void report_doc_plot(struct report_doc *d, enum report_plot_kind k)
{
	const char *name = report_plot_name(k);

	if (!d->plots)
		return;
	if (d->plots->svg[k]) {
		if (d->fmt == REPORT_FORMAT_HTML)
			fprintf(d->f, "<figure class=\"plot\" id=\"plot-%s\">\n%s\n</figure>\n", name,
				d->plots->svg[k]);
		else if (d->plot_files)
			fprintf(d->f, "![%s](plot-%s.svg)\n\n", name, name);
	} else if (d->plots->why[k]) {
		report_doc_note(d, "missing", "Plot not drawn: %s.", d->plots->why[k]);
	}
}
