/* compare_probes.c — the comparison's probes (compare_internal.h): each arm's probe set, the precision
 * error riding on the fp32 arm's step (a GPU pair: compared on the GPU, its clones' memory in an info event)
 * and the parameter pass riding on each arm's optimizer step,
 * skipped-step details and lost-update events, the GPU probes (NVML energy per turn, the CUPTI tracer
 * re-targeted per turn, NVTX) and a GPU arm's step rows held until its turn's energy is known.
 * Promises: a probe that cannot be had is recorded as unavailable, never as 0; an arm whose probes
 * fail for lack of memory fails alone. */
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "formats.h"
#include "trainer/backend.h"
#include "trainer/run/compare_internal.h"
#include "trainer/model.h"
#ifdef HAVE_CUDA
#include "trainer/backend_cuda.h"
#endif

/* Waits for every op the arm's backend issued (a no-op on the CPU backend). */
static int arm_sync(arm_state *a)
{
    fp_model *m = a->arm ? fp_arm_model(a->arm) : NULL;
    const fp_backend_ops *o = m ? fp_model_backend_ops(m) : NULL;
    return o && o->sync ? o->sync(fp_model_backend(m)) : FP_OK;
}

/* 1 when arm a's step rows wait for the end of its turn: a GPU arm whose energy NVML measures. */
int fp_cmp_defers_steps(const fp_compare *c, const arm_state *a)
{
    return a->gpu && c->store && fp_nvml_available(c->nvml);
}

/* NVML's energy counter after the arm's device finished its work; NaN when either cannot be had. */
double fp_cmp_synced_energy_j(fp_compare *c, arm_state *a)
{
    if (!fp_nvml_available(c->nvml) || arm_sync(a) != FP_OK)
        return NAN;
    return fp_nvml_energy_j(c->nvml);
}

/* Keeps a finished step for the end of the turn (the per-layer times copied: the timer reuses its rows).
 * FP_ENOMEM when it cannot (the caller then records the step now, its energy unmeasured). */
int fp_cmp_defer_step(arm_state *a, const fp_arm_step_result *r, int64_t w0, int64_t w1, const fp_record_step_extra *x)
{
    if (a->npend == a->cap_pend) {
        size_t nc = a->cap_pend ? 2 * a->cap_pend : 8;
        pending_step *p = realloc(a->pend, nc * sizeof *p);
        if (!p)
            return fp_fail(FP_ENOMEM, "out of memory keeping a step row for the end of the turn");
        memset(p + a->cap_pend, 0, (nc - a->cap_pend) * sizeof *p);
        a->pend = p;
        a->cap_pend = nc;
    }
    pending_step *ps = &a->pend[a->npend];
    if (x->ntimes > ps->cap_times) {
        fp_layer_time_t *t = realloc(ps->times, x->ntimes * sizeof *t);
        if (!t)
            return fp_fail(FP_ENOMEM, "out of memory keeping a step's layer times for the end of the turn");
        ps->times = t;
        ps->cap_times = x->ntimes;
    }
    if (x->ntimes)
        memcpy(ps->times, x->times, x->ntimes * sizeof *ps->times);
    ps->ntimes = x->ntimes;
    ps->r = *r;
    ps->w0 = w0;
    ps->w1 = w1;
    ps->has_detail = x->skip_detail != NULL;
    snprintf(ps->detail, sizeof ps->detail, "%s", x->skip_detail ? x->skip_detail : "");
    ps->cycles = x->cycles;
    ps->instructions = x->instructions;
    ps->host_cpu_ns = x->host_cpu_ns;
    a->npend++;
    return FP_OK;
}

/* Writes the arm's waiting step rows, each with the energy NVML counted since the turn began (after a
 * sync, evaluations left out) divided by their number; the next rows count from here. Returns the
 * store's error, if any. */
int fp_cmp_flush_steps(fp_compare *c, arm_state *a)
{
    if (!a->npend)
        return FP_OK;
    double e1 = fp_cmp_synced_energy_j(c, a), per = NAN;
    if (isfinite(e1) && isfinite(a->turn_e0) && e1 >= a->turn_e0)
        per = (e1 - a->turn_e0) / (double)a->npend;
    int rc = FP_OK;
    for (size_t k = 0; k < a->npend && rc == FP_OK; k++) {
        const pending_step *ps = &a->pend[k];
        fp_record_step_extra x = {ps->times, ps->ntimes, per, ps->has_detail ? ps->detail : NULL, ps->cycles,
                                 ps->instructions, ps->host_cpu_ns};
        rc = fp_record_step(c->store, a->run, a->arm, &ps->r, ps->w0, ps->w1, &x);
    }
    a->npend = 0;
    a->turn_e0 = e1;
    return rc;
}

