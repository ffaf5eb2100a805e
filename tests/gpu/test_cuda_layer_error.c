/* test_cuda_layer_error.c — the per-layer rounding error summed on the device (trainer/cuda/layer_error.cu:
 * kernels.h fp_cuda_layer_error, and analysis.h fp_layer_error_on on a CUDA backend instance, through
 * layer_error_dev.h) against fp_layer_error on the host on the same data: fp32, fp16 and bf16 x, sizes around
 * the block (256 threads), the grid cap (1024 blocks = 262144 values) and beyond it, zeros, Inf and NaN, n = 0.
 * Tolerances: max_abs bit for bit (a maximum does not depend on order); the non-finite figures exactly (Inf,
 * Inf, NaN); rel_l2 and cosine within 1e-12 relative. Both sides sum in double, in another order (the host in
 * 8 lanes of n / 8 terms, the device per thread, per block and the blocks in order): a sum of L non-negative
 * terms is off by at most (L - 1) 2^-53 relative, 1.4e-11 for the host's lanes at n = 10^6, but those
 * roundings have random signs, about sqrt(L) 2^-53 = 4e-14 together; the data are seeded, so a pass repeats.
 * Also: one host wait per call (only the sums come back), the instance's workspace made once and accounted
 * as staging, the host dispatch of fp_layer_error_on, FP_EINVAL for a bad dtype. Skips with a TAP reason
 * without CUDA or GPU. */
#include "config.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "numfmt.h"
#include "trainer/analysis/analysis.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/layer_error_dev.h"

#define REL_TOL 1e-12

static uint64_t rng = 0x1A7E4E44ull;
static const fp_backend_ops *G;
static fp_backend *be;
static void *d_work;   /* the kernels.h call's workspace */

static int close_rel(double got, double want)
{
    return got == want || (isnan(got) && isnan(want)) || fabs(got - want) <= REL_TOL * fabs(want);
}

static int same(const fp_layer_err_t *got, const fp_layer_err_t *want)
{
    return close_rel(got->rel_l2, want->rel_l2) && close_rel(got->cosine, want->cosine) &&
           (got->max_abs == want->max_abs || (isnan(got->max_abs) && isnan(want->max_abs)));
}

/* Device memory of the instance holding bytes from host (NULL on failure); drop frees it. */
static void *upload(const void *host, size_t bytes)
{
    void *d = NULL;
    if (G->alloc(be, &d, bytes ? bytes : 1) || (bytes && G->upload(be, d, host, bytes)))
        return NULL;
    return d;
}

static void drop(void *d, size_t bytes) { G->free(be, d, bytes ? bytes : 1); }

/* x (n values of dt) against ref: the kernel's and the instance's figures against fp_layer_error's. */
static void check(const float *ref, const void *x, fp_dtype dt, size_t n, const char *what)
{
    float *wx = malloc((n ? n : 1) * sizeof(float));
    if (dt == FP_DT_F32)
        memcpy(wx, x, n * sizeof(float));
    else
        fp_widen_array(wx, x, n, dt);
    fp_layer_err_t want, k = {-1, -1, -1}, o = {-1, -1, -1};
    fp_layer_error(ref, wx, n, &want.rel_l2, &want.max_abs, &want.cosine);
    size_t xb = n * (size_t)fp_dtype_bytes(dt);
    float *d_ref = upload(ref, n * sizeof(float));
    void *d_x = upload(x, xb);
    int rc = d_ref && d_x ? FP_OK : FP_ENOMEM;
    rc = rc ? rc : fp_cuda_layer_error(d_ref, d_x, dt, n, &k.rel_l2, &k.max_abs, &k.cosine, d_work,
                                       fp_backend_cuda_stream(be));
    rc = rc ? rc : fp_layer_error_on(G, be, d_ref, d_x, dt, n, &o);
    if (rc)
        tap_diag("%s", fp_error_message());
    tap_ok(!rc && same(&k, &want) && same(&o, &want),
           "%s, %s, n = %zu: rel_l2 %.17g / %.17g / %.17g, max_abs %.9g / %.9g / %.9g, cosine %.17g / %.17g / %.17g "
           "(kernel / instance / host)", what, fp_dtype_name(dt), n, k.rel_l2, o.rel_l2, want.rel_l2, k.max_abs,
           o.max_abs, want.max_abs, k.cosine, o.cosine, want.cosine);
    drop(d_ref, n * sizeof(float));
    drop(d_x, xb);
    free(wx);
}

/* ref: 3 u; x: ref (1 + 1e-3 u) in dt (the 16-bit formats rounded to nearest even). */
static void fill(float *ref, void *x, fp_dtype dt, size_t n)
{
    float *f = dt == FP_DT_F32 ? x : malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        ref[i] = 3.0f * tu_uniform_pm1(&rng);
        f[i] = ref[i] * (1.0f + 1e-3f * tu_uniform_pm1(&rng));
    }
    if (dt != FP_DT_F32) {
        fp_narrow_array(x, f, n, dt);
        free(f);
    }
}

