/* upload.c — the CUDA backend's uploads (backend.h's upload op and backend_cuda.h's upload entry points), by
 * path: a batch prefetched on the copy stream (fp_backend_cuda_prefetch) becomes a device-to-device copy; a CUDA
 * graph's step goes through fixed slots (a large registered one: a device twin fed before each launch, else pinned
 * host buffers refilled by a host copy); a source inside a range page-locked in place (host_register.c) is
 * one DMA from it; the rest through pinned staging (small: onto the stream; large: double-buffered device staging
 * filled on the copy stream), or a plain copy when no staging can be had. Promises: every upload is ordered on the
 * instance's stream after what was queued before it; the host never waits for the device, except for a pinned
 * staging slot whose previous copy is still running; a source is free on return, except one inside a registered
 * range (and a prefetched one): free once the instance's next synchronisation after its upload returns. */
#include <cuda_runtime_api.h>
#include <string.h>
#include "trainer/cuda/backend_cuda_internal.h"

/* ---------------------------------------------------------------- staged uploads (backend_cuda_internal.h) */

static void slot_free(fp_backend *be, fp_bcu_upload_slot *u)
{
    if (u->host)
        cudaFreeHost(u->host);
    if (u->dev) {
        be->released++;
        fp_arena_release(be->arena, u->dev);
    }
    if (u->copied)
        cudaEventDestroy((cudaEvent_t)u->copied);
    if (u->consumed)
        cudaEventDestroy((cudaEvent_t)u->consumed);
    memset(u, 0, sizeof *u);
}

void fp_bcu_upload_free(fp_backend *be)
{
    if (be->copy_stream)
        cudaStreamSynchronize((cudaStream_t)be->copy_stream);
    for (int i = 0; i < FP_BCU_UP_SLOTS; i++)
        slot_free(be, &be->up[i]);
    for (int i = 0; i < FP_BCU_UP_SMALL; i++)
        slot_free(be, &be->up_small[i]);
    slot_free(be, &be->pre.slot);
    be->pre.pending = 0;
    for (int i = 0; i < FP_BCU_FIXED; i++)
        if (be->fixed[i].host)
            cudaFreeHost(be->fixed[i].host);
    memset(be->fixed, 0, sizeof be->fixed);
    if (be->copy_stream)
        cudaStreamDestroy((cudaStream_t)be->copy_stream);
    be->copy_stream = NULL;
}

void fp_backend_cuda_set_upload_staging(fp_backend *be, int staged) { be->up_off = !staged; }

/* The slot's events (and, for a large slot, the copy stream); 0 when the staging cannot be had. */
static int slot_ready(fp_backend *be, fp_bcu_upload_slot *u, int large)
{
    if (large && !be->copy_stream) {
        cudaStream_t cs;
        if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) != cudaSuccess)
            return fp_bcu_gave_up();
        be->copy_stream = cs;
    }
    cudaEvent_t e;
    if (!u->copied) {
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
            return fp_bcu_gave_up();
        u->copied = e;
    }
    if (large && !u->consumed) {
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
            return fp_bcu_gave_up();
        u->consumed = e;
    }
    return 1;
}

/* The slot's pinned buffer holds at least bytes, its previous copy out of it finished (the one wait on
 * the host in an upload: for a copy issued FP_BCU_UP_SLOTS large (FP_BCU_UP_SMALL small) uploads ago).
 * 0 when pinned memory cannot be had. */
static int slot_host(fp_bcu_upload_slot *u, size_t bytes)
{
    if (u->used && cudaEventSynchronize((cudaEvent_t)u->copied) != cudaSuccess)
        return fp_bcu_gave_up();
    if (bytes <= u->host_cap && u->host)
        return 1;
    if (u->host)
        cudaFreeHost(u->host);
    u->host = NULL;
    u->host_cap = 0;
    size_t cap = bytes < FP_BCU_UP_SMALL_BYTES ? FP_BCU_UP_SMALL_BYTES : bytes;
    if (cudaHostAlloc(&u->host, cap, cudaHostAllocDefault) != cudaSuccess) {
        u->host = NULL;
        return fp_bcu_gave_up();
    }
    u->host_cap = cap;
    return 1;
}

/* host -> dst through pinned staging: FP_OK or an error; 1: not staged, no pinned memory, event or copy
 * stream to be had (the caller copies plainly from now on); 2: not staged this time (no arena memory for
 * the device staging now; the caller copies this one plainly). */
