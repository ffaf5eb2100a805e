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
#include "numfmt.h"
#include "safetensors.h"
#include "probe/probe.h"
#include "trainer/model.h"

#define ALIGN_FLOATS 16   /* 64-byte alignment of arena blocks */
#define ALIGN_BYTES 64

typedef struct {
    fp_dims d;        /* per image (n = 1) */
    int storage;
    int producer;     /* node index; -1 for the model input */
    int needed_bwd;   /* read by some node's backward */
    fp_dtype dt;      /* storage format under the policy: F32, F16 or BF16 */
} value_t;

typedef struct {
    size_t floats;    /* per image */
    int bytes;        /* per element under the policy: 4 or 2 */
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
    unsigned char *arena;
    size_t arena_bytes;
    size_t *st_off;               /* per storage, bytes into arena */
    void *aux;                    /* train: BN mean/invstd (float) and max-pool argmax (int) */
    size_t aux_units;
    size_t saved_bytes;           /* kept-for-backward part (train) */
    size_t max_floats;            /* largest value of this plan (elements), sizes the cast scratch */
} plan_t;

typedef struct {
    void *p;
    size_t cap;                   /* bytes */
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
    float *own_params;            /* params' allocation; params points elsewhere while shared */
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
    /* precision policy (fp_model_set_policy) */
    fp_policy pol;
    int lowp;                     /* 1: some tensor is rounded (policy other than fp32) */
    float *wlow;                  /* conv / linear weights (and linear bias) rounded to pol.compute, fp32
                                   * containers, same layout as params; NULL when compute is fp32 */
    float *cs[3];                 /* fp32 cast scratch: 16-bit tensors widened around the kernels */
    size_t cs_floats;
    float *wscr;                  /* fp32 scratch for a low-precision weight gradient before rounding */
    size_t wscr_floats;
    float *logits32;              /* logits widened for the loss */
    size_t logits32_cap;
    size_t cs_peak;
    fp_probe *probe;              /* fp_model_set_probe; NULL: no hooks beyond this pointer check */
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
    m->params = m->own_params = calloc(m->nparams ? m->nparams : 1, sizeof(float));
    m->grads = calloc(m->nparams ? m->nparams : 1, sizeof(float));
    m->buffers = calloc(m->nbuffers ? m->nbuffers : 1, sizeof(float));
    m->vgrad = malloc((size_t)m->nvalues * sizeof(int));
    if (!m->params || !m->grads || !m->buffers || !m->vgrad)
        return m->build_err = fp_fail(FP_ENOMEM, "model %s: out of memory for %zu parameters", m->name, m->nparams);
    for (int v = 0; v < m->nvalues; v++)
        m->vgrad[v] = -1;
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
    free(m->wlow);
    for (int i = 0; i < 3; i++)
        free(m->cs[i]);
    free(m->wscr);
    free(m->logits32);
    fp_workspace_free(&m->ws);
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
static size_t round_up_bytes(size_t x) { return (x + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES; }

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
    size_t saved = 0, maxf = 0;
    for (int i = -1; i < N; i++) {
        for (int s = 0; s < S; s++) {
            if (birth[s] != i)
                continue;
            size_t need = round_up_bytes(m->storages[s].floats * (size_t)n * (size_t)m->storages[s].bytes);
            if (m->storages[s].floats * (size_t)n > maxf)
                maxf = m->storages[s].floats * (size_t)n;
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
    unsigned char *arena = malloc(total ? total : 1);
    void *auxp = malloc((aux ? aux : 1) * 4);
    if (!arena || !auxp) {
        free(arena);
        free(auxp);
        rc = fp_fail(FP_ENOMEM, "model %s: out of memory for %zu MiB of activations", m->name, total >> 20);
        goto out;
    }
    free(pl->arena);
    free(pl->st_off);
    free(pl->aux);
    pl->arena = arena;
    pl->arena_bytes = total;
    pl->max_floats = maxf;
    pl->st_off = st_off;
    st_off = NULL;
    pl->aux = auxp;
    pl->aux_units = aux;
    pl->saved_bytes = saved + aux * 4;
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

static size_t plan_bytes(const plan_t *pl) { return pl->arena_bytes + pl->aux_units * 4; }

static void note_peaks(fp_model *m)
{
    size_t act = plan_bytes(&m->plan[0]) + plan_bytes(&m->plan[1]);
    if (act > m->act_peak)
        m->act_peak = act;
    size_t saved = m->plan[FP_MODE_TRAIN].saved_bytes;
    if (saved > m->saved_peak)
        m->saved_peak = saved;
    if (m->ws.cap * sizeof(float) > m->ws_peak)
        m->ws_peak = m->ws.cap * sizeof(float);
    if (m->gb_bytes > m->gb_peak)
        m->gb_peak = m->gb_bytes;
}

/* ---------------------------------------------------------------- precision policy */

static int is16(fp_dtype d) { return d == FP_DT_F16 || d == FP_DT_BF16; }

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

static void plan_free(plan_t *pl)
{
    free(pl->arena);
    free(pl->st_off);
    free(pl->aux);
    memset(pl, 0, sizeof *pl);
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
    plan_free(&m->plan[0]);
    plan_free(&m->plan[1]);
    m->fwd_ok = 0;
    if (p->master != FP_DT_F32) {   /* model.half(): parameters and buffers converted (own copy) */
        if (m->params != m->own_params) {
            memcpy(m->own_params, m->params, m->nparams * sizeof(float));
            m->params = m->own_params;
        }
        fp_round_to_dtype(m->params, m->nparams, p->master);
        fp_round_to_dtype(m->buffers, m->nbuffers, p->master);
    }
    return FP_OK;
}

const fp_policy *fp_model_policy(const fp_model *m) { return &m->pol; }

static int ensure_cs(fp_model *m, size_t floats)
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
static void prepare_weights(fp_model *m)
{
    for (int i = 0; i < m->nnodes; i++) {
        const node_t *nd = &m->nodes[i];
        if (nd->info.type == FP_LAYER_CONV || nd->info.type == FP_LAYER_LINEAR)
            fp_round_to_dtype_copy(m->wlow + nd->pw, m->params + nd->pw, nd->info.params, m->pol.compute);
    }
}

#define CHUNK 2048

/* y = round_d(a + b) on 16-bit storage (chunks through fp32; y may alias a or b). */
static void add16(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n, fp_dtype d)
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
static void acc16(uint16_t *dst, const float *c, size_t n, fp_dtype d)
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
static void relu16(uint16_t *restrict y, const uint16_t *restrict x, size_t n, fp_dtype d)
{
    unsigned inf = d == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < n; i++) {
        unsigned h = x[i], mag = h & 0x7fffu;
        y[i] = (uint16_t)((h & 0x8000u) && mag && mag <= inf ? 0u : h);
    }
}

/* dy = y > 0 ? dy : +0 on 16-bit storage (y > 0: sign clear, nonzero, not NaN). */
static void relu_mask16(uint16_t *restrict dy, const uint16_t *restrict y, size_t n, fp_dtype d)
{
    unsigned inf = d == FP_DT_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < n; i++)
        dy[i] = (uint16_t)((unsigned)(uint16_t)(y[i] - 1u) < inf ? dy[i] : 0u);
}

/* ---------------------------------------------------------------- forward */

/* Prefixes the kernel's message with the model and layer (copied first: fp_fail writes the buffer). */
static void relabel(int rc, const char *model, const char *what, const char *layer)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s", fp_error_message());
    fp_fail(rc, "model %s: %s %s: %s", model, what, layer, msg);
}

static void *vptr(fp_model *m, int mode, int v)
{
    return m->plan[mode].arena + m->plan[mode].st_off[m->values[v].storage];
}
static float *val(fp_model *m, int mode, int v) { return (float *)vptr(m, mode, v); }   /* fp32 storage */
static fp_dtype vdt(const fp_model *m, int v) { return m->values[v].dt; }

/* A tensor p of format d as fp32 for a kernel: p itself when fp32, else widened into buf. */
static float *as_f32(void *p, fp_dtype d, size_t cnt, float *buf)
{
    if (!is16(d))
        return p;
    fp_widen_array(buf, p, cnt, d);
    return buf;
}

/* A tensor p of format d as a conv / linear input: rounded to pol.compute (p itself when nothing
 * changes, else in buf). */
static const float *to_compute(const fp_model *m, void *p, fp_dtype d, size_t cnt, float *buf)
{
    fp_dtype c = m->pol.compute;
    if (is16(d)) {
        fp_widen_array(buf, p, cnt, d);
        if (c != d && c != FP_DT_F32)
            fp_round_to_dtype(buf, cnt, c);
        return buf;
    }
    if (c == FP_DT_F32)
        return p;
    fp_round_to_dtype_copy(buf, p, cnt, c);
    return buf;
}

/* Where a kernel writes value v: its storage when fp32, else buf, narrowed by store_out. */
static float *out_f32(fp_model *m, int mode, int v, float *buf) { return is16(vdt(m, v)) ? buf : val(m, mode, v); }
static void store_out(fp_model *m, int mode, int v, size_t cnt, const float *buf)
{
    if (is16(vdt(m, v)))
        fp_narrow_array(vptr(m, mode, v), buf, cnt, vdt(m, v));
}

static size_t vfloats(const fp_model *m, int v, int n) { return dims_floats(m->values[v].d) * (size_t)n; }

/* ---------------------------------------------------------------- probe hooks */

void fp_model_set_probe(fp_model *m, fp_probe *p) { m->probe = p; }
fp_probe *fp_model_probe(const fp_model *m) { return m->probe; }

/* Value v to the probe in its storage format (16-bit tensors as stored: the probe widens them only
 * for backends that cannot take the bit patterns). */
static void probe_value(fp_model *m, const void *p, fp_dtype d, size_t cnt, int layer, fp_tensor_role role)
{
    fp_probe_tensor_dt(m->probe, layer, role, p, is16(d) ? d : FP_DT_F32, cnt);
}

/* After layer nd's forward at a sampling step: its output (activation) and its parameters (weight:
 * the fp32 master values, all of the layer's parameters in one tensor). */
static void sample_forward(fp_model *m, int mode, const node_t *nd, int n, unsigned want)
{
    if (want & FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION))
        probe_value(m, vptr(m, mode, nd->out), vdt(m, nd->out), vfloats(m, nd->out, n), nd->info.index,
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
        int rc = plan_build(m, pl, n, mode);
        if (rc)
            return rc;
    }
    int lowp = m->lowp || m->pol.compute != FP_DT_F32;
    if (lowp) {
        int rc = ensure_cs(m, pl->max_floats);
        if (rc)
            return rc;
        if (m->wlow)
            prepare_weights(m);
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
                relu16(vptr(m, mode, nd->out), vptr(m, mode, nd->in), cin, din);
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
                add16(vptr(m, mode, nd->out), vptr(m, mode, nd->in), vptr(m, mode, nd->in2), cin, din);
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
            relabel(rc, m->name, "layer", nd->info.name);
    }
    note_peaks(m);
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

int fp_model_layer_params(const fp_model *m, int layer, size_t *offset, size_t *count)
{
    if (!m || layer < 0 || layer >= m->nnodes)
        return fp_fail(FP_EINVAL, "model: no layer %d", layer);
    const node_t *nd = &m->nodes[layer];
    if (offset)
        *offset = nd->pw >= 0 ? (size_t)nd->pw : 0;
    if (count)
        *count = nd->pw >= 0 ? nd->info.params : 0;
    return FP_OK;
}

fp_dtype fp_model_layer_dtype(const fp_model *m, int layer)
{
    return m && layer >= 0 && layer < m->nnodes ? vdt(m, m->nodes[layer].out) : FP_DT_F32;
}

int fp_model_clone(fp_model **out, const fp_model *m)
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
    c->ws.threads = m->ws.threads;
    fp_model_copy_params(c, m, 1);
    *out = c;
    return FP_OK;
}

