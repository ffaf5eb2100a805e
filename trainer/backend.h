/* backend.h — the table of operations the model runs on (docs/design.md: "backends hide behind one table of
 * operations"): memory, conv, batchnorm, relu, pools, linear, residual add / accumulate, softmax
 * cross-entropy, casts, the fused unscale + non-finite check, the probes' histograms and parameter updates, sync.
 * Layers and models call only this.
 * Promises: the CPU backend (fp_backend_cpu, the numerical reference) is bit-identical to the fp32
 * kernels of layers.h composed with widen (16-bit -> fp32) / round / narrow as described per op. */
#ifndef FP_BACKEND_H
#define FP_BACKEND_H

#include <stddef.h>
#include "trainer/layers.h"
#include "trainer/precision.h"
#include "hist.h"   /* fp_hist_t: the hist op */

/* ---- tensors ----
 * A typed view of backend memory: p (from the backend's alloc, or a pointer into such a block), the
 * storage format dt (FP_DT_F32, FP_DT_F16 or FP_DT_BF16; never TF32: tf32 is a compute format only)
 * and NHWC dims d (element (n, y, x, c) at ((n*h + y)*w + x)*c + c; all four >= 1). Vectors and
 * matrices use d = {rows, 1, 1, cols}: a linear weight [out, in] is {out, 1, 1, in}, a bias or a
 * per-channel vector of c values is {1, 1, 1, c}, logits [n, classes] are {n, 1, 1, classes}.
 * p == NULL marks an output the op shall skip, where an op says so ("may be skipped").
 * Every op checks dims and dtypes and returns FP_EINVAL with fp_error_message() set on a mismatch;
 * no op reads or writes outside its tensors. */
typedef struct {
    void *p;
    fp_dtype dt;
    fp_dims d;
} fp_tensor;

/* Elements of a tensor view (n*h*w*c; 0 when a dim is < 1). */
static inline size_t fp_tensor_count(const fp_tensor *t)
{
    if (t->d.n < 1 || t->d.h < 1 || t->d.w < 1 || t->d.c < 1)
        return 0;
    return (size_t)t->d.n * (size_t)t->d.h * (size_t)t->d.w * (size_t)t->d.c;
}
static inline fp_tensor fp_tensor_of(void *p, fp_dtype dt, fp_dims d)
{
    fp_tensor t = {p, dt, d};
    return t;
}

/* Backend memory accounting (bytes). */
typedef struct {
    size_t allocated, allocated_peak;   /* through alloc / free (activations, gradients, copies) */
    size_t workspace, workspace_peak;   /* the backend's own scratch for the conv kernels (im2col / algos) */
    size_t staging, staging_peak;       /* the backend's own fp32 staging for 16-bit tensors (widen /
                                         * compute / narrow) and 16-bit weight gradients before rounding */
} fp_backend_mem;

typedef struct fp_backend fp_backend;   /* one instance: handles, streams, scratch, accounting */

/* ---- the table ----
 * Conventions (docs/design.md): outputs first; `be` before everything. Forward ops OVERWRITE their output.
 * Gradient ops take `accumulate`: 0 overwrites the output with the result, 1 adds the result to what
 * is there (cuDNN / cuBLAS beta = 0 / 1); where an op says "ACCUMULATES" it always adds (parameter
 * gradients, zeroed once per step by the caller). For a 16-bit gradient output, accumulate 0 stores
 * round(result) and accumulate 1 stores round(old + round(result)) (PyTorch adds two 16-bit tensors);
 * the sign of a zero result written with accumulate 0 may differ between backends (the CPU
 * backend computes most fp32 gradients as 0 + result, storing +0).
 * `compute` (conv / linear) is the format the inputs and weights are rounded to before an fp32-
 * accumulating GEMM: FP_DT_F32 (none), FP_DT_TF32, FP_DT_F16 or FP_DT_BF16 (autocast).
 * Every op may be asynchronous on a device backend: results are visible to the host after sync (the
 * CPU backend is synchronous). All ops return FP_OK or a negative FP_E* code with the message set. */
