/* test_fp8.c — TAP test of the scalar fp32 <-> fp8 (OCP E4M3 and E5M2) conversions of numfmt.h.
 * Checks: all 256 codes decode to the OCP formula and round-trip; fp32 -> fp8 equals a brute-force
 * nearest-value search over the 256-entry table (ties to the even code) on edge values, 10^6
 * random floats in range and 10^6 random bit patterns; saturation, Inf and NaN explicitly. */
#include "numfmt.h"
#include "formats.h"
#include "tap.h"
#include "testutil.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

#define N_RANDOM 1000000u


static uint64_t rng_state;
static uint64_t rng(void) { return tu_xorshift64s(&rng_state); }

/* The OCP 8-bit floating point specification (v1.0), section 5.3:
 *   E4M3: bias 7; S.1111.111 is NaN, no Inf; E = 0: (-1)^S 2^-6 (M / 8); else (-1)^S 2^(E-7) (1 + M/8).
 *   E5M2: bias 15; E = 31: M = 0 Inf, else NaN; E = 0: (-1)^S 2^-14 (M / 4); else 2^(E-15) (1 + M/4). */
static double ocp_e4m3(unsigned c)
{
    unsigned s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    double v;
    if (e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = pow(2.0, -6) * (m / 8.0);
    else
        v = pow(2.0, (double)e - 7) * (1.0 + m / 8.0);
    return s ? -v : v;
}

static double ocp_e5m2(unsigned c)
{
    unsigned s = c >> 7, e = (c >> 2) & 31, m = c & 3;
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = pow(2.0, -14) * (m / 4.0);
    else
        v = pow(2.0, (double)e - 15) * (1.0 + m / 4.0);
    return s ? -v : v;
}

typedef struct {
    const char *name;
    double value[256];
    uint8_t (*enc)(float);
    float (*dec)(uint8_t);
} fmt_t;

/* Nearest code by brute force over the positive half of the table, ties to the even code (codes
 * are ordered by magnitude, so the even code of a tie has the even mantissa). For a format with
 * Inf, Inf stands in as the next binade's first value (2 x the top binade's base), as IEEE
 * overflow rounding treats it. NaN: 0x7F, sign kept. */
static uint8_t brute_force(const fmt_t *f, float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return sign | 0x7F;
    double d = fabs((double)x);
    int best = -1;
    double best_dist = INFINITY;
    for (int c = 0; c < 128; c++) {
        double v = f->value[c];
        if (isnan(v))
            continue;
        if (isinf(v))
            v = 2.0 * f->value[c - 4];           /* E5M2: S.11111.00 after S.11110.00 */
        double dist = fabs(d - v);
        if (isinf(d))
            dist = isinf(f->value[c]) ? 0 : INFINITY;
        if (dist < best_dist || (dist == best_dist && !(c & 1))) {
            best = c;
            best_dist = dist;
        }
    }
    if (best < 0)                                /* only E4M3 with d = Inf: saturate */
        best = 0x7E;
    return sign | (uint8_t)best;
}

static void test_format(fmt_t *f, double (*ocp)(unsigned))
{
    unsigned bad = 0, bad_trip = 0;
    for (unsigned c = 0; c < 256; c++) {
        f->value[c] = ocp(c);
        float got = f->dec((uint8_t)c);
        double want = f->value[c];
        int sign_ok = !signbit(got) == !(c & 0x80);
        if (isnan(want) ? !isnan(got) || !sign_ok : (double)got != want || !sign_ok) {
            if (bad++ < 5)
                tap_diag("%s 0x%02x: got %a, OCP formula %a", f->name, c, (double)got, want);
        }
        uint8_t back = f->enc(got);
        uint8_t want_back = isnan(want) ? (uint8_t)((c & 0x80) | 0x7F) : (uint8_t)c;
        if (back != want_back && bad_trip++ < 5)
            tap_diag("%s 0x%02x -> %a -> 0x%02x", f->name, c, (double)got, back);
    }
    tap_is_int(bad, 0, "%s: all 256 codes decode to the OCP formula (sign of zero and NaN kept)", f->name);
    tap_is_int(bad_trip, 0, "%s: every code round-trips (NaN codes to 0x7F / 0xFF by sign)", f->name);

    /* edge values: every code's value, the midpoints between neighbours, their float neighbours */
    bad = 0;
    unsigned count = 0;
    for (unsigned c = 0; c < 256; c++) {
        double v = f->value[c];
        if (isnan(v) || isinf(v))
            continue;
        double nxt = (c & 0x7F) + 1 < 128 && !isnan(f->value[c + 1]) && !isinf(f->value[c + 1])
                         ? f->value[c + 1] : 2 * v - f->value[c - 1];
        float probes[] = {(float)v, (float)((v + nxt) / 2), 0, 0, 0, 0};
        probes[2] = nextafterf(probes[0], 0.0f);
        probes[3] = nextafterf(probes[0], INFINITY * (float)(v < 0 ? -1 : 1));
        probes[4] = nextafterf(probes[1], 0.0f);
        probes[5] = nextafterf(probes[1], INFINITY * (float)(v < 0 ? -1 : 1));
        for (int k = 0; k < 6; k++, count++)
            if (f->enc(probes[k]) != brute_force(f, probes[k]) && bad++ < 5)
                tap_diag("%s %a: got 0x%02x, brute force 0x%02x", f->name, (double)probes[k],
                         f->enc(probes[k]), brute_force(f, probes[k]));
    }
    const float specials[] = {INFINITY, -INFINITY, NAN, -NAN, tu_u2f(0x7F800001u), tu_u2f(0xFFA00000u),
                              1e30f, -1e30f, 0x1p-30f, -0x1p-30f, tu_u2f(1), tu_u2f(0x80000001u)};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++, count++)
        if (f->enc(specials[k]) != brute_force(f, specials[k]) && bad++ < 5)
            tap_diag("%s %a: got 0x%02x, brute force 0x%02x", f->name, (double)specials[k],
                     f->enc(specials[k]), brute_force(f, specials[k]));
    tap_is_int(bad, 0, "%s: fp32 -> fp8 equals brute force on %u edge values (codes, midpoints, neighbours)",
               f->name, count);

    /* random floats spanning the format's range: 2^-20 .. 2^20, any mantissa, either sign */
    bad = 0;
    rng_state = 0xA4093822299F31D0ull;
    for (uint32_t i = 0; i < N_RANDOM; i++) {
        uint64_t r = rng();
        uint32_t u = ((uint32_t)r & 0x807FFFFFu) | ((uint32_t)(127 - 20 + (r >> 32) % 41) << 23);
        float x = tu_u2f(u);
        if (f->enc(x) != brute_force(f, x) && bad++ < 5)
            tap_diag("%s 0x%08x: got 0x%02x, brute force 0x%02x", f->name, u, f->enc(x), brute_force(f, x));
    }
    tap_is_int(bad, 0, "%s: fp32 -> fp8 equals brute force on %u random floats in 2^-20..2^20", f->name, N_RANDOM);

    bad = 0;
    for (uint32_t i = 0; i < N_RANDOM; i++) {
        float x = tu_u2f((uint32_t)rng());
        if (f->enc(x) != brute_force(f, x) && bad++ < 5)
            tap_diag("%s 0x%08x: got 0x%02x, brute force 0x%02x", f->name, tu_f2u(x), f->enc(x),
                     brute_force(f, x));
    }
    tap_is_int(bad, 0, "%s: fp32 -> fp8 equals brute force on %u random bit patterns", f->name, N_RANDOM);
}

