/* test_layers_misc.c — the CPU kernels besides conv: batchnorm (train forward vs the formula, running
 * statistics, eval, backward by finite differences), max-pool 3x3/2 (vs naive, ties, NaN), global
 * average pool, relu, linear, residual add / accumulate, softmax cross-entropy; bad dims -> FP_EINVAL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/layers.h"

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static float urand(void) { return tu_uniform_pm1(&rng_state); }   /* uniform in [-1, 1) */
static float *rand_array(size_t n, float scale, float offset)
{
    float *a = tu_rand_array(n, &rng_state);
    for (size_t i = 0; i < n; i++)
        a[i] = offset + scale * a[i];
    return a;
}
static float *filled(size_t n, float v)
{
    float *a = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = v;
    return a;
}
static size_t dims_count(fp_dims d) { return (size_t)d.n * d.h * d.w * d.c; }
static double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

/* ---------------------------------------------------------------- batchnorm */

static const fp_bn_params BN = {0.1f, 1e-5f};

/* L = sum(bn_train(x; gamma, beta) .* r) in double (running stats not touched), of what the context points at. */
typedef struct {
    const float *x, *g, *b, *r;
    fp_dims xd;
    float *y;
} bn_objective_t;

static double bn_objective(void *ctx)
{
    const bn_objective_t *o = ctx;
    if (fp_batchnorm_forward_train(o->y, NULL, NULL, NULL, NULL, o->x, o->xd, o->g, o->b, &BN) != FP_OK)
        return NAN;
    return dot(o->y, o->r, dims_count(o->xd));
}

