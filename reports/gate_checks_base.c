/* gate_checks_base.c — the checks against a baseline (gate.h): comparable, step time, memory, skipped steps,
 * lost updates, overflow, data parallel. Promises: a noisy figure FAILs only when significant AND above its
 * threshold; a baseline that cannot be compared gives NOT_COMPARABLE naming every difference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "gate_checks.h"
#include "units.h"

/* "what base vs cand, ..." of the differences whose allowed flag is `allowed`; how many. */
static size_t diff_list(const fp_gate_result_t *r, int allowed, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->ndiffs; i++) {
        const fp_gate_diff_t *d = &r->diffs[i];
        if (d->allowed != allowed)
            continue;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s%s %s vs %s", k++ ? ", " : "", d->what,
                 d->key == FP_GK_BASELINE_RUN ? ":" : "", d->base, d->cand);
    }
    return k;
}

/* The sides' ranks for the `comparable` check ("" when both trained alone): the data-parallel checks
 * (fp_gc_dist_vs_base) are NOT_COMPARABLE when they differ, and the configuration's check says why beside its own. */
static void ranks_note(const fp_gate_result_t *r, int configs_match, char *out, size_t cap)
{
    out[0] = '\0';
    if (r->ranks_base > 1 || r->ranks_cand > 1)
        snprintf(out, cap, "; ranks %d vs %d (baseline vs candidate)%s", r->ranks_base, r->ranks_cand,
                 r->ranks_base != r->ranks_cand && configs_match
                     ? ": comm_share_vs_base and straggler_vs_base are not comparable" : "");
}

void fp_gc_comparable(fp_gc_acc_t *c)
{
    char bad[240], ok[200], ranks[120];
    size_t nbad = diff_list(c->res, 0, bad, sizeof bad), nok = diff_list(c->res, 1, ok, sizeof ok);
    ranks_note(c->res, nbad == 0, ranks, sizeof ranks);
    if (nbad)
        fp_gc_add(c, "comparable", "", FP_CHECK_NOT_COMPARABLE, (double)nbad, 0, "count",
                  "not comparable (baseline vs candidate): %s%s%s%s; no baseline comparison was run (--allow-config-diff "
            "KEY accepts a difference on purpose)",
            bad, nok ? "; allowed: " : "", ok, ranks);
    else if (nok)
        fp_gc_add(c, "comparable", "", FP_CHECK_PASS, 0, 0, "count",
                  "comparable with allowed differences (baseline vs candidate): %s; everything else matches%s", ok, ranks);
    else
        fp_gc_add(c, "comparable", "", FP_CHECK_PASS, 0, 0, "count",
                  "model, policies, batch, image size, data, steps, optimizer, lr, device and version match%s", ranks);
}

static double *per_image(const fp_arm_t *a, double *div)
{
    *div = a->run.batch_size > 0 ? (double)a->run.batch_size : 1;
    double *t = malloc((a->ntimes ? a->ntimes : 1) * sizeof *t);
    if (t)
        for (size_t i = 0; i < a->ntimes; i++)
            t[i] = a->times[i] / *div;
    return t;
}

void fp_gc_step_time(fp_gc_acc_t *c, const fp_arm_t *b, const fp_arm_t *a)
{
    const fp_gate_opts_t *o = c->o;
    char m1[FP_UNIT_BUF], m2[FP_UNIT_BUF];
    if (a->ntimes < o->min_steps || b->ntimes < o->min_steps) {
        fp_gc_add(c, "step_time", fp_gc_label(a), FP_CHECK_INCONCLUSIVE, NAN, 100 * o->max_slowdown, "percent",
                  "too few steps after warm-up: %zu candidate, %zu baseline (need %zu each)", a->ntimes, b->ntimes,
                  o->min_steps);
        return;
    }
    double da, db;
    double *ta = per_image(a, &da), *tb = per_image(b, &db);
    fp_mwu_t t;
    int rc = ta && tb ? fp_mann_whitney(ta, a->ntimes, tb, b->ntimes, &t) : fp_fail(FP_ENOMEM, "out of memory");
    free(ta);
    free(tb);
    if (rc != FP_OK) {
        c->rc = rc;
        return;
    }
    double ma = a->median_ns / da, mb = b->median_ns / db, ratio = ma / mb - 1;
    int fail = t.p < o->alpha && ratio > o->max_slowdown;
    const char *per = da > 1 && db > 1 ? "image" : "step (batch unknown)";
    fp_gc_stats(fp_gc_add(c, "step_time", fp_gc_label(a), fail ? FP_CHECK_FAIL : FP_CHECK_PASS, 100 * ratio, 100 * o->max_slowdown,
                "percent",
                "median %s per %s vs baseline %s (%+.2f%%, limit +%.1f%%), Mann-Whitney p = %.3g (alpha %.3g), n = %zu "
                  "/ %zu, batch %lld / %lld",
                  fp_fmt_ns(m1, ma), per, fp_fmt_ns(m2, mb), 100 * ratio, 100 * o->max_slowdown, t.p, o->alpha,
                  a->ntimes, b->ntimes, (long long)a->run.batch_size, (long long)b->run.batch_size),
              mb, t.p);
}

