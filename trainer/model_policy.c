/* model_policy.c — the precision policy: storage formats per value (autocast's lists), the rounded
 * weight copy, the fp32 cast scratch, and the 16-bit storage helpers (add, accumulate, relu, mask).
 * Promises: results rounded exactly as the format rounds (lib/numfmt.h); fp32 policy changes nothing. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser (relu mask). */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
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
    float *wlow = m->wlow, *wscr = m->wscr;
    if (p->compute != FP_DT_F32 && !wlow)
        wlow = malloc((m->nparams ? m->nparams : 1) * sizeof(float));
    if (is16(p->compute) && !wscr)
        wscr = malloc((wmax ? wmax : 1) * sizeof(float));
    if ((p->compute != FP_DT_F32 && !wlow) || (is16(p->compute) && !wscr)) {
        if (wlow != m->wlow)
            free(wlow);
        if (wscr != m->wscr)
            free(wscr);
        return fp_fail(FP_ENOMEM, "model %s: out of memory for the weight copy", m->name);
    }
    if (p->compute == FP_DT_F32) {
        free(wlow);
        wlow = NULL;
    }
    if (!is16(p->compute)) {
        free(wscr);
        wscr = NULL;
    }
    m->wlow = wlow;
    m->wscr = wscr;
    m->wscr_floats = wscr ? wmax : 0;
    m->pol = *p;
    m->lowp = !(p->compute == FP_DT_F32 && p->activation == FP_DT_F32 && p->master == FP_DT_F32);
    assign_dtypes(m);
    fp_mi_plan_free(&m->plan[0]);
    fp_mi_plan_free(&m->plan[1]);
    m->fwd_ok = 0;
    if (p->master != FP_DT_F32) {   /* model.half(): parameters and buffers converted */
        fp_round_to_dtype(m->params, m->nparams, p->master);
        fp_round_to_dtype(m->buffers, m->nbuffers, p->master);
    }
    return FP_OK;
}

const fp_policy *fp_model_policy(const fp_model *m) { return &m->pol; }

int fp_mi_ensure_cs(fp_model *m, size_t floats)
{
    if (floats <= m->cs_floats)
        return FP_OK;
    for (int i = 0; i < 3; i++) {
        free(m->cs[i]);
        m->cs[i] = malloc(floats * sizeof(float));
        if (!m->cs[i]) {
            for (int k = 0; k < 3; k++) {
                free(m->cs[k]);
                m->cs[k] = NULL;
            }
            m->cs_floats = 0;
            return fp_fail(FP_ENOMEM, "model %s: out of memory for cast scratch", m->name);
        }
    }
    m->cs_floats = floats;
    if (3 * floats * sizeof(float) > m->cs_peak)
        m->cs_peak = 3 * floats * sizeof(float);
    return FP_OK;
}

/* The low-precision weight copy autocast makes once per forward: conv weights, linear weight and
 * bias rounded to pol.compute (fp32 containers). */
void fp_mi_prepare_weights(fp_model *m)
{
    for (int i = 0; i < m->nnodes; i++) {
        const node_t *nd = &m->nodes[i];
        if (nd->info.type == FP_LAYER_CONV || nd->info.type == FP_LAYER_LINEAR)
            fp_round_to_dtype_copy(m->wlow + nd->pw, m->params + nd->pw, nd->info.params, m->pol.compute);
    }
}

/* y = round_d(a + b) on 16-bit storage (chunks through fp32; y may alias a or b). */
void fp_mi_add16(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n, fp_dtype d)
{
    float ta[CHUNK], tb[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t c = n - i < CHUNK ? n - i : CHUNK;
        fp_widen_array(ta, a + i, c, d);
        fp_widen_array(tb, b + i, c, d);
        for (size_t k = 0; k < c; k++)
            ta[k] += tb[k];
        fp_narrow_array(y + i, ta, c, d);
    }
}

/* dst = round_d(dst + round_d(c)): an fp32-computed gradient contribution (a 16-bit tensor in
 * PyTorch) summed into a 16-bit gradient. */
void fp_mi_acc16(uint16_t *dst, const float *c, size_t n, fp_dtype d)
{
    float ta[CHUNK], tb[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        fp_widen_array(ta, dst + i, k, d);
        fp_round_to_dtype_copy(tb, c + i, k, d);
        for (size_t j = 0; j < k; j++)
            ta[j] += tb[j];
        fp_narrow_array(dst + i, ta, k, d);
    }
}

/* relu on 16-bit storage, the kernel's semantics (v < 0 ? 0 : v: -0 and NaN pass through). */
void fp_mi_relu16(uint16_t *restrict y, const uint16_t *restrict x, size_t n, fp_dtype d)
{
    unsigned inf = d == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < n; i++) {
        unsigned h = x[i], mag = h & 0x7fffu;
        y[i] = (uint16_t)((h & 0x8000u) && mag && mag <= inf ? 0u : h);
    }
}

/* dy = y > 0 ? dy : +0 on 16-bit storage (y > 0: sign clear, nonzero, not NaN). */
void fp_mi_relu_mask16(uint16_t *restrict dy, const uint16_t *restrict y, size_t n, fp_dtype d)
{
    unsigned inf = d == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < n; i++)
        dy[i] = (uint16_t)((unsigned)(uint16_t)(y[i] - 1u) < inf ? dy[i] : 0u);
}
