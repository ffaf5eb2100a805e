/* layer_error.cu — trainer/analysis/analysis.h fp_layer_error on the device: x (fp32, or fp16 / bf16 patterns)
 * against an fp32 reference; per-block double partial sums of (x-r)^2, r^2, x^2, x*r and the max |x - r|,
 * then one thread adds the blocks' in block order, so that only those five numbers come back (kernels.h
 * fp_cuda_layer_error; layer_error_dev.h fp_cuda_layer_error_sums for the analysis, which finishes them itself).
 * Promise: fp_layer_error's definitions, zero and non-finite cases included (rel_l2 = max_abs = Inf and cosine
 * NaN when anything is non-finite). */
#include <math.h>
#include <cuda_fp16.h>
#include "kernels.h"
#include "layer_error_dev.h"

#define MAX_BLOCKS 1024u

namespace {

struct partial { double dd, rr, xx, xr, mx; };

template <int DT> __device__ inline double load_x(const void *x, size_t i)
{
    if (DT == 0)
        return (double)((const float *)x)[i];
    const unsigned short q = ((const unsigned short *)x)[i];
    if (DT == 1)
        return (double)__half2float(__ushort_as_half(q));
    return (double)__uint_as_float((uint32_t)q << 16);
}

template <int DT> __global__ void err_kernel(partial *out, const float *ref, const void *x, size_t n)
{
    __shared__ double sh[FP_CUDA_THREADS / 32];
    double dd = 0, rr = 0, xx = 0, xr = 0, mx = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double r = ref[i], v = load_x<DT>(x, i), d = __dsub_rn(v, r), ad = fabs(d);
        dd = __dadd_rn(dd, __dmul_rn(d, d));
        rr = __dadd_rn(rr, __dmul_rn(r, r));
        xx = __dadd_rn(xx, __dmul_rn(v, v));
        xr = __dadd_rn(xr, __dmul_rn(v, r));
        mx = ad > mx ? ad : mx;   /* a NaN difference never wins, as on the CPU */
    }
    partial p;
    p.dd = fp_block_sum(dd, sh);
    p.rr = fp_block_sum(rr, sh);
    p.xx = fp_block_sum(xx, sh);
    p.xr = fp_block_sum(xr, sh);
    for (int o = 16; o > 0; o >>= 1) {
        const double v = __shfl_down_sync(0xffffffffu, mx, o);
        mx = v > mx ? v : mx;
    }
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        p.mx = sh[0];
        for (int w = 1; w < FP_CUDA_THREADS / 32; w++)
            p.mx = sh[w] > p.mx ? sh[w] : p.mx;
        out[blockIdx.x] = p;
    }
}

/* p[grid] = the sums of p[0 .. grid) in block order (one thread: the order is fixed, as the host's was). */
__global__ void total_kernel(partial *p, unsigned grid)
{
    partial t = {0, 0, 0, 0, 0};
    for (unsigned b = 0; b < grid; b++) {
        t.dd = __dadd_rn(t.dd, p[b].dd);
        t.rr = __dadd_rn(t.rr, p[b].rr);
        t.xx = __dadd_rn(t.xx, p[b].xx);
        t.xr = __dadd_rn(t.xr, p[b].xr);
        t.mx = p[b].mx > t.mx ? p[b].mx : t.mx;
    }
    p[grid] = t;
}

} // namespace

/* MAX_BLOCKS partials and their total. */
extern "C" size_t fp_cuda_layer_error_work_bytes(void) { return (MAX_BLOCKS + 1) * sizeof(partial); }

extern "C" int fp_cuda_layer_error_sums(const float *d_ref, const void *d_x, fp_dtype x_dtype, size_t n,
                                        fp_cuda_err_sums *out, void *d_work, void *stream)
{
    if ((n > 0 && (!d_ref || !d_x)) || !d_work || !out)
        return fp_fail(FP_EINVAL, "layer error: %s is NULL", !d_work ? "the workspace" : !out ? "the result" : "an input");
    if (x_dtype != FP_DT_F32 && x_dtype != FP_DT_F16 && x_dtype != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "layer error: unsupported dtype %s", fp_dtype_name(x_dtype));
    *out = (fp_cuda_err_sums){0, 0, 0, 0, 0};
    if (n == 0)
        return FP_OK;
    cudaStream_t st = (cudaStream_t)stream;
    partial *d_p = (partial *)d_work;
    const unsigned grid = fp_cuda_grid(n, MAX_BLOCKS);
    if (x_dtype == FP_DT_F32)
        err_kernel<0><<<grid, FP_CUDA_THREADS, 0, st>>>(d_p, d_ref, d_x, n);
    else if (x_dtype == FP_DT_F16)
        err_kernel<1><<<grid, FP_CUDA_THREADS, 0, st>>>(d_p, d_ref, d_x, n);
    else
        err_kernel<2><<<grid, FP_CUDA_THREADS, 0, st>>>(d_p, d_ref, d_x, n);
    int rc = fp_cuda_check_launch("layer error");
    if (rc != FP_OK)
        return rc;
    total_kernel<<<1, 1, 0, st>>>(d_p, grid);
    partial t;
    if ((rc = fp_cuda_check_launch("layer error (total)")) != FP_OK ||
        (rc = fp_cuda_check(cudaMemcpyAsync(&t, d_p + grid, sizeof t, cudaMemcpyDeviceToHost, st),
                            "layer error: copying the sums")) != FP_OK ||
        (rc = fp_cuda_check(cudaStreamSynchronize(st), "layer error")) != FP_OK)
        return rc;
    *out = (fp_cuda_err_sums){t.dd, t.rr, t.xx, t.xr, t.mx};
    return FP_OK;
}

extern "C" int fp_cuda_layer_error(const float *d_ref, const void *d_x, fp_dtype x_dtype, size_t n, double *rel_l2,
                                   double *max_abs, double *cosine, void *d_work, void *stream)
{
    fp_cuda_err_sums tot;
    int rc = fp_cuda_layer_error_sums(d_ref, d_x, x_dtype, n, &tot, d_work, stream);
    if (rc != FP_OK)
        return rc;
    const int nonfinite = !isfinite(tot.rr) || !isfinite(tot.xx);
    /* trainer/analysis/layer_error.c fp_err_acc_finish (the analysis finishes fp_cuda_layer_error_sums itself) */
    double rel, cs;
    if (nonfinite) {
        rel = INFINITY;
        cs = NAN;
    } else {
        rel = tot.rr > 0 ? sqrt(tot.dd / tot.rr) : sqrt(tot.dd);
        if (tot.rr == 0 && tot.xx == 0)
            cs = 1.0;
        else if (tot.rr == 0 || tot.xx == 0)
            cs = 0.0;
        else
            cs = tot.xr / (sqrt(tot.xx) * sqrt(tot.rr));
    }
    if (rel_l2)
        *rel_l2 = rel;
    if (max_abs)
        *max_abs = nonfinite ? INFINITY : tot.maxabs;
    if (cosine)
        *cosine = cs;
    return FP_OK;
}
