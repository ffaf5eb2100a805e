/* numfmt_array.c — numfmt.h's array functions and their run-time dispatch over instruction sets.
 * Promise: the best path this CPU supports is used unless fp_numfmt_set_isa forces another; every
 * path gives output bit-identical to the scalar functions. NULL with n > 0 fails with FP_EINVAL;
 * n == 0 is a no-op. The path in use is kept in an atomic, so switching is thread-safe. */
#include "numfmt.h"
#include "numfmt_isa.h"
#include "error.h"
#include <stdatomic.h>
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#define FP_NUMFMT_X86 1
#else
#define FP_NUMFMT_X86 0
#endif

/* fp8 runs the scalar loops on every path. */
static const fp_numfmt_kernels kernel_table[FP_ISA_COUNT] = {
    [FP_ISA_SCALAR] = {
        fp_nf_scalar_f32_to_f16, fp_nf_scalar_f16_to_f32, fp_nf_scalar_f32_to_bf16,
        fp_nf_scalar_bf16_to_f32, fp_nf_scalar_f32_to_tf32, fp_nf_scalar_f32_to_e4m3,
        fp_nf_scalar_e4m3_to_f32, fp_nf_scalar_f32_to_e5m2, fp_nf_scalar_e5m2_to_f32,
    },
#if FP_NUMFMT_X86
    [FP_ISA_AVX2] = {
        fp_nf_avx2_f32_to_f16, fp_nf_avx2_f16_to_f32, fp_nf_avx2_f32_to_bf16,
        fp_nf_avx2_bf16_to_f32, fp_nf_avx2_f32_to_tf32, fp_nf_scalar_f32_to_e4m3,
        fp_nf_scalar_e4m3_to_f32, fp_nf_scalar_f32_to_e5m2, fp_nf_scalar_e5m2_to_f32,
    },
    [FP_ISA_AVX512] = {
        fp_nf_avx512_f32_to_f16, fp_nf_avx512_f16_to_f32, fp_nf_avx512_f32_to_bf16,
        fp_nf_avx512_bf16_to_f32, fp_nf_avx512_f32_to_tf32, fp_nf_scalar_f32_to_e4m3,
        fp_nf_scalar_e4m3_to_f32, fp_nf_scalar_f32_to_e5m2, fp_nf_scalar_e5m2_to_f32,
    },
#endif
};

static const char *const isa_names[FP_ISA_COUNT] = {"scalar", "avx2", "avx512"};
static const char *const isa_needs[FP_ISA_COUNT] = {"", "AVX2 and F16C", "AVX-512F and AVX-512BW"};

static atomic_int active_isa = -1;              /* -1: not chosen yet */
static atomic_int isa_limit = FP_ISA_COUNT;     /* tests only: no path above this one */

#if FP_NUMFMT_X86
static int cpu_has_f16c(void)
{
#if defined(__clang__)   /* clang's __builtin_cpu_supports does not know "f16c": CPUID.1:ECX.29 */
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
#else
    return __builtin_cpu_supports("f16c");
#endif
}
#endif

static int cpu_has(fp_isa isa)
{
    switch (isa) {
    case FP_ISA_SCALAR:
        return 1;
#if FP_NUMFMT_X86
    case FP_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && cpu_has_f16c();
    case FP_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#endif
    default:
        return 0;
    }
}

int fp_numfmt_isa_supported(fp_isa isa)
{
    if ((int)isa < 0 || isa >= FP_ISA_COUNT || (int)isa > atomic_load(&isa_limit))
        return 0;
    return cpu_has(isa);
}

static fp_isa best_isa(void)
{
    for (int i = FP_ISA_COUNT - 1; i > 0; i--)
        if (fp_numfmt_isa_supported((fp_isa)i))
            return (fp_isa)i;
    return FP_ISA_SCALAR;
}

fp_isa fp_numfmt_isa(void)
{
    int isa = atomic_load_explicit(&active_isa, memory_order_relaxed);
    if (isa < 0) {   /* first use: choose the best; racing first uses choose the same */
        isa = (int)best_isa();
        atomic_store_explicit(&active_isa, isa, memory_order_relaxed);
    }
    return (fp_isa)isa;
}

int fp_numfmt_set_isa(fp_isa isa)
{
    if ((int)isa < 0 || isa >= FP_ISA_COUNT)
        return fp_fail(FP_EINVAL, "fp_numfmt_set_isa: unknown instruction set %d", (int)isa);
    if (!fp_numfmt_isa_supported(isa))
        return fp_fail(FP_EUNAVAIL, "fp_numfmt_set_isa: this CPU lacks %s (needed by the %s path)",
                       isa_needs[isa], isa_names[isa]);
    atomic_store(&active_isa, (int)isa);
    return FP_OK;
}

const char *fp_isa_name(fp_isa isa)
{
    if ((int)isa < 0 || isa >= FP_ISA_COUNT)
        return "unknown";
    return isa_names[isa];
}

void fp_numfmt_limit_isa_for_tests(fp_isa max)
{
    atomic_store(&isa_limit, (int)max);
    if ((int)fp_numfmt_isa() > (int)max)
        atomic_store(&active_isa, (int)best_isa());
}

static const fp_numfmt_kernels *kernels(void)
{
    return &kernel_table[fp_numfmt_isa()];
}

#define ARRAY_FN(name, dtype, stype)                                                           \
    int fp_##name##_array(dtype *dst, const stype *src, size_t n)                              \
    {                                                                                          \
        if (n == 0)                                                                            \
            return FP_OK;                                                                      \
        if (!dst || !src)                                                                      \
            return fp_fail(FP_EINVAL, "fp_" #name "_array: %s is NULL with n = %zu",           \
                           !dst ? "dst" : "src", n);                                           \
        kernels()->name(dst, src, n);                                                          \
        return FP_OK;                                                                          \
    }

FP_NUMFMT_ARRAY_FUNCTIONS(ARRAY_FN)
