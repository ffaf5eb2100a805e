/* backend_cuda_internal.h — shared by the CUDA backend's files (trainer/cuda/backend_cuda*.c, upload.c,
 * host_register.c) only: the instance (cuDNN contexts per math policy on one stream, the arena, staging
 * slots, accounting), the ops each file gives the table, and the checks and staging helpers the ops use. Not an API. */
#ifndef FP_BACKEND_CUDA_INTERNAL_H
#define FP_BACKEND_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include "error.h"
#include "trainer/backend_check.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/arena.h"
#include "trainer/cuda/cudnn_ops.h"

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)

/* staging slots (device memory from the arena, grown on demand, contents not kept between ops) */
enum { FP_BCU_A = 0, FP_BCU_B, FP_BCU_W, FP_BCU_B2, FP_BCU_OUT, FP_BCU_OUT2, FP_BCU_SLOTS };

/* Uploads (upload.c fp_bcu_upload) from a host range registered in place (fp_backend_cuda_host_register) are one
 * DMA from it on the stream; the others go through pinned host staging so that the host never waits for
 * the stream: a small one (labels) straight onto the stream from one of FP_BCU_UP_SMALL pinned slots; a
 * large one (a batch) into device staging on the copy stream, from one of FP_BCU_UP_SLOTS double-buffered
 * pinned slots, then a device-to-device copy on the stream once the copy stream's event says it landed. */
enum { FP_BCU_UP_SLOTS = 2, FP_BCU_UP_SMALL = 8 };
/* Every tensor of the 16-bit weight copy begins on 256 bytes (128 values), as the cast path's staging
 * slot (arena memory): cuDNN / cuBLASLt see the alignment they were planned for. */
#define FP_BCU_WC_ALIGN ((size_t)128)
#define FP_BCU_UP_SMALL_BYTES ((size_t)64 << 10)    /* up to this: the small path */
#define FP_BCU_UP_LARGE_BYTES ((size_t)256 << 20)   /* above this: a plain (pageable) copy on the stream */
typedef struct {
    void *host;          /* pinned (cudaHostAlloc), host_cap bytes */
    size_t host_cap;
    void *dev;           /* device staging from the arena (large slots), dev_cap bytes */
    size_t dev_cap;
    void *copied;        /* cudaEvent_t: the copy out of host has finished (host may be rewritten) */
    void *consumed;      /* cudaEvent_t (large): the stream's copy out of dev has finished */
    int used;            /* the events have been recorded */
} fp_bcu_upload_slot;

/* A CUDA graph's uploads (backend_cuda.h fp_backend_cuda_fixed_uploads): one pinned buffer per upload of the step,
 * in order, kept across steps (a large one from a registered range: a device twin instead, fed by a DMA or a
 * prefetch before each launch); what the last fixed upload into it was. */
enum { FP_BCU_FIXED = 4 };
typedef struct {
    void *host;          /* pinned, cap bytes */
    size_t cap;
    void *dev;           /* a large slot's device twin (arena), dev_cap bytes, when it could be had */
    size_t dev_cap;
    int fed;             /* 1: the captured copy reads dev (filled outside the graph: upload.c), not host */
    const void *feed_src;   /* a fed slot's source at capture, for fp_backend_cuda_fixed_prime */
    void *dst;           /* the upload's destination and size */
    size_t bytes;
} fp_bcu_fixed_slot;

