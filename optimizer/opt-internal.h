/* opt-internal.h — the replay state shared by opt.c (history, the replay and
 * its oracle, opt_next) and opt-search.c (screening, local checks, SBPLX
 * runs). Not a public API: opt.h is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nlopt.h>

#include "macro.h"
#include "opt.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(nlopt_opt, nlopt_destroy)

#define REPROBES_MAX 4

/* A small open-addressing map: grid ordinal -> int. */
struct imap {
	uint64_t *keys; /* ordinal + 1; 0 = empty */
	int *values;
	size_t n, cap;
};

enum eval_kind {
	EVAL_MEASURED,
	EVAL_INFEASIBLE, /* told, or inferred by dominance */
	EVAL_SLA,
	EVAL_FAILED, /* gave up after max_attempts */
	EVAL_STOP,   /* the replay has stopped: unwind */
};

/* What the history says about one configuration: its search trials, and
 * the first REPROBES_MAX re-probes (confirm trials) in the order told. */
struct hist_entry {
	bool decided;
	enum opt_outcome outcome;
	double cost;
	enum opt_oom_cause cause;
	uint32_t suggested_len;
	unsigned failures;
	unsigned n_reprobes;
	bool reprobe_measured[REPROBES_MAX];
	double reprobe_cost[REPROBES_MAX];
};

/* What the replay has learnt about one configuration. For a measured one,
 * cost is the mean of its n revealed measurements. */
struct revealed {
	enum eval_kind kind;
	double cost;
	struct opt_config config;
	unsigned n;        /* measurements (MEASURED) */
	unsigned reprobes; /* re-probes consumed from the history */
	double sum;
	bool told; /* from the history (deployed), not ruled out by an estimate or dominance */
};

/* A revealed out-of-memory configuration and why it did not start. */
struct oom_entry {
	struct opt_config config;
	enum opt_oom_cause cause;
	uint32_t suggested_len;
};

/* What the one check deployment of a combination near the memory boundary said. */
enum near_check {
	NEAR_UNCHECKED,
	NEAR_CONFIRMED, /* it did not start: the rest of the combination's near ones are predicted infeasible */
	NEAR_REFUTED,   /* it started: they are deployed as any other */
};

struct replay {
	const struct opt_space *space;
	const struct opt_settings *set;
	struct imap hist_map; /* ordinal -> index in hist */
	struct hist_entry *hist;
	struct imap seen_map; /* ordinal -> index in seen */
	struct revealed *seen;
	size_t n_seen, cap_seen;
	struct oom_entry *oom; /* revealed out-of-memory configurations */
	size_t n_oom, cap_oom;
	unsigned evaluated, inferred, predicted; /* predicted: as the oracle met them */
	unsigned reprobes;                       /* re-probes consumed from the history */
	unsigned deployed;                       /* deployments made: every trial of the history */

	/* categorical combinations and ordinal dimensions */
	size_t cat[OPT_KNOBS_MAX], n_cat;
	size_t dim[OPT_KNOBS_MAX], n_dim; /* ordinal knobs with more than one value */
	size_t n_combos;
	double *combo_best;   /* lowest revealed cost per combination (INFINITY: none) */
	double *combo_screen; /* its cost at the screening point (INFINITY: none) */
	struct opt_config *combo_best_cfg;
	bool *combo_done;
	enum near_check *combo_near;
	bool *combo_converged; /* NLopt runs from the best ask for nothing new */
	bool *combo_checked;   /* the local check passed at combo_checked_cfg */
	struct opt_config *combo_checked_cfg;
	unsigned *combo_runs;
	unsigned *combo_turns; /* turns the search loop gave it (contenders alternate) */
	double best;           /* lowest revealed cost overall */
	struct opt_config best_cfg;

	/* the NLopt run in progress */
	struct opt_config base; /* categorical values of the run's combination */
	bool new_point;         /* the current run revealed something */

	/* how the replay stopped */
	int error;
	bool stopped, budget;
	enum opt_phase phase;
	bool reprobe; /* the candidate is a re-probe (asked as OPT_ASK_CONFIRM) */
	struct opt_config candidate;
	unsigned attempt;
};

/* ---- opt.c: the replay's oracle ---- */

/* The value stored for key, NULL when absent. */
int *opt_imap_get(const struct imap *m, uint64_t key);
/* The index of c's categorical combination / the categorical values of
 * combination k (ordinal knobs left at 0) in *ret. */
size_t opt_replay_combo_of(const struct replay *r, const struct opt_config *c);
void opt_replay_combo_base(const struct replay *r, size_t k, struct opt_config *ret);
/* ---- opt-memory.c: out-of-memory causes, the pre-flight, the budget ---- */

/* Whether a revealed out-of-memory configuration rules c out (opt.h: by its
 * cause and the knobs' memory roles). */
bool opt_replay_dominated(const struct replay *r, const struct opt_config *c);
/* Remembers a revealed out-of-memory configuration; -ENOMEM. */
int opt_replay_add_oom(struct replay *r, const struct opt_config *c, enum opt_oom_cause cause, uint32_t suggested_len);
/* The pre-flight's verdict on c (OPT_FIT_UNKNOWN without one). */
enum opt_fit opt_replay_fit(const struct replay *r, const struct opt_config *c);
/* Whether c, not deployed yet, is predicted not to fit: a clear NO, or NEAR
 * in a combination whose check did not start. */
bool opt_replay_predicted_infeasible(const struct replay *r, const struct opt_config *c);
/* A revealed outcome of c settles its combination's near check when c is
 * the combination's first near configuration. */
void opt_replay_near_revealed(struct replay *r, const struct opt_config *c, bool started);
/* Whether the search may deploy once more (the confirmations' reserve kept). */
bool opt_replay_budget_left(const struct replay *r);
/* A pseudo-random number in [0, 1) from the seed and two counters: the
 * same for the same arguments, on every replay. */
double opt_seed_unit(uint64_t seed, uint64_t a, uint64_t b);
/* Stops the replay on an internal -errno error (kept in r->error). */
void opt_replay_stop_error(struct replay *r, int error);
/* The oracle: what the search learns about c (which must meet the
 * constraints), revealed from the history in ask order; the first
 * configuration that needs a deployment stops the replay (EVAL_STOP). */
enum eval_kind opt_replay_evaluate(struct replay *r, const struct opt_config *c, double *ret_cost);
/* Measures measured configuration c once more, from its re-probes in the
 * history in order; else the replay stops with c as a re-probe candidate.
 * Counts against max_trials. True when a new measurement was revealed. */
bool opt_replay_reprobe(struct replay *r, const struct opt_config *c);

/* ---- opt-search.c: the strategy ---- */

/* Screening: probes every categorical combination at the screen level
 * (opt.h); the strategy's first phase. */
void opt_replay_screen(struct replay *r);
/* A later search phase: reveals the first n trials of h (those of earlier
 * phases, decided ones and their re-probes) in their order, in place of
 * screening. */
void opt_replay_prime(struct replay *r, const struct opt_history *h, size_t n);
/* Local checks and restarted SBPLX runs, combination by combination, until
 * the replay stops (a candidate, an error, the budget) or converges. */
void opt_replay_search(struct replay *r);
/* Every allowed configuration has been revealed or ruled out. */
bool opt_replay_exhausted(const struct replay *r);
/* Measures every value of each small ordinal knob once (opt.h, "Levels");
 * combo_measured (NULL: not wanted) gets true for each combination a
 * configuration measured there belongs to. */
void opt_replay_cover(struct replay *r, bool *combo_measured);
