/* summary_print.c — the precision part of the end-of-run summary (summary.h fp_summary_print_precision): per
 * arm the headline layers, counts per role with flushed zeros, lost updates, accuracy intervals and notes.
 * Promise: every figure is the summary's, so text, reports and gate never disagree; not measured says n/a. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include "store.h"
#include "summary.h"
#include "units.h"

static const char *const role_names[FP_SUMMARY_ROLES] = {"activations", "activation gradients", "weights",
                                                         "weight gradients", "updates"};

static void print_tops(FILE *f, const fp_top_layer_t *t, int n)
{
    if (n == 0)
        fprintf(f, " none");
    for (int k = 0; k < n; k++)
        fprintf(f, "%s %s (%" PRId64 ")", k ? "," : "", t[k].name, t[k].count);
}

/* Host CPU per step, per arm, with what it holds on the arm's device; one line when no arm recorded it. */
static void print_host_cpu(FILE *f, const fp_summary_t *s)
{
    int any = 0;
    for (size_t i = 0; i < s->narms; i++)
        any |= s->arms[i].nhost_cpu > 0;
    if (!any) {
        fprintf(f, "  %-22s n/a (not recorded)\n", "host CPU / step");
        return;
    }
    fprintf(f, "  host CPU / step (the training thread's CPU time, median over the timed steps; share of the step's "
               "wall time)\n");
    char b[FP_UNIT_BUF];
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fprintf(f, "    %-12s %s", a->run.policy, fp_summary_fmt_host_cpu(b, a));
        if (a->nhost_cpu)
            fprintf(f, "; %s", fp_summary_host_cpu_note(a));
        fprintf(f, "\n");
    }
}

void fp_summary_print_precision(FILE *f, const fp_summary_t *s)
{
    int any = 0;
    int64_t nsteps = 0;
    for (size_t i = 0; i < s->narms; i++) {
        any |= s->arms[i].nnumerics > 0;
        nsteps = s->arms[i].hist_steps > nsteps ? s->arms[i].hist_steps : nsteps;
    }
    for (int over = 1; over >= 0; over--) {
        const char *what = over ? "most overflow" : "most underflow";
        if (!any) {
            fprintf(f, "  %-22s n/a (no histograms sampled)\n", what);
            continue;
        }
        fprintf(f, "  %s (sums over %" PRId64 " sampled steps; %sactivation and weight gradients, and weights and "
                   "updates of arms without fp32 master weights)\n", what, nsteps, over ? "activations, " : "");
        for (size_t i = 0; i < s->narms; i++) {
            const fp_arm_t *a = &s->arms[i];
            fprintf(f, "    %-12s", a->run.policy);
            if (a->nnumerics == 0) {
                fprintf(f, " n/a (no histograms sampled)\n");
                continue;
            }
            print_tops(f, over ? a->top_over : a->top_under, over ? a->ntop_over : a->ntop_under);
            if (a->fmt < 0)
                fprintf(f, "   [would be, in %s]", a->fmt_shown == 0 ? "fp16" : "its format");
            fprintf(f, "\n");
            /* per role: the total, and of underflow the zeros flushed beyond the reference's */
            fprintf(f, "    %-12s", "");
            int first = 1;
            for (int role = 0; role < FP_SUMMARY_ROLES; role++) {
                int64_t v = over ? a->over_role[role] : a->under_role[role];
                int matters = fp_summary_role_matters(a, role, over);
                if (!matters && v == 0)
                    continue;
                fprintf(f, "%s%s %" PRId64, first ? " " : "; ", role_names[role], v);
                if (!over && a->flushed_role[role] > 0)
                    fprintf(f, " (%" PRId64 " flushed to zero: zeros beyond %s's)", a->flushed_role[role],
                            s->arms[s->ref].run.policy);
                if (!matters)
                    fprintf(f, role == FP_ROLE_ACTIVATION ? " [not in the headline]"
                                                          : " [fp32 master weights: not in the headline]");
                first = 0;
            }
            fprintf(f, "\n");
        }
    }
    fprintf(f, "  lost updates (%% of the weights with a nonzero gradient left unchanged, mean over sampled steps)\n");
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        fprintf(f, "    %-12s", a->run.policy);
        if (a->lost_samples == 0)
            fprintf(f, " n/a (not measured)\n");
        else
            fprintf(f, " %.4g%% (max %.4g%%, over %d sampled steps)\n", a->lost_pct, a->lost_max, a->lost_samples);
    }
    for (size_t i = 0; i < s->narms; i++) {
        const fp_arm_t *a = &s->arms[i];
        if (a->is_ref || isnan(a->top1_gap))
            continue;
        if (a->val_images > 0)
            fprintf(f, "  %s: val top-1 %.2f%% (95%% CI %.2f..%.2f%%, n=%" PRId64 "), gap %+.2f pt%s\n", a->run.policy,
                    100 * a->val_top1, 100 * a->val_top1_lo, 100 * a->val_top1_hi, a->val_images, a->top1_gap,
                    a->top1_gap_within ? ": within the uncertainty (no difference shown)" : "");
        else
            fprintf(f, "  %s: top-1 gap %+.2f pt: sample size not recorded, no interval\n", a->run.policy, a->top1_gap);
    }
    for (size_t i = 0; i < s->narms; i++)
        if (s->arms[i].energy_why[0])
            fprintf(f, "  %s: energy n/a: %s\n", s->arms[i].run.policy, s->arms[i].energy_why);
    for (size_t i = 0; i < s->narms; i++)
        if (s->arms[i].emulated) {
            fprintf(f, "  speedups: %s\n", fp_summary_speed_note(&s->arms[i]));
            break;
        }
    print_host_cpu(f, s);
    fprintf(f, "  %s\n", FP_SUMMARY_LOSS_MEANING);
}
