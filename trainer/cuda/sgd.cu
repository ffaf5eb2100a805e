/* sgd.cu — trainer/optim.c's SGD step on fp32 master weights, fused over many tensors, optionally writing the
 * fp16 / bf16 copy of the new weights, and skipped on a device flag; the per-step scalars by value or read from
 * device memory (a CUDA graph's replays). Promise: every operation is optim.c's FMA
 * path (explicit __fmaf_rn / __fmul_rn / __fadd_rn): bit-identical to optim.c on an FMA CPU, hence torch 1.13. */
#include <math.h>
#include <string.h>
#include "kernels.h"

namespace {

struct sgd_args {
    float wd, mom;
    int use_wd, nesterov;
    int lowp;         /* 0 none, 1 fp16, 2 bf16 */
};

/* The per-step scalars (alpha = (float)-lr, first) are v, or *d_v when d_v is set (kernels.h
 * fp_cuda_optim_scalars: a captured launch reads each replay's). */
__global__ void sgd_kernel(fp_seg_group g, sgd_args a, fp_cuda_optim_scalars v, const fp_cuda_optim_scalars *d_v,
                           const int *skip)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    if (skip && *skip) {   /* skipped step: the weights stay; the copy is (re)written as their cast */
        fp_seg_group_recast(g, a.lowp);
        return;
    }
    for (int k = 0; k < g.count; k++) {
        const fp_cuda_segment s = g.s[k];
        const int use_wd = a.use_wd && s.apply_weight_decay;
        const float alpha = d_v ? d_v->sgd_alpha : v.sgd_alpha;
        const int first = d_v ? d_v->sgd_first : v.sgd_first;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < s.n; i += stride) {
            float d = s.grad[i];
            const float p = s.param[i];
            if (use_wd)
                d = __fmaf_rn(p, a.wd, d);                       /* d_p.add(param, alpha=wd) */
            if (s.momentum) {
                const float b = first ? d : __fadd_rn(__fmul_rn(s.momentum[i], a.mom), d);
                s.momentum[i] = b;
                d = a.nesterov ? __fmaf_rn(b, a.mom, d) : b;   /* d_p.add(buf, alpha=momentum) */
            }
            const float np = __fmaf_rn(d, alpha, p);           /* param.add_(d_p, alpha=-lr) */
            s.param[i] = np;
            if (s.lowp && a.lowp)
                s.lowp[i] = fp_cuda_lowp_bits(np, a.lowp);
        }
    }
}

} // namespace

extern "C" int fp_cuda_sgd_scalars(fp_cuda_optim_scalars *v, double lr, int first)
{
    if (!isfinite(lr) || lr < 0)
        return fp_fail(FP_EINVAL, "fp_cuda_sgd_step: invalid learning rate %g (must be finite and >= 0)", lr);
    memset(v, 0, sizeof *v);
    v->sgd_alpha = (float)-lr;
    v->sgd_first = first != 0;
    return FP_OK;
}

/* The launches, with the per-step scalars v by value or d_v in device memory. */
static int sgd_launch(const fp_cuda_segment *segs, size_t nseg, double momentum, double weight_decay, int nesterov,
                      fp_dtype lowp_dtype, const int *d_skip, const fp_cuda_optim_scalars *v,
                      const fp_cuda_optim_scalars *d_v, void *stream)
{
    if (!segs && nseg)
        return fp_fail(FP_EINVAL, "fp_cuda_sgd_step: NULL segment list");
    if (!(momentum >= 0) || isinf(momentum) || !(weight_decay >= 0) || isinf(weight_decay))
        return fp_fail(FP_EINVAL, "fp_cuda_sgd_step: invalid momentum %g or weight_decay %g", momentum, weight_decay);
    if (nesterov && !(momentum > 0))
        return fp_fail(FP_EINVAL, "fp_cuda_sgd_step: nesterov momentum requires a momentum > 0");
    int lowp = 0;
    int rc = fp_cuda_lowp_code(lowp_dtype, "fp_cuda_sgd_step", &lowp);
    if (rc)
        return rc;
    for (size_t i = 0; i < nseg; i++) {
        if (segs[i].n && (!segs[i].param || !segs[i].grad))
            return fp_fail(FP_EINVAL, "fp_cuda_sgd_step: segment %zu has a NULL %s", i, segs[i].param ? "grad" : "param");
        if (segs[i].n && momentum != 0 && !segs[i].momentum)
            return fp_fail(FP_EINVAL, "fp_cuda_sgd_step: segment %zu has no momentum buffer (momentum %g)", i, momentum);
    }
    sgd_args a;
    a.wd = (float)weight_decay;
    a.mom = (float)momentum;
    a.use_wd = weight_decay != 0;
    a.nesterov = nesterov != 0;
    a.lowp = lowp;
    cudaStream_t st = (cudaStream_t)stream;
    fp_seg_group g;
    size_t i = 0;
    while (rc == FP_OK && i < nseg) {
        size_t most = fp_seg_group_next(&g, segs, nseg, &i);
        if (!g.count)
            break;
        for (int k = 0; momentum == 0 && k < g.count; k++)
            g.s[k].momentum = NULL;   /* plain SGD keeps no state, as optim.c */
        sgd_kernel<<<fp_cuda_grid(most, 1024), FP_CUDA_THREADS, 0, st>>>(g, a, *v, d_v, d_skip);
        rc = fp_cuda_check_launch("sgd step");
    }
    return rc;
}

extern "C" int fp_cuda_sgd_step(const fp_cuda_segment *segs, size_t nseg, double lr, double momentum,
                                double weight_decay, int nesterov, int first, fp_dtype lowp_dtype, void *stream)
{
    return fp_cuda_sgd_step_unless(segs, nseg, lr, momentum, weight_decay, nesterov, first, lowp_dtype, NULL, stream);
}

extern "C" int fp_cuda_sgd_step_unless(const fp_cuda_segment *segs, size_t nseg, double lr, double momentum,
                                       double weight_decay, int nesterov, int first, fp_dtype lowp_dtype,
                                       const int *d_skip, void *stream)
{
    fp_cuda_optim_scalars v;
    int rc = fp_cuda_sgd_scalars(&v, lr, first);
    return rc ? rc : sgd_launch(segs, nseg, momentum, weight_decay, nesterov, lowp_dtype, d_skip, &v, NULL, stream);
}

extern "C" int fp_cuda_sgd_step_dev(const fp_cuda_segment *segs, size_t nseg, double momentum, double weight_decay,
                                    int nesterov, fp_dtype lowp_dtype, const int *d_skip,
                                    const fp_cuda_optim_scalars *d_scalars, void *stream)
{
    if (!d_scalars)
        return fp_fail(FP_EINVAL, "fp_cuda_sgd_step_dev: NULL scalars");
    fp_cuda_optim_scalars unused;
    memset(&unused, 0, sizeof unused);
    return sgd_launch(segs, nseg, momentum, weight_decay, nesterov, lowp_dtype, d_skip, &unused, d_scalars, stream);
}
