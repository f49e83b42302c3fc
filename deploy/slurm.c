/* slurm.c — the cluster object (slurm.h): Slurm's client commands run as
 * children on the caller's loop, and the poll that reads the queue for
 * every watched job.
 *
 * Each command is an argv (common/child.h: no shell, its own process
 * group, stdin from /dev/null) with its output captured; an operation
 * holds one such child and the callback that reads its output. The poll
 * is one timer for the whole object: while jobs are watched it runs
 * `squeue --json --me` once per interval (never two at a time) and tells
 * each watch whose job changed. A job the queue no longer lists — and that
 * was watched before that squeue started, so a job submitted meanwhile is
 * not taken for gone — is looked up once with `sacct --json -j ID`; when
 * accounting does not know it either (no accounting storage, or purged),
 * it is GONE. A failing squeue (the controller unreachable) changes no
 * state: the jobs keep what was last seen and the next interval tries
 * again. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child.h"
#include "deploy-internal.h"
#include "log.h"
#include "slurm.h"
#include "time-util.h"

#define POLL_DEFAULT_USEC    (2 * USEC_PER_SEC)
#define POLL_SOON_USEC       (50 * USEC_PER_MSEC)
#define COMMAND_TIMEOUT_USEC (60 * USEC_PER_SEC)
#define QUEUE_JSON_MAX       (64u << 20) /* squeue --json of a busy cluster: ~3 KiB per job */
#define SHORT_OUTPUT_MAX     (64u << 10)
#define CANCEL_BATCH         64

enum op_kind {
	OP_SUBMIT,
	OP_CANCEL,
	OP_LIST,
	OP_GPUS,
	OP_POLL,
	OP_SACCT,
};

struct slurm_op {
	struct slurm_cluster *cluster;
	struct slurm_op *prev, *next;
	enum op_kind kind;
	struct child *child;
	union {
		slurm_submit_fn submit;
		slurm_done_fn done;
		slurm_list_fn list;
		slurm_gpus_fn gpus;
	} cb;
	void *userdata;
	char *partition;           /* OP_GPUS */
	uint64_t poll_gen;         /* OP_POLL: this poll's number */
	struct slurm_watch *watch; /* OP_SACCT */
	bool dispatching;          /* its callback runs: freed right after it */
};

struct slurm_watch {
	struct slurm_cluster *cluster;
	struct slurm_watch *prev, *next;
	uint64_t job_id;
	slurm_watch_fn cb;
	void *userdata;
	struct slurm_job job;
	uint64_t since_gen;     /* the last poll started before it was watched */
	struct slurm_op *sacct; /* looking for it in accounting */
	bool sacct_done;        /* ... done once */
	bool ended;             /* a final state was told */
};

struct slurm_cluster {
	sd_event *event;
	char *prog[5]; /* sbatch, squeue, scancel, sacct, sinfo */
	uint64_t poll_interval_usec, command_timeout_usec;
	struct slurm_op *ops;
	struct slurm_watch *watches;
	struct slurm_op *poll; /* the squeue in flight */
	sd_event_source *poll_timer;
	uint64_t poll_gen, answered_gen; /* the last look started, the last that read the queue */
	unsigned poll_failures;
};

enum {
	PROG_SBATCH,
	PROG_SQUEUE,
	PROG_SCANCEL,
	PROG_SACCT,
	PROG_SINFO
};

/* ---- operations ---- */

static void op_unlink(struct slurm_op *op)
{
	struct slurm_cluster *c = op->cluster;

	if (op->prev)
		op->prev->next = op->next;
	else if (c->ops == op)
		c->ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	op->prev = op->next = NULL;
	if (c->poll == op)
		c->poll = NULL;
	if (op->watch && op->watch->sacct == op)
		op->watch->sacct = NULL;
}

struct slurm_op *slurm_op_free(struct slurm_op *op)
{
	if (!op || op->dispatching)
		return NULL;
	op_unlink(op);
	child_free(op->child);
	free(op->partition);
	free(op);
	return NULL;
}

static void on_op_exit(struct child *child, const struct child_exit *how, void *userdata);