int fp_model_copy_params(fp_model *dst, const fp_model *m, int with_buffers)
{
    if (!dst || !m || dst->nparams != m->nparams || dst->nbuffers != m->nbuffers || dst->nnodes != m->nnodes)
        return fp_fail(FP_EINVAL, "model: copy_params between different architectures");
    dst->params = dst->own_params;
    memcpy(dst->params, m->params, m->nparams * sizeof(float));
    if (with_buffers)
        memcpy(dst->buffers, m->buffers, m->nbuffers * sizeof(float));
    return FP_OK;
}

int fp_model_share_params(fp_model *dst, fp_model *src)
{
    if (!dst || !src || dst->nparams != src->nparams || dst->nbuffers != src->nbuffers || dst->nnodes != src->nnodes)
        return fp_fail(FP_EINVAL, "model: share_params between different architectures");
    if (dst->pol.master != FP_DT_F32)
        return fp_fail(FP_EINVAL, "model %s: policy %s rounds its parameters and cannot share another model's",
                       dst->name, dst->pol.name);
    dst->params = src->params;
    memcpy(dst->buffers, src->buffers, src->nbuffers * sizeof(float));
    return FP_OK;
}

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

static size_t vbytes(const fp_model *m, int v, int n) { return vfloats(m, v, n) * (size_t)fp_dtype_bytes(vdt(m, v)); }

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
        acc16(m->gb[m->vgrad[v]].p, buf, cnt, vdt(m, v));
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
        add16(dst, dst, src, cnt, d);
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
            probe_value(m, dyp, dout, cout, i, FP_ROLE_ACTIVATION_GRAD);
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
                relu_mask16(dyp, vptr(m, mode, vout), cnt, dout);
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
            relabel(rc, m->name, "backward of", nd->info.name);
        grad_release(m, vout);
    }
