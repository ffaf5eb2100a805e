/* train.h — the training loop of `fp16probe train`: one arm, a threaded data loader, evaluation every
 * N steps, checkpoints, the run recorded into the store (record.h). Promise: setup errors are found before anything is recorded; a failure after that
 * leaves exactly one failed run with its message; Ctrl-C ends the current step and marks the run
 * interrupted; nothing here prints (progress goes through a callback). */
#ifndef FP_TRAIN_H
#define FP_TRAIN_H

#include <stdint.h>
#include "store.h"
#include "trainer/run/arm.h"

/* A period the library works out once the run's length is known (trainer/run/step_plan.h). */
#define FP_AUTO (-1)

typedef struct {
    int64_t step, steps;        /* steps done (1-based number of the step just finished), total */
    float loss;                 /* of that step */
    double lr, scale;
    double images_per_s;        /* since the previous progress report */
    double elapsed_s, eta_s;    /* eta from the mean step time so far (data waits included) */
    int64_t skipped;            /* skipped steps so far */
    int is_eval;                /* 1: an evaluation just finished (val_* valid) */
    double val_loss, val_top1, val_top5;
} fp_train_progress;

typedef void (*fp_train_progress_fn)(const fp_train_progress *p, void *user);

typedef struct {
    fp_arm_config arm;          /* arm.num_classes <= 0: the dataset's class count */
    const char *data;           /* dataset spec (NULL: "synthetic") */
    int augment, shuffle;       /* 1 / 1 by default */
    int batch;                  /* >= 1 */
    int64_t steps;              /* total steps of the run (a resume continues up to it) */
    int loader_threads;         /* data-preparation threads (default 2) */
    int eval_every;             /* in-run evaluations every N steps; 0: only at the end; FP_AUTO: step_plan.h */
    int64_t eval_batches;       /* validation batches per evaluation; 0: the whole split; < 0: never */
    const char *db;             /* store file; NULL: record nothing */
    const char *device;         /* the run's device text; NULL: "cpu: <model name of /proc/cpuinfo>" */
    const char *save;           /* weights (torchvision layout) at the end; NULL: none */
    const char *checkpoint;     /* checkpoint written at the end / on Ctrl-C; NULL: none */
    int64_t checkpoint_every;   /* also every N steps (0: only at the end) */
    const char *resume;         /* checkpoint to continue from; NULL: start fresh */
    const char *session_name;   /* NULL: "<model> <policy>" */
    fp_train_progress_fn progress;
    void *progress_user;
    double progress_interval_s; /* report at most this often (and at the first and last step); <= 0: every step */
} fp_train_config;

/* Defaults: fp_arm_config_default, synthetic, augment and shuffle on, batch 32, 100 steps, 2 loader
 * threads, eval at the end over 50 batches, no store, progress every 5 s. */
void fp_train_config_default(fp_train_config *cfg);

typedef struct {
    fp_run_status status;       /* FINISHED, INTERRUPTED or FAILED */
    int usage_error;            /* 1: a bad choice (model, policy, data scheme); nothing was recorded */
    int64_t session_id, run_id; /* 0 when nothing was recorded */
    int64_t steps_done;         /* iterations done (a resume counts the restored ones) */
    int64_t skipped;
    float last_loss;
    double mean_step_ms;        /* arm step time (compute only), mean over this invocation */
    double val_loss, val_top1, val_top5;   /* last evaluation; NaN when none */
    char message[512];          /* why the run failed / was interrupted ("" when finished) */
} fp_train_result;

/* Runs the loop. FP_OK when the run finished or was interrupted (res->status tells); a negative FP_E*
 * code with fp_error_message() and res->message set when it failed. */
int fp_train(const fp_train_config *cfg, fp_train_result *res);

/* ---- setup helpers (also for the comparison) ---- */
/* The choices of a run: model (FP_EINVAL listing the valid ones), the policy when check_policy, batch and
 * steps, optimizer and lr schedule settings. Nothing is touched. */
int fp_train_check_choices(const fp_train_config *c, const fp_arm_config *a, int check_policy);
/* Opens c->data (NULL: synthetic) at a's image size and seed with c's augment / shuffle; a->num_classes
 * <= 0 becomes the dataset's. *usage = 1 when the spec itself is bad (unknown scheme: the message lists
 * the valid ones); otherwise a failure is the data's (missing / malformed files) or too few --classes. */
int fp_train_open_data(const fp_train_config *c, fp_arm_config *a, fp_dataset **ds, int *usage);

#endif
