/* data_internal.h — what the data_*.c files and image_transform.c share (not for other parts):
 * the dataset vtable, the counter-based RNG, growable scratch buffers and the image transforms.
 * Promise: every random choice is a pure function of the keys given to fp_data_rng_seed. */
#ifndef FP_DATA_INTERNAL_H
#define FP_DATA_INTERNAL_H

#include "trainer/data/data.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- RNG: splitmix64 over a seed mixed from keys ---- */
typedef struct { uint64_t s; } fp_data_rng;

static inline uint64_t fp_data_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t fp_data_rng_next(fp_data_rng *r)
{
    return fp_data_mix64(r->s += 0x9E3779B97F4A7C15ull);
}

/* uniform in [0, 1) with 53 bits */
static inline double fp_data_rng_uniform(fp_data_rng *r)
{
    return (double)(fp_data_rng_next(r) >> 11) * 0x1p-53;
}

/* uniform integer in [0, n), n >= 1 (multiply-shift; bias < 2^-32 for n < 2^32) */
static inline uint64_t fp_data_rng_below(fp_data_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)fp_data_rng_next(r) * n) >> 64);
}

/* Stream tags keep the random choices of different purposes independent. */
enum { FP_RNG_GENERATE = 1, FP_RNG_AUGMENT = 2, FP_RNG_SHUFFLE = 3 };

static inline fp_data_rng fp_data_rng_seed(uint64_t seed, int tag, int split, int64_t a, int64_t b)
{
    uint64_t h = fp_data_mix64(seed ^ 0x5851F42D4C957F2Dull);
    h = fp_data_mix64(h ^ (uint64_t)tag * 0x9E3779B97F4A7C15ull);
    h = fp_data_mix64(h ^ ((uint64_t)split + 0x632BE59BD9B4E019ull));
    h = fp_data_mix64(h ^ (uint64_t)a);
    h = fp_data_mix64(h ^ ((uint64_t)b * 0xD6E8FEB86659FD93ull));
    fp_data_rng r = { h };
    return r;
}

/* ---- scratch memory owned by one thread, reused from sample to sample ---- */
typedef struct { void *p; size_t cap; } fp_data_buf;
typedef struct {
    fp_data_buf file;    /* raw file bytes */
    fp_data_buf image;   /* decoded RGB8 */
    fp_data_buf tmp;     /* resampling intermediate */
    fp_data_buf coef;    /* resampling coefficients */
} fp_data_scratch;

/* Ensures capacity >= n bytes (contents not kept). FP_ENOMEM on failure. */
int fp_data_buf_reserve(fp_data_buf *b, size_t n);
void fp_data_scratch_free(fp_data_scratch *s);

/* ---- the dataset ---- */
typedef struct {
    /* Prepares sample `index` of `split` into out (S*S*3 normalised floats); rng is this sample's
     * augmentation stream; augment says whether to augment. */
    int (*get)(const fp_dataset *ds, int split, int64_t index, int augment, fp_data_rng *rng,
               float *out, int *label, fp_data_scratch *scratch);
    void (*close)(void *impl);
} fp_dataset_ops;

struct fp_dataset {
    const fp_dataset_ops *ops;
    void *impl;
    fp_data_opts opts;
    int num_classes;
    int64_t size[2];
    char **class_names;   /* num_classes names (owned) */
    char *spec;           /* canonical spec (owned) */
};

/* Openers called by fp_dataset_open with the part of the spec after "scheme:" (NULL if none);
 * they fill ds->ops, impl, num_classes, size[] and class_names. */
int fp_data_open_synthetic(fp_dataset *ds, const char *arg);
int fp_data_open_cifar10(fp_dataset *ds, const char *dir);
int fp_data_open_imagefolder(fp_dataset *ds, const char *dir);

/* Opens path for reading only when it is a regular file, without blocking on anything else (a FIFO, a
 * device: opened O_NONBLOCK, checked by fstat before a byte is read). FP_OK with *f and *size set; with
 * missing_ok, a path that does not exist is FP_OK with *f NULL; else FP_EIO naming the path and the cause
 * ("not a regular file (a FIFO)", strerror). */
int fp_data_open_regular(const char *path, int missing_ok, FILE **f, long long *size);

/* The order of split's indices in epoch (identity unless train + shuffle); perm has size[split]. */
void fp_data_permutation(const fp_dataset *ds, int split, int64_t epoch, int64_t *perm);

/* Synthetic generator (exposed for the benchmark and tests): sample (split, index) at S x S. */
void fp_data_synthetic_render(uint64_t seed, int split, int64_t index, int size, float *out, int *label);

/* ---- transforms (image_transform.c) ---- */

/* torchvision RandomResizedCrop.get_params: 10 attempts, then the center-crop fallback. */
void fp_image_rrc_params(int width, int height, double scale_lo, double scale_hi, double ratio_lo,
                         double ratio_hi, fp_data_rng *rng, int *top, int *left, int *h, int *w);

/* Resize(shorter side to round(S*256/224)) + CenterCrop(S) as a box in source pixel coordinates
 * (x0, y0, x1, y1), with torchvision's rounding (long side truncated, crop offset rounded half even). */
void fp_image_center_crop_box(int width, int height, int size, double box[4]);

/* Resamples the box (x0, y0, x1, y1) of an RGB8 image (width x height, rows packed) to dw x dh with
 * PIL's bilinear filter (antialiased when shrinking: support scales with the reduction), optionally
 * mirrored left-right, and writes normalised floats (HWC). Identity copy when the box is the whole
 * image at the same size. FP_ENOMEM only. */
int fp_image_resample(const uint8_t *src, int width, int height, const double box[4], int dw, int dh,
                      int flip, float *out, fp_data_scratch *scratch);

/* RGB8 -> normalised floats, optionally mirrored. */
void fp_image_normalise(const uint8_t *src, int width, int height, int flip, float *out);

/* The imagefolder pipeline on a decoded image: RandomResizedCrop + flip when augment, else
 * Resize + CenterCrop. */
int fp_image_transform(const uint8_t *rgb, int width, int height, int size, int augment,
                       fp_data_rng *rng, float *out, fp_data_scratch *scratch);

/* Decodes a JPEG or PNG held in memory (type from its signature) to RGB8 in scratch->image.
 * FP_EFORMAT with a message naming `path` for anything undecodable. */
int fp_image_decode(const uint8_t *data, size_t len, const char *path, fp_data_scratch *scratch,
                    int *width, int *height);

#endif
