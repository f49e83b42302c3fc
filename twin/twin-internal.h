/* twin-internal.h — what the twin's files share: the twin object with its
 * caches, and the engine configuration of a grid point. */
#pragma once

#include <sys/types.h>

#include "engine.h"
#include "simulate.h"
#include "twin.h"

#define TWIN_RANKS_MAX 24
#define TWIN_FITS_MAX  32
#define TWIN_LB_SLACK  0.8 /* saturated-throughput cost × this is a lower bound on the SLA cost */

/* Predictions of every configuration under one profile, filled lazily. */
struct twin_rank {
	bool used;
	uint64_t stamp;
	struct sim_profile profile;
	double *lb;                   /* per config: lower bound on the cost (NAN = not computed) */
	struct twin_prediction *pred; /* per config, valid where have[] */
	bool *have;
	/* per config: TWIN_FRESH_* bits of what this process computed itself
	 * (what twin_cache_to_json hands to the parent of a forked child) */
	uint8_t *fresh;
	bool any_fresh;
};

#define TWIN_FRESH_LB   1
#define TWIN_FRESH_PRED 2

struct twin_fit_entry {
	bool used;
	bool fresh; /* fitted in this process */
	uint64_t hash, stamp;
	int r;
	struct twin_fit fit;
};

struct twin {
	const struct opt_space *space;
	struct twin_setup setup;
	struct opt_config *configs; /* allowed configurations, ordinal order */
	size_t n_configs;
	int32_t *index_of;             /* grid ordinal -> index in configs, or -1 */
	struct sim_engine_config *cfg; /* per config: resolved with the base profile */
	int8_t *startable;             /* per config: -1 unknown, 0 refused at start-up, 1 starts */
	bool startable_fresh;          /* some of startable[] found in this process */
	struct sim_profile base;
	double usd_per_gpu_hour;
	uint64_t clock;
	struct twin_rank ranks[TWIN_RANKS_MAX];
	struct twin_fit_entry fits[TWIN_FITS_MAX];
};

/* The rank of profile p: found, or made in the least recently used slot. */
int twin_rank_get(struct twin *t, const struct sim_profile *p, struct twin_rank **ret);
/* Puts a fit into the fit cache under its inputs' hash (r < 0: no fit). */
void twin_fit_cache_put(struct twin *t, uint64_t hash, int r, const struct twin_fit *fit);

/* Index of config in t->configs, or -1 when it is not an allowed grid point. */
ssize_t twin_index(const struct twin *t, const struct opt_config *config);
/* The resolved engine configuration of configs[i] with profile p (and the
 * setup's fault costs). */
int twin_engine_config(struct twin *t, size_t i, const struct sim_profile *p, struct sim_engine_config *ret,
		       struct error *err);
/* Whether the model starts configs[i] (start-up checks; independent of the
 * fitted constants). */
bool twin_startable(struct twin *t, size_t i);
/* The workload of a run at rate (INFINITY: all at once), with num_prompts
 * requests (0 = the setup's). */
void twin_workload_at(const struct twin *t, double rate, uint32_t num_prompts, struct probe_workload_config *ret);
/* The workload that reproduces a measured point: what the probe sent there
 * (probe_workload_at_point at its rate, index and number of requests). */
void twin_point_workload(const struct twin *t, const struct twin_point *pt, struct probe_workload_config *ret);
/* $/Mtok of configs[i] at a token rate counted as the setup says. */
double twin_cost(const struct twin *t, size_t i, const struct probe_result *r, bool offline_saturated);
/* FNV-1a over bytes, chained. */
uint64_t twin_hash(uint64_t h, const void *p, size_t n);
/* Best predicted configuration among those not excluded (exclude may be NULL,
 * else one flag per config): branch and bound over the saturated-throughput
 * lower bounds. -ENOENT when none is predicted to meet the SLA. */
/* discount (may be NULL): per config, a factor <= 1 the ranking applies to its
 * predicted cost (optimism where the twin is unsure); ret holds the plain
 * prediction. */
int twin_rank_best(struct twin *t, const struct sim_profile *p, const bool *exclude, const double *discount,
		   size_t *ret_index, struct twin_prediction *ret, struct error *err);
/* The rank of profile p with the cost lower bound of every configuration
 * computed (INFINITY where the model cannot start it). */
int twin_rank_lower_bounds(struct twin *t, const struct sim_profile *p, struct twin_rank **ret, struct error *err);
/* Sorts indices by key ascending, ties by index. */
void twin_sort_by(size_t *order, size_t n, const double *key);
/* Index of a profile constant by name, or -1. */
ssize_t twin_profile_index(const char *name);
/* The constants only some configurations depend on (MFU of its precision,
 * AWQ efficiency, the TP overhead) that configs[i] needs, as a field mask. */
uint64_t twin_specific_fields(const struct twin *t, size_t i);
/* A double as the exact text "%.17g" (a raw cJSON node: cJSON's own printing
 * is exact only to an epsilon, and replay needs bit-exact numbers). -EINVAL
 * for NaN and infinities. */
int twin_json_add_exact(cJSON *o, const char *key, double v);
/* Every constant of a profile, exactly: what `goodput-sim --profile-file` reads. */
int twin_profile_to_json(const struct sim_profile *p, cJSON **ret);
