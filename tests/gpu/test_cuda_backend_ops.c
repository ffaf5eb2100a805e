/* test_cuda_backend_ops.c — each op of the CUDA backend against the CPU backend on the same random
 * tensors: the element-wise and pooling ops (casts, round, add, accumulate, relu, max / average pool,
 * unscale + check) bit for bit, including backend.h's 16-bit accumulate rule; softmax cross-entropy,
 * conv, linear and batchnorm within the tolerances stated next to each check (tf32: per element, from TF32's
 * 10-bit mantissa, as the GPU's TF32 conversion and the CPU's rounding may differ in the last bit). Skips with a TAP reason
 * when built without CUDA or when no GPU is usable (tests/gpu/test_cuda_backend.c covers whole models). */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "error.h"
#include "formats.h"
#include "trainer/backend_cuda.h"

static const fp_backend_ops *C, *G;
static fp_backend *cb, *gb;
static uint32_t rng = 0x1234567u;
static float urand(void) { return tu_uniform32_pm1(&rng); }

/* The same tensor on both backends: h (host, CPU backend) and d (device). */
typedef struct {
    fp_tensor h, d;
    size_t bytes;
} pair;

static pair mk(fp_dtype dt, fp_dims d, float scale)
{
    pair p = {fp_tensor_of(NULL, dt, d), fp_tensor_of(NULL, dt, d), 0};
    size_t n = fp_tensor_count(&p.h);
    p.bytes = n * (size_t)fp_dtype_bytes(dt);
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = scale * urand();
    C->alloc(cb, &p.h.p, p.bytes);
    if (dt == FP_DT_F32)
        memcpy(p.h.p, f, p.bytes);
    else
        fp_narrow_array(p.h.p, f, n, dt);
    free(f);
    if (G->alloc(gb, &p.d.p, p.bytes) || G->upload(gb, p.d.p, p.h.p, p.bytes))
        p.d.p = NULL;
    return p;
}

static void drop(pair *p)
{
    C->free(cb, p->h.p, p->bytes);
    G->free(gb, p->d.p, p->bytes);
}

/* The device copy as fp32 values (and its raw bytes in raw, when given). */
static float *fetch32(const pair *p, void *raw)
{
    size_t n = fp_tensor_count(&p->h);
    void *b = raw ? raw : malloc(p->bytes);
    float *f = malloc(n * sizeof(float));
    if (G->download(gb, b, p->d.p, p->bytes) || G->sync(gb)) {
        memset(f, 0xff, n * sizeof(float));
    } else if (p->h.dt == FP_DT_F32)
        memcpy(f, b, p->bytes);
    else
        fp_widen_array(f, b, n, p->h.dt);
    if (!raw)
        free(b);
    return f;
}

static int bits_equal(const pair *p)
{
    void *raw = malloc(p->bytes);
    free(fetch32(p, raw));
    int eq = memcmp(raw, p->h.p, p->bytes) == 0;
    free(raw);
    return eq;
}

/* max |device - host| / max |host| over the tensor (fp32 values). */
static double rel_max(const pair *p)
{
    size_t n = fp_tensor_count(&p->h);
    float *g = fetch32(p, NULL), *h = malloc(n * sizeof(float));
    if (p->h.dt == FP_DT_F32)
        memcpy(h, p->h.p, n * sizeof(float));
    else
        fp_widen_array(h, p->h.p, n, p->h.dt);
    double a = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        a = fmax(a, fabs(h[i]));
        d = fmax(d, fabs((double)g[i] - h[i]));
    }
    free(g);
    free(h);
    return a > 0 ? d / a : d;
}

static const char *dn(fp_dtype d) { return fp_dtype_name(d); }
static const fp_dtype fmts[3] = {FP_DT_F32, FP_DT_F16, FP_DT_BF16};

