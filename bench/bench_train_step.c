/* bench_train_step.c — one fp32 training step (forward TRAIN + cross-entropy + backward, no optimizer)
 * of torchvision's ResNet-50 at 64x64, batch 16: 2 warm-up + 5 timed steps, median time, the per-layer
 * share of the forward, and the memory figures. Prints figures, never fails on time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "trainer/model.h"

#define BATCH 16
#define SIZE 64
#define WARMUP 2
#define STEPS 5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    fp_model_config cfg = {"resnet50", 1000, SIZE, 0, 1, 0};
    fp_model *m;
    if (fp_model_create(&m, &cfg)) {
        fprintf(stderr, "bench_train_step: %s\n", fp_error_message());
        return 1;
    }
    fp_model_set_threads(m, 2);
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
    double t[STEPS], fwd[STEPS];
    float loss = 0;
    for (int it = 0; it < WARMUP + STEPS; it++) {
        fp_model_zero_grad(m);
        double t0 = now_s();
        const float *logits;
        if (fp_model_forward(m, &logits, x, BATCH, FP_MODE_TRAIN)) {
            fprintf(stderr, "bench_train_step: %s\n", fp_error_message());
            return 1;
        }
        double t1 = now_s();
        if (fp_model_train_step(m, &loss, NULL, NULL, x, labels, BATCH)) {   /* forward again + backward */
            fprintf(stderr, "bench_train_step: %s\n", fp_error_message());
            return 1;
        }
        double t2 = now_s();
        if (it >= WARMUP) {
            t[it - WARMUP] = (t2 - t1) * 1e3;
            fwd[it - WARMUP] = (t1 - t0) * 1e3;
        }
    }
    qsort(t, STEPS, sizeof t[0], cmp_double);
    qsort(fwd, STEPS, sizeof fwd[0], cmp_double);
    fp_model_mem mem;
    fp_model_memory(m, &mem);
    printf("resnet50 %dx%d batch %d, fp32, %zu parameters, loss %.4f\n", SIZE, SIZE, BATCH, fp_model_num_params(m),
           loss);
    printf("forward only (train mode): median %.1f ms; forward+backward: median %.1f ms (min %.1f, max %.1f)\n",
           fwd[STEPS / 2], t[STEPS / 2], t[0], t[STEPS - 1]);
    printf("memory MiB: params %.1f, grads %.1f, activations (arena) %.1f, of which saved for backward %.1f, "
           "activation gradients peak %.1f, workspace peak %.1f\n",
           mem.params / 1048576.0, mem.grads / 1048576.0, mem.activations_peak / 1048576.0,
           mem.saved_peak / 1048576.0, mem.act_grads_peak / 1048576.0, mem.workspace_peak / 1048576.0);
    printf("bench: resnet50_fwd_64px_b16=%.1f unit=ms\n", fwd[STEPS / 2]);
    printf("bench: resnet50_activation_grads_peak_64px_b16=%.1f unit=MiB\n", mem.act_grads_peak / 1048576.0);
    printf("bench: resnet50_activation_peak_64px_b16=%.1f unit=MiB\n", mem.activations_peak / 1048576.0);
    printf("bench: resnet50_fwd_bwd_64px_b16=%.1f unit=ms\n", t[STEPS / 2]);
    fp_model_free(m);
    free(x);
    return 0;
}
