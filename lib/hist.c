/* hist.c — exponent histograms of float arrays (hist.h): one pass over the data gives the per-binade
 * counts, zero/NaN/Inf counts, amax, min nonzero, sum |x| and the five classes of every format.
 * Promise: the scalar, AVX2 and AVX-512 kernels (chosen at run time) give bit-identical histograms;
 * every class boundary comes from fp_format_info(), none is written here.
 * This file: the fp32 entry points, the class thresholds, the scalar reference kernel, the run-time
 * choice of kernel, the fold of raw counts, and init / merge / summaries. The vector kernels are in
 * hist_f32_simd.c, 16-bit inputs in hist_f16.c, fp_hist_add_scaled in hist_scaled.c; what they
 * share, and how the counting works, in hist_internal.h. */
#include "hist_internal.h"
#include "error.h"
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* Threshold T with  a < T  <=>  |x| <= v  (v >= 0). */
static uint32_t thr_le(double v)
{
    if (v >= (double)FLT_MAX)
        return INF_BITS;
    float f = (float)v;
    if ((double)f > v)
        f = nextafterf(f, 0.0f);
    return fp_f32_bits(f) + 1;
}

/* Threshold T with  a < T  <=>  |x| < v  (v >= 0). */
static uint32_t thr_lt(double v)
{
    if (v > (double)FLT_MAX)
        return INF_BITS;
    float f = (float)v;
    if ((double)f < v)
        f = nextafterf(f, INFINITY);
    return fp_f32_bits(f);
}

void fp_hist_thresholds(uint32_t t[FP_HIST_NTHR])
{
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        const fp_format_info_t *fi = fp_format_info((fp_format)f);
        t[4 * f + 0] = thr_le((double)fi->min_subnormal / 2.0);
        t[4 * f + 1] = thr_lt((double)fi->min_normal);
        t[4 * f + 2] = thr_le((double)fi->max_finite);
        t[4 * f + 3] = thr_lt((double)fi->overflow_at);
    }
}

void fp_hist_make_thresholds(thresholds_t *th)
{
    fp_hist_thresholds(th->t);
    fp_hist_set_gate(th);
}

/* The thresholds around 1.0: values in [lo, hi) fall below exactly the thresholds >= hi, and zeros
 * below all of them (every t[k] >= 1), so the scalar kernel counts those two kinds once each and
 * adds the counts to the thresholds at the end. */
static void middle_band(const thresholds_t *th, uint32_t *lo, uint32_t *hi)
{
    const uint32_t one = fp_f32_bits(1.0f);
    *lo = 0;
    *hi = INF_BITS;
    for (int k = 0; k < NTHR; k++) {
        if (th->t[k] <= one && th->t[k] > *lo)
            *lo = th->t[k];
        if (th->t[k] > one && th->t[k] < *hi)
            *hi = th->t[k];
    }
}

typedef struct {
    uint64_t lt[NTHR], mid, zeros;
    uint32_t amax, min_m1, lo, hi;
    double lane[SUM_LANES];
} scalar_state_t;

/* One value through the scalar kernel, all but its exponent-field count. */
static inline __attribute__((always_inline)) void scalar_step(scalar_state_t *s, raw_t *r,
                                                              const thresholds_t *th, uint32_t u, size_t i)
{
    uint32_t a = u & ABS_MASK;
    if ((a - s->lo < s->hi - s->lo) | (a == 0)) {    /* the common case, one predictable branch */
        s->mid += a != 0;
        s->zeros += a == 0;
    } else {
        _Pragma("GCC unroll 16")
        for (int k = 0; k < NTHR; k++)
            s->lt[k] += a < th->t[k];
    }
    if (a - 1 < s->min_m1)
        s->min_m1 = a - 1;
    if (a < INF_BITS) {
        if (a > s->amax)
            s->amax = a;
        s->lane[i % SUM_LANES] += (double)fp_f32_from_bits(a);
        if (a - 1 < MANT_MASK)
            special(r, u);
    } else {
        special(r, u);
    }
}

