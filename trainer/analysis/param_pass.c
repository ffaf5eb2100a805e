/* param_pass.c — analysis.h: the parameter pass after the optimizer step of a sampled step (lost
 * updates, the update tensors, the weight roles handed to the probes) and the copy of the parameters
 * before it. Promises: each array is read once, the pass in cache-sized pieces handed on while in
 * cache; over the kernels' pool (lib/thread_pool.h: parts of whole layers of about equal
 * parameter counts, claimed in turn by its threads; the copy in ranges) the results equal one thread's
 * bit for bit, whichever thread takes which part; counts are exact; the probe's loss scale is restored
 * on return. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "trainer/analysis/analysis.h"
#include "thread_pool.h"
#include "trainer/layers.h"
#include "trainer/optim.h"

double fp_lost_update_fraction(const float *old_w, const float *new_w, const float *grad, size_t n)
{
    size_t moved = 0, lost = 0;
    for (size_t i = 0; i < n; i++) {
        if (grad[i] == 0.0f || !isfinite(grad[i]))
            continue;
        moved++;
        lost += new_w[i] == old_w[i];
    }
    return moved ? (double)lost / (double)moved : NAN;
}

/* Pieces of at most UPDATE_CHUNK weights: d = new - old, and the weights with a finite nonzero gradient (moved)
 * and of those the unchanged ones (lost): layers.h fp_update_piece (branch-free, 32-bit counts: vectorised). */
#define UPDATE_CHUNK 65536   /* 256 KiB per array: in L2, and few histogram calls */
#define UPDATE_CHUNK_SMALL 4096

/* The same counts from the update the optimizer wrote (fp_optim_step_part_delta) and the new values:
 * new == old exactly when d == 0, or when d is NaN (inf - inf) with an infinite new value. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("arch=x86-64-v3", "default"), optimize("tree-vectorize")))
#endif
static void delta_counts(const float *restrict d, const float *restrict nw, const float *restrict g, size_t c,
                         uint32_t *lost, uint32_t *moved)
{
    uint32_t lo = 0, mv = 0;
    for (size_t k = 0; k < c; k++) {
        uint32_t gb, nb;
        memcpy(&gb, &g[k], sizeof gb);
        memcpy(&nb, &nw[k], sizeof nb);
        uint32_t m = (gb & 0x7FFFFFFFu) - 1u < 0x7F7FFFFFu;   /* finite and nonzero */
        uint32_t inf_new = (nb & 0x7FFFFFFFu) == 0x7F800000u;
        uint32_t same = (uint32_t)(d[k] == 0.0f) | ((uint32_t)(d[k] != d[k]) & inf_new);
        mv += m;
        lo += m & same;
    }
    *lost = lo;
    *moved = mv;
}

/* One layer's parameters [0, n) (flat offset off) in UPDATE_CHUNK pieces, each read once from memory
 * and handed on while in cache: the weights as the forward used them (old), the gradients, the
 * update (into d, of UPDATE_CHUNK floats), as `roles` says; with the counts of lost / moved weights.
 * With opt (old unused), each piece's weights are handed over first, then the optimizer updates the
 * piece writing its update into d (fp_optim_step_part_delta): no copy of the old values. */
static void layer_params(fp_probe *p, unsigned roles, int layer, size_t off, const float *nw, const float *old,
                         const float *g, size_t n, float *d, size_t chunk, fp_optim *opt, size_t *lost, size_t *moved)
{
    size_t lo = 0, mv = 0;
    for (size_t i = 0; i < n; i += chunk) {
        size_t c = n - i < chunk ? n - i : chunk;
        uint32_t l32, m32;
        if (opt) {
            if (roles & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT))
                fp_probe_tensor(p, layer, FP_ROLE_WEIGHT, nw + i, c);   /* before the step: old */
            fp_optim_step_part_delta(opt, off + i, off + i + c, d);
            delta_counts(d, nw + i, g + i, c, &l32, &m32);
        } else {
            fp_update_piece(d, nw + i, old + i, g + i, c, &l32, &m32);
            if (roles & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT))
                fp_probe_tensor(p, layer, FP_ROLE_WEIGHT, old + i, c);
        }
        lo += l32;
        mv += m32;
        if (roles & FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD))
            fp_probe_tensor(p, layer, FP_ROLE_WEIGHT_GRAD, g + i, c);
        if (roles & FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE))
            fp_probe_tensor(p, layer, FP_ROLE_UPDATE, d, c);
    }
    *lost += lo;
    *moved += mv;
}

