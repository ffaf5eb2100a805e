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

/* The table's ops that are functions of their own, with the table's types (backend.h): fp_bcpu_<op>,
 * the element-wise ones in backend_cpu_elementwise.c, the layer ops in backend_cpu_layers.c. */
#define FP_BCPU_OP(op) extern FP_BACKEND_OP_TYPE(op) fp_bcpu_##op;
FP_BCPU_OP(cast) FP_BCPU_OP(round) FP_BCPU_OP(relu_forward) FP_BCPU_OP(relu_backward) FP_BCPU_OP(add)
FP_BCPU_OP(accumulate) FP_BCPU_OP(softmax_xent) FP_BCPU_OP(unscale_check) FP_BCPU_OP(update_delta)
FP_BCPU_OP(bn_act_query) FP_BCPU_OP(bn_act_forward_train) FP_BCPU_OP(bn_act_backward)   /* backend_cpu_bn_act.c */
FP_BACKEND_LAYER_OPS(FP_BCPU_OP)
FP_BACKEND_SYNC_BN_OPS(FP_BCPU_OP)   /* trainer/cpu/sync_bn.c */
#undef FP_BCPU_OP

#endif
