/* arm_report.c — what an arm says about itself: its memory (model, optimizer state) and the run's info lines on a
 * device arm's uploads, its CUDA graph and the fused chains. Promise: an empty line (0) where there is nothing to
 * say. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "error.h"
#include "trainer/run/arm_internal.h"

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
