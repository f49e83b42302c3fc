/* opt.h — the search: ask/tell over the stored history, no I/O.
 *
 * The study runner loops:
 *
 *   for (;;) {
 *           opt_next(space, &settings, &history, &cand, &err);   // ask
 *           if (cand.ask == OPT_ASK_DONE) break;                 // cand.best is the answer
 *           deploy + probe cand.config;                          // minutes, on the event loop
 *           store the trial (config key, outcome, cost as %.17g, cand.ask == OPT_ASK_CONFIRM);
 *           opt_history_add(&history, &trial);                   // tell
 *   }
 *
 * opt_next() replays the whole search from the history on every call (NLopt
 * has no ask/tell interface; DESIGN.md, PLATFORM.md): points already in the
 * history are answered from it, and the first point the search wants that is
 * not there is the candidate. The result depends only on (space, settings,
 * history), so a restarted daemon continues the same search from the database
 * alone. Costs must be stored bit-exactly (%.17g or %a).
 *
 * Strategy. Knobs split into categorical ones (quantization, tensor_parallel,
 * string lists) and ordinal ones (the batch knobs and other numeric grids).
 * 1. Screen: each combination of categorical values is measured once at an
 *    informative point (half-way up every ordinal grid: a mid-size batch
 *    and chunk); the combinations where that did not run (out of memory,
 *    SLA never met) are tried again at the smallest point (an out-of-memory
 *    result there rules the whole combination out), then at a quarter — in
 *    passes, so the first deployments cover every combination.
 *    Levels: between the first pass and the others, every value of a small
 *    ordinal knob (at most OPT_COVER_LEVELS of them, as a slot count
 *    {1, 2, 4}) is measured once, at the best configuration so far (before
 *    anything was measured: the allowed point nearest the screen level)
 *    with that knob at the value: an expert deploys each slot count once
 *    before refining one, and the search never calls itself converged
 *    while a value of such a knob is untried and the budget has room. A
 *    value the study's baseline holds (settings.baseline) is covered by
 *    the baseline itself, revealed from the history. A combination
 *    measured there needs no further screening pass.
 * 2. Search: the combination with the lowest cost so far is searched; then
 *    the next one within `promising` of the best screen, and so on. In a
 *    combination: its best point (or, on its first turn, the best batch
 *    knobs of the other combinations) gets a local check on the snapped
 *    grid — each ordinal knob walked down and up one step at a time while
 *    the cost stays within 5 % of the best, then tried at its smallest and
 *    largest value; a better point re-centres the check — and, once the
 *    check holds, the centre is re-probed once (asked as OPT_ASK_CONFIRM
 *    with phase SEARCH; only when confirm_probes > 0), since the lowest of
 *    many noisy measurements is biased low. Then NLopt SBPLX runs over the
 *    ordinal knobs in normalised grid coordinates (log space for log2
 *    ranges), each point snapped to the grid, restarted from the best until
 *    a run asks for nothing new; a new best found there is checked again.
 *    All runs share one history, so repeated snapped points cost nothing.
 *    Costs are the mean of a configuration's measurements.
 * 3. Confirm: once the search stops (converged, budget, space exhausted) the
 *    best and the runner-up are re-probed until each has `confirm_probes`
 *    re-probes (those of the search count) (asked as OPT_ASK_CONFIRM); the
 *    answer is the configuration with the lowest mean cost, with the spread
 *    of its measurements.
 * Out of memory (opt-memory.c): a configuration that did not start rules
 * others out without deploying them, by what the engine's log said
 * (enum opt_oom_cause) and what each knob does to memory (space.h's roles):
 * the weights do not fit — the whole quantization × TP combination, at any
 * batch, context or KV dtype (unless a larger gpu_memory_utilization is
 * searched); the KV cache for max_model_len does not fit — the combination
 * at that max_model_len and longer (or longer than the engine's suggested
 * length) at any batch; no memory for cache blocks or activations, or no
 * cause told — every configuration with larger-or-equal batch knobs (and
 * context), the rest equal. A memory pre-flight (settings.preflight) may
 * predict before anything is deployed: a configuration predicted not to fit
 * by a clear margin is never deployed ("predicted"); one predicted not to
 * fit within the estimate's margin is deployed once per combination to
 * check the prediction, and the rest of the combination follows that check.
 * Infeasible, SLA-never-met and given-up configurations get a finite,
 * deterministic penalty (worse than any cost) that steers NLopt towards
 * smaller batches. A FAILED trial (crash, time-out) is retried until
 * `max_attempts` deployments have failed, then treated as infeasible.
 *
 * Budget: max_trials counts every deployment in the history (search trials,
 * failed attempts, re-probes, and any trial the caller added such as a
 * baseline). The search stops while a reserve for the final confirmations
 * is left (min(2 × confirm_probes, max_trials / 4) deployments), and the
 * confirmations stop at max_trials. Wall-time budgets are the caller's: stop
 * asking and call opt_best().
 *
 * Phases: a caller that widens a range after the search ended (an edge of
 * the space holds the best) continues in the widened space with
 * settings.phase_start = the trials made before; the replay reveals those
 * first, measures the new bound along the other ordinal knobs (the best's
 * values elsewhere), and searches on from there in the combinations within
 * 10 % of the best, so the same (space, settings, history) still give the
 * same path.
 *
 * Seed: settings.seed picks the order the combinations are screened in (a
 * rotation of the restart-aware order) and the initial simplex steps of
 * every SBPLX run; the same seed and history give the same path. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "space.h"

enum opt_outcome {
	OPT_OUTCOME_MEASURED,      /* cost holds $/Mtok (lower is better) */
	OPT_OUTCOME_INFEASIBLE,    /* did not start: out of memory, weights do not fit */
	OPT_OUTCOME_SLA_NEVER_MET, /* ran, but no load met the SLA */
	OPT_OUTCOME_FAILED,        /* crashed, hung, timed out: retried up to max_attempts */
	_OPT_OUTCOME_MAX,
};

