/* daemon-report.c — the `report` command of goodputd's control socket.
 *
 * {"command": "report", "study": S} answers the study's report as Markdown
 * (tables only: report_markdown reads the store and renders text, a few
 * milliseconds, so it is answered at once). With "html": true the full
 * report — HTML with inline SVG plots, Markdown with plot files — is written
 * into STATE_DIR/reports/<study>/ and the answer names report.html. Plots are
 * drawn by gnuplot, 30-50 ms each and a second or more for a whole report,
 * which the loop must not wait for: the daemon reads the report's data
 * from the store (report_load, milliseconds), and a forked child (child.h)
 * draws the plots and writes the files — it opens no database: neither an
 * SQLite connection nor the library's record of its parent's open files
 * may cross a fork — and exits; the answer is deferred (ctl_server_defer)
 * until its exit is seen. The child writes under reports/ following no
 * symbolic link (a link there is refused, never written through). The child's error message, if any, comes back as its captured
 * output. At most DAEMON_REPORT_JOBS run at once and one
 * per study; writing files is for privileged peers only (it costs disk and
 * CPU), the Markdown is for anyone who may read.
 *
 * The live report: after each trial of the running study, and when it ends,
 * the daemon rewrites STATE_DIR/reports/<study>/report.html the same way,
 * with no one waiting for the answer (files are renamed into place, so a
 * browser never reads half a page). While the study runs the page has a
 * progress header and reloads itself; `status` names it. A refresh asked
 * for while one is being written runs once that one is done. */
#include "daemon-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child.h"
#include "json-util.h"
#include "log.h"
#include "report.h"

struct daemon_report_job {
	struct daemon *d;
	struct daemon_report_job *next;
	struct ctl_pending *pending;
	cJSON *id;             /* the request's id, echoed */
	char *study;           /* the study's name */
	char *dir;             /* where the child writes the report */
	char *html_path;       /* ... and its report.html */
	struct report *report; /* read from the store before the fork: the child has no SQLite */
	struct child *child;
	bool again; /* the live report: write it once more when this one is done */
};

static struct daemon_report_job *job_free(struct daemon_report_job *j)
{
	if (!j)
		return NULL;
	/* The daemon stops before the child finished: do not leave it. */
	child_free(j->child);
	ctl_pending_answer(j->pending, NULL);
	cJSON_Delete(j->id);
	report_free(j->report);
	free(j->study);
	free(j->dir);
	free(j->html_path);
	free(j);
	return NULL;
}

void daemon_report_jobs_free(struct daemon *d)
{
	while (d->report_jobs) {
		struct daemon_report_job *j = d->report_jobs;

		d->report_jobs = j->next;
		job_free(j);
	}
}

static void job_unlink(struct daemon_report_job *j)
{
	for (struct daemon_report_job **p = &j->d->report_jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	j->d->n_report_jobs--;
}

static void job_fail(struct daemon_report_job *j)
{
	job_unlink(j);
	job_free(j);
}

static int start_job(struct daemon *d, const struct store_study *st, const cJSON *id, struct daemon_report_job **ret,
		     struct error *err);

static void on_report_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct daemon_report_job *j = userdata;
	struct daemon *d = j->d;
	struct store_study st = { 0 };
	struct error err = { 0 };
	bool again = j->again;
	cJSON *answer;

	if (!j->pending) { /* the live report: nobody waits */
		if (!child_exit_ok(how))
			log_warning("the live report of study %s: %s", j->study, child_get_output(c, NULL));
	} else if (child_exit_ok(how)) {
		answer = ctl_response_ok(j->id);
		if (answer && (json_add_string(answer, "study", j->study) < 0 ||
			       json_add_string(answer, "html", j->html_path) < 0))
			answer = (cJSON_Delete(answer), NULL);
		log_info("report of study %s written: %s", j->study, j->html_path);
		ctl_pending_answer(j->pending, answer);
		j->pending = NULL;
	} else {
		char msg[ERROR_MSG_MAX], how_text[64];
		const char *out = child_get_output(c, NULL);

		if (*out)
			snprintf(msg, sizeof(msg), "%s", out);
		else
			snprintf(msg, sizeof(msg), "the report writer %s",
				 child_exit_to_string(how, how_text, sizeof(how_text)));
		answer = ctl_response_error(j->id, "report of study %s: %s", j->study, msg);
		log_warning("report of study %s: %s", j->study, msg);
		ctl_pending_answer(j->pending, answer);
		j->pending = NULL;
	}
	/* a trial ended while this one was written: the live report once more */
	if (again && store_study_get_by_name(d->store, j->study, &st, &err) < 0)
		again = false;
	job_fail(j);
	if (again && start_job(d, &st, NULL, NULL, &err) < 0)
		log_warning("the live report of study %s: %s", st.name, error_str(&err, -EIO));
	store_study_done(&st);
}

