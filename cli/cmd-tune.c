/* cmd-tune.c — `goodput tune STUDY.json`: one tuning study in the
 * foreground, without the daemon. It records the study in the store (or
 * finds it again with --resume), runs the study runner on its own sd-event
 * loop, shows progress on stderr, and ends with the best configuration, its
 * cost, its latencies at the chosen load and the command line that runs the
 * engine with it. SIGINT/SIGTERM stop gracefully: the server under test is
 * torn down and the running trial is left to be redone by --resume. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli-util.h"
#include "commands.h"
#include "exit-status.h"
#include "engine-profile.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "report.h"
#include "runner.h"
#include "store.h"
#include "study.h"
#include "time-util.h"

struct tune_ctx {
	sd_event *event;
	struct runner *runner;
	struct store *store;
	bool store_lost;   /* the database file was removed or replaced (store_check_files) */
	char message[512]; /* the runner's last words (why it waits) */
	bool json, quiet, tty;
	unsigned signals;
	enum runner_end end;
	bool status_shown;
	bool no_feasible;         /* the study ended with nothing meeting the SLA */
	uint64_t last_point_usec; /* when a load point's progress was last shown */
};

/* ---- progress ---- */

static void clear_line(struct tune_ctx *c)
{
	if (c->tty && c->status_shown) {
		fputs("\r\033[K", stderr);
		c->status_shown = false;
	}
}

/* log.h's hook: a log line starts on a line of its own, not after the
 * status line */
static void clear_line_before_log(void *userdata)
{
	clear_line(userdata);
}

/* "trial 7 [GPU 2,3]" */
static void trial_tag(const struct runner_trial_status *t, char *buf, size_t size)
{
	snprintf(buf, size, "%s %u%s%s%s",
		 t->sweep        ? "sweep"
		 : t->confirming ? "confirm"
				 : "trial",
		 t->seq, t->gpus[0] ? " [GPU " : "", t->gpus, t->gpus[0] ? "]" : "");
}

/* "trial 3 load point 2 (rate search, at most 12): 0.84 req/s, 37/40 good so
 * far", "sweep 14 sweep point 3/8: ...": on a terminal
 * rewritten in place, in a log once a load point ends and every 10 s. */
static void show_point(struct tune_ctx *c, const struct runner_trial_status *t, const struct runner_event *ev)
{
	char tag[96], what[64], failed[32] = "", line[448], sent[32] = "", verdict[192] = "";
	uint64_t now = mono_usec();

	if (!ev->point.ended && (ev->point.done == 0 || (!c->tty && now - c->last_point_usec < 10 * USEC_PER_SEC)))
		return;
	c->last_point_usec = now;
	trial_tag(t, tag, sizeof(tag));
	if (ev->point.saturation)
		snprintf(what, sizeof(what), "saturation run (all at once)");
	else if (isinf(ev->point.rate))
		snprintf(what, sizeof(what), "load point (all at once)");
	else if (ev->point.sweep)
		snprintf(what, sizeof(what), "sweep point %u/%u: %.3g req/s", ev->point.index, ev->point.max,
			 ev->point.rate);
	else /* the search may end before its last allowed point: say what is known */
		snprintf(what, sizeof(what), "load point %u (rate search, at most %u): %.3g req/s", ev->point.index,
			 ev->point.max, ev->point.rate);
	if (ev->point.failed)
		snprintf(failed, sizeof(failed), ", %u failed", ev->point.failed);
	/* once it ended: the rate it sent and its verdict ("met at the cap: ...") */
	if (ev->point.ended && ev->point.result && !ev->point.saturation && isfinite(ev->point.rate)) {
		const struct probe_result *res = ev->point.result;

		if (res->offered_rate > 0)
			snprintf(sent, sizeof(sent), " (%.3g sent)", res->offered_rate);
		verdict[0] = ';';
		verdict[1] = ' ';
		probe_result_verdict_text(res, verdict + 2, sizeof(verdict) - 2);
		if (!verdict[2])
			verdict[0] = 0;
	}
	snprintf(line, sizeof(line), "%s %s%s, %u/%u good%s%s%s", tag, what, sent, ev->point.good, ev->point.done,
		 failed, ev->point.ended ? "" : " so far", verdict);
	if (c->tty) {
		clear_line(c);
		fprintf(stderr, "%s", line);
		c->status_shown = true;
	} else
		fprintf(stderr, "%s\n", line);
}

/* " (job 12, 3.1 s in the queue)" as a job starts to deploy; "" otherwise. */
static void job_note(const struct runner_trial_status *t, enum runner_phase p, char *buf, size_t size)
{
	buf[0] = 0;
	if (p == RUNNER_DEPLOYING && t->job_id && isfinite(t->pending_seconds))
		snprintf(buf, size, " (job %" PRIu64 ", %.1f s in the queue)", t->job_id, t->pending_seconds);
}

/* "; ETA 2h10m" after a measured trial: the time the budget has left, as
 * the status line and goodput status estimate it, on the lines a log file
 * keeps too ("" with no estimate yet, or when the budget is spent). */
static const char *eta_note(const struct runner_status *st, char *buf, size_t size)
{
	char eta[32];

	buf[0] = 0;
	if (st->eta_usec != USEC_INFINITY && st->eta_usec > 0)
		snprintf(buf, size, "; ETA %s", format_duration(eta, sizeof(eta), st->eta_usec));
	return buf;
}

