/* numfmt_isa.h — internal: the per-instruction-set kernels behind numfmt.h's array functions.
 * Every kernel takes non-NULL pointers (n > 0 checked by the caller), needs only natural alignment,
 * and gives output bit-identical to the scalar function of numfmt.h for every input. */
#ifndef FP_NUMFMT_ISA_H
#define FP_NUMFMT_ISA_H

#include "numfmt.h"

/* The array functions, X(name, destination type, source type) each, in the dispatch table's order:
 * fp_<name>_array (numfmt_array.c) over the kernel <name> of a row, fp_nf_scalar_<name> the portable
 * loop over fp_<name> (numfmt_scalar.c). */
#define FP_NUMFMT_ARRAY_FUNCTIONS(X)                                                                        \
    X(f32_to_f16, uint16_t, float)                                                                         \
    X(f16_to_f32, float, uint16_t)                                                                         \
    X(f32_to_bf16, uint16_t, float)                                                                        \
    X(bf16_to_f32, float, uint16_t)                                                                        \
    X(f32_to_tf32, float, float)                                                                           \
    X(f32_to_e4m3, uint8_t, float)                                                                         \
    X(e4m3_to_f32, float, uint8_t)                                                                         \
    X(f32_to_e5m2, uint8_t, float)                                                                         \
    X(e5m2_to_f32, float, uint8_t)

/* One row of the dispatch table: a kernel for each array function. */
typedef struct {
    void (*f32_to_f16)(uint16_t *dst, const float *src, size_t n);
    void (*f16_to_f32)(float *dst, const uint16_t *src, size_t n);
    void (*f32_to_bf16)(uint16_t *dst, const float *src, size_t n);
    void (*bf16_to_f32)(float *dst, const uint16_t *src, size_t n);
    void (*f32_to_tf32)(float *dst, const float *src, size_t n);
    void (*f32_to_e4m3)(uint8_t *dst, const float *src, size_t n);
    void (*e4m3_to_f32)(float *dst, const uint8_t *src, size_t n);
    void (*f32_to_e5m2)(uint8_t *dst, const float *src, size_t n);
    void (*e5m2_to_f32)(float *dst, const uint8_t *src, size_t n);
} fp_numfmt_kernels;

/* Portable loops over the scalar functions (numfmt_scalar.c). */
void fp_nf_scalar_f32_to_f16(uint16_t *dst, const float *src, size_t n);
void fp_nf_scalar_f16_to_f32(float *dst, const uint16_t *src, size_t n);
void fp_nf_scalar_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void fp_nf_scalar_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void fp_nf_scalar_f32_to_tf32(float *dst, const float *src, size_t n);
void fp_nf_scalar_f32_to_e4m3(uint8_t *dst, const float *src, size_t n);
void fp_nf_scalar_e4m3_to_f32(float *dst, const uint8_t *src, size_t n);
void fp_nf_scalar_f32_to_e5m2(uint8_t *dst, const float *src, size_t n);
void fp_nf_scalar_e5m2_to_f32(float *dst, const uint8_t *src, size_t n);

/* AVX2 + F16C (numfmt_avx2.c); call only when the CPU has both. */
void fp_nf_avx2_f32_to_f16(uint16_t *dst, const float *src, size_t n);
void fp_nf_avx2_f16_to_f32(float *dst, const uint16_t *src, size_t n);
void fp_nf_avx2_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void fp_nf_avx2_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void fp_nf_avx2_f32_to_tf32(float *dst, const float *src, size_t n);

/* AVX-512F + AVX-512BW (numfmt_avx512.c); call only when the CPU has both. */
void fp_nf_avx512_f32_to_f16(uint16_t *dst, const float *src, size_t n);
void fp_nf_avx512_f16_to_f32(float *dst, const uint16_t *src, size_t n);
void fp_nf_avx512_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void fp_nf_avx512_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void fp_nf_avx512_f32_to_tf32(float *dst, const float *src, size_t n);

/* Tests only: pretend the CPU supports no path above `max` (FP_ISA_COUNT lifts the limit), so the
 * FP_EUNAVAIL path of fp_numfmt_set_isa can be exercised on any machine. If the path in use is
 * above `max`, the best remaining one is selected. */
void fp_numfmt_limit_isa_for_tests(fp_isa max);

#endif
