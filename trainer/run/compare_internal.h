/* compare_internal.h — private to the training loop, shared by its files: compare.c (the turns and the
 * steps, an arm marked failed), compare_config.c (the defaults, the policy list), compare_open.c (opening:
 * the arms, the loader, the session and its runs; closing), compare_probes.c (the probes of each arm, the
 * riding precision error and parameter pass, GPU energy per turn and the deferred step rows),
 * compare_checkpoint.c (one arm's resume, checkpoints), compare_eval.c (evaluations), compare_progress.c (the
 * progress lines), compare_dist.c (the data-parallel figures) and compare_end.c (the run's end, the result).
 * Promises: nothing here is part of compare.h. */
#ifndef FP_COMPARE_INTERNAL_H
#define FP_COMPARE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include "trainer/analysis/analysis.h"
#include "probe/probe.h"
#include "store.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/compare.h"
#include "trainer/run/record.h"

/* A step whose row waits for the end of its turn (a GPU arm: the turn's energy is known only then). */
typedef struct {
    fp_arm_step_result r;
    int64_t w0, w1;
    int has_detail;
    char detail[400];
    fp_layer_time_t *times;
    size_t ntimes, cap_times;
    int64_t cycles, instructions;
    int64_t host_cpu_ns;        /* the training thread's CPU time over the step; <= 0: not measured */
} pending_step;

typedef struct {
    const fp_policy *pol;       /* the arm's policy (compared by identity) */
    const char *policy;         /* its name */
    fp_arm *arm;
    int64_t run;
    int active;                 /* still training */
    int64_t images_since;       /* since the last progress report */
    int64_t ns_since;
    double last_report;         /* mono seconds; < 0: never */
    int64_t timed_steps;        /* steps counted in timed_ns (after the first few) */
    double timed_ns;
    int64_t steps_here;
    double step_ms_sum;
    int64_t last_ns;            /* compute time of the last step */
    int64_t data_epoch, data_batch;   /* the loader's position after the arm's last batch (its checkpoints') */
    /* probes: per-layer times every step, energy where RAPL is readable, histograms, rounding error */
    fp_probe *probe;
    fp_cpu_timer *timer;
    fp_rapl *rapl;
    fp_perf *perf;              /* CPU cycles and instructions, where perf_event_open is permitted */
    fp_hist_probe *hist;
    fp_prec_err *perr;          /* low-precision arms, when the reference is fp32 and --error-every */
    int perr_armed;             /* riding on the reference's current step */
    char perr_fail[512];        /* the ride failed for this arm: why, "" if not (it fails after the reference's step) */
    int perr_mem_told;          /* the info event on its GPU clones' memory is written */
    float *old_params;          /* the parameters before a sampled step (updates, lost updates), unless steppable */
    int steppable;              /* the parameter pass rides on the optimizer step (fp_arm_set_update_hook) */
    fp_param_dev *pdev;         /* a GPU arm's parameter pass on the device (analysis.h), NULL: on the host */
    char pdev_off[256];         /* a GPU arm's pass on the host: why ("" otherwise) */
    int64_t pdev_ns;            /* the last sampled step's device pass: wall time outside the step (the host's) */
    double lost_all;            /* the lost-update fraction of the pass riding on the last step */
    float *scratch;             /* a skipped step's gradients, scaled back */
    double *per_layer;          /* lost-update fraction per layer */
    /* GPU probes (an arm on a device backend) */
    int gpu;                    /* the arm runs on a device backend */
    fp_nvtx *nvtx;              /* NVTX ranges, when built with NVTX3 */
    double turn_e0;             /* NVML energy (J) at the start of the arm's turn, after a sync; NaN: none */
    pending_step *pend;         /* the turn's step rows, written at its end with energy / steps */
    size_t npend, cap_pend;
    uint64_t cupti_dropped, cupti_kernels;   /* this run's share of the tracer's counts */
    /* data parallel: the all-reduce's figures summed over the arm's steps here (rank 0: every rank's max) */
    double comm_ns, exposed_ns, compute_ns, bytes;
    double *reduce_layers;      /* the 16-bit all-reduce's rel. L2 per layer at a checked step */
    double *rank_ns;            /* rank 0: each rank's step time summed (the straggler shows) */
    int64_t reduce_step, reduce_over, reduce_under;   /* the last checked step: overflowed / flushed values */
} arm_state;

struct fp_compare {
    fp_compare_config cfg;      /* as given, its automatic values resolved (train.h, step_plan.h) */
    fp_arm_config acfg;         /* the shared arm configuration (policy set per arm) */
    const fp_policy *pols[FP_COMPARE_MAX_ARMS];   /* cfg.precision, parsed once */
    const fp_policy *fp32;      /* the reference's policy when present */
    int narms, ref;
    int ride;                   /* the precision error rides on the reference's step (a host reference) */
    arm_state arms[FP_COMPARE_MAX_ARMS];
    fp_dataset *ds;
    fp_loader *ld;
    fp_store_t *store;
    int64_t session;
    const char *data;
    char device[300];
    char extra[1024];           /* the comparison's own settings in the configuration JSON */
    /* one arm: resume and checkpoints (compare_checkpoint.c) */
    fp_checkpoint *ck;          /* base.resume, open while the run lasts (its metadata may name model and policy) */
    int64_t start_iter, start_epoch, start_batch;   /* where a resumed run continues: step, data position */
    /* the turn's batches (copies: the loader's buffer is only valid until its next batch); each slot one block,
     * labels after images, page-locked in place when ring_pinned (compare.c says why rewriting a slot is safe) */
    fp_batch *ring;
    int64_t *ring_pos;          /* [2 * ring_cap]: the loader's position (epoch, batch) after each batch */
    size_t ring_cap;            /* batches allocated */
    size_t batch_floats;
    int ring_pinned;            /* the arms are on the CUDA backend: its blocks get registered (backend_cuda.h) */
    atomic_int stop;
    int ran;
    /* GPU probes, one each for the session (arms on the CUDA backend only) */
    fp_nvml *nvml;              /* energy at turn boundaries, the device_samples sampler */
    fp_cupti *cupti;            /* kernel rows every trace_every steps, re-targeted at each turn */
    uint64_t cupti_dropped_mark, cupti_kernels_mark;   /* the tracer's counts when last shared out */
    /* data parallel (base.arm.dist): this rank and the world; rank 0 alone records, prints and evaluates */
    fp_dist *dist;
    int rank, ranks;
    int dist_failed;            /* an arm failed on this rank: the job stops (the others cannot go on alone) */
    char dist_message[512];
};

