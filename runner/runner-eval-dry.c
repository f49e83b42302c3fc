/* runner-eval-dry.c — the evaluator of a dry run: the configuration is
 * evaluated in virtual time (runner_dry_evaluate: the sim core's engine
 * model), on the same schedule a real study would keep.
 *
 * An evaluation costs milliseconds for the workloads studies usually name,
 * but CPU and memory grow with workload.num_prompts: a million prompts take
 * half a minute and more than a gigabyte. It never runs on the loop: each
 * evaluation runs in a forked child (child.h), whose address space is
 * limited to RUNNER_DRY_MEMORY_MAX more than it inherited and which dies
 * with its parent. The child writes the result as the bytes of struct
 * runner_dry_result in hex — a forked copy of the same program lays the
 * struct out as the parent does, and it holds no pointers — so costs and
 * times arrive bit-exact, as the virtual clock needs. An evaluation that
 * runs out of its memory ends the study with an error naming
 * workload.num_prompts. A trial aborted (pause, cancel, a failure) kills
 * its evaluation and leaves the reaping to the loop (child_abandon): a
 * process of a gigabyte takes tens of milliseconds to go.
 *
 * One evaluation runs at a time, in trial order (bounded memory, and the
 * order does not depend on which child finishes first), and the runner does
 * not plan while any is queued or running (the evaluator's busy): what the
 * evaluations tell — a saturated throughput, which the probe's capacity
 * reads — is known before anything else starts, as if each evaluation were
 * instant. So a study resumed after a kill keeps the schedule it would have
 * had.
 *
 * A trial starts at the virtual clock's time on its GPUs; what it would take
 * on the host — the server's start-up (the sim core's start-up model:
 * weights read, initialisation, graph capture; with the start-up model on,
 * runner_options) and the probe's load points — fixes its end on the
 * virtual clock. It ends only when the runner has nothing else to do (the
 * evaluator's idle: every trial that could start has started and been
 * evaluated, no ask is in flight): then the clock moves to the earliest end
 * among the trials running (the lower trial number first at a tie) and that
 * trial finishes. So trials overlap, wait for GPUs and end in the order
 * they would on the host, and the study's last end is the wall clock it
 * would have taken.
 *
 * The trial is stored as a real one is — host {"dry_run": true}, its GPUs,
 * its load points (the saturated run and the one at the max rate), its
 * start-up time as deploy_seconds, its outcome — with the virtual clock's
 * start and end (the study's start plus virtual µs), and kinds "dry-run",
 * "dry-run-retry-N", "dry-run-confirm-N", "dry-run-sweep". A confirmation
 * runs the engine with another jitter seed: a re-probe. The answer's sweep
 * (runner-sweep.c) is evaluated point by point (runner_dry_sweep), its
 * virtual time the sum of its load points'. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "child.h"
#include "file-util.h"
#include "parse.h"
#include "runner-dryrun.h"
#include "runner-internal.h"
#include "time-util.h"

/* "result " + the struct in hex + "\n", or "error CODE MESSAGE\n" */
#define DRY_ANSWER_MAX (2 * sizeof(struct runner_dry_result) + ERROR_MSG_MAX + 64)

struct dry_trial {
	struct child *child; /* its evaluation, while it runs */
	bool queued;         /* waits for its evaluation */
	bool evaluated;
	pid_t parent;      /* the runner's process, which the child dies with */
	uint64_t end_usec; /* on the virtual clock */
	struct trial_result res;
};

static struct dry_trial *state_of(const struct runner_trial *t)
{
	return t->eval;
}

static void dry_result(const struct runner_dry_result *res, struct trial_result *ret)
{
	if (res->infeasible) {
		trial_result_init(ret, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_OOM);
		snprintf(ret->message, sizeof(ret->message), "%s", res->message);
		ret->cause = runner_cause_of_sim(res->cause);
		ret->suggested_len = res->suggested_max_model_len;
	} else if (res->sla_never_met) {
		trial_result_init(ret, STORE_TRIAL_INFEASIBLE, STORE_FAILURE_SLA_NEVER_MET);
		snprintf(ret->message, sizeof(ret->message), "%s", res->message);
	} else {
		trial_result_init(ret, STORE_TRIAL_DONE, STORE_FAILURE_NONE);
		ret->max_rate = res->max_rate;
		ret->max_goodput = res->tokens_per_sec;
		ret->concurrency = res->concurrency;
		ret->cost = res->cost_per_mtok;
	}
}

/* Stores what the evaluation measured and fixes the trial's end; < 0 when
 * the study fails. */
