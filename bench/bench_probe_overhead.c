/* bench_probe_overhead.c — step time with the probes off vs on for the default comparison's two arms,
 * ResNet-50 at 64x64, batch 16, CPU: an fp32 arm (the reference) and an fp16 arm trained side by
 * side as trainer/compare.c does; the configurations interleaved step by step (order rotating) to
 * cancel the load of a shared machine. Each arm is a trainer/arm.h arm (SGD, momentum 0.9, weight
 * decay 5e-4, the default lr), stepped as compare.c steps it. "on" = per-layer CPU timers every step;
 * histograms of every layer's tensors of both arms (all roles, updates included; the weight roles in
 * the parameter pass riding on the optimizer step, fp_arm_set_update_hook) every 10 steps; the fp16
 * arm's per-layer rounding error every 10 steps riding on the fp32 arm's step (probe/analysis.h: the
 * fp32 forward's outputs of FP_PREC_ERR_DEFAULT_SUBBATCH images captured, the fp16 forward on them
 * after the fp32 forward). Headline: the median over cycles of EVERY steps of the paired ratio (cycle
 * time of both arms on / off; a median of single steps would hide the sampling steps), with its
 * min..max, and the same per arm. The same run gives the parts, robust to load: the per-step cost of
 * the timers and of everything on at steps that sample nothing (median paired ratios of non-sampling
 * steps), the sampling step's histogram extra and the ride (medians); from them the overhead at every
 * 10 and at the default periods of probe.h. Prints figures, never fails on time. Two threads, as
 * `--threads 2`: the kernels' pool, GEMMs included (trainer/cpu/gemm.h); BENCH_ROUNDS=N cycles
 * (default 7). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "error.h"
#include "probe/analysis.h"
#include "probe/probe.h"
#include "trainer/arm.h"
#include "trainer/cpu/gemm.h"
#include "trainer/model.h"
#include "trainer/precision.h"

#define BATCH 16
#define SIZE 64
#define MAX_ROUNDS 64
#define WARMUP 2
#define EVERY 10

enum { OFF, TIMERS, FULL, NCFG };
enum { REF, LOW, NARM };   /* the fp32 arm, the fp16 arm */

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
    fp_arm *arm[NARM];
    fp_probe *p[NCFG][NARM];
    fp_cpu_timer *t[NCFG][NARM];
    fp_hist_probe *hp[NARM];
    fp_prec_err *pe;   /* the fp16 arm's rounding error, riding on the fp32 arm's FULL probe */
    fp_batch batch;
    fp_probe *cur;     /* the probe of the step in progress (the update hook's) */
    int64_t step[NCFG];
    double ride_s;     /* the last FULL fp32 step's ride */
} bench_t;

static int ride(void *ctx, fp_arm *a, const fp_batch *batch)
{
    bench_t *b = ctx;
    double r0 = now_s();
    int rc = fp_prec_err_ride(b->pe, fp_arm_model(a), batch->images, batch->n);
    b->ride_s = now_s() - r0;
    return rc;
}

static int params_pass(void *ctx, fp_arm *a, fp_optim *opt)
{
    bench_t *b = ctx;
    fp_model *m = fp_arm_model(a);
    fp_probe_sample_params_stepping(b->cur, m, opt, fp_model_grads(m), NULL);
    return FP_OK;
}

/* One step of arm k in configuration cfg at step `step`, as compare.c runs it: the ride armed at a
 * sampled fp32 step, the parameter pass riding on the optimizer at a sampled step. */
static int arm_step(bench_t *b, int cfg, int k, int64_t step)
{
    fp_arm *arm = b->arm[k];
    fp_probe *p = b->p[cfg][k];
    int ride_now = cfg == FULL && k == REF && fp_probe_every(step, EVERY);
    int rc = ride_now ? fp_prec_err_arm(b->pe, BATCH) : FP_OK;
    fp_arm_set_forward_hook(arm, ride_now ? ride : NULL, b);
    fp_model_set_probe(fp_arm_model(arm), p);
    const fp_grad_scaler *sc = fp_arm_scaler(arm);
    fp_probe_step_begin(p, step, sc->mode == FP_SCALE_NONE ? 1.0f : sc->scale);
    b->cur = p;
    if (!rc && (fp_probe_wants_all(p) & FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE)))
        rc = fp_arm_set_update_hook(arm, params_pass, b);
    fp_arm_step_result r;
    rc = rc ? rc : fp_arm_step(arm, &b->batch, &r);
    fp_probe_step_end(p);
    if (!rc && r.diverged)
        rc = fp_fail(FP_EINTERNAL, "%s step %lld diverged", k == REF ? "fp32" : "fp16", (long long)step);
    return rc;
}

