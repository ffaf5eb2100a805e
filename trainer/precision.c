/* precision.c — the policy table of docs/design.md, PyTorch's GradScaler, and the unscale + finite
 * check in one pass over the gradients. Promises: the unscale splits large arrays over the pool
 * (lib/thread_pool.h) element by element, so the result does not depend on the thread count. The
 * rounding and 16-bit conversion of arrays is lib/dtype_array.c's. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser. */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "error.h"
#include "numfmt.h"
#include "thread_pool.h"
#include "trainer/precision.h"

static const fp_policy policies[] = {
    {"fp32", "fp32 everywhere, allow_tf32=False", FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_DT_F32,
     FP_SCALE_NONE},
    {"tf32", "allow_tf32=True: conv/linear on TF32 tensor cores (CPU: inputs rounded to TF32), fp32 accumulate",
     FP_DT_TF32, FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_SCALE_NONE},
    {"fp16", "autocast(float16) + GradScaler()", FP_DT_F16, FP_DT_F16, FP_DT_F16, FP_DT_F32, FP_DT_F32,
     FP_SCALE_DYNAMIC},
    {"fp16-noscale", "autocast(float16) without a scaler", FP_DT_F16, FP_DT_F16, FP_DT_F16, FP_DT_F32, FP_DT_F32,
     FP_SCALE_NONE},
    {"half", "model.half(): fp16 weights, activations, gradients and optimizer state", FP_DT_F16, FP_DT_F16,
     FP_DT_F16, FP_DT_F16, FP_DT_F16, FP_SCALE_NONE},
    {"bf16", "autocast(bfloat16)", FP_DT_BF16, FP_DT_BF16, FP_DT_BF16, FP_DT_F32, FP_DT_F32, FP_SCALE_NONE},
};
#define NPOLICIES (sizeof policies / sizeof policies[0])

static const char *const policy_names[] = {"fp32", "tf32", "fp16", "fp16-noscale", "half", "bf16", NULL};

const fp_policy *fp_policy_find(const char *name)
{
    for (size_t i = 0; name && i < NPOLICIES; i++)
        if (strcmp(policies[i].name, name) == 0)
            return &policies[i];
    return NULL;
}

const char *const *fp_policy_names(void) { return policy_names; }

const char *fp_policy_names_joined(void) { return "fp32, tf32, fp16, fp16-noscale, half, bf16"; }

/* ---------------------------------------------------------------- GradScaler */

void fp_grad_scaler_init(fp_grad_scaler *s, fp_scale_mode mode)
{
    s->mode = mode;
    s->scale = mode == FP_SCALE_NONE ? 1.0f : 65536.0f;
    s->growth_factor = 2.0f;
    s->backoff_factor = 0.5f;
    s->growth_interval = 2000;
    s->clean_steps = 0;
}

/* torch._amp_update_scale_: inf -> scale *= backoff, tracker 0; else tracker + 1, and at the
 * interval scale *= growth (only when the result is finite), tracker 0. */
int fp_grad_scaler_update(fp_grad_scaler *s, int found_inf)
{
    if (s->mode != FP_SCALE_DYNAMIC)
        return 0;
    float old = s->scale;
    if (found_inf) {
        s->scale *= s->backoff_factor;
        s->clean_steps = 0;
    } else if (++s->clean_steps >= s->growth_interval) {
        float ns = s->scale * s->growth_factor;
        if (isfinite(ns))
            s->scale = ns;
        s->clean_steps = 0;
    }
    return s->scale != old;
}

/* ---------------------------------------------------------------- array helpers */

#define ARRAY_PAR_MIN ((size_t)1 << 16)   /* elements per thread below which a helper stays serial */
#define ARRAY_ALIGN 64                     /* part bounds: whole cache lines of 16-bit and fp32 arrays */

/* One call's arguments, for the pool's range function. */
typedef struct {
    float *f;
    float scale;
    unsigned found;   /* any part saw Inf / NaN (atomic or) */
} array_job;

/* One pass: found |= the exponent of g[i] is all ones (Inf or NaN, checked before scaling, as
 * torch._amp_foreach_non_finite_check_and_unscale_); g[i] *= inv_scale. */
static void unscale_range(void *ctx, size_t b, size_t e)
{
    array_job *j = ctx;
    float *g = j->f;
    uint32_t found = 0;
    for (size_t i = b; i < e; i++) {
        float v = g[i];
        uint32_t u;
        memcpy(&u, &v, 4);
        found |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        g[i] = v * j->scale;
    }
    if (found)
        __atomic_or_fetch(&j->found, 1u, __ATOMIC_RELAXED);
}

int fp_unscale_and_check(float *g, size_t n, float inv_scale)
{
    array_job j = {.f = g, .scale = inv_scale};
    fp_parallel_for(n, ARRAY_ALIGN, ARRAY_PAR_MIN, unscale_range, &j);
    return j.found != 0;
}
