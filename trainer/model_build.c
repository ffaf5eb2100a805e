/* model_build.c — building the flat node list of model.h: values, storages (in-place relu / add
 * share one), the tensor table (one parameter, gradient and running-stat buffer), build_finish and free.
 * Promises: a sticky first build error; torchvision names; FLOP / MAC counts per layer. */
#include <limits.h>
#include "trainer/model_internal.h"

const char *fp_layer_type_name(fp_layer_type t)
{
    static const char *const names[FP_LAYER_TYPE_COUNT] = {"conv2d", "batchnorm2d", "relu", "maxpool2d",
                                                           "avgpool2d", "linear", "add"};
    return (unsigned)t < FP_LAYER_TYPE_COUNT ? names[t] : "?";
}
/* ---------------------------------------------------------------- building */

static int new_storage(fp_model *m, size_t floats)
{
    void *p = grow(m->storages, &m->cap_storages, m->nstorages + 1, sizeof *m->storages);
    if (!p)
        return -1;
    m->storages = p;
    m->storages[m->nstorages].floats = floats;
    m->storages[m->nstorages].bytes = 4;
    return m->nstorages++;
}

static int new_value(fp_model *m, fp_dims d, int storage, int producer)
{
    void *p = grow(m->values, &m->cap_values, m->nvalues + 1, sizeof *m->values);
    if (!p)
        return -1;
    m->values = p;
    if (storage < 0 && (storage = new_storage(m, dims_floats(d))) < 0)
        return -1;
    value_t *v = &m->values[m->nvalues];
    v->d = d;
    v->d.n = 1;
    v->storage = storage;
    v->producer = producer;
    v->needed_bwd = 0;
    v->dt = FP_DT_F32;
    return m->nvalues++;
}

int fp_model_build_begin(fp_model **out, const char *model_name, int h, int w, int c)
{
    *out = NULL;
    if (h <= 0 || w <= 0 || c <= 0)
        return fp_fail(FP_EINVAL, "model: bad input dims %dx%dx%d", h, w, c);
    fp_model *m = calloc(1, sizeof *m);
    if (!m || !(m->name = dupstr(model_name ? model_name : "model"))) {
        free(m);
        return fp_fail(FP_ENOMEM, "model: out of memory");
    }
    m->threads = 1;
    m->fusion = -1;   /* the backend's default (model_fuse.c) */
    m->ops = fp_backend_cpu();   /* built on the CPU; fp_model_set_backend moves it (model_device.c) */
    if (m->ops->create(&m->be)) {
        fp_model_free(m);
        return fp_fail(FP_ENOMEM, "model: out of memory");
    }
    fp_dims d = {1, h, w, c};
    if (new_value(m, d, -1, -1) != 0) {
        fp_model_free(m);
        return fp_fail(FP_ENOMEM, "model: out of memory");
    }
    *out = m;
    return FP_OK;
}

/* Starts a node reading value `in`; NULL (and the sticky error set) on failure. */
static node_t *begin_node(fp_model *m, const char *name, fp_layer_type type, int in)
{
    if (m->build_err)
        return NULL;
    if (m->finished) {
        m->build_err = fp_fail(FP_EINVAL, "model %s: node '%s' added after build_finish", m->name, name);
        return NULL;
    }
    if (in < 0 || in >= m->nvalues) {
        m->build_err = fp_fail(FP_EINVAL, "model %s: node '%s' reads unknown value %d", m->name, name, in);
        return NULL;
    }
    for (int v = in + 1; v < m->nvalues; v++)
        if (m->values[v].storage == m->values[in].storage) {
            m->build_err = fp_fail(FP_EINVAL, "model %s: node '%s' reads value %d, overwritten in place by value %d",
                                   m->name, name, in, v);
            return NULL;
        }
    void *p = grow(m->nodes, &m->cap_nodes, m->nnodes + 1, sizeof *m->nodes);
    char *nm = dupstr(name);
    if (!p || !nm) {
        if (p)
            m->nodes = p;
        free(nm);
        m->build_err = fp_fail(FP_ENOMEM, "model: out of memory");
        return NULL;
    }
    m->nodes = p;
    node_t *nd = &m->nodes[m->nnodes];
    memset(nd, 0, sizeof *nd);
    nd->info.index = m->nnodes;
    nd->info.name = nm;
    nd->info.type = type;
    nd->info.in = m->values[in].d;
    nd->in = in;
    nd->in2 = -1;
    nd->out = -1;
    nd->pw = nd->pb = nd->brm = nd->brv = -1;
    return nd;
}

