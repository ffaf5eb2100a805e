/* model.c — the flat node list of model.h: building, the sizes table (one parameter buffer, one
 * gradient buffer, one running-stat buffer), activation planning (liveness, one arena per mode),
 * forward / backward over the nodes through layers.h, memory accounting, safetensors load / save.
 * Promises: fp32 results equal to the kernels' composition; nothing is allocated per step once the
 * (mode, batch) plan and the gradient pool have been sized. */
/* GCC 12 at -O2 vectorises only loops with known trip counts: turn on the loop vectoriser (relu mask). */
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "safetensors.h"
#include "trainer/model.h"

#define ALIGN_FLOATS 16   /* 64-byte alignment of arena blocks */

typedef struct {
    fp_dims d;        /* per image (n = 1) */
    int storage;
    int producer;     /* node index; -1 for the model input */
    int needed_bwd;   /* read by some node's backward */
} value_t;

typedef struct {
    size_t floats;    /* per image */
} storage_t;

typedef struct {
    fp_layer_info info;
    int in, in2, out;             /* value ids; in2 only for add */
    fp_conv_params conv;
    fp_pool_params pool;
    fp_bn_params bn;
    long long pw, pb;             /* parameter offsets (floats), -1 when none */
    long long brm, brv;           /* running-stat offsets, -1 when none */
    size_t aux;                   /* train plan: offset (4-byte units) of argmax / BN save */
} node_t;

typedef struct {
    int n;                        /* batch the plan is for; 0 = none */
    float *arena;
    size_t arena_floats;
    size_t *st_off;               /* per storage, floats into arena */
    void *aux;                    /* train: BN mean/invstd (float) and max-pool argmax (int) */
    size_t aux_units;
    size_t saved_floats;          /* kept-for-backward part (train) */
} plan_t;

typedef struct {
    float *p;
    size_t cap;
    int used;
} gblock_t;

struct fp_model {
    char *name;
    node_t *nodes;
    int nnodes, cap_nodes;
    value_t *values;
    int nvalues, cap_values;
    storage_t *storages;
    int nstorages, cap_storages;
    fp_tensor_info *tensors;
    size_t ntensors, cap_tensors;
    size_t nparams, nbuffers;
    float *params, *grads, *buffers;
    int build_err, finished;
    int num_classes;
    plan_t plan[2];               /* indexed by fp_mode */
    int last_mode, fwd_ok;        /* fwd_ok: a TRAIN forward whose state backward may use */
    int last_n;
    gblock_t *gb;
    int ngb, cap_gb;
    int *vgrad;                   /* per value: gradient block or -1 */
    size_t gb_bytes, gb_peak, act_peak, saved_peak, ws_peak;
    float *dlogits;               /* train_step's buffer */
    size_t dlogits_cap;
    fp_workspace ws;
};

/* ---------------------------------------------------------------- small helpers */

static void *grow(void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *q = realloc(p, (size_t)nc * elem);
    if (q)
        *cap = nc;
    return q;
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static size_t dims_floats(fp_dims d) { return (size_t)d.h * d.w * d.c; }
static fp_dims batch_dims(fp_dims d, int n) { d.n = n; return d; }

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
    m->ws.threads = 1;
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
    m->params = calloc(m->nparams ? m->nparams : 1, sizeof(float));
    m->grads = calloc(m->nparams ? m->nparams : 1, sizeof(float));
    m->buffers = calloc(m->nbuffers ? m->nbuffers : 1, sizeof(float));
    m->vgrad = malloc((size_t)m->nvalues * sizeof(int));
    if (!m->params || !m->grads || !m->buffers || !m->vgrad)
        return m->build_err = fp_fail(FP_ENOMEM, "model %s: out of memory for %zu parameters", m->name, m->nparams);
    for (int v = 0; v < m->nvalues; v++)
        m->vgrad[v] = -1;
    m->num_classes = m->values[m->nvalues - 1].d.c;
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
    for (int p = 0; p < 2; p++) {
        free(m->plan[p].arena);
        free(m->plan[p].st_off);
        free(m->plan[p].aux);
    }
    for (int i = 0; i < m->ngb; i++)
        free(m->gb[i].p);
    free(m->gb);
    free(m->vgrad);
    free(m->dlogits);
    fp_workspace_free(&m->ws);
    free(m->nodes);
    free(m->values);
    free(m->storages);
    free(m->tensors);
    free(m->params);
    free(m->grads);
    free(m->buffers);
    free(m->name);
    free(m);
}

