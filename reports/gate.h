/* gate.h — `fp16probe gate`: the checks a CI system acts on, comparing a candidate session with an
 * optional baseline session (arms matched by policy), their statistics, loading and outputs.
 * README's `## CI gate` is the user's description; this header is the contract.
 *
 * Comparability first (with a baseline): model, policy list, batch, image size, data, steps,
 * optimizer and its config, learning rate, device (and threads) and fp16probe version must match, and every
 * baseline run must have finished. A difference not accepted with --allow-config-diff KEY makes the
 * check `comparable` NOT_COMPARABLE and no baseline comparison runs (they would be meaningless).
 *
 * Checks on the candidate alone (per arm; "ref" is the session's reference arm, fp32 by default):
 *  - status        only a finished run passes (failed, interrupted / killed, still running fail);
 *  - speedup       low-precision arms: ref median step / arm median step >= min_speedup
 *                  (default 1.0 on a GPU; skipped on the CPU, where low precision is emulated);
 *  - loss_gap      final loss - ref final loss: PASS <= max_loss_gap; above it FAIL only when the gap
 *                  is significant against the standard error of the two last-N-steps means
 *                  (one-sided z, p < alpha), else INCONCLUSIVE;
 *  - acc_drop      ref val top-1 - arm val top-1 (points): PASS <= max_acc_drop; above it FAIL only
 *                  when a one-sided two-proportion z-test on the evaluated images gives p < alpha,
 *                  else INCONCLUSIVE (also when the image count is unknown);
 *  - skipped       skipped steps after calibration / steps after calibration <= max_skip_rate;
 *                  calibration (GradScaler's leading run of skips while the scale first falls, and a
 *                  run of skips starting right after a scale increase) is reported apart;
 *  - overflow      low-precision arms: activation/weight values overflowing the arm's format +
 *                  NaN/Inf among them + NaN events <= max_overflows;
 *  - lost_updates  low-precision arms: mean % of weights with a nonzero gradient left unchanged
 *                  over the sampled steps <= max_lost_updates (SKIP when never measured).
 * Against the baseline's arm of the same policy:
 *  - step_time             step time per image: FAIL when Mann–Whitney U p < alpha AND the median
 *                          is more than max_slowdown slower; too few steps: INCONCLUSIVE;
 *  - loss_vs_base          final loss rise, judged as loss_gap (limit max_loss_gap);
 *  - acc_vs_base           val top-1 drop, judged as acc_drop (limit max_acc_drop); both only
 *                          INCONCLUSIVE above the limit when the seeds differ (training variance);
 *  - memory_vs_base        peak memory growth <= max_mem_growth (SKIP when not measured);
 *  - skipped_vs_base       rise of the after-calibration skip rate (points): FAIL when above
 *                          max_skip_rise and significant (two-proportion, p < alpha);
 *  - lost_updates_vs_base  rise of the lost-update rate (points) <= max_lost_rise;
 *  - overflow_vs_base      low-precision arms: overflow count rise <= max_overflows, FAIL only when
 *                          significant against the values counted;
 *  - comm_share_vs_base    data parallel (either side trained on ranks; dist_report.h's figures): rise of the
 *                          exposed all-reduce share of the wall time (points) <= max_comm_rise, FAIL only when
 *                          the per-step shares differ significantly (Mann-Whitney p < alpha);
 *  - straggler_vs_base     rise of the straggler ratio (slowest rank's mean step / fastest's) <= max_straggler_rise,
 *                          FAIL only when the per-step ratios differ significantly. Both NOT_COMPARABLE when the
 *                          rank counts differ (one rank and N ranks included).
 * The ranks each side trained on are in its label ("...; 2 ranks"), the result (ranks_base, ranks_cand: JSON's
 * "ranks") and, whenever either side trained on ranks, the `comparable` check's figures ("ranks 2 vs 4
 * (baseline vs candidate)"), which say so when the data-parallel checks are not comparable.
 * Exit (fp_gate_exit_code): 4 not comparable, else 1 a check fails, else 2 a check is inconclusive
 * and inconclusive counts as a failure (--inconclusive fail), else 0; 3 is the command's error. */
#ifndef FP_REPORTS_GATE_H
#define FP_REPORTS_GATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "dist_report.h"
#include "summary.h"

enum { FP_GATE_PASS = 0, FP_GATE_REGRESSION = 1, FP_GATE_INCONCLUSIVE = 2, FP_GATE_ERROR = 3,
       FP_GATE_NOT_COMPARABLE = 4 };

