/* test_cuda_kernels.c — each kernel of trainer/cuda/kernels.h against its CPU reference on random and
 * edge data: softmax xent (fp_softmax_xent), unscale + check (fp_unscale_and_check), SGD (optim.c,
 * bit-exact), exponent histograms (fp_hist_add / _f16 / _bf16, exact counts), layer error
 * (fp_layer_error). Tolerances are stated at each check. Skips with a TAP reason without CUDA / GPU. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "hist.h"
#include "numfmt.h"
#include "trainer/analysis/analysis.h"
#include "testutil.h"
#include "trainer/cuda/kernels.h"
#include "trainer/layers.h"
#include "trainer/optim.h"
#include "trainer/precision.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static void host_copy(void *host, const void *dev, size_t bytes) { cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost); }

/* |got - want| <= ulps * ulp(want) for every element (NaN matches NaN); returns the mismatches. */
static size_t ulp_mismatches(const float *got, const float *want, size_t n, int ulps)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] == want[i])
            continue;
        if (isnan(want[i]) || isnan(got[i])) {
            bad += !(isnan(want[i]) && isnan(got[i]));
            continue;
        }
        float ulp = nextafterf(fabsf(want[i]), INFINITY) - fabsf(want[i]);
        bad += !(fabsf(got[i] - want[i]) <= ulps * ulp);
    }
    return bad;
}

static size_t bit_mismatches(const float *got, const float *want, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&got[i], &want[i], 4) != 0;
    return bad;
}

