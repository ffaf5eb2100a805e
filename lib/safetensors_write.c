/* safetensors_write.c — the safetensors writer of safetensors.h: tensors (fp32 data stored as F32, F16 or BF16,
 * rounded to nearest even) and metadata collected, then written in one go. Promises: the header is valid JSON with
 * the tensors sorted by name and packed without gap; every error is one line naming the tensor or the file; the
 * file goes to a temporary file beside the target, renamed into place only when whole (lib/atomic_file.h). */
#include "safetensors.h"
#include "atomic_file.h"
#include "error.h"
#include "json_min.h"
#include "numfmt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Names in messages are cut so that a message always keeps its file name and its point. */
#define NAMEFMT "%.200s"

typedef struct {
    char *name;
    fp_st_dtype dtype;
    int rank;
    int64_t shape[FP_ST_MAX_RANK];
    uint64_t nbytes;
    const void *data;
    int from_f32; /* data is float, converted to dtype while writing */
} wentry;

struct fp_st_writer {
    wentry *e;
    size_t n, cap;
    char **mkey, **mval;
    size_t mn, mcap;
};

int fp_st_writer_new(fp_st_writer **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? FP_OK : fp_fail(FP_ENOMEM, "safetensors writer: out of memory");
}

void fp_st_writer_free(fp_st_writer *w)
{
    if (!w)
        return;
    for (size_t k = 0; k < w->n; k++)
        free(w->e[k].name);
    for (size_t k = 0; k < w->mn; k++) {
        free(w->mkey[k]);
        free(w->mval[k]);
    }
    free(w->e);
    free(w->mkey);
    free(w->mval);
    free(w);
}

static int add_entry(fp_st_writer *w, const char *name, fp_st_dtype dtype, const int64_t *shape, int rank,
                     const void *data, int from_f32)
{
    if (!w || !name)
        return fp_fail(FP_EINVAL, "safetensors writer: NULL writer or name");
    if (!name[0] || !fp_json_utf8_valid(name, strlen(name)))
        return fp_fail(FP_EINVAL, "safetensors writer: tensor name '" NAMEFMT "' is empty or not UTF-8", name);
    if (strcmp(name, "__metadata__") == 0)
        return fp_fail(FP_EINVAL, "safetensors writer: '__metadata__' is reserved, not a tensor name");
    if ((unsigned)dtype >= FP_ST_DTYPE_COUNT)
        return fp_fail(FP_EINVAL, "safetensors writer: tensor '" NAMEFMT "': invalid dtype %d", name, (int)dtype);
    if (rank < 0 || rank > FP_ST_MAX_RANK || (rank > 0 && !shape))
        return fp_fail(FP_EINVAL, "safetensors writer: tensor '" NAMEFMT "': bad rank %d", name, rank);
    for (int k = 0; k < rank; k++)
        if (shape[k] < 0)
            return fp_fail(FP_EINVAL, "safetensors writer: tensor '" NAMEFMT "': negative dimension %" PRId64,
                           name, shape[k]);
    int64_t numel = fp_st_shape_numel(shape, rank);
    size_t esz = fp_st_dtype_size(dtype);
    if (numel < 0 || (uint64_t)numel > (SIZE_MAX / 4) / esz)
        return fp_fail(FP_EINVAL, "safetensors writer: tensor '" NAMEFMT "' is too large", name);
    if (numel > 0 && !data)
        return fp_fail(FP_EINVAL, "safetensors writer: tensor '" NAMEFMT "': NULL data", name);
    for (size_t k = 0; k < w->n; k++)
        if (strcmp(w->e[k].name, name) == 0)
            return fp_fail(FP_EINVAL, "safetensors writer: duplicate tensor name '" NAMEFMT "'", name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        wentry *e = realloc(w->e, cap * sizeof *e);
        if (!e)
            return fp_fail(FP_ENOMEM, "safetensors writer: out of memory");
        w->e = e;
        w->cap = cap;
    }
    wentry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name)
        return fp_fail(FP_ENOMEM, "safetensors writer: out of memory");
    e->dtype = dtype;
    e->rank = rank;
    for (int k = 0; k < rank; k++)
        e->shape[k] = shape[k];
    e->nbytes = (uint64_t)numel * esz;
    e->data = data;
    e->from_f32 = from_f32;
    w->n++;
    return FP_OK;
}

int fp_st_writer_add(fp_st_writer *w, const char *name, fp_st_dtype dtype, const int64_t *shape, int rank,
                     const void *data)
{
    return add_entry(w, name, dtype, shape, rank, data, 0);
}

int fp_st_writer_add_f32(fp_st_writer *w, const char *name, fp_st_dtype as, const int64_t *shape, int rank,
                         const float *data)
{
    if (as != FP_ST_F32 && as != FP_ST_F16 && as != FP_ST_BF16)
        return fp_fail(FP_EINVAL, "safetensors writer: tensor '" NAMEFMT "': fp32 data can be stored as F32, "
                       "F16 or BF16, not %s", name ? name : "(null)", fp_st_dtype_name(as));
    return add_entry(w, name, as, shape, rank, data, as != FP_ST_F32);
}

