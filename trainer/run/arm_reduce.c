/* arm_reduce.c — an arm's data-parallel steps 3 and 3b: the gradients' all-reduce begun before the backward (DDP's
 * buckets, posted from the gradient-ready hook), ended after it, and at a checked step measured against an fp32 one.
 * Promise: every rank reduces the same buckets in the same order; nothing without ranks. */
#include "config.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "trainer/run/arm_internal.h"

void fp_arm_check_reduce_next(fp_arm *a, double *per_layer)
{
    a->check_reduce = a->cfg.dist && a->wire != FP_DT_F32;
    a->check_layers = a->check_reduce ? per_layer : NULL;
}

fp_dtype fp_arm_allreduce_dtype(const fp_arm *a) { return a->wire; }

/* Data parallel, before the backward: the overlapped all-reduce begins (dist.h's buckets over the gradients)
 * unless this step is checked (fp_arm_check_reduce_next: it reduces them after the backward, twice). */
int fp_arm_reduce_begin(fp_arm *a)
{
    a->overlap = 0;
    if (fp_dist_size(a->cfg.dist) < 2 || a->check_reduce)
        return FP_OK;
    int rc;
#ifdef HAVE_CUDA
    if (a->dev)
        rc = fp_arm_device_reduce_begin(a);
    else
#endif
        rc = fp_dist_reduce_begin(a->cfg.dist, fp_model_grads(a->model), fp_model_num_params(a->model), a->wire,
                                  a->cfg.bucket_bytes);
    a->overlap = rc == FP_OK;
    return rc;
}

/* The model's gradient-ready hook (model.h): a layer's gradients are final, in its bucket; a bucket now full
 * is posted (the CPU's MPI_Iallreduce is also moved on here: Open MPI progresses only inside MPI calls). */
int fp_arm_grad_ready(void *ctx, int layer, size_t off, size_t count)
{
    fp_arm *a = ctx;
    (void)layer;
    if (!a->overlap)
        return FP_OK;
#ifdef HAVE_CUDA
    if (a->dev)
        return fp_arm_device_grad_ready(a, off, count);
#endif
    return fp_dist_reduce_ready(a->cfg.dist, off, count);
}

/* The 16-bit all-reduce against the fp32 one of the same gradients (g: the 16-bit result, ref: fp32): rel. L2
 * over all and per layer, and the summed values that overflowed or flushed to zero in the format. */
void fp_arm_reduce_error(fp_arm *a, const float *g, const float *ref, fp_arm_step_result *r)
{
    double num = 0, den = 0;
    int nl = fp_model_layer_count(a->model);
    for (int l = 0; l < nl; l++) {
        size_t off = 0, cnt = 0;
        if (fp_model_layer_params(a->model, l, &off, &cnt) != FP_OK || cnt == 0) {
            if (a->check_layers)
                a->check_layers[l] = NAN;
            continue;
        }
        double ln = 0, ld = 0;
        for (size_t i = off; i < off + cnt; i++) {
            double e = (double)g[i] - (double)ref[i];
            if (isfinite(ref[i]) && !isfinite(g[i]))
                r->reduce_overflow++;
            else if (ref[i] != 0 && g[i] == 0)
                r->reduce_underflow++;
            if (isfinite(e)) {
                ln += e * e;
                ld += (double)ref[i] * ref[i];
            }
        }
        if (a->check_layers)
            a->check_layers[l] = ld > 0 ? sqrt(ln / ld) : ln > 0 ? INFINITY : 0;
        num += ln;
        den += ld;
    }
    r->reduce_rel_l2 = den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0;
}

/* 3b. Data parallel: every parameter gradient (still scaled) averaged over the ranks in the arm's all-reduce
 * format, bucketed: the buckets the backward did not post yet are posted, then all are waited for; at a checked
 * step (not overlapped) all are reduced here, and the same gradients also in fp32 to measure the format's
 * rounding. Nothing without ranks. */
int fp_arm_allreduce_grads(fp_arm *a, fp_arm_step_result *r)
{
    int check = a->check_reduce;
    a->check_reduce = 0;
    r->reduce_rel_l2 = NAN;
    if (!a->cfg.dist)
        return FP_OK;
    fp_dist_stats st = {0};
    int rc;
#ifdef HAVE_CUDA
    if (a->dev) {
        rc = check ? fp_arm_device_allreduce_checked(a, &st, r) : fp_arm_device_allreduce(a, &st);
        goto done;
    }
#endif
    if (a->overlap) {
        a->overlap = 0;
        rc = fp_dist_reduce_end(a->cfg.dist, &st);
        goto done;
    }
    float *g = fp_model_grads(a->model);
    size_t n = fp_model_num_params(a->model);
    if (check) {
        float *p = realloc(a->ref_grads, (n ? n : 1) * sizeof *p);
        if (!p)
            return fp_fail(FP_ENOMEM, "out of memory");
        a->ref_grads = p;
        memcpy(p, g, n * sizeof *p);
        if ((rc = fp_dist_allreduce_mean(a->cfg.dist, p, n, FP_DT_F32, a->cfg.bucket_bytes, NULL)))
            return rc;
    }
    rc = fp_dist_allreduce_mean(a->cfg.dist, g, n, a->wire, a->cfg.bucket_bytes, &st);
    if (!rc && check)
        fp_arm_reduce_error(a, g, a->ref_grads, r);
done:
    r->comm_ns = st.reduce_ns;
    r->comm_exposed_ns = st.exposed_ns;
    r->comm_bytes = st.bytes;
    r->comm_buckets = st.buckets;
    r->comm_buckets_early = st.early;
    return rc;
}
