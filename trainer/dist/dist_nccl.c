/* dist_nccl.c — the GPU ranks' all-reduce (dist.h): one NCCL communicator over the MPI ranks, its own
 * stream, buckets reduced with ncclAvg in fp32, fp16 or bf16, ordered against the model's stream by events.
 * Promise: the host never waits here (the model's stream does); a NCCL error comes back as one line. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"   /* nccl.h declares f() for f(void) */
#include <nccl.h>
#pragma GCC diagnostic pop
#include "error.h"
#include "trainer/dist/dist.h"
#include "trainer/dist/dist_internal.h"

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready, done;
    fp_dist_plan plan;          /* the overlapped all-reduce (fp_dist_nccl_reduce_*) */
} nccl_state;

static int nccl_fail(ncclResult_t r, const char *what)
{
    return fp_fail(FP_EIO, "NCCL %s: %s", what, ncclGetErrorString(r));
}

static int cuda_fail(cudaError_t e, const char *what)
{
    return fp_fail(FP_EIO, "CUDA %s: %s", what, cudaGetErrorString(e));
}

/* The stream and events of s (those made), and s. */
static void destroy_cuda(nccl_state *s)
{
    if (s->done)
        cudaEventDestroy(s->done);
    if (s->ready)
        cudaEventDestroy(s->ready);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    free(s);
}

int fp_dist_nccl_init(fp_dist *d)
{
    if (!d || d->nccl)
        return FP_OK;
    ncclUniqueId id;
    ncclResult_t nr;
    if (d->rank == 0 && (nr = ncclGetUniqueId(&id)) != ncclSuccess)
        return nccl_fail(nr, "ncclGetUniqueId");
    int rc = fp_dist_broadcast(d, &id, sizeof id);
    if (rc)
        return rc;
    nccl_state *s = calloc(1, sizeof *s);
    if (!s)
        return fp_fail(FP_ENOMEM, "out of memory");
    cudaError_t ce;
    if ((ce = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (ce = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming)) != cudaSuccess ||
        (ce = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming)) != cudaSuccess) {
        destroy_cuda(s);
        return cuda_fail(ce, "creating the all-reduce stream");
    }
    /* one rank too (fp_dist_init_local): the same call, nranks 1 (ncclCommInitAll's way for one device) */
    if ((nr = ncclCommInitRank(&s->comm, d->size, id, d->rank)) != ncclSuccess) {
        destroy_cuda(s);
        return nccl_fail(nr, "ncclCommInitRank");
    }
    d->nccl = s;
    return FP_OK;
}

void fp_dist_nccl_free(fp_dist *d)
{
    nccl_state *s = d ? d->nccl : NULL;
    if (!s)
        return;
    fp_dist_plan_free(&s->plan);
    ncclCommDestroy(s->comm);
    destroy_cuda(s);
    d->nccl = NULL;
}

static ncclDataType_t nccl_type(fp_dtype wire)
{
    return wire == FP_DT_F32 ? ncclFloat32 : wire == FP_DT_F16 ? ncclFloat16 : ncclBfloat16;
}

int fp_dist_nccl_reduce_begin(fp_dist *d, void *dev, size_t n, fp_dtype wire, size_t bucket_bytes)
{
    if (wire != FP_DT_F32 && wire != FP_DT_F16 && wire != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "all-reduce in %s: valid formats are fp32, fp16, bf16", fp_dtype_name(wire));
    int rc = fp_dist_nccl_init(d);
    nccl_state *s = d ? d->nccl : NULL;
    return rc || !s ? rc : fp_dist_plan_begin(&s->plan, dev, n, wire, bucket_bytes);
}

/* Every bucket that may go (all when force), in order: an event on the model's stream, the all-reduce stream
 * waits for it, ncclAllReduce (ncclAvg) in place. */