static void test_batchnorm(void)
{
    fp_dims xd = {2, 3, 5, 4}; /* 30 values per channel */
    size_t nx = dims_count(xd), M = (size_t)xd.n * xd.h * xd.w;
    int C = xd.c;
    float *x = rand_array(nx, 2.0f, 0.5f), *g = rand_array(C, 0.5f, 1.0f), *b = rand_array(C, 0.5f, 0.0f);
    float *y = malloc(nx * sizeof(float)), *sm = malloc(C * sizeof(float)), *si = malloc(C * sizeof(float));
    float *rm = rand_array(C, 0.2f, 0.0f), *rv = rand_array(C, 0.2f, 1.0f);
    float rm0[16], rv0[16];
    memcpy(rm0, rm, C * sizeof(float));
    memcpy(rv0, rv, C * sizeof(float));
    int rc = fp_batchnorm_forward_train(y, sm, si, rm, rv, x, xd, g, b, &BN);
    /* Naive reference in double: biased variance normalises, unbiased goes into running_var. */
    double *want = malloc(nx * sizeof(double)), mean[16], var[16];
    for (int c = 0; c < C; c++) {
        double s = 0, ss = 0;
        for (size_t m = 0; m < M; m++)
            s += x[m * C + c];
        mean[c] = s / M;
        for (size_t m = 0; m < M; m++)
            ss += (x[m * C + c] - mean[c]) * (x[m * C + c] - mean[c]);
        var[c] = ss / M;
        for (size_t m = 0; m < M; m++)
            want[m * C + c] = (x[m * C + c] - mean[c]) / sqrt(var[c] + 1e-5) * g[c] + b[c];
    }
    double worst;
    /* y: |err| <= 1e-5 + 1e-5 |want| (fp32 scale/shift of O(1) values). */
    int bad = tu_count_bad(y, 0, want, nx, 1e-5, 1e-5, &worst);
    tap_ok(rc == FP_OK && bad == 0, "bn train forward matches the naive formula (max err %.2e)", worst);
    int badstat = 0;
    for (int c = 0; c < C; c++) {
        /* statistics: relative 1e-6 */
        double wm = 0.9 * rm0[c] + 0.1 * mean[c], wv = 0.9 * rv0[c] + 0.1 * var[c] * M / (M - 1.0);
        badstat += fabs(sm[c] - mean[c]) > 1e-6 * (1 + fabs(mean[c]));
        badstat += fabs(si[c] - 1 / sqrt(var[c] + 1e-5)) > 1e-6 / sqrt(var[c] + 1e-5);
        badstat += fabs(rm[c] - wm) > 1e-6 * (1 + fabs(wm));
        badstat += fabs(rv[c] - wv) > 1e-6 * (1 + fabs(wv));
    }
    tap_ok(badstat == 0, "bn saves mean/invstd; running stats: momentum 0.1, unbiased variance (rel 1e-6)");

    /* Eval mode: (x - running_mean) / sqrt(running_var + eps) * gamma + beta. */
    rc = fp_batchnorm_forward_eval(y, x, xd, g, b, rm, rv, &BN);
    for (size_t m = 0; m < M; m++)
        for (int c = 0; c < C; c++)
            want[m * C + c] = (x[m * C + c] - rm[c]) / sqrt(rv[c] + 1e-5) * g[c] + b[c];
    bad = tu_count_bad(y, 0, want, nx, 1e-5, 1e-5, &worst);
    tap_ok(rc == FP_OK && bad == 0, "bn eval forward uses running stats (max err %.2e)", worst);

    /* In place (y == x) gives the same as out of place. */
    float *x2 = malloc(nx * sizeof(float)), *y2 = malloc(nx * sizeof(float));
    memcpy(x2, x, nx * sizeof(float));
    fp_batchnorm_forward_train(y2, NULL, NULL, NULL, NULL, x, xd, g, b, &BN);
    rc = fp_batchnorm_forward_train(x2, NULL, NULL, NULL, NULL, x2, xd, g, b, &BN);
    tap_ok(rc == FP_OK && memcmp(x2, y2, nx * sizeof(float)) == 0, "bn train forward in place");

    /* A large offset (mean 1000, std ~1) keeps its variance: single-pass sums are in double. */
    for (size_t i = 0; i < nx; i++)
        x2[i] = 1000.0f + x[i];
    fp_batchnorm_forward_train(y2, sm, si, NULL, NULL, x2, xd, g, b, &BN);
    int badoff = 0;
    for (int c = 0; c < C; c++) /* the offset x2 = 1000 + x is exact to 6e-5; relative 1e-4 on invstd */
        badoff += fabs(si[c] * sqrt(var[c] + 1e-5) - 1) > 1e-4;
    tap_ok(badoff == 0, "bn variance survives a mean of 1000 (invstd within 1e-4 relative)");

    /* Backward vs central differences, h = 1e-2, objective in double; |err| <= 2e-3 + 1e-2 |fd|
     * (forward output is fp32: rounding ~1e-6 in L, /2h -> 5e-5; truncation O(h^2)). Gradients
     * start at 0.25 to check accumulation. */
    float *r = rand_array(nx, 1.0f, 0.0f);
    float *dx = filled(nx, 0.25f), *dg = filled(C, 0.25f), *db = filled(C, 0.25f);
    fp_batchnorm_forward_train(y, sm, si, NULL, NULL, x, xd, g, b, &BN);
    rc = fp_batchnorm_backward(dx, dg, db, r, x, xd, g, sm, si);
    double *fx = malloc(nx * sizeof(double)), fg[16], fb[16];
    const float h = 1e-2f;
    bn_objective_t o = {x, g, b, r, xd, y};
    tu_central_diffs(fx, x, nx, h, bn_objective, &o);
    tu_central_diffs(fg, g, C, h, bn_objective, &o);
    tu_central_diffs(fb, b, C, h, bn_objective, &o);
    double w1, w2, w3;
    int b1 = tu_count_bad(dx, 0.25f, fx, nx, 2e-3, 1e-2, &w1);
    int b2 = tu_count_bad(dg, 0.25f, fg, C, 2e-3, 1e-2, &w2);
    int b3 = tu_count_bad(db, 0.25f, fb, C, 2e-3, 1e-2, &w3);
    tap_ok(rc == FP_OK && b1 == 0, "bn backward dx accumulates the FD gradient (max err %.2e)", w1);
    tap_ok(rc == FP_OK && b2 == 0 && b3 == 0, "bn backward dgamma, dbeta accumulate the FD gradient (%.2e, %.2e)",
           w2, w3);
    rc = fp_batchnorm_backward(NULL, NULL, db, r, x, xd, NULL, sm, si);
    tap_ok(rc == FP_OK, "bn backward with only dbeta wanted");

    fp_dims one = {1, 1, 1, 4}, zero = {2, 0, 3, 4};
    tu_check_einval(fp_batchnorm_forward_train(y, sm, si, rm, rv, x, one, g, b, &BN),
                    "bn train with one value/channel");
    tu_check_einval(fp_batchnorm_forward_train(y, sm, si, rm, rv, x, zero, g, b, &BN), "bn train with h = 0");
    tu_check_einval(fp_batchnorm_forward_train(y, sm, si, rm, rv, NULL, xd, g, b, &BN), "bn train with NULL x");
    tu_check_einval(fp_batchnorm_forward_eval(y, x, xd, g, b, NULL, rv, &BN), "bn eval with NULL running mean");
    tu_check_einval(fp_batchnorm_backward(dx, dg, db, r, x, xd, NULL, sm, si), "bn backward dx with NULL gamma");
    fp_bn_params badp = {0.1f, 0.0f};
    tu_check_einval(fp_batchnorm_forward_eval(y, x, xd, g, b, rm, rv, &badp), "bn eval with eps = 0");
    free(x); free(g); free(b); free(y); free(sm); free(si); free(rm); free(rv); free(want); free(x2); free(y2);
    free(r); free(dx); free(dg); free(db); free(fx);
}

