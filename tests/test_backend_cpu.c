/* test_backend_cpu.c — every op of the CPU backend table (trainer/backend.h) against the layers.h kernel
 * it wraps, on small shapes: fp32 bit-exact; fp16 / bf16 tensors against widen -> fp32 kernel -> narrow
 * done here by hand, also bit-exact (tolerance 0: the backend promises the same arithmetic); memory
 * ops and accounting; bad dims / dtypes / NULL tensors rejected with FP_EINVAL and a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/backend.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static const fp_backend_ops *ops;
static fp_backend *be;

/* A test tensor: values f (fp32, exactly representable in dt) and their storage s in dt. */
typedef struct {
    float *f;
    void *s;
    fp_dtype dt;
    fp_dims d;
    size_t n;
} T;

static size_t cnt(fp_dims d) { return (size_t)d.n * d.h * d.w * d.c; }
static size_t bytes_of(fp_dtype dt, size_t n) { return n * (size_t)fp_dtype_bytes(dt); }
static int is16(fp_dtype d) { return d == FP_DT_F16 || d == FP_DT_BF16; }

/* f32 values -> storage of dt (narrowed or copied). */
static void to_storage(void *dst, const float *src, size_t n, fp_dtype dt)
{
    if (is16(dt))
        fp_narrow_array(dst, src, n, dt);
    else
        memcpy(dst, src, n * sizeof(float));
}

static T mk(fp_dtype dt, fp_dims d, float scale, float offset)
{
    T t = {0};
    t.dt = dt;
    t.d = d;
    t.n = cnt(d);
    t.f = malloc(t.n * sizeof(float));
    t.s = malloc(bytes_of(dt, t.n));
    for (size_t i = 0; i < t.n; i++)
        t.f[i] = offset + scale * tu_uniform_pm1(&rng);
    if (is16(dt))
        fp_round_to_dtype(t.f, t.n, dt);   /* f holds exactly what s stores */
    to_storage(t.s, t.f, t.n, dt);
    return t;
}
static T zeros(fp_dtype dt, fp_dims d) { return mk(dt, d, 0.0f, 0.0f); }
static void drop(T *t)
{
    free(t->f);
    free(t->s);
}
static fp_tensor tv(const T *t) { return fp_tensor_of(t->s, t->dt, t->d); }
static float *dup(const float *a, size_t n)
{
    float *b = malloc(n * sizeof(float));
    memcpy(b, a, n * sizeof(float));
    return b;
}
static float *zalloc(size_t n) { return calloc(n, sizeof(float)); }

/* The storage of t equals the reference values ref (fp32) stored in t's format, bit for bit. */
static void same(const T *t, const float *ref, const char *what)
{
    void *want = malloc(bytes_of(t->dt, t->n));
    to_storage(want, ref, t->n, t->dt);
    int ok = memcmp(t->s, want, bytes_of(t->dt, t->n)) == 0;
    tap_ok(ok, "%s (%s): bit-identical to the kernel (tolerance 0)", what, fp_dtype_name(t->dt));
    free(want);
}

/* A 16-bit accumulate reference: round(old + round(c)) per element; fp32: old + c is the kernel's job. */
static void acc_ref16(float *out, const float *old, const float *c, size_t n, fp_dtype dt)
{
    float *rc = dup(c, n);
    fp_round_to_dtype(rc, n, dt);
    for (size_t i = 0; i < n; i++)
        out[i] = old[i] + rc[i];
    free(rc);
}

static void einval(int rc, const char *what)
{
    tap_ok(rc == FP_EINVAL && fp_error_message()[0] != '\0', "%s -> FP_EINVAL (%s)", what, fp_error_message());
}

/* ---------------------------------------------------------------- conv */

