/* bench-landscape.h — the true cost landscapes the optimizer benchmark
 * searches: a search space plus the outcome and $/Mtok of every allowed
 * configuration, computed once (synthetic model or goodput-sim). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "opt.h"
#include "space.h"

struct bench_point {
	enum opt_outcome outcome;
	double cost; /* $/Mtok when MEASURED */
};

/* The workload a space's sim landscape is computed for (a chat service). */
struct bench_workload {
	double in_mean, in_range;   /* input tokens: uniform in mean·(1 ± range) */
	double out_mean, out_range; /* output tokens: the same */
	unsigned num_prompts;       /* requests per rate-search run */
	const char *sla;            /* per-request bounds, probe_sla_parse form */
	double attainment;          /* share of requests that must meet them */
	double rel_tol;             /* rate search: stop when the bracket is this narrow */
	unsigned max_runs;          /* rate search: at most this many simulate runs */
};

struct bench_space {
	char name[96];
	struct opt_space *space;
	struct opt_config *configs; /* the allowed configurations, grid order */
	struct bench_point *truth;  /* per configuration */
	size_t n, n_feasible;
	int32_t *index_of; /* grid ordinal -> index in configs, or -1 */
	double optimum;
	size_t optimum_index;
	bool from_cache;    /* sim: the landscape was read from the cache */
	char workload[160]; /* sim: the workload and SLA, for people */
};

size_t bench_n_spaces(void);
/* Builds space i and evaluates every configuration (sim: with goodput-sim's
 * engine model in virtual time when it was built in, else -EOPNOTSUPP).
 * cache_dir (sim only; NULL = no cache): the landscape is read from, or
 * written to, a file there named by a hash of everything it depends on. */
int bench_space_new(size_t i, bool sim, const char *cache_dir, struct bench_space **ret, struct error *err);
void bench_space_free(struct bench_space *bs);
size_t bench_space_index(const struct bench_space *bs, const struct opt_config *c);

/* Evaluates one configuration with goodput-sim (bench-sim.c). */
int bench_sim_eval(const char *model, const char *gpu, unsigned gpus, const struct bench_workload *w,
		   const struct opt_space *space, const struct opt_config *c, struct bench_point *ret,
		   struct error *err);
