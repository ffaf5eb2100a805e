/* cpu_timer.c — per-layer, per-phase CPU wall time (CLOCK_MONOTONIC) accumulated over a step.
 * Promises: after step_end, one row per (layer, phase) that ran, time_ns > 0 and kernels = the
 * number of layer calls accumulated; no allocation per step. */
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "error.h"
#include "probe/probe.h"

typedef struct {
    int64_t ns;
    int32_t calls;
} acc_t;

struct fp_cpu_timer {
    int nlayers;
    acc_t *acc;              /* [nlayers][FP_PHASE_COUNT] */
    int64_t *t0;             /* start of the open call per (layer, phase) */
    fp_layer_time_t *rows;   /* the last finished step */
    size_t nrows;
    int64_t step_t0, step_ns;
};

int fp_cpu_timer_create(fp_cpu_timer **out, int nlayers)
{
    *out = NULL;
    if (nlayers < 1)
        return fp_fail(FP_EINVAL, "cpu timer: %d layers", nlayers);
    fp_cpu_timer *t = calloc(1, sizeof *t);
    size_t cells = (size_t)nlayers * FP_PHASE_COUNT;
    if (!t || !(t->acc = calloc(cells, sizeof *t->acc)) || !(t->t0 = calloc(cells, sizeof *t->t0)) ||
        !(t->rows = calloc(cells, sizeof *t->rows))) {
        fp_cpu_timer_free(t);
        return fp_fail(FP_ENOMEM, "cpu timer: out of memory");
    }
    t->nlayers = nlayers;
    t->step_ns = -1;
    *out = t;
    return FP_OK;
}

void fp_cpu_timer_free(fp_cpu_timer *t)
{
    if (!t)
        return;
    free(t->acc);
    free(t->t0);
    free(t->rows);
    free(t);
}

static unsigned timer_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)step;
    (void)loss_scale;
    fp_cpu_timer *t = self;
    memset(t->acc, 0, (size_t)t->nlayers * FP_PHASE_COUNT * sizeof *t->acc);
    t->step_t0 = fp_clock_mono_ns();
    return 0;
}

static void timer_step_end(void *self, int64_t step)
{
    (void)step;
    fp_cpu_timer *t = self;
    t->step_ns = fp_clock_mono_ns() - t->step_t0;
    size_t n = 0;
    for (int l = 0; l < t->nlayers; l++)
        for (int ph = 0; ph < FP_PHASE_COUNT; ph++) {
            const acc_t *a = &t->acc[(size_t)l * FP_PHASE_COUNT + ph];
            if (!a->calls)
                continue;
            t->rows[n++] = (fp_layer_time_t){l, ph, a->ns > 0 ? a->ns : 1, a->calls};
        }
    t->nrows = n;
}

static void timer_layer_begin(void *self, int layer, fp_phase phase)
{
    fp_cpu_timer *t = self;
    if (layer >= 0 && layer < t->nlayers && (unsigned)phase < FP_PHASE_COUNT)
        t->t0[(size_t)layer * FP_PHASE_COUNT + phase] = fp_clock_mono_ns();
}

static void timer_layer_end(void *self, int layer, fp_phase phase)
{
    fp_cpu_timer *t = self;
    if (layer < 0 || layer >= t->nlayers || (unsigned)phase >= FP_PHASE_COUNT)
        return;
    size_t k = (size_t)layer * FP_PHASE_COUNT + phase;
    t->acc[k].ns += fp_clock_mono_ns() - t->t0[k];
    t->acc[k].calls++;
}

static const fp_probe_ops timer_ops = {"cpu_timer", timer_step_begin, timer_step_end, timer_layer_begin,
                                       timer_layer_end, NULL};

int fp_cpu_timer_attach(fp_cpu_timer *t, fp_probe *p) { return fp_probe_add(p, &timer_ops, t); }

size_t fp_cpu_timer_rows(const fp_cpu_timer *t, const fp_layer_time_t **rows)
{
    if (rows)
        *rows = t->rows;
    return t->nrows;
}

int64_t fp_cpu_timer_step_ns(const fp_cpu_timer *t) { return t->step_ns; }

int64_t fp_cpu_timer_phase_ns(const fp_cpu_timer *t, int phase)
{
    int64_t s = 0;
    for (size_t i = 0; i < t->nrows; i++)
        if (phase < 0 || t->rows[i].phase == phase)
            s += t->rows[i].time_ns;
    return s;
}