static void test_conv(fp_dtype xdt, fp_dtype ydt, fp_dtype compute, int stride)
{
    fp_conv_params p = {3, 4, 3, 3, stride, 1};
    fp_dims xd = {2, 5, 6, 3};
    fp_dims yd = fp_conv_out_dims(xd, &p);
    fp_dims wd = {4, 3, 3, 3};
    char tag[64];
    snprintf(tag, sizeof tag, "conv x %s y %s compute %s /%d", fp_dtype_name(xdt), fp_dtype_name(ydt),
             fp_dtype_name(compute), stride);
    T x = mk(xdt, xd, 1.0f, 0.0f), w = mk(FP_DT_F32, wd, 0.5f, 0.0f), y = zeros(ydt, yd);
    fp_round_to_dtype(w.f, w.n, compute);   /* the caller's weight copy */
    memcpy(w.s, w.f, w.n * sizeof(float));
    float *xc = dup(x.f, x.n);
    fp_round_to_dtype(xc, x.n, compute);
    float *yr = zalloc(y.n);
    fp_conv_forward(yr, xc, xd, w.f, &p, NULL);
    tap_is_int(ops->conv_forward(be, tv(&y), tv(&x), tv(&w), &p, compute), FP_OK, "%s forward", tag);
    same(&y, yr, tag);

    /* backward data: overwrite, then accumulate onto what is there */
    T dy = mk(ydt, yd, 1.0f, 0.0f), dx = mk(xdt, xd, 1.0f, 0.0f);
    float *dyc = dup(dy.f, dy.n);
    fp_round_to_dtype(dyc, dy.n, compute);
    float *k = zalloc(dx.n);
    fp_conv_backward_data(k, dyc, xd, w.f, &p, NULL);
    tap_is_int(ops->conv_backward_data(be, tv(&dx), tv(&dy), tv(&w), &p, compute, 0), FP_OK, "%s bwd data", tag);
    same(&dx, k, "conv backward_data, accumulate 0");
    float *old = dup(k, dx.n);
    if (is16(xdt))
        fp_round_to_dtype(old, dx.n, xdt);
    float *want = dup(old, dx.n);
    if (is16(xdt)) {
        acc_ref16(want, old, k, dx.n, xdt);
    } else {
        fp_conv_backward_data(want, dyc, xd, w.f, &p, NULL);
    }
    tap_is_int(ops->conv_backward_data(be, tv(&dx), tv(&dy), tv(&w), &p, compute, 1), FP_OK, "%s bwd data acc", tag);
    same(&dx, want, "conv backward_data, accumulate 1");

    /* backward weights: ACCUMULATES; a 16-bit compute rounds the gradient first */
    T dw = mk(FP_DT_F32, wd, 1.0f, 0.0f);
    float *dwr = dup(dw.f, dw.n);
    if (is16(compute)) {
        float *g = zalloc(dw.n);
        fp_conv_backward_weights(g, dyc, xc, xd, &p, NULL);
        fp_round_add(dwr, g, dw.n, compute);
        free(g);
    } else {
        fp_conv_backward_weights(dwr, dyc, xc, xd, &p, NULL);
    }
    tap_is_int(ops->conv_backward_weights(be, tv(&dw), tv(&dy), tv(&x), &p, compute), FP_OK, "%s bwd weights", tag);
    same(&dw, dwr, "conv backward_weights");

    /* bad dims */
    fp_tensor bad = tv(&y);
    bad.d.c = 5;
    einval(ops->conv_forward(be, bad, tv(&x), tv(&w), &p, compute), "conv_forward with y of 5 channels");
    bad = tv(&w);
    bad.d.c = 2;
    einval(ops->conv_backward_data(be, tv(&dx), tv(&dy), bad, &p, compute, 0), "conv_backward_data, w of cin 2");
    einval(ops->conv_backward_weights(be, tv(&x), tv(&dy), tv(&x), &p, compute), "conv_backward_weights, dw = x");
    free(xc), free(yr), free(dyc), free(k), free(old), free(want), free(dwr);
    drop(&x), drop(&w), drop(&y), drop(&dy), drop(&dx), drop(&dw);
}

/* ---------------------------------------------------------------- batchnorm */

