/* safetensors.h — read and write safetensors files (the format of Hugging Face / torchvision
 * weights): an 8-byte little-endian header length, a JSON header, then one packed data buffer.
 * Promise: opening validates the whole header and layout up front, so a file that opens gives
 * in-range, non-overlapping, fully-covering tensors; every failure is one line naming the file
 * (and the tensor) in fp_error_message(), with FP_EFORMAT for bad content and FP_EIO for a file
 * that cannot be read or written. Writing is atomic (temporary file, fsync, rename). */
#ifndef FP_SAFETENSORS_H
#define FP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define FP_ST_MAX_RANK 8                         /* deeper tensors are rejected as malformed */
#define FP_ST_MAX_HEADER ((uint64_t)100 << 20)   /* header length limit: 100 MiB */

typedef enum {
    FP_ST_BOOL, FP_ST_U8, FP_ST_I8, FP_ST_F8_E4M3, FP_ST_F8_E5M2,
    FP_ST_I16, FP_ST_U16, FP_ST_F16, FP_ST_BF16,
    FP_ST_I32, FP_ST_U32, FP_ST_F32,
    FP_ST_I64, FP_ST_U64, FP_ST_F64,
    FP_ST_DTYPE_COUNT
} fp_st_dtype;

const char *fp_st_dtype_name(fp_st_dtype dt);           /* "F32", "BF16", ... ("?" when invalid) */
size_t      fp_st_dtype_size(fp_st_dtype dt);           /* bytes per element (0 when invalid) */
int         fp_st_dtype_parse(const char *name, fp_st_dtype *out); /* FP_OK or FP_EINVAL (no message) */

/* One tensor of an open file. All pointers stay valid until fp_st_close. data points at the
 * tensor's little-endian bytes inside the file image and need not be aligned for its dtype. */
typedef struct {
    const char *name;
    fp_st_dtype dtype;
    int rank;                        /* 0 for a scalar (shape []) */
    int64_t shape[FP_ST_MAX_RANK];
    int64_t numel;                   /* product of shape (1 for a scalar) */
    const void *data;
    size_t nbytes;                   /* numel * dtype size == data_offsets end - begin */
    uint64_t offset;                 /* data_offsets begin, relative to the data buffer */
} fp_st_tensor;

typedef struct fp_st fp_st;

/* ---- reading ---- */

/* Opens and validates path (read fully into memory). FP_EIO: missing, unreadable, a directory or
 * not a regular file; FP_EFORMAT: anything wrong inside; FP_ENOMEM. *out is NULL on failure. */
int fp_st_open(fp_st **out, const char *path);

/* As fp_st_open on an in-memory image (copied); label names it in messages. */
int fp_st_open_buffer(fp_st **out, const void *buf, size_t len, const char *label);

void fp_st_close(fp_st *st);                    /* NULL is fine */

const char *fp_st_path(const fp_st *st);        /* the path or label given at open */
size_t fp_st_count(const fp_st *st);            /* number of tensors (__metadata__ excluded) */

/* The i-th tensor (0 <= i < count) in file order, i.e. by ascending data offset; NULL when out of
 * range. */
const fp_st_tensor *fp_st_at(const fp_st *st, size_t i);

/* The tensor called name, or NULL (no message is set; see fp_st_get for one). O(log n). */
const fp_st_tensor *fp_st_find(const fp_st *st, const char *name);

/* As fp_st_find, but fails with FP_EFORMAT and "FILE: no tensor 'NAME'" when it is missing. */
int fp_st_get(const fp_st *st, const char *name, const fp_st_tensor **out);

/* Reads tensor name into dst as fp32, converting F16 / BF16 / F64 / F8_E4M3 / F8_E5M2 and the
 * integer dtypes (values beyond 2^24 round). When expect_rank >= 0 the tensor's shape must equal
 * expect_shape[0..expect_rank), else FP_EFORMAT with "FILE: tensor 'NAME' has shape [64, 64, 3, 3],
 * expected [64, 64, 1, 1]"; with expect_rank < 0 any shape is accepted and dst must hold numel
 * floats. A missing tensor gives "FILE: no tensor 'NAME'" (FP_EFORMAT); BOOL is refused. */
int fp_st_read_f32(const fp_st *st, const char *name, float *dst, const int64_t *expect_shape,
                   int expect_rank);

/* __metadata__ (string -> string): value for key or NULL; count; i-th pair in file order. */
const char *fp_st_metadata(const fp_st *st, const char *key);
size_t fp_st_metadata_count(const fp_st *st);
int fp_st_metadata_at(const fp_st *st, size_t i, const char **key, const char **value);

/* Formats shape as "[64, 64, 3, 3]" ("[]" for rank 0) into buf; returns buf (cut when too small). */
char *fp_st_shape_str(char *buf, size_t size, const int64_t *shape, int rank);
/* The element count of a shape, overflow-safe: -1 when the product exceeds INT64_MAX (0 with a zero dimension). */
int64_t fp_st_shape_numel(const int64_t *shape, int rank);

/* ---- writing ----
 * Collect entries, then write once. Data is BORROWED: it must stay valid and unchanged until
 * fp_st_writer_write returns; names, shapes and metadata are copied. The file is laid out as the
 * reference safetensors library does: tensors ordered by dtype size (largest first, so every
 * tensor is naturally aligned) and then by name (byte order), header keys in the same order with
 * __metadata__ first, header padded with spaces so the data starts at a multiple of 8. The order
 * of fp_st_writer_add calls therefore does not matter: the same entries give the same bytes. */
typedef struct fp_st_writer fp_st_writer;

int fp_st_writer_new(fp_st_writer **out);
void fp_st_writer_free(fp_st_writer *w);       /* NULL is fine */

/* Adds a tensor whose data is already in the file's little-endian dtype layout (numel * size
 * bytes). FP_EINVAL (with a message) for an empty / non-UTF-8 / duplicate name, the name
 * "__metadata__", a bad dtype, rank outside 0..FP_ST_MAX_RANK, a negative dimension, overflow,
 * or NULL data with numel > 0. */
int fp_st_writer_add(fp_st_writer *w, const char *name, fp_st_dtype dtype, const int64_t *shape,
                     int rank, const void *data);

/* Adds fp32 data to be stored as `as` (FP_ST_F32, FP_ST_F16 or FP_ST_BF16), converted while
 * writing with lib/numfmt's round-to-nearest-even conversions. */
int fp_st_writer_add_f32(fp_st_writer *w, const char *name, fp_st_dtype as, const int64_t *shape,
                         int rank, const float *data);

/* Sets a __metadata__ entry (copied; setting a key again replaces its value). */
int fp_st_writer_metadata(fp_st_writer *w, const char *key, const char *value);

/* Writes the file atomically (lib/atomic_file.h): PATH.tmp.<pid>.<n> in the same directory, fsync,
 * rename over path, fsync of the directory. On failure (FP_EIO naming path) path is untouched and the temporary file
 * is removed. The writer may be written again or freed afterwards. */
int fp_st_writer_write(fp_st_writer *w, const char *path);

#endif
