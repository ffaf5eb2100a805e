/* dtype_array.c — fp32 arrays rounded to what a dtype represents, and 16-bit storage <-> fp32, for whole
 * arrays. Promises: rounding is the format's (numfmt.h: to nearest even, subnormals, Inf, NaN), so values
 * and overflow are those a GPU produces; large arrays are split over the pool (thread_pool.h) element by
 * element, so the result does not depend on the thread count. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser. */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <stdint.h>
#include <string.h>
#include "dtype.h"
#include "error.h"
#include "numfmt.h"
#include "thread_pool.h"

#define ARRAY_PAR_MIN ((size_t)1 << 16)   /* elements per thread below which a helper stays serial */
#define ARRAY_ALIGN 64                     /* part bounds: whole cache lines of 16-bit and fp32 arrays */

/* One call's arguments, for the pool's range functions. */
typedef struct {
    float *f;
    const float *cf;
    uint16_t *h;
    const uint16_t *ch;
    fp_dtype d;
} array_job;

#define ROUND_CHUNK 2048

/* One thread's conversions (their NULL checks and messages, lib/numfmt.h). */
static int narrow_serial(uint16_t *dst, const float *src, size_t n, fp_dtype d)
{
    return d == FP_DT_BF16 ? fp_f32_to_bf16_array(dst, src, n) : fp_f32_to_f16_array(dst, src, n);
}

static int widen_serial(float *dst, const uint16_t *src, size_t n, fp_dtype d)
{
    return d == FP_DT_BF16 ? fp_bf16_to_f32_array(dst, src, n) : fp_f16_to_f32_array(dst, src, n);
}

static void round_serial(float *dst, const float *src, size_t n, fp_dtype d)
{
    uint16_t tmp[ROUND_CHUNK];
    if (d == FP_DT_TF32) {
        fp_f32_to_tf32_array(dst, src, n);
        return;
    }
    if (d != FP_DT_F16 && d != FP_DT_BF16) {   /* fp32: a copy */
        if (dst != src && n)
            memmove(dst, src, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i += ROUND_CHUNK) {   /* through the 16-bit format, a chunk at a time */
        size_t c = n - i < ROUND_CHUNK ? n - i : ROUND_CHUNK;
        narrow_serial(tmp, src + i, c, d);
        widen_serial(dst + i, tmp, c, d);
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
