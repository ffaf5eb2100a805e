/* test_layers_conv.c — the CPU conv kernels (trainer/cpu/conv.c): forward against a naive direct
 * 7-loop convolution in double for every conv shape ResNet needs (odd sizes, batch 1 and >1, tiny and
 * chunked im2col), both backwards against central finite differences, and bad dims -> FP_EINVAL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/layers.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float *rand_array(size_t n) { return tu_rand_array(n, &rng_state); }   /* uniform in [-1, 1) */
static size_t dims_count(fp_dims d) { return (size_t)d.n * d.h * d.w * d.c; }

/* Direct convolution in double; also returns per output the sum of |terms| (for the tolerance). */
static void naive_conv(double *y, double *yabs, const float *x, fp_dims xd, const float *w, const fp_conv_params *p,
                       fp_dims yd)
{
    for (int n = 0; n < yd.n; n++)
        for (int oy = 0; oy < yd.h; oy++)
            for (int ox = 0; ox < yd.w; ox++)
                for (int o = 0; o < p->cout; o++) {
                    double s = 0, sa = 0;
                    for (int ky = 0; ky < p->kh; ky++)
                        for (int kx = 0; kx < p->kw; kx++)
                            for (int i = 0; i < p->cin; i++) {
                                int iy = oy * p->stride - p->pad + ky, ix = ox * p->stride - p->pad + kx;
                                if (iy < 0 || iy >= xd.h || ix < 0 || ix >= xd.w)
                                    continue;
                                double t = (double)x[(((size_t)n * xd.h + iy) * xd.w + ix) * xd.c + i] *
                                           (double)w[(((size_t)o * p->kh + ky) * p->kw + kx) * p->cin + i];
                                s += t;
                                sa += fabs(t);
                            }
                    size_t at = (((size_t)n * yd.h + oy) * yd.w + ox) * yd.c + o;
                    y[at] = s;
                    yabs[at] = sa;
                }
}

typedef struct {
    const char *name;
    int n, h, w, cin, cout, k, stride, pad;
    size_t limit; /* workspace chunk limit (0 = default) */
} shape;

/* Forward vs naive: |got - want| <= 1e-6 + 1e-5 * sum|terms| per element (fp32 GEMM accumulation). */
static void check_forward(const shape *s, fp_workspace *ws)
{
    fp_dims xd = {s->n, s->h, s->w, s->cin};
    fp_conv_params p = {s->cin, s->cout, s->k, s->k, s->stride, s->pad};
    fp_dims yd = fp_conv_out_dims(xd, &p);
    size_t nx = dims_count(xd), ny = dims_count(yd), nw = (size_t)s->cout * s->k * s->k * s->cin;
    float *x = rand_array(nx), *w = rand_array(nw), *y = malloc(ny * sizeof(float));
    double *ref = malloc(ny * sizeof(double)), *rabs = malloc(ny * sizeof(double));
    for (size_t i = 0; i < ny; i++)
        y[i] = NAN;
    size_t save = ws->limit;
    ws->limit = s->limit;
    int rc = fp_conv_forward(y, x, xd, w, &p, ws);
    ws->limit = save;
    naive_conv(ref, rabs, x, xd, w, &p, yd);
    int bad = 0;
    double worst = 0;
    for (size_t i = 0; i < ny; i++) {
        double err = fabs((double)y[i] - ref[i]);
        if (!(err <= 1e-6 + 1e-5 * rabs[i]))
            bad++;
        if (err > worst || err != err)
            worst = err;
    }
    int want_h = (s->h + 2 * s->pad - s->k) / s->stride + 1, want_w = (s->w + 2 * s->pad - s->k) / s->stride + 1;
    tap_ok(rc == FP_OK && yd.n == s->n && yd.h == want_h && yd.w == want_w && yd.c == s->cout && bad == 0,
           "forward %s: n=%d %dx%dx%d -> %dx%dx%d matches naive (max err %.2e, %d bad)", s->name, s->n, s->h, s->w,
           s->cin, yd.h, yd.w, yd.c, worst, bad);
    free(x); free(w); free(y); free(ref); free(rabs);
}

/* L = sum(y .* r) in double, y from fp_conv_forward of the x and w the context points at. */
typedef struct {
    const float *x, *w, *r;
    fp_dims xd;
    const fp_conv_params *p;
    float *y;
    size_t ny;
    fp_workspace *ws;
} conv_objective;

static double objective(void *ctx)
{
    const conv_objective *o = ctx;
    if (fp_conv_forward(o->y, o->x, o->xd, o->w, o->p, o->ws) != FP_OK)
        return NAN;
    double L = 0;
    for (size_t i = 0; i < o->ny; i++)
        L += (double)o->y[i] * (double)o->r[i];
    return L;
}

