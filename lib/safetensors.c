/* safetensors.c — the safetensors dtypes and reader of safetensors.h (the writer: safetensors_write.c).
 * Promises: a file is read whole and validated before fp_st_open returns (header JSON, dtypes,
 * shapes with overflow-safe products, offsets in range, tensors packed without gap or overlap);
 * every error is one line naming the file. */
#include "safetensors.h"
#include "error.h"
#include "json_min.h"
#include "numfmt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the format's byte order)"
#endif

/* Names in messages are cut so that a message always keeps its file name and its point. */
#define NAMEFMT "%.200s"

/* ---- dtypes ---- */
static const struct {
    const char *name;
    size_t size;
} dtypes[FP_ST_DTYPE_COUNT] = {
    [FP_ST_BOOL] = { "BOOL", 1 },   [FP_ST_U8] = { "U8", 1 },     [FP_ST_I8] = { "I8", 1 },
    [FP_ST_F8_E4M3] = { "F8_E4M3", 1 }, [FP_ST_F8_E5M2] = { "F8_E5M2", 1 },
    [FP_ST_I16] = { "I16", 2 },     [FP_ST_U16] = { "U16", 2 },   [FP_ST_F16] = { "F16", 2 },
    [FP_ST_BF16] = { "BF16", 2 },   [FP_ST_I32] = { "I32", 4 },   [FP_ST_U32] = { "U32", 4 },
    [FP_ST_F32] = { "F32", 4 },     [FP_ST_I64] = { "I64", 8 },   [FP_ST_U64] = { "U64", 8 },
    [FP_ST_F64] = { "F64", 8 },
};

const char *fp_st_dtype_name(fp_st_dtype dt)
{
    return (unsigned)dt < FP_ST_DTYPE_COUNT ? dtypes[dt].name : "?";
}

size_t fp_st_dtype_size(fp_st_dtype dt)
{
    return (unsigned)dt < FP_ST_DTYPE_COUNT ? dtypes[dt].size : 0;
}

int fp_st_dtype_parse(const char *name, fp_st_dtype *out)
{
    for (int k = 0; k < FP_ST_DTYPE_COUNT; k++)
        if (strcmp(name, dtypes[k].name) == 0) {
            *out = (fp_st_dtype)k;
            return FP_OK;
        }
    return FP_EINVAL;
}

