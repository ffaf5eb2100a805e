/* test_bf16_tf32.c — TAP test of the scalar fp32 <-> bf16 and fp32 -> tf32 conversions of numfmt.h.
 * Checks both against a reference written independently (rounding in double with frexp/nearbyint,
 * not the integer bit trick) on edge values and 10^7 random patterns each, hand-computed patterns,
 * and that all 65,536 bf16 patterns decode to the formula and round-trip. */
#include "numfmt.h"
#include "formats.h"
#include "tap.h"
#include "testutil.h"
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define N_RANDOM 10000000u


static uint64_t rng_state;
static uint64_t rng(void) { return tu_xorshift64s(&rng_state); }

/* |d| (finite, nonzero) rounded to `p` significant bits, with the exponent of the leading bit
 * floored at `emin` (gradual underflow), ties to even through nearbyint in the default mode. */
static double ref_round(double d, int p, int emin)
{
    int e;
    frexp(d, &e);
    int lead = e - 1 < emin ? emin : e - 1;
    double q = ldexp(1.0, lead - (p - 1));
    return nearbyint(d / q) * q;
}

/* bf16 = 8 significant bits, fp32's exponent range; beyond the largest finite value: Inf.
 * NaN: sign, all-ones exponent, the quiet bit and the top 7 payload bits. */
static uint16_t ref_f32_to_bf16(float x)
{
    uint32_t sign = signbit(x) ? 0x80000000u : 0;
    if (isnan(x))
        return (uint16_t)((sign | 0x7F800000u | 0x400000u | (tu_f2u(x) & 0x7F0000u)) >> 16);
    double d = fabs((double)x);
    double r = (d == 0 || isinf(d)) ? d : ref_round(d, 8, -126);
    if (r > BF16_MAX_FINITE)
        r = INFINITY;
    float rf = (float)r;                 /* exact: r has at most 8 significant bits */
    return (uint16_t)((sign | tu_f2u(rf)) >> 16);
}

/* tf32 = 11 significant bits, fp32's exponent range (subnormal step 2^-136); overflow: Inf.
 * NaN: sign, quiet bit, top 10 payload bits. */
static float ref_f32_to_tf32(float x)
{
    uint32_t sign = signbit(x) ? 0x80000000u : 0;
    if (isnan(x))
        return tu_u2f(sign | 0x7F800000u | 0x400000u | (tu_f2u(x) & 0x7FE000u));
    double d = fabs((double)x);
    double r = (d == 0 || isinf(d)) ? d : ref_round(d, 11, -126);
    if (r > FLT_MAX)
        r = INFINITY;
    return tu_u2f(sign | tu_f2u((float)r));
}

static int same_bits(float a, float b) { return tu_f2u(a) == tu_f2u(b); }

static size_t edge_values(float *out)
{
    const float base[] = {0.0f, 1.0f, 1.00390625f /* 1 + 2^-8 */, 1.01171875f /* 1 + 3 * 2^-8 */,
                          BF16_MAX_FINITE, BF16_OVERFLOW_AT, BF16_MIN_NORMAL, BF16_MIN_SUBNORMAL,
                          FLT_MAX, FLT_MIN, FLT_TRUE_MIN, 0x1p-133f * 1.5f, 0x1.FFEp127f,
                          0x1.FFFp127f, 1.0f + 0x1p-11f, INFINITY, FP16_MAX_FINITE};
    const uint32_t bits[] = {0x00008000u, 0x00008001u, 0x00018000u, 0x00001000u, 0x00003000u,
                             0x007FFFFFu, 0x7F7F8000u, 0x7F7FFFFFu, 0x3F808000u, 0x3F818000u,
                             0x7F800001u, 0x7F801000u, 0x7F80FFFFu, 0x7F810000u, 0x7FBFFFFFu,
                             0x7FC00000u, 0x7FFFFFFFu, 0x7F800100u};
    size_t n = tu_edge_expand(out, base, sizeof base / sizeof base[0], bits, sizeof bits / sizeof bits[0]);
    return n;
}

/* Random patterns over every exponent; a quarter get an exact tie in the bits the format drops. */
static float random_pattern(uint32_t tie_bits, uint32_t tie_half)
{
    uint64_t r = rng();
    uint32_t u = (uint32_t)r;
    if (((r >> 32) & 3) == 0)
        u = (u & ~tie_bits) | tie_half;
    return tu_u2f(u);
}

