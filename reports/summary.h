/* summary.h — the comparison of one session's arms, as the end-of-run summary states it (issue 5):
 * speedup (ratio of median step times after warm-up), throughput, peak memory and its ratio, energy
 * per step and its ratio, host CPU per step and its share of the step (issue 22), final loss, validation
 * top-1 and its gap, skipped steps, final loss scale, and the layers with the most overflow and underflow.
 * The HTML/CSV reports and the gate all read it from here, so they never disagree.
 *
 * Definitions (documented in README's `## CI gate`):
 *  - warm-up: the first W step rows of each arm are left out of every timing figure; by default
 *    W = 10% of the arm's steps, at least 5 and at most 100 (--warmup N overrides);
 *  - step times: wall_ns of the steps after warm-up that were not skipped and have a time (warm-up, step
 *    times, their median and the speedup are lib/step_time.h's, the dashboard's definition too);
 *  - final loss: mean finite loss of the last max(1, min(50, steps/20)) unskipped steps;
 *  - the reference arm: the run the others name as ref_run, else the fp32 arm, else the first. */
#ifndef FP_REPORTS_SUMMARY_H
#define FP_REPORTS_SUMMARY_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "store_reader.h"

#define FP_SUMMARY_TOP 5
#define FP_SUMMARY_ROLES 5       /* FP_ROLE_COUNT (lib/store.h): activation, activation_grad, weight, weight_grad, update */

typedef struct {
    int layer;
    char name[64];
    int64_t count;
} fp_top_layer_t;

typedef struct {
    fp_run_row_t run;
    int is_ref;
    int fmt;                     /* fp_format the policy computes in; -1 for fp32 / tf32 */
    int fmt_shown;               /* the format the numerics refer to (fp16 for fp32 arms: "would be") */
    fp_step_row_t *steps;        /* every step row, ascending */
    size_t nsteps;
    size_t warmup;               /* step rows left out of timing */
    double *times;               /* step times after warm-up (ns), in step order */
    size_t ntimes;
    double median_ns, speedup;   /* speedup: reference median / this median */
    double samples_per_s;        /* median after warm-up (or batch / median time) */
    double mem_peak, mem_ratio;  /* bytes (NaN: not measured); ratio to the reference */
    double energy_per_step, energy_ratio;   /* J, mean after warm-up; NaN: not measured */
    /* host CPU (issue 22): the training thread's CPU time over each step, over the timed steps (those of
     * `times`) that recorded one (FP_SUMMARY_HOST_CPU_MEANING says what it holds) */
    double host_cpu_ns;          /* median; NaN: not measured */
    double host_cpu_share;       /* median of host CPU / the step's wall time (wall_ns); NaN: not measured */
    size_t nhost_cpu;            /* timed steps with a host CPU time */
    double final_loss, loss_gap; /* gap: this - reference */
    double val_top1, val_top5, val_loss, top1_gap;   /* top-1 as stored (0..1); gap in points (x100) */
    int64_t val_step;            /* -1: no validation */
    int val_nonfinite;           /* 1: the last validation's loss is NaN or infinite (stored NULL or inf): its
                                    top-1 / top-5 count those predictions as wrong, the figures are no measure */
    int64_t skipped;
    double skip_rate;            /* skipped / steps */
    double final_loss_scale;     /* NaN: none */
    int64_t fwd_overflow;        /* activation + weight values overflowing the arm's format */
    int64_t fwd_nonfinite;       /* NaN / Inf counted in activation + weight histograms */
    int64_t nan_events;
    /* The headline: the layers with the most overflow / underflow over the roles where the loss matters
     * (fp_summary_role_matters): activation gradients and weight gradients (and for overflow activations,
     * whose overflow is an Inf downstream); weights and
     * updates only for arms without fp32 master weights (half). Counts are sums over hist_steps sampled
     * steps. Underflow of a low-precision arm (fmt >= 0) counts what its format lost: the values recorded
     * in its underflow range plus `flushed`, the zeros it has beyond the reference arm's in the same
     * layer and role over the same sampled steps (the values narrowed to zero before the histogram saw
     * them; scaled by the ratio of sample counts when the arms sampled differently). */
    fp_top_layer_t top_over[FP_SUMMARY_TOP], top_under[FP_SUMMARY_TOP];
    int ntop_over, ntop_under;
    int master_fp32;             /* 1: updates land on fp32 master weights (every policy but half) */
    int64_t hist_steps;          /* distinct sampled steps with histograms (the most samples of any layer/role) */
    int64_t over_role[FP_SUMMARY_ROLES], under_role[FP_SUMMARY_ROLES];   /* all layers, incl. flushed */
    int64_t flushed_role[FP_SUMMARY_ROLES];   /* of under_role: zeros beyond the reference arm's */
    fp_top_layer_t top_over_role[FP_SUMMARY_ROLES][FP_SUMMARY_TOP], top_under_role[FP_SUMMARY_ROLES][FP_SUMMARY_TOP];
    int ntop_over_role[FP_SUMMARY_ROLES], ntop_under_role[FP_SUMMARY_ROLES];
    /* lost updates: "lost updates at step N: X% ..." events of the parameter pass */
    double lost_pct, lost_max;   /* mean and largest % over the sampled steps; NaN: never measured */
    int lost_samples;
    int has_scaler;              /* 1: a loss scaler ran (some step stored a loss scale other than NULL / 1) */
    int64_t val_images;          /* images of the last validation as the store records them; -1 unknown */
    double val_top1_lo, val_top1_hi;   /* 95% Wilson interval of val_top1 (NaN without val_images) */
    int top1_gap_within;         /* 1: |top-1 gap| is smaller than its uncertainty (the intervals overlap) */
    int emulated;                /* 1: the arm ran on the CPU, where low precision is emulated */
    char energy_why[192];        /* why energy is n/a ("" when measured): a recorded "energy unavailable: ..."
                                    event, else for a CPU arm on this host what the host shows now (no readable
                                    RAPL zone, perf_event_paranoid=N), else "not recorded" */
    fp_layer_row_t *layers;
    size_t nlayers;
    fp_layer_numerics_t *numerics;
    size_t nnumerics;
    fp_eval_row_t *evals;
    size_t nevals;
} fp_arm_t;

