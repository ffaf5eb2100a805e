/* bench_probe_overhead.c — step time with the probes off vs on, ResNet-50 at 64x64, batch 16, fp16
 * policy, CPU: configurations interleaved in alternating blocks of BLOCK steps to cancel drift; the
 * figure per configuration is the median over blocks of the block's mean step time (a median of
 * single steps would hide the sampling steps). "on" = per-layer CPU timers every step, histograms of
 * every layer's tensors every 10 steps, per-layer rounding error every 10 steps (the low-precision
 * forward plus the per-layer comparison, as the fp32 arm's step would carry it). Prints figures,
 * never fails on time. Run with OPENBLAS_NUM_THREADS=2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "probe/analysis.h"
#include "probe/probe.h"
#include "trainer/model.h"

#define BATCH 16
#define SIZE 64
#define BLOCK 10
#define ROUNDS 3
#define WARMUP 2
#define EVERY 10

enum { OFF, TIMERS, FULL, NCFG };
static const char *const cfg_name[NCFG] = {"off", "timers", "full"};

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

typedef struct {
    fp_model *m;
    fp_probe *p[NCFG];
    fp_cpu_timer *t[NCFG];
    fp_hist_probe *hp;
    fp_prec_err *pe;
    float *x, *old;
    int *labels;
    int64_t step[NCFG];
} bench_t;

static int one_step(bench_t *b, int cfg)
{
    fp_model *m = b->m;
    fp_probe *p = b->p[cfg];
    int64_t step = b->step[cfg]++;
    int rc = FP_OK;
    if (cfg == FULL && fp_probe_every(step, EVERY))   /* before the step, on its batch */
        rc = fp_prec_err_run_lowp(b->pe, m, b->x, BATCH);
    fp_model_set_probe(m, p);
    fp_probe_step_begin(p, step, 1.0f);
    fp_model_zero_grad(m);
    float loss;
    rc = rc ? rc : fp_model_train_step(m, &loss, NULL, NULL, b->x, b->labels, BATCH);
    size_t np = fp_model_num_params(m);
    int upd = fp_probe_wants(p) & FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE);
    if (upd)
        memcpy(b->old, fp_model_params(m), np * sizeof(float));
    float *w = fp_model_params(m);
    const float *g = fp_model_grads(m);
    for (size_t i = 0; i < np; i++)   /* SGD, tiny lr: the same work in every configuration */
        w[i] -= 1e-6f * g[i];
    if (upd)
        fp_probe_sample_updates(p, m, b->old);
    fp_probe_step_end(p);
    return rc;
}

int main(void)
{
    bench_t b;
    memset(&b, 0, sizeof b);
    size_t nx = (size_t)BATCH * SIZE * SIZE * 3;
    b.x = malloc(nx * sizeof(float));
    b.labels = malloc(BATCH * sizeof(int));
    unsigned s = 12345u;
    for (size_t i = 0; i < nx; i++) {
        s = s * 1664525u + 1013904223u;
        b.x[i] = (float)((s >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
    for (int i = 0; i < BATCH; i++)
        b.labels[i] = i % 10;
    fp_model_config mc = {"resnet50", 10, SIZE, 0, 1, 0};
    if (fp_model_create(&b.m, &mc) || fp_model_set_policy(b.m, fp_policy_find("fp16"))) {
        fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
        return 1;
    }
    int L = fp_model_layer_count(b.m);
    b.old = malloc(fp_model_num_params(b.m) * sizeof(float));
    for (int c = 0; c < NCFG; c++) {
        fp_probe_create(&b.p[c]);
        fp_cpu_timer_create(&b.t[c], L);
        if (c != OFF)
            fp_cpu_timer_attach(b.t[c], b.p[c]);
    }
    fp_hist_probe_create(&b.hp, L, EVERY, 0, NULL, 0);
    fp_hist_probe_attach(b.hp, b.p[FULL]);
    if (fp_prec_err_create(&b.pe, b.m, fp_policy_find("fp16"))) {
        fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
        return 1;
    }
    fp_prec_err_attach(b.pe, b.p[FULL]);
    /* OFF runs with no probe at all: only the model's pointer check remains */
    fp_probe *off_probe = b.p[OFF];
    b.p[OFF] = NULL;

    for (int c = 0; c < NCFG; c++)
        for (int i = 0; i < WARMUP; i++)
            if (one_step(&b, c)) {
                fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
                return 1;
            }
    for (int c = 0; c < NCFG; c++)
        b.step[c] = 0;
    double blocks[NCFG][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < NCFG; k++) {
            int c = (r % 2) ? NCFG - 1 - k : k;   /* alternate the order every round */
            double t0 = now_s();
            for (int i = 0; i < BLOCK; i++)
                one_step(&b, c);
            blocks[c][r] = (now_s() - t0) / BLOCK;
            printf("round %d %-6s %.1f ms/step\n", r, cfg_name[c], 1e3 * blocks[c][r]);
            fflush(stdout);
        }
    double med[NCFG];
    for (int c = 0; c < NCFG; c++) {
        qsort(blocks[c], ROUNDS, sizeof(double), cmp_double);
        med[c] = blocks[c][ROUNDS / 2];
    }
    double r_timers = med[TIMERS] / med[OFF], r_full = med[FULL] / med[OFF];
    /* defaults: timers every step, sampling work (full - timers, paid once per EVERY steps) paid once
     * per FP_PROBE_DEFAULT_HIST_EVERY steps (an upper bound: precision error runs half as often) */
    double sampling = med[FULL] - med[TIMERS];
    double r_def = (med[TIMERS] + sampling * EVERY / FP_PROBE_DEFAULT_HIST_EVERY) / med[OFF];
    printf("bench: resnet50_fp16_64px_b16_step_probes_off=%.1f unit=ms\n", 1e3 * med[OFF]);
    printf("bench: probe_overhead_timers=%.2f unit=%% ratio=%.4f\n", 100 * (r_timers - 1), r_timers);
    printf("bench: probe_overhead_defaults_est=%.2f unit=%% ratio=%.4f (hist every %d, precision every %d)\n",
           100 * (r_def - 1), r_def, FP_PROBE_DEFAULT_HIST_EVERY, FP_PROBE_DEFAULT_PRECISION_EVERY);
    printf("bench: probe_overhead=%.2f unit=%% ratio=%.4f\n", 100 * (r_full - 1), r_full);

    b.p[OFF] = off_probe;
    fp_model_set_probe(b.m, NULL);
    fp_prec_err_free(b.pe);
    fp_hist_probe_free(b.hp);
    for (int c = 0; c < NCFG; c++) {
        fp_probe_free(b.p[c]);
        fp_cpu_timer_free(b.t[c]);
    }
    fp_model_free(b.m);
    free(b.x);
    free(b.labels);
    free(b.old);
    return 0;
}
