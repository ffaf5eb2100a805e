/* arm_create.c — an arm's life: its configuration's defaults, its creation (model, weights, policy, optimizer, lr
 * schedule, GradScaler, backend, the data-parallel hooks), its freeing and its accessors. Promise: a failed creation
 * leaves nothing allocated and says why in one line. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "safetensors.h"
#include "trainer/backend.h"
#include "trainer/run/arm_internal.h"

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

/* Moves the model onto cfg->backend; a device backend's arm (the CUDA one) is set up by arm_device_setup.c. */
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
    fp_arm_round_state(a);
    if (cfg->backend && cfg->backend != fp_backend_cpu() && (rc = to_backend(a, cfg)))
        goto fail;
    if (fp_dist_size(cfg->dist) > 1)   /* data parallel: buckets go while the backward runs */
        fp_model_set_grad_ready(a->model, fp_arm_grad_ready, a);
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
