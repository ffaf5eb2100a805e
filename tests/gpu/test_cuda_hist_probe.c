/* test_cuda_hist_probe.c — histograms on the device for the probes: the CUDA backend's hist op against
 * lib/hist on the same tensors (fp32, fp16, bf16; zeros, subnormals of fp32 and of the 16-bit formats,
 * +-Inf, NaN, every class threshold and its neighbours; sizes around the block and launch boundaries):
 * every count, amax and min_nonzero bit for bit, sum_abs within 1e-9 relative (summation order); and
 * a model on the CUDA backend whose hist probe gets ready counts (no download) recording the same
 * activation histograms as when the values are downloaded and counted on the host. */
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
#include "hist.h"
#include "hist_ref.h"
#include "numfmt.h"
#include "probe/probe.h"
#include "trainer/backend_cuda.h"
#include "trainer/model.h"

static uint64_t rng = 0x5EED;

/* The backend's hist op on n values of dt (host x uploaded) against lib/hist's; counts exact. */
static void check_op(const fp_backend_ops *o, fp_backend *be, const void *x, fp_dtype dt, size_t n, const char *what)
{
    size_t bytes = n * (size_t)fp_dtype_bytes(dt);
    void *d = NULL;
    fp_hist_t want, got;
    fp_hist_init(&want);
    fp_hist_init(&got);
    if (dt == FP_DT_F32)
        fp_hist_add(&want, x, n);
    else
        (dt == FP_DT_F16 ? fp_hist_add_f16 : fp_hist_add_bf16)(&want, x, n);
    int rc = o->alloc(be, &d, bytes ? bytes : 1);
    rc = rc ? rc : o->upload(be, d, x, bytes);
    got.count = 0;
    rc = rc ? rc : o->hist(be, &got, d, dt, n);
    if (rc)
        tap_diag("%s", fp_error_message());
    int same = rc == FP_OK && tu_hist_same(&got, &want, 1e-9);
    if (rc == FP_OK && !same)
        tu_hist_diag(&got, &want);
    /* counts, amax, min_nonzero bit for bit; sum_abs relative 1e-9 (the device sums in another order) */
    tap_ok(same, "%s (%zu values): device histogram = lib/hist's", what, n);
    o->free(be, d, bytes ? bytes : 1);
}

static void test_op(void)
{
    const fp_backend_ops *o = fp_backend_cuda();
    fp_backend *be = NULL;
    if (o->create(&be) != FP_OK) {
        tap_diag("%s", fp_error_message());
        tap_skip(13, "no CUDA backend instance");
        return;
    }
    if (!tap_ok(o->hist != NULL, "the CUDA backend has the hist op")) {
        tap_skip(12, "no hist op");
        o->destroy(be);
        return;
    }
    enum { N = 1 << 20 };
    float *x = malloc((size_t)N * 4 + 4096 * 4);
    uint16_t *x16 = malloc((size_t)N * 2 + 2 * 65536 * 2);
    /* every fp32 class: random bit patterns (NaN, Inf, subnormals, zeros of both signs among them) */
    for (size_t i = 0; i < N; i++)
        x[i] = tu_u2f((uint32_t)tu_splitmix64(&rng));
    for (size_t i = 0; i < N; i += 101)
        x[i] = i % 202 ? -0.0f : 0.0f;
    check_op(o, be, x, FP_DT_F32, N, "fp32 random bits, zeros");
    check_op(o, be, x, FP_DT_F32, 1, "fp32 one value");
    check_op(o, be, x + 1, FP_DT_F32, 255, "fp32 one block less one (odd start)");
    check_op(o, be, x, FP_DT_F32, 256 * 1024 + 1, "fp32 one value past a full grid");
    /* every threshold of every format and its neighbours, fp32 subnormals, Inf, NaN */
    float base[GTU_THRESHOLDS];
    size_t nb = gtu_format_thresholds(base);
    const uint32_t bits[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0u, 0x80000000u};
    size_t ne = tu_edge_expand(x, base, nb, bits, sizeof bits / sizeof *bits);
    check_op(o, be, x, FP_DT_F32, ne, "fp32 edges (thresholds +-1 ulp, signs, Inf, NaN, zeros)");
    /* all zeros: amax / min_nonzero 0, no binade */
    memset(x, 0, (size_t)N * 4);
    check_op(o, be, x, FP_DT_F32, N, "fp32 all zeros");
    /* 16-bit: every pattern twice (subnormals, +-Inf, NaNs, +-0), then random patterns */
    for (int b = 0; b < 2; b++) {
        fp_dtype dt = b ? FP_DT_BF16 : FP_DT_F16;
        for (size_t i = 0; i < 2 * 65536; i++)
            x16[i] = (uint16_t)i;
        check_op(o, be, x16, dt, 2 * 65536, b ? "bf16 every pattern" : "fp16 every pattern");
        for (size_t i = 0; i < N; i++)
            x16[i] = (uint16_t)tu_splitmix64(&rng);
        check_op(o, be, x16, dt, N - 3, b ? "bf16 random patterns" : "fp16 random patterns");
        for (size_t i = 0; i < N; i++)   /* subnormals and zeros of the format only */
            x16[i] = (uint16_t)(tu_splitmix64(&rng) & (b ? 0x807Fu : 0x83FFu));
        check_op(o, be, x16, dt, N, b ? "bf16 subnormals and zeros" : "fp16 subnormals and zeros");
    }
    fp_hist_thread_release();
    o->destroy(be);
    free(x);
    free(x16);
}

