/* test_hist_blob.c — TAP tests of the histogram blob (hist_blob.c): exact round trips (empty, random,
 * every binade full, counts near 2^64), the documented byte layout, and rejection of every malformed
 * blob (each truncation, byte flips, bad magic, newer version, trailing bytes, bad varints, bad counts). */
#include "hist.h"
#include "error.h"
#include "tap.h"
#include "testutil.h"
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x13198A2E03707344ull;

static uint64_t rng_next(void) { return tu_splitmix64(&rng_state); }

/* A histogram of n values of a mixed kind (random bits, scaled integers, zeros). */
static void random_hist(fp_hist_t *h, size_t n, int kind)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next();
        if (kind == 0)
            v[i] = tu_u2f((uint32_t)r);
        else if (kind == 1)
            v[i] = (r & 3) == 0 ? 0.0f : (float)((double)(int32_t)(r >> 32) * 0x1p-35);
        else
            v[i] = (float)ldexp((double)((r >> 40) | 1), (int)((r >> 8) % 300) - 170);
    }
    fp_hist_init(h);
    fp_hist_add(h, v, n);
    free(v);
}

/* Every binade nonzero with large counts; consistent by construction. */
static void full_hist(fp_hist_t *h, uint64_t base)
{
    fp_hist_init(h);
    uint64_t fnz = 0;
    for (int i = 0; i < FP_HIST_BINADES; i++) {
        h->binade[i] = base + (uint64_t)i;
        fnz += h->binade[i];
    }
    h->zero = 12345678901ull;
    h->nan = 3;
    h->pos_inf = 1ull << 40;
    h->neg_inf = 7;
    h->count = fnz + h->zero + h->nan + h->pos_inf + h->neg_inf;
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        uint64_t rest = fnz;
        for (int c = 1; c < FP_CLASS_COUNT; c++) {
            h->cls[f][c] = fnz / (uint64_t)(7 + f + c);
            rest -= h->cls[f][c];
        }
        h->cls[f][FP_CLASS_NORMAL] = rest;
    }
    h->amax = FLT_MAX;
    h->min_nonzero = 0x1p-149f;
    h->sum_abs = 1.5e300;
}

static int roundtrip(const fp_hist_t *h, const char *what)
{
    uint8_t buf[FP_HIST_BLOB_MAX_SIZE], buf2[FP_HIST_BLOB_MAX_SIZE];
    size_t len = 0, len2 = 0;
    int rc = fp_hist_to_blob(h, buf, sizeof buf, &len);
    fp_hist_t back;
    memset(&back, 0x5A, sizeof back);
    int rc2 = rc == FP_OK ? fp_hist_from_blob(&back, buf, len) : rc;
    int rc3 = rc2 == FP_OK ? fp_hist_to_blob(&back, buf2, sizeof buf2, &len2) : rc2;
    int ok = rc == FP_OK && rc2 == FP_OK && rc3 == FP_OK && memcmp(&back, h, sizeof back) == 0 && len == len2 &&
             memcmp(buf, buf2, len) == 0 && len <= FP_HIST_BLOB_MAX_SIZE;
    if (!tap_ok(ok, "round trip is exact: %s (%zu bytes)", what, len))
        tap_diag("  rc %d/%d/%d: %s", rc, rc2, rc3, fp_error_message());
    return ok;
}

static size_t blob_of(const fp_hist_t *h, uint8_t *buf)
{
    size_t len = 0;
    if (fp_hist_to_blob(h, buf, FP_HIST_BLOB_MAX_SIZE, &len) != FP_OK)
        tap_diag("  unexpected: %s", fp_error_message());
    return len;
}

/* ---- an independent encoder following the documented layout ---- */

typedef struct {
    uint8_t b[FP_HIST_BLOB_MAX_SIZE + 64];
    size_t n;
} bytes_t;

static void b_put(bytes_t *o, uint8_t v)
{
    o->b[o->n++] = v;
}

static void b_varint(bytes_t *o, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7F;
        v >>= 7;
        b_put(o, (uint8_t)(byte | (v ? 0x80 : 0)));
    } while (v);
}

