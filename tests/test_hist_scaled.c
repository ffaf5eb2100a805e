/* test_hist_scaled.c — TAP tests of fp_hist_add_scaled (hist.h) against its definition, multiply then
 * fp_hist_add, field for field with no tolerance, for every kernel; and of the vector kernels' fast path
 * (exponent-histogram thresholds, exact powers of two, the gate) against the scalar kernel and an
 * independent double-compare reference. */
#include "hist.h"
#include "error.h"
#include "formats.h"
#include "hist_ref.h"
#include "tap.h"
#include "testutil.h"
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kernel_names[] = {"scalar", "avx2", "avx512"};
#define N_KERNELS 3

static uint64_t rng_state = 0x452821E638D01377ull;

static uint64_t rng_next(void) { return tu_splitmix64(&rng_state); }

/* The definition: fl(x * 2^-k), a correctly rounded float multiply (exact in double, one rounding). */
static float quotient(float x, int k) { return (float)ldexp((double)x, -k); }

/* want += the histogram of x * 2^-k, computed as the definition says. */
static void ref_scaled(fp_hist_t *want, const float *x, size_t n, int k)
{
    float *y = malloc((n ? n : 1) * sizeof *y);
    if (!y) {
        fprintf(stderr, "test_hist_scaled: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        y[i] = quotient(x[i], k);
    fp_hist_add(want, y, n);
    free(y);
}

/* Every field identical (sum_abs too, tolerance 0); on a difference, tells it (diag) and returns 0. */
static int same(const fp_hist_t *got, const fp_hist_t *want, const char *what)
{
    if (tu_hist_same(got, want, 0))
        return 1;
    tap_diag("  %s:", what);
    tu_hist_diag(got, want);
    return 0;
}

static int kernel_available(int k)
{
    fp_hist_t h;
    float one = 1.0f;
    fp_hist_init(&h);
    return fp_hist_add_kernel(&h, &one, 1, k) == FP_OK;
}

/* fp_hist_add_scaled_kernel(x, n, k) == the definition, for kernel kern (prior: what h holds first). */
static int check_scaled(const float *x, size_t n, int k, int kern, const fp_hist_t *prior, const char *what)
{
    fp_hist_t got, want;
    got = want = *prior;
    ref_scaled(&want, x, n, k);
    int rc = kern < 0 ? fp_hist_add_scaled(&got, x, n, k) : fp_hist_add_scaled_kernel(&got, x, n, k, kern);
    if (rc != FP_OK) {
        tap_diag("  %s: rc %d (%s)", what, rc, fp_error_message());
        return 0;
    }
    return same(&got, &want, what);
}

/* ---- value generators ---- */

/* A value of a random kind: any bits, any binade, a multiple of 2^-29, a zero, or a special. */
static float random_value(void)
{
    uint64_t r = rng_next();
    switch (r % 8) {
    case 0:
        return tu_u2f((uint32_t)(r >> 32));
    case 1: case 2:
        return ldexpf(1.0f + (float)((r >> 40) & 0xFFFFFF) * 0x1p-24f, (int)((r >> 8) % 280) - 152) *
               ((r >> 20) & 1 ? -1.0f : 1.0f);
    case 3: case 4:
        return (float)((double)(int32_t)(r >> 32) * 0x1p-29);
    case 5:
        return ldexpf((r >> 9) & 1 ? -1.0f : 1.0f, (int)((r >> 10) % 276) - 149);   /* exact powers of 2 */
    case 6:
        return (r >> 8) & 1 ? 0.0f : -0.0f;
    default: {
        static const float sp[] = {INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f, FLT_MAX,
                                   -FLT_MAX, FLT_MIN, 65504.0f, 65520.0f, 448.0f, 464.0f, 57344.0f,
                                   61440.0f, 0x1p-25f, 0x1p-17f, 0x1p-10f, 256.0f, 0x1.fffffep7f};
        return sp[(r >> 8) % (sizeof sp / sizeof sp[0])];
    }
    }
}

/* Ordinary values (what the fast path sees): normal, |x| in [2^-40, 2^7], a quarter zeros, some
 * exact powers of two. */
static float ordinary_value(void)
{
    uint64_t r = rng_next();
    if ((r & 3) == 0)
        return 0.0f;
    float m = (r >> 2) % 8 == 0 ? 1.0f : 1.0f + (float)((r >> 40) & 0xFFFFFF) * 0x1p-24f;
    return ldexpf(m, (int)((r >> 8) % 48) - 40) * ((r >> 20) & 1 ? -1.0f : 1.0f);
}

/* n values in blocks of 16 of one kind each: all ordinary, ordinary with one random value, or all
 * random — so the vector kernels take each of their paths, and switch between them. */
static void fill_blocks(float *x, size_t n)
{
    for (size_t b = 0; b < n; b += 16) {
        uint64_t kind = rng_next() % 4;
        size_t odd = (size_t)(rng_next() % 16);
        for (size_t j = 0; j < 16 && b + j < n; j++)
            x[b + j] = kind == 3 || (kind == 2 && j == odd) ? random_value() : ordinary_value();
    }
}

/* ---- tests ---- */

static void test_args(void)
{
    fp_hist_t h;
    float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    fp_hist_init(&h);
    tap_is_int(fp_hist_add_scaled(NULL, x, 4, 1), FP_EINVAL, "NULL histogram: FP_EINVAL");
    tap_is_int(fp_hist_add_scaled(&h, NULL, 4, 1), FP_EINVAL, "NULL array with n > 0: FP_EINVAL");
    tap_ok(fp_hist_add_scaled(&h, NULL, 0, 1) == FP_OK && h.count == 0, "NULL array with n == 0: FP_OK, nothing added");
    const int bad[] = {FP_HIST_LOG2_DIV_MAX + 1, -FP_HIST_LOG2_DIV_MAX - 1, INT_MAX, INT_MIN};
    int ok = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok &= fp_hist_add_scaled(&h, x, 4, bad[i]) == FP_EINVAL &&
              fp_hist_add_scaled_kernel(&h, x, 4, bad[i], 0) == FP_EINVAL;
    tap_ok(ok && h.count == 0, "log2_div outside [-%d, %d]: FP_EINVAL, nothing added", FP_HIST_LOG2_DIV_MAX,
           FP_HIST_LOG2_DIV_MAX);
    tap_ok(FP_HIST_LOG2_DIV_MAX >= 150 && fp_hist_add_scaled(&h, x, 4, 150) == FP_OK &&
           fp_hist_add_scaled(&h, x, 4, -150) == FP_OK && fp_hist_add_scaled(&h, x, 4, FP_HIST_LOG2_DIV_MAX) == FP_OK &&
           fp_hist_add_scaled(&h, x, 4, -FP_HIST_LOG2_DIV_MAX) == FP_OK && h.count == 16,
           "log2_div +-150 and +-%d accepted", FP_HIST_LOG2_DIV_MAX);
    tap_is_int(fp_hist_add_scaled_kernel(&h, x, 4, 3, 7), FP_EUNAVAIL, "unknown kernel: FP_EUNAVAIL");
}

/* The reference's quotient is the float multiply where 2^-k is a float. */
static void test_reference_is_multiply(void)
{
    int ok = 1;
    for (int i = 0; i < 200000 && ok; i++) {
        float x = random_value();
        int k = (int)(rng_next() % 253) - 126;
        float a = quotient(x, k), b = x * ldexpf(1.0f, -k);
        ok = tu_f2u(a) == tu_f2u(b) || (isnan(a) && isnan(b));
        if (!ok)
            tap_diag("  x %a k %d: %a vs %a", x, k, a, b);
    }
    tap_ok(ok, "reference quotient == float multiply by 2^-k for |k| <= 126 (200000 random values)");
}

static void test_zero_shift(void)
{
    size_t n = 3000;
    float *x = malloc(n * sizeof *x);
    fill_blocks(x, n);
    for (int kern = -1; kern < N_KERNELS; kern++) {
        if (kern >= 0 && !kernel_available(kern)) {
            tap_skip(1, "kernel not available on this CPU");
            continue;
        }
        int ok = 1;
        for (size_t len = 0; len <= n && ok; len += len < 40 ? 1 : 377) {
            fp_hist_t a, b;
            fp_hist_init(&a);
            fp_hist_init(&b);
            if (kern < 0) {
                fp_hist_add_scaled(&a, x + 1, len ? len - 1 : 0, 0);
                fp_hist_add(&b, x + 1, len ? len - 1 : 0);
            } else {
                fp_hist_add_scaled_kernel(&a, x + 1, len ? len - 1 : 0, 0, kern);
                fp_hist_add_kernel(&b, x + 1, len ? len - 1 : 0, kern);
            }
            ok = memcmp(&a, &b, sizeof a) == 0;
            if (!ok)
                tap_diag("  first difference at length %zu", len ? len - 1 : 0);
        }
        tap_ok(ok, "log2_div 0 == fp_hist_add bit for bit (%s)", kern < 0 ? "default" : kernel_names[kern]);
    }
    free(x);
}

/* The shifts worth testing: small, format-sized, and near the ends of the fp32 range. */
static const int shifts[] = {1, -1, 2, -2, 3, -5, 7, -8, 10, -12, 14, 15, -15, 16, -16, 17, 24, -24, 25, 31,
                             -32, 40, -48, 64, -64, 100, -100, 120, -120, 125, -125, 126, -126, 127, -127,
                             128, -128, 133, -133, 140, -140, 149, -149, 150, -150, 200, -200, 256, -256,
                             /* -k = a threshold's exponent field: its image on x is an fp32 subnormal */
                             -101, -102, -103, -110, -113, -117, -121, -134, -135, -136, -142, -143};
#define N_SHIFTS (sizeof shifts / sizeof shifts[0])

/* Every format's class boundaries times 2^k and their neighbours, both signs; fp32 range ends and the
 * quotients' rounding edges (2^-150 ties, 2^-149 and FLT_MIN times 2^k, odd and even subnormal ties). */
static size_t boundary_values(float *out, int k)
{
    size_t n = 0;
    float base[64];
    size_t nb = 0;
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        const fp_format_info_t *fi = fp_format_info((fp_format)f);
        const float v[] = {fi->min_subnormal / 2.0f, fi->min_subnormal, fi->min_normal, fi->max_finite,
                           fi->overflow_at};
        for (size_t i = 0; i < 5; i++)
            base[nb++] = (float)ldexp((double)v[i], k);       /* the boundary of x before the division */
    }
    const double edge[] = {0x1p-150, 0x1p-149, 0x1.8p-149, 0x1.4p-148, 0x1.cp-148, 0x1p-126, 0x1.fffffcp-127,
                           0x1.fffffep-127, 0x1p127, 0x1.fffffep127, 0x1p-127, 0x1.000002p-126, 0x1.8p-140};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        base[nb++] = (float)ldexp(edge[i], k);                /* quotient edges */
    base[nb++] = FLT_MAX;
    base[nb++] = 0x1p-149f;
    base[nb++] = FLT_MIN;
    base[nb++] = 1.0f;
    for (size_t i = 0; i < nb; i++) {
        float b = base[i], lo = nextafterf(b, 0.0f), hi = nextafterf(b, INFINITY);
        const float c[] = {b, lo, hi, nextafterf(lo, 0.0f), nextafterf(hi, INFINITY)};
        for (size_t j = 0; j < 5; j++) {
            out[n++] = c[j];
            out[n++] = -c[j];
        }
    }
    const float sp[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
        out[n++] = sp[i];
    return n;
}

static void test_boundaries(void)
{
    float v[1024], arr[2048];
    for (int kern = -1; kern < N_KERNELS; kern++) {
        if (kern >= 0 && !kernel_available(kern)) {
            tap_skip(1, "kernel not available on this CPU");
            continue;
        }
        int ok = 1, cases = 0;
        for (size_t s = 0; s < N_SHIFTS && ok; s++) {
            int k = shifts[s];
            size_t n = boundary_values(v, k);
            fp_hist_t empty;
            fp_hist_init(&empty);
            char what[96];
            /* each value alone (scalar tail), and each value in a run of 16 ordinary ones (vector step) */
            for (size_t i = 0; i < n && ok; i++) {
                for (int j = 0; j < 48; j++)
                    arr[j] = quotient(ordinary_value(), -k);     /* x whose quotient is ordinary */
                arr[16 + i % 16] = v[i];
                snprintf(what, sizeof what, "k %d, value %a alone", k, v[i]);
                ok &= check_scaled(&v[i], 1, k, kern, &empty, what);
                snprintf(what, sizeof what, "k %d, value %a among 47 ordinary", k, v[i]);
                ok &= check_scaled(arr, 48, k, kern, &empty, what);
                cases += 2;
            }
            snprintf(what, sizeof what, "k %d, all %zu boundary values", k, n);
            ok &= check_scaled(v, n, k, kern, &empty, what);
            cases++;
        }
        tap_ok(ok, "class boundaries x 2^k and neighbours, fp32 edges, specials, %zu shifts: == multiply + "
                   "fp_hist_add (%s, %d arrays, tolerance 0)",
               N_SHIFTS, kern < 0 ? "default" : kernel_names[kern], cases);
    }
}

/* Random arrays of every kind of value and of ordinary values (common case: no fallback), random and
 * listed shifts, lengths 0 .. 5000, starts off by 0..3 floats, into empty and non-empty histograms. */
static void test_random(void)
{
    const size_t cap = 5004;
    float *mixed = malloc(cap * sizeof *mixed), *plain = malloc(cap * sizeof *plain);
    const size_t lens[] = {0, 1, 2, 7, 15, 16, 17, 31, 33, 100, 255, 256, 257, 1000, 4095, 4096, 4097, 5000};
    for (int kern = -1; kern < N_KERNELS; kern++) {
        if (kern >= 0 && !kernel_available(kern)) {
            tap_skip(1, "kernel not available on this CPU");
            continue;
        }
        int ok = 1, cases = 0;
        for (int rep = 0; rep < 80 && ok; rep++) {
            int k = rep < (int)N_SHIFTS ? shifts[rep] : (int)(rng_next() % 301) - 150;
            fill_blocks(mixed, cap);
            for (size_t i = 0; i < cap; i++)
                plain[i] = quotient(ordinary_value(), -k);
            fp_hist_t prior;
            fp_hist_init(&prior);
            if (rep % 3 == 1)
                fp_hist_add(&prior, mixed, 100);               /* accumulate onto earlier counts */
            for (size_t li = 0; li < sizeof lens / sizeof lens[0] && ok; li++) {
                size_t off = (size_t)(rep + li) % 4;
                char what[96];
                snprintf(what, sizeof what, "k %d, mixed, n %zu, offset %zu", k, lens[li], off);
                ok &= check_scaled(mixed + off, lens[li], k, kern, &prior, what);
                snprintf(what, sizeof what, "k %d, ordinary, n %zu, offset %zu", k, lens[li], off);
                ok &= check_scaled(plain + off, lens[li], k, kern, &prior, what);
                cases += 2;
            }
        }
        tap_ok(ok, "random arrays (mixed kinds; ordinary quotients): == multiply + fp_hist_add (%s, %d "
                   "arrays, tolerance 0)", kern < 0 ? "default" : kernel_names[kern], cases);
    }
    free(mixed);
    free(plain);
}

/* Large arrays: the common case, and the same with one quotient that leaves the normal range at the
 * very end (the fallback redoes the call). */
static void test_large(void)
{
    const size_t n = 300001;
    float *x = malloc(n * sizeof *x);
    const int ks[] = {16, -16, 24, 120, -100};
    for (int kern = -1; kern < N_KERNELS; kern++) {
        if (kern >= 0 && !kernel_available(kern)) {
            tap_skip(1, "kernel not available on this CPU");
            continue;
        }
        int ok = 1;
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
            int k = ks[i];
            for (size_t j = 0; j < n; j++)
                x[j] = quotient(ordinary_value(), -k);
            fp_hist_t empty;
            fp_hist_init(&empty);
            char what[96];
            snprintf(what, sizeof what, "k %d, %zu ordinary", k, n);
            ok &= check_scaled(x, n, k, kern, &empty, what);
            x[n - 1] = k > 0 ? (float)ldexp(0x1.000002p-140, k) : FLT_MAX;   /* subnormal / Inf quotient */
            snprintf(what, sizeof what, "k %d, %zu with the last leaving the range", k, n);
            ok &= check_scaled(x, n, k, kern, &empty, what);
        }
        tap_ok(ok, "300001 values, 5 shifts, with and without a quotient leaving the normal range (%s)",
               kern < 0 ? "default" : kernel_names[kern]);
    }
    free(x);
}

/* ---- the vector kernels' fast path, on fp_hist_add ---- */

static void test_fast_path(void)
{
    const size_t n = 9000;
    float *x = malloc(n * sizeof *x);
    /* values at the fast path's edges: the gate (256 = 2^8, E4M3's max binade) and just below, exact
     * powers of two at and around the <= thresholds, their neighbours */
    const float edge[] = {256.0f, 0x1.fffffep7f, 0x1p-25f, 0x1.000002p-25f, 0x1.fffffep-26f, 0x1p-17f,
                          0x1.000002p-17f, 0x1p-10f, 0x1.000002p-10f, 0x1p-14f, 0x1p-6f, 0x1p-24f,
                          0x1p-16f, 0x1p-9f, 1.0f, 0x1p-126f, 0x1p-127f, 448.0f, 0x1p15f, 0x1p127f,
                          /* between the gate fields (fast) and at their ends (slow) */
                          512.0f, 1000.0f, 0x1.fffffep14f, 0x1p16f, 0x1.5p20f, 0x1.fffffep126f,
                          FLT_MAX, 65504.0f, 65520.0f, 0x1.fffffep15f, 0x1p8f, 0x1.fffffep8f};
    const size_t ne = sizeof edge / sizeof edge[0];
    int ok_ref = 1, cases = 0;
    int ok_k[N_KERNELS] = {1, 1, 1};
    for (int rep = 0; rep < 40; rep++) {
        fill_blocks(x, n);
        for (size_t i = 0; i < n; i++)
            if (rng_next() % (rep % 4 == 0 ? 3 : 40) == 0)
                x[i] = edge[rng_next() % ne] * ((rng_next() & 1) ? 1.0f : -1.0f);
        fp_hist_t want, hs;
        tu_ref_hist(&want, x, n);   /* counts compared: amax, min_nonzero, sum_abs cleared on both sides */
        want.amax = want.min_nonzero = 0.0f;
        want.sum_abs = 0.0;
        fp_hist_init(&hs);
        fp_hist_add_kernel(&hs, x, n, 0);
        hs.amax = hs.min_nonzero = 0.0f;
        hs.sum_abs = 0.0;
        ok_ref &= same(&hs, &want, "scalar kernel vs double-compare reference (counts)");
        for (int k = 1; k < N_KERNELS; k++) {
            fp_hist_t a, b;
            fp_hist_init(&a);
            fp_hist_init(&b);
            /* 4000 values: AVX-512 counts exponents in sub-histograms; 8000: in exponent-pair tables */
            size_t len = rep % 2 ? 4000 : 8000 + (size_t)rep;
            if (fp_hist_add_kernel(&a, x + rep % 5, len, k) != FP_OK)
                continue;
            fp_hist_add_kernel(&b, x + rep % 5, len, 0);
            if (memcmp(&a, &b, sizeof a) != 0) {
                if (ok_k[k])
                    same(&a, &b, kernel_names[k]);
                ok_k[k] = 0;
            }
        }
        cases++;
    }
    tap_ok(ok_ref, "blocks of ordinary / edge / special values: scalar counts == reference (%d arrays)", cases);
    for (int k = 1; k < N_KERNELS; k++) {
        if (!kernel_available(k)) {
            tap_skip(1, "kernel not available on this CPU");
            continue;
        }
        tap_ok(ok_k[k], "same arrays: %s == scalar bit for bit (%d arrays)", kernel_names[k], cases);
    }
    free(x);
}

int main(void)
{
    test_args();
    test_reference_is_multiply();
    test_zero_shift();
    test_boundaries();
    test_random();
    test_large();
    test_fast_path();
    fp_hist_thread_release();
    return tap_done();
}
