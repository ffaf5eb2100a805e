/* precision_analysis.c — analysis.h: per-layer rounding error of a low-precision forward against the
 * fp32 one (same weights, same batch), skipped-step post-mortem (the parameter pass: param_pass.c).
 * Promises: the fp32 model is left as it was (running statistics restored by fp_prec_err_compare);
 * the captures are sized once per batch size; the scratch clones are made once and reused and read
 * the reference's fp32 parameters in place (fp_model_share_params; `half` gets a rounded copy); 16-bit
 * outputs are captured as stored; errors are summed in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "formats.h"
#include "probe/analysis.h"

#define CHUNK 4096

/* ---------------------------------------------------------------- error metrics */

typedef struct {
    double dd, rr, xx, xr, maxabs;
    int nonfinite;
} err_acc;

/* SUM_LANES independent partial sums (lane = index mod SUM_LANES, then a fixed tree), so the loop
 * vectorises; a non-finite input shows as a non-finite sum of squares (finite squares of floats
 * cannot overflow a double sum). */
#define SUM_LANES 8
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("arch=x86-64-v3", "default")))   /* AVX2 + FMA where the CPU has them */
#endif
static void acc_add(err_acc *a, const float *ref, const float *x, size_t n)
{
    double dd[SUM_LANES] = {0}, rr[SUM_LANES] = {0}, xx[SUM_LANES] = {0}, xr[SUM_LANES] = {0}, mx[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int j = 0; j < SUM_LANES; j++) {
            double r = ref[i + j], v = x[i + j], d = v - r, ad = fabs(d);
            dd[j] += d * d;
            rr[j] += r * r;
            xx[j] += v * v;
            xr[j] += v * r;
            mx[j] = ad > mx[j] ? ad : mx[j];
        }
    for (int j = 0; i < n; i++, j++) {
        double r = ref[i], v = x[i], d = v - r, ad = fabs(d);
        dd[j] += d * d;
        rr[j] += r * r;
        xx[j] += v * v;
        xr[j] += v * r;
        mx[j] = ad > mx[j] ? ad : mx[j];
    }
    for (int w = SUM_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) {
            dd[j] += dd[j + w];
            rr[j] += rr[j + w];
            xx[j] += xx[j + w];
            xr[j] += xr[j + w];
            mx[j] = mx[j + w] > mx[j] ? mx[j + w] : mx[j];
        }
    if (!isfinite(rr[0]) || !isfinite(xx[0]))
        a->nonfinite = 1;
    a->dd += dd[0];
    a->rr += rr[0];
    a->xx += xx[0];
    a->xr += xr[0];
    if (mx[0] > a->maxabs)
        a->maxabs = mx[0];
}

static void acc_finish(const err_acc *a, double *rel_l2, double *max_abs, double *cosine)
{
    double rel, cs;
    if (a->nonfinite) {
        rel = INFINITY;
        cs = NAN;
    } else {
        rel = a->rr > 0 ? sqrt(a->dd / a->rr) : sqrt(a->dd);
        if (a->rr == 0 && a->xx == 0)
            cs = 1.0;
        else if (a->rr == 0 || a->xx == 0)
            cs = 0.0;
        else
            cs = a->xr / (sqrt(a->xx) * sqrt(a->rr));
    }
    if (rel_l2)
        *rel_l2 = rel;
    if (max_abs)
        *max_abs = a->nonfinite ? INFINITY : a->maxabs;
    if (cosine)
        *cosine = cs;
}

void fp_layer_error(const float *ref, const float *x, size_t n, double *rel_l2, double *max_abs, double *cosine)
{
    err_acc a = {0};
    acc_add(&a, ref, x, n);
    acc_finish(&a, rel_l2, max_abs, cosine);
}

/* ---------------------------------------------------------------- per-layer rounding error */

