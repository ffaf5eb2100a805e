/* arm_device.c — the arm on a device backend (CUDA builds): its step, fp_arm_step's parts in the same order queued on
 * the model's stream without the host waiting (or captured once in a CUDA graph and replayed), and the device state
 * behind it (optimizer state, step state, per-step scalars, events). Promise: the step reports what the host path
 * reports for the same arithmetic (arm.h's contract); a replay reads this step's batch and scalars, never stale
 * ones. */
#include "config.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "clock.h"
#include "error.h"
#include "probe/probe.h"
#include "trainer/backend.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/layers.h"
#include "trainer/run/arm_internal.h"

/* ---------------------------------------------------------------- the device state */

/* The device optimizer state and fp_optim's host state: down (device -> host) or up. fp_optim keeps nopt entries per
 * parameter tensor, in tensor order (optim.h: SGD's momentum_buffer; Adam's exp_avg, then exp_avg_sq), each the
 * tensor's part of one device buffer. 16-bit storage goes through one host buffer of the whole, widened (exact) or
 * narrowed (round to nearest even: a restored value the format does not hold is rounded, as `half`'s host step
 * rounds its state). Waits at the end. */
static int opt_transfer(fp_arm *a, int down)
{
    const fp_backend_ops *ops = fp_model_backend_ops(a->model);
    fp_backend *be = fp_model_backend(a->model);
    size_t nt = fp_model_tensor_count(a->model), np = fp_model_num_params(a->model);
    const int wide = a->dopt_dtype == FP_DT_F32;
    uint16_t *tmp = wide ? NULL : malloc((np ? np : 1) * sizeof *tmp);
    int rc = !wide && !tmp ? fp_fail(FP_ENOMEM, "out of memory") : FP_OK;
    for (int j = 0; !rc && j < a->nopt; j++) {
        if (tmp && down && !(rc = ops->download(be, tmp, a->dopt[j], np * sizeof *tmp)))
            rc = ops->sync(be);
        for (size_t i = 0, k = 0; i < nt && !rc; i++) {
            const fp_tensor_info *t = fp_model_tensor(a->model, i);
            if (!t->is_param)
                continue;
            fp_optim_state st;
            if ((rc = fp_optim_state_at(a->optim, k++ * (size_t)a->nopt + (size_t)j, &st)))
                break;
            if (st.n != t->numel) {
                rc = fp_fail(FP_EINTERNAL, "arm: optimizer state %s does not match tensor %s", st.name, t->name);
                break;
            }
            float *d = (float *)a->dopt[j] + t->offset;
            if (wide)
                rc = down ? ops->download(be, st.data, d, t->numel * sizeof(float))
                          : ops->upload(be, d, st.data, t->numel * sizeof(float));
            else
                rc = down ? fp_widen_array(st.data, tmp + t->offset, t->numel, a->dopt_dtype)
                          : fp_narrow_array(tmp + t->offset, st.data, t->numel, a->dopt_dtype);
        }
        if (!rc && tmp && !down)
            rc = ops->upload(be, a->dopt[j], tmp, np * sizeof *tmp);
    }
    rc = rc ? rc : ops->sync(be);
    free(tmp);
    return rc;
}

/* The device step's state and the optimizer's per-step scalars (in the backend's memory), their pinned host copies
 * and the timing events. */
static int device_step_state(fp_arm *a)
{
    const fp_backend_ops *ops = fp_model_backend_ops(a->model);
    fp_backend *be = fp_model_backend(a->model);
    if (ops->set_label)
        ops->set_label(be, "step state");
    int rc = ops->alloc(be, &a->dstate, sizeof(fp_cuda_step_state));
    if (ops->set_label)
        ops->set_label(be, NULL);
    rc = rc ? rc : fp_cuda_host_alloc(&a->hstate, sizeof(fp_cuda_step_state));
    if (!rc && ops->set_label)
        ops->set_label(be, "optimizer scalars");
    rc = rc ? rc : ops->alloc(be, &a->dscal, sizeof(fp_cuda_optim_scalars));
    if (ops->set_label)
        ops->set_label(be, NULL);
    rc = rc ? rc : fp_cuda_host_alloc(&a->hscal, sizeof(fp_cuda_optim_scalars));
    for (int i = 0; !rc && i < 5; i++)
        rc = fp_cuda_event_create(&a->ev[i]);
    return rc;
}

