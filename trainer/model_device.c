/* model_device.c — the model on any backend of backend.h, device ones (host_memory 0) included: moving a
 * built model onto a backend (fp_model_set_backend), backend-memory copies of parameters, gradients and
 * running statistics with host mirrors synchronised lazily (the model.h accessors download what the
 * device changed and mark what the host may write), and explicit fp_model_sync_to_host / _to_device.
 * Promises: on a host backend nothing is copied and every pointer is the host buffer itself; at a sampling
 * step a device tensor that the probes take as a histogram is counted on the device (only the counts come
 * back), one an in-place probe backend takes is handed over where it lies, any other is downloaded; handing the
 * device parameters out for writing (fp_model_backend_params) registers the CUDA backend's 16-bit weight copy
 * for the optimizer to write, and marks it stale, read-only views (fp_model_backend_params_view) mark nothing;
 * fp_model_mirror_params copies device to device. */
#include "config.h"
#include "trainer/model_internal.h"
#ifdef HAVE_CUDA
#include "trainer/backend_cuda.h"
#endif

#define HOST_ALL (FP_MI_HOST_P | FP_MI_HOST_G | FP_MI_HOST_B)
#define DEV_ALL (FP_MI_DEV_P | FP_MI_DEV_G | FP_MI_DEV_B)

static void set_label(fp_model *m, const char *label)
{
    if (m->ops->set_label)
        m->ops->set_label(m->be, label);
}

int fp_mi_to_host(fp_model *m, unsigned bits)
{
    if (!devmem(m))
        return FP_OK;
    bits &= m->stale & HOST_ALL;
    if (!bits)
        return FP_OK;
    const fp_backend_ops *o = m->ops;
    int rc = FP_OK;
    if (bits & FP_MI_HOST_P)
        rc = o->download(m->be, m->params, m->dparams, m->nparams * sizeof(float));
    if (!rc && (bits & FP_MI_HOST_G))
        rc = o->download(m->be, m->grads, m->dgrads, m->nparams * sizeof(float));
    if (!rc && (bits & FP_MI_HOST_B))
        rc = o->download(m->be, m->buffers, m->dbuffers, m->nbuffers * sizeof(float));
    rc = rc ? rc : o->sync(m->be);
    if (rc)
        return rc;
    m->stale &= ~bits;
    return FP_OK;
}

int fp_mi_to_device(fp_model *m)
{
    if (!devmem(m))
        return FP_OK;
    unsigned bits = m->stale & DEV_ALL;
    const fp_backend_ops *o = m->ops;
    int rc = FP_OK;
    if (bits & FP_MI_DEV_P)
        rc = o->upload(m->be, m->dparams, m->params, m->nparams * sizeof(float));
    if (!rc && (bits & FP_MI_DEV_G))
        rc = o->upload(m->be, m->dgrads, m->grads, m->nparams * sizeof(float));
    if (!rc && (bits & FP_MI_DEV_B))
        rc = o->upload(m->be, m->dbuffers, m->buffers, m->nbuffers * sizeof(float));
    if (!rc)
        m->stale &= ~bits;
    return rc;
}

void fp_mi_release_backend_memory(fp_model *m)
{
    const fp_backend_ops *o = m->ops;
    for (int p = 0; p < 2; p++)
        fp_mi_plan_free(m, &m->plan[p]);
    for (int i = 0; i < m->ngb; i++)
        o->free(m->be, m->gb[i].p, m->gb[i].cap);
    m->ngb = 0;
    m->gb_bytes = 0;
    o->free(m->be, m->dlogits, m->dlogits_cap * sizeof(float));
    o->free(m->be, m->wlow, m->nparams * sizeof(float));
    o->free(m->be, m->logits32, m->logits32_cap * sizeof(float));
    o->free(m->be, m->dlabels, m->dlabels_cap * sizeof(int));
    fp_mi_sync_bn_release(m);
    m->dlogits = m->wlow = m->logits32 = NULL;
    m->dlabels = NULL;
    m->dlogits_cap = m->logits32_cap = m->dlabels_cap = 0;
    if (devmem(m)) {
        o->free(m->be, m->dparams, m->nparams * sizeof(float));
        o->free(m->be, m->dgrads, m->nparams * sizeof(float));
        o->free(m->be, m->dbuffers, m->nbuffers * sizeof(float));
    }
    m->dparams = m->params;
    m->dgrads = m->grads;
    m->dbuffers = m->buffers;
    m->blogits = NULL;
    m->fwd_ok = 0;
    m->stale = 0;
}

