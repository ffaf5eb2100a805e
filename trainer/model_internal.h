/* model_internal.h — private to trainer/model*.c: the model's structures (nodes, values, storages,
 * plans, gradient blocks) and the small helpers the model files share. Not an API: nothing outside
 * trainer/model*.c includes it. */
#ifndef FP_MODEL_INTERNAL_H
#define FP_MODEL_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "numfmt.h"
#include "probe/probe.h"
#include "trainer/backend.h"
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
    void *rsv;                    /* train: the fused chains' reserve spaces (backend memory; model_fuse.c) */
    size_t rsv_bytes;
} plan_t;

/* A batchnorm -> relu or batchnorm -> add -> relu chain of consecutive nodes whose intermediate values
 * nothing else reads (model_fuse.c). */
typedef struct {
    int bn, last;                 /* node indices: the batchnorm, the relu ending the chain */
    int z;                        /* the add's other input (value id), -1 without an add */
    int ok;                       /* the backend fuses it (0 for good once it said no) */
    int ran;                      /* it ran fused in the last TRAIN forward */
    size_t rsv_off, rsv_bytes;    /* its reserve space in the TRAIN plan's rsv */
} fuse_t;

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
    size_t gb_bytes, gb_peak, act_peak, saved_peak;
    float *dlogits;               /* train_step's buffer (backend memory) */
    size_t dlogits_cap;
    const fp_backend_ops *ops;    /* chosen at creation (the CPU backend for now) */
    fp_backend *be;               /* its instance: conv workspace, staging, memory accounting */
    int threads;                  /* fp_model_set_threads (>= 1) */
    /* precision policy (fp_model_set_policy) */
    fp_policy pol;
    int lowp;                     /* 1: some tensor is rounded (policy other than fp32) */
    float *wlow;                  /* conv / linear weights (and linear bias) rounded to pol.compute, fp32
                                   * containers, same layout as params; NULL when compute is fp32 (backend memory) */
    float *logits32;              /* logits widened for the loss (backend memory) */
    size_t logits32_cap;
    fp_probe *probe;              /* fp_model_set_probe; NULL: no hooks beyond this pointer check */
    /* device backends (host_memory 0; model_device.c): parameters, gradients and running statistics
     * live in backend memory (dparams, dgrads, dbuffers) with params / grads / buffers as host mirrors,
     * synchronised lazily through `stale`; on a host backend the d* pointers equal the host ones */
    float *dparams, *dgrads, *dbuffers;
    unsigned stale;               /* FP_MI_* bits below */
    float *logits_host;           /* fp_model_forward's logits, downloaded (device backends) */
    size_t logits_host_cap;       /* floats */
    void *probe_host;             /* probe tensors downloaded at sampling steps (device backends) */
    size_t probe_host_cap;        /* bytes */
    int *dlabels;                 /* train_step's labels, uploaded (backend memory) */
    size_t dlabels_cap;           /* ints */
    const float *blogits;         /* the last TRAIN forward's logits (backend memory), for forward_loss */
    fp_bn_stats_fn bn_stats;      /* fp_model_forward_bn_stats: who gives BN its mean and variance */
    void *bn_stats_ctx;
    float *stats_buf;             /* one BN layer's input widened, then its mean and variance */
    size_t stats_cap;             /* floats */
    fp_model_grad_ready_fn grad_ready;   /* fp_model_set_grad_ready; NULL: none */
    void *grad_ready_ctx;
    /* fusion (model_fuse.c): chains found at the TRAIN plan's build, per node the chain it starts (-1) */
    fuse_t *fuse;
    int nfuse;
    int *fuse_at;
    int fusion;                   /* fp_model_set_fusion: 1 on, 0 off, -1 the backend's default */
    int fwd_fused;                /* the last TRAIN forward ran its chains fused */
    fp_model_bn_reduce_fn bn_reduce;   /* fp_model_set_bn_reduce; NULL: per-rank batchnorm */
    void *bn_reduce_ctx;
    float *sync_acc;              /* model_sync_bn.c's reduced sums (backend memory) */
    size_t sync_acc_cap;          /* floats */
};

/* m->stale: which copy is behind. HOST_*: the device copy is newer (download before host reads);
 * DEV_*: the host copy may have been written (upload before the device reads). */
enum { FP_MI_HOST_P = 1, FP_MI_HOST_G = 2, FP_MI_HOST_B = 4, FP_MI_DEV_P = 8, FP_MI_DEV_G = 16, FP_MI_DEV_B = 32 };

/* ---------------------------------------------------------------- small helpers */

static inline void *grow(void *p, int *cap, int need, size_t elem)
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

static inline char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static inline size_t dims_floats(fp_dims d) { return (size_t)d.h * d.w * d.c; }
static inline fp_dims batch_dims(fp_dims d, int n) { d.n = n; return d; }

static inline int is16(fp_dtype d) { return d == FP_DT_F16 || d == FP_DT_BF16; }

