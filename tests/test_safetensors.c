/* test_safetensors.c — the safetensors reader and writer: committed fixtures read back exactly,
 * bit-exact writer round trips with a checked byte layout (identical to the reference layout the
 * fixture script writes), and every kind of bad input rejected with one line naming the file. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "numfmt.h"
#include "safetensors.h"
#include "tap.h"
#include "testutil.h"

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "tests/fixtures"
#endif

static char *tmpdir;
static char fixdir[4096];

static const char *tmp_path(const char *name)
{
    static char buf[8][4200];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}

static const char *fixture(const char *name)
{
    static char buf[4][4200];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/safetensors/%s", fixdir, name);
    return p;
}

/* A safetensors image from a header text and a data buffer of data_len bytes (values i & 0xff). */
static unsigned char *make_image(const char *header, size_t data_len, size_t *n)
{
    size_t h = strlen(header);
    *n = 8 + h + data_len;
    unsigned char *b = malloc(*n);
    for (int k = 0; k < 8; k++)
        b[k] = (unsigned char)((uint64_t)h >> (8 * k));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++)
        b[8 + h + i] = (unsigned char)i;
    return b;
}

/* The message is one line that starts with the file name. */
static int names_file(const char *path)
{
    const char *m = fp_error_message();
    return strncmp(m, path, strlen(path)) == 0 && !strchr(m, '\n');
}

/* Writes header+data to a file and expects fp_st_open to fail with FP_EFORMAT, a message naming
 * the file and containing `needle` (when non-NULL). */
static void expect_bad(const char *what, const char *header, size_t data_len, const char *needle)
{
    size_t n;
    unsigned char *img = make_image(header, data_len, &n);
    const char *path = tmp_path("bad.safetensors");
    tu_write_file(path, img, n);
    free(img);
    fp_st *st = (fp_st *)1;
    fp_error_clear();
    int rc = fp_st_open(&st, path);
    int ok = rc == FP_EFORMAT && st == NULL && names_file(path) &&
             (!needle || strstr(fp_error_message(), needle));
    tap_ok(ok, "bad input rejected: %s", what);
    if (!ok)
        tap_diag("rc=%d message: %s", rc, fp_error_message());
    if (rc == FP_OK)
        fp_st_close(st);
}

static float f32_value(int j, int i)
{
    return (float)((i - 5) * 0.25 + j);
}

static const struct {
    const char *name;
    int rank;
    int64_t shape[4];
} resnet[] = {
    { "conv1.weight", 4, { 2, 3, 1, 1 } },
    { "bn1.weight", 1, { 2 } },
    { "bn1.bias", 1, { 2 } },
    { "bn1.running_mean", 1, { 2 } },
    { "bn1.running_var", 1, { 2 } },
    { "bn1.num_batches_tracked", 0, { 0 } },
    { "layer1.0.conv1.weight", 4, { 2, 2, 3, 3 } },
    { "layer1.0.downsample.0.weight", 4, { 2, 2, 1, 1 } },
    { "fc.weight", 2, { 3, 2 } },
    { "fc.bias", 1, { 3 } },
};