char *fp_st_shape_str(char *buf, size_t size, const int64_t *shape, int rank)
{
    if (!size)
        return buf;
    size_t used = 0;
    buf[0] = '\0';
    for (int k = -1; k <= rank && used < size; k++) {
        int w;
        if (k < 0)
            w = snprintf(buf + used, size - used, "[");
        else if (k == rank)
            w = snprintf(buf + used, size - used, "]");
        else
            w = snprintf(buf + used, size - used, "%s%" PRId64, k ? ", " : "", shape[k]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

int64_t fp_st_shape_numel(const int64_t *shape, int rank)
{
    for (int k = 0; k < rank; k++)
        if (shape[k] == 0)
            return 0;
    int64_t n = 1;
    for (int k = 0; k < rank; k++) {
        if (n > INT64_MAX / shape[k])
            return -1;
        n *= shape[k];
    }
    return n;
}

/* ---- reader ---- */
struct fp_st {
    char *path;
    unsigned char *image;
    size_t image_len;
    fp_json_doc *doc;
    const fp_json *meta;   /* __metadata__ object or NULL */
    fp_st_tensor *tensors; /* by data offset */
    size_t n;
    size_t *by_name;       /* indices into tensors, sorted by name */
};

void fp_st_close(fp_st *st)
{
    if (!st)
        return;
    free(st->path);
    free(st->image);
    fp_json_free(st->doc);
    free(st->tensors);
    free(st->by_name);
    free(st);
}

const char *fp_st_path(const fp_st *st)
{
    return st->path;
}

size_t fp_st_count(const fp_st *st)
{
    return st->n;
}

const fp_st_tensor *fp_st_at(const fp_st *st, size_t i)
{
    return i < st->n ? &st->tensors[i] : NULL;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

static int cmp_offset(const void *a, const void *b)
{
    const fp_st_tensor *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

/* qsort has no context argument; the sort runs under the caller's fp_st in a thread-local. */
static _Thread_local const fp_st_tensor *sort_tensors;

static int cmp_name_index(const void *a, const void *b)
{
    return strcmp(sort_tensors[*(const size_t *)a].name, sort_tensors[*(const size_t *)b].name);
}

/* Fills t from the header entry v (named name) and checks it against the data buffer size. */
static int parse_tensor(const fp_st *st, fp_st_tensor *t, const char *name, const fp_json *v,
                        uint64_t data_len)
{
    const char *path = st->path;
    if (v->type != FP_JSON_OBJECT)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "': header entry is %s %s, not an object",
                       path, name, v->type == FP_JSON_INT ? "an" : "a", fp_json_type_name(v->type));
    const fp_json *jd = NULL, *js = NULL, *jo = NULL;
    for (size_t k = 0; k < v->n; k++) {
        const char *key = v->keys[k];
        if (strcmp(key, "dtype") == 0)
            jd = &v->items[k];
        else if (strcmp(key, "shape") == 0)
            js = &v->items[k];
        else if (strcmp(key, "data_offsets") == 0)
            jo = &v->items[k];
        else
            return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "': unexpected key '%.60s' in its header entry",
                           path, name, key);
    }
    if (!jd || !js || !jo)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "': header entry lacks \"%s\"", path, name,
                       !jd ? "dtype" : !js ? "shape" : "data_offsets");
    t->name = name;

    if (jd->type != FP_JSON_STRING)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "': dtype is not a string", path, name);
    if (fp_st_dtype_parse(jd->str, &t->dtype) != FP_OK)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "' has unknown dtype '%.40s'", path, name, jd->str);

    if (js->type != FP_JSON_ARRAY)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "': shape is not an array", path, name);
    if (js->n > FP_ST_MAX_RANK)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "' has rank %zu, more than %d", path, name, js->n,
                       FP_ST_MAX_RANK);
    t->rank = (int)js->n;
    for (int k = 0; k < t->rank; k++) {
        const fp_json *d = &js->items[k];
        if (d->type != FP_JSON_INT)
            return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "': shape holds a non-integer", path, name);
        if (d->i < 0)
            return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "' has a negative dimension %" PRId64, path,
                           name, d->i);
        t->shape[k] = d->i;
    }
    t->numel = fp_st_shape_numel(t->shape, t->rank);
    size_t esz = dtypes[t->dtype].size;
    char sbuf[200];
    if (t->numel < 0 || (uint64_t)t->numel > UINT64_MAX / esz)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "' shape %s is too large", path, name,
                       fp_st_shape_str(sbuf, sizeof sbuf, t->shape, t->rank));
    uint64_t need = (uint64_t)t->numel * esz;

    if (jo->type != FP_JSON_ARRAY || jo->n != 2 || jo->items[0].type != FP_JSON_INT ||
        jo->items[1].type != FP_JSON_INT)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "': data_offsets is not [begin, end]", path, name);
    int64_t b = jo->items[0].i, e = jo->items[1].i;
    if (b < 0 || e < b)
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "': bad data_offsets [%" PRId64 ", %" PRId64 "]",
                       path, name, b, e);
    if ((uint64_t)e > data_len)
        return fp_fail(FP_EFORMAT,
                       "%s: tensor '" NAMEFMT "': data_offsets [%" PRId64 ", %" PRId64 "] run past the %" PRIu64
                       "-byte data buffer (file truncated?)",
                       path, name, b, e, data_len);
    if ((uint64_t)(e - b) != need)
        return fp_fail(FP_EFORMAT,
                       "%s: tensor '" NAMEFMT "' (%s %s) needs %" PRIu64 " bytes but data_offsets [%" PRId64
                       ", %" PRId64 "] hold %" PRId64,
                       path, name, dtypes[t->dtype].name, fp_st_shape_str(sbuf, sizeof sbuf, t->shape, t->rank),
                       need, b, e, e - b);
    t->offset = (uint64_t)b;
    t->nbytes = (size_t)need;
    return FP_OK;
}

