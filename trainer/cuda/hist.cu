/* hist.cu — lib/hist.h's exponent histogram on the device: per-block shared-memory counters (exponent
 * field, class thresholds, fp32-subnormal binades, NaN / Inf) merged into one raw result, folded on
 * the host by lib/hist.c's own fold (hist_counts.h). Promise: every count, amax and min_nonzero equal
 * to fp_hist_add (fp32) / fp_hist_add_f16 / _bf16 on the same values; sum_abs up to summation order.
 * The class thresholds are lib/hist.c's (fp_hist_thresholds). */
#include <float.h>
#include <math.h>
#include <string.h>
#include <cuda_fp16.h>
#include "kernels.h"
#include "formats.h"
#include "hist_counts.h"

#define NTHR       FP_HIST_NTHR
#define MAX_BLOCKS 1024u
#define LAUNCH_MAX ((size_t)1 << 31)   /* values per launch: 32-bit shared counters cannot wrap */
#define ABS_MASK   0x7FFFFFFFu
#define INF_BITS   0x7F800000u
#define MANT_MASK  0x007FFFFFu

namespace {

struct thresholds { uint32_t t[NTHR]; };

/* The raw counts of one call, in device memory (64-bit, merged from every block). */
struct hist_raw {
    unsigned long long lt[NTHR], ehist[256], sub_binade[23], nan, pos_inf, neg_inf;
    unsigned amax_bits;   /* max |x| bits over finite values */
    unsigned min_m1;      /* min (|x| bits - 1), wrapping: zero -> all ones */
};

void make_thresholds(thresholds *th) { fp_hist_thresholds(th->t); }

template <int DT> __device__ inline uint32_t load_bits(const void *x, size_t i)
{
    if (DT == 0)
        return __float_as_uint(((const float *)x)[i]);
    const unsigned short q = ((const unsigned short *)x)[i];
    if (DT == 1)
        return __float_as_uint(__half2float(__ushort_as_half(q)));
    return (uint32_t)q << 16;
}

template <int DT>
__global__ void hist_kernel(hist_raw *out, double *sums, thresholds th, const void *x, size_t n)
{
    __shared__ unsigned s_e[256], s_lt[NTHR], s_sub[23], s_special[3], s_amax, s_min;
    __shared__ double s_red[FP_CUDA_THREADS / 32];
    for (int k = threadIdx.x; k < 256; k += blockDim.x)
        s_e[k] = 0;
    if (threadIdx.x < NTHR)
        s_lt[threadIdx.x] = 0;
    if (threadIdx.x < 23)
        s_sub[threadIdx.x] = 0;
    if (threadIdx.x < 3)
        s_special[threadIdx.x] = 0;
    if (threadIdx.x == 0) {
        s_amax = 0;
        s_min = 0xFFFFFFFFu;
    }
    __syncthreads();
    unsigned lt[NTHR];
#pragma unroll
    for (int k = 0; k < NTHR; k++)
        lt[k] = 0;
    unsigned amax = 0, mn = 0xFFFFFFFFu;
    double sum = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t u = load_bits<DT>(x, i), a = u & ABS_MASK;
        atomicAdd(&s_e[(u >> 23) & 0xFF], 1u);
#pragma unroll
        for (int k = 0; k < NTHR; k++)
            lt[k] += a < th.t[k];
        mn = min(mn, a - 1);
        if (a < INF_BITS) {
            amax = max(amax, a);
            sum += (double)__uint_as_float(a);
            if (a - 1 < MANT_MASK)
                atomicAdd(&s_sub[31 - __clz(a)], 1u);
        } else {
            atomicAdd(&s_special[a > INF_BITS ? 0 : (u >> 31) ? 2 : 1], 1u);   /* nan, +inf, -inf */
        }
    }
#pragma unroll
    for (int k = 0; k < NTHR; k++) {
        unsigned v = fp_warp_sum(lt[k]);
        if ((threadIdx.x & 31) == 0 && v)
            atomicAdd(&s_lt[k], v);
    }
    for (int o = 16; o > 0; o >>= 1) {
        amax = max(amax, __shfl_down_sync(0xffffffffu, amax, o));
        mn = min(mn, __shfl_down_sync(0xffffffffu, mn, o));
    }
    if ((threadIdx.x & 31) == 0) {
        atomicMax(&s_amax, amax);
        atomicMin(&s_min, mn);
    }
    const double bsum = fp_block_sum(sum, s_red);   /* contains __syncthreads */
    for (int k = threadIdx.x; k < 256; k += blockDim.x)
        if (s_e[k])
            atomicAdd(&out->ehist[k], (unsigned long long)s_e[k]);
    if (threadIdx.x < NTHR && s_lt[threadIdx.x])
        atomicAdd(&out->lt[threadIdx.x], (unsigned long long)s_lt[threadIdx.x]);
    if (threadIdx.x < 23 && s_sub[threadIdx.x])
        atomicAdd(&out->sub_binade[threadIdx.x], (unsigned long long)s_sub[threadIdx.x]);
    if (threadIdx.x < 3 && s_special[threadIdx.x])
        atomicAdd(threadIdx.x == 0 ? &out->nan : threadIdx.x == 1 ? &out->pos_inf : &out->neg_inf,
                  (unsigned long long)s_special[threadIdx.x]);
    if (threadIdx.x == 0) {
        atomicMax(&out->amax_bits, s_amax);
        atomicMin(&out->min_m1, s_min);
        sums[blockIdx.x] = bsum;
    }
}