static int apply(struct runner_trial *t, struct dry_trial *d, const struct runner_dry_result *res)
{
	struct runner *r = t->runner;
	struct error err = { 0 };
	int k = 0;

	if (t->proposal.sweep)
		k = runner_sweep_store_dry(t, res, &d->res);
	else if (res->have_saturated)
		k = runner_trial_load_point(t, "saturation", &res->saturated, NULL, false);
	if (k >= 0 && res->have_point && !t->proposal.sweep)
		k = runner_trial_load_point(t, r->study->scenario == OPT_SCENARIO_OFFLINE ? "saturation" : "search",
					    &res->point, NULL, true);
	if (k < 0)
		return k;
	{
		double startup = r->opts.startup_model > 0 ? res->startup_s : 0;

		if (!t->proposal.sweep)
			dry_result(res, &d->res);
		if (!res->infeasible && r->opts.startup_model > 0)
			t->deploy_seconds = startup;
		d->end_usec = t->vstart_usec + sec_to_usec(startup + res->probe_s);
		d->evaluated = true;
	}
	k = store_trial_set_state(r->store, t->id, STORE_TRIAL_PROBING, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return k;
	}
	runner_trial_set_phase(t, RUNNER_PROBING);
	return 0;
}

/* ---- the child ---- */

/* The address space the child may add to what it inherited. */
static void limit_memory(void)
{
	unsigned long long pages = 0;
	long page = sysconf(_SC_PAGESIZE);
	struct rlimit rl;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	if (getrlimit(RLIMIT_AS, &rl) < 0 || page <= 0)
		return;
	rl.rlim_cur = MIN(rl.rlim_max, (rlim_t)(pages * (unsigned long long)page + RUNNER_DRY_MEMORY_MAX));
	(void)setrlimit(RLIMIT_AS, &rl);
}

/* In the forked copy: evaluates the trial, writes the answer. */
static int dry_child(void *userdata, int out_fd)
{
	struct runner_trial *t = userdata;
	struct runner *r = t->runner;
	struct runner_dry_result res;
	struct error err = { 0 };
	unsigned variant = t->proposal.ask == OPT_ASK_CONFIRM ? 1000 + t->seq : 0;
	char line[DRY_ANSWER_MAX];
	size_t len;
	int k;

	/* nothing computes on for a runner that was killed, nor holds its
	 * sockets, its lock or its store open (only the answer's pipe is kept) */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != state_of(t)->parent)
		return 3;
	if (out_fd > 3)
		(void)close_range(3, (unsigned)out_fd - 1, 0);
	(void)close_range((unsigned)MAX(out_fd + 1, 3), ~0U, 0);
	limit_memory();
	memset(&res, 0, sizeof(res)); /* padding too: the bytes are the answer */
	if (t->proposal.sweep) {
		double rates[RUNNER_SWEEP_STEPS];
		size_t n = runner_sweep_rates(&t->proposal, rates);

		k = runner_dry_sweep(r->study, t->knobs, variant, rates, n, &res, &err);
	} else
		k = runner_dry_evaluate_knobs(r->study, t->knobs, variant, &res, &err);
	if (k < 0)
		len = (size_t)snprintf(line, sizeof(line), "error %d %s\n", k, error_str(&err, k));
	else {
		len = (size_t)snprintf(line, sizeof(line), "result ");
		len += hex_encode(&res, sizeof(res), line + len);
		line[len++] = '\n';
	}
	if (fd_write_all(out_fd, line, MIN(len, sizeof(line))) < 0)
		return 2;
	return k < 0 ? 1 : 0;
}

/* ---- the parent ---- */

static bool any_evaluating(const struct runner *r)
{
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct dry_trial *d = state_of(r->trials[i]);

		if (d && d->child)
			return true;
	}
	return false;
}

static void on_child_exit(struct child *c, const struct child_exit *how, void *userdata);

/* Starts the next queued evaluation, in trial order, unless one runs.
 * Returns true when one runs (or the study failed starting it). */
static bool pump(struct runner *r)
{
	char msg[128];
	int k;

	if (runner_failing(r) || r->request != RUNNER_REQUEST_NONE)
		return true;
	if (any_evaluating(r))
		return true;
	for (size_t i = 0; i < r->n_trials; i++) {
		struct runner_trial *t = r->trials[i];
		struct dry_trial *d = state_of(t);
		const struct child_options o = {
			.fork_fn = dry_child,
			.fork_userdata = t,
			.output = CHILD_OUTPUT_CAPTURE,
			.capture_max = DRY_ANSWER_MAX,
			.description = "runner-dry-run",
		};

		if (!d || !d->queued)
			continue;
		d->queued = false;
		d->parent = getpid();
		k = child_spawn(r->event, &o, on_child_exit, t, &d->child);
		if (k < 0) {
			snprintf(msg, sizeof(msg), "dry run: cannot start the evaluation of trial %u: %s", t->seq,
				 strerror(-k));
			runner_fail(r, msg);
		}
		return true;
	}
	return false;
}

/* The child's answer; -errno with msg when there is none. */
static int read_answer(struct runner_trial *t, struct child *c, const struct child_exit *how,
		       struct runner_dry_result *ret, char *msg, size_t size)
{
	const struct probe_workload_config *w = &t->runner->study->workload;
	const char *text = child_get_output(c, NULL);
	char status[128];
	int code = 0, n = 0;