static inline void *vptr(fp_model *m, int mode, int v)
{
    return m->plan[mode].arena + m->plan[mode].st_off[m->values[v].storage];
}
static inline float *val(fp_model *m, int mode, int v) { return (float *)vptr(m, mode, v); }   /* fp32 storage */
static inline fp_dtype vdt(const fp_model *m, int v) { return m->values[v].dt; }

/* Value v of the batch-n plan of `mode` as a typed tensor (its storage, format and batch dims). */
static inline fp_tensor vten(fp_model *m, int mode, int v, int n)
{
    return fp_tensor_of(vptr(m, mode, v), vdt(m, v), batch_dims(m->values[v].d, n));
}
/* count fp32 values at p as a flat tensor {1, 1, 1, count} (count <= INT_MAX: checked at build). */
static inline fp_tensor flat32(float *p, size_t count)
{
    return fp_tensor_of(p, FP_DT_F32, (fp_dims){1, 1, 1, (int)count});
}

static inline size_t vfloats(const fp_model *m, int v, int n) { return dims_floats(m->values[v].d) * (size_t)n; }

static inline size_t vbytes(const fp_model *m, int v, int n)
{
    return vfloats(m, v, n) * (size_t)fp_dtype_bytes(vdt(m, v));
}

/* ---------------------------------------------------------------- shared between the model files */

/* model_plan.c */
int fp_mi_plan_build(fp_model *m, plan_t *pl, int n, fp_mode mode);
size_t fp_mi_plan_bytes(const plan_t *pl);
void fp_mi_note_peaks(fp_model *m);
void fp_mi_plan_free(fp_model *m, plan_t *pl);
/* model_fuse.c: the chains and their reserve spaces for the TRAIN plan pl of batch n (called by its build) */
int fp_mi_fuse_plan(fp_model *m, plan_t *pl, int n);
void fp_mi_fuse_free(fp_model *m);
/* At a forward's start: whether it runs the fused chains (TRAIN, nothing sampled: want == 0). */
int fp_mi_fuse_begin(fp_model *m, fp_mode mode, unsigned want);
/* Node i of a fused forward / backward: when a chain starts (forward) or ends (backward) there and fuses,
 * it runs (probe hooks, labels and messages included) and the index of its other end comes back, *rc set;
 * else -1 and the caller runs node i itself. */
int fp_mi_fuse_forward(fp_model *m, int i, int n, int *rc);
int fp_mi_fuse_backward(fp_model *m, int i, int n, int *rc);
/* Layer `layer`'s output was not written by the last forward (an intermediate of a fused chain). */
int fp_mi_fuse_hidden(const fp_model *m, int layer);
/* model_forward.c: `half` keeps the running statistics as fp16 tensors (rounded after each update) */
int fp_mi_round_running(fp_model *m, fp_tensor rm, fp_tensor rv);
/* model_backward.c: the gradient pool (model_fuse.c's backward uses it as the node loop does) */
int fp_mi_grad_target(fp_model *m, int v, int n, fp_tensor *g, int *accumulate);
fp_tensor fp_mi_gten(fp_model *m, int v, int n);
void fp_mi_grad_release(fp_model *m, int v);
int fp_mi_grads_ready(fp_model *m, int i);
/* model_policy.c */
int fp_mi_prepare_layer_weights(fp_model *m, const node_t *nd);
/* model_device.c: backend pointers and the mirrors' synchronisation (no-ops on host backends) */
static inline int devmem(const fp_model *m) { return !m->ops->host_memory; }
int fp_mi_to_host(fp_model *m, unsigned host_bits);   /* downloads the HOST_* parts asked that are behind */
int fp_mi_to_device(fp_model *m);                     /* uploads every DEV_* part that is behind */
void fp_mi_release_backend_memory(fp_model *m);       /* plans, gradient blocks, scratch, mirrors, weight copy */
/* model_sync_bn.c: batchnorm nd's TRAIN forward / backward with the statistics summed over the ranks by
 * m->bn_reduce (the arguments those of bn_forward_train / bn_backward); its scratch freed. */
int fp_mi_sync_bn_forward(fp_model *m, const node_t *nd, fp_tensor y, fp_tensor save, fp_tensor rm, fp_tensor rv,
                          fp_tensor x, fp_tensor gamma, fp_tensor beta);
int fp_mi_sync_bn_backward(fp_model *m, fp_tensor dx, fp_tensor dgamma, fp_tensor dbeta, fp_tensor dy, fp_tensor x,
                           fp_tensor gamma, fp_tensor save, int accumulate);
void fp_mi_sync_bn_release(fp_model *m);
/* Forward / backward on backend memory: *blogits (backend memory, fp32); bdlogits backend memory. */
int fp_mi_forward(fp_model *m, const float **blogits, const float *x, int n, fp_mode mode);
int fp_mi_backward(fp_model *m, const float *bdlogits);
/* model_forward.c */
void fp_mi_relabel(int rc, const char *model, const char *what, const char *layer);
/* Hands a tensor (backend memory, storage format d) to the probe; on a device backend it is downloaded
 * into the host staging buffer first (only called at sampling steps). */
void fp_mi_probe_value(fp_model *m, const void *p, fp_dtype d, size_t cnt, int layer, fp_tensor_role role);

#endif
