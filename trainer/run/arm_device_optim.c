/* arm_device_optim.c — a device arm's optimizer (CUDA builds): its state moved between the device and fp_optim's
 * host state, the per-step scalars and the update's launch (SGD, Adam / AdamW). Promise: optim.c's arithmetic
 * operation by operation, doing nothing on the device's skip flag; a state the format does not hold is rounded. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include "error.h"
#include "trainer/backend.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/kernels.h"
#include "trainer/run/arm_device_internal.h"

/* The device optimizer state and fp_optim's host state: down (device -> host) or up. fp_optim keeps nopt entries per
 * parameter tensor, in tensor order (optim.h: SGD's momentum_buffer; Adam's exp_avg, then exp_avg_sq), each the
 * tensor's part of one device buffer. 16-bit storage goes through one host buffer of the whole, widened (exact) or
 * narrowed (round to nearest even: a restored value the format does not hold is rounded, as `half`'s host step
 * rounds its state). Waits at the end. */
int fp_arm_device_opt_transfer(fp_arm *a, int down)
{
    const fp_backend_ops *ops = fp_model_backend_ops(a->model);
    fp_backend *be = fp_model_backend(a->model);
    size_t nt = fp_model_tensor_count(a->model), np = fp_model_num_params(a->model);
    const int wide = a->dopt_dtype == FP_DT_F32;
    uint16_t *tmp = wide ? NULL : malloc((np ? np : 1) * sizeof *tmp);
    int rc = !wide && !tmp ? fp_fail(FP_ENOMEM, "out of memory") : FP_OK;
    for (int j = 0; !rc && j < a->nopt; j++) {
        if (tmp && down && !(rc = ops->download(be, tmp, a->dopt[j], np * sizeof *tmp)))
            rc = ops->sync(be);
        for (size_t i = 0, k = 0; i < nt && !rc; i++) {
            const fp_tensor_info *t = fp_model_tensor(a->model, i);
            if (!t->is_param)
                continue;
            fp_optim_state st;
            if ((rc = fp_optim_state_at(a->optim, k++ * (size_t)a->nopt + (size_t)j, &st)))
                break;
            if (st.n != t->numel) {
                rc = fp_fail(FP_EINTERNAL, "arm: optimizer state %s does not match tensor %s", st.name, t->name);
                break;
            }
            float *d = (float *)a->dopt[j] + t->offset;
            if (wide)
                rc = down ? ops->download(be, st.data, d, t->numel * sizeof(float))
                          : ops->upload(be, d, st.data, t->numel * sizeof(float));
            else
                rc = down ? fp_widen_array(st.data, tmp + t->offset, t->numel, a->dopt_dtype)
                          : fp_narrow_array(tmp + t->offset, st.data, t->numel, a->dopt_dtype);
        }
        if (!rc && tmp && !down)
            rc = ops->upload(be, a->dopt[j], tmp, np * sizeof *tmp);
    }
    rc = rc ? rc : ops->sync(be);
    free(tmp);
    return rc;
}

void fp_arm_device_optim_to_host(fp_arm *a)
{
    if (a->nopt && a->opt_dev_newer && fp_arm_device_opt_transfer(a, 1) == FP_OK)
        a->opt_dev_newer = 0;
    if (a->nopt)
        a->opt_host_newer = 1;   /* the caller may write (checkpoint restore) */
}

/* The optimizer's per-step scalars (kernels.h fp_cuda_optim_scalars: lr, SGD's first step, Adam's bias corrections
 * for count step + 1) into the pinned host copy, before the step is queued or replayed; step: the optimizer's count
 * before it (it moves at the step's end, once the skip is known). */
int fp_arm_device_step_scalars(fp_arm *a, double lr, int64_t step)
{
    if (!isfinite(lr) || lr < 0)
        return fp_fail(FP_EINVAL, "optimizer: learning rate %g is not finite and >= 0", lr);
    return a->cfg.optim.kind != FP_OPTIM_SGD ? fp_cuda_adam_scalars(a->hscal, &a->cfg.optim, lr, step + 1)
                                             : fp_cuda_sgd_scalars(a->hscal, lr, step == 0);
}