static void test_bn(fp_dtype dt)
{
    fp_dims xd = {3, 4, 4, 5}, cd = {1, 1, 1, 5}, sd = {1, 1, 1, 10};
    fp_bn_params p = {0.1f, 1e-5f};
    T x = mk(dt, xd, 2.0f, 0.5f), y = zeros(dt, xd), g = mk(FP_DT_F32, cd, 0.5f, 1.0f), b = mk(FP_DT_F32, cd, 0.5f, 0);
    T rm = mk(FP_DT_F32, cd, 0.1f, 0), rv = mk(FP_DT_F32, cd, 0.1f, 1.0f), save = zeros(FP_DT_F32, sd);
    float *rmr = dup(rm.f, 5), *rvr = dup(rv.f, 5), *sr = zalloc(10), *yr = zalloc(y.n);
    fp_batchnorm_forward_train(yr, sr, sr + 5, rmr, rvr, x.f, xd, g.f, b.f, &p);
    tap_is_int(ops->bn_forward_train(be, tv(&y), tv(&save), tv(&rm), tv(&rv), tv(&x), tv(&g), tv(&b), &p), FP_OK,
               "bn_forward_train %s", fp_dtype_name(dt));
    same(&y, yr, "bn_forward_train y");
    same(&rm, rmr, "bn_forward_train running_mean");
    same(&rv, rvr, "bn_forward_train running_var");
    same(&save, sr, "bn_forward_train save");

    float *ye = zalloc(y.n);
    fp_batchnorm_forward_eval(ye, x.f, xd, g.f, b.f, rmr, rvr, &p);   /* the updated statistics */
    tap_is_int(ops->bn_forward_eval(be, tv(&y), tv(&x), tv(&g), tv(&b), tv(&rm), tv(&rv), &p), FP_OK, "bn eval");
    same(&y, ye, "bn_forward_eval y");

    T dy = mk(dt, xd, 1.0f, 0.0f), dx = mk(dt, xd, 1.0f, 0.0f), dg = mk(FP_DT_F32, cd, 1, 0), db = mk(FP_DT_F32, cd, 1, 0);
    float *k = zalloc(dx.n), *dgr = dup(dg.f, 5), *dbr = dup(db.f, 5);
    fp_batchnorm_backward(k, dgr, dbr, dy.f, x.f, xd, g.f, sr, sr + 5);   /* sr: what save holds now */
    float *want = dup(dx.f, dx.n);
    if (is16(dt))
        acc_ref16(want, dx.f, k, dx.n, dt);
    else
        fp_batchnorm_backward(want, NULL, NULL, dy.f, x.f, xd, g.f, sr, sr + 5);
    tap_is_int(ops->bn_backward(be, tv(&dx), tv(&dg), tv(&db), tv(&dy), tv(&x), tv(&g), tv(&save), 1), FP_OK,
               "bn_backward");
    same(&dx, want, "bn_backward dx, accumulate 1");
    same(&dg, dgr, "bn_backward dgamma (accumulated)");
    same(&db, dbr, "bn_backward dbeta (accumulated)");
    tap_is_int(ops->bn_backward(be, tv(&dx), (fp_tensor){0}, (fp_tensor){0}, tv(&dy), tv(&x), tv(&g), tv(&save), 0),
               FP_OK, "bn_backward dx only");
    same(&dx, k, "bn_backward dx, accumulate 0");

    fp_tensor bad = tv(&g);
    bad.d.c = 4;
    einval(ops->bn_forward_train(be, tv(&y), tv(&save), tv(&rm), tv(&rv), tv(&x), bad, tv(&b), &p), "bn gamma of 4");
    bad = tv(&save);
    bad.d.c = 5;
    einval(ops->bn_backward(be, tv(&dx), tv(&dg), tv(&db), tv(&dy), tv(&x), tv(&g), bad, 0), "bn save of 5");
    free(rmr), free(rvr), free(sr), free(yr), free(ye), free(k), free(dgr), free(dbr), free(want);
    drop(&x), drop(&y), drop(&g), drop(&b), drop(&rm), drop(&rv), drop(&save), drop(&dy), drop(&dx), drop(&dg), drop(&db);
}

/* ---------------------------------------------------------------- relu, pools */