static void test_resnet_fixture(void)
{
    const char *path = fixture("resnet_f32.safetensors");
    fp_st *st;
    int rc = fp_st_open(&st, path);
    tap_is_int(rc, FP_OK, "open resnet_f32 fixture");
    if (rc != FP_OK) {
        tap_diag("%s", fp_error_message());
        return;
    }
    tap_is_str(fp_st_path(st), path, "path kept");
    tap_is_uint(fp_st_count(st), 10, "10 tensors");
    int order_ok = 1, values_ok = 1;
    for (int j = 0; j < 10; j++) {
        const fp_st_tensor *t = fp_st_at(st, (size_t)j);
        order_ok &= t && strcmp(t->name, resnet[j].name) == 0; /* fixture data is in list order */
        if (resnet[j].rank == 0)
            continue;
        float buf[64];
        rc = fp_st_read_f32(st, resnet[j].name, buf, resnet[j].shape, resnet[j].rank);
        const fp_st_tensor *f = fp_st_find(st, resnet[j].name);
        values_ok &= rc == FP_OK && f && f->dtype == FP_ST_F32;
        for (int64_t i = 0; values_ok && i < f->numel; i++)
            values_ok &= buf[i] == f32_value(j, (int)i);
    }
    tap_ok(order_ok, "fp_st_at walks tensors by data offset");
    tap_ok(values_ok, "every F32 tensor reads back exactly with its expected shape");
    tap_ok(fp_st_at(st, 10) == NULL, "fp_st_at past the end is NULL");

    const fp_st_tensor *nbt = fp_st_find(st, "bn1.num_batches_tracked");
    int64_t v = 0;
    if (nbt)
        memcpy(&v, nbt->data, 8);
    tap_ok(nbt && nbt->dtype == FP_ST_I64 && nbt->rank == 0 && nbt->numel == 1 && nbt->nbytes == 8 &&
               v == 1234567890123LL,
           "num_batches_tracked: I64 scalar, shape [], value intact");
    float fv;
    tap_is_int(fp_st_read_f32(st, "bn1.num_batches_tracked", &fv, NULL, 0), FP_OK, "I64 scalar reads as F32");
    tap_ok(fv == (float)1234567890123LL, "I64 -> F32 value");

    float big[64];
    int64_t wrong[4] = { 2, 2, 1, 1 };
    char want[600];
    snprintf(want, sizeof want, "%s: tensor 'layer1.0.conv1.weight' has shape [2, 2, 3, 3], expected [2, 2, 1, 1]",
             path);
    tap_is_int(fp_st_read_f32(st, "layer1.0.conv1.weight", big, wrong, 4), FP_EFORMAT, "shape mismatch fails");
    tap_is_str(fp_error_message(), want, "shape mismatch message");
    int64_t r3[3] = { 2, 2, 3 };
    snprintf(want, sizeof want, "%s: tensor 'layer1.0.conv1.weight' has shape [2, 2, 3, 3], expected [2, 2, 3]",
             path);
    fp_st_read_f32(st, "layer1.0.conv1.weight", big, r3, 3);
    tap_is_str(fp_error_message(), want, "rank mismatch message");
    snprintf(want, sizeof want, "%s: tensor 'bn1.num_batches_tracked' has shape [], expected [1]", path);
    int64_t one = 1;
    fp_st_read_f32(st, "bn1.num_batches_tracked", big, &one, 1);
    tap_is_str(fp_error_message(), want, "scalar shape prints as []");
    tap_is_int(fp_st_read_f32(st, "fc.weight", big, NULL, -1), FP_OK, "expect_rank < 0 accepts any shape");
    const fp_st_tensor *t;
    tap_is_int(fp_st_get(st, "fc.weight", &t), FP_OK, "fp_st_get finds a tensor");
    tap_ok(fp_st_find(st, "fc") == NULL && fp_st_find(st, "fc.weightx") == NULL && fp_st_find(st, "") == NULL,
           "fp_st_find: no prefix or partial matches");
    tap_is_uint(fp_st_metadata_count(st), 0, "no metadata");
    tap_ok(fp_st_metadata(st, "format") == NULL, "metadata lookup without __metadata__ is NULL");
    fp_st_close(st);
}

static void test_f16_bf16_fixtures(void)
{
    const char *path = fixture("small_f16.safetensors");
    fp_st *st;
    int rc = fp_st_open(&st, path);
    tap_is_int(rc, FP_OK, "open small_f16 fixture");
    if (rc == FP_OK) {
        float h[8];
        int64_t shape[2] = { 2, 4 };
        tap_is_int(fp_st_read_f32(st, "half", h, shape, 2), FP_OK, "read F16 as F32");
        tap_ok(h[0] == 1.0f && h[1] == -2.0f && h[2] == 0.5f && h[3] == 65504.0f && h[4] == ldexpf(1, -24) &&
                   h[5] == 0.0f && signbit(h[5]) && isinf(h[6]) && h[6] > 0 && h[7] == 0.333251953125f,
               "F16 values exact (1, -2, 0.5, 65504, 2^-24, -0, inf, 0x3555)");
        const fp_st_tensor *t = fp_st_find(st, "half");
        tap_ok(t && t->dtype == FP_ST_F16 && t->nbytes == 16, "F16 tensor: dtype and byte size");
        float s[3], b;
        int64_t three = 3, onee = 1;
        tap_ok(fp_st_read_f32(st, "scale", s, &three, 1) == FP_OK && s[0] == 0.5f && s[1] == -1.5f &&
                   s[2] == (float)1e-3,
               "F32 beside F16");
        tap_ok(fp_st_read_f32(st, "bias", &b, &onee, 1) == FP_OK && b == 1.0f, "single F16");
        char want[600];
        snprintf(want, sizeof want, "%s: no tensor 'fc.bias'", path);
        tap_is_int(fp_st_read_f32(st, "fc.bias", &b, &onee, 1), FP_EFORMAT, "missing tensor fails");
        tap_is_str(fp_error_message(), want, "missing tensor message");
        const fp_st_tensor *none;
        tap_is_int(fp_st_get(st, "fc.bias", &none), FP_EFORMAT, "fp_st_get: missing");
        tap_ok(none == NULL, "fp_st_get: NULL out when missing");
        fp_st_close(st);
    }

    path = fixture("small_bf16.safetensors");
    rc = fp_st_open(&st, path);
    tap_is_int(rc, FP_OK, "open small_bf16 fixture");
    if (rc == FP_OK) {
        float v[8];
        int64_t shape[2] = { 4, 2 };
        tap_is_int(fp_st_read_f32(st, "brain", v, shape, 2), FP_OK, "read BF16 as F32");
        tap_ok(v[0] == 1.0f && v[1] == -2.0f && v[2] == 3.140625f && v[3] == ldexpf(255.0f / 128.0f, 127) &&
                   v[4] == ldexpf(1, -133) && v[5] == 0.0f && signbit(v[5]) && isinf(v[6]) && v[6] < 0 &&
                   v[7] == 0.333984375f,
               "BF16 values exact (1, -2, 3.140625, max, 2^-133, -0, -inf, 0x3EAB)");
        fp_st_close(st);
    }
}

