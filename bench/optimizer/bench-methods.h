/* bench-methods.h — the search methods the optimizer benchmark compares,
 * all measuring through one evaluator: a deployment of a configuration
 * reveals its true outcome, and for a measured one its true cost times a
 * log-normal noise draw (a fresh draw per deployment, seeded per run). The
 * evaluator keeps the run's trace: after each deployment, the true regret of
 * the configuration the method would answer (the lowest mean of its
 * measurements), and whether the server started. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench-landscape.h"

struct bench_rng {
	uint64_t s;
};

uint64_t bench_rng_next(struct bench_rng *r);
double bench_rng_uniform(struct bench_rng *r);

/* One run's record. */
struct bench_trace {
	double *regret; /* [0, n): after each deployment (INFINITY before anything was measured) */
	bool *started;  /* [0, n): the deployment's server started */
	bool *dear;     /* [0, n): the configuration costs > 1.5 × the optimum, never met the SLA or did not start */
	size_t n, cap;
};

struct bench_eval {
	const struct bench_space *bs;
	double sigma;
	struct bench_rng rng;
	double *sum; /* per truth configuration: measured costs */
	unsigned *cnt;
	size_t inc; /* the incumbent (lowest mean), SIZE_MAX: none */
	struct bench_trace *trace;
	size_t cap_deployments; /* a run stops after this many */
};

/* Every run starts with the runner's baseline deployment (the engine's
 * defaults): counted for every method, it tells none of them anything. */
int bench_eval_init(struct bench_eval *e, const struct bench_space *bs, double sigma, uint64_t seed,
		    struct bench_trace *t);
void bench_eval_done(struct bench_eval *e);
/* Deploys truth configuration i: its outcome, and a noisy cost when
 * measured; recorded in the trace. -ENOSPC once cap_deployments are made. */
int bench_eval_deploy(struct bench_eval *e, size_t i, enum opt_outcome *ret_outcome, double *ret_cost);
/* The same, as a real trial reports it: the noisy cost and max rate, and
 * the load points with a fresh noise draw per figure. */
int bench_eval_deploy_trial(struct bench_eval *e, size_t i, struct twin_trial *ret);

enum bench_method {
	BENCH_SEARCH, /* goodput's search: opt_next with the pre-flight, widening at edges */
	BENCH_RANDOM, /* a random order of the allowed configurations */
	BENCH_GRID,   /* every configuration in vLLM auto_tune's order */
	BENCH_TPE,    /* Optuna's TPE sampler, driven by bench-tpe.py over --serve */
	BENCH_MODEL,  /* the model search (twin_search_ask): goodput's default */
	_BENCH_METHOD_MAX,
};

const char *bench_method_name(enum bench_method m);

/* One run of a method (not TPE: bench-serve.c) from seed. */
int bench_run(enum bench_method m, const struct bench_space *bs, double sigma, uint64_t seed, size_t max_deployments,
	      struct bench_trace *t, struct error *err);

/* ---- bench-serve.c: the evaluator over a pipe ---- */

/* Serves one run on (in, out): a line describing the space, then one JSON
 * configuration per line answered with its cost; at end of input (or
 * {"done": true}), the run's trace. */
int bench_serve(const struct bench_space *bs, double sigma, uint64_t seed, size_t max_deployments, int in_fd,
		int out_fd, struct error *err);
/* A TPE run: starts `python argv...` (bench-tpe.py), which runs `bench-optimizer
 * --serve` itself; reads the trace it prints. 77 (-ENOPKG) when Optuna is
 * not installed. */
int bench_run_tpe(const char *python, const char *script, const char *self, size_t space_index, bool sim,
		  const char *source_root, const char *cache_dir, double sigma, uint64_t seed, size_t max_deployments,
		  struct bench_trace *t, struct error *err);
int bench_trace_push(struct bench_trace *t, double regret, bool started, bool dear);
void bench_trace_done(struct bench_trace *t);