/* Moves the model onto the device backend (a CUDA arm gets its own named arena) and allocates the optimizer's state
 * there (zero: fp_optim's state before the first step): SGD's momentum buffers in fp32, Adam's moments in the
 * policy's optimizer-state dtype; then the step state. */
int fp_arm_device_init(fp_arm *a, const fp_arm_config *cfg)
{
    fp_backend *be = NULL;
    int rc;
    if (cfg->backend == fp_backend_cuda()) {
        char name[64];
        snprintf(name, sizeof name, "%s arm", a->policy->name);
        size_t bytes = cfg->arena_bytes ? cfg->arena_bytes : fp_backend_cuda_default_arena();
        if (!bytes)
            return fp_fail(FP_EUNAVAIL, "%s: cannot size the device arena (no usable GPU?)", name);
        if ((rc = fp_backend_cuda_create_sized(&be, bytes, name)))
            return rc;
    }
    if ((rc = fp_model_set_backend(a->model, cfg->backend, be)))
        return rc;
    a->dev = 1;
    const int adam = cfg->optim.kind != FP_OPTIM_SGD;
    const fp_dtype sd = a->policy->optim_state;
    a->nopt = adam ? 2 : cfg->optim.momentum > 0 ? 1 : 0;
    a->dopt_dtype = adam && (sd == FP_DT_F16 || sd == FP_DT_BF16) ? sd : FP_DT_F32;
    const fp_backend_ops *ops = cfg->backend;
    fp_backend *mb = fp_model_backend(a->model);
    size_t bytes = (fp_model_num_params(a->model) ? fp_model_num_params(a->model) : 1) *
                   (size_t)fp_dtype_bytes(a->dopt_dtype);
    for (int j = 0; j < a->nopt; j++) {
        if (ops->set_label)
            ops->set_label(mb, adam ? (j ? "Adam exp_avg_sq" : "Adam exp_avg") : "momentum buffers");
        rc = ops->alloc(mb, &a->dopt[j], bytes);
        if (ops->set_label)
            ops->set_label(mb, NULL);
        if (rc || (rc = ops->zero(mb, a->dopt[j], bytes)))
            return rc;
    }
    return device_step_state(a);
}

void fp_arm_device_free(fp_arm *a)
{
    const fp_backend_ops *ops = fp_model_backend_ops(a->model);
    fp_backend *be = fp_model_backend(a->model);
    size_t np = fp_model_num_params(a->model) ? fp_model_num_params(a->model) : 1;
    for (int j = 0; j < 2; j++)
        if (a->dopt[j])
            ops->free(be, a->dopt[j], np * (size_t)fp_dtype_bytes(a->dopt_dtype));
    if (a->dstage)
        ops->free(be, a->dstage, np * 2);
    if (a->dref)
        ops->free(be, a->dref, np * sizeof(float));
    free(a->check_grads);
    if (a->dstate)
        ops->free(be, a->dstate, sizeof(fp_cuda_step_state));
    fp_cuda_host_free(a->hstate);
    if (a->dscal)
        ops->free(be, a->dscal, sizeof(fp_cuda_optim_scalars));
    fp_cuda_host_free(a->hscal);
    fp_cuda_graph_destroy(a->graph);
    for (int i = 0; i < 5; i++)
        fp_cuda_event_destroy(a->ev[i]);
}

void fp_arm_device_optim_to_host(fp_arm *a)
{
    if (a->nopt && a->opt_dev_newer && opt_transfer(a, 1) == FP_OK)
        a->opt_dev_newer = 0;
    if (a->nopt)
        a->opt_host_newer = 1;   /* the caller may write (checkpoint restore) */
}

/* ---------------------------------------------------------------- the device parts of steps 3b, 4 and 6 */

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

