/* backend_cuda.c — the CUDA backend of backend.h: instance (arena, cuDNN contexts on one stream), device
 * memory with accounting, staging (the uploads' paths are upload.c's), the 16-bit weight copy the optimizer
 * writes (conv / linear read it instead of casting), casts, relu, residual add / accumulate, softmax
 * cross-entropy, the fused unscale + check, device histograms for the probes and the parameter pass's update with
 * its lost updates (update_delta), the per-layer error's sums for the analysis (layer_error_dev.h), and the ops
 * table. Promises: backend.h's semantics (accumulate flags, dtypes, compute formats: fp32 never TF32); every op
 * checks dims and dtypes first; all work on one stream (large uploads' and prefetches' host-to-device copies on a
 * copy stream, ordered with it by events); the synchronisation waits for both, so that an upload's source
 * (upload.c says when it is not free at once) is free when it returns. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/convert.h"
#include "gpu_detect.h"
#include "trainer/cuda/backend_cuda_internal.h"
#include "trainer/cuda/backend_kernels.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/layer_error_dev.h"

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)

int fp_bcu_cuda_err(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return FP_OK;
    return fp_fail(e == cudaErrorMemoryAllocation ? FP_ENOMEM : FP_EINTERNAL, "cuda backend: %s: %s (%s)", what,
                   cudaGetErrorString(e), cudaGetErrorName(e));
}

int fp_bcu_gave_up(void)
{
    (void)cudaGetLastError();   /* a failed runtime call is remembered by cudaGetLastError, which the next launch check reads */
    return 0;
}

/* ---------------------------------------------------------------- staging */

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

/* A slot that must grow takes at least what reserve asked for it (cuda_reserve), so it grows once. */
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

fp_cudnn *fp_bcu_ctx(fp_backend *be, fp_dtype compute, int *rc)
{
    int i = compute == FP_DT_TF32;
    *rc = FP_OK;
    if (!be->ctx[i]) {
        fp_cudnn_config c;
        fp_cudnn_config_default(&c, i ? FP_DT_TF32 : FP_DT_F32);
        c.stream = be->stream;
        if ((*rc = fp_cudnn_create(&be->ctx[i], &c)) != FP_OK)
            return NULL;
    }
    fp_cudnn_set_label(be->ctx[i], be->label);
    return be->ctx[i];
}

/* ---------------------------------------------------------------- instance and memory */

size_t fp_backend_cuda_arena_share(int arms)
{
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    size_t fr = 0, total = 0;
    if (!gpu.available || cudaMemGetInfo(&fr, &total) != cudaSuccess)
        return 0;
    return fr / 10 * 9 / (size_t)(arms < 1 ? 1 : arms);
}

size_t fp_backend_cuda_default_arena(void) { return fp_backend_cuda_arena_share(2); }

void fp_backend_cuda_set_loss_scale(fp_backend *be, const float *d_scale) { be->loss_scale = d_scale; }

unsigned long long fp_backend_cuda_layout_gen(const fp_backend *be)
{
    unsigned long long g = be->released;
    for (int i = 0; i < 2; i++)
        if (be->ctx[i]) {
            fp_cudnn_stats st;
            fp_cudnn_get_stats(be->ctx[i], &st);
            g += (unsigned long long)st.allocations + 1;
        }
    return g;
}

static void cuda_destroy(fp_backend *be)
{
    if (!be)
        return;
    if (be->stream)
        cudaStreamSynchronize((cudaStream_t)be->stream);
    fp_bcu_upload_free(be);
    if (be->sync_event)
        cudaEventDestroy((cudaEvent_t)be->sync_event);
    fp_cudnn_free(be->ctx[1]);   /* borrows ctx[0]'s stream: first */
    fp_cudnn_free(be->ctx[0]);
    fp_arena_free_all(be->arena);   /* staging, scratch and every allocation with it */
    free(be->wc.start);   /* the weight copy's tensor table (its memory went with the arena) */
    free(be->wc.pos);
    free(be);
}

