/* arm_device.c — ONE TRAINING STEP ON A DEVICE (CUDA builds): fp_arm_step's parts in the same order queued on the
 * model's stream without the host waiting (or captured once in a CUDA graph and replayed: arm_device_graph.c), read
 * back once at the end. Promise: the step reports what the host path reports for the same arithmetic (arm.h's
 * contract); a replay reads this step's batch and scalars, never stale ones. */
#include "config.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include "clock.h"
#include "error.h"
#include "trainer/backend.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/run/arm_device_internal.h"

/* 4. unscale_ + the inf/NaN check on the device: one launch over every parameter gradient in backward order, by
 * 1 / the step state's scale (read on the device: a graph's replay unscales by its own), the flag and the first
 * non-finite segment left in the step state (the host names its tensor at the end). */
static int device_unscale(fp_arm *a)
{
    fp_model *m = a->model;
    fp_backend *be = fp_model_backend(m);
    fp_cuda_step_state *ds = a->dstate;
    size_t nt = fp_model_tensor_count(m), ns = 0;
    fp_cuda_segment *segs = calloc(nt ? nt : 1, sizeof *segs);
    float *g = fp_model_backend_grads(m);
    int rc = !segs ? fp_fail(FP_ENOMEM, "out of memory") : !g ? FP_EINTERNAL : FP_OK;
    for (size_t i = nt; !rc && i-- > 0;) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (t->is_param)
            segs[ns++] = (fp_cuda_segment){.grad = g + t->offset, .n = t->numel};
    }
    rc = rc ? rc : fp_cuda_unscale_and_check_first_by(segs, ns, &ds->scale, &ds->found, &ds->first_nonfinite,
                                                      fp_backend_cuda_stream(be));
    free(segs);
    return rc;
}

/* The parameter tensor at position k of device_unscale's segments (backward order). */
static const fp_tensor_info *nth_param_backward(fp_model *m, int k)
{
    for (size_t i = fp_model_tensor_count(m); i-- > 0;) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (t->is_param && k-- == 0)
            return t;
    }
    return NULL;
}

static int64_t event_ns(fp_arm *a, int from, int to)
{
    int64_t ns = 0;
    return fp_cuda_event_elapsed_ns(a->ev[from], a->ev[to], &ns) == FP_OK ? ns : 0;
}

/* Timing event i on the stream; inside a capture an external event node (recorded at every replay). */
static int mark(fp_arm *a, int i, void *stream, int captured)
{
    return captured ? fp_cuda_event_record_captured(a->ev[i], stream) : fp_cuda_event_record(a->ev[i], stream);
}

/* The step's device work, from the first timing event to the last (steps 1 to 6), queued on the stream: run
 * eagerly, or captured into the graph (captured: nothing runs; the same calls, the same arithmetic). Nothing in it
 * takes a host branch on per-step data: the loss scale, the skip and the optimizer's scalars are read on the device
 * (the step state, fp_arm_device_step_scalars), the batch is uploaded through the backend (fixed slots while
 * captured). */