/* ---------------------------------------------------------------- softmax xent */
static void test_xent(void)
{
    enum { N = 67, C = 1000 };
    float *logits = malloc(sizeof(float) * N * C), *want = malloc(sizeof(float) * N * C), *got = malloc(sizeof(float) * N * C);
    int labels[N];
    for (int i = 0; i < N * C; i++)
        logits[i] = 8.0f * tu_uniform_pm1(&rng);
    for (int i = 0; i < N; i++)
        labels[i] = (int)(tu_splitmix64(&rng) % C);
    for (int j = 0; j < C; j++)   /* edge rows: all tied (a top-1 hit by the tie rule) */
        logits[0 * C + j] = 1.5f;
    for (int j = 0; j < C; j++)   /* huge logits: the max subtraction must keep it finite */
        logits[1 * C + j] = 1e30f + (float)j * 1e24f;
    for (int j = 0; j < C; j++)   /* -inf everywhere but the label */
        logits[2 * C + j] = j == labels[2] ? 0.0f : -INFINITY;
    for (int k = 0; k < 4; k++)   /* label logit with exactly 4 larger: top-5 but not top-1 */
        logits[3 * C + (labels[3] + 1 + k) % C] = 100.0f;
    logits[3 * C + labels[3]] = 50.0f;
    float wloss;
    int w1, w5;
    fp_softmax_xent(&wloss, want, &w1, &w5, logits, labels, N, C);
    float *d_logits = gtu_dev_copy(logits, sizeof(float) * N * C), *d_dl = gtu_dev_copy(NULL, sizeof(float) * N * C);
    int *d_labels = gtu_dev_copy(labels, sizeof labels);
    fp_cuda_xent_result *d_res = gtu_dev_copy(NULL, sizeof *d_res);
    float gloss = 0;
    int g1 = -1, g5 = -1;
    int rc = fp_cuda_softmax_xent_sync(&gloss, &g1, &g5, d_dl, d_logits, d_labels, N, C, d_res, NULL);
    tap_is_int(rc, FP_OK, "xent: runs (%s)", fp_error_message());
    host_copy(got, d_dl, sizeof(float) * N * C);
    /* loss: double sums in another order, device expf within 2 ulp: relative 1e-6 */
    tap_is_double(gloss, wloss, 0, 1e-6, "xent: loss equals the CPU's (rel 1e-6)");
    tap_is_int(g1, w1, "xent: top-1 hits equal (exact)");
    tap_is_int(g5, w5, "xent: top-5 hits equal (exact)");
    /* dlogits: expf (<= 2 ulp on the device) times two roundings, the label's minus invn: 8 ulp, or
     * 1e-9 absolute where the subtraction cancels */
    size_t bad = 0;
    for (int i = 0; i < N * C; i++)
        bad += !(fabsf(got[i] - want[i]) <= 1e-9f || ulp_mismatches(&got[i], &want[i], 1, 8) == 0);
    tap_is_uint(bad, 0, "xent: dlogits within 8 ulp (or 1e-9 absolute) of the CPU's on %d values", N * C);

    /* NaN label logit: never a hit; loss NaN as on the CPU */
    logits[5 * C + labels[5]] = NAN;
    fp_softmax_xent(&wloss, NULL, &w1, &w5, logits, labels, N, C);
    cudaMemcpy(d_logits, logits, sizeof(float) * N * C, cudaMemcpyHostToDevice);
    rc = fp_cuda_softmax_xent_sync(&gloss, &g1, &g5, NULL, d_logits, d_labels, N, C, d_res, NULL);
    tap_ok(rc == FP_OK && isnan(gloss) && isnan(wloss) && g1 == w1 && g5 == w5,
           "xent: a NaN label logit gives a NaN loss and is no hit, as on the CPU (hits %d/%d vs %d/%d)", g1, g5, w1, w5);

    /* NaN and infinite logits elsewhere (issue 21): a NaN beside the largest label logit, a row of -inf,
     * a +inf label logit; none is a hit, exactly as on the CPU */
    int w1f, w5f;
    fp_softmax_xent(&wloss, NULL, &w1f, &w5f, logits, labels, N, C);
    logits[6 * C + labels[6]] = 100.0f;
    logits[6 * C + (labels[6] + 1) % C] = NAN;
    for (int j = 0; j < C; j++)
        logits[8 * C + j] = -INFINITY;
    logits[9 * C + labels[9]] = INFINITY;
    fp_softmax_xent(&wloss, NULL, &w1, &w5, logits, labels, N, C);
    cudaMemcpy(d_logits, logits, sizeof(float) * N * C, cudaMemcpyHostToDevice);
    rc = fp_cuda_softmax_xent_sync(&gloss, &g1, &g5, NULL, d_logits, d_labels, N, C, d_res, NULL);
    tap_ok(rc == FP_OK && g1 == w1 && g5 == w5 && w1 <= w1f && w5 <= w5f,
           "xent: rows with a NaN or infinite logit are no hit, as on the CPU (hits %d/%d vs %d/%d)", g1, g5, w1,
           w5);

    /* bad label: FP_EINVAL naming it, dlogits untouched */
    labels[7] = C + 3;
    cudaMemcpy(d_labels, labels, sizeof labels, cudaMemcpyHostToDevice);
    cudaMemset(d_dl, 0x7F, sizeof(float) * N * C);
    rc = fp_cuda_softmax_xent_sync(&gloss, &g1, &g5, d_dl, d_logits, d_labels, N, C, d_res, NULL);
    tap_ok(rc == FP_EINVAL && strstr(fp_error_message(), "label[7] = 1003"), "xent: bad label refused: %s",
           fp_error_message());
    host_copy(got, d_dl, sizeof(float) * N * C);
    uint32_t sentinel = 0x7F7F7F7Fu;
    bad = 0;
    for (int i = 0; i < N * C; i++)
        bad += memcmp(&got[i], &sentinel, 4) != 0;
    tap_is_uint(bad, 0, "xent: nothing written when a label is bad");
    cudaFree(d_logits);
    cudaFree(d_dl);
    cudaFree(d_labels);
    cudaFree(d_res);
    free(logits);
    free(want);
    free(got);
}

/* ---------------------------------------------------------------- unscale + check */
enum { NSEG = 150 };
static size_t seg_len(int k) { return k == 0 ? 1000003 : k == 1 ? 17 : k == 2 ? 0 : (size_t)(k * 37) % 5000; }

