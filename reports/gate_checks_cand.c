/* gate_checks_cand.c — each candidate arm's checks (gate.h): status, speedup, loss gap, accuracy drop, skipped
 * steps, overflow, lost updates; loss and accuracy also against the baseline's arm (vs_base). Promise: noise
 * alone never fails a check, and GradScaler's calibration is never counted as skipped steps. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "gate_checks.h"
#include "units.h"

static int on_cpu(const fp_arm_t *a)
{
    return a->run.device[0] == '\0' || strncasecmp(a->run.device, "cpu", 3) == 0;
}

void fp_gc_status(fp_gc_acc_t *c, const fp_arm_t *a)
{
    const fp_run_row_t *r = &a->run;
    if (strcmp(r->status, "finished") == 0 && !r->stale) {
        fp_gc_add(c, "status", fp_gc_label(a), FP_CHECK_PASS, NAN, NAN, "", "run %lld finished, %zu steps", (long long)r->id,
                  a->nsteps);
        return;
    }
    const char *why = strcmp(r->status, "failed") == 0        ? "failed"
                      : strcmp(r->status, "interrupted") == 0 ? "was interrupted or killed"
                      : strcmp(r->status, "running") == 0     ? (r->stale ? "is stale: recorded as running, its writer "
                                                                            "silent or gone"
                                                                          : "is still running")
                                                              : r->status;
    fp_gc_add(c, "status", fp_gc_label(a), FP_CHECK_FAIL, NAN, NAN, "", "run %lld %s after %zu steps%s%s; only finished runs pass",
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
void fp_gc_loss(fp_gc_acc_t *c, const char *kind, const fp_arm_t *a, const fp_arm_t *r, const char *rname,
                int vs_base)
{
    const fp_gate_opts_t *o = c->o;
    if (a->nsteps == 0 || r->nsteps == 0) {
        fp_gc_add(c, kind, fp_gc_label(a), FP_CHECK_INCONCLUSIVE, NAN, o->max_loss_gap, "loss", "no steps to take a final loss from");
        return;
    }
    if (isnan(r->final_loss)) {
        fp_gc_add(c, kind, fp_gc_label(a), FP_CHECK_SKIP, NAN, o->max_loss_gap, "loss", "%s has no finite final loss", rname);
        return;
    }
    if (isnan(a->final_loss)) {
        fp_gc_stats(fp_gc_add(c, kind, fp_gc_label(a), FP_CHECK_FAIL, NAN, o->max_loss_gap, "loss",
                    "no finite final loss (diverged?) vs %.4f for %s", r->final_loss, rname),
                    r->final_loss, NAN);
        return;
    }
    fp_gate_derived_t da, dr;
    fp_gate_derive(a, &da);
    fp_gate_derive(r, &dr);
    double gap = a->final_loss - r->final_loss, se = sqrt(da.loss_se * da.loss_se + dr.loss_se * dr.loss_se);
    double p = isnan(se) ? NAN : se > 0 ? fp_normal_upper(gap / se) : gap > 0 ? 0 : 1;
    fp_check_status st = fp_gc_judge(gap, o->max_loss_gap, p, o->alpha);
    char sn[200];
    seed_note(a, r, vs_base, &st, sn, sizeof sn);
    char ps[64] = "";
    if (isnan(se))
        snprintf(ps, sizeof ps, "; noise unknown (fewer than 2 losses in a window)");
    else
        snprintf(ps, sizeof ps, "; p = %.3g (alpha %.3g)", p, o->alpha);
    fp_gc_stats(fp_gc_add(c, kind, fp_gc_label(a), st, gap, o->max_loss_gap, "loss",
                "final loss %.4f +- %.4f vs %.4f +- %.4f for %s (means of the last %zu / %zu steps +- standard "
                  "error): %+.4f, limit %.4f%s%s%s",
                  a->final_loss, da.loss_se, r->final_loss, dr.loss_se, rname, da.loss_n, dr.loss_n, gap,
                  o->max_loss_gap, ps, sn[0] ? "" : fp_gc_verdict_words(st), sn),
              r->final_loss, p);
}

/* Validation top-1 of a against r: a drop in points, judged on the evaluated images. */
void fp_gc_acc(fp_gc_acc_t *c, const char *kind, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_arm_t *r,
               const fp_gate_extra_t *xr, const char *rname, int vs_base)
{
    const fp_gate_opts_t *o = c->o;
    if (isnan(a->val_top1) || isnan(r->val_top1)) {
        fp_gc_add(c, kind, fp_gc_label(a), FP_CHECK_SKIP, NAN, o->max_acc_drop, "points", "no validation top-1 on both (%s, %s)",
                  fp_gc_label(a), rname);
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
    fp_check_status st = fp_gc_judge(drop, o->max_acc_drop, p, o->alpha);
    char sn[200];
    seed_note(a, r, vs_base, &st, sn, sizeof sn);
    char ps[320];
    if (isnan(p))
        snprintf(ps, sizeof ps, "; images evaluated: %s", xa && xa->eval_from[0] ? xa->eval_from : "unknown");
    else
        snprintf(ps, sizeof ps, "; two-proportion p = %.3g (alpha %.3g); images: %s", p, o->alpha, xa->eval_from);
    fp_gc_stats(fp_gc_add(c, kind, fp_gc_label(a), st, drop, o->max_acc_drop, "points",
                "val top-1 %.2f%%%s vs %.2f%%%s for %s: drop %.2f pt, limit %.2f pt%s%s%s", 100 * a->val_top1, ia,
                100 * r->val_top1, ir, rname, drop, o->max_acc_drop,
                sn[0] ? ""
                  : st == FP_CHECK_INCONCLUSIVE && isnan(p) ? ": above the limit, image count unknown"
                                                            : fp_gc_verdict_words(st),
                  ps, sn),
              100 * r->val_top1, p);
}

void fp_gc_skipped(fp_gc_acc_t *c, const fp_arm_t *a)
{
    const fp_gate_opts_t *o = c->o;
    fp_gate_derived_t d;
    fp_gate_derive(a, &d);
    if (d.steps_after <= 0) {
        fp_gc_add(c, "skipped", fp_gc_label(a), FP_CHECK_INCONCLUSIVE, NAN, 100 * o->max_skip_rate, "percent", "no steps");
        return;
    }
    double rate = (double)d.skips_after / (double)d.steps_after;
    char calib[160] = "", b1[FP_UNIT_BUF], b2[FP_UNIT_BUF];
    if (d.calib_skips)
        snprintf(calib, sizeof calib, "; %lld calibration skips apart (loss scale %s -> %s%s)", (long long)d.calib_skips,
                 fp_fmt_num(b1, d.scale_first, 0), fp_fmt_num(b2, d.scale_settled, 0),
                 d.probe_skips ? ", and after scale increases" : "");
    fp_gc_add(c, "skipped", fp_gc_label(a), rate <= o->max_skip_rate ? FP_CHECK_PASS : FP_CHECK_FAIL, 100 * rate,
              100 * o->max_skip_rate, "percent", "%lld of %lld steps skipped after calibration (%.2f%%, limit %.2f%%)%s",
              (long long)d.skips_after, (long long)d.steps_after, 100 * rate, 100 * o->max_skip_rate, calib);
}


void fp_gc_overflow(fp_gc_acc_t *c, const fp_arm_t *a)
{
    int64_t n = fp_gc_overflow_count(a);
    fp_gc_add(c, "overflow", fp_gc_label(a), n <= c->o->max_overflows ? FP_CHECK_PASS : FP_CHECK_FAIL, (double)n,
              (double)c->o->max_overflows, "count",
              "%lld activation/weight values overflow %s, %lld NaN/Inf among them, %lld NaN events (limit %lld)%s",
              (long long)a->fwd_overflow, a->run.policy, (long long)a->fwd_nonfinite, (long long)a->nan_events,
              (long long)c->o->max_overflows, a->nnumerics ? "" : "; no histograms recorded");
}

void fp_gc_lost(fp_gc_acc_t *c, const fp_arm_t *a, const fp_gate_extra_t *xa, const fp_gate_extra_t *xr,
                const char *rname)
{
    double limit = c->o->max_lost_updates;
    if (!xa || !xa->lost_samples) {
        fp_gc_add(c, "lost_updates", fp_gc_label(a), FP_CHECK_SKIP, NAN, limit, "percent",
                  "no lost-update measurement (the parameter pass runs with the histograms: --hist-every)");
        return;
    }
    char ref[96] = "";
    if (xr && xr->lost_samples)
        snprintf(ref, sizeof ref, "; %s %.4g%%", rname, xr->lost_pct);
    fp_gc_stats(fp_gc_add(c, "lost_updates", fp_gc_label(a), xa->lost_pct <= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, xa->lost_pct,
                limit, "percent",
                "%.4g%% of the weights with a nonzero gradient left unchanged (mean of %d sampled step%s, largest "
                  "%.4g%%), limit %.4g%%%s",
                  xa->lost_pct, xa->lost_samples, xa->lost_samples == 1 ? "" : "s", xa->lost_max, limit, ref),
              xr && xr->lost_samples ? xr->lost_pct : NAN, NAN);
}

void fp_gc_speedup(fp_gc_acc_t *c, const fp_arm_t *a, const fp_arm_t *R)
{
    const fp_gate_opts_t *o = c->o;
    char b1[FP_UNIT_BUF], b2[FP_UNIT_BUF], b3[FP_UNIT_BUF];
    double limit = o->min_speedup;
    if (isnan(limit) && on_cpu(a)) {
        fp_gc_add(c, "speedup", fp_gc_label(a), FP_CHECK_SKIP, a->speedup, NAN, "x",
                  "speedup %s over %s; not checked on the CPU (low precision is emulated) without --min-speedup",
                  fp_fmt_ratio(b1, a->speedup), fp_gc_label(R));
        return;
    }
    if (isnan(limit))
        limit = 1.0;
    if (a->ntimes < o->min_steps || R->ntimes < o->min_steps)
        fp_gc_add(c, "speedup", fp_gc_label(a), FP_CHECK_INCONCLUSIVE, a->speedup, limit, "x",
                  "too few steps after warm-up: %zu vs %zu for %s (need %zu)", a->ntimes, R->ntimes, fp_gc_label(R), o->min_steps);
    else
        fp_gc_add(c, "speedup", fp_gc_label(a), a->speedup >= limit ? FP_CHECK_PASS : FP_CHECK_FAIL, a->speedup, limit, "x",
                  "speedup %s over %s (median step %s vs %s), minimum %.2fx", fp_fmt_ratio(b1, a->speedup), fp_gc_label(R),
                  fp_fmt_ns(b2, a->median_ns), fp_fmt_ns(b3, R->median_ns), limit);
}

