/* data_imagefolder.c — the `imagefolder:DIR` dataset (DIR/train/CLASS/NAME.jpg|jpeg|png, DIR/val/...)
 * with JPEG decoding by libjpeg-turbo and PNG decoding by libpng, to RGB8. Promise: classes and
 * files are listed in sorted order (deterministic); a corrupt image is an error naming the file. A folder
 * whose contents are wrong (no train/, an empty one, a class without images, a val class unknown to train/)
 * is FP_EIO / FP_EFORMAT like a corrupt image, never FP_EINVAL (a bad spec): one exit status for all of
 * them; a listed file that is no longer a regular file (a FIFO) is refused, never waited on. */
#include "trainer/data/data_internal.h"
#include "error.h"
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#define MAX_SIDE 32768
#define MAX_PIXELS ((size_t)1 << 28)

/* ---------------------------------------------------------------- decoding */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
    int premature_end;
} jpeg_err;

static void jpeg_error_exit_jump(j_common_ptr cinfo)
{
    jpeg_err *e = (jpeg_err *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->message);
    longjmp(e->jump, 1);
}

/* Warnings are not printed; a premature end of data (a truncated file) becomes an error below. */
static void jpeg_emit_quiet(j_common_ptr cinfo, int level)
{
    jpeg_err *e = (jpeg_err *)cinfo->err;
    if (level < 0) {
        if (cinfo->err->msg_code == JWRN_JPEG_EOF)
            e->premature_end = 1;
        cinfo->err->num_warnings++;
    }
}

static int decode_jpeg(const uint8_t *data, size_t len, const char *path, fp_data_scratch *scratch,
                       int *width, int *height)
{
    struct jpeg_decompress_struct cinfo;
    jpeg_err jerr;
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = jpeg_error_exit_jump;
    jerr.pub.emit_message = jpeg_emit_quiet;
    jerr.premature_end = 0;
    jerr.message[0] = '\0';
    if (setjmp(jerr.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return fp_fail(FP_EFORMAT, "%s: corrupt JPEG: %s", path, jerr.message);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    /* The size limits before jpeg_start_decompress, which allocates for the whole image (a progressive
     * one's coefficients too): a 203-byte header claiming 60681x32775 pixels took 6 GB and 8 s before it
     * was refused (fuzz_image). */
    unsigned iw = cinfo.image_width, ih = cinfo.image_height;
    if (iw == 0 || ih == 0 || iw > MAX_SIDE || ih > MAX_SIDE || (size_t)iw * ih > MAX_PIXELS) {
        jpeg_destroy_decompress(&cinfo);
        return fp_fail(FP_EFORMAT, "%s: JPEG of %ux%u pixels is too large", path, iw, ih);
    }
    int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    int w = (int)cinfo.output_width, h = (int)cinfo.output_height, comps = cinfo.output_components;
    int rc = FP_OK;
    if (w <= 0 || h <= 0 || w > MAX_SIDE || h > MAX_SIDE || (size_t)w * h > MAX_PIXELS)
        rc = fp_fail(FP_EFORMAT, "%s: JPEG of %dx%d pixels is too large", path, w, h);
    else if (comps != (cmyk ? 4 : 3))
        rc = fp_fail(FP_EFORMAT, "%s: JPEG with %d output components is not supported", path, comps);
    if (rc == FP_OK)
        rc = fp_data_buf_reserve(&scratch->image, (size_t)w * h * 3);
    if (rc == FP_OK && cmyk)
        rc = fp_data_buf_reserve(&scratch->tmp, (size_t)w * 4);
    if (rc != FP_OK) {
        jpeg_destroy_decompress(&cinfo);
        return rc;
    }
    uint8_t *img = scratch->image.p;
    while (cinfo.output_scanline < cinfo.output_height) {
        uint8_t *dst = img + (size_t)cinfo.output_scanline * w * 3;
        JSAMPROW row = cmyk ? (JSAMPROW)scratch->tmp.p : dst;
        if (jpeg_read_scanlines(&cinfo, &row, 1) != 1)
            break;
        if (cmyk) {   /* Adobe's inverted CMYK, as Photoshop writes it: R = C * K / 255 */
            const uint8_t *s = row;
            for (int x = 0; x < w; x++) {
                unsigned k = s[4 * x + 3];
                dst[3 * x] = (uint8_t)((s[4 * x] * k + 127) / 255);
                dst[3 * x + 1] = (uint8_t)((s[4 * x + 1] * k + 127) / 255);
                dst[3 * x + 2] = (uint8_t)((s[4 * x + 2] * k + 127) / 255);
            }
        }
    }
    int complete = cinfo.output_scanline == cinfo.output_height;
    if (complete)
        jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    if (!complete || jerr.premature_end)
        return fp_fail(FP_EFORMAT, "%s: corrupt JPEG: truncated (premature end of data)", path);
    *width = w;
    *height = h;
    return FP_OK;
}

static int decode_png(const uint8_t *data, size_t len, const char *path, fp_data_scratch *scratch,
                      int *width, int *height)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, data, len)) {
        int rc = fp_fail(FP_EFORMAT, "%s: corrupt PNG: %s", path, img.message);
        png_image_free(&img);
        return rc;
    }
    img.format = PNG_FORMAT_RGB;
    int w = (int)img.width, h = (int)img.height;
    if (w <= 0 || h <= 0 || w > MAX_SIDE || h > MAX_SIDE || (size_t)w * h > MAX_PIXELS) {
        png_image_free(&img);
        return fp_fail(FP_EFORMAT, "%s: PNG of %ux%u pixels is too large", path, img.width, img.height);
    }
    int rc = fp_data_buf_reserve(&scratch->image, PNG_IMAGE_SIZE(img));
    if (rc) {
        png_image_free(&img);
        return rc;
    }
    if (!png_image_finish_read(&img, NULL, scratch->image.p, 0, NULL)) {
        rc = fp_fail(FP_EFORMAT, "%s: corrupt PNG: %s", path, img.message);
        png_image_free(&img);
        return rc;
    }
    png_image_free(&img);
    *width = w;
    *height = h;
    return FP_OK;
}

