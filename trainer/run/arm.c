/* arm.c — ONE TRAINING STEP of an arm on the host (a device arm's: arm_device.c), part by part, and what the next
 * step is told (hooks, eagerly, the next batch). Promise: the step follows PyTorch's AMP recipe (scale, backward,
 * unscale_, skip on inf/NaN, scaler.update, scheduler per iteration) exactly. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "error.h"
#include "trainer/backend.h"
#include "trainer/layers.h"
#include "trainer/run/arm_internal.h"

void fp_arm_set_forward_hook(fp_arm *a, fp_arm_forward_hook fn, void *ctx)
{
    a->hook = fn;
    a->hook_ctx = fn ? ctx : NULL;
}

int fp_arm_set_update_hook(fp_arm *a, fp_arm_update_hook fn, void *ctx)
{
    if (fn && (a->dev || a->policy->master != FP_DT_F32))
        return fp_fail(FP_EINVAL, "arm %s: no optimizer hook on a device arm or without fp32 master weights",
                       a->policy_name);
    a->uhook = fn;
    a->uhook_ctx = fn ? ctx : NULL;
    return FP_OK;
}

void fp_arm_eager_next(fp_arm *a) { a->graph_eager = 1; }

void fp_arm_set_next_batch(fp_arm *a, const fp_batch *next) { a->next_batch = next; }

/* The policy's master / optimizer-state formats, applied to what the arm holds (`half`). */
void fp_arm_round_state(fp_arm *a)
{
    if (a->policy->master != FP_DT_F32)
        fp_round_to_dtype(fp_model_params(a->model), fp_model_num_params(a->model), a->policy->master);
    if (a->policy->optim_state != FP_DT_F32 && a->optim) {
        size_t k = fp_optim_state_count(a->optim);
        for (size_t i = 0; i < k; i++) {
            fp_optim_state st;
            if (fp_optim_state_at(a->optim, i, &st) == FP_OK)
                fp_round_to_dtype(st.data, st.n, a->policy->optim_state);
        }
    }
}

/* ---------------------------------------------------------------- the step, part by part */

/* The result before anything ran: this iteration, the batch, the scale, the scheduled lr. */
void fp_arm_step_begin(fp_arm *a, const fp_batch *b, fp_arm_step_result *r)
{
    memset(r, 0, sizeof *r);
    r->iteration = a->iteration;
    r->n = b->n;
    r->nonfinite_layer = -1;
    r->scale = r->next_scale = a->scaler.scale;
    r->lr = fp_lr_at(&a->cfg.lr, a->iteration);
}

/* Room for a host arm's dlogits (a device arm keeps them on the device). */
static int reserve_dlogits(fp_arm *a, int n)
{
    size_t need = (size_t)n * (size_t)fp_model_num_classes(a->model);
    if (a->dev || a->dlogits_cap >= need)
        return FP_OK;
    float *p = realloc(a->dlogits, need * sizeof(float));
    if (!p)
        return fp_fail(FP_ENOMEM, "out of memory");
    a->dlogits = p;
    a->dlogits_cap = need;
    return FP_OK;
}

/* 1. Forward in TRAIN mode and the fp32 softmax cross-entropy: loss, top-1 / top-5 hits and (host) dlogits;
 * *t1 is the end of the forward. (A device arm: arm_device.c.) */
static int forward_loss(fp_arm *a, const fp_batch *b, fp_arm_step_result *r, int64_t *t1)
{
    fp_model *m = a->model;
    int rc;
    const float *logits;
    if ((rc = fp_model_forward(m, &logits, b->images, b->n, FP_MODE_TRAIN)))
        return rc;
    *t1 = fp_clock_mono_ns();
    return fp_softmax_xent(&r->loss, a->dlogits, &r->correct1, &r->correct5, logits, (const int *)b->labels, b->n,
                           fp_model_num_classes(m));
}

/* After the forward: a non-finite loss without a loss scaler ends the step as diverged (1); with ranks, on
 * every rank when on one (they must leave the step together). -1 (the message set): the ranks could not agree. */
static int diverged(const fp_arm *a, fp_arm_step_result *r, int64_t t0, int64_t t1)
{
    r->loss_finite = isfinite(r->loss) != 0;
    if (a->policy->scaling != FP_SCALE_NONE)
        return 0;
    int bad = !r->loss_finite;
    if (a->cfg.dist && fp_dist_allreduce_max_int(a->cfg.dist, &bad))
        return -1;
    if (!bad)
        return 0;
    r->diverged = 1;
    r->forward_ns = t1 - t0;
    r->total_ns = fp_clock_mono_ns() - t0;
    return 1;
}

