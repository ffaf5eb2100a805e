/* layers.h — the fp32 layer kernels of the CPU backend (the numerical reference), NHWC layout.
 * Convention (docs/design.md): outputs first; forward overwrites its output; backward ACCUMULATES
 * (+=) into every gradient it produces (din, dweight, dbias), so callers zero them once per step.
 * Each function returns FP_OK or a negative FP_E* code with fp_error_message() set (bad dims). */
#ifndef FP_LAYERS_H
#define FP_LAYERS_H

#include <stddef.h>
#include <stdint.h>

/* Activations are NHWC: element (n, y, x, c) at ((n*h + y)*w + x)*c + c. */
typedef struct { int n, h, w, c; } fp_dims;

/* Convolution without bias (ResNet's convs have none). Weights are OHWI:
 * w[((o*kh + ky)*kw + kx)*cin + i] — PyTorch's OIHW is converted on load. */
typedef struct {
    int cin, cout, kh, kw, stride, pad;
} fp_conv_params;

/* Scratch memory the kernels may use (im2col buffers); grown on demand, owned by the caller. */
typedef struct {
    float *buf;
    size_t cap;      /* floats */
    int threads;     /* BLAS / OpenMP-free thread count hint (>= 1); unused by the fp32 kernels so far */
    size_t limit;    /* most floats of im2col columns per chunk (0: default, 8M floats = 32 MiB);
                      * a chunk always holds at least one output row */
} fp_workspace;

/* Initialise with `fp_workspace ws = {0};`. reserve makes ws->buf hold at least `floats` floats
 * (realloc; contents not kept meaningful); FP_ENOMEM on failure. free releases and zeroes it.
 * The conv kernels accept ws == NULL and then use a temporary allocation of their own. */
int fp_workspace_reserve(fp_workspace *ws, size_t floats);
void fp_workspace_free(fp_workspace *ws);

/* Output dims of a convolution / pooling window (floor division, as PyTorch without ceil_mode);
 * all-zero dims when the parameters are invalid for `in`. */
fp_dims fp_conv_out_dims(fp_dims in, const fp_conv_params *p);

/* Convolution, no aliasing between y/dx/dw and the inputs. A window lying entirely in the padding is
 * allowed (it contributes zeros). Rejected (FP_EINVAL): non-positive dims or params, pad < 0,
 * xd.c != p->cin, a kernel larger than the padded input, tensors of more than INT_MAX elements,
 * NULL tensors. Large im2col buffers are processed in row chunks (bounded workspace). */
int fp_conv_forward(float *y, const float *x, fp_dims xd, const float *w, const fp_conv_params *p,
                    fp_workspace *ws);
int fp_conv_backward_data(float *dx, const float *dy, fp_dims xd, const float *w, const fp_conv_params *p,
                          fp_workspace *ws);
int fp_conv_backward_weights(float *dw, const float *dy, const float *x, fp_dims xd, const fp_conv_params *p,
                             fp_workspace *ws);

/* Batch normalisation over N*H*W per channel, statistics accumulated in double. Training: batch
 * statistics (biased variance for normalising; running_var updated with the unbiased one), running =
 * (1-momentum)*running + momentum*batch; saves mean and inverse std (per channel) for backward.
 * Evaluation: running stats.
 * Training needs N*H*W > 1 (as PyTorch). running_mean/running_var and save_mean/save_invstd may be
 * NULL in training (not updated / not saved); in backward, dx, dgamma or dbeta may be NULL (skipped).
 * y may alias x. */
typedef struct {
    float momentum;  /* 0.1 */
    float eps;       /* 1e-5 */
} fp_bn_params;

int fp_batchnorm_forward_train(float *y, float *save_mean, float *save_invstd, float *running_mean,
                               float *running_var, const float *x, fp_dims xd, const float *gamma,
                               const float *beta, const fp_bn_params *p);
int fp_batchnorm_forward_eval(float *y, const float *x, fp_dims xd, const float *gamma, const float *beta,
                              const float *running_mean, const float *running_var, const fp_bn_params *p);
int fp_batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x, fp_dims xd,
                          const float *gamma, const float *save_mean, const float *save_invstd);

