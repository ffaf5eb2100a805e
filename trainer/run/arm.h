/* arm.h — one arm of an experiment: one model trained under one precision policy, with its optimizer,
 * learning-rate schedule, loss scaler and memory accounting. Promise: an arm owns no data and no store;
 * it is stepped one batch at a time, so several arms can share a loader and train in lockstep turns. */
#ifndef FP_ARM_H
#define FP_ARM_H

#include <stddef.h>
#include <stdint.h>
#include "trainer/data/data.h"
#include "trainer/dist/dist.h"
#include "trainer/lr_schedule.h"
#include "trainer/model.h"
#include "trainer/optim.h"
#include "trainer/precision.h"

typedef struct {
    const char *model;          /* fp_model_names() */
    int num_classes;            /* >= 1 */
    int image_size;             /* >= 32 */
    int base_width;             /* 0: torchvision's 64 */
    uint64_t seed;              /* parameter init */
    const char *policy;         /* fp_policy_names() */
    fp_optim_config optim;
    fp_lr_schedule lr;
    int threads;                /* kernel workspace threads hint (>= 1; 0 means 1) */
    const char *weights;        /* NULL, or a safetensors file with torchvision names loaded after init */
    /* Loss-scaler overrides (0 keeps PyTorch's default): initial scale, growth interval. */
    float init_scale;
    int growth_interval;
    /* The backend the model runs on (trainer/backend.h): NULL is the CPU backend. A device backend (the
     * CUDA one, trainer/backend_cuda.h) gets the model after init / weights / policy; on it the optimizer
     * (SGD, Adam, AdamW, with its state) and the unscale + non-finite check run on the device
     * (trainer/cuda/kernels.h; trainer/run/arm_device.c). arena_bytes: the CUDA arm's arena
     * (0: fp_backend_cuda_default_arena()). */
    const struct fp_backend_ops *backend;
    size_t arena_bytes;
    /* Data parallel (trainer/dist/dist.h): NULL trains alone. With ranks, every step's gradients are averaged
     * over them before the unscale / check (which is reduced too: every rank skips the same steps), carried
     * in allreduce ("fp32", "fp16", "bf16"; NULL: the gradients' own format, the master weights', as DDP does)
     * in buckets of bucket_bytes (0: FP_DIST_BUCKET_BYTES, DDP's 25 MB; the first 1 MiB at most), each posted
     * during the backward as soon as its gradients are final (the model's gradient-ready hook is the arm's). */
    fp_dist *dist;
    const char *allreduce;
    size_t bucket_bytes;
    /* --sync-bn (PyTorch's SyncBatchNorm): with ranks, every TRAIN batchnorm normalises with the global batch's
     * statistics and its dx uses the global sums (model.h fp_model_set_bn_reduce; the sums all-reduced in fp32
     * by fp_arm_bn_reduce); 0: per-rank statistics, DDP's default. No effect alone (one rank). */
    int sync_bn;
    /* A device arm (the CUDA one) captures its step in a CUDA graph once the buffers are fixed and replays it
     * (issue 22, point 1; arm_device.c says which steps still run eagerly); no effect on a host arm. */
    int cuda_graph;
} fp_arm_config;

/* The model's batchnorm reduce hook of an arm with sync_bn and ranks (arm_sync_bn.c): buf summed over the ranks
 * in place (dist.h: MPI on a host arm, NCCL on the model's stream on a device arm). */
int fp_arm_bn_reduce(void *ctx, float *buf, size_t count);

/* {"resnet18", 10 classes, 32 px, width 64, seed 0, "fp32", SGD lr 0.1 momentum 0.9 weight decay 5e-4,
 * constant lr, 1 thread, no weights, scaler defaults} */
void fp_arm_config_default(fp_arm_config *cfg);

typedef struct fp_arm fp_arm;

/* Builds the model (init from seed, then weights when given), applies the policy (for `half`: rounds
 * the parameters to fp16), creates the optimizer over every parameter tensor (weight decay on all, as
 * torch.optim does by default) and the scaler. FP_EINVAL listing the valid choices for an unknown
 * model or policy; the model's / safetensors' errors (one line naming file and tensor) otherwise. */
int fp_arm_create(fp_arm **out, const fp_arm_config *cfg);
void fp_arm_free(fp_arm *a);    /* NULL is fine */

fp_model *fp_arm_model(fp_arm *a);
/* The optimizer; on a device arm its state (SGD's momentum buffers, Adam's moments) is downloaded first and
 * marked as possibly written (a checkpoint restore), to be uploaded before the next device step. */
