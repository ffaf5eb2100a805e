/* model_forward.c — forward over the nodes (TRAIN / EVAL) through the kernels of layers.h, with the
 * probe hooks of the forward pass and the layer-output copy for tests.
 * Promises: fp32 results equal to the kernels' composition; 16-bit storage as described in model.h. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser (relu mask). */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include "trainer/model_internal.h"

/* ---------------------------------------------------------------- forward */

/* Prefixes the kernel's message with the model and layer (copied first: fp_fail writes the buffer). */
void fp_mi_relabel(int rc, const char *model, const char *what, const char *layer)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s", fp_error_message());
    fp_fail(rc, "model %s: %s %s: %s", model, what, layer, msg);
}
/* ---------------------------------------------------------------- probe hooks */

void fp_model_set_probe(fp_model *m, fp_probe *p) { m->probe = p; }
fp_probe *fp_model_probe(const fp_model *m) { return m->probe; }

/* Value v to the probe in its storage format (16-bit tensors as stored: the probe widens them only
 * for backends that cannot take the bit patterns). */
void fp_mi_probe_value(fp_model *m, const void *p, fp_dtype d, size_t cnt, int layer, fp_tensor_role role)
{
    fp_probe_tensor_dt(m->probe, layer, role, p, is16(d) ? d : FP_DT_F32, cnt);
}

/* After layer nd's forward at a sampling step: its output (activation) and its parameters (weight:
 * the fp32 master values, all of the layer's parameters in one tensor). */
static void sample_forward(fp_model *m, int mode, const node_t *nd, int n, unsigned want)
{
    if (want & FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION))
        fp_mi_probe_value(m, vptr(m, mode, nd->out), vdt(m, nd->out), vfloats(m, nd->out, n), nd->info.index,
                    FP_ROLE_ACTIVATION);
    if ((want & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT)) && nd->info.params)
        fp_probe_tensor(m->probe, nd->info.index, FP_ROLE_WEIGHT, m->params + nd->pw, nd->info.params);
}

