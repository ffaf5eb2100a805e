/* summary_fmt.c — an arm's figures as every summary writes them (summary.h): validation top-1 and its
 * non-finite note, the loss scale, the CPU speed note and host CPU per step. Promise: one text per figure for
 * the text summary, the HTML report and the CSV alike; not measured reads "n/a" or "-", never 0. */
#include <math.h>
#include <stdio.h>
#include "summary.h"
#include "units.h"

char *fp_summary_fmt_val_top1(char *buf, const fp_arm_t *a)
{
    if (a->val_nonfinite) {
        snprintf(buf, FP_UNIT_BUF, "non-finite");
        return buf;
    }
    return fp_fmt_pct(buf, a->val_top1);
}

int fp_summary_val_note(const fp_arm_t *a, char *buf, size_t n)
{
    if (n)
        buf[0] = 0;
    if (!a->val_nonfinite)
        return 0;
    char pct[FP_UNIT_BUF];
    snprintf(buf, n, "%s: validation at step %lld is non-finite (loss %s): top-1 %s counts NaN predictions as wrong",
             a->run.policy, (long long)a->val_step, isnan(a->val_loss) ? "nan" : a->val_loss > 0 ? "inf" : "-inf",
             fp_fmt_pct(pct, a->val_top1));
    return 1;
}

char *fp_summary_fmt_loss_scale(char *buf, const fp_arm_t *a)
{
    if (!a->has_scaler || isnan(a->final_loss_scale))
        snprintf(buf, FP_UNIT_BUF, "-");
    else
        snprintf(buf, FP_UNIT_BUF, "%g", a->final_loss_scale);
    return buf;
}

const char *fp_summary_speed_note(const fp_arm_t *a)
{
    return a->emulated ? "emulated on the CPU: speed not representative" : "";
}

char *fp_summary_fmt_host_cpu(char *buf, const fp_arm_t *a)
{
    if (!a->nhost_cpu || !isfinite(a->host_cpu_ns)) {
        snprintf(buf, FP_UNIT_BUF, "n/a (not recorded)");
        return buf;
    }
    char t[FP_UNIT_BUF], p[FP_UNIT_BUF];
    snprintf(buf, FP_UNIT_BUF, "%s (%s of the step)", fp_fmt_ns(t, a->host_cpu_ns), fp_fmt_pct(p, a->host_cpu_share));
    return buf;
}

const char *fp_summary_host_cpu_note(const fp_arm_t *a)
{
    return a->emulated ? "CPU backend: includes the training thread's own compute"
                       : "GPU: the host's own work, the wait for the device left out (it sleeps)";
}
