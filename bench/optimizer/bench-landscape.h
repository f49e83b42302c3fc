/* bench-landscape.h — the true cost landscapes the optimizer benchmark
 * searches: a search space plus the outcome and $/Mtok of every allowed
 * configuration, computed once (a synthetic model, or `goodput tune
 * --dry-run`'s evaluator on a study spec).
 *
 * A study landscape may search a smaller space than its truth covers (the
 * edge landscape: the optimum lies above the initial max_num_seqs range);
 * the truth is computed on the widened space, the methods start in the
 * study's own. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "engine-profile.h"
#include "error.h"
#include "opt.h"
#include "runner-dryrun.h"
#include "runner-preflight.h"
#include "space.h"
#include "study.h"
#include "twin.h"

struct bench_point {
	enum opt_outcome outcome;
	double cost;           /* $/Mtok when MEASURED */
	double sla_ratio;      /* the worst latency/bound ratio at the max rate (0: unknown) */
	double peak_in_flight; /* requests in flight at most at the max rate (0: unknown) */
	/* what the trial's load points say, as the dry run stores them: the
	 * saturated run and the run at the max SLA rate (the model search
	 * calibrates on them) */
	double max_rate;
	size_t n_points;
	struct twin_point points[2];
};

struct bench_space {
	char name[96];
	char label[200];            /* what it is, for people */
	struct opt_space *space;    /* the truth's space */
	struct opt_config *configs; /* its allowed configurations, grid order */
	struct bench_point *truth;  /* per configuration */
	size_t n, n_feasible;
	int32_t *index_of; /* grid ordinal -> index in configs, or -1 */
	double optimum;
	size_t optimum_index;
	bool from_cache;

	/* study landscapes */
	struct study *study;               /* the spec as written: its space is where the methods start */
	struct study *truth_study;         /* the same with the truth's space */
	struct runner_preflight preflight; /* on truth_study */
	struct engine_profile *profile;    /* the sim's: the study's extra knobs */
	cJSON *start_space_json;           /* the study's search_space, to widen from (owned) */
	int64_t truth_max_seqs;            /* the top of max_num_seqs in the truth (0: the study's) */
	struct twin *twin;                 /* the model search's twin of the start study (NULL: none) */
	/* the engine the truth runs, when it is not goodput-sim as published:
	 * constants perturbed or changed through a profile file, costs the
	 * model does not have (the methods never see them) */
	struct runner_dry_engine engine;
	char profile_file[256];
	char engine_label[96];
};

/* The landscapes: synthetic ones (fast, for the smoke test) and study
 * specs in bench/optimizer/landscapes/ and configs/studies/. */
size_t bench_n_spaces(bool sim);
/* Builds landscape i and evaluates every configuration; sim: with goodput
 * tune --dry-run's evaluator (runner_dry_evaluate). cache_dir (sim only;
 * NULL = no cache): the landscape is read from, or written to, a file there
 * named by a hash of everything it depends on. source_root: where the
 * study specs are. */
int bench_space_new(size_t i, bool sim, const char *source_root, const char *cache_dir, struct bench_space **ret,
		    struct error *err);
void bench_space_free(struct bench_space *bs);
/* The truth index of configuration c of space (the truth's, or the space a
 * method searches: matched by canonical key); -1 when it is not in the truth. */
ssize_t bench_space_lookup(const struct bench_space *bs, const struct opt_space *space, const struct opt_config *c);
/* The study space a method starts in (the truth's for synthetic landscapes). */
const struct opt_space *bench_space_start(const struct bench_space *bs);

/* Evaluates one configuration of study in virtual time (bench-sim.c). */
int bench_sim_eval(const struct study *study, const struct runner_dry_engine *engine, const struct opt_config *c,
		   struct bench_point *ret, struct error *err);
