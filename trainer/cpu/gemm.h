/* gemm.h — the CPU kernels' fp32 GEMM: CBLAS row-major sgemm semantics (C = alpha op(A) op(B) + beta C),
 * split over the thread pool (thread_pool.h) instead of the BLAS library's own threads. Contract: each
 * part is one single-threaded BLAS call on a block of C's rows or columns (the larger dimension), so
 * the BLAS library must be set to one thread (fp_gemm_use_pool); a call too small to split, or made
 * while the pool is busy, is one BLAS call. Every element of C is computed by the same BLAS kernel
 * over the same K order whatever the split (the block edges are multiples of FP_GEMM_ALIGN). */
#ifndef FP_GEMM_H
#define FP_GEMM_H

#define FP_GEMM_ALIGN 16   /* rows / columns per split unit: a multiple of OpenBLAS's sgemm unrolls */

void fp_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc);

/* Threads for the CPU kernels: the pool gets `threads` (the caller included), the BLAS library one
 * (when it is OpenBLAS: its spinning workers would otherwise take the cores the pool runs on).
 * Returns the pool's count. */
int fp_gemm_use_pool(int threads);

#endif
