/* layer_error.c — analysis.h fp_layer_error and the accumulation behind it (precision_internal.h):
 * relative L2 error, max abs error and cosine of x against a reference, on the host or, for tensors in a
 * CUDA backend's memory, from sums made on the device (fp_layer_error_on). Promises: sums in double, in a
 * fixed order for a given n (vectorised lanes, then a fixed tree; pieces of CHUNK values folded in
 * order, whichever thread summed them; on the device blocks, then the blocks in order); one finish for
 * both; a non-finite x shows as Inf / NaN. */
#include "config.h"
#include <math.h>
#include "error.h"
#include "trainer/analysis/analysis.h"
#include "trainer/analysis/precision_internal.h"
#include "thread_pool.h"
#include "trainer/backend.h"
#include "trainer/backend_cuda.h"
#include "trainer/cuda/layer_error_dev.h"
#include "trainer/precision.h"

/* SUM_LANES independent partial sums (lane = index mod SUM_LANES, then a fixed tree), so the loop
 * vectorises; a non-finite input shows as a non-finite sum of squares (finite squares of floats
 * cannot overflow a double sum). */
#define SUM_LANES 8
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("arch=x86-64-v3", "default")))   /* AVX2 + FMA where the CPU has them */
#endif
void fp_err_acc_add(fp_err_acc *a, const float *ref, const float *x, size_t n)
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

/* fp_err_acc_add_pieces: PIECES_MAX pieces of CHUNK values per round, each summed on its own (its
 * values 16-bit widened on the stack), then folded in order. */
#define PIECES_MAX 256
#define PIECES_PER_PART 4   /* 16 K values: smaller loops cost more to hand to the pool than to run */
typedef struct {
    const float *ref;
    const void *x;
    fp_dtype dt;
    size_t first, n;   /* values: the round's first, and the whole array's count */
    fp_err_acc acc[PIECES_MAX];
} pieces_t;

static void pieces_range(void *ctx, size_t b, size_t e)
{
    pieces_t *p = ctx;
    float tmp[CHUNK];
    for (size_t k = b; k < e; k++) {
        size_t i = p->first + k * CHUNK, c = p->n - i < CHUNK ? p->n - i : CHUNK;
        const float *l = (const float *)p->x + i;
        if (p->dt != FP_DT_F32) {
            fp_widen_array(tmp, (const uint16_t *)p->x + i, c, p->dt);
            l = tmp;
        }
        p->acc[k] = (fp_err_acc){0};
        fp_err_acc_add(&p->acc[k], p->ref + i, l, c);
    }
}

void fp_err_acc_add_pieces(fp_err_acc *a, const float *ref, const void *x, fp_dtype dt, size_t n)
{
    pieces_t p;
    p.ref = ref;
    p.x = x;
    p.dt = dt == FP_DT_F16 || dt == FP_DT_BF16 ? dt : FP_DT_F32;
    p.n = n;
    for (p.first = 0; p.first < n; p.first += (size_t)PIECES_MAX * CHUNK) {
        size_t left = n - p.first, pieces = (left + CHUNK - 1) / CHUNK;
        if (pieces > PIECES_MAX)
            pieces = PIECES_MAX;
        fp_parallel_for(pieces, 1, PIECES_PER_PART, pieces_range, &p);
        for (size_t k = 0; k < pieces; k++) {   /* what one fp_err_acc_add per piece in turn would add */
            a->nonfinite |= p.acc[k].nonfinite;
            a->dd += p.acc[k].dd;
            a->rr += p.acc[k].rr;
            a->xx += p.acc[k].xx;
            a->xr += p.acc[k].xr;
            if (p.acc[k].maxabs > a->maxabs)
                a->maxabs = p.acc[k].maxabs;
        }
    }
}

void fp_err_acc_finish(const fp_err_acc *a, double *rel_l2, double *max_abs, double *cosine)
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
    fp_err_acc a = {0};
    fp_err_acc_add(&a, ref, x, n);
    fp_err_acc_finish(&a, rel_l2, max_abs, cosine);
}

/* The device's sums as the host's accumulator: finished by the one fp_err_acc_finish. */
static int device_sums(const fp_backend_ops *ops, fp_backend *be, const float *ref, const void *x, fp_dtype dt,
                       size_t n, fp_err_acc *a)
{
#ifdef HAVE_CUDA
    if (ops != fp_backend_cuda() || !be)
        return fp_fail(FP_EINVAL, "layer error: tensors in the memory of backend %s, which cannot sum them", ops->name);
    fp_cuda_err_sums s;
    int rc = fp_backend_cuda_layer_error_sums(be, ref, x, dt, n, &s);
    if (!rc)
        *a = (fp_err_acc){s.dd, s.rr, s.xx, s.xr, s.maxabs, !isfinite(s.rr) || !isfinite(s.xx)};
    return rc;
#else
    (void)be, (void)ref, (void)x, (void)dt, (void)n, (void)a;
    return fp_fail(FP_EINVAL, "layer error: tensors in the memory of backend %s (built without CUDA)", ops->name);
#endif
}

int fp_layer_error_on(const fp_backend_ops *ops, fp_backend *be, const float *ref, const void *x, fp_dtype dt,
                      size_t n, fp_layer_err_t *out)
{
    if (!out || (n > 0 && (!ref || !x)))
        return fp_fail(FP_EINVAL, "layer error: %s is NULL", !out ? "the result" : "a tensor");
    if (dt != FP_DT_F32 && dt != FP_DT_F16 && dt != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "layer error: x of storage type %s", fp_dtype_name(dt));
    fp_err_acc a = {0};
    if (!ops || ops->host_memory)
        fp_err_acc_add_pieces(&a, ref, x, dt, n);
    else {
        int rc = device_sums(ops, be, ref, x, dt, n, &a);
        if (rc)
            return rc;
    }
    fp_err_acc_finish(&a, &out->rel_l2, &out->max_abs, &out->cosine);
    return FP_OK;
}
