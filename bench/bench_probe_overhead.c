/* bench_probe_overhead.c — step time with the probes off vs on, ResNet-50 at 64x64, batch 16, fp16
 * policy, CPU: the configurations interleaved step by step (order rotating) to cancel the load of a
 * shared machine; headline: the median over cycles of EVERY steps of the paired ratio (cycle time on
 * / off; a median of single steps would hide the sampling steps), with its min..max. "on" = per-layer
 * CPU timers every step, histograms of every layer's tensors (all roles, updates included; the weight
 * roles in the one pass after the optimizer, as compare.c) every 10 steps, per-layer rounding error every 10 steps as trainer/compare.c runs it (fp_prec_err_compare
 * against an fp32 model, on FP_PREC_ERR_DEFAULT_SUBBATCH images of the batch). The same run gives the
 * parts, robust to load: the timers' per-step cost (median paired ratio of non-sampling steps), the
 * sampling step's histogram extra (and the part of it spent in the parameter pass after the
 * optimizer, copy of the old parameters included) and the precision-error call (medians); from them
 * the overhead at every 10 and at the default periods of probe.h. Prints figures, never fails on time. Run with
 * OPENBLAS_NUM_THREADS=2; BENCH_ROUNDS=N cycles (default 7). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "probe/analysis.h"
#include "probe/probe.h"
#include "trainer/model.h"
#include "trainer/precision.h"

#define BATCH 16
#define SIZE 64
#define MAX_ROUNDS 64
#define WARMUP 2
#define EVERY 10
#define LOSS_SCALE 1024.0f   /* GradScaler-like: a power of two */

enum { OFF, TIMERS, FULL, NCFG };

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
    fp_model *m, *ref;   /* ref: the fp32 arm's model, for the precision error */
    fp_probe *p[NCFG];
    fp_cpu_timer *t[NCFG];
    fp_hist_probe *hp;
    fp_prec_err *pe;
    float *x, *old;
    int *labels;
    int64_t step[NCFG];
    double prec_s, sampled_s;   /* the last step's precision-error call and whole time (FULL) */
    double params_s;            /* the last sampled step's copy of the old parameters + parameter pass */
} bench_t;

