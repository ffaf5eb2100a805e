/* step_plan.c — the one decision of what a step does besides training (step_plan.h). Promise: the
 * periods are resolved here and nowhere else (FP_AUTO included), and a step's plan depends only on the
 * configuration, its number and the run's length. */
#include "config.h"
#include "probe/probe.h"
#include "trainer/run/step_plan.h"

/* A probe's period: the configured one, or FP_AUTO's default, shortened to a shorter run's length so
 * that it samples once, at its last step. */
static int probe_period(int every, int dflt, int64_t total)
{
    if (every != FP_AUTO)
        return every > 0 ? every : 0;
    return total > 0 && total < dflt ? (int)total : dflt;
}

fp_step_periods fp_step_periods_for(const fp_compare_config *cfg, int64_t total)
{
    fp_step_periods p;
    p.hist = probe_period(cfg->hist_every, FP_PROBE_DEFAULT_HIST_EVERY, total);
    p.error = probe_period(cfg->error_every, FP_PROBE_DEFAULT_PRECISION_EVERY, total);
    p.trace = probe_period(cfg->trace_every, FP_PROBE_DEFAULT_TRACE_EVERY, total);
    int ev = cfg->base.eval_every;
    if (ev == FP_AUTO)
        p.eval = total >= 2 ? (int)(total / 2) : 0;
    else
        p.eval = ev > 0 ? ev : 0;
    p.checkpoint = cfg->base.checkpoint && cfg->base.checkpoint_every > 0 ? cfg->base.checkpoint_every : 0;
    return p;
}

static int every(int64_t step, int64_t period)
{
    return period > 0 && step % period == 0;
}

fp_step_plan fp_step_plan_for(const fp_compare_config *cfg, int64_t step, int64_t total)
{
    fp_step_periods p = fp_step_periods_for(cfg, total);
    fp_step_plan s;
    s.step = step;
    s.last = step == total;
    s.hist = every(step, p.hist);
    s.error = every(step, p.error);
    s.trace = every(step, p.trace);
    s.eval = cfg->base.eval_batches >= 0 && (s.last || every(step, p.eval));
    s.checkpoint = cfg->base.checkpoint && (s.last || every(step, p.checkpoint));
    return s;
}