#ifdef HAVE_NCCL
/* The device gradients an all-reduce works on (device_grads: 1 with *d filled; FP_OK when there is nothing to
 * reduce, no parameters; FP_EINTERNAL without device gradients). */
typedef struct {
    fp_backend *be;
    const fp_backend_ops *ops;
    size_t n;   /* parameters */
    float *g;   /* device gradients */
} device_grads_t;

static int device_grads(fp_arm *a, device_grads_t *d)
{
    fp_model *m = a->model;
    d->be = fp_model_backend(m);
    d->ops = fp_model_backend_ops(m);
    d->n = fp_model_num_params(m);
    d->g = fp_model_backend_grads(m);
    if (!d->g)
        return FP_EINTERNAL;
    return d->n ? 1 : FP_OK;
}
#else
/* Every data-parallel entry point of a build without NCCL. */
static int no_nccl(const fp_arm *a)
{
    return fp_fail(FP_EUNAVAIL, "arm %s: data-parallel training on the GPU needs the NCCL build", a->policy_name);
}
#endif

/* The all-reduce of a device arm: NCCL over the device gradients (16-bit formats through a cast into the arm's
 * staging buffer and back). Overlapped (reduce_begin): the buckets the backward's hook posted, the rest posted
 * now, then the model's stream waits for them; at a checked step all of it now. The host does not wait:
 * fp_arm_device_step times it by events, from the end of the backward to the all-reduce's end on the model's
 * stream (the exposed part); the NCCL kernels' own time is CUPTI's. */
int fp_arm_device_allreduce(fp_arm *a, fp_dist_stats *st)
{
#ifdef HAVE_NCCL
    device_grads_t d;
    int rc = device_grads(a, &d);
    if (rc <= 0)
        return rc;
    fp_dims dims = {1, 1, 1, (int)d.n};
    fp_tensor gt = fp_tensor_of(d.g, FP_DT_F32, dims);
    void *stream = fp_backend_cuda_stream(d.be);
    rc = FP_OK;
    if (a->overlap) {
        a->overlap = 0;
        rc = fp_dist_nccl_reduce_end(a->cfg.dist, stream, st);
        if (!rc && a->wire != FP_DT_F32)
            rc = d.ops->cast(d.be, gt, fp_tensor_of(a->dstage, a->wire, dims));
    } else {
        void *buf = d.g;
        if (a->wire != FP_DT_F32) {
            buf = fp_backend_cuda_scratch(d.be, d.n * 2);
            rc = !buf ? FP_ENOMEM : d.ops->cast(d.be, fp_tensor_of(buf, a->wire, dims), gt);
        }
        rc = rc ? rc : fp_dist_nccl_allreduce_mean(a->cfg.dist, buf, d.n, a->wire, a->cfg.bucket_bytes, stream, st);
        if (!rc && a->wire != FP_DT_F32)
            rc = d.ops->cast(d.be, gt, fp_tensor_of(buf, a->wire, dims));
    }
    return rc;
#else
    (void)st;
    return no_nccl(a);
#endif
}

int fp_arm_device_allreduce_checked(fp_arm *a, fp_dist_stats *st, fp_arm_step_result *r)
{
#ifdef HAVE_NCCL
    device_grads_t d;
    int rc = device_grads(a, &d);
    if (rc <= 0)
        return rc;
    if (!a->dref && d.ops->alloc(d.be, &a->dref, d.n * sizeof(float)))
        return fp_fail(FP_ENOMEM, "arm %s: out of device memory for the fp32 reference all-reduce", a->policy_name);
    float *ref = realloc(a->ref_grads, d.n * sizeof *ref);
    float *got = ref ? realloc(a->check_grads, d.n * sizeof *got) : NULL;
    if (ref)
        a->ref_grads = ref;
    if (got)
        a->check_grads = got;
    if (!ref || !got)
        return fp_fail(FP_ENOMEM, "arm %s: out of memory for the all-reduce check", a->policy_name);
    /* the same gradients in fp32 (a copy), then the arm's own all-reduce in its format */
    rc = d.ops->copy(d.be, a->dref, d.g, d.n * sizeof(float));
    rc = rc ? rc : fp_dist_nccl_allreduce_mean(a->cfg.dist, a->dref, d.n, FP_DT_F32, a->cfg.bucket_bytes,
                                               fp_backend_cuda_stream(d.be), NULL);
    rc = rc ? rc : fp_arm_device_allreduce(a, st);
    rc = rc ? rc : d.ops->download(d.be, ref, a->dref, d.n * sizeof(float));
    rc = rc ? rc : d.ops->download(d.be, got, d.g, d.n * sizeof(float));
    rc = rc ? rc : d.ops->sync(d.be);
    if (!rc)
        fp_arm_reduce_error(a, got, ref, r);
    return rc;
#else
    (void)st;
    (void)r;
    return no_nccl(a);
#endif
}

