/* test-gp.c — the search's Gaussian process (optimizer/gp.h) against cases
 * checked by hand: a Cholesky factor, the posterior of two observations in
 * one dimension (mean, variance and log marginal likelihood computed with
 * the 2 × 2 inverse written out), categorical distance, hyperparameters
 * chosen by marginal likelihood, and expected improvement. */
#include <errno.h>
#include <math.h>

#include "gp.h"
#include "tests.h"

#define NEAR(a, b, tol) CHECK_MSG(fabs((a) - (b)) <= (tol), "%.12g vs %.12g", (double)(a), (double)(b))

static void test_cholesky(void)
{
	/* [[4, 2, 2], [2, 5, 3], [2, 3, 6]] = L L^T with L = [[2,0,0],[1,2,0],[1,1,2]] */
	double a[9] = { 4, 2, 2, 2, 5, 3, 2, 3, 6 }, b[3] = { 8, 10, 11 };
	double bad[4] = { 1, 2, 2, 1 };

	CHECK(opt_cholesky(a, 3) == 0);
	NEAR(a[0], 2, 1e-15);
	NEAR(a[3], 1, 1e-15);
	NEAR(a[4], 2, 1e-15);
	NEAR(a[6], 1, 1e-15);
	NEAR(a[7], 1, 1e-15);
	NEAR(a[8], 2, 1e-15);
	NEAR(a[1], 0, 0);
	/* A x = b with x = (1, 1, 1): 4+2+2, 2+5+3, 2+3+6 */
	opt_chol_solve(a, 3, b);
	NEAR(b[0], 1, 1e-12);
	NEAR(b[1], 1, 1e-12);
	NEAR(b[2], 1, 1e-12);
	CHECK(opt_cholesky(bad, 2) == -EDOM);
}

static void test_posterior(void)
{
	struct opt_gp gp;
	struct opt_gp_kernel k = { .signal = 1, .offset = 0, .length_ord = 1, .length_cat = 1 };
	double x[2] = { 0, 1 }, y[2] = { 1, 0 }, noise[2] = { 0.01, 0.01 }, z, m, v;

	opt_gp_init(&gp);
	gp.dim = 1;
	CHECK(opt_gp_fit(&gp, &k, 2, x, y, noise) == 0);
	/* by hand: K = [[1.01, e^-½], [e^-½, 1.01]], α = K⁻¹y */
	z = 0;
	opt_gp_predict(&gp, &z, &m, &v);
	NEAR(m, 0.9845144409152935, 1e-12);
	NEAR(v, 0.00984514440915274, 1e-12);
	z = 0.5;
	opt_gp_predict(&gp, &z, &m, &v);
	NEAR(m, 0.5459202999227215, 1e-12);
	NEAR(v, 0.03645405252028977, 1e-12);
	NEAR(gp.log_ml, -2.3984687737209245, 1e-12);
	/* far from the data: the prior */
	z = 10;
	opt_gp_predict(&gp, &z, &m, &v);
	NEAR(m, 0, 1e-12);
	NEAR(v, 1, 1e-12);
	opt_gp_done(&gp);
}

static void test_categorical(void)
{
	struct opt_gp gp;
	struct opt_gp_kernel k = { .signal = 0.5, .offset = 0.1, .length_ord = 0.3, .length_cat = 1 };
	double a[2] = { 0.5, 0 }, b[2] = { 0.5, 1 }, c[2] = { 0.5, 2 };

	opt_gp_init(&gp);
	gp.dim = 2;
	gp.categorical[1] = true;
	gp.kernel = k;
	/* another category is one unit away, whichever it is */
	NEAR(opt_gp_kernel_eval(&gp, a, a), 0.01 + 0.25, 1e-15);
	NEAR(opt_gp_kernel_eval(&gp, a, b), 0.01 + 0.25 * exp(-1), 1e-15);
	NEAR(opt_gp_kernel_eval(&gp, a, c), opt_gp_kernel_eval(&gp, a, b), 0);
	/* the nugget: a configuration's own error, with itself only */
	gp.kernel.nugget = 0.2;
	NEAR(opt_gp_kernel_eval(&gp, a, a), 0.01 + 0.25 + 0.04, 1e-15);
	NEAR(opt_gp_kernel_eval(&gp, a, b), 0.01 + 0.25 * exp(-1), 1e-15);
	opt_gp_done(&gp);
}

