/* gate.c — the gate's checks (gate.h) on loaded sessions. Promises: noise alone never fails a check
 * (each figure with a sampling error needs a significant test AND a difference above its threshold;
 * above the threshold without significance is INCONCLUSIVE); GradScaler's calibration is never counted
 * as skipped steps; a baseline that cannot be compared gives NOT_COMPARABLE naming every difference,
 * never a PASS or FAIL of a meaningless comparison. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "error.h"
#include "gate.h"
#include "store.h"
#include "units.h"

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

const char *fp_check_status_name(fp_check_status s)
{
    static const char *const names[FP_CHECK_NSTATUS] = {"PASS", "FAIL", "INCONCLUSIVE", "SKIP", "NOT_COMPARABLE"};
    return (unsigned)s < FP_CHECK_NSTATUS ? names[s] : "?";
}

static const char *label(const fp_arm_t *a)
{
    return a->run.arm[0] ? a->run.arm : a->run.policy;
}

/* ---------------------------------------------------------------- derived per arm */

/* A run of skipped steps from i on whose loss scale falls at every step and that ends in an unskipped
 * step: its length (0 when it is no such run). */
static size_t falling_run(const fp_arm_t *a, size_t i)
{
    size_t j = i;
    double prev = INFINITY;
    while (j < a->nsteps && a->steps[j].skipped && isfinite(a->steps[j].loss_scale) && a->steps[j].loss_scale < prev)
        prev = a->steps[j++].loss_scale;
    return j < a->nsteps && !a->steps[j].skipped ? j - i : 0;
}

void fp_gate_derive(const fp_arm_t *a, fp_gate_derived_t *d)
{
    memset(d, 0, sizeof *d);
    d->scale_first = d->scale_settled = d->loss_se = NAN;
    int64_t skipped = 0;
    for (size_t i = 0; i < a->nsteps; i++)
        skipped += a->steps[i].skipped != 0;
    if (a->nsteps) {
        d->scale_first = a->steps[0].loss_scale;
        /* the leading run while the scale first falls (2^16 halved until the gradients fit) */
        size_t i = falling_run(a, 0);
        d->calib_skips = (int64_t)i;
        if (i < a->nsteps && isfinite(a->steps[i].loss_scale))
            d->scale_settled = a->steps[i].loss_scale;
        /* GradScaler's probing: a run of skips starting at the first step after a scale increase */
        for (i = i + 1; i < a->nsteps; i++) {
            double prev = a->steps[i - 1].loss_scale, cur = a->steps[i].loss_scale;
            if (!a->steps[i].skipped || !(isfinite(prev) && isfinite(cur) && cur > prev) || a->steps[i - 1].skipped)
                continue;
            size_t k = falling_run(a, i);
            d->probe_skips += (int64_t)k;
            i += k;
        }
        d->calib_skips += d->probe_skips;
    }
    d->skips_after = skipped - d->calib_skips;
    d->steps_after = (int64_t)a->nsteps - d->calib_skips;
    /* the final loss's window (summary.h): the last max(1, min(50, steps / 20)) unskipped steps */
    size_t want = a->nsteps / 20, got = 0;
    want = want < 1 ? 1 : want > 50 ? 50 : want;
    double *w = malloc(want * sizeof *w);
    if (!w)
        return;
    for (size_t i = a->nsteps; i-- > 0 && got < want;)
        if (!a->steps[i].skipped)
            w[got++] = a->steps[i].loss;
    double mean;
    d->loss_n = fp_mean_se(w, got, &mean, &d->loss_se);
    free(w);
}

/* ---------------------------------------------------------------- the result list */

typedef struct {
    fp_gate_result_t *res;
    size_t cap;
    int rc;
    const fp_gate_opts_t *o;
} acc_t;

static fp_check_t *add(acc_t *c, const char *kind, const char *arm, fp_check_status st, double value, double limit,
                       const char *unit, const char *fmt, ...) __attribute__((format(printf, 8, 9)));