/* 6. The optimizer step of a device arm (optim.c's update, kernels.h: SGD, or Adam / AdamW with the moments in their
 * storage dtype), its per-step scalars copied from the pinned host copy (fp_arm_device_step_scalars) to the device
 * first and read there, launched to do nothing when the step state's skip flag is set on the device; then the
 * policy's rounding of master weights and of state kept in fp32 (`half`; idempotent when the step was skipped). */
int fp_arm_device_optim(fp_arm *a)
{
    fp_model *m = a->model;
    const fp_backend_ops *ops = fp_model_backend_ops(m);
    fp_backend *be = fp_model_backend(m);
    const fp_optim_config *oc = &a->cfg.optim;
    const int adam = oc->kind != FP_OPTIM_SGD;
    int rc = FP_OK;
    size_t nt = fp_model_tensor_count(m), ns = 0, es = (size_t)fp_dtype_bytes(a->dopt_dtype);
    fp_cuda_segment *segs = adam ? NULL : calloc(nt ? nt : 1, sizeof *segs);
    fp_cuda_adam_segment *asegs = adam ? calloc(nt ? nt : 1, sizeof *asegs) : NULL;
    float *p = fp_model_backend_params(m), *g = fp_model_backend_grads(m);
    if ((!segs && !asegs) || !p || !g) {
        rc = !segs && !asegs ? fp_fail(FP_ENOMEM, "out of memory") : FP_EINTERNAL;
        free(segs);
        free(asegs);
        return rc;
    }
    fp_dtype low_dt = FP_DT_F32;   /* the backend's 16-bit weight copy (16-bit compute): written here, once */
    int low = fp_backend_cuda_weight_copy_of(be, p, &low_dt) != NULL;
    char *m0 = a->dopt[0], *m1 = a->dopt[1];
    for (size_t i = 0; i < nt; i++) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (!t->is_param)
            continue;
        uint16_t *lowp = low ? fp_backend_cuda_weight_copy_at(be, p + t->offset) : NULL;
        if (adam)
            asegs[ns++] = (fp_cuda_adam_segment){p + t->offset, g + t->offset, m0 + t->offset * es,
                                                 m1 + t->offset * es, lowp, t->numel, 1};
        else
            segs[ns++] = (fp_cuda_segment){p + t->offset, g + t->offset, m0 ? (float *)m0 + t->offset : NULL, lowp,
                                           t->numel, 1};
    }
    fp_cuda_step_state *ds = a->dstate;
    void *stream = fp_backend_cuda_stream(be);
    rc = fp_cuda_optim_scalars_upload(a->dscal, a->hscal, stream);
    if (!rc)
        rc = adam ? fp_cuda_adam_step_dev(asegs, ns, oc, a->dopt_dtype, low ? low_dt : FP_DT_F32, &ds->skip, a->dscal,
                                          stream)
                  : fp_cuda_sgd_step_dev(segs, ns, oc->momentum, oc->weight_decay, oc->nesterov,
                                         low ? low_dt : FP_DT_F32, &ds->skip, a->dscal, stream);
    if (!rc && low)   /* skipped or not, the kernel wrote the cast of the weights it leaves */
        fp_backend_cuda_weight_copy_written(be);   /* before the master rounding below, which keeps or drops it */
    free(segs);
    free(asegs);
    size_t np = fp_model_num_params(m);
    fp_tensor pt = fp_tensor_of(p, FP_DT_F32, (fp_dims){1, 1, 1, (int)np});
    if (!rc && np && a->policy->master != FP_DT_F32)
        rc = ops->round(be, pt, pt, a->policy->master);
    for (int j = 0; !rc && np && j < a->nopt && a->dopt_dtype == FP_DT_F32 && a->policy->optim_state != FP_DT_F32;
         j++) {
        fp_tensor mt = fp_tensor_of(a->dopt[j], FP_DT_F32, (fp_dims){1, 1, 1, (int)np});
        rc = ops->round(be, mt, mt, a->policy->optim_state);
    }
    return rc;
}
