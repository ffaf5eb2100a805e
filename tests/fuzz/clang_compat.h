/* clang_compat.h — forced into every file of the libFuzzer build (tests/fuzz.mk: -include) so that the
 * project builds with clang 14 (Debian 12), which lacks __builtin_cpu_supports("f16c"): the builtin is
 * replaced, for the fuzz build only, by the same CPUID + XGETBV checks (OS-enabled AVX / AVX-512 state
 * included), so the SIMD dispatch takes the same paths as in the gcc builds. */
#ifndef FP_FUZZ_CLANG_COMPAT_H
#define FP_FUZZ_CLANG_COMPAT_H
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <string.h>

static inline int fz_cpu_supports(const char *f)
{
    unsigned a, b, c, d, b7 = 0, c7 = 0, d7 = 0, xcr0 = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    unsigned c1 = c;
    if (__get_cpuid_max(0, NULL) >= 7)
        __cpuid_count(7, 0, a, b7, c7, d7);
    if (c1 & (1u << 27)) {   /* OSXSAVE: XCR0 says which register states the OS saves */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = lo;
    }
    int avx_os = (xcr0 & 6) == 6, avx512_os = avx_os && (xcr0 & 0xe0) == 0xe0;
    if (!strcmp(f, "f16c"))
        return avx_os && (c1 & (1u << 29));
    if (!strcmp(f, "fma"))
        return avx_os && (c1 & (1u << 12));
    if (!strcmp(f, "avx"))
        return avx_os && (c1 & (1u << 28));
    if (!strcmp(f, "avx2"))
        return avx_os && (b7 & (1u << 5));
    if (!strcmp(f, "bmi2"))
        return (b7 & (1u << 8)) != 0;
    if (!strcmp(f, "avx512f"))
        return avx512_os && (b7 & (1u << 16));
    if (!strcmp(f, "avx512bw"))
        return avx512_os && (b7 & (1u << 30));
    return 0;   /* a feature this header does not know: the portable path */
}
#define __builtin_cpu_supports(f) fz_cpu_supports(f)
#endif
#endif