struct fp_prec_err {
    fp_model *scratch;
    fp_model *ref_scratch; /* fp_prec_err_compare on a sub-batch: the reference's clone (its policy) */
    int sub;               /* fp_prec_err_set_subbatch */
    fp_probe *sp;          /* on the scratch: the capture backend (fp_prec_err_compare) */
    fp_probe *rp;          /* for fp_prec_err_compare: the compare backend alone */
    fp_probe *ridep;       /* on the scratch: the compare-with-the-reference backend (fp_prec_err_ride) */
    int nlayers;
    size_t *off, *cnt;     /* per layer: byte offset into cap, values */
    fp_dtype *dt;
    unsigned char *cap;
    size_t cap_bytes;
    int cap_n;             /* batch the capture offsets are for */
    int capture_ok;
    /* riding: the reference's outputs of its first rk images, fp32, captured during its forward */
    size_t *per_image;     /* per layer: values per image */
    size_t *roff;          /* per layer: float offset into rcap */
    float *rcap;
    size_t rcap_floats;
    int rk, rn;            /* images captured, of a batch of rn */
    int rarmed;            /* fp_prec_err_arm called, until the step ends or the ride */
    int rlayers;           /* layers captured at this step */
    int64_t rstep;
    fp_model *ride_ref;    /* during fp_prec_err_ride: the reference lending its statistics */
    double *cs;            /* channel statistics scratch: 4 * widest batchnorm */
    float *full;           /* the reference's whole-batch mean and variance: 2 * widest batchnorm */
    fp_layer_err_t *rows;
    int armed;
    int64_t step, last_step;
    fp_store_t *store;
    int64_t run, ref_run;
    int have_rows;
    float tmp[CHUNK];
};

/* The rows of a new comparison at step, all "not measured" until a layer is compared. */
static void rows_begin(fp_prec_err *pe, int64_t step)
{
    pe->step = step;
    for (int l = 0; l < pe->nlayers; l++)
        pe->rows[l] = (fp_layer_err_t){NAN, NAN, NAN};
}

/* The rows of the comparison at step are complete: kept, and stored when a store is set. */
static void rows_end(fp_prec_err *pe, int64_t step)
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

/* Row `layer` from n reference values (fp32) and n low-precision ones (fp32 or 16-bit as stored). */
static void layer_row(fp_prec_err *pe, int layer, const float *ref, const void *lo, fp_dtype lo_dt, size_t n)
{
    err_acc a = {0};
    int is16 = lo_dt == FP_DT_F16 || lo_dt == FP_DT_BF16;
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t c = n - i < CHUNK ? n - i : CHUNK;
        const float *l;
        if (is16) {
            fp_widen_array(pe->tmp, (const uint16_t *)lo + i, c, lo_dt);
            l = pe->tmp;
        } else {
            l = (const float *)lo + i;
        }
        acc_add(&a, ref + i, l, c);
    }
    fp_layer_err_t *r = &pe->rows[layer];
    acc_finish(&a, &r->rel_l2, &r->max_abs, &r->cosine);
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
    rows_begin(pe, step);
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}

static void cmp_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    if (!pe->armed || role != FP_ROLE_ACTIVATION || layer < 0 || layer >= pe->nlayers || n != pe->cnt[layer])
        return;
    layer_row(pe, layer, x, pe->cap + pe->off[layer], pe->dt[layer], n);
}

static void cmp_step_end(void *self, int64_t step)
{
    fp_prec_err *pe = self;
    if (!pe->armed)
        return;
    pe->armed = 0;
    rows_end(pe, step);
}

static const fp_probe_ops compare_ops = {"precision_error", cmp_step_begin, cmp_step_end, NULL, NULL, cmp_tensor};

/* ---- riding on the reference's training step: its outputs captured, then the low-precision forward ---- */

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

static void refcap_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    float *dst = refcap_slot(pe, layer, role, n);
    if (dst) {
        memcpy(dst, x, pe->per_image[layer] * (size_t)pe->rk * sizeof *dst);
        pe->rlayers++;
    }
}

static void refcap_tensor16(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt, size_t n,
                            float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    float *dst = refcap_slot(pe, layer, role, n);
    if (dst) {
        fp_widen_array(dst, x, pe->per_image[layer] * (size_t)pe->rk, dt);
        pe->rlayers++;
    }
}

