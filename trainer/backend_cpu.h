/* backend_cpu.h — private to trainer/cpu/backend_cpu*.c: the CPU backend's instance (host memory
 * accounting, conv workspace, fp32 staging slots) and the widen / compute / narrow helpers its ops share.
 * Promises: the helpers reproduce the model's former casts exactly (same functions, same order). */
#ifndef FP_BACKEND_CPU_H
#define FP_BACKEND_CPU_H

#include <stdint.h>
#include <string.h>
#include "error.h"
#include "trainer/backend.h"
#include "trainer/backend_check.h"

/* Staging slots: 0..2 hold widened activations / gradients (sized by reserve), 3..4 widened 16-bit
 * weights (only when a caller passes 16-bit weights); wst holds a weight gradient before rounding. */
#define FP_BCPU_SLOTS 5

struct fp_backend {
    fp_workspace ws;
    float *st[FP_BCPU_SLOTS];
    size_t st_cap[FP_BCPU_SLOTS];        /* floats */
    float *wst;
    size_t wst_cap;                      /* floats */
    size_t allocated, allocated_peak, ws_peak, staging_peak;
};

static inline int fp_bcpu_is16(fp_dtype d) { return d == FP_DT_F16 || d == FP_DT_BF16; }

/* fp32 staging slot `slot` holding at least `floats`; NULL with FP_ENOMEM set on failure. */
float *fp_bcpu_stage(fp_backend *be, int slot, size_t floats);

/* t as fp32 for a kernel: t.p itself when F32, else widened into slot. NULL on out of memory. */
const float *fp_bcpu_in(fp_backend *be, const fp_tensor *t, int slot);
/* t as a conv / linear input: rounded to compute (t.p itself when nothing changes, else in slot). */
const float *fp_bcpu_in_compute(fp_backend *be, const fp_tensor *t, fp_dtype compute, int slot);
/* A weight as computed: F32 as is (already rounded by the caller), 16-bit widened (and rounded to
 * compute when that is another 16-bit format) into slot. */
const float *fp_bcpu_weight(fp_backend *be, const fp_tensor *w, fp_dtype compute, int slot);
/* Where a kernel writes t: t.p when F32, else slot; fp_bcpu_store narrows the slot into t. */
float *fp_bcpu_out(fp_backend *be, const fp_tensor *t, int slot);
void fp_bcpu_store(const fp_tensor *t, const float *buf);
/* Where an accumulating kernel writes the gradient t: F32: t.p (zeroed first unless accumulate);
 * 16-bit: slot, zeroed. fp_bcpu_dx_end then stores round(result) (accumulate 0) or
 * round(old + round(result)) (accumulate 1) into a 16-bit t. */
float *fp_bcpu_dx_begin(fp_backend *be, const fp_tensor *t, int accumulate, int slot);
void fp_bcpu_dx_end(const fp_tensor *t, int accumulate, const float *buf);
/* The 16-bit weight-gradient staging, zeroed, of `floats`. NULL on out of memory. */
float *fp_bcpu_wstage(fp_backend *be, size_t floats);

/* y = round_d(a + b) on 16-bit storage (through fp32 in chunks; y may alias a or b). */
void fp_bcpu_add16(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n, fp_dtype d);

/* The element-wise ops (backend_cpu_elementwise.c). */
int fp_bcpu_cast(fp_backend *be, fp_tensor dst, fp_tensor src);
int fp_bcpu_round(fp_backend *be, fp_tensor dst, fp_tensor src, fp_dtype to);
int fp_bcpu_relu_forward(fp_backend *be, fp_tensor y, fp_tensor x);
int fp_bcpu_relu_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor y, int accumulate);
int fp_bcpu_add(fp_backend *be, fp_tensor y, fp_tensor a, fp_tensor b);
int fp_bcpu_accumulate(fp_backend *be, fp_tensor dst, fp_tensor src);
int fp_bcpu_softmax_xent(fp_backend *be, float *loss, fp_tensor dlogits, int *correct1, int *correct5,
                         fp_tensor logits, const int *labels, float dscale);
int fp_bcpu_unscale_check(fp_backend *be, int *found_inf, fp_tensor g, float inv_scale);

/* The layer ops (backend_cpu_layers.c). */
int fp_bcpu_conv_forward(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, const fp_conv_params *p,
                         fp_dtype compute);
int fp_bcpu_conv_backward_data(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, const fp_conv_params *p,
                               fp_dtype compute, int accumulate);
int fp_bcpu_conv_backward_weights(fp_backend *be, fp_tensor dw, fp_tensor dy, fp_tensor x, const fp_conv_params *p,
                                  fp_dtype compute);
int fp_bcpu_bn_forward_train(fp_backend *be, fp_tensor y, fp_tensor save, fp_tensor running_mean,
                             fp_tensor running_var, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                             const fp_bn_params *p);
int fp_bcpu_bn_forward_eval(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor gamma, fp_tensor beta,
                            fp_tensor running_mean, fp_tensor running_var, const fp_bn_params *p);
int fp_bcpu_bn_backward(fp_backend *be, fp_tensor dx, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy, fp_tensor x,
                        fp_tensor gamma, fp_tensor save, int accumulate);
int fp_bcpu_maxpool_forward(fp_backend *be, fp_tensor y, int *argmax, fp_tensor x, const fp_pool_params *p);
int fp_bcpu_maxpool_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, const int *argmax, const fp_pool_params *p,
                             int accumulate);
int fp_bcpu_avgpool_forward(fp_backend *be, fp_tensor y, fp_tensor x);
int fp_bcpu_avgpool_backward(fp_backend *be, fp_tensor dx, fp_tensor dy, int accumulate);
int fp_bcpu_linear_forward(fp_backend *be, fp_tensor y, fp_tensor x, fp_tensor w, fp_tensor b, fp_dtype compute);
int fp_bcpu_linear_backward_data(fp_backend *be, fp_tensor dx, fp_tensor dy, fp_tensor w, fp_dtype compute,
                                 int accumulate);
int fp_bcpu_linear_backward_weights(fp_backend *be, fp_tensor dw, fp_tensor db, fp_tensor dy, fp_tensor x,
                                    fp_tensor w, fp_dtype compute);

#endif
