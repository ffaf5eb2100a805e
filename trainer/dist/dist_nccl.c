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
} nccl_state;

static int nccl_fail(ncclResult_t r, const char *what)
{
    return fp_fail(FP_EIO, "NCCL %s: %s", what, ncclGetErrorString(r));
}

static int cuda_fail(cudaError_t e, const char *what)
{
    return fp_fail(FP_EIO, "CUDA %s: %s", what, cudaGetErrorString(e));
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
        free(s);
        return cuda_fail(ce, "creating the all-reduce stream");
    }
    if ((nr = ncclCommInitRank(&s->comm, d->size, id, d->rank)) != ncclSuccess) {
        cudaStreamDestroy(s->stream);
        free(s);
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
    ncclCommDestroy(s->comm);
    cudaEventDestroy(s->ready);
    cudaEventDestroy(s->done);
    cudaStreamDestroy(s->stream);
    free(s);
    d->nccl = NULL;
}

int fp_dist_nccl_allreduce_mean(fp_dist *d, void *dev, size_t n, fp_dtype wire, size_t bucket_bytes, void *after,
                                fp_dist_stats *st)
{
    ncclDataType_t t = wire == FP_DT_F32 ? ncclFloat32 : wire == FP_DT_F16 ? ncclFloat16 : ncclBfloat16;
    if (wire != FP_DT_F32 && wire != FP_DT_F16 && wire != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "all-reduce in %s: valid formats are fp32, fp16, bf16", fp_dtype_name(wire));
    int rc = fp_dist_nccl_init(d);
    nccl_state *s = d ? d->nccl : NULL;
    if (rc || !s || n == 0)
        return rc;
    const size_t wb = (size_t)fp_dtype_bytes(wire);
    size_t per = (bucket_bytes ? bucket_bytes : FP_DIST_BUCKET_BYTES) / wb;
    per = per ? per : 1;
    cudaStream_t model = (cudaStream_t)after;
    cudaError_t ce;
    if ((ce = cudaEventRecord(s->ready, model)) != cudaSuccess ||
        (ce = cudaStreamWaitEvent(s->stream, s->ready, 0)) != cudaSuccess)
        return cuda_fail(ce, "ordering the all-reduce after the backward");
    ncclResult_t nr = ncclGroupStart();
    int nb = 0;
    for (size_t off = 0; nr == ncclSuccess && off < n; off += per, nb++)
        nr = ncclAllReduce((char *)dev + off * wb, (char *)dev + off * wb, n - off < per ? n - off : per, t, ncclAvg,
                           s->comm, s->stream);
    ncclResult_t ne = ncclGroupEnd();
    if (nr != ncclSuccess || ne != ncclSuccess)
        return nccl_fail(nr != ncclSuccess ? nr : ne, "ncclAllReduce");
    if ((ce = cudaEventRecord(s->done, s->stream)) != cudaSuccess ||
        (ce = cudaStreamWaitEvent(model, s->done, 0)) != cudaSuccess)
        return cuda_fail(ce, "ordering the update after the all-reduce");
    if (st) {
        st->bytes += (int64_t)(n * wb);
        st->buckets += nb;
    }
    return FP_OK;
}
