/* test_data_imagefolder.c — `imagefolder:DIR` on PNG/JPEG files written at test time, and the image
 * transforms: exact PNG decode, close JPEG decode (RGB, grayscale), class and file order, errors
 * (corrupt/truncated files naming the file, val class not in train, empty/missing train), center-crop
 * geometry exact on a gradient, RandomResizedCrop bounds/determinism/fallback, flip, antialiasing. */
#include "data_testutil.h"
#include "trainer/data/data.h"
#include "trainer/data/data_internal.h"
#include "error.h"
#include "tap.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint8_t grad(int x, int y, int c)
{
    return (uint8_t)(c == 0 ? x * 6 : c == 1 ? y * 6 : 255 - 3 * (x + y));
}

static uint8_t *gradient_image(int w, int h)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                p[((size_t)y * w + x) * 3 + c] = grad(x, y, c);
    return p;
}

static int open_folder(fp_dataset **ds, const char *dir, int size, int augment)
{
    return dt_open(ds, "imagefolder", dir, size, 5, augment, 1);
}

static void test_transforms(void)
{
    /* center crop geometry: S = 224 on 500x375 -> Resize(256) gives 341x256, crop at (58, 16) */
    double box[4];
    fp_image_center_crop_box(500, 375, 224, box);
    tap_is_double(box[0], 58.0 * 500 / 341, 1e-9, 0, "center crop x0 (round(58.5) = 58, half to even)");
    tap_is_double(box[1], 16.0 * 375 / 256, 1e-9, 0, "center crop y0");
    tap_is_double(box[2] - box[0], 224.0 * 500 / 341, 1e-9, 0, "center crop width in source pixels");
    tap_is_double(box[3] - box[1], 224.0 * 375 / 256, 1e-9, 0, "center crop height in source pixels");

    /* RandomResizedCrop: within bounds, area and ratio near the requested ranges, deterministic */
    int in_bounds = 1, in_ranges = 1, same = 1;
    for (int i = 0; i < 2000; i++) {
        fp_data_rng r1 = fp_data_rng_seed(1, FP_RNG_AUGMENT, 0, 0, i), r2 = r1;
        int t, l, h, w, t2, l2, h2, w2;
        fp_image_rrc_params(320, 240, 0.08, 1.0, 0.75, 4.0 / 3.0, &r1, &t, &l, &h, &w);
        fp_image_rrc_params(320, 240, 0.08, 1.0, 0.75, 4.0 / 3.0, &r2, &t2, &l2, &h2, &w2);
        same &= t == t2 && l == l2 && h == h2 && w == w2;
        in_bounds &= t >= 0 && l >= 0 && h > 0 && w > 0 && t + h <= 240 && l + w <= 320;
        double area = (double)h * w / (320.0 * 240.0), ratio = (double)w / h;
        /* rounding of w and h to integers: allow 5% on area and 10% on ratio (small crops) */
        in_ranges &= area >= 0.08 * 0.95 && area <= 1.0 && ratio >= 0.75 * 0.9 && ratio <= 4.0 / 3.0 * 1.1;
    }
    tap_ok(in_bounds, "RandomResizedCrop: 2000 crops inside the image");
    tap_ok(in_ranges, "RandomResizedCrop: area in [0.08, 1], ratio in [3/4, 4/3] (up to rounding)");
    tap_ok(same, "RandomResizedCrop: deterministic for the same RNG state");
    fp_data_rng r = fp_data_rng_seed(1, FP_RNG_AUGMENT, 0, 0, 0);
    int t, l, h, w;
    fp_image_rrc_params(1000, 10, 0.08, 1.0, 0.75, 4.0 / 3.0, &r, &t, &l, &h, &w);
    tap_ok(t == 0 && h == 10 && w == 13 && l == 493, "RandomResizedCrop fallback on 1000x10: center 13x10 at 493 (got %dx%d at %d,%d)",
           w, h, l, t);

    /* flip and antialiasing */
    fp_data_scratch sc = { 0 };
    uint8_t *img = gradient_image(20, 12);
    float a[20 * 12 * 3], b[20 * 12 * 3];
    double whole[4] = { 0, 0, 20, 12 };
    fp_image_resample(img, 20, 12, whole, 20, 12, 0, a, &sc);
    fp_image_resample(img, 20, 12, whole, 20, 12, 1, b, &sc);
    int mirror = 1, ident = 1;
    for (int y = 0; y < 12; y++)
        for (int x = 0; x < 20; x++)
            for (int c = 0; c < 3; c++) {
                mirror &= b[(y * 20 + x) * 3 + c] == a[(y * 20 + 19 - x) * 3 + c];
                ident &= a[(y * 20 + x) * 3 + c] == dt_norm(grad(x, y, c), c);
            }
    tap_ok(ident, "resample of the whole image at its size is the identity");
    tap_ok(mirror, "flip mirrors left-right");
    uint8_t checker[16 * 16 * 3];
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++)
            for (int c = 0; c < 3; c++)
                checker[(y * 16 + x) * 3 + c] = ((x + y) & 1) ? 255 : 0;
    double cb[4] = { 0, 0, 16, 16 };
    float small[4 * 4 * 3];
    fp_image_resample(checker, 16, 16, cb, 4, 4, 0, small, &sc);
    double worst = 0;
    for (int i = 0; i < 4 * 4 * 3; i++) {
        int c = i % 3;
        double v = (small[i] * fp_imagenet_std[c] + fp_imagenet_mean[c]) * 255.0;
        worst = fmax(worst, fabs(v - 127.5));
    }
    tap_ok(worst < 20.0, "4x downscale of a 1-pixel checkerboard is antialiased to grey (worst |v-127.5| = %.1f)", worst);
    free(img);
    fp_data_scratch_free(&sc);
}

