/* runner.c — the study runner: one tuning study as a state machine on an
 * sd-event loop (runner.h has the picture): its life cycle (create, start,
 * pause, resume, stop, cancel, finish), its status, its history, and the
 * step source the trial loop (runner-trial.c) runs from.
 *
 * Everything happens in callbacks: a one-shot defer source runs the next
 * step (ask the planner, finish the study), the evaluator reports from its
 * deployer, probe, quality check or dry-run step, the twin planner from its
 * child. No call here waits for anything, so goodputd answers its socket
 * while a study runs.
 *
 * The planners are pure replays: the history is rebuilt from the store's
 * trials when the runner is created and extended in memory as trials
 * finish, in the same order and with the same (bit-exact) costs, so a
 * restarted runner replays the search exactly. Every state change of a
 * trial is committed before the runner acts on it; a trial caught mid-way
 * by a crash is redone (the planner asks for the same configuration again;
 * store_trial_insert hands back the existing row).
 *
 * Trial kinds (one row per study, configuration and kind): "search",
 * "search-retry-N" (a failed configuration deployed again), "confirm-N" (the
 * planner's re-probes), each prefixed "dry-run-" in a dry run. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include <nlopt.h>

#include "deploy.h"
#include "engine-profile.h"
#include "json-util.h"
#include "log.h"
#include "opt.h"
#include "runner-internal.h"
#include "store.h"
#include "time-util.h"

const char *runner_phase_to_string(enum runner_phase p)
{
	static const char *const names[_RUNNER_PHASE_MAX] = {
		[RUNNER_IDLE] = "idle",           [RUNNER_PLANNING] = "planning",
		[RUNNER_DEPLOYING] = "deploying", [RUNNER_QUALITY_CHECK] = "quality-check",
		[RUNNER_PROBING] = "probing",     [RUNNER_TEARDOWN] = "teardown",
		[RUNNER_PAUSING] = "pausing",     [RUNNER_PAUSED] = "paused",
		[RUNNER_STOPPING] = "stopping",   [RUNNER_FINISHED] = "finished",
		[RUNNER_WAITING] = "waiting",     [RUNNER_QUEUED] = "queued",
	};
	return (unsigned)p < _RUNNER_PHASE_MAX ? names[p] : "unknown";
}

const char *runner_end_to_string(enum runner_end e)
{
	switch (e) {
	case RUNNER_END_NONE:
		return "none";
	case RUNNER_END_DONE:
		return "done";
	case RUNNER_END_STOPPED:
		return "stopped";
	case RUNNER_END_CANCELLED:
		return "cancelled";
	case RUNNER_END_FAILED:
		return "failed";
	case RUNNER_END_DISK_FULL:
		return "disk_full";
	}
	return "unknown";
}

void runner_options_init(struct runner_options *o)
{
	*o = (struct runner_options){ .confirm_probes = -1, .startup_model = -1 };
}

/* ---- status ---- */

/* "2 probing, 1 deploying, 1 waiting" */
static void count_phases(const struct runner_status *st, char *buf, size_t size)
{
	static const enum runner_phase order[] = { RUNNER_PROBING, RUNNER_QUALITY_CHECK, RUNNER_DEPLOYING,
						   RUNNER_QUEUED,  RUNNER_TEARDOWN,      RUNNER_WAITING };
	size_t len = 0;

	buf[0] = 0;
	for (size_t i = 0; i < ELEMENTSOF(order) && len < size; i++) {
		int n;

		if (!st->by_phase[order[i]])
			continue;
		n = snprintf(buf + len, size - len, "%s%u %s", len ? ", " : "", st->by_phase[order[i]],
			     runner_phase_to_string(order[i]));
		if (n < 0)
			break;
		len += (size_t)n;
	}
}

int runner_status_format(const struct runner_status *st, char *buf, size_t size)
{
	char best[200] = "";
	int n;

	if (st->have_best)
		snprintf(best, sizeof(best), "; best $%.3f/Mtok", st->best_cost_per_mtok);
	if (st->phase != RUNNER_FINISHED && st->trial > 0 && st->eta_usec != USEC_INFINITY) {
		size_t len = strlen(best);
		char eta[32];

		snprintf(best + len, sizeof(best) - len, "; ETA %s", format_duration(eta, sizeof(eta), st->eta_usec));
	}
	if (st->twin[0]) {
		size_t len = strlen(best);

		snprintf(best + len, sizeof(best) - len, "; %s", st->twin);
	}
	if (st->phase == RUNNER_FINISHED)
		n = snprintf(buf, size, "%s: %s%s", st->study_name, runner_end_to_string(st->end), best);
	else if (st->phase == RUNNER_PAUSED || st->phase == RUNNER_IDLE || st->trial == 0)
		n = snprintf(buf, size, "%s: %s%s", st->study_name, runner_phase_to_string(st->phase), best);
	else if (st->in_flight > 1) {
		char phases[160], of[24] = "";

		count_phases(st, phases, sizeof(phases));
		if (st->max_trials > 0)
			snprintf(of, sizeof(of), "/%u", st->max_trials);
		n = snprintf(buf, size, "trials %u-%u%s %s on %u/%u GPUs%s", st->first_seq, st->last_seq, of, phases,
			     st->gpus_busy, st->gpus_total, best);
	} else if (st->max_trials > 0 && !st->confirming)
		n = snprintf(buf, size, "trial %u/%u %s%s%s%s", st->trial, st->max_trials,
			     runner_phase_to_string(st->phase), st->knobs[0] ? " " : "", st->knobs, best);
	else
		n = snprintf(buf, size, "%s %u %s%s%s%s", st->confirming ? "confirm" : "trial", st->trial,
			     runner_phase_to_string(st->phase), st->knobs[0] ? " " : "", st->knobs, best);
	return n < 0 ? -EINVAL : 0;
}

