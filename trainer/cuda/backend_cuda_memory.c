/* backend_cuda_memory.c — the CUDA backend's device memory: allocations from the instance's arena with their
 * accounting, the staging slots and scratch ops stage operands in, and the copies on the stream (download, copy,
 * zero). Promise: a slot grows once to what was reserved for it; the accounting counts what is carved. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include "trainer/cuda/backend_cuda_internal.h"
#include "trainer/cuda/backend_kernels.h"

static size_t staging_bytes(const fp_backend *be)
{
    size_t s = be->scratch_cap + be->hist_work_cap + be->err_work_cap;
    for (int i = 0; i < FP_BCU_SLOTS; i++)
        s += be->st_cap[i];
    for (int i = 0; i < FP_BCU_UP_SLOTS; i++)
        s += be->up[i].dev_cap;
    return s + be->pre.slot.dev_cap;
}

/* *buf holds at least bytes of arena memory (contents not kept). Releasing and re-carving while earlier
 * kernels still read the old block is safe: every user runs on the one stream, in order. */
void *fp_bcu_grow_slot(fp_backend *be, void **buf, size_t *cap, size_t bytes, const char *what)
{
    if (bytes <= *cap && *buf)
        return *buf;
    be->released += *buf != NULL;
    fp_arena_release(be->arena, *buf);
    *buf = NULL;
    *cap = 0;
    char w[128];
    snprintf(w, sizeof w, "%s%s%s", be->label[0] ? be->label : "", be->label[0] ? " " : "", what);
    if (fp_arena_alloc(be->arena, bytes, w, buf))
        return NULL;
    *cap = bytes;
    size_t s = staging_bytes(be);
    if (s > be->staging_peak)
        be->staging_peak = s;
    return *buf;
}

/* A slot that must grow takes at least what reserve asked for it (fp_bcu_reserve), so it grows once. */
void *fp_bcu_stage(fp_backend *be, int slot, size_t bytes)
{
    if (bytes > be->st_cap[slot] && be->st_want[slot] > bytes)
        bytes = be->st_want[slot];
    return fp_bcu_grow_slot(be, &be->st[slot], &be->st_cap[slot], bytes, "(staging)");
}

void *fp_backend_cuda_scratch(fp_backend *be, size_t bytes)
{
    return fp_bcu_grow_slot(be, &be->scratch, &be->scratch_cap, bytes, "(scratch)");
}

fp_dtensor fp_bcu_as(fp_backend *be, const fp_tensor *t, fp_dtype dt, int slot, int *rc)
{
    fp_dtensor o = fp_bcu_dt(t);
    *rc = FP_OK;
    if (t->dt == dt)
        return o;
    size_t n = fp_tensor_count(t);
    void *p = fp_bcu_stage(be, slot, n * (size_t)fp_dtype_bytes(dt));
    if (!p) {
        *rc = FP_ENOMEM;
        return o;
    }
    *rc = fp_cbk_cast(p, dt, t->p, t->dt, n, be->stream);
    o.data = p;
    o.dtype = dt;
    return o;
}

fp_dtensor fp_bcu_zeroed(fp_backend *be, fp_dims d, fp_dtype dt, int slot, int *rc)
{
    fp_dtensor o = {NULL, dt, d};
    fp_tensor t = fp_tensor_of(NULL, dt, d);
    size_t bytes = fp_tensor_count(&t) * (size_t)fp_dtype_bytes(dt);
    o.data = fp_bcu_stage(be, slot, bytes);
    if (!o.data) {
        *rc = FP_ENOMEM;
        return o;
    }
    *rc = fp_bcu_cuda_err(cudaMemsetAsync(o.data, 0, bytes, (cudaStream_t)be->stream), "zero staging");
    return o;
}

int fp_bcu_land_grad(fp_backend *be, const fp_tensor *dst, const fp_dtensor *tmp, int accumulate)
{
    size_t n = fp_tensor_count(dst);
    if (accumulate)   /* fp32: old + r; 16-bit: round(old + round(r)) */
        return fp_cbk_add(dst->p, dst->dt, dst->p, dst->dt, tmp->data, tmp->dtype, n, 1, be->stream);
    if (tmp->dtype == dst->dt)
        return fp_bcu_cuda_err(cudaMemcpyAsync(dst->p, tmp->data, n * (size_t)fp_dtype_bytes(dst->dt), cudaMemcpyDeviceToDevice,
                                        (cudaStream_t)be->stream), "copy gradient");
    return fp_cbk_cast(dst->p, dst->dt, tmp->data, tmp->dtype, n, be->stream);
}

