/* formats.h — the one place that holds the number-format facts (fp32, tf32, fp16, bf16, fp8).
 * Every limit the project uses (65504, 2^-14, 2^-24, 448, 57344, ...) comes from here; the table
 * fp_format_info() returns is derived from these constants and nothing else. */
#ifndef FP_FORMATS_H
#define FP_FORMATS_H

#include <stdint.h>

/* IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
#define FP16_MAX_FINITE      65504.0f              /* (2 - 2^-10) * 2^15 */
#define FP16_OVERFLOW_AT     65520.0f              /* |x| >= this rounds to Inf */
#define FP16_MIN_NORMAL      0x1p-14f
#define FP16_MIN_SUBNORMAL   0x1p-24f
#define FP16_EPSILON         0x1p-10f

/* bfloat16: fp32's exponent, 7 mantissa bits. */
#define BF16_MAX_FINITE      0x1.FEp127f           /* (2 - 2^-7) * 2^127 ~ 3.39e38 */
#define BF16_OVERFLOW_AT     0x1.FFp127f           /* max + half an ulp: rounds to Inf */
#define BF16_MIN_NORMAL      0x1p-126f
#define BF16_MIN_SUBNORMAL   0x1p-133f
#define BF16_EPSILON         0x1p-7f

/* TensorFloat-32: fp32's exponent, 10 mantissa bits (stored in an fp32 word). */
#define TF32_EPSILON         0x1p-10f

/* OCP fp8 E4M3 (bias 7, no Inf, NaN = S.1111.111): saturating conversion. */
#define E4M3_MAX_FINITE      448.0f
#define E4M3_OVERFLOW_AT     0x1.D00002p8f         /* > 464 (max + half ulp; the tie rounds to 448) */
#define E4M3_MIN_NORMAL      0x1p-6f
#define E4M3_MIN_SUBNORMAL   0x1p-9f
#define E4M3_EPSILON         0x1p-3f
#define E4M3_NAN             0x7Fu

/* OCP fp8 E5M2 (bias 15, IEEE-like with Inf). */
#define E5M2_MAX_FINITE      57344.0f
#define E5M2_OVERFLOW_AT     61440.0f              /* |x| >= this rounds to Inf */
#define E5M2_MIN_NORMAL      0x1p-14f
#define E5M2_MIN_SUBNORMAL   0x1p-16f
#define E5M2_EPSILON         0x1p-2f
#define E5M2_NAN             0x7Fu

#define FP32_EPSILON         0x1p-23f

/* The low-precision formats the histogram classifies against, in a fixed order. */
typedef enum {
    FP_FMT_FP16 = 0,
    FP_FMT_BF16 = 1,
    FP_FMT_E4M3 = 2,
    FP_FMT_E5M2 = 3,
    FP_FMT_COUNT
} fp_format;

typedef struct {
    const char *name;      /* "fp16", "bf16", "e4m3", "e5m2" */
    float max_finite;      /* largest finite value */
    float overflow_at;     /* smallest |x| that overflows (Inf, or saturation for E4M3) */
    float min_normal;
    float min_subnormal;
    float epsilon;         /* 2^-mantissa_bits */
    int exponent_bits;
    int mantissa_bits;
    int saturates;         /* 1: overflow clamps to max_finite (E4M3); 0: overflow gives Inf */
} fp_format_info_t;

/* The facts of one format; NULL for an out-of-range value. */
const fp_format_info_t *fp_format_info(fp_format f);

/* Parse "fp16", "bf16", "e4m3", "e5m2" (case-insensitive); returns -1 when unknown. */
int fp_format_parse(const char *name);

#endif