static void test_unscale(void)
{
    size_t total = 0, off[NSEG + 1];
    for (int k = 0; k < NSEG; k++) {
        off[k] = total;
        total += seg_len(k);
    }
    off[NSEG] = total;
    float *h = malloc(total * 4), *want = malloc(total * 4), *got = malloc(total * 4);
    for (size_t i = 0; i < total; i++)
        h[i] = tu_u2f((uint32_t)tu_splitmix64(&rng) & 0xBF7FFFFFu);   /* finite: exponent field < 255 */
    float *d = gtu_dev_copy(h, total * 4);
    int *d_found = gtu_dev_copy(NULL, sizeof(int));
    fp_cuda_segment segs[NSEG];
    memset(segs, 0, sizeof segs);
    for (int k = 0; k < NSEG; k++) {
        segs[k].grad = d + off[k];
        segs[k].n = seg_len(k);
    }
    const float inv = 1.0f / 65536.0f;
    memcpy(want, h, total * 4);
    int wfound = 0;
    for (int k = 0; k < NSEG; k++)
        wfound |= fp_unscale_and_check(want + off[k], seg_len(k), inv);
    int rc = fp_cuda_unscale_and_check(segs, NSEG, inv, d_found, NULL), found = -1;
    host_copy(&found, d_found, sizeof found);
    host_copy(got, d, total * 4);
    tap_ok(rc == FP_OK && found == 0 && wfound == 0, "unscale: finite gradients over %d segments: flag 0", NSEG);
    tap_is_uint(bit_mismatches(got, want, total), 0, "unscale: every value bit-equal to the CPU's (%zu values)", total);
    /* an Inf in one segment, a NaN in another: flag 1, the rest still scaled */
    h[off[1] + 3] = INFINITY;
    h[off[120] + 1] = -NAN;
    cudaMemcpy(d, h, total * 4, cudaMemcpyHostToDevice);
    memcpy(want, h, total * 4);
    wfound = 0;
    for (int k = 0; k < NSEG; k++)
        wfound |= fp_unscale_and_check(want + off[k], seg_len(k), inv);
    rc = fp_cuda_unscale_and_check(segs, NSEG, inv, d_found, NULL);
    host_copy(&found, d_found, sizeof found);
    host_copy(got, d, total * 4);
    tap_ok(rc == FP_OK && found == 1 && wfound == 1, "unscale: Inf / NaN found (flag %d)", found);
    tap_is_uint(ulp_mismatches(got, want, total, 0), 0, "unscale: with non-finite values, the same results (NaN as NaN)");
    cudaFree(d);
    cudaFree(d_found);
    free(h);
    free(want);
    free(got);
}

/* ---------------------------------------------------------------- SGD */
static void test_sgd_config(double mom, double wd, int nesterov, fp_dtype lowp)
{
    enum { NT = 70, STEPS = 3 };
    size_t total = 0, off[NT + 1];
    for (int k = 0; k < NT; k++) {
        off[k] = total;
        total += k == 0 ? 300001 : (size_t)(k * 53) % 3000;
    }
    off[NT] = total;
    float *p = malloc(total * 4), *g = malloc(total * 4), *gotp = malloc(total * 4), *gotm = malloc(total * 4);
    uint16_t *low = malloc(total * 2);
    for (size_t i = 0; i < total; i++) {
        p[i] = tu_uniform_pm1(&rng);
        g[i] = 0.01f * tu_uniform_pm1(&rng);
    }
    float *d_p = gtu_dev_copy(p, total * 4), *d_g = gtu_dev_copy(g, total * 4), *d_m = gtu_dev_copy(NULL, total * 4);
    uint16_t *d_low = gtu_dev_copy(NULL, total * 2);
    fp_optim_config cfg;
    fp_optim_config_default(&cfg, FP_OPTIM_SGD);
    cfg.momentum = mom;
    cfg.weight_decay = wd;
    cfg.nesterov = nesterov;
    fp_optim_param prm[NT];
    fp_cuda_segment segs[NT];
    memset(segs, 0, sizeof segs);
    for (int k = 0; k < NT; k++) {
        prm[k] = (fp_optim_param){NULL, p + off[k], g + off[k], off[k + 1] - off[k], k % 3 != 0};
        segs[k] = (fp_cuda_segment){d_p + off[k], d_g + off[k], mom != 0 ? d_m + off[k] : NULL,
                                    k % 2 ? d_low + off[k] : NULL, off[k + 1] - off[k], k % 3 != 0};
    }
    fp_optim *opt = NULL;
    int rc = fp_optim_new(&opt, &cfg, prm, NT);
    const double lrs[STEPS] = {0.1, 0.05, 0.0125};
    for (int s = 0; rc == FP_OK && s < STEPS; s++) {
        rc = fp_optim_step(opt, lrs[s]);
        if (rc == FP_OK)
            rc = fp_cuda_sgd_step(segs, NT, lrs[s], mom, wd, nesterov, s == 0, lowp, NULL);
    }
    host_copy(gotp, d_p, total * 4);
    host_copy(gotm, d_m, total * 4);
    host_copy(low, d_low, total * 2);
    /* optim.c's FMA path performs the kernel's operations one for one (fmaf where the kernel has
     * __fmaf_rn, buf * mom + d rounded twice in both): bit-equal. Its split path (no FMA, or
     * FP_OPTIM_FMA=0) rounds each of up to three fused ops twice, <= 1 ulp of that op's result each;
     * 2 ulp of the final value per step is this test's allowance on these data, not a proven bound
     * (a momentum sum that cancels can magnify an earlier ulp). */
    const int exact = gtu_cpu_uses_fma();
    size_t badp = exact ? bit_mismatches(gotp, p, total) : ulp_mismatches(gotp, p, total, 2 * STEPS);
    size_t badm = 0;
    for (size_t i = 0; mom != 0 && i < fp_optim_state_count(opt); i++) {
        fp_optim_state stt;
        fp_optim_state_at(opt, i, &stt);
        badm += exact ? bit_mismatches(gotm + off[i], stt.data, stt.n) : ulp_mismatches(gotm + off[i], stt.data, stt.n, 2 * STEPS);
    }
    size_t badl = 0;
    for (int k = 1; lowp != FP_DT_F32 && k < NT; k += 2)
        for (size_t i = off[k]; i < off[k + 1]; i++)
            badl += low[i] != (lowp == FP_DT_F16 ? fp_f32_to_f16(gotp[i]) : fp_f32_to_bf16(gotp[i]));
    tap_ok(rc == FP_OK && badp == 0 && badm == 0 && badl == 0,
           "sgd momentum %g wd %g nesterov %d copy %s: params and momentum %s optim.c over %d steps, %zu values; "
           "16-bit copy = RNE of the new weights (mismatches %zu/%zu/%zu)",
           mom, wd, nesterov, fp_dtype_name(lowp), exact ? "bit-equal to" : "within 2 ulp/step of", STEPS, total,
           badp, badm, badl);
    fp_optim_free(opt);
    cudaFree(d_p);
    cudaFree(d_g);
    cudaFree(d_m);
    cudaFree(d_low);
    free(p);
    free(g);
    free(gotp);
    free(gotm);
    free(low);
}