/* Spawns prog with args (NULL-terminated, after argv[0]); output captured. */
static int op_spawn(struct slurm_cluster *c, enum op_kind kind, int prog, const char *const *args, size_t capture_max,
		    void *userdata, struct slurm_op **ret, struct error *err)
{
	_cleanup_(freep) char **argv = NULL, **env = deploy_environment(NULL, 0);
	struct child_options o = {
		.envp = env,
		.output = CHILD_OUTPUT_CAPTURE,
		.capture_max = capture_max,
		.timeout_usec = c->command_timeout_usec,
		.kill_grace_usec = 2 * USEC_PER_SEC,
		.description = "slurm-command",
	};
	struct slurm_op *op;
	size_t n = 0;
	int r;

	while (args[n])
		n++;
	argv = calloc(n + 2, sizeof(char *));
	op = calloc(1, sizeof(*op));
	if (!argv || !op || !env) {
		free(op);
		return error_set(err, -ENOMEM, "out of memory");
	}
	argv[0] = c->prog[prog];
	memcpy(argv + 1, args, n * sizeof(char *));
	o.argv = argv;
	*op = (struct slurm_op){ .cluster = c, .kind = kind, .userdata = userdata };
	r = child_spawn(c->event, &o, on_op_exit, op, &op->child);
	if (r < 0) {
		free(op);
		return error_set(err, r, "cannot run %s: %s", argv[0], strerror(-r));
	}
	op->next = c->ops;
	if (c->ops)
		c->ops->prev = op;
	c->ops = op;
	if (ret)
		*ret = op;
	return 0;
}

/* The last line(s) of a command's output that say why it failed. */
static void failure_text(const char *prog, const struct child_exit *how, const char *out, char *buf, size_t size)
{
	char status[96];
	size_t len = strlen(out);

	while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
		len--;
	if (len > 400)
		out += len - 400, len = 400;
	snprintf(buf, size, "%s %s%s%.*s", prog, child_exit_to_string(how, status, sizeof(status)), len ? ": " : "",
		 (int)len, out);
}

static void submit_done(struct slurm_op *op, bool ok, const char *out, const char *why)
{
	slurm_submit_fn cb = op->cb.submit;
	char *end;
	unsigned long long id;

	if (!ok) {
		cb(op->cluster, -EIO, 0, why, op->userdata);
		return;
	}
	/* "JOBID" or "JOBID;CLUSTER" */
	id = strtoull(out, &end, 10);
	if (end == out || id == 0 || (*end && *end != ';' && *end != '\n')) {
		char msg[512];

		snprintf(msg, sizeof(msg), "sbatch --parsable printed no job id: \"%.200s\"", out);
		cb(op->cluster, -EPROTO, 0, msg, op->userdata);
		return;
	}
	cb(op->cluster, 0, (uint64_t)id, NULL, op->userdata);
}