static void elementwise(void)
{
    fp_dims d = {2, 5, 7, 33};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {   /* cast: every pair of formats */
            pair s = mk(fmts[a], d, 300.0f), t = mk(fmts[b], d, 1.0f);
            int rc = C->cast(cb, t.h, s.h) | G->cast(gb, t.d, s.d);
            tap_ok(!rc && bits_equal(&t), "cast %s -> %s: bit for bit", dn(fmts[a]), dn(fmts[b]));
            drop(&s);
            drop(&t);
        }
    const fp_dtype to[3] = {FP_DT_TF32, FP_DT_F16, FP_DT_BF16};
    for (int k = 0; k < 3; k++) {
        pair s = mk(FP_DT_F32, d, 1e5f), t = mk(FP_DT_F32, d, 1.0f);
        int rc = C->round(cb, t.h, s.h, to[k]) | G->round(gb, t.d, s.d, to[k]);
        tap_ok(!rc && bits_equal(&t), "round to %s in fp32 containers: bit for bit", dn(to[k]));
        drop(&s);
        drop(&t);
    }
    for (int k = 0; k < 3; k++) {   /* add (y, a, b of mixed formats) and accumulate */
        pair y = mk(fmts[k], d, 1.0f), a = mk(fmts[(k + 1) % 3], d, 4.0f), b = mk(fmts[(k + 2) % 3], d, 4.0f);
        int rc = C->add(cb, y.h, a.h, b.h) | G->add(gb, y.d, a.d, b.d);
        tap_ok(!rc && bits_equal(&y), "add into %s (a %s, b %s): bit for bit", dn(fmts[k]), dn(a.h.dt), dn(b.h.dt));
        rc = C->accumulate(cb, y.h, a.h) | G->accumulate(gb, y.d, a.d);
        tap_ok(!rc && bits_equal(&y), "accumulate %s into %s: bit for bit", dn(a.h.dt), dn(fmts[k]));
        drop(&y);
        drop(&a);
        drop(&b);
    }
    for (int k = 0; k < 3; k++)
        for (int acc = 0; acc < 2; acc++) {   /* relu forward, backward with both accumulate modes */
            pair x = mk(fmts[k], d, 1.0f), y = mk(fmts[k], d, 1.0f), dy = mk(fmts[k], d, 1.0f), dx = mk(fmts[k], d, 1.0f);
            int rc = C->relu_forward(cb, y.h, x.h) | G->relu_forward(gb, y.d, x.d);
            rc |= C->relu_backward(cb, dx.h, dy.h, y.h, acc) | G->relu_backward(gb, dx.d, dy.d, y.d, acc);
            tap_ok(!rc && bits_equal(&y) && bits_equal(&dx), "relu %s forward and backward (accumulate %d): bit for bit",
                   dn(fmts[k]), acc);
            drop(&x);
            drop(&y);
            drop(&dy);
            drop(&dx);
        }
}

static void pools(void)
{
    fp_dims xd = {2, 9, 9, 17};
    fp_pool_params pp = {3, 2, 1};
    fp_dims yd = fp_pool_out_dims(xd, &pp);
    for (int k = 0; k < 3; k++)
        for (int acc = 0; acc < 2; acc++) {
            pair x = mk(fmts[k], xd, 1.0f), y = mk(fmts[k], yd, 1.0f), dy = mk(fmts[k], yd, 1.0f), dx = mk(fmts[k], xd, 1.0f);
            size_t ny = fp_tensor_count(&y.h);
            int *ah = malloc(ny * sizeof(int)), *ag = malloc(ny * sizeof(int)), *ad = NULL;
            int rc = G->alloc(gb, (void **)&ad, ny * sizeof(int));
            rc |= C->maxpool_forward(cb, y.h, ah, x.h, &pp) | G->maxpool_forward(gb, y.d, ad, x.d, &pp);
            rc |= G->download(gb, ag, ad, ny * sizeof(int)) | G->sync(gb);
            tap_ok(!rc && bits_equal(&y) && memcmp(ah, ag, ny * sizeof(int)) == 0,
                   "maxpool 3x3/2 pad 1 %s forward: values and argmax equal", dn(fmts[k]));
            rc = C->maxpool_backward(cb, dx.h, dy.h, ah, &pp, acc) | G->maxpool_backward(gb, dx.d, dy.d, ad, &pp, acc);
            tap_ok(!rc && bits_equal(&dx), "maxpool %s backward (accumulate %d): bit for bit", dn(fmts[k]), acc);
            G->free(gb, ad, ny * sizeof(int));
            free(ah);
            free(ag);
            drop(&y);
            drop(&dy);
            fp_dims gd = {xd.n, 1, 1, xd.c};
            pair g = mk(fmts[k], gd, 1.0f), dg = mk(fmts[k], gd, 1.0f);
            rc = C->avgpool_forward(cb, g.h, x.h) | G->avgpool_forward(gb, g.d, x.d);
            rc |= C->avgpool_backward(cb, dx.h, dg.h, acc) | G->avgpool_backward(gb, dx.d, dg.d, acc);
            tap_ok(!rc && bits_equal(&g) && bits_equal(&dx), "global avgpool %s forward and backward (accumulate %d): bit for bit",
                   dn(fmts[k]), acc);
            drop(&g);
            drop(&dg);
            drop(&x);
            drop(&dx);
        }
}

