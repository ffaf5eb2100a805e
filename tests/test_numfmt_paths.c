/* test_numfmt_paths.c — TAP test that every array path of numfmt.h (scalar, AVX2, AVX-512) gives
 * output bit-identical to the scalar functions: random bits plus edge values, lengths 0..67 and a
 * large one, misaligned src/dst, no write past dst + n, tf32 in place; NULL and ISA-selection errors. */
#include "numfmt.h"
#include "numfmt_isa.h"
#include "error.h"
#include "formats.h"
#include "tap.h"
#include "testutil.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SMALL 67
#define LARGE 100003
#define SLACK 64          /* elements after dst + n that must stay untouched */
#define GUARD 0xA5

static uint64_t rng_state = 0x6A09E667F3BCC908ull;
static uint64_t rng(void) { return tu_xorshift64s(&rng_state); }


/* Source buffers (one extra element for the misaligned offset). */
static float src_f32[LARGE + 1];
static uint16_t src_u16[LARGE + 1];
static uint8_t src_u8[LARGE + 1];

static void fill_sources(void)
{
    static const uint32_t edge[] = {
        0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
        0xFFA00001u, 0x7FBFFFFFu, 0x7FFFFFFFu, 0x7F802000u, 0x7F810000u, 0x00000001u, 0x807FFFFFu,
        0x00008000u, 0x00018000u, 0x00001000u, 0x7F7FFFFFu, 0x7F7F8000u, 0x7F7FF000u, 0x477FE000u,
        0x477FEFFFu, 0x477FF000u, 0x38800000u, 0x33800000u, 0x33000000u, 0x33000001u, 0x33C00000u,
        0x3F801000u, 0x3F808000u, 0x43E00000u, 0x43E80000u, 0x43E80001u, 0x47600000u, 0x476FFFFFu,
        0x47700000u, 0x3A800000u, 0x3A000000u, 0x37800000u, 0x37000000u, 0x3F800000u, 0xBF800000u,
    };
    const size_t ne = sizeof edge / sizeof edge[0];
    for (size_t i = 0; i <= LARGE; i++) {
        uint64_t r = rng();
        uint32_t u = (uint32_t)r;
        switch ((r >> 32) % 8) {
        case 0: u = edge[(r >> 40) % ne] ^ ((uint32_t)(r >> 63) << 31); break;   /* edge, either sign */
        case 1: u = (u & 0x807FFFFFu) | ((uint32_t)(100 + (r >> 40) % 48) << 23); break; /* narrow range */
        case 2: u = (u & ~0xFFFFu) | 0x8000u; break;                             /* bf16 tie */
        case 3: u = (u & ~0x1FFFu) | 0x1000u; break;                             /* tf32 / fp16 tie */
        default: break;                                                          /* any bits */
        }
        src_f32[i] = tu_u2f(u);
        src_u16[i] = (uint16_t)(r >> 16);
        src_u8[i] = (uint8_t)(i < 256 ? i : r >> 24);
    }
}

/* Run one array function against its scalar function over every length and offset. */
#define CHECK_PATH(fn, DT, ST, src_buf)                                                          \
    static int check_##fn(char *why, size_t why_len)                                             \
    {                                                                                            \
        static DT dst[LARGE + 1 + SLACK];                                                        \
        static DT want[LARGE + 1];                                                               \
        for (int off = 0; off < 4; off++) {                                                      \
            const ST *s = src_buf + (off & 1);                                                   \
            DT *d = dst + (off >> 1);                                                            \
            for (size_t n = 0; n <= MAX_SMALL + 1; n++) {                                        \
                size_t len = n <= MAX_SMALL ? n : LARGE;                                         \
                for (size_t i = 0; i < len; i++)                                                 \
                    want[i] = fp_##fn(s[i]);                                                     \
                memset(dst, GUARD, sizeof dst);                                                  \
                int rc = fp_##fn##_array(d, s, len);                                             \
                if (rc != FP_OK) {                                                               \
                    snprintf(why, why_len, "n=%zu off=%d: returned %d", len, off, rc);           \
                    return 0;                                                                    \
                }                                                                                \
                if (memcmp(d, want, len * sizeof(DT)) != 0) {                                    \
                    size_t i = 0;                                                                \
                    while (memcmp(d + i, want + i, sizeof(DT)) == 0)                             \
                        i++;                                                                     \
                    snprintf(why, why_len, "n=%zu src+%d dst+%d: first difference at %zu", len,  \
                             off & 1, off >> 1, i);                                              \
                    return 0;                                                                    \
                }                                                                                \
                const unsigned char *after = (const unsigned char *)(d + len);                   \
                for (size_t i = 0; i < SLACK * sizeof(DT); i++)                                  \
                    if (after[i] != GUARD) {                                                     \
                        snprintf(why, why_len, "n=%zu off=%d: wrote past dst + n", len, off);    \
                        return 0;                                                                \
                    }                                                                            \
            }                                                                                    \
        }                                                                                        \
        return 1;                                                                                \
    }