/* ---------------------------------------------------------------- histograms */
static int hist_equal(const fp_hist_t *a, const fp_hist_t *b, const char *what)
{
    int ok = a->count == b->count && a->zero == b->zero && a->nan == b->nan && a->pos_inf == b->pos_inf &&
             a->neg_inf == b->neg_inf && memcmp(a->binade, b->binade, sizeof a->binade) == 0 &&
             memcmp(a->cls, b->cls, sizeof a->cls) == 0 && a->amax == b->amax && a->min_nonzero == b->min_nonzero;
    double rel = b->sum_abs ? fabs(a->sum_abs - b->sum_abs) / b->sum_abs : fabs(a->sum_abs);
    /* counts, amax, min_nonzero exact; sum_abs relative 1e-9 (summation order) */
    return tap_ok(ok && rel <= 1e-9, "hist %s: every count, amax, min_nonzero equal; sum_abs rel diff %.2e <= 1e-9",
                  what, rel);
}

static void test_hist(void)
{
    enum { N = 3000017 };
    float *x = malloc((size_t)N * 4);
    uint16_t *x16 = malloc((size_t)N * 2);
    void *d_work = gtu_dev_copy(NULL, fp_cuda_hist_work_bytes());
    const char *names[3] = {"fp32 random bits (all classes, NaN, Inf, subnormals)", "fp32 gradients-like",
                            "fp32 edges (every threshold and its neighbours)"};
    for (int c = 0; c < 3; c++) {
        size_t n = N;
        if (c == 0)
            for (size_t i = 0; i < n; i++)
                x[i] = tu_u2f((uint32_t)tu_splitmix64(&rng));
        else if (c == 1)
            for (size_t i = 0; i < n; i++)
                x[i] = ldexpf(tu_uniform_pm1(&rng), -(int)(tu_splitmix64(&rng) % 40));
        else {
            float base[GTU_THRESHOLDS];
            size_t nb = gtu_format_thresholds(base);
            const uint32_t bits[] = {0x7F800000u, 0x7FC00000u, 0x7F800001u, 0u};
            n = tu_edge_expand(x, base, nb, bits, 4);
        }
        fp_hist_t want, got;
        fp_hist_init(&want);
        fp_hist_init(&got);
        fp_hist_add(&want, x, n);
        float *d_x = gtu_dev_copy(x, n * 4);
        int rc = fp_cuda_hist_add(&got, d_x, n, FP_DT_F32, d_work, NULL);
        if (rc != FP_OK)
            tap_diag("%s", fp_error_message());
        hist_equal(&got, &want, names[c]);
        cudaFree(d_x);
    }
    for (int b = 0; b < 2; b++) {
        for (size_t i = 0; i < N; i++)
            x16[i] = (uint16_t)tu_splitmix64(&rng);
        fp_hist_t want, got;
        fp_hist_init(&want);
        fp_hist_init(&got);
        (b ? fp_hist_add_bf16 : fp_hist_add_f16)(&want, x16, N);
        uint16_t *d_x = gtu_dev_copy(x16, (size_t)N * 2);
        int rc = fp_cuda_hist_add(&got, d_x, N, b ? FP_DT_BF16 : FP_DT_F16, d_work, NULL);
        if (rc != FP_OK)
            tap_diag("%s", fp_error_message());
        hist_equal(&got, &want, b ? "bf16 random patterns" : "fp16 random patterns");
        cudaFree(d_x);
    }
    fp_hist_thread_release();
    cudaFree(d_work);
    free(x);
    free(x16);
}