/* An arm's update hook at a sampled step (fp_arm_set_update_hook): the parameter pass with the
 * optimizer run piece by piece inside it. */
int fp_cmp_params_while_stepping(void *ctx, fp_arm *arm, fp_optim *opt)
{
    arm_state *a = ctx;
    fp_model *m = fp_arm_model(arm);
    a->lost_all = fp_probe_sample_params_stepping(a->probe, m, opt, fp_model_grads(m), a->per_layer);
    return FP_OK;
}

/* The reference's forward hook (fp_arm_set_forward_hook): every low-precision arm armed for this step
 * runs its forward on the reference's weights now (fp_prec_err_ride). A failure is kept for the
 * arm, which fails after the reference's step; the reference itself goes on. */
static int ride_precision(void *ctx, fp_arm *ref, const fp_batch *b)
{
    fp_compare *c = ctx;
    for (int i = 0; i < c->narms; i++) {
        arm_state *a = &c->arms[i];
        if (!a->perr_armed)
            continue;
        a->perr_armed = 0;
        if (fp_prec_err_ride(a->perr, fp_arm_model(ref), b->images, b->n) && !a->perr_fail[0])
            snprintf(a->perr_fail, sizeof a->perr_fail, "precision error at step %" PRId64 ": %s",
                     fp_arm_iteration(ref) + 1, fp_error_message());
    }
    return FP_OK;
}

/* Before the reference's step step_no on a batch of n, when its plan measures the rounding error: arms
 * the ride of every active low-precision arm. Out of memory fails that arm. */
void fp_cmp_ride_arm(fp_compare *c, fp_compare_result *res, int64_t step_no, int n)
{
    for (int i = 0; i < c->narms; i++) {
        arm_state *a = &c->arms[i];
        if (!a->perr || !a->active)
            continue;
        if (fp_prec_err_arm(a->perr, n) == FP_OK) {
            a->perr_armed = 1;
            continue;
        }
        char msg[512];
        snprintf(msg, sizeof msg, "precision error at step %" PRId64 ": %s", step_no, fp_error_message());
        fp_cmp_arm_fail(c, res, i, msg);
    }
}

/* After the reference's step: the arms whose ride failed fail now, with its message. */
void fp_cmp_ride_failures(fp_compare *c, fp_compare_result *res)
{
    for (int i = 0; i < c->narms; i++) {
        arm_state *a = &c->arms[i];
        a->perr_armed = 0;
        if (a->perr_fail[0] && a->active)
            fp_cmp_arm_fail(c, res, i, a->perr_fail);
        a->perr_fail[0] = 0;
    }
}

/* The arm's probe set: CPU timer (every step), RAPL (energy, NaN where unreadable), histograms when the
 * run samples them at all (which steps: the step plan), and for a low-precision arm against an fp32
 * reference the rounding-error backend. */
