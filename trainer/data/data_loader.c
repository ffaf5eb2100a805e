/* data_loader.c — the batch loader: worker threads fill a ring of prepared batches (NHWC floats and
 * labels) ahead of the consumer. Promise: batch g of the run is (epoch, index) = start + g, its
 * samples and augmentation a pure function of (seed, epoch, sample index); errors reach the consumer. */
#include "trainer/data/data_internal.h"
#include "error.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *images;
    int32_t *labels;
    int n;
    int64_t seq;       /* batch number (from the start) held, valid when ready */
    int64_t epoch, index;
    int ready;
    int err;
    char msg[512];
} slot_t;

typedef struct {
    int64_t epoch;
    int64_t *perm;
    uint64_t last_use;
} perm_cache_t;

struct fp_loader {
    const fp_dataset *ds;
    int split, batch, nthreads, k;
    int64_t n;               /* images in the split */
    int64_t per_epoch;       /* batches per epoch */
    int drop_last;
    int shuffled;
    int64_t e0, b0;          /* first batch the workers prepare */
    int64_t total;           /* batches to deliver, -1 unbounded */
    int64_t end_epoch;       /* with a bound: the epoch at which delivery stops */
    size_t sample_floats;
    slot_t *slots;

    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready;
    int stop;
    int64_t next_claim;      /* next batch a worker takes */
    int64_t released;        /* batches the consumer is done with */
    int64_t next_consume;    /* next batch the consumer takes */
    int held;                /* the consumer holds batch next_consume - 1 */
    perm_cache_t cache[2];
    uint64_t use_clock;

    int64_t pos_epoch, pos_batch;   /* consumer position (the next batch) */
    int finished;
    int sticky_err;
    char sticky_msg[512];

    pthread_t *threads;
    int started_threads;
    fp_data_scratch inline_scratch;
    int64_t *inline_idx;
};

void fp_loader_opts_default(fp_loader_opts *o)
{
    memset(o, 0, sizeof *o);
    o->split = FP_SPLIT_TRAIN;
    o->batch = 32;
    o->threads = 2;
    o->prefetch = 0;
    o->drop_last = -1;
}

static void batch_position(const fp_loader *ld, int64_t g, int64_t *epoch, int64_t *index)
{
    int64_t abs = ld->b0 + g;
    *epoch = ld->e0 + abs / ld->per_epoch;
    *index = abs % ld->per_epoch;
}

static int batch_count(const fp_loader *ld, int64_t index)
{
    if (ld->drop_last || index < ld->per_epoch - 1)
        return ld->batch;
    return (int)(ld->n - index * ld->batch);
}

/* Under ld->mu: writes the dataset indices of batch (epoch, index) to idx. FP_ENOMEM possible. */
static int batch_indices(fp_loader *ld, int64_t epoch, int64_t index, int count, int64_t *idx)
{
    int64_t first = index * ld->batch;
    if (!ld->shuffled) {
        for (int i = 0; i < count; i++)
            idx[i] = first + i;
        return FP_OK;
    }
    perm_cache_t *c = NULL;
    for (int i = 0; i < 2; i++)
        if (ld->cache[i].perm && ld->cache[i].epoch == epoch)
            c = &ld->cache[i];
    if (!c) {
        c = ld->cache[0].last_use <= ld->cache[1].last_use ? &ld->cache[0] : &ld->cache[1];
        if (!c->perm && !(c->perm = malloc((size_t)ld->n * sizeof *c->perm)))
            return fp_fail(FP_ENOMEM, "data loader: out of memory for the epoch order");
        fp_data_permutation(ld->ds, ld->split, epoch, c->perm);
        c->epoch = epoch;
    }
    c->last_use = ++ld->use_clock;
    memcpy(idx, c->perm + first, (size_t)count * sizeof *idx);
    return FP_OK;
}

/* Fills slot s with batch g (no lock held except while choosing the indices when `lock`). */
static void prepare(fp_loader *ld, int64_t g, slot_t *s, int64_t *idx, fp_data_scratch *scratch, int lock)
{
    int64_t epoch, index;
    batch_position(ld, g, &epoch, &index);
    int count = batch_count(ld, index);
    if (lock)
        pthread_mutex_lock(&ld->mu);
    int rc = batch_indices(ld, epoch, index, count, idx);
    if (lock)
        pthread_mutex_unlock(&ld->mu);
    s->err = FP_OK;
    s->msg[0] = '\0';
    s->n = count;
    s->epoch = epoch;
    s->index = index;
    int augment = ld->split == FP_SPLIT_TRAIN && ld->ds->opts.augment;
    for (int i = 0; rc == FP_OK && i < count; i++) {
        fp_data_rng rng = fp_data_rng_seed(ld->ds->opts.seed, FP_RNG_AUGMENT, ld->split, epoch, idx[i]);
        int label = 0;
        rc = ld->ds->ops->get(ld->ds, ld->split, idx[i], augment, &rng, s->images + (size_t)i * ld->sample_floats,
                              &label, scratch);
        s->labels[i] = label;
    }
    if (rc != FP_OK) {
        s->err = rc;
        snprintf(s->msg, sizeof s->msg, "%s", fp_error_message());
    }
    s->seq = g;
}