uint64_t runner_clock(const struct runner *r)
{
	return r->opts.dry_run ? r->vclock_usec : mono_usec();
}

const struct study *runner_get_study(const struct runner *r)
{
	return r->study;
}

void runner_get_status(const struct runner *r, struct runner_status *ret)
{
	uint64_t now = real_usec();

	*ret = r->status;
	ret->message = r->message[0] ? r->message : NULL;
	if (r->opts.dry_run)
		ret->clock_usec = r->vclock_usec;
	else
		ret->clock_usec = r->study_start_usec && now > r->study_start_usec ? now - r->study_start_usec : 0;
	ret->eta_usec =
		study_budget_eta_usec(ret->clock_usec, ret->trial > ret->in_flight ? ret->trial - ret->in_flight : 0,
				      ret->max_trials, r->wall_budget_usec ? r->wall_budget_usec : USEC_INFINITY);
}

void runner_emit(struct runner *r, const struct runner_event *ev)
{
	struct runner_event e = *ev;
	struct runner_status st;

	if (!r->cb)
		return;
	runner_get_status(r, &st);
	e.status = &st;
	r->cb(r, &e, r->userdata);
}

void runner_set_phase(struct runner *r, enum runner_phase p)
{
	if (r->status.phase == p)
		return;
	r->status.phase = p;
	runner_emit(r, &(struct runner_event){ .kind = RUNNER_EVENT_PHASE });
}

int runner_describe_config(const struct runner *r, const char *canonical_key, char *buf, size_t size)
{
	struct opt_config c;
	int k;

	k = opt_config_from_key(r->study->space, canonical_key, &c, NULL);
	if (k < 0)
		return k;
	study_knobs_text(r->study->space, &c, false, buf, size);
	return 0;
}

int runner_update_best(struct runner *r, struct error *err)
{
	struct store_study_best b = { 0 };
	int k;

	k = store_study_best(r->store, r->study_id, &b, err);
	if (k == -ENOENT) {
		r->status.have_best = false;
		return 0;
	}
	if (k < 0)
		return k;
	r->status.have_best = true;
	r->status.best_cost_per_mtok = b.cost_per_mtok;
	r->status.best_n = b.n;
	r->status.best_spread = b.spread;
	r->status.best_max_goodput = b.trial.max_goodput;
	r->status.best_trial_id = b.trial.id;
	if (!b.trial.canonical_key ||
	    runner_describe_config(r, b.trial.canonical_key, r->status.best_knobs, sizeof(r->status.best_knobs)) < 0 ||
	    !r->status.best_knobs[0]) {
		/* off the space's grid (the engine's defaults as the baseline),
		 * or a space with no choice (nothing to tell apart): its knobs
		 * as stored, in the same words */
		_cleanup_(cJSON_Deletep) cJSON *kj = b.trial.knobs_json ? cJSON_Parse(b.trial.knobs_json) : NULL;

		study_knobs_json_text(kj, r->status.best_knobs, sizeof(r->status.best_knobs));
	}
	store_study_best_done(&b);
	return 0;
}

int runner_format_defaults(const struct runner *r, const char *knobs_json, char *buf, size_t size)
{
	_cleanup_(cJSON_Deletep) cJSON *knobs = NULL, *defaults = NULL;
	int k;

	if (size == 0)
		return -EINVAL;
	buf[0] = 0;
	knobs = cJSON_ParseWithLength(knobs_json, strlen(knobs_json));
	if (!knobs)
		return -EINVAL;
	k = engine_profile_default_knobs(r->profile, r->study->gpu.type, runner_baseline_gpu_gib(r), &defaults);
	if (k < 0)
		return k;
	if (opt_knobs_pd_shape(knobs, NULL)) {
		/* each side's workers leave their own knobs to the engine */
		_cleanup_(cJSON_Deletep) cJSON *pre = NULL, *dec = NULL;
		char a[256], b[256];

		if (engine_role_knobs(knobs, ENGINE_ROLE_PREFILL, &pre) < 0 ||
		    engine_role_knobs(knobs, ENGINE_ROLE_DECODE, &dec) < 0)
			return -ENOMEM;
		(void)engine_profile_defaults_text(r->profile, defaults, pre, a, sizeof(a));
		(void)engine_profile_defaults_text(r->profile, defaults, dec, b, sizeof(b));
		if (a[0] || b[0])
			snprintf(buf, size, "prefill workers: %s; decode workers: %s", a[0] ? a : "none",
				 b[0] ? b : "none");
		return 0;
	}
	return engine_profile_defaults_text(r->profile, defaults, knobs, buf, size);
}

int runner_format_command(const struct runner *r, const char *knobs_json, const char *host, uint16_t port, char **ret,
			  struct error *err)
{
	_cleanup_(cJSON_Deletep) cJSON *knobs = NULL;
	struct engine_command cmd = { 0 };
	char *s;
	int k;