/* Any n, any start (the caller keeps x's index from the start of the call a multiple of 16). */
void fp_hist_kernel_scalar(raw_t *r, const thresholds_t *th, const float *x, size_t n)
{
    scalar_state_t s;
    memcpy(s.lt, r->c.lt, sizeof s.lt);
    memcpy(s.lane, r->lane, sizeof s.lane);
    s.mid = s.zeros = 0;
    s.amax = r->c.amax_bits;
    s.min_m1 = r->c.min_m1;
    middle_band(th, &s.lo, &s.hi);
    size_t i = 0;
    if (n >= 256) {                                   /* long runs: 4 exponent sub-histograms */
        uint32_t sub[4][256];
        memset(sub, 0, sizeof sub);
        for (; i + 4 <= n; i += 4) {
            _Pragma("GCC unroll 4")
            for (size_t j = 0; j < 4; j++) {
                uint32_t u;
                memcpy(&u, &x[i + j], sizeof u);
                scalar_step(&s, r, th, u, i + j);
                sub[j][(u >> 23) & 0xFF]++;
            }
        }
        for (int j = 0; j < 4; j++)
            for (int b = 0; b < 256; b++)
                r->c.ehist[b] += sub[j][b];
    }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        scalar_step(&s, r, th, u, i);
        r->c.ehist[(u >> 23) & 0xFF]++;
    }
    for (int k = 0; k < NTHR; k++)
        r->c.lt[k] = s.lt[k] + s.zeros + (th->t[k] >= s.hi ? s.mid : 0);   /* every t[k] > 0 */
    memcpy(r->lane, s.lane, sizeof s.lane);
    r->c.amax_bits = s.amax;
    r->c.min_m1 = s.min_m1;
}

/* Run-time choice: __builtin_cpu_supports, so a kernel built with a target attribute is handed out
 * only where the CPU has its features. */
kernel_fn fp_hist_kernel_get(int kernel)
{
    switch (kernel) {
    case KERNEL_SCALAR:
        return fp_hist_kernel_scalar;
#ifdef HIST_X86
    case KERNEL_AVX2:
        return __builtin_cpu_supports("avx2") ? fp_hist_kernel_avx2 : NULL;
    case KERNEL_AVX512:
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2"))
            return fp_hist_kernel_avx512;
        return NULL;
    case KERNEL_BEST:
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2"))
            return fp_hist_kernel_avx512;
        if (__builtin_cpu_supports("avx2"))
            return fp_hist_kernel_avx2;
        return fp_hist_kernel_scalar;
#else
    case KERNEL_BEST:
        return fp_hist_kernel_scalar;
#endif
    default:
        return NULL;
    }
}

/* hist_counts.h: the one fold of raw counts into a histogram (CPU and CUDA kernels). */
void fp_hist_fold(fp_hist_t *h, const fp_hist_counts_t *c, uint64_t n, int k, double sum_abs)
{
    uint64_t nsub = 0;
    for (int p = 0; p < 23; p++) {
        if (c->sub_binade[p])                         /* m * 2^-149 with leading bit p: binade p-149 */
            h->binade[p - k] += c->sub_binade[p];
        nsub += c->sub_binade[p];
    }
    for (int ef = 1; ef <= 254; ef++)
        if (c->ehist[ef])
            h->binade[ef - 127 - k - FP_HIST_EXP_MIN] += c->ehist[ef];
    uint64_t zero = c->ehist[0] - nsub;
    uint64_t finite = n - c->nan - c->pos_inf - c->neg_inf;
    h->count += n;
    h->zero += zero;
    h->nan += c->nan;
    h->pos_inf += c->pos_inf;
    h->neg_inf += c->neg_inf;
    for (int f = 0; f < FP_FMT_COUNT; f++) {
        const uint64_t *lt = &c->lt[4 * f];
        h->cls[f][FP_CLASS_UNDERFLOW] += lt[0] - zero;
        h->cls[f][FP_CLASS_SUBNORMAL] += lt[1] - lt[0];
        h->cls[f][FP_CLASS_NORMAL] += lt[2] - lt[1];
        h->cls[f][FP_CLASS_ROUND_TO_MAX] += lt[3] - lt[2];
        h->cls[f][FP_CLASS_OVERFLOW] += finite - lt[3];
    }
    float amax = scale_down(fp_f32_from_bits(c->amax_bits), k);
    if (amax > h->amax)
        h->amax = amax;
    if (c->min_m1 < FIN_NZ_M1) {
        float mn = scale_down(fp_f32_from_bits(c->min_m1 + 1), k);
        if (h->min_nonzero == 0.0f || mn < h->min_nonzero)
            h->min_nonzero = mn;
    }
    h->sum_abs += sum_abs;
}

/* Add one call's raw counts to h, the values being x * 2^-k (k != 0 only when every finite nonzero
 * x * 2^-k is exact: see scaled_exact in hist_scaled.c). */
void fp_hist_finish(fp_hist_t *h, const raw_t *r, size_t n, int k)
{
    double l[SUM_LANES];
    memcpy(l, r->lane, sizeof l);
    for (int w = SUM_LANES / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++)
            l[i] += l[i + w];
    fp_hist_fold(h, &r->c, n, k, k ? ldexp(l[0], -k) : l[0]);   /* exact: every lane sum scales by 2^-k */
}