/* Allocates and fills the backend copies of a device backend. */
static int place(fp_model *m)
{
    const fp_backend_ops *o = m->ops;
    void *p = NULL, *g = NULL, *b = NULL;
    int rc;
    set_label(m, "parameters");
    if ((rc = o->alloc(m->be, &p, (m->nparams ? m->nparams : 1) * sizeof(float))))
        return rc;
    m->dparams = p;
    set_label(m, "parameter gradients");
    if ((rc = o->alloc(m->be, &g, (m->nparams ? m->nparams : 1) * sizeof(float))))
        return rc;
    m->dgrads = g;
    set_label(m, "running statistics");
    if ((rc = o->alloc(m->be, &b, (m->nbuffers ? m->nbuffers : 1) * sizeof(float))))
        return rc;
    m->dbuffers = b;
    set_label(m, NULL);
    m->stale = DEV_ALL;
    return fp_mi_to_device(m);
}

/* Drops the backend (its memory and instance) and takes ops / be. */
static void swap_backend(fp_model *m, const fp_backend_ops *ops, fp_backend *be)
{
    fp_mi_release_backend_memory(m);
    m->ops->destroy(m->be);
    m->ops = ops;
    m->be = be;
    ops->set_threads(be, m->threads);
}

int fp_model_set_backend(fp_model *m, const fp_backend_ops *ops, fp_backend *be)
{
    if (!m || !m->finished || !ops) {
        if (ops && be)
            ops->destroy(be);
        return fp_fail(FP_EINVAL, "model: set_backend needs a finished model and a backend");
    }
    int rc = fp_mi_to_host(m, HOST_ALL);   /* every value current on the host first */
    if (rc) {
        if (be)
            ops->destroy(be);
        return rc;
    }
    if (!be && (rc = ops->create(&be)))
        return rc;   /* the model stays where it was */
    swap_backend(m, ops, be);
    if (m->params != m->own_params) {   /* a shared parameter buffer becomes this model's own copy */
        memcpy(m->own_params, m->params, m->nparams * sizeof(float));
        m->params = m->dparams = m->own_params;
    }
    if (devmem(m))
        rc = place(m);
    if (!rc) {
        fp_policy pol = m->pol;   /* the weight copy and staging on the new backend */
        rc = fp_model_set_policy(m, &pol);
    }
    if (rc) {   /* back onto the CPU, keeping the message */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", fp_error_message());
        fp_backend *cpu = NULL;
        if (fp_backend_cpu()->create(&cpu) == FP_OK) {
            swap_backend(m, fp_backend_cpu(), cpu);
            fp_policy pol = m->pol;
            fp_model_set_policy(m, &pol);
        }
        return fp_fail(rc, "model %s: moving onto backend %s: %s", m->name, ops->name, msg);
    }
    return FP_OK;
}

const fp_backend_ops *fp_model_backend_ops(const fp_model *m) { return m->ops; }
fp_backend *fp_model_backend(const fp_model *m) { return m->be; }

int fp_model_sync_to_host(fp_model *m)
{
    return m ? fp_mi_to_host(m, HOST_ALL) : fp_fail(FP_EINVAL, "model: sync of NULL");
}

int fp_model_sync_to_device(fp_model *m)
{
    return m ? fp_mi_to_device(m) : fp_fail(FP_EINVAL, "model: sync of NULL");
}