/* ---------------------------------------------------------------- pooling */

/* L = sum(maxpool(x) .* r) in double, of the x the context points at. */
typedef struct {
    const float *x, *r;
    fp_dims xd;
    const fp_pool_params *p;
    float *y;
    size_t ny;
} maxpool_objective_t;

static double maxpool_objective(void *ctx)
{
    const maxpool_objective_t *o = ctx;
    fp_maxpool_forward(o->y, NULL, o->x, o->xd, o->p);
    return dot(o->y, o->r, o->ny);
}

static void test_maxpool(void)
{
    const fp_pool_params P = {3, 2, 1};
    fp_dims xd = {2, 7, 5, 3};
    fp_dims yd = fp_pool_out_dims(xd, &P);
    size_t nx = dims_count(xd), ny = dims_count(yd);
    tap_ok(yd.n == 2 && yd.h == 4 && yd.w == 3 && yd.c == 3, "maxpool 3x3/2 p1 7x5 -> 4x3");
    /* Distinct values 0.01 apart (a shuffled ramp), so FD with h = 1e-3 never crosses a tie. */
    float *x = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float));
    int *am = malloc(ny * sizeof(int));
    for (size_t i = 0; i < nx; i++)
        x[i] = 0.01f * (float)i - 1.0f;
    for (size_t i = nx - 1; i > 0; i--) {
        size_t j = (size_t)((urand() + 1.0f) * 0.5f * (float)(i + 1));
        j = j > i ? i : j;
        float t = x[i]; x[i] = x[j]; x[j] = t;
    }
    int rc = fp_maxpool_forward(y, am, x, xd, &P);
    int bad = 0;
    for (int n = 0; n < yd.n; n++)
        for (int oy = 0; oy < yd.h; oy++)
            for (int ox = 0; ox < yd.w; ox++)
                for (int c = 0; c < yd.c; c++) {
                    float best = -INFINITY;
                    int at = -1;
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                            if (iy < 0 || iy >= xd.h || ix < 0 || ix >= xd.w)
                                continue;
                            int k = ((n * xd.h + iy) * xd.w + ix) * xd.c + c;
                            if (x[k] > best) {
                                best = x[k];
                                at = k;
                            }
                        }
                    size_t o = (((size_t)n * yd.h + oy) * yd.w + ox) * yd.c + c;
                    bad += y[o] != best || am[o] != at;
                }
    tap_ok(rc == FP_OK && bad == 0, "maxpool forward and argmax match naive (%d bad)", bad);
    rc = fp_maxpool_forward(y, NULL, x, xd, &P);
    tap_ok(rc == FP_OK, "maxpool forward without argmax");

    /* Backward vs FD (piecewise linear, no ties within h): exact up to rounding, |err| <= 1e-4. */
    float *r = rand_array(ny, 1.0f, 0.0f), *dx = filled(nx, 0.5f);
    double *fd = malloc(nx * sizeof(double));
    fp_maxpool_forward(y, am, x, xd, &P);
    rc = fp_maxpool_backward(dx, r, am, xd, &P);
    maxpool_objective_t obj = {x, r, xd, &P, y, ny};
    tu_central_diffs(fd, x, nx, 1e-3f, maxpool_objective, &obj);
    double worst;
    bad = tu_count_bad(dx, 0.5f, fd, nx, 1e-4, 1e-3, &worst);
    tap_ok(rc == FP_OK && bad == 0, "maxpool backward accumulates the FD gradient (max err %.2e)", worst);

    /* Ties: a constant input sends every window's gradient to its first (top-left) real cell. */
    for (size_t i = 0; i < nx; i++)
        x[i] = 1.0f;
    fp_maxpool_forward(y, am, x, xd, &P);
    int badtie = 0;
    for (int n = 0; n < yd.n; n++)
        for (int oy = 0; oy < yd.h; oy++)
            for (int ox = 0; ox < yd.w; ox++)
                for (int c = 0; c < yd.c; c++) {
                    int iy = oy * 2 - 1 < 0 ? 0 : oy * 2 - 1, ix = ox * 2 - 1 < 0 ? 0 : ox * 2 - 1;
                    size_t o = (((size_t)n * yd.h + oy) * yd.w + ox) * yd.c + c;
                    badtie += am[o] != ((n * xd.h + iy) * xd.w + ix) * xd.c + c || y[o] != 1.0f;
                }
    tap_ok(badtie == 0, "maxpool ties: the first maximum in scan order wins");
    /* -inf everywhere still picks a real cell; a NaN in a window wins. */
    for (size_t i = 0; i < nx; i++)
        x[i] = -INFINITY;
    x[0] = NAN;
    fp_maxpool_forward(y, am, x, xd, &P);
    int badinf = 0;
    for (size_t o = 0; o < ny; o++)
        badinf += am[o] < 0 || (size_t)am[o] >= nx;
    tap_ok(badinf == 0 && isnan(y[0]) && am[0] == 0 && y[1] == -INFINITY,
           "maxpool: -inf input gives real argmaxes; NaN propagates");

    fp_pool_params bp = {3, 2, 2};
    tu_check_einval(fp_maxpool_forward(y, am, x, xd, &bp), "maxpool with pad > k/2");
    fp_pool_params big = {9, 1, 1};
    fp_dims small = {1, 3, 3, 2};
    tu_check_einval(fp_maxpool_forward(y, am, x, small, &big), "maxpool window larger than padded input");
    fp_dims zero = {1, 3, 0, 2};
    tu_check_einval(fp_maxpool_forward(y, am, x, zero, &P), "maxpool with w = 0");
    tu_check_einval(fp_maxpool_backward(dx, r, NULL, xd, &P), "maxpool backward with NULL argmax");
    am[3] = (int)nx;
    tu_check_einval(fp_maxpool_backward(dx, r, am, xd, &P), "maxpool backward with an argmax outside x");
    fp_dims zd = fp_pool_out_dims(zero, &P);
    fp_error_clear();
    tap_ok(zd.n == 0 && zd.h == 0 && zd.w == 0 && zd.c == 0, "pool out dims of invalid input are zero");
    free(x); free(y); free(am); free(r); free(dx); free(fd);
}