/* 3. Backward of the loss times scale (GradScaler.scale(loss).backward()): the parameters' gradients, scaled.
 * Data parallel, the all-reduce's buckets are posted during it (fp_arm_reduce_begin, fp_arm_grad_ready). (A device
 * arm: arm_device.c's step, which queues it without waiting.) */
static int backward_scaled(fp_arm *a, int n, float scale)
{
    fp_model *m = a->model;
    int rc = fp_arm_reduce_begin(a);
    if (rc)
        return rc;
    size_t k = (size_t)n * (size_t)fp_model_num_classes(m);
    if (scale != 1.0f)
        for (size_t i = 0; i < k; i++)
            a->dlogits[i] *= scale;
    return fp_model_backward(m, a->dlogits);
}

/* 4. unscale_ + the inf/NaN check (GradScaler.unscale_): every parameter gradient times inv, walked in backward
 * order (last layer first) so that the first non-finite tensor named is the first the backward produced. */
static int unscale_and_check(fp_arm *a, float inv, int *found, fp_arm_step_result *r)
{
    *found = 0;
    for (size_t i = fp_model_tensor_count(a->model); i-- > 0;) {
        const fp_tensor_info *t = fp_model_tensor(a->model, i);
        if (!t->is_param)
            continue;
        if (fp_unscale_and_check(fp_model_tensor_grad(a->model, t), t->numel, inv) && !*found) {
            *found = 1;
            r->nonfinite_layer = t->layer;
            r->nonfinite_tensor = t->name;
        }
    }
    return FP_OK;
}

/* 5. GradScaler.update: the step is skipped on a non-finite gradient and the scale moves. */
static void scaler_update(fp_arm *a, fp_arm_step_result *r, int found)
{
    if (a->policy->scaling == FP_SCALE_NONE)
        return;
    r->skipped = found;
    fp_grad_scaler_update(&a->scaler, found);
    r->next_scale = a->scaler.scale;
    r->scale_changed = r->next_scale != r->scale;
}

/* 6. optimizer.step(lr) and the policy's rounding of master weights / state (`half`). With an update hook
 * (host only) the hook steps the optimizer in parts; its own time is left out of the step's (t0..t2 move
 * past it) and the optimizer's is taken as the last one measured without it. (A device arm: arm_device.c.) */
static int update(fp_arm *a, double lr, fp_arm_update_hook uh, int64_t *t0, int64_t *t1, int64_t *t2)
{
    int rc;
    if (uh) {
        int64_t u0 = fp_clock_mono_ns();
        if ((rc = fp_optim_step_begin(a->optim, lr)) || (rc = uh(a->uhook_ctx, a, a->optim)))
            return rc;
        int64_t du = fp_clock_mono_ns() - u0 - a->optim_ns;
        *t0 += du;
        *t1 += du;
        *t2 += du;
        return FP_OK;
    }
    int64_t o0 = fp_clock_mono_ns();
    if ((rc = fp_optim_step(a->optim, lr)))
        return rc;
    fp_arm_round_state(a);
    a->optim_ns = fp_clock_mono_ns() - o0;
    return FP_OK;
}

/* 7. The iteration counted and the phase times of a finished step. */
static void step_done(fp_arm *a, fp_arm_step_result *r, int64_t t0, int64_t t1, int64_t t2)
{
    a->iteration++;
    int64_t t3 = fp_clock_mono_ns();
    r->forward_ns = t1 - t0;
    r->backward_ns = t2 - t1;
    r->optim_ns = t3 - t2;
    r->total_ns = t3 - t0;
}