static void on_event(struct runner *r, const struct runner_event *ev, void *userdata)
{
	struct tune_ctx *c = userdata;
	const struct runner_trial_status *t = ev->trial;
	char line[512], deployed[48], tag[96], eta[96];
	enum runner_phase p;

	switch (ev->kind) {
	case RUNNER_EVENT_PHASE:
		p = t ? t->phase : ev->status->phase;
		if (c->quiet || ev->status->phase == RUNNER_FINISHED)
			break;
		runner_status_format(ev->status, line, sizeof(line));
		if (c->tty) {
			clear_line(c);
			fprintf(stderr, "%s", line);
			c->status_shown = true;
		} else if (t && (p == RUNNER_DEPLOYING || p == RUNNER_PROBING || p == RUNNER_QUEUED)) {
			/* side by side, each line says which trial and GPUs (a job: which, and its wait) */
			trial_tag(t, tag, sizeof(tag));
			job_note(t, p, line, sizeof(line));
			fprintf(stderr, "%s %s %s%s\n", tag, runner_phase_to_string(p), t->knobs, line);
		} else if (!t && (p == RUNNER_PAUSED || p == RUNNER_STOPPING))
			fprintf(stderr, "%s\n", line);
		break;
	case RUNNER_EVENT_LOAD_POINT:
		break;
	case RUNNER_EVENT_POINT_PROGRESS:
		if (!c->quiet && t)
			show_point(c, t, ev);
		break;
	case RUNNER_EVENT_TRIAL_FINISHED:
		if (c->quiet || !t)
			break;
		clear_line(c);
		trial_tag(t, tag, sizeof(tag));
		deployed[0] = 0;
		if (isfinite(ev->deploy_seconds))
			snprintf(deployed, sizeof(deployed), "; deployed in %.1f s", ev->deploy_seconds);
		if (ev->trial_state == STORE_TRIAL_DONE && t->sweep && isfinite(ev->max_goodput))
			/* the answer's load-step sweep: a curve, no cost */
			fprintf(stderr, "%s%s%s: sweet spot %.0f tok/s of goodput under the SLA%s\n", tag,
				t->knobs[0] ? " " : "", t->knobs, ev->max_goodput, deployed);
		else if (ev->trial_state == STORE_TRIAL_DONE && t->sweep)
			fprintf(stderr, "%s%s%s: %s\n", tag, t->knobs[0] ? " " : "", t->knobs,
				ev->failure_message ? ev->failure_message : "no rate met the SLA");
		else if (ev->trial_state == STORE_TRIAL_DONE)
			/* a note of a measured trial (measured at lower precision) follows */
			fprintf(stderr, "%s%s%s: $%.4f/Mtok (%.0f tok/s%s)%s%s%s%s\n", tag, t->knobs[0] ? " " : "",
				t->knobs, ev->cost_per_mtok, ev->max_goodput, deployed,
				ev->status->best_trial_id == ev->trial_id ? " *best*" : "",
				ev->failure_message ? "; " : "", ev->failure_message ? ev->failure_message : "",
				eta_note(ev->status, eta, sizeof(eta)));
		else
			fprintf(stderr, "%s%s%s: %s (%s)%s%s\n", tag, t->knobs[0] ? " " : "", t->knobs,
				store_trial_state_to_string(ev->trial_state), store_failure_to_string(ev->failure),
				ev->failure_message ? ": " : "", ev->failure_message ? ev->failure_message : "");
		break;
	case RUNNER_EVENT_FINISHED:
		clear_line(c);
		c->end = ev->end;
		snprintf(c->message, sizeof(c->message), "%s", ev->status->message ? ev->status->message : "");
		if (ev->status->message && ev->end == RUNNER_END_FAILED)
			log_error(
				"study failed: %s\n(what was measured is kept: once the cause is fixed, continue with "
				"goodput tune --resume %s)",
				ev->status->message, ev->status->study_name);
		(void)sd_event_exit(c->event, 0);
		break;
	}
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct tune_ctx *c = userdata;

	if (!c->runner) /* between attempts */
		return sd_event_exit(c->event, 0);
	if (++c->signals > 1) {
		/* a second signal: do not wait for the teardown (the server is killed on free) */
		clear_line(c);
		log_warning("stopping at once");
		c->end = RUNNER_END_STOPPED;
		return sd_event_exit(c->event, 0);
	}
	clear_line(c);
	if (!c->quiet)
		log_info("stopping: tearing down the server under test (again to stop at once)");
	(void)runner_stop(c->runner);
	return 0;
}

/* ---- summary ---- */

static int add_latency(cJSON *o, const char *key, double p50, double p90, double p99, double mean)
{
	cJSON *l = cJSON_AddObjectToObject(o, key);

	if (!l || json_add_number(l, "mean", mean) < 0 || json_add_number(l, "p50", p50) < 0 ||
	    json_add_number(l, "p90", p90) < 0 || json_add_number(l, "p99", p99) < 0)
		return -ENOMEM;
	return 0;
}