typedef struct fp_backend_ops {
    const char *name;          /* "cpu" */
    int host_memory;           /* 1: alloc returns host memory that callers may read and write directly
                                * (CPU). The model needs this today: it hands logits, layer outputs and
                                * probe tensors out as host pointers and keeps parameters, gradients and
                                * running statistics in host buffers. A device backend (0) must be
                                * reached through download for those: see "device backends" below. */

    /* -- instance -- */
    int (*create)(fp_backend **out);          /* FP_ENOMEM */
    void (*destroy)(fp_backend *be);          /* NULL is fine; frees the backend's own scratch */
    void (*set_threads)(fp_backend *be, int threads);   /* host threads hint (>= 1; CPU: kernels' hint) */
    int (*sync)(fp_backend *be);              /* waits for every op issued so far */
    /* names (copied) what the next allocations and ops are for (a layer, "parameters"), for out-of-memory
     * and library messages; NULL clears. May be NULL in the table (the CPU backend has none). */
    void (*set_label)(fp_backend *be, const char *label);

    /* -- memory --
     * alloc: *p gets `bytes` (>= 1) of backend memory, contents undefined; FP_ENOMEM. free: p from
     * alloc with the same bytes (NULL is fine). upload: host -> backend; download: backend -> host;
     * copy: backend -> backend (no overlap); zero: bytes of backend memory set to 0.
     * reserve: grows (never shrinks) the backend's staging so that ops on tensors of up to act_elems
     * elements and weight gradients of up to weight_elems allocate nothing per step; an op that needs
     * more grows it itself; it is freed with the instance. memory: the accounting above. */
    int (*alloc)(fp_backend *be, void **p, size_t bytes);
    void (*free)(fp_backend *be, void *p, size_t bytes);
    int (*upload)(fp_backend *be, void *dst, const void *src, size_t bytes);
    int (*download)(fp_backend *be, void *dst, const void *src, size_t bytes);
    int (*copy)(fp_backend *be, void *dst, const void *src, size_t bytes);
    int (*zero)(fp_backend *be, void *p, size_t bytes);
    int (*reserve)(fp_backend *be, size_t act_elems, size_t weight_elems);
    void (*memory)(const fp_backend *be, fp_backend_mem *out);

    /* -- casts --
     * cast: dst = src converted to dst.dt (same count): F32 -> F16 / BF16 rounds to nearest even
     * (overflow -> Inf), F16 / BF16 -> F32 is exact, 16-bit -> other 16-bit goes through fp32, the same
     * format copies. No overlap unless dst.p == src.p with the same dtype.
     * round: dst = src rounded to `to` (F32, TF32, F16 or BF16) but kept in fp32 containers (dst, src
     * F32; dst may be src): the weight copy of autocast, `half` master weights and statistics. */
    int (*cast)(fp_backend *be, fp_tensor dst, fp_tensor src);
    int (*round)(fp_backend *be, fp_tensor dst, fp_tensor src, fp_dtype to);

    /* -- convolution (no bias; layers.h: fp_conv_params, weights OHWI as d = {cout, kh, kw, cin}) --
     * x, y, dy, dx: F32 / F16 / BF16; w: F32 (values already rounded to `compute`: the model's weight
     * copy) or 16-bit; dw: F32. Inputs rounded to compute, fp32 accumulation, the output narrowed to
     * its own format. forward: y = conv(x, w). backward_data: dx (accumulate) = conv^T(dy, w).
     * backward_weights: ACCUMULATES dw += g, where g = conv grad of (dy, x), rounded to compute first
     * when compute is 16-bit (autocast's cast backward). */
    int (*conv_forward)(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, const fp_conv_params *p,
                        fp_dtype compute);
    int (*conv_backward_data)(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, const fp_conv_params *p,
                              fp_dtype compute, int accumulate);
    int (*conv_backward_weights)(fp_backend *be, fp_tensor dw, fp_tensor dy, fp_tensor x,
                                 const fp_conv_params *p, fp_dtype compute);

    /* -- batchnorm (layers.h semantics; per channel over N*H*W, computed in fp32) --
     * x, y, dy, dx: F32 / F16 / BF16 (y in any format, usually x's; y may alias x when the formats
     * agree); gamma, beta, running stats, save (2*c: mean then inverse std), dgamma, dbeta: F32 with
     * d = {1, 1, 1, c}. forward_train: batch statistics, running stats updated (may be skipped),
     * save written (may be skipped). backward: dx (accumulate; may be skipped), dgamma and dbeta
     * ACCUMULATE (may be skipped). */
    int (*bn_forward_train)(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                            fp_tensor running_var, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                            const fp_bn_params *p);
    int (*bn_forward_eval)(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                           fp_tensor running_mean, fp_tensor running_var, const fp_bn_params *p);
    int (*bn_backward)(fp_backend *be, fp_tensor dx, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy, fp_tensor x,
                       fp_tensor gamma, fp_tensor save, int accumulate);

    /* -- fused batchnorm (+ residual add) + relu, training (cuDNN's BN_ACTIVATION / BN_ADD_ACTIVATION) --
     * May be NULL in the table: the model then runs bn / add / relu apart. bn_act_query: FP_OK with
     * *reserve_bytes (backend memory a layer keeps from its forward to its backward; may be 0) when the
     * backend fuses an x like this one (format, dims; with_add: a residual z too), FP_EUNAVAIL (message
     * set) when it does not: the caller runs the unfused ops for that layer. forward_train: y = relu(bn(x) +
     * z) (z skipped: relu(bn(x))), statistics, running stats and save as bn_forward_train; x, z, y of one
     * format and shape, y may alias z (not x); computed in fp32 and rounded to y's format ONCE (the unfused
     * ops round bn(x), then the sum: a 16-bit y differs from theirs by at most half an ulp of bn(x) plus one
     * ulp of y; fp32 equals the unfused composition bit for bit on the CPU). reserve: reserve_bytes of backend memory
     * (NULL when 0), written here, read by the backward of the same layer. backward: g = y > 0 ? dy : +0
     * (y: the forward's output); dz (may be skipped) = g with accumulate_dz (relu / add backward's rule); dx
     * (may be skipped) = bn backward of g with accumulate_dx; dgamma, dbeta ACCUMULATE (may be skipped); p:
     * the forward's.
     * Either call may also answer FP_EUNAVAIL before writing anything: the caller runs the unfused ops. */
    int (*bn_act_query)(fp_backend *be, size_t *reserve_bytes, fp_tensor x, int with_add);
    int (*bn_act_forward_train)(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                                fp_tensor running_var, fp_tensor x, fp_tensor z, fp_tensor gamma, fp_tensor beta,
                                const fp_bn_params *p, void *reserve, size_t reserve_bytes);
    int (*bn_act_backward)(fp_backend *be, fp_tensor dx, fp_tensor dz, fp_tensor dgamma, fp_tensor dbeta,
                           fp_tensor dy, fp_tensor y, fp_tensor x, fp_tensor gamma, fp_tensor beta, fp_tensor save,
                           const fp_bn_params *p, void *reserve, size_t reserve_bytes, int accumulate_dx,
                           int accumulate_dz);
    /* -- synchronised batchnorm (--sync-bn, PyTorch's SyncBatchNorm; trainer/model_sync_bn.c) --
     * The model sums the small per-channel vectors `acc` over the ranks between these ops (its reduce hook),
     * so that a TRAIN forward normalises with the global batch's statistics and the backward's dx uses the
     * global sums. acc: F32 {1, 1, 1, 2c + 1}, backend memory; x, y, dy, dx as bn_*; gamma, beta, save (2c:
     * mean then inverse std), running stats, dgamma, dbeta: F32 {1, 1, 1, c}. Local sums accumulate in
     * double (CPU: rows in order; CUDA: fixed blocks of rows, added in block order); the reduction carries
     * them in fp32.
     * sync_stats: acc = [sum(x - k), sum((x - k)^2), rows] per channel over this x, rows = n*h*w (written as
     *   a float: exact up to 2^24); the shift k = center[j] / center[2c] (center: an acc of this op
     *   without center, already reduced: the global mean, so that the second pass is the two-pass
     *   algorithm), or 0 when center.p is NULL.
     * sync_forward: from a1 (the reduced acc without shift) and a2 (the reduced acc shifted by a1's mean),
     *   N = a2[2c], mean = k + a2[j] / N, var = a2[c + j] / N - (a2[j] / N)^2 (biased; >= 0): save written,
     *   running stats updated as bn_forward_train with the unbiased var * N / (N - 1) (may be skipped),
     *   y = (x - mean) * invstd * gamma + beta (y may alias x when the formats agree).
     * sync_backward_sums: acc = [sum dy, sum dy * xhat, rows] over this dy and x (xhat from save); dgamma
     *   += sum dy * xhat and dbeta += sum dy (this rank's: data parallel averages them as other gradients;
     *   may be skipped).
     * sync_backward_dx: dx (accumulate) = gamma * invstd * (dy - acc[j] / N - xhat * acc[c + j] / N) with
     *   N = acc[2c] (acc: sync_backward_sums' reduced). */
    int (*bn_sync_stats)(fp_backend *be, fp_tensor acc, fp_tensor x, fp_tensor center);
    int (*bn_sync_forward)(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                           fp_tensor running_var, fp_tensor x, fp_tensor gamma, fp_tensor beta, fp_tensor a1,
                           fp_tensor a2, const fp_bn_params *p);
    int (*bn_sync_backward_sums)(fp_backend *be, fp_tensor acc, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy,
                                 fp_tensor x, fp_tensor save);
    int (*bn_sync_backward_dx)(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor x, fp_tensor gamma,
                               fp_tensor save, fp_tensor acc, int accumulate);

    /* -- relu --
     * forward: y = max(x, 0) (v < 0 ? 0 : v: -0 and NaN pass), y and x of one format (any), y may
     * alias x. backward: dx (accumulate) = y > 0 ? dy : +0 (y: the forward output; NaN and -0 are not
     * > 0); dx, dy, y of one format; dx may alias dy with accumulate 0 (masks in place). */
    int (*relu_forward)(fp_backend *be, fp_tensor y, fp_tensor x);
    int (*relu_backward)(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor y, int accumulate);

    /* -- pools (layers.h semantics, computed in fp32; x, y, dy, dx: F32 / F16 / BF16) --
     * max: argmax (int32, one per output element, backend memory; may be NULL in forward) routes dy
     * back. avg: global, y d = {n, 1, 1, c}. Backward: dx (accumulate). */
    int (*maxpool_forward)(fp_backend *be, fp_tensor y, int *argmax, fp_tensor x, const fp_pool_params *p);
    int (*maxpool_backward)(fp_backend *be, fp_tensor dx, fp_tensor dy, const int *argmax,
                            const fp_pool_params *p, int accumulate);
    int (*avgpool_forward)(fp_backend *be, fp_tensor y, fp_tensor x);
    int (*avgpool_backward)(fp_backend *be, fp_tensor dx, fp_tensor dy, int accumulate);

    /* -- linear: y[n, out] = x[n, in] W^T + b (x of any NHWC dims, flattened per image to in) --
     * x, y, dy, dx: F32 / F16 / BF16; w {out, 1, 1, in}, b {1, 1, 1, out}: F32 (rounded to compute
     * already) or 16-bit, b may be skipped; dw, db: F32. Rounding as for conv. backward_weights:
     * dw and db ACCUMULATE (db may be skipped); backward_data: dx (accumulate). */
    int (*linear_forward)(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, fp_tensor b, fp_dtype compute);
    int (*linear_backward_data)(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, fp_dtype compute,
                                int accumulate);
    int (*linear_backward_weights)(fp_backend *be, fp_tensor dw, fp_tensor db, fp_tensor dy, fp_tensor x,
                                   fp_tensor w, fp_dtype compute);

    /* -- residual --
     * add: y = a + b computed in fp32, rounded to y's format (y may alias a or b; any formats, equal
     * counts). accumulate: dst = dst + src in fp32, rounded to dst's format (any formats). */
    int (*add)(fp_backend *be, fp_tensor y, fp_tensor a, fp_tensor b);
    int (*accumulate)(fp_backend *be, fp_tensor dst, fp_tensor src);

    /* -- loss --
     * Softmax cross-entropy, mean over the batch (layers.h): logits F32 {n, 1, 1, classes}; labels
     * (n int32, backend memory); *loss, *correct1, *correct5: host (the last two may be NULL);
     * dlogits F32 (may be skipped) = (softmax - onehot) / n, then multiplied by dscale in fp32 when
     * dscale != 1 (the loss scale of scaler.scale(loss).backward()). */
    int (*softmax_xent)(fp_backend *be, float *loss, fp_tensor dlogits, int *correct1, int *correct5,
                        fp_tensor logits, const int *labels, float dscale);

    /* -- gradient scaler --
     * g (F32) *= inv_scale in place, *found_inf (host) = 1 when some g was Inf or NaN before scaling,
     * else 0 (PyTorch's fused unscale_ + found_inf). */
    int (*unscale_check)(fp_backend *be, int *found_inf, fp_tensor g, float inv_scale);
    /* -- probes --
     * hist: the exponent histogram (lib/hist.h) of n values of dt (F32, or F16 / BF16 bit patterns) at
     * backend memory x, merged into *h (host): every count, amax and min_nonzero those of fp_hist_add /
     * fp_hist_add_f16 / _bf16 on the same values, sum_abs up to summation order (relative <= 1e-9).
     * Synchronous (h is complete on return). May be NULL in the table: the caller downloads and counts
     * on the host (the CPU backend has none; its memory is the host's). */
    int (*hist)(fp_backend *be, fp_hist_t *h, const void *x, fp_dtype dt, size_t n);
    /* update_delta: the update of a parameter step and its lost updates where the parameters lie (the parameter
     * pass, trainer/analysis/analysis.h): d = nw - old (one fp32 subtraction each) and, over the i with g[i]
     * finite and nonzero, *moved (host) their number and *lost (host) those with nw[i] == old[i]; d, nw, old, g
     * F32 of one count, d apart from the inputs. Bit for bit layers.h fp_update_delta (the CPU backend's is it).
     * Synchronous (the counts are complete on return). May be NULL in the table: the caller downloads. */
    int (*update_delta)(fp_backend *be, fp_tensor d, fp_tensor nw, fp_tensor old, fp_tensor g, size_t *lost,
                        size_t *moved);
} fp_backend_ops;

