/* report-plot.c — the report's plots, drawn by gnuplot's svg terminal.
 *
 * Each plot is one gnuplot run: the data goes into files in a private
 * temporary folder (mkdtemp), the script too, and gnuplot is started with
 * posix_spawn and an argv (never a shell) in that folder, its output going
 * to plot-NAME.svg there. The SVG is read back and made fit for inlining in
 * one HTML page: the XML prolog goes, element ids get a per-plot prefix (so
 * the point shapes of two plots never collide), and the <title> names the
 * plot. User text (study names, knob values) reaches gnuplot only inside
 * single-quoted strings with quotes doubled, in noenhanced mode, so it is
 * shown as is. A plot that cannot be drawn says why; a missing gnuplot turns
 * the report into a table-only one with a note. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "macro.h"
#include "report-internal.h"
#include "report-plot-internal.h"
#include "time-util.h"

extern char **environ;

#define GNUPLOT_TIMEOUT_USEC (60 * USEC_PER_SEC)
#define SVG_MAX_BYTES        (16u << 20)

static const char *const plot_names[_REPORT_PLOT_MAX] = {
	[REPORT_PLOT_WORKLOAD] = "workload",   [REPORT_PLOT_LATENCY] = "latency",
	[REPORT_PLOT_LANDSCAPE] = "landscape", [REPORT_PLOT_PROGRESS] = "progress",
	[REPORT_PLOT_PARETO] = "pareto",       [REPORT_PLOT_SERVER] = "server",
	[REPORT_PLOT_GANTT] = "gantt",         [REPORT_PLOT_PRODUCTION] = "production",
	[REPORT_PLOT_SHAPES] = "shapes",
};

static const char *const plot_titles[_REPORT_PLOT_MAX] = {
	[REPORT_PLOT_WORKLOAD] = "Workload: input and output lengths",
	[REPORT_PLOT_LATENCY] = "Latency and goodput against request rate (best configuration)",
	[REPORT_PLOT_LANDSCAPE] = "Cost landscape ($/Mtok)",
	[REPORT_PLOT_PROGRESS] = "Search progress",
	[REPORT_PLOT_PARETO] = "Tokens/s per user against tokens/s per GPU",
	[REPORT_PLOT_SERVER] = "Server KV-cache usage and running requests (best configuration)",
	[REPORT_PLOT_GANTT] = "Trials over wall time per GPU: deploying, probing, idle",
	[REPORT_PLOT_PRODUCTION] = "Production traffic beside the workload the study was tuned for",
	[REPORT_PLOT_SHAPES] = "SLO attainment of both serving shapes against rate per GPU and SLA scale",
};

void plot_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.9g", v);
	else
		fputs("NaN", f);
}

int plot_why(char **ret, const char *s)
{
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

int plot_close_data(FILE *f)
{
	if (!f)
		return errno ? -errno : -ENOMEM;
	return fclose(f) == 0 ? 0 : -errno;
}

const char *report_plot_name(enum report_plot_kind k)
{
	return k < _REPORT_PLOT_MAX ? plot_names[k] : NULL;
}

void report_plots_done(struct report_plots *p)
{
	for (size_t i = 0; i < _REPORT_PLOT_MAX; i++) {
		free(p->svg[i]);
		free(p->why[i]);
	}
	free(p->note);
	*p = (struct report_plots){ 0 };
}

/* ---- the gnuplot child ---- */

static bool program_exists(const char *prog)
{
	const char *path;

	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0;
	path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		char buf[4096];

		if (n > 0 && snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog) < (int)sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return true;
		path += n;
		if (*path == ':')
			path++;
	}
	return false;
}

static int read_file_capped(const char *path, size_t max, char **ret)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "re");
	_cleanup_(freep) char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f)
		return -errno;
	for (;;) {
		if (cap - n < 4096) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			if (cap > max + 4096)
				return -EFBIG;
			nb = realloc(buf, cap + 1);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		size_t k = fread(buf + n, 1, cap - n, f);
		n += k;
		if (k == 0)
			break;
	}
	if (ferror(f))
		return -EIO;
	buf[n] = '\0';
	*ret = TAKE_PTR(buf);
	return 0;
}

/* Runs `gnuplot SCRIPT` in dir, waiting at most GNUPLOT_TIMEOUT_USEC. On
 * failure *ret_why (owned) holds gnuplot's first error line. */