static void refcap_step_end(void *self, int64_t step)   /* not ridden: the capture is dropped */
{
    (void)step;
    ((fp_prec_err *)self)->rarmed = 0;
}

static const fp_probe_ops refcap_ops = {"precision_reference", refcap_step_begin, refcap_step_end, NULL, NULL,
                                        refcap_tensor};

static unsigned ride_step_begin(void *self, int64_t step, float loss_scale)
{
    (void)self;
    (void)step;
    (void)loss_scale;
    return FP_PROBE_ROLE_BIT(FP_ROLE_ACTIVATION);
}

/* The low-precision forward's layer output (rk images) against the reference's captured one. */
static void ride_tensor16(void *self, int layer, fp_tensor_role role, const uint16_t *x, fp_dtype dt, size_t n,
                          float loss_scale)
{
    (void)loss_scale;
    fp_prec_err *pe = self;
    if (role != FP_ROLE_ACTIVATION || layer < 0 || layer >= pe->nlayers)
        return;
    if (n != pe->per_image[layer] * (size_t)pe->rk) {
        pe->capture_ok = 0;
        return;
    }
    layer_row(pe, layer, pe->rcap + pe->roff[layer], x, dt, n);
}

static void ride_tensor(void *self, int layer, fp_tensor_role role, const float *x, size_t n, float loss_scale)
{
    ride_tensor16(self, layer, role, (const uint16_t *)(const void *)x, FP_DT_F32, n, loss_scale);
}

static const fp_probe_ops ride_ops = {"precision_ride", ride_step_begin, NULL, NULL, NULL, ride_tensor};

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
    if (!pe->off || !pe->cnt || !pe->dt || !pe->rows || !pe->per_image || !pe->roff) {
        fp_prec_err_free(pe);
        return fp_fail(FP_ENOMEM, "precision error: out of memory");
    }
    int widest = 1;
    for (int l = 0; l < pe->nlayers; l++) {
        const fp_layer_info *li = fp_model_layer(ref, l);
        pe->per_image[l] = (size_t)li->out.h * li->out.w * li->out.c;
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
    fp_probe_add16(pe->ridep, &ride_ops, ride_tensor16, pe);
    fp_model_set_probe(pe->scratch, pe->sp);
    pe->last_step = -1;
    *out = pe;
    return FP_OK;
}

