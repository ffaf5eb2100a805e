/* data_testutil.h — helpers for the data tests: opening a data set with the options a test varies, the
 * value a byte becomes after normalisation, nested directories, and small PNG / JPEG writers so no binary
 * image fixture is committed (scratch directories and raw files: testutil.h).
 * Promise: every helper reports failure by its return value (0 ok, or NULL), never exits. */
#ifndef FP_DATA_TESTUTIL_H
#define FP_DATA_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include <png.h>
#include "error.h"
#include "tap.h"
#include "testutil.h"
#include "trainer/data/data.h"

/* Opens spec, with ":dir" appended when dir is not NULL ("cifar10", DIR), with the default options but the
 * image size, seed, augmentation and shuffling given; fp_dataset_open's code. */
static inline int dt_open(fp_dataset **ds, const char *spec, const char *dir, int size, uint64_t seed, int augment,
                          int shuffle)
{
    fp_data_opts o;
    fp_data_opts_default(&o);
    o.image_size = size;
    o.seed = seed;
    o.augment = augment;
    o.shuffle = shuffle;
    char full[4400];
    if (dir)
        snprintf(full, sizeof full, "%s:%s", spec, dir);
    return fp_dataset_open(ds, dir ? full : spec, &o);
}

/* dt_open of a spec that should open: the data set, or NULL after a TAP diagnostic with the error. */
static inline fp_dataset *dt_open_ok(const char *spec, int size, uint64_t seed, int augment, int shuffle)
{
    fp_dataset *ds = NULL;
    if (dt_open(&ds, spec, NULL, size, seed, augment, shuffle) != FP_OK)
        tap_diag("open %s: %s", spec, fp_error_message());
    return ds;
}

/* Training samples first .. first + n - 1 of ds (size x size, as loaded, no augmentation RNG) into images and
 * labels: a batch over them. */
static inline fp_batch dt_batch(fp_dataset *ds, int64_t first, int n, int size, float *images, int32_t *labels)
{
    for (int i = 0; i < n; i++) {
        int lab = 0;
        fp_dataset_get(ds, FP_SPLIT_TRAIN, first + i, 0, images + (size_t)i * size * size * 3, &lab);
        labels[i] = lab;
    }
    fp_batch b = {n, size, images, labels, 0, 0};
    return b;
}

/* What byte v of channel c becomes after the ImageNet normalisation. */
static inline float dt_norm(uint8_t v, int c)
{
    return ((float)v / 255.0f - fp_imagenet_mean[c]) / fp_imagenet_std[c];
}

/* Makes a, a/b and a/b/c (b and c may be NULL); mkdir's code for a/b/c, else 0. */
static inline int dt_mkdirs(const char *a, const char *b, const char *c)
{
    char p[8192];
    snprintf(p, sizeof p, "%s", a);
    mkdir(p, 0755);
    if (b) {
        snprintf(p, sizeof p, "%s/%s", a, b);
        mkdir(p, 0755);
    }
    if (b && c) {
        snprintf(p, sizeof p, "%s/%s/%s", a, b, c);
        return mkdir(p, 0755);
    }
    return 0;
}

/* 8-bit RGB PNG from packed rows. */
static inline int dt_write_png(const char *path, const uint8_t *rgb, int w, int h)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = PNG_FORMAT_RGB;
    return png_image_write_to_file(&img, path, 0, rgb, 0, NULL) ? 0 : -1;
}

/* Baseline JPEG (components 3 = RGB from packed rows, 1 = grayscale) into a malloc'ed buffer. */
static inline int dt_jpeg_mem(const uint8_t *pix, int w, int h, int comps, int quality, unsigned char **out,
                              unsigned long *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    *out = NULL;
    *len = 0;
    jpeg_mem_dest(&c, out, len);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pix + (size_t)c.next_scanline * w * comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return 0;
}

static inline int dt_write_jpeg(const char *path, const uint8_t *pix, int w, int h, int comps, int quality)
{
    unsigned char *buf;
    unsigned long len;
    dt_jpeg_mem(pix, w, h, comps, quality, &buf, &len);
    int rc = tu_write_file(path, buf, len);
    free(buf);
    return rc;
}

#endif
