/* compare.h — the training loop: one model under one or several precision policies (`fp16probe train` is a
 * comparison of one arm; `fp16probe compare`, `fp16probe <model>`), arms created from the same initial weights,
 * fed the same batches of one loader in the same order, trained in lockstep turns of K steps under the same
 * probes, evaluated on the same validation batches, every arm a run of one session in the store; one arm may
 * resume from a checkpoint, write checkpoints and save its weights. Promises: bad choices and inputs (data that do
 * not open, outputs that cannot be written, a checkpoint that does not fit, weights that do not load) are refused
 * before anything is recorded, so no session is left without a step; the store failing stops the loop at once; a failing arm (NaN loss without a scaler, out of memory) is marked failed with its message
 * while the others carry on; a stop request (Ctrl-C, the dashboard) ends every arm after its current step,
 * flushes everything and marks the session interrupted; nothing here prints (progress is a callback). Data
 * parallel (base.arm.dist): rank r trains on its shard r of each global batch (base.batch x ranks); rank 0 alone
 * records, reports progress, evaluates and writes files; an arm failing on any rank fails the session. */
#ifndef FP_COMPARE_H
#define FP_COMPARE_H

#include <stdint.h>
#include "store.h"
#include "trainer/run/train.h"

#define FP_COMPARE_MAX_ARMS 8
#define FP_COMPARE_AUTO_TURN_MAX 50     /* an automatic turn is at most this many steps */
#define FP_COMPARE_AUTO_TURN_MAX_GPU 400  /* ... when every active arm runs on a device backend: GPU steps are
                                         * short and NVML's energy counter (mJ) needs turns of ~1 s */

/* Parses a comma-separated policy list ("fp32,fp16") into the policies themselves (precision.h's: compare
 * them by identity). FP_EINVAL, message listing the valid choices, for an empty list or entry, an unknown
 * policy, a policy given twice, or more than max policies. */
int fp_compare_parse_policies(const char *list, const fp_policy **pols, int max, int *n);

typedef struct {
    int arm;                    /* index into the policy list */
    const char *policy;
    int64_t step, steps;        /* the arm's steps done (1-based number of the last), total */
    float loss;                 /* of that step */
    double lr, scale;
    double images_per_s;        /* compute throughput of the arm's steps since its previous report */
    double speedup;             /* reference's mean step time / this arm's, after the first few steps so far
                                 * (NaN until both are known; the summary's median is the final word) */
    double elapsed_s, eta_s;    /* of the whole comparison */
    int64_t skipped;
    int is_eval;                /* 1: an evaluation of this arm just finished (val_* valid) */
    double val_loss, val_top1, val_top5;
    int failed;                 /* 1: this arm just failed; message says why */
    const char *message;
    double store_wait_s;        /* > 0: recording has been waiting this long for another process's lock on the
                                 * database (training goes on, records queue; it stops once store_patience_s
                                 * is past: store.h); 0 otherwise */
    double store_patience_s;
} fp_compare_progress;

typedef void (*fp_compare_progress_fn)(const fp_compare_progress *p, void *user);

typedef struct {
    /* What every arm shares (train.h): base.arm (model, classes, image size, seed, optimizer, schedule,
     * threads, weights; its policy is ignored), data, augment, shuffle, batch, steps, loader threads,
     * evaluation, db (NULL: record nothing), device, session_name (NULL: "<model> fp32 vs fp16"), and for a
     * single arm save / checkpoint / resume. */
    fp_train_config base;
    const char *precision;      /* comma-separated policies, parsed once when the run opens; the first fp32
                                 * one (else the first) is the reference every other run names as ref_run.
                                 * NULL with base.resume: the checkpoint's policy */
    const char *command;        /* "compare" (default), or "train": exactly one policy; recorded in the
                                 * configuration JSON */
    int turn;                   /* steps per turn; 0: automatic, a turn lasting about turn_seconds (at
                                 * most FP_COMPARE_AUTO_TURN_MAX steps, FP_COMPARE_AUTO_TURN_MAX_GPU on a
                                 * GPU, the turn's batches at most 1 GiB, and 1 for the first turn) */
    double turn_seconds;        /* default 1 */
    /* Probe sampling periods in steps (0: off; FP_AUTO, the default: probe.h's default period, or once at
     * the last step of a shorter run). Which step does what: trainer/run/step_plan.h. */
    int hist_every, error_every, trace_every;
    fp_compare_progress_fn progress;
    void *progress_user;
    double progress_interval_s; /* per arm at most this often (and at its first and last step); <= 0: every
                                 * step; NaN (the default): every step in a run of at most 20 steps, else 5 s */
} fp_compare_config;