/* Why a configuration did not start (an INFEASIBLE trial), as the engine's
 * log told it. */
enum opt_oom_cause {
	OPT_OOM_UNKNOWN,      /* out of memory, not told why (or another refusal) */
	OPT_OOM_WEIGHTS,      /* the weights do not fit */
	OPT_OOM_KV_CACHE,     /* the KV cache for max_model_len does not fit */
	OPT_OOM_CACHE_BLOCKS, /* no memory left for cache blocks or activations */
	_OPT_OOM_CAUSE_MAX,
};

/* One stored trial. */
struct opt_trial {
	struct opt_config config;
	enum opt_outcome outcome;
	double cost;              /* $/Mtok when MEASURED, else ignored */
	bool confirm;             /* a re-probe asked with OPT_ASK_CONFIRM */
	enum opt_oom_cause cause; /* INFEASIBLE: why */
	uint32_t suggested_len;   /* OPT_OOM_KV_CACHE: the longest max_model_len the engine said fits (0: not said) */
};

/* The trials of one study in the order they were told. */
struct opt_history {
	struct opt_trial *trials;
	size_t n, allocated;
};

void opt_history_init(struct opt_history *h);
void opt_history_done(struct opt_history *h);
/* Appends a copy; -ENOMEM, or -EINVAL for a MEASURED trial without a finite cost > 0. */
int opt_history_add(struct opt_history *h, const struct opt_trial *t);
/* Whether t can enter a history: a known outcome, and a finite positive cost
 * when measured (opt_history_add and the twin's history refuse the rest). */
bool opt_trial_is_valid(const struct opt_trial *t);

/* The memory pre-flight's verdict on one configuration. */
enum opt_fit {
	OPT_FIT_UNKNOWN, /* no estimate */
	OPT_FIT_YES,     /* predicted to fit */
	OPT_FIT_NEAR,    /* predicted not to fit, within the estimate's margin: checked once per combination */
	OPT_FIT_NO,      /* predicted not to fit by a clear margin: never deployed */
};

/* A memory estimate the search consults before deploying: a pure function
 * of the configuration (the replay asks it again on every ask). */
struct opt_preflight {
	enum opt_fit (*fit)(const struct opt_space *space, const struct opt_config *c, void *userdata);
	void *userdata;
};

struct opt_settings {
	uint64_t seed;       /* the screening order and SBPLX's initial steps (see above); nlopt_srand */
	unsigned max_trials; /* deployments at most: every trial of the history counts; 0 = no limit */
	unsigned
		confirm_probes; /* re-probes each of the best and runner-up get (0 = none, and no re-probes in the search) */
	unsigned max_attempts; /* deployments of a FAILED configuration before giving up on it (>= 1) */
	double promising;      /* search a combination whose best is <= (1 + promising) × the overall best */
	double screen_level;   /* where on each normalised ordinal grid a combination is screened first */
	const struct opt_preflight *preflight; /* NULL: no memory estimate */
	/* Trials of the history made before the current search phase (the
	 * space was widened at a range bound since: the caller's record of
	 * when); 0 = one phase. They are revealed first, in their order, and
	 * the search goes on from what they say without screening again. */
	size_t phase_start;
	/* The knob whose range the current phase widened (its index in the
	 * space; -1: none) and at which end: the search measures the new
	 * bound first, along every other ordinal knob. opt_settings_init sets -1. */
	int phase_knob;
	bool phase_upper;
	/* The study's baseline (the engine's defaults) when it lies on the grid
	 * (NULL: none): the values of small knobs it holds are covered by it,
	 * revealed from the history rather than deployed again. It must stay
	 * the same for a study (the replay reads it on every ask). */
	const struct opt_config *baseline;
};

/* Ordinal knobs of at most this many values have each value measured once
 * before the search may converge (see "Levels" above). */
#define OPT_COVER_LEVELS 3

/* Defaults: seed 0, max_trials 0, confirm_probes 1, max_attempts 2,
 * promising 1.0, screen_level 0.5. Keep settings fixed for a study: a
 * change sends the replay down another path. */