static void *worker(void *arg)
{
    fp_loader *ld = arg;
    fp_data_scratch scratch = { 0 };
    int64_t *idx = malloc((size_t)ld->batch * sizeof *idx);
    pthread_mutex_lock(&ld->mu);
    while (!ld->stop) {
        int64_t g = ld->next_claim;
        if ((ld->total >= 0 && g >= ld->total) || g >= ld->released + ld->k) {
            pthread_cond_wait(&ld->cv_work, &ld->mu);
            continue;
        }
        ld->next_claim++;
        slot_t *s = &ld->slots[g % ld->k];
        pthread_mutex_unlock(&ld->mu);
        if (idx) {
            prepare(ld, g, s, idx, &scratch, 1);
        } else {
            s->seq = g;
            s->n = 0;
            s->err = FP_ENOMEM;
            snprintf(s->msg, sizeof s->msg, "data loader: out of memory");
        }
        pthread_mutex_lock(&ld->mu);
        s->ready = 1;
        pthread_cond_broadcast(&ld->cv_ready);
    }
    pthread_mutex_unlock(&ld->mu);
    free(idx);
    fp_data_scratch_free(&scratch);
    return NULL;
}

int fp_loader_start(fp_loader **out, const fp_dataset *ds, const fp_loader_opts *opts)
{
    *out = NULL;
    fp_loader_opts def;
    if (!opts) {
        fp_loader_opts_default(&def);
        opts = &def;
    }
    if (opts->split != FP_SPLIT_TRAIN && opts->split != FP_SPLIT_VAL)
        return fp_fail(FP_EINVAL, "data loader: bad split %d", opts->split);
    const char *split_name = opts->split == FP_SPLIT_TRAIN ? "training" : "validation";
    if (opts->batch < 1 || opts->batch > (1 << 20))
        return fp_fail(FP_EINVAL, "data loader: batch size %d out of range", opts->batch);
    if (opts->threads < 0 || opts->threads > 64)
        return fp_fail(FP_EINVAL, "data loader: %d threads out of range (0..64)", opts->threads);
    if (opts->prefetch < 0 || opts->prefetch > 1024)
        return fp_fail(FP_EINVAL, "data loader: prefetch %d out of range (0..1024)", opts->prefetch);
    if (opts->epochs < 0)
        return fp_fail(FP_EINVAL, "data loader: epochs %d < 0", opts->epochs);
    int64_t n = fp_dataset_size(ds, opts->split);
    if (n == 0)
        return fp_fail(FP_EINVAL, "data loader: %s has no %s split", fp_dataset_spec(ds), split_name);
    int drop_last = opts->drop_last < 0 ? opts->split == FP_SPLIT_TRAIN : opts->drop_last != 0;
    int64_t per_epoch = drop_last ? n / opts->batch : (n + opts->batch - 1) / opts->batch;
    if (per_epoch == 0)
        return fp_fail(FP_EINVAL, "data loader: the %s split of %s has %lld images, fewer than one batch of %d",
                       split_name, fp_dataset_spec(ds), (long long)n, opts->batch);
    if (opts->start_epoch < 0 || opts->start_batch < 0 || opts->start_batch > per_epoch)
        return fp_fail(FP_EINVAL, "data loader: start position epoch %lld batch %lld out of range "
                       "(an epoch has %lld batches)", (long long)opts->start_epoch,
                       (long long)opts->start_batch, (long long)per_epoch);

    fp_loader *ld = calloc(1, sizeof *ld);
    if (!ld)
        return fp_fail(FP_ENOMEM, "data loader: out of memory");
    ld->ds = ds;
    ld->split = opts->split;
    ld->batch = opts->batch;
    ld->nthreads = opts->threads;
    ld->k = opts->threads == 0 ? 1 : (opts->prefetch ? opts->prefetch : opts->threads + 2);
    ld->n = n;
    ld->per_epoch = per_epoch;
    ld->drop_last = drop_last;
    ld->shuffled = opts->split == FP_SPLIT_TRAIN && ds->opts.shuffle;
    ld->pos_epoch = opts->start_epoch;
    ld->pos_batch = opts->start_batch;
    ld->e0 = opts->start_batch == per_epoch ? opts->start_epoch + 1 : opts->start_epoch;
    ld->b0 = opts->start_batch == per_epoch ? 0 : opts->start_batch;
    ld->total = opts->epochs ? (int64_t)opts->epochs * per_epoch - opts->start_batch : -1;
    ld->end_epoch = opts->epochs ? opts->start_epoch + opts->epochs : -1;
    int s = fp_dataset_image_size(ds);
    ld->sample_floats = (size_t)s * s * 3;
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv_work, NULL);
    pthread_cond_init(&ld->cv_ready, NULL);

    int rc = FP_OK;
    if (!(ld->slots = calloc((size_t)ld->k, sizeof *ld->slots)))
        rc = fp_fail(FP_ENOMEM, "data loader: out of memory");
    for (int i = 0; rc == FP_OK && i < ld->k; i++) {
        ld->slots[i].images = malloc((size_t)opts->batch * ld->sample_floats * sizeof(float));
        ld->slots[i].labels = malloc((size_t)opts->batch * sizeof(int32_t));
        ld->slots[i].seq = -1;
        if (!ld->slots[i].images || !ld->slots[i].labels)
            rc = fp_fail(FP_ENOMEM, "data loader: out of memory for %d batches of %d images of %dx%d",
                         ld->k, opts->batch, s, s);
    }
    if (rc == FP_OK && ld->nthreads == 0 &&
        !(ld->inline_idx = malloc((size_t)opts->batch * sizeof *ld->inline_idx)))
        rc = fp_fail(FP_ENOMEM, "data loader: out of memory");
    if (rc == FP_OK && ld->nthreads > 0 && !(ld->threads = calloc((size_t)ld->nthreads, sizeof *ld->threads)))
        rc = fp_fail(FP_ENOMEM, "data loader: out of memory");
    for (int i = 0; rc == FP_OK && i < ld->nthreads; i++) {
        if (pthread_create(&ld->threads[i], NULL, worker, ld) != 0)
            rc = fp_fail(FP_EINTERNAL, "data loader: cannot start worker thread %d", i);
        else
            ld->started_threads++;
    }
    if (rc != FP_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", fp_error_message());
        fp_loader_stop(ld);
        return fp_fail(rc, "%s", msg);
    }
    *out = ld;
    return FP_OK;
}