fp_optim *fp_arm_optim(fp_arm *a);
/* 1 when the arm's model runs on a device backend (host_memory 0). */
int fp_arm_on_device(const fp_arm *a);
const fp_policy *fp_arm_policy(const fp_arm *a);
fp_grad_scaler *fp_arm_scaler(fp_arm *a);
const fp_arm_config *fp_arm_get_config(const fp_arm *a);   /* strings point at the arm's copies */

/* Iterations done (stepped or skipped): the lr schedule's t for the next step. Settable for resume. */
int64_t fp_arm_iteration(const fp_arm *a);
void fp_arm_set_iteration(fp_arm *a, int64_t t);

/* ---- training ---- */
typedef struct {
    int64_t iteration;          /* 0-based index of this step (lr schedule's t) */
    int n;                      /* images */
    float loss;                 /* fp32 mean cross-entropy of the batch (unscaled) */
    int correct1, correct5;     /* top-1 / top-5 hits in the batch */
    int loss_finite;            /* 0: NaN/inf loss */
    int skipped;                /* 1: the optimizer step was skipped (inf/NaN gradient under a scaler) */
    int diverged;               /* 1: non-finite loss under a policy without a scaler: nothing was
                                 * updated and the run cannot go on (the caller stops it) */
    int nonfinite_layer;        /* first layer (in backward order) whose gradient held inf/NaN; -1: none */
    const char *nonfinite_tensor; /* its tensor's name (NULL: none) */
    float scale;                /* loss scale used by this step (1 without a scaler) */
    float next_scale;           /* after the scaler update */
    int scale_changed;          /* 1 when next_scale != scale */
    double lr;                  /* learning rate of this step */
    /* data parallel (cfg.dist): the gradient all-reduce of this step (dist.h's figures; zero alone) */
    int64_t comm_ns, comm_exposed_ns, comm_bytes;
    int comm_buckets;
    int comm_buckets_early;     /* of those, posted during the backward (overlapped; 0 at a checked step) */
    /* at a step asked for by fp_arm_check_reduce_next with a 16-bit all-reduce: the reduced gradients against
     * the same gradients reduced in fp32, rel. L2 over all (NaN when not measured), and how many summed values
     * overflowed to Inf / flushed to zero in the format where the fp32 sum was finite / non-zero */
    double reduce_rel_l2;
    int64_t reduce_overflow, reduce_underflow;
    /* Phase times. Host arm: CLOCK_MONOTONIC around each phase. Device arm: the device's, from events on the
     * model's stream (no wait inside the step): forward = forward + loss, backward, optimizer = unscale + check,
     * scaler update and update, the all-reduce's exposed part (comm_ns) apart;
     * total_ns is the host's in both, to the step's end (on a device, after its one wait). */
    int64_t forward_ns, backward_ns, optim_ns, total_ns;
} fp_arm_step_result;

/* One training step on a batch: zero grads, forward (train), fp32 loss, dlogits x scale, backward,
 * unscale + inf/NaN check over the gradients in backward order, scaler update, optimizer step with the
 * scheduled lr (unless skipped), and for policies with fp16 master weights / state the rounding of
 * both to fp16. Without a scaler a non-finite loss does not step (the caller stops the run; PyTorch
 * would have written NaN into the weights); a non-finite gradient with a finite loss steps, as PyTorch
 * does, and is reported in nonfinite_layer. Returns FP_OK or a model / optimizer error. */
int fp_arm_step(fp_arm *a, const fp_batch *b, fp_arm_step_result *r);

/* The next step (one step) also reduces its gradients in fp32 to measure the 16-bit all-reduce's rounding
 * (reduce_rel_l2 in the result, per layer in per_layer[fp_model_layer_count] when not NULL; every rank must ask
 * for the same steps: it is one more collective). Nothing without ranks or with an fp32 all-reduce. */
void fp_arm_check_reduce_next(fp_arm *a, double *per_layer);
/* The all-reduce format of the arm (fp32, fp16 or bf16). */
fp_dtype fp_arm_allreduce_dtype(const fp_arm *a);

/* Work that needs the step's own forward (trainer/analysis/analysis.h's riding precision error): on a host arm,
 * fn runs after the forward of every step (unless the loss diverged), before the backward and the
 * optimizer, so the model still holds the weights that forward used; its time is left out of the
 * step's times. A non-zero return fails the step with that code. fn NULL removes it; a device arm
 * never calls it. */