static void test_relu(fp_dtype dt)
{
    fp_dims d = {2, 3, 3, 4};
    T x = mk(dt, d, 1.0f, 0.0f), y = zeros(dt, d);
    x.f[0] = -0.0f, x.f[1] = 0.0f;   /* -0 passes, as the kernel's v < 0 ? 0 : v */
    to_storage(x.s, x.f, x.n, dt);
    float *yr = zalloc(x.n);
    fp_relu_forward(yr, x.f, x.n);
    tap_is_int(ops->relu_forward(be, tv(&y), tv(&x)), FP_OK, "relu_forward %s", fp_dtype_name(dt));
    same(&y, yr, "relu_forward");
    tap_is_int(ops->relu_forward(be, tv(&x), tv(&x)), FP_OK, "relu_forward in place");
    same(&x, yr, "relu_forward in place");

    T dy = mk(dt, d, 1.0f, 0.0f), dx = mk(dt, d, 1.0f, 0.0f);
    float *masked = zalloc(x.n), *want = dup(dx.f, dx.n);
    fp_relu_backward(masked, dy.f, yr, x.n);   /* 0 + mask */
    if (is16(dt))
        acc_ref16(want, dx.f, masked, dx.n, dt);   /* masked values are exact in dt: the rounding is a no-op */
    else
        fp_relu_backward(want, dy.f, yr, x.n);
    tap_is_int(ops->relu_backward(be, tv(&dx), tv(&dy), tv(&y), 1), FP_OK, "relu_backward accumulate");
    same(&dx, want, "relu_backward, accumulate 1");
    tap_is_int(ops->relu_backward(be, tv(&dx), tv(&dy), tv(&y), 0), FP_OK, "relu_backward overwrite");
    same(&dx, masked, "relu_backward, accumulate 0");
    tap_is_int(ops->relu_backward(be, tv(&dy), tv(&dy), tv(&y), 0), FP_OK, "relu_backward in place");
    same(&dy, masked, "relu_backward, in place on dy");
    einval(ops->relu_backward(be, tv(&dy), tv(&dy), tv(&y), 1), "relu_backward dx aliasing dy while accumulating");
    fp_tensor bad = tv(&y);
    bad.dt = dt == FP_DT_F32 ? FP_DT_F16 : FP_DT_F32;
    einval(ops->relu_forward(be, bad, tv(&x)), "relu_forward y of another format");
    free(yr), free(masked), free(want);
    drop(&x), drop(&y), drop(&dy), drop(&dx);
}

static void test_pools(fp_dtype dt)
{
    fp_pool_params p = {3, 2, 1};
    fp_dims xd = {2, 7, 6, 3}, yd = fp_pool_out_dims(xd, &p), ad = {2, 1, 1, 3};
    T x = mk(dt, xd, 1.0f, 0.0f), y = zeros(dt, yd);
    float *yr = zalloc(y.n);
    int *am = calloc(y.n, sizeof(int)), *amr = calloc(y.n, sizeof(int));
    fp_maxpool_forward(yr, amr, x.f, xd, &p);
    tap_is_int(ops->maxpool_forward(be, tv(&y), am, tv(&x), &p), FP_OK, "maxpool_forward %s", fp_dtype_name(dt));
    same(&y, yr, "maxpool_forward y");
    tap_ok(memcmp(am, amr, y.n * sizeof(int)) == 0, "maxpool_forward argmax as the kernel's");
    T dy = mk(dt, yd, 1.0f, 0.0f), dx = mk(dt, xd, 1.0f, 0.0f);
    float *k = zalloc(dx.n), *want = dup(dx.f, dx.n);
    fp_maxpool_backward(k, dy.f, amr, xd, &p);
    if (is16(dt))
        acc_ref16(want, dx.f, k, dx.n, dt);
    else
        fp_maxpool_backward(want, dy.f, amr, xd, &p);
    tap_is_int(ops->maxpool_backward(be, tv(&dx), tv(&dy), am, &p, 1), FP_OK, "maxpool_backward");
    same(&dx, want, "maxpool_backward, accumulate 1");
    tap_is_int(ops->maxpool_backward(be, tv(&dx), tv(&dy), am, &p, 0), FP_OK, "maxpool_backward overwrite");
    same(&dx, k, "maxpool_backward, accumulate 0");
    fp_tensor bad = tv(&y);
    bad.d.h += 1;
    einval(ops->maxpool_forward(be, bad, NULL, tv(&x), &p), "maxpool_forward with a y one row too tall");

    T ya = zeros(dt, ad), dya = mk(dt, ad, 1.0f, 0.0f);
    float *yar = zalloc(ya.n), *ka = zalloc(x.n);
    fp_avgpool_global_forward(yar, x.f, xd);
    tap_is_int(ops->avgpool_forward(be, tv(&ya), tv(&x)), FP_OK, "avgpool_forward");
    same(&ya, yar, "avgpool_forward");
    fp_avgpool_global_backward(ka, dya.f, xd);
    float *old = dup(k, dx.n);   /* dx now holds k (in its format): accumulate onto it */
    if (is16(dt))
        fp_round_to_dtype(old, dx.n, dt);
    float *wa = dup(old, dx.n);
    if (is16(dt)) {
        acc_ref16(wa, old, ka, dx.n, dt);
    } else {
        fp_avgpool_global_backward(wa, dya.f, xd);
    }
    tap_is_int(ops->avgpool_backward(be, tv(&dx), tv(&dya), 1), FP_OK, "avgpool_backward");
    same(&dx, wa, "avgpool_backward, accumulate 1");
    tap_is_int(ops->avgpool_backward(be, tv(&dx), tv(&dya), 0), FP_OK, "avgpool_backward overwrite");
    same(&dx, ka, "avgpool_backward, accumulate 0");
    einval(ops->avgpool_forward(be, tv(&y), tv(&x)), "avgpool_forward into a spatial y");
    free(yr), free(am), free(amr), free(k), free(want), free(yar), free(ka), free(wa), free(old);
    drop(&x), drop(&y), drop(&dy), drop(&dx), drop(&ya), drop(&dya);
}

