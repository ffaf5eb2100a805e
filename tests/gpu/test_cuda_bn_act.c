/* test_cuda_bn_act.c — the CUDA backend's fused batchnorm (+ add) + relu (backend.h bn_act_*, cuDNN's
 * BN_ACTIVATION / BN_ADD_ACTIVATION) against the CPU backend's fused op per format (fp32 / fp16 / bf16), with
 * the tolerances stated at each check; where cuDNN does not fuse a format, the query and the forward must
 * answer FP_EUNAVAIL and leave y as it was. Then a small ResNet on the device trained one step with fusion
 * on and off. Skips with a TAP reason when built without CUDA or when no GPU is usable. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "numfmt.h"
#include "trainer/backend_cuda.h"
#include "trainer/model.h"

static const fp_backend_ops *C, *G;
static fp_backend *cb, *gb;
static uint32_t rng = 0x2468aceu;

/* One tensor on both sides: host memory h (the CPU backend's) and device memory d, the same bytes. */
typedef struct {
    fp_tensor h, d;
    size_t bytes;
} pair;

static pair mk(fp_dtype dt, fp_dims d, float scale, float shift)
{
    pair p = {fp_tensor_of(NULL, dt, d), fp_tensor_of(NULL, dt, d), 0};
    size_t n = fp_tensor_count(&p.h);
    p.bytes = n * (size_t)fp_dtype_bytes(dt);
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = scale * tu_uniform32_pm1(&rng) + shift;
    p.h.p = malloc(p.bytes);
    if (dt == FP_DT_F32)
        memcpy(p.h.p, f, p.bytes);
    else
        fp_narrow_array(p.h.p, f, n, dt);
    free(f);
    p.d.p = gtu_dev_copy(p.h.p, p.bytes);
    return p;
}

static void drop(pair *p)
{
    free(p->h.p);
    cudaFree(p->d.p);
}

/* The device tensor's bytes into the host side (the host's own values are replaced). */
static int pull(pair *p)
{
    return G->download(gb, p->h.p, p->d.p, p->bytes) || G->sync(gb);
}

/* max |a - b| / max |b| over n values of format dt (a, b host bytes). */
static double rel_max(const void *a, const void *b, size_t n, fp_dtype dt)
{
    float *fa = malloc(n * sizeof(float)), *fb = malloc(n * sizeof(float));
    if (dt == FP_DT_F32) {
        memcpy(fa, a, n * sizeof(float));
        memcpy(fb, b, n * sizeof(float));
    } else {
        fp_widen_array(fa, a, n, dt);
        fp_widen_array(fb, b, n, dt);
    }
    double m = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        m = fmax(m, fabs(fb[i]));
        d = fmax(d, fabs((double)fa[i] - fb[i]));
    }
    free(fa);
    free(fb);
    return m > 0 ? d / m : d;
}

/* Stated tolerances, relative to the largest magnitude of the tensor: fp32 from the summation order of the
 * statistics and gradient sums (cuDNN's against the CPU's double sums); 16-bit from two roundings of the
 * format at the largest value (2^-10 fp16, 2^-7 bf16 per ulp) after that. */
static double tol_of(fp_dtype dt) { return dt == FP_DT_F32 ? 1e-4 : dt == FP_DT_F16 ? 0x1p-9 : 0x1p-6; }