/* ---- statistics (gate_stats.c) ---- */
typedef struct {
    size_t n1, n2;
    double u1;          /* U of the first sample: pairs (a, b) with a > b, ties counting 1/2 */
    double z;           /* normal approximation (tie-corrected, continuity-corrected); 0 when exact */
    double p;           /* two-sided p-value */
    int exact;          /* 1: exact distribution (no ties, n1, n2 <= FP_MWU_EXACT_MAX) */
} fp_mwu_t;
#define FP_MWU_EXACT_MAX 25
/* FP_EINVAL when a sample is empty or holds a NaN. */
int fp_mann_whitney(const double *a, size_t na, const double *b, size_t nb, fp_mwu_t *out);
/* P(Z > z) for a standard normal Z. */
double fp_normal_upper(double z);
/* The z with P(Z > z) = p (0 < p < 1). */
double fp_normal_quantile_upper(double p);
/* One-sided two-proportion z-test (pooled) of H0 p1 <= p2 against p1 > p2, for k1 of n1 and k2 of n2
 * successes: the p-value (1 when p1 <= p2; NaN when n1 or n2 < 1). */
double fp_two_prop_p(double k1, double n1, double k2, double n2);
/* Wilson score interval of k successes in n at level 1 - alpha (two-sided); NaN bounds when n < 1. */
void fp_wilson(double k, double n, double alpha, double *lo, double *hi);
/* Mean and its standard error (sample sd / sqrt(n)) of the finite values of x; se NaN when fewer
 * than 2; returns how many were finite. */
size_t fp_mean_se(const double *x, size_t n, double *mean, double *se);

/* ---- what the gate derives from an arm's step rows (gate_derive.c) ---- */
typedef struct {
    int64_t calib_skips;       /* leading skips while the scale first fell + skips right after increases */
    int64_t probe_skips;       /* of those, skips right after a scale increase */
    int64_t skips_after;       /* skips counted against the rate */
    int64_t steps_after;       /* step rows that are not calibration skips */
    double scale_first, scale_settled;   /* scale of step 1 and of the first unskipped step; NaN: none */
    double loss_se;            /* standard error of the final-loss window's mean; NaN when < 2 steps */
    size_t loss_n;             /* finite losses in that window */
} fp_gate_derived_t;
void fp_gate_derive(const fp_arm_t *a, fp_gate_derived_t *d);

/* ---- what the gate reads besides the summary (gate_load.c) ---- */
typedef struct {
    double lost_pct, lost_max;   /* mean and largest % of lost updates over the sampled steps (the summary's) */
    int lost_samples;            /* 0: never measured (lost_pct NaN) */
    int64_t eval_images;         /* images the last validation used; -1: unknown */
    char eval_from[160];         /* where that count comes from, for people */
    fp_run_env_t env;            /* versions, optimizer_config and the run's configuration JSON */
    fp_dist_arm_t dist;          /* data parallel (ranks 0: trained alone); its arrays freed with the side */
} fp_gate_extra_t;

typedef struct {
    fp_summary_t s;
    fp_gate_extra_t *x;          /* s.narms of them, parallel to s.arms; NULL: nothing beyond the summary */
    char label[256];             /* "FILE session N (model: arms)" */
} fp_gate_side_t;

/* Load session `session` (<= 0: the latest) of `path` with everything the gate reads. The label ends with the
 * ranks when the session trained on more than one ("FILE session N (model: arms; 2 ranks)"). */
int fp_gate_load(const char *path, int64_t session, int64_t warmup, fp_gate_side_t *side);
/* The ranks the side's arms trained on (the most of any arm): 1 for a session trained alone. */
int fp_gate_side_ranks(const fp_gate_side_t *side);
void fp_gate_side_free(fp_gate_side_t *side);
/* Images a validation used, from a run's configuration JSON: eval_batches x batch (capped at the
 * split's size when known), or the whole split (eval_batches 0) when its size is known; -1 unknown.
 * why (may be NULL) receives the derivation. */
int64_t fp_gate_eval_images_from_config(const char *config_json, char *why, size_t cap);

/* ---- configuration keys and differences (gate_config.c) ---- */
typedef enum {
    FP_GK_MODEL = 0, FP_GK_POLICY, FP_GK_BATCH, FP_GK_IMAGE_SIZE, FP_GK_DATA, FP_GK_STEPS, FP_GK_OPTIMIZER,
    FP_GK_LR, FP_GK_DEVICE, FP_GK_VERSION, FP_GK_COUNT,
    FP_GK_BASELINE_RUN = FP_GK_COUNT   /* a baseline run that did not finish: never allowed */
} fp_gate_key;
const char *fp_gate_key_name(int key);   /* "model", "policy", "batch", "image_size", ... */
/* The key called name ('-' and '_' alike; "policies" = "policy"), or -1. */
int fp_gate_key_parse(const char *name);
/* "model,policy,..." of every key, for messages. */
const char *fp_gate_key_list(void);

typedef struct {
    int key;                     /* fp_gate_key */
    int allowed;                 /* accepted with --allow-config-diff */
    char what[48];               /* "batch", "momentum", "baseline fp16 run" */
    char base[96], cand[96];
} fp_gate_diff_t;
/* The value of a top-level key of a JSON object, as text (strings unquoted, escapes kept; numbers,
 * booleans, null, objects and arrays as written); 0 when absent or the text is no object. */
