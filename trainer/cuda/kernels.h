/* kernels.h — the CUDA backend's own kernels (not cuDNN / cuBLAS): loss, AMP unscale + check, fused
 * SGD and Adam / AdamW, the device step's state and scalars, exponent histogram, a parameter step's update and
 * lost updates, per-layer error; pinned memory, events and the step's CUDA graph. Each mirrors a CPU reference function and promises its
 * semantics (named below). Pointers marked d_ are device pointers; stream is a cudaStream_t passed as
 * void* (NULL: the default stream). Every function returns FP_OK or a negative FP_E* code with
 * fp_error_message() naming the CUDA error; FP_EINVAL for bad arguments (checked before any launch). */
#ifndef FP_CUDA_KERNELS_H
#define FP_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {   /* hist.h and precision.h have no guards of their own: C linkage for their functions */
#endif
#include "hist.h"
#include "../optim.h"       /* fp_optim_config (relative: nvcc sees only lib/ on its include path) */
#include "../precision.h"   /* fp_dtype */

/* ---- softmax cross-entropy (trainer/layers.h fp_softmax_xent) ----
 * d_logits [n, classes] fp32, d_labels [n] int32 in [0, classes). d_dlogits (may be NULL) gets
 * (softmax - onehot) / n, overwritten. d_out (device) receives an fp_cuda_xent_result (loss sum not
 * yet divided, hit counts, bad_label); fp_cuda_xent_finish turns the copied-back result into
 * fp_softmax_xent's outputs. Labels are checked first, on the device: when one is out of range,
 * bad_label names the first such sample, nothing else is written (d_dlogits untouched) and the
 * finish step reports FP_EINVAL naming the sample, as the CPU does.
 * One block per sample; exps in fp32 after max subtraction, sums and logs in double. */
typedef struct {
    double loss_sum;   /* sum over samples of lse - logit[label] (order of samples unspecified) */
    int correct1, correct5;
    int bad_label;     /* -1, or the smallest sample index whose label is out of range */
    int pad;
} fp_cuda_xent_result;
#define FP_CUDA_XENT_OUT_BYTES sizeof(fp_cuda_xent_result)

int fp_cuda_softmax_xent(fp_cuda_xent_result *d_out, float *d_dlogits, const float *d_logits,
                         const int *d_labels, int n, int classes, void *stream);
/* Host side: from a result copied back (after the stream synchronised) to fp_softmax_xent's
 * outputs (loss = loss_sum / n as float; correct1 / correct5 may be NULL); FP_EINVAL on a bad label. */
int fp_cuda_xent_finish(const fp_cuda_xent_result *res, int n, int classes, float *loss, int *correct1,
                        int *correct5);
/* Convenience: launch, copy back, synchronise the stream, finish (d_out is device scratch). */
int fp_cuda_softmax_xent_sync(float *loss, int *correct1, int *correct5, float *d_dlogits, const float *d_logits,
                              const int *d_labels, int n, int classes, fp_cuda_xent_result *d_out, void *stream);

/* ---- many gradient segments in one launch (multi-tensor apply) ---- */
typedef struct {
    float *param;          /* SGD: fp32 master weights, updated in place (unused by unscale) */
    float *grad;           /* fp32 gradient (unscale: scaled in place; SGD: read only) */
    float *momentum;       /* SGD: momentum buffer (NULL when momentum == 0) */
    uint16_t *lowp;        /* SGD: 16-bit copy of the new weights (NULL: none), dtype per call */
    size_t n;
    int apply_weight_decay;
} fp_cuda_segment;

/* trainer/precision.c fp_unscale_and_check over every segment's grad: g *= inv_scale, and *d_found
 * (one device int) is set to 0, then to 1 when any value was Inf or NaN before scaling. Segments
 * may be any number (launched in groups); segments with n == 0 are skipped. */
int fp_cuda_unscale_and_check(const fp_cuda_segment *segs, size_t nseg, float inv_scale, int *d_found,
                              void *stream);

/* trainer/optim.c's SGD update (fp_optim_config semantics: momentum, nesterov, weight decay;
 * dampening is always 0 there and here), element by element the fused-FMA path of optim.c, which
 * is bit-exact with torch 1.13: d = fma(p, wd, g) when weight decay applies; buf = first ? d :
 * buf * mom + d (two roundings); d = nesterov ? fma(buf, mom, d) : buf; p = fma(d, -lr, p).
 * first: this is the optimizer's first step (optim.c's step counter was 0). When lowp_dtype is
 * FP_DT_F16 or FP_DT_BF16, segments with a lowp pointer also get the new weights rounded to it
 * (round to nearest even) in the same pass; FP_DT_F32 writes no copy. */
