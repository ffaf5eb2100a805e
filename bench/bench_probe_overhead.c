/* bench_probe_overhead.c — step time with the probes off vs on for the default comparison's two arms,
 * ResNet-50 at 64x64, batch 16, CPU: an fp32 arm (the reference) and an fp16 arm trained side by
 * side as trainer/run/compare.c does; the configurations interleaved step by step (the six orders in
 * turn) to cancel the load of a shared machine. Each arm is a trainer/run/arm.h arm (SGD, momentum 0.9, weight
 * decay 5e-4, the default lr), stepped as compare.c steps it. "on" = per-layer CPU timers every step;
 * histograms of every layer's tensors of both arms (all roles, updates included; the weight roles in
 * the parameter pass riding on the optimizer step, fp_arm_set_update_hook) every 10 steps; the fp16
 * arm's per-layer rounding error every 10 steps riding on the fp32 arm's step (trainer/analysis/analysis.h: the
 * fp32 forward's outputs of FP_PREC_ERR_DEFAULT_SUBBATCH images captured, the fp16 forward on them
 * after the fp32 forward). A cycle is EVERY step slots, the sampling step in slot 0. Headline: the
 * time of one period of EVERY steps with everything on over EVERY steps probes off, per arm and for
 * the pair, from the sampled step's paired difference (on minus off in the same slot; median over
 * the cycles and EXTRA_SAMPLED more sampled steps) and the probes' own calls at the other steps (timed alone: side by side they are below the
 * noise of a shared 2-core VM); beside it the same with the unsampled steps measured side by side,
 * and the median of the per-cycle ratios of summed step times, both noisy there. Also the timers'
 * own cost, the sampling step's parts (histograms, ride) and the overhead at probe.h's default
 * periods. Prints figures, never fails on time. Two threads, as `--threads 2`: the kernels' pool,
 * GEMMs included (trainer/cpu/gemm.h); BENCH_ROUNDS=N cycles (default DEFAULT_ROUNDS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/common.h"
#include "clock.h"
#include "error.h"
#include "trainer/analysis/analysis.h"
#include "probe/probe.h"
#include "trainer/run/arm.h"
#include "trainer/cpu/gemm.h"
#include "trainer/model.h"
#include "trainer/precision.h"
#include "trainer/run/environment.h"

#define BATCH 16
#define SIZE 64
#define MAX_ROUNDS 64
#define DEFAULT_ROUNDS 9
#define EXTRA_SAMPLED 15   /* sampled steps measured after the cycles, each paired with a step off */
#define WARMUP 2
#define EVERY 10

enum { OFF, TIMERS, FULL, NCFG };
/* The order of the configurations in a slot, all six in turn: each configuration follows each other
 * one equally often (a fixed rotation always put FULL's step just before OFF's, and the step after a
 * probed one ran ~1-2% slower on the 2-core VM: measured with OFF's twin in TIMERS' place). */
static const int ORDERS[6][NCFG] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
enum { REF, LOW, NARM };   /* the fp32 arm, the fp16 arm */

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
    double r0 = fp_clock_mono_s();
    int rc = fp_prec_err_ride(b->pe, fp_arm_model(a), batch->images, batch->n);
    b->ride_s = fp_clock_mono_s() - r0;
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

/* One step of both arms in configuration cfg at `step`; each arm's time into t[]. */
static int pair_step_at(bench_t *b, int cfg, int64_t step, double t[NARM])
{
    for (int k = 0; k < NARM; k++) {
        double t0 = fp_clock_mono_s();
        int rc = arm_step(b, cfg, k, step);
        t[k] = fp_clock_mono_s() - t0;
        if (rc)
            return rc;
    }
    return FP_OK;
}

