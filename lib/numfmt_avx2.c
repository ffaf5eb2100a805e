/* numfmt_avx2.c — AVX2 + F16C kernels for numfmt.h's array functions (8 floats per vector).
 * Promise: bit-identical to the scalar functions of numfmt_scalar.c for every input, NaNs included;
 * fp16 through vcvtps2ph / vcvtph2ps, bf16 and tf32 with integer SIMD (not vcvtneps2bf16, which
 * flushes subnormals); fp8 uses the scalar loops. Unaligned pointers and any n are fine (tails are
 * converted by the scalar functions). Compiled without -m flags: each function carries a target
 * attribute, so only call these when the CPU has AVX2 and F16C. */
#include "numfmt_isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TARGET_AVX2 __attribute__((target("avx2,f16c")))

void TARGET_AVX2 fp_nf_avx2_f32_to_f16(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), a);
        _mm_storeu_si128((__m128i *)(void *)(dst + i + 8), b);
    }
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = fp_f32_to_f16(src[i]);
}

void TARGET_AVX2 fp_nf_avx2_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i)));
        __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i + 8)));
        _mm256_storeu_ps(dst + i, a);
        _mm256_storeu_ps(dst + i + 8, b);
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    for (; i < n; i++)
        dst[i] = fp_f16_to_f32(src[i]);
}

/* All-ones in the lanes that hold a NaN (|u| > Inf as signed 32-bit compares: both non-negative). */
static inline TARGET_AVX2 __m256i nan_lanes(__m256i u)
{
    __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
    return _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000));
}

/* fp32 bits -> bf16 in the low half of each 32-bit lane (as fp_f32_to_bf16). */
static inline TARGET_AVX2 __m256i bf16_lanes(__m256i u)
{
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb);
    r = _mm256_srli_epi32(r, 16);
    __m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, q, nan_lanes(u));
}

void TARGET_AVX2 fp_nf_avx2_f32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_lanes(_mm256_loadu_si256((const __m256i *)(const void *)(src + i)));
        __m256i b = bf16_lanes(_mm256_loadu_si256((const __m256i *)(const void *)(src + i + 8)));
        /* packus works per 128-bit lane: a0-3 b0-3 a4-7 b4-7; put the quarters back in order */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), p);
    }
    for (; i + 8 <= n; i += 8) {
        __m256i a = bf16_lanes(_mm256_loadu_si256((const __m256i *)(const void *)(src + i)));
        __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
        _mm_storeu_si128((__m128i *)(void *)(dst + i), p);
    }
    for (; i < n; i++)
        dst[i] = fp_f32_to_bf16(src[i]);
}

void TARGET_AVX2 fp_nf_avx2_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        __m256i a = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16);
        __m256i b = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), a);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i + 8), b);
    }
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    for (; i < n; i++)
        dst[i] = fp_bf16_to_f32(src[i]);
}

static inline TARGET_AVX2 __m256i tf32_lanes(__m256i u)
{
    const __m256i keep = _mm256_set1_epi32((int)0xFFFFE000u);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 13), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0xFFF)), lsb);
    r = _mm256_and_si256(r, keep);
    __m256i q = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x400000)), keep);
    return _mm256_blendv_epi8(r, q, nan_lanes(u));
}

void TARGET_AVX2 fp_nf_avx2_f32_to_tf32(float *dst, const float *src, size_t n)
{
    size_t i = 0;   /* dst == src is allowed: each vector is loaded before it is stored */
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), tf32_lanes(u));
    }
    for (; i < n; i++)
        dst[i] = fp_f32_to_tf32(src[i]);
}

#else
typedef int fp_numfmt_avx2_not_x86; /* nothing to build off x86 */
#endif
