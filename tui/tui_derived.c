/* tui_derived.c — the figures the panels show that are derived from the dashboard's data (tui_model.c): which arm
 * is compared with the reference, throughput, final loss, whether an arm's speed is emulated on the CPU, the
 * verdict (speedup against precision loss), median step time, per-layer times, the header's height. Promise:
 * pure functions of the model, NaN where a figure has no data. */
#include <math.h>
#include <string.h>
#include <strings.h>
#include "step_time.h"
#include "store.h"
#include "tui_internal.h"

int fp_tui_model_low(const fp_tui_model_t *m)
{
    for (int i = 0; i < m->narms; i++)
        if (i != m->ref)
            return i;
    return m->narms > 0 ? 0 : -1;
}

int fp_tui_cmp_arm(const fp_tui_model_t *m, const fp_tui_ui_t *ui)
{
    int n = m->narms - 1;
    if (n < 1)
        return fp_tui_model_low(m);
    int k = ((ui ? ui->arm : 0) % n + n) % n;
    for (int i = 0; i < m->narms; i++)
        if (i != m->ref && k-- == 0)
            return i;
    return fp_tui_model_low(m);
}

double fp_tui_arm_thr(const fp_tui_arm_t *a)
{
    double ns = a->median_ns;
    return a->run.batch_size > 0 && ns > 0 ? (double)a->run.batch_size * 1e9 / ns : NAN;
}

double fp_tui_arm_final_loss(const fp_tui_arm_t *a)
{
    int64_t want = a->nsteps / 20, got = 0, used = 0;
    want = want < 1 ? 1 : want > 50 ? 50 : want;
    double sum = 0;
    for (int64_t i = a->nsteps; i-- > 0 && got < want;) {
        if (a->skips[i])
            continue;
        got++;
        if (isfinite(a->losses[i]))
            sum += a->losses[i], used++;
    }
    return used ? sum / (double)used : NAN;
}

int fp_tui_arm_emulated(const fp_tui_arm_t *a)
{
    const char *d = a->run.device;
    if (strncasecmp(d, "cpu", 3) == 0)   /* the trainer writes "cpu: <model>" / "cuda: <GPU name>" */
        return 1;
    if (strncasecmp(d, "cuda", 4) == 0)
        return 0;
    static const char *const gpu[] = {"nvidia", "gpu", "tesla", "geforce", "quadro", "radeon", "rtx"};
    for (const char *p = d; *p; p++)
        for (size_t i = 0; i < sizeof gpu / sizeof *gpu; i++)
            if (strncasecmp(p, gpu[i], strlen(gpu[i])) == 0)
                return 0;
    return 1;
}

void fp_tui_verdict(const fp_tui_model_t *m, int arm, fp_tui_verdict_t *v)
{
    const fp_tui_arm_t *a = &m->arm[arm], *R = &m->arm[m->ref];
    v->speedup = arm == m->ref ? NAN : fp_step_speedup(R->median_ns, a->median_ns);
    v->loss_gap = fp_tui_arm_final_loss(a) - fp_tui_arm_final_loss(R);
    v->top1_gap = 100.0 * (a->val_top1 - R->val_top1);
    v->top1_lo = a->val_lo;
    v->top1_hi = a->val_hi;
    v->within = arm != m->ref && isfinite(a->val_lo) && isfinite(R->val_lo) && a->val_lo <= R->val_hi &&
                R->val_lo <= a->val_hi;
    v->lost_pct = a->lost_n ? a->lost_sum / a->lost_n : NAN;
    v->lost_n = a->lost_n;
    v->skipped = a->skipped_total;
    v->steps = a->nsteps;
}

int fp_tui_any_ranks(const fp_tui_model_t *m)
{
    for (int i = 0; i < m->narms; i++)
        if (m->arm[i].ranks > 0)
            return 1;
    return 0;
}

int fp_tui_header_lines(const fp_tui_model_t *m, int w)
{
    (void)w;
    if (m->note[0])
        return 2;
    int dist = fp_tui_any_ranks(m);
    if (m->narms < 2)
        return 2 + dist;
    return 2 + 1 + (m->narms - 1) + dist;   /* the title line (with the CPU note), one line per compared arm */
}

double fp_tui_arm_median_wall(const fp_tui_arm_t *a)
{
    return a->median_ns;
}

double fp_tui_layer_ns(const fp_tui_arm_t *a, int layer, int phase)
{
    size_t k = (size_t)layer * FP_PHASE_COUNT + (size_t)phase;
    if (k < a->nlsum && a->lsum[k].layer == layer && a->lsum[k].phase == phase)
        return a->lsum[k].mean_ns;
    for (size_t i = 0; i < a->nlsum; i++)
        if (a->lsum[i].layer == layer && a->lsum[i].phase == phase)
            return a->lsum[i].mean_ns;
    return NAN;
}

int fp_tui_any_running(const fp_tui_model_t *m)
{
    for (int i = 0; i < m->narms; i++)
        if (strcmp(m->arm[i].status.status, "running") == 0 && !m->arm[i].status.stale)
            return 1;
    return 0;
}