/* NVML's sampler period for device_samples. */
enum { NVML_SAMPLE_MS = 100 };

/* compare_probes.c: an arm's probe set; the riding precision error (armed before the reference's step,
 * failures applied after it) and the parameter pass riding on the optimizer; skipped-step detail and
 * lost-update events; the GPU probes for the session and each turn; deferred step rows (a GPU arm's
 * rows wait for its turn's energy). */
int fp_cmp_attach_probes(fp_compare *c, int i);
void fp_cmp_ride_arm(fp_compare *c, fp_compare_result *res, int64_t step_no, int n);
void fp_cmp_ride_failures(fp_compare *c, fp_compare_result *res);
int fp_cmp_params_while_stepping(void *ctx, fp_arm *arm, fp_optim *opt);
const char *fp_cmp_skip_detail(arm_state *a, const fp_arm_step_result *r, char *text, size_t cap);
void fp_cmp_lost_updates_event(fp_compare *c, arm_state *a, int64_t step, double all);
void fp_cmp_gpu_probes_begin(fp_compare *c);
void fp_cmp_gpu_probes_end(fp_compare *c);
void fp_cmp_turn_begin(fp_compare *c, int i);
int fp_cmp_defers_steps(const fp_compare *c, const arm_state *a);
double fp_cmp_synced_energy_j(fp_compare *c, arm_state *a);
int fp_cmp_defer_step(arm_state *a, const fp_arm_step_result *r, int64_t w0, int64_t w1,
                      const fp_record_step_extra *x);
int fp_cmp_flush_steps(fp_compare *c, arm_state *a);
/* compare_checkpoint.c, one arm: the model and policy of base.resume's checkpoint where the configuration has
 * none (opens c->ck); the arm restored from it once its settings were checked (c->start_*); a checkpoint of
 * arm i at its data position (FP_OK, nothing written, without base.checkpoint). */
int fp_cmp_resume_choices(fp_compare *c);
/* Before anything is recorded: the checkpoint has steps left before --steps (else FP_EINVAL, *usage = 1) and
 * was made with this run's settings (else FP_EINVAL / FP_EFORMAT naming the file and the option). */
int fp_cmp_resume_check(fp_compare *c, int *usage);
int fp_cmp_resume(fp_compare *c);
int fp_cmp_checkpoint(fp_compare *c, int i);
/* compare.c: marks arm i failed with msg (its run closed as failed); the others carry on. _failf: the message
 * formatted first (before the failing arm's rows are flushed). */
void fp_cmp_arm_fail(fp_compare *c, fp_compare_result *res, int i, const char *msg);
void fp_cmp_arm_failf(fp_compare *c, fp_compare_result *res, int i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* compare.c: the turn's batches freed (each slot unregistered first when ring_pinned); after the arms are freed. */
void fp_cmp_ring_free(fp_compare *c);
/* compare_eval.c: whether the data set has a validation split (the plan's evaluations need one); arm i
 * evaluated after step `step` (its deferred rows flushed first), recorded and reported; an error is the arm's. */
int fp_cmp_has_val(const fp_compare *c);
int fp_cmp_evaluate(fp_compare *c, fp_compare_result *res, int i, int64_t step, double t0);
/* compare_progress.c: arm i's progress line after step step_no when progress_interval_s has passed (or it is
 * the last step; its counters since the last line reset), after an evaluation, after it failed. t0: the loop's
 * start (fp_clock_mono_s). */
void fp_cmp_progress_step(fp_compare *c, const fp_compare_result *res, int i, const fp_arm_step_result *r,
                          int64_t step_no, double t0);
void fp_cmp_progress_eval(fp_compare *c, const fp_compare_result *res, int i, int64_t step, double t0);
void fp_cmp_progress_failed(fp_compare *c, const fp_compare_result *res, int i);
/* compare_dist.c, data parallel: the next step of arm a also checks its 16-bit all-reduce against fp32;
 * after arm i's step on every rank, the figures gathered to rank 0 and recorded (an error is the arm's); at
 * the end, rank 0's event summing up arm i's all-reduce (after its result's comm_* are set). */
int fp_cmp_reduce_check_next(arm_state *a);
int fp_cmp_dist_step_figures(fp_compare *c, fp_compare_result *res, int i, const fp_arm_step_result *r);
void fp_cmp_dist_summary_event(fp_compare *c, const fp_compare_result *res, int i);
/* compare_end.c: after the loop (rc: the store or a rank failed; interrupted: a stop), each arm's end (its
 * last evaluation, checkpoint and weights, or interrupted / failed), the result's figures and status, the
 * store closed; returns fp_compare_run's code. */
int fp_cmp_end(fp_compare *c, fp_compare_result *res, int rc, int interrupted, double t0);

#endif