/* The 8-byte length field against the file size (len >= 8). */
static int check_header_length(const char *path, size_t len, uint64_t hlen)
{
    if (hlen == 0)
        return fp_fail(FP_EFORMAT, "%s: header length is 0, not safetensors", path);
    if (hlen > FP_ST_MAX_HEADER)
        return fp_fail(FP_EFORMAT, "%s: header length %" PRIu64 " is over the %" PRIu64
                       "-byte limit (not safetensors?)", path, hlen, FP_ST_MAX_HEADER);
    if (hlen > len - 8)
        return fp_fail(FP_EFORMAT, "%s: header length %" PRIu64 " runs past the end of the %zu-byte file "
                       "(truncated?)", path, hlen, len);
    return FP_OK;
}

/* Validates st->image and builds the tensor tables. */
static int parse_image(fp_st *st)
{
    const char *path = st->path;
    size_t len = st->image_len;
    if (len == 0)
        return fp_fail(FP_EFORMAT, "%s: empty file, not safetensors", path);
    if (len < 8)
        return fp_fail(FP_EFORMAT, "%s: %zu bytes is too short for a safetensors header", path, len);
    uint64_t hlen = le64(st->image);
    int rc = check_header_length(path, len, hlen);
    if (rc != FP_OK)
        return rc;
    const char *hdr = (const char *)st->image + 8;
    uint64_t data_len = len - 8 - hlen;
    const unsigned char *data = st->image + 8 + hlen;

    /* Like the reference implementation, insist the header is an object from its first byte. */
    if (hdr[0] != '{')
        return fp_fail(FP_EFORMAT, "%s: header does not start with '{' (not safetensors?)", path);
    char err[256];
    rc = fp_json_parse(&st->doc, hdr, (size_t)hlen, err, sizeof err);
    if (rc == FP_ENOMEM)
        return fp_fail(FP_ENOMEM, "%s: out of memory parsing the header", path);
    if (rc != FP_OK)
        return fp_fail(FP_EFORMAT, "%s: malformed header JSON: %s", path, err);
    const fp_json *root = fp_json_root(st->doc);

    size_t ntensors = root->n;
    for (size_t k = 0; k < root->n; k++)
        if (strcmp(root->keys[k], "__metadata__") == 0) {
            const fp_json *m = &root->items[k];
            if (m->type != FP_JSON_OBJECT)
                return fp_fail(FP_EFORMAT, "%s: __metadata__ is not an object", path);
            for (size_t j = 0; j < m->n; j++)
                if (m->items[j].type != FP_JSON_STRING)
                    return fp_fail(FP_EFORMAT, "%s: __metadata__ value of '%.60s' is not a string", path,
                                   m->keys[j]);
            st->meta = m;
            ntensors--;
        }

    if (ntensors) {
        st->tensors = calloc(ntensors, sizeof *st->tensors);
        st->by_name = malloc(ntensors * sizeof *st->by_name);
        if (!st->tensors || !st->by_name)
            return fp_fail(FP_ENOMEM, "%s: out of memory for %zu tensors", path, ntensors);
    }
    size_t n = 0;
    for (size_t k = 0; k < root->n; k++) {
        if (&root->items[k] == st->meta)
            continue;
        rc = parse_tensor(st, &st->tensors[n], root->keys[k], &root->items[k], data_len);
        if (rc != FP_OK)
            return rc;
        n++;
    }
    st->n = n;

    /* Packed: sorted by offset, each tensor starts where the previous ended, the last ends at
     * the end of the file. */
    if (n > 1)
        qsort(st->tensors, n, sizeof *st->tensors, cmp_offset);
    uint64_t at = 0;
    const char *last = NULL; /* the tensor whose data ends at `at` */
    for (size_t k = 0; k < n; k++) {
        const fp_st_tensor *t = &st->tensors[k];
        if (t->offset < at)
            return fp_fail(FP_EFORMAT, "%s: tensors '" NAMEFMT "' and '" NAMEFMT "' overlap in the data buffer",
                           path, last ? last : "?", t->name);
        if (t->offset > at)
            return fp_fail(FP_EFORMAT, "%s: data bytes %" PRIu64 "..%" PRIu64 " before tensor '" NAMEFMT
                           "' belong to no tensor", path, at, t->offset, t->name);
        at = t->offset + t->nbytes;
        if (t->nbytes)
            last = t->name;
    }
    if (at != data_len)
        return fp_fail(FP_EFORMAT, "%s: %" PRIu64 " bytes after the last tensor belong to no tensor", path,
                       data_len - at);
    for (size_t k = 0; k < n; k++) {
        st->tensors[k].data = data + st->tensors[k].offset;
        st->by_name[k] = k;
    }
    if (n > 1) {
        sort_tensors = st->tensors;
        qsort(st->by_name, n, sizeof *st->by_name, cmp_name_index);
        sort_tensors = NULL;
    }
    return FP_OK;
}

