/* lr_schedule.h — learning-rate schedules as closed forms of the optimizer step: constant, step
 * (StepLR), cosine (CosineAnnealingLR) and an optional linear warmup in front (LinearLR chained by
 * SequentialLR); fp_lr_at(s, t) equals PyTorch's lr for step t to double rounding. */
#ifndef FP_LR_SCHEDULE_H
#define FP_LR_SCHEDULE_H

#include <stdint.h>

typedef enum { FP_LR_CONSTANT, FP_LR_STEP, FP_LR_COSINE, FP_LR_KIND_COUNT } fp_lr_kind;

/* The lr used by optimizer step t (0-based; PyTorch: get_last_lr() before the t-th
 * scheduler.step()):
 *   warmup, t < W:  base_lr * (f + (1 - f) * t / W)            LinearLR(start_factor=f, total_iters=W)
 *   then u = t - W (u = t when W = 0) and the main schedule:
 *   constant:       base_lr
 *   step:           base_lr * gamma^floor(u / step_size)        StepLR
 *   cosine:         eta_min + (base_lr - eta_min) * (1 + cos(pi * u / t_max)) / 2
 *                   CosineAnnealingLR; like PyTorch it is not clamped: past t_max it rises again.
 * With warmup this is SequentialLR([LinearLR, main], milestones=[W]), so the main schedule starts
 * over at u = 0 (a cosine over the whole run after warmup has t_max = total_steps - W). */
typedef struct {
    fp_lr_kind kind;
    double base_lr;              /* >= 0 */
    int64_t step_size;           /* step: >= 1 */
    double gamma;                /* step: >= 0 */
    int64_t t_max;               /* cosine: >= 1 */
    double eta_min;              /* cosine: >= 0 */
    int64_t warmup_steps;        /* W >= 0 (0: no warmup) */
    double warmup_start_factor;  /* f in (0, 1] */
} fp_lr_schedule;

/* kind with base_lr and PyTorch's defaults: StepLR gamma 0.1 (step_size 30, which PyTorch does
 * not default), cosine t_max 1 (set it) and eta_min 0, no warmup with start factor 1/3 (LinearLR's
 * default). */
void fp_lr_schedule_default(fp_lr_schedule *s, fp_lr_kind kind, double base_lr);

/* FP_OK, or FP_EINVAL with a message naming the bad field (NaN, negative, out of range). */
int fp_lr_schedule_check(const fp_lr_schedule *s);

/* "constant", "step", "cosine" -> kind; else FP_EINVAL listing the valid choices. */
int fp_lr_schedule_parse(const char *name, fp_lr_kind *out);
const char *fp_lr_schedule_name(fp_lr_kind kind);   /* "?" when invalid */

/* The lr of step t (t < 0 counts as 0) for a schedule that passes fp_lr_schedule_check. */
double fp_lr_at(const fp_lr_schedule *s, int64_t t);

#endif