int fp_cmp_attach_probes(fp_compare *c, int i)
{
    arm_state *a = &c->arms[i];
    fp_model *m = fp_arm_model(a->arm);
    int nl = fp_model_layer_count(m);
    int rc = fp_probe_create(&a->probe);
    if (!rc)
        rc = fp_cpu_timer_create(&a->timer, nl);
    if (!rc)
        rc = fp_cpu_timer_attach(a->timer, a->probe);
    a->gpu = fp_arm_on_device(a->arm);
    a->turn_e0 = NAN;
    if (!rc && !a->gpu)   /* CPU energy for CPU arms; a GPU arm's is NVML's, at its turn boundaries */
        rc = fp_rapl_open(&a->rapl, NULL);
    if (!rc && a->rapl && fp_rapl_available(a->rapl))
        rc = fp_rapl_attach(a->rapl, a->probe);
    if (!rc && a->gpu && fp_cupti_available(c->cupti))   /* the session's one tracer */
        rc = fp_cupti_attach(c->cupti, a->probe);
    if (!rc && a->gpu && fp_nvtx_compiled()) {
        const char **names = malloc((size_t)nl * sizeof *names);
        for (int l = 0; names && l < nl; l++)
            names[l] = fp_model_layer(m, l)->name;
        rc = names ? fp_nvtx_create(&a->nvtx, nl, names) : fp_fail(FP_ENOMEM, "nvtx: out of memory");
        free(names);
        if (!rc)
            rc = fp_nvtx_attach(a->nvtx, a->probe);
    }
    if (!rc)
        rc = fp_perf_open(&a->perf);
    if (!rc && fp_perf_available(a->perf))
        rc = fp_perf_attach(a->perf, a->probe);
    if (!rc && c->cfg.hist_every > 0) {
        rc = fp_hist_probe_create(&a->hist, nl, c->cfg.hist_every, 0, c->store, a->run);
        if (!rc)
            rc = fp_hist_probe_attach(a->hist, a->probe);
        /* weights and weight gradients come with the updates, in one pass after the optimizer step
         * (fp_probe_sample_params), not from the model's forward / backward */
        fp_probe_caller_roles(a->probe, FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD));
        /* on the host with fp32 master weights the pass rides on the optimizer (no copy before the step) */
        a->steppable = !a->gpu && fp_arm_policy(a->arm)->master == FP_DT_F32 &&
                       fp_probe_params_steppable(m, fp_arm_optim(a->arm));
        /* on a GPU where the parameters lie (only counts come back); without the op or the memory, on the host */
        if (!rc && a->gpu && fp_param_dev_create(&a->pdev, m) != FP_OK)
            snprintf(a->pdev_off, sizeof a->pdev_off, "%s", fp_error_message());
        if (!rc && !a->steppable && !a->pdev &&
            !(a->old_params = malloc(fp_model_num_params(m) * sizeof *a->old_params)))
            rc = fp_fail(FP_ENOMEM, "out of memory");
        if (!rc && !(a->per_layer = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *a->per_layer)))
            rc = fp_fail(FP_ENOMEM, "out of memory");
    }
    const arm_state *ref = &c->arms[c->ref];
    if (!rc && c->cfg.error_every > 0 && i != c->ref && ref->arm && ref->active && ref->probe &&
        ref->pol == c->fp32) {   /* the reference's probes are attached first (fp_compare_open) */
        rc = fp_prec_err_create(&a->perr, fp_arm_model(ref->arm), fp_arm_policy(a->arm));
        if (!rc)
            fp_prec_err_set_store(a->perr, c->store, a->run, ref->run);
        if (!rc && a->gpu && ref->gpu)   /* both forwards on clones on the GPU, compared there (analysis.h) */
            fp_prec_err_use_device(a->perr, 1);
        if (!rc && !ref->gpu) {   /* on the reference's own step (analysis.h); a GPU reference: one call */
            rc = fp_prec_err_attach(a->perr, ref->probe);
            fp_arm_set_forward_hook(c->arms[c->ref].arm, ride_precision, c);
            c->ride = 1;
        }
    }
    if (!rc)
        fp_model_set_probe(m, a->probe);
    return rc;
}

/* After a skipped step: the first non-finite layer and every layer's headroom, from the gradients scaled
 * back to what the backward produced (the scaler's powers of two make that exact). */
const char *fp_cmp_skip_detail(arm_state *a, const fp_arm_step_result *r, char *text, size_t cap)
{
    fp_model *m = fp_arm_model(a->arm);
    size_t n = fp_model_num_params(m);
    if (!a->scratch && !(a->scratch = malloc((n ? n : 1) * sizeof *a->scratch)))
        return NULL;
    const float *g = fp_model_grads(m);
    if (!g)   /* a device model whose download failed */
        return NULL;
    for (size_t k = 0; k < n; k++)
        a->scratch[k] = g[k] * r->scale;
    int fmt = fp_arm_policy(a->arm)->activation_grad == FP_DT_BF16 ? FP_FMT_BF16 : FP_FMT_FP16;
    fp_skipped_step_analysis(m, a->scratch, r->scale, (fp_format)fmt, text, cap, NULL);
    return text;
}

/* At a histogram step: the fraction of weights whose update vanished in rounding, as an event naming the
 * layers that lost the most (a GPU arm's: and the time its pass on the device took). */