static void list_done(struct slurm_op *op, bool ok, const char *out, const char *why)
{
	slurm_list_fn cb = op->cb.list;
	_cleanup_(freep) struct slurm_job *jobs = NULL;
	struct error err = { 0 };
	size_t n = 0, mine = 0;
	int64_t uid = (int64_t)getuid();
	int r;

	if (!ok) {
		cb(op->cluster, -EIO, NULL, 0, why, op->userdata);
		return;
	}
	r = slurm_parse_jobs(out, strlen(out), &jobs, &n, &err);
	if (r < 0) {
		cb(op->cluster, r, NULL, 0, error_str(&err, r), op->userdata);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (jobs[i].user_id < 0 || jobs[i].user_id == uid)
			jobs[mine++] = jobs[i];
	cb(op->cluster, 0, jobs, mine, NULL, op->userdata);
}

static void gpus_done(struct slurm_op *op, bool ok, const char *out, const char *why)
{
	slurm_gpus_fn cb = op->cb.gpus;
	struct error err = { 0 };
	unsigned gpus = 0, nodes = 0, most = 0;
	int r;

	if (!ok) {
		cb(op->cluster, -EIO, 0, 0, 0, why, op->userdata);
		return;
	}
	r = slurm_parse_gpus(out, strlen(out), op->partition, &gpus, &nodes, &most, &err);
	cb(op->cluster, r, gpus, nodes, most, r < 0 ? error_str(&err, r) : NULL, op->userdata);
}

static void poll_done(struct slurm_op *op, bool ok, const char *out, const char *why);
static void sacct_done(struct slurm_op *op, bool ok, const char *out, const char *why);

static void on_op_exit(struct child *child, const struct child_exit *how, void *userdata)
{
	struct slurm_op *op = userdata;
	struct slurm_cluster *c = op->cluster;
	static const int progs[] = { [OP_SUBMIT] = PROG_SBATCH, [OP_CANCEL] = PROG_SCANCEL, [OP_LIST] = PROG_SQUEUE,
				     [OP_GPUS] = PROG_SINFO,    [OP_POLL] = PROG_SQUEUE,    [OP_SACCT] = PROG_SACCT };
	bool truncated = false;
	const char *out = child_get_output(child, &truncated);
	bool ok = child_exit_ok(how) && !truncated;
	char why[640];

	why[0] = 0;
	if (truncated)
		snprintf(why, sizeof(why), "%s printed more than goodput reads (%u MiB)", c->prog[progs[op->kind]],
			 QUEUE_JSON_MAX >> 20);
	else if (!ok)
		failure_text(c->prog[progs[op->kind]], how, out, why, sizeof(why));
	/* the callback may drop its handle (slurm_op_free does nothing now) or
	 * free a watch: the op is off the list first and freed after */
	op_unlink(op);
	op->dispatching = true;
	switch (op->kind) {
	case OP_SUBMIT:
		submit_done(op, ok, out, why);
		break;
	case OP_CANCEL:
		if (op->cb.done)
			op->cb.done(c, ok ? 0 : -EIO, ok ? NULL : why, op->userdata);
		break;
	case OP_LIST:
		list_done(op, ok, out, why);
		break;
	case OP_GPUS:
		gpus_done(op, ok, out, why);
		break;
	case OP_POLL:
		poll_done(op, ok, out, why);
		break;
	case OP_SACCT:
		sacct_done(op, ok, out, why);
		break;
	}
	child_free(op->child);
	free(op->partition);
	free(op);
}

/* ---- the public operations ---- */

int slurm_submit(struct slurm_cluster *c, char *const *args, slurm_submit_fn cb, void *userdata, struct slurm_op **ret,
		 struct error *err)
{
	_cleanup_(freep) const char **full = NULL;
	struct slurm_op *op = NULL;
	size_t n = 0;
	int r;

	while (args[n])
		n++;
	full = calloc(n + 2, sizeof(char *));
	if (!full)
		return error_set(err, -ENOMEM, "out of memory");
	full[0] = "--parsable";
	memcpy(full + 1, args, n * sizeof(char *));
	r = op_spawn(c, OP_SUBMIT, PROG_SBATCH, full, SHORT_OUTPUT_MAX, userdata, &op, err);
	if (r < 0)
		return r;
	op->cb.submit = cb;
	*ret = op;
	return 0;
}

/* "123" for each id (at most CANCEL_BATCH), after argv[0]. */
static int cancel_args(const uint64_t *ids, size_t n, char (*text)[24], const char **args)
{
	if (n == 0 || n > CANCEL_BATCH)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		snprintf(text[i], sizeof(text[i]), "%" PRIu64, ids[i]);
		args[i] = text[i];
	}
	args[n] = NULL;
	return 0;
}

int slurm_cancel(struct slurm_cluster *c, const uint64_t *ids, size_t n, slurm_done_fn cb, void *userdata,
		 struct slurm_op **ret, struct error *err)
{
	char text[CANCEL_BATCH][24];
	const char *args[CANCEL_BATCH + 1];
	struct slurm_op *op = NULL;
	int r;

	if (cancel_args(ids, n, text, args) < 0)
		return error_set(err, -EINVAL, "scancel: %zu jobs (1 to %d at once)", n, CANCEL_BATCH);
	r = op_spawn(c, OP_CANCEL, PROG_SCANCEL, args, SHORT_OUTPUT_MAX, userdata, &op, err);
	if (r < 0)
		return r;
	op->cb.done = cb;
	if (ret)
		*ret = op;
	return 0;
}