static void test_avgpool(void)
{
    fp_dims xd = {3, 3, 5, 4};
    size_t nx = dims_count(xd), ny = (size_t)xd.n * xd.c, hw = (size_t)xd.h * xd.w;
    float *x = rand_array(nx, 1.0f, 0.0f), *y = malloc(ny * sizeof(float));
    double *want = malloc(ny * sizeof(double));
    int rc = fp_avgpool_global_forward(y, x, xd);
    for (int n = 0; n < xd.n; n++)
        for (int c = 0; c < xd.c; c++) {
            double s = 0;
            for (size_t i = 0; i < hw; i++)
                s += x[((size_t)n * hw + i) * xd.c + c];
            want[n * xd.c + c] = s / hw;
        }
    double worst;
    int bad = tu_count_bad(y, 0, want, ny, 1e-6, 1e-5, &worst); /* fp32 sum of 15 values */
    tap_ok(rc == FP_OK && bad == 0, "global avgpool forward matches naive (max err %.2e)", worst);
    /* Backward vs FD (linear: h = 0.25 exact but for rounding), |err| <= 1e-5 + 1e-4 |fd|. */
    float *r = rand_array(ny, 1.0f, 0.0f), *dx = filled(nx, -0.5f);
    double *fd = malloc(nx * sizeof(double));
    rc = fp_avgpool_global_backward(dx, r, xd);
    for (size_t i = 0; i < nx; i++) {
        float v = x[i];
        x[i] = v + 0.25f;
        fp_avgpool_global_forward(y, x, xd);
        double lp = dot(y, r, ny);
        x[i] = v - 0.25f;
        fp_avgpool_global_forward(y, x, xd);
        double lm = dot(y, r, ny);
        x[i] = v;
        fd[i] = (lp - lm) / 0.5;
    }
    bad = tu_count_bad(dx, -0.5f, fd, nx, 1e-5, 1e-4, &worst);
    tap_ok(rc == FP_OK && bad == 0, "global avgpool backward accumulates the FD gradient (max err %.2e)", worst);
    fp_dims neg = {-1, 3, 5, 4};
    tu_check_einval(fp_avgpool_global_forward(y, x, neg), "avgpool with n < 0");
    tu_check_einval(fp_avgpool_global_backward(NULL, r, xd), "avgpool backward with NULL dx");
    free(x); free(y); free(want); free(r); free(dx); free(fd);
}

