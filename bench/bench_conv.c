/* bench_conv.c — times CPU conv forward/backward-data/backward-weights on each distinct conv of
 * torchvision's ResNet-50 at 64x64, batch 16, and the weighted conv time of one training step.
 * Prints figures, never fails; BENCH_THREADS=N threads (default 2, as `--threads 2`: the kernels' pool,
 * GEMMs included); BENCH_CONV_LIMIT=N (floats) sets fp_workspace.limit for tuning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "error.h"
#include "trainer/cpu/gemm.h"
#include "trainer/layers.h"
#include "trainer/run/environment.h"

#define BATCH 16
#define REPS 5

typedef struct {
    const char *name;
    int h, cin, cout, k, stride, pad; /* input h == w */
    int count;                        /* occurrences in one ResNet-50 forward */
    int need_dx;                      /* conv1's input gradient is never computed */
} conv_shape;

/* torchvision resnet50: conv1, then layers of [3, 4, 6, 3] bottlenecks (1x1, 3x3 with the stride,
 * 1x1 x4), a 1x1 (strided) projection in each layer's first block. 64x64 input: 32 after conv1,
 * 16 after the max-pool, then 16, 8, 4, 2. */
static const conv_shape shapes[] = {
    {"conv1_7x7s2_3to64_64", 64, 3, 64, 7, 2, 3, 1, 0},
    {"l1_1x1_64to64_16", 16, 64, 64, 1, 1, 0, 1, 1},
    {"l1_3x3_64to64_16", 16, 64, 64, 3, 1, 1, 3, 1},
    {"l1_1x1_64to256_16", 16, 64, 256, 1, 1, 0, 4, 1}, /* 3 conv3 + the projection */
    {"l1_1x1_256to64_16", 16, 256, 64, 1, 1, 0, 2, 1},
    {"l2_1x1_256to128_16", 16, 256, 128, 1, 1, 0, 1, 1},
    {"l2_3x3s2_128to128_16", 16, 128, 128, 3, 2, 1, 1, 1},
    {"l2_1x1_128to512_8", 8, 128, 512, 1, 1, 0, 4, 1},
    {"l2_1x1s2_256to512_16", 16, 256, 512, 1, 2, 0, 1, 1},
    {"l2_1x1_512to128_8", 8, 512, 128, 1, 1, 0, 3, 1},
    {"l2_3x3_128to128_8", 8, 128, 128, 3, 1, 1, 3, 1},
    {"l3_1x1_512to256_8", 8, 512, 256, 1, 1, 0, 1, 1},
    {"l3_3x3s2_256to256_8", 8, 256, 256, 3, 2, 1, 1, 1},
    {"l3_1x1_256to1024_4", 4, 256, 1024, 1, 1, 0, 6, 1},
    {"l3_1x1s2_512to1024_8", 8, 512, 1024, 1, 2, 0, 1, 1},
    {"l3_1x1_1024to256_4", 4, 1024, 256, 1, 1, 0, 5, 1},
    {"l3_3x3_256to256_4", 4, 256, 256, 3, 1, 1, 5, 1},
    {"l4_1x1_1024to512_4", 4, 1024, 512, 1, 1, 0, 1, 1},
    {"l4_3x3s2_512to512_4", 4, 512, 512, 3, 2, 1, 1, 1},
    {"l4_1x1_512to2048_2", 2, 512, 2048, 1, 1, 0, 3, 1},
    {"l4_1x1s2_1024to2048_4", 4, 1024, 2048, 1, 2, 0, 1, 1},
    {"l4_1x1_2048to512_2", 2, 2048, 512, 1, 1, 0, 2, 1},
    {"l4_3x3_512to512_2", 2, 512, 512, 3, 1, 1, 2, 1},
};

