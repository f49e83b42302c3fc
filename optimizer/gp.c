/* gp.c — the Gaussian process of gp.h: a Cholesky factorisation of our own,
 * the kernel, conditioning, hyperparameters by marginal likelihood on a
 * grid, and expected improvement.
 *
 * Why our own Cholesky: the matrices hold at most a few hundred rows (one
 * per measured configuration), the textbook algorithm is 20 lines, and a
 * library (GSL, LAPACK) would add a dependency to the core for no speed a
 * study could notice; written out, every operation runs in a fixed order,
 * so a replayed search gets bit-identical numbers on every machine. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "macro.h"

void opt_gp_init(struct opt_gp *gp)
{
	*gp = (struct opt_gp){ 0 };
}

static void gp_free_data(struct opt_gp *gp)
{
	free(gp->x);
	free(gp->y);
	free(gp->noise);
	free(gp->chol);
	free(gp->alpha);
	gp->x = gp->y = gp->noise = gp->chol = gp->alpha = NULL;
	gp->n = 0;
}

void opt_gp_done(struct opt_gp *gp)
{
	gp_free_data(gp);
}

int opt_cholesky(double *a, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		double d = a[j * n + j];

		for (size_t k = 0; k < j; k++)
			d -= a[j * n + k] * a[j * n + k];
		if (!(d > 0))
			return -EDOM;
		d = sqrt(d);
		a[j * n + j] = d;
		for (size_t i = j + 1; i < n; i++) {
			double s = a[i * n + j];

			for (size_t k = 0; k < j; k++)
				s -= a[i * n + k] * a[j * n + k];
			a[i * n + j] = s / d;
		}
		for (size_t i = 0; i < j; i++)
			a[i * n + j] = 0; /* the upper triangle: zeros */
	}
	return 0;
}

/* Forward substitution L · v = b in place. */
static void chol_forward(const double *l, size_t n, double *b)
{
	for (size_t i = 0; i < n; i++) {
		double s = b[i];

		for (size_t k = 0; k < i; k++)
			s -= l[i * n + k] * b[k];
		b[i] = s / l[i * n + i];
	}
}

void opt_chol_solve(const double *l, size_t n, double *b)
{
	chol_forward(l, n, b);
	for (size_t i = n; i-- > 0;) {
		double s = b[i];

		for (size_t k = i + 1; k < n; k++)
			s -= l[k * n + i] * b[k];
		b[i] = s / l[i * n + i];
	}
}

double opt_gp_kernel_eval(const struct opt_gp *gp, const double *a, const double *b)
{
	const struct opt_gp_kernel *k = &gp->kernel;
	double ord = 0, cat = 0;
	bool same = true;

	for (size_t d = 0; d < gp->dim; d++) {
		same = same && a[d] == b[d];
		if (gp->categorical[d])
			cat += a[d] != b[d];
		else
			ord += (a[d] - b[d]) * (a[d] - b[d]);
	}
	return k->offset * k->offset + (same ? k->nugget * k->nugget : 0) +
	       k->signal * k->signal * exp(-0.5 * ord / (k->length_ord * k->length_ord) - cat / k->length_cat);
}

int opt_gp_fit(struct opt_gp *gp, const struct opt_gp_kernel *k, size_t n, const double *x, const double *y,
	       const double *noise)
{
	double logdet = 0, fit = 0;
	int r;

	if (gp->dim > OPT_GP_DIM_MAX || n > OPT_GP_POINTS_MAX || !(k->length_ord > 0) || !(k->length_cat > 0))
		return -EINVAL;
	gp_free_data(gp);
	gp->kernel = *k;
	gp->x = malloc(MAX(n * gp->dim, (size_t)1) * sizeof(double));
	gp->y = malloc(MAX(n, (size_t)1) * sizeof(double));
	gp->noise = malloc(MAX(n, (size_t)1) * sizeof(double));
	gp->chol = malloc(MAX(n * n, (size_t)1) * sizeof(double));
	gp->alpha = malloc(MAX(n, (size_t)1) * sizeof(double));
	if (!gp->x || !gp->y || !gp->noise || !gp->chol || !gp->alpha) {
		gp_free_data(gp);
		return -ENOMEM;
	}
	gp->n = n;
	memcpy(gp->x, x, n * gp->dim * sizeof(double));
	memcpy(gp->y, y, n * sizeof(double));
	memcpy(gp->noise, noise, n * sizeof(double));
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++) {
			double v = opt_gp_kernel_eval(gp, &x[i * gp->dim], &x[j * gp->dim]);

			gp->chol[i * n + j] = v;
			gp->chol[j * n + i] = v;
		}
	for (size_t i = 0; i < n; i++)
		gp->chol[i * n + i] += noise[i];
	r = opt_cholesky(gp->chol, n);
	if (r < 0) {
		gp_free_data(gp);
		return r;
	}
	memcpy(gp->alpha, y, n * sizeof(double));
	opt_chol_solve(gp->chol, n, gp->alpha);
	for (size_t i = 0; i < n; i++) {
		logdet += log(gp->chol[i * n + i]);
		fit += y[i] * gp->alpha[i];
	}
	gp->log_ml = -0.5 * fit - logdet - 0.5 * (double)n * log(2 * M_PI);
	return 0;
}

int opt_gp_select(struct opt_gp *gp, double offset, double nugget, const double *signals, size_t n_signals,
		  const double *lengths_ord, size_t n_ord, const double *lengths_cat, size_t n_cat, size_t n,
		  const double *x, const double *y, const double *noise)
{
	struct opt_gp_kernel best = { 0 };
	double best_ml = -INFINITY;
	int r;

	for (size_t a = 0; a < n_signals; a++)
		for (size_t b = 0; b < n_ord; b++)
			for (size_t c = 0; c < n_cat; c++) {
				struct opt_gp_kernel k = { .signal = signals[a],
							   .offset = offset,
							   .nugget = nugget,
							   .length_ord = lengths_ord[b],
							   .length_cat = lengths_cat[c] };

				r = opt_gp_fit(gp, &k, n, x, y, noise);
				if (r == -EDOM)
					continue;
				if (r < 0)
					return r;
				if (gp->log_ml > best_ml) {
					best_ml = gp->log_ml;
					best = k;
				}
			}
	if (!(best_ml > -INFINITY))
		return -EDOM;
	return opt_gp_fit(gp, &best, n, x, y, noise);
}

void opt_gp_predict(const struct opt_gp *gp, const double *z, double *ret_mean, double *ret_var)
{
	double kzz = opt_gp_kernel_eval(gp, z, z), mean = 0, var;
	double v[OPT_GP_POINTS_MAX];

	for (size_t i = 0; i < gp->n; i++) {
		v[i] = opt_gp_kernel_eval(gp, z, &gp->x[i * gp->dim]);
		mean += v[i] * gp->alpha[i];
	}
	chol_forward(gp->chol, gp->n, v);
	var = kzz;
	for (size_t i = 0; i < gp->n; i++)
		var -= v[i] * v[i];
	*ret_mean = mean;
	*ret_var = MAX(var, 0.0);
}

double opt_normal_pdf(double x)
{
	return exp(-0.5 * x * x) / sqrt(2 * M_PI);
}

double opt_normal_cdf(double x)
{
	return 0.5 * erfc(-x / M_SQRT2);
}

double opt_expected_improvement(double best, double mean, double sd)
{
	double u;

	if (!(sd > 0))
		return MAX(best - mean, 0.0);
	u = (best - mean) / sd;
	return (best - mean) * opt_normal_cdf(u) + sd * opt_normal_pdf(u);
}
