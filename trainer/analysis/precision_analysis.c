/* precision_analysis.c — analysis.h: the per-layer rounding error object (fp_prec_err) and its one-call
 * comparison (fp_prec_err_compare); riding on the reference's step is precision_ride.c, the error sums
 * layer_error.c, the skipped-step post-mortem skipped_step.c, the parameter pass param_pass.c.
 * Promises: the fp32 model is left as it was (running statistics restored by fp_prec_err_compare);
 * the captures are sized once per batch size; the scratch clones are made once and reused and read
 * the reference's fp32 parameters in place (fp_model_share_params; `half` gets a rounded copy); 16-bit
 * outputs are captured as stored; errors are summed in double. On the GPU: precision_device.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "formats.h"
#include "trainer/analysis/analysis.h"
#include "trainer/analysis/precision_internal.h"

/* The rows of a new comparison at step, all "not measured" until a layer is compared. */
void fp_pe_rows_begin(fp_prec_err *pe, int64_t step)
{
    pe->step = step;
    for (int l = 0; l < pe->nlayers; l++)
        pe->rows[l] = (fp_layer_err_t){NAN, NAN, NAN};
}

/* The rows of the comparison at step are complete: kept, and stored when a store is set. */
void fp_pe_rows_end(fp_prec_err *pe, int64_t step)
{
    pe->last_step = step;
    pe->have_rows = 1;
    if (!pe->store)
        return;
    for (int l = 0; l < pe->nlayers; l++) {
        const fp_layer_err_t *r = &pe->rows[l];
        if (isnan(r->rel_l2) && isnan(r->cosine))
            continue;
        fp_precision_rec_t rec = {pe->run, pe->ref_run, step, l, FP_ROLE_ACTIVATION, r->rel_l2, r->max_abs, r->cosine};
        fp_store_precision(pe->store, &rec);
    }
}

/* Row `layer` from n reference values (fp32) and n low-precision ones (fp32 or 16-bit as stored), both in host
 * memory (the probes hand over host copies). */
void fp_pe_layer_row(fp_prec_err *pe, int layer, const float *ref, const void *lo, fp_dtype lo_dt, size_t n)
{
    if (fp_layer_error_on(NULL, NULL, ref, lo, lo_dt, n, &pe->rows[layer]))
        pe->rows[layer] = (fp_layer_err_t){NAN, NAN, NAN};   /* not measured (only a bad dtype gets here) */
}

/* The scratch reads ref's weights: in place when its master is fp32 (the forward only reads them), a
 * rounded copy under `half` (its parameters are fp16 values). */
int fp_pe_scratch_weights(fp_prec_err *pe, fp_model *ref)
{
    const fp_policy *pol = fp_model_policy(pe->scratch);
    if (pol->master == FP_DT_F32)
        return fp_model_share_params(pe->scratch, ref);
    int rc = fp_model_copy_params(pe->scratch, ref, 1);
    if (!rc) {
        fp_round_to_dtype(fp_model_params(pe->scratch), fp_model_num_params(pe->scratch), pol->master);
        fp_round_to_dtype(fp_model_buffers(pe->scratch), fp_model_num_buffers(pe->scratch), pol->master);
    }
    return rc;
}

static unsigned cap_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)step;
    (void)loss_scale;
    (void)self;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}

/* Where layer's activation of n values goes in the capture; NULL for another tensor, or when n is not the
 * count the capture was laid out for (the capture is then marked unusable). */
static void *cap_slot(fp_prec_err *pe, int layer, fp_tensor_role role, size_t n)
{
    if (role != FP_ROLE_ACTIVATION || layer < 0 || layer >= pe->nlayers)
        return NULL;
    if (n != pe->cnt[layer]) {
        pe->capture_ok = 0;
        return NULL;
    }
    return pe->cap + pe->off[layer];
}

static void cap_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    void *dst = cap_slot(pe, layer, role, n);
    if (!dst)
        return;
    if (pe->dt[layer] == FP_DT_F16 || pe->dt[layer] == FP_DT_BF16)
        fp_narrow_array(dst, x, n, pe->dt[layer]);   /* exact: the values are of that format */
    else
        memcpy(dst, x, n * sizeof(float));
}

/* 16-bit outputs as stored: copied, no widening and narrowing back. */
static void cap_tensor16(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt, size_t n,
                         float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    void *dst = cap_slot(pe, layer, role, n);
    if (!dst)
        return;
    if (pe->dt[layer] == dt)
        memcpy(dst, x, n * sizeof *x);
    else if (pe->dt[layer] == FP_DT_F32)
        fp_widen_array(dst, x, n, dt);
    else
        pe->capture_ok = 0;
}

static const fp_probe_ops capture_ops = {"precision_capture", cap_step_begin, NULL, NULL, NULL, cap_tensor};

static unsigned cmp_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    if (!pe->armed)
        return 0;
    fp_pe_rows_begin(pe, step);
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}

