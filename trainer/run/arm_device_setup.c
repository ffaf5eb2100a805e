/* arm_device_setup.c — a device arm's buffers (CUDA builds): the model moved onto the device backend (a CUDA arm in
 * its own named arena), the optimizer's state, the step state, the per-step scalars and the timing events there,
 * and all of it freed. Promise: the state starts as fp_optim's before its first step (zero). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/backend.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/run/arm_device_internal.h"

/* The device step's state and the optimizer's per-step scalars (in the backend's memory), their pinned host copies
 * and the timing events. */
static int device_step_state(fp_arm *a)
{
    const fp_backend_ops *ops = fp_model_backend_ops(a->model);
    fp_backend *be = fp_model_backend(a->model);
    if (ops->set_label)
        ops->set_label(be, "step state");
    int rc = ops->alloc(be, &a->dstate, sizeof(fp_cuda_step_state));
    if (ops->set_label)
        ops->set_label(be, NULL);
    rc = rc ? rc : fp_cuda_host_alloc(&a->hstate, sizeof(fp_cuda_step_state));
    if (!rc && ops->set_label)
        ops->set_label(be, "optimizer scalars");
    rc = rc ? rc : ops->alloc(be, &a->dscal, sizeof(fp_cuda_optim_scalars));
    if (ops->set_label)
        ops->set_label(be, NULL);
    rc = rc ? rc : fp_cuda_host_alloc(&a->hscal, sizeof(fp_cuda_optim_scalars));
    for (int i = 0; !rc && i < 5; i++)
        rc = fp_cuda_event_create(&a->ev[i]);
    return rc;
}

/* Moves the model onto the device backend (a CUDA arm gets its own named arena) and allocates the optimizer's state
 * there (zero: fp_optim's state before the first step): SGD's momentum buffers in fp32, Adam's moments in the
 * policy's optimizer-state dtype; then the step state. */
int fp_arm_device_init(fp_arm *a, const fp_arm_config *cfg)
{
    fp_backend *be = NULL;
    int rc;
    if (cfg->backend == fp_backend_cuda()) {
        char name[64];
        snprintf(name, sizeof name, "%s arm", a->policy->name);
        size_t bytes = cfg->arena_bytes ? cfg->arena_bytes : fp_backend_cuda_default_arena();
        if (!bytes)
            return fp_fail(FP_EUNAVAIL, "%s: cannot size the device arena (no usable GPU?)", name);
        if ((rc = fp_backend_cuda_create_sized(&be, bytes, name)))
            return rc;
    }
    if ((rc = fp_model_set_backend(a->model, cfg->backend, be)))
        return rc;
    a->dev = 1;
    const int adam = cfg->optim.kind != FP_OPTIM_SGD;
    const fp_dtype sd = a->policy->optim_state;
    a->nopt = adam ? 2 : cfg->optim.momentum > 0 ? 1 : 0;
    a->dopt_dtype = adam && (sd == FP_DT_F16 || sd == FP_DT_BF16) ? sd : FP_DT_F32;
    const fp_backend_ops *ops = cfg->backend;
    fp_backend *mb = fp_model_backend(a->model);
    size_t bytes = (fp_model_num_params(a->model) ? fp_model_num_params(a->model) : 1) *
                   (size_t)fp_dtype_bytes(a->dopt_dtype);
    for (int j = 0; j < a->nopt; j++) {
        if (ops->set_label)
            ops->set_label(mb, adam ? (j ? "Adam exp_avg_sq" : "Adam exp_avg") : "momentum buffers");
        rc = ops->alloc(mb, &a->dopt[j], bytes);
        if (ops->set_label)
            ops->set_label(mb, NULL);
        if (rc || (rc = ops->zero(mb, a->dopt[j], bytes)))
            return rc;
    }
    return device_step_state(a);
}

void fp_arm_device_free(fp_arm *a)
{
    const fp_backend_ops *ops = fp_model_backend_ops(a->model);
    fp_backend *be = fp_model_backend(a->model);
    size_t np = fp_model_num_params(a->model) ? fp_model_num_params(a->model) : 1;
    for (int j = 0; j < 2; j++)
        if (a->dopt[j])
            ops->free(be, a->dopt[j], np * (size_t)fp_dtype_bytes(a->dopt_dtype));
    if (a->dstage)
        ops->free(be, a->dstage, np * 2);
    if (a->dref)
        ops->free(be, a->dref, np * sizeof(float));
    free(a->check_grads);
    if (a->dstate)
        ops->free(be, a->dstate, sizeof(fp_cuda_step_state));
    fp_cuda_host_free(a->hstate);
    if (a->dscal)
        ops->free(be, a->dscal, sizeof(fp_cuda_optim_scalars));
    fp_cuda_host_free(a->hscal);
    fp_cuda_graph_destroy(a->graph);
    for (int i = 0; i < 5; i++)
        fp_cuda_event_destroy(a->ev[i]);
}
