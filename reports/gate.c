/* gate.c — the gate's run (gate.h): its default limits, and every check in order (gate_checks.h): with a
 * baseline `comparable` first, the baseline checks only when comparable, then each candidate arm's own.
 * Promise: an incomparable baseline gives NOT_COMPARABLE, never a PASS or FAIL of a meaningless comparison. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "error.h"
#include "gate_checks.h"

void fp_gate_defaults(fp_gate_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->alpha = 0.01;
    o->max_slowdown = 0.05;
    o->min_steps = 20;
    o->warmup = -1;
    o->min_speedup = NAN;
    o->max_loss_gap = 0.10;
    o->max_acc_drop = 1.0;
    o->max_skip_rate = 0.05;
    o->max_skip_rise = 0.01;
    o->max_overflows = 0;
    o->max_lost_updates = 1.0;
    o->max_lost_rise = 1.0;
    o->max_mem_growth = 0.05;
    o->max_comm_rise = 5.0;
    o->max_straggler_rise = 0.10;
    o->inconclusive_fails = 0;
    o->allow = 0;
}

int fp_gate_run(const fp_gate_side_t *base, const fp_gate_side_t *cand, const fp_gate_opts_t *o, fp_gate_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->inconclusive_fails = o->inconclusive_fails;
    snprintf(res->candidate, sizeof res->candidate, "%s", cand->label);
    res->ranks_cand = fp_gate_side_ranks(cand);
    if (base) {
        snprintf(res->baseline, sizeof res->baseline, "%s", base->label);
        res->ranks_base = fp_gate_side_ranks(base);
    }
    fp_gc_acc_t c = {res, 0, FP_OK, o};
    int comparable = 1;
    const char *shape_diff = NULL;   /* an allowed difference that changes memory by itself */
    if (base) {
        c.rc = fp_gate_compare_config(base, cand, o->allow, res);
        for (size_t i = 0; i < res->ndiffs; i++) {
            const fp_gate_diff_t *d = &res->diffs[i];
            comparable &= d->allowed;
            if (!shape_diff && (d->key == FP_GK_MODEL || d->key == FP_GK_BATCH || d->key == FP_GK_IMAGE_SIZE))
                shape_diff = fp_gate_key_name(d->key);
        }
        fp_gc_comparable(&c);
    }
    const fp_summary_t *s = &cand->s;
    const fp_arm_t *R = &s->arms[s->ref];
    const fp_gate_extra_t *xR = cand->x ? &cand->x[s->ref] : NULL;
    for (size_t i = 0; i < s->narms && c.rc == FP_OK; i++) {
        const fp_arm_t *a = &s->arms[i];
        const fp_gate_extra_t *xa = cand->x ? &cand->x[i] : NULL;
        fp_gc_status(&c, a);
        const fp_arm_t *b = base && comparable ? fp_summary_arm(&base->s, a->run.policy) : NULL;
        if (b) {
            const fp_gate_extra_t *xb = base->x ? &base->x[b - base->s.arms] : NULL;
            fp_gc_step_time(&c, b, a);
            fp_gc_loss(&c, "loss_vs_base", a, b, "the baseline", 1);
            fp_gc_acc(&c, "acc_vs_base", a, xa, b, xb, "the baseline", 1);
            fp_gc_memory(&c, b, a, shape_diff);
            fp_gc_skipped_vs_base(&c, b, a);
            fp_gc_lost_vs_base(&c, a, xa, xb);
            if (a->fmt >= 0)
                fp_gc_overflow_vs_base(&c, b, a);
            fp_gc_dist_vs_base(&c, a, xa, xb, 1);
            fp_gc_dist_vs_base(&c, a, xa, xb, 0);
        }
        if (!a->is_ref) {
            fp_gc_speedup(&c, a, R);
            fp_gc_loss(&c, "loss_gap", a, R, fp_gc_label(R), 0);
            fp_gc_acc(&c, "acc_drop", a, xa, R, xR, fp_gc_label(R), 0);
        }
        fp_gc_skipped(&c, a);
        if (a->fmt >= 0)
            fp_gc_overflow(&c, a);
        if (!a->is_ref)
            fp_gc_lost(&c, a, xa, xR, fp_gc_label(R));
    }
    if (c.rc != FP_OK)
        fp_gate_result_free(res);
    return c.rc;
}
