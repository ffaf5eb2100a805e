/* data.c — dataset spec parsing and the scheme-independent dataset calls of data.h.
 * Promise: an unknown scheme is FP_EINVAL listing the valid ones; the sample order of an epoch is a
 * pure function of (seed, split, epoch). */
#include "trainer/data/data_internal.h"
#include "error.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const float fp_imagenet_mean[3] = { 0.485f, 0.456f, 0.406f };
const float fp_imagenet_std[3] = { 0.229f, 0.224f, 0.225f };

void fp_data_opts_default(fp_data_opts *opts)
{
    opts->image_size = 32;
    opts->seed = 0;
    opts->augment = 1;
    opts->shuffle = 1;
}

static const char *file_kind(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a plain file";
}

int fp_data_open_regular(const char *path, int missing_ok, FILE **f, long long *size)
{
    *f = NULL;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && missing_ok)
            return FP_OK;
        return fp_fail(FP_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fp_fail(FP_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fp_fail(FP_EIO, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *fh = fdopen(fd, "rb");
    if (!fh) {
        int e = errno;
        close(fd);
        return fp_fail(FP_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    *f = fh;
    *size = (long long)st.st_size;
    return FP_OK;
}

int fp_data_buf_reserve(fp_data_buf *b, size_t n)
{
    if (b->cap >= n)
        return FP_OK;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < n)
        cap *= 2;
    void *p = malloc(cap);
    if (!p)
        return fp_fail(FP_ENOMEM, "data: out of memory (%zu bytes)", cap);
    free(b->p);
    b->p = p;
    b->cap = cap;
    return FP_OK;
}

void fp_data_scratch_free(fp_data_scratch *s)
{
    free(s->file.p);
    free(s->image.p);
    free(s->tmp.p);
    free(s->coef.p);
    memset(s, 0, sizeof *s);
}

int fp_dataset_open(fp_dataset **out, const char *spec, const fp_data_opts *opts)
{
    *out = NULL;
    fp_data_opts def;
    if (!opts) {
        fp_data_opts_default(&def);
        opts = &def;
    }
    if (opts->image_size < 8 || opts->image_size > 4096)
        return fp_fail(FP_EINVAL, "data: image size %d out of range (8..4096)", opts->image_size);
    if (!spec || !*spec)
        spec = "synthetic";
    const char *colon = strchr(spec, ':');
    size_t scheme_len = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *arg = colon ? colon + 1 : NULL;

    fp_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return fp_fail(FP_ENOMEM, "data: out of memory");
    ds->opts = *opts;
    int rc;
    if (scheme_len == 9 && !strncmp(spec, "synthetic", 9)) {
        rc = fp_data_open_synthetic(ds, arg);
    } else if (scheme_len == 7 && !strncmp(spec, "cifar10", 7)) {
        rc = arg && *arg ? fp_data_open_cifar10(ds, arg)
                         : fp_fail(FP_EINVAL, "data scheme 'cifar10' needs a directory: cifar10:DIR");
    } else if (scheme_len == 11 && !strncmp(spec, "imagefolder", 11)) {
        rc = arg && *arg ? fp_data_open_imagefolder(ds, arg)
                         : fp_fail(FP_EINVAL, "data scheme 'imagefolder' needs a directory: imagefolder:DIR");
    } else {
        rc = fp_fail(FP_EINVAL, "unknown data scheme '%.*s': valid are synthetic, cifar10:DIR, imagefolder:DIR",
                     (int)(scheme_len > 200 ? 200 : scheme_len), spec);
    }
    if (rc == FP_OK && !(ds->spec = strdup(spec)))
        rc = fp_fail(FP_ENOMEM, "data: out of memory");
    if (rc != FP_OK) {
        fp_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return FP_OK;
}

void fp_dataset_close(fp_dataset *ds)
{
    if (!ds)
        return;
    if (ds->ops && ds->ops->close)
        ds->ops->close(ds->impl);
    if (ds->class_names) {
        for (int i = 0; i < ds->num_classes; i++)
            free(ds->class_names[i]);
        free(ds->class_names);
    }
    free(ds->spec);
    free(ds);
}

int fp_dataset_num_classes(const fp_dataset *ds) { return ds->num_classes; }
int fp_dataset_image_size(const fp_dataset *ds) { return ds->opts.image_size; }
const char *fp_dataset_spec(const fp_dataset *ds) { return ds->spec; }

const char *fp_dataset_class_name(const fp_dataset *ds, int cls)
{
    if (cls < 0 || cls >= ds->num_classes || !ds->class_names)
        return NULL;
    return ds->class_names[cls];
}

int64_t fp_dataset_size(const fp_dataset *ds, int split)
{
    if (split != FP_SPLIT_TRAIN && split != FP_SPLIT_VAL)
        return 0;
    return ds->size[split];
}

int fp_dataset_get(const fp_dataset *ds, int split, int64_t index, int64_t epoch, float *out, int *label)
{
    if (split != FP_SPLIT_TRAIN && split != FP_SPLIT_VAL)
        return fp_fail(FP_EINVAL, "data: bad split %d", split);
    if (index < 0 || index >= ds->size[split])
        return fp_fail(FP_EINVAL, "data: sample %lld out of range (split has %lld)", (long long)index,
                       (long long)ds->size[split]);
    fp_data_scratch scratch = { 0 };
    fp_data_rng rng = fp_data_rng_seed(ds->opts.seed, FP_RNG_AUGMENT, split, epoch, index);
    int augment = split == FP_SPLIT_TRAIN && ds->opts.augment;
    int rc = ds->ops->get(ds, split, index, augment, &rng, out, label, &scratch);
    fp_data_scratch_free(&scratch);
    return rc;
}

int64_t fp_dataset_order_index(const fp_dataset *ds, int split, int64_t epoch, int64_t pos)
{
    int64_t n = fp_dataset_size(ds, split);
    if (pos < 0 || pos >= n)
        return -1;
    if (split != FP_SPLIT_TRAIN || !ds->opts.shuffle)
        return pos;
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    if (!perm)
        return -1;
    /* the same code the loader uses */
    fp_data_permutation(ds, split, epoch, perm);
    int64_t r = perm[pos];
    free(perm);
    return r;
}

/* Fisher-Yates (Durstenfeld, from the end) seeded by (seed, split, epoch). */
void fp_data_permutation(const fp_dataset *ds, int split, int64_t epoch, int64_t *perm)
{
    int64_t n = ds->size[split];
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    if (split != FP_SPLIT_TRAIN || !ds->opts.shuffle)
        return;
    fp_data_rng rng = fp_data_rng_seed(ds->opts.seed, FP_RNG_SHUFFLE, split, epoch, 0);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)fp_data_rng_below(&rng, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
