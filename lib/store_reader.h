/* store_reader.h — the one reading API of the run store, used by every consumer (ls, export, the
 * dashboard, reports, the gate). Promises: opening never creates or modifies anything; each query
 * runs in its own short read transaction (so checkpoints are never held back and a query never sees
 * half of a writer's transaction); SQLITE_BUSY never reaches the caller as such (busy timeout);
 * errors are one line naming the file. Results are arrays the caller frees with free().
 * A reader handle is used by one thread at a time. */
#ifndef FP_STORE_READER_H
#define FP_STORE_READER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hist.h"

typedef struct fp_reader fp_reader_t;

/* A live reader: sees what writers commit while it is open. While no writer is active (no -wal
 * file) it reads the file immutable, so not even SQLite's -wal/-shm side files are created; when a
 * writer appears it reconnects before its next query. */
int fp_reader_open(fp_reader_t **out, const char *path);
/* For one-shot tools (ls, export): the same, without the reconnect. */
int fp_reader_open_snapshot(fp_reader_t **out, const char *path);
void fp_reader_close(fp_reader_t *r);
const char *fp_reader_path(const fp_reader_t *r);

typedef struct {
    int64_t id;
    char name[128], host[64];
    int64_t start, end;          /* ns since the epoch; end < 0: not ended */
    int64_t runs;
} fp_session_row_t;

typedef struct {
    int64_t id, session, ref_run;   /* ref_run < 0: none */
    char arm[32], model[64], policy[32], device[128], host[64], dataset[64], optimizer[32];
    int64_t batch_size, image_size, seed;
    int64_t start, end, heartbeat;  /* ns since the epoch; < 0: none */
    char status[16];     /* as stored, except "interrupted" when its writer is known to be gone */
    int stale;           /* 1: stored as running, but its writer is gone or silent for 15 s */
    char failure[256];
    int64_t steps;       /* step rows */
    int64_t last_step;   /* -1: none */
    double last_loss;    /* loss of the last step; NaN: none or not finite */
} fp_run_row_t;

int fp_reader_sessions(fp_reader_t *r, fp_session_row_t **rows, size_t *n);
/* Runs of one session (session <= 0: all), by id. */
int fp_reader_runs(fp_reader_t *r, int64_t session, fp_run_row_t **rows, size_t *n);
/* As fp_reader_runs without reading the runs' steps (cheap, for attaching to a long session): steps and
 * last_step are -1, last_loss NaN. */
int fp_reader_runs_meta(fp_reader_t *r, int64_t session, fp_run_row_t **rows, size_t *n);
/* One run; FP_EINVAL with "FILE: no run ID" when there is none. */
int fp_reader_run(fp_reader_t *r, int64_t run, fp_run_row_t *row);

/* NaN / negative: NULL in the file (not measured). */
typedef struct {
    int64_t step;
    double loss, loss_scale, lr, samples_per_s, energy_j, power_w;
    int skipped;
    int64_t start, end, wall_ns, mem_current, mem_peak;
    int64_t host_cpu_ns;         /* the training thread's CPU time over the step; -1: not measured */
} fp_step_row_t;

/* Steps with step > after_step, ascending, at most limit of them (0: all). For "the last 100
 * steps" pass after_step = last_step - 100. */
int fp_reader_steps_since(fp_reader_t *r, int64_t run, int64_t after_step, size_t limit, fp_step_row_t **rows,
                          size_t *n);

typedef struct {
    int layer;
    char name[64], type[32];
    int phase;                   /* fp_phase */
    int64_t steps;               /* rows aggregated */
    double mean_ns, median_ns, stddev_ns;
    int64_t min_ns, max_ns;
    double mean_kernels;         /* NaN when unknown */
} fp_layer_sum_t;

/* Per layer and phase over steps lo..hi (inclusive), ordered by layer then phase. */
int fp_reader_layer_summary(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_layer_sum_t **rows,
                            size_t *n);

typedef struct {
    int64_t step;
    int layer, role;             /* fp_tensor_role */
    fp_hist_t hist;
} fp_hist_row_t;

/* The histograms (one per tensor role) of a layer at the latest sampled step <= step (step < 0:
 * the latest); *n = 0 when there is none. */
int fp_reader_histograms(fp_reader_t *r, int64_t run, int layer, int64_t step, fp_hist_row_t **rows, size_t *n);

/* Per kernel name, the columns of nsys's cuda_gpu_kern_sum; by total time, largest first. */
typedef struct {
    double time_pct;
    int64_t total_ns, instances;
    double avg_ns, med_ns;
    int64_t min_ns, max_ns;
    double stddev_ns;
    char name[512];
} fp_kernel_sum_t;

/* Over the kernels of steps lo..hi (inclusive; pass 0, INT64_MAX for all). */
int fp_reader_kernel_summary(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_kernel_sum_t **rows,
                             size_t *n);

/* ---- export (store_csv.c) ---- */
/* The tables export knows, as "runs, layers, steps, ..." */
const char *fp_reader_table_list(void);
int fp_reader_table_known(const char *name);   /* 1 when export knows the table */
/* One run's rows of a table as RFC 4180 CSV (header row, CRLF line ends, fields with a comma, quote,
 * CR or LF quoted with quotes doubled; NULL is an empty field). FP_EINVAL for an unknown table
 * (the message lists the valid ones) or run; FP_EIO when writing fails. */
int fp_reader_export_csv(fp_reader_t *r, int64_t run, const char *table, FILE *out);

