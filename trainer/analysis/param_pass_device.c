/* param_pass_device.c — analysis.h fp_param_dev: the parameter pass of a sampled step where the parameters lie
 * (a model on a device backend): the parameters before the step copied backend to backend into a buffer the pass
 * owns (allocated once); after it, per layer, the update new - old and its lost / moved counts by the backend's
 * update_delta op and the update, weight and weight-gradient histograms by its hist op (fp_model_probe_backend).
 * Promises: per layer, the same lost-update fractions and the same histogram counts as fp_probe_sample_params on
 * the same values (sum_abs up to summation order); only counts cross to the host on a device with a hist op;
 * nothing reads or marks a host mirror; the probe's loss scale is restored on return. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/analysis/analysis.h"
#include "trainer/backend.h"

struct fp_param_dev {
    const fp_backend_ops *ops;
    fp_backend *be;
    float *old;          /* the parameters before the step: nparams floats of backend memory */
    float *d;            /* one layer's update: dmax floats of backend memory */
    size_t nparams, dmax;
    int have_old;        /* fp_param_dev_before ran since the last pass */
};

int fp_param_dev_create(fp_param_dev **out, fp_model *m)
{
    if (!out || !m)
        return fp_fail(FP_EINVAL, "parameter pass: create with a NULL %s", out ? "model" : "out");
    *out = NULL;
    const fp_backend_ops *ops = fp_model_backend_ops(m);
    if (!ops->update_delta)
        return fp_fail(FP_EUNAVAIL, "parameter pass: backend %s has no update_delta op", ops->name);
    fp_param_dev *pd = calloc(1, sizeof *pd);
    if (!pd)
        return fp_fail(FP_ENOMEM, "parameter pass: out of memory");
    pd->ops = ops;
    pd->be = fp_model_backend(m);
    pd->nparams = fp_model_num_params(m);
    for (int l = 0; l < fp_model_layer_count(m); l++) {
        size_t cnt;
        fp_model_layer_params(m, l, NULL, &cnt);
        pd->dmax = cnt > pd->dmax ? cnt : pd->dmax;
    }
    if (ops->set_label)
        ops->set_label(pd->be, "parameter pass");
    void *o = NULL, *d = NULL;
    int rc = ops->alloc(pd->be, &o, (pd->nparams ? pd->nparams : 1) * sizeof(float));
    pd->old = o;
    if (!rc)
        rc = ops->alloc(pd->be, &d, (pd->dmax ? pd->dmax : 1) * sizeof(float));
    pd->d = d;
    if (ops->set_label)
        ops->set_label(pd->be, NULL);
    if (rc) {
        fp_param_dev_free(pd);
        return rc;
    }
    *out = pd;
    return FP_OK;
}

void fp_param_dev_free(fp_param_dev *pd)
{
    if (!pd)
        return;
    pd->ops->free(pd->be, pd->old, (pd->nparams ? pd->nparams : 1) * sizeof(float));
    pd->ops->free(pd->be, pd->d, (pd->dmax ? pd->dmax : 1) * sizeof(float));
    free(pd);
}

size_t fp_param_dev_bytes(const fp_param_dev *pd)
{
    return pd ? ((pd->nparams ? pd->nparams : 1) + (pd->dmax ? pd->dmax : 1)) * sizeof(float) : 0;
}

static int same_model(const fp_param_dev *pd, const fp_model *m, const char *what)
{
    if (!pd || !m)
        return fp_fail(FP_EINVAL, "parameter pass: %s with a NULL %s", what, pd ? "model" : "pass");
    if (fp_model_backend(m) != pd->be || fp_model_num_params(m) != pd->nparams)
        return fp_fail(FP_EINVAL, "parameter pass: %s with a model it was not made for", what);
    return FP_OK;
}

/* The model's backend views could not be had (an upload of what the host wrote failed): its message kept. */
static int view_failed(const char *what)
{
    char msg[400];
    snprintf(msg, sizeof msg, "%s", fp_error_message());
    return fp_fail(FP_EINTERNAL, "parameter pass: %s: %s", what, msg);
}

int fp_param_dev_before(fp_param_dev *pd, fp_model *m)
{
    int rc = same_model(pd, m, "before");
    if (rc)
        return rc;
    const float *w = fp_model_backend_params_view(m);
    if (!w)
        return view_failed("the parameters before the step");
    pd->have_old = 0;
    if (pd->nparams && (rc = pd->ops->copy(pd->be, pd->old, w, pd->nparams * sizeof(float))))
        return rc;
    pd->have_old = 1;
    return FP_OK;
}

static fp_tensor flat(const float *p, size_t n)
{
    return fp_tensor_of((void *)p, FP_DT_F32, (fp_dims){1, 1, 1, (int)n});
}

int fp_param_dev_after(fp_param_dev *pd, fp_probe *p, fp_model *m, double *all, double *per_layer)
{
    int rc = same_model(pd, m, "after");
    if (rc)
        return rc;
    if (!pd->have_old)
        return fp_fail(FP_EINVAL, "parameter pass: after without before");
    pd->have_old = 0;
    const float *nw = fp_model_backend_params_view(m), *g = nw ? fp_model_backend_grads_view(m) : NULL;
    if (!nw || !g)
        return view_failed(nw ? "the gradients" : "the parameters after the step");
    const unsigned roles = fp_probe_params_roles(p);
    const float scale = fp_probe_loss_scale(p);
    if (roles)
        fp_probe_set_loss_scale(p, 1.0f);   /* the gradients are unscaled already */
    size_t lost = 0, moved = 0;
    int nl = fp_model_layer_count(m);
    for (int l = 0; l < nl && !rc; l++) {
        size_t off, cnt, lo = 0, mv = 0;
        fp_model_layer_params(m, l, &off, &cnt);
        if (cnt > (size_t)0x7FFFFFFF)
            rc = fp_fail(FP_EINVAL, "parameter pass: layer %d has %zu parameters (at most 2^31 - 1)", l, cnt);
        if (!rc && cnt && (roles & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT)))   /* as the forward used them */
            rc = fp_model_probe_backend(m, p, l, FP_ROLE_WEIGHT, pd->old + off, cnt);
        if (!rc && cnt && (roles & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD)))
            rc = fp_model_probe_backend(m, p, l, FP_ROLE_WEIGHT_GRAD, g + off, cnt);
        if (!rc && cnt)
            rc = pd->ops->update_delta(pd->be, flat(pd->d, cnt), flat(nw + off, cnt), flat(pd->old + off, cnt),
                                       flat(g + off, cnt), &lo, &mv);
        if (!rc && cnt && (roles & FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE)))
            rc = fp_model_probe_backend(m, p, l, FP_ROLE_UPDATE, pd->d, cnt);
        lost += lo;
        moved += mv;
        if (per_layer)
            per_layer[l] = mv ? (double)lo / (double)mv : NAN;
    }
    if (roles)
        fp_probe_set_loss_scale(p, scale);
    if (all)
        *all = !rc && moved ? (double)lost / (double)moved : NAN;
    return rc;
}