static int open_common(fp_st **out, fp_st *st)
{
    int rc = parse_image(st);
    if (rc != FP_OK) {
        fp_st_close(st);
        return rc;
    }
    *out = st;
    return FP_OK;
}

static fp_st *st_new(const char *path)
{
    fp_st *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->path = strdup(path ? path : "(null)");
    if (!st->path) {
        free(st);
        return NULL;
    }
    return st;
}

int fp_st_open_buffer(fp_st **out, const void *buf, size_t len, const char *label)
{
    *out = NULL;
    if (!buf && len)
        return fp_fail(FP_EINVAL, "%s: NULL buffer", label ? label : "safetensors");
    fp_st *st = st_new(label);
    if (!st)
        return fp_fail(FP_ENOMEM, "%s: out of memory", label ? label : "safetensors");
    st->image = malloc(len ? len : 1);
    if (!st->image) {
        fp_st_close(st);
        return fp_fail(FP_ENOMEM, "%s: out of memory for %zu bytes", label, len);
    }
    if (len)
        memcpy(st->image, buf, len);
    st->image_len = len;
    return open_common(out, st);
}

/* Reads exactly n bytes at the current position; returns 0, or -1 with errno (0 for a short read). */
static int read_full(int fd, unsigned char *dst, size_t n)
{
    while (n) {
        ssize_t r = read(fd, dst, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        dst += r;
        n -= (size_t)r;
    }
    return 0;
}

int fp_st_open(fp_st **out, const char *path)
{
    *out = NULL;
    if (!path)
        return fp_fail(FP_EINVAL, "safetensors: NULL path");
    /* O_NONBLOCK so that a FIFO cannot hang us; it changes nothing for regular files. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fp_fail(FP_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return fp_fail(FP_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return fp_fail(FP_EIO, "%s: is a directory, not a safetensors file", path);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return fp_fail(FP_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX - 1) {
        close(fd);
        return fp_fail(FP_ENOMEM, "%s: too large to read", path);
    }
    size_t len = (size_t)sb.st_size;
    fp_st *st = st_new(path);
    if (!st) {
        close(fd);
        return fp_fail(FP_ENOMEM, "%s: out of memory", path);
    }
    /* Check the header length before reading a possibly large file whole. */
    if (len >= 8) {
        unsigned char head[8];
        int rc = FP_OK;
        if (read_full(fd, head, 8) != 0)
            rc = errno ? fp_fail(FP_EIO, "%s: read error: %s", path, strerror(errno))
                       : fp_fail(FP_EFORMAT, "%s: file shrank while being read", path);
        else if ((rc = check_header_length(path, len, le64(head))) == FP_OK && lseek(fd, 0, SEEK_SET) != 0)
            rc = fp_fail(FP_EIO, "%s: cannot seek: %s", path, strerror(errno));
        if (rc != FP_OK) {
            close(fd);
            fp_st_close(st);
            return rc;
        }
    }
    st->image = malloc(len ? len : 1);
    if (!st->image) {
        close(fd);
        fp_st_close(st);
        return fp_fail(FP_ENOMEM, "%s: out of memory for %zu bytes", path, len);
    }
    st->image_len = len;
    if (read_full(fd, st->image, len) != 0) {
        int e = errno;
        close(fd);
        fp_st_close(st);
        return e ? fp_fail(FP_EIO, "%s: read error: %s", path, strerror(e))
                 : fp_fail(FP_EFORMAT, "%s: file shrank while being read", path);
    }
    close(fd);
    return open_common(out, st);
}

const fp_st_tensor *fp_st_find(const fp_st *st, const char *name)
{
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const fp_st_tensor *t = &st->tensors[st->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

int fp_st_get(const fp_st *st, const char *name, const fp_st_tensor **out)
{
    *out = fp_st_find(st, name);
    if (!*out)
        return fp_fail(FP_EFORMAT, "%s: no tensor '" NAMEFMT "'", st->path, name);
    return FP_OK;
}

int fp_st_read_f32(const fp_st *st, const char *name, float *dst, const int64_t *expect_shape,
                   int expect_rank)
{
    const fp_st_tensor *t;
    int rc = fp_st_get(st, name, &t);
    if (rc != FP_OK)
        return rc;
    if (expect_rank > FP_ST_MAX_RANK || (expect_rank > 0 && !expect_shape))
        return fp_fail(FP_EINVAL, "%s: tensor '" NAMEFMT "': bad expected shape (rank %d)", st->path, name,
                       expect_rank);
    if (expect_rank >= 0) {
        int same = expect_rank == t->rank;
        for (int k = 0; same && k < t->rank; k++)
            same = expect_shape[k] == t->shape[k];
        if (!same) {
            char got[200], want[200];
            return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "' has shape %s, expected %s", st->path, name,
                           fp_st_shape_str(got, sizeof got, t->shape, t->rank),
                           fp_st_shape_str(want, sizeof want, expect_shape, expect_rank));
        }
    }
    size_t n = (size_t)t->numel;
    if (n == 0)
        return FP_OK;
    if (!dst)
        return fp_fail(FP_EINVAL, "%s: tensor '" NAMEFMT "': NULL destination", st->path, name);
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case FP_ST_F32:
        memcpy(dst, p, n * 4);
        break;
    case FP_ST_F16:
    case FP_ST_BF16:
        if (((uintptr_t)p & 1) == 0)
            rc = t->dtype == FP_ST_F16 ? fp_f16_to_f32_array(dst, (const uint16_t *)(const void *)p, n)
                                       : fp_bf16_to_f32_array(dst, (const uint16_t *)(const void *)p, n);
        else
            for (size_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, p + 2 * i, 2);
                dst[i] = t->dtype == FP_ST_F16 ? fp_f16_to_f32(h) : fp_bf16_to_f32(h);
            }
        break;
    case FP_ST_F8_E4M3:
        rc = fp_e4m3_to_f32_array(dst, p, n);
        break;
    case FP_ST_F8_E5M2:
        rc = fp_e5m2_to_f32_array(dst, p, n);
        break;
#define CONVERT(ctype)                                                                                    \
    for (size_t i = 0; i < n; i++) {                                                                      \
        ctype v;                                                                                          \
        memcpy(&v, p + sizeof v * i, sizeof v);                                                           \
        dst[i] = (float)v;                                                                                \
    }                                                                                                     \
    break
    case FP_ST_F64: CONVERT(double);
    case FP_ST_I64: CONVERT(int64_t);
    case FP_ST_U64: CONVERT(uint64_t);
    case FP_ST_I32: CONVERT(int32_t);
    case FP_ST_U32: CONVERT(uint32_t);
    case FP_ST_I16: CONVERT(int16_t);
    case FP_ST_U16: CONVERT(uint16_t);
    case FP_ST_I8: CONVERT(int8_t);
    case FP_ST_U8: CONVERT(uint8_t);
#undef CONVERT
    default:
        return fp_fail(FP_EFORMAT, "%s: tensor '" NAMEFMT "' has dtype %s, which does not convert to F32",
                       st->path, name, fp_st_dtype_name(t->dtype));
    }
    if (rc != FP_OK)
        return fp_fail(rc, "%s: tensor '" NAMEFMT "': conversion failed", st->path, name);
    return FP_OK;
}

const char *fp_st_metadata(const fp_st *st, const char *key)
{
    const fp_json *v = fp_json_get(st->meta, key);
    return v ? v->str : NULL;
}

size_t fp_st_metadata_count(const fp_st *st)
{
    return st->meta ? st->meta->n : 0;
}

int fp_st_metadata_at(const fp_st *st, size_t i, const char **key, const char **value)
{
    if (i >= fp_st_metadata_count(st))
        return FP_EINVAL;
    *key = st->meta->keys[i];
    *value = st->meta->items[i].str;
    return FP_OK;
}
