/* model_policy.c — the precision policy: storage formats per value (autocast's lists), the rounded
 * weight copy (through the backend's round op) and the backend staging it needs.
 * Promises: results rounded exactly as the format rounds (lib/numfmt.h); fp32 policy changes nothing. */
#include "trainer/model_internal.h"

/* ---------------------------------------------------------------- precision policy */

/* Storage formats under the policy (autocast's lists): the input stays fp32; conv / linear produce
 * pol.activation (fp32 for tf32); batchnorm, relu, pools and add keep their (first) input's format.
 * Values sharing a storage (in-place relu / add) therefore share its format. */
static void assign_dtypes(fp_model *m)
{
    fp_dtype act = is16(m->pol.activation) ? m->pol.activation : FP_DT_F32;
    for (int s = 0; s < m->nstorages; s++)
        m->storages[s].bytes = 4;
    for (int v = 0; v < m->nvalues; v++) {
        value_t *vv = &m->values[v];
        if (vv->producer < 0) {
            vv->dt = FP_DT_F32;
            continue;
        }
        const node_t *nd = &m->nodes[vv->producer];
        int mm = nd->info.type == FP_LAYER_CONV || nd->info.type == FP_LAYER_LINEAR;
        vv->dt = mm ? act : m->values[nd->in].dt;
        m->storages[vv->storage].bytes = fp_dtype_bytes(vv->dt);
    }
}

int fp_model_set_policy(fp_model *m, const fp_policy *p)
{
    if (!m || !m->finished)
        return fp_fail(FP_EINVAL, "model: set_policy on an unfinished model");
    if (!p)
        p = fp_policy_find("fp32");
    int okdt = (p->activation == FP_DT_F32 || is16(p->activation)) &&
               p->activation_grad == p->activation && p->master != FP_DT_TF32 &&
               (unsigned)p->compute <= FP_DT_BF16 && (unsigned)p->master <= FP_DT_BF16;
    if (!okdt)
        return fp_fail(FP_EINVAL, "model %s: policy %s not supported (activation and activation_grad must be the same "
                       "fp32 / fp16 / bf16, master fp32 / fp16 / bf16)", m->name, p->name ? p->name : "?");
    size_t wmax = 0;
    for (int i = 0; i < m->nnodes; i++)
        if ((m->nodes[i].info.type == FP_LAYER_CONV || m->nodes[i].info.type == FP_LAYER_LINEAR) &&
            m->nodes[i].info.params > wmax)
            wmax = m->nodes[i].info.params;
    int fresh = 0;   /* the weight copy was allocated by this call */
    if (p->compute != FP_DT_F32 && !m->wlow) {
        void *w = NULL;
        if (m->ops->alloc(m->be, &w, m->nparams * sizeof(float)))
            return fp_fail(FP_ENOMEM, "model %s: out of memory for the weight copy", m->name);
        m->wlow = w;
        fresh = 1;
    }
    if (is16(p->compute) && m->ops->reserve(m->be, 0, wmax)) {   /* a weight gradient before rounding */
        if (fresh) {
            m->ops->free(m->be, m->wlow, m->nparams * sizeof(float));
            m->wlow = NULL;
        }
        return fp_fail(FP_ENOMEM, "model %s: out of memory for the weight copy", m->name);
    }
    if (p->compute == FP_DT_F32 && m->wlow) {
        m->ops->free(m->be, m->wlow, m->nparams * sizeof(float));
        m->wlow = NULL;
    }
    m->pol = *p;
    m->lowp = !(p->compute == FP_DT_F32 && p->activation == FP_DT_F32 && p->master == FP_DT_F32);
    assign_dtypes(m);
    fp_mi_plan_free(m, &m->plan[0]);
    fp_mi_plan_free(m, &m->plan[1]);
    m->fwd_ok = 0;
    if (p->master != FP_DT_F32) {   /* model.half(): parameters and buffers converted (own copy) */
        int rc = fp_mi_to_host(m, FP_MI_HOST_P | FP_MI_HOST_B);   /* rounded on the host, then uploaded */
        if (rc)
            return rc;
        if (devmem(m))
            m->stale |= FP_MI_DEV_P | FP_MI_DEV_B;
        if (m->params != m->own_params) {
            memcpy(m->own_params, m->params, m->nparams * sizeof(float));
            m->params = m->own_params;
        }
        fp_round_to_dtype(m->params, m->nparams, p->master);
        fp_round_to_dtype(m->buffers, m->nbuffers, p->master);
    }
    return FP_OK;
}

const fp_policy *fp_model_policy(const fp_model *m) { return &m->pol; }

/* The low-precision weight copy autocast makes once per forward, one layer at a time just before the
 * layer runs (its rounded weights still in cache for the GEMM): conv weights, linear weight and bias
 * rounded to pol.compute (fp32 containers). FP_OK doing nothing for a model without the copy or a
 * layer without weights. */
int fp_mi_prepare_layer_weights(fp_model *m, const node_t *nd)
{
    if (!m->wlow || (nd->info.type != FP_LAYER_CONV && nd->info.type != FP_LAYER_LINEAR))
        return FP_OK;
    return m->ops->round(m->be, flat32(m->wlow + nd->pw, nd->info.params), flat32(m->dparams + nd->pw, nd->info.params),
                         m->pol.compute);
}