/* ---------------------------------------------------------------- layer error */
static int close_rel(double got, double want, double rel)
{
    return got == want || (isnan(got) && isnan(want)) || fabs(got - want) <= rel * fabs(want);
}

static void check_err(const float *ref, const void *x, fp_dtype dt, size_t n, const char *what, void *d_work)
{
    float *wx = malloc((n ? n : 1) * 4);
    if (dt == FP_DT_F32)
        memcpy(wx, x, n * 4);
    else
        fp_widen_array(wx, x, n, dt);
    double wr, wm, wc, gr = -1, gm = -1, gc = -1;
    fp_layer_error(ref, wx, n, &wr, &wm, &wc);
    float *d_ref = gtu_dev_copy(ref, n * 4);
    void *d_x = gtu_dev_copy(x, n * (size_t)fp_dtype_bytes(dt));
    int rc = fp_cuda_layer_error(d_ref, d_x, dt, n, &gr, &gm, &gc, d_work, NULL);
    /* sums in double in another order: relative 1e-9; max_abs is order-free: exact */
    tap_ok(rc == FP_OK && close_rel(gr, wr, 1e-9) && gm == wm && close_rel(gc, wc, 1e-9),
           "layer error %s: rel_l2 %.6g/%.6g (rel 1e-9), max_abs %.6g/%.6g (exact), cosine %.9g/%.9g (rel 1e-9)", what,
           gr, wr, gm, wm, gc, wc);
    cudaFree(d_ref);
    cudaFree(d_x);
    free(wx);
}

static void test_layer_error(void)
{
    enum { N = 1 << 20 };
    float *ref = malloc(N * 4), *x = malloc(N * 4), *z = calloc(N, 4);
    uint16_t *x16 = malloc(N * 2);
    void *d_work = gtu_dev_copy(NULL, fp_cuda_layer_error_work_bytes());
    for (size_t i = 0; i < N; i++) {
        ref[i] = 3.0f * tu_uniform_pm1(&rng);
        x[i] = ref[i] * (1.0f + 1e-3f * tu_uniform_pm1(&rng));
    }
    check_err(ref, x, FP_DT_F32, N, "fp32", d_work);
    fp_narrow_array(x16, ref, N, FP_DT_F16);
    check_err(ref, x16, FP_DT_F16, N, "fp16 of the reference", d_work);
    fp_narrow_array(x16, ref, N, FP_DT_BF16);
    check_err(ref, x16, FP_DT_BF16, N, "bf16 of the reference", d_work);
    check_err(z, z, FP_DT_F32, N, "both zero (cosine 1)", d_work);
    check_err(z, x, FP_DT_F32, N, "zero reference (cosine 0)", d_work);
    x[12345] = INFINITY;
    check_err(ref, x, FP_DT_F32, N, "an Inf in x (rel Inf, cosine NaN)", d_work);
    check_err(ref, x, FP_DT_F32, 0, "n = 0", d_work);
    cudaFree(d_work);
    free(ref);
    free(x);
    free(z);
    free(x16);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    tap_plan(9 + 4 + 6 + 5 + 7);
    test_xent();
    test_unscale();
    test_sgd_config(0.9, 1e-4, 0, FP_DT_F16);
    test_sgd_config(0.9, 1e-4, 1, FP_DT_BF16);
    test_sgd_config(0.0, 0.0, 0, FP_DT_F32);
    test_sgd_config(0.0, 5e-4, 0, FP_DT_F16);
    test_sgd_config(0.5, 0.0, 1, FP_DT_F32);
    test_sgd_config(0.9, 0.0, 0, FP_DT_BF16);
    test_hist();
    test_layer_error();
#endif
    return tap_done();
}
