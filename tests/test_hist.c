/* test_hist.c — TAP tests of the exponent histogram (hist.h, hist.c): every class of every format at
 * its exact boundaries and their float neighbours, binade placement, specials, amax/min/mean, merge,
 * chunking, bad arguments, every vectorised kernel bit-identical to the scalar one, and the 16-bit
 * inputs (fp_hist_add_f16 / _bf16) identical to widening + fp_hist_add, their AVX-512 fp16 kernel
 * against the reference path (counts exact). */
#include "hist.h"
#include "error.h"
#include "formats.h"
#include "numfmt.h"
#include "hist_ref.h"
#include "tap.h"
#include "testutil.h"
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Internal hook of lib/hist.c (not in hist.h): 0 scalar, 1 AVX2, 2 AVX-512, -1 best; FP_EUNAVAIL
 * when the CPU lacks the kernel. */

static const char *const kernel_names[] = {"scalar", "avx2", "avx512"};
#define N_KERNELS 3

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rng_next(void) { return tu_splitmix64(&rng_state); }

/* A value of a random kind: random bits, log-uniform over the fp32 range, near 1, zero, special. */
static float random_value(void)
{
    uint64_t r = rng_next();
    switch (r % 8) {
    case 0: case 1:
        return tu_u2f((uint32_t)(r >> 32));
    case 2: case 3:                                        /* any binade, random mantissa */
        return ldexpf(1.0f + (float)((r >> 40) & 0xFFFFFF) * 0x1p-24f, (int)((r >> 8) % 280) - 152) *
               ((r >> 20) & 1 ? -1.0f : 1.0f);
    case 4: case 5:
        return (float)((double)(int32_t)(r >> 32) * 0x1p-29);
    case 6:
        return (r >> 8) & 1 ? 0.0f : -0.0f;
    default: {
        static const float sp[] = {INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f, FLT_MAX,
                                   -FLT_MAX, 65504.0f, 65520.0f, 448.0f, 464.0f, 57344.0f, 61440.0f};
        return sp[(r >> 8) % (sizeof sp / sizeof sp[0])];
    }
    }
}

/* Every field equal (sum_abs within rel_tol); one TAP line. */
static int same_hist(const fp_hist_t *got, const fp_hist_t *want, double rel_tol, const char *what)
{
    int ok = tu_hist_same(got, want, rel_tol);
    if (!tap_ok(ok, "%s", what))
        tu_hist_diag(got, want);
    return ok;
}

/* ---- class boundaries, literally as the formats are documented ---- */

typedef struct {
    fp_format fmt;
    float v;
    fp_value_class want;
    const char *label;
} boundary_t;