static void op_case(fp_dtype dt, int with_add)
{
    fp_dims d = {4, 7, 5, 64};
    const char *nm = fp_dtype_name(dt), *kind = with_add ? "bn+add+relu" : "bn+relu";
    int c = d.c;
    size_t n = (size_t)d.n * d.h * d.w * d.c;
    pair x = mk(dt, d, 2.0f, 0.5f), z = mk(dt, d, 1.0f, 0.0f), y = mk(dt, d, 0.0f, 7.0f), dy = mk(dt, d, 1.0f, 0.0f);
    pair dx = mk(dt, d, 0.0f, 0.0f), dz = mk(dt, d, 0.0f, 0.0f);
    fp_dims vd = {1, 1, 1, c}, sd = {1, 1, 1, 2 * c};
    pair g = mk(FP_DT_F32, vd, 0.5f, 1.0f), b = mk(FP_DT_F32, vd, 0.2f, 0.0f), rm = mk(FP_DT_F32, vd, 0.0f, 0.0f);
    pair rv = mk(FP_DT_F32, vd, 0.0f, 1.0f), sv = mk(FP_DT_F32, sd, 0.0f, 0.0f);
    /* dgamma / dbeta start non-zero: backend.h accumulates into them (cuDNN with beta 1) */
    pair dg = mk(FP_DT_F32, vd, 0.0f, 0.25f), db = mk(FP_DT_F32, vd, 0.0f, -0.5f);
    fp_bn_params p = {0.1f, 1e-5f};
    size_t rsv_bytes = 0;
    void *rsv = NULL;
    int q = G->bn_act_query(gb, &rsv_bytes, x.d, with_add);
    if (q == FP_EUNAVAIL) {   /* not fused here: the forward must refuse too, before writing anything */
        tap_diag("%s %s: cuDNN does not fuse it (%s)", nm, kind, fp_error_message());
        int rc = G->bn_act_forward_train(gb, y.d, sv.d, rm.d, rv.d, x.d, with_add ? z.d : (fp_tensor){0}, g.d, b.d, &p,
                                         NULL, 0);
        void *before = malloc(y.bytes);
        memcpy(before, y.h.p, y.bytes);
        int same = !pull(&y) && !memcmp(before, y.h.p, y.bytes);
        free(before);
        tap_ok(rc == FP_EUNAVAIL && same, "%s %s: query and forward answer FP_EUNAVAIL, y untouched", nm, kind);
        goto out;
    }
    if (q == FP_OK && rsv_bytes)
        rsv = gtu_dev_copy(NULL, rsv_bytes);
    int rc = q ? q : G->bn_act_forward_train(gb, y.d, sv.d, rm.d, rv.d, x.d, with_add ? z.d : (fp_tensor){0}, g.d,
                                             b.d, &p, rsv, rsv_bytes);
    /* the CPU's fused forward on the same inputs */
    void *yc = malloc(y.bytes);
    float svc[128], rmc[64] = {0}, rvc[64];
    for (int i = 0; i < c; i++)
        rvc[i] = 1.0f;
    fp_tensor Yc = fp_tensor_of(yc, dt, d);
    rc = rc ? rc : C->bn_act_forward_train(cb, Yc, fp_tensor_of(svc, FP_DT_F32, sd), fp_tensor_of(rmc, FP_DT_F32, vd),
                                           fp_tensor_of(rvc, FP_DT_F32, vd), x.h, with_add ? z.h : (fp_tensor){0},
                                           g.h, b.h, &p, NULL, 0);
    rc = rc ? rc : pull(&y) || pull(&sv) || pull(&rv);
    double ey = rc ? INFINITY : rel_max(y.h.p, yc, n, dt);
    double es = rc ? INFINITY : rel_max(sv.h.p, svc, 2 * (size_t)c, FP_DT_F32);
    double er = rc ? INFINITY : rel_max(rv.h.p, rvc, (size_t)c, FP_DT_F32);
    tap_ok(!rc && ey <= tol_of(dt) && es <= 1e-4 && er <= 1e-4,
           "%s %s forward: y within %.3g of max |y| (%.3g), saved / running statistics within 1e-4 (%.3g, %.3g) [%s]",
           nm, kind, tol_of(dt), ey, es, er, rc ? fp_error_message() : "ok");
    /* backward from the device's own y, reserve and statistics; the CPU from the same y and statistics */
    rc = rc ? rc : G->bn_act_backward(gb, dx.d, with_add ? dz.d : (fp_tensor){0}, dg.d, db.d, dy.d, y.d, x.d, g.d, b.d,
                                      sv.d, &p, rsv, rsv_bytes, 0, 0);
    void *dxc = calloc(1, dx.bytes), *dzc = calloc(1, dz.bytes);
    float dgc[64], dbc[64];
    for (int i = 0; i < c; i++)
        dgc[i] = 0.25f, dbc[i] = -0.5f;
    fp_tensor DZc = with_add ? fp_tensor_of(dzc, dt, d) : (fp_tensor){0};
    rc = rc ? rc : C->bn_act_backward(cb, fp_tensor_of(dxc, dt, d), DZc, fp_tensor_of(dgc, FP_DT_F32, vd),
                                      fp_tensor_of(dbc, FP_DT_F32, vd), dy.h, y.h, x.h, g.h, b.h, sv.h, &p, NULL, 0,
                                      0, 0);
    rc = rc ? rc : pull(&dx) || pull(&dz) || pull(&dg) || pull(&db);
    double ex = rc ? INFINITY : rel_max(dx.h.p, dxc, n, dt);
    double eg = rc ? INFINITY : rel_max(dg.h.p, dgc, (size_t)c, FP_DT_F32);
    double eb = rc ? INFINITY : rel_max(db.h.p, dbc, (size_t)c, FP_DT_F32);
    tap_ok(!rc && ex <= tol_of(dt) && eg <= 1e-3 && eb <= 1e-3,
           "%s %s backward: dx within %.3g of max |dx| (%.3g), dgamma / dbeta within 1e-3 (%.3g, %.3g) [%s]", nm, kind,
           tol_of(dt), ex, eg, eb, rc ? fp_error_message() : "ok");
    /* dz = y > 0 ? dy : 0, exact in its format: the same values (cuDNN's mask from its own forward, the CPU's from
     * that forward's y; +0 and -0 count as equal: a mask by multiplication gives -0 where dy < 0) */
    tap_ok(!rc && (!with_add || rel_max(dz.h.p, dzc, n, dt) == 0), "%s %s backward: dz exact (the masked dy)", nm,
           kind);
    free(yc);
    free(dxc);
    free(dzc);
    cudaFree(rsv);
out:
    drop(&x), drop(&z), drop(&y), drop(&dy), drop(&dx), drop(&dz), drop(&g), drop(&b), drop(&rm), drop(&rv);
    drop(&sv), drop(&dg), drop(&db);
}