int fp_backend_cuda_create_sized(fp_backend **out, size_t arena_bytes, const char *name)
{
    *out = NULL;
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    if (!gpu.available)
        return fp_fail(FP_EUNAVAIL, "cuda backend: %s", gpu.reason);
    if (!arena_bytes)
        return fp_fail(FP_EINVAL, "cuda backend: an arena of 0 bytes");
    fp_backend *be = calloc(1, sizeof *be);
    if (!be)
        return fp_fail(FP_ENOMEM, "cuda backend: out of memory");
    snprintf(be->name, sizeof be->name, "%s", name ? name : "cuda backend");
    int rc = fp_arena_new_device(&be->arena, arena_bytes, be->name);
    if (!rc) {
        fp_cudnn_config c;
        fp_cudnn_config_default(&c, FP_DT_F32);
        rc = fp_cudnn_create(&be->ctx[0], &c);
    }
    if (!rc) {
        be->stream = fp_cudnn_stream(be->ctx[0]);
        rc = fp_arena_alloc(be->arena, FP_CUDA_XENT_OUT_BYTES, "cuda backend loss result", &be->xent_out);
    }
    if (!rc)
        rc = fp_arena_alloc(be->arena, sizeof(int), "cuda backend non-finite flag", (void **)&be->found);
    if (rc) {
        cuda_destroy(be);
        return rc;
    }
    *out = be;
    return FP_OK;
}

static int cuda_create(fp_backend **out)
{
    *out = NULL;
    fp_gpu_info_t gpu;
    fp_gpu_detect(&gpu);
    if (!gpu.available)
        return fp_fail(FP_EUNAVAIL, "cuda backend: %s", gpu.reason);
    size_t bytes = fp_backend_cuda_default_arena();
    if (!bytes)
        return fp_fail(FP_EUNAVAIL, "cuda backend: cannot read the device's memory size");
    return fp_backend_cuda_create_sized(out, bytes, NULL);
}

void fp_backend_cuda_set_label(fp_backend *be, const char *label)
{
    snprintf(be->label, sizeof be->label, "%s", label ? label : "");
    for (int i = 0; i < 2; i++)
        if (be->ctx[i])
            fp_cudnn_set_label(be->ctx[i], be->label);
}

void *fp_backend_cuda_stream(fp_backend *be) { return be->stream; }

static void cuda_set_threads(fp_backend *be, int threads) { (void)be; (void)threads; }   /* no host kernels */

/* Waits for the stream. Through an event made with cudaEventBlockingSync where it can be had: the host thread
 * sleeps until the GPU is done instead of spinning (cudaStreamSynchronize under the default scheduling spins
 * when the machine has idle cores), so the training thread's CPU time per step (steps.host_cpu_ns) is the host's
 * own work, not the wait for the GPU, and a core stays free for the data loader. */
static int cuda_sync(fp_backend *be)
{
    be->host_waits++;
    if (!be->sync_event) {
        cudaEvent_t e;
        if (cudaEventCreateWithFlags(&e, cudaEventBlockingSync | cudaEventDisableTiming) == cudaSuccess)
            be->sync_event = e;
        else
            fp_bcu_gave_up();
    }
    int rc = FP_OK;
    if (be->sync_event && cudaEventRecord((cudaEvent_t)be->sync_event, (cudaStream_t)be->stream) == cudaSuccess) {
        cudaError_t e = cudaEventSynchronize((cudaEvent_t)be->sync_event);
        if (e != cudaSuccess)
            return fp_fail(FP_EINTERNAL, "%s: waiting for the GPU: CUDA error: %s (%s)", be->name,
                           cudaGetErrorString(e), cudaGetErrorName(e));
    } else if ((rc = fp_cudnn_sync(be->ctx[0]))) {
        return rc;
    }
    if (be->pre.unsynced) {   /* a prefetch on the copy stream, used, dropped or not: its source is free on return too */
        cudaError_t e = cudaEventSynchronize((cudaEvent_t)be->pre.slot.copied);
        if (e != cudaSuccess)
            return fp_fail(FP_EINTERNAL, "%s: waiting for a prefetch: CUDA error: %s (%s)", be->name,
                           cudaGetErrorString(e), cudaGetErrorName(e));
        be->pre.unsynced = 0;
    }
    return FP_OK;
}

long long fp_backend_cuda_host_waits(const fp_backend *be) { return be ? be->host_waits : 0; }
void fp_backend_cuda_defer_loss(fp_backend *be, int on) { be->defer_loss = on != 0; }
const void *fp_backend_cuda_loss_result(fp_backend *be) { return be->xent_out; }

