/* model_sync_bn.c — the model's synchronised batchnorm (model.h fp_model_set_bn_reduce, --sync-bn): a TRAIN
 * batchnorm's statistics and its backward's sums summed over the ranks through the caller's reduce hook,
 * between the backend's bn_sync_* ops. Promise: with a hook that sums the shards of one batch, the forward,
 * the saved and running statistics, dx, and the sum of the shards' dgamma / dbeta equal plain batchnorm over
 * the whole batch up to summation order; the model itself knows nothing of ranks. */
#include "trainer/model_internal.h"

void fp_model_set_bn_reduce(fp_model *m, fp_model_bn_reduce_fn fn, void *ctx)
{
    m->bn_reduce = fn;
    m->bn_reduce_ctx = fn ? ctx : NULL;
}

void fp_mi_sync_bn_release(fp_model *m)
{
    if (m->sync_acc)
        m->ops->free(m->be, m->sync_acc, m->sync_acc_cap * sizeof(float));
    m->sync_acc = NULL;
    m->sync_acc_cap = 0;
}

/* Two sums vectors of 2c + 1 floats each for a batchnorm of c channels (backend memory, sized once for the
 * widest batchnorm of the model, so that no queued op ever reads a freed block), or NULL. The next layer may
 * reuse them at once: the CPU reduces synchronously, a device backend in stream order. */
static float *sums(fp_model *m, int c)
{
    size_t need = 2 * (2 * (size_t)c + 1);
    if (m->sync_acc_cap >= need)
        return m->sync_acc;
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].info.type == FP_LAYER_BN && 2 * (2 * (size_t)m->nodes[i].info.in.c + 1) > need)
            need = 2 * (2 * (size_t)m->nodes[i].info.in.c + 1);
    fp_mi_sync_bn_release(m);
    void *p = NULL;
    if (m->ops->alloc(m->be, &p, need * sizeof(float)))
        return NULL;
    m->sync_acc = p;
    m->sync_acc_cap = need;
    return p;
}

static int have_ops(const fp_model *m)
{
    const fp_backend_ops *o = m->ops;
    if (o->bn_sync_stats && o->bn_sync_forward && o->bn_sync_backward_sums && o->bn_sync_backward_dx)
        return FP_OK;
    return fp_fail(FP_EUNAVAIL, "model %s: the %s backend has no synchronised batchnorm (--sync-bn)", m->name,
                   o->name);
}

static fp_tensor acc_view(float *p, int c)
{
    return fp_tensor_of(p, FP_DT_F32, (fp_dims){1, 1, 1, 2 * c + 1});
}

static int reduce(fp_model *m, fp_tensor acc)
{
    return m->bn_reduce(m->bn_reduce_ctx, acc.p, fp_tensor_count(&acc));
}

/* The model's sums for c channels with the backend's sync-bn ops present: NULL with *rc the failure. */
static float *sums_ready(fp_model *m, int c, int *rc)
{
    float *s = NULL;
    if ((*rc = have_ops(m)) == FP_OK && !(s = sums(m, c)))
        *rc = fp_fail(FP_ENOMEM, "model %s: out of memory (synchronised batchnorm)", m->name);
    return s;
}

/* Pass 1: this rank's sums -> the global sum and count; pass 2: the sums centred on that global mean -> the
 * global centred sums (the two-pass variance, without the cancellation of sum(x^2) - N mean^2 in fp32). */
int fp_mi_sync_bn_forward(fp_model *m, const node_t *nd, fp_tensor y, fp_tensor save, fp_tensor rm, fp_tensor rv,
                          fp_tensor x, fp_tensor gamma, fp_tensor beta)
{
    int c = x.d.c, rc;
    float *s = sums_ready(m, c, &rc);
    if (!s)
        return rc;
    const fp_backend_ops *o = m->ops;
    fp_tensor a1 = acc_view(s, c), a2 = acc_view(s + 2 * c + 1, c), none = {0};
    rc = o->bn_sync_stats(m->be, a1, x, none);
    rc = rc ? rc : reduce(m, a1);
    rc = rc ? rc : o->bn_sync_stats(m->be, a2, x, a1);
    rc = rc ? rc : reduce(m, a2);
    return rc ? rc : o->bn_sync_forward(m->be, y, save, rm, rv, x, gamma, beta, a1, a2, &nd->bn);
}

/* This rank's sum dy and sum dy * xhat (dgamma and dbeta from them), summed over the ranks for dx. A layer
 * whose input needs no gradient (dx skipped) reduces nothing; every rank skips the same layers. */
int fp_mi_sync_bn_backward(fp_model *m, fp_tensor dx, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy, fp_tensor x,
                           fp_tensor gamma, fp_tensor save, int accumulate)
{
    int c = x.d.c, rc;
    float *s = sums_ready(m, c, &rc);
    if (!s)
        return rc;
    const fp_backend_ops *o = m->ops;
    fp_tensor acc = acc_view(s, c);
    rc = o->bn_sync_backward_sums(m->be, acc, dgamma, dbeta, dy, x, save);
    if (rc || !dx.p)
        return rc;
    rc = reduce(m, acc);
    return rc ? rc : o->bn_sync_backward_dx(m->be, dx, dy, x, gamma, save, acc, accumulate);
}