static int run_gnuplot(const char *prog, const char *dir, const char *script, char **ret_why)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = { (char *)prog, (char *)script, NULL };
	char why[512];
	uint64_t deadline;
	pid_t pid;
	int status = 0, q;

	if (posix_spawn_file_actions_init(&fa) != 0)
		return -ENOMEM;
	q = posix_spawn_file_actions_addchdir_np(&fa, dir);
	if (q == 0)
		q = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (q == 0)
		q = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (q == 0)
		q = posix_spawn_file_actions_addopen(&fa, 2, "gnuplot.err", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (q == 0)
		q = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (q != 0) {
		snprintf(why, sizeof(why), "cannot start %s: %s", prog, strerror(q));
		*ret_why = strdup(why);
		return -q;
	}
	deadline = mono_usec() + GNUPLOT_TIMEOUT_USEC;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			q = -errno;
			*ret_why = strdup("waiting for gnuplot failed");
			return q;
		}
		if (mono_usec() > deadline) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &status, 0);
			*ret_why = strdup("gnuplot did not finish within 60 s");
			return -ETIMEDOUT;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 5 * 1000 * 1000 }, NULL);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;

	/* gnuplot's message: the last non-empty line of its stderr names the error. */
	char errpath[4096];
	_cleanup_(freep) char *err = NULL;

	snprintf(errpath, sizeof(errpath), "%s/gnuplot.err", dir);
	snprintf(why, sizeof(why), "gnuplot failed (%s %d)", WIFEXITED(status) ? "exit status" : "signal",
		 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	if (read_file_capped(errpath, 65536, &err) >= 0) {
		char *line = NULL;

		for (char *p = strtok(err, "\n"); p; p = strtok(NULL, "\n"))
			if (strstr(p, "rror") || !line)
				line = p;
		if (line)
			snprintf(why + strlen(why), sizeof(why) - strlen(why), ": %.300s", line);
	}
	*ret_why = strdup(why);
	return -EIO;
}

/* ---- SVG post-processing ---- */

static int buf_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = MAX(*cap * 2, *len + n + 1024);
		char *nb = realloc(*buf, nc);

		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

static void xml_escape_into(char *dst, size_t size, const char *s)
{
	size_t o = 0;

	for (; *s && o + 7 < size; s++) {
		const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : NULL;

		if (e) {
			memcpy(dst + o, e, strlen(e));
			o += strlen(e);
		} else {
			dst[o++] = *s;
		}
	}
	dst[o] = '\0';
}

/* Drops the XML prolog, prefixes ids and references with "gpN-", and puts
 * the plot's title in <title>. */
static int svg_fixup(const char *svg, enum report_plot_kind k, char **ret)
{
	static const char *const pats[] = { "id='", "id=\"", "href='#", "href=\"#", "url(#" };
	_cleanup_(freep) char *out = NULL;
	const char *p = strstr(svg, "<svg");
	char prefix[16], title[256];
	size_t len = 0, cap = 0;
	int q;

	if (!p)
		return -EBADMSG;
	snprintf(prefix, sizeof(prefix), "gp%d-", (int)k);
	while (*p) {
		size_t best = SIZE_MAX, which = 0;

		for (size_t i = 0; i < ELEMENTSOF(pats); i++) {
			const char *hit = strstr(p, pats[i]);

			if (hit && (size_t)(hit - p) < best) {
				best = (size_t)(hit - p);
				which = i;
			}
		}
		if (best == SIZE_MAX) {
			q = buf_append(&out, &len, &cap, p, strlen(p));
			if (q < 0)
				return q;
			break;
		}
		q = buf_append(&out, &len, &cap, p, best + strlen(pats[which]));
		if (q >= 0)
			q = buf_append(&out, &len, &cap, prefix, strlen(prefix));
		if (q < 0)
			return q;
		p += best + strlen(pats[which]);
	}
	/* The title: gnuplot writes <title>Gnuplot</title>. */
	char *t = strstr(out, "<title>Gnuplot</title>");
	if (t) {
		_cleanup_(freep) char *fixed = NULL;
		size_t head = (size_t)(t - out);

		xml_escape_into(title, sizeof(title), plot_titles[k]);
		if (asprintf(&fixed, "%.*s<title>%s</title>%s", (int)head, out, title,
			     t + strlen("<title>Gnuplot</title>")) < 0)
			return -ENOMEM;
		free(out);
		out = TAKE_PTR(fixed);
	}
	*ret = TAKE_PTR(out);
	return 0;
}

/* ---- one plot ---- */

struct plot_ctx {
	const char *prog;
	char dir[256];
	char **files; /* created in dir, removed at the end */
	size_t n_files;
};

