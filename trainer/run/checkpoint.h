/* checkpoint.h — save and resume one arm's training state in ONE safetensors file, written atomically:
 * weights and BN statistics (torchvision names, conv OIHW), optimizer state ("optim.<name>.<buffer>"),
 * and in __metadata__ the scaler, iteration, optimizer step, data position and configuration.
 * Promise: restoring into an arm built with the same configuration continues bit-identically. */
#ifndef FP_CHECKPOINT_H
#define FP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "trainer/run/arm.h"

#define FP_CHECKPOINT_FORMAT "fp16probe-checkpoint"
#define FP_CHECKPOINT_VERSION "1"
#define FP_CHECKPOINT_MAX_STEPS (INT64_C(1) << 40)   /* iteration and data position at most this (as --steps) */

/* Where the loop stands: the arm's iteration is taken from the arm itself. */
typedef struct {
    int64_t data_epoch, data_batch;   /* position of the next training batch (fp_loader_position) */
    const char *config_json;          /* the run's configuration (NULL: none) */
    /* Extra __metadata__ entries (key, value pairs) the caller checks on resume: batch, dataset, ... */
    const char *const *extra;
    size_t n_extra;                   /* pairs */
} fp_checkpoint_state;

/* Writes path atomically (temporary file + rename): the arm's model tensors, optimizer state, scaler,
 * iteration and optimizer step, the model / policy / optimizer names and hyperparameters, and st. */
int fp_checkpoint_save(const char *path, fp_arm *arm, const fp_checkpoint_state *st);

typedef struct fp_checkpoint fp_checkpoint;

/* Opens and checks a checkpoint: format and version (FP_EVERSION), and every __metadata__ value a restore or a
 * resume reads, exactly as fp_checkpoint_save writes it and in its range: the names (model, policy, optimizer),
 * the optimizer JSON, iteration and optimizer step (0 <= step <= iteration <= FP_CHECKPOINT_MAX_STEPS), the
 * data position, the scaler (mode; scale finite, > 0, a float; growth >= 1; backoff in (0, 1]; interval >= 1;
 * clean steps >= 0). FP_EIO / FP_EFORMAT with one line naming the file and the key (its value made printable)
 * or tensor otherwise. */
int fp_checkpoint_open(fp_checkpoint **out, const char *path);
void fp_checkpoint_close(fp_checkpoint *ck);    /* NULL is fine */

/* A __metadata__ value ("model", "policy", "num_classes", "image_size", "base_width", "seed",
 * "optimizer", "optimizer_config", "iteration", "data_epoch", "data_batch", "config", extras), or NULL. */
const char *fp_checkpoint_meta(const fp_checkpoint *ck, const char *key);

/* Restores the arm (which must have been built with the checkpoint's model, policy, optimizer kind and
 * shapes: otherwise FP_EFORMAT naming the file and the key or tensor): weights, running statistics,
 * optimizer state and step, scaler, iteration. Returns the data position in *epoch / *batch. */
int fp_checkpoint_restore(const fp_checkpoint *ck, fp_arm *arm, int64_t *data_epoch, int64_t *data_batch);

/* The settings a resume must share with its checkpoint, kept as text in its __metadata__ (data, batch,
 * augment, shuffle, image size, classes, seed, base width, the optimizer's JSON, policy): kv is ready for
 * fp_checkpoint_state.extra (FP_CHECKPOINT_NSETTINGS pairs). */
enum { FP_CHECKPOINT_NSETTINGS = 10 };
typedef struct {
    const char *kv[2 * FP_CHECKPOINT_NSETTINGS];
    char val[FP_CHECKPOINT_NSETTINGS][384];
} fp_checkpoint_settings;
void fp_checkpoint_settings_fill(fp_checkpoint_settings *s, const fp_arm_config *a, const char *data, int batch,
                                 int augment, int shuffle, const char *optimizer_json);
/* FP_OK when ck (opened from path) was made with the same settings; otherwise FP_EINVAL naming the file, the
 * option and both values (FP_EFORMAT when the checkpoint lacks one). */
int fp_checkpoint_settings_check(const fp_checkpoint *ck, const char *path, const fp_checkpoint_settings *s);

#endif