/* Finishes the node: output value (sharing `share_storage` when >= 0). */
static int end_node(fp_model *m, node_t *nd, fp_dims od, int share_storage)
{
    int v = new_value(m, od, share_storage, m->nnodes);
    if (v < 0) {
        free((char *)nd->info.name);
        return m->build_err = fp_fail(FP_ENOMEM, "model: out of memory");
    }
    nd->out = v;
    nd->info.out = m->values[v].d;
    m->nnodes++;
    return v;
}

static int add_tensor(fp_model *m, node_t *nd, const char *suffix, int is_param, int rank, const int64_t *shape,
                      int ohwi, long long *off)
{
    if (m->ntensors == m->cap_tensors) {
        size_t nc = m->cap_tensors ? m->cap_tensors * 2 : 64;
        void *p = realloc(m->tensors, nc * sizeof *m->tensors);
        if (!p)
            return m->build_err = fp_fail(FP_ENOMEM, "model: out of memory");
        m->tensors = p;
        m->cap_tensors = nc;
    }
    size_t len = strlen(nd->info.name) + strlen(suffix) + 2;
    char *nm = malloc(len);
    if (!nm)
        return m->build_err = fp_fail(FP_ENOMEM, "model: out of memory");
    snprintf(nm, len, "%s.%s", nd->info.name, suffix);
    fp_tensor_info *t = &m->tensors[m->ntensors++];
    memset(t, 0, sizeof *t);
    t->name = nm;
    t->is_param = is_param;
    t->layer = m->nnodes;
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) {
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    t->ohwi = ohwi;
    size_t *count = is_param ? &m->nparams : &m->nbuffers;
    t->offset = *count;
    *count += t->numel;
    *off = (long long)t->offset;
    if (is_param)
        nd->info.params += t->numel;
    return FP_OK;
}

int fp_model_add_conv(fp_model *m, const char *name, int in, int cout, int k, int stride, int pad)
{
    node_t *nd = begin_node(m, name, FP_LAYER_CONV, in);
    if (!nd)
        return m->build_err;
    fp_dims id = m->values[in].d;
    nd->conv = (fp_conv_params){id.c, cout, k, k, stride, pad};
    fp_dims od = fp_conv_out_dims(id, &nd->conv);
    if (od.n == 0) {
        free((char *)nd->info.name);
        return m->build_err = fp_fail(FP_EINVAL, "model %s: conv '%s' (%dx%d/%d pad %d) does not fit input %dx%dx%d",
                                      m->name, name, k, k, stride, pad, id.h, id.w, id.c);
    }
    int64_t shape[4] = {cout, id.c, k, k};
    if (add_tensor(m, nd, "weight", 1, 4, shape, 1, &nd->pw)) {
        free((char *)nd->info.name);
        return m->build_err;
    }
    nd->info.k = k;
    nd->info.stride = stride;
    nd->info.pad = pad;
    nd->info.macs = (double)od.h * od.w * cout * k * k * id.c;
    nd->info.fwd_flops = 2 * nd->info.macs;
    nd->info.bwd_flops = 2 * nd->info.fwd_flops;
    m->values[in].needed_bwd = 1;   /* x for the weight gradient */
    return end_node(m, nd, od, -1);
}