int fp_cuda_sgd_step(const fp_cuda_segment *segs, size_t nseg, double lr, double momentum,
                     double weight_decay, int nesterov, int first, fp_dtype lowp_dtype, void *stream);

/* The optimizer kernels' per-step scalars (issue 22, point 1: a CUDA graph replays the step, so nothing that
 * changes from step to step may be a kernel argument): filled on the host (fp_cuda_sgd_scalars /
 * fp_cuda_adam_scalars: the double arithmetic of the by-value launches, rounded to fp32 as optim.c does), moved
 * into device memory with one cudaMemcpyAsync from pinned memory (fp_cuda_optim_scalars_upload) before the
 * launch, read there by the _dev launches (a captured launch reads each replay's values). The by-value launches
 * fill the same struct, so both run the same arithmetic. FP_EINVAL for a bad lr or step (nothing filled). */
typedef struct {
    float sgd_alpha;            /* SGD: (float)-lr */
    int sgd_first;              /* SGD: the optimizer's first step (optim.c's counter was 0) */
    float adam_neg_step_size;   /* Adam: (float)-(lr / (1 - beta1^t)) */
    float adam_bc2_sqrt;        /* Adam: (float)sqrt(1 - beta2^t) */
    float adam_decay;           /* AdamW: (float)(1 - lr * wd) */
    int pad[3];
} fp_cuda_optim_scalars;
int fp_cuda_sgd_scalars(fp_cuda_optim_scalars *v, double lr, int first);
int fp_cuda_adam_scalars(fp_cuda_optim_scalars *v, const fp_optim_config *cfg, double lr, int64_t step);
/* h_scalars (pinned: fp_cuda_host_alloc) -> d_scalars on the stream; h_scalars must stay unchanged until the
 * stream has run the copy (the step's end synchronisation). */
int fp_cuda_optim_scalars_upload(fp_cuda_optim_scalars *d_scalars, const fp_cuda_optim_scalars *h_scalars,
                                 void *stream);

/* The same with a skip flag (issue 22: the host off the step): when d_skip is not NULL and *d_skip is non-zero
 * on the device when the kernel runs, no parameter and no momentum buffer changes; a segment's lowp copy is
 * still written, as the cast of its unchanged fp32 weights (so the copy equals the cast of the weights after
 * the launch either way). d_skip NULL: fp_cuda_sgd_step. */
int fp_cuda_sgd_step_unless(const fp_cuda_segment *segs, size_t nseg, double lr, double momentum,
                            double weight_decay, int nesterov, int first, fp_dtype lowp_dtype, const int *d_skip,
                            void *stream);

/* fp_cuda_sgd_step_unless with lr and first read from d_scalars (device memory) when the kernel runs. */
int fp_cuda_sgd_step_dev(const fp_cuda_segment *segs, size_t nseg, double momentum, double weight_decay, int nesterov,
                         fp_dtype lowp_dtype, const int *d_skip, const fp_cuda_optim_scalars *d_scalars, void *stream);

/* ---- Adam / AdamW (adam.cu) ----
 * One segment per parameter tensor: the fp32 master weights (updated in place), the fp32 gradient (read), the
 * moments exp_avg (m) and exp_avg_sq (v), n values each stored in the call's state dtype (float for FP_DT_F32,
 * 16-bit patterns for FP_DT_F16 / FP_DT_BF16), and the optional 16-bit weight copy (as fp_cuda_segment's). */
typedef struct {
    float *param;
    const float *grad;
    void *exp_avg, *exp_avg_sq;
    uint16_t *lowp;
    size_t n;
    int apply_weight_decay;
} fp_cuda_adam_segment;

/* trainer/optim.c's Adam (cfg->kind FP_OPTIM_ADAM: L2 folded into the gradient) or AdamW (FP_OPTIM_ADAMW: p *= 1 -
 * lr * wd first) on every segment, as the step-th update (the optimizer's counter after it moved, >= 1): the bias
 * corrections 1 - beta^step and the scalar coefficients in double rounded to fp32 as optim.c's adam_tensor does;
 * element by element optim.c's FMA path (explicit __fmaf_rn / __fmul_rn / __fdiv_rn / __fsqrt_rn), so bit-identical
 * to fp_optim_step on an FMA CPU. m and v are read from state_dtype (exact), computed in fp32, and stored rounded
 * to it (round to nearest even, overflow to Inf: fp_round_to_dtype after fp_optim_step, as `half` does on the
 * host); the weights' update uses them unrounded, as the host does. lowp_dtype as fp_cuda_sgd_step; d_skip as
 * fp_cuda_sgd_step_unless (set on the device: no weight and no moment changes, the copy rewritten as the cast of
 * the unchanged weights; NULL: always update). FP_EINVAL for a non-Adam kind, bad hyperparameters, lr, step. */
