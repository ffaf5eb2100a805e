/* numfmt_avx512.c — AVX-512F/BW kernels for numfmt.h's array functions (16 floats per vector).
 * Promise: bit-identical to the scalar functions of numfmt_scalar.c for every input, NaNs included;
 * fp16 through vcvtps2ph / vcvtph2ps (zmm), bf16 and tf32 with integer SIMD (not vcvtneps2bf16,
 * which flushes subnormals); fp8 uses the scalar loops. Unaligned pointers and any n are fine
 * (tails go through the scalar functions). Each function carries a target attribute, so only call
 * these when the CPU has AVX-512F and AVX-512BW. */
#include "numfmt_isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw")))

void TARGET_AVX512 fp_nf_avx512_f32_to_f16(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i a = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        __m256i b = _mm512_cvtps_ph(_mm512_loadu_ps(src + i + 16), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), a);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i + 16), b);
    }
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = fp_f32_to_f16(src[i]);
}

void TARGET_AVX512 fp_nf_avx512_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + i)));
        __m512 b = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + i + 16)));
        _mm512_storeu_ps(dst + i, a);
        _mm512_storeu_ps(dst + i + 16, b);
    }
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + i))));
    for (; i < n; i++)
        dst[i] = fp_f16_to_f32(src[i]);
}

/* The lanes that hold a NaN (|u| > Inf as signed 32-bit compares: both non-negative). */
static inline TARGET_AVX512 __mmask16 nan_lanes(__m512i u)
{
    __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    return _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7F800000));
}

/* fp32 bits -> bf16 in the low half of each 32-bit lane (as fp_f32_to_bf16). */
static inline TARGET_AVX512 __m512i bf16_lanes(__m512i u)
{
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    __m512i q = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
    return _mm512_mask_mov_epi32(r, nan_lanes(u), q);
}

void TARGET_AVX512 fp_nf_avx512_f32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i a = bf16_lanes(_mm512_loadu_si512((const void *)(src + i)));
        __m512i b = bf16_lanes(_mm512_loadu_si512((const void *)(src + i + 16)));
        /* packus works per 128-bit lane; restore element order with a qword permute */
        __m512i p = _mm512_packus_epi32(a, b);
        p = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), p);
        _mm512_storeu_si512((void *)(dst + i), p);
    }
    for (; i + 16 <= n; i += 16) {
        __m512i a = bf16_lanes(_mm512_loadu_si512((const void *)(src + i)));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm512_cvtepi32_epi16(a));
    }
    for (; i < n; i++)
        dst[i] = fp_f32_to_bf16(src[i]);
}

void TARGET_AVX512 fp_nf_avx512_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i ha = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(src + i + 16));
        _mm512_storeu_si512((void *)(dst + i), _mm512_slli_epi32(_mm512_cvtepu16_epi32(ha), 16));
        _mm512_storeu_si512((void *)(dst + i + 16), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hb), 16));
    }
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm512_storeu_si512((void *)(dst + i), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    for (; i < n; i++)
        dst[i] = fp_bf16_to_f32(src[i]);
}

static inline TARGET_AVX512 __m512i tf32_lanes(__m512i u)
{
    const __m512i keep = _mm512_set1_epi32((int)0xFFFFE000u);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 13), _mm512_set1_epi32(1));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0xFFF)), lsb), keep);
    __m512i q = _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x400000)), keep);
    return _mm512_mask_mov_epi32(r, nan_lanes(u), q);
}

void TARGET_AVX512 fp_nf_avx512_f32_to_tf32(float *dst, const float *src, size_t n)
{
    size_t i = 0;   /* dst == src is allowed: each vector is loaded before it is stored */
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512((const void *)(src + i));
        _mm512_storeu_si512((void *)(dst + i), tf32_lanes(u));
    }
    for (; i < n; i++)
        dst[i] = fp_f32_to_tf32(src[i]);
}

#else
typedef int fp_numfmt_avx512_not_x86; /* nothing to build off x86 */
#endif
