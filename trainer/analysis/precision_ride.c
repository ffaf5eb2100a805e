/* precision_ride.c — analysis.h's riding precision error: the capture of the reference's outputs of
 * k images during its own TRAIN forward, then the low-precision forward on them (fp_prec_err_ride)
 * with batchnorm on the reference's whole-batch statistics moved by the rounding difference on those
 * images. Promises: the reference is only read; the capture is sized once per (batch, k); rows go out
 * only for a complete capture and forward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/analysis/precision_internal.h"
#include "thread_pool.h"
#include "trainer/precision.h"

#define STATS_PART_VALUES 16384   /* a batchnorm input's channel statistics: values per pool part, at least */

static unsigned refcap_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    if (!pe->rarmed)
        return 0;
    pe->rstep = step;
    pe->rlayers = 0;
    pe->capture_ok = 1;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}

/* The first rk images of layer's output (the reference's batch of rn), widened to fp32. */
static float *refcap_slot(fp_prec_err *pe, int layer, fp_tensor_role role, size_t n)
{
    if (!pe->rarmed || role != FP_ROLE_ACTIVATION || layer < 0 || layer >= pe->nlayers)
        return NULL;
    if (n != pe->per_image[layer] * (size_t)pe->rn) {
        pe->capture_ok = 0;
        return NULL;
    }
    return pe->rcap + pe->roff[layer];
}

/* fp32 outputs the reference keeps until its backward are read in place at the ride; the others copied. */
static void refcap_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    float *dst = refcap_slot(pe, layer, role, n);
    if (dst) {
        if (pe->kept[layer]) {
            pe->rsrc[layer] = x;
        } else {
            memcpy(dst, x, pe->per_image[layer] * (size_t)pe->rk * sizeof *dst);
            pe->rsrc[layer] = dst;
        }
        pe->rlayers++;
    }
}

void fp_pe_refcap_tensor16(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt, size_t n,
                           float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    float *dst = refcap_slot(pe, layer, role, n);
    if (dst && pe->kept[layer]) {   /* kept only for fp32 outputs (no room in rcap): not this reference */
        pe->capture_ok = 0;
        return;
    }
    if (dst) {
        fp_widen_array(dst, x, pe->per_image[layer] * (size_t)pe->rk, dt);
        pe->rsrc[layer] = dst;
        pe->rlayers++;
    }
}

static void refcap_step_end(void *self, int64_t step)   /* not ridden: the capture is dropped */
{
    (void)step;
    ((fp_prec_err *)self)->rarmed = 0;
}

const fp_probe_ops fp_pe_refcap_ops = {"precision_reference", refcap_step_begin, refcap_step_end, NULL, NULL,
                                      refcap_tensor};

static unsigned ride_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)self;
    (void)step;
    (void)loss_scale;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}

/* The low-precision forward's layer output (rk images, fp32 or 16-bit as stored) against the
 * reference's captured one. */
static void ride_row(fp_prec_err *pe, int layer, fp_tensor_role role, const void *x, fp_dtype dt, size_t n)
{
    if (role != FP_ROLE_ACTIVATION || layer < 0 || layer >= pe->nlayers)
        return;
    if (n != pe->per_image[layer] * (size_t)pe->rk) {
        pe->capture_ok = 0;
        return;
    }
    fp_pe_layer_row(pe, layer, pe->rsrc[layer], x, dt, n);
}

void fp_pe_ride_tensor16(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt, size_t n,
                         float loss_scale)
{
    (void)loss_scale;
    ride_row(self, layer, role, x, dt, n);
}

static void ride_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    (void)loss_scale;
    ride_row(self, layer, role, x, FP_DT_F32, n);
}

const fp_probe_ops fp_pe_ride_ops = {"precision_ride", ride_step_begin, NULL, NULL, NULL, ride_tensor};

int fp_prec_err_attach(fp_prec_err *pe, fp_probe *ref_probe)
{
    return fp_probe_add16(ref_probe, &fp_pe_refcap_ops, fp_pe_refcap_tensor16, pe);
}

int fp_prec_err_arm(fp_prec_err *pe, int n)
{
    int k = fp_prec_err_subbatch(pe, n);
    size_t total = 0;
    for (int l = 0; l < pe->nlayers; l++) {
        pe->roff[l] = total;
        pe->rsrc[l] = NULL;
        if (!pe->kept[l])
            total += (pe->per_image[l] * (size_t)k + 15) / 16 * 16;
    }
    if (total > pe->rcap_floats) {
        float *p = realloc(pe->rcap, total * sizeof *p);
        if (!p)
            return fp_fail(FP_ENOMEM, "precision error: out of memory for %zu MiB of reference outputs",
                           (total * sizeof *p) >> 20);
        pe->rcap = p;
        pe->rcap_floats = total;
    }
    pe->rk = k;
    pe->rn = n;
    pe->rarmed = 1;
    pe->rlayers = 0;
    return FP_OK;
}