void fp_gc_memory(fp_gc_acc_t *c, const fp_arm_t *b, const fp_arm_t *a, const char *shape_diff)
{
    char m1[FP_UNIT_BUF], m2[FP_UNIT_BUF];
    double limit = 100 * c->o->max_mem_growth;
    if (shape_diff) {
        fp_gc_add(c, "memory_vs_base", fp_gc_label(a), FP_CHECK_SKIP, NAN, limit, "percent",
                  "not compared: the %s differs (allowed), so memory does: %s vs baseline %s", shape_diff,
                  fp_fmt_bytes(m1, a->mem_peak), fp_fmt_bytes(m2, b->mem_peak));
        return;
    }
    if (isnan(a->mem_peak) || isnan(b->mem_peak) || !(b->mem_peak > 0)) {
        fp_gc_add(c, "memory_vs_base", fp_gc_label(a), FP_CHECK_SKIP, NAN, limit, "percent", "peak memory not measured on both (%s vs %s)",
                  fp_fmt_bytes(m1, a->mem_peak), fp_fmt_bytes(m2, b->mem_peak));
        return;
    }
    double growth = a->mem_peak / b->mem_peak - 1;
    fp_gc_stats(fp_gc_add(c, "memory_vs_base", fp_gc_label(a), 100 * growth <= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, 100 * growth,
                limit, "percent", "peak memory %s vs baseline %s (%+.2f%%, limit +%.1f%%)", fp_fmt_bytes(m1, a->mem_peak),
                fp_fmt_bytes(m2, b->mem_peak), 100 * growth, limit),
                b->mem_peak, NAN);
}

void fp_gc_skipped_vs_base(fp_gc_acc_t *c, const fp_arm_t *b, const fp_arm_t *a)
{
    const fp_gate_opts_t *o = c->o;
    fp_gate_derived_t da, db;
    fp_gate_derive(a, &da);
    fp_gate_derive(b, &db);
    double limit = 100 * o->max_skip_rise;
    if (da.steps_after <= 0 || db.steps_after <= 0) {
        fp_gc_add(c, "skipped_vs_base", fp_gc_label(a), FP_CHECK_INCONCLUSIVE, NAN, limit, "points", "no steps after calibration");
        return;
    }
    double ra = (double)da.skips_after / (double)da.steps_after, rb = (double)db.skips_after / (double)db.steps_after;
    double rise = 100 * (ra - rb);
    double p = fp_two_prop_p((double)da.skips_after, (double)da.steps_after, (double)db.skips_after,
                             (double)db.steps_after);
    fp_check_status st = fp_gc_judge(rise, limit, p, o->alpha);
    fp_gc_stats(fp_gc_add(c, "skipped_vs_base", fp_gc_label(a), st, rise, limit, "points",
                "%.2f%% of steps skipped after calibration vs baseline %.2f%% (%lld / %lld vs %lld / %lld; %+.2f pt, "
                  "limit %.2f pt); p = %.3g (alpha %.3g)%s",
                  100 * ra, 100 * rb, (long long)da.skips_after, (long long)da.steps_after, (long long)db.skips_after,
                  (long long)db.steps_after, rise, limit, p, o->alpha, fp_gc_verdict_words(st)),
              100 * rb, p);
}

void fp_gc_lost_vs_base(fp_gc_acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xb)
{
    double limit = c->o->max_lost_rise;
    if (!xa || !xb || !xa->lost_samples || !xb->lost_samples) {
        fp_gc_add(c, "lost_updates_vs_base", fp_gc_label(a), FP_CHECK_SKIP, NAN, limit, "points",
                  "lost updates not measured on both (candidate %d, baseline %d sampled steps)", xa ? xa->lost_samples : 0,
                  xb ? xb->lost_samples : 0);
        return;
    }
    double rise = xa->lost_pct - xb->lost_pct;
    fp_gc_stats(fp_gc_add(c, "lost_updates_vs_base", fp_gc_label(a), rise <= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, rise, limit,
                "points", "lost updates %.4g%% vs baseline %.4g%% (%+.4g pt, limit %.4g pt)", xa->lost_pct,
                xb->lost_pct, rise, limit),
                xb->lost_pct, NAN);
}

