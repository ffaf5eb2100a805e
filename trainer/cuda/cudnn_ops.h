/* cudnn_ops.h — the layer kernels of the CUDA backend on cuDNN 9 and cuBLASLt, as a C API on typed
 * device tensors (NHWC), with the semantics of trainer/layers.h: outputs first, forward overwrites,
 * backward ACCUMULATES (+=) into every gradient. Every function returns FP_OK or a negative FP_E* code
 * with fp_error_message() naming the op, the layer label and the cuDNN / cuBLAS status string. */
#ifndef FP_CUDNN_OPS_H
#define FP_CUDNN_OPS_H

#include <stddef.h>
#include "trainer/layers.h"
#include "trainer/precision.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor in device memory. dims are NHWC (element (n, y, x, c) at ((n*h + y)*w + x)*c + c).
 * dtype is the STORAGE type: FP_DT_F32, FP_DT_F16 or FP_DT_BF16 (FP_DT_TF32 is a math policy, not a
 * storage type, and is rejected here). Conv weights are OHWI: dims {cout, kh, kw, cin}. Linear
 * inputs / outputs are {n, 1, 1, features}, its weight {out, 1, 1, in} ([out, in] as PyTorch), its
 * bias {1, 1, 1, out}. */
typedef struct {
    void *data;
    fp_dtype dtype;
    fp_dims dims;
} fp_dtensor;

/* Algorithm search for convolutions, once per (shape, dtype, direction). */
typedef enum {
    FP_CONV_SEARCH_BENCHMARK = 0,   /* cudnnFindConvolution*Algorithm: time each candidate once (default) */
    FP_CONV_SEARCH_HEURISTIC = 1    /* cudnnGetConvolution*Algorithm_v7: cuDNN's heuristics, no timing */
} fp_conv_search;

/* Directions a convolution plan covers (bit mask). */
enum { FP_CONV_FWD = 1, FP_CONV_BWD_DATA = 2, FP_CONV_BWD_FILTER = 4, FP_CONV_ALL = 7 };

typedef struct {
    /* Math of convolutions / matmuls on fp32 tensors, per docs/design.md's policies:
     *   FP_DT_F32  — really fp32: CUDNN_FMA_MATH (cuDNN's DEFAULT_MATH permits TF32 on sm_80+, so it is
     *                NOT used) and CUBLAS_COMPUTE_32F;
     *   FP_DT_TF32 — TF32 math allowed, as PyTorch's allow_tf32: CUDNN_TENSOR_OP_MATH (a convolution whose
     *                fastest measured algorithm is an FMA one runs that in true fp32, as in PyTorch),
     *                CUBLAS_COMPUTE_32F_FAST_TF32 ("allows down-converting inputs to TF32", cublas_api.h).
     *                The fp32 operands are handed over unrounded: the library / tensor cores convert
     *                them (fp16probe does not round them first). NVIDIA's PTX ISA 9.0 leaves tf32's
     *                layout implementation-defined (">= 10 bits" of mantissa); Hopper's wgmma "will truncate
     *                lower 13 bits of the 32-bit input data" of .tf32 operands, and the conversion a
     *                kernel may apply instead, cvt.rna.tf32.f32, rounds to nearest, ties away from zero.
     *                Either way an operand stays within one TF32 ulp (2^-10 relative) of the CPU backend's
     *                round-to-nearest-even emulation and may differ from it in that last bit;
     *   FP_DT_F16 / FP_DT_BF16 — the arm's 16-bit tensors run on tensor cores with fp32 accumulation
     *                (fp32 tensors of such an arm are treated as under FP_DT_F32).
     * 16-bit tensors always compute in fp32 (conv compute type FLOAT, CUBLAS_COMPUTE_32F). */
    fp_dtype math;
    void *stream;              /* cudaStream_t; NULL: the context creates (and later destroys) its own */
    size_t workspace_limit;    /* most bytes of the shared workspace; algorithms needing more are skipped
                                * (0: no limit) */
    fp_conv_search search;
    int bn_persistent;         /* 1 (default): CUDNN_BATCHNORM_SPATIAL_PERSISTENT for training forward /
                                * backward of fp32 and fp16 tensors (as PyTorch for channels-last); see
                                * cudnn_bn.c for its range caveat. 0: CUDNN_BATCHNORM_SPATIAL always. */
} fp_cudnn_config;

/* Defaults: the given math, own stream, 1 GiB workspace limit, benchmark search, persistent BN. */
void fp_cudnn_config_default(fp_cudnn_config *c, fp_dtype math);

/* One context per arm (not shared between threads): cudnnHandle_t, cublasLtHandle_t, the stream, the
 * shared workspace, the convolution plans and matmul plans. create fails with FP_EUNAVAIL when no GPU is
 * usable (message says why), FP_EINVAL for a bad config, FP_EINTERNAL / FP_ENOMEM otherwise. */
