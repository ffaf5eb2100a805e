/* record.h — recording a run into the store: its layers, each step's row with the events it raises, its
 * evaluations. Promise: a compared arm's rows and a trained run's are written by these same functions
 * (train is a comparison of one arm); a step's events say why in one line naming the layer. */
#ifndef FP_RECORD_H
#define FP_RECORD_H

#include <stdint.h>
#include "store.h"
#include "trainer/run/train.h"

/* The model's layers as rows of `layers` for a run at this batch size: names, types, shapes in
 * PyTorch's order ("16x64x56x56"; "16x512" for vectors), params, FLOPs per step (batch included). */
int fp_record_layers(fp_store_t *s, int64_t run, fp_model *m, int batch);

/* What probes add to a step row: per-layer times (committed with the step), energy (NaN: not measured;
 * power is energy / step time), CPU cycles and instructions, a detail appended to the skipped-step
 * event (NULL: none), and the host CPU time of the step. */
typedef struct {
    const fp_layer_time_t *times;
    size_t ntimes;
    double energy_j;
    const char *skip_detail;
    int64_t cycles, instructions;   /* perf_event; <= 0: not measured */
    int64_t host_cpu_ns;            /* the training thread's CPU time over fp_arm_step; <= 0: not measured */
} fp_record_step_extra;

/* One step row (loss, scale, skipped, lr, wall clock start / end, compute time, samples/s, the arm's
 * memory current / peak, and x's probes; x NULL: none measured) and its events: skipped step naming the
 * first layer with an inf/NaN gradient, loss-scale change, a non-finite gradient applied without a
 * scaler, NaN loss. Returns the store's error, if any. */
int fp_record_step(fp_store_t *s, int64_t run, fp_arm *arm, const fp_arm_step_result *r, int64_t start_ns,
                   int64_t end_ns, const fp_record_step_extra *x);

/* "loss is NaN at step N and policy P has no loss scaler: ..." (thread-local buffer). */
const char *fp_record_diverged_message(const fp_arm *arm, const fp_arm_step_result *r);

/* Evaluation of the arm on ds's validation batches (c->batch, c->loader_threads, c->eval_batches), recorded
 * as a "val" row at `step` when s is not NULL; loss / top-1 / top-5 come back as fractions. */
int fp_record_eval(fp_store_t *s, int64_t run, fp_arm *arm, const fp_dataset *ds, const fp_train_config *c,
                   int64_t step, double *loss, double *top1, double *top5);

/* Data parallel: one step's figures of every rank (ranks[k] is rank k's, n ranks) as dist_steps rows, committed
 * together. Returns the store's error, if any; nothing when s is NULL. */
typedef struct {
    int64_t wall_ns, comm_ns, exposed_ns, bytes;   /* < 0: not measured */
    int skipped;
} fp_record_rank_step;
int fp_record_dist_step(fp_store_t *s, int64_t run, int64_t step, const fp_record_rank_step *ranks, int n);

/* Data parallel, at a step that measured the 16-bit all-reduce against fp32 (r->reduce_rel_l2 not NaN): one
 * allreduce_error row per layer with parameters (per_layer[fp_model_layer_count], NaN: a layer without
 * parameters, no row; per_layer NULL: none) and the whole gradient's row (layer -1) with the summed values
 * that overflowed / flushed to zero. Nothing for an fp32 all-reduce or an unmeasured step, or when s is NULL. */
int fp_record_allreduce_error(fp_store_t *s, int64_t run, fp_arm *arm, const fp_arm_step_result *r,
                              const double *per_layer);

/* An event of the run (formatted, at most 511 bytes); nothing when s is NULL. */
void fp_record_event(fp_store_t *s, int64_t run, int64_t step, int layer, fp_event_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#endif