static void b_le(bytes_t *o, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        b_put(o, (uint8_t)(v >> (8 * i)));
}

/* The blob of h as the header comment of hist_blob.c describes it; count_override etc. allow
 * writing deliberately wrong fields. */
static void doc_encode(bytes_t *o, const fp_hist_t *h, int version, int flags)
{
    o->n = 0;
    b_put(o, 'F');
    b_put(o, 'P');
    b_put(o, 'H');
    b_put(o, 'B');
    b_put(o, (uint8_t)version);
    b_put(o, (uint8_t)flags);
    b_varint(o, h->count);
    b_varint(o, h->zero);
    b_varint(o, h->nan);
    b_varint(o, h->pos_inf);
    b_varint(o, h->neg_inf);
    if (!(flags & 1))
        return;
    uint64_t nnz = 0;
    for (int i = 0; i < FP_HIST_BINADES; i++)
        nnz += h->binade[i] != 0;
    b_varint(o, nnz);
    int prev = -1;
    for (int i = 0; i < FP_HIST_BINADES; i++)
        if (h->binade[i]) {
            b_varint(o, (uint64_t)(i - prev - 1));
            b_varint(o, h->binade[i]);
            prev = i;
        }
    for (int f = 0; f < FP_FMT_COUNT; f++)
        for (int c = 0; c < FP_CLASS_COUNT; c++)
            b_varint(o, h->cls[f][c]);
    uint32_t a, m;
    uint64_t s;
    memcpy(&a, &h->amax, 4);
    memcpy(&m, &h->min_nonzero, 4);
    memcpy(&s, &h->sum_abs, 8);
    b_le(o, a, 4);
    b_le(o, m, 4);
    b_le(o, s, 8);
}

/* A small histogram every field of which is known: {1.0, -3.0, 0, NaN}. */
static void small_hist(fp_hist_t *h)
{
    const float x[] = {1.0f, -3.0f, 0.0f, NAN};
    fp_hist_init(h);
    fp_hist_add(h, x, 4);
}

/* rc must be `want` and h untouched. */
static int rejects(const uint8_t *buf, size_t len, int want, const char *must_say, const char *what)
{
    fp_hist_t h, sentinel;
    memset(&h, 0xC3, sizeof h);
    sentinel = h;
    fp_error_clear();
    int rc = fp_hist_from_blob(&h, buf, len);
    int ok = rc == want && memcmp(&h, &sentinel, sizeof h) == 0 && fp_error_message()[0] != '\0' &&
             (!must_say || strstr(fp_error_message(), must_say) != NULL);
    if (!tap_ok(ok, "rejected: %s -> %s", what, fp_error_message()))
        tap_diag("  rc %d, expected %d; message must contain '%s'", rc, want, must_say ? must_say : "");
    return ok;
}

/* The documented blob (version 1, FINITE) of a deliberately wrong histogram, written into o, is rejected
 * with FP_EFORMAT. */
static int rejects_hist(bytes_t *o, const fp_hist_t *bad, const char *must_say, const char *what)
{
    doc_encode(o, bad, 1, 1);
    return rejects(o->b, o->n, FP_EFORMAT, must_say, what);
}