typedef struct fp_cudnn fp_cudnn;
int fp_cudnn_create(fp_cudnn **out, const fp_cudnn_config *c);
void fp_cudnn_free(fp_cudnn *d);   /* NULL is fine; waits for the stream first */

/* A label (the layer's name) that error messages of the following calls carry; NULL or "" clears.
 * The string is copied (first 63 bytes). */
void fp_cudnn_set_label(fp_cudnn *d, const char *label);
void *fp_cudnn_stream(const fp_cudnn *d);          /* the cudaStream_t every op runs on */
int fp_cudnn_sync(fp_cudnn *d);                    /* waits for the stream; reports a pending CUDA error */

/* ---- the shared workspace (darknet's scheme: plan every layer, then one allocation) ----
 * Planning (fp_cudnn_conv_plan, fp_cudnn_linear_plan) records each layer's need; commit allocates ONE
 * buffer of the largest need. An op whose plan needs more than the current buffer (a shape not planned)
 * grows it (cudaFree + cudaMalloc, counted in allocations). */
int fp_cudnn_workspace_commit(fp_cudnn *d);
typedef struct {
    size_t bytes;          /* the buffer now allocated */
    size_t need;           /* the largest need recorded so far */
    size_t limit;          /* the configured limit (0: none) */
    int allocations;       /* how many times the buffer was (re)allocated */
    int conv_plans;        /* distinct (shape, dtype) convolution plans */
    int matmul_plans;      /* distinct matmul plans */
} fp_cudnn_stats;
void fp_cudnn_get_stats(const fp_cudnn *d, fp_cudnn_stats *s);

/* ---- convolution (no bias; weights OHWI), cudnn_conv.c ----
 * plan: choose (once, cached) the algorithm of each direction in `dirs` for input dims xd, params p and
 * dtype dt, and record its workspace need. The run functions plan on first use when needed.
 * forward: y = conv(x, w) (y overwritten). backward_data: dx += conv^T(dy, w). backward_filter:
 * dw += dy (x) x. All tensors of one call share one dtype; dims must match fp_conv_out_dims(). */
int fp_cudnn_conv_plan(fp_cudnn *d, fp_dims xd, const fp_conv_params *p, fp_dtype dt, unsigned dirs);
int fp_cudnn_conv_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x, const fp_dtensor *w,
                          const fp_conv_params *p);
int fp_cudnn_conv_backward_data(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy, const fp_dtensor *w,
                                const fp_conv_params *p);
int fp_cudnn_conv_backward_filter(fp_cudnn *d, const fp_dtensor *dw, const fp_dtensor *dy, const fp_dtensor *x,
                                  const fp_conv_params *p);
/* As backward_data / backward_filter with the output scaled by beta first: dx = conv^T(dy, w) + beta * dx
 * (cuDNN's beta). beta 0 overwrites and does not read the output at all (cuDNN: "when beta is zero, the
 * output is not read and may contain any uninitialized data, including NaN"), so a fresh buffer needs no
 * zeroing; beta 1 is the functions above. */
int fp_cudnn_conv_backward_data_beta(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy, const fp_dtensor *w,
                                     const fp_conv_params *p, float beta);
int fp_cudnn_conv_backward_filter_beta(fp_cudnn *d, const fp_dtensor *dw, const fp_dtensor *dy, const fp_dtensor *x,
                                       const fp_conv_params *p, float beta);
/* The cuDNN algorithm numbers chosen for a planned shape (-1 for a direction not planned), for logs. */
int fp_cudnn_conv_algos(fp_cudnn *d, fp_dims xd, const fp_conv_params *p, fp_dtype dt, int algo[3]);

/* ---- batch normalisation over N*H*W per channel, cudnn_bn.c ----
 * x / y / dy / dx: F32, F16 or BF16 (one dtype per call); gamma, beta, running_mean, running_var,
 * save_mean, save_invstd, dgamma, dbeta: fp32 device arrays of c floats (the policy keeps batchnorm
 * parameters and statistics in fp32). Semantics as layers.h: normalise with the biased batch variance,
 * running_var updated with the unbiased one, running = (1-momentum)*running + momentum*batch (cuDNN's
 * exponentialAverageFactor = momentum), save_invstd = 1/sqrt(var + eps). running_* and save_* may be NULL
 * in forward_train (not updated / not saved: the context's scratch receives them). backward: dx must not
 * be NULL; dgamma, dbeta may be NULL (skipped); save_mean / save_invstd come from forward_train.
 * y may alias x. */
int fp_cudnn_bn_forward_train(fp_cudnn *d, const fp_dtensor *y, float *save_mean, float *save_invstd,
                              float *running_mean, float *running_var, const fp_dtensor *x, const float *gamma,
                              const float *beta, const fp_bn_params *p);
