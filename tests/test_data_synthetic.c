/* test_data_synthetic.c — the `synthetic` dataset: spec parsing and its errors, determinism from
 * (seed, split, index), balance, sane normalised values at several sizes, the flip augmentation, and
 * a learnability proxy (nearest-class-mean on raw pixels beats 50% on held-out samples). */
#include "data_testutil.h"
#include "trainer/data/data.h"
#include "trainer/data/data_internal.h"
#include "clock.h"
#include "error.h"
#include "tap.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static fp_dataset *open_syn(const char *spec, int size, uint64_t seed, int augment)
{
    return dt_open_ok(spec, size, seed, augment, 1);
}

static void test_specs(void)
{
    fp_dataset *ds = open_syn(NULL, 32, 0, 1);
    tap_ok(ds != NULL, "NULL spec opens synthetic");
    if (ds) {
        tap_is_int(fp_dataset_num_classes(ds), 10, "10 classes");
        tap_is_int(fp_dataset_size(ds, FP_SPLIT_TRAIN), 50000, "default train size");
        tap_is_int(fp_dataset_size(ds, FP_SPLIT_VAL), 10000, "default val size");
        tap_is_str(fp_dataset_spec(ds), "synthetic", "canonical spec");
        tap_is_str(fp_dataset_class_name(ds, 2), "triangle", "class name");
        tap_ok(fp_dataset_class_name(ds, 10) == NULL, "class name out of range is NULL");
        fp_dataset_close(ds);
    } else {
        tap_skip(6, "open failed");
    }
    ds = open_syn("synthetic:120", 32, 0, 1);
    tap_ok(ds && fp_dataset_size(ds, FP_SPLIT_TRAIN) == 120 && fp_dataset_size(ds, FP_SPLIT_VAL) == 24,
           "synthetic:120 -> 120 train, 24 val");
    fp_dataset_close(ds);

    fp_dataset *bad = NULL;
    fp_data_opts o;
    fp_data_opts_default(&o);
    int rc = fp_dataset_open(&bad, "foo:/x", &o);
    tap_is_int(rc, FP_EINVAL, "unknown scheme is FP_EINVAL");
    tap_is_str(fp_error_message(), "unknown data scheme 'foo': valid are synthetic, cifar10:DIR, imagefolder:DIR",
               "unknown scheme lists the valid ones");
    tap_ok(bad == NULL, "no dataset on error");
    tap_is_int(fp_dataset_open(&bad, "synthetic:abc", &o), FP_EINVAL, "synthetic:abc rejected");
    tap_is_int(fp_dataset_open(&bad, "synthetic:5", &o), FP_EINVAL, "synthetic:5 rejected (N >= 10)");
    tap_is_int(fp_dataset_open(&bad, "cifar10", &o), FP_EINVAL, "cifar10 without DIR rejected");
    tap_ok(strstr(fp_error_message(), "cifar10:DIR") != NULL, "message shows the form: %s", fp_error_message());
    o.image_size = 4;
    tap_is_int(fp_dataset_open(&bad, "synthetic", &o), FP_EINVAL, "image size 4 rejected");
}

static void test_determinism(void)
{
    const int s = 64;
    size_t nf = (size_t)s * s * 3;
    float *a = malloc(nf * sizeof *a), *b = malloc(nf * sizeof *b);
    fp_dataset *d1 = open_syn("synthetic", s, 42, 0), *d2 = open_syn("synthetic", s, 42, 0);
    fp_dataset *d3 = open_syn("synthetic", s, 43, 0);
    int la, lb;
    fp_dataset_get(d1, FP_SPLIT_TRAIN, 7, 0, a, &la);
    fp_dataset_get(d2, FP_SPLIT_TRAIN, 7, 5, b, &lb);
    tap_ok(!memcmp(a, b, nf * sizeof *a) && la == lb, "same seed and index: identical bytes (any epoch without augment)");
    fp_dataset_get(d3, FP_SPLIT_TRAIN, 7, 0, b, &lb);
    tap_ok(memcmp(a, b, nf * sizeof *a) != 0 && la == lb, "another seed: another image, same label");
    fp_dataset_get(d1, FP_SPLIT_TRAIN, 17, 0, b, &lb);
    tap_ok(memcmp(a, b, nf * sizeof *a) != 0 && la == lb, "another index of the same class: another image");
    fp_dataset_get(d1, FP_SPLIT_VAL, 7, 0, b, &lb);
    tap_ok(memcmp(a, b, nf * sizeof *a) != 0, "validation sample 7 differs from training sample 7");
    tap_is_int(fp_dataset_get(d1, FP_SPLIT_TRAIN, 50000, 0, b, &lb), FP_EINVAL, "index out of range");

    /* flip augmentation: the output is the image or its mirror, depending on the epoch only */
    fp_dataset *da = open_syn("synthetic", s, 42, 1);
    int seen_plain = 0, seen_flip = 0, all_match = 1;
    for (int e = 0; e < 16; e++) {
        fp_dataset_get(da, FP_SPLIT_TRAIN, 7, e, b, &lb);
        if (!memcmp(a, b, nf * sizeof *a)) {
            seen_plain++;
            continue;
        }
        int mirror = 1;
        for (int y = 0; y < s && mirror; y++)
            for (int x = 0; x < s && mirror; x++)
                for (int c = 0; c < 3; c++)
                    if (b[((size_t)y * s + x) * 3 + c] != a[((size_t)y * s + (s - 1 - x)) * 3 + c])
                        mirror = 0;
        if (mirror)
            seen_flip++;
        else
            all_match = 0;
    }
    tap_ok(all_match && seen_plain > 0 && seen_flip > 0, "augmented sample is the image or its mirror (%d plain, %d flipped)",
           seen_plain, seen_flip);
    fp_dataset_get(da, FP_SPLIT_VAL, 7, 3, b, &lb);
    fp_dataset_get(d1, FP_SPLIT_VAL, 7, 3, a, &la);
    tap_ok(!memcmp(a, b, nf * sizeof *a), "validation is never augmented");
    fp_dataset_close(da);
    fp_dataset_close(d1);
    fp_dataset_close(d2);
    fp_dataset_close(d3);
    free(a);
    free(b);
}