static int cuda_alloc(fp_backend *be, void **p, size_t bytes)
{
    TRY(fp_arena_alloc(be->arena, bytes ? bytes : 1, be->label[0] ? be->label : "tensor", p));
    be->allocated += bytes;
    if (be->allocated > be->allocated_peak)
        be->allocated_peak = be->allocated;
    return FP_OK;
}

static void wc_drop(fp_backend *be);
static int wc_hit(const fp_backend *be, const void *p, size_t bytes);

static void cuda_free(fp_backend *be, void *p, size_t bytes)
{
    if (!p)
        return;
    if (be->wc.copy && wc_hit(be, p, bytes ? bytes : 1))   /* its weights go: the copy with them */
        wc_drop(be);
    be->released++;
    fp_arena_release(be->arena, p);
    be->allocated -= bytes <= be->allocated ? bytes : be->allocated;
}

/* ---------------------------------------------------------------- the 16-bit weight copy (backend_cuda.h) */

static int overlaps(const void *a, size_t abytes, const void *b, size_t bbytes)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a && b && abytes && bbytes && x < y + bbytes && y < x + abytes;
}

/* [p, p + bytes) lies inside the n floats at base, at a whole float: *off gets its offset in floats. */
static int inside(const void *p, size_t bytes, const float *base, size_t n, size_t *off)
{
    uintptr_t x = (uintptr_t)p, b = (uintptr_t)base, all = n * sizeof(float);
    if (!p || !base || x < b || (x - b) % sizeof(float) || bytes > all || x - b > all - bytes)
        return 0;
    *off = (x - b) / sizeof(float);
    return 1;
}

static int wc_hit(const fp_backend *be, const void *p, size_t bytes)
{
    size_t all = be->wc.n * sizeof(float);
    return overlaps(p, bytes, be->wc.w, all) || overlaps(p, bytes, be->wc.master, all);
}

void fp_bcu_wc_touch(fp_backend *be, const void *p, size_t bytes)
{
    if (be->wc.valid && wc_hit(be, p, bytes))
        be->wc.valid = 0;
}

