/* bench_train_step.c — one training step (forward TRAIN + cross-entropy + backward, no optimizer) of
 * torchvision's ResNet-50 at 64x64, batch 16, under the fp32, fp16 and bf16 policies: 2 warm-up + 5
 * timed steps, median times, memory figures, fp16/fp32 ratios; two threads, as `--threads 2`. A fourth model,
 * fp32 with fusion on (fp_model_set_fusion: the CPU's fused batchnorm (+ add) + relu; off by default on the CPU),
 * gives the fused / unfused step ratio and how many chains fused. Prints figures, never fails on time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/common.h"
#include "clock.h"
#include "error.h"
#include "trainer/cpu/gemm.h"
#include "trainer/model.h"
#include "trainer/run/environment.h"

#define BATCH 16
#define SIZE 64
#define WARMUP 2
#define STEPS 5

#define NPOL 4   /* the last: fp32 with fusion on */
static const char *const policies[NPOL] = {"fp32", "fp16", "bf16", "fp32"};

int main(void)
{
    fp_env_blas_core_restart(NULL);   /* OpenBLAS's kernels for this CPU, as fp16probe gets them */
    size_t nx = (size_t)BATCH * SIZE * SIZE * 3;
    float *x = malloc(nx * sizeof(float));
    int labels[BATCH];
    unsigned s = 12345u;
    for (size_t i = 0; i < nx; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i * 37) % 1000;
    fp_gemm_use_pool(2);
    fp_model *m[NPOL];
    for (int p = 0; p < NPOL; p++) {
        fp_model_config cfg = {"resnet50", 1000, SIZE, 0, 1, 0};
        if (fp_model_create(&m[p], &cfg) || fp_model_set_policy(m[p], fp_policy_find(policies[p]))) {
            fprintf(stderr, "bench_train_step: %s\n", fp_error_message());
            return 1;
        }
        fp_model_set_threads(m[p], 2);
        fp_model_set_fusion(m[p], p == NPOL - 1);
    }
    /* The policies take turns step by step, so the noise of a shared machine hits them alike; the
     * ratios are medians of the per-round ratios. */
    double t[NPOL][STEPS], fwd[NPOL][STEPS], ratio[NPOL][STEPS];
    float loss[NPOL] = {0};
    for (int it = 0; it < WARMUP + STEPS; it++)
        for (int p = 0; p < NPOL; p++) {
            fp_model_zero_grad(m[p]);
            double t0 = fp_clock_mono_s();
            const float *logits;
            if (fp_model_forward(m[p], &logits, x, BATCH, FP_MODE_TRAIN)) {
                fprintf(stderr, "bench_train_step: %s\n", fp_error_message());
                return 1;
            }
            double t1 = fp_clock_mono_s();
            if (fp_model_train_step(m[p], &loss[p], NULL, NULL, x, labels, BATCH)) {   /* forward again + backward */
                fprintf(stderr, "bench_train_step: %s\n", fp_error_message());
                return 1;
            }
            double t2 = fp_clock_mono_s();
            if (it >= WARMUP) {
                t[p][it - WARMUP] = (t2 - t1) * 1e3;
                fwd[p][it - WARMUP] = (t1 - t0) * 1e3;
                ratio[p][it - WARMUP] = t[p][it - WARMUP] / t[0][it - WARMUP];
            }
        }
    fp_model_mem mem[NPOL];
    for (int p = 0; p < NPOL; p++) {
        qsort(t[p], STEPS, sizeof t[p][0], bench_cmp_double);
        qsort(fwd[p], STEPS, sizeof fwd[p][0], bench_cmp_double);
        qsort(ratio[p], STEPS, sizeof ratio[p][0], bench_cmp_double);
        fp_model_memory(m[p], &mem[p]);
        int fused = 0;
        fp_model_fusion(m[p], &fused, NULL);
        printf("resnet50 %dx%d batch %d, %s%s, %zu parameters, loss %.4f\n", SIZE, SIZE, BATCH, policies[p],
               p == NPOL - 1 ? " with fusion on" : "", fp_model_num_params(m[p]), loss[p]);
        if (p == NPOL - 1)
            printf("  fusion: %d batchnorm -> (add ->) relu chains fused in each step\n", fused);
        printf("  forward only (train mode): median %.1f ms; forward+backward: median %.1f ms (min %.1f, max %.1f)\n",
               fwd[p][STEPS / 2], t[p][STEPS / 2], t[p][0], t[p][STEPS - 1]);
        printf("  memory MiB: params %.1f, grads %.1f, activations (arena) %.1f, of which saved for backward %.1f, "
               "activation gradients peak %.1f, workspace peak %.1f (of which casts %.1f), weight copy %.1f\n",
               mem[p].params / 1048576.0, mem[p].grads / 1048576.0, mem[p].activations_peak / 1048576.0,
               mem[p].saved_peak / 1048576.0, mem[p].act_grads_peak / 1048576.0, mem[p].workspace_peak / 1048576.0,
               mem[p].casts / 1048576.0, mem[p].weight_copy / 1048576.0);
    }
    double apr = (double)mem[1].activations_peak / mem[0].activations_peak;
    printf("bench: resnet50_fwd_64px_b16=%.1f unit=ms\n", fwd[0][STEPS / 2]);
    printf("bench: resnet50_activation_grads_peak_64px_b16=%.1f unit=MiB\n", mem[0].act_grads_peak / 1048576.0);
    printf("bench: resnet50_activation_peak_64px_b16=%.1f unit=MiB\n", mem[0].activations_peak / 1048576.0);
    printf("bench: resnet50_fwd_bwd_fp16_64px_b16=%.1f unit=ms\n", t[1][STEPS / 2]);
    printf("bench: resnet50_fwd_bwd_bf16_64px_b16=%.1f unit=ms\n", t[2][STEPS / 2]);
    printf("bench: resnet50_step_bf16_over_fp32=%.3f unit=x ratio=%.3f\n", ratio[2][STEPS / 2], ratio[2][STEPS / 2]);
    printf("bench: resnet50_activation_peak_fp16_over_fp32=%.3f unit=x ratio=%.3f\n", apr, apr);
    printf("bench: resnet50_step_fp16_over_fp32=%.3f unit=x ratio=%.3f\n", ratio[1][STEPS / 2], ratio[1][STEPS / 2]);
    printf("bench: resnet50_fwd_bwd_64px_b16=%.1f unit=ms\n", t[0][STEPS / 2]);
    printf("bench: resnet50_step_fp32_fused_over_unfused=%.3f unit=x ratio=%.3f fused_ms=%.1f\n", ratio[3][STEPS / 2],
           ratio[3][STEPS / 2], t[3][STEPS / 2]);
    for (int p = 0; p < NPOL; p++)
        fp_model_free(m[p]);
    free(x);
    return 0;
}