void opt_settings_init(struct opt_settings *s);

enum opt_ask {
	OPT_ASK_TRIAL,   /* deploy and measure config; tell with confirm = false */
	OPT_ASK_CONFIRM, /* measure config again; tell with confirm = true (phase SEARCH: a re-probe of the search) */
	OPT_ASK_DONE,    /* nothing more: see reason and best */
};

enum opt_phase {
	OPT_PHASE_SCREEN,
	OPT_PHASE_SEARCH,
	OPT_PHASE_CONFIRM,
	OPT_PHASE_DONE,
};

enum opt_done_reason {
	OPT_DONE_NONE,      /* still searching */
	OPT_DONE_CONVERGED, /* no promising combination asks for a new point */
	OPT_DONE_BUDGET,    /* max_trials deployments made */
	OPT_DONE_EXHAUSTED, /* every allowed configuration is measured or ruled out */
};

/* A configuration's measurements: mean cost over its MEASURED trials
 * (confirmations included), their count and relative spread (max − min) / mean. */
struct opt_result {
	bool valid;
	struct opt_config config;
	double cost;
	unsigned n;
	double spread;
};

struct opt_candidate {
	enum opt_ask ask;
	enum opt_phase phase;
	enum opt_done_reason reason; /* set once the search has stopped (confirm and done) */
	struct opt_config config;    /* what to measure (ask != DONE) */
	unsigned attempt;            /* 1, or 2.. when retrying a FAILED configuration */
	unsigned evaluated;          /* distinct configurations the search has deployed */
	unsigned inferred;           /* configurations ruled out without deploying (out-of-memory dominance) */
	unsigned predicted;          /* ... of them by the pre-flight (not deployed, predicted not to fit) */
	struct opt_result best, runner_up;
};

/* Ask: the next thing to measure, or done. Deterministic in (space, settings,
 * history). Trials whose configuration is not on the grid are -EINVAL (with
 * err naming the trial); NLopt failures are -EIO. */
int opt_next(const struct opt_space *space, const struct opt_settings *settings, const struct opt_history *history,
	     struct opt_candidate *ret, struct error *err);

/* Ask with trials in flight. pending holds configurations asked for but not
 * yet told (their trials still run), each as an opt_trial with outcome
 * MEASURED and the cost the replay is to take for it: its stand-in (a
 * constant liar, opt_stand_in, or a prediction the caller trusts), confirm
 * set for re-probes. The replay answers them as if told, so the candidate
 * is never one in flight, and the done phase counts re-probes in flight;
 * the answer (best, runner_up) is the history's alone. Asking for k
 * configurations at once is k asks, each candidate added to pending before
 * the next. Deterministic in (space, settings, history, pending as a set
 * with their stand-ins): a study resumed with the same trials in flight
 * asks the same candidates. */
int opt_next_pending(const struct opt_space *space, const struct opt_settings *settings,
		     const struct opt_history *history, const struct opt_trial *pending, size_t n_pending,
		     struct opt_candidate *ret, struct error *err);

/* How much worse than the best measured cost the constant liar is: not a
 * new best (the search does not re-centre on a guess), but within the local
 * check's tolerance (a walk along a knob goes on past it). */
#define OPT_LIAR_MARGIN 0.025

/* The constant liar for a configuration in flight: a re-probe stands in as
 * its configuration's mean so far; any other trial as the best mean cost
 * measured × (1 + OPT_LIAR_MARGIN), or 1.0 before anything was measured.
 * A function of the history alone. */
double opt_stand_in(const struct opt_space *space, const struct opt_history *history, const struct opt_config *config,
		    bool confirm);

/* The answer so far: the configuration with the lowest mean measured cost
 * and the runner-up (either may be !valid). */
void opt_best(const struct opt_space *space, const struct opt_history *history, struct opt_result *ret_best,
	      struct opt_result *ret_runner_up);

/* Whether INFEASIBLE trial oom rules configuration c out without deploying
 * it (by its cause, see above); false for other outcomes. */
bool opt_oom_rules_out(const struct opt_space *space, const struct opt_trial *oom, const struct opt_config *c);

/* The reserve of deployments the search leaves for the final confirmations. */
unsigned opt_confirm_reserve(const struct opt_settings *settings);

/* Names used in the store and in --json output: "measured", "infeasible",
 * "sla_never_met", "failed"; "trial", "confirm", "done"; "screen", "search",
 * "confirm", "done"; "", "converged", "budget", "exhausted". */
const char *opt_outcome_to_string(enum opt_outcome o);
int opt_outcome_from_string(const char *s, enum opt_outcome *ret);
const char *opt_ask_to_string(enum opt_ask a);
const char *opt_phase_to_string(enum opt_phase p);
const char *opt_done_reason_to_string(enum opt_done_reason r);
/* "unknown", "weights", "kv_cache", "cache_blocks". */
const char *opt_oom_cause_to_string(enum opt_oom_cause c);