/* A device arm's overlapped all-reduce begins: over the device gradients, or over the arm's staging buffer
 * (allocated once, in the backend's memory) for a 16-bit format. */
int fp_arm_device_reduce_begin(fp_arm *a)
{
#ifdef HAVE_NCCL
    fp_model *m = a->model;
    size_t n = fp_model_num_params(m);
    void *buf = fp_model_backend_grads(m);
    if (!buf)
        return FP_EINTERNAL;
    if (a->wire != FP_DT_F32) {
        if (!a->dstage && fp_model_backend_ops(m)->alloc(fp_model_backend(m), &a->dstage, (n ? n : 1) * 2))
            return fp_fail(FP_ENOMEM, "arm %s: out of device memory for the %s all-reduce buffer", a->policy_name,
                           fp_dtype_name(a->wire));
        buf = a->dstage;
    }
    return fp_dist_nccl_reduce_begin(a->cfg.dist, buf, n, a->wire, a->cfg.bucket_bytes);
#else
    return no_nccl(a);
#endif
}

/* A device arm's gradient-ready hook: the layer's gradients cast into the staging buffer (16-bit formats) on
 * the model's stream, then its bucket may go on NCCL's stream once that work is done (an event). */
int fp_arm_device_grad_ready(fp_arm *a, size_t off, size_t count)
{
#ifdef HAVE_NCCL
    fp_model *m = a->model;
    fp_backend *be = fp_model_backend(m);
    int rc = FP_OK;
    if (a->wire != FP_DT_F32) {
        fp_dims dims = {1, 1, 1, (int)count};
        rc = fp_model_backend_ops(m)->cast(be, fp_tensor_of((uint16_t *)a->dstage + off, a->wire, dims),
                                           fp_tensor_of(fp_model_backend_grads(m) + off, FP_DT_F32, dims));
    }
    return rc ? rc : fp_dist_nccl_reduce_ready(a->cfg.dist, off, count, fp_backend_cuda_stream(be));
#else
    (void)off;
    (void)count;
    return no_nccl(a);
#endif
}

/* The optimizer's per-step scalars (kernels.h fp_cuda_optim_scalars: lr, SGD's first step, Adam's bias corrections
 * for count step + 1) into the pinned host copy, before the step is queued or replayed; step: the optimizer's count
 * before it (it moves at the step's end, once the skip is known). */
static int step_scalars(fp_arm *a, double lr, int64_t step)
{
    if (!isfinite(lr) || lr < 0)
        return fp_fail(FP_EINVAL, "optimizer: learning rate %g is not finite and >= 0", lr);
    return a->cfg.optim.kind != FP_OPTIM_SGD ? fp_cuda_adam_scalars(a->hscal, &a->cfg.optim, lr, step + 1)
                                             : fp_cuda_sgd_scalars(a->hscal, lr, step == 0);
}

/* 6. The optimizer step of a device arm (optim.c's update, kernels.h: SGD, or Adam / AdamW with the moments in their
 * storage dtype), its per-step scalars copied from the pinned host copy (step_scalars) to the device first and read
 * there, launched to do nothing when the step state's skip flag is set on the device; then the policy's rounding of
 * master weights and of state kept in fp32 (`half`; idempotent when the step was skipped). */
