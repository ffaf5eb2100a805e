/* test_step_plan.c — the one decision of what a step does (trainer/run/step_plan.c): explicit periods
 * sample at multiples of themselves; FP_AUTO gives the probes their default period (probe.h) and, in a
 * run shorter than it, one sample at the last step; 0 is off; an automatic evaluation period is half the
 * run; the final evaluation and the last checkpoint fall on the last step; eval_batches < 0 and no
 * checkpoint file turn those off. */
#include "config.h"
#include "probe/probe.h"
#include "tap.h"
#include "trainer/run/step_plan.h"

/* The steps in [1, total] whose plan has field `what` set, as a count, and the first / last of them. */
typedef enum { HIST, ERROR, TRACE, EVAL, CKPT } what_t;

static int pick(const fp_step_plan *p, what_t w)
{
    switch (w) {
    case HIST: return p->hist;
    case ERROR: return p->error;
    case TRACE: return p->trace;
    case EVAL: return p->eval;
    default: return p->checkpoint;
    }
}

static int64_t count(const fp_compare_config *c, int64_t total, what_t w, int64_t *first, int64_t *last)
{
    int64_t n = 0;
    *first = *last = 0;
    for (int64_t s = 1; s <= total; s++) {
        fp_step_plan p = fp_step_plan_for(c, s, total);
        if (!pick(&p, w))
            continue;
        if (!n)
            *first = s;
        *last = s;
        n++;
    }
    return n;
}

int main(void)
{
    tap_plan(25);
    fp_compare_config c;
    fp_compare_config_default(&c);
    int64_t f, l, n;

    /* ---- the library's defaults are automatic ---- */
    tap_ok(c.hist_every == FP_AUTO && c.error_every == FP_AUTO && c.trace_every == FP_AUTO,
           "fp_compare_config_default: hist, error and trace every FP_AUTO");

    /* ---- automatic probe periods: the default, or once at the last step of a shorter run ---- */
    fp_step_periods p = fp_step_periods_for(&c, 1000);
    tap_ok(p.hist == FP_PROBE_DEFAULT_HIST_EVERY && p.error == FP_PROBE_DEFAULT_PRECISION_EVERY &&
               p.trace == FP_PROBE_DEFAULT_TRACE_EVERY,
           "1000 steps: the default periods (hist %d, error %d, trace %d)", p.hist, p.error, p.trace);
    n = count(&c, 1000, HIST, &f, &l);
    tap_ok(n == 1000 / FP_PROBE_DEFAULT_HIST_EVERY && f == FP_PROBE_DEFAULT_HIST_EVERY && l == 1000,
           "1000 steps: histograms at %lld steps, %lld .. %lld", (long long)n, (long long)f, (long long)l);
    p = fp_step_periods_for(&c, 4);
    tap_ok(p.hist == 4 && p.error == 4 && p.trace == 4, "4 steps: every period shortened to 4 (%d, %d, %d)", p.hist,
           p.error, p.trace);
    for (what_t w = HIST; w <= TRACE; w++) {
        static const char *const nm[] = {"histograms", "rounding error", "kernel trace"};
        n = count(&c, 4, w, &f, &l);
        tap_ok(n == 1 && l == 4, "4 steps: %s once, at step 4 (%lld times, last %lld)", nm[w], (long long)n,
               (long long)l);
    }
    n = count(&c, 80, HIST, &f, &l);
    tap_ok(n == 1 && f == 50, "80 steps: histograms once, at step 50 (the run is longer than the period)");
    n = count(&c, 80, TRACE, &f, &l);
    tap_ok(n == 1 && l == 80, "80 steps: kernel trace once, at step 80 (100 > 80)");
    p = fp_step_periods_for(&c, FP_PROBE_DEFAULT_HIST_EVERY);
    tap_ok(p.hist == FP_PROBE_DEFAULT_HIST_EVERY, "a run exactly the default period long keeps it (%d)", p.hist);
    p = fp_step_periods_for(&c, 0);
    tap_ok(p.hist == FP_PROBE_DEFAULT_HIST_EVERY && p.eval == 0, "0 steps: the default period, no in-run evaluation");

    /* ---- explicit periods are kept, however long the run ---- */
    c.hist_every = 7;
    c.error_every = 0;
    c.trace_every = 2;
    n = count(&c, 2, HIST, &f, &l);
    tap_ok(n == 0 && fp_step_periods_for(&c, 2).hist == 7, "--hist-every 7 over 2 steps: kept, never sampled");
    n = count(&c, 100, ERROR, &f, &l);
    tap_ok(n == 0 && fp_step_periods_for(&c, 100).error == 0, "--error-every 0: off");
    n = count(&c, 12, TRACE, &f, &l);
    tap_ok(n == 6 && f == 2 && l == 12, "--trace-every 2 over 12 steps: steps 2, 4, ..., 12 (%lld)", (long long)n);
    fp_step_plan sp = fp_step_plan_for(&c, 14, 20);
    tap_ok(sp.step == 14 && !sp.last && sp.hist && sp.trace && !sp.error, "step 14 of 20: histograms and trace");

    /* ---- evaluation ---- */
    fp_compare_config_default(&c);
    c.base.eval_every = FP_AUTO;
    p = fp_step_periods_for(&c, 80);
    n = count(&c, 80, EVAL, &f, &l);
    tap_ok(p.eval == 40 && n == 2 && f == 40 && l == 80, "eval every FP_AUTO over 80 steps: half-way and the final one");
    tap_ok(fp_step_periods_for(&c, 1).eval == 0 && count(&c, 1, EVAL, &f, &l) == 1 && l == 1,
           "FP_AUTO over 1 step: only the final evaluation");
    c.base.eval_every = 0;
    n = count(&c, 30, EVAL, &f, &l);
    tap_ok(n == 1 && l == 30, "eval every 0: the final evaluation only, at step 30");
    c.base.eval_every = 3;
    n = count(&c, 7, EVAL, &f, &l);
    tap_ok(n == 3 && f == 3 && l == 7, "eval every 3 over 7 steps: steps 3, 6 and the final 7 (%lld)", (long long)n);
    sp = fp_step_plan_for(&c, 7, 7);
    tap_ok(sp.last && sp.eval, "the last step is marked last and evaluates");
    c.base.eval_batches = -1;
    tap_ok(count(&c, 7, EVAL, &f, &l) == 0, "eval_batches < 0: no evaluation at all");
    sp = fp_step_plan_for(&c, 0, 0);
    c.base.eval_batches = 0;
    fp_step_plan sp0 = fp_step_plan_for(&c, 0, 0);
    tap_ok(!sp.eval && sp0.last && sp0.eval, "a run of 0 steps: its final evaluation is at step 0");

    /* ---- checkpoints ---- */
    c.base.checkpoint_every = 4;
    tap_ok(count(&c, 10, CKPT, &f, &l) == 0 && fp_step_periods_for(&c, 10).checkpoint == 0,
           "no checkpoint file: no checkpoint, whatever the period");
    c.base.checkpoint = "ck.safetensors";
    n = count(&c, 10, CKPT, &f, &l);
    tap_ok(n == 3 && f == 4 && l == 10, "every 4 over 10 steps: 4, 8 and the last (%lld)", (long long)n);
    c.base.checkpoint_every = 0;
    n = count(&c, 10, CKPT, &f, &l);
    tap_ok(n == 1 && l == 10, "checkpoint_every 0: at the end only");
    return tap_done();
}