static void test_roundtrips(void)
{
    fp_hist_t h;
    fp_hist_init(&h);
    roundtrip(&h, "empty histogram");
    size_t len = blob_of(&h, (uint8_t[FP_HIST_BLOB_MAX_SIZE]){0});
    tap_is_uint(len, 11, "empty histogram blob is 11 bytes");

    const float zeros[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY};
    fp_hist_add(&h, zeros, 5);
    roundtrip(&h, "zeros and specials only");

    for (int k = 0; k < 3; k++)
        for (size_t n = 1; n <= 100000; n *= 10) {
            random_hist(&h, n, k);
            char what[64];
            snprintf(what, sizeof what, "random histogram (kind %d, %zu values)", k, n);
            roundtrip(&h, what);
        }

    full_hist(&h, (uint64_t)1 << 55);
    roundtrip(&h, "every binade full, counts ~2^55");

    /* counts near 2^64: one 10-byte varint in every place one can be */
    fp_hist_init(&h);
    h.binade[0] = (1ull << 63) + 5;
    h.binade[FP_HIST_BINADES - 1] = 1;
    h.zero = 1;
    h.pos_inf = 2;
    h.neg_inf = 3;
    h.count = UINT64_MAX;
    h.nan = UINT64_MAX - h.binade[0] - 1 - h.zero - h.pos_inf - h.neg_inf;
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        h.cls[f][FP_CLASS_UNDERFLOW] = h.binade[0];
        h.cls[f][FP_CLASS_OVERFLOW] = 1;
    }
    h.amax = 0x1.8p127f;
    h.min_nonzero = 0x1p-149f;
    h.sum_abs = 0x1.8p127;
    roundtrip(&h, "count = 2^64 - 1, a binade > 2^63");

    /* the largest blob: every binade and class near 2^64 is impossible (they must add up), but every
     * binade needs many bytes and the size bound holds */
    full_hist(&h, UINT64_MAX / 300);
    uint8_t big[FP_HIST_BLOB_MAX_SIZE];
    size_t blen = blob_of(&h, big);
    tap_ok(blen > 2000 && blen <= FP_HIST_BLOB_MAX_SIZE, "a full histogram with large counts: %zu bytes <= %d",
           blen, FP_HIST_BLOB_MAX_SIZE);
}

static void test_layout(void)
{
    fp_hist_t h;
    small_hist(&h);
    uint8_t buf[FP_HIST_BLOB_MAX_SIZE];
    size_t len = blob_of(&h, buf);
    bytes_t doc;
    doc_encode(&doc, &h, FP_HIST_BLOB_VERSION, 1);
    tap_ok(len == doc.n && memcmp(buf, doc.b, len) == 0, "the blob is byte for byte the documented layout (%zu bytes)",
           len);
    /* spot-check literal bytes: magic, version, flags, count 4, zero 1, nan 1, infs 0, 2 binades:
     * index 149 (1.0) as gap 149 = 0x95 0x01, count 1; then index 150 (3.0) as gap 0, count 1 */
    const uint8_t head[] = {'F', 'P', 'H', 'B', 1, 1, 4, 1, 1, 0, 0, 2, 0x95, 0x01, 1, 0, 1};
    tap_ok(len > sizeof head && memcmp(buf, head, sizeof head) == 0, "literal header and binade pairs");
    random_hist(&h, 5000, 1);
    len = blob_of(&h, buf);
    doc_encode(&doc, &h, FP_HIST_BLOB_VERSION, 1);
    tap_ok(len == doc.n && memcmp(buf, doc.b, len) == 0, "a random histogram follows the documented layout too");
    full_hist(&h, (uint64_t)1 << 60 >> 9);
    len = blob_of(&h, buf);
    doc_encode(&doc, &h, FP_HIST_BLOB_VERSION, 1);
    tap_ok(len == doc.n && memcmp(buf, doc.b, len) == 0, "... and a full one");
}