/* Raw counts of x[0..n) (index 0 = lane 0) against th, with vec for whole 16-value groups. */
void fp_hist_run_kernels(raw_t *r, const thresholds_t *th, const float *x, size_t n, kernel_fn vec)
{
    size_t done = 0;
    while (done < n) {
        size_t len = n - done < BLOCK ? n - done : BLOCK;
        size_t nv = vec == fp_hist_kernel_scalar ? 0 : len & ~(size_t)15;
        if (nv)
            vec(r, th, x + done, nv);
        if (len > nv)
            fp_hist_kernel_scalar(r, th, x + done + nv, len - nv);   /* done + nv is a multiple of 16 */
        done += len;
    }
}

void fp_hist_raw_init(raw_t *r)
{
    memset(r, 0, sizeof *r);
    r->c.min_m1 = UINT32_MAX;
}

int fp_hist_add_with(fp_hist_t *h, const float *x, size_t n, kernel_fn vec)
{
    thresholds_t th;
    raw_t r;
    fp_hist_make_thresholds(&th);
    fp_hist_raw_init(&r);
    fp_hist_run_kernels(&r, &th, x, n, vec);
    fp_hist_finish(h, &r, n, 0);
    return FP_OK;
}

/* fp_hist_add with a chosen kernel (see hist.h); unlike fp_hist_add, no small-n shortcut. */
int fp_hist_add_kernel(fp_hist_t *h, const float *x, size_t n, int kernel)
{
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "fp_hist_add: %s is NULL", h ? "array" : "histogram");
    kernel_fn k = fp_hist_kernel_get(kernel);
    if (!k)
        return fp_fail(FP_EUNAVAIL, "fp_hist_add: kernel %d is not available on this CPU", kernel);
    if (n == 0)
        return FP_OK;
    return fp_hist_add_with(h, x, n, k);
}

int fp_hist_add(fp_hist_t *h, const float *x, size_t n)
{
    if (!h || (!x && n > 0))
        return fp_fail(FP_EINVAL, "fp_hist_add: %s is NULL", h ? "array" : "histogram");
    if (n == 0)
        return FP_OK;
    return fp_hist_add_with(h, x, n, n < VEC_MIN_N ? fp_hist_kernel_scalar : fp_hist_kernel_get(KERNEL_BEST));
}

void fp_hist_init(fp_hist_t *h)
{
    if (h)
        memset(h, 0, sizeof *h);
}

void fp_hist_merge(fp_hist_t *dst, const fp_hist_t *src)
{
    if (!dst || !src)
        return;
    dst->count += src->count;
    dst->zero += src->zero;
    dst->nan += src->nan;
    dst->pos_inf += src->pos_inf;
    dst->neg_inf += src->neg_inf;
    for (int i = 0; i < FP_HIST_BINADES; i++)
        dst->binade[i] += src->binade[i];
    for (int f = 0; f < FP_FMT_COUNT; f++)
        for (int c = 0; c < FP_CLASS_COUNT; c++)
            dst->cls[f][c] += src->cls[f][c];
    if (src->amax > dst->amax)
        dst->amax = src->amax;
    if (src->min_nonzero != 0.0f && (dst->min_nonzero == 0.0f || src->min_nonzero < dst->min_nonzero))
        dst->min_nonzero = src->min_nonzero;
    dst->sum_abs += src->sum_abs;
}

uint64_t fp_hist_finite_nonzero(const fp_hist_t *h)
{
    uint64_t s = 0;
    if (!h)
        return 0;
    for (int i = 0; i < FP_HIST_BINADES; i++)
        s += h->binade[i];
    return s;
}

double fp_hist_mean_abs(const fp_hist_t *h)
{
    if (!h)
        return 0.0;
    uint64_t finite = h->zero + fp_hist_finite_nonzero(h);
    return finite ? h->sum_abs / (double)finite : 0.0;
}

const char *fp_value_class_name(fp_value_class c)
{
    switch (c) {
    case FP_CLASS_NORMAL: return "normal";
    case FP_CLASS_SUBNORMAL: return "subnormal";
    case FP_CLASS_UNDERFLOW: return "underflow";
    case FP_CLASS_ROUND_TO_MAX: return "round_to_max";
    case FP_CLASS_OVERFLOW: return "overflow";
    default: return "unknown";
    }
}

void fp_hist_thread_release(void)
{
    fp_hist_h16_release();
    fp_hist_pair_release();
}

static pthread_key_t release_key;
static int release_key_ok;
static pthread_once_t release_once = PTHREAD_ONCE_INIT;

static void release_at_exit(void *unused)
{
    (void)unused;
    fp_hist_thread_release();
}

static void make_release_key(void)
{
    release_key_ok = pthread_key_create(&release_key, release_at_exit) == 0;
}

void fp_hist_release_at_thread_exit(void)
{
    pthread_once(&release_once, make_release_key);
    if (release_key_ok)
        pthread_setspecific(release_key, &release_key);   /* any non-NULL value: the destructor runs */
}
