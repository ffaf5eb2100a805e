/* fuzz_cifar10.c — trainer/data/data_cifar10.c through the dataset API (fp_dataset_open "cifar10:DIR",
 * fp_dataset_get) on arbitrary bytes. Byte 0 chooses the files and the options: bits 0-5 which of
 * data_batch_1..5.bin and test_batch.bin exist (each holds the rest of the input; none: data_batch_1
 * only), bit 6 augmentation, bit 7 an output size of 40 instead of 32 (the resize path). Then the first,
 * middle and last sample of each split are prepared. A data set that opens must have the promised sizes;
 * one that does not must say why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/data/data.h"
#include "fuzz.h"

#define REC 3073

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                          "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    unsigned sel = size ? data[0] : 0;
    const uint8_t *body = size ? data + 1 : data;
    size_t len = size ? size - 1 : 0;
    unsigned files = sel & 0x3f;
    if (!files)
        files = 1;
    char path[512];
    int ntrain = 0;
    for (int i = 0; i < 6; i++) {
        fz_path(path, sizeof path, names[i]);
        if (files & (1u << i)) {
            if (fz_write(path, body, len) != 0)
                abort();
            ntrain += i < 5;
        } else {
            remove(path);
        }
    }
    fp_data_opts o;
    fp_data_opts_default(&o);
    o.augment = (sel >> 6) & 1;
    o.image_size = (sel & 0x80) ? 40 : 32;
    o.seed = len;
    char spec[300];
    snprintf(spec, sizeof spec, "cifar10:%s", fz_dir());
    fp_dataset *ds = NULL;
    int rc = fp_dataset_open(&ds, spec, &o);
    if (rc != FP_OK) {
        fz_debug("open");
        FZ_CHECK(fp_error_message()[0] != '\0');
        FZ_CHECK(ntrain == 0 || len == 0 || len % REC != 0 || rc == FP_EFORMAT);
        fp_dataset_close(ds);
        return 0;
    }
    /* opened: every file is whole records with labels 0..9 */
    FZ_CHECK(len > 0 && len % REC == 0);
    int64_t recs = (int64_t)(len / REC);
    FZ_CHECK(fp_dataset_size(ds, FP_SPLIT_TRAIN) == recs * ntrain);
    FZ_CHECK(fp_dataset_size(ds, FP_SPLIT_VAL) == ((files & 0x20) ? recs : 0));
    FZ_CHECK(fp_dataset_num_classes(ds) == 10);
    int s = fp_dataset_image_size(ds);
    float *out = malloc((size_t)s * s * 3 * sizeof *out);
    FZ_CHECK(out != NULL);
    for (int split = 0; split < 2; split++) {
        int64_t n = fp_dataset_size(ds, split);
        int64_t idx[3] = {0, n / 2, n - 1};
        for (int k = 0; k < 3 && n > 0; k++) {
            int label = -1;
            rc = fp_dataset_get(ds, split, idx[k], 1, out, &label);
            FZ_CHECK(rc == FP_OK && label >= 0 && label < 10);
        }
        if (n > 0)
            (void)fp_dataset_order_index(ds, split, 0, n - 1);
    }
    free(out);
    fp_dataset_close(ds);
    return 0;
}