typedef struct {
    fp_session_row_t session;
    char model[64];
    fp_arm_t *arms;
    size_t narms, ref;
} fp_summary_t;

/* The warm-up for an arm of nsteps step rows (requested < 0: the default rule). */
size_t fp_summary_warmup(size_t nsteps, int64_t requested);
/* The format a policy computes in ("fp16", "fp16-noscale", "half" -> fp16; "bf16" -> bf16; "fp8-e4m3",
 * "e4m3" -> e4m3; "e5m2" -> e5m2); -1 otherwise. */
int fp_policy_format(const char *policy);

/* Load session `session` (<= 0: the latest) of an open reader. Errors (FP_EINVAL, one line naming
 * the file): no such session / no sessions, a session without runs, runs of different models, a
 * session whose arms have no steps at all. */
int fp_summary_load(fp_reader_t *r, int64_t session, int64_t warmup, fp_summary_t *s);
void fp_summary_free(fp_summary_t *s);
/* The arm whose policy is `policy` (first match), or NULL. */
const fp_arm_t *fp_summary_arm(const fp_summary_t *s, const char *policy);
/* The layers table row of `layer` in an arm, or NULL. */
const fp_layer_row_t *fp_arm_layer(const fp_arm_t *a, int layer);
/* One more than the highest layer index of any arm (0 when no arm has layers). */
int fp_summary_layer_count(const fp_summary_t *s);
/* A run's kernels over all its steps (fp_reader_kernel_summary) and their tensor-core flags
 * (fp_reader_kernel_flags), as both reports list them. */
typedef struct {
    fp_kernel_sum_t *k;
    size_t n;
    fp_kernel_flag_t *fl;
    size_t nf;
} fp_run_kernels_t;
/* Reads run's kernels into rk; fp_run_kernels_free frees them, also after an error. */
int fp_summary_run_kernels(fp_reader_t *r, int64_t run, fp_run_kernels_t *rk);
void fp_run_kernels_free(fp_run_kernels_t *rk);
/* The tensor-core flag of kernel j (the last flag row of its name): 1, 0, or -1 when unknown. */
int fp_run_kernels_tc(const fp_run_kernels_t *rk, size_t j);
/* The arm's validation top-1 as the summary shows it: "non-finite" when the evaluation was (val_nonfinite),
 * else fp_fmt_pct's text ("n/a" without one). buf holds FP_UNIT_BUF (reports/units.h) bytes; returns buf. */
char *fp_summary_fmt_val_top1(char *buf, const fp_arm_t *a);
/* One line for an arm whose last validation was non-finite (without '\n': "fp16: validation at step 80 is
 * non-finite (loss nan): top-1 0.00% counts NaN predictions as wrong"); returns 1 and writes it, else 0
 * and writes "". */
int fp_summary_val_note(const fp_arm_t *a, char *buf, size_t n);
/* Whether role `role`'s overflow (overflow 1) / underflow (0) makes the headline of an arm (see fp_arm_t;
 * activations count for overflow only). */
int fp_summary_role_matters(const fp_arm_t *a, int role, int overflow);
/* The loss scale as the reports show it: "-" for an arm without a loss scaler, else %g. FP_UNIT_BUF bytes. */
char *fp_summary_fmt_loss_scale(char *buf, const fp_arm_t *a);
/* The note every speedup carries on the CPU ("emulated on the CPU: speed not representative"), or "". */
const char *fp_summary_speed_note(const fp_arm_t *a);
/* What the host CPU figures are, for every summary that shows them (docs/schema.md's steps.host_cpu_ns). */
#define FP_SUMMARY_HOST_CPU_MEANING                                                                             \
    "host CPU / step: the training thread's CPU time over the step (CLOCK_THREAD_CPUTIME_ID), median over the " \
    "timed steps; share: median of host CPU / step wall time. On the CPU backend it includes the compute the "  \
    "training thread does itself (the thread pool's workers are other threads, not counted); on a GPU arm it " \
    "is the host's own work per step, plus the step-end wait for the device where CUDA spins in it (its "      \
    "default with one context per process)"
/* An arm's host CPU per step as the summaries show it: "12.3 ms (45.1% of the step)", or "n/a (not
 * recorded)". FP_UNIT_BUF bytes; returns buf. */
char *fp_summary_fmt_host_cpu(char *buf, const fp_arm_t *a);
/* What an arm's host CPU time holds on its device, in a few words: "CPU backend: includes the training
 * thread's own compute" or "GPU: the host's work, the step-end wait included where CUDA spins". */
const char *fp_summary_host_cpu_note(const fp_arm_t *a);
/* What "loss" means in the summaries and `ls`. */
#define FP_SUMMARY_LOSS_MEANING "final train loss: mean of the last max(1, min(50, steps/20)) unskipped steps"
/* The precision part of the end-of-run summary (compare / train), after the table: per arm the headline
 * layers with the most overflow and underflow (roles that matter, over N sampled steps), the counts per
 * role with the flushed zeros, lost updates, and the notes (emulation, accuracy uncertainty). */
void fp_summary_print_precision(FILE *f, const fp_summary_t *s);

/* Median of n values (copied and sorted; NaN when n == 0). */
double fp_median(const double *x, size_t n);

#endif
