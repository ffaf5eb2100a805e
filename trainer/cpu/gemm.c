/* gemm.c — fp_sgemm over the thread pool (gemm.h): C split into blocks of rows (M >= N) or columns,
 * one single-threaded CBLAS call per block. The larger dimension is split because each part packs the
 * whole of the other operand: splitting rows repacks B (K x N) per part, columns A (M x K). */
#include "trainer/cpu/gemm.h"

#include <cblas.h>
#include <stddef.h>
#include "thread_pool.h"

/* Multiply-adds per part at least: below, a worker's wake-up (~10-20 us) outweighs the split. */
#define GEMM_PAR_MIN_MACS ((size_t)1 << 21)

/* OpenBLAS's extension, resolved when the BLAS in use has it (weak: NULL otherwise). */
extern void openblas_set_num_threads(int) __attribute__((weak));

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, by_rows;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_job;

static void gemm_call(const gemm_job *g, int m0, int m, int n0, int n)
{
    const float *a = g->A, *b = g->B;
    if (m0)
        a += g->ta ? (size_t)m0 : (size_t)m0 * (size_t)g->lda;
    if (n0)
        b += g->tb ? (size_t)n0 * (size_t)g->ldb : (size_t)n0;
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, m, n, g->K,
                g->alpha, a, g->lda, b, g->ldb, g->beta, g->C + (size_t)m0 * (size_t)g->ldc + (size_t)n0, g->ldc);
}

static void gemm_part(void *ctx, size_t begin, size_t end)
{
    const gemm_job *g = ctx;
    int lim = g->by_rows ? g->M : g->N;
    int lo = (int)begin * FP_GEMM_ALIGN, hi = (int)end * FP_GEMM_ALIGN;
    if (hi > lim)
        hi = lim;
    if (hi <= lo)
        return;
    if (g->by_rows)
        gemm_call(g, lo, hi - lo, 0, g->N);
    else
        gemm_call(g, 0, g->M, lo, hi - lo);
}

void fp_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc)
{
    gemm_job g = {trans_a, trans_b, M, N, K, lda, ldb, ldc, M >= N, alpha, beta, A, B, C};
    if (M <= 0 || N <= 0)
        return;
    size_t macs = (size_t)M * (size_t)N * (size_t)(K > 0 ? K : 1);
    int split = g.by_rows ? M : N;
    size_t units = (size_t)split / FP_GEMM_ALIGN + (split % FP_GEMM_ALIGN != 0);
    int t = fp_pool_threads();
    size_t most = macs / GEMM_PAR_MIN_MACS;   /* parts the work is worth */
    if ((size_t)t > most)
        t = (int)(most < 1 ? 1 : most);
    if ((size_t)t > units)
        t = (int)units;
    if (t <= 1 || K <= 0) {
        gemm_call(&g, 0, M, 0, N);
        return;
    }
    fp_parallel_for(units, 1, units / (size_t)t, gemm_part, &g);
}

int fp_gemm_use_pool(int threads)
{
    if (openblas_set_num_threads)
        openblas_set_num_threads(1);
    return fp_pool_set_threads(threads);
}