static int device_optim(fp_arm *a)
{
    fp_model *m = a->model;
    const fp_backend_ops *ops = fp_model_backend_ops(m);
    fp_backend *be = fp_model_backend(m);
    const fp_optim_config *oc = &a->cfg.optim;
    const int adam = oc->kind != FP_OPTIM_SGD;
    int rc = FP_OK;
    size_t nt = fp_model_tensor_count(m), ns = 0, es = (size_t)fp_dtype_bytes(a->dopt_dtype);
    fp_cuda_segment *segs = adam ? NULL : calloc(nt ? nt : 1, sizeof *segs);
    fp_cuda_adam_segment *asegs = adam ? calloc(nt ? nt : 1, sizeof *asegs) : NULL;
    float *p = fp_model_backend_params(m), *g = fp_model_backend_grads(m);
    if ((!segs && !asegs) || !p || !g) {
        rc = !segs && !asegs ? fp_fail(FP_ENOMEM, "out of memory") : FP_EINTERNAL;
        free(segs);
        free(asegs);
        return rc;
    }
    fp_dtype low_dt = FP_DT_F32;   /* the backend's 16-bit weight copy (16-bit compute): written here, once */
    int low = fp_backend_cuda_weight_copy_of(be, p, &low_dt) != NULL;
    char *m0 = a->dopt[0], *m1 = a->dopt[1];
    for (size_t i = 0; i < nt; i++) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (!t->is_param)
            continue;
        uint16_t *lowp = low ? fp_backend_cuda_weight_copy_at(be, p + t->offset) : NULL;
        if (adam)
            asegs[ns++] = (fp_cuda_adam_segment){p + t->offset, g + t->offset, m0 + t->offset * es,
                                                 m1 + t->offset * es, lowp, t->numel, 1};
        else
            segs[ns++] = (fp_cuda_segment){p + t->offset, g + t->offset, m0 ? (float *)m0 + t->offset : NULL, lowp,
                                           t->numel, 1};
    }
    fp_cuda_step_state *ds = a->dstate;
    void *stream = fp_backend_cuda_stream(be);
    rc = fp_cuda_optim_scalars_upload(a->dscal, a->hscal, stream);
    if (!rc)
        rc = adam ? fp_cuda_adam_step_dev(asegs, ns, oc, a->dopt_dtype, low ? low_dt : FP_DT_F32, &ds->skip, a->dscal,
                                          stream)
                  : fp_cuda_sgd_step_dev(segs, ns, oc->momentum, oc->weight_decay, oc->nesterov,
                                         low ? low_dt : FP_DT_F32, &ds->skip, a->dscal, stream);
    if (!rc && low)   /* skipped or not, the kernel wrote the cast of the weights it leaves */
        fp_backend_cuda_weight_copy_written(be);   /* before the master rounding below, which keeps or drops it */
    free(segs);
    free(asegs);
    size_t np = fp_model_num_params(m);
    fp_tensor pt = fp_tensor_of(p, FP_DT_F32, (fp_dims){1, 1, 1, (int)np});
    if (!rc && np && a->policy->master != FP_DT_F32)
        rc = ops->round(be, pt, pt, a->policy->master);
    for (int j = 0; !rc && np && j < a->nopt && a->dopt_dtype == FP_DT_F32 && a->policy->optim_state != FP_DT_F32;
         j++) {
        fp_tensor mt = fp_tensor_of(a->dopt[j], FP_DT_F32, (fp_dims){1, 1, 1, (int)np});
        rc = ops->round(be, mt, mt, a->policy->optim_state);
    }
    return rc;
}

/* Data parallel: the step state's flags (Inf / NaN gradient, non-finite loss, bad label) averaged over the ranks
 * on the model's stream (ncclAvg of 0 / 1 values: > 0 when set on any rank, as MPI_MAX of the host path), so that
 * every rank skips (or diverges on) the same steps without the host waiting. */
