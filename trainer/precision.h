/* precision.h — precision policies as data (docs/design.md's table) and the dynamic loss scaler.
 * A policy says which number format each tensor role has and whether a scaler runs; the model
 * executes under a policy (fp_model_set_policy) without branches scattered through the layers.
 * Names users know: fp32, tf32, fp16, fp16-noscale, half, bf16. */
#ifndef FP_PRECISION_H
#define FP_PRECISION_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"

typedef enum { FP_SCALE_NONE = 0, FP_SCALE_DYNAMIC, FP_SCALE_STATIC } fp_scale_mode;

typedef struct {
    const char *name;          /* "fp16" */
    const char *description;   /* "autocast(float16) + GradScaler()" */
    fp_dtype compute;          /* conv / linear inputs and weights rounded to this; fp32 accumulate */
    fp_dtype activation;       /* storage of conv / linear outputs and all that follows them (bn,
                                * relu, add, pool keep their input's dtype); logits are widened to
                                * fp32 for the loss, as autocast's fp32 list does */
    fp_dtype activation_grad;  /* storage of activation gradients */
    fp_dtype master;           /* master weights (fp32, or fp16 for `half`) */
    fp_dtype optim_state;      /* optimizer state (fp32, or fp16 for `half`) */
    fp_scale_mode scaling;
} fp_policy;

/* The built-in policies, in docs/design.md's order; NULL-terminated list of names. */
const fp_policy *fp_policy_find(const char *name);         /* NULL when unknown */
const char *const *fp_policy_names(void);
const char *fp_policy_names_joined(void);                   /* "fp32, tf32, fp16, ..." for errors */

/* GradScaler with PyTorch's semantics and defaults: scale 2^16, x2 (growth_factor) after
 * growth_interval (2000) consecutive clean steps, x0.5 (backoff_factor) and the step skipped on
 * any inf/NaN gradient. STATIC mode keeps the scale fixed (but still skips non-finite steps). */
typedef struct {
    fp_scale_mode mode;
    float scale;
    float growth_factor, backoff_factor;
    int growth_interval;
    int clean_steps;           /* consecutive finite steps since the last change */
} fp_grad_scaler;

void fp_grad_scaler_init(fp_grad_scaler *s, fp_scale_mode mode);   /* PyTorch defaults */
/* After the unscale + finite check: found_inf != 0 means the step is skipped. Returns 1 when the
 * scale changed (for an event), 0 otherwise. */
int fp_grad_scaler_update(fp_grad_scaler *s, int found_inf);

/* ---- vectorised helpers for the training loop and the model ---- */
/* Unscales gradients in place (g[i] *= inv_scale) and reports in the same pass whether any of them
 * was Inf or NaN (checked on the value before scaling, as PyTorch's unscale_): 1 if so, else 0. */
int fp_unscale_and_check(float *g, size_t n, float inv_scale);
/* Rounding arrays to a dtype and 16-bit <-> fp32 conversions: lib/dtype.h. */

#endif