int fp_arm_device_queue(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, int captured)
{
    fp_model *m = a->model;
    fp_backend *be = fp_model_backend(m);
    void *stream = fp_backend_cuda_stream(be);
    fp_cuda_step_state *ds = a->dstate;
    int rc = mark(a, 0, stream, captured);
    /* 1. forward + loss, fused; dlogits scaled by the state's scale; the loss result copied into the step state */
    if (!rc) {
        float loss;
        int c1, c5;
        fp_model_zero_grad(m);
        fp_backend_cuda_defer_loss(be, 1);
        fp_backend_cuda_set_loss_scale(be, a->policy->scaling != FP_SCALE_NONE ? &ds->scale : NULL);
        rc = fp_model_forward_loss(m, &loss, &c1, &c5, b->images, (const int *)b->labels, b->n, a->scaler.scale);
        fp_backend_cuda_set_loss_scale(be, NULL);
        fp_backend_cuda_defer_loss(be, 0);
    }
    rc = rc ? rc : fp_cuda_step_loss(ds, fp_backend_cuda_loss_result(be), b->n, stream);
    rc = rc ? rc : mark(a, 1, stream, captured);
    /* (2. the forward hook: host arms only) 3. backward of the scaled loss, the buckets posted during it */
    rc = rc ? rc : fp_arm_reduce_begin(a);
    rc = rc ? rc : fp_model_backward_loss(m);
    rc = rc ? rc : mark(a, 2, stream, captured);
    /* 3b. data parallel (never captured): the all-reduce's end */
    rc = rc ? rc : fp_arm_allreduce_grads(a, r);
    rc = rc ? rc : mark(a, 3, stream, captured);
    /* 4. unscale_ + inf/NaN check (with ranks: found on any, skipped on all), 5. the scaler update */
    rc = rc ? rc : device_unscale(a);
    rc = rc ? rc : fp_cuda_step_flags(ds, stream);
    if (!rc && fp_dist_size(a->cfg.dist) > 1)
        rc = fp_arm_device_reduce_flags(a);
    rc = rc ? rc : fp_cuda_step_update(ds, (int)a->policy->scaling, a->scaler.growth_factor, a->scaler.backoff_factor,
                                       a->scaler.growth_interval, stream);
    /* 6. the optimizer (SGD, Adam / AdamW), doing nothing on the device's skip */
    rc = rc ? rc : fp_arm_device_optim(a);
    rc = rc ? rc : mark(a, 4, stream, captured);
    return rc;
}

/* ONE TRAINING STEP ON A DEVICE: fp_arm_step's parts in its order, queued on the model's stream without the host
 * waiting (issue 22); the loss, the non-finite flags, the skip decision and GradScaler's state stay on the
 * device (kernels.h fp_cuda_step_state), read back once at the end (one copy into pinned memory, one stream
 * synchronisation), after which the result and the host's GradScaler are set from it: the same figures as
 * the host path. Only a restore's optimizer-state upload and a sampling step's probes make the host wait
 * otherwise. With cfg.cuda_graph the queued part (fp_arm_device_queue) is captured once in a CUDA graph and replayed
 * (fp_arm_device_graph_mode says when). Times are the device's, from events on the stream: forward (+ loss), backward,
 * all-reduce (data parallel: its exposed part), optimizer (unscale, scaler, update); total: the host's, to the
 * end of the wait. */
