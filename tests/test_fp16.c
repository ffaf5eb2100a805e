/* test_fp16.c — TAP test of the scalar fp32 <-> fp16 conversions of numfmt.h.
 * Checks: every fp16 pattern decodes to the binary16 formula and round-trips; fp32 -> fp16 matches
 * hand-computed patterns, an independent double-precision reference and the F16C instruction
 * (edge values and 10^7 random patterns); fp16 -> fp32 matches vcvtph2ps on all 65,536 patterns. */
#include "numfmt.h"
#include "formats.h"
#include "tap.h"
#include "testutil.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#if defined(__clang__)
#include <cpuid.h>
#endif
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#define N_RANDOM 10000000u
#define BATCH 4096u


static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) { return tu_xorshift64s(&rng_state); }

/* binary16 value from its fields, by the formula (-1)^s 2^(e-15) (1 + m/1024), e = 0: 2^-14 m/1024. */
static double f16_formula(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m / 1024.0, -14);
    else
        v = ldexp(1.0 + m / 1024.0, e - 15);
    return s ? -v : v;
}

/* Independent reference for fp32 -> fp16: round in double with nearbyint (ties to even in the
 * default rounding mode), then build the fields from frexp. NaN: sign, quiet bit, top payload. */
static uint16_t ref_f32_to_f16(float x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    if (isnan(x))
        return sign | 0x7C00 | 0x200 | ((tu_f2u(x) & 0x7FFFFF) >> 13);
    double d = fabs((double)x);
    if (isinf(x))
        return sign | 0x7C00;
    if (d == 0)
        return sign;
    int e;
    frexp(d, &e);                 /* d = f 2^e, f in [0.5, 1): leading bit is 2^(e-1) */
    int lead = e - 1 < -14 ? -14 : e - 1;
    double q = ldexp(1.0, lead - 10);
    double r = nearbyint(d / q) * q;
    if (r >= 65536.0)             /* rounded past the largest binade: overflow */
        return sign | 0x7C00;
    if (r < FP16_MIN_NORMAL)
        return sign | (uint16_t)(r / FP16_MIN_SUBNORMAL);
    double f = frexp(r, &e);      /* r = f 2^e: biased exponent e - 1 + 15, mantissa (2f - 1) 1024 */
    return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((2.0 * f - 1.0) * 1024.0);
}

#if HAVE_X86
__attribute__((target("avx,f16c"))) static void hw_f32_to_f16(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i += 8)   /* n is a multiple of 8 */
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("avx,f16c"))) static void hw_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
}

static int have_f16c(void)
{
    __builtin_cpu_init();
#if defined(__clang__)   /* clang's __builtin_cpu_supports does not know "f16c": CPUID.1:ECX.29 */
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
#else
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
#endif
}
#endif

static void test_all_patterns(void)
{
    unsigned bad_formula = 0, bad_exact = 0, bad_nan = 0, nans = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = fp_f16_to_f32(h);
        double want = f16_formula(h);
        if (isnan(want) ? !(isnan(f) && !signbit(f) == !(h & 0x8000))
                        : ((double)f != want || !signbit(f) != !signbit(want)))
            bad_formula++;
        uint16_t back = fp_f32_to_f16(f);
        if (isnan(f)) {
            nans++;
            if ((back & 0x7C00) != 0x7C00 || !(back & 0x3FF) || (back & 0x8000) != (h & 0x8000))
                bad_nan++;
        } else if (back != h) {
            if (bad_exact++ < 5)
                tap_diag("0x%04x -> %a -> 0x%04x", h, (double)f, back);
        }
    }
    tap_is_int(bad_formula, 0, "all 65536 fp16 patterns decode to the binary16 formula (sign of zero and NaN kept)");
    tap_is_int(bad_exact, 0, "all %u non-NaN fp16 patterns round-trip fp16 -> fp32 -> fp16 bit for bit", 65536u - nans);
    tap_is_int(bad_nan, 0, "all %u NaN fp16 patterns stay NaN with their sign", nans);
}

