/* daemon-report.c — the `report` command of goodputd's control socket.
 *
 * {"command": "report", "study": S} answers the study's report as Markdown
 * (tables only: report_markdown reads the store and renders text, a few
 * milliseconds, so it is answered at once). With "html": true the full
 * report — HTML with inline SVG plots, Markdown with plot files — is written
 * into STATE_DIR/reports/<study>/ and the answer names report.html. Plots are
 * drawn by gnuplot, 30-50 ms each and a second or more for a whole report,
 * which the loop must not wait for: a forked child opens the store
 * read-only (an SQLite connection must not cross a fork), writes the files
 * and exits, and the answer is deferred (ctl_server_defer) until
 * sd_event_add_child reports it done. The child's error message, if any,
 * comes back through a pipe. At most DAEMON_REPORT_JOBS run at once and one
 * per study; writing files is for privileged peers only (it costs disk and
 * CPU), the Markdown is for anyone who may read. */
#include "daemon-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json-util.h"
#include "log.h"
#include "report.h"

struct daemon_report_job {
	struct daemon *d;
	struct daemon_report_job *next;
	struct ctl_pending *pending;
	cJSON *id;       /* the request's id, echoed */
	char *study;     /* the study's name */
	char *dir;       /* where the child writes the report */
	char *html_path; /* ... and its report.html */
	pid_t pid;
	int err_fd; /* read end of the child's error pipe */
	sd_event_source *child;
};

static struct daemon_report_job *job_free(struct daemon_report_job *j)
{
	if (!j)
		return NULL;
	if (j->child) {
		/* The daemon stops before the child finished: do not leave it. */
		(void)sd_event_source_send_child_signal(j->child, SIGKILL, NULL, 0);
		j->child = sd_event_source_disable_unref(j->child);
		(void)waitpid(j->pid, NULL, 0);
	}
	ctl_pending_answer(j->pending, NULL);
	cJSON_Delete(j->id);
	free(j->study);
	free(j->dir);
	free(j->html_path);
	safe_close(j->err_fd);
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

static int on_report_child(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct daemon_report_job *j = userdata;
	cJSON *answer;

	j->child = sd_event_source_disable_unref(j->child);
	if (si->si_code == CLD_EXITED && si->si_status == 0) {
		answer = ctl_response_ok(j->id);
		if (answer && (json_add_string(answer, "study", j->study) < 0 ||
			       json_add_string(answer, "html", j->html_path) < 0))
			answer = (cJSON_Delete(answer), NULL);
		log_info("report of study %s written: %s", j->study, j->html_path);
	} else {
		char msg[ERROR_MSG_MAX] = "";
		ssize_t n = read(j->err_fd, msg, sizeof(msg) - 1);

		msg[n > 0 ? n : 0] = '\0';
		if (!msg[0])
			snprintf(msg, sizeof(msg), "the report writer %s %d",
				 si->si_code == CLD_EXITED ? "exited with" : "was killed by signal", si->si_status);
		answer = ctl_response_error(j->id, "report of study %s: %s", j->study, msg);
		log_warning("report of study %s: %s", j->study, msg);
	}
	ctl_pending_answer(j->pending, answer);
	j->pending = NULL;
	job_fail(j);
	return 0;
}

/* In the child: write the report, exit. Never returns. */
static _Noreturn void report_child(struct daemon *d, const char *study, const char *dir, int err_fd)
{
	struct store_open_options so = { .flags = STORE_OPEN_READ_ONLY };
	struct report_options ro = { .engines_dir = d->config->engines_dir };
	struct store *s = NULL;
	struct error err = { 0 };
	char *path = NULL;
	sigset_t ss;
	int r;

	/* The loop's blocked signals must not reach gnuplot. */
	sigemptyset(&ss);
	(void)sigprocmask(SIG_SETMASK, &ss, NULL);
	r = store_open(d->db_path, &so, &s, &err);
	if (r >= 0)
		r = report_write_html(s, study, dir, &ro, &path, &err);
	free(path);
	store_close(s);
	if (r < 0) {
		const char *m = error_str(&err, r);

		(void)!write(err_fd, m, strlen(m));
		_exit(1);
	}
	_exit(0);
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

static cJSON *report_html(struct daemon *d, const struct ctl_peer *peer, const struct ctl_request *req,
			  const struct store_study *st)
{
	struct daemon_report_job *j;
	int pipefd[2], r;

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
		if (strcmp(j->study, st->name) == 0)
			return ctl_response_error(req->id, "the report of study %s is being written already", st->name);

	/* Listed before the fork, so that everything the child inherits stays
	 * reachable from the daemon (valgrind follows the child too). */
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->d = d;
	j->err_fd = -1;
	j->next = d->report_jobs;
	d->report_jobs = j;
	d->n_report_jobs++;
	if ((req->id && !(j->id = cJSON_Duplicate(req->id, true))) || !(j->study = strdup(st->name))) {
		job_fail(j);
		return NULL;
	}
	r = report_dir(d, st, &j->dir);
	if (r < 0) {
		job_fail(j);
		return ctl_response_error(req->id, "the reports folder in %s: %s", d->state_dir, strerror(-r));
	}
	if (asprintf(&j->html_path, "%s/report.html", j->dir) < 0) {
		j->html_path = NULL;
		job_fail(j);
		return NULL;
	}
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		r = -errno;
		job_fail(j);
		return ctl_response_error(req->id, "pipe: %s", strerror(-r));
	}
	j->err_fd = pipefd[0];
	j->pid = fork();
	if (j->pid < 0) {
		r = -errno;
		safe_close(pipefd[1]);
		job_fail(j);
		return ctl_response_error(req->id, "fork: %s", strerror(-r));
	}
	if (j->pid == 0)
		report_child(d, j->study, j->dir, pipefd[1]);
	safe_close(pipefd[1]);
	/* Non-blocking: the child's message is read once it has exited. */
	(void)fcntl(j->err_fd, F_SETFL, O_NONBLOCK);
	r = sd_event_add_child(d->event, &j->child, j->pid, WEXITED, on_report_child, j);
	if (r < 0) {
		(void)kill(j->pid, SIGKILL);
		(void)waitpid(j->pid, NULL, 0);
		job_fail(j);
		return ctl_response_error(req->id, "watching the report writer: %s", strerror(-r));
	}
	(void)sd_event_source_set_description(j->child, "report-writer");
	j->pending = ctl_server_defer(d->ctl);
	if (!j->pending) {
		job_fail(j); /* kills the child */
		return NULL;
	}
	log_info("writing the report of study %s for uid %u (pid %d)", st->name, (unsigned)peer->uid, (int)j->pid);
	return NULL; /* answered by on_report_child */
}

cJSON *daemon_handle_report(struct daemon *d, const struct ctl_peer *peer, const struct ctl_request *req)
{
	_cleanup_(cJSON_Deletep) cJSON *resp = NULL;
	_cleanup_(freep) char *md = NULL;
	struct report_options ro = { .engines_dir = d->config->engines_dir, .no_plots = true };
	struct store_study st = { 0 };
	struct error err = { 0 };
	cJSON *answer;
	int r;

	r = store_study_get_by_name(d->store, req->study, &st, &err);
	if (r == -ENOENT)
		return ctl_response_error(req->id, "no study named \"%s\"", req->study);
	if (r < 0)
		return ctl_response_error(req->id, "%s", error_str(&err, r));
	if (req->html) {
		answer = report_html(d, peer, req, &st);
		store_study_done(&st);
		return answer;
	}
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
