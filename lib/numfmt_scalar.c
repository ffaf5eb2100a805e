/* numfmt_scalar.c — the portable scalar conversions of numfmt.h and the scalar array loops.
 * Promise: round to nearest, ties to even; subnormals, signed zeros, Inf and NaN exactly as stated
 * below; fp32 -> fp16 and fp16 -> fp32 equal the F16C instructions bit for bit, NaNs included.
 *
 * NaN rules (what the vectorised paths reproduce):
 *   fp32 -> fp16 : sign kept, quiet bit 0x200 set, top 10 payload bits kept (as vcvtps2ph).
 *   fp16 -> fp32 : sign kept, quiet bit 0x400000 set, payload kept (as vcvtph2ps: sNaN is quieted).
 *   fp32 -> bf16 : sign kept, top 7 payload bits kept, quiet bit 0x40 set.
 *   bf16 -> fp32 : exact bit copy (the low 16 bits become zero; an sNaN stays an sNaN).
 *   fp32 -> tf32 : sign kept, quiet bit 0x400000 set, top 10 payload bits kept, low 13 bits cleared.
 *   fp32 -> e4m3 / e5m2 : 0x7F for a NaN with the sign clear, 0xFF for one with the sign set.
 *   e4m3 / e5m2 -> fp32 : any NaN code gives a quiet NaN of the code's sign.
 * E4M3 saturates: |x| >= 448 and +-Inf give +-448 (0x7E / 0xFE). E5M2: |x| >= 61440 gives +-Inf. */
#include "numfmt.h"
#include "numfmt_isa.h"
#include "float_bits.h"
#include "formats.h"

/* fp32 layout (bit positions, not limits). */
#define F32_SIGN      0x80000000u
#define F32_ABS       0x7FFFFFFFu
#define F32_INF       0x7F800000u
#define F32_QUIET     0x00400000u
#define F32_MANT      0x007FFFFFu
#define F32_HIDDEN    0x00800000u
#define F32_MANT_BITS 23u
#define F32_BIAS      127u

/* Encodings of the narrow formats (bit patterns, not limits). */
#define F16_INF       0x7C00u
#define F16_QUIET     0x0200u
#define E4M3_MAX_CODE 0x7Eu   /* S.1111.110 = 448 */
#define E5M2_INF      0x7Cu   /* S.11111.00 */

/* m >> shift, rounded to nearest, ties to even (1 <= shift <= 31). */
static inline uint32_t rne_shift(uint32_t m, unsigned shift)
{
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    return q + ((rem > half) | ((rem == half) & q & 1u));
}

/* The magnitude code of a finite fp32 magnitude `a` (bits, below the format's overflow) in a
 * binary format with `mbits` mantissa bits and exponent bias `bias`. `min_normal` and `underflow`
 * are the bit patterns of the format's smallest normal and of half its smallest subnormal (which,
 * being a tie with zero, rounds to zero). A rounding carry moves into the exponent, and from the
 * largest finite value into the Inf code, as IEEE rounding requires. */
static inline uint32_t narrow_mag(uint32_t a, unsigned mbits, unsigned bias, uint32_t min_normal,
                                  uint32_t underflow)
{
    if (a >= min_normal)
        return rne_shift(a - ((F32_BIAS - bias) << F32_MANT_BITS), F32_MANT_BITS - mbits);
    if (a <= underflow)
        return 0;
    /* subnormal in the target: the value is m * 2^(e - 150); the target's unit is
     * 2^(1 - bias - mbits), so the code is m >> (23 - mbits + 128 - bias - e). */
    unsigned e = a >> F32_MANT_BITS;
    uint32_t m = (a & F32_MANT) | F32_HIDDEN;
    return rne_shift(m, (F32_MANT_BITS - mbits) + (F32_BIAS + 1u - bias) - e);
}

/* ---- fp16 ---- */

uint16_t fp_f32_to_f16(float x)
{
    uint32_t u = fp_f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & F32_ABS;
    if (a > F32_INF)
        return (uint16_t)(sign | F16_INF | F16_QUIET | ((a >> 13) & 0x3FFu));
    if (a >= fp_f32_bits(FP16_OVERFLOW_AT))
        return (uint16_t)(sign | F16_INF);
    return (uint16_t)(sign | narrow_mag(a, 10, 15, fp_f32_bits(FP16_MIN_NORMAL),
                                        fp_f32_bits(FP16_MIN_SUBNORMAL * 0.5f)));
}