static int device_reduce_flags(fp_arm *a)
{
#ifdef HAVE_NCCL
    fp_cuda_step_state *ds = a->dstate;
    return fp_dist_nccl_allreduce_mean(a->cfg.dist, ds->flags, 3, FP_DT_F32, 0,
                                       fp_backend_cuda_stream(fp_model_backend(a->model)), NULL);
#else
    return no_nccl(a);
#endif
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
 * (the step state, step_scalars), the batch is uploaded through the backend (fixed slots while captured). */
static int step_queue(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, int captured)
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
        rc = device_reduce_flags(a);
    rc = rc ? rc : fp_cuda_step_update(ds, (int)a->policy->scaling, a->scaler.growth_factor, a->scaler.backoff_factor,
                                       a->scaler.growth_interval, stream);
    /* 6. the optimizer (SGD, Adam / AdamW), doing nothing on the device's skip */
    rc = rc ? rc : device_optim(a);
    rc = rc ? rc : mark(a, 4, stream, captured);
    return rc;
}

/* ---------------------------------------------------------------- the step as a CUDA graph (cfg.cuda_graph) */

enum { STEP_EAGER, STEP_CAPTURE, STEP_REPLAY };
#define GRAPH_MAX_CAPTURES 8   /* recaptures after the buffers moved, before the graph is given up */

/* The graph is given up for the run: one line on stderr, said once, and in the run's events. */
static void graph_off(fp_arm *a, const char *why)
{
    fp_cuda_graph_destroy(a->graph);
    a->graph = NULL;
    if (a->graph_off)
        return;
    a->graph_off = 1;
    snprintf(a->graph_why, sizeof a->graph_why, "%s", why);
    fprintf(stderr, "cuda graph: off (%s arm: %s)\n", a->policy_name, a->graph_why);
}

/* The graph read buffers that moved, or was captured for another batch size: dropped; an eager step on the buffers
 * as they are now, then a new capture. */
static void graph_drop(fp_arm *a)
{
    fp_cuda_graph_destroy(a->graph);
    a->graph = NULL;
    a->graph_warm = 0;
}

/* The bytes of the batch's two uploads (model_backward.c's forward_loss: the images, then the labels). */
static size_t image_bytes(const fp_arm *a, const fp_batch *b)
{
    fp_dims d = fp_model_input_dims(a->model);
    return (size_t)b->n * (size_t)d.h * (size_t)d.w * (size_t)d.c * sizeof(float);
}

/* What this step does: eagerly (not asked; data parallel; the first step and the first after the buffers moved;
 * a step that samples probes, evaluates or checkpoints (fp_arm_eager_next); after a restore), capture, or replay. */
static int graph_mode(fp_arm *a, const fp_batch *b)
{
    const int asked_eager = a->graph_eager;
    a->graph_eager = 0;
    if (!a->cfg.cuda_graph || a->graph_off)
        return STEP_EAGER;
    if (a->cfg.dist) {
        graph_off(a, "data-parallel steps run eagerly");
        return STEP_EAGER;
    }
    fp_backend *be = fp_model_backend(a->model);
    if (a->graph && (b->n != a->graph_n || fp_backend_cuda_layout_gen(be) != a->graph_gen))
        graph_drop(a);
    /* the graph's convolutions read the 16-bit weight copy, or cast, as they did when it was captured: a step
     * after a host write into the weights (the copy invalid) runs eagerly, and its optimizer rewrites the copy */
    const int wc_moved = a->graph && fp_backend_cuda_weight_copy_valid(be) != a->graph_wc_before;
    if (asked_eager || !a->graph_warm || wc_moved || a->opt_host_newer || a->check_reduce || a->hook ||
        fp_probe_wants_all(fp_model_probe(a->model)))
        return STEP_EAGER;
    if (!a->graph && a->graph_captures >= GRAPH_MAX_CAPTURES && a->graph_steps < 4 * (int64_t)a->graph_captures) {
        graph_off(a, "the step's buffers kept moving (a new capture every few steps)");
        return STEP_EAGER;
    }
    return a->graph ? STEP_REPLAY : STEP_CAPTURE;
}