int fp_model_add_bn(fp_model *m, const char *name, int in)
{
    node_t *nd = begin_node(m, name, FP_LAYER_BN, in);
    if (!nd)
        return m->build_err;
    fp_dims id = m->values[in].d;
    nd->bn = (fp_bn_params){0.1f, 1e-5f};
    int64_t shape[1] = {id.c};
    if (add_tensor(m, nd, "weight", 1, 1, shape, 0, &nd->pw) || add_tensor(m, nd, "bias", 1, 1, shape, 0, &nd->pb) ||
        add_tensor(m, nd, "running_mean", 0, 1, shape, 0, &nd->brm) ||
        add_tensor(m, nd, "running_var", 0, 1, shape, 0, &nd->brv)) {
        free((char *)nd->info.name);
        return m->build_err;
    }
    nd->info.fwd_flops = 2.0 * dims_floats(id);
    nd->info.bwd_flops = 2 * nd->info.fwd_flops;
    m->values[in].needed_bwd = 1;   /* x for the backward */
    return end_node(m, nd, id, -1);
}

/* v may be overwritten in place: no backward reads it and no node reads it yet (the node being
 * built, not yet counted, is its only reader). */
static int inplace_ok(const fp_model *m, int v)
{
    if (m->values[v].needed_bwd || m->values[v].producer < 0)
        return 0;
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].in == v || m->nodes[i].in2 == v)
            return 0;
    return 1;
}

int fp_model_add_relu(fp_model *m, const char *name, int in)
{
    node_t *nd = begin_node(m, name, FP_LAYER_RELU, in);
    if (!nd)
        return m->build_err;
    fp_dims id = m->values[in].d;
    nd->info.fwd_flops = (double)dims_floats(id);
    nd->info.bwd_flops = 2 * nd->info.fwd_flops;
    int v = end_node(m, nd, id, inplace_ok(m, in) ? m->values[in].storage : -1);   /* in place when allowed */
    if (v >= 0)
        m->values[v].needed_bwd = 1;   /* y masks the gradient */
    return v;
}

int fp_model_add_maxpool(fp_model *m, const char *name, int in, int k, int stride, int pad)
{
    node_t *nd = begin_node(m, name, FP_LAYER_MAXPOOL, in);
    if (!nd)
        return m->build_err;
    fp_dims id = m->values[in].d;
    nd->pool = (fp_pool_params){k, stride, pad};
    fp_dims od = fp_pool_out_dims(id, &nd->pool);
    if (od.n == 0 || pad > k / 2) {
        free((char *)nd->info.name);
        return m->build_err = fp_fail(FP_EINVAL, "model %s: maxpool '%s' (%dx%d/%d pad %d) does not fit input %dx%d",
                                      m->name, name, k, k, stride, pad, id.h, id.w);
    }
    nd->info.k = k;
    nd->info.stride = stride;
    nd->info.pad = pad;
    nd->info.fwd_flops = (double)dims_floats(od) * k * k;
    nd->info.bwd_flops = 2 * nd->info.fwd_flops;
    return end_node(m, nd, od, -1);
}

int fp_model_add_avgpool(fp_model *m, const char *name, int in)
{
    node_t *nd = begin_node(m, name, FP_LAYER_AVGPOOL, in);
    if (!nd)
        return m->build_err;
    fp_dims id = m->values[in].d;
    nd->info.fwd_flops = (double)dims_floats(id);
    nd->info.bwd_flops = 2 * nd->info.fwd_flops;
    return end_node(m, nd, (fp_dims){1, 1, 1, id.c}, -1);
}

int fp_model_add_linear(fp_model *m, const char *name, int in, int out)
{
    node_t *nd = begin_node(m, name, FP_LAYER_LINEAR, in);
    if (!nd)
        return m->build_err;
    fp_dims id = m->values[in].d;
    int fin = (int)dims_floats(id);
    if (out < 1) {
        free((char *)nd->info.name);
        return m->build_err = fp_fail(FP_EINVAL, "model %s: linear '%s' with %d outputs", m->name, name, out);
    }
    int64_t wshape[2] = {out, fin}, bshape[1] = {out};
    if (add_tensor(m, nd, "weight", 1, 2, wshape, 0, &nd->pw) || add_tensor(m, nd, "bias", 1, 1, bshape, 0, &nd->pb)) {
        free((char *)nd->info.name);
        return m->build_err;
    }
    nd->info.macs = (double)fin * out;
    nd->info.fwd_flops = 2 * nd->info.macs;
    nd->info.bwd_flops = 2 * nd->info.fwd_flops;
    m->values[in].needed_bwd = 1;
    return end_node(m, nd, (fp_dims){1, 1, 1, out}, -1);
}