/* One step of both arms in configuration cfg; each arm's time into t[]. */
static int pair_step(bench_t *b, int cfg, double t[NARM])
{
    int64_t step = b->step[cfg]++;
    for (int k = 0; k < NARM; k++) {
        double t0 = now_s();
        int rc = arm_step(b, cfg, k, step);
        t[k] = now_s() - t0;
        if (rc)
            return rc;
    }
    return FP_OK;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

int main(void)
{
    bench_t b;
    memset(&b, 0, sizeof b);
    fp_gemm_use_pool(2);   /* as the CLI's --threads 2 (trainer/train.h fp_train_set_threads) */
    size_t nx = (size_t)BATCH * SIZE * SIZE * 3;
    b.batch.n = BATCH;
    b.batch.size = SIZE;
    b.batch.images = malloc(nx * sizeof(float));
    b.batch.labels = malloc(BATCH * sizeof(int32_t));
    unsigned s = 12345u;
    for (size_t i = 0; i < nx; i++) {
        s = s * 1664525u + 1013904223u;
        b.batch.images[i] = (float)((s >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
    for (int i = 0; i < BATCH; i++)
        b.batch.labels[i] = i % 10;
    fp_arm_config ac;
    fp_arm_config_default(&ac);
    ac.model = "resnet50";
    ac.image_size = SIZE;
    fp_lr_schedule_default(&ac.lr, FP_LR_CONSTANT, 0.1 * BATCH / 256);   /* compare's default lr */
    for (int k = 0; k < NARM; k++) {
        ac.policy = k == REF ? "fp32" : "fp16";
        if (fp_arm_create(&b.arm[k], &ac)) {
            fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
            return 1;
        }
    }
    const char *re = getenv("BENCH_ROUNDS");
    int rounds = re ? atoi(re) : 7;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 7;
    int L = fp_model_layer_count(fp_arm_model(b.arm[REF]));
    for (int c = 0; c < NCFG; c++)
        for (int k = 0; k < NARM; k++) {
            fp_probe_create(&b.p[c][k]);
            fp_cpu_timer_create(&b.t[c][k], L);
            if (c != OFF)
                fp_cpu_timer_attach(b.t[c][k], b.p[c][k]);
        }
    for (int k = 0; k < NARM; k++) {   /* as compare.c */
        fp_hist_probe_create(&b.hp[k], L, EVERY, 0, NULL, 0);
        fp_hist_probe_attach(b.hp[k], b.p[FULL][k]);
        fp_probe_caller_roles(b.p[FULL][k], FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD));
    }
    if (fp_prec_err_create(&b.pe, fp_arm_model(b.arm[REF]), fp_policy_find("fp16")) ||
        fp_prec_err_attach(b.pe, b.p[FULL][REF])) {
        fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
        return 1;
    }
    /* OFF runs with no probe at all: only the model's pointer check remains */
    fp_probe *off_probe[NARM] = {b.p[OFF][REF], b.p[OFF][LOW]};
    b.p[OFF][REF] = b.p[OFF][LOW] = NULL;

    double tt[NARM];
    for (int c = 0; c < NCFG; c++)
        for (int i = 0; i < WARMUP; i++)
            if (pair_step(&b, c, tt)) {
                fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
                return 1;
            }
    for (int c = 0; c < NCFG; c++)
        b.step[c] = 0;
    /* A cycle = EVERY step slots; in each slot one step of both arms in every configuration, the order
     * rotating from slot to slot, so that all three see the same load within seconds. FULL's sampling
     * step is slot 0 of every cycle. */
    static double t[NCFG][NARM][MAX_ROUNDS][EVERY];
    static double slot_r[NCFG][MAX_ROUNDS * EVERY];
    double cyc[NARM + 1][MAX_ROUNDS], hist_x[MAX_ROUNDS], ride_x[MAX_ROUNDS], offs[MAX_ROUNDS];
    int nslot = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < EVERY; i++) {
            for (int k = 0; k < NCFG; k++) {
                int c = (k + i + r) % NCFG;
                if (pair_step(&b, c, tt)) {
                    fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
                    return 1;
                }
                for (int a = 0; a < NARM; a++)
                    t[c][a][r][i] = tt[a];
                if (c == FULL && i == 0)
                    ride_x[r] = b.ride_s;
            }
            if (i > 0) {   /* not a sampling slot: the per-step cost of the timers (and of nothing else) */
                for (int c = TIMERS; c < NCFG; c++)
                    slot_r[c][nslot] = (t[c][REF][r][i] + t[c][LOW][r][i]) / (t[OFF][REF][r][i] + t[OFF][LOW][r][i]);
                nslot++;
            }
        }
        double sum[NCFG][NARM] = {{0}};
        for (int c = 0; c < NCFG; c++)
            for (int a = 0; a < NARM; a++)
                for (int i = 0; i < EVERY; i++)
                    sum[c][a] += t[c][a][r][i];
        for (int a = 0; a < NARM; a++)
            cyc[a][r] = sum[FULL][a] / sum[OFF][a];
        cyc[NARM][r] = (sum[FULL][REF] + sum[FULL][LOW]) / (sum[OFF][REF] + sum[OFF][LOW]);
        offs[r] = (sum[OFF][REF] + sum[OFF][LOW]) / EVERY;
        /* the sampling slot's extra over the probes-off pair of the same slot, less the ride */
        hist_x[r] = t[FULL][REF][r][0] + t[FULL][LOW][r][0] - ride_x[r] - t[OFF][REF][r][0] - t[OFF][LOW][r][0];
        printf("cycle %d: off %.1f ms/pair step, ratio full: pair %.4f fp32 arm %.4f fp16 arm %.4f (sampling step: "
               "hist+updates extra of both arms %.0f ms, ride %.0f ms)\n", r, 1e3 * offs[r], cyc[NARM][r], cyc[REF][r],
               cyc[LOW][r], 1e3 * hist_x[r], 1e3 * ride_x[r]);
        fflush(stdout);
    }
    double lo = 1e9, hi = 0;
    for (int r = 0; r < rounds; r++) {
        lo = cyc[NARM][r] < lo ? cyc[NARM][r] : lo;
        hi = cyc[NARM][r] > hi ? cyc[NARM][r] : hi;
    }
    double pair = median(cyc[NARM], rounds), ref = median(cyc[REF], rounds), low = median(cyc[LOW], rounds);
    double off = median(offs, rounds), hx = median(hist_x, rounds), px = median(ride_x, rounds);
    double r_tim = median(slot_r[TIMERS], nslot);   /* the timers' cost per pair step */
    double r_full_un = median(slot_r[FULL], nslot);  /* everything on, at steps that sample nothing */
    /* from the parts (robust to the load): everything on at the steps that sample nothing, a
     * histogram step's extra once per period, a ride once per period */
    double r_10 = r_full_un + (hx + px) / EVERY / off;
    double r_def = r_full_un + (hx / FP_PROBE_DEFAULT_HIST_EVERY + px / FP_PROBE_DEFAULT_PRECISION_EVERY) / off;
    printf("bench: resnet50_64px_b16_pair_step_probes_off=%.1f unit=ms (one fp32 step + one fp16 step)\n", 1e3 * off);
    printf("bench: sampled_step_extra_hist=%.1f unit=ms (both arms: all roles of every layer, updates included)\n",
           1e3 * hx);
    printf("bench: sampled_step_extra_precision=%.1f unit=ms (the ride: fp16 forward on %d of %d images)\n", 1e3 * px,
           fp_prec_err_subbatch(b.pe, BATCH), BATCH);
    printf("bench: probe_overhead_timers=%.2f unit=%% ratio=%.4f (median of %d paired pair steps)\n", 100 * (r_tim - 1),
           r_tim, nslot);
    printf("bench: probe_overhead_unsampled_steps=%.2f unit=%% ratio=%.4f (everything on, steps that sample nothing; "
           "median of %d paired pair steps)\n", 100 * (r_full_un - 1), r_full_un, nslot);
    printf("bench: probe_overhead_from_parts=%.2f unit=%% ratio=%.4f (hist + precision every %d: the unsampled steps' "
           "ratio + the sampled step's extras / %d)\n", 100 * (r_10 - 1), r_10, EVERY, EVERY);
    printf("bench: probe_overhead_defaults=%.2f unit=%% ratio=%.4f (from parts: hist every %d, precision every %d, "
           "timers every step)\n", 100 * (r_def - 1), r_def, FP_PROBE_DEFAULT_HIST_EVERY,
           FP_PROBE_DEFAULT_PRECISION_EVERY);
    printf("bench: probe_overhead_fp32_arm=%.2f unit=%% ratio=%.4f (its histograms and the ride)\n", 100 * (ref - 1),
           ref);
    printf("bench: probe_overhead_fp16_arm=%.2f unit=%% ratio=%.4f (its histograms)\n", 100 * (low - 1), low);
    printf("bench: probe_overhead=%.2f unit=%% ratio=%.4f spread=%.4f..%.4f cycles=%d (both arms; hist + precision "
           "every %d; median of per-cycle paired ratios)\n", 100 * (pair - 1), pair, lo, hi, rounds, EVERY);

    for (int k = 0; k < NARM; k++) {
        b.p[OFF][k] = off_probe[k];
        fp_model_set_probe(fp_arm_model(b.arm[k]), NULL);
        fp_hist_probe_free(b.hp[k]);
    }
    fp_prec_err_free(b.pe);
    for (int c = 0; c < NCFG; c++)
        for (int k = 0; k < NARM; k++) {
            fp_probe_free(b.p[c][k]);
            fp_cpu_timer_free(b.t[c][k]);
        }
    for (int k = 0; k < NARM; k++)
        fp_arm_free(b.arm[k]);
    free(b.batch.images);
    free(b.batch.labels);
    return 0;
}