/* Captures the step into a graph and runs it (one launch); FP_OK with *ran set when it ran. Anything that fails
 * (the capture, an operation not allowed in it, the instantiation, a step whose uploads are not exactly the batch's
 * images and labels) leaves *ran 0 with the stream out of capture: the caller runs the step eagerly. */
static int graph_capture(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, int *ran)
{
    fp_model *m = a->model;
    fp_backend *be = fp_model_backend(m);
    void *stream = fp_backend_cuda_stream(be);
    const size_t ib = image_bytes(a, b), lb = (size_t)b->n * sizeof(int);
    *ran = 0;
    int rc = fp_backend_cuda_fixed_reserve(be, 0, ib);   /* no pinned allocation while capturing */
    rc = rc ? rc : fp_backend_cuda_fixed_reserve(be, 1, lb);
    if (rc) {
        graph_off(a, fp_error_message());
        return FP_OK;
    }
    const unsigned long long gen = fp_backend_cuda_layout_gen(be);
    const int wc = fp_backend_cuda_weight_copy_valid(be);
    void *exec = NULL;
    char why[200] = "";
    fp_backend_cuda_fixed_uploads(be, 1);
    rc = fp_cuda_graph_begin(stream);
    if (!rc) {
        int qrc = step_queue(a, b, r, 1);
        if (qrc)
            snprintf(why, sizeof why, "capture: %s", fp_error_message());
        rc = fp_cuda_graph_end(stream, &exec);   /* ends the capture in any case */
        if (!rc && qrc) {
            fp_cuda_graph_destroy(exec);
            exec = NULL;
            rc = qrc;
        }
    }
    fp_backend_cuda_fixed_uploads(be, 0);
    if (rc && !why[0])
        snprintf(why, sizeof why, "%s", fp_error_message());
    if (!rc && (fp_backend_cuda_fixed_count(be) != 2 || fp_backend_cuda_fixed_bytes(be, 0) != ib ||
                fp_backend_cuda_fixed_bytes(be, 1) != lb)) {
        snprintf(why, sizeof why, "the step uploads %d buffers, not the batch's images and labels",
                 fp_backend_cuda_fixed_count(be));
        rc = FP_EINTERNAL;
    }
    const int moved = !rc && fp_backend_cuda_layout_gen(be) != gen;   /* while captured: try again later */
    if (rc || moved) {   /* nothing ran: the device is as before; the host's view of the weight copy too */
        fp_cuda_graph_destroy(exec);
        if (!wc)
            fp_backend_cuda_weight_copy_invalidate(be);
        if (moved) {
            a->graph_captures++;
            graph_drop(a);
        } else {
            graph_off(a, why);
        }
        return FP_OK;
    }
    rc = fp_backend_cuda_fixed_prime(be);   /* the batch into the slots' device twins, before the first launch */
    if (rc || (rc = fp_cuda_graph_launch(exec, stream))) {
        fp_cuda_graph_destroy(exec);
        if (!wc)
            fp_backend_cuda_weight_copy_invalidate(be);
        graph_off(a, fp_error_message());
        return FP_OK;
    }
    a->graph = exec;
    a->graph_n = b->n;
    a->graph_gen = gen;
    a->graph_wc_before = wc;
    a->graph_wc_after = fp_backend_cuda_weight_copy_valid(be);
    a->graph_captures++;
    *ran = 1;
    return FP_OK;
}

/* One replay: this step's batch into the fixed upload slots (the previous step's end synchronisation says the
 * graph no longer reads them), one launch; then the host's view of the model and of the weight copy as the eager
 * step leaves it (the parameters, gradients and running statistics moved on the device). *ran 0: the launch
 * failed, the graph is given up and the caller runs the step eagerly. */
