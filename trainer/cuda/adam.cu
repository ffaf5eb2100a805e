/* adam.cu — trainer/optim.c's Adam / AdamW step on fp32 master weights, fused over many tensors, the moments
 * stored in the policy's optimizer-state dtype, optionally writing the fp16 / bf16 copy of the new weights, and
 * skipped on a device flag; the per-step scalars by value or read from device memory (a CUDA graph's replays).
 * Promise: every operation is optim.c's FMA path (explicit __fmaf_rn / __fmul_rn / __fdiv_rn / __fsqrt_rn /
 * __fadd_rn): bit-identical to fp_optim_step (+ `half`'s state rounding) on an FMA CPU. */
#include <math.h>
#include <string.h>
#include "kernels.h"

namespace {

typedef fp_seg_group_of<fp_cuda_adam_segment> adam_group;

/* optim.c's adam_tensor scalars, rounded to fp32 as there. */
struct adam_args {
    float wd;                 /* weight decay */
    float b1, omb1, b2, omb2; /* beta1, 1 - beta1, beta2, 1 - beta2 */
    float eps;
    int adamw, use_wd;        /* AdamW's decoupled decay; weight decay != 0 (Adam's L2) */
    int lowp;                 /* the weight copy: 0 none, 1 fp16, 2 bf16 */
};

/* A moment in its storage dtype (SD: 0 fp32, 1 fp16, 2 bf16): read exactly, stored rounded to nearest even. */
template <int SD> __device__ inline float load_moment(const void *p, size_t i)
{
    if (SD == 0)
        return ((const float *)p)[i];
    const uint16_t b = ((const uint16_t *)p)[i];
    return SD == 1 ? __half2float(__ushort_as_half(b)) : __bfloat162float(__ushort_as_bfloat16(b));
}

template <int SD> __device__ inline void store_moment(void *p, size_t i, float x)
{
    if (SD == 0)
        ((float *)p)[i] = x;
    else
        ((uint16_t *)p)[i] = fp_cuda_lowp_bits(x, SD);
}

/* optim.c's ADAM_KERNEL with FMA_FUSED, operation by operation. The per-step scalars (kernels.h
 * fp_cuda_optim_scalars: AdamW's decay, sqrt(1 - beta2^t), -(lr / (1 - beta1^t))) are v, or *d_v when set. */
template <int SD>
__global__ void adam_kernel(adam_group g, adam_args a, fp_cuda_optim_scalars v, const fp_cuda_optim_scalars *d_v,
                            const int *skip)
{
    if (skip && *skip) {   /* skipped step: the weights and moments stay; the copy is (re)written as their cast */
        fp_seg_group_recast(g, a.lowp);
        return;
    }
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const float decay = d_v ? d_v->adam_decay : v.adam_decay, bc2_sqrt = d_v ? d_v->adam_bc2_sqrt : v.adam_bc2_sqrt,
                neg_step_size = d_v ? d_v->adam_neg_step_size : v.adam_neg_step_size;
    for (int k = 0; k < g.count; k++) {
        const fp_cuda_adam_segment s = g.s[k];
        const int use_l2 = !a.adamw && a.use_wd && s.apply_weight_decay;
        const int use_decoupled = a.adamw && s.apply_weight_decay;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < s.n; i += stride) {
            float gi = s.grad[i];
            float pi = s.param[i];
            if (use_l2)
                gi = __fmaf_rn(pi, a.wd, gi);                                      /* grad.add(param, alpha=wd) */
            if (use_decoupled)
                pi = __fmul_rn(pi, decay);                                       /* param.mul_(1 - lr * wd) */
            const float mi = __fmaf_rn(gi, a.omb1, __fmul_rn(load_moment<SD>(s.exp_avg, i), a.b1));
            const float vi = __fmaf_rn(gi, __fmul_rn(a.omb2, gi), __fmul_rn(load_moment<SD>(s.exp_avg_sq, i), a.b2));
            const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), a.eps);
            store_moment<SD>(s.exp_avg, i, mi);
            store_moment<SD>(s.exp_avg_sq, i, vi);
            const float np = __fadd_rn(pi, __fdiv_rn(__fmul_rn(neg_step_size, mi), denom));   /* addcdiv_ */
            s.param[i] = np;
            if (s.lowp && a.lowp)
                s.lowp[i] = fp_cuda_lowp_bits(np, a.lowp);
        }
    }
}

} // namespace

/* optim.c's adam_tensor, with its step counter after the increment: the per-step scalars in double, rounded to
 * fp32 as there. */