static void loss_and_scaler(void)
{
    enum { NB = 16, K = 10 };
    fp_dims ld = {NB, 1, 1, K};
    pair l = mk(FP_DT_F32, ld, 5.0f), dl = mk(FP_DT_F32, ld, 1.0f);
    int lab[NB], *dlab = NULL;
    for (int i = 0; i < NB; i++)
        lab[i] = (i * 3) % K;
    float lc = 0, lg = 0;
    int c1 = 0, g1 = 0, c5 = 0, g5 = 0;
    int rc = G->alloc(gb, (void **)&dlab, sizeof lab) | G->upload(gb, dlab, lab, sizeof lab);
    rc |= C->softmax_xent(cb, &lc, dl.h, &c1, &c5, l.h, lab, 1024.0f);
    rc |= G->softmax_xent(gb, &lg, dl.d, &g1, &g5, l.d, dlab, 1024.0f);
    /* sums of exps in another order: loss within 1e-6 relative, dlogits within 1e-6 of the largest */
    tap_ok(!rc && fabs((double)lg - lc) <= 1e-6 * fabs(lc) && c1 == g1 && c5 == g5,
           "softmax_xent: loss %.7g vs %.7g, top-1 %d / %d, top-5 %d / %d", lc, lg, c1, g1, c5, g5);
    tap_ok(!rc && rel_max(&dl) <= 1e-6, "softmax_xent: dlogits x 1024 within 1e-6 (%.3g)", rel_max(&dl));
    G->free(gb, dlab, sizeof lab);
    float *hp = l.h.p;
    hp[5] = INFINITY;   /* unscale + check: a non-finite value is found, everything scaled bit for bit */
    rc = G->upload(gb, l.d.p, l.h.p, l.bytes);
    int fc = 0, fg = 0;
    rc |= C->unscale_check(cb, &fc, l.h, 0.125f) | G->unscale_check(gb, &fg, l.d, 0.125f);
    tap_ok(!rc && fc == 1 && fg == 1 && bits_equal(&l), "unscale_check: Inf found (cpu %d, cuda %d), values equal", fc, fg);
    drop(&l);
    drop(&dl);
}

/* conv, linear, batchnorm: tolerance per compute format (fp32 1e-5 of the largest value: sums in
 * another order; fp16 / bf16 outputs 4 ulps of the format, as one ulp flips where fp32 sums straddle a
 * rounding boundary and weight gradients sum many such terms). */
static double tol_of(fp_dtype c) { return c == FP_DT_F32 ? 1e-5 : c == FP_DT_F16 ? 4 * 0x1p-11 : 4 * 0x1p-8; }

/* tf32 compute, per element. The CPU backend rounds the conv / linear operands to TF32 to nearest even; the
 * GPU hands them unrounded to cuDNN / cuBLASLt, whose TF32 math converts them itself (Hopper truncates the low
 * 13 bits, a kernel's cvt.rna rounds ties away: trainer/cuda/cudnn_ops.h). So an operand a may differ by one
 * TF32 ulp, at most 2^-10 |a|, and a product a * b by at most (2 * 2^-10 + 2^-20) |a||b|; either side's fp32
 * sum of K products adds at most K * 2^-24 of sum |a||b|. Hence |gpu - cpu| <= TF32_TOL * mag per element,
 * mag = sum |a||b| (plus |old value| where the op accumulates), TF32_TOL = 2.5 * 2^-10: the extra half ulp
 * covers 2^-20 + 2 K 2^-24 up to K = 2000 (the linear layer below sums K = 1936). mag is the CPU op in fp32 on
 * the absolute values. */
