/* model_backward.c — backward over the nodes in reverse, every tensor operation through the backend
 * table (backend.h), with the pool of activation-gradient blocks (best fit, reused across steps), and
 * the train step (forward + softmax cross-entropy + backward).
 * Promises: gradients accumulate into the parameter gradient buffer; nothing allocated per step once sized. */
#include "trainer/model_internal.h"

/* ---------------------------------------------------------------- the gradient pool */

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
        void *p = NULL;
        if (m->ops->alloc(m->be, &p, bytes))
            return -1;
        m->ops->free(m->be, g->p, g->cap);
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
        void *p = NULL;
        if (m->ops->alloc(m->be, &p, bytes))
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

/* A new gradient block for value v (its format), contents undefined; NULL on out of memory. */
static void *grad_new(fp_model *m, int v, int n)
{
    int b = gb_acquire(m, vbytes(m, v, n));
    if (b < 0)
        return NULL;
    m->vgrad[v] = b;
    return m->gb[b].p;
}

void fp_mi_grad_release(fp_model *m, int v)
{
    if (m->vgrad[v] >= 0)
        m->gb[m->vgrad[v]].used = 0;
    m->vgrad[v] = -1;
}

/* The gradient of value v as a tensor (its block must exist). */
fp_tensor fp_mi_gten(fp_model *m, int v, int n)
{
    return fp_tensor_of(m->gb[m->vgrad[v]].p, vdt(m, v), batch_dims(m->values[v].d, n));
}

/* Out of memory for a gradient block: the backend's message (a device arena names the layer being
 * differentiated and the bytes asked) kept after the model's name. */
static int oom_backward(fp_model *m)
{
    char why[256];
    snprintf(why, sizeof why, "%s", fp_error_message());
    return fp_fail(FP_ENOMEM, "model %s: out of memory in backward (%s)", m->name, why);
}

/* The gradient of value v for an op to write: *accumulate 0 when it is created now (the op
 * overwrites it), 1 when it exists (the op adds to it). FP_ENOMEM. */
int fp_mi_grad_target(fp_model *m, int v, int n, fp_tensor *g, int *accumulate)
{
    *accumulate = m->vgrad[v] >= 0;
    if (!*accumulate && !grad_new(m, v, n))
        return oom_backward(m);
    *g = fp_mi_gten(m, v, n);
    return FP_OK;
}

/* Adds the gradient src into value v's gradient (created as a converted copy when absent). */
static int grad_contrib(fp_model *m, int v, int n, fp_tensor src)
{
    if (m->vgrad[v] < 0) {
        if (!grad_new(m, v, n))
            return oom_backward(m);
        return m->ops->cast(m->be, fp_mi_gten(m, v, n), src);
    }
    return m->ops->accumulate(m->be, fp_mi_gten(m, v, n), src);
}

/* The gradient of value `from` becomes value `to`'s (no copy). */
static void grad_hand_over(fp_model *m, int to, int from)
{
    m->vgrad[to] = m->vgrad[from];
    m->vgrad[from] = -1;
}

/* ---------------------------------------------------------------- backward */

void fp_model_set_grad_ready(fp_model *m, fp_model_grad_ready_fn fn, void *ctx)
{
    m->grad_ready = fn;
    m->grad_ready_ctx = fn ? ctx : NULL;
}

/* Node i's parameter gradients are final: under `half` rounded to the master format now (without a hook,
 * once for all at the end of the backward), then handed to the gradient-ready hook. */
int fp_mi_grads_ready(fp_model *m, int i)
{
    const node_t *nd = &m->nodes[i];
    if (!m->grad_ready || nd->pw < 0 || nd->info.params == 0)
        return FP_OK;
    size_t off = (size_t)nd->pw, cnt = nd->info.params;
    int rc = FP_OK;
    if (m->pol.master != FP_DT_F32)
        rc = m->ops->round(m->be, flat32(m->dgrads + off, cnt), flat32(m->dgrads + off, cnt), m->pol.master);
    return rc ? rc : m->grad_ready(m->grad_ready_ctx, i, off, cnt);
}

