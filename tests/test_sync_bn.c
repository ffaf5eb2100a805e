/* test_sync_bn.c — the synchronised batchnorm (--sync-bn) in one process, against plain batchnorm over the
 * whole batch: (1) the CPU backend's bn_sync_* ops on two halves of a batch, their sums added between the ops
 * (what the ranks' all-reduce does), for fp32 and fp16 storage; (2) two models on two threads, each training
 * on half the batch with a reduce hook that sums the two threads' vectors, against one model on the whole
 * batch (fp32 and the fp16 policy). Tolerances next to each check: the summation order differs. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "numfmt.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/backend.h"
#include "trainer/model.h"
#include "trainer/precision.h"

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static const fp_backend_ops *ops;
static fp_backend *be;

static float unif(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

/* Largest |a - b| / (abs_tol + rel_tol * |b|) over n values: <= 1 passes. */
static double worst(const float *a, const float *b, size_t n, double abs_tol, double rel_tol)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]) / (abs_tol + rel_tol * fabs((double)b[i]));
        if (!(e <= w))
            w = e;   /* NaN too */
    }
    return w;
}

/* A tensor's values widened to fp32 (16-bit storage) or copied. */
static void widen(float *dst, const void *src, size_t n, fp_dtype dt)
{
    if (dt == FP_DT_F16)
        fp_f16_to_f32_array(dst, src, n);
    else
        memcpy(dst, src, n * sizeof(float));
}

static void *storage(const float *v, size_t n, fp_dtype dt)
{
    void *p = calloc(n, (size_t)fp_dtype_bytes(dt));
    if (dt == FP_DT_F16)
        fp_f32_to_f16_array(p, v, n);
    else
        memcpy(p, v, n * sizeof(float));
    return p;
}

static fp_tensor ten(void *p, fp_dtype dt, int n, int h, int w, int c)
{
    return fp_tensor_of(p, dt, (fp_dims){n, h, w, c});
}

/* The all-reduce of two ranks: both vectors become their sum. */
static void sum_two(float *a, float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = a[i] + b[i];
}

/* ---------------------------------------------------------------- (1) the ops */

/* Batch N = 2 * NH images of H x W x C, split into two halves of NH images. Mean 3, spread 0.5 per channel
 * (an offset the two-pass variance must not lose), dy of mixed sign. */
enum { NH = 3, H = 5, W = 4, C = 6 };

