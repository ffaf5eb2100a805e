/* bench_hist.c — single-thread throughput of fp_hist_add (all four formats in one pass) on a 64 MiB
 * array of activation-like values (normal distribution, a quarter zeros), best of several runs, of
 * fp_hist_add_scaled on the same values times 2^16 (a loss-scaled gradient, unscaled by 2^-16), and
 * of fp_hist_add_f16 on a probe's workloads (one call per ResNet-50 layer output, 64x64, batch 16:
 * activations, and loss-scaled gradients that underflow into subnormals and reach E4M3's top binade).
 * Prints figures only, never fails on time: `bench: hist_all_formats=X unit=GB/s`, the speedup,
 * `bench: hist_scaled=X unit=GB/s`, `bench: hist_f16_activations=X unit=Gvalues/s` and
 * `bench: hist_f16_gradients=X unit=Gvalues/s`. */
#include "hist.h"
#include "clock.h"
#include "error.h"
#include "numfmt.h"
#include "testutil.h"
#include "trainer/model.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Internal hook of lib/hist.c (not in hist.h): 0 scalar, 1 AVX2, 2 AVX-512, -1 best. */

#define N_FLOATS ((size_t)64 << 20 >> 2)    /* 64 MiB of floats */
#define REPS 7
#define PUBLIC_API (-2)                      /* run(): fp_hist_add itself, not a forced kernel */
#define SCALED_API (-3)                      /* run(): fp_hist_add_scaled(x, n, SCALE_LOG2) */
#define SCALE_LOG2 16

static fp_hist_t results[4];                 /* last histogram of each run, compared at the end */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void) { return tu_splitmix64(&rng_state); }

static double rng_unit(void)
{
    return ((double)(rng_next() >> 11) + 0.5) * 0x1p-53;
}

/* Best GB/s (1e9 bytes of input per second) of `kernel` over REPS runs; < 0 when unavailable. */
static double run(const float *x, size_t n, int kernel, const char *name, fp_hist_t *out)
{
    double best = 0.0;
    fp_hist_t h;
    for (int rep = 0; rep < REPS; rep++) {
        fp_hist_init(&h);
        double t0 = fp_clock_mono_s();
        int rc = kernel == PUBLIC_API   ? fp_hist_add(&h, x, n)
                 : kernel == SCALED_API ? fp_hist_add_scaled(&h, x, n, SCALE_LOG2)
                                        : fp_hist_add_kernel(&h, x, n, kernel);
        double t = fp_clock_mono_s() - t0;
        if (rc == FP_EUNAVAIL)
            return -1.0;
        if (rc != FP_OK) {
            fprintf(stderr, "bench_hist: %s\n", fp_error_message());
            exit(1);
        }
        double gbs = (double)(n * sizeof(float)) / t / 1e9;
        if (gbs > best)
            best = gbs;
    }
    *out = h;
    printf("# %-8s %.2f GB/s  (fp16 overflow %llu, subnormal %llu; mean|x| %.4f)\n", name, best,
           (unsigned long long)h.cls[FP_FMT_FP16][FP_CLASS_OVERFLOW],
           (unsigned long long)h.cls[FP_FMT_FP16][FP_CLASS_SUBNORMAL], fp_hist_mean_abs(&h));
    return best;
}

/* The probe's fp16 workloads: one fp_hist_add_f16 call per layer output of ResNet-50 at 64x64, batch
 * 16 (174 calls, 49 M values). "activations": ReLU-like values (half zeros, the rest uniform in
 * [-2, 2) rounded to fp16). "gradients": a loss-scaled gradient's spread, sign * uniform * 2^k for k
 * uniform in -27 .. 9 (about a fifth fp16 subnormals or zeros, some in [256, 512), E4M3's top binade).
 * Best Gvalues/s over REPS passes of the fast path (kernel -1) and of the reference path (0, the count
 * table: the code before the fp16 kernel); both must give identical counts. */
