/* gate_checks.h — what the gate's checks share, internal to reports/gate*.c: the result list (gate_result.c),
 * the figures derived from an arm (gate_derive.c), the candidate's checks (gate_checks_cand.c) and the
 * baseline's (gate_checks_base.c); gate.c runs them. A check appends one fp_check_t, or sets c->rc. */
#ifndef FP_REPORTS_GATE_CHECKS_H
#define FP_REPORTS_GATE_CHECKS_H

#include <stddef.h>
#include <stdint.h>
#include "gate.h"

/* ---------------------------------------------------------------- the result list (gate_result.c) */
typedef struct {
    fp_gate_result_t *res;
    size_t cap;
    int rc;
    const fp_gate_opts_t *o;
} fp_gc_acc_t;

/* Appends a check "kind[arm]" (arm "" or NULL: "kind") with its figures; NULL once c->rc is set (out of
 * memory sets it). other and p start NaN. */
fp_check_t *fp_gc_add(fp_gc_acc_t *c, const char *kind, const char *arm, fp_check_status st, double value,
                      double limit, const char *unit, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
/* Sets the counterpart's figure and the p-value of k (NULL: nothing). */
void fp_gc_stats(fp_check_t *k, double other, double p);
/* Above the limit: FAIL when the test is significant, INCONCLUSIVE when it is not (or cannot run). */
fp_check_status fp_gc_judge(double diff, double limit, double p, double alpha);
/* ": significant", ": above the limit but within noise" or "", for a judged status. */
const char *fp_gc_verdict_words(fp_check_status st);
/* The arm's name in check names: its arm name, else its policy. */
const char *fp_gc_label(const fp_arm_t *a);

/* ---------------------------------------------------------------- derived per arm (gate_derive.c) */
/* Activation / weight values overflowing the arm's format + NaN/Inf among them + NaN events. */
int64_t fp_gc_overflow_count(const fp_arm_t *a);
/* Activation and weight values histogrammed (what overflow counts are out of). */
double fp_gc_overflow_values(const fp_arm_t *a);

/* ---------------------------------------------------------------- the candidate's arms (gate_checks_cand.c) */
void fp_gc_status(fp_gc_acc_t *c, const fp_arm_t *a);
/* Final loss (loss) and validation top-1 (acc) of a against r: the reference arm, or the baseline's arm
 * (vs_base, where differing seeds make a difference above the limit INCONCLUSIVE). */
void fp_gc_loss(fp_gc_acc_t *c, const char *kind, const fp_arm_t *a, const fp_arm_t *r, const char *rname,
                int vs_base);
void fp_gc_acc(fp_gc_acc_t *c, const char *kind, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_arm_t *r,
               const fp_gate_extra_t *xr, const char *rname, int vs_base);
void fp_gc_skipped(fp_gc_acc_t *c, const fp_arm_t *a);
void fp_gc_overflow(fp_gc_acc_t *c, const fp_arm_t *a);
void fp_gc_lost(fp_gc_acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xr,
                const char *rname);
void fp_gc_speedup(fp_gc_acc_t *c, const fp_arm_t *a, const fp_arm_t *R);

/* ---------------------------------------------------------------- against the baseline (gate_checks_base.c) */
/* `comparable`: the configuration differences of c->res (fp_gate_compare_config) and the sides' ranks. */
void fp_gc_comparable(fp_gc_acc_t *c);
void fp_gc_step_time(fp_gc_acc_t *c, const fp_arm_t *b, const fp_arm_t *a);
/* shape_diff: an allowed difference that changes memory by itself (the check is skipped), or NULL. */
void fp_gc_memory(fp_gc_acc_t *c, const fp_arm_t *b, const fp_arm_t *a, const char *shape_diff);
void fp_gc_skipped_vs_base(fp_gc_acc_t *c, const fp_arm_t *b, const fp_arm_t *a);
void fp_gc_lost_vs_base(fp_gc_acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xb);
void fp_gc_overflow_vs_base(fp_gc_acc_t *c, const fp_arm_t *b, const fp_arm_t *a);
/* Data parallel: comm 1 the exposed all-reduce share, 0 the straggler ratio; no check when neither side
 * trained on ranks. */
void fp_gc_dist_vs_base(fp_gc_acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xb,
                        int comm);

#endif