static fp_check_t *add(acc_t *c, const char *kind, const char *arm, fp_check_status st, double value, double limit,
                       const char *unit, const char *fmt, ...)
{
    if (c->rc != FP_OK)
        return NULL;
    if (c->res->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 32;
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
    if (arm && *arm)
        snprintf(k->name, sizeof k->name, "%s[%s]", kind, arm);
    else
        snprintf(k->name, sizeof k->name, "%s", kind);
    snprintf(k->kind, sizeof k->kind, "%s", kind);
    snprintf(k->arm, sizeof k->arm, "%s", arm ? arm : "");
    snprintf(k->unit, sizeof k->unit, "%s", unit);
    k->status = st;
    k->value = value;
    k->limit = limit;
    k->other = k->p = NAN;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->figures, sizeof k->figures, fmt, ap);
    va_end(ap);
    return k;
}

static void set_stats(fp_check_t *k, double other, double p)
{
    if (k) {
        k->other = other;
        k->p = p;
    }
}

/* Above the limit: FAIL when the test is significant, INCONCLUSIVE when it is not (or cannot run). */
static fp_check_status judge(double diff, double limit, double p, double alpha)
{
    if (!(diff > limit))
        return FP_CHECK_PASS;
    return !isnan(p) && p < alpha ? FP_CHECK_FAIL : FP_CHECK_INCONCLUSIVE;
}

static const char *verdict_words(fp_check_status st)
{
    return st == FP_CHECK_FAIL ? ": significant" : st == FP_CHECK_INCONCLUSIVE ? ": above the limit but within noise" : "";
}

static int on_cpu(const fp_arm_t *a)
{
    return a->run.device[0] == '\0' || strncasecmp(a->run.device, "cpu", 3) == 0;
}

/* ---------------------------------------------------------------- checks */

static void status_check(acc_t *c, const fp_arm_t *a)
{
    const fp_run_row_t *r = &a->run;
    if (strcmp(r->status, "finished") == 0 && !r->stale) {
        add(c, "status", label(a), FP_CHECK_PASS, NAN, NAN, "", "run %lld finished, %zu steps", (long long)r->id,
            a->nsteps);
        return;
    }
    const char *why = strcmp(r->status, "failed") == 0        ? "failed"
                      : strcmp(r->status, "interrupted") == 0 ? "was interrupted or killed"
                      : strcmp(r->status, "running") == 0     ? (r->stale ? "is stale: recorded as running, its writer "
                                                                            "silent or gone"
                                                                          : "is still running")
                                                              : r->status;
    add(c, "status", label(a), FP_CHECK_FAIL, NAN, NAN, "", "run %lld %s after %zu steps%s%s; only finished runs pass",
        (long long)r->id, why, a->nsteps, r->failure[0] ? ": " : "", r->failure);
}

/* Against a baseline recorded with another seed, accuracy and loss also differ by run-to-run training
 * variance, which one run on each side cannot measure: a difference above the limit is then
 * INCONCLUSIVE, never FAIL. Returns the note to add ("" when the seeds match or are unknown). */
static const char *seed_note(const fp_arm_t *a, const fp_arm_t *r, int vs_base, fp_check_status *st, char *buf,
                             size_t cap)
{
    buf[0] = '\0';
    if (!vs_base || a->run.seed < 0 || r->run.seed < 0 || a->run.seed == r->run.seed)
        return buf;
    snprintf(buf, cap, "; seeds differ (%lld vs baseline %lld): run-to-run training variance is not in this test, "
             "so above the limit is inconclusive (record both with one seed to compare)",
             (long long)a->run.seed, (long long)r->run.seed);
    if (*st == FP_CHECK_FAIL)
        *st = FP_CHECK_INCONCLUSIVE;
    return buf;
}