	knobs = cJSON_ParseWithLength(knobs_json, strlen(knobs_json));
	if (!knobs)
		return error_set(err, -EINVAL, "knobs: not JSON");
	/* disaggregated: a command per role */
	if (opt_knobs_pd_shape(knobs, NULL))
		return engine_profile_format_roles(r->profile, r->study, knobs, host, port, ret, err);
	k = engine_profile_render_study(r->profile, r->study, knobs, host, port, &cmd, err);
	if (k < 0)
		return k;
	s = engine_command_format(&cmd);
	engine_command_done(&cmd);
	if (!s)
		return error_set(err, -ENOMEM, "out of memory");
	*ret = s;
	return 0;
}

/* ---- history ---- */

bool runner_kind_is_confirm(const char *kind)
{
	return kind && strstr(kind, "confirm") != NULL;
}

bool runner_kind_is_alone(const char *kind)
{
	return runner_kind_is_confirm(kind) && !strstr(kind, "search-confirm");
}

/* The optimizer's view of a finished trial; false for trials still open. */
static bool trial_to_opt(const struct store_trial *t, struct opt_trial *ret)
{
	switch (t->state) {
	case STORE_TRIAL_DONE:
		if (!isfinite(t->cost_per_mtok) || t->cost_per_mtok <= 0)
			ret->outcome = OPT_OUTCOME_SLA_NEVER_MET;
		else {
			ret->outcome = OPT_OUTCOME_MEASURED;
			ret->cost = t->cost_per_mtok;
		}
		break;
	case STORE_TRIAL_INFEASIBLE:
		ret->outcome =
			t->failure == STORE_FAILURE_SLA_NEVER_MET ? OPT_OUTCOME_SLA_NEVER_MET : OPT_OUTCOME_INFEASIBLE;
		break;
	case STORE_TRIAL_FAILED:
		ret->outcome = OPT_OUTCOME_FAILED;
		break;
	default:
		return false;
	}
	ret->confirm = runner_kind_is_confirm(t->kind);
	ret->cause = runner_cause_from_text(t->oom_cause);
	ret->suggested_len = t->suggested_max_model_len;
	return true;
}

int runner_history_insert(struct runner *r, const struct opt_trial *t, int64_t trial_id, unsigned seq)
{
	size_t n = r->n_trial_ids, at = n;
	int64_t *ids;
	unsigned *seqs;
	int k;

	k = opt_history_add(&r->history, t);
	if (k < 0)
		return k;
	ids = realloc(r->trial_ids, (n + 1) * sizeof(*ids));
	if (ids)
		r->trial_ids = ids;
	seqs = realloc(r->trial_seqs, (n + 1) * sizeof(*seqs));
	if (seqs)
		r->trial_seqs = seqs;
	if (!ids || !seqs) {
		r->history.n--;
		return -ENOMEM;
	}
	/* in trial order, whatever order trials end in: a restarted runner
	 * reads the store in that order */
	while (at > 0 && r->trial_seqs[at - 1] > seq)
		at--;
	memmove(&r->history.trials[at + 1], &r->history.trials[at], (n - at) * sizeof(r->history.trials[0]));
	memmove(&r->trial_ids[at + 1], &r->trial_ids[at], (n - at) * sizeof(r->trial_ids[0]));
	memmove(&r->trial_seqs[at + 1], &r->trial_seqs[at], (n - at) * sizeof(r->trial_seqs[0]));
	r->history.trials[at] = *t;
	r->trial_ids[at] = trial_id;
	r->trial_seqs[at] = seq;
	r->n_trial_ids = n + 1;
	return 0;
}

struct interval {
	uint64_t from, to;
};

static int cmp_interval(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	return x->from < y->from ? -1 : x->from > y->from;
}

/* The wall time stored trials took: the union of their intervals (trials
 * side by side count once). */
static uint64_t busy_time(const struct store_trial *t, size_t n)
{
	_cleanup_(freep) struct interval *v = calloc(n ? n : 1, sizeof(*v));
	uint64_t total = 0, from = 0, to = 0;
	size_t m = 0;

	if (!v)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (t[i].started_usec > 0 && t[i].finished_usec > t[i].started_usec)
			v[m++] = (struct interval){ t[i].started_usec, t[i].finished_usec };
	qsort(v, m, sizeof(*v), cmp_interval);
	for (size_t i = 0; i < m; i++) {
		if (i > 0 && v[i].from <= to) {
			to = MAX(to, v[i].to);
			continue;
		}
		total += to - from;
		from = v[i].from;
		to = v[i].to;
	}
	return total + (to - from);
}

/* The saturated throughput of a trial's load points (the probe's capacity). */
static int note_saturation(struct runner *r, const struct store_trial *t, struct error *err)
{
	struct store_load_point *lp = NULL;
	struct opt_config c;
	size_t n = 0;
	int k;

	if (opt_config_from_key(r->study->space, t->canonical_key, &c, NULL) < 0)
		return 0;
	k = store_load_point_list(r->store, t->id, &lp, &n, err);
	if (k < 0)
		return k;
	for (size_t i = 0; i < n; i++)
		if (lp[i].phase && strcmp(lp[i].phase, "saturation") == 0)
			runner_probe_note(r, runner_config_gpus(r, &c), lp[i].output_throughput);
	store_load_point_array_free(lp, n);
	return 0;
}

