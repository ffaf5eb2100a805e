/* test_data_loader.c — the threaded batch loader: identical batches with 0, 1 and 3 threads and any
 * prefetch, --shuffle off order (first N, next N), shuffled epochs as permutations, drop_last and the
 * counted last evaluation batch, end-of-epoch markers, resume from a position, error propagation. */
#include "data_testutil.h"
#include "trainer/data/data.h"
#include "error.h"
#include "tap.h"
#include <stdlib.h>
#include <string.h>

#define S 16
#define SAMPLE (S * S * 3)

static fp_dataset *open_ds(const char *spec, int augment, int shuffle)
{
    return dt_open_ok(spec, S, 11, augment, shuffle);
}

static fp_loader *start(const fp_dataset *ds, int split, int batch, int threads, int prefetch, int epochs,
                        int64_t e0, int64_t b0)
{
    fp_loader_opts o;
    fp_loader_opts_default(&o);
    o.split = split;
    o.batch = batch;
    o.threads = threads;
    o.prefetch = prefetch;
    o.epochs = epochs;
    o.start_epoch = e0;
    o.start_batch = b0;
    fp_loader *ld = NULL;
    if (fp_loader_start(&ld, ds, &o) != FP_OK)
        tap_diag("loader: %s", fp_error_message());
    return ld;
}

/* The stream of `calls` fp_loader_next results: codes, then images and labels of each batch. */
typedef struct {
    int codes[64];
    int n[64];
    float *images;
    int32_t labels[64 * 8];
} stream_t;

static void record(fp_loader *ld, int calls, int batch, stream_t *st)
{
    memset(st, 0, sizeof *st);
    st->images = calloc((size_t)calls * batch * SAMPLE, sizeof(float));
    for (int i = 0; i < calls; i++) {
        fp_batch b;
        st->codes[i] = fp_loader_next(ld, &b);
        st->n[i] = b.n;
        if (st->codes[i] == FP_OK) {
            memcpy(st->images + (size_t)i * batch * SAMPLE, b.images, (size_t)b.n * SAMPLE * sizeof(float));
            memcpy(st->labels + i * batch, b.labels, (size_t)b.n * sizeof(int32_t));
        }
    }
}

static int same_stream(const stream_t *a, const stream_t *b, int calls, int batch)
{
    return !memcmp(a->codes, b->codes, (size_t)calls * sizeof(int)) && !memcmp(a->n, b->n, (size_t)calls * sizeof(int)) &&
           !memcmp(a->images, b->images, (size_t)calls * batch * SAMPLE * sizeof(float)) &&
           !memcmp(a->labels, b->labels, (size_t)calls * batch * sizeof(int32_t));
}

static void test_threads(void)
{
    /* synthetic:100, batch 8: 12 batches per epoch (drop_last), 2 epochs + markers = 26 calls */
    fp_dataset *ds = open_ds("synthetic:100", 1, 1);
    const int calls = 26;
    stream_t ref, other;
    fp_loader *ld = start(ds, FP_SPLIT_TRAIN, 8, 1, 0, 2, 0, 0);
    tap_is_int(ld ? fp_loader_batches_per_epoch(ld) : 0, 12, "100 images, batch 8: 12 batches per epoch (drop_last)");
    record(ld, calls, 8, &ref);
    fp_loader_stop(ld);
    tap_ok(ref.codes[12] == FP_DATA_END_OF_EPOCH && ref.codes[25] == FP_DATA_END_OF_EPOCH && ref.codes[0] == FP_OK &&
           ref.codes[11] == FP_OK && ref.codes[13] == FP_OK && ref.codes[24] == FP_OK,
           "end-of-epoch after batch 12 of each epoch");
    int cfg[][2] = { { 3, 0 }, { 3, 1 }, { 3, 7 }, { 0, 0 }, { 2, 2 } };
    for (size_t k = 0; k < sizeof cfg / sizeof *cfg; k++) {
        ld = start(ds, FP_SPLIT_TRAIN, 8, cfg[k][0], cfg[k][1], 2, 0, 0);
        record(ld, calls, 8, &other);
        fp_loader_stop(ld);
        tap_ok(same_stream(&ref, &other, calls, 8), "threads %d, prefetch %d: identical batches to 1 thread",
               cfg[k][0], cfg[k][1]);
        free(other.images);
    }
    /* shuffled epochs: batches follow fp_dataset_order_index, each epoch a different permutation */
    float *x = malloc(SAMPLE * sizeof *x);
    int follows = 1, differ = 0;
    for (int i = 0; i < calls; i++) {
        if (ref.codes[i] != FP_OK)
            continue;
        int epoch = i < 12 ? 0 : 1, b = i < 12 ? i : i - 13;
        for (int j = 0; j < 8; j++) {
            int64_t idx = fp_dataset_order_index(ds, FP_SPLIT_TRAIN, epoch, b * 8 + j);
            int lab;
            fp_dataset_get(ds, FP_SPLIT_TRAIN, idx, epoch, x, &lab);
            follows &= !memcmp(x, ref.images + ((size_t)i * 8 + j) * SAMPLE, SAMPLE * sizeof *x) &&
                       ref.labels[i * 8 + j] == lab;
            differ |= idx != fp_dataset_order_index(ds, FP_SPLIT_TRAIN, 1 - epoch, b * 8 + j);
        }
    }
    tap_ok(follows, "shuffled batches hold samples order_index(epoch, pos) with that epoch's augmentation");
    tap_ok(differ, "epochs 0 and 1 have different orders");
    int seen[100] = { 0 }, perm = 1;
    for (int p = 0; p < 100; p++) {
        int64_t idx = fp_dataset_order_index(ds, FP_SPLIT_TRAIN, 1, p);
        perm &= idx >= 0 && idx < 100 && !seen[idx]++;
    }
    tap_ok(perm, "an epoch's order is a permutation");
    free(x);
    free(ref.images);
    fp_dataset_close(ds);
}

