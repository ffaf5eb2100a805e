/* hist_blob.c — the serialised form of an fp_hist_t: compact, versioned, little-endian, canonical.
 * Promise: fp_hist_from_blob(fp_hist_to_blob(h)) == h exactly; the reader accepts only what the writer
 * can produce (anything else: FP_EFORMAT with a message, FP_EVERSION for a newer version), never reads
 * outside the buffer and leaves *h alone on failure. When cap is too small, fp_hist_to_blob returns
 * FP_EINVAL and sets *len to the size needed (cap 0 with a NULL buffer asks for the size).
 *
 * Layout, version 1 (offsets in bytes; "varint" = unsigned LEB128, 7 bits per byte, least
 * significant group first, high bit = more bytes follow; at most 10 bytes, minimal length):
 *
 *   0   4   magic "FPHB" (0x46 0x50 0x48 0x42)
 *   4   1   version (FP_HIST_BLOB_VERSION = 1)
 *   5   1   flags: bit 0 FINITE = the histogram holds finite nonzero values and the finite section
 *           follows; bits 1..7 are zero
 *   6   ..  varint count, zero, nan, pos_inf, neg_inf
 *   finite section (FINITE only):
 *       varint nnz: how many binades are nonzero, 1..FP_HIST_BINADES
 *       nnz pairs (varint gap, varint n): binade index i_0 = gap_0, i_j = i_(j-1) + 1 + gap_j
 *           (index = e - FP_HIST_EXP_MIN, increasing, < FP_HIST_BINADES); n = that binade's count, >= 1
 *       FP_FMT_COUNT x FP_CLASS_COUNT varints: cls[format][class], in the enums' order
 *       4 bytes amax, 4 bytes min_nonzero: raw IEEE binary32 bits, little-endian
 *       8 bytes sum_abs: raw IEEE binary64 bits, little-endian
 *   nothing after the last field.
 * Without FINITE every binade, class count, amax, min_nonzero and sum_abs is zero.
 *
 * Consistency the reader enforces (and the writer refuses to break): count = zero + nan + pos_inf +
 * neg_inf + sum of binades, with no uint64 overflow; each format's five classes add up to the
 * finite nonzero count; amax and min_nonzero are finite, positive, min_nonzero <= amax, and lie in the
 * highest and lowest nonzero binade; sum_abs is finite and positive.
 * Size: 11 bytes for an empty histogram; at most 6 + 5*10 + 2 + 277*11 + 2 + 20*10 + 16 = 3323 bytes
 * (every binade nonzero, every count a 10-byte varint), within FP_HIST_BLOB_MAX_SIZE. */
#include "hist.h"
#include "float_bits.h"
#include "error.h"
#include <math.h>
#include <string.h>

static const uint8_t blob_magic[4] = {'F', 'P', 'H', 'B'};

#define FLAG_FINITE  0x01u
#define HEADER_SIZE  6
#define VARINT_MAX   10

/* ---- writing ---- */

typedef struct {
    uint8_t *buf;
    size_t cap, len;                 /* len keeps counting past cap, to report the size needed */
} writer_t;

static void put_byte(writer_t *w, uint8_t b)
{
    if (w->len < w->cap)
        w->buf[w->len] = b;
    w->len++;
}