static int load_history(struct runner *r, struct error *err)
{
	struct store_trial *t = NULL;
	size_t n = 0;
	int k;

	k = store_trial_history(r->store, r->study_id, &t, &n, err);
	if (k < 0)
		return k;
	for (size_t i = 0; i < n; i++) {
		struct opt_trial ot = { 0 };

		if (!trial_to_opt(&t[i], &ot))
			continue;
		if (runner_kind_is_baseline(t[i].kind) && !r->baseline.on_grid)
			continue; /* no configuration of the search (runner-baseline.c) */
		if (runner_kind_is_sweep(t[i].kind))
			continue; /* no measurement of a cost (runner-sweep.c) */
		k = opt_config_from_key(r->study->space, t[i].canonical_key, &ot.config, err);
		if (k < 0) {
			error_prefix(err, k, "trial %u", t[i].seq);
			break;
		}
		k = runner_history_insert(r, &ot, t[i].id, t[i].seq);
		if (k < 0) {
			error_set(err, k, "trial %u: cannot add it to the history", t[i].seq);
			break;
		}
		k = note_saturation(r, &t[i], err);
		if (k < 0)
			break;
		/* a dry run's virtual clock goes on from the last trial's end */
		if (r->opts.dry_run && r->row.started_usec && t[i].finished_usec > r->row.started_usec)
			r->vclock_usec = MAX(r->vclock_usec, t[i].finished_usec - r->row.started_usec);
		if (isfinite(t[i].deploy_seconds) && t[i].deploy_seconds > 0) {
			r->deploy_sum_s += t[i].deploy_seconds;
			r->deploy_n++;
		}
		if (!r->opts.dry_run && t[i].started_usec > 0 && t[i].finished_usec > t[i].started_usec) {
			r->trial_sum_s += (double)(t[i].finished_usec - t[i].started_usec) / USEC_PER_SEC;
			r->trial_n++;
		}
		if (t[i].seq > r->status.trial)
			r->status.trial = t[i].seq;
	}
	/* what earlier runs spent: the budget continues, it does not restart */
	if (k >= 0)
		r->wall_used_before_usec = busy_time(t, n);
	store_trial_array_free(t, n);
	if (k < 0)
		return k;
	return runner_update_best(r, err);
}

/* ---- creation ---- */

int runner_study_insert(struct store *store, const struct study *study, const char *name, int64_t *ret_id,
			struct error *err)
{
	_cleanup_(freep) char *spec = study_to_string(study);
	char version[32];
	int major = 0, minor = 0, bugfix = 0;
	struct store_study st = { 0 };

	if (!spec)
		return error_set(err, -ENOMEM, "out of memory");
	nlopt_version(&major, &minor, &bugfix);
	snprintf(version, sizeof(version), "%d.%d.%d", major, minor, bugfix);
	st.name = (char *)(name ? name : study->name);
	st.spec_json = spec;
	st.engine = (char *)study->engine;
	st.model = (char *)study->model.name;
	st.label = (char *)study->label;
	st.seed = study->search.seed;
	st.algorithm = (char *)(study->search.algorithm ? study->search.algorithm : "LN_SBPLX");
	st.nlopt_version = version;
	return store_study_insert(store, &st, ret_id, err);
}

/* The planner the study asks for ("search.strategy"). */
static int make_planner(struct runner *r, struct error *err)
{
	const struct runner_planner_env env = {
		.event = r->event,
		.store = r->store,
		.study_id = r->study_id,
		.study_name = r->row.name,
		.study = r->study,
		.profile = r->profile,
		.settings = &r->settings,
		.dry_run = r->opts.dry_run,
	};
	const char *strategy = r->study->search.strategy;
	int k;

	if (strategy && strcmp(strategy, "twin") == 0)
		k = runner_planner_twin_new(&env, runner_on_answer, r, &r->planner, err);
	else if (strategy && strcmp(strategy, "model") == 0)
		k = runner_planner_model_new(&env, runner_on_answer, r, &r->planner, err);
	else if (strategy)
		k = runner_planner_search_new(&env, runner_on_answer, r, &r->planner, err);
	else {
		/* the default: the model search where goodput-sim's engine model
		 * describes the study (its model and GPU presets, a synthetic
		 * workload), else the plain search */
		struct error e = { 0 };

		k = runner_planner_model_new(&env, runner_on_answer, r, &r->planner, &e);
		if (k < 0) {
			log_info("study %s: the plain search (the engine model cannot describe this study: %s)",
				 r->row.name, error_str(&e, k));
			k = runner_planner_search_new(&env, runner_on_answer, r, &r->planner, err);
		}
	}
	if (k < 0)
		return k;
	r->plain_search = r->planner->ops == runner_planner_search_ops();
	runner_planner_describe(r->planner, r->status.twin, sizeof(r->status.twin));
	if (!r->plain_search) {
		/* the study's row named the NLopt algorithm when it was submitted;
		 * the search that runs is the model's ("model" or "twin") */
		struct error e = { 0 };

		k = store_study_set_algorithm(r->store, r->study_id, r->status.twin, &e);
		if (k < 0)
			log_warning("study %s: %s", r->row.name, error_str(&e, k));
	}
	return 0;
}