static void test_select(void)
{
	/* residuals that vary smoothly with amplitude ~0.2: the likelihood
	 * prefers a signal of that order to 0.01, and a length that sees the
	 * smoothness to one that treats neighbours as unrelated */
	static const double signals[] = { 0.01, 0.2, 2 }, ords[] = { 0.02, 0.5 }, cats[] = { 1 };
	double x[8], y[8], noise[8];
	struct opt_gp gp;

	for (int i = 0; i < 8; i++) {
		x[i] = i / 7.0;
		y[i] = 0.2 * sin(3 * x[i]);
		noise[i] = 0.0009;
	}
	opt_gp_init(&gp);
	gp.dim = 1;
	CHECK(opt_gp_select(&gp, 0.05, 0, signals, 3, ords, 2, cats, 1, 8, x, y, noise) == 0);
	NEAR(gp.kernel.signal, 0.2, 0);
	NEAR(gp.kernel.length_ord, 0.5, 0);
	opt_gp_done(&gp);
}

/* A model that is badly wrong (large residuals) gets a larger signal, so
 * wider intervals where nothing was measured: the search widens. */
static void test_wider(void)
{
	static const double signals[] = { 0.02, 0.05, 0.1, 0.2, 0.4 }, ords[] = { 0.3 }, cats[] = { 1 };
	double x[4] = { 0, 0.3, 0.6, 1 }, small[4] = { 0.01, -0.01, 0.02, 0 }, large[4] = { 0.3, -0.25, 0.4, -0.1 };
	double noise[4] = { 0.0009, 0.0009, 0.0009, 0.0009 }, z = 0.45, m, v_small, v_large;
	struct opt_gp gp;

	opt_gp_init(&gp);
	gp.dim = 1;
	CHECK(opt_gp_select(&gp, 0.05, 0, signals, 5, ords, 1, cats, 1, 4, x, small, noise) == 0);
	opt_gp_predict(&gp, &z, &m, &v_small);
	CHECK(opt_gp_select(&gp, 0.05, 0, signals, 5, ords, 1, cats, 1, 4, x, large, noise) == 0);
	opt_gp_predict(&gp, &z, &m, &v_large);
	CHECK_MSG(v_large > 4 * v_small, "sd %.4f with large residuals, %.4f with small", sqrt(v_large), sqrt(v_small));
	opt_gp_done(&gp);
}

static void test_ei(void)
{
	NEAR(opt_expected_improvement(0, 0, 1), 1 / sqrt(2 * M_PI), 1e-15);
	/* certain: the plain difference */
	NEAR(opt_expected_improvement(1, 0.25, 0), 0.75, 0);
	NEAR(opt_expected_improvement(0, 0.25, 0), 0, 0);
	/* far above best: next to nothing; far below: the difference */
	CHECK(opt_expected_improvement(0, 5, 1) < 1e-6);
	NEAR(opt_expected_improvement(5, 0, 1), 5, 1e-5);
	/* more uncertainty, more to gain at equal mean */
	CHECK(opt_expected_improvement(0, 0.1, 0.2) > opt_expected_improvement(0, 0.1, 0.1));
	NEAR(opt_normal_cdf(0), 0.5, 1e-15);
	NEAR(opt_normal_cdf(1.959963984540054), 0.975, 1e-12);
}

int main(void)
{
	test_cholesky();
	test_posterior();
	test_categorical();
	test_select();
	test_wider();
	test_ei();
	return 0;
}