static void test_to_blob_errors(void)
{
    fp_hist_t h;
    random_hist(&h, 3000, 2);
    uint8_t buf[FP_HIST_BLOB_MAX_SIZE];
    size_t len = blob_of(&h, buf);
    int all = 1;
    for (size_t cap = 0; cap < len; cap++) {
        size_t got = 12345;
        uint8_t small[FP_HIST_BLOB_MAX_SIZE];
        int rc = fp_hist_to_blob(&h, small, cap, &got);
        char needed[32];
        snprintf(needed, sizeof needed, "%zu needed", len);
        if (rc != FP_EINVAL || got != len || !strstr(fp_error_message(), needed)) {
            if (all)
                tap_diag("  cap %zu: rc %d, message '%s'", cap, rc, fp_error_message());
            all = 0;
        }
    }
    tap_ok(all, "every cap below %zu bytes: FP_EINVAL saying (and setting *len to) the bytes needed", len);
    size_t got = 0;
    tap_is_int(fp_hist_to_blob(&h, NULL, 0, &got), FP_EINVAL, "NULL buffer, cap 0: FP_EINVAL (%s)",
               fp_error_message());
    tap_is_uint(got, len, "... and *len is the size needed");
    tap_is_int(fp_hist_to_blob(&h, NULL, 10, &got), FP_EINVAL, "NULL buffer with cap > 0: FP_EINVAL");
    tap_is_int(fp_hist_to_blob(&h, buf, len, &got), FP_OK, "cap == size: FP_OK");
    tap_is_uint(got, len, "... and *len is the size");
    tap_is_int(fp_hist_to_blob(NULL, buf, sizeof buf, &got), FP_EINVAL, "NULL histogram: FP_EINVAL");
    tap_is_int(fp_hist_to_blob(&h, buf, sizeof buf, NULL), FP_EINVAL, "NULL len: FP_EINVAL");
    fp_hist_t bad = h;
    bad.count++;
    tap_is_int(fp_hist_to_blob(&bad, buf, sizeof buf, &got), FP_EINVAL,
               "inconsistent histogram (count): FP_EINVAL (%s)", fp_error_message());
    bad = h;
    bad.cls[FP_FMT_E4M3][FP_CLASS_OVERFLOW]++;
    tap_is_int(fp_hist_to_blob(&bad, buf, sizeof buf, &got), FP_EINVAL,
               "inconsistent histogram (classes): FP_EINVAL (%s)", fp_error_message());
    tap_is_int(fp_hist_from_blob(NULL, buf, len), FP_EINVAL, "from_blob, NULL histogram: FP_EINVAL");
    tap_is_int(fp_hist_from_blob(&h, NULL, 5), FP_EINVAL, "from_blob, NULL buffer: FP_EINVAL");
}

static void test_truncations(void)
{
    fp_hist_t hs[3];
    fp_hist_init(&hs[0]);
    random_hist(&hs[1], 20000, 0);
    full_hist(&hs[2], (uint64_t)1 << 50);
    for (int k = 0; k < 3; k++) {
        uint8_t buf[FP_HIST_BLOB_MAX_SIZE];
        size_t len = blob_of(&hs[k], buf);
        int all = 1;
        for (size_t cut = 0; cut < len; cut++) {
            /* a fresh heap copy of exactly `cut` bytes, so ASan sees any read past the end */
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, buf, cut);
            fp_hist_t h, sentinel;
            memset(&h, 0x77, sizeof h);
            sentinel = h;
            int rc = fp_hist_from_blob(&h, p, cut);
            if (rc != FP_EFORMAT || memcmp(&h, &sentinel, sizeof h) != 0) {
                if (all)
                    tap_diag("  cut at %zu: rc %d (%s)", cut, rc, fp_error_message());
                all = 0;
            }
            free(p);
        }
        tap_ok(all, "every truncation 0..%zu of a %zu-byte blob: FP_EFORMAT, histogram untouched", len - 1, len);
    }
}

static void test_flips(void)
{
    fp_hist_t h;
    random_hist(&h, 20000, 1);
    uint8_t buf[FP_HIST_BLOB_MAX_SIZE];
    size_t len = blob_of(&h, buf);
    const uint8_t masks[] = {0x01, 0x02, 0x10, 0x40, 0x80, 0xFF};
    int all = 1, rejected = 0, total = 0;
    for (size_t pos = 0; pos < len; pos++)
        for (size_t m = 0; m < sizeof masks; m++) {
            uint8_t *p = malloc(len);
            memcpy(p, buf, len);
            p[pos] ^= masks[m];
            fp_hist_t back;
            int rc = fp_hist_from_blob(&back, p, len);
            total++;
            if (rc == FP_OK) {
                /* accepted: it must be a valid blob of some histogram, the canonical one */
                uint8_t again[FP_HIST_BLOB_MAX_SIZE];
                size_t alen = 0;
                if (fp_hist_to_blob(&back, again, sizeof again, &alen) != FP_OK || alen != len ||
                    memcmp(again, p, len) != 0) {
                    if (all)
                        tap_diag("  flip %zu^%02x accepted but not canonical", pos, masks[m]);
                    all = 0;
                }
            } else if (rc == FP_EFORMAT || rc == FP_EVERSION) {
                rejected++;
            } else {
                all = 0;
            }
            free(p);
        }
    tap_ok(all, "%d byte flips: each rejected (FP_EFORMAT/FP_EVERSION) or a canonical valid blob", total);
    tap_diag("  %d of %d flips rejected (the rest changed amax/min/sum bits to other valid values)", rejected,
             total);
    /* flips in the count fields are always caught */
    int counts_caught = 1;
    for (size_t pos = 6; pos < 11; pos++) {
        uint8_t p[FP_HIST_BLOB_MAX_SIZE];
        memcpy(p, buf, len);
        p[pos] ^= 0x01;
        fp_hist_t back;
        counts_caught &= fp_hist_from_blob(&back, p, len) == FP_EFORMAT;
    }
    tap_ok(counts_caught, "flipping a bit of the leading counts is always rejected");
}