int runner_new(sd_event *e, struct store *store, int64_t study_id, const struct runner_options *opts,
	       struct runner **ret, struct error *err)
{
	_cleanup_(runner_freep) struct runner *r = NULL;
	_cleanup_(cJSON_Deletep) cJSON *spec = NULL;
	struct study_options so = { 0 };
	const cJSON *engine;
	int k;

	r = calloc(1, sizeof(*r));
	if (!r)
		return error_set(err, -ENOMEM, "out of memory");
	r->event = sd_event_ref(e);
	r->store = store;
	r->study_id = study_id;
	opt_history_init(&r->history);
	if (opts)
		r->opts = *opts;
	r->opts.engines_dir = NULL;
	r->opts.log_dir = NULL;
	if ((opts && opts->engines_dir && !(r->engines_dir = strdup(opts->engines_dir))) ||
	    !(r->log_dir = strdup(opts && opts->log_dir ? opts->log_dir : ".")))
		return error_set(err, -ENOMEM, "out of memory");
	r->evaluator = r->opts.dry_run ? &runner_evaluator_dry : &runner_evaluator_deploy;

	k = store_study_get(store, study_id, &r->row, err);
	if (k < 0)
		return k;
	r->status.study_id = study_id;
	r->status.study_name = r->row.name;
	spec = cJSON_ParseWithLength(r->row.spec_json, strlen(r->row.spec_json));
	if (!spec || !cJSON_IsObject(spec))
		return error_set(err, -EINVAL, "study %s: the stored spec is not a JSON object", r->row.name);
	engine = cJSON_GetObjectItemCaseSensitive(spec, "engine");
	if (!cJSON_IsString(engine))
		return error_set(err, -EINVAL, "study %s: engine: expected a string", r->row.name);
	k = engine_profile_find(engine->valuestring, r->engines_dir, &r->profile, err);
	if (k < 0)
		return k;
	so.extra_knobs = r->profile->extra_knobs;
	k = study_from_json(spec, &so, &r->study, err);
	if (k < 0)
		return error_prefix(err, k, "study %s", r->row.name);
	if (!r->opts.dry_run) {
		k = engine_profile_check_study(r->profile, r->study, err);
		if (k < 0)
			return k;
	}

	opt_settings_init(&r->settings);
	k = runner_phases_load(r, err);
	if (k < 0)
		return error_prefix(err, k, "study %s", r->row.name);
	r->settings.seed = r->study->search.seed;
	r->settings.max_trials = r->opts.max_trials ? r->opts.max_trials : r->study->budget.max_trials;
	if (r->opts.confirm_probes >= 0)
		r->settings.confirm_probes = (unsigned)r->opts.confirm_probes;
	r->wall_budget_usec =
		r->opts.max_wall_time_usec ? r->opts.max_wall_time_usec : r->study->budget.max_wall_time_usec;
	r->status.max_trials = r->settings.max_trials;
	k = runner_preflight_init(&r->preflight, r->study, err);
	if (k < 0)
		return error_prefix(err, k, "study %s", r->row.name);
	if (r->preflight.usable && r->study->search.preflight)
		r->settings.preflight = &r->preflight.hook;
	k = runner_baseline_choose(r, err);
	if (k < 0)
		return error_prefix(err, k, "study %s", r->row.name);
	/* max_trials counts the baseline: off the grid, the search does not see it */
	if (r->baseline.enabled && !r->baseline.on_grid && r->settings.max_trials > 1)
		r->settings.max_trials--;
	/* on the grid, it covers the values of the small knobs it holds */
	if (r->baseline.enabled && r->baseline.on_grid)
		r->settings.baseline = &r->baseline.config;
	r->n_gpus = r->study->gpu.n_devices;
	if (r->opts.startup_model < 0)
		r->opts.startup_model = strcmp(r->profile->name, "sim") != 0;
	r->parallel = r->opts.parallel ? r->opts.parallel : r->study->budget.parallel;
	if (r->parallel == 0 || r->parallel > RUNNER_ASK_MAX)
		r->parallel = RUNNER_ASK_MAX;
	/* max_trials counts the answer's measurement alone, too (side by side,
	 * runner-fill.c). The search's own confirmations run alone: when it
	 * keeps none (a budget under 4, or --confirm 0), it leaves room for that
	 * one, if there is room for a search beside it; with less, the budget
	 * ends the study before it */
	if (runner_side_by_side(r) && r->settings.max_trials >= 2 && opt_confirm_reserve(&r->settings) == 0)
		r->settings.max_trials--;
	runner_sweep_reserve(r);
	runner_status_count(r);
	k = make_planner(r, err);
	if (k < 0)
		return error_prefix(err, k, "study %s", r->row.name);

	k = load_history(r, err);
	if (k < 0)
		return error_prefix(err, k, "study %s: loading its history", r->row.name);
	*ret = TAKE_PTR(r);
	return 0;
}

