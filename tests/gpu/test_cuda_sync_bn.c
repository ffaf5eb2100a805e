/* test_cuda_sync_bn.c — the CUDA backend's synchronised batchnorm ops (backend.h bn_sync_*, trainer/cuda/sync_bn.cu)
 * against the CPU backend's with one rank's reduction (the identity: the sums are used as each backend made
 * them), for fp32, fp16 and bf16 storage: the sums, the saved and running statistics, y, the backward's sums with
 * dgamma / dbeta, dx with accumulate 0 and 1. Both sum in double in different orders, so the fp32 results agree
 * to a few fp32 ulps (tolerances next to each check) and 16-bit outputs to one ulp of their format. Skips with a
 * TAP reason when built without CUDA or when no GPU is usable. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/backend_cuda.h"

static const fp_backend_ops *C, *G;
static fp_backend *cb, *gb;
static uint32_t rng = 0x5eed5u;

enum { N = 4, H = 6, W = 5, CH = 40 };

/* The same tensor on both backends: h (host memory of the CPU backend) and d (device). */
typedef struct {
    fp_tensor h, d;
    size_t bytes;
} pair;

static pair mk(fp_dtype dt, fp_dims d, float scale, float offset)
{
    pair p = {fp_tensor_of(NULL, dt, d), fp_tensor_of(NULL, dt, d), 0};
    size_t n = fp_tensor_count(&p.h);
    p.bytes = n * (size_t)fp_dtype_bytes(dt);
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = offset + scale * tu_uniform32_pm1(&rng);
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

static pair vec(int c, float scale, float offset) { return mk(FP_DT_F32, (fp_dims){1, 1, 1, c}, scale, offset); }

static void drop(pair *p)
{
    C->free(cb, p->h.p, p->bytes);
    G->free(gb, p->d.p, p->bytes);
}

/* Worst |device - host| / (abs + rel * |host|) over the tensor, both widened to fp32 (<= 1 passes). */
static double worst(const pair *p, double abs, double rel)
{
    size_t n = fp_tensor_count(&p->h);
    void *raw = malloc(p->bytes);
    float *d = malloc(n * sizeof *d), *h = malloc(n * sizeof *h);
    double w = INFINITY;
    if (!G->download(gb, raw, p->d.p, p->bytes) && !G->sync(gb)) {
        if (p->h.dt == FP_DT_F32) {
            memcpy(d, raw, p->bytes);
            memcpy(h, p->h.p, p->bytes);
        } else {
            fp_widen_array(d, raw, n, p->h.dt);
            fp_widen_array(h, p->h.p, n, p->h.dt);
        }
        w = 0;
        for (size_t i = 0; i < n; i++) {
            double e = fabs((double)d[i] - h[i]) / (abs + rel * fabs((double)h[i]));
            if (!(e <= w))
                w = e;
        }
    }
    free(raw);
    free(d);
    free(h);
    return w;
}

/* One ulp of dt relative (fp32: a few ulps, for results of fp32 arithmetic on statistics that differ by one). */
static double ulp(fp_dtype dt) { return dt == FP_DT_F16 ? 1.0 / 1024 : dt == FP_DT_BF16 ? 1.0 / 128 : 4e-7; }

static void one_format(fp_dtype dt)
{
    const char *f = fp_dtype_name(dt);
    fp_dims xd = {N, H, W, CH};
    size_t rows = (size_t)N * H * W;
    pair x = mk(dt, xd, 0.5f, 3.0f), dy = mk(dt, xd, 1.0f, 0.1f), y = mk(dt, xd, 0, 0), dx = mk(dt, xd, 1.0f, 0);
    pair g = vec(CH, 0.5f, 1.0f), b = vec(CH, 0.5f, 0), rm = vec(CH, 0.1f, 0), rv = vec(CH, 0.1f, 1.0f);
    pair save = vec(2 * CH, 0, 0), a1 = vec(2 * CH + 1, 0, 0), a2 = vec(2 * CH + 1, 0, 0), ab = vec(2 * CH + 1, 0, 0);
    pair dg = vec(CH, 0.1f, 0), db = vec(CH, 0.1f, 0);
    fp_bn_params p = {0.1f, 1e-5f};
    fp_tensor none = {0};
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {   /* k 0: the CPU backend on the host copies, 1: the CUDA one */
        const fp_backend_ops *o = k ? G : C;
        fp_backend *be = k ? gb : cb;
#define T(pr) (k ? (pr).d : (pr).h)
        rc = o->bn_sync_stats(be, T(a1), T(x), none);
        rc = rc ? rc : o->bn_sync_stats(be, T(a2), T(x), T(a1));
        rc = rc ? rc : o->bn_sync_forward(be, T(y), T(save), T(rm), T(rv), T(x), T(g), T(b), T(a1), T(a2), &p);
        rc = rc ? rc : o->bn_sync_backward_sums(be, T(ab), T(dg), T(db), T(dy), T(x), T(save));
        rc = rc ? rc : o->bn_sync_backward_dx(be, T(dx), T(dy), T(x), T(g), T(save), T(ab), 1);
#undef T
    }
    if (!rc)
        rc = G->sync(gb);
    tap_is_int(rc, FP_OK, "%s: the ops on both backends (%s)", f, rc ? fp_error_message() : "ok");
    /* sums of rows values of size ~3 (first pass) or ~0.5 (centred): double sums in another order, rounded to
     * fp32: 2 fp32 ulps, and 1e-6 x rows absolute for the centred first sum (a cancellation to ~0) */
    tap_ok(worst(&a1, 1e-6, 2.4e-7) <= 1 && worst(&a2, 1e-6 * (double)rows, 2.4e-7) <= 1,
           "%s: the sums (rel 2.4e-7; the centred sum abs %g)", f, 1e-6 * (double)rows);
    tap_ok(worst(&save, 1e-7, 1e-6) <= 1 && worst(&rm, 1e-7, 1e-6) <= 1 && worst(&rv, 1e-7, 1e-6) <= 1,
           "%s: saved mean / invstd and running statistics (rel 1e-6)", f);
    double wy = worst(&y, 1e-6, ulp(dt));
    tap_ok(wy <= 1, "%s: y within one ulp of the format (worst %.3g of it)", f, wy);
    tap_ok(worst(&ab, 1e-5 * (double)rows, 1e-6) <= 1 && worst(&dg, 1e-5, 1e-6) <= 1 && worst(&db, 1e-5, 1e-6) <= 1,
           "%s: the backward's sums, dgamma and dbeta accumulated (rel 1e-6)", f);
    /* dx is a difference of terms of size |dy| (~1): its absolute tolerance is taken at that scale */
    double wdx = worst(&dx, dt == FP_DT_F32 ? 1e-6 : 2 * ulp(dt), ulp(dt));
    tap_ok(wdx <= 1, "%s: dx accumulated onto its old values (worst %.3g of the tolerance)", f, wdx);
    pair *all[] = {&x, &dy, &y, &dx, &g, &b, &rm, &rv, &save, &a1, &a2, &ab, &dg, &db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        drop(all[i]);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    if (gtu_backends_or_fail(&C, &cb, &G, &gb, (size_t)256 << 20, "sync bn test"))
        return tap_done();
    tap_plan(3 * 6);
    one_format(FP_DT_F32);
    one_format(FP_DT_F16);
    one_format(FP_DT_BF16);
    G->destroy(gb);
    C->destroy(cb);
#endif
    return tap_done();
}