/* ---------------------------------------------------------------- linear */

static void test_linear(fp_dtype dt, fp_dtype compute)
{
    int n = 3, in = 2 * 2 * 5, out = 7;
    fp_dims xd = {n, 2, 2, 5}, yd = {n, 1, 1, out}, wd = {out, 1, 1, in}, bd = {1, 1, 1, out};
    T x = mk(dt, xd, 1.0f, 0.0f), y = zeros(dt, yd), w = mk(FP_DT_F32, wd, 0.3f, 0), b = mk(FP_DT_F32, bd, 0.3f, 0);
    fp_round_to_dtype(w.f, w.n, compute);
    fp_round_to_dtype(b.f, b.n, compute);
    memcpy(w.s, w.f, w.n * sizeof(float));
    memcpy(b.s, b.f, b.n * sizeof(float));
    float *xc = dup(x.f, x.n), *yr = zalloc(y.n);
    fp_round_to_dtype(xc, x.n, compute);
    fp_linear_forward(yr, xc, n, in, out, w.f, b.f);
    tap_is_int(ops->linear_forward(be, tv(&y), tv(&x), tv(&w), tv(&b), compute), FP_OK, "linear_forward %s/%s",
               fp_dtype_name(dt), fp_dtype_name(compute));
    same(&y, yr, "linear_forward");

    T dy = mk(dt, yd, 1.0f, 0.0f), dx = mk(dt, xd, 1.0f, 0.0f), dw = mk(FP_DT_F32, wd, 1, 0), db = mk(FP_DT_F32, bd, 1, 0);
    float *dyc = dup(dy.f, dy.n), *k = zalloc(dx.n), *want = dup(dx.f, dx.n);
    fp_round_to_dtype(dyc, dy.n, compute);
    fp_linear_backward(k, NULL, NULL, dyc, xc, n, in, out, w.f);
    if (is16(dt))
        acc_ref16(want, dx.f, k, dx.n, dt);
    else
        fp_linear_backward(want, NULL, NULL, dyc, xc, n, in, out, w.f);
    tap_is_int(ops->linear_backward_data(be, tv(&dx), tv(&dy), tv(&w), compute, 1), FP_OK, "linear_backward_data");
    same(&dx, want, "linear_backward_data, accumulate 1");
    tap_is_int(ops->linear_backward_data(be, tv(&dx), tv(&dy), tv(&w), compute, 0), FP_OK, "linear bwd data, 0");
    same(&dx, k, "linear_backward_data, accumulate 0");

    float *dwr = dup(dw.f, dw.n), *dbr = dup(db.f, db.n);
    if (is16(compute)) {
        float *gw = zalloc(dw.n), *gb = zalloc(db.n);
        fp_linear_backward(NULL, gw, gb, dyc, xc, n, in, out, w.f);
        fp_round_add(dwr, gw, dw.n, compute);
        fp_round_add(dbr, gb, db.n, compute);
        free(gw), free(gb);
    } else {
        fp_linear_backward(NULL, dwr, dbr, dyc, xc, n, in, out, w.f);
    }
    tap_is_int(ops->linear_backward_weights(be, tv(&dw), tv(&db), tv(&dy), tv(&x), tv(&w), compute), FP_OK,
               "linear_backward_weights");
    same(&dw, dwr, "linear_backward_weights dw (accumulated)");
    same(&db, dbr, "linear_backward_weights db (accumulated)");
    fp_tensor bad = tv(&w);
    bad.d.c = in - 1;
    einval(ops->linear_forward(be, tv(&y), tv(&x), bad, tv(&b), compute), "linear_forward, w of in - 1");
    bad = tv(&b);
    bad.d.c = out + 1;
    einval(ops->linear_backward_weights(be, tv(&dw), bad, tv(&dy), tv(&x), tv(&w), compute), "linear, db of out + 1");
    free(xc), free(yr), free(dyc), free(k), free(want), free(dwr), free(dbr);
    drop(&x), drop(&y), drop(&w), drop(&b), drop(&dy), drop(&dx), drop(&dw), drop(&db);
}

