/* test_data_cifar10.c — `cifar10:DIR` on CIFAR binary files written at test time: exact values and
 * labels after normalisation, a partial set of training files, the pad+crop+flip augmentation, resizing,
 * and the errors for a missing directory/files, a truncated file and a bad label (naming file and record). */
#include "data_testutil.h"
#include "trainer/data/data.h"
#include "error.h"
#include "tap.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC 3073

static uint8_t pix(int file, int rec, int c, int y, int x)
{
    return (uint8_t)(file * 37 + rec * 11 + c * 80 + y * 5 + x * 3);
}

/* A file of nrec records; labels (file + rec) % 10 unless bad_label_rec >= 0. extra: trailing bytes. */
static int write_cifar(const char *dir, const char *name, int file, int nrec, int bad_label_rec, int extra)
{
    size_t len = (size_t)nrec * REC + (size_t)extra;
    uint8_t *buf = calloc(len ? len : 1, 1);
    for (int r = 0; r < nrec; r++) {
        uint8_t *p = buf + (size_t)r * REC;
        p[0] = (uint8_t)(r == bad_label_rec ? 10 : (file + r) % 10);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    p[1 + c * 1024 + y * 32 + x] = pix(file, r, c, y, x);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = tu_write_file(path, buf, len);
    free(buf);
    return rc;
}

/* x (32x32 HWC, normalised) is record rec of file `file`, exactly. */
static int is_record(const float *x, int file, int rec)
{
    for (int y = 0; y < 32; y++)
        for (int xx = 0; xx < 32; xx++)
            for (int c = 0; c < 3; c++)
                if (x[(y * 32 + xx) * 3 + c] != dt_norm(pix(file, rec, c, y, xx), c))
                    return 0;
    return 1;
}

static int open_cifar(fp_dataset **ds, const char *dir, int size, int augment)
{
    return dt_open(ds, "cifar10", dir, size, 9, augment, 1);
}

int main(void)
{
    char *root = tu_mkdir(), dir[4200], path[4300];
    if (!root)
        tap_skip_all("cannot create a temporary directory");
    snprintf(dir, sizeof dir, "%s/cifar", root);
    mkdir(dir, 0755);

    /* missing files, missing directory */
    fp_dataset *ds = NULL;
    int rc = open_cifar(&ds, dir, 32, 0);
    tap_is_int(rc, FP_EIO, "no data_batch files: FP_EIO");
    tap_ok(strstr(fp_error_message(), dir) && strstr(fp_error_message(), "data_batch_1.bin"),
           "message names DIR and the expected files: %s", fp_error_message());
    snprintf(path, sizeof path, "%s/nonexistent", root);
    rc = open_cifar(&ds, path, 32, 0);
    tap_ok(rc != FP_OK && strstr(fp_error_message(), path), "missing directory: %s", fp_error_message());

    /* partial set: batches 1 and 3, plus the test batch */
    write_cifar(dir, "data_batch_1.bin", 1, 5, -1, 0);
    write_cifar(dir, "data_batch_3.bin", 3, 3, -1, 0);
    rc = open_cifar(&ds, dir, 32, 0);
    tap_is_int(rc, FP_OK, "opens with data_batch_1 and _3 only");
    if (rc != FP_OK)
        tap_diag("%s", fp_error_message());
    tap_is_int(ds ? fp_dataset_size(ds, FP_SPLIT_TRAIN) : -1, 8, "8 training records");
    tap_is_int(ds ? fp_dataset_size(ds, FP_SPLIT_VAL) : -1, 0, "no test_batch.bin: no validation split");
    tap_is_str(ds ? fp_dataset_class_name(ds, 3) : "", "cat", "class names are CIFAR-10's");
    fp_loader *ld = NULL;
    fp_loader_opts lo;
    fp_loader_opts_default(&lo);
    lo.split = FP_SPLIT_VAL;
    lo.batch = 2;
    tap_is_int(ds ? fp_loader_start(&ld, ds, &lo) : 0, FP_EINVAL, "loader on the absent validation split: FP_EINVAL");
    fp_dataset_close(ds);

    write_cifar(dir, "test_batch.bin", 6, 4, -1, 0);
    rc = open_cifar(&ds, dir, 32, 0);
    tap_is_int(rc, FP_OK, "opens with test_batch.bin");
    float *x = malloc(64 * 64 * 3 * sizeof *x), *y = malloc(64 * 64 * 3 * sizeof *y);
    int lab = -1;
    /* train index 6 = data_batch_3 record 1 */
    fp_dataset_get(ds, FP_SPLIT_TRAIN, 6, 0, x, &lab);
    tap_is_int(lab, (3 + 1) % 10, "label of train sample 6 (data_batch_3.bin record 1)");
    tap_ok(is_record(x, 3, 1), "pixels of train sample 6 exact after normalisation (planes -> HWC)");
    fp_dataset_get(ds, FP_SPLIT_VAL, 3, 0, x, &lab);
    tap_ok(lab == (6 + 3) % 10 && is_record(x, 6, 3), "validation sample 3 (test_batch.bin record 3) exact");
    fp_dataset_close(ds);

    /* augmentation: pad 4 + random crop + flip, found by brute force among the 162 possibilities */
    rc = open_cifar(&ds, dir, 32, 1);
    fp_dataset_get(ds, FP_SPLIT_TRAIN, 2, 0, x, &lab);
    int matches = 0, shifted = 0;
    for (int e = 0; e < 8; e++) {
        fp_dataset_get(ds, FP_SPLIT_TRAIN, 2, e, x, &lab);
        int found = 0;
        for (int dy = 0; dy <= 8 && !found; dy++)
            for (int dx = 0; dx <= 8 && !found; dx++)
                for (int flip = 0; flip < 2 && !found; flip++) {
                    int ok = 1;
                    for (int yy = 0; yy < 32 && ok; yy++)
                        for (int xx = 0; xx < 32 && ok; xx++) {
                            int sx = (flip ? 31 - xx : xx) + dx - 4, sy = yy + dy - 4;
                            for (int c = 0; c < 3; c++) {
                                uint8_t v = sx < 0 || sx > 31 || sy < 0 || sy > 31 ? 0 : pix(1, 2, c, sy, sx);
                                if (x[(yy * 32 + xx) * 3 + c] != dt_norm(v, c))
                                    ok = 0;
                            }
                        }
                    if (ok) {
                        found = 1;
                        shifted += dx != 4 || dy != 4 || flip;
                    }
                }
        matches += found;
    }
    tap_is_int(matches, 8, "every augmented sample is a 4-padded crop (+flip) of the record");
    tap_ok(shifted > 0, "augmentation moves or flips the image (%d of 8 epochs)", shifted);
    fp_dataset_get(ds, FP_SPLIT_TRAIN, 2, 5, x, &lab);
    fp_dataset_get(ds, FP_SPLIT_TRAIN, 2, 5, y, &lab);
    tap_ok(!memcmp(x, y, 32 * 32 * 3 * sizeof *x), "augmentation deterministic for (seed, epoch, index)");
    fp_dataset_close(ds);

    /* resize to 64: a smooth image stays within its range, a constant image stays constant */
    rc = open_cifar(&ds, dir, 64, 0);
    fp_dataset_get(ds, FP_SPLIT_TRAIN, 0, 0, x, &lab);
    int finite = 1;
    for (int i = 0; i < 64 * 64 * 3; i++)
        finite &= isfinite(x[i]) && x[i] >= dt_norm(0, i % 3) - 1e-4f && x[i] <= dt_norm(255, i % 3) + 1e-4f;
    tap_ok(rc == FP_OK && finite, "resized to 64x64: values within the normalised range");
    tap_is_double(x[0], dt_norm(pix(1, 0, 0, 0, 0), 0), 1e-5, 0, "corner pixel of the upscaled image = source corner");
    fp_dataset_close(ds);

    /* truncated file: 2 records + 100 bytes */
    write_cifar(dir, "data_batch_2.bin", 2, 2, -1, 100);
    snprintf(path, sizeof path, "%s/data_batch_2.bin", dir);
    rc = open_cifar(&ds, dir, 32, 0);
    tap_is_int(rc, FP_EFORMAT, "truncated file: FP_EFORMAT");
    tap_ok(strstr(fp_error_message(), path) && strstr(fp_error_message(), "record 2") &&
           strstr(fp_error_message(), "offset 6146"), "message names the file and the incomplete record: %s",
           fp_error_message());
    tap_ok(strchr(fp_error_message(), '\n') == NULL, "one line");

    /* bad label in record 1 */
    write_cifar(dir, "data_batch_2.bin", 2, 3, 1, 0);
    rc = open_cifar(&ds, dir, 32, 0);
    tap_is_int(rc, FP_EFORMAT, "label 10: FP_EFORMAT");
    tap_ok(strstr(fp_error_message(), path) && strstr(fp_error_message(), "record 1"),
           "message names the file and the record: %s", fp_error_message());

    /* empty file */
    write_cifar(dir, "data_batch_2.bin", 2, 0, -1, 0);
    rc = open_cifar(&ds, dir, 32, 0);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), path), "empty file: %s", fp_error_message());

    /* a FIFO as a batch file: refused at once, never read (issue 21; alarm: the old fopen blocked forever) */
    unlink(path);
    int made = mkfifo(path, 0644) == 0;
    alarm(20);
    rc = open_cifar(&ds, dir, 32, 0);
    alarm(0);
    tap_ok(made && rc == FP_EIO && strstr(fp_error_message(), path) && strstr(fp_error_message(), "FIFO"),
           "a FIFO: FP_EIO at once, naming it: %s", fp_error_message());
    unlink(path);

    free(x);
    free(y);
    tap_ok(tu_rmdir(root) == 0, "temporary directory removed");
    return tap_done();
}
