/* model_st.c — parameters and running statistics in safetensors: load (strict or allowing extra
 * tensors) and save, torchvision names, conv weights OIHW in the file and OHWI in memory.
 * Promises: a missing or mismatched tensor is FP_EFORMAT naming the file and the tensor. */
#include "safetensors.h"
#include "trainer/model_internal.h"

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
        if (!d) {   /* a device model whose mirror could not be synchronised: the message says why */
            rc = FP_EINTERNAL;
            break;
        }
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
    /* device mirrors current on the host first (they are part of the model's value: const holds) */
    int rc = fp_mi_to_host((fp_model *)m, FP_MI_HOST_P | FP_MI_HOST_B);
    if (rc)
        return rc;
    float *conv = malloc((m->nparams ? m->nparams : 1) * sizeof(float));
    rc = conv ? fp_st_writer_new(&w) : fp_fail(FP_ENOMEM, "%s: out of memory", path);
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
