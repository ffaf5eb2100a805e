/* model_info.c — read-only views of a built model: accessors, layer and tensor tables, MACs / FLOPs,
 * OIHW <-> OHWI, and the memory accounting of fp_model_memory.
 * Promises: no allocation, no change to the model (except set_threads). The accessors that hand out
 * parameter / gradient / buffer memory live in model_device.c (they synchronise device mirrors). */
#include "trainer/model_internal.h"

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
const char *fp_model_name(const fp_model *m) { return m->name; }
size_t fp_model_num_params(const fp_model *m) { return m->nparams; }
size_t fp_model_num_buffers(const fp_model *m) { return m->nbuffers; }
fp_dims fp_model_input_dims(const fp_model *m) { return m->values[0].d; }

int fp_model_output_kept(const fp_model *m, int layer)
{
    if (!m || layer < 0 || layer >= m->nnodes || !m->ops->host_memory)
        return 0;
    int out = m->nodes[layer].out, s = m->values[out].storage;
    int kept = s == m->values[m->nvalues - 1].storage;   /* the logits' storage is kept (model_plan.c) */
    for (int v = 0; v < m->nvalues; v++) {
        if (m->values[v].storage != s)
            continue;
        if (m->values[v].producer > layer)   /* a later node writes in place over it */
            return 0;
        kept |= m->values[v].needed_bwd;
    }
    return kept;
}
int fp_model_num_classes(const fp_model *m) { return m->num_classes; }
void fp_model_set_threads(fp_model *m, int threads)
{
    m->threads = threads < 1 ? 1 : threads;
    m->ops->set_threads(m->be, m->threads);
}

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
void fp_model_memory(const fp_model *m, fp_model_mem *o)
{
    memset(o, 0, sizeof *o);
    o->params = m->nparams * sizeof(float);
    o->grads = m->nparams * sizeof(float);
    o->buffers = m->nbuffers * sizeof(float);
    o->activations = fp_mi_plan_bytes(&m->plan[0]) + fp_mi_plan_bytes(&m->plan[1]);
    o->activations_peak = m->act_peak > o->activations ? m->act_peak : o->activations;
    o->saved = m->plan[FP_MODE_TRAIN].saved_bytes;
    o->saved_peak = m->saved_peak > o->saved ? m->saved_peak : o->saved;
    o->act_grads = m->gb_bytes;
    o->act_grads_peak = m->gb_peak;
    fp_backend_mem bm;
    m->ops->memory(m->be, &bm);   /* the conv workspace and the fp32 staging of 16-bit tensors */
    o->workspace = bm.workspace + bm.staging;
    o->workspace_peak = bm.workspace_peak + bm.staging_peak;
    o->casts = bm.staging;
    o->weight_copy = m->wlow ? m->nparams * sizeof(float) : 0;
}