int fp_mi_backward(fp_model *m, const float *dlogits)
{
    if (!m || !m->fwd_ok)
        return fp_fail(FP_EINVAL, "model %s: backward needs a TRAIN forward first", m ? m->name : "?");
    if (!dlogits)
        return fp_fail(FP_EINVAL, "model %s: backward with NULL dlogits", m->name);
    int n = m->last_n, mode = FP_MODE_TRAIN, rc = fp_mi_to_device(m);   /* zeroed / written gradients */
    if (rc)
        return rc;
    plan_t *pl = &m->plan[mode];
    const fp_backend_ops *ops = m->ops;
    fp_backend *be = m->be;
    for (int v = 0; v < m->nvalues; v++)
        m->vgrad[v] = -1;
    for (int b = 0; b < m->ngb; b++)
        m->gb[b].used = 0;
    int last = m->nvalues - 1;
    fp_tensor dl = fp_tensor_of((void *)dlogits, FP_DT_F32, batch_dims(m->values[last].d, n));
    rc = grad_contrib(m, last, n, dl);   /* rounded entering 16 bits */
    if (rc)
        return rc;
    float *P = m->dparams, *G = m->dgrads;
    float *W = m->wlow ? m->wlow : m->dparams;
    fp_dtype cdt = m->pol.compute;
    fp_probe *pr = m->probe;
    unsigned want = pr ? fp_probe_wants(pr) : 0;
#define PROBE_BEGIN(ph) do { if (pr) fp_probe_layer_begin(pr, i, ph); } while (0)
#define PROBE_END(ph) do { if (pr) fp_probe_layer_end(pr, i, ph); } while (0)
    int fused = m->fwd_fused && !want;   /* a sampled backward runs every node (it reads no fused state) */
    for (int i = m->nnodes - 1; i >= 0 && rc == FP_OK; i--) {
        int first = fused ? fp_mi_fuse_backward(m, i, n, &rc) : -1;
        if (first >= 0) {   /* a fused chain ran back to its batchnorm (model_fuse.c) */
            i = first;
            continue;
        }
        node_t *nd = &m->nodes[i];
        int vin = nd->in, vout = nd->out;
        if (m->vgrad[vout] < 0) {   /* the output does not reach the loss: its gradients stay zero */
            rc = fp_mi_grads_ready(m, i);
            continue;
        }
        if (ops->set_label)   /* device backends name the layer in out-of-memory messages */
            ops->set_label(be, nd->info.name);
        int in_grad = m->values[vin].producer >= 0;   /* the model input needs none */
        fp_dtype din = vdt(m, vin), dout = vdt(m, vout);
        fp_tensor DY = fp_mi_gten(m, vout, n), X = vten(m, mode, vin, n), DX = {0};
        int acc = 0, c = nd->info.in.c;
        /* conv / linear time their weight and data gradients apart; other layers are backward_data */
        int split = nd->info.type == FP_LAYER_CONV || nd->info.type == FP_LAYER_LINEAR;
        if (want & FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION_GRAD))   /* dL/d(output), as scaled */
            fp_mi_probe_value(m, DY.p, dout, fp_tensor_count(&DY), i, FP_ROLE_ACTIVATION_GRAD);
        if (!split)
            PROBE_BEGIN(FP_PHASE_BACKWARD_DATA);
        switch (nd->info.type) {
        case FP_LAYER_CONV: {
            const fp_conv_params *cp = &nd->conv;
            fp_dims wd = {cp->cout, cp->kh, cp->kw, cp->cin};
            PROBE_BEGIN(FP_PHASE_BACKWARD_WEIGHTS);
            rc = ops->conv_backward_weights(be, fp_tensor_of(G + nd->pw, FP_DT_F32, wd), DY, X, cp, cdt);
            PROBE_END(FP_PHASE_BACKWARD_WEIGHTS);
            if (!rc && in_grad) {
                PROBE_BEGIN(FP_PHASE_BACKWARD_DATA);
                if (fp_mi_grad_target(m, vin, n, &DX, &acc))
                    return FP_ENOMEM;
                rc = ops->conv_backward_data(be, DX, DY, fp_tensor_of(W + nd->pw, FP_DT_F32, wd), cp, cdt, acc);
                PROBE_END(FP_PHASE_BACKWARD_DATA);
            }
            break;
        }
        case FP_LAYER_BN: {
            if (in_grad && fp_mi_grad_target(m, vin, n, &DX, &acc))
                return FP_ENOMEM;
            fp_tensor save = fp_tensor_of((float *)pl->aux + nd->aux, FP_DT_F32, (fp_dims){1, 1, 1, 2 * c});
            fp_tensor dg = fp_tensor_of(G + nd->pw, FP_DT_F32, (fp_dims){1, 1, 1, c});
            fp_tensor db = fp_tensor_of(G + nd->pb, FP_DT_F32, (fp_dims){1, 1, 1, c});
            fp_tensor gamma = fp_tensor_of(P + nd->pw, FP_DT_F32, (fp_dims){1, 1, 1, c});
            rc = m->bn_reduce ? fp_mi_sync_bn_backward(m, DX, dg, db, DY, X, gamma, save, acc)
                              : ops->bn_backward(be, DX, dg, db, DY, X, gamma, save, acc);
            break;
        }
        case FP_LAYER_RELU: {
            if (!in_grad)
                break;
            fp_tensor Y = vten(m, mode, vout, n);
            if (m->vgrad[vin] >= 0 && din == dout) {   /* dx += masked dy */
                rc = ops->relu_backward(be, fp_mi_gten(m, vin, n), DY, Y, 1);
                break;
            }
            rc = ops->relu_backward(be, DY, DY, Y, 0);   /* mask dy in place ... */
            if (!rc && m->vgrad[vin] < 0 && din == dout)
                grad_hand_over(m, vin, vout);             /* ... and hand it over */
            else if (!rc)
                rc = grad_contrib(m, vin, n, DY);
            break;
        }
        case FP_LAYER_MAXPOOL:
        case FP_LAYER_AVGPOOL: {
            if (!in_grad)
                break;
            if (fp_mi_grad_target(m, vin, n, &DX, &acc))
                return FP_ENOMEM;
            if (nd->info.type == FP_LAYER_MAXPOOL)
                rc = ops->maxpool_backward(be, DX, DY, (const int *)pl->aux + nd->aux, &nd->pool, acc);
            else
                rc = ops->avgpool_backward(be, DX, DY, acc);
            break;
        }
        case FP_LAYER_LINEAR: {
            int fin = (int)dims_floats(nd->info.in), fout = nd->info.out.c;
            fp_dims wd = {fout, 1, 1, fin}, bd = {1, 1, 1, fout};
            fp_tensor w = fp_tensor_of(W + nd->pw, FP_DT_F32, wd);
            PROBE_BEGIN(FP_PHASE_BACKWARD_WEIGHTS);
            rc = ops->linear_backward_weights(be, fp_tensor_of(G + nd->pw, FP_DT_F32, wd),
                                              fp_tensor_of(G + nd->pb, FP_DT_F32, bd), DY, X, w, cdt);
            PROBE_END(FP_PHASE_BACKWARD_WEIGHTS);
            if (!rc && in_grad) {
                PROBE_BEGIN(FP_PHASE_BACKWARD_DATA);
                if (fp_mi_grad_target(m, vin, n, &DX, &acc))
                    return FP_ENOMEM;
                rc = ops->linear_backward_data(be, DX, DY, w, cdt, acc);
                PROBE_END(FP_PHASE_BACKWARD_DATA);
            }
            break;
        }
        case FP_LAYER_ADD: {
            int vb = nd->in2;
            if (m->values[vb].producer >= 0)
                rc = grad_contrib(m, vb, n, DY);
            if (!in_grad || rc)
                break;
            if (m->vgrad[vin] < 0 && din == dout)   /* hand dy over */
                grad_hand_over(m, vin, vout);
            else
                rc = grad_contrib(m, vin, n, DY);
            break;
        }
        default:
            rc = fp_fail(FP_EINTERNAL, "model: bad node type");
        }
        if (!split)
            PROBE_END(FP_PHASE_BACKWARD_DATA);
        if ((want & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD)) && nd->info.params && !rc)   /* accumulated, scaled */
            fp_mi_probe_value(m, G + nd->pw, FP_DT_F32, nd->info.params, i, FP_ROLE_WEIGHT_GRAD);
        if (rc)
            fp_mi_relabel(rc, m->name, "backward of", nd->info.name);
        else
            rc = fp_mi_grads_ready(m, i);   /* data parallel: its bucket may go now (the hook's message as it is) */
        fp_mi_grad_release(m, vout);
    }
