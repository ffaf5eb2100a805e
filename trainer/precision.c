/* precision.c — the policy table of DESIGN.md, dtype names and sizes, PyTorch's GradScaler, and the
 * vectorised helpers the training loop needs (unscale + finite check in one pass, rounding fp32
 * arrays to what a format represents). Promises: rounding is the format's (lib/numfmt.h: to nearest
 * even, subnormals, Inf, NaN), so values and overflow are those a GPU produces; the array helpers
 * split large arrays over the kernels' pool (trainer/cpu/thread_pool.h), element by element, so the
 * result does not depend on the thread count. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser. */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "error.h"
#include "numfmt.h"
#include "trainer/cpu/thread_pool.h"
#include "trainer/precision.h"

static const fp_policy policies[] = {
    {"fp32", "fp32 everywhere, allow_tf32=False", FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_DT_F32,
     FP_SCALE_NONE},
    {"tf32", "allow_tf32=True: conv/linear inputs rounded to TF32, fp32 accumulate", FP_DT_TF32, FP_DT_F32,
     FP_DT_F32, FP_DT_F32, FP_DT_F32, FP_SCALE_NONE},
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

const char *fp_dtype_name(fp_dtype d)
{
    switch (d) {
    case FP_DT_F32: return "fp32";
    case FP_DT_TF32: return "tf32";
    case FP_DT_F16: return "fp16";
    case FP_DT_BF16: return "bf16";
    }
    return "?";
}

int fp_dtype_bytes(fp_dtype d) { return d == FP_DT_F16 || d == FP_DT_BF16 ? 2 : 4; }

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

/* One call's arguments, for the pool's range functions. */
typedef struct {
    float *f;
    const float *cf;
    uint16_t *h;
    const uint16_t *ch;
    fp_dtype d;
    float scale;
    unsigned found;   /* unscale: any part saw Inf / NaN (atomic or) */
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

#define ROUND_CHUNK 2048

static void round_serial(float *dst, const float *src, size_t n, fp_dtype d)
{
    uint16_t tmp[ROUND_CHUNK];
    switch (d) {
    case FP_DT_TF32:
        fp_f32_to_tf32_array(dst, src, n);
        return;
    case FP_DT_F16:
        for (size_t i = 0; i < n; i += ROUND_CHUNK) {
            size_t c = n - i < ROUND_CHUNK ? n - i : ROUND_CHUNK;
            fp_f32_to_f16_array(tmp, src + i, c);
            fp_f16_to_f32_array(dst + i, tmp, c);
        }
        return;
    case FP_DT_BF16:
        for (size_t i = 0; i < n; i += ROUND_CHUNK) {
            size_t c = n - i < ROUND_CHUNK ? n - i : ROUND_CHUNK;
            fp_f32_to_bf16_array(tmp, src + i, c);
            fp_bf16_to_f32_array(dst + i, tmp, c);
        }
        return;
    case FP_DT_F32:
        if (dst != src && n)
            memmove(dst, src, n * sizeof(float));
        return;
    }
}

static void round_range(void *ctx, size_t b, size_t e)
{
    const array_job *j = ctx;
    round_serial(j->f + b, j->cf + b, e - b, j->d);
}

void fp_round_to_dtype_copy(float *dst, const float *src, size_t n, fp_dtype d)
{
    if (d == FP_DT_F32) {
        round_serial(dst, src, n, d);   /* a plain copy (dst may overlap src) */
        return;
    }
    array_job j = {.f = dst, .cf = src, .d = d};
    fp_parallel_for(n, ARRAY_ALIGN, ARRAY_PAR_MIN, round_range, &j);
}

void fp_round_to_dtype(float *x, size_t n, fp_dtype d) { fp_round_to_dtype_copy(x, x, n, d); }

static void round_add_range(void *ctx, size_t b, size_t e)
{
    const array_job *j = ctx;
    float tmp[ROUND_CHUNK];
    for (size_t i = b; i < e; i += ROUND_CHUNK) {
        size_t c = e - i < ROUND_CHUNK ? e - i : ROUND_CHUNK;
        round_serial(tmp, j->cf + i, c, j->d);
        float *restrict o = j->f + i;
        for (size_t k = 0; k < c; k++)
            o[k] += tmp[k];
    }
}

void fp_round_add(float *dst, const float *src, size_t n, fp_dtype d)
{
    array_job j = {.f = dst, .cf = src, .d = d};
    fp_parallel_for(n, ARRAY_ALIGN, ARRAY_PAR_MIN, round_add_range, &j);
}

/* One thread's conversions (their NULL checks and messages, lib/numfmt.h). */
static int narrow_serial(uint16_t *dst, const float *src, size_t n, fp_dtype d)
{
    return d == FP_DT_BF16 ? fp_f32_to_bf16_array(dst, src, n) : fp_f32_to_f16_array(dst, src, n);
}

static int widen_serial(float *dst, const uint16_t *src, size_t n, fp_dtype d)
{
    return d == FP_DT_BF16 ? fp_bf16_to_f32_array(dst, src, n) : fp_f16_to_f32_array(dst, src, n);
}

static void narrow_range(void *ctx, size_t b, size_t e)
{
    const array_job *j = ctx;
    narrow_serial(j->h + b, j->cf + b, e - b, j->d);
}

static void widen_range(void *ctx, size_t b, size_t e)
{
    const array_job *j = ctx;
    widen_serial(j->f + b, j->ch + b, e - b, j->d);
}

int fp_narrow_array(uint16_t *dst, const float *src, size_t n, fp_dtype d)
{
    if (n && (!dst || !src))
        return narrow_serial(dst, src, n, d);
    array_job j = {.h = dst, .cf = src, .d = d};
    fp_parallel_for(n, ARRAY_ALIGN, ARRAY_PAR_MIN, narrow_range, &j);
    return FP_OK;
}

int fp_widen_array(float *dst, const uint16_t *src, size_t n, fp_dtype d)
{
    if (n && (!dst || !src))
        return widen_serial(dst, src, n, d);
    array_job j = {.f = dst, .ch = src, .d = d};
    fp_parallel_for(n, ARRAY_ALIGN, ARRAY_PAR_MIN, widen_range, &j);
    return FP_OK;
}