struct fp_backend {
    fp_arena *arena;
    fp_cudnn *ctx[2];               /* [0]: fp32 math (FMA, no TF32; 16-bit tensors on tensor cores),
                                     * [1]: TF32 math (the library converts fp32 operands, cudnn_ops.h),
                                     * created on first use, on ctx[0]'s stream */
    void *stream;
    void *st[FP_BCU_SLOTS];
    size_t st_cap[FP_BCU_SLOTS];    /* bytes carved (accounted as staging) */
    size_t st_want[FP_BCU_SLOTS];   /* bytes reserved (cuda_reserve): a slot grows to this at its first use */
    size_t staging_peak;
    size_t allocated, allocated_peak;
    void *scratch;                  /* fp_backend_cuda_scratch */
    size_t scratch_cap;
    void *hist_work;                /* the hist op's device counters (kernels.h fp_cuda_hist_work_bytes) */
    size_t hist_work_cap;
    void *err_work;                 /* the layer error's partial sums (layer_error_dev.h) */
    size_t err_work_cap;
    void *xent_out;                 /* fp_cuda_xent_result */
    int *found;                     /* unscale_check's device flag */
    int defer_loss;                 /* fp_backend_cuda_defer_loss: softmax_xent leaves its result on the device */
    long long host_waits;           /* fp_backend_cuda_host_waits */
    void *sync_event;               /* cudaEvent_t with cudaEventBlockingSync: cuda_sync sleeps, not spins */
    void *copy_stream;              /* cudaStream_t of the large uploads (created on first use) */
    fp_bcu_upload_slot up[FP_BCU_UP_SLOTS], up_small[FP_BCU_UP_SMALL];
    unsigned up_next, up_small_next;
    int up_off;                     /* 1: plain cudaMemcpyAsync from the caller's memory (staging off, or
                                     * pinned memory / events / the copy stream could not be had) */
    fp_backend_cuda_upload_counts ups;   /* the uploads by path (fp_backend_cuda_upload_counts_of) */
    struct {                        /* fp_backend_cuda_prefetch (upload.c) */
        fp_bcu_upload_slot slot;    /* its device copy (no host buffer), copied on the copy stream */
        int pending;                /* 1: slot.dev holds (or is receiving) [src, src + bytes) for the next upload */
        int unsynced;               /* 1: a prefetch was queued since the last cuda_sync (which waits for it) */
        const void *src;
        size_t bytes;
    } pre;
    int fixed_on, fixed_count;      /* fp_backend_cuda_fixed_uploads: on, and the uploads since */
    fp_bcu_fixed_slot fixed[FP_BCU_FIXED];
    const float *loss_scale;        /* fp_backend_cuda_set_loss_scale: softmax_xent's factor on the device */
    unsigned long long released;    /* arena blocks given back (fp_backend_cuda_layout_gen) */
    struct {                        /* the 16-bit weight copy (backend_cuda.h fp_backend_cuda_weight_copy) */
        const float *w, *master;    /* n fp32 values each; NULL: none */
        size_t n;
        fp_dtype dt;
        size_t nseg;                /* tensors: the i-th begins at start[i] floats into w / master and at
                                     * pos[i] values into copy (a multiple of FP_BCU_WC_ALIGN) */
        size_t *start, *pos;
        size_t copy_n;              /* values in copy */
        void *copy;                 /* copy_n values of dt (from cuda_alloc) */
        int valid;                  /* copy == cast(master) == cast(w) where w was rounded from master */
    } wc;
    char label[64];
    char name[64];
};

static inline int fp_bcu_is16(fp_dtype d) { return d == FP_DT_F16 || d == FP_DT_BF16; }

/* A slot of at least `bytes` (NULL with the arena's message). */
void *fp_bcu_stage(fp_backend *be, int slot, size_t bytes);
/* t in storage dtype `dt` (F32, F16, BF16): t itself when it is in dt, else a cast copy staged in `slot`.
 * Never rounded to TF32: under TF32 math cuDNN / cuBLASLt convert fp32 operands themselves. *rc gets the error. */
fp_dtensor fp_bcu_as(fp_backend *be, const fp_tensor *t, fp_dtype dt, int slot, int *rc);
/* A staged tensor of dims d and dtype dt in `slot`, zeroed (for cuDNN / cuBLAS outputs that accumulate). */
fp_dtensor fp_bcu_zeroed(fp_backend *be, fp_dims d, fp_dtype dt, int slot, int *rc);
/* Lands a computed gradient (tmp: result alone, in tmp's dtype) in dst with backend.h's accumulate rule. */
int fp_bcu_land_grad(fp_backend *be, const fp_tensor *dst, const fp_dtensor *tmp, int accumulate);
/* The op about to write bytes at p (backend memory): the weight copy is invalid when they overlap its
 * weights or master weights. */