int fp_cudnn_bn_forward_eval(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x, const float *gamma,
                             const float *beta, const float *running_mean, const float *running_var,
                             const fp_bn_params *p);
int fp_cudnn_bn_backward(fp_cudnn *d, const fp_dtensor *dx, float *dgamma, float *dbeta, const fp_dtensor *dy,
                         const fp_dtensor *x, const float *gamma, const float *save_mean,
                         const float *save_invstd, const fp_bn_params *p);

/* ---- batchnorm + (add +) relu fused, training, cudnn_bn_act.c (backend.h bn_act_*) ----
 * x, y, z, dy, dx, dz: one shape and format. query: FP_OK with the reserve space a layer keeps from its
 * forward to its backward, or FP_EUNAVAIL when cuDNN does not fuse this shape / format. forward: y =
 * relu(bn(x) + z) (z NULL: relu(bn(x))), statistics as fp_cudnn_bn_forward_train (saved ones required).
 * backward: dz (NULL without z) written, dx = result + beta_dx * dx, dgamma / dbeta accumulate (NULL: skipped);
 * y is the forward's output, reserve the forward's. Either answers FP_EUNAVAIL before writing anything. */
int fp_cudnn_bn_act_query(fp_cudnn *d, const fp_dtensor *x, int with_add, size_t *reserve_bytes);
int fp_cudnn_bn_act_forward_train(fp_cudnn *d, const fp_dtensor *y, float *save_mean, float *save_invstd,
                                  float *running_mean, float *running_var, const fp_dtensor *x, const fp_dtensor *z,
                                  const float *gamma, const float *beta, const fp_bn_params *p, void *reserve,
                                  size_t reserve_bytes);
int fp_cudnn_bn_act_backward(fp_cudnn *d, const fp_dtensor *dx, float beta_dx, const fp_dtensor *dz, float *dgamma,
                             float *dbeta, const fp_dtensor *dy, const fp_dtensor *y, const fp_dtensor *x,
                             const float *gamma, const float *beta, const float *save_mean, const float *save_invstd,
                             const fp_bn_params *p, void *reserve, size_t reserve_bytes);

/* ---- relu, max pool, global average pool, cudnn_pool_act.c ----
 * relu: y = max(x, 0), NaN propagates, y may alias x. relu_backward: dx += dy where y > 0 (y: the
 * forward output, as layers.h).
 * maxpool: k x k window, stride, pad <= k/2 (padded cells never win, NaN propagates). Backward routes dy
 * to the maximum of each window, recomputed from x and y (cuDNN keeps no argmax): dx += that. Ties
 * (equal values in one window) may be routed differently from the CPU kernel's first-maximum rule.
 * avgpool_global: NHWC {n,h,w,c} -> {n,1,1,c}; backward dx += dy / (h*w) broadcast. */
int fp_cudnn_relu_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x);
int fp_cudnn_relu_backward(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy, const fp_dtensor *y);
int fp_cudnn_maxpool_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x, const fp_pool_params *p);
int fp_cudnn_maxpool_backward(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy, const fp_dtensor *x,
                              const fp_dtensor *y, const fp_pool_params *p);
int fp_cudnn_avgpool_global_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x);
int fp_cudnn_avgpool_global_backward(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dy);

/* ---- linear on cuBLASLt, cublas_linear.c ----
 * y[n, out] = x[n, in] * W^T + b (bias epilogue; b may be NULL). backward: dx += dy * W,
 * dw += dy^T * x, db += sum over n of dy; dx, dw, db may be NULL (skipped). All tensors of a call share
 * one dtype; fp32 accumulation always (CUBLAS_COMPUTE_32F, or _FAST_TF32 under the tf32 policy).
 * plan: choose the matmul algorithms of these shapes now (else on first use) and record their
 * workspace need. */
int fp_cudnn_linear_plan(fp_cudnn *d, int n, int in, int out, fp_dtype dt, int has_bias);
int fp_cudnn_linear_forward(fp_cudnn *d, const fp_dtensor *y, const fp_dtensor *x, const fp_dtensor *w,
                            const fp_dtensor *b);
int fp_cudnn_linear_backward(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dw, const fp_dtensor *db,
                             const fp_dtensor *dy, const fp_dtensor *x, const fp_dtensor *w);
/* As linear_backward with every output of the call scaled by beta first (cuBLASLt's beta: 0 overwrites
 * without reading the output, which may hold anything; 1 is linear_backward). */
int fp_cudnn_linear_backward_beta(fp_cudnn *d, const fp_dtensor *dx, const fp_dtensor *dw, const fp_dtensor *db,
                                  const fp_dtensor *dy, const fp_dtensor *x, const fp_dtensor *w, float beta);

#ifdef __cplusplus
}
#endif

#endif