int fp_image_decode(const uint8_t *data, size_t len, const char *path, fp_data_scratch *scratch,
                    int *width, int *height)
{
    static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
    if (len >= 8 && !memcmp(data, png_sig, 8))
        return decode_png(data, len, path, scratch, width, height);
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
        return decode_jpeg(data, len, path, scratch, width, height);
    return fp_fail(FP_EFORMAT, "%s: not a JPEG or PNG image (%zu bytes, unknown signature)", path, len);
}

/* ---------------------------------------------------------------- listing */

typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static int strlist_push(strlist *l, const char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return fp_fail(FP_ENOMEM, "data: out of memory");
        l->v = nv;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s)))
        return fp_fail(FP_ENOMEM, "data: out of memory");
    l->n++;
    return FP_OK;
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && dot != name &&
           (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

/* Sorted names in dir: subdirectories (want_dirs) or image files; hidden entries skipped. */
static int list_dir(const char *dir, int want_dirs, strlist *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return fp_fail(FP_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    size_t dlen = strlen(dir);
    char *path = NULL;
    size_t pcap = 0;
    int rc = FP_OK;
    struct dirent *e;
    while (rc == FP_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int is_dir, is_file;
        if (e->d_type == DT_DIR || e->d_type == DT_REG) {
            is_dir = e->d_type == DT_DIR;
            is_file = e->d_type == DT_REG;
        } else {   /* symlink or a file system without d_type: ask stat */
            size_t need = dlen + strlen(e->d_name) + 2;
            if (need > pcap) {
                char *np = realloc(path, need);
                if (!np) {
                    rc = fp_fail(FP_ENOMEM, "data: out of memory");
                    break;
                }
                path = np;
                pcap = need;
            }
            snprintf(path, pcap, "%s/%s", dir, e->d_name);
            struct stat st;
            if (stat(path, &st) != 0)
                continue;
            is_dir = S_ISDIR(st.st_mode);
            is_file = S_ISREG(st.st_mode);
        }
        if (want_dirs ? is_dir : (is_file && has_image_ext(e->d_name)))
            rc = strlist_push(out, e->d_name);
    }
    closedir(d);
    free(path);
    if (rc == FP_OK && out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return rc;
}

typedef struct {
    char *pool;            /* NUL-terminated full paths */
    size_t pool_len, pool_cap;
    size_t *offset[2];     /* per split, per sample */
    int32_t *label[2];
    size_t cap[2];
} folder_impl;

static void folder_close(void *p)
{
    folder_impl *f = p;
    if (!f)
        return;
    free(f->pool);
    for (int s = 0; s < 2; s++) {
        free(f->offset[s]);
        free(f->label[s]);
    }
    free(f);
}

static int folder_add(fp_dataset *ds, folder_impl *f, int split, const char *dir, const char *cls,
                      const char *file, int label)
{
    size_t need = strlen(dir) + strlen(cls) + strlen(file) + 3;
    if (f->pool_len + need > f->pool_cap) {
        size_t cap = f->pool_cap ? f->pool_cap : 65536;
        while (cap < f->pool_len + need)
            cap *= 2;
        char *np = realloc(f->pool, cap);
        if (!np)
            return fp_fail(FP_ENOMEM, "data: out of memory");
        f->pool = np;
        f->pool_cap = cap;
    }
    int64_t n = ds->size[split];
    if ((size_t)n == f->cap[split]) {
        size_t cap = f->cap[split] ? 2 * f->cap[split] : 1024;
        size_t *no = realloc(f->offset[split], cap * sizeof *no);
        if (!no)
            return fp_fail(FP_ENOMEM, "data: out of memory");
        f->offset[split] = no;
        int32_t *nl = realloc(f->label[split], cap * sizeof *nl);
        if (!nl)
            return fp_fail(FP_ENOMEM, "data: out of memory");
        f->label[split] = nl;
        f->cap[split] = cap;
    }
    f->offset[split][n] = f->pool_len;
    f->label[split][n] = label;
    f->pool_len += (size_t)snprintf(f->pool + f->pool_len, need, "%s/%s/%s", dir, cls, file) + 1;
    ds->size[split] = n + 1;
    return FP_OK;
}

static int folder_get(const fp_dataset *ds, int split, int64_t index, int augment, fp_data_rng *rng,
                      float *out, int *label, fp_data_scratch *scratch)
{
    const folder_impl *f = ds->impl;
    const char *path = f->pool + f->offset[split][index];
    *label = f->label[split][index];
    FILE *fh;
    long long size;
    int rc = fp_data_open_regular(path, 0, &fh, &size);   /* listed as a file; now a FIFO: refused, not waited on */
    if (rc != FP_OK)
        return rc;
    size_t len = (size_t)size;
    rc = fp_data_buf_reserve(&scratch->file, len ? len : 1);
    if (rc) {
        fclose(fh);
        return rc;
    }
    size_t got = fread(scratch->file.p, 1, len, fh);
    fclose(fh);
    if (got != len)
        return fp_fail(FP_EIO, "%s: read %zu of %zu bytes", path, got, len);
    int w, h;
    rc = fp_image_decode(scratch->file.p, len, path, scratch, &w, &h);
    if (rc)
        return rc;
    return fp_image_transform(scratch->image.p, w, h, ds->opts.image_size, augment, rng, out, scratch);
}

static const fp_dataset_ops folder_ops = { folder_get, folder_close };

static int scan_split(fp_dataset *ds, folder_impl *f, int split, const char *root, char **classes,
                      int nclasses)
{
    strlist dirs = { 0 }, files = { 0 };
    int rc = list_dir(root, 1, &dirs);
    for (size_t i = 0; rc == FP_OK && i < dirs.n; i++) {
        int label = i < (size_t)nclasses && !strcmp(classes[i], dirs.v[i]) ? (int)i : -1;
        if (label < 0) {
            char **hit = bsearch(&dirs.v[i], classes, (size_t)nclasses, sizeof *classes, cmp_str);
            if (!hit) {
                rc = fp_fail(FP_EFORMAT, "%s/%s: validation class '%s' is not a class of train/", root,
                             dirs.v[i], dirs.v[i]);
                break;
            }
            label = (int)(hit - classes);
        }
        size_t need = strlen(root) + strlen(dirs.v[i]) + 2;
        char *cdir = malloc(need);
        if (!cdir) {
            rc = fp_fail(FP_ENOMEM, "data: out of memory");
            break;
        }
        snprintf(cdir, need, "%s/%s", root, dirs.v[i]);
        strlist_free(&files);
        rc = list_dir(cdir, 0, &files);
        free(cdir);
        if (rc == FP_OK && split == FP_SPLIT_TRAIN && files.n == 0)
            rc = fp_fail(FP_EFORMAT, "%s/%s: class directory has no .jpg, .jpeg or .png images", root, dirs.v[i]);
        for (size_t j = 0; rc == FP_OK && j < files.n; j++)
            rc = folder_add(ds, f, split, root, dirs.v[i], files.v[j], label);
    }
    strlist_free(&dirs);
    strlist_free(&files);
    return rc;
}

int fp_data_open_imagefolder(fp_dataset *ds, const char *dir)
{
    folder_impl *f = calloc(1, sizeof *f);
    if (!f)
        return fp_fail(FP_ENOMEM, "data: out of memory");
    ds->ops = &folder_ops;
    ds->impl = f;
    size_t need = strlen(dir) + 8;
    char *train = malloc(need), *val = malloc(need);
    strlist classes = { 0 };
    int rc = FP_OK;
    if (!train || !val) {
        rc = fp_fail(FP_ENOMEM, "data: out of memory");
        goto out;
    }
    snprintf(train, need, "%s/train", dir);
    snprintf(val, need, "%s/val", dir);
    struct stat st;
    if (stat(train, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = fp_fail(FP_EIO, "imagefolder:%s: no directory %s (expected DIR/train/CLASS/*.jpg|png)", dir, train);
        goto out;
    }
    rc = list_dir(train, 1, &classes);
    if (rc)
        goto out;
    if (classes.n == 0) {
        rc = fp_fail(FP_EFORMAT, "imagefolder:%s: %s is empty (expected one subdirectory per class)", dir, train);
        goto out;
    }
    if (classes.n > 1000000) {
        rc = fp_fail(FP_EFORMAT, "imagefolder:%s: too many classes (%zu)", dir, classes.n);
        goto out;
    }
    ds->num_classes = (int)classes.n;
    ds->class_names = classes.v;   /* owned by ds from here */
    classes.v = NULL;
    classes.n = 0;
    rc = scan_split(ds, f, FP_SPLIT_TRAIN, train, ds->class_names, ds->num_classes);
    if (rc == FP_OK && stat(val, &st) == 0 && S_ISDIR(st.st_mode))
        rc = scan_split(ds, f, FP_SPLIT_VAL, val, ds->class_names, ds->num_classes);
out:
    strlist_free(&classes);
    free(train);
    free(val);
    return rc;
}