static void test_metadata_fixture(void)
{
    const char *path = fixture("with_metadata.safetensors");
    fp_st *st;
    int rc = fp_st_open(&st, path);
    tap_is_int(rc, FP_OK, "open with_metadata fixture");
    if (rc != FP_OK) {
        tap_diag("%s", fp_error_message());
        return;
    }
    tap_is_uint(fp_st_metadata_count(st), 2, "two metadata entries");
    const char *fmt = fp_st_metadata(st, "format");
    tap_is_str(fmt ? fmt : "(null)", "pt", "metadata format=pt");
    const char *note = fp_st_metadata(st, "note");
    tap_is_str(note ? note : "(null)", "caf\xc3\xa9 \"quoted\"\n\xe2\x98\xba", "\\u escapes decoded to UTF-8");
    const char *k, *v;
    tap_ok(fp_st_metadata_at(st, 0, &k, &v) == FP_OK && strcmp(k, "format") == 0 && strcmp(v, "pt") == 0,
           "metadata_at in file order");
    tap_is_int(fp_st_metadata_at(st, 2, &k, &v), FP_EINVAL, "metadata_at out of range");
    tap_ok(fp_st_metadata(st, "missing") == NULL, "unknown metadata key is NULL");
    tap_is_uint(fp_st_count(st), 3, "metadata is not counted as a tensor");
    float d[2], c[3], s;
    int64_t two = 2, three = 3;
    tap_ok(fp_st_read_f32(st, "double", d, &two, 1) == FP_OK && d[0] == (float)0.1 && isinf(d[1]) && d[1] < 0,
           "F64 -> F32 (0.1 rounds, -2.5e300 -> -inf)");
    tap_ok(fp_st_read_f32(st, "count", c, &three, 1) == FP_OK && c[0] == -7.0f && c[1] == 0.0f &&
               c[2] == 2147483648.0f,
           "I32 -> F32");
    tap_ok(fp_st_read_f32(st, "step", &s, NULL, 0) == FP_OK && s == -42.0f, "I64 scalar -> F32");
    const fp_st_tensor *t = fp_st_find(st, "count");
    int32_t raw[3];
    if (t)
        memcpy(raw, t->data, 12);
    tap_ok(t && t->dtype == FP_ST_I32 && raw[0] == -7 && raw[2] == 2147483647, "I32 raw bytes");
    fp_st_close(st);
}

/* ---- writer ---- */

static void test_writer_layout(void)
{
    /* Exact bytes: data ordered by dtype size then name; __metadata__ first; padded to 8. */
    fp_st_writer *w;
    tap_is_int(fp_st_writer_new(&w), FP_OK, "writer_new");
    uint16_t a = 0x3C00;
    float b[2] = { 1.0f, -2.0f }, c = 0.5f;
    int64_t two = 2, one = 1;
    fp_st_writer_add(w, "a", FP_ST_F16, &one, 1, &a);
    fp_st_writer_add(w, "b", FP_ST_F32, &two, 1, b);
    fp_st_writer_add_f32(w, "c", FP_ST_F32, NULL, 0, &c);
    fp_st_writer_metadata(w, "k", "old");
    fp_st_writer_metadata(w, "k", "v");
    const char *path = tmp_path("layout.safetensors");
    tap_is_int(fp_st_writer_write(w, path), FP_OK, "write layout file");
    fp_st_writer_free(w);

    const char *hdr = "{\"__metadata__\":{\"k\":\"v\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"c\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]},"
                      "\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[12,14]}}";
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    unsigned char want[512];
    memset(want, 0, sizeof want);
    for (int k = 0; k < 8; k++)
        want[k] = (unsigned char)((uint64_t)padded >> (8 * k));
    memcpy(want + 8, hdr, hl);
    memset(want + 8 + hl, ' ', padded - hl);
    memcpy(want + 8 + padded, b, 8);
    memcpy(want + 8 + padded + 8, &c, 4);
    memcpy(want + 8 + padded + 12, &a, 2);
    size_t wn = 8 + padded + 14, n = 0;
    unsigned char *got = (unsigned char *)tu_slurp(path, &n);
    tap_ok(got && n == wn && memcmp(got, want, wn) == 0, "header and data bytes exactly as specified");
    if (got && (n != wn || memcmp(got, want, wn) != 0))
        tap_diag("got %zu bytes, header: %.*s", n, (int)(n > 8 ? (n - 8 < 400 ? n - 8 : 400) : 0), got + 8);
    free(got);
    unlink(path);
}