int slurm_cancel_now(struct slurm_cluster *c, const uint64_t *ids, size_t n)
{
	char text[CANCEL_BATCH][24];
	const char *args[CANCEL_BATCH + 2];
	_cleanup_(freep) char **env = deploy_environment(NULL, 0);
	struct child_options o = {
		.envp = env,
		.output = CHILD_OUTPUT_CAPTURE,
		.timeout_usec = c->command_timeout_usec,
		.kill_grace_usec = USEC_PER_SEC,
		.description = "slurm-cancel",
	};
	struct child_exit how;
	int r;

	if (!env)
		return -ENOMEM;
	args[0] = c->prog[PROG_SCANCEL];
	r = cancel_args(ids, n, text, args + 1);
	if (r < 0)
		return r;
	o.argv = (char *const *)args;
	r = child_run(&o, &how, NULL);
	if (r < 0)
		return r;
	return child_exit_ok(&how) ? 0 : -EIO;
}

int slurm_list(struct slurm_cluster *c, slurm_list_fn cb, void *userdata, struct slurm_op **ret, struct error *err)
{
	static const char *const args[] = { "--json", "--me", NULL };
	struct slurm_op *op = NULL;
	int r;

	r = op_spawn(c, OP_LIST, PROG_SQUEUE, args, QUEUE_JSON_MAX, userdata, &op, err);
	if (r < 0)
		return r;
	op->cb.list = cb;
	if (ret)
		*ret = op;
	return 0;
}

int slurm_partition_gpus(struct slurm_cluster *c, const char *partition, slurm_gpus_fn cb, void *userdata,
			 struct slurm_op **ret, struct error *err)
{
	static const char *const args[] = { "--json", NULL };
	struct slurm_op *op = NULL;
	int r;

	if (!c->prog[PROG_SINFO])
		return error_set(err, -ENOENT, "sinfo: not found");
	r = op_spawn(c, OP_GPUS, PROG_SINFO, args, QUEUE_JSON_MAX, userdata, &op, err);
	if (r < 0)
		return r;
	op->cb.gpus = cb;
	if (partition && !(op->partition = strdup(partition))) {
		slurm_op_free(op);
		return error_set(err, -ENOMEM, "out of memory");
	}
	if (ret)
		*ret = op;
	return 0;
}

/* ---- watches and the poll ---- */

static void poll_schedule(struct slurm_cluster *c, uint64_t in_usec);

/* Whether the queue's word on a job is news to its watch: its state, why
 * it waits, where it runs. */
static bool job_changed(const struct slurm_job *seen, const struct slurm_job *j)
{
	return seen->state != j->state || strcmp(seen->reason, j->reason) != 0 || strcmp(seen->nodes, j->nodes) != 0;
}

/* Tells a watch its job, when it changed; a final state once. */
static void watch_update(struct slurm_watch *w, const struct slurm_job *j)
{
	if (w->ended || !job_changed(&w->job, j))
		return;
	w->job = *j;
	w->ended = slurm_state_is_final(j->state);
	w->cb(w, &w->job, w->userdata); /* may free w */
}

static void watch_gone(struct slurm_watch *w)
{
	struct slurm_job j = w->job;

	j.state = SLURM_STATE_GONE;
	snprintf(j.state_name, sizeof(j.state_name), "(not in the queue)");
	watch_update(w, &j);
}

static void sacct_done(struct slurm_op *op, bool ok, const char *out, const char *why)
{
	struct slurm_watch *w = op->watch;
	_cleanup_(freep) struct slurm_job *jobs = NULL;
	size_t n = 0;

	if (!w)
		return;
	w->sacct = NULL;
	if (ok && slurm_parse_jobs(out, strlen(out), &jobs, &n, NULL) >= 0)
		for (size_t i = 0; i < n; i++)
			if (jobs[i].id == w->job_id && slurm_state_is_final(jobs[i].state)) {
				watch_update(w, &jobs[i]);
				return;
			}
	log_debug("job %" PRIu64 ": not in the queue, nor in accounting%s%s", w->job_id, ok ? "" : ": ", why);
	watch_gone(w);
}