/* The tensor holding float offset off: its index (nseg when none). */
static size_t wc_seg(const fp_backend *be, size_t off)
{
    size_t lo = 0, hi = be->wc.nseg;   /* the last start <= off */
    if (off >= be->wc.n || !hi)
        return be->wc.nseg;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (be->wc.start[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    return be->wc.start[lo] <= off ? lo : be->wc.nseg;
}

static size_t wc_seg_end(const fp_backend *be, size_t k)
{
    return k + 1 < be->wc.nseg ? be->wc.start[k + 1] : be->wc.n;
}

int fp_bcu_wc_view(fp_backend *be, const fp_tensor *t, fp_dtype rd, fp_dtensor *o)
{
    size_t off, cnt = fp_tensor_count(t), k;
    if (!be->wc.valid || t->dt != FP_DT_F32 || rd != be->wc.dt ||
        !inside(t->p, cnt * sizeof(float), be->wc.w, be->wc.n, &off) || (k = wc_seg(be, off)) == be->wc.nseg ||
        off + cnt > wc_seg_end(be, k))
        return 0;
    o->data = (char *)be->wc.copy + (be->wc.pos[k] + (off - be->wc.start[k])) * sizeof(uint16_t);
    o->dtype = rd;
    o->dims = t->d;
    return 1;
}

static void wc_drop(fp_backend *be)
{
    void *c = be->wc.copy;
    size_t n = be->wc.copy_n;
    free(be->wc.start);
    free(be->wc.pos);
    memset(&be->wc, 0, sizeof be->wc);
    cuda_free(be, c, n * sizeof(uint16_t));
}

int fp_backend_cuda_weight_copy(fp_backend *be, const float *w, const float *master, size_t n, fp_dtype dt,
                                const size_t *starts, size_t nstarts)
{
    if (w && (!master || !n || !fp_bcu_is16(dt) || !starts || !nstarts || starts[0] != 0))
        return fp_fail(FP_EINVAL, "cuda backend: a weight copy needs weights, master weights, n > 0, fp16 or bf16 "
                       "and its tensors' offsets from 0");
    for (size_t i = 1; w && i < nstarts; i++)
        if (starts[i] <= starts[i - 1] || starts[i] >= n)
            return fp_fail(FP_EINVAL, "cuda backend: weight copy tensor %zu at %zu after %zu of %zu values", i,
                           starts[i], starts[i - 1], n);
    if (w && w == be->wc.w && master == be->wc.master && n == be->wc.n && dt == be->wc.dt && nstarts == be->wc.nseg &&
        memcmp(starts, be->wc.start, nstarts * sizeof *starts) == 0)
        return FP_OK;
    wc_drop(be);
    if (!w)
        return FP_OK;
    size_t *st = malloc(nstarts * sizeof *st), *pos = malloc(nstarts * sizeof *pos), at = 0;
    if (!st || !pos) {
        free(st);
        free(pos);
        return fp_fail(FP_ENOMEM, "cuda backend: out of memory");
    }
    for (size_t i = 0; i < nstarts; i++) {   /* each tensor on FP_BCU_WC_ALIGN values */
        st[i] = starts[i];
        pos[i] = at;
        size_t len = (i + 1 < nstarts ? starts[i + 1] : n) - starts[i];
        at += (len + FP_BCU_WC_ALIGN - 1) / FP_BCU_WC_ALIGN * FP_BCU_WC_ALIGN;
    }
    void *c = NULL;
    int rc = cuda_alloc(be, &c, at * sizeof(uint16_t));
    if (rc) {
        free(st);
        free(pos);
        return rc;
    }
    be->wc.w = w;
    be->wc.master = master;
    be->wc.n = n;
    be->wc.dt = dt;
    be->wc.nseg = nstarts;
    be->wc.start = st;
    be->wc.pos = pos;
    be->wc.copy_n = at;
    be->wc.copy = c;
    be->wc.valid = 0;
    return FP_OK;
}

void *fp_backend_cuda_weight_copy_at(fp_backend *be, const float *master_at)
{
    size_t off, k;
    if (!be->wc.copy || !inside(master_at, sizeof(float), be->wc.master, be->wc.n, &off) ||
        (k = wc_seg(be, off)) == be->wc.nseg)
        return NULL;
    return (char *)be->wc.copy + (be->wc.pos[k] + (off - be->wc.start[k])) * sizeof(uint16_t);
}

void *fp_backend_cuda_weight_copy_of(fp_backend *be, const float *master, fp_dtype *dt)
{
    if (!be->wc.copy || !master || master != be->wc.master)
        return NULL;
    if (dt)
        *dt = be->wc.dt;
    return be->wc.copy;
}

void fp_backend_cuda_weight_copy_written(fp_backend *be) { be->wc.valid = be->wc.copy != NULL; }
void fp_backend_cuda_weight_copy_invalidate(fp_backend *be) { be->wc.valid = 0; }
int fp_backend_cuda_weight_copy_valid(const fp_backend *be) { return be->wc.valid; }

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

static int cuda_download(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    be->host_waits += bytes > 0;   /* into pageable memory: cudaMemcpyAsync returns once the copy is done */
    downloads_n += bytes > 0;
    downloads_bytes += (long long)bytes;
    return fp_bcu_xfer(be, dst, src, bytes, cudaMemcpyDeviceToHost, "download");
}

static int cuda_copy(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    fp_bcu_wc_touch(be, dst, bytes);
    return fp_bcu_xfer(be, dst, src, bytes, cudaMemcpyDeviceToDevice, "copy");
}

static int cuda_zero(fp_backend *be, void *p, size_t bytes)
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
static int cuda_reserve(fp_backend *be, size_t act_elems, size_t weight_elems)
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

static void cuda_memory(const fp_backend *be, fp_backend_mem *o)
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

/* ---------------------------------------------------------------- casts */

static int cuda_cast(fp_backend *be, fp_tensor dst, fp_tensor src)
{
    TRY(fp_backend_check("cast", "dst", &dst, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("cast", "src", &src, FP_BACKEND_ANY, 0));
    size_t n = fp_tensor_count(&src);
    if (fp_tensor_count(&dst) != n)
        return fp_fail(FP_EINVAL, "cast: %zu values into %zu", n, fp_tensor_count(&dst));
    fp_bcu_wc_touch(be, dst.p, n * (size_t)fp_dtype_bytes(dst.dt));
    void *s = be->stream;
    if (dst.dt == src.dt)
        return cuda_copy(be, dst.p, src.p, n * (size_t)fp_dtype_bytes(dst.dt));
    if (src.dt == FP_DT_F32)
        return dst.dt == FP_DT_F16 ? fp_cuda_f32_to_f16(dst.p, src.p, n, s) : fp_cuda_f32_to_bf16(dst.p, src.p, n, s);
    if (dst.dt == FP_DT_F32)
        return src.dt == FP_DT_F16 ? fp_cuda_f16_to_f32(dst.p, src.p, n, s) : fp_cuda_bf16_to_f32(dst.p, src.p, n, s);
    return fp_cbk_cast(dst.p, dst.dt, src.p, src.dt, n, s);   /* one 16-bit format to the other, via fp32 */
}

static int cuda_round(fp_backend *be, fp_tensor dst, fp_tensor src, fp_dtype to)
{
    TRY(fp_backend_check("round", "dst", &dst, FP_BACKEND_F32, 0));
    TRY(fp_backend_check("round", "src", &src, FP_BACKEND_F32, 0));
    TRY(fp_backend_check_compute("round", to));
    if (fp_tensor_count(&dst) != fp_tensor_count(&src))
        return fp_fail(FP_EINVAL, "round: %zu values into %zu", fp_tensor_count(&src), fp_tensor_count(&dst));
    size_t bytes = fp_tensor_count(&dst) * sizeof(float), os, od;
    if (be->wc.valid && wc_hit(be, dst.p, bytes)) {   /* the copy casts the same after these two only */
        int keep = to == be->wc.dt && inside(src.p, bytes, be->wc.master, be->wc.n, &os) &&
                   (dst.p == src.p || (inside(dst.p, bytes, be->wc.w, be->wc.n, &od) && od == os));
        if (!keep)
            be->wc.valid = 0;
    }
    return fp_cbk_round(dst.p, src.p, fp_tensor_count(&dst), to, be->stream);
}

/* ---------------------------------------------------------------- relu, add */

static int cuda_relu_forward(fp_backend *be, fp_tensor y, fp_tensor x)
{
    TRY(fp_backend_check("relu_forward", "x", &x, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("relu_forward", "y", &y, FP_BACKEND_ANY, 0));
    if (x.dt != y.dt || fp_tensor_count(&x) != fp_tensor_count(&y))
        return fp_fail(FP_EINVAL, "relu_forward: x and y differ in format or count");
    fp_bcu_wc_touch(be, y.p, fp_tensor_count(&y) * (size_t)fp_dtype_bytes(y.dt));
    return fp_cbk_relu_forward(y.p, x.p, x.dt, fp_tensor_count(&x), be->stream);
}

static int cuda_relu_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor y, int accumulate)
{
    TRY(fp_backend_check("relu_backward", "dx", &dx, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("relu_backward", "dy", &dy, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("relu_backward", "y", &y, FP_BACKEND_ANY, 0));
    size_t n = fp_tensor_count(&y);
    if (dx.dt != y.dt || dy.dt != y.dt || fp_tensor_count(&dx) != n || fp_tensor_count(&dy) != n)
        return fp_fail(FP_EINVAL, "relu_backward: dx, dy and y differ in format or count");
    if (accumulate && dx.p == dy.p)
        return fp_fail(FP_EINVAL, "relu_backward: dx aliases dy with accumulate");
    fp_bcu_wc_touch(be, dx.p, n * (size_t)fp_dtype_bytes(dx.dt));
    return fp_cbk_relu_backward(dx.p, dy.p, y.p, y.dt, n, accumulate, be->stream);
}

static int cuda_add(fp_backend *be, fp_tensor y, fp_tensor a, fp_tensor b)
{
    TRY(fp_backend_check("add", "y", &y, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("add", "a", &a, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("add", "b", &b, FP_BACKEND_ANY, 0));
    size_t n = fp_tensor_count(&y);
    if (fp_tensor_count(&a) != n || fp_tensor_count(&b) != n)
        return fp_fail(FP_EINVAL, "add: counts differ");
    fp_bcu_wc_touch(be, y.p, n * (size_t)fp_dtype_bytes(y.dt));
    return fp_cbk_add(y.p, y.dt, a.p, a.dt, b.p, b.dt, n, 0, be->stream);
}

static int cuda_accumulate(fp_backend *be, fp_tensor dst, fp_tensor src)
{
    TRY(fp_backend_check("accumulate", "dst", &dst, FP_BACKEND_ANY, 0));
    TRY(fp_backend_check("accumulate", "src", &src, FP_BACKEND_ANY, 0));
    size_t n = fp_tensor_count(&dst);
    if (fp_tensor_count(&src) != n)
        return fp_fail(FP_EINVAL, "accumulate: counts differ");
    fp_bcu_wc_touch(be, dst.p, n * (size_t)fp_dtype_bytes(dst.dt));
    return fp_cbk_add(dst.p, dst.dt, dst.p, dst.dt, src.p, src.dt, n, 0, be->stream);
}

/* ---------------------------------------------------------------- loss, scaler */

static int cuda_softmax_xent(fp_backend *be, float *loss, fp_tensor dlogits, int *correct1, int *correct5,
                             fp_tensor logits, const int *labels, float dscale)
{
    const char *op = "softmax_xent";
    TRY(fp_backend_check(op, "logits", &logits, FP_BACKEND_F32, 0));
    TRY(fp_backend_check(op, "dlogits", &dlogits, FP_BACKEND_F32, 1));
    if (!loss || !labels)
        return fp_fail(FP_EINVAL, "%s: NULL loss or labels", op);
    if (logits.d.h != 1 || logits.d.w != 1)
        return fp_fail(FP_EINVAL, "%s: logits are not {n, 1, 1, classes}", op);
    if (dlogits.p)
        TRY(fp_backend_same_dims(op, "dlogits", &dlogits, "logits", &logits));
    int n = logits.d.n, classes = logits.d.c;
    if (be->defer_loss) {   /* the loss stays on the device (fp_backend_cuda_loss_result) */
        TRY(fp_cuda_softmax_xent(be->xent_out, dlogits.p, logits.p, labels, n, classes, be->stream));
    } else {
        be->host_waits++;
        TRY(fp_cuda_softmax_xent_sync(loss, correct1, correct5, dlogits.p, logits.p, labels, n, classes, be->xent_out,
                                      be->stream));
    }
    if (dlogits.p && be->loss_scale)   /* the factor read on the device: a graph's replays scale by theirs */
        return fp_cuda_scale_by(dlogits.p, fp_tensor_count(&dlogits), be->loss_scale, be->stream);
    if (dlogits.p && dscale != 1.0f)
        TRY(fp_cbk_scale(dlogits.p, fp_tensor_count(&dlogits), dscale, be->stream));
    return FP_OK;
}

static int cuda_unscale_check(fp_backend *be, int *found_inf, fp_tensor g, float inv_scale)
{
    TRY(fp_backend_check("unscale_check", "g", &g, FP_BACKEND_F32, 0));
    if (!found_inf)
        return fp_fail(FP_EINVAL, "unscale_check: NULL found_inf");
    fp_cuda_segment seg = {0};
    seg.grad = g.p;
    seg.n = fp_tensor_count(&g);
    fp_bcu_wc_touch(be, g.p, seg.n * sizeof(float));
    TRY(fp_cuda_unscale_and_check(&seg, 1, inv_scale, be->found, be->stream));
    TRY(cuda_download(be, found_inf, be->found, sizeof(int)));
    return cuda_sync(be);
}

/* The probes' histogram (kernels.h fp_cuda_hist_add): counted on the device, only the counts come back. Its
 * own counters, not the scratch: an arm may hold the scratch across the step. */
static int cuda_hist(fp_backend *be, fp_hist_t *h, const void *x, fp_dtype dt, size_t n)
{
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "hist: %s is NULL", h ? "tensor" : "histogram");
    if (dt != FP_DT_F32 && !fp_bcu_is16(dt))
        return fp_fail(FP_EINVAL, "hist: tensor of storage type %s", fp_dtype_name(dt));
    if (n == 0)
        return FP_OK;
    void *work = fp_bcu_grow_slot(be, &be->hist_work, &be->hist_work_cap, fp_cuda_hist_work_bytes(), "(histogram counters)");
    if (!work)
        return FP_ENOMEM;
    be->host_waits++;   /* the counts come back: the stream is synchronised */
    return fp_cuda_hist_add(h, x, n, dt, work, be->stream);
}

/* The parameter pass's update and lost updates (kernels.h fp_cuda_update_delta): two counts come back, through
 * a staging slot (not kept between ops). */
static int cuda_update_delta(fp_backend *be, fp_tensor d, fp_tensor nw, fp_tensor old, fp_tensor g, size_t *lost,
                             size_t *moved)
{
    TRY(fp_backend_update_check("update_delta", &d, &nw, &old, &g, lost, moved));
    void *counts = fp_bcu_stage(be, FP_BCU_OUT2, 2 * sizeof(unsigned long long));
    if (!counts)
        return FP_ENOMEM;
    size_t n = fp_tensor_count(&d);
    fp_bcu_wc_touch(be, d.p, n * sizeof(float));
    be->host_waits++;
    return fp_cuda_update_delta(d.p, nw.p, old.p, g.p, n, lost, moved, counts, be->stream);
}

/* The per-layer error's sums (layer_error_dev.h) on the instance's stream: its own workspace, not the
 * scratch (an arm may hold that across the step). */
int fp_backend_cuda_layer_error_sums(fp_backend *be, const float *ref, const void *x, fp_dtype dt, size_t n,
                                     fp_cuda_err_sums *out)
{
    if (!be)
        return fp_fail(FP_EINVAL, "layer error: no backend instance");
    void *work = fp_bcu_grow_slot(be, &be->err_work, &be->err_work_cap, fp_cuda_layer_error_work_bytes(), "(layer error sums)");
    if (!work)
        return FP_ENOMEM;
    be->host_waits += n > 0;   /* the five sums come back: the stream is synchronised */
    return fp_cuda_layer_error_sums(ref, x, dt, n, out, work, be->stream);
}

/* ---------------------------------------------------------------- the table */

static const fp_backend_ops cuda_ops = {
    .name = "cuda",
    .host_memory = 0,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .set_threads = cuda_set_threads,
    .sync = cuda_sync,
    .set_label = fp_backend_cuda_set_label,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = fp_bcu_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .reserve = cuda_reserve,
    .memory = cuda_memory,
    .cast = cuda_cast,
    .round = cuda_round,
    .conv_forward = fp_bcu_conv_forward,
    .conv_backward_data = fp_bcu_conv_backward_data,
    .conv_backward_weights = fp_bcu_conv_backward_weights,
    .bn_forward_train = fp_bcu_bn_forward_train,
    .bn_forward_eval = fp_bcu_bn_forward_eval,
    .bn_backward = fp_bcu_bn_backward,
    .bn_act_query = fp_bcu_bn_act_query,
    .bn_act_forward_train = fp_bcu_bn_act_forward_train,
    .bn_act_backward = fp_bcu_bn_act_backward,
    .bn_sync_stats = fp_bcu_bn_sync_stats,
    .bn_sync_forward = fp_bcu_bn_sync_forward,
    .bn_sync_backward_sums = fp_bcu_bn_sync_backward_sums,
    .bn_sync_backward_dx = fp_bcu_bn_sync_backward_dx,
    .relu_forward = cuda_relu_forward,
    .relu_backward = cuda_relu_backward,
    .maxpool_forward = fp_bcu_maxpool_forward,
    .maxpool_backward = fp_bcu_maxpool_backward,
    .avgpool_forward = fp_bcu_avgpool_forward,
    .avgpool_backward = fp_bcu_avgpool_backward,
    .linear_forward = fp_bcu_linear_forward,
    .linear_backward_data = fp_bcu_linear_backward_data,
    .linear_backward_weights = fp_bcu_linear_backward_weights,
    .add = cuda_add,
    .accumulate = cuda_accumulate,
    .softmax_xent = cuda_softmax_xent,
    .unscale_check = cuda_unscale_check,
    .hist = cuda_hist,
    .update_delta = cuda_update_delta,
};

const fp_backend_ops *fp_backend_cuda(void) { return &cuda_ops; }
