/* gp.h — a small Gaussian process for what a model of the server gets wrong.
 *
 * The search (twin/twin-search.c) predicts each configuration's cost with
 * goodput-sim's calibrated engine model and describes the model's error —
 * the residual log(measured / predicted) — with a Gaussian process over the
 * knobs: ordinal knobs on their normalised grid coordinate (log scale for
 * log2 ranges, opt_space_normalise), categorical knobs as "same value or
 * not". So a residual measured at one configuration says most about its
 * grid neighbours, less about far ones, and an unmeasured precision or TP
 * keeps the prior's uncertainty.
 *
 * Kernel (all hyperparameters in log-cost units):
 *   k(a, b) = offset² + signal² · exp(−½ Σ_ordinal (a_d − b_d)² / ℓ_o²)
 *                               · exp(−Σ_categorical [a_d ≠ b_d] / ℓ_c)
 *           + nugget² · [a = b]
 * plus each observation's own noise variance on the diagonal (the
 * measurement noise over the number of measurements averaged). The offset
 * term lets all residuals share a bias the calibration has not removed; the
 * nugget is an error each configuration has on its own (a rate search that
 * resolves the max rate only to its tolerance), which no neighbour's
 * measurement removes.
 * Hyperparameters are chosen by the log marginal likelihood over a small
 * fixed grid (opt_gp_select): deterministic, no optimiser to stall.
 *
 * Dimensions are tiny (a study measures tens of configurations), so the
 * linear algebra is a Cholesky factorisation written here (about 30 lines)
 * rather than a dependency on GSL or LAPACK: O(n³) with n ≤ OPT_GP_POINTS_MAX
 * is well under a millisecond, and results are bit-reproducible across
 * machines, which the replayed search needs.
 *
 * No I/O, no allocation outside opt_gp_fit/opt_gp_done. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "space.h"

#define OPT_GP_DIM_MAX    OPT_KNOBS_MAX
#define OPT_GP_POINTS_MAX 512

struct opt_gp_kernel {
	double signal;     /* prior standard deviation of the residual (log units) */
	double offset;     /* prior standard deviation of a residual shared by every configuration */
	double length_ord; /* length scale over ordinal coordinates in [0, 1] */
	double length_cat; /* how fast a categorical difference decorrelates (larger: more alike) */
	double nugget;     /* prior standard deviation of an error of each configuration's own, shared
	                    * with no neighbour (0: none) */
};

struct opt_gp {
	size_t dim;
	bool categorical[OPT_GP_DIM_MAX];
	struct opt_gp_kernel kernel;
	size_t n;
	double *x;     /* n × dim inputs */
	double *y;     /* n observations */
	double *noise; /* n noise variances */
	double *chol;  /* n × n lower-triangular Cholesky factor of K + diag(noise) */
	double *alpha; /* (K + diag(noise))⁻¹ y */
	double log_ml; /* log marginal likelihood of y */
};

void opt_gp_init(struct opt_gp *gp);
void opt_gp_done(struct opt_gp *gp);

/* The kernel between two inputs. */
double opt_gp_kernel_eval(const struct opt_gp *gp, const double *a, const double *b);

/* Conditions the process with kernel k on n observations (x: n × dim, y,
 * noise variances > 0). -EINVAL on bad sizes, -ENOMEM, -EDOM when the
 * matrix is not positive definite (cannot happen with noise > 0 unless the
 * values are not finite). gp->dim and gp->categorical must be set first. */
int opt_gp_fit(struct opt_gp *gp, const struct opt_gp_kernel *k, size_t n, const double *x, const double *y,
	       const double *noise);

/* Fits every kernel of the grid (signal × length_ord × length_cat, offset
 * and nugget fixed) and keeps the one with the largest log marginal likelihood (the
 * first on a tie). */
int opt_gp_select(struct opt_gp *gp, double offset, double nugget, const double *signals, size_t n_signals,
		  const double *lengths_ord, size_t n_ord, const double *lengths_cat, size_t n_cat, size_t n,
		  const double *x, const double *y, const double *noise);

/* Posterior mean and variance of the latent residual at z (noise-free). */
void opt_gp_predict(const struct opt_gp *gp, const double *z, double *ret_mean, double *ret_var);

/* Solves L · L^T · x = b in place for a lower-triangular n × n factor. */
void opt_chol_solve(const double *chol, size_t n, double *b);
/* Factorises the symmetric n × n matrix a in place (lower triangle) into
 * L with a = L · L^T; -EDOM when it is not positive definite. */
int opt_cholesky(double *a, size_t n);

/* The standard normal's density and distribution function. */
double opt_normal_pdf(double x);
double opt_normal_cdf(double x);
/* Expected improvement below `best` of a normal (mean, sd): E[max(0, best − X)]. */
double opt_expected_improvement(double best, double mean, double sd);