struct runner *runner_free(struct runner *r)
{
	if (!r)
		return NULL;
	runner_release_trials(r);
	runner_orphans_free(r);
	runner_cluster_free(r); /* after the trials: their jobs' deployments use it */
	r->planner = runner_planner_free(r->planner);
	runner_host_free(r);
	r->step_source = sd_event_source_disable_unref(r->step_source);
	r->wall_timer = sd_event_source_disable_unref(r->wall_timer);
	runner_baseline_done(&r->baseline);
	engine_profile_free(r->profile);
	study_free(r->study);
	store_study_done(&r->row);
	opt_history_done(&r->history);
	free(r->trial_ids);
	free(r->trial_seqs);
	free(r->engines_dir);
	free(r->log_dir);
	sd_event_unref(r->event);
	free(r);
	return NULL;
}

/* ---- the step source ---- */

static int on_step(sd_event_source *s, void *userdata)
{
	struct runner *r = userdata;
	enum runner_action a = r->action;

	r->action = RUNNER_ACTION_NONE;
	switch (a) {
	case RUNNER_ACTION_PLAN:
		runner_plan(r);
		break;
	case RUNNER_ACTION_FINISH:
		runner_finish(r, r->pending_end);
		break;
	case RUNNER_ACTION_NONE:
		break;
	}
	return 0;
}

void runner_schedule(struct runner *r, enum runner_action a)
{
	int k;

	r->action = a;
	if (!r->step_source) {
		k = sd_event_add_defer(r->event, &r->step_source, on_step, r);
		if (k < 0) {
			log_error_errno(k, "runner: cannot add an event source");
			return;
		}
		(void)sd_event_source_set_description(r->step_source, "runner-step");
	}
	(void)sd_event_source_set_enabled(r->step_source, SD_EVENT_ONESHOT);
}

/* The planner's answer, recorded as the study's choice: the configuration
 * with the lowest mean measured cost (opt_best over the history), as its
 * first measured trial; the status then shows the study's answer as the
 * store gives it. */
static int record_best(struct runner *r, struct error *err)
{
	struct opt_result best;
	int k;

	opt_best(r->study->space, &r->history, &best, NULL);
	if (!best.valid)
		return 0;
	for (size_t i = 0; i < r->n_trial_ids; i++)
		if (memcmp(&r->history.trials[i].config, &best.config, sizeof(best.config)) == 0 &&
		    r->history.trials[i].outcome == OPT_OUTCOME_MEASURED) {
			k = store_study_set_best(r->store, r->study_id, r->trial_ids[i], err);
			return k < 0 ? k : runner_update_best(r, err);
		}
	return 0;
}

/* A study that ended with nothing meeting the SLA: its message names the
 * attempt that came closest (which bound failed, by how much, at what
 * rate: the trial's own message), so that tune, `goodput best` and the
 * report, which show the study's message, say the same. */
static void describe_no_feasible(struct runner *r)
{
	_cleanup_(store_study_closest_done) struct store_study_closest c = { 0 };
	_cleanup_(freep) char *text = NULL;
	struct error err = { 0 };
	const char *was = r->message;
	int k;

	if (store_study_closest(r->store, r->study_id, &c, &err) < 0)
		k = asprintf(&text, "no configuration met the SLA%s%s", was[0] ? "; " : "", was);
	else {
		_cleanup_(cJSON_Deletep) cJSON *j = c.result_json ? cJSON_Parse(c.result_json) : NULL,
					       *kj = c.trial.knobs_json ? cJSON_Parse(c.trial.knobs_json) : NULL;
		struct probe_result res;
		char knobs[256], sent[48] = "", verdict[160] = "", margins[320] = "";

		study_knobs_json_text(kj, knobs, sizeof(knobs));
		/* by the point's own figures: the rate sent, its verdict and the
		 * margin to each bound */
		if (j && probe_result_from_json(j, &res, NULL) >= 0) {
			if (res.offered_rate > 0)
				snprintf(sent, sizeof(sent), " (%.4g sent)", res.offered_rate);
			probe_result_verdict_text(&res, verdict, sizeof(verdict));
			(void)probe_result_margins(&res, margins, sizeof(margins));
		}
		k = asprintf(
			&text,
			"no configuration met the SLA; the closest: trial %u%s%s at %.4g req/s%s, %.1f%% of requests "
			"good%s%s%s: %s%s%s",
			c.trial.seq, knobs[0] ? " " : "", knobs, c.rate, sent, c.attainment * 100,
			verdict[0] ? " (" : "", verdict, verdict[0] ? ")" : "",
			margins[0]                ? margins
			: c.trial.failure_message ? c.trial.failure_message
						  : "(no detail recorded)",
			was[0] ? "; " : "", was);
	}
	if (k < 0)
		return;
	k = (int)MIN(strlen(text), sizeof(r->message) - 1);
	memcpy(r->message, text, (size_t)k);
	r->message[k] = 0;
}

/* Called by the final step: the study's last state is committed, then the
 * FINISHED event (the callee may free the runner in it). */