static void test_writer_matches_fixture(void)
{
    /* Same tensors as the Python script's canonical small_f16 file, added in another order. */
    uint16_t half[8] = { 0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x8000, 0x7C00, 0x3555 }, bias = 0x3C00;
    float scale[3] = { 0.5f, -1.5f, (float)1e-3 };
    int64_t s24[2] = { 2, 4 }, s3 = 3, s1 = 1;
    fp_st_writer *w;
    fp_st_writer_new(&w);
    fp_st_writer_add(w, "half", FP_ST_F16, s24, 2, half);
    fp_st_writer_add(w, "bias", FP_ST_F16, &s1, 1, &bias);
    fp_st_writer_add_f32(w, "scale", FP_ST_F32, &s3, 1, scale);
    const char *path = tmp_path("f16.safetensors");
    tap_is_int(fp_st_writer_write(w, path), FP_OK, "write small_f16 twin");
    fp_st_writer_free(w);
    size_t n1 = 0, n2 = 0;
    unsigned char *mine = (unsigned char *)tu_slurp(path, &n1);
    unsigned char *ref = (unsigned char *)tu_slurp(fixture("small_f16.safetensors"), &n2);
    tap_ok(mine && ref && n1 == n2 && memcmp(mine, ref, n1) == 0,
           "byte-identical to the fixture the Python script wrote");
    free(mine);
    free(ref);
    unlink(path);
}