FILE *plot_open(struct plot_ctx *c, const char *name)
{
	char path[512], **nf;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", c->dir, name);
	nf = realloc(c->files, (c->n_files + 1) * sizeof(*nf));
	if (!nf)
		return NULL;
	c->files = nf;
	c->files[c->n_files] = strdup(path);
	if (!c->files[c->n_files])
		return NULL;
	c->n_files++;
	f = fopen(path, "wxe");
	return f;
}

void plot_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; s && *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('\'', f);
}

void plot_header(FILE *f, enum report_plot_kind k, unsigned height)
{
	/* a fixed size (not "dynamic"): the page shows the plot at its size,
	 * scaled down only on a narrower screen, so text keeps one size */
	fprintf(f,
		"set terminal svg size %u,%u fixed noenhanced font 'sans,%u' background '#ffffff'\n"
		"set output 'plot-%s.svg'\n"
		"set print 'plot-%s.axes'\n"
		"set datafile missing 'NaN'\n"
		"set grid lc rgb '#e0e0e0'\n"
		"set border lc rgb '#555555'\n"
		"set key noautotitle\n",
		REPORT_PLOT_WIDTH, height, REPORT_PLOT_FONT, plot_names[k], plot_names[k]);
}

static void marks_json(FILE *f, const char *key, const double *v, size_t n)
{
	fprintf(f, ",\"%s\":[", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%.9g", i ? "," : "", v[i]);
	fputc(']', f);
}

void plot_axes(FILE *f, const char *panel, unsigned flags, const double *marks_y, size_t n_y, const double *marks_y2,
	       size_t n_y2)
{
	static const char *const axes[] = { "X", "Y", "Y2" };

	/* gnuplot's sprintf: %g of its own figures (an axis with no data has
	 * min > max, which a reader skips) */
	fputs("print sprintf('{\"panel\":\"", f);
	for (const char *p = panel; *p; p++)
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == ' ')
			fputc(*p, f);
	fprintf(f, "\",\"log_y\":%s,\"categorical\":%s", flags & PLOT_AXES_LOG_Y ? "true" : "false",
		flags & PLOT_AXES_CATEGORICAL ? "true" : "false");
	for (size_t i = 0; i < ELEMENTSOF(axes); i++)
		fprintf(f, ",\"%c%s\":[%%.9g,%%.9g],\"data_%c%s\":[%%.9g,%%.9g]", axes[i][0] + 32, axes[i] + 1,
			axes[i][0] + 32, axes[i] + 1);
	marks_json(f, "marks_y", marks_y, n_y);
	marks_json(f, "marks_y2", marks_y2, n_y2);
	fputs("}'", f);
	for (size_t i = 0; i < ELEMENTSOF(axes); i++)
		fprintf(f, ", GPVAL_%s_MIN, GPVAL_%s_MAX, GPVAL_DATA_%s_MIN, GPVAL_DATA_%s_MAX", axes[i], axes[i],
			axes[i], axes[i]);
	fputs(")\n", f);
}

void plot_fit_range(double lo, double hi, bool log, double *ret_lo, double *ret_hi)
{
	if (log && lo > 0) {
		double span = log10(hi / lo);
		double m = MAX(span * 0.08, 0.08);

		*ret_lo = lo / pow(10, m);
		*ret_hi = hi * pow(10, m);
		return;
	}
	if (hi > lo) {
		double m = (hi - lo) * 0.06;

		*ret_lo = lo - m;
		*ret_hi = hi + m;
	} else {
		double m = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;

		*ret_lo = lo - m;
		*ret_hi = hi + m;
	}
}

/* The axes gnuplot stated (plot_axes), one JSON object a line, as
 * <metadata class="goodput-axes">[...]</metadata> after the SVG's <desc>. */
static int svg_add_axes(char **svg, const char *axes_path)
{
	_cleanup_(freep) char *text = NULL, *json = NULL, *out = NULL;
	char *at, *line, *save = NULL;
	size_t len = 0, cap = 0;
	int q;

	if (read_file_capped(axes_path, 1u << 20, &text) < 0)
		return 0; /* none stated */
	q = buf_append(&json, &len, &cap, "[", 1);
	for (line = strtok_r(text, "\n", &save); line && q >= 0; line = strtok_r(NULL, "\n", &save)) {
		_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(line);

		/* only what parses, and nothing that would be markup */
		if (!j || strpbrk(line, "<>&"))
			continue;
		if (len > 1)
			q = buf_append(&json, &len, &cap, ",", 1);
		if (q >= 0)
			q = buf_append(&json, &len, &cap, line, strlen(line));
	}
	if (q >= 0)
		q = buf_append(&json, &len, &cap, "]", 1);
	if (q < 0)
		return q;
	at = strstr(*svg, "</desc>");
	at = at ? at + strlen("</desc>") : strchr(strstr(*svg, "<svg"), '>');
	if (!at)
		return 0;
	if (*at == '>')
		at++;
	if (asprintf(&out, "%.*s\n<metadata class=\"goodput-axes\">%s</metadata>%s", (int)(at - *svg), *svg, json, at) <
	    0)
		return -ENOMEM;
	free(*svg);
	*svg = TAKE_PTR(out);
	return 0;
}