/* The CUDA backend's 16-bit weight copy (backend_cuda.h): kept for the weights the conv / linear ops receive
 * (the weight copy wlow, when compute is 16-bit) and the master weights, for the optimizer to write; the
 * caller of fp_model_backend_params writes the master weights, so it is invalid until the optimizer says
 * it wrote it (fp_backend_cuda_weight_copy_written). Without a 16-bit compute format there is none. */
#ifdef HAVE_CUDA
static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}
#endif

static int weight_copy(fp_model *m)
{
#ifdef HAVE_CUDA
    if (m->ops != fp_backend_cuda())
        return FP_OK;
    fp_backend_cuda_weight_copy_invalidate(m->be);
    if (!m->wlow || !is16(m->pol.compute) || !m->nparams)
        return fp_backend_cuda_weight_copy(m->be, NULL, NULL, 0, FP_DT_F32, NULL, 0);
    size_t nt = fp_model_tensor_count(m), ns = 0;
    size_t *starts = malloc((nt + 1) * sizeof *starts);
    if (!starts)
        return fp_fail(FP_ENOMEM, "model %s: out of memory", m->name);
    starts[ns++] = 0;   /* every parameter tensor's offset, ascending (the copy aligns each) */
    for (size_t i = 0; i < nt; i++) {
        const fp_tensor_info *t = fp_model_tensor(m, i);
        if (t->is_param && t->offset > 0 && t->offset < m->nparams)
            starts[ns++] = t->offset;
    }
    qsort(starts, ns, sizeof *starts, cmp_size);
    size_t k = 1;   /* distinct */
    for (size_t i = 1; i < ns; i++)
        if (starts[i] != starts[k - 1])
            starts[k++] = starts[i];
    int rc = fp_backend_cuda_weight_copy(m->be, m->wlow, m->dparams, m->nparams, m->pol.compute, starts, k);
    free(starts);
    return rc;
#else
    (void)m;
    return FP_OK;
#endif
}

float *fp_model_backend_params(fp_model *m)
{
    if (fp_mi_to_device(m))
        return NULL;
    if (devmem(m))
        m->stale |= FP_MI_HOST_P;
    if (devmem(m) && weight_copy(m))
        return NULL;
    return m->dparams;
}

float *fp_model_backend_grads(fp_model *m)
{
    if (fp_mi_to_device(m))
        return NULL;
    if (devmem(m))
        m->stale |= FP_MI_HOST_G;
    return m->dgrads;
}

float *fp_model_backend_buffers(fp_model *m)
{
    if (fp_mi_to_device(m))
        return NULL;
    if (devmem(m))
        m->stale |= FP_MI_HOST_B;
    return m->dbuffers;
}

/* ---------------------------------------------------------------- host accessors (model.h) */

static float *host_part(fp_model *m, unsigned host_bit, unsigned dev_bit, float *p)
{
    if (!devmem(m))
        return p;
    if (fp_mi_to_host(m, host_bit))
        return NULL;
    m->stale |= dev_bit;   /* the caller may write: upload before the device reads again */
    return p;
}

float *fp_model_params(fp_model *m) { return host_part(m, FP_MI_HOST_P, FP_MI_DEV_P, m->params); }
float *fp_model_grads(fp_model *m) { return host_part(m, FP_MI_HOST_G, FP_MI_DEV_G, m->grads); }
float *fp_model_buffers(fp_model *m) { return host_part(m, FP_MI_HOST_B, FP_MI_DEV_B, m->buffers); }

float *fp_model_tensor_data(fp_model *m, const fp_tensor_info *t)
{
    float *base = t->is_param ? fp_model_params(m) : fp_model_buffers(m);
    return base ? base + t->offset : NULL;
}

float *fp_model_tensor_grad(fp_model *m, const fp_tensor_info *t)
{
    if (!t->is_param)
        return NULL;
    float *g = fp_model_grads(m);
    return g ? g + t->offset : NULL;
}

