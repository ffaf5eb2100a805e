/* model_backward.c — backward over the nodes in reverse, with the pool of activation-gradient blocks
 * (best fit, reused across steps), and the train step (forward + softmax cross-entropy + backward).
 * Promises: gradients accumulate into the parameter gradient buffer; nothing allocated per step once sized. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser (relu mask). */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include "trainer/model_internal.h"

/* ---------------------------------------------------------------- backward */

/* A gradient block of at least `bytes` bytes (best fit among unused; else the largest unused one
 * grown; else a new one). Returns the block index or -1. */
static int gb_acquire(fp_model *m, size_t bytes)
{
    int best = -1, largest = -1;
    for (int b = 0; b < m->ngb; b++) {
        if (m->gb[b].used)
            continue;
        if (m->gb[b].cap >= bytes && (best < 0 || m->gb[b].cap < m->gb[best].cap))
            best = b;
        if (largest < 0 || m->gb[b].cap > m->gb[largest].cap)
            largest = b;
    }
    if (best < 0 && largest >= 0) {
        gblock_t *g = &m->gb[largest];
        void *p = malloc(bytes);
        if (!p)
            return -1;
        free(g->p);
        m->gb_bytes += bytes - g->cap;
        g->p = p;
        g->cap = bytes;
        best = largest;
    }
    if (best < 0) {
        void *q = grow(m->gb, &m->cap_gb, m->ngb + 1, sizeof *m->gb);
        if (!q)
            return -1;
        m->gb = q;
        void *p = malloc(bytes);
        if (!p)
            return -1;
        best = m->ngb++;
        m->gb[best] = (gblock_t){p, bytes, 0};
        m->gb_bytes += bytes;
    }
    m->gb[best].used = 1;
    if (m->gb_bytes > m->gb_peak)
        m->gb_peak = m->gb_bytes;
    return best;
}

/* A new gradient block for value v (its format), zeroed when asked; NULL on out of memory. */
static void *grad_new(fp_model *m, int v, int n, int zero)
{
    int b = gb_acquire(m, vbytes(m, v, n));
    if (b < 0)
        return NULL;
    m->vgrad[v] = b;
    if (zero)
        memset(m->gb[b].p, 0, vbytes(m, v, n));
    return m->gb[b].p;
}

/* The fp32 gradient of value v, zeroed when it is created now; NULL on out of memory. */
static float *grad_of(fp_model *m, int v, int n)
{
    if (m->vgrad[v] < 0)
        return grad_new(m, v, n, 1);
    return m->gb[m->vgrad[v]].p;
}

static void grad_release(fp_model *m, int v)
{
    if (m->vgrad[v] >= 0)
        m->gb[m->vgrad[v]].used = 0;
    m->vgrad[v] = -1;
}

/* Where a kernel accumulates the input gradient of value v: the fp32 gradient itself, or (16-bit)
 * the zeroed scratch buf, handed to dx_end. NULL on out of memory. */
static float *dx_begin(fp_model *m, int v, int n, float *buf)
{
    if (!is16(vdt(m, v)))
        return grad_of(m, v, n);
    memset(buf, 0, vfloats(m, v, n) * sizeof(float));
    return buf;
}
/* 16-bit: the contribution (a 16-bit tensor in PyTorch) rounded into v's gradient, or summed with
 * the one already there (round(old + new)). FP_ENOMEM when a block cannot be had. */
static int dx_end(fp_model *m, int v, int n, const float *buf)
{
    if (!is16(vdt(m, v)))
        return FP_OK;
    size_t cnt = vfloats(m, v, n);
    if (m->vgrad[v] < 0) {
        void *p = grad_new(m, v, n, 0);
        if (!p)
            return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
        fp_narrow_array(p, buf, cnt, vdt(m, v));
    } else {
        fp_mi_acc16(m->gb[m->vgrad[v]].p, buf, cnt, vdt(m, v));
    }
    return FP_OK;
}

/* Adds the gradient src (format sd, cnt values) into value v's gradient (created as a copy when
 * absent); mixed formats go through fp32. */