static int upload_staged(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    cudaStream_t st = (cudaStream_t)be->stream;
    if (bytes <= FP_BCU_UP_SMALL_BYTES) {   /* pinned -> dst on the stream itself */
        fp_bcu_upload_slot *u = &be->up_small[be->up_small_next % FP_BCU_UP_SMALL];
        if (!slot_ready(be, u, 0) || !slot_host(u, bytes))
            return 1;
        be->up_small_next++;
        memcpy(u->host, src, bytes);
        int rc = fp_bcu_cuda_err(cudaMemcpyAsync(dst, u->host, bytes, cudaMemcpyHostToDevice, st), "upload");
        rc = rc ? rc : fp_bcu_cuda_err(cudaEventRecord((cudaEvent_t)u->copied, st), "upload (event)");
        u->used = !rc;
        return rc;
    }
    fp_bcu_upload_slot *u = &be->up[be->up_next % FP_BCU_UP_SLOTS];
    if (!slot_ready(be, u, 1) || !slot_host(u, bytes))
        return 1;
    cudaStream_t cs = (cudaStream_t)be->copy_stream;
    int rc = FP_OK;
    if (bytes > u->dev_cap || !u->dev) {
        /* New device staging may be memory that work queued on the stream still uses (the arena hands out
         * released blocks at once: safe for one stream): the copy stream waits for everything queued. */
        if (!fp_bcu_grow_slot(be, &u->dev, &u->dev_cap, bytes, "(upload staging)"))
            return 2;   /* no device memory for it now: this one plainly */
        rc = fp_bcu_cuda_err(cudaEventRecord((cudaEvent_t)u->consumed, st), "upload (event)");
        u->used = 1;
    }
    be->up_next++;
    memcpy(u->host, src, bytes);
    if (!rc && u->used)   /* the stream has copied the slot's previous contents out of dev */
        rc = fp_bcu_cuda_err(cudaStreamWaitEvent(cs, (cudaEvent_t)u->consumed, 0), "upload (wait)");
    rc = rc ? rc : fp_bcu_cuda_err(cudaMemcpyAsync(u->dev, u->host, bytes, cudaMemcpyHostToDevice, cs), "upload");
    rc = rc ? rc : fp_bcu_cuda_err(cudaEventRecord((cudaEvent_t)u->copied, cs), "upload (event)");
    rc = rc ? rc : fp_bcu_cuda_err(cudaStreamWaitEvent(st, (cudaEvent_t)u->copied, 0), "upload (wait)");
    rc = rc ? rc : fp_bcu_cuda_err(cudaMemcpyAsync(dst, u->dev, bytes, cudaMemcpyDeviceToDevice, st), "upload");
    rc = rc ? rc : fp_bcu_cuda_err(cudaEventRecord((cudaEvent_t)u->consumed, st), "upload (event)");
    u->used = 1;
    return rc;
}

void fp_backend_cuda_upload_counts_of(const fp_backend *be, fp_backend_cuda_upload_counts *out)
{
    *out = be->ups;
}

/* An upload from a registered range: one DMA straight from the caller's memory on the stream, ordered as the small
 * staged path (after everything queued before it, before everything after); the caller keeps the source unwritten
 * until the stream's next synchronisation returns (backend_cuda.h). */
static int upload_direct(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    be->ups.direct++;
    be->ups.direct_bytes += (long long)bytes;
    return fp_bcu_cuda_err(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)be->stream), "upload");
}

/* ---------------------------------------------------------------- a CUDA graph's uploads (backend_cuda.h) */

void fp_backend_cuda_fixed_uploads(fp_backend *be, int on)
{
    be->fixed_on = on != 0;
    if (on)
        be->fixed_count = 0;
}

