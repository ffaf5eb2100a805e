/* train.h — the settings every arm of a run shares (fp_train_config: model, data, sizes, optimizer and
 * schedule, evaluation, store, checkpoints), their defaults, the automatic values resolved once the run's
 * length is known, and the checks of the choices. Promise: every default of `fp16probe train` and
 * `fp16probe compare` is set here or in compare_config.c's fp_compare_config_default*; nothing here runs or
 * records anything (`train` is a comparison of one arm: compare.h). */
#ifndef FP_TRAIN_H
#define FP_TRAIN_H

#include <stdint.h>
#include "store.h"
#include "trainer/run/arm.h"

/* A value the library works out once the run's length is known (trainer/run/step_plan.h, fp_train_config_resolve). */
#define FP_AUTO (-1)

typedef struct {
    /* The arm's settings (its policy is ignored: the comparison's precision list names each arm's).
     * arm.num_classes <= 0: the dataset's class count. Automatic values (fp_train_config_resolve):
     * arm.lr.base_lr NaN (sgd 0.1, or 0.1 x batch / 256 with lr_linear_scaling; adam / adamw 0.001),
     * arm.lr.warmup_steps FP_AUTO (10, or steps / 4 in a run of fewer than 40 steps), and for the step and
     * cosine schedules a step_size / t_max of 0 (over the run: (steps - warmup) / 3, steps - warmup). */
    fp_arm_config arm;
    int lr_linear_scaling;      /* 1: an automatic sgd lr scales with the batch (Goyal et al.'s 0.1 x batch / 256) */
    const char *data;           /* dataset spec (NULL: "synthetic") */
    int augment, shuffle;       /* 1 / 1 by default */
    int batch;                  /* >= 1 */
    int64_t steps;              /* total steps of the run (a resume continues up to it) */
    int loader_threads;         /* data-preparation threads (default 2) */
    int eval_every;             /* in-run evaluations every N steps; 0: only at the end; FP_AUTO: step_plan.h */
    int64_t eval_batches;       /* validation batches per evaluation; 0: the whole split; < 0: never */
    const char *db;             /* store file; NULL: record nothing */
    const char *device;         /* the run's device text; NULL: "cpu: <model name of /proc/cpuinfo>" */
    /* One arm only (a comparison of several refuses them): */
    const char *save;           /* weights (torchvision layout) at the end; NULL: none */
    const char *checkpoint;     /* checkpoint written at the end / on a stop; NULL: none */
    int64_t checkpoint_every;   /* also every N steps (0: only at the end) */
    const char *resume;         /* checkpoint to continue from; NULL: start fresh. A missing model or policy
                                 * is the checkpoint's. */
    const char *session_name;   /* NULL: "<model> <policy> vs <policy>..." */
} fp_train_config;

/* `fp16probe train`'s settings: fp_arm_config_default with no model (it must be given), an automatic lr
 * (sgd 0.1 momentum 0.9 weight decay 5e-4), no warmup, kernel threads = the online CPUs, synthetic data,
 * augment and shuffle on, batch 32, 100 steps, 2 loader threads, evaluation at the end over 50 batches,
 * no store. */
void fp_train_config_default(fp_train_config *cfg);

/* The optimizer kind with this project's defaults (sgd: momentum 0.9, weight decay 5e-4; adam / adamw:
 * PyTorch's) and an automatic lr. */
void fp_train_config_set_optimizer(fp_train_config *cfg, fp_optim_kind kind);
/* The lr schedule kind, keeping the lr and warmup, its span over the run (automatic). */
void fp_train_config_set_schedule(fp_train_config *cfg, fp_lr_kind kind);
/* Where the arms train: backend (NULL: the CPU) and the device text the runs record (NULL: the CPU's name).
 * A device backend also gets enough loader threads to feed it (half the online CPUs, 2 to 8). */
void fp_train_config_set_device(fp_train_config *cfg, const struct fp_backend_ops *backend, const char *device);

/* Fills in the automatic values above (eval_every is step_plan.h's). Idempotent. */
void fp_train_config_resolve(fp_train_config *cfg);

/* The choices of a run: model (FP_EINVAL listing the valid ones), batch, steps (>= 1), --checkpoint-every (only
 * with a checkpoint), optimizer and lr schedule settings (resolved). Nothing is touched. */
int fp_train_check_choices(const fp_train_config *c);
/* The files a run will write, before it starts: save and checkpoint each a name (not '', not a directory, not
 * an existing file that is not a regular one), not the same file, in a directory that exists and is writable.
 * FP_EINVAL with *usage = 1 for a bad name, FP_EIO with *usage = 0 when the directory cannot take the file; the
 * message names the option and the path. Nothing is created. */
int fp_train_check_outputs(const fp_train_config *c, int *usage);
/* Opens c->data (NULL: synthetic) at c->arm's image size and seed with c's augment / shuffle; a->num_classes
 * <= 0 becomes the dataset's. *usage = 1 when the spec itself is bad (unknown scheme: the message lists
 * the valid ones) or --classes is fewer than the data's; otherwise a failure is the data's (missing / malformed
 * files). */
int fp_train_open_data(const fp_train_config *c, fp_arm_config *a, fp_dataset **ds, int *usage);

#endif
