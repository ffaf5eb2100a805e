/* compare_progress.c — the training loop's progress lines (compare.h's fp_compare_progress, a callback:
 * nothing here prints): an arm's step at most every progress_interval_s (and its last), an evaluation just
 * finished, an arm that failed; the speedup against the reference after the warm-up steps and the time left.
 * Promise: a figure not known yet is NaN, never 0. */
#include "config.h"
#include <math.h>
#include "clock.h"
#include "error.h"
#include "store.h"
#include "trainer/run/compare_internal.h"

static double speedup_so_far(const fp_compare *c, int i)
{
    const arm_state *a = &c->arms[i], *r = &c->arms[c->ref];
    if (a->timed_steps == 0 || r->timed_steps == 0)
        return NAN;
    return (r->timed_ns / (double)r->timed_steps) / (a->timed_ns / (double)a->timed_steps);
}

static double eta_s(const fp_compare *c, double elapsed)
{
    int64_t done = 0, left = 0;
    for (int i = 0; i < c->narms; i++) {
        if (!c->arms[i].arm)
            continue;
        int64_t t = fp_arm_iteration(c->arms[i].arm);
        done += c->arms[i].steps_here;
        if (c->arms[i].active && t < c->cfg.base.steps)
            left += c->cfg.base.steps - t;
    }
    return done ? elapsed / (double)done * (double)left : NAN;
}

void fp_cmp_progress_step(fp_compare *c, const fp_compare_result *res, int i, const fp_arm_step_result *r,
                          int64_t step_no, double t0)
{
    arm_state *a = &c->arms[i];
    const fp_compare_arm_result *ar = &res->arms[i];
    double now = fp_clock_mono_s();
    const fp_compare_config *cf = &c->cfg;
    if (cf->progress && (cf->progress_interval_s <= 0 || a->last_report < 0 ||
                         now - a->last_report >= cf->progress_interval_s || step_no == cf->base.steps)) {
        fp_compare_progress p = {.arm = i, .policy = a->policy, .step = step_no, .steps = cf->base.steps,
                                 .loss = r->loss, .lr = r->lr, .scale = r->next_scale,
                                 .images_per_s = a->ns_since > 0 ? a->images_since / (a->ns_since * 1e-9) : NAN,
                                 .speedup = speedup_so_far(c, i), .elapsed_s = now - t0, .eta_s = eta_s(c, now - t0),
                                 .skipped = ar->skipped, .val_loss = NAN, .val_top1 = NAN, .val_top5 = NAN};
        fp_store_status_t ss;
        if (c->store && fp_store_status(c->store, &ss) == FP_OK && ss.state == FP_STORE_WAITING) {
            p.store_wait_s = ss.waiting_s > 0 ? ss.waiting_s : 1e-3;
            p.store_patience_s = ss.patience_s;
        }
        cf->progress(&p, cf->progress_user);
        a->last_report = now;
        a->images_since = 0;
        a->ns_since = 0;
    }
}

void fp_cmp_progress_eval(fp_compare *c, const fp_compare_result *res, int i, int64_t step, double t0)
{
    const arm_state *a = &c->arms[i];
    const fp_compare_arm_result *ar = &res->arms[i];
    if (c->cfg.progress) {
        fp_compare_progress p = {.arm = i, .policy = a->policy, .step = step, .steps = c->cfg.base.steps,
                                 .loss = ar->last_loss, .speedup = speedup_so_far(c, i),
                                 .elapsed_s = fp_clock_mono_s() - t0, .eta_s = NAN, .skipped = ar->skipped,
                                 .is_eval = 1, .val_loss = ar->val_loss, .val_top1 = ar->val_top1,
                                 .val_top5 = ar->val_top5};
        c->cfg.progress(&p, c->cfg.progress_user);
    }
}

void fp_cmp_progress_failed(fp_compare *c, const fp_compare_result *res, int i)
{
    const arm_state *a = &c->arms[i];
    const fp_compare_arm_result *ar = &res->arms[i];
    if (c->cfg.progress) {
        fp_compare_progress p = {.arm = i, .policy = a->policy, .step = ar->steps_done, .steps = c->cfg.base.steps,
                                 .loss = ar->last_loss, .speedup = NAN, .val_loss = NAN, .val_top1 = NAN,
                                 .val_top5 = NAN, .failed = 1, .message = ar->message};
        c->cfg.progress(&p, c->cfg.progress_user);
    }
}
