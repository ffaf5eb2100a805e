/* model_fuse.c — batchnorm -> relu and batchnorm -> add -> relu chains run as the backend's fused op
 * (backend.h bn_act_*) in TRAIN forwards that sample nothing, and in their unsampled backwards.
 * Promises: a chain fuses only where its intermediate values have no other reader; a sampled, EVAL,
 * caller-statistics or --sync-bn forward runs every node; after a fused forward the chain's batchnorm / add outputs
 * hold stale bytes, which fp_model_layer_output refuses (fp_mi_fuse_hidden) and nothing else reads. */
#include "trainer/model_internal.h"

void fp_model_set_fusion(fp_model *m, int on) { m->fusion = on < 0 ? -1 : on != 0; }

int fp_model_fusion(const fp_model *m, int *fused_last, int *on)
{
    if (on)
        *on = m->fusion < 0 ? devmem(m) : m->fusion;
    int ok = 0, ran = 0;
    for (int k = 0; k < m->nfuse; k++) {
        ok += m->fuse[k].ok;
        ran += m->fuse[k].ran;
    }
    if (fused_last)
        *fused_last = m->fwd_fused ? ran : 0;
    return ok;
}

void fp_mi_fuse_free(fp_model *m)
{
    free(m->fuse);
    free(m->fuse_at);
    m->fuse = NULL;
    m->fuse_at = NULL;
    m->nfuse = 0;
}

/* Nodes reading value v. */
static int readers(const fp_model *m, int v)
{
    int k = 0;
    for (int i = 0; i < m->nnodes; i++)
        k += (m->nodes[i].in == v) + (m->nodes[i].in2 == v);
    return k;
}

/* The chain starting at batchnorm node i, into *f; 0 when there is none. One format throughout; y shares
 * no storage with x (y may share z's: the relu and add of a downsampling block run in place over it). */
static int chain_at(const fp_model *m, int i, fuse_t *f)
{
    const node_t *bn = &m->nodes[i];
    if (bn->info.type != FP_LAYER_BN || i + 1 >= m->nnodes || readers(m, bn->out) != 1)
        return 0;
    const node_t *nx = &m->nodes[i + 1];
    int z = -1, last = i + 1;
    if (nx->info.type == FP_LAYER_ADD) {
        if (i + 2 >= m->nnodes || m->nodes[i + 2].info.type != FP_LAYER_RELU || m->nodes[i + 2].in != nx->out ||
            readers(m, nx->out) != 1)
            return 0;
        z = nx->in == bn->out ? nx->in2 : nx->in;
        if (z == bn->out || z == bn->in)
            return 0;
        last = i + 2;
    } else if (nx->info.type != FP_LAYER_RELU || nx->in != bn->out) {
        return 0;
    }
    int y = m->nodes[last].out;
    fp_dtype dt = vdt(m, bn->in);
    if (vdt(m, bn->out) != dt || vdt(m, y) != dt || (z >= 0 && (vdt(m, z) != dt || vdt(m, nx->out) != dt)))
        return 0;
    if (m->values[y].storage == m->values[bn->in].storage)
        return 0;
    *f = (fuse_t){.bn = i, .last = last, .z = z, .ok = 1};
    return 1;
}