static void test_writer_roundtrip(void)
{
    float f[6];
    uint32_t bits[6] = { 0x3F800000, 0x7FC01234 /* NaN with payload */, 0xFF800000, 0x00000001, 0x80000000,
                         0x7F7FFFFF };
    memcpy(f, bits, sizeof f);
    float lo[5] = { 1.0f, 65520.0f, 1e-8f, -3.14159265f, 0.1f };
    int64_t nbt = 9876543210LL;
    uint16_t rawh[3] = { 0x1234, 0xFFFF, 0x0000 };
    int64_t s23[2] = { 2, 3 }, s5 = 5, s3 = 3, s03[2] = { 0, 3 };
    const char *odd = "we\"ird\\name\t\xc3\xbc";
    fp_st_writer *w;
    fp_st_writer_new(&w);
    int rc = 0;
    rc |= fp_st_writer_add(w, "fc.weight", FP_ST_F32, s23, 2, f);
    rc |= fp_st_writer_add_f32(w, "as_f16", FP_ST_F16, &s5, 1, lo);
    rc |= fp_st_writer_add_f32(w, "as_bf16", FP_ST_BF16, &s5, 1, lo);
    rc |= fp_st_writer_add(w, "bn1.num_batches_tracked", FP_ST_I64, NULL, 0, &nbt);
    rc |= fp_st_writer_add(w, "raw16", FP_ST_F16, &s3, 1, rawh);
    rc |= fp_st_writer_add(w, "empty", FP_ST_F32, s03, 2, NULL);
    rc |= fp_st_writer_add(w, odd, FP_ST_F32, &s3, 1, f);
    rc |= fp_st_writer_metadata(w, "format", "pt");
    rc |= fp_st_writer_metadata(w, "quote\"d", "line\nbreak");
    tap_is_int(rc, FP_OK, "writer accepts entries");

    int64_t neg = -1;
    tap_is_int(fp_st_writer_add(w, "fc.weight", FP_ST_F32, s23, 2, f), FP_EINVAL, "duplicate name refused");
    tap_ok(strstr(fp_error_message(), "fc.weight") != NULL, "duplicate message names the tensor");
    tap_is_int(fp_st_writer_add(w, "neg", FP_ST_F32, &neg, 1, f), FP_EINVAL, "negative dimension refused");
    tap_is_int(fp_st_writer_add(w, "__metadata__", FP_ST_F32, &s3, 1, f), FP_EINVAL, "__metadata__ name refused");
    tap_is_int(fp_st_writer_add(w, "", FP_ST_F32, &s3, 1, f), FP_EINVAL, "empty name refused");
    tap_is_int(fp_st_writer_add(w, "bad\xff", FP_ST_F32, &s3, 1, f), FP_EINVAL, "non-UTF-8 name refused");
    tap_is_int(fp_st_writer_add_f32(w, "i", FP_ST_I64, &s3, 1, f), FP_EINVAL, "add_f32 as I64 refused");
    tap_is_int(fp_st_writer_add(w, "nodata", FP_ST_F32, &s3, 1, NULL), FP_EINVAL, "NULL data refused");
    int64_t huge[3] = { INT64_MAX / 2, 4, 1 };
    tap_is_int(fp_st_writer_add(w, "huge", FP_ST_F32, huge, 3, f), FP_EINVAL, "overflowing shape refused");
    tap_is_int(fp_st_writer_add(w, "deep", FP_ST_F32, huge, FP_ST_MAX_RANK + 1, f), FP_EINVAL,
               "rank above the limit refused");

    const char *path = tmp_path("out.safetensors");
    tu_write_file(path, "old contents", 12);
    tap_is_int(fp_st_writer_write(w, path), FP_OK, "write over an existing file");
    const char *nodir = tmp_path("no/such/dir/x.safetensors");
    tap_is_int(fp_st_writer_write(w, nodir), FP_EIO, "write into a missing directory fails with FP_EIO");
    tap_ok(names_file(nodir), "write failure message names the file");
    fp_st_writer_free(w);
    tap_is_int(tu_count_entries(tmpdir), 1, "no temporary file left behind");

    fp_st *st;
    rc = fp_st_open(&st, path);
    tap_is_int(rc, FP_OK, "reopen written file");
    if (rc != FP_OK) {
        tap_diag("%s", fp_error_message());
        return;
    }
    tap_is_uint(fp_st_count(st), 7, "7 tensors back");
    const fp_st_tensor *t = fp_st_find(st, "fc.weight");
    tap_ok(t && t->dtype == FP_ST_F32 && t->rank == 2 && t->shape[0] == 2 && t->shape[1] == 3 &&
               memcmp(t->data, f, sizeof f) == 0,
           "F32 round trip is bit-exact (NaN payload, -inf, subnormal, -0, max)");
    t = fp_st_find(st, "as_f16");
    int ok = t && t->dtype == FP_ST_F16 && t->nbytes == 10;
    for (int i = 0; ok && i < 5; i++) {
        uint16_t h;
        memcpy(&h, (const char *)t->data + 2 * i, 2);
        ok = h == fp_f32_to_f16(lo[i]);
    }
    tap_ok(ok, "add_f32 as F16 stores fp_f32_to_f16 bits");
    t = fp_st_find(st, "as_bf16");
    ok = t && t->dtype == FP_ST_BF16 && t->nbytes == 10;
    for (int i = 0; ok && i < 5; i++) {
        uint16_t h;
        memcpy(&h, (const char *)t->data + 2 * i, 2);
        ok = h == fp_f32_to_bf16(lo[i]);
    }
    tap_ok(ok, "add_f32 as BF16 stores fp_f32_to_bf16 bits");
    float back[5];
    ok = fp_st_read_f32(st, "as_f16", back, &s5, 1) == FP_OK;
    for (int i = 0; ok && i < 5; i++)
        ok = back[i] == fp_f16_to_f32(fp_f32_to_f16(lo[i]));
    tap_ok(ok, "F16 reads back as the rounded values");
    t = fp_st_find(st, "bn1.num_batches_tracked");
    int64_t v = 0;
    if (t)
        memcpy(&v, t->data, 8);
    tap_ok(t && t->dtype == FP_ST_I64 && t->rank == 0 && v == nbt, "I64 scalar round trip");
    t = fp_st_find(st, "raw16");
    tap_ok(t && memcmp(t->data, rawh, 6) == 0, "raw F16 bytes round trip");
    t = fp_st_find(st, "empty");
    tap_ok(t && t->numel == 0 && t->nbytes == 0 && t->rank == 2 && t->shape[0] == 0 && t->shape[1] == 3,
           "zero-size tensor round trip");
    tap_ok(fp_st_read_f32(st, "empty", NULL, s03, 2) == FP_OK, "zero-size tensor reads with NULL dst");
    t = fp_st_find(st, odd);
    tap_ok(t && memcmp(t->data, f, 12) == 0, "name with quote, backslash, tab and UTF-8 round trips");
    const char *m = fp_st_metadata(st, "quote\"d");
    tap_is_str(m ? m : "(null)", "line\nbreak", "escaped metadata round trips");
    ok = 1;
    for (size_t k = 0; k < fp_st_count(st); k++) {
        const fp_st_tensor *x = fp_st_at(st, k);
        ok &= ((uintptr_t)x->data % fp_st_dtype_size(x->dtype)) == 0;
    }
    tap_ok(ok, "every tensor is naturally aligned in the read image");
    fp_st_close(st);
    unlink(path);
}