#undef PROBE_BEGIN
#undef PROBE_END
    for (int v = 0; v < m->nvalues; v++)
        fp_mi_grad_release(m, v);
    if (ops->set_label)
        ops->set_label(be, NULL);
    if (!rc && m->pol.master != FP_DT_F32 && !m->grad_ready)   /* `half`: parameter gradients are fp16 tensors */
        rc = ops->round(be, flat32(G, m->nparams), flat32(G, m->nparams), m->pol.master);
    if (devmem(m))
        m->stale |= FP_MI_HOST_G;   /* the gradients moved on the device */
    fp_mi_note_peaks(m);
    return rc;
}

/* A backend buffer of at least count floats in *buf (grown; contents not kept). */
static int ensure_floats(fp_model *m, float **buf, size_t *cap, size_t count, const char *what)
{
    if (*cap >= count)
        return FP_OK;
    void *p = NULL;
    if (m->ops->set_label)
        m->ops->set_label(m->be, what);
    int rc = m->ops->alloc(m->be, &p, count * sizeof(float));
    if (m->ops->set_label)
        m->ops->set_label(m->be, NULL);
    if (rc)
        return rc == FP_ENOMEM ? rc : fp_fail(rc, "model %s: out of memory for %s", m->name, what);
    m->ops->free(m->be, *buf, *cap * sizeof(float));
    *buf = p;
    *cap = count;
    return FP_OK;
}