static void test_boundaries(void)
{
    const float inf = INFINITY;
    const boundary_t b[] = {
        {FP_FMT_FP16, 0x1p-25f, FP_CLASS_UNDERFLOW, "2^-25"},
        {FP_FMT_FP16, nextafterf(0x1p-25f, 0.0f), FP_CLASS_UNDERFLOW, "below 2^-25"},
        {FP_FMT_FP16, nextafterf(0x1p-25f, 1.0f), FP_CLASS_SUBNORMAL, "above 2^-25"},
        {FP_FMT_FP16, 0x1p-24f, FP_CLASS_SUBNORMAL, "2^-24"},
        {FP_FMT_FP16, nextafterf(0x1p-14f, 0.0f), FP_CLASS_SUBNORMAL, "below 2^-14"},
        {FP_FMT_FP16, 0x1p-14f, FP_CLASS_NORMAL, "2^-14"},
        {FP_FMT_FP16, 65504.0f, FP_CLASS_NORMAL, "65504"},
        {FP_FMT_FP16, nextafterf(65504.0f, inf), FP_CLASS_ROUND_TO_MAX, "above 65504"},
        {FP_FMT_FP16, nextafterf(65520.0f, 0.0f), FP_CLASS_ROUND_TO_MAX, "below 65520"},
        {FP_FMT_FP16, 65520.0f, FP_CLASS_OVERFLOW, "65520"},
        {FP_FMT_FP16, nextafterf(65520.0f, inf), FP_CLASS_OVERFLOW, "above 65520"},

        {FP_FMT_BF16, 0x1p-134f, FP_CLASS_UNDERFLOW, "2^-134"},
        {FP_FMT_BF16, nextafterf(0x1p-134f, 1.0f), FP_CLASS_SUBNORMAL, "above 2^-134"},
        {FP_FMT_BF16, 0x1p-133f, FP_CLASS_SUBNORMAL, "2^-133"},
        {FP_FMT_BF16, nextafterf(0x1p-126f, 0.0f), FP_CLASS_SUBNORMAL, "below 2^-126"},
        {FP_FMT_BF16, 0x1p-126f, FP_CLASS_NORMAL, "2^-126"},
        {FP_FMT_BF16, 0x1.FEp127f, FP_CLASS_NORMAL, "bf16 max 0x1.FEp127"},
        {FP_FMT_BF16, nextafterf(0x1.FEp127f, inf), FP_CLASS_ROUND_TO_MAX, "above bf16 max"},
        {FP_FMT_BF16, nextafterf(0x1.FFp127f, 0.0f), FP_CLASS_ROUND_TO_MAX, "below 0x1.FFp127"},
        {FP_FMT_BF16, 0x1.FFp127f, FP_CLASS_OVERFLOW, "0x1.FFp127"},
        {FP_FMT_BF16, FLT_MAX, FP_CLASS_OVERFLOW, "FLT_MAX"},

        {FP_FMT_E4M3, 0x1p-10f, FP_CLASS_UNDERFLOW, "2^-10"},
        {FP_FMT_E4M3, nextafterf(0x1p-10f, 1.0f), FP_CLASS_SUBNORMAL, "above 2^-10"},
        {FP_FMT_E4M3, 0x1p-9f, FP_CLASS_SUBNORMAL, "2^-9"},
        {FP_FMT_E4M3, nextafterf(0x1p-6f, 0.0f), FP_CLASS_SUBNORMAL, "below 2^-6"},
        {FP_FMT_E4M3, 0x1p-6f, FP_CLASS_NORMAL, "2^-6"},
        {FP_FMT_E4M3, 448.0f, FP_CLASS_NORMAL, "448"},
        {FP_FMT_E4M3, nextafterf(448.0f, inf), FP_CLASS_ROUND_TO_MAX, "above 448"},
        {FP_FMT_E4M3, 464.0f, FP_CLASS_ROUND_TO_MAX, "464 (tie rounds to 448)"},
        {FP_FMT_E4M3, nextafterf(464.0f, inf), FP_CLASS_OVERFLOW, "above 464"},

        {FP_FMT_E5M2, 0x1p-17f, FP_CLASS_UNDERFLOW, "2^-17"},
        {FP_FMT_E5M2, nextafterf(0x1p-17f, 1.0f), FP_CLASS_SUBNORMAL, "above 2^-17"},
        {FP_FMT_E5M2, 0x1p-16f, FP_CLASS_SUBNORMAL, "2^-16"},
        {FP_FMT_E5M2, nextafterf(0x1p-14f, 0.0f), FP_CLASS_SUBNORMAL, "below 2^-14"},
        {FP_FMT_E5M2, 0x1p-14f, FP_CLASS_NORMAL, "2^-14"},
        {FP_FMT_E5M2, 57344.0f, FP_CLASS_NORMAL, "57344"},
        {FP_FMT_E5M2, nextafterf(57344.0f, inf), FP_CLASS_ROUND_TO_MAX, "above 57344"},
        {FP_FMT_E5M2, nextafterf(61440.0f, 0.0f), FP_CLASS_ROUND_TO_MAX, "below 61440"},
        {FP_FMT_E5M2, 61440.0f, FP_CLASS_OVERFLOW, "61440"},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        /* both signs, scalar path (2 values) and a vector kernel (a run of 37 copies) */
        float two[2] = {b[i].v, -b[i].v};
        float many[37];
        for (int j = 0; j < 37; j++)
            many[j] = j % 2 ? -b[i].v : b[i].v;
        fp_hist_t h1, h2;
        fp_hist_init(&h1);
        fp_hist_init(&h2);
        fp_hist_add(&h1, two, 2);
        fp_hist_add_kernel(&h2, many, 37, -1);
        int ok = 1;
        for (int c = 0; c < FP_CLASS_COUNT; c++) {
            ok &= h1.cls[b[i].fmt][c] == (c == (int)b[i].want ? 2u : 0u);
            ok &= h2.cls[b[i].fmt][c] == (c == (int)b[i].want ? 37u : 0u);
        }
        if (!tap_ok(ok, "%s: %s (%a) is %s", fp_format_info(b[i].fmt)->name, b[i].label, (double)b[i].v,
                    fp_value_class_name(b[i].want)))
            for (int c = 0; c < FP_CLASS_COUNT; c++)
                tap_diag("  %s: %llu", fp_value_class_name((fp_value_class)c),
                         (unsigned long long)h1.cls[b[i].fmt][c]);
    }
}