static int grad_contrib(fp_model *m, int v, int n, const void *src, fp_dtype sd, size_t cnt)
{
    fp_dtype d = vdt(m, v);
    if (m->vgrad[v] < 0) {
        void *p = grad_new(m, v, n, 0);
        if (!p)
            return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
        if (is16(d) == is16(sd) && (d == sd || !is16(d)))
            memcpy(p, src, vbytes(m, v, n));
        else if (is16(sd))
            fp_widen_array(p, src, cnt, sd);
        else
            fp_narrow_array(p, src, cnt, d);
        return FP_OK;
    }
    void *dst = m->gb[m->vgrad[v]].p;
    if (!is16(d) && !is16(sd))
        return fp_accumulate(dst, src, cnt);
    if (d == sd)
        fp_mi_add16(dst, dst, src, cnt, d);
    else
        for (size_t i = 0; i < cnt; i += CHUNK) {
            size_t c = cnt - i < CHUNK ? cnt - i : CHUNK;
            float ta[CHUNK], tb[CHUNK];
            const float *a = is16(d) ? (fp_widen_array(ta, (const uint16_t *)dst + i, c, d), ta) : (float *)dst + i;
            const float *b = is16(sd) ? (fp_widen_array(tb, (const uint16_t *)src + i, c, sd), tb)
                                      : (const float *)src + i;
            for (size_t k = 0; k < c; k++)
                ta[k] = a[k] + b[k];
            if (is16(d))
                fp_narrow_array((uint16_t *)dst + i, ta, c, d);
            else
                memcpy((float *)dst + i, ta, c * sizeof(float));
        }
    return FP_OK;
}

