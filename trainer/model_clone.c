/* model_clone.c — a new model of the same architecture (fp_model_clone; fp_model_clone_to: on a backend of the
 * caller's), parameter copies between models of one architecture (fp_model_copy_params) and read-only sharing
 * (fp_model_share_params). Promises: the clone has the same nodes, names and values; policy fp32, no probe, on
 * the CPU backend (clone_to: on the given one, with a device source's values copied device to device); device
 * mirrors are synchronised first (sharing with a device model copies). */
#include "trainer/model_internal.h"

/* A model with m's nodes (names, shapes), finished, on the CPU backend, policy fp32; its parameters as the
 * build leaves them. */
static int build_like(fp_model **out, const fp_model *m)
{
    *out = NULL;
    if (!m || !m->finished)
        return fp_fail(FP_EINVAL, "model: clone of an unfinished model");
    fp_model *c = NULL;
    fp_dims in = m->values[0].d;
    int rc = fp_model_build_begin(&c, m->name, in.h, in.w, in.c);
    if (rc)
        return rc;
    for (int i = 0; i < m->nnodes; i++) {   /* node i produces value i + 1 in both models */
        const node_t *nd = &m->nodes[i];
        const char *nm = nd->info.name;
        switch (nd->info.type) {
        case FP_LAYER_CONV:
            fp_model_add_conv(c, nm, nd->in, nd->conv.cout, nd->conv.kh, nd->conv.stride, nd->conv.pad);
            break;
        case FP_LAYER_BN: fp_model_add_bn(c, nm, nd->in); break;
        case FP_LAYER_RELU: fp_model_add_relu(c, nm, nd->in); break;
        case FP_LAYER_MAXPOOL: fp_model_add_maxpool(c, nm, nd->in, nd->pool.k, nd->pool.stride, nd->pool.pad); break;
        case FP_LAYER_AVGPOOL: fp_model_add_avgpool(c, nm, nd->in); break;
        case FP_LAYER_LINEAR: fp_model_add_linear(c, nm, nd->in, nd->info.out.c); break;
        case FP_LAYER_ADD: fp_model_add_add(c, nm, nd->in, nd->in2); break;
        default: break;
        }
    }
    rc = fp_model_build_finish(c);
    if (!rc && (c->nparams != m->nparams || c->nbuffers != m->nbuffers || c->nnodes != m->nnodes))
        rc = fp_fail(FP_EINTERNAL, "model %s: clone differs from the original", m->name);
    if (rc) {
        fp_model_free(c);
        return rc;
    }
    fp_model_set_threads(c, m->threads);
    *out = c;
    return FP_OK;
}

int fp_model_clone(fp_model **out, const fp_model *m)
{
    int rc = build_like(out, m);
    if (!rc)
        fp_model_copy_params(*out, m, 1);
    return rc;
}

int fp_model_clone_to(fp_model **out, fp_model *m, const fp_policy *policy, const fp_backend_ops *ops, fp_backend *be)
{
    *out = NULL;
    fp_model *c = NULL;
    int rc = ops ? build_like(&c, m) : fp_fail(FP_EINVAL, "model: clone onto no backend");
    if (rc) {
        if (ops && be)
            ops->destroy(be);
        return rc;
    }
    int d2d = m->ops == ops && devmem(m);   /* else through m's host mirrors, as fp_model_clone */
    rc = d2d ? FP_OK : fp_model_copy_params(c, m, 1);
    rc = rc ? rc : fp_model_set_policy(c, policy);
    if (!rc)
        rc = fp_model_set_backend(c, ops, be);   /* takes be over, also when it fails */
    else if (be)
        ops->destroy(be);
    rc = rc ? rc : d2d ? fp_model_mirror_params(c, m) : FP_OK;
    if (rc) {
        fp_model_free(c);
        return rc;
    }
    *out = c;
    return FP_OK;
}

int fp_model_copy_params(fp_model *dst, const fp_model *m, int with_buffers)
{
    if (!dst || !m || dst->nparams != m->nparams || dst->nbuffers != m->nbuffers || dst->nnodes != m->nnodes)
        return fp_fail(FP_EINVAL, "model: copy_params between different architectures");
    /* the source's device copies (if any) are current on the host first: its mirrors are part of its value */
    int rc = fp_mi_to_host((fp_model *)m, FP_MI_HOST_P | (with_buffers ? FP_MI_HOST_B : 0u));
    if (rc || (rc = fp_mi_to_host(dst, with_buffers ? 0u : FP_MI_HOST_B)))
        return rc;
    dst->params = dst->own_params;
    if (!devmem(dst))
        dst->dparams = dst->params;
    memcpy(dst->params, m->params, m->nparams * sizeof(float));
    if (with_buffers)
        memcpy(dst->buffers, m->buffers, m->nbuffers * sizeof(float));
    if (devmem(dst))
        dst->stale = (dst->stale & ~(unsigned)(FP_MI_HOST_P | FP_MI_HOST_B)) | FP_MI_DEV_P |
                     (with_buffers ? FP_MI_DEV_B : 0u);
    return FP_OK;
}

int fp_model_share_params(fp_model *dst, fp_model *src)
{
    if (!dst || !src || dst->nparams != src->nparams || dst->nbuffers != src->nbuffers || dst->nnodes != src->nnodes)
        return fp_fail(FP_EINVAL, "model: share_params between different architectures");
    if (dst->pol.master != FP_DT_F32)
        return fp_fail(FP_EINVAL, "model %s: policy %s rounds its parameters and cannot share another model's",
                       dst->name, dst->pol.name);
    int rc = fp_mi_to_host(src, FP_MI_HOST_P | FP_MI_HOST_B);
    if (rc)
        return rc;
    if (devmem(dst))   /* a device model keeps its own copy: sharing is a copy there */
        return fp_model_copy_params(dst, src, 1);
    dst->params = dst->dparams = src->params;
    memcpy(dst->buffers, src->buffers, src->nbuffers * sizeof(float));
    return FP_OK;
}