/* A backend declares the functions it puts in the table with the table's own types, so that each op's
 * signature is written once, above: `extern FP_BACKEND_OP_TYPE(conv_forward) my_conv_forward;`.
 * FP_BACKEND_LAYER_OPS(X) expands X(op) for each layer op (conv, batchnorm, pools, linear). __typeof__:
 * GCC and Clang (the build is gnu11; C23's typeof). */
#define FP_BACKEND_OP_TYPE(op) __typeof__(*((fp_backend_ops *)0)->op)
#define FP_BACKEND_LAYER_OPS(X)                                                                            \
    X(conv_forward) X(conv_backward_data) X(conv_backward_weights) X(bn_forward_train) X(bn_forward_eval) \
    X(bn_backward) X(maxpool_forward) X(maxpool_backward) X(avgpool_forward) X(avgpool_backward)         \
    X(linear_forward) X(linear_backward_data) X(linear_backward_weights)
/* The synchronised batchnorm's ops (--sync-bn), declared by each backend like the layer ops. */
#define FP_BACKEND_SYNC_BN_OPS(X) X(bn_sync_stats) X(bn_sync_forward) X(bn_sync_backward_sums) X(bn_sync_backward_dx)

/* The CPU backend (trainer/cpu/backend_cpu*.c): host memory, the fp32 kernels of layers.h, 16-bit
 * tensors widened into fp32 staging around each kernel and narrowed after. */