/* ONE TRAINING STEP (PyTorch's AMP recipe: autocast forward, scaler.scale(loss).backward(), scaler.step(opt),
 * scaler.update()), on the host or, for an arm on a device backend, the same order on the device (arm_device.c's
 * fp_arm_device_step: queued without the host waiting, the loss / flags / scale read back once at the end; its
 * times are events'):
 *
 *   0. begin      the lr of this iteration from the schedule; the update hook, if any, is this step's only.
 *   1. forward    zero the gradients; fp_model_forward (TRAIN mode: batchnorm's batch statistics) -> logits
 *                 in fp32; softmax cross-entropy -> loss, top-1 / top-5 hits, dlogits. On a device the loss
 *                 runs fused with the forward (fp_model_forward_loss) and dlogits stay there, scaled.
 *                 Probes: the model calls its probe set (fp_model_set_probe) around every layer (timers,
 *                 NVTX ranges, CUPTI correlation) and hands over activations at a sampled step (histograms).
 *                 A non-finite loss under a policy without a scaler stops here: diverged, nothing updated.
 *   2. hook       (host) the forward hook: work that needs the weights this forward used, before they move,
 *                 e.g. each low-precision arm's rounding error riding on the fp32 arm's forward. Untimed.
 *   3. backward   dlogits x scale, fp_model_backward: the weight gradients, still scaled. Probes: the layer
 *                 hooks per backward phase; activation gradients at a sampled step (and weight gradients,
 *                 unless the caller takes them with the parameter pass, as the loop does: step 6).
 *   3b. reduce    data parallel (cfg.dist) only: every gradient averaged over the ranks (dist.h: MPI buckets
 *                 on the host, NCCL on a device), in the arm's all-reduce format. DDP's overlap: each bucket
 *                 (the last layers' first) was posted by the model's gradient-ready hook during 3. as soon as
 *                 its gradients were final; here the rest is posted and all are waited for. At a checked step
 *                 everything is reduced here, also in fp32, to measure the format's rounding. Without a scaler a non-finite loss on any rank
 *                 ends the step on every rank (1.).
 *   4. unscale    every parameter gradient x 1/scale in backward order, checking for inf / NaN (the first
 *                 non-finite tensor is named in the result); with ranks, found on any rank is found on all.
 *   5. scaler     GradScaler.update: inf / NaN -> the step is skipped and the scale halves; 2000 clean
 *                 steps -> it doubles. Without a scaler nothing is skipped (a non-finite gradient is applied,
 *                 as PyTorch does, and reported).
 *   6. update     unless skipped: optimizer.step(lr) (SGD, Adam or AdamW on the device for a device arm), or
 *                 the update hook stepping it part by part with the parameter pass riding on it (weights,
 *                 weight gradients, updates and lost updates histogrammed while in cache; untimed); then `half`
 *                 rounds the master weights and optimizer state to fp16.
 *   7. done       iteration + 1; forward / backward / optimizer / total times (CLOCK_MONOTONIC).
 *
 * The loop around it (compare.c's arm_step) opens the probe set's step before this call, as the step plan
 * says (histograms, rounding error, trace), and closes it after, once the parameters were sampled. */
int fp_arm_step(fp_arm *a, const fp_batch *b, fp_arm_step_result *r)
{
    /* 0. begin */
    fp_arm_update_hook uh = a->uhook;
    a->uhook = NULL;
    const fp_batch *next = a->next_batch;
    a->next_batch = NULL;
#ifdef HAVE_CUDA
    if (a->dev)
        return fp_arm_device_step(a, b, r, next);
#endif
    (void)next;   /* a host arm reads the batch where it lies */
    fp_arm_step_begin(a, b, r);
    int rc = reserve_dlogits(a, b->n);
    if (rc)
        return rc;
    const float scale = a->scaler.scale;
    int64_t t0 = fp_clock_mono_ns(), t1 = t0, t2;

    /* 1. forward + loss */
    fp_model_zero_grad(a->model);
    if ((rc = forward_loss(a, b, r, &t1)))
        return rc;
    int dv = diverged(a, r, t0, t1);
    if (dv)
        return dv < 0 ? FP_EIO : FP_OK;

    /* 2. the forward hook (host), its time left out */
    if (a->hook && !a->dev) {
        int64_t h0 = fp_clock_mono_ns();
        if ((rc = a->hook(a->hook_ctx, a, b)))
            return rc;
        int64_t dh = fp_clock_mono_ns() - h0;
        t0 += dh;
        t1 += dh;
    }

    /* 3. backward of the scaled loss */
    if ((rc = backward_scaled(a, b->n, scale)))
        return rc;
    t2 = fp_clock_mono_ns();

    /* 3b. data parallel: the gradients averaged over the ranks (what the backward's buckets left to wait for) */
    if ((rc = fp_arm_allreduce_grads(a, r)))
        return rc;
    int64_t t_reduce = fp_clock_mono_ns() - t2;

    /* 4. unscale_ + inf/NaN check (with ranks: found on any, skipped on all), 5. scaler update */
    int found = 0;
    if ((rc = unscale_and_check(a, 1.0f / scale, &found, r)) || (rc = fp_dist_allreduce_max_int(a->cfg.dist, &found)))
        return rc;
    scaler_update(a, r, found);

    /* 6. the optimizer (unless skipped) */
    if (!r->skipped && (rc = update(a, r->lr, uh, &t0, &t1, &t2)))
        return rc;

    /* 7. done (the all-reduce's time is its own, not the optimizer's) */
    step_done(a, r, t0, t1, t2);
    r->optim_ns -= t_reduce;
    return FP_OK;
}
