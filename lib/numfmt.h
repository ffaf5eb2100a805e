/* numfmt.h — conversions between fp32 and the low-precision formats of formats.h.
 * Every conversion rounds to nearest, ties to even, with subnormals, signed zeros, Inf and NaN
 * right (fp32 -> fp16 matches the F16C instruction bit for bit, NaN payloads included). The array
 * functions pick a vectorised path at run time (F16C/AVX2, AVX-512) that gives bit-identical
 * results to the scalar functions; fp_numfmt_set_isa forces a path (tests, benchmarks). */
#ifndef FP_NUMFMT_H
#define FP_NUMFMT_H

#include <stddef.h>
#include <stdint.h>

/* ---- scalars ---- */
uint16_t fp_f32_to_f16(float x);
float    fp_f16_to_f32(uint16_t h);            /* exact; signalling NaNs come back quiet, as vcvtph2ps does */
uint16_t fp_f32_to_bf16(float x);
float    fp_bf16_to_f32(uint16_t b);
float    fp_f32_to_tf32(float x);          /* fp32 rounded to a 10-bit mantissa, kept in fp32 */
uint8_t  fp_f32_to_e4m3(float x);          /* saturating: |x| > 448, +-Inf give +-448; NaN -> 0x7F/0xFF (sign kept) */
float    fp_e4m3_to_f32(uint8_t v);
uint8_t  fp_f32_to_e5m2(float x);          /* overflow gives Inf; NaN -> 0x7F/0xFF (sign kept) */
float    fp_e5m2_to_f32(uint8_t v);

/* ---- arrays (dst and src may not overlap, except tf32 which may run in place) ----
 * Each returns FP_OK, or FP_EINVAL when a pointer is NULL while n > 0. n == 0 is a no-op.
 * Pointers need only their type's natural alignment. */
int fp_f32_to_f16_array(uint16_t *dst, const float *src, size_t n);
int fp_f16_to_f32_array(float *dst, const uint16_t *src, size_t n);
int fp_f32_to_bf16_array(uint16_t *dst, const float *src, size_t n);
int fp_bf16_to_f32_array(float *dst, const uint16_t *src, size_t n);
int fp_f32_to_tf32_array(float *dst, const float *src, size_t n);
int fp_f32_to_e4m3_array(uint8_t *dst, const float *src, size_t n);
int fp_e4m3_to_f32_array(float *dst, const uint8_t *src, size_t n);
int fp_f32_to_e5m2_array(uint8_t *dst, const float *src, size_t n);
int fp_e5m2_to_f32_array(float *dst, const uint8_t *src, size_t n);

/* ---- instruction-set selection for the array paths ---- */
typedef enum {
    FP_ISA_SCALAR = 0,  /* portable C */
    FP_ISA_AVX2 = 1,    /* AVX2 + F16C */
    FP_ISA_AVX512 = 2,  /* AVX-512F + AVX-512BW */
    FP_ISA_COUNT
} fp_isa;

fp_isa      fp_numfmt_isa(void);               /* the path in use (best supported by default) */
int         fp_numfmt_isa_supported(fp_isa isa);
int         fp_numfmt_set_isa(fp_isa isa);     /* FP_EUNAVAIL when this CPU lacks it */
const char *fp_isa_name(fp_isa isa);           /* "scalar", "avx2", "avx512" */

#endif