int fp_arm_device_step(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, const fp_batch *next)
{
    fp_model *m = a->model;
    const fp_backend_ops *ops = fp_model_backend_ops(m);
    fp_backend *be = fp_model_backend(m);
    void *stream = fp_backend_cuda_stream(be);
    fp_cuda_step_state *ds = a->dstate, *hs = a->hstate;
    /* 0. begin */
    fp_arm_step_begin(a, b, r);
    const int classes = fp_model_num_classes(m);
    const int64_t step = fp_optim_get_step(a->optim), t0 = fp_clock_mono_ns();
    int rc = FP_OK;
    if (a->nopt && a->opt_host_newer) {   /* a restore: the host's state goes over (and waits, once) */
        if ((rc = fp_arm_device_opt_transfer(a, 0)))
            return rc;
        a->opt_host_newer = 0;
        a->graph_eager = 1;
    }
    if (!a->dev_scaler_set || a->dev_scale != a->scaler.scale || a->dev_tracker != a->scaler.clean_steps)
        rc = fp_cuda_step_set_scaler(ds, a->scaler.scale, a->scaler.clean_steps, stream);   /* first, or restored */
    rc = rc ? rc : fp_arm_device_step_scalars(a, r->lr, step);
    /* what the host wrote into the model goes over now, outside the step (a replay would not upload it) */
    rc = rc ? rc : fp_model_sync_to_device(m);
    int mode = rc ? FP_ARM_STEP_EAGER : fp_arm_device_graph_mode(a, b), ran = 0;
    if (!rc && mode == FP_ARM_STEP_REPLAY)
        rc = fp_arm_device_graph_replay(a, b, &ran);
    else if (!rc && mode == FP_ARM_STEP_CAPTURE)
        rc = fp_arm_device_graph_capture(a, b, r, &ran);
    if (!rc && !ran)
        rc = fp_arm_device_queue(a, b, r, 0);
    /* the next batch's images start crossing on the copy stream while this step computes (for an eager step's upload
     * or a replay's refill of the graph's device twin); a prefetch that cannot be had leaves the upload as it was */
    if (!rc && next && next->n > 0) {
        int started = fp_backend_cuda_prefetch(be, next->images, fp_arm_device_image_bytes(a, next));
        rc = started < 0 ? started : FP_OK;
    }
    /* the one readback and wait */
    rc = rc ? rc : fp_cuda_step_readback(hs, ds, stream);
    rc = rc ? rc : ops->sync(be);
    a->dev_scaler_set = 0;   /* until read back */
    if (rc)
        return rc;
    if (ran) {
        r->reduce_rel_l2 = NAN;   /* what step 3b says alone (a replay runs none of the step's host code) */
        a->graph_steps++;
        if (!a->graph_first)
            a->graph_first = a->iteration + 1;
    } else if (a->cfg.cuda_graph && !a->graph_off) {
        a->graph_warm = 1;   /* the buffers are as this step left them: the next may capture */
    }

    /* the step's results */
    a->dev_scaler_set = 1;
    a->dev_scale = hs->scale;
    a->dev_tracker = hs->growth_tracker;
    if (hs->xent.bad_label != -1)   /* as the loss's label check: nothing was updated */
        return fp_fail(FP_EINVAL, "fp_cuda_softmax_xent: label[%d] = %d outside [0, %d)", hs->xent.bad_label,
                       (int)b->labels[hs->xent.bad_label], classes);
    if (hs->flags[2] > 0)
        return fp_fail(FP_EINVAL, "arm %s: a label outside [0, %d) on another rank", a->policy_name, classes);
    if ((rc = fp_cuda_xent_finish(&hs->xent, b->n, classes, &r->loss, &r->correct1, &r->correct5)))
        return rc;
    r->loss_finite = isfinite(r->loss) != 0;
    if (a->policy->scaling == FP_SCALE_NONE && hs->flags[1] > 0) {   /* diverged (on some rank): nothing updated */
        int64_t t3 = fp_clock_mono_ns();
        fp_arm_step_result keep = *r;
        fp_arm_step_begin(a, b, r);   /* the host path's figures: it stops before the backward */
        r->loss = keep.loss;
        r->correct1 = keep.correct1;
        r->correct5 = keep.correct5;
        r->loss_finite = keep.loss_finite;
        r->diverged = 1;
        r->forward_ns = event_ns(a, 0, 1);
        r->total_ns = t3 - t0;
        return FP_OK;
    }
    if (hs->first_nonfinite != INT_MAX) {   /* this rank's first non-finite gradient, in backward order */
        const fp_tensor_info *t = nth_param_backward(m, hs->first_nonfinite);
        r->nonfinite_layer = t ? t->layer : -1;
        r->nonfinite_tensor = t ? t->name : NULL;
    }
    if (a->policy->scaling != FP_SCALE_NONE) {   /* 5. GradScaler.update, as the host's would do it */
        fp_grad_scaler want = a->scaler;
        int found = hs->flags[0] > 0;
        fp_grad_scaler_update(&want, found);
        if (want.scale != hs->scale || want.clean_steps != hs->growth_tracker || hs->skip != found)
            return fp_fail(FP_EINTERNAL, "arm %s: the device loss scaler (scale %g, tracker %d, skip %d) disagrees with "
                           "GradScaler's (%g, %d, %d)", a->policy_name, hs->scale, hs->growth_tracker, hs->skip,
                           want.scale, want.clean_steps, found);
        a->scaler.scale = hs->scale;
        a->scaler.clean_steps = hs->growth_tracker;
        r->skipped = found;
        r->next_scale = a->scaler.scale;
        r->scale_changed = r->next_scale != r->scale;
    }
    /* 6. the optimizer's count, now that the skip is known (its state on the device moved on) */
    if (!r->skipped) {
        if ((rc = fp_optim_set_step(a->optim, step + 1)))
            return rc;
        if (a->nopt)
            a->opt_dev_newer = 1;
    }
    /* 7. done */
    a->iteration++;
    r->forward_ns = event_ns(a, 0, 1);
    r->backward_ns = event_ns(a, 1, 2);
    r->optim_ns = event_ns(a, 3, 4);
    if (a->cfg.dist)
        r->comm_ns = r->comm_exposed_ns = event_ns(a, 2, 3);
    r->total_ns = fp_clock_mono_ns() - t0;
    return FP_OK;
}