static float *rand_array(size_t n)
{
    float *a = malloc(n * sizeof(float));
    unsigned s = 12345u;
    for (size_t i = 0; a && i < n; i++) {
        s = s * 1664525u + 1013904223u;
        a[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    return a;
}

/* Best-of-REPS milliseconds of one kernel call (after one warm-up call). */
#define TIME_BEST(out, call)                                          \
    do {                                                              \
        double best_ = 1e30;                                          \
        for (int rep_ = 0; rep_ <= REPS; rep_++) {                    \
            double t0_ = fp_clock_mono_s();                                     \
            if ((call) != FP_OK) {                                    \
                fprintf(stderr, "bench_conv: %s\n", fp_error_message()); \
                return 1;                                             \
            }                                                         \
            double t_ = (fp_clock_mono_s() - t0_) * 1e3;                        \
            if (rep_ > 0 && t_ < best_)                               \
                best_ = t_;                                           \
        }                                                             \
        (out) = best_;                                                \
    } while (0)

int main(void)
{
    fp_env_blas_core_restart(NULL);   /* OpenBLAS's kernels for this CPU, as fp16probe gets them */
    const char *thr = getenv("BENCH_THREADS");
    int threads = fp_gemm_use_pool(thr ? atoi(thr) : 2);
    printf("ResNet-50 convs, 64x64 input, batch %d, %d threads (BENCH_THREADS), best of %d\n", BATCH, threads,
           REPS);
    printf("%-24s %5s %9s %9s %9s %9s %8s\n", "shape", "count", "fwd ms", "bwd_d ms", "bwd_w ms", "sum ms", "GFLOP/s");
    fp_workspace ws = {0};
    ws.threads = 2;
    if (getenv("BENCH_CONV_LIMIT"))
        ws.limit = (size_t)strtoull(getenv("BENCH_CONV_LIMIT"), NULL, 10);
    double step_ms = 0, step_flop = 0;
    int nconv = 0;
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < nshapes; s++) {
        const conv_shape *c = &shapes[s];
        fp_dims xd = {BATCH, c->h, c->h, c->cin};
        fp_conv_params p = {c->cin, c->cout, c->k, c->k, c->stride, c->pad};
        fp_dims yd = fp_conv_out_dims(xd, &p);
        size_t nx = (size_t)xd.n * xd.h * xd.w * xd.c, ny = (size_t)yd.n * yd.h * yd.w * yd.c;
        size_t nw = (size_t)c->cout * c->k * c->k * c->cin;
        float *x = rand_array(nx), *w = rand_array(nw), *y = rand_array(ny), *dx = rand_array(nx),
              *dw = rand_array(nw);
        if (!x || !w || !y || !dx || !dw) {
            fprintf(stderr, "bench_conv: out of memory\n");
            return 1;
        }
        double tf, td, tw;
        TIME_BEST(tf, fp_conv_forward(y, x, xd, w, &p, &ws));
        TIME_BEST(td, fp_conv_backward_data(dx, y, xd, w, &p, &ws));
        TIME_BEST(tw, fp_conv_backward_weights(dw, y, x, xd, &p, &ws));
        double flop1 = 2.0 * (double)yd.n * yd.h * yd.w * (double)c->cout * c->k * c->k * c->cin;
        double passes = c->need_dx ? 3.0 : 2.0;
        double ms = tf + tw + (c->need_dx ? td : 0.0);
        printf("%-24s %5d %9.3f %9.3f %9.3f %9.3f %8.1f\n", c->name, c->count, tf, td, tw, ms,
               passes * flop1 / (ms * 1e-3) * 1e-9);
        printf("bench: conv_%s=%.3f unit=ms\n", c->name, ms);
        step_ms += c->count * ms;
        step_flop += c->count * passes * flop1;
        nconv += c->count;
        free(x); free(w); free(y); free(dx); free(dw);
    }
    fp_workspace_free(&ws);
    printf("%d convs per step (conv1 without its input gradient): %.2f GFLOP, %.1f GFLOP/s overall\n", nconv,
           step_flop * 1e-9, step_flop / (step_ms * 1e-3) * 1e-9);
    printf("bench: resnet50_conv_step_estimate=%.2f unit=ms gflops=%.1f\n", step_ms, step_flop / (step_ms * 1e-3) * 1e-9);
    return 0;
}
