/* test_cuda_adam.c — the device Adam / AdamW step (kernels.h fp_cuda_adam_step_unless, adam.cu) against
 * trainer/optim.c's fp_optim_step from the same start over several steps: Adam and AdamW, moments in fp32, fp16 and
 * bf16 (the host's state rounded after each step, as `half` does), with and without a skipped step (the device
 * flag), the 16-bit weight copy; bit-exact on an FMA host (the stated allowance otherwise). Then device arms with
 * Adam / AdamW: one host wait per step (no host mirrors), the moments read back for a checkpoint and uploaded again
 * without changing the run, the optimizer's count moving only on applied steps. Skips without a GPU. */
#include "config.h"
#include "gpu/gpu_testutil.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dtype.h"
#include "error.h"
#include "numfmt.h"
#include "testutil.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/model.h"
#include "trainer/optim.h"
#include "trainer/run/arm.h"

static uint64_t rng = 0xADA11CEull;

/* got against want: bit for bit (exact), or within ulps units of want's last place at float precision (the
 * allowance of a host without FMA); NaN matches NaN. Returns the mismatches. */
static size_t mismatches(const float *got, const float *want, size_t n, int exact, double ulps)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (exact) {
            bad += memcmp(&got[i], &want[i], 4) != 0;
            continue;
        }
        if (isnan(got[i]) || isnan(want[i])) {
            bad += !(isnan(got[i]) && isnan(want[i]));
            continue;
        }
        int e;
        frexpf(want[i], &e);
        bad += fabs((double)got[i] - want[i]) > ulps * ldexp(1.0, e - 24) + 0x1p-149;
    }
    return bad;
}

/* ---------------------------------------------------------------- the kernel against optim.c */

enum { NT = 7, STEPS = 6 };
static const size_t sizes[NT] = {1, 5, 257, 0, 4099, 70001, 3};

/* One configuration over STEPS steps (skip_at: the step whose device flag is set, -1 none); after every step
 * the weights, both moments and the 16-bit copy against the host. */