/* ---------------------------------------------------------------- elementwise */

static void test_elementwise(void)
{
    const size_t n = 37;
    float *x = rand_array(n, 1.0f, 0.0f), *y = malloc(n * sizeof(float)), *dx = filled(n, 1.0f);
    float *dy = rand_array(n, 1.0f, 0.0f);
    x[3] = NAN;
    x[4] = -0.0f;
    int rc = fp_relu_forward(y, x, n), bad = 0;
    for (size_t i = 0; i < n; i++)
        if (i != 3)
            bad += y[i] != (x[i] > 0 ? x[i] : 0.0f);
    tap_ok(rc == FP_OK && bad == 0 && isnan(y[3]), "relu forward: max(x, 0), NaN propagates");
    rc = fp_relu_backward(dx, dy, y, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) /* exact: dx = 1 + dy where y > 0, else 1 */
        bad += dx[i] != (y[i] > 0 ? 1.0f + dy[i] : 1.0f);
    tap_ok(rc == FP_OK && bad == 0, "relu backward accumulates dy where y > 0 (exact)");
    x[3] = 0.5f;
    memcpy(y, x, n * sizeof(float));
    fp_relu_forward(x, x, n);
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += x[i] != (y[i] > 0 ? y[i] : 0.0f);
    tap_ok(bad == 0, "relu forward in place");

    float *a = rand_array(n, 1.0f, 0.0f), *b = rand_array(n, 1.0f, 0.0f), *s = malloc(n * sizeof(float));
    rc = fp_add_forward(s, a, b, n);
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += s[i] != a[i] + b[i];
    fp_add_forward(a, a, b, n); /* in place into a */
    for (size_t i = 0; i < n; i++)
        bad += a[i] != s[i];
    tap_ok(rc == FP_OK && bad == 0, "add forward (also in place), exact");
    memcpy(s, b, n * sizeof(float));
    rc = fp_accumulate(s, a, n);
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += s[i] != b[i] + a[i];
    tap_ok(rc == FP_OK && bad == 0, "accumulate dst += src, exact");
    tap_ok(fp_relu_forward(NULL, NULL, 0) == FP_OK && fp_add_forward(NULL, NULL, NULL, 0) == FP_OK &&
               fp_accumulate(NULL, NULL, 0) == FP_OK && fp_relu_backward(NULL, NULL, NULL, 0) == FP_OK,
           "n = 0 is a no-op, NULL allowed");
    tu_check_einval(fp_relu_forward(y, NULL, n), "relu with NULL x");
    tu_check_einval(fp_relu_backward(dx, dy, NULL, n), "relu backward with NULL y");
    tu_check_einval(fp_add_forward(y, a, NULL, n), "add with NULL b");
    tu_check_einval(fp_accumulate(NULL, a, n), "accumulate with NULL dst");
    free(x); free(y); free(dx); free(dy); free(a); free(b); free(s);
}