CHECK_PATH(f32_to_f16, uint16_t, float, src_f32)
CHECK_PATH(f16_to_f32, float, uint16_t, src_u16)
CHECK_PATH(f32_to_bf16, uint16_t, float, src_f32)
CHECK_PATH(bf16_to_f32, float, uint16_t, src_u16)
CHECK_PATH(f32_to_tf32, float, float, src_f32)
CHECK_PATH(f32_to_e4m3, uint8_t, float, src_f32)
CHECK_PATH(e4m3_to_f32, float, uint8_t, src_u8)
CHECK_PATH(f32_to_e5m2, uint8_t, float, src_f32)
CHECK_PATH(e5m2_to_f32, float, uint8_t, src_u8)

static const struct {
    const char *name;
    int (*check)(char *why, size_t why_len);
} paths[] = {
    {"f32_to_f16", check_f32_to_f16},   {"f16_to_f32", check_f16_to_f32},
    {"f32_to_bf16", check_f32_to_bf16}, {"bf16_to_f32", check_bf16_to_f32},
    {"f32_to_tf32", check_f32_to_tf32}, {"f32_to_e4m3", check_f32_to_e4m3},
    {"e4m3_to_f32", check_e4m3_to_f32}, {"f32_to_e5m2", check_f32_to_e5m2},
    {"e5m2_to_f32", check_e5m2_to_f32},
};
#define N_PATHS (sizeof paths / sizeof paths[0])

/* tf32 may run in place: the result must equal the out-of-place one. */
static int check_tf32_in_place(void)
{
    static float buf[LARGE], want[LARGE];
    for (size_t n = 0; n <= MAX_SMALL + 1; n++) {
        size_t len = n <= MAX_SMALL ? n : LARGE;
        memcpy(buf, src_f32 + 1, len * sizeof(float));
        for (size_t i = 0; i < len; i++)
            want[i] = fp_f32_to_tf32(buf[i]);
        if (fp_f32_to_tf32_array(buf, buf, len) != FP_OK || memcmp(buf, want, len * sizeof(float)) != 0)
            return 0;
    }
    return 1;
}

static void test_isa(fp_isa isa)
{
    const char *name = fp_isa_name(isa);
    if (!fp_numfmt_isa_supported(isa)) {
        char reason[96];
        snprintf(reason, sizeof reason, "this CPU lacks the %s instructions", name);
        tap_skip((int)N_PATHS + 2, reason);
        fp_error_clear();
        tap_is_int(fp_numfmt_set_isa(isa), FP_EUNAVAIL, "%s: fp_numfmt_set_isa returns FP_EUNAVAIL (%s)", name,
                   fp_error_message());
        return;
    }
    int rc = fp_numfmt_set_isa(isa);
    tap_ok(rc == FP_OK && fp_numfmt_isa() == isa, "%s: fp_numfmt_set_isa selects it", name);
    for (size_t p = 0; p < N_PATHS; p++) {
        char why[160] = "";
        int ok = paths[p].check(why, sizeof why);
        tap_ok(ok, "%s: fp_%s_array is bit-identical to the scalar function (n = 0..%d and %d, src+0/1, dst+0/1)",
               name, paths[p].name, MAX_SMALL, LARGE);
        if (!ok)
            tap_diag("  %s", why);
    }
    tap_ok(check_tf32_in_place(), "%s: fp_f32_to_tf32_array in place equals out of place", name);
}