static void ops_case(fp_dtype dt)
{
    const char *fmt = fp_dtype_name(dt);
    const size_t half = (size_t)NH * H * W * C, all = 2 * half;
    float *xv = malloc(all * sizeof *xv), *dyv = malloc(all * sizeof *dyv);
    float g[C], b[C];
    for (size_t i = 0; i < all; i++) {
        xv[i] = 3.0f + (float)(i % C) * 0.25f + (unif() - 0.5f);
        dyv[i] = unif() - 0.4f;
    }
    for (int j = 0; j < C; j++) {
        g[j] = 0.5f + unif();
        b[j] = unif() - 0.5f;
    }
    void *x = storage(xv, all, dt), *dy = storage(dyv, all, dt);
    size_t es = (size_t)fp_dtype_bytes(dt);
    fp_bn_params p = {0.1f, 1e-5f};
    fp_tensor G = ten(g, FP_DT_F32, 1, 1, 1, C), B = ten(b, FP_DT_F32, 1, 1, 1, C);

    /* plain batchnorm over the whole batch */
    void *y = calloc(all, es), *dx = calloc(all, es);
    float save[2 * C], rm[C], rv[C], dg[C] = {0}, db[C] = {0};
    for (int j = 0; j < C; j++)
        rm[j] = 0.0f, rv[j] = 1.0f;
    int rc = ops->bn_forward_train(be, ten(y, dt, 2 * NH, H, W, C), ten(save, FP_DT_F32, 1, 1, 1, 2 * C),
                                   ten(rm, FP_DT_F32, 1, 1, 1, C), ten(rv, FP_DT_F32, 1, 1, 1, C),
                                   ten(x, dt, 2 * NH, H, W, C), G, B, &p);
    rc = rc ? rc : ops->bn_backward(be, ten(dx, dt, 2 * NH, H, W, C), ten(dg, FP_DT_F32, 1, 1, 1, C),
                                    ten(db, FP_DT_F32, 1, 1, 1, C), ten(dy, dt, 2 * NH, H, W, C),
                                    ten(x, dt, 2 * NH, H, W, C),
                                    G, ten(save, FP_DT_F32, 1, 1, 1, 2 * C), 0);
    tap_is_int(rc, FP_OK, "%s: plain batchnorm over the batch of %d", fmt, 2 * NH);

    /* the two halves, their sums added between the ops */
    void *sy = calloc(all, es), *sdx = calloc(all, es);
    float ssave[2][2 * C], srm[2][C], srv[2][C], sdg[2][C], sdb[2][C];
    float a1[2][2 * C + 1], a2[2][2 * C + 1], ab[2][2 * C + 1];
    memset(sdg, 0, sizeof sdg);
    memset(sdb, 0, sizeof sdb);
    fp_tensor xs[2], ys[2], dys[2], dxs[2];
    for (int h = 0; h < 2; h++) {
        for (int j = 0; j < C; j++)
            srm[h][j] = 0.0f, srv[h][j] = 1.0f;
        xs[h] = ten((char *)x + h * half * es, dt, NH, H, W, C);
        ys[h] = ten((char *)sy + h * half * es, dt, NH, H, W, C);
        dys[h] = ten((char *)dy + h * half * es, dt, NH, H, W, C);
        dxs[h] = ten((char *)sdx + h * half * es, dt, NH, H, W, C);
    }
#define ACC(a, h) ten((a)[h], FP_DT_F32, 1, 1, 1, 2 * C + 1)
#define VEC(a, h, k) ten((a)[h], FP_DT_F32, 1, 1, 1, (k))
    fp_tensor none = {0};
    for (int h = 0; h < 2 && !rc; h++)
        rc = ops->bn_sync_stats(be, ACC(a1, h), xs[h], none);
    sum_two(a1[0], a1[1], 2 * C + 1);
    for (int h = 0; h < 2 && !rc; h++)
        rc = ops->bn_sync_stats(be, ACC(a2, h), xs[h], ACC(a1, h));
    sum_two(a2[0], a2[1], 2 * C + 1);
    for (int h = 0; h < 2 && !rc; h++)
        rc = ops->bn_sync_forward(be, ys[h], VEC(ssave, h, 2 * C), VEC(srm, h, C), VEC(srv, h, C), xs[h], G, B,
                                  ACC(a1, h), ACC(a2, h), &p);
    for (int h = 0; h < 2 && !rc; h++)
        rc = ops->bn_sync_backward_sums(be, ACC(ab, h), VEC(sdg, h, C), VEC(sdb, h, C), dys[h], xs[h],
                                        VEC(ssave, h, 2 * C));
    sum_two(ab[0], ab[1], 2 * C + 1);
    for (int h = 0; h < 2 && !rc; h++)
        rc = ops->bn_sync_backward_dx(be, dxs[h], dys[h], xs[h], G, VEC(ssave, h, 2 * C), ACC(ab, h), 0);
    tap_is_int(rc, FP_OK, "%s: the synchronised ops on two halves of %d", fmt, NH);
    tap_is_double(a2[0][2 * C], 2.0 * NH * H * W, 0, 0, "%s: the reduced count is the whole batch's", fmt);

    /* fp32: the statistics differ only by summation order (two-pass vs one-pass, fp32-rounded partial sums):
     * relative 1e-5. Outputs in fp32 likewise (abs 1e-5 for values near 0); in fp16, one unit in the last
     * place (2^-10 relative, 2^-24 near 0) where an fp32 difference crosses a rounding boundary. */
    double rel = dt == FP_DT_F32 ? 1e-5 : 1.0 / 1024, abs = dt == FP_DT_F32 ? 1e-5 : 6e-8;
    float *w1 = malloc(all * sizeof *w1), *w2 = malloc(all * sizeof *w2);
    for (int h = 0; h < 2; h++) {
        tap_ok(worst(ssave[h], save, 2 * C, 1e-6, 1e-5) <= 1,
               "%s: half %d saved mean / invstd = the batch's (rel 1e-5)", fmt, h);
        tap_ok(worst(srm[h], rm, C, 1e-6, 1e-5) <= 1 && worst(srv[h], rv, C, 1e-6, 1e-5) <= 1,
               "%s: half %d running mean / var (unbiased, global count) = the batch's (rel 1e-5)", fmt, h);
    }
    widen(w1, sy, all, dt);
    widen(w2, y, all, dt);
    double wy = worst(w1, w2, all, abs, rel);
    tap_ok(wy <= 1, "%s: forward output = the batch's (worst %.3g of the tolerance)", fmt, wy);
    widen(w1, sdx, all, dt);
    widen(w2, dx, all, dt);
    /* dx is a difference of terms of size |dy|: its tolerance is taken against that scale */
    double wdx = worst(w1, w2, all, dt == FP_DT_F32 ? 1e-5 : 2e-3, rel);
    tap_ok(wdx <= 1, "%s: dx = the batch's (worst %.3g of the tolerance)", fmt, wdx);
    float sg[C], sb[C];
    for (int j = 0; j < C; j++) {
        sg[j] = sdg[0][j] + sdg[1][j];
        sb[j] = sdb[0][j] + sdb[1][j];
    }
    /* sums of ~180 values of |dy| < 0.6: abs 1e-4 */
    tap_ok(worst(sg, dg, C, 1e-4, 1e-5) <= 1 && worst(sb, db, C, 1e-4, 1e-5) <= 1,
           "%s: the halves' dgamma and dbeta add up to the batch's (abs 1e-4)", fmt);
    free(w1);
    free(w2);
    free(sy);
    free(sdx);
    free(y);
    free(dx);
    free(x);
    free(dy);
    free(xv);
    free(dyv);
}