/* Boundaries taken from fp_format_info (what the implementation must use), each with its float
 * neighbours, checked for all four formats against the double-comparison reference. */
static void test_boundaries_vs_reference(void)
{
    float v[FP_FMT_COUNT * 5 * 5 * 2 + 16];
    size_t n = 0;
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        const fp_format_info_t *fi = fp_format_info((fp_format)f);
        float edges[5] = {fi->min_subnormal / 2.0f, fi->min_subnormal, fi->min_normal, fi->max_finite,
                          fi->overflow_at};
        for (int e = 0; e < 5; e++) {
            float lo2 = nextafterf(nextafterf(edges[e], 0.0f), 0.0f);
            float hi2 = nextafterf(nextafterf(edges[e], INFINITY), INFINITY);
            float near[5] = {lo2, nextafterf(edges[e], 0.0f), edges[e], nextafterf(edges[e], INFINITY), hi2};
            for (int k = 0; k < 5; k++) {
                v[n++] = near[k];
                v[n++] = -near[k];
            }
        }
    }
    const float extra[] = {0x1p-149f, 0x1p-148f, 3 * 0x1p-149f, 0x1p-127f, nextafterf(0x1p-126f, 0.0f),
                           FLT_MAX, -FLT_MAX, 1.0f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        v[n++] = extra[i];
    fp_hist_t want;
    tu_ref_hist(&want, v, n);
    for (int k = 0; k < N_KERNELS; k++) {
        fp_hist_t h;
        fp_hist_init(&h);
        if (fp_hist_add_kernel(&h, v, n, k) == FP_EUNAVAIL) {
            tap_skip(1, "kernel not available on this CPU");
            continue;
        }
        same_hist(&h, &want, 1e-12, kernel_names[k]);
    }
    fp_hist_t h;
    fp_hist_init(&h);
    fp_hist_add(&h, v, n);
    same_hist(&h, &want, 1e-12, "boundary values and neighbours of every format match the reference");
}

/* Where single values land. */
static void test_binades(void)
{
    const struct {
        float v;
        int e;
    } t[] = {
        {1.0f, 0}, {1.99f, 0}, {nextafterf(2.0f, 0.0f), 0}, {2.0f, 1}, {0.5f, -1},
        {nextafterf(1.0f, 0.0f), -1}, {-3.0f, 1}, {0x1p-149f, -149}, {3 * 0x1p-149f, -148},
        {0x1p-127f, -127}, {nextafterf(0x1p-126f, 0.0f), -127}, {0x1p-126f, -126}, {FLT_MAX, 127},
        {-0x1p127f, 127}, {65504.0f, 15}, {0x1p-24f, -24},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        fp_hist_t h;
        fp_hist_init(&h);
        fp_hist_add(&h, &t[i].v, 1);
        uint64_t want_total = 1;
        /* and 300 copies through the default (vectorised) path */
        float many[300];
        for (int j = 0; j < 300; j++)
            many[j] = t[i].v;
        fp_hist_t hv;
        fp_hist_init(&hv);
        fp_hist_add(&hv, many, 300);
        int idx = t[i].e - FP_HIST_EXP_MIN;
        int ok = h.binade[idx] == want_total && fp_hist_finite_nonzero(&h) == 1 && hv.binade[idx] == 300 &&
                 fp_hist_finite_nonzero(&hv) == 300;
        tap_ok(ok, "%a lands in binade %d", (double)t[i].v, t[i].e);
    }
}

static void test_specials(void)
{
    const float x[] = {0.0f, -0.0f, INFINITY, -INFINITY, INFINITY, NAN, -NAN, tu_u2f(0x7F800001u),
                       tu_u2f(0xFFFFFFFFu), 1.0f};
    fp_hist_t h;
    fp_hist_init(&h);
    tap_is_int(fp_hist_add(&h, x, sizeof x / sizeof x[0]), FP_OK, "specials: add");
    int ok = h.count == 10 && h.zero == 2 && h.pos_inf == 2 && h.neg_inf == 1 && h.nan == 4 &&
             fp_hist_finite_nonzero(&h) == 1 && h.amax == 1.0f && h.min_nonzero == 1.0f;
    for (int f = 0; f < FP_FMT_COUNT; f++)
        ok &= h.cls[f][FP_CLASS_NORMAL] == 1 && h.cls[f][FP_CLASS_OVERFLOW] == 0 &&
              h.cls[f][FP_CLASS_UNDERFLOW] == 0;
    tap_ok(ok, "specials: +-0 are zeros, +-Inf and NaNs (any payload, sign) counted apart, in no class");
    tap_is_double(fp_hist_mean_abs(&h), 1.0 / 3.0, 0.0, 1e-15, "specials: mean |x| over finite values only");
}