int fp_loader_next(fp_loader *ld, fp_batch *batch)
{
    memset(batch, 0, sizeof *batch);
    if (ld->sticky_err)
        return fp_fail(ld->sticky_err, "%s", ld->sticky_msg);
    pthread_mutex_lock(&ld->mu);
    if (ld->held) {
        ld->slots[(ld->next_consume - 1) % ld->k].ready = 0;
        ld->released++;
        ld->held = 0;
        pthread_cond_broadcast(&ld->cv_work);
    }
    if (ld->finished) {
        pthread_mutex_unlock(&ld->mu);
        return FP_DATA_END_OF_EPOCH;
    }
    if (ld->pos_batch == ld->per_epoch) {
        ld->pos_epoch++;
        ld->pos_batch = 0;
        if (ld->end_epoch >= 0 && ld->pos_epoch >= ld->end_epoch)
            ld->finished = 1;
        pthread_mutex_unlock(&ld->mu);
        return FP_DATA_END_OF_EPOCH;
    }
    int64_t g = ld->next_consume;
    slot_t *s = &ld->slots[g % ld->k];
    if (ld->nthreads == 0) {
        pthread_mutex_unlock(&ld->mu);
        prepare(ld, g, s, ld->inline_idx, &ld->inline_scratch, 0);
        pthread_mutex_lock(&ld->mu);
        s->ready = 1;
    }
    while (!(s->ready && s->seq == g))
        pthread_cond_wait(&ld->cv_ready, &ld->mu);
    ld->next_consume++;
    ld->held = 1;
    ld->pos_batch++;
    pthread_mutex_unlock(&ld->mu);
    if (s->err != FP_OK) {
        ld->sticky_err = s->err;
        snprintf(ld->sticky_msg, sizeof ld->sticky_msg, "%s", s->msg);
        return fp_fail(s->err, "%s", s->msg);
    }
    batch->n = s->n;
    batch->size = fp_dataset_image_size(ld->ds);
    batch->images = s->images;
    batch->labels = s->labels;
    batch->epoch = s->epoch;
    batch->index = s->index;
    return FP_OK;
}

void fp_loader_position(const fp_loader *ld, int64_t *epoch, int64_t *batch_index)
{
    *epoch = ld->pos_epoch;
    *batch_index = ld->pos_batch;
}

int64_t fp_loader_batches_per_epoch(const fp_loader *ld)
{
    return ld->per_epoch;
}

void fp_loader_stop(fp_loader *ld)
{
    if (!ld)
        return;
    pthread_mutex_lock(&ld->mu);
    ld->stop = 1;
    pthread_cond_broadcast(&ld->cv_work);
    pthread_mutex_unlock(&ld->mu);
    for (int i = 0; i < ld->started_threads; i++)
        pthread_join(ld->threads[i], NULL);
    free(ld->threads);
    if (ld->slots) {
        for (int i = 0; i < ld->k; i++) {
            free(ld->slots[i].images);
            free(ld->slots[i].labels);
        }
        free(ld->slots);
    }
    for (int i = 0; i < 2; i++)
        free(ld->cache[i].perm);
    free(ld->inline_idx);
    fp_data_scratch_free(&ld->inline_scratch);
    pthread_cond_destroy(&ld->cv_work);
    pthread_cond_destroy(&ld->cv_ready);
    pthread_mutex_destroy(&ld->mu);
    free(ld);
}