static void bad_input(void)
{
    float acc[2 * C + 1], xv[2 * C];
    int rc = ops->bn_sync_stats(be, ten(acc, FP_DT_F32, 1, 1, 1, 2 * C), ten(xv, FP_DT_F32, 2, 1, 1, C),
                                (fp_tensor){0});
    tap_is_int(rc, FP_EINVAL, "bn_sync_stats refuses an acc of 2c floats: %s", fp_error_message());
    float save[2 * C], g[C], b[C], a[2 * C + 1] = {0};
    a[2 * C] = 1.0f;   /* one value per channel over the ranks: no unbiased variance */
    fp_bn_params p = {0.1f, 1e-5f};
    rc = ops->bn_sync_forward(be, ten(xv, FP_DT_F32, 1, 1, 1, C), ten(save, FP_DT_F32, 1, 1, 1, 2 * C),
                              (fp_tensor){0}, (fp_tensor){0}, ten(xv, FP_DT_F32, 1, 1, 1, C),
                              ten(g, FP_DT_F32, 1, 1, 1, C),
                              ten(b, FP_DT_F32, 1, 1, 1, C), ten(a, FP_DT_F32, 1, 1, 1, 2 * C + 1),
                              ten(a, FP_DT_F32, 1, 1, 1, 2 * C + 1), &p);
    tap_is_int(rc, FP_EINVAL, "bn_sync_forward refuses a global count of 1: %s", fp_error_message());
}

