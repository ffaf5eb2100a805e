/* model_forward.c — forward over the nodes (TRAIN / EVAL), every tensor operation through the backend
 * table (backend.h), with the probe hooks of the forward pass and the layer-output copy for tests.
 * Promises: fp32 results equal to the kernels' composition; 16-bit storage as described in model.h. */
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


/* After layer nd's forward at a sampling step: its output (activation) and its parameters (weight:
 * the fp32 master values, all of the layer's parameters in one tensor). */
static void sample_forward(fp_model *m, int mode, const node_t *nd, int n, unsigned want)
{
    if (want & FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION))
        fp_mi_probe_value(m, vptr(m, mode, nd->out), vdt(m, nd->out), vfloats(m, nd->out, n),
                          nd->info.index, FP_ROLE_ACTIVATION);
    if ((want & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT)) && nd->info.params)
        fp_mi_probe_value(m, m->dparams + nd->pw, FP_DT_F32, nd->info.params, nd->info.index, FP_ROLE_WEIGHT);
}

/* Backend views of a node's parameters (fp32 backend memory; conv / linear weights as computed). */
static fp_tensor conv_w(const float *W, const node_t *nd)
{
    const fp_conv_params *c = &nd->conv;
    return fp_tensor_of((void *)(W + nd->pw), FP_DT_F32, (fp_dims){c->cout, c->kh, c->kw, c->cin});
}
static fp_tensor vec32(float *base, long long off, int c)
{
    return fp_tensor_of(base + off, FP_DT_F32, (fp_dims){1, 1, 1, c});
}

/* BN node nd's normalisation from the caller (fp_model_forward_bn_stats): its input X widened into
 * stats_buf, the caller's mean and variance after it (*mv). FP_ENOMEM, the cast's or the caller's code. */
static int caller_stats(fp_model *m, const node_t *nd, fp_tensor X, int n, const float **mv)
{
    int c = nd->info.in.c;
    size_t rows = (size_t)n * nd->info.in.h * nd->info.in.w, need = rows * (size_t)c + 2 * (size_t)c;
    if (m->stats_cap < need) {
        float *p = realloc(m->stats_buf, need * sizeof *p);
        if (!p)
            return fp_fail(FP_ENOMEM, "model %s: out of memory", m->name);
        m->stats_buf = p;
        m->stats_cap = need;
    }
    float *x = m->stats_buf, *s = x + rows * (size_t)c;
    int rc = m->ops->cast(m->be, fp_tensor_of(x, FP_DT_F32, X.d), X);
    rc = rc ? rc : m->bn_stats(m->bn_stats_ctx, (int)(nd - m->nodes), nd->in - 1, x, rows, c, s, s + c);
    *mv = s;
    return rc;
}

int fp_mi_round_running(fp_model *m, fp_tensor rm, fp_tensor rv)
{
    if (m->pol.master == FP_DT_F32)
        return FP_OK;
    int rc = m->ops->round(m->be, rm, rm, m->pol.master);
    return rc ? rc : m->ops->round(m->be, rv, rv, m->pol.master);
}