void fp_gc_overflow_vs_base(fp_gc_acc_t *c, const fp_arm_t *b, const fp_arm_t *a)
{
    const fp_gate_opts_t *o = c->o;
    double limit = (double)o->max_overflows;
    int64_t na = fp_gc_overflow_count(a), nb = fp_gc_overflow_count(b);
    double va = fp_gc_overflow_values(a), vb = fp_gc_overflow_values(b), rise = (double)(na - nb);
    if (!a->nnumerics || !b->nnumerics) {
        fp_gc_add(c, "overflow_vs_base", fp_gc_label(a), FP_CHECK_SKIP, rise, limit, "count",
                  "no histograms on both (%zu / %zu rows): overflows %lld vs baseline %lld", a->nnumerics, b->nnumerics,
                  (long long)na, (long long)nb);
        return;
    }
    double p = va > 0 && vb > 0 ? fp_two_prop_p((double)na, va, (double)nb, vb) : NAN;
    fp_check_status st = fp_gc_judge(rise, limit, p, o->alpha);
    fp_gc_stats(fp_gc_add(c, "overflow_vs_base", fp_gc_label(a), st, rise, limit, "count",
                "%lld overflowing values + NaN events of %.0f counted vs baseline %lld of %.0f (%+.0f, limit %lld); "
                  "p = %.3g (alpha %.3g)%s",
                  (long long)na, va, (long long)nb, vb, rise, (long long)o->max_overflows, p, o->alpha,
                  fp_gc_verdict_words(st)),
                                      (double)nb, p);
}

/* Data parallel: one of the two checks (comm 1: the exposed share in points; 0: the straggler ratio). Neither
 * side on ranks: no check; different rank counts: NOT_COMPARABLE; the per-step samples decide significance. */
void fp_gc_dist_vs_base(fp_gc_acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xb,
                        int comm)
{
    const fp_gate_opts_t *o = c->o;
    const char *kind = comm ? "comm_share_vs_base" : "straggler_vs_base";
    const fp_dist_arm_t *da = xa ? &xa->dist : NULL, *db = xb ? &xb->dist : NULL;
    int ra = da ? da->ranks : 0, rb = db ? db->ranks : 0;
    double limit = comm ? o->max_comm_rise : o->max_straggler_rise;
    const char *unit = comm ? "points" : "x";
    if (!ra && !rb)
        return;
    if (ra != rb) {
        fp_gc_add(c, kind, fp_gc_label(a), FP_CHECK_NOT_COMPARABLE, NAN, limit, unit,
                  "not comparable: ranks %d vs %d (baseline vs candidate); communication and stragglers depend on the rank "
            "count", rb ? rb : 1, ra ? ra : 1);
        return;
    }
    double va = comm ? 100 * da->exposed_share : da->straggler, vb = comm ? 100 * db->exposed_share : db->straggler;
    const double *sa = comm ? da->share_per_step : da->straggler_per_step;
    const double *sb = comm ? db->share_per_step : db->straggler_per_step;
    size_t na = da->nper_step, nb = db->nper_step;
    if (isnan(va) || isnan(vb)) {
        fp_gc_add(c, kind, fp_gc_label(a), FP_CHECK_SKIP, NAN, limit, unit, "not measured on both (%d ranks)", ra);
        return;
    }
    double rise = va - vb, p = NAN;
    fp_mwu_t t;
    if (na >= o->min_steps && nb >= o->min_steps && fp_mann_whitney(sa, na, sb, nb, &t) == FP_OK)
        p = t.p;
    fp_check_status st = fp_gc_judge(rise, limit, p, o->alpha);
    if (comm)
        fp_gc_stats(fp_gc_add(c, kind, fp_gc_label(a), st, rise, limit, unit,
                    "exposed all-reduce %.2f%% of the wall time vs baseline %.2f%% (%+.2f pt, limit %.2f pt), "
                      "%d ranks; Mann-Whitney p = %.3g over %zu / %zu steps (alpha %.3g)%s",
                      va, vb, rise, limit, ra, p, na, nb, o->alpha, fp_gc_verdict_words(st)),
                  vb, p);
    else
        fp_gc_stats(fp_gc_add(c, kind, fp_gc_label(a), st, rise, limit, unit,
                    "slowest rank %d at %.3fx the fastest's mean step vs baseline rank %d at %.3fx (%+.3f, limit "
                      "%.3f), %d ranks; Mann-Whitney p = %.3g over %zu / %zu steps (alpha %.3g)%s",
                      da->slowest, va, db->slowest, vb, rise, limit, ra, p, na, nb, o->alpha, fp_gc_verdict_words(st)),
                  vb, p);
}