static void sizes_and_formats(void)
{
    static const size_t sizes[] = {1, 255, 256, 257, 1000, 4097, 262143, 262145, 1000003};
    static const fp_dtype dts[] = {FP_DT_F32, FP_DT_F16, FP_DT_BF16};
    size_t most = sizes[sizeof sizes / sizeof *sizes - 1];
    float *ref = malloc(most * sizeof(float));
    void *x = malloc(most * sizeof(float));
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
            fill(ref, x, dts[d], sizes[s]);
            check(ref, x, dts[d], sizes[s], "random");
        }
    free(ref);
    free(x);
}

static void zeros_and_nonfinite(void)
{
    enum { N = 5000 };   /* 20 blocks, not a multiple of 256 */
    float *ref = malloc(N * sizeof(float)), *x = malloc(N * sizeof(float)), *z = calloc(N, sizeof(float));
    uint16_t *h = malloc(N * sizeof(uint16_t));
    fill(ref, x, FP_DT_F32, N);
    check(z, z, FP_DT_F32, N, "both zero (rel_l2 0, cosine 1)");
    check(z, x, FP_DT_F32, N, "zero reference (rel_l2 = ||x||, cosine 0)");
    check(ref, z, FP_DT_F32, N, "zero x (rel_l2 1, cosine 0)");
    check(ref, x, FP_DT_F32, 0, "n = 0 (zeros)");
    x[4321] = INFINITY;
    check(ref, x, FP_DT_F32, N, "an Inf in x (Inf, Inf, NaN)");
    x[4321] = NAN;
    check(ref, x, FP_DT_F32, N, "a NaN in x (Inf, Inf, NaN)");
    x[4321] = 1.0f;
    ref[17] = -INFINITY;
    check(ref, x, FP_DT_F32, N, "a -Inf in the reference (Inf, Inf, NaN)");
    ref[17] = 1.0f;
    fp_narrow_array(h, x, N, FP_DT_F16);
    h[N - 1] = 0x7C00;   /* fp16 +Inf */
    check(ref, h, FP_DT_F16, N, "fp16 Inf in the last value (Inf, Inf, NaN)");
    fp_narrow_array(h, x, N, FP_DT_BF16);
    h[0] = 0x7FC0;   /* bf16 NaN */
    check(ref, h, FP_DT_BF16, N, "bf16 NaN in the first value (Inf, Inf, NaN)");
    free(ref);
    free(x);
    free(z);
    free(h);
}

/* One host wait per call, the workspace once (accounted as staging), the host dispatch, a bad dtype. */
static void instance(void)
{
    enum { N = 70000 };
    float *ref = malloc(N * sizeof(float)), *x = malloc(N * sizeof(float));
    fill(ref, x, FP_DT_F32, N);
    float *d_ref = upload(ref, sizeof(float) * N), *d_x = upload(x, sizeof(float) * N);
    fp_backend_mem m0, m1, m2;
    fp_layer_err_t e;
    G->sync(be);
    G->memory(be, &m0);
    long long w0 = fp_backend_cuda_host_waits(be);
    int rc = fp_layer_error_on(G, be, d_ref, d_x, FP_DT_F32, N, &e);
    G->memory(be, &m1);
    long long w1 = fp_backend_cuda_host_waits(be);
    rc = rc ? rc : fp_layer_error_on(G, be, d_ref, d_x, FP_DT_F32, N, &e);
    G->memory(be, &m2);
    long long w2 = fp_backend_cuda_host_waits(be);
    tap_ok(!rc && w1 - w0 == 1 && w2 - w1 == 1, "one host wait per call: the sums come back, nothing else (%lld, %lld)",
           w1 - w0, w2 - w1);
    /* the first call may find the workspace already made by check() above: then nothing grows */
    tap_ok(!rc && m1.staging >= fp_cuda_layer_error_work_bytes() && m2.staging == m1.staging &&
               m1.staging - m0.staging <= fp_cuda_layer_error_work_bytes(),
           "the workspace (%zu bytes) is made once and accounted as staging (%zu -> %zu -> %zu)",
           fp_cuda_layer_error_work_bytes(), m0.staging, m1.staging, m2.staging);
    fp_layer_err_t want, host;
    fp_layer_error(ref, x, N, &want.rel_l2, &want.max_abs, &want.cosine);
    rc = fp_layer_error_on(NULL, NULL, ref, x, FP_DT_F32, N, &host);
    tap_ok(!rc && same(&host, &want), "host memory (ops NULL): fp_layer_error's figures (rel_l2 %.17g / %.17g)",
           host.rel_l2, want.rel_l2);
    rc = fp_layer_error_on(G, be, d_ref, d_x, FP_DT_TF32, N, &e);
    tap_ok(rc == FP_EINVAL, "tf32 is no storage type: FP_EINVAL (%s)", fp_error_message());
    drop(d_ref, sizeof(float) * N);
    drop(d_x, sizeof(float) * N);
    free(ref);
    free(x);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    G = fp_backend_cuda();
    if (fp_backend_cuda_create_sized(&be, (size_t)256 << 20, "layer error test") ||
        G->alloc(be, &d_work, fp_cuda_layer_error_work_bytes())) {
        tap_plan(1);
        tap_ok(0, "backend instance and workspace: %s", fp_error_message());
        return tap_done();
    }
    tap_plan(27 + 9 + 4);
    sizes_and_formats();
    zeros_and_nonfinite();
    instance();
    G->free(be, d_work, fp_cuda_layer_error_work_bytes());
    G->destroy(be);
#endif
    return tap_done();
}
