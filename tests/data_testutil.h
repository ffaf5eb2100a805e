/* data_testutil.h — helpers for the data tests: a scratch directory under $TMPDIR (or /tmp) removed
 * afterwards, and small PNG / JPEG / raw file writers so no binary image fixture is committed.
 * Promise: every helper reports failure by its return value (0 ok), never exits. */
#ifndef FP_DATA_TESTUTIL_H
#define FP_DATA_TESTUTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include <png.h>

/* mkdtemp under $TMPDIR or /tmp; buf receives the path. */
static inline int dt_mkdtemp(char *buf, size_t cap)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, cap, "%s/fp16probe-data-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(buf) ? 0 : -1;
}

static inline int dt_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static inline int dt_rmtree(const char *path)
{
    return nftw(path, dt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

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

static inline int dt_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : -1;
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
    int rc = dt_write_file(path, buf, len);
    free(buf);
    return rc;
}

#endif