static void test_fixed_order(void)
{
    fp_dataset *ds = open_ds("synthetic:100", 0, 0);
    fp_loader *ld = start(ds, FP_SPLIT_TRAIN, 8, 2, 0, 1, 0, 0);
    float *x = malloc(SAMPLE * sizeof *x);
    int ok = 1, nb = 0, rc;
    fp_batch b;
    while ((rc = fp_loader_next(ld, &b)) == FP_OK) {
        ok &= b.n == 8 && b.index == nb && b.epoch == 0 && b.size == S;
        for (int j = 0; j < b.n; j++) {
            int lab;
            fp_dataset_get(ds, FP_SPLIT_TRAIN, nb * 8 + j, 0, x, &lab);
            ok &= !memcmp(x, b.images + (size_t)j * SAMPLE, SAMPLE * sizeof *x) && b.labels[j] == (nb * 8 + j) % 10;
        }
        nb++;
    }
    tap_ok(ok && nb == 12 && rc == FP_DATA_END_OF_EPOCH, "--shuffle off --augment none: batch b holds images 8b..8b+7 (%d batches)", nb);
    tap_is_int(fp_loader_next(ld, &b), FP_DATA_END_OF_EPOCH, "after the last epoch: end-of-epoch again");
    int64_t e, bi;
    fp_loader_position(ld, &e, &bi);
    tap_ok(e == 1 && bi == 0, "position after one epoch: (1, 0)");
    fp_loader_stop(ld);

    /* evaluation: 20 images, batch 8 -> 8, 8, 4 */
    ld = start(ds, FP_SPLIT_VAL, 8, 2, 0, 1, 0, 0);
    int counts[4] = { 0 }, k = 0;
    while (k < 4 && (rc = fp_loader_next(ld, &b)) == FP_OK)
        counts[k++] = b.n;
    tap_ok(k == 3 && counts[0] == 8 && counts[1] == 8 && counts[2] == 4 && rc == FP_DATA_END_OF_EPOCH,
           "evaluation keeps the last partial batch: 8, 8, 4");
    fp_loader_stop(ld);
    free(x);

    /* bad options */
    fp_loader *bad = NULL;
    fp_loader_opts o;
    fp_loader_opts_default(&o);
    o.batch = 0;
    tap_is_int(fp_loader_start(&bad, ds, &o), FP_EINVAL, "batch 0 rejected");
    o.batch = 101;
    tap_ok(fp_loader_start(&bad, ds, &o) == FP_EINVAL && strstr(fp_error_message(), "fewer than one batch"),
           "batch larger than the training split: %s", fp_error_message());
    o.batch = 8;
    o.start_batch = 13;
    tap_is_int(fp_loader_start(&bad, ds, &o), FP_EINVAL, "start batch beyond the epoch rejected");
    fp_dataset_close(ds);
}