/* ---- bad input ---- */

static void test_bad_files(void)
{
    fp_st *st = (fp_st *)1;
    const char *missing = tmp_path("missing.safetensors");
    tap_is_int(fp_st_open(&st, missing), FP_EIO, "missing file: FP_EIO");
    tap_ok(st == NULL && names_file(missing), "missing file: message names it, *out NULL");
    tap_ok(strstr(fp_error_message(), "No such file") != NULL, "missing file: says why");

    const char *dir = tmp_path("adir");
    mkdir(dir, 0700);
    tap_is_int(fp_st_open(&st, dir), FP_EIO, "directory: FP_EIO");
    tap_ok(names_file(dir) && strstr(fp_error_message(), "directory"), "directory: message names it");
    rmdir(dir);

    const char *fifo = tmp_path("fifo");
    if (mkfifo(fifo, 0600) == 0) {
        tap_is_int(fp_st_open(&st, fifo), FP_EIO, "FIFO: refused without blocking");
        unlink(fifo);
    } else
        tap_skip(1, "mkfifo unavailable");

    const char *noperm = tmp_path("noperm.safetensors");
    tu_write_file(noperm, "x", 1);
    chmod(noperm, 0);
    if (geteuid() != 0) {
        tap_is_int(fp_st_open(&st, noperm), FP_EIO, "unreadable file: FP_EIO");
    } else
        tap_skip(1, "running as root: permissions do not apply");
    unlink(noperm);

    const char *empty = tmp_path("empty.safetensors");
    tu_write_file(empty, "", 0);
    tap_is_int(fp_st_open(&st, empty), FP_EFORMAT, "empty file: FP_EFORMAT");
    tap_ok(names_file(empty) && strstr(fp_error_message(), "empty"), "empty file: message names it");
    unlink(empty);

    /* The length field. */
    unsigned char img[64];
    memset(img, ' ', sizeof img);
    const char *path = tmp_path("bad.safetensors");
    struct {
        uint64_t len;
        const char *what;
    } lens[] = {
        { 0, "header length 0" },
        { 57, "header length one past the end" },
        { 200u << 20, "header length 200 MiB (absurd)" },
        { UINT64_MAX, "header length 2^64-1" },
        { (uint64_t)1 << 63, "header length 2^63" },
    };
    for (size_t c = 0; c < sizeof lens / sizeof lens[0]; c++) {
        for (int k = 0; k < 8; k++)
            img[k] = (unsigned char)(lens[c].len >> (8 * k));
        img[8] = '{';
        tu_write_file(path, img, sizeof img);
        int rc = fp_st_open(&st, path);
        tap_ok(rc == FP_EFORMAT && names_file(path), "%s: FP_EFORMAT naming the file", lens[c].what);
    }
    tu_write_file(path, img, 5);
    tap_ok(fp_st_open(&st, path) == FP_EFORMAT && names_file(path), "5-byte file: FP_EFORMAT");

    const char *T = "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    char h[4096];
    /* Malformed JSON. */
    expect_bad("unterminated object", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8,
               "malformed header JSON");
    snprintf(h, sizeof h, "{%s,}", T);
    expect_bad("trailing comma", h, 8, "malformed");
    snprintf(h, sizeof h, "{%s}x", T);
    expect_bad("garbage after the object", h, 8, "after the JSON value");
    expect_bad("header padded with a control byte", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}\x01",
               8, NULL);
    expect_bad("header not starting with '{'", " {}", 0, "does not start");
    expect_bad("root is an array", "[1]", 0, NULL);
    expect_bad("single quotes", "{'t':1}", 0, NULL);
    expect_bad("missing colon", "{\"t\" {}}", 0, "expected ':'");
    expect_bad("unterminated string", "{\"t", 0, "unterminated string");
    expect_bad("bad escape", "{\"t\\q\":{}}", 0, "unknown escape");
    expect_bad("lone surrogate", "{\"t\\ud800\":{}}", 0, "surrogate");
    expect_bad("\\u0000 in a name", "{\"t\\u0000\":{}}", 0, "NUL");
    expect_bad("control character in a string", "{\"t\x01\":{}}", 0, "control character");
    expect_bad("invalid UTF-8 in a name", "{\"t\xc3\x28\":{}}", 0, "UTF-8");
    expect_bad("overlong UTF-8", "{\"t\xc0\xaf\":{}}", 0, "UTF-8");
    expect_bad("true literal", "{\"__metadata__\":{\"a\":true}}", 0, "true/false/null");
    char deep[4200];
    size_t dn = 0;
    dn += (size_t)sprintf(deep, "{\"__metadata__\":");
    for (int k = 0; k < 1000; k++)
        deep[dn++] = '[';
    for (int k = 0; k < 1000; k++)
        deep[dn++] = ']';
    deep[dn++] = '}';
    deep[dn] = '\0';
    expect_bad("1000-deep nesting", deep, 0, "nesting");

    /* Wrong types and structure. */
    expect_bad("entry is an array", "{\"t\":[1]}", 0, "not an object");
    expect_bad("dtype not a string", "{\"t\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_bad("shape not an array", "{\"t\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8,
               "shape is not an array");
    expect_bad("shape holds a string", "{\"t\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
               "non-integer");
    expect_bad("shape holds a float", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
               "not an integer");
    expect_bad("shape holds an exponent", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}", 8,
               "not an integer");
    expect_bad("leading zero", "{\"t\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8,
               "leading zero");
    expect_bad("integer beyond int64",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}", 8,
               "out of range");
    expect_bad("data_offsets with one number", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", 8,
               "data_offsets");
    expect_bad("data_offsets with a string", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,\"8\"]}}",
               8, "data_offsets");
    expect_bad("data_offsets reversed", "{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8,
               "bad data_offsets");
    expect_bad("negative offset", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8,
               "bad data_offsets");
    expect_bad("missing dtype", "{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "lacks \"dtype\"");
    expect_bad("missing data_offsets", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "lacks \"data_offsets\"");
    expect_bad("unexpected key",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", 8, "unexpected key");
    expect_bad("unknown dtype", "{\"conv1.weight\":{\"dtype\":\"F128\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
               "tensor 'conv1.weight' has unknown dtype 'F128'");
    expect_bad("__metadata__ not an object", "{\"__metadata__\":[]}", 0, "__metadata__");
    expect_bad("__metadata__ value not a string", "{\"__metadata__\":{\"a\":1}}", 0, "not a string");
    snprintf(h, sizeof h, "{%s,%s}", T, T);
    expect_bad("duplicate tensor name", h, 8, "duplicate key \"t\"");
    expect_bad("negative dimension", "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
               "negative dimension");
    expect_bad("dims whose product overflows",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
               "too large");
    expect_bad("numel * 8 overflows",
               "{\"t\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", 8, "too large");
    expect_bad("rank 9", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
               "rank 9");

    /* Layout. */
    expect_bad("shape product * size != data length",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs 12 bytes");
    expect_bad("offsets past the buffer (truncated data)",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "run past");
    expect_bad("overlapping tensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, "overlap");
    expect_bad("gap before a tensor", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
               "belong to no tensor");
    expect_bad("trailing bytes after the last tensor",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "belong to no tensor");
    expect_bad("empty header with data", "{}", 4, "belong to no tensor");
    unlink(path);

    /* Valid oddities are accepted. */
    size_t n;
    unsigned char *ok_img = make_image("{}      ", 0, &n);
    int rc = fp_st_open_buffer(&st, ok_img, n, "empty.safetensors");
    tap_ok(rc == FP_OK && fp_st_count(st) == 0, "{} with no data is a valid empty file");
    fp_st_close(st);
    free(ok_img);
    ok_img = make_image("{\"z\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,0],\"data_offsets\":[0,0]},"
                        "\"t\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}",
                        3, &n);
    rc = fp_st_open_buffer(&st, ok_img, n, "zero.safetensors");
    tap_ok(rc == FP_OK && fp_st_count(st) == 2 && fp_st_find(st, "z")->numel == 0,
           "a zero-size tensor with a huge dimension is valid");
    if (rc == FP_OK) {
        float u[3];
        tap_ok(fp_st_read_f32(st, "t", u, NULL, -1) == FP_OK && u[0] == 0 && u[1] == 1 && u[2] == 2,
               "U8 reads as F32 (unaligned data is fine)");
        fp_st_close(st);
    } else
        tap_skip(1, "file did not open");
    free(ok_img);
}

/* Truncations, byte flips and random mutations of a good image: never a crash, never a leak,
 * always FP_OK or FP_EFORMAT with the file named. */
static void test_fuzz(void)
{
    const char *good = fixture("resnet_f32.safetensors");
    size_t n = 0;
    unsigned char *img = (unsigned char *)tu_slurp(good, &n);
    if (!img || n < 100) {
        tap_skip(4, "fixture unreadable");
        free(img);
        return;
    }
    const char *path = tmp_path("trunc.safetensors");
    int bad = 0, checked = 0;
    for (size_t len = 0; len < n; len += (len < 600 ? 1 : 7)) {
        tu_write_file(path, img, len);
        fp_st *st = (fp_st *)1;
        int rc = fp_st_open(&st, path);
        checked++;
        if (!(rc == FP_EFORMAT && st == NULL && names_file(path))) {
            if (!bad)
                tap_diag("truncated to %zu bytes: rc=%d %s", len, rc, fp_error_message());
            bad++;
            if (rc == FP_OK)
                fp_st_close(st);
        }
    }
    unlink(path);
    tap_ok(bad == 0, "every truncation (%d lengths, through files) is FP_EFORMAT naming the file", checked);

    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--)
        hlen = (hlen << 8) | img[k];
    unsigned char *m = malloc(n);
    int okc = 0, failc = 0;
    bad = 0;
    static const unsigned char flips[] = { 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF };
    for (size_t pos = 0; pos < 8 + hlen; pos++)
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(m, img, n);
            m[pos] ^= flips[f];
            fp_st *st;
            int rc = fp_st_open_buffer(&st, m, n, "flip.safetensors");
            if (rc == FP_OK) {
                okc++;
                fp_st_close(st);
            } else if (rc == FP_EFORMAT && names_file("flip.safetensors"))
                failc++;
            else
                bad++;
        }
    tap_ok(bad == 0, "every header byte flip: FP_OK (%d) or FP_EFORMAT naming the file (%d)", okc, failc);

    /* Random multi-byte mutations, truncations and extensions (deterministic LCG). */
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    bad = 0;
    okc = failc = 0;
    unsigned char *ext = malloc(n + 64);
    float *buf = malloc(1 << 16);
    for (int it = 0; it < 20000; it++) {
        memcpy(ext, img, n);
        size_t len = n;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int edits = 1 + (int)((seed >> 33) % 4);
        for (int e = 0; e < edits; e++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t r = seed >> 16;
            size_t pos = (size_t)(r % (8 + hlen + 16));
            if (pos >= len)
                pos = len - 1;
            switch ((r >> 40) % 4) {
            case 0: ext[pos] = (unsigned char)(r >> 24); break;
            case 1: ext[pos] = "{}[]\",:0123456789-. "[(r >> 24) % 20]; break;
            case 2: len = pos + 1; break;
            default: len = n + (size_t)((r >> 24) % 64); break;
            }
        }
        fp_st *st;
        int rc = fp_st_open_buffer(&st, ext, len, "fuzz.safetensors");
        if (rc == FP_OK) {
            okc++;
            for (size_t k = 0; k < fp_st_count(st); k++) {
                const fp_st_tensor *t = fp_st_at(st, k);
                if (t->numel <= (1 << 14) && t->dtype != FP_ST_BOOL)
                    bad += fp_st_read_f32(st, t->name, buf, t->shape, t->rank) != FP_OK;
            }
            fp_st_close(st);
        } else if (rc == FP_EFORMAT && names_file("fuzz.safetensors"))
            failc++;
        else
            bad++;
    }
    tap_ok(bad == 0, "20000 random mutations: FP_OK (%d, all readable) or FP_EFORMAT naming the file (%d)", okc,
           failc);
    tap_ok(failc > 0, "the mutations do exercise the error paths");
    free(ext);
    free(buf);
    free(m);
    free(img);
}

int main(void)
{
    const char *src = getenv("top_srcdir");
    if (src && *src)
        snprintf(fixdir, sizeof fixdir, "%s/tests/fixtures", src);
    else
        snprintf(fixdir, sizeof fixdir, "%s", FIXTURE_DIR);
    tmpdir = tu_mkdir();
    if (!tmpdir) {
        printf("Bail out! cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }

    test_resnet_fixture();
    test_f16_bf16_fixtures();
    test_metadata_fixture();
    test_writer_layout();
    test_writer_matches_fixture();
    test_writer_roundtrip();
    test_bad_files();
    test_fuzz();

    tu_rmdir(tmpdir);
    return tap_done();
}
