/* data_cifar10.c — the `cifar10:DIR` dataset: CIFAR-10's binary files (records of 1 label byte and
 * 3x1024 bytes of R, G, B planes) read whole into memory; training augmentation is the usual
 * random crop of the 4-pixel zero-padded image + horizontal flip. Promise: every record is checked
 * at open (truncation, labels > 9), and errors name the file and the record; a file that is not a regular
 * one (a FIFO) is refused without reading from it. */
#include "trainer/data/data_internal.h"
#include "error.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REC 3073
#define SIDE 32

static const char *const cifar_class_names[10] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"
};

typedef struct {
    uint8_t *data[2];   /* records of each split, concatenated */
} cifar_impl;

static void cifar_close(void *p)
{
    cifar_impl *c = p;
    if (!c)
        return;
    free(c->data[0]);
    free(c->data[1]);
    free(c);
}

/* Appends the records of path to *buf (holding *n records); 0 when the file does not exist (*exists 0). */
static int read_records(const char *path, uint8_t **buf, int64_t *n, int *exists)
{
    *exists = 0;
    FILE *f;
    long long size;
    int rc = fp_data_open_regular(path, 1, &f, &size);   /* a FIFO is refused, not waited on */
    if (rc != FP_OK || !f)
        return rc;
    *exists = 1;
    if (size == 0) {
        fclose(f);
        return fp_fail(FP_EFORMAT, "%s: empty file (no CIFAR-10 records of %d bytes)", path, REC);
    }
    if (size % REC != 0) {
        long long whole = size / REC;
        fclose(f);
        return fp_fail(FP_EFORMAT, "%s: truncated: %lld bytes is %lld whole records of %d bytes + %lld; "
                       "record %lld (offset %lld) is incomplete", path, size, whole, REC,
                       size - whole * REC, whole, whole * REC);
    }
    int64_t recs = size / REC;
    uint8_t *nb = realloc(*buf, (size_t)(*n + recs) * REC);
    if (!nb) {
        fclose(f);
        return fp_fail(FP_ENOMEM, "%s: out of memory (%lld bytes)", path, size);
    }
    *buf = nb;
    uint8_t *dst = nb + (size_t)*n * REC;
    size_t got = fread(dst, 1, (size_t)size, f);
    int rd_err = ferror(f);
    fclose(f);
    if (got != (size_t)size)
        return fp_fail(FP_EIO, "%s: read %zu of %lld bytes%s", path, got, size, rd_err ? " (I/O error)" : "");
    for (int64_t r = 0; r < recs; r++) {
        unsigned lab = dst[(size_t)r * REC];
        if (lab > 9)
            return fp_fail(FP_EFORMAT, "%s: record %lld (offset %lld): label %u is not a CIFAR-10 class (0..9)",
                           path, (long long)r, (long long)r * REC, lab);
    }
    *n += recs;
    return FP_OK;
}

static int cifar_get(const fp_dataset *ds, int split, int64_t index, int augment, fp_data_rng *rng,
                     float *out, int *label, fp_data_scratch *scratch)
{
    const cifar_impl *c = ds->impl;
    const uint8_t *rec = c->data[split] + (size_t)index * REC;
    *label = rec[0];
    const uint8_t *planes = rec + 1;
    int rc = fp_data_buf_reserve(&scratch->image, SIDE * SIDE * 3);
    if (rc)
        return rc;
    uint8_t *img = scratch->image.p;
    int dy = 4, dx = 4, flip = 0;
    if (augment) {   /* torchvision RandomCrop(32, padding=4): top, then left, in [0, 8]; then flip */
        dy = (int)fp_data_rng_below(rng, 9);
        dx = (int)fp_data_rng_below(rng, 9);
        flip = fp_data_rng_uniform(rng) < 0.5;
    }
    for (int y = 0; y < SIDE; y++) {
        int sy = y + dy - 4;
        for (int x = 0; x < SIDE; x++) {
            int sx = x + dx - 4;
            uint8_t *p = img + ((size_t)y * SIDE + x) * 3;
            if (sy < 0 || sy >= SIDE || sx < 0 || sx >= SIDE) {
                p[0] = p[1] = p[2] = 0;
            } else {
                size_t o = (size_t)sy * SIDE + sx;
                p[0] = planes[o];
                p[1] = planes[1024 + o];
                p[2] = planes[2048 + o];
            }
        }
    }
    int s = ds->opts.image_size;
    double box[4] = { 0, 0, SIDE, SIDE };
    return fp_image_resample(img, SIDE, SIDE, box, s, s, flip, out, scratch);
}

static const fp_dataset_ops cifar_ops = { cifar_get, cifar_close };

int fp_data_open_cifar10(fp_dataset *ds, const char *dir)
{
    cifar_impl *c = calloc(1, sizeof *c);
    if (!c)
        return fp_fail(FP_ENOMEM, "data: out of memory");
    ds->ops = &cifar_ops;
    ds->impl = c;
    ds->num_classes = 10;
    ds->class_names = calloc(10, sizeof *ds->class_names);
    if (!ds->class_names)
        return fp_fail(FP_ENOMEM, "data: out of memory");
    for (int i = 0; i < 10; i++)
        if (!(ds->class_names[i] = strdup(cifar_class_names[i])))
            return fp_fail(FP_ENOMEM, "data: out of memory");

    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fp_fail(FP_EIO, "cifar10:%s: not a directory (expected CIFAR-10 binary files "
                       "data_batch_1.bin .. data_batch_5.bin, test_batch.bin)", dir);
    size_t plen = strlen(dir) + 32;
    char *path = malloc(plen);
    if (!path)
        return fp_fail(FP_ENOMEM, "data: out of memory");
    int found = 0, exists, rc = FP_OK;
    for (int b = 1; b <= 5 && rc == FP_OK; b++) {
        snprintf(path, plen, "%s/data_batch_%d.bin", dir, b);
        rc = read_records(path, &c->data[0], &ds->size[0], &exists);
        found += exists;
    }
    if (rc == FP_OK && !found)
        rc = fp_fail(FP_EIO, "cifar10:%s: no training files (expected data_batch_1.bin .. data_batch_5.bin "
                     "of the CIFAR-10 binary version)", dir);
    if (rc == FP_OK) {
        snprintf(path, plen, "%s/test_batch.bin", dir);
        rc = read_records(path, &c->data[1], &ds->size[1], &exists);
    }
    free(path);
    return rc;
}