/* ---- what reports, traces and the gate read (store_reader_report.c; per role: store_reader_hist.c) ----
 * Same promises as above: one short read transaction per call, arrays freed with free(). Strings
 * longer than their field are truncated. */

/* A run's environment: what fp_run_row_t does not carry. "" = unknown. */
typedef struct {
    char driver_version[64], cuda_version[64], cudnn_version[64], cupti_version[64], blas[128];
    char fp16probe_version[32];
    char optimizer_config[1024];
    char config[4096];           /* the run's configuration (JSON) */
} fp_run_env_t;
int fp_reader_run_env(fp_reader_t *r, int64_t run, fp_run_env_t *env);
/* The session's configuration JSON (malloc'd; "" when none); FP_EINVAL when there is no session. */
int fp_reader_session_config(fp_reader_t *r, int64_t session, char **json);

typedef struct {
    int layer;
    char name[64], type[32], input_shape[48], output_shape[48];
    int64_t params, fwd_flops, bwd_flops;   /* < 0: unknown */
} fp_layer_row_t;
/* The layers of a run, by index. */
int fp_reader_layers(fp_reader_t *r, int64_t run, fp_layer_row_t **rows, size_t *n);

typedef struct {
    int64_t step;
    char split[16];
    double loss, top1, top5;     /* NaN: not measured */
} fp_eval_row_t;
/* Evaluations of a run, by step then split. */
int fp_reader_evaluations(fp_reader_t *r, int64_t run, fp_eval_row_t **rows, size_t *n);
/* How many images each evaluation of a run used, where the file records it (a column
 * evaluations.images; NULL reads as -1). *n = 0 when the file has no such column: derive the count
 * from the run's configuration (eval_batches x batch). By step then split. */
typedef struct {
    int64_t step;
    char split[16];
    int64_t images;
} fp_eval_images_t;
int fp_reader_eval_images(fp_reader_t *r, int64_t run, fp_eval_images_t **rows, size_t *n);

typedef struct {
    int64_t start, step;         /* step < 0: none */
    int kind;                    /* fp_event_kind (info for an unknown name) */
    int layer;                   /* < 0: none */
    const char *text;            /* the whole text ("" when NULL); it lives in the rows' allocation */
} fp_event_row_t;
/* Events of a run in time order; at most limit (0: all); kind < 0: every kind. free(*rows) frees
 * their texts too. */
int fp_reader_events(fp_reader_t *r, int64_t run, int kind, size_t limit, fp_event_row_t **rows, size_t *n);

/* For one tensor role, each layer's histogram at its latest sampled step <= step (step < 0: the
 * latest), ordered by layer. */
int fp_reader_histograms_role(fp_reader_t *r, int64_t run, int role, int64_t step, fp_hist_row_t **rows,
                              size_t *n);

/* Per layer and role, the histogram columns summed over every sampled step (what SQL can sum
 * without decoding blobs). Format index: fp_format (fp16, bf16, e4m3, e5m2). */
typedef struct {
    int layer, role;
    int64_t samples;             /* histogram rows summed */
    int64_t count, zero, nan, inf;
    int64_t overflow[4], round_to_max[4], subnormal[4], underflow[4];
    double amax;                 /* the largest amax seen */
} fp_layer_numerics_t;
int fp_reader_layer_numerics(fp_reader_t *r, int64_t run, fp_layer_numerics_t **rows, size_t *n);

/* Per layer and role, the precision error of a run against its reference over every sampled step. */
typedef struct {
    int layer, role;
    int64_t samples;
    double mean_rel_l2, max_rel_l2, max_abs, min_cosine;   /* NaN: none measured */
} fp_precision_sum_t;
int fp_reader_precision_summary(fp_reader_t *r, int64_t run, fp_precision_sum_t **rows, size_t *n);

/* Per kernel name (as fp_reader_kernel_summary names them): 1 when any instance used tensor cores,
 * 0 when none did, -1 when unknown; kernel_class: the highest class of its instances
 * (fp_kernel_class, probe/kernel_class.h: 1 simt, 2 mma, 3 wgmma, 4 tcgen05; 0 unknown). */
typedef struct {
    int tensor_core;
    int kernel_class;
    char name[512];
} fp_kernel_flag_t;
int fp_reader_kernel_flags(fp_reader_t *r, int64_t run, fp_kernel_flag_t **rows, size_t *n);

/* The distinct steps of a run that have kernel rows (the sampled steps), ascending. */
int fp_reader_kernel_steps(fp_reader_t *r, int64_t run, int64_t **steps, size_t *n);

/* Kernels of steps lo..hi (inclusive), by step then start. name: demangled, else short name. */
typedef struct {
    int64_t step, start, end;    /* profiler clock, ns */
    int layer, phase;            /* < 0: none */
    int device_id, stream_id;
    uint32_t correlation_id;
    uint32_t grid[3], block[3];
    int tensor_core;             /* < 0 unknown */
    int kernel_class;            /* fp_kernel_class (probe/kernel_class.h); 0 unknown (NULL) */
    char name[256];
} fp_kernel_row_t;
int fp_reader_kernels(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi, fp_kernel_row_t **rows,
                      size_t *n);

/* Per-layer time rows of steps lo..hi (inclusive), by step, layer, phase. */
typedef struct {
    int64_t step;
    int layer, phase;
    int64_t time_ns;
    int kernels;                 /* < 0 unknown */
} fp_layer_time_row_t;
int fp_reader_layer_times(fp_reader_t *r, int64_t run, int64_t step_lo, int64_t step_hi,
                          fp_layer_time_row_t **rows, size_t *n);

#endif