static void test_null(void)
{
    float f[1] = {1.0f};
    uint16_t h[1] = {0};
    uint8_t b[1] = {0};
#define NULL_CASE(fn, d, s)                                                                      \
    do {                                                                                         \
        fp_error_clear();                                                                        \
        int r1 = fp_##fn##_array(NULL, s, 5);                                                    \
        int msg1 = fp_error_message()[0] != '\0';                                                \
        fp_error_clear();                                                                        \
        int r2 = fp_##fn##_array(d, NULL, 5);                                                    \
        int msg2 = fp_error_message()[0] != '\0';                                                \
        int r3 = fp_##fn##_array(NULL, NULL, 0);                                                 \
        tap_ok(r1 == FP_EINVAL && r2 == FP_EINVAL && msg1 && msg2 && r3 == FP_OK,                \
               "fp_" #fn "_array: NULL dst or src with n = 5 -> FP_EINVAL with a message; "      \
               "NULL with n = 0 -> FP_OK");                                                      \
        if (!(r1 == FP_EINVAL && r2 == FP_EINVAL && r3 == FP_OK))                                \
            tap_diag("  got %d, %d, %d", r1, r2, r3);                                            \
    } while (0)
    NULL_CASE(f32_to_f16, h, f);
    NULL_CASE(f16_to_f32, f, h);
    NULL_CASE(f32_to_bf16, h, f);
    NULL_CASE(bf16_to_f32, f, h);
    NULL_CASE(f32_to_tf32, f, f);
    NULL_CASE(f32_to_e4m3, b, f);
    NULL_CASE(e4m3_to_f32, f, b);
    NULL_CASE(f32_to_e5m2, b, f);
    NULL_CASE(e5m2_to_f32, f, b);
#undef NULL_CASE
    fp_error_clear();
    tap_ok(fp_f32_to_f16_array(NULL, f, 3) == FP_EINVAL && strstr(fp_error_message(), "dst") != NULL,
           "the NULL message names the argument: \"%s\"", fp_error_message());
}

static void test_selection(void)
{
    fp_isa best = FP_ISA_SCALAR;
    for (int i = 0; i < FP_ISA_COUNT; i++)
        if (fp_numfmt_isa_supported((fp_isa)i))
            best = (fp_isa)i;
    tap_is_int(fp_numfmt_isa(), best, "the default path is the best supported one (%s)", fp_isa_name(best));
    tap_ok(fp_numfmt_isa_supported(FP_ISA_SCALAR), "the scalar path is always supported");
    tap_ok(strcmp(fp_isa_name(FP_ISA_SCALAR), "scalar") == 0 && strcmp(fp_isa_name(FP_ISA_AVX2), "avx2") == 0 &&
               strcmp(fp_isa_name(FP_ISA_AVX512), "avx512") == 0,
           "fp_isa_name gives scalar, avx2, avx512");
    tap_is_int(fp_numfmt_set_isa((fp_isa)FP_ISA_COUNT), FP_EINVAL, "fp_numfmt_set_isa of an unknown value -> FP_EINVAL");

    /* Pretend the CPU has nothing above scalar: the vector paths become unavailable. */
    fp_numfmt_limit_isa_for_tests(FP_ISA_SCALAR);
    tap_is_int(fp_numfmt_isa(), FP_ISA_SCALAR, "with vector paths withheld, the path in use falls back to scalar");
    for (int i = FP_ISA_AVX2; i < FP_ISA_COUNT; i++) {
        fp_error_clear();
        int rc = fp_numfmt_set_isa((fp_isa)i);
        tap_ok(rc == FP_EUNAVAIL && fp_error_message()[0] && !fp_numfmt_isa_supported((fp_isa)i) &&
                   fp_numfmt_isa() == FP_ISA_SCALAR,
               "withheld %s: fp_numfmt_set_isa -> FP_EUNAVAIL (\"%s\"), path unchanged", fp_isa_name((fp_isa)i),
               fp_error_message());
    }
    fp_numfmt_limit_isa_for_tests(FP_ISA_COUNT);
    tap_ok(fp_numfmt_isa_supported(best), "lifting the limit makes %s available again", fp_isa_name(best));
}

int main(void)
{
    fill_sources();
    test_selection();
    for (int i = 0; i < FP_ISA_COUNT; i++)
        test_isa((fp_isa)i);
    test_null();
    return tap_done();
}