/* A backend without a hist hook that wants activations: makes the model download them (the host path). */
static unsigned val_begin(void *self, int64_t step, float scale)
{
    (void)self, (void)step, (void)scale;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}
static void val_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float scale)
{
    (void)layer, (void)role, (void)x, (void)scale;
    *(size_t *)self += n;
}
static const fp_probe_ops val_ops = {"values", val_begin, NULL, NULL, NULL, val_tensor};

enum { NB = 8, HW = 32, NC = 10 };

/* Two TRAIN forwards of the same batch on the same weights: the first with the hist probe alone (the
 * device counts), the second with a value-only backend beside it (the values come to the host and the
 * probe counts them there). The forwards must agree bit for bit (cuDNN forward convolution and batchnorm
 * are deterministic for a fixed algorithm: checked on the logits), and then so must every histogram. */
static void test_model(const char *policy)
{
    fp_model_config cfg = {"tinynet", NC, HW, 16, 3, 0};
    fp_model *m = NULL;
    int rc = fp_model_create(&m, &cfg);
    rc = rc ? rc : fp_model_set_policy(m, fp_policy_find(policy));
    rc = rc ? rc : fp_model_set_backend(m, fp_backend_cuda(), NULL);
    if (rc) {
        tap_diag("%s", fp_error_message());
        tap_skip(6, "no model on the CUDA backend");
        fp_model_free(m);
        return;
    }
    int L = fp_model_layer_count(m);
    float *x = malloc((size_t)NB * HW * HW * 3 * sizeof(float));
    for (size_t i = 0; i < (size_t)NB * HW * HW * 3; i++)
        x[i] = tu_uniform_pm1(&rng) * 4.0f;
    fp_probe *p[2] = {NULL, NULL};
    fp_hist_probe *hp[2] = {NULL, NULL};
    float *logits[2];
    size_t seen = 0;
    for (int k = 0; k < 2; k++) {
        fp_probe_create(&p[k]);
        fp_hist_probe_create(&hp[k], L, 1, FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION), NULL, 0);
        fp_hist_probe_attach(hp[k], p[k]);
        if (k)
            fp_probe_add(p[k], &val_ops, &seen);
        fp_model_set_probe(m, p[k]);
        fp_probe_step_begin(p[k], 0, 1.0f);
        if (k == 0)
            tap_is_uint(fp_probe_wants_values(p[k]), 0, "%s: the hist probe alone takes ready counts", policy);
        const float *lg = NULL;
        rc = fp_model_forward(m, &lg, x, NB, FP_MODE_TRAIN);
        logits[k] = malloc(NB * NC * sizeof(float));
        if (rc == FP_OK && lg)
            memcpy(logits[k], lg, NB * NC * sizeof(float));
        else
            tap_diag("forward: %s", fp_error_message());
        fp_probe_step_end(p[k]);
    }
    fp_model_set_probe(m, NULL);
    tap_ok(seen > 0, "%s: the value-only backend made the model download activations (%zu values)", policy, seen);
    tap_ok(memcmp(logits[0], logits[1], NB * NC * sizeof(float)) == 0, "%s: the two forwards agree bit for bit",
           policy);
    int same = 1, count = 0;
    for (int l = 0; l < L; l++) {
        const fp_hist_t *d = fp_hist_probe_get(hp[0], l, FP_ROLE_ACTIVATION);
        const fp_hist_t *h = fp_hist_probe_get(hp[1], l, FP_ROLE_ACTIVATION);
        if (!d || !h) {
            same &= d == h;
            continue;
        }
        count++;
        if (!tu_hist_same(d, h, 1e-9)) {
            tap_diag("layer %d", l);
            tu_hist_diag(d, h);
            same = 0;
        }
    }
    /* counts, amax, min_nonzero bit for bit; sum_abs relative 1e-9 */
    tap_ok(same && count == L, "%s: %d of %d layers' activation histograms from device counts = host counts", policy,
           count, L);
    for (int k = 0; k < 2; k++) {
        tap_is_int(fp_hist_probe_status(hp[k]), FP_OK, "%s: probe %d kept no error", policy, k);
        fp_hist_probe_free(hp[k]);
        fp_probe_free(p[k]);
        free(logits[k]);
    }
    free(x);
    fp_model_free(m);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    test_op();
    test_model("fp32");
    test_model("fp16");
    test_model("bf16");
    fp_hist_thread_release();
#endif
    return tap_done();
}