static void cmp_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    if (!pe->armed || role != FP_ROLE_ACTIVATION || layer < 0 || layer >= pe->nlayers || n != pe->cnt[layer])
        return;
    fp_pe_layer_row(pe, layer, x, pe->cap + pe->off[layer], pe->dt[layer], n);
}

static void cmp_step_end(void *self, int64_t step)
{
    fp_prec_err *pe = self;
    if (!pe->armed)
        return;
    pe->armed = 0;
    fp_pe_rows_end(pe, step);
}

static const fp_probe_ops compare_ops = {"precision_error", cmp_step_begin, cmp_step_end, NULL, NULL, cmp_tensor};

int fp_prec_err_create(fp_prec_err **out, const fp_model *ref, const fp_policy *policy)
{
    *out = NULL;
    fp_prec_err *pe = calloc(1, sizeof *pe);
    if (!pe)
        return fp_fail(FP_ENOMEM, "precision error: out of memory");
    int rc = fp_model_clone(&pe->scratch, ref);
    rc = rc ? rc : fp_model_set_policy(pe->scratch, policy);
    rc = rc ? rc : fp_probe_create(&pe->sp);
    rc = rc ? rc : fp_probe_create(&pe->rp);
    rc = rc ? rc : fp_probe_create(&pe->ridep);
    if (rc) {
        fp_prec_err_free(pe);
        return rc;
    }
    pe->nlayers = fp_model_layer_count(ref);
    size_t L = (size_t)pe->nlayers;
    pe->off = calloc(L, sizeof *pe->off);
    pe->cnt = calloc(L, sizeof *pe->cnt);
    pe->dt = calloc(L, sizeof *pe->dt);
    pe->rows = calloc(L, sizeof *pe->rows);
    pe->per_image = calloc(L, sizeof *pe->per_image);
    pe->roff = calloc(L, sizeof *pe->roff);
    pe->kept = calloc(L, sizeof *pe->kept);
    pe->rsrc = calloc(L, sizeof *pe->rsrc);
    if (!pe->off || !pe->cnt || !pe->dt || !pe->rows || !pe->per_image || !pe->roff || !pe->kept || !pe->rsrc) {
        fp_prec_err_free(pe);
        return fp_fail(FP_ENOMEM, "precision error: out of memory");
    }
    int widest = 1;
    const fp_policy *rpol = fp_model_policy(ref);
    int ref32 = !rpol || rpol->activation == FP_DT_F32;   /* outputs handed over as fp32, readable in place */
    for (int l = 0; l < pe->nlayers; l++) {
        const fp_layer_info *li = fp_model_layer(ref, l);
        pe->per_image[l] = (size_t)li->out.h * li->out.w * li->out.c;
        pe->kept[l] = (unsigned char)(ref32 && fp_model_output_kept(ref, l));
        if (li->type == FP_LAYER_BN && li->in.c > widest)
            widest = li->in.c;
    }
    pe->cs = malloc(4 * (size_t)widest * sizeof *pe->cs);
    pe->full = malloc(2 * (size_t)widest * sizeof *pe->full);
    if (!pe->cs || !pe->full) {
        fp_prec_err_free(pe);
        return fp_fail(FP_ENOMEM, "precision error: out of memory");
    }
    pe->sub = FP_PREC_ERR_DEFAULT_SUBBATCH;
    fp_probe_add16(pe->sp, &capture_ops, cap_tensor16, pe);
    fp_probe_add(pe->rp, &compare_ops, pe);
    fp_probe_add16(pe->ridep, &fp_pe_ride_ops, fp_pe_ride_tensor16, pe);
    fp_model_set_probe(pe->scratch, pe->sp);
    pe->last_step = -1;
    *out = pe;
    return FP_OK;
}

void fp_prec_err_free(fp_prec_err *pe)
{
    if (!pe)
        return;
    fp_pe_device_free(pe);
    fp_model_free(pe->scratch);
    fp_model_free(pe->ref_scratch);
    fp_probe_free(pe->sp);
    fp_probe_free(pe->rp);
    fp_probe_free(pe->ridep);
    free(pe->per_image);
    free(pe->roff);
    free(pe->kept);
    free(pe->rsrc);
    free(pe->rcap);
    free(pe->cs);
    free(pe->full);
    free(pe->off);
    free(pe->cnt);
    free(pe->dt);
    free(pe->cap);
    free(pe->rows);
    free(pe);
}

void fp_prec_err_set_store(fp_prec_err *pe, fp_store_t *store, int64_t run, int64_t ref_run)
{
    pe->store = store;
    pe->run = run;
    pe->ref_run = ref_run;
}

size_t fp_pe_capture_layout(fp_prec_err *pe, const fp_model *m, int n)
{
    size_t total = 0;
    for (int l = 0; l < pe->nlayers; l++) {
        const fp_layer_info *li = fp_model_layer(m, l);
        pe->dt[l] = fp_model_layer_dtype(m, l);
        pe->cnt[l] = (size_t)li->out.h * li->out.w * li->out.c * (size_t)n;
        pe->off[l] = total;
        total += (pe->cnt[l] * (size_t)fp_dtype_bytes(pe->dt[l]) + 63) / 64 * 64;
    }
    return total;
}