/* ---------------------------------------------------------------- residual, casts */

static void test_add_acc(fp_dtype ad, fp_dtype bd, fp_dtype yd)
{
    fp_dims d = {2, 3, 3, 7};   /* 126 elements */
    T a = mk(ad, d, 1.0f, 0.0f), b = mk(bd, d, 1.0f, 0.0f), y = zeros(yd, d);
    float *yr = zalloc(a.n);
    fp_add_forward(yr, a.f, b.f, a.n);
    tap_is_int(ops->add(be, tv(&y), tv(&a), tv(&b)), FP_OK, "add %s + %s -> %s", fp_dtype_name(ad),
               fp_dtype_name(bd), fp_dtype_name(yd));
    same(&y, yr, "add");
    float *r = dup(a.f, a.n);
    fp_accumulate(r, b.f, a.n);
    tap_is_int(ops->accumulate(be, tv(&a), tv(&b)), FP_OK, "accumulate %s += %s", fp_dtype_name(ad), fp_dtype_name(bd));
    same(&a, r, "accumulate");
    fp_tensor bad = tv(&b);
    bad.d.n = 1;
    einval(ops->add(be, tv(&y), tv(&a), bad), "add of different counts");
    einval(ops->accumulate(be, tv(&a), bad), "accumulate of different counts");
    free(yr), free(r);
    drop(&a), drop(&b), drop(&y);
}

static void test_casts(void)
{
    fp_dtype dts[3] = {FP_DT_F32, FP_DT_F16, FP_DT_BF16};
    fp_dims d = {1, 1, 1, 300};
    T src32 = mk(FP_DT_F32, d, 70000.0f, 0.0f);   /* beyond fp16's range: overflow to Inf */
    src32.f[0] = 1e-8f, src32.f[1] = -0.0f, src32.f[2] = 1.0f + 1.0f / 4096;
    memcpy(src32.s, src32.f, src32.n * sizeof(float));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            T s = zeros(dts[i], d), t = zeros(dts[j], d);
            to_storage(s.s, src32.f, s.n, dts[i]);
            float *sv = dup(src32.f, s.n), *want;
            if (is16(dts[i]))
                fp_widen_array(sv, s.s, s.n, dts[i]);
            want = sv;   /* t's storage of the widened source = narrow(widen(s)) */
            tap_is_int(ops->cast(be, tv(&t), tv(&s)), FP_OK, "cast %s -> %s", fp_dtype_name(dts[i]),
                       fp_dtype_name(dts[j]));
            same(&t, want, "cast");
            free(sv);
            drop(&s), drop(&t);
        }
    fp_dtype tos[4] = {FP_DT_F32, FP_DT_TF32, FP_DT_F16, FP_DT_BF16};
    for (int i = 0; i < 4; i++) {
        T t = zeros(FP_DT_F32, d);
        float *want = dup(src32.f, src32.n);
        fp_round_to_dtype(want, src32.n, tos[i]);
        tap_is_int(ops->round(be, tv(&t), tv(&src32), tos[i]), FP_OK, "round to %s", fp_dtype_name(tos[i]));
        same(&t, want, "round (copy)");
        memcpy(t.s, src32.f, t.n * sizeof(float));
        tap_is_int(ops->round(be, tv(&t), tv(&t), tos[i]), FP_OK, "round in place to %s", fp_dtype_name(tos[i]));
        same(&t, want, "round (in place)");
        free(want);
        drop(&t);
    }
    T h = zeros(FP_DT_F16, d);
    einval(ops->round(be, tv(&h), tv(&src32), FP_DT_F16), "round into a 16-bit tensor");
    fp_tensor bad = tv(&h);
    bad.d.c = 299;
    einval(ops->cast(be, bad, tv(&src32)), "cast of 300 values into 299");
    bad = tv(&h);
    bad.dt = FP_DT_TF32;
    einval(ops->cast(be, bad, tv(&src32)), "cast into TF32 storage");
    bad.p = NULL;
    bad.dt = FP_DT_F16;
    einval(ops->cast(be, bad, tv(&src32)), "cast into a NULL tensor");
    drop(&h), drop(&src32);
}