	if (strncmp(text, "result ", 7) == 0 && strlen(text) == 7 + 2 * sizeof(*ret) + 1 && child_exit_ok(how) &&
	    hex_decode(text + 7, 2 * sizeof(*ret), ret, sizeof(*ret)) >= 0)
		return 0;
	if (sscanf(text, "error %d %n", &code, &n) == 1 && code == -ENOMEM) {
		snprintf(msg, size,
			 "workload.num_prompts: %u prompts do not fit in the %u MiB a dry run's evaluation may use "
			 "(trial %u ran out of memory); a dry run needs fewer",
			 w->num_prompts, (unsigned)(RUNNER_DRY_MEMORY_MAX >> 20), t->seq);
		return -ENOMEM;
	}
	if (code == -E2BIG) {
		/* past the workload's own caps: the study key that set its size */
		snprintf(msg, size, "workload.num_prompts: %u prompts are too many for a dry run: %.*s", w->num_prompts,
			 (int)strcspn(text + n, "\n"), text + n);
		return code;
	}
	if (code < 0) {
		snprintf(msg, size, "%s", text + n);
		msg[strcspn(msg, "\n")] = 0;
		return code;
	}
	snprintf(msg, size,
		 "dry run: the evaluation of trial %u %s (it may use %u MiB: is workload.num_prompts %u too large?)",
		 t->seq, child_exit_to_string(how, status, sizeof(status)), (unsigned)(RUNNER_DRY_MEMORY_MAX >> 20),
		 w->num_prompts);
	return -ECHILD;
}

static void on_child_exit(struct child *c, const struct child_exit *how, void *userdata)
{
	struct runner_trial *t = userdata;
	struct dry_trial *d = state_of(t);
	struct runner *r = t->runner;
	struct runner_dry_result res;
	char msg[ERROR_MSG_MAX];
	int k;

	k = read_answer(t, c, how, &res, msg, sizeof(msg));
	d->child = child_free(d->child);
	if (k < 0) {
		runner_fail(r, msg);
		return;
	}
	if (apply(t, d, &res) < 0)
		return;
	/* the runner plans once every evaluation it waits for is in */
	if (!pump(r))
		runner_schedule(r, RUNNER_ACTION_PLAN);
}

static void dry_start(struct runner_trial *t)
{
	struct runner *r = t->runner;
	struct dry_trial *d;
	struct error err = { 0 };
	int k;

	d = calloc(1, sizeof(*d));
	if (!d) {
		runner_fail(r, "out of memory");
		return;
	}
	t->eval = d;
	k = store_trial_set_host(r->store, t->id, "{\"dry_run\":true}", &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return;
	}
	runner_trial_set_phase(t, RUNNER_DEPLOYING);
	d->queued = true;
	(void)pump(r);
}

static bool dry_busy(const struct runner *r)
{
	for (size_t i = 0; i < r->n_trials; i++) {
		const struct dry_trial *d = state_of(r->trials[i]);

		if (d && (d->queued || d->child))
			return true;
	}
	return false;
}

/* Nothing else to do: the clock moves to the earliest end, and that trial
 * ends — or, when a hold for a batch's results (runner-fill.c) is over
 * before it, to the hold's end, and the runner plans again. */
static void dry_idle(struct runner *r)
{
	struct runner_trial *next = NULL;
	struct dry_trial *nd = NULL;

	for (size_t i = 0; i < r->n_trials; i++) {
		struct runner_trial *t = r->trials[i];
		struct dry_trial *d = t->eval;

		if (!t->running || !t->open)
			continue;
		if (!d || !d->evaluated)
			return; /* its evaluation comes first */
		if (!next || d->end_usec < nd->end_usec) {
			next = t;
			nd = d;
		}
	}
	if (!next)
		return;
	if (r->vwake_usec > r->vclock_usec && r->vwake_usec < nd->end_usec) {
		/* a hold for a batch's results is over before the next end */
		r->vclock_usec = r->vwake_usec;
		r->vwake_usec = 0;
		runner_schedule(r, RUNNER_ACTION_PLAN);
		return;
	}
	r->vclock_usec = MAX(r->vclock_usec, nd->end_usec);
	next->finished_at_usec = r->study_start_usec + nd->end_usec;
	runner_trial_finish(next, &nd->res);
}

static void dry_abort(struct runner_trial *t)
{
	struct dry_trial *d = t->eval;

	if (!d)
		return;
	/* killed now, reaped by the loop */
	d->child = child_abandon(d->child);
	d->queued = false;
}

static enum runner_server dry_server(const struct runner_trial *t)
{
	return RUNNER_SERVER_NONE;
}

static int dry_stop_server(struct runner_trial *t)
{
	return -ESRCH;
}

static void dry_release(struct runner_trial *t)
{
	dry_abort(t);
	free(t->eval);
	t->eval = NULL;
}

const struct runner_evaluator runner_evaluator_dry = {
	.kind = "dry-run",
	.confirm_prefix = "dry-run-",
	.start = dry_start,
	.abort = dry_abort,
	.server = dry_server,
	.stop_server = dry_stop_server,
	.release = dry_release,
	.idle = dry_idle,
	.busy = dry_busy,
};