void runner_finish(struct runner *r, enum runner_end end)
{
	struct error err = { 0 };
	enum store_study_state state;
	int k = 0;

	r->wall_timer = sd_event_source_disable_unref(r->wall_timer);
	runner_release_trials(r);
	(void)runner_host_stop_waiting(r);
	switch (end) {
	case RUNNER_END_DONE:
		state = STORE_STUDY_DONE;
		break;
	case RUNNER_END_CANCELLED:
		state = STORE_STUDY_CANCELLED;
		break;
	case RUNNER_END_FAILED:
		state = STORE_STUDY_FAILED;
		break;
	default:
		state = STORE_STUDY_RUNNING; /* stopped: resumable */
		break;
	}
	if (end == RUNNER_END_DISK_FULL) {
		/* nothing is written: the study stays as the store has it (its
		 * trials in flight are redone when it runs again) */
		r->status.end = end;
		r->status.phase = RUNNER_FINISHED;
		r->status.trial_id = 0;
		runner_emit(r, &(struct runner_event){ .kind = RUNNER_EVENT_PHASE });
		runner_emit(r, &(struct runner_event){ .kind = RUNNER_EVENT_FINISHED, .end = end });
		return;
	}
	if (end == RUNNER_END_DONE)
		k = record_best(r, &err);
	if (k >= 0 && end == RUNNER_END_DONE && !r->status.have_best) {
		state = STORE_STUDY_NO_FEASIBLE;
		describe_no_feasible(r);
	}
	if (k >= 0 && (end != RUNNER_END_STOPPED || r->row.state != STORE_STUDY_RUNNING))
		k = store_study_set_state(r->store, r->study_id, state, r->message[0] ? r->message : NULL, &err);
	if (k < 0) {
		snprintf(r->message, sizeof(r->message), "%s", error_str(&err, k));
		end = k == -ENOSPC || k == -EDQUOT ? RUNNER_END_DISK_FULL : RUNNER_END_FAILED;
	}
	r->status.end = end;
	r->status.phase = RUNNER_FINISHED;
	r->status.trial_id = 0;
	runner_emit(r, &(struct runner_event){ .kind = RUNNER_EVENT_PHASE });
	runner_emit(r, &(struct runner_event){ .kind = RUNNER_EVENT_FINISHED, .end = end });
}

/* A store error or another failure the study cannot go on after. */
void runner_fail(struct runner *r, const char *msg)
{
	/* a full disk is the cause: what fails after it (a teardown's writes) is not */
	if (r->action == RUNNER_ACTION_FINISH && r->pending_end == RUNNER_END_DISK_FULL)
		return;
	snprintf(r->message, sizeof(r->message), "%s", msg);
	r->pending_end = RUNNER_END_FAILED;
	/* the trial's server and probe are freed by runner_finish, from the
	 * step source: this may run inside one of their callbacks */
	runner_schedule(r, RUNNER_ACTION_FINISH);
}

void runner_fail_errno(struct runner *r, int k, const char *msg)
{
	if (k != -ENOSPC && k != -EDQUOT) {
		runner_fail(r, msg);
		return;
	}
	if (!(r->action == RUNNER_ACTION_FINISH && r->pending_end == RUNNER_END_DISK_FULL))
		snprintf(r->message, sizeof(r->message), "disk full: %s", msg);
	r->pending_end = RUNNER_END_DISK_FULL;
	runner_schedule(r, RUNNER_ACTION_FINISH);
}

bool runner_logs_disk_full(const struct runner *r)
{
	struct statvfs st;

	/* less than a server's log lines need: the disk is full (for root too,
	 * whose reserved blocks a server's log will not wait for) */
	return r->log_dir && statvfs(r->log_dir, &st) == 0 && (uint64_t)st.f_bavail * st.f_frsize < (1u << 20);
}

bool runner_failing(const struct runner *r)
{
	return r->action == RUNNER_ACTION_FINISH;
}

static int request_halt(struct runner *r, enum runner_request req);

static int on_wall_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runner *r = userdata;
	unsigned stopped = 0;

	r->wall_expired = true;
	/* the limit holds: trials in flight are stopped there, recorded as
	 * interrupted (a resume with a larger budget redoes them), and the
	 * study ends with what it measured */
	for (size_t i = 0; i < r->n_trials; i++)
		stopped += r->trials[i]->running && r->trials[i]->open;
	if (stopped == 0 || r->request != RUNNER_REQUEST_NONE)
		return 0;
	snprintf(r->message, sizeof(r->message),
		 "wall-time budget reached (%.0f s): %u trial%s stopped at the limit, recorded as interrupted",
		 (double)r->wall_budget_usec / USEC_PER_SEC, stopped, stopped == 1 ? "" : "s");
	(void)request_halt(r, RUNNER_REQUEST_BUDGET);
	return 0;
}

/* ---- start, pause, resume, stop ---- */

/* When the study first ran (the dry run's virtual clock counts from it). */
static int read_start(struct runner *r, struct error *err)
{
	struct store_study st = { 0 };
	int k;

	k = store_study_get(r->store, r->study_id, &st, err);
	if (k < 0)
		return k;
	r->study_start_usec = st.started_usec;
	store_study_done(&st);
	return 0;
}

