/* test_cudnn_ops.c — every op of trainer/cuda/cudnn_ops.h against the CPU reference kernel of
 * trainer/layers.h on small shapes, for fp32 (fp32 policy: no TF32), tf32, fp16 and bf16, including the
 * accumulation (+=) of every backward and its beta 0 form over outputs full of NaN (never read), the
 * one-allocation workspace, and error messages that name op and
 * layer. The CPU sees the same inputs rounded to the format. Skips with a TAP reason without CUDA or GPU.
 * Tolerances: max |got - want| <= tol * max |want| over the tensor (want: the CPU result), with tol per
 * format stated in tol_of() below. */
#include "config.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "formats.h"
#include "testutil.h"
#include "trainer/cuda/cudnn_ops.h"
#include "trainer/layers.h"
#include "trainer/precision.h"

/* Tolerance relative to the tensor's largest |want|:
 *   fp32 (policy fp32, FMA math): 1e-5 — only the summation order differs;
 *   fp16: 4 * 2^-10 — the 16-bit output rounding (2^-11) plus fp32 accumulation in another order;
 *   bf16: 4 * 2^-7 — likewise with bf16's 7-bit mantissa.
 * Batchnorm statistics are fp32 in every policy: 1e-5 (computed from the same rounded inputs).
 * tf32 (conv and matmul only), per element instead: the CPU reference is plain fp32 and the GPU's TF32 math
 * converts each fp32 operand a itself (Hopper truncates its low 13 bits, a kernel's cvt.rna rounds ties away:
 * trainer/cuda/cudnn_ops.h), to within one TF32 ulp, 2^-10 |a|. A product a * b then moves by at most
 * (2 * 2^-10 + 2^-20) |a||b| and each side's fp32 sum of K products by K * 2^-24 of sum |a||b|, so
 * |got - want| <= TF32_TOL * mag with mag = sum |a||b| (plus |old value| where the op accumulates) and
 * TF32_TOL = 2.5 * 2^-10, whose extra half covers 2^-20 + 2 K 2^-24 for the K <= 162 here. mag is the CPU
 * reference kernel on the absolute values. */
static double tol_of(fp_dtype math, fp_dtype storage)
{
    (void)math;
    if (storage == FP_DT_F16)
        return 4.0 * FP16_EPSILON;
    if (storage == FP_DT_BF16)
        return 4.0 * BF16_EPSILON;
    return 1e-5;
}
#define STATS_TOL 1e-5
#define TF32_TOL (2.5 * (double)TF32_EPSILON)

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float *host_random(size_t n, float scale)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = scale * tu_uniform_pm1(&rng);
    return h;
}

/* A device tensor holding host values (rounded to dt; host[] is rounded in place so the CPU reference sees
 * exactly what the GPU does). */
static fp_dtensor dev_from(float *host, fp_dims dims, fp_dtype dt)
{
    size_t n = (size_t)dims.n * dims.h * dims.w * dims.c;
    fp_dtensor t = {NULL, dt, dims};
    fp_round_to_dtype(host, n, dt);
    size_t bytes = n * (size_t)fp_dtype_bytes(dt);
    if (cudaMalloc(&t.data, bytes) != cudaSuccess)
        return (fp_dtensor){NULL, dt, dims};
    if (dt == FP_DT_F32) {
        cudaMemcpy(t.data, host, bytes, cudaMemcpyHostToDevice);
    } else {
        uint16_t *h16 = malloc(bytes);
        fp_narrow_array(h16, host, n, dt);
        cudaMemcpy(t.data, h16, bytes, cudaMemcpyHostToDevice);
        free(h16);
    }
    cudaDeviceSynchronize();   /* the ops run on the context's non-blocking stream */
    return t;
}

