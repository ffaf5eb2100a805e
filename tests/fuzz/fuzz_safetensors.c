/* fuzz_safetensors.c — lib/safetensors.c's reader on arbitrary bytes (a downloaded weights file):
 * fp_st_open_buffer, then everything a consumer does with an open file. Checks safetensors.h's promise
 * that a file that opens gives in-range, non-overlapping, fully covering tensors in offset order (here:
 * nbytes = numel x dtype size, offsets ascending and contiguous, data inside the image, names unique and
 * found), metadata pairs found by key, and that every tensor reads as fp32 (except BOOL, refused). */
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "safetensors.h"
#include "fuzz.h"

#define READ_CAP ((int64_t)1 << 22)   /* read tensors up to 16 MiB of floats */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fp_st *st = NULL;
    int rc = fp_st_open_buffer(&st, data, size, "fuzz.safetensors");
    if (rc != FP_OK) {
        fz_debug("open");
        FZ_CHECK(st == NULL);
        FZ_CHECK(rc == FP_EFORMAT || rc == FP_ENOMEM);
        FZ_CHECK(fp_error_message()[0] != '\0');
        return 0;
    }
    size_t n = fp_st_count(st);
    uint64_t expect_off = 0;
    const uint8_t *base = NULL;
    for (size_t i = 0; i < n; i++) {
        const fp_st_tensor *t = fp_st_at(st, i);
        FZ_CHECK(t != NULL && t->name != NULL);
        FZ_CHECK(strcmp(t->name, "__metadata__") != 0);
        FZ_CHECK(t->rank >= 0 && t->rank <= FP_ST_MAX_RANK);
        FZ_CHECK((unsigned)t->dtype < FP_ST_DTYPE_COUNT);
        int64_t numel = 1;
        for (int d = 0; d < t->rank; d++) {
            FZ_CHECK(t->shape[d] >= 0);
            numel *= t->shape[d];
        }
        FZ_CHECK(numel == t->numel);
        FZ_CHECK(t->nbytes == (size_t)t->numel * fp_st_dtype_size(t->dtype));
        FZ_CHECK(t->offset == expect_off);            /* packed, in offset order, no gap or overlap */
        expect_off += t->nbytes;
        if (i == 0)
            base = (const uint8_t *)t->data;
        else
            FZ_CHECK((const uint8_t *)t->data == base + t->offset);
        FZ_CHECK(fp_st_find(st, t->name) == t);
        const fp_st_tensor *g = NULL;
        FZ_CHECK(fp_st_get(st, t->name, &g) == FP_OK && g == t);
        char shape[64];
        fp_st_shape_str(shape, sizeof shape, t->shape, t->rank);
        if (t->numel <= READ_CAP) {
            float *dst = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *dst);
            FZ_CHECK(dst != NULL);
            rc = fp_st_read_f32(st, t->name, dst, t->shape, t->rank);
            FZ_CHECK(t->dtype == FP_ST_BOOL ? rc == FP_EFORMAT : rc == FP_OK);
            rc = fp_st_read_f32(st, t->name, dst, NULL, -1);
            FZ_CHECK(t->dtype == FP_ST_BOOL ? rc == FP_EFORMAT : rc == FP_OK);
            if (t->rank > 0) {   /* a wrong shape is refused with a message */
                int64_t other[FP_ST_MAX_RANK];
                memcpy(other, t->shape, sizeof other);
                other[0] += 1;
                FZ_CHECK(fp_st_read_f32(st, t->name, dst, other, t->rank) == FP_EFORMAT);
            }
            free(dst);
        }
    }
    if (n == 0)
        FZ_CHECK(fp_st_at(st, 0) == NULL);
    FZ_CHECK(fp_st_at(st, n) == NULL);
    static const char probe[] = "\x01no such tensor";
    const fp_st_tensor *x = fp_st_find(st, probe), *y = NULL;
    FZ_CHECK(!x || strcmp(x->name, probe) == 0);
    FZ_CHECK(fp_st_get(st, probe, &y) == (x ? FP_OK : FP_EFORMAT) && y == x);
    size_t nm = fp_st_metadata_count(st);
    for (size_t i = 0; i < nm; i++) {
        const char *k = NULL, *v = NULL;
        FZ_CHECK(fp_st_metadata_at(st, i, &k, &v) == FP_OK && k && v);
        const char *found = fp_st_metadata(st, k);
        FZ_CHECK(found != NULL);
    }
    const char *k = NULL, *v = NULL;
    (void)fp_st_metadata_at(st, nm, &k, &v);
    fp_st_close(st);
    return 0;
}