static void bench_f16(const char *what)
{
    int grads = strcmp(what, "gradients") == 0;
    fp_model *m = NULL;
    fp_model_config mc = {"resnet50", 10, 64, 0, 1, 1};
    if (fp_model_create(&m, &mc) != FP_OK) {
        printf("# hist_f16_%s: %s\n", what, fp_error_message());
        return;
    }
    int nl = fp_model_layer_count(m);
    size_t *cnt = malloc((size_t)nl * sizeof *cnt), tot = 0;
    for (int l = 0; l < nl; l++) {
        const fp_layer_info *li = fp_model_layer(m, l);
        cnt[l] = (size_t)li->out.h * (size_t)li->out.w * (size_t)li->out.c * 16;
        tot += cnt[l];
    }
    fp_model_free(m);
    uint16_t *a = malloc(tot * sizeof *a);
    if (!a) {
        printf("# hist_f16_%s: out of memory\n", what);
        free(cnt);
        return;
    }
    for (size_t i = 0; i < tot; i++) {
        uint64_t r = rng_next();
        if (grads)
            a[i] = fp_f32_to_f16((float)((double)(int32_t)(r >> 32) * 0x1p-31) * ldexpf(1.0f, (int)((r >> 8) % 37) - 27));
        else
            a[i] = (r & 1) ? fp_f32_to_f16((float)((double)(r >> 40) * 0x1p-22 - 2.0)) : 0;
    }
    double best[2] = {0.0, 0.0};
    fp_hist_t last[2];
    for (int rep = 0; rep < REPS; rep++)
        for (int path = 0; path < 2; path++) {              /* alternating: fast, reference */
            fp_hist_t sum;
            fp_hist_init(&sum);
            double t0 = fp_clock_mono_s();
            size_t o = 0;
            for (int l = 0; l < nl; l++) {
                fp_hist_t h;
                fp_hist_init(&h);
                fp_hist_add16_kernel(&h, a + o, cnt[l], 0, path ? 0 : -1);
                fp_hist_merge(&sum, &h);
                o += cnt[l];
            }
            double t = fp_clock_mono_s() - t0, gv = (double)tot / t / 1e9;
            if (gv > best[path])
                best[path] = gv;
            last[path] = sum;
        }
    int same = memcmp(last[0].binade, last[1].binade, sizeof last[0].binade) == 0 &&
               memcmp(last[0].cls, last[1].cls, sizeof last[0].cls) == 0 && last[0].zero == last[1].zero &&
               last[0].amax == last[1].amax && last[0].min_nonzero == last[1].min_nonzero;
    printf("# fp_hist_add_f16 on %s, %d calls (ResNet-50 64x64 batch 16 layer outputs), %zu values, best of %d\n",
           what, nl, tot, REPS);
    printf("# counts, amax, min identical to the reference path: %s; sum rel diff %.2g\n", same ? "yes" : "NO",
           fabs(last[0].sum_abs - last[1].sum_abs) / (last[1].sum_abs > 0 ? last[1].sum_abs : 1.0));
    printf("bench: hist_f16_%s=%.2f unit=Gvalues/s\n", what, best[0]);
    printf("bench: hist_f16_%s_reference=%.2f unit=Gvalues/s\n", what, best[1]);
    printf("bench: hist_f16_%s_speedup=%.2f unit=x\n", what, best[1] > 0 ? best[0] / best[1] : 0.0);
    free(a);
    free(cnt);
}

int main(void)
{
    float *x = malloc(N_FLOATS * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench_hist: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < N_FLOATS; i += 2) {       /* Box-Muller pairs, sigma 2, 25% zeros */
        double r = sqrt(-2.0 * log(rng_unit())), th = 6.283185307179586 * rng_unit();
        x[i] = (float)(2.0 * r * cos(th));
        x[i + 1] = (float)(2.0 * r * sin(th));
    }
    for (size_t i = 0; i < N_FLOATS; i++)
        if ((rng_next() & 3) == 0)
            x[i] = 0.0f;

    printf("# fp_hist_add on %zu floats (64 MiB), best of %d\n", N_FLOATS, REPS);
    double scalar = run(x, N_FLOATS, 0, "scalar", &results[0]);
    double avx2 = run(x, N_FLOATS, 1, "avx2", &results[1]);
    double avx512 = run(x, N_FLOATS, 2, "avx512", &results[2]);
    double best = run(x, N_FLOATS, PUBLIC_API, "default", &results[3]);
    int agree = memcmp(&results[0], &results[3], sizeof results[0]) == 0 &&
                (avx2 < 0 || memcmp(&results[0], &results[1], sizeof results[0]) == 0) &&
                (avx512 < 0 || memcmp(&results[0], &results[2], sizeof results[0]) == 0);
    printf("# kernels give identical histograms: %s\n", agree ? "yes" : "NO");
    if (avx2 >= 0)
        printf("bench: hist_avx2=%.2f unit=GB/s\n", avx2);
    if (avx512 >= 0)
        printf("bench: hist_avx512=%.2f unit=GB/s\n", avx512);
    printf("bench: hist_scalar=%.2f unit=GB/s\n", scalar);
    printf("bench: hist_all_formats=%.2f unit=GB/s\n", best);
    printf("bench: hist_speedup=%.2f unit=x ratio=%.2f\n", best / scalar, best / scalar);
    for (size_t i = 0; i < N_FLOATS; i++)                 /* the loss-scaled values: exact */
        x[i] = ldexpf(x[i], SCALE_LOG2);
    fp_hist_t scaled;
    double sc = run(x, N_FLOATS, SCALED_API, "scaled", &scaled);
    printf("# fp_hist_add_scaled(x * 2^%d, %d) == fp_hist_add(x): %s\n", SCALE_LOG2, SCALE_LOG2,
           memcmp(&scaled, &results[3], sizeof scaled) == 0 ? "yes" : "NO");
    printf("bench: hist_scaled=%.2f unit=GB/s\n", sc);
    free(x);
    bench_f16("activations");
    bench_f16("gradients");
    return 0;
}