/* A job the queue no longer lists: accounting may know how it ended. */
static void look_up_ended(struct slurm_watch *w)
{
	struct slurm_cluster *c = w->cluster;
	char id[24];
	const char *args[] = { "--json", "-j", id, NULL };
	struct slurm_op *op = NULL;

	if (w->sacct || w->ended)
		return;
	if (w->sacct_done) {
		watch_gone(w);
		return;
	}
	w->sacct_done = true;
	snprintf(id, sizeof(id), "%" PRIu64, w->job_id);
	if (!c->prog[PROG_SACCT] || op_spawn(c, OP_SACCT, PROG_SACCT, args, QUEUE_JSON_MAX, NULL, &op, NULL) < 0) {
		watch_gone(w);
		return;
	}
	op->watch = w;
	w->sacct = op;
}

static void poll_done(struct slurm_op *op, bool ok, const char *out, const char *why)
{
	struct slurm_cluster *c = op->cluster;
	_cleanup_(freep) struct slurm_job *jobs = NULL;
	struct error err = { 0 };
	size_t n = 0;
	int r = ok ? slurm_parse_jobs(out, strlen(out), &jobs, &n, &err) : -EIO;

	if (r < 0) {
		if (c->poll_failures++ % 30 == 0)
			log_warning("reading the Slurm queue: %s (the jobs keep their last known states)",
				    ok ? error_str(&err, r) : why);
		poll_schedule(c, c->poll_interval_usec);
		return;
	}
	c->poll_failures = 0;
	c->answered_gen = MAX(c->answered_gen, op->poll_gen);
	/* each watch in turn; a callback may free any watch, so restart after each call */
	for (bool again = true; again;) {
		again = false;
		for (struct slurm_watch *w = c->watches; w; w = w->next) {
			const struct slurm_job *found = NULL;

			if (w->ended || w->sacct)
				continue;
			for (size_t i = 0; i < n && !found; i++)
				if (jobs[i].id == w->job_id)
					found = &jobs[i];
			if (!found && w->since_gen >= op->poll_gen)
				continue; /* watched since this squeue started: not yet listed is no news */
			if (found && !job_changed(&w->job, found))
				continue;
			if (found)
				watch_update(w, found);
			else
				look_up_ended(w);
			again = true;
			break;
		}
	}
	poll_schedule(c, c->poll_interval_usec);
}

static int on_poll_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct slurm_cluster *c = userdata;
	static const char *const args[] = { "--json", "--me", NULL };
	struct error err = { 0 };
	struct slurm_op *op = NULL;
	bool live = false;
	int r;

	for (struct slurm_watch *w = c->watches; w; w = w->next)
		live = live || !w->ended;
	if (!live || c->poll)
		return 0;
	r = op_spawn(c, OP_POLL, PROG_SQUEUE, args, QUEUE_JSON_MAX, NULL, &op, &err);
	if (r < 0) {
		log_warning("reading the Slurm queue: %s", error_str(&err, r));
		poll_schedule(c, c->poll_interval_usec);
		return 0;
	}
	op->poll_gen = ++c->poll_gen;
	c->poll = op;
	return 0;
}

static void poll_schedule(struct slurm_cluster *c, uint64_t in_usec)
{
	uint64_t at = mono_usec() + in_usec, old = 0;
	int r;

	if (c->poll_timer && sd_event_source_get_enabled(c->poll_timer, NULL) > 0 &&
	    sd_event_source_get_time(c->poll_timer, &old) >= 0 && old <= at)
		return;
	if (!c->poll_timer) {
		r = sd_event_add_time(c->event, &c->poll_timer, CLOCK_MONOTONIC, at, 1000, on_poll_timer, c);
		if (r < 0) {
			log_warning("slurm: cannot arm the poll timer: %s", strerror(-r));
			return;
		}
		(void)sd_event_source_set_description(c->poll_timer, "slurm-poll");
	} else
		(void)sd_event_source_set_time(c->poll_timer, at);
	(void)sd_event_source_set_enabled(c->poll_timer, SD_EVENT_ONESHOT);
}