static double rel_l2(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

/* ---------------------------------------------------------------- (2) two models on two threads */

typedef struct {
    pthread_barrier_t *bar;
    float **slot;               /* each thread's vector of the current reduction */
    float *tmp[2];
    int rank, calls;
} reducer;

/* Both threads' vectors summed (slot 0 + slot 1 in both: the same values on both), in place. */
static int reduce_two(void *ctx, float *buf, size_t count)
{
    reducer *r = ctx;
    r->slot[r->rank] = buf;
    pthread_barrier_wait(r->bar);
    float *t = malloc(count * sizeof *t);
    for (size_t i = 0; t && i < count; i++)
        t[i] = r->slot[0][i] + r->slot[1][i];
    pthread_barrier_wait(r->bar);
    if (t)
        memcpy(buf, t, count * sizeof *t);
    free(t);
    r->calls++;
    return t ? FP_OK : fp_fail(FP_ENOMEM, "out of memory");
}

typedef struct {
    fp_model *m;
    reducer red;
    const float *x;
    const int *labels;
    int n, steps, rc;
    float loss;
} shard;

static void *shard_run(void *arg)
{
    shard *s = arg;
    for (int k = 0; k < s->steps && !s->rc; k++) {
        fp_model_zero_grad(s->m);
        s->rc = fp_model_train_step(s->m, &s->loss, NULL, NULL, s->x, s->labels, s->n);
    }
    return NULL;
}

static fp_model *tiny(const char *policy)
{
    fp_model_config mc = {"resnet18", 10, 32, 8, 7, 0};
    fp_model *m = NULL;
    if (fp_model_create(&m, &mc) || fp_model_set_policy(m, fp_policy_find(policy)))
        return NULL;
    return m;
}

/* One step (forward, loss, backward; no optimizer) of two models on halves of a batch of 2 * nh against one on
 * the whole batch: running statistics equal (abs / rel tol), the mean of the halves' gradients equals the
 * batch's (rel. L2 gtol; see one_rank_case for fp16's). */
static void model_case(const char *policy, double tol, double gtol)
{
    const int nh = 4;
    fp_model *ref = tiny(policy), *m[2] = {tiny(policy), tiny(policy)};
    tap_ok(ref && m[0] && m[1], "%s: three resnet18 (width 8) models", policy);
    if (!ref || !m[0] || !m[1]) {
        tap_skip(3, "no models");
        return;
    }
    size_t img = 32 * 32 * 3;
    float *x = malloc(2 * nh * img * sizeof *x);
    int labels[8];
    for (size_t i = 0; i < 2 * nh * img; i++)
        x[i] = 2.0f * unif() - 1.0f;
    for (int i = 0; i < 2 * nh; i++)
        labels[i] = i % 10;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    float *slot[2] = {0};
    shard s[2];
    pthread_t th[2];
    for (int h = 0; h < 2; h++) {
        s[h] = (shard){m[h], {&bar, slot, {0}, h, 0}, x + h * nh * img, labels + h * nh, nh, 1, 0, 0};
        fp_model_set_bn_reduce(m[h], reduce_two, &s[h].red);
        pthread_create(&th[h], NULL, shard_run, &s[h]);
    }
    for (int h = 0; h < 2; h++)
        pthread_join(th[h], NULL);
    pthread_barrier_destroy(&bar);
    float loss = 0;
    fp_model_zero_grad(ref);
    int rc = fp_model_train_step(ref, &loss, NULL, NULL, x, labels, 2 * nh);
    tap_ok(!rc && !s[0].rc && !s[1].rc && s[0].red.calls == s[1].red.calls && s[0].red.calls > 0,
           "%s: a step on each half (%d reductions each) and one on the batch", policy, s[0].red.calls);
    size_t nb = fp_model_num_buffers(ref), np = fp_model_num_params(ref);
    const float *rb = fp_model_buffers(ref), *b0 = fp_model_buffers(m[0]), *b1 = fp_model_buffers(m[1]);
    tap_ok(memcmp(b0, b1, nb * sizeof *b0) == 0 && worst(b0, rb, nb, tol, tol) <= 1,
           "%s: both halves hold the same running statistics, the batch's (abs / rel %g; worst %.3g)", policy, tol,
           worst(b0, rb, nb, tol, tol));
    const float *g0 = fp_model_grads(m[0]), *g1 = fp_model_grads(m[1]), *rg = fp_model_grads(ref);
    float *mean = malloc(np * sizeof *mean);
    for (size_t i = 0; i < np; i++)
        mean[i] = 0.5f * (g0[i] + g1[i]);
    double eg = rel_l2(mean, rg, np);
    tap_ok(eg <= gtol, "%s: the mean of the halves' gradients = the batch's (rel. L2 %.3g <= %g)", policy, eg, gtol);
    free(mean);
    free(x);
    fp_model_free(ref);
    fp_model_free(m[0]);
    fp_model_free(m[1]);
}

/* One rank: the hook leaves the sums as they are. */
static int reduce_one(void *ctx, float *buf, size_t count)
{
    (void)buf;
    (void)count;
    ++*(int *)ctx;
    return FP_OK;
}

/* The synchronised path with one rank against plain batchnorm on the same batch: only the statistics'
 * arithmetic differs (two passes in double rounded to fp32 sums, against one pass in double), by an ulp of
 * fp32. Gradients within rel. L2 gtol, running statistics within tol (abs and rel). Under fp16 an ulp of fp32
 * in a statistic turns some fp16 activation into its neighbour (one in 4096 at the second batchnorm here), and
 * each conv's fp16 rounding spreads it (9, 91, 447 values differ in the next layers, most of them by layer 2):
 * 5.5% of the gradients' L2 here (under bf16, whose ulp is 8x coarser, none flips); the op-level checks above
 * bound one layer to one fp16 ulp. */
static void one_rank_case(const char *policy, double tol, double gtol)
{
    const int n = 8;
    fp_model *ref = tiny(policy), *m = tiny(policy);
    size_t img = 32 * 32 * 3;
    float *x = malloc(n * img * sizeof *x), loss = 0, loss1 = 0;
    int labels[8], calls = 0;
    for (size_t i = 0; i < n * img; i++)
        x[i] = 2.0f * unif() - 1.0f;
    for (int i = 0; i < n; i++)
        labels[i] = (3 * i) % 10;
    int rc = !ref || !m;
    if (!rc) {
        fp_model_set_bn_reduce(m, reduce_one, &calls);
        fp_model_zero_grad(ref);
        fp_model_zero_grad(m);
        rc = fp_model_train_step(ref, &loss, NULL, NULL, x, labels, n);
        rc = rc ? rc : fp_model_train_step(m, &loss1, NULL, NULL, x, labels, n);
    }
    tap_ok(!rc && calls == 60, "%s, one rank: a step through the hook (%d reductions) and a plain one", policy, calls);
    if (rc) {
        tap_skip(1, "no step");
    } else {
        size_t np = fp_model_num_params(ref), nb = fp_model_num_buffers(ref);
        double eg = rel_l2(fp_model_grads(m), fp_model_grads(ref), np);
        double wb = worst(fp_model_buffers(m), fp_model_buffers(ref), nb, tol, tol);
        tap_ok(eg <= gtol && wb <= 1, "%s, one rank: gradients (rel. L2 %.3g <= %g) and running statistics (abs / rel "
               "%g; worst %.3g of it) = plain batchnorm's", policy, eg, gtol, tol, wb);
    }
    free(x);
    fp_model_free(ref);
    fp_model_free(m);
}

int main(void)
{
    tap_plan(35);
    ops = fp_backend_cpu();
    tap_is_int(ops->create(&be), FP_OK, "CPU backend");
    ops_case(FP_DT_F32);
    ops_case(FP_DT_F16);
    bad_input();
    /* fp32: summation order only, through 20 layers: running statistics 1e-4, gradients rel. L2 1e-4 (measured
     * 7e-6 and below). fp16: running statistics 5e-3 (the first layers' flips are few), gradients rel. L2 0.15
     * (measured up to 5.5e-2: one_rank_case's comment says why). */
    model_case("fp32", 1e-4, 1e-4);
    model_case("fp16", 5e-3, 0.15);
    one_rank_case("fp32", 1e-4, 1e-4);
    one_rank_case("fp16", 5e-3, 0.15);
    ops->destroy(be);
    return tap_done();
}