static int one_step(bench_t *b, int cfg)
{
    fp_model *m = b->m;
    fp_probe *p = b->p[cfg];
    int64_t step = b->step[cfg]++;
    int rc = FP_OK;
    double t0 = now_s();
    if (cfg == FULL && fp_probe_every(step, EVERY))   /* before the step, on its batch, as compare.c */
        rc = fp_prec_err_compare(b->pe, b->ref, b->x, BATCH, step);
    double t1 = now_s();
    fp_model_set_probe(m, p);
    fp_probe_step_begin(p, step, LOSS_SCALE);
    size_t np = fp_model_num_params(m);
    int upd = fp_probe_wants_all(p) & FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE);
    double tc = now_s();
    if (upd)   /* as compare.c: the parameters before a sampled step */
        fp_probe_copy_params(b->old, fp_model_params(m), np);
    double params_s = now_s() - tc;
    fp_model_zero_grad(m);
    float loss;
    rc = rc ? rc : fp_model_train_step_scaled(m, &loss, NULL, NULL, b->x, b->labels, BATCH, LOSS_SCALE);
    fp_unscale_and_check(fp_model_grads(m), np, 1.0f / LOSS_SCALE);   /* as trainer/arm.c */
    float *w = fp_model_params(m);
    const float *g = fp_model_grads(m);
    for (size_t i = 0; i < np; i++)   /* SGD, tiny lr: the same work in every configuration */
        w[i] -= 1e-9f * g[i];
    if (upd) {
        tc = now_s();
        fp_probe_sample_params(p, m, b->old, g, NULL);
        b->params_s = params_s + now_s() - tc;
    }
    fp_probe_step_end(p);
    b->prec_s = t1 - t0;
    b->sampled_s = now_s() - t0;
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
    if (fp_model_create(&b.m, &mc) || fp_model_set_policy(b.m, fp_policy_find("fp16")) ||
        fp_model_clone(&b.ref, b.m) || fp_model_copy_params(b.ref, b.m, 1)) {
        fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
        return 1;
    }
    const char *re = getenv("BENCH_ROUNDS");
    int rounds = re ? atoi(re) : 7;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 7;
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
    fp_probe_caller_roles(b.p[FULL], FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD));   /* as compare.c */
    if (fp_prec_err_create(&b.pe, b.ref, fp_policy_find("fp16"))) {
        fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
        return 1;
    }
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
    /* A cycle = EVERY step slots; in each slot one step of every configuration, the order rotating
     * from slot to slot, so that all three see the same load within seconds. FULL's sampling step is
     * slot 0 of every cycle. */
    static double t[NCFG][MAX_ROUNDS][EVERY];
    double cyc[NCFG][MAX_ROUNDS], hist_x[MAX_ROUNDS], prec_x[MAX_ROUNDS], par_x[MAX_ROUNDS],
        slot_r[NCFG][MAX_ROUNDS * EVERY];
    size_t nslot = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < EVERY; i++) {
            for (int k = 0; k < NCFG; k++) {
                int c = (k + i + r) % NCFG;
                if (one_step(&b, c)) {
                    fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
                    return 1;
                }
                t[c][r][i] = b.sampled_s;
                if (c == FULL && i == 0) {
                    prec_x[r] = b.prec_s;
                    par_x[r] = b.params_s;
                }
            }
            if (i > 0) {   /* not a sampling slot: the per-step cost of the timers (and of nothing else) */
                for (int c = 0; c < NCFG; c++)
                    slot_r[c][nslot] = t[c][r][i] / t[OFF][r][i];
                nslot++;
            }
        }
        double sum[NCFG] = {0};
        for (int c = 0; c < NCFG; c++)
            for (int i = 0; i < EVERY; i++)
                sum[c] += t[c][r][i];
        for (int c = 0; c < NCFG; c++)
            cyc[c][r] = sum[c] / sum[OFF];
        /* the sampling step's extra over the probes-off step of the same slot, less the timers' share */
        hist_x[r] = t[FULL][r][0] - prec_x[r] - t[OFF][r][0];
        printf("cycle %d: off %.1f ms/step, ratio timers %.4f full %.4f (sampling step: hist+updates extra %.0f ms, "
               "precision error %.0f ms)\n", r, 1e3 * sum[OFF] / EVERY, cyc[TIMERS][r], cyc[FULL][r], 1e3 * hist_x[r],
               1e3 * prec_x[r]);
        fflush(stdout);
    }
    double med[NCFG], lo[NCFG], hi[NCFG], offs[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        double so = 0;
        for (int i = 0; i < EVERY; i++)
            so += t[OFF][r][i];
        offs[r] = so / EVERY;
    }
    for (int c = 0; c < NCFG; c++) {
        qsort(cyc[c], (size_t)rounds, sizeof(double), cmp_double);
        med[c] = cyc[c][rounds / 2];
        lo[c] = cyc[c][0];
        hi[c] = cyc[c][rounds - 1];
        qsort(slot_r[c], nslot, sizeof(double), cmp_double);
    }
    qsort(hist_x, (size_t)rounds, sizeof(double), cmp_double);
    qsort(prec_x, (size_t)rounds, sizeof(double), cmp_double);
    qsort(par_x, (size_t)rounds, sizeof(double), cmp_double);
    qsort(offs, (size_t)rounds, sizeof(double), cmp_double);
    double off = offs[rounds / 2], hx = hist_x[rounds / 2], px = prec_x[rounds / 2];
    double r_tim = slot_r[TIMERS][nslot / 2];   /* median over non-sampling slots: the timers' cost per step */
    /* from the parts (robust to the load): timers every step, a histogram step's extra once per period,
     * a precision-error call once per period */
    double r_10 = r_tim + (hx + px) / EVERY / off;
    double r_def = r_tim + (hx / FP_PROBE_DEFAULT_HIST_EVERY + px / FP_PROBE_DEFAULT_PRECISION_EVERY) / off;
    printf("bench: resnet50_fp16_64px_b16_step_probes_off=%.1f unit=ms\n", 1e3 * off);
    printf("bench: sampled_step_extra_hist=%.1f unit=ms spread=%.1f..%.1f (all roles of every layer, updates included)\n",
           1e3 * hx, 1e3 * hist_x[0], 1e3 * hist_x[rounds - 1]);
    printf("bench: sampled_params_pass=%.1f unit=ms spread=%.1f..%.1f (part of the hist extra: the copy of the old "
           "parameters + fp_probe_sample_params)\n", 1e3 * par_x[rounds / 2], 1e3 * par_x[0], 1e3 * par_x[rounds - 1]);
    printf("bench: sampled_step_extra_precision=%.1f unit=ms spread=%.1f..%.1f (fp_prec_err_compare on %d of %d images)\n",
           1e3 * px, 1e3 * prec_x[0], 1e3 * prec_x[rounds - 1], fp_prec_err_subbatch(b.pe, BATCH), BATCH);
    printf("bench: probe_overhead_timers=%.2f unit=%% ratio=%.4f (median of %zu paired steps; quartiles %.4f..%.4f)\n",
           100 * (r_tim - 1), r_tim, nslot, slot_r[TIMERS][nslot / 4], slot_r[TIMERS][3 * nslot / 4]);
    printf("bench: probe_overhead_from_parts=%.2f unit=%% ratio=%.4f (hist + precision every %d)\n", 100 * (r_10 - 1),
           r_10, EVERY);
    printf("bench: probe_overhead_defaults=%.2f unit=%% ratio=%.4f (from parts: hist every %d, precision every %d, "
           "timers every step)\n", 100 * (r_def - 1), r_def, FP_PROBE_DEFAULT_HIST_EVERY,
           FP_PROBE_DEFAULT_PRECISION_EVERY);
    printf("bench: probe_overhead=%.2f unit=%% ratio=%.4f spread=%.4f..%.4f cycles=%d (hist + precision every %d; "
           "median of per-cycle paired ratios)\n", 100 * (med[FULL] - 1), med[FULL], lo[FULL], hi[FULL], rounds, EVERY);

    b.p[OFF] = off_probe;
    fp_model_set_probe(b.m, NULL);
    fp_prec_err_free(b.pe);
    fp_hist_probe_free(b.hp);
    for (int c = 0; c < NCFG; c++) {
        fp_probe_free(b.p[c]);
        fp_cpu_timer_free(b.t[c]);
    }
    fp_model_free(b.m);
    fp_model_free(b.ref);
    free(b.x);
    free(b.labels);
    free(b.old);
    return 0;
}