static void put_varint(writer_t *w, uint64_t v)
{
    while (v >= 0x80) {
        put_byte(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    put_byte(w, (uint8_t)v);
}

static void put_le(writer_t *w, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        put_byte(w, (uint8_t)(v >> (8 * i)));
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static int binade_of(float v)                        /* index of a finite positive v */
{
    int e;
    (void)frexpf(v, &e);                              /* v = m * 2^e, 0.5 <= m < 1 */
    return e - 1 - FP_HIST_EXP_MIN;
}

/* NULL when h is consistent, else what is wrong. */
static const char *check_consistent(const fp_hist_t *h)
{
    uint64_t s = 0, fnz = 0;
    int lo = -1, hi = -1;
    for (int i = 0; i < FP_HIST_BINADES; i++) {
        if (h->binade[i]) {
            if (lo < 0)
                lo = i;
            hi = i;
        }
        if (__builtin_add_overflow(fnz, h->binade[i], &fnz))
            return "the binade counts overflow 64 bits";
    }
    if (__builtin_add_overflow(fnz, h->zero, &s) || __builtin_add_overflow(s, h->nan, &s) ||
        __builtin_add_overflow(s, h->pos_inf, &s) || __builtin_add_overflow(s, h->neg_inf, &s))
        return "the counts overflow 64 bits";
    if (s != h->count)
        return "count != zero + nan + infs + binades";
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        uint64_t c = 0;
        for (int k = 0; k < FP_CLASS_COUNT; k++)
            if (__builtin_add_overflow(c, h->cls[f][k], &c))
                return "a format's class counts overflow 64 bits";
        if (c != fnz)
            return "a format's class counts do not add up to the finite nonzero count";
    }
    if (fnz == 0) {
        if (fp_f32_bits(h->amax) != 0 || fp_f32_bits(h->min_nonzero) != 0 || f64_bits(h->sum_abs) != 0)
            return "amax, min_nonzero and sum_abs must be 0 without finite nonzero values";
        return NULL;
    }
    if (!isfinite(h->amax) || !(h->amax > 0.0f) || !isfinite(h->min_nonzero) || !(h->min_nonzero > 0.0f) ||
        h->min_nonzero > h->amax)
        return "amax / min_nonzero are not finite positive values with min <= max";
    if (binade_of(h->amax) != hi || binade_of(h->min_nonzero) != lo)
        return "amax / min_nonzero are not in the highest / lowest nonzero binade";
    if (!isfinite(h->sum_abs) || !(h->sum_abs > 0.0))
        return "sum_abs is not a finite positive value";
    return NULL;
}

int fp_hist_to_blob(const fp_hist_t *h, uint8_t *buf, size_t cap, size_t *len)
{
    if (!h || !len || (!buf && cap > 0))
        return fp_fail(FP_EINVAL, "fp_hist_to_blob: %s is NULL", !h ? "histogram" : !len ? "len" : "buffer");
    const char *why = check_consistent(h);
    if (why)
        return fp_fail(FP_EINVAL, "fp_hist_to_blob: inconsistent histogram: %s", why);
    uint64_t fnz = fp_hist_finite_nonzero(h);
    writer_t w = {buf, cap, 0};
    for (int i = 0; i < 4; i++)
        put_byte(&w, blob_magic[i]);
    put_byte(&w, FP_HIST_BLOB_VERSION);
    put_byte(&w, fnz ? FLAG_FINITE : 0);
    put_varint(&w, h->count);
    put_varint(&w, h->zero);
    put_varint(&w, h->nan);
    put_varint(&w, h->pos_inf);
    put_varint(&w, h->neg_inf);
    if (fnz) {
        uint64_t nnz = 0;
        for (int i = 0; i < FP_HIST_BINADES; i++)
            nnz += h->binade[i] != 0;
        put_varint(&w, nnz);
        int prev = -1;
        for (int i = 0; i < FP_HIST_BINADES; i++) {
            if (!h->binade[i])
                continue;
            put_varint(&w, (uint64_t)(i - prev - 1));
            put_varint(&w, h->binade[i]);
            prev = i;
        }
        for (int f = 0; f < FP_FMT_COUNT; f++)
            for (int c = 0; c < FP_CLASS_COUNT; c++)
                put_varint(&w, h->cls[f][c]);
        put_le(&w, fp_f32_bits(h->amax), 4);
        put_le(&w, fp_f32_bits(h->min_nonzero), 4);
        put_le(&w, f64_bits(h->sum_abs), 8);
    }
    *len = w.len;                                     /* on FP_EINVAL below: the size needed */
    if (w.len > cap)
        return fp_fail(FP_EINVAL, "fp_hist_to_blob: buffer of %zu bytes is too small, %zu needed", cap, w.len);
    return FP_OK;
}

/* ---- reading ---- */

typedef struct {
    const uint8_t *p;
    size_t len, pos;
} reader_t;

/* 0, or FP_EFORMAT with a message naming `what`. */
static int get_varint(reader_t *r, uint64_t *v, const char *what)
{
    uint64_t x = 0;
    for (int i = 0; i < VARINT_MAX; i++) {
        if (r->pos >= r->len)
            return fp_fail(FP_EFORMAT, "histogram blob truncated at byte %zu (in %s)", r->pos, what);
        uint8_t b = r->p[r->pos++];
        if (i == VARINT_MAX - 1 && b > 1)
            return fp_fail(FP_EFORMAT, "histogram blob: %s overflows 64 bits (byte %zu)", what, r->pos - 1);
        x |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            if (b == 0 && i > 0)
                return fp_fail(FP_EFORMAT, "histogram blob: %s is not minimally encoded (byte %zu)", what,
                               r->pos - 1);
            *v = x;
            return 0;
        }
    }
    return fp_fail(FP_EFORMAT, "histogram blob: %s overflows 64 bits (over %d bytes)", what, VARINT_MAX);
}

static int get_le(reader_t *r, uint64_t *v, int bytes, const char *what)
{
    if (r->len - r->pos < (size_t)bytes)
        return fp_fail(FP_EFORMAT, "histogram blob truncated at byte %zu (in %s)", r->len, what);
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++)
        x |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
    r->pos += (size_t)bytes;
    *v = x;
    return 0;
}