static float *dev_floats(const float *host, size_t n)
{
    float *p = NULL;
    if (cudaMalloc((void **)&p, n * sizeof *p) != cudaSuccess)
        return NULL;
    cudaMemcpy(p, host, n * sizeof *p, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
    return p;
}

static void host_from(fp_cudnn *d, float *dst, const fp_dtensor *t)
{
    size_t n = (size_t)t->dims.n * t->dims.h * t->dims.w * t->dims.c;
    fp_cudnn_sync(d);
    if (t->dtype == FP_DT_F32) {
        cudaMemcpy(dst, t->data, n * 4, cudaMemcpyDeviceToHost);
    } else {
        uint16_t *h16 = malloc(n * 2);
        cudaMemcpy(h16, t->data, n * 2, cudaMemcpyDeviceToHost);
        fp_widen_array(dst, h16, n, t->dtype);
        free(h16);
    }
}

static void floats_from(fp_cudnn *d, float *dst, const float *dev, size_t n)
{
    fp_cudnn_sync(d);
    cudaMemcpy(dst, dev, n * sizeof *dst, cudaMemcpyDeviceToHost);
}

/* max |got - want| <= tol * max |want|; NaN must meet NaN. */
static int close_to(const float *got, const float *want, size_t n, double tol, const char *what, const char *arm)
{
    double maxw = 0, maxe = 0;
    size_t nan_bad = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i]) || isnan(got[i])) {
            nan_bad += isnan(want[i]) != isnan(got[i]);
            continue;
        }
        double e = fabs((double)got[i] - want[i]);
        if (fabs(want[i]) > maxw)
            maxw = fabs(want[i]);
        if (e > maxe) {
            maxe = e;
            worst = i;
        }
    }
    int ok = nan_bad == 0 && maxe <= tol * maxw;
    if (!ok)
        tap_diag("%s %s: worst at %zu: got %.9g want %.9g; %zu NaN mismatches", arm, what, worst, got[worst],
                 want[worst], nan_bad);
    return tap_ok(ok, "%s %s: max |err| %.3g <= %.3g * max |want| %.3g", arm, what, maxe, tol, maxw);
}

typedef struct {
    fp_cudnn *d;
    fp_dtype math, dt;
    const char *name;
    double tol;
} arm;

/* |got - want| <= TF32_TOL * mag[i] for every element; NaN must meet NaN. */
static int close_by_mag(const float *got, const float *want, const float *mag, size_t n, const char *what,
                        const char *name)
{
    double worst = 0;
    size_t nan_bad = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i]) || isnan(got[i])) {
            nan_bad += isnan(want[i]) != isnan(got[i]);
            continue;
        }
        double e = fabs((double)got[i] - want[i]), b = TF32_TOL * mag[i];
        double r = e == 0 ? 0 : b > 0 ? e / b : INFINITY;
        if (r > worst) {
            worst = r;
            at = i;
        }
    }
    int ok = nan_bad == 0 && worst <= 1;
    if (!ok)
        tap_diag("%s %s: worst at %zu: got %.9g want %.9g, sum |a||b| %.9g; %zu NaN mismatches", name, what, at,
                 got[at], want[at], mag[at], nan_bad);
    return tap_ok(ok, "%s %s: max |err| / (2.5 * 2^-10 * sum |a||b|) %.3g <= 1", name, what, worst);
}

/* A conv / matmul result: per element against mag under tf32 math, else close_to with the arm's tolerance. */
static int agrees(const arm *a, const float *got, const float *want, const float *mag, size_t n, const char *what)
{
    if (a->math == FP_DT_TF32)
        return close_by_mag(got, want, mag, n, what, a->name);
    return close_to(got, want, n, a->tol, what, a->name);
}

