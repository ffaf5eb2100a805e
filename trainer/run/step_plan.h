/* step_plan.h — what one training step does besides training: histograms, rounding error, kernel trace,
 * evaluation, checkpoint. Promise: fp_step_plan_for is the only place that decides it; the loop asks once
 * per step and hands the answer to every part (the probes, the riding error, evaluation, checkpoints). */
#ifndef FP_STEP_PLAN_H
#define FP_STEP_PLAN_H

#include <stdint.h>
#include "trainer/run/compare.h"

/* The periods of a run of total_steps steps, resolved from the configuration (0: never):
 *  hist, error, trace  the configured period, or for FP_AUTO the default (probe.h's FP_PROBE_DEFAULT_*)
 *                      or, in a run shorter than the default, the run's length: one sample, at its last
 *                      step (a short run's probe overhead stays about the default's);
 *  eval                in-run evaluations: the configured period, or for FP_AUTO total_steps / 2 (0 in a
 *                      run of fewer than 2 steps); the final evaluation does not depend on it;
 *  checkpoint          base.checkpoint_every when base.checkpoint is set, else 0. */
typedef struct {
    int hist, error, trace, eval;
    int64_t checkpoint;
} fp_step_periods;

fp_step_periods fp_step_periods_for(const fp_compare_config *cfg, int64_t total_steps);

/* Step `step` (1-based) of a run of total_steps. */
typedef struct {
    int64_t step;
    int last;          /* the run's last step (step == total_steps) */
    int hist;          /* every layer's exponent histograms, the parameter pass and its lost-update event */
    int error;         /* each low-precision arm's per-layer rounding error against the fp32 arm */
    int trace;         /* kernel rows of a device arm (CUPTI) */
    int eval;          /* a validation pass after the step: every eval period before the last step, and the
                        * final one at the last step (never when base.eval_batches < 0) */
    int checkpoint;    /* a checkpoint after the step: every checkpoint period, and at the last step */
} fp_step_plan;

/* The plan of one step: the period rule (step % period == 0) of fp_step_periods_for's periods, the
 * last step's evaluation and checkpoint. What an arm cannot do (no histogram probe, no fp32 reference,
 * no validation split, a CPU arm's trace) it leaves undone. */
fp_step_plan fp_step_plan_for(const fp_compare_config *cfg, int64_t step, int64_t total_steps);

#endif