int fp_model_forward(fp_model *m, const float **logits, const float *x, int n, fp_mode mode)
{
    if (logits)
        *logits = NULL;
    if (!m || !m->finished)
        return fp_fail(FP_EINVAL, "model: forward on an unfinished model");
    if (!x || n < 1 || (mode != FP_MODE_TRAIN && mode != FP_MODE_EVAL))
        return fp_fail(FP_EINVAL, "model %s: forward with %s input, batch %d", m->name, x ? "an" : "a NULL", n);
    m->fwd_ok = 0;
    plan_t *pl = &m->plan[mode];
    if (pl->n != n) {
        int rc = fp_mi_plan_build(m, pl, n, mode);
        if (rc)
            return rc;
    }
    int lowp = m->lowp || m->pol.compute != FP_DT_F32;
    if (lowp) {
        int rc = fp_mi_ensure_cs(m, pl->max_floats);
        if (rc)
            return rc;
        if (m->wlow)
            fp_mi_prepare_weights(m);
    }
    memcpy(val(m, mode, 0), x, dims_floats(m->values[0].d) * (size_t)n * sizeof(float));
    int rc = FP_OK;
    float *const *S = m->cs;
    const float *W = m->wlow ? m->wlow : m->params;   /* conv / linear weights as computed */
    fp_probe *pr = m->probe;
    unsigned want = pr && mode == FP_MODE_TRAIN ? fp_probe_wants(pr) : 0;
    for (int i = 0; i < m->nnodes && rc == FP_OK; i++) {
        node_t *nd = &m->nodes[i];
        fp_dims id = batch_dims(nd->info.in, n);
        size_t cin = dims_floats(id) * (size_t)n, cout = vfloats(m, nd->out, n);
        fp_dtype din = vdt(m, nd->in), dout = vdt(m, nd->out);
        float *P = m->params, *B = m->buffers;
        if (pr)
            fp_probe_layer_begin(pr, i, FP_PHASE_FORWARD);
        switch (nd->info.type) {
        case FP_LAYER_CONV: {
            const float *xin = to_compute(m, vptr(m, mode, nd->in), din, cin, S[0]);
            float *y = out_f32(m, mode, nd->out, S[1]);
            rc = fp_conv_forward(y, xin, id, W + nd->pw, &nd->conv, &m->ws);
            store_out(m, mode, nd->out, cout, y);
            break;
        }
        case FP_LAYER_BN: {
            float *in = as_f32(vptr(m, mode, nd->in), din, cin, S[0]);
            float *y = out_f32(m, mode, nd->out, S[0]);   /* 16-bit: in place on the widened input */
            if (mode == FP_MODE_TRAIN) {
                float *save = (float *)pl->aux + nd->aux;
                rc = fp_batchnorm_forward_train(y, save, save + id.c, B + nd->brm, B + nd->brv, in, id, P + nd->pw,
                                                P + nd->pb, &nd->bn);
                if (m->pol.master != FP_DT_F32) {   /* `half`: the running statistics are fp16 tensors */
                    fp_round_to_dtype(B + nd->brm, (size_t)id.c, m->pol.master);
                    fp_round_to_dtype(B + nd->brv, (size_t)id.c, m->pol.master);
                }
            } else {
                rc = fp_batchnorm_forward_eval(y, in, id, P + nd->pw, P + nd->pb, B + nd->brm, B + nd->brv, &nd->bn);
            }
            store_out(m, mode, nd->out, cout, y);
            break;
        }
        case FP_LAYER_RELU:
            if (is16(din))
                fp_mi_relu16(vptr(m, mode, nd->out), vptr(m, mode, nd->in), cin, din);
            else
                rc = fp_relu_forward(val(m, mode, nd->out), val(m, mode, nd->in), cin);
            break;
        case FP_LAYER_MAXPOOL: {
            const float *in = as_f32(vptr(m, mode, nd->in), din, cin, S[0]);
            float *y = out_f32(m, mode, nd->out, S[1]);
            rc = fp_maxpool_forward(y, mode == FP_MODE_TRAIN ? (int *)pl->aux + nd->aux : NULL, in, id, &nd->pool);
            store_out(m, mode, nd->out, cout, y);
            break;
        }
        case FP_LAYER_AVGPOOL: {
            const float *in = as_f32(vptr(m, mode, nd->in), din, cin, S[0]);
            float *y = out_f32(m, mode, nd->out, S[1]);
            rc = fp_avgpool_global_forward(y, in, id);
            store_out(m, mode, nd->out, cout, y);
            break;
        }
        case FP_LAYER_LINEAR: {
            const float *xin = to_compute(m, vptr(m, mode, nd->in), din, cin, S[0]);
            float *y = out_f32(m, mode, nd->out, S[1]);
            rc = fp_linear_forward(y, xin, n, (int)dims_floats(id), nd->info.out.c, W + nd->pw, W + nd->pb);
            store_out(m, mode, nd->out, cout, y);
            break;
        }
        case FP_LAYER_ADD: {
            fp_dtype db = vdt(m, nd->in2);
            if (is16(din) && db == din && dout == din) {
                fp_mi_add16(vptr(m, mode, nd->out), vptr(m, mode, nd->in), vptr(m, mode, nd->in2), cin, din);
            } else if (!is16(din) && !is16(db) && !is16(dout)) {
                rc = fp_add_forward(val(m, mode, nd->out), val(m, mode, nd->in), val(m, mode, nd->in2), cin);
            } else {   /* mixed formats: through fp32, the output in a's format */
                const float *a = as_f32(vptr(m, mode, nd->in), din, cin, S[0]);
                const float *b = as_f32(vptr(m, mode, nd->in2), db, cin, S[1]);
                float *y = out_f32(m, mode, nd->out, S[2]);
                rc = fp_add_forward(y, a, b, cin);
                store_out(m, mode, nd->out, cout, y);
            }
            break;
        }
        default:
            rc = fp_fail(FP_EINTERNAL, "model: bad node type");
        }
        if (pr) {
            fp_probe_layer_end(pr, i, FP_PHASE_FORWARD);
            if (want && !rc)
                sample_forward(m, mode, nd, n, want);
        }
        if (rc)
            fp_mi_relabel(rc, m->name, "layer", nd->info.name);
    }
    fp_mi_note_peaks(m);
    if (rc)
        return rc;
    m->last_mode = mode;
    m->last_n = n;
    m->fwd_ok = mode == FP_MODE_TRAIN;
    int last = m->nvalues - 1;
    const float *out = val(m, mode, last);
    if (is16(vdt(m, last))) {   /* autocast's fp32 list: the loss sees the logits widened */
        size_t cnt = vfloats(m, last, n);
        if (m->logits32_cap < cnt) {
            float *p = realloc(m->logits32, cnt * sizeof(float));
            if (!p)
                return fp_fail(FP_ENOMEM, "model %s: out of memory", m->name);
            m->logits32 = p;
            m->logits32_cap = cnt;
        }
        fp_widen_array(m->logits32, vptr(m, mode, last), cnt, vdt(m, last));
        out = m->logits32;
    }
    if (logits)
        *logits = out;
    return FP_OK;
}

int fp_model_layer_output(fp_model *m, int layer, float *dst, size_t cap, fp_dtype *stored)
{
    if (!m || layer < 0 || layer >= m->nnodes || m->plan[m->last_mode].n == 0)
        return fp_fail(FP_EINVAL, "model: no output of layer %d (no forward yet?)", layer);
    int v = m->nodes[layer].out, n = m->plan[m->last_mode].n;
    size_t cnt = vfloats(m, v, n);
    if (stored)
        *stored = vdt(m, v);
    if (!dst)
        return (int)cnt;
    if (cap < cnt)
        return fp_fail(FP_EINVAL, "model %s: layer %d output has %zu values, buffer %zu", m->name, layer, cnt, cap);
    void *p = vptr(m, m->last_mode, v);
    if (is16(vdt(m, v)))
        fp_widen_array(dst, p, cnt, vdt(m, v));
    else
        memcpy(dst, p, cnt * sizeof(float));
    return (int)cnt;
}