static void test_values(void)
{
    int sizes[] = { 8, 32, 33, 48, 96 };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int s = sizes[k];
        size_t nf = (size_t)s * s * 3;
        float *x = malloc(nf * sizeof *x);
        fp_dataset *ds = open_syn("synthetic", s, 1, 0);
        double sum[3] = { 0 }, sq[3] = { 0 };
        int finite = 1, in_range = 1, counts[10] = { 0 };
        const int n = 100;
        for (int i = 0; i < n; i++) {
            int lab;
            fp_dataset_get(ds, FP_SPLIT_TRAIN, i, 0, x, &lab);
            counts[lab]++;
            for (size_t j = 0; j < nf; j++) {
                int c = (int)(j % 3);
                float lo = (0.0f - fp_imagenet_mean[c]) / fp_imagenet_std[c] - 1e-5f;
                float hi = (1.0f - fp_imagenet_mean[c]) / fp_imagenet_std[c] + 1e-5f;
                if (!isfinite(x[j]))
                    finite = 0;
                if (x[j] < lo || x[j] > hi)
                    in_range = 0;
                sum[c] += x[j];
                sq[c] += (double)x[j] * x[j];
            }
        }
        int balanced = 1;
        for (int c = 0; c < 10; c++)
            balanced &= counts[c] == n / 10;
        double cnt = (double)n * s * s, worst_mean = 0, min_sd = 1e9, max_sd = 0;
        for (int c = 0; c < 3; c++) {
            double m = sum[c] / cnt, sd = sqrt(sq[c] / cnt - m * m);
            worst_mean = fmax(worst_mean, fabs(m));
            min_sd = fmin(min_sd, sd);
            max_sd = fmax(max_sd, sd);
        }
        tap_ok(finite && in_range, "%dx%d: values finite and within the normalised [0,1] range", s, s);
        tap_ok(balanced, "%dx%d: labels of samples 0..99 are balanced (10 per class)", s, s);
        /* normalised data: per-channel mean within +-1, standard deviation between 0.4 and 2 */
        tap_ok(worst_mean < 1.0 && min_sd > 0.4 && max_sd < 2.0, "%dx%d: |mean| %.3f, std %.3f..%.3f", s, s,
               worst_mean, min_sd, max_sd);
        fp_dataset_close(ds);
        free(x);
    }
}

/* Nearest class mean on raw pixels: 500 training samples -> 10 means; 500 validation samples. */
static void test_learnable(void)
{
    const int s = 32, n = 500;
    size_t nf = (size_t)s * s * 3;
    fp_dataset *ds = open_syn("synthetic", s, 3, 0);
    double *mean = calloc(10 * nf, sizeof *mean);
    float *x = malloc(nf * sizeof *x);
    int counts[10] = { 0 };
    for (int i = 0; i < n; i++) {
        int lab;
        fp_dataset_get(ds, FP_SPLIT_TRAIN, i, 0, x, &lab);
        counts[lab]++;
        for (size_t j = 0; j < nf; j++)
            mean[lab * nf + j] += x[j];
    }
    for (int c = 0; c < 10; c++)
        for (size_t j = 0; j < nf; j++)
            mean[c * nf + j] /= counts[c];
    int correct = 0;
    for (int i = 0; i < n; i++) {
        int lab, best = -1;
        double bestd = 1e300;
        fp_dataset_get(ds, FP_SPLIT_VAL, i, 0, x, &lab);
        for (int c = 0; c < 10; c++) {
            double d = 0;
            for (size_t j = 0; j < nf; j++) {
                double t = x[j] - mean[c * nf + j];
                d += t * t;
            }
            if (d < bestd) {
                bestd = d;
                best = c;
            }
        }
        correct += best == lab;
    }
    double acc = (double)correct / n;
    tap_ok(acc > 0.5, "nearest-class-mean on raw 32x32 pixels: %.1f%% of 500 validation samples (chance 10%%)",
           100.0 * acc);
    tap_ok(acc < 0.99, "... but not trivially separable (%.1f%% < 99%%)", 100.0 * acc);
    fp_dataset_close(ds);
    free(mean);
    free(x);
}

static void test_speed(void)
{
    const int s = 64;
    float *x = malloc((size_t)s * s * 3 * sizeof *x);
    int lab;
    const double t0 = fp_clock_mono_s();
    int n = 0;
    double el = 0;
    do {
        fp_data_synthetic_render(0, 0, n++, s, x, &lab);
        el = fp_clock_mono_s() - t0;
    } while (el < 0.2);
    tap_diag("synthetic 64x64 on one core: %.0f images/s (figure only)", n / el);
    free(x);
}

int main(void)
{
    test_specs();
    test_determinism();
    test_values();
    test_learnable();
    test_speed();
    return tap_done();
}
