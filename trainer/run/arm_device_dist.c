/* arm_device_dist.c — a device arm's data-parallel parts (CUDA builds): the gradients' all-reduce over NCCL
 * (overlapped with the backward, or checked against an fp32 one) and the step state's flags averaged over the ranks.
 * Promise: the host does not wait (but at a checked step); without NCCL every entry point fails with one line. */
#include "config.h"
#include <stdlib.h>
#include "error.h"
#include "trainer/backend.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/run/arm_device_internal.h"

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

/* Data parallel: the step state's flags (Inf / NaN gradient, non-finite loss, bad label) averaged over the ranks
 * on the model's stream (ncclAvg of 0 / 1 values: > 0 when set on any rank, as MPI_MAX of the host path), so that
 * every rank skips (or diverges on) the same steps without the host waiting. */
int fp_arm_device_reduce_flags(fp_arm *a)
{
#ifdef HAVE_NCCL
    fp_cuda_step_state *ds = a->dstate;
    return fp_dist_nccl_allreduce_mean(a->cfg.dist, ds->flags, 3, FP_DT_F32, 0,
                                       fp_backend_cuda_stream(fp_model_backend(a->model)), NULL);
#else
    return no_nccl(a);
#endif
}