/* Channels [jb, je) of x (rows x c, NHWC): mean and biased variance, in double (vectorised across
 * channels: each channel's sums keep their order). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("arch=x86-64-v3", "default"), optimize("tree-vectorize")))
#endif
static void channel_stats_part(const float *restrict x, size_t rows, int c, int jb, int je, double *restrict mean,
                               double *restrict var)
{
    for (int j = jb; j < je; j++)
        mean[j] = var[j] = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (int j = jb; j < je; j++) {
            double v = x[r * (size_t)c + j];
            mean[j] += v;
            var[j] += v * v;
        }
    for (int j = jb; j < je; j++) {
        mean[j] /= (double)rows;
        var[j] = var[j] / (double)rows - mean[j] * mean[j];
    }
}

typedef struct {
    const float *x;
    size_t rows;
    int c;
    double *mean, *var;
} stats_job;

static void stats_range(void *ctx, size_t b, size_t e)
{
    const stats_job *j = ctx;
    channel_stats_part(j->x, j->rows, j->c, (int)b, (int)e, j->mean, j->var);
}

/* Per channel of x: channel_stats_part over the kernels' pool in channel ranges (the same bits). */
static void channel_stats(const float *x, size_t rows, int c, double *mean, double *var)
{
    stats_job j = {x, rows, c, mean, var};
    size_t min_part = (STATS_PART_VALUES / (rows ? rows : 1) + 15) / 16 * 16;   /* 16-channel multiples */
    fp_parallel_for((size_t)c, 16, min_part ? min_part : 16, stats_range, &j);
}

/* A batchnorm of the ride's low-precision forward normalises with what the low-precision arm's own
 * whole-batch statistics would be: the reference's whole-batch mean and variance, moved by the
 * difference that rounding makes on the k images at hand (low-precision input against the
 * reference's captured one). */
static int ride_stats(void *ctx, int layer, int input_layer, const float *x, size_t rows, int c, float *mean,
                      float *var)
{
    fp_prec_err *pe = ctx;
    int rc = fp_model_bn_batch_stats(pe->ride_ref, layer, pe->full, pe->full + c);
    if (rc)
        return rc;
    double *ml = pe->cs, *vl = ml + c, *mr = vl + c, *vr = mr + c;
    if (input_layer >= 0 && pe->per_image[input_layer] * (size_t)pe->rk == rows * (size_t)c) {
        channel_stats(x, rows, c, ml, vl);
        channel_stats(pe->rsrc[input_layer], rows, c, mr, vr);
    } else {   /* no captured input to compare with: the reference's statistics as they are */
        for (int j = 0; j < 4 * c; j++)
            pe->cs[j] = 0.0;
    }
    for (int j = 0; j < c; j++) {
        double v = (double)pe->full[c + j] + (vl[j] - vr[j]);
        mean[j] = (float)((double)pe->full[j] + (ml[j] - mr[j]));
        var[j] = v > 0.0 ? (float)v : 0.0f;
    }
    return FP_OK;
}

int fp_prec_err_ride(fp_prec_err *pe, fp_model *ref, const float *x, int n)
{
    int whole = pe->rarmed && pe->capture_ok && pe->rlayers == pe->nlayers && n == pe->rn;
    pe->rarmed = 0;
    if (!whole)
        return fp_fail(FP_EINVAL, "precision error: no reference outputs captured for this batch of %d", n);
    int rc = fp_pe_scratch_weights(pe, ref);
    if (rc)
        return rc;
    fp_pe_rows_begin(pe, pe->rstep);
    pe->capture_ok = 1;
    fp_model_set_probe(pe->scratch, pe->ridep);
    fp_probe_step_begin(pe->ridep, pe->rstep, 1.0f);
    pe->ride_ref = ref;
    rc = fp_model_forward_bn_stats(pe->scratch, NULL, x, pe->rk, ride_stats, pe);
    pe->ride_ref = NULL;
    fp_probe_step_end(pe->ridep);
    fp_model_set_probe(pe->scratch, pe->sp);
    if (!rc && !pe->capture_ok)
        rc = fp_fail(FP_EINTERNAL, "precision error: low-precision outputs do not match the layers");
    if (!rc)
        fp_pe_rows_end(pe, pe->rstep);
    return rc;
}