/* Slot k's pinned buffer holds at least bytes (its contents not kept when it grows). */
static int fixed_host(fp_backend *be, int k, size_t bytes)
{
    fp_bcu_fixed_slot *f = &be->fixed[k];
    if (f->host && f->cap >= bytes)
        return FP_OK;
    if (f->host)
        cudaFreeHost(f->host);
    f->host = NULL;
    f->cap = 0;
    if (cudaHostAlloc(&f->host, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        f->host = NULL;
        fp_bcu_gave_up();
        return fp_fail(FP_ENOMEM, "%s: out of pinned host memory for a graph's upload of %zu bytes", be->name, bytes);
    }
    f->cap = bytes ? bytes : 1;
    return FP_OK;
}

int fp_backend_cuda_fixed_reserve(fp_backend *be, int k, size_t bytes)
{
    if (k < 0 || k >= FP_BCU_FIXED)
        return fp_fail(FP_EINVAL, "%s: graph upload slot %d of %d", be->name, k, FP_BCU_FIXED);
    fp_bcu_fixed_slot *f = &be->fixed[k];
    if (bytes > FP_BCU_UP_SMALL_BYTES && !fp_bcu_grow_slot(be, &f->dev, &f->dev_cap, bytes, "(graph upload twin)"))
        fp_error_clear();   /* no device room for a twin: the slot stays a pinned host buffer */
    return fixed_host(be, k, bytes);
}

/* An upload while fixed uploads are on (a capture): a large one from a registered range into a slot with a device
 * twin is captured as a copy from the twin (no host copy: fp_backend_cuda_fixed_prime and the refills feed it);
 * else into the next slot's pinned buffer, then one copy on the stream. */
static int upload_fixed(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    int k = be->fixed_count;
    if (k >= FP_BCU_FIXED)
        return fp_fail(FP_EINVAL, "%s: more than %d uploads in a graph's step", be->name, FP_BCU_FIXED);
    fp_bcu_fixed_slot *f = &be->fixed[k];
    f->fed = bytes > FP_BCU_UP_SMALL_BYTES && f->dev && f->dev_cap >= bytes && fp_bcu_host_holds(src, bytes);
    f->feed_src = f->fed ? src : NULL;
    f->dst = dst;
    f->bytes = bytes;
    if (f->fed) {
        be->fixed_count = k + 1;
        be->ups.fixed++;
        be->ups.fixed_bytes += (long long)bytes;
        return fp_bcu_cuda_err(cudaMemcpyAsync(dst, f->dev, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)be->stream),
                               "upload (graph twin)");
    }
    TRY(fixed_host(be, k, bytes));
    memcpy(f->host, src, bytes);
    be->fixed_count = k + 1;
    be->ups.fixed++;
    be->ups.fixed_bytes += (long long)bytes;
    return fp_bcu_cuda_err(cudaMemcpyAsync(dst, f->host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)be->stream), "upload");
}

int fp_backend_cuda_fixed_count(const fp_backend *be) { return be->fixed_count; }

size_t fp_backend_cuda_fixed_bytes(const fp_backend *be, int k)
{
    return k >= 0 && k < be->fixed_count ? be->fixed[k].bytes : 0;
}

int fp_backend_cuda_fixed_prime(fp_backend *be)
{
    int rc = FP_OK;
    for (int k = 0; !rc && k < be->fixed_count; k++)
        if (be->fixed[k].fed && be->fixed[k].feed_src)
            rc = fp_bcu_upload(be, be->fixed[k].dev, be->fixed[k].feed_src, be->fixed[k].bytes);
    return rc;
}

int fp_backend_cuda_fixed_refill(fp_backend *be, int k, const void *src, size_t bytes)
{
    if (k < 0 || k >= be->fixed_count || be->fixed[k].bytes != bytes || !src)
        return fp_fail(FP_EINVAL, "%s: graph upload %d of %d does not hold %zu bytes", be->name, k, be->fixed_count,
                       bytes);
    if (be->fixed[k].fed)   /* the twin, on the stream before the launch: from a prefetch, a DMA, or staged */
        return fp_bcu_upload(be, be->fixed[k].dev, src, bytes);
    be->pre.pending = 0;
    memcpy(be->fixed[k].host, src, bytes);
    be->ups.fixed++;
    be->ups.fixed_bytes += (long long)bytes;
    return FP_OK;
}

/* ---------------------------------------------------------------- prefetch (backend_cuda.h) */

