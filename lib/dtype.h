/* dtype.h — the number formats a tensor is stored or computed in (fp32, tf32, fp16, bf16), their names
 * and storage sizes, and whole arrays rounded to or converted between them. In lib/ because probes,
 * kernels and analyses use dtypes as well as the engine; the formats' numeric facts live in formats.h. */
#ifndef FP_DTYPE_H
#define FP_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    FP_DT_F32 = 0,   /* IEEE binary32 */
    FP_DT_TF32,      /* compute only: fp32 rounded to a 10-bit mantissa, fp32 accumulate */
    FP_DT_F16,       /* stored in 16 bits */
    FP_DT_BF16       /* stored in 16 bits */
} fp_dtype;

const char *fp_dtype_name(fp_dtype d);   /* "fp32", "tf32", "fp16", "bf16" */
int fp_dtype_bytes(fp_dtype d);          /* storage bytes: 4 or 2 */

/* ---- whole arrays (dtype_array.c) ---- */
/* Rounds fp32 values in place to what dtype d represents (kept in fp32 containers): fp16 / bf16
 * round to nearest even with their range (overflow -> Inf, underflow -> subnormal / 0), tf32 to a
 * 10-bit mantissa, fp32 leaves them. For `half`: call on master weights and optimizer state after
 * each optimizer step, so updates smaller than half an ulp are lost, as on a GPU. */
void fp_round_to_dtype(float *x, size_t n, fp_dtype d);
void fp_round_to_dtype_copy(float *dst, const float *src, size_t n, fp_dtype d);   /* dst may be src */
/* dst[i] += round_d(src[i]) (a low-precision gradient landing in an fp32 one). */
void fp_round_add(float *dst, const float *src, size_t n, fp_dtype d);
/* 16-bit storage of dtype d (FP_DT_F16 or FP_DT_BF16) <-> fp32 (no overlap). */
int fp_narrow_array(uint16_t *dst, const float *src, size_t n, fp_dtype d);
int fp_widen_array(float *dst, const uint16_t *src, size_t n, fp_dtype d);

#endif