int fp_bcu_alloc(fp_backend *be, void **p, size_t bytes)
{
    TRY(fp_arena_alloc(be->arena, bytes ? bytes : 1, be->label[0] ? be->label : "tensor", p));
    be->allocated += bytes;
    if (be->allocated > be->allocated_peak)
        be->allocated_peak = be->allocated;
    return FP_OK;
}

void fp_bcu_free(fp_backend *be, void *p, size_t bytes)
{
    if (!p)
        return;
    fp_bcu_wc_freed(be, p, bytes ? bytes : 1);
    be->released++;
    fp_arena_release(be->arena, p);
    be->allocated -= bytes <= be->allocated ? bytes : be->allocated;
}

int fp_bcu_xfer(fp_backend *be, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind k, const char *what)
{
    if (!bytes)
        return FP_OK;
    if (!dst || !src)
        return fp_fail(FP_EINVAL, "cuda backend: %s with a NULL pointer", what);
    if (dst == src)
        return FP_OK;
    return fp_bcu_cuda_err(cudaMemcpyAsync(dst, src, bytes, k, (cudaStream_t)be->stream), what);
}

/* Every instance's table downloads (fp_backend_cuda_downloads): a debug counter for the tests. */
static _Atomic long long downloads_n, downloads_bytes;

void fp_backend_cuda_downloads(long long *count, long long *bytes)
{
    if (count)
        *count = downloads_n;
    if (bytes)
        *bytes = downloads_bytes;
}

int fp_bcu_download(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    be->host_waits += bytes > 0;   /* into pageable memory: cudaMemcpyAsync returns once the copy is done */
    downloads_n += bytes > 0;
    downloads_bytes += (long long)bytes;
    return fp_bcu_xfer(be, dst, src, bytes, cudaMemcpyDeviceToHost, "download");
}

int fp_bcu_copy(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    fp_bcu_wc_touch(be, dst, bytes);
    return fp_bcu_xfer(be, dst, src, bytes, cudaMemcpyDeviceToDevice, "copy");
}

int fp_bcu_zero(fp_backend *be, void *p, size_t bytes)
{
    if (bytes && !p)
        return fp_fail(FP_EINVAL, "cuda backend: zero of a NULL pointer");
    fp_bcu_wc_touch(be, p, bytes);
    return bytes ? fp_bcu_cuda_err(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)be->stream), "zero") : FP_OK;
}

/* Staging is carved when an op first stages into a slot, at the size reserved for it: a policy whose ops
 * stage nothing (tf32: fp32 activations and gradients go to cuDNN / cuBLASLt as they are) holds none, and the
 * accounting (memory: staging) counts what is carved. An op never allocates again once its slot has the
 * reserved size, as backend.h asks. */
int fp_bcu_reserve(fp_backend *be, size_t act_elems, size_t weight_elems)
{
    /* inputs / outputs as fp32 (the widest format) for activations; the weight slot for weights */
    static const int act_slots[] = {FP_BCU_A, FP_BCU_B, FP_BCU_OUT};
    for (size_t i = 0; i < sizeof act_slots / sizeof *act_slots; i++)
        if (act_elems * sizeof(float) > be->st_want[act_slots[i]])
            be->st_want[act_slots[i]] = act_elems * sizeof(float);
    if (weight_elems * sizeof(float) > be->st_want[FP_BCU_W])
        be->st_want[FP_BCU_W] = weight_elems * sizeof(float);
    return FP_OK;
}

void fp_bcu_memory(const fp_backend *be, fp_backend_mem *o)
{
    o->allocated = be->allocated;
    o->allocated_peak = be->allocated_peak;
    o->workspace = o->workspace_peak = 0;
    for (int i = 0; i < 2; i++)
        if (be->ctx[i]) {
            fp_cudnn_stats s;
            fp_cudnn_get_stats(be->ctx[i], &s);
            o->workspace += s.bytes;
        }
    o->workspace_peak = o->workspace;   /* the workspace only grows */
    o->staging = staging_bytes(be);
    o->staging_peak = be->staging_peak > o->staging ? be->staging_peak : o->staging;
}