int fp_model_backward(fp_model *m, const float *dlogits)
{
    if (!m || !dlogits || !devmem(m))
        return fp_mi_backward(m, dlogits);
    if (!m->fwd_ok)
        return fp_mi_backward(m, dlogits);   /* its message */
    size_t need = (size_t)m->last_n * (size_t)m->num_classes;   /* host dlogits go over first */
    int rc = ensure_floats(m, &m->dlogits, &m->dlogits_cap, need, "dlogits");
    rc = rc ? rc : m->ops->upload(m->be, m->dlogits, dlogits, need * sizeof(float));
    return rc ? rc : fp_mi_backward(m, m->dlogits);
}

int fp_model_forward_loss(fp_model *m, float *loss, int *correct1, int *correct5, const float *x, const int *labels,
                          int n, float loss_scale)
{
    const float *logits;
    int rc = fp_mi_forward(m, &logits, x, n, FP_MODE_TRAIN);
    if (rc)
        return rc;
    m->fwd_ok = 0;   /* until the loss gradient is in place */
    size_t need = (size_t)n * m->num_classes;
    if ((rc = ensure_floats(m, &m->dlogits, &m->dlogits_cap, need, "dlogits")))
        return rc;
    const int *lab = labels;
    if (devmem(m) && labels) {   /* labels go over to the device */
        if (m->dlabels_cap < (size_t)n) {
            void *p = NULL;
            if ((rc = m->ops->alloc(m->be, &p, (size_t)n * sizeof(int))))
                return rc;
            m->ops->free(m->be, m->dlabels, m->dlabels_cap * sizeof(int));
            m->dlabels = p;
            m->dlabels_cap = (size_t)n;
        }
        if ((rc = m->ops->upload(m->be, m->dlabels, labels, (size_t)n * sizeof(int))))
            return rc;
        lab = m->dlabels;
    }
    fp_dims ld = {n, 1, 1, m->num_classes};
    float l = 0;   /* scaler.scale(loss).backward(): d(loss * s)/dlogits, in fp32 */
    rc = m->ops->softmax_xent(m->be, &l, fp_tensor_of(m->dlogits, FP_DT_F32, ld), correct1, correct5,
                              fp_tensor_of((void *)logits, FP_DT_F32, ld), lab, loss_scale);
    if (rc)
        return rc;
    if (loss)
        *loss = l;
    m->fwd_ok = 1;
    return FP_OK;
}

int fp_model_backward_loss(fp_model *m)
{
    if (!m || !m->fwd_ok || !m->dlogits)
        return fp_fail(FP_EINVAL, "model %s: backward_loss needs forward_loss first", m ? m->name : "?");
    return fp_mi_backward(m, m->dlogits);
}

int fp_model_train_step_scaled(fp_model *m, float *loss, int *correct1, int *correct5, const float *x,
                               const int *labels, int n, float loss_scale)
{
    int rc = fp_model_forward_loss(m, loss, correct1, correct5, x, labels, n, loss_scale);
    return rc ? rc : fp_model_backward_loss(m);
}

int fp_model_train_step(fp_model *m, float *loss, int *correct1, int *correct5, const float *x, const int *labels,
                        int n)
{
    return fp_model_train_step_scaled(m, loss, correct1, correct5, x, labels, n, 1.0f);
}