static void kernel_vs_host(fp_optim_kind kind, double wd, fp_dtype state, fp_dtype lowp, int skip_at)
{
    size_t off[NT + 1] = {0};
    for (int k = 0; k < NT; k++)
        off[k + 1] = off[k] + sizes[k];
    const size_t total = off[NT], sb = (size_t)fp_dtype_bytes(state);
    float *p = malloc(total * 4), *g = malloc(total * 4), *gotp = malloc(total * 4), *gotm = malloc(total * 4);
    uint16_t *low = malloc(total * 2), *m16 = malloc(total * 2);
    float *d_p = gtu_dev_copy(NULL, total * 4), *d_g = gtu_dev_copy(NULL, total * 4);
    char *d_m = gtu_dev_copy(NULL, total * sb), *d_v = gtu_dev_copy(NULL, total * sb);
    uint16_t *d_low = gtu_dev_copy(NULL, total * 2);
    int *d_skip = gtu_dev_copy(NULL, sizeof(int));
    int rc = p && g && gotp && gotm && low && m16 && d_p && d_g && d_m && d_v && d_low && d_skip ? FP_OK : FP_ENOMEM;
    for (size_t i = 0; i < total; i++)
        p[i] = tu_uniform_pm1(&rng);
    if (!rc && (cudaMemcpy(d_p, p, total * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
                cudaMemset(d_m, 0, total * sb) != cudaSuccess || cudaMemset(d_v, 0, total * sb) != cudaSuccess))
        rc = FP_EINTERNAL;
    fp_optim_config cfg;
    fp_optim_config_default(&cfg, kind);
    cfg.weight_decay = wd;
    fp_optim_param prm[NT];
    fp_cuda_adam_segment segs[NT];
    for (int k = 0; k < NT; k++) {
        prm[k] = (fp_optim_param){NULL, p + off[k], g + off[k], sizes[k], k % 3 != 0};
        segs[k] = (fp_cuda_adam_segment){d_p + off[k], d_g + off[k], d_m + off[k] * sb, d_v + off[k] * sb,
                                         k % 2 ? d_low + off[k] : NULL, sizes[k], k % 3 != 0};
    }
    fp_optim *opt = NULL;
    rc = rc ? rc : fp_optim_new(&opt, &cfg, prm, NT);
    const double lrs[STEPS] = {1e-3, 2e-3, 5e-4, 1e-3, 3e-3, 1e-4};
    const int exact = gtu_cpu_uses_fma();
    size_t badp = 0, badm = 0, badl = 0;
    for (int s = 0; !rc && s < STEPS; s++) {
        /* gradients over 30 binades (v = (1 - b2) g^2 reaches fp32's subnormals and fp16's underflow), some zero */
        for (size_t i = 0; i < total; i++)
            g[i] = i % 97 == 5 ? 0.0f : ldexpf(tu_uniform_pm1(&rng), -(int)(tu_splitmix64(&rng) % 30));
        int skip = s == skip_at;
        if (cudaMemcpy(d_g, g, total * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaMemcpy(d_skip, &skip, sizeof skip, cudaMemcpyHostToDevice) != cudaSuccess) {
            rc = FP_EINTERNAL;
            break;
        }
        const int64_t t = fp_optim_get_step(opt) + 1;   /* the count the update would have */
        rc = fp_cuda_adam_step_unless(segs, NT, &cfg, lrs[s], t, state, lowp, d_skip, NULL);
        if (!rc && !skip && !(rc = fp_optim_step(opt, lrs[s])))
            for (size_t i = 0; state != FP_DT_F32 && i < fp_optim_state_count(opt); i++) {
                fp_optim_state st;
                fp_optim_state_at(opt, i, &st);
                fp_round_to_dtype(st.data, st.n, state);   /* arm.c's round_state under `half` */
            }
        if (rc || cudaDeviceSynchronize() != cudaSuccess) {
            rc = rc ? rc : FP_EINTERNAL;
            break;
        }
        cudaMemcpy(gotp, d_p, total * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(low, d_low, total * 2, cudaMemcpyDeviceToHost);
        badp += mismatches(gotp, p, total, exact, 8.0 * (s + 1));
        for (int k = 1; lowp != FP_DT_F32 && k < NT; k += 2)
            for (size_t i = off[k]; i < off[k + 1]; i++)
                badl += low[i] != (lowp == FP_DT_F16 ? fp_f32_to_f16(gotp[i]) : fp_f32_to_bf16(gotp[i]));
        for (int j = 0; j < 2; j++) {   /* state entries: per tensor, exp_avg then exp_avg_sq */
            const char *d = j ? d_v : d_m;
            if (state == FP_DT_F32)
                cudaMemcpy(gotm, d, total * 4, cudaMemcpyDeviceToHost);
            else {
                cudaMemcpy(m16, d, total * 2, cudaMemcpyDeviceToHost);
                fp_widen_array(gotm, m16, total, state);
            }
            for (int k = 0; k < NT; k++) {
                fp_optim_state st;
                fp_optim_state_at(opt, (size_t)k * 2 + (size_t)j, &st);
                /* without FMA a 16-bit moment may round the other way: one unit of its format */
                badm += mismatches(gotm + off[k], st.data, st.n, exact,
                                   state == FP_DT_F32 ? 8.0 * (s + 1) : state == FP_DT_F16 ? 0x1p13 : 0x1p16);
            }
        }
    }
    tap_ok(!rc && badp == 0 && badm == 0 && badl == 0,
           "%s wd %g, moments %s, copy %s, %s: weights and moments %s fp_optim_step over %d steps (%zu values), the "
           "copy the weights' cast (mismatches %zu / %zu / %zu)%s%s",
           fp_optim_name(kind), wd, fp_dtype_name(state), fp_dtype_name(lowp),
           skip_at >= 0 ? "step 3 skipped on the device flag" : "no skip",
           exact ? "bit-equal to" : "within 8 ulp per step (16-bit moments: one unit of their format) of", STEPS, total,
           badp, badm, badl, rc ? ": " : "", rc ? fp_error_message() : "");
    fp_optim_free(opt);
    cudaFree(d_p);
    cudaFree(d_g);
    cudaFree(d_m);
    cudaFree(d_v);
    cudaFree(d_low);
    cudaFree(d_skip);
    free(p);
    free(g);
    free(gotp);
    free(gotm);
    free(low);
    free(m16);
}

/* Arguments refused before any launch. */
static void kernel_arguments(void)
{
    fp_optim_config adam, sgd;
    fp_optim_config_default(&adam, FP_OPTIM_ADAM);
    fp_optim_config_default(&sgd, FP_OPTIM_SGD);
    fp_cuda_adam_segment seg = {0};
    int a = fp_cuda_adam_step_unless(&seg, 1, &sgd, 1e-3, 1, FP_DT_F32, FP_DT_F32, NULL, NULL);
    int b = fp_cuda_adam_step_unless(&seg, 1, &adam, 1e-3, 0, FP_DT_F32, FP_DT_F32, NULL, NULL);
    int c = fp_cuda_adam_step_unless(&seg, 1, &adam, 1e-3, 1, FP_DT_TF32, FP_DT_F32, NULL, NULL);
    int d = fp_cuda_adam_step_unless(&seg, 1, &adam, 1e-3, 1, FP_DT_F32, FP_DT_TF32, NULL, NULL);
    int e = fp_cuda_adam_step_unless(&seg, 1, &adam, NAN, 1, FP_DT_F32, FP_DT_F32, NULL, NULL);
    seg.n = 4;   /* a non-empty segment without pointers */
    int f = fp_cuda_adam_step_unless(&seg, 1, &adam, 1e-3, 1, FP_DT_F32, FP_DT_F32, NULL, NULL);
    tap_ok(a == FP_EINVAL && b == FP_EINVAL && c == FP_EINVAL && d == FP_EINVAL && e == FP_EINVAL && f == FP_EINVAL,
           "refused: an SGD configuration, step 0, tf32 moments, a tf32 copy, a NaN lr, a segment without pointers "
           "(%d %d %d %d %d %d)", a, b, c, d, e, f);
}

/* ---------------------------------------------------------------- device arms */

enum { N = 8, CLASSES = 10, SIZE = 32, WIDTH = 16, SEED = 5, K = 6 };
#define ARENA ((size_t)1 << 30)

static int arm_new(fp_arm **a, const char *policy, fp_optim_kind kind)
{
    fp_arm_config ac;
    gtu_arm_config(&ac, "tinynet", CLASSES, SIZE, WIDTH, SEED, policy, ARENA);
    fp_optim_config_default(&ac.optim, kind);
    fp_lr_schedule_default(&ac.lr, FP_LR_CONSTANT, 1e-3);
    return fp_arm_create(a, &ac);
}

/* Steps [from, to) of the shared batches; the host waits of each (max in *waits_max), skipped steps counted. */
static int arm_steps(fp_arm *a, const float *x, const int *lab, int from, int to, long long *waits_max, int *skipped)
{
    fp_backend *be = fp_model_backend(fp_arm_model(a));
    for (int s = from; s < to; s++) {
        fp_batch b = gtu_batch(x, lab, N, SIZE, s);
        fp_arm_step_result r;
        long long w0 = fp_backend_cuda_host_waits(be);
        int rc = fp_arm_step(a, &b, &r);
        if (rc)
            return rc;
        long long w = fp_backend_cuda_host_waits(be) - w0;
        if (waits_max && w > *waits_max)
            *waits_max = w;
        if (skipped)
            *skipped += r.skipped;
    }
    return FP_OK;
}

/* The arm's weights (downloaded) into w (np floats). */
static int arm_weights(fp_arm *a, float *w, size_t np)
{
    const float *p = fp_model_params(fp_arm_model(a));
    if (!p)
        return FP_EINTERNAL;
    memcpy(w, p, np * sizeof(float));
    return FP_OK;
}

/* Three arms of one configuration: two straight K-step runs (is the device arithmetic reproducible here?) and one
 * whose optimizer state is read back after K/2 steps (a checkpoint's view) and uploaded again before the rest.
 * inf_step >= 0: an Inf pixel in that step's batch (under a loss scaler: NaN gradients, the step skipped). */
static void arm_case(const char *policy, fp_optim_kind kind, int inf_step)
{
    fp_arm *y = NULL, *z = NULL, *x = NULL;
    int rc = arm_new(&y, policy, kind);
    rc = rc ? rc : arm_new(&z, policy, kind);
    rc = rc ? rc : arm_new(&x, policy, kind);
    size_t per = (size_t)SIZE * SIZE * 3;
    float *img = gtu_images((size_t)K * N * per, 0xADA3u);
    int *lab = malloc((size_t)K * N * sizeof(int));
    for (int i = 0; lab && i < K * N; i++)
        lab[i] = (i * 3 + 1) % CLASSES;
    if (img && inf_step >= 0)
        img[(size_t)inf_step * N * per + 7] = INFINITY;
    long long waits = 0;
    int skipped = 0, skipped_x = 0;
    rc = rc ? rc : !img || !lab ? FP_ENOMEM : arm_steps(y, img, lab, 0, K, &waits, &skipped);
    rc = rc ? rc : arm_steps(z, img, lab, 0, K, NULL, NULL);
    rc = rc ? rc : arm_steps(x, img, lab, 0, K / 2, NULL, &skipped_x);
    /* the checkpoint's view: fp_arm_optim downloads the moments */
    size_t nonzero = 0, unheld = 0, nonfinite = 0, count = 0;
    const fp_dtype sd = rc ? FP_DT_F32 : fp_arm_policy(x)->optim_state;
    if (!rc) {
        fp_optim *o = fp_arm_optim(x);
        for (size_t i = 0; i < fp_optim_state_count(o); i++) {
            fp_optim_state st;
            fp_optim_state_at(o, i, &st);
            for (size_t k = 0; k < st.n; k++) {
                float r1 = st.data[k];
                fp_round_to_dtype(&r1, 1, sd);
                nonzero += st.data[k] != 0;
                nonfinite += !isfinite(st.data[k]);
                unheld += memcmp(&r1, &st.data[k], 4) != 0;
                count++;
            }
        }
    }
    rc = rc ? rc : arm_steps(x, img, lab, K / 2, K, NULL, NULL);
    tap_ok(!rc && waits == 1, "%s %s: %d device steps, one host wait each (max %lld): no host mirrors%s%s", policy,
           fp_optim_name(kind), K, waits, rc ? ": " : "", rc ? fp_error_message() : "");
    int64_t applied = rc ? -1 : fp_optim_get_step(fp_arm_optim(y));
    tap_ok(!rc && applied == K - skipped && (inf_step >= 0 ? skipped >= 1 : skipped == 0),
           "%s %s: the optimizer counted the %lld applied steps of %d (%d skipped on the device)", policy,
           fp_optim_name(kind), (long long)applied, K, skipped);
    /* (some non-zero: fp16 moments lose most of exp_avg_sq = (1 - beta2) g^2 to underflow, as `half` does) */
    tap_ok(!rc && count > 0 && skipped_x < K / 2 && nonzero > 0 && nonfinite == 0 && unheld == 0,
           "%s %s: the moments read back after %d steps (%d applied): %zu values, %zu non-zero, finite, all held by %s",
           policy, fp_optim_name(kind), K / 2, K / 2 - skipped_x, count, nonzero, fp_dtype_name(sd));
    size_t np = rc ? 0 : fp_model_num_params(fp_arm_model(y));
    float *wy = malloc((np ? np : 1) * 4), *wz = malloc((np ? np : 1) * 4), *wx = malloc((np ? np : 1) * 4);
    int have = !rc && wy && wz && wx && !arm_weights(y, wy, np) && !arm_weights(z, wz, np) && !arm_weights(x, wx, np);
    if (have && memcmp(wy, wz, np * 4) == 0)
        tap_ok(memcmp(wx, wy, np * 4) == 0,
               "%s %s: moments downloaded and uploaded mid-run: the weights after %d steps identical bit for bit",
               policy, fp_optim_name(kind), K);
    else if (have)
        tap_skip(1, "two straight runs differ on this GPU (cuDNN not bit-reproducible): no bitwise reference");
    else
        tap_ok(0, "%s %s: weights read back", policy, fp_optim_name(kind));
    free(wy);
    free(wz);
    free(wx);
    free(img);
    free(lab);
    fp_arm_free(x);
    fp_arm_free(y);
    fp_arm_free(z);
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    tap_plan(12 + 1 + 3 * 4);
    const fp_dtype states[3] = {FP_DT_F32, FP_DT_F16, FP_DT_BF16};
    const fp_dtype copies[3] = {FP_DT_F16, FP_DT_BF16, FP_DT_F32};
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 3; s++)
            for (int skip = 0; skip < 2; skip++)
                kernel_vs_host(k ? FP_OPTIM_ADAMW : FP_OPTIM_ADAM, k ? 5e-2 : 1e-2, states[s], copies[(s + skip) % 3],
                               skip ? 2 : -1);
    kernel_arguments();
    arm_case("fp32", FP_OPTIM_ADAM, -1);
    arm_case("half", FP_OPTIM_ADAM, -1);    /* fp16 master weights and moments */
    arm_case("fp16", FP_OPTIM_ADAMW, 1);    /* the 16-bit weight copy; step 1 skipped (an Inf pixel, NaN gradients) */
#endif
    return tap_done();
}
