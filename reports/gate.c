/* gate.c — the gate's checks (gate.h) on loaded session summaries. Promise: noise alone never fails a
 * step-time check (it needs p < alpha AND a median slowdown above the threshold); too little data is
 * INCONCLUSIVE, never PASS or FAIL; arms are matched by policy and must exist on both sides. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "error.h"
#include "gate.h"
#include "units.h"

void fp_gate_defaults(fp_gate_opts_t *o)
{
    o->alpha = 0.01;
    o->max_slowdown = 0.05;
    o->min_steps = 20;
    o->warmup = -1;
    o->min_speedup = NAN;
    o->max_loss_gap = 0.10;
    o->max_acc_drop = 1.0;
    o->max_skip_rate = 0.05;
    o->max_overflows = 0;
}

const char *fp_check_status_name(fp_check_status s)
{
    static const char *const names[] = {"PASS", "FAIL", "INCONCLUSIVE", "SKIP"};
    return (unsigned)s < 4 ? names[s] : "?";
}

static const char *label(const fp_arm_t *a)
{
    return a->run.arm[0] ? a->run.arm : a->run.policy;
}

typedef struct {
    fp_gate_result_t *res;
    size_t cap;
    int rc;
} acc_t;

static fp_check_t *add(acc_t *c, const char *kind, const fp_arm_t *a, fp_check_status st, double value, double limit,
                       const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static fp_check_t *add(acc_t *c, const char *kind, const fp_arm_t *a, fp_check_status st, double value, double limit,
                       const char *fmt, ...)
{
    if (c->rc != FP_OK)
        return NULL;
    if (c->res->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 16;
        fp_check_t *p = realloc(c->res->checks, nc * sizeof *p);
        if (!p) {
            c->rc = fp_fail(FP_ENOMEM, "out of memory");
            return NULL;
        }
        c->res->checks = p;
        c->cap = nc;
    }
    fp_check_t *k = &c->res->checks[c->res->n++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s[%s]", kind, label(a));
    snprintf(k->arm, sizeof k->arm, "%s", label(a));
    k->status = st;
    k->value = value;
    k->limit = limit;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->figures, sizeof k->figures, fmt, ap);
    va_end(ap);
    return k;
}

static int on_cpu(const fp_arm_t *a)
{
    return a->run.device[0] == '\0' || strncasecmp(a->run.device, "cpu", 3) == 0;
}

static void step_time_check(acc_t *c, const fp_arm_t *b, const fp_arm_t *a, const fp_gate_opts_t *o)
{
    char m1[FP_UNIT_BUF], m2[FP_UNIT_BUF];
    if (a->ntimes < o->min_steps || b->ntimes < o->min_steps) {
        add(c, "step_time", a, FP_CHECK_INCONCLUSIVE, NAN, o->max_slowdown,
            "too few steps after warm-up: %zu candidate, %zu baseline (need %zu each)", a->ntimes, b->ntimes,
            o->min_steps);
        return;
    }
    fp_mwu_t t;
    if (fp_mann_whitney(a->times, a->ntimes, b->times, b->ntimes, &t) != FP_OK) {
        c->rc = FP_EINVAL;
        return;
    }
    double ratio = a->median_ns / b->median_ns - 1;
    int fail = t.p < o->alpha && ratio > o->max_slowdown;
    add(c, "step_time", a, fail ? FP_CHECK_FAIL : FP_CHECK_PASS, ratio, o->max_slowdown,
        "median %s vs baseline %s (%+.2f%%, limit +%.1f%%), Mann-Whitney p = %.3g (alpha %.3g), n = %zu / %zu",
        fp_fmt_ns(m1, a->median_ns), fp_fmt_ns(m2, b->median_ns), 100 * ratio, 100 * o->max_slowdown, t.p, o->alpha,
        a->ntimes, b->ntimes);
}

static void arm_checks(acc_t *c, const fp_summary_t *s, const fp_arm_t *a, const fp_gate_opts_t *o)
{
    const fp_arm_t *R = &s->arms[s->ref];
    char b1[FP_UNIT_BUF], b2[FP_UNIT_BUF], b3[FP_UNIT_BUF];
    /* run status */
    int failed = strcmp(a->run.status, "failed") == 0;
    add(c, "status", a, failed ? FP_CHECK_FAIL : FP_CHECK_PASS, NAN, NAN, "run %lld %s%s%s", (long long)a->run.id,
        a->run.status, a->run.failure[0] ? ": " : "", a->run.failure);
    if (!a->is_ref) {
        /* speedup */
        double limit = o->min_speedup;
        if (isnan(limit) && on_cpu(a)) {
            add(c, "speedup", a, FP_CHECK_SKIP, a->speedup, NAN,
                "speedup %s over %s; not checked on the CPU (low precision is emulated) without --min-speedup",
                fp_fmt_ratio(b1, a->speedup), label(R));
        } else {
            if (isnan(limit))
                limit = 1.0;
            if (a->ntimes < o->min_steps || R->ntimes < o->min_steps)
                add(c, "speedup", a, FP_CHECK_INCONCLUSIVE, a->speedup, limit,
                    "too few steps after warm-up: %zu vs %zu for %s (need %zu)", a->ntimes, R->ntimes, label(R),
                    o->min_steps);
            else
                add(c, "speedup", a, a->speedup >= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, a->speedup, limit,
                    "speedup %s over %s (median step %s vs %s), minimum %.2fx", fp_fmt_ratio(b1, a->speedup), label(R),
                    fp_fmt_ns(b2, a->median_ns), fp_fmt_ns(b3, R->median_ns), limit);
        }
        /* loss gap */
        if (a->nsteps == 0 || R->nsteps == 0)
            add(c, "loss_gap", a, FP_CHECK_INCONCLUSIVE, NAN, o->max_loss_gap, "no steps");
        else if (isnan(R->final_loss))
            add(c, "loss_gap", a, FP_CHECK_SKIP, NAN, o->max_loss_gap, "the reference %s has no finite final loss",
                label(R));
        else if (isnan(a->final_loss))
            add(c, "loss_gap", a, FP_CHECK_FAIL, NAN, o->max_loss_gap,
                "no finite final loss (diverged?) vs %.4f for %s", R->final_loss, label(R));
        else
            add(c, "loss_gap", a, a->loss_gap <= o->max_loss_gap ? FP_CHECK_PASS : FP_CHECK_FAIL, a->loss_gap,
                o->max_loss_gap, "final loss %.4f vs %.4f for %s (gap %+.4f, limit %.4f)", a->final_loss,
                R->final_loss, label(R), a->loss_gap, o->max_loss_gap);
        /* accuracy drop */
        if (isnan(a->val_top1) || isnan(R->val_top1))
            add(c, "acc_drop", a, FP_CHECK_SKIP, NAN, o->max_acc_drop, "no validation top-1 on both arms");
        else
            add(c, "acc_drop", a, -a->top1_gap <= o->max_acc_drop ? FP_CHECK_PASS : FP_CHECK_FAIL, -a->top1_gap,
                o->max_acc_drop, "val top-1 %.2f%% vs %.2f%% for %s (drop %.2f pt, limit %.2f pt)", 100 * a->val_top1,
                100 * R->val_top1, label(R), -a->top1_gap, o->max_acc_drop);
    }
    /* skipped steps */
    if (a->nsteps == 0)
        add(c, "skipped", a, FP_CHECK_INCONCLUSIVE, NAN, o->max_skip_rate, "no steps");
    else
        add(c, "skipped", a, a->skip_rate <= o->max_skip_rate ? FP_CHECK_PASS : FP_CHECK_FAIL, a->skip_rate,
            o->max_skip_rate, "%lld of %zu steps skipped (%.2f%%, limit %.2f%%)%s%s", (long long)a->skipped, a->nsteps,
            100 * a->skip_rate, 100 * o->max_skip_rate, isnan(a->final_loss_scale) ? "" : ", final loss scale ",
            isnan(a->final_loss_scale) ? "" : fp_fmt_num(b1, a->final_loss_scale, 0));
    /* overflow */
    if (a->fmt >= 0) {
        int64_t n = a->fwd_overflow + a->fwd_nonfinite + a->nan_events;
        add(c, "overflow", a, n <= o->max_overflows ? FP_CHECK_PASS : FP_CHECK_FAIL, (double)n, (double)o->max_overflows,
            "%lld activation/weight values overflow %s, %lld NaN/Inf among them, %lld NaN events (limit %lld)%s",
            (long long)a->fwd_overflow, a->run.policy, (long long)a->fwd_nonfinite, (long long)a->nan_events,
            (long long)o->max_overflows, a->nnumerics ? "" : "; no histograms recorded");
    }
}

