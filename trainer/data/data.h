/* data.h — datasets (synthetic, CIFAR-10 binary, ImageNet-style image folders) and the threaded
 * batch loader of the CPU reference trainer. Promise: a batch's contents depend only on (seed,
 * epoch, batch index), never on thread count or timing; errors come back as one line naming the file. */
#ifndef FP_DATA_H
#define FP_DATA_H

#include <stdint.h>

/* ---- datasets --------------------------------------------------------------------------------
 * Spec strings (fp_dataset_open):
 *   synthetic        built-in procedural 10-class set: 50000 training images, 10000 validation.
 *   synthetic:N      the same with N training images (N >= 10) and max(10, N/5) validation images.
 *                    Sample i of a split is generated from (seed, split, i); label = i % 10, so the
 *                    classes are balanced (exactly when the size is a multiple of 10).
 *   cifar10:DIR      CIFAR-10 binary version: trains on whichever of DIR/data_batch_1.bin .. _5.bin
 *                    exist (at least one), validates on DIR/test_batch.bin when present.
 *   imagefolder:DIR  DIR/train/CLASS/IMAGE.{jpg,jpeg,png} (extensions case-insensitive) and optionally
 *                    DIR/val/CLASS/...; classes are the sorted names of train/'s subdirectories.
 * Transforms (training split with augment on / everything else):
 *   synthetic        random horizontal flip / none (each sample already has random placement).
 *   cifar10          random 32x32 crop of the image padded by 4 black pixels + flip / none; then
 *                    bilinear resize to image_size when it is not 32.
 *   imagefolder      RandomResizedCrop(image_size, scale 0.08-1, ratio 3/4-4/3) + flip /
 *                    Resize(shorter side round(S*256/224)) + CenterCrop(S)  (torchvision's recipe).
 * All outputs: RGB scaled to [0,1], normalised with ImageNet's mean/std, NHWC float. */

enum { FP_SPLIT_TRAIN = 0, FP_SPLIT_VAL = 1 };

extern const float fp_imagenet_mean[3];   /* 0.485, 0.456, 0.406 */
extern const float fp_imagenet_std[3];    /* 0.229, 0.224, 0.225 */

typedef struct {
    int image_size;   /* S: output images are S x S; 8..4096 (default 32) */
    uint64_t seed;    /* drives synthetic content, augmentation and shuffling (default 0) */
    int augment;      /* 1: training augmentation on the train split (default); 0: --augment none */
    int shuffle;      /* 1: reshuffle the train split every epoch (default); 0: --shuffle off */
} fp_data_opts;

typedef struct fp_dataset fp_dataset;

void fp_data_opts_default(fp_data_opts *opts);

/* Opens the dataset named by spec (NULL or "" means "synthetic"). FP_EINVAL for an unknown scheme
 * (the message lists the valid ones) or bad options; FP_EIO / FP_EFORMAT naming the file for missing,
 * truncated or malformed data. Image files of imagefolder are only listed here, decoded on use. */
int fp_dataset_open(fp_dataset **ds, const char *spec, const fp_data_opts *opts);
void fp_dataset_close(fp_dataset *ds);

int fp_dataset_num_classes(const fp_dataset *ds);
const char *fp_dataset_class_name(const fp_dataset *ds, int cls);  /* NULL when out of range */
int64_t fp_dataset_size(const fp_dataset *ds, int split);          /* 0 when the split is absent */
int fp_dataset_image_size(const fp_dataset *ds);
const char *fp_dataset_spec(const fp_dataset *ds);                  /* the canonical spec */

/* Prepares one sample exactly as the loader does for (split, index, epoch): out receives S*S*3
 * floats (HWC), *label its class. Thread-safe (allocates its own scratch). */
int fp_dataset_get(const fp_dataset *ds, int split, int64_t index, int64_t epoch,
                   float *out, int *label);

/* The dataset index at position pos of the given epoch's order: the identity when shuffling is off
 * or for the validation split, else a Fisher-Yates permutation seeded by (seed, split, epoch).
 * O(N) per call: for tests and tools; the loader caches permutations. */
int64_t fp_dataset_order_index(const fp_dataset *ds, int split, int64_t epoch, int64_t pos);

/* ---- loader ----------------------------------------------------------------------------------
 * A pool of worker threads prepares batches into a ring of `prefetch` batch buffers while the
 * consumer computes. Training (drop_last): an epoch has floor(N / batch) batches, the last N % batch
 * images of the epoch's order are skipped. Evaluation (no drop_last): ceil(N / batch) batches, the
 * last one holding the remaining n < batch images (fp_batch.n says how many). */

typedef struct {
    int split;            /* FP_SPLIT_TRAIN or FP_SPLIT_VAL */
    int batch;            /* images per batch, >= 1 */
    int threads;          /* worker threads, 0..64; 0 prepares in fp_loader_next (no overlap) */
    int prefetch;         /* batches in the ring (0: threads + 2; ignored with 0 threads) */
    int drop_last;        /* 1 drop the partial last batch, 0 keep it, -1 (default): train 1, val 0 */
    int epochs;           /* epochs to deliver from the start position (0: unbounded) */
    int64_t start_epoch;  /* start position (from fp_loader_position for a resume) */
    int64_t start_batch;  /* 0 .. batches per epoch */
} fp_loader_opts;

typedef struct {
    int n;                /* images in this batch */
    int size;             /* S */
    float *images;        /* [n, S, S, 3] NHWC, normalised; owned by the loader */
    int32_t *labels;      /* [n] */
    int64_t epoch;        /* position of this batch */
    int64_t index;        /* batch index within its epoch */
} fp_batch;

/* fp_loader_next's return at the end of each epoch (positive, not an error). */
#define FP_DATA_END_OF_EPOCH 1

typedef struct fp_loader fp_loader;

/* {split train, batch 32, threads 2, prefetch 0, drop_last -1, epochs 0, start 0/0} */
void fp_loader_opts_default(fp_loader_opts *opts);

/* Starts the workers; ds must outlive the loader. FP_EINVAL for bad options, an absent/empty split
 * or a dataset with fewer images than one batch under drop_last. */
int fp_loader_start(fp_loader **ld, const fp_dataset *ds, const fp_loader_opts *opts);

/* Blocks until the next batch is ready. FP_OK: *batch is valid until the next call (or stop).
 * FP_DATA_END_OF_EPOCH once after an epoch's last batch; the call after it starts the next epoch
 * (after the last of `epochs` epochs, every further call returns FP_DATA_END_OF_EPOCH).
 * Negative: a worker failed on this batch; the code and its message (fp_error_message) are those
 * of the worker, and every later call returns the same error. */
int fp_loader_next(fp_loader *ld, fp_batch *batch);

/* Position of the next batch fp_loader_next will deliver: saved in checkpoints, given back as
 * start_epoch / start_batch to resume at the same data. */
void fp_loader_position(const fp_loader *ld, int64_t *epoch, int64_t *batch_index);
int64_t fp_loader_batches_per_epoch(const fp_loader *ld);

/* Stops and joins the workers and frees the loader (NULL is fine). */
void fp_loader_stop(fp_loader *ld);

#endif
