/* fuzz_checkpoint.c — trainer/run/checkpoint.c's open path through its public API on arbitrary bytes
 * (a checkpoint file given to --resume): fp_checkpoint_open, its metadata, the settings check of a
 * resume, and fp_checkpoint_restore into a tinynet arm built like the seeds' arms (tinyarm.h):
 * fp32 + SGD and fp16 + Adam (the arm whose policy and optimizer the file names; else the first, to
 * exercise the mismatch). A file that does not open or restore must say why in one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/run/checkpoint.h"
#include "fuzz.h"
#include "tinyarm.h"

static fp_arm *arms[FZ_TINY_NARMS];
static fp_arm_config cfgs[FZ_TINY_NARMS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (size_t i = 0; i < FZ_TINY_NARMS; i++) {
        fz_tiny_config(&cfgs[i], i);
        if (fp_arm_create(&arms[i], &cfgs[i]) != FP_OK) {
            fprintf(stderr, "fuzz_checkpoint: cannot build the tinynet arm: %s\n", fp_error_message());
            abort();
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fz_path(path, sizeof path, "ck.safetensors");
    if (fz_write(path, data, size) != 0)
        abort();
    fp_checkpoint *ck = (fp_checkpoint *)1;
    int rc = fp_checkpoint_open(&ck, path);
    if (rc != FP_OK) {
        fz_debug("open");
        FZ_CHECK(ck == NULL);
        FZ_CHECK(fp_error_message()[0] != '\0');
        return 0;
    }
    static const char *const keys[] = {"model", "policy", "num_classes", "image_size", "base_width", "seed",
                                       "optimizer", "optimizer_config", "iteration", "data_epoch",
                                       "data_batch", "config", "format", "version", "scaler_scale"};
    size_t total = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = fp_checkpoint_meta(ck, keys[i]);
        total += v ? strlen(v) : 0;
    }
    (void)total;
    size_t pick = 0;
    const char *pol = fp_checkpoint_meta(ck, "policy"), *opt = fp_checkpoint_meta(ck, "optimizer");
    for (size_t i = 0; i < FZ_TINY_NARMS; i++)
        if (pol && opt && !strcmp(pol, fz_tiny_arms[i].policy) &&
            !strcmp(opt, fp_optim_name(fz_tiny_arms[i].kind)))
            pick = i;
    fp_checkpoint_settings s;
    fp_checkpoint_settings_fill(&s, &cfgs[pick], "synthetic:100", 8, 1, 1, "{\"lr\":0.1}");
    rc = fp_checkpoint_settings_check(ck, path, &s);
    if (rc != FP_OK)
        fz_debug("settings");
    FZ_CHECK(rc == FP_OK || fp_error_message()[0] != '\0');
    int64_t epoch = -1, batch = -1;
    rc = fp_checkpoint_restore(ck, arms[pick], &epoch, &batch);
    if (rc == FP_OK)
        FZ_CHECK(epoch >= 0 && batch >= 0);
    else {
        fz_debug("restore");
        FZ_CHECK(fp_error_message()[0] != '\0');
    }
    fp_checkpoint_close(ck);
    return 0;
}