/* On a device backend only the device copy is cleared and the host mirror marked stale (downloaded if the
 * host reads it): clearing ResNet-50's 100 MB host mirror every step was host work the GPU waited for. */
void fp_model_zero_grad(fp_model *m)
{
    if (devmem(m) && m->ops->zero(m->be, m->dgrads, m->nparams * sizeof(float)) == FP_OK) {
        m->stale = (m->stale & ~(unsigned)FP_MI_DEV_G) | FP_MI_HOST_G;
        return;
    }
    memset(m->grads, 0, m->nparams * sizeof(float));
    if (devmem(m))
        m->stale = (m->stale & ~(unsigned)FP_MI_HOST_G) | FP_MI_DEV_G;   /* upload the zeros */
}

/* ---------------------------------------------------------------- probes */

/* A tensor x (cnt values of storage format d, backend memory) to probe pr as (layer, role): where it lies to the
 * in-place backends when `in_place` has the role; counted by the hist op when no backend needs it as `values`;
 * else downloaded (device) and handed as values. */
static int probe_value(fp_model *m, fp_probe *pr, unsigned in_place, unsigned values, const void *p, fp_dtype d,
                       size_t cnt, int layer, fp_tensor_role role)
{
    fp_dtype sd = is16(d) ? d : FP_DT_F32;
    const unsigned bit = FP_PROBE_ROLE_BIT(role);
    if (in_place & bit) {   /* where it lies: nothing comes over for these */
        fp_probe_mem mem = {m->ops, m->be, m->ops->host_memory};
        fp_probe_tensor_in_place(pr, layer, role, p, sd, cnt, &mem);
        if (!(fp_probe_wants_copies(pr) & bit))
            return FP_OK;
    }
    if (devmem(m) && m->ops->hist && !(values & bit)) {
        fp_hist_t h;   /* every probe that wants it takes counts: histogrammed where it lies */
        fp_hist_init(&h);
        if (m->ops->hist(m->be, &h, p, sd, cnt) == FP_OK)
            return fp_probe_tensor_hist(pr, layer, role, &h);
        /* the device could not count it (no memory for the counters): the values come over as before */
    }
    if (devmem(m)) {   /* a sampling step: the tensor comes over to the host staging */
        size_t bytes = cnt * (size_t)fp_dtype_bytes(sd);
        if (m->probe_host_cap < bytes) {
            void *q = realloc(m->probe_host, bytes);
            if (!q)   /* nothing recorded rather than a made-up value */
                return fp_fail(FP_ENOMEM, "model %s: out of memory for a probe's tensor (%zu bytes)", m->name, bytes);
            m->probe_host = q;
            m->probe_host_cap = bytes;
        }
        int rc = m->ops->download(m->be, m->probe_host, p, bytes);
        if (rc || (rc = m->ops->sync(m->be)))
            return rc;
        p = m->probe_host;
    }
    return fp_probe_tensor_dt(pr, layer, role, p, sd, cnt);
}

void fp_mi_probe_value(fp_model *m, const void *p, fp_dtype d, size_t cnt, int layer, fp_tensor_role role)
{
    probe_value(m, m->probe, fp_probe_wants_in_place(m->probe), fp_probe_wants_values(m->probe), p, d, cnt, layer,
                role);
}

int fp_model_probe_backend(fp_model *m, fp_probe *p, int layer, int role, const float *x, size_t cnt)
{
    if (!m || (!x && cnt))
        return fp_fail(FP_EINVAL, "model: probe_backend of %s", m ? "a NULL tensor" : "a NULL model");
    return probe_value(m, p, 0, fp_probe_wants_values_all(p), x, FP_DT_F32, cnt, layer, (fp_tensor_role)role);
}

