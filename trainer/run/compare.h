/* compare.h — the side-by-side comparison (`fp16probe compare`, `fp16probe <model>`): one model under
 * several precision policies, arms created from the same initial weights, fed the same batches of one
 * loader in the same order, trained in lockstep turns of K steps, evaluated on the same validation batches,
 * every arm a run of one session in the store. Promises: bad choices are refused before anything is
 * recorded; a failing arm (NaN loss without a scaler, out of memory) is marked failed with its message
 * while the others carry on; a stop request (Ctrl-C, the dashboard) ends every arm after its current step,
 * flushes everything and marks the session interrupted; nothing here prints (progress is a callback). */
#ifndef FP_COMPARE_H
#define FP_COMPARE_H

#include <stdint.h>
#include "store.h"
#include "trainer/run/train.h"

#define FP_COMPARE_MAX_ARMS 8
#define FP_COMPARE_AUTO_TURN_MAX 50     /* an automatic turn is at most this many steps */
#define FP_COMPARE_AUTO_TURN_MAX_GPU 400  /* ... when every active arm runs on a device backend: GPU steps are
                                         * short and NVML's energy counter (mJ) needs turns of ~1 s */

/* Parses a comma-separated policy list ("fp32,fp16"): names[] receives the policies' own (static) names.
 * FP_EINVAL, message listing the valid choices, for an empty list or entry, an unknown policy, a policy
 * given twice, or more than max policies. */
int fp_compare_parse_policies(const char *list, const char **names, int max, int *n);

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
} fp_compare_progress;

typedef void (*fp_compare_progress_fn)(const fp_compare_progress *p, void *user);

typedef struct {
    /* What every arm shares, as `train` takes it: base.arm (model, classes, image size, seed, optimizer,
     * schedule, threads, weights; its policy is ignored), data, augment, shuffle, batch, steps, loader
     * threads, evaluation, db (NULL: record nothing), device, session_name (NULL: "<model> fp32 vs fp16").
     * base.save / checkpoint / resume / progress are not used. */
    fp_train_config base;
    const char *precision;      /* comma-separated policies; the first fp32 one (else the first) is the
                                 * reference every other run names as ref_run */
    int turn;                   /* steps per turn; 0: automatic, a turn lasting about turn_seconds (at
                                 * most FP_COMPARE_AUTO_TURN_MAX steps, FP_COMPARE_AUTO_TURN_MAX_GPU on a
                                 * GPU, the turn's batches at most 1 GiB, and 1 for the first turn) */
    double turn_seconds;        /* default 1 */
    /* Probe sampling periods in steps (0: off; FP_AUTO, the default: probe.h's default period, or once at
     * the last step of a shorter run). Which step does what: trainer/run/step_plan.h. */
    int hist_every, error_every, trace_every;
    fp_compare_progress_fn progress;
    void *progress_user;
    double progress_interval_s; /* per arm at most this often (and at its first and last step); <= 0: every step */
} fp_compare_config;

/* fp_train_config_default for base, "fp32,fp16", automatic turns of about 1 s, probes at their automatic
 * periods, progress every 5 s. */
void fp_compare_config_default(fp_compare_config *cfg);

typedef struct {
    char policy[32];
    fp_run_status status;       /* FINISHED, INTERRUPTED or FAILED (RUNNING while the comparison runs) */
    int64_t run_id;             /* 0 when nothing was recorded */
    int64_t steps_done, skipped;
    float last_loss;
    double mean_step_ms;        /* compute time per step, mean */
    double val_loss, val_top1, val_top5;   /* last evaluation; NaN when none */
    char message[512];          /* why the arm failed / was interrupted ("" when finished) */
} fp_compare_arm_result;

typedef struct {
    fp_run_status status;       /* FINISHED (some arms may have failed: nfailed), INTERRUPTED, or FAILED
                                 * (setup failed, the store failed, or every arm failed) */
    int usage_error;            /* 1: a bad choice; nothing was recorded */
    int64_t session_id;
    int narms, nfailed, ref;    /* ref: index of the reference arm */
    int turn;                   /* steps per turn of the last turn */
    fp_compare_arm_result arms[FP_COMPARE_MAX_ARMS];
    char message[512];
} fp_compare_result;

typedef struct fp_compare fp_compare;

/* Checks the choices, opens the data, creates every arm (same seed / weights), starts the loader and
 * records the session and one run per arm (reference first). FP_OK, or an FP_E* code with res->message:
 * usage errors (res->usage_error) record nothing; other setup failures record the session with failed
 * runs and return the error (*out is then NULL). An arm that alone fails to be created is marked failed
 * while the others go on. */
int fp_compare_open(fp_compare **out, const fp_compare_config *cfg, fp_compare_result *res);
int fp_compare_arm_count(const fp_compare *c);
fp_arm *fp_compare_get_arm(fp_compare *c, int i);   /* NULL for an arm that failed to be created */
int64_t fp_compare_session(const fp_compare *c);

/* Runs the turns to the end (or a stop), the final evaluations, and closes the store (every run marked).
 * FP_OK when it finished or was interrupted (res->status tells; arms may have failed), an FP_E* code when
 * the whole comparison failed (the store, or every arm). Call once. */
int fp_compare_run(fp_compare *c, fp_compare_result *res);

/* From any thread (the dashboard's): stop after the current step, as the first Ctrl-C does. */
void fp_compare_request_stop(fp_compare *c);

void fp_compare_close(fp_compare *c);   /* NULL is fine; closes the store (interrupted) if still open */

/* fp_compare_open + fp_compare_run + fp_compare_close. */
int fp_compare_train(const fp_compare_config *cfg, fp_compare_result *res);

#endif
