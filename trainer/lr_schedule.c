/* lr_schedule.c — closed forms of PyTorch's StepLR, CosineAnnealingLR and LinearLR warmup
 * (torch/optim/lr_scheduler.py, _get_closed_form_lr), evaluated in double. */
#include "lr_schedule.h"

#include <math.h>
#include <string.h>

#include "error.h"

static const char *const kind_names[FP_LR_KIND_COUNT] = { "constant", "step", "cosine" };

const char *fp_lr_schedule_name(fp_lr_kind kind)
{
    return (unsigned)kind < FP_LR_KIND_COUNT ? kind_names[kind] : "?";
}

int fp_lr_schedule_parse(const char *name, fp_lr_kind *out)
{
    for (int k = 0; k < FP_LR_KIND_COUNT; k++) {
        if (name && strcmp(name, kind_names[k]) == 0) {
            *out = (fp_lr_kind)k;
            return FP_OK;
        }
    }
    return fp_fail(FP_EINVAL, "unknown learning-rate schedule '%s' (valid: constant, step, cosine)",
                   name ? name : "");
}

void fp_lr_schedule_default(fp_lr_schedule *s, fp_lr_kind kind, double base_lr)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->base_lr = base_lr;
    s->step_size = 30;
    s->gamma = 0.1;
    s->t_max = 1;
    s->eta_min = 0.0;
    s->warmup_steps = 0;
    s->warmup_start_factor = 1.0 / 3.0;
}

static int finite_nonneg(double x)
{
    return x >= 0 && !isinf(x);   /* false for NaN too */
}

int fp_lr_schedule_check(const fp_lr_schedule *s)
{
    if (!s)
        return fp_fail(FP_EINVAL, "lr schedule: none given");
    if ((unsigned)s->kind >= FP_LR_KIND_COUNT)
        return fp_fail(FP_EINVAL, "lr schedule: unknown kind %d (valid: constant, step, cosine)", (int)s->kind);
    const char *nm = fp_lr_schedule_name(s->kind);
    if (!finite_nonneg(s->base_lr))
        return fp_fail(FP_EINVAL, "lr schedule %s: invalid learning rate: %g (must be finite and >= 0)",
                       nm, s->base_lr);
    if (s->kind == FP_LR_STEP) {
        if (s->step_size < 1)
            return fp_fail(FP_EINVAL, "lr schedule step: invalid step_size %lld (must be >= 1)",
                           (long long)s->step_size);
        if (!finite_nonneg(s->gamma))
            return fp_fail(FP_EINVAL, "lr schedule step: invalid gamma %g (must be finite and >= 0)", s->gamma);
    }
    if (s->kind == FP_LR_COSINE) {
        if (s->t_max < 1)
            return fp_fail(FP_EINVAL, "lr schedule cosine: invalid T_max %lld (must be >= 1)", (long long)s->t_max);
        if (!finite_nonneg(s->eta_min))
            return fp_fail(FP_EINVAL, "lr schedule cosine: invalid eta_min %g (must be finite and >= 0)",
                           s->eta_min);
    }
    if (s->warmup_steps < 0)
        return fp_fail(FP_EINVAL, "lr schedule %s: invalid warmup steps %lld (must be >= 0)", nm,
                       (long long)s->warmup_steps);
    if (s->warmup_steps > 0 && !(s->warmup_start_factor > 0 && s->warmup_start_factor <= 1))
        return fp_fail(FP_EINVAL, "lr schedule %s: invalid warmup start factor %g (must be in (0, 1])", nm,
                       s->warmup_start_factor);
    return FP_OK;
}

double fp_lr_at(const fp_lr_schedule *s, int64_t t)
{
    if (t < 0)
        t = 0;
    const double base = s->base_lr;
    if (t < s->warmup_steps) {
        /* LinearLR closed form, end_factor 1. */
        const double f = s->warmup_start_factor;
        return base * (f + (1.0 - f) * (double)t / (double)s->warmup_steps);
    }
    const int64_t u = t - s->warmup_steps;
    switch (s->kind) {
    case FP_LR_STEP:
        return base * pow(s->gamma, (double)(u / s->step_size));
    case FP_LR_COSINE:
        return s->eta_min + (base - s->eta_min) * (1.0 + cos(M_PI * (double)u / (double)s->t_max)) / 2.0;
    case FP_LR_CONSTANT:
    default:
        return base;
    }
}
