/* arm_internal.h — internal to the arm: arm*.c (the arm, its host step and the step's parts both paths run) and
 * arm_device*.c (the device step and the device state behind it, CUDA builds only). Promise: struct fp_arm is
 * defined here once; nothing outside those files includes this header (after config.h: HAVE_CUDA). */
#ifndef FP_ARM_INTERNAL_H
#define FP_ARM_INTERNAL_H

#include "trainer/run/arm.h"

struct fp_arm {
    fp_arm_config cfg;
    char *model_name, *policy_name, *weights;
    fp_model *model;
    const fp_policy *policy;
    fp_optim *optim;
    fp_grad_scaler scaler;
    int64_t iteration;
    float *dlogits;
    size_t dlogits_cap;
    /* device arm (backend with host_memory 0) */
    int dev;
    /* the optimizer's state on the device, each buffer in the parameters' layout: SGD's momentum buffers (fp32,
     * rounded to the policy's optim_state), Adam's exp_avg and exp_avg_sq (stored in the policy's optim_state) */
    void *dopt[2];              /* NULL: none */
    int nopt;                   /* 0 (plain SGD), 1 (SGD with momentum), 2 (Adam / AdamW) */
    fp_dtype dopt_dtype;        /* their storage dtype */
    int opt_host_newer;         /* fp_optim's host state was handed out (restore): upload before a step */
    int opt_dev_newer;          /* the device state moved on: download before the host state is read */
    fp_arm_forward_hook hook;   /* fp_arm_set_forward_hook */
    void *hook_ctx;
    fp_arm_update_hook uhook;   /* fp_arm_set_update_hook, for the next step */
    void *uhook_ctx;
    int64_t optim_ns;           /* the last optimizer time without uhook */
    /* data parallel (cfg.dist) */
    fp_dtype wire;              /* what the all-reduce carries */
    char *allreduce;            /* cfg.allreduce's copy */
    int check_reduce;           /* fp_arm_check_reduce_next: the next step measures the 16-bit reduction */
    double *check_layers;       /* ... per layer, when not NULL */
    float *ref_grads;           /* the fp32-reduced copy of the gradients at a checked step */
    int overlap;                /* this step's buckets are posted from the gradient-ready hook (grad_ready) */
    void *dstage;               /* device arm, 16-bit all-reduce: the gradients in the wire format */
    void *dref;                 /* device arm, checked step: the gradients reduced in fp32 (n floats) */
    float *check_grads;         /* device arm, checked step: the wire-format result, downloaded */
    /* device arm: the step's results stay on the device until its end (fp_arm_device_step) */
    void *dstate;               /* kernels.h fp_cuda_step_state in the backend's memory: loss, flags, scaler */
    void *hstate;               /* its pinned host copy, read back once per step */
    void *ev[5];                /* timing events: begin, forward + loss end, backward end, all-reduce end, end */
    float dev_scale;            /* the scaler state the device holds (set or read back): the host's scaler */
    int dev_tracker;            /* is pushed to the device only when it moved (first step, a restore) */
    int dev_scaler_set;
    void *dscal, *hscal;        /* kernels.h fp_cuda_optim_scalars of the step: device memory, its pinned host copy */
    /* device arm, cfg.cuda_graph (arm_device_graph.c): the step captured in a CUDA graph once, then replayed */
    void *graph;                /* the instantiated graph (cudaGraphExec_t); NULL: none (yet, or dropped) */
    int graph_n;                /* the batch it was captured for */
    unsigned long long graph_gen;   /* fp_backend_cuda_layout_gen at its capture */
    int graph_wc_before, graph_wc_after;   /* the weight copy's validity before and after the captured step */
    int graph_warm;             /* an eager step ran on the buffers as they are: a capture may follow */
    int graph_eager;            /* fp_arm_eager_next, a restore: the next step runs eagerly */
    const fp_batch *next_batch; /* fp_arm_set_next_batch: prefetched while this step computes (device arms) */
    int graph_off;              /* turned off for the run (graph_why; the line was printed) */
    int graph_captures;         /* captures kept (a recapture after the buffers moved) */
    int64_t graph_steps, graph_first;   /* steps the graph ran; the first of them (1-based), 0: none */
    char graph_why[200];
};

/* ---- arm.c: parts of the step that the device step runs too; what the arm's creation uses ---- */
/* 0. The result before anything ran: this iteration, the batch, the scale, the scheduled lr. */
void fp_arm_step_begin(fp_arm *a, const fp_batch *b, fp_arm_step_result *r);
/* The policy's master / optimizer-state formats applied to what the arm holds on the host (`half`). */
void fp_arm_round_state(fp_arm *a);

/* ---- arm_reduce.c: data parallel, the steps' parts both paths run ---- */
/* The model's gradient-ready hook (model.h fp_model_set_grad_ready; ctx: the arm): a layer's gradients are final. */
int fp_arm_grad_ready(void *ctx, int layer, size_t off, size_t count);
/* 3. Data parallel, before the backward: the overlapped all-reduce begins (nothing alone or at a checked step). */
int fp_arm_reduce_begin(fp_arm *a);
/* 3b. Data parallel: the gradients averaged over the ranks (the rest posted, all waited for); r's comm figures. */
int fp_arm_allreduce_grads(fp_arm *a, fp_arm_step_result *r);
/* A checked step: the 16-bit all-reduce's result g against the fp32 one of the same gradients, ref (both host
 * memory): r's rel. L2 and overflow / underflow counts, and the per-layer rel. L2 when asked. */
void fp_arm_reduce_error(fp_arm *a, const float *g, const float *ref, fp_arm_step_result *r);

#ifdef HAVE_CUDA
/* ---- arm_device*.c: the device arm ---- */
/* Moves the model onto the device backend cfg->backend (the CUDA one gets its own named arena), then sets up
 * the device step's state: the optimizer's state on the device (zero, fp_optim's before the first step), the
 * step state, its pinned host copy and the timing events. */
int fp_arm_device_init(fp_arm *a, const fp_arm_config *cfg);
void fp_arm_device_free(fp_arm *a);   /* what fp_arm_device_init and the steps allocated; not the model */
/* Before fp_optim's host state is handed out (fp_arm_optim): the device state downloaded when it moved on,
 * then marked to be uploaded before the next device step (the caller may write it: a restore). */
void fp_arm_device_optim_to_host(fp_arm *a);
/* ONE TRAINING STEP ON A DEVICE (fp_arm_step's parts, queued on the model's stream; arm_device.c). */
int fp_arm_device_step(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, const fp_batch *next);
/* The CUDA graph's state in one line for the run's events (arm.h fp_arm_cuda_graph_line). */
void fp_arm_device_graph_line(const fp_arm *a, char *buf, size_t size);
void fp_arm_device_upload_line(const fp_arm *a, char *buf, size_t size);
/* The device side of 3. and 3b. (NCCL): the overlapped all-reduce begins, a layer's gradients are final
 * (the gradient-ready hook), the rest is posted and the model's stream waits for it. */
int fp_arm_device_reduce_begin(fp_arm *a);
int fp_arm_device_grad_ready(fp_arm *a, size_t off, size_t count);
int fp_arm_device_allreduce(fp_arm *a, fp_dist_stats *st);
/* A checked step of a device arm (not overlapped): the same gradients reduced in fp32 too, then both downloaded and
 * compared on the host (fp_arm_reduce_error): two more host waits, at the sampled steps only; that step's
 * all-reduce time (events) includes the reference reduction. */
int fp_arm_device_allreduce_checked(fp_arm *a, fp_dist_stats *st, fp_arm_step_result *r);
#endif

#endif
