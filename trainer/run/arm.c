/* arm.c — one model under one precision policy: optimizer, lr schedule, GradScaler and memory
 * accounting around fp_model's forward / backward, and the host step (a device arm's: arm_device.c).
 * Promise: the step follows PyTorch's AMP recipe (scale, backward, unscale_, skip on inf/NaN,
 * scaler.update, scheduler per iteration) exactly. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "error.h"
#include "safetensors.h"
#include "trainer/backend.h"
#include "trainer/layers.h"
#include "trainer/run/arm_internal.h"

static int grad_ready(void *ctx, int layer, size_t off, size_t count);

void fp_arm_check_reduce_next(fp_arm *a, double *per_layer)
{
    a->check_reduce = a->cfg.dist && a->wire != FP_DT_F32;
    a->check_layers = a->check_reduce ? per_layer : NULL;
}

fp_dtype fp_arm_allreduce_dtype(const fp_arm *a) { return a->wire; }

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

void fp_arm_config_default(fp_arm_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->model = "resnet18";
    cfg->num_classes = 10;
    cfg->image_size = 32;
    cfg->policy = "fp32";
    fp_optim_config_default(&cfg->optim, FP_OPTIM_SGD);
    cfg->optim.momentum = 0.9;
    cfg->optim.weight_decay = 5e-4;
    fp_lr_schedule_default(&cfg->lr, FP_LR_CONSTANT, 0.1);
    cfg->threads = 1;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* The policy's master / optimizer-state formats, applied to what the arm holds (`half`). */
static void round_state(fp_arm *a)
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

/* Moves the model onto cfg->backend; a device backend's arm (the CUDA one) is set up by arm_device.c. */
static int to_backend(fp_arm *a, const fp_arm_config *cfg)
{
    if (cfg->backend->host_memory)
        return fp_model_set_backend(a->model, cfg->backend, NULL);
#ifdef HAVE_CUDA
    return fp_arm_device_init(a, cfg);
#else
    return fp_fail(FP_EUNAVAIL, "arm: backend %s needs the CUDA build", cfg->backend->name);
#endif
}

int fp_arm_on_device(const fp_arm *a) { return a->dev; }