#define TF32_TOL (2.5 * (double)TF32_EPSILON)

/* The absolute values of p's host tensor, as an fp32 host tensor (free its p). */
static fp_tensor absolute(const pair *p)
{
    size_t n = fp_tensor_count(&p->h);
    float *f = malloc(n * sizeof(float));
    if (p->h.dt == FP_DT_F32)
        memcpy(f, p->h.p, n * sizeof(float));
    else
        fp_widen_array(f, p->h.p, n, p->h.dt);
    for (size_t i = 0; i < n; i++)
        f[i] = fabsf(f[i]);
    return fp_tensor_of(f, FP_DT_F32, p->h.d);
}

/* max over the tensor of |device - host| / (TF32_TOL * mag): <= 1 passes (Inf for a NaN or an error where mag
 * is 0). */
static double tf32_ratio(const pair *p, const fp_tensor *mag)
{
    size_t n = fp_tensor_count(&p->h);
    float *g = fetch32(p, NULL), *h = malloc(n * sizeof(float)), *m = mag->p;
    if (p->h.dt == FP_DT_F32)
        memcpy(h, p->h.p, n * sizeof(float));
    else
        fp_widen_array(h, p->h.p, n, p->h.dt);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)g[i] - h[i]), b = TF32_TOL * m[i];
        if (isnan(d) || (d > 0 && !(b > 0)))
            worst = INFINITY;
        else if (d > 0)
            worst = fmax(worst, d / b);
    }
    free(g);
    free(h);
    return worst;
}

/* Does the device's output agree with the host's under compute c? mag: sum |a||b| per element (tf32).
 * what gets the figure, for the check's description. */
static int agrees(const pair *out, const fp_tensor *mag, fp_dtype c, char *what, size_t cap)
{
    if (c == FP_DT_TF32) {
        double r = tf32_ratio(out, mag);
        snprintf(what, cap, "max |err| / (2.5 * 2^-10 * sum |a||b|) %.3g <= 1", r);
        return r <= 1;
    }
    double e = rel_max(out);
    snprintf(what, cap, "max |err| / max |want| %.3g <= %.3g", e, tol_of(c));
    return e <= tol_of(c);
}