void fp_prec_err_free(fp_prec_err *pe)
{
    if (!pe)
        return;
    fp_model_free(pe->scratch);
    fp_model_free(pe->ref_scratch);
    fp_probe_free(pe->sp);
    fp_probe_free(pe->rp);
    fp_probe_free(pe->ridep);
    free(pe->per_image);
    free(pe->roff);
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

static int size_capture(fp_prec_err *pe, int n)
{
    if (pe->cap_n == n)
        return FP_OK;
    size_t total = 0;
    for (int l = 0; l < pe->nlayers; l++) {
        const fp_layer_info *li = fp_model_layer(pe->scratch, l);
        pe->dt[l] = fp_model_layer_dtype(pe->scratch, l);
        pe->cnt[l] = (size_t)li->out.h * li->out.w * li->out.c * (size_t)n;
        pe->off[l] = total;
        total += (pe->cnt[l] * (size_t)fp_dtype_bytes(pe->dt[l]) + 63) / 64 * 64;
    }
    unsigned char *p = realloc(pe->cap, total ? total : 1);
    if (!p)
        return fp_fail(FP_ENOMEM, "precision error: out of memory for %zu MiB of captured outputs", total >> 20);
    pe->cap = p;
    pe->cap_bytes = total;
    pe->cap_n = n;
    return FP_OK;
}

/* The scratch reads ref's weights: in place when its master is fp32 (the forward only reads them), a
 * rounded copy under `half` (its parameters are fp16 values). */
static int scratch_weights(fp_prec_err *pe, fp_model *ref)
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

/* The low-precision forward on x (n images, TRAIN) with ref's weights, its outputs captured. */
static int run_lowp(fp_prec_err *pe, fp_model *ref, const float *x, int n)
{
    int rc = scratch_weights(pe, ref);
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

int fp_prec_err_attach(fp_prec_err *pe, fp_probe *ref_probe)
{
    return fp_probe_add16(ref_probe, &refcap_ops, refcap_tensor16, pe);
}

int fp_prec_err_arm(fp_prec_err *pe, int n)
{
    int k = fp_prec_err_subbatch(pe, n);
    size_t total = 0;
    for (int l = 0; l < pe->nlayers; l++) {
        pe->roff[l] = total;
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

/* Per channel of x (rows x c, NHWC): mean and biased variance, in double. */
static void channel_stats(const float *x, size_t rows, int c, double *mean, double *var)
{
    for (int j = 0; j < c; j++)
        mean[j] = var[j] = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < c; j++) {
            double v = x[r * (size_t)c + j];
            mean[j] += v;
            var[j] += v * v;
        }
    for (int j = 0; j < c; j++) {
        mean[j] /= (double)rows;
        var[j] = var[j] / (double)rows - mean[j] * mean[j];
    }
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
        channel_stats(pe->rcap + pe->roff[input_layer], rows, c, mr, vr);
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
    int rc = scratch_weights(pe, ref);
    if (rc)
        return rc;
    rows_begin(pe, pe->rstep);
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
        rows_end(pe, pe->rstep);
    return rc;
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
    int k = fp_prec_err_subbatch(pe, n);
    int rc = run_lowp(pe, ref, x, k);
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

/* ---------------------------------------------------------------- skipped step */

int fp_skipped_step_analysis(const fp_model *m, const float *grads, float loss_scale, fp_format fmt, char *text,
                             size_t cap, double *headroom)
{
    const fp_format_info_t *fi = fp_format_info(fmt);
    double maxf = fi ? fi->max_finite : 65504.0;
    int first = -1, nl = fp_model_layer_count(m);
    size_t first_inf = 0, first_nan = 0, first_cnt = 0;
    size_t pos = 0;
    char hr[8192];
    hr[0] = 0;
    for (int l = nl - 1; l >= 0; l--) {   /* backward order */
        size_t off, cnt;
        fp_model_layer_params(m, l, &off, &cnt);
        if (headroom)
            headroom[l] = NAN;
        if (!cnt)
            continue;
        size_t ninf = 0, nnan = 0;
        float amax = 0;
        for (size_t i = off; i < off + cnt; i++) {
            float g = grads[i];
            if (isnan(g))
                nnan++;
            else if (isinf(g))
                ninf++;
            else if (fabsf(g) > amax)
                amax = fabsf(g);
        }
        if ((ninf || nnan) && first < 0) {
            first = l;
            first_inf = ninf;
            first_nan = nnan;
            first_cnt = cnt;
        }
        double h = amax > 0 ? log2(maxf / amax) : INFINITY;
        if (headroom)
            headroom[l] = h;
        if (pos < sizeof hr - 1) {
            int w = snprintf(hr + pos, sizeof hr - pos, " %s=%.2f", fp_model_layer(m, l)->name, h);
            if (w > 0)
                pos += (size_t)w < sizeof hr - pos ? (size_t)w : sizeof hr - pos - 1;
        }
    }
    if (text && cap) {
        if (first >= 0)
            snprintf(text, cap,
                     "skipped step: first non-finite gradient in backward order: layer %d %s (inf %zu, nan %zu of %zu) "
                     "at loss scale %g; headroom log2(%g/amax) per layer:%s",
                     first, fp_model_layer(m, first)->name, first_inf, first_nan, first_cnt, (double)loss_scale, maxf,
                     hr);
        else
            snprintf(text, cap, "skipped step: every parameter gradient finite at loss scale %g; headroom "
                     "log2(%g/amax) per layer:%s", (double)loss_scale, maxf, hr);
    }
    return first;
}
