/* store.h — the run store's writing side: producers (trainer, probes) hand records to fp_store_*
 * functions that copy them into an in-memory queue and return at once; one writer thread per store
 * drains the queue into the SQLite file (docs/schema.md describes the tables).
 *
 * Promises:
 *  - Record functions never wait for the disk. The queue grows (up to a hard cap) instead of
 *    blocking; past the cap records are dropped, counted, and a warning event is stored at close.
 *  - Batched transactions are committed at least every FP_STORE_COMMIT_MS, so live readers are fresh.
 *  - A step and its per-layer time rows are committed in the same transaction (readers never see
 *    half a step).
 *  - Session and run ids are known to the caller when fp_store_begin_session / fp_store_begin_run
 *    return: those two (and fp_store_flush) go through the writer thread and wait for its commit.
 *  - Another process's lock on the file (its BEGIN EXCLUSIVE, a backup) is waited out: the writer retries
 *    with back-off for up to FP_STORE_LOCK_PATIENCE_MS while the queue keeps taking records; meanwhile
 *    fp_store_status says FP_STORE_WAITING (how long so far), and once the lock is had a warning event on
 *    each run says how long recording waited. Nothing is lost.
 *  - On a disk-full or I/O error, or a lock held past the patience, the writer stops for good: from that
 *    moment fp_store_writer_status (and fp_store_status, and every record function) returns FP_EIO with
 *    one line naming the file and the cause, so a training loop that polls it each step stops within a
 *    step; the run(s) are marked failed when still possible (for a lock: by fp_store_close, once it is
 *    released); what was committed before stays readable.
 *  - Nothing here prints or exits. One writing process per file at a time.
 *
 * Not measured = NULL in the file: pass NaN for a double field, a negative value for a nullable
 * integer field (memory, times, kernel counts, layer). */
#ifndef FP_STORE_H
#define FP_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "hist.h"

#define FP_STORE_DEFAULT_PATH "fp16probe.db"
#define FP_STORE_COMMIT_MS 100          /* a batch is committed at least this often (<= 250 ms) */
#define FP_STORE_LOCK_PATIENCE_MS 30000 /* how long another process's lock is waited out (default) */

typedef enum { FP_RUN_RUNNING = 0, FP_RUN_FINISHED, FP_RUN_FAILED, FP_RUN_INTERRUPTED } fp_run_status;
typedef enum { FP_PHASE_FORWARD = 0, FP_PHASE_BACKWARD_DATA, FP_PHASE_BACKWARD_WEIGHTS, FP_PHASE_COUNT } fp_phase;
typedef enum {
    FP_ROLE_ACTIVATION = 0, FP_ROLE_ACTIVATION_GRAD, FP_ROLE_WEIGHT, FP_ROLE_WEIGHT_GRAD, FP_ROLE_UPDATE,
    FP_ROLE_COUNT
} fp_tensor_role;
typedef enum {
    FP_EVENT_LOSS_SCALE = 0, FP_EVENT_SKIPPED_STEP, FP_EVENT_NAN, FP_EVENT_WARNING, FP_EVENT_INFO
} fp_event_kind;

const char *fp_run_status_name(fp_run_status s);   /* "running", "finished", ... (as stored) */
const char *fp_phase_name(fp_phase p);             /* "forward", "backward_data", "backward_weights" */
const char *fp_tensor_role_name(fp_tensor_role r); /* "activation", "activation_grad", ... */
const char *fp_event_kind_name(fp_event_kind k);   /* "loss_scale", "skipped_step", ... */

/* ---- what producers describe (strings may be NULL = unknown; they are copied) ---- */
typedef struct {
    const char *name;           /* free text, e.g. "resnet50 fp32 vs fp16" */
    const char *config_json;    /* the whole session configuration */
} fp_session_info_t;

typedef struct {
    int64_t session;            /* from fp_store_begin_session */
    const char *arm;            /* "fp32", "fp16", ... */
    const char *model, *policy; /* required */
    int64_t ref_run;            /* the reference arm's run id; <= 0: none */
    const char *device, *driver_version, *cuda_version, *cudnn_version, *cupti_version, *blas;
    int64_t batch_size, image_size;   /* < 0: unknown */
    const char *dataset;
    int64_t seed;
    const char *optimizer, *optimizer_config;  /* optimizer_config: JSON, e.g. {"lr":0.1,"momentum":0.9} */
    const char *config_json;    /* the run's full configuration */
} fp_run_info_t;

typedef struct {
    int64_t run;
    int index;                  /* 0.. in model order */
    const char *name;           /* torchvision-style, "layer3.2.conv2" */
    const char *type;           /* "conv2d", "batchnorm2d", "linear", ... */
    const char *input_shape, *output_shape;   /* "64x3x224x224" */
    int64_t params, fwd_flops, bwd_flops;
} fp_layer_info_t;