extern "C" int fp_cuda_adam_scalars(fp_cuda_optim_scalars *v, const fp_optim_config *cfg, double lr, int64_t step)
{
    if (!cfg || (cfg->kind != FP_OPTIM_ADAM && cfg->kind != FP_OPTIM_ADAMW))
        return fp_fail(FP_EINVAL, "fp_cuda_adam_step: the optimizer must be adam or adamw, not %s",
                       cfg ? fp_optim_name(cfg->kind) : "none");
    if (!isfinite(lr) || lr < 0)
        return fp_fail(FP_EINVAL, "fp_cuda_adam_step: invalid learning rate %g (must be finite and >= 0)", lr);
    if (step < 1)
        return fp_fail(FP_EINVAL, "fp_cuda_adam_step: step %lld: the update's count must be >= 1", (long long)step);
    const double t = (double)step;
    const double bc1 = 1.0 - pow(cfg->beta1, t), bc2 = 1.0 - pow(cfg->beta2, t);
    memset(v, 0, sizeof *v);
    v->adam_neg_step_size = (float)-(lr / bc1);
    v->adam_bc2_sqrt = (float)sqrt(bc2);
    v->adam_decay = (float)(1.0 - lr * cfg->weight_decay);
    return FP_OK;
}

/* The launches, with the per-step scalars v by value or d_v in device memory. */
static int adam_launch(const fp_cuda_adam_segment *segs, size_t nseg, const fp_optim_config *cfg, fp_dtype state_dtype,
                       fp_dtype lowp_dtype, const int *d_skip, const fp_cuda_optim_scalars *v,
                       const fp_cuda_optim_scalars *d_v, void *stream)
{
    if (!segs && nseg)
        return fp_fail(FP_EINVAL, "fp_cuda_adam_step: NULL segment list");
    if (!cfg || (cfg->kind != FP_OPTIM_ADAM && cfg->kind != FP_OPTIM_ADAMW))
        return fp_fail(FP_EINVAL, "fp_cuda_adam_step: the optimizer must be adam or adamw, not %s",
                       cfg ? fp_optim_name(cfg->kind) : "none");
    int rc = fp_optim_config_check(cfg);
    if (rc)
        return rc;
    if (state_dtype != FP_DT_F32 && state_dtype != FP_DT_F16 && state_dtype != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "fp_cuda_adam_step: the moments must be fp32, fp16 or bf16, not %s",
                       fp_dtype_name(state_dtype));
    int lowp = 0;
    if ((rc = fp_cuda_lowp_code(lowp_dtype, "fp_cuda_adam_step", &lowp)))
        return rc;
    for (size_t i = 0; i < nseg; i++)
        if (segs[i].n && (!segs[i].param || !segs[i].grad || !segs[i].exp_avg || !segs[i].exp_avg_sq))
            return fp_fail(FP_EINVAL, "fp_cuda_adam_step: segment %zu has a NULL %s", i,
                           !segs[i].param ? "param" : !segs[i].grad ? "grad" : "moment");
    adam_args a;
    a.wd = (float)cfg->weight_decay;
    a.b1 = (float)cfg->beta1;
    a.omb1 = (float)(1.0 - cfg->beta1);
    a.b2 = (float)cfg->beta2;
    a.omb2 = (float)(1.0 - cfg->beta2);
    a.eps = (float)cfg->eps;
    a.adamw = cfg->kind == FP_OPTIM_ADAMW;
    a.use_wd = cfg->weight_decay != 0;
    a.lowp = lowp;
    cudaStream_t st = (cudaStream_t)stream;
    adam_group g;
    size_t i = 0;
    while (rc == FP_OK && i < nseg) {
        size_t most = fp_seg_group_next(&g, segs, nseg, &i);
        if (!g.count)
            break;
        const unsigned grid = fp_cuda_grid(most, 1024);
        if (state_dtype == FP_DT_F32)
            adam_kernel<0><<<grid, FP_CUDA_THREADS, 0, st>>>(g, a, *v, d_v, d_skip);
        else if (state_dtype == FP_DT_F16)
            adam_kernel<1><<<grid, FP_CUDA_THREADS, 0, st>>>(g, a, *v, d_v, d_skip);
        else
            adam_kernel<2><<<grid, FP_CUDA_THREADS, 0, st>>>(g, a, *v, d_v, d_skip);
        rc = fp_cuda_check_launch("adam step");
    }
    return rc;
}

extern "C" int fp_cuda_adam_step_unless(const fp_cuda_adam_segment *segs, size_t nseg, const fp_optim_config *cfg,
                                        double lr, int64_t step, fp_dtype state_dtype, fp_dtype lowp_dtype,
                                        const int *d_skip, void *stream)
{
    fp_cuda_optim_scalars v;
    int rc = fp_cuda_adam_scalars(&v, cfg, lr, step);
    return rc ? rc : adam_launch(segs, nseg, cfg, state_dtype, lowp_dtype, d_skip, &v, NULL, stream);
}

extern "C" int fp_cuda_adam_step_dev(const fp_cuda_adam_segment *segs, size_t nseg, const fp_optim_config *cfg,
                                     fp_dtype state_dtype, fp_dtype lowp_dtype, const int *d_skip,
                                     const fp_cuda_optim_scalars *d_scalars, void *stream)
{
    if (!d_scalars)
        return fp_fail(FP_EINVAL, "fp_cuda_adam_step_dev: NULL scalars");
    fp_cuda_optim_scalars unused;
    memset(&unused, 0, sizeof unused);
    return adam_launch(segs, nseg, cfg, state_dtype, lowp_dtype, d_skip, &unused, d_scalars, stream);
}