int fp_model_backward(fp_model *m, const float *dlogits)
{
    if (!m || !m->fwd_ok)
        return fp_fail(FP_EINVAL, "model %s: backward needs a TRAIN forward first", m ? m->name : "?");
    if (!dlogits)
        return fp_fail(FP_EINVAL, "model %s: backward with NULL dlogits", m->name);
    int n = m->last_n, mode = FP_MODE_TRAIN, rc = FP_OK;
    plan_t *pl = &m->plan[mode];
    for (int v = 0; v < m->nvalues; v++)
        m->vgrad[v] = -1;
    for (int b = 0; b < m->ngb; b++)
        m->gb[b].used = 0;
    int last = m->nvalues - 1;
    rc = grad_contrib(m, last, n, dlogits, FP_DT_F32, vfloats(m, last, n));   /* rounded entering 16 bits */
    if (rc)
        return rc;
    float *P = m->params, *G = m->grads, *const *S = m->cs;
    const float *W = m->wlow ? m->wlow : m->params;
    fp_dtype cdt = m->pol.compute;
    fp_probe *pr = m->probe;
    unsigned want = pr ? fp_probe_wants(pr) : 0;
#define PROBE_BEGIN(ph) do { if (pr) fp_probe_layer_begin(pr, i, ph); } while (0)
#define PROBE_END(ph) do { if (pr) fp_probe_layer_end(pr, i, ph); } while (0)
    for (int i = m->nnodes - 1; i >= 0 && rc == FP_OK; i--) {
        node_t *nd = &m->nodes[i];
        int vin = nd->in, vout = nd->out;
        if (m->vgrad[vout] < 0)
            continue;   /* the output does not reach the loss */
        void *dyp = m->gb[m->vgrad[vout]].p;
        int in_grad = m->values[vin].producer >= 0;   /* the model input needs none */
        fp_dims id = batch_dims(nd->info.in, n);
        fp_dtype din = vdt(m, vin), dout = vdt(m, vout);
        size_t cnt = vfloats(m, vin, n), cout = vfloats(m, vout, n);
        float *dx = NULL;
        /* conv / linear time their weight and data gradients apart; other layers are backward_data */
        int split = nd->info.type == FP_LAYER_CONV || nd->info.type == FP_LAYER_LINEAR;
        if (want & FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION_GRAD))   /* dL/d(output), as scaled */
            fp_mi_probe_value(m, dyp, dout, cout, i, FP_ROLE_ACTIVATION_GRAD);
        if (!split)
            PROBE_BEGIN(FP_PHASE_BACKWARD_DATA);
        switch (nd->info.type) {
        case FP_LAYER_CONV: {
            PROBE_BEGIN(FP_PHASE_BACKWARD_WEIGHTS);
            const float *dyc = to_compute(m, dyp, dout, cout, S[0]);
            const float *xc = to_compute(m, vptr(m, mode, vin), din, cnt, S[1]);
            if (is16(cdt)) {   /* the gradient of the 16-bit weight copy, rounded, lands in fp32 */
                memset(m->wscr, 0, nd->info.params * sizeof(float));
                rc = fp_conv_backward_weights(m->wscr, dyc, xc, id, &nd->conv, &m->ws);
                fp_round_add(G + nd->pw, m->wscr, nd->info.params, cdt);
            } else {
                rc = fp_conv_backward_weights(G + nd->pw, dyc, xc, id, &nd->conv, &m->ws);
            }
            PROBE_END(FP_PHASE_BACKWARD_WEIGHTS);
            if (!rc && in_grad) {
                PROBE_BEGIN(FP_PHASE_BACKWARD_DATA);
                if (!(dx = dx_begin(m, vin, n, S[2])))
                    return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
                rc = fp_conv_backward_data(dx, dyc, id, W + nd->pw, &nd->conv, &m->ws);
                rc = rc ? rc : dx_end(m, vin, n, dx);
                PROBE_END(FP_PHASE_BACKWARD_DATA);
            }
            break;
        }
        case FP_LAYER_BN: {
            const float *save = (const float *)pl->aux + nd->aux;
            const float *dy = as_f32(dyp, dout, cout, S[0]);
            const float *x = as_f32(vptr(m, mode, vin), din, cnt, S[1]);
            if (in_grad && !(dx = dx_begin(m, vin, n, S[2])))
                return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
            rc = fp_batchnorm_backward(dx, G + nd->pw, G + nd->pb, dy, x, id, P + nd->pw, save, save + id.c);
            if (!rc && dx)
                rc = dx_end(m, vin, n, dx);
            break;
        }
        case FP_LAYER_RELU: {
            if (!in_grad)
                break;
            if (is16(dout)) {
                fp_mi_relu_mask16(dyp, vptr(m, mode, vout), cnt, dout);
                if (m->vgrad[vin] < 0 && din == dout) {   /* first contribution: hand the masked dy over */
                    m->vgrad[vin] = m->vgrad[vout];
                    m->vgrad[vout] = -1;
                } else {
                    rc = grad_contrib(m, vin, n, dyp, dout, cnt);
                }
                break;
            }
            const float *y = val(m, mode, vout);
            float *dy = dyp;
            if (m->vgrad[vin] < 0) {   /* first contribution: mask dy in place and hand it over */
                for (size_t k = 0; k < cnt; k++)
                    dy[k] = y[k] > 0 ? dy[k] : 0.0f;
                m->vgrad[vin] = m->vgrad[vout];
                m->vgrad[vout] = -1;
            } else {
                rc = fp_relu_backward(m->gb[m->vgrad[vin]].p, dy, y, cnt);
            }
            break;
        }
        case FP_LAYER_MAXPOOL:
        case FP_LAYER_AVGPOOL: {
            if (!in_grad)
                break;
            const float *dy = as_f32(dyp, dout, cout, S[0]);
            if (!(dx = dx_begin(m, vin, n, S[2])))
                return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
            if (nd->info.type == FP_LAYER_MAXPOOL)
                rc = fp_maxpool_backward(dx, dy, (const int *)pl->aux + nd->aux, id, &nd->pool);
            else
                rc = fp_avgpool_global_backward(dx, dy, id);
            rc = rc ? rc : dx_end(m, vin, n, dx);
            break;
        }
        case FP_LAYER_LINEAR: {
            PROBE_BEGIN(FP_PHASE_BACKWARD_WEIGHTS);
            const float *dyc = to_compute(m, dyp, dout, cout, S[0]);
            const float *xc = to_compute(m, vptr(m, mode, vin), din, cnt, S[1]);
            int fin = (int)dims_floats(nd->info.in), fout = nd->info.out.c;
            if (is16(cdt)) {   /* weight and bias gradients of the 16-bit copies, rounded, land in fp32 */
                memset(m->wscr, 0, nd->info.params * sizeof(float));
                rc = fp_linear_backward(NULL, m->wscr, m->wscr + (size_t)fin * fout, dyc, xc, n, fin, fout, W + nd->pw);
                fp_round_add(G + nd->pw, m->wscr, nd->info.params, cdt);
            } else {
                rc = fp_linear_backward(NULL, G + nd->pw, G + nd->pb, dyc, xc, n, fin, fout, W + nd->pw);
            }
            PROBE_END(FP_PHASE_BACKWARD_WEIGHTS);
            if (!rc && in_grad) {
                PROBE_BEGIN(FP_PHASE_BACKWARD_DATA);
                if (!(dx = dx_begin(m, vin, n, S[2])))
                    return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
                rc = fp_linear_backward(dx, NULL, NULL, dyc, xc, n, fin, fout, W + nd->pw);
                rc = rc ? rc : dx_end(m, vin, n, dx);
                PROBE_END(FP_PHASE_BACKWARD_DATA);
            }
            break;
        }
        case FP_LAYER_ADD: {
            int vb = nd->in2;
            if (m->values[vb].producer >= 0)
                rc = grad_contrib(m, vb, n, m->gb[m->vgrad[vout]].p, dout, cnt);
            if (!in_grad || rc)
                break;
            dyp = m->gb[m->vgrad[vout]].p;
            if (m->vgrad[vin] < 0 && din == dout) {   /* hand dy over */
                m->vgrad[vin] = m->vgrad[vout];
                m->vgrad[vout] = -1;
            } else {
                rc = grad_contrib(m, vin, n, dyp, dout, cnt);
            }
            break;
        }
        default:
            rc = fp_fail(FP_EINTERNAL, "model: bad node type");
        }
        if (!split)
            PROBE_END(FP_PHASE_BACKWARD_DATA);
        if ((want & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD)) && nd->info.params && !rc)   /* accumulated, scaled */
            fp_probe_tensor(pr, i, FP_ROLE_WEIGHT_GRAD, G + nd->pw, nd->info.params);
        if (rc)
            fp_mi_relabel(rc, m->name, "backward of", nd->info.name);
        grad_release(m, vout);
    }