/* Backward data and weights vs central differences of L. The conv is linear in x and in w, so the
 * central difference is exact but for fp32 rounding: h = 0.25, tolerance per element
 * |got - fd| <= 2e-4 + 1e-3 * |fd|. Gradients start at 0.5 to check that backward accumulates. */
static void check_backward(const shape *s, fp_workspace *ws)
{
    fp_dims xd = {s->n, s->h, s->w, s->cin};
    fp_conv_params p = {s->cin, s->cout, s->k, s->k, s->stride, s->pad};
    fp_dims yd = fp_conv_out_dims(xd, &p);
    size_t nx = dims_count(xd), ny = dims_count(yd), nw = (size_t)s->cout * s->k * s->k * s->cin;
    float *x = rand_array(nx), *w = rand_array(nw), *r = rand_array(ny), *y = malloc(ny * sizeof(float));
    float *dx = malloc(nx * sizeof(float)), *dw = malloc(nw * sizeof(float));
    double *fx = malloc(nx * sizeof(double)), *fw = malloc(nw * sizeof(double));
    const float base = 0.5f, h = 0.25f;
    for (size_t i = 0; i < nx; i++)
        dx[i] = base;
    for (size_t i = 0; i < nw; i++)
        dw[i] = base;
    size_t save = ws->limit;
    ws->limit = s->limit;
    int rc1 = fp_conv_backward_data(dx, r, xd, w, &p, ws);
    int rc2 = fp_conv_backward_weights(dw, r, x, xd, &p, ws);
    conv_objective o = {x, w, r, xd, &p, y, ny, ws};
    tu_central_diffs(fx, x, nx, h, objective, &o);
    tu_central_diffs(fw, w, nw, h, objective, &o);
    double wx, ww;
    int badx = tu_count_bad(dx, base, fx, nx, 2e-4, 1e-3, &wx), badw = tu_count_bad(dw, base, fw, nw, 2e-4, 1e-3, &ww);
    ws->limit = save;
    tap_ok(rc1 == FP_OK && badx == 0, "backward data %s: accumulates the FD gradient (max err %.2e, %d bad of %zu)",
           s->name, wx, badx, nx);
    tap_ok(rc2 == FP_OK && badw == 0,
           "backward weights %s: accumulates the FD gradient (max err %.2e, %d bad of %zu)", s->name, ww, badw, nw);
    free(x); free(w); free(r); free(y); free(dx); free(dw); free(fx); free(fw);
}

static void check_bad_dims(fp_workspace *ws)
{
    float buf[64] = {0};
    fp_dims xd = {1, 5, 5, 2};
    fp_conv_params p = {2, 2, 3, 3, 1, 1};
    fp_dims zero_n = {0, 5, 5, 2}, neg_c = {1, 5, 5, -2}, huge = {100000, 1000, 1000, 2};
    tu_check_einval(fp_conv_forward(buf, buf, zero_n, buf, &p, ws), "forward with n = 0");
    tu_check_einval(fp_conv_forward(buf, buf, neg_c, buf, &p, ws), "forward with c < 0");
    tu_check_einval(fp_conv_forward(NULL, buf, xd, buf, &p, ws), "forward with NULL y");
    tu_check_einval(fp_conv_forward(buf, buf, xd, NULL, &p, ws), "forward with NULL w");
    tu_check_einval(fp_conv_forward(buf, buf, xd, buf, NULL, ws), "forward with NULL params");
    tu_check_einval(fp_conv_backward_data(buf, NULL, xd, buf, &p, ws), "backward data with NULL dy");
    tu_check_einval(fp_conv_backward_weights(NULL, buf, buf, xd, &p, ws), "backward weights with NULL dw");
    tu_check_einval(fp_conv_forward(buf, buf, huge, buf, &p, ws), "forward with more than INT_MAX elements");
    fp_conv_params q = p;
    q.cin = 3;
    tu_check_einval(fp_conv_forward(buf, buf, xd, buf, &q, ws), "forward with cin != x channels");
    q = p; q.stride = 0;
    tu_check_einval(fp_conv_backward_data(buf, buf, xd, buf, &q, ws), "backward data with stride 0");
    q = p; q.pad = -1;
    tu_check_einval(fp_conv_backward_weights(buf, buf, buf, xd, &q, ws), "backward weights with pad < 0");
    q = p; q.cout = 0;
    tu_check_einval(fp_conv_forward(buf, buf, xd, buf, &q, ws), "forward with cout = 0");
    q = p; q.kh = q.kw = 7; q.pad = 0;
    tu_check_einval(fp_conv_forward(buf, buf, xd, buf, &q, ws), "7x7 kernel on a 5x5 input without padding");
    fp_dims od = fp_conv_out_dims(xd, &q);
    fp_error_clear();
    tap_ok(od.n == 0 && od.h == 0 && od.w == 0 && od.c == 0, "out dims of an invalid conv are all zero");
    q.pad = 1; /* 7 == 5 + 2*1: allowed, one output */
    od = fp_conv_out_dims(xd, &q);
    tap_ok(od.h == 1 && od.w == 1, "7x7 kernel on 5x5 with pad 1 fits exactly: 1x1 out");
}