typedef struct {
    int64_t run, step;
    double loss, loss_scale, lr;
    int skipped;                /* 1: skipped for an inf/NaN gradient */
    int64_t start, end;         /* wall clock ns; < 0 unknown */
    int64_t wall_ns;
    double samples_per_s;
    int64_t mem_current, mem_peak;   /* bytes; < 0 not measured */
    double energy_j, power_w;        /* NaN: not measured */
    int64_t cycles, instructions;    /* CPU, perf_event; <= 0: not measured (no step takes 0 cycles) */
    int64_t host_cpu_ns;             /* the training thread's CPU time over the step (CLOCK_THREAD_CPUTIME_ID);
                                      * <= 0: not measured (NULL; a zeroed record is unmeasured) */
} fp_step_rec_t;

typedef struct {
    int32_t layer;
    int32_t phase;              /* fp_phase */
    int64_t time_ns;
    int32_t kernels;            /* < 0: unknown */
} fp_layer_time_t;

typedef struct {
    int64_t run, step;
    int64_t start, end;         /* ns on the profiler clock */
    int64_t short_name, demangled_name;  /* ids from fp_store_intern; 0: none */
    int32_t layer;              /* < 0: outside any layer */
    int32_t phase;              /* fp_phase; < 0: none */
    int32_t device_id, stream_id;
    uint32_t correlation_id;
    uint32_t grid[3], block[3];
    int32_t tensor_core;        /* 1 used tensor cores, 0 not, < 0 unknown */
    int32_t kernel_class;       /* fp_kernel_class (probe/kernel_class.h): 1 simt, 2 mma, 3 wgmma,
                                 * 4 tcgen05; 0 (a zeroed record) or out of range: unknown, NULL */
} fp_kernel_rec_t;

typedef struct {
    int64_t run, ref_run, step;
    int32_t layer;
    int32_t role;               /* fp_tensor_role */
    double rel_l2, max_abs, cosine;
} fp_precision_rec_t;

typedef struct {
    int64_t run, step;
    char split[16];             /* "train", "val" */
    double loss, top1, top5;
    int64_t images;             /* images evaluated (the accuracy's sample size); <= 0: not recorded */
} fp_eval_rec_t;

typedef struct {
    int64_t run, timestamp;     /* wall clock ns */
    int32_t device_id;
    double power_w, energy_j, temperature_c;   /* NaN: not measured */
    int64_t mem_used, sm_clock_mhz, mem_clock_mhz;  /* < 0: not measured */
} fp_device_sample_t;

/* Data parallel (docs/schema.md's dist_steps): one rank's figures of one step, CLOCK_MONOTONIC / wall ns
 * (< 0: not measured). Compute time is wall_ns - exposed_ns. */
typedef struct {
    int64_t run, step;
    int32_t rank;               /* 0 .. ranks - 1 */
    int32_t skipped;            /* 1: the step was skipped (every rank skips the same steps) */
    int64_t wall_ns;            /* the rank's whole step */
    int64_t comm_ns;            /* its gradient all-reduce, posting the first bucket to the last result */
    int64_t exposed_ns;         /* of that, the time compute waited for it (not overlapped) */
    int64_t bytes;              /* what the rank sent into the reduction (in the wire format) */
} fp_dist_step_rec_t;

/* Data parallel (allreduce_error): the gradients reduced in a 16-bit wire format against the same ones
 * reduced in fp32 at a sampled step. layer -1: all layers together. */
typedef struct {
    int64_t run, step;
    int32_t layer;              /* model layer; -1: the whole gradient */
    char wire[8];               /* "fp16" or "bf16" */
    double rel_l2;              /* NaN: not measured */
    int64_t overflow, underflow;   /* summed values that became Inf / 0 where fp32's did not; < 0: not counted */
} fp_allreduce_error_rec_t;

typedef struct {
    uint64_t queued;            /* records accepted */
    uint64_t written;           /* rows written and committed */
    uint64_t dropped;           /* records refused because the queue was at its cap */
    uint64_t commits;
    size_t queue_capacity;      /* current capacity in records */
} fp_store_stats_t;

typedef struct fp_store fp_store_t;

/* Open (creating or migrating) `path` for recording and start the writer thread. When runs of a
 * writer process that has died on this host are still 'running', they are marked interrupted. */
int fp_store_open(fp_store_t **out, const char *path);

/* Flush every queued record, mark each run this store began that is still running as `status`
 * (FP_RUN_FINISHED, FP_RUN_INTERRUPTED, FP_RUN_FAILED) with `message` (NULL: none), end the
 * sessions, stop the thread and close. Returns FP_OK, or the writer's error. s may be NULL. */