int fp_json_lookup(const char *json, const char *key, char *out, size_t cap);

/* ---- checks (gate.c runs them: gate_checks.h; the result list, gate_result.c) ---- */
typedef enum {
    FP_CHECK_PASS = 0, FP_CHECK_FAIL, FP_CHECK_INCONCLUSIVE, FP_CHECK_SKIP, FP_CHECK_NOT_COMPARABLE
} fp_check_status;
#define FP_CHECK_NSTATUS 5
/* "PASS", "FAIL", "INCONCLUSIVE", "SKIP", "NOT_COMPARABLE" */
const char *fp_check_status_name(fp_check_status s);

typedef struct {
    char name[80];          /* "step_time[fp16]", "comparable" */
    char kind[32];          /* "step_time" */
    char arm[32];           /* "" for session-level checks */
    fp_check_status status;
    double value, limit;    /* what is judged and its limit, in `unit`; NaN when none */
    double other;           /* the counterpart's own figure (the reference's or the baseline's: ns per image,
                             * bytes, final loss, top-1 %, rate %, count); NaN when none */
    double p;               /* p-value of the check's test; NaN when none */
    char unit[16];          /* of value and limit: "percent", "points", "loss", "count", "x" */
    char figures[480];      /* what was measured, for people */
} fp_check_t;

typedef struct {
    double alpha, max_slowdown;
    size_t min_steps;
    int64_t warmup;         /* < 0: the default rule (summary.h) */
    double min_speedup;     /* NaN: 1.0 on a GPU, skipped on the CPU */
    double max_loss_gap, max_acc_drop, max_skip_rate, max_skip_rise;
    int64_t max_overflows;
    double max_lost_updates, max_lost_rise, max_mem_growth;   /* percent, points, fraction */
    double max_comm_rise;   /* points of the exposed all-reduce share */
    double max_straggler_rise;   /* of the slowest / fastest rank's mean step (x) */
    int inconclusive_fails; /* --inconclusive fail */
    unsigned allow;         /* bit (1 << fp_gate_key) per key accepted with --allow-config-diff */
} fp_gate_opts_t;
void fp_gate_defaults(fp_gate_opts_t *o);

typedef struct {
    fp_check_t *checks;
    size_t n;
    fp_gate_diff_t *diffs;
    size_t ndiffs;
    int inconclusive_fails;
    char baseline[256], candidate[256];   /* labels; baseline "" when none */
    int ranks_base, ranks_cand;  /* fp_gate_side_ranks of each side; ranks_base 0 without a baseline */
} fp_gate_result_t;

/* Run every check. base may be NULL (checks on the candidate alone). Errors only for memory. */
int fp_gate_run(const fp_gate_side_t *base, const fp_gate_side_t *cand, const fp_gate_opts_t *o,
                fp_gate_result_t *res);
int fp_gate_exit_code(const fp_gate_result_t *res);   /* 0, 1, 2 or 4 */
void fp_gate_result_free(fp_gate_result_t *res);
/* Fill diffs / ndiffs of res: what differs between the sessions' configurations. */
int fp_gate_compare_config(const fp_gate_side_t *base, const fp_gate_side_t *cand, unsigned allow,
                           fp_gate_result_t *res);

/* ---- outputs (gate_output.c): every verdict the same in all of them ---- */
/* "PASS", "REGRESSION", "INCONCLUSIVE", "NOT COMPARABLE" (the exit code's meaning). */
const char *fp_gate_verdict(const fp_gate_result_t *res);
void fp_gate_print_table(FILE *f, const fp_gate_result_t *res);
/* One testcase per check: FAIL -> <failure type="regression">, NOT_COMPARABLE -> <error
 * type="not-comparable">, INCONCLUSIVE -> <failure type="inconclusive"> under --inconclusive fail and
 * <skipped message="inconclusive, counted as a pass: ..."> under pass, SKIP -> <skipped>. */
void fp_gate_junit(FILE *f, const fp_gate_result_t *res);
void fp_gate_markdown(FILE *f, const fp_gate_result_t *res);   /* a heading, the verdict, a table */
void fp_gate_json(FILE *f, const fp_gate_result_t *res);       /* every check with its figures */
/* GitHub workflow commands: ::error for FAIL / NOT_COMPARABLE (and INCONCLUSIVE under fail),
 * ::warning for INCONCLUSIVE under pass. */
void fp_gate_github(FILE *f, const fp_gate_result_t *res);
/* The warning line for inconclusive checks counted as passes ("" when none): "N checks inconclusive,
 * counted as passes (--inconclusive pass): a, b". */
void fp_gate_inconclusive_note(char *buf, size_t cap, const fp_gate_result_t *res);
/* XML text/attribute escaping (& < > " ', control characters dropped, invalid UTF-8 -> U+FFFD). */
void fp_xml_text(FILE *f, const char *s);

#endif