/* Fused batchnorm (+ residual) + relu, training: y = relu(bn(x) + z) (z NULL: relu(bn(x))) in one pass
 * after the statistics, the fp32 arithmetic of fp_batchnorm_forward_train, fp_add_forward and
 * fp_relu_forward in turn (their composition bit for bit); y may alias x or z. Backward: g = y > 0 ? dy :
 * 0 (y: the forward's output); dz (may be NULL) = g (accumulate_dz 0) or += g; dx (+=), dgamma, dbeta
 * (+=) those of fp_batchnorm_backward on g, bit for bit. */
int fp_batchnorm_relu_forward_train(float *y, float *save_mean, float *save_invstd, float *running_mean,
                                    float *running_var, const float *x, const float *z, fp_dims xd,
                                    const float *gamma, const float *beta, const fp_bn_params *p);
int fp_batchnorm_relu_backward(float *dx, float *dz, int accumulate_dz, float *dgamma, float *dbeta, const float *dy,
                               const float *y, const float *x, fp_dims xd, const float *gamma,
                               const float *save_mean, const float *save_invstd);

/* y = max(x, 0), NaN propagates; y may alias x (in place). n == 0 is a no-op. */
int fp_relu_forward(float *y, const float *x, size_t n);
/* dx += dy where y > 0 (y: the forward output). */
int fp_relu_backward(float *dx, const float *dy, const float *y, size_t n);

/* Max pooling k x k, stride, padding (padded cells never win). argmax may be NULL in forward
 * when no backward follows; backward routes dy to the saved argmax (index into x).
 * Ties: the first maximum in window scan order (ky, then kx) wins; a NaN wins over numbers (as
 * PyTorch's CPU kernel). Needs pad <= k/2 (as PyTorch), so every window holds a real cell, and a
 * tensor of at most INT_MAX elements (argmax is an int). */
typedef struct { int k, stride, pad; } fp_pool_params;
fp_dims fp_pool_out_dims(fp_dims in, const fp_pool_params *p);
int fp_maxpool_forward(float *y, int *argmax, const float *x, fp_dims xd, const fp_pool_params *p);
int fp_maxpool_backward(float *dx, const float *dy, const int *argmax, fp_dims xd, const fp_pool_params *p);

/* Global average pool NHWC -> [n, c]. */
int fp_avgpool_global_forward(float *y, const float *x, fp_dims xd);
int fp_avgpool_global_backward(float *dx, const float *dy, fp_dims xd);

/* Linear: y[n, out] = x[n, in] * W^T + b, W is [out, in] as in PyTorch. b may be NULL (no bias);
 * in backward dx, dw or db may be NULL (skipped). */
int fp_linear_forward(float *y, const float *x, int n, int in, int out, const float *w, const float *b);
int fp_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, int n, int in, int out,
                       const float *w);

/* Residual add y = a + b (backward: both inputs receive dy, accumulated by the caller's routing). */
int fp_add_forward(float *y, const float *a, const float *b, size_t n);
/* dst += src. For both: y may alias a or b, n == 0 is a no-op. */
int fp_accumulate(float *dst, const float *src, size_t n);

/* Softmax cross-entropy, mean over the batch: returns the loss in *loss; dlogits (may be NULL)
 * receives (softmax - onehot) / n, overwritten. labels in [0, classes). Exponentials in fp32 with the
 * max-subtraction trick, sums in double; *correct1 / *correct5 (may be NULL) count top-1 / top-5
 * hits: a sample is a top-k hit when fewer than k classes have a logit strictly greater than its
 * label's (ties count in its favour; a NaN label logit never hits). */
int fp_softmax_xent(float *loss, float *dlogits, int *correct1, int *correct5, const float *logits,
                    const int *labels, int n, int classes);

/* The update of a parameter step and its lost updates (trainer/analysis/analysis.h, the backend op
 * update_delta): d[i] = nw[i] - old[i] (one fp32 subtraction), and over the i with g[i] finite and nonzero,
 * *moved their number and *lost those with nw[i] == old[i] (written, not added). No overlap.
 * fp_update_piece: the same on c < 2^32 values with 32-bit counts (the parameter pass's cache-sized pieces). */
void fp_update_piece(float *restrict d, const float *restrict nw, const float *restrict old, const float *restrict g,
                     size_t c, uint32_t *lost, uint32_t *moved);
void fp_update_delta(float *d, const float *nw, const float *old, const float *g, size_t n, size_t *lost,
                     size_t *moved);

#endif