uint64_t slurm_cluster_poll_soon(struct slurm_cluster *c)
{
	poll_schedule(c, POLL_SOON_USEC);
	/* a squeue in flight asked before now: the next one answers */
	return c->poll_gen + 1;
}

bool slurm_cluster_answered(const struct slurm_cluster *c, uint64_t look)
{
	return c->answered_gen >= look;
}

bool slurm_watch_settling(const struct slurm_watch *w)
{
	return !w->ended && (w->sacct || w->job.state == SLURM_STATE_COMPLETING);
}

uint64_t slurm_cluster_poll_interval(const struct slurm_cluster *c)
{
	return c->poll_interval_usec;
}

int slurm_watch_new(struct slurm_cluster *c, uint64_t job_id, slurm_watch_fn cb, void *userdata,
		    struct slurm_watch **ret)
{
	struct slurm_watch *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	*w = (struct slurm_watch){ .cluster = c, .job_id = job_id, .cb = cb, .userdata = userdata };
	w->job = (struct slurm_job){ .id = job_id, .user_id = -1, .exit_code = -1 };
	/* a squeue in flight (the last one started) may have asked before the
	 * job was there: only those started later may say it is missing */
	w->since_gen = c->poll_gen;
	w->next = c->watches;
	if (c->watches)
		c->watches->prev = w;
	c->watches = w;
	poll_schedule(c, POLL_SOON_USEC);
	*ret = w;
	return 0;
}

struct slurm_watch *slurm_watch_free(struct slurm_watch *w)
{
	struct slurm_cluster *c;

	if (!w)
		return NULL;
	c = w->cluster;
	slurm_op_free(w->sacct);
	if (w->prev)
		w->prev->next = w->next;
	else if (c->watches == w)
		c->watches = w->next;
	if (w->next)
		w->next->prev = w->prev;
	free(w);
	return NULL;
}

const struct slurm_job *slurm_watch_job(const struct slurm_watch *w)
{
	return &w->job;
}

/* ---- the object ---- */

int slurm_cluster_new(sd_event *e, const struct slurm_options *o, struct slurm_cluster **ret, struct error *err)
{
	static const char *const defaults[] = { "sbatch", "squeue", "scancel", "sacct", "sinfo" };
	const char *given[] = { o ? o->sbatch : NULL, o ? o->squeue : NULL, o ? o->scancel : NULL, o ? o->sacct : NULL,
				o ? o->sinfo : NULL };
	_cleanup_(slurm_cluster_freep) struct slurm_cluster *c = NULL;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return error_set(err, -ENOMEM, "out of memory");
	c->event = sd_event_ref(e);
	c->poll_interval_usec = o && o->poll_interval_usec ? o->poll_interval_usec : POLL_DEFAULT_USEC;
	c->command_timeout_usec = o && o->command_timeout_usec ? o->command_timeout_usec : COMMAND_TIMEOUT_USEC;
	for (size_t i = 0; i < ELEMENTSOF(defaults); i++) {
		const char *name = given[i] ? given[i] : defaults[i];

		r = child_find_program(name, &c->prog[i]);
		if (r < 0 && i <= PROG_SCANCEL)
			return error_set(err, r, "%s: %s (deploy.method slurm needs Slurm's client commands in PATH)",
					 name, r == -ENOENT ? "not found" : strerror(-r));
		/* sacct and sinfo are optional: without them a forgotten job is gone, the partition unknown */
	}
	*ret = TAKE_PTR(c);
	return 0;
}

struct slurm_cluster *slurm_cluster_free(struct slurm_cluster *c)
{
	if (!c)
		return NULL;
	while (c->watches)
		slurm_watch_free(c->watches);
	while (c->ops)
		slurm_op_free(c->ops);
	sd_event_source_disable_unref(c->poll_timer);
	for (size_t i = 0; i < ELEMENTSOF(c->prog); i++)
		free(c->prog[i]);
	sd_event_unref(c->event);
	free(c);
	return NULL;
}