int fp_mi_forward(fp_model *m, const float **logits, const float *x, int n, fp_mode mode)
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
        if (m->ops->set_label)
            m->ops->set_label(m->be, mode == FP_MODE_TRAIN ? "activations (train plan)" : "activations (eval plan)");
        int prc = fp_mi_plan_build(m, pl, n, mode);
        if (m->ops->set_label)
            m->ops->set_label(m->be, NULL);
        if (prc)
            return prc;
    }
    const fp_backend_ops *ops = m->ops;
    fp_backend *be = m->be;
    int rc = fp_mi_to_device(m);   /* what host code wrote through the accessors */
    if (rc)
        return rc;
    int lowp = m->lowp || m->pol.compute != FP_DT_F32;
    if (lowp) {   /* staging for the widened tensors, sized once per plan */
        rc = ops->reserve(be, pl->max_floats, 0);
        if (rc)
            return rc;
    }
    rc = ops->upload(be, val(m, mode, 0), x, dims_floats(m->values[0].d) * (size_t)n * sizeof(float));
    if (rc)
        return rc;
    float *W = m->wlow ? m->wlow : m->dparams;   /* conv / linear weights as computed */
    fp_dtype cdt = m->pol.compute;
    fp_probe *pr = m->probe;
    unsigned want = pr && (mode == FP_MODE_TRAIN || m->bn_stats) ? fp_probe_wants(pr) : 0;
    int fuse = fp_mi_fuse_begin(m, mode, want);   /* unsampled TRAIN: fused chains (model_fuse.c) */
    for (int i = 0; i < m->nnodes && rc == FP_OK; i++) {
        int last = fuse ? fp_mi_fuse_forward(m, i, n, &rc) : -1;
        if (last >= 0) {   /* a fused chain ran up to its relu */
            i = last;
            continue;
        }
        node_t *nd = &m->nodes[i];
        fp_tensor X = vten(m, mode, nd->in, n), Y = vten(m, mode, nd->out, n);
        float *P = m->dparams, *B = m->dbuffers;
        int c = nd->info.in.c;
        if (ops->set_label)   /* device backends name the layer in out-of-memory messages */
            ops->set_label(be, nd->info.name);
        if (pr)
            fp_probe_layer_begin(pr, i, FP_PHASE_FORWARD);
        switch (nd->info.type) {
        case FP_LAYER_CONV:   /* the weights as computed rounded now, still in cache for the GEMM */
            rc = fp_mi_prepare_layer_weights(m, nd);
            rc = rc ? rc : ops->conv_forward(be, Y, X, conv_w(W, nd), &nd->conv, cdt);
            break;
        case FP_LAYER_BN:
            if (mode == FP_MODE_TRAIN) {
                fp_tensor save = vec32((float *)pl->aux, (long long)nd->aux, 2 * c);
                fp_tensor rm = vec32(B, nd->brm, c), rv = vec32(B, nd->brv, c);
                fp_tensor gamma = vec32(P, nd->pw, c), beta = vec32(P, nd->pb, c);
                rc = m->bn_reduce ? fp_mi_sync_bn_forward(m, nd, Y, save, rm, rv, X, gamma, beta)   /* --sync-bn */
                                  : ops->bn_forward_train(be, Y, save, rm, rv, X, gamma, beta, &nd->bn);
                rc = rc ? rc : fp_mi_round_running(m, rm, rv);
            } else if (m->bn_stats) {
                const float *mv = NULL;
                rc = caller_stats(m, nd, X, n, &mv);
                rc = rc ? rc : ops->bn_forward_eval(be, Y, X, vec32(P, nd->pw, c), vec32(P, nd->pb, c),
                                                    vec32((float *)mv, 0, c), vec32((float *)mv, c, c), &nd->bn);
            } else {
                rc = ops->bn_forward_eval(be, Y, X, vec32(P, nd->pw, c), vec32(P, nd->pb, c), vec32(B, nd->brm, c),
                                          vec32(B, nd->brv, c), &nd->bn);
            }
            break;
        case FP_LAYER_RELU:
            rc = ops->relu_forward(be, Y, X);
            break;
        case FP_LAYER_MAXPOOL:
            rc = ops->maxpool_forward(be, Y, mode == FP_MODE_TRAIN ? (int *)pl->aux + nd->aux : NULL, X, &nd->pool);
            break;
        case FP_LAYER_AVGPOOL:
            rc = ops->avgpool_forward(be, Y, X);
            break;
        case FP_LAYER_LINEAR: {
            int fin = (int)dims_floats(nd->info.in), fout = nd->info.out.c;
            fp_tensor w = fp_tensor_of(W + nd->pw, FP_DT_F32, (fp_dims){fout, 1, 1, fin});
            rc = fp_mi_prepare_layer_weights(m, nd);
            rc = rc ? rc : ops->linear_forward(be, Y, X, w, vec32(W, nd->pb, fout), cdt);
            break;
        }
        case FP_LAYER_ADD:
            rc = ops->add(be, Y, X, vten(m, mode, nd->in2, n));
            break;
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
    if (ops->set_label)
        ops->set_label(be, NULL);
    fp_mi_note_peaks(m);
    if (rc)
        return rc;
    if (mode == FP_MODE_TRAIN && devmem(m))
        m->stale |= FP_MI_HOST_B;   /* running statistics moved on the device */
    m->last_mode = mode;
    m->last_n = n;
    m->fwd_ok = mode == FP_MODE_TRAIN;
    int last = m->nvalues - 1;
    const float *out = val(m, mode, last);
    if (is16(vdt(m, last))) {   /* autocast's fp32 list: the loss sees the logits widened */
        size_t cnt = vfloats(m, last, n);
        if (m->logits32_cap < cnt) {
            void *p = NULL;
            if (ops->alloc(be, &p, cnt * sizeof(float)))
                return fp_fail(FP_ENOMEM, "model %s: out of memory", m->name);
            ops->free(be, m->logits32, m->logits32_cap * sizeof(float));
            m->logits32 = p;
            m->logits32_cap = cnt;
        }
        fp_tensor L = vten(m, mode, last, n);
        rc = ops->cast(be, fp_tensor_of(m->logits32, FP_DT_F32, L.d), L);
        if (rc)
            return rc;
        out = m->logits32;
    }
    m->blogits = out;
    if (logits)
        *logits = out;   /* backend memory */
    return FP_OK;
}

int fp_model_forward(fp_model *m, const float **logits, const float *x, int n, fp_mode mode)
{
    const float *bl = NULL;
    if (logits)
        *logits = NULL;
    int rc = fp_mi_forward(m, &bl, x, n, mode);
    if (rc || !devmem(m)) {
        if (!rc && logits)
            *logits = bl;   /* host memory (backend.h: host_memory) */
        return rc;
    }
    size_t cnt = (size_t)n * (size_t)m->num_classes;   /* device: the logits come over to the host */
    if (m->logits_host_cap < cnt) {
        float *p = realloc(m->logits_host, cnt * sizeof(float));
        if (!p)
            return fp_fail(FP_ENOMEM, "model %s: out of memory for the logits", m->name);
        m->logits_host = p;
        m->logits_host_cap = cnt;
    }
    rc = m->ops->download(m->be, m->logits_host, bl, cnt * sizeof(float));
    rc = rc ? rc : m->ops->sync(m->be);
    if (!rc && logits)
        *logits = m->logits_host;
    return rc;
}

int fp_model_forward_bn_stats(fp_model *m, const float **logits, const float *x, int n, fp_bn_stats_fn stats,
                              void *ctx)
{
    if (logits)
        *logits = NULL;
    if (!m || !stats)
        return fp_fail(FP_EINVAL, "model: forward with caller statistics: NULL argument");
    if (devmem(m))
        return fp_fail(FP_EINVAL, "model %s: forward with caller statistics needs host memory", m->name);
    m->bn_stats = stats;
    m->bn_stats_ctx = ctx;
    int rc = fp_model_forward(m, logits, x, n, FP_MODE_EVAL);
    m->bn_stats = NULL;
    m->bn_stats_ctx = NULL;
    return rc;
}

int fp_model_bn_batch_stats(const fp_model *m, int layer, float *mean, float *var)
{
    if (!m || layer < 0 || layer >= m->nnodes || m->nodes[layer].info.type != FP_LAYER_BN)
        return fp_fail(FP_EINVAL, "model: layer %d is not a batchnorm", layer);
    if (devmem(m) || m->last_mode != FP_MODE_TRAIN || m->plan[FP_MODE_TRAIN].n == 0)
        return fp_fail(FP_EINVAL, "model %s: no TRAIN forward in host memory to take statistics from", m->name);
    const node_t *nd = &m->nodes[layer];
    int c = nd->info.in.c;
    const float *save = (const float *)m->plan[FP_MODE_TRAIN].aux + nd->aux;   /* mean, 1/sqrt(var + eps) */
    for (int i = 0; i < c; i++) {
        double inv = (double)save[c + i], v = 1.0 / (inv * inv) - (double)nd->bn.eps;
        mean[i] = save[i];
        var[i] = v > 0.0 ? (float)v : 0.0f;
    }
    return FP_OK;
}

int fp_model_layer_output(fp_model *m, int layer, float *dst, size_t cap, fp_dtype *stored)
{
    if (!m || layer < 0 || layer >= m->nnodes || m->plan[m->last_mode].n == 0)
        return fp_fail(FP_EINVAL, "model: no output of layer %d (no forward yet?)", layer);
    if (m->last_mode == FP_MODE_TRAIN && fp_mi_fuse_hidden(m, layer))
        return fp_fail(FP_EINVAL, "model %s: layer %s's output was not written: fused away in the last TRAIN forward "
                       "(a sampled step or fp_model_set_fusion(m, 0) writes it)", m->name, m->nodes[layer].info.name);
    int v = m->nodes[layer].out, n = m->plan[m->last_mode].n;
    size_t cnt = vfloats(m, v, n);
    if (stored)
        *stored = vdt(m, v);
    if (!dst)
        return (int)cnt;
    if (cap < cnt)
        return fp_fail(FP_EINVAL, "model %s: layer %d output has %zu values, buffer %zu", m->name, layer, cnt, cap);
    fp_tensor src = vten(m, m->last_mode, v, n);
    if (!devmem(m)) {   /* host memory (backend.h: host_memory) */
        int rc = m->ops->cast(m->be, fp_tensor_of(dst, FP_DT_F32, src.d), src);
        return rc ? rc : (int)cnt;
    }
    void *tmp = NULL;   /* device: widened there, then downloaded */
    int rc = m->ops->alloc(m->be, &tmp, cnt * sizeof(float));
    if (rc)
        return rc;
    rc = m->ops->cast(m->be, fp_tensor_of(tmp, FP_DT_F32, src.d), src);
    rc = rc ? rc : m->ops->download(m->be, dst, tmp, cnt * sizeof(float));
    rc = rc ? rc : m->ops->sync(m->be);
    m->ops->free(m->be, tmp, cnt * sizeof(float));
    return rc ? rc : (int)cnt;
}