/* What the summary shows, read once from the store. */
struct summary {
	struct store_study st;
	size_t n_trials;
	unsigned counts[_STORE_TRIAL_STATE_MAX];
	bool have_best;
	struct store_study_best best; /* the study's answer: the one cost everything shows */
	char knobs[256], runner_up_knobs[256];
	char defaults[512]; /* the engine's defaults of the knobs the best leaves unset, as flags */
	struct store_load_point *lp;
	size_t n_lp;
	const struct store_load_point *at; /* the best's load point at its max rate */
	char *command;
	struct report_findings findings; /* the baseline, the edge, the pre-flight */
	struct report_levers levers;     /* speculation, the prefix cache, the replicas */
	bool have_levers;
	struct report_shape_compare shape; /* both shapes searched: which won */
};

static void summary_done(struct summary *s)
{
	store_study_done(&s->st);
	store_study_best_done(&s->best);
	store_load_point_array_free(s->lp, s->n_lp);
	free(s->command);
	report_findings_done(&s->findings);
}

static void describe(const struct runner *r, const char *key, const char *knobs_json, char *buf, size_t size)
{
	if (!key || runner_describe_config(r, key, buf, size) < 0)
		snprintf(buf, size, "%s", knobs_json ? knobs_json : "?");
}

static int summary_load(const struct tune_ctx *c, struct store *store, int64_t study_id, struct summary *s)
{
	struct store_trial *trials = NULL;
	struct error err = { 0 };
	int k;

	k = store_study_get(store, study_id, &s->st, &err);
	if (k >= 0)
		k = store_trial_history(store, study_id, &trials, &s->n_trials, &err);
	if (k < 0)
		return log_error_errno(k, "%s", error_str(&err, k));
	for (size_t i = 0; i < s->n_trials; i++)
		s->counts[trials[i].state]++;
	store_trial_array_free(trials, s->n_trials);
	k = store_study_best(store, study_id, &s->best, &err);
	if (k == -ENOENT)
		return 0;
	if (k < 0)
		return log_error_errno(k, "%s", error_str(&err, k));
	s->have_best = true;
	describe(c->runner, s->best.trial.canonical_key, s->best.trial.knobs_json, s->knobs, sizeof(s->knobs));
	if (s->best.have_runner_up)
		describe(c->runner, s->best.runner_up_key, s->best.runner_up_knobs_json, s->runner_up_knobs,
			 sizeof(s->runner_up_knobs));
	if (store_load_point_list(store, s->best.trial.id, &s->lp, &s->n_lp, &err) >= 0)
		s->at = store_load_point_at_max(s->lp, s->n_lp, s->best.trial.max_rate);
	if (report_findings_of(&s->st, runner_get_study(c->runner), &s->best, s->at, &s->findings) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	s->have_levers = report_levers_load(store, study_id, runner_get_study(c->runner), &s->levers, &err) >= 0;
	if (report_shape_compare(store, study_id, &s->best, &s->shape, &err) < 0)
		log_warning("cannot compare the shapes: %s", error_str(&err, -EINVAL));
	(void)runner_format_defaults(c->runner, s->best.trial.knobs_json, s->defaults, sizeof(s->defaults));
	if (runner_format_command(c->runner, s->best.trial.knobs_json, "127.0.0.1", 8000, &s->command, &err) < 0)
		log_warning("cannot render the command line: %s", error_str(&err, -EINVAL));
	return 0;
}

/* The best configuration as JSON into o. */
static int best_json(const struct summary *s, cJSON *o)
{
	const struct store_study_best *b = &s->best;
	const struct store_trial *t = &b->trial;
	cJSON *knobs = cJSON_Parse(t->knobs_json), *conf;

	if (!knobs || !cJSON_AddItemToObject(o, "knobs", knobs)) {
		cJSON_Delete(knobs);
		return -ENOMEM;
	}
	if (json_add_number(o, "trial_id", (double)t->id) < 0 ||
	    json_add_number(o, "cost_per_mtok", b->cost_per_mtok) < 0 || json_add_number(o, "measurements", b->n) < 0 ||
	    json_add_number(o, "spread", b->spread) < 0 ||
	    json_add_number(o, "trial_cost_per_mtok", t->cost_per_mtok) < 0 ||
	    json_add_number(o, "max_goodput", t->max_goodput) < 0 || json_add_number(o, "max_rate", t->max_rate) < 0 ||
	    json_add_number(o, "offered_rate", store_load_point_offered_rate(s->at)) < 0 ||
	    json_add_number(o, "concurrency", t->concurrency) < 0 ||
	    (s->command && json_add_string(o, "command", s->command) < 0) ||
	    (s->defaults[0] && json_add_string(o, "engine_defaults", s->defaults) < 0) ||
	    (b->engine_version && json_add_string(o, "engine_version", b->engine_version) < 0) ||
	    (isfinite(b->time_to_answer_s) && json_add_number(o, "time_to_answer_seconds", b->time_to_answer_s) < 0))
		return -ENOMEM;
	conf = cJSON_AddObjectToObject(o, "confirm");
	if (!conf || json_add_number(conf, "measurements", b->n) < 0 || json_add_number(conf, "spread", b->spread) < 0)
		return -ENOMEM;
	if (b->have_runner_up && (json_add_string(conf, "runner_up", s->runner_up_knobs) < 0 ||
				  json_add_number(conf, "runner_up_cost_per_mtok", b->runner_up_cost_per_mtok) < 0 ||
				  json_add_number(conf, "runner_up_measurements", b->runner_up_n) < 0 ||
				  json_add_number(conf, "runner_up_spread", b->runner_up_spread) < 0))
		return -ENOMEM;
	if (report_findings_json(&s->findings, o) < 0 || (s->have_levers && report_levers_json(&s->levers, o) < 0) ||
	    report_shape_json(&s->shape, o) < 0)
		return -ENOMEM;
	if (s->at && (add_latency(o, "ttft_ms", s->at->p50_ttft_ms, s->at->p90_ttft_ms, s->at->p99_ttft_ms,
				  s->at->mean_ttft_ms) < 0 ||
		      add_latency(o, "tpot_ms", s->at->p50_tpot_ms, s->at->p90_tpot_ms, s->at->p99_tpot_ms,
				  s->at->mean_tpot_ms) < 0 ||
		      json_add_number(o, "attainment", s->at->attainment) < 0))
		return -ENOMEM;
	return 0;
}

static int summary_json(const struct tune_ctx *c, const struct summary *s, const char *db_path)
{
	_cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
	_cleanup_(cjson_freep) char *text = NULL;
	const struct store_study *st = &s->st;
	cJSON *b;

	if (!root || json_add_string(root, "study", st->name) < 0 ||
	    json_add_string(root, "state", store_study_state_to_string(st->state)) < 0 ||
	    json_add_string(root, "end", runner_end_to_string(c->end)) < 0 ||
	    (st->message && json_add_string(root, "message", st->message) < 0) ||
	    json_add_string(root, "db", db_path) < 0 || json_add_number(root, "trials", (double)s->n_trials) < 0 ||
	    json_add_number(root, "done", s->counts[STORE_TRIAL_DONE]) < 0 ||
	    json_add_number(root, "infeasible", s->counts[STORE_TRIAL_INFEASIBLE]) < 0 ||
	    json_add_number(root, "failed", s->counts[STORE_TRIAL_FAILED]) < 0)
		return log_error_errno(-ENOMEM, "out of memory building the summary");
	if (s->have_best) {
		b = cJSON_AddObjectToObject(root, "best");
		if (!b || best_json(s, b) < 0)
			return log_error_errno(-ENOMEM, "out of memory building the summary");
	}
	text = cJSON_Print(root);
	if (!text)
		return log_error_errno(-ENOMEM, "out of memory building the summary");
	printf("%s\n", text);
	return 0;
}

/* "1 h 02 min 05 s", "4 min 10 s", "35.2 s" */
static const char *duration_text(double sec)
{
	static char buf[48];
	unsigned long t = (unsigned long)(sec + 0.5);

	if (sec < 60)
		snprintf(buf, sizeof(buf), "%.1f s", sec);
	else if (t < 3600)
		snprintf(buf, sizeof(buf), "%lu min %02lu s", t / 60, t % 60);
	else
		snprintf(buf, sizeof(buf), "%lu h %02lu min %02lu s", t / 3600, t / 60 % 60, t % 60);
	return buf;
}

static void summary_text(const struct summary *s, const char *db_path)
{
	const struct store_study *st = &s->st;
	const struct store_study_best *b = &s->best;

	printf("Study %s: %s%s%s%s\n", st->name, store_study_state_to_string(st->state), st->message ? " (" : "",
	       st->message ? st->message : "", st->message ? ")" : "");
	printf("Trials: %zu (%u measured, %u infeasible, %u failed)\n", s->n_trials, s->counts[STORE_TRIAL_DONE],
	       s->counts[STORE_TRIAL_INFEASIBLE], s->counts[STORE_TRIAL_FAILED]);
	if (!s->have_best)
		printf(st->state == STORE_STUDY_NO_FEASIBLE ? "No configuration met the SLA (the closest attempt is "
							      "above).\n"
							    : "No configuration measured yet.\n");
	else {
		printf("\nBest configuration: %s\n", s->knobs);
		printf("  knobs:           %s\n", b->trial.knobs_json);
		if (s->defaults[0])
			printf("  engine defaults: %s\n", s->defaults);
		if (b->engine_version)
			printf("  engine version:  %s\n", b->engine_version);
		printf("  cost:            $%.4f per million tokens", b->cost_per_mtok);
		if (b->n > 1)
			printf(" (mean of %u measurements, spread %.1f%%)", b->n, b->spread * 100);
		printf("\n  max goodput:     %.1f tokens/s at %.2f requests/s", b->trial.max_goodput,
		       b->trial.max_rate);
		if (isfinite(store_load_point_offered_rate(s->at)))
			printf(" (%.2f sent)", store_load_point_offered_rate(s->at));
		printf(" (concurrency %.1f)\n", b->trial.concurrency);
		if (s->at) {
			printf("  TTFT at that load: mean %.1f ms, p50 %.1f, p90 %.1f, p99 %.1f ms\n",
			       s->at->mean_ttft_ms, s->at->p50_ttft_ms, s->at->p90_ttft_ms, s->at->p99_ttft_ms);
			printf("  TPOT at that load: mean %.1f ms, p50 %.1f, p90 %.1f, p99 %.1f ms\n",
			       s->at->mean_tpot_ms, s->at->p50_tpot_ms, s->at->p90_tpot_ms, s->at->p99_tpot_ms);
			printf("  SLA attainment:  %.1f%%\n", s->at->attainment * 100);
		}
		if (b->have_runner_up)
			printf("  runner-up:       %s at $%.4f/Mtok (%u measurement%s, spread %.1f%%)\n",
			       s->runner_up_knobs, b->runner_up_cost_per_mtok, b->runner_up_n,
			       b->runner_up_n == 1 ? "" : "s", b->runner_up_spread * 100);
		if (isfinite(b->time_to_answer_s))
			printf("  time to answer:  %s after the first trial started%s\n",
			       duration_text(b->time_to_answer_s),
			       strstr(st->name, ".dry-run") ? " (virtual time)" : "");
		if (s->shape.present) {
			char text[1024];

			report_shape_text(&s->shape, text, sizeof(text));
			printf("  shape:           %s\n", text);
		}
		if (s->findings.have_baseline)
			printf("  vs defaults:     %s\n", s->findings.baseline);
		if (s->findings.have_edge)
			printf("  edge:            %s\n", s->findings.edge_text);
		if (s->findings.n_predicted_infeasible > 0) {
			printf("  not deployed:    ");
			report_findings_print_predicted(&s->findings, stdout);
			printf(": predicted not to fit at any batch size (the report has the estimates)\n");
		}
		if (s->findings.max_model_len[0])
			printf("  context:         %s\n", s->findings.max_model_len);
		if (s->have_levers)
			report_levers_print(&s->levers, "  ", stdout);
		if (s->command) {
			/* one line per server: a disaggregated configuration's roles each have one */
			printf("\nRun it:\n  ");
			for (const char *c = s->command; *c; c++)
				fputs(*c == '\n' ? "\n  " : (char[]){ *c, 0 }, stdout);
			printf("\n");
		}
	}
	if (st->state == STORE_STUDY_RUNNING)
		printf("\nStopped; continue with: goodput tune --resume %s --db %s%s\n", st->name, db_path,
		       strstr(st->name, ".dry-run") ? " --dry-run" : "");
}

static int summary(struct tune_ctx *c, struct store *store, int64_t study_id, const char *db_path)
{
	struct summary s = { 0 };
	int k;

	k = summary_load(c, store, study_id, &s);
	if (k >= 0)
		c->no_feasible = s.st.state == STORE_STUDY_NO_FEASIBLE;
	if (k >= 0 && c->json)
		k = summary_json(c, &s, db_path);
	else if (k >= 0)
		summary_text(&s, db_path);
	summary_done(&s);
	return k < 0 ? k : 0;
}

/* ---- the study ---- */

static int load_spec(const char *path, const char *engines_dir, struct study **ret, struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *j = NULL;
	_cleanup_(engine_profile_freep) struct engine_profile *p = NULL;
	struct study_options so = { 0 };
	const char *engine;
	int k;

	k = json_parse_file(path, STUDY_SPEC_MAX_BYTES, &j, err);
	if (k < 0)
		return k;
	k = json_require_string(j, "", "engine", 256, &engine, err);
	if (k < 0)
		return error_prefix(err, k, "%s", path);
	k = engine_profile_find(engine, engines_dir, &p, err);
	if (k < 0)
		return k;
	so.extra_knobs = p->extra_knobs;
	k = study_from_json(j, &so, ret, err);
	if (k < 0)
		return error_prefix(err, k, "%s", path);
	return 0;
}

/* One writer per database: a second tune or a goodputd on the same file
 * (through whatever path) would run the same trials twice. The store locks
 * the file itself while it is open. */
static int open_db(const char *db, struct store **ret, struct error *err)
{
	struct store_open_options so = { .flags = STORE_OPEN_WRITER };
	struct lock_holder h = { 0 };
	int k;

	so.holder = &h;
	k = store_open(db, &so, ret, err);
	if (k == -EBUSY && h.pid > 0)
		return error_set(err, k, "%s: %s (pid %d) is writing to it; wait for it or use another --db", db,
				 strcmp(h.comm, "goodput") == 0 ? "another goodput tune"
				 : h.comm[0]                    ? h.comm
								: "a process",
				 (int)h.pid);
	return k;
}

static bool looks_like_file(const char *s)
{
	struct stat sb;

	return strchr(s, '/') || (strlen(s) > 5 && strcmp(s + strlen(s) - 5, ".json") == 0) ||
	       (stat(s, &sb) == 0 && S_ISREG(sb.st_mode));
}

static struct {
	const char *db, *resume_name;
	bool resume, help_spec, json_schema, json, quiet, no_report;
	/* the runner's options that flags set */
	const char *engines_dir, *log_dir;
	bool dry_run;
	uint32_t max_trials;
	int confirm_probes; /* < 0: the runner's default */
	uint64_t max_wall_time_usec;
	uint32_t parallel; /* 0: the study's */
	int startup_model; /* < 0: the runner's default */
} arg = { .db = "goodput.db", .confirm_probes = -1, .startup_model = -1 };

enum {
	OPTION_RESUME,
	OPTION_CONFIRM,
	OPTION_PARALLEL,
	OPTION_STARTUP_MODEL,
	OPTION_NO_STARTUP_MODEL,
};

static int parse_option(intptr_t id, const char *value, struct error *err)
{
	uint32_t n;
	int r;

	switch (id) {
	case OPTION_RESUME:
		/* the name may also come as the positional argument */
		arg.resume = true;
		arg.resume_name = value;
		return 0;
	case OPTION_CONFIRM:
		r = parse_u32("--confirm", value, 0, 20, &n, err);
		if (r >= 0)
			arg.confirm_probes = (int)n;
		return r;
	case OPTION_PARALLEL:
		if (strcmp(value, "auto") == 0) {
			arg.parallel = STUDY_GPUS_MAX; /* as many as the GPUs allow */
			return 0;
		}
		return parse_u32("--parallel", value, 1, STUDY_GPUS_MAX, &arg.parallel, err);
	case OPTION_STARTUP_MODEL:
	case OPTION_NO_STARTUP_MODEL:
		arg.startup_model = id == OPTION_STARTUP_MODEL;
		return 0;
	}
	return -EINVAL;
}

static const struct verb_option options[] = {
	{ "db", 0, "FILE", "the store (default ./goodput.db)", VERB_STRING, &arg.db },
	{ "resume", 0, "[NAME]",
	  "continue the study of that name (or of STUDY.json) in the store;\n"
	  "interrupted trials are redone, orphaned servers killed",
	  VERB_CALL, (void *)OPTION_RESUME },
	{ "dry-run", 0, NULL,
	  "evaluate candidates in virtual time with the sim's engine model\n"
	  "instead of deploying (seconds); stored as study NAME.dry-run",
	  VERB_FLAG, &arg.dry_run },
	{ "engines-dir", 0, "DIR", "engine profiles (default: /etc/goodput/engines, the data dir)", VERB_STRING,
	  &arg.engines_dir },
	{ "log-dir", 0, "DIR", "per-trial server logs (default: goodput-logs next to the db)", VERB_STRING,
	  &arg.log_dir },
	{ "max-trials", 0, "N", "override the study's budget of deployments (every server started)", VERB_U32,
	  &arg.max_trials, 1, 100000 },
	{ "max-wall-time", 0, "SEC", "override the study's wall-time budget", VERB_SECONDS, &arg.max_wall_time_usec, 1,
	  365 * 86400.0 },
	{ "confirm", 0, "N", "re-probes of the best and runner-up (default 1; 0: none)", VERB_CALL,
	  (void *)OPTION_CONFIRM },
	{ "parallel", 0, "N|auto",
	  "trials side by side on disjoint GPU sets (default: the study's\n"
	  "budget.parallel); each gets its own GPUs, port, log and probe",
	  VERB_CALL, (void *)OPTION_PARALLEL },
	{ "startup-model", 0, NULL,
	  "with --dry-run: charge each trial its server's modelled start-up\n"
	  "(weights read at 2 GB/s, 20 s init + 5 s per TP rank above 1,\n"
	  "15 s graph capture); the default unless the engine is goodput-sim",
	  VERB_CALL, (void *)OPTION_STARTUP_MODEL },
	{ "no-startup-model", 0, NULL, "with --dry-run: charge no start-up time", VERB_CALL,
	  (void *)OPTION_NO_STARTUP_MODEL },
	{ "json", 0, NULL, "print the summary as JSON on stdout", VERB_FLAG, &arg.json },
	{ "quiet", 'q', NULL, "no progress on stderr", VERB_FLAG, &arg.quiet },
	{ "no-report", 0, NULL, "write no report-NAME/report.html beside the store at the end", VERB_FLAG,
	  &arg.no_report },
	{ "help-spec", 0, NULL, "the reference of every study spec key", VERB_FLAG, &arg.help_spec },
	{ "json-schema", 0, NULL,
	  "with --help-spec: the same as a JSON Schema (draft 2020-12)\nfor editors and validators", VERB_FLAG,
	  &arg.json_schema },
	VERB_OPTION_END,
};

/* --help-spec: the study spec's reference, as text or as a JSON Schema. */
static int print_spec_reference(bool json_schema)
{
	_cleanup_(cJSON_Deletep) cJSON *schema = NULL;
	_cleanup_(cjson_freep) char *text = NULL;
	int r;

	if (!json_schema) {
		study_schema_print(stdout);
		return CLI_EXIT_OK;
	}
	r = study_schema_json(&schema);
	if (r < 0)
		return log_error_errno(r, "the study spec's JSON Schema: %s", strerror(-r)), CLI_EXIT_FAILED;
	text = cJSON_Print(schema);
	if (!text)
		return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
	puts(text);
	return CLI_EXIT_OK;
}

/* The study's name in the store: --resume's, or the spec's (read into
 * *ret_study); a dry run's has ".dry-run" added. The caller frees *ret_name. */
static int study_name(const char *spec_path, struct study **ret_study, char **ret_name)
{
	_cleanup_(study_freep) struct study *study = NULL;
	struct error err = { 0 };
	const char *name = arg.resume_name;
	char *n;
	int k;

	/* `--resume NAME` (a separate word) arrives as the positional argument */
	if (arg.resume && !name && spec_path && !looks_like_file(spec_path)) {
		name = spec_path;
		spec_path = NULL;
	}
	if (!spec_path && !name) {
		log_error("a study spec (STUDY.json) or --resume NAME is needed (see 'goodput tune --help')");
		return CLI_EXIT_USAGE;
	}
	if (spec_path) {
		k = load_spec(spec_path, arg.engines_dir, &study, &err);
		if (k < 0) {
			log_error("%s", error_str(&err, k));
			return k == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
		}
	}
	if (asprintf(&n, "%s%s", name ? name : study->name,
		     arg.dry_run && !strstr(name ? name : study->name, ".dry-run") ? ".dry-run" : "") < 0)
		return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
	*ret_name = n;
	*ret_study = TAKE_PTR(study);
	return CLI_EXIT_OK;
}

/* The study's id in the store: the one of that name with --resume, else
 * the spec inserted as a new study. */
static int find_study(struct store *store, const char *name, const struct study *study, int64_t *ret_id)
{
	struct store_study row = { 0 };
	struct error err = { 0 };
	int k;

	k = store_study_get_by_name(store, name, &row, &err);
	if (k >= 0) {
		*ret_id = row.id;
		if (!arg.resume)
			log_error("study %s exists in %s (state %s): continue it with --resume, or use another --db",
				  name, arg.db, store_study_state_to_string(row.state));
		store_study_done(&row);
		return arg.resume ? CLI_EXIT_OK : CLI_EXIT_FAILED;
	}
	if (k != -ENOENT) {
		log_error("%s", error_str(&err, k));
		return CLI_EXIT_FAILED;
	}
	if (!study) {
		log_error("no study named %s in %s", name, arg.db);
		return CLI_EXIT_FAILED;
	}
	k = runner_study_insert(store, study, name, ret_id, &err);
	if (k < 0) {
		log_error("%s", error_str(&err, k));
		return CLI_EXIT_FAILED;
	}
	return CLI_EXIT_OK;
}

/* The study's report beside its store (report-NAME/report.html), its path
 * said at the end: a finished study's first question is "show me". */
static void write_report(struct store *store, int64_t study_id, const char *db_path, const char *engines_dir)
{
	struct report_options ro = { .engines_dir = engines_dir };
	struct store_study st = { 0 };
	struct error err = { 0 };
	_cleanup_(freep) char *dir = NULL, *path = NULL;
	const char *slash = strrchr(db_path, '/');
	int k;

	k = store_study_get(store, study_id, &st, &err);
	if (k >= 0 && asprintf(&dir, "%.*sreport-%s", slash ? (int)(slash - db_path + 1) : 0, db_path,
			       st.name[0] == '.' ? "study" : st.name) < 0) {
		dir = NULL;
		k = -ENOMEM;
	}
	if (k >= 0)
		k = report_write_html(store, st.name, dir, &ro, &path, &err);
	if (k < 0)
		log_warning("the report was not written: %s", error_str(&err, k));
	else if (arg.json)
		log_info("report: %s", path);
	else
		printf("\nReport: %s\n", path);
	store_study_done(&st);
}

/* Every 2 s while the study runs: the database and its WAL are still the
 * files opened. A WAL removed is written back (and said); a database file
 * removed or replaced ends the study: nothing more can be recorded. */
#define STORE_WATCH_USEC (2 * USEC_PER_SEC)

static int on_store_watch(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct tune_ctx *c = userdata;
	struct error err = { 0 };
	char msg[1024];
	int r;

	(void)sd_event_source_set_time_relative(s, STORE_WATCH_USEC);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	r = store_check_files(c->store, msg, sizeof(msg), &err);
	if (r == STORE_FILES_OK || r < 0)
		return 0;
	clear_line(c);
	log_error("%s", msg);
	if (r == STORE_FILES_LOST) {
		c->store_lost = true;
		c->end = RUNNER_END_FAILED;
		return sd_event_exit(c->event, 0); /* the runner's free ends its servers */
	}
	return 0;
}

/* One run of the runner on a loop of its own, until it ends or a signal
 * stops it. */
static int run_once(struct tune_ctx *c, int64_t study_id, const struct runner_options *ro)
{
	_cleanup_(sd_event_source_unrefp) sd_event_source *watch = NULL;
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	struct error err = { 0 };
	int k;

	if (cli_event_new(on_signal, c, &e) < 0)
		return -EIO;
	c->event = e;
	k = sd_event_add_time_relative(e, &watch, CLOCK_MONOTONIC, STORE_WATCH_USEC, USEC_PER_SEC / 10, on_store_watch,
				       c);
	if (k < 0)
		return log_error_errno(k, "cannot watch the database");
	k = runner_new(e, c->store, study_id, ro, &c->runner, &err);
	if (k < 0) {
		log_error("%s", error_str(&err, k));
		return k;
	}
	k = runner_start(c->runner, on_event, c);
	if (k >= 0)
		k = sd_event_loop(e);
	clear_line(c);
	if (k < 0)
		log_error_errno(k, "the study could not run");
	/* the summary describes configurations through the runner: before it goes */
	else if (c->end != RUNNER_END_FAILED && (c->end != RUNNER_END_DISK_FULL || c->signals)) {
		if (summary(c, c->store, study_id, arg.db) < 0)
			k = -EIO;
		else if (!arg.no_report)
			write_report(c->store, study_id, arg.db, arg.engines_dir);
	}
	c->runner = runner_free(c->runner);
	watch = sd_event_source_disable_unref(watch);
	c->event = NULL;
	return k;
}

/* Waits usec, or until SIGINT/SIGTERM (true: a signal came). */
static bool wait_or_signal(uint64_t usec)
{
	struct timespec ts = { .tv_sec = (time_t)(usec / USEC_PER_SEC), .tv_nsec = (long)(usec % USEC_PER_SEC) * 1000 };
	sigset_t mask;
	int sig;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	do
		sig = sigtimedwait(&mask, NULL, &ts);
	while (sig < 0 && errno == EINTR);
	return sig > 0;
}

/* Runs the study until it ends or a signal stops it. A full disk passes:
 * the study waits, 2 s after the first time, twice as long each time up
 * to 5 min, and goes on (its trials in flight redone) once it can. */
static int run_study(struct store *store, int64_t study_id, const struct runner_options *ro)
{
	struct tune_ctx c = { .end = RUNNER_END_NONE, .json = arg.json, .quiet = arg.quiet, .store = store };
	uint64_t delay = 2 * USEC_PER_SEC;
	int k;

	c.tty = isatty(STDERR_FILENO) && !c.quiet;
	if (c.tty)
		log_set_before_line(clear_line_before_log, &c);
	for (;;) {
		k = run_once(&c, study_id, ro);
		if (k < 0)
			break;
		if (c.end != RUNNER_END_DISK_FULL || c.signals || c.store_lost)
			break;
		if (!c.quiet)
			log_warning("waiting: %s; trying again in %.0f s", c.message, usec_to_sec(delay));
		if (wait_or_signal(delay)) {
			log_info("stopped while waiting for disk space: continue with goodput tune --resume");
			c.end = RUNNER_END_STOPPED;
			break;
		}
		delay = MIN(2 * delay, 300 * USEC_PER_SEC);
		c.end = RUNNER_END_NONE;
	}
	log_set_before_line(NULL, NULL); /* c goes out of scope */
	if (k < 0)
		return CLI_EXIT_FAILED;
	if (c.end == RUNNER_END_DONE && c.no_feasible)
		return CLI_EXIT_SLA_NOT_MET;
	return c.end == RUNNER_END_DONE      ? CLI_EXIT_OK
	       : c.end == RUNNER_END_STOPPED ? CLI_EXIT_INTERRUPTED
					     : CLI_EXIT_FAILED;
}

static int run(const struct verb *v, int argc, char **argv)
{
	_cleanup_(store_closep) struct store *store = NULL;
	_cleanup_(study_freep) struct study *study = NULL;
	_cleanup_(freep) char *name = NULL, *log_dir = NULL;
	struct runner_options ro;
	struct error err = { 0 };
	int64_t study_id = 0;
	int k;

	if (arg.help_spec)
		return print_spec_reference(arg.json_schema);
	if (arg.json_schema) {
		log_error("--json-schema goes with --help-spec (see 'goodput tune --help')");
		return CLI_EXIT_USAGE;
	}
	k = study_name(argc > 0 ? argv[0] : NULL, &study, &name);
	if (k != CLI_EXIT_OK)
		return k;
	runner_options_init(&ro);
	ro.engines_dir = arg.engines_dir;
	ro.log_dir = arg.log_dir;
	ro.dry_run = arg.dry_run;
	ro.max_trials = arg.max_trials;
	ro.max_wall_time_usec = arg.max_wall_time_usec;
	ro.confirm_probes = arg.confirm_probes;
	ro.parallel = arg.parallel;
	if (arg.startup_model >= 0)
		ro.startup_model = arg.startup_model;
	if (!ro.log_dir) {
		const char *slash = strrchr(arg.db, '/');

		if (asprintf(&log_dir, "%.*sgoodput-logs", slash ? (int)(slash - arg.db + 1) : 0, arg.db) < 0)
			return log_error_errno(-ENOMEM, "out of memory"), CLI_EXIT_FAILED;
		ro.log_dir = log_dir;
	}
	k = open_db(arg.db, &store, &err);
	if (k < 0) {
		log_error("%s", error_str(&err, k));
		return CLI_EXIT_FAILED;
	}
	k = find_study(store, name, study, &study_id);
	if (k != CLI_EXIT_OK)
		return k;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	k = run_study(store, study_id, &ro);
	curl_global_cleanup();
	return k;
}

/* The command: what its help says, then how it runs; a few lines. */
/* clang-format off */
const struct verb verb_tune = {
	.summary = "run a tuning study in the foreground: the configuration with the lowest $/Mtok",
	.about = "Runs a tuning study in the foreground: deploys the engine with candidate\n"
		 "configurations, probes the largest load meeting the SLA, stores every trial\n"
		 "and load point, and prints the configuration with the lowest $/Mtok.",
	.name = "tune", .args = { "STUDY.json", 0, 1 },
	.usage = "[OPTIONS] STUDY.json\n--resume NAME|STUDY.json [OPTIONS]",
	.options = options, .parse = parse_option, .run = run,
	.notes = "A study stopped by a signal (130) is resumable with --resume. The summary ends with\n"
		 "the time to the answer: from the first trial's start to the end of the answer's last\n"
		 "measurement (in virtual time with --dry-run). Study spec keys: goodput-study(5).\n",
};
/* clang-format on */