/* Final loss of a against r (the reference arm, or the baseline's arm: vs_base). */
static void loss_check(acc_t *c, const char *kind, const fp_arm_t *a, const fp_arm_t *r, const char *rname, int vs_base)
{
    const fp_gate_opts_t *o = c->o;
    if (a->nsteps == 0 || r->nsteps == 0) {
        add(c, kind, label(a), FP_CHECK_INCONCLUSIVE, NAN, o->max_loss_gap, "loss", "no steps to take a final loss from");
        return;
    }
    if (isnan(r->final_loss)) {
        add(c, kind, label(a), FP_CHECK_SKIP, NAN, o->max_loss_gap, "loss", "%s has no finite final loss", rname);
        return;
    }
    if (isnan(a->final_loss)) {
        set_stats(add(c, kind, label(a), FP_CHECK_FAIL, NAN, o->max_loss_gap, "loss",
                      "no finite final loss (diverged?) vs %.4f for %s", r->final_loss, rname),
                  r->final_loss, NAN);
        return;
    }
    fp_gate_derived_t da, dr;
    fp_gate_derive(a, &da);
    fp_gate_derive(r, &dr);
    double gap = a->final_loss - r->final_loss, se = sqrt(da.loss_se * da.loss_se + dr.loss_se * dr.loss_se);
    double p = isnan(se) ? NAN : se > 0 ? fp_normal_upper(gap / se) : gap > 0 ? 0 : 1;
    fp_check_status st = judge(gap, o->max_loss_gap, p, o->alpha);
    char sn[200];
    seed_note(a, r, vs_base, &st, sn, sizeof sn);
    char ps[64] = "";
    if (isnan(se))
        snprintf(ps, sizeof ps, "; noise unknown (fewer than 2 losses in a window)");
    else
        snprintf(ps, sizeof ps, "; p = %.3g (alpha %.3g)", p, o->alpha);
    set_stats(add(c, kind, label(a), st, gap, o->max_loss_gap, "loss",
                  "final loss %.4f +- %.4f vs %.4f +- %.4f for %s (means of the last %zu / %zu steps +- standard "
                  "error): %+.4f, limit %.4f%s%s%s",
                  a->final_loss, da.loss_se, r->final_loss, dr.loss_se, rname, da.loss_n, dr.loss_n, gap,
                  o->max_loss_gap, ps, sn[0] ? "" : verdict_words(st), sn),
              r->final_loss, p);
}

/* Validation top-1 of a against r: a drop in points, judged on the evaluated images. */
static void acc_check(acc_t *c, const char *kind, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_arm_t *r,
                      const fp_gate_extra_t *xr, const char *rname, int vs_base)
{
    const fp_gate_opts_t *o = c->o;
    if (isnan(a->val_top1) || isnan(r->val_top1)) {
        add(c, kind, label(a), FP_CHECK_SKIP, NAN, o->max_acc_drop, "points", "no validation top-1 on both (%s, %s)",
            label(a), rname);
        return;
    }
    double drop = 100 * (r->val_top1 - a->val_top1);
    double na = xa ? (double)xa->eval_images : -1, nr = xr ? (double)xr->eval_images : -1;
    char ia[64] = "", ir[64] = "";
    double p = NAN;
    if (na > 0 && nr > 0) {
        double lo, hi, lo2, hi2;
        fp_wilson(round(a->val_top1 * na), na, 0.05, &lo, &hi);
        fp_wilson(round(r->val_top1 * nr), nr, 0.05, &lo2, &hi2);
        snprintf(ia, sizeof ia, " [95%% %.1f-%.1f] of %.0f images", 100 * lo, 100 * hi, na);
        snprintf(ir, sizeof ir, " [%.1f-%.1f] of %.0f", 100 * lo2, 100 * hi2, nr);
        p = fp_two_prop_p(round(r->val_top1 * nr), nr, round(a->val_top1 * na), na);
    }
    fp_check_status st = judge(drop, o->max_acc_drop, p, o->alpha);
    char sn[200];
    seed_note(a, r, vs_base, &st, sn, sizeof sn);
    char ps[320];
    if (isnan(p))
        snprintf(ps, sizeof ps, "; images evaluated: %s", xa && xa->eval_from[0] ? xa->eval_from : "unknown");
    else
        snprintf(ps, sizeof ps, "; two-proportion p = %.3g (alpha %.3g); images: %s", p, o->alpha, xa->eval_from);
    set_stats(add(c, kind, label(a), st, drop, o->max_acc_drop, "points",
                  "val top-1 %.2f%%%s vs %.2f%%%s for %s: drop %.2f pt, limit %.2f pt%s%s%s", 100 * a->val_top1, ia,
                  100 * r->val_top1, ir, rname, drop, o->max_acc_drop,
                  sn[0] ? ""
                  : st == FP_CHECK_INCONCLUSIVE && isnan(p) ? ": above the limit, image count unknown"
                                                            : verdict_words(st),
                  ps, sn),
              100 * r->val_top1, p);
}