int fp_gate_run(const fp_summary_t *base, const fp_summary_t *cand, const fp_gate_opts_t *o, fp_gate_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (base) {
        if (strcmp(base->model, cand->model) != 0)
            return fp_fail(FP_EINVAL, "the baseline is %s and the candidate %s: sessions of different models",
                           base->model, cand->model);
        for (size_t i = 0; i < cand->narms; i++)
            if (!fp_summary_arm(base, cand->arms[i].run.policy))
                return fp_fail(FP_EINVAL, "the baseline has no %s arm of %s (missing arm)", cand->arms[i].run.policy,
                               cand->model);
        for (size_t i = 0; i < base->narms; i++)
            if (!fp_summary_arm(cand, base->arms[i].run.policy))
                return fp_fail(FP_EINVAL, "the candidate has no %s arm of %s (missing arm)", base->arms[i].run.policy,
                               base->model);
    }
    acc_t c = {res, 0, FP_OK};
    for (size_t i = 0; i < cand->narms; i++) {
        const fp_arm_t *a = &cand->arms[i];
        if (base)
            step_time_check(&c, fp_summary_arm(base, a->run.policy), a, o);
        arm_checks(&c, cand, a, o);
    }
    if (c.rc != FP_OK)
        fp_gate_result_free(res);
    return c.rc;
}

int fp_gate_exit_code(const fp_gate_result_t *res)
{
    int inconclusive = 0;
    for (size_t i = 0; i < res->n; i++) {
        if (res->checks[i].status == FP_CHECK_FAIL)
            return 1;
        inconclusive |= res->checks[i].status == FP_CHECK_INCONCLUSIVE;
    }
    return inconclusive ? 2 : 0;
}

void fp_gate_result_free(fp_gate_result_t *res)
{
    free(res->checks);
    res->checks = NULL;
    res->n = 0;
}
