/* hist_internal.h — internal to the exponent-histogram kernels of hist.h (not installed): what
 * hist.c, hist_f32_simd.c, hist_f16.c and hist_scaled.c share — the thresholds and raw counts every
 * kernel works on, the kernel type and numbers, the bit helpers, and the functions each file gives
 * the others. Kernels take non-NULL pointers; a kernel with a target attribute is called only when
 * the CPU has its features (fp_hist_kernel_get). */
#ifndef FP_HIST_INTERNAL_H
#define FP_HIST_INTERNAL_H

#include "float_bits.h"
#include "hist.h"
#include "hist_counts.h"
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#define HIST_X86 1
#endif

/* How it works. For a non-NaN float the absolute bit pattern a = bits & 0x7FFFFFFF orders like |x|,
 * so each class boundary becomes a threshold T on a, and each class is a difference of the counts
 * lt(T) = #{a < T} (zeros included; Inf and NaN never, as every T <= the bits of +Inf). Per format:
 *   t0: a < t0  <=>  |x| <= min_subnormal/2      t1: a < t1  <=>  |x| < min_normal
 *   t2: a < t2  <=>  |x| <= max_finite           t3: a < t3  <=>  |x| < overflow_at
 * underflow = lt0 - zeros, subnormal = lt1 - lt0, normal = lt2 - lt1, round_to_max = lt3 - lt2,
 * overflow = finite - lt3. The binades come from a histogram of the 8-bit exponent field (bins 1..254
 * are the normal binades); fp32 subnormals, Inf and NaN are rare and take a slow path.
 * The scalar kernel compares each value with the thresholds; the vector kernels compare only vectors
 * with a "slow" lane and take lt for the rest from the exponent histogram (hist_f32_simd.c: "fast path").
 * sum |x| is kept in SUM_LANES double partial sums, lane = index mod SUM_LANES from the start of the
 * call, reduced in a fixed tree: every kernel adds the same numbers in the same order. */

#define NTHR      FP_HIST_NTHR
#define SUM_LANES 16
#define SUBHISTS  8                          /* exponent sub-histograms (avoid store-forward chains) */
#define BLOCK     ((size_t)1 << 24)          /* elements per kernel call: 32-bit counters cannot wrap */
#define VEC_MIN_N 256                        /* below this, the scalar kernel is the fastest */

#define ABS_MASK  0x7FFFFFFFu
#define INF_BITS  0x7F800000u
#define MANT_MASK 0x007FFFFFu                /* also: a - 1 < MANT_MASK  <=>  a is an fp32 subnormal */
#define FIN_NZ_M1 0x7F7FFFFFu                /* a - 1 < this  <=>  a is finite and nonzero */

typedef struct {
    uint32_t t[NTHR];                        /* t[4*f + k], see above */
    uint32_t gate;                           /* vector kernels' slow lanes: a >= gate, ... */
    uint32_t gate_field[3];                  /* ... or exponent field one of these (fp_hist_set_gate) */
} thresholds_t;

/* Raw counts of one fp_hist_add call; turned into histogram terms by fp_hist_finish(). */
typedef struct {
    fp_hist_counts_t c;                      /* hist_counts.h */
    double lane[SUM_LANES];
} raw_t;

typedef void (*kernel_fn)(raw_t *r, const thresholds_t *th, const float *x, size_t n);

/* Kernel numbers for fp_hist_add_kernel (internal; tests and the benchmark use it). */
enum { KERNEL_BEST = -1, KERNEL_SCALAR = 0, KERNEL_AVX2 = 1, KERNEL_AVX512 = 2 };

/* fl(v * 2^-k), the correctly rounded product, Inf and subnormals included: a float multiply when
 * 2^-k is a normal float, else exact in double (v has 24 bits, |k| <= FP_HIST_LOG2_DIV_MAX) and one
 * rounding to float. */
static inline float scale_down(float v, int k)
{
    if (k >= -127 && k <= 126)
        return v * fp_f32_from_bits((uint32_t)(127 - k) << 23);
    return (float)ldexp((double)v, -k);
}

/* One value that is an fp32 subnormal, an Inf or a NaN (a = its absolute bits). */
static inline __attribute__((always_inline)) void special(raw_t *r, uint32_t u)
{
    uint32_t a = u & ABS_MASK;
    if (a > INF_BITS)
        r->c.nan++;
    else if (a == INF_BITS && (u >> 31))
        r->c.neg_inf++;
    else if (a == INF_BITS)
        r->c.pos_inf++;
    else if (a != 0)
        r->c.sub_binade[31 - __builtin_clz(a)]++;
}

/* ---- hist.c: thresholds, the scalar kernel, dispatch, the fold */
/* fp_hist_thresholds, then the vector kernels' gate (fp_hist_set_gate). */
void fp_hist_make_thresholds(thresholds_t *th);
/* The reference kernel; the one for calls below VEC_MIN_N and for the vector kernels' tails. */
void fp_hist_kernel_scalar(raw_t *r, const thresholds_t *th, const float *x, size_t n);
/* The kernel for a KERNEL_* number; NULL when there is no such kernel or the CPU lacks it. */
kernel_fn fp_hist_kernel_get(int kernel);
void fp_hist_raw_init(raw_t *r);
/* x[0..n) in blocks of BLOCK through vec, the tail through the scalar kernel. */
void fp_hist_run_kernels(raw_t *r, const thresholds_t *th, const float *x, size_t n, kernel_fn vec);
/* The sum lanes reduced, then fp_hist_fold (k: see hist_scaled.c). */
void fp_hist_finish(fp_hist_t *h, const raw_t *r, size_t n, int k);
/* fp_hist_add of x[0..n) (n > 0) with vec for the whole 16-value groups. */
int fp_hist_add_with(fp_hist_t *h, const float *x, size_t n, kernel_fn vec);

/* ---- hist_f32_simd.c: the vector kernels (16 values per step, n a multiple of 16) */
/* th's gate: which lanes the vector kernels treat as slow (hist_f32_simd.c: "fast path"). */
void fp_hist_set_gate(thresholds_t *th);
#ifdef HIST_X86
void fp_hist_kernel_avx2(raw_t *r, const thresholds_t *th, const float *x, size_t n);   /* AVX2 */
void fp_hist_kernel_avx512(raw_t *r, const thresholds_t *th, const float *x, size_t n); /* AVX-512F, BMI2 */
#endif
/* Frees the calling thread's exponent-pair table (the AVX-512 kernel's). */
void fp_hist_pair_release(void);
/* Arranges for fp_hist_thread_release to run when the calling thread exits (a pool worker's tables
 * are then freed with it); call after allocating a thread-local table. */
void fp_hist_release_at_thread_exit(void);

/* ---- hist_f16.c: 16-bit inputs */
/* Frees the calling thread's 16-bit count table. */
void fp_hist_h16_release(void);

#endif