static void skipped_check(acc_t *c, const fp_arm_t *a)
{
    const fp_gate_opts_t *o = c->o;
    fp_gate_derived_t d;
    fp_gate_derive(a, &d);
    if (d.steps_after <= 0) {
        add(c, "skipped", label(a), FP_CHECK_INCONCLUSIVE, NAN, 100 * o->max_skip_rate, "percent", "no steps");
        return;
    }
    double rate = (double)d.skips_after / (double)d.steps_after;
    char calib[160] = "", b1[FP_UNIT_BUF], b2[FP_UNIT_BUF];
    if (d.calib_skips)
        snprintf(calib, sizeof calib, "; %lld calibration skips apart (loss scale %s -> %s%s)", (long long)d.calib_skips,
                 fp_fmt_num(b1, d.scale_first, 0), fp_fmt_num(b2, d.scale_settled, 0),
                 d.probe_skips ? ", and after scale increases" : "");
    add(c, "skipped", label(a), rate <= o->max_skip_rate ? FP_CHECK_PASS : FP_CHECK_FAIL, 100 * rate,
        100 * o->max_skip_rate, "percent", "%lld of %lld steps skipped after calibration (%.2f%%, limit %.2f%%)%s",
        (long long)d.skips_after, (long long)d.steps_after, 100 * rate, 100 * o->max_skip_rate, calib);
}

static int64_t overflow_count(const fp_arm_t *a)
{
    return a->fwd_overflow + a->fwd_nonfinite + a->nan_events;
}

/* Activation and weight values histogrammed (what overflow counts are out of). */
static double overflow_values(const fp_arm_t *a)
{
    double n = 0;
    for (size_t i = 0; i < a->nnumerics; i++)
        if (a->numerics[i].role == FP_ROLE_ACTIVATION || a->numerics[i].role == FP_ROLE_WEIGHT)
            n += (double)a->numerics[i].count;
    return n;
}

static void overflow_check(acc_t *c, const fp_arm_t *a)
{
    int64_t n = overflow_count(a);
    add(c, "overflow", label(a), n <= c->o->max_overflows ? FP_CHECK_PASS : FP_CHECK_FAIL, (double)n,
        (double)c->o->max_overflows, "count",
        "%lld activation/weight values overflow %s, %lld NaN/Inf among them, %lld NaN events (limit %lld)%s",
        (long long)a->fwd_overflow, a->run.policy, (long long)a->fwd_nonfinite, (long long)a->nan_events,
        (long long)c->o->max_overflows, a->nnumerics ? "" : "; no histograms recorded");
}