static void test_hand_values(void)
{
    static const struct { uint32_t bits; uint16_t want; const char *what; } cases[] = {
        {0x477FE000u, 0x7BFF, "65504 (max finite)"},
        {0x477FEFFFu, 0x7BFF, "65519.99 (nextafter below 65520)"},
        {0x477FF000u, 0x7C00, "65520 -> Inf (tie rounds to even = Inf)"},
        {0xC77FF000u, 0xFC00, "-65520 -> -Inf"},
        {0x47800000u, 0x7C00, "65536 -> Inf"},
        {0x38800000u, 0x0400, "2^-14 (min normal)"},
        {0x387FFFFFu, 0x0400, "nextafter below 2^-14 rounds up to min normal"},
        {0x33800000u, 0x0001, "2^-24 (min subnormal)"},
        {0x33000000u, 0x0000, "2^-25 -> 0 (tie to even)"},
        {0x33000001u, 0x0001, "nextafter(2^-25, 1) -> 0x0001"},
        {0xB3000001u, 0x8001, "-nextafter(2^-25, 1) -> 0x8001"},
        {0x33C00000u, 0x0002, "1.5 * 2^-24 -> 0x0002 (tie to even)"},
        {0x34200000u, 0x0002, "2.5 * 2^-24 -> 0x0002 (tie to even)"},
        {0x3F800000u, 0x3C00, "1.0"},
        {0x3F801000u, 0x3C00, "1 + 2^-11 -> 1.0 (tie to even)"},
        {0x3F803000u, 0x3C02, "1 + 3 * 2^-11 -> 1 + 2^-9 (tie to even)"},
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x00000001u, 0x0000, "fp32 min subnormal -> +0"},
        {0x80000001u, 0x8000, "-fp32 min subnormal -> -0"},
        {0x7F800000u, 0x7C00, "+Inf"},
        {0xFF800000u, 0xFC00, "-Inf"},
        {0x7FC00000u, 0x7E00, "quiet NaN"},
        {0x7F800001u, 0x7E00, "signalling NaN, low payload: quieted"},
        {0x7FA00000u, 0x7F00, "signalling NaN, high payload: quieted, payload kept"},
        {0xFFFFFFFFu, 0xFFFF, "negative NaN, all payload bits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        tap_is_uint(fp_f32_to_f16(tu_u2f(cases[i].bits)), cases[i].want, "fp32 -> fp16: %s", cases[i].what);
}

/* The edge values of the issue, their float neighbours, both signs, zeros, Inf, NaNs. */
static size_t edge_values(float *out)
{
    const float base[] = {FP16_MAX_FINITE, nextafterf(FP16_OVERFLOW_AT, 0.0f), FP16_OVERFLOW_AT,
                          FP16_MIN_NORMAL, FP16_MIN_SUBNORMAL, FP16_MIN_SUBNORMAL * 0.5f,
                          1.0f, 0.0f, INFINITY};
    const uint32_t nans[] = {0x7F800001u, 0x7F801FFFu, 0x7F802000u, 0x7FBFFFFFu, 0x7FC00000u,
                             0x7FC00001u, 0x7FFFE000u, 0x7FFFFFFFu};
    size_t n = tu_edge_expand(out, base, sizeof base / sizeof base[0], nans, sizeof nans / sizeof nans[0]);
    while (n % 8)
        out[n++] = 0.0f;
    return n;
}

static void fill_random(float *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng();
        uint32_t u = (uint32_t)r;
        /* half the patterns: any bits (every exponent); half: exponents near fp16's range */
        if (r >> 63)
            u = (u & 0x807FFFFFu) | ((uint32_t)(96 + (r >> 32) % 50) << 23);
        buf[i] = tu_u2f(u);
    }
}