float fp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    if (e == 0x1Fu)
        return fp_f32_from_bits(sign | F32_INF | (m ? F32_QUIET | (m << 13) : 0u));
    if (e == 0)   /* zero or subnormal: m * 2^-24, exact in fp32 */
        return fp_f32_from_bits(sign | fp_f32_bits((float)m * FP16_MIN_SUBNORMAL));
    return fp_f32_from_bits(sign | ((e + (F32_BIAS - 15u)) << F32_MANT_BITS) | (m << 13));
}

/* ---- bf16 ---- */

uint16_t fp_f32_to_bf16(float x)
{
    uint32_t u = fp_f32_bits(x);
    if ((u & F32_ABS) > F32_INF)
        return (uint16_t)((u >> 16) | 0x40u);
    /* Round the low 16 bits away, ties to even; a carry out of the top mantissa bit moves into the
     * exponent, and from the largest finite value into Inf. Inf itself is unchanged. */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float fp_bf16_to_f32(uint16_t b)
{
    return fp_f32_from_bits((uint32_t)b << 16);
}

/* ---- tf32 ---- */

float fp_f32_to_tf32(float x)
{
    uint32_t u = fp_f32_bits(x);
    if ((u & F32_ABS) > F32_INF)
        return fp_f32_from_bits((u | F32_QUIET) & 0xFFFFE000u);
    return fp_f32_from_bits((u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u);
}

/* ---- fp8 E4M3 (OCP: bias 7, no Inf, NaN = S.1111.111) ---- */

uint8_t fp_f32_to_e4m3(float x)
{
    uint32_t u = fp_f32_bits(x);
    uint32_t sign = (u >> 24) & 0x80u;
    uint32_t a = u & F32_ABS;
    if (a > F32_INF)
        return (uint8_t)(sign | E4M3_NAN);
    if (a >= fp_f32_bits(E4M3_MAX_FINITE))   /* saturate, Inf included */
        return (uint8_t)(sign | E4M3_MAX_CODE);
    return (uint8_t)(sign | narrow_mag(a, 3, 7, fp_f32_bits(E4M3_MIN_NORMAL),
                                       fp_f32_bits(E4M3_MIN_SUBNORMAL * 0.5f)));
}

float fp_e4m3_to_f32(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t e = (v >> 3) & 0xFu;
    uint32_t m = v & 7u;
    if ((v & 0x7Fu) == E4M3_NAN)
        return fp_f32_from_bits(sign | F32_INF | F32_QUIET);
    if (e == 0)
        return fp_f32_from_bits(sign | fp_f32_bits((float)m * E4M3_MIN_SUBNORMAL));
    return fp_f32_from_bits(sign | ((e + (F32_BIAS - 7u)) << F32_MANT_BITS) | (m << 20));
}

/* ---- fp8 E5M2 (OCP: bias 15, Inf = S.11111.00, NaN = S.11111.{01,10,11}) ---- */

uint8_t fp_f32_to_e5m2(float x)
{
    uint32_t u = fp_f32_bits(x);
    uint32_t sign = (u >> 24) & 0x80u;
    uint32_t a = u & F32_ABS;
    if (a > F32_INF)
        return (uint8_t)(sign | E5M2_NAN);
    if (a >= fp_f32_bits(E5M2_OVERFLOW_AT))
        return (uint8_t)(sign | E5M2_INF);
    return (uint8_t)(sign | narrow_mag(a, 2, 15, fp_f32_bits(E5M2_MIN_NORMAL),
                                       fp_f32_bits(E5M2_MIN_SUBNORMAL * 0.5f)));
}

float fp_e5m2_to_f32(uint8_t v)
{
    /* E5M2 is the top byte of an fp16. */
    return fp_f16_to_f32((uint16_t)((unsigned)v << 8));
}

/* ---- scalar array loops (the FP_ISA_SCALAR row of the dispatch table) ---- */

#define SCALAR_LOOP(name, dtype, stype)                                  \
    void fp_nf_scalar_##name(dtype *dst, const stype *src, size_t n)     \
    {                                                                    \
        for (size_t i = 0; i < n; i++)                                   \
            dst[i] = fp_##name(src[i]);                                  \
    }

FP_NUMFMT_ARRAY_FUNCTIONS(SCALAR_LOOP)