int fp_hist_from_blob(fp_hist_t *h, const uint8_t *buf, size_t len)
{
    if (!h || (!buf && len > 0))
        return fp_fail(FP_EINVAL, "fp_hist_from_blob: %s is NULL", h ? "buffer" : "histogram");
    if (len < sizeof blob_magic)
        return fp_fail(FP_EFORMAT, "histogram blob truncated: %zu bytes, not even the magic", len);
    if (memcmp(buf, blob_magic, sizeof blob_magic) != 0)
        return fp_fail(FP_EFORMAT, "not a histogram blob (wrong magic %02x %02x %02x %02x)", buf[0], buf[1],
                       buf[2], buf[3]);
    if (len < HEADER_SIZE)
        return fp_fail(FP_EFORMAT, "histogram blob truncated: %zu bytes, header needs %d", len, HEADER_SIZE);
    if (buf[4] > FP_HIST_BLOB_VERSION)
        return fp_fail(FP_EVERSION, "histogram blob version %u is newer than this build reads (%d)", buf[4],
                       FP_HIST_BLOB_VERSION);
    if (buf[4] == 0)
        return fp_fail(FP_EFORMAT, "histogram blob: version 0 does not exist");
    if (buf[5] & ~FLAG_FINITE)
        return fp_fail(FP_EFORMAT, "histogram blob: unknown flags 0x%02x", buf[5]);

    fp_hist_t t;
    fp_hist_init(&t);
    reader_t r = {buf, len, HEADER_SIZE};
    int rc;
    if ((rc = get_varint(&r, &t.count, "count")) || (rc = get_varint(&r, &t.zero, "zero count")) ||
        (rc = get_varint(&r, &t.nan, "NaN count")) || (rc = get_varint(&r, &t.pos_inf, "+Inf count")) ||
        (rc = get_varint(&r, &t.neg_inf, "-Inf count")))
        return rc;
    if (buf[5] & FLAG_FINITE) {
        uint64_t nnz, v;
        if ((rc = get_varint(&r, &nnz, "binade count")))
            return rc;
        if (nnz == 0 || nnz > FP_HIST_BINADES)
            return fp_fail(FP_EFORMAT, "histogram blob: %llu nonzero binades (1..%d allowed)",
                           (unsigned long long)nnz, FP_HIST_BINADES);
        uint64_t next = 0;                             /* smallest index the next binade may have */
        for (uint64_t j = 0; j < nnz; j++) {
            if ((rc = get_varint(&r, &v, "binade index")))
                return rc;
            if (v >= FP_HIST_BINADES || next + v >= FP_HIST_BINADES)
                return fp_fail(FP_EFORMAT, "histogram blob: binade index out of range (pair %llu)",
                               (unsigned long long)j);
            uint64_t idx = next + v;
            if ((rc = get_varint(&r, &t.binade[idx], "binade count")))
                return rc;
            if (t.binade[idx] == 0)
                return fp_fail(FP_EFORMAT, "histogram blob: binade %d stored with count 0",
                               (int)idx + FP_HIST_EXP_MIN);
            next = idx + 1;
        }
        for (int f = 0; f < FP_FMT_COUNT; f++)
            for (int c = 0; c < FP_CLASS_COUNT; c++)
                if ((rc = get_varint(&r, &t.cls[f][c], "class count")))
                    return rc;
        uint64_t a, m, s;
        if ((rc = get_le(&r, &a, 4, "amax")) || (rc = get_le(&r, &m, 4, "min_nonzero")) ||
            (rc = get_le(&r, &s, 8, "sum_abs")))
            return rc;
        uint32_t a32 = (uint32_t)a, m32 = (uint32_t)m;
        memcpy(&t.amax, &a32, sizeof t.amax);
        memcpy(&t.min_nonzero, &m32, sizeof t.min_nonzero);
        memcpy(&t.sum_abs, &s, sizeof t.sum_abs);
    }
    if (r.pos != len)
        return fp_fail(FP_EFORMAT, "histogram blob: %zu bytes of trailing garbage after byte %zu", len - r.pos,
                       r.pos);
    const char *why = check_consistent(&t);
    if (why)
        return fp_fail(FP_EFORMAT, "histogram blob: %s", why);
    *h = t;
    return FP_OK;
}