/* ---------------------------------------------------------------- loss, scaler, memory */

static void test_loss_scaler(void)
{
    fp_dims d = {4, 1, 1, 6};
    T lg = mk(FP_DT_F32, d, 3.0f, 0.0f), dl = zeros(FP_DT_F32, d);
    int labels[4] = {0, 5, 2, 2}, c1 = -1, c5 = -1, r1 = -1, r5 = -1;
    float loss = 0, lref = 0, *dref = zalloc(dl.n);
    fp_softmax_xent(&lref, dref, &r1, &r5, lg.f, labels, 4, 6);
    for (size_t i = 0; i < dl.n; i++)
        dref[i] *= 256.0f;
    tap_is_int(ops->softmax_xent(be, &loss, tv(&dl), &c1, &c5, tv(&lg), labels, 256.0f), FP_OK, "softmax_xent");
    tap_ok(memcmp(&loss, &lref, sizeof loss) == 0 && c1 == r1 && c5 == r5, "softmax_xent loss %g and hits %d/%d as "
           "the kernel's (bit-exact)", loss, c1, c5);
    same(&dl, dref, "softmax_xent dlogits scaled by 256");
    fp_tensor bad = tv(&lg);
    bad.d = (fp_dims){4, 2, 1, 3};
    einval(ops->softmax_xent(be, &loss, (fp_tensor){0}, NULL, NULL, bad, labels, 1.0f), "softmax_xent, spatial logits");

    T g = mk(FP_DT_F32, (fp_dims){1, 1, 1, 1000}, 100.0f, 0.0f);
    float *gr = dup(g.f, g.n);
    int found = -1, fr = fp_unscale_and_check(gr, g.n, 1.0f / 64);
    tap_is_int(ops->unscale_check(be, &found, tv(&g), 1.0f / 64), FP_OK, "unscale_check");
    tap_ok(found == fr && found == 0, "unscale_check: finite gradients, found_inf 0");
    same(&g, gr, "unscale_check unscaled values");
    ((float *)g.s)[500] = INFINITY;
    tap_is_int(ops->unscale_check(be, &found, tv(&g), 0.5f), FP_OK, "unscale_check with an Inf");
    tap_is_int(found, 1, "unscale_check: found_inf 1 on an Inf");
    einval(ops->unscale_check(be, NULL, tv(&g), 0.5f), "unscale_check without found_inf");
    free(dref), free(gr);
    drop(&lg), drop(&dl), drop(&g);
}

