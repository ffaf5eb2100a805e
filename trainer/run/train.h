/* train.h — the training loop of `fp16probe train`: one arm, a threaded data loader, evaluation every
 * N steps, checkpoints, and the recording of the run (metadata, layers, steps, evaluations, events)
 * into the store. Promise: setup errors are found before anything is recorded; a failure after that
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

/* ---- recording helpers (also for the side-by-side comparison's arms) ---- */
/* The model's layers as rows of `layers` for a run at this batch size: names, types, shapes in
 * PyTorch's order ("16x64x56x56"; "16x512" for vectors), params, FLOPs per step (batch included). */
int fp_train_record_layers(fp_store_t *s, int64_t run, fp_model *m, int batch);
/* One step row (loss, scale, skipped, lr, wall clock start / end, compute time, samples/s, the arm's
 * memory current / peak; energy NULL) and its events: skipped step naming the first layer with an
 * inf/NaN gradient, loss-scale change, a non-finite gradient applied without a scaler, NaN loss. */
int fp_train_record_step(fp_store_t *s, int64_t run, fp_arm *arm, const fp_arm_step_result *r, int64_t start_ns,
                         int64_t end_ns);
/* What probes add to a step row: per-layer times (committed with the step), energy (NaN: not measured;
 * power is energy / step time), CPU cycles and instructions, and a detail appended to the skipped-step event (NULL: none). */
typedef struct {
    const fp_layer_time_t *times;
    size_t ntimes;
    double energy_j;
    const char *skip_detail;
    int64_t cycles, instructions;   /* perf_event; <= 0: not measured */
} fp_train_step_extra;
int fp_train_record_step_ex(fp_store_t *s, int64_t run, fp_arm *arm, const fp_arm_step_result *r, int64_t start_ns,
                            int64_t end_ns, const fp_train_step_extra *x);
/* "loss is NaN at step N and policy P has no loss scaler: ..." (thread-local buffer). */
const char *fp_train_diverged_message(const fp_arm *arm, const fp_arm_step_result *r);

/* Evaluation of the arm on c's validation batches (c->batch, c->loader_threads, c->eval_batches), recorded as
 * a "val" row at `step` when s is not NULL; loss / top-1 / top-5 come back as fractions. */
int fp_train_record_eval(fp_store_t *s, int64_t run, fp_arm *arm, const fp_dataset *ds, const fp_train_config *c,
                         int64_t step, double *loss, double *top1, double *top5);

/* ---- setup helpers (also for the comparison) ---- */
/* The choices of a run: model (FP_EINVAL listing the valid ones), the policy when check_policy, batch and
 * steps, optimizer and lr schedule settings. Nothing is touched. */
int fp_train_check_choices(const fp_train_config *c, const fp_arm_config *a, int check_policy);
/* Opens c->data (NULL: synthetic) at a's image size and seed with c's augment / shuffle; a->num_classes
 * <= 0 becomes the dataset's. *usage = 1 when the spec itself is bad (unknown scheme: the message lists
 * the valid ones); otherwise a failure is the data's (missing / malformed files) or too few --classes. */
int fp_train_open_data(const fp_train_config *c, fp_arm_config *a, fp_dataset **ds, int *usage);
/* The optimizer settings as JSON ({"lr":0.1,"momentum":0.9,...,"schedule":"constant",...}); malloc'd,
 * NULL when out of memory. */
char *fp_train_optimizer_json(const fp_arm_config *a);
/* The run configuration as JSON, as `train` stores it, with "command" set to `command` and `extra`
 * (NULL, or comma-separated "key":value pairs) appended; malloc'd, NULL when out of memory. */
char *fp_train_config_json(const fp_train_config *c, const fp_arm_config *a, const char *data, const char *device,
                           const char *command, const char *extra);

/* "cpu: <model name>" from /proc/cpuinfo (or "cpu"), into buf. */
const char *fp_train_cpu_name(char *buf, size_t size);
/* The BLAS library's own description (openblas_get_config()) or "CBLAS". */
const char *fp_train_blas_name(void);
/* Threads for the CPU kernels, GEMMs included (trainer/cpu/gemm.h fp_gemm_use_pool: the kernels' pool
 * gets them, the BLAS library one); returns the count set. */
int fp_train_set_threads(int threads);

#endif