int main(void)
{
    char *root = tu_mkdir(), dir[4200], path[4400];
    if (!root)
        tap_skip_all("cannot create a temporary directory");
    test_transforms();

    /* classes: strcmp order ("Zebra" < "apple" < "cat"); files sorted; .PNG/.JPEG accepted, .txt ignored */
    snprintf(dir, sizeof dir, "%s/ds", root);
    dt_mkdirs(dir, "train", "cat");
    dt_mkdirs(dir, "train", "apple");
    dt_mkdirs(dir, "train", "Zebra");
    uint8_t *g37 = gradient_image(37, 37), *g40 = gradient_image(40, 40);
    snprintf(path, sizeof path, "%s/train/cat/b.png", dir);
    dt_write_png(path, g37, 37, 37);
    snprintf(path, sizeof path, "%s/train/cat/a.JPEG", dir);
    dt_write_jpeg(path, g40, 40, 40, 3, 95);
    snprintf(path, sizeof path, "%s/train/cat/notes.txt", dir);
    tu_write_file(path, "x", 1);
    snprintf(path, sizeof path, "%s/train/apple/x.PNG", dir);
    dt_write_png(path, g40, 40, 40);
    uint8_t grey[24 * 30];
    for (int i = 0; i < 24 * 30; i++)
        grey[i] = (uint8_t)(i % 24 * 10);
    snprintf(path, sizeof path, "%s/train/Zebra/g.jpg", dir);
    dt_write_jpeg(path, grey, 24, 30, 1, 95);

    fp_dataset *ds = NULL;
    int rc = open_folder(&ds, dir, 32, 0);
    tap_is_int(rc, FP_OK, "opens train/ without val/");
    if (rc)
        tap_diag("%s", fp_error_message());
    if (!ds)
        return tap_done();
    tap_is_int(fp_dataset_num_classes(ds), 3, "3 classes");
    tap_ok(!strcmp(fp_dataset_class_name(ds, 0), "Zebra") && !strcmp(fp_dataset_class_name(ds, 1), "apple") &&
           !strcmp(fp_dataset_class_name(ds, 2), "cat"), "classes in sorted (strcmp) order");
    tap_is_int(fp_dataset_size(ds, FP_SPLIT_TRAIN), 4, "4 images (notes.txt ignored)");
    tap_is_int(fp_dataset_size(ds, FP_SPLIT_VAL), 0, "missing val/: empty validation split");

    /* order: Zebra/g.jpg, apple/x.PNG, cat/a.JPEG, cat/b.png. Eval transform at S = 32 on the 37x37
     * PNG: Resize(37) is the identity, CenterCrop(32) starts at round(2.5) = 2: exact values */
    float *x = malloc(64 * 64 * 3 * sizeof *x), *y = malloc(64 * 64 * 3 * sizeof *y);
    int lab = -1, exact = 1;
    rc = fp_dataset_get(ds, FP_SPLIT_TRAIN, 3, 0, x, &lab);
    tap_ok(rc == FP_OK && lab == 2, "cat/b.png is sample 3, label 2");
    for (int yy = 0; yy < 32; yy++)
        for (int xx = 0; xx < 32; xx++)
            for (int c = 0; c < 3; c++)
                exact &= x[(yy * 32 + xx) * 3 + c] == dt_norm(grad(xx + 2, yy + 2, c), c);
    tap_ok(exact, "PNG decoded exactly; Resize(37)+CenterCrop(32) crops at (2,2) exactly");

    /* JPEG decode close to the source (quality 95, smooth gradient) */
    fp_data_scratch sc = { 0 };
    unsigned char *jb;
    unsigned long jlen;
    dt_jpeg_mem(g40, 40, 40, 3, 95, &jb, &jlen);
    int w = 0, h = 0;
    rc = fp_image_decode(jb, jlen, "mem.jpg", &sc, &w, &h);
    double maxd = 0, meand = 0;
    for (int i = 0; rc == FP_OK && i < 40 * 40 * 3; i++) {
        double d = fabs((double)((uint8_t *)sc.image.p)[i] - g40[i]);
        maxd = fmax(maxd, d);
        meand += d / (40 * 40 * 3);
    }
    tap_ok(rc == FP_OK && w == 40 && h == 40, "JPEG decodes to 40x40");
    tap_ok(maxd <= 16 && meand <= 3, "JPEG pixels close to the source (max |d| %.0f <= 16, mean %.2f <= 3)", maxd, meand);
    free(jb);
    rc = fp_dataset_get(ds, FP_SPLIT_TRAIN, 0, 0, x, &lab);
    int grey_ok = rc == FP_OK && lab == 0;
    for (int i = 0; i < 32 * 32 && grey_ok; i++) {
        double r = x[3 * i] * fp_imagenet_std[0] + fp_imagenet_mean[0];
        double g = x[3 * i + 1] * fp_imagenet_std[1] + fp_imagenet_mean[1];
        grey_ok &= fabs(r - g) < 1e-5;
    }
    tap_ok(grey_ok, "grayscale JPEG comes out as RGB with equal channels");

    /* training transform: deterministic per (seed, epoch, index), varies with the epoch */
    fp_dataset_close(ds);
    rc = open_folder(&ds, dir, 24, 1);
    fp_dataset_get(ds, FP_SPLIT_TRAIN, 1, 3, x, &lab);
    fp_dataset_get(ds, FP_SPLIT_TRAIN, 1, 3, y, &lab);
    int same = !memcmp(x, y, 24 * 24 * 3 * sizeof *x);
    fp_dataset_get(ds, FP_SPLIT_TRAIN, 1, 4, y, &lab);
    tap_ok(same && memcmp(x, y, 24 * 24 * 3 * sizeof *x), "RandomResizedCrop+flip: same epoch same crop, next epoch another");
    fp_dataset_close(ds);

    /* val: same class names; a val class missing from train is an error */
    dt_mkdirs(dir, "val", "cat");
    snprintf(path, sizeof path, "%s/val/cat/v.png", dir);
    dt_write_png(path, g37, 37, 37);
    rc = open_folder(&ds, dir, 32, 0);
    tap_ok(rc == FP_OK && fp_dataset_size(ds, FP_SPLIT_VAL) == 1, "val/cat holds 1 image");
    if (rc == FP_OK) {
        fp_dataset_get(ds, FP_SPLIT_VAL, 0, 0, x, &lab);
        tap_is_int(lab, 2, "val/cat maps to the train label of cat");
        fp_dataset_close(ds);
    } else {
        tap_skip(1, "open failed");
    }
    dt_mkdirs(dir, "val", "dog");
    rc = open_folder(&ds, dir, 32, 0);
    /* the folder's contents: FP_EFORMAT (exit 1) like a corrupt image, not FP_EINVAL (exit 2: a bad spec) */
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "'dog'"), "val class not in train: FP_EFORMAT: %s",
           fp_error_message());

    /* corrupt files: garbage .jpg, truncated JPEG, broken PNG -> error naming the file, no crash */
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/bad", root);
    dt_mkdirs(bad, "train", "c");
    snprintf(path, sizeof path, "%s/train/c/1_garbage.jpg", bad);
    tu_write_file(path, "this is not an image at all", 27);
    unsigned char *tb;
    unsigned long tlen;
    uint8_t *noisy = malloc(96 * 96 * 3);
    for (int i = 0; i < 96 * 96 * 3; i++)
        noisy[i] = (uint8_t)((i * 2654435761u) >> 13);
    dt_jpeg_mem(noisy, 96, 96, 3, 90, &tb, &tlen);
    free(noisy);
    snprintf(path, sizeof path, "%s/train/c/2_truncated.jpg", bad);
    tu_write_file(path, tb, tlen * 7 / 10);   /* cut inside the entropy-coded scan */
    free(tb);
    dt_jpeg_mem(g40, 40, 40, 3, 90, &tb, &tlen);
    snprintf(path, sizeof path, "%s/train/c/3_header.jpg", bad);
    tb[20] ^= 0xFF;   /* inside the JFIF / quantisation header */
    tb[21] ^= 0xFF;
    tb[22] ^= 0xFF;
    tu_write_file(path, tb, 200);
    free(tb);
    static const uint8_t png_sig[16] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'X' };
    snprintf(path, sizeof path, "%s/train/c/4_broken.png", bad);
    tu_write_file(path, png_sig, sizeof png_sig);
    rc = open_folder(&ds, bad, 32, 0);
    tap_is_int(rc, FP_OK, "corrupt files are listed at open (decoded on use)");
    const char *names[4] = { "1_garbage.jpg", "2_truncated.jpg", "3_header.jpg", "4_broken.png" };
    for (int i = 0; i < 4 && ds; i++) {
        rc = fp_dataset_get(ds, FP_SPLIT_TRAIN, i, 0, x, &lab);
        const char *m = fp_error_message();
        tap_ok(rc == FP_EFORMAT && strstr(m, names[i]) && !strchr(m, '\n'), "%s: one-line error: %s", names[i], m);
    }
    fp_dataset_close(ds);

    /* empty and missing train */
    char empty[4200];
    snprintf(empty, sizeof empty, "%s/empty", root);
    dt_mkdirs(empty, "train", NULL);
    rc = open_folder(&ds, empty, 32, 0);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "empty"), "empty train/: FP_EFORMAT: %s",
           fp_error_message());
    dt_mkdirs(empty, "train", "nothing");
    rc = open_folder(&ds, empty, 32, 0);
    tap_ok(rc == FP_EFORMAT && strstr(fp_error_message(), "nothing"), "class without images: FP_EFORMAT: %s",
           fp_error_message());

    /* a listed image replaced by a FIFO: refused at once, never waited on (issue 21; alarm: the old
     * fopen blocked forever) */
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo", root);
    dt_mkdirs(fifo, "train", "c");
    snprintf(path, sizeof path, "%s/train/c/a.png", fifo);
    dt_write_png(path, g37, 37, 37);
    rc = open_folder(&ds, fifo, 32, 0);
    tap_is_int(rc, FP_OK, "one-image folder opens");
    if (ds) {
        unlink(path);
        int made = mkfifo(path, 0644) == 0;
        alarm(20);
        rc = fp_dataset_get(ds, FP_SPLIT_TRAIN, 0, 0, x, &lab);
        alarm(0);
        tap_ok(made && rc == FP_EIO && strstr(fp_error_message(), "a.png") && strstr(fp_error_message(), "FIFO"),
               "the image now a FIFO: FP_EIO at once: %s", fp_error_message());
        fp_dataset_close(ds);
    } else
        tap_skip(1, "open failed");
    snprintf(path, sizeof path, "%s/none", root);
    rc = open_folder(&ds, path, 32, 0);
    tap_ok(rc == FP_EIO && strstr(fp_error_message(), "train"), "missing train/: %s", fp_error_message());

    free(x);
    free(y);
    free(g37);
    free(g40);
    fp_data_scratch_free(&sc);
    tap_ok(tu_rmdir(root) == 0, "temporary directory removed");
    return tap_done();
}