static void test_malformed(void)
{
    fp_hist_t h;
    small_hist(&h);
    uint8_t buf[FP_HIST_BLOB_MAX_SIZE + 8];
    size_t len = blob_of(&h, buf);
    bytes_t o;

    for (int i = 0; i < 4; i++) {
        uint8_t p[FP_HIST_BLOB_MAX_SIZE];
        memcpy(p, buf, len);
        p[i] ^= 0x20;
        char what[48];
        snprintf(what, sizeof what, "wrong magic byte %d", i);
        rejects(p, len, FP_EFORMAT, "magic", what);
    }
    rejects((const uint8_t *)"SQLite format 3", 16, FP_EFORMAT, "magic", "a foreign file");

    uint8_t p[FP_HIST_BLOB_MAX_SIZE + 8];
    memcpy(p, buf, len);
    p[4] = FP_HIST_BLOB_VERSION + 1;
    rejects(p, len, FP_EVERSION, "version", "version + 1");
    p[4] = 255;
    rejects(p, len, FP_EVERSION, "version", "version 255");
    p[4] = 0;
    rejects(p, len, FP_EFORMAT, "version", "version 0");
    p[4] = FP_HIST_BLOB_VERSION;
    p[5] = 0x81;
    rejects(p, len, FP_EFORMAT, "flags", "unknown flag bit");
    memcpy(p, buf, len);
    p[len] = 0;
    rejects(p, len + 1, FP_EFORMAT, "trailing", "one trailing byte");

    /* varints: 11 bytes; 10 bytes with too many bits; not minimal */
    fp_hist_t e;
    fp_hist_init(&e);
    doc_encode(&o, &e, 1, 0);
    tap_ok(fp_hist_from_blob(&e, o.b, o.n) == FP_OK, "hand-encoded empty blob is accepted");
    uint8_t v11[] = {'F', 'P', 'H', 'B', 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
                     0, 0, 0, 0};
    rejects(v11, sizeof v11, FP_EFORMAT, "overflow", "an 11-byte varint");
    uint8_t v10[] = {'F', 'P', 'H', 'B', 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02, 0, 0, 0, 0};
    rejects(v10, sizeof v10, FP_EFORMAT, "overflow", "a 10-byte varint above 2^64");
    uint8_t nm[] = {'F', 'P', 'H', 'B', 1, 0, 0x80, 0x00, 0, 0, 0, 0};
    rejects(nm, sizeof nm, FP_EFORMAT, "minimal", "a non-minimal varint (0 in two bytes)");
    uint8_t max10[] = {'F', 'P', 'H', 'B', 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
                       0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0, 0};
    fp_hist_t hm;
    tap_ok(fp_hist_from_blob(&hm, max10, sizeof max10) == FP_OK && hm.count == UINT64_MAX && hm.nan == UINT64_MAX,
           "2^64 - 1 in 10 bytes is accepted (count = nan = 2^64 - 1)");

    /* counts that do not add up */
    fp_hist_t bad = h;
    bad.count++;
    rejects_hist(&o, &bad, "count", "count != zero + nan + infs + binades");
    bad = h;
    bad.count += 5;
    bad.nan += 5;
    doc_encode(&o, &bad, 1, 1);
    tap_ok(fp_hist_from_blob(&e, o.b, o.n) == FP_OK, "... while a consistent hand-encoded change is accepted");
    bad = h;
    bad.cls[FP_FMT_BF16][FP_CLASS_SUBNORMAL]++;
    rejects_hist(&o, &bad, "class", "a format's classes != finite nonzero");
    bad = h;
    bad.cls[FP_FMT_E5M2][FP_CLASS_NORMAL]--;
    bad.cls[FP_FMT_E5M2][FP_CLASS_OVERFLOW] = UINT64_MAX;
    bad.cls[FP_FMT_E5M2][FP_CLASS_SUBNORMAL] = 2;
    rejects_hist(&o, &bad, "overflow", "class counts that add up only modulo 2^64");
    bad = h;
    bad.binade[0] = UINT64_MAX;
    bad.binade[1] = 3;
    rejects_hist(&o, &bad, "overflow", "binade counts overflowing 64 bits");

    /* binade pairs */
    o.n = 0;
    doc_encode(&o, &h, 1, 0);                           /* header and counts only ... */
    b_varint(&o, 1);
    b_varint(&o, FP_HIST_BINADES);                     /* ... then a gap past the end */
    b_varint(&o, 2);
    rejects(o.b, o.n, FP_EFORMAT, "trailing", "binade pairs after a blob without FINITE");
    o.b[5] = 1;                                        /* (flag FINITE) */
    rejects(o.b, o.n, FP_EFORMAT, "range", "binade index out of range (with FINITE)");
    doc_encode(&o, &h, 1, 0);
    o.b[5] = 1;
    b_varint(&o, 0);
    rejects(o.b, o.n, FP_EFORMAT, "binades", "zero nonzero binades with FINITE set");
    doc_encode(&o, &h, 1, 0);
    o.b[5] = 1;
    b_varint(&o, FP_HIST_BINADES + 1);
    rejects(o.b, o.n, FP_EFORMAT, "binades", "more nonzero binades than exist");
    doc_encode(&o, &h, 1, 0);
    o.b[5] = 1;
    b_varint(&o, 2);
    b_varint(&o, 149);
    b_varint(&o, 1);
    b_varint(&o, FP_HIST_BINADES - 150);              /* second index = 150 + 127 = 277: one too far */
    b_varint(&o, 1);
    rejects(o.b, o.n, FP_EFORMAT, "range", "second binade index one past the end");
    bad = h;
    doc_encode(&o, &bad, 1, 1);
    /* rewrite binade 1.0's count as 0: pairs begin after 6 + 5 counts + nnz = 12 bytes: 95 01 | 01 */
    o.b[14] = 0;
    rejects(o.b, o.n, FP_EFORMAT, "count 0", "a stored binade with count 0");
    doc_encode(&o, &h, 1, 0);
    rejects(o.b, o.n, FP_EFORMAT, NULL, "FINITE clear while the counts imply finite nonzero values");

    /* amax, min_nonzero, sum_abs */
    bad = h;
    bad.amax = 5.0f;                                   /* binade 2, but the highest nonzero is 1 */
    rejects_hist(&o, &bad, "amax", "amax outside the highest nonzero binade");
    bad = h;
    bad.amax = NAN;
    rejects_hist(&o, &bad, "amax", "amax NaN");
    bad = h;
    bad.min_nonzero = -1.0f;
    rejects_hist(&o, &bad, "min_nonzero", "negative min_nonzero");
    bad = h;
    bad.sum_abs = -4.0;
    rejects_hist(&o, &bad, "sum_abs", "negative sum_abs");
    bad = h;
    bad.sum_abs = INFINITY;
    rejects_hist(&o, &bad, "sum_abs", "infinite sum_abs");

    tap_is_int(fp_hist_from_blob(&e, NULL, 0), FP_EFORMAT, "NULL buffer of length 0: FP_EFORMAT (truncated)");
}

int main(void)
{
    test_roundtrips();
    test_layout();
    test_to_blob_errors();
    test_truncations();
    test_flips();
    test_malformed();
    return tap_done();
}
