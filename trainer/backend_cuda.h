/* backend_cuda.h — the CUDA backend of backend.h (trainer/cuda/backend_cuda*.c): cuDNN 9 / cuBLASLt layer
 * ops, the backend's own kernels, device memory from one arena per instance (one instance per arm).
 * Declared in every build, defined only where HAVE_CUDA is set: callers guard their calls with it. */
#ifndef FP_BACKEND_CUDA_H
#define FP_BACKEND_CUDA_H

#include <stddef.h>
#include "trainer/backend.h"

/* The table: host_memory 0, name "cuda". Its create sizes the arena by the default below. */
const fp_backend_ops *fp_backend_cuda(void);

/* One of `arms` equal arenas: 90% of the device memory free now (the rest for cuDNN's handles and
 * workspaces) divided by arms (>= 1); 0 without a usable device. Ask before the first arm allocates. */
size_t fp_backend_cuda_arena_share(int arms);
/* The arena a plain create takes: fp_backend_cuda_arena_share(2) (two arms side by side). */
size_t fp_backend_cuda_default_arena(void);

/* An instance over an arena of exactly arena_bytes (> 0), named `name` in out-of-memory messages
 * ("fp16 arm"; NULL: "cuda backend"). FP_EUNAVAIL without a usable GPU (message says why), FP_ENOMEM
 * when the arena cannot be had (message names arena and bytes). Destroy through the table. */
int fp_backend_cuda_create_sized(fp_backend **out, size_t arena_bytes, const char *name);

/* The label (a layer or tensor name, copied, 63 bytes) that the next allocations and cuDNN errors name:
 * "conv1.w: out of device memory asking for 1.2 MiB (arena fp16 arm: ...)". NULL clears. */
void fp_backend_cuda_set_label(fp_backend *be, const char *label);

/* The stream every op runs on (cudaStream_t as void*), for the callers of kernels.h. */
void *fp_backend_cuda_stream(fp_backend *be);

/* Uploads (the table's upload: batches, labels, parameters) are staged through pinned host memory and,
 * when large, copied on a copy stream of their own while the stream computes (backend_cuda.c), so the host
 * does not wait; the caller may reuse its buffer on return, as before (a source registered in place: below).
 * staged 0 switches to a plain cudaMemcpyAsync from the caller's (pageable) memory, which waits for the stream
 * first; 1 (the default) back. For the tests that compare both. */
void fp_backend_cuda_set_upload_staging(fp_backend *be, int staged);

/* ---- host memory page-locked in place (issue 22, point 1: a batch DMA'd from where the loop keeps it) ----
 * fp_backend_cuda_host_register page-locks [p, p + bytes) (cudaHostRegister, cudaHostRegisterDefault: under unified
 * addressing mapped and portable, so for every instance of the process) and remembers it. From then on an upload (the
 * table's) whose whole source lies inside one registered range is one cudaMemcpyAsync straight from it on the
 * instance's stream (a DMA, no host copy into staging), ordered as every op on the stream: after the work queued before
 * it, before the work queued after it. The promise differs from a staged upload's: the device reads the caller's memory
 * while the stream runs, so the caller must not write the source until the instance's next synchronisation (the
 * table's sync; a device step's end wait) has returned. A CUDA graph's fixed uploads (below) still copy into their
 * slots. Returns 1 when registered; 0 when not: p NULL, bytes 0, a range that wraps, is larger than the machine's
 * memory or overlaps one registered, a device that cannot register host memory (cudaDevAttrHostRegisterSupported), or
 * the driver refused (not enough memory it may lock; memory already pinned, cudaHostAlloc's included): nothing is
 * printed, uploads from it stay staged, and the refusal is counted. Costly (the driver faults in and pins every page:
 * milliseconds per 100 MB) and the pages leave the system's paging until unregistered: once per long-lived buffer,
 * never per step. Thread-safe.
 * fp_backend_cuda_host_unregister: the range registered at exactly p (anything else: nothing) waits for the whole
 * device (cudaDeviceSynchronize: no copy out of it still runs), is unlocked and forgotten; uploads from it are staged
 * again. Before the memory is freed.
 * fp_backend_cuda_host_registered: the ranges registered now, their bytes, the registrations refused since the
 * process started (any may be NULL). */