void fp_bcu_wc_touch(fp_backend *be, const void *p, size_t bytes);
/* fp_bcu_free gives back bytes at p: the weight copy goes when they overlap its weights or master weights. */
void fp_bcu_wc_freed(fp_backend *be, const void *p, size_t bytes);
/* The round op writes bytes of fp32 from src into dst in format `to`: the weight copy stays valid only when that
 * rounds the master weights in place, or into the weights at the same offset, to its format. */
void fp_bcu_wc_round(fp_backend *be, const void *dst, const void *src, size_t bytes, fp_dtype to);
/* *o: the weight copy's view of t (an fp32 weight or bias inside the registered weights) in run format rd,
 * when the copy is valid and of format rd: 1; else 0 (*o untouched: cast as before). */
int fp_bcu_wc_view(fp_backend *be, const fp_tensor *t, fp_dtype rd, fp_dtensor *o);
/* The cuDNN context for a compute format (TF32: ctx[1], created on demand), labelled. */
fp_cudnn *fp_bcu_ctx(fp_backend *be, fp_dtype compute, int *rc);
static inline fp_dtensor fp_bcu_dt(const fp_tensor *t) { fp_dtensor d = {t->p, t->dt, t->d}; return d; }

/* The table's ops (backend_cuda.c's table), with its types (backend.h): fp_bcu_<op>. */
#define FP_BCU_OP(op) extern FP_BACKEND_OP_TYPE(op) fp_bcu_##op;
FP_BCU_OP(sync)   /* backend_cuda.c */
FP_BCU_OP(alloc) FP_BCU_OP(free) FP_BCU_OP(download) FP_BCU_OP(copy) FP_BCU_OP(zero) FP_BCU_OP(reserve)
FP_BCU_OP(memory)   /* backend_cuda_memory.c */
FP_BCU_OP(cast) FP_BCU_OP(round) FP_BCU_OP(relu_forward) FP_BCU_OP(relu_backward) FP_BCU_OP(add) FP_BCU_OP(accumulate)
FP_BCU_OP(softmax_xent) FP_BCU_OP(unscale_check) FP_BCU_OP(hist)
FP_BCU_OP(update_delta)   /* backend_cuda_elementwise.c */
FP_BACKEND_LAYER_OPS(FP_BCU_OP)   /* backend_cuda_layers.c */
FP_BCU_OP(bn_act_query) FP_BCU_OP(bn_act_forward_train) FP_BCU_OP(bn_act_backward)   /* backend_cuda_layers.c */
FP_BACKEND_SYNC_BN_OPS(FP_BCU_OP)   /* backend_cuda_sync_bn.c */
#undef FP_BCU_OP

/* backend_cuda.c: a CUDA error as the backend's code (FP_ENOMEM for memory, else FP_EINTERNAL) with what failed.
 * backend_cuda_memory.c: *buf grown to hold at least bytes of arena memory (contents not kept; NULL with the arena's
 * message), counted as staging; one cudaMemcpyAsync of kind k on the stream (FP_EINVAL for a NULL pointer, nothing
 * for 0 bytes or dst == src). */
int fp_bcu_cuda_err(cudaError_t e, const char *what);
int fp_bcu_gave_up(void);   /* a failed runtime call forgotten (cudaGetLastError), so no later check reads it: 0 */
void *fp_bcu_grow_slot(fp_backend *be, void **buf, size_t *cap, size_t bytes, const char *what);
int fp_bcu_xfer(fp_backend *be, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind k, const char *what);

/* upload.c: the table's upload op (its paths in order: upload.c), and everything of the upload staging freed after
 * the copy stream is done (the stream synchronised by the caller). */
int fp_bcu_upload(fp_backend *be, void *dst, const void *src, size_t bytes);
void fp_bcu_upload_free(fp_backend *be);

/* host_register.c: [src, src + bytes) lies whole inside one range page-locked by fp_backend_cuda_host_register. */
int fp_bcu_host_holds(const void *src, size_t bytes);

#endif