const fp_backend_ops *fp_backend_cpu(void);

/* ---- device backends ----
 * A backend with host_memory 0 (CUDA: trainer/backend_cuda.h, cuDNN NHWC, cuBLASLt, fp16 / bf16 stored
 * natively, memory from one arena per arm) implements the same ops on device pointers. The model runs on
 * one through fp_model_set_backend (model.h, "backends"; trainer/model_device.c), which does what
 * follows; the arm runs its SGD step and the unscale + check on the device (trainer/cuda/kernels.h).
 * What the layers above need of it:
 *  - probes (probe/probe.h) read tensors on the host: the model downloads an activation, a gradient
 *    or a weight (in its storage format) into a host buffer before fp_probe_tensor_dt, unless every
 *    probe that wants it takes a ready histogram (fp_probe_wants_values) and the backend has the hist
 *    op: then only the counts come back (fp_probe_tensor_hist); the parameter pass of a sampled step
 *    likewise, with update_delta (trainer/analysis/analysis.h fp_param_dev);
 *  - fp_model_forward returns host logits: download after softmax / cast, then sync;
 *  - parameters, gradients and running statistics live in host buffers that callers (optimizer,
 *    checkpoint, safetensors) write: upload before a step and download after, or move those callers
 *    onto the table (optimizer step, unscale_check above);
 *  - labels and the loss: labels uploaded, loss and top-k counts returned to the host by softmax_xent.
 * Not in the table: the optimizer step (the CUDA arm calls kernels.h directly). */

#endif