/* The next step of configuration cfg. */
static int pair_step(bench_t *b, int cfg, double t[NARM])
{
    return pair_step_at(b, cfg, b->step[cfg]++, t);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* The probe set p's own calls at a step that samples nothing, as m's training step makes them (step
 * begin and end; each layer's forward and its backward phases: weights and data for conv / linear,
 * data for the others), timed alone: the median of HOOK_REPS, in seconds. */
#define HOOK_REPS 201
static double hook_cost(fp_probe *p, const fp_model *m)
{
    static double v[HOOK_REPS];
    int L = fp_model_layer_count(m);
    for (int r = 0; r < HOOK_REPS; r++) {
        double t0 = fp_clock_mono_s();
        fp_probe_step_begin(p, 1, 1.0f);   /* step 1: nothing samples at it */
        for (int l = 0; l < L; l++) {
            fp_probe_layer_begin(p, l, FP_PHASE_FORWARD);
            fp_probe_layer_end(p, l, FP_PHASE_FORWARD);
        }
        for (int l = L - 1; l >= 0; l--) {
            fp_layer_type ty = fp_model_layer(m, l)->type;
            if (ty == FP_LAYER_CONV || ty == FP_LAYER_LINEAR) {
                fp_probe_layer_begin(p, l, FP_PHASE_BACKWARD_WEIGHTS);
                fp_probe_layer_end(p, l, FP_PHASE_BACKWARD_WEIGHTS);
            }
            fp_probe_layer_begin(p, l, FP_PHASE_BACKWARD_DATA);
            fp_probe_layer_end(p, l, FP_PHASE_BACKWARD_DATA);
        }
        fp_probe_step_end(p);
        v[r] = fp_clock_mono_s() - t0;
    }
    return median(v, HOOK_REPS);
}

int main(void)
{
    fp_env_blas_core_restart(NULL);   /* OpenBLAS's kernels for this CPU, as fp16probe gets them */
    bench_t b;
    memset(&b, 0, sizeof b);
    fp_gemm_use_pool(2);   /* as the CLI's --threads 2 (trainer/run/train.h fp_env_set_threads) */
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
    int rounds = re ? atoi(re) : DEFAULT_ROUNDS;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = DEFAULT_ROUNDS;
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
    static double timers_r[MAX_ROUNDS * EVERY];
    double cyc[NARM + 1][MAX_ROUNDS], offs[MAX_ROUNDS];
    double hist_x[MAX_ROUNDS + EXTRA_SAMPLED], ride_x[MAX_ROUNDS + EXTRA_SAMPLED];
    int nslot = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < EVERY; i++) {
            for (int k = 0; k < NCFG; k++) {
                int c = ORDERS[(r * EVERY + i) % 6][k];
                if (pair_step(&b, c, tt)) {
                    fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
                    return 1;
                }
                for (int a = 0; a < NARM; a++)
                    t[c][a][r][i] = tt[a];
                if (c == FULL && i == 0)
                    ride_x[r] = b.ride_s;
            }
            if (i > 0)   /* not a sampling slot: the per-step cost of the timers alone */
                timers_r[nslot++] =
                    (t[TIMERS][REF][r][i] + t[TIMERS][LOW][r][i]) / (t[OFF][REF][r][i] + t[OFF][LOW][r][i]);
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
    /* More sampled steps for the sampled step's extra, EXTRA_SAMPLED pairs of (FULL at a sampling step,
     * OFF) in alternating order, each after a TIMERS step (so that a sampled step never follows
     * another, as in a run) */
    static double xt[EXTRA_SAMPLED][2][NARM];   /* [pair][0: FULL sampled, 1: OFF][arm] */
    for (int e = 0; e < EXTRA_SAMPLED; e++) {
        if (pair_step(&b, TIMERS, tt)) {
            fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
            return 1;
        }
        for (int j = 0; j < 2; j++) {
            int full = (j + e) % 2 == 0, rc;
            if (full) {
                int64_t st = (b.step[FULL] + EVERY - 1) / EVERY * EVERY;   /* the next sampling step */
                b.step[FULL] = st + 1;
                rc = pair_step_at(&b, FULL, st, xt[e][0]);
                hist_x[rounds + e] = xt[e][0][REF] + xt[e][0][LOW] - b.ride_s;   /* less the OFF pair below */
                ride_x[rounds + e] = b.ride_s;
            } else {
                rc = pair_step(&b, OFF, xt[e][1]);
            }
            if (rc) {
                fprintf(stderr, "bench_probe_overhead: %s\n", fp_error_message());
                return 1;
            }
        }
        hist_x[rounds + e] -= xt[e][1][REF] + xt[e][1][LOW];
    }
    int nsamp = rounds + EXTRA_SAMPLED;
    /* The headline, per arm and for the pair: one period of EVERY steps with everything on over the
     * same EVERY steps probes off = (the sampled step's extra + (EVERY - 1) x an unsampled step's
     * extra) / (EVERY x a step off). The sampled step's extra is its paired difference (the step on
     * minus the step off of the same slot, seconds apart), median over the cycles' and the
     * EXTRA_SAMPLED more: 105-130 ms on the 2-core VM. An unsampled step's extra is the probes' own hook calls (hook_cost:
     * the same calls timed alone, ~0.1 ms): side by side it is below the noise of this machine (the
     * same step ranges over +-10% on the 2-core VM, and (EVERY - 1) x the median of 81 paired
     * differences moved the estimate by +-1.5% from run to run, either sign). A sampled step does not
     * slow the step after it (measured: a probes-off step after a sampled one as fast as after another
     * off step, within 0.3%), so nothing else is left out. Beside it, measured wholly side by side:
     * the same with the unsampled steps' paired differences, and the median of the per-cycle ratios
     * of summed step times. */
    double est[NARM + 1], pd[NARM + 1], d0m[NARM + 1], dum[NARM + 1], offm[NARM + 1], hook[NARM + 1];
    hook[NARM] = 0;
    for (int a = 0; a < NARM; a++)
        hook[NARM] += hook[a] = hook_cost(b.p[FULL][a], fp_arm_model(b.arm[a]));
    for (int a = 0; a <= NARM; a++) {
        static double d0[MAX_ROUNDS + EXTRA_SAMPLED], du[MAX_ROUNDS * EVERY], vo[MAX_ROUNDS * EVERY];
        int nu = 0, no = 0;
        for (int e = 0; e < EXTRA_SAMPLED; e++)
            d0[rounds + e] = a < NARM ? xt[e][0][a] - xt[e][1][a]
                                      : xt[e][0][REF] + xt[e][0][LOW] - xt[e][1][REF] - xt[e][1][LOW];
        for (int r = 0; r < rounds; r++)
            for (int i = 0; i < EVERY; i++) {
                double full = a < NARM ? t[FULL][a][r][i] : t[FULL][REF][r][i] + t[FULL][LOW][r][i];
                double off1 = a < NARM ? t[OFF][a][r][i] : t[OFF][REF][r][i] + t[OFF][LOW][r][i];
                vo[no++] = off1;
                if (i == 0)
                    d0[r] = full - off1;
                else
                    du[nu++] = full - off1;
            }
        d0m[a] = median(d0, nsamp);
        dum[a] = median(du, nu);
        offm[a] = median(vo, no);
        est[a] = 1.0 + (d0m[a] + (EVERY - 1) * hook[a]) / (EVERY * offm[a]);
        pd[a] = 1.0 + (d0m[a] + (EVERY - 1) * dum[a]) / (EVERY * offm[a]);
    }
    double lo = 1e9, hi = 0;
    for (int r = 0; r < rounds; r++) {
        lo = cyc[NARM][r] < lo ? cyc[NARM][r] : lo;
        hi = cyc[NARM][r] > hi ? cyc[NARM][r] : hi;
    }
    double cycles = median(cyc[NARM], rounds);
    double hx = median(hist_x, nsamp), px = median(ride_x, nsamp);
    double r_tim = median(timers_r, nslot);   /* the timers' cost per pair step */
    /* at the default periods of probe.h: the unsampled steps' extra on every step, the histogram
     * extra once per hist period, the ride once per precision period */
    double r_def = 1.0 + (hook[NARM] + hx / FP_PROBE_DEFAULT_HIST_EVERY + px / FP_PROBE_DEFAULT_PRECISION_EVERY) /
                             offm[NARM];
    printf("bench: resnet50_64px_b16_pair_step_probes_off=%.1f unit=ms (one fp32 step + one fp16 step, median of %d)\n",
           1e3 * offm[NARM], rounds * EVERY);
    printf("bench: sampled_step_extra=%.1f unit=ms (both arms, median of %d paired differences: histograms of all "
           "roles of every layer, updates included, and the ride)\n", 1e3 * d0m[NARM], nsamp);
    printf("bench: sampled_step_extra_hist=%.1f unit=ms (of which histograms and updates, median)\n", 1e3 * hx);
    printf("bench: sampled_step_extra_precision=%.1f unit=ms (of which the ride: fp16 forward on %d of %d images, "
           "median)\n", 1e3 * px, fp_prec_err_subbatch(b.pe, BATCH), BATCH);
    printf("bench: unsampled_step_hooks=%.3f unit=ms (both arms: the probes' calls at a step that samples nothing, "
           "timed alone)\n", 1e3 * hook[NARM]);
    printf("bench: unsampled_step_extra_paired=%.2f unit=ms (both arms, median of %d paired differences: noise)\n",
           1e3 * dum[NARM], nslot);
    printf("bench: probe_overhead_timers=%.2f unit=%% ratio=%.4f (per-layer timers alone; median of %d paired pair "
           "steps)\n", 100 * (r_tim - 1), r_tim, nslot);
    printf("bench: probe_overhead_defaults=%.2f unit=%% ratio=%.4f (hist every %d, precision every %d, timers every "
           "step)\n", 100 * (r_def - 1), r_def, FP_PROBE_DEFAULT_HIST_EVERY, FP_PROBE_DEFAULT_PRECISION_EVERY);
    printf("bench: probe_overhead_paired=%.2f unit=%% ratio=%.4f (the unsampled steps' extra as paired differences "
           "too)\n", 100 * (pd[NARM] - 1), pd[NARM]);
    printf("bench: probe_overhead_cycles=%.2f unit=%% ratio=%.4f spread=%.4f..%.4f (median of the %d per-cycle ratios "
           "of summed step times)\n", 100 * (cycles - 1), cycles, lo, hi, rounds);
    printf("bench: probe_overhead_fp32_arm=%.2f unit=%% ratio=%.4f (its histograms and the ride)\n",
           100 * (est[REF] - 1), est[REF]);
    printf("bench: probe_overhead_fp16_arm=%.2f unit=%% ratio=%.4f (its histograms)\n", 100 * (est[LOW] - 1),
           est[LOW]);
    printf("bench: probe_overhead=%.2f unit=%% ratio=%.4f cycles=%d (both arms; hist + precision every %d, timers "
           "every step: (sampled step's extra + %d x unsampled step's hooks) / %d pair steps probes off)\n",
           100 * (est[NARM] - 1), est[NARM], rounds, EVERY, EVERY - 1, EVERY);

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
