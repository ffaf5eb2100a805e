/* gate_derive.c — what the gate derives from an arm's rows (gate.h fp_gate_derive, gate_checks.h):
 * GradScaler's calibration skips told apart from the skips counted against the rate, the final loss's
 * standard error, and the overflow counts. Promise: calibration is never counted as skipped steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gate_checks.h"
#include "store.h"

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

int64_t fp_gc_overflow_count(const fp_arm_t *a)
{
    return a->fwd_overflow + a->fwd_nonfinite + a->nan_events;
}

/* Activation and weight values histogrammed (what overflow counts are out of). */
double fp_gc_overflow_values(const fp_arm_t *a)
{
    double n = 0;
    for (size_t i = 0; i < a->nnumerics; i++)
        if (a->numerics[i].role == FP_ROLE_ACTIVATION || a->numerics[i].role == FP_ROLE_WEIGHT)
            n += (double)a->numerics[i].count;
    return n;
}