/* The embedded comparison on a CPU: resnet50 at 64x64 on synthetic data, fp32 and fp16, batch 16, 80 steps
 * (within 3 minutes on a 2-core CPU: bench/bench_compare_default.sh), an automatic lr scaled with the batch
 * (sgd 0.1 x batch / 256, which learns stably at batch 16 where 0.1 spikes the loss, as in PyTorch) after an
 * automatic warmup, an evaluation half-way and at the end over 8 batches, automatic turns of about 1 s,
 * probes at their automatic periods (step_plan.h), progress every 5 s (every step in short runs), recorded
 * in FP_STORE_DEFAULT_PATH; the rest fp_train_config_default's. */
void fp_compare_config_default(fp_compare_config *cfg);
/* The same with a GPU's realistic sizes: 224x224, batch 256, 500 steps. */
void fp_compare_config_default_gpu(fp_compare_config *cfg);
/* `fp16probe train`'s: fp_train_config_default's settings (no model: it must be given), one policy to be
 * named (precision NULL), command "train", evaluation at the end only, probes at their automatic periods,
 * recorded in FP_STORE_DEFAULT_PATH. */
void fp_compare_config_default_train(fp_compare_config *cfg);

typedef struct {
    char policy[32];
    fp_run_status status;       /* FINISHED, INTERRUPTED or FAILED (RUNNING while the comparison runs) */
    int64_t run_id;             /* 0 when nothing was recorded */
    int64_t steps_done, skipped;   /* steps_done: the arm's iterations (a resume counts the restored ones) */
    float last_loss;
    double mean_step_ms;        /* compute time per step, mean */
    double val_loss, val_top1, val_top5;   /* last evaluation; NaN when none */
    char message[512];          /* why the arm failed / was interrupted ("" when finished) */
    /* data parallel (base.arm.dist): per step, mean over steps of the slowest rank's all-reduce, its exposed
     * part, the bytes each rank reduced, and the all-reduce's share of the step (NaN alone) */
    double comm_ms, exposed_ms, comm_bytes, comm_share;
    double reduce_rel_l2;       /* the 16-bit all-reduce's rounding at the last checked step (NaN: none) */
} fp_compare_arm_result;

typedef struct {
    fp_run_status status;       /* FINISHED (some arms may have failed: nfailed), INTERRUPTED, or FAILED
                                 * (setup failed, the store failed, or every arm failed) */
    int usage_error;            /* 1: a bad choice; nothing was recorded */
    int64_t session_id;
    int narms, nfailed, ref;    /* ref: index of the reference arm */
    int turn;                   /* steps per turn of the last turn */
    int ranks;                  /* data parallel: the world size (1 alone); the global batch is base.batch x ranks */
    fp_compare_arm_result arms[FP_COMPARE_MAX_ARMS];
    char message[512];
} fp_compare_result;

typedef struct fp_compare fp_compare;

/* Checks the choices (the automatic values resolved: train.h, step_plan.h; steps >= 1), the output files
 * (fp_train_check_outputs), opens the data and base.resume's checkpoint (its metadata sound, steps left before
 * base.steps, made with this run's settings), creates every arm (same seed / weights; one arm with base.resume
 * restored from its checkpoint), starts the loader and records the session and one run per arm (reference
 * first). FP_OK, or an FP_E* code with res->message and *out NULL: a failure before the session records nothing
 * (res->session_id 0; res->usage_error 1 for a bad choice, 0 for an input or setup failure: the data, an output
 * directory, the checkpoint, the weights, memory). An arm that alone fails to be created while others are
 * created is recorded failed while the others go on. */
int fp_compare_open(fp_compare **out, const fp_compare_config *cfg, fp_compare_result *res);
int fp_compare_arm_count(const fp_compare *c);
fp_arm *fp_compare_get_arm(fp_compare *c, int i);   /* NULL for an arm that failed to be created */
int64_t fp_compare_session(const fp_compare *c);

/* Runs the turns to the end (or a stop), the final evaluations, for one arm its last checkpoint and saved
 * weights (base.checkpoint, base.save; after a stop too), and closes the store (every run marked).
 * FP_OK when it finished or was interrupted (res->status tells; arms may have failed), an FP_E* code when
 * the whole comparison failed (the store, or every arm). Call once. */
int fp_compare_run(fp_compare *c, fp_compare_result *res);

/* From any thread (the dashboard's): stop after the current step, as the first Ctrl-C does. */
void fp_compare_request_stop(fp_compare *c);

void fp_compare_close(fp_compare *c);   /* NULL is fine; closes the store (interrupted) if still open */

/* fp_compare_open + fp_compare_run + fp_compare_close. */
int fp_compare_train(const fp_compare_config *cfg, fp_compare_result *res);

#endif