/* In the child: makes the study's folder under reports/ (if need be) and
 * opens it, following no symbolic link on the way — neither reports/ nor
 * reports/<study> — so that whoever may write in the state directory
 * cannot point goodputd's writes elsewhere. The report is then written
 * through /proc/self/fd/N, which names the folder opened, whatever its
 * path says later. Returns the descriptor. */
static int open_report_dir(const char *dir, struct error *err)
{
	_cleanup_(freep) char *base = strdup(dir);
	_cleanup_(closep) int bfd = -1, fd = -1;
	char *leaf;

	if (!base)
		return error_set(err, -ENOMEM, "out of memory");
	leaf = strrchr(base, '/');
	if (!leaf)
		return error_set(err, -EINVAL, "%s: not a path", dir);
	*leaf++ = '\0';
	bfd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (bfd < 0)
		return error_set(err, -errno, "%s: %s", base,
				 errno == ELOOP || errno == ENOTDIR
					 ? "a symbolic link or not a folder, which goodputd does not follow: remove it"
					 : strerror(errno));
	if (mkdirat(bfd, leaf, 0755) < 0 && errno != EEXIST)
		return error_set(err, -errno, "%s: cannot create the folder: %s", dir, strerror(errno));
	fd = openat(bfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return error_set(err, -errno, "%s: %s", dir,
				 errno == ELOOP || errno == ENOTDIR
					 ? "a symbolic link or not a folder, which goodputd does not follow: remove it"
					 : strerror(errno));
	return TAKE_FD(fd);
}

/* In the child: write the report the parent read; the exit status says
 * whether it worked, the message why not. The child opens no database: an
 * SQLite connection must not cross a fork, and neither may the library's
 * record of the files its parent has open. */
static int report_child(void *userdata, int err_fd)
{
	struct daemon_report_job *j = userdata;
	struct report_files files = { 0 };
	struct error err = { 0 };
	char fd_dir[64];
	int r, fd;

	fd = r = open_report_dir(j->dir, &err);
	snprintf(fd_dir, sizeof(fd_dir), "/proc/self/fd/%d", fd);
	if (r >= 0)
		r = report_write_files(j->report, fd_dir, &files, &err);
	report_files_done(&files);
	if (r < 0) {
		const char *m = error_str(&err, r), *at = fd >= 0 ? strstr(m, fd_dir) : NULL;

		/* the folder by its name, not by the descriptor it was written through */
		if (at) {
			(void)!write(err_fd, m, (size_t)(at - m));
			(void)!write(err_fd, j->dir, strlen(j->dir));
			m = at + strlen(fd_dir);
		}
		(void)!write(err_fd, m, strlen(m));
		return 1;
	}
	return 0;
}

/* reports/<name>, or reports/study-<id> for a name that starts with a dot. */
static int report_dir(struct daemon *d, const struct store_study *st, char **ret)
{
	_cleanup_(freep) char *base = NULL;
	char *p;

	if (asprintf(&base, "%s/reports", d->state_dir) < 0)
		return -ENOMEM;
	if (mkdir(base, 0750) < 0 && errno != EEXIST)
		return -errno;
	if (st->name[0] == '.' ? asprintf(&p, "%s/study-%lld", base, (long long)st->id) < 0
			       : asprintf(&p, "%s/%s", base, st->name) < 0)
		return -ENOMEM;
	*ret = p;
	return 0;
}

/* Starts a child writing the report of st into reports/<study>/; id: the
 * request's (NULL: the live report, nobody waits). *ret (may be NULL) is
 * the job, listed in d->report_jobs. */
static int start_job(struct daemon *d, const struct store_study *st, const cJSON *id, struct daemon_report_job **ret,
		     struct error *err)
{
	struct report_options ro = { .engines_dir = d->config->engines_dir };
	struct child_options o = { .fork_fn = report_child,
				   .output = CHILD_OUTPUT_CAPTURE,
				   .capture_max = ERROR_MSG_MAX - 1,
				   .description = "report-writer" };
	struct daemon_report_job *j;
	int r;

	/* Listed before the fork, so that everything the child inherits stays
	 * reachable from the daemon (valgrind follows the child too). */
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->d = d;
	o.fork_userdata = j;
	j->next = d->report_jobs;
	d->report_jobs = j;
	d->n_report_jobs++;
	if ((id && !(j->id = cJSON_Duplicate(id, true))) || !(j->study = strdup(st->name))) {
		job_fail(j);
		return error_set(err, -ENOMEM, "out of memory");
	}
	r = report_load(d->store, st->name, &ro, &j->report, err);
	if (r < 0) {
		job_fail(j);
		return r;
	}
	r = report_dir(d, st, &j->dir);
	if (r >= 0 && asprintf(&j->html_path, "%s/report.html", j->dir) < 0) {
		j->html_path = NULL;
		r = -ENOMEM;
	}
	if (r >= 0)
		r = child_spawn(d->event, &o, on_report_exit, j, &j->child);
	if (r < 0) {
		job_fail(j);
		return error_set(err, r, "writing the report of %s in %s: %s", st->name, d->state_dir, strerror(-r));
	}
	if (ret)
		*ret = j;
	return 0;
}

void daemon_report_refresh(struct daemon *d, const char *study)
{
	struct store_study st = { 0 };
	struct error err = { 0 };
	int r;

	for (struct daemon_report_job *j = d->report_jobs; j; j = j->next)
		if (strcmp(j->study, study) == 0) {
			j->again = true;
			return;
		}
	if (d->n_report_jobs >= DAEMON_REPORT_JOBS)
		return; /* the next trial's refresh will do */
	r = store_study_get_by_name(d->store, study, &st, &err);
	if (r >= 0)
		r = start_job(d, &st, NULL, NULL, &err);
	if (r < 0)
		log_warning("the live report of study %s: %s", study, error_str(&err, r));
	store_study_done(&st);
}

int daemon_report_path(struct daemon *d, const struct store_study *st, char **ret)
{
	_cleanup_(freep) char *dir = NULL;
	int r;

	r = report_dir(d, st, &dir);
	if (r < 0)
		return r;
	return asprintf(ret, "%s/report.html", dir) < 0 ? -ENOMEM : 0;
}

static cJSON *report_html(struct daemon *d, const struct ctl_peer *peer, const struct ctl_request *req,
			  const struct store_study *st)
{
	struct daemon_report_job *j;
	struct error err = { 0 };
	int r;

	if (!peer->privileged)
		return ctl_response_error(req->id,
					  "permission denied: writing a report's files needs root, goodputd's user or "
					  "membership in its socket group (you are uid %u); without \"html\" the "
					  "Markdown is answered",
					  (unsigned)peer->uid);
	if (d->n_report_jobs >= DAEMON_REPORT_JOBS)
		return ctl_response_error(req->id, "busy: %u reports are being written, try again shortly",
					  DAEMON_REPORT_JOBS);
	for (j = d->report_jobs; j; j = j->next)
		if (strcmp(j->study, st->name) == 0) {
			if (j->pending)
				return ctl_response_error(req->id, "the report of study %s is being written already",
							  st->name);
			/* the live report is being written from the store as it is: answer with it */
			if (req->id && !(j->id = cJSON_Duplicate(req->id, true)))
				return NULL;
			j->pending = ctl_server_defer(d->ctl);
			return NULL;
		}

	r = start_job(d, st, req->id, &j, &err);
	if (r == -ENOMEM)
		return NULL;
	if (r < 0)
		return ctl_response_error(req->id, "%s", error_str(&err, r));
	j->pending = ctl_server_defer(d->ctl);
	if (!j->pending) {
		job_fail(j); /* kills the child */
		return NULL;
	}
	log_info("writing the report of study %s for uid %u (pid %d)", st->name, (unsigned)peer->uid,
		 (int)child_get_pid(j->child));
	return NULL; /* answered by on_report_exit */
}

/* The study named by req: 0, or < 0 with *ret_answer the error to send. */
static int find_study(struct daemon *d, const struct ctl_request *req, struct store_study *ret, cJSON **ret_answer)
{
	struct error err = { 0 };
	int r;

	r = store_study_get_by_name(d->store, req->study, ret, &err);
	if (r == -ENOENT)
		*ret_answer = ctl_response_error(req->id, "no study named \"%s\"", req->study);
	else if (r < 0)
		*ret_answer = ctl_response_error(req->id, "%s", error_str(&err, r));
	return r;
}

cJSON *daemon_handle_report(struct daemon *d, const struct ctl_peer *peer, const struct ctl_request *req)
{
	struct store_study st = { 0 };
	cJSON *answer = NULL;

	if (!req->html)
		return daemon_report_markdown(d, req);
	if (find_study(d, req, &st, &answer) < 0)
		return answer;
	answer = report_html(d, peer, req, &st);
	store_study_done(&st);
	return answer;
}

cJSON *daemon_report_markdown(struct daemon *d, const struct ctl_request *req)
{
	_cleanup_(cJSON_Deletep) cJSON *resp = NULL;
	_cleanup_(freep) char *md = NULL;
	struct report_options ro = { .engines_dir = d->config->engines_dir, .no_plots = true };
	struct store_study st = { 0 };
	struct error err = { 0 };
	cJSON *answer = NULL;
	int r;

	if (find_study(d, req, &st, &answer) < 0)
		return answer;
	r = report_markdown(d->store, st.name, &ro, &md, &err);
	if (r < 0) {
		answer = ctl_response_error(req->id, "report of study %s: %s", st.name, error_str(&err, r));
		store_study_done(&st);
		return answer;
	}
	resp = ctl_response_ok(req->id);
	if (!resp || json_add_string(resp, "study", st.name) < 0 || json_add_string(resp, "markdown", md) < 0) {
		store_study_done(&st);
		return NULL;
	}
	store_study_done(&st);
	return TAKE_PTR(resp);
}