static void test_reference(void)
{
    float edge[128];
    size_t ne = edge_values(edge);
    unsigned bad = 0;
    for (size_t i = 0; i < ne; i++)
        if (fp_f32_to_f16(edge[i]) != ref_f32_to_f16(edge[i]) && bad++ < 5)
            tap_diag("%a (0x%08x): got 0x%04x, reference 0x%04x", (double)edge[i], tu_f2u(edge[i]),
                     fp_f32_to_f16(edge[i]), ref_f32_to_f16(edge[i]));
    tap_is_int(bad, 0, "fp32 -> fp16 equals the double-precision reference on %zu edge values", ne);

    float buf[BATCH];
    bad = 0;
    rng_state = 0x0123456789ABCDEFull;
    for (uint32_t done = 0; done < N_RANDOM; done += BATCH) {
        fill_random(buf, BATCH);
        for (size_t i = 0; i < BATCH; i++) {
            uint16_t got = fp_f32_to_f16(buf[i]), want = ref_f32_to_f16(buf[i]);
            if (got != want && bad++ < 5)
                tap_diag("0x%08x: got 0x%04x, reference 0x%04x", tu_f2u(buf[i]), got, want);
        }
    }
    tap_is_int(bad, 0, "fp32 -> fp16 equals the double-precision reference on %u random patterns", N_RANDOM);
}

static void test_f16c(void)
{
#if HAVE_X86
    if (!have_f16c()) {
        tap_skip(3, "this CPU has no F16C instruction");
        return;
    }
    float edge[128];
    uint16_t hw[128];
    size_t ne = edge_values(edge);
    hw_f32_to_f16(hw, edge, ne);
    unsigned bad = 0;
    for (size_t i = 0; i < ne; i++)
        if (fp_f32_to_f16(edge[i]) != hw[i] && bad++ < 5)
            tap_diag("%a (0x%08x): got 0x%04x, F16C 0x%04x", (double)edge[i], tu_f2u(edge[i]),
                     fp_f32_to_f16(edge[i]), hw[i]);
    tap_is_int(bad, 0, "fp32 -> fp16 equals vcvtps2ph on %zu edge values (neighbours, signs, NaN payloads)", ne);

    float buf[BATCH];
    uint16_t hb[BATCH];
    bad = 0;
    rng_state = 0xFEDCBA9876543210ull;
    for (uint32_t done = 0; done < N_RANDOM; done += BATCH) {
        fill_random(buf, BATCH);
        hw_f32_to_f16(hb, buf, BATCH);
        for (size_t i = 0; i < BATCH; i++)
            if (fp_f32_to_f16(buf[i]) != hb[i] && bad++ < 5)
                tap_diag("0x%08x: got 0x%04x, F16C 0x%04x", tu_f2u(buf[i]), fp_f32_to_f16(buf[i]), hb[i]);
    }
    tap_is_int(bad, 0, "fp32 -> fp16 equals vcvtps2ph on %u random patterns", N_RANDOM);

    static uint16_t all[65536];
    static float hf[65536];
    for (uint32_t i = 0; i < 65536; i++)
        all[i] = (uint16_t)i;
    hw_f16_to_f32(hf, all, 65536);
    bad = 0;
    for (uint32_t i = 0; i < 65536; i++)
        if (tu_f2u(fp_f16_to_f32(all[i])) != tu_f2u(hf[i]) && bad++ < 5)
            tap_diag("0x%04x: got 0x%08x, F16C 0x%08x", i, tu_f2u(fp_f16_to_f32(all[i])), tu_f2u(hf[i]));
    tap_is_int(bad, 0, "fp16 -> fp32 equals vcvtph2ps bit for bit on all 65536 patterns (NaNs quieted alike)");
#else
    tap_skip(3, "not an x86 CPU: no F16C instruction");
#endif
}

int main(void)
{
    test_all_patterns();
    test_hand_values();
    test_reference();
    test_f16c();
    return tap_done();
}
