/* gate.h — `fp16probe gate`: the checks a CI system acts on, comparing a candidate session with an
 * optional baseline session (matching arms: same model and policy), their statistics and outputs.
 *
 * Checks (each with an option and a default; fp_gate_defaults):
 *  - step_time[ARM]  (with a baseline): Mann–Whitney U on per-step times after warm-up; FAIL only when
 *    p < alpha (0.01) AND median(candidate)/median(baseline) - 1 > max_slowdown (5%); INCONCLUSIVE
 *    when either side has fewer than min_steps (20) step times after warm-up;
 *  - speedup[ARM]    low-precision arms over the reference arm: median ratio >= min_speedup
 *    (default 1.0 on a GPU; skipped on the CPU, where low precision is emulated, unless given);
 *  - loss_gap[ARM]   final loss - reference final loss <= max_loss_gap (0.10);
 *  - acc_drop[ARM]   reference val top-1 - arm val top-1 <= max_acc_drop points (1.0);
 *  - skipped[ARM]    skipped steps / steps <= max_skip_rate (0.05);
 *  - overflow[ARM]   low-precision arms: activation and weight values that overflow the arm's format,
 *                    NaN/Inf among them, plus NaN events <= max_overflows (0);
 *  - status[ARM]     the run did not fail.
 * Exit: 0 every check passes (or is skipped), 1 a check fails, 2 none fails but one is inconclusive,
 * 3 error (missing arm, models differ, unreadable database). */
#ifndef FP_REPORTS_GATE_H
#define FP_REPORTS_GATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "summary.h"

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

/* ---- checks (gate.c) ---- */
typedef enum { FP_CHECK_PASS = 0, FP_CHECK_FAIL, FP_CHECK_INCONCLUSIVE, FP_CHECK_SKIP } fp_check_status;
const char *fp_check_status_name(fp_check_status s);   /* "PASS", "FAIL", "INCONCLUSIVE", "SKIP" */

typedef struct {
    char name[80];          /* "step_time[fp16]" */
    char arm[32];
    fp_check_status status;
    double value, limit;    /* NaN when none */
    char figures[320];      /* what was measured, for people */
} fp_check_t;

typedef struct {
    double alpha, max_slowdown;
    size_t min_steps;
    int64_t warmup;         /* < 0: the default rule (summary.h) */
    double min_speedup;     /* NaN: 1.0 on a GPU, skipped on the CPU */
    double max_loss_gap, max_acc_drop, max_skip_rate;
    int64_t max_overflows;
} fp_gate_opts_t;
void fp_gate_defaults(fp_gate_opts_t *o);

typedef struct {
    fp_check_t *checks;
    size_t n;
    char baseline[256], candidate[256];   /* "FILE session N" */
} fp_gate_result_t;

/* Run every check. base may be NULL (threshold checks on the candidate alone). FP_EINVAL with a
 * message when the sessions cannot be compared (models differ, an arm is missing on either side). */
int fp_gate_run(const fp_summary_t *base, const fp_summary_t *cand, const fp_gate_opts_t *o, fp_gate_result_t *res);
int fp_gate_exit_code(const fp_gate_result_t *res);   /* 0, 1 or 2 */
void fp_gate_result_free(fp_gate_result_t *res);

/* ---- outputs (gate_output.c) ---- */
void fp_gate_print_table(FILE *f, const fp_gate_result_t *res);
void fp_gate_junit(FILE *f, const fp_gate_result_t *res);      /* one testcase per check */
void fp_gate_markdown(FILE *f, const fp_gate_result_t *res);   /* a heading, the verdict, a table */
/* XML text/attribute escaping (& < > " ', control characters dropped, invalid UTF-8 -> U+FFFD). */
void fp_xml_text(FILE *f, const char *s);

#endif