int main(void)
{
    static const shape fwd[] = {
        {"conv1 7x7/2 p3 3->8 odd", 2, 13, 11, 3, 8, 7, 2, 3, 0},
        {"conv1 7x7/2 p3 3->4 64x64", 1, 64, 64, 3, 4, 7, 2, 3, 0},
        {"3x3/1 p1 7x7", 1, 7, 7, 5, 6, 3, 1, 1, 0},
        {"3x3/1 p1 7x7 batch 3", 3, 7, 7, 5, 6, 3, 1, 1, 0},
        {"3x3/1 p1 2x2 (layer4 at 64)", 2, 2, 2, 8, 4, 3, 1, 1, 0},
        {"3x3/1 p1 1x1", 2, 1, 1, 8, 4, 3, 1, 1, 0},
        {"3x3/2 p1 5x5", 2, 5, 5, 4, 5, 3, 2, 1, 0},
        {"3x3/2 p1 4x4", 1, 4, 4, 6, 3, 3, 2, 1, 0},
        {"3x3/2 p1 3x3", 2, 3, 3, 4, 4, 3, 2, 1, 0},
        {"1x1/1 3x3", 2, 3, 3, 6, 7, 1, 1, 0, 0},
        {"1x1/1 1x1 batch 1", 1, 1, 1, 16, 8, 1, 1, 0, 0},
        {"1x1/2 7x7 (downsample)", 2, 7, 7, 6, 4, 1, 2, 0, 0},
        {"1x1/2 2x2 (downsample)", 3, 2, 2, 6, 4, 1, 2, 0, 0},
        {"3x3/1 p1 chunked 7 floats (1 row)", 2, 5, 5, 3, 4, 3, 1, 1, 7},
        {"3x3/1 p1 chunked 5 rows", 2, 5, 5, 3, 4, 3, 1, 1, 5 * 27},
        {"1x1/2 chunked 3 rows", 2, 7, 7, 6, 4, 1, 2, 0, 3 * 6},
        {"3x3/1 p1 layer1 16x16 64->64", 2, 16, 16, 64, 64, 3, 1, 1, 0},
    };
    static const shape bwd[] = {
        {"conv1 7x7/2 p3 3->2 9x9", 2, 9, 9, 3, 2, 7, 2, 3, 0},
        {"3x3/1 p1 5x5", 2, 5, 5, 3, 2, 3, 1, 1, 0},
        {"3x3/2 p1 5x5", 1, 5, 5, 2, 3, 3, 2, 1, 0},
        {"3x3/1 p1 2x2", 2, 2, 2, 3, 2, 3, 1, 1, 0},
        {"1x1/1 3x3", 2, 3, 3, 4, 3, 1, 1, 0, 0},
        {"1x1/2 5x5", 2, 5, 5, 4, 3, 1, 2, 0, 0},
        {"3x3/2 p1 4x4 chunked 2 rows", 2, 4, 4, 2, 3, 3, 2, 1, 2 * 18},
    };
    const int nf = (int)(sizeof fwd / sizeof fwd[0]), nb = (int)(sizeof bwd / sizeof bwd[0]);
    tap_plan(nf + 2 * nb + 15 + 3);
    fp_workspace ws = {0};
    ws.threads = 1;
    for (int i = 0; i < nf; i++)
        check_forward(&fwd[i], &ws);
    for (int i = 0; i < nb; i++)
        check_backward(&bwd[i], &ws);
    check_bad_dims(&ws);

    /* ws == NULL: the kernels allocate for themselves and agree with the workspace path. */
    fp_dims xd = {2, 5, 5, 3};
    fp_conv_params p = {3, 4, 3, 3, 2, 1};
    fp_dims yd = fp_conv_out_dims(xd, &p);
    size_t nx = dims_count(xd), ny = dims_count(yd), nw = 4 * 9 * 3;
    float *x = rand_array(nx), *w = rand_array(nw), *y1 = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
    int rc1 = fp_conv_forward(y1, x, xd, w, &p, &ws), rc2 = fp_conv_forward(y2, x, xd, w, &p, NULL);
    tap_ok(rc1 == FP_OK && rc2 == FP_OK && memcmp(y1, y2, ny * sizeof(float)) == 0,
           "forward without a workspace equals forward with one");
    tap_ok(ws.buf != NULL && ws.cap >= (size_t)yd.n * yd.h * yd.w * 27, "workspace grew to hold the columns");
    fp_workspace_free(&ws);
    tap_ok(ws.buf == NULL && ws.cap == 0, "workspace free zeroes it");
    free(x); free(w); free(y1); free(y2);
    return tap_done();
}
