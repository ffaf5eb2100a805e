/* test_cuda_convert.c — the device casts of lib/cuda/convert.cu agree with numfmt.h's scalar
 * conversions bit for bit on random and edge values (NaN: stays NaN). Skips with a TAP reason
 * when built without CUDA or when no GPU is usable. */
#include "config.h"
#include "gpu/require_gpu.h"
#include "tap.h"
#include "testutil.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/convert.h"
#include "numfmt.h"

static uint32_t rng_state = 0x2545F491u;
static uint32_t next_bits(void) { return tu_xorshift32(&rng_state); }

static int same_value(uint16_t got, uint16_t want, int nan_mask_16)
{
    int got_nan = (got & 0x7FFF) > nan_mask_16, want_nan = (want & 0x7FFF) > nan_mask_16;
    return got_nan || want_nan ? got_nan == want_nan : got == want;
}
#endif

int main(void)
{
    tu_require_gpu();
#ifdef HAVE_CUDA
    enum { N = 1 << 22 };
    float *host = malloc(N * sizeof *host), *back = malloc(N * sizeof *back);
    uint16_t *h16 = malloc(N * sizeof *h16);
    const float edges[] = {0.0f, -0.0f, 65504.0f, 65520.0f, 0x1p-14f, 0x1p-24f, 0x1p-25f, 1.0f, INFINITY, -INFINITY};
    for (size_t i = 0; i < N; i++) {
        uint32_t b = next_bits();
        memcpy(&host[i], &b, 4);
    }
    memcpy(host, edges, sizeof edges);
    float *d_src = NULL, *d_back = NULL;
    uint16_t *d_16 = NULL;
    tap_plan(4);
    int ok = cudaMalloc((void **)&d_src, N * 4) == cudaSuccess && cudaMalloc((void **)&d_back, N * 4) == cudaSuccess &&
             cudaMalloc((void **)&d_16, N * 2) == cudaSuccess &&
             cudaMemcpy(d_src, host, N * 4, cudaMemcpyHostToDevice) == cudaSuccess;
    if (!tap_ok(ok, "device buffers allocated and filled")) {
        tap_skip(3, "no device memory");
        return tap_done();
    }
    struct { const char *name; int (*dev)(uint16_t *, const float *, size_t, void *);
             uint16_t (*ref)(float); int (*dev_back)(float *, const uint16_t *, size_t, void *); int nan_lim; } cases[] = {
        {"fp16", fp_cuda_f32_to_f16, fp_f32_to_f16, fp_cuda_f16_to_f32, 0x7C00},
        {"bf16", fp_cuda_f32_to_bf16, fp_f32_to_bf16, fp_cuda_bf16_to_f32, 0x7F80},
    };
    for (int c = 0; c < 2; c++) {
        size_t bad = 0;
        cases[c].dev(d_16, d_src, N, NULL);
        cudaMemcpy(h16, d_16, N * 2, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < N; i++)
            bad += !same_value(h16[i], cases[c].ref(host[i]), cases[c].nan_lim);
        tap_is_uint(bad, 0, "device fp32->%s equals the scalar path on %d values", cases[c].name, N);
    }
    cases[0].dev(d_16, d_src, N, NULL);
    cases[0].dev_back(d_back, d_16, N, NULL);
    cudaMemcpy(back, d_back, N * 4, cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) {
        float want = fp_f16_to_f32(fp_f32_to_f16(host[i]));
        bad += isnan(want) ? !isnan(back[i]) : memcmp(&want, &back[i], 4) != 0;
    }
    tap_is_uint(bad, 0, "device fp16->fp32 widening is exact");
    cudaFree(d_src);
    cudaFree(d_back);
    cudaFree(d_16);
    free(host);
    free(back);
    free(h16);
#endif
    return tap_done();
}