/* ---------------------------------------------------------------- init (seeded RNG) */

typedef struct { uint64_t s[4]; } rng_t;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t xoshiro(rng_t *r)   /* xoshiro256** */
{
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return res;
}
static double uniform01(rng_t *r) { return (double)(xoshiro(r) >> 11) * (1.0 / 9007199254740992.0); }
/* Box-Muller: a pair of uniforms gives r cos t, then r sin t (the second value is cached). */
static double normal01(rng_t *r, double *spare, int *has_spare)
{
    if (*has_spare) {
        *has_spare = 0;
        return *spare;
    }
    double u1 = uniform01(r), u2 = uniform01(r);
    double rad = sqrt(-2.0 * log(1.0 - u1)), t = 6.283185307179586 * u2;
    *spare = rad * sin(t);
    *has_spare = 1;
    return rad * cos(t);
}

void fp_model_init_params(fp_model *m, uint64_t seed)
{
    rng_t r;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r.s[i] = splitmix64(&x);
    for (size_t ti = 0; ti < m->ntensors; ti++) {
        const fp_tensor_info *t = &m->tensors[ti];
        const node_t *nd = &m->nodes[t->layer];
        float *d = fp_model_tensor_data(m, t);
        const char *suffix = strrchr(t->name, '.') + 1;
        if (nd->info.type == FP_LAYER_CONV) {
            double sd = sqrt(2.0 / ((double)nd->conv.cout * nd->conv.kh * nd->conv.kw));
            double spare = 0;
            int has_spare = 0;   /* each tensor starts a fresh pair */
            for (size_t i = 0; i < t->numel; i++)
                d[i] = (float)(sd * normal01(&r, &spare, &has_spare));
        } else if (nd->info.type == FP_LAYER_LINEAR) {
            double bound = 1.0 / sqrt((double)dims_floats(nd->info.in));
            for (size_t i = 0; i < t->numel; i++)
                d[i] = (float)(bound * (2.0 * uniform01(&r) - 1.0));
        } else {   /* batchnorm: weight 1, bias 0, running_mean 0, running_var 1 */
            float v = (strcmp(suffix, "weight") == 0 || strcmp(suffix, "running_var") == 0) ? 1.0f : 0.0f;
            for (size_t i = 0; i < t->numel; i++)
                d[i] = v;
        }
    }
}

/* ---------------------------------------------------------------- accessors */