/* The absolute values of n floats (a new array). */
static float *absolute(const float *x, size_t n)
{
    float *a = malloc((n ? n : 1) * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = fabsf(x[i]);
    return a;
}

/* A TAP check that the cuDNN call `op` of arm a ran: rc FP_OK, or the error in the description. */
static int ran(int rc, const arm *a, const char *op)
{
    return tap_ok(rc == FP_OK, "%s %s runs%s%s", a->name, op, rc ? ": " : "", rc ? fp_error_message() : "");
}

static void test_conv(arm *a, fp_dims xd, fp_conv_params p)
{
    fp_dims yd = fp_conv_out_dims(xd, &p), wd = {p.cout, p.kh, p.kw, p.cin};
    size_t nx = (size_t)xd.n * xd.h * xd.w * xd.c, ny = (size_t)yd.n * yd.h * yd.w * yd.c,
           nw = (size_t)wd.n * wd.h * wd.w * wd.c;
    float *x = host_random(nx, 1.0f), *w = host_random(nw, 0.5f), *dy = host_random(ny, 1.0f);
    float *dx0 = host_random(nx, 0.25f), *dw0 = host_random(nw, 0.25f);
    fp_dtensor tx = dev_from(x, xd, a->dt), tw = dev_from(w, wd, a->dt), tdy = dev_from(dy, yd, a->dt);
    fp_dtensor tdx = dev_from(dx0, xd, a->dt), tdw = dev_from(dw0, wd, a->dt);
    float *yzero = calloc(ny, sizeof(float));
    fp_dtensor ty = dev_from(yzero, yd, a->dt);
    size_t most = nx > nw ? (nx > ny ? nx : ny) : (nw > ny ? nw : ny);
    float *want = malloc(most * sizeof(float)), *got = malloc(most * sizeof(float)), *mag = malloc(most * sizeof(float));
    float *ax = absolute(x, nx), *aw = absolute(w, nw), *ady = absolute(dy, ny);   /* tf32's sum |a||b| */
    char what[96];
    snprintf(what, sizeof what, "conv %dx%d s%d p%d %dx%dx%dx%d->%d", p.kh, p.kw, p.stride, p.pad, xd.n, xd.h, xd.w,
             xd.c, p.cout);
    char op[128];
    snprintf(op, sizeof op, "%s forward", what);
    if (!ran(fp_cudnn_conv_forward(a->d, &ty, &tx, &tw, &p), a, op))
        tap_skip(1, "forward failed");
    else {
        fp_conv_forward(want, x, xd, w, &p, NULL);
        fp_conv_forward(mag, ax, xd, aw, &p, NULL);
        host_from(a->d, got, &ty);
        agrees(a, got, want, mag, ny, op);
    }
    snprintf(op, sizeof op, "%s backward data", what);
    if (!ran(fp_cudnn_conv_backward_data(a->d, &tdx, &tdy, &tw, &p), a, op))
        tap_skip(1, "backward data failed");
    else {
        memcpy(want, dx0, nx * sizeof(float));   /* accumulates onto the prior dx */
        fp_conv_backward_data(want, dy, xd, w, &p, NULL);
        for (size_t i = 0; i < nx; i++)
            mag[i] = fabsf(dx0[i]);
        fp_conv_backward_data(mag, ady, xd, aw, &p, NULL);
        host_from(a->d, got, &tdx);
        snprintf(op, sizeof op, "%s dx += (beta 1)", what);
        agrees(a, got, want, mag, nx, op);
    }
    snprintf(op, sizeof op, "%s backward filter", what);
    if (!ran(fp_cudnn_conv_backward_filter(a->d, &tdw, &tdy, &tx, &p), a, op))
        tap_skip(1, "backward filter failed");
    else {
        memcpy(want, dw0, nw * sizeof(float));
        fp_conv_backward_weights(want, dy, x, xd, &p, NULL);
        for (size_t i = 0; i < nw; i++)
            mag[i] = fabsf(dw0[i]);
        fp_conv_backward_weights(mag, ady, ax, xd, &p, NULL);
        host_from(a->d, got, &tdw);
        snprintf(op, sizeof op, "%s dw += (beta 1)", what);
        agrees(a, got, want, mag, nw, op);
    }
    /* beta 0 into outputs full of NaN (all-ones bits: NaN in fp32, fp16 and bf16): cuDNN must not read them */
    cudaMemset(tdx.data, 0xFF, nx * (size_t)fp_dtype_bytes(a->dt));
    snprintf(op, sizeof op, "%s backward data beta 0", what);
    if (!ran(fp_cudnn_conv_backward_data_beta(a->d, &tdx, &tdy, &tw, &p, 0.0f), a, op))
        tap_skip(1, "backward data beta 0 failed");
    else {
        memset(want, 0, nx * sizeof(float));
        fp_conv_backward_data(want, dy, xd, w, &p, NULL);
        memset(mag, 0, nx * sizeof(float));
        fp_conv_backward_data(mag, ady, xd, aw, &p, NULL);
        host_from(a->d, got, &tdx);
        snprintf(op, sizeof op, "%s dx = (beta 0 over NaN)", what);
        agrees(a, got, want, mag, nx, op);
    }
    cudaMemset(tdw.data, 0xFF, nw * (size_t)fp_dtype_bytes(a->dt));
    snprintf(op, sizeof op, "%s backward filter beta 0", what);
    if (!ran(fp_cudnn_conv_backward_filter_beta(a->d, &tdw, &tdy, &tx, &p, 0.0f), a, op))
        tap_skip(1, "backward filter beta 0 failed");
    else {
        memset(want, 0, nw * sizeof(float));
        fp_conv_backward_weights(want, dy, x, xd, &p, NULL);
        memset(mag, 0, nw * sizeof(float));
        fp_conv_backward_weights(mag, ady, ax, xd, &p, NULL);
        host_from(a->d, got, &tdw);
        snprintf(op, sizeof op, "%s dw = (beta 0 over NaN)", what);
        agrees(a, got, want, mag, nw, op);
    }
    cudaFree(tx.data); cudaFree(tw.data); cudaFree(tdy.data); cudaFree(tdx.data); cudaFree(tdw.data); cudaFree(ty.data);
    free(x); free(w); free(dy); free(dx0); free(dw0); free(yzero); free(want); free(got);
    free(mag); free(ax); free(aw); free(ady);
}

static void test_bn(arm *a)
{
    fp_dims xd = {4, 5, 3, 6};
    size_t n = (size_t)xd.n * xd.h * xd.w * xd.c, c = (size_t)xd.c;
    float *x = host_random(n, 2.0f), *dy = host_random(n, 1.0f), *dx0 = host_random(n, 0.25f);
    for (size_t i = 0; i < n; i++)
        x[i] += 0.5f * (float)(i % c);   /* per-channel offsets: the mean matters */
    float *gamma = host_random(c, 1.0f), *beta = host_random(c, 1.0f);
    float rm[16], rv[16], dg0[16], db0[16];
    for (size_t i = 0; i < c; i++) {
        rm[i] = 0.1f * (float)i;
        rv[i] = 1.0f + 0.05f * (float)i;
        dg0[i] = 0.5f;
        db0[i] = -0.25f;
    }
    fp_dtensor tx = dev_from(x, xd, a->dt), tdy = dev_from(dy, xd, a->dt), tdx = dev_from(dx0, xd, a->dt);
    float *zeros = calloc(n, sizeof(float));
    fp_dtensor ty = dev_from(zeros, xd, a->dt);
    float *dgamma = dev_floats(gamma, c), *dbeta = dev_floats(beta, c), *drm = dev_floats(rm, c),
          *drv = dev_floats(rv, c), *dsm = dev_floats(rm, c), *dsi = dev_floats(rv, c), *ddg = dev_floats(dg0, c),
          *ddb = dev_floats(db0, c);
    fp_bn_params p = {0.1f, 1e-5f};
    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    float wrm[16], wrv[16], wsm[16], wsi[16], grm[16];
    memcpy(wrm, rm, sizeof rm);
    memcpy(wrv, rv, sizeof rv);
    if (!ran(fp_cudnn_bn_forward_train(a->d, &ty, dsm, dsi, drm, drv, &tx, dgamma, dbeta, &p), a,
             "batchnorm forward train")) {
        tap_skip(5, "batchnorm forward failed");
    } else {
        fp_batchnorm_forward_train(want, wsm, wsi, wrm, wrv, x, xd, gamma, beta, &p);
        host_from(a->d, got, &ty);
        close_to(got, want, n, a->tol, "batchnorm train y", a->name);
        floats_from(a->d, grm, drm, c);
        close_to(grm, wrm, c, STATS_TOL, "batchnorm running_mean (momentum 0.1)", a->name);
        floats_from(a->d, grm, drv, c);
        close_to(grm, wrv, c, STATS_TOL, "batchnorm running_var (unbiased update, as PyTorch)", a->name);
        floats_from(a->d, grm, dsm, c);
        close_to(grm, wsm, c, STATS_TOL, "batchnorm saved mean", a->name);
        floats_from(a->d, grm, dsi, c);
        close_to(grm, wsi, c, STATS_TOL, "batchnorm saved invstd = 1/sqrt(var+eps)", a->name);
    }
    if (!ran(fp_cudnn_bn_backward(a->d, &tdx, ddg, ddb, &tdy, &tx, dgamma, dsm, dsi, &p), a, "batchnorm backward")) {
        tap_skip(3, "batchnorm backward failed");
    } else {
        float wdg[16], wdb[16];
        memcpy(want, dx0, n * sizeof(float));
        memcpy(wdg, dg0, sizeof wdg);
        memcpy(wdb, db0, sizeof wdb);
        fp_batchnorm_backward(want, wdg, wdb, dy, x, xd, gamma, wsm, wsi);
        host_from(a->d, got, &tdx);
        close_to(got, want, n, a->tol, "batchnorm dx +=", a->name);
        floats_from(a->d, grm, ddg, c);
        close_to(grm, wdg, c, a->dt == FP_DT_F32 ? STATS_TOL : a->tol, "batchnorm dgamma +=", a->name);
        floats_from(a->d, grm, ddb, c);
        close_to(grm, wdb, c, a->dt == FP_DT_F32 ? STATS_TOL : a->tol, "batchnorm dbeta +=", a->name);
    }
    /* Evaluation with the running statistics just updated. */
    if (!ran(fp_cudnn_bn_forward_eval(a->d, &ty, &tx, dgamma, dbeta, drm, drv, &p), a, "batchnorm forward eval")) {
        tap_skip(1, "batchnorm eval failed");
    } else {
        fp_batchnorm_forward_eval(want, x, xd, gamma, beta, wrm, wrv, &p);
        host_from(a->d, got, &ty);
        close_to(got, want, n, a->tol, "batchnorm eval y", a->name);
    }
    cudaFree(tx.data); cudaFree(tdy.data); cudaFree(tdx.data); cudaFree(ty.data);
    cudaFree(dgamma); cudaFree(dbeta); cudaFree(drm); cudaFree(drv); cudaFree(dsm); cudaFree(dsi); cudaFree(ddg); cudaFree(ddb);
    free(x); free(dy); free(dx0); free(gamma); free(beta); free(zeros); free(want); free(got);
}

static void test_relu_pool(arm *a)
{
    fp_dims xd = {2, 8, 8, 4};
    size_t n = (size_t)xd.n * xd.h * xd.w * xd.c;
    /* Distinct values within each channel plane (a permutation of k/4, exact in bf16) so no max window has
     * a tie: the CPU's first-maximum rule and cuDNN then route gradients alike. */
    float *x = malloc(n * sizeof(float));
    for (int b = 0; b < xd.n; b++)
        for (int ch = 0; ch < xd.c; ch++) {
            int perm[64];
            for (int i = 0; i < 64; i++)
                perm[i] = i;
            for (int i = 63; i > 0; i--) {
                int j = (int)(tu_splitmix64(&rng) % (uint64_t)(i + 1)), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            for (int i = 0; i < 64; i++)
                x[((size_t)b * 64 + (size_t)i) * (size_t)xd.c + (size_t)ch] = (float)(perm[i] - 32) / 4.0f;
        }
    float *dy = host_random(n, 1.0f), *dx0 = host_random(n, 0.25f), *want = malloc(n * sizeof(float)),
          *got = malloc(n * sizeof(float)), *zeros = calloc(n, sizeof(float));
    fp_dtensor tx = dev_from(x, xd, a->dt), tdy = dev_from(dy, xd, a->dt), tdx = dev_from(dx0, xd, a->dt),
               ty = dev_from(zeros, xd, a->dt);
    /* relu */
    ran(fp_cudnn_relu_forward(a->d, &ty, &tx), a, "relu forward");
    fp_relu_forward(want, x, n);
    host_from(a->d, got, &ty);
    close_to(got, want, n, 0.0, "relu y (exact)", a->name);
    ran(fp_cudnn_relu_backward(a->d, &tdx, &tdy, &ty), a, "relu backward");
    float *yref = malloc(n * sizeof(float));
    memcpy(yref, want, n * sizeof(float));
    memcpy(want, dx0, n * sizeof(float));
    fp_relu_backward(want, dy, yref, n);
    host_from(a->d, got, &tdx);
    close_to(got, want, n, a->tol, "relu dx += dy where y > 0", a->name);
    /* max pool 3x3 stride 2 pad 1 (ResNet's stem pool) */
    fp_pool_params pp = {3, 2, 1};
    fp_dims yd = fp_pool_out_dims(xd, &pp);
    size_t ny = (size_t)yd.n * yd.h * yd.w * yd.c;
    float *pdy = host_random(ny, 1.0f), *pzero = calloc(ny, sizeof(float));
    fp_dtensor tpy = dev_from(pzero, yd, a->dt), tpdy = dev_from(pdy, yd, a->dt), tpdx = dev_from(dx0, xd, a->dt);
    int *argmax = malloc(ny * sizeof(int));
    ran(fp_cudnn_maxpool_forward(a->d, &tpy, &tx, &pp), a, "maxpool forward");
    fp_maxpool_forward(want, argmax, x, xd, &pp);
    host_from(a->d, got, &tpy);
    close_to(got, want, ny, 0.0, "maxpool 3x3 s2 p1 y (exact)", a->name);
    ran(fp_cudnn_maxpool_backward(a->d, &tpdx, &tpdy, &tx, &tpy, &pp), a, "maxpool backward");
    memcpy(want, dx0, n * sizeof(float));
    fp_maxpool_backward(want, pdy, argmax, xd, &pp);
    host_from(a->d, got, &tpdx);
    close_to(got, want, n, a->tol, "maxpool dx += routed dy", a->name);
    /* global average pool */
    fp_dims gd = {xd.n, 1, 1, xd.c};
    size_t ng = (size_t)xd.n * xd.c;
    float *gdy = host_random(ng, 1.0f);
    fp_dtensor tgy = dev_from(pzero, gd, a->dt), tgdy = dev_from(gdy, gd, a->dt), tgdx = dev_from(dx0, xd, a->dt);
    ran(fp_cudnn_avgpool_global_forward(a->d, &tgy, &tx), a, "global avgpool forward");
    fp_avgpool_global_forward(want, x, xd);
    host_from(a->d, got, &tgy);
    close_to(got, want, ng, a->tol, "global avgpool y", a->name);
    ran(fp_cudnn_avgpool_global_backward(a->d, &tgdx, &tgdy), a, "global avgpool backward");
    memcpy(want, dx0, n * sizeof(float));
    fp_avgpool_global_backward(want, gdy, xd);
    host_from(a->d, got, &tgdx);
    close_to(got, want, n, a->tol, "global avgpool dx += dy/(h*w)", a->name);
    cudaFree(tx.data); cudaFree(tdy.data); cudaFree(tdx.data); cudaFree(ty.data); cudaFree(tpy.data);
    cudaFree(tpdy.data); cudaFree(tpdx.data); cudaFree(tgy.data); cudaFree(tgdy.data); cudaFree(tgdx.data);
    free(x); free(dy); free(dx0); free(want); free(got); free(zeros); free(yref); free(pdy); free(pzero);
    free(argmax); free(gdy);
}

static void test_linear(arm *a)
{
    const int n = 4, in = 40, out = 10;
    fp_dims xd = {n, 1, 1, in}, wd = {out, 1, 1, in}, bd = {1, 1, 1, out}, yd = {n, 1, 1, out};
    float *x = host_random((size_t)n * in, 1.0f), *w = host_random((size_t)out * in, 0.5f), *b = host_random(out, 1.0f);
    float *dy = host_random((size_t)n * out, 1.0f), *dx0 = host_random((size_t)n * in, 0.25f),
          *dw0 = host_random((size_t)out * in, 0.25f), *db0 = host_random(out, 0.25f);
    float *zeros = calloc((size_t)n * out, sizeof(float));
    fp_dtensor tx = dev_from(x, xd, a->dt), tw = dev_from(w, wd, a->dt), tb = dev_from(b, bd, a->dt),
               ty = dev_from(zeros, yd, a->dt), tdy = dev_from(dy, yd, a->dt), tdx = dev_from(dx0, xd, a->dt),
               tdw = dev_from(dw0, wd, a->dt), tdb = dev_from(db0, bd, a->dt);
    float *ax = absolute(x, (size_t)n * in), *aw = absolute(w, (size_t)out * in), *ab = absolute(b, (size_t)out),
          *ady = absolute(dy, (size_t)n * out);   /* tf32's sum |a||b| */
    float want[400], got[400], mag[400];
    ran(fp_cudnn_linear_forward(a->d, &ty, &tx, &tw, &tb), a, "linear forward");
    fp_linear_forward(want, x, n, in, out, w, b);
    fp_linear_forward(mag, ax, n, in, out, aw, ab);
    host_from(a->d, got, &ty);
    agrees(a, got, want, mag, (size_t)n * out, "linear y = x W^T + b (bias epilogue)");
    ran(fp_cudnn_linear_backward(a->d, &tdx, &tdw, &tdb, &tdy, &tx, &tw), a, "linear backward");
    float wdx[160], wdw[400], wdb[10], mdx[160], mdw[400], mdb[10];
    memcpy(wdx, dx0, sizeof wdx);
    memcpy(wdw, dw0, sizeof wdw);
    memcpy(wdb, db0, sizeof wdb);
    fp_linear_backward(wdx, wdw, wdb, dy, x, n, in, out, w);
    for (int i = 0; i < n * in; i++)
        mdx[i] = fabsf(dx0[i]);
    for (int i = 0; i < out * in; i++)
        mdw[i] = fabsf(dw0[i]);
    for (int i = 0; i < out; i++)
        mdb[i] = fabsf(db0[i]);
    fp_linear_backward(mdx, mdw, mdb, ady, ax, n, in, out, aw);
    host_from(a->d, got, &tdx);
    agrees(a, got, wdx, mdx, (size_t)n * in, "linear dx +=");
    host_from(a->d, got, &tdw);
    agrees(a, got, wdw, mdw, (size_t)out * in, "linear dw +=");
    host_from(a->d, got, &tdb);
    agrees(a, got, wdb, mdb, (size_t)out, "linear db +=");
    /* beta 0 into outputs full of NaN: cuBLASLt must not read them */
    cudaMemset(tdx.data, 0xFF, (size_t)n * in * fp_dtype_bytes(a->dt));
    cudaMemset(tdw.data, 0xFF, (size_t)out * in * fp_dtype_bytes(a->dt));
    cudaMemset(tdb.data, 0xFF, (size_t)out * fp_dtype_bytes(a->dt));
    ran(fp_cudnn_linear_backward_beta(a->d, &tdx, &tdw, &tdb, &tdy, &tx, &tw, 0.0f), a, "linear backward beta 0");
    memset(wdx, 0, sizeof wdx);
    memset(wdw, 0, sizeof wdw);
    memset(wdb, 0, sizeof wdb);
    fp_linear_backward(wdx, wdw, wdb, dy, x, n, in, out, w);
    memset(mdx, 0, sizeof mdx);
    memset(mdw, 0, sizeof mdw);
    memset(mdb, 0, sizeof mdb);
    fp_linear_backward(mdx, mdw, mdb, ady, ax, n, in, out, aw);
    host_from(a->d, got, &tdx);
    agrees(a, got, wdx, mdx, (size_t)n * in, "linear dx = (beta 0 over NaN)");
    host_from(a->d, got, &tdw);
    agrees(a, got, wdw, mdw, (size_t)out * in, "linear dw = (beta 0 over NaN)");
    host_from(a->d, got, &tdb);
    agrees(a, got, wdb, mdb, (size_t)out, "linear db = (beta 0 over NaN)");
    cudaFree(tx.data); cudaFree(tw.data); cudaFree(tb.data); cudaFree(ty.data); cudaFree(tdy.data);
    cudaFree(tdx.data); cudaFree(tdw.data); cudaFree(tdb.data);
    free(x); free(w); free(b); free(dy); free(dx0); free(dw0); free(db0); free(zeros);
    free(ax); free(aw); free(ab); free(ady);
}

static void test_errors(arm *a)
{
    float *buf = NULL;
    cudaMalloc((void **)&buf, 4096);
    fp_conv_params p = {4, 8, 3, 3, 1, 1};
    fp_dtensor x = {buf, FP_DT_F32, {1, 4, 4, 4}}, w = {buf, FP_DT_F32, {8, 3, 3, 4}}, y = {buf, FP_DT_F32, {1, 4, 4, 7}};
    fp_cudnn_set_label(a->d, "layer9.conv");
    int rc = fp_cudnn_conv_forward(a->d, &y, &x, &w, &p);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "conv forward") && strstr(fp_error_message(), "layer9.conv"),
           "wrong output dims: FP_EINVAL naming op and layer (%s)", fp_error_message());
    fp_dtensor t32 = {buf, FP_DT_TF32, {1, 4, 4, 4}};
    rc = fp_cudnn_relu_forward(a->d, &t32, &t32);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "tf32"), "tf32 is no storage dtype (%s)", fp_error_message());
    fp_cudnn_set_label(a->d, NULL);
    cudaFree(buf);
}