static void test_explicit(void)
{
    static const struct { float x; uint8_t want; const char *what; } e4m3[] = {
        {448.0f, 0x7E, "448 (max finite)"},
        {-448.0f, 0xFE, "-448"},
        {464.0f, 0x7E, "464 (max + half ulp, tie) -> 448"},
        {0x1.D00002p8f, 0x7E, "nextafter(464, Inf) saturates to 448"},
        {480.0f, 0x7E, "480 saturates to 448"},
        {1e30f, 0x7E, "1e30 saturates to 448"},
        {-1e30f, 0xFE, "-1e30 saturates to -448"},
        {INFINITY, 0x7E, "+Inf saturates to 448"},
        {-INFINITY, 0xFE, "-Inf saturates to -448"},
        {NAN, 0x7F, "NaN -> 0x7F"},
        {-NAN, 0xFF, "-NaN -> 0xFF (sign kept)"},
        {400.0f, 0x7C, "400 (between 384 and 416) -> 384, 0x7C (tie to even)"},
        {432.0f, 0x7E, "432 (between 416 and 448) -> 448, 0x7E (tie to even)"},
        {0x1p-6f, 0x08, "2^-6 (min normal)"},
        {0x1p-9f, 0x01, "2^-9 (min subnormal)"},
        {0x1p-10f, 0x00, "2^-10 -> 0 (tie to even)"},
        {0x1.000002p-10f, 0x01, "nextafter(2^-10, 1) -> 2^-9"},
        {0x1.8p-9f, 0x02, "1.5 * 2^-9 -> 0x02 (tie to even)"},
        {0.0f, 0x00, "+0"},
        {-0.0f, 0x80, "-0"},
        {1.0f, 0x38, "1.0"},
    };
    static const struct { float x; uint8_t want; const char *what; } e5m2[] = {
        {57344.0f, 0x7B, "57344 (max finite)"},
        {0x1.DFFFFEp15f, 0x7B, "61439.99 -> 57344"},
        {61440.0f, 0x7C, "61440 (tie) -> Inf"},
        {-61440.0f, 0xFC, "-61440 -> -Inf"},
        {INFINITY, 0x7C, "+Inf"},
        {-INFINITY, 0xFC, "-Inf"},
        {NAN, 0x7F, "NaN -> 0x7F"},
        {-NAN, 0xFF, "-NaN -> 0xFF (sign kept)"},
        {0x1p-14f, 0x04, "2^-14 (min normal)"},
        {0x1p-16f, 0x01, "2^-16 (min subnormal)"},
        {0x1p-17f, 0x00, "2^-17 -> 0 (tie to even)"},
        {0x1.000002p-17f, 0x01, "nextafter(2^-17, 1) -> 2^-16"},
        {-0.0f, 0x80, "-0"},
        {1.0f, 0x3C, "1.0"},
        {1.125f, 0x3C, "1.125 -> 1.0 (tie to even)"},
        {1.375f, 0x3E, "1.375 -> 1.5 (tie to even)"},
    };
    for (size_t i = 0; i < sizeof e4m3 / sizeof e4m3[0]; i++)
        tap_is_uint(fp_f32_to_e4m3(e4m3[i].x), e4m3[i].want, "e4m3: %s", e4m3[i].what);
    for (size_t i = 0; i < sizeof e5m2 / sizeof e5m2[0]; i++)
        tap_is_uint(fp_f32_to_e5m2(e5m2[i].x), e5m2[i].want, "e5m2: %s", e5m2[i].what);
    tap_ok(fp_e4m3_to_f32(0x7E) == E4M3_MAX_FINITE && fp_e5m2_to_f32(0x7B) == E5M2_MAX_FINITE,
           "the largest codes decode to formats.h's max finite values");
    tap_ok(fp_e4m3_to_f32(0x01) == E4M3_MIN_SUBNORMAL && fp_e5m2_to_f32(0x01) == E5M2_MIN_SUBNORMAL &&
               fp_e4m3_to_f32(0x08) == E4M3_MIN_NORMAL && fp_e5m2_to_f32(0x04) == E5M2_MIN_NORMAL,
           "the smallest codes decode to formats.h's min subnormal / min normal values");
    tap_ok(isinf(fp_e5m2_to_f32(0xFC)) && fp_e5m2_to_f32(0xFC) < 0 && isnan(fp_e5m2_to_f32(0x7D)),
           "e5m2: 0xFC decodes to -Inf, 0x7D to NaN");
}

int main(void)
{
    static fmt_t e4m3 = {"e4m3", {0}, fp_f32_to_e4m3, fp_e4m3_to_f32};
    static fmt_t e5m2 = {"e5m2", {0}, fp_f32_to_e5m2, fp_e5m2_to_f32};
    test_format(&e4m3, ocp_e4m3);
    test_format(&e5m2, ocp_e5m2);
    test_explicit();
    return tap_done();
}