/* The device's raw counts (64-bit for atomicAdd) through lib/hist.c's fold into h. */
void finish(fp_hist_t *h, const hist_raw *r, double sum_abs, uint64_t n)
{
    fp_hist_counts_t c;
    for (int k = 0; k < NTHR; k++)
        c.lt[k] = r->lt[k];
    for (int e = 0; e < 256; e++)
        c.ehist[e] = r->ehist[e];
    for (int p = 0; p < 23; p++)
        c.sub_binade[p] = r->sub_binade[p];
    c.nan = r->nan;
    c.pos_inf = r->pos_inf;
    c.neg_inf = r->neg_inf;
    c.amax_bits = r->amax_bits;
    c.min_m1 = r->min_m1;
    fp_hist_fold(h, &c, n, 0, sum_abs);
}

} // namespace

extern "C" size_t fp_cuda_hist_work_bytes(void)
{
    return sizeof(hist_raw) + MAX_BLOCKS * sizeof(double);
}

extern "C" int fp_cuda_hist_add(fp_hist_t *h, const void *d_x, size_t n, fp_dtype dtype, void *d_work, void *stream)
{
    if (!h || (!d_x && n > 0) || !d_work)
        return fp_fail(FP_EINVAL, "fp_cuda_hist_add: %s is NULL", !h ? "histogram" : !d_work ? "workspace" : "array");
    if (dtype != FP_DT_F32 && dtype != FP_DT_F16 && dtype != FP_DT_BF16)
        return fp_fail(FP_EINVAL, "fp_cuda_hist_add: unsupported dtype %s", fp_dtype_name(dtype));
    if (n == 0)
        return FP_OK;
    cudaStream_t st = (cudaStream_t)stream;
    hist_raw *d_raw = (hist_raw *)d_work;
    double *d_sums = (double *)((char *)d_work + sizeof(hist_raw));
    thresholds th;
    make_thresholds(&th);
    const size_t esize = dtype == FP_DT_F32 ? 4 : 2;
    fp_hist_t acc;
    fp_hist_init(&acc);
    int rc = FP_OK;
    for (size_t done = 0; rc == FP_OK && done < n;) {
        const size_t len = n - done < LAUNCH_MAX ? n - done : LAUNCH_MAX;
        const void *xp = (const char *)d_x + done * esize;
        const unsigned grid = fp_cuda_grid(len, MAX_BLOCKS);
        if ((rc = fp_cuda_check(cudaMemsetAsync(d_raw, 0, sizeof(hist_raw), st), "histogram: clearing")) != FP_OK ||
            (rc = fp_cuda_check(cudaMemsetAsync(&d_raw->min_m1, 0xFF, sizeof(unsigned), st), "histogram: clearing")) !=
                FP_OK)
            break;
        if (dtype == FP_DT_F32)
            hist_kernel<0><<<grid, FP_CUDA_THREADS, 0, st>>>(d_raw, d_sums, th, xp, len);
        else if (dtype == FP_DT_F16)
            hist_kernel<1><<<grid, FP_CUDA_THREADS, 0, st>>>(d_raw, d_sums, th, xp, len);
        else
            hist_kernel<2><<<grid, FP_CUDA_THREADS, 0, st>>>(d_raw, d_sums, th, xp, len);
        if ((rc = fp_cuda_check_launch("histogram")) != FP_OK)
            break;
        hist_raw raw;
        double sums[MAX_BLOCKS];
        if ((rc = fp_cuda_check(cudaMemcpyAsync(&raw, d_raw, sizeof raw, cudaMemcpyDeviceToHost, st),
                                "histogram: copying the counts")) != FP_OK ||
            (rc = fp_cuda_check(cudaMemcpyAsync(sums, d_sums, grid * sizeof(double), cudaMemcpyDeviceToHost, st),
                                "histogram: copying the sums")) != FP_OK ||
            (rc = fp_cuda_check(cudaStreamSynchronize(st), "histogram")) != FP_OK)
            break;
        double s = 0.0;
        for (unsigned b = 0; b < grid; b++)
            s += sums[b];
        finish(&acc, &raw, s, len);
        done += len;
    }
    if (rc == FP_OK)
        fp_hist_merge(h, &acc);
    return rc;
}