static void layers(void)
{
    const fp_dtype comp[4] = {FP_DT_F32, FP_DT_TF32, FP_DT_F16, FP_DT_BF16};
    fp_conv_params cp = {16, 24, 3, 3, 2, 1};
    fp_dims xd = {4, 11, 11, 16}, wd = {24, 3, 3, 16};
    fp_dims yd = fp_conv_out_dims(xd, &cp);
    char f1[96], f2[96], f3[96];
    for (int k = 0; k < 4; k++) {
        fp_dtype c = comp[k], st = k >= 2 ? c : FP_DT_F32;   /* storage: the activation format of the policy */
        pair x = mk(st, xd, 1.0f), w = mk(FP_DT_F32, wd, 0.2f), y = mk(st, yd, 1.0f), dy = mk(st, yd, 1.0f);
        pair dx = mk(st, xd, 1.0f), dw = mk(FP_DT_F32, wd, 1.0f);
        int rc = C->round(cb, w.h, w.h, c) | G->upload(gb, w.d.p, w.h.p, w.bytes);   /* the model's weight copy */
        /* sum |a||b| of each output (tf32's bound), before the ops write over what they accumulate onto */
        fp_tensor ax = absolute(&x), aw = absolute(&w), ady = absolute(&dy), my = absolute(&y), mdx = absolute(&dx);
        fp_tensor mdx0 = absolute(&dx), mdw = absolute(&dw);
        rc |= C->conv_forward(cb, my, ax, aw, &cp, FP_DT_F32) | C->conv_backward_data(cb, mdx, ady, aw, &cp, FP_DT_F32, 1);
        rc |= C->conv_backward_data(cb, mdx0, ady, aw, &cp, FP_DT_F32, 0) |
              C->conv_backward_weights(cb, mdw, ady, ax, &cp, FP_DT_F32);
        rc |= C->conv_forward(cb, y.h, x.h, w.h, &cp, c) | G->conv_forward(gb, y.d, x.d, w.d, &cp, c);
        tap_ok(!rc && agrees(&y, &my, c, f1, sizeof f1), "conv 3x3/2 forward, compute %s: %s", dn(c), f1);
        rc = C->conv_backward_data(cb, dx.h, dy.h, w.h, &cp, c, 1) | G->conv_backward_data(gb, dx.d, dy.d, w.d, &cp, c, 1);
        tap_ok(!rc && agrees(&dx, &mdx, c, f1, sizeof f1), "conv backward data (accumulate), compute %s: %s", dn(c), f1);
        memset(dx.h.p, 0xFF, dx.bytes);   /* NaN in every format: an overwrite (cuDNN beta 0) must not read dx */
        rc = G->upload(gb, dx.d.p, dx.h.p, dx.bytes);
        rc |= C->conv_backward_data(cb, dx.h, dy.h, w.h, &cp, c, 0) | G->conv_backward_data(gb, dx.d, dy.d, w.d, &cp, c, 0);
        tap_ok(!rc && agrees(&dx, &mdx0, c, f1, sizeof f1),
               "conv backward data (overwrite, dx full of NaN before), compute %s: %s", dn(c), f1);
        rc = C->conv_backward_weights(cb, dw.h, dy.h, x.h, &cp, c) | G->conv_backward_weights(gb, dw.d, dy.d, x.d, &cp, c);
        tap_ok(!rc && agrees(&dw, &mdw, c, f1, sizeof f1), "conv backward weights (accumulates), compute %s: %s", dn(c),
               f1);
        free(aw.p);
        free(ady.p);
        free(my.p);
        free(mdx.p);
        free(mdx0.p);
        free(mdw.p);
        drop(&w);
        drop(&y);
        drop(&dy);
        drop(&dw);
        /* linear on x flattened: 16*11*11 -> 10 */
        fp_dims lw = {10, 1, 1, 16 * 11 * 11}, lb = {1, 1, 1, 10}, ly = {4, 1, 1, 10};
        pair W = mk(FP_DT_F32, lw, 0.05f), B = mk(FP_DT_F32, lb, 0.5f), Y = mk(st, ly, 1.0f), DY = mk(st, ly, 1.0f);
        pair DW = mk(FP_DT_F32, lw, 1.0f), DB = mk(FP_DT_F32, lb, 1.0f);
        rc = C->round(cb, W.h, W.h, c) | C->round(cb, B.h, B.h, c) | G->upload(gb, W.d.p, W.h.p, W.bytes) |
             G->upload(gb, B.d.p, B.h.p, B.bytes);
        fp_tensor aW = absolute(&W), aB = absolute(&B), aDY = absolute(&DY), mY = absolute(&Y), mDX = absolute(&dx);
        fp_tensor mDW = absolute(&DW), mDB = absolute(&DB);
        rc |= C->linear_forward(cb, mY, ax, aW, aB, FP_DT_F32) | C->linear_backward_data(cb, mDX, aDY, aW, FP_DT_F32, 0);
        rc |= C->linear_backward_weights(cb, mDW, mDB, aDY, ax, aW, FP_DT_F32);
        rc |= C->linear_forward(cb, Y.h, x.h, W.h, B.h, c) | G->linear_forward(gb, Y.d, x.d, W.d, B.d, c);
        tap_ok(!rc && agrees(&Y, &mY, c, f1, sizeof f1), "linear forward with bias, compute %s: %s", dn(c), f1);
        rc = C->linear_backward_data(cb, dx.h, DY.h, W.h, c, 0) | G->linear_backward_data(gb, dx.d, DY.d, W.d, c, 0);
        rc |= C->linear_backward_weights(cb, DW.h, DB.h, DY.h, x.h, W.h, c) |
              G->linear_backward_weights(gb, DW.d, DB.d, DY.d, x.d, W.d, c);
        int ok = agrees(&dx, &mDX, c, f1, sizeof f1), ok2 = agrees(&DW, &mDW, c, f2, sizeof f2),
            ok3 = agrees(&DB, &mDB, c, f3, sizeof f3);
        tap_ok(!rc && ok && ok2 && ok3, "linear backward (dx overwritten, dw / db accumulate), compute %s: dx %s; dw %s; db %s",
               dn(c), f1, f2, f3);
        free(ax.p);
        free(aW.p);
        free(aB.p);
        free(aDY.p);
        free(mY.p);
        free(mDX.p);
        free(mDW.p);
        free(mDB.p);
        drop(&W);
        drop(&B);
        drop(&Y);
        drop(&DY);
        drop(&DW);
        drop(&DB);
        /* batchnorm on x (fp32 statistics; y in x's format): train forward, backward, eval forward */
        fp_dims vd = {1, 1, 1, 16}, sd = {1, 1, 1, 32};
        pair by = mk(st, xd, 1.0f), g = mk(FP_DT_F32, vd, 1.0f), be = mk(FP_DT_F32, vd, 1.0f), rm = mk(FP_DT_F32, vd, 0.1f);
        pair rv = mk(FP_DT_F32, vd, 0.1f), sv = mk(FP_DT_F32, sd, 1.0f), bdy = mk(st, xd, 1.0f), dg = mk(FP_DT_F32, vd, 1.0f);
        pair db = mk(FP_DT_F32, vd, 1.0f);
        float *rvh = rv.h.p;
        for (int i = 0; i < 16; i++)
            rvh[i] = 1.0f + fabsf(rvh[i]);
        fp_bn_params bp = {0.1f, 1e-5f};
        rc = G->upload(gb, rv.d.p, rv.h.p, rv.bytes);
        rc |= C->bn_forward_train(cb, by.h, sv.h, rm.h, rv.h, x.h, g.h, be.h, &bp) |
              G->bn_forward_train(gb, by.d, sv.d, rm.d, rv.d, x.d, g.d, be.d, &bp);
        /* batch statistics in fp32 / double: 1e-5 relative for fp32 storage, the format's tolerance for y */
        double bt = st == FP_DT_F32 ? 1e-5 : tol_of(st);
        tap_ok(!rc && rel_max(&by) <= bt && rel_max(&rm) <= 1e-5 && rel_max(&rv) <= 1e-5 && rel_max(&sv) <= 1e-4,
               "batchnorm %s train forward: y %.3g, running mean %.3g, var %.3g, saved %.3g", dn(st), rel_max(&by),
               rel_max(&rm), rel_max(&rv), rel_max(&sv));
        rc = C->bn_backward(cb, dx.h, dg.h, db.h, bdy.h, x.h, g.h, sv.h, 1) |
             G->bn_backward(gb, dx.d, dg.d, db.d, bdy.d, x.d, g.d, sv.d, 1);
        tap_ok(!rc && rel_max(&dx) <= 10 * bt && rel_max(&dg) <= 1e-4 && rel_max(&db) <= 1e-4,
               "batchnorm %s backward (all accumulate): dx %.3g (<= %.3g), dgamma %.3g, dbeta %.3g", dn(st), rel_max(&dx),
               10 * bt, rel_max(&dg), rel_max(&db));
        rc = C->bn_forward_eval(cb, by.h, x.h, g.h, be.h, rm.h, rv.h, &bp) |
             G->bn_forward_eval(gb, by.d, x.d, g.d, be.d, rm.d, rv.d, &bp);
        tap_ok(!rc && rel_max(&by) <= bt, "batchnorm %s eval forward: %.3g", dn(st), rel_max(&by));
        drop(&by);
        drop(&g);
        drop(&be);
        drop(&rm);
        drop(&rv);
        drop(&sv);
        drop(&bdy);
        drop(&dg);
        drop(&db);
        drop(&x);
        drop(&dx);
    }
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    if (gtu_backends_or_fail(&C, &cb, &G, &gb, (size_t)1 << 30, "ops test"))
        return tap_done();
    tap_plan(9 + 3 + 6 + 6 + 18 + 3 + 4 * 9);   /* elementwise 24, pools 18, loss 3, layers 9 per compute */
    elementwise();
    pools();
    loss_and_scaler();
    layers();
    G->destroy(gb);
    C->destroy(cb);
#endif
    return tap_done();
}