#undef PROBE_BEGIN
#undef PROBE_END
    for (int v = 0; v < m->nvalues; v++)
        grad_release(m, v);
    if (!rc && m->pol.master != FP_DT_F32)   /* `half`: parameter gradients are fp16 tensors */
        fp_round_to_dtype(G, m->nparams, m->pol.master);
    note_peaks(m);
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

void fp_model_memory(const fp_model *m, fp_model_mem *o)
{
    memset(o, 0, sizeof *o);
    o->params = m->nparams * sizeof(float);
    o->grads = m->nparams * sizeof(float);
    o->buffers = m->nbuffers * sizeof(float);
    o->activations = plan_bytes(&m->plan[0]) + plan_bytes(&m->plan[1]);
    o->activations_peak = m->act_peak > o->activations ? m->act_peak : o->activations;
    o->saved = m->plan[FP_MODE_TRAIN].saved_bytes;
    o->saved_peak = m->saved_peak > o->saved ? m->saved_peak : o->saved;
    o->act_grads = m->gb_bytes;
    o->act_grads_peak = m->gb_peak;
    o->workspace = m->ws.cap * sizeof(float);
    o->workspace_peak = m->ws_peak > o->workspace ? m->ws_peak : o->workspace;
    size_t casts = 3 * m->cs_floats * sizeof(float) + m->wscr_floats * sizeof(float);
    o->workspace += casts;
    o->workspace_peak += (m->cs_peak > 3 * m->cs_floats * sizeof(float) ? m->cs_peak : 3 * m->cs_floats * sizeof(float)) +
                         m->wscr_floats * sizeof(float);
    o->casts = casts;
    o->weight_copy = m->wlow ? m->nparams * sizeof(float) : 0;
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