static void run_arm(fp_dtype math, fp_dtype dt, const char *name)
{
    fp_cudnn_config cfg;
    fp_cudnn_config_default(&cfg, math);
    arm a = {NULL, math, dt, name, tol_of(math, dt)};
    int rc = fp_cudnn_create(&a.d, &cfg);
    if (!tap_ok(rc == FP_OK, "%s context created%s%s", name, rc ? ": " : "", rc ? fp_error_message() : ""))
        return;
    /* ResNet's convolution kinds: 3x3 s1 p1, 1x1 s2 (downsample), 7x7 s2 p3 (stem). Planned first, then one
     * workspace allocation serves all of them. */
    fp_dims shapes[3] = {{2, 9, 9, 8}, {2, 9, 9, 8}, {2, 15, 15, 3}};
    fp_conv_params cps[3] = {{8, 16, 3, 3, 1, 1}, {8, 16, 1, 1, 2, 0}, {3, 8, 7, 7, 2, 3}};
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++)
        ok = fp_cudnn_conv_plan(a.d, shapes[i], &cps[i], dt, FP_CONV_ALL) == FP_OK;
    tap_ok(ok, "%s conv plans%s%s", name, ok ? "" : ": ", ok ? "" : fp_error_message());
    ok = fp_cudnn_linear_plan(a.d, 4, 40, 10, dt, 1) == FP_OK;
    tap_ok(ok, "%s linear plans%s%s", name, ok ? "" : ": ", ok ? "" : fp_error_message());
    ok = fp_cudnn_workspace_commit(a.d) == FP_OK;
    tap_ok(ok, "%s workspace commit%s%s", name, ok ? "" : ": ", ok ? "" : fp_error_message());
    fp_cudnn_stats st0;
    fp_cudnn_get_stats(a.d, &st0);
    for (int i = 0; i < 3; i++)
        test_conv(&a, shapes[i], cps[i]);
    test_linear(&a);
    fp_cudnn_stats st;
    fp_cudnn_get_stats(a.d, &st);
    tap_ok(st.allocations == st0.allocations && st.allocations <= 1 && st.bytes == st.need && st.conv_plans == 3,
           "%s one workspace allocation of %zu bytes served every planned layer (allocations %d, plans %d)", name,
           st.bytes, st.allocations, st.conv_plans);
    if (dt != FP_DT_F32 || math == FP_DT_F32) {   /* bn, relu, pool: no tensor-op math; once per storage type */
        test_bn(&a);
        test_relu_pool(&a);
    }
    if (math == FP_DT_F32)
        test_errors(&a);
    fp_cudnn_free(a.d);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    run_arm(FP_DT_F32, FP_DT_F32, "fp32");
    run_arm(FP_DT_TF32, FP_DT_F32, "tf32");
    run_arm(FP_DT_F16, FP_DT_F16, "fp16");
    run_arm(FP_DT_BF16, FP_DT_BF16, "bf16");
#endif
    return tap_done();
}