void fp_cmp_lost_updates_event(fp_compare *c, arm_state *a, int64_t step, double all)
{
    fp_model *m = fp_arm_model(a->arm);
    if (!c->store || isnan(all))
        return;
    char text[512];
    size_t len = (size_t)snprintf(text, sizeof text, "lost updates at step %" PRId64 ": %.4g%% of the weights with "
                                  "a nonzero gradient did not change", step, 100 * all);
    int nl = fp_model_layer_count(m), shown = 0;
    for (int round = 0; round < 3 && len < sizeof text; round++) {   /* the three layers that lost the most */
        int best = -1;
        for (int l = 0; l < nl; l++)
            if (!isnan(a->per_layer[l]) && a->per_layer[l] > 0 && (best < 0 || a->per_layer[l] > a->per_layer[best]))
                best = l;
        if (best < 0)
            break;
        len += (size_t)snprintf(text + len, sizeof text - len, "%s %s %.3g%%", shown++ ? "," : "; most in",
                                fp_model_layer(m, best)->name, 100 * a->per_layer[best]);
        a->per_layer[best] = NAN;
    }
    if (a->pdev && len < sizeof text)   /* the pass's time, outside the step's (steps.wall_ns leaves it out) */
        snprintf(text + len, sizeof text - len, "; the parameter pass on the GPU took %.2f ms outside the step",
                 (double)a->pdev_ns / 1e6);
    fp_store_event(c->store, a->run, 0, step, -1, FP_EVENT_INFO, text);
}

/* Once the runs exist: each GPU arm's run says which GPU probes measure it and why not; the tracer
 * writes into the store; the sampler starts, naming the first GPU arm's run until turns re-target it. */
void fp_cmp_gpu_probes_begin(fp_compare *c)
{
    int64_t first = 0;
    for (int i = 0; i < c->narms; i++) {
        arm_state *a = &c->arms[i];
        if (!a->gpu || !a->active)
            continue;
        if (!first)
            first = a->run;
        if (!c->store)
            continue;
        char text[512];
        if (!c->cupti)
            snprintf(text, sizeof text, "kernel trace (CUPTI): off (--trace-every 0)");
        else if (fp_cupti_available(c->cupti))
            snprintf(text, sizeof text, "kernel trace (CUPTI): kernels of every %d-th step", c->cfg.trace_every);
        else
            snprintf(text, sizeof text, "kernel trace (CUPTI): unavailable: %s", fp_cupti_reason(c->cupti));
        fp_store_event(c->store, a->run, 0, 0, -1, FP_EVENT_INFO, text);
        if (fp_nvml_available(c->nvml))
            snprintf(text, sizeof text, "GPU energy (NVML): %s, driver %s: energy counter at turn boundaries, "
                     "samples every %d ms", fp_nvml_device_name(c->nvml), fp_nvml_driver_version(c->nvml),
                     NVML_SAMPLE_MS);
        else
            snprintf(text, sizeof text, "GPU energy (NVML): unavailable: %s", fp_nvml_reason(c->nvml));
        fp_store_event(c->store, a->run, 0, 0, -1, FP_EVENT_INFO, text);
        if (!fp_nvtx_compiled())
            fp_store_event(c->store, a->run, 0, 0, -1, FP_EVENT_INFO, "NVTX ranges: built without NVTX3");
        if (a->hist) {   /* where the histogram steps' parameter pass runs */
            if (a->pdev)
                snprintf(text, sizeof text, "parameter pass (weights, updates, lost updates): on the GPU, the "
                         "parameters before the step copied device to device (%.1f MiB in the arm's arena), only "
                         "counts come back", (double)fp_param_dev_bytes(a->pdev) / 1048576.0);
            else
                snprintf(text, sizeof text, "parameter pass (weights, updates, lost updates): on the host, parameters "
                         "and gradients downloaded: %s", a->pdev_off);
            fp_store_event(c->store, a->run, 0, 0, -1, FP_EVENT_INFO, text);
        }
    }
    if (!first || !c->store)
        return;
    if (fp_cupti_available(c->cupti))
        fp_cupti_set_run(c->cupti, c->store, first);
    if (fp_nvml_available(c->nvml) && fp_nvml_start_sampler(c->nvml, c->store, first, NVML_SAMPLE_MS) != FP_OK)
        for (int i = 0; i < c->narms; i++)
            if (c->arms[i].gpu && c->arms[i].active)
                fp_store_event(c->store, c->arms[i].run, 0, 0, -1, FP_EVENT_WARNING, fp_error_message());
}