static void lost_check(acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xr,
                       const char *rname)
{
    double limit = c->o->max_lost_updates;
    if (!xa || !xa->lost_samples) {
        add(c, "lost_updates", label(a), FP_CHECK_SKIP, NAN, limit, "percent",
            "no lost-update measurement (the parameter pass runs with the histograms: --hist-every)");
        return;
    }
    char ref[96] = "";
    if (xr && xr->lost_samples)
        snprintf(ref, sizeof ref, "; %s %.4g%%", rname, xr->lost_pct);
    set_stats(add(c, "lost_updates", label(a), xa->lost_pct <= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, xa->lost_pct,
                  limit, "percent",
                  "%.4g%% of the weights with a nonzero gradient left unchanged (mean of %d sampled step%s, largest "
                  "%.4g%%), limit %.4g%%%s",
                  xa->lost_pct, xa->lost_samples, xa->lost_samples == 1 ? "" : "s", xa->lost_max, limit, ref),
              xr && xr->lost_samples ? xr->lost_pct : NAN, NAN);
}

static void speedup_check(acc_t *c, const fp_arm_t *a, const fp_arm_t *R)
{
    const fp_gate_opts_t *o = c->o;
    char b1[FP_UNIT_BUF], b2[FP_UNIT_BUF], b3[FP_UNIT_BUF];
    double limit = o->min_speedup;
    if (isnan(limit) && on_cpu(a)) {
        add(c, "speedup", label(a), FP_CHECK_SKIP, a->speedup, NAN, "x",
            "speedup %s over %s; not checked on the CPU (low precision is emulated) without --min-speedup",
            fp_fmt_ratio(b1, a->speedup), label(R));
        return;
    }
    if (isnan(limit))
        limit = 1.0;
    if (a->ntimes < o->min_steps || R->ntimes < o->min_steps)
        add(c, "speedup", label(a), FP_CHECK_INCONCLUSIVE, a->speedup, limit, "x",
            "too few steps after warm-up: %zu vs %zu for %s (need %zu)", a->ntimes, R->ntimes, label(R), o->min_steps);
    else
        add(c, "speedup", label(a), a->speedup >= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, a->speedup, limit, "x",
            "speedup %s over %s (median step %s vs %s), minimum %.2fx", fp_fmt_ratio(b1, a->speedup), label(R),
            fp_fmt_ns(b2, a->median_ns), fp_fmt_ns(b3, R->median_ns), limit);
}

/* Step times per image (per step when the batch is unknown) into a new array. */
static double *per_image(const fp_arm_t *a, double *div)
{
    *div = a->run.batch_size > 0 ? (double)a->run.batch_size : 1;
    double *t = malloc((a->ntimes ? a->ntimes : 1) * sizeof *t);
    if (t)
        for (size_t i = 0; i < a->ntimes; i++)
            t[i] = a->times[i] / *div;
    return t;
}