static int size_capture(fp_prec_err *pe, int n)
{
    if (pe->cap_n == n)
        return FP_OK;
    pe->dcap_n = 0;   /* the layout is the host capture's now */
    size_t total = fp_pe_capture_layout(pe, pe->scratch, n);
    unsigned char *p = realloc(pe->cap, total ? total : 1);
    if (!p)
        return fp_fail(FP_ENOMEM, "precision error: out of memory for %zu MiB of captured outputs", total >> 20);
    pe->cap = p;
    pe->cap_bytes = total;
    pe->cap_n = n;
    return FP_OK;
}

/* The low-precision forward on x (n images, TRAIN) with ref's weights, its outputs captured. */
static int run_lowp(fp_prec_err *pe, fp_model *ref, const float *x, int n)
{
    int rc = fp_pe_scratch_weights(pe, ref);
    if (rc)
        return rc;
    if ((rc = size_capture(pe, n)))
        return rc;
    pe->capture_ok = 1;
    fp_probe_step_begin(pe->sp, 0, 1.0f);
    rc = fp_model_forward(pe->scratch, NULL, x, n, FP_MODE_TRAIN);
    fp_probe_step_end(pe->sp);
    if (rc)
        return rc;
    if (!pe->capture_ok)
        return fp_fail(FP_EINTERNAL, "precision error: captured outputs do not match the layers");
    pe->armed = 1;
    return FP_OK;
}

void fp_prec_err_set_subbatch(fp_prec_err *pe, int k)
{
    if (pe)
        pe->sub = k > 0 ? k : 0;
}

int fp_prec_err_subbatch(const fp_prec_err *pe, int n)
{
    return pe && pe->sub > 0 && pe->sub < n ? pe->sub : n;
}

/* The reference forward on the first k < n images: on a clone of ref (made once, ref's policy, its
 * parameters read in place, running statistics copied in each time), so that ref keeps its plan for n and its
 * state untouched. */
static int ref_forward_sub(fp_prec_err *pe, fp_model *ref, const float *x, int k, int64_t step)
{
    int rc = FP_OK;
    if (!pe->ref_scratch) {
        rc = fp_model_clone(&pe->ref_scratch, ref);
        rc = rc ? rc : fp_model_set_policy(pe->ref_scratch, fp_model_policy(ref));
        if (rc) {
            fp_model_free(pe->ref_scratch);
            pe->ref_scratch = NULL;
            return rc;
        }
    }
    if (fp_model_policy(pe->ref_scratch)->master == FP_DT_F32)
        rc = fp_model_share_params(pe->ref_scratch, ref);
    else
        rc = fp_model_copy_params(pe->ref_scratch, ref, 1);
    if (rc)
        return rc;
    fp_model_set_probe(pe->ref_scratch, pe->rp);
    fp_probe_step_begin(pe->rp, step, 1.0f);
    rc = fp_model_forward(pe->ref_scratch, NULL, x, k, FP_MODE_TRAIN);
    fp_probe_step_end(pe->rp);
    fp_model_set_probe(pe->ref_scratch, NULL);
    return rc;
}

int fp_prec_err_compare(fp_prec_err *pe, fp_model *ref, const float *x, int n, int64_t step)
{
    int rc;
    if (fp_pe_compare_device(pe, ref, x, n, step, &rc))   /* a reference on the GPU, when asked */
        return rc;
    int k = fp_prec_err_subbatch(pe, n);
    rc = run_lowp(pe, ref, x, k);
    if (rc)
        return rc;
    if (k < n) {
        rc = ref_forward_sub(pe, ref, x, k, step);
        pe->armed = 0;
        return rc;
    }
    size_t nb = fp_model_num_buffers(ref);
    float *saved = malloc((nb ? nb : 1) * sizeof(float));
    if (!saved)
        return fp_fail(FP_ENOMEM, "precision error: out of memory");
    memcpy(saved, fp_model_buffers(ref), nb * sizeof(float));
    fp_probe *keep = fp_model_probe(ref);
    fp_model_set_probe(ref, pe->rp);
    fp_probe_step_begin(pe->rp, step, 1.0f);
    rc = fp_model_forward(ref, NULL, x, n, FP_MODE_TRAIN);
    fp_probe_step_end(pe->rp);
    fp_model_set_probe(ref, keep);
    memcpy(fp_model_buffers(ref), saved, nb * sizeof(float));
    free(saved);
    pe->armed = 0;
    return rc;
}

const fp_layer_err_t *fp_prec_err_rows(const fp_prec_err *pe, int *count)
{
    if (count)
        *count = pe && pe->have_rows ? pe->nlayers : 0;
    return pe && pe->have_rows ? pe->rows : NULL;
}

int64_t fp_prec_err_last_step(const fp_prec_err *pe) { return pe ? pe->last_step : -1; }
fp_model *fp_prec_err_scratch(fp_prec_err *pe) { return pe->scratch; }