/* ---- the copy of the parameters before a sampled step, in ranges over the pool (memory-bound:
 * measured 94 MB ~8 ms on two threads against ~10-13 ms on one, 2-core VM) */

#define COPY_PAR_MIN ((size_t)1 << 20)   /* floats per thread: below, a worker costs more than it saves */

typedef struct {
    float *dst;
    const float *src;
} copy_t;

static void copy_range(void *ctx, size_t b, size_t e)
{
    const copy_t *c = ctx;
    memcpy(c->dst + b, c->src + b, (e - b) * sizeof *c->dst);
}

void fp_probe_copy_params(float *dst, const float *src, size_t n)
{
    copy_t c = {dst, src};
    fp_parallel_for(n, 16, COPY_PAR_MIN, copy_range, &c);   /* 64-byte aligned ranges when dst and src are */
}

/* ---- the pass */

typedef struct {
    fp_probe *p;
    const fp_model *m;
    unsigned roles;
    const float *nw, *old, *g;
    int l0, l1;          /* layers [l0, l1) */
    float *d;            /* chunk floats */
    fp_optim *opt;       /* the optimizer run piece by piece (fp_probe_sample_params_stepping) or NULL */
    size_t chunk;
    double *per_layer;
    size_t lost, moved;  /* out */
} part_t;

static void params_part(part_t *t)
{
    for (int l = t->l0; l < t->l1; l++) {
        size_t off, cnt, ll = 0, lm = 0;
        fp_model_layer_params(t->m, l, &off, &cnt);
        if (cnt)
            layer_params(t->p, t->roles, l, off, t->nw + off, t->opt ? NULL : t->old + off, t->g + off, cnt, t->d,
                         t->chunk, t->opt, &ll, &lm);
        t->lost += ll;
        t->moved += lm;
        if (t->per_layer)
            t->per_layer[l] = lm ? (double)ll / (double)lm : NAN;
    }
}

/* The pass's parts (whole layers of about equal parameter counts) run over the pool: each thread claims
 * its parts in turn, so a thread slowed down takes fewer; each running part uses a free piece-buffer slot
 * (no more parts run at once than the pool has threads, nor than there are parts). */
#define PASS_PARTS 8

typedef struct {
    part_t part[PASS_PARTS];
    float *bufs;          /* nslots x chunk floats: a slot's update piece buffer */
    int nslots;
    atomic_uint busy;     /* the slots in use, a bit each */
} pass_t;

static int claim_slot(pass_t *ps)
{
    for (;;) {
        unsigned b = atomic_load(&ps->busy);
        for (int s = 0; s < ps->nslots; s++)
            if (!(b & (1u << s)) && atomic_compare_exchange_strong(&ps->busy, &b, b | (1u << s)))
                return s;
    }
}

/* Parts [b, e) of the pass (the pool's range function). */
static void params_parts(void *ctx, size_t b, size_t e)
{
    pass_t *ps = ctx;
    int slot = claim_slot(ps);
    for (size_t k = b; k < e; k++) {
        part_t *t = &ps->part[k];
        t->d = ps->bufs + (size_t)slot * t->chunk;
        params_part(t);
    }
    atomic_fetch_and(&ps->busy, ~(1u << slot));
}

/* first[0..parts]: part j holds layers [first[j], first[j + 1]), cut where the running parameter count
 * passes j / parts of the total (a part may be empty). */