int fp_st_writer_metadata(fp_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value)
        return fp_fail(FP_EINVAL, "safetensors writer: NULL metadata key or value");
    if (!fp_json_utf8_valid(key, strlen(key)) || !fp_json_utf8_valid(value, strlen(value)))
        return fp_fail(FP_EINVAL, "safetensors writer: metadata '%.60s' is not UTF-8", key);
    char *v = strdup(value);
    if (!v)
        return fp_fail(FP_ENOMEM, "safetensors writer: out of memory");
    for (size_t k = 0; k < w->mn; k++)
        if (strcmp(w->mkey[k], key) == 0) {
            free(w->mval[k]);
            w->mval[k] = v;
            return FP_OK;
        }
    if (w->mn == w->mcap) {
        size_t cap = w->mcap ? w->mcap * 2 : 8;
        char **a = realloc(w->mkey, cap * sizeof *a);
        if (a)
            w->mkey = a;
        char **b = a ? realloc(w->mval, cap * sizeof *b) : NULL;
        if (b)
            w->mval = b;
        if (!a || !b) {
            free(v);
            return fp_fail(FP_ENOMEM, "safetensors writer: out of memory");
        }
        w->mcap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return fp_fail(FP_ENOMEM, "safetensors writer: out of memory");
    }
    w->mkey[w->mn] = k;
    w->mval[w->mn] = v;
    w->mn++;
    return FP_OK;
}

/* A growable byte string for the header. */
typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t k)
{
    if (b->oom)
        return;
    if (b->n + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + k + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, k);
    b->n += k;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_sink(void *b, const char *s, size_t k)
{
    sb_put(b, s, k);
}

static _Thread_local const fp_st_writer *sort_writer;

static int cmp_entry(const void *a, const void *b)
{
    const wentry *x = &sort_writer->e[*(const size_t *)a], *y = &sort_writer->e[*(const size_t *)b];
    size_t sx = fp_st_dtype_size(x->dtype), sy = fp_st_dtype_size(y->dtype);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_entry(int fd, const wentry *e, uint16_t *tmp, size_t tmp_n)
{
    if (!e->from_f32)
        return e->nbytes ? write_all(fd, e->data, (size_t)e->nbytes) : 0;
    const float *src = e->data;
    size_t n = (size_t)(e->nbytes / 2);
    for (size_t at = 0; at < n; at += tmp_n) {
        size_t k = n - at < tmp_n ? n - at : tmp_n;
        if (e->dtype == FP_ST_F16)
            fp_f32_to_f16_array(tmp, src + at, k);
        else
            fp_f32_to_bf16_array(tmp, src + at, k);
        if (write_all(fd, tmp, k * 2) != 0)
            return -1;
    }
    return 0;
}

int fp_st_writer_write(fp_st_writer *w, const char *path)
{
    if (!w || !path || !path[0])
        return fp_fail(FP_EINVAL, "safetensors writer: NULL writer or empty path");
    size_t *order = malloc((w->n ? w->n : 1) * sizeof *order);
    if (!order)
        return fp_fail(FP_ENOMEM, "%s: out of memory", path);
    for (size_t k = 0; k < w->n; k++)
        order[k] = k;
    if (w->n > 1) {
        sort_writer = w;
        qsort(order, w->n, sizeof *order, cmp_entry);
        sort_writer = NULL;
    }

    /* Header. */
    sbuf h = { 0 };
    sb_put(&h, "{", 1);
    int first = 1;
    if (w->mn) {
        sb_str(&h, "\"__metadata__\":{");
        for (size_t k = 0; k < w->mn; k++) {
            if (k)
                sb_put(&h, ",", 1);
            fp_json_escape(sb_sink, &h, w->mkey[k]);
            sb_put(&h, ":", 1);
            fp_json_escape(sb_sink, &h, w->mval[k]);
        }
        sb_put(&h, "}", 1);
        first = 0;
    }
    uint64_t at = 0;
    for (size_t k = 0; k < w->n; k++) {
        const wentry *e = &w->e[order[k]];
        char num[64];
        if (e->nbytes > UINT64_MAX - at) {
            h.oom = 1;
            break;
        }
        if (!first)
            sb_put(&h, ",", 1);
        first = 0;
        fp_json_escape(sb_sink, &h, e->name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, fp_st_dtype_name(e->dtype));
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < e->rank; d++) {
            snprintf(num, sizeof num, "%s%" PRId64, d ? "," : "", e->shape[d]);
            sb_str(&h, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", at, at + e->nbytes);
        sb_str(&h, num);
        at += e->nbytes;
    }
    sb_put(&h, "}", 1);
    while (!h.oom && h.n % 8 != 0)
        sb_put(&h, " ", 1);
    if (h.oom) {
        free(order);
        free(h.s);
        return fp_fail(FP_ENOMEM, "%s: out of memory for the header", path);
    }

    /* Temporary file next to the target, then rename (lib/atomic_file.h). */
    uint16_t *conv = malloc(16384 * sizeof *conv);
    if (!conv) {
        free(order);
        free(h.s);
        return fp_fail(FP_ENOMEM, "%s: out of memory", path);
    }
    fp_afile_t a;
    int rc = FP_OK;
    if (fp_afile_open(&a, path) != FP_OK)
        rc = fp_fail(FP_EIO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
    else {
        int fd = fileno(a.f);   /* written with write(2) only: nothing waits in the FILE's buffer */
        unsigned char lenbuf[8];
        for (int k = 0; k < 8; k++)
            lenbuf[k] = (unsigned char)((uint64_t)h.n >> (8 * k));
        int bad = write_all(fd, lenbuf, 8) || write_all(fd, h.s, h.n);
        for (size_t k = 0; k < w->n && !bad; k++)
            bad = write_entry(fd, &w->e[order[k]], conv, 16384);
        if (bad || fp_afile_finish(&a) != FP_OK)
            rc = fp_fail(FP_EIO, "%s: write failed: %s", path, strerror(errno));
        else if (fp_afile_commit(&a) != FP_OK)
            rc = fp_fail(FP_EIO, "%s: cannot rename the temporary file into place: %s", path, strerror(errno));
        fp_afile_abort(&a);
    }
    free(order);
    free(h.s);
    free(conv);
    return rc;
}