static int post_nccl(nccl_state *s, int force, cudaStream_t model)
{
    fp_dist_plan *p = &s->plan;
    const size_t wb = (size_t)fp_dtype_bytes(p->wire);
    size_t off, k;
    for (int b; (b = fp_dist_plan_next(p, force, &off, &k)) >= 0; p->posted++) {
        cudaError_t ce;
        if ((ce = cudaEventRecord(s->ready, model)) != cudaSuccess ||
            (ce = cudaStreamWaitEvent(s->stream, s->ready, 0)) != cudaSuccess)
            return cuda_fail(ce, "ordering a bucket's all-reduce after its gradients");
        char *at = (char *)p->x + off * wb;
        ncclResult_t nr = ncclAllReduce(at, at, k, nccl_type(p->wire), ncclAvg, s->comm, s->stream);
        if (nr != ncclSuccess)
            return nccl_fail(nr, "ncclAllReduce");
    }
    return FP_OK;
}

int fp_dist_nccl_reduce_ready(fp_dist *d, size_t off, size_t count, void *stream)
{
    nccl_state *s = d ? d->nccl : NULL;
    if (!s)
        return FP_OK;
    int rc = fp_dist_plan_mark(&s->plan, off, count);
    return rc ? rc : post_nccl(s, 0, (cudaStream_t)stream);
}

int fp_dist_nccl_reduce_end(fp_dist *d, void *stream, fp_dist_stats *st)
{
    nccl_state *s = d ? d->nccl : NULL;
    if (!s)
        return FP_OK;
    fp_dist_plan *p = &s->plan;
    if (!p->live)
        return fp_fail(FP_EINTERNAL, "all-reduce: end without begin");
    int early = p->posted, rc = post_nccl(s, 1, (cudaStream_t)stream);
    p->live = 0;
    if (rc)
        return rc;
    cudaError_t ce;
    if ((ce = cudaEventRecord(s->done, s->stream)) != cudaSuccess ||
        (ce = cudaStreamWaitEvent((cudaStream_t)stream, s->done, 0)) != cudaSuccess)
        return cuda_fail(ce, "ordering the update after the all-reduce");
    if (st) {
        st->bytes += (int64_t)(p->n * (size_t)fp_dtype_bytes(p->wire));
        st->buckets += p->nb;
        st->early += early;
    }
    return FP_OK;
}

int fp_dist_nccl_allreduce_mean(fp_dist *d, void *dev, size_t n, fp_dtype wire, size_t bucket_bytes, void *after,
                                fp_dist_stats *st)
{
    int rc = fp_dist_nccl_reduce_begin(d, dev, n, wire, bucket_bytes);
    nccl_state *s = d ? d->nccl : NULL;
    if (rc || !s)
        return rc;
    if ((rc = fp_dist_nccl_reduce_ready(d, 0, n, after))) {
        s->plan.live = 0;
        return rc;
    }
    int early = st ? st->early : 0;
    rc = fp_dist_nccl_reduce_end(d, after, st);
    if (st)
        st->early = early;   /* all posted at once, after the backward: none overlapped */
    return rc;
}

int fp_dist_nccl_allreduce_sum_f32(fp_dist *d, float *dev, size_t n, void *stream)
{
    int rc = fp_dist_nccl_init(d);
    nccl_state *s = d ? d->nccl : NULL;
    if (rc || !s)
        return rc;
    cudaError_t ce;
    if ((ce = cudaEventRecord(s->ready, (cudaStream_t)stream)) != cudaSuccess ||
        (ce = cudaStreamWaitEvent(s->stream, s->ready, 0)) != cudaSuccess)
        return cuda_fail(ce, "ordering the batchnorm statistics' all-reduce after them");
    ncclResult_t nr = ncclAllReduce(dev, dev, n, ncclFloat32, ncclSum, s->comm, s->stream);
    if (nr != ncclSuccess)
        return nccl_fail(nr, "ncclAllReduce (batchnorm statistics)");
    if ((ce = cudaEventRecord(s->done, s->stream)) != cudaSuccess ||
        (ce = cudaStreamWaitEvent((cudaStream_t)stream, s->done, 0)) != cudaSuccess)
        return cuda_fail(ce, "ordering the batchnorm after its statistics' all-reduce");
    return FP_OK;
}