int fp_store_close(fp_store_t *s, fp_run_status status, const char *message);

/* Synchronous (wait for the writer's commit): create a session / a run ('running'). */
int fp_store_begin_session(fp_store_t *s, const fp_session_info_t *info, int64_t *session_id);
int fp_store_begin_run(fp_store_t *s, const fp_run_info_t *info, int64_t *run_id);
/* Wait until everything queued so far is committed. */
int fp_store_flush(fp_store_t *s);

/* The id of a name in StringIds (kernel names), assigned at once; <= 0 (an FP_E* code) on error. */
int64_t fp_store_intern(fp_store_t *s, const char *name);

/* Queued (non-blocking) records. Each returns FP_OK, or the writer's error once it has failed. */
int fp_store_layer(fp_store_t *s, const fp_layer_info_t *layer);
/* A step and its per-layer times (n rows, may be 0), committed together. */
int fp_store_step(fp_store_t *s, const fp_step_rec_t *step, const fp_layer_time_t *times, size_t n);
int fp_store_kernels(fp_store_t *s, const fp_kernel_rec_t *k, size_t n);
/* A histogram of a tensor (copied; encoded as a hist blob plus per-format class columns). */
int fp_store_hist(fp_store_t *s, int64_t run, int64_t step, int layer, fp_tensor_role role, const fp_hist_t *h);
int fp_store_precision(fp_store_t *s, const fp_precision_rec_t *p);
int fp_store_eval(fp_store_t *s, const fp_eval_rec_t *e);
int fp_store_device_sample(fp_store_t *s, const fp_device_sample_t *d);
/* Data parallel: one step's rows of n ranks, committed together (readers see every rank of a step or none). */
int fp_store_dist_steps(fp_store_t *s, const fp_dist_step_rec_t *r, size_t n);
/* Data parallel: the all-reduce's rounding at one step, n rows (per layer and the -1 row), committed together. */
int fp_store_allreduce_error(fp_store_t *s, const fp_allreduce_error_rec_t *e, size_t n);
/* An event at wall time `time_ns` (<= 0: now); step and layer < 0: none. */
int fp_store_event(fp_store_t *s, int64_t run, int64_t time_ns, int64_t step, int layer, fp_event_kind kind,
                   const char *text);
/* End one run now (queued after its records). */
int fp_store_end_run(fp_store_t *s, int64_t run, fp_run_status status, const char *message);

/* The poll a training loop makes each step: FP_OK while recording can go on (also while a lock is being
 * waited out); else the writer's error code (FP_EIO, FP_ENOMEM) with fp_error_message() set to its one
 * line ("FILE: the database stayed locked by another process for 30 s while writing steps; recording
 * stopped", "FILE: the disk is full while ..."): recording has stopped for good, stop training. Cheap
 * (one atomic load while healthy); any thread. */
int fp_store_writer_status(fp_store_t *s);

/* The same, with what the writer is doing for a progress line or a dashboard. */
typedef enum {
    FP_STORE_RECORDING = 0,     /* healthy */
    FP_STORE_WAITING,           /* waiting out another process's lock (records queue meanwhile) */
    FP_STORE_FAILED             /* stopped for good: code and message say why */
} fp_store_state;
typedef struct {
    fp_store_state state;
    int code;                   /* FP_OK, or FAILED: the FP_E* code (as fp_store_writer_status) */
    double waiting_s;           /* WAITING: seconds waited for the lock so far */
    double patience_s;          /* how long a lock is waited out before recording stops */
    char message[512];          /* WAITING / FAILED: one line naming the file ("" when RECORDING) */
} fp_store_status_t;
/* Fills st; returns st->code (FP_OK unless FAILED, then with fp_error_message() set). Any thread. */
int fp_store_status(fp_store_t *s, fp_store_status_t *st);
/* How long the writer waits out another process's lock (default FP_STORE_LOCK_PATIENCE_MS; 0: not at
 * all, the first busy answer stops recording). Any time, any thread. */
void fp_store_set_lock_patience(fp_store_t *s, int64_t ms);
void fp_store_get_stats(fp_store_t *s, fp_store_stats_t *st);

/* ---- signals (store_signal.c) ----
 * Install SIGINT and SIGTERM handlers that only record the signal (async-signal-safe); a second
 * one of them restores the default action and re-raises it. The trainer polls fp_store_signalled()
 * between steps and then closes its store with FP_RUN_INTERRUPTED. */
int fp_store_install_signal_handlers(void);
int fp_store_signalled(void);   /* the signal number received, or 0 */

#endif