int runner_start(struct runner *r, runner_event_fn cb, void *userdata)
{
	struct error err = { 0 };
	int k;

	if (r->started)
		return -EALREADY;
	r->started = true;
	r->cb = cb;
	r->userdata = userdata;
	r->start_usec = runner_clock(r);
	if (r->row.state == STORE_STUDY_DONE || r->row.state == STORE_STUDY_NO_FEASIBLE) {
		r->pending_end = RUNNER_END_DONE;
		runner_schedule(r, RUNNER_ACTION_FINISH);
		return 0;
	}
	k = runner_cluster_start(r, &err);
	if (k >= 0)
		k = runner_end_orphans(r, &err);
	if (k >= 0)
		k = store_study_resume(r->store, r->study_id, &err);
	if (k > 0)
		log_info("study %s: %d interrupted trial%s will be redone", r->row.name, k, k == 1 ? "" : "s");
	if (k >= 0)
		k = store_study_set_state(r->store, r->study_id, STORE_STUDY_RUNNING, NULL, &err);
	if (k >= 0)
		k = read_start(r, &err);
	if (k >= 0)
		k = runner_preflight_record(r, &err);
	if (k >= 0)
		k = runner_queue_load(r, &err);
	if (k >= 0)
		k = runner_baseline_queue(r, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return 0;
	}
	r->row.state = STORE_STUDY_RUNNING;
	if (r->wall_budget_usec > 0 && r->wall_budget_usec != UINT64_MAX) {
		if (r->wall_used_before_usec > 0)
			log_info("study %s: %.0f s of the %.0f s wall-time budget spent in earlier runs", r->row.name,
				 (double)r->wall_used_before_usec / USEC_PER_SEC,
				 (double)r->wall_budget_usec / USEC_PER_SEC);
		if (r->wall_used_before_usec >= r->wall_budget_usec)
			r->wall_expired = true;
		else if (!r->opts.dry_run) {
			/* (a dry run's clock is virtual: checked between trials) */
			k = sd_event_add_time_relative(r->event, &r->wall_timer, CLOCK_MONOTONIC,
						       r->wall_budget_usec - r->wall_used_before_usec, 1000,
						       on_wall_timer, r);
			if (k >= 0)
				(void)sd_event_source_set_description(r->wall_timer, "runner-wall-budget");
		}
	}
	if (!r->opts.dry_run)
		runner_host_start(r);
	runner_set_phase(r, RUNNER_PLANNING);
	runner_schedule(r, RUNNER_ACTION_PLAN);
	return 0;
}

static int request_halt(struct runner *r, enum runner_request req)
{
	if (!r->started || r->status.phase == RUNNER_FINISHED)
		return -ESTALE;
	if (r->request == RUNNER_REQUEST_STOP || r->request == RUNNER_REQUEST_CANCEL ||
	    r->request == RUNNER_REQUEST_FAIL || r->action == RUNNER_ACTION_FINISH)
		return -EALREADY;
	if (req == RUNNER_REQUEST_PAUSE && (r->request == RUNNER_REQUEST_PAUSE || r->status.phase == RUNNER_PAUSED))
		return -EALREADY;
	r->request = req;
	runner_halt(r);
	return 0;
}

int runner_pause(struct runner *r)
{
	return request_halt(r, RUNNER_REQUEST_PAUSE);
}

int runner_stop(struct runner *r)
{
	return request_halt(r, RUNNER_REQUEST_STOP);
}

int runner_cancel(struct runner *r)
{
	return request_halt(r, RUNNER_REQUEST_CANCEL);
}

int runner_resume(struct runner *r)
{
	struct error err = { 0 };
	int k;

	if (r->status.phase != RUNNER_PAUSED) {
		if (r->request == RUNNER_REQUEST_PAUSE) {
			/* still tearing down: continue once that is over, the
			 * trials that waited first */
			r->request = RUNNER_REQUEST_NONE;
			k = runner_queue_load(r, &err);
			if (k < 0)
				runner_fail_errno(r, k, error_str(&err, k));
			return k < 0 ? k : 0;
		}
		return -ESTALE;
	}
	k = store_study_set_state(r->store, r->study_id, STORE_STUDY_RUNNING, NULL, &err);
	if (k >= 0)
		k = runner_queue_load(r, &err);
	if (k < 0) {
		runner_fail_errno(r, k, error_str(&err, k));
		return k;
	}
	r->row.state = STORE_STUDY_RUNNING;
	r->request = RUNNER_REQUEST_NONE;
	runner_set_phase(r, RUNNER_PLANNING);
	runner_schedule(r, RUNNER_ACTION_PLAN);
	return 0;
}

/* Nothing of a trial is left running: act on a pending pause/stop/cancel.
 * Returns true when it did (the caller must not continue). */
bool runner_settle_request(struct runner *r)
{
	struct error err = { 0 };
	int k;

	switch (r->request) {
	case RUNNER_REQUEST_NONE:
		return false;
	case RUNNER_REQUEST_PAUSE:
		k = store_study_set_state(r->store, r->study_id, STORE_STUDY_PAUSED, NULL, &err);
		if (k < 0) {
			runner_fail_errno(r, k, error_str(&err, k));
			return true;
		}
		r->row.state = STORE_STUDY_PAUSED;
		r->status.trial_id = 0;
		runner_set_phase(r, RUNNER_PAUSED);
		return true;
	case RUNNER_REQUEST_STOP:
		r->pending_end = RUNNER_END_STOPPED;
		break;
	case RUNNER_REQUEST_CANCEL:
		r->pending_end = RUNNER_END_CANCELLED;
		snprintf(r->message, sizeof(r->message), "cancelled");
		break;
	case RUNNER_REQUEST_FAIL:
		r->pending_end = RUNNER_END_FAILED; /* r->message says why */
		break;
	case RUNNER_REQUEST_BUDGET:
		/* the study ends as a finished one: what was measured is its answer */
		r->pending_end = RUNNER_END_DONE;
		break;
	}
	runner_schedule(r, RUNNER_ACTION_FINISH);
	return true;
}