int fp_mi_fuse_plan(fp_model *m, plan_t *pl, int n)
{
    fp_mi_fuse_free(m);
    m->fwd_fused = 0;
    if (!m->ops->bn_act_query || !m->ops->bn_act_forward_train || !m->ops->bn_act_backward)
        return FP_OK;   /* the backend has no fused op: every node runs */
    m->fuse = malloc((size_t)m->nnodes * sizeof *m->fuse);
    m->fuse_at = malloc((size_t)m->nnodes * sizeof *m->fuse_at);
    if (!m->fuse || !m->fuse_at) {
        fp_mi_fuse_free(m);
        return fp_fail(FP_ENOMEM, "model %s: out of memory planning fusion", m->name);
    }
    size_t total = 0;
    for (int i = 0; i < m->nnodes; i++) {
        fuse_t f;
        m->fuse_at[i] = -1;
        if (!chain_at(m, i, &f))
            continue;
        int rc = m->ops->bn_act_query(m->be, &f.rsv_bytes, vten(m, FP_MODE_TRAIN, m->nodes[i].in, n), f.z >= 0);
        if (rc == FP_EUNAVAIL) {   /* not this shape / format: the unfused nodes */
            fp_error_clear();
            continue;
        }
        if (rc)
            return rc;
        f.rsv_off = total;
        total += (f.rsv_bytes + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES;
        m->fuse_at[i] = m->nfuse;
        m->fuse[m->nfuse++] = f;
    }
    if (total) {
        if (m->ops->set_label)
            m->ops->set_label(m->be, "fused batchnorm reserve (train plan)");
        int rc = m->ops->alloc(m->be, &pl->rsv, total);
        if (m->ops->set_label)
            m->ops->set_label(m->be, NULL);
        if (rc)
            return rc;
        pl->rsv_bytes = total;
        pl->saved_bytes += total;
    }
    return FP_OK;
}

int fp_mi_fuse_begin(fp_model *m, fp_mode mode, unsigned want)
{
    for (int k = 0; k < m->nfuse; k++)
        m->fuse[k].ran = 0;
    int on = 0;
    fp_model_fusion(m, NULL, &on);
    /* --sync-bn's batchnorm (model_sync_bn.c) normalises over the ranks: never fused */
    m->fwd_fused = mode == FP_MODE_TRAIN && !want && !m->bn_stats && !m->bn_reduce && on && m->nfuse > 0;
    return m->fwd_fused;
}

/* The chain node i starts (forward) or ends (backward) that may run fused now; NULL when none. */
static fuse_t *chain_starting(fp_model *m, int i)
{
    int k = m->fuse_at ? m->fuse_at[i] : -1;
    return k >= 0 && m->fuse[k].ok ? &m->fuse[k] : NULL;
}

static fuse_t *chain_ending(fp_model *m, int i)
{
    for (int k = 0; k < m->nfuse; k++)
        if (m->fuse[k].last == i)
            return m->fuse[k].ran ? &m->fuse[k] : NULL;
    return NULL;
}

static fp_tensor vec(float *base, long long off, int c)
{
    return fp_tensor_of(base + off, FP_DT_F32, (fp_dims){1, 1, 1, c});
}

/* Probe hooks: the fused op runs inside the batchnorm's pair (bn_hook: begin 1 / end 0); the add's and the
 * relu's pairs are empty (their work is in it), in the phase's node order (empty_hooks). */
static void bn_hook(fp_model *m, const fuse_t *f, fp_phase ph, int begin)
{
    if (m->probe && begin)
        fp_probe_layer_begin(m->probe, f->bn, ph);
    else if (m->probe)
        fp_probe_layer_end(m->probe, f->bn, ph);
}

static void empty_hooks(fp_model *m, const fuse_t *f, fp_phase ph)
{
    for (int k = 1; m->probe && k <= f->last - f->bn; k++) {
        int j = ph == FP_PHASE_FORWARD ? f->bn + k : f->last + 1 - k;
        fp_probe_layer_begin(m->probe, j, ph);
        fp_probe_layer_end(m->probe, j, ph);
    }
}

int fp_mi_fuse_forward(fp_model *m, int i, int n, int *rc)
{
    fuse_t *f = chain_starting(m, i);
    if (!f)
        return -1;
    const fp_backend_ops *ops = m->ops;
    plan_t *pl = &m->plan[FP_MODE_TRAIN];
    const node_t *nd = &m->nodes[i];
    int c = nd->info.in.c;
    float *P = m->dparams, *B = m->dbuffers;
    fp_tensor X = vten(m, FP_MODE_TRAIN, nd->in, n), Y = vten(m, FP_MODE_TRAIN, m->nodes[f->last].out, n);
    fp_tensor Z = f->z >= 0 ? vten(m, FP_MODE_TRAIN, f->z, n) : (fp_tensor){0};
    fp_tensor save = vec((float *)pl->aux, (long long)nd->aux, 2 * c), rm = vec(B, nd->brm, c), rv = vec(B, nd->brv, c);
    void *rsv = f->rsv_bytes ? (unsigned char *)pl->rsv + f->rsv_off : NULL;
    if (ops->set_label)
        ops->set_label(m->be, nd->info.name);
    bn_hook(m, f, FP_PHASE_FORWARD, 1);
    int r = ops->bn_act_forward_train(m->be, Y, save, rm, rv, X, Z, vec(P, nd->pw, c), vec(P, nd->pb, c), &nd->bn,
                                      rsv, f->rsv_bytes);
    if (r == FP_EUNAVAIL) {   /* refused at run time: this chain runs unfused from now on */
        fp_error_clear();
        f->ok = 0;
        bn_hook(m, f, FP_PHASE_FORWARD, 0);
        return -1;
    }
    r = r ? r : fp_mi_round_running(m, rm, rv);
    bn_hook(m, f, FP_PHASE_FORWARD, 0);
    empty_hooks(m, f, FP_PHASE_FORWARD);
    if (r)
        fp_mi_relabel(r, m->name, "fused layer", nd->info.name);
    f->ran = !r;
    *rc = r;
    return f->last;
}

int fp_mi_fuse_backward(fp_model *m, int i, int n, int *rc)
{
    fuse_t *f = chain_ending(m, i);
    int vy = m->nodes[i].out;
    if (!f || m->vgrad[vy] < 0)   /* not fused, or no gradient reaches it: the node loop */
        return -1;
    const node_t *nd = &m->nodes[f->bn];
    int c = nd->info.in.c, vx = nd->in, acc_x = 0, acc_z = 0, r = FP_OK;
    float *P = m->dparams, *G = m->dgrads;
    fp_tensor DX = {0}, DZ = {0}, DY = fp_mi_gten(m, vy, n);
    if (m->ops->set_label)
        m->ops->set_label(m->be, nd->info.name);
    if (f->z >= 0 && m->values[f->z].producer >= 0)   /* the add's gradient of z, as its backward gives it */
        r = fp_mi_grad_target(m, f->z, n, &DZ, &acc_z);
    if (!r && m->values[vx].producer >= 0)
        r = fp_mi_grad_target(m, vx, n, &DX, &acc_x);
    if (r) {
        *rc = r;
        return f->bn;
    }
    empty_hooks(m, f, FP_PHASE_BACKWARD_DATA);
    bn_hook(m, f, FP_PHASE_BACKWARD_DATA, 1);
    fp_tensor save = vec((float *)m->plan[FP_MODE_TRAIN].aux, (long long)nd->aux, 2 * c);
    void *rsv = f->rsv_bytes ? (unsigned char *)m->plan[FP_MODE_TRAIN].rsv + f->rsv_off : NULL;
    r = m->ops->bn_act_backward(m->be, DX, DZ, vec(G, nd->pw, c), vec(G, nd->pb, c), DY,
                                vten(m, FP_MODE_TRAIN, vy, n), vten(m, FP_MODE_TRAIN, vx, n), vec(P, nd->pw, c),
                                vec(P, nd->pb, c), save, &nd->bn, rsv, f->rsv_bytes, acc_x, acc_z);
    bn_hook(m, f, FP_PHASE_BACKWARD_DATA, 0);
    if (r == FP_EUNAVAIL) {   /* refused: the targets made here go back, the node loop runs the chain */
        fp_error_clear();
        f->ok = 0;
        if (DZ.p && !acc_z)
            fp_mi_grad_release(m, f->z);
        if (DX.p && !acc_x)
            fp_mi_grad_release(m, vx);
        return -1;
    }
    if (r)
        fp_mi_relabel(r, m->name, "backward of fused layer", nd->info.name);
    for (int j = f->last; j >= f->bn && !r; j--)   /* in the node loop's order */
        r = fp_mi_grads_ready(m, j);
    for (int j = f->last; j >= f->bn; j--)
        fp_mi_grad_release(m, m->nodes[j].out);
    *rc = r;
    return f->bn;
}

int fp_mi_fuse_hidden(const fp_model *m, int layer)
{
    if (!m->fwd_fused)
        return 0;
    for (int k = 0; k < m->nfuse; k++)
        if (m->fuse[k].ran && layer >= m->fuse[k].bn && layer < m->fuse[k].last)
            return 1;
    return 0;
}