static void step_time_check(acc_t *c, const fp_arm_t *b, const fp_arm_t *a)
{
    const fp_gate_opts_t *o = c->o;
    char m1[FP_UNIT_BUF], m2[FP_UNIT_BUF];
    if (a->ntimes < o->min_steps || b->ntimes < o->min_steps) {
        add(c, "step_time", label(a), FP_CHECK_INCONCLUSIVE, NAN, 100 * o->max_slowdown, "percent",
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
    set_stats(add(c, "step_time", label(a), fail ? FP_CHECK_FAIL : FP_CHECK_PASS, 100 * ratio, 100 * o->max_slowdown,
                  "percent",
                  "median %s per %s vs baseline %s (%+.2f%%, limit +%.1f%%), Mann-Whitney p = %.3g (alpha %.3g), n = %zu "
                  "/ %zu, batch %lld / %lld",
                  fp_fmt_ns(m1, ma), per, fp_fmt_ns(m2, mb), 100 * ratio, 100 * o->max_slowdown, t.p, o->alpha,
                  a->ntimes, b->ntimes, (long long)a->run.batch_size, (long long)b->run.batch_size),
              mb, t.p);
}

static void memory_check(acc_t *c, const fp_arm_t *b, const fp_arm_t *a, const char *shape_diff)
{
    char m1[FP_UNIT_BUF], m2[FP_UNIT_BUF];
    double limit = 100 * c->o->max_mem_growth;
    if (shape_diff) {
        add(c, "memory_vs_base", label(a), FP_CHECK_SKIP, NAN, limit, "percent",
            "not compared: the %s differs (allowed), so memory does: %s vs baseline %s", shape_diff,
            fp_fmt_bytes(m1, a->mem_peak), fp_fmt_bytes(m2, b->mem_peak));
        return;
    }
    if (isnan(a->mem_peak) || isnan(b->mem_peak) || !(b->mem_peak > 0)) {
        add(c, "memory_vs_base", label(a), FP_CHECK_SKIP, NAN, limit, "percent", "peak memory not measured on both (%s vs %s)",
            fp_fmt_bytes(m1, a->mem_peak), fp_fmt_bytes(m2, b->mem_peak));
        return;
    }
    double growth = a->mem_peak / b->mem_peak - 1;
    set_stats(add(c, "memory_vs_base", label(a), 100 * growth <= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, 100 * growth,
                  limit, "percent", "peak memory %s vs baseline %s (%+.2f%%, limit +%.1f%%)", fp_fmt_bytes(m1, a->mem_peak),
                  fp_fmt_bytes(m2, b->mem_peak), 100 * growth, limit),
              b->mem_peak, NAN);
}

static void skipped_vs_base(acc_t *c, const fp_arm_t *b, const fp_arm_t *a)
{
    const fp_gate_opts_t *o = c->o;
    fp_gate_derived_t da, db;
    fp_gate_derive(a, &da);
    fp_gate_derive(b, &db);
    double limit = 100 * o->max_skip_rise;
    if (da.steps_after <= 0 || db.steps_after <= 0) {
        add(c, "skipped_vs_base", label(a), FP_CHECK_INCONCLUSIVE, NAN, limit, "points", "no steps after calibration");
        return;
    }
    double ra = (double)da.skips_after / (double)da.steps_after, rb = (double)db.skips_after / (double)db.steps_after;
    double rise = 100 * (ra - rb);
    double p = fp_two_prop_p((double)da.skips_after, (double)da.steps_after, (double)db.skips_after,
                             (double)db.steps_after);
    fp_check_status st = judge(rise, limit, p, o->alpha);
    set_stats(add(c, "skipped_vs_base", label(a), st, rise, limit, "points",
                  "%.2f%% of steps skipped after calibration vs baseline %.2f%% (%lld / %lld vs %lld / %lld; %+.2f pt, "
                  "limit %.2f pt); p = %.3g (alpha %.3g)%s",
                  100 * ra, 100 * rb, (long long)da.skips_after, (long long)da.steps_after, (long long)db.skips_after,
                  (long long)db.steps_after, rise, limit, p, o->alpha, verdict_words(st)),
              100 * rb, p);
}

static void lost_vs_base(acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xb)
{
    double limit = c->o->max_lost_rise;
    if (!xa || !xb || !xa->lost_samples || !xb->lost_samples) {
        add(c, "lost_updates_vs_base", label(a), FP_CHECK_SKIP, NAN, limit, "points",
            "lost updates not measured on both (candidate %d, baseline %d sampled steps)", xa ? xa->lost_samples : 0,
            xb ? xb->lost_samples : 0);
        return;
    }
    double rise = xa->lost_pct - xb->lost_pct;
    set_stats(add(c, "lost_updates_vs_base", label(a), rise <= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, rise, limit,
                  "points", "lost updates %.4g%% vs baseline %.4g%% (%+.4g pt, limit %.4g pt)", xa->lost_pct,
                  xb->lost_pct, rise, limit),
              xb->lost_pct, NAN);
}

static void overflow_vs_base(acc_t *c, const fp_arm_t *b, const fp_arm_t *a)
{
    const fp_gate_opts_t *o = c->o;
    double limit = (double)o->max_overflows;
    int64_t na = overflow_count(a), nb = overflow_count(b);
    double va = overflow_values(a), vb = overflow_values(b), rise = (double)(na - nb);
    if (!a->nnumerics || !b->nnumerics) {
        add(c, "overflow_vs_base", label(a), FP_CHECK_SKIP, rise, limit, "count",
            "no histograms on both (%zu / %zu rows): overflows %lld vs baseline %lld", a->nnumerics, b->nnumerics,
            (long long)na, (long long)nb);
        return;
    }
    double p = va > 0 && vb > 0 ? fp_two_prop_p((double)na, va, (double)nb, vb) : NAN;
    fp_check_status st = judge(rise, limit, p, o->alpha);
    set_stats(add(c, "overflow_vs_base", label(a), st, rise, limit, "count",
                  "%lld overflowing values + NaN events of %.0f counted vs baseline %lld of %.0f (%+.0f, limit %lld); "
                  "p = %.3g (alpha %.3g)%s",
                  (long long)na, va, (long long)nb, vb, rise, (long long)o->max_overflows, p, o->alpha,
                  verdict_words(st)),
              (double)nb, p);
}

/* Data parallel: one of the two checks (comm 1: the exposed share in points; 0: the straggler ratio). Neither
 * side on ranks: no check; different rank counts: NOT_COMPARABLE; the per-step samples decide significance. */
static void dist_vs_base(acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xb, int comm)
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
        add(c, kind, label(a), FP_CHECK_NOT_COMPARABLE, NAN, limit, unit,
            "not comparable: ranks %d vs %d (baseline vs candidate); communication and stragglers depend on the rank "
            "count", rb ? rb : 1, ra ? ra : 1);
        return;
    }
    double va = comm ? 100 * da->exposed_share : da->straggler, vb = comm ? 100 * db->exposed_share : db->straggler;
    const double *sa = comm ? da->share_per_step : da->straggler_per_step;
    const double *sb = comm ? db->share_per_step : db->straggler_per_step;
    size_t na = da->nper_step, nb = db->nper_step;
    if (isnan(va) || isnan(vb)) {
        add(c, kind, label(a), FP_CHECK_SKIP, NAN, limit, unit, "not measured on both (%d ranks)", ra);
        return;
    }
    double rise = va - vb, p = NAN;
    fp_mwu_t t;
    if (na >= o->min_steps && nb >= o->min_steps && fp_mann_whitney(sa, na, sb, nb, &t) == FP_OK)
        p = t.p;
    fp_check_status st = judge(rise, limit, p, o->alpha);
    if (comm)
        set_stats(add(c, kind, label(a), st, rise, limit, unit,
                      "exposed all-reduce %.2f%% of the wall time vs baseline %.2f%% (%+.2f pt, limit %.2f pt), "
                      "%d ranks; Mann-Whitney p = %.3g over %zu / %zu steps (alpha %.3g)%s",
                      va, vb, rise, limit, ra, p, na, nb, o->alpha, verdict_words(st)),
                  vb, p);
    else
        set_stats(add(c, kind, label(a), st, rise, limit, unit,
                      "slowest rank %d at %.3fx the fastest's mean step vs baseline rank %d at %.3fx (%+.3f, limit "
                      "%.3f), %d ranks; Mann-Whitney p = %.3g over %zu / %zu steps (alpha %.3g)%s",
                      da->slowest, va, db->slowest, vb, rise, limit, ra, p, na, nb, o->alpha, verdict_words(st)),
                  vb, p);
}