static void test_memory(void)
{
    fp_backend *b = NULL;
    tap_is_int(ops->create(&b), FP_OK, "create a second instance");
    fp_backend_mem m0, m1, m2;
    ops->memory(b, &m0);
    tap_ok(m0.allocated == 0 && m0.workspace == 0 && m0.staging == 0, "a fresh instance holds nothing");
    void *p = NULL, *q = NULL;
    tap_is_int(ops->alloc(b, &p, 4096), FP_OK, "alloc 4096");
    tap_is_int(ops->alloc(b, &q, 1000), FP_OK, "alloc 1000");
    ops->memory(b, &m1);
    tap_ok(m1.allocated == 5096 && m1.allocated_peak == 5096, "accounting: %zu allocated, %zu peak", m1.allocated,
           m1.allocated_peak);
    unsigned char host[1000], back[1000];
    for (int i = 0; i < 1000; i++)
        host[i] = (unsigned char)(i * 7);
    tap_ok(ops->upload(b, p, host, 1000) == FP_OK && ops->copy(b, q, p, 1000) == FP_OK &&
           ops->download(b, back, q, 1000) == FP_OK && memcmp(back, host, 1000) == 0, "upload, copy, download");
    unsigned char zero[1000] = {0};
    tap_ok(ops->zero(b, q, 1000) == FP_OK && ops->download(b, back, q, 1000) == FP_OK && memcmp(back, zero, 1000) == 0,
           "zero");
    ops->free(b, q, 1000);
    ops->memory(b, &m2);
    tap_ok(m2.allocated == 4096 && m2.allocated_peak == 5096, "free: %zu allocated, peak kept", m2.allocated);
    tap_is_int(ops->reserve(b, 100, 50), FP_OK, "reserve staging");
    ops->memory(b, &m2);
    tap_is_uint(m2.staging, (3 * 100 + 50) * sizeof(float), "staging: three activation slots and the weight slot");
    tap_is_int(ops->reserve(b, 10, 0), FP_OK, "a smaller reserve");
    ops->memory(b, &m2);
    tap_is_uint(m2.staging, (3 * 100 + 50) * sizeof(float), "reserve never shrinks");
    tap_is_int(ops->sync(b), FP_OK, "sync");
    ops->set_threads(b, 0);   /* clamped to 1; no observable effect beyond not failing */
    ops->free(b, p, 4096);
    ops->destroy(b);
    ops->destroy(NULL);
    tap_is_str(ops->name, "cpu", "the table's name");
    tap_is_int(ops->host_memory, 1, "the CPU backend's memory is host memory");
}

int main(void)
{
    ops = fp_backend_cpu();
    if (ops->create(&be)) {
        tap_diag("create: %s", fp_error_message());
        return 1;
    }
    test_memory();
    test_conv(FP_DT_F32, FP_DT_F32, FP_DT_F32, 1);
    test_conv(FP_DT_F32, FP_DT_F32, FP_DT_TF32, 2);
    test_conv(FP_DT_F32, FP_DT_F16, FP_DT_F16, 2);    /* the fp32 image into conv1 under fp16 */
    test_conv(FP_DT_F16, FP_DT_F16, FP_DT_F16, 1);
    test_conv(FP_DT_BF16, FP_DT_BF16, FP_DT_BF16, 2);
    fp_dtype dts[3] = {FP_DT_F32, FP_DT_F16, FP_DT_BF16};
    for (int i = 0; i < 3; i++) {
        test_bn(dts[i]);
        test_relu(dts[i]);
        test_pools(dts[i]);
        test_linear(dts[i], i == 0 ? FP_DT_F32 : dts[i]);
    }
    test_linear(FP_DT_F32, FP_DT_TF32);
    test_add_acc(FP_DT_F32, FP_DT_F32, FP_DT_F32);
    test_add_acc(FP_DT_F16, FP_DT_F16, FP_DT_F16);
    test_add_acc(FP_DT_BF16, FP_DT_BF16, FP_DT_BF16);
    test_add_acc(FP_DT_F16, FP_DT_F32, FP_DT_F16);    /* mixed: through fp32 */
    test_add_acc(FP_DT_F32, FP_DT_BF16, FP_DT_F32);
    test_casts();
    test_loss_scaler();
    fp_backend_mem m;
    ops->memory(be, &m);
    tap_ok(m.staging > 0 && m.staging_peak >= m.staging && m.workspace_peak >= m.workspace,
           "the ops' staging (%zu bytes) and workspace (%zu) are accounted", m.staging, m.workspace);
    ops->destroy(be);
    return tap_done();
}