/* Flushes the tracer; the kernel rows written and records dropped since the last call are the run it
 * names now. */
static void cupti_account(fp_compare *c)
{
    fp_cupti_flush(c->cupti);   /* a store error shows in the writer's status */
    uint64_t d = fp_cupti_dropped(c->cupti), k = fp_cupti_kernels(c->cupti);
    int64_t run = fp_cupti_run(c->cupti);
    for (int j = 0; j < c->narms; j++)
        if (c->arms[j].gpu && run > 0 && c->arms[j].run == run) {
            c->arms[j].cupti_dropped += d - c->cupti_dropped_mark;
            c->arms[j].cupti_kernels += k - c->cupti_kernels_mark;
        }
    c->cupti_dropped_mark = d;
    c->cupti_kernels_mark = k;
}

/* Before the store closes: the sampler stops and the tracer's last records go to the store (which it then
 * forgets); each GPU arm's run gets its trace counts. */
void fp_cmp_gpu_probes_end(fp_compare *c)
{
    fp_nvml_stop_sampler(c->nvml);
    if (!c->store)
        return;
    for (int i = 0; i < c->narms; i++) {   /* the rounding error's GPU clones: memory beside the arms' arenas */
        arm_state *a = &c->arms[i];
        size_t peak = 0, ws = 0, arenas = fp_prec_err_device_memory(a->perr, &peak, &ws);
        if (!arenas || a->perr_mem_told || a->run <= 0)
            continue;
        a->perr_mem_told = 1;
        char text[300];
        snprintf(text, sizeof text, "rounding error on the GPU: clones of the fp32 arm's model in arenas of %.1f MiB "
                 "beside the arms' (at most %.1f MiB in use), cuDNN workspaces %.1f MiB; held from the first "
                 "measured step to the end of the run", (double)arenas / 1048576.0, (double)peak / 1048576.0,
                 (double)ws / 1048576.0);
        fp_store_event(c->store, a->run, 0, -1, -1, FP_EVENT_INFO, text);
    }
    if (fp_cupti_available(c->cupti)) {
        cupti_account(c);
        fp_cupti_set_run(c->cupti, NULL, 0);   /* the store is about to close */
        size_t bytes, pool;
        fp_cupti_device_buffers(c->cupti, &bytes, &pool);
        for (int i = 0; i < c->narms; i++) {
            arm_state *a = &c->arms[i];
            if (!a->gpu || a->run <= 0)
                continue;
            char text[300];
            snprintf(text, sizeof text, "kernel trace (CUPTI): %" PRIu64 " kernel rows, %" PRIu64 " records "
                     "dropped; CUPTI device buffers %zu bytes, at most %zu per context", a->cupti_kernels,
                     a->cupti_dropped, bytes, pool);
            fp_store_event(c->store, a->run, 0, -1, -1, a->cupti_dropped ? FP_EVENT_WARNING : FP_EVENT_INFO, text);
        }
    }
    if (fp_nvml_available(c->nvml))
        for (int i = 0; i < c->narms; i++)
            if (c->arms[i].gpu && c->arms[i].run > 0) {
                char text[128];
                snprintf(text, sizeof text, "GPU energy (NVML): %" PRIu64 " device samples in this session",
                         fp_nvml_samples_taken(c->nvml));
                fp_store_event(c->store, c->arms[i].run, 0, -1, -1, FP_EVENT_INFO, text);
            }
}

/* The start of arm i's turn: the probes name its run; its energy counts from here (after a sync). */
void fp_cmp_turn_begin(fp_compare *c, int i)
{
    arm_state *a = &c->arms[i];
    if (!a->gpu || !c->store)
        return;
    if (fp_cupti_available(c->cupti) && fp_cupti_run(c->cupti) != a->run) {
        cupti_account(c);   /* the previous run's records and counts first */
        fp_cupti_set_run(c->cupti, c->store, a->run);
    }
    fp_nvml_set_run(c->nvml, a->run);
    if (fp_cmp_defers_steps(c, a))
        a->turn_e0 = fp_cmp_synced_energy_j(c, a);
}