int fp_backend_cuda_prefetch(fp_backend *be, const void *src, size_t bytes)
{
    if (!be)
        return 1;
    be->pre.pending = 0;   /* one prefetch at a time: a newer one replaces it */
    if (!src || bytes <= FP_BCU_UP_SMALL_BYTES || be->fixed_on || !fp_bcu_host_holds(src, bytes))
        return 1;
    fp_bcu_upload_slot *u = &be->pre.slot;
    if (!slot_ready(be, u, 1))
        return 1;
    cudaStream_t st = (cudaStream_t)be->stream, cs = (cudaStream_t)be->copy_stream;
    int rc = FP_OK;
    if (bytes > u->dev_cap || !u->dev) {
        /* the block going back to the arena may still be written by the previous prefetch's copy: the stream, whose
         * work may reuse it, waits for that copy first */
        if (u->used && u->dev &&
            (rc = fp_bcu_cuda_err(cudaStreamWaitEvent(st, (cudaEvent_t)u->copied, 0), "prefetch (wait to grow)")))
            return rc;
        /* as upload_staged: new device memory may be a block work queued on the stream still uses */
        if (!fp_bcu_grow_slot(be, &u->dev, &u->dev_cap, bytes, "(prefetched batch)")) {
            fp_error_clear();   /* no room for it now: the upload goes its usual way */
            return 1;
        }
        rc = fp_bcu_cuda_err(cudaEventRecord((cudaEvent_t)u->consumed, st), "prefetch (event)");
        u->used = 1;
    }
    if (!rc && u->used)   /* the stream has copied the previous prefetch out of dev */
        rc = fp_bcu_cuda_err(cudaStreamWaitEvent(cs, (cudaEvent_t)u->consumed, 0), "prefetch (wait)");
    rc = rc ? rc : fp_bcu_cuda_err(cudaMemcpyAsync(u->dev, src, bytes, cudaMemcpyHostToDevice, cs), "prefetch");
    rc = rc ? rc : fp_bcu_cuda_err(cudaEventRecord((cudaEvent_t)u->copied, cs), "prefetch (event)");
    if (rc)
        return rc;
    u->used = 1;
    be->pre.pending = 1;
    be->pre.unsynced = 1;
    be->pre.src = src;
    be->pre.bytes = bytes;
    return FP_OK;
}

/* The upload the prefetch was for: the stream waits for its copy, then copies it on the device. */
static int upload_prefetched(fp_backend *be, void *dst, size_t bytes)
{
    fp_bcu_upload_slot *u = &be->pre.slot;
    cudaStream_t st = (cudaStream_t)be->stream;
    be->pre.pending = 0;
    int rc = fp_bcu_cuda_err(cudaStreamWaitEvent(st, (cudaEvent_t)u->copied, 0), "upload (wait for the prefetch)");
    rc = rc ? rc : fp_bcu_cuda_err(cudaMemcpyAsync(dst, u->dev, bytes, cudaMemcpyDeviceToDevice, st), "upload");
    rc = rc ? rc : fp_bcu_cuda_err(cudaEventRecord((cudaEvent_t)u->consumed, st), "upload (event)");
    be->ups.prefetched += !rc;
    be->ups.prefetched_bytes += rc ? 0 : (long long)bytes;
    return rc;
}

/* In this order: the prefetched copy of this very source (a device-to-device copy), a CUDA graph's fixed slots (a
 * captured copy must read the slot at every replay), a source inside a registered range (DMA from it), the pinned
 * staging, a plain copy. A large upload of anything else drops a prefetch (it was not for this step). */
int fp_bcu_upload(fp_backend *be, void *dst, const void *src, size_t bytes)
{
    fp_bcu_wc_touch(be, dst, bytes);
    if (be->pre.pending && bytes > FP_BCU_UP_SMALL_BYTES && !be->fixed_on) {   /* a capture keeps it for the prime */
        if (dst && src == be->pre.src && bytes == be->pre.bytes)
            return upload_prefetched(be, dst, bytes);
        be->pre.pending = 0;
    }
    if (bytes && dst && src && be->fixed_on)
        return upload_fixed(be, dst, src, bytes);
    if (bytes && dst && src && fp_bcu_host_holds(src, bytes))
        return upload_direct(be, dst, src, bytes);
    if (bytes && dst && src && !be->up_off && bytes <= FP_BCU_UP_LARGE_BYTES) {
        int rc = upload_staged(be, dst, src, bytes);
        if (rc != 1 && rc != 2) {
            be->ups.staged += !rc;
            be->ups.staged_bytes += rc ? 0 : (long long)bytes;
            return rc;
        }
        be->up_off = rc == 1;   /* no pinned memory, events or copy stream: plain copies from now on */
    }
    be->ups.plain += bytes > 0;
    be->ups.plain_bytes += (long long)bytes;
    return fp_bcu_xfer(be, dst, src, bytes, cudaMemcpyHostToDevice, "upload");
}