static void test_stats(void)
{
    const float x[] = {0.0f, -3.0f, 0.5f, NAN, INFINITY, -0.0f, 0x1p-149f, -INFINITY};
    fp_hist_t h;
    fp_hist_init(&h);
    fp_hist_add(&h, x, sizeof x / sizeof x[0]);
    tap_is_double(h.amax, 3.0, 0.0, 0.0, "amax is the max finite |x| (Inf ignored)");
    tap_is_double(h.min_nonzero, 0x1p-149, 0.0, 0.0, "min_nonzero is the smallest nonzero |x| (a subnormal)");
    tap_is_double(h.sum_abs, 3.5 + 0x1p-149, 0.0, 0.0, "sum_abs adds finite |x|");
    tap_is_double(fp_hist_mean_abs(&h), (3.5 + 0x1p-149) / 5.0, 0.0, 1e-15, "mean |x| over the 5 finite values");

    const float zeros[] = {0.0f, -0.0f, 0.0f};
    fp_hist_init(&h);
    fp_hist_add(&h, zeros, 3);
    tap_ok(h.amax == 0.0f && h.min_nonzero == 0.0f && fp_hist_mean_abs(&h) == 0.0 && h.zero == 3,
           "only zeros: amax 0, min_nonzero 0, mean 0");
    const float nans[] = {NAN, INFINITY};
    fp_hist_init(&h);
    fp_hist_add(&h, nans, 2);
    tap_ok(h.amax == 0.0f && h.min_nonzero == 0.0f && fp_hist_mean_abs(&h) == 0.0 && h.sum_abs == 0.0,
           "no finite values: amax 0, min_nonzero 0, mean 0");
    fp_hist_init(&h);
    tap_is_double(fp_hist_mean_abs(&h), 0.0, 0.0, 0.0, "empty histogram: mean 0");

    /* a larger array through the vector path: amax/min/mean against a direct computation */
    size_t n = 1001;
    float *v = malloc(n * sizeof *v);
    double s = 0.0;
    float mx = 0.0f, mn = INFINITY;
    for (size_t i = 0; i < n; i++) {
        v[i] = (float)((double)(int32_t)(rng_next() >> 32) * 0x1p-40);
        float a = fabsf(v[i]);
        s += a;
        if (a > mx)
            mx = a;
        if (a != 0.0f && a < mn)
            mn = a;
    }
    fp_hist_init(&h);
    fp_hist_add(&h, v, n);
    tap_ok(h.amax == mx && h.min_nonzero == mn, "amax and min_nonzero over 1001 values");
    tap_is_double(fp_hist_mean_abs(&h), s / (double)n, 0.0, 1e-12, "mean |x| over 1001 values (rel 1e-12)");
    free(v);
}

static void test_args(void)
{
    fp_hist_t h, before;
    fp_hist_init(&h);
    const float one = 1.0f;
    fp_hist_add(&h, &one, 1);
    before = h;
    fp_error_clear();
    tap_is_int(fp_hist_add(&h, NULL, 0), FP_OK, "NULL array with n == 0 is fine");
    tap_is_int(fp_hist_add(&h, &one, 0), FP_OK, "n == 0 is fine");
    tap_ok(memcmp(&h, &before, sizeof h) == 0, "n == 0 leaves the histogram alone");
    tap_is_int(fp_hist_add(&h, NULL, 5), FP_EINVAL, "NULL array with n > 0: FP_EINVAL");
    tap_ok(fp_error_message()[0] != '\0', "... with a message: %s", fp_error_message());
    tap_ok(memcmp(&h, &before, sizeof h) == 0, "... and the histogram unchanged");
    tap_is_int(fp_hist_add(NULL, &one, 1), FP_EINVAL, "NULL histogram: FP_EINVAL");
    tap_is_int(fp_hist_add_kernel(&h, &one, 1, 99), FP_EUNAVAIL, "unknown kernel: FP_EUNAVAIL");
    fp_hist_init(NULL);
    fp_hist_merge(NULL, &h);
    fp_hist_merge(&h, NULL);
    tap_ok(fp_hist_finite_nonzero(NULL) == 0 && fp_hist_mean_abs(NULL) == 0.0,
           "NULL histogram elsewhere: no crash, zeros");
    int names_ok = 1;
    const char *want[] = {"normal", "subnormal", "underflow", "round_to_max", "overflow"};
    for (int c = 0; c < FP_CLASS_COUNT; c++)
        names_ok &= strcmp(fp_value_class_name((fp_value_class)c), want[c]) == 0;
    tap_ok(names_ok && fp_value_class_name(FP_CLASS_COUNT) != NULL, "class names");
    fp_hist_t z;
    memset(&z, 0xAB, sizeof z);
    fp_hist_init(&z);
    fp_hist_t zz;
    memset(&zz, 0, sizeof zz);
    tap_ok(memcmp(&z, &zz, sizeof z) == 0, "fp_hist_init zeroes everything");
}

