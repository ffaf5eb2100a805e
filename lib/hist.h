/* hist.h — exponent histograms of float arrays: per-binade counts of log2|x| over the whole fp32
 * range, amax / smallest nonzero / mean |x|, and for each format of formats.h how many values would
 * overflow, round down to max, become subnormal, flush to zero, or stay normal.
 * Histograms merge by addition and serialise to a versioned blob (hist_blob.c documents it). */
#ifndef FP_HIST_H
#define FP_HIST_H

#include <stddef.h>
#include <stdint.h>
#include "formats.h"

/* Binade e holds finite nonzero x with 2^e <= |x| < 2^(e+1); fp32 spans e = -149 .. 127. */
#define FP_HIST_EXP_MIN   (-149)
#define FP_HIST_EXP_MAX   127
#define FP_HIST_BINADES   (FP_HIST_EXP_MAX - FP_HIST_EXP_MIN + 1)

/* Where a finite nonzero value lands when converted to a format (by the input's magnitude):
 *   UNDERFLOW     0 < |x| <= min_subnormal/2        (rounds to zero)
 *   SUBNORMAL     min_subnormal/2 < |x| < min_normal (kept with lost precision)
 *   NORMAL        min_normal <= |x| <= max_finite
 *   ROUND_TO_MAX  max_finite < |x| < overflow_at     (rounds down to max_finite)
 *   OVERFLOW      overflow_at <= |x|                 (Inf, or saturation for E4M3)
 * Zeros, NaN and Inf inputs are counted apart and are in none of these classes. */
typedef enum {
    FP_CLASS_NORMAL = 0,
    FP_CLASS_SUBNORMAL,
    FP_CLASS_UNDERFLOW,
    FP_CLASS_ROUND_TO_MAX,
    FP_CLASS_OVERFLOW,
    FP_CLASS_COUNT
} fp_value_class;

typedef struct {
    uint64_t count;                            /* every value seen */
    uint64_t zero, nan, pos_inf, neg_inf;
    uint64_t binade[FP_HIST_BINADES];          /* index e - FP_HIST_EXP_MIN */
    uint64_t cls[FP_FMT_COUNT][FP_CLASS_COUNT];
    float amax;                                /* max finite |x|; 0 when none */
    float min_nonzero;                         /* min finite nonzero |x|; 0 when none */
    double sum_abs;                            /* sum of finite |x| */
} fp_hist_t;

void   fp_hist_init(fp_hist_t *h);
/* Accumulate n values (x may be NULL when n == 0; FP_EINVAL when NULL with n > 0). The vector
 * kernels take the class counts of most values from the exponent histogram (hist_f32_simd.c:
 * "fast path"). */
int    fp_hist_add(fp_hist_t *h, const float *x, size_t n);
/* As fp_hist_add with a forced kernel: 0 scalar, 1 AVX2, 2 AVX-512, -1 the best this CPU has
 * (FP_EUNAVAIL when the CPU lacks it). Every kernel gives bit-identical histograms; tests and
 * benchmarks use this to compare them. */
int    fp_hist_add_kernel(fp_hist_t *h, const float *x, size_t n, int kernel);
/* The histogram of y[i] = x[i] * 2^-log2_div (a loss-scaled gradient once unscaled), y computed as a
 * correctly rounded float multiply (fp32 subnormal, zero and Inf quotients included; log2_div may be
 * negative): every count, amax, min_nonzero and sum_abs identical to fp_hist_add on an array holding
 * the y[i], log2_div == 0 exactly fp_hist_add. No multiply in the common case: the class thresholds
 * are mapped back onto x and the binades shifted; when a finite nonzero quotient would not be a normal
 * float (checked after the pass from amax and min nonzero), the call is redone on the multiplied
 * values in chunks (about twice the time). FP_EINVAL when h is NULL, x is NULL with n > 0, or
 * |log2_div| > FP_HIST_LOG2_DIV_MAX. */
#define FP_HIST_LOG2_DIV_MAX 256
int    fp_hist_add_scaled(fp_hist_t *h, const float *x, size_t n, int log2_div);
/* As fp_hist_add_scaled with a forced kernel, as fp_hist_add_kernel (no small-n shortcut). */
int    fp_hist_add_scaled_kernel(fp_hist_t *h, const float *x, size_t n, int log2_div, int kernel);
/* The same histogram as widening x (n 16-bit values, fp16 or bf16 bit patterns) to fp32 and calling
 * fp_hist_add: every count, amax and min_nonzero identical; sum_abs equal up to rounding (it is
 * summed from exact per-binade integer sums in double: relative difference <= 1e-12 in practice,
 * tests allow 1e-9). fp16 with AVX-512 BW and n >= 256: a kernel in the 16-bit domain (hist_f16.c)
 * whose histogram is fp_hist_add's of the widened array bit for bit, sum_abs included.
 * Otherwise (bf16 always), large n: a count per 16-bit pattern (sign folded; a thread-local
 * 256 KiB table, allocated at first use and kept) folded into the histogram exactly; small n:
 * widened in chunks. FP_EINVAL when h is NULL or x is NULL with n > 0; FP_ENOMEM when the table
 * cannot be allocated. */
int    fp_hist_add_f16(fp_hist_t *h, const uint16_t *x, size_t n);
int    fp_hist_add_bf16(fp_hist_t *h, const uint16_t *x, size_t n);
/* As fp_hist_add_f16 (bf == 0) / _bf16 (bf != 0) with a forced path, for tests and benchmarks:
 * 0 the reference (the count table for n >= 65536, widened chunks below), 2 the AVX-512 fp16 kernel
 * for n >= 256 (bit for bit fp_hist_add of the widened array; FP_EUNAVAIL for bf16 or when the CPU
 * lacks AVX-512 BW / BMI2), -1 the best (what fp_hist_add_f16 / _bf16 use). FP_EINVAL for others. */
int    fp_hist_add16_kernel(fp_hist_t *h, const uint16_t *x, size_t n, int bf, int kernel);
/* Frees the calling thread's count tables: the 16-bit one and the 512 KiB exponent-pair table the
 * AVX-512 kernel allocates at its first call of 4096 values or more (and runs without when that
 * fails). Optional: a thread that allocated them frees them at exit anyway. */
void   fp_hist_thread_release(void);
/* dst += src (counts add, amax/min combine, sums add). */
void   fp_hist_merge(fp_hist_t *dst, const fp_hist_t *src);
/* Mean of finite |x| (0 when there is none). */
double fp_hist_mean_abs(const fp_hist_t *h);
/* Finite nonzero values: the sum of the binades. */
uint64_t fp_hist_finite_nonzero(const fp_hist_t *h);
const char *fp_value_class_name(fp_value_class c);   /* "normal", "subnormal", ... */

/* ---- blob (hist_blob.c) ---- */
#define FP_HIST_BLOB_VERSION 1
#define FP_HIST_BLOB_MAX_SIZE 4096               /* no blob is larger than this */
/* Serialise into buf (cap bytes); *len gets the size. FP_EINVAL when cap is too small. */
int fp_hist_to_blob(const fp_hist_t *h, uint8_t *buf, size_t cap, size_t *len);
/* Parse a blob; FP_EFORMAT (with a message) on anything malformed, FP_EVERSION on a newer one. */
int fp_hist_from_blob(fp_hist_t *h, const uint8_t *buf, size_t len);

#endif