/* A small bottleneck ResNet on the device, one training step with fusion on and off under policy. */
static void model_case(const char *policy)
{
    enum { N = 8, SIZE = 32, CLASSES = 10 };
    static const int layers[4] = {1, 1, 1, 1};
    fp_model *m[2] = {NULL, NULL};
    float loss[2] = {NAN, NAN};
    float *grads[2] = {NULL, NULL};
    int found = 0, ran[2] = {-1, -1}, rc = FP_OK;
    float *x = gtu_images((size_t)N * SIZE * SIZE * 3, 11);
    int *lab = gtu_labels(N, CLASSES);
    for (int k = 0; k < 2 && !rc; k++) {
        rc = fp_resnet_create(&m[k], "resnet-fuse", 1, layers, 16, CLASSES, SIZE, 3);
        rc = rc ? rc : fp_model_set_backend(m[k], fp_backend_cuda(), NULL);
        rc = rc ? rc : fp_model_set_policy(m[k], fp_policy_find(policy));
        if (rc)
            break;
        fp_model_set_fusion(m[k], k);
        fp_model_zero_grad(m[k]);
        rc = fp_model_train_step(m[k], &loss[k], NULL, NULL, x, lab, N);
        found = fp_model_fusion(m[k], &ran[k], NULL);
        size_t np = fp_model_num_params(m[k]);
        grads[k] = malloc(np * sizeof(float));
        if (!rc)
            memcpy(grads[k], fp_model_grads(m[k]), np * sizeof(float));
    }
    tap_diag("%s: %d chains the backend fuses, %d ran fused with fusion on", policy, found, ran[1]);
    /* ran counts the chains whose forward ran fused; a backward refusal after it leaves the chain unfused for
     * good (not in found): so ran >= found */
    tap_ok(!rc && ran[0] == 0 && ran[1] >= found, "%s: one step each, fusion off runs none, on runs every chain "
           "the backend fuses (%d) [%s]", policy, found, rc ? fp_error_message() : "ok");
    /* stated: fp32 nothing fused differs only by summation order (1e-4); 16-bit one extra rounding per fused
     * layer through ~50 layers: 2^-7 (fp16) and 2^-4 (bf16) on the loss, as the CPU test */
    double tl = strcmp(policy, "bf16") == 0 ? 0x1p-4 : strcmp(policy, "fp16") == 0 ? 0x1p-7 : 1e-4;
    double el = fabs((double)loss[1] - loss[0]) / fmax(fabs((double)loss[0]), 1e-6);
    double gd = 0, gn = 0;
    for (size_t i = 0; !rc && i < fp_model_num_params(m[0]); i++) {
        gd += ((double)grads[1][i] - grads[0][i]) * ((double)grads[1][i] - grads[0][i]);
        gn += (double)grads[0][i] * grads[0][i];
    }
    double eg = gn > 0 ? sqrt(gd / gn) : 0;
    tap_ok(!rc && el <= tl && eg <= 8 * tl,
           "%s: fused vs unfused loss within %.3g (%.3g), gradients rel. L2 within %.3g (%.3g)", policy, tl, el, 8 * tl,
           eg);
    for (int k = 0; k < 2; k++) {
        fp_model_free(m[k]);
        free(grads[k]);
    }
    free(x);
    free(lab);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    if (gtu_backends_or_fail(&C, &cb, &G, &gb, (size_t)1 << 30, "bn_act test"))
        return tap_done();
    /* no plan up front: a format cuDNN does not fuse has one check (its refusal) instead of three */
    static const fp_dtype dts[3] = {FP_DT_F32, FP_DT_F16, FP_DT_BF16};
    for (int k = 0; k < 3; k++)
        for (int a = 0; a < 2; a++)
            op_case(dts[k], a);
    G->destroy(gb);
    C->destroy(cb);
    model_case("fp32");
    model_case("fp16");
    model_case("bf16");
#endif
    return tap_done();
}