const float *fp_model_backend_params_view(fp_model *m) { return fp_mi_to_device(m) ? NULL : m->dparams; }
const float *fp_model_backend_grads_view(fp_model *m) { return fp_mi_to_device(m) ? NULL : m->dgrads; }

/* ---------------------------------------------------------------- device to device (model.h) */

int fp_model_forward_queued(fp_model *m, const float *x, int n, fp_mode mode)
{
    return fp_mi_forward(m, NULL, x, n, mode);
}

int fp_model_mirror_params(fp_model *dst, fp_model *src)
{
    if (!dst || !src || dst->nparams != src->nparams || dst->nbuffers != src->nbuffers || dst->nnodes != src->nnodes)
        return fp_fail(FP_EINVAL, "model: mirror_params between different architectures");
    if (!devmem(dst) || !devmem(src) || dst->ops != src->ops)
        return fp_fail(FP_EINVAL, "model %s: mirror_params needs both models on devices of one backend", dst->name);
    const fp_backend_ops *o = dst->ops;
    int rc = fp_mi_to_device(src);   /* what the host wrote into src's mirrors */
    rc = rc ? rc : src->ops->sync(src->be);   /* src's stream has written them (another stream reads now) */
    rc = rc ? rc : o->copy(dst->be, dst->dparams, src->dparams, dst->nparams * sizeof(float));
    rc = rc ? rc : o->copy(dst->be, dst->dbuffers, src->dbuffers, dst->nbuffers * sizeof(float));
    if (!rc && dst->pol.master != FP_DT_F32 && dst->nparams)   /* `half`: the parameters are fp16 values */
        rc = o->round(dst->be, flat32(dst->dparams, dst->nparams), flat32(dst->dparams, dst->nparams), dst->pol.master);
    if (!rc && dst->pol.master != FP_DT_F32 && dst->nbuffers)
        rc = o->round(dst->be, flat32(dst->dbuffers, dst->nbuffers), flat32(dst->dbuffers, dst->nbuffers),
                      dst->pol.master);
    if (rc)
        return rc;
    dst->stale = (dst->stale & ~(unsigned)(FP_MI_DEV_P | FP_MI_DEV_B)) | FP_MI_HOST_P | FP_MI_HOST_B;
    return FP_OK;
}

/* Bytes of backend memory a copy of m on a device backend holds for TRAIN forwards of n images under its
 * policy (parameters, gradient buffer, running statistics, the weight copy, the TRAIN plan with every storage
 * apart, its aux area, the staging of 16-bit tensors and the fp32 logits), half as much again for alignment,
 * staging slots not counted here and the backend's own small buffers, plus 32 MiB; an upper bound. */
size_t fp_model_device_bytes(const fp_model *m, int n)
{
    if (!m || n < 1)
        return 0;
    size_t b = m->nparams * sizeof(float) * (m->pol.compute != FP_DT_F32 ? 3 : 2) + m->nbuffers * sizeof(float);
    size_t maxf = 0, wmax = 0;
    for (int s = 0; s < m->nstorages; s++) {
        size_t f = m->storages[s].floats * (size_t)n;
        b += (f * (size_t)m->storages[s].bytes + 255) / 256 * 256;
        if (f > maxf)
            maxf = f;
    }
    for (int i = 0; i < m->nnodes; i++) {
        const node_t *nd = &m->nodes[i];
        if (nd->info.type == FP_LAYER_BN)
            b += 2 * (size_t)nd->info.in.c * sizeof(float);
        else if (nd->info.type == FP_LAYER_MAXPOOL)
            b += dims_floats(nd->info.out) * (size_t)n * sizeof(int);
        if (nd->info.params > wmax)
            wmax = nd->info.params;
    }
    if (m->lowp || m->pol.compute != FP_DT_F32)
        b += 3 * maxf * sizeof(float) + wmax * sizeof(float);
    b += (size_t)n * (size_t)(m->num_classes > 0 ? m->num_classes : 1) * sizeof(float);
    return b + b / 2 + ((size_t)32 << 20);
}