typedef int (*fp_arm_forward_hook)(void *ctx, fp_arm *a, const fp_batch *b);
void fp_arm_set_forward_hook(fp_arm *a, fp_arm_forward_hook fn, void *ctx);

/* Work riding on the optimizer step (trainer/analysis/analysis.h's parameter pass, done on each part of the
 * parameters while it is in cache): the next step that updates runs fn between fp_optim_step_begin
 * and the end of the step instead of fp_optim_step; fn must update every element through
 * fp_optim_step_part or fp_optim_step_part_delta, and its non-zero return fails the step. One step
 * only: cleared by the next fp_arm_step whatever happens to it (skipped, diverged or failed: then fn
 * does not run). The step's optimizer time is then that of the last step without it (fn's own time
 * is left out). FP_EINVAL (nothing set) on a device arm or under a policy whose master weights are
 * not fp32 (`half` rounds them after the optimizer); the caller then does its work after the step. */
typedef int (*fp_arm_update_hook)(void *ctx, fp_arm *a, fp_optim *opt);
int fp_arm_set_update_hook(fp_arm *a, fp_arm_update_hook fn, void *ctx);

/* The next step runs eagerly, not as the CUDA graph's replay (cfg.cuda_graph): it samples probes, evaluates or
 * checkpoints (the loop's step plan says so). Nothing on a host arm or without the graph. */
void fp_arm_eager_next(fp_arm *a);
/* The batch the arm's next step will train on, when the caller knows it (the turn's next batch): a device arm starts
 * copying its images to the device at the end of queueing the coming step, while that step computes (backend_cuda.h
 * fp_backend_cuda_prefetch: only from a page-locked range, and only for eager steps, not the CUDA graph's); the
 * caller keeps next->images unwritten until that next step has returned. One step only: cleared by fp_arm_step.
 * NULL, a host arm: nothing. */
void fp_arm_set_next_batch(fp_arm *a, const fp_batch *next);
/* A device arm's line about its uploads by path (backend_cuda.h's counters: prefetched, direct, staged, plain, the
 * graph's slots; counts and MB): 1 with it in buf; 0 (buf "") for a host arm. */
int fp_arm_upload_line(const fp_arm *a, char *buf, size_t size);
/* The run's line about the CUDA graph, "cuda graph: on, captured at step S, replayed at N of M steps" or
 * "cuda graph: off (REASON)": 1 with it in buf; 0 (buf "") when the arm was not asked for one or is a host arm. */
int fp_arm_cuda_graph_line(const fp_arm *a, char *buf, size_t size);
/* With fusion on for the arm's model (model.h fp_model_set_fusion; the default on a device backend): one line
 * saying how many batchnorm -> (add ->) relu chains the backend fused, and 1; else 0 and "". */
int fp_arm_fusion_line(const fp_arm *a, char *buf, size_t size);

/* ---- evaluation ---- */
typedef struct {
    double loss_sum;            /* sum over images of the per-image loss */
    int64_t correct1, correct5, n;
    int64_t batches;
} fp_arm_eval_acc;

void fp_arm_eval_reset(fp_arm_eval_acc *acc);
/* Eval-mode forward (running statistics) of one batch, accumulated. */
int fp_arm_eval_batch(fp_arm *a, const fp_batch *b, fp_arm_eval_acc *acc);
/* Mean loss, top-1 and top-5 in [0, 1] (NaN when acc->n == 0). */
void fp_arm_eval_result(const fp_arm_eval_acc *acc, double *loss, double *top1, double *top5);

/* Whole evaluation: runs a loader over split (FP_SPLIT_VAL usually) of ds with the given batch and
 * loader threads, at most max_batches batches (0: all), and returns loss / top-1 / top-5 (fractions).
 * FP_EINVAL when the split is absent; the loader's error otherwise. */
int fp_arm_evaluate(fp_arm *a, const fp_dataset *ds, int split, int batch, int loader_threads,
                    int64_t max_batches, fp_arm_eval_acc *acc);

/* ---- memory (bytes), the arm's own allocation accounting ---- */
typedef struct {
    fp_model_mem model;
    size_t optim_state;         /* optimizer state at the policy's storage width */
    size_t current, peak;       /* model (params + grads + buffers + activation arenas + activation
                                 * gradients + workspace) + optimizer state; peak sums each part's peak */
} fp_arm_mem;
void fp_arm_memory(const fp_arm *a, fp_arm_mem *out);

#endif