/* ---------------------------------------------------------------- linear */

static double linear_objective(const float *x, const float *w, const float *b, const float *r, float *y, int n,
                               int in, int out)
{
    if (fp_linear_forward(y, x, n, in, out, w, b) != FP_OK)
        return NAN;
    return dot(y, r, (size_t)n * out);
}

static void test_linear(void)
{
    const int n = 3, in = 7, out = 5;
    float *x = rand_array((size_t)n * in, 1.0f, 0.0f), *w = rand_array((size_t)out * in, 1.0f, 0.0f);
    float *b = rand_array(out, 1.0f, 0.0f), *y = malloc((size_t)n * out * sizeof(float));
    double want[15], want_nb[15];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < out; j++) {
            double s = 0;
            for (int k = 0; k < in; k++)
                s += (double)x[i * in + k] * w[j * in + k];
            want_nb[i * out + j] = s;
            want[i * out + j] = s + b[j];
        }
    double worst;
    int rc = fp_linear_forward(y, x, n, in, out, w, b);
    int bad = tu_count_bad(y, 0, want, (size_t)n * out, 1e-6, 1e-5, &worst); /* 7-term fp32 dot */
    tap_ok(rc == FP_OK && bad == 0, "linear forward with bias matches naive (max err %.2e)", worst);
    rc = fp_linear_forward(y, x, n, in, out, w, NULL);
    bad = tu_count_bad(y, 0, want_nb, (size_t)n * out, 1e-6, 1e-5, &worst);
    tap_ok(rc == FP_OK && bad == 0, "linear forward without bias matches naive (max err %.2e)", worst);

    /* Backward vs FD; bilinear, so h = 0.25 is exact but for rounding: |err| <= 1e-4 + 1e-4 |fd|. */
    float *r = rand_array((size_t)n * out, 1.0f, 0.0f);
    float *dx = filled((size_t)n * in, 0.5f), *dw = filled((size_t)out * in, 0.5f), *db = filled(out, 0.5f);
    rc = fp_linear_backward(dx, dw, db, r, x, n, in, out, w);
    double fx[21], fw[35], fb[5];
    struct { float *p; double *f; int cnt; } params[3] = {{x, fx, n * in}, {w, fw, out * in}, {b, fb, out}};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < params[t].cnt; i++) {
            float v = params[t].p[i];
            params[t].p[i] = v + 0.25f;
            double lp = linear_objective(x, w, b, r, y, n, in, out);
            params[t].p[i] = v - 0.25f;
            double lm = linear_objective(x, w, b, r, y, n, in, out);
            params[t].p[i] = v;
            params[t].f[i] = (lp - lm) / 0.5;
        }
    double w1, w2, w3;
    int b1 = tu_count_bad(dx, 0.5f, fx, (size_t)n * in, 1e-4, 1e-4, &w1);
    int b2 = tu_count_bad(dw, 0.5f, fw, (size_t)out * in, 1e-4, 1e-4, &w2);
    int b3 = tu_count_bad(db, 0.5f, fb, out, 1e-4, 1e-4, &w3);
    tap_ok(rc == FP_OK && b1 == 0, "linear backward dx accumulates the FD gradient (max err %.2e)", w1);
    tap_ok(rc == FP_OK && b2 == 0, "linear backward dw accumulates the FD gradient (max err %.2e)", w2);
    tap_ok(rc == FP_OK && b3 == 0, "linear backward db accumulates the FD gradient (max err %.2e)", w3);
    tap_ok(fp_linear_backward(NULL, NULL, db, r, NULL, n, in, out, NULL) == FP_OK, "linear backward: db only");
    tu_check_einval(fp_linear_forward(y, x, 0, in, out, w, b), "linear with n = 0");
    tu_check_einval(fp_linear_forward(y, x, n, in, -1, w, b), "linear with out < 0");
    tu_check_einval(fp_linear_forward(y, x, n, in, out, NULL, b), "linear with NULL w");
    tu_check_einval(fp_linear_backward(dx, dw, db, r, x, n, in, out, NULL), "linear backward dx with NULL w");
    free(x); free(w); free(b); free(y); free(r); free(dx); free(dw); free(db);
}