/* ---------------------------------------------------------------- the run */

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
 * (dist_vs_base) are NOT_COMPARABLE when they differ, and the configuration's check says why beside its own. */
static void ranks_note(const fp_gate_result_t *r, int configs_match, char *out, size_t cap)
{
    out[0] = '\0';
    if (r->ranks_base > 1 || r->ranks_cand > 1)
        snprintf(out, cap, "; ranks %d vs %d (baseline vs candidate)%s", r->ranks_base, r->ranks_cand,
                 r->ranks_base != r->ranks_cand && configs_match
                     ? ": comm_share_vs_base and straggler_vs_base are not comparable" : "");
}

static void comparable_check(acc_t *c)
{
    char bad[240], ok[200], ranks[120];
    size_t nbad = diff_list(c->res, 0, bad, sizeof bad), nok = diff_list(c->res, 1, ok, sizeof ok);
    ranks_note(c->res, nbad == 0, ranks, sizeof ranks);
    if (nbad)
        add(c, "comparable", "", FP_CHECK_NOT_COMPARABLE, (double)nbad, 0, "count",
            "not comparable (baseline vs candidate): %s%s%s%s; no baseline comparison was run (--allow-config-diff "
            "KEY accepts a difference on purpose)",
            bad, nok ? "; allowed: " : "", ok, ranks);
    else if (nok)
        add(c, "comparable", "", FP_CHECK_PASS, 0, 0, "count",
            "comparable with allowed differences (baseline vs candidate): %s; everything else matches%s", ok, ranks);
    else
        add(c, "comparable", "", FP_CHECK_PASS, 0, 0, "count",
            "model, policies, batch, image size, data, steps, optimizer, lr, device and version match%s", ranks);
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
    acc_t c = {res, 0, FP_OK, o};
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
        comparable_check(&c);
    }
    const fp_summary_t *s = &cand->s;
    const fp_arm_t *R = &s->arms[s->ref];
    const fp_gate_extra_t *xR = cand->x ? &cand->x[s->ref] : NULL;
    for (size_t i = 0; i < s->narms && c.rc == FP_OK; i++) {
        const fp_arm_t *a = &s->arms[i];
        const fp_gate_extra_t *xa = cand->x ? &cand->x[i] : NULL;
        status_check(&c, a);
        const fp_arm_t *b = base && comparable ? fp_summary_arm(&base->s, a->run.policy) : NULL;
        if (b) {
            const fp_gate_extra_t *xb = base->x ? &base->x[b - base->s.arms] : NULL;
            step_time_check(&c, b, a);
            loss_check(&c, "loss_vs_base", a, b, "the baseline", 1);
            acc_check(&c, "acc_vs_base", a, xa, b, xb, "the baseline", 1);
            memory_check(&c, b, a, shape_diff);
            skipped_vs_base(&c, b, a);
            lost_vs_base(&c, a, xa, xb);
            if (a->fmt >= 0)
                overflow_vs_base(&c, b, a);
            dist_vs_base(&c, a, xa, xb, 1);
            dist_vs_base(&c, a, xa, xb, 0);
        }
        if (!a->is_ref) {
            speedup_check(&c, a, R);
            loss_check(&c, "loss_gap", a, R, label(R), 0);
            acc_check(&c, "acc_drop", a, xa, R, xR, label(R), 0);
        }
        skipped_check(&c, a);
        if (a->fmt >= 0)
            overflow_check(&c, a);
        if (!a->is_ref)
            lost_check(&c, a, xa, xR, label(R));
    }
    if (c.rc != FP_OK)
        fp_gate_result_free(res);
    return c.rc;
}

int fp_gate_exit_code(const fp_gate_result_t *res)
{
    int fail = 0, inconclusive = 0;
    for (size_t i = 0; i < res->n; i++) {
        if (res->checks[i].status == FP_CHECK_NOT_COMPARABLE)
            return FP_GATE_NOT_COMPARABLE;
        fail |= res->checks[i].status == FP_CHECK_FAIL;
        inconclusive |= res->checks[i].status == FP_CHECK_INCONCLUSIVE;
    }
    return fail ? FP_GATE_REGRESSION : inconclusive && res->inconclusive_fails ? FP_GATE_INCONCLUSIVE : FP_GATE_PASS;
}

void fp_gate_result_free(fp_gate_result_t *res)
{
    free(res->checks);
    free(res->diffs);
    res->checks = NULL;
    res->diffs = NULL;
    res->n = res->ndiffs = 0;
}