static int graph_replay(fp_arm *a, const fp_batch *b, int *ran)
{
    fp_model *m = a->model;
    fp_backend *be = fp_model_backend(m);
    *ran = 0;
    int rc = fp_backend_cuda_fixed_refill(be, 0, b->images, image_bytes(a, b));
    rc = rc ? rc : fp_backend_cuda_fixed_refill(be, 1, b->labels, (size_t)b->n * sizeof(int));
    rc = rc ? rc : fp_cuda_graph_launch(a->graph, fp_backend_cuda_stream(be));
    if (rc) {
        graph_off(a, fp_error_message());
        return FP_OK;
    }
    rc = !fp_model_backend_params(m) || !fp_model_backend_grads(m) || !fp_model_backend_buffers(m) ? FP_EINTERNAL
                                                                                                 : FP_OK;
    if (a->graph_wc_after)
        fp_backend_cuda_weight_copy_written(be);
    else
        fp_backend_cuda_weight_copy_invalidate(be);
    *ran = 1;
    return rc;
}

void fp_arm_device_graph_line(const fp_arm *a, char *buf, size_t size)
{
    if (a->graph_off)
        snprintf(buf, size, "cuda graph: off (%s)%s", a->graph_why,
                 a->graph_steps ? "; it had run steps before" : "");
    else if (a->graph_steps)
        snprintf(buf, size, "cuda graph: on, captured at step %lld, ran %lld of %lld steps (%d capture%s)",
                 (long long)a->graph_first, (long long)a->graph_steps, (long long)a->iteration, a->graph_captures,
                 a->graph_captures == 1 ? "" : "s");
    else
        snprintf(buf, size, "cuda graph: on, never captured (every step ran eagerly)");
}

void fp_arm_device_upload_line(const fp_arm *a, char *buf, size_t size)
{
    fp_backend_cuda_upload_counts u;
    fp_backend_cuda_upload_counts_of(fp_model_backend(a->model), &u);
    snprintf(buf, size, "GPU uploads (batches, labels): %lld prefetched %.0f MB, %lld direct %.0f MB, %lld staged %.1f MB, "
             "%lld plain %.1f MB, %lld graph slots %.0f MB", u.prefetched, u.prefetched_bytes / 1e6, u.direct,
             u.direct_bytes / 1e6, u.staged, u.staged_bytes / 1e6, u.plain, u.plain_bytes / 1e6, u.fixed,
             u.fixed_bytes / 1e6);
}

/* ONE TRAINING STEP ON A DEVICE: fp_arm_step's parts in its order, queued on the model's stream without the host
 * waiting (issue 22); the loss, the non-finite flags, the skip decision and GradScaler's state stay on the
 * device (kernels.h fp_cuda_step_state), read back once at the end (one copy into pinned memory, one stream
 * synchronisation), after which the result and the host's GradScaler are set from it: the same figures as
 * the host path. Only a restore's optimizer-state upload and a sampling step's probes make the host wait
 * otherwise. With cfg.cuda_graph the queued part (step_queue) is captured once in a CUDA graph and replayed
 * (graph_mode says when). Times are the device's, from events on the stream: forward (+ loss), backward,
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
        if ((rc = opt_transfer(a, 0)))
            return rc;
        a->opt_host_newer = 0;
        a->graph_eager = 1;
    }
    if (!a->dev_scaler_set || a->dev_scale != a->scaler.scale || a->dev_tracker != a->scaler.clean_steps)
        rc = fp_cuda_step_set_scaler(ds, a->scaler.scale, a->scaler.clean_steps, stream);   /* first, or restored */
    rc = rc ? rc : step_scalars(a, r->lr, step);
    /* what the host wrote into the model goes over now, outside the step (a replay would not upload it) */
    rc = rc ? rc : fp_model_sync_to_device(m);
    int mode = rc ? STEP_EAGER : graph_mode(a, b), ran = 0;
    if (!rc && mode == STEP_REPLAY)
        rc = graph_replay(a, b, &ran);
    else if (!rc && mode == STEP_CAPTURE)
        rc = graph_capture(a, b, r, &ran);
    if (!rc && !ran)
        rc = step_queue(a, b, r, 0);
    /* the next batch's images start crossing on the copy stream while this step computes (for an eager step's upload
     * or a replay's refill of the graph's device twin); a prefetch that cannot be had leaves the upload as it was */
    if (!rc && next && next->n > 0) {
        int started = fp_backend_cuda_prefetch(be, next->images, image_bytes(a, next));
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