int fp_backend_cuda_host_register(void *p, size_t bytes);
void fp_backend_cuda_host_unregister(void *p);
void fp_backend_cuda_host_registered(int *ranges, size_t *bytes, long long *refused);

/* An instance's table uploads since it was created, by the path they took (a debug counter for the tests and the GPU
 * check): direct from a registered range; staged (a host copy into pinned staging first); plain (cudaMemcpyAsync from
 * pageable memory: staging off or not to be had, or over 256 MiB); fixed (into a CUDA graph's slots: captured uploads
 * and fp_backend_cuda_fixed_refill's copies). Counts of uploads of at least one byte, and their bytes. */
typedef struct {
    long long direct, direct_bytes;
    long long staged, staged_bytes;
    long long plain, plain_bytes;
    long long fixed, fixed_bytes;
    long long prefetched, prefetched_bytes;   /* device-to-device from a prefetch (fp_backend_cuda_prefetch) */
} fp_backend_cuda_upload_counts;
void fp_backend_cuda_upload_counts_of(const fp_backend *be, fp_backend_cuda_upload_counts *out);

/* fp_backend_cuda_prefetch: [src, src + bytes), which must lie inside a registered range and be larger than a small
 * upload (64 KiB), starts crossing now into device staging on the copy stream, while the stream goes on; the next
 * upload of more than 64 KiB through the table, if it is of this very source and size, becomes a device-to-device
 * copy once that crossing is done (no host wait), and so does a graph's refill (or prime) of a device twin from it;
 * any other such upload outside a capture, a refill of a host slot or a newer prefetch drops it; a synchronisation keeps it (the arm prefetches during one step for the next). The caller keeps the source
 * unwritten until that next upload (which uses or drops the prefetch) has been followed by the instance's
 * synchronisation, which also waits for the prefetch's own copy. FP_OK: started; 1: not (not registered, too small, a graph's fixed uploads on, no copy
 * stream, events or device memory for it): the upload takes its usual path; else an error of the copy's queueing. */
int fp_backend_cuda_prefetch(fp_backend *be, const void *src, size_t bytes);

/* ---- the 16-bit weight copy: written once per step by the optimizer, not cast on every conv call ----
 * fp_backend_cuda_weight_copy: the model's conv / linear weights as the ops receive them (w: fp32 values
 * rounded to compute, the model's weight copy) and its fp32 master weights (master, same layout), n values
 * each, made of nstarts tensors beginning at the ascending offsets starts[] (starts[0] == 0), get a 16-bit
 * copy of format dt (F16 / BF16) in backend memory, each tensor beginning on 256 bytes, kept by the
 * instance: the same arguments again keep it and its validity; others replace it (invalid); w NULL drops
 * it. FP_ENOMEM, FP_EINVAL.
 * While it is valid, conv / linear ops given an fp32 weight or bias (within one tensor) inside w under
 * compute dt read the copy instead of casting again (the same bits: a cast of a value already rounded to dt).
 * It is valid after fp_backend_cuda_weight_copy_written only, and invalid again as soon as an op of the
 * table writes into w or master (upload, copy, zero, cast, add, accumulate, relu, unscale_check, round;
 * except round to dt of master in place or of master into w at the same offset: the cast is the same),
 * when either is freed, or on fp_backend_cuda_weight_copy_invalidate (a write outside the table: kernels.h,
 * or a caller handed the device weights to write: model_device.c's fp_model_backend_params does it). */
int fp_backend_cuda_weight_copy(fp_backend *be, const float *w, const float *master, size_t n, fp_dtype dt,
                                const size_t *starts, size_t nstarts);
/* The copy registered for master weights at master (*dt its format when dt is not NULL); NULL when none is. */
void *fp_backend_cuda_weight_copy_of(fp_backend *be, const float *master, fp_dtype *dt);
/* Where the master weight at master_at (inside the registered master weights) has its 16-bit value in the
 * copy: a tensor's values are consecutive from its first, for the SGD kernel's segments (kernels.h
 * fp_cuda_segment.lowp of a tensor: fp_backend_cuda_weight_copy_at(be, param + offset)). NULL outside. */