int fp_model_layer_count(const fp_model *m) { return m->nnodes; }
const fp_layer_info *fp_model_layer(const fp_model *m, int i)
{
    return i >= 0 && i < m->nnodes ? &m->nodes[i].info : NULL;
}
size_t fp_model_tensor_count(const fp_model *m) { return m->ntensors; }
const fp_tensor_info *fp_model_tensor(const fp_model *m, size_t i) { return i < m->ntensors ? &m->tensors[i] : NULL; }
const fp_tensor_info *fp_model_find_tensor(const fp_model *m, const char *name)
{
    for (size_t i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}
float *fp_model_tensor_data(fp_model *m, const fp_tensor_info *t)
{
    return (t->is_param ? m->params : m->buffers) + t->offset;
}
float *fp_model_tensor_grad(fp_model *m, const fp_tensor_info *t) { return t->is_param ? m->grads + t->offset : NULL; }
const char *fp_model_name(const fp_model *m) { return m->name; }
size_t fp_model_num_params(const fp_model *m) { return m->nparams; }
float *fp_model_params(fp_model *m) { return m->params; }
float *fp_model_grads(fp_model *m) { return m->grads; }
size_t fp_model_num_buffers(const fp_model *m) { return m->nbuffers; }
float *fp_model_buffers(fp_model *m) { return m->buffers; }
void fp_model_zero_grad(fp_model *m) { memset(m->grads, 0, m->nparams * sizeof(float)); }
fp_dims fp_model_input_dims(const fp_model *m) { return m->values[0].d; }
int fp_model_num_classes(const fp_model *m) { return m->num_classes; }
void fp_model_set_threads(fp_model *m, int threads) { m->ws.threads = threads < 1 ? 1 : threads; }

double fp_model_macs(const fp_model *m)
{
    double s = 0;
    for (int i = 0; i < m->nnodes; i++)
        s += m->nodes[i].info.macs;
    return s;
}

void fp_model_flops(const fp_model *m, double *fwd, double *bwd)
{
    double f = 0, b = 0;
    for (int i = 0; i < m->nnodes; i++) {
        f += m->nodes[i].info.fwd_flops;
        b += m->nodes[i].info.bwd_flops;
    }
    if (fwd)
        *fwd = f;
    if (bwd)
        *bwd = b;
}

void fp_oihw_to_ohwi(float *dst, const float *src, int o, int i, int kh, int kw)
{
    for (int a = 0; a < o; a++)
        for (int c = 0; c < i; c++)
            for (int y = 0; y < kh; y++)
                for (int x = 0; x < kw; x++)
                    dst[(((size_t)a * kh + y) * kw + x) * i + c] = src[(((size_t)a * i + c) * kh + y) * kw + x];
}

void fp_ohwi_to_oihw(float *dst, const float *src, int o, int i, int kh, int kw)
{
    for (int a = 0; a < o; a++)
        for (int c = 0; c < i; c++)
            for (int y = 0; y < kh; y++)
                for (int x = 0; x < kw; x++)
                    dst[(((size_t)a * i + c) * kh + y) * kw + x] = src[(((size_t)a * kh + y) * kw + x) * i + c];
}

/* ---------------------------------------------------------------- activation planning */

static size_t round_up(size_t x) { return (x + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

/* Assigns every storage a block by liveness over the node order (best fit among free blocks), then
 * lays the blocks out in one arena. TRAIN keeps every storage that backward reads. */
static int plan_build(fp_model *m, plan_t *pl, int n, fp_mode mode)
{
    int S = m->nstorages, N = m->nnodes;
    int *birth = malloc((size_t)S * sizeof(int)), *death = malloc((size_t)S * sizeof(int));
    int *keep = calloc((size_t)S, sizeof(int)), *blk = malloc((size_t)S * sizeof(int));
    size_t *bcap = calloc((size_t)S, sizeof(size_t)), *boff = malloc((size_t)S * sizeof(size_t));
    int *bfree = calloc((size_t)S, sizeof(int));
    size_t *st_off = malloc((size_t)S * sizeof(size_t));
    int rc = FP_OK;
    if (!birth || !death || !keep || !blk || !bcap || !boff || !bfree || !st_off) {
        rc = fp_fail(FP_ENOMEM, "model %s: out of memory planning activations", m->name);
        goto out;
    }
    for (int s = 0; s < S; s++) {
        birth[s] = N;
        death[s] = -1;
    }
    for (int v = 0; v < m->nvalues; v++) {
        int s = m->values[v].storage;
        if (m->values[v].producer < birth[s])
            birth[s] = m->values[v].producer;
        if (m->values[v].producer > death[s])
            death[s] = m->values[v].producer;
        if (mode == FP_MODE_TRAIN && m->values[v].needed_bwd)
            keep[s] = 1;
    }
    for (int i = 0; i < N; i++) {
        const node_t *nd = &m->nodes[i];
        int s1 = m->values[nd->in].storage;
        if (i > death[s1])
            death[s1] = i;
        if (nd->in2 >= 0 && i > death[m->values[nd->in2].storage])
            death[m->values[nd->in2].storage] = i;
    }
    keep[m->values[m->nvalues - 1].storage] = 1;   /* the logits */
    int nb = 0;
    size_t saved = 0;
    for (int i = -1; i < N; i++) {
        for (int s = 0; s < S; s++) {
            if (birth[s] != i)
                continue;
            size_t need = round_up(m->storages[s].floats * (size_t)n);
            if (keep[s] && mode == FP_MODE_TRAIN)
                saved += need;
            int best = -1, largest = -1;
            for (int b = 0; b < nb; b++) {
                if (!bfree[b])
                    continue;
                if (bcap[b] >= need && (best < 0 || bcap[b] < bcap[best]))
                    best = b;
                if (largest < 0 || bcap[b] > bcap[largest])
                    largest = b;
            }
            if (best < 0)
                best = largest;
            if (best < 0) {
                best = nb++;
                bcap[best] = 0;
            }
            if (bcap[best] < need)
                bcap[best] = need;
            bfree[best] = 0;
            blk[s] = best;
        }
        for (int s = 0; s < S; s++)
            if (death[s] == i && !keep[s] && birth[s] <= i)
                bfree[blk[s]] = 1;
    }
    size_t total = 0;
    for (int b = 0; b < nb; b++) {
        boff[b] = total;
        total += bcap[b];
    }
    for (int s = 0; s < S; s++)
        st_off[s] = birth[s] < N ? boff[blk[s]] : 0;
    /* aux (train): BN mean + invstd, max-pool argmax; 4-byte units */
    size_t aux = 0;
    if (mode == FP_MODE_TRAIN) {
        for (int i = 0; i < N; i++) {
            node_t *nd = &m->nodes[i];
            nd->aux = aux;
            if (nd->info.type == FP_LAYER_BN)
                aux += round_up(2 * (size_t)nd->info.in.c);
            else if (nd->info.type == FP_LAYER_MAXPOOL)
                aux += round_up(dims_floats(nd->info.out) * (size_t)n);
        }
    }
    float *arena = malloc((total ? total : 1) * sizeof(float));
    void *auxp = malloc((aux ? aux : 1) * 4);
    if (!arena || !auxp) {
        free(arena);
        free(auxp);
        rc = fp_fail(FP_ENOMEM, "model %s: out of memory for %zu MiB of activations", m->name,
                     total * sizeof(float) >> 20);
        goto out;
    }
    free(pl->arena);
    free(pl->st_off);
    free(pl->aux);
    pl->arena = arena;
    pl->arena_floats = total;
    pl->st_off = st_off;
    st_off = NULL;
    pl->aux = auxp;
    pl->aux_units = aux;
    pl->saved_floats = saved + aux;
    pl->n = n;
out:
    free(birth);
    free(death);
    free(keep);
    free(blk);
    free(bcap);
    free(boff);
    free(bfree);
    free(st_off);
    return rc;
}

static size_t plan_bytes(const plan_t *pl) { return (pl->arena_floats + pl->aux_units) * 4; }

static void note_peaks(fp_model *m)
{
    size_t act = plan_bytes(&m->plan[0]) + plan_bytes(&m->plan[1]);
    if (act > m->act_peak)
        m->act_peak = act;
    size_t saved = m->plan[FP_MODE_TRAIN].saved_floats * 4;
    if (saved > m->saved_peak)
        m->saved_peak = saved;
    if (m->ws.cap * sizeof(float) > m->ws_peak)
        m->ws_peak = m->ws.cap * sizeof(float);
    if (m->gb_bytes > m->gb_peak)
        m->gb_peak = m->gb_bytes;
}

/* ---------------------------------------------------------------- forward */

/* Prefixes the kernel's message with the model and layer (copied first: fp_fail writes the buffer). */
static void relabel(int rc, const char *model, const char *what, const char *layer)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s", fp_error_message());
    fp_fail(rc, "model %s: %s %s: %s", model, what, layer, msg);
}

static float *val(fp_model *m, int mode, int v)
{
    return m->plan[mode].arena + m->plan[mode].st_off[m->values[v].storage];
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
        int rc = plan_build(m, pl, n, mode);
        if (rc)
            return rc;
    }
    memcpy(val(m, mode, 0), x, dims_floats(m->values[0].d) * (size_t)n * sizeof(float));
    int rc = FP_OK;
    for (int i = 0; i < m->nnodes && rc == FP_OK; i++) {
        node_t *nd = &m->nodes[i];
        float *y = val(m, mode, nd->out);
        const float *in = val(m, mode, nd->in);
        fp_dims id = batch_dims(nd->info.in, n);
        float *P = m->params, *B = m->buffers;
        switch (nd->info.type) {
        case FP_LAYER_CONV:
            rc = fp_conv_forward(y, in, id, P + nd->pw, &nd->conv, &m->ws);
            break;
        case FP_LAYER_BN:
            if (mode == FP_MODE_TRAIN) {
                float *save = (float *)pl->aux + nd->aux;
                rc = fp_batchnorm_forward_train(y, save, save + id.c, B + nd->brm, B + nd->brv, in, id, P + nd->pw,
                                                P + nd->pb, &nd->bn);
            } else {
                rc = fp_batchnorm_forward_eval(y, in, id, P + nd->pw, P + nd->pb, B + nd->brm, B + nd->brv, &nd->bn);
            }
            break;
        case FP_LAYER_RELU:
            rc = fp_relu_forward(y, in, dims_floats(id) * (size_t)n);
            break;
        case FP_LAYER_MAXPOOL:
            rc = fp_maxpool_forward(y, mode == FP_MODE_TRAIN ? (int *)pl->aux + nd->aux : NULL, in, id, &nd->pool);
            break;
        case FP_LAYER_AVGPOOL:
            rc = fp_avgpool_global_forward(y, in, id);
            break;
        case FP_LAYER_LINEAR:
            rc = fp_linear_forward(y, in, n, (int)dims_floats(id), nd->info.out.c, P + nd->pw, P + nd->pb);
            break;
        case FP_LAYER_ADD:
            rc = fp_add_forward(y, in, val(m, mode, nd->in2), dims_floats(id) * (size_t)n);
            break;
        default:
            rc = fp_fail(FP_EINTERNAL, "model: bad node type");
        }
        if (rc)
            relabel(rc, m->name, "layer", nd->info.name);
    }
    note_peaks(m);
    if (rc)
        return rc;
    m->last_mode = mode;
    m->last_n = n;
    m->fwd_ok = mode == FP_MODE_TRAIN;
    if (logits)
        *logits = val(m, mode, m->nvalues - 1);
    return FP_OK;
}

/* ---------------------------------------------------------------- backward */

/* A gradient block of at least `floats` floats (best fit among unused; else the largest unused one
 * grown; else a new one). Returns the block index or -1. */
static int gb_acquire(fp_model *m, size_t floats)
{
    int best = -1, largest = -1;
    for (int b = 0; b < m->ngb; b++) {
        if (m->gb[b].used)
            continue;
        if (m->gb[b].cap >= floats && (best < 0 || m->gb[b].cap < m->gb[best].cap))
            best = b;
        if (largest < 0 || m->gb[b].cap > m->gb[largest].cap)
            largest = b;
    }
    if (best < 0 && largest >= 0) {
        gblock_t *g = &m->gb[largest];
        float *p = malloc(floats * sizeof(float));
        if (!p)
            return -1;
        free(g->p);
        m->gb_bytes += (floats - g->cap) * sizeof(float);
        g->p = p;
        g->cap = floats;
        best = largest;
    }
    if (best < 0) {
        void *q = grow(m->gb, &m->cap_gb, m->ngb + 1, sizeof *m->gb);
        if (!q)
            return -1;
        m->gb = q;
        float *p = malloc(floats * sizeof(float));
        if (!p)
            return -1;
        best = m->ngb++;
        m->gb[best] = (gblock_t){p, floats, 0};
        m->gb_bytes += floats * sizeof(float);
    }
    m->gb[best].used = 1;
    if (m->gb_bytes > m->gb_peak)
        m->gb_peak = m->gb_bytes;
    return best;
}

static size_t vfloats(const fp_model *m, int v, int n) { return dims_floats(m->values[v].d) * (size_t)n; }

/* The gradient of value v, zeroed when it is created now; NULL on out of memory. */
static float *grad_of(fp_model *m, int v, int n)
{
    if (m->vgrad[v] < 0) {
        int b = gb_acquire(m, vfloats(m, v, n));
        if (b < 0)
            return NULL;
        m->vgrad[v] = b;
        memset(m->gb[b].p, 0, vfloats(m, v, n) * sizeof(float));
    }
    return m->gb[m->vgrad[v]].p;
}

static void grad_release(fp_model *m, int v)
{
    if (m->vgrad[v] >= 0)
        m->gb[m->vgrad[v]].used = 0;
    m->vgrad[v] = -1;
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
    float *dl = grad_of(m, last, n);
    if (!dl)
        return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
    memcpy(dl, dlogits, vfloats(m, last, n) * sizeof(float));
    float *P = m->params, *G = m->grads;
    for (int i = m->nnodes - 1; i >= 0 && rc == FP_OK; i--) {
        node_t *nd = &m->nodes[i];
        int vin = nd->in, vout = nd->out;
        if (m->vgrad[vout] < 0)
            continue;   /* the output does not reach the loss */
        float *dy = m->gb[m->vgrad[vout]].p;
        int in_grad = m->values[vin].producer >= 0;   /* the model input needs none */
        fp_dims id = batch_dims(nd->info.in, n);
        const float *x = val(m, mode, vin);
        float *dx = NULL;
        size_t cnt = vfloats(m, vin, n);
        if (in_grad && nd->info.type != FP_LAYER_RELU && nd->info.type != FP_LAYER_ADD && !(dx = grad_of(m, vin, n)))
            return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
        switch (nd->info.type) {
        case FP_LAYER_CONV:
            rc = fp_conv_backward_weights(G + nd->pw, dy, x, id, &nd->conv, &m->ws);
            if (!rc && dx)
                rc = fp_conv_backward_data(dx, dy, id, P + nd->pw, &nd->conv, &m->ws);
            break;
        case FP_LAYER_BN: {
            const float *save = (const float *)pl->aux + nd->aux;
            rc = fp_batchnorm_backward(dx, G + nd->pw, G + nd->pb, dy, x, id, P + nd->pw, save, save + id.c);
            break;
        }
        case FP_LAYER_RELU: {
            const float *y = val(m, mode, vout);
            if (!in_grad)
                break;
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
            rc = fp_maxpool_backward(dx, dy, (const int *)pl->aux + nd->aux, id, &nd->pool);
            break;
        case FP_LAYER_AVGPOOL:
            rc = fp_avgpool_global_backward(dx, dy, id);
            break;
        case FP_LAYER_LINEAR:
            rc = fp_linear_backward(dx, G + nd->pw, G + nd->pb, dy, x, n, (int)dims_floats(nd->info.in),
                                    nd->info.out.c, P + nd->pw);
            break;
        case FP_LAYER_ADD: {
            int vb = nd->in2;
            if (m->values[vb].producer >= 0) {
                if (m->vgrad[vb] < 0) {
                    int b = gb_acquire(m, cnt);
                    if (b < 0)
                        return fp_fail(FP_ENOMEM, "model %s: out of memory in backward", m->name);
                    m->vgrad[vb] = b;
                    dy = m->gb[m->vgrad[vout]].p;
                    memcpy(m->gb[b].p, dy, cnt * sizeof(float));
                } else {
                    rc = fp_accumulate(m->gb[m->vgrad[vb]].p, dy, cnt);
                }
            }
            if (!in_grad)
                break;
            if (m->vgrad[vin] < 0) {   /* hand dy over */
                m->vgrad[vin] = m->vgrad[vout];
                m->vgrad[vout] = -1;
            } else if (!rc) {
                rc = fp_accumulate(m->gb[m->vgrad[vin]].p, dy, cnt);
            }
            break;
        }
        default:
            rc = fp_fail(FP_EINTERNAL, "model: bad node type");
        }
        if (rc)
            relabel(rc, m->name, "backward of", nd->info.name);
        grad_release(m, vout);
    }
    for (int v = 0; v < m->nvalues; v++)
        grad_release(m, v);
    note_peaks(m);
    return rc;
}

int fp_model_train_step(fp_model *m, float *loss, int *correct1, int *correct5, const float *x, const int *labels,
                        int n)
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
    return fp_model_backward(m, m->dlogits);
}

void fp_model_memory(const fp_model *m, fp_model_mem *o)
{
    memset(o, 0, sizeof *o);
    o->params = m->nparams * sizeof(float);
    o->grads = m->nparams * sizeof(float);
    o->buffers = m->nbuffers * sizeof(float);
    o->activations = plan_bytes(&m->plan[0]) + plan_bytes(&m->plan[1]);
    o->activations_peak = m->act_peak > o->activations ? m->act_peak : o->activations;
    o->saved = m->plan[FP_MODE_TRAIN].saved_floats * 4;
    o->saved_peak = m->saved_peak > o->saved ? m->saved_peak : o->saved;
    o->act_grads = m->gb_bytes;
    o->act_grads_peak = m->gb_peak;
    o->workspace = m->ws.cap * sizeof(float);
    o->workspace_peak = m->ws_peak > o->workspace ? m->ws_peak : o->workspace;
}

/* ---------------------------------------------------------------- safetensors */

static int conv_dims(const fp_tensor_info *t, int *o, int *i, int *kh, int *kw)
{
    *o = (int)t->shape[0];
    *i = (int)t->shape[1];
    *kh = (int)t->shape[2];
    *kw = (int)t->shape[3];
    return 0;
}

int fp_model_load_st(fp_model *m, const fp_st *st, int allow_extra)
{
    size_t maxn = 0;
    for (size_t k = 0; k < m->ntensors; k++)
        if (m->tensors[k].ohwi && m->tensors[k].numel > maxn)
            maxn = m->tensors[k].numel;
    float *tmp = malloc((maxn ? maxn : 1) * sizeof(float));
    if (!tmp)
        return fp_fail(FP_ENOMEM, "%s: out of memory", fp_st_path(st));
    int rc = FP_OK;
    for (size_t k = 0; k < m->ntensors && rc == FP_OK; k++) {
        const fp_tensor_info *t = &m->tensors[k];
        float *d = fp_model_tensor_data(m, t);
        if (t->ohwi) {
            int o, i, kh, kw;
            conv_dims(t, &o, &i, &kh, &kw);
            rc = fp_st_read_f32(st, t->name, tmp, t->shape, t->rank);
            if (!rc)
                fp_oihw_to_ohwi(d, tmp, o, i, kh, kw);
        } else {
            rc = fp_st_read_f32(st, t->name, d, t->shape, t->rank);
        }
    }
    free(tmp);
    if (rc || allow_extra)
        return rc;
    for (size_t k = 0; k < fp_st_count(st); k++) {
        const char *nm = fp_st_at(st, k)->name;
        size_t len = strlen(nm), sl = strlen("num_batches_tracked");
        if (len >= sl && strcmp(nm + len - sl, "num_batches_tracked") == 0)
            continue;
        if (!fp_model_find_tensor(m, nm))
            return fp_fail(FP_EFORMAT, "%s: unexpected tensor '%s' (model %s has no such parameter)", fp_st_path(st),
                           nm, m->name);
    }
    return FP_OK;
}

int fp_model_load(fp_model *m, const char *path)
{
    fp_st *st = NULL;
    int rc = fp_st_open(&st, path);
    if (rc)
        return rc;
    rc = fp_model_load_st(m, st, 0);
    fp_st_close(st);
    return rc;
}

int fp_model_save(const fp_model *m, const char *path)
{
    fp_st_writer *w = NULL;
    float *conv = malloc((m->nparams ? m->nparams : 1) * sizeof(float));
    int rc = conv ? fp_st_writer_new(&w) : fp_fail(FP_ENOMEM, "%s: out of memory", path);
    for (size_t k = 0; k < m->ntensors && rc == FP_OK; k++) {
        const fp_tensor_info *t = &m->tensors[k];
        const float *d = (t->is_param ? m->params : m->buffers) + t->offset;
        if (t->ohwi) {
            int o, i, kh, kw;
            conv_dims(t, &o, &i, &kh, &kw);
            fp_ohwi_to_oihw(conv + t->offset, d, o, i, kh, kw);
            d = conv + t->offset;
        }
        rc = fp_st_writer_add_f32(w, t->name, FP_ST_F32, t->shape, t->rank, d);
    }
    if (!rc)
        rc = fp_st_writer_metadata(w, "model", m->name);
    if (!rc)
        rc = fp_st_writer_write(w, path);
    fp_st_writer_free(w);
    free(conv);
    return rc;
}