#undef PROBE_BEGIN
#undef PROBE_END
    for (int v = 0; v < m->nvalues; v++)
        grad_release(m, v);
    if (!rc && m->pol.master != FP_DT_F32)   /* `half`: parameter gradients are fp16 tensors */
        fp_round_to_dtype(G, m->nparams, m->pol.master);
    fp_mi_note_peaks(m);
    return rc;
}

int fp_model_train_step_scaled(fp_model *m, float *loss, int *correct1, int *correct5, const float *x,
                               const int *labels, int n, float loss_scale)
{
    const float *logits;
    int rc = fp_model_forward(m, &logits, x, n, FP_MODE_TRAIN);
    if (rc)
        return rc;
    size_t need = (size_t)n * m->num_classes;
    if (m->dlogits_cap < need) {
        float *p = realloc(m->dlogits, need * sizeof(float));
        if (!p)
            return fp_fail(FP_ENOMEM, "model %s: out of memory", m->name);
        m->dlogits = p;
        m->dlogits_cap = need;
    }
    float l = 0;
    rc = fp_softmax_xent(&l, m->dlogits, correct1, correct5, logits, labels, n, m->num_classes);
    if (rc)
        return rc;
    if (loss)
        *loss = l;
    if (loss_scale != 1.0f)   /* scaler.scale(loss).backward(): d(loss * s)/dlogits, in fp32 */
        for (size_t i = 0; i < need; i++)
            m->dlogits[i] *= loss_scale;
    return fp_model_backward(m, m->dlogits);
}

int fp_model_train_step(fp_model *m, float *loss, int *correct1, int *correct5, const float *x, const int *labels,
                        int n)
{
    return fp_model_train_step_scaled(m, loss, correct1, correct5, x, labels, n, 1.0f);
}