static void split_layers(const fp_model *m, int nl, int parts, int *first)
{
    size_t total = 0, acc = 0, cnt;
    for (int l = 0; l < nl; l++) {
        fp_model_layer_params(m, l, NULL, &cnt);
        total += cnt;
    }
    int j = 1;
    first[0] = 0;
    for (int l = 0; l < nl && j < parts; l++) {
        fp_model_layer_params(m, l, NULL, &cnt);
        acc += cnt;
        if (acc * (size_t)parts >= total * (size_t)j)
            first[j++] = l + 1;
    }
    while (j <= parts)
        first[j++] = nl;
}

unsigned fp_probe_params_roles(const fp_probe *p)
{
    /* the weight roles when the caller took them over from the model; the update always (the model has none) */
    const unsigned wroles = FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT) | FP_PROBE_ROLE_BIT(FP_ROLE_WEIGHT_GRAD);
    return ((fp_probe_wants_all(p) & ~fp_probe_wants(p)) & wroles) |
           (fp_probe_wants_all(p) & FP_PROBE_ROLE_BIT(FP_ROLE_UPDATE));
}

/* The pass over m's layers, its parts over the pool, with old_params or the optimizer run piece by
 * piece (opt); returns the lost-update fraction over all parameters. */
static double params_pass(fp_probe *p, fp_model *m, const float *old_params, fp_optim *opt, const float *grads,
                          double *per_layer)
{
    unsigned roles = fp_probe_params_roles(p);
    float scale = fp_probe_loss_scale(p), small[UPDATE_CHUNK_SMALL];
    int nl = fp_model_layer_count(m);
    pass_t ps;
    ps.nslots = fp_pool_threads() < PASS_PARTS ? fp_pool_threads() : PASS_PARTS;
    ps.bufs = malloc((size_t)ps.nslots * UPDATE_CHUNK * sizeof *ps.bufs);
    atomic_init(&ps.busy, 0u);
    part_t whole = {p, m, roles, fp_model_params(m), old_params, grads, 0, nl, small,
                    opt, ps.bufs ? UPDATE_CHUNK : UPDATE_CHUNK_SMALL, per_layer, 0, 0};
    if (roles)
        fp_probe_set_loss_scale(p, 1.0f);   /* the gradients are unscaled already */
    size_t lost = 0, moved = 0;
    if (ps.bufs) {
        int first[PASS_PARTS + 1];
        split_layers(m, nl, PASS_PARTS, first);
        for (int j = 0; j < PASS_PARTS; j++) {
            ps.part[j] = whole;
            ps.part[j].l0 = first[j];
            ps.part[j].l1 = first[j + 1];
        }
        fp_parallel_for(PASS_PARTS, 1, 1, params_parts, &ps);
        for (int j = 0; j < PASS_PARTS; j++) {
            lost += ps.part[j].lost;
            moved += ps.part[j].moved;
        }
    } else {   /* no memory: smaller pieces, one part */
        params_part(&whole);
        lost = whole.lost;
        moved = whole.moved;
    }
    if (roles)
        fp_probe_set_loss_scale(p, scale);
    free(ps.bufs);
    return moved ? (double)lost / (double)moved : NAN;
}

double fp_probe_sample_params(fp_probe *p, fp_model *m, const float *old_params, const float *grads, double *per_layer)
{
    return params_pass(p, m, old_params, NULL, grads, per_layer);
}

int fp_probe_params_steppable(fp_model *m, const fp_optim *opt)
{
    size_t next = 0, off, cnt;
    for (int l = 0; l < fp_model_layer_count(m); l++) {   /* the layers tile the parameters, in order */
        fp_model_layer_params(m, l, &off, &cnt);
        if (cnt && off != next)
            return 0;
        next += cnt;
    }
    return next == fp_model_num_params(m) && fp_optim_size(opt) == next &&
           fp_optim_laid_out_from(opt, fp_model_params(m));
}

double fp_probe_sample_params_stepping(fp_probe *p, fp_model *m, fp_optim *opt, const float *grads,
                                       double *per_layer)
{
    return params_pass(p, m, NULL, opt, grads, per_layer);
}