/* ---------------------------------------------------------------- softmax cross-entropy */

static double naive_xent(const float *l, const int *lab, int n, int C)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        double mx = l[i * C];
        for (int j = 1; j < C; j++)
            mx = fmax(mx, l[i * C + j]);
        double s = 0;
        for (int j = 0; j < C; j++)
            s += exp((double)l[i * C + j] - mx);
        total += mx + log(s) - l[i * C + lab[i]];
    }
    return total / n;
}

static void test_xent(void)
{
    enum { N = 4, C = 7 };
    float *l = rand_array(N * C, 3.0f, 0.0f), dl[N * C], loss;
    int lab[N] = {0, 3, 6, 2}, c1 = -1, c5 = -1;
    int rc = fp_softmax_xent(&loss, dl, &c1, &c5, l, lab, N, C);
    double want = naive_xent(l, lab, N, C);
    tap_ok(rc == FP_OK, "xent runs");
    tap_is_double(loss, want, 1e-6, 1e-6, "xent loss matches naive double (abs 1e-6 + rel 1e-6)");
    /* dlogits vs FD of the returned fp32 loss, h = 1e-2: |err| <= 2e-4 + 1e-2 |fd|. */
    double fd[N * C];
    for (int i = 0; i < N * C; i++) {
        float v = l[i], lp, lm;
        l[i] = v + 1e-2f;
        fp_softmax_xent(&lp, NULL, NULL, NULL, l, lab, N, C);
        l[i] = v - 1e-2f;
        fp_softmax_xent(&lm, NULL, NULL, NULL, l, lab, N, C);
        l[i] = v;
        fd[i] = ((double)lp - lm) / 2e-2;
    }
    double worst;
    int bad = tu_count_bad(dl, 0, fd, N * C, 2e-4, 1e-2, &worst);
    tap_ok(bad == 0, "xent dlogits = FD gradient of the mean loss (max err %.2e)", worst);

    /* Top-1 / top-5 against a direct count. */
    int w1 = 0, w5 = 0;
    for (int i = 0; i < N; i++) {
        int g = 0;
        for (int j = 0; j < C; j++)
            g += l[i * C + j] > l[i * C + lab[i]];
        w1 += g < 1;
        w5 += g < 5;
    }
    tap_ok(c1 == w1 && c5 == w5, "xent top-1 %d / top-5 %d counts match (%d / %d)", c1, c5, w1, w5);
    /* Constructed: row 0 label is the max (top-1), row 1 label is 3rd (top-5 only), row 2 label is
     * last of 7 (neither), row 3 ties with the max (counts as top-1). */
    float t[N * C] = {9, 1, 2, 3, 4, 5, 6,   1, 2, 3, 7, 8, 9, 0,   7, 6, 5, 4, 3, 2, 1,   1, 1, 5, 0, 0, 0, 5};
    int tl[N] = {0, 3, 6, 2};
    rc = fp_softmax_xent(&loss, NULL, &c1, &c5, t, tl, N, C);
    tap_ok(rc == FP_OK && c1 == 2 && c5 == 3, "xent constructed top-1 = 2, top-5 = 3 (got %d, %d)", c1, c5);

    /* Non-finite logits (issue 21): a row whose loss is not finite is never a hit. Row 0: the label's
     * logit is the largest but another is NaN; row 1: all -inf; row 2: a +inf label logit; row 3: the
     * label's logit the largest beside a -inf (finite loss: a hit for top-1 and top-5). */
    float nf[N * C] = {9, 1, 2, NAN, 4, 5, 6,   0, 0, 0, 0, 0, 0, 0,   1, 2, INFINITY, 3, 4, 5, 6,
                       5, 1, 2, 3, -INFINITY, 0, 0};
    for (int j = 0; j < C; j++)
        nf[1 * C + j] = -INFINITY;
    int nl[N] = {0, 2, 2, 0};
    rc = fp_softmax_xent(&loss, NULL, &c1, &c5, nf, nl, N, C);
    tap_ok(rc == FP_OK && c1 == 1 && c5 == 1 && !isfinite(loss),
           "xent with NaN / inf logits: only the finite row is a hit, top-1 = 1, top-5 = 1 (got %d, %d), loss %g", c1,
           c5, loss);

    /* Logits of +-1000: no overflow, matches the naive (stable) double loss; rows of dlogits sum to 0. */
    float big[N * C];
    for (int i = 0; i < N * C; i++)
        big[i] = (i % 3 == 0 ? 1000.0f : -1000.0f) + urand();
    rc = fp_softmax_xent(&loss, dl, NULL, NULL, big, lab, N, C);
    want = naive_xent(big, lab, N, C);
    int finite = 1;
    double rowsum = 0;
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int j = 0; j < C; j++) {
            finite &= isfinite(dl[i * C + j]);
            s += dl[i * C + j];
        }
        rowsum = fmax(rowsum, fabs(s));
    }
    tap_ok(rc == FP_OK && isfinite(loss) && finite, "xent with logits +-1000 stays finite");
    tap_is_double(loss, want, 1e-4, 1e-6, "xent +-1000 loss matches naive double (abs 1e-4: logits ~1e3 in fp32)");
    tap_ok(rowsum < 1e-6, "xent +-1000 dlogits rows sum to 0 (max |sum| %.2e < 1e-6)", rowsum);

    int badlab[N] = {0, 7, 1, 1};
    tu_check_einval(fp_softmax_xent(&loss, dl, NULL, NULL, l, badlab, N, C), "xent with label = classes");
    badlab[1] = -1;
    tu_check_einval(fp_softmax_xent(&loss, dl, NULL, NULL, l, badlab, N, C), "xent with label < 0");
    tu_check_einval(fp_softmax_xent(&loss, dl, NULL, NULL, l, lab, 0, C), "xent with n = 0");
    tu_check_einval(fp_softmax_xent(NULL, dl, NULL, NULL, l, lab, N, C), "xent with NULL loss");
    free(l);
}

int main(void)
{
    tap_plan(13 + 12 + 4 + 10 + 11 + 13);
    test_batchnorm();
    test_maxpool();
    test_avgpool();
    test_elementwise();
    test_linear();
    test_xent();
    return tap_done();
}