void *fp_backend_cuda_weight_copy_at(fp_backend *be, const float *master_at);
/* The copy now holds cast(master) (the SGD kernel wrote it with the new weights): valid. */
void fp_backend_cuda_weight_copy_written(fp_backend *be);
void fp_backend_cuda_weight_copy_invalidate(fp_backend *be);
int fp_backend_cuda_weight_copy_valid(const fp_backend *be);

/* ---- the host off the step (issue 22) ----
 * defer_loss on: softmax_xent launches the loss without reading it back (the table's *loss, *correct1 and
 * *correct5 are left unwritten); its kernels.h fp_cuda_xent_result stays at loss_result (device memory, valid
 * until the next softmax_xent), a label out of range only flagged there (bad_label), nothing written then.
 * host_waits: how many times the host waited for the instance's stream since it was created (sync, downloads
 * into pageable memory, a non-deferred loss, a histogram): a debug counter for the tests. */
void fp_backend_cuda_defer_loss(fp_backend *be, int on);
const void *fp_backend_cuda_loss_result(fp_backend *be);
long long fp_backend_cuda_host_waits(const fp_backend *be);

/* The table's downloads (device -> host copies through fp_backend_ops.download) of every instance since the
 * process started: how many (of at least one byte) and their bytes (either may be NULL). Other copies to the
 * host (a histogram's counts, the layer error's sums, the step's pinned read-back) are not counted. A debug
 * counter for the tests. */
void fp_backend_cuda_downloads(long long *count, long long *bytes);

/* ---- a CUDA graph of the device step (issue 22, point 1: trainer/run/arm_device_graph.c) ----
 * fixed_uploads on: the uploads from now on go, in order, through fixed pinned slots 0, 1, ... (the count restarts
 * at every on): the host data copied into slot k's pinned buffer (kept across steps; fixed_reserve sizes it
 * beforehand, so that no pinned allocation happens while a graph is captured), then one cudaMemcpyAsync from it to
 * the destination on the stream, no copy stream, no rotation; off: the staged uploads above again. So a captured
 * step's copies read slot k at every replay: before a replay the caller puts upload k's new data there
 * (fixed_refill: FP_EINVAL unless slot k's last fixed upload had exactly bytes), once the stream no longer reads it
 * (the previous step's end synchronisation). fixed_count / fixed_bytes: the uploads since the last
 * fixed_uploads(on) and the size of the k-th (0 outside), kept after off. FP_ENOMEM without pinned memory.
 * A large upload (over 64 KiB: the batch's images) from a registered range into a slot that fixed_reserve could give
 * a device twin (arena memory) is captured as a copy from the twin instead, with no host copy: after the capture and
 * before the first launch fixed_prime fills every such twin from the source seen at capture, and fixed_refill fills
 * it (a device-to-device copy from a matching prefetch, else a DMA from the registered source, queued on the stream
 * before the launch: the caller's source then stays unwritten until the next synchronisation, as a registered
 * upload's). A capture neither uses nor drops a prefetch, so fixed_prime can use it. */
void fp_backend_cuda_fixed_uploads(fp_backend *be, int on);
int fp_backend_cuda_fixed_reserve(fp_backend *be, int k, size_t bytes);
int fp_backend_cuda_fixed_count(const fp_backend *be);
size_t fp_backend_cuda_fixed_bytes(const fp_backend *be, int k);
int fp_backend_cuda_fixed_prime(fp_backend *be);
int fp_backend_cuda_fixed_refill(fp_backend *be, int k, const void *src, size_t bytes);
/* d_scale (device memory) not NULL: softmax_xent scales the loss gradient by *d_scale read on the device when the
 * kernel runs (kernels.h fp_cuda_scale_by), whatever loss_scale the table's call carries; NULL: by that value. */
void fp_backend_cuda_set_loss_scale(fp_backend *be, const float *d_scale);
/* Moves whenever device memory the instance handed out may have been given back or moved (an arena block released:
 * a buffer grown or freed, a plan remade; a cuDNN workspace reallocated): a captured graph that read the old
 * addresses must not be replayed once it moved. */
unsigned long long fp_backend_cuda_layout_gen(const fp_backend *be);

/* Device scratch for kernels.h helpers (at least bytes, 256-byte aligned, from the arena; valid until the
 * next call); NULL with the arena's message on failure. */
void *fp_backend_cuda_scratch(fp_backend *be, size_t bytes);

#endif