static float *random_array(size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = random_value();
    return v;
}

static void test_reference_random(void)
{
    size_t n = 20000;
    float *v = random_array(n);
    fp_hist_t want, h;
    tu_ref_hist(&want, v, n);
    fp_hist_init(&h);
    fp_hist_add(&h, v, n);
    same_hist(&h, &want, 1e-9, "20000 random values of every kind match the reference (sum rel 1e-9)");
    uint64_t fnz = fp_hist_finite_nonzero(&h);
    int ok = h.count == h.zero + h.nan + h.pos_inf + h.neg_inf + fnz;
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        uint64_t s = 0;
        for (int c = 0; c < FP_CLASS_COUNT; c++)
            s += h.cls[f][c];
        ok &= s == fnz;
    }
    tap_ok(ok, "counts add up: count = specials + binades, each format's classes = finite nonzero");
    free(v);
}

static void test_merge_and_chunks(void)
{
    size_t n = 5003;
    float *v = random_array(n);
    fp_hist_t all, a, b, chunks;
    fp_hist_init(&all);
    fp_hist_add(&all, v, n);

    fp_hist_init(&a);
    fp_hist_init(&b);
    fp_hist_add(&a, v, 1234);
    fp_hist_add(&b, v + 1234, n - 1234);
    fp_hist_merge(&a, &b);
    same_hist(&a, &all, 1e-12, "merge of two halves == add of the whole (sum rel 1e-12)");

    fp_hist_t e;
    fp_hist_init(&e);
    fp_hist_merge(&e, &all);
    same_hist(&e, &all, 0.0, "empty += h == h");
    fp_hist_t e2;
    fp_hist_init(&e2);
    fp_hist_t c = all;
    fp_hist_merge(&c, &e2);
    same_hist(&c, &all, 0.0, "h += empty == h");

    fp_hist_init(&chunks);
    for (size_t i = 0; i < n;) {
        size_t len = 1 + rng_next() % 700;
        if (len > n - i)
            len = n - i;
        fp_hist_add(&chunks, v + i, len);
        i += len;
    }
    same_hist(&chunks, &all, 1e-12, "adding in random chunks == adding at once (sum rel 1e-12)");

    /* min_nonzero when one side has none */
    const float z[] = {0.0f, NAN};
    const float s[] = {0.25f, -8.0f};
    fp_hist_t hz, hs;
    fp_hist_init(&hz);
    fp_hist_init(&hs);
    fp_hist_add(&hz, z, 2);
    fp_hist_add(&hs, s, 2);
    fp_hist_t m1 = hz, m2 = hs;
    fp_hist_merge(&m1, &hs);
    fp_hist_merge(&m2, &hz);
    tap_ok(m1.min_nonzero == 0.25f && m2.min_nonzero == 0.25f && m1.amax == 8.0f && m2.amax == 8.0f &&
               m1.count == 4 && m1.nan == 1 && m1.zero == 1,
           "merge: min_nonzero/amax combine when one side has no nonzero value");
    free(v);
}

/* Every vector kernel gives the scalar kernel's histogram bit for bit, at every offset and length. */
static void test_kernels_identical(void)
{
    size_t cap = 5000;
    float *buf = random_array(cap);
    /* plus stretches of ordinary values so the fast (non-special) vector path runs too */
    for (size_t i = 2000; i < 4000; i++)
        buf[i] = (float)((double)(int32_t)(rng_next() >> 32) * 0x1p-31) * (i % 5 ? 1.0f : 0.0f);
    const size_t lens[] = {1, 2, 15, 16, 17, 31, 33, 63, 65, 255, 257, 1001, 2047, 4093};
    for (int k = 1; k < N_KERNELS; k++) {
        fp_hist_t probe;
        fp_hist_init(&probe);
        if (fp_hist_add_kernel(&probe, buf, 1, k) == FP_EUNAVAIL) {
            tap_skip(1, "kernel not available on this CPU");
            continue;
        }
        int ok = 1, cases = 0;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (size_t off = 0; off < 16; off++) {
                size_t len = lens[li];
                const float *x = buf + off + (li * 211) % 800;
                fp_hist_t hs, hv;
                fp_hist_init(&hs);
                fp_hist_init(&hv);
                fp_hist_add_kernel(&hs, x, len, 0);
                fp_hist_add_kernel(&hv, x, len, k);
                cases++;
                if (memcmp(&hs, &hv, sizeof hs) != 0) {
                    if (ok)
                        tap_diag("  first difference: length %zu, offset %zu", len, off);
                    ok = 0;
                }
            }
        tap_ok(ok, "%s == scalar, bit for bit, on %d arrays (odd lengths, offsets 0..15)", kernel_names[k],
               cases);
    }
    free(buf);
}