int fp_cuda_adam_step_unless(const fp_cuda_adam_segment *segs, size_t nseg, const fp_optim_config *cfg, double lr,
                             int64_t step, fp_dtype state_dtype, fp_dtype lowp_dtype, const int *d_skip, void *stream);

/* fp_cuda_adam_step_unless with the step's scalars (lr, step) read from d_scalars (fp_cuda_adam_scalars's, device
 * memory) when the kernel runs. */
int fp_cuda_adam_step_dev(const fp_cuda_adam_segment *segs, size_t nseg, const fp_optim_config *cfg,
                          fp_dtype state_dtype, fp_dtype lowp_dtype, const int *d_skip,
                          const fp_cuda_optim_scalars *d_scalars, void *stream);

/* fp_cuda_unscale_and_check, also recording in *d_first (one device int, set to INT_MAX first) the smallest
 * position in segs[] of a segment that held an Inf or NaN (INT_MAX: none), so that the caller can name the
 * first non-finite tensor in its own order without looking at the gradients on the host. */
int fp_cuda_unscale_and_check_first(const fp_cuda_segment *segs, size_t nseg, float inv_scale, int *d_found,
                                    int *d_first, void *stream);

/* The same with the factor 1 / *d_scale (one device float, read when the kernels run; the quotient rounded to fp32
 * as the host's 1.0f / scale): the step state's loss scale, so that a captured step unscales by each replay's. */
int fp_cuda_unscale_and_check_first_by(const fp_cuda_segment *segs, size_t nseg, const float *d_scale, int *d_found,
                                       int *d_first, void *stream);

/* ---- the device side of one arm step (step.cu; trainer/run/arm_device.c's device step) ----
 * The loss, the non-finite flags and GradScaler's state stay on the device during a step; the host reads
 * this struct back once, at the step's end (fp_cuda_step_readback into pinned memory, then one stream
 * synchronisation). PyTorch's counterparts: the found_inf tensor of _amp_foreach_non_finite_check_and_unscale_,
 * _amp_update_scale_'s scale and growth_tracker tensors, the loss tensor. */
typedef struct {
    fp_cuda_xent_result xent;  /* the step's loss result (fp_cuda_step_loss copies it in) */
    float flags[3];            /* [0] an Inf / NaN gradient, [1] a non-finite loss, [2] a label out of range:
                                * 0 or 1 on this rank; with ranks, averaged over them (> 0: on some rank) */
    float scale;               /* the loss scale: the step's, after fp_cuda_step_update the next step's */
    int growth_tracker;        /* consecutive clean steps (fp_grad_scaler.clean_steps) */
    int found;                 /* this rank's unscale flag (fp_cuda_unscale_and_check_first's d_found) */
    int first_nonfinite;       /* ... and its first segment (INT_MAX: none) */
    int skip;                  /* fp_cuda_step_update's decision: the optimizer does nothing */
    int loss_n;                /* the batch the loss was divided by */
    int pad;
} fp_cuda_step_state;

/* Sets the state's scale and growth tracker (the host's GradScaler, e.g. after a restore) on the stream. */
int fp_cuda_step_set_scaler(fp_cuda_step_state *d_state, float scale, int growth_tracker, void *stream);
/* After the loss (fp_cuda_softmax_xent into d_xent, device): copies it into the state; flags[1] = the loss
 * (float)(loss_sum / n) is not finite, flags[2] = a label was out of range; flags[0] = 0. */
int fp_cuda_step_loss(fp_cuda_step_state *d_state, const fp_cuda_xent_result *d_xent, int n, void *stream);
/* After the unscale (into d_state->found): flags[0] = found. */
int fp_cuda_step_flags(fp_cuda_step_state *d_state, void *stream);
/* GradScaler.update on the device (torch._amp_update_scale_, trainer/precision.c fp_grad_scaler_update), from
 * the flags (> 0: on some rank): a label out of range: skip, nothing moves; else mode FP_SCALE_DYNAMIC: an Inf /
 * NaN gradient: scale *= backoff, tracker 0, skip; clean: tracker + 1, and at growth_interval scale *= growth
 * when the product is finite, tracker 0. FP_SCALE_STATIC: skip on Inf / NaN, the scale stays. FP_SCALE_NONE:
 * skip only on a non-finite loss (the step diverged: nothing is updated). Products rounded as fp32 (__fmul_rn). */