static void test_bf16(void)
{
    static const struct { uint32_t bits; uint16_t want; const char *what; } cases[] = {
        {0x3F800000u, 0x3F80, "1.0"},
        {0x3F808000u, 0x3F80, "1 + 2^-8 -> 1.0 (tie to even)"},
        {0x3F818000u, 0x3F82, "1 + 3 * 2^-8 -> 1 + 2^-6 (tie to even)"},
        {0x3F808001u, 0x3F81, "just above the tie rounds up"},
        {0x7F7F0000u, 0x7F7F, "max finite (BF16_MAX_FINITE)"},
        {0x7F7F7FFFu, 0x7F7F, "just below max + half ulp stays max"},
        {0x7F7F8000u, 0x7F80, "max + half ulp (BF16_OVERFLOW_AT) -> Inf"},
        {0x7F7FFFFFu, 0x7F80, "FLT_MAX -> Inf"},
        {0xFF7FFFFFu, 0xFF80, "-FLT_MAX -> -Inf"},
        {0x00010000u, 0x0001, "2^-133 (min subnormal)"},
        {0x00008000u, 0x0000, "2^-134 -> 0 (tie to even)"},
        {0x00008001u, 0x0001, "just above 2^-134 -> min subnormal"},
        {0x00018000u, 0x0002, "1.5 * 2^-133 -> 0x0002 (tie to even)"},
        {0x007FFFFFu, 0x0080, "largest fp32 subnormal -> min normal"},
        {0x80000000u, 0x8000, "-0"},
        {0x80000001u, 0x8000, "-fp32 min subnormal -> -0"},
        {0x7F800000u, 0x7F80, "+Inf"},
        {0xFF800000u, 0xFF80, "-Inf"},
        {0x7F800001u, 0x7FC0, "signalling NaN, low payload: quieted"},
        {0x7FA00000u, 0x7FE0, "signalling NaN, high payload: quieted, payload kept"},
        {0xFFC00000u, 0xFFC0, "negative quiet NaN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        tap_is_uint(fp_f32_to_bf16(tu_u2f(cases[i].bits)), cases[i].want, "fp32 -> bf16: %s", cases[i].what);

    float edge[256];
    size_t ne = edge_values(edge);
    unsigned bad = 0;
    for (size_t i = 0; i < ne; i++)
        if (fp_f32_to_bf16(edge[i]) != ref_f32_to_bf16(edge[i]) && bad++ < 5)
            tap_diag("0x%08x: got 0x%04x, reference 0x%04x", tu_f2u(edge[i]), fp_f32_to_bf16(edge[i]),
                     ref_f32_to_bf16(edge[i]));
    tap_is_int(bad, 0, "fp32 -> bf16 equals the reference on %zu edge values and neighbours", ne);

    bad = 0;
    rng_state = 0x243F6A8885A308D3ull;
    for (uint32_t i = 0; i < N_RANDOM; i++) {
        float x = random_pattern(0xFFFFu, 0x8000u);
        uint16_t got = fp_f32_to_bf16(x), want = ref_f32_to_bf16(x);
        if (got != want && bad++ < 5)
            tap_diag("0x%08x: got 0x%04x, reference 0x%04x", tu_f2u(x), got, want);
    }
    tap_is_int(bad, 0, "fp32 -> bf16 equals the reference on %u random patterns", N_RANDOM);

    unsigned bad_formula = 0, bad_exact = 0, bad_nan = 0, nans = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t b = (uint16_t)i;
        float f = fp_bf16_to_f32(b);
        int s = b >> 15, e = (b >> 7) & 0xFF, m = b & 0x7F;
        double want = e == 0xFF ? (m ? NAN : INFINITY)
                    : e == 0 ? ldexp(m / 128.0, -126) : ldexp(1.0 + m / 128.0, e - 127);
        if (s)
            want = -want;
        if (isnan(want) ? !isnan(f) || !signbit(f) != !s : (double)f != want || !signbit(f) != !s)
            bad_formula++;
        uint16_t back = fp_f32_to_bf16(f);
        if (isnan(f)) {
            nans++;
            if ((back & 0x7F80) != 0x7F80 || !(back & 0x7F) || (back & 0x8000) != (b & 0x8000))
                bad_nan++;
        } else if (back != b) {
            bad_exact++;
        }
    }
    tap_is_int(bad_formula, 0, "all 65536 bf16 patterns decode to the formula (sign of zero and NaN kept)");
    tap_is_int(bad_exact, 0, "all %u non-NaN bf16 patterns round-trip bf16 -> fp32 -> bf16 bit for bit", 65536u - nans);
    tap_is_int(bad_nan, 0, "all %u NaN bf16 patterns stay NaN with their sign", nans);
}

static void test_tf32(void)
{
    static const struct { uint32_t bits, want; const char *what; } cases[] = {
        {0x3F800000u, 0x3F800000u, "1.0"},
        {0x3F801000u, 0x3F800000u, "1 + 2^-11 -> 1.0 (tie to even)"},
        {0x3F803000u, 0x3F804000u, "1 + 3 * 2^-11 -> 1 + 2^-9 (tie to even)"},
        {0x3F801001u, 0x3F802000u, "just above the tie rounds up"},
        {0x7F7FE000u, 0x7F7FE000u, "tf32 max finite"},
        {0x7F7FEFFFu, 0x7F7FE000u, "just below max + half ulp stays max"},
        {0x7F7FF000u, 0x7F800000u, "max + half ulp -> Inf"},
        {0x7F7FFFFFu, 0x7F800000u, "FLT_MAX -> Inf"},
        {0xFF7FFFFFu, 0xFF800000u, "-FLT_MAX -> -Inf"},
        {0x00001000u, 0x00000000u, "2^-137 -> 0 (tie to even)"},
        {0x00001001u, 0x00002000u, "just above 2^-137 -> 2^-136"},
        {0x00003000u, 0x00004000u, "3 * 2^-137 -> 2^-135 (tie to even)"},
        {0x807FFFFFu, 0x80800000u, "-largest fp32 subnormal -> -FLT_MIN"},
        {0x80000000u, 0x80000000u, "-0"},
        {0x7F800000u, 0x7F800000u, "+Inf"},
        {0xFF800000u, 0xFF800000u, "-Inf"},
        {0x7F800001u, 0x7FC00000u, "signalling NaN, low payload: quieted, low bits cleared"},
        {0x7FA01FFFu, 0x7FE00000u, "signalling NaN, high payload: quieted, top payload kept"},
        {0xFFFFFFFFu, 0xFFFFE000u, "negative NaN, all payload bits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        tap_is_uint(tu_f2u(fp_f32_to_tf32(tu_u2f(cases[i].bits))), cases[i].want, "fp32 -> tf32: %s", cases[i].what);

    float edge[256];
    size_t ne = edge_values(edge);
    unsigned bad = 0;
    for (size_t i = 0; i < ne; i++)
        if (!same_bits(fp_f32_to_tf32(edge[i]), ref_f32_to_tf32(edge[i])) && bad++ < 5)
            tap_diag("0x%08x: got 0x%08x, reference 0x%08x", tu_f2u(edge[i]), tu_f2u(fp_f32_to_tf32(edge[i])),
                     tu_f2u(ref_f32_to_tf32(edge[i])));
    tap_is_int(bad, 0, "fp32 -> tf32 equals the reference on %zu edge values and neighbours", ne);

    unsigned bad_idem = 0;
    bad = 0;
    rng_state = 0x13198A2E03707344ull;
    for (uint32_t i = 0; i < N_RANDOM; i++) {
        float x = random_pattern(0x1FFFu, 0x1000u);
        float got = fp_f32_to_tf32(x), want = ref_f32_to_tf32(x);
        if (!same_bits(got, want) && bad++ < 5)
            tap_diag("0x%08x: got 0x%08x, reference 0x%08x", tu_f2u(x), tu_f2u(got), tu_f2u(want));
        if (!same_bits(fp_f32_to_tf32(got), got))
            bad_idem++;
    }
    tap_is_int(bad, 0, "fp32 -> tf32 equals the reference on %u random patterns", N_RANDOM);
    tap_is_int(bad_idem, 0, "fp32 -> tf32 is idempotent on the same %u patterns", N_RANDOM);
}

int main(void)
{
    test_bf16();
    test_tf32();
    return tap_done();
}