int fp_model_add_add(fp_model *m, const char *name, int a, int b)
{
    node_t *nd = begin_node(m, name, FP_LAYER_ADD, a);
    if (!nd)
        return m->build_err;
    fp_dims ad = m->values[a].d;
    int b_stale = 0;
    for (int v = b + 1; b >= 0 && b < m->nvalues && v < m->nvalues; v++)
        b_stale |= m->values[v].storage == m->values[b].storage;
    if (b < 0 || b >= m->nvalues || b_stale || dims_floats(m->values[b].d) != dims_floats(ad) ||
        m->values[b].d.c != ad.c || m->values[b].storage == m->values[a].storage) {
        free((char *)nd->info.name);
        return m->build_err = fp_fail(FP_EINVAL, "model %s: add '%s' of values %d and %d that do not match", m->name,
                                      name, a, b);
    }
    nd->in2 = b;
    nd->info.in2 = m->values[b].d;
    nd->info.fwd_flops = (double)dims_floats(ad);
    nd->info.bwd_flops = 2 * nd->info.fwd_flops;
    return end_node(m, nd, ad, inplace_ok(m, a) ? m->values[a].storage : -1);   /* in place into a when allowed */
}

int fp_model_build_finish(fp_model *m)
{
    if (m->build_err)
        return m->build_err;
    if (m->nnodes == 0)
        return m->build_err = fp_fail(FP_EINVAL, "model %s: no layers", m->name);
    if (m->nparams > INT_MAX || m->nbuffers > INT_MAX)   /* flat tensors of the backend have int dims */
        return m->build_err = fp_fail(FP_EINVAL, "model %s: %zu parameters, more than supported", m->name, m->nparams);
    m->params = m->own_params = calloc(m->nparams ? m->nparams : 1, sizeof(float));
    m->grads = calloc(m->nparams ? m->nparams : 1, sizeof(float));
    m->buffers = calloc(m->nbuffers ? m->nbuffers : 1, sizeof(float));
    m->vgrad = malloc((size_t)m->nvalues * sizeof(int));
    if (!m->params || !m->grads || !m->buffers || !m->vgrad)
        return m->build_err = fp_fail(FP_ENOMEM, "model %s: out of memory for %zu parameters", m->name, m->nparams);
    for (int v = 0; v < m->nvalues; v++)
        m->vgrad[v] = -1;
    m->dparams = m->params;   /* host backend: the backend pointers are the host buffers */
    m->dgrads = m->grads;
    m->dbuffers = m->buffers;
    m->num_classes = m->values[m->nvalues - 1].d.c;
    m->pol = *fp_policy_find("fp32");
    m->finished = 1;
    return FP_OK;
}

void fp_model_free(fp_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nnodes; i++)
        free((char *)m->nodes[i].info.name);
    for (size_t i = 0; i < m->ntensors; i++)
        free((char *)m->tensors[i].name);
    if (m->be) {   /* backend memory first, then the instance */
        fp_mi_release_backend_memory(m);
        m->ops->destroy(m->be);
    }
    free(m->logits_host);
    free(m->stats_buf);
    free(m->probe_host);
    free(m->gb);
    free(m->vgrad);
    fp_mi_fuse_free(m);
    free(m->nodes);
    free(m->values);
    free(m->storages);
    free(m->tensors);
    free(m->own_params);
    free(m->grads);
    free(m->buffers);
    free(m->name);
    free(m);
}