static void test_resume(void)
{
    fp_dataset *ds = open_ds("synthetic:100", 1, 1);
    fp_loader *a = start(ds, FP_SPLIT_TRAIN, 8, 2, 0, 0, 0, 0);
    fp_batch b;
    for (int i = 0; i < 5; i++)
        fp_loader_next(a, &b);
    int64_t e, bi;
    fp_loader_position(a, &e, &bi);
    tap_ok(e == 0 && bi == 5, "position after 5 batches: (0, 5)");
    fp_loader *r = start(ds, FP_SPLIT_TRAIN, 8, 3, 0, 0, e, bi);
    fp_batch ba, br;
    fp_loader_next(a, &ba);
    fp_loader_next(r, &br);
    tap_ok(ba.n == br.n && ba.epoch == br.epoch && ba.index == br.index &&
           !memcmp(ba.images, br.images, (size_t)ba.n * SAMPLE * sizeof(float)) &&
           !memcmp(ba.labels, br.labels, (size_t)ba.n * sizeof(int32_t)), "resumed loader delivers the same next batch");
    /* across the epoch boundary: run a to (0, 12), resume there */
    for (int i = 6; i < 12; i++)
        fp_loader_next(a, &ba);
    fp_loader_position(a, &e, &bi);
    fp_loader_stop(r);
    r = start(ds, FP_SPLIT_TRAIN, 8, 1, 0, 0, e, bi);
    int ca = fp_loader_next(a, &ba), cr = fp_loader_next(r, &br);
    tap_ok(e == 0 && bi == 12 && ca == FP_DATA_END_OF_EPOCH && cr == FP_DATA_END_OF_EPOCH,
           "resume at (0, 12): end-of-epoch first");
    ca = fp_loader_next(a, &ba);
    cr = fp_loader_next(r, &br);
    tap_ok(ca == FP_OK && cr == FP_OK && ba.epoch == 1 && br.epoch == 1 && ba.index == 0 &&
           !memcmp(ba.images, br.images, (size_t)ba.n * SAMPLE * sizeof(float)), "then epoch 1 batch 0, identical");
    fp_loader_stop(a);
    fp_loader_stop(r);
    /* stop while workers are busy: no hang, no leak */
    a = start(ds, FP_SPLIT_TRAIN, 8, 3, 6, 0, 0, 0);
    fp_loader_next(a, &b);
    fp_loader_stop(a);
    tap_ok(1, "stop with batches in flight");
    fp_dataset_close(ds);
}

static void test_errors(void)
{
    char *root = tu_mkdir(), dir[4200], path[4400];
    if (!root) {
        tap_skip(4, "no temporary directory");
        return;
    }
    snprintf(dir, sizeof dir, "%s/ds", root);
    dt_mkdirs(dir, "train", "a");
    uint8_t img[20 * 20 * 3];
    for (int i = 0; i < 20 * 20 * 3; i++)
        img[i] = (uint8_t)i;
    for (int i = 0; i < 9; i++) {
        snprintf(path, sizeof path, "%s/train/a/%d.png", dir, i);
        if (i == 5)
            tu_write_file(path, "broken", 6);
        else
            dt_write_png(path, img, 20, 20);
    }
    char spec[4300];
    snprintf(spec, sizeof spec, "imagefolder:%s", dir);
    fp_dataset *ds = open_ds(spec, 0, 0);
    fp_loader *ld = ds ? start(ds, FP_SPLIT_TRAIN, 2, 3, 0, 0, 0, 0) : NULL;
    if (!ld) {
        tap_skip(4, "open failed");
        fp_dataset_close(ds);
        tu_rmdir(root);
        return;
    }
    fp_batch b;
    int c0 = fp_loader_next(ld, &b), c1 = fp_loader_next(ld, &b);
    fp_error_clear();
    int c2 = fp_loader_next(ld, &b);   /* images 4, 5: 5.png is broken */
    tap_ok(c0 == FP_OK && c1 == FP_OK, "batches before the broken file arrive");
    tap_ok(c2 == FP_EFORMAT && strstr(fp_error_message(), "5.png"),
           "a worker's decode error reaches the consumer with its message: %s", fp_error_message());
    fp_error_clear();
    int c3 = fp_loader_next(ld, &b);
    tap_ok(c3 == FP_EFORMAT && strstr(fp_error_message(), "5.png"), "the error is sticky");
    fp_loader_stop(ld);
    fp_dataset_close(ds);
    tap_ok(tu_rmdir(root) == 0, "temporary directory removed");
}

int main(void)
{
    test_threads();
    test_fixed_order();
    test_resume();
    test_errors();
    return tap_done();
}