int fp_arm_create(fp_arm **out, const fp_arm_config *cfg)
{
    *out = NULL;
    const fp_policy *pol = fp_policy_find(cfg->policy ? cfg->policy : "");
    if (!pol)
        return fp_fail(FP_EINVAL, "unknown precision policy '%s'; valid policies: %s", cfg->policy ? cfg->policy : "",
                       fp_policy_names_joined());
    int rc = fp_optim_config_check(&cfg->optim);
    if (rc)
        return rc;
    if ((rc = fp_lr_schedule_check(&cfg->lr)))
        return rc;
    fp_arm *a = calloc(1, sizeof *a);
    if (!a)
        return fp_fail(FP_ENOMEM, "out of memory");
    a->cfg = *cfg;
    a->model_name = dup_or_null(cfg->model);
    a->policy_name = strdup(pol->name);
    a->weights = dup_or_null(cfg->weights);
    a->cfg.model = a->model_name;
    a->cfg.policy = a->policy_name;
    a->cfg.weights = a->weights;
    a->policy = pol;
    a->allreduce = dup_or_null(cfg->allreduce);
    a->cfg.allreduce = a->allreduce;
    a->wire = pol->master;   /* the gradients' own format, as DDP reduces them */
    if (cfg->allreduce && (rc = fp_dist_parse_wire(cfg->allreduce, &a->wire))) {
        fp_arm_free(a);
        return rc;
    }
    if ((cfg->model && !a->model_name) || !a->policy_name || (cfg->weights && !a->weights) ||
        (cfg->allreduce && !a->allreduce)) {
        fp_arm_free(a);
        return fp_fail(FP_ENOMEM, "out of memory");
    }
    fp_model_config mc = {cfg->model, cfg->num_classes, cfg->image_size, cfg->base_width, cfg->seed, 0};
    if ((rc = fp_model_create(&a->model, &mc)))
        goto fail;
    fp_model_set_threads(a->model, cfg->threads);
    if (cfg->weights) {
        /* Strict for weight files (an unknown tensor is an error); an fp16probe checkpoint also
         * carries optimizer tensors, which are ignored here. */
        fp_st *st = NULL;
        if ((rc = fp_st_open(&st, cfg->weights)))
            goto fail;
        const char *fmt = fp_st_metadata(st, "format");
        rc = fp_model_load_st(a->model, st, fmt && strcmp(fmt, "fp16probe-checkpoint") == 0);
        fp_st_close(st);
        if (rc)
            goto fail;
    }
    if ((rc = fp_model_set_policy(a->model, pol)))
        goto fail;

    size_t nt = fp_model_tensor_count(a->model), np = 0;
    fp_optim_param *ps = calloc(nt ? nt : 1, sizeof *ps);
    if (!ps) {
        rc = fp_fail(FP_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < nt; i++) {
        const fp_tensor_info *t = fp_model_tensor(a->model, i);
        if (!t->is_param)
            continue;
        ps[np].name = t->name;
        ps[np].param = fp_model_tensor_data(a->model, t);
        ps[np].grad = fp_model_tensor_grad(a->model, t);
        ps[np].n = t->numel;
        ps[np].apply_weight_decay = 1;
        np++;
    }
    rc = fp_optim_new(&a->optim, &cfg->optim, ps, np);
    free(ps);
    if (rc)
        goto fail;

    fp_grad_scaler_init(&a->scaler, pol->scaling);
    if (pol->scaling == FP_SCALE_NONE)
        a->scaler.scale = 1.0f;
    else {
        if (cfg->init_scale > 0)
            a->scaler.scale = cfg->init_scale;
        if (cfg->growth_interval > 0)
            a->scaler.growth_interval = cfg->growth_interval;
    }
    round_state(a);
    if (cfg->backend && cfg->backend != fp_backend_cpu() && (rc = to_backend(a, cfg)))
        goto fail;
    if (fp_dist_size(cfg->dist) > 1)   /* data parallel: buckets go while the backward runs */
        fp_model_set_grad_ready(a->model, grad_ready, a);
    if (fp_dist_size(cfg->dist) > 1 && cfg->sync_bn)   /* --sync-bn: the global batch's statistics */
        fp_model_set_bn_reduce(a->model, fp_arm_bn_reduce, a);
    *out = a;
    return FP_OK;
fail:
    fp_arm_free(a);
    return rc;
}

void fp_arm_free(fp_arm *a)
{
    if (!a)
        return;
#ifdef HAVE_CUDA
    if (a->dev)
        fp_arm_device_free(a);
#endif
    fp_optim_free(a->optim);
    fp_model_free(a->model);
    free(a->dlogits);
    free(a->model_name);
    free(a->policy_name);
    free(a->weights);
    free(a->allreduce);
    free(a->ref_grads);
    free(a);
}

fp_model *fp_arm_model(fp_arm *a) { return a->model; }
fp_optim *fp_arm_optim(fp_arm *a)
{
#ifdef HAVE_CUDA
    if (a->dev)
        fp_arm_device_optim_to_host(a);
#endif
    return a->optim;
}
const fp_policy *fp_arm_policy(const fp_arm *a) { return a->policy; }
fp_grad_scaler *fp_arm_scaler(fp_arm *a) { return &a->scaler; }
const fp_arm_config *fp_arm_get_config(const fp_arm *a) { return &a->cfg; }
int64_t fp_arm_iteration(const fp_arm *a) { return a->iteration; }
void fp_arm_set_iteration(fp_arm *a, int64_t t)
{
    a->iteration = t < 0 ? 0 : t;
    a->graph_eager = 1;   /* a restore: the step after it runs eagerly */
}

void fp_arm_eager_next(fp_arm *a) { a->graph_eager = 1; }
void fp_arm_set_next_batch(fp_arm *a, const fp_batch *next) { a->next_batch = next; }

int fp_arm_upload_line(const fp_arm *a, char *buf, size_t size)
{
    if (size)
        buf[0] = 0;
    if (!a->dev)
        return 0;
#ifdef HAVE_CUDA
    fp_arm_device_upload_line(a, buf, size);
#endif
    return 1;
}

int fp_arm_cuda_graph_line(const fp_arm *a, char *buf, size_t size)
{
    if (size)
        buf[0] = 0;
    if (!a->cfg.cuda_graph || !a->dev)
        return 0;
#ifdef HAVE_CUDA
    fp_arm_device_graph_line(a, buf, size);
#endif
    return 1;
}

int fp_arm_fusion_line(const fp_arm *a, char *buf, size_t size)
{
    int on = 0, chains = fp_model_fusion(a->model, NULL, &on);
    if (size)
        buf[0] = 0;
    if (!on)
        return 0;
    if (chains)
        snprintf(buf, size, "fusion: %d batchnorm -> (add ->) relu chain%s fused in the unsampled training steps "
                 "(sampled steps ran every layer)", chains, chains == 1 ? "" : "s");
    else
        snprintf(buf, size, "fusion: on, but the backend fuses none of this model's batchnorm -> (add ->) relu chains "
                 "under this policy: every layer ran unfused");
    return 1;
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


/* Data parallel, before the backward: the overlapped all-reduce begins (dist.h's buckets over the gradients)
 * unless this step is checked (fp_arm_check_reduce_next: it reduces them after the backward, twice). */
int fp_arm_reduce_begin(fp_arm *a)
{
    a->overlap = 0;
    if (fp_dist_size(a->cfg.dist) < 2 || a->check_reduce)
        return FP_OK;
    int rc;
#ifdef HAVE_CUDA
    if (a->dev)
        rc = fp_arm_device_reduce_begin(a);
    else
#endif
        rc = fp_dist_reduce_begin(a->cfg.dist, fp_model_grads(a->model), fp_model_num_params(a->model), a->wire,
                                  a->cfg.bucket_bytes);
    a->overlap = rc == FP_OK;
    return rc;
}

/* The model's gradient-ready hook (model.h): a layer's gradients are final, in its bucket; a bucket now full
 * is posted (the CPU's MPI_Iallreduce is also moved on here: Open MPI progresses only inside MPI calls). */
static int grad_ready(void *ctx, int layer, size_t off, size_t count)
{
    fp_arm *a = ctx;
    (void)layer;
    if (!a->overlap)
        return FP_OK;
#ifdef HAVE_CUDA
    if (a->dev)
        return fp_arm_device_grad_ready(a, off, count);
#endif
    return fp_dist_reduce_ready(a->cfg.dist, off, count);
}

/* 3. Backward of the loss times scale (GradScaler.scale(loss).backward()): the parameters' gradients, scaled.
 * Data parallel, the all-reduce's buckets are posted during it (fp_arm_reduce_begin, grad_ready). (A device
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


/* The 16-bit all-reduce against the fp32 one of the same gradients (g: the 16-bit result, ref: fp32): rel. L2
 * over all and per layer, and the summed values that overflowed or flushed to zero in the format. */
void fp_arm_reduce_error(fp_arm *a, const float *g, const float *ref, fp_arm_step_result *r)
{
    double num = 0, den = 0;
    int nl = fp_model_layer_count(a->model);
    for (int l = 0; l < nl; l++) {
        size_t off = 0, cnt = 0;
        if (fp_model_layer_params(a->model, l, &off, &cnt) != FP_OK || cnt == 0) {
            if (a->check_layers)
                a->check_layers[l] = NAN;
            continue;
        }
        double ln = 0, ld = 0;
        for (size_t i = off; i < off + cnt; i++) {
            double e = (double)g[i] - (double)ref[i];
            if (isfinite(ref[i]) && !isfinite(g[i]))
                r->reduce_overflow++;
            else if (ref[i] != 0 && g[i] == 0)
                r->reduce_underflow++;
            if (isfinite(e)) {
                ln += e * e;
                ld += (double)ref[i] * ref[i];
            }
        }
        if (a->check_layers)
            a->check_layers[l] = ld > 0 ? sqrt(ln / ld) : ln > 0 ? INFINITY : 0;
        num += ln;
        den += ld;
    }
    r->reduce_rel_l2 = den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0;
}

/* 3b. Data parallel: every parameter gradient (still scaled) averaged over the ranks in the arm's all-reduce
 * format, bucketed: the buckets the backward did not post yet are posted, then all are waited for; at a checked
 * step (not overlapped) all are reduced here, and the same gradients also in fp32 to measure the format's
 * rounding. Nothing without ranks. */
int fp_arm_allreduce_grads(fp_arm *a, fp_arm_step_result *r)
{
    int check = a->check_reduce;
    a->check_reduce = 0;
    r->reduce_rel_l2 = NAN;
    if (!a->cfg.dist)
        return FP_OK;
    fp_dist_stats st = {0};
    int rc;
#ifdef HAVE_CUDA
    if (a->dev) {
        rc = check ? fp_arm_device_allreduce_checked(a, &st, r) : fp_arm_device_allreduce(a, &st);
        goto done;
    }
#endif
    if (a->overlap) {
        a->overlap = 0;
        rc = fp_dist_reduce_end(a->cfg.dist, &st);
        goto done;
    }
    float *g = fp_model_grads(a->model);
    size_t n = fp_model_num_params(a->model);
    if (check) {
        float *p = realloc(a->ref_grads, (n ? n : 1) * sizeof *p);
        if (!p)
            return fp_fail(FP_ENOMEM, "out of memory");
        a->ref_grads = p;
        memcpy(p, g, n * sizeof *p);
        if ((rc = fp_dist_allreduce_mean(a->cfg.dist, p, n, FP_DT_F32, a->cfg.bucket_bytes, NULL)))
            return rc;
    }
    rc = fp_dist_allreduce_mean(a->cfg.dist, g, n, a->wire, a->cfg.bucket_bytes, &st);
    if (!rc && check)
        fp_arm_reduce_error(a, g, a->ref_grads, r);
done:
    r->comm_ns = st.reduce_ns;
    r->comm_exposed_ns = st.exposed_ns;
    r->comm_bytes = st.bytes;
    r->comm_buckets = st.buckets;
    r->comm_buckets_early = st.early;
    return rc;
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
    round_state(a);
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


void fp_arm_eval_reset(fp_arm_eval_acc *acc) { memset(acc, 0, sizeof *acc); }

int fp_arm_eval_batch(fp_arm *a, const fp_batch *b, fp_arm_eval_acc *acc)
{
    const float *logits;
    int rc = fp_model_forward(a->model, &logits, b->images, b->n, FP_MODE_EVAL);
    if (rc)
        return rc;
    float loss = 0;
    int c1 = 0, c5 = 0;
    rc = fp_softmax_xent(&loss, NULL, &c1, &c5, logits, (const int *)b->labels, b->n, fp_model_num_classes(a->model));
    if (rc)
        return rc;
    acc->loss_sum += (double)loss * b->n;
    acc->correct1 += c1;
    acc->correct5 += c5;
    acc->n += b->n;
    acc->batches++;
    return FP_OK;
}

void fp_arm_eval_result(const fp_arm_eval_acc *acc, double *loss, double *top1, double *top5)
{
    double n = (double)acc->n;
    if (loss)
        *loss = acc->n ? acc->loss_sum / n : NAN;
    if (top1)
        *top1 = acc->n ? (double)acc->correct1 / n : NAN;
    if (top5)
        *top5 = acc->n ? (double)acc->correct5 / n : NAN;
}

int fp_arm_evaluate(fp_arm *a, const fp_dataset *ds, int split, int batch, int loader_threads, int64_t max_batches,
                    fp_arm_eval_acc *acc)
{
    fp_arm_eval_reset(acc);
    if (fp_dataset_size(ds, split) <= 0)
        return fp_fail(FP_EINVAL, "dataset %s has no %s split", fp_dataset_spec(ds),
                       split == FP_SPLIT_VAL ? "validation" : "training");
    fp_loader_opts lo;
    fp_loader_opts_default(&lo);
    lo.split = split;
    lo.batch = batch;
    lo.threads = loader_threads;
    lo.drop_last = 0;
    lo.epochs = 1;
    fp_loader *ld;
    int rc = fp_loader_start(&ld, ds, &lo);
    if (rc)
        return rc;
    fp_batch b;
    while ((max_batches <= 0 || acc->batches < max_batches) && (rc = fp_loader_next(ld, &b)) == FP_OK)
        if ((rc = fp_arm_eval_batch(a, &b, acc)))
            break;
    fp_loader_stop(ld);
    return rc < 0 ? rc : FP_OK;
}

void fp_arm_memory(const fp_arm *a, fp_arm_mem *o)
{
    memset(o, 0, sizeof *o);
    fp_model_memory(a->model, &o->model);
    size_t k = fp_optim_state_count(a->optim), width = (size_t)fp_dtype_bytes(a->policy->optim_state);
    for (size_t i = 0; i < k; i++) {
        fp_optim_state st;
        if (fp_optim_state_at(a->optim, i, &st) == FP_OK)
            o->optim_state += st.n * width;
    }
    const fp_model_mem *m = &o->model;
    size_t fixed = m->params + m->grads + m->buffers + o->optim_state;
    o->current = fixed + m->activations + m->act_grads + m->workspace;
    o->peak = fixed + m->activations_peak + m->act_grads_peak + m->workspace_peak;
}