/* model_plan.c — activation planning: liveness of every storage over the node order, best-fit blocks
 * laid out in one arena per mode (TRAIN keeps what backward reads), plus the BN / argmax aux area.
 * Promises: one allocation per (mode, batch) plan; nothing allocated per step afterwards. */
#include "trainer/model_internal.h"

/* ---------------------------------------------------------------- activation planning */

static size_t round_up(size_t x) { return (x + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }
static size_t round_up_bytes(size_t x) { return (x + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES; }

/* Assigns every storage a block by liveness over the node order (best fit among free blocks), then
 * lays the blocks out in one arena. TRAIN keeps every storage that backward reads. */
int fp_mi_plan_build(fp_model *m, plan_t *pl, int n, fp_mode mode)
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
    void *arena = NULL, *auxp = NULL;
    if (m->ops->alloc(m->be, &arena, total) || m->ops->alloc(m->be, &auxp, aux * 4)) {
        char why[256];   /* the backend's own message (a device arena names its size and use) */
        snprintf(why, sizeof why, "%s", fp_error_message());
        m->ops->free(m->be, arena, total);
        rc = fp_fail(FP_ENOMEM, "model %s: out of memory for %zu MiB of activations (%s)", m->name, total >> 20, why);
        goto out;
    }
    fp_mi_plan_free(m, pl);
    pl->arena = arena;
    pl->arena_bytes = total;
    pl->max_floats = maxf;
    pl->st_off = st_off;
    st_off = NULL;
    pl->aux = auxp;
    pl->aux_units = aux;
    pl->saved_bytes = saved + aux * 4;
    pl->n = n;
    if (mode == FP_MODE_TRAIN && (rc = fp_mi_fuse_plan(m, pl, n)) != FP_OK)   /* chains and reserve spaces */
        fp_mi_plan_free(m, pl);
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

size_t fp_mi_plan_bytes(const plan_t *pl) { return pl->arena_bytes + pl->aux_units * 4 + pl->rsv_bytes; }

void fp_mi_note_peaks(fp_model *m)
{
    size_t act = fp_mi_plan_bytes(&m->plan[0]) + fp_mi_plan_bytes(&m->plan[1]);
    if (act > m->act_peak)
        m->act_peak = act;
    size_t saved = m->plan[FP_MODE_TRAIN].saved_bytes;
    if (saved > m->saved_peak)
        m->saved_peak = saved;
    if (m->gb_bytes > m->gb_peak)
        m->gb_peak = m->gb_bytes;
}
void fp_mi_plan_free(fp_model *m, plan_t *pl)
{
    m->ops->free(m->be, pl->arena, pl->arena_bytes);
    free(pl->st_off);
    m->ops->free(m->be, pl->aux, pl->aux_units * 4);
    m->ops->free(m->be, pl->rsv, pl->rsv_bytes);
    memset(pl, 0, sizeof *pl);
}