int fp_cuda_step_update(fp_cuda_step_state *d_state, int mode, float growth_factor, float backoff_factor,
                        int growth_interval, void *stream);
/* One cudaMemcpyAsync of the whole state into h_state (pinned: fp_cuda_host_alloc); valid after the stream
 * synchronised. */
int fp_cuda_step_readback(fp_cuda_step_state *h_state, const fp_cuda_step_state *d_state, void *stream);

/* x[i] = x[i] * *d_scale (fp32, __fmul_rn: the backend's scale op with the factor read on the device), n floats:
 * the loss gradient scaled by the step state's loss scale (&d_state->scale). */
int fp_cuda_scale_by(float *d_x, size_t n, const float *d_scale, void *stream);

/* Pinned host memory (cudaHostAlloc / cudaFreeHost); FP_ENOMEM. */
int fp_cuda_host_alloc(void **p, size_t bytes);
void fp_cuda_host_free(void *p);
/* Timing events (cudaEvent_t as void*): created, recorded on a stream, and the time between two recorded
 * events in ns (cudaEventElapsedTime, about 0.5 us resolution) once the later one completed. */
int fp_cuda_event_create(void **ev);
void fp_cuda_event_destroy(void *ev);
int fp_cuda_event_record(void *ev, void *stream);
int fp_cuda_event_elapsed_ns(void *from, void *to, int64_t *ns);

/* ---- CUDA graphs (step.cu): one device step captured once, replayed (issue 22, point 1) ----
 * begin: the stream's work from now on is captured (cudaStreamBeginCapture, cudaStreamCaptureModeThreadLocal),
 * not run; while capturing, fp_cuda_event_record_captured records a timing event as an external event node
 * (cudaEventRecordExternal: elapsed times read after a replay as after an eager step). end: the capture ends
 * (always, also after a failure inside it: the stream is usable again) and is instantiated into *exec
 * (cudaGraphExec_t as void*); FP_EINTERNAL naming the CUDA error, nothing instantiated. launch: one replay on
 * the stream. The test hook makes the next end fail ("test hook") after ending the capture. */
int fp_cuda_graph_begin(void *stream);
int fp_cuda_graph_end(void *stream, void **exec);
int fp_cuda_graph_launch(void *exec, void *stream);
void fp_cuda_graph_destroy(void *exec);
int fp_cuda_event_record_captured(void *ev, void *stream);
void fp_cuda_graph_fail_next_for_test(void);

/* ---- exponent histogram (lib/hist.h) ----
 * n values of dtype (FP_DT_F32 float, FP_DT_F16 / FP_DT_BF16 16-bit patterns) at d_x are counted on
 * the device (shared-memory counters per block, merged into one raw result) and merged into *h:
 * every count, amax and min_nonzero equal to fp_hist_add / fp_hist_add_f16 / _bf16 on the same
 * values; sum_abs equal up to summation order (relative <= 1e-9). d_work: device scratch of
 * fp_cuda_hist_work_bytes() bytes. Synchronises the stream (the result is copied back). */
size_t fp_cuda_hist_work_bytes(void);
int fp_cuda_hist_add(fp_hist_t *h, const void *d_x, size_t n, fp_dtype dtype, void *d_work, void *stream);

/* ---- a parameter step's update and lost updates (trainer/layers.h fp_update_delta) ----
 * d_d[i] = d_nw[i] - d_old[i] (__fsub_rn: no contraction, denormals kept) and, over the i with d_g[i] finite
 * and nonzero, *moved their number and *lost those with d_nw[i] == d_old[i]: bit for bit fp_update_delta.
 * d_counts: device scratch of 2 unsigned long long. Synchronises the stream (the counts are copied back). */
int fp_cuda_update_delta(float *d_d, const float *d_nw, const float *d_old, const float *d_g, size_t n, size_t *lost,
                         size_t *moved, unsigned long long *d_counts, void *stream);

/* ---- per-layer error (trainer/analysis/analysis.h fp_layer_error) ----
 * d_x (n values of x_dtype: fp32, or fp16 / bf16 patterns) against the fp32 reference d_ref:
 * rel_l2, max_abs, cosine with fp_layer_error's definitions (zeros and non-finite cases included),
 * sums in double; outputs may be NULL. d_work: device scratch of fp_cuda_layer_error_work_bytes().
 * Synchronises the stream. */