static int plot_one(struct plot_ctx *c, const struct report *r, enum report_plot_kind k, struct report_plots *out)
{
	char name[64], svgname[64], axesname[64], svgpath[512], axespath[512];
	_cleanup_(freep) char *svg = NULL, *why = NULL;
	FILE *f;
	int q;

	snprintf(name, sizeof(name), "plot-%s.gp", plot_names[k]);
	snprintf(svgname, sizeof(svgname), "plot-%s.svg", plot_names[k]);
	snprintf(axesname, sizeof(axesname), "plot-%s.axes", plot_names[k]);
	f = plot_open(c, name);
	if (!f)
		return errno ? -errno : -ENOMEM;
	q = report_plot_script(c, r, k, f, &why);
	if (fclose(f) != 0 && q >= 0)
		q = -errno;
	if (q == 0 && !why)
		return 0; /* not for this study (production traffic without a watch): no plot, no note */
	if (q <= 0) {
		/* 0: nothing to draw (why says so) */
		out->why[k] = TAKE_PTR(why);
		if (!out->why[k])
			out->why[k] = strdup(q < 0 ? strerror(-q) : "nothing to draw");
		return q == -ENOMEM ? q : 0;
	}
	/* Track the SVG and the axes for removal before gnuplot creates them. */
	FILE *placeholder = plot_open(c, svgname);
	if (placeholder)
		fclose(placeholder);
	placeholder = plot_open(c, axesname);
	if (placeholder)
		fclose(placeholder);
	q = run_gnuplot(c->prog, c->dir, name, &why);
	if (q < 0) {
		out->why[k] = TAKE_PTR(why);
		return 0;
	}
	snprintf(svgpath, sizeof(svgpath), "%s/%s", c->dir, svgname);
	q = read_file_capped(svgpath, SVG_MAX_BYTES, &svg);
	if (q >= 0)
		q = svg_fixup(svg, k, &out->svg[k]);
	if (q < 0) {
		out->why[k] = strdup("gnuplot wrote no usable SVG");
		return 0;
	}
	snprintf(axespath, sizeof(axespath), "%s/%s", c->dir, axesname);
	return svg_add_axes(&out->svg[k], axespath);
}

int report_plots_render(const struct report *r, struct report_plots *ret)
{
	struct report_plots p = { 0 };
	struct plot_ctx c = { 0 };
	const char *tmp = getenv("TMPDIR");
	int q = 0;

	c.prog = r->opts.gnuplot ? r->opts.gnuplot : getenv("GOODPUT_GNUPLOT");
	if (!c.prog || !*c.prog)
		c.prog = "gnuplot";
	if (r->opts.no_plots) {
		p.note = strdup("Plots were turned off (--no-plots): this report has tables only.");
		goto done;
	}
	if (!program_exists(c.prog)) {
		if (asprintf(&p.note,
			     "gnuplot (%s) is not installed, so this report has tables only "
			     "(install the Debian package gnuplot-nox for the plots).",
			     c.prog) < 0)
			p.note = NULL;
		goto done;
	}
	snprintf(c.dir, sizeof(c.dir), "%s/goodput-report-XXXXXX", tmp && *tmp && strlen(tmp) < 200 ? tmp : "/tmp");
	if (!mkdtemp(c.dir)) {
		q = -errno;
		goto done;
	}
	/* gnuplot's stderr file, so that it is removed too. */
	FILE *ef = plot_open(&c, "gnuplot.err");
	if (ef)
		fclose(ef);
	for (int k = 0; k < _REPORT_PLOT_MAX && q >= 0; k++)
		q = plot_one(&c, r, (enum report_plot_kind)k, &p);
	for (size_t i = 0; i < c.n_files; i++) {
		(void)unlink(c.files[i]);
		free(c.files[i]);
	}
	free(c.files);
	(void)rmdir(c.dir);
done:
	if (q < 0) {
		report_plots_done(&p);
		return q;
	}
	*ret = p;
	return 0;
}