/* Longer than one kernel block (2^24 values): the block seams keep counts and sum lanes right. */
static void test_long_array(void)
{
    size_t n = ((size_t)1 << 24) + 37;
    float *v = malloc(n * sizeof *v);
    if (!v) {
        tap_skip(N_KERNELS, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(int)(i % 1999) - 999.0f;
    v[n - 1] = 0x1p-140f;
    v[n / 2] = NAN;
    fp_hist_t hs;
    fp_hist_init(&hs);
    fp_hist_add_kernel(&hs, v, n, 0);
    tap_ok(hs.count == n && hs.nan == 1 && hs.min_nonzero == 0x1p-140f && hs.amax == 999.0f,
           "2^24+37 values: count, nan, min, amax");
    for (int k = 1; k < N_KERNELS; k++) {
        fp_hist_t hv;
        fp_hist_init(&hv);
        if (fp_hist_add_kernel(&hv, v, n, k) == FP_EUNAVAIL) {
            tap_skip(1, "kernel not available on this CPU");
            continue;
        }
        tap_ok(memcmp(&hs, &hv, sizeof hs) == 0, "2^24+37 values: %s == scalar, bit for bit", kernel_names[k]);
    }
    free(v);
}

/* fp_hist_add_f16 / _bf16 against widening + fp_hist_add: every count, amax and min exact, sum_abs
 * within 1e-9 relative (the 16-bit path sums exact per-binade integer sums; fp_hist_add sums in
 * double lanes), on both paths (count table for n >= 65536, widened chunks below), with every bit
 * pattern, ReLU-like data (half zeros), Inf of either sign alone, and accumulation into a non-empty
 * histogram. */
static void check16(int bf, const uint16_t *x, size_t n, const char *what)
{
    float *w = malloc((n ? n : 1) * sizeof *w);
    for (size_t i = 0; i < n; i++)
        w[i] = bf ? fp_bf16_to_f32(x[i]) : fp_f16_to_f32(x[i]);
    fp_hist_t got, want;
    fp_hist_init(&got);
    fp_hist_init(&want);
    int rc = bf ? fp_hist_add_bf16(&got, x, n) : fp_hist_add_f16(&got, x, n);
    fp_hist_add(&want, w, n);
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %s, n=%zu, rc %d", bf ? "bf16" : "f16", what, n, rc);
    same_hist(&got, &want, 1e-9, msg);
    free(w);
}

static void test_16bit(void)
{
    size_t big = 3 * 65536 + 5;
    uint16_t *x = malloc(big * sizeof *x);
    for (int bf = 0; bf <= 1; bf++) {
        for (size_t i = 0; i < big; i++)                    /* every pattern, three times and a bit */
            x[i] = (uint16_t)(i * 40503u);
        check16(bf, x, big, "every bit pattern");
        check16(bf, x, 4099, "random patterns (small path)");
        for (size_t i = 0; i < big; i++) {                  /* ReLU-like, finite, no specials */
            uint64_t r = rng_next();
            float v = (float)((double)(int32_t)(r >> 32) * 0x1p-31) * ldexpf(1.0f, (int)((r >> 8) % 40) - 20);
            uint16_t q = bf ? fp_f32_to_bf16(v) : fp_f32_to_f16(v);
            x[i] = (r & 1) ? q : 0;
            if ((x[i] & 0x7FFF) >= (bf ? 0x7F80 : 0x7C00))
                x[i] = 0;
        }
        check16(bf, x, big, "ReLU-like values");
        check16(bf, x, 65536, "ReLU-like values at the path threshold");
        check16(bf, x, 65535, "ReLU-like values just below it");
        check16(bf, x, 3, "three values");
        uint16_t ninf = bf ? 0xFF80 : 0xFC00, pinf = bf ? 0x7F80 : 0x7C00;
        x[77] = ninf;
        check16(bf, x, big, "with one -Inf");
        x[77] = pinf;
        x[78] = bf ? 0x7FC1 : 0xFE01;                       /* a NaN */
        check16(bf, x, big, "with +Inf and a NaN");
        for (size_t i = 0; i < big; i++)
            x[i] = 0x8000;                                   /* only -0 */
        check16(bf, x, big, "all -0");
        /* accumulating into a non-empty histogram: amax / min combine */
        fp_hist_t a, b;
        fp_hist_init(&a);
        fp_hist_init(&b);
        float one = 3.0f;
        fp_hist_add(&a, &one, 1);
        fp_hist_add(&b, &one, 1);
        for (size_t i = 0; i < big; i++)
            x[i] = (uint16_t)(bf ? 0x3C00 + (i % 7) : 0x2C00 + (i % 7));
        float *w = malloc(big * sizeof *w);
        for (size_t i = 0; i < big; i++)
            w[i] = bf ? fp_bf16_to_f32(x[i]) : fp_f16_to_f32(x[i]);
        (bf ? fp_hist_add_bf16 : fp_hist_add_f16)(&a, x, big);
        fp_hist_add(&b, w, big);
        same_hist(&a, &b, 1e-12, bf ? "bf16: added to a non-empty histogram" : "f16: added to a non-empty histogram");
        free(w);
    }
    fp_hist_t h;
    fp_hist_init(&h);
    tap_is_int(fp_hist_add_f16(NULL, x, 1), FP_EINVAL, "f16: NULL histogram");
    tap_is_int(fp_hist_add_bf16(&h, NULL, 1), FP_EINVAL, "bf16: NULL array with n > 0");
    tap_is_int(fp_hist_add_f16(&h, NULL, 0), FP_OK, "f16: n == 0 is a no-op");
    tap_ok(h.count == 0, "... nothing counted");
    free(x);
    fp_hist_thread_release();
}

/* The fp16 AVX-512 kernel (fp_hist_add16_kernel 2) against the reference path (0: count table /
 * widened chunks) and against fp_hist_add on the widened array. Tolerances: every count, amax and
 * min_nonzero exact (0) against both; sum_abs bit for bit against fp_hist_add (the kernel sums in
 * its lanes, in its order), within 1e-9 relative against the reference (exact per-binade sums).
 * Sizes around the 32-value step, VEC_MIN_N (256), 4096 and 65536, unaligned starts; every bit
 * pattern, ReLU-like data, NaN / Inf / subnormal / zero of both signs in random places. Skips where
 * the CPU has no such kernel. */
static void check16_kernel(const uint16_t *x, size_t n, const char *what)
{
    fp_hist_t fast, ref, wide;
    fp_hist_init(&fast);
    fp_hist_init(&ref);
    fp_hist_init(&wide);
    float *w = malloc((n ? n : 1) * sizeof *w);
    for (size_t i = 0; i < n; i++)
        w[i] = fp_f16_to_f32(x[i]);
    int rc = fp_hist_add16_kernel(&fast, x, n, 0, 2);
    int rc0 = fp_hist_add16_kernel(&ref, x, n, 0, 0);
    fp_hist_add(&wide, w, n);
    char msg[200];
    snprintf(msg, sizeof msg, "f16 kernel vs reference path: %s, n=%zu (rc %d, %d; counts exact, sum rel 1e-9)",
             what, n, rc, rc0);
    same_hist(&fast, &ref, 1e-9, msg);
    tap_ok(rc == FP_OK && memcmp(&fast, &wide, sizeof fast) == 0,
           "f16 kernel == fp_hist_add of the widened array, bit for bit: %s, n=%zu", what, n);
    free(w);
}

static void test_16bit_kernel(void)
{
    fp_hist_t h;
    fp_hist_init(&h);
    uint16_t one = 0x3C00;
    tap_is_int(fp_hist_add16_kernel(&h, &one, 1, 0, 7), FP_EINVAL, "16-bit: kernel 7 does not exist");
    tap_is_int(fp_hist_add16_kernel(&h, &one, 1, 1, 2), FP_EUNAVAIL, "bf16: no AVX-512 16-bit kernel");
    if (fp_hist_add16_kernel(&h, &one, 1, 0, 2) == FP_EUNAVAIL) {
        tap_skip(1, "no AVX-512 BW / BMI2 on this CPU: the fp16 kernel is not run");
        return;
    }
    size_t big = 3 * 65536 + 45;
    uint16_t *buf = malloc((big + 8) * sizeof *buf);
    static const size_t sizes[] = {0, 1, 31, 32, 33, 63, 255, 256, 257, 300, 4095, 4099, 65535, 65536, 65537};
    for (size_t i = 0; i < big + 8; i++)                 /* every pattern, both signs */
        buf[i] = (uint16_t)(i * 40503u + 7);
    check16_kernel(buf, big, "every bit pattern");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t off = 0; off < 3; off += 2)
            check16_kernel(buf + off, sizes[s], off ? "every bit pattern, start + 2 bytes * 2" : "every bit pattern");
    /* ReLU-like, wide magnitude range (fp16 subnormals to the top fields), half zeros of either sign */
    for (size_t i = 0; i < big + 8; i++) {
        uint64_t r = rng_next();
        float v = (float)((double)(int32_t)(r >> 32) * 0x1p-31) * ldexpf(1.0f, (int)((r >> 8) % 44) - 28);
        uint16_t q = fp_f32_to_f16(v);
        if ((q & 0x7FFF) >= 0x7C00)
            q = 0x3C00;
        buf[i] = (r & 1) ? q : (uint16_t)((r & 2) << 14);
    }
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        check16_kernel(buf + 1, sizes[s], "ReLU-like, wide range, start + 2 bytes");
    check16_kernel(buf, big, "ReLU-like, wide range");
    /* narrow activations ([-2, 2], no subnormals, no slow field): the all-fast steps */
    for (size_t i = 0; i < big + 8; i++) {
        uint64_t r = rng_next();
        buf[i] = (r & 1) ? fp_f32_to_f16((float)((double)(int32_t)(r >> 32) * 0x1p-30)) : 0;
    }
    check16_kernel(buf, big, "activations in [-2, 2], half zeros");
    /* underflowing gradients: magnitudes 2^-27 .. 2^7, no slow field, so subnormal lanes are counted
     * in the fast step (their binades and the field-0 thresholds apart); every subnormal pattern of
     * both signs among them */
    for (size_t i = 0; i < big + 8; i++) {
        uint64_t r = rng_next();
        float v = (float)((double)(int32_t)(r >> 32) * 0x1p-31) * ldexpf(1.0f, (int)((r >> 8) % 35) - 27);
        buf[i] = fp_f32_to_f16(v);
    }
    for (uint32_t q = 1; q < 0x400; q++)
        buf[rng_next() % big] = (uint16_t)(q | (q & 1) << 15);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        check16_kernel(buf + 1, sizes[s], "underflowing gradients, start + 2 bytes");
    check16_kernel(buf, big, "underflowing gradients: subnormal lanes without a slow field");
    /* specials sprinkled into them */
    static const uint16_t specials[] = {0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x0001, 0x8001, 0x03FF,
                                        0x8000, 0x7BFF, 0xFBFF, 0x0400, 0x1400, 0x5F00, 0x5F40, 0x7B00, 0x7B80};
    for (size_t k = 0; k < 400; k++)
        buf[rng_next() % big] = specials[k % (sizeof specials / sizeof specials[0])];
    check16_kernel(buf, big, "activations with NaN, +-Inf, subnormals, boundary patterns");
    for (size_t i = 0; i < big; i++)
        buf[i] = (uint16_t)(0xFC00 + (i & 1) * 0x8000);   /* -Inf and +Inf only: no finite value */
    check16_kernel(buf, 4096, "only +-Inf");
    for (size_t i = 0; i < big; i++)
        buf[i] = (uint16_t)((i & 1) << 15);                 /* +0 and -0 only */
    check16_kernel(buf, 4096, "only +-0");
    free(buf);
    /* more than one block (BLOCK = 2^24 values per kernel call) */
    size_t huge = ((size_t)1 << 24) + 45;
    uint16_t *hx = malloc(huge * sizeof *hx);
    if (hx) {
        for (size_t i = 0; i < huge; i++)
            hx[i] = (uint16_t)(rng_next() & 0xFFFF);
        check16_kernel(hx, huge, "2^24 + 45 random patterns");
        free(hx);
    } else {
        tap_skip(2, "out of memory for 2^24 + 45 values");
    }
}

int main(void)
{
    test_boundaries();
    test_boundaries_vs_reference();
    test_binades();
    test_specials();
    test_stats();
    test_args();
    test_reference_random();
    test_merge_and_chunks();
    test_kernels_identical();
    test_long_array();
    test_16bit();
    test_16bit_kernel();
    return tap_done();
}