size_t fp_cuda_layer_error_work_bytes(void);
int fp_cuda_layer_error(const float *d_ref, const void *d_x, fp_dtype x_dtype, size_t n, double *rel_l2,
                        double *max_abs, double *cosine, void *d_work, void *stream);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* ---- shared by the .cu files only: launch checks, segment groups, the weight copy's cast, block reductions ---- */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "error.h"

#define FP_CUDA_THREADS 256   /* every kernel here runs 256-thread blocks */

static inline int fp_cuda_check(cudaError_t err, const char *what)
{
    if (err != cudaSuccess)
        return fp_fail(FP_EINTERNAL, "%s: CUDA error: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
    return FP_OK;
}

static inline int fp_cuda_check_launch(const char *what) { return fp_cuda_check(cudaGetLastError(), what); }

/* Grid for a grid-stride loop over n elements: at most `cap` blocks, at least 1. */
static inline unsigned fp_cuda_grid(size_t n, unsigned cap)
{
    size_t b = (n + FP_CUDA_THREADS - 1) / FP_CUDA_THREADS;
    return (unsigned)(b > cap ? cap : (b ? b : 1));
}

/* Up to FP_SEG_GROUP segments travel by value as one kernel parameter (fp_cuda_segment: 3 KiB;
 * fp_cuda_adam_segment: 3.5 KiB; under the 4 KiB limit); each block walks every segment of its group with a
 * grid-stride loop. */
#define FP_SEG_GROUP 64
template <typename S> struct fp_seg_group_of {
    S s[FP_SEG_GROUP];
    int count;
};
typedef fp_seg_group_of<fp_cuda_segment> fp_seg_group;

/* Fills g with the next non-empty segments of segs (at most FP_SEG_GROUP) from *i on, advancing *i past
 * them; returns the largest n among them (g->count 0: none left). */
template <typename S>
static inline size_t fp_seg_group_next(fp_seg_group_of<S> *g, const S *segs, size_t nseg, size_t *i)
{
    size_t most = 0;
    g->count = 0;
    for (; *i < nseg && g->count < FP_SEG_GROUP; (*i)++) {
        if (!segs[*i].n)
            continue;
        g->s[g->count++] = segs[*i];
        most = segs[*i].n > most ? segs[*i].n : most;
    }
    return most;
}

/* The 16-bit weight copy (a segment's lowp) an optimizer kernel writes: its dtype checked (FP_EINVAL unless fp16,
 * bf16 or fp32: none) and turned into a kernel's code (0 none, 1 fp16, 2 bf16); one value cast to it (round to
 * nearest even, overflow to Inf) as the bits stored; and a skipped step's copy, every segment's recast from its
 * unchanged weights (so the copy equals the cast of the weights after the launch either way). */
static inline int fp_cuda_lowp_code(fp_dtype d, const char *what, int *code)
{
    *code = d == FP_DT_F16 ? 1 : d == FP_DT_BF16 ? 2 : 0;
    if (d != FP_DT_F32 && !*code)
        return fp_fail(FP_EINVAL, "%s: the weight copy must be fp16 or bf16 (or fp32: none), not %s", what,
                       fp_dtype_name(d));
    return FP_OK;
}

__device__ inline uint16_t fp_cuda_lowp_bits(float x, int code)
{
    return code == 1 ? __half_as_ushort(__float2half_rn(x)) : __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

template <typename S> __device__ inline void fp_seg_group_recast(const fp_seg_group_of<S> &g, int code)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int k = 0; code && k < g.count; k++) {
        const S &s = g.s[k];
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; s.lowp && i < s.n; i += stride)
            s.lowp[i] = fp_cuda_lowp_bits(s.param[i], code);
    }
}

/* Block-wide sums / maxima over FP_CUDA_THREADS threads; every thread gets the result. `sh` is
 * shared scratch of FP_CUDA_THREADS / 32 elements; the call contains __syncthreads. Sums add lanes
 * in a fixed tree, so a given launch configuration always adds in the same order. */
template <typename T> __device__ inline T fp_warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

template <typename T> __device__ inline T fp_block_sum(T v, T *sh)
{
    v = fp_warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    T t = lane < FP_CUDA_THREADS / 32 ? sh[lane] : T(0);
    if (warp == 0)
        t = fp_warp_sum(t);
    if (threadIdx.x == 0)
        sh[0] = t;
    __syncthreads();
    t = sh[0];
    __syncthreads();
    return t;
}
#endif

#endif
